"""The depthwise algorithm (groups == C): every pass against the float64 reference, in both
layouts and memory orders, and its determinism and NaN placement."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cconv
from cconv._geometry import make_geometry
from cconv.algorithms import REGISTRY
from support.checks import assert_close
from support.reference import (fold_reference, ref_backward_data, ref_backward_weight,
                               ref_conv2d)

# (N, C, mult, H, W, R, S, stride, dilation, pads ((top, bottom), (left, right)))
CASES = {
    "mobilenet_3x3": (2, 24, 1, 14, 14, 3, 3, (1, 1), (1, 1), ((1, 1), (1, 1))),
    "stride2": (2, 16, 1, 15, 16, 3, 3, (2, 2), (1, 1), ((1, 1), (1, 1))),
    "stride_hw": (1, 5, 1, 11, 13, 3, 5, (2, 3), (1, 1), ((0, 2), (2, 1))),
    "dilated": (2, 17, 1, 12, 10, 3, 3, (1, 1), (2, 3), ((2, 2), (3, 3))),
    "multiplier2": (2, 6, 2, 9, 8, 3, 3, (1, 1), (1, 1), ((1, 1), (1, 1))),
    "multiplier3_stride2": (1, 4, 3, 10, 9, 5, 5, (2, 2), (1, 1), ((2, 1), (0, 2))),
    "one_pixel": (3, 7, 1, 3, 3, 3, 3, (1, 1), (1, 1), ((0, 0), (0, 0))),
    "padding_only": (1, 3, 1, 1, 1, 3, 3, (1, 1), (1, 1), ((1, 1), (1, 1))),
    "1x1": (2, 33, 1, 5, 7, 1, 1, (1, 1), (1, 1), ((0, 0), (0, 0))),
    "7x7_wide": (1, 40, 1, 9, 30, 7, 7, (1, 1), (1, 1), ((3, 3), (3, 3))),
    "stride3_big": (2, 9, 1, 20, 20, 3, 3, (3, 3), (1, 1), ((1, 1), (1, 1))),
}
LAYOUTS = ["NCHW", "NHWC"]


def _operands(case, dtype, seed=0):
    N, C, m, H, W, R, S, *_ = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    w = rng.standard_normal((C * m, 1, R, S)).astype(dtype)
    return x, w


def _kw(case, layout):
    _, C, _, _, _, _, _, stride, dilation, pads = case
    return dict(stride=stride, dilation=dilation, padding=pads, groups=C, layout=layout)


def _ref_kw(case):
    _, C, _, _, _, _, _, stride, dilation, pads = case
    return dict(stride=stride, dilation=dilation, pads=pads, groups=C)


def _to(a, layout):
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)) if layout == "NHWC" else a


def _from(a, layout):
    return a.transpose(0, 3, 1, 2) if layout == "NHWC" else a


def test_registered_for_few_channels_per_group_only():
    dw = make_geometry((1, 8, 6, 6), (16, 1, 3, 3), groups=8)
    rgb = make_geometry((1, 3, 6, 6), (16, 3, 3, 3))
    grouped = make_geometry((1, 8, 6, 6), (16, 2, 3, 3), groups=4)
    dense = make_geometry((1, 8, 6, 6), (16, 8, 3, 3))
    grouped5 = make_geometry((1, 10, 6, 6), (4, 5, 3, 3), groups=2)
    for geom in (dw, rgb, grouped):
        assert REGISTRY["depthwise"].why_not(geom, "forward") is None
    for geom in (dense, grouped5):
        assert "at most 4 input channels per group" in REGISTRY["depthwise"].why_not(
            geom, "forward")
    with pytest.raises(ValueError, match="at most 4 input channels per group"):
        cconv.conv2d(np.zeros((1, 8, 6, 6), np.float32), np.zeros((16, 8, 3, 3), np.float32),
                     algo="depthwise")


# (N, C, K, groups, H, W, R, S, stride, dilation, pads): a few input channels per group
FEW_CHANNEL_CASES = [
    (2, 3, 5, 1, 13, 11, 3, 3, (1, 1), (1, 1), ((1, 1), (1, 1))),      # RGB -> 5
    (1, 3, 4, 1, 23, 21, 7, 7, (2, 2), (1, 1), ((3, 3), (3, 3))),      # conv1-like
    (2, 8, 6, 4, 9, 10, 3, 2, (1, 2), (2, 1), ((2, 0), (1, 1))),       # Cg 2, Kg 1.5 -> 6/4
    (1, 4, 4, 1, 12, 9, 5, 5, (1, 1), (1, 1), ((2, 2), (2, 2))),       # Cg 4
    (3, 6, 3, 3, 7, 7, 1, 1, (2, 2), (1, 1), ((0, 0), (0, 0))),        # 1x1, Cg 2 Kg 1
    (1, 2, 2, 1, 3, 3, 3, 3, (1, 1), (1, 1), ((0, 0), (0, 0))),        # one output pixel
]


@pytest.mark.parametrize("case", FEW_CHANNEL_CASES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_few_channels_per_group_match_reference(case, layout, dtype):
    N, C, K, groups, H, W, R, S, stride, dilation, pads = case
    if K % groups:
        K = groups * max(1, K // groups)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((N, C, H, W))
    w = rng.standard_normal((K, C // groups, R, S))
    kw = dict(stride=stride, dilation=dilation, padding=pads, groups=groups, layout=layout)
    rkw = dict(stride=stride, dilation=dilation, pads=pads, groups=groups)
    y_ref = ref_conv2d(x, w, **rkw)
    gy = rng.standard_normal(y_ref.shape)
    xl, gyl = _to(x.astype(dtype), layout), _to(gy.astype(dtype), layout)
    y = cconv.conv2d(xl, w.astype(dtype), algo="depthwise", **kw)
    assert_close(_from(y, layout), y_ref, dtype, what="forward")
    dx = cconv.conv2d_backward_data(gyl, w.astype(dtype), xl.shape, algo="depthwise", **kw)
    assert_close(_from(dx, layout), ref_backward_data(gy, w, x.shape, **rkw), dtype,
                 what="backward_data")
    dw = cconv.conv2d_backward_weight(gyl, xl, w.shape, algo="depthwise", **kw)
    assert_close(dw, ref_backward_weight(gy, x, w.shape, **rkw), dtype, what="backward_weight")
    # the same arithmetic on any thread count
    assert np.array_equal(y, cconv.conv2d(xl, w.astype(dtype), algo="depthwise", num_threads=3,
                                          **kw))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_all_passes_match_reference(name, layout, dtype, depthwise_path):
    case = CASES[name]
    x, w = _operands(case, dtype)
    b = np.linspace(-1, 1, w.shape[0]).astype(dtype)
    kw, rkw = _kw(case, layout), _ref_kw(case)
    y = cconv.conv2d(_to(x, layout), w, b, algo="depthwise", **kw)
    ref = ref_conv2d(x, w, b, **rkw)
    assert_close(_from(y, layout), ref, what="forward")
    gy = np.random.default_rng(1).standard_normal(ref.shape).astype(dtype)
    dx = cconv.conv2d_backward_data(_to(gy, layout), w, _to(x, layout).shape,
                                    algo="depthwise", **kw)
    assert_close(_from(dx, layout), ref_backward_data(gy, w, x.shape, **rkw), what="data")
    dw = cconv.conv2d_backward_weight(_to(gy, layout), _to(x, layout), w.shape,
                                      algo="depthwise", **kw)
    assert_close(dw, ref_backward_weight(gy, x, w.shape, **rkw), what="weight")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_out_alpha_beta_and_transposed(layout, depthwise_path):
    case = CASES["stride2"]
    x, w = _operands(case, np.float32)
    kw = _kw(case, layout)
    y0 = cconv.conv2d(_to(x, layout), w, algo="depthwise", **kw)
    out = np.full_like(y0, 0.5)
    res = cconv.conv2d(_to(x, layout), w, out=out, alpha=2.0, beta=-3.0, algo="depthwise", **kw)
    assert res is out
    np.testing.assert_allclose(out, 2 * y0 - 1.5, rtol=1e-5, atol=1e-5)
    nan_out = np.full_like(y0, np.nan)  # beta == 0 never reads out
    cconv.conv2d(_to(x, layout), w, out=nan_out, algo="depthwise", **kw)
    np.testing.assert_allclose(nan_out, y0, rtol=1e-6)
    # transposed convolution runs backward-data with a bias
    gy = y0
    b = np.arange(case[1], dtype=np.float32)
    t = cconv.conv_transpose2d(gy, w, b, stride=kw["stride"], padding=1, groups=case[1],
                               layout=layout, output_padding=1, algo="depthwise")
    t_direct = cconv.conv_transpose2d(gy, w, b, stride=kw["stride"], padding=1,
                                      groups=case[1], layout=layout, output_padding=1,
                                      algo="direct")
    np.testing.assert_allclose(t, t_direct, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("form", ["fortran", "sliced", "reversed"])
def test_non_contiguous_operands(form, depthwise_path):
    case = CASES["dilated"]
    x, w = _operands(case, np.float64)
    if form == "fortran":
        xv = np.asfortranarray(x)
    elif form == "sliced":
        big = np.zeros(x.shape[:3] + (2 * x.shape[3],))
        big[..., ::2] = x
        xv = big[..., ::2]
    else:
        xv = np.ascontiguousarray(x[:, :, ::-1, ::-1])[:, :, ::-1, ::-1]
    kw = _kw(case, "NCHW")
    y = cconv.conv2d(xv, w, algo="depthwise", **kw)
    assert_close(y, ref_conv2d(x, w, **_ref_kw(case)))
    gy = np.asfortranarray(np.ones_like(y))
    assert_close(cconv.conv2d_backward_weight(gy, xv, w.shape, algo="depthwise", **kw),
                 ref_backward_weight(np.ones_like(y), x, w.shape, **_ref_kw(case)))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_bitwise_identical_on_any_thread_count(layout, depthwise_path):
    case = (5, 40, 1, 17, 19, 3, 3, (2, 1), (1, 1), ((1, 1), (1, 1)))
    x, w = _operands(case, np.float32)
    kw = _kw(case, layout)
    gy = np.random.default_rng(2).standard_normal(
        cconv.conv2d(_to(x, layout), w, algo="depthwise", **kw).shape).astype(np.float32)
    results = []
    for threads in (1, 2, 3):
        results.append((
            cconv.conv2d(_to(x, layout), w, algo="depthwise", num_threads=threads, **kw),
            cconv.conv2d_backward_data(gy, w, _to(x, layout).shape, algo="depthwise",
                                       num_threads=threads, **kw),
            cconv.conv2d_backward_weight(gy, _to(x, layout), w.shape, algo="depthwise",
                                         num_threads=threads, **kw)))
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert np.array_equal(a, b)


def test_nan_stays_in_its_window(depthwise_path):
    x = np.ones((1, 3, 8, 8), np.float32)
    x[0, 1, 4, 4] = np.nan
    w = np.ones((3, 1, 3, 3), np.float32)
    y = cconv.conv2d(x, w, padding=1, groups=3, algo="depthwise")
    bad = np.argwhere(np.isnan(y))
    assert {tuple(i) for i in bad} == {(0, 1, h, v) for h in (3, 4, 5) for v in (3, 4, 5)}
    w_inf = w.copy()
    w_inf[2, 0, 0, 0] = np.inf  # the corner tap never meets padding-only outputs on row 0
    dx = cconv.conv2d_backward_data(np.ones_like(y), w_inf, x.shape, padding=1, groups=3,
                                    algo="depthwise")
    ref = cconv.conv2d_backward_data(np.ones_like(y), w_inf, x.shape, padding=1, groups=3,
                                     algo="direct")
    np.testing.assert_array_equal(np.isinf(dx), np.isinf(ref))
    assert not np.isnan(dx).any() and np.isinf(dx[0, 2]).any()


def test_auto_uses_the_depthwise_kernels_where_they_measured_faster():
    # _dispatch.DEPTHWISE_MEASUREMENTS: every pass, one-channel filter banks included
    for x_shape, w_shape, groups, stride in (((2, 1, 64, 64), (8, 1, 5, 5), 1, 1),
                                             ((2, 16, 14, 14), (16, 1, 3, 3), 16, 1),
                                             ((2, 16, 14, 14), (16, 1, 3, 3), 16, 2)):
        geom = make_geometry(x_shape, w_shape, padding=1, groups=groups, stride=stride)
        for op in ("forward", "backward_data", "backward_weight"):
            assert cconv._dispatch.heuristic(geom, op) == "depthwise"
    # _dispatch.FEW_CHANNEL_MEASUREMENTS: 2-4 channels per group at stride 1, not stride 2
    rgb = make_geometry((2, 3, 32, 32), (8, 3, 3, 3), padding=1)
    grouped4 = make_geometry((2, 16, 14, 14), (16, 4, 3, 3), padding=1, groups=4)
    for geom in (rgb, grouped4):
        for op in ("forward", "backward_data", "backward_weight"):
            assert cconv._dispatch.heuristic(geom, op) == "depthwise"
    stem = make_geometry((2, 3, 32, 32), (8, 3, 7, 7), padding=3, stride=2)
    dense = make_geometry((2, 16, 14, 14), (16, 8, 3, 3), padding=1, groups=2)
    assert cconv._dispatch.heuristic(dense, "forward") != "depthwise"
    # (the strided stem: the few-channel forward with output channels in the lanes, once
    # they fill a vector; depthwise_blocked.FEW_CHANNEL_FORWARD_MEASUREMENTS)
    wide = cconv.algorithms.depthwise_blocked.vector_length(stem) <= stem.K
    assert (cconv._dispatch.heuristic(stem, "forward") == "depthwise") == wide
    # _dispatch.FEW_CHANNEL_WEIGHT_MEASUREMENTS: a grouped few-channel weight gradient with
    # many output channels times taps per group runs on the direct kernel, with fewer on the
    # few-channel ones; one group over a few-channel image always on the few-channel
    # weight kernel (depthwise_blocked.FEW_CHANNEL_WEIGHT_MEASUREMENTS), stem included
    taps = cconv._dispatch.FEW_CHANNEL_DIRECT_WEIGHT_TAPS
    kg = -(-taps // 25)
    grouped = make_geometry((2, 6, 32, 32), (2 * kg, 3, 5, 5), padding=2, groups=2)
    assert cconv._dispatch.heuristic(grouped, "backward_weight") == "direct"
    assert cconv._dispatch.heuristic(grouped, "forward") == "depthwise"
    bank = make_geometry((2, 3, 32, 32), (kg, 3, 5, 5), padding=2)
    rgb32 = make_geometry((2, 3, 32, 32), ((taps - 1) // 9, 3, 3, 3), padding=1)
    stem64 = make_geometry((2, 3, 32, 32), (64, 3, 7, 7), padding=3, stride=2)
    for geom in (bank, rgb32, stem64):
        assert cconv._dispatch.heuristic(geom, "backward_weight") == "depthwise"


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 3), c=st.integers(1, 12), m=st.integers(1, 3), h=st.integers(1, 12),
       w=st.integers(1, 12), r=st.integers(1, 5), s=st.integers(1, 5), sh=st.integers(1, 3),
       sw=st.integers(1, 3), dh=st.integers(1, 2), dw=st.integers(1, 2),
       pads=st.lists(st.integers(0, 3), min_size=4, max_size=4),
       layout=st.sampled_from(LAYOUTS), seed=st.integers(0, 2**16))
def test_random_shapes_match_reference(n, c, m, h, w, r, s, sh, sw, dh, dw, pads, layout, seed):
    pt, pb, pl, pr = pads
    if (h + pt + pb < dh * (r - 1) + 1) or (w + pl + pr < dw * (s - 1) + 1):
        return  # no output: make_geometry rejects it (tested elsewhere)
    case = (n, c, m, h, w, r, s, (sh, sw), (dh, dw), ((pt, pb), (pl, pr)))
    x, wt = _operands(case, np.float64, seed)
    kw, rkw = _kw(case, layout), _ref_kw(case)
    y = cconv.conv2d(_to(x, layout), wt, algo="depthwise", **kw)
    ref = ref_conv2d(x, wt, **rkw)
    assert_close(_from(y, layout), ref, what="forward")
    gy = np.random.default_rng(seed + 1).standard_normal(ref.shape)
    dx = cconv.conv2d_backward_data(_to(gy, layout), wt, _to(x, layout).shape,
                                    algo="depthwise", **kw)
    assert_close(_from(dx, layout), ref_backward_data(gy, wt, x.shape, **rkw), what="data")
    dwt = cconv.conv2d_backward_weight(_to(gy, layout), _to(x, layout), wt.shape,
                                       algo="depthwise", **kw)
    assert_close(dwt, ref_backward_weight(gy, x, wt.shape, **rkw), what="weight")


# Few planes and many rows: planes are cut into bands of rows for the threads (the work is
# large enough for 5 threads, see cconv._threads).  Heights chosen so bands end mid-block,
# at the padding, and with halos crossing band edges.
BAND_CASES = [
    (1, 1, 1, 403, 257, 5, 5, (1, 1), (1, 1), ((2, 2), (2, 2))),
    (1, 1, 3, 401, 300, 5, 5, (2, 2), (1, 1), ((1, 0), (1, 1))),
    (1, 2, 1, 297, 300, 3, 3, (1, 1), (3, 2), ((3, 3), (2, 2))),
    (2, 1, 1, 340, 170, 7, 7, (3, 1), (1, 1), ((3, 2), (3, 3))),
]


@pytest.mark.parametrize("case", BAND_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_banded_planes_match_reference_on_any_thread_count(case, dtype, row_kernels):
    from cconv.algorithms.depthwise import MIN_BAND_ROWS, _NchwLayout
    N, C, m, H = case[:4]
    assert _NchwLayout.band(N * C * m, H, 1, 3, 4) < H, "the case must be cut into bands"
    assert MIN_BAND_ROWS < H
    x, w = _operands(case, dtype, seed=3)
    kw = _kw(case, "NCHW")
    y_ref = ref_conv2d(x.astype(np.float64), w.astype(np.float64), **_ref_kw(case))
    gy = np.random.default_rng(4).standard_normal(y_ref.shape).astype(dtype)
    dx_ref = ref_backward_data(gy.astype(np.float64), w.astype(np.float64), x.shape,
                               **_ref_kw(case))
    first = None
    for threads in (1, 2, 3, 5):
        y = cconv.conv2d(x, w, algo="depthwise", num_threads=threads, **kw)
        dx = cconv.conv2d_backward_data(gy, w, x.shape, algo="depthwise", num_threads=threads,
                                        **kw)
        assert_close(y, y_ref, dtype, what=f"forward, {threads} threads")
        assert_close(dx, dx_ref, dtype, what=f"backward_data, {threads} threads")
        if first is None:
            first = (y, dx)
        else:  # bands change the split, never the arithmetic
            assert np.array_equal(first[0], y) and np.array_equal(first[1], dx)


def test_nchw_kernels_refuse_padding_maps_outside_the_plane():
    """The band fills trust their row / column maps only after checking them: an index
    outside the input plane, or maps too short to hold the image, is a ValueError."""
    from cconv._simd import depthwise as kernels
    from cconv.algorithms.depthwise import DepthwiseConvolution

    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 6, 7)).astype(np.float32)
    w = rng.standard_normal((2, 1, 3, 3)).astype(np.float32)
    geom = cconv.plan_conv2d(x.shape, w.shape, padding=1, groups=2,
                             padding_mode="reflect").geometry
    algo = DepthwiseConvolution.for_geometry(geom)
    lay = algo._nchw
    band, rows, taps, size = lay.forward_band(1)
    row_src, col_src, pl, value = algo._padding
    y = np.empty((1, 2, 6, 7), np.float32)

    def run(rs, cs):
        kernels.forward_nchw(x, lay.forward_weight(w), y, np.empty(0, np.float32), taps, 2,
                             1, 1, rs, cs, pl, value, rows, lay.Wq, lay.fwd_NR, lay.fwd_NV,
                             band, 1.0, 0.0, np.empty((1, size), np.float32), 1,
                             column_rows=3 if lay.columns else 0)

    run(row_src, col_src)  # the algorithm's own maps pass
    np.testing.assert_allclose(y, cconv.conv2d(x, w, padding=1, groups=2,
                                               padding_mode="reflect"), rtol=1e-6)
    bad_row = row_src.copy()
    bad_row[0] = 6  # row 6 of a 6-row plane
    bad_col = col_src.copy()
    bad_col[-1] = -2
    for rs, cs in [(bad_row, col_src), (row_src, bad_col), (row_src, col_src[:7])]:
        with pytest.raises(ValueError):
            run(rs, cs)


def test_phase_kernel_refuses_tables_that_read_or_write_outside():
    """The stride-2 data gradient by phases trusts its tap tables only after checking them:
    a tap reading past the band buffers, a weight index outside the filter row, phases that
    do not add up, an odd band or a short scratch is a ValueError, and nothing is written."""
    from cconv._simd import depthwise as kernels
    from cconv.algorithms.depthwise import DepthwiseConvolution, _PhaseLayout

    rng = np.random.default_rng(6)
    x_shape = (2, 3, 11, 13)
    w = rng.standard_normal((3, 1, 3, 3)).astype(np.float32)
    geom = cconv.plan_conv2d(x_shape, w.shape, stride=2, padding=1, groups=3).geometry
    ph = DepthwiseConvolution.for_geometry(geom)._nchw.phases(1)
    gy = rng.standard_normal((2, 3, 6, 7)).astype(np.float32)
    wt = _PhaseLayout.weights(geom, w)

    dx = np.full(x_shape, 7.0, np.float32)

    def run(off=ph.off, widx=ph.widx, start=ph.start, band=ph.band, scratch=ph.scratch):
        kernels.backward_data_phases_nchw(gy, wt, dx, np.empty(0, np.float32), off, widx,
                                          start, 3, ph.base_h, ph.base_w, ph.rows, ph.Wb,
                                          band, 1.0, 0.0, np.empty((1, scratch), np.float32),
                                          1)
        return dx

    assert_close(run(), ref_backward_data(gy.astype(np.float64), w.astype(np.float64),
                                          x_shape, stride=2, pads=((1, 1), (1, 1)), groups=3),
                 np.float32, what="the layout's own tables")
    far = ph.off.copy()
    far[-1] = ph.rows * ph.Wb  # past the one gradient plane's buffer
    wide = ph.widx.copy()
    wide[0] = 9
    uneven = ph.start.copy()
    uneven[4] += 1
    bad = [dict(off=far), dict(off=-np.ones_like(ph.off)), dict(widx=wide),
           dict(start=uneven), dict(start=ph.start[:4].copy()), dict(band=3),
           dict(scratch=ph.scratch - 1)]
    dx[...] = 7.0
    for kw in bad:
        with pytest.raises(ValueError):
            run(**kw)
    assert (dx == 7.0).all()


# numpy.pad's name for each padding mode
NUMPY_PAD_MODES = {"zeros": "constant", "constant": "constant", "reflect": "reflect",
                   "symmetric": "symmetric", "replicate": "edge", "circular": "wrap"}


@pytest.mark.parametrize("width", [5, 7, 15, 16, 17, 31, 33, 34, 47, 64, 66, 97])
@pytest.mark.parametrize("mode", sorted(NUMPY_PAD_MODES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("left", [0, 1, 2, 3])
def test_stride2_rows_of_any_width_and_padding_mode(width, mode, dtype, left, row_kernels):
    # The NCHW kernels load a stride-2 row two vectors at a time and split it into its even
    # and odd elements, one per column phase (which phase takes which depends on the parity
    # of the left padding): widths around one and two vectors (4 to 16 lanes), the last rows
    # of the array (where whole-vector loads must stop before its end) and the padding each
    # mode builds around.
    rng = np.random.default_rng(width)
    x = rng.standard_normal((2, 3, 5, width)).astype(dtype)
    w = rng.standard_normal((3, 1, 3, 3)).astype(dtype)
    pads = ((1, 1), (left, 2))
    value = 0.5 if mode == "constant" else 0.0
    kw = dict(stride=2, padding=pads, groups=3, padding_mode=mode, algo="depthwise")
    if mode == "constant":
        kw["padding_value"] = value
    extra = {"constant_values": value} if NUMPY_PAD_MODES[mode] == "constant" else {}
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0)) + pads, mode=NUMPY_PAD_MODES[mode],
                **extra)
    y_ref = ref_conv2d(xp, w.astype(np.float64), stride=2, groups=3)
    assert_close(cconv.conv2d(x, w, **kw), y_ref, dtype, what="forward")
    gy = rng.standard_normal(y_ref.shape).astype(dtype)
    gw_ref = ref_backward_weight(gy.astype(np.float64), xp, w.shape, stride=2, groups=3)
    assert_close(cconv.conv2d_backward_weight(gy, x, w.shape, **kw), gw_ref, dtype,
                 what="backward_weight")
    # backward-data spreads the gradient out by the stride: every other band row is zero,
    # and refills of the same band (the six planes here, on one thread) keep those rows
    dx_ref = fold_reference(ref_backward_data(gy.astype(np.float64), w.astype(np.float64),
                                              xp.shape, stride=2, groups=3),
                            x.shape[2:], pads, mode)
    for threads in (1, 2):
        assert_close(cconv.conv2d_backward_data(gy, w, x.shape, num_threads=threads, **kw),
                     dx_ref, dtype, what=f"backward_data, {threads} threads")


@pytest.mark.parametrize("R, S", [(1, 1), (3, 3), (1, 13), (5, 5), (7, 7), (11, 11)])
@pytest.mark.parametrize("groups, cg", [(6, 1), (2, 3)])
def test_nchw_weight_gradient_in_tap_passes_on_any_thread_count(R, S, groups, cg, row_kernels):
    # The NCHW weight gradient sums a plane's taps in passes of up to 12 (1, 9, 13 = 7 + 6,
    # 25 = 9 + 8 + 8, 49, 121 taps), its channels split into one run per thread: every tap
    # against the reference, and the same bits on 1, 2, 3 and 5 threads (runs of 6 channels
    # that do not divide evenly).
    rng = np.random.default_rng(R * 31 + S + groups)
    x = rng.standard_normal((3, groups * cg, 2 * R + 5, 2 * S + 9))
    w_shape = (groups * 2, cg, R, S)
    pads = ((R // 2, R // 2), (S // 2, S - 1 - S // 2))
    gy = rng.standard_normal(ref_conv2d(x, np.zeros(w_shape), pads=pads, groups=groups).shape)
    expected = ref_backward_weight(gy, x, w_shape, pads=pads, groups=groups)
    for dtype in (np.float32, np.float64):
        got = [cconv.conv2d_backward_weight(gy.astype(dtype), x.astype(dtype), w_shape,
                                            padding=pads, groups=groups, algo="depthwise",
                                            layout="NCHW", num_threads=t)
               for t in (1, 2, 3, 5)]
        assert_close(got[0], expected, dtype, what="backward_weight")
        for other in got[1:]:
            assert np.array_equal(got[0], other)


@pytest.mark.parametrize("stride, dilation, pads", [
    (1, 1, ((1, 1), (1, 1))), (2, 1, ((1, 0), (0, 1))), (1, 2, ((2, 1), (3, 2))),
    ((1, 2), (2, 1), ((0, 2), (1, 1)))])
@pytest.mark.parametrize("channels", [83, 144, 5])
def test_nhwc_forward_rows_in_pixel_pairs(stride, dilation, pads, channels):
    """The NHWC forward's interior pixels go through the 3-D kernel's row (a one-deep
    volume): in blocks of ``NHWC_BLOCK`` pixels where the kernel has them (3-wide filter,
    stride 1 or 2 and dilation 1 along the row) and the rest two at a time: whole 4-vector
    channel blocks, single vectors and a scalar tail, with edges, strides, dilation, bias
    and alpha / beta, against the reference."""
    rng = np.random.default_rng(channels)
    x = rng.standard_normal((2, channels, 9, 23))
    w = rng.standard_normal((channels, 1, 3, 3))
    b = rng.standard_normal(channels)
    st = stride if isinstance(stride, tuple) else (stride, stride)
    dl = dilation if isinstance(dilation, tuple) else (dilation, dilation)
    want = ref_conv2d(np.pad(x, ((0, 0), (0, 0)) + pads), w, stride=st, dilation=dl,
                      groups=channels) + b[:, None, None]
    for dtype in (np.float32, np.float64):
        xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).astype(dtype)
        start = rng.standard_normal(want.transpose(0, 2, 3, 1).shape).astype(dtype)
        out = start.copy()
        cconv.conv2d(xh, w.astype(dtype), b.astype(dtype), stride=stride, padding=pads,
                     dilation=dilation, groups=channels, layout="NHWC", algo="depthwise",
                     out=out, alpha=0.5, beta=2.0)
        assert_close(out, 0.5 * want.transpose(0, 2, 3, 1) + 2.0 * start, dtype)


@pytest.mark.parametrize("R, S, stride, dilation, pads", [
    (3, 3, 1, 1, ((1, 1), (1, 1))), (3, 3, 2, 1, ((1, 0), (0, 1))),
    (3, 3, (1, 2), (2, 1), ((0, 2), (1, 1))), (5, 5, 1, 1, ((2, 2), (2, 2))),
    (5, 4, (2, 3), 1, ((0, 3), (2, 0))), (1, 7, 1, (1, 2), ((0, 0), (6, 6))),
    (7, 2, 3, (2, 1), ((5, 1), (0, 1))), (4, 3, 2, 1, ((0, 0), (0, 0)))])
@pytest.mark.parametrize("channels", [83, 48, 5])
def test_nhwc_weight_gradient_tap_blocks(R, S, stride, dilation, pads, channels):
    """The NHWC weight gradient sums a row's interior pixels with the taps' accumulators in
    registers, in blocks of 3x3 taps (four pixels a step at column stride 1 and 2, one
    at a time otherwise), 1x3 and single taps, and the border pixels and the channels
    after the last whole vector straight into the partial sums: filters of every block mix, rows
    whose taps leave the image at the top or bottom, against the reference and bitwise
    the same on 1, 2 and 3 threads (the jobs' rows depend on the shape only); two widths,
    so that the four-pixel steps leave no pixel and some."""
    rng = np.random.default_rng(channels + R * 10 + S)
    st_ = stride if isinstance(stride, tuple) else (stride, stride)
    dl = dilation if isinstance(dilation, tuple) else (dilation, dilation)
    for width, dtype in ((26, np.float32), (29, np.float32), (26, np.float64),
                         (29, np.float64)):
        x = rng.standard_normal((3, channels, 11, width))
        oh = (11 + sum(pads[0]) - (R - 1) * dl[0] - 1) // st_[0] + 1
        ow = (width + sum(pads[1]) - (S - 1) * dl[1] - 1) // st_[1] + 1
        gy = rng.standard_normal((3, channels, oh, ow))
        want = ref_backward_weight(gy, x, (channels, 1, R, S), stride=st_, pads=pads,
                                   dilation=dl, groups=channels)
        xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).astype(dtype)
        gh = np.ascontiguousarray(gy.transpose(0, 2, 3, 1)).astype(dtype)
        got = [cconv.conv2d_backward_weight(gh, xh, (channels, 1, R, S), stride=stride,
                                            padding=pads, dilation=dilation, groups=channels,
                                            layout="NHWC", algo="depthwise", num_threads=t)
               for t in (1, 2, 3)]
        assert_close(got[0], want, dtype, what="backward_weight")
        assert np.array_equal(got[0], got[1]) and np.array_equal(got[0], got[2])


def _at_offset(a, offset):
    """A copy of ``a`` whose data starts ``offset`` bytes past a 64-byte boundary."""
    buf = np.empty(a.nbytes + 128, np.uint8)
    start = (-buf.ctypes.data) % 64 + offset
    out = buf[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


@pytest.mark.parametrize("R, S, dilation, pads", [
    (3, 3, 1, ((1, 1), (1, 1))), (3, 3, (1, 2), ((0, 2), (2, 1))), (5, 2, 1, ((2, 0), (0, 1)))])
@pytest.mark.parametrize("channels, width", [(32, 23), (48, 6), (16, 3), (64, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nhwc_weight_gradient_same_bits_wherever_the_arrays_start(R, S, dilation, pads,
                                                                  channels, width, dtype):
    """At column stride 1 the NHWC weight gradient starts its channel vectors on the
    input's cache lines (the partial sums rotated to match, the first and last interior
    pixels' other channels added before and after the pass): the same bits for the same
    values at any offset of the input and the gradient, and the reference's values; rows
    of 1 to 21 interior pixels."""
    rng = np.random.default_rng(channels + width)
    x = rng.standard_normal((2, 7, width, channels)).astype(dtype)
    dl = dilation if isinstance(dilation, tuple) else (dilation, dilation)
    oh = (7 + sum(pads[0]) - (R - 1) * dl[0] - 1) + 1
    ow = (width + sum(pads[1]) - (S - 1) * dl[1] - 1) + 1
    gy = rng.standard_normal((2, oh, ow, channels)).astype(dtype)
    want = ref_backward_weight(gy.transpose(0, 3, 1, 2), x.transpose(0, 3, 1, 2),
                               (channels, 1, R, S), pads=pads, dilation=dl, groups=channels)
    item = np.dtype(dtype).itemsize
    results = []
    for x_at, g_at in [(0, 0), (item, 0), (16, 16), (48, 8), (32, 0)]:
        results.append(cconv.conv2d_backward_weight(
            _at_offset(gy, g_at), _at_offset(x, x_at), (channels, 1, R, S), padding=pads,
            dilation=dilation, groups=channels, layout="NHWC", algo="depthwise"))
    assert_close(results[0], want, dtype, what="backward_weight")
    for other in results[1:]:
        assert np.array_equal(results[0], other)


@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 2), groups=st.integers(1, 5), cg=st.integers(1, 3),
       kg=st.integers(1, 3), h=st.integers(1, 21), w=st.integers(1, 40), r=st.integers(1, 5),
       s=st.integers(1, 5), pads=st.lists(st.integers(0, 4), min_size=4, max_size=4),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**16))
def test_stride2_data_gradient_by_phases(n, groups, cg, kg, h, w, r, s, pads, dtype, seed):
    # At stride 2 (dilation 1, zero padding) the NCHW data gradient computes each of the
    # four row / column phases of the input gradient from its own filter taps (a phase may
    # have none: a 1x1 filter, or a padding larger than the filter) and interleaves the
    # even and odd columns; odd and even sizes, paddings of either parity, widths around
    # one and two vectors, several gradient planes per input channel, bands.
    pt, pb, pl, pr = pads
    if h + pt + pb < r or w + pl + pr < s:
        return  # no output (rejected elsewhere)
    import cconv.algorithms.depthwise as depthwise
    calls = []
    kernel = depthwise.kernels.backward_data_phases_nchw
    rng = np.random.default_rng(seed)
    C, K = groups * cg, groups * kg
    x_shape = (n, C, h, w)
    wt = rng.standard_normal((K, cg, r, s)).astype(dtype)
    oh, ow = (h + pt + pb - r) // 2 + 1, (w + pl + pr - s) // 2 + 1
    gy = rng.standard_normal((n, K, oh, ow)).astype(dtype)
    kw = dict(stride=2, padding=((pt, pb), (pl, pr)), groups=groups, algo="depthwise")
    dx_ref = ref_backward_data(gy.astype(np.float64), wt.astype(np.float64), x_shape, stride=2,
                               pads=((pt, pb), (pl, pr)), groups=groups)
    first = None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(depthwise.kernels, "backward_data_phases_nchw",
                      lambda *a, **k: calls.append(1) or kernel(*a, **k))
        patch.setattr(depthwise.blocked, "MAX_PADDED_PIXELS", 0)  # the row kernels' test
        for threads in (1, 3):
            dx = cconv.conv2d_backward_data(gy, wt, x_shape, num_threads=threads, **kw)
            assert_close(dx, dx_ref, dtype, what=f"backward_data, {threads} threads")
            first = dx if first is None else first
            assert np.array_equal(first, dx)
    # (filters up to 3x3; an axis with one output may have no stride: the geometry records
    # 1 there; larger filters keep the spread-out gradient's kernels, checked the same way)
    geom = make_geometry(x_shape, wt.shape, stride=2, padding=((pt, pb), (pl, pr)),
                         groups=groups, dtype=dtype)
    assert bool(calls) == (geom.stride == (2, 2) and r <= 3 and s <= 3)
    # the epilogue: dx = alpha * gradient + beta * dx
    start = rng.standard_normal(x_shape).astype(dtype)
    out = start.copy()
    cconv.conv2d_backward_data(gy, wt, x_shape, out=out, alpha=0.5, beta=-2.0, **kw)
    assert_close(out, 0.5 * dx_ref - 2.0 * start, dtype, what="alpha / beta")
