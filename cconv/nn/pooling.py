"""Max and average pooling over (N, C, H, W) arrays, as PyTorch's ``MaxPool2d`` / ``AvgPool2d``.

Both walk the kernel's taps: each tap is one strided view of the padded input with the
output's shape, so a pass costs ``R * S`` vectorised operations on output-sized arrays and
never materialises the (N, C, OH, OW, R, S) window array.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional, Tuple

import numpy as np

from ._types import Array, IntPair
from ._validation import check_grad, check_input, check_pair
from .module import Module

__all__ = ["AvgPool2d", "MaxPool2d"]


class _Pool2d(Module):
    """Kernel, stride, padding and dilation, the output size and the per-tap views."""

    def __init__(self, kernel_size: IntPair, stride: Optional[IntPair], padding: IntPair,
                 dilation: IntPair) -> None:
        super().__init__()
        owner = type(self).__name__
        self.kernel_size = check_pair(kernel_size, "kernel_size", owner, 1)
        self.stride = check_pair(kernel_size if stride is None else stride, "stride", owner, 1)
        self.padding = check_pair(padding, "padding", owner, 0)
        self.dilation = check_pair(dilation, "dilation", owner, 1)
        for pad, extent in zip(self.padding, self._extent()):
            # PyTorch's rule: every window then holds at least one real input element.
            if 2 * pad > extent:
                raise ValueError(f"{owner}: padding {self.padding} must be at most half the "
                                 f"kernel extent {self._extent()}")
        self._in_shape: Optional[Tuple[int, ...]] = None
        self._out_shape: Tuple[int, ...] = ()

    def _extent(self) -> Tuple[int, int]:
        """The dilated kernel's size along each axis."""
        (r, s), (dh, dw) = self.kernel_size, self.dilation
        return ((r - 1) * dh + 1, (s - 1) * dw + 1)

    def _input(self, x: object) -> Array:
        array = check_input(self, x, "(N, C, H, W)", 4)
        out = [(size + 2 * pad - extent) // stride + 1 for size, pad, extent, stride
               in zip(array.shape[2:], self.padding, self._extent(), self.stride)]
        if min(out) < 1:
            raise ValueError(f"{self!r}: input of shape {array.shape} is smaller than the "
                             f"kernel extent {self._extent()} with padding {self.padding}")
        self._in_shape = array.shape
        self._out_shape = array.shape[:2] + (out[0], out[1])
        return array

    def _padded(self, a: Array, fill: float) -> Array:
        ph, pw = self.padding
        if ph == pw == 0:
            return a
        widths = ((0, 0),) * (a.ndim - 2) + ((ph, ph), (pw, pw))
        return np.pad(a, widths, constant_values=fill)

    def _cropped(self, a: Array) -> Array:
        ph, pw = self.padding
        return a[..., ph:a.shape[-2] - ph, pw:a.shape[-1] - pw]

    def _taps(self, padded: Array) -> Iterator[Array]:
        """One view of ``padded`` per kernel tap, each with the output's spatial shape."""
        (sh, sw), (dh, dw) = self.stride, self.dilation
        oh, ow = self._out_shape[2:]
        for r in range(self.kernel_size[0]):
            for s in range(self.kernel_size[1]):
                yield padded[..., r * dh:r * dh + (oh - 1) * sh + 1:sh,
                             s * dw:s * dw + (ow - 1) * sw + 1:sw]

    def _grad(self, grad_out: Array) -> Tuple[Array, Array]:
        """The checked ``grad_out`` and a zeroed padded input gradient to scatter into."""
        in_shape: Tuple[int, ...] = self._saved(self._in_shape)
        dy = check_grad(self, grad_out, self._out_shape)
        ph, pw = self.padding
        padded_shape = in_shape[:2] + (in_shape[2] + 2 * ph, in_shape[3] + 2 * pw)
        return dy, np.zeros(padded_shape, dtype=dy.dtype)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding})")


class MaxPool2d(_Pool2d):
    """2-D max pooling, as ``torch.nn.MaxPool2d`` (without ``ceil_mode``).

    Parameters
    ----------
    kernel_size : int or (int, int)
    stride : int or (int, int), optional
        Default: ``kernel_size``.
    padding : int or (int, int)
        Implicit -inf padding on both sides, at most half the kernel extent.
    dilation : int or (int, int)

    Notes
    -----
    A NaN in a window makes its maximum NaN, as in PyTorch.  The gradient of a window goes
    to one element: the first (in row-major window order) equal to the maximum (or, in a
    window holding NaN, the first NaN); PyTorch picks the same element for ties.
    """

    def __init__(self, kernel_size: IntPair, stride: Optional[IntPair] = None,
                 padding: IntPair = 0, dilation: IntPair = 1) -> None:
        super().__init__(kernel_size, stride, padding, dilation)
        self._saved_state: Optional[Tuple[Array, Array]] = None

    def forward(self, x: Array) -> Array:
        """Maximum of each window.

        Parameters
        ----------
        x : ndarray
            (N, C, H, W); kept by reference for :meth:`backward`.

        Returns
        -------
        ndarray
            (N, C, OH, OW), ``OH = (H + 2 * padding - dilation * (R - 1) - 1) // stride + 1``.
        """
        x = self._input(x)
        padded = self._padded(x, -np.inf)
        taps = self._taps(padded)
        best = np.array(next(taps), copy=True)
        for view in taps:
            np.maximum(best, view, out=best)  # propagates NaN
        self._saved_state = (padded, best)
        return best

    def backward(self, grad_out: Array) -> Array:
        """Route each output gradient to the element that was its window's maximum.

        Parameters
        ----------
        grad_out : ndarray
            (N, C, OH, OW).

        Returns
        -------
        ndarray
            (N, C, H, W).
        """
        dy, dxp = self._grad(grad_out)
        padded, best = self._saved(self._saved_state)
        has_nan = bool(np.isnan(best).any())
        # Windows that share no element (dilation 1, stride >= kernel) can write their
        # gradients instead of adding them, which saves a pass over each tap.
        disjoint = self.dilation == (1, 1) and all(
            s >= k for s, k in zip(self.stride, self.kernel_size))
        # Finding the winners here rather than in forward keeps inference free of it; plain
        # element-wise passes are much faster than masked copies or fancy indexing.
        unclaimed = np.ones(best.shape, dtype=bool)
        hit = np.empty(best.shape, dtype=bool)
        share = np.empty(best.shape, dtype=dy.dtype)
        for view, grad_view in zip(self._taps(padded), self._taps(dxp)):
            np.equal(view, best, out=hit)
            if has_nan:
                hit |= np.isnan(view)
            hit &= unclaimed
            unclaimed ^= hit  # hit lies within unclaimed: this clears it there
            if disjoint:
                np.multiply(dy, hit, out=grad_view)
            else:
                np.multiply(dy, hit, out=share)
                grad_view += share
        return self._cropped(dxp)


class AvgPool2d(_Pool2d):
    """2-D average pooling, as ``torch.nn.AvgPool2d`` (without ``ceil_mode``).

    Parameters
    ----------
    kernel_size : int or (int, int)
    stride : int or (int, int), optional
        Default: ``kernel_size``.
    padding : int or (int, int)
        Implicit zero padding on both sides, at most half the kernel size.
    count_include_pad : bool
        Divide by the kernel size (True, PyTorch's default) or by the number of input
        elements inside each window (False).
    """

    def __init__(self, kernel_size: IntPair, stride: Optional[IntPair] = None,
                 padding: IntPair = 0, count_include_pad: bool = True) -> None:
        super().__init__(kernel_size, stride, padding, 1)
        self.count_include_pad = bool(count_include_pad)
        self._divisor: Optional[Array] = None

    def _divisors(self, height: int, width: int, dtype: np.dtype[Any]) -> Array:
        """What each output is divided by: the kernel size, or the count of real inputs."""
        if self.count_include_pad or self.padding == (0, 0):
            return np.asarray(self.kernel_size[0] * self.kernel_size[1], dtype=dtype)
        inside = self._padded(np.ones((height, width), dtype=dtype), 0.0)
        return sum(self._taps(inside), np.zeros(self._out_shape[2:], dtype=dtype))

    def forward(self, x: Array) -> Array:
        """Mean of each window.

        Parameters
        ----------
        x : ndarray
            (N, C, H, W).

        Returns
        -------
        ndarray
            (N, C, OH, OW).
        """
        x = self._input(x)
        total = np.zeros(self._out_shape, dtype=x.dtype)
        for view in self._taps(self._padded(x, 0.0)):
            total += view
        self._divisor = self._divisors(x.shape[2], x.shape[3], x.dtype)
        total /= self._divisor
        return total

    def backward(self, grad_out: Array) -> Array:
        """Spread each output gradient evenly over its window.

        Parameters
        ----------
        grad_out : ndarray
            (N, C, OH, OW).

        Returns
        -------
        ndarray
            (N, C, H, W).
        """
        dy, dxp = self._grad(grad_out)
        share = dy / self._saved(self._divisor)
        for view in self._taps(dxp):
            view += share
        return self._cropped(dxp)
