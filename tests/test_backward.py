"""The three gradients of conv2d (data, weight, bias) and conv2d_backward, against the
reference, plus the adjoint identity that ties forward and both gradients together."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cconv
from support.checks import assert_close
from support.reference import (
    ref_backward_bias,
    ref_backward_data,
    ref_backward_weight,
    ref_conv2d,
    resolve_padding,
)
from support.strategies import (
    MEMORY_FORMS,
    conv_cases,
    from_layout,
    random_array,
    to_layout,
    weight_from_layout,
    weight_to_layout,
    with_memory,
)

NEEDS = st.lists(st.sampled_from(["data", "weight", "bias"]), min_size=1, max_size=3,
                 unique=True).map(tuple)


def _ref_dx(case, g64):
    return ref_backward_data(g64, case.w64, (case.n, case.c, case.h, case.w), case.stride,
                             case.pads, case.dilation, case.groups)


def _ref_dw(case, g64):
    return ref_backward_weight(g64, case.x64, case.w64.shape, case.stride, case.pads,
                               case.dilation, case.groups)


def _grad(case, dtype, memory):
    """grad_out of the given dtype, values in float64 and the argument array."""
    rng = np.random.default_rng(case.seed + 1)
    g = random_array(rng, case.out_shape_nchw, dtype)
    return g.astype(np.float64), with_memory(to_layout(g, case.layout), memory)


@given(case=conv_cases(), algo=st.sampled_from(["auto", "direct"]),
       g_mem=st.sampled_from(MEMORY_FORMS))
def test_backward_data_matches_reference(case, algo, g_mem):
    g64, g = _grad(case, case.x_dtype, g_mem)
    dx = cconv.conv2d_backward_data(g, case.weight, case.x_shape, algo=algo, **case.kwargs)
    rdt = np.result_type(g.dtype, case.weight.dtype)
    assert isinstance(dx, np.ndarray)
    assert dx.shape == case.x_shape
    assert dx.dtype == rdt
    assert_close(from_layout(dx, case.layout), _ref_dx(case, g64), rdt, what="backward_data")


@given(case=conv_cases(), algo=st.sampled_from(["auto", "direct"]),
       g_mem=st.sampled_from(MEMORY_FORMS))
def test_backward_weight_matches_reference(case, algo, g_mem):
    g64, g = _grad(case, case.w_dtype, g_mem)
    dw = cconv.conv2d_backward_weight(g, case.x, case.weight_shape, algo=algo, **case.kwargs)
    rdt = np.result_type(g.dtype, case.x.dtype)
    assert isinstance(dw, np.ndarray)
    assert dw.shape == case.weight_shape
    assert dw.dtype == rdt
    assert_close(weight_from_layout(dw, case.weight_layout), _ref_dw(case, g64), rdt,
                 what="backward_weight")


@given(case=conv_cases(max_c=12, max_hw=14), g_mem=st.sampled_from(MEMORY_FORMS))
def test_backward_bias_matches_reference(case, g_mem):
    g64, g = _grad(case, case.result_dtype, g_mem)
    db = cconv.conv2d_backward_bias(g, layout=case.layout)
    assert db.shape == (case.k,)
    assert db.dtype == g.dtype
    assert_close(db, ref_backward_bias(g64), g.dtype, what="backward_bias")


@given(case=conv_cases(max_c=12, max_hw=14, kernel=(3, 3), stride=1, dilation=1))
def test_backward_winograd_shapes(case):
    """3x3 / stride 1 / dilation 1 through every listed algorithm that must accept it."""
    g64, g = _grad(case, case.result_dtype, "C")
    for algo in ("auto", "direct", "winograd"):
        dx = cconv.conv2d_backward_data(g, case.weight, case.x_shape, algo=algo, **case.kwargs)
        assert_close(from_layout(dx, case.layout), _ref_dx(case, g64), dx.dtype,
                     what=f"backward_data algo={algo}")
        dw = cconv.conv2d_backward_weight(g, case.x, case.weight_shape, algo=algo, **case.kwargs)
        assert_close(weight_from_layout(dw, case.weight_layout), _ref_dw(case, g64), dw.dtype,
                     what=f"backward_weight algo={algo}")


@given(case=conv_cases(max_c=12, max_hw=14))
def test_backward_other_algorithms_are_right_or_refuse(case):
    g64, g = _grad(case, case.result_dtype, "C")
    for algo in cconv.ALGORITHMS:
        if algo in ("auto", "find", "direct"):
            continue
        for name, call, ref, unlayout in [
            ("backward_data",
             lambda: cconv.conv2d_backward_data(g, case.weight, case.x_shape, algo=algo,
                                                **case.kwargs),
             lambda: _ref_dx(case, g64), lambda a: from_layout(a, case.layout)),
            ("backward_weight",
             lambda: cconv.conv2d_backward_weight(g, case.x, case.weight_shape, algo=algo,
                                                  **case.kwargs),
             lambda: _ref_dw(case, g64), lambda a: weight_from_layout(a, case.weight_layout)),
        ]:
            try:
                res = call()
            except ValueError as exc:
                assert str(exc)
                winograd_ok = (case.r, case.s) == (3, 3) and case.stride == (1, 1) \
                    and case.dilation == (1, 1)
                assert not (algo == "winograd" and winograd_ok), f"winograd refused: {exc}"
                continue
            assert_close(unlayout(res), ref(), res.dtype, what=f"{name} algo={algo}")


@given(case=conv_cases(max_c=14, max_hw=16), need=NEEDS)
def test_conv2d_backward_returns_what_is_needed(case, need):
    g64, g = _grad(case, case.result_dtype, "C")
    res = cconv.conv2d_backward(g, case.x, case.weight, need=need, **case.kwargs)
    assert isinstance(res, tuple) and len(res) == 3
    dx, dw, db = res
    rdt = case.result_dtype
    if "data" in need:
        assert dx.shape == case.x_shape and dx.dtype == rdt
        assert_close(from_layout(dx, case.layout), _ref_dx(case, g64), rdt, what="dx")
    else:
        assert dx is None
    if "weight" in need:
        assert dw.shape == case.weight_shape and dw.dtype == rdt
        assert_close(weight_from_layout(dw, case.weight_layout), _ref_dw(case, g64), rdt,
                     what="dw")
    else:
        assert dw is None
    if "bias" in need:
        assert db.shape == (case.k,)
        assert_close(db, ref_backward_bias(g64), rdt, what="db")
    else:
        assert db is None


@given(case=conv_cases(max_c=10, max_hw=12, memory_forms=("C",)))
def test_conv2d_backward_default_need_is_everything(case):
    g64, g = _grad(case, case.result_dtype, "C")
    dx, dw, db = cconv.conv2d_backward(g, case.x, case.weight, **case.kwargs)
    rdt = case.result_dtype
    assert_close(from_layout(dx, case.layout), _ref_dx(case, g64), rdt, what="dx")
    assert_close(weight_from_layout(dw, case.weight_layout), _ref_dw(case, g64), rdt, what="dw")
    assert_close(db, ref_backward_bias(g64), rdt, what="db")


@given(case=conv_cases(dtypes=(np.float64,), mixed=False, bias=False))
def test_adjoint_identity_float64(case):
    """<conv2d(x, w), g> == <x, backward_data(g, w)> == <w, backward_weight(g, x)>."""
    g64, g = _grad(case, np.float64, "C")
    y = cconv.conv2d(case.x, case.weight, **case.kwargs)
    dx = cconv.conv2d_backward_data(g, case.weight, case.x_shape, **case.kwargs)
    dw = cconv.conv2d_backward_weight(g, case.x, case.weight_shape, **case.kwargs)
    y = from_layout(y, case.layout)
    dx = from_layout(dx, case.layout)
    dw = weight_from_layout(dw, case.weight_layout)
    a = float(np.sum(y * g64))
    b = float(np.sum(case.x64 * dx))
    c = float(np.sum(case.w64 * dw))
    # the three sums are the same sum of products in a different order
    scale = float(np.sum(np.abs(ref_conv2d(np.abs(case.x64), np.abs(case.w64), None, case.stride,
                                           case.pads, case.dilation, case.groups)
                                * np.abs(g64)))) + 1e-300
    assert abs(a - b) <= 1e-11 * scale + 1e-300, (a, b, scale)
    assert abs(a - c) <= 1e-11 * scale + 1e-300, (a, c, scale)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_backward_bias_layouts(layout, dtype):
    rng = np.random.default_rng(21)
    g = random_array(rng, (3, 7, 5, 4), dtype)
    db = cconv.conv2d_backward_bias(to_layout(g, layout), layout=layout)
    assert db.shape == (7,)
    assert db.dtype == np.dtype(dtype)
    assert_close(db, ref_backward_bias(g), dtype)


def test_backward_bias_default_layout_is_nchw():
    rng = np.random.default_rng(22)
    g = random_array(rng, (2, 3, 4, 5), np.float64)
    assert_close(cconv.conv2d_backward_bias(g), ref_backward_bias(g), np.float64)


@pytest.mark.parametrize(
    "n, c, k, hw, ksz, stride, padding, groups",
    [
        (2, 35, 37, (17, 19), (3, 3), 1, 1, 1),
        (1, 64, 64, (14, 14), (3, 3), 1, 1, 1),
        (3, 24, 40, (16, 16), (3, 3), 2, 1, 1),
        (1, 32, 32, (20, 21), (3, 3), 1, 1, 32),
        (2, 48, 48, (13, 13), (5, 5), 1, 2, 4),
        (2, 16, 24, (15, 15), (1, 1), 2, 0, 1),
    ],
)
@pytest.mark.parametrize("layout, weight_layout", [("NCHW", "OIHW"), ("NHWC", "HWIO")])
def test_backward_layer_like_shapes(n, c, k, hw, ksz, stride, padding, groups, layout,
                                    weight_layout):
    rng = np.random.default_rng(23)
    x = random_array(rng, (n, c) + hw, np.float32)
    w = random_array(rng, (k, c // groups) + ksz, np.float32)
    pads = resolve_padding(padding, hw, ksz, stride, 1)
    ho = (hw[0] + 2 * padding - ksz[0]) // stride + 1
    wo = (hw[1] + 2 * padding - ksz[1]) // stride + 1
    g = random_array(rng, (n, k, ho, wo), np.float32)
    kw = dict(stride=stride, padding=padding, groups=groups, layout=layout,
              weight_layout=weight_layout)
    xl, wl, gl = to_layout(x, layout), weight_to_layout(w, weight_layout), to_layout(g, layout)
    dx = cconv.conv2d_backward_data(gl, wl, xl.shape, **kw)
    dw = cconv.conv2d_backward_weight(gl, xl, wl.shape, **kw)
    assert_close(from_layout(dx, layout),
                 ref_backward_data(g, w, x.shape, stride, pads, 1, groups), np.float32)
    assert_close(weight_from_layout(dw, weight_layout),
                 ref_backward_weight(g, x, w.shape, stride, pads, 1, groups), np.float32)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_backward_batch_zero(layout):
    x = np.zeros((0, 3, 6, 6), np.float32)
    w = np.ones((4, 3, 3, 3), np.float32)
    g = np.zeros((0, 4, 4, 4), np.float32)
    xl, gl = to_layout(x, layout), to_layout(g, layout)
    dx = cconv.conv2d_backward_data(gl, w, xl.shape, layout=layout)
    assert dx.shape == xl.shape
    dw = cconv.conv2d_backward_weight(gl, xl, w.shape, layout=layout)
    assert dw.shape == w.shape
    np.testing.assert_array_equal(dw, 0)     # an empty sum
    db = cconv.conv2d_backward_bias(gl, layout=layout)
    assert db.shape == (4,)
    np.testing.assert_array_equal(db, 0)
