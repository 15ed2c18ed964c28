"""Argument and operand checks shared by the layers.

Every message names the layer (its ``repr``, as PyTorch prints modules) and the argument, so
an error deep inside a network still says which layer and which shapes disagree.
"""

from __future__ import annotations

import numbers
from typing import Optional, Sequence, Tuple

import numpy as np

from ._types import Array


def is_int(value: object) -> bool:
    """True for Python and NumPy integers, False for bools and everything else."""
    return not isinstance(value, (bool, np.bool_)) and isinstance(value, numbers.Integral)


def check_int(value: object, name: str, owner: str, minimum: Optional[int] = None) -> int:
    """``value`` as an int ``>= minimum``; TypeError / ValueError naming ``owner`` and ``name``.

    Parameters
    ----------
    value : object
    name : str
        The argument's name.
    owner : str
        The class whose argument it is.
    minimum : int, optional
        No lower bound when None.

    Returns
    -------
    int
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{owner}: {name} must be an int, got {value!r}")
    result = int(value)
    if minimum is not None and result < minimum:
        raise ValueError(f"{owner}: {name} must be >= {minimum}, got {result}")
    return result


def check_pair(value: object, name: str, owner: str, minimum: int) -> Tuple[int, int]:
    """An int or a pair of ints as a pair, each ``>= minimum``.

    Parameters
    ----------
    value : object
    name, owner : str
        As in :func:`check_int`.
    minimum : int

    Returns
    -------
    (int, int)
    """
    if is_int(value):
        single = check_int(value, name, owner, minimum)
        return (single, single)
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return (check_int(value[0], name, owner, minimum),
                check_int(value[1], name, owner, minimum))
    raise TypeError(f"{owner}: {name} must be an int or a pair of ints, got {value!r}")


def check_probability(value: object, name: str, owner: str) -> float:
    """A float in [0, 1].

    Parameters
    ----------
    value : object
    name, owner : str
        As in :func:`check_int`.

    Returns
    -------
    float
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{owner}: {name} must be a number, got {value!r}")
    result = float(value)
    if not 0.0 <= result <= 1.0:
        raise ValueError(f"{owner}: {name} must be in [0, 1], got {result}")
    return result


def check_input(layer: object, x: object, expected: str, ndim: Optional[int] = None,
                channels: Optional[int] = None, axis: int = 1) -> Array:
    """``x`` as a floating-point array of ``ndim`` dimensions and ``channels`` on ``axis``.

    Parameters
    ----------
    layer : object
        The layer the input is for; its ``repr`` starts the message.
    x : array_like
    expected : str
        The expected shape in words, e.g. ``"(N, 3, H, W)"``.
    ndim : int, optional
        Required number of dimensions (default: any, at least one).
    channels : int, optional
        Required size of axis ``axis``.
    axis : int

    Returns
    -------
    ndarray
    """
    array = np.asarray(x)
    if array.dtype.kind != "f":
        raise TypeError(f"{layer!r}: input must be a floating-point array, got dtype "
                        f"{array.dtype} (convert explicitly)")
    wrong_ndim = array.ndim == 0 if ndim is None else array.ndim != ndim
    if wrong_ndim or (channels is not None and array.shape[axis] != channels):
        raise ValueError(f"{layer!r}: expected input of shape {expected}, got shape "
                         f"{array.shape}")
    return array


def check_grad(layer: object, grad_out: object, shape: Sequence[int]) -> Array:
    """``grad_out`` as an array of the shape of the layer's last output.

    Parameters
    ----------
    layer : object
        As in :func:`check_input`.
    grad_out : array_like
    shape : sequence of int
        The shape the layer's last forward call returned.

    Returns
    -------
    ndarray
    """
    array = np.asarray(grad_out)
    if array.dtype.kind != "f":
        raise TypeError(f"{layer!r}: grad_out must be a floating-point array, got dtype "
                        f"{array.dtype}")
    if array.shape != tuple(shape):
        raise ValueError(f"{layer!r}: grad_out has shape {array.shape}, but the last forward "
                         f"output had shape {tuple(shape)}")
    return array
