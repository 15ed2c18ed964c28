"""cconv.compat.ndimage against scipy.ndimage itself.

Every comparison calls SciPy and cconv on the same arrays.  float32 results must be within 1e-5
of SciPy's relative to the largest magnitude of SciPy's result (float64: 1e-10); integer and
bool results must be equal, except by one (modulo the integer width) where SciPy's float64 sum
lies within 1e-6 of an integer, where the order of summation decides the truncation.
(Where a kernel's weights cancel exactly, SciPy's float64 result can be exactly 0 while any
float32 sum leaves rounding; the property tests then measure against a tenth of the largest
magnitude an output could have.)  The number of SciPy comparisons made is printed at the end
of the module.
"""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ndi = pytest.importorskip("scipy.ndimage")

from cconv.compat import ndimage as cn  # noqa: E402
from cconv.compat._scipy_common import extend_indices  # noqa: E402

MODES = ("reflect", "mirror", "nearest", "wrap", "constant", "grid-mirror", "grid-wrap",
         "grid-constant")
DTYPES = (np.float32, np.float64, np.uint8, np.uint16, np.int16, np.int32, np.bool_)
OUT_DTYPES = DTYPES + (np.int8, np.int64, np.uint32)
EXAMPLES = 10 * settings.default.max_examples

_count = {"n": 0}


@pytest.fixture(scope="module", autouse=True)
def _report_count(request):
    yield
    plugins = request.config.pluginmanager
    reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\ntest_ndimage: {_count['n']} comparisons with scipy.ndimage")


# -- helpers ---------------------------------------------------------------------------------

def values(rng, shape, dtype):
    """Random values of ``dtype``; integers kept below 2**16 in magnitude so that SciPy's
    float64 sums carry rounding errors far below 1e-6."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind == "u":
        return rng.integers(0, min(np.iinfo(dtype).max, 65535) + 1, shape).astype(dtype)
    if dtype.kind == "i":
        top = min(np.iinfo(dtype).max, 65535)
        return rng.integers(-top, top + 1, shape).astype(dtype)
    return (rng.standard_normal(shape) * 10).astype(dtype)


def weights_of(rng, shape, kind):
    if kind == "dyadic":  # exact sums: the truncation to integers cannot depend on order
        return rng.integers(-16, 17, shape) / 8.0
    if kind == "int":
        return rng.integers(-3, 4, shape).astype(np.float64)
    return rng.standard_normal(shape)


def laid_out(a, form):
    """An array equal to ``a`` with another memory layout (a view where possible)."""
    if form == "C":
        return np.ascontiguousarray(a)
    if form == "T":
        return np.ascontiguousarray(a.T).T
    if form == "step":
        big = np.zeros(tuple(2 * n + 1 for n in a.shape), dtype=a.dtype)
        view = big[tuple(slice(1, None, 2) for _ in a.shape)]
        view[...] = a
        return view
    if form == "neg":
        flip = tuple(slice(None, None, -1) for _ in a.shape)
        return np.ascontiguousarray(a[flip])[flip]
    raise ValueError(form)


def assert_matches(got, want, sums=None, rtol=None, floor=1e-30):
    """``got`` (cconv) against ``want`` (SciPy); ``sums``: SciPy's float64 result; ``rtol``
    for float results, by default 1e-5 for float32 and 1e-10 for float64, relative to the
    largest magnitude of ``want`` or ``floor`` if larger."""
    _count["n"] += 1
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype.kind == "c":
        assert_matches(got.real, want.real, rtol=rtol, floor=floor)
        assert_matches(got.imag, want.imag, rtol=rtol, floor=floor)
        _count["n"] -= 2
        return
    if want.dtype.kind == "f":
        if rtol is None:
            rtol = 1e-5 if want.dtype == np.float32 else 1e-10
        scale = max(float(np.abs(want.astype(np.float64)).max(initial=0.0)), floor)
        err = float(np.abs(got.astype(np.float64) - want).max(initial=0.0))
        assert err <= rtol * scale, f"max abs error {err:.3e} > {rtol:g} * {scale:.3e}"
        return
    if want.dtype == np.bool_:
        got, want = got.view(np.uint8), want.view(np.uint8)
    mask = np.uint64((1 << (8 * want.dtype.itemsize)) - 1)
    wrapped = [a.astype(np.int64).astype(np.uint64) for a in (got, want)]
    diff = (wrapped[0] - wrapped[1]) & mask  # modulo the integer width
    off = diff != 0
    if not off.any():
        return
    assert sums is not None, f"{int(off.sum())} integer results differ from SciPy's"
    near = np.abs(sums - np.round(sums)) <= 1e-6
    by_one = (diff == 1) | (diff == mask)
    bad = off & ~(near & by_one)
    assert not bad.any(), (f"{int(bad.sum())} integer results differ from SciPy's: got "
                           f"{got[bad][:5]}, SciPy {want[bad][:5]}, sums {sums[bad][:5]}")


def origin_range(n):
    return st.integers(-(n // 2), (n - 1) // 2)


# -- the property: every mode, origin, dtype, layout, output form, stack ----------------------

@st.composite
def cases(draw, spatial=(1, 2)):
    n_spatial = draw(st.sampled_from(spatial))
    mode = draw(st.sampled_from(MODES))
    big, longest = ([17, 40], 9) if n_spatial < 3 else ([17], 5)  # volumes: SciPy is slow
    sizes = [draw(st.integers(1, 12) | st.sampled_from(big)) for _ in range(n_spatial)]
    # SciPy's "reflect" reads outside the image for an extension of 4 sizes or more (see
    # LONG_KERNELS): keep the kernel shorter than that for it.
    limit = ((lambda n: min(longest, 4 * n)) if mode in ("reflect", "grid-mirror")
             else (lambda n: longest))
    klens = [draw(st.integers(1, limit(n))) for n in sizes]
    n_batch = draw(st.sampled_from([0, 0, 1, 2]))
    batch = [draw(st.integers(1, 3)) for _ in range(n_batch)]
    ndim = n_spatial + n_batch
    spatial_axes = draw(st.permutations(range(ndim)))[:n_spatial]
    shape = [0] * ndim
    for ax, n in zip(spatial_axes, sizes):
        shape[ax] = n
    rest = iter(batch)
    for ax in range(ndim):
        if ax not in spatial_axes:
            shape[ax] = next(rest)
    if n_batch and draw(st.booleans()):
        axes = tuple(spatial_axes)  # weights follow sorted(axes), origins follow axes
        wshape = [klens[spatial_axes.index(ax)] for ax in sorted(spatial_axes)]
        origin_lens = klens
    else:
        axes = None  # weights for every axis, extent 1 on the batch axes
        wshape = [1] * ndim
        for ax, k in zip(spatial_axes, klens):
            wshape[ax] = k
        origin_lens = wshape
    origins = [draw(origin_range(k)) for k in origin_lens]
    origin = origins[0] if len(set(origins)) == 1 and draw(st.booleans()) else origins
    return dict(
        shape=tuple(shape), wshape=tuple(wshape), axes=axes, origin=origin, mode=mode,
        dtype=draw(st.sampled_from(DTYPES)), wkind=draw(st.sampled_from(["normal", "dyadic",
                                                                         "int"])),
        cval=draw(st.sampled_from([0.0, 1.5, -2.0, 7.0])),
        layout=draw(st.sampled_from(["C", "T", "step", "neg"])),
        output=draw(st.sampled_from(["none", "dtype", "array", "strided"])),
        out_dtype=draw(st.sampled_from(OUT_DTYPES)),
        seed=draw(st.integers(0, 2**32 - 1)))


def run_both(c, func):
    rng = np.random.default_rng(c["seed"])
    x = laid_out(values(rng, c["shape"], c["dtype"]), c["layout"])
    w = weights_of(rng, c["wshape"], c["wkind"])
    kw = dict(mode=c["mode"], cval=c["cval"], origin=c["origin"], axes=c["axes"])
    if c["output"] == "none":
        want = getattr(ndi, func)(x, w, **kw)
        got = getattr(cn, func)(x, w, **kw)
    elif c["output"] == "dtype":
        want = getattr(ndi, func)(x, w, output=c["out_dtype"], **kw)
        got = getattr(cn, func)(x, w, output=c["out_dtype"], **kw)
    else:
        form = "step" if c["output"] == "strided" else "C"
        fill = np.zeros(x.shape, c["out_dtype"])
        want_out, got_out = laid_out(fill, form), laid_out(fill.copy(), form)
        want = getattr(ndi, func)(x, w, output=want_out, **kw)
        got = getattr(cn, func)(x, w, output=got_out, **kw)
        assert got is got_out
    sums = getattr(ndi, func)(x, w, output=np.float64, **kw)
    # A kernel whose weights cancel (dyadic weights summing to 0 over a one-sample axis) gives
    # SciPy's exact float64 zeros where a float32 sum leaves rounding: such results are
    # measured against a tenth of the largest magnitude any output could have.
    largest = max(float(np.abs(x.astype(np.float64)).max()), abs(c["cval"]))
    assert_matches(got, want, sums, floor=0.1 * largest * float(np.abs(w).sum()))


@settings(max_examples=EXAMPLES)
@given(cases())
def test_correlate_matches_scipy(c):
    run_both(c, "correlate")


@settings(max_examples=EXAMPLES)
@given(cases())
def test_convolve_matches_scipy(c):
    run_both(c, "convolve")


# -- hand-picked cases -------------------------------------------------------------------------

def test_scipy_docstring_example():
    # From SciPy's documentation of ndimage.correlate: element [2, 2] is 7 + 11 + 12 + 13 + 17.
    img = np.arange(25).reshape(5, 5)
    cross = [[0, 1, 0], [1, 1, 1], [0, 1, 0]]
    expected = [[6, 10, 15, 20, 24], [26, 30, 35, 40, 44], [51, 55, 60, 65, 69],
                [76, 80, 85, 90, 94], [96, 100, 105, 110, 114]]
    got = cn.correlate(img, cross)
    assert got.dtype == img.dtype
    np.testing.assert_array_equal(got, expected)


# SciPy's "reflect" reads outside the image for an extension of 4 sizes or more (it returns
# other rows' values or garbage there), so those cases are left out for it.
LONG_KERNELS = [(mode, klen, n) for mode in MODES for klen in (2, 5, 8, 11, 17)
                for n in (1, 2, 3, 5)
                if mode not in ("reflect", "grid-mirror") or klen <= 4 * n]


@pytest.mark.parametrize("mode,klen,n", LONG_KERNELS)
def test_kernels_longer_than_the_image_extend_periodically(mode, klen, n):
    rng = np.random.default_rng(klen * 100 + n)
    x = rng.standard_normal((n, n + 1))
    w = rng.standard_normal((klen, klen - 1))
    for func in ("correlate", "convolve"):
        for origin in (0, (-(klen // 2), (klen - 2) // 2)):
            want = getattr(ndi, func)(x, w, mode=mode, cval=0.5, origin=origin)
            got = getattr(cn, func)(x, w, mode=mode, cval=0.5, origin=origin)
            assert_matches(got, want)


@pytest.mark.parametrize("func", ["correlate", "convolve"])
@pytest.mark.parametrize("even", [False, True])
def test_every_origin_of_a_kernel(func, even):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((9, 10)).astype(np.float32)
    k = 4 if even else 5
    w = rng.standard_normal((k, k + 1))
    for oy in range(-(k // 2), (k - 1) // 2 + 1):
        for ox in range(-((k + 1) // 2), k // 2 + 1):
            want = getattr(ndi, func)(x, w, mode="mirror", origin=(oy, ox))
            assert_matches(getattr(cn, func)(x, w, mode="mirror", origin=(oy, ox)), want)


@pytest.mark.parametrize("func", ["correlate", "convolve"])
def test_stack_of_images_is_one_batch(func):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 11, 3, 13)).astype(np.float32)
    w = rng.standard_normal((3, 4))
    for axes, origin in (((1, 3), (1, -2)), ((3, 1), (-2, 1)), ((-1, 1), 0)):
        want = getattr(ndi, func)(x, w, axes=axes, origin=origin, mode="wrap")
        assert_matches(getattr(cn, func)(x, w, axes=axes, origin=origin, mode="wrap"), want)
    w1 = rng.standard_normal(5)
    want = getattr(ndi, func)(x, w1, axes=(2,), mode="nearest")
    assert_matches(getattr(cn, func)(x, w1, axes=(2,), mode="nearest"), want)


@pytest.mark.parametrize("func", ["correlate", "convolve"])
def test_complex_input_weights_and_cval(func):
    rng = np.random.default_rng(7)
    xr = rng.standard_normal((6, 7))
    x = (xr + 1j * rng.standard_normal((6, 7))).astype(np.complex64)
    w = rng.standard_normal((3, 2)) - 2j * rng.standard_normal((3, 2))
    cases = [(x, w, 1 + 2j), (x, w.real, 1 - 1j), (xr, w, 0.5), (x.astype(np.complex128), w, 0)]
    for a, b, cval in cases:
        want = getattr(ndi, func)(a, b, mode="constant", cval=cval)
        assert_matches(getattr(cn, func)(a, b, mode="constant", cval=cval), want)
    with pytest.raises(ValueError):
        getattr(cn, func)(xr, w, mode="constant", cval=1j)
    with pytest.warns(UserWarning):
        got = getattr(cn, func)(x, w, output=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = getattr(ndi, func)(x, w, output=np.float64)
    # complex128 output, but SciPy's products of the imaginary parts are float32 arrays
    assert_matches(got, want, rtol=1e-5)


def test_output_sharing_memory_with_input():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((8, 9))
    want = ndi.correlate(x, [[1, 2, 3]], mode="mirror")
    got = cn.correlate(x, [[1, 2, 3]], output=x, mode="mirror")
    assert got is x
    assert_matches(got, want)


def test_out_of_range_integer_outputs_convert_as_scipy_does():
    v = np.array([3e9, -3e9, 40000.5, -1.5, 70000.7, -70000.7, 1e10, -1e10, 300.9, -129.5,
                  0.5, 2.0])
    for dtype in (np.uint8, np.int8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
                  np.bool_):
        want = ndi.correlate(v, [1.0], output=dtype)
        assert_matches(cn.correlate(v, [1.0], output=dtype), want)


def test_thread_counts_give_the_same_result():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((3, 64, 70)).astype(np.float32)
    w = rng.standard_normal((5, 4)).astype(np.float32)
    one = cn.correlate(x, w, axes=(1, 2), num_threads=1)
    two = cn.correlate(x, w, axes=(1, 2), num_threads=2)
    np.testing.assert_array_equal(one, two)
    assert_matches(one, ndi.correlate(x, w, axes=(1, 2)))


@pytest.mark.parametrize("dtype, out", [(np.uint16, None), (np.int16, np.uint8),
                                        (np.float32, np.int32), (np.uint8, np.bool_),
                                        (np.int32, np.float32)])
def test_large_images_convert_in_parallel_blocks_as_scipy_does(dtype, out):
    """Images above the parallel-conversion threshold: the input's and the result's
    conversions run in blocks on several threads; values (out-of-range wrap-arounds
    included) are SciPy's."""
    rng = np.random.default_rng(10)
    x = (rng.standard_normal((2, 700, 900)) * 3000).astype(dtype)
    w = rng.standard_normal((3, 4)) * 9
    sums = ndi.correlate(x.astype(np.float64), w, axes=(1, 2), mode="nearest")
    for threads in (1, 3):
        got = cn.correlate(x, w, output=out, axes=(1, 2), mode="nearest",
                           num_threads=threads)
        assert_matches(got, ndi.correlate(x, w, output=out, axes=(1, 2), mode="nearest"),
                       sums=sums)


def _in_strips(mp, strip_elements):
    """Make the front end convert in strips of ``strip_elements``; returns the count of
    calls that went through strips."""
    from cconv.compat import _scipy_common

    calls = {"strips": 0}
    original = _scipy_common.correlate_in_strips

    def counted(*args, **kwargs):
        done = original(*args, **kwargs)
        calls["strips"] += bool(done)
        return done

    mp.setattr(_scipy_common, "STRIP_ELEMENTS", strip_elements)
    mp.setattr(cn, "correlate_in_strips", counted)
    return calls


@settings(max_examples=EXAMPLES // 2)
@given(cases())
def test_conversions_in_strips_match_scipy(c):
    """With strips of a few rows, a conversion (integer input or output, float64 sums of
    float32) runs strip by strip, padding rows taken by index in every mode: SciPy's
    results."""
    c = dict(c, dtype=np.uint16 if c["dtype"] in (np.float32, np.float64) else c["dtype"])
    with pytest.MonkeyPatch.context() as mp:
        _in_strips(mp, 8)
        run_both(c, "correlate")


@pytest.mark.parametrize("mode", MODES)
def test_a_tall_image_converts_in_strips(mode):
    rng = np.random.default_rng(11)
    x = values(rng, (2, 41, 13), np.uint16)
    w = rng.standard_normal((7, 4))
    with pytest.MonkeyPatch.context() as mp:
        calls = _in_strips(mp, 2 * 13 * 5)  # strips of 5 rows
        got = cn.correlate(x, w, mode=mode, cval=3.5, origin=(1, -1), axes=(1, 2))
    assert calls["strips"] == 1
    assert_matches(got, ndi.correlate(x, w, mode=mode, cval=3.5, origin=(1, -1), axes=(1, 2)),
                   sums=ndi.correlate(x, w, output=np.float64, mode=mode, cval=3.5,
                                      origin=(1, -1), axes=(1, 2)))


def test_empty_input_and_empty_weights():
    for x, w in ((np.ones((0, 3)), np.ones((2, 3))), (np.arange(5.0), np.ones((3, 0))),
                 (np.array(3.0), np.array(2.0))):
        assert_matches(cn.correlate(x, w), ndi.correlate(x, w))


@settings(max_examples=EXAMPLES // 4)
@given(cases(spatial=(3,)))
def test_volumes_match_scipy(c):
    """Three filtered axes (a 3-D convolution per volume, a stack of volumes a batch)."""
    run_both(c, "correlate" if c["seed"] % 2 else "convolve")


def test_four_filtered_axes_are_not_implemented():
    x = np.ones((4, 5, 6, 3))
    with pytest.raises(NotImplementedError, match="at most three"):
        cn.correlate(x, np.ones((2, 3, 2, 2)))
    # extent-1 weight axes are not filtered: this is a 3-D filter of a stack
    assert_matches(cn.correlate(x, np.ones((2, 1, 3, 2))),
                   ndi.correlate(x, np.ones((2, 1, 3, 2))))


# -- errors: the exception SciPy raises ------------------------------------------------------

BAD = {
    "origin out of range": (np.ones((5, 5)), np.ones((3, 3)), dict(origin=2)),
    "even origin out of range": (np.ones((5, 5)), np.ones((4, 4)), dict(origin=(0, 2))),
    "origin list too long": (np.ones(5), [1, 2, 3], dict(origin=[1, 0])),
    "origin float": (np.ones(5), [1, 2, 3], dict(origin=0.5)),
    "origin bool": (np.ones(5), [1, 2, 3], dict(origin=True)),
    "weights rank": (np.ones((5, 5)), [1, 2, 3], {}),
    "weights rank with axes": (np.ones((5, 5)), [[1, 2, 3]], dict(axes=(1,))),
    "axis out of range": (np.ones((5, 5)), [1, 2, 3], dict(axes=(2,))),
    "axes repeated": (np.ones((5, 5)), np.ones((2, 2)), dict(axes=(1, 1))),
    "axes float": (np.ones((5, 5)), [1, 2], dict(axes=1.0)),
    "mode unknown": (np.ones(5), [1, 2], dict(mode="edge")),
    "mode sequence": (np.ones(5), [1, 2], dict(mode=["reflect"])),
    "cval string": (np.ones(5), [1, 2], dict(mode="constant", cval="a")),
    "cval complex": (np.ones(5), [1, 2], dict(mode="constant", cval=1j)),
    "output shape": (np.ones(5), [1, 2], dict(output=np.ones(4))),
    "output bool string": (np.ones(5), [1, 2], dict(output="bool")),
    "output float16": (np.ones(5), [1, 2], dict(output=np.float16)),
    "output complex": (np.ones(5), [1, 2], dict(output=np.complex128)),
    "input float16": (np.ones(5, np.float16), [1, 2], {}),
    "input object": (np.ones(5, object), [1, 2], {}),
    "weights strings": (np.ones(5), ["a", "b"], {}),
}


@pytest.mark.parametrize("func", ["correlate", "convolve"])
@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_arguments_raise_what_scipy_raises(func, name):
    x, w, kw = BAD[name]
    try:
        want = getattr(ndi, func)(x, w, **kw)
    except Exception as exc:  # noqa: BLE001 - the type is what is compared
        with pytest.raises(type(exc)):
            getattr(cn, func)(x, w, **kw)
    else:  # e.g. convolve negates a bool origin into an int, which SciPy then takes
        assert_matches(getattr(cn, func)(x, w, **kw), want)


def test_bad_num_threads_is_refused():
    with pytest.raises(ValueError, match="num_threads"):
        cn.correlate(np.ones((5, 5)), np.ones((3, 3)), num_threads=0)


@pytest.mark.parametrize("threads, error", [(0, ValueError), (-1, ValueError),
                                            (2.5, TypeError), (True, TypeError)])
@pytest.mark.parametrize("shape", [(1100, 1100), (3, 40, 50)])
def test_bad_num_threads_on_integer_images_is_refused(threads, error, shape):
    # Integer images are converted to floats before the core call checks the thread count
    # (in strips for a large image, whole for a stack): the conversion must not be handed a
    # bad count (a negative one made OpenMP ask for terabytes and abort the process).
    image = np.arange(np.prod(shape), dtype=np.uint16).reshape(shape)
    axes = None if len(shape) == 2 else (1, 2)
    with pytest.raises(error, match="num_threads"):
        cn.correlate(image, np.ones((5, 5)), axes=axes, num_threads=threads)


# -- the boundary index rules against numpy.pad ------------------------------------------------

@pytest.mark.parametrize("mode,np_mode", [("symmetric", "symmetric"), ("reflect", "reflect"),
                                          ("replicate", "edge"), ("circular", "wrap")])
@pytest.mark.parametrize("n", [1, 2, 3, 7])
@pytest.mark.parametrize("before,after", [(0, 0), (1, 0), (0, 5), (6, 2), (15, 22)])
def test_extension_indices_are_numpy_pad(mode, np_mode, n, before, after):
    samples = np.arange(n) * 10 + 1
    want = np.pad(samples, (before, after), mode=np_mode)
    np.testing.assert_array_equal(samples[extend_indices(n, before, after, mode)], want)
