"""cconv.nn layers without PyTorch: every backward against central finite differences in
float64, and the convolution layers against the float64 reference of tests/support.

The finite-difference check treats a layer as a function of its input and of each parameter:
with a fixed random upstream gradient g, L = sum(layer(x) * g), and every partial derivative of
L is estimated by (L(v + h) - L(v - h)) / 2h, one element at a time.  The shapes are small so
this stays fast; h = 1e-6 in float64 leaves an error around 1e-9 of the values.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cconv import nn
from support.checks import assert_close
from support.reference import (ref_backward_data, ref_backward_weight, ref_conv2d,
                               ref_conv_transpose2d, ref_conv_transpose2d_backward_data,
                               ref_conv_transpose2d_backward_weight, resolve_padding)

F64 = np.float64
H = 1e-6
FD_RTOL = 1e-6


def numeric_grad(loss, array):
    """Central differences of ``loss()`` with respect to every element of ``array`` (which
    ``loss`` reads and this function perturbs in place, restoring it)."""
    grad = np.zeros(array.shape, dtype=F64)
    flat, gflat = array.reshape(-1), grad.reshape(-1)
    assert np.shares_memory(flat, array)
    for i in range(flat.size):
        saved = flat[i]
        flat[i] = saved + H
        plus = loss()
        flat[i] = saved - H
        minus = loss()
        flat[i] = saved
        gflat[i] = (plus - minus) / (2 * H)
    return grad


def check_layer_gradients(layer, x, before_forward=lambda: None):
    """Compare ``layer.backward`` (input gradient and every parameter gradient) with finite
    differences of L = sum(layer(x) * g)."""
    rng = np.random.default_rng(1)
    before_forward()
    y = layer(x)
    g = rng.standard_normal(y.shape)

    def loss():
        before_forward()
        return float(np.sum(layer(x) * g))

    before_forward()
    layer(x)
    dx = layer.backward(g)
    assert_close(dx, numeric_grad(loss, x), rtol=FD_RTOL, what=f"{layer!r} input gradient")
    for name in [p.name for p in layer.parameters()]:
        analytic = getattr(layer, "grad_" + name)
        numeric = numeric_grad(loss, getattr(layer, name))
        assert_close(analytic, numeric, rtol=FD_RTOL, what=f"{layer!r} grad_{name}")


def rand(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# --------------------------------------------------------------------------------------------
# finite differences, layer by layer
# --------------------------------------------------------------------------------------------

CONV_CASES = [
    dict(),
    dict(stride=2, padding=1),
    dict(padding=(2, 1), dilation=2),
    dict(groups=2, padding="same"),
    dict(padding="full", bias=False),
    dict(padding=((1, 0), (0, 2)), stride=(1, 2)),
    dict(padding=1, padding_mode="reflect"),
    dict(padding=2, padding_mode="circular", stride=2),
    dict(padding=(1, 2), padding_mode="replicate", dilation=(2, 1)),
    dict(padding="same", padding_mode="symmetric"),
]


@pytest.mark.parametrize("kw", CONV_CASES, ids=str)
def test_conv2d_gradients(kw):
    layer = nn.Conv2d(4, 6, 3, dtype=F64, rng=0, **kw)
    check_layer_gradients(layer, rand((2, 4, 5, 6)))


TRANSPOSE_CASES = [
    dict(),
    dict(stride=2, padding=1, output_padding=1),
    dict(groups=2, dilation=2, bias=False),
    dict(stride=(2, 1), padding=(0, 1), dilation=(3, 1), output_padding=(2, 0)),
    dict(stride=2, padding=1, padding_mode="circular"),
    dict(padding=(1, 2), padding_mode="reflect", dilation=(1, 2)),
]


@pytest.mark.parametrize("kw", TRANSPOSE_CASES, ids=str)
def test_conv_transpose2d_gradients(kw):
    layer = nn.ConvTranspose2d(4, 6, 3, dtype=F64, rng=0, **kw)
    check_layer_gradients(layer, rand((2, 4, 4, 5)))


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=(2, 3), stride=1, dilation=(2, 1))], ids=str)
def test_max_pool_gradients(kw):
    # distinct, well separated values: no window has a near-tie that h could flip
    x = np.random.default_rng(3).permutation(2 * 3 * 6 * 7).reshape(2, 3, 6, 7) * 0.01
    check_layer_gradients(nn.MaxPool2d(**kw), x.astype(F64))


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=1, padding=1,
                                     count_include_pad=False)], ids=str)
def test_avg_pool_gradients(kw):
    check_layer_gradients(nn.AvgPool2d(**kw), rand((2, 3, 6, 7)))


@pytest.mark.parametrize("kw", [dict(), dict(affine=False), dict(momentum=None),
                                dict(track_running_stats=False)], ids=str)
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_gradients(kw, training):
    layer = nn.BatchNorm2d(3, dtype=F64, **kw)
    if layer.affine:
        layer.weight[:] = rand(3, 5)
        layer.bias[:] = rand(3, 6)
    if layer.running_mean is not None:
        layer.running_mean[:] = rand(3, 7)
        layer.running_var[:] = 1.0 + rand(3, 8) ** 2
    layer.train(training)
    check_layer_gradients(layer, rand((4, 3, 3, 2)) * 2 + 1)


def test_linear_gradients():
    check_layer_gradients(nn.Linear(5, 4, dtype=F64, rng=0), rand((3, 5)))
    check_layer_gradients(nn.Linear(5, 4, bias=False, dtype=F64, rng=0), rand((2, 3, 5)))


def test_relu_and_flatten_gradients():
    x = rand((2, 3, 4))
    x[np.abs(x) < 1e-3] = 0.5  # no value within h of the kink
    check_layer_gradients(nn.ReLU(), x)
    check_layer_gradients(nn.Flatten(), rand((2, 3, 2, 2)))
    check_layer_gradients(nn.Flatten(0, 1), rand((2, 3, 2)))


def test_dropout_gradient():
    layer = nn.Dropout(0.4)

    def same_mask():
        layer.rng = np.random.default_rng(11)

    check_layer_gradients(layer, rand((3, 20)), before_forward=same_mask)


def test_sequential_gradients():
    model = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1, dtype=F64, rng=0),
                          nn.BatchNorm2d(3, dtype=F64), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(),
                          nn.Linear(12, 4, dtype=F64, rng=1))
    x = rand((3, 2, 4, 4))
    g = rand((3, 4), 2)
    model(x)
    dx = model.backward(g)

    def loss():
        return float(np.sum(model(x) * g))

    assert_close(dx, numeric_grad(loss, x), rtol=FD_RTOL, what="Sequential input gradient")
    for name, param in model.named_parameters():
        assert_close(param.grad, numeric_grad(loss, param.value), rtol=FD_RTOL, what=name)


def test_cross_entropy_gradient():
    logits = rand((5, 4))
    target = np.array([0, 3, 1, 1, 2])
    for reduction in ("mean", "sum"):
        loss_fn = nn.CrossEntropyLoss(reduction)
        loss_fn(logits, target)
        grad = loss_fn.backward(2.0)
        assert_close(grad, 2.0 * numeric_grad(lambda: loss_fn(logits, target), logits),
                     rtol=FD_RTOL, what=reduction)


def test_cross_entropy_value():
    logits = rand((4, 3))
    target = np.array([2, 0, 1, 1])
    expected = -np.mean(np.log(np.exp(logits[np.arange(4), target]) / np.exp(logits).sum(1)))
    assert nn.CrossEntropyLoss()(logits, target) == pytest.approx(expected, rel=1e-12)
    # large logits: no overflow, and the exact answer log(1 + e^-d) survives
    big = np.array([[1e4, 1e4 - 2.0], [-1e4, -1e4 + 1.0]])
    loss = nn.CrossEntropyLoss("sum")(big, np.array([0, 0]))
    assert loss == pytest.approx(np.log1p(np.exp(-2.0)) + np.log1p(np.exp(1.0)), rel=1e-12)


# --------------------------------------------------------------------------------------------
# the convolution layers against the float64 reference (randomised geometry)
# --------------------------------------------------------------------------------------------

NUMPY_PAD_MODES = {"zeros": "constant", "reflect": "reflect", "symmetric": "symmetric",
                   "replicate": "edge", "circular": "wrap"}


@st.composite
def conv_layers(draw):
    groups = draw(st.integers(1, 3))
    cin, cout = groups * draw(st.integers(1, 3)), groups * draw(st.integers(1, 3))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    mode = draw(st.sampled_from(sorted(NUMPY_PAD_MODES)))
    h = draw(st.integers((kh - 1) * dilation[0] + 1, 8))
    w = draw(st.integers((kw - 1) * dilation[1] + 1, 8))
    # per-side padding smaller than the input, so every mode (reflect included) is defined
    pads = tuple((draw(st.integers(0, min(2, size - 1))), draw(st.integers(0, min(2, size - 1))))
                 for size in (h, w))
    padding = draw(st.sampled_from([pads, "valid", "same"]))
    return dict(in_channels=cin, out_channels=cout, kernel_size=(kh, kw), stride=stride,
                padding=padding, dilation=dilation, groups=groups, padding_mode=mode,
                bias=draw(st.booleans())), (draw(st.integers(1, 2)), cin, h, w)


@given(case=conv_layers(), seed=st.integers(0, 2 ** 16))
def test_conv2d_layer_matches_reference(case, seed):
    kw, x_shape = case
    layer = nn.Conv2d(**kw, dtype=F64, rng=seed)
    x = rand(x_shape, seed)
    pads = resolve_padding(kw["padding"], x_shape[2:], kw["kernel_size"], kw["stride"],
                           kw["dilation"])
    # the padding mode fills the border first; then a plain convolution without padding
    xp = np.pad(x, ((0, 0), (0, 0)) + pads, mode=NUMPY_PAD_MODES[kw["padding_mode"]])
    geometry = dict(stride=kw["stride"], dilation=kw["dilation"], groups=kw["groups"])
    expected = ref_conv2d(xp, layer.weight, layer.bias, **geometry)
    y = layer(x)
    assert_close(y, expected, what="forward")
    g = rand(y.shape, seed + 1)
    dx = layer.backward(g)
    assert_close(layer.grad_weight, ref_backward_weight(g, xp, layer.weight.shape, **geometry),
                 what="grad_weight")
    dxp = ref_backward_data(g, layer.weight, xp.shape, **geometry)
    # the gradient of the padded input, folded back onto x through the padding map
    fold = numeric_pad_adjoint(x.shape, pads, NUMPY_PAD_MODES[kw["padding_mode"]], dxp)
    assert_close(dx, fold, what="grad_input")
    if layer.bias is not None:
        assert_close(layer.grad_bias, g.sum(axis=(0, 2, 3)), what="grad_bias")
    else:
        assert layer.grad_bias is None


def numeric_pad_adjoint(x_shape, pads, mode, grad_padded):
    """The adjoint of ``numpy.pad(x, pads, mode)`` applied to ``grad_padded``: each padded
    element is a copy of one input element, so its gradient goes back there.  The source of
    every padded element is found by padding an array of element indices."""
    n, c, h, w = x_shape
    index = np.arange(h * w).reshape(h, w)
    source = np.pad(index, pads, mode=mode) if mode != "constant" else np.pad(
        index, pads, constant_values=-1)
    out = np.zeros((n, c, h * w))
    flat = grad_padded.reshape(n, c, -1)
    keep = source.reshape(-1) >= 0
    np.add.at(out, (slice(None), slice(None), source.reshape(-1)[keep]), flat[:, :, keep])
    return out.reshape(x_shape)


@st.composite
def transpose_layers(draw):
    groups = draw(st.integers(1, 2))
    cin, cout = groups * draw(st.integers(1, 3)), groups * draw(st.integers(1, 3))
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    output_padding = tuple(draw(st.integers(0, max(s, d) - 1)) for s, d in zip(stride, dilation))
    padding = (draw(st.integers(0, 1)), draw(st.integers(0, 1)))
    # each size from the smallest with an output, (size - 1) * s - 2 * p + d * (kk - 1) + 1
    # + op >= 1 (built valid rather than filtered out: too many rejected draws fail
    # Hypothesis's health check)
    x_shape = (draw(st.integers(1, 2)), cin) + tuple(
        draw(st.integers(max(2, 1 - (d * (kk - 1) + op - 2 * p) // s), 5))
        for kk, s, d, p, op in zip(k, stride, dilation, padding, output_padding))
    for size, kk, s, d, p, op in zip(x_shape[2:], k, stride, dilation, padding, output_padding):
        assert (size - 1) * s - 2 * p + d * (kk - 1) + 1 + op >= 1
    return dict(in_channels=cin, out_channels=cout, kernel_size=k, stride=stride,
                padding=padding, output_padding=output_padding, groups=groups,
                dilation=dilation, bias=draw(st.booleans())), x_shape


@given(case=transpose_layers(), seed=st.integers(0, 2 ** 16))
def test_conv_transpose2d_layer_matches_reference(case, seed):
    kw, x_shape = case
    layer = nn.ConvTranspose2d(**kw, dtype=F64, rng=seed)
    x = rand(x_shape, seed)
    pads = tuple((p, p) for p in kw["padding"])
    geometry = dict(stride=kw["stride"], dilation=kw["dilation"], groups=kw["groups"])
    y = layer(x)
    assert_close(y, ref_conv_transpose2d(x, layer.weight, layer.bias, pads=pads,
                                         output_padding=kw["output_padding"], **geometry),
                 what="forward")
    g = rand(y.shape, seed + 1)
    dx = layer.backward(g)
    assert_close(dx, ref_conv_transpose2d_backward_data(g, layer.weight, x.shape, pads=pads,
                                                        **geometry), what="grad_input")
    assert_close(layer.grad_weight, ref_conv_transpose2d_backward_weight(
        g, x, layer.weight.shape, pads=pads, **geometry), what="grad_weight")
    if layer.bias is not None:
        assert_close(layer.grad_bias, g.sum(axis=(0, 2, 3)), what="grad_bias")
