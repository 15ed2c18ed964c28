"""PyTorch operators that run cconv's kernels and train: ``conv2d``, ``conv_transpose2d``.

``import cconv`` does not import this module; ``import cconv.torch`` needs PyTorch, which
cconv never depends on: install the PyTorch build for your platform first.

Each pass is a ``torch.library.custom_op`` in the ``cconv`` namespace, so autograd,
``torch.compile`` and ``torch.export`` see one opaque operator per pass:

============================================  ====================================================
operator                                      cconv function
============================================  ====================================================
``cconv::conv2d``                             :func:`cconv.conv2d`
``cconv::conv2d_backward_data``               :func:`cconv.conv2d_backward_data`
``cconv::conv2d_backward_weight``             :func:`cconv.conv2d_backward_weight`
``cconv::conv2d_backward_bias``               :func:`cconv.conv2d_backward_bias`
``cconv::conv_transpose2d``                   :func:`cconv.conv_transpose2d`
``cconv::conv_transpose2d_backward_data``     :func:`cconv.conv_transpose2d_backward_data`
``cconv::conv_transpose2d_backward_weight``   :func:`cconv.conv_transpose2d_backward_weight`
============================================  ====================================================

Every operator has a fake (meta) implementation that only computes the output's shape, and
an autograd formula made of the others.  Each family (forward ``F(x, w)``, data gradient
``D(g, w)``, weight gradient ``G(g, x)``) is bilinear, which closes the formulas under
differentiation: ``F``'s gradients are ``D`` and ``G``; ``D(g, w)``'s are ``F(h, w)`` for
``g`` and ``G(g, h)`` for ``w``; ``G(g, x)``'s are ``F(x, h)`` for ``g`` and ``D(g, h)`` for
``x`` (``h`` the incoming gradient).  So gradients of any order run on cconv's kernels.

Tensors must be on the CPU (any strides; they are read in place through NumPy) and share one
floating dtype (float16, float32 or float64), as ``torch.nn.functional.conv2d`` requires.
The data layout is NCHW with (K, C/groups, R, S) weights, PyTorch's own; an unbatched
(C, H, W) input gives an unbatched output.  cconv's thread setting
(:func:`cconv.set_num_threads`) applies, not ``torch.set_num_threads``.
"""

import dataclasses
from typing import Any, Optional, Sequence, Union

import numpy as np

try:
    import torch
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError("cconv.torch needs PyTorch, which cconv does not install: install "
                      "PyTorch (e.g. pip install torch)") from exc

from . import _geometry as _geometry_module
from . import functional as _functional_module

__all__ = ["conv2d", "conv_transpose2d", "Conv2d"]

# cconv's internal modules carry no type hints; Any-typed aliases keep ``mypy --strict`` from
# flagging every call.
_functional: Any = _functional_module
_geometry: Any = _geometry_module

_Tensor = torch.Tensor
_IntPair = Union[int, Sequence[int]]
_DTYPES = (torch.float16, torch.float32, torch.float64)


# -- tensors <-> arrays -----------------------------------------------------------------------

def _array(t: _Tensor) -> np.ndarray:
    """The tensor's memory as a NumPy array (no copy)."""
    return t.detach().resolve_neg().numpy()


def _tensor(a: Any) -> _Tensor:
    # The fake implementations promise contiguous results; keep that promise whatever
    # memory order a cconv pass hands back.
    return torch.from_numpy(np.ascontiguousarray(a))


def _per_side(padding: Sequence[int]) -> tuple[tuple[int, int], tuple[int, int]]:
    """The operators' [top, bottom, left, right] as cconv's ((top, bottom), (left, right))."""
    top, bottom, left, right = padding
    return ((top, bottom), (left, right))


def _bias_array(bias: Optional[_Tensor]) -> Optional[np.ndarray]:
    return None if bias is None else _array(bias)


# -- convolution ------------------------------------------------------------------------------

@torch.library.custom_op("cconv::conv2d", mutates_args=(), device_types="cpu")
def _conv2d(x: _Tensor, weight: _Tensor, bias: Optional[_Tensor], stride: list[int],
            padding: list[int], dilation: list[int], groups: int) -> _Tensor:
    return _tensor(_functional.conv2d(_array(x), _array(weight), _bias_array(bias),
                                      stride=stride, padding=_per_side(padding),
                                      dilation=dilation, groups=groups))


@_conv2d.register_fake
def _conv2d_fake(x: _Tensor, weight: _Tensor, bias: Optional[_Tensor], stride: list[int],
                 padding: list[int], dilation: list[int], groups: int) -> _Tensor:
    n, _, h, w = x.shape
    k, _, r, s = weight.shape
    size = _geometry.conv_output_size
    return x.new_empty((n, k, size(h, r, stride[0], dilation[0], padding[0], padding[1]),
                        size(w, s, stride[1], dilation[1], padding[2], padding[3])))


@torch.library.custom_op("cconv::conv2d_backward_data", mutates_args=(), device_types="cpu")
def _conv2d_backward_data(grad_out: _Tensor, weight: _Tensor, input_shape: list[int],
                          stride: list[int], padding: list[int], dilation: list[int],
                          groups: int) -> _Tensor:
    return _tensor(_functional.conv2d_backward_data(
        _array(grad_out), _array(weight), input_shape, stride=stride,
        padding=_per_side(padding), dilation=dilation, groups=groups))


@_conv2d_backward_data.register_fake
def _conv2d_backward_data_fake(grad_out: _Tensor, weight: _Tensor, input_shape: list[int],
                               stride: list[int], padding: list[int], dilation: list[int],
                               groups: int) -> _Tensor:
    return grad_out.new_empty(input_shape)


@torch.library.custom_op("cconv::conv2d_backward_weight", mutates_args=(), device_types="cpu")
def _conv2d_backward_weight(grad_out: _Tensor, x: _Tensor, weight_shape: list[int],
                            stride: list[int], padding: list[int], dilation: list[int],
                            groups: int) -> _Tensor:
    return _tensor(_functional.conv2d_backward_weight(
        _array(grad_out), _array(x), weight_shape, stride=stride, padding=_per_side(padding),
        dilation=dilation, groups=groups))


@_conv2d_backward_weight.register_fake
def _conv2d_backward_weight_fake(grad_out: _Tensor, x: _Tensor, weight_shape: list[int],
                                 stride: list[int], padding: list[int], dilation: list[int],
                                 groups: int) -> _Tensor:
    return grad_out.new_empty(weight_shape)


@torch.library.custom_op("cconv::conv2d_backward_bias", mutates_args=(), device_types="cpu")
def _conv2d_backward_bias(grad_out: _Tensor) -> _Tensor:
    return _tensor(_functional.conv2d_backward_bias(_array(grad_out)))


@_conv2d_backward_bias.register_fake
def _conv2d_backward_bias_fake(grad_out: _Tensor) -> _Tensor:
    return grad_out.new_empty((grad_out.shape[1],))


# -- transposed convolution -------------------------------------------------------------------

@torch.library.custom_op("cconv::conv_transpose2d", mutates_args=(), device_types="cpu")
def _conv_transpose2d(x: _Tensor, weight: _Tensor, bias: Optional[_Tensor], stride: list[int],
                      padding: list[int], output_padding: list[int], dilation: list[int],
                      groups: int) -> _Tensor:
    return _tensor(_functional.conv_transpose2d(
        _array(x), _array(weight), _bias_array(bias), stride=stride,
        padding=_per_side(padding), output_padding=output_padding, dilation=dilation,
        groups=groups))


@_conv_transpose2d.register_fake
def _conv_transpose2d_fake(x: _Tensor, weight: _Tensor, bias: Optional[_Tensor],
                           stride: list[int], padding: list[int], output_padding: list[int],
                           dilation: list[int], groups: int) -> _Tensor:
    n, _, h, w = x.shape
    _, kg, r, s = weight.shape
    size = _geometry.transpose_output_size
    return x.new_empty((n, kg * groups,
                        size(h, r, stride[0], dilation[0], padding[0], padding[1])
                        + output_padding[0],
                        size(w, s, stride[1], dilation[1], padding[2], padding[3])
                        + output_padding[1]))


@torch.library.custom_op("cconv::conv_transpose2d_backward_data", mutates_args=(),
                         device_types="cpu")
def _conv_transpose2d_backward_data(grad_out: _Tensor, weight: _Tensor, input_shape: list[int],
                                    stride: list[int], padding: list[int],
                                    output_padding: list[int], dilation: list[int],
                                    groups: int) -> _Tensor:
    return _tensor(_functional.conv_transpose2d_backward_data(
        _array(grad_out), _array(weight), input_shape, stride=stride,
        padding=_per_side(padding), output_padding=output_padding, dilation=dilation,
        groups=groups))


@_conv_transpose2d_backward_data.register_fake
def _conv_transpose2d_backward_data_fake(grad_out: _Tensor, weight: _Tensor,
                                         input_shape: list[int], stride: list[int],
                                         padding: list[int], output_padding: list[int],
                                         dilation: list[int], groups: int) -> _Tensor:
    return grad_out.new_empty(input_shape)


@torch.library.custom_op("cconv::conv_transpose2d_backward_weight", mutates_args=(),
                         device_types="cpu")
def _conv_transpose2d_backward_weight(grad_out: _Tensor, x: _Tensor, weight_shape: list[int],
                                      stride: list[int], padding: list[int],
                                      output_padding: list[int], dilation: list[int],
                                      groups: int) -> _Tensor:
    return _tensor(_functional.conv_transpose2d_backward_weight(
        _array(grad_out), _array(x), weight_shape, stride=stride, padding=_per_side(padding),
        output_padding=output_padding, dilation=dilation, groups=groups))


@_conv_transpose2d_backward_weight.register_fake
def _conv_transpose2d_backward_weight_fake(grad_out: _Tensor, x: _Tensor,
                                           weight_shape: list[int], stride: list[int],
                                           padding: list[int], output_padding: list[int],
                                           dilation: list[int], groups: int) -> _Tensor:
    return grad_out.new_empty(weight_shape)


# -- autograd ---------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Family:
    """The three bilinear passes of one convolution: forward F(x, w) (with an optional bias),
    data gradient D(g, w, x_shape) and weight gradient G(g, x, w_shape); each takes the same
    static arguments (stride, padding, ...) after these."""

    forward: Any
    data: Any
    weight: Any

    def register(self) -> None:
        """Give each pass its gradients in terms of the three (see the module docstring)."""
        self.forward.register_autograd(self._forward_backward, setup_context=_save_two)
        self.data.register_autograd(self._data_backward, setup_context=_save_two)
        self.weight.register_autograd(self._weight_backward, setup_context=_save_two)

    def _forward_backward(self, ctx: Any, grad: _Tensor) -> tuple[Optional[_Tensor], ...]:
        x, w = ctx.saved_tensors
        need = ctx.needs_input_grad
        dx = self.data(grad, w, list(x.shape), *ctx.static) if need[0] else None
        dw = self.weight(grad, x, list(w.shape), *ctx.static) if need[1] else None
        db = _conv2d_backward_bias(grad) if ctx.third is not None and need[2] else None
        return (dx, dw, db) + (None,) * len(ctx.static)

    def _data_backward(self, ctx: Any, grad: _Tensor) -> tuple[Optional[_Tensor], ...]:
        g, w = ctx.saved_tensors
        need = ctx.needs_input_grad
        dg = self.forward(grad, w, None, *ctx.static) if need[0] else None
        dw = self.weight(g, grad, list(w.shape), *ctx.static) if need[1] else None
        return (dg, dw, None) + (None,) * len(ctx.static)

    def _weight_backward(self, ctx: Any, grad: _Tensor) -> tuple[Optional[_Tensor], ...]:
        g, x = ctx.saved_tensors
        need = ctx.needs_input_grad
        dg = self.forward(x, grad, None, *ctx.static) if need[0] else None
        dx = self.data(g, grad, list(x.shape), *ctx.static) if need[1] else None
        return (dg, dx, None) + (None,) * len(ctx.static)


def _save_two(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    """Save a pass's two tensors; keep its third input (bias or shape) and static arguments."""
    first, second, third, *static = inputs
    ctx.save_for_backward(first, second)
    ctx.third = third
    ctx.static = static


def _bias_backward(ctx: Any, grad: _Tensor) -> _Tensor:
    # The bias gradient sums over N, H, W: its own gradient broadcasts back.
    return grad.reshape(1, -1, 1, 1).expand(ctx.grad_shape)


def _save_bias_shape(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    ctx.grad_shape = inputs[0].shape


_Family(_conv2d, _conv2d_backward_data, _conv2d_backward_weight).register()
_Family(_conv_transpose2d, _conv_transpose2d_backward_data,
        _conv_transpose2d_backward_weight).register()
_conv2d_backward_bias.register_autograd(_bias_backward, setup_context=_save_bias_shape)


# -- the public functions ---------------------------------------------------------------------

def _check_tensors(x: Any, weight: Any, bias: Any) -> None:
    """CPU tensors of one floating dtype, or an error naming the argument."""
    for name, t in (("x", x), ("weight", weight), ("bias", bias)):
        if t is None and name == "bias":
            continue
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.device.type != "cpu":
            raise ValueError(f"cconv.torch runs on CPU tensors only: {name} is on device "
                             f"{str(t.device)!r} (move it with .cpu())")
        if t.dtype not in _DTYPES:
            raise TypeError(f"{name} has dtype {t.dtype}; cconv computes in float16, float32 "
                            f"or float64")
        if t.dtype != x.dtype:
            raise TypeError(f"{name} has dtype {t.dtype} but x has {x.dtype}; convert one "
                            f"(as torch.nn.functional.conv2d requires)")
    if weight.dim() != 4:
        raise ValueError(f"weight must be 4-D, got shape {tuple(weight.shape)}")
    if x.dim() not in (3, 4):
        raise ValueError(f"x must be 4-D (N, C, H, W) or 3-D (C, H, W), got shape "
                         f"{tuple(x.shape)}")


def _pair(value: object, name: str) -> list[int]:  # object: anything, validated below
    if isinstance(value, int) and not isinstance(value, bool):
        return [value, value]
    items = list(value) if isinstance(value, Sequence) and not isinstance(value, str) else []
    if len(items) != 2 or not all(isinstance(v, int) and not isinstance(v, bool)
                                  for v in items):
        raise TypeError(f"{name} must be an int or a pair of ints, got {value!r}")
    return items


def _conv_padding(padding: Union[str, _IntPair], kernel: Sequence[int], stride: list[int],
                  dilation: list[int]) -> list[int]:
    """PyTorch's conv2d padding (int, pair, "valid", "same") as [top, bottom, left, right]."""
    if isinstance(padding, str):
        if padding == "valid":
            return [0, 0, 0, 0]
        if padding != "same":
            raise ValueError(f"padding must be an int, a pair, 'valid' or 'same', got "
                             f"{padding!r}")
        if stride != [1, 1]:
            raise ValueError(f"padding='same' needs stride 1 (as in PyTorch), got stride "
                             f"{stride}")
        pads = []
        for k, d in zip(kernel, dilation):
            total = d * (k - 1)  # the odd pixel after the image, as PyTorch does
            pads += [total // 2, total - total // 2]
        return pads
    ph, pw = _pair(padding, "padding")
    return [ph, ph, pw, pw]


def _batched(x: _Tensor) -> tuple[_Tensor, bool]:
    """A (C, H, W) input as a batch of one, and whether it was unbatched."""
    return (x.unsqueeze(0), True) if x.dim() == 3 else (x, False)


def conv2d(x: _Tensor, weight: _Tensor, bias: Optional[_Tensor] = None,
           stride: _IntPair = 1, padding: Union[str, _IntPair] = 0, dilation: _IntPair = 1,
           groups: int = 1) -> _Tensor:
    """``torch.nn.functional.conv2d`` computed by cconv, differentiable to any order.

    Parameters
    ----------
    x : torch.Tensor
        (N, C, H, W) or unbatched (C, H, W), on the CPU.
    weight : torch.Tensor
        (K, C/groups, R, S), same dtype as ``x``.
    bias : torch.Tensor, optional
        (K,).
    stride, dilation : int or (int, int)
    padding : int, (int, int), "valid" or "same"
        As in PyTorch ("same" needs stride 1; an odd total puts the extra pixel last).
    groups : int

    Returns
    -------
    torch.Tensor
        (N, K, OH, OW), or (K, OH, OW) for an unbatched input.
    """
    _check_tensors(x, weight, bias)
    s, d = _pair(stride, "stride"), _pair(dilation, "dilation")
    pads = _conv_padding(padding, weight.shape[2:], s, d)
    xb, unbatched = _batched(x)
    y: _Tensor = _conv2d(xb, weight, bias, s, pads, d, int(groups))
    return y.squeeze(0) if unbatched else y


def conv_transpose2d(x: _Tensor, weight: _Tensor, bias: Optional[_Tensor] = None,
                     stride: _IntPair = 1, padding: _IntPair = 0,
                     output_padding: _IntPair = 0, groups: int = 1,
                     dilation: _IntPair = 1) -> _Tensor:
    """``torch.nn.functional.conv_transpose2d`` computed by cconv, differentiable to any order.

    Parameters
    ----------
    x : torch.Tensor
        (N, C_in, H, W) or unbatched (C_in, H, W), on the CPU.
    weight : torch.Tensor
        (C_in, K/groups, R, S), same dtype as ``x``.
    bias : torch.Tensor, optional
        (K,).
    stride, padding, output_padding, dilation : int or (int, int)
        As in PyTorch.
    groups : int

    Returns
    -------
    torch.Tensor
        (N, K, OH, OW) with ``OH = (H - 1) * stride - 2 * padding + dilation * (R - 1)
        + output_padding + 1``, or (K, OH, OW) for an unbatched input.
    """
    _check_tensors(x, weight, bias)
    ph, pw = _pair(padding, "padding")
    xb, unbatched = _batched(x)
    y: _Tensor = _conv_transpose2d(xb, weight, bias, _pair(stride, "stride"), [ph, ph, pw, pw],
                          _pair(output_padding, "output_padding"), _pair(dilation, "dilation"),
                          int(groups))
    return y.squeeze(0) if unbatched else y


class Conv2d(torch.nn.Conv2d):
    """``torch.nn.Conv2d`` whose convolution runs on cconv (same arguments, same state dict).

    Parameters
    ----------
    in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
    padding_mode, device, dtype
        As for ``torch.nn.Conv2d`` (``device`` must be the CPU).  A ``padding_mode`` other
        than ``"zeros"`` pads with ``torch.nn.functional.pad`` first, as
        ``torch.nn.Conv2d`` does.
    """

    def _conv_forward(self, input: _Tensor, weight: _Tensor,
                      bias: Optional[_Tensor]) -> _Tensor:
        if self.padding_mode != "zeros":
            padded = torch.nn.functional.pad(input, self._reversed_padding_repeated_twice,
                                             mode=self.padding_mode)
            return conv2d(padded, weight, bias, self.stride, 0, self.dilation, self.groups)
        padding = self.padding if isinstance(self.padding, str) else tuple(self.padding)
        return conv2d(input, weight, bias, self.stride, padding, self.dilation, self.groups)
