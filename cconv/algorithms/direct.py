"""The direct convolution algorithm: pack, run the tile jobs, unpack.

``DirectConvolution(geom)`` holds the cached schedules of one geometry (see
``direct_schedule``, whose glossary the names here follow) and runs any of the three
passes on already validated arrays: activations as 4-D views in logical (N, C, H, W)
order (any strides, compute dtype), weights as contiguous (K, C/groups, R, S) arrays.
``g`` is always the geometry.

One-row problems (a 1-D convolution lifted to H = 1) with contiguous NCHW activations run
forward and backward-data as the 1x1 product over im2col panels of their taps
(``gemm.row_product``, from ``ROW_PRODUCT_MIN_ROWS`` result rows per group and without a
``beta``), else on the row-vector kernels (``_kernels/_rows``): vectors along the signal,
read and written in place, where the blocked tiles would repack the whole signal
channels-innermost and store their result one element at a time (measured: 1.3-1.9x
faster on WaveNet-style layers, see ``ROW_KERNEL_MIN_TILES``).  Their weight
gradient (from ``ROW_WEIGHT_MIN_CHANNELS`` input channels per group) transposes only a
window of the input at a time and broadcasts the output gradient from its rows in place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Literal, Optional, Tuple, overload

import numpy as np
import numpy.typing as npt

from .. import _workspace
from .._boundary import padding_maps
from .._geometry import COMPUTE_DTYPES
from .._kernels import _layout
from .._simd import rows as row_kernels
from .._simd import tiles
from . import direct_schedule
from .base import Algorithm, TransformedWeight, memory_layout
from .gemm import row_product, row_product_bytes

if TYPE_CHECKING:
    from .._geometry import ConvGeometry, Pair
    from .._workspace import _Scope
    from .direct_schedule import BackwardDataLayout, BackwardWeightLayout, ForwardLayout, Pass

Array = npt.NDArray[Any]

# The row-vector kernels run a one-row problem only when its row holds at least this many
# tiles: shorter rows leave the threads too few jobs, and there the blocked tiles are as
# fast.  (WaveNet layers, 16384 samples, AMD EPYC Zen 4, AVX-512, 2 threads: row kernels
# 1.3-1.9x the blocked tiles' forward; on 2-D layers the blocked tiles win, 0.3-1.0x.)
ROW_KERNEL_MIN_TILES = 4

# The row kernels' weight gradient puts a group's input channels in the vector lanes (the
# input transposed a window at a time, the output gradient broadcast from its rows): it
# needs enough channels to fill them.  Against the blocked tiles (which repack both whole
# signals channels-innermost: 40% of their time), float32, 16384 samples, 1 thread, AMD EPYC
# Zen 5 (one-off loop, medians of 15 calls; AVX-512 / the AVX2 build on the same CPU):
# 4 x 64 -> 64, 2 taps 1.69x / 1.49x (2 threads 1.93x / 1.87x); 3 taps, dilation 32 1.52x;
# 1 x 256 -> 256, dilation 256 1.13x / 1.20x; 4 x 8 -> 64, 3 taps 1.32x / 1.27x; 8 -> 8
# 1.50x / 1.35x; float64 64 -> 64 2.00x / 2.78x; the SSE build 1.21x (64) and 1.42x (8).
ROW_WEIGHT_MIN_CHANNELS = 8
# Its partial sums: at most this many pieces (a fixed count, so the sum's order does not
# depend on the thread count; enough for dynamic scheduling on 16 threads), fewer where
# their memory would pass ROW_WEIGHT_PARTIAL_BYTES.
ROW_WEIGHT_PIECES = 16
ROW_WEIGHT_PARTIAL_BYTES = 8 << 20
# One-row forward and data-gradient passes with at least this many result rows per group
# (output channels forward, input channels for the data gradient) and no ``beta`` run on
# the 1x1 product's register tile instead (``gemm.row_product``): each panel of output
# columns packed as the im2col of its taps, a contiguous strip per register tile where the
# row kernels load every step from another channel's row.  Intel Xeon model 207, AVX-512,
# float32, WaveNet layers of 16384 samples, interleaved kernel calls, row kernel time over
# product time, 1 / 2 threads: 4 x 64 -> 64, 2 taps, dilation 1 1.18 / 1.43, dilation 64
# 1.36 / 1.55, dilation 512 1.49 / 1.39; 3 taps 1.12 / 1.26; 1 x 256 -> 256, dilation 1
# 1.24 / 1.14, dilation 256 1.23 / 1.20; 2 x 256 -> 256, 3 taps, dilation 4 1.09 / 1.05.
# With few rows the packing weighs more (a 14-row tile over every packed column): 8 to 16
# rows measured 0.85-0.95 on 1 thread and 1.00-1.34 on 2 (8 -> 8 and 16 -> 16 with 3 taps,
# 12 -> 12 with 9, 1 -> 8 with 15 and 2 -> 16 with 7, both passes); 32 rows (the 1 -> 32
# filter bank, 63 taps; 4 groups of 8 -> 32 with 5) 0.97-1.06 / 1.20-1.48.  The rule must not
# depend on the thread count (the same bits on any), so it takes the product from 8 rows.
ROW_PRODUCT_MIN_ROWS = 8

# The kernels take a bias memoryview even without a bias: an empty one means none.
NO_BIAS: Dict[np.dtype[Any], Array] = {dtype: np.zeros(0, dtype) for dtype in COMPUTE_DTYPES}


class DirectConvolution(Algorithm):
    """Blocked direct convolution of one geometry: forward, backward-data, backward-weight."""

    name = "direct"
    padding_mode_ops = frozenset({"forward", "backward_weight"})  # built as x is packed

    @classmethod
    def why_not(cls, geom: ConvGeometry, op: str) -> Optional[str]:
        """None: the direct algorithm runs every shape and pass."""
        return None

    def __init__(self, geom: ConvGeometry) -> None:
        super().__init__(geom)
        self.vl = tiles.VECTOR_LENGTH[geom.dtype.name]
        # run_jobs_float32 or run_jobs_float64: the compute dtype's tile runner
        self._run: Callable[..., None] = getattr(tiles, f"run_jobs_{geom.dtype.name}")
        self._passes: Dict[Tuple[str, str], Pass[Any]] = {}

    @overload
    def schedule(self, op: Literal["forward"], target: str = ...) -> Pass[ForwardLayout]: ...
    @overload
    def schedule(self, op: Literal["backward_data"],
                 target: str = ...) -> Pass[BackwardDataLayout]: ...
    @overload
    def schedule(self, op: Literal["backward_weight"],
                 target: str = ...) -> Pass[BackwardWeightLayout]: ...
    @overload
    def schedule(self, op: str, target: str = ...) -> Pass[Any]: ...

    def schedule(self, op: str, target: str = "blocked") -> Pass[Any]:
        """The cached ``direct_schedule.Pass`` of ``op`` writing to ``target``."""
        key = (op, target)
        if key not in self._passes:
            make = getattr(direct_schedule, op)
            args = (target,) if op != "backward_weight" else ()
            self._passes[key] = make(self.geom, self.vl, tiles.TILE_ROWS, *args)
        return self._passes[key]

    def _target(self, y: Array) -> str:
        """Write straight into ``y`` (a logical NCHW view) when its memory is a contiguous
        NCHW or NHWC array of the compute dtype; else through a blocked buffer + unpack."""
        if y.dtype != self.geom.dtype:
            return "blocked"
        return memory_layout(y) or "blocked"

    def _run_into(self, p: Pass[Any], target: str, A: Array, B: Array, y: Array,
                  bias: Optional[Array], alpha: float, beta: float, nthreads: int) -> None:
        """Run a pass's jobs straight into ``y`` (target NCHW / NHWC)."""
        flat = y if target == "NCHW" else y.transpose(0, 2, 3, 1)
        self._run(tiles.KINDS[p.kind], A, B, flat.reshape(-1), p.jobs, p.table, nthreads,
                  p.info.col_stride, bias, alpha, beta)

    def _run_and_store(self, p: Pass[Any], target: str, A: Array, B: Array, y: Array,
                       bias: Optional[Array], alpha: float, beta: float, nthreads: int,
                       ws: _Scope, unpack: Tuple[int, int, int, int]) -> None:
        """Run a pass's jobs into ``y``: straight (target NCHW / NHWC), or into a blocked
        buffer of the call's scope ``ws`` unpacked with ``unpack`` = (groups, blocks, block,
        multiplier sum) of ``_layout.unpack_output``."""
        if target != "blocked":
            self._run_into(p, target, A, B, y, bias, alpha, beta, nthreads)
            return
        blocked = ws.empty(p.out_size, self.geom.dtype)
        self._run(tiles.KINDS[p.kind], A, B, blocked, p.jobs, p.table, nthreads)
        _layout.unpack_output(blocked, y, *unpack, NO_BIAS[self.geom.dtype] if bias is None
                              else bias, alpha, beta, nthreads)

    def workspace_bytes(self, op: str, nthreads: int) -> int:
        """Bytes of the packed and blocked buffers one call of ``op`` allocates (the same
        at any thread count, except on the row kernels, which have per-thread scratch)."""
        g, item = self.geom, self.geom.dtype.itemsize
        if self._runs_on_rows(op):
            if op == "backward_weight":
                _, scratch, partial = self._rows_weight_layout()
                return int(nthreads * scratch + np.prod(partial)) * item
            ins, outs = (g.Cg, g.Kg) if op == "forward" else (g.Kg, g.Cg)
            if outs >= ROW_PRODUCT_MIN_ROWS:  # (the row kernels only for a beta)
                flipped = g.K * g.Cg * g.S if op == "backward_data" else 0
                return row_product_bytes(g.N, g.groups, ins * g.S, outs,
                                         g.OW if op == "forward" else g.W, g.dtype,
                                         nthreads) + flipped * item
            scratch = row_kernels.scratch_size(ins, outs, 1, g.S, g.dilation[1], g.dtype.name)
            packed_w = g.groups * -(-outs // row_kernels.KB) * row_kernels.KB * ins * g.S
            return int(nthreads * scratch + packed_w) * item
        # Forward and backward-data write a contiguous result directly (no blocked buffer),
        # except a depthwise multiplier's backward-data, which goes through the unpack.
        direct = op != "backward_weight" and not (op == "backward_data" and g.depthwise
                                                   and g.Kg > 1)
        p = self.schedule(op, "NCHW" if direct else "blocked")
        if op == "backward_data":
            bd: BackwardDataLayout = p.info
            dy_blocks = -(-g.K // self.vl) if g.depthwise else g.groups * bd.red_blocks
            packed = g.N * dy_blocks * bd.OHp * bd.OWp * bd.dy_block
            return int(packed + bd.weight_size + p.out_size) * item
        fwd = (p.info.forward if op == "backward_weight" else self.schedule("forward").info)
        if g.depthwise:
            packed_x = g.N * fwd.Cb * fwd.Hp * fwd.Wp * fwd.CB
            packed_w = fwd.Kb * fwd.KB * g.R * g.S
        else:
            packed_x = (g.N * g.groups * fwd.Cb * fwd.Hp * fwd.Wp * fwd.CB
                        * fwd.phases[0] * fwd.phases[1])
            packed_w = g.groups * fwd.Kb * fwd.KB * fwd.Cb * fwd.CB * g.R * g.S
        if op == "forward":
            return int(packed_x + packed_w + p.out_size) * item
        packed_dy = self.schedule("forward").out_size
        return int(packed_x + packed_dy + p.out_size) * item

    # -- the row-vector kernels (one-row problems) -------------------------------------------

    def _runs_on_rows(self, op: str) -> bool:
        return runs_on_rows(self.geom, op)

    def _rows_arrays(self, src: Array, dst: Array) -> bool:
        """True if both activations are contiguous NCHW arrays of the compute dtype."""
        return all(a.dtype == self.geom.dtype and memory_layout(a) == "NCHW" for a in (src, dst))

    def _pack_rows_weight(self, w: Array, groups: int, out_per_group: int,
                          in_per_group: int) -> Array:
        """``w`` (groups * out_per_group, in_per_group, 1, S) as the row kernels' (groups,
        blocks, in_per_group, 1, S, KB): KB output channels innermost, zero-padded."""
        KB, S = row_kernels.KB, w.shape[-1]
        blocks = -(-out_per_group // KB)
        packed = np.zeros((groups, blocks * KB, in_per_group, 1, S), self.geom.dtype)
        packed[:, :out_per_group] = w.reshape(groups, out_per_group, in_per_group, 1, S)
        return np.ascontiguousarray(
            packed.reshape(groups, blocks, KB, in_per_group, 1, S).transpose(0, 1, 3, 4, 5, 2))

    def _run_rows(self, src: Array, packed_w: Array, dst: Array, bias: Optional[Array],
                  rows: Array, pl: int, alpha: float, beta: float, nthreads: int) -> None:
        """One row-kernel correlation of ``src`` into ``dst`` (see ``_rows.correlate``)."""
        g = self.geom
        in_per_group, S = packed_w.shape[2], packed_w.shape[4]
        out_per_group = dst.shape[1] // packed_w.shape[0]
        with _workspace.scope() as ws:
            size = row_kernels.scratch_size(in_per_group, out_per_group, 1, S, g.dilation[1],
                                            g.dtype.name)
            scratch = ws.empty(nthreads * size, g.dtype).reshape(nthreads, size)
            row_kernels.correlate(src, packed_w, dst, NO_BIAS[g.dtype] if bias is None
                                  else bias, rows, g.dilation[1], pl, alpha, beta, scratch,
                                  nthreads)

    def _rows_forward(self, x: Array, packed_w: Array, y: Array, bias: Optional[Array],
                      alpha: float, beta: float, nthreads: int) -> None:
        g = self.geom
        (pt, _), (pl, _) = g.pads
        rows = np.array([[0 if pt == 0 else -1]], np.int64)  # output row 0 reads row -pt
        self._run_rows(x, packed_w, y, bias, rows, pl, alpha, beta, nthreads)

    def _rows_backward_data(self, dy: Array, w: Array, dx: Array, bias: Optional[Array],
                            alpha: float, beta: float, nthreads: int) -> None:
        """The data gradient of a stride-1 row as a correlation of ``dy`` with the flipped
        filter, channels swapped: ``dx[c, i] = sum_{k, s} w[k, c, S-1-s] dy[k, i + s*dw -
        ((S-1)*dw - pl)]``."""
        g = self.geom
        (pt, _), (pl, _) = g.pads
        flipped = w.reshape(g.groups, g.Kg, g.Cg, 1, g.S)[..., ::-1].transpose(0, 2, 1, 3, 4)
        packed = self._pack_rows_weight(flipped, g.groups, g.Cg, g.Kg)
        # input row 0 is read by output row pt / sh when that is a whole row of the output
        source = pt // g.stride[0] if pt % g.stride[0] == 0 and pt // g.stride[0] < g.OH else -1
        rows = np.array([[source]], np.int64)
        self._run_rows(dy, packed, dx, bias, rows, (g.S - 1) * g.dilation[1] - pl, alpha, beta,
                       nthreads)

    def _row_product_backward_data(self, dy: Array, w: Array, dx: Array,
                                   bias: Optional[Array], alpha: float, nthreads: int) -> bool:
        """The data gradient of a stride-1 row on the product (see ``ROW_PRODUCT_MIN_ROWS``):
        ``dx[c, i] = sum_{k, t} w[k, c, S-1-t] dy[k, i + t*dw - ((S-1)*dw - pl)]``.  False
        (nothing done) where ``dy``'s row 0 is not the one input row 0 reads."""
        g = self.geom
        pt = g.pads[0][0]
        if pt != 0 or g.OH != 1:
            return False
        flipped = np.ascontiguousarray(
            w.reshape(g.groups, g.Kg, g.Cg, g.S)[..., ::-1].transpose(0, 2, 1, 3))
        return row_product(dy.reshape(g.N, g.K, g.OW), flipped.reshape(g.C, g.Kg * g.S),
                           g.groups, dx.reshape(g.N, g.C, g.W), g.S, g.dilation[1],
                           (g.S - 1) * g.dilation[1] - g.pads[1][0], bias, alpha, nthreads)

    # -- packing ---------------------------------------------------------------------------

    def _pack_activation(self, x: Array, block: int, slots_per_group: int, mult: int,
                         groups: int, pads: Pair, height: int, width: int, nthreads: int,
                         ws: _Scope, maps: Tuple[Any, ...] = ()) -> Array:
        """``x`` packed (into a buffer of the call's workspace scope ``ws``) with zero
        padding, or with the padding mode of ``maps`` (row and column maps and the constant,
        ``_boundary.padding_maps``)."""
        nblocks = -(-slots_per_group // block)
        packed = ws.empty(x.shape[0] * groups * nblocks * height * width * block, self.geom.dtype)
        _layout.pack_input(x, packed, groups, x.shape[1] // groups, slots_per_group, mult, block,
                           pads[0], pads[1], height, width, nthreads, *maps)
        return packed

    def _pack_input(self, x: Array, fwd: ForwardLayout, nthreads: int, ws: _Scope) -> Array:
        """``x`` packed as ``fwd`` (the forward's or the weight gradient's layout) says."""
        g = self.geom
        (pt, _), (pl, _) = g.pads
        maps = padding_maps(g)  # forward and weight gradient build a padding mode here
        if g.depthwise:
            return self._pack_activation(x, fwd.CB, g.K, g.Kg, 1, (pt, pl), fwd.Hp, fwd.Wp,
                                         nthreads, ws, maps)
        if fwd.phases != (1, 1):
            return self._pack_phases(x, fwd, nthreads, ws)
        return self._pack_activation(x, fwd.CB, g.Cg, 1, g.groups, (pt, pl), fwd.Hp, fwd.Wp,
                                     nthreads, ws, maps)

    def _pack_phases(self, x: Array, fwd: ForwardLayout, nthreads: int, ws: _Scope) -> Array:
        """``x`` packed split into the stride phases of ``fwd`` (see
        ``direct_schedule.phased``): phase ``(a, b)`` holds the padded pixels ``(a + i*sh,
        b + j*sw)``, which are the input pixels of a strided view of ``x`` with the padding
        that falls on that phase (``_layout.pack_input_phases``)."""
        g = self.geom
        (sh, sw), ((pt, _), (pl, _)) = fwd.phases, g.pads
        size = g.N * g.groups * fwd.Cb * fwd.Hp * fwd.Wp * fwd.CB
        packed = ws.empty(sh * sw * size, g.dtype)
        _layout.pack_input_phases(x, packed, g.groups, g.Cg, fwd.CB, pt, pl, fwd.Hp, fwd.Wp,
                                  sh, sw, nthreads)
        return packed

    def _pack_weight(self, w: Array, groups: int, Kg: int, Cg: int, swap: bool,
                     col_block: int, red_block: int, taps: Array,
                     nthreads: int) -> Tuple[Array, bool]:
        """The packed weight and whether a packed weight is NaN or infinite."""
        cols, reds = (Cg, Kg) if swap else (Kg, Cg)
        size = (groups * -(-cols // col_block) * -(-reds // red_block) * len(taps)
                * red_block * col_block)
        packed = np.empty(size, self.geom.dtype)
        bad = _layout.pack_weight(w.reshape(-1), packed, groups, Kg, Cg,
                                  self.geom.R * self.geom.S, swap, col_block, red_block,
                                  np.asarray(taps, np.intp), nthreads)
        return packed, bool(bad)

    def _pack_forward_weight(self, w: Array, nthreads: int) -> Array:
        """[G][Kb][Cb][R*S][CB][KB] (dense) or [Vb][R*S][VL] (depthwise)."""
        g, fwd = self.geom, self.schedule("forward").info
        taps = np.arange(g.R * g.S)
        if g.depthwise:
            return self._pack_weight(w, 1, g.K, 1, False, fwd.KB, 1, taps, nthreads)[0]
        return self._pack_weight(w, g.groups, g.Kg, g.Cg, False, fwd.KB, fwd.CB, taps,
                                 nthreads)[0]

    def _pack_backward_data_weight(self, w: Array, bd: BackwardDataLayout,
                                   nthreads: int) -> Tuple[Array, bool]:
        """Per stride phase of ``bd`` (a ``BackwardDataLayout``): [G][out_blocks][red_blocks]
        [taps][dy_block][KB] (dense) or [Vb][taps][VL] (depthwise).

        Returns the packed weight and whether a weight is NaN or infinite."""
        g = self.geom
        parts, bad = [], False
        for taps_h, taps_w in bd.phases:
            taps = (np.asarray(taps_h, np.intp)[:, None] * g.S
                    + np.asarray(taps_w, np.intp)[None, :]).ravel()
            if g.depthwise:
                part, part_bad = self._pack_weight(w, 1, g.K, 1, False, bd.KB, 1, taps,
                                                   nthreads)
            else:
                part, part_bad = self._pack_weight(w, g.groups, g.Kg, g.Cg, True, bd.KB,
                                                   bd.dy_block, taps, nthreads)
            parts.append(part)
            bad = bad or part_bad
        if len(parts) == 1 and parts[0].size:  # stride 1: one phase, already contiguous
            return parts[0], bad
        # Never empty: the kernels take the address of element 0 (jobs of empty phases
        # have length 0 and read nothing).
        return np.concatenate(parts + [np.zeros(1, g.dtype)]), bad

    # -- passes ----------------------------------------------------------------------------

    def prepare_weight(self, w: Array, nthreads: int) -> TransformedWeight:
        """The packed forward weight of ``w``, for :meth:`forward` (the row kernels' packing
        for a one-row problem)."""
        g = self.geom
        if self._runs_on_rows("forward"):
            return TransformedWeight(self.name, g, self._pack_rows_weight(w, g.groups, g.Kg, g.Cg))
        return TransformedWeight(self.name, g, self._pack_forward_weight(w, nthreads))

    def forward(self, x: Array, w: Array, bias: Optional[Array], y: Array, alpha: float,
                beta: float, nthreads: int, prepared: Optional[TransformedWeight] = None) -> None:
        """``y = alpha * (conv(x, w) + bias) + beta * y`` (y a logical NCHW view).

        ``prepared``: the result of :meth:`prepare_weight` for ``w``, or None."""
        g = self.geom
        if self._runs_on_rows("forward"):
            if self._rows_arrays(x, y):
                if (beta == 0 and g.pads[0][0] == 0 and g.Kg >= ROW_PRODUCT_MIN_ROWS
                        and row_product(x.reshape(g.N, g.C, g.W), w.reshape(g.K, g.Cg * g.S),
                                        g.groups, y.reshape(g.N, g.K, g.OW), g.S,
                                        g.dilation[1], g.pads[1][0], bias, alpha, nthreads)):
                    return None
                packed_w = (prepared.data if prepared is not None
                            else self._pack_rows_weight(w, g.groups, g.Kg, g.Cg))
                return self._rows_forward(x, packed_w, y, bias, alpha, beta, nthreads)
            prepared = None  # made for the row kernels: the blocked tiles pack their own
        target = self._target(y)
        p = self.schedule("forward", target)
        with _workspace.scope() as ws:
            packed_x = self._pack_input(x, p.info, nthreads, ws)
            packed_w = (prepared.data if prepared is not None
                        else self._pack_forward_weight(w, nthreads))
            groups = 1 if g.depthwise else g.groups
            self._run_and_store(p, target, packed_x, packed_w, y, bias, alpha, beta, nthreads,
                                ws, (groups, p.info.Kb, p.info.KB, 1))

    def backward_data(self, dy: Array, w: Array, dx: Array, alpha: float, beta: float,
                      nthreads: int, bias: Optional[Array] = None) -> None:
        """``dx = alpha * (conv_backward_data(dy, w) + bias) + beta * dx`` (logical NCHW views).

        ``bias`` (C,) serves transposed convolution, whose forward pass this is."""
        g = self.geom
        if (self._runs_on_rows("backward_data") and self._rows_arrays(dy, dx)
                and np.isfinite(w).all()):
            # (a non-finite weight needs the exact-terms path below: a zero-filled window
            # would multiply it by zero)
            if beta == 0 and g.Cg >= ROW_PRODUCT_MIN_ROWS and self._row_product_backward_data(
                    dy, w, dx, bias, alpha, nthreads):
                return None
            return self._rows_backward_data(dy, w, dx, bias, alpha, beta, nthreads)
        # A depthwise multiplier sums several blocked columns per channel: only unpack does that.
        target = self._target(dx) if not (g.depthwise and g.Kg > 1) else "blocked"
        p = self.schedule("backward_data", target)
        bd = p.info
        (lo_h, _), (lo_w, _) = bd.pads
        packed_w, bad = self._pack_backward_data_weight(w, bd, nthreads)
        if bad:
            return self._backward_data_nonfinite_weight(dy, w, dx, alpha, beta, nthreads, bias)
        # depthwise: every channel one group of K slots, a multiplier's Kg columns summed
        slots, groups, msum = (g.K, 1, g.Kg) if g.depthwise else (g.Kg, g.groups, 1)
        with _workspace.scope() as ws:
            packed_dy = self._pack_activation(dy, bd.dy_block, slots, 1, groups, (lo_h, lo_w),
                                              bd.OHp, bd.OWp, nthreads, ws)
            self._run_and_store(p, target, packed_dy, packed_w, dx, bias, alpha, beta, nthreads,
                                ws, (groups, bd.out_blocks, bd.KB, msum))

    def _backward_data_nonfinite_weight(self, dy: Array, w: Array, dx: Array, alpha: float,
                                        beta: float, nthreads: int,
                                        bias: Optional[Array]) -> None:
        """Backward-data when a weight is NaN or infinite: sum only the terms that exist.

        The kernels gather over a zero-padded ``dy``, so a non-finite weight meeting the
        padding would add ``0 * Inf = NaN`` to inputs that no output of that tap reaches.
        By definition (and in PyTorch) ``dx`` is the scatter of ``dy * w`` over existing
        outputs only: computed here as the kernel result for the finite weights plus, in
        NumPy, the products of the few non-finite taps (a sum holding NaN or Inf is NaN or
        +-Inf whatever its order, so the split is exact).
        """
        g = self.geom
        special = ~np.isfinite(w)
        finite_w = np.where(special, 0, w).astype(g.dtype)
        total = np.empty((g.N, g.C, g.H, g.W), g.dtype)
        self.backward_data(dy, finite_w, total, 1.0, 0.0, nthreads)
        (pt, _), (pl, _) = g.pads
        with np.errstate(invalid="ignore", over="ignore"):
            for k, c, r, s in np.argwhere(special):
                rows = _tap_range(r * g.dilation[0] - pt, g.stride[0], g.OH, g.H)
                cols = _tap_range(s * g.dilation[1] - pl, g.stride[1], g.OW, g.W)
                if rows is None or cols is None:
                    continue
                channel = (k // g.Kg) * g.Cg + c
                total[:, channel, rows[1], cols[1]] += dy[:, k, rows[0], cols[0]] * w[k, c, r, s]
            if bias is not None:
                total += bias.reshape(1, -1, 1, 1)
            if beta == 0:
                dx[...] = alpha * total
            else:
                dx[...] = alpha * total + beta * dx

    def _rows_weight_layout(self) -> Tuple[int, int, Tuple[int, int, int, int, int]]:
        """(output columns per item, elements of one thread's scratch, shape of the partial
        sums (pieces, groups, Kg, S, Cg padded to whole vectors)) of the row kernels'
        weight gradient (see ``_kernels/_rows.weight``)."""
        g = self.geom
        vl = row_kernels.VECTOR_LENGTH[g.dtype.name]
        padded = -(-g.Cg // vl) * vl
        chunk = row_kernels.weight_chunk(padded, g.dtype.name)
        items = g.N * -(-g.OW // chunk)
        one = g.groups * g.Kg * g.S * padded * g.dtype.itemsize
        pieces = max(1, min(ROW_WEIGHT_PIECES, items, ROW_WEIGHT_PARTIAL_BYTES // one))
        scratch = row_kernels.weight_scratch_size(padded, g.S, g.dilation[1], chunk)
        return chunk, scratch, (pieces, g.groups, g.Kg, g.S, padded)

    def _rows_backward_weight(self, dy: Array, x: Array, nthreads: int) -> Array:
        """The weight gradient of a one-row problem: per piece of the (image, column chunk)
        items a partial sum from the row kernels, the pieces added in a fixed order."""
        g = self.geom
        chunk, size, shape = self._rows_weight_layout()
        with _workspace.scope() as ws:
            scratch = ws.empty(nthreads * size, g.dtype).reshape(nthreads, size)
            partial = ws.empty(int(np.prod(shape)), g.dtype).reshape(shape)
            row_kernels.weight(x, dy, partial, g.dilation[1], g.pads[1][0], chunk, scratch,
                               nthreads)
            total = partial.sum(axis=0)[..., :g.Cg]
        return np.ascontiguousarray(total.transpose(0, 1, 3, 2)).reshape(g.K, g.Cg, 1, g.S)

    def backward_weight(self, dy: Array, x: Array, nthreads: int) -> Array:
        """The weight gradient as a new contiguous (K, C/groups, R, S) array."""
        if self._runs_on_rows("backward_weight") and self._rows_arrays(x, dy):
            return self._rows_backward_weight(dy, x, nthreads)
        g, p = self.geom, self.schedule("backward_weight")
        fwd = p.info.forward
        with _workspace.scope() as ws:
            packed_x = self._pack_input(x, fwd, nthreads, ws)
            if g.depthwise:
                packed_dy = self._pack_activation(dy, fwd.KB, g.K, 1, 1, (0, 0), g.OH, g.OW,
                                                  nthreads, ws)
            else:
                packed_dy = self._pack_activation(dy, fwd.KB, g.Kg, 1, g.groups, (0, 0), g.OH,
                                                  g.OW, nthreads, ws)
            partial = ws.empty(p.out_size, g.dtype)
            self._run(tiles.KINDS[p.kind], packed_x, packed_dy, partial, p.jobs, p.table,
                      nthreads)
            # Partial sums of the reduction pieces, added in a fixed order: deterministic.
            total = partial.reshape(p.info.splits, -1).sum(axis=0)
        if g.depthwise:
            Vb, vl = fwd.Kb, fwd.KB
            grad = total.reshape(Vb, g.R, g.S, vl).transpose(0, 3, 1, 2).reshape(Vb * vl, g.R, g.S)
            return np.ascontiguousarray(grad[:g.K]).reshape(g.K, 1, g.R, g.S)
        Kb, KB, Cb, CB = fwd.Kb, fwd.KB, fwd.Cb, fwd.CB
        grad = total.reshape(g.groups, Kb, Cb, g.R, g.S, CB, KB).transpose(0, 1, 6, 2, 5, 3, 4)
        grad = grad.reshape(g.groups, Kb * KB, Cb * CB, g.R, g.S)[:, :g.Kg, :g.Cg]
        return np.ascontiguousarray(grad).reshape(g.K, g.Cg, g.R, g.S)


def runs_on_rows(g: ConvGeometry, op: str) -> bool:
    """Whether the direct algorithm runs pass ``op`` of ``g`` on the row-vector kernels: a
    one-row problem (input, output and filter one row high: a lifted 1-D convolution),
    column stride 1, zero padding, a row of at least ``ROW_KERNEL_MIN_TILES`` tiles; the
    weight gradient also needs ``ROW_WEIGHT_MIN_CHANNELS`` input channels per group.  (At
    run time the activations must also be contiguous NCHW arrays.)"""
    if g.H != 1 or g.R != 1 or g.OH != 1 or g.stride[1] != 1:
        return False
    if g.padding_mode != "zeros" and padding_maps(g):
        return False
    if op == "backward_weight" and g.Cg < ROW_WEIGHT_MIN_CHANNELS:
        return False
    width = g.W if op == "backward_data" else g.OW
    return width >= ROW_KERNEL_MIN_TILES * row_kernels.TILE_WIDTH[g.dtype.name]


def _tap_range(offset: int, stride: int, n_out: int,
               n_in: int) -> Optional[Tuple[slice, slice]]:
    """Slices (outputs, inputs) of one axis where output ``o`` meets input ``o*stride +
    offset`` inside ``0..n_in-1``, or None if it never does."""
    first = max(0, -(offset // stride))  # ceil(-offset / stride)
    last = min(n_out - 1, (n_in - 1 - offset) // stride)
    if first > last:
        return None
    return (slice(first, last + 1),
            slice(first * stride + offset, last * stride + offset + 1, stride))
