"""cconv.compat.tensorflow in 1-D and 3-D: conv1d / conv3d and their backprops.

Hand-worked cases run a short signal along one spatial axis with a filter of 1 or 2 taps, so
every expected number can be checked in the comments. The randomized cases compare with the
float64 reference of ``support.reference_nd`` and with PyTorch, both given TensorFlow's
"SAME" padding explicitly (``tf_pads`` below, TensorFlow's rule written out).
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cconv.compat import tensorflow as tf
from support.checks import assert_close
from support.reference_nd import (from_channels_last, ref_backward_data, ref_backward_weight,
                                  ref_conv, to_channels_last, weight_from_last, weight_to_last)

FORMATS = {1: ("NWC", "NCW"), 3: ("NDHWC", "NCDHW")}
FUNCS = {
    1: (tf.conv1d, tf.conv1d_backprop_input, tf.conv1d_backprop_filter),
    3: (tf.conv3d, tf.conv3d_backprop_input_v2, tf.conv3d_backprop_filter_v2),
}


def tf_pads(padding, spatial, kernel, stride, dilation):
    """TensorFlow's padding per spatial axis: "VALID" none; "SAME" output ceil(in / stride)
    with total max((out - 1) * s + (k - 1) * d + 1 - in, 0), the odd pixel at the end."""
    if padding == "VALID":
        return tuple((0, 0) for _ in spatial)
    out = []
    for size, k, s, d in zip(spatial, kernel, stride, dilation):
        total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
        out.append((total // 2, total - total // 2))
    return tuple(out)


def channels_first(a, fmt):
    return from_channels_last(a) if fmt.endswith("C") else a


def in_format(a, fmt):
    """A channels-first array in ``fmt`` order."""
    return to_channels_last(a) if fmt.endswith("C") else np.ascontiguousarray(a)


def along(values, axis, rank, fmt):
    """A 1-channel, batch-1 input whose spatial axis ``axis`` holds ``values``."""
    shape = [1] * rank
    shape[axis] = len(values)
    a = np.asarray(values, dtype=np.float64).reshape((1, 1, *shape))
    return in_format(a, fmt)


def filt_along(values, axis, rank):
    """A [*kernel, 1, 1] filter whose kernel axis ``axis`` holds ``values``."""
    shape = [1] * rank
    shape[axis] = len(values)
    return np.asarray(values, dtype=np.float64).reshape((*shape, 1, 1))


# ------------------------------------------------------------------ hand-worked: 1-D


@pytest.mark.parametrize("fmt", FORMATS[1])
def test_conv1d_same_odd_total_padding_goes_to_the_end(fmt):
    # W=2, fw=2, stride 1: out 2, total padding 1 -> before 0, after 1.
    # x = [1, 2], f = [1, 10]: y0 = 1 + 20 = 21, y1 = 2 + 10*0 = 2
    # (with the extra column first it would be [10, 21])
    y = tf.conv1d(along([1, 2], 0, 1, fmt), filt_along([1, 10], 0, 1), 1, "SAME", fmt)
    assert y.shape == ((1, 2, 1) if fmt == "NWC" else (1, 1, 2))
    np.testing.assert_allclose(y.ravel(), [21, 2])


@pytest.mark.parametrize("fmt, stride", [("NWC", 2), ("NWC", [2]), ("NWC", [1, 2, 1]),
                                         ("NCW", (2,)), ("NCW", [1, 1, 2]), ("NCW", np.int64(2))])
def test_conv1d_same_stride_forms(fmt, stride):
    # W=5, fw=2, stride 2: out ceil(5/2) = 3, total (3-1)*2 + 2 - 5 = 1 at the end:
    # y = [x0 + 10 x1, x2 + 10 x3, x4 + 10*0] = [21, 43, 5]
    y = tf.conv1d(along([1, 2, 3, 4, 5], 0, 1, fmt), filt_along([1, 10], 0, 1), stride, "SAME",
                  fmt)
    np.testing.assert_allclose(y.ravel(), [21, 43, 5])


def test_conv1d_valid_dilation_and_pairs():
    x = along([1, 2, 3, 4, 5], 0, 1, "NWC")
    f = filt_along([1, 10], 0, 1)
    # fw=2 dilated by 2 spans 3: y[i] = x[i] + 10 x[i+2] = [31, 42, 53]
    np.testing.assert_allclose(tf.conv1d(x, f, 1, "VALID", dilations=[1, 2, 1]).ravel(),
                               [31, 42, 53])
    np.testing.assert_allclose(tf.conv1d(x, f, 1, b"VALID", dilations=2).ravel(), [31, 42, 53])
    # three (before, after) pairs in NWC order: 1 before along W -> [0 + 10, 1 + 20, ...]
    y = tf.conv1d(x[:, :2], f, 1, [[0, 0], [1, 0], [0, 0]])
    np.testing.assert_allclose(y.ravel(), [10, 21])


def test_conv1d_takes_the_2d_format_names():
    # tf.nn.conv1d reads "NHWC" / "NCHW" as "NWC" / "NCW"
    rng = np.random.default_rng(0)
    x, f = rng.standard_normal((2, 6, 3)), rng.standard_normal((2, 3, 4))
    np.testing.assert_allclose(tf.conv1d(x, f, 2, "SAME", "NHWC"), tf.conv1d(x, f, 2, "SAME"))
    xc = x.transpose(0, 2, 1)
    np.testing.assert_allclose(tf.conv1d(xc, f, 2, "SAME", "NCHW"),
                               tf.conv1d(xc, f, 2, "SAME", "NCW"))


def test_conv1d_backprops_hand_worked():
    # forward SAME as above: y0 = f0 x0 + f1 x1, y1 = f0 x1; dy = [1, 1]
    # dx = [f0, f1 + f0] = [1, 11];  df = [x0 + x1, x1] = [3, 2]
    f = filt_along([1, 10], 0, 1)
    dy = np.ones((1, 2, 1))
    np.testing.assert_allclose(tf.conv1d_backprop_input([1, 2, 1], f, dy, 1, "SAME").ravel(),
                               [1, 11])
    # input_sizes may be the width alone
    np.testing.assert_allclose(tf.conv1d_backprop_input([2], f, dy, 1, "SAME").ravel(), [1, 11])
    df = tf.conv1d_backprop_filter(along([1, 2], 0, 1, "NWC"), [2, 1, 1], dy, 1, "SAME")
    assert df.shape == (2, 1, 1)
    np.testing.assert_allclose(df.ravel(), [3, 2])


def test_conv1d_backprop_input_size_is_taken_from_input_sizes():
    # W=4 and W=3 both give 2 outputs with fw=1, stride 2, VALID; input_sizes picks the shape.
    dy = np.array([1.0, 2.0]).reshape(1, 2, 1)
    f = filt_along([1], 0, 1)
    np.testing.assert_allclose(tf.conv1d_backprop_input([1, 4, 1], f, dy, 2, "VALID").ravel(),
                               [1, 0, 2, 0])
    np.testing.assert_allclose(tf.conv1d_backprop_input([1, 3, 1], f, dy, 2, "VALID").ravel(),
                               [1, 0, 2])


def test_grouped_conv1d_from_filter_in_channels():
    # input depth 4, filters in_channels 2 -> 2 groups; 1-tap filters of ones, 2 outputs:
    # out 0 = x0 + x1, out 1 = x2 + x3
    x = np.array([1.0, 2, 4, 8]).reshape(1, 1, 4)
    np.testing.assert_allclose(tf.conv1d(x, np.ones((1, 2, 2)), 1, "VALID").ravel(), [3, 12])


@pytest.mark.parametrize("fmt", FORMATS[1])
def test_conv1d_gradients_are_conv2d_backprops_of_the_expanded_problem(fmt):
    # tf.nn.conv1d = Conv2D on the input expanded to height 1, filter [1, fw, in, out]
    rng = np.random.default_rng(3)
    x = in_format(rng.standard_normal((2, 4, 7)), fmt)
    f = rng.standard_normal((3, 2, 6))
    h_axis = 1 if fmt == "NWC" else 2
    fmt2 = "NHWC" if fmt == "NWC" else "NCHW"
    x2, f2 = np.expand_dims(x, h_axis), f[None]
    strides2 = [1, 1, 2, 1] if fmt == "NWC" else [1, 1, 1, 2]
    dil2 = [1, 1, 2, 1] if fmt == "NWC" else [1, 1, 1, 2]
    y = tf.conv1d(x, f, 2, "SAME", fmt, 2)
    y2 = tf.conv2d(x2, f2, strides2, "SAME", fmt2, dil2)
    np.testing.assert_allclose(y, y2.squeeze(h_axis), rtol=1e-12, atol=1e-12)
    dy = rng.standard_normal(y.shape)
    dy2 = np.expand_dims(dy, h_axis)
    dx = tf.conv1d_backprop_input(x.shape, f, dy, 2, "SAME", fmt, 2)
    dx2 = tf.conv2d_backprop_input(x2.shape, f2, dy2, strides2, "SAME", fmt2, dil2)
    np.testing.assert_allclose(dx, dx2.squeeze(h_axis), rtol=1e-12, atol=1e-12)
    df = tf.conv1d_backprop_filter(x, f.shape, dy, 2, "SAME", fmt, 2)
    df2 = tf.conv2d_backprop_filter(x2, f2.shape, dy2, strides2, "SAME", fmt2, dil2)
    np.testing.assert_allclose(df, df2[0], rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ hand-worked: 3-D


@pytest.mark.parametrize("fmt", FORMATS[3])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_conv3d_same_odd_padding_goes_to_the_end_on_every_axis(fmt, axis):
    # along D, H or W: x = [1, 2], f = [1, 10], SAME: total 1 at the end -> [21, 2]
    y = tf.conv3d(along([1, 2], axis, 3, fmt), filt_along([1, 10], axis, 3),
                  [1, 1, 1, 1, 1], "SAME", fmt)
    np.testing.assert_allclose(y.ravel(), [21, 2])
    # stride 2 along that axis only, 5 samples: [x0 + 10 x1, x2 + 10 x3, x4] = [21, 43, 5]
    s = [1, 1, 1]
    s[axis] = 2
    y = tf.conv3d(along([1, 2, 3, 4, 5], axis, 3, fmt), filt_along([1, 10], axis, 3), s,
                  "SAME", fmt)
    np.testing.assert_allclose(y.ravel(), [21, 43, 5])


def test_conv3d_same_cube():
    # 2x2x2 input 1..8, 2x2x2 filter of ones, SAME: one pixel of padding at the back, bottom
    # and right, so y[i, j, k] sums x over [i:i+2, j:j+2, k:k+2] clipped to the input:
    # y[0,0,0] = 1+...+8 = 36, y[1,0,0] = 5+6+7+8 = 26, y[0,1,1] = 4 + 8 = 12, y[1,1,1] = 8
    x = np.arange(1.0, 9.0).reshape(1, 2, 2, 2, 1)
    y = tf.conv3d(x, np.ones((2, 2, 2, 1, 1)), 1, "SAME")
    assert y.shape == (1, 2, 2, 2, 1)
    assert (y[0, 0, 0, 0, 0], y[0, 1, 0, 0, 0], y[0, 0, 1, 1, 0], y[0, 1, 1, 1, 0]) == (
        36, 26, 12, 8)


def test_conv3d_dilation_and_pairs():
    x = along([1, 2, 3, 4, 5], 1, 3, "NDHWC")
    f = filt_along([1, 10], 1, 3)
    # along H, dilation 2: y[i] = x[i] + 10 x[i+2] = [31, 42, 53]
    y = tf.conv3d(x, f, 1, "VALID", dilations=[1, 1, 2, 1, 1])
    np.testing.assert_allclose(y.ravel(), [31, 42, 53])
    # five pairs in NCDHW order: 1 before along H -> [0*1 + 1*10, 1 + 20] = [10, 21]
    xc = along([1, 2], 1, 3, "NCDHW")
    y = tf.conv3d(xc, f, 1, [[0, 0], [0, 0], [0, 0], [1, 0], [0, 0]], "NCDHW")
    np.testing.assert_allclose(y.ravel(), [10, 21])


def test_conv3d_backprops_hand_worked():
    # along D, SAME, as in 1-D: dx = [1, 11], df = [3, 2]
    f = filt_along([1, 10], 0, 3)
    dy = np.ones((1, 2, 1, 1, 1))
    dx = tf.conv3d_backprop_input_v2([1, 2, 1, 1, 1], f, dy, [1, 1, 1, 1, 1], "SAME")
    np.testing.assert_allclose(dx.ravel(), [1, 11])
    np.testing.assert_allclose(
        tf.conv3d_backprop_input_v2(np.array([2, 1, 1]), f, dy, 1, "SAME"), dx)
    df = tf.conv3d_backprop_filter_v2(along([1, 2], 0, 3, "NDHWC"), [2, 1, 1, 1, 1], dy,
                                      [1, 1, 1, 1, 1], "SAME")
    assert df.shape == (2, 1, 1, 1, 1)
    np.testing.assert_allclose(df.ravel(), [3, 2])


def test_grouped_conv3d_from_filter_in_channels():
    # input channels 4, filter in_channels 2 -> 2 groups: out 0 = x0 + x1, out 1 = x2 + x3
    x = np.array([1.0, 2, 4, 8]).reshape(1, 1, 1, 1, 4)
    np.testing.assert_allclose(tf.conv3d(x, np.ones((1, 1, 1, 2, 2)), 1, "VALID").ravel(),
                               [3, 12])
    xc = x.reshape(1, 4, 1, 1, 1)
    np.testing.assert_allclose(
        tf.conv3d(xc, np.ones((1, 1, 1, 2, 2)), 1, "VALID", "NCDHW").ravel(), [3, 12])


# ------------------------------------------------------------------ randomized cross-checks


def _tf_list(values, fmt, form):
    """A per-axis setting as TensorFlow takes it: an int, 1 entry, the spatial entries, or one
    entry per dimension in ``fmt`` order (1 for batch and channels)."""
    same = len(set(values)) == 1
    if form == "int" and same:
        return values[0]
    if form == "one" and same:
        return [values[0]]
    if form == "spatial":
        return list(values)
    return [1, *values, 1] if fmt.endswith("C") else [1, 1, *values]


@st.composite
def problems(draw, rank, dtypes=(np.float64, np.float64, np.float32)):
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(rank))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    padding = draw(st.sampled_from(["SAME", "VALID", "pairs"]))
    explicit = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in range(rank))
    extra = 6 if rank == 1 else 3
    spatial = []
    for k, d, (lo, hi) in zip(kernel, dilation, explicit):
        eff = (k - 1) * d + 1
        least = {"SAME": 1, "VALID": eff, "pairs": max(1, eff - lo - hi)}[padding]
        spatial.append(draw(st.integers(least, least + extra)))
    spatial = tuple(spatial)
    pads = explicit if padding == "pairs" else tf_pads(padding, spatial, kernel, stride,
                                                        dilation)
    fmt = draw(st.sampled_from(FORMATS[rank]))
    padding_arg = padding
    if padding == "pairs":
        pairs = [list(p) for p in explicit]
        padding_arg = ([[0, 0], *pairs, [0, 0]] if fmt.endswith("C")
                       else [[0, 0], [0, 0], *pairs])
    forms = st.sampled_from(["int", "one", "spatial", "full"])
    dil_form = draw(st.sampled_from(["none", "int", "one", "spatial", "full"]))
    return dict(
        rank=rank, fmt=fmt, n=draw(st.integers(1, 2)), groups=draw(st.integers(1, 2)),
        cg=draw(st.integers(1, 2)), kg=draw(st.integers(1, 2)), spatial=spatial,
        kernel=kernel, stride=stride, dilation=dilation, pads=pads, padding=padding_arg,
        strides_arg=_tf_list(stride, fmt, draw(forms)),
        dilations_arg=(None if dil_form == "none" and set(dilation) == {1}
                       else _tf_list(dilation, fmt, dil_form)),
        dtype=draw(st.sampled_from(dtypes)), sizes_form=draw(st.sampled_from(["full", "spatial"])),
        seed=draw(st.integers(0, 2**16)),
    )


def _arrays(p):
    """x (channels first, float64 values of the drawn dtype), the TF filter and the reference
    weight (K, C/g, *kernel), and a gradient source."""
    rng = np.random.default_rng(p["seed"])
    c, k = p["cg"] * p["groups"], p["kg"] * p["groups"]
    x = rng.standard_normal((p["n"], c, *p["spatial"])).astype(p["dtype"])
    f = rng.standard_normal((*p["kernel"], p["cg"], k)).astype(p["dtype"])
    return x, f, weight_from_last(f), rng


def _input_sizes(p, x_tf):
    if p["sizes_form"] == "spatial" and p["groups"] == 1:  # depth is then the filter's
        return list(p["spatial"])
    return np.array(x_tf.shape)


def _check_against_reference(p):
    fmt, dtype = p["fmt"], np.dtype(p["dtype"])
    forward, backprop_input, backprop_filter = FUNCS[p["rank"]]
    x, f, w, rng = _arrays(p)
    x_tf = in_format(x, fmt)
    geometry = (p["strides_arg"], p["padding"], fmt, p["dilations_arg"])
    ref_kw = dict(stride=p["stride"], pads=p["pads"], dilation=p["dilation"],
                  groups=p["groups"])

    y = forward(x_tf, f, *geometry)
    assert y.dtype == dtype
    y_ref = ref_conv(x, w, **ref_kw)
    assert_close(channels_first(y, fmt), y_ref, dtype=dtype, what="forward")

    gy = rng.standard_normal(y_ref.shape).astype(dtype)
    dy = in_format(gy, fmt)
    dx = backprop_input(_input_sizes(p, x_tf), f, dy, *geometry)
    assert dx.dtype == dtype and dx.shape == x_tf.shape
    assert_close(channels_first(dx, fmt), ref_backward_data(gy, w, x.shape, **ref_kw),
                 dtype=dtype, what="backprop_input")

    df = backprop_filter(x_tf, list(f.shape), dy, *geometry)
    assert df.dtype == dtype and df.shape == f.shape
    assert_close(df, weight_to_last(ref_backward_weight(gy, x, w.shape, **ref_kw)), dtype=dtype,
                 what="backprop_filter")


@settings(max_examples=60, deadline=None)
@given(problems(1))
def test_conv1d_and_backprops_match_reference(p):
    _check_against_reference(p)


@settings(max_examples=50, deadline=None)
@given(problems(3))
def test_conv3d_and_backprops_match_reference(p):
    _check_against_reference(p)


def _torch_results(p, x, w, gy):
    """float64 forward, d/dx and d/dw by torch on the explicitly padded input."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    wt = torch.tensor(np.ascontiguousarray(w), dtype=torch.float64, requires_grad=True)
    pad = [v for pair in reversed(p["pads"]) for v in pair]  # F.pad: last axis first
    conv = F.conv1d if p["rank"] == 1 else F.conv3d
    yt = conv(F.pad(xt, pad), wt, stride=p["stride"], dilation=p["dilation"],
              groups=p["groups"])
    dx, dw = torch.autograd.grad(yt, (xt, wt), torch.tensor(gy))
    return yt.detach().numpy(), dx.numpy(), dw.numpy()


@pytest.mark.parametrize("rank", [1, 3])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_against_torch(rank, data):
    pytest.importorskip("torch")
    p = data.draw(problems(rank, dtypes=(np.float64,)))
    fmt = p["fmt"]
    forward, backprop_input, backprop_filter = FUNCS[rank]
    x, f, w, rng = _arrays(p)
    x_tf = in_format(x, fmt)
    geometry = (p["strides_arg"], p["padding"], fmt, p["dilations_arg"])
    y = forward(x_tf, f, *geometry)
    gy = rng.standard_normal(channels_first(y, fmt).shape)
    y_t, dx_t, dw_t = _torch_results(p, x, w, gy)
    np.testing.assert_allclose(channels_first(y, fmt), y_t, rtol=1e-10, atol=1e-10)
    dy = in_format(gy, fmt)
    dx = backprop_input(x_tf.shape, f, dy, *geometry)
    np.testing.assert_allclose(channels_first(dx, fmt), dx_t, rtol=1e-10, atol=1e-10)
    df = backprop_filter(x_tf, f.shape, dy, *geometry)
    np.testing.assert_allclose(df, weight_to_last(dw_t), rtol=1e-10, atol=1e-10)


# ------------------------------------------------------------------ bad input


X1, F1 = np.ones((1, 4, 2)), np.ones((2, 2, 3))  # NWC input, [fw, in, out] filters
X3, F3 = np.ones((1, 3, 4, 4, 2)), np.ones((1, 2, 2, 2, 3))  # NDHWC input, 5-D filter


def test_bad_data_format():
    with pytest.raises(ValueError, match="data_format must be 'NWC' or 'NCW'"):
        tf.conv1d(X1, F1, 1, "VALID", "NDHWC")
    with pytest.raises(ValueError, match="data_format must be 'NDHWC' or 'NCDHW'"):
        tf.conv3d(X3, F3, 1, "VALID", "NHWC")
    with pytest.raises(ValueError, match="data_format"):
        tf.conv3d_backprop_filter_v2(X3, F3.shape, np.ones((1, 3, 3, 3, 3)), 1, "VALID",
                                     "NCHW")


@pytest.mark.parametrize("fmt, strides", [("NDHWC", [2, 1, 1, 1, 1]), ("NDHWC", [1, 1, 1, 1, 2]),
                                         ("NCDHW", [1, 2, 1, 1, 1]), ("NCDHW", [2, 1, 1, 1, 1])])
def test_conv3d_batch_or_channel_strides_rejected(fmt, strides):
    x = X3 if fmt == "NDHWC" else X3.transpose(0, 4, 1, 2, 3)
    with pytest.raises(ValueError, match="strides in the batch and depth"):
        tf.conv3d(x, F3, strides, "VALID", fmt)
    with pytest.raises(ValueError, match="dilations in the batch and depth"):
        tf.conv3d(x, F3, 1, "VALID", fmt, strides)


def test_conv1d_batch_or_channel_stride_rejected():
    with pytest.raises(ValueError, match="stride in the batch and depth"):
        tf.conv1d(X1, F1, [1, 1, 2], "VALID")
    with pytest.raises(ValueError, match="stride in the batch and depth"):
        tf.conv1d_backprop_filter(X1, F1.shape, np.ones((1, 3, 3)), [2, 1, 1], "VALID")


def test_bad_stride_counts_and_values():
    with pytest.raises(ValueError, match="stride must be an int or have 1 or 3 entries"):
        tf.conv1d(X1, F1, [1, 2], "VALID")
    with pytest.raises(ValueError, match="strides must be an int or have 1, 3 or 5 entries"):
        tf.conv3d(X3, F3, [1, 2, 2, 1], "VALID")
    with pytest.raises(ValueError, match="dilations must be positive"):
        tf.conv3d(X3, F3, 1, "VALID", dilations=[1, 0, 1])
    with pytest.raises(ValueError, match="stride must be positive"):
        tf.conv1d(X1, F1, 0, "VALID")
    with pytest.raises(TypeError, match="stride must be an int"):
        tf.conv1d(X1, F1, 1.5, "VALID")
    with pytest.raises(TypeError, match="strides must be an integer"):
        tf.conv3d(X3, F3, [1, True, 1], "VALID")


@pytest.mark.parametrize("padding", ["EXPLICIT", "FULL", "same_lower"])
def test_padding_names_beyond_same_and_valid_rejected(padding):
    with pytest.raises(ValueError, match="padding must be 'SAME', 'VALID' or a list of 3"):
        tf.conv1d(X1, F1, 1, padding)
    with pytest.raises(ValueError, match="padding must be 'SAME', 'VALID' or a list of 5"):
        tf.conv3d(X3, F3, 1, padding)


@pytest.mark.parametrize("pairs", [
    [[0, 0], [1, 1], [0, 0]],                                  # 3 pairs for 3-D
    [[0, 0], [1, 1], [0, 0], [0, 0], [0, 1]],                  # channel padding
    [[1, 0], [0, 0], [0, 0], [0, 0], [0, 0]],                  # batch padding
    [[0, 0], [0, -1], [0, 0], [0, 0], [0, 0]],                 # negative
    [[0, 0], [1], [0, 0], [0, 0], [0, 0]],                     # not a pair
])
def test_bad_padding_pairs(pairs):
    with pytest.raises(ValueError, match="padding must"):
        tf.conv3d(X3, F3, 1, pairs)


def test_bad_ranks():
    with pytest.raises(ValueError, match="input must be 3-D"):
        tf.conv1d(X3, F1, 1, "VALID")
    with pytest.raises(ValueError, match="filters must be 3-D"):
        tf.conv1d(X1, np.ones((2, 2)), 1, "VALID")
    with pytest.raises(ValueError, match="filter must be 5-D"):
        tf.conv3d(X3, F1, 1, "VALID")
    with pytest.raises(ValueError, match="out_backprop must be 5-D"):
        tf.conv3d_backprop_input_v2(X3.shape, F3, np.ones((1, 3, 3, 3)), 1, "VALID")


def test_bad_groups():
    with pytest.raises(ValueError, match=r"input depth \(3\) must be a multiple of filters"):
        tf.conv1d(np.ones((1, 4, 3)), F1, 1, "VALID")
    with pytest.raises(ValueError, match=r"out_channels \(3\) must be divisible"):
        tf.conv3d(np.ones((1, 3, 4, 4, 4)), F3, 1, "VALID")
    with pytest.raises(ValueError, match="filter_sizes in_channels"):
        tf.conv3d_backprop_filter_v2(X3, [1, 2, 2, 3, 3], np.ones((1, 3, 3, 3, 3)), 1, "VALID")


def test_filter_larger_than_padded_input():
    with pytest.raises(ValueError, match="larger than the padded input .* along D"):
        tf.conv3d(X3, np.ones((4, 1, 1, 2, 3)), 1, "VALID")
    with pytest.raises(ValueError, match="larger than the padded input .* along W"):
        tf.conv1d(X1, np.ones((3, 2, 3)), 1, "VALID", dilations=2)


def test_backprop_shape_checks():
    with pytest.raises(ValueError, match="conv1d_backprop_input: out_backprop has shape"):
        tf.conv1d_backprop_input(X1.shape, F1, np.ones((1, 4, 3)), 1, "VALID")
    with pytest.raises(ValueError, match="Conv3DBackpropFilterV2: out_backprop has shape"):
        tf.conv3d_backprop_filter_v2(X3, F3.shape, np.ones((1, 3, 4, 4, 3)), 1, "VALID")
    with pytest.raises(ValueError, match=r"input_sizes must have 3 entries \(or the spatial"):
        tf.conv1d_backprop_input([1, 4], F1, np.ones((1, 3, 3)), 1, "VALID")
    with pytest.raises(ValueError, match=r"input_sizes must have 5 entries \(or the 3 spatial"):
        tf.conv3d_backprop_input_v2([1, 3, 4, 4], F3, np.ones((1, 3, 3, 3, 3)), 1, "VALID")
    with pytest.raises(ValueError, match="filter_sizes must have 5 entries"):
        tf.conv3d_backprop_filter_v2(X3, [1, 2, 2, 2], np.ones((1, 3, 3, 3, 3)), 1, "VALID")
    with pytest.raises(TypeError, match="filter_sizes must be an integer"):
        tf.conv1d_backprop_filter(X1, [2.0, 2, 3], np.ones((1, 3, 3)), 1, "VALID")
