"""Winograd convolution, F(2x2,3x3) and F(4x4,3x3): forward, backward-data, backward-weight.

Forward (Lavin & Gray): ``Y = A^T [(G g G^T) * (B^T d B)] A`` on overlapping 4x4 input tiles
``d`` giving 2x2 output tiles; or, where ``winograd_schedule.f4_problem`` takes it, 6x6
tiles giving 4x4 (F(4x4,3x3), ``cconv/_kernels/_winograd4.pxi.tp``: 36 products per 16
output pixels, 0.56x F(2x2)'s, for a transformed filter 2.25x the size and a float32 error
about 20x F(2x2)'s), for the forward and the data gradient.  The filter transform
``U = G g G^T`` runs once per call on vectors of 32 filters (parallel over blocks of (output
channels, 8 input channels)), or once per ``ConvPlan.prepare_weight``; the input transform,
the channel-reduction GEMMs (one per transformed matrix) and the output transform run fused
per block of tiles in ``cconv._kernels._winograd_<isa>`` (Cython, OpenMP ``prange`` over
(image, group, tile block), GEMM register-tiled with GCC vector types).  The GEMM is done
in Cython, not BLAS: a BLAS call between ``prange`` regions competes with the OpenMP
workers still spinning after a region (a NumPy GEMM measured 169 -> 31 GFLOP/s on 2
threads that way), and it would need the 16 transformed matrices of the whole batch in memory.

Backward-data of a 3x3 stride-1 convolution is the forward convolution of ``dy`` with the
filter rotated by 180 degrees and its channel roles swapped (per group), padded by
``2 - pad`` on each side (a negative value crops): it runs through the forward machinery.

Backward-weight: ``dg = G^T [sum_tiles (A dY A^T) * (B^T d B)] G`` (exact: the adjoint of the
forward).  The 16 transformed products are reduced over images and tiles by jobs that each
own a (split, group, channel chunk, output-channel chunk, half or all of the 16 matrices)
and walk a fixed range of tile blocks in order; the splits are summed in order, so the
result does not depend on the thread count.

Memory: the input is packed once (zero-padded, channel-blocked, ~1x the activations);
transformed tiles exist only per job, in per-thread scratch of ``16 x tile_block x channels``.
Depthwise and few-channel groups are padded to a vector of output channels (and backward-weight
packs ``dy`` in blocks of 2 vectors), so there the packed buffers exceed the activations.

Sizes and job layouts live in ``winograd_schedule``; accuracy and speed: see
``WinogradConvolution``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

from .. import _workspace
from .._boundary import padding_maps
from .._geometry import COMPUTE_DTYPES
from .._kernels import _layout
from .._simd import winograd as kernels
from . import winograd_schedule as schedule
from .base import Algorithm, TransformedWeight
from .direct import NO_BIAS, DirectConvolution

if TYPE_CHECKING:
    from .._geometry import ConvGeometry
    from .._workspace import _Scope
    from .winograd_schedule import TileProblem

Array = npt.NDArray[Any]

# The kernels' function suffix per compute dtype (their C type).
_CTYPE = dict(zip(COMPUTE_DTYPES, ("float", "double")))


def pack_input(problem: TileProblem, x: Array, nthreads: int, ws: _Scope,
               maps: Tuple[Any, ...] = ()) -> Optional[Array]:
    """The padded blocked input of ``problem``, or None if ``x`` holds a NaN or an
    infinity (noted by the packing as it copies, without an extra pass).  Zero padding, or
    the padding mode of ``maps`` (``_boundary.padding_maps``)."""
    p = problem
    packed = ws.empty(p.packed_input_size(), p.dtype)
    bad = _layout.pack_input(x, packed, p.G, p.Cg, p.Cg, 1, p.block, p.pt, p.pl, p.Hp, p.Wp,
                             nthreads, *maps)
    return None if bad else packed


def transform_filter(problem: TileProblem, w: Array, nthreads: int, U: Array) -> Optional[Array]:
    """``w`` (G*Kg, Cg, 3, 3) -> ``U [G][Kb][16][Cp][KB]`` (written into ``U``, returned);
    None if ``w`` is not all finite.  A ``U`` above ``schedule.STREAM_FILTER_BYTES`` is
    stored around the caches where it starts on a 64-byte boundary (the workspace's and
    ``_workspace.aligned_empty``'s buffers do)."""
    p = problem
    name = "transform_filter4" if p.tile == 4 else "transform_filter"
    bad = getattr(kernels, f"{name}_{_CTYPE[p.dtype]}")(w, p.G, p.Cp, p.Kb, U, nthreads,
                                                       p.stream_filter)
    return None if bad else U


def run_forward(problem: TileProblem, x: Array, w: Array, bias: Optional[Array], y: Array,
                alpha: float, beta: float, nthreads: int, U: Optional[Array] = None,
                maps: Tuple[Any, ...] = (), ring: Optional[Array] = None,
                origin: Tuple[int, int] = (0, 0)) -> bool:
    """Compute ``problem`` into ``y`` and return True, or return False (``y`` untouched)
    when an operand holds a NaN or an infinity.  ``U``: the filter already transformed;
    ``maps``: a padding mode (:func:`pack_input`); ``ring``: the whole output's buffer, ``y``
    then only the window at ``origin`` (the kernel's ``forward``)."""
    p = problem
    with _workspace.scope() as ws:
        packed = pack_input(p, x, nthreads, ws, maps)
        if packed is None:
            return False
        if U is None and filter_in_jobs(p, beta, nthreads, ring):
            # (no U: an empty array.)  A non-finite filter is found only once the jobs
            # have written y: beta == 0, so the caller's fallback writes all of y again
            return _run_packed(p, packed, NO_BIAS[p.dtype], bias, y, alpha, beta,
                               nthreads, ws, ring, origin, w=w) == 0
        if U is None:
            U = transform_filter(p, w, nthreads, ws.empty(p.filter_size(), p.dtype))
        if U is None:
            return False
        _run_packed(p, packed, U, bias, y, alpha, beta, nthreads, ws, ring, origin)
    return True


def filter_in_jobs(problem: TileProblem, beta: float, nthreads: int,
                   ring: Optional[Array]) -> bool:
    """Whether a forward call transforms its filter in its jobs (one tile block on
    ``nthreads`` threads, no ring, beta == 0), each output block's filters while its tiles
    wait in cache, instead of the whole transformed filter out to memory and back.

    Interleaved, Intel Xeon model 207 (AVX-512), float32, old / new time, forward / data
    gradient, 1 thread then 2: on the few-tiles layout 1x256 14x14 1.42 / 1.32, 1.32 /
    1.23; 1x128 28x28 (F(4x4)) 1.35 / 1.20, 1.26 / 1.10; 1x256 7x7 1.68 / 1.42, 1.38 /
    1.34; 1x128 14x14 1.11 / 1.11, 1.31 / 1.24; on a big filter's single block, ResNet-50
    res5 (8x512 7x7, F(4x4), a 37.7 MB transformed filter) 1.23 / 1.20, 1.25 / 1.18, and
    1x512 7x7 1.51 / 1.27, 1.77 / 1.55.  (2x256 14x14, several blocks, stays as it was:
    0.99-1.01, the null check.)"""
    p = problem
    return (p.single_block and not p.takes_many_threads_layout(nthreads) and beta == 0
            and ring is None)


def _run_packed(problem: TileProblem, packed: Array, U: Array, bias: Optional[Array],
                y: Array, alpha: float, beta: float, nthreads: int, ws: _Scope,
                ring: Optional[Array] = None, origin: Tuple[int, int] = (0, 0),
                w: Optional[Array] = None) -> int:
    """The forward kernel on an input packed by :func:`pack_input` (see :func:`run_forward`;
    ``w``: the filter, transformed in the jobs, see :func:`filter_in_jobs`).  Returns the
    kernel's count of non-finite filter blocks (0 without ``w``)."""
    p = problem
    # Every scratch element a job reads it has written first (partial tile blocks
    # repeat their last row), so pooled garbage is never read.
    scratch = ws.empty(nthreads * p.scratch_per_thread, p.dtype)
    run = getattr(kernels, f"forward_{_CTYPE[p.dtype]}")
    return int(run(packed, p.N, p.G, p.ncb, p.block, p.Hp, p.Wp, p.tH, p.tW, U, p.Kg, p.Kb,
                   *p.layout_for(nthreads), scratch, y,
                   NO_BIAS[p.dtype] if bias is None else bias, alpha, beta, nthreads, ring,
                   *origin, tile=p.tile, w=w))


class WinogradConvolution(Algorithm):
    """Winograd convolution of one geometry (3x3 kernel, stride 1, dilation 1): F(2x2,3x3),
    and F(4x4,3x3) for the forward and data gradient where the schedule takes it.

    Any padding (asymmetric, or larger than 2 on backward-data, which then crops), any
    spatial size (partial edge tiles), groups and depthwise (run as groups of one channel:
    correct, but the GEMM then wastes most of its vector lanes), float32 and float64.

    Accuracy, measured on random normal data against a float64 reference, as
    max |error| / max |reference| in float32 (padding 1): forward 1.9e-7 (C = K = 16,
    28x28) rising to 1.1e-6 (C = K = 512, 8x8), backward-data 1.9e-7 .. 8.7e-7,
    backward-weight 3.2e-7 .. 1.3e-6; the direct kernel measures 3.7e-7 .. 3.2e-6 on the
    same cases.  F(4x4,3x3): 1e-6 .. 8e-6 at 16 to 80 channels, 1.6e-5 .. 2.1e-5 at 512
    (batch 1, 7x7).  Bound asserted by the tests: 1e-4 at C = K = 256 and 512, 1e-5 on the
    shape sweep (float32; F(4x4)'s 3e-5), 1e-12 in float64.

    Speed (effective GFLOP/s = direct FLOPs / time; ratio to the direct kernel and to
    PyTorch 2.13 in the same process, 2 threads, float32, on a shared 2-core AVX-512 VM
    where absolute figures are noisy): ``cconv._dispatch.WINOGRAD_MEASUREMENTS`` holds the
    ratios that decide ``auto`` and the README the full table (``cconv bench --algos
    direct,winograd``).

    NaN and Inf: the tile transforms mix a whole 4x4 tile, so a non-finite input would leak
    into outputs whose window does not contain it (0 * NaN = NaN).  The packing and filter
    transform note any non-finite operand as they copy it (no extra pass); such calls are
    then computed by the direct kernel, so NaN and Inf land exactly where the definition
    puts them.
    """

    name = "winograd"
    # The filter transform reads any strides, an HWIO weight's filters as runs: a channels-
    # last weight is read in place, not converted.  ResNet-50 res5 NHWC, 1 / 2 threads (AMD
    # EPYC Zen 4, AVX-512): forward 18.2 -> 16.5 / 10.6 -> 9.4 ms, data gradient (rotated,
    # channel roles swapped: a strided gather) 19.0 -> 16.1 / 10.7 -> 10.1 ms.
    strided_weight_ops = frozenset({"forward", "backward_data"})
    padding_mode_ops = frozenset({"forward", "backward_weight"})  # built as x is packed

    @classmethod
    def why_not(cls, geom: ConvGeometry, op: str) -> Optional[str]:
        """None if Winograd F(2x2,3x3) can run ``op`` on ``geom``, else the reason."""
        if (geom.R, geom.S) != (3, 3):
            return f"Winograd F(2x2,3x3) needs a 3x3 kernel, got {geom.R}x{geom.S}"
        if tuple(geom.stride) != (1, 1):
            return f"Winograd F(2x2,3x3) needs stride 1, got stride {tuple(geom.stride)}"
        if tuple(geom.dilation) != (1, 1):
            return f"Winograd F(2x2,3x3) needs dilation 1, got dilation {tuple(geom.dilation)}"
        return None

    def __init__(self, geom: ConvGeometry) -> None:
        super().__init__(geom)
        self._fwd = schedule.forward_problem(geom)
        self._bwd = schedule.backward_data_problem(geom)
        self._wgt = schedule.weight_gradient_schedule(geom)
        # F(4x4,3x3) where the schedule takes it (the forward and the data gradient, split
        # or not; the 3-D stacks decide for the whole stack: stack_tile)
        self._fwd4 = schedule.f4_problem(geom)
        self._bwd4 = schedule.f4_problem(geom, data_gradient=True)

    def _direct(self) -> Algorithm:
        """The direct algorithm of this geometry: computes calls with NaN or Inf operands."""
        return DirectConvolution.for_geometry(self.geom)

    def workspace_bytes(self, op: str, nthreads: int) -> int:
        """Bytes one call of ``op`` on ``nthreads`` threads allocates besides its result."""
        if op == "forward":
            return int((self._fwd4 or self._fwd).workspace_bytes(nthreads))
        if op == "backward_data":
            return int((self._bwd4 or self._bwd).workspace_bytes(nthreads))
        return int(self._wgt.workspace_items(nthreads) * self.geom.dtype.itemsize)

    def prepare_weight(self, w: Array, nthreads: int) -> Optional[TransformedWeight]:
        """The transformed filter of ``w`` for :meth:`forward`, or None if not all finite."""
        p = self._fwd4 or self._fwd
        U = transform_filter(p, w, nthreads, _workspace.aligned_empty(p.filter_size(),
                                                                      self.geom.dtype))
        return None if U is None else TransformedWeight(self.name, self.geom, U)

    def forward(self, x: Array, w: Array, bias: Optional[Array], y: Array, alpha: float,
                beta: float, nthreads: int, prepared: Optional[TransformedWeight] = None) -> None:
        """``y = alpha * (conv(x, w) + bias) + beta * y`` (y a logical NCHW view).

        ``prepared``: the result of :meth:`prepare_weight` for ``w``, or None."""
        U = None if prepared is None else prepared.data
        if not run_forward(self._fwd4 or self._fwd, x, w, bias, y, alpha, beta, nthreads, U=U,
                           maps=padding_maps(self.geom)):
            self._direct().forward(x, np.ascontiguousarray(w), bias, y, alpha, beta, nthreads)

    def backward_data(self, dy: Array, w: Array, dx: Array, alpha: float, beta: float,
                      nthreads: int, bias: Optional[Array] = None) -> None:
        """``dx = alpha * (conv_backward_data(dy, w) + bias) + beta * dx`` (logical NCHW)."""
        if not run_forward(self._bwd4 or self._bwd, dy, self._rotated(w), bias, dx, alpha, beta,
                           nthreads):
            self._direct().backward_data(dy, np.ascontiguousarray(w), dx, alpha, beta, nthreads,
                                         bias=bias)

    def _rotated(self, w: Array) -> Array:
        """The data gradient's forward filter: ``w`` rotated 180 degrees, channel roles
        swapped per group ((G, Kg, Cg) -> (G, Cg, Kg)), as (C, Kg, 3, 3)."""
        g = self.geom
        wr = w.reshape(g.groups, g.Kg, g.Cg, 3, 3)[:, :, :, ::-1, ::-1].transpose(0, 2, 1, 3, 4)
        return wr.reshape(g.C, g.Kg, 3, 3)

    def backward_data_split(self, dy: Array, w: Array, dx: Array, ring: Array,
                            origin: Tuple[int, int], alpha: float, beta: float, nthreads: int,
                            bias: Optional[Array] = None) -> bool:
        """The padded input's gradient with the window at ``origin`` written into ``dx``
        (epilogue applied) and the rest raw into ``ring``, by the output transform itself
        (see ``Algorithm.backward_data_split``); False for a non-finite operand."""
        return run_forward(self._bwd4 or self._bwd, dy, self._rotated(w), bias, dx, alpha,
                           beta, nthreads, ring=ring, origin=origin)

    def backward_weight(self, dy: Array, x: Array, nthreads: int) -> Array:
        """The weight gradient as a new contiguous (K, C/groups, 3, 3) array."""
        with _workspace.scope() as ws:
            packed = self._pack_weight_operands(dy, x, nthreads, ws)
            if packed is None:
                return self._direct().backward_weight(dy, x, nthreads)
            return self._weight_from_packed(*packed, nthreads, ws)

    def _pack_weight_operands(self, dy: Array, x: Array, nthreads: int,
                              ws: _Scope) -> Optional[Tuple[Array, Array]]:
        """(packed x, packed dy) of the weight gradient, one image after another (see the
        kernel's ``backward_weight``), or None where an operand is not all finite."""
        packed_x = self._packed_input(x, nthreads, ws)
        packed_dy = self._packed_grad(dy, nthreads, ws) if packed_x is not None else None
        return None if packed_x is None or packed_dy is None else (packed_x, packed_dy)

    def _packed_input(self, x: Array, nthreads: int, ws: _Scope) -> Optional[Array]:
        """The weight gradient's padded blocked ``x``, or None where it is not all finite."""
        return pack_input(self._wgt.problem, x, nthreads, ws, padding_maps(self.geom))

    def _packed_grad(self, dy: Array, nthreads: int, ws: _Scope) -> Optional[Array]:
        """The weight gradient's blocked ``dy``, or None where it is not all finite."""
        g, p = self.geom, self._wgt.problem
        packed = ws.empty(p.packed_grad_size(), g.dtype)
        bad = _layout.pack_input(dy, packed, g.groups, g.Kg, g.Kg, 1, p.KB, 0, 0, 2 * p.tH,
                                 2 * p.tW, nthreads)
        return None if bad else packed

    def _weight_from_packed(self, packed_x: Array, packed_dy: Array, nthreads: int,
                            ws: _Scope) -> Array:
        """The weight gradient of this geometry's ``N`` packed images."""
        g, s = self.geom, self._wgt
        p, dt = s.problem, g.dtype
        partial = ws.empty(s.splits * p.partial_size(), dt)
        scratch = ws.empty(nthreads * p.scratch_per_thread, dt)
        run = getattr(kernels, f"backward_weight_{_CTYPE[dt]}")
        run(packed_x, packed_dy, g.N, g.groups, p.ncb, p.block, p.Hp, p.Wp, p.Kb, p.tH,
            p.tW, p.tblock, s.splits, s.kchunk_for(nthreads), s.cchunk, s.parts, scratch,
            partial, nthreads)
        # Sum the splits in a fixed order, then dg = G^T P G.
        grad = np.empty((g.K, g.Cg, 3, 3), dt)
        getattr(kernels, f"weight_gradient_{_CTYPE[dt]}")(partial, s.splits, g.groups,
                                                         p.Kb, p.Cp, grad, nthreads)
        return grad


def _by_slice_count(geometry: Callable[[int], ConvGeometry]
                    ) -> Callable[[int], WinogradConvolution]:
    """The Winograd instance of ``geometry(n)`` for a number of slices ``n``, one per number,
    made on first use (a stack's taps share a few range lengths)."""
    algorithms: Dict[int, WinogradConvolution] = {}

    def of(slices: int) -> WinogradConvolution:
        if slices not in algorithms:
            algorithms[slices] = WinogradConvolution(geometry(slices))
        return algorithms[slices]
    return of


def slice_range_weight_gradients(geometry: Callable[[int], ConvGeometry], dy: Array, x: Array,
                                 pairs: Sequence[Tuple[slice, slice]],
                                 nthreads: int) -> Optional[List[Array]]:
    """The Winograd weight gradients of several pairings of a stack of output-gradient
    slices with a stack of input slices, each operand packed once for all of them.

    A 3-D weight gradient on 2-D kernels is one 2-D weight gradient per depth tap, pairing
    a range of ``dy``'s depth slices with an equally long, shifted range of ``x``'s: packed
    for each tap, every slice was packed once per tap that reads it.  The packed layouts
    hold one slice after another, so a range of slices is a range of the packed buffer.

    Parameters
    ----------
    geometry : callable
        ``geometry(n)``: the 2-D geometry of ``n`` slices (zero padding, 3x3, stride 1).
    dy, x : ndarray
        (slices, K, OH, OW) and (slices, C, H, W), any strides.
    pairs : sequence of (slice, slice)
        Step-1 ranges of ``dy``'s and ``x``'s slices, of equal lengths.
    nthreads : int

    Returns
    -------
    list of ndarray or None
        A (K, C/groups, 3, 3) gradient per pair, or None where an operand is not all finite
        (the caller computes those through the direct kernel).
    """
    of = _by_slice_count(geometry)
    with _workspace.scope() as ws:
        packed_x = of(x.shape[0])._packed_input(x, nthreads, ws)
        packed_dy = of(dy.shape[0])._packed_grad(dy, nthreads, ws)
        if packed_x is None or packed_dy is None:
            return None
        x_image = packed_x.size // max(1, x.shape[0])
        dy_image = packed_dy.size // max(1, dy.shape[0])
        grads = []
        for out_range, in_range in pairs:
            (o0, o1, o_step), (i0, i1, i_step) = (out_range.indices(dy.shape[0]),
                                                  in_range.indices(x.shape[0]))
            alg = of(o1 - o0)
            p = alg._wgt.problem
            # one slice's packing is the same whatever the number of slices
            if (o_step, i_step) != (1, 1) or i1 - i0 != o1 - o0 or (
                    p.packed_input_size(), p.packed_grad_size()) != ((i1 - i0) * x_image,
                                                                     (o1 - o0) * dy_image):
                raise ValueError(f"pairs must be step-1 ranges of equal lengths, got "
                                 f"{out_range} and {in_range}")
            with _workspace.scope() as pair:  # one pair's scratch held at a time
                grads.append(alg._weight_from_packed(packed_x[i0 * x_image:i1 * x_image],
                                                     packed_dy[o0 * dy_image:o1 * dy_image],
                                                     nthreads, pair))
    return grads


def _tile_problem(algorithm: WinogradConvolution, data_gradient: bool,
                  tile: int = 2) -> TileProblem:
    if tile == 2:
        return algorithm._bwd if data_gradient else algorithm._fwd
    make = schedule.backward_data_problem if data_gradient else schedule.forward_problem
    return make(algorithm.geom, tile=tile)


def stack_tile(geometry: Callable[[int], ConvGeometry], slices: int,
               data_gradient: bool = False) -> int:
    """The Winograd tile size (2 or 4) of :func:`transformed_filters` and
    :func:`slice_range_forward` on a stack of ``slices`` slices: F(4x4,3x3) where the
    schedule takes it for the 2-D pass of the whole stack (``geometry(slices)``), so every
    range of the stack runs one tile size and one transformed filter serves them all."""
    return 4 if schedule.f4_problem(geometry(slices), data_gradient) is not None else 2


def transformed_filters(geometry: ConvGeometry, weights: Sequence[Array], nthreads: int,
                        data_gradient: bool = False, tile: int = 2) -> Optional[List[Array]]:
    """The transformed filter of each of ``weights`` (``geometry``'s weight shape) for
    :func:`slice_range_forward` with tiles of ``tile`` pixels a side (:func:`stack_tile`;
    ``data_gradient``: for the data gradient's forward, the filters rotated), or None where
    one is not all finite."""
    algorithm = WinogradConvolution(geometry)
    problem = _tile_problem(algorithm, data_gradient, tile)
    filters = []
    for w in weights:
        U = transform_filter(problem, algorithm._rotated(w) if data_gradient else w, nthreads,
                             _workspace.aligned_empty(problem.filter_size(), w.dtype))
        if U is None:
            return None
        filters.append(U)
    return filters


def slice_range_forward(geometry: Callable[[int], ConvGeometry], x: Array,
                        calls: Sequence[Tuple[slice, Array, Optional[Array], Array, float]],
                        alpha: float, nthreads: int, data_gradient: bool = False,
                        tile: int = 2) -> bool:
    """Several Winograd forwards (or data gradients) of ranges of a stack of slices, the
    stack packed once for all of them.

    A 3-D pass on 2-D kernels is one 2-D pass per depth tap, each over a shifted range of
    the operand's depth slices: packed for each tap, every slice was packed once per tap
    that reads it (see :func:`slice_range_weight_gradients`).

    Parameters
    ----------
    geometry : callable
        ``geometry(n)``: the 2-D convolution of ``n`` slices (zero padding, 3x3, stride 1).
    x : ndarray
        (slices, C, H, W), any strides: the input, or with ``data_gradient`` the output
        gradient (slices, K, OH, OW).
    calls : sequence of (slice, U, bias, y, beta)
        In order: a step-1 range of ``x``'s slices, a filter from
        :func:`transformed_filters`, a bias or None, and ``y`` (range length, K, OH, OW; or
        C, H, W), any strides, written as ``alpha * (result + bias) + beta * y``.
    alpha : float
    nthreads : int
    data_gradient : bool
        Compute data gradients (the forward of ``x`` with the rotated filters).
    tile : int
        2 or 4: F(2x2,3x3) or F(4x4,3x3), as the filters were transformed
        (:func:`stack_tile`).

    Returns
    -------
    bool
        False, with nothing written, where ``x`` is not all finite.
    """
    algorithm = _by_slice_count(geometry)

    def of(slices: int) -> TileProblem:
        return _tile_problem(algorithm(slices), data_gradient, tile)

    with _workspace.scope() as ws:
        packed = pack_input(of(x.shape[0]), x, nthreads, ws)
        if packed is None:
            return False
        per_slice = packed.size // max(1, x.shape[0])
        for in_range, U, bias, y, beta in calls:
            i0, i1, step = in_range.indices(x.shape[0])
            p = of(i1 - i0)
            if (step != 1 or y.shape[0] != i1 - i0
                    or p.packed_input_size() != y.shape[0] * per_slice):
                raise ValueError(f"calls must pair step-1 ranges with outputs of their length, "
                                 f"got {in_range} and {y.shape[0]} slices")
            with _workspace.scope() as call:  # one call's scratch held at a time
                _run_packed(p, packed[i0 * per_slice:i1 * per_slice], U, bias, y, alpha,
                            beta, nthreads, call)
    return True
