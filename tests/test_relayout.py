"""Layout conversions (``cconv._relayout`` and its compiled transposes) against NumPy, and the
channels-last calls that go through them against the float64 reference.

The transposes must be exact (a copy, or ``alpha * x + beta * y`` per element) at every
size: whole vector blocks, partial blocks at both edges, single rows and columns, bands
split over threads.  The public calls cover the channels-last paths that convert: HWIO
weights of every pass (and the weight gradient back to HWIO), NHWC activations of the
depthwise, channel-blocked and few-channel kernels, with ``out`` / ``alpha`` / ``beta``.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cconv
from cconv import _relayout
from cconv._simd import relayout as kernels

from support.reference import (
    nchw_to_nhwc,
    nhwc_to_nchw,
    oihw_to_hwio,
    ref_backward_data,
    ref_backward_weight,
    ref_conv2d,
    resolve_padding,
)

DTYPES = (np.float32, np.float64)
TOL = {np.float32: 2e-5, np.float64: 1e-12}


def _rng(seed=0):
    return np.random.default_rng(seed)


# -- the compiled transpose ----------------------------------------------------------------

SHAPES = [(1, 1, 1), (1, 1, 37), (1, 37, 1), (2, 3, 5), (3, 16, 16), (1, 17, 33),
          (2, 64, 64), (1, 255, 257), (2, 9, 1000), (4, 130, 16), (1, 300, 8),
          (1, 513, 40)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("threads", (1, 2, 3))
def test_transpose_copies_exactly(dtype, shape, threads):
    src = _rng().standard_normal(shape).astype(dtype)
    dst = np.full((shape[0], shape[2], shape[1]), np.nan, dtype)
    kernels.transpose(src, dst, 1.0, 0.0, threads)
    np.testing.assert_array_equal(dst, src.transpose(0, 2, 1))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 17, 33), (2, 64, 48), (1, 300, 8), (3, 5, 70)])
@pytest.mark.parametrize("alpha, beta", [(0.5, 0.0), (1.0, 1.0), (-2.0, 0.25), (0.0, 3.0)])
def test_transpose_scales_and_accumulates(dtype, shape, alpha, beta):
    rng = _rng(1)
    src = rng.standard_normal(shape).astype(dtype)
    before = rng.standard_normal((shape[0], shape[2], shape[1])).astype(dtype)
    dst = before.copy()
    kernels.transpose(src, dst, alpha, beta, 2)
    expected = alpha * src.transpose(0, 2, 1).astype(np.float64) + beta * before
    np.testing.assert_allclose(dst, expected, rtol=TOL[dtype], atol=TOL[dtype])


def test_transpose_beta_zero_ignores_nan_in_dst():
    src = _rng().standard_normal((1, 40, 24)).astype(np.float32)
    dst = np.full((1, 24, 40), np.nan, np.float32)
    kernels.transpose(src, dst, 2.0, 0.0, 1)
    np.testing.assert_array_equal(dst, 2 * src.transpose(0, 2, 1))


def test_transpose_rejects_mismatched_shapes():
    src = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(ValueError, match="dst must have shape"):
        kernels.transpose(src, np.zeros((2, 3, 4), np.float32), 1.0, 0.0, 1)
    with pytest.raises(ValueError, match="num_threads"):
        kernels.transpose(src, np.zeros((2, 4, 3), np.float32), 1.0, 0.0, 0)


@settings(max_examples=60, deadline=None)
@given(batch=st.integers(1, 3), rows=st.integers(1, 140), cols=st.integers(1, 140),
       threads=st.integers(1, 3), double=st.booleans())
def test_transpose_random_shapes(batch, rows, cols, threads, double):
    dtype = np.float64 if double else np.float32
    src = _rng(rows * 1000 + cols).standard_normal((batch, rows, cols)).astype(dtype)
    dst = np.empty((batch, cols, rows), dtype)
    kernels.transpose(src, dst, 1.0, 0.0, threads)
    np.testing.assert_array_equal(dst, src.transpose(0, 2, 1))


# -- the Python helpers ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 3, 64, 128), (5, 5, 40, 96), (1, 1, 256, 64),
                                   (7, 100, 33), (2, 3, 3, 40, 50), (3, 3, 2, 2)])
def test_weight_conversions_round_trip(dtype, shape):
    w = _rng(2).standard_normal(shape).astype(dtype)
    nd = w.ndim
    first = _relayout.weight_channels_first(w, 2)
    np.testing.assert_array_equal(first, w.transpose(nd - 1, nd - 2, *range(nd - 2)))
    assert first.flags.c_contiguous
    back = _relayout.weight_channels_last(first, 2)
    np.testing.assert_array_equal(back, w)
    assert back.flags.c_contiguous


def test_weight_conversion_of_a_strided_weight():
    w = _rng(3).standard_normal((3, 3, 128, 256)).astype(np.float32)[:, :, ::2, ::2]
    np.testing.assert_array_equal(_relayout.weight_channels_first(w, 2),
                                  w.transpose(3, 2, 0, 1))


@pytest.mark.parametrize("shape", [(2, 20, 30, 48), (1, 5, 7, 9), (3, 400, 64), (2, 4, 6, 8, 40)])
def test_contiguous_and_store_of_channels_last_views(shape):
    a = _rng(4).standard_normal(shape).astype(np.float32)
    order = (0, a.ndim - 1, *range(1, a.ndim - 1))
    view = a.transpose(order)  # logical channels-first view of channels-last memory
    c = _relayout.contiguous(view, 2)
    assert c.flags.c_contiguous
    np.testing.assert_array_equal(c, view)
    before = _rng(5).standard_normal(shape).astype(np.float32)
    d = before.copy()
    if _relayout.store(d.transpose(order), c, 0.5, -1.5, 2):
        np.testing.assert_allclose(d, 0.5 * a - 1.5 * before, rtol=1e-6, atol=1e-6)
    else:  # below the compiled kernel's size: the caller copies with NumPy
        assert a.size < _relayout.MIN_ELEMENTS
        np.testing.assert_array_equal(d, before)


def test_store_declines_what_it_cannot_do():
    a = np.zeros((2, 64, 32, 32), np.float32)
    assert not _relayout.store(a, a.copy(), 1.0, 0.0, 1)  # dst is not channels-last
    nhwc = np.zeros((2, 32, 32, 64), np.float32)
    view = nhwc.transpose(0, 3, 1, 2)
    assert not _relayout.store(view, np.zeros(view.shape, np.float64), 1.0, 0.0, 1)
    assert not _relayout.store(view, np.zeros((2, 64, 32, 31), np.float32), 1.0, 0.0, 1)


# -- channels-last convolutions through the conversions ------------------------------------

# (N, C, K, H, W, R, S, stride, padding, groups): few-channel, depthwise (row and channel-
# blocked kernels), dense Winograd and direct, so that every conversion site runs.
CASES = [
    (2, 3, 32, 40, 36, 3, 3, 1, 1, 1),
    (2, 3, 16, 47, 45, 7, 7, 2, 3, 1),
    (2, 48, 48, 28, 28, 3, 3, 1, 1, 48),
    (2, 64, 64, 28, 28, 3, 3, 2, 1, 64),
    (2, 40, 40, 56, 56, 3, 3, 1, 1, 40),
    (2, 32, 48, 20, 20, 3, 3, 1, 1, 1),
    (1, 96, 128, 9, 9, 3, 3, 1, 1, 1),
]


def _case_arrays(case, dtype, seed):
    n, c, k, h, wd, r, s, stride, padding, groups = case
    rng = _rng(seed)
    x = rng.standard_normal((n, c, h, wd))
    w = rng.standard_normal((k, c // groups, r, s)) / np.sqrt(c // groups * r * s)
    pads = resolve_padding(padding, (h, wd), (r, s), stride)
    y = ref_conv2d(x, w, stride=stride, pads=pads, groups=groups)
    gy = rng.standard_normal(y.shape)
    return x.astype(dtype), w.astype(dtype), gy.astype(dtype), y, pads


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_channels_last_passes_match_reference(case, dtype):
    n, c, k, h, wd, r, s, stride, padding, groups = case
    x, w, gy, y_ref, pads = _case_arrays(case, dtype, 6)
    kw = dict(stride=stride, padding=padding, groups=groups, layout="NHWC",
              weight_layout="HWIO", num_threads=2)
    xh, wh, gyh = (np.ascontiguousarray(nchw_to_nhwc(x)), np.ascontiguousarray(oihw_to_hwio(w)),
                   np.ascontiguousarray(nchw_to_nhwc(gy)))
    tol = dict(rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)
    y = cconv.conv2d(xh, wh, **kw)
    np.testing.assert_allclose(nhwc_to_nchw(y), y_ref, **tol)
    dx = cconv.conv2d_backward_data(gyh, wh, xh.shape, **kw)
    dx_ref = ref_backward_data(gy, w, x.shape, stride=stride, pads=pads, groups=groups)
    np.testing.assert_allclose(nhwc_to_nchw(dx), dx_ref, **tol)
    dw = cconv.conv2d_backward_weight(gyh, xh, wh.shape, **kw)
    dw_ref = ref_backward_weight(gy, x, w.shape, stride=stride, pads=pads, groups=groups)
    scale = max(1.0, float(np.abs(dw_ref).max()))
    np.testing.assert_allclose(oihw_to_hwio(dw_ref), dw, rtol=tol["rtol"],
                               atol=tol["atol"] * scale)


@pytest.mark.parametrize("case", CASES[:5])
def test_channels_last_out_alpha_beta(case):
    x, w, gy, y_ref, pads = _case_arrays(case, np.float32, 7)
    n, c, k, h, wd, r, s, stride, padding, groups = case
    xh, wh = np.ascontiguousarray(nchw_to_nhwc(x)), np.ascontiguousarray(oihw_to_hwio(w))
    before = _rng(8).standard_normal(nchw_to_nhwc(y_ref).shape).astype(np.float32)
    out = before.copy()
    got = cconv.conv2d(xh, wh, stride=stride, padding=padding, groups=groups, layout="NHWC",
                       weight_layout="HWIO", out=out, alpha=0.5, beta=-2.0, num_threads=2)
    assert got is out
    np.testing.assert_allclose(out, 0.5 * nchw_to_nhwc(y_ref) - 2.0 * before, rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [8, 16, 20, 40, 64])
@pytest.mark.parametrize("alpha, beta", [(1.0, 0.0), (0.5, -2.0)])
def test_channels_last_strided_few_channel_forward_with_bias(k, dtype, alpha, beta):
    """A strided filter bank over an RGB image (ResNet-50's stem kind) stores its pixel
    vectors straight into an NHWC result: whole and partial channel vectors, bias, alpha
    and beta."""
    rng = _rng(9)
    x = rng.standard_normal((2, 3, 37, 35))
    w = rng.standard_normal((k, 3, 7, 7)) / 12
    b = rng.standard_normal(k)
    pads = resolve_padding(3, (37, 35), (7, 7), 2)
    y_ref = nchw_to_nhwc(ref_conv2d(x, w, b, stride=2, pads=pads))
    before = rng.standard_normal(y_ref.shape).astype(dtype)
    out = before.copy()
    cconv.conv2d(np.ascontiguousarray(nchw_to_nhwc(x)).astype(dtype),
                 np.ascontiguousarray(oihw_to_hwio(w)).astype(dtype), b.astype(dtype),
                 stride=2, padding=3, layout="NHWC", weight_layout="HWIO", out=out,
                 alpha=alpha, beta=beta, num_threads=2)
    np.testing.assert_allclose(out, alpha * y_ref + beta * before, rtol=TOL[dtype] * 10,
                               atol=TOL[dtype] * 10)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [8, 16, 20, 40])
@pytest.mark.parametrize("stride, padding, size", [(1, 1, 3), (2, 3, 7)])
def test_channels_last_few_channel_weight_gradient(k, stride, padding, size, dtype):
    """The few-channel weight gradient reads an NHWC output gradient's pixels as its
    vectors: whole and partial channel vectors, stride 1 and 2."""
    rng = _rng(10)
    x = rng.standard_normal((2, 3, 33, 30))
    pads = resolve_padding(padding, (33, 30), (size, size), stride)
    y_shape = ref_conv2d(x, np.zeros((k, 3, size, size)), stride=stride, pads=pads).shape
    gy = rng.standard_normal(y_shape)
    dw_ref = ref_backward_weight(gy, x, (k, 3, size, size), stride=stride, pads=pads)
    dw = cconv.conv2d_backward_weight(
        np.ascontiguousarray(nchw_to_nhwc(gy)).astype(dtype),
        np.ascontiguousarray(nchw_to_nhwc(x)).astype(dtype), (size, size, 3, k),
        stride=stride, padding=padding, layout="NHWC", weight_layout="HWIO", num_threads=2)
    scale = float(np.abs(dw_ref).max())
    np.testing.assert_allclose(dw, oihw_to_hwio(dw_ref), rtol=TOL[dtype] * 10,
                               atol=TOL[dtype] * 10 * scale)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("sliced", [False, True])
def test_winograd_reads_hwio_weights_in_place(dtype, groups, sliced):
    """Winograd takes an HWIO weight as a transposed view (no conversion): forward and data
    gradient against the reference, for contiguous and sliced weights and groups."""
    rng = _rng(11)
    x = rng.standard_normal((2, 8, 11, 13))
    w_full = rng.standard_normal((3, 3, 8 // groups, 24)) / 6
    w_hwio = w_full[:, :, :, ::2] if sliced else w_full[:, :, :, :12]
    w = w_hwio.transpose(3, 2, 0, 1)
    pads = resolve_padding(1, (11, 13), (3, 3))
    y_ref = ref_conv2d(x, w, stride=1, pads=pads, groups=groups)
    gy = rng.standard_normal(y_ref.shape)
    kw = dict(padding=1, groups=groups, weight_layout="HWIO", algo="winograd", num_threads=2)
    y = cconv.conv2d(x.astype(dtype), w_hwio.astype(dtype), **kw)
    np.testing.assert_allclose(y, y_ref, rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)
    dx = cconv.conv2d_backward_data(gy.astype(dtype), w_hwio.astype(dtype), x.shape, **kw)
    dx_ref = ref_backward_data(gy, w, x.shape, stride=1, pads=pads, groups=groups)
    np.testing.assert_allclose(dx, dx_ref, rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)


def test_winograd_hwio_weight_with_nan_falls_back_like_oihw():
    """A NaN in an HWIO weight sends the call to the direct kernel, which lands the NaN
    exactly where the OIHW call puts it."""
    rng = _rng(12)
    x = rng.standard_normal((1, 4, 9, 9)).astype(np.float32)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    w[2, 1, 0, 2] = np.nan
    kw = dict(padding=1, algo="winograd", num_threads=2)
    y_oihw = cconv.conv2d(x, w, **kw)
    y_hwio = cconv.conv2d(x, np.ascontiguousarray(oihw_to_hwio(w)), weight_layout="HWIO", **kw)
    assert np.isnan(y_oihw).any()
    np.testing.assert_array_equal(np.isnan(y_hwio), np.isnan(y_oihw))
    np.testing.assert_allclose(np.nan_to_num(y_hwio), np.nan_to_num(y_oihw), rtol=1e-5,
                               atol=1e-5)
