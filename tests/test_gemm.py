"""The GEMM algorithm (algo="gemm") on its direct path: unpadded 1x1 convolutions (any
stride, groups, layout) as plain BLAS products, against the reference.  Every other shape
(chunked im2col) is tested in test_gemm_any_shape.py."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

import cconv
from support.reference import ref_backward_data, ref_backward_weight, ref_conv2d


def _close(got, want, dtype):
    scale = max(1.0, float(np.abs(want).max()))
    tol = 1e-4 if dtype == np.float32 else 1e-10
    assert np.abs(np.asarray(got, np.float64) - want).max() <= tol * scale


@st.composite
def gemm_cases(draw):
    groups = draw(st.integers(1, 3))
    cg, kg = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    n, h, w = draw(st.integers(1, 3)), draw(st.integers(1, 9)), draw(st.integers(1, 9))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    layout = draw(st.sampled_from(["NCHW", "NHWC"]))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    return (n, groups * cg, h, w, groups * kg, groups, dtype, layout, stride,
            draw(st.integers(0, 2**31)))


def _to(layout, a):
    return a if layout == "NCHW" else np.ascontiguousarray(a.transpose(0, 2, 3, 1))


@given(gemm_cases())
def test_gemm_matches_reference_on_all_passes(case):
    n, c, h, w, k, groups, dtype, layout, stride, seed = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    wt = rng.standard_normal((k, c // groups, 1, 1)).astype(dtype)
    b = rng.standard_normal(k).astype(dtype)
    ref = ref_conv2d(x, wt, b, stride=stride, groups=groups)
    gy = rng.standard_normal(ref.shape).astype(dtype)
    kw = dict(groups=groups, layout=layout, stride=stride, algo="gemm")
    rkw = dict(groups=groups, stride=stride)
    _close(cconv.conv2d(_to(layout, x), wt, b, **kw), _to(layout, ref), dtype)
    _close(cconv.conv2d_backward_data(_to(layout, gy), wt, _to(layout, x).shape, **kw),
           _to(layout, ref_backward_data(gy, wt, x.shape, **rkw)), dtype)
    _close(cconv.conv2d_backward_weight(_to(layout, gy), _to(layout, x), wt.shape, **kw),
           ref_backward_weight(gy, x, wt.shape, **rkw), dtype)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("shape,dtype", [((3, 48, 20, 20, 40), np.float32),
                                         ((2, 1024, 14, 14, 64), np.float64),
                                         ((1, 256, 56, 56, 64), np.float32)])
def test_gemm_bitwise_identical_on_any_thread_count(layout, shape, dtype):
    # the float64 1024-channel case differed between 1 and 2 threads of a threaded BLAS
    n, c, h, w, k = shape
    rng = np.random.default_rng(3)
    x = _to(layout, rng.standard_normal((n, c, h, w)).astype(dtype))
    wt = rng.standard_normal((k, c, 1, 1)).astype(dtype)
    gy = _to(layout, rng.standard_normal((n, k, h, w)).astype(dtype))
    kw = dict(layout=layout, algo="gemm")
    runs = [(cconv.conv2d(x, wt, num_threads=t, **kw),
             cconv.conv2d_backward_data(gy, wt, x.shape, num_threads=t, **kw),
             cconv.conv2d_backward_weight(gy, x, wt.shape, num_threads=t, **kw))
            for t in (1, 2, 3)]
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            assert np.array_equal(a, b)


def test_gemm_leaves_the_blas_thread_count_as_it_was():
    from threadpoolctl import threadpool_info
    before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    x = np.ones((1, 8, 4, 4), np.float32)
    cconv.conv2d(x, np.ones((4, 8, 1, 1), np.float32), algo="gemm", num_threads=1)
    after = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    assert before == after


@pytest.mark.parametrize("beta", [0.0, 1.5])
def test_gemm_out_alpha_beta_in_place(beta):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 16, 8, 8)).astype(np.float32)   # 64 pixels: the in-place path
    wt = rng.standard_normal((24, 16, 1, 1)).astype(np.float32)
    out = rng.standard_normal((2, 24, 8, 8)).astype(np.float32)
    old = out.copy()
    if beta == 0:
        out[0, 0, 0, 0] = np.nan  # beta == 0 never reads out
    res = cconv.conv2d(x, wt, algo="gemm", out=out, alpha=0.5, beta=beta)
    assert res is out
    _close(out, 0.5 * ref_conv2d(x, wt) + beta * old, np.float32)


@pytest.mark.parametrize("w_shape, kw", [((3, 2, 1, 1), dict(padding=1)),
                                         ((3, 2, 3, 3), dict()),
                                         ((4, 1, 2, 2), dict(groups=2, dilation=2))])
def test_gemm_runs_shapes_beyond_unpadded_1x1(w_shape, kw):
    from cconv._geometry import make_geometry
    from cconv.algorithms.gemm import pointwise
    x = np.random.default_rng(2).standard_normal((1, 2, 6, 6))
    w = np.random.default_rng(3).standard_normal(w_shape)
    geom = make_geometry(x.shape, w.shape, **kw)
    assert not pointwise(geom)
    assert cconv.algorithms.REGISTRY["gemm"].why_not(geom, "forward") is None
    pads = ((kw.get("padding", 0),) * 2,) * 2
    want = ref_conv2d(x, w, pads=pads, dilation=kw.get("dilation", 1),
                      groups=kw.get("groups", 1))
    _close(cconv.conv2d(x, w, algo="gemm", **kw), want, np.float64)


def test_auto_uses_gemm_for_unpadded_1x1_layers():
    # _dispatch.GEMM_MEASUREMENTS
    from cconv._geometry import make_geometry
    for stride in (1, 2):
        geom = make_geometry((2, 64, 14, 14), (32, 64, 1, 1), stride=stride)
        for op in ("forward", "backward_data", "backward_weight"):
            assert cconv._dispatch.heuristic(geom, op) == "gemm"
    # gemm runs every shape, but auto keeps it to the shapes it was measured on
    padded = make_geometry((2, 64, 14, 14), (32, 64, 1, 1), padding=1)
    assert cconv._dispatch.heuristic(padded, "forward") == "direct"
    three = make_geometry((2, 8, 14, 14), (8, 8, 3, 3), padding=1)
    for op in ("forward", "backward_data", "backward_weight"):
        assert cconv._dispatch.heuristic(three, op) != "gemm"


def test_auto_uses_gemm_for_the_data_gradient_of_strided_few_channel_layers():
    # _dispatch.STRIDED_FEW_CHANNEL_GRAD_MEASUREMENTS: ResNet-50's stem and an RGB stride-2
    # layer with many outputs; with few outputs times taps at stride 2 the few-channel
    # kernels (STRIDED_FEW_CHANNEL_DEPTHWISE_MEASUREMENTS), and GEMM again at stride 3
    from cconv import _dispatch
    from cconv._geometry import make_geometry
    from cconv.algorithms import depthwise_blocked

    taps = _dispatch.STRIDED_FEW_CHANNEL_DEPTHWISE_TAPS
    stem = make_geometry((2, 3, 32, 32), (16, 3, 7, 7), stride=2, padding=3)
    many = make_geometry((2, 3, 16, 16), (taps // 9 + 1, 3, 3, 3), stride=2, padding=1)
    rgb = make_geometry((2, 3, 16, 16), (taps // 9, 3, 3, 3), stride=2, padding=1)
    rgb3 = make_geometry((2, 3, 16, 16), (8, 3, 3, 3), stride=3, padding=1)
    for geom in (stem, many, rgb, rgb3):
        assert _dispatch.heuristic(geom, "backward_data") == ("depthwise" if geom is rgb
                                                              else "gemm")
        # (a filter bank over a few-channel image: the strided forward and the weight
        # gradient with output channels in the lanes, from a vector of them on)
        vl = depthwise_blocked.vector_length(geom)
        for op in ("forward", "backward_weight"):
            assert _dispatch.heuristic(geom, op) == ("depthwise" if geom.K >= vl
                                                     else "direct")
    wide = make_geometry((2, 16, 16, 16), (8, 16, 3, 3), stride=2, padding=1)
    unstrided = make_geometry((2, 3, 16, 16), (8, 3, 3, 3), padding=1)
    depthwise = make_geometry((2, 8, 16, 16), (8, 1, 3, 3), stride=2, padding=1, groups=8)
    assert _dispatch.heuristic(wide, "backward_data") == "direct"
    assert _dispatch.heuristic(unstrided, "backward_data") == "depthwise"
    assert _dispatch.heuristic(depthwise, "backward_data") == "depthwise"


def test_auto_uses_gemm_for_the_data_gradient_of_few_channel_layers_with_many_outputs():
    # _dispatch.FEW_CHANNEL_GRAD_MEASUREMENTS: GEMM from 512 outputs per group (3x3 and
    # smaller), the few-channel kernels below (the suite's RGB layer: 32 outputs)
    from cconv import _dispatch
    from cconv._geometry import make_geometry

    limit = _dispatch.FEW_CHANNEL_GEMM_GRAD_OUTPUTS
    for w_shape in ((limit, 3, 3, 3), (2 * limit, 2, 3, 3), (limit, 4, 1, 3)):
        geom = make_geometry((2, w_shape[1], 16, 16), w_shape, padding=1)
        assert _dispatch.heuristic(geom, "backward_data") == "gemm"
        assert _dispatch.heuristic(geom, "forward") == "depthwise"
    rgb = make_geometry((2, 3, 16, 16), (32, 3, 3, 3), padding=1)
    below = make_geometry((2, 4, 16, 16), (limit - 1, 4, 3, 3), padding=1)
    many_taps = make_geometry((2, 3, 16, 16), (limit, 3, 5, 5), padding=2)
    one_channel = make_geometry((2, 1, 16, 16), (limit, 1, 3, 3), padding=1)
    for geom in (rgb, below, many_taps, one_channel):
        assert _dispatch.heuristic(geom, "backward_data") == "depthwise"
