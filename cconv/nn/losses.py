"""Softmax cross-entropy loss on integer class labels, as ``torch.nn.CrossEntropyLoss``."""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
import numpy.typing as npt

from ._types import Array

__all__ = ["CrossEntropyLoss"]

_REDUCTIONS = ("mean", "sum")


class CrossEntropyLoss:
    """``-log softmax(logits)[target]``, averaged (or summed) over the batch.

    The log-softmax subtracts each row's maximum before exponentiating, so large logits
    neither overflow nor lose the loss to rounding.

    Parameters
    ----------
    reduction : {"mean", "sum"}
    """

    def __init__(self, reduction: str = "mean") -> None:
        if reduction not in _REDUCTIONS:
            raise ValueError(f"CrossEntropyLoss: reduction must be one of {_REDUCTIONS}, got "
                             f"{reduction!r}")
        self.reduction = reduction
        self._saved: Optional[Tuple[Array, Array]] = None

    def _check(self, logits: npt.ArrayLike, target: npt.ArrayLike) -> Tuple[Array, Array]:
        scores = np.asarray(logits)
        labels = np.asarray(target)
        if scores.dtype.kind != "f":
            raise TypeError(f"{self!r}: logits must be a floating-point array, got dtype "
                            f"{scores.dtype}")
        if labels.dtype.kind not in "iu":
            raise TypeError(f"{self!r}: target must hold integer class indices, got dtype "
                            f"{labels.dtype}")
        if scores.ndim != 2 or labels.shape != scores.shape[:1]:
            raise ValueError(f"{self!r}: expected logits (N, classes) and target (N,), got "
                             f"shapes {scores.shape} and {labels.shape}")
        if labels.size and (labels.min() < 0 or labels.max() >= scores.shape[1]):
            raise ValueError(f"{self!r}: target values must be in [0, {scores.shape[1]}), got "
                             f"[{labels.min()}, {labels.max()}]")
        return scores, labels

    def forward(self, logits: npt.ArrayLike, target: npt.ArrayLike) -> float:
        """The loss of one batch; keeps what :meth:`backward` needs.

        Parameters
        ----------
        logits : array_like
            (N, classes), floating point.
        target : array_like
            (N,) integer class indices.

        Returns
        -------
        float
        """
        scores, labels = self._check(logits, target)
        shifted = scores - scores.max(axis=1, keepdims=True)
        log_norm = np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        log_prob = shifted - log_norm
        rows = np.arange(labels.shape[0])
        picked = log_prob[rows, labels].astype(np.float64)
        self._saved = (log_prob, labels)
        total = -float(picked.sum())
        return total / max(labels.shape[0], 1) if self.reduction == "mean" else total

    __call__ = forward

    def backward(self, grad: float = 1.0) -> Array:
        """Gradient of the last loss with respect to the logits.

        Parameters
        ----------
        grad : float
            Gradient of the final objective with respect to the loss.

        Returns
        -------
        ndarray
            (N, classes): ``(softmax - one_hot(target)) * grad``, divided by N for the mean.
        """
        if self._saved is None:
            raise RuntimeError(f"{self!r}: backward called before forward")
        log_prob, labels = self._saved
        result = np.exp(log_prob)
        result[np.arange(labels.shape[0]), labels] -= 1
        factor = grad / labels.shape[0] if self.reduction == "mean" and labels.size else grad
        result *= np.asarray(factor, dtype=result.dtype)
        return result

    def __repr__(self) -> str:
        return f"CrossEntropyLoss(reduction={self.reduction!r})"
