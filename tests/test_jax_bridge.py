"""cconv.jax: the forward against jax.lax.conv_general_dilated, reverse-mode gradients by
jax.test_util.check_grads (finite differences, float64) and against JAX's own convolution's
gradients, under jit and vmap."""

import os
import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

import cconv  # noqa: E402
import cconv.jax as cj  # noqa: E402
from support.checks import assert_close  # noqa: E402
from support.reference import ref_conv2d, resolve_padding  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(cconv.__file__)))

# (x shape NCHW, weight shape OIHW, keywords)
CASES = [
    ((2, 3, 8, 7), (4, 3, 3, 3), dict(padding=1)),
    ((1, 2, 9, 8), (3, 2, 3, 2), dict(stride=(2, 1), padding=((1, 0), (0, 2)))),
    ((2, 4, 9, 9), (6, 2, 3, 3), dict(groups=2, dilation=2, padding="same")),
    ((1, 3, 7, 8), (6, 1, 3, 3), dict(groups=3, stride=2, padding="same_lower")),
]


@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield


def _operands(x_shape, w_shape, layout, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    b = rng.standard_normal(w_shape[0]).astype(dtype)
    if layout == "NHWC":
        return jnp.asarray(x.transpose(0, 2, 3, 1)), jnp.asarray(w.transpose(2, 3, 1, 0)), b
    return jnp.asarray(x), jnp.asarray(w), b


def _lax_conv(x, w, b, kw, layout):
    """JAX's own convolution with the same arguments (explicit per-side padding)."""
    spatial = x.shape[2:] if layout == "NCHW" else x.shape[1:3]
    kernel = w.shape[2:] if layout == "NCHW" else w.shape[:2]
    pads = resolve_padding(kw.get("padding", 0), spatial, kernel, kw.get("stride", 1),
                           kw.get("dilation", 1))
    stride = np.broadcast_to(kw.get("stride", 1), 2).tolist()
    dilation = np.broadcast_to(kw.get("dilation", 1), 2).tolist()
    numbers = ("NCHW", "OIHW", "NCHW") if layout == "NCHW" else ("NHWC", "HWIO", "NHWC")
    y = jax.lax.conv_general_dilated(x, w, stride, [tuple(p) for p in pads],
                                     rhs_dilation=dilation,
                                     feature_group_count=kw.get("groups", 1),
                                     dimension_numbers=numbers,
                                     precision=jax.lax.Precision.HIGHEST)
    return y + (b.reshape(1, -1, 1, 1) if layout == "NCHW" else b)


@pytest.mark.parametrize("x_shape,w_shape,kw", CASES)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_forward_equals_lax_under_jit(x_shape, w_shape, kw, layout):
    x, w, b = _operands(x_shape, w_shape, layout, np.float32)
    weight_layout = "OIHW" if layout == "NCHW" else "HWIO"
    f = jax.jit(lambda x, w, b: cj.conv2d(x, w, b, layout=layout, weight_layout=weight_layout,
                                          **kw))
    y = f(x, w, b)
    assert y.dtype == jnp.float32
    assert_close(np.asarray(y), np.asarray(_lax_conv(x, w, b, kw, layout)), rtol=1e-5)


@pytest.mark.parametrize("x_shape,w_shape,kw", CASES)
def test_check_grads_float64(x64, x_shape, w_shape, kw):
    x, w, b = _operands(x_shape, w_shape, "NCHW", np.float64)
    assert x.dtype == jnp.float64
    check_grads(lambda x, w, b: cj.conv2d(x, w, b, **kw), (x, w, b), order=1, modes=["rev"])


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_gradients_equal_lax_gradients_under_jit(x64, layout):
    x_shape, w_shape, kw = CASES[2]
    x, w, b = _operands(x_shape, w_shape, layout, np.float64)
    weight_layout = "OIHW" if layout == "NCHW" else "HWIO"
    probe = jnp.asarray(np.random.default_rng(3).standard_normal(
        cj.conv2d(x, w, layout=layout, weight_layout=weight_layout, **kw).shape))

    def loss(conv):
        return lambda x, w, b: jnp.sum(jnp.sin(conv(x, w, b)) * probe)

    mine = jax.jit(jax.grad(loss(lambda x, w, b: cj.conv2d(
        x, w, b, layout=layout, weight_layout=weight_layout, **kw)), argnums=(0, 1, 2)))
    theirs = jax.grad(loss(lambda x, w, b: _lax_conv(x, w, b, kw, layout)), argnums=(0, 1, 2))
    for got, want in zip(mine(x, w, b), theirs(x, w, b)):
        assert_close(np.asarray(got), np.asarray(want), rtol=1e-12)


def test_gradient_of_one_argument(x64):
    x, w, _ = _operands((2, 3, 6, 6), (4, 3, 3, 3), "NCHW", np.float64)
    dx = jax.grad(lambda x: cj.conv2d(x, w, padding=1).sum())(x)
    dw = jax.grad(lambda w: cj.conv2d(x, w, padding=1).sum())(w)
    g = np.ones((2, 4, 6, 6))
    assert_close(np.asarray(dx), cconv.conv2d_backward_data(g, np.asarray(w), x.shape, padding=1))
    assert_close(np.asarray(dw), cconv.conv2d_backward_weight(g, np.asarray(x), w.shape,
                                                               padding=1))


@pytest.mark.parametrize("mode", ["reflect", "circular", "replicate"])
def test_padding_modes(x64, mode):
    x, w, b = _operands((1, 2, 7, 6), (3, 2, 3, 3), "NCHW", np.float64)
    kw = dict(padding=2, stride=2, padding_mode=mode)
    numpy_mode = {"reflect": "reflect", "circular": "wrap", "replicate": "edge"}[mode]
    want = ref_conv2d(np.pad(np.asarray(x), ((0, 0), (0, 0), (2, 2), (2, 2)), mode=numpy_mode),
                      np.asarray(w), b, stride=2)
    assert_close(np.asarray(jax.jit(lambda x: cj.conv2d(x, w, b, **kw))(x)), want)
    check_grads(lambda x, w: cj.conv2d(x, w, **kw), (x, w), order=1, modes=["rev"])


def test_vmap():
    x, w, _ = _operands((3, 2, 2, 6, 6), (4, 2, 3, 3), "NCHW", np.float32)  # 3 batches of 2
    y = jax.vmap(lambda x: cj.conv2d(x, w, padding=1))(x)
    want = np.stack([cconv.conv2d(np.asarray(xi), np.asarray(w), padding=1) for xi in x])
    assert_close(np.asarray(y), want, rtol=1e-6)


def test_bad_arguments_raise_at_trace_time():
    x, w, _ = _operands((1, 2, 5, 5), (3, 2, 3, 3), "NCHW", np.float32)
    with pytest.raises(ValueError, match="padding_mode"):
        jax.jit(lambda x: cj.conv2d(x, w, padding=1, padding_mode="mirror"))(x)
    with pytest.raises(ValueError, match="bias must have shape"):
        cj.conv2d(x, w, jnp.ones(2))
    with pytest.raises(ValueError, match="groups"):
        cj.conv2d(x, w, groups=3)


def test_import_is_lazy_and_a_missing_jax_names_the_extra():
    code = ("import sys, cconv\n"
            "assert not {'cconv.jax', 'jax'} & set(sys.modules), 'imported eagerly'\n"
            "sys.modules['jax'] = None\n"
            "try:\n    import cconv.jax\nexcept ImportError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert 'pip install "cconv[jax]"' in out.stdout
