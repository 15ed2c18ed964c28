"""Convolution layers on cconv's kernels: ``Conv2d`` and ``ConvTranspose2d`` (PyTorch's API).

``Conv2d`` builds a :func:`cconv.plan_conv2d` for the first input shape it sees and reuses it
while the input shape and dtype stay the same (validation and the algorithm choice are then
done once); a new shape builds a new plan.  ``ConvTranspose2d`` calls cconv's transposed
functions, which also handle an output padding of at least the stride (possible with dilation)
by cropping; their geometry and algorithm choice are cached by the core.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .. import (ConvPlan, conv2d_backward_bias, conv_transpose2d, conv_transpose2d_backward,
                plan_conv2d)
from .._geometry import PADDING_MODES
from ._types import Array, DType, IntPair, Padding, Seed
from ._validation import check_grad, check_input, check_int, check_pair
from .init import as_generator, fan_in, fan_in_uniform
from .module import Module

__all__ = ["Conv2d", "ConvTranspose2d"]


def _check_padding(padding: object, owner: str) -> Padding:
    """Ints must be non-negative; strings and per-side pairs are left to cconv to judge."""
    if isinstance(padding, str):
        return padding
    if isinstance(padding, (tuple, list)) and all(isinstance(p, (tuple, list)) for p in padding):
        return tuple(tuple(p) for p in padding)  # type: ignore[return-value]
    return check_pair(padding, "padding", owner, 0)


class _ConvBase(Module):
    """What both convolution layers share: hyper-parameters, parameters, initialisation."""

    param_names = ("weight", "bias")

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntPair,
                 stride: IntPair, padding: Padding, dilation: IntPair, groups: int, bias: bool,
                 padding_mode: str, dtype: DType, rng: Seed, transposed: bool) -> None:
        super().__init__()
        owner = type(self).__name__
        self.in_channels = check_int(in_channels, "in_channels", owner, 1)
        self.out_channels = check_int(out_channels, "out_channels", owner, 1)
        self.groups = check_int(groups, "groups", owner, 1)
        for name, channels in (("in_channels", self.in_channels),
                               ("out_channels", self.out_channels)):
            if channels % self.groups:
                raise ValueError(f"{owner}: {name} ({channels}) must be divisible by groups "
                                 f"({self.groups})")
        self.kernel_size = check_pair(kernel_size, "kernel_size", owner, 1)
        self.stride = check_pair(stride, "stride", owner, 1)
        self.dilation = check_pair(dilation, "dilation", owner, 1)
        self.padding = _check_padding(padding, owner)
        if padding_mode not in PADDING_MODES:
            raise ValueError(f"{owner}: padding_mode must be one of {PADDING_MODES}, got "
                             f"{padding_mode!r}")
        self.padding_mode = padding_mode
        if transposed:
            shape = (self.in_channels, self.out_channels // self.groups) + self.kernel_size
        else:
            shape = (self.out_channels, self.in_channels // self.groups) + self.kernel_size
        generator = as_generator(rng)
        fan = fan_in(shape)
        self.weight: Array = fan_in_uniform(generator, shape, fan, dtype)
        self.bias: Optional[Array] = (fan_in_uniform(generator, (self.out_channels,), fan, dtype)
                                      if bias else None)
        self.grad_weight: Optional[Array] = None
        self.grad_bias: Optional[Array] = None

    def _keywords(self) -> Dict[str, Any]:
        """The geometry keywords of every cconv call this layer makes."""
        return dict(stride=self.stride, padding=self.padding, dilation=self.dilation,
                    groups=self.groups, padding_mode=self.padding_mode)

    def _repr_options(self) -> List[Tuple[str, object, object]]:
        """(name, value, default) of the options ``repr`` shows when not at their default."""
        return [("padding", self.padding, (0, 0)), ("dilation", self.dilation, (1, 1)),
                ("groups", self.groups, 1), ("padding_mode", self.padding_mode, "zeros")]

    def _input(self, x: object) -> Array:
        return check_input(self, x, f"(N, {self.in_channels}, H, W)", 4, self.in_channels)

    def __repr__(self) -> str:
        text = (f"{type(self).__name__}({self.in_channels}, {self.out_channels}, "
                f"kernel_size={self.kernel_size}, stride={self.stride}")
        for name, value, default in self._repr_options():
            if value != default:
                text += f", {name}={value!r}"
        if self.bias is None:
            text += ", bias=False"
        return text + ")"


class Conv2d(_ConvBase):
    """2-D convolution layer, as ``torch.nn.Conv2d``, computed by cconv.

    Parameters
    ----------
    in_channels, out_channels : int
        C and K; both divisible by ``groups``.
    kernel_size : int or (int, int)
    stride, dilation : int or (int, int)
    padding : int, (int, int), ((top, bottom), (left, right)) or str
        Any padding cconv accepts, including ``"valid"``, ``"same"`` and ``"full"``.
    groups : int
    bias : bool
    padding_mode : str
        ``"zeros"`` or another mode of cconv (``"reflect"``, ``"replicate"``,
        ``"circular"``, ...); the border is filled as the mode says before convolving.
    dtype : dtype-like
        Of the weight and bias.
    rng : numpy.random.Generator, int or None
        Source of the initial weights (PyTorch's default initialisation).

    Attributes
    ----------
    weight : ndarray
        (K, C/groups, R, S).
    bias : ndarray or None
        (K,).
    grad_weight, grad_bias : ndarray or None
        Set by :meth:`backward`.
    plan : cconv.ConvPlan or None
        The plan of the last input shape.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntPair,
                 stride: IntPair = 1, padding: Padding = 0, dilation: IntPair = 1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 dtype: DType = np.float32, *, rng: Seed = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, dtype, rng, transposed=False)
        self.plan: Optional[ConvPlan] = None
        self._plan_key: Optional[Tuple[Tuple[int, ...], np.dtype[Any]]] = None
        self._x: Optional[Array] = None

    def _plan_for(self, x: Array) -> ConvPlan:
        key = (x.shape, x.dtype)
        if self.plan is None or key != self._plan_key:
            dtype = np.result_type(x.dtype, self.weight.dtype)
            self.plan = plan_conv2d(x.shape, self.weight.shape, dtype=dtype, **self._keywords())
            self._plan_key = key
        return self.plan

    def forward(self, x: Array) -> Array:
        """Convolve ``x`` (N, C, H, W) and keep it for :meth:`backward`.

        Parameters
        ----------
        x : ndarray
            (N, in_channels, H, W); kept by reference, so do not modify it before backward.

        Returns
        -------
        ndarray
            (N, out_channels, OH, OW) in ``numpy.result_type(x, weight)``.
        """
        x = self._input(x)
        y = self._plan_for(x).forward(x, self.weight, self.bias)
        self._x = x
        return y

    def backward(self, grad_out: Array) -> Array:
        """Gradients of the last forward call.

        Parameters
        ----------
        grad_out : ndarray
            (N, out_channels, OH, OW).

        Returns
        -------
        ndarray
            Gradient with respect to the input; ``grad_weight`` and ``grad_bias`` are set.
        """
        x: Array = self._saved(self._x)
        plan: ConvPlan = self._saved(self.plan)
        dy = check_grad(self, grad_out, plan.output_shape)
        self.grad_weight = plan.backward_weight(dy, x)
        self.grad_bias = None if self.bias is None else conv2d_backward_bias(dy)
        return plan.backward_data(dy, self.weight)


class ConvTranspose2d(_ConvBase):
    """Transposed 2-D convolution layer, as ``torch.nn.ConvTranspose2d``, computed by cconv.

    Parameters
    ----------
    in_channels, out_channels : int
        C_in and K; both divisible by ``groups``.
    kernel_size : int or (int, int)
    stride : int or (int, int)
    padding : int, (int, int), ((top, bottom), (left, right)) or "valid"
        Removed from the full output, as in PyTorch.
    output_padding : int or (int, int)
        Extra rows / columns at the bottom / right, smaller than the stride or the dilation.
    groups : int
    bias : bool
    dilation : int or (int, int)
    padding_mode : str
        Passed to :func:`cconv.conv_transpose2d` (PyTorch allows only ``"zeros"``).
    dtype : dtype-like
    rng : numpy.random.Generator, int or None

    Attributes
    ----------
    weight : ndarray
        (C_in, K/groups, R, S), as PyTorch's.
    bias : ndarray or None
        (K,).
    grad_weight, grad_bias : ndarray or None
        Set by :meth:`backward`.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntPair,
                 stride: IntPair = 1, padding: Padding = 0, output_padding: IntPair = 0,
                 groups: int = 1, bias: bool = True, dilation: IntPair = 1,
                 padding_mode: str = "zeros", dtype: DType = np.float32, *,
                 rng: Seed = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, dtype, rng, transposed=True)
        self.output_padding = check_pair(output_padding, "output_padding", "ConvTranspose2d", 0)
        self._x: Optional[Array] = None
        self._y_shape: Tuple[int, ...] = ()

    def _keywords(self) -> Dict[str, Any]:
        return dict(super()._keywords(), output_padding=self.output_padding)

    def _repr_options(self) -> List[Tuple[str, object, object]]:
        return [("output_padding", self.output_padding, (0, 0))] + super()._repr_options()

    def forward(self, x: Array) -> Array:
        """Transposed convolution of ``x`` (N, C_in, H, W); ``x`` is kept for backward.

        Parameters
        ----------
        x : ndarray
            (N, in_channels, H, W); kept by reference.

        Returns
        -------
        ndarray
            (N, out_channels, OH, OW) with PyTorch's output size.
        """
        x = self._input(x)
        y = conv_transpose2d(x, self.weight, self.bias, **self._keywords())
        self._x, self._y_shape = x, y.shape
        return y

    def backward(self, grad_out: Array) -> Array:
        """Gradients of the last forward call.

        Parameters
        ----------
        grad_out : ndarray
            Of the last output's shape.

        Returns
        -------
        ndarray
            Gradient with respect to the input; ``grad_weight`` and ``grad_bias`` are set.
        """
        x: Array = self._saved(self._x)
        dy = check_grad(self, grad_out, self._y_shape)
        need = ("data", "weight") if self.bias is None else ("data", "weight", "bias")
        dx, self.grad_weight, self.grad_bias = conv_transpose2d_backward(
            dy, x, self.weight, need=need, **self._keywords())
        assert dx is not None  # "data" is always asked for
        return dx
