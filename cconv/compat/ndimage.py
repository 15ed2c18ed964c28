"""``scipy.ndimage.correlate`` and ``convolve`` on cconv, with SciPy's semantics (SciPy >= 1.15).

What is kept from SciPy, rule for rule:

* Modes (the image's outside): ``"reflect"`` and ``"grid-mirror"`` repeat the edge sample
  (``d c b a | a b c d | d c b a``), ``"mirror"`` does not (``d c b | a b c d | c b a``; an axis
  of one sample repeats it), ``"nearest"`` repeats the edge sample forever, ``"wrap"`` and
  ``"grid-wrap"`` wrap around, ``"constant"`` and ``"grid-constant"`` fill with ``cval``.  All
  stay periodic however large the kernel (SciPy 1.17's ``"reflect"`` reads outside the image
  once the extension reaches 4 times the axis length; here it stays periodic).  An unknown
  mode, or a sequence of modes, is a RuntimeError.
* ``origin`` (an int, or one per filtered axis) moves the kernel: output ``i`` is
  ``sum_k w[k] * x[i + k - (len(w) // 2 + origin)]``.  It must satisfy
  ``-(len // 2) <= origin <= (len - 1) // 2`` (else ValueError).  :func:`convolve` flips the
  weights and uses ``-origin``, minus one more on an axis of even length, so it is exactly
  ``sum_k w[k] * x[i - k + len // 2 + origin]``.
* ``weights`` has one dimension per filtered axis (RuntimeError otherwise); ``axes`` picks the
  filtered axes (unique, in range), the others are filtered independently: a stack of images
  is one core call.  With ``axes`` shorter than the input's rank, the weights' dimensions follow
  the filtered axes in increasing order and ``origin`` entries follow ``axes`` as written;
  with ``axes`` naming every axis its order is ignored.
* ``output``: None (the input's dtype), a dtype, or an array of the input's shape that receives
  the result (RuntimeError for another shape).  The output array is returned in every case.
  Input and output may share memory.
* dtypes: bool, signed and unsigned integers of 8 to 64 bits, float32 and float64; float16 and
  long double are a RuntimeError, as in SciPy.  Sums are taken in float64 (float32 when input
  and output are float32, or 8/16-bit integer or bool input with float32 output, where that
  loses nothing beyond float32 rounding) and converted to the output dtype as SciPy's C code
  converts a double on x86-64: toward zero; out of range, 8- and 16-bit outputs keep the low
  bits of a 32-bit conversion, uint32 of a 64-bit one, int32 and int64 get their minimum (uint64
  beyond 2**63 is left to NumPy); a bool output holds the converted byte (0.5 -> False).
* Complex input or weights are computed from real and imaginary parts, as SciPy does
  (``correlate`` conjugates complex weights); the output is complex (a non-complex output
  dtype is promoted with a warning, a non-complex output array is a RuntimeError) and a complex
  ``cval`` fills the real and imaginary parts separately (ValueError with real input).

Beyond SciPy: ``num_threads`` (threads for the core; default :func:`cconv.get_num_threads`).

Inputs of any rank; at most three axes may have a weight extent above 1 (one, two or three
filtered axes run on :func:`cconv.conv2d` or :func:`cconv.conv3d`, the other axes being the
batch): more is a NotImplementedError.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Iterable
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

from .. import _workspace
from .._convert import store_integers
from ._scipy_common import assign, cast, correlate_in_strips, correlate_planes

__all__ = ["correlate", "convolve"]

Array = npt.NDArray[Any]

# SciPy's filter modes -> the core's padding modes.
MODES = {
    "reflect": "symmetric",
    "grid-mirror": "symmetric",
    "mirror": "reflect",
    "nearest": "replicate",
    "wrap": "circular",
    "grid-wrap": "circular",
    "constant": "constant",
    "grid-constant": "constant",
}

_SUPPORTED = frozenset("?bBhHiIlLqQfd")  # SciPy's ndimage filters take these type codes


def correlate(input: npt.ArrayLike, weights: npt.ArrayLike, output: Any = None,
              mode: str = "reflect", cval: Any = 0.0, origin: Any = 0, *, axes: Any = None,
              num_threads: Optional[int] = None) -> Array:
    """Multidimensional correlation, as ``scipy.ndimage.correlate``.

    Parameters
    ----------
    input : array_like
        The image or stack of images.
    weights : array_like
        One dimension per filtered axis.
    output : ndarray or dtype, optional
        Array (of ``input``'s shape) receiving the result, or the result's dtype; default
        ``input``'s dtype.
    mode : str, optional
        ``"reflect"`` (default), ``"mirror"``, ``"nearest"``, ``"wrap"``, ``"constant"``,
        ``"grid-mirror"``, ``"grid-wrap"`` or ``"grid-constant"``; see the module docstring.
    cval : float, optional
        The outside's value for the constant modes.
    origin : int or sequence of int, optional
        Kernel placement per filtered axis, in ``-(len // 2) .. (len - 1) // 2``.
    axes : int or sequence of int, optional
        The filtered axes; default all.
    num_threads : int, optional
        Threads for this call (beyond SciPy's signature).

    Returns
    -------
    ndarray
        The output array.

    Raises
    ------
    RuntimeError
        Unknown mode, weights of the wrong rank, output of the wrong shape, unsupported dtype.
    ValueError
        Origin out of range, bad ``axes``.
    NotImplementedError
        More than three axes with a weight extent above 1.
    """
    return _filter(input, weights, output, mode, cval, origin, axes, num_threads, False)


def convolve(input: npt.ArrayLike, weights: npt.ArrayLike, output: Any = None,
             mode: str = "reflect", cval: Any = 0.0, origin: Any = 0, *, axes: Any = None,
             num_threads: Optional[int] = None) -> Array:
    """Multidimensional convolution, as ``scipy.ndimage.convolve``.

    Parameters
    ----------
    input : array_like
        The image or stack of images.
    weights : array_like
        One dimension per filtered axis; flipped on every axis.
    output : ndarray or dtype, optional
        Array (of ``input``'s shape) receiving the result, or the result's dtype.
    mode : str, optional
        As in :func:`correlate`.
    cval : float, optional
        The outside's value for the constant modes.
    origin : int or sequence of int, optional
        Kernel placement: output ``i`` is ``sum_k w[k] * x[i - k + len // 2 + origin]``.
    axes : int or sequence of int, optional
        The filtered axes; default all.
    num_threads : int, optional
        Threads for this call (beyond SciPy's signature).

    Returns
    -------
    ndarray
        The output array.

    Raises
    ------
    RuntimeError, ValueError, NotImplementedError
        As :func:`correlate`.
    """
    return _filter(input, weights, output, mode, cval, origin, axes, num_threads, True)


# -- argument rules (SciPy's, in SciPy's order) ------------------------------------------------

def _check_axes(axes: Any, ndim: int) -> Tuple[int, ...]:
    """The filtered axes.  A scalar is taken as given, as SciPy takes it."""
    if axes is None:
        return tuple(range(ndim))
    scalar = bool(np.isscalar(axes))  # a plain bool: no narrowing of ``axes``'s type
    if scalar:
        result: Tuple[int, ...] = (operator.index(axes),)
    elif isinstance(axes, Iterable):
        result = tuple(operator.index(ax) for ax in axes)
        for ax in result:
            if ax < -ndim or ax > ndim - 1:
                raise ValueError(f"specified axis: {ax} is out of range")
        result = tuple(ax % ndim for ax in result)
    else:
        raise ValueError("axes must be an integer, iterable of integers, or None")
    if len(set(result)) != len(result):
        raise ValueError("axes must be unique")
    return result


def _expand_weights(ndim: int, axes: Tuple[int, ...], weights: Array) -> Array:
    """Weights given for some axes only, with size-1 dimensions for the others."""
    if len(axes) < ndim:
        if weights.ndim != len(axes):
            raise RuntimeError(f"weights.ndim ({weights.ndim}) must match len(axes) "
                               f"({len(axes)})")
        weights = np.expand_dims(weights, tuple(ax for ax in range(ndim) if ax not in axes))
    return weights


def _expand_origins(ndim: int, axes: Tuple[int, ...], origin: Any) -> List[Any]:
    """One origin per input axis; entries follow ``axes`` as written, 0 elsewhere."""
    if not isinstance(origin, str) and np.iterable(origin):
        origins = list(origin)
        if len(origins) != len(axes):
            raise RuntimeError("sequence argument must have length equal to input rank")
    else:
        origins = [origin] * len(axes)
    if len(axes) < ndim:
        full: List[Any] = [0] * ndim
        for o, ax in zip(origins, axes):
            full[ax] = o
        origins = full
    return origins


def _check_origins(origins: Sequence[Any], lengths: Sequence[int]) -> List[int]:
    """The origins as ints: range first, then type, in SciPy's order."""
    for o, n in zip(origins, lengths):
        if o < -(n // 2) or o > (n - 1) // 2:
            raise ValueError(f"Invalid origin {o} for a weights axis of length {n}; origin must "
                             "satisfy -(weights.shape[k] // 2) <= origin[k] <= "
                             "(weights.shape[k]-1) // 2")
    for o in origins:
        if isinstance(o, (bool, np.bool_)) or not hasattr(type(o), "__index__"):
            raise TypeError(f"origin must be an integer or a sequence of integers, got {o!r}")
    return [operator.index(o) for o in origins]


def _new_output(shape: Tuple[int, ...], dtype: Any) -> Array:
    # Every element is written by the filter (an empty kernel's result is set to 0).
    return _workspace.empty_result(shape, dtype)


def _get_output(output: Any, input: Array, complex_output: bool = False) -> Array:
    """The array that receives the result (SciPy's rules for ``output``)."""
    shape = input.shape
    if output is None:
        dtype = np.promote_types(input.dtype, np.complex64) if complex_output else input.dtype
        return _new_output(shape, dtype)
    if isinstance(output, (type, np.dtype)):
        if complex_output and np.dtype(output).kind != "c":
            warnings.warn("promoting specified output dtype to complex", stacklevel=4)
            output = np.promote_types(output, np.complex64)
        return _new_output(shape, output)
    if isinstance(output, str):
        dtype = np.dtype(output)
        if complex_output and dtype.kind != "c":
            raise RuntimeError("output must have complex dtype")
        if not issubclass(dtype.type, np.number):
            raise RuntimeError("output must have numeric dtype")
        return _new_output(shape, dtype)
    result = np.asarray(output)
    if result.shape != shape:
        raise RuntimeError(f"output shape not correct: {result.shape}, input {shape}")
    if complex_output and result.dtype.kind != "c":
        raise RuntimeError("output must have complex dtype")
    return result


def _padding_mode(mode: Any) -> str:
    if not isinstance(mode, str) and isinstance(mode, Iterable):
        raise RuntimeError("A sequence of modes is not supported")
    try:
        return MODES[mode]
    except (KeyError, TypeError):
        raise RuntimeError(f"boundary mode not supported: {mode!r}; use one of "
                           f"{sorted(MODES)}") from None


def _real_cval(cval: Any) -> float:
    if isinstance(cval, (str, bytes, complex, np.complexfloating)) or cval is None:
        raise TypeError(f"cval must be a real number, not {type(cval).__name__}")
    return float(cval)


def _check_dtype(dtype: np.dtype[Any], what: str) -> None:
    if dtype.char not in _SUPPORTED:
        raise RuntimeError(f"array type not supported: {what} has dtype {dtype}")


# -- computation -----------------------------------------------------------------------------

def _compute_dtype(in_dtype: np.dtype[Any], out_dtype: np.dtype[Any]) -> np.dtype[Any]:
    """float32 only where the float64 sum rounded to float32 is all that is asked for."""
    small_exact = in_dtype.kind in "biu" and in_dtype.itemsize <= 2
    if out_dtype == np.float32 and (in_dtype == np.float32 or small_exact):
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def _store(dst: Array, values: Array, num_threads: Optional[int]) -> None:
    """``dst[...] = values`` converted as SciPy's C code converts a double on x86-64 (in
    parallel blocks)."""
    kind, size = dst.dtype.kind, dst.dtype.itemsize
    if store_integers(dst, values, num_threads):
        return
    with np.errstate(invalid="ignore"):
        if kind == "f":
            assign(dst, values, num_threads)
        elif kind == "b" or size <= 2:
            # Through a 32-bit integer, keeping the low bits; a bool gets the byte itself.
            target = dst.view(np.uint8) if kind == "b" else dst
            assign(target, values, num_threads, through=np.int32)
        elif kind == "u" and size == 4:
            assign(dst, values, num_threads, through=np.int64)  # through a 64-bit integer
        else:
            assign(dst, values, num_threads, through=dst.dtype.newbyteorder("="))


def _reshape_view(a: Array, shape: Tuple[int, ...]) -> Optional[Array]:
    try:
        return a.reshape(shape, copy=False)
    except (ValueError, TypeError):  # TypeError: NumPy < 2.1 has no ``copy`` keyword
        return None


def _filter(input: Any, weights: Any, output: Any, mode: Any, cval: Any, origin: Any,
            axes: Any, num_threads: Optional[int], convolution: bool) -> Array:
    x = np.asarray(input)
    w = np.asarray(weights)
    if x.dtype.kind == "c" or w.dtype.kind == "c":
        if w.dtype.kind == "c" and not convolution:
            w = w.conj()
        out = _get_output(output, x, complex_output=True)
        return _complex(x, w, out, mode, cval, origin, axes, num_threads, convolution)

    axes_t = _check_axes(axes, x.ndim)
    w = _expand_weights(x.ndim, axes_t, np.asarray(w, dtype=np.float64))
    origins = _expand_origins(x.ndim, axes_t, origin)
    lengths = [n for n in w.shape if n > 0]
    if len(lengths) != x.ndim:
        raise RuntimeError(f"weights.ndim ({len(lengths)}) must match len(axes) "
                           f"({len(axes_t)})")
    if convolution:
        w = w[(slice(None, None, -1),) * w.ndim]
        for i in range(len(origins)):
            origins[i] = -origins[i] - (0 if w.shape[i] & 1 else 1)
    origins_i = _check_origins(origins, lengths)
    out = _get_output(output, x)
    core_mode = _padding_mode(mode)
    value = _real_cval(cval)
    _check_dtype(x.dtype, "input")
    _check_dtype(out.dtype, "output")

    if x.size == 0:
        return out
    if w.size == 0:  # an empty kernel sums nothing
        out[...] = 0
        return out
    spatial = [ax for ax in range(x.ndim) if w.shape[ax] > 1]
    if len(spatial) > 3:
        raise NotImplementedError(
            f"weights of shape {w.shape} filter {len(spatial)} axes; cconv's convolutions "
            "filter at most three (conv1d, conv2d, conv3d)")
    _run(x, w, out, spatial, origins_i, core_mode, value, num_threads)
    return out


def _run(x: Array, w: Array, out: Array, spatial: List[int], origins: List[int],
         mode: str, value: float, num_threads: Optional[int]) -> None:
    """Filter: the other axes become the batch of one core call on (N, 1, H, W) planes, or
    (N, 1, D, H, W) volumes where three axes are filtered."""
    rank = max(2, len(spatial))
    order = [ax for ax in range(x.ndim) if ax not in spatial] + spatial
    lengths = [1] * (rank - len(spatial)) + [w.shape[ax] for ax in spatial]
    sizes = [1] * (rank - len(spatial)) + [x.shape[ax] for ax in spatial]
    befores = [0] * (rank - len(spatial)) + [w.shape[ax] // 2 + origins[ax] for ax in spatial]
    pads = tuple((b, n - 1 - b) for b, n in zip(befores, lengths))
    plane_shape = (-1, 1, *sizes)

    dtype = _compute_dtype(x.dtype, out.dtype)
    xt = np.transpose(x, order)
    kernel = np.transpose(w, order).reshape(lengths).astype(dtype)
    out_t = np.transpose(out, order)
    if x.dtype != dtype or out.dtype != dtype:  # a conversion: strip by strip
        x_planes = xt.reshape(plane_shape)
        out4 = _reshape_view(out_t, x_planes.shape)
        if out4 is not None and not np.may_share_memory(x, out):
            def store(first: int, sums: Array) -> None:
                _store(out4[:, :, first:first + sums.shape[2]], sums, num_threads)

            if correlate_in_strips(x_planes, kernel, pads, mode, value, dtype, store,
                                   num_threads):
                return
    x4 = cast(xt.reshape(plane_shape), dtype, num_threads)

    direct = None
    if out.dtype == dtype and not np.may_share_memory(x, out):
        direct = _reshape_view(out_t, x4.shape)
    result = correlate_planes(x4, kernel, pads, mode, value, num_threads, out=direct)
    if direct is None:
        _store(out_t, result.reshape(xt.shape), num_threads)


def _complex(x: Array, w: Array, out: Array, mode: Any, cval: Any, origin: Any, axes: Any,
             num_threads: Optional[int], convolution: bool) -> Array:
    """Complex filtering as real filterings of the real and imaginary parts."""
    def run(a: Array, b: Array, dst: Optional[Array], fill: Any) -> Array:
        return _filter(a, b, dst, mode, fill, origin, axes, num_threads, convolution)

    if x.dtype.kind == "c" and w.dtype.kind == "c":
        run(x.real, w.real, out.real, np.real(cval))
        out.real -= run(x.imag, w.imag, None, np.imag(cval))
        run(x.real, w.imag, out.imag, np.real(cval))
        out.imag += run(x.imag, w.real, None, np.imag(cval))
    elif x.dtype.kind == "c":
        run(x.real, w, out.real, np.real(cval))
        run(x.imag, w, out.imag, np.imag(cval))
    else:
        if np.iscomplexobj(cval):
            raise ValueError("Cannot provide a complex-valued cval when the input is real.")
        run(x, w.real, out.real, cval)
        run(x, w.imag, out.imag, cval)
    return out
