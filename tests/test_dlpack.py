"""Arrays of other libraries passed straight to cconv through DLPack: PyTorch CPU tensors, JAX
arrays and a bare DLPack exporter give exactly the NumPy path's results; an array on a device
the CPU cannot read is refused with an error naming the argument and the device."""

import numpy as np
import pytest

import cconv

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 4, 9, 8)).astype(np.float32)
W = RNG.standard_normal((6, 2, 3, 3)).astype(np.float32)
B = RNG.standard_normal(6).astype(np.float32)
KW = dict(stride=2, padding=1, dilation=(1, 2), groups=2)
G = RNG.standard_normal(cconv.conv2d(X, W, **KW).shape).astype(np.float32)


class DLPackOnly:
    """Exports an array through DLPack and nothing else (no __array__, no buffer protocol)."""

    def __init__(self, array, device=(1, 0)):
        self._array = array
        self._device = device

    def __dlpack__(self, **kwargs):
        if self._device[0] != 1:
            raise BufferError("this array lives on another device")
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._device


def _torch(a):
    torch = pytest.importorskip("torch")
    return torch.from_numpy(a.copy())


def _torch_strided(a):
    """A non-contiguous tensor of the same values (4-D ones with channels-last strides)."""
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(a.copy())
    return t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else t


def _jax(a):
    jnp = pytest.importorskip("jax.numpy")
    return jnp.asarray(a)


CONVERTERS = {"torch": _torch, "torch channels_last": _torch_strided, "jax": _jax,
              "dlpack only": lambda a: DLPackOnly(a.copy())}


@pytest.mark.parametrize("convert", CONVERTERS.values(), ids=CONVERTERS.keys())
def test_forward_and_gradients_equal_the_numpy_path(convert):
    x, w, b, g = (convert(a) for a in (X, W, B, G))
    np.testing.assert_array_equal(cconv.conv2d(x, w, b, **KW), cconv.conv2d(X, W, B, **KW))
    np.testing.assert_array_equal(cconv.conv2d_backward_data(g, w, X.shape, **KW),
                                  cconv.conv2d_backward_data(G, W, X.shape, **KW))
    np.testing.assert_array_equal(cconv.conv2d_backward_weight(g, x, W.shape, **KW),
                                  cconv.conv2d_backward_weight(G, X, W.shape, **KW))
    np.testing.assert_array_equal(cconv.conv2d_backward_bias(g), cconv.conv2d_backward_bias(G))
    dx, dw, db = cconv.conv2d_backward(g, x, w, **KW)
    np.testing.assert_array_equal(dw, cconv.conv2d_backward_weight(G, X, W.shape, **KW))


@pytest.mark.parametrize("convert", CONVERTERS.values(), ids=CONVERTERS.keys())
def test_transposed_convolution_and_mixed_operands(convert):
    wt = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    np.testing.assert_array_equal(
        cconv.conv_transpose2d(convert(X), convert(wt), stride=2, output_padding=1),
        cconv.conv_transpose2d(X, wt, stride=2, output_padding=1))
    # one operand foreign, the other NumPy; the result written into a NumPy out
    out = np.empty_like(cconv.conv2d(X, W, **KW))
    cconv.conv2d(X, convert(W), **KW, out=out)
    np.testing.assert_array_equal(out, cconv.conv2d(X, W, **KW))


def test_torch_meta_tensor_is_refused_naming_its_device():
    torch = pytest.importorskip("torch")
    meta = torch.empty(X.shape, device="meta")
    with pytest.raises((ValueError, TypeError), match="(?i)x .*meta"):
        cconv.conv2d(meta, W)
    with pytest.raises((ValueError, TypeError), match="(?i)weight .*meta"):
        cconv.conv2d_backward_data(G, torch.empty(W.shape, device="meta"), X.shape, **KW)


@pytest.mark.parametrize("device,name", [((2, 0), "CUDA"), ((10, 1), "ROCm")])
def test_non_cpu_dlpack_device_is_refused_naming_it(device, name):
    with pytest.raises((ValueError, TypeError), match=rf"(?i)^x\b.*{name}"):
        cconv.conv2d(DLPackOnly(X, device=device), W)
    with pytest.raises((ValueError, TypeError), match=f"(?i)grad_out.*{name}"):
        cconv.conv2d_backward_weight(DLPackOnly(G, device=device), X, W.shape, **KW)
