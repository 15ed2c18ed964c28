"""Plans for 1-D and 3-D convolution, and algorithm search for them.

A 1-D plan is a 2-D plan of height 1 (``cconv.plan_conv2d`` on the lifted shapes); a 3-D plan
holds one 2-D plan per batch size its depth taps use (a tap reaches every output depth
slice, or all but a few at the borders), so the 2-D geometry and algorithm of each tap are
chosen once.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _dispatch as _dispatch_module
from . import _geometry as _geometry_module
from . import _plan as _plan_module
from . import _threads as _threads_module
from . import algorithms as _algorithms_module
from ._nd_execute import (depthwise_backward_data_ndhwc, depthwise_forward_ndhwc, drop,
                          folded_backward_data, folded_forward, folds_depth, gather,
                          keywords_2d, layout_2d, lift, lift_shape, reduce, scatter,
                          tap_geometry_2d, tap_spans, weight_tap)
from ._nd_geometry import LAYOUTS, WEIGHT_LAYOUTS, NdGeometry, make_nd_geometry, to_layout

# cconv's 2-D modules carry no type hints: Any-typed aliases keep ``mypy --strict`` quiet.
_g2: Any = _geometry_module
_plan2d: Any = _plan_module
_dispatch: Any = _dispatch_module
_threads: Any = _threads_module
_algorithms: Any = _algorithms_module

__all__ = ["Conv1dPlan", "Conv3dPlan", "find_algorithms_nd", "plan_conv1d", "plan_conv3d"]

Array = np.ndarray[Any, Any]
OPS = ("forward", "backward_data", "backward_weight")


class _NdPlan:
    """What 1-D and 3-D plans share: argument checks with the messages of the rank."""

    geometry: NdGeometry
    output_shape: Tuple[int, ...]
    algorithm: str
    workspace_bytes: int

    def __repr__(self) -> str:
        g = self.geometry
        return (f"{type(self).__name__}(input={g.input_shape()}, weight={g.weight_shape()}, "
                f"output={self.output_shape}, algorithm={self.algorithm!r}, "
                f"workspace_bytes={self.workspace_bytes})")

    def _array(self, name: str, value: Any, shape: Tuple[int, ...], shape_name: str) -> Array:
        array: Array = _g2.as_float_array(value, name)
        if array.shape != shape:
            raise ValueError(f"{name} has shape {array.shape}, but this plan is for "
                             f"{shape_name} {shape}")
        return array

    def _call(self, first: Tuple[str, Any, Tuple[int, ...], str],
              second: Tuple[str, Any, Tuple[int, ...], str], result_shape: Tuple[int, ...],
              out: Optional[Array], alpha: Any, beta: Any, num_threads: Any,
              ) -> Tuple[Array, Array, NdGeometry, Optional[Array], float, float, int,
                         np.dtype[Any]]:
        """Both operands checked, the geometry in their compute dtype, and the checked
        ``out`` / ``alpha`` / ``beta`` / thread count / result dtype."""
        a = self._array(*first)
        b = self._array(*second)
        dtype = _g2.compute_dtype(a.dtype, b.dtype)
        geom = self.geometry
        if dtype != geom.dtype:  # a plan for float32 computes float64 operands in float64
            geom = dataclasses.replace(geom, dtype=dtype)
        result_dtype = np.result_type(a.dtype, b.dtype)
        nthreads = int(_threads.resolve_num_threads(num_threads))
        alpha, beta = _g2.check_scalars(alpha, beta)
        out = _g2.check_out(out, result_shape, result_dtype)
        return a, b, geom, out, float(alpha), float(beta), nthreads, result_dtype


class Conv1dPlan(_NdPlan):
    """A 1-D convolution validated once: a 2-D plan of height 1.

    Attributes
    ----------
    output_shape : tuple
        Forward output shape in ``layout`` order.
    algorithm : str
        The forward algorithm, one of ``cconv.ALGORITHMS``.
    workspace_bytes : int
        Bytes of scratch a forward call on the default thread count allocates besides its
        result.
    geometry : NdGeometry
    plan_2d : ConvPlan
        The 2-D plan it runs.
    """

    def __init__(self, geometry: NdGeometry, plan_2d: Any) -> None:
        self.geometry = geometry
        self.plan_2d = plan_2d
        self.output_shape = geometry.output_shape()
        self.algorithm = str(plan_2d.algorithm)
        self.workspace_bytes = self.workspace_bytes_for("forward")

    def workspace_bytes_for(self, op: str = "forward", num_threads: Optional[int] = None) -> int:
        """Bytes of scratch one call of pass ``op`` allocates besides its result (each
        scratch buffer also takes up to 64 bytes more, to start on a cache line).

        Parameters
        ----------
        op : {"forward", "backward_data", "backward_weight"}
        num_threads : int, optional

        Returns
        -------
        int
        """
        return int(self.plan_2d.workspace_bytes_for(op, num_threads))

    def forward(self, x: Any, weight: Any, bias: Any = None, out: Optional[Array] = None, *,
                alpha: float = 1.0, beta: float = 0.0,
                num_threads: Optional[int] = None) -> Array:
        """:func:`cconv.conv1d` with this plan's keywords and algorithm.

        Parameters
        ----------
        x, weight : array_like
            Of this plan's input and weight shapes.
        bias : array_like, optional
        out, alpha, beta, num_threads
            As in :func:`cconv.conv1d`.

        Returns
        -------
        ndarray
        """
        g = self.geometry
        xa, w, _, out, alpha, beta, nthreads, _ = self._call(
            ("x", x, g.input_shape(), "input shape"),
            ("weight", weight, g.weight_shape(), "weight shape"), g.output_shape(), out, alpha,
            beta, num_threads)
        r = self.plan_2d.forward(lift(xa, g.layout), lift(w, g.weight_layout), bias,
                                 lift(out, g.layout), alpha=alpha, beta=beta,
                                 num_threads=nthreads)
        return out if out is not None else drop(r, g.layout)

    def backward_data(self, grad_out: Any, weight: Any, out: Optional[Array] = None, *,
                      alpha: float = 1.0, beta: float = 0.0,
                      num_threads: Optional[int] = None) -> Array:
        """:func:`cconv.conv1d_backward_data` for this plan's shapes.

        Parameters
        ----------
        grad_out, weight : array_like
            Of this plan's output and weight shapes.
        out, alpha, beta, num_threads
            As in :func:`cconv.conv1d`.

        Returns
        -------
        ndarray of the plan's input shape
        """
        g = self.geometry
        dy, w, _, out, alpha, beta, nthreads, _ = self._call(
            ("grad_out", grad_out, g.output_shape(), "output shape"),
            ("weight", weight, g.weight_shape(), "weight shape"), g.input_shape(), out, alpha,
            beta, num_threads)
        r = self.plan_2d.backward_data(lift(dy, g.layout), lift(w, g.weight_layout),
                                       lift(out, g.layout), alpha=alpha, beta=beta,
                                       num_threads=nthreads)
        return out if out is not None else drop(r, g.layout)

    def backward_weight(self, grad_out: Any, x: Any, out: Optional[Array] = None, *,
                        alpha: float = 1.0, beta: float = 0.0,
                        num_threads: Optional[int] = None) -> Array:
        """:func:`cconv.conv1d_backward_weight` for this plan's shapes.

        Parameters
        ----------
        grad_out, x : array_like
            Of this plan's output and input shapes.
        out, alpha, beta, num_threads
            As in :func:`cconv.conv1d`.

        Returns
        -------
        ndarray of the plan's weight shape
        """
        g = self.geometry
        dy, xa, _, out, alpha, beta, nthreads, _ = self._call(
            ("grad_out", grad_out, g.output_shape(), "output shape"),
            ("x", x, g.input_shape(), "input shape"), g.weight_shape(), out, alpha, beta,
            num_threads)
        r = self.plan_2d.backward_weight(lift(dy, g.layout), lift(xa, g.layout),
                                         lift(out, g.weight_layout), alpha=alpha, beta=beta,
                                         num_threads=nthreads)
        return out if out is not None else drop(r, g.weight_layout)


class _PlanOps:
    """The 2-D operations of a depth-tap loop through a 3-D plan's 2-D plans."""

    def __init__(self, plans: Dict[int, Any], nthreads: int) -> None:
        self.plans, self.nthreads = plans, nthreads

    def gather(self, src: Array, weight: Array, bias: Optional[Array], dst: Array,
               alpha: float, beta: float) -> None:
        """A 2-D forward of one tap."""
        self.plans[src.shape[0]].forward(src, weight, bias, dst, alpha=alpha, beta=beta,
                                         num_threads=self.nthreads)

    def scatter(self, src: Array, weight: Array, bias: Optional[Array], dst: Array,
                alpha: float, beta: float) -> None:
        """A 2-D data gradient of one tap (a convolution's: ``bias`` is always None)."""
        self.plans[src.shape[0]].backward_data(src, weight, dst, alpha=alpha, beta=beta,
                                               num_threads=self.nthreads)

    def reduce(self, out_side: Array, in_side: Array, dst: Array, beta: float) -> None:
        """A 2-D weight gradient of one tap."""
        self.plans[out_side.shape[0]].backward_weight(out_side, in_side, dst, beta=beta,
                                                      num_threads=self.nthreads)

    def algorithm(self, batch: int, op: str) -> Tuple[Any, int]:
        """The algorithm instance and thread count of the 2-D pass ``op`` on ``batch``
        slices."""
        plan = self.plans[batch]
        impl = _algorithms_module.implementation(plan.geometry, plan._algo(op), op)
        return impl, _threads_module.threads_for_work(impl.geom.flops, self.nthreads)


class Conv3dPlan(_NdPlan):
    """A 3-D convolution validated once, with the 2-D plan of every depth tap made.

    Attributes
    ----------
    output_shape : tuple
        Forward output shape in ``layout`` order.
    algorithm : str
        The forward algorithm of the depth taps that reach every output slice (the 2-D
        plans of the border taps may differ: see ``plans_2d``).
    workspace_bytes : int
        Bytes of scratch a forward call on the default thread count allocates besides its
        result: the largest 2-D call's, the depth-major accumulator of an NCDHW result and
        the depth-padded input of a padding mode.
    geometry : NdGeometry
    plans_2d : dict
        Batch size (number of depth slices) -> the ``ConvPlan`` of the taps with it.
    """

    def __init__(self, geometry: NdGeometry, algo: str) -> None:
        g = self.geometry = geometry
        self._algo = algo
        self.output_shape = g.output_shape()
        lo, hi = g.pads[0]
        self._depth_padded = g.padding_mode != "zeros" and (lo, hi) != (0, 0)
        d_in = g.spatial[0] + (lo + hi if self._depth_padded else 0)
        spans = tap_spans(d_in, g.out_spatial[0], g.kernel[0], g.stride[0], g.dilation[0],
                          0 if self._depth_padded else lo)
        kw = keywords_2d(g)
        w2d = weight_tap(np.empty(g.weight_shape(), np.uint8), 0, g.weight_layout).shape
        self.plans_2d: Dict[int, Any] = {}
        for count in sorted({s.count for s in spans}, reverse=True):
            x2d = to_layout(count, g.C, g.spatial[1:], layout_2d(g.layout))
            self.plans_2d[count] = _plan2d.plan_conv2d(x2d, w2d, dtype=g.dtype, algo=algo, **kw)
        # The taps' 2-D plans are ordered largest batch first: the interior taps' plan.
        first = next(iter(self.plans_2d.values()), None)
        self.algorithm = str(first.algorithm) if first is not None else "direct"
        self.workspace_bytes = self.workspace_bytes_for("forward")

    def workspace_bytes_for(self, op: str = "forward", num_threads: Optional[int] = None) -> int:
        """Bytes of scratch one call of pass ``op`` allocates besides its result (each
        scratch buffer also takes up to 64 bytes more, to start on a cache line).

        Parameters
        ----------
        op : {"forward", "backward_data", "backward_weight"}
        num_threads : int, optional

        Returns
        -------
        int
        """
        if op not in OPS:
            raise ValueError(f"op must be one of {OPS}, got {op!r}")
        g, item = self.geometry, self.geometry.dtype.itemsize
        taps = max((int(p.workspace_bytes_for(op, num_threads))
                    for p in self.plans_2d.values()), default=0)
        volume = {"forward": g.N * g.K * int(np.prod(g.out_spatial)),
                  "backward_data": g.N * g.C * int(np.prod(g.spatial)),
                  "backward_weight": int(np.prod(g.weight_shape()))}[op]
        accumulator = volume * item if (not g.channels_last or op == "backward_weight") else 0
        padded = 0
        if self._depth_padded:
            lo, hi = g.pads[0]
            padded = g.N * g.C * (g.spatial[0] + lo + hi) * int(np.prod(g.spatial[1:])) * item
        return taps + accumulator + padded + self._packed_once_bytes(op)

    def _packed_once_bytes(self, op: str) -> int:
        """Beyond a tap's call: where the taps of ``op`` may run Winograd packed once for
        all taps (``_nd_execute._taps_packed_once`` / ``_reduce_packed_once``), one image's
        whole stack of slices packed, and the transformed filters."""
        from .algorithms import winograd
        g = self.geometry
        if (g.padding_mode != "zeros" or g.stride[0] != 1 or len(self.plans_2d) == 0
                or any(p._algo(op) != "winograd" for p in self.plans_2d.values())):
            return 0
        one = winograd.WinogradConvolution(tap_geometry_2d(g, 1).kernel_geometry)
        item = g.dtype.itemsize
        if op == "backward_weight":  # both operands' stacks, a gradient per tap
            p = one._wgt.problem
            return (g.spatial[0] * p.packed_input_size()
                    + g.out_spatial[0] * p.packed_grad_size()
                    + int(np.prod(g.weight_shape()))) * item
        data_gradient = op == "backward_data"
        slices = g.out_spatial[0] if data_gradient else g.spatial[0]
        tile = winograd.stack_tile(lambda n: tap_geometry_2d(g, n).kernel_geometry, slices,
                                   data_gradient)
        problem = winograd._tile_problem(one, data_gradient, tile)
        return (slices * problem.packed_input_size() + g.kernel[0] * problem.filter_size()) * item

    def forward(self, x: Any, weight: Any, bias: Any = None, out: Optional[Array] = None, *,
                alpha: float = 1.0, beta: float = 0.0,
                num_threads: Optional[int] = None) -> Array:
        """:func:`cconv.conv3d` with this plan's keywords and 2-D plans.

        Parameters
        ----------
        x, weight : array_like
            Of this plan's input and weight shapes.
        bias : array_like, optional
        out, alpha, beta, num_threads
            As in :func:`cconv.conv3d`.

        Returns
        -------
        ndarray
        """
        g = self.geometry
        xa, w, geom, out, alpha, beta, nthreads, result_dtype = self._call(
            ("x", x, g.input_shape(), "input shape"),
            ("weight", weight, g.weight_shape(), "weight shape"), g.output_shape(), out, alpha,
            beta, num_threads)
        b = _g2.check_bias(bias, g.K, geom.dtype)
        fast = depthwise_forward_ndhwc(geom, xa, w, b, out, alpha, beta, result_dtype,
                                       self._algo, nthreads)  # as cconv.conv3d does
        if fast is not None:
            return fast
        if folds_depth(geom, self._algo, "forward"):  # as cconv.conv3d does
            return folded_forward(geom, xa, w, b, out, alpha, beta, result_dtype, nthreads)
        return gather(geom, _PlanOps(self.plans_2d, nthreads), xa, w, b, g.output_shape(), out,
                      alpha, beta, result_dtype)

    def backward_data(self, grad_out: Any, weight: Any, out: Optional[Array] = None, *,
                      alpha: float = 1.0, beta: float = 0.0,
                      num_threads: Optional[int] = None) -> Array:
        """:func:`cconv.conv3d_backward_data` for this plan's shapes.

        Parameters
        ----------
        grad_out, weight : array_like
            Of this plan's output and weight shapes.
        out, alpha, beta, num_threads
            As in :func:`cconv.conv3d`.

        Returns
        -------
        ndarray of the plan's input shape
        """
        g = self.geometry
        dy, w, geom, out, alpha, beta, nthreads, result_dtype = self._call(
            ("grad_out", grad_out, g.output_shape(), "output shape"),
            ("weight", weight, g.weight_shape(), "weight shape"), g.input_shape(), out, alpha,
            beta, num_threads)
        fast = depthwise_backward_data_ndhwc(geom, dy, w, out, alpha, beta, result_dtype,
                                             self._algo, nthreads)  # as cconv.conv3d does
        if fast is not None:
            return fast
        if folds_depth(geom, self._algo, "backward_data"):
            folded = folded_backward_data(geom, dy, w, out, alpha, beta, result_dtype,
                                          nthreads)
            if folded is not None:
                return folded
        return scatter(geom, _PlanOps(self.plans_2d, nthreads), dy, w, None, out, alpha, beta,
                       result_dtype)

    def backward_weight(self, grad_out: Any, x: Any, out: Optional[Array] = None, *,
                        alpha: float = 1.0, beta: float = 0.0,
                        num_threads: Optional[int] = None) -> Array:
        """:func:`cconv.conv3d_backward_weight` for this plan's shapes.

        Parameters
        ----------
        grad_out, x : array_like
            Of this plan's output and input shapes.
        out, alpha, beta, num_threads
            As in :func:`cconv.conv3d`.

        Returns
        -------
        ndarray of the plan's weight shape
        """
        g = self.geometry
        dy, xa, geom, out, alpha, beta, nthreads, result_dtype = self._call(
            ("grad_out", grad_out, g.output_shape(), "output shape"),
            ("x", x, g.input_shape(), "input shape"), g.weight_shape(), out, alpha, beta,
            num_threads)
        return reduce(geom, _PlanOps(self.plans_2d, nthreads), dy, xa, out, alpha, beta,
                      result_dtype)


def _plan_geometry(rank: int, x_shape: Any, weight_shape: Any, dtype: Any,
                   kw: Dict[str, Any]) -> NdGeometry:
    compute = _g2.compute_dtype(_g2.check_dtype(dtype, "dtype"))
    return make_nd_geometry(x_shape, weight_shape, dtype=compute, x_name="x_shape",
                            w_name="weight_shape", rank=rank, **kw)


def _plan(rank: int, x_shape: Any, weight_shape: Any, dtype: Any, algo: Any,
          kw: Dict[str, Any]) -> _NdPlan:
    geom = _plan_geometry(rank, x_shape, weight_shape, dtype, kw)
    _dispatch.check_algo(algo)
    if rank == 1:
        plan_2d = _plan2d.plan_conv2d(lift_shape(geom.input_shape(), geom.layout),
                                      lift_shape(geom.weight_shape(), geom.weight_layout),
                                      dtype=geom.dtype, algo=algo, **keywords_2d(geom))
        return Conv1dPlan(geom, plan_2d)
    return Conv3dPlan(geom, str(algo))


def plan_conv1d(x_shape: Sequence[int], weight_shape: Sequence[int], *, stride: Any = 1,
                padding: Any = 0, dilation: Any = 1, groups: int = 1, layout: str = "NCW",
                weight_layout: str = "OIW", padding_mode: str = "zeros",
                padding_value: float = 0.0, dtype: Any = "float32",
                algo: str = "auto") -> Conv1dPlan:
    """Validate a 1-D convolution once and choose its algorithm.

    Parameters
    ----------
    x_shape, weight_shape : sequence of 3 ints
        In ``layout`` / ``weight_layout`` order.
    stride, padding, dilation, groups, layout, weight_layout, padding_mode, padding_value
        As in :func:`cconv.conv1d`.
    dtype : dtype-like
        float16, float32 or float64.
    algo : str
        ``"auto"``, ``"find"`` or one of ``cconv.ALGORITHMS``.

    Returns
    -------
    Conv1dPlan
    """
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups, layout=layout,
              weight_layout=weight_layout, padding_mode=padding_mode,
              padding_value=padding_value)
    plan = _plan(1, x_shape, weight_shape, dtype, algo, kw)
    assert isinstance(plan, Conv1dPlan)
    return plan


def plan_conv3d(x_shape: Sequence[int], weight_shape: Sequence[int], *, stride: Any = 1,
                padding: Any = 0, dilation: Any = 1, groups: int = 1, layout: str = "NCDHW",
                weight_layout: str = "OIDHW", padding_mode: str = "zeros",
                padding_value: float = 0.0, dtype: Any = "float32",
                algo: str = "auto") -> Conv3dPlan:
    """Validate a 3-D convolution once and make the 2-D plan of its depth taps.

    Parameters
    ----------
    x_shape, weight_shape : sequence of 5 ints
        In ``layout`` / ``weight_layout`` order.
    stride, padding, dilation, groups, layout, weight_layout, padding_mode, padding_value
        As in :func:`cconv.conv3d`.
    dtype : dtype-like
        float16, float32 or float64.
    algo : str
        ``"auto"``, ``"find"`` or one of ``cconv.ALGORITHMS``: the 2-D algorithm of the
        depth taps.

    Returns
    -------
    Conv3dPlan
    """
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups, layout=layout,
              weight_layout=weight_layout, padding_mode=padding_mode,
              padding_value=padding_value)
    plan = _plan(3, x_shape, weight_shape, dtype, algo, kw)
    assert isinstance(plan, Conv3dPlan)
    return plan


def _time_plan(plan: Conv3dPlan, op: str, nthreads: int, repeats: int) -> float:
    """Median milliseconds of one pass of ``plan`` on random data (after a warm-up call)."""
    g = plan.geometry
    rng = np.random.default_rng(0)
    x = rng.standard_normal(g.input_shape()).astype(g.dtype)
    w = rng.standard_normal(g.weight_shape()).astype(g.dtype)
    dy = rng.standard_normal(g.output_shape()).astype(g.dtype)
    calls: Dict[str, Callable[[], Array]] = {
             "forward": lambda: plan.forward(x, w, num_threads=nthreads),
             "backward_data": lambda: plan.backward_data(dy, w, num_threads=nthreads),
             "backward_weight": lambda: plan.backward_weight(dy, x, num_threads=nthreads)}
    call = calls[op]
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


def find_algorithms_nd(x_shape: Sequence[int], weight_shape: Sequence[int], *,
                       op: str = "forward", stride: Any = 1, padding: Any = 0,
                       dilation: Any = 1, groups: int = 1, layout: Optional[str] = None,
                       weight_layout: Optional[str] = None, padding_mode: str = "zeros",
                       padding_value: float = 0.0, dtype: Any = "float32",
                       num_threads: Optional[int] = None, repeats: int = 3) -> List[Any]:
    """Time every algorithm that can run a 1-D or 3-D convolution pass, MIOpen-Find style.

    The rank comes from ``x_shape``: 3 entries for 1-D, 5 for 3-D.

    Parameters
    ----------
    x_shape, weight_shape : sequence of 3 or 5 ints
    op : {"forward", "backward_data", "backward_weight"}
    stride, padding, dilation, groups, padding_mode, padding_value, dtype
        As in :func:`plan_conv1d` / :func:`plan_conv3d`.
    layout, weight_layout : str, optional
        Default: channels first (``"NCW"`` / ``"OIW"``, ``"NCDHW"`` / ``"OIDHW"``).
    num_threads : int, optional
    repeats : int
        Timed calls per algorithm (3-D); the median is reported.

    Returns
    -------
    list of AlgoResult
        Named tuples ``(algo, time_ms, workspace_bytes)``, fastest first.  In 3-D an
        algorithm is listed when it can run the pass of every depth tap; its time is that
        of the whole 3-D pass.
    """
    if op not in OPS:
        raise ValueError(f"op must be one of {OPS}, got {op!r}")
    try:
        ndim = len(x_shape)
    except TypeError:
        raise TypeError(f"x_shape must be a sequence of 3 or 5 ints, got {x_shape!r}") from None
    if ndim not in (3, 5):
        raise ValueError(f"x_shape must be 3-D (1-D convolution) or 5-D (3-D convolution), "
                         f"got {ndim}-D shape {tuple(x_shape)}")
    rank = ndim - 2
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups,
              layout=LAYOUTS[rank][0] if layout is None else layout,
              weight_layout=WEIGHT_LAYOUTS[rank][0] if weight_layout is None else weight_layout,
              padding_mode=padding_mode, padding_value=padding_value)
    geom = _plan_geometry(rank, x_shape, weight_shape, dtype, kw)
    if geom.N == 0:
        raise ValueError("x_shape has batch size 0; nothing to time")
    nthreads = _threads.resolve_num_threads(num_threads)
    if rank == 1:
        found: List[Any] = _plan2d.find_algorithms(
            lift_shape(geom.input_shape(), geom.layout),
            lift_shape(geom.weight_shape(), geom.weight_layout), op=op, dtype=geom.dtype,
            num_threads=nthreads, **keywords_2d(geom))
        return found
    results = []
    for name in _algorithms.ALGORITHMS:
        try:
            plan = Conv3dPlan(geom, name)
        except ValueError:  # a tap's 2-D problem this algorithm cannot run
            continue
        if any(_algorithms.why_not(name, p.geometry, op) for p in plan.plans_2d.values()):
            continue
        results.append(_dispatch.AlgoResult(name, _time_plan(plan, op, nthreads, repeats),
                                            plan.workspace_bytes_for(op, nthreads)))
    return sorted(results, key=lambda r: r.time_ms)


def find_algorithms(x_shape: Sequence[int], weight_shape: Sequence[int], *,
                    op: str = "forward", stride: Any = 1, padding: Any = 0, dilation: Any = 1,
                    groups: int = 1, layout: Optional[str] = None,
                    weight_layout: Optional[str] = None, padding_mode: str = "zeros",
                    padding_value: float = 0.0, dtype: Any = "float32",
                    num_threads: Optional[int] = None) -> List[Any]:
    """Time every algorithm that can run a convolution pass, MIOpen-Find style.

    Parameters
    ----------
    x_shape, weight_shape : sequence of ints
        4-D for a 2-D convolution; 3-D or 5-D for a 1-D or 3-D one (timed as its 2-D
        convolutions, see :func:`find_algorithms_nd`).
    op : {"forward", "backward_data", "backward_weight"}
    stride, padding, dilation, groups, padding_mode, padding_value, dtype
        As in :func:`cconv.plan_conv2d`.
    layout, weight_layout : str, optional
        Default channels first: "NCHW" / "OIHW" ("NCW" / "OIW", "NCDHW" / "OIDHW").
    num_threads : int, optional

    Returns
    -------
    list of AlgoResult
        Named tuples ``(algo, time_ms, workspace_bytes)``, fastest first.
    """
    try:
        rank = len(tuple(x_shape))
    except TypeError:
        rank = 4  # not a sequence: the 2-D validation names it
    kw: Dict[str, Any] = dict(op=op, stride=stride, padding=padding, dilation=dilation,
                              groups=groups, padding_mode=padding_mode,
                              padding_value=padding_value, dtype=dtype, num_threads=num_threads)
    if rank in (3, 5):
        return find_algorithms_nd(x_shape, weight_shape, layout=layout,
                                  weight_layout=weight_layout, **kw)
    return list(_plan_module.find_algorithms(
        x_shape, weight_shape, layout="NCHW" if layout is None else layout,
        weight_layout="OIHW" if weight_layout is None else weight_layout, **kw))
