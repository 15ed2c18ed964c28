"""The NCHW column kernels of the depthwise algorithm (filters of 3 or more rows at row stride
and dilation 1: each loaded input row feeds every output row it reaches, in a window of R
rows rolling down the band for R = 3-6, in blocks of 4 rows for taller filters) against
the float64 reference: forward and backward-data over random shapes, with partial
row blocks, partial column blocks, bands, column strides and dilations, several channels
per group, bias and the alpha / beta epilogue."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cconv
from cconv.algorithms import base, depthwise
from cconv.algorithms.depthwise import DepthwiseConvolution
from support.checks import assert_close
from support.reference import ref_backward_data, ref_conv2d

# the row-vector kernels' tests: the channel-blocked path (small planes) is off
pytestmark = pytest.mark.usefixtures("row_kernels")


@pytest.fixture(autouse=True, scope="module")
def columns_at_every_width():
    """The column kernel on every width, narrow planes included (its partial column blocks):
    by policy it runs from ``COLUMN_MIN_WIDTH_VECTORS`` vectors of output columns on.  The
    algorithms cached with the policy's layouts are dropped on both sides."""
    saved = depthwise.COLUMN_MIN_WIDTH_VECTORS, depthwise.ROLLING_MIN_WIDTH_VECTORS
    depthwise.COLUMN_MIN_WIDTH_VECTORS = depthwise.ROLLING_MIN_WIDTH_VECTORS = 0
    base._instance.cache_clear()
    yield
    depthwise.COLUMN_MIN_WIDTH_VECTORS, depthwise.ROLLING_MIN_WIDTH_VECTORS = saved
    base._instance.cache_clear()


@st.composite
def column_cases(draw):
    groups = draw(st.integers(1, 3))
    cg = draw(st.integers(1, 4))
    kg = draw(st.integers(1, 3))
    R = draw(st.integers(3, 9))
    S = draw(st.integers(1, 7))
    sw, dw = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    pads = ((draw(st.integers(0, R - 1)), draw(st.integers(0, R - 1))),
            (draw(st.integers(0, 3)), draw(st.integers(0, 3))))
    H = draw(st.integers(max(1, R - sum(pads[0])), 40))
    W = draw(st.integers(max(1, (S - 1) * dw + 1 - sum(pads[1])), 150))
    return dict(N=draw(st.integers(1, 2)), C=groups * cg, K=groups * kg, groups=groups,
                H=H, W=W, R=R, S=S, stride=(1, sw), dilation=(1, dw), pads=pads,
                dtype=draw(st.sampled_from([np.float32, np.float64])),
                threads=draw(st.sampled_from([1, 3])), seed=draw(st.integers(0, 2**16)))


def _prepared(case):
    """(the depthwise algorithm's NCHW layout, x, w, cconv's keywords, the reference's)."""
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal((case["N"], case["C"], case["H"], case["W"]))
    w = rng.standard_normal((case["K"], case["C"] // case["groups"], case["R"], case["S"]))
    kw = dict(stride=case["stride"], dilation=case["dilation"], padding=case["pads"],
              groups=case["groups"])
    geom = cconv.plan_conv2d(x.shape, w.shape, dtype=case["dtype"], **kw).geometry
    rkw = dict(stride=kw["stride"], dilation=kw["dilation"], pads=kw["padding"],
               groups=kw["groups"])
    return DepthwiseConvolution.for_geometry(geom)._nchw, x, w, kw, rkw


@settings(max_examples=60, deadline=None)
@given(column_cases())
def test_column_kernel_forward_matches_reference(case):
    layout, x, w, kw, rkw = _prepared(case)
    assert layout.columns, "the case must run on the column kernel"
    dtype = case["dtype"]
    bias = np.random.default_rng(1).standard_normal(case["K"])
    y_ref = ref_conv2d(x, w, bias, **rkw)
    y = cconv.conv2d(x.astype(dtype), w.astype(dtype), bias.astype(dtype), algo="depthwise",
                     num_threads=case["threads"], **kw)
    assert_close(y, y_ref, dtype, what="forward")
    # the epilogue: out = alpha * conv + beta * out
    out = np.random.default_rng(2).standard_normal(y_ref.shape).astype(dtype)
    expected = 0.5 * y_ref + -2.0 * out
    cconv.conv2d(x.astype(dtype), w.astype(dtype), bias.astype(dtype), algo="depthwise",
                 out=out, alpha=0.5, beta=-2.0, num_threads=case["threads"], **kw)
    assert_close(out, expected, dtype, what="forward alpha/beta")


@settings(max_examples=60, deadline=None)
@given(column_cases(), st.integers(1, 3))
def test_column_kernel_backward_data_matches_reference(case, sh):
    case = dict(case, stride=(sh, case["stride"][1]))
    layout, x, w, kw, rkw = _prepared(case)
    assert layout.columns_bd, "the case must run on the column kernel"
    dtype = case["dtype"]
    gy = np.random.default_rng(3).standard_normal(ref_conv2d(x, w, **rkw).shape)
    dx = cconv.conv2d_backward_data(gy.astype(dtype), w.astype(dtype), x.shape,
                                    algo="depthwise", num_threads=case["threads"], **kw)
    assert_close(dx, ref_backward_data(gy, w, x.shape, **rkw), dtype, what="backward_data")


def test_column_kernel_bands_do_not_change_the_arithmetic():
    """One large plane cut into bands (three threads) and whole (one thread): the same
    arithmetic, bit for bit."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 1, 301, 203)).astype(np.float32)
    w = rng.standard_normal((1, 1, 5, 5)).astype(np.float32)
    one = cconv.conv2d(x, w, padding=2, algo="depthwise", num_threads=1)
    three = cconv.conv2d(x, w, padding=2, algo="depthwise", num_threads=3)
    assert np.array_equal(one, three)
    assert_close(one, ref_conv2d(x.astype(np.float64), w.astype(np.float64),
                           pads=((2, 2), (2, 2))),
                 np.float32)


@pytest.mark.parametrize("R", range(3, 10))
@pytest.mark.parametrize("band, last", [(4, 1), (4, 3), (8, 2), (8, 7), (16, 5)])
def test_column_kernels_on_bands_around_the_filter_height(R, band, last, monkeypatch):
    """Bands of 4, 8 and 16 output rows (whole 4-row blocks), the last one 1 .. band - 1
    rows: the rolling window's first and last R - 1 input rows feed only the output rows
    inside the band, and a band shorter than the filter has no row that feeds all R."""
    monkeypatch.setattr(depthwise, "COLUMN_BAND_BYTES", 0)  # every band the least ...
    monkeypatch.setattr(depthwise, "COLUMN_MIN_BAND_ROWS", band)  # ... this many rows
    base._instance.cache_clear()
    rng = np.random.default_rng(R * 100 + band + last)
    x = rng.standard_normal((2, 2, 2 * band + last, 37))  # 'same' padding: as many rows out
    w = rng.standard_normal((2, 1, R, 4))
    pads = ((R // 2, R - 1 - R // 2), (1, 2))
    for dtype in (np.float32, np.float64):
        geom = cconv.plan_conv2d(x.shape, w.shape, dtype=dtype, padding=pads,
                                 groups=2).geometry
        layout = DepthwiseConvolution.for_geometry(geom)._nchw
        assert layout.columns and layout.columns_bd
        assert layout.forward_band(2)[0] == band and layout.backward_data_band(2)[0] == band
        y = cconv.conv2d(x.astype(dtype), w.astype(dtype), padding=pads, groups=2,
                         algo="depthwise", num_threads=2)
        assert_close(y, ref_conv2d(x, w, pads=pads, groups=2), dtype, what="forward")
        gy = rng.standard_normal(y.shape)
        dx = cconv.conv2d_backward_data(gy.astype(dtype), w.astype(dtype), x.shape,
                                        padding=pads, groups=2, algo="depthwise",
                                        num_threads=2)
        assert_close(dx, ref_backward_data(gy, w, x.shape, pads=pads, groups=2), dtype,
                     what="backward_data")
    base._instance.cache_clear()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_column_policy_keeps_narrow_planes_on_the_plain_kernel(dtype):
    """Under the policy (module fixture undone here) planes narrower than
    ``COLUMN_MIN_WIDTH_VECTORS`` vectors (``ROLLING_MIN_WIDTH_VECTORS`` for the filter heights
    this SIMD level rolls) run the plain kernel, wider ones the column kernel, for forward
    (output width) and backward-data (input width)."""
    vl = depthwise.kernels.VECTOR_LENGTH[np.dtype(dtype).name]
    saved = depthwise.COLUMN_MIN_WIDTH_VECTORS, depthwise.ROLLING_MIN_WIDTH_VECTORS
    try:
        depthwise.COLUMN_MIN_WIDTH_VECTORS, depthwise.ROLLING_MIN_WIDTH_VECTORS = 3, 1.5
        base._instance.cache_clear()
        for R in (3, 7):
            edge = math.ceil((1.5 if R in depthwise.kernels.ROLLING_ROWS else 3) * vl)
            for width, expected in ((edge - 1, False), (edge, True)):
                geom = cconv.plan_conv2d((1, 8, 16, width), (8, 1, R, 3), groups=8,
                                         padding=(R // 2, 1), dtype=dtype).geometry
                layout = DepthwiseConvolution.for_geometry(geom)._nchw  # OW = W
                assert layout.columns is expected and layout.columns_bd is expected, (R, width)
    finally:
        depthwise.COLUMN_MIN_WIDTH_VECTORS, depthwise.ROLLING_MIN_WIDTH_VECTORS = saved
        base._instance.cache_clear()


@pytest.mark.parametrize("width", [97, 128, 130, 263])
@pytest.mark.parametrize("kernel, dilation", [((3, 3), 1), ((5, 5), 1), ((7, 3), 1),
                                              ((3, 7), 2)])
@pytest.mark.parametrize("mode", ["zeros", "reflect", "circular"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_banded_single_channel_planes_match_reference(width, kernel, dilation, mode, dtype):
    # One channel per group, planes cut into bands (more of them on more threads): widths
    # around the column block, row-only and column-dilated kernels, padding rows built by
    # each mode at the first and last band; every thread count gives the same bits.
    from cconv.algorithms.depthwise import _NchwLayout
    R, S = kernel
    H = 70
    assert _NchwLayout.band(1, H, 4, 2, width * 4, columns=True) < H, "must be cut into bands"
    rng = np.random.default_rng(width + R * 10 + S)
    x = rng.standard_normal((1, 2, H, width)).astype(dtype)
    w = rng.standard_normal((2, 1, R, S)).astype(dtype)
    pads = ((R // 2, R - 1 - R // 2), (dilation * (S - 1) // 2 + 1, dilation * (S - 1) // 2))
    numpy_mode = {"zeros": "constant", "reflect": "reflect", "circular": "wrap"}[mode]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0)) + pads, mode=numpy_mode)
    want = ref_conv2d(xp, w.astype(np.float64), dilation=(1, dilation), groups=2)
    first = None
    for threads in (1, 2, 3):
        got = cconv.conv2d(x, w, padding=pads, dilation=(1, dilation), groups=2,
                           padding_mode=mode, algo="depthwise", num_threads=threads)
        assert_close(got, want, dtype, what=f"{threads} threads")
        if first is None:
            first = got
        else:  # the split into bands never changes the arithmetic
            assert np.array_equal(first, got)


def _aligned_nan(shape, dtype, offset_bytes):
    """A NaN-filled array whose data starts ``offset_bytes`` past a 64-byte boundary."""
    itemsize = np.dtype(dtype).itemsize
    count = math.prod(shape)
    raw = np.empty(count + 128 // itemsize, dtype)
    start = (-raw.ctypes.data % 64 + offset_bytes) // itemsize
    out = raw[start:start + count].reshape(shape)
    out[...] = np.nan
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("R, width, offset, beta", [
    (3, 64, 0, 0.0),    # rows of whole vectors on vector boundaries: non-temporal stores
    (5, 96, 0, 0.0),
    (4, 40, 0, 0.0),    # rows not whole vectors (float32): plain stores, same sums
    (3, 64, 16, 0.0),   # a result off the vector boundary: plain stores
    (3, 64, 0, 0.5),    # beta reads the result: plain stores
])
def test_streamed_results_match_the_plain_ones(monkeypatch, dtype, R, width, offset, beta):
    # Every result large enough to stream (threshold 0) against none (threshold huge): the
    # same bits, and the reference; the output starts as NaN so a row the streamed stores
    # missed shows.
    rng = np.random.default_rng(R * width + offset)
    x = rng.standard_normal((2, 3, 9, width)).astype(dtype)
    w = rng.standard_normal((3, 1, R, 3)).astype(dtype)
    bias = rng.standard_normal(3).astype(dtype)
    y0 = rng.standard_normal((2, 3, 9, width)).astype(dtype)
    pads = (((R - 1) // 2, R // 2), (1, 1))
    kw = dict(padding=pads, groups=3, algo="depthwise", bias=bias)
    results = []
    for threshold in (1 << 62, 0):
        monkeypatch.setattr(depthwise, "STREAM_RESULT_BYTES", threshold)
        out = _aligned_nan(y0.shape, dtype, offset)
        if beta:
            out[...] = y0
        for nthreads in (1, 3):
            if beta:
                out[...] = y0
            cconv.conv2d(x, w, out=out, alpha=2.0, beta=beta, num_threads=nthreads, **kw)
            results.append(out.copy())
    want = 2.0 * ref_conv2d(x, w, bias, pads=pads, groups=3)
    if beta:
        want = want + beta * y0
    for got in results:
        assert_close(got, want, dtype)
    assert all(np.array_equal(results[0], r) for r in results[1:])
