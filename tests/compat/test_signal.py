"""cconv.compat.signal against scipy.signal.convolve2d / correlate2d themselves.

Every comparison calls SciPy and cconv on the same arrays.  Float results must be within 1e-5
(float32 / complex64) or 1e-10 (float64 / complex128) of SciPy's relative to the largest
magnitude of SciPy's result; integer results must be equal (both are the exact sums wrapped
to the integer width).  The number of SciPy comparisons made is printed at the end of the module.
"""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ss = pytest.importorskip("scipy.signal")

from cconv.compat import signal as cs  # noqa: E402

FUNCS = ("convolve2d", "correlate2d")
MODES = ("full", "same", "valid")
BOUNDARIES = ("fill", "wrap", "symm", "pad", "circular", "symmetric")
DTYPES = (np.float32, np.float64, np.uint8, np.uint16, np.int16, np.int32, np.complex64,
          np.complex128)
EXAMPLES = 10 * settings.default.max_examples

_count = {"n": 0}


@pytest.fixture(scope="module", autouse=True)
def _report_count(request):
    yield
    plugins = request.config.pluginmanager
    reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\ntest_signal: {_count['n']} comparisons with scipy.signal")


def values(rng, shape, dtype, big=False):
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = (info.min, info.max) if big else (max(info.min, -300), min(info.max, 300))
        return rng.integers(lo, hi, shape, dtype=dtype, endpoint=True)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return (rng.standard_normal(shape) * 10).astype(dtype)


def laid_out(a, form):
    """An array equal to ``a`` with another memory layout."""
    if form == "C":
        return np.ascontiguousarray(a)
    if form == "T":
        return np.ascontiguousarray(a.T).T
    if form == "step":
        big = np.zeros((2 * a.shape[0] + 1, 3 * a.shape[1] + 2), dtype=a.dtype)
        view = big[1::2, 2::3]
        view[...] = a
        return view
    if form == "neg":
        return np.ascontiguousarray(a[::-1, ::-1])[::-1, ::-1]
    raise ValueError(form)


def assert_matches(got, want):
    _count["n"] += 1
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want)
        return
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(got), finite)
    np.testing.assert_array_equal(got[~finite], want[~finite])  # inf / nan where SciPy has them
    got, want = got[finite], want[finite]
    rtol = 1e-5 if want.dtype in (np.float32, np.complex64) else 1e-10
    scale = max(float(np.abs(want).max(initial=0.0)), 1e-30)
    err = float(np.abs(got.astype(np.complex128) - want).max(initial=0.0))
    assert err <= rtol * scale, f"max abs error {err:.3e} > {rtol:g} * {scale:.3e}"


def compare(func, a, b, *args, **kw):
    """Both libraries on the same arguments: the same exception type, or matching results."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = getattr(ss, func)(a, b, *args, **kw)
    except Exception as exc:  # noqa: BLE001 - the type is what is compared
        with pytest.raises(type(exc)):
            getattr(cs, func)(a, b, *args, **kw)
        return
    assert_matches(getattr(cs, func)(a, b, *args, **kw), want)


# -- the property ----------------------------------------------------------------------------

@st.composite
def cases(draw):
    dt1 = draw(st.sampled_from(DTYPES))
    dt2 = dt1 if draw(st.booleans()) else draw(st.sampled_from(DTYPES))
    return dict(
        func=draw(st.sampled_from(FUNCS)),
        shape1=(draw(st.integers(1, 12) | st.just(33)), draw(st.integers(1, 12))),
        shape2=(draw(st.integers(1, 9)), draw(st.integers(1, 9))),
        mode=draw(st.sampled_from(MODES)),
        boundary=draw(st.sampled_from(BOUNDARIES)),
        fillvalue=draw(st.sampled_from([0, 3, -2.5, 1.7])),
        dtypes=(dt1, dt2),
        layouts=(draw(st.sampled_from(["C", "T", "step", "neg"])),
                 draw(st.sampled_from(["C", "T", "step", "neg"]))),
        seed=draw(st.integers(0, 2**32 - 1)))


@settings(max_examples=EXAMPLES)
@given(cases())
def test_matches_scipy(c):
    rng = np.random.default_rng(c["seed"])
    a = laid_out(values(rng, c["shape1"], c["dtypes"][0]), c["layouts"][0])
    b = laid_out(values(rng, c["shape2"], c["dtypes"][1]), c["layouts"][1])
    compare(c["func"], a, b, c["mode"], c["boundary"], c["fillvalue"])


# -- hand-picked cases -------------------------------------------------------------------------

@pytest.mark.parametrize("func", FUNCS)
@pytest.mark.parametrize("boundary", ["fill", "wrap", "symm"])
@pytest.mark.parametrize("mode", MODES)
def test_even_and_odd_kernels_and_valid_swap(func, boundary, mode):
    rng = np.random.default_rng(1)
    for s1, s2 in (((6, 7), (2, 4)), ((6, 7), (3, 3)), ((2, 3), (5, 6)), ((4, 4), (4, 4)),
                   ((1, 9), (1, 3)), ((3, 2), (9, 8))):
        a = rng.standard_normal(s1)
        b = rng.standard_normal(s2)
        compare(func, a, b, mode, boundary, 0.75)


@pytest.mark.parametrize("func", FUNCS)
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
def test_large_integers_wrap_as_scipy_does(func, dtype):
    rng = np.random.default_rng(2)
    a = values(rng, (7, 8), dtype, big=True)
    b = values(rng, (3, 2), dtype, big=True)
    for mode in MODES:
        compare(func, a, b, mode)
        compare(func, a, b, mode, "symm")


@pytest.mark.parametrize("func", FUNCS)
def test_small_integers_wrap_as_scipy_does(func):
    rng = np.random.default_rng(3)
    a = values(rng, (9, 9), np.uint8, big=True)
    b = values(rng, (3, 3), np.uint8, big=True)
    compare(func, a, b, "same")
    compare(func, a, b.astype(np.int8), "full", "wrap")


@pytest.mark.parametrize("func", FUNCS)
def test_complex_fill_value(func):
    rng = np.random.default_rng(4)
    a = values(rng, (5, 6), np.complex128)
    b = values(rng, (3, 2), np.complex64)
    compare(func, a, b, "full", "fill", 1 - 2j)
    compare(func, a.real, b, "same", "fill", 0.5)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.int32])
@pytest.mark.parametrize("fillvalue", [
    1.7, np.float64(1.7), np.float32(1.7), np.int64(5), np.uint8(5), np.array(1.7),
    np.array([1.7]), np.array([5]), np.array(5, np.int16), True, 2**40, np.int8(-3), np.inf,
    np.nan, 1e300, -1, 300, 1 + 2j, [1], [], [1, 2], "a"], ids=repr)
def test_fillvalue_converts_as_in_scipy(dtype, fillvalue):
    a = np.arange(12).reshape(3, 4).astype(dtype)
    b = np.ones((2, 3), dtype)
    compare("convolve2d", a, b, "full", "fill", fillvalue)
    compare("correlate2d", a, b, "same", "fill", fillvalue)


def test_fillvalue_is_ignored_without_fill():
    a = np.arange(12.0).reshape(3, 4)
    compare("correlate2d", a, np.ones((2, 2)), "full", "wrap", "not a number")


def test_empty_arrays():
    for s1, s2, mode in (((0, 3), (2, 3), "full"), ((3, 3), (0, 3), "full"),
                         ((3, 3), (0, 3), "same"), ((3, 3), (0, 3), "valid"),
                         ((0, 3), (2, 3), "valid")):
        for func in FUNCS:
            compare(func, np.ones(s1), np.ones(s2), mode, "fill", 2.0)


def test_thread_counts_give_the_same_result():
    rng = np.random.default_rng(5)
    a = values(rng, (70, 90), np.float32)
    b = values(rng, (5, 4), np.float32)
    one = cs.correlate2d(a, b, "same", "symm", num_threads=1)
    two = cs.correlate2d(a, b, "same", "symm", num_threads=2)
    np.testing.assert_array_equal(one, two)
    assert_matches(one, ss.correlate2d(a, b, "same", "symm"))


BAD = {
    "1-D input": (np.ones(3), np.ones((2, 2)), ("full",)),
    "3-D kernel": (np.ones((3, 3)), np.ones((2, 2, 1)), ("full",)),
    "valid incomparable": (np.ones((3, 2)), np.ones((2, 3)), ("valid",)),
    "mode unknown": (np.ones((3, 3)), np.ones((2, 2)), ("bad",)),
    "boundary unknown": (np.ones((3, 3)), np.ones((2, 2)), ("full", "edge")),
    "boundary reflect": (np.ones((3, 3)), np.ones((2, 2)), ("full", "reflect")),
    "bool": (np.ones((3, 3), bool), np.ones((2, 2), bool), ("full",)),
    "float16": (np.ones((3, 3), np.float16), np.ones((2, 2), np.float16), ("full",)),
    "object": (np.ones((3, 3), object), np.ones((2, 2), object), ("full",)),
}


@pytest.mark.parametrize("func", FUNCS)
@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_arguments_raise_what_scipy_raises(func, name):
    a, b, args = BAD[name]
    with pytest.raises(Exception) as want:
        getattr(ss, func)(a, b, *args)
    with pytest.raises(want.type):
        getattr(cs, func)(a, b, *args)


def test_long_double_is_refused_with_a_type_error():
    a = np.ones((3, 3), np.longdouble)
    with pytest.raises(TypeError, match="float128|longdouble"):
        cs.convolve2d(a, a)
