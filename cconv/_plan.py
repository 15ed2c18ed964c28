"""Plans (a validated geometry with its algorithm chosen once) and algorithm search."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

from . import _boundary, _dispatch, _execute
from ._geometry import (Shape4, as_float_array, check_bias, check_dtype, check_out,
                        check_scalars, compute_dtype, make_geometry)
from ._threads import resolve_num_threads
from .algorithms import implementation, why_not

if TYPE_CHECKING:
    from ._boundary import Boundary
    from ._dispatch import AlgoResult
    from ._geometry import ConvGeometry, IntOrPair, Padding
    from .algorithms.base import Algorithm, TransformedWeight

Array = npt.NDArray[Any]
# An operand of a plan's pass: (argument name, value, expected shape, what that shape is).
Operand = Tuple[str, object, Shape4, str]
# What ``ConvPlan._call`` hands on to ``cconv._execute``: out, alpha, beta, threads, result dtype.
CallArgs = Tuple[Optional[Array], float, float, int, np.dtype[Any]]


class ConvPlan:
    """A convolution problem validated once, with its algorithm and schedules cached.

    Its methods accept only arrays of the plan's shapes (a ValueError names the argument
    otherwise); the geometry is not validated again on each call.

    Attributes
    ----------
    output_shape : tuple
        Forward output shape in ``layout`` order.
    algorithm : str
        The forward algorithm, one of ``cconv.ALGORITHMS``.
    workspace_bytes : int
        Bytes of scratch buffers a forward call on the default thread count allocates
        besides its result (:meth:`workspace_bytes_for` for another thread count or pass).
    geometry : ConvGeometry
    """

    def __init__(self, geometry: ConvGeometry, algorithm: str) -> None:
        self.geometry = geometry
        self.algorithm = algorithm
        self.output_shape = geometry.output_shape()
        self.workspace_bytes = self.workspace_bytes_for("forward")

    def __repr__(self) -> str:
        return (f"ConvPlan(input={self.geometry.input_shape()}, weight="
                f"{self.geometry.weight_shape()}, output={self.output_shape}, "
                f"algorithm={self.algorithm!r}, workspace_bytes={self.workspace_bytes})")

    def workspace_bytes_for(self, op: str = "forward", num_threads: Optional[int] = None) -> int:
        """Bytes of scratch one call of pass ``op`` allocates besides its result (each
        scratch buffer also takes up to 64 bytes more, to start on a cache line).

        Parameters
        ----------
        op : {"forward", "backward_data", "backward_weight"}
        num_threads : int, optional
            The call's thread count (per-thread scratch grows with it); default
            :func:`cconv.get_num_threads`.

        Returns
        -------
        int
        """
        if op not in _dispatch.OPS:
            raise ValueError(f"op must be one of {_dispatch.OPS}, got {op!r}")
        impl = implementation(self.geometry, self._algo(op), op)
        padded = 0
        if impl.geom.padding_mode != self.geometry.padding_mode:  # padded input (or gradient)
            k = self.geometry.kernel_geometry
            padded = k.N * k.C * k.H * k.W * k.dtype.itemsize
        return int(impl.workspace_bytes(op, resolve_num_threads(num_threads))) + padded

    def _array(self, name: str, value: object, shape: Shape4, shape_name: str) -> Array:
        array = as_float_array(value, name)
        if array.shape != shape:
            raise ValueError(f"{name} has shape {array.shape}, but this plan is for "
                             f"{shape_name} {shape}")
        return array

    def _implementation(self, op: str, *operands: Array) -> Algorithm:
        """The algorithm instance of ``op`` for the operands' compute dtype (a plan made for
        float32 still computes float64 operands in float64, like the functions do)."""
        g = self.geometry
        dtype = compute_dtype(*(a.dtype for a in operands))
        if dtype != g.dtype:
            g = dataclasses.replace(g, dtype=dtype)
        return implementation(g, self._algo(op), op)

    def prepare_weight(self, weight: npt.ArrayLike, *,
                       num_threads: Optional[int] = None) -> PreparedWeight:
        """Transform or pack ``weight`` once for this plan's forward algorithm.

        Winograd's filter transform ``G g G^T`` and the direct kernel's weight packing are
        otherwise redone on every call.  The result is a snapshot: later changes to
        ``weight`` do not reach it (prepare again after an update).

        Parameters
        ----------
        weight : array_like
            In this plan's ``weight_layout``, of its weight shape.
        num_threads : int, optional

        Returns
        -------
        PreparedWeight
            Pass it as ``weight`` to :meth:`forward` (and, as a plain weight, to
            :meth:`backward_data`) of this plan.
        """
        g = self.geometry
        w = self._array("weight", weight, g.weight_shape(), "weight shape")
        w = np.array(w, copy=True)  # the caller's dtype: results keep numpy.result_type
        w.flags.writeable = False
        impl = implementation(g, self.algorithm, "forward")
        wv = _execute.weight_oihw(w, g.weight_layout, g.dtype)
        return PreparedWeight(self, w, impl.prepare_weight(wv, resolve_num_threads(num_threads)))

    def forward(self, x: npt.ArrayLike, weight: Union[npt.ArrayLike, PreparedWeight],
                bias: Optional[npt.ArrayLike] = None, out: Optional[Array] = None, *,
                alpha: float = 1.0, beta: float = 0.0, num_threads: Optional[int] = None) -> Array:
        """:func:`cconv.conv2d` with this plan's keywords and algorithm.

        ``weight`` may be a :class:`PreparedWeight` of this plan: its transformed filter is
        then reused instead of recomputed."""
        g = self.geometry
        transformed = None
        if isinstance(weight, PreparedWeight):
            weight, transformed = weight._unwrap(self)
        x, w, impl, call = self._call("forward", ("x", x, g.input_shape(), "input shape"),
                                      ("weight", weight, g.weight_shape(), "weight shape"),
                                      g.output_shape(), out, alpha, beta, num_threads)
        b = check_bias(bias, g.K, impl.geom.dtype)
        return _execute.forward(impl, x, w, b, *call, prepared=transformed,
                                boundary=self._boundary(impl))

    def backward_data(self, grad_out: npt.ArrayLike, weight: Union[npt.ArrayLike, PreparedWeight],
                      out: Optional[Array] = None, *, alpha: float = 1.0, beta: float = 0.0,
                      num_threads: Optional[int] = None) -> Array:
        """:func:`cconv.conv2d_backward_data` for this plan's shapes."""
        g = self.geometry
        if isinstance(weight, PreparedWeight):
            weight = weight._unwrap(self)[0]
        dy, w, impl, call = self._call(
            "backward_data", ("grad_out", grad_out, g.output_shape(), "output shape"),
            ("weight", weight, g.weight_shape(), "weight shape"), g.input_shape(), out, alpha,
            beta, num_threads)
        return _execute.backward_data(impl, dy, w, *call, boundary=self._boundary(impl))

    def backward_weight(self, grad_out: npt.ArrayLike, x: npt.ArrayLike,
                        out: Optional[Array] = None, *, alpha: float = 1.0, beta: float = 0.0,
                        num_threads: Optional[int] = None) -> Array:
        """:func:`cconv.conv2d_backward_weight` for this plan's shapes."""
        g = self.geometry
        dy, x, impl, call = self._call(
            "backward_weight", ("grad_out", grad_out, g.output_shape(), "output shape"),
            ("x", x, g.input_shape(), "input shape"), g.weight_shape(), out, alpha, beta,
            num_threads)
        return _execute.backward_weight(impl, dy, x, *call, boundary=self._boundary(impl))

    def _call(self, op: str, first: Operand, second: Operand, result_shape: Shape4,
              out: Optional[Array], alpha: float, beta: float,
              num_threads: Optional[int]) -> Tuple[Array, Array, Algorithm, CallArgs]:
        """Check a pass's two operands (name, value, shape, what the shape is) and its
        ``out`` / ``alpha`` / ``beta`` / ``num_threads``.

        Returns the two arrays, the algorithm instance, and ``(out, alpha, beta, nthreads,
        result_dtype)`` in the order :mod:`cconv._execute` takes them."""
        a = self._array(*first)
        b = self._array(*second)
        impl = self._implementation(op, a, b)
        result_dtype = np.result_type(a.dtype, b.dtype)
        nthreads = resolve_num_threads(num_threads)
        alpha, beta = check_scalars(alpha, beta)
        out = check_out(out, result_shape, result_dtype)
        return a, b, impl, (out, alpha, beta, nthreads, result_dtype)

    def _boundary(self, impl: Algorithm) -> Optional[Boundary]:
        """The padding mode's pad / fold for the dtype ``impl`` computes in (None: zeros)."""
        g = self.geometry
        if impl.geom.dtype != g.dtype:
            g = dataclasses.replace(g, dtype=impl.geom.dtype)
        return _boundary.for_geometry(g)

    def _algo(self, op: str) -> str:
        """The plan's algorithm where it can run ``op``, else ``auto``'s choice."""
        if why_not(self.algorithm, self.geometry, op) is None:
            return self.algorithm
        return _dispatch.heuristic(self.geometry, op)


class PreparedWeight:
    """A weight transformed once for one :class:`ConvPlan` (see ``ConvPlan.prepare_weight``).

    Attributes
    ----------
    weight : ndarray
        Read-only copy of the weight it was prepared from (the plan's ``weight_layout``).
    algorithm : str or None
        The algorithm whose transformed weight it holds (None: nothing to precompute).
    nbytes : int
        Bytes of the transformed weight.
    """

    def __init__(self, plan: ConvPlan, weight: Array,
                 transformed: Optional[TransformedWeight]) -> None:
        self._plan = plan
        self.weight = weight
        self._transformed = transformed
        self.algorithm = None if transformed is None else transformed.algorithm
        self.nbytes = 0 if transformed is None else int(transformed.data.nbytes)

    def __repr__(self) -> str:
        return (f"PreparedWeight(shape={self.weight.shape}, dtype={self.weight.dtype}, "
                f"algorithm={self.algorithm!r}, nbytes={self.nbytes})")

    def _unwrap(self, plan: ConvPlan) -> Tuple[Array, Optional[TransformedWeight]]:
        if plan is not self._plan:
            raise ValueError("weight was prepared by another plan; call prepare_weight of "
                             "this plan")
        return self.weight, self._transformed


def _plan_geometry(x_shape: Sequence[int], weight_shape: Sequence[int], dtype: npt.DTypeLike,
                   stride: IntOrPair, padding: Padding, dilation: IntOrPair, groups: int,
                   layout: str, weight_layout: str, padding_mode: str,
                   padding_value: float) -> ConvGeometry:
    dtype = compute_dtype(check_dtype(dtype, "dtype"))
    return make_geometry(x_shape, weight_shape, stride=stride, padding=padding,
                         dilation=dilation, groups=groups, layout=layout,
                         weight_layout=weight_layout, padding_mode=padding_mode,
                         padding_value=padding_value, dtype=dtype, x_name="x_shape",
                         w_name="weight_shape")


def plan_conv2d(x_shape: Sequence[int], weight_shape: Sequence[int], *, stride: IntOrPair = 1,
                padding: Padding = 0, dilation: IntOrPair = 1, groups: int = 1,
                layout: str = "NCHW", weight_layout: str = "OIHW", padding_mode: str = "zeros",
                padding_value: float = 0.0, dtype: npt.DTypeLike = "float32",
                algo: str = "auto") -> ConvPlan:
    """Validate a convolution once and choose its algorithm.

    Parameters
    ----------
    x_shape, weight_shape : sequence of 4 ints
        In ``layout`` / ``weight_layout`` order.
    stride, padding, dilation, groups, layout, weight_layout, padding_mode, padding_value
        As in :func:`cconv.conv2d`.
    dtype : dtype-like
        float16, float32 or float64.
    algo : str
        ``"auto"``, ``"find"`` or one of ``cconv.ALGORITHMS``.

    Returns
    -------
    ConvPlan
    """
    geom = _plan_geometry(x_shape, weight_shape, dtype, stride, padding, dilation, groups,
                          layout, weight_layout, padding_mode, padding_value)
    impl = _dispatch.select(geom, "forward", algo, resolve_num_threads(None))
    return ConvPlan(geom, impl.name)


def find_algorithms(x_shape: Sequence[int], weight_shape: Sequence[int], *, op: str = "forward",
                    stride: IntOrPair = 1, padding: Padding = 0, dilation: IntOrPair = 1,
                    groups: int = 1, layout: str = "NCHW", weight_layout: str = "OIHW",
                    padding_mode: str = "zeros", padding_value: float = 0.0,
                    dtype: npt.DTypeLike = "float32",
                    num_threads: Optional[int] = None) -> List[AlgoResult]:
    """Time every algorithm that can run a convolution pass, MIOpen-Find style.

    Parameters
    ----------
    x_shape, weight_shape : sequence of 4 ints
    op : {"forward", "backward_data", "backward_weight"}
    stride, padding, dilation, groups, layout, weight_layout, padding_mode, padding_value, dtype
        As in :func:`plan_conv2d`.
    num_threads : int, optional

    Returns
    -------
    list of AlgoResult
        Named tuples ``(algo, time_ms, workspace_bytes)``, fastest first.
    """
    if op not in _dispatch.OPS:
        raise ValueError(f"op must be one of {_dispatch.OPS}, got {op!r}")
    geom = _plan_geometry(x_shape, weight_shape, dtype, stride, padding, dilation, groups,
                          layout, weight_layout, padding_mode, padding_value)
    if geom.N == 0:
        raise ValueError("x_shape has batch size 0; nothing to time")
    return _dispatch.time_algorithms(geom, op, resolve_num_threads(num_threads))
