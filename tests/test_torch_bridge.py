"""cconv.torch: the custom operators against torch.nn.functional, autograd's gradcheck (and
gradgradcheck) in float64, torch.library.opcheck (schema, fake tensors, autograd
registration, AOT dispatch), torch.compile, and a model that trains like torch's own."""

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import cconv  # noqa: E402
import cconv.torch as ct  # noqa: E402

F = torch.nn.functional
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(cconv.__file__)))

# (x shape, weight shape, keywords): plain, strided, dilated, grouped, depthwise, 1x1,
# asymmetric kernel with "same".
CONV_CASES = [
    ((2, 3, 7, 6), (4, 3, 3, 3), dict(padding=1)),
    ((1, 2, 9, 8), (3, 2, 3, 2), dict(stride=2, padding=(1, 0))),
    ((2, 2, 9, 9), (2, 2, 3, 3), dict(dilation=2, padding=2, stride=(1, 2))),
    ((1, 4, 6, 7), (6, 2, 3, 3), dict(groups=2, padding=1)),
    ((2, 3, 7, 7), (6, 1, 3, 3), dict(groups=3, padding=1, stride=2)),  # depthwise x2
    ((2, 5, 4, 4), (3, 5, 1, 1), dict()),
    ((1, 2, 6, 7), (2, 2, 4, 3), dict(padding="same", dilation=(1, 2))),
]
TRANSPOSE_CASES = [
    ((2, 3, 4, 5), (3, 2, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ((1, 4, 3, 4), (4, 1, 2, 3), dict(groups=2, dilation=2, padding=(1, 0))),
    ((2, 3, 5, 4), (3, 1, 3, 3), dict(groups=3, stride=(2, 1), output_padding=(1, 0))),
]


def _tensors(x_shape, w_shape, bias_size, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(x_shape, dtype=dtype, generator=g, requires_grad=True)
    w = torch.randn(w_shape, dtype=dtype, generator=g, requires_grad=True)
    b = torch.randn(bias_size, dtype=dtype, generator=g, requires_grad=True)
    return x, w, b


def _close(got, want, dtype):
    tol = 1e-4 if dtype == torch.float32 else 1e-12
    scale = max(float(want.abs().max()), 1e-3)
    err = float((got - want).abs().max())
    assert got.shape == want.shape and got.dtype == want.dtype
    assert err <= tol * scale, f"max error {err:.3e} > {tol} * {scale:.3e}"


# --------------------------------------------------------------------------------------------
# values and gradients against torch
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("x_shape,w_shape,kw", CONV_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_conv2d_and_gradients_equal_torch(x_shape, w_shape, kw, dtype):
    x, w, b = _tensors(x_shape, w_shape, w_shape[0], dtype)
    y = ct.conv2d(x, w, b, **kw)
    y_t = F.conv2d(x, w, b, **kw)
    _close(y.detach(), y_t.detach(), dtype)
    g = torch.randn_like(y)
    grads = torch.autograd.grad(y, (x, w, b), g)
    grads_t = torch.autograd.grad(y_t, (x, w, b), g)
    for got, want in zip(grads, grads_t):
        _close(got, want, dtype)


@pytest.mark.parametrize("x_shape,w_shape,kw", TRANSPOSE_CASES)
def test_conv_transpose2d_and_gradients_equal_torch(x_shape, w_shape, kw):
    x, w, b = _tensors(x_shape, w_shape, w_shape[1] * kw.get("groups", 1))
    y = ct.conv_transpose2d(x, w, b, **kw)
    y_t = F.conv_transpose2d(x, w, b, **kw)
    _close(y.detach(), y_t.detach(), torch.float64)
    g = torch.randn_like(y)
    for got, want in zip(torch.autograd.grad(y, (x, w, b), g),
                         torch.autograd.grad(y_t, (x, w, b), g)):
        _close(got, want, torch.float64)


@given(n=st.integers(1, 2), cg=st.integers(1, 3), kg=st.integers(1, 3), groups=st.integers(1, 2),
       h=st.integers(3, 9), w=st.integers(3, 9), r=st.integers(1, 3), s=st.integers(1, 3),
       stride=st.integers(1, 3), dilation=st.integers(1, 2), padding=st.integers(0, 2))
def test_random_shapes_equal_torch(n, cg, kg, groups, h, w, r, s, stride, dilation, padding):
    if min(h, w) + 2 * padding < dilation * (max(r, s) - 1) + 1:
        return  # no output pixel: torch raises as cconv does
    x, wt, b = _tensors((n, cg * groups, h, w), (kg * groups, cg, r, s), kg * groups)
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    y, y_t = ct.conv2d(x, wt, b, **kw), F.conv2d(x, wt, b, **kw)
    _close(y.detach(), y_t.detach(), torch.float64)
    g = torch.randn_like(y)
    for got, want in zip(torch.autograd.grad(y, (x, wt, b), g),
                         torch.autograd.grad(y_t, (x, wt, b), g)):
        _close(got, want, torch.float64)


@pytest.mark.parametrize("wants", [(True, False, False), (False, True, False),
                                   (False, False, True), (True, False, True)])
def test_requires_grad_combinations(wants):
    x, w, b = (t.detach().requires_grad_(want)
               for t, want in zip(_tensors((2, 3, 6, 6), (4, 3, 3, 3), 4), wants))
    y = ct.conv2d(x, w, b, stride=2, padding=1)
    y.square().sum().backward()
    x_t, w_t, b_t = (t.detach().clone().requires_grad_(want) for t, want in zip((x, w, b), wants))
    F.conv2d(x_t, w_t, b_t, stride=2, padding=1).square().sum().backward()
    for t, t_t, want in zip((x, w, b), (x_t, w_t, b_t), wants):
        if want:
            _close(t.grad, t_t.grad, torch.float64)
        else:
            assert t.grad is None


def test_strided_inputs_and_expanded_gradients():
    """channels_last and sliced inputs are read in place; y.sum() sends a stride-0 gradient."""
    x, w, b = _tensors((2, 4, 8, 9), (5, 4, 3, 3), 5)
    xs = x.detach().to(memory_format=torch.channels_last)[:, :, ::2].requires_grad_()
    y = ct.conv2d(xs, w, b, padding=1)
    y.sum().backward()
    xs_t = xs.detach().clone().requires_grad_()
    w_t = w.detach().clone().requires_grad_()
    F.conv2d(xs_t, w_t, b.detach(), padding=1).sum().backward()
    _close(y.detach(), F.conv2d(xs_t, w_t, b.detach(), padding=1).detach(), torch.float64)
    _close(xs.grad, xs_t.grad, torch.float64)
    _close(w.grad, w_t.grad, torch.float64)


def test_unbatched_input():
    x, w, b = _tensors((3, 6, 5), (2, 3, 3, 3), 2)
    _close(ct.conv2d(x, w, b, padding=1).detach(), F.conv2d(x, w, b, padding=1).detach(),
           torch.float64)
    wt = torch.randn(3, 2, 2, 2, dtype=torch.float64)
    _close(ct.conv_transpose2d(x, wt, stride=2).detach(),
           F.conv_transpose2d(x, wt, stride=2).detach(), torch.float64)


# --------------------------------------------------------------------------------------------
# gradcheck, gradgradcheck, opcheck, compile
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("x_shape,w_shape,kw", CONV_CASES)
def test_gradcheck_conv2d(x_shape, w_shape, kw):
    x, w, b = _tensors(x_shape, w_shape, w_shape[0])
    assert torch.autograd.gradcheck(lambda *a: ct.conv2d(*a, **kw), (x, w, b))


@pytest.mark.parametrize("x_shape,w_shape,kw", TRANSPOSE_CASES)
def test_gradcheck_conv_transpose2d(x_shape, w_shape, kw):
    x, w, b = _tensors(x_shape, w_shape, w_shape[1] * kw.get("groups", 1))
    assert torch.autograd.gradcheck(lambda *a: ct.conv_transpose2d(*a, **kw), (x, w, b))


@pytest.mark.parametrize("function,x_shape,w_shape,kw", [
    (ct.conv2d, (1, 2, 6, 5), (3, 2, 3, 2), dict(stride=2, padding=1, dilation=(1, 2))),
    (ct.conv2d, (1, 4, 5, 5), (4, 2, 3, 3), dict(groups=2, padding=1)),
    (ct.conv_transpose2d, (1, 2, 3, 4), (2, 3, 3, 3), dict(stride=2, output_padding=1)),
])
def test_gradgradcheck(function, x_shape, w_shape, kw):
    """Second derivatives: the backward passes are differentiable operators too."""
    k = w_shape[0] if function is ct.conv2d else w_shape[1]
    x, w, b = _tensors(x_shape, w_shape, k)
    assert torch.autograd.gradgradcheck(lambda *a: function(*a, **kw), (x, w, b))


def test_opcheck_every_operator():
    x, w, b = _tensors((2, 4, 7, 6), (6, 2, 3, 3), 6)
    conv = ([2, 1], [1, 0, 2, 1], [1, 2], 2)
    y = torch.ops.cconv.conv2d(x, w, b, *conv)
    wt = torch.randn(4, 3, 3, 3, dtype=torch.float64, requires_grad=True)
    tconv = ([2, 2], [1, 1, 0, 0], [1, 0], [1, 1], 2)
    yt = torch.ops.cconv.conv_transpose2d(x, wt, None, *tconv)
    cases = [
        (torch.ops.cconv.conv2d, (x, w, b) + conv),
        (torch.ops.cconv.conv2d_backward_data, (torch.randn_like(y), w, list(x.shape)) + conv),
        (torch.ops.cconv.conv2d_backward_weight, (torch.randn_like(y), x, list(w.shape)) + conv),
        (torch.ops.cconv.conv2d_backward_bias, (torch.randn_like(y),)),
        (torch.ops.cconv.conv_transpose2d, (x, wt, None) + tconv),
        (torch.ops.cconv.conv_transpose2d_backward_data,
         (torch.randn_like(yt), wt, list(x.shape)) + tconv),
        (torch.ops.cconv.conv_transpose2d_backward_weight,
         (torch.randn_like(yt), x, list(wt.shape)) + tconv),
    ]
    for op, args in cases:
        results = torch.library.opcheck(op, args)
        assert set(results.values()) == {"SUCCESS"}, (op, results)


def test_fake_tensors_give_shapes_without_computing():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(2, 4, 11, 9)
        y = ct.conv2d(x, torch.empty(6, 2, 3, 3), stride=2, padding=(1, 2), dilation=2,
                      groups=2)
        t = ct.conv_transpose2d(x, torch.empty(4, 3, 3, 3), stride=2, padding=1,
                                output_padding=1)
    assert tuple(y.shape) == (2, 6, 5, 5)
    assert tuple(t.shape) == (2, 3, 22, 18)


def test_compiled_training_step_equals_torch():
    torch.manual_seed(0)
    x = torch.randn(4, 3, 8, 8, dtype=torch.float64)
    target = torch.randn(4, 5, 4, 4, dtype=torch.float64)
    ref = torch.nn.Conv2d(3, 5, 3, stride=2, padding=1, dtype=torch.float64)
    mine = ct.Conv2d(3, 5, 3, stride=2, padding=1, dtype=torch.float64)
    mine.load_state_dict(ref.state_dict())

    def step(model, opt):
        opt.zero_grad()
        loss = (model(x) - target).square().mean()
        loss.backward()
        opt.step()
        return loss.detach()

    compiled = torch.compile(mine, backend="aot_eager", fullgraph=True)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
    opt_mine = torch.optim.SGD(mine.parameters(), lr=0.1)
    losses = [(step(ref, opt_ref), step(compiled, opt_mine)) for _ in range(3)]
    for want, got in losses:
        _close(got, want, torch.float64)
    assert losses[-1][1] < losses[0][1]  # it trains
    for p_ref, p_mine in zip(ref.parameters(), mine.parameters()):
        _close(p_mine.detach(), p_ref.detach(), torch.float64)


def test_module_padding_mode():
    ref = torch.nn.Conv2d(2, 3, 3, padding=2, dilation=2, padding_mode="reflect",
                          dtype=torch.float64)
    mine = ct.Conv2d(2, 3, 3, padding=2, dilation=2, padding_mode="reflect",
                     dtype=torch.float64)
    mine.load_state_dict(ref.state_dict())
    x = torch.randn(2, 2, 7, 6, dtype=torch.float64)
    _close(mine(x).detach(), ref(x).detach(), torch.float64)


# --------------------------------------------------------------------------------------------
# errors and import
# --------------------------------------------------------------------------------------------

def test_non_cpu_tensors_are_refused_naming_the_device():
    x = torch.empty(1, 2, 5, 5, device="meta")
    w = torch.empty(3, 2, 3, 3)
    with pytest.raises(ValueError, match="x is on device 'meta'"):
        ct.conv2d(x, w)
    with pytest.raises(ValueError, match="weight is on device 'meta'"):
        ct.conv_transpose2d(torch.empty(1, 3, 5, 5), w.to("meta"))


def test_bad_arguments_name_themselves():
    x, w = torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3)
    with pytest.raises(TypeError, match="weight has dtype torch.float64 but x has"):
        ct.conv2d(x, w.double())
    with pytest.raises(TypeError, match="x has dtype torch.bfloat16"):
        ct.conv2d(x.bfloat16(), w.bfloat16())
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        ct.conv2d(np.ones((1, 2, 5, 5)), w)
    with pytest.raises(TypeError, match="stride"):
        ct.conv2d(x, w, stride=(1, 2, 3))
    with pytest.raises(ValueError, match="padding='same' needs stride 1"):
        ct.conv2d(x, w, padding="same", stride=2)
    with pytest.raises(ValueError, match="groups"):
        ct.conv2d(x, w, groups=3)


def test_import_is_lazy_and_a_missing_torch_is_named():
    code = ("import sys, cconv\n"
            "assert not {'cconv.torch', 'torch'} & set(sys.modules), 'imported eagerly'\n"
            "sys.modules['torch'] = None\n"
            "try:\n    import cconv.torch\nexcept ImportError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "cconv.torch needs PyTorch" in out.stdout
