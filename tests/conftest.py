"""Shared pytest / hypothesis configuration for the cconv tests.

SIMD level (``--simd=LEVEL``)
    ``pytest --simd=avx2`` (or ``avx512``, ``base``) runs the whole suite on the kernels built
    for that instruction set: the option sets ``CCONV_SIMD`` before cconv is first imported
    (test subprocesses inherit it too).  Run the suite once per level the CPU supports
    (``cconv.show_config()["simd_available"]``) to exercise every kernel build that ships.
    A level this CPU or this build lacks stops the run with a usage error before any test
    runs.  Without the option the level is the best one available (or ``CCONV_SIMD``, if
    set).  The header of every run names the level in use.

Hypothesis profiles (choose with HYPOTHESIS_PROFILE=...; "ci" is the default):

* ci   -- 50 examples per property, no deadline; the whole tests/ directory (compat excluded)
          is meant to stay within a few minutes on a 2-core machine.
* dev  -- 10 examples, for a quick edit-run loop.
* deep -- 500 examples, for a long soak before a release.

Shared helpers (the float64 reference, strategies, comparisons) live in the ``support``
package beside this file; pyproject.toml puts tests/ on ``sys.path`` (``pythonpath``), so test
modules ``import support.<module>`` and never import each other.

This module must not import cconv at module level: the SIMD level is fixed when cconv is
first imported, and that has to happen after ``pytest_configure`` has set ``CCONV_SIMD``.
"""

import os
import sys

import pytest
from hypothesis import HealthCheck, settings

_common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                     HealthCheck.data_too_large])
settings.register_profile("ci", max_examples=50, **_common)
settings.register_profile("dev", max_examples=10, **_common)
settings.register_profile("deep", max_examples=500, **_common)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_addoption(parser):
    parser.addoption(
        "--simd", action="store", default=None, metavar="LEVEL",
        help="run cconv's kernels of this SIMD level (avx512, avx2 or base; sets CCONV_SIMD "
             "before cconv is imported); an unsupported level is a usage error")


def pytest_configure(config):
    level = (config.getoption("simd") or "").strip().lower()
    if not level:
        return
    if "cconv" in sys.modules:  # imported already (a plugin?): too late to choose the level
        loaded = getattr(sys.modules.get("cconv._simd"), "LEVEL", None)
        if loaded != level:
            raise pytest.UsageError(
                f"--simd={level}: cconv was imported before the option could take effect "
                f"(it runs {loaded!r})")
        return
    os.environ["CCONV_SIMD"] = level
    try:
        import cconv._simd
    except ImportError as exc:
        raise pytest.UsageError(
            f"--simd={level}: cconv cannot run this level here: {exc}") from exc
    if cconv._simd.LEVEL != level:  # pragma: no cover - _simd honours CCONV_SIMD or raises
        raise pytest.UsageError(f"--simd={level}: cconv loaded {cconv._simd.LEVEL} instead")


def pytest_report_header(config):
    try:
        from cconv import _simd
    except ImportError as exc:
        return f"cconv SIMD level: cconv not importable ({exc})"
    how = ("--simd" if config.getoption("simd")
           else "CCONV_SIMD" if os.environ.get("CCONV_SIMD") else "best available")
    return (f"cconv SIMD level: {_simd.LEVEL} ({how}; this CPU and build: "
            f"{', '.join(_simd.available_levels())})")


@pytest.fixture
def row_kernels(monkeypatch):
    """The NCHW depthwise geometries of the test run on the row-vector kernels (the
    channel-blocked path, taken by small planes, is off)."""
    from cconv.algorithms import depthwise_blocked
    monkeypatch.setattr(depthwise_blocked, "MAX_PADDED_PIXELS", 0)


@pytest.fixture(scope="module")
def one_row_kernels_only():
    """The 1-D row kernels run every one-row forward and data gradient of the module's
    tests: they run those with ``beta`` or with fewer than ``direct.ROW_PRODUCT_MIN_ROWS``
    result rows per group, and the tests about them reach the others too
    (tests/test_conv1d_row_product.py covers the product that takes those).  Module-scoped
    (set and restored by hand): hypothesis's examples share it."""
    from cconv.algorithms import direct
    saved = direct.ROW_PRODUCT_MIN_ROWS
    direct.ROW_PRODUCT_MIN_ROWS = 1 << 30
    yield
    direct.ROW_PRODUCT_MIN_ROWS = saved


@pytest.fixture(params=["rows", "blocked"])
def depthwise_path(request, monkeypatch):
    """Run the test once on each NCHW depthwise path: the row-vector kernels, and the
    channel-blocked ones (for every plane size)."""
    from cconv.algorithms import depthwise_blocked
    monkeypatch.setattr(depthwise_blocked, "MAX_PADDED_PIXELS",
                        0 if request.param == "rows" else 1 << 40)
    return request.param
