"""cconv.nn against PyTorch: every layer's forward and backward, the loss, the optimizers'
update rules, and whole training steps of the same network built in both.

Weights are copied from the cconv.nn layer into the torch module, so both compute with the
same numbers; float64 results must agree to ~1e-10 (1e-5 for the network steps, as the
requirement says), float32 ones within float32 rounding.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from cconv import nn  # noqa: E402
from support.checks import assert_close  # noqa: E402

F64 = np.float64
TNN = torch.nn


def rand(shape, seed=0, dtype=F64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def copy_into_torch(layer, module):
    """Load a cconv.nn module's state into the equivalent torch module (float64)."""
    state = {key: torch.from_numpy(np.array(value)) for key, value in layer.state_dict().items()}
    module.load_state_dict(state)
    return module


def torch_pass(module, x, g):
    """Forward of ``module`` on ``x`` and its gradients for output gradient ``g``."""
    module.zero_grad()
    xt = torch.from_numpy(x.copy()).requires_grad_(True)
    y = module(xt)
    y.backward(torch.from_numpy(g))
    grads = {name: p.grad.numpy() for name, p in module.named_parameters()}
    return y.detach().numpy(), xt.grad.numpy(), grads


def compare_layer(layer, module, x, rtol=None):
    """Forward, input gradient and every parameter gradient of ``layer`` vs ``module``."""
    y = layer(x)
    g = rand(y.shape, 99, y.dtype)
    y_t, dx_t, grads_t = torch_pass(module, x, g)
    assert_close(y, y_t, rtol=rtol, what=f"{layer!r} forward")
    assert_close(layer.backward(g), dx_t, rtol=rtol, what=f"{layer!r} input gradient")
    assert sorted(grads_t) == sorted(name for name, _ in layer.named_parameters())
    for name, param in layer.named_parameters():
        assert_close(param.grad, grads_t[name], rtol=rtol, what=f"{layer!r} grad {name}")


# --------------------------------------------------------------------------------------------
# layers
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ours, theirs", [
    (lambda: nn.Conv2d(6, 9, (3, 2), groups=3), lambda: TNN.Conv2d(6, 9, (3, 2), groups=3)),
    (lambda: nn.ConvTranspose2d(6, 4, (3, 2), groups=2),
     lambda: TNN.ConvTranspose2d(6, 4, (3, 2), groups=2)),
    (lambda: nn.Linear(7, 3), lambda: TNN.Linear(7, 3)),
], ids=["conv", "transposed", "linear"])
def test_initial_bounds_use_torchs_fan_in(ours, theirs):
    """Our uniform bound is 1/sqrt(fan_in) with the fan_in torch computes for its weight."""
    layer, module = ours(), theirs()
    fan_in, _ = TNN.init._calculate_fan_in_and_fan_out(module.weight)
    assert layer.weight.shape == tuple(module.weight.shape)
    bound = 1 / np.sqrt(fan_in)
    for ours_, theirs_ in ((layer.weight, module.weight), (layer.bias, module.bias)):
        assert np.abs(ours_).max() <= bound
        assert theirs_.abs().max().item() <= bound

CONV_CASES = [
    dict(),
    dict(stride=2, padding=1),
    dict(stride=(2, 1), padding=(0, 2), dilation=(1, 2)),
    dict(dilation=2, padding=2, groups=2),
    dict(groups=4, padding=1, bias=False),            # depthwise
    dict(padding="same", dilation=(2, 1)),
    dict(padding="valid", stride=3),
    dict(padding=1, padding_mode="reflect"),
    dict(padding=(2, 1), padding_mode="replicate", stride=2),
    dict(padding=2, padding_mode="circular", groups=2),
    dict(padding="same", padding_mode="reflect"),
]


@pytest.mark.parametrize("kw", CONV_CASES, ids=str)
def test_conv2d_matches_torch(kw):
    layer = nn.Conv2d(4, 8, 3, dtype=F64, rng=0, **kw)
    module = copy_into_torch(layer, TNN.Conv2d(4, 8, 3, dtype=torch.float64, **kw))
    compare_layer(layer, module, rand((2, 4, 9, 8)))


def test_conv2d_float32_matches_torch():
    layer = nn.Conv2d(16, 32, 3, padding=1, rng=0)
    module = copy_into_torch(layer, TNN.Conv2d(16, 32, 3, padding=1)).double()
    x = rand((4, 16, 12, 12), 1, np.float32)
    y = layer(x)
    assert y.dtype == np.float32
    g = rand(y.shape, 2, np.float32)
    y_t, dx_t, grads = torch_pass(module, x.astype(F64), g.astype(F64))
    assert_close(y, y_t, what="forward")
    assert_close(layer.backward(g), dx_t, what="input gradient")
    assert_close(layer.grad_weight, grads["weight"], what="grad_weight")
    assert_close(layer.grad_bias, grads["bias"], what="grad_bias")


TRANSPOSE_CASES = [
    dict(),
    dict(stride=2, padding=1, output_padding=1),
    dict(stride=(1, 2), padding=(1, 0), dilation=(2, 1), groups=2),
    dict(stride=2, dilation=3, output_padding=2, bias=False),   # output padding >= stride
]


@pytest.mark.parametrize("kw", TRANSPOSE_CASES, ids=str)
def test_conv_transpose2d_matches_torch(kw):
    layer = nn.ConvTranspose2d(4, 6, 3, dtype=F64, rng=0, **kw)
    module = copy_into_torch(layer, TNN.ConvTranspose2d(4, 6, 3, dtype=torch.float64, **kw))
    compare_layer(layer, module, rand((2, 4, 5, 6)))


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 0),
                                     dilation=(2, 1))], ids=str)
def test_max_pool_matches_torch(kw):
    x = rand((2, 3, 9, 8))
    x[0, 0, :4, :4] = 1.0  # ties: the gradient must go to the first maximum, as in torch
    compare_layer(nn.MaxPool2d(**kw), TNN.MaxPool2d(**kw), x)


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=(3, 2), stride=1, padding=(1, 1),
                                     count_include_pad=False)], ids=str)
def test_avg_pool_matches_torch(kw):
    compare_layer(nn.AvgPool2d(**kw), TNN.AvgPool2d(**kw), rand((2, 3, 9, 8)))


@pytest.mark.parametrize("kw", [dict(), dict(momentum=None), dict(momentum=0.3, eps=1e-3),
                                dict(affine=False), dict(track_running_stats=False)], ids=str)
def test_batch_norm_matches_torch_in_both_modes(kw):
    layer = nn.BatchNorm2d(3, dtype=F64, **kw)
    if layer.affine:
        layer.weight[:] = rand(3, 1)
        layer.bias[:] = rand(3, 2)
    module = copy_into_torch(layer, TNN.BatchNorm2d(3, dtype=torch.float64, **kw))
    for step in range(3):  # training: batch statistics, running statistics move
        compare_layer(layer, module, rand((4, 3, 5, 6), step) * 3 + 2)
        for key, value in module.state_dict().items():
            np.testing.assert_allclose(getattr(layer, key), value.numpy(), rtol=1e-12,
                                       err_msg=key)
    layer.eval()
    module.eval()
    compare_layer(layer, module, rand((2, 3, 5, 6), 7))


def test_batch_norm_float32_matches_torch():
    layer = nn.BatchNorm2d(8)
    module = copy_into_torch(layer, TNN.BatchNorm2d(8)).double()
    x = rand((16, 8, 6, 6), 3, np.float32) * 5 + 10  # an offset that naive float32 sums lose
    y = layer(x)
    g = rand(y.shape, 4, np.float32)
    y_t, dx_t, grads = torch_pass(module, x.astype(F64), g.astype(F64))
    assert_close(y, y_t, what="forward")
    assert_close(layer.backward(g), dx_t, rtol=3e-4, what="input gradient")
    assert_close(layer.grad_weight, grads["weight"], what="grad_weight")
    assert_close(layer.running_var, module.running_var.numpy(), what="running_var")


def test_linear_relu_flatten_match_torch():
    layer = nn.Linear(6, 5, dtype=F64, rng=0)
    compare_layer(layer, copy_into_torch(layer, TNN.Linear(6, 5, dtype=torch.float64)),
                  rand((3, 4, 6)))
    compare_layer(nn.ReLU(), TNN.ReLU(), rand((3, 4, 5)))
    compare_layer(nn.Flatten(), TNN.Flatten(), rand((3, 4, 2, 2)))


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_cross_entropy_matches_torch(reduction):
    logits = rand((6, 5)) * 30  # large spread: the stable log-softmax matters
    target = np.array([0, 4, 2, 2, 1, 3])
    loss_fn = nn.CrossEntropyLoss(reduction)
    lt = torch.from_numpy(logits).requires_grad_(True)
    loss_t = TNN.functional.cross_entropy(lt, torch.from_numpy(target), reduction=reduction)
    loss_t.backward()
    assert loss_fn(logits, target) == pytest.approx(loss_t.item(), rel=1e-12)
    assert_close(loss_fn.backward(), lt.grad.numpy(), what="logits gradient")


# --------------------------------------------------------------------------------------------
# optimizers: several steps with changing gradients, against torch.optim
# --------------------------------------------------------------------------------------------

class Holder(nn.Module):
    param_names = ("weight",)

    def __init__(self, value):
        super().__init__()
        self.weight = value


OPTIMIZERS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.1)),
    ("Adam", dict()),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, amsgrad=True)),
]


@pytest.mark.parametrize("name, kw", OPTIMIZERS, ids=str)
def test_optimizer_matches_torch(name, kw):
    holder = Holder(rand((3, 4)))
    weight_t = torch.from_numpy(holder.weight.copy()).requires_grad_(True)
    opt = getattr(nn, name)(holder.parameters(), **kw)
    opt_t = getattr(torch.optim, name)([weight_t], **kw)
    array = holder.weight
    for step in range(4):
        grad = rand((3, 4), 10 + step) * (step + 1)
        holder.grad_weight = grad
        weight_t.grad = torch.from_numpy(grad.copy())
        opt.step()
        opt_t.step()
        assert holder.weight is array  # updated in place
        assert_close(holder.weight, weight_t.detach().numpy(), what=f"step {step}")


# --------------------------------------------------------------------------------------------
# the same network in both libraries: training steps
# --------------------------------------------------------------------------------------------

def build_pair(dtype, seed=0):
    """A small CNN in cconv.nn and the same one (same weights) in torch."""
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, dtype=dtype, rng=seed), nn.BatchNorm2d(8, dtype=dtype),
        nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, stride=2, padding=1, dtype=dtype, rng=seed + 1),
        nn.BatchNorm2d(16, dtype=dtype), nn.ReLU(), nn.AvgPool2d(2),
        nn.Flatten(), nn.Linear(16 * 2 * 2, 10, dtype=dtype, rng=seed + 2))
    reference = TNN.Sequential(
        TNN.Conv2d(3, 8, 3, padding=1), TNN.BatchNorm2d(8), TNN.ReLU(), TNN.MaxPool2d(2),
        TNN.Conv2d(8, 16, 3, stride=2, padding=1), TNN.BatchNorm2d(16), TNN.ReLU(),
        TNN.AvgPool2d(2), TNN.Flatten(), TNN.Linear(16 * 2 * 2, 10)).double()
    return model, copy_into_torch(model, reference)


# float32: a convolution bias feeding a BatchNorm has a true gradient of exactly zero, so in
# float32 it is rounding noise (~1e-6) that the optimizers turn into bias differences of
# ~1.5e-4 of the largest bias after a few steps; everything else agrees to ~1e-5.
@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-5), (np.float32, 5e-4)],
                         ids=["float64", "float32"])
@pytest.mark.parametrize("name, kw", [("SGD", dict(lr=0.1, momentum=0.9, weight_decay=1e-3)),
                                      ("Adam", dict(lr=1e-2, weight_decay=1e-3))], ids=str)
def test_training_steps_match_torch(dtype, rtol, name, kw):
    """Loss, every gradient, the updated weights and the running statistics after each of
    three steps (torch in float64 throughout; the float32 run only differs by rounding)."""
    model, reference = build_pair(dtype)
    loss_fn = nn.CrossEntropyLoss()
    opt = getattr(nn, name)(model.parameters(), **kw)
    opt_t = getattr(torch.optim, name)(reference.parameters(), **kw)
    for step in range(3):
        x = rand((6, 3, 16, 16), step, dtype)
        target = np.random.default_rng(100 + step).integers(0, 10, 6)
        loss = loss_fn(model(x), target)
        model.backward(loss_fn.backward())
        opt.step()
        opt_t.zero_grad()
        loss_t = TNN.functional.cross_entropy(reference(torch.from_numpy(x.astype(F64))),
                                              torch.from_numpy(target))
        loss_t.backward()
        grads_t = {key: p.grad.numpy() for key, p in reference.named_parameters()}
        opt_t.step()
        assert loss == pytest.approx(loss_t.item(), rel=rtol)
        for key, param in model.named_parameters():
            assert_close(param.grad, grads_t[key], rtol=rtol, what=f"step {step} grad {key}")
        state_t = reference.state_dict()
        assert list(model.state_dict()) == list(state_t)
        for key, value in model.state_dict().items():
            if key.endswith("num_batches_tracked"):
                assert value == state_t[key].item() == step + 1
            else:
                assert_close(value, state_t[key].numpy(), rtol=rtol, what=f"step {step} {key}")
    model.eval()
    reference.eval()
    x = rand((2, 3, 16, 16), 50, dtype)
    assert_close(model(x), reference(torch.from_numpy(x.astype(F64))).detach().numpy(),
                 rtol=rtol, what="eval-mode output after training")
