"""The direct convolution algorithm: pack, run the tile jobs, unpack.

``DirectConvolution(geom)`` holds the cached schedules of one geometry (see
``direct_schedule``, whose glossary the names here follow) and runs any of the three
passes on already validated arrays: activations as 4-D views in logical (N, C, H, W)
order (any strides, compute dtype), weights as contiguous (K, C/groups, R, S) arrays.
``g`` is always the geometry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Literal, Optional, Tuple, overload

import numpy as np
import numpy.typing as npt

from .. import _workspace
from .._boundary import padding_maps
from .._geometry import COMPUTE_DTYPES
from .._kernels import _layout
from .._simd import tiles
from . import direct_schedule
from .base import Algorithm, TransformedWeight, memory_layout

if TYPE_CHECKING:
    from .._geometry import ConvGeometry, Pair
    from .._workspace import _Scope
    from .direct_schedule import BackwardDataLayout, BackwardWeightLayout, ForwardLayout, Pass

Array = npt.NDArray[Any]

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
        at any thread count: the direct algorithm has no per-thread scratch)."""
        g, item = self.geom, self.geom.dtype.itemsize
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
        fwd = self.schedule("forward").info
        if g.depthwise:
            packed_x = g.N * fwd.Cb * fwd.Hp * fwd.Wp * fwd.CB
            packed_w = fwd.Kb * fwd.KB * g.R * g.S
        else:
            packed_x = g.N * g.groups * fwd.Cb * fwd.Hp * fwd.Wp * fwd.CB
            packed_w = g.groups * fwd.Kb * fwd.KB * fwd.Cb * fwd.CB * g.R * g.S
        if op == "forward":
            return int(packed_x + packed_w + p.out_size) * item
        packed_dy = self.schedule("forward").out_size
        return int(packed_x + packed_dy + p.out_size) * item

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

    def _pack_input(self, x: Array, nthreads: int, ws: _Scope) -> Array:
        g, fwd = self.geom, self.schedule("forward").info
        (pt, _), (pl, _) = g.pads
        maps = padding_maps(g)  # forward and weight gradient build a padding mode here
        if g.depthwise:
            return self._pack_activation(x, fwd.CB, g.K, g.Kg, 1, (pt, pl), fwd.Hp, fwd.Wp,
                                         nthreads, ws, maps)
        return self._pack_activation(x, fwd.CB, g.Cg, 1, g.groups, (pt, pl), fwd.Hp, fwd.Wp,
                                     nthreads, ws, maps)

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
        """The packed forward weight of ``w``, for :meth:`forward`."""
        return TransformedWeight(self.name, self.geom, self._pack_forward_weight(w, nthreads))

    def forward(self, x: Array, w: Array, bias: Optional[Array], y: Array, alpha: float,
                beta: float, nthreads: int, prepared: Optional[TransformedWeight] = None) -> None:
        """``y = alpha * (conv(x, w) + bias) + beta * y`` (y a logical NCHW view).

        ``prepared``: the result of :meth:`prepare_weight` for ``w``, or None."""
        g, target = self.geom, self._target(y)
        p = self.schedule("forward", target)
        with _workspace.scope() as ws:
            packed_x = self._pack_input(x, nthreads, ws)
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

    def backward_weight(self, dy: Array, x: Array, nthreads: int) -> Array:
        """The weight gradient as a new contiguous (K, C/groups, R, S) array."""
        g, p = self.geom, self.schedule("backward_weight")
        fwd = p.info.forward
        with _workspace.scope() as ws:
            packed_x = self._pack_input(x, nthreads, ws)
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
