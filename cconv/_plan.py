"""Plans (a validated geometry with its algorithm chosen once) and algorithm search."""

from __future__ import annotations

import numpy as np

from . import _dispatch, functional
from ._geometry import as_float_array, check_dtype, compute_dtype, make_geometry
from ._threads import resolve_num_threads


class ConvPlan:
    """A convolution problem validated once, with its algorithm and schedules cached.

    Attributes
    ----------
    output_shape : tuple
        Forward output shape in ``layout`` order.
    algorithm : str
        The forward algorithm, one of ``cconv.ALGORITHMS``.
    workspace_bytes : int
        Bytes of scratch buffers a forward call allocates besides its result.
    geometry : ConvGeometry
    """

    def __init__(self, geometry, algorithm, keywords):
        self.geometry = geometry
        self.algorithm = algorithm
        self._keywords = keywords
        self.output_shape = geometry.output_shape()
        self.workspace_bytes = int(
            _dispatch.implementation(geometry, algorithm).workspace_bytes("forward"))

    def __repr__(self):
        return (f"ConvPlan(input={self.geometry.input_shape()}, weight="
                f"{self.geometry.weight_shape()}, output={self.output_shape}, "
                f"algorithm={self.algorithm!r}, workspace_bytes={self.workspace_bytes})")

    def prepare_weight(self, weight, *, num_threads=None):
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
        w = as_float_array(weight, "weight")
        if w.shape != g.weight_shape():
            raise ValueError(f"weight has shape {w.shape}, this plan needs {g.weight_shape()}")
        w = np.array(w, copy=True)  # the caller's dtype: results keep numpy.result_type
        w.flags.writeable = False
        impl = _dispatch.implementation(g, self.algorithm)
        wv = functional._weight_oihw(w, self._keywords["weight_layout"], g.dtype)
        data = impl.prepare_weight(wv, resolve_num_threads(num_threads))
        return PreparedWeight(self, w, None if data is None else (impl.name, data, g))

    def forward(self, x, weight, bias=None, out=None, *, alpha=1.0, beta=0.0, num_threads=None):
        """:func:`cconv.conv2d` with this plan's keywords and algorithm.

        ``weight`` may be a :class:`PreparedWeight` of this plan: its transformed filter is
        then reused instead of recomputed."""
        prepared = None
        if isinstance(weight, PreparedWeight):
            weight, prepared = weight._unwrap(self)
        return functional._conv2d(x, weight, bias, self._keywords, self.algorithm, out, alpha,
                                  beta, num_threads, prepared)

    def backward_data(self, grad_out, weight, out=None, *, alpha=1.0, beta=0.0,
                      num_threads=None):
        """:func:`cconv.conv2d_backward_data` for this plan's input shape."""
        if isinstance(weight, PreparedWeight):
            weight = weight._unwrap(self)[0]
        return functional.conv2d_backward_data(
            grad_out, weight, self.geometry.input_shape(), algo=self._algo("backward_data"),
            out=out, alpha=alpha, beta=beta, num_threads=num_threads, **self._keywords)

    def backward_weight(self, grad_out, x, out=None, *, alpha=1.0, beta=0.0, num_threads=None):
        """:func:`cconv.conv2d_backward_weight` for this plan's weight shape."""
        return functional.conv2d_backward_weight(
            grad_out, x, self.geometry.weight_shape(), algo=self._algo("backward_weight"),
            out=out, alpha=alpha, beta=beta, num_threads=num_threads, **self._keywords)

    def _algo(self, op):
        if _dispatch.why_not(self.algorithm, self.geometry, op) is None:
            return self.algorithm
        return "auto"


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

    def __init__(self, plan, weight, prepared):
        self._plan = plan
        self.weight = weight
        self._prepared = prepared
        self.algorithm = None if prepared is None else prepared[0]
        self.nbytes = 0 if prepared is None else int(prepared[1].nbytes)

    def __repr__(self):
        return (f"PreparedWeight(shape={self.weight.shape}, dtype={self.weight.dtype}, "
                f"algorithm={self.algorithm!r}, nbytes={self.nbytes})")

    def _unwrap(self, plan):
        if plan is not self._plan:
            raise ValueError("weight was prepared by another plan; call prepare_weight of "
                             "this plan")
        return self.weight, self._prepared


def _plan_geometry(x_shape, weight_shape, dtype, stride, padding, dilation, groups, layout,
                   weight_layout):
    dtype = compute_dtype(check_dtype(dtype, "dtype"))
    return make_geometry(x_shape, weight_shape, stride=stride, padding=padding,
                         dilation=dilation, groups=groups, layout=layout,
                         weight_layout=weight_layout, dtype=dtype, x_name="x_shape",
                         w_name="weight_shape")


def plan_conv2d(x_shape, weight_shape, *, stride=1, padding=0, dilation=1, groups=1,
                layout="NCHW", weight_layout="OIHW", dtype="float32", algo="auto"):
    """Validate a convolution once and choose its algorithm.

    Parameters
    ----------
    x_shape, weight_shape : sequence of 4 ints
        In ``layout`` / ``weight_layout`` order.
    stride, padding, dilation, groups, layout, weight_layout
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
                          layout, weight_layout)
    impl = _dispatch.select(geom, "forward", algo, resolve_num_threads(None))
    keywords = dict(stride=stride, padding=padding, dilation=dilation, groups=groups,
                    layout=layout, weight_layout=weight_layout)
    return ConvPlan(geom, impl.name, keywords)


def find_algorithms(x_shape, weight_shape, *, op="forward", stride=1, padding=0, dilation=1,
                    groups=1, layout="NCHW", weight_layout="OIHW", dtype="float32",
                    num_threads=None):
    """Time every algorithm that can run a convolution pass, MIOpen-Find style.

    Parameters
    ----------
    x_shape, weight_shape : sequence of 4 ints
    op : {"forward", "backward_data", "backward_weight"}
    stride, padding, dilation, groups, layout, weight_layout, dtype
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
                          layout, weight_layout)
    if geom.N == 0:
        raise ValueError(f"x_shape has batch size 0; nothing to time")
    return _dispatch.time_algorithms(geom, op, resolve_num_threads(num_threads))
