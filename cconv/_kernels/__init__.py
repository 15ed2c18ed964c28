"""cconv's compiled kernels, and how long their OpenMP threads spin between parallel regions.

An idle OpenMP worker spins before it sleeps: 300,000 spins in libgomp by default, 200 ms in
LLVM's libomp.  Spinning keeps back-to-back calls fast, but when cconv's calls alternate with
NumPy's BLAS (whose threads spin too), the two thread teams take the cores from each other: a
training loop of 2-thread convolutions and 512x512 matrix products ran 2.5 ms per step with
short spins and 13-46 ms with libgomp's default, on 2 cores (AMD EPYC Zen 4).  A sleeping
policy (``OMP_WAIT_POLICY=passive``) cured that but made a small 2-thread convolution 3.5x
slower (each region wakes its threads); 10,000 spins kept both fast (0.05 ms for that call).

So, unless ``OMP_WAIT_POLICY`` or the runtime's own setting is already set, the runtime is
loaded with ``GOMP_SPINCOUNT=10000`` (libgomp) and ``KMP_BLOCKTIME=1`` (LLVM libomp, in
milliseconds; set for macOS wheels, not measured here).  The runtime reads them once, when
it is loaded, so they are removed from the environment again right after: other libraries
(PyTorch vendors its own runtime) never see them.  A runtime that another library loaded
first keeps its own settings.
"""

import importlib as _importlib
import os as _os
from typing import Callable as _Callable

_SPIN_DEFAULTS = {"GOMP_SPINCOUNT": "10000", "KMP_BLOCKTIME": "1"}


def _import_runtime() -> None:
    # links the OpenMP runtime, which reads its settings now
    _importlib.import_module("cconv._kernels._runtime")


def _load_runtime(load: _Callable[[], None] = _import_runtime) -> None:
    """Run ``load`` with the spin defaults in the environment where the user set none."""
    added = []
    if "OMP_WAIT_POLICY" not in _os.environ:
        for name, value in _SPIN_DEFAULTS.items():
            if name not in _os.environ:
                _os.environ[name] = value
                added.append(name)
    try:
        load()
    finally:
        for name in added:
            _os.environ.pop(name, None)


_load_runtime()
