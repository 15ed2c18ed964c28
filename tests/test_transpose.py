"""conv_transpose2d (PyTorch semantics) and its gradients against the reference."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cconv
from support.checks import assert_close
from support.reference import (
    ref_backward_bias,
    ref_conv_transpose2d,
    ref_conv_transpose2d_backward_data,
    ref_conv_transpose2d_backward_weight,
    transpose_output_size,
)
from support.strategies import (
    MEMORY_FORMS,
    from_layout,
    random_array,
    to_layout,
    transpose_cases,
    weight_from_layout,
    weight_to_layout,
)

NEEDS = st.lists(st.sampled_from(["data", "weight", "bias"]), min_size=1, max_size=3,
                 unique=True).map(tuple)


def _ref(case):
    return ref_conv_transpose2d(case.x64, case.w64, case.b64, case.stride, case.pads,
                                case.output_padding, case.dilation, case.groups)


def _ref_dx(case, g64):
    return ref_conv_transpose2d_backward_data(g64, case.w64, case.x64.shape, case.stride,
                                              case.pads, case.dilation, case.groups)


def _ref_dw(case, g64):
    return ref_conv_transpose2d_backward_weight(g64, case.x64, case.w64.shape, case.stride,
                                                case.pads, case.dilation, case.groups)


@given(case=transpose_cases(), algo=st.sampled_from(["auto", "direct"]))
def test_conv_transpose2d_matches_reference(case, algo):
    x_before = case.x.copy()
    y = cconv.conv_transpose2d(case.x, case.weight, case.bias, algo=algo, **case.kwargs)
    assert isinstance(y, np.ndarray)
    assert y.shape == case.out_shape, (y.shape, case.out_shape)
    assert y.dtype == case.dtype
    assert_close(from_layout(y, case.layout), _ref(case), case.dtype, what="conv_transpose2d")
    np.testing.assert_array_equal(case.x, x_before)


@given(case=transpose_cases(), g_mem=st.sampled_from(MEMORY_FORMS))
def test_conv_transpose2d_backward_data(case, g_mem):
    g64, g = case.grad_out(g_mem)
    dx = cconv.conv_transpose2d_backward_data(g, case.weight, case.x_shape, **case.kwargs)
    assert dx.shape == case.x_shape
    assert dx.dtype == case.dtype
    assert_close(from_layout(dx, case.layout), _ref_dx(case, g64), case.dtype,
                 what="conv_transpose2d_backward_data")


@given(case=transpose_cases(), g_mem=st.sampled_from(MEMORY_FORMS))
def test_conv_transpose2d_backward_weight(case, g_mem):
    g64, g = case.grad_out(g_mem)
    dw = cconv.conv_transpose2d_backward_weight(g, case.x, case.weight_shape, **case.kwargs)
    assert dw.shape == case.weight_shape
    assert dw.dtype == case.dtype
    assert_close(weight_from_layout(dw, case.weight_layout), _ref_dw(case, g64), case.dtype,
                 what="conv_transpose2d_backward_weight")


@given(case=transpose_cases(max_c=10, max_hw=8), need=NEEDS)
def test_conv_transpose2d_backward_need(case, need):
    g64, g = case.grad_out()
    res = cconv.conv_transpose2d_backward(g, case.x, case.weight, need=need, **case.kwargs)
    assert isinstance(res, tuple) and len(res) == 3
    dx, dw, db = res
    if "data" in need:
        assert dx.shape == case.x_shape
        assert_close(from_layout(dx, case.layout), _ref_dx(case, g64), case.dtype, what="dx")
    else:
        assert dx is None
    if "weight" in need:
        assert dw.shape == case.weight_shape
        assert_close(weight_from_layout(dw, case.weight_layout), _ref_dw(case, g64), case.dtype,
                     what="dw")
    else:
        assert dw is None
    if "bias" in need:
        assert db.shape == (case.k,)
        assert_close(db, ref_backward_bias(g64), case.dtype, what="db")
    else:
        assert db is None


@given(case=transpose_cases(dtypes=(np.float64,), max_hw=8))
def test_transpose_adjoint_identity_float64(case):
    """<convT(x, w), g> == <x, convT_backward_data(g, w)> == <w, convT_backward_weight(g, x)>."""
    g64, g = case.grad_out()
    y = cconv.conv_transpose2d(case.x, case.weight, **case.kwargs)
    dx = cconv.conv_transpose2d_backward_data(g, case.weight, case.x_shape, **case.kwargs)
    dw = cconv.conv_transpose2d_backward_weight(g, case.x, case.weight_shape, **case.kwargs)
    a = float(np.sum(from_layout(y, case.layout) * g64))
    b = float(np.sum(case.x64 * from_layout(dx, case.layout)))
    c = float(np.sum(case.w64 * weight_from_layout(dw, case.weight_layout)))
    scale = float(np.sum(np.abs(ref_conv_transpose2d(
        np.abs(case.x64), np.abs(case.w64), None, case.stride, case.pads, case.output_padding,
        case.dilation, case.groups)) * np.abs(g64))) + 1e-300
    assert abs(a - b) <= 1e-11 * scale, (a, b, scale)
    assert abs(a - c) <= 1e-11 * scale, (a, c, scale)


@given(case=transpose_cases(max_c=10, max_hw=8, dtypes=(np.float32, np.float64)))
def test_transpose_is_backward_data_of_conv2d(case):
    """When output_padding < stride, conv_transpose2d(x, w) == conv2d_backward_data(x, w, y_shape)
    with the same stride/padding/dilation/groups (weight (C_in, K/g, R, S) read as OIHW)."""
    if any(op >= s for op, s in zip(case.output_padding, case.stride)):
        return
    kw = {k: v for k, v in case.kwargs.items() if k not in ("output_padding", "output_shape")}
    y = cconv.conv_transpose2d(case.x, case.weight, **case.kwargs)
    dx = cconv.conv2d_backward_data(case.x, case.weight, case.out_shape, **kw)
    assert dx.shape == y.shape
    assert_close(dx, y.astype(np.float64), case.dtype)


@pytest.mark.parametrize("stride, dilation", [(1, 1), (2, 1), (3, 1), (1, 2), (2, 3), (3, 2)])
def test_output_padding_bounds(stride, dilation):
    rng = np.random.default_rng(31)
    x = random_array(rng, (1, 4, 5, 5), np.float64)
    w = random_array(rng, (4, 3, 3, 3), np.float64)
    limit = max(stride, dilation)
    for op in range(limit):
        y = cconv.conv_transpose2d(x, w, stride=stride, dilation=dilation, padding=1,
                                   output_padding=op)
        ref = ref_conv_transpose2d(x, w, None, stride, ((1, 1), (1, 1)), op, dilation)
        assert_close(y, ref, np.float64)
    with pytest.raises(ValueError, match="output_padding"):
        cconv.conv_transpose2d(x, w, stride=stride, dilation=dilation, padding=1,
                               output_padding=limit)
    with pytest.raises(ValueError, match="output_padding"):
        cconv.conv_transpose2d(x, w, stride=stride, dilation=dilation, padding=1,
                               output_padding=(0, limit))
    with pytest.raises(ValueError, match="output_padding"):
        cconv.conv_transpose2d(x, w, stride=stride, dilation=dilation, padding=1,
                               output_padding=-1)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_output_shape_selects_output_padding(layout):
    rng = np.random.default_rng(32)
    x = random_array(rng, (2, 4, 5, 6), np.float64)
    w = random_array(rng, (4, 2, 3, 3), np.float64)
    for oph in range(3):
        for opw in range(3):
            hw = transpose_output_size((5, 6), (3, 3), (3, 3), ((1, 1), (1, 1)), (1, 1),
                                       (oph, opw))
            shape = (2, 2) + hw if layout == "NCHW" else (2,) + hw + (2,)
            y = cconv.conv_transpose2d(to_layout(x, layout), w, stride=3, padding=1,
                                       output_shape=shape, layout=layout)
            assert y.shape == shape
            ref = ref_conv_transpose2d(x, w, None, 3, ((1, 1), (1, 1)), (oph, opw), 1)
            assert_close(from_layout(y, layout), ref, np.float64)
    bad_hw = transpose_output_size((5, 6), (3, 3), (3, 3), ((1, 1), (1, 1)), (1, 1), (3, 0))
    bad = (2, 2) + bad_hw if layout == "NCHW" else (2,) + bad_hw + (2,)
    with pytest.raises(ValueError, match="output_shape"):
        cconv.conv_transpose2d(to_layout(x, layout), w, stride=3, padding=1, output_shape=bad,
                               layout=layout)
    small_hw = transpose_output_size((5, 6), (3, 3), (3, 3), ((1, 1), (1, 1)), (1, 1), (0, 0))
    small = (2, 2, small_hw[0] - 1, small_hw[1]) if layout == "NCHW" else \
        (2, small_hw[0] - 1, small_hw[1], 2)
    with pytest.raises(ValueError, match="output_shape"):
        cconv.conv_transpose2d(to_layout(x, layout), w, stride=3, padding=1, output_shape=small,
                               layout=layout)


def test_hwio_weight_layout_means_r_s_kg_cin():
    rng = np.random.default_rng(33)
    x = random_array(rng, (1, 6, 4, 5), np.float64)
    w = random_array(rng, (6, 4, 2, 3), np.float64)          # (C_in, K/groups, R, S), groups 2
    w_hwio = np.ascontiguousarray(np.transpose(w, (2, 3, 1, 0)))  # (R, S, K/groups, C_in)
    assert w_hwio.shape == (2, 3, 4, 6)
    y = cconv.conv_transpose2d(x, w_hwio, stride=2, groups=2, weight_layout="HWIO")
    assert y.shape == (1, 8, 8, 11)
    assert_close(y, ref_conv_transpose2d(x, w, None, 2, ((0, 0), (0, 0)), 0, 1, 2), np.float64)
    assert_close(y, cconv.conv_transpose2d(x, w, stride=2, groups=2), np.float64)


@pytest.mark.parametrize("padding, pads", [
    (2, ((2, 2), (2, 2))),
    ((1, 2), ((1, 1), (2, 2))),
    (((0, 2), (1, 0)), ((0, 2), (1, 0))),
    ("valid", ((0, 0), (0, 0))),
])
def test_transpose_padding_forms(padding, pads):
    rng = np.random.default_rng(34)
    x = random_array(rng, (2, 3, 6, 5), np.float32)
    w = random_array(rng, (3, 5, 4, 3), np.float32)
    b = random_array(rng, (5,), np.float32)
    y = cconv.conv_transpose2d(x, w, b, stride=2, padding=padding, output_padding=1)
    assert_close(y, ref_conv_transpose2d(x, w, b, 2, pads, 1, 1), np.float32)


@pytest.mark.parametrize("layout, weight_layout", [("NCHW", "OIHW"), ("NHWC", "HWIO")])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_transpose_layer_like(layout, weight_layout, dtype):
    """A decoder upsampling layer: 32 -> 16 channels, 4x4 kernel, stride 2, padding 1."""
    rng = np.random.default_rng(35)
    x = random_array(rng, (2, 32, 9, 8), dtype)
    w = random_array(rng, (32, 16, 4, 4), dtype)
    b = random_array(rng, (16,), dtype)
    y = cconv.conv_transpose2d(to_layout(x, layout), weight_to_layout(w, weight_layout), b,
                               stride=2, padding=1, layout=layout, weight_layout=weight_layout)
    assert y.dtype == np.dtype(dtype)
    ref = ref_conv_transpose2d(x, w, b, 2, ((1, 1), (1, 1)), 0, 1)
    assert_close(from_layout(y, layout), ref, dtype)


def test_transpose_depthwise():
    rng = np.random.default_rng(36)
    c = 7
    x = random_array(rng, (2, c, 5, 6), np.float64)
    w = random_array(rng, (c, 2, 3, 3), np.float64)          # multiplier 2
    y = cconv.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1, groups=c)
    assert y.shape == (2, 2 * c, 10, 12)
    assert_close(y, ref_conv_transpose2d(x, w, None, 2, ((1, 1), (1, 1)), 1, 1, c), np.float64)


def test_transpose_batch_zero():
    x = np.zeros((0, 4, 5, 5), np.float32)
    w = np.ones((4, 3, 3, 3), np.float32)
    y = cconv.conv_transpose2d(x, w, stride=2)
    assert y.shape == (0, 3, 11, 11)
    assert y.dtype == np.float32


@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("empty_axis", [0, -1])
def test_transpose_refuses_an_empty_spatial_axis_even_with_output_padding(rank, empty_axis):
    # An input with no pixels along an axis has nothing to transpose; output_padding alone
    # (here 1, below the dilation of 2) would otherwise make a one-pixel output of it.
    function = {1: cconv.conv_transpose1d, 2: cconv.conv_transpose2d,
                3: cconv.conv_transpose3d}[rank]
    spatial = [3] * rank
    spatial[empty_axis] = 0
    x = np.zeros((1, 2, *spatial), np.float32)
    w = np.ones((2, 1) + (1,) * rank, np.float32)
    with pytest.raises(ValueError, match="x must have non-zero channels and spatial size"):
        function(x, w, dilation=2, output_padding=1)
    batch_zero = np.zeros((0, 2) + (3,) * rank, np.float32)  # no images is fine
    assert function(batch_zero, w, dilation=2, output_padding=1).shape == (0, 1) + (4,) * rank
