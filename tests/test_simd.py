"""The ``--simd=LEVEL`` option of tests/conftest.py: the suite runs the kernels it names."""

import os
import subprocess
import sys

import cconv
from cconv import _simd


def test_simd_level_is_the_one_requested(pytestconfig):
    requested = (pytestconfig.getoption("simd") or os.environ.get("CCONV_SIMD", ""))
    requested = requested.strip().lower()
    if requested:
        assert _simd.LEVEL == requested
    else:  # the best level this CPU and build have
        assert _simd.LEVEL == _simd.available_levels()[0]
    assert cconv.show_config()["simd"] == _simd.LEVEL
    assert _simd.tiles is _simd.load(_simd.LEVEL).tiles


def _pytest(*args):
    """This file run by a fresh pytest (cwd and PYTHONPATH: the cconv under test)."""
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(cconv.__file__)))
    env = {k: v for k, v in os.environ.items() if k != "CCONV_SIMD"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args,
                           os.path.abspath(__file__)],
                          env=env, cwd=pkg_root, capture_output=True, text=True, timeout=300)


def test_simd_option_forces_the_level_and_names_it_in_the_header():
    level = _simd.available_levels()[-1]          # the baseline: every CPU runs it
    out = _pytest(f"--simd={level}", "-k", "test_simd_level_is_the_one_requested")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"cconv SIMD level: {level} (--simd" in out.stdout, out.stdout[-3000:]
    assert "1 passed" in out.stdout


def test_simd_option_with_an_unknown_level_is_a_usage_error():
    out = _pytest("--simd=sse9", "--collect-only")
    assert out.returncode == 4, out.stdout[-3000:] + out.stderr[-3000:]   # usage error
    assert "--simd=sse9" in out.stderr and "CCONV_SIMD must be one of" in out.stderr, out.stderr
