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

import numpy as np

import cconv as _cc

from . import _pair

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


def _grad_kind(grad_type):
    value = getattr(grad_type, "value", grad_type)  # arrayfire-python's ConvGradient enum members
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
    return kind


def _as4(a, what):
    a = np.asarray(a)
    if not 2 <= a.ndim <= 4:
        raise ValueError(f"{what} must have 2 to 4 dimensions (d0, d1, C, N), got shape {a.shape}")
    if a.ndim < 4:
        a = a.reshape(a.shape + (1,) * (4 - a.ndim))
    return a


def _geometry(stride, padding, dilation):
    # index 0 acts on d0 (= cconv W), index 1 on d1 (= cconv H): swap into cconv's (h, w) order.
    s0, s1 = _pair(stride, "stride")
    p0, p1 = _pair(padding, "padding")
    d0, d1 = _pair(dilation, "dilation")
    return dict(stride=(s1, s0), padding=(p1, p0), dilation=(d1, d0))


def _nchw(a):
    """(d0, d1, C, N) -> (N, C, H=d1, W=d0) view."""
    return a.transpose(3, 2, 1, 0)


def _flipped_oihw(filt):
    """(f0, f1, C, K) -> (K, C, f1, f0) with both spatial axes reversed (true convolution)."""
    return filt.transpose(3, 2, 1, 0)[:, :, ::-1, ::-1]


def convolve2_nn(
    signal, filter, stride=(1, 1), padding=(0, 0), dilation=(1, 1), *, algo="auto", num_threads=None
):
    """ArrayFire ``convolve2NN``: signal (d0, d1, C, N) convolved with filter (f0, f1, C, K).

    Returns (o0, o1, K, N). ``stride``, ``padding`` and ``dilation`` are ints or (d0, d1) pairs.
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
    incoming_gradient,
    original_signal,
    original_filter,
    convolved_output,
    stride,
    padding,
    dilation,
    grad_type,
    *,
    algo="auto",
    num_threads=None,
):
    """ArrayFire ``convolve2GradientNN``: one gradient of :func:`convolve2_nn`.

    ``incoming_gradient`` has the shape of ``convolved_output``, (o0, o1, K, N). ``grad_type``
    selects the result: ``"filter"`` -> (f0, f1, C, K), ``"data"`` -> (d0, d1, C, N),
    ``"bias"`` -> (K,). ``convolved_output`` is only used to check the shape (may be None).
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
