"""Sizes and job layouts of Winograd F(2x2,3x3) and F(4x4,3x3): how a pass is cut into
cache-sized jobs, and which tile size the forward and data gradient take (``f4_problem``).

Everything here is arithmetic on shapes, done once per geometry; nothing touches data.  The
kernels (``cconv/_kernels/_winograd.pyx.tp``) receive these sizes and check them against the
buffers they are given.

Glossary (the kernels use the same names):

=========  ===========================================================================
``tile``   output pixels a tile side (2 or 4); ``points``: its ``(tile + 2)^2`` matrices
``tH/tW``  output tiles per image along height / width (partial edge tiles included)
``Hp/Wp``  packed (zero-padded) input height / width: ``tile * tiles + 2``
``KB``     output channels per GEMM column block: two vectors (``2 * VL``)
``Kb``     number of such output-channel blocks per group
``block``  input channels per packed channel block (all of a small group, else ``VL``)
``Cp``     input channels per group after padding to whole blocks
``ncb``    input-channel blocks per group (``Cp / block``)
``tblock`` tiles per tile block (a multiple of the GEMM's ``TILE_ROWS``)
``kchunk`` output-channel blocks one job computes
=========  ===========================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional, Tuple

from .._simd import winograd as kernels

if TYPE_CHECKING:
    import numpy as np

    from .._geometry import ConvGeometry, Pads

# Target bytes of one job's transformed input tiles (16 x tiles x channels): L2 is >= 1 MiB
# on the CPUs we target, and the transformed filters of one channel block share it.
V_BYTES = 512 * 1024
# Backward-weight: bytes of one job's partial sums plus transformed tiles (L2 per core).
WEIGHT_L2_BYTES = 1024 * 1024
# Forward with a transformed filter above BIG_FILTER_BYTES per group: tile blocks of up to
# BIG_TILE_BYTES of transformed tiles (see TileProblem).
BIG_FILTER_BYTES = 8 * 1024 * 1024
BIG_TILE_BYTES = 4 * 1024 * 1024
# Forward and data gradient whose whole batch of transformed tiles is at most
# FEW_TILES_BYTES per group, with at least FEW_TILES_JOBS output-channel blocks: one tile
# block, jobs split by output channels (``TileProblem.few_tiles``; on more threads than
# those jobs serve, ``layout_for`` keeps the tile blocks).  Interleaved, Intel Xeon
# model 207 (AVX-512, 2 MiB L2), float32, old time / new, forward and data gradient, 1
# thread then 2: 1x256 14x14 (F(2x2), 0.88 MiB of tiles) 1.13 / 1.17, 1.19 / 1.18; 1x128
# 28x28 (F(4x4), 0.98 MiB) 1.10 / 1.12, 1.12 / 1.08.  Larger batches of tiles measured
# mixed: 2x256 14x14 (1.53 MiB) 1.08 / 1.08, 1.08 / 1.05; 2x128 28x28 (1.72 MiB) 1.04 /
# 1.04, 0.94 / 1.00; 4x256 14x14 (3.1 MiB) 1.05 / 1.05, 0.92 / 0.92; 8x256 14x14 0.86-0.92;
# 1 MiB also leaves the tiles in the L2 cache of CPUs with 1 MiB per core.  (Same bits:
# every sum runs in the same order.)
FEW_TILES_BYTES = 1024 * 1024
FEW_TILES_JOBS = 4
# A transformed filter above STREAM_FILTER_BYTES is stored around the caches (non-temporal
# stores): beyond a core's L2 its lines were read for ownership only to be evicted before
# the GEMMs read them.  Interleaved, AMD EPYC Zen 4 (AVX-512), float32, 8 images, ms,
# plain stores / streamed (both with the filter transform's prefetch), 1 / 2 threads:
# 512 channels 7x7 forward 19.4 / 18.5 and 13.6 / 11.4, data gradient 2t 13.2 / 11.0;
# 256 channels 14x14 (a 4 MiB U) 12.6 / 12.1 and 7.2 / 6.6; 128 channels 28x28 (1 MiB)
# 12.9 / 12.8 (1t): no gain where L2 holds it, so such filters keep plain stores.
STREAM_FILTER_BYTES = 2 * 1024 * 1024
# F(4x4,3x3) for the forward and data gradient (``f4_problem``): 36 products per 4x4 tile
# against F(2x2)'s 16 per 2x2 tile, 0.56x where the output is a multiple of 4 pixels a
# side; a 14x14 or 13x13 output wastes a quarter of its 4x4 tiles (0.73x).  Taken where
# its products are at most F4_MAX_PRODUCTS of F(2x2)'s and its tiles (over the batch, per
# group) at least F4_MIN_TILES: the filter transform (36 matrices against 16, each call)
# needs that many tiles to pay.  Interleaved, AMD EPYC Zen 4 (AVX-512), float32, padding 1,
# F(2x2) time over F(4x4) time, forward / data gradient, 1 thread then 2:
#   8x64->64 56x56     1.43 / 1.45   1.31 / 1.50     8x128->128 28x28   1.58 / 1.62   1.43 / 1.38
#   8x512->512 7x7     1.20 / 1.29   1.17 / 1.03     1x128->128 28x28   1.35 / 1.34   1.28 / 1.20
#   2x64->64 224x224   1.60 / 1.57                   8x256->256 56x56   1.52 (forward, 1t)
#   8x16->16 56x56     1.46 (forward, 1t)            8x64->128 28x28    1.49 (forward, 1t)
# and not taken: 8x256->256 14x14 1.11 / 1.07, 1.00 / 0.96 (products 0.73x); 4x256 14x14
# 1.11 (fwd 1t), 0.75 / 0.81; 1x256 14x14 0.78 / 0.94, 0.83 / 0.75; 4x512 7x7 (16 tiles)
# 1.01 (fwd 1t), 0.89 / 0.93; 2x512 7x7 0.91 (fwd 1t).  The AVX2 kernels on the same CPU
# (CCONV_SIMD=avx2): 8x128 28x28 1.28 / 1.46, 1.32 / 1.42; 8x512 7x7 1.21 / 1.14, 1.05 /
# 1.13; 8x64 56x56 1.36 / 1.34 (1t); 1x128 28x28 1.05 / 1.19 (1t).  Products 0.60-0.65x
# of F(2x2)'s (outputs of 26, 30 and 58 pixels a side; the padded input's gradient of
# ResNet-50's res2 and res3 under a padding mode), Intel Xeon model 207 (AVX-512), 1 / 2
# threads: 8x128 26x26 forward 1.12 / 1.09, 8x128 30x30 1.39 / 1.20, 8x64 58x58 1.35 /
# 1.37, res2 reflect data gradient 1.26 / 1.23, res3 1.15 / 1.01; hence 0.66.  At 16
# channels (``auto`` takes F(4x4) from there) these sizes ran 1.22-2.14x the direct kernel
# (8x16 26x26, 30x30, 58x58 and 1x16 58x58, forward and data gradient, same machine).
F4_ENABLED = True
F4_MAX_PRODUCTS = 0.66
F4_MIN_TILES = 32
# Upper bound for the per-split partial sums of backward-weight.
PARTIAL_BYTES = 64 * 1024 * 1024
# Jobs per thread below which a Winograd pass gives each job fewer output-channel blocks
# (more jobs, the same sums).  A batch-1 256-channel 14x14 layer has 4 tile blocks, so 4
# forward jobs; ResNet-50's res3 weight gradient 8 (4 splits x 2 halves of the matrices).
# Intel Xeon (family 6 model 207, AVX-512, 16 cores), interleaved in one process, shape-only
# chunks -> 1 -> 2 jobs per thread, ms at 16 threads: batch-1 256 forward 0.86 -> 0.53 ->
# 0.50, data gradient 0.88 -> 0.56 -> 0.51; res5 forward 3.90 -> 2.76 -> 2.65; res3 weight
# gradient 2.16 -> 1.55 -> 1.58, res4 2.37 -> 1.59 -> 1.54, batch-1 128 0.55 -> 0.44 -> 0.38;
# at 4 and 8 threads within 0.93-1.07x where the chunks changed at all, except batch-1 256
# (8 threads: 1.11 -> 0.83 ms forward).  Two threads keep their chunks on every suite layer.
FORWARD_JOBS_PER_THREAD = 2
WEIGHT_JOBS_PER_THREAD = 2
# Backward-weight input-channel chunk: 128 (not 112, which fills the 14-row GEMM tiles
# exactly) measured faster on res4 and res5, since each chunk repeats the transform of dy.
WEIGHT_CHANNEL_CHUNK = 128


def _chunk_for_threads(kchunk: int, Kb: int, jobs: Callable[[int], int], per_thread: int,
                       nthreads: int) -> int:
    """Output-channel blocks per job on ``nthreads`` threads: ``kchunk``, or fewer (as even
    as they come) where ``jobs(kchunk)`` is under ``per_thread * nthreads``; ``jobs(Kb)`` is
    the count with one block per job."""
    want = per_thread * nthreads
    if nthreads <= 1 or jobs(kchunk) >= want:
        return kchunk
    nkc = min(Kb, -(-want // jobs(Kb)))
    return -(-Kb // nkc)


def padded_channels(Cg: int, vl: int) -> int:
    """Channels of the packed input: channels are the scalar (broadcast) side of the GEMM,
    so any count works and small groups stay unpadded; larger ones use vector-wide blocks."""
    return Cg if Cg <= 2 * vl else -(-Cg // vl) * vl


class TileProblem:
    """Sizes of one Winograd forward convolution (the layer's, or backward-data's)."""

    def __init__(self, N: int, G: int, Cg: int, H: int, W: int, Kg: int, pads: Pads,
                 dtype: np.dtype[Any], tile_bytes: Optional[int] = None, min_blocks: int = 8,
                 tile_channels: Optional[int] = None, matrices: Optional[int] = None,
                 budget_extra: int = 0, tile: int = 2) -> None:
        (pt, pb), (pl, pr) = pads
        self.N, self.G, self.Cg, self.Kg, self.dtype = N, G, Cg, Kg, dtype
        self.pt, self.pl = pt, pl
        # F(tile x tile, 3x3): 2 or 4 output pixels a side, (tile + 2)^2 transformed matrices
        self.tile, self.points = tile, (tile + 2) ** 2
        matrices = self.points if matrices is None else matrices
        self.OH, self.OW = H + pt + pb - 2, W + pl + pr - 2
        self.tH, self.tW = -(-self.OH // tile), -(-self.OW // tile)
        self.Hp, self.Wp = tile * self.tH + 2, tile * self.tW + 2
        vl = kernels.VECTOR_LENGTH[dtype.name]
        self.KB = 2 * vl
        self.Kb = -(-Kg // self.KB)
        self.block = Cg if Cg <= 2 * vl else vl
        self.Cp = padded_channels(Cg, vl)
        self.ncb = self.Cp // self.block
        rows = kernels.TILE_ROWS
        tile_bytes = V_BYTES if tile_bytes is None else tile_bytes
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
        u_group = self.points * self.Cp * self.Kb * self.KB * dtype.itemsize
        row_groups = -(-total // rows)
        # The layout of many threads where the few-tiles one has too few jobs for them
        # (``layout_for``); None where there is one layout.
        self.many_threads: Optional[Tuple[int, int]] = None
        few = self.few_tiles(row_groups * per_rows)
        if tile_channels is None and (u_group > BIG_FILTER_BYTES or few):
            if few and u_group <= BIG_FILTER_BYTES:
                self.many_threads = (self.tblock, self.kchunk)
            per_block = max(1, min(16, BIG_TILE_BYTES // per_rows))
            nblocks = -(-row_groups // per_block)
            self.tblock = rows * -(-row_groups // nblocks)
            nkc = min(self.Kb, -(-8 // (G * nblocks)))
            self.kchunk = -(-self.Kb // nkc)
        # One thread's scratch slice: the transformed input tiles V and the products M, each
        # `matrices` matrices padded apart (room for the larger tile block of the two
        # layouts).  The kernels recompute this size from the same sizes as the bounds
        # check on the buffer they are given.
        most = max(self.tblock, self.many_threads[0] if self.many_threads else 0)
        self.scratch_per_thread = (matrices * (most * row + pad)
                                   + matrices * (most * self.KB + pad))
        # One tile block (the few-tiles layout, or a big filter's few tiles) gives every
        # output block one job, which can transform that block's filters itself
        # (``winograd.filter_in_jobs``): one output block's transformed filter more per
        # thread.
        self.single_block = tile_channels is None and self.tblock >= total
        if self.single_block:
            self.scratch_per_thread += matrices * self.Cp * self.KB
        self.stream_filter = self.filter_size() * dtype.itemsize > STREAM_FILTER_BYTES

    def few_tiles(self, all_tiles_bytes: int) -> bool:
        """Whether the batch's transformed tiles (``all_tiles_bytes`` per group) make one
        block that stays in a core's cache, and output-channel chunks alone give enough
        jobs (``FEW_TILES_JOBS``): then one pass over the transformed filter serves them all.

        The tile blocks above are sized for a batch's worth of tiles; a batch-1 layer has so
        few that ``min_blocks`` cut them into blocks of ``TILE_ROWS`` tiles, each streaming
        the whole transformed filter (4 MiB at 256 channels) through the caches."""
        return (all_tiles_bytes <= FEW_TILES_BYTES
                and self.G * self.Kb >= FEW_TILES_JOBS)

    def jobs(self, kchunk: int, tblock: Optional[int] = None) -> int:
        """Parallel jobs of a forward call with ``kchunk`` output-channel blocks per job
        (and tile blocks of ``tblock`` tiles, :attr:`tblock` by default)."""
        blocks = -(-(self.N * self.tH * self.tW) // (tblock or self.tblock))
        return self.G * blocks * -(-self.Kb // kchunk)

    def layout_for(self, nthreads: int) -> Tuple[int, int]:
        """``(tblock, kchunk)`` of a forward call on ``nthreads`` threads.

        The few-tiles layout (one tile block, jobs split by output channels) has at most
        ``G * Kb`` jobs; where that is under ``FORWARD_JOBS_PER_THREAD * nthreads`` (batch-1
        256 channels on 16 threads: 8 jobs) the tile blocks of many threads serve instead,
        their chunks cut by :meth:`kchunk_for`'s rule.  Same sums either way: same bits."""
        if self.many_threads is not None and self.takes_many_threads_layout(nthreads):
            tblock, kchunk = self.many_threads
            return tblock, _chunk_for_threads(kchunk, self.Kb,
                                              lambda k: self.jobs(k, tblock),
                                              FORWARD_JOBS_PER_THREAD, nthreads)
        return self.tblock, self.kchunk_for(nthreads)

    def takes_many_threads_layout(self, nthreads: int) -> bool:
        """Whether a call on ``nthreads`` threads runs :attr:`many_threads`' tile blocks
        (there are such; the few-tiles layout has too few jobs for them)."""
        return (self.many_threads is not None
                and self.G * self.Kb < FORWARD_JOBS_PER_THREAD * nthreads)

    def kchunk_for(self, nthreads: int) -> int:
        """Output-channel blocks per forward job on ``nthreads`` threads: all of them on
        one thread, else :attr:`kchunk`, or fewer where its jobs are under
        ``FORWARD_JOBS_PER_THREAD * nthreads``.  Every output element is summed over all
        channels in the same order whatever the chunk, so the results are the same bits at
        any thread count; smaller chunks repeat the input transform of their tile block
        once per chunk, which one thread has no use for.  ResNet-50 res5 (8x512x7x7, 4
        chunks of 4 blocks for 8 jobs), one thread, interleaved, AMD EPYC Zen 4 (AVX-512):
        forward 16.5 -> 13.6 ms (prepared weight), data gradient 19.7 -> 17.8 ms; on 2
        threads one chunk measured within the noise (8.3 / 8.7, 12.8 / 12.2), so 2 threads
        keep the job count."""
        if nthreads <= 1:
            return self.Kb
        return _chunk_for_threads(self.kchunk, self.Kb, self.jobs, FORWARD_JOBS_PER_THREAD,
                                  nthreads)

    def packed_input_size(self) -> int:
        """Elements of the zero-padded, channel-blocked input ``[N][G][ncb][Hp][Wp][block]``."""
        return self.N * self.G * self.ncb * self.Hp * self.Wp * self.block

    def filter_size(self) -> int:
        """Elements of the transformed filter ``U [G][Kb][points][Cp][KB]``."""
        return self.G * self.Kb * self.points * self.Cp * self.KB

    # Backward-weight's operands: dy packed in blocks of KB output channels, and the 16
    # transformed-gradient matrices of one split (the same shape as the transformed filter).
    def packed_grad_size(self) -> int:
        """Elements of backward-weight's blocked ``dy``."""
        return self.N * self.G * self.Kb * 2 * self.tH * 2 * self.tW * self.KB

    def partial_size(self) -> int:
        """Elements of one split's partial sums (shaped like the transformed filter)."""
        return self.filter_size()

    def workspace_bytes(self, nthreads: int) -> int:
        """Bytes of a forward call's packed input, transformed filter and scratch."""
        return (self.packed_input_size() + self.filter_size()
                + nthreads * self.scratch_per_thread) * self.dtype.itemsize




def forward_problem(geom: ConvGeometry, tile: int = 2) -> TileProblem:
    """The forward pass of ``geom`` as a :class:`TileProblem` of F(tile x tile, 3x3)."""
    g = geom
    return TileProblem(g.N, g.groups, g.Cg, g.H, g.W, g.Kg, g.pads, g.dtype, tile=tile)


def backward_data_problem(geom: ConvGeometry, tile: int = 2) -> TileProblem:
    """Backward-data of ``geom`` as the forward :class:`TileProblem` it is: ``dy`` convolved
    with the rotated filter, channel roles swapped, padded by ``2 - pad`` (negative: crop)."""
    g = geom
    (pt, pb), (pl, pr) = g.pads
    problem = TileProblem(g.N, g.groups, g.Kg, g.OH, g.OW, g.Cg,
                          ((2 - pt, 2 - pb), (2 - pl, 2 - pr)), g.dtype, tile=tile)
    assert (problem.OH, problem.OW) == (g.H, g.W)
    return problem


def f4_problem(geom: ConvGeometry, data_gradient: bool = False) -> Optional[TileProblem]:
    """The F(4x4,3x3) :class:`TileProblem` of the forward (or data gradient) of ``geom``
    where it is taken, else None (F(2x2,3x3)): packed channel blocks of whole vectors,
    4x4 tiles that fit the output (``F4_MAX_PRODUCTS``) and enough of them per group to
    pay for the larger filter transform (``F4_MIN_TILES``)."""
    if not F4_ENABLED:
        return None
    make = backward_data_problem if data_gradient else forward_problem
    p4, p2 = make(geom, tile=4), make(geom)
    vl = kernels.VECTOR_LENGTH[p4.dtype.name]
    tiles4, tiles2 = p4.N * p4.tH * p4.tW, p2.N * p2.tH * p2.tW
    if (p4.block % vl or tiles4 < F4_MIN_TILES
            or 36 * tiles4 > F4_MAX_PRODUCTS * 16 * tiles2):
        return None
    return p4


@dataclass(frozen=True)
class WeightGradientSchedule:
    """How backward-weight is cut into jobs.

    A job (split, group, input-channel chunk, output-channel chunk, ``16 / parts`` of the
    transformed matrices) walks its tile blocks once; one input transform per tile block
    serves all of the chunk's output-channel blocks.

    Attributes
    ----------
    problem : TileProblem
        Sizes, with tiles budgeted for one job's channels and matrices.
    parts : int
        1, or 2 when jobs take half of the 16 matrices each.
    kchunk : int
        Output-channel blocks per job.
    cchunk : int
        Input-channel blocks per job.
    splits : int
        Partial sums over the tiles, summed in order afterwards.  Fixed by the shape, never
        by the thread count, so results are bitwise the same on any number of threads.
    """

    problem: TileProblem
    parts: int
    kchunk: int
    cchunk: int
    splits: int

    def jobs(self, kchunk: int) -> int:
        """Parallel jobs of one call with ``kchunk`` output-channel blocks per job."""
        p = self.problem
        return (self.splits * p.G * -(-p.Kb // kchunk) * -(-p.ncb // self.cchunk)
                * self.parts)

    def kchunk_for(self, nthreads: int) -> int:
        """Output-channel blocks per job on ``nthreads`` threads: :attr:`kchunk`, or fewer
        where its jobs are under ``WEIGHT_JOBS_PER_THREAD * nthreads``.

        A job's output-channel chunk never changes how an element is summed (its tiles, in
        their order, are the split's), so unlike :attr:`splits` it may follow the thread
        count: the results stay the same bits.  Smaller chunks repeat the input transform
        of each tile block once per chunk, which only pays where threads would idle.
        """
        return _chunk_for_threads(self.kchunk, self.problem.Kb, self.jobs,
                                  WEIGHT_JOBS_PER_THREAD, nthreads)

    def workspace_items(self, nthreads: int) -> int:
        """Elements of scratch one backward-weight call on ``nthreads`` threads uses."""
        p = self.problem
        return (p.packed_input_size() + p.packed_grad_size() + self.splits * p.partial_size()
                + nthreads * p.scratch_per_thread)


def weight_gradient_schedule(geom: ConvGeometry) -> WeightGradientSchedule:
    """The :class:`WeightGradientSchedule` of ``geom``.

    The partial sums of a job (kchunk x matrices x channels x KB) and its transformed tiles
    stay within ``WEIGHT_L2_BYTES`` together.  When the output channels do not fit one
    chunk, jobs take half of the matrices: the two halves of an input transform cost about
    one whole transform, where another output chunk would repeat it.
    """
    g = geom
    vl = kernels.VECTOR_LENGTH[g.dtype.name]
    cc = min(padded_channels(g.Cg, vl), WEIGHT_CHANNEL_CHUNK)
    Kb = -(-g.Kg // (2 * vl))
    p_block = 16 * cc * 2 * vl * g.dtype.itemsize
    parts = 1
    if WEIGHT_L2_BYTES // 2 // p_block < Kb:
        parts = 2
        p_block //= 2
    kchunk = max(1, min(Kb, WEIGHT_L2_BYTES // 2 // p_block))
    # With one block the tiles take the whole budget: longer reductions per load and store
    # of the partial sums.
    tile_bytes = (WEIGHT_L2_BYTES if kchunk == 1
                  else max(WEIGHT_L2_BYTES - kchunk * p_block, WEIGHT_L2_BYTES // 2))
    p = TileProblem(g.N, g.groups, g.Cg, g.H, g.W, g.Kg, g.pads, g.dtype, tile_bytes=tile_bytes,
                    min_blocks=1, tile_channels=cc, matrices=16 // parts, budget_extra=2 * vl)
    cchunk = cc // p.block
    jobs = g.groups * -(-p.Kb // kchunk) * -(-p.ncb // cchunk) * parts
    blocks = -(-(g.N * p.tH * p.tW) // p.tblock)
    psize = p.partial_size() * g.dtype.itemsize
    splits = max(1, min(-(-8 // jobs), blocks, PARTIAL_BYTES // psize))
    return WeightGradientSchedule(p, parts, kchunk, cchunk, splits)
