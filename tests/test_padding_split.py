"""A padding mode's data gradient without a second pass over the result.

Winograd writes the image's pixels of the padded input's gradient straight into the result
and only the padding's pixels into a buffer, which ``_gather.fold_ring`` then adds onto the
pixels they copy; the depthwise kernels with many taps per pixel compute the padded gradient
on the column kernel and fold it afterwards.  Checked against the float64 reference (the
padded input's gradient folded through ``numpy.pad``'s index image), and the contract of
``backward_data_split`` against the algorithm's own unsplit gradient.
"""

import numpy as np
import pytest

import cconv
from cconv import _dispatch
from cconv._kernels import _gather
from cconv.algorithms.depthwise import FOLD_AFTER_TAPS, DepthwiseConvolution
from cconv.algorithms.winograd import WinogradConvolution
from support.checks import assert_close
from support.reference import fold_reference, ref_backward_data
from support.strategies import from_layout, to_layout

MODES = ("reflect", "symmetric", "replicate", "circular", "constant")


def _reference(gy, w, x_shape, pads, mode, groups=1):
    n, c, h, wd = x_shape
    hp, wp = h + sum(pads[0]), wd + sum(pads[1])
    dxp = ref_backward_data(gy.astype(np.float64), w.astype(np.float64), (n, c, hp, wp),
                            groups=groups)
    return fold_reference(dxp, (h, wd), pads, mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("hw, pads", [((9, 8), ((1, 1), (1, 1))),
                                      ((7, 11), ((2, 1), (0, 2))),
                                      ((5, 5), ((2, 2), (2, 2))),
                                      ((2, 6), ((1, 1), (2, 0)))])
def test_winograd_data_gradient_of_each_mode(mode, layout, dtype, hw, pads):
    rng = np.random.default_rng(4)
    x_shape = (2, 6, *hw)
    w = rng.standard_normal((5, 6, 3, 3))
    oh, ow = hw[0] + sum(pads[0]) - 2, hw[1] + sum(pads[1]) - 2
    gy = rng.standard_normal((2, 5, oh, ow))
    dx = cconv.conv2d_backward_data(to_layout(gy.astype(dtype), layout), w.astype(dtype),
                                    to_layout(np.empty(x_shape), layout).shape, padding=pads,
                                    padding_mode=mode, layout=layout, algo="winograd")
    assert_close(from_layout(dx, layout), _reference(gy, w, x_shape, pads, mode), dtype)


@pytest.mark.parametrize("mode", ["reflect", "circular", "constant"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_alpha_beta_out_and_bias_on_the_split(mode, layout):
    """out = alpha * (fold + bias) + beta * out: the epilogue lands once per pixel, the
    folded padding is scaled by alpha only (transposed convolution carries the bias)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 4, 10, 9))
    w = rng.standard_normal((4, 3, 3, 3))  # conv_transpose2d: (C_in, C_out, R, S)
    b = rng.standard_normal(3)
    kw = dict(padding=1, padding_mode=mode, layout=layout)
    ref = cconv.conv_transpose2d(to_layout(x, layout), w, b, algo="direct", **kw)
    start = to_layout(rng.standard_normal(from_layout(ref, layout).shape), layout)
    out = start.copy()
    got = cconv.conv_transpose2d(to_layout(x, layout), w, b, algo="winograd", out=out,
                                 alpha=0.5, beta=-2.0, **kw)
    assert got is out
    assert_close(from_layout(out, layout), 0.5 * from_layout(ref, layout)
                 - 2.0 * from_layout(start, layout), np.float64)


def test_non_contiguous_out_takes_the_unsplit_fold():
    rng = np.random.default_rng(6)
    w = rng.standard_normal((5, 6, 3, 3)).astype(np.float32)
    gy = rng.standard_normal((2, 5, 12, 12)).astype(np.float32)
    base = np.full((2, 6, 12, 24), 7.0, np.float32)
    out = base[:, :, :, ::2]
    cconv.conv2d_backward_data(gy, w, (2, 6, 12, 12), padding=1, padding_mode="reflect",
                               algo="winograd", out=out)
    assert_close(out, _reference(gy, w, (2, 6, 12, 12), ((1, 1), (1, 1)), "reflect"),
                 np.float32)
    assert np.all(base[:, :, :, 1::2] == 7.0)  # the columns between untouched


def test_non_finite_weight_falls_back_with_nan_where_defined():
    rng = np.random.default_rng(7)
    w = rng.standard_normal((4, 3, 3, 3))
    w[1, 2, 0, 0] = np.inf
    gy = rng.standard_normal((1, 4, 8, 8))
    kw = dict(padding=1, padding_mode="replicate")
    got = cconv.conv2d_backward_data(gy, w, (1, 3, 8, 8), algo="winograd", **kw)
    want = cconv.conv2d_backward_data(gy, w, (1, 3, 8, 8), algo="direct", **kw)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    assert_close(got[finite], want[finite], np.float64)


@pytest.mark.parametrize("origin", [(0, 0), (1, 2), (2, 0)])
def test_split_contract_against_the_whole_padded_gradient(origin):
    """Window pixels: the epilogue; other pixels: the raw gradient; the ring's window is
    never written."""
    rng = np.random.default_rng(8)
    plan = cconv.plan_conv2d((2, 5, 9, 10), (4, 5, 3, 3), padding=0, dtype=np.float64)
    impl = WinogradConvolution.for_geometry(plan.geometry)
    w = rng.standard_normal((4, 5, 3, 3))
    dy = rng.standard_normal((2, 4, 7, 8))
    whole = np.empty((2, 5, 9, 10))
    impl.backward_data(dy, w, whole, 1.0, 0.0, 1)
    top, left = origin
    h, wd = 9 - top - 1, 10 - left - 2
    dx = rng.standard_normal((2, 5, h, wd))
    start = dx.copy()
    ring = np.full((2, 5, 9, 10), 123.0)
    bias = rng.standard_normal(5)
    assert impl.backward_data_split(dy, w, dx, ring, origin, 2.0, 0.5, 2, bias=bias)
    window = (slice(None), slice(None), slice(top, top + h), slice(left, left + wd))
    expected = 2.0 * (whole[window] + bias[:, None, None]) + 0.5 * start
    assert_close(dx, expected, np.float64)
    outside = np.ones((9, 10), bool)
    outside[top:top + h, left:left + wd] = False
    assert_close(ring[:, :, outside], whole[:, :, outside], np.float64)
    assert np.all(ring[:, :, ~outside] == 123.0)


def test_the_default_algorithm_declines_the_split():
    plan = cconv.plan_conv2d((1, 2, 6, 6), (2, 2, 3, 3), padding=0, algo="direct")
    impl = _dispatch.implementation(plan.geometry, "direct", "backward_data")
    dx = np.full((1, 2, 4, 4), 5.0)
    ring = np.full((1, 2, 6, 6), 5.0)
    assert not impl.backward_data_split(np.ones((1, 2, 4, 4)), np.ones((2, 2, 3, 3)), dx,
                                        ring, (1, 1), 1.0, 0.0, 1)
    assert np.all(dx == 5.0) and np.all(ring == 5.0)


def test_fold_ring_adds_only_the_padding():
    rng = np.random.default_rng(9)
    ring = rng.standard_normal((3, 6, 7, 2))
    dst = rng.standard_normal((3, 3, 4, 2))
    row_src = np.array([1, 0, 1, 2, 1, -1], np.int64)  # the image's rows are 1..3
    col_src = np.array([0, 0, 1, 2, 3, 3, 2], np.int64)  # the image's columns are 1..4
    want = dst.copy()
    for r in range(6):
        for c in range(7):
            if 1 <= r < 4 and 1 <= c < 5 or row_src[r] < 0:
                continue
            want[:, row_src[r], col_src[c]] += 0.25 * ring[:, r, c]
    _gather.fold_ring(ring, dst, row_src, col_src, 1, 1, 0.25, 2)
    np.testing.assert_allclose(dst, want, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("bad, message", [
    (dict(top=4), "does not fit"),
    (dict(left=-1), "does not fit"),
    (dict(row_src=np.array([0, 0, 1, 2, 3, 0], np.int64)), "row_src indexes"),
    (dict(col_src=np.array([0, 0, 1, 2, 3, 4, -2], np.int64)), "col_src indexes"),
    (dict(row_src=np.zeros(5, np.int64)), "do not match"),
    (dict(dst=np.zeros((2, 3, 4, 2))), "differ"),
])
def test_fold_ring_refuses_indices_outside_its_arrays(bad, message):
    args = dict(ring=np.zeros((3, 6, 7, 2)), dst=np.zeros((3, 3, 4, 2)),
                row_src=np.zeros(6, np.int64), col_src=np.zeros(7, np.int64), top=1, left=1)
    args.update(bad)
    with pytest.raises(ValueError, match=message):
        _gather.fold_ring(args["ring"], args["dst"], args["row_src"], args["col_src"],
                          args["top"], args["left"], 1.0, 1)


def test_winograd_kernel_refuses_a_window_outside_the_ring():
    rng = np.random.default_rng(10)
    plan = cconv.plan_conv2d((1, 2, 6, 6), (2, 2, 3, 3), padding=0, dtype=np.float64)
    impl = WinogradConvolution.for_geometry(plan.geometry)
    with pytest.raises(ValueError, match="window"):
        impl.backward_data_split(rng.standard_normal((1, 2, 4, 4)),
                                 rng.standard_normal((2, 2, 3, 3)), np.zeros((1, 2, 5, 5)),
                                 np.zeros((1, 2, 6, 6)), (2, 0), 1.0, 0.0, 1)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("k, r, pad", [(16, 5, 2), (32, 7, (1, 3)), (4, 5, (1, 3)), (8, 3, 1),
                                        (1, 5, 2)])
def test_many_tap_filter_banks_fold_after_the_column_kernel(mode, k, r, pad):
    """1 -> k filter banks: the padded gradient on the column kernel, folded afterwards
    (from FOLD_AFTER_TAPS taps per pixel) or by the kernel (fewer)."""
    rng = np.random.default_rng(11)
    x_shape = (2, 1, 37, 70)
    w = rng.standard_normal((k, 1, r, r))
    pads = ((pad, pad), (pad, pad)) if isinstance(pad, int) else (pad, pad)
    plan = cconv.plan_conv2d(x_shape, w.shape, padding=pads, padding_mode=mode,
                             algo="depthwise")
    impl = DepthwiseConvolution.for_geometry(plan.geometry)
    assert impl._folds_after() == (k * r * r >= FOLD_AFTER_TAPS)
    gy = rng.standard_normal(plan.output_shape)
    for dtype in (np.float32, np.float64):
        dx = cconv.conv2d_backward_data(gy.astype(dtype), w.astype(dtype), x_shape,
                                        padding=pads, padding_mode=mode, algo="depthwise")
        assert_close(dx, _reference(gy, w, x_shape, pads, mode), dtype)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("mult, stride, pads, width", [
    (1, 1, ((1, 1), (1, 1)), 56),
    (1, 2, ((1, 1), (1, 1)), 57),
    (2, 1, ((2, 0), (1, 2)), 61),
    (1, 1, ((1, 2), (2, 1)), 33),
    (1, 2, ((0, 2), (2, 0)), 50),
])
def test_depthwise_fold_on_the_column_kernel(mode, mult, stride, pads, width, row_kernels):
    """Depthwise 3x3 (multiplier 1 or 2) with a padding mode: the image's columns on the
    column kernel, the padding's pixels on the plain kernel's taps, folded by the kernel."""
    rng = np.random.default_rng(12)
    c = 6
    x_shape = (2, c, 13, width)
    w = rng.standard_normal((c * mult, 1, 3, 3))
    value = dict(padding_value=0.5) if mode == "constant" else {}
    kw = dict(stride=stride, padding=pads, groups=c, padding_mode=mode, algo="depthwise",
              **value)
    gy = rng.standard_normal(cconv.plan_conv2d(x_shape, w.shape, **kw).output_shape)
    hp, wp = 13 + sum(pads[0]), width + sum(pads[1])
    dxp = ref_backward_data(gy, w, (2, c, hp, wp), stride=(stride, stride), groups=c)
    for dtype in (np.float32, np.float64):
        impl = DepthwiseConvolution.for_geometry(
            cconv.plan_conv2d(x_shape, w.shape, dtype=dtype, **kw).geometry)
        assert not impl._folds_after()
        assert impl._nchw.folds and (impl._nchw.columns_bd or width < 48)
        start = rng.standard_normal(x_shape).astype(dtype)
        out = start.copy()
        cconv.conv2d_backward_data(gy.astype(dtype), w.astype(dtype), x_shape, out=out,
                                   alpha=1.5, beta=0.25, **kw)
        want = 1.5 * fold_reference(dxp, (13, width), pads, mode) + 0.25 * start
        assert_close(out, want, dtype)


@pytest.mark.parametrize("mode", ["reflect", "circular", "replicate"])
@pytest.mark.parametrize("channels, outputs, groups", [(3, 8, 1), (4, 6, 2), (6, 6, 6)])
def test_depthwise_padding_rows_in_the_plane_job_or_after(mode, channels, outputs, groups):
    """The NCHW kernels' padding rows: added by the job that owns a whole plane (one
    thread, or planes enough for two), or by a pass after the bands (a few planes on two
    threads split into bands of rows); the same bits either way, as the reference.  With
    several input channels per group their jobs share a band buffer, which a plane's
    padding rows overwrite."""
    rng = np.random.default_rng(13)
    w = rng.standard_normal((outputs, channels // groups, 3, 3))
    kw = dict(padding=((1, 2), (2, 1)), groups=groups, padding_mode=mode, algo="depthwise")
    x_shape = (1, channels, 21, 19)
    plan = cconv.plan_conv2d(x_shape, w.shape, **kw)
    lay = DepthwiseConvolution.for_geometry(plan.geometry)._nchw
    assert lay.folds
    assert lay.backward_data_band(1)[0] == 21 and lay.backward_data_band(2)[0] < 21
    gy = rng.standard_normal(plan.output_shape)
    whole, banded = (cconv.conv2d_backward_data(gy, w, x_shape, num_threads=t, **kw)
                     for t in (1, 2))
    np.testing.assert_array_equal(whole, banded)
    assert_close(whole, _reference(gy, w, x_shape, kw["padding"], mode, groups), np.float64)
