"""Winograd F(2x2,3x3) convolution: forward, backward-data, backward-weight.

Forward (Lavin & Gray): ``Y = A^T [(G g G^T) * (B^T d B)] A`` on overlapping 4x4 input tiles
``d`` giving 2x2 output tiles.  The filter transform ``U = G g G^T`` runs once per call on
vectors of 32 filters (parallel over blocks of (output channels, 8 input channels)), or once
per ``ConvPlan.prepare_weight``; the input transform, the 16 channel-reduction GEMMs and the
output transform run fused per block of tiles in ``cconv._kernels._winograd_<isa>`` (Cython, OpenMP
``prange`` over (image, group, tile block), GEMM register-tiled with GCC vector types).  The
GEMM is done in Cython, not BLAS: a BLAS call between ``prange`` regions competes with
spinning OpenMP workers (PERFORMANCE_NOTES.md) and would need the 16 transformed matrices of
the whole batch in memory.

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

Accuracy and speed: see ``WinogradConvolution``.
"""

from __future__ import annotations

import importlib

import numpy as np

from . import _workspace
from ._direct import _EMPTY
from ._kernels import _layout
from ._simd import LEVEL
from ._threads import get_num_threads

kernels = importlib.import_module(f"cconv._kernels._winograd_{LEVEL}")


_CTYPE = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}

# Target bytes of one job's transformed input tiles (16 x tiles x channels): L2 is >= 1 MiB
# on the CPUs we target, and the transformed filters of one channel block share it.
_V_BYTES = 512 * 1024
# Backward-weight: bytes of one job's partial sums plus transformed tiles (L2 per core).
_WEIGHT_L2_BYTES = 1024 * 1024
# Forward with a transformed filter above _BIG_FILTER_BYTES per group: tile blocks of up to
# _BIG_TILE_BYTES of transformed tiles (see _Problem).
_BIG_FILTER_BYTES = 8 * 1024 * 1024
_BIG_TILE_BYTES = 4 * 1024 * 1024
# Upper bound for the per-split partial sums of backward-weight.
_PARTIAL_BYTES = 64 * 1024 * 1024


def _padded_channels(Cg, vl):
    """Channels of the packed input: channels are the scalar (broadcast) side of the GEMM,
    so any count works and small groups stay unpadded; larger ones use vector-wide blocks."""
    return Cg if Cg <= 2 * vl else -(-Cg // vl) * vl


class _Problem:
    """Sizes of one Winograd forward convolution (the layer's, or backward-data's)."""

    def __init__(self, N, G, Cg, H, W, Kg, pads, dtype, tile_bytes=_V_BYTES, min_blocks=8,
                 tile_channels=None, matrices=16, budget_extra=0):
        (pt, pb), (pl, pr) = pads
        self.N, self.G, self.Cg, self.Kg, self.dtype = N, G, Cg, Kg, dtype
        self.pt, self.pl = pt, pl
        self.OH, self.OW = H + pt + pb - 2, W + pl + pr - 2
        self.tH, self.tW = -(-self.OH // 2), -(-self.OW // 2)
        self.Hp, self.Wp = 2 * self.tH + 2, 2 * self.tW + 2
        vl = kernels.VECTOR_LENGTH[dtype.name]
        self.KB = 2 * vl
        self.Kb = -(-Kg // self.KB)
        self.block = Cg if Cg <= 2 * vl else vl
        self.Cp = _padded_channels(Cg, vl)
        self.ncb = self.Cp // self.block
        rows = kernels.TILE_ROWS
        # Tile blocks are numbered across the batch (a block may hold several small images),
        # TILE_ROWS-multiples so the GEMM rows are full; at most what fits the cache, and
        # small enough for min_blocks blocks per group when the batch has the tiles.
        # tile_channels, matrices: channels and transformed matrices of one job (backward-
        # weight splits both); budget_extra: more elements per tile and matrix that share
        # tile_bytes (backward-weight's transformed dy of one output block).
        total = N * self.tH * self.tW
        cc = self.Cp if tile_channels is None else tile_channels
        pad = kernels.MATRIX_PAD[dtype.name]
        # Backward-weight pads each transformed tile row by 64 bytes (see its kernel).
        row = cc if tile_channels is None else cc + pad
        per_rows = matrices * rows * (row + budget_extra) * dtype.itemsize
        self.tblock = rows * max(1, min(16, tile_bytes // per_rows, total // (rows * min_blocks)))
        # Forward jobs (tile block, chunk of output-channel blocks).  Each tile block reads
        # the whole transformed filter U; when U is far larger than the L2 cache (512
        # channels: 16 MiB per group) that traffic dominates, so blocks grow to a bigger
        # budget (fewer passes over U) and output-channel chunks restore the job count.
        # Measured at 2 threads: vgg16.conv4_2 forward 116-124 -> 89-92 ms, res5 15.3 ->
        # 12.9 ms; at 256 channels (U = 4 MiB) bigger blocks were slower (res4 6.5 -> 7.0).
        self.kchunk = self.Kb
        u_group = 16 * self.Cp * self.Kb * self.KB * dtype.itemsize
        if tile_channels is None and u_group > _BIG_FILTER_BYTES:
            row_groups = -(-total // rows)
            per_block = max(1, min(16, _BIG_TILE_BYTES // per_rows))
            nblocks = -(-row_groups // per_block)
            self.tblock = rows * -(-row_groups // nblocks)
            nkc = min(self.Kb, -(-8 // (G * nblocks)))
            self.kchunk = -(-self.Kb // nkc)
        self.scratch_per_thread = (matrices * (self.tblock * row + pad)
                                   + matrices * (self.tblock * self.KB + pad))

    def packed_input_size(self):
        return self.N * self.G * self.ncb * self.Hp * self.Wp * self.block

    def filter_size(self):
        return self.G * self.Kb * 16 * self.Cp * self.KB

    # Backward-weight's operands: dy packed in blocks of KB output channels, and the 16
    # transformed-gradient matrices of one split (the same shape as the transformed filter).
    def packed_grad_size(self):
        return self.N * self.G * self.Kb * 2 * self.tH * 2 * self.tW * self.KB

    def partial_size(self):
        return self.filter_size()

    def pack_input(self, x, nthreads, ws):
        """The zero-padded blocked input, or None if ``x`` holds a NaN or an infinity."""
        packed = ws.empty(self.packed_input_size(), self.dtype)
        bad = _layout.pack_input(x, packed, self.G, self.Cg, self.Cg, 1, self.block, self.pt,
                                 self.pl, self.Hp, self.Wp, nthreads)
        return None if bad else packed

    def transform_filter(self, w, nthreads, U):
        """``w`` (G*Kg, Cg, 3, 3) -> ``U [G][Kb][16][Cp][KB]``; None if not all finite."""
        bad = getattr(kernels, f"transform_filter_{_CTYPE[self.dtype]}")(
            w, self.G, self.Cp, self.Kb, U, nthreads)
        return None if bad else U

    def run(self, x, w, bias, y, alpha, beta, nthreads, U=None):
        """Compute into ``y`` and return True, or return False (``y`` untouched) when an
        operand holds a NaN or an infinity.  ``U``: the filter already transformed."""
        with _workspace.scope() as ws:
            packed = self.pack_input(x, nthreads, ws)
            if U is None and packed is not None:
                U = self.transform_filter(w, nthreads, ws.empty(self.filter_size(), self.dtype))
            if packed is None or U is None:
                return False
            # Every scratch element a job reads it has written first (partial tile blocks
            # repeat their last row), so pooled garbage is never read.
            scratch = ws.empty(nthreads * self.scratch_per_thread, self.dtype)
            run = getattr(kernels, f"forward_{_CTYPE[self.dtype]}")
            run(packed, self.N, self.G, self.ncb, self.block, self.Hp, self.Wp, self.tH,
                self.tW, U, self.Kg, self.Kb, self.tblock, self.kchunk, scratch, y,
                _EMPTY[self.dtype] if bias is None else bias, alpha, beta, nthreads)
        return True

    def workspace_bytes(self, nthreads):
        return (self.packed_input_size() + self.filter_size()
                + nthreads * self.scratch_per_thread) * self.dtype.itemsize


class WinogradConvolution:
    """Winograd F(2x2,3x3) convolution of one geometry (3x3 kernel, stride 1, dilation 1).

    Any padding (asymmetric, or larger than 2 on backward-data, which then crops), any
    spatial size (partial edge tiles), groups and depthwise (run as groups of one channel:
    correct, but the GEMM then wastes most of its vector lanes), float32 and float64.

    Accuracy, measured on random normal data against a float64 reference, as
    max |error| / max |reference| in float32 (padding 1): forward 1.9e-7 (C = K = 16,
    28x28) rising to 1.1e-6 (C = K = 512, 8x8), backward-data 1.9e-7 .. 8.7e-7,
    backward-weight 3.2e-7 .. 1.3e-6; the direct kernel measures 3.7e-7 .. 3.2e-6 on the
    same cases.  Bound asserted by the tests: 1e-4 at C = K = 256 and 512, 1e-5 on the
    shape sweep (float32), 1e-12 in float64.

    Speed (effective GFLOP/s = direct FLOPs / time; ratio to the direct kernel and to
    PyTorch 2.13 in the same process, 2 threads, float32, on a shared 2-core AVX-512 VM
    where absolute figures are noisy): see ``_dispatch.heuristic`` for the ratios that
    decide ``auto`` and the README for the full table (``python -m cconv bench --algos
    direct,winograd``).

    NaN and Inf: the tile transforms mix a whole 4x4 tile, so a non-finite input would leak
    into outputs whose window does not contain it (0 * NaN = NaN).  The packing and filter
    transform note any non-finite operand as they copy it (no extra pass); such calls are
    then computed by the direct kernel, so NaN and Inf land exactly where the definition
    puts them.
    """

    name = "winograd"

    @staticmethod
    def why_not(geom, op):
        """None if Winograd F(2x2,3x3) can run ``op`` on ``geom``, else the reason."""
        if (geom.R, geom.S) != (3, 3):
            return f"Winograd F(2x2,3x3) needs a 3x3 kernel, got {geom.R}x{geom.S}"
        if tuple(geom.stride) != (1, 1):
            return f"Winograd F(2x2,3x3) needs stride 1, got stride {tuple(geom.stride)}"
        if tuple(geom.dilation) != (1, 1):
            return f"Winograd F(2x2,3x3) needs dilation 1, got dilation {tuple(geom.dilation)}"
        return None

    def __init__(self, geom):
        reason = self.why_not(geom, "forward")
        if reason:
            raise ValueError(reason)
        self.geom = g = geom
        self._fwd = _Problem(g.N, g.groups, g.Cg, g.H, g.W, g.Kg, g.pads, g.dtype)
        (pt, pb), (pl, pr) = g.pads
        self._bwd = _Problem(g.N, g.groups, g.Kg, g.OH, g.OW, g.Cg,
                             ((2 - pt, 2 - pb), (2 - pl, 2 - pr)), g.dtype)
        assert (self._fwd.OH, self._fwd.OW) == (g.OH, g.OW)
        assert (self._bwd.OH, self._bwd.OW) == (g.H, g.W)
        # Backward-weight: a job (split, group, input-channel chunk, output-channel chunk,
        # half of the 16 matrices) walks its tile blocks once; one input transform per tile
        # block serves all of the chunk's output-channel blocks, and its partial sums
        # (kchunk x matrices x cc x KB) and transformed tiles stay within ~1 MiB of L2
        # together.  When the output channels do not fit one chunk, jobs take half of the
        # matrices: the two halves of an input transform cost about one whole transform,
        # where another output chunk would repeat it.  Input-channel chunks of 128 (not 112,
        # which fills the 14-row GEMM tiles exactly) measured faster on res4 and res5: each
        # chunk repeats the transform of dy.
        vl = kernels.VECTOR_LENGTH[g.dtype.name]
        Cp = _padded_channels(g.Cg, vl)
        cc = min(Cp, 128)
        Kb = -(-g.Kg // (2 * vl))
        p_block = 16 * cc * 2 * vl * g.dtype.itemsize
        self._parts = 1
        if _WEIGHT_L2_BYTES // 2 // p_block < Kb:
            self._parts = 2
            p_block //= 2
        kchunk = max(1, min(Kb, _WEIGHT_L2_BYTES // 2 // p_block))
        # With one block the tiles take the whole budget: longer reductions per load and
        # store of the partial sums.
        tile_bytes = (_WEIGHT_L2_BYTES if kchunk == 1
                      else max(_WEIGHT_L2_BYTES - kchunk * p_block, _WEIGHT_L2_BYTES // 2))
        self._wgt = _Problem(g.N, g.groups, g.Cg, g.H, g.W, g.Kg, g.pads, g.dtype,
                             tile_bytes=tile_bytes, min_blocks=1, tile_channels=cc,
                             matrices=16 // self._parts, budget_extra=2 * vl)
        p = self._wgt
        self._kchunk = kchunk
        self._cchunk = cc // p.block
        jobs = g.groups * -(-p.Kb // kchunk) * -(-p.ncb // self._cchunk) * self._parts
        blocks = -(-(g.N * p.tH * p.tW) // p.tblock)
        psize = p.partial_size() * g.dtype.itemsize
        # A fixed number of splits (never the thread count): deterministic partial sums.
        self._splits = max(1, min(-(-8 // jobs), blocks, _PARTIAL_BYTES // psize))

    def _direct(self):
        from ._dispatch import implementation  # the cached direct plan of this geometry
        return implementation(self.geom, "direct")

    def workspace_bytes(self, op):
        """Bytes one call of ``op`` allocates besides its result (at the default threads)."""
        g, nt = self.geom, get_num_threads()
        if op == "forward":
            return int(self._fwd.workspace_bytes(nt))
        if op == "backward_data":
            return int(self._bwd.workspace_bytes(nt))
        p = self._wgt
        items = (p.packed_input_size() + p.packed_grad_size() + self._splits * p.partial_size()
                 + nt * p.scratch_per_thread)
        return int(items * g.dtype.itemsize)

    def prepare_weight(self, w, nthreads):
        """The transformed filter of ``w`` for :meth:`forward`, or None if not all finite."""
        return self._fwd.transform_filter(w, nthreads,
                                          np.empty(self._fwd.filter_size(), self.geom.dtype))

    def forward(self, x, w, bias, y, alpha, beta, nthreads, prepared=None):
        """``y = alpha * (conv(x, w) + bias) + beta * y`` (y a logical NCHW view).

        ``prepared``: the result of :meth:`prepare_weight` for ``w``."""
        if not self._fwd.run(x, w, bias, y, alpha, beta, nthreads, U=prepared):
            self._direct().forward(x, w, bias, y, alpha, beta, nthreads)

    def backward_data(self, dy, w, dx, alpha, beta, nthreads, bias=None):
        """``dx = alpha * (conv_backward_data(dy, w) + bias) + beta * dx`` (logical NCHW)."""
        g = self.geom
        # Rotate 180 degrees and swap channel roles per group: (G, Kg, Cg) -> (G, Cg, Kg).
        wr = w.reshape(g.groups, g.Kg, g.Cg, 3, 3)[:, :, :, ::-1, ::-1].transpose(0, 2, 1, 3, 4)
        if not self._bwd.run(dy, wr.reshape(g.C, g.Kg, 3, 3), bias, dx, alpha, beta, nthreads):
            self._direct().backward_data(dy, w, dx, alpha, beta, nthreads, bias=bias)

    def backward_weight(self, dy, x, nthreads):
        """The weight gradient as a new contiguous (K, C/groups, 3, 3) array."""
        g, p = self.geom, self._wgt
        dt = g.dtype
        with _workspace.scope() as ws:
            packed_x = p.pack_input(x, nthreads, ws)
            packed_dy = ws.empty(p.packed_grad_size(), dt)
            if packed_x is None or _layout.pack_input(dy, packed_dy, g.groups, g.Kg, g.Kg, 1,
                                                      p.KB, 0, 0, 2 * p.tH, 2 * p.tW, nthreads):
                return self._direct().backward_weight(dy, x, nthreads)
            partial = ws.empty(self._splits * p.partial_size(), dt)
            scratch = ws.empty(nthreads * p.scratch_per_thread, dt)
            run = getattr(kernels, f"backward_weight_{_CTYPE[dt]}")
            run(packed_x, packed_dy, g.N, g.groups, p.ncb, p.block, p.Hp, p.Wp, p.Kb, p.tH,
                p.tW, p.tblock, self._splits, self._kchunk, self._cchunk, self._parts, scratch,
                partial, nthreads)
            # Sum the splits in a fixed order, then dg = G^T P G.
            grad = np.empty((g.K, g.Cg, 3, 3), dt)
            getattr(kernels, f"weight_gradient_{_CTYPE[dt]}")(partial, self._splits, g.groups,
                                                             p.Kb, p.Cp, grad, nthreads)
        return grad
