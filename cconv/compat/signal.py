"""``scipy.signal.convolve2d`` and ``correlate2d`` on cconv, with SciPy's semantics.

What is kept from SciPy, rule for rule:

* ``in1`` is the image and ``in2`` the kernel, except in ``"valid"`` mode when ``in1`` is smaller
  than ``in2`` in every dimension: then they swap (and :func:`correlate2d` returns the result
  flipped on both axes, so ``correlate2d(a, b)`` with a small ``a`` is ``correlate2d(b, a)``
  reversed).  If neither is at least as large as the other in every dimension, "valid" is a
  ValueError.
* ``mode``: ``"full"`` ((H + R - 1) x (W + S - 1)), ``"same"`` (``in1``'s shape; the kernel's
  centre is at ``((R - 1) // 2, (S - 1) // 2)`` for correlation and ``(R // 2, S // 2)`` for
  convolution, which matters for even sizes), ``"valid"`` ((H - R + 1) x (W - S + 1)).
* ``boundary``: ``"fill"`` / ``"pad"`` (outside = ``fillvalue``), ``"wrap"`` / ``"circular"``,
  ``"symm"`` / ``"symmetric"`` (edge sample repeated); periodic for any padding.  ``"reflect"``
  is refused with a ValueError, as SciPy refuses it.
* dtype: the result has ``numpy.promote_types(in1.dtype, in2.dtype)``, and is computed as in
  that type: integer results are the exact sums wrapped modulo the integer width (as SciPy's
  integer arithmetic wraps), float32 sums are float32.  bool, float16, object and other
  non-numeric dtypes are a ValueError, as in SciPy.
* ``fillvalue`` (only read for ``"fill"``): a scalar, or an array of one element, converted to
  the result dtype; a Python or NumPy scalar converts as ``numpy.array(fillvalue, dtype)`` does
  (so ``1.7`` fills an integer image with 1), an array must cast safely; anything that does not
  convert, or an array of another size, is a ValueError.
* Complex inputs: computed from real and imaginary parts (four real correlations); a complex
  ``fillvalue`` fills the real and imaginary parts of the image separately.

Beyond SciPy: ``num_threads`` (threads for the core; default :func:`cconv.get_num_threads`).

Limits: long double and complex long double inputs are a TypeError (the core computes in
float32 or float64 only); an empty ``in1`` with the ``"wrap"`` or ``"symm"`` boundary is a
ValueError (there is nothing to repeat).  Integer inputs whose sums could exceed 2**53 (large
32/64-bit values) are summed exactly by NumPy integer arithmetic instead of the core, which is
slow but keeps SciPy's wrapped result.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np
import numpy.typing as npt

from .. import _workspace
from ._scipy_common import Pads, correlate_planes, pad_axis

__all__ = ["convolve2d", "correlate2d"]

Array = npt.NDArray[Any]

_MODES = ("valid", "same", "full")
# SciPy's boundary names -> the core's padding modes.
_BOUNDARIES = {"fill": "constant", "pad": "constant", "wrap": "circular",
               "circular": "circular", "symm": "symmetric", "symmetric": "symmetric"}
_EXACT_LIMIT = 2.0**52  # below this every partial sum of integers is exact in float64


def convolve2d(in1: npt.ArrayLike, in2: npt.ArrayLike, mode: str = "full",
               boundary: str = "fill", fillvalue: Any = 0, *,
               num_threads: Optional[int] = None) -> Array:
    """Convolve two 2-D arrays, as ``scipy.signal.convolve2d``.

    Parameters
    ----------
    in1 : array_like
        2-D image.
    in2 : array_like
        2-D kernel (the image instead in ``"valid"`` mode when ``in1`` is the smaller).
    mode : {"full", "valid", "same"}, optional
        Output size; see the module docstring.
    boundary : {"fill", "wrap", "symm"}, optional
        The image's outside (also ``"pad"``, ``"circular"``, ``"symmetric"``).
    fillvalue : scalar, optional
        The outside's value for ``"fill"``.
    num_threads : int, optional
        Threads for this call (beyond SciPy's signature).

    Returns
    -------
    ndarray
        Of dtype ``numpy.promote_types(in1.dtype, in2.dtype)``.

    Raises
    ------
    ValueError
        Inputs not 2-D, bad mode / boundary / fillvalue, "valid" with incomparable shapes,
        unsupported dtype.
    TypeError
        long double inputs.
    """
    return _filter2d(in1, in2, mode, boundary, fillvalue, num_threads, True)


def correlate2d(in1: npt.ArrayLike, in2: npt.ArrayLike, mode: str = "full",
                boundary: str = "fill", fillvalue: Any = 0, *,
                num_threads: Optional[int] = None) -> Array:
    """Cross-correlate two 2-D arrays, as ``scipy.signal.correlate2d``.

    ``in2`` is conjugated: ``out[i, j] = sum in1[i + r - pr, j + s - ps] * conj(in2[r, s])``.

    Parameters
    ----------
    in1 : array_like
        2-D image.
    in2 : array_like
        2-D template (the image instead in ``"valid"`` mode when ``in1`` is the smaller; the
        result is then flipped on both axes, as in SciPy).
    mode : {"full", "valid", "same"}, optional
        Output size; see the module docstring.
    boundary : {"fill", "wrap", "symm"}, optional
        The image's outside (also ``"pad"``, ``"circular"``, ``"symmetric"``).
    fillvalue : scalar, optional
        The outside's value for ``"fill"``.
    num_threads : int, optional
        Threads for this call (beyond SciPy's signature).

    Returns
    -------
    ndarray
        Of dtype ``numpy.promote_types(in1.dtype, in2.dtype)``.

    Raises
    ------
    ValueError, TypeError
        As :func:`convolve2d`.
    """
    return _filter2d(in1, in2, mode, boundary, fillvalue, num_threads, False)


# -- argument rules (SciPy's, in SciPy's order) ------------------------------------------------

def _swap_needed(mode: Any, shape1: Tuple[int, ...], shape2: Tuple[int, ...]) -> bool:
    if mode != "valid":
        return False
    ok1 = all(a >= b for a, b in zip(shape1, shape2))
    ok2 = all(b >= a for a, b in zip(shape1, shape2))
    if not (ok1 or ok2):
        raise ValueError("For 'valid' mode, one must be at least as large as the other in "
                         f"every dimension; got shapes {shape1} and {shape2}")
    return not ok1


def _check_mode(mode: Any) -> str:
    if not isinstance(mode, str) or mode not in _MODES:
        raise ValueError(f"Acceptable mode flags are 'valid', 'same', or 'full'; got {mode!r}")
    return mode


def _check_boundary(boundary: Any) -> str:
    if boundary == "reflect":
        raise ValueError("Incorrect boundary value: 'reflect' is not supported by "
                         "convolve2d/correlate2d")
    if not isinstance(boundary, str) or boundary not in _BOUNDARIES:
        raise ValueError("Acceptable boundary flags are 'fill', 'circular' (or 'wrap'), and "
                         f"'symmetric' (or 'symm'); got {boundary!r}")
    return _BOUNDARIES[boundary]


def _check_dtype(dtype: np.dtype[Any]) -> None:
    if dtype.kind not in "iufc" or dtype == np.float16:
        raise ValueError(f"convolve2d not available for this type: {dtype}")
    if dtype.kind in "fc" and dtype.itemsize > (8 if dtype.kind == "f" else 16):
        raise TypeError(f"inputs of dtype {dtype} are not supported: cconv computes in float32 "
                        "or float64 (convert explicitly)")


def _fill_value(fillvalue: Any, dtype: np.dtype[Any]) -> Any:
    """``fillvalue`` as a scalar of ``dtype``, by SciPy's conversion rules."""
    failed = ValueError(f"could not cast `fillvalue` {fillvalue!r} directly to the output type "
                        f"{dtype}")
    if isinstance(fillvalue, np.ndarray):
        if not np.can_cast(fillvalue.dtype, dtype, "safe"):
            raise failed
        arr = fillvalue.astype(dtype)
    else:
        try:
            with np.errstate(all="ignore"):
                arr = np.array(fillvalue, dtype=dtype)
        except (TypeError, ValueError, OverflowError):
            raise failed from None
    if arr.size == 0:
        raise ValueError("`fillvalue` cannot be an empty array.")
    if arr.size != 1:
        raise ValueError(f"`fillvalue` must be scalar or an array with one element, got "
                         f"{arr.size} elements")
    return arr.reshape(()).item()


# -- computation -----------------------------------------------------------------------------

def _pads(mode: str, kernel_shape: Tuple[int, ...], flip: bool) -> Pads:
    """Padding per side of the image so that the valid correlation gives ``mode``'s output."""
    def one(n: int) -> Tuple[int, int]:
        if mode == "full":
            return (n - 1, n - 1)
        if mode == "same":
            # The flipped kernel of a convolution moves the odd extra sample to the front.
            small, big = (n - 1) // 2, n // 2
            return (big, small) if flip else (small, big)
        return (0, 0)

    return (one(kernel_shape[0]), one(kernel_shape[1]))


def _output_shape(mode: str, a: Tuple[int, ...], b: Tuple[int, ...]) -> Tuple[int, int]:
    if mode == "full":
        return (a[0] + b[0] - 1, a[1] + b[1] - 1)
    if mode == "same":
        return (a[0], a[1])
    return (a[0] - b[0] + 1, a[1] - b[1] + 1)


def _filter2d(in1: Any, in2: Any, mode: Any, boundary: Any, fillvalue: Any,
              num_threads: Optional[int], flip: bool) -> Array:
    a = np.asarray(in1)
    b = np.asarray(in2)
    if not a.ndim == b.ndim == 2:
        name = "convolve2d" if flip else "correlate2d"
        raise ValueError(f"{name} inputs must both be 2-D arrays; got {a.ndim}-D and {b.ndim}-D")
    swapped = _swap_needed(mode, a.shape, b.shape)
    if swapped:
        a, b = b, a
    if not flip:
        b = b.conj()
    mode = _check_mode(mode)
    core_mode = _check_boundary(boundary)
    dtype = np.promote_types(a.dtype, b.dtype)
    fill = _fill_value(fillvalue, dtype) if core_mode == "constant" else 0
    _check_dtype(dtype)

    shape = _output_shape(mode, a.shape, b.shape)
    if min(shape) <= 0 or b.size == 0:
        return np.zeros(tuple(max(n, 0) for n in shape), dtype=dtype)
    if a.size == 0 and core_mode != "constant":
        raise ValueError(f"in1 is empty (shape {a.shape}): the {boundary!r} boundary has "
                         "nothing to repeat")
    if flip:
        b = b[::-1, ::-1]
    pads = _pads(mode, b.shape, flip)
    if dtype.kind == "c":
        out = _complex(a, b, pads, core_mode, complex(fill), dtype, num_threads)
    elif dtype.kind == "f":
        out = _real(a, b, pads, core_mode, float(fill), dtype, num_threads)
    else:
        out = _integer(a, b, pads, core_mode, int(fill), dtype, num_threads)
    return out[::-1, ::-1] if swapped and not flip else out


def _real(a: Array, b: Array, pads: Pads, mode: str, fill: float, dtype: np.dtype[Any],
          num_threads: Optional[int]) -> Array:
    """The correlation of ``a`` with ``b`` (2-D, float32 or float64 ``dtype``)."""
    if a.size == 0:  # only the fill is seen: pad here, the core needs a non-empty image
        a = pad_axis(pad_axis(a.astype(dtype), 0, *pads[0], mode, fill), 1, *pads[1], mode,
                     fill)
        pads = ((0, 0), (0, 0))
    x4 = a.astype(dtype, copy=False)[np.newaxis, np.newaxis]
    result: Array = correlate_planes(x4, b.astype(dtype), pads, mode, fill, num_threads)[0, 0]
    return result


def _complex(a: Array, b: Array, pads: Pads, mode: str, fill: complex, dtype: np.dtype[Any],
             num_threads: Optional[int]) -> Array:
    """Complex correlation from four real ones (the kernel is already conjugated if needed)."""
    part = np.dtype(np.float32) if dtype == np.complex64 else np.dtype(np.float64)

    def corr(x: Array, w: Array, value: float) -> Array:
        return _real(x, w, pads, mode, value, part, num_threads)

    ar, ai = np.real(a), np.imag(a)
    br, bi = np.real(b), np.imag(b)
    out = _workspace.empty_result(_valid_shape(a.shape, b.shape, pads), dtype)
    out.real = corr(ar, br, fill.real) - corr(ai, bi, fill.imag)
    out.imag = corr(ar, bi, fill.real) + corr(ai, br, fill.imag)
    return out


def _valid_shape(a: Tuple[int, ...], b: Tuple[int, ...], pads: Pads) -> Tuple[int, int]:
    return (a[0] + sum(pads[0]) - b[0] + 1, a[1] + sum(pads[1]) - b[1] + 1)


def _integer(a: Array, b: Array, pads: Pads, mode: str, fill: int, dtype: np.dtype[Any],
             num_threads: Optional[int]) -> Array:
    """Integer correlation: the exact sums, wrapped to ``dtype`` as SciPy's arithmetic wraps."""
    a = a.astype(dtype, copy=False)
    b = b.astype(dtype, copy=False)
    if _float64_is_exact(a, b, fill):
        exact = _real(a, b, pads, mode, float(fill), np.dtype(np.float64), num_threads)
        return exact.astype(np.int64).astype(dtype)
    return _wrapped_sum(a, b, pads, mode, fill).astype(dtype)


def _float64_is_exact(a: Array, b: Array, fill: int) -> bool:
    """Whether every partial sum of products is an integer below 2**52 in magnitude."""
    if a.size == 0:
        largest = abs(fill)
    else:
        largest = max(abs(int(a.max())), abs(int(a.min())), abs(fill))
    weight = float(np.abs(b.astype(np.float64)).sum())
    return largest * weight * (1 + 1e-9) < _EXACT_LIMIT


def _wrapped_sum(a: Array, b: Array, pads: Pads, mode: str, fill: int) -> Array:
    """Exact integer correlation modulo 2**64, one kernel tap at a time (large integers only)."""
    wide = np.uint64 if a.dtype.kind == "u" and a.dtype.itemsize == 8 else np.int64
    x = a.astype(wide)
    x = pad_axis(pad_axis(x, 0, *pads[0], mode, fill), 1, *pads[1], mode, fill)
    taps = b.astype(wide)
    oh, ow = x.shape[0] - b.shape[0] + 1, x.shape[1] - b.shape[1] + 1
    acc = np.zeros((oh, ow), dtype=wide)
    for r in range(b.shape[0]):
        for s in range(b.shape[1]):
            acc += taps[r, s] * x[r:r + oh, s:s + ow]
    return acc
