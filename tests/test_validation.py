"""Bad input raises ValueError / TypeError whose message names the offending argument."""

import re

import numpy as np
import pytest

import cconv

F32 = np.float32


def _x(shape=(2, 6, 8, 8), dtype=F32):
    return np.zeros(shape, dtype)


def _w(shape=(4, 6, 3, 3), dtype=F32):
    return np.zeros(shape, dtype)


def _g(shape=(2, 4, 6, 6), dtype=F32):
    return np.zeros(shape, dtype)


def _huge(shape, dtype=F32):
    """A read-only view of the given (huge) shape that owns no memory."""
    return np.broadcast_to(np.zeros((1,) * len(shape), dtype), shape)


# every public entry point, called on a valid base problem; keyword overrides go through
CALLS = {
    "conv2d": lambda **kw: cconv.conv2d(_x(), _w(), **kw),
    "conv2d_backward_data": lambda **kw: cconv.conv2d_backward_data(_g(), _w(), (2, 6, 8, 8),
                                                                    **kw),
    "conv2d_backward_weight": lambda **kw: cconv.conv2d_backward_weight(_g(), _x(), (4, 6, 3, 3),
                                                                        **kw),
    "conv2d_backward": lambda **kw: cconv.conv2d_backward(_g(), _x(), _w(), **kw),
    "conv_transpose2d": lambda **kw: cconv.conv_transpose2d(_g(), _w(), **kw),
}
GEOMETRY_CALLS = ["conv2d", "conv2d_backward_data", "conv2d_backward_weight", "conv2d_backward"]


def test_base_problems_are_valid():
    """Guard for every test below: without the bad argument each call succeeds."""
    for name, call in CALLS.items():
        call()


# --------------------------------------------------------------------------------------------
# shapes
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(6, 8, 8), (2, 6, 8, 8, 1), (8,), ()])
def test_x_wrong_ndim(shape):
    with pytest.raises(ValueError, match=r"\bx\b"):
        cconv.conv2d(np.zeros(shape, F32), _w())


@pytest.mark.parametrize("shape", [(4, 6, 3), (4, 6, 3, 3, 1), (3, 3)])
def test_weight_wrong_ndim(shape):
    with pytest.raises(ValueError, match=r"\bweight\b"):
        cconv.conv2d(_x(), np.zeros(shape, F32))


@pytest.mark.parametrize("shape", [(5,), (3,), (2, 2)])
def test_bias_wrong_shape(shape):
    with pytest.raises(ValueError, match=r"\bbias\b"):
        cconv.conv2d(_x(), _w(), np.zeros(shape, F32))


def test_channel_mismatch_names_argument_and_both_values():
    with pytest.raises(ValueError, match=r"\bweight\b|\bx\b") as info:
        cconv.conv2d(_x((2, 6, 8, 8)), _w((4, 5, 3, 3)))
    msg = str(info.value)
    assert re.search(r"\b6\b", msg) and re.search(r"\b5\b", msg), msg


def test_channel_mismatch_nhwc_hwio():
    with pytest.raises(ValueError, match=r"\bweight\b|\bx\b") as info:
        cconv.conv2d(_x((2, 8, 8, 7)), _w((3, 3, 5, 4)), layout="NHWC", weight_layout="HWIO")
    msg = str(info.value)
    assert re.search(r"\b7\b", msg) and re.search(r"\b5\b", msg), msg


def test_groups_channel_mismatch():
    # C=6, groups=2 needs weight in-channels 3
    with pytest.raises(ValueError, match=r"\bweight\b|\bgroups\b"):
        cconv.conv2d(_x(), _w((4, 6, 3, 3)), groups=2)


@pytest.mark.parametrize("groups", [4, 5, 7])
def test_groups_not_dividing_in_channels(groups):
    with pytest.raises(ValueError, match=r"\bgroups\b"):
        cconv.conv2d(_x((1, 6, 8, 8)), _w((groups * 2, 1, 3, 3)), groups=groups)


def test_groups_not_dividing_out_channels():
    with pytest.raises(ValueError, match=r"\bgroups\b"):
        cconv.conv2d(_x((1, 6, 8, 8)), _w((4, 2, 3, 3)), groups=3)


@pytest.mark.parametrize("groups", [0, -1, -3])
def test_groups_not_positive(groups):
    with pytest.raises(ValueError, match=r"\bgroups\b"):
        cconv.conv2d(_x(), _w(), groups=groups)


@pytest.mark.parametrize("x_hw, k_hw, padding, dilation", [
    ((4, 4), (5, 5), 0, 1),
    ((8, 8), (3, 9), 0, 1),
    ((4, 4), (3, 3), 0, 2),          # effective kernel 5
    ((4, 4), (7, 7), 1, 1),          # padded input 6 < 7
    ((4, 4), (3, 3), ((0, 0), (0, 0)), (1, 3)),
    ((2, 2), (3, 3), "valid", 1),
])
def test_kernel_larger_than_padded_input(x_hw, k_hw, padding, dilation):
    with pytest.raises(ValueError, match=r"kernel|weight|padding|dilation|\bx\b"):
        cconv.conv2d(_x((1, 2) + x_hw), _w((3, 2) + k_hw), padding=padding, dilation=dilation)


# --------------------------------------------------------------------------------------------
# stride / dilation / padding / layout / groups values, on every entry point
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(CALLS))
@pytest.mark.parametrize("stride", [0, -1, (1, 0), (-2, 1), (0, 0)])
def test_stride_not_positive(name, stride):
    with pytest.raises(ValueError, match=r"\bstride\b"):
        CALLS[name](stride=stride)


@pytest.mark.parametrize("stride", [(1, 1, 1), (1,), "2", 1.5])
def test_stride_malformed(stride):
    with pytest.raises((ValueError, TypeError), match=r"\bstride\b"):
        cconv.conv2d(_x(), _w(), stride=stride)


@pytest.mark.parametrize("name", list(CALLS))
@pytest.mark.parametrize("dilation", [0, -1, (1, 0), (0, 2)])
def test_dilation_not_positive(name, dilation):
    with pytest.raises(ValueError, match=r"\bdilation\b"):
        CALLS[name](dilation=dilation)


@pytest.mark.parametrize("dilation", [(1, 1, 1), 2.5])
def test_dilation_malformed(dilation):
    with pytest.raises((ValueError, TypeError), match=r"\bdilation\b"):
        cconv.conv2d(_x(), _w(), dilation=dilation)


@pytest.mark.parametrize("name", list(CALLS))
@pytest.mark.parametrize("padding", [-1, (0, -1), (-1, 0), ((0, 0), (-1, 0)), ((0, -2), (0, 0))])
def test_negative_padding(name, padding):
    with pytest.raises(ValueError, match=r"\bpadding\b"):
        CALLS[name](padding=padding)


@pytest.mark.parametrize("name", GEOMETRY_CALLS)
@pytest.mark.parametrize("padding", ["fullest", "", "same_middle", "causal"])
def test_bad_padding_string(name, padding):
    with pytest.raises(ValueError, match=r"\bpadding\b"):
        CALLS[name](padding=padding)


@pytest.mark.parametrize("padding", [(1, 2, 3), ((1, 2, 3), (0, 0)), ((1,), (2,)), 1.5])
def test_malformed_padding(padding):
    with pytest.raises((ValueError, TypeError), match=r"\bpadding\b"):
        cconv.conv2d(_x(), _w(), padding=padding)


@pytest.mark.parametrize("name", list(CALLS))
@pytest.mark.parametrize("layout", ["NCWH", "CHWN", "", "NC", "NCDHW"])
def test_bad_layout(name, layout):
    with pytest.raises(ValueError, match=r"\blayout\b"):
        CALLS[name](layout=layout)


@pytest.mark.parametrize("name", list(CALLS))
@pytest.mark.parametrize("weight_layout", ["IOHW", "OHWI", "", "HWOI"])
def test_bad_weight_layout(name, weight_layout):
    with pytest.raises(ValueError, match=r"\bweight_layout\b"):
        CALLS[name](weight_layout=weight_layout)


@pytest.mark.parametrize("layout", ["NCWH", "HWC"])
def test_backward_bias_bad_layout(layout):
    with pytest.raises(ValueError, match=r"\blayout\b"):
        cconv.conv2d_backward_bias(_g(), layout=layout)


@pytest.mark.parametrize("shape", [(4, 6, 6), (2, 4, 6, 6, 1)])
def test_backward_bias_wrong_ndim(shape):
    with pytest.raises(ValueError, match=r"\bgrad_out\b"):
        cconv.conv2d_backward_bias(np.zeros(shape, F32))


# --------------------------------------------------------------------------------------------
# dtypes
# --------------------------------------------------------------------------------------------

BAD_DTYPES = [np.int8, np.int32, np.int64, np.uint8, np.bool_, np.complex64, np.complex128,
              np.longdouble, object]


def _dtype_pattern(dt):
    dt = np.dtype(dt)
    names = {dt.name, str(dt)}
    if dt == np.longdouble:
        names |= {"longdouble"}
    if dt == np.bool_:
        names |= {"bool"}
    return "|".join(re.escape(n) for n in names)


@pytest.mark.parametrize("dtype", BAD_DTYPES)
@pytest.mark.parametrize("which", ["x", "weight"])
def test_bad_dtype_raises_type_error_naming_dtype(dtype, which):
    x, w = _x(), _w()
    if which == "x":
        x = x.astype(dtype)
    else:
        w = w.astype(dtype)
    with pytest.raises(TypeError, match=_dtype_pattern(dtype)):
        cconv.conv2d(x, w)


@pytest.mark.parametrize("dtype", [np.int32, np.bool_, np.complex128, object])
def test_bad_dtype_backward_and_transpose(dtype):
    with pytest.raises(TypeError, match=_dtype_pattern(dtype)):
        cconv.conv2d_backward_data(_g().astype(dtype), _w(), (2, 6, 8, 8))
    with pytest.raises(TypeError, match=_dtype_pattern(dtype)):
        cconv.conv2d_backward_weight(_g(), _x().astype(dtype), (4, 6, 3, 3))
    with pytest.raises(TypeError, match=_dtype_pattern(dtype)):
        cconv.conv2d_backward_bias(_g().astype(dtype))
    with pytest.raises(TypeError, match=_dtype_pattern(dtype)):
        cconv.conv_transpose2d(_g().astype(dtype), _w())


def test_integer_nested_lists_raise_type_error():
    """Array-likes go through numpy.asarray first: a list of ints is an int64 array."""
    x = [[[[1, 2], [3, 4]]]]
    w = [[[[1]]]]
    with pytest.raises(TypeError, match="int"):
        cconv.conv2d(x, w)


@pytest.mark.parametrize("x", [None, "abc", object()])
def test_non_numeric_input(x):
    with pytest.raises((TypeError, ValueError)):
        cconv.conv2d(x, _w())


# --------------------------------------------------------------------------------------------
# input_shape / weight_shape of the gradients
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("input_shape", [
    (2, 6, 9, 8),        # spatial size that gives a different output size (stride 1)
    (2, 6, 8, 7),
    (3, 6, 8, 8),        # batch differs from grad_out
    (2, 5, 8, 8),        # channels differ from weight
    (2, 6, 8),           # not 4-D
    (2, 6, 8, 8, 1),
    (2, 6, -8, 8),
])
def test_backward_data_mismatched_input_shape(input_shape):
    with pytest.raises(ValueError, match=r"\binput_shape\b"):
        cconv.conv2d_backward_data(_g(), _w(), input_shape)


def test_backward_data_input_shape_in_layout_order():
    """input_shape is in layout order: an NCHW shape passed with layout="NHWC" is a mismatch."""
    g = np.zeros((2, 6, 6, 4), F32)                          # NHWC grad_out
    w = np.zeros((3, 3, 6, 4), F32)                          # HWIO
    dx = cconv.conv2d_backward_data(g, w, (2, 8, 8, 6), layout="NHWC", weight_layout="HWIO")
    assert dx.shape == (2, 8, 8, 6)
    with pytest.raises(ValueError, match=r"\binput_shape\b"):
        cconv.conv2d_backward_data(g, w, (2, 6, 8, 8), layout="NHWC", weight_layout="HWIO")


@pytest.mark.parametrize("weight_shape", [
    (5, 6, 3, 3),        # K differs from grad_out
    (4, 5, 3, 3),        # C differs from x
    (4, 6, 2, 3),        # kernel size inconsistent with grad_out's spatial size
    (4, 6, 3),
    (4, 6, 3, 3, 1),
])
def test_backward_weight_mismatched_weight_shape(weight_shape):
    with pytest.raises(ValueError, match=r"\bweight_shape\b"):
        cconv.conv2d_backward_weight(_g(), _x(), weight_shape)


@pytest.mark.parametrize("g_shape", [(2, 5, 6, 6), (2, 4, 7, 6), (1, 4, 6, 6), (2, 4, 6)])
def test_grad_out_inconsistent(g_shape):
    """grad_out whose shape is not the forward output shape."""
    with pytest.raises(ValueError, match=r"grad_out|input_shape|weight"):
        cconv.conv2d_backward_data(np.zeros(g_shape, F32), _w(), (2, 6, 8, 8))
    with pytest.raises(ValueError, match=r"grad_out|weight_shape|\bx\b"):
        cconv.conv2d_backward_weight(np.zeros(g_shape, F32), _x(), (4, 6, 3, 3))
    with pytest.raises(ValueError, match=r"grad_out|\bx\b|weight"):
        cconv.conv2d_backward(np.zeros(g_shape, F32), _x(), _w())


@pytest.mark.parametrize("need", [("data", "weights"), ("input",), "everything", ("bias", 1)])
def test_bad_need(need):
    with pytest.raises((ValueError, TypeError), match=r"\bneed\b"):
        cconv.conv2d_backward(_g(), _x(), _w(), need=need)


# --------------------------------------------------------------------------------------------
# threads and algorithms
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(CALLS))
@pytest.mark.parametrize("num_threads", [0, -1, -8])
def test_num_threads_not_positive(name, num_threads):
    with pytest.raises(ValueError, match=r"\bnum_threads\b"):
        CALLS[name](num_threads=num_threads)


@pytest.mark.parametrize("n", [0, -1])
def test_set_num_threads_not_positive(n):
    before = cconv.get_num_threads()
    with pytest.raises(ValueError, match=r"num_threads|\bn\b|threads"):
        cconv.set_num_threads(n)
    assert cconv.get_num_threads() == before


@pytest.mark.parametrize("name", list(CALLS))
@pytest.mark.parametrize("algo", ["fastest", "", "DIRECT ", "fft_magic"])
def test_unknown_algo(name, algo):
    with pytest.raises(ValueError, match=r"\balgo\b"):
        CALLS[name](algo=algo)


def test_winograd_on_5x5_kernel_says_why():
    with pytest.raises(ValueError, match=r"3x3|3 x 3|\(3, 3\)|kernel") as info:
        cconv.conv2d(_x(), _w((4, 6, 5, 5)), algo="winograd")
    assert "winograd" in str(info.value).lower()
    with pytest.raises(ValueError, match=r"3x3|3 x 3|\(3, 3\)|kernel"):
        cconv.conv2d_backward_data(_g((2, 4, 4, 4)), _w((4, 6, 5, 5)), (2, 6, 8, 8),
                                   algo="winograd")
    with pytest.raises(ValueError, match=r"3x3|3 x 3|\(3, 3\)|kernel"):
        cconv.conv2d_backward_weight(_g((2, 4, 4, 4)), _x(), (4, 6, 5, 5), algo="winograd")


def test_winograd_on_stride_or_dilation_says_why():
    with pytest.raises(ValueError, match=r"stride"):
        cconv.conv2d(_x(), _w(), stride=2, algo="winograd")
    with pytest.raises(ValueError, match=r"dilation"):
        cconv.conv2d(_x(), _w(), dilation=2, algo="winograd")


# --------------------------------------------------------------------------------------------
# sizes: zero and overflowing
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("x_shape, w_shape", [
    ((1, 0, 5, 5), (4, 0, 3, 3)),         # zero input channels
    ((1, 3, 5, 5), (0, 3, 3, 3)),         # zero output channels
    ((1, 3, 0, 5), (4, 3, 1, 1)),         # zero height
    ((1, 3, 5, 0), (4, 3, 1, 1)),         # zero width
    ((1, 3, 5, 5), (4, 3, 0, 3)),         # zero kernel height
    ((1, 3, 5, 5), (4, 3, 3, 0)),         # zero kernel width
])
def test_zero_channels_or_spatial_size(x_shape, w_shape):
    with pytest.raises(ValueError):
        cconv.conv2d(np.zeros(x_shape, F32), np.zeros(w_shape, F32))


def test_zero_channels_in_gradients():
    with pytest.raises(ValueError):
        cconv.conv2d_backward_data(np.zeros((1, 4, 3, 3), F32), np.zeros((4, 0, 3, 3), F32),
                                   (1, 0, 5, 5))
    with pytest.raises(ValueError):
        cconv.conv2d_backward_weight(np.zeros((1, 0, 3, 3), F32), np.zeros((1, 3, 5, 5), F32),
                                     (0, 3, 3, 3))
    with pytest.raises(ValueError):
        cconv.conv_transpose2d(np.zeros((1, 0, 3, 3), F32), np.zeros((0, 4, 3, 3), F32))


def test_output_size_overflow():
    # x owns no memory; the output would hold 2**34 * 2**60 elements
    x = _huge((1, 1, 2 ** 30, 2 ** 30))
    w = _huge((2 ** 34, 1, 1, 1))
    with pytest.raises(ValueError):
        cconv.conv2d(x, w)


def test_input_shape_overflow():
    g = _huge((1, 4, 2 ** 29, 2 ** 29))
    w = np.zeros((4, 3, 1, 1), F32)
    with pytest.raises(ValueError):
        cconv.conv2d_backward_data(g, w, (1, 3, 2 ** 62, 2 ** 62), stride=2 ** 33)


def test_weight_shape_overflow():
    g = _huge((1, 2 ** 32, 1, 1))
    x = _huge((1, 2 ** 32, 1, 1))
    with pytest.raises(ValueError):
        cconv.conv2d_backward_weight(g, x, (2 ** 32, 2 ** 32, 1, 1))


@pytest.mark.parametrize("x_shape, w_shape", [
    ((2 ** 40, 2 ** 40, 2 ** 40, 2 ** 40), (1, 2 ** 40, 1, 1)),
    ((2 ** 31, 1, 2 ** 31, 2 ** 31), (1, 1, 1, 1)),
    ((1, 1, 2 ** 62, 2 ** 62), (2, 1, 1, 1)),
    ((1, 2 ** 62, 4, 4), (4, 2 ** 62, 3, 3)),
])
def test_plan_overflow(x_shape, w_shape):
    """Pure shape arithmetic: nothing may be allocated, a ValueError must come out."""
    with pytest.raises(ValueError):
        cconv.plan_conv2d(x_shape, w_shape)


def test_transpose_output_overflow():
    x = _huge((1, 1, 2 ** 30, 2 ** 30))
    w = _huge((1, 2 ** 20, 1, 1))
    with pytest.raises(ValueError):
        cconv.conv_transpose2d(x, w, stride=2 ** 20)


# --------------------------------------------------------------------------------------------
# transposed convolution specifics
# --------------------------------------------------------------------------------------------

def test_transpose_weight_channel_mismatch():
    with pytest.raises(ValueError, match=r"\bweight\b|\bx\b"):
        cconv.conv_transpose2d(_x((1, 5, 4, 4)), _w((6, 2, 3, 3)))


def test_transpose_groups_not_dividing():
    with pytest.raises(ValueError, match=r"\bgroups\b"):
        cconv.conv_transpose2d(_x((1, 6, 4, 4)), _w((6, 2, 3, 3)), groups=4)


@pytest.mark.parametrize("op", [2, (0, 2), (3, 0), -1])
def test_transpose_output_padding_too_big(op):
    with pytest.raises(ValueError, match=r"\boutput_padding\b"):
        cconv.conv_transpose2d(_x((1, 6, 4, 4)), _w((6, 2, 3, 3)), stride=2, output_padding=op)


@pytest.mark.parametrize("output_shape", [
    (1, 2, 9, 9),         # wrong channel count (K is 3)
    (2, 3, 9, 9),         # wrong batch
    (1, 3, 8, 9),         # smaller than the output_padding=0 size
    (1, 3, 11, 9),        # would need output_padding 2 >= stride 2
    (1, 3, 9, 12),
    (1, 3, 9),            # not 4-D
])
def test_transpose_bad_output_shape(output_shape):
    x = _x((1, 6, 4, 4))
    w = _w((6, 3, 3, 3))               # K = 3; output (1, 3, 9, 9) at stride 2
    assert cconv.conv_transpose2d(x, w, stride=2).shape == (1, 3, 9, 9)
    assert cconv.conv_transpose2d(x, w, stride=2, output_shape=(1, 3, 10, 9)).shape == \
        (1, 3, 10, 9)
    with pytest.raises(ValueError, match=r"\boutput_shape\b"):
        cconv.conv_transpose2d(x, w, stride=2, output_shape=output_shape)


def test_transpose_bad_padding_string():
    with pytest.raises(ValueError, match=r"\bpadding\b"):
        cconv.conv_transpose2d(_x((1, 6, 4, 4)), _w((6, 2, 3, 3)), padding="full")


# --------------------------------------------------------------------------------------------
# planning API
# --------------------------------------------------------------------------------------------

def test_plan_validates_like_conv2d():
    with pytest.raises(ValueError, match=r"\bstride\b"):
        cconv.plan_conv2d((2, 6, 8, 8), (4, 6, 3, 3), stride=0)
    with pytest.raises(ValueError, match=r"\bweight\b|\bweight_shape\b|\bx_shape\b"):
        cconv.plan_conv2d((2, 6, 8, 8), (4, 5, 3, 3))
    with pytest.raises(ValueError, match=r"\bgroups\b"):
        cconv.plan_conv2d((2, 6, 8, 8), (4, 6, 3, 3), groups=4)
    with pytest.raises(ValueError, match=r"\blayout\b"):
        cconv.plan_conv2d((2, 6, 8, 8), (4, 6, 3, 3), layout="CHWN")
    with pytest.raises(ValueError, match=r"\balgo\b"):
        cconv.plan_conv2d((2, 6, 8, 8), (4, 6, 3, 3), algo="magic")
    with pytest.raises(TypeError, match=r"int32"):
        cconv.plan_conv2d((2, 6, 8, 8), (4, 6, 3, 3), dtype="int32")


def test_find_algorithms_bad_op():
    with pytest.raises(ValueError, match=r"\bop\b"):
        cconv.find_algorithms((1, 2, 6, 6), (2, 2, 3, 3), op="sideways")
