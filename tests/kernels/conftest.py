"""Kernel-level tests: every kernel module called directly, on every SIMD level this CPU runs.

The library imports only one SIMD level's kernels (the best, or ``--simd`` / ``CCONV_SIMD``);
these tests load each level's modules with ``cconv._simd.load(level)``, so the AVX2 and
baseline builds are exercised on an AVX-512 machine too, all in one pytest run, whatever
level the rest of the suite runs.  Every test here carries the ``kernels`` marker
(``pytest -m kernels``).

cconv is imported lazily (in the hooks and fixtures), never at module level: tests/conftest.py
fixes the library's SIMD level in ``pytest_configure``, which may run after this file loads.
"""

import numpy as np
import pytest

DTYPES = (np.float32, np.float64)
# max |error| <= RTOL * max |reference| against the float64 reference: the sums here are
# short (tens of terms), so the bounds are tighter than the suite's.
RTOL = {np.dtype(np.float32): 2e-5, np.dtype(np.float64): 1e-12}


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "kernels: kernel-level tests (packing, tile runner, Winograd transforms "
                   "against NumPy, on every SIMD level the CPU supports)")


def pytest_generate_tests(metafunc):
    """``level``: every SIMD level this CPU supports and this build has, best first."""
    if "level" in metafunc.fixturenames:
        from cconv import _simd
        metafunc.parametrize("level", _simd.available_levels())


@pytest.fixture
def kmods(level):
    """That level's kernel modules: ``.tiles`` and ``.winograd``."""
    from cconv import _simd
    return _simd.load(level)


@pytest.fixture(params=DTYPES, ids=lambda d: np.dtype(d).name)
def dtype(request):
    return np.dtype(request.param)


@pytest.fixture
def rtol(dtype):
    """Relative tolerance of kernel results against the float64 reference."""
    return RTOL[dtype]
