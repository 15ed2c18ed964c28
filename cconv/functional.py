"""The public convolution functions: validate, pick an algorithm, run it, write the result.

Each function turns its arguments into a ``ConvGeometry`` (``_geometry``),
asks ``_dispatch`` for an implementation, and hands it arrays in the compute
dtype as logical (N, C, H, W) views plus a (K, C/groups, R, S) weight.
Transposed convolution is the backward-data pass of the convolution it
transposes, and its gradients are that convolution's forward and
backward-weight passes.
"""

from __future__ import annotations

import numbers

import numpy as np

from . import _dispatch
from ._geometry import (as_float_array, check_choice, check_shape4, compute_dtype, make_geometry,
                        normalize_padding, normalize_pair, LAYOUTS, WEIGHT_LAYOUTS, _from_layout,
                        _to_layout)
from ._threads import resolve_num_threads

__all__ = ["conv2d", "conv2d_backward_data", "conv2d_backward_weight", "conv2d_backward_bias",
           "conv2d_backward", "conv_transpose2d", "conv_transpose2d_backward_data",
           "conv_transpose2d_backward_weight", "conv_transpose2d_backward"]

_NEEDS = ("data", "weight", "bias")


# -- helpers ------------------------------------------------------------------------------

def _nchw(array, layout):
    """A logical (N, C, H, W) view of an array in ``layout`` order."""
    return array if layout == "NCHW" else array.transpose(0, 3, 1, 2)


def _activation(value, name, dtype):
    """``value`` as an array of the compute dtype (no copy when it already is one)."""
    return np.asarray(value).astype(dtype, copy=False)


def _weight_oihw(weight, weight_layout, dtype):
    w = weight if weight_layout == "OIHW" else weight.transpose(3, 2, 0, 1)
    return np.ascontiguousarray(w, dtype=dtype)


def _scalars(alpha, beta):
    for name, value in (("alpha", alpha), ("beta", beta)):
        if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{name} must be a real number, got {value!r}")
    return float(alpha), float(beta)


def _check_out(out, shape, dtype):
    if out is None:
        return None
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray, got {type(out).__name__}")
    if out.shape != tuple(shape):
        raise ValueError(f"out has shape {out.shape}, expected {tuple(shape)}")
    if out.dtype != dtype:
        raise TypeError(f"out has dtype {out.dtype}, expected {np.dtype(dtype)}")
    if not out.flags.writeable:
        raise ValueError("out is read-only")
    return out


def _check_bias(bias, channels, dtype):
    if bias is None:
        return None
    b = as_float_array(bias, "bias")
    if b.shape != (channels,):
        raise ValueError(f"bias must have shape ({channels},), got {b.shape}")
    return np.ascontiguousarray(b, dtype=dtype)


def _check_grad_out(grad_out, expected, layout, shape_name, shape):
    if grad_out.shape != tuple(expected):
        raise ValueError(f"grad_out has shape {grad_out.shape} but {shape_name}={tuple(shape)} "
                         f"gives a convolution output of shape {tuple(expected)} ({layout})")


def _emit(compute, shape, layout, dtype, result_dtype, out, alpha, beta, empty):
    """Run ``compute(y_nchw, alpha, beta)`` (which writes ``alpha*result + beta*y``) into
    ``out`` or a new array, converting dtypes where the result dtype is not computed natively."""
    if empty:  # a zero-size batch: result is all zeros
        if out is None:
            return np.zeros(shape, result_dtype)
        if beta == 0:
            out[...] = 0
        else:
            out *= beta
        return out
    if out is not None and out.dtype == dtype:
        compute(_nchw(out, layout), alpha, beta)
        return out
    y = np.empty(shape, dtype)
    compute(_nchw(y, layout), alpha if out is None else 1.0, 0.0)
    if out is None:
        return y.astype(result_dtype, copy=False)
    if beta == 0:
        out[...] = alpha * y
    else:
        out[...] = alpha * y + beta * out.astype(dtype)
    return out


def _scaled_into(result, out, alpha, beta):
    """``alpha * result (+ beta * out)`` for results computed whole (weights, bias)."""
    if out is None:
        return (result * alpha).astype(result.dtype, copy=False) if alpha != 1 else result
    if beta == 0:
        out[...] = alpha * result
    else:
        out[...] = alpha * result + beta * out
    return out


def _operands(x, weight, x_name, w_name):
    x = as_float_array(x, x_name)
    w = as_float_array(weight, w_name)
    return x, w, compute_dtype(x.dtype, w.dtype), np.result_type(x.dtype, w.dtype)


def _geometry(x_shape, w_shape, dtype, kw, x_name, w_name):
    return make_geometry(x_shape, w_shape, stride=kw["stride"], padding=kw["padding"],
                         dilation=kw["dilation"], groups=kw["groups"], layout=kw["layout"],
                         weight_layout=kw["weight_layout"], dtype=dtype, x_name=x_name,
                         w_name=w_name)


# -- convolution ------------------------------------------------------------------------------

def conv2d(x, weight, bias=None, *, stride=1, padding=0, dilation=1, groups=1, layout="NCHW",
           weight_layout="OIHW", algo="auto", out=None, alpha=1.0, beta=0.0, num_threads=None):
    """2-D convolution (cross-correlation, as in PyTorch and TensorFlow).

    Parameters
    ----------
    x : array_like
        Input, (N, C, H, W) for ``layout="NCHW"`` or (N, H, W, C) for ``"NHWC"``.
    weight : array_like
        (K, C/groups, R, S) for ``weight_layout="OIHW"`` or (R, S, C/groups, K) for ``"HWIO"``.
    bias : array_like, optional
        (K,), added to every output pixel.
    stride, dilation : int or (int, int)
        Positive; dilation 1 means none.
    padding : int, (int, int), ((top, bottom), (left, right)) or str
        ``"valid"``, ``"same"`` (= ``"same_upper"``, odd extra at the end) or ``"same_lower"``.
    groups : int
        Divides C and K; ``groups == C`` is depthwise convolution (K = multiplier x C).
    layout, weight_layout : str
    algo : str
        ``"auto"``, ``"find"`` or one of ``cconv.ALGORITHMS``.
    out : ndarray, optional
        Receives ``alpha * result + beta * out`` and is returned; exact shape and dtype.
    alpha, beta : float
        Scaling as in MIOpen/cuDNN; without ``out``, ``alpha`` scales and ``beta`` is ignored.
    num_threads : int, optional
        Threads for this call; default :func:`cconv.get_num_threads`.

    Returns
    -------
    ndarray
        (N, K, OH, OW) or (N, OH, OW, K), of dtype ``numpy.result_type(x, weight)``;
        float16 is computed in float32.
    """
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups, layout=layout,
              weight_layout=weight_layout)
    return _conv2d(x, weight, bias, kw, algo, out, alpha, beta, num_threads)


def _conv2d(x, weight, bias, kw, algo, out, alpha, beta, num_threads, prepared=None):
    """:func:`conv2d`; ``prepared`` (from ``ConvPlan.prepare_weight``) carries the weight
    already transformed for one algorithm, used when that algorithm runs the call."""
    x, w, dtype, result_dtype = _operands(x, weight, "x", "weight")
    geom = _geometry(x.shape, w.shape, dtype, kw, "x", "weight")
    nthreads = resolve_num_threads(num_threads)
    alpha, beta = _scalars(alpha, beta)
    b = _check_bias(bias, geom.K, dtype)
    out = _check_out(out, geom.output_shape(), result_dtype)
    impl = _dispatch.select(geom, "forward", algo, nthreads)
    xv = _nchw(_activation(x, "x", dtype), kw["layout"])
    wv = _weight_oihw(w, kw["weight_layout"], dtype)
    # a prepared weight serves only the algorithm and geometry it was prepared for
    extra = ({"prepared": prepared[1]}
             if prepared is not None and prepared[0] == impl.name and prepared[2] == geom
             else {})
    return _emit(lambda y, a, bt: impl.forward(xv, wv, b, y, a, bt, nthreads, **extra),
                 geom.output_shape(), kw["layout"], dtype, result_dtype, out, alpha, beta,
                 geom.N == 0)


def conv2d_backward_data(grad_out, weight, input_shape, *, stride=1, padding=0, dilation=1,
                         groups=1, layout="NCHW", weight_layout="OIHW", algo="auto", out=None,
                         alpha=1.0, beta=0.0, num_threads=None):
    """Gradient of :func:`conv2d` with respect to its input.

    Parameters
    ----------
    grad_out : array_like
        Gradient of the convolution's output, in ``layout`` order.
    weight : array_like
        The convolution's weight, in ``weight_layout`` order.
    input_shape : sequence of 4 ints
        Shape of the convolution's input in ``layout`` order (resolves strided sizes).
    stride, padding, dilation, groups, layout, weight_layout, algo, out, alpha, beta, num_threads
        As in :func:`conv2d`.

    Returns
    -------
    ndarray of shape ``input_shape``
    """
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups, layout=layout,
              weight_layout=weight_layout)
    dy, w, dtype, result_dtype = _operands(grad_out, weight, "grad_out", "weight")
    geom = _geometry(check_shape4(input_shape, "input_shape"), w.shape, dtype, kw,
                     "input_shape", "weight")
    _check_grad_out(dy, geom.output_shape(), layout, "input_shape", input_shape)
    nthreads = resolve_num_threads(num_threads)
    alpha, beta = _scalars(alpha, beta)
    out = _check_out(out, geom.input_shape(), result_dtype)
    impl = _dispatch.select(geom, "backward_data", algo, nthreads)
    dyv = _nchw(_activation(dy, "grad_out", dtype), layout)
    wv = _weight_oihw(w, weight_layout, dtype)
    return _emit(lambda dx, a, bt: impl.backward_data(dyv, wv, dx, a, bt, nthreads),
                 geom.input_shape(), layout, dtype, result_dtype, out, alpha, beta, geom.N == 0)


def conv2d_backward_weight(grad_out, x, weight_shape, *, stride=1, padding=0, dilation=1,
                           groups=1, layout="NCHW", weight_layout="OIHW", algo="auto", out=None,
                           alpha=1.0, beta=0.0, num_threads=None):
    """Gradient of :func:`conv2d` with respect to its weight.

    Parameters
    ----------
    grad_out : array_like
        Gradient of the convolution's output, in ``layout`` order.
    x : array_like
        The convolution's input, in ``layout`` order.
    weight_shape : sequence of 4 ints
        Shape of the weight in ``weight_layout`` order.
    stride, padding, dilation, groups, layout, weight_layout, algo, out, alpha, beta, num_threads
        As in :func:`conv2d`.

    Returns
    -------
    ndarray of shape ``weight_shape``
        Summed over the batch; deterministic for a given shape, whatever the thread count.
    """
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups, layout=layout,
              weight_layout=weight_layout)
    dy, xa, dtype, result_dtype = _operands(grad_out, x, "grad_out", "x")
    geom = _geometry(xa.shape, check_shape4(weight_shape, "weight_shape"), dtype, kw, "x",
                     "weight_shape")
    _check_grad_out(dy, geom.output_shape(), layout, "weight_shape", weight_shape)
    nthreads = resolve_num_threads(num_threads)
    alpha, beta = _scalars(alpha, beta)
    out = _check_out(out, geom.weight_shape(), result_dtype)
    impl = _dispatch.select(geom, "backward_weight", algo, nthreads)
    if geom.N == 0:
        grad = np.zeros((geom.K, geom.Cg, geom.R, geom.S), dtype)
    else:
        grad = impl.backward_weight(_nchw(_activation(dy, "grad_out", dtype), layout),
                                    _nchw(_activation(xa, "x", dtype), layout), nthreads)
    if weight_layout == "HWIO":
        grad = np.ascontiguousarray(grad.transpose(2, 3, 1, 0))
    return _scaled_into(grad.astype(result_dtype, copy=False), out, alpha, beta)


def conv2d_backward_bias(grad_out, *, layout="NCHW", out=None, alpha=1.0, beta=0.0):
    """Gradient of :func:`conv2d` with respect to its bias: ``grad_out`` summed over N, H, W.

    Parameters
    ----------
    grad_out : array_like
        4-D, in ``layout`` order.
    layout : str
    out, alpha, beta
        As in :func:`conv2d`.

    Returns
    -------
    ndarray of shape (K,)
        Accumulated in float64, returned in ``grad_out``'s dtype.
    """
    check_choice(layout, "layout", LAYOUTS)
    dy = as_float_array(grad_out, "grad_out")
    if dy.ndim != 4:
        raise ValueError(f"grad_out must be 4-D, got {dy.ndim}-D shape {dy.shape}")
    alpha, beta = _scalars(alpha, beta)
    axes = (0, 2, 3) if layout == "NCHW" else (0, 1, 2)
    channels = dy.shape[1] if layout == "NCHW" else dy.shape[3]
    out = _check_out(out, (channels,), dy.dtype)
    grad = dy.sum(axis=axes, dtype=np.float64).astype(dy.dtype)
    return _scaled_into(grad, out, alpha, beta)


def _check_need(need):
    if isinstance(need, str):
        need = (need,)
    need = tuple(need)
    for item in need:
        if item not in _NEEDS:
            raise ValueError(f"need entries must be among {_NEEDS}, got {item!r}")
    return need


def conv2d_backward(grad_out, x, weight, *, stride=1, padding=0, dilation=1, groups=1,
                    layout="NCHW", weight_layout="OIHW", algo="auto", num_threads=None,
                    need=_NEEDS):
    """All gradients of :func:`conv2d` in one call.

    Parameters
    ----------
    grad_out, x, weight : array_like
        Output gradient, input and weight of the convolution.
    stride, padding, dilation, groups, layout, weight_layout, algo, num_threads
        As in :func:`conv2d`.
    need : sequence of {"data", "weight", "bias"}
        Which gradients to compute.

    Returns
    -------
    (dx, dw, db)
        Entries not in ``need`` are None.
    """
    need = _check_need(need)
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups, layout=layout,
              weight_layout=weight_layout, algo=algo, num_threads=num_threads)
    xa = as_float_array(x, "x")
    w = as_float_array(weight, "weight")
    dy = as_float_array(grad_out, "grad_out")
    # Validate everything once, whatever ``need`` asks for, naming the caller's arguments.
    geom = _geometry(xa.shape, w.shape, compute_dtype(xa.dtype, w.dtype), kw, "x", "weight")
    _check_grad_out(dy, geom.output_shape(), layout, "x", xa.shape)
    dx = conv2d_backward_data(dy, w, xa.shape, **kw) if "data" in need else None
    dw = conv2d_backward_weight(dy, xa, w.shape, **kw) if "weight" in need else None
    db = conv2d_backward_bias(dy, layout=layout) if "bias" in need else None
    return dx, dw, db


# -- transposed convolution -------------------------------------------------------------------

def _transpose_geometry(x_shape, w_shape, dtype, *, stride, padding, output_padding, dilation,
                        groups, layout, weight_layout, output_shape):
    """The geometry of the convolution that ``conv_transpose2d`` transposes.

    Returns ``(geom, extra)``: ``extra`` = (rows, cols) of zeros the transposed
    conv's input lacks at the bottom/right when ``output_padding >= stride``.
    """
    check_choice(layout, "layout", LAYOUTS)
    check_choice(weight_layout, "weight_layout", WEIGHT_LAYOUTS)
    x_shape = check_shape4(x_shape, "x")
    w_shape = check_shape4(w_shape, "weight")
    N, Cin, H, W = _from_layout(x_shape, layout)
    stride_p = normalize_pair(stride, "stride", minimum=1)
    dilation_p = normalize_pair(dilation, "dilation", minimum=1)
    pads = normalize_padding(padding, allow_same=False)
    if weight_layout == "OIHW":
        _, kg, R, S = w_shape
    else:
        R, S, kg, _ = w_shape
    if not isinstance(groups, numbers.Integral) or isinstance(groups, bool) or groups < 1:
        raise ValueError(f"groups must be a positive int, got {groups!r}")
    base = [(size - 1) * s - lo - hi + d * (k - 1) + 1
            for size, s, (lo, hi), d, k in zip((H, W), stride_p, pads, dilation_p, (R, S))]
    if output_shape is not None:
        target = check_shape4(output_shape, "output_shape")
        tn, tk, th, tw = _from_layout(target, layout)
        if tn != N or tk != kg * groups:
            raise ValueError(f"output_shape {tuple(target)} does not match batch {N} and "
                             f"output channels {kg * groups}")
        op = (th - base[0], tw - base[1])
        name = "output_shape"
    else:
        op = normalize_pair(output_padding, "output_padding", minimum=0)
        name = "output_padding"
    for axis, value, s, d in zip(("height", "width"), op, stride_p, dilation_p):
        if not 0 <= value < max(s, d):
            raise ValueError(f"{name} implies output padding {value} along {axis}; it must be "
                             f">= 0 and smaller than stride {s} or dilation {d}")
    out_hw = [b + p for b, p in zip(base, op)]
    if min(out_hw) < 1:
        raise ValueError(f"transposed convolution output would be {tuple(out_hw)}: padding "
                         f"{pads} too large for input {H}x{W}")
    fwd_x = _to_layout((N, kg * groups, out_hw[0], out_hw[1]), layout)
    geom = make_geometry(fwd_x, w_shape, stride=stride_p, padding=pads, dilation=dilation_p,
                         groups=groups, layout=layout, weight_layout=weight_layout, dtype=dtype,
                         x_name="output_shape", w_name="weight")
    if geom.K != Cin:
        raise ValueError(f"weight has {geom.K} input channels but x has {Cin}")
    return geom, (geom.OH - H, geom.OW - W)


def _check_transpose_grad_out(grad_out, geom, layout):
    """``grad_out`` must have the transposed convolution's output shape (the forward input's)."""
    if grad_out.shape != geom.input_shape():
        raise ValueError(f"grad_out has shape {grad_out.shape} but x / input_shape and the "
                         f"keywords give a transposed convolution output of shape "
                         f"{geom.input_shape()} ({layout})")


def _pad_bottom_right(array_nchw, extra):
    if extra == (0, 0):
        return array_nchw
    return np.pad(array_nchw, ((0, 0), (0, 0), (0, extra[0]), (0, extra[1])))


def conv_transpose2d(x, weight, bias=None, *, stride=1, padding=0, output_padding=0,
                     dilation=1, groups=1, layout="NCHW", weight_layout="OIHW", algo="auto",
                     output_shape=None, out=None, alpha=1.0, beta=0.0, num_threads=None):
    """Transposed 2-D convolution (the gradient of :func:`conv2d` w.r.t. its input), as PyTorch.

    Parameters
    ----------
    x : array_like
        (N, C_in, H, W) or (N, H, W, C_in).
    weight : array_like
        (C_in, K/groups, R, S) for ``"OIHW"`` or (R, S, K/groups, C_in) for ``"HWIO"``.
    bias : array_like, optional
        (K,).
    stride, dilation : int or (int, int)
    padding : int, (int, int), ((top, bottom), (left, right)) or "valid"
        Removed from the full output, as in PyTorch.
    output_padding : int or (int, int)
        Extra rows/cols at the bottom/right, smaller than stride or dilation on its axis.
    output_shape : sequence of 4 ints, optional
        Full output shape in ``layout`` order, instead of ``output_padding``.
    groups, layout, weight_layout, algo, out, alpha, beta, num_threads
        As in :func:`conv2d`.

    Returns
    -------
    ndarray
        Output size ``(H-1)*stride - pad_top - pad_bottom + dilation*(R-1) + output_padding + 1``.
    """
    xa, w, dtype, result_dtype = _operands(x, weight, "x", "weight")
    geom, extra = _transpose_geometry(xa.shape, w.shape, dtype, stride=stride, padding=padding,
                                      output_padding=output_padding, dilation=dilation,
                                      groups=groups, layout=layout, weight_layout=weight_layout,
                                      output_shape=output_shape)
    nthreads = resolve_num_threads(num_threads)
    alpha, beta = _scalars(alpha, beta)
    b = _check_bias(bias, geom.C, dtype)
    out = _check_out(out, geom.input_shape(), result_dtype)
    impl = _dispatch.select(geom, "backward_data", algo, nthreads)
    xv = _pad_bottom_right(_nchw(_activation(xa, "x", dtype), layout), extra)
    wv = _weight_oihw(w, weight_layout, dtype)
    return _emit(lambda y, a, bt: impl.backward_data(xv, wv, y, a, bt, nthreads, bias=b),
                 geom.input_shape(), layout, dtype, result_dtype, out, alpha, beta, geom.N == 0)


def conv_transpose2d_backward_data(grad_out, weight, input_shape, *, stride=1, padding=0,
                                   output_padding=0, dilation=1, groups=1, layout="NCHW",
                                   weight_layout="OIHW", algo="auto", output_shape=None, out=None,
                                   alpha=1.0, beta=0.0, num_threads=None):
    """Gradient of :func:`conv_transpose2d` with respect to its input ``x``.

    Parameters
    ----------
    grad_out : array_like
        Gradient of the transposed convolution's output.
    weight : array_like
        Its weight, as for :func:`conv_transpose2d`.
    input_shape : sequence of 4 ints
        Shape of its input ``x`` in ``layout`` order.
    stride, padding, output_padding, dilation, groups, layout, weight_layout, algo,
    output_shape, out, alpha, beta, num_threads
        As in :func:`conv_transpose2d`.

    Returns
    -------
    ndarray of shape ``input_shape``
    """
    dy, w, dtype, result_dtype = _operands(grad_out, weight, "grad_out", "weight")
    geom, extra = _transpose_geometry(check_shape4(input_shape, "input_shape"), w.shape, dtype,
                                      stride=stride, padding=padding,
                                      output_padding=output_padding, dilation=dilation,
                                      groups=groups, layout=layout, weight_layout=weight_layout,
                                      output_shape=output_shape)
    _check_transpose_grad_out(dy, geom, layout)
    nthreads = resolve_num_threads(num_threads)
    alpha, beta = _scalars(alpha, beta)
    shape = check_shape4(input_shape, "input_shape")
    out = _check_out(out, shape, result_dtype)
    impl = _dispatch.select(geom, "forward", algo, nthreads)
    dyv = _nchw(_activation(dy, "grad_out", dtype), layout)
    wv = _weight_oihw(w, weight_layout, dtype)

    def compute(y, a, bt):
        if extra == (0, 0):
            impl.forward(dyv, wv, None, y, a, bt, nthreads)
        else:  # the forward conv yields extra rows/cols that x never had
            full = np.empty((geom.N, geom.K, geom.OH, geom.OW), dtype)
            impl.forward(dyv, wv, None, full, 1.0, 0.0, nthreads)
            cropped = full[:, :, :y.shape[2], :y.shape[3]]
            y[...] = a * cropped + (bt * y if bt != 0 else 0)

    return _emit(compute, shape, layout, dtype, result_dtype, out, alpha, beta, geom.N == 0)


def conv_transpose2d_backward_weight(grad_out, x, weight_shape, *, stride=1, padding=0,
                                     output_padding=0, dilation=1, groups=1, layout="NCHW",
                                     weight_layout="OIHW", algo="auto", output_shape=None,
                                     out=None, alpha=1.0, beta=0.0, num_threads=None):
    """Gradient of :func:`conv_transpose2d` with respect to its weight.

    Parameters
    ----------
    grad_out : array_like
        Gradient of the transposed convolution's output.
    x : array_like
        Its input.
    weight_shape : sequence of 4 ints
        (C_in, K/groups, R, S) for ``"OIHW"`` or (R, S, K/groups, C_in) for ``"HWIO"``.
    stride, padding, output_padding, dilation, groups, layout, weight_layout, algo,
    output_shape, out, alpha, beta, num_threads
        As in :func:`conv_transpose2d`.

    Returns
    -------
    ndarray of shape ``weight_shape``
    """
    dy, xa, dtype, result_dtype = _operands(grad_out, x, "grad_out", "x")
    geom, extra = _transpose_geometry(xa.shape, check_shape4(weight_shape, "weight_shape"),
                                      dtype, stride=stride, padding=padding,
                                      output_padding=output_padding, dilation=dilation,
                                      groups=groups, layout=layout, weight_layout=weight_layout,
                                      output_shape=output_shape)
    _check_transpose_grad_out(dy, geom, layout)
    nthreads = resolve_num_threads(num_threads)
    alpha, beta = _scalars(alpha, beta)
    out = _check_out(out, geom.weight_shape(), result_dtype)
    impl = _dispatch.select(geom, "backward_weight", algo, nthreads)
    if geom.N == 0:
        grad = np.zeros((geom.K, geom.Cg, geom.R, geom.S), dtype)
    else:
        # The transposed conv's output gradient plays the forward input, its input the
        # forward output gradient.
        xv = _pad_bottom_right(_nchw(_activation(xa, "x", dtype), layout), extra)
        grad = impl.backward_weight(xv, _nchw(_activation(dy, "grad_out", dtype), layout),
                                    nthreads)
    if weight_layout == "HWIO":
        grad = np.ascontiguousarray(grad.transpose(2, 3, 1, 0))
    return _scaled_into(grad.astype(result_dtype, copy=False), out, alpha, beta)


def conv_transpose2d_backward(grad_out, x, weight, *, stride=1, padding=0, output_padding=0,
                              dilation=1, groups=1, layout="NCHW", weight_layout="OIHW",
                              algo="auto", output_shape=None, num_threads=None, need=_NEEDS):
    """All gradients of :func:`conv_transpose2d` in one call.

    Parameters
    ----------
    grad_out, x, weight : array_like
    stride, padding, output_padding, dilation, groups, layout, weight_layout, algo,
    output_shape, num_threads
        As in :func:`conv_transpose2d`.
    need : sequence of {"data", "weight", "bias"}

    Returns
    -------
    (dx, dw, db)
        Entries not in ``need`` are None.
    """
    need = _check_need(need)
    kw = dict(stride=stride, padding=padding, output_padding=output_padding, dilation=dilation,
              groups=groups, layout=layout, weight_layout=weight_layout, algo=algo,
              output_shape=output_shape, num_threads=num_threads)
    xa = as_float_array(x, "x")
    w = as_float_array(weight, "weight")
    dy = as_float_array(grad_out, "grad_out")
    geom_kw = {k: v for k, v in kw.items() if k not in ("algo", "num_threads")}
    geom, _ = _transpose_geometry(xa.shape, w.shape, compute_dtype(xa.dtype, w.dtype), **geom_kw)
    _check_transpose_grad_out(dy, geom, layout)
    dx = conv_transpose2d_backward_data(dy, w, xa.shape, **kw) if "data" in need else None
    dw = conv_transpose2d_backward_weight(dy, xa, w.shape, **kw) if "weight" in need else None
    db = conv2d_backward_bias(dy, layout=layout) if "bias" in need else None
    return dx, dw, db
