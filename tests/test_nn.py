"""cconv.nn's module machinery, without PyTorch: initialisation, plans, errors, modes, state
dictionaries and .npz files, optimizer rules worked by hand, and the two examples.

Gradients are checked in test_nn_gradients.py, agreement with PyTorch in test_nn_torch.py.
"""

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cconv
from cconv import nn
from support.checks import assert_close
from support.reference import ref_conv2d

ROOT = Path(__file__).resolve().parents[1]
F64 = np.float64


def rand(shape, seed=0, dtype=F64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def small_model(seed=0, dtype=np.float32):
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, rng=seed, dtype=dtype),
                         nn.BatchNorm2d(4, dtype=dtype), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Dropout(0.3, rng=seed),
                         nn.Linear(16, 3, rng=seed + 1, dtype=dtype))


# --------------------------------------------------------------------------------------------
# initialisation: uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) with PyTorch's fan_in
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("make, fan_in, outputs", [
    (lambda: nn.Conv2d(6, 40, (3, 5), groups=2, rng=0), 3 * 3 * 5, 40),
    (lambda: nn.Conv2d(1, 64, 2, rng=0), 4, 64),
    # transposed: weight (C_in, K/groups, R, S), fan_in = K/groups * R * S (not C_in)
    (lambda: nn.ConvTranspose2d(6, 40, 3, groups=2, rng=0), 20 * 9, 40),
    (lambda: nn.ConvTranspose2d(64, 2, 3, rng=0), 2 * 9, 2),
    (lambda: nn.Linear(30, 50, rng=0), 30, 50),
])
def test_default_initialisation(make, fan_in, outputs):
    layer = make()
    bound = 1 / math.sqrt(fan_in)
    w = layer.weight
    assert w.dtype == np.float32 and w.flags.writeable
    assert np.abs(w).max() <= bound
    assert np.abs(w).max() > 0.9 * bound  # hundreds of draws: one lands near the bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.15 * bound  # uniform's std
    assert layer.bias.shape == (outputs,)
    assert np.abs(layer.bias).max() <= bound


def test_initialisation_is_seeded_and_typed():
    a, b = nn.Conv2d(3, 8, 3, rng=5), nn.Conv2d(3, 8, 3, rng=5)
    np.testing.assert_array_equal(a.weight, b.weight)
    assert not np.array_equal(a.weight, nn.Conv2d(3, 8, 3, rng=6).weight)
    layer = nn.Conv2d(3, 8, 3, bias=False, dtype=np.float64, rng=np.random.default_rng(1))
    assert layer.weight.dtype == np.float64 and layer.bias is None
    assert [p.name for p in layer.parameters()] == ["weight"]
    assert nn.ConvTranspose2d(4, 6, (2, 3), groups=2).weight.shape == (4, 3, 2, 3)
    bn = nn.BatchNorm2d(5)
    np.testing.assert_array_equal(bn.weight, np.ones(5))
    np.testing.assert_array_equal(bn.running_var, np.ones(5))
    assert bn.num_batches_tracked == 0 and bn.num_batches_tracked.dtype == np.int64


# --------------------------------------------------------------------------------------------
# Conv2d plans
# --------------------------------------------------------------------------------------------

def test_conv2d_reuses_its_plan_until_the_input_shape_changes():
    layer = nn.Conv2d(3, 4, 3, padding="same", dtype=F64, rng=0)
    x = rand((2, 3, 7, 6))
    layer(x)
    plan = layer.plan
    assert isinstance(plan, cconv.ConvPlan) and plan.output_shape == (2, 4, 7, 6)
    layer(rand((2, 3, 7, 6), 1))
    assert layer.plan is plan
    bigger = rand((3, 3, 9, 5), 2)
    y = layer(bigger)
    assert layer.plan is not plan and layer.plan.output_shape == (3, 4, 9, 5)
    # the new plan's "same" padding is that of the new shape
    assert_close(y, ref_conv2d(bigger, layer.weight, layer.bias, pads=((1, 1), (1, 1))))
    plan = layer.plan
    layer(bigger.astype(np.float32))
    assert layer.plan is not plan  # a new dtype gets its own plan too


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("layer, x, words", [
    (nn.Conv2d(3, 4, 3), np.zeros((2, 3, 8), np.float32), ["Conv2d(3, 4", "(2, 3, 8)",
                                                           "(N, 3, H, W)"]),
    (nn.Conv2d(3, 4, 3), np.zeros((2, 5, 8, 8), np.float32), ["Conv2d(3, 4", "(2, 5, 8, 8)"]),
    (nn.ConvTranspose2d(3, 4, 3), np.zeros((1, 4, 5, 5), np.float32), ["ConvTranspose2d",
                                                                       "(1, 4, 5, 5)"]),
    (nn.BatchNorm2d(6), np.zeros((2, 5, 3, 3), np.float32), ["BatchNorm2d(6", "(2, 5, 3, 3)"]),
    (nn.Linear(10, 2), np.zeros((4, 9), np.float32), ["Linear(in_features=10", "(4, 9)"]),
    (nn.MaxPool2d(2), np.zeros((4, 9, 9), np.float32), ["MaxPool2d", "(4, 9, 9)"]),
    (nn.AvgPool2d(4), np.zeros((1, 1, 3, 3), np.float32), ["AvgPool2d", "(1, 1, 3, 3)"]),
    (nn.Flatten(2), np.zeros((4, 9), np.float32), ["Flatten", "(4, 9)"]),
])
def test_wrong_input_shape_names_layer_and_shapes(layer, x, words):
    with pytest.raises(ValueError) as info:
        layer(x)
    for word in words:
        assert word in str(info.value)


def test_integer_input_is_a_type_error():
    with pytest.raises(TypeError, match="floating-point"):
        nn.Conv2d(1, 1, 1)(np.zeros((1, 1, 2, 2), np.int32))


LAYERS_FOR_BACKWARD = [nn.Conv2d(1, 2, 3), nn.ConvTranspose2d(1, 2, 3), nn.BatchNorm2d(2),
                       nn.Linear(2, 2), nn.ReLU(), nn.Flatten(), nn.Dropout(),
                       nn.MaxPool2d(2), nn.AvgPool2d(2), nn.Sequential(nn.ReLU())]


@pytest.mark.parametrize("layer", LAYERS_FOR_BACKWARD, ids=repr)
def test_backward_before_forward_is_a_runtime_error(layer):
    with pytest.raises(RuntimeError, match="backward called before forward"):
        layer.backward(np.zeros((1, 2, 4, 4), np.float32))


def test_loss_backward_before_forward_is_a_runtime_error():
    with pytest.raises(RuntimeError, match="before forward"):
        nn.CrossEntropyLoss().backward()


def test_grad_of_wrong_shape_names_both_shapes():
    layer = nn.Conv2d(2, 3, 3)
    layer(np.zeros((1, 2, 5, 5), np.float32))
    with pytest.raises(ValueError, match=r"\(1, 3, 4, 4\).*\(1, 3, 3, 3\)"):
        layer.backward(np.zeros((1, 3, 4, 4), np.float32))


@pytest.mark.parametrize("make, error, words", [
    (lambda: nn.Conv2d(3, 4, 3, groups=2), ValueError, "in_channels (3) must be divisible"),
    (lambda: nn.Conv2d(4, 6, 3, groups=4), ValueError, "out_channels (6) must be divisible"),
    (lambda: nn.Conv2d(3, 4, 0), ValueError, "kernel_size must be >= 1"),
    (lambda: nn.Conv2d(3, 4, "3"), TypeError, "kernel_size must be an int or a pair"),
    (lambda: nn.Conv2d(3, 4, 3, stride=(1, 0)), ValueError, "stride must be >= 1"),
    (lambda: nn.Conv2d(3, 4, 3, padding=-1), ValueError, "padding must be >= 0"),
    (lambda: nn.Conv2d(3, 4, 3, padding_mode="mirror"), ValueError, "padding_mode must be"),
    (lambda: nn.Conv2d(3.0, 4, 3), TypeError, "in_channels must be an int"),
    (lambda: nn.Conv2d(3, 4, 3, rng="seed"), TypeError, "rng must be"),
    (lambda: nn.ConvTranspose2d(3, 4, 3, output_padding=-1), ValueError, "output_padding"),
    (lambda: nn.MaxPool2d(2, padding=2), ValueError, "at most half"),
    (lambda: nn.AvgPool2d(3, padding=2), ValueError, "at most half"),
    (lambda: nn.Dropout(1.5), ValueError, "p must be in [0, 1]"),
    (lambda: nn.BatchNorm2d(0), ValueError, "num_features must be >= 1"),
    (lambda: nn.BatchNorm2d(3, momentum=2.0), ValueError, "momentum must be in [0, 1]"),
    (lambda: nn.Linear(0, 3), ValueError, "in_features must be >= 1"),
    (lambda: nn.CrossEntropyLoss("none"), ValueError, "reduction must be one of"),
    (lambda: nn.Sequential(nn.ReLU(), "relu"), TypeError, "argument 1 is not a Module"),
    (lambda: nn.SGD([], lr=0.1), ValueError, "empty parameter list"),
    (lambda: nn.SGD(nn.Linear(2, 2).parameters(), lr=-1.0), ValueError, "lr must be >= 0"),
    (lambda: nn.SGD(nn.Linear(2, 2).parameters(), nesterov=True), ValueError, "nesterov"),
    (lambda: nn.Adam(nn.Linear(2, 2).parameters(), betas=(0.9, 1.0)), ValueError, "betas[1]"),
    (lambda: nn.Adam([np.zeros(3)]), TypeError, "Parameter handles"),
])
def test_bad_arguments(make, error, words):
    with pytest.raises(error) as info:
        make()
    assert words in str(info.value)


@pytest.mark.parametrize("logits, target, error, words", [
    (np.zeros((3, 4)), np.array([0, 4, 1]), ValueError, "[0, 4)"),
    (np.zeros((3, 4)), np.array([0.0, 1.0, 1.0]), TypeError, "integer class indices"),
    (np.zeros((3, 4)), np.array([0, 1]), ValueError, "(3, 4) and (2,)"),
    (np.zeros((3, 4), np.int64), np.array([0, 1, 1]), TypeError, "floating-point"),
])
def test_bad_loss_inputs(logits, target, error, words):
    with pytest.raises(error) as info:
        nn.CrossEntropyLoss()(logits, target)
    assert words in str(info.value)


# --------------------------------------------------------------------------------------------
# modes
# --------------------------------------------------------------------------------------------

def test_train_and_eval_reach_every_layer():
    model = small_model()
    assert model.eval() is model
    assert not any(layer.training for layer in model)
    model.train()
    assert all(layer.training for layer in model)


def test_dropout_masks_and_scales_in_training_only():
    x = np.ones((200, 100), np.float32)
    layer = nn.Dropout(0.3, rng=0)
    y = layer(x)
    kept = y != 0
    assert np.allclose(y[kept], 1 / 0.7)
    # 20000 draws: the zero fraction is within 6 standard deviations of p
    assert abs((~kept).mean() - 0.3) < 6 * math.sqrt(0.3 * 0.7 / x.size)
    np.testing.assert_array_equal(layer.backward(x), y)  # same mask, same scale
    assert not np.array_equal(layer(x), y)  # a new mask per call
    np.testing.assert_array_equal(nn.Dropout(0.3, rng=0)(x), y)  # seeded
    layer.eval()
    np.testing.assert_array_equal(layer(x), x)
    np.testing.assert_array_equal(nn.Dropout(1.0)(x), np.zeros_like(x))
    np.testing.assert_array_equal(nn.Dropout(0.0)(x), x)


def test_batch_norm_eval_uses_running_statistics():
    layer = nn.BatchNorm2d(3, momentum=0.25, dtype=F64)
    x = rand((5, 3, 4, 4)) * 2 + 3
    layer(x)
    per_channel = x.transpose(1, 0, 2, 3).reshape(3, -1)
    mean, var = per_channel.mean(axis=1), per_channel.var(axis=1, ddof=1)
    assert_close(layer.running_mean, 0.25 * mean, what="running_mean")
    assert_close(layer.running_var, 0.75 + 0.25 * var, what="running_var (unbiased)")
    assert layer.num_batches_tracked == 1
    layer.weight[:] = [1.0, 2.0, -1.0]
    layer.bias[:] = [0.0, 0.5, 1.0]
    layer.eval()
    x2 = rand((2, 3, 4, 4), 1)
    expected = ((x2 - layer.running_mean[:, None, None])
                / np.sqrt(layer.running_var[:, None, None] + 1e-5)
                * layer.weight[:, None, None] + layer.bias[:, None, None])
    assert_close(layer(x2), expected, what="eval output")
    assert layer.num_batches_tracked == 1  # evaluation does not count


def test_batch_norm_needs_two_values_per_channel_in_training():
    with pytest.raises(ValueError, match="more than one value per channel"):
        nn.BatchNorm2d(2)(np.zeros((1, 2, 1, 1), np.float32))


# --------------------------------------------------------------------------------------------
# parameters, state dictionaries, .npz files
# --------------------------------------------------------------------------------------------

def test_state_dict_keys_are_pytorchs():
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(),
                          nn.Sequential(nn.Linear(2, 2, bias=False), nn.BatchNorm2d(2,
                                                                                 affine=False)))
    assert list(model.state_dict()) == [
        "0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var",
        "1.num_batches_tracked", "3.0.weight", "3.1.running_mean", "3.1.running_var",
        "3.1.num_batches_tracked"]
    assert [name for name, _ in model.named_parameters()] == ["0.weight", "0.bias", "1.weight",
                                                              "1.bias", "3.0.weight"]


def test_state_dict_holds_copies_and_loading_is_in_place():
    model = small_model()
    state = model.state_dict()
    state["0.weight"] += 1.0
    assert not np.array_equal(state["0.weight"], model[0].weight)
    weight = model[0].weight
    handle = model.parameters()[0]
    model.load_state_dict(state)
    assert model[0].weight is weight and handle.value is weight
    np.testing.assert_array_equal(weight, state["0.weight"])


def test_load_state_dict_checks_keys_and_shapes_before_changing_anything():
    model = small_model()
    before = model.state_dict()
    state = model.state_dict()
    del state["1.running_var"]
    state["9.weight"] = np.zeros(1)
    with pytest.raises(ValueError, match=r"missing keys \['1.running_var'\].*'9.weight'"):
        model.load_state_dict(state)
    bad = {key: value + 1 for key, value in before.items()}
    bad["6.weight"] = np.zeros((3, 15), np.float32)
    with pytest.raises(ValueError, match=r"6.weight has shape \(3, 15\).*\(3, 16\)"):
        model.load_state_dict(bad)
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(value, before[key], err_msg=key)
    partial = {"0.bias": np.ones(4)}
    model.load_state_dict(partial, strict=False)
    np.testing.assert_array_equal(model[0].bias, np.ones(4))


def train_steps(model, steps=3, seed=0):
    rng = np.random.default_rng(seed)
    loss_fn = nn.CrossEntropyLoss()
    opt = nn.Adam(model.parameters(), lr=0.01)
    for _ in range(steps):
        x = rng.standard_normal((8, 2, 4, 4)).astype(np.float32)
        loss_fn(model(x), rng.integers(0, 3, 8))
        model.backward(loss_fn.backward())
        opt.step()


def test_save_and_load_round_trip_through_npz(tmp_path):
    model = small_model(seed=0)
    train_steps(model)
    path = tmp_path / "model.npz"
    nn.save(model, path)
    with np.load(path) as archive:
        assert sorted(archive.files) == sorted(model.state_dict())
        assert archive["1.num_batches_tracked"] == 3
    other = small_model(seed=7)
    x = rand((4, 2, 4, 4), 3, np.float32)
    assert not np.array_equal(other.eval()(x), model.eval()(x))
    nn.load(other, path)
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(other.state_dict()[key], value, err_msg=key)
    np.testing.assert_array_equal(other.eval()(x), model.eval()(x))
    # training mode too (batch statistics; dropout masks from equal seeds)
    other[5].rng, model[5].rng = np.random.default_rng(1), np.random.default_rng(1)
    np.testing.assert_array_equal(other.train()(x), model.train()(x))
    loaded = nn.load_state_dict(path)
    assert loaded["0.weight"].dtype == np.float32


# --------------------------------------------------------------------------------------------
# optimizers: rules worked by hand
# --------------------------------------------------------------------------------------------

def one_weight(value):
    layer = nn.Linear(1, 1, bias=False, dtype=F64)
    layer.weight[:] = value
    return layer


def test_sgd_momentum_and_weight_decay_by_hand():
    layer = one_weight(1.0)
    opt = nn.SGD(layer.parameters(), lr=0.1, momentum=0.9, weight_decay=0.5)
    weight = layer.weight
    layer.grad_weight = np.array([[1.0]])
    opt.step()   # g = 1 + 0.5 * 1 = 1.5; buf = 1.5; w = 1 - 0.15
    assert layer.weight[0, 0] == pytest.approx(0.85, abs=1e-15)
    opt.step()   # g = 1 + 0.425 = 1.425; buf = 1.35 + 1.425 = 2.775; w = 0.85 - 0.2775
    assert layer.weight[0, 0] == pytest.approx(0.5725, abs=1e-15)
    assert layer.weight is weight
    opt.zero_grad()
    assert layer.grad_weight is None
    opt.step()   # no gradient: no update, momentum or not
    assert layer.weight[0, 0] == pytest.approx(0.5725, abs=1e-15)


def test_adam_first_steps_by_hand():
    layer = one_weight(2.0)
    opt = nn.Adam(layer.parameters(), lr=0.1, eps=1e-8)
    layer.grad_weight = np.array([[-4.0]])
    opt.step()   # bias-corrected m / sqrt(v) = g / |g|: a step of lr against the gradient
    first = 2.0 + 0.1 * 4 / (4 + 1e-8)
    assert layer.weight[0, 0] == pytest.approx(first, abs=1e-14)
    layer.grad_weight = np.array([[2.0]])
    opt.step()
    m = (0.9 * 0.1 * -4 + 0.1 * 2) / (1 - 0.9 ** 2)
    v = (0.999 * 0.001 * 16 + 0.001 * 4) / (1 - 0.999 ** 2)
    assert layer.weight[0, 0] == pytest.approx(first - 0.1 * m / (math.sqrt(v) + 1e-8),
                                               abs=1e-14)


def test_module_zero_grad_and_parameter_handles():
    model = small_model()
    train_steps(model, steps=1)
    handles = model.parameters()
    assert [repr(h).split(",")[0] for h in handles[:2]] == ["Parameter(Conv2d.weight",
                                                            "Parameter(Conv2d.bias"]
    assert all(h.grad is not None and h.grad.shape == h.value.shape for h in handles)
    model.zero_grad()
    assert all(h.grad is None for h in handles)


# --------------------------------------------------------------------------------------------
# the examples
# --------------------------------------------------------------------------------------------

def run_example(name, *args, timeout=300):
    env = dict(os.environ)
    # the directory holding the cconv that this test imports (a checkout or an installation)
    package_root = str(Path(cconv.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, str(ROOT / "examples" / name), *args],
                            capture_output=True, text=True, timeout=timeout, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()


def test_digits_example_reaches_97_percent():
    pytest.importorskip("sklearn")
    # One thread: the run's numbers do not depend on the thread count (cconv's results are
    # deterministic across threads), and a shared test machine is not oversubscribed.
    lines = run_example("train_digits.py", "--threads", "1")
    match = re.fullmatch(r"accuracy: (\d+\.\d)%", lines[-1])
    assert match, lines[-1]
    assert float(match.group(1)) >= 97.0


def test_mnist_like_example_reports_epoch_times():
    lines = run_example("train_mnist_like.py", "--samples", "128", "--epochs", "2",
                        "--threads", "1")
    epochs = [line for line in lines if line.startswith("epoch ")]
    assert len(epochs) == 2
    times = [float(t) for t in re.findall(r"([\d.]+) s \(loss", "\n".join(epochs))]
    try:
        import torch  # noqa: F401
        with_torch = True
    except ImportError:
        with_torch = False
    assert len(times) == 2 * (2 if with_torch else 1) and min(times) > 0
    assert lines[-1].startswith("time per epoch (median): cconv.nn ")
    assert ("PyTorch" in lines[-1]) == with_torch
