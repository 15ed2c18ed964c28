"""Running validated 1-D and 3-D passes on the 2-D machinery.

1-D: an axis of size 1 is inserted as the height (NCW -> NCHW, NWC -> NHWC, OIW -> OIHW,
WIO -> HWIO; stride (1, s), dilation (1, d), padding ((0, 0), (lo, hi))); the arrays are
views, nothing is copied, and the 2-D functions or plans run the problem.

3-D: a loop over depth taps.  Output depth slice ``od`` of a convolution reads input depth
slice ``id = od * stride + kd * dilation - pad`` through depth tap ``kd``; for a given tap
the valid ``od`` form one range, so the input slices they read form a strided view, and the
tap's contribution is one 2-D convolution of that batch of slices with ``weight[:, :, kd]``
(whatever algorithm the 2-D dispatcher picks for that 2-D shape), accumulated into the
output slices with the 2-D ``out=`` / ``beta=1``.  Nothing is unrolled: no im2col of the
volume, no copy of the input (the batch of a 2-D call is one sample's slices, a view; only
float16 operands are converted once, and a non-zero padding mode pads the depth once).
Samples are separate 2-D calls because a batch of several samples' slices is never a view.
Depth slices beyond the input contribute nothing (zero padding by index bounds); another
``padding_mode`` pads the depth axis once with ``numpy.pad`` (and, for a data gradient,
folds the padded slices' gradient back onto the slices they copy) while the 2-D calls pad
height and width themselves.  The three directions:

- gather (forward; a transposed convolution's data gradient): output slices from input ones;
- scatter (data gradient; transposed convolution): input slices from output ones;
- reduce (weight gradient): per tap, the 2-D weight gradient summed over the samples in a
  fixed order, so it is deterministic as the 2-D one is.

Activations are handled "depth-major": (N, D, C, H, W) views of NCDHW arrays and NDHWC
arrays as they are, so that ``a[n, depth_slice]`` is a 2-D NCHW / NHWC batch.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Set, Tuple

import numpy as np

from . import _dispatch as _dispatch_module
from . import _execute as _execute_module
from . import _geometry as _geometry_module
from . import _workspace
from . import functional as _functional_module
from .algorithms import direct_volume
from ._kernels import _runtime
from ._nd_geometry import NdGeometry, channels_last, to_layout, weight_to_layout
from ._threads import threads_for_work

# cconv's 2-D modules carry no type hints: Any-typed aliases keep ``mypy --strict`` quiet.
_F2: Any = _functional_module
_execute: Any = _execute_module
_g2: Any = _geometry_module

Array = np.ndarray[Any, Any]

# numpy.pad's name of each padding mode.
NUMPY_MODES = {"reflect": "reflect", "symmetric": "symmetric", "replicate": "edge",
               "circular": "wrap", "constant": "constant", "zeros": "constant"}


# -- the 2-D keywords of a geometry ----------------------------------------------------------

def layout_2d(layout: str) -> str:
    """The 2-D layout name a 1-D or 3-D layout runs as (channels first or last)."""
    if layout in ("NCW", "NCDHW"):
        return "NCHW"
    if layout in ("NWC", "NDHWC"):
        return "NHWC"
    return "HWIO" if channels_last(layout) else "OIHW"


def keywords_2d(geom: NdGeometry, transposed: bool = False) -> Dict[str, Any]:
    """The 2-D keywords of ``geom``: its height and width (3-D) or an H = 1 lift (1-D).

    ``transposed``: for the transposed-convolution functions, which take no
    ``padding_value`` (their geometry's constant mode is "zeros")."""
    stride: Tuple[int, ...]
    dilation: Tuple[int, ...]
    pads: Tuple[Tuple[int, int], ...]
    if geom.rank == 1:
        stride, dilation, pads = (1, geom.stride[0]), (1, geom.dilation[0]), ((0, 0), geom.pads[0])
    else:
        stride, dilation, pads = geom.stride[1:], geom.dilation[1:], geom.pads[1:]
    kw: Dict[str, Any] = dict(stride=tuple(stride), padding=tuple(pads),
                              dilation=tuple(dilation), groups=geom.groups,
                              layout=layout_2d(geom.layout),
                              weight_layout=layout_2d(geom.weight_layout),
                              padding_mode=geom.padding_mode)
    if not transposed:
        kw["padding_value"] = geom.padding_value
    return kw


@functools.lru_cache(maxsize=256)
def tap_geometry_2d(geom: NdGeometry, batch: int = 1) -> Any:
    """The 2-D ``ConvGeometry`` the 2-D calls of ``geom`` run (for a 3-D problem, that of a
    depth tap with ``batch`` slices; for 1-D, the whole problem lifted to height 1)."""
    spatial: Tuple[int, ...]
    kernel: Tuple[int, ...]
    if geom.rank == 1:
        batch, spatial, kernel = geom.N, (1, geom.spatial[0]), (1, geom.kernel[0])
    else:
        spatial, kernel = geom.spatial[1:], geom.kernel[1:]
    kw = keywords_2d(geom)
    layout, weight_layout = kw.pop("layout"), kw.pop("weight_layout")
    return _g2.make_geometry(to_layout(batch, geom.C, spatial, layout),
                             weight_to_layout(geom.K, geom.Cg, kernel, weight_layout),
                             layout=layout, weight_layout=weight_layout, dtype=geom.dtype, **kw)


# -- 1-D: the H = 1 lift ----------------------------------------------------------------------

def _height_axis(layout: str) -> int:
    """Where the 2-D height axis goes in a 1-D layout's array."""
    return {"NCW": 2, "NWC": 1, "OIW": 2, "WIO": 0}[layout]


def lift(array: Optional[Array], layout: str) -> Optional[Array]:
    """A 1-D array (or None) as a 2-D view with a height of 1.  (Indexing with None, not
    ``numpy.expand_dims``, whose axis normalisation was a tenth of a small 1-D call.)"""
    if array is None:
        return None
    return array[_LIFT_INDEX[layout]]


# The index that inserts the height axis of each 1-D layout.
_LIFT_INDEX = {layout: (slice(None),) * _height_axis(layout) + (None,)
               for layout in ("NCW", "NWC", "OIW", "WIO")}


# and the index that takes it away again
_DROP_INDEX = {layout: (slice(None),) * _height_axis(layout) + (0,)
               for layout in ("NCW", "NWC", "OIW", "WIO")}


def lift_shape(shape: Sequence[int], layout: str) -> Tuple[int, ...]:
    """A 1-D shape as the 2-D shape of :func:`lift`."""
    axis = _height_axis(layout)
    return (*shape[:axis], 1, *shape[axis:])


def drop(array: Array, layout: str) -> Array:
    """The inverse of :func:`lift`: a 2-D result of height 1 as a 1-D view (by indexing,
    a third of ``numpy.squeeze``'s time)."""
    if array.shape[_height_axis(layout)] != 1:
        raise ValueError(f"a lifted {layout} array has height 1, got shape {array.shape}")
    return array[_DROP_INDEX[layout]]


# -- 3-D: depth taps --------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class TapSpan:
    """The depth slices one tap pairs: output slices ``out`` read input slices ``inp``."""

    tap: int
    out: slice
    inp: slice
    count: int


def tap_spans(d_in: int, d_out: int, taps: int, stride: int, dilation: int,
              pad: int) -> List[TapSpan]:
    """For every depth tap that meets the input, the output slices it reaches.

    Output slice ``od`` (``0 <= od < d_out``) reads input slice ``od * stride + tap *
    dilation - pad`` when that lies in ``[0, d_in)``: one range of ``od`` per tap.
    """
    spans = []
    for tap in range(taps):
        offset = tap * dilation - pad
        lo = max(0, -(offset // stride))
        hi = min(d_out - 1, (d_in - 1 - offset) // stride)
        if lo > hi:
            continue
        count = hi - lo + 1
        first = lo * stride + offset
        spans.append(TapSpan(tap, slice(lo, hi + 1), slice(first, first + (count - 1) * stride
                                                           + 1, stride), count))
    return spans


def depth_major(array: Array, cl: bool) -> Array:
    """(N, D, ...) view: NCDHW -> (N, D, C, H, W); NDHWC as it is."""
    return array if cl else np.moveaxis(array, 2, 1)


def from_depth_major(array: Array, cl: bool) -> Array:
    """The inverse of :func:`depth_major` (a view)."""
    return array if cl else np.moveaxis(array, 1, 2)


def weight_tap(weight: Array, tap: int, weight_layout: str) -> Array:
    """The 2-D weight of depth tap ``tap``: (K, C/g, R, S) of OIDHW, (R, S, C/g, K) of DHWIO."""
    return weight[tap] if channels_last(weight_layout) else weight[:, :, tap]


def _add_bias(dst: Array, bias: Array, alpha: float, cl: bool) -> None:
    """``dst += alpha * bias`` over the channel axis of a depth-major array."""
    dst += alpha * (bias if cl else bias[:, None, None])


def _scale(dst: Array, beta: float) -> None:
    if beta == 0:
        dst.fill(0)
    elif beta != 1:
        dst *= beta


class Sink:
    """Where a 3-D activation result is accumulated, and how it reaches the caller.

    ``array`` is depth-major in the compute dtype (``in_layout``: in the layout's own
    order, as the folded kernels write it); the first write into it uses ``beta0``.
    Results are accumulated straight in ``out`` (or the returned array) when that order is
    the layout's (NDHWC, or ``in_layout``) and its dtype and memory allow; otherwise in a
    buffer that :meth:`finish` writes out as ``buffer + beta * out`` (the writers have
    applied ``alpha`` already).
    """

    def __init__(self, out: Optional[Array], shape: Tuple[int, ...], cl: bool,
                 dtype: np.dtype[Any], result_dtype: np.dtype[Any], beta: float,
                 reads: Sequence[Optional[Array]] = (), in_layout: bool = False) -> None:
        self.out, self.dtype, self.result_dtype = out, dtype, result_dtype
        self.beta = beta
        # the order of ``array`` is the layout's own: no depth-major view to undo
        self.plain = cl or in_layout
        if out is not None:
            # an ``out`` that may share memory with an operand (``reads``) is written only
            # at the end: the writers read their operands while they accumulate
            self.direct = (self.plain and out.dtype == dtype and out.flags.c_contiguous
                           and not _execute.overlaps(out, reads))
        else:
            self.direct = self.plain and result_dtype == dtype
        self._scope: Optional[_workspace._Scope] = None
        if self.direct:
            self.array = out if out is not None else _workspace.empty_result(shape, dtype)
            self.beta0 = beta if out is not None else 0.0
        else:
            # from the workspace pool, as the result below comes from kept result memory:
            # a fresh buffer of a volume's size is a page fault (and the kernel zeroing the
            # page) every 4 KiB or 2 MiB, measured at 10-13% of a C3D layer's tap loop
            dm_shape = shape if self.plain else (shape[0], shape[2], shape[1], *shape[3:])
            self._scope = _workspace._Scope()
            self.array = self._scope.empty(math.prod(dm_shape), dtype).reshape(dm_shape)
            self.beta0 = 0.0

    def finish(self) -> Array:
        """The result: ``out`` or a new array of the result dtype, in the layout."""
        if self.direct:
            return self.array
        result = self.array if self.plain else from_depth_major(self.array, False)
        if self.out is None:
            final = _workspace.empty_result(result.shape, self.result_dtype)
            final[...] = result
        elif self.beta == 0:
            self.out[...] = result
            final = self.out
        else:
            self.out[...] = result + self.beta * self.out.astype(self.dtype)
            final = self.out
        if self._scope is not None:
            self._scope.release()
            self._scope = None
        return final


# The 2-D calls a depth-tap loop makes (arrays in depth-major slices, 2-D layouts):
# gather / scatter (src, weight_2d, bias, dst, alpha, beta) write
# ``dst = alpha * (op(src, weight_2d) + bias) + beta * dst``; reduce (out_side, in_side, dst,
# beta) writes ``dst = weight_grad(out_side, in_side) + beta * dst``.
class Ops2d(Protocol):
    """The three 2-D operations a depth-tap loop is built of."""

    def gather(self, src: Array, weight: Array, bias: Optional[Array], dst: Array,
               alpha: float, beta: float) -> None:
        """Output-side slices ``dst`` from input-side slices ``src`` (a 2-D forward)."""

    def scatter(self, src: Array, weight: Array, bias: Optional[Array], dst: Array,
                alpha: float, beta: float) -> None:
        """Input-side slices ``dst`` from output-side slices ``src`` (a 2-D data gradient)."""

    def reduce(self, out_side: Array, in_side: Array, dst: Array, beta: float) -> None:
        """The 2-D weight gradient of one tap into ``dst``."""

    def algorithm(self, batch: int, op: str) -> Tuple[Any, int]:
        """The algorithm instance and thread count a 2-D pass ``op`` of a convolution
        ("forward": :meth:`gather`, "backward_data": :meth:`scatter`, "backward_weight":
        :meth:`reduce`) runs on ``batch`` slices."""


class FunctionalOps:
    """:class:`Ops2d` through the public 2-D functions (``transposed``: the
    ``conv_transpose2d`` family, whose forward is a scatter)."""

    def __init__(self, geom: NdGeometry, transposed: bool, algo: str, nthreads: int) -> None:
        self.kw = keywords_2d(geom, transposed)
        self.kw.update(algo=algo, num_threads=nthreads)
        self.transposed = transposed
        self.geom, self.algo, self.nthreads = geom, algo, nthreads

    def algorithm(self, batch: int, op: str) -> Tuple[Any, int]:
        """See :class:`Ops2d` (a convolution's passes: not the transposed ones)."""
        g2 = tap_geometry_2d(self.geom, batch)
        impl = _dispatch_module.select(g2, op, self.algo, self.nthreads)
        return impl, threads_for_work(impl.geom.flops, self.nthreads)

    def gather(self, src: Array, weight: Array, bias: Optional[Array], dst: Array,
               alpha: float, beta: float) -> None:
        """See :class:`Ops2d`."""
        if self.transposed:
            _F2.conv_transpose2d_backward_data(src, weight, dst.shape, output_shape=src.shape,
                                               out=dst, alpha=alpha, beta=beta, **self.kw)
        else:
            _F2.conv2d(src, weight, bias, out=dst, alpha=alpha, beta=beta, **self.kw)

    def scatter(self, src: Array, weight: Array, bias: Optional[Array], dst: Array,
                alpha: float, beta: float) -> None:
        """See :class:`Ops2d`."""
        if self.transposed:
            _F2.conv_transpose2d(src, weight, bias, output_shape=dst.shape, out=dst,
                                 alpha=alpha, beta=beta, **self.kw)
        else:
            _F2.conv2d_backward_data(src, weight, dst.shape, out=dst, alpha=alpha, beta=beta,
                                     **self.kw)

    def reduce(self, out_side: Array, in_side: Array, dst: Array, beta: float) -> None:
        """See :class:`Ops2d`."""
        if self.transposed:  # the transposed conv's output is the forward input side
            _F2.conv_transpose2d_backward_weight(in_side, out_side, dst.shape,
                                                 output_shape=in_side.shape, out=dst,
                                                 beta=beta, **self.kw)
        else:
            _F2.conv2d_backward_weight(out_side, in_side, dst.shape, out=dst, beta=beta,
                                       **self.kw)


Call = Callable[[Array, int, Array, float, Optional[Array]], None]


def _covers(sl: slice, size: int) -> bool:
    return range(size)[sl] == range(size)


def _accumulate(src: Array, dst: Array, pairs: List[Tuple[int, slice, slice]], call: Call,
                beta0: float, bias: Optional[Array], alpha: float, cl: bool) -> None:
    """Every (tap, src slices, dst slices) pair of every sample through ``call``.

    A pair that writes every dst slice goes first with ``beta0`` and the bias; without one,
    ``dst`` is scaled by ``beta0`` first and the bias added last."""
    n = src.shape[0]
    full = [p for p in pairs if _covers(p[2], dst.shape[1])]
    first = full[0] if full and n else None
    rest = [p for p in pairs if p is not first]
    if first is None:
        _scale(dst, beta0)
    for i in range(n):
        if first is not None:
            tap, s, d = first
            call(src[i, s], tap, dst[i, d], beta0, bias)
        for tap, s, d in rest:
            call(src[i, s], tap, dst[i, d], 1.0, None)
    if first is None and bias is not None:
        _add_bias(dst, bias, alpha, cl)


def _pad_depth(array_dm: Array, geom: NdGeometry) -> Tuple[Array, int]:
    """``array_dm`` padded along depth by the geometry's mode, and the depth pad left to
    index bounds (0 once padded; the zeros mode pads nothing)."""
    lo, hi = geom.pads[0]
    if geom.padding_mode == "zeros" or (lo, hi) == (0, 0):
        return array_dm, lo
    widths = [(0, 0)] * array_dm.ndim
    widths[1] = (lo, hi)
    kw: Dict[str, Any] = {"mode": NUMPY_MODES[geom.padding_mode]}
    if geom.padding_mode == "constant":
        kw["constant_values"] = geom.padding_value
    return np.pad(array_dm, widths, **kw), 0


def _fold_depth(grad_dm: Array, dst: Array, geom: NdGeometry, beta0: float) -> None:
    """``dst = fold(grad_dm) + beta0 * dst``: the gradient of each depth-padded slice added to
    the slice it copies (the adjoint of :func:`_pad_depth`, in a fixed order)."""
    lo, hi = geom.pads[0]
    depth = dst.shape[1]
    kw: Dict[str, Any] = {"mode": NUMPY_MODES[geom.padding_mode]}
    if kw["mode"] == "constant":
        kw["constant_values"] = -1
    source = np.pad(np.arange(depth), (lo, hi), **kw)
    interior = grad_dm[:, lo:lo + depth]
    if beta0 == 0:
        dst[...] = interior
    else:
        dst *= beta0
        dst += interior
    for p in (*range(lo), *range(lo + depth, lo + depth + hi)):
        if source[p] >= 0:
            dst[:, source[p]] += grad_dm[:, p]


def _compute(array: Array, geom: NdGeometry) -> Array:
    return np.asarray(array).astype(geom.dtype, copy=False)


def depthwise_forward_ndhwc(geom: NdGeometry, x: Array, weight: Array, bias: Optional[Array],
                            out: Optional[Array], alpha: float, beta: float,
                            result_dtype: np.dtype[Any], algo: str,
                            nthreads: int) -> Optional[Array]:
    """A 3-D depthwise forward (one output channel per input channel) in NDHWC with zero
    padding, on the depthwise kernel that sums the depth taps in registers with the others
    (``_depthwise.forward_ndhwc``); None where that does not apply (the tap loop runs it).

    The tap loop makes one 2-D call per depth tap, each reading and writing the whole
    output: on a memory-bound depthwise layer three times the traffic of one pass."""
    if not _depthwise_ndhwc(geom, algo):
        return None
    return _depthwise_ndhwc_kernel(geom, x, weight, False, bias, geom.output_shape(),
                                   geom.stride, tuple(lo for lo, _ in geom.pads), out, alpha,
                                   beta, result_dtype, (x, weight, bias), nthreads)


def depthwise_backward_data_ndhwc(geom: NdGeometry, dy: Array, weight: Array,
                                  out: Optional[Array], alpha: float, beta: float,
                                  result_dtype: np.dtype[Any], algo: str,
                                  nthreads: int) -> Optional[Array]:
    """The data gradient of a 3-D depthwise convolution (one output channel per input
    channel) at stride 1 in NDHWC with zero padding, as the forward kernel of
    :func:`depthwise_forward_ndhwc`: the correlation of the output gradient with the
    weight flipped along every axis, begin padding ``dilation * (kernel - 1) - begin`` (taps
    past the gradient's end read nothing, as the end padding's zeros would); None where
    that does not apply (the tap loop runs it).

    The tap loop makes one 2-D data gradient per depth tap, each adding into the whole
    result.  Against it (AMD EPYC Zen 4, AVX-512, float32, 2x16x56x56, 64 channels, 3x3x3,
    padding 1, interleaved, 1 / 2 threads): 19.9 / 11.2 ms -> 8.8 / 4.6 ms."""
    begin = tuple(lo for lo, _ in _geometry_module.flipped_pads(geom.kernel, geom.dilation,
                                                                geom.pads))
    if (not _depthwise_ndhwc(geom, algo) or any(s != 1 for s in geom.stride)
            or min(begin) < 0):
        return None
    return _depthwise_ndhwc_kernel(geom, dy, weight, True, None, geom.input_shape(),
                                   (1, 1, 1), begin, out, alpha, beta, result_dtype,
                                   (dy, weight), nthreads)


def _depthwise_ndhwc(geom: NdGeometry, algo: str) -> bool:
    """Whether the 3-D depthwise kernel takes ``geom``: NDHWC, zero padding, one output
    channel per input channel, ``algo`` "auto" or "depthwise"."""
    if geom.rank != 3 or geom.layout != "NDHWC" or geom.padding_mode != "zeros":
        return False
    C, K = geom.input_shape()[-1], geom.output_shape()[-1]
    return algo in ("auto", "depthwise") and geom.groups == C == K


def _depthwise_ndhwc_kernel(geom: NdGeometry, src: Array, weight: Array, flip: bool,
                            bias: Optional[Array], shape: Tuple[int, ...],
                            stride: Tuple[int, ...], begin: Tuple[int, ...],
                            out: Optional[Array], alpha: float, beta: float,
                            result_dtype: np.dtype[Any], reads: Sequence[Optional[Array]],
                            nthreads: int) -> Optional[Array]:
    """``_depthwise.forward_ndhwc`` of ``src`` with the weight (flipped along every axis
    where ``flip``) into a result of ``shape``; None for a non-finite weight."""
    from ._simd import depthwise as kernels
    w = _compute(weight, geom)
    if not np.isfinite(w).all():
        return None  # the kernel skips taps in the padding: 0 * Inf must give NaN there
    src = np.ascontiguousarray(_compute(src, geom))
    C = geom.input_shape()[-1]
    # (K, 1, kD, R, S) or (kD, R, S, 1, K) -> (kD, R, S, C)
    wt = _workspace.aligned_empty(tuple(geom.kernel) + (C,), geom.dtype)
    taps = w[..., 0, :] if channels_last(geom.weight_layout) else np.moveaxis(w[:, 0], 0, -1)
    wt[...] = taps[::-1, ::-1, ::-1] if flip else taps
    b = _compute(bias, geom) if bias is not None else np.zeros(0, geom.dtype)
    # NDHWC is its own depth-major order: the sink holds the result in place when it can
    sink = Sink(out, shape, True, geom.dtype, result_dtype, beta, reads)
    lists = np.empty((nthreads, 4 * math.prod(geom.kernel)), np.int64)
    kernels.forward_ndhwc(src, wt, sink.array, b, stride, geom.dilation, begin, alpha,
                          sink.beta0, lists, nthreads)
    return sink.finish()


# Where ``algo="auto"`` runs the folded kernels instead of the depth-tap loop: unless the
# tap loop's 2-D calls run BLAS (unpadded 1x1 slices) or Winograd with at least this many
# channels per group on both sides.  Measured (AMD EPYC Zen 4, AVX-512, float32, forward,
# milliseconds folded / tap loop with auto's 2-D choice, 1 and 2 threads): C3D's 3 -> 64
# stem 16x112x112 43.7 / 93.1 and 34.7 / 62.6 (2-D: depthwise kernels); 64 -> 128 stride 2
# 16x56x56 92.5 / 91.9 and 42.9 / 59.4 (direct); 32 channels dilation 2 on 32^3 20.1 / 27.0
# and 11.6 / 19.7 (direct); a 3-D U-Net level, 32 channels on 64^3, 168 / 187 and 98 / 117
# (Winograd); but 64 channels 16x56x56 249 / 202 and 144 / 116, 128 channels 8x28x28
# 118 / 72 and 62 / 44 (Winograd).  The data gradient likewise (32 channels dilation 2: 21.3
# / 29.4 and 14.9 / 27.6; U-Net level 159 / 208 and 86 / 110; 64 channels 248 / 184 and 117 /
# 84), except with few input channels, whose gradient the depthwise kernels compute on the
# tap loop: the C3D stem's 173 / 111 and 97 / 98.
# Intel Xeon model 207 (AVX-512, two full-width FMA units a core) measured the Winograd taps
# faster from 16 channels (float32, interleaved, folded time over tap-loop time, forward /
# data gradient, NCDHW / NDHWC, 1 thread then 2): the U-Net level 1.62-1.74 / 1.28-1.63,
# 2 x 16 channels on 32x64x64 1.55-1.82 / 1.43-1.61, 2 x 32 on 16x56x56 1.43-1.56 /
# 1.23-1.47, 48 and 64 channels 1.95-2.08 on 1 thread; 8 channels 0.54-0.65 (the folded
# kernels win).  So the threshold is per CPU vendor, each from its own measurements (AMD:
# Zen 4 above; another or unknown CPU takes AMD's, the one that keeps the folded kernels).
WINOGRAD_TAPS_FROM_CHANNELS = {"intel": 16, "amd": 64, "other": 64}
CPU_VENDOR = _runtime.cpu_vendor()


def preferred(geom: NdGeometry, op: str, vendor: Optional[str] = None) -> bool:
    """Whether ``algo="auto"`` runs pass ``op`` (forward or backward_data) of ``geom``, a
    problem the folded kernels apply to (``direct_volume.applies``), on them
    (:data:`WINOGRAD_TAPS_FROM_CHANNELS` of ``vendor``, default this CPU's)."""
    choice = _dispatch_module.heuristic(tap_geometry_2d(geom, geom.N), op)
    if choice == "gemm" or (choice == "depthwise" and op == "backward_data"):
        return False
    threshold = WINOGRAD_TAPS_FROM_CHANNELS[vendor or CPU_VENDOR]
    return not (choice == "winograd" and min(geom.Cg, geom.Kg) >= threshold)


def folds_depth(geom: NdGeometry, algo: str, op: str) -> bool:
    """Whether a 3-D pass ``op`` with ``algo`` runs on the folded direct kernels
    (``algorithms.direct_volume``): always for ``"direct"`` where they apply, for
    ``"auto"`` where :func:`preferred`."""
    if not direct_volume.applies(geom):  # rank 3 included
        return False
    return algo == "direct" or (algo == "auto" and preferred(geom, op))


def folded_forward(geom: NdGeometry, x: Array, weight: Array, bias: Optional[Array],
                   out: Optional[Array], alpha: float, beta: float,
                   result_dtype: np.dtype[Any], nthreads: int) -> Array:
    """conv3d on the folded direct kernels (:func:`folds_depth`): ``out`` or a new array of
    ``result_dtype``."""
    sink = Sink(out, geom.output_shape(), geom.channels_last, geom.dtype, result_dtype, beta,
                (x, weight, bias), in_layout=True)
    direct_volume.forward(geom, x, weight, bias, sink.array, alpha, sink.beta0, nthreads)
    return sink.finish()


def folded_backward_data(geom: NdGeometry, dy: Array, weight: Array, out: Optional[Array],
                         alpha: float, beta: float, result_dtype: np.dtype[Any],
                         nthreads: int) -> Optional[Array]:
    """conv3d's data gradient on the folded direct kernels, or None where they do not run it
    (``direct_volume.backward_data``)."""
    sink = Sink(out, geom.input_shape(), geom.channels_last, geom.dtype, result_dtype, beta,
                (dy, weight), in_layout=True)
    if not direct_volume.backward_data(geom, dy, weight, sink.array, alpha, sink.beta0,
                                       nthreads):
        return None
    return sink.finish()


def gather(geom: NdGeometry, ops: Ops2d, src: Array, weight: Array, bias: Optional[Array],
           result_shape: Tuple[int, ...], out: Optional[Array], alpha: float, beta: float,
           result_dtype: np.dtype[Any]) -> Array:
    """Output-side result from input-side ``src`` (conv3d; a transposed conv's data gradient).

    ``result_shape``: the result's shape in the layout; its depth may fall short of the
    geometry's output depth (a transposed convolution's input lacks the extra slices)."""
    cl = geom.channels_last
    src_dm, pad = _pad_depth(depth_major(_compute(src, geom), cl), geom)
    w = _compute(weight, geom)
    sink = Sink(out, result_shape, cl, geom.dtype, result_dtype, beta, (src, weight, bias))
    spans = tap_spans(src_dm.shape[1], sink.array.shape[1], geom.kernel[0], geom.stride[0],
                      geom.dilation[0], pad)

    def call(s: Array, tap: int, d: Array, b: float, bias_: Optional[Array]) -> None:
        ops.gather(s, weight_tap(w, tap, geom.weight_layout), bias_, d, alpha, b)

    pairs = [(t.tap, t.inp, t.out) for t in spans]
    done = _taps_packed_once(geom, ops, "forward", src_dm, w, pairs, sink.array, sink.beta0,
                             bias, alpha)
    _accumulate(src_dm[done:], sink.array[done:], pairs, call, sink.beta0, bias, alpha, cl)
    if pad and not np.isfinite(w).all():
        _padded_depth_nan(sink.array, w, geom, src_dm.shape[1], pad, cl)
    return sink.finish()


def _winograd_taps(geom: NdGeometry, ops: Ops2d, op: str, counts: Set[int],
                   ntaps: int) -> Optional[Tuple[Any, int]]:
    """Whether the packed-once paths can run pass ``op`` of a convolution whose ``ntaps``
    depth taps read ranges of ``counts`` slices: every tap on Winograd's 2-D kernels, zero
    padding, depth stride 1, at least two taps, not transposed.  Then one tap's algorithm
    instance and the thread count for all of them; else None."""
    from .algorithms import winograd
    if (geom.rank != 3 or geom.N == 0 or geom.padding_mode != "zeros" or geom.stride[0] != 1
            or ntaps < 2 or getattr(ops, "transposed", False)):
        return None
    chosen = [ops.algorithm(n, op) for n in counts]
    if not all(isinstance(impl, winograd.WinogradConvolution)
               and impl.geom.padding_mode == "zeros" and impl.geom.dtype == geom.dtype
               for impl, _ in chosen):
        return None
    return chosen[0][0], min(t for _, t in chosen)


def _taps_packed_once(geom: NdGeometry, ops: Ops2d, op: str, src_dm: Array, w: Array,
                      pairs: List[Tuple[int, slice, slice]], dst: Array, beta0: float,
                      bias: Optional[Array], alpha: float) -> int:
    """Pass ``op`` ("forward": :func:`gather`, "backward_data": :func:`scatter`) of the first
    images of a convolution whose depth taps all run Winograd on 2-D kernels, each image's
    ``src_dm`` slices packed once for all taps (``winograd.slice_range_forward``) instead of
    once per tap that reads them: the number of images done (0 where that does not apply;
    it stops before an image that is not all finite), written as :func:`_accumulate`
    writes them.  The same bits as the tap loop where its 2-D calls take the stack's
    Winograd tile size (``winograd.stack_tile``: F(4x4,3x3) or F(2x2,3x3)); a range of
    slices whose tiles and the whole stack's fall on either side of the schedule's
    ``F4_MIN_TILES`` can differ, within F(4x4)'s error.

    Measured (AMD EPYC Zen 5, AVX-512, float32, interleaved with the tap loop in one
    process, medians of 7, NCDHW / NDHWC): C3D's 64-channel layer (2x16x56x56) forward
    1.09x / 1.16x on 1 thread and 1.11x / 1.22x on 2, data gradient 1.09x / 1.55x and
    1.10x / 1.57x; its 128-channel layer (2x8x28x28) forward 1.05x / 1.16x and 1.05x /
    1.18x, data gradient 1.06x / 1.31x and 1.14x / 1.35x."""
    from .algorithms import winograd
    full = [p for p in pairs if _covers(p[2], dst.shape[1])]
    counts = {len(range(src_dm.shape[1])[s]) for _, s, _ in pairs}
    taps = _winograd_taps(geom, ops, op, counts, len(pairs)) if full else None
    if taps is None:
        return 0
    impl, nthreads = taps
    data_gradient = op == "backward_data"
    weights = [weight_tap(w, tap, geom.weight_layout) for tap, _, _ in pairs]
    if channels_last(geom.weight_layout):  # (R, S, C/g, K) -> (K, C/g, R, S)
        weights = [wt.transpose(3, 2, 0, 1) for wt in weights]

    def slices_2d(n: int) -> Any:
        return tap_geometry_2d(geom, n).kernel_geometry

    tile = winograd.stack_tile(slices_2d, src_dm.shape[1], data_gradient)
    filters = winograd.transformed_filters(impl.geom, weights, nthreads, data_gradient, tile)
    if filters is None:
        return 0
    U = {tap: filters[k] for k, (tap, _, _) in enumerate(pairs)}
    first = full[0]
    order = [first] + [p for p in pairs if p is not first]
    for i in range(geom.N):
        x, y = src_dm[i], dst[i]
        if geom.channels_last:  # depth-major slices as logical NCHW stacks
            x, y = x.transpose(0, 3, 1, 2), y.transpose(0, 3, 1, 2)
        calls = [(p[1], U[p[0]], bias if p is first else None, y[p[2]],
                  beta0 if p is first else 1.0) for p in order]
        if not winograd.slice_range_forward(slices_2d, x, calls, alpha, nthreads,
                                            data_gradient, tile):
            return i
    return geom.N


def _padded_depth_nan(dst: Array, w: Array, geom: NdGeometry, depth: int, pad: int,
                      cl: bool) -> None:
    """NaN where a depth tap holding a non-finite weight meets the zero padding.

    The tap loop skips depth slices outside the input (they are zeros), but by the
    definition (and in PyTorch) a zero slice times an infinite or NaN weight adds NaN: every
    pixel of output slice ``od`` of channel ``k`` when depth tap ``kd`` of ``k`` holds one."""
    weight_cl = channels_last(geom.weight_layout)
    for kd in range(geom.kernel[0]):
        bad = ~np.isfinite(weight_tap(w, kd, geom.weight_layout))  # (R, S, C/g, K) / (K, C/g, R, S)
        channels = np.flatnonzero(bad.any(axis=(0, 1, 2)) if weight_cl
                                  else bad.any(axis=(1, 2, 3)))
        if channels.size == 0:
            continue
        for od in range(dst.shape[1]):
            i_d = od * geom.stride[0] + kd * geom.dilation[0] - pad
            if 0 <= i_d < depth:
                continue
            if cl:
                dst[:, od, ..., channels] = np.nan
            else:
                dst[:, od, channels] = np.nan


def scatter(geom: NdGeometry, ops: Ops2d, src: Array, weight: Array, bias: Optional[Array],
            out: Optional[Array], alpha: float, beta: float,
            result_dtype: np.dtype[Any]) -> Array:
    """Input-side result (of the geometry's input shape) from output-side ``src`` (conv3d's
    data gradient; a transposed convolution), whose depth may fall short of the output's."""
    cl = geom.channels_last
    src_dm = depth_major(_compute(src, geom), cl)
    w = _compute(weight, geom)
    sink = Sink(out, geom.input_shape(), cl, geom.dtype, result_dtype, beta,
                (src, weight, bias))
    lo, hi = geom.pads[0]
    padded = geom.padding_mode != "zeros" and (lo, hi) != (0, 0)
    if padded:  # the gradient of the depth-padded input, folded at the end
        shape = sink.array.shape
        target = np.empty((shape[0], shape[1] + lo + hi, *shape[2:]), geom.dtype)
        beta0, pad, target_bias = 0.0, 0, None
    else:
        target, beta0, pad, target_bias = sink.array, sink.beta0, lo, bias
    spans = tap_spans(target.shape[1], src_dm.shape[1], geom.kernel[0], geom.stride[0],
                      geom.dilation[0], pad)

    def call(s: Array, tap: int, d: Array, b: float, bias_: Optional[Array]) -> None:
        ops.scatter(s, weight_tap(w, tap, geom.weight_layout), bias_, d, alpha, b)

    pairs = [(t.tap, t.out, t.inp) for t in spans]
    done = 0 if padded else _taps_packed_once(geom, ops, "backward_data", src_dm, w, pairs,
                                              target, beta0, target_bias, alpha)
    _accumulate(src_dm[done:], target[done:], pairs, call, beta0, target_bias, alpha, cl)
    if padded:
        _fold_depth(target, sink.array, geom, sink.beta0)
        if bias is not None:
            _add_bias(sink.array, bias, alpha, cl)
    return sink.finish()


def reduce(geom: NdGeometry, ops: Ops2d, out_side: Array, in_side: Array,
           out: Optional[Array], alpha: float, beta: float,
           result_dtype: np.dtype[Any]) -> Array:
    """The weight gradient from output-side ``out_side`` (conv3d's ``grad_out``, a transposed
    convolution's ``x``) and input-side ``in_side`` (conv3d's ``x``, a transposed
    convolution's ``grad_out``), in ``geom.weight_layout``."""
    cl = geom.channels_last
    o_dm = depth_major(_compute(out_side, geom), cl)
    i_dm, pad = _pad_depth(depth_major(_compute(in_side, geom), cl), geom)
    grad = np.empty(geom.weight_shape(), geom.dtype)
    spans = {t.tap: t for t in tap_spans(i_dm.shape[1], o_dm.shape[1], geom.kernel[0],
                                         geom.stride[0], geom.dilation[0], pad)}
    if not _reduce_packed_once(geom, ops, o_dm, i_dm, list(spans.values()), grad):
        for tap in range(geom.kernel[0]):
            dst = weight_tap(grad, tap, geom.weight_layout)
            span = spans.get(tap)
            if span is None or geom.N == 0:
                dst.fill(0)
                continue
            for i in range(geom.N):
                ops.reduce(o_dm[i, span.out], i_dm[i, span.inp], dst, 0.0 if i == 0 else 1.0)
    result: Array = _execute.scaled_into(grad.astype(result_dtype, copy=False), out, alpha, beta)
    return result


def _reduce_packed_once(geom: NdGeometry, ops: Ops2d, o_dm: Array, i_dm: Array,
                        spans: List[TapSpan], grad: Array) -> bool:
    """The weight gradient of a convolution whose depth taps all run Winograd on 2-D
    kernels, each image's slices packed once for all taps
    (``winograd.slice_range_weight_gradients``) instead of once per tap that reads them;
    False (nothing written) where that does not apply or an operand is not finite.

    Measured (AMD EPYC Zen 5, AVX-512, float32, interleaved with the tap loop in one
    process, medians of 7): a 3-D U-Net level, 32 -> 32 channels on 64^3, 79.2 -> 61.8 ms
    on 1 thread and 44.0 -> 33.8 ms on 2 (the packing was 23% of the tap loop's time,
    perf); C3D's 64- and 128-channel layers 1.12-1.16x.  The same bits as the tap loop."""
    from .algorithms import winograd
    taps = _winograd_taps(geom, ops, "backward_weight", {span.count for span in spans},
                          len(spans))
    if taps is None:
        return False
    nthreads = taps[1]
    cl = geom.channels_last
    per_image = []
    for i in range(geom.N):
        # depth-major slices as logical NCHW stacks
        dy, x = ((o_dm[i], i_dm[i]) if not cl
                 else (o_dm[i].transpose(0, 3, 1, 2), i_dm[i].transpose(0, 3, 1, 2)))
        grads = winograd.slice_range_weight_gradients(
            lambda n: tap_geometry_2d(geom, n).kernel_geometry, dy, x,
            [(span.out, span.inp) for span in spans], nthreads)
        if grads is None:
            return False
        per_image.append(grads)
    reached = {span.tap: k for k, span in enumerate(spans)}
    for tap in range(geom.kernel[0]):
        dst = weight_tap(grad, tap, geom.weight_layout)
        if tap not in reached:
            dst.fill(0)
            continue
        total = per_image[0][reached[tap]].copy()
        for grads in per_image[1:]:  # images in order: the same bits on any thread count
            total += grads[reached[tap]]
        dst[...] = _execute_module.weight_in_layout(
            total, "HWIO" if channels_last(geom.weight_layout) else "OIHW")
    return True
