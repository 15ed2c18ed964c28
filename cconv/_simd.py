"""Load the tile kernels built for the best SIMD level this CPU supports.

setup.py builds ``_tiles_avx512``, ``_tiles_avx2`` and ``_tiles_base`` from one
template.  ``CCONV_SIMD=avx512|avx2|base`` forces a level (an unsupported or
missing one is an ImportError rather than a crash on an illegal instruction).
"""

import importlib
import os

from ._kernels import _runtime

LEVELS = ("avx512", "avx2", "base")


def _load():
    forced = os.environ.get("CCONV_SIMD", "").strip().lower()
    if forced:
        if forced not in LEVELS:
            raise ImportError(f"CCONV_SIMD must be one of {LEVELS}, got {forced!r}")
        if not _runtime.cpu_supports(forced):
            raise ImportError(f"CCONV_SIMD={forced} but this CPU does not support it")
        return forced, importlib.import_module(f"cconv._kernels._tiles_{forced}")
    for level in LEVELS:
        if _runtime.cpu_supports(level):
            try:
                return level, importlib.import_module(f"cconv._kernels._tiles_{level}")
            except ImportError:  # not built on this platform (e.g. aarch64)
                continue
    raise ImportError("no cconv tile kernel module could be imported")


LEVEL, tiles = _load()
