"""cconv.conv2d against the float64 reference: shapes, padding forms, groups, layouts, dtypes,
memory orders, degenerate sizes, explicit algorithms."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cconv
from support.checks import assert_close
from support.reference import conv_output_size, ref_conv2d, resolve_padding
from support.strategies import (
    conv_cases,
    from_layout,
    random_array,
    to_layout,
    weight_to_layout,
    with_memory,
)


def _ref(case):
    return ref_conv2d(case.x64, case.w64, case.b64, case.stride, case.pads, case.dilation,
                      case.groups)


def _check(case, y, what="conv2d"):
    assert isinstance(y, np.ndarray), type(y)
    assert y.shape == case.out_shape, f"{what}: shape {y.shape}, expected {case.out_shape}"
    assert y.dtype == case.result_dtype, f"{what}: dtype {y.dtype}, expected {case.result_dtype}"
    assert_close(from_layout(y, case.layout), _ref(case), case.result_dtype, what=what)


@given(case=conv_cases(), algo=st.sampled_from(["auto", "direct"]))
def test_conv2d_matches_reference(case, algo):
    x_before = case.x.copy()
    w_before = case.weight.copy()
    y = cconv.conv2d(case.x, case.weight, case.bias, algo=algo, **case.kwargs)
    _check(case, y, f"conv2d algo={algo}")
    # the inputs are never written
    np.testing.assert_array_equal(case.x, x_before)
    np.testing.assert_array_equal(case.weight, w_before)


@given(case=conv_cases(max_c=8, max_hw=12, mixed=False, memory_forms=("C",)))
def test_conv2d_default_algo_and_keywords_by_name(case):
    """No algo given means algo="auto"; bias may be passed by keyword."""
    y = cconv.conv2d(case.x, case.weight, bias=case.bias, **case.kwargs)
    _check(case, y)


@given(case=conv_cases(max_c=12, max_hw=12, padding_forms=("same", "same_upper", "same_lower")))
def test_same_padding_output_is_ceil_of_input_over_stride(case):
    y = cconv.conv2d(case.x, case.weight, case.bias, **case.kwargs)
    h_idx, w_idx = (2, 3) if case.layout == "NCHW" else (1, 2)
    assert y.shape[h_idx] == -(-case.h // case.stride[0])
    assert y.shape[w_idx] == -(-case.w // case.stride[1])
    _check(case, y)


@given(case=conv_cases(max_c=10, max_hw=14, kernel=(3, 3), stride=1, dilation=1))
def test_winograd_shapes(case):
    """3x3 / stride 1 / dilation 1 (any padding, any groups): Winograd's home; it must accept."""
    for algo in ("auto", "direct", "winograd"):
        y = cconv.conv2d(case.x, case.weight, case.bias, algo=algo, **case.kwargs)
        _check(case, y, f"conv2d algo={algo}")


@given(case=conv_cases(max_c=12, max_hw=14))
def test_other_algorithms_are_right_or_refuse(case):
    """Any listed algorithm either computes the right answer or refuses with a ValueError that
    says something; Winograd must not refuse a 3x3 / stride 1 / dilation 1 problem."""
    for algo in cconv.ALGORITHMS:
        if algo in ("auto", "find", "direct"):
            continue
        try:
            y = cconv.conv2d(case.x, case.weight, case.bias, algo=algo, **case.kwargs)
        except ValueError as exc:
            assert str(exc), f"algo={algo}: ValueError without a message"
            winograd_ok = (case.r, case.s) == (3, 3) and case.stride == (1, 1) \
                and case.dilation == (1, 1)
            assert not (algo == "winograd" and winograd_ok), f"winograd refused {case}: {exc}"
            continue
        _check(case, y, f"conv2d algo={algo}")


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("weight_layout", ["OIHW", "HWIO"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_layout_grid(layout, weight_layout, dtype):
    rng = np.random.default_rng(7)
    x = random_array(rng, (2, 6, 9, 11), dtype)
    w = random_array(rng, (4, 3, 3, 2), dtype)
    b = random_array(rng, (4,), dtype)
    kw = dict(stride=(2, 1), padding=((1, 0), (2, 1)), dilation=(1, 2), groups=2)
    y = cconv.conv2d(to_layout(x, layout), weight_to_layout(w, weight_layout), b,
                     layout=layout, weight_layout=weight_layout, **kw)
    assert y.dtype == np.dtype(dtype)
    ref = ref_conv2d(x, w, b, (2, 1), ((1, 0), (2, 1)), (1, 2), 2)
    assert_close(from_layout(y, layout), ref, dtype)


@pytest.mark.parametrize("xd", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("wd", [np.float16, np.float32, np.float64])
def test_mixed_dtypes_give_numpy_result_type(xd, wd):
    rng = np.random.default_rng(3)
    x = random_array(rng, (2, 3, 7, 6), xd)
    w = random_array(rng, (5, 3, 2, 3), wd)
    y = cconv.conv2d(x, w, padding=1)
    rdt = np.result_type(xd, wd)
    assert y.dtype == rdt
    assert_close(y, ref_conv2d(x, w, None, 1, ((1, 1), (1, 1)), 1, 1), rdt)


@pytest.mark.parametrize("bias_dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bias_is_cast_to_result_dtype(dtype, bias_dtype):
    rng = np.random.default_rng(4)
    x = random_array(rng, (1, 2, 5, 5), dtype)
    w = random_array(rng, (3, 2, 3, 3), dtype)
    b = random_array(rng, (3,), bias_dtype)
    y = cconv.conv2d(x, w, b)
    assert y.dtype == np.dtype(dtype)
    assert_close(y, ref_conv2d(x, w, b.astype(dtype)), dtype)


def test_float16_computed_in_float32_and_returned_as_float16():
    rng = np.random.default_rng(5)
    x = random_array(rng, (1, 16, 10, 10), np.float16)
    w = random_array(rng, (8, 16, 3, 3), np.float16)
    y = cconv.conv2d(x, w, padding=1)
    assert y.dtype == np.float16
    ref = ref_conv2d(x, w, None, 1, ((1, 1), (1, 1)))
    # an f16 accumulator over 144 terms would be far off; f32 accumulation + one rounding is not
    err = np.abs(y.astype(np.float64) - ref)
    assert err.max() <= 2 ** -10 * np.abs(ref).max() + 1e-3, err.max()


@pytest.mark.parametrize("form", ["F", "sliced", "negstride", "transposed_view", "broadcast"])
@pytest.mark.parametrize("which", ["x", "weight", "bias"])
def test_non_contiguous_inputs(form, which):
    rng = np.random.default_rng(6)
    x = random_array(rng, (2, 4, 8, 7), np.float32)
    w = random_array(rng, (6, 4, 3, 3), np.float32)
    b = random_array(rng, (6,), np.float32)
    ref = ref_conv2d(x, w, b, 1, ((1, 1), (1, 1)))
    args = {"x": x, "weight": w, "bias": b}
    a = args[which]
    if form == "transposed_view":
        # same values, but the memory of a transposed array seen through .T.T-like axes swap
        arg = np.ascontiguousarray(np.swapaxes(a, 0, -1)).swapaxes(0, -1) if a.ndim > 1 else a[::1]
    elif form == "broadcast":
        if which == "bias":
            arg = np.broadcast_to(b[:1], b.shape)
        else:
            arg = np.broadcast_to(a[:1], a.shape)
        if which == "x":
            x = np.asarray(arg)
        elif which == "weight":
            w = np.asarray(arg)
        else:
            b = np.asarray(arg)
        ref = ref_conv2d(x, w, b, 1, ((1, 1), (1, 1)))
    else:
        arg = with_memory(a, form)
    args[which] = arg
    np.testing.assert_array_equal(arg, {"x": x, "weight": w, "bias": b}[which])
    y = cconv.conv2d(args["x"], args["weight"], args["bias"], padding=1)
    assert_close(y, ref, np.float32)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_non_contiguous_channel_slice(layout):
    """A channel slice of a bigger array (the usual way non-contiguous inputs arise)."""
    rng = np.random.default_rng(8)
    big = random_array(rng, (2, 9, 10, 10), np.float64)
    x = big[:, 2:7, 1:9, ::-1]                   # (2, 5, 8, 10), strides in every axis odd
    w = random_array(rng, (3, 5, 3, 3), np.float64)
    xin = x if layout == "NCHW" else np.transpose(x, (0, 2, 3, 1))   # both non-contiguous
    y = cconv.conv2d(xin, w, layout=layout, padding="same")
    assert_close(from_layout(y, layout), ref_conv2d(x, w, None, 1, ((1, 1), (1, 1))), np.float64)


@pytest.mark.parametrize(
    "x_hw, k_hw, stride, padding, dilation",
    [
        ((1, 1), (1, 1), 1, 0, 1),
        ((3, 3), (3, 3), 1, 0, 1),
        ((5, 4), (5, 4), 2, 0, 1),
        ((2, 2), (3, 3), 3, ((1, 0), (0, 1)), 1),
        ((7, 7), (3, 3), 1, 0, 3),            # effective kernel 7x7
        ((1, 9), (1, 3), (1, 9), 0, (1, 4)),  # one output pixel on W, stride beyond the input
        ((4, 4), (1, 1), 5, 0, 1),            # stride larger than the input
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_pixel_and_tiny_outputs(x_hw, k_hw, stride, padding, dilation, dtype):
    rng = np.random.default_rng(9)
    x = random_array(rng, (1, 3) + x_hw, dtype)
    w = random_array(rng, (2, 3) + k_hw, dtype)
    b = random_array(rng, (2,), dtype)
    y = cconv.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation)
    pads = resolve_padding(padding, x_hw, k_hw, stride, dilation)
    ref = ref_conv2d(x, w, b, stride, pads, dilation)
    assert y.shape == ref.shape
    assert_close(y, ref, dtype)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("padding", [0, 1, "same", "valid"])
def test_batch_zero_gives_empty_result(layout, dtype, padding):
    x = np.zeros((0, 3, 8, 8), dtype)
    w = np.ones((5, 3, 3, 3), dtype)
    b = np.ones(5, dtype)
    y = cconv.conv2d(to_layout(x, layout), w, b, layout=layout, stride=2, padding=padding)
    hw = conv_output_size((8, 8), (3, 3), (2, 2), resolve_padding(padding, (8, 8), (3, 3), 2, 1),
                          (1, 1))
    expected = (0, 5) + hw if layout == "NCHW" else (0,) + hw + (5,)
    assert y.shape == expected
    assert y.dtype == np.dtype(dtype)


@pytest.mark.parametrize("m", [1, 2, 3])
@pytest.mark.parametrize("layout, weight_layout", [("NCHW", "OIHW"), ("NHWC", "HWIO")])
def test_depthwise_with_channel_multiplier(m, layout, weight_layout):
    rng = np.random.default_rng(10)
    c = 13
    x = random_array(rng, (2, c, 11, 9), np.float32)
    w = random_array(rng, (m * c, 1, 3, 3), np.float32)
    b = random_array(rng, (m * c,), np.float32)
    y = cconv.conv2d(to_layout(x, layout), weight_to_layout(w, weight_layout), b, stride=2,
                     padding="same", groups=c, layout=layout, weight_layout=weight_layout)
    pads = resolve_padding("same", (11, 9), (3, 3), 2, 1)
    assert_close(from_layout(y, layout), ref_conv2d(x, w, b, 2, pads, 1, c), np.float32)


@pytest.mark.parametrize(
    "n, c, k, hw, ksz, stride, padding, groups",
    [
        (2, 35, 37, (17, 19), (3, 3), 1, 1, 1),    # channel counts off every SIMD block size
        (1, 64, 64, (14, 14), (3, 3), 1, 1, 1),
        (1, 64, 48, (15, 15), (1, 1), 1, 0, 1),
        (3, 24, 40, (16, 16), (3, 3), 2, 1, 1),
        (1, 32, 32, (20, 21), (3, 3), 1, 1, 32),   # depthwise
        (2, 48, 48, (13, 13), (5, 5), 1, 2, 4),
        (1, 3, 16, (32, 32), (7, 7), 2, 3, 1),     # a stem
    ],
)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_layer_like_shapes(n, c, k, hw, ksz, stride, padding, groups, layout):
    rng = np.random.default_rng(11)
    x = random_array(rng, (n, c) + hw, np.float32)
    w = random_array(rng, (k, c // groups) + ksz, np.float32)
    b = random_array(rng, (k,), np.float32)
    for algo in ["auto", "direct"]:
        y = cconv.conv2d(to_layout(x, layout), w, b, stride=stride, padding=padding,
                         groups=groups, layout=layout, algo=algo)
        ref = ref_conv2d(x, w, b, stride, ((padding, padding), (padding, padding)), 1, groups)
        assert_close(from_layout(y, layout), ref, np.float32, what=f"algo={algo}")


@settings(max_examples=20)
@given(case=conv_cases(max_c=6, max_hw=10, n=0, memory_forms=("C",)))
def test_batch_zero_sweep(case):
    y = cconv.conv2d(case.x, case.weight, case.bias, **case.kwargs)
    assert y.shape == case.out_shape
    assert y.dtype == case.result_dtype
