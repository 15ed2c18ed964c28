"""Batch normalisation over (N, C, H, W) arrays, as ``torch.nn.BatchNorm2d``."""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from ._types import Array, DType
from ._validation import check_grad, check_input, check_int, check_probability
from .module import Module

__all__ = ["BatchNorm2d"]


def _per_channel(values: Array) -> Array:
    """A (C,) vector shaped to broadcast against (N, C, H, W)."""
    return values.reshape(1, -1, 1, 1)


def _channel_sum(a: Array, b: Optional[Array] = None) -> Array:
    """Per-channel float64 sum of ``a`` (or of ``a * b``) over N, H and W.

    Each (n, c) plane is summed in the input's dtype (short, contiguous rows: accurate), the
    planes in float64; this is several times faster than a float64 reduction over three axes
    and keeps float32 statistics as accurate as PyTorch's.
    """
    rows = a.reshape(a.shape[0], a.shape[1], -1)
    if b is None:
        planes = rows.sum(axis=2)
    else:
        planes = np.einsum("ncp,ncp->nc", rows, b.reshape(rows.shape))
    total: Array = planes.sum(axis=0, dtype=np.float64)
    return total


class BatchNorm2d(Module):
    """Normalise each channel by its batch statistics (training) or running statistics.

    In training mode the mean and biased variance over (N, H, W) normalise the batch and
    the running statistics move towards the batch's mean and *unbiased* variance by
    ``momentum`` (a cumulative average when ``momentum`` is None), as in PyTorch.

    Parameters
    ----------
    num_features : int
        C.
    eps : float
        Added to the variance.
    momentum : float or None
        Weight of the new batch in the running statistics.
    affine : bool
        Learn a per-channel scale ``weight`` (ones) and shift ``bias`` (zeros).
    track_running_stats : bool
        Keep running statistics; without them batch statistics are used in both modes.
    dtype : dtype-like
        Of the parameters and running statistics.

    Attributes
    ----------
    weight, bias : ndarray or None
        (C,), when ``affine``.
    running_mean, running_var : ndarray or None
        (C,), when ``track_running_stats``.
    num_batches_tracked : ndarray or None
        0-d int64 count of training batches seen.
    grad_weight, grad_bias : ndarray or None
        Set by :meth:`backward`.
    """

    param_names = ("weight", "bias")
    buffer_names = ("running_mean", "running_var", "num_batches_tracked")

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: Optional[float] = 0.1,
                 affine: bool = True, track_running_stats: bool = True,
                 dtype: DType = np.float32) -> None:
        super().__init__()
        self.num_features = check_int(num_features, "num_features", "BatchNorm2d", 1)
        self.eps = float(eps)
        if not self.eps > 0:
            raise ValueError(f"BatchNorm2d: eps must be positive, got {eps!r}")
        self.momentum = (None if momentum is None
                         else check_probability(momentum, "momentum", "BatchNorm2d"))
        self.affine = bool(affine)
        self.track_running_stats = bool(track_running_stats)
        c = self.num_features
        self.weight: Optional[Array] = np.ones(c, dtype=dtype) if affine else None
        self.bias: Optional[Array] = np.zeros(c, dtype=dtype) if affine else None
        self.grad_weight: Optional[Array] = None
        self.grad_bias: Optional[Array] = None
        tracking = self.track_running_stats
        self.running_mean: Optional[Array] = np.zeros(c, dtype=dtype) if tracking else None
        self.running_var: Optional[Array] = np.ones(c, dtype=dtype) if tracking else None
        self.num_batches_tracked: Optional[Array] = (np.zeros((), dtype=np.int64) if tracking
                                                     else None)
        # (input minus its mean, 1 / std per channel, whether batch statistics were used);
        # the normalised input is never stored: both passes fold 1 / std into per-channel
        # factors, which saves a pass over the activations each way
        self._saved_state: Optional[Tuple[Array, Array, bool]] = None

    def _update_running(self, mean: Array, var: Array, count: int) -> None:
        assert self.running_mean is not None and self.running_var is not None
        assert self.num_batches_tracked is not None
        self.num_batches_tracked += 1
        if self.momentum is None:
            factor = 1.0 / float(self.num_batches_tracked)
        else:
            factor = self.momentum
        unbiased = var * (count / (count - 1))
        self.running_mean *= 1.0 - factor
        self.running_mean += factor * mean
        self.running_var *= 1.0 - factor
        self.running_var += factor * unbiased

    def forward(self, x: Array) -> Array:
        """Normalise, scale and shift each channel.

        Parameters
        ----------
        x : ndarray
            (N, num_features, H, W).

        Returns
        -------
        ndarray
            Of ``x``'s shape.
        """
        x = check_input(self, x, f"(N, {self.num_features}, H, W)", 4, self.num_features)
        use_batch = self.training or self.running_mean is None
        if use_batch:
            count = x.shape[0] * x.shape[2] * x.shape[3]
            if count < 2:
                raise ValueError(f"{self!r}: batch statistics need more than one value per "
                                 f"channel, got input of shape {x.shape}")
            mean = _channel_sum(x) / count
            centred = x - _per_channel(mean).astype(x.dtype)
            var = _channel_sum(centred, centred) / count
            if self.training and self.running_mean is not None:
                self._update_running(mean, var, count)
        else:
            assert self.running_mean is not None and self.running_var is not None
            centred = x - _per_channel(self.running_mean)
            var = self.running_var.astype(np.float64)
        inv_std = 1.0 / np.sqrt(var + self.eps)
        self._saved_state = (centred, inv_std, use_batch)
        y: Array = centred * _per_channel(self._scale(inv_std).astype(x.dtype))
        if self.bias is not None:
            y += _per_channel(self.bias)
        return y

    def _scale(self, inv_std: Array) -> Array:
        """The per-channel factor of the centred input: 1 / std, times the weight if any."""
        return inv_std if self.weight is None else inv_std * self.weight

    def backward(self, grad_out: Array) -> Array:
        """Gradients of the last forward call, in the mode it ran in.

        Parameters
        ----------
        grad_out : ndarray
            Of the input's shape.

        Returns
        -------
        ndarray
            Gradient with respect to the input; ``grad_weight`` and ``grad_bias`` are set
            when the layer is affine.
        """
        centred, inv_std, use_batch = self._saved(self._saved_state)
        dy = check_grad(self, grad_out, centred.shape)
        sum_dy = _channel_sum(dy)
        sum_dy_xhat = _channel_sum(dy, centred) * inv_std  # xhat = centred / std
        if self.weight is not None:
            self.grad_weight = sum_dy_xhat.astype(dy.dtype)
            self.grad_bias = sum_dy.astype(dy.dtype)
        scale = self._scale(inv_std)
        if not use_batch:
            # the statistics are constants: the layer is an affine map per channel
            return dy * _per_channel(scale.astype(dy.dtype))
        # dx = scale * (dy - mean(dy) - xhat * mean(dy * xhat)), per channel
        count = dy.shape[0] * dy.shape[2] * dy.shape[3]
        grad_in: Array = dy * _per_channel(scale.astype(dy.dtype))
        centred_factor = scale * inv_std * sum_dy_xhat / count
        grad_in -= centred * _per_channel(centred_factor.astype(dy.dtype))
        grad_in -= _per_channel((scale * sum_dy / count).astype(dy.dtype))
        return grad_in

    def __repr__(self) -> str:
        return (f"BatchNorm2d({self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats})")
