"""cconv.compat.tensorflow: Conv2D / DepthwiseConv2dNative and their backprops.

Hand-worked cases use a 1-D signal along H in NHWC (shape (1, H, 1, 1)) and a filter
[fh, 1, 1, 1], so every expected number can be checked in the comments.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cconv
from cconv.compat import tensorflow as tf
from support.reference import resolve_padding


def sig(values):
    return np.asarray(values, dtype=np.float64).reshape(1, -1, 1, 1)  # NHWC, along H


def filt(values):
    return np.asarray(values, dtype=np.float64).reshape(-1, 1, 1, 1)  # [fh, 1, 1, 1]


# ------------------------------------------------------------------ SAME / VALID / EXPLICIT


def test_same_odd_total_padding_goes_to_the_bottom():
    # H=2, fh=2, stride 1: out = 2, total padding = (2-1)*1 + 2 - 2 = 1 -> top 0, bottom 1.
    # x = [1, 2], f = [1, 10]:  y0 = 1*1 + 2*10 = 21,  y1 = 2*1 + 0*10 = 2.
    # (with the extra row on top it would be [0*1 + 1*10, 1*1 + 2*10] = [10, 21])
    y = tf.conv2d(sig([1, 2]), filt([1, 10]), [1, 1, 1, 1], "SAME")
    np.testing.assert_allclose(y.ravel(), [21, 2])


def test_same_with_stride_uses_ceil_output_and_bottom_extra():
    # H=5, fh=2, stride 2: out = ceil(5/2) = 3, total = (3-1)*2 + 2 - 5 = 1 -> bottom 1.
    # y = [x0 + 10 x1, x2 + 10 x3, x4 + 10*0] = [21, 43, 5]
    y = tf.conv2d(sig([1, 2, 3, 4, 5]), filt([1, 10]), [1, 2, 2, 1], "SAME")
    np.testing.assert_allclose(y.ravel(), [21, 43, 5])


def test_same_never_pads_negatively():
    # H=5, fh=1, stride 3: out = 2, (2-1)*3 + 1 - 5 = -1 -> no padding: y = [x0, x3]
    y = tf.conv2d(sig([1, 2, 3, 4, 5]), filt([1]), 3, "SAME")
    np.testing.assert_allclose(y.ravel(), [1, 4])


def test_valid_and_dilation():
    # fh=2 dilated by 2 spans 3 rows: y[i] = x[i] + 10 x[i+2] = [31, 42, 53]
    y = tf.conv2d(sig([1, 2, 3, 4, 5]), filt([1, 10]), 1, "VALID", dilations=[1, 2, 1, 1])
    np.testing.assert_allclose(y.ravel(), [31, 42, 53])


def test_explicit_paddings_in_data_format_order():
    # NHWC explicit_paddings [N0, N1, top, bottom, left, right, C0, C1]: top 1, bottom 0
    # y = [0*1 + 1*10, 1 + 20] = [10, 21]
    y = tf.conv2d(sig([1, 2]), filt([1, 10]), 1, "EXPLICIT",
                  explicit_paddings=[0, 0, 1, 0, 0, 0, 0, 0])
    np.testing.assert_allclose(y.ravel(), [10, 21])
    # right padding 2 widens W: (1, 2, 1, 1) with 1x1 filter -> W = 3, new columns zero
    y = tf.conv2d(sig([1, 2]), filt([1]), 1, "EXPLICIT", explicit_paddings=[0, 0, 0, 0, 0, 2, 0, 0])
    assert y.shape == (1, 2, 3, 1)
    np.testing.assert_allclose(y[0, :, 0, 0], [1, 2])
    np.testing.assert_allclose(y[0, :, 1:, 0], 0)
    # tf.nn.conv2d style: a list of 4 pairs
    y2 = tf.conv2d(sig([1, 2]), filt([1, 10]), 1, [[0, 0], [1, 0], [0, 0], [0, 0]])
    np.testing.assert_allclose(y2.ravel(), [10, 21])


def test_explicit_paddings_nchw_order():
    x = sig([1, 2]).transpose(0, 3, 1, 2)  # NCHW (1, 1, 2, 1)
    # NCHW order [N, N, C, C, top, bottom, left, right]
    y = tf.conv2d(x, filt([1, 10]), 1, "EXPLICIT", data_format="NCHW",
                  explicit_paddings=[0, 0, 0, 0, 1, 0, 0, 0])
    np.testing.assert_allclose(y.ravel(), [10, 21])


@pytest.mark.parametrize("pads", [[1, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 1], [0, 0, 1, 0],
                                  [0, 0, -1, 0, 0, 0, 0, 0]])
def test_bad_explicit_paddings(pads):
    with pytest.raises(ValueError, match="explicit_paddings|must"):
        tf.conv2d(sig([1, 2, 3]), filt([1]), 1, "EXPLICIT", explicit_paddings=pads)


def test_explicit_paddings_only_with_explicit():
    with pytest.raises(ValueError, match="explicit_paddings"):
        tf.conv2d(sig([1, 2, 3]), filt([1]), 1, "SAME", explicit_paddings=[0, 0, 1, 0, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="padding"):
        tf.conv2d(sig([1, 2, 3]), filt([1]), 1, "FULL")


# ------------------------------------------------------------------ strides / dilations


@pytest.mark.parametrize("fmt, strides", [("NHWC", [2, 1, 1, 1]), ("NHWC", [1, 1, 1, 2]),
                                         ("NCHW", [1, 2, 1, 1]), ("NCHW", [2, 1, 1, 1])])
def test_batch_or_channel_strides_rejected(fmt, strides):
    x = np.ones((1, 4, 4, 1)) if fmt == "NHWC" else np.ones((1, 1, 4, 4))
    with pytest.raises(ValueError, match="batch and depth"):
        tf.conv2d(x, np.ones((1, 1, 1, 1)), strides, "VALID", data_format=fmt)
    with pytest.raises(ValueError, match="batch and depth"):
        tf.conv2d(x, np.ones((1, 1, 1, 1)), 1, "VALID", data_format=fmt, dilations=strides)


def test_strides_in_data_format_order():
    x = np.arange(20.0).reshape(1, 4, 5, 1)
    one = np.ones((1, 1, 1, 1))
    y = tf.conv2d(x, one, [1, 2, 1, 1], "VALID")  # NHWC: H stride 2
    assert y.shape == (1, 2, 5, 1)
    np.testing.assert_allclose(y[0, :, :, 0], x[0, ::2, :, 0])
    # NCHW: W stride 2
    yc = tf.conv2d(x.transpose(0, 3, 1, 2), one, [1, 1, 1, 2], "VALID", data_format="NCHW")
    assert yc.shape == (1, 1, 4, 3)
    np.testing.assert_allclose(yc[0, 0], x[0, :, ::2, 0])
    # int and 2-list forms
    np.testing.assert_allclose(tf.conv2d(x, one, [2, 1], "VALID"), y)
    assert tf.conv2d(x, one, 2, "VALID").shape == (1, 2, 3, 1)


def test_bad_data_format():
    with pytest.raises(ValueError, match="data_format"):
        tf.conv2d(np.ones((1, 3, 3, 1)), np.ones((1, 1, 1, 1)), 1, "VALID", data_format="NWHC")


# ------------------------------------------------------------------ backprops, hand-worked


def test_conv2d_backprop_input_same():
    # forward (see test above): y0 = 1*x0 + 10*x1, y1 = 1*x1  ->  with dy = [1, 1]:
    # dx0 = 1, dx1 = 10 + 1 = 11
    dx = tf.conv2d_backprop_input([1, 2, 1, 1], filt([1, 10]), np.ones((1, 2, 1, 1)),
                                  [1, 1, 1, 1], "SAME")
    np.testing.assert_allclose(dx.ravel(), [1, 11])
    # input_sizes may give only the spatial size
    dx2 = tf.conv2d_backprop_input([2, 1], filt([1, 10]), np.ones((1, 2, 1, 1)), 1, "SAME")
    np.testing.assert_allclose(dx2, dx)


def test_conv2d_backprop_input_strided_size_is_taken_from_input_sizes():
    # H=4 and H=3 both give 2 outputs with fh=1, stride 2, VALID; input_sizes picks the shape.
    dy = np.array([1.0, 2.0]).reshape(1, 2, 1, 1)
    np.testing.assert_allclose(
        tf.conv2d_backprop_input([1, 4, 1, 1], filt([1]), dy, 2, "VALID").ravel(), [1, 0, 2, 0])
    np.testing.assert_allclose(
        tf.conv2d_backprop_input([1, 3, 1, 1], filt([1]), dy, 2, "VALID").ravel(), [1, 0, 2])


def test_conv2d_backprop_filter_same():
    # y0 = f0 x0 + f1 x1, y1 = f0 x1 + f1 * 0 ; x = [1, 2], dy = [1, 1]:
    # df0 = x0 + x1 = 3, df1 = x1 = 2
    df = tf.conv2d_backprop_filter(sig([1, 2]), [2, 1, 1, 1], np.ones((1, 2, 1, 1)), 1, "SAME")
    assert df.shape == (2, 1, 1, 1)
    np.testing.assert_allclose(df.ravel(), [3, 2])


def test_backprop_checks_out_backprop_shape():
    with pytest.raises(ValueError, match="out_backprop"):
        tf.conv2d_backprop_input([1, 5, 1, 1], filt([1, 1]), np.ones((1, 5, 1, 1)), 1, "VALID")
    with pytest.raises(ValueError, match="out_backprop"):
        tf.conv2d_backprop_filter(sig([1, 2, 3]), [2, 1, 1, 1], np.ones((1, 3, 1, 1)), 1, "VALID")


# ------------------------------------------------------------------ depthwise


def test_depthwise_output_channel_is_c_times_multiplier_plus_m():
    # x channels [1, 2]; 1x1 filter f[c, m] = [[1, 2, 3], [4, 5, 6]]: out[c*3 + m] = x_c f[c, m]
    x = np.array([1.0, 2.0]).reshape(1, 1, 1, 2)
    f = np.array([[1.0, 2, 3], [4, 5, 6]]).reshape(1, 1, 2, 3)
    y = tf.depthwise_conv2d_native(x, f, [1, 1, 1, 1], "VALID")
    assert y.shape == (1, 1, 1, 6)
    np.testing.assert_allclose(y.ravel(), [1, 2, 3, 8, 10, 12])


def test_depthwise_channels_do_not_mix_and_same_pads_bottom():
    # channel 0 = [1, 2], channel 1 = [3, 4] along H; filter fh=2, multiplier 1,
    # f[:, c] = [1, 10] for c=0 and [1, 100] for c=1, SAME (extra row at the bottom):
    # ch0: [1 + 20, 2] ; ch1: [3 + 400, 4]
    x = np.array([[1.0, 3.0], [2.0, 4.0]]).reshape(1, 2, 1, 2)
    f = np.array([[1.0, 1.0], [10.0, 100.0]]).reshape(2, 1, 2, 1)
    y = tf.depthwise_conv2d_native(x, f, 1, "SAME")
    np.testing.assert_allclose(y[0, :, 0, 0], [21, 2])
    np.testing.assert_allclose(y[0, :, 0, 1], [403, 4])
    # NCHW gives the same numbers in NCHW order
    yc = tf.depthwise_conv2d_native(x.transpose(0, 3, 1, 2), f, [1, 1, 1, 1], "SAME",
                                    data_format="NCHW")
    np.testing.assert_allclose(yc, y.transpose(0, 3, 1, 2))


def test_depthwise_backprops_hand_worked():
    # same problem as above with dy = ones: per channel dx = [f0, f1 + f0], df = [x0 + x1, x1]
    x = np.array([[1.0, 3.0], [2.0, 4.0]]).reshape(1, 2, 1, 2)
    f = np.array([[1.0, 1.0], [10.0, 100.0]]).reshape(2, 1, 2, 1)
    dy = np.ones((1, 2, 1, 2))
    dx = tf.depthwise_conv2d_native_backprop_input([1, 2, 1, 2], f, dy, 1, "SAME")
    np.testing.assert_allclose(dx[0, :, 0, 0], [1, 11])
    np.testing.assert_allclose(dx[0, :, 0, 1], [1, 101])
    df = tf.depthwise_conv2d_native_backprop_filter(x, [2, 1, 2, 1], dy, 1, "SAME")
    assert df.shape == (2, 1, 2, 1)
    np.testing.assert_allclose(df[:, 0, 0, 0], [3, 2])
    np.testing.assert_allclose(df[:, 0, 1, 0], [7, 4])


def test_depthwise_depth_mismatch():
    with pytest.raises(ValueError, match="depth"):
        tf.depthwise_conv2d_native(np.ones((1, 3, 3, 2)), np.ones((1, 1, 3, 1)), 1, "VALID")


def test_grouped_conv2d_from_filter_in_channels():
    # input depth 4, filter in_channels 2 -> 2 groups; 1x1 filter of ones with 2 outputs:
    # out 0 = x0 + x1, out 1 = x2 + x3
    x = np.array([1.0, 2, 4, 8]).reshape(1, 1, 1, 4)
    y = tf.conv2d(x, np.ones((1, 1, 2, 2)), 1, "VALID")
    np.testing.assert_allclose(y.ravel(), [3, 12])
    with pytest.raises(ValueError, match="multiple"):
        tf.conv2d(np.ones((1, 1, 1, 3)), np.ones((1, 1, 2, 2)), 1, "VALID")


# ------------------------------------------------------------------ cross-checks


def _valid(g):
    """``g`` with VALID padding's sizes raised to the filter extent (at least one output):
    built valid rather than filtered out (too many rejected draws fail Hypothesis's health
    check).  SAME padding has an output at any size."""
    if g["padding"] == "VALID":
        g = dict(g, h=max(g["h"], (g["fh"] - 1) * g["d"][0] + 1),
                 w=max(g["w"], (g["fw"] - 1) * g["d"][1] + 1))
    return g


cases = st.fixed_dictionaries(dict(
    n=st.integers(1, 2), h=st.integers(1, 7), w=st.integers(1, 7), c=st.integers(1, 3),
    m=st.integers(1, 3), fh=st.integers(1, 3), fw=st.integers(1, 3),
    s=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    d=st.tuples(st.integers(1, 2), st.integers(1, 2)), padding=st.sampled_from(["SAME", "VALID"]),
    fmt=st.sampled_from(["NHWC", "NCHW"]), seed=st.integers(0, 2**16),
)).map(_valid)


def _pads(g):
    """TF's SAME is cconv's "same" (the odd extra pixel at the end)."""
    return resolve_padding(g["padding"].lower(), (g["h"], g["w"]), (g["fh"], g["fw"]), g["s"],
                           g["d"])


def _arrays(g, k):
    rng = np.random.default_rng(g["seed"])
    if g["fmt"] == "NHWC":
        shape = (g["n"], g["h"], g["w"], g["c"])
    else:
        shape = (g["n"], g["c"], g["h"], g["w"])
    return rng.standard_normal(shape), rng.standard_normal((g["fh"], g["fw"], g["c"], k)), rng


def _strides4(g):
    s = g["s"]
    return [1, s[0], s[1], 1] if g["fmt"] == "NHWC" else [1, 1, s[0], s[1]]


@settings(max_examples=25, deadline=None)
@given(cases)
def test_conv2d_and_backprops_match_core(g):
    x, f, rng = _arrays(g, g["m"])
    kw = dict(stride=g["s"], padding=_pads(g), dilation=g["d"], layout=g["fmt"],
              weight_layout="HWIO")
    dil4 = [1, g["d"][0], g["d"][1], 1] if g["fmt"] == "NHWC" else [1, 1, g["d"][0], g["d"][1]]
    y = tf.conv2d(x, f, _strides4(g), g["padding"], data_format=g["fmt"], dilations=dil4)
    np.testing.assert_allclose(y, cconv.conv2d(x, f, **kw), rtol=1e-9, atol=1e-9)
    dy = rng.standard_normal(y.shape)
    dx = tf.conv2d_backprop_input(list(x.shape), f, dy, _strides4(g), g["padding"], g["fmt"], dil4)
    np.testing.assert_allclose(dx, cconv.conv2d_backward_data(dy, f, x.shape, **kw),
                               rtol=1e-9, atol=1e-9)
    df = tf.conv2d_backprop_filter(x, f.shape, dy, _strides4(g), g["padding"], g["fmt"], dil4)
    np.testing.assert_allclose(df, cconv.conv2d_backward_weight(dy, x, f.shape, **kw),
                               rtol=1e-9, atol=1e-9)


@settings(max_examples=25, deadline=None)
@given(cases)
def test_depthwise_against_torch(g):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x, f, rng = _arrays(g, g["m"])
    c, m = g["c"], g["m"]
    (top, bottom), (left, right) = _pads(g)
    xn = x if g["fmt"] == "NCHW" else x.transpose(0, 3, 1, 2)
    xt = torch.tensor(np.ascontiguousarray(xn), requires_grad=True)
    # torch depthwise weight (C*M, 1, fh, fw): row c*M + m is TF's filter[:, :, c, m]
    w_torch = f.reshape(g["fh"], g["fw"], c * m).transpose(2, 0, 1)[:, None]
    wt = torch.tensor(np.ascontiguousarray(w_torch), requires_grad=True)
    yt = F.conv2d(F.pad(xt, (left, right, top, bottom)), wt, stride=g["s"], dilation=g["d"],
                  groups=c)
    to_fmt = (lambda a: a) if g["fmt"] == "NCHW" else (lambda a: a.transpose(0, 2, 3, 1))
    y = tf.depthwise_conv2d_native(x, f, g["s"], g["padding"], g["fmt"], list(g["d"]))
    np.testing.assert_allclose(y, to_fmt(yt.detach().numpy()), rtol=1e-9, atol=1e-9)
    dy = rng.standard_normal(y.shape)
    dy_nchw = dy if g["fmt"] == "NCHW" else dy.transpose(0, 3, 1, 2)
    yt.backward(torch.tensor(np.ascontiguousarray(dy_nchw)))
    dx = tf.depthwise_conv2d_native_backprop_input(x.shape, f, dy, g["s"], g["padding"], g["fmt"],
                                                   list(g["d"]))
    np.testing.assert_allclose(dx, to_fmt(xt.grad.numpy()), rtol=1e-9, atol=1e-9)
    df = tf.depthwise_conv2d_native_backprop_filter(x, f.shape, dy, g["s"], g["padding"],
                                                    g["fmt"], list(g["d"]))
    want = wt.grad.numpy()[:, 0].transpose(1, 2, 0).reshape(g["fh"], g["fw"], c, m)
    np.testing.assert_allclose(df, want, rtol=1e-9, atol=1e-9)
