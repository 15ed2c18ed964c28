"""Element-wise and dense layers: ``ReLU``, ``Flatten``, ``Linear`` and ``Dropout``."""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from ._types import Array, DType, Seed
from ._validation import check_grad, check_input, check_int, check_probability
from .init import as_generator, fan_in, fan_in_uniform
from .module import Module

__all__ = ["Dropout", "Flatten", "Linear", "ReLU"]


class ReLU(Module):
    """``max(x, 0)`` element-wise (NaN stays NaN), as ``torch.nn.ReLU``.

    Attributes
    ----------
    training : bool
        Train or eval mode (no effect on ReLU; kept for a uniform ``Module`` interface).
    """

    def __init__(self) -> None:
        super().__init__()
        self._y: Optional[Array] = None

    def forward(self, x: Array) -> Array:
        """Apply the rectifier.

        Parameters
        ----------
        x : ndarray

        Returns
        -------
        ndarray
        """
        x = check_input(self, x, "(any shape)")
        # the output is kept rather than a mask: y > 0 exactly where x > 0, and it costs
        # no extra pass here
        y: Array = np.maximum(x, 0)
        self._y = y
        return y

    def backward(self, grad_out: Array) -> Array:
        """Pass the gradient where the input was positive.

        Parameters
        ----------
        grad_out : ndarray

        Returns
        -------
        ndarray
        """
        y: Array = self._saved(self._y)
        return np.multiply(check_grad(self, grad_out, y.shape), y > 0)

    def __repr__(self) -> str:
        return "ReLU()"


class Flatten(Module):
    """Merge axes ``start_dim`` to ``end_dim`` into one, as ``torch.nn.Flatten``.

    Parameters
    ----------
    start_dim, end_dim : int
        Inclusive; negative values count from the end.
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = check_int(start_dim, "start_dim", "Flatten")
        self.end_dim = check_int(end_dim, "end_dim", "Flatten")
        self._in_shape: Optional[Tuple[int, ...]] = None
        self._out_shape: Tuple[int, ...] = ()

    def forward(self, x: Array) -> Array:
        """Reshape (a view when ``x`` is contiguous).

        Parameters
        ----------
        x : ndarray

        Returns
        -------
        ndarray
        """
        x = check_input(self, x, f"(at least {max(self.start_dim, self.end_dim) + 1} axes)")
        start, end = (d + x.ndim if d < 0 else d for d in (self.start_dim, self.end_dim))
        if not 0 <= start <= end < x.ndim:
            raise ValueError(f"{self!r}: cannot flatten axes {self.start_dim}..{self.end_dim} "
                             f"of an input of shape {x.shape}")
        y = x.reshape(x.shape[:start] + (-1,) + x.shape[end + 1:])
        self._in_shape, self._out_shape = x.shape, y.shape
        return y

    def backward(self, grad_out: Array) -> Array:
        """Reshape the gradient back to the input's shape.

        Parameters
        ----------
        grad_out : ndarray

        Returns
        -------
        ndarray
        """
        in_shape: Tuple[int, ...] = self._saved(self._in_shape)
        return check_grad(self, grad_out, self._out_shape).reshape(in_shape)

    def __repr__(self) -> str:
        return f"Flatten(start_dim={self.start_dim}, end_dim={self.end_dim})"


class Linear(Module):
    """``y = x @ weight.T + bias``, as ``torch.nn.Linear`` (same initialisation).

    Parameters
    ----------
    in_features, out_features : int
    bias : bool
    dtype : dtype-like
    rng : numpy.random.Generator, int or None
        Source of the initial weights.

    Attributes
    ----------
    weight : ndarray
        (out_features, in_features).
    bias : ndarray or None
        (out_features,).
    grad_weight, grad_bias : ndarray or None
        Set by :meth:`backward`.
    """

    param_names = ("weight", "bias")

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 dtype: DType = np.float32, *, rng: Seed = None) -> None:
        super().__init__()
        self.in_features = check_int(in_features, "in_features", "Linear", 1)
        self.out_features = check_int(out_features, "out_features", "Linear", 1)
        generator = as_generator(rng)
        shape = (self.out_features, self.in_features)
        self.weight: Array = fan_in_uniform(generator, shape, fan_in(shape), dtype)
        self.bias: Optional[Array] = (
            fan_in_uniform(generator, (self.out_features,), fan_in(shape), dtype)
            if bias else None)
        self.grad_weight: Optional[Array] = None
        self.grad_bias: Optional[Array] = None
        self._x: Optional[Array] = None

    def forward(self, x: Array) -> Array:
        """Apply the affine map to the last axis.

        Parameters
        ----------
        x : ndarray
            (..., in_features); kept by reference for :meth:`backward`.

        Returns
        -------
        ndarray
            (..., out_features).
        """
        x = check_input(self, x, f"(..., {self.in_features})", None, self.in_features, -1)
        y: Array = x @ self.weight.T
        if self.bias is not None:
            y += self.bias
        self._x = x
        return y

    def backward(self, grad_out: Array) -> Array:
        """Gradients of the last forward call.

        Parameters
        ----------
        grad_out : ndarray
            (..., out_features).

        Returns
        -------
        ndarray
            (..., in_features); ``grad_weight`` and ``grad_bias`` are set.
        """
        x: Array = self._saved(self._x)
        dy = check_grad(self, grad_out, x.shape[:-1] + (self.out_features,))
        rows = dy.reshape(-1, self.out_features)
        self.grad_weight = rows.T @ x.reshape(-1, self.in_features)
        self.grad_bias = None if self.bias is None else rows.sum(axis=0)
        grad_in: Array = dy @ self.weight
        return grad_in

    def __repr__(self) -> str:
        return (f"Linear(in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None})")


class Dropout(Module):
    """Zero each element with probability ``p`` in training mode, as ``torch.nn.Dropout``.

    Kept elements are scaled by ``1 / (1 - p)``; in evaluation mode the layer is the identity.

    Parameters
    ----------
    p : float
        Probability of zeroing, in [0, 1].
    rng : numpy.random.Generator, int or None
        Source of the masks (a seed makes training reproducible).
    """

    def __init__(self, p: float = 0.5, *, rng: Seed = None) -> None:
        super().__init__()
        self.p = check_probability(p, "p", "Dropout")
        self.rng = as_generator(rng)
        self._scale: Optional[Array] = None

    def forward(self, x: Array) -> Array:
        """Drop and rescale (training) or pass through (evaluation).

        Parameters
        ----------
        x : ndarray

        Returns
        -------
        ndarray
        """
        x = check_input(self, x, "(any shape)")
        if not self.training or self.p == 0.0:
            self._scale = np.ones(x.shape, dtype=x.dtype)
        elif self.p == 1.0:
            self._scale = np.zeros(x.shape, dtype=x.dtype)
        else:
            keep = self.rng.random(x.shape) >= self.p
            self._scale = keep * np.asarray(1.0 / (1.0 - self.p), dtype=x.dtype)
        return x * self._scale

    def backward(self, grad_out: Array) -> Array:
        """Apply the same mask and scale to the gradient.

        Parameters
        ----------
        grad_out : ndarray

        Returns
        -------
        ndarray
        """
        scale: Array = self._saved(self._scale)
        return check_grad(self, grad_out, scale.shape) * scale

    def __repr__(self) -> str:
        return f"Dropout(p={self.p})"
