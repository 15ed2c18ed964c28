"""Load the kernels built for the best SIMD level this CPU supports.

setup.py builds every templated kernel module once per instruction set (``_tiles_avx512``,
``_tiles_avx2``, ``_tiles_base``, and the same for ``_winograd`` and ``_depthwise``). At
import the best level the CPU supports is loaded; ``CCONV_SIMD=avx512|avx2|base`` forces one
(an unsupported or missing level is an ImportError rather than a crash on an illegal
instruction). The test suite runs once per level the CPU supports (``pytest --simd=LEVEL``),
so every build that ships is exercised.
"""

from __future__ import annotations

import importlib
import os
from types import SimpleNamespace
from typing import TYPE_CHECKING, List, Tuple

from ._kernels import _runtime

LEVELS = ("avx512", "avx2", "base")
# The kernel modules built per level: cconv._kernels.<stem>_<level>.
TEMPLATED = ("_tiles", "_winograd", "_depthwise", "_rows", "_pointwise", "_blocked", "_relayout",
             "_col2im")


def available_levels() -> List[str]:
    """The SIMD levels this CPU supports and this build has, best first."""
    found = []
    for level in LEVELS:
        if not _runtime.cpu_supports(level):
            continue
        try:
            load(level)
        except ImportError:  # not built on this platform (e.g. aarch64 has only "base")
            continue
        found.append(level)
    return found


def load(level: str) -> SimpleNamespace:
    """The kernel modules of one SIMD level, as attributes ``tiles`` and ``winograd``.

    Raises
    ------
    ImportError
        If ``level`` is unknown, unsupported by this CPU or not built.
    """
    if level not in LEVELS:
        raise ImportError(f"SIMD level must be one of {LEVELS}, got {level!r}")
    if not _runtime.cpu_supports(level):
        raise ImportError(f"SIMD level {level} is not supported by this CPU")
    return SimpleNamespace(**{stem.lstrip("_"): importlib.import_module(
        f"cconv._kernels.{stem}_{level}") for stem in TEMPLATED})


def _select() -> Tuple[str, SimpleNamespace]:
    forced = os.environ.get("CCONV_SIMD", "").strip().lower()
    if forced:
        if forced not in LEVELS:
            raise ImportError(f"CCONV_SIMD must be one of {LEVELS}, got {forced!r}")
        if not _runtime.cpu_supports(forced):
            raise ImportError(f"CCONV_SIMD={forced} but this CPU does not support it")
        return forced, load(forced)
    for level in LEVELS:
        if _runtime.cpu_supports(level):
            try:
                return level, load(level)
            except ImportError:
                continue
    raise ImportError("no cconv kernel module could be imported")


LEVEL, _modules = _select()
if TYPE_CHECKING:
    # Every level's module has the same interface (its stub is rendered from one template):
    # the type checker sees one of them.
    from ._kernels import (
        _blocked_base,
        _col2im_base,
        _depthwise_base,
        _pointwise_base,
        _relayout_base,
        _rows_base,
        _tiles_base,
        _winograd_base,
    )

    tiles = _tiles_base
    winograd = _winograd_base
    depthwise = _depthwise_base
    rows = _rows_base
    pointwise = _pointwise_base
    blocked = _blocked_base
    relayout = _relayout_base
    col2im = _col2im_base
else:
    tiles = _modules.tiles
    winograd = _modules.winograd
    depthwise = _modules.depthwise
    rows = _modules.rows
    pointwise = _modules.pointwise
    blocked = _modules.blocked
    relayout = _modules.relayout
    col2im = _modules.col2im
