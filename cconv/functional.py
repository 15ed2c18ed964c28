"""The public convolution functions: validate, pick an algorithm, run it, write the result.

Each function turns its arguments into a ``ConvGeometry`` (``_geometry``),
asks ``_dispatch`` for an implementation, and hands it arrays in the compute
dtype as logical (N, C, H, W) views plus a (K, C/groups, R, S) weight.
Transposed convolution is the backward-data pass of the convolution it
transposes, and its gradients are that convolution's forward and
backward-weight passes.
"""

from __future__ import annotations


from typing import TYPE_CHECKING, Any, Dict, Iterable, Optional, Sequence, Tuple, Union, cast

import numpy as np
import numpy.typing as npt

from . import _boundary, _dispatch, _execute
from ._geometry import (LAYOUTS, NEEDS, as_float_array, check_bias, check_choice, check_grad_out,
                        check_need, check_out, check_scalars, check_shape4,
                        check_transpose_grad_out, compute_dtype, is_exact, make_geometry,
                        make_transpose_geometry, result_type)
from ._threads import resolve_num_threads

if TYPE_CHECKING:
    from typing import TypedDict

    from ._geometry import ConvGeometry, IntOrPair, Padding

    class _ConvKeywords(TypedDict):
        """The geometry keywords of the convolution functions, passed on as a bundle."""

        stride: IntOrPair
        padding: Padding
        dilation: IntOrPair
        groups: int
        layout: str
        weight_layout: str
        padding_mode: str
        padding_value: float

    class _BackwardKeywords(_ConvKeywords):
        algo: str
        num_threads: Optional[int]

    class _TransposeGeometryKeywords(TypedDict):
        """The geometry keywords of the transposed convolution functions."""

        stride: IntOrPair
        padding: Padding
        output_padding: IntOrPair
        dilation: IntOrPair
        groups: int
        layout: str
        weight_layout: str
        output_shape: Optional[Sequence[int]]
        padding_mode: str
        padding_value: float

    class _TransposeKeywords(_TransposeGeometryKeywords):
        algo: str
        num_threads: Optional[int]

Array = npt.NDArray[Any]
Gradients = Tuple[Optional[Array], Optional[Array], Optional[Array]]

__all__ = ["conv2d", "conv2d_backward_data", "conv2d_backward_weight", "conv2d_backward_bias",
           "conv2d_backward", "conv_transpose2d", "conv_transpose2d_backward_data",
           "conv_transpose2d_backward_weight", "conv_transpose2d_backward"]


def _operands(x: npt.ArrayLike, weight: npt.ArrayLike, x_name: str,
              w_name: str) -> Tuple[Array, Array, np.dtype[Any], np.dtype[Any]]:
    """Both operands as arrays, their compute dtype and the result dtype."""
    x = as_float_array(x, x_name)
    w = as_float_array(weight, w_name)
    return x, w, compute_dtype(x.dtype, w.dtype), result_type(x.dtype, w.dtype)


def _geometry(x_shape: Sequence[int], w_shape: Sequence[int], dtype: np.dtype[Any],
              kw: _ConvKeywords, x_name: str, w_name: str) -> ConvGeometry:
    return make_geometry(x_shape, w_shape, stride=kw["stride"], padding=kw["padding"],
                         dilation=kw["dilation"], groups=kw["groups"], layout=kw["layout"],
                         weight_layout=kw["weight_layout"], padding_mode=kw["padding_mode"],
                         padding_value=kw["padding_value"], dtype=dtype, x_name=x_name,
                         w_name=w_name)


# -- convolution ------------------------------------------------------------------------------

# What a call derives from its operands' shapes and dtypes, its shape argument and its
# geometry keywords (the geometry, the compute and result dtypes, the padding mode's
# Boundary), by those arguments: deriving it was a quarter of a tiny call's time (conv2d of
# 1x4x8x8 by 4x4x3x3: operands, geometry and boundary 3.9 us of 16.5, Intel Xeon model 207).
# Only plain ndarrays and arguments that equal nothing of another type are keyed
# (``_call_key``), and only calls that validated get an entry: a remembered call validates
# as the first one did.
_SETUPS: Dict[Tuple[object, ...], Tuple[Any, ...]] = {}
_SETUPS_SIZE = 512


def _call_key(op: str, a: object, b: object, shape: object, stride: object, padding: object,
              dilation: object, groups: object, layout: object, weight_layout: object,
              padding_mode: object, padding_value: object) -> Optional[Tuple[object, ...]]:
    """The ``_SETUPS`` key of a call of pass ``op`` on operands ``a`` and ``b`` (``shape``:
    its input or weight shape argument, None for the forward pass), or None where there is
    none: an operand that is not exactly an ndarray (its conversion is part of the setup),
    or an argument equal to values of other types (``True == 1``, ``2.0 == 2``, a list
    shape, a str subclass) that validate differently."""
    if type(a) is not np.ndarray or type(b) is not np.ndarray:
        return None
    if not (is_exact(stride) and is_exact(padding) and is_exact(dilation)
            and is_exact(groups) and (shape is None or type(shape) is tuple and is_exact(shape))):
        return None
    if (type(layout) is not str or type(weight_layout) is not str
            or type(padding_mode) is not str or type(padding_value) is not float):
        return None
    return (op, a.shape, a.dtype, b.shape, b.dtype, shape, stride, padding, dilation, groups,
            layout, weight_layout, padding_mode, padding_value)


def _remember(key: Optional[Tuple[object, ...]], setup: Tuple[Any, ...]) -> None:
    """Keep a validated call's setup under its key (None: not kept)."""
    if key is None:
        return
    if len(_SETUPS) >= _SETUPS_SIZE:
        _SETUPS.clear()
    _SETUPS[key] = setup


def _gradient_setup(op: str, grad_out: npt.ArrayLike, operand: npt.ArrayLike,
                    shape: Sequence[int], kw: _ConvKeywords) -> Tuple[Any, ...]:
    """``(grad_out, operand, geom, dtype, result_dtype, boundary)`` of a gradient pass, the
    operands as arrays, validated (or remembered, ``_call_key``): ``op`` "backward_data"
    (``operand`` the weight, ``shape`` the input's) or "backward_weight" (``operand`` the
    input, ``shape`` the weight's)."""
    key = _call_key(op, grad_out, operand, shape, kw["stride"], kw["padding"], kw["dilation"],
                    kw["groups"], kw["layout"], kw["weight_layout"], kw["padding_mode"],
                    kw["padding_value"])
    setup = _SETUPS.get(key) if key is not None else None
    if setup is not None:  # _call_key keys plain ndarrays only
        return (grad_out, operand) + setup
    data = op == "backward_data"
    name, shape_name = ("weight", "input_shape") if data else ("x", "weight_shape")
    dy, other, dtype, result_dtype = _operands(grad_out, operand, "grad_out", name)
    checked = check_shape4(shape, shape_name)
    geom = (_geometry(checked, other.shape, dtype, kw, shape_name, name) if data
            else _geometry(other.shape, checked, dtype, kw, name, shape_name))
    check_grad_out(dy, geom.output_shape(), kw["layout"], shape_name, shape)
    setup = geom, dtype, result_dtype, _boundary.for_geometry(geom)
    _remember(key, setup)
    return (dy, other) + setup


def conv2d(x: npt.ArrayLike, weight: npt.ArrayLike, bias: Optional[npt.ArrayLike] = None, *,
           stride: IntOrPair = 1, padding: Padding = 0, dilation: IntOrPair = 1, groups: int = 1,
           layout: str = "NCHW", weight_layout: str = "OIHW", padding_mode: str = "zeros",
           padding_value: float = 0.0, algo: str = "auto", out: Optional[Array] = None,
           alpha: float = 1.0, beta: float = 0.0, num_threads: Optional[int] = None) -> Array:
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
        ``"valid"``, ``"same"`` (= ``"same_upper"``, odd extra at the end), ``"same_lower"``
        or ``"full"`` (``dilation * (kernel - 1)`` on each side).
    groups : int
        Divides C and K; ``groups == C`` is depthwise convolution (K = multiplier x C).
    layout, weight_layout : str
    padding_mode : str
        What fills the padding: ``"zeros"``, ``"constant"`` (``padding_value``), or the
        input itself: ``"reflect"`` (d c b | a b c d | c b a, as PyTorch and
        ``numpy.pad(mode="reflect")``; padding smaller than the input), ``"symmetric"``
        (c b a | a b c d | d c b, the edge repeated, as ``numpy.pad``), ``"replicate"``
        (a a | a b c d | d d) or ``"circular"`` (c d | a b c d | a b; padding at most the
        input).  Every gradient is exact for every mode.
    padding_value : float
        The constant of ``padding_mode="constant"``.
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
    key = _call_key("forward", x, weight, None, stride, padding, dilation, groups, layout,
                    weight_layout, padding_mode, padding_value)
    setup = _SETUPS.get(key) if key is not None else None
    if setup is None:
        x, w, dtype, result_dtype = _operands(x, weight, "x", "weight")
        # (make_geometry called directly, not through _geometry's keyword dict: the forward
        # call is the one small calls make most)
        geom = make_geometry(x.shape, w.shape, stride=stride, padding=padding,
                             dilation=dilation, groups=groups, layout=layout,
                             weight_layout=weight_layout, padding_mode=padding_mode,
                             padding_value=padding_value, dtype=dtype)
        setup = geom, dtype, result_dtype, _boundary.for_geometry(geom)
        _remember(key, setup)
    else:  # _call_key keys plain ndarrays only
        x, w = cast(Array, x), cast(Array, weight)
    geom, dtype, result_dtype, boundary = setup
    nthreads = resolve_num_threads(num_threads)
    if type(alpha) is not float or type(beta) is not float:
        alpha, beta = check_scalars(alpha, beta)
    b = None if bias is None else check_bias(bias, geom.K, dtype)
    if out is not None:
        out = check_out(out, geom.output_shape(), result_dtype)
    impl = _dispatch.select(geom, "forward", algo, nthreads)
    return _execute.forward(impl, x, w, b, out, alpha, beta, nthreads, result_dtype,
                            boundary=boundary)


def conv2d_backward_data(grad_out: npt.ArrayLike, weight: npt.ArrayLike,
                         input_shape: Sequence[int], *, stride: IntOrPair = 1,
                         padding: Padding = 0, dilation: IntOrPair = 1, groups: int = 1,
                         layout: str = "NCHW", weight_layout: str = "OIHW",
                         padding_mode: str = "zeros", padding_value: float = 0.0,
                         algo: str = "auto", out: Optional[Array] = None, alpha: float = 1.0,
                         beta: float = 0.0, num_threads: Optional[int] = None) -> Array:
    """Gradient of :func:`conv2d` with respect to its input.

    Parameters
    ----------
    grad_out : array_like
        Gradient of the convolution's output, in ``layout`` order.
    weight : array_like
        The convolution's weight, in ``weight_layout`` order.
    input_shape : sequence of 4 ints
        Shape of the convolution's input in ``layout`` order (resolves strided sizes).
    stride, padding, dilation, groups, layout, weight_layout, padding_mode, padding_value, algo,
    out, alpha, beta, num_threads
        As in :func:`conv2d`.

    Returns
    -------
    ndarray of shape ``input_shape``
    """
    dy, w, geom, dtype, result_dtype, boundary = _gradient_setup(
        "backward_data", grad_out, weight, input_shape, dict(
            stride=stride, padding=padding, dilation=dilation, groups=groups, layout=layout,
            weight_layout=weight_layout, padding_mode=padding_mode, padding_value=padding_value))
    nthreads = resolve_num_threads(num_threads)
    alpha, beta = check_scalars(alpha, beta)
    out = check_out(out, geom.input_shape(), result_dtype)
    impl = _dispatch.select(geom, "backward_data", algo, nthreads)
    return _execute.backward_data(impl, dy, w, out, alpha, beta, nthreads, result_dtype,
                                  boundary=boundary)


def conv2d_backward_weight(grad_out: npt.ArrayLike, x: npt.ArrayLike,
                           weight_shape: Sequence[int], *, stride: IntOrPair = 1,
                           padding: Padding = 0, dilation: IntOrPair = 1, groups: int = 1,
                           layout: str = "NCHW", weight_layout: str = "OIHW",
                           padding_mode: str = "zeros", padding_value: float = 0.0,
                           algo: str = "auto", out: Optional[Array] = None, alpha: float = 1.0,
                           beta: float = 0.0, num_threads: Optional[int] = None) -> Array:
    """Gradient of :func:`conv2d` with respect to its weight.

    Parameters
    ----------
    grad_out : array_like
        Gradient of the convolution's output, in ``layout`` order.
    x : array_like
        The convolution's input, in ``layout`` order.
    weight_shape : sequence of 4 ints
        Shape of the weight in ``weight_layout`` order.
    stride, padding, dilation, groups, layout, weight_layout, padding_mode, padding_value, algo,
    out, alpha, beta, num_threads
        As in :func:`conv2d`.

    Returns
    -------
    ndarray of shape ``weight_shape``
        Summed over the batch; deterministic for a given shape, whatever the thread count.
    """
    dy, xa, geom, dtype, result_dtype, boundary = _gradient_setup(
        "backward_weight", grad_out, x, weight_shape, dict(
            stride=stride, padding=padding, dilation=dilation, groups=groups, layout=layout,
            weight_layout=weight_layout, padding_mode=padding_mode, padding_value=padding_value))
    nthreads = resolve_num_threads(num_threads)
    alpha, beta = check_scalars(alpha, beta)
    out = check_out(out, geom.weight_shape(), result_dtype)
    impl = _dispatch.select(geom, "backward_weight", algo, nthreads)
    return _execute.backward_weight(impl, dy, xa, out, alpha, beta, nthreads, result_dtype,
                                    boundary=boundary)


def conv2d_backward_bias(grad_out: npt.ArrayLike, *, layout: str = "NCHW",
                         out: Optional[Array] = None, alpha: float = 1.0,
                         beta: float = 0.0) -> Array:
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
    alpha, beta = check_scalars(alpha, beta)
    axes = (0, 2, 3) if layout == "NCHW" else (0, 1, 2)
    channels = dy.shape[1] if layout == "NCHW" else dy.shape[3]
    out = check_out(out, (channels,), dy.dtype)
    grad = dy.sum(axis=axes, dtype=np.float64).astype(dy.dtype)
    return _execute.scaled_into(grad, out, alpha, beta)


def conv2d_backward(grad_out: npt.ArrayLike, x: npt.ArrayLike, weight: npt.ArrayLike, *,
                    stride: IntOrPair = 1, padding: Padding = 0, dilation: IntOrPair = 1,
                    groups: int = 1, layout: str = "NCHW", weight_layout: str = "OIHW",
                    padding_mode: str = "zeros",
                    padding_value: float = 0.0, algo: str = "auto",
                    num_threads: Optional[int] = None,
                    need: Union[str, Iterable[str]] = NEEDS) -> Gradients:
    """All gradients of :func:`conv2d` in one call.

    Parameters
    ----------
    grad_out, x, weight : array_like
        Output gradient, input and weight of the convolution.
    stride, padding, dilation, groups, layout, weight_layout, padding_mode, padding_value, algo,
    num_threads
        As in :func:`conv2d`.
    need : sequence of {"data", "weight", "bias"}
        Which gradients to compute.

    Returns
    -------
    (dx, dw, db)
        Entries not in ``need`` are None.
    """
    need = check_need(need)
    kw: _BackwardKeywords = dict(
        stride=stride, padding=padding, dilation=dilation, groups=groups, layout=layout,
        weight_layout=weight_layout, padding_mode=padding_mode, padding_value=padding_value,
        algo=algo, num_threads=num_threads)
    xa = as_float_array(x, "x")
    w = as_float_array(weight, "weight")
    dy = as_float_array(grad_out, "grad_out")
    # Validate everything once, whatever ``need`` asks for, naming the caller's arguments.
    geom = _geometry(xa.shape, w.shape, compute_dtype(xa.dtype, w.dtype), kw, "x", "weight")
    check_grad_out(dy, geom.output_shape(), layout, "x", xa.shape)
    dx = conv2d_backward_data(dy, w, xa.shape, **kw) if "data" in need else None
    dw = conv2d_backward_weight(dy, xa, w.shape, **kw) if "weight" in need else None
    db = conv2d_backward_bias(dy, layout=layout) if "bias" in need else None
    return dx, dw, db


# -- transposed convolution -------------------------------------------------------------------

def conv_transpose2d(x: npt.ArrayLike, weight: npt.ArrayLike,
                     bias: Optional[npt.ArrayLike] = None, *, stride: IntOrPair = 1,
                     padding: Padding = 0, output_padding: IntOrPair = 0,
                     dilation: IntOrPair = 1, groups: int = 1, layout: str = "NCHW",
                     weight_layout: str = "OIHW", padding_mode: str = "zeros",
                     padding_value: float = 0.0, algo: str = "auto",
                     output_shape: Optional[Sequence[int]] = None,
                     out: Optional[Array] = None, alpha: float = 1.0, beta: float = 0.0,
                     num_threads: Optional[int] = None) -> Array:
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
    padding_mode : str
        The mode of the convolution this one transposes (see :func:`conv2d`): the result is
        that convolution's data gradient, its adjoint.  Padded pixels that copy an output
        pixel add their value onto it (with ``"circular"``, the periodic transposed
        convolution).  ``"constant"`` transposes to the same as ``"zeros"`` (the adjoint of
        the convolution's linear part).
    padding_value : float
        Accepted for symmetry with :func:`conv2d` and checked by its rules; the adjoint of
        the linear part does not depend on it.
    groups, layout, weight_layout, algo, out, alpha, beta, num_threads
        As in :func:`conv2d`.

    Returns
    -------
    ndarray
        Output size ``(H-1)*stride - pad_top - pad_bottom + dilation*(R-1) + output_padding + 1``.
    """
    xa, w, dtype, result_dtype = _operands(x, weight, "x", "weight")
    geom, extra = make_transpose_geometry(xa.shape, w.shape, dtype, stride=stride, padding=padding,
                                          output_padding=output_padding, dilation=dilation,
                                          groups=groups, layout=layout, weight_layout=weight_layout,
                                          output_shape=output_shape, padding_mode=padding_mode,
                                          padding_value=padding_value)
    nthreads = resolve_num_threads(num_threads)
    alpha, beta = check_scalars(alpha, beta)
    b = check_bias(bias, geom.C, dtype)
    out = check_out(out, geom.input_shape(), result_dtype)
    impl = _dispatch.select(geom, "backward_data", algo, nthreads)
    return _execute.backward_data(impl, xa, w, out, alpha, beta, nthreads, result_dtype,
                                  bias=b, extra=extra, boundary=_boundary.for_geometry(geom))


def conv_transpose2d_backward_data(grad_out: npt.ArrayLike, weight: npt.ArrayLike,
                                   input_shape: Sequence[int], *, stride: IntOrPair = 1,
                                   padding: Padding = 0, output_padding: IntOrPair = 0,
                                   dilation: IntOrPair = 1, groups: int = 1,
                                   layout: str = "NCHW", weight_layout: str = "OIHW",
                                   padding_mode: str = "zeros", padding_value: float = 0.0,
                                   algo: str = "auto",
                                   output_shape: Optional[Sequence[int]] = None,
                                   out: Optional[Array] = None, alpha: float = 1.0,
                                   beta: float = 0.0, num_threads: Optional[int] = None) -> Array:
    """Gradient of :func:`conv_transpose2d` with respect to its input ``x``.

    Parameters
    ----------
    grad_out : array_like
        Gradient of the transposed convolution's output.
    weight : array_like
        Its weight, as for :func:`conv_transpose2d`.
    input_shape : sequence of 4 ints
        Shape of its input ``x`` in ``layout`` order.
    stride, padding, output_padding, dilation, groups, layout, weight_layout, padding_mode,
    padding_value, algo,
    output_shape, out, alpha, beta, num_threads
        As in :func:`conv_transpose2d`.

    Returns
    -------
    ndarray of shape ``input_shape``
    """
    dy, w, dtype, result_dtype = _operands(grad_out, weight, "grad_out", "weight")
    geom, extra = make_transpose_geometry(check_shape4(input_shape, "input_shape"), w.shape, dtype,
                                          stride=stride, padding=padding,
                                          output_padding=output_padding, dilation=dilation,
                                          groups=groups, layout=layout, weight_layout=weight_layout,
                                          output_shape=output_shape, padding_mode=padding_mode,
                                          padding_value=padding_value)
    check_transpose_grad_out(dy, geom, layout)
    nthreads = resolve_num_threads(num_threads)
    alpha, beta = check_scalars(alpha, beta)
    out = check_out(out, check_shape4(input_shape, "input_shape"), result_dtype)
    impl = _dispatch.select(geom, "forward", algo, nthreads)
    # the forward convolution yields `extra` rows / cols that x never had: cropped
    return _execute.forward(impl, dy, w, None, out, alpha, beta, nthreads, result_dtype,
                            extra=extra, boundary=_boundary.for_geometry(geom))


def conv_transpose2d_backward_weight(grad_out: npt.ArrayLike, x: npt.ArrayLike,
                                     weight_shape: Sequence[int], *, stride: IntOrPair = 1,
                                     padding: Padding = 0, output_padding: IntOrPair = 0,
                                     dilation: IntOrPair = 1, groups: int = 1,
                                     layout: str = "NCHW", weight_layout: str = "OIHW",
                                     padding_mode: str = "zeros", padding_value: float = 0.0,
                                     algo: str = "auto",
                                     output_shape: Optional[Sequence[int]] = None,
                                     out: Optional[Array] = None, alpha: float = 1.0,
                                     beta: float = 0.0,
                                     num_threads: Optional[int] = None) -> Array:
    """Gradient of :func:`conv_transpose2d` with respect to its weight.

    Parameters
    ----------
    grad_out : array_like
        Gradient of the transposed convolution's output.
    x : array_like
        Its input.
    weight_shape : sequence of 4 ints
        (C_in, K/groups, R, S) for ``"OIHW"`` or (R, S, K/groups, C_in) for ``"HWIO"``.
    stride, padding, output_padding, dilation, groups, layout, weight_layout, padding_mode,
    padding_value, algo,
    output_shape, out, alpha, beta, num_threads
        As in :func:`conv_transpose2d`.

    Returns
    -------
    ndarray of shape ``weight_shape``
    """
    dy, xa, dtype, result_dtype = _operands(grad_out, x, "grad_out", "x")
    geom, extra = make_transpose_geometry(xa.shape, check_shape4(weight_shape, "weight_shape"),
                                          dtype, stride=stride, padding=padding,
                                          output_padding=output_padding, dilation=dilation,
                                          groups=groups, layout=layout, weight_layout=weight_layout,
                                          output_shape=output_shape, padding_mode=padding_mode,
                                          padding_value=padding_value)
    check_transpose_grad_out(dy, geom, layout)
    nthreads = resolve_num_threads(num_threads)
    alpha, beta = check_scalars(alpha, beta)
    out = check_out(out, geom.weight_shape(), result_dtype)
    impl = _dispatch.select(geom, "backward_weight", algo, nthreads)
    # The transposed conv's output gradient plays the forward input, its input the forward
    # output gradient.
    return _execute.backward_weight(impl, xa, dy, out, alpha, beta, nthreads, result_dtype,
                                    extra=extra, boundary=_boundary.for_geometry(geom))


def conv_transpose2d_backward(grad_out: npt.ArrayLike, x: npt.ArrayLike, weight: npt.ArrayLike,
                              *, stride: IntOrPair = 1, padding: Padding = 0,
                              output_padding: IntOrPair = 0, dilation: IntOrPair = 1,
                              groups: int = 1, layout: str = "NCHW", weight_layout: str = "OIHW",
                              padding_mode: str = "zeros", padding_value: float = 0.0,
                              algo: str = "auto",
                              output_shape: Optional[Sequence[int]] = None,
                              num_threads: Optional[int] = None,
                              need: Union[str, Iterable[str]] = NEEDS) -> Gradients:
    """All gradients of :func:`conv_transpose2d` in one call.

    Parameters
    ----------
    grad_out, x, weight : array_like
    stride, padding, output_padding, dilation, groups, layout, weight_layout, padding_mode,
    padding_value, algo,
    output_shape, num_threads
        As in :func:`conv_transpose2d`.
    need : sequence of {"data", "weight", "bias"}

    Returns
    -------
    (dx, dw, db)
        Entries not in ``need`` are None.
    """
    need = check_need(need)
    kw: _TransposeKeywords = dict(
        stride=stride, padding=padding, output_padding=output_padding, dilation=dilation,
        groups=groups, layout=layout, weight_layout=weight_layout, algo=algo,
        output_shape=output_shape, padding_mode=padding_mode, padding_value=padding_value,
        num_threads=num_threads)
    xa = as_float_array(x, "x")
    w = as_float_array(weight, "weight")
    dy = as_float_array(grad_out, "grad_out")
    geom_kw = cast("_TransposeGeometryKeywords",
                   {k: v for k, v in kw.items() if k not in ("algo", "num_threads")})
    geom, _ = make_transpose_geometry(xa.shape, w.shape, compute_dtype(xa.dtype, w.dtype),
                                      **geom_kw)
    check_transpose_grad_out(dy, geom, layout)
    dx = conv_transpose2d_backward_data(dy, w, xa.shape, **kw) if "data" in need else None
    dw = conv_transpose2d_backward_weight(dy, xa, w.shape, **kw) if "weight" in need else None
    db = conv2d_backward_bias(dy, layout=layout) if "bias" in need else None
    return dx, dw, db
