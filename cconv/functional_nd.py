"""1-D and 3-D convolution: the public functions, with the keywords of the 2-D ones.

Each function validates its arguments into an ``NdGeometry`` (``_nd_geometry``; messages
speak of the caller's rank and layouts), then runs the problem on the 2-D machinery
(``_nd_execute``): 1-D as 2-D with a height of 1 (views, no copies), 3-D as a loop over
depth taps, each a 2-D convolution of a batch of depth slices, or (forward and stride-1
data gradient, zero padding, where ``auto`` measured it faster or for ``algo="direct"``) on
the direct tile kernels with the depth taps folded into their reduction
(``algorithms.direct_volume``).  Transposed convolution is the data gradient of the
convolution it transposes, as in 2-D.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from . import _boundary as _boundary_module
from . import _dispatch as _dispatch_module
from . import _execute as _execute_module
from . import _geometry as _geometry_module
from . import _threads as _threads_module
from . import algorithms as _algorithms_module
from . import functional as _functional_module
from ._nd_execute import (FunctionalOps, depthwise_backward_data_ndhwc, depthwise_forward_ndhwc,
                          drop, folded_backward_data, folded_forward, folds_depth, gather,
                          keywords_2d, lift, lift_shape, reduce, scatter, tap_geometry_2d)
from ._nd_geometry import (LAYOUTS, NdGeometry, check_grad_out, check_shape,
                           check_transpose_grad_out, make_nd_geometry,
                           make_nd_transpose_geometry)

# cconv's 2-D modules carry no type hints: Any-typed aliases keep ``mypy --strict`` quiet.
_F2: Any = _functional_module
_g2: Any = _geometry_module
_boundary: Any = _boundary_module
_dispatch: Any = _dispatch_module
_execute: Any = _execute_module
_threads: Any = _threads_module
_algorithms: Any = _algorithms_module

__all__ = ["conv1d", "conv1d_backward_data", "conv1d_backward_weight", "conv1d_backward_bias",
           "conv1d_backward", "conv_transpose1d", "conv_transpose1d_backward_data",
           "conv_transpose1d_backward_weight", "conv_transpose1d_backward",
           "conv3d", "conv3d_backward_data", "conv3d_backward_weight", "conv3d_backward_bias",
           "conv3d_backward", "conv_transpose3d", "conv_transpose3d_backward_data",
           "conv_transpose3d_backward_weight", "conv_transpose3d_backward"]

Array = np.ndarray[Any, Any]
IntOrInts = Union[int, Sequence[int]]
Padding = Union[int, str, Sequence[Any]]
Grads = Tuple[Optional[Array], Optional[Array], Optional[Array]]
NEEDS: Tuple[str, ...] = tuple(_g2.NEEDS)


# -- shared steps ----------------------------------------------------------------------------

def _operands(a: Any, b: Any, a_name: str,
              b_name: str) -> Tuple[Array, Array, np.dtype[Any], np.dtype[Any]]:
    """Both operands as arrays, their compute dtype and the result dtype."""
    x = _g2.as_float_array(a, a_name)
    w = _g2.as_float_array(b, b_name)
    return x, w, _g2.compute_dtype(x.dtype, w.dtype), _g2.result_type(x.dtype, w.dtype)


def _geometry(rank: int, x_shape: Any, w_shape: Any, dtype: np.dtype[Any], kw: Dict[str, Any],
              x_name: str, w_name: str) -> NdGeometry:
    return make_nd_geometry(x_shape, w_shape, dtype=dtype, x_name=x_name, w_name=w_name,
                            rank=rank, **kw)


def _transpose_geometry(rank: int, x_shape: Any, w_shape: Any, dtype: np.dtype[Any],
                        kw: Dict[str, Any], x_name: str = "x",
                        w_name: str = "weight") -> Tuple[NdGeometry, Tuple[int, ...]]:
    return make_nd_transpose_geometry(x_shape, w_shape, dtype, rank=rank, x_name=x_name,
                                      w_name=w_name, **kw)


def _call_args(algo: Any, num_threads: Any, alpha: Any, beta: Any, geom: NdGeometry,
               op_2d: str) -> Tuple[str, int, float, float]:
    """The per-call arguments, checked before any work.  ``op_2d``: the 2-D pass the call
    runs, which a named ``algo`` must be able to run."""
    _dispatch.check_algo(algo)
    if algo not in ("auto", "find"):
        reason = _algorithms.why_not(algo, tap_geometry_2d(geom), op_2d)
        if reason:
            how = ("as a 2-D convolution of height 1" if geom.rank == 1
                   else "as 2-D convolutions, one per depth tap")
            raise ValueError(f"algo={algo!r} cannot run this convolution (run {how}): "
                             f"{reason}")
    nthreads = int(_threads.resolve_num_threads(num_threads))
    a, b = _g2.check_scalars(alpha, beta)
    return str(algo), nthreads, float(a), float(b)


def _setup_key(op: str, rank: int, a: Any, b: Any, shape: Any,
               kw: Dict[str, Any]) -> Optional[Tuple[object, ...]]:
    """The key under which a call of pass ``op`` in ``rank`` dimensions keeps its setup
    (``functional._call_key``'s rules; None: not kept)."""
    return _F2._call_key(f"{op}/{rank}d", a, b, shape, kw["stride"],  # type: ignore[no-any-return]
                         kw["padding"], kw["dilation"], kw["groups"], kw["layout"],
                         kw["weight_layout"], kw["padding_mode"], kw["padding_value"])


def _lift_setup(geom: NdGeometry, x_shape: Tuple[int, ...], w_shape: Tuple[int, ...],
                dtype: np.dtype[Any]) -> Tuple[Any, Any]:
    """For a 1-D problem, the 2-D geometry and padding-mode Boundary its lift runs (what
    ``conv2d`` derives from the lifted arguments, so that its passes run without a second
    round of checks); ``(None, None)`` for other ranks."""
    if geom.rank != 1:
        return None, None
    g2 = _g2.make_geometry(lift_shape(x_shape, geom.layout),
                           lift_shape(w_shape, geom.weight_layout), dtype=dtype,
                           **keywords_2d(geom))
    return g2, _boundary.for_geometry(g2)


def _lifted(result: Array, out: Optional[Array], layout: str) -> Array:
    """The 1-D view of a lifted 2-D result (``out`` itself when given)."""
    return out if out is not None else drop(result, layout)


# -- the rank-generic passes -----------------------------------------------------------------

def _conv(rank: int, x: Any, weight: Any, bias: Any, kw: Dict[str, Any], algo: Any,
          out: Optional[Array], alpha: Any, beta: Any, num_threads: Any) -> Array:
    # the operands' checks, the geometry and the 2-D keywords, remembered per argument
    # combination as the 2-D functions do (a third of a small 1-D call)
    key = _setup_key("forward", rank, x, weight, None, kw)
    setup = _F2._SETUPS.get(key) if key is not None else None
    if setup is None:
        xa, w, dtype, result_dtype = _operands(x, weight, "x", "weight")
        geom = _geometry(rank, xa.shape, w.shape, dtype, kw, "x", "weight")
        setup = (geom, dtype, result_dtype) + _lift_setup(geom, xa.shape, w.shape, dtype)
        _F2._remember(key, setup)
    else:
        xa, w = x, weight
    geom, dtype, result_dtype, geom2, boundary2 = setup
    algo, nthreads, alpha, beta = _call_args(algo, num_threads, alpha, beta,
                                             geom, "forward")
    b = _g2.check_bias(bias, geom.K, dtype)
    out = _g2.check_out(out, geom.output_shape(), result_dtype)
    if rank == 1:  # conv2d's pass on the lifted views, its checks done above
        lay, wlay = geom.layout, geom.weight_layout
        impl = _dispatch.select(geom2, "forward", algo, nthreads)
        r = _execute.forward(impl, lift(xa, lay), lift(w, wlay), b, lift(out, lay), alpha,
                             beta, nthreads, result_dtype, boundary=boundary2)
        return _lifted(r, out, lay)
    fast = depthwise_forward_ndhwc(geom, xa, w, b, out, alpha, beta, result_dtype, algo,
                                   nthreads)
    if fast is not None:
        return fast
    if folds_depth(geom, algo, "forward"):
        return folded_forward(geom, xa, w, b, out, alpha, beta, result_dtype, nthreads)
    return gather(geom, FunctionalOps(geom, False, algo, nthreads), xa, w, b,
                  geom.output_shape(), out, alpha, beta, result_dtype)


def _conv_backward_data(rank: int, grad_out: Any, weight: Any, input_shape: Any,
                        kw: Dict[str, Any], algo: Any, out: Optional[Array], alpha: Any,
                        beta: Any, num_threads: Any) -> Array:
    key = _setup_key("backward_data", rank, grad_out, weight, input_shape, kw)
    setup = _F2._SETUPS.get(key) if key is not None else None
    if setup is None:
        dy, w, dtype, result_dtype = _operands(grad_out, weight, "grad_out", "weight")
        geom = _geometry(rank, input_shape, w.shape, dtype, kw, "input_shape", "weight")
        check_grad_out(dy, geom, "input_shape", geom.input_shape())
        setup = (geom, dtype, result_dtype) + _lift_setup(geom, geom.input_shape(), w.shape,
                                                          dtype)
        _F2._remember(key, setup)
    else:
        dy, w = grad_out, weight
    geom, dtype, result_dtype, geom2, boundary2 = setup
    shape = geom.input_shape()
    algo, nthreads, alpha, beta = _call_args(algo, num_threads, alpha, beta,
                                             geom, "backward_data")
    out = _g2.check_out(out, shape, result_dtype)
    if rank == 1:  # conv2d_backward_data's pass on the lifted views
        lay, wlay = geom.layout, geom.weight_layout
        impl = _dispatch.select(geom2, "backward_data", algo, nthreads)
        r = _execute.backward_data(impl, lift(dy, lay), lift(w, wlay), lift(out, lay), alpha,
                                   beta, nthreads, result_dtype, boundary=boundary2)
        return _lifted(r, out, lay)
    fast = depthwise_backward_data_ndhwc(geom, dy, w, out, alpha, beta, result_dtype, algo,
                                         nthreads)
    if fast is not None:
        return fast
    if folds_depth(geom, algo, "backward_data"):
        folded = folded_backward_data(geom, dy, w, out, alpha, beta, result_dtype, nthreads)
        if folded is not None:
            return folded
    return scatter(geom, FunctionalOps(geom, False, algo, nthreads), dy, w, None, out, alpha,
                   beta, result_dtype)


def _conv_backward_weight(rank: int, grad_out: Any, x: Any, weight_shape: Any,
                          kw: Dict[str, Any], algo: Any, out: Optional[Array], alpha: Any,
                          beta: Any, num_threads: Any) -> Array:
    key = _setup_key("backward_weight", rank, grad_out, x, weight_shape, kw)
    setup = _F2._SETUPS.get(key) if key is not None else None
    if setup is None:
        dy, xa, dtype, result_dtype = _operands(grad_out, x, "grad_out", "x")
        geom = _geometry(rank, xa.shape, weight_shape, dtype, kw, "x", "weight_shape")
        check_grad_out(dy, geom, "weight_shape", geom.weight_shape())
        setup = (geom, dtype, result_dtype) + _lift_setup(geom, xa.shape, geom.weight_shape(),
                                                          dtype)
        _F2._remember(key, setup)
    else:
        dy, xa = grad_out, x
    geom, dtype, result_dtype, geom2, boundary2 = setup
    shape = geom.weight_shape()
    algo, nthreads, alpha, beta = _call_args(algo, num_threads, alpha, beta,
                                             geom, "backward_weight")
    out = _g2.check_out(out, shape, result_dtype)
    if rank == 1:  # conv2d_backward_weight's pass on the lifted views
        lay, wlay = geom.layout, geom.weight_layout
        impl = _dispatch.select(geom2, "backward_weight", algo, nthreads)
        r = _execute.backward_weight(impl, lift(dy, lay), lift(xa, lay), lift(out, wlay),
                                     alpha, beta, nthreads, result_dtype, boundary=boundary2)
        return _lifted(r, out, wlay)
    return reduce(geom, FunctionalOps(geom, False, algo, nthreads), dy, xa, out, alpha, beta,
                  result_dtype)


def _backward_bias(rank: int, grad_out: Any, layout: Any, out: Optional[Array], alpha: Any,
                   beta: Any) -> Array:
    _g2.check_choice(layout, "layout", LAYOUTS[rank])
    dy = _g2.as_float_array(grad_out, "grad_out")
    check_shape(dy.shape, "grad_out", layout)
    a, b = _g2.check_scalars(alpha, beta)
    last = layout.endswith("C")
    axes = tuple(range(dy.ndim - 1)) if last else (0, *range(2, dy.ndim))
    channels = dy.shape[-1] if last else dy.shape[1]
    out = _g2.check_out(out, (channels,), dy.dtype)
    grad = dy.sum(axis=axes, dtype=np.float64).astype(dy.dtype)
    result: Array = _execute.scaled_into(grad, out, a, b)
    return result


def _conv_backward(rank: int, grad_out: Any, x: Any, weight: Any, kw: Dict[str, Any],
                   algo: Any, num_threads: Any, need: Any) -> Grads:
    need = _g2.check_need(need)
    xa = _g2.as_float_array(x, "x")
    w = _g2.as_float_array(weight, "weight")
    dy = _g2.as_float_array(grad_out, "grad_out")
    # Validate everything once, whatever ``need`` asks for, naming the caller's arguments.
    geom = _geometry(rank, xa.shape, w.shape, _g2.compute_dtype(xa.dtype, w.dtype), kw, "x",
                     "weight")
    check_grad_out(dy, geom, "x", xa.shape)
    call = dict(algo=algo, out=None, alpha=1.0, beta=0.0, num_threads=num_threads)
    dx = _conv_backward_data(rank, dy, w, xa.shape, kw, **call) if "data" in need else None
    dw = _conv_backward_weight(rank, dy, xa, w.shape, kw, **call) if "weight" in need else None
    db = (_backward_bias(rank, dy, kw["layout"], None, 1.0, 0.0) if "bias" in need else None)
    return dx, dw, db


def _transpose(rank: int, x: Any, weight: Any, bias: Any, kw: Dict[str, Any], algo: Any,
               out: Optional[Array], alpha: Any, beta: Any, num_threads: Any) -> Array:
    xa, w, dtype, result_dtype = _operands(x, weight, "x", "weight")
    geom, _ = _transpose_geometry(rank, xa.shape, w.shape, dtype, kw)
    algo, nthreads, alpha, beta = _call_args(algo, num_threads, alpha, beta,
                                             geom, "backward_data")
    b = _g2.check_bias(bias, geom.C, dtype)
    out = _g2.check_out(out, geom.input_shape(), result_dtype)
    if rank == 1:
        lay, wlay = geom.layout, geom.weight_layout
        r = _F2.conv_transpose2d(lift(xa, lay), lift(w, wlay), b,
                                 output_shape=lift_shape(geom.input_shape(), lay),
                                 out=lift(out, lay), alpha=alpha, beta=beta, algo=algo,
                                 num_threads=nthreads, **keywords_2d(geom, transposed=True))
        return _lifted(r, out, lay)
    return scatter(geom, FunctionalOps(geom, True, algo, nthreads), xa, w, b, out, alpha, beta,
                   result_dtype)


def _transpose_backward_data(rank: int, grad_out: Any, weight: Any, input_shape: Any,
                             kw: Dict[str, Any], algo: Any, out: Optional[Array], alpha: Any,
                             beta: Any, num_threads: Any) -> Array:
    dy, w, dtype, result_dtype = _operands(grad_out, weight, "grad_out", "weight")
    geom, _ = _transpose_geometry(rank, input_shape, w.shape, dtype, kw, "input_shape")
    shape = check_shape(input_shape, "input_shape", geom.layout)
    check_transpose_grad_out(dy, geom)
    algo, nthreads, alpha, beta = _call_args(algo, num_threads, alpha, beta,
                                             geom, "forward")
    out = _g2.check_out(out, shape, result_dtype)
    if rank == 1:
        lay, wlay = geom.layout, geom.weight_layout
        r = _F2.conv_transpose2d_backward_data(
            lift(dy, lay), lift(w, wlay), lift_shape(shape, lay),
            output_shape=lift_shape(geom.input_shape(), lay), out=lift(out, lay), alpha=alpha,
            beta=beta, algo=algo, num_threads=nthreads, **keywords_2d(geom, transposed=True))
        return _lifted(r, out, lay)
    return gather(geom, FunctionalOps(geom, True, algo, nthreads), dy, w, None, shape, out,
                  alpha, beta, result_dtype)


def _transpose_backward_weight(rank: int, grad_out: Any, x: Any, weight_shape: Any,
                               kw: Dict[str, Any], algo: Any, out: Optional[Array], alpha: Any,
                               beta: Any, num_threads: Any) -> Array:
    dy, xa, dtype, result_dtype = _operands(grad_out, x, "grad_out", "x")
    geom, _ = _transpose_geometry(rank, xa.shape, weight_shape, dtype, kw, w_name="weight_shape")
    shape = geom.weight_shape()
    check_transpose_grad_out(dy, geom)
    algo, nthreads, alpha, beta = _call_args(algo, num_threads, alpha, beta,
                                             geom, "backward_weight")
    out = _g2.check_out(out, shape, result_dtype)
    if rank == 1:
        lay, wlay = geom.layout, geom.weight_layout
        r = _F2.conv_transpose2d_backward_weight(
            lift(dy, lay), lift(xa, lay), lift_shape(shape, wlay),
            output_shape=lift_shape(geom.input_shape(), lay), out=lift(out, wlay), alpha=alpha,
            beta=beta, algo=algo, num_threads=nthreads, **keywords_2d(geom, transposed=True))
        return _lifted(r, out, wlay)
    # The transposed convolution's input is the forward output side, its output gradient
    # the forward input side.
    return reduce(geom, FunctionalOps(geom, True, algo, nthreads), xa, dy, out, alpha, beta,
                  result_dtype)


def _transpose_backward(rank: int, grad_out: Any, x: Any, weight: Any, kw: Dict[str, Any],
                        algo: Any, num_threads: Any, need: Any) -> Grads:
    need = _g2.check_need(need)
    xa = _g2.as_float_array(x, "x")
    w = _g2.as_float_array(weight, "weight")
    dy = _g2.as_float_array(grad_out, "grad_out")
    geom, _ = _transpose_geometry(rank, xa.shape, w.shape, _g2.compute_dtype(xa.dtype, w.dtype),
                                  kw)
    check_transpose_grad_out(dy, geom)
    call = dict(algo=algo, out=None, alpha=1.0, beta=0.0, num_threads=num_threads)
    dx = (_transpose_backward_data(rank, dy, w, xa.shape, kw, **call) if "data" in need
          else None)
    dw = (_transpose_backward_weight(rank, dy, xa, w.shape, kw, **call) if "weight" in need
          else None)
    db = _backward_bias(rank, dy, kw["layout"], None, 1.0, 0.0) if "bias" in need else None
    return dx, dw, db


def _kw(stride: Any, padding: Any, dilation: Any, groups: Any, layout: Any, weight_layout: Any,
        padding_mode: Any, padding_value: Any) -> Dict[str, Any]:
    return dict(stride=stride, padding=padding, dilation=dilation, groups=groups, layout=layout,
                weight_layout=weight_layout, padding_mode=padding_mode,
                padding_value=padding_value)


def _tkw(stride: Any, padding: Any, output_padding: Any, dilation: Any, groups: Any,
         layout: Any, weight_layout: Any, padding_mode: Any, output_shape: Any) -> Dict[str, Any]:
    return dict(stride=stride, padding=padding, output_padding=output_padding,
                dilation=dilation, groups=groups, layout=layout, weight_layout=weight_layout,
                padding_mode=padding_mode, output_shape=output_shape)


# -- 1-D --------------------------------------------------------------------------------------

def conv1d(x: Any, weight: Any, bias: Any = None, *, stride: IntOrInts = 1, padding: Padding = 0,
           dilation: IntOrInts = 1, groups: int = 1, layout: str = "NCW",
           weight_layout: str = "OIW", padding_mode: str = "zeros", padding_value: float = 0.0,
           algo: str = "auto", out: Optional[Array] = None, alpha: float = 1.0,
           beta: float = 0.0, num_threads: Optional[int] = None) -> Array:
    """1-D convolution (cross-correlation, as in PyTorch and TensorFlow).

    Runs as a 2-D convolution of height 1 (views of the arrays, no copies), with every
    keyword of :func:`cconv.conv2d`.

    Parameters
    ----------
    x : array_like
        Input, (N, C, W) for ``layout="NCW"`` or (N, W, C) for ``"NWC"``.
    weight : array_like
        (K, C/groups, kW) for ``weight_layout="OIW"`` or (kW, C/groups, K) for ``"WIO"``.
    bias : array_like, optional
        (K,), added to every output pixel.
    stride, dilation : int or (int,)
        Positive; dilation 1 means none.
    padding : int, (int,), (begin, end), ((begin, end),) or str
        ``"valid"``, ``"same"`` (= ``"same_upper"``, odd extra at the end),
        ``"same_lower"`` or ``"full"`` (``dilation * (kW - 1)`` on each side).
    groups : int
        Divides C and K; ``groups == C`` is depthwise convolution.
    layout, weight_layout : str
    padding_mode : str
        ``"zeros"``, ``"constant"`` (``padding_value``), ``"reflect"``, ``"symmetric"``,
        ``"replicate"`` or ``"circular"``, as in :func:`cconv.conv2d`.
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
        (N, K, OW) or (N, OW, K), of dtype ``numpy.result_type(x, weight)``; float16 is
        computed in float32.
    """
    kw = _kw(stride, padding, dilation, groups, layout, weight_layout, padding_mode,
             padding_value)
    return _conv(1, x, weight, bias, kw, algo, out, alpha, beta, num_threads)


def conv1d_backward_data(grad_out: Any, weight: Any, input_shape: Sequence[int], *,
                         stride: IntOrInts = 1, padding: Padding = 0, dilation: IntOrInts = 1,
                         groups: int = 1, layout: str = "NCW", weight_layout: str = "OIW",
                         padding_mode: str = "zeros", padding_value: float = 0.0,
                         algo: str = "auto", out: Optional[Array] = None, alpha: float = 1.0,
                         beta: float = 0.0, num_threads: Optional[int] = None) -> Array:
    """Gradient of :func:`conv1d` with respect to its input.

    Parameters
    ----------
    grad_out : array_like
        Gradient of the convolution's output, in ``layout`` order.
    weight : array_like
        The convolution's weight, in ``weight_layout`` order.
    input_shape : sequence of 3 ints
        Shape of the convolution's input in ``layout`` order.
    stride, padding, dilation, groups, layout, weight_layout, padding_mode, padding_value, algo,
    out, alpha, beta, num_threads
        As in :func:`conv1d`.

    Returns
    -------
    ndarray of shape ``input_shape``
    """
    kw = _kw(stride, padding, dilation, groups, layout, weight_layout, padding_mode,
             padding_value)
    return _conv_backward_data(1, grad_out, weight, input_shape, kw, algo, out, alpha, beta,
                               num_threads)


def conv1d_backward_weight(grad_out: Any, x: Any, weight_shape: Sequence[int], *,
                           stride: IntOrInts = 1, padding: Padding = 0, dilation: IntOrInts = 1,
                           groups: int = 1, layout: str = "NCW", weight_layout: str = "OIW",
                           padding_mode: str = "zeros", padding_value: float = 0.0,
                           algo: str = "auto", out: Optional[Array] = None, alpha: float = 1.0,
                           beta: float = 0.0, num_threads: Optional[int] = None) -> Array:
    """Gradient of :func:`conv1d` with respect to its weight.

    Parameters
    ----------
    grad_out : array_like
        Gradient of the convolution's output, in ``layout`` order.
    x : array_like
        The convolution's input, in ``layout`` order.
    weight_shape : sequence of 3 ints
        Shape of the weight in ``weight_layout`` order.
    stride, padding, dilation, groups, layout, weight_layout, padding_mode, padding_value, algo,
    out, alpha, beta, num_threads
        As in :func:`conv1d`.

    Returns
    -------
    ndarray of shape ``weight_shape``
        Summed over the batch; deterministic for a given shape, whatever the thread count.
    """
    kw = _kw(stride, padding, dilation, groups, layout, weight_layout, padding_mode,
             padding_value)
    return _conv_backward_weight(1, grad_out, x, weight_shape, kw, algo, out, alpha, beta,
                                 num_threads)


def conv1d_backward_bias(grad_out: Any, *, layout: str = "NCW", out: Optional[Array] = None,
                         alpha: float = 1.0, beta: float = 0.0) -> Array:
    """Gradient of :func:`conv1d` with respect to its bias: ``grad_out`` summed over N, W.

    Parameters
    ----------
    grad_out : array_like
        3-D, in ``layout`` order.
    layout : str
    out, alpha, beta
        As in :func:`conv1d`.

    Returns
    -------
    ndarray of shape (K,)
        Accumulated in float64, returned in ``grad_out``'s dtype.
    """
    return _backward_bias(1, grad_out, layout, out, alpha, beta)


def conv1d_backward(grad_out: Any, x: Any, weight: Any, *, stride: IntOrInts = 1,
                    padding: Padding = 0, dilation: IntOrInts = 1, groups: int = 1,
                    layout: str = "NCW", weight_layout: str = "OIW", padding_mode: str = "zeros",
                    padding_value: float = 0.0, algo: str = "auto",
                    num_threads: Optional[int] = None, need: Sequence[str] = NEEDS) -> Grads:
    """All gradients of :func:`conv1d` in one call.

    Parameters
    ----------
    grad_out, x, weight : array_like
        Output gradient, input and weight of the convolution.
    stride, padding, dilation, groups, layout, weight_layout, padding_mode, padding_value, algo,
    num_threads
        As in :func:`conv1d`.
    need : sequence of {"data", "weight", "bias"}
        Which gradients to compute.

    Returns
    -------
    (dx, dw, db)
        Entries not in ``need`` are None.
    """
    kw = _kw(stride, padding, dilation, groups, layout, weight_layout, padding_mode,
             padding_value)
    return _conv_backward(1, grad_out, x, weight, kw, algo, num_threads, need)


def conv_transpose1d(x: Any, weight: Any, bias: Any = None, *, stride: IntOrInts = 1,
                     padding: Padding = 0, output_padding: IntOrInts = 0,
                     dilation: IntOrInts = 1, groups: int = 1, layout: str = "NCW",
                     weight_layout: str = "OIW", padding_mode: str = "zeros",
                     algo: str = "auto", output_shape: Optional[Sequence[int]] = None,
                     out: Optional[Array] = None, alpha: float = 1.0, beta: float = 0.0,
                     num_threads: Optional[int] = None) -> Array:
    """Transposed 1-D convolution (the gradient of :func:`conv1d` w.r.t. its input), as PyTorch.

    Parameters
    ----------
    x : array_like
        (N, C_in, W) or (N, W, C_in).
    weight : array_like
        (C_in, K/groups, kW) for ``"OIW"`` or (kW, K/groups, C_in) for ``"WIO"``.
    bias : array_like, optional
        (K,).
    stride, dilation : int or (int,)
    padding : int, (int,), (begin, end), ((begin, end),) or "valid"
        Removed from the full output, as in PyTorch.
    output_padding : int or (int,)
        Extra outputs at the end, smaller than the stride or the dilation.
    output_shape : sequence of 3 ints, optional
        Full output shape in ``layout`` order, instead of ``output_padding``.
    padding_mode : str
        The mode of the convolution this one transposes (see :func:`cconv.conv_transpose2d`).
    groups, layout, weight_layout, algo, out, alpha, beta, num_threads
        As in :func:`conv1d`.

    Returns
    -------
    ndarray
        Output width ``(W-1)*stride - pad_begin - pad_end + dilation*(kW-1) +
        output_padding + 1``.
    """
    kw = _tkw(stride, padding, output_padding, dilation, groups, layout, weight_layout,
              padding_mode, output_shape)
    return _transpose(1, x, weight, bias, kw, algo, out, alpha, beta, num_threads)


def conv_transpose1d_backward_data(grad_out: Any, weight: Any, input_shape: Sequence[int], *,
                                   stride: IntOrInts = 1, padding: Padding = 0,
                                   output_padding: IntOrInts = 0, dilation: IntOrInts = 1,
                                   groups: int = 1, layout: str = "NCW",
                                   weight_layout: str = "OIW", padding_mode: str = "zeros",
                                   algo: str = "auto",
                                   output_shape: Optional[Sequence[int]] = None,
                                   out: Optional[Array] = None, alpha: float = 1.0,
                                   beta: float = 0.0, num_threads: Optional[int] = None) -> Array:
    """Gradient of :func:`conv_transpose1d` with respect to its input ``x``.

    Parameters
    ----------
    grad_out : array_like
        Gradient of the transposed convolution's output.
    weight : array_like
        Its weight, as for :func:`conv_transpose1d`.
    input_shape : sequence of 3 ints
        Shape of its input ``x`` in ``layout`` order.
    stride, padding, output_padding, dilation, groups, layout, weight_layout, padding_mode, algo,
    output_shape, out, alpha, beta, num_threads
        As in :func:`conv_transpose1d`.

    Returns
    -------
    ndarray of shape ``input_shape``
    """
    kw = _tkw(stride, padding, output_padding, dilation, groups, layout, weight_layout,
              padding_mode, output_shape)
    return _transpose_backward_data(1, grad_out, weight, input_shape, kw, algo, out, alpha, beta,
                                    num_threads)


def conv_transpose1d_backward_weight(grad_out: Any, x: Any, weight_shape: Sequence[int], *,
                                     stride: IntOrInts = 1, padding: Padding = 0,
                                     output_padding: IntOrInts = 0, dilation: IntOrInts = 1,
                                     groups: int = 1, layout: str = "NCW",
                                     weight_layout: str = "OIW", padding_mode: str = "zeros",
                                     algo: str = "auto",
                                     output_shape: Optional[Sequence[int]] = None,
                                     out: Optional[Array] = None, alpha: float = 1.0,
                                     beta: float = 0.0,
                                     num_threads: Optional[int] = None) -> Array:
    """Gradient of :func:`conv_transpose1d` with respect to its weight.

    Parameters
    ----------
    grad_out : array_like
        Gradient of the transposed convolution's output.
    x : array_like
        Its input.
    weight_shape : sequence of 3 ints
        (C_in, K/groups, kW) for ``"OIW"`` or (kW, K/groups, C_in) for ``"WIO"``.
    stride, padding, output_padding, dilation, groups, layout, weight_layout, padding_mode, algo,
    output_shape, out, alpha, beta, num_threads
        As in :func:`conv_transpose1d`.

    Returns
    -------
    ndarray of shape ``weight_shape``
    """
    kw = _tkw(stride, padding, output_padding, dilation, groups, layout, weight_layout,
              padding_mode, output_shape)
    return _transpose_backward_weight(1, grad_out, x, weight_shape, kw, algo, out, alpha, beta,
                                      num_threads)


def conv_transpose1d_backward(grad_out: Any, x: Any, weight: Any, *, stride: IntOrInts = 1,
                              padding: Padding = 0, output_padding: IntOrInts = 0,
                              dilation: IntOrInts = 1, groups: int = 1, layout: str = "NCW",
                              weight_layout: str = "OIW", padding_mode: str = "zeros",
                              algo: str = "auto", output_shape: Optional[Sequence[int]] = None,
                              num_threads: Optional[int] = None,
                              need: Sequence[str] = NEEDS) -> Grads:
    """All gradients of :func:`conv_transpose1d` in one call.

    Parameters
    ----------
    grad_out, x, weight : array_like
    stride, padding, output_padding, dilation, groups, layout, weight_layout, padding_mode, algo,
    output_shape, num_threads
        As in :func:`conv_transpose1d`.
    need : sequence of {"data", "weight", "bias"}

    Returns
    -------
    (dx, dw, db)
        Entries not in ``need`` are None.
    """
    kw = _tkw(stride, padding, output_padding, dilation, groups, layout, weight_layout,
              padding_mode, output_shape)
    return _transpose_backward(1, grad_out, x, weight, kw, algo, num_threads, need)


# -- 3-D --------------------------------------------------------------------------------------

def conv3d(x: Any, weight: Any, bias: Any = None, *, stride: IntOrInts = 1, padding: Padding = 0,
           dilation: IntOrInts = 1, groups: int = 1, layout: str = "NCDHW",
           weight_layout: str = "OIDHW", padding_mode: str = "zeros", padding_value: float = 0.0,
           algo: str = "auto", out: Optional[Array] = None, alpha: float = 1.0,
           beta: float = 0.0, num_threads: Optional[int] = None) -> Array:
    """3-D convolution (cross-correlation, as in PyTorch and TensorFlow).

    Runs as a loop over the kernel's depth taps, each a 2-D convolution (the algorithm
    ``algo`` or the 2-D dispatcher picks) of a batch of input depth slices, accumulated into
    the output depth slices; or, with zero padding, for ``algo="direct"`` and where
    ``"auto"`` measured it faster, on the direct tile kernels with every depth tap in their
    reduction (the volume packed once, each output written once).

    Parameters
    ----------
    x : array_like
        Input, (N, C, D, H, W) for ``layout="NCDHW"`` or (N, D, H, W, C) for ``"NDHWC"``.
    weight : array_like
        (K, C/groups, kD, kH, kW) for ``weight_layout="OIDHW"`` or (kD, kH, kW, C/groups, K)
        for ``"DHWIO"``.
    bias : array_like, optional
        (K,), added to every output pixel.
    stride, dilation : int or (int, int, int)
        Positive, per axis (depth, height, width); dilation 1 means none.
    padding : int, 3 entries or str
        An int; or one entry per axis, each an int or a (begin, end) pair; or
        ``"valid"``, ``"same"`` (= ``"same_upper"``), ``"same_lower"`` or ``"full"``.
    groups : int
        Divides C and K; ``groups == C`` is depthwise convolution.
    layout, weight_layout : str
    padding_mode : str
        ``"zeros"``, ``"constant"`` (``padding_value``), ``"reflect"``, ``"symmetric"``,
        ``"replicate"`` or ``"circular"``, on every axis, as in :func:`cconv.conv2d`.
    padding_value : float
        The constant of ``padding_mode="constant"``.
    algo : str
        ``"auto"``, ``"find"`` or one of ``cconv.ALGORITHMS``: the 2-D algorithm of every
        depth tap.
    out : ndarray, optional
        Receives ``alpha * result + beta * out`` and is returned; exact shape and dtype.
    alpha, beta : float
        Scaling as in MIOpen/cuDNN; without ``out``, ``alpha`` scales and ``beta`` is ignored.
    num_threads : int, optional
        Threads for this call; default :func:`cconv.get_num_threads`.

    Returns
    -------
    ndarray
        (N, K, OD, OH, OW) or (N, OD, OH, OW, K), of dtype ``numpy.result_type(x, weight)``;
        float16 is computed in float32.
    """
    kw = _kw(stride, padding, dilation, groups, layout, weight_layout, padding_mode,
             padding_value)
    return _conv(3, x, weight, bias, kw, algo, out, alpha, beta, num_threads)


def conv3d_backward_data(grad_out: Any, weight: Any, input_shape: Sequence[int], *,
                         stride: IntOrInts = 1, padding: Padding = 0, dilation: IntOrInts = 1,
                         groups: int = 1, layout: str = "NCDHW", weight_layout: str = "OIDHW",
                         padding_mode: str = "zeros", padding_value: float = 0.0,
                         algo: str = "auto", out: Optional[Array] = None, alpha: float = 1.0,
                         beta: float = 0.0, num_threads: Optional[int] = None) -> Array:
    """Gradient of :func:`conv3d` with respect to its input.

    Parameters
    ----------
    grad_out : array_like
        Gradient of the convolution's output, in ``layout`` order.
    weight : array_like
        The convolution's weight, in ``weight_layout`` order.
    input_shape : sequence of 5 ints
        Shape of the convolution's input in ``layout`` order.
    stride, padding, dilation, groups, layout, weight_layout, padding_mode, padding_value, algo,
    out, alpha, beta, num_threads
        As in :func:`conv3d`.

    Returns
    -------
    ndarray of shape ``input_shape``
    """
    kw = _kw(stride, padding, dilation, groups, layout, weight_layout, padding_mode,
             padding_value)
    return _conv_backward_data(3, grad_out, weight, input_shape, kw, algo, out, alpha, beta,
                               num_threads)


def conv3d_backward_weight(grad_out: Any, x: Any, weight_shape: Sequence[int], *,
                           stride: IntOrInts = 1, padding: Padding = 0, dilation: IntOrInts = 1,
                           groups: int = 1, layout: str = "NCDHW", weight_layout: str = "OIDHW",
                           padding_mode: str = "zeros", padding_value: float = 0.0,
                           algo: str = "auto", out: Optional[Array] = None, alpha: float = 1.0,
                           beta: float = 0.0, num_threads: Optional[int] = None) -> Array:
    """Gradient of :func:`conv3d` with respect to its weight.

    Parameters
    ----------
    grad_out : array_like
        Gradient of the convolution's output, in ``layout`` order.
    x : array_like
        The convolution's input, in ``layout`` order.
    weight_shape : sequence of 5 ints
        Shape of the weight in ``weight_layout`` order.
    stride, padding, dilation, groups, layout, weight_layout, padding_mode, padding_value, algo,
    out, alpha, beta, num_threads
        As in :func:`conv3d`.

    Returns
    -------
    ndarray of shape ``weight_shape``
        Summed over the batch in a fixed order; deterministic for a given shape, whatever
        the thread count.
    """
    kw = _kw(stride, padding, dilation, groups, layout, weight_layout, padding_mode,
             padding_value)
    return _conv_backward_weight(3, grad_out, x, weight_shape, kw, algo, out, alpha, beta,
                                 num_threads)


def conv3d_backward_bias(grad_out: Any, *, layout: str = "NCDHW", out: Optional[Array] = None,
                         alpha: float = 1.0, beta: float = 0.0) -> Array:
    """Gradient of :func:`conv3d` with respect to its bias: ``grad_out`` summed over N, D, H, W.

    Parameters
    ----------
    grad_out : array_like
        5-D, in ``layout`` order.
    layout : str
    out, alpha, beta
        As in :func:`conv3d`.

    Returns
    -------
    ndarray of shape (K,)
        Accumulated in float64, returned in ``grad_out``'s dtype.
    """
    return _backward_bias(3, grad_out, layout, out, alpha, beta)


def conv3d_backward(grad_out: Any, x: Any, weight: Any, *, stride: IntOrInts = 1,
                    padding: Padding = 0, dilation: IntOrInts = 1, groups: int = 1,
                    layout: str = "NCDHW", weight_layout: str = "OIDHW",
                    padding_mode: str = "zeros", padding_value: float = 0.0, algo: str = "auto",
                    num_threads: Optional[int] = None, need: Sequence[str] = NEEDS) -> Grads:
    """All gradients of :func:`conv3d` in one call.

    Parameters
    ----------
    grad_out, x, weight : array_like
        Output gradient, input and weight of the convolution.
    stride, padding, dilation, groups, layout, weight_layout, padding_mode, padding_value, algo,
    num_threads
        As in :func:`conv3d`.
    need : sequence of {"data", "weight", "bias"}
        Which gradients to compute.

    Returns
    -------
    (dx, dw, db)
        Entries not in ``need`` are None.
    """
    kw = _kw(stride, padding, dilation, groups, layout, weight_layout, padding_mode,
             padding_value)
    return _conv_backward(3, grad_out, x, weight, kw, algo, num_threads, need)


def conv_transpose3d(x: Any, weight: Any, bias: Any = None, *, stride: IntOrInts = 1,
                     padding: Padding = 0, output_padding: IntOrInts = 0,
                     dilation: IntOrInts = 1, groups: int = 1, layout: str = "NCDHW",
                     weight_layout: str = "OIDHW", padding_mode: str = "zeros",
                     algo: str = "auto", output_shape: Optional[Sequence[int]] = None,
                     out: Optional[Array] = None, alpha: float = 1.0, beta: float = 0.0,
                     num_threads: Optional[int] = None) -> Array:
    """Transposed 3-D convolution (the gradient of :func:`conv3d` w.r.t. its input), as PyTorch.

    Parameters
    ----------
    x : array_like
        (N, C_in, D, H, W) or (N, D, H, W, C_in).
    weight : array_like
        (C_in, K/groups, kD, kH, kW) for ``"OIDHW"`` or (kD, kH, kW, K/groups, C_in) for
        ``"DHWIO"``.
    bias : array_like, optional
        (K,).
    stride, dilation : int or (int, int, int)
    padding : int, 3 entries (ints or (begin, end) pairs) or "valid"
        Removed from the full output, as in PyTorch.
    output_padding : int or (int, int, int)
        Extra outputs at the end of each axis, smaller than its stride or dilation.
    output_shape : sequence of 5 ints, optional
        Full output shape in ``layout`` order, instead of ``output_padding``.
    padding_mode : str
        The mode of the convolution this one transposes (see :func:`cconv.conv_transpose2d`).
    groups, layout, weight_layout, algo, out, alpha, beta, num_threads
        As in :func:`conv3d`.

    Returns
    -------
    ndarray
        Output size per axis ``(size-1)*stride - pad_begin - pad_end + dilation*(kernel-1) +
        output_padding + 1``.
    """
    kw = _tkw(stride, padding, output_padding, dilation, groups, layout, weight_layout,
              padding_mode, output_shape)
    return _transpose(3, x, weight, bias, kw, algo, out, alpha, beta, num_threads)


def conv_transpose3d_backward_data(grad_out: Any, weight: Any, input_shape: Sequence[int], *,
                                   stride: IntOrInts = 1, padding: Padding = 0,
                                   output_padding: IntOrInts = 0, dilation: IntOrInts = 1,
                                   groups: int = 1, layout: str = "NCDHW",
                                   weight_layout: str = "OIDHW", padding_mode: str = "zeros",
                                   algo: str = "auto",
                                   output_shape: Optional[Sequence[int]] = None,
                                   out: Optional[Array] = None, alpha: float = 1.0,
                                   beta: float = 0.0, num_threads: Optional[int] = None) -> Array:
    """Gradient of :func:`conv_transpose3d` with respect to its input ``x``.

    Parameters
    ----------
    grad_out : array_like
        Gradient of the transposed convolution's output.
    weight : array_like
        Its weight, as for :func:`conv_transpose3d`.
    input_shape : sequence of 5 ints
        Shape of its input ``x`` in ``layout`` order.
    stride, padding, output_padding, dilation, groups, layout, weight_layout, padding_mode, algo,
    output_shape, out, alpha, beta, num_threads
        As in :func:`conv_transpose3d`.

    Returns
    -------
    ndarray of shape ``input_shape``
    """
    kw = _tkw(stride, padding, output_padding, dilation, groups, layout, weight_layout,
              padding_mode, output_shape)
    return _transpose_backward_data(3, grad_out, weight, input_shape, kw, algo, out, alpha, beta,
                                    num_threads)


def conv_transpose3d_backward_weight(grad_out: Any, x: Any, weight_shape: Sequence[int], *,
                                     stride: IntOrInts = 1, padding: Padding = 0,
                                     output_padding: IntOrInts = 0, dilation: IntOrInts = 1,
                                     groups: int = 1, layout: str = "NCDHW",
                                     weight_layout: str = "OIDHW", padding_mode: str = "zeros",
                                     algo: str = "auto",
                                     output_shape: Optional[Sequence[int]] = None,
                                     out: Optional[Array] = None, alpha: float = 1.0,
                                     beta: float = 0.0,
                                     num_threads: Optional[int] = None) -> Array:
    """Gradient of :func:`conv_transpose3d` with respect to its weight.

    Parameters
    ----------
    grad_out : array_like
        Gradient of the transposed convolution's output.
    x : array_like
        Its input.
    weight_shape : sequence of 5 ints
        (C_in, K/groups, kD, kH, kW) for ``"OIDHW"`` or (kD, kH, kW, K/groups, C_in) for
        ``"DHWIO"``.
    stride, padding, output_padding, dilation, groups, layout, weight_layout, padding_mode, algo,
    output_shape, out, alpha, beta, num_threads
        As in :func:`conv_transpose3d`.

    Returns
    -------
    ndarray of shape ``weight_shape``
    """
    kw = _tkw(stride, padding, output_padding, dilation, groups, layout, weight_layout,
              padding_mode, output_shape)
    return _transpose_backward_weight(3, grad_out, x, weight_shape, kw, algo, out, alpha, beta,
                                      num_threads)


def conv_transpose3d_backward(grad_out: Any, x: Any, weight: Any, *, stride: IntOrInts = 1,
                              padding: Padding = 0, output_padding: IntOrInts = 0,
                              dilation: IntOrInts = 1, groups: int = 1, layout: str = "NCDHW",
                              weight_layout: str = "OIDHW", padding_mode: str = "zeros",
                              algo: str = "auto", output_shape: Optional[Sequence[int]] = None,
                              num_threads: Optional[int] = None,
                              need: Sequence[str] = NEEDS) -> Grads:
    """All gradients of :func:`conv_transpose3d` in one call.

    Parameters
    ----------
    grad_out, x, weight : array_like
    stride, padding, output_padding, dilation, groups, layout, weight_layout, padding_mode, algo,
    output_shape, num_threads
        As in :func:`conv_transpose3d`.
    need : sequence of {"data", "weight", "bias"}

    Returns
    -------
    (dx, dw, db)
        Entries not in ``need`` are None.
    """
    kw = _tkw(stride, padding, output_padding, dilation, groups, layout, weight_layout,
              padding_mode, output_shape)
    return _transpose_backward(3, grad_out, x, weight, kw, algo, num_threads, need)
