"""Plans of the direct convolution: offset tables and job tables for the tile kernels.

A plan turns a ``ConvGeometry`` into the jobs ``run_jobs_*`` executes (see
``cconv/_kernels/_tiles.pyx.tp``).  Everything here is index arithmetic in
NumPy, done once per geometry and cached by the caller; nothing touches data.

Buffers (all contiguous, channels innermost):

=====================  ==============================================  ======================
buffer                 layout                                          made by
=====================  ==============================================  ======================
packed input (dense)   ``[P][N][G][Cb][Hp][Wp][CB]`` zero-padded       ``_layout.pack_input``
packed weight (fwd)    ``[G][Kb][Cb][R*S][CB][KB]``                    ``_layout.pack_weight``
blocked output         ``[N][G][Kb][OH*OW][KB]``                       ``run_jobs_*``
depthwise buffers      the same with ``G=1`` and channel blocks of VL  as above
=====================  ==============================================  ======================

Glossary:

=================  ======================================================================
``VL``             elements per vector (``tiles.VECTOR_LENGTH``)
``KB``, ``Kb``     output columns per tile (``2 * VL`` dense, ``VL`` narrow and
                   depthwise), and blocks of them per group
``CB``, ``Cb``     input channels per packed block (dense: at most ``MAX_CHANNEL_BLOCK``,
                   depthwise: ``VL``), and blocks of them per group
``Vb``             depthwise: blocks of ``VL`` virtual channels
``P``              stride phases of the packed input: ``sh * sw`` for a strided dense
                   layer with zero padding, else 1
``Hp``, ``Wp``     height and width of (one phase of) the zero-padded packed input
``OHp``, ``OWp``   height and width of backward-data's packed output gradient
``L``              reduction steps of a job (its ``length``)
``npix``           output pixels per image (``OH * OW``)
``grp``            a group index
=================  ======================================================================

Depthwise convolution with channel multiplier ``m`` works on ``K = C*m``
virtual channels: the packed input repeats each channel ``m`` times.
Backward-data is run one stride phase at a time: input pixels ``h = a + i*sh``
receive contributions only from taps ``r`` with ``(a + pad_top - r*dh) % sh == 0``,
and over ``i`` that is a stride-1 convolution of the output gradient.

A strided dense layer packs its input split into stride phases (``phased``): padded pixel
``(hp, wp)`` goes to phase ``(hp % sh, wp % sw)`` at ``(hp // sh, wp // sw)``.  A tap then
reads consecutive pixels of one phase, where in the whole padded plane it would read every
``sw``-th (half of each cache line, and of what the prefetchers bring, unused at stride 2).
The offsets stay sums of a tap part and a pixel part, so the jobs are unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Generic, List, Tuple, TypeVar

import numpy as np
import numpy.typing as npt

from .._simd import tiles

if TYPE_CHECKING:
    from .._geometry import ConvGeometry, Pads

Index = npt.NDArray[np.int64]
# Index arithmetic on broadcast grids of job coordinates (NumPy integer arrays of any shape).
Ints = npt.NDArray[Any]
Phase = Tuple[int, int, List[int], List[int]]

# The columns of a job table, in order: defined once, by the tile kernels.
JOB_FIELDS = tiles.JOB_FIELDS
TARGETS = ("blocked", "NCHW", "NHWC")
MAX_CHANNEL_BLOCK = 16
# Backward-weight splits its reduction until about this many jobs exist.  The
# number depends on the shape only, so results do not depend on the thread count.
TARGET_REDUCTION_JOBS = 64
# Bytes of the output gradient one backward-weight job reduces over, at most: every row
# tile of a piece (each a job) reads the piece's gradient rows again, which a piece this
# small finds in the L2 cache instead of memory.  Measured (dilated 64 -> 64 3x3 on
# 8x128x128, 1 thread, interleaved) on Intel Xeon model 207 (2 MiB L2): 2 MiB pieces
# (one per image) 170 ms, 512 KiB 136 ms, 160 KiB 136 ms.
REDUCTION_PIECE_BYTES = 256 * 1024
# Pixels of an image's piece at least, and bytes of all pieces' partial sums at most (the
# pieces the cache asks for, each a partial gradient to write and add up: a 512-channel
# 3x3 layer's is 9.4 MB).
REDUCTION_PIECE_MIN_PIXELS = 64
REDUCTION_PARTIALS_BYTES = 16 * 1024 * 1024
# Reduction steps ahead of the one it computes that a broadcast tile asks the cache for
# the input it will read (the ``ahead`` job column): two taps of a 16-channel block.
READ_AHEAD_STEPS = 32


def read_ahead(dtype: np.dtype[Any], vl: int, strided: bool) -> int:
    """The ``ahead`` column of a broadcast tile whose reduction walks taps (forward,
    backward-data), for vectors of ``vl`` elements of ``dtype``; ``strided``: the tile's
    pixels are a stride > 1 apart in its input.

    Measured on AMD EPYC Zen 4 (interleaved, 1 / 2 threads).  AVX-512 (asking every step):
    ResNet-50's 3x3 stride-2 layer forward 1.12 / 1.15x, data gradient 1.06 / 1.04x, the
    dilated layer 1.04-1.05x, the stem 0.98-1.04x, the rest within noise.  AVX2 (the tiles
    ask every 4th step, see ``_tiles.pyx.tp``): the stride-2 forward 1.13x, but stride-1
    tiles (the dilated layer 0.96-0.98x, the data gradient's phases 1.01x) read pixels
    the hardware foresees, so AVX2 asks for strided tiles only.  SSE: not measured, no
    asks.  The weight gradient's reduction walks pixels, which the hardware foresees
    (asking measured 0.90x on the dilated layer)."""
    if vl * dtype.itemsize >= 64:
        return READ_AHEAD_STEPS
    return READ_AHEAD_STEPS if vl * dtype.itemsize >= 32 and strided else 0


def channel_blocks(channels: int, limit: int = MAX_CHANNEL_BLOCK) -> Tuple[int, int]:
    """(number of blocks, block size): at most ``limit`` wide, with the least zero padding."""
    nblocks = -(-channels // limit)
    return nblocks, -(-channels // nblocks)


class OffsetTable:
    """Concatenates offset arrays into one int64 table; ``add`` returns a start index."""

    parts: List[Index]
    size: int

    def __init__(self) -> None:
        self.parts, self.size = [], 0

    def add(self, offsets: npt.ArrayLike) -> int:
        start = self.size
        offsets = np.ascontiguousarray(offsets, dtype=np.int64).ravel()
        self.parts.append(offsets)
        self.size += offsets.size
        return start

    def array(self) -> Index:
        if not self.parts:
            return np.zeros(1, np.int64)
        return np.concatenate(self.parts + [np.zeros(1, np.int64)])


def job_table(**columns: npt.ArrayLike) -> Index:
    """A job table from broadcastable columns named as in JOB_FIELDS."""
    columns.setdefault("inner", 1)
    if "ncols" not in columns:
        raise ValueError("every job table needs its valid column count")
    arrays = np.broadcast_arrays(*[np.asarray(columns.get(name, 0), dtype=np.int64)
                                   for name in JOB_FIELDS])
    return np.stack([a.ravel() for a in arrays], axis=1)


def _broadcast_tile(columns: int, vl: int, tile_rows: int) -> Tuple[str, int, int]:
    """(kind, rows, columns) of the broadcast tile for ``columns`` outputs per group: one
    vector of columns and twice the rows when they fit (same registers, half the waste)."""
    if columns <= vl:
        return "narrow", 2 * tile_rows, vl
    return "dense", tile_rows, 2 * vl


def row_tiles(count: int, tile_rows: int) -> Tuple[Index, Index]:
    starts = np.arange(0, count, tile_rows, dtype=np.int64)
    return starts, np.minimum(tile_rows, count - starts)


def _grid(h_count: int, w_count: int, h_step: int, w_step: int, base: int = 0) -> Index:
    """Offsets ``base + i*h_step + j*w_step`` for the grid (i, j), row-major."""
    i = np.arange(h_count, dtype=np.int64)[:, None]
    j = np.arange(w_count, dtype=np.int64)[None, :]
    return (base + i * h_step + j * w_step).ravel()


@dataclass(frozen=True)
class ForwardLayout:
    """Buffers of the forward pass, which backward-weight reads too.

    Depthwise convolution works on the ``K = C*m`` virtual channels in blocks of ``VL``:
    there ``CB = KB = VL`` and ``Cb = Kb = Vb``.

    Attributes
    ----------
    Hp, Wp : int
        Height and width of the zero-padded packed input (of each stride phase).
    CB : int
        Channels per block of the packed input.
    Cb : int
        Blocks of the packed input per group.
    KB : int
        Output channels per tile: the block of the packed weight and the blocked output.
    Kb : int
        Output-channel blocks per group.
    col_stride : int
        Elements between output columns in the target the jobs write.
    phases : (int, int)
        Stride phases (rows, columns) the packed input is split into: the stride, or (1, 1).
    """

    Hp: int
    Wp: int
    CB: int
    Cb: int
    KB: int
    Kb: int
    col_stride: int
    phases: Tuple[int, int] = (1, 1)


@dataclass(frozen=True)
class BackwardDataLayout:
    """Buffers of the backward-data pass (run one stride phase at a time).

    Attributes
    ----------
    phases : tuple of (tuple of int, tuple of int)
        Per stride phase holding pixels, in job order: the kernel rows and columns (taps)
        that reach it.  The packed weight holds one part per phase, in this order.
    pads : ((int, int), (int, int))
        Zero rows (top, bottom) and columns (left, right) around the packed ``dy``.
    OHp, OWp : int
        Height and width of the packed ``dy``.
    dy_block : int
        Channels per block of the packed ``dy`` (the reduction's channel block).
    red_blocks : int
        Blocks of the packed ``dy`` per group (depthwise: 1 per job's channel block).
    KB : int
        Result channels per tile.
    out_blocks : int
        Result-channel blocks per group.
    weight_size : int
        Elements of the packed weight, all phases together.
    col_stride : int
        Elements between output columns in the target the jobs write.
    """

    phases: Tuple[Tuple[Tuple[int, ...], Tuple[int, ...]], ...]
    pads: Pads
    OHp: int
    OWp: int
    dy_block: int
    red_blocks: int
    KB: int
    out_blocks: int
    weight_size: int
    col_stride: int


@dataclass(frozen=True)
class BackwardWeightLayout:
    """Buffers of the backward-weight pass.

    Attributes
    ----------
    forward : ForwardLayout
        The forward pass's layout: ``x`` is packed as forward packs it, ``dy`` as forward's
        blocked output, and the gradient comes out in the packed forward weight's blocks.
    splits : int
        Pieces of the reduction over images x pixels; each writes its own partial sums,
        which the caller adds in order.
    """

    forward: ForwardLayout
    splits: int


LayoutT = TypeVar("LayoutT", ForwardLayout, BackwardDataLayout, BackwardWeightLayout)


@dataclass
class Pass(Generic[LayoutT]):
    """Jobs of one pass plus what the runner needs to size and fill its buffers.

    Attributes
    ----------
    kind : str
        Tile kind: "dense", "narrow" or "depthwise" (see ``_tiles.pyx.tp``).
    jobs : ndarray
        The job table, int64, one row per job and a column per name of ``JOB_FIELDS``.
    table : ndarray
        The int64 offset table the jobs index into.
    out_size : int
        Elements of the blocked buffer the jobs write (0 when they write the result).
    info : ForwardLayout, BackwardDataLayout or BackwardWeightLayout
        The buffers of the pass.
    """

    kind: str
    jobs: Index
    table: Index
    out_size: int
    info: LayoutT


def _placement(target: str, n: Ints, first_channel: Ints, ncols: Ints, channels: int, npix: int,
               width: int, blocked_index: Ints) -> Tuple[Dict[str, npt.ArrayLike], int, int]:
    """Where jobs write: (job columns, row-offset scale, column stride).

    ``blocked``: the ``[...][npix][width]`` buffer a later unpack reads; ``NCHW`` /
    ``NHWC``: straight into a contiguous result with ``channels`` channels, columns
    ``first_channel .. first_channel + ncols`` of image ``n``.
    """
    if target == "blocked":
        return dict(out=blocked_index * npix * width, ncols=width), width, 1
    if target == "NCHW":
        return dict(out=(n * channels + first_channel) * npix, ncols=ncols,
                    bias=first_channel), 1, npix
    return dict(out=n * npix * channels + first_channel, ncols=ncols,
                bias=first_channel), channels, 1


def _axis_phases(size: int, out_size: int, kernel: int, stride: int, dilation: int,
                 pad: int) -> Tuple[List[Phase], int, int]:
    """Stride phases of one axis for backward-data.

    Returns ``(phases, pad_lo, pad_hi)``; each phase is ``(a, count, taps, shifts)``:
    input positions ``a + i*stride`` for ``i < count`` get output-gradient row
    ``i + shift`` for each tap.  ``pad_lo`` / ``pad_hi`` zero rows around the
    output gradient make every such row addressable.
    """
    phases, lo, hi = [], 0, 0
    for a in range(min(stride, size)):  # phases past the image hold no pixels
        count = len(range(a, size, stride))
        taps = [r for r in range(kernel) if (a + pad - r * dilation) % stride == 0]
        shifts = [(a + pad - r * dilation) // stride for r in taps]
        phases.append((a, count, taps, shifts))
        if count and shifts:
            lo = max(lo, -min(shifts))
            hi = max(hi, count - 1 + max(shifts) - (out_size - 1))
    return phases, lo, hi


def phased(geom: ConvGeometry) -> bool:
    """Whether the weight gradient reads ``geom``'s input split into stride phases: a strided
    dense layer with zero padding (a padding mode's maps index the whole padded plane).

    Only the weight gradient: its jobs walk pixels, where the phases make the reads
    contiguous (ResNet-50's res3 3x3 stride-2 layer, 2 threads, AMD EPYC Zen 4 AVX-512:
    15.5 -> 12.6 ms; the 7x7 stem unchanged).  The forward's jobs walk taps, which the
    phases scatter over four planes: the stem's forward went 20.8 -> 24.4 ms, res3's
    unchanged."""
    return geom.stride != (1, 1) and not geom.depthwise and geom.padding_mode == "zeros"


def _input_offsets(geom: ConvGeometry, Hp: int, Wp: int,
                   phase_pixels: int) -> Tuple[Index, Index]:
    """(taps, pixels): offsets in pixels of the packed input (planes of ``Hp x Wp``) of each
    filter tap and of each output pixel's window, whose sums address every product's input.
    ``phase_pixels``: pixels per stride phase of a phased input (see ``phased``), else 0."""
    sh, sw = geom.stride
    dh, dw = geom.dilation
    if not phase_pixels:
        return _grid(geom.R, geom.S, dh * Wp, dw), _grid(geom.OH, geom.OW, sh * Wp, sw)
    r = np.arange(geom.R, dtype=np.int64)[:, None] * dh
    s = np.arange(geom.S, dtype=np.int64)[None, :] * dw
    taps = ((r % sh) * sw + s % sw) * phase_pixels + (r // sh) * Wp + s // sw
    return taps.ravel(), _grid(geom.OH, geom.OW, Wp, 1)


def forward(geom: ConvGeometry, vl: int, tile_rows: int, target: str = "blocked",
            split_phases: bool = False) -> Pass[ForwardLayout]:
    """Jobs of the forward pass, writing to ``target`` (one of TARGETS); ``split_phases``:
    the packed input split into stride phases where ``phased(geom)``."""
    (pt, pb), (pl, pr) = geom.pads
    sh, sw = geom.stride
    Hp, Wp = geom.H + pt + pb, geom.W + pl + pr
    npix = geom.OH * geom.OW
    starts, nrows = row_tiles(npix, tile_rows)
    table = OffsetTable()
    taps, pixels = _input_offsets(geom, Hp, Wp, 0)
    if geom.depthwise:
        Vb, block = -(-geom.K // vl), vl
        plane = Hp * Wp * block
        red = table.add(taps * block)
        rows = table.add(pixels * block)
        n = np.arange(geom.N)[:, None, None]
        vb = np.arange(Vb)[None, :, None]
        RS = geom.R * geom.S
        place, scale, col_stride = _placement(target, n, vb * block,
                                              np.minimum(block, geom.K - vb * block), geom.K,
                                              npix, block, n * Vb + vb)
        outs = table.add(np.arange(npix) * scale)
        jobs = job_table(a=(n * Vb + vb) * plane, b=vb * RS * block, red=red, length=RS,
                         rows=rows + starts, outs=outs + starts, nrows=nrows, **place)
        layout = ForwardLayout(Hp=Hp, Wp=Wp, CB=block, Cb=Vb, KB=block, Kb=Vb,
                               col_stride=col_stride)
        out_size = geom.N * Vb * npix * block if target == "blocked" else 0
        return Pass("depthwise", jobs, table.array(), out_size, layout)
    G = geom.groups
    kind, tile_rows, KB = _broadcast_tile(geom.Kg, vl, tile_rows)
    starts, nrows = row_tiles(npix, tile_rows)
    Cb, CB = channel_blocks(geom.Cg)
    Kb = -(-geom.Kg // KB)
    phases = (sh, sw) if split_phases and phased(geom) else (1, 1)
    if phases != (1, 1):
        Hp, Wp = -(-Hp // sh), -(-Wp // sw)
        taps, pixels = _input_offsets(geom, Hp, Wp, geom.N * G * Cb * Hp * Wp)
    plane = Hp * Wp * CB
    reduction = (np.arange(Cb)[:, None, None] * plane + (taps * CB)[None, :, None]
                 + np.arange(CB)[None, None, :]).ravel()
    L = reduction.size
    red = table.add(reduction)
    rows = table.add(pixels * CB)
    n = np.arange(geom.N)[:, None, None, None]
    grp = np.arange(G)[None, :, None, None]
    kb = np.arange(Kb)[None, None, :, None]
    place, scale, col_stride = _placement(target, n, grp * geom.Kg + kb * KB,
                                          np.minimum(KB, geom.Kg - kb * KB), geom.K, npix, KB,
                                          (n * G + grp) * Kb + kb)
    outs = table.add(np.arange(npix) * scale)
    jobs = job_table(a=(n * G + grp) * Cb * plane, b=(grp * Kb + kb) * L * KB, red=red,
                     length=L, rows=rows + starts, outs=outs + starts, nrows=nrows,
                     ahead=read_ahead(geom.dtype, vl, geom.stride != (1, 1)), **place)
    layout = ForwardLayout(Hp=Hp, Wp=Wp, CB=CB, Cb=Cb, KB=KB, Kb=Kb, col_stride=col_stride,
                           phases=phases)
    out_size = geom.N * G * Kb * npix * KB if target == "blocked" else 0
    return Pass(kind, jobs, table.array(), out_size, layout)


def backward_data(geom: ConvGeometry, vl: int, tile_rows: int,
                  target: str = "blocked") -> Pass[BackwardDataLayout]:
    """Jobs of the backward-data pass, one stride phase at a time, writing to ``target``.

    A depthwise multiplier > 1 needs the blocked target (the unpack sums the copies)."""
    (pt, _), (pl, _) = geom.pads
    sh, sw = geom.stride
    dh, dw = geom.dilation
    rows_h, lo_h, hi_h = _axis_phases(geom.H, geom.OH, geom.R, sh, dh, pt)
    rows_w, lo_w, hi_w = _axis_phases(geom.W, geom.OW, geom.S, sw, dw, pl)
    OHp, OWp = geom.OH + lo_h + hi_h, geom.OW + lo_w + hi_w
    hw = geom.H * geom.W
    table = OffsetTable()
    if geom.depthwise:
        Vb, dy_block, KB = -(-geom.K // vl), vl, vl
        red_blocks, red_block, out_blocks, G = 1, vl, Vb, 1
    else:
        G = geom.groups
        kind, tile_rows, KB = _broadcast_tile(geom.Cg, vl, tile_rows)
        red_blocks, red_block = channel_blocks(geom.Kg)
        dy_block = red_block
        out_blocks = -(-geom.Cg // KB)
    plane = OHp * OWp * red_block
    job_parts, phases, w_offset = [], [], 0
    # Per job: its output block (image, group, block of channels) and the input row of its
    # first pixel, for the order below.
    blocks, first_rows = [], []
    for a, count_h, taps_h, shifts_h in rows_h:
        for b, count_w, taps_w, shifts_w in rows_w:
            if count_h == 0 or count_w == 0:
                continue
            npix = count_h * count_w
            starts, nrows = row_tiles(npix, tile_rows)
            tap_offsets = ((np.asarray(shifts_h, np.int64)[:, None] + lo_h) * OWp
                           + (np.asarray(shifts_w, np.int64)[None, :] + lo_w)).ravel()
            if geom.depthwise:
                reduction = tap_offsets * red_block
            else:
                reduction = (np.arange(red_blocks)[:, None, None] * plane
                             + (tap_offsets * red_block)[None, :, None]
                             + np.arange(red_block)[None, None, :]).ravel()
            L = reduction.size
            red = table.add(reduction)
            rows = table.add(_grid(count_h, count_w, OWp, 1) * red_block)
            n = np.arange(geom.N)[:, None, None, None]
            grp = np.arange(G)[None, :, None, None]
            ob = np.arange(out_blocks)[None, None, :, None]
            group_in = (n * G + grp) * red_blocks * plane
            if geom.depthwise:
                group_in = (n * out_blocks + ob) * plane
                first, ncols = ob * KB, np.minimum(KB, geom.C - ob * KB)
            else:
                first, ncols = grp * geom.Cg + ob * KB, np.minimum(KB, geom.Cg - ob * KB)
            place, scale, col_stride = _placement(target, n, first, ncols, geom.C, hw, KB,
                                                  (n * G + grp) * out_blocks + ob)
            outs = table.add(_grid(count_h, count_w, sh * geom.W, sw, a * geom.W + b) * scale)
            job_parts.append(job_table(
                a=group_in, b=w_offset + (grp * out_blocks + ob) * L * KB, red=red, length=L,
                rows=rows + starts, outs=outs + starts, nrows=nrows,
                ahead=0 if geom.depthwise else read_ahead(geom.dtype, vl, False), **place))
            shape = np.broadcast_shapes(n.shape, grp.shape, ob.shape, starts.shape)
            blocks.append(np.broadcast_to((n * G + grp) * out_blocks + ob, shape).ravel())
            first_rows.append(np.broadcast_to(a + starts // count_w * sh, shape).ravel())
            phases.append((tuple(taps_h), tuple(taps_w)))
            w_offset += G * out_blocks * L * KB
    jobs = np.concatenate(job_parts) if job_parts else np.zeros((0, len(JOB_FIELDS)), np.int64)
    if len(job_parts) > 1:
        # The stride phases of the same rows one after the other (stable: each phase's tiles
        # keep their order), rather than each phase over the whole output: the phases write
        # alternate pixels of the same cache lines, which a phase-by-phase order fetched once
        # per phase (ResNet-50's 3x3 stride-2 layer, AMD EPYC Zen 4, interleaved: 1.08x on 1
        # thread, 1.10x on 2).  Every output element still has one job, so no sum changes.
        phase = np.concatenate([np.full(b.size, i) for i, b in enumerate(blocks)])
        jobs = jobs[np.lexsort((phase, np.concatenate(first_rows), np.concatenate(blocks)))]
    layout = BackwardDataLayout(
        phases=tuple(phases), pads=((lo_h, hi_h), (lo_w, hi_w)), OHp=OHp, OWp=OWp,
        dy_block=dy_block, red_blocks=red_blocks, KB=KB, out_blocks=out_blocks,
        weight_size=w_offset, col_stride=hw if target == "NCHW" else 1)
    out_size = geom.N * G * out_blocks * hw * KB if target == "blocked" else 0
    return Pass("depthwise" if geom.depthwise else kind, jobs, table.array(), out_size, layout)


def _reduction_splits(N: int, npix: int, base_jobs: int, pixel_bytes: int,
                      partial_bytes: int) -> List[Tuple[int, int, int, int]]:
    """Contiguous pieces (n0, n1, p0, p1) of the backward-weight reduction over images x
    pixels: enough for about ``TARGET_REDUCTION_JOBS`` jobs, and small enough that one
    piece of the output gradient (``pixel_bytes`` per pixel) stays in the L2 cache
    (``REDUCTION_PIECE_BYTES``) as long as their partial sums (``partial_bytes`` each) fit
    in ``REDUCTION_PARTIALS_BYTES``."""
    want = -(-TARGET_REDUCTION_JOBS // max(base_jobs, 1))
    cached = -(-N * npix * pixel_bytes // REDUCTION_PIECE_BYTES)
    want = max(want, min(cached, REDUCTION_PARTIALS_BYTES // max(partial_bytes, 1)))
    if want <= 1:
        return [(0, N, 0, npix)]
    if want <= N:
        bounds = np.linspace(0, N, want + 1).round().astype(int)
        return [(int(bounds[i]), int(bounds[i + 1]), 0, npix) for i in range(want)]
    pieces = min(-(-want // N), max(1, npix // REDUCTION_PIECE_MIN_PIXELS))
    bounds = np.linspace(0, npix, pieces + 1).round().astype(int)
    return [(n, n + 1, int(bounds[i]), int(bounds[i + 1])) for n in range(N)
            for i in range(pieces)]


def backward_weight(geom: ConvGeometry, vl: int, tile_rows: int) -> Pass[BackwardWeightLayout]:
    """Jobs of the backward-weight pass: rows are (channel, tap) pairs, the reduction runs
    over pixels in independent pieces whose partial sums the caller adds in a fixed order.
    The input is packed as the forward packs it, split into stride phases (``phased``)."""
    fwd = forward(geom, vl, tile_rows, split_phases=True)
    layout = fwd.info
    Hp, Wp = layout.Hp, layout.Wp
    CB, Cb, KB, Kb = layout.CB, layout.Cb, layout.KB, layout.Kb
    G = 1 if geom.depthwise else geom.groups
    npix = geom.OH * geom.OW
    table = OffsetTable()
    plane = Hp * Wp * CB
    phase_pixels = geom.N * G * Cb * Hp * Wp if layout.phases != (1, 1) else 0
    taps, pixels = _input_offsets(geom, Hp, Wp, phase_pixels)
    # Rows of the weight gradient: taps (depthwise) or (channel block, tap, channel).
    if geom.depthwise:
        row_offsets = taps * CB
    else:
        row_offsets = (np.arange(Cb)[:, None, None] * plane + (taps * CB)[None, :, None]
                       + np.arange(CB)[None, None, :]).ravel()
    red = table.add(pixels * CB)
    nrows_total = row_offsets.size
    rows = table.add(row_offsets)
    outs = table.add(np.arange(nrows_total) * KB)
    if not geom.depthwise:
        tile_rows = _broadcast_tile(geom.Kg, vl, tile_rows)[1]
    starts, nrows = row_tiles(nrows_total, tile_rows)
    splits = _reduction_splits(geom.N, npix, G * Kb * starts.size, KB * geom.dtype.itemsize,
                               G * Kb * nrows_total * KB * geom.dtype.itemsize)
    image_in = G * Cb * plane
    image_dy = G * Kb * npix * KB
    parts = []
    for index, (n0, n1, p0, p1) in enumerate(splits):
        grp = np.arange(G)[:, None, None]
        kb = np.arange(Kb)[None, :, None]
        if geom.depthwise:
            a = n0 * image_in + kb * plane
        else:
            a = n0 * image_in + grp * Cb * plane
        parts.append(job_table(
            a=a, a_step=image_in, b=n0 * image_dy + (grp * Kb + kb) * npix * KB + p0 * KB,
            b_step=image_dy, inner=n1 - n0, red=red + p0, length=p1 - p0, ncols=KB,
            rows=rows + starts, outs=outs + starts, nrows=nrows,
            out=((index * G + grp) * Kb + kb) * nrows_total * KB))
    return Pass(fwd.kind, np.concatenate(parts), table.array(),
                len(splits) * G * Kb * nrows_total * KB,
                BackwardWeightLayout(forward=layout, splits=len(splits)))
