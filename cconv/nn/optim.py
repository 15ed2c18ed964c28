"""Optimizers that update parameter arrays in place: ``SGD`` and ``Adam`` (PyTorch's rules).

Both take the :class:`~cconv.nn.Parameter` handles of ``module.parameters()`` and read each
parameter's gradient from its module at :meth:`step` time; a parameter whose gradient is None
is skipped, as PyTorch skips parameters without ``.grad``.
"""

from __future__ import annotations

import math
from typing import Dict, Iterable, List, Tuple

import numpy as np

from ._types import Array
from .module import Parameter

__all__ = ["Adam", "Optimizer", "SGD"]


def _non_negative(value: float, name: str, owner: str) -> float:
    result = float(value)
    if not result >= 0.0:  # also refuses NaN
        raise ValueError(f"{owner}: {name} must be >= 0, got {value!r}")
    return result


class Optimizer:
    """Base class: the parameter list, per-parameter state and :meth:`zero_grad`.

    Parameters
    ----------
    params : iterable of Parameter
        Usually ``module.parameters()``.
    lr : float
        Learning rate.
    weight_decay : float
        L2 penalty added to the gradient (``grad + weight_decay * param``).
    """

    def __init__(self, params: Iterable[Parameter], lr: float, weight_decay: float) -> None:
        owner = type(self).__name__
        self.params: List[Parameter] = list(params)
        if not all(isinstance(p, Parameter) for p in self.params):
            raise TypeError(f"{owner}: params must be Parameter handles, as "
                            f"module.parameters() returns")
        if not self.params:
            raise ValueError(f"{owner}: got an empty parameter list")
        self.lr = _non_negative(lr, "lr", owner)
        self.weight_decay = _non_negative(weight_decay, "weight_decay", owner)
        self.state: Dict[int, Dict[str, Array]] = {}

    def zero_grad(self) -> None:
        """Forget every parameter's gradient (set it to None)."""
        for param in self.params:
            setattr(param.module, "grad_" + param.name, None)

    def _gradients(self) -> Iterable[Tuple[int, Array, Array]]:
        """(index, parameter array, gradient with weight decay) of every parameter with a
        gradient; the gradient is a fresh array the caller may overwrite."""
        for index, param in enumerate(self.params):
            grad = param.grad
            if grad is None:
                continue
            value = param.value
            if grad.shape != value.shape:
                raise ValueError(f"{type(self).__name__}: gradient of {param!r} has shape "
                                 f"{grad.shape}")
            grad = np.array(grad, dtype=value.dtype, copy=True)
            if self.weight_decay:
                grad += self.weight_decay * value
            yield index, value, grad

    def step(self) -> None:
        """Update every parameter that has a gradient, in place."""
        raise NotImplementedError


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, as ``torch.optim.SGD``.

    With ``g = grad + weight_decay * p``: the momentum buffer starts as ``g`` and then
    becomes ``momentum * buf + (1 - dampening) * g``; the step is ``buf`` (or
    ``g + momentum * buf`` with ``nesterov``); ``p -= lr * step``.

    Parameters
    ----------
    params : iterable of Parameter
    lr : float
    momentum : float
    dampening : float
    weight_decay : float
    nesterov : bool
        Needs a positive momentum and zero dampening, as in PyTorch.
    """

    def __init__(self, params: Iterable[Parameter], lr: float = 1e-3, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False) -> None:
        super().__init__(params, lr, weight_decay)
        self.momentum = _non_negative(momentum, "momentum", "SGD")
        self.dampening = float(dampening)
        self.nesterov = bool(nesterov)
        if self.nesterov and (self.momentum <= 0 or self.dampening != 0):
            raise ValueError("SGD: nesterov needs a positive momentum and zero dampening")

    def step(self) -> None:
        """One update of every parameter that has a gradient."""
        for index, value, grad in self._gradients():
            if self.momentum:
                state = self.state.setdefault(index, {})
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = grad.copy()
                else:
                    buf *= self.momentum
                    buf += (1.0 - self.dampening) * grad
                if self.nesterov:
                    grad += self.momentum * buf
                else:
                    grad = buf
            value -= self.lr * grad


class Adam(Optimizer):
    """Adam, as ``torch.optim.Adam`` (L2 ``weight_decay`` added to the gradient).

    With ``g = grad + weight_decay * p`` at step ``t``: ``m = b1 m + (1 - b1) g``,
    ``v = b2 v + (1 - b2) g^2``, ``p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) +
    eps)`` (``v`` replaced by its running maximum with ``amsgrad``).

    Parameters
    ----------
    params : iterable of Parameter
    lr : float
    betas : (float, float)
    eps : float
    weight_decay : float
    amsgrad : bool
    """

    def __init__(self, params: Iterable[Parameter], lr: float = 1e-3,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False) -> None:
        super().__init__(params, lr, weight_decay)
        beta1, beta2 = (float(b) for b in betas)
        for name, beta in (("betas[0]", beta1), ("betas[1]", beta2)):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"Adam: {name} must be in [0, 1), got {beta}")
        self.betas = (beta1, beta2)
        self.eps = _non_negative(eps, "eps", "Adam")
        self.amsgrad = bool(amsgrad)
        self.steps: Dict[int, int] = {}

    def step(self) -> None:
        """One update of every parameter that has a gradient."""
        beta1, beta2 = self.betas
        for index, value, grad in self._gradients():
            state = self.state.setdefault(index, {})
            if not state:
                state["exp_avg"] = np.zeros_like(value)
                state["exp_avg_sq"] = np.zeros_like(value)
                if self.amsgrad:
                    state["max_exp_avg_sq"] = np.zeros_like(value)
            t = self.steps[index] = self.steps.get(index, 0) + 1
            m, v = state["exp_avg"], state["exp_avg_sq"]
            m *= beta1
            m += (1.0 - beta1) * grad
            v *= beta2
            v += (1.0 - beta2) * np.square(grad)
            second = v
            if self.amsgrad:
                second = state["max_exp_avg_sq"]
                np.maximum(second, v, out=second)
            denom = np.sqrt(second) / math.sqrt(1.0 - beta2 ** t) + self.eps
            value -= (self.lr / (1.0 - beta1 ** t)) * (m / denom)
