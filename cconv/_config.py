"""``show_config``: what this build of cconv is and what it runs on."""

import platform
import sys
from typing import Any, Dict

import numpy as np

from . import _simd
from ._kernels import _runtime
from ._threads import get_num_threads
from ._version import __version__
from .algorithms import ALGORITHMS


def show_config(print_out: bool = True) -> Dict[str, Any]:
    """Print and return the build and runtime configuration.

    Parameters
    ----------
    print_out : bool
        Print a readable summary (default True).

    Returns
    -------
    dict
        Keys: version, simd, simd_available, openmp, openmp_version, num_threads,
        build_flags, tile_rows, vector_length, python, numpy, platform.
    """

    info: Dict[str, Any] = {
        "version": __version__,
        "simd": _simd.LEVEL,
        "simd_available": [lvl for lvl in _simd.LEVELS if _runtime.cpu_supports(lvl)],
        "openmp": _runtime.have_openmp(),
        "openmp_version": _runtime.openmp_version(),
        "num_threads": get_num_threads(),
        "build_flags": _runtime.build_flags(),
        "tile_rows": _simd.tiles.TILE_ROWS,
        "vector_length": dict(_simd.tiles.VECTOR_LENGTH),
        "algorithms": list(ALGORITHMS),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "platform": platform.platform(),
    }
    if print_out:
        width = max(map(len, info))
        for key, value in info.items():
            print(f"{key:<{width}} : {value}")
        if not info["openmp"]:
            print("note: built without OpenMP; every call runs single-threaded")
    return info
