"""cconv.compat.miopen with N-d descriptors (miopenInitConvolutionNdDescriptor): 1-D (NCW),
2-D (NCHW) and 3-D (NCDHW) convolution and transposed convolution, checked against the float64
reference of ``support.reference_nd``, PyTorch, and the 2-D descriptor."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.checks import assert_close
from support.reference_nd import (ref_backward_bias, ref_backward_data, ref_backward_weight,
                                  ref_conv, ref_conv_transpose, ref_conv_transpose_backward_data,
                                  ref_conv_transpose_backward_weight)
from support.strategies_nd import channel_counts

import cconv
from cconv.compat import miopen

LAYOUTS = {1: ("NCW", "OIW"), 2: ("NCHW", "OIHW"), 3: ("NCDHW", "OIDHW")}


def arr(values, shape):
    return np.asarray(values, dtype=np.float64).reshape(shape)


def nd(rank, pad=0, stride=1, dilation=1, mode="convolution", groups=1, adj=None):
    """An N-d descriptor with per-axis lists (ints broadcast), groups and output padding."""
    def spread(v):
        return [v] * rank if isinstance(v, int) else list(v)

    d = miopen.init_convolution_nd_descriptor(rank, spread(pad), spread(stride),
                                              spread(dilation), mode)
    d.set_group_count(groups)
    if adj is not None:
        d.set_transpose_nd_output_padding(spread(adj))
    return d


# ------------------------------------------------------------------ descriptor and output dims


def test_nd_initializer_fields():
    d = miopen.init_convolution_nd_descriptor(3, [1, 2, 0], [2, 1, 3], [1, 1, 2])
    assert (d.spatial_dim, d.mode, d.pad, d.stride, d.dilation) == (
        3, "convolution", (1, 2, 0), (2, 1, 3), (1, 1, 2))
    assert d.transpose_output_padding == (0, 0, 0) and d.get_group_count() == 1
    assert d.get_nd_descriptor() == (3, [1, 2, 0], [2, 1, 3], [1, 1, 2], "convolution")
    t = miopen.init_convolution_nd_descriptor(1, [2], [3], [1], "miopenTranspose")
    assert (t.spatial_dim, t.mode, t.pad, t.stride) == (1, "transpose", (2,), (3,))
    t.set_transpose_nd_output_padding([2])
    assert t.transpose_output_padding == (2,)
    assert miopen.init_convolution_nd_descriptor(1, 1, 1, 1, 1).mode == "transpose"
    assert miopen.ConvolutionDescriptor().spatial_dim == 2


def test_nd_initializer_with_spatial_dim_2_is_the_2d_descriptor():
    a = miopen.init_convolution_nd_descriptor(2, [1, 0], [2, 1], [1, 2], "transpose")
    b = miopen.ConvolutionDescriptor("transpose", pad=(1, 0), stride=(2, 1), dilation=(1, 2))
    a.set_transpose_nd_output_padding([1, 0])
    b.set_transpose_output_padding(1, 0)
    assert a.get_nd_descriptor() == b.get_nd_descriptor()
    assert repr(a) == repr(b)
    assert a.get_forward_output_dim((1, 2, 4, 5), (2, 3, 3, 2)) == \
        b.get_forward_output_dim((1, 2, 4, 5), (2, 3, 3, 2))


def test_output_dims_1d_and_3d_hand_worked():
    d = nd(1, pad=1, stride=2, dilation=2)
    # W: (9 + 2 - (2*(3-1) + 1)) // 2 + 1 = 4
    assert d.get_forward_output_dim((2, 3, 9), (5, 3, 3)) == (2, 5, 4)
    d3 = nd(3, pad=[1, 0, 2], stride=[1, 2, 3], dilation=[2, 1, 1], groups=2)
    # D: (5 + 2 - 5) // 1 + 1 = 3 ; H: (6 - 2) // 2 + 1 = 3 ; W: (4 + 4 - 3) // 3 + 1 = 2
    assert d3.get_forward_output_dim((1, 4, 5, 6, 4), (6, 2, 3, 2, 3)) == (1, 6, 3, 3, 2)
    t = nd(3, pad=[0, 1, 1], stride=[2, 1, 3], mode="transpose", groups=2, adj=[1, 0, 2])
    # channels 3 * 2 = 6 ; D: 2*(2-1) + 2 - 0 + 1 = 5 ; H: 1*(3-1) + 3 - 2 = 3 ;
    # W: 3*(4-1) + 2 - 2 + 2 = 11
    assert t.get_forward_output_dim((1, 4, 2, 3, 4), (4, 3, 2, 3, 2)) == (1, 6, 5, 3, 11)
    # depthwise 1-D, channel multiplier 2
    dw = nd(1, groups=3)
    assert dw.get_forward_output_dim((1, 3, 5), (6, 1, 3)) == (1, 6, 3)


def test_descriptor_argument_errors():
    for bad in (0, 4, -1):
        with pytest.raises(ValueError, match="spatial_dim must be 1, 2 or 3"):
            miopen.init_convolution_nd_descriptor(bad, 0, 1, 1)
    for bad in (True, 2.0, "3"):
        with pytest.raises(TypeError, match="spatial_dim"):
            miopen.init_convolution_nd_descriptor(bad, 0, 1, 1)
    with pytest.raises(ValueError, match="pad has 2 spatial dimensions.*spatial_dim 3"):
        miopen.init_convolution_nd_descriptor(3, [1, 1], [1, 1, 1], [1, 1, 1])
    with pytest.raises(ValueError, match="stride has 3 spatial dimensions.*spatial_dim 1"):
        miopen.init_convolution_nd_descriptor(1, [0], [1, 1, 1], [1])
    with pytest.raises(ValueError, match="dilation has 0 spatial"):
        miopen.init_convolution_nd_descriptor(1, [0], [1], [])
    with pytest.raises(ValueError, match="pad must be non-negative"):
        miopen.init_convolution_nd_descriptor(3, [0, -1, 0], 1, 1)
    with pytest.raises(ValueError, match="stride must be positive"):
        miopen.init_convolution_nd_descriptor(1, 0, [0], 1)
    with pytest.raises(ValueError, match="dilation must be positive"):
        miopen.init_convolution_nd_descriptor(3, 0, 1, [1, 0, 1])
    with pytest.raises(TypeError, match="pad must be an int or a sequence of 3 ints"):
        miopen.init_convolution_nd_descriptor(3, 1.5, 1, 1)
    with pytest.raises(TypeError, match="stride must be an integer"):
        miopen.init_convolution_nd_descriptor(1, 0, [1.0], 1)
    with pytest.raises(ValueError, match="mode"):
        miopen.init_convolution_nd_descriptor(1, 0, 1, 1, "depthwise")
    # the 2-D constructor keeps refusing other ranks' lists
    with pytest.raises(ValueError, match="spatial"):
        miopen.ConvolutionDescriptor(pad=[1, 1, 1])


def test_transpose_output_padding_errors():
    t = nd(3, stride=2, mode="transpose")
    with pytest.raises(ValueError, match="set_transpose_nd_output_padding"):
        t.set_transpose_output_padding(1, 1)  # the 2-D setter on a 3-D descriptor
    with pytest.raises(ValueError, match="adj has 2 spatial dimensions"):
        t.set_transpose_nd_output_padding([1, 1])
    with pytest.raises(ValueError, match="non-negative"):
        t.set_transpose_nd_output_padding([0, -1, 0])
    t.set_transpose_nd_output_padding([1, 2, 0])  # 2 is not below the stride 2
    with pytest.raises(ValueError, match="output padding"):
        t.get_forward_output_dim((1, 1, 3, 3, 3), (1, 1, 2, 2, 2))
    with pytest.raises(ValueError, match="output padding"):
        miopen.convolution_forward(1.0, np.ones((1, 1, 3, 3, 3)), np.ones((1, 1, 2, 2, 2)), t,
                                   None, 0.0, np.zeros((1, 1, 7, 8, 6)))


def test_tensor_rank_and_channel_errors():
    d1, d3 = nd(1), nd(3)
    with pytest.raises(ValueError, match="x_shape must be a 3-D NCW shape"):
        d1.get_forward_output_dim((1, 2, 1, 9), (2, 2, 1, 3))  # 2-D tensors, 1-D descriptor
    with pytest.raises(ValueError, match="w_shape must be a 5-D NCDHW shape"):
        d3.get_forward_output_dim((1, 2, 4, 4, 4), (2, 2, 3, 3))
    with pytest.raises(ValueError, match="x_shape must be a 4-D NCHW shape"):
        miopen.ConvolutionDescriptor().get_forward_output_dim((1, 2, 4, 4, 4), (2, 2, 3, 3, 3))
    with pytest.raises(ValueError, match="Channels"):
        d3.get_forward_output_dim((1, 3, 4, 4, 4), (2, 2, 3, 3, 3))
    with pytest.raises(ValueError, match="Channels"):
        nd(1, mode="transpose").get_forward_output_dim((1, 3, 5), (2, 3, 3))
    with pytest.raises(ValueError, match="output size along D would be 0"):
        d3.get_forward_output_dim((1, 2, 2, 4, 4), (2, 2, 3, 3, 3))
    with pytest.raises(ValueError, match="output size along W"):
        d1.get_forward_output_dim((1, 2, 2), (2, 2, 3))
    x, w = np.ones((1, 2, 5)), np.ones((2, 2, 3))
    with pytest.raises(ValueError, match=r"y has shape \(1, 2, 4\).*\(1, 2, 3\)"):
        miopen.convolution_forward(1.0, x, w, d1, None, 0.0, np.zeros((1, 2, 4)))
    with pytest.raises(ValueError, match="x_shape must be a 3-D NCW"):
        miopen.convolution_forward(1.0, x[:, :, None], w, d1, None, 0.0, np.zeros((1, 2, 3)))
    with pytest.raises(TypeError, match="y must be a NumPy array"):
        miopen.convolution_forward(1.0, x, w, d1, None, 0.0, [[[0.0] * 3] * 2])
    with pytest.raises(ValueError, match="dy has shape"):
        miopen.convolution_backward_data(1.0, np.ones((1, 2, 4)), w, d1, None, 0.0,
                                          np.zeros_like(x))
    with pytest.raises(ValueError, match="dy has shape"):
        miopen.convolution_backward_weights(1.0, np.ones((1, 2, 4)), x, d1, None, 0.0,
                                            np.zeros_like(w))
    with pytest.raises(TypeError, match="desc must be a miopen.ConvolutionDescriptor"):
        miopen.convolution_forward(1.0, x, w, None, None, 0.0, np.zeros((1, 2, 3)))


# ------------------------------------------------------------------ execute, hand-worked


def test_1d_forward_and_gradients_hand_worked():
    d = nd(1, pad=1)
    x, w = arr([1, 2, 3], (1, 1, 3)), arr([1, 10], (1, 1, 2))
    # pad 1: [0 + 10, 1 + 20, 2 + 30, 3 + 0]
    y = np.full((1, 1, 4), 5.0)
    out = miopen.convolution_forward(2.0, x, w, d, "miopenConvolutionFwdAlgoDirect", 3.0, y)
    assert out is y
    np.testing.assert_allclose(y.ravel(), [2 * 10 + 15, 2 * 21 + 15, 2 * 32 + 15, 2 * 3 + 15])
    # dx[i] = dy[i] * 10 + dy[i + 1] * 1 for dy = ones; beta 1 adds the old ones
    dx = np.ones((1, 1, 3))
    miopen.convolution_backward_data(1.0, np.ones((1, 1, 4)), w, d, None, 1.0, dx)
    np.testing.assert_allclose(dx.ravel(), [12, 12, 12])
    # dw[j] = sum_i xpad[i + j] = 6 for both taps; 0.5 * 6 - 100
    dw = np.full((1, 1, 2), 100.0)
    miopen.convolution_backward_weights(0.5, np.ones((1, 1, 4)), x, d, None, -1.0, dw)
    np.testing.assert_allclose(dw.ravel(), [-97, -97])


def test_1d_transpose_hand_worked():
    # x = [1, 2], w = [1, 10], stride 2, adj 1: W = 2*(2-1) + 2 + 1 = 5;
    # y[2i + j] += x[i] w[j] -> [1, 10, 2, 20, 0]
    d = nd(1, stride=2, mode="transpose", adj=1)
    x, w = arr([1, 2], (1, 1, 2)), arr([1, 10], (1, 1, 2))
    y = np.full((1, 1, 5), np.nan)
    miopen.convolution_forward(1.0, x, w, d, None, 0.0, y)
    np.testing.assert_allclose(y.ravel(), [1, 10, 2, 20, 0])
    dy = arr([1, 2, 3, 4, 5], (1, 1, 5))
    dx = np.zeros((1, 1, 2))
    miopen.convolution_backward_data(1.0, dy, w, d, None, 0.0, dx)
    np.testing.assert_allclose(dx.ravel(), [1 + 20, 3 + 40])
    dw = np.zeros((1, 1, 2))
    miopen.convolution_backward_weights(1.0, dy, x, d, None, 0.0, dw)
    np.testing.assert_allclose(dw.ravel(), [1 * 1 + 2 * 3, 1 * 2 + 2 * 4])


def test_3d_forward_hand_worked():
    # a 2x2x2 box filter of ones over arange(27) in 3x3x3, stride 1, no pad: each output is
    # the sum of its 2x2x2 block; the (0,0,0) block holds 0,1,3,4,9,10,12,13 -> 52, and each
    # step along D adds 9*8, along H 3*8, along W 1*8
    d = nd(3)
    x, w = arr(np.arange(27), (1, 1, 3, 3, 3)), np.ones((1, 1, 2, 2, 2))
    y = np.zeros((1, 1, 2, 2, 2))
    miopen.convolution_forward(1.0, x, w, d, None, 0.0, y)
    i, j, k = np.meshgrid(range(2), range(2), range(2), indexing="ij")
    np.testing.assert_allclose(y[0, 0], 52 + 72 * i + 24 * j + 8 * k)


def test_1d_descriptor_matches_the_height_1_2d_descriptor():
    """MIOpen users often run 1-D as 2-D with H = 1: both spellings give the same numbers."""
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((2, 4, 11)), rng.standard_normal((6, 2, 3))
    d1 = nd(1, pad=2, stride=3, dilation=2, groups=2)
    d2 = miopen.ConvolutionDescriptor(pad=(0, 2), stride=(1, 3), dilation=(1, 2))
    d2.set_group_count(2)
    y1 = np.zeros(d1.get_forward_output_dim(x, w))
    y2 = np.zeros(d2.get_forward_output_dim(x[:, :, None], w[:, :, None]))
    assert y2.shape == (y1.shape[0], y1.shape[1], 1, y1.shape[2])
    miopen.convolution_forward(1.0, x, w, d1, None, 0.0, y1)
    miopen.convolution_forward(1.0, x[:, :, None], w[:, :, None], d2, None, 0.0, y2)
    np.testing.assert_allclose(y1, y2[:, :, 0], rtol=1e-12, atol=1e-12)
    dw1, dw2 = np.zeros_like(w), np.zeros(w[:, :, None].shape)
    miopen.convolution_backward_weights(1.0, y1, x, d1, None, 0.0, dw1)
    miopen.convolution_backward_weights(1.0, y2, x[:, :, None], d2, None, 0.0, dw2)
    np.testing.assert_allclose(dw1, dw2[:, :, 0], rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ cross-checks


@st.composite
def problems(draw, rank, transpose=False):
    """A MIOpen problem: descriptor arguments and float64 values (symmetric pads)."""
    c, k, groups = draw(channel_counts())
    n = draw(st.integers(1, 2))
    max_size = {1: 7, 2: 6, 3: 5}[rank]
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(rank))
    pad = tuple(draw(st.integers(0, 2)) for _ in range(rank))
    spatial = []
    for i in range(rank):
        size = draw(st.integers(1, max_size))
        if not transpose:  # an input the kernel fits in once padded
            size = max(size, (kernel[i] - 1) * dilation[i] + 1 - 2 * pad[i])
        spatial.append(size)
    adj = tuple(draw(st.integers(0, 2)) % s for s in stride)  # MIOpen: below the stride
    dtype = draw(st.sampled_from([np.float64, np.float64, np.float32]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((n, c, *spatial)).astype(dtype)
    w_shape = (c, k // groups, *kernel) if transpose else (k, c // groups, *kernel)
    w = rng.standard_normal(w_shape).astype(dtype)
    return dict(rank=rank, groups=groups, stride=stride, dilation=dilation, pad=pad,
                adj=adj, x=x, w=w, rng=rng, dtype=np.dtype(dtype),
                alpha=draw(st.sampled_from([1.0, 0.5, -2.0])),
                beta=draw(st.sampled_from([0.0, 0.0, 1.0, -0.5])))


def _descriptor(p, mode):
    return nd(p["rank"], p["pad"], p["stride"], p["dilation"], mode, p["groups"],
              p["adj"] if mode == "transpose" else None)


def _check_scaled(run, ref, shape, p, what):
    """``run(out)`` must leave ``alpha * ref + beta * start`` in ``out`` (NaN start if beta 0)."""
    start = p["rng"].standard_normal(shape).astype(p["dtype"])
    out = start.copy() if p["beta"] != 0 else np.full(shape, np.nan, p["dtype"])
    assert run(out) is out
    assert out.dtype == p["dtype"]
    want = p["alpha"] * ref + (p["beta"] * start.astype(np.float64) if p["beta"] != 0 else 0)
    assert_close(out, want, dtype=p["dtype"], what=what)


def _check_convolution_mode(p):
    d = _descriptor(p, "convolution")
    x, w = p["x"], p["w"]
    pads = tuple((q, q) for q in p["pad"])
    kw = dict(stride=p["stride"], pads=pads, dilation=p["dilation"], groups=p["groups"])
    ref_y = ref_conv(x, w, **kw)
    y_shape = d.get_forward_output_dim(x.shape, w.shape)
    assert y_shape == ref_y.shape
    a, b = p["alpha"], p["beta"]
    _check_scaled(lambda out: miopen.convolution_forward(a, x, w, d, None, b, out), ref_y,
                  y_shape, p, "forward")
    dy = p["rng"].standard_normal(y_shape).astype(p["dtype"])
    _check_scaled(lambda out: miopen.convolution_backward_data(a, dy, w, d, None, b, out),
                  ref_backward_data(dy, w, x.shape, **kw), x.shape, p, "backward_data")
    _check_scaled(lambda out: miopen.convolution_backward_weights(a, dy, x, d, None, b, out),
                  ref_backward_weight(dy, x, w.shape, **kw), w.shape, p, "backward_weights")


def _check_transpose_mode(p):
    d = _descriptor(p, "transpose")
    x, w = p["x"], p["w"]
    pads = tuple((q, q) for q in p["pad"])
    kw = dict(stride=p["stride"], pads=pads, dilation=p["dilation"], groups=p["groups"])
    sizes = [(s - 1) * st_ - 2 * q + (k - 1) * dl + 1 + o for s, k, st_, q, dl, o in
             zip(x.shape[2:], w.shape[2:], p["stride"], p["pad"], p["dilation"], p["adj"])]
    if min(sizes) < 1:
        with pytest.raises(ValueError, match="output size along"):
            d.get_forward_output_dim(x.shape, w.shape)
        return
    y_shape = d.get_forward_output_dim(x.shape, w.shape)
    assert y_shape == (x.shape[0], w.shape[1] * p["groups"], *sizes)
    a, b = p["alpha"], p["beta"]
    _check_scaled(lambda out: miopen.convolution_forward(a, x, w, d, None, b, out),
                  ref_conv_transpose(x, w, output_padding=p["adj"], **kw), y_shape, p,
                  "forward")
    dy = p["rng"].standard_normal(y_shape).astype(p["dtype"])
    _check_scaled(lambda out: miopen.convolution_backward_data(a, dy, w, d, None, b, out),
                  ref_conv_transpose_backward_data(dy, w, x.shape, **kw), x.shape, p,
                  "backward_data")
    _check_scaled(lambda out: miopen.convolution_backward_weights(a, dy, x, d, None, b, out),
                  ref_conv_transpose_backward_weight(dy, x, w.shape, **kw), w.shape, p,
                  "backward_weights")


@settings(max_examples=60, deadline=None)
@given(problems(1))
def test_1d_convolution_mode_against_reference(p):
    _check_convolution_mode(p)


@settings(max_examples=60, deadline=None)
@given(problems(1, transpose=True))
def test_1d_transpose_mode_against_reference(p):
    _check_transpose_mode(p)


@settings(max_examples=40, deadline=None)
@given(problems(3))
def test_3d_convolution_mode_against_reference(p):
    _check_convolution_mode(p)


@settings(max_examples=40, deadline=None)
@given(problems(3, transpose=True))
def test_3d_transpose_mode_against_reference(p):
    _check_transpose_mode(p)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["convolution", "transpose"]), st.data())
def test_2d_through_the_nd_initializer_matches_the_2d_descriptor(mode, data):
    """spatial_dim 2 gives exactly the 2-D descriptor's results (and the reference's)."""
    p = data.draw(problems(2, transpose=mode == "transpose"))
    if mode == "transpose":
        _check_transpose_mode(p)
    else:
        _check_convolution_mode(p)
    a = _descriptor(p, mode)
    b = miopen.ConvolutionDescriptor(mode, p["pad"], p["stride"], p["dilation"])
    b.set_group_count(p["groups"])
    if mode == "transpose":
        b.set_transpose_output_padding(*p["adj"])
    x, w = p["x"], p["w"]
    try:
        y_shape = b.get_forward_output_dim(x.shape, w.shape)
    except ValueError:
        return  # a transposed output below one pixel: checked above
    assert a.get_forward_output_dim(x.shape, w.shape) == y_shape
    dy = p["rng"].standard_normal(y_shape).astype(p["dtype"])
    for call, args, shape in ((miopen.convolution_forward, (x, w), y_shape),
                              (miopen.convolution_backward_data, (dy, w), x.shape),
                              (miopen.convolution_backward_weights, (dy, x), w.shape)):
        got_nd, got_2d = np.zeros(shape, p["dtype"]), np.zeros(shape, p["dtype"])
        call(1.0, *args, a, None, 0.0, got_nd)
        call(1.0, *args, b, None, 0.0, got_2d)
        np.testing.assert_array_equal(got_nd, got_2d)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([1, 3]), st.sampled_from(["convolution", "transpose"]),
       st.data())
def test_against_torch(rank, mode, data):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    p = data.draw(problems(rank, transpose=mode == "transpose"))
    d = _descriptor(p, mode)
    x, w = p["x"].astype(np.float64), p["w"].astype(np.float64)
    xt = torch.tensor(x, requires_grad=True)
    wt = torch.tensor(w, requires_grad=True)
    kw = dict(stride=p["stride"], padding=p["pad"], dilation=p["dilation"], groups=p["groups"])
    try:
        y_shape = d.get_forward_output_dim(x.shape, w.shape)
    except ValueError:
        assert mode == "transpose"  # output below one pixel: torch refuses it too
        with pytest.raises(RuntimeError):
            getattr(F, f"conv_transpose{rank}d")(xt, wt, output_padding=p["adj"], **kw)
        return
    if mode == "transpose":
        yt = getattr(F, f"conv_transpose{rank}d")(xt, wt, output_padding=p["adj"], **kw)
    else:
        yt = getattr(F, f"conv{rank}d")(xt, wt, **kw)
    y = np.zeros(y_shape)
    miopen.convolution_forward(1.0, x, w, d, None, 0.0, y)
    np.testing.assert_allclose(y, yt.detach().numpy(), rtol=1e-9, atol=1e-9)
    dy = p["rng"].standard_normal(y_shape)
    yt.backward(torch.tensor(dy))
    dx, dw = np.zeros_like(x), np.zeros_like(w)
    miopen.convolution_backward_data(1.0, dy, w, d, None, 0.0, dx)
    miopen.convolution_backward_weights(1.0, dy, x, d, None, 0.0, dw)
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(dw, wt.grad.numpy(), rtol=1e-9, atol=1e-9)


# ------------------------------------------------------------------ bias


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_bias_any_rank(rank):
    rng = np.random.default_rng(rank)
    shape = (2, 3) + (2, 3, 4)[3 - rank:]
    b = rng.standard_normal(3)
    y0 = rng.standard_normal(shape)
    y = y0.copy()
    miopen.convolution_forward_bias(2.0, b.reshape((1, 3) + (1,) * rank), 1.0, y)
    np.testing.assert_allclose(y, y0 + 2.0 * b.reshape((1, 3) + (1,) * rank), rtol=1e-12)
    y[...] = np.nan  # beta 0 never reads y
    miopen.convolution_forward_bias(1.0, b, 0.0, y)
    np.testing.assert_allclose(y, np.broadcast_to(b.reshape((1, 3) + (1,) * rank), shape))
    dy = rng.standard_normal(shape)
    db = np.full((1, 3) + (1,) * rank, 10.0)
    miopen.convolution_backward_bias(1.0, dy, 0.5, db)
    np.testing.assert_allclose(db.ravel(), ref_backward_bias(dy) + 5.0, rtol=1e-12)
    db1 = np.full(3, np.nan)
    miopen.convolution_backward_bias(-2.0, dy.astype(np.float32), 0.0, db1)
    np.testing.assert_allclose(db1, -2.0 * ref_backward_bias(dy), rtol=1e-5)
    with pytest.raises(ValueError, match=r"b must have shape \(3,\) or"):
        miopen.convolution_forward_bias(1.0, np.ones((1, 3) + (1,) * (rank + 1)), 0.0, y)
    with pytest.raises(ValueError, match=r"db must have shape \(3,\) or"):
        miopen.convolution_backward_bias(1.0, dy, 0.0, np.zeros((1, 3) + (1,) * (rank - 1)))


def test_bias_rank_errors():
    with pytest.raises(ValueError, match="y must be a 3-D, 4-D or 5-D"):
        miopen.convolution_forward_bias(1.0, np.ones(2), 0.0, np.zeros((1, 2, 1, 1, 1, 1)))
    with pytest.raises(ValueError, match="y must be a 3-D, 4-D or 5-D"):
        miopen.convolution_forward_bias(1.0, np.ones(2), 0.0, np.zeros((1, 2)))
    with pytest.raises(ValueError, match="dy must be a 3-D, 4-D or 5-D"):
        miopen.convolution_backward_bias(1.0, np.ones((3, 2)), 0.0, np.zeros(2))
    with pytest.raises(TypeError, match="db must be a NumPy array"):
        miopen.convolution_backward_bias(1.0, np.ones((1, 2, 3)), 0.0, [0.0, 0.0])


# ---------------------------------------------------------- workspace and Find


def _conv_problem(d, x_shape, w_shape, direction):
    """The ordinary convolution (input shape, cconv op) behind a MIOpen direction: in
    transpose mode the forward pass is the data gradient of the convolution whose input is
    the transposed output."""
    if d.mode == "convolution":
        return x_shape, {"forward": "forward", "backward_data": "backward_data",
                         "backward_weights": "backward_weight"}[direction]
    y_shape = d.get_forward_output_dim(x_shape, w_shape)
    return y_shape, {"forward": "backward_data", "backward_data": "forward",
                     "backward_weights": "backward_weight"}[direction]


def _largest_workspace(d, conv_x, w_shape, op, dtype):
    plan = getattr(cconv, f"plan_conv{d.spatial_dim}d")
    layout, weight_layout = LAYOUTS[d.spatial_dim]
    sizes = []
    for algo in tuple(cconv.ALGORITHMS) + ("auto",):
        try:
            sizes.append(plan(conv_x, w_shape, stride=d.stride, padding=d.pad,
                              dilation=d.dilation, groups=d.group_count, layout=layout,
                              weight_layout=weight_layout, dtype=dtype,
                              algo=algo).workspace_bytes_for(op))
        except ValueError:
            pass
    return max(sizes)


WORKSPACE_CASES = [
    (1, "convolution", (2, 8, 37), (16, 8, 5), dict(pad=2, stride=2)),
    (1, "transpose", (2, 8, 13), (8, 4, 3), dict(pad=1, stride=2, adj=1)),
    (3, "convolution", (1, 8, 6, 9, 9), (8, 8, 3, 3, 3), dict(pad=1)),
    (3, "transpose", (1, 6, 3, 4, 5), (6, 2, 3, 3, 2), dict(pad=[1, 0, 1], stride=2,
                                                           groups=3, adj=[1, 0, 1])),
]


@pytest.mark.parametrize("rank, mode, x_shape, w_shape, kw", WORKSPACE_CASES)
def test_workspace_queries_match_the_plans(rank, mode, x_shape, w_shape, kw):
    d = nd(rank, mode=mode, **kw)
    y_shape = d.get_forward_output_dim(x_shape, w_shape)
    queries = {
        "forward": lambda **k: miopen.convolution_forward_get_workspace_size(
            d, w_shape, x_shape, y_shape, **k),
        "backward_data": lambda **k: miopen.convolution_backward_data_get_workspace_size(
            d, y_shape, w_shape, x_shape, **k),
        "backward_weights": lambda **k: miopen.convolution_backward_weights_get_workspace_size(
            d, y_shape, x_shape, w_shape, **k),
    }
    got = {}
    for direction, query in queries.items():
        conv_x, op = _conv_problem(d, x_shape, w_shape, direction)
        for dtype in ("float32", "float64"):
            size = query(dtype=dtype)
            assert isinstance(size, int) and size > 0
            assert size == _largest_workspace(d, conv_x, w_shape, op, dtype), (direction, dtype)
        assert query() == query(dtype="float32")  # shapes alone: float32
        got[direction] = query()
    # arrays stand for their shapes and dtypes
    x64, w64 = np.zeros(x_shape), np.zeros(w_shape)
    assert miopen.convolution_forward_get_workspace_size(d, w64, x64, y_shape) == \
        queries["forward"](dtype="float64")
    assert len(set(got.values())) > 1 or rank == 1  # the passes are told apart


def test_workspace_query_errors():
    d = nd(3, pad=1)
    xs, ws = (1, 2, 4, 4, 4), (2, 2, 3, 3, 3)
    with pytest.raises(ValueError, match=r"y has shape \(1, 2, 4, 4, 3\)"):
        miopen.convolution_forward_get_workspace_size(d, ws, xs, (1, 2, 4, 4, 3))
    with pytest.raises(ValueError, match="w_shape must be a 5-D NCDHW shape"):
        miopen.convolution_forward_get_workspace_size(d, (2, 2, 3, 3), xs, (1, 2, 4, 4, 4))
    with pytest.raises(ValueError, match="dx_shape must be a 5-D NCDHW shape"):
        miopen.convolution_backward_data_get_workspace_size(d, xs, ws, (1, 2, 4, 4))
    with pytest.raises(ValueError, match="dw_shape must be a 5-D"):
        miopen.convolution_backward_weights_get_workspace_size(d, xs, xs, (2, 2, 3))
    with pytest.raises(ValueError, match="x_shape must be a 3-D NCW shape"):
        miopen.convolution_forward_get_workspace_size(nd(1), (2, 2, 3), (1, 2, 1, 8),
                                                      (1, 2, 6))


MIOPEN_NAMES = {
    "forward": {"miopenConvolutionFwdAlgoDirect", "miopenConvolutionFwdAlgoWinograd",
                "miopenConvolutionFwdAlgoGEMM"},
    "backward_data": {"miopenConvolutionBwdDataAlgoDirect", "miopenConvolutionBwdDataAlgoWinograd",
                      "miopenConvolutionBwdDataAlgoGEMM"},
    "backward_weights": {"miopenConvolutionBwdWeightsAlgoDirect",
                         "miopenConvolutionBwdWeightsAlgoWinograd",
                         "miopenConvolutionBwdWeightsAlgoGEMM"},
}
TO_CCONV = {"Direct": "direct", "Winograd": "winograd", "GEMM": "gemm"}


def _cconv_name(name):
    if name.startswith("cconv:"):
        return name[6:]
    return TO_CCONV[name.rsplit("Algo", 1)[1]]


FIND_CASES = [
    (1, "convolution", (2, 4, 17), (6, 2, 3), dict(pad=1, groups=2)),
    (1, "transpose", (1, 4, 9), (4, 2, 3), dict(pad=1, stride=2, adj=1)),
    (3, "convolution", (1, 4, 4, 6, 6), (4, 4, 3, 3, 3), dict(pad=1)),
    (3, "transpose", (2, 3, 3, 4, 3), (3, 1, 2, 3, 3), dict(pad=[0, 1, 1], groups=3)),
]


@pytest.mark.parametrize("rank, mode, x_shape, w_shape, kw", FIND_CASES)
def test_find_lists_what_the_core_finds_and_each_result_runs(rank, mode, x_shape, w_shape, kw):
    d = nd(rank, mode=mode, **kw)
    rng = np.random.default_rng(11)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    y_shape = d.get_forward_output_dim(x_shape, w_shape)
    dy = rng.standard_normal(y_shape).astype(np.float32)
    layout, weight_layout = LAYOUTS[rank]
    pads = tuple((q, q) for q in d.pad)
    ref_kw = dict(stride=d.stride, pads=pads, dilation=d.dilation, groups=d.group_count)
    if mode == "convolution":
        refs = {"forward": ref_conv(x, w, **ref_kw),
                "backward_data": ref_backward_data(dy, w, x_shape, **ref_kw),
                "backward_weights": ref_backward_weight(dy, x, w_shape, **ref_kw)}
    else:
        refs = {"forward": ref_conv_transpose(x, w, output_padding=d.transpose_output_padding,
                                              **ref_kw),
                "backward_data": ref_conv_transpose_backward_data(dy, w, x_shape, **ref_kw),
                "backward_weights": ref_conv_transpose_backward_weight(dy, x, w_shape, **ref_kw)}
    finds = {
        "forward": (miopen.find_convolution_forward_algorithm, (x, w, np.zeros(y_shape)),
                    miopen.convolution_forward, (x, w), y_shape),
        "backward_data": (miopen.find_convolution_backward_data_algorithm, (dy, w, x),
                          miopen.convolution_backward_data, (dy, w), x_shape),
        "backward_weights": (miopen.find_convolution_backward_weights_algorithm, (dy, x, w),
                             miopen.convolution_backward_weights, (dy, x), w_shape),
    }
    for direction, (find, find_args, run, run_args, out_shape) in finds.items():
        results = find(d, *find_args)
        assert results, direction
        times = [r.time_ms for r in results]
        assert times == sorted(times)
        for algo, t, mem in results:
            assert algo in MIOPEN_NAMES[direction] or algo.startswith("cconv:")
            assert t >= 0 and isinstance(mem, int) and mem >= 0
        conv_x, op = _conv_problem(d, x_shape, w_shape, direction)
        core = cconv.find_algorithms(conv_x, w_shape, op=op, stride=d.stride, padding=d.pad,
                                     dilation=d.dilation, groups=d.group_count, layout=layout,
                                     weight_layout=weight_layout, dtype="float32")
        assert {_cconv_name(r.algo): r.memory for r in results} == \
            {r.algo: r.workspace_bytes for r in core}
        if rank == 1:  # a 1-D kernel never has Winograd's 3x3 shape
            assert all("Winograd" not in r.algo for r in results)
        for r in results:
            out = np.full(out_shape, np.nan, np.float32)
            run(1.0, *run_args, d, r.algo, 0.0, out)
            assert_close(out, refs[direction], dtype=np.float32, what=f"{direction} {r.algo}")
        limited = find(d, *find_args, request_algo_count=1,
                       workspace_size=min(r.memory for r in results))
        assert len(limited) == 1 and limited[0].memory == min(r.memory for r in results)


def test_find_shape_errors():
    d = nd(3)
    x, w = np.zeros((1, 2, 4, 4, 4), np.float32), np.zeros((2, 2, 3, 3, 3), np.float32)
    with pytest.raises(ValueError, match=r"y has shape"):
        miopen.find_convolution_forward_algorithm(d, x, w, (1, 2, 2, 2, 3))
    with pytest.raises(ValueError, match="x must be a 5-D NCDHW shape"):
        miopen.find_convolution_forward_algorithm(d, x[0], w, (1, 2, 2, 2, 2))
    with pytest.raises(ValueError, match="dy has shape"):
        miopen.find_convolution_backward_data_algorithm(d, (1, 2, 2, 2, 3), w, x)
    with pytest.raises(ValueError, match="dw must be a 5-D"):
        miopen.find_convolution_backward_weights_algorithm(d, (1, 2, 2, 2, 2), x, w[0])
    with pytest.raises(ValueError, match="request_algo_count must be positive"):
        miopen.find_convolution_forward_algorithm(d, x, w, (1, 2, 2, 2, 2), request_algo_count=0)


def test_unavailable_and_unusable_algorithms():
    x, w = np.ones((1, 2, 8)), np.ones((2, 2, 3))
    d = nd(1)
    y = np.zeros((1, 2, 6))
    with pytest.raises(ValueError, match="not available"):
        miopen.convolution_forward(1.0, x, w, d, "miopenConvolutionFwdAlgoFFT", 0.0, y)
    with pytest.raises(ValueError, match="not available"):
        miopen.convolution_backward_weights(1.0, y, x, d, 5, 0.0, np.zeros_like(w))
    with pytest.raises(ValueError, match="not a backward_data algorithm"):
        miopen.convolution_backward_data(1.0, y, w, d, "miopenConvolutionFwdAlgoDirect", 0.0,
                                         np.zeros_like(x))
    if "winograd" in cconv.ALGORITHMS:  # the core refuses Winograd on a 1-D kernel
        with pytest.raises(ValueError, match="(?i)winograd|cannot run"):
            miopen.convolution_forward(1.0, x, w, d, "miopenConvolutionFwdAlgoWinograd", 0.0, y)
    # the enum value and the cconv name run the named algorithm
    want = ref_conv(x, w)
    for algo in (1, "direct", "cconv:direct", miopen.miopenConvolutionFwdAlgoDirect):
        y[...] = np.nan
        miopen.convolution_forward(1.0, x, w, d, algo, 0.0, y)
        assert_close(y, want, what=str(algo))
