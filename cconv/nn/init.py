"""PyTorch's default initialisation of convolution and linear layers, on NumPy generators.

PyTorch initialises these weights with ``kaiming_uniform_(a=sqrt(5))``, whose bound
``gain * sqrt(3 / fan_in)`` with ``gain = sqrt(2 / (1 + a**2))`` simplifies to
``1 / sqrt(fan_in)``; the bias is drawn from the same interval.  ``fan_in`` is the weight's
``shape[1] * R * S``: for a transposed convolution, whose weight is (C_in, K/groups, R, S),
that is the output channels per group times the kernel size, exactly as PyTorch computes it.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ._types import Array, DType, Seed

__all__ = ["as_generator", "fan_in", "fan_in_uniform"]


def as_generator(rng: Seed) -> np.random.Generator:
    """A NumPy generator from a generator, a seed or None.

    Parameters
    ----------
    rng : numpy.random.Generator, int or None
        A generator is used as it is (and advanced); an int seeds a new one; None draws
        fresh entropy from the operating system.

    Returns
    -------
    numpy.random.Generator
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (isinstance(rng, (int, np.integer)) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    raise TypeError(f"rng must be a numpy.random.Generator, an int seed or None, got {rng!r}")


def fan_in(weight_shape: Sequence[int]) -> int:
    """PyTorch's fan-in of a weight: ``shape[1]`` times the product of the kernel axes.

    Parameters
    ----------
    weight_shape : sequence of int
        (out, in) for a linear layer, (K, C/groups, R, S) for a convolution.

    Returns
    -------
    int
    """
    return int(math.prod(weight_shape[1:]))


def fan_in_uniform(rng: np.random.Generator, shape: Sequence[int], fan: int,
                   dtype: DType) -> Array:
    """Draws from uniform(-1/sqrt(fan), 1/sqrt(fan)) in ``dtype``.

    Parameters
    ----------
    rng : numpy.random.Generator
    shape : sequence of int
    fan : int
        The fan-in; a zero fan-in (an empty layer) gives bound 0, as PyTorch does.
    dtype : dtype-like

    Returns
    -------
    ndarray
    """
    bound = 1.0 / math.sqrt(fan) if fan > 0 else 0.0
    return rng.uniform(-bound, bound, size=tuple(shape)).astype(dtype)
