"""ArrayFire ``convolve2NN`` / ``convolve2GradientNN`` on cconv.

Array order. ArrayFire arrays are column-major with dimensions (d0, d1, d2, d3); as a NumPy
array here they have shape ``(d0, d1, C, N)`` for signals and ``(f0, f1, C, K)`` for filters
(element ``a[i0, i1, c, n]`` is ArrayFire's ``a(i0, i1, c, n)``), which is what
``arrayfire.Array.to_ndarray()`` produces. d0 is the fastest-varying axis in ArrayFire's memory,
so this module maps **d0 to cconv's W axis and d1 to its H axis**: the NCHW view of a signal is
``signal.transpose(3, 2, 1, 0)``, which costs no copy for a Fortran-ordered array. ArrayFire
treats the two spatial axes symmetrically (``stride[0]``, ``padding[0]``, ``dilation[0]`` and
filter dimension 0 all act on d0; index 1 on d1), so this is a naming choice, not a semantic one.
Arrays with fewer than 4 dimensions get trailing singleton dimensions, as ArrayFire does.
Results are always 4-D ``(o0, o1, K, N)`` (Fortran-ordered views).

Semantics. ``convolve2_nn`` is a true convolution, like ArrayFire's: the filter is flipped
along d0 and d1 before the sliding dot product (cconv itself computes cross-correlation).
Padding is symmetric per axis; the output size along axis i is
``(d_i + 2*padding[i] - dilation[i]*(f_i - 1) - 1) // stride[i] + 1``. There are no groups.

``convolve2_gradient_nn(..., grad_type)`` returns the gradient of ``convolve2_nn``'s output
with respect to the filter (``"filter"``, ``AF_CONV_GRADIENT_FILTER`` = 1, shape of the filter),
the signal (``"data"``, ``AF_CONV_GRADIENT_DATA`` = 2, shape of the signal) or the bias
(``"bias"``, ``AF_CONV_GRADIENT_BIAS`` = 3, shape ``(K,)``: the incoming gradient summed over
d0, d1 and the batch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Union, cast

import numpy as np
import numpy.typing as npt

import cconv as _cc

from . import _pair

if TYPE_CHECKING:
    from .._geometry import IntOrPair
    from . import _ConvKeywords

Array = npt.NDArray[Any]

__all__ = [
    "convolve2_nn",
    "convolve2_gradient_nn",
    "AF_CONV_GRADIENT_DEFAULT",
    "AF_CONV_GRADIENT_FILTER",
    "AF_CONV_GRADIENT_DATA",
    "AF_CONV_GRADIENT_BIAS",
]

# ArrayFire's af_conv_gradient_type enum (af/defines.h).
AF_CONV_GRADIENT_DEFAULT = 0
AF_CONV_GRADIENT_FILTER = 1
AF_CONV_GRADIENT_DATA = 2
AF_CONV_GRADIENT_BIAS = 3

_GRAD_NAMES = {
    "filter": "filter",
    "data": "data",
    "bias": "bias",
    "af_conv_gradient_filter": "filter",
    "af_conv_gradient_data": "data",
    "af_conv_gradient_bias": "bias",
    "conv_gradient_filter": "filter",
    "conv_gradient_data": "data",
    "conv_gradient_bias": "bias",
}
_GRAD_INTS = {
    AF_CONV_GRADIENT_FILTER: "filter",
    AF_CONV_GRADIENT_DATA: "data",
    AF_CONV_GRADIENT_BIAS: "bias",
}


def _grad_kind(grad_type: object) -> str:
    value = getattr(grad_type, "value", grad_type)  # arrayfire-python's ConvGradient enum members
    kind: Union[str, int, None]  # 0: AF_CONV_GRADIENT_DEFAULT, refused below
    if isinstance(value, str):
        kind = _GRAD_NAMES.get(value.strip().lower())
        if kind is None and value.strip().lower() in ("default", "af_conv_gradient_default"):
            kind = 0
    elif isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        kind = _GRAD_INTS.get(int(value), 0 if int(value) == AF_CONV_GRADIENT_DEFAULT else None)
    else:
        kind = None
    if kind == 0:
        raise ValueError(
            "grad_type AF_CONV_GRADIENT_DEFAULT (0) does not name one gradient; pass 'filter' "
            "(AF_CONV_GRADIENT_FILTER=1), 'data' (AF_CONV_GRADIENT_DATA=2) or 'bias' "
            "(AF_CONV_GRADIENT_BIAS=3)"
        )
    if kind is None:
        raise ValueError(
            f"grad_type must be 'filter', 'data', 'bias', one of ArrayFire's enum values 1, 2, 3 "
            f"or names AF_CONV_GRADIENT_FILTER/DATA/BIAS; got {grad_type!r}"
        )
    return cast(str, kind)  # 0 and None were refused above


def _as4(a: npt.ArrayLike, what: str) -> Array:
    a = np.asarray(a)
    if not 2 <= a.ndim <= 4:
        raise ValueError(f"{what} must have 2 to 4 dimensions (d0, d1, C, N), got shape {a.shape}")
    if a.ndim < 4:
        a = a.reshape(a.shape + (1,) * (4 - a.ndim))
    return a


def _geometry(stride: object, padding: object, dilation: object) -> _ConvKeywords:
    # index 0 acts on d0 (= cconv W), index 1 on d1 (= cconv H): swap into cconv's (h, w) order.
    s0, s1 = _pair(stride, "stride")
    p0, p1 = _pair(padding, "padding")
    d0, d1 = _pair(dilation, "dilation")
    return dict(stride=(s1, s0), padding=(p1, p0), dilation=(d1, d0))


def _nchw(a: Array) -> Array:
    """(d0, d1, C, N) -> (N, C, H=d1, W=d0) view."""
    return a.transpose(3, 2, 1, 0)


def _flipped_oihw(filt: Array) -> Array:
    """(f0, f1, C, K) -> (K, C, f1, f0) with both spatial axes reversed (true convolution)."""
    return filt.transpose(3, 2, 1, 0)[:, :, ::-1, ::-1]


def convolve2_nn(
    signal: npt.ArrayLike,
    filter: npt.ArrayLike,
    stride: IntOrPair = (1, 1),
    padding: IntOrPair = (0, 0),
    dilation: IntOrPair = (1, 1),
    *,
    algo: str = "auto",
    num_threads: Optional[int] = None,
) -> Array:
    """ArrayFire ``convolve2NN``: a batch of signals convolved with a bank of filters.

    A true convolution (the filter is flipped along d0 and d1), summed over the C channels,
    for every one of the K filters and N signals, as ArrayFire's neural-network convolution.

    Parameters
    ----------
    signal : array_like
        Shape (d0, d1, C, N) in ArrayFire's dimension order (what
        ``arrayfire.Array.to_ndarray()`` gives): N signals of C channels of d0 x d1 samples.
        2-D or 3-D arrays get trailing singleton dimensions (C = 1, N = 1), as in ArrayFire.
        float16, float32 or float64.
    filter : array_like
        Shape (f0, f1, C, K): K filters, each of C channels of f0 x f1 taps; C must equal the
        signal's. Fewer than 4 dimensions get trailing singletons, as for ``signal``.
    stride : int or (int, int)
        Step of the filter along (d0, d1); positive. An int applies to both dimensions.
    padding : int or (int, int)
        Zeros added on both sides of d0 and of d1 (the same amount before and after);
        non-negative.
    dilation : int or (int, int)
        Spacing of the filter taps along (d0, d1); 1 means no dilation.
    algo : str, optional
        cconv algorithm: ``"auto"`` (default), ``"find"`` or one of ``cconv.ALGORITHMS``.
    num_threads : int, optional
        Threads for this call; default :func:`cconv.get_num_threads`.

    Returns
    -------
    ndarray
        Shape (o0, o1, K, N) with ``o_i = (d_i + 2*padding[i] - dilation[i]*(f_i - 1) - 1)
        // stride[i] + 1``, dtype ``numpy.result_type(signal, filter)`` (float16 computed in
        float32); a Fortran-ordered view, as ArrayFire's column-major result would be.
    """
    x = _as4(signal, "signal")
    w = _as4(filter, "filter")
    if x.shape[2] != w.shape[2]:
        raise ValueError(
            f"signal has {x.shape[2]} channels (dimension 2 of shape {x.shape}) but filter expects "
            f"{w.shape[2]} (dimension 2 of shape {w.shape})"
        )
    y = _cc.conv2d(
        _nchw(x),
        _flipped_oihw(w),
        algo=algo,
        num_threads=num_threads,
        **_geometry(stride, padding, dilation),
    )
    return np.asarray(y).transpose(3, 2, 1, 0)


def convolve2_gradient_nn(
    incoming_gradient: npt.ArrayLike,
    original_signal: npt.ArrayLike,
    original_filter: npt.ArrayLike,
    convolved_output: Optional[npt.ArrayLike],
    stride: IntOrPair,
    padding: IntOrPair,
    dilation: IntOrPair,
    grad_type: object,
    *,
    algo: str = "auto",
    num_threads: Optional[int] = None,
) -> Array:
    """ArrayFire ``convolve2GradientNN``: one gradient of :func:`convolve2_nn`.

    Parameters
    ----------
    incoming_gradient : array_like
        Gradient of the loss with respect to :func:`convolve2_nn`'s output, shape
        (o0, o1, K, N); fewer than 4 dimensions get trailing singletons.
    original_signal : array_like
        The forward call's ``signal``, (d0, d1, C, N). Its values are used for the filter
        gradient and its shape for the data gradient; unused for ``"bias"``.
    original_filter : array_like
        The forward call's ``filter``, (f0, f1, C, K). Its values are used for the data
        gradient and its shape for the filter gradient; unused for ``"bias"``.
    convolved_output : array_like or None
        The forward call's result. Only its shape is read, to check that it equals
        ``incoming_gradient``'s (ValueError otherwise); None skips the check.
    stride, padding, dilation : int or (int, int)
        The forward call's values, per (d0, d1), as in :func:`convolve2_nn`.
    grad_type : str, int or enum member
        Which gradient: ``"filter"`` (or ``AF_CONV_GRADIENT_FILTER`` = 1), ``"data"``
        (``AF_CONV_GRADIENT_DATA`` = 2) or ``"bias"`` (``AF_CONV_GRADIENT_BIAS`` = 3). Names
        are case-insensitive and may carry the ``AF_CONV_GRADIENT_`` / ``CONV_GRADIENT_``
        prefix; an object with a ``value`` attribute (arrayfire-python's ``CONV_GRADIENT``
        members) is read through it. ``AF_CONV_GRADIENT_DEFAULT`` (0) names no single
        gradient and is refused with ValueError.
    algo : str, optional
        cconv algorithm: ``"auto"`` (default), ``"find"`` or one of ``cconv.ALGORITHMS``.
    num_threads : int, optional
        Threads for this call; default :func:`cconv.get_num_threads`.

    Returns
    -------
    ndarray
        ``"filter"``: shape (f0, f1, C, K), the gradient with respect to the (unflipped)
        filter summed over the batch, a Fortran-ordered array. ``"data"``: shape
        (d0, d1, C, N), a Fortran-ordered view. Both have dtype ``numpy.result_type`` of the
        two arrays used. ``"bias"``: shape (K,), ``incoming_gradient`` summed over o0, o1 and
        N, in its dtype.
    """
    kind = _grad_kind(grad_type)
    g = _as4(incoming_gradient, "incoming_gradient")
    if convolved_output is not None:
        co = np.shape(convolved_output)
        co = tuple(co) + (1,) * (4 - len(co))
        if co != g.shape:
            raise ValueError(
                f"incoming_gradient shape {g.shape} differs from convolved_output shape {co}"
            )
    if kind == "bias":
        return np.asarray(_cc.conv2d_backward_bias(_nchw(g), layout="NCHW"))
    x = _as4(original_signal, "original_signal")
    w = _as4(original_filter, "original_filter")
    geo = _geometry(stride, padding, dilation)
    if kind == "data":
        dx = _cc.conv2d_backward_data(
            _nchw(g), _flipped_oihw(w), _nchw(x).shape, algo=algo, num_threads=num_threads, **geo
        )
        return np.asarray(dx).transpose(3, 2, 1, 0)
    # filter: gradient w.r.t. the flipped (cross-correlation) weight, flipped back.
    k_oihw = (w.shape[3], w.shape[2], w.shape[1], w.shape[0])
    dw = _cc.conv2d_backward_weight(
        _nchw(g), _nchw(x), k_oihw, algo=algo, num_threads=num_threads, **geo
    )
    return np.asfortranarray(np.asarray(dw)[:, :, ::-1, ::-1].transpose(3, 2, 1, 0))
