"""Depthwise convolution (one input channel per group) on kernels of its own.

A depthwise layer does ``2 * R * S`` flops per output element: it is bound by memory
traffic, and the channel-blocked register tiles of the direct algorithm (built for long
channel reductions) spend their time packing and unpacking.  These kernels read the
activations in place instead, in the layout they come in:

* NCHW (or any other memory order, after one contiguous copy): a job is a band of rows of
  one image plane (the whole plane unless it is large or the planes are too few for the
  threads: one large image filtered by one filter), copied with its padding into a
  per-thread buffer (split into column phases for a stride), then computed in blocks of
  four vector accumulators held in registers across the taps (or, at row stride 1, by
  columns of taps, each loaded input row feeding every output row it reaches): vectorised
  over output pixels, the weights broadcast, which is what one- and few-channel images
  need.
  Backward-data correlates the gradient, spread out by the stride, with the flipped
  filter; at stride (2, 2) with zero padding and filters up to 3x3 it goes by the four
  stride phases of the input gradient instead, each with only its own taps (no
  multiply-adds on the spread-out gradient's zeros, ``_PhaseLayout``); backward-weight
  takes dot products of gradient rows with buffer rows.
* NCHW depthwise (one input channel per group) on small planes, and some larger strided
  ones: the channel-blocked kernels of ``depthwise_blocked`` (a vector's worth of channels
  at a time, transposed into pixel vectors), where a plane's fixed costs would dominate the
  row kernels; which passes and planes is that module's measured rule (``applies``).
  The weight gradient of a filter bank over a one- to four-channel image (one group, at
  least a vector of output channels) goes there too (``few_channel_weights``): output
  channels in the lanes, the input pixels broadcast; and such a bank's strided forward
  (``few_channel_forward``).
* NHWC with channel multiplier 1: a job is one output row, four channel vectors held in
  registers across a pixel's taps; no padding is materialised.

Padding modes (reflect, symmetric, replicate, circular, constant) on NCHW, every pass
(``padding_mode_ops``): forward and the weight gradient build them in the band buffer from
per-axis index maps, so the input is never copied whole; the data gradient computes bands of
the padded input's gradient and folds them as it stores them (the image's columns stored
directly, on the column kernel where it applies, the padding's columns added onto the
columns they copy, then, once every band is stored, the padding's rows onto their rows;
filter banks of FOLD_AFTER_TAPS taps and more fold afterwards instead).
The NHWC kernels, which materialise no padding, run the zero-padding problem of the input
padded beforehand (data gradient: folded after, ``cconv._boundary``).

Every output element is summed by one thread in a fixed order, and the weight gradient is
split over the batch by shape only, so results do not depend on the thread count.

NaN and Inf: by definition (and in PyTorch) an infinite weight or gradient meeting the zero
padding gives ``0 * Inf = NaN``, and no such product exists where no output reaches an
input.  The NCHW forward and weight gradient multiply materialised padding, as the
definition does.  The paths that would differ go to the direct algorithm: an NHWC forward
with a non-finite weight (no padding there), an NCHW backward-data with one (the spread-out
gradient holds zeros where no output exists), and a weight gradient that comes out
non-finite (its lanes past the last output column multiply zeros by neighbouring pixels).
Kernels: ``cconv/_kernels/_depthwise.pyx.tp``.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple

import numpy as np
import numpy.typing as npt

from .. import _boundary, _relayout, _workspace
from .._geometry import flipped_pads
from .._simd import depthwise as kernels
from . import depthwise_blocked as blocked
from .base import OPS, Algorithm, compute_into, memory_layout
from .direct import NO_BIAS, DirectConvolution

if TYPE_CHECKING:
    from .._geometry import ConvGeometry
    from .base import TransformedWeight

Array = npt.NDArray[Any]
Taps = npt.NDArray[np.int64]

# Results of this many bytes or more leave the rolling column kernel (filters of 3-6 rows)
# with non-temporal stores: a plain store reads the line first, and a result this large does
# not stay in cache anyway.  Interleaved against plain stores (AMD EPYC Zen 4, AVX-512, float32,
# 1 / 2 threads, the same bits): a 4096x4096 image 5x5 1.27x / 1.15x, 3x3 1.06x / 1.15x; 64
# images of 512x512 5x5 1.38x / 1.35x; MobileNetV2-like 8x144x112x112 3x3 depthwise 1.27x /
# 1.30x.
STREAM_RESULT_BYTES = 16 << 20

# The NHWC data gradient at stride 1 runs the forward rows (blocks of output pixels, bands
# that read ahead) on the flipped weight instead of its own gather kernel.  Interleaved, ms,
# gather / flipped forward, 1 and 2 threads (AMD EPYC Zen 4, float32, 8 images, 3x3 padding
# 1, MobileNetV2's stride-1 depthwise layers; AVX-512, then the AVX2 kernels):
FLIPPED_FORWARD_MEASUREMENTS = (
    ("56x56x144, AVX-512", "3.37 / 3.12", "1.59 / 1.29"),
    ("112x112x96, AVX-512", "9.40 / 7.57", "5.23 / 4.09"),
    ("112x112x32, AVX-512", "4.93 / 1.79", "2.61 / 0.85"),
    ("28x28x192, AVX-512", "0.81 / 0.54", "0.42 / 0.28"),
    ("14x14x576, AVX-512", "0.65 / 0.48", "0.34 / 0.26"),
    ("7x7x960, AVX-512", "0.28 / 0.23", "0.17 / 0.14"),
    ("56x56x144, AVX2", "3.27 / 3.11", "1.69 / 1.59"),
    ("112x112x96, AVX2", "9.57 / 8.19", "5.31 / 4.17"),
    ("112x112x32, AVX2", "4.42 / 2.74", "2.43 / 1.38"),
    ("14x14x576, AVX2", "0.68 / 0.51", "0.41 / 0.33"),
)

# Backward-weight NHWC: split the batch's output rows into this many jobs (fewer when there
# are fewer rows), each of at least MIN_WEIGHT_JOB_WORK multiply-adds: a job zeroes its
# R*S*C partial sums and the caller adds them, which on MobileNetV2's 7x7 and 14x14 layers
# cost more than their rows (8 images, 3x3, float32, interleaved, AMD EPYC Zen 4, AVX-512,
# 1 / 2 threads, ms, 32 jobs / this rule: 7x7x960 0.286 / 0.251 and 0.189 / 0.167,
# 14x14x576 stride 2 0.191 / 0.174 and 0.134 / 0.107, 28x28x384 stride 2 0.564 / 0.530 and
# 0.311 / 0.294; 56x56x144 (32 jobs either way) unchanged).  The split depends on the
# shape only (deterministic results).
TARGET_WEIGHT_JOBS = 32
MIN_WEIGHT_JOB_WORK = 1 << 19
# NCHW forward / backward-data: a job is a band of rows of one plane.  Bands are cut so that
# (1) with fewer planes than JOBS_PER_THREAD per thread, every thread gets work, and (2) a
# band's buffer stays within BAND_BYTES, so it is still in the core's L2 cache (1-2 MiB on
# the CPUs measured) when the taps read it.  A band refills (R-1)*dilation halo rows, so it
# keeps at least MIN_BAND_ROWS rows.  Small planes (MobileNet's 112x112 and below) stay whole.
# Every output is summed the same way in any band: results do not depend on the split.
JOBS_PER_THREAD = 4
# The NCHW kernels fold a group's input channels into each output's reduction (Cg*R*S taps
# in registers), refilling the group's input bands for every output channel: worth it for a
# few channels per group, where the direct kernel's channel vectors would be mostly empty.
MAX_CHANNELS_PER_GROUP = 4
BAND_BYTES = 512 * 1024
MIN_BAND_ROWS = 16
# The column kernel (see _NchwLayout) walks a strip of a few vectors down every row of its
# band, so a taller band pays its first and last R - 1 rows (which feed fewer output rows)
# and its refilled halo less often, while a strip's rows stay in L1.  5x5 filter, medians of
# 2-second loops, AMD EPYC Zen 5 (AVX-512), band buffers of 32 KiB -> 128 KiB: a 1024x1024
# image 0.44 -> 0.38 ms on 1 thread; 64 images of 512x512 10.9 -> 10.2 ms on 1 thread, 5.9
# -> 5.3 ms on 2; a 4096x4096 image (8-row bands either way) unchanged; the AVX2 build's
# 4-row blocks on the 1024x1024 image 0.42-0.43 -> 0.39-0.40 ms on 2 threads.  (Zen 4, with
# the 4-row blocks: a 1024-wide plane ran 2.8x slower on 2 threads with 128-row bands than
# with 8; 128 KiB makes 32 rows of it.)
COLUMN_BAND_BYTES = 128 * 1024
COLUMN_MIN_BAND_ROWS = 8
# Narrow planes keep the plain kernel: the column block spans 4 (AVX-512) or 2 vectors of a
# row, mostly empty lanes on a narrow plane, and reorders the weight on every call.  Batch-1
# depthwise 3x3 / 5x5, 1 thread, AMD EPYC Zen 4, median of 7 runs of a one-off script,
# column / plain time: AVX-512 kernels 1.12-1.27 at 8-28 output columns (1-2 vectors), 0.96
# at 56, 0.84 at 56 with 5x5; AVX2 kernels on the same CPU 1.0-1.05 at 14-28 columns (2-3.5
# vectors), 0.84-0.96 at 56.  So from 3 vectors of output columns on.
COLUMN_MIN_WIDTH_VECTORS = 3
# The rolling window (filters of ``kernels.ROLLING_ROWS`` rows) pays from fewer columns:
# depthwise 3x3 over 384 (576) channels of 8 images, 1 thread, AMD EPYC Zen 5 (AVX-512),
# medians of 1-second loops, rolling / plain time: 28 columns (1.75 vectors) 0.90 forward,
# 0.94 backward-data, 0.92 the stride-2 layer's backward-data; 14 columns 1.26-1.28.
ROLLING_MIN_WIDTH_VECTORS = 1.5
# A padding mode's NCHW data gradient: the kernels store the image's columns (on the column
# kernel where it applies) and add the padding's pixels, a few dot products per row, onto
# the pixels they copy.  Those dot products take multiplier x R x S taps each; from
# FOLD_AFTER_TAPS taps the gradient is instead computed over the whole padded input and
# folded afterwards (a pass over memory instead).  Medians of one-off loops, 2 threads, AMD
# EPYC Zen 5 (AVX-512), ms, folded by the kernel / afterwards (zero padding): 1 -> 32 5x5 on
# 8 images of 256^2 7.3-7.4 / 6.4-6.5 (5.5-5.6); 1 -> 16 5x5 on 4 images of 512^2 6.3 /
# 6.0-6.1 (5.2-6.0); 1 -> 16 3x3 3.8-4.1 / 3.9-4.2 (3.5-3.8); 1 -> 4 5x5 1.0-1.2 / 1.3-1.6;
# depthwise 3x3 (MobileNetV2 dw144) 2.1-2.2 / 3.9.
FOLD_AFTER_TAPS = 200
# NCHW backward-weight: a pass copies a band of the group's input rows and of one output
# channel's gradient rows, and every output channel of the thread's run sums the input band
# while it is in L2 (whole 256^2 planes of a 3-channel image were a megabyte).
WEIGHT_BAND_BYTES = 256 * 1024
# Band buffers up to this size are kept per calling thread (``_scratch``), not allocated
# per call.
SMALL_SCRATCH_BYTES = 64 * 1024
_small_scratch = threading.local()


def _column_min_width(filter_rows: int, vl: int) -> float:
    """Output (forward) or input (backward-data) columns from which a plane runs on the
    column kernel."""
    vectors = (ROLLING_MIN_WIDTH_VECTORS if filter_rows in kernels.ROLLING_ROWS
               else COLUMN_MIN_WIDTH_VECTORS)
    return vectors * vl


def _block_shape(out_w: int, vl: int) -> Tuple[int, int]:
    """(rows, vectors) of the four register accumulators of an NCHW plane: whole vectors
    along a row, several rows when the row is narrower than four vectors."""
    nv = min(4, -(-out_w // vl))
    nv = 4 if nv == 3 else nv
    return 4 // nv, nv


def _round_up(value: int, step: int) -> int:
    return -(-value // step) * step


class _NchwLayout:
    """The per-thread plane buffers of the NCHW kernels and the tap offsets into them.

    Forward and backward-weight read the input plane with its zero padding, split into
    ``sw`` column phases of ``rows x Wq``; backward-data reads the output gradient spread
    out by the stride into ``mult`` buffers of ``rows_bd x Wb`` and correlates them with
    the flipped filter.  Every run a kernel loads lies inside its buffer (the kernels check
    the same bound before they start).

    Forward at row stride 1 and backward-data (a stride-1 correlation) with row dilation 1
    and at least 3 filter rows run the column kernel (``columns``, ``columns_bd``): its
    taps are the filter's columns, and each input row it loads feeds every output row it
    reaches.  For 3-6 filter rows the kernel walks a strip down the band with the R output
    rows in flight in registers (one load per R multiply-adds); taller filters take blocks
    of ``column_block`` (4 rows x a few vectors: R + 3 loads for 4 * R multiply-adds).  The
    plain kernel loads once per multiply-add.
    """

    def __init__(self, geom: ConvGeometry, vl: int, column_block: Tuple[int, int]) -> None:
        g = geom
        sw, (dh, dw) = g.stride[1], g.dilation
        (pt, pb), (pl, pr) = g.pads
        self.geom, self.vl = g, vl
        self._bands: Dict[Tuple[str, int], Tuple[int, int, Taps, int]] = {}
        self._fold_taps: Dict[int, Taps] = {}
        self._phase_layouts: Dict[int, _PhaseLayout] = {}
        # forward / backward-weight: the padded, phase-split input plane
        self.NR, self.NV = _block_shape(g.OW, vl)
        self.columns = (g.stride[0] == 1 and dh == 1 and g.R >= 3
                        and g.OW >= _column_min_width(g.R, vl))
        self.fwd_NR, self.fwd_NV = column_block if self.columns else (self.NR, self.NV)
        qmax = ((g.S - 1) * dw) // sw
        self.Wq = max(-(-(g.W + pl + pr) // sw),
                      _round_up(g.OW, max(self.NV, self.fwd_NV) * vl) + qmax)
        # backward-weight: bands of output rows whose input rows (the group's channels)
        # and gradient rows fit in WEIGHT_BAND_BYTES; ``rows`` / ``tap_off`` lay out a band
        self.Dq = _round_up(g.OW, vl)
        per_row = (g.Cg * sw * g.stride[0] * self.Wq + self.Dq) * g.dtype.itemsize
        band = max(1, WEIGHT_BAND_BYTES // per_row)
        self.weight_band = g.OH if band >= g.OH else band
        self.rows = self._input_rows(self.weight_band, 1)
        self.tap_off = self._input_taps(self.rows)
        self.weight_scratch = g.Cg * sw * self.rows * self.Wq + self.weight_band * self.Dq
        # backward-data: the spread-out gradient planes, correlated with the flipped filter;
        # for a padding mode, over the padded width (the kernel folds the padding's columns)
        # (the kernel stores the image's columns from column ``pl`` of the band buffer and
        # computes the padding's rows over the padded width)
        # (with the column kernel, the padding's pixels take the plain kernel's taps and
        # blocks over the padded width: ``fold_NR`` x ``fold_NV``)
        self.folds = g.padding_mode != "zeros"
        self.out_w = g.W + pl + pr if self.folds else g.W
        self.columns_bd = (dh == 1 and g.R >= 3 and g.W >= _column_min_width(g.R, vl))
        self.NR_bd, self.NV_bd = column_block if self.columns_bd else _block_shape(g.W, vl)
        self.fold_NR, self.fold_NV = self.NR_bd, self.NV_bd
        if self.columns_bd:
            self.fold_NR, self.fold_NV = _block_shape(self.out_w, vl)
            if self.fold_NR > self.NR_bd:  # whole blocks of the bands' rows
                self.fold_NR, self.fold_NV = self.NR_bd, 4 // self.NR_bd
        self.base_h = pt - (g.R - 1) * dh
        self.base_w = (0 if self.folds else pl) - (g.S - 1) * dw
        block = self.NV_bd * vl
        self.Wb = (max(_round_up(self.out_w, block), _round_up(g.W, block) + pl,
                       _round_up(self.out_w, self.fold_NV * vl)) if self.folds
                   else _round_up(g.W, block)) + (g.S - 1) * dw

    def _input_rows(self, band: int, nr: int) -> int:
        """Rows of the padded input a band of ``band`` output rows reads (whole blocks of
        ``nr`` rows)."""
        g = self.geom
        rows = (_round_up(band, nr) - 1) * g.stride[0] + (g.R - 1) * g.dilation[0] + 1
        return max(rows, g.H + sum(g.pads[0])) if band == g.OH else rows

    def _input_taps(self, rows: int) -> Taps:
        g = self.geom
        sw, (dh, dw) = g.stride[1], g.dilation
        r, s = np.meshgrid(np.arange(g.R), np.arange(g.S), indexing="ij")
        cols = (s * dw).ravel()
        return (((cols % sw) * rows + (r * dh).ravel()) * self.Wq + cols // sw).astype(np.int64)

    @staticmethod
    def band(planes: int, out_rows: int, nr: int, nthreads: int, bytes_per_row: int,
             columns: bool = False) -> int:
        """Output rows per job: the whole plane, or bands of it (see ``BAND_BYTES``, and
        ``COLUMN_BAND_BYTES`` for the column kernel).

        ``bytes_per_row``: bytes of band buffer per output row (input rows per output row
        times the buffer's row length)."""
        rows = out_rows
        if nthreads > 1 and 0 < planes < JOBS_PER_THREAD * nthreads:
            rows = -(-out_rows // -(-JOBS_PER_THREAD * nthreads // planes))
        budget, least = ((COLUMN_BAND_BYTES, COLUMN_MIN_BAND_ROWS) if columns
                         else (BAND_BYTES, MIN_BAND_ROWS))
        rows = min(rows, budget // max(1, bytes_per_row))
        rows = _round_up(max(rows, least), nr)
        return out_rows if rows >= out_rows else rows

    def _cached(self, op: str, nthreads: int,
                make: Callable[[int], Tuple[int, int, Taps, int]]) -> Tuple[int, int, Taps, int]:
        # Computed once per pass and thread count: a small call's time was mostly this.
        key = (op, nthreads)
        if key not in self._bands:
            bands = make(nthreads)
            bands[2].setflags(write=False)  # the tap table is shared by every call
            self._bands[key] = bands
        return self._bands[key]

    def forward_band(self, nthreads: int) -> Tuple[int, int, Taps, int]:
        """(band, rows, tap offsets, scratch elements per thread) of the forward kernel."""
        return self._cached("forward", nthreads, self._forward_band)

    def _forward_band(self, nthreads: int) -> Tuple[int, int, Taps, int]:
        g = self.geom
        item = g.dtype.itemsize
        band = self.band(g.N * g.K, g.OH, self.fwd_NR, nthreads,
                         g.Cg * g.stride[0] * g.stride[1] * self.Wq * item, self.columns)
        rows = self._input_rows(band, self.fwd_NR)
        channel = g.stride[1] * rows * self.Wq  # one input channel's band buffer
        taps = self._input_taps(rows)
        if self.columns:  # the offset of each column's first row
            taps = taps.reshape(g.R, g.S)[0]
        taps = (np.arange(g.Cg)[:, None] * channel + taps[None, :]).ravel()
        return band, rows, taps.astype(np.int64), g.Cg * channel

    def backward_data_band(self, nthreads: int) -> Tuple[int, int, Taps, int]:
        """(band, rows, tap offsets, scratch elements per thread) of backward-data."""
        return self._cached("backward_data", nthreads, self._backward_data_band)

    def _backward_data_band(self, nthreads: int) -> Tuple[int, int, Taps, int]:
        g = self.geom
        dh, dw = g.dilation
        band = self.band(g.N * g.C, g.H, self.NR_bd, nthreads, g.Kg * self.Wb * g.dtype.itemsize,
                         self.columns_bd)
        rows = _round_up(band, self.NR_bd) + (g.R - 1) * dh
        taps = self._gradient_taps(1 if self.columns_bd else g.R, rows)
        folding = self.fold_NR * self.out_w if self.folds else 0  # a block of padded rows
        return band, rows, taps, g.Kg * rows * self.Wb + folding

    def _gradient_taps(self, filter_rows: int, rows: int) -> Taps:
        """Offsets of the taps in the first ``filter_rows`` rows of the filter into the
        band buffers of ``rows`` rows (one per output channel of the group), Kg*rows*S."""
        g = self.geom
        dh, dw = g.dilation
        r, s = np.meshgrid(np.arange(filter_rows), np.arange(g.S), indexing="ij")
        m = np.arange(g.Kg)[:, None]
        taps = (m * rows * self.Wb + ((r * dh) * self.Wb + s * dw).ravel()[None, :]).ravel()
        return taps.astype(np.int64)

    def fold_taps(self, nthreads: int) -> Taps:
        """The plain kernel's taps (Kg*R*S) into the bands of :meth:`backward_data_band`:
        the padding's pixels of a padding mode when the image's run the column kernel
        (computed once per thread count, like the bands)."""
        if nthreads not in self._fold_taps:
            taps = self._gradient_taps(self.geom.R, self.backward_data_band(nthreads)[1])
            taps.setflags(write=False)
            self._fold_taps[nthreads] = taps
        return self._fold_taps[nthreads]

    def phases(self, nthreads: int) -> "_PhaseLayout":
        """The layout of the stride-2 data gradient by column and row phases
        (:func:`backward_data_phases_nchw`), built once per thread count."""
        if nthreads not in self._phase_layouts:
            self._phase_layouts[nthreads] = _PhaseLayout(self, nthreads)
        return self._phase_layouts[nthreads]

    def flipped(self, w: Array, columns: Optional[bool] = None) -> Array:
        """(C, Kg*R*S): each input channel's filters (one per output channel of its group)
        rotated by 180 degrees; (C, Kg*S*R), column by column, for the column kernel
        (``columns``, default ``columns_bd``)."""
        return _by_input_channel(self.geom, w[:, :, ::-1, ::-1],
                                 self.columns_bd if columns is None else columns)

    def forward_weight(self, w: Array) -> Array:
        """(K, Cg*R*S) as the forward kernel reads it: (K, Cg*S*R) for the column kernel."""
        g = self.geom
        if self.columns:
            w = np.ascontiguousarray(w.reshape(g.K, g.Cg, g.R, g.S).transpose(0, 1, 3, 2))
        return w.reshape(g.K, -1)


class _PhaseLayout:
    """The stride-2 NCHW data gradient without the spread-out gradient's zeros.

    An input-gradient pixel ``(2i + a, 2j + p)`` (row parity ``a``, column parity ``p``)
    receives from filter tap ``(r, s)`` only when ``a + pt - r`` and ``p + pl - s`` are
    even, from gradient pixel ``(i + (a + pt - r) / 2, j + (p + pl - s) / 2)``: each of the
    four phases is a small stride-1 correlation of the gradient itself (a 3x3 filter splits
    into 1, 2, 2 and 4 taps), its even and odd columns computed apart and interleaved into
    the row.  The spread-out gradient's correlation did four times the multiply-adds, on
    zeros (MobileNetV2's 28x28 stride-2 depthwise layer: most of its data gradient).

    ``off`` / ``widx`` / ``start``: each phase's taps (``start[2a + p]`` to
    ``start[2a + p + 1]``): offset into the band buffers and index of the weight in a row
    of :meth:`weights`; ``base_h`` / ``base_w`` the gradient's displacement of buffer row
    and column 0; ``rows`` x ``Wb`` one gradient plane's band buffer.
    """

    def __init__(self, layout: "_NchwLayout", nthreads: int) -> None:
        g = layout.geom
        (pt, _), (pl, _) = g.pads
        taps = [(m, r, s, (r + pt) % 2, (s + pl) % 2)
                for m in range(g.Kg) for r in range(g.R) for s in range(g.S)]
        dr = [(a + pt - r) // 2 for _, r, _, a, _ in taps]
        ds = [(p + pl - s) // 2 for _, _, s, _, p in taps]
        self.base_h, self.base_w = min(dr), min(ds)
        half = -(-g.W // 2)
        self.Wb = _round_up(half, layout.vl) + max(ds) - self.base_w
        self.band = layout.band(g.N * g.C, g.H, 2, nthreads, g.Kg * self.Wb * g.dtype.itemsize)
        self.rows = self.band // 2 + 1 + max(dr) - self.base_h
        order = sorted(range(len(taps)), key=lambda t: 2 * taps[t][3] + taps[t][4])
        plane = self.rows * self.Wb
        self.off = np.array([taps[t][0] * plane + (dr[t] - self.base_h) * self.Wb
                             + ds[t] - self.base_w for t in order], np.int64)
        self.widx = np.array([(taps[t][0] * g.R + taps[t][1]) * g.S + taps[t][2]
                              for t in order], np.int64)
        counts = np.bincount([2 * taps[t][3] + taps[t][4] for t in order], minlength=4)
        self.start = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        self.scratch = g.Kg * plane
        for table in (self.off, self.widx, self.start):
            table.setflags(write=False)  # shared by every call

    @staticmethod
    def weights(geom: ConvGeometry, w: Array) -> Array:
        """(C, Kg*R*S): each input channel's filters (one per output channel of its group),
        as they are (not flipped)."""
        return _by_input_channel(geom, w, columns=False)


def _by_input_channel(g: ConvGeometry, w: Array, columns: bool) -> Array:
    """(C, Kg*R*S): the (K, Cg, R, S) filters regrouped by input channel, each channel's row
    holding its filters for the output channels of its group; (C, Kg*S*R), column by
    column, with ``columns``."""
    per_group = w.reshape(g.groups, g.Kg, g.Cg, g.R, g.S)
    order = (0, 2, 1, 4, 3) if columns else (0, 2, 1, 3, 4)
    return np.ascontiguousarray(per_group.transpose(order)).reshape(g.C, g.Kg * g.R * g.S)


class DepthwiseConvolution(Algorithm):
    """Depthwise and few-channel convolution of one geometry: at most
    ``MAX_CHANNELS_PER_GROUP`` input channels per group (``groups == C`` is depthwise; a
    one- or three-channel image filtered by a bank of filters counts), any multiplier,
    stride, dilation and padding, NCHW or NHWC."""

    name = "depthwise"
    padding_mode_ops = frozenset(OPS)

    @classmethod
    def why_not(cls, geom: ConvGeometry, op: str) -> Optional[str]:
        """None when every group has at most ``MAX_CHANNELS_PER_GROUP`` input channels
        (depthwise layers, filter banks over one- to four-channel images), else the
        reason."""
        if geom.Cg > MAX_CHANNELS_PER_GROUP:
            return (f"the depthwise kernels take at most {MAX_CHANNELS_PER_GROUP} input "
                    f"channels per group, got {geom.Cg}")
        return None

    def __init__(self, geom: ConvGeometry) -> None:
        super().__init__(geom)
        g = geom
        self._args = (g.stride[0], g.stride[1], g.dilation[0], g.dilation[1], g.pads[0][0],
                      g.pads[1][0])
        self._nchw = _NchwLayout(g, kernels.VECTOR_LENGTH[g.dtype.name], kernels.COLUMN_BLOCK)
        self._forward_calls: Dict[int, Tuple[Taps, Tuple[Any, ...], int]] = {}
        self._blocked: Optional[blocked.BlockedLayout] = None
        self._few: Optional[blocked.FewChannelWeights] = None
        self._few_forward: Optional[blocked.FewChannelForward] = None
        (pt, pb), (pl, pr) = g.pads
        # the padding the NCHW band fills build: padded index -> input index (-1: the value)
        self._padding = (_boundary.padded_source(g.H, pt, pb, g.padding_mode),
                         _boundary.padded_source(g.W, pl, pr, g.padding_mode), pl,
                         g.padding_value)

    # -- helpers ---------------------------------------------------------------------------

    def _nhwc(self, *arrays: Array) -> bool:
        """True when the channel-vector kernels apply: depthwise with multiplier 1, NHWC
        memory."""
        g = self.geom
        return (g.Cg == 1 and g.Kg == 1
                and all(memory_layout(a) == "NHWC" for a in arrays))

    def _tap_major_weight(self, w: Array, flipped: bool = False) -> Array:
        """(K, 1, R, S) -> (R, S, K) contiguous, the NHWC kernels' weight (``flipped``: its
        taps in reverse order along both axes), on a cache line (each tap's channel vectors
        are loaded once per pixel block)."""
        wt = _workspace.aligned_empty((self.geom.R, self.geom.S, self.geom.K), w.dtype)
        taps = w[:, 0].transpose(1, 2, 0)
        wt[...] = taps[::-1, ::-1] if flipped else taps
        return wt

    def _tap_lists(self, nthreads: int) -> Taps:
        """Per-thread lists of (tap, pixel) pairs for the NHWC kernels (a row's shared list
        and a pixel's own, for taps and for pixels)."""
        return np.empty((nthreads, 4 * self.geom.R * self.geom.S), np.int64)

    def _boundary_in(self, array: Array) -> Tuple[str, _boundary.Boundary]:
        """(the memory layout of ``array``, NHWC or else NCHW, and this geometry's padding
        mode for arrays in that layout)."""
        layout = "NHWC" if memory_layout(array) == "NHWC" else "NCHW"
        boundary = _boundary.for_geometry(dataclasses.replace(self.geom, layout=layout))
        assert boundary is not None  # only called for a padding mode
        return layout, boundary

    def _unpadded(self, x: Array, nthreads: int) -> Tuple[ConvGeometry, Array]:
        """The zero-padding problem and its input, for the paths that build no padding
        buffer (NHWC kernels, the direct fallbacks): this geometry and ``x``, or for a
        padding mode its ``kernel_geometry`` and ``x`` padded (in ``x``'s memory order)."""
        g = self.geom
        if g.padding_mode == "zeros":
            return g, x
        layout, boundary = self._boundary_in(x)
        padded = boundary.pad(x if layout == "NCHW" else x.transpose(0, 2, 3, 1), nthreads)
        return g.kernel_geometry, padded if layout == "NCHW" else padded.transpose(0, 3, 1, 2)

    def _scratch(self, size: int, nthreads: int) -> Array:
        """Per-thread band buffers (the kernels zero what they use).  Small ones are kept
        per calling thread and reused: allocating them was ~0.3 us of a tiny call."""
        size = max(1, size)
        try:
            return _small_scratch.buffers[self, size, nthreads]  # type: ignore[no-any-return]
        except (AttributeError, KeyError):
            pass
        buf = np.empty((nthreads, size), self.geom.dtype)
        if buf.nbytes <= SMALL_SCRATCH_BYTES:
            kept = getattr(_small_scratch, "buffers", None)
            if kept is None or len(kept) >= 64:
                kept = _small_scratch.buffers = {}
            kept[self, size, nthreads] = buf
        return buf

    def _run_nchw(self, run: Callable[..., None], src: Array, w: Array, dst: Array, bias: Array,
                  alpha: float, beta: float, tap_off: Taps, layout: Tuple[Any, ...],
                  scratch: Array, nthreads: int, extra: Tuple[Any, ...] = (),
                  column_rows: int = 0, stream_large: bool = False, **options: Any) -> None:
        """An NCHW kernel from a contiguous copy of ``src`` (when it is not one) into ``dst``,
        or into a temporary when ``dst`` is not contiguous (epilogue applied on the copy);
        ``extra``: the kernel's trailing arguments; ``column_rows``: the filter's rows for
        the column kernel, 0 for the plain one; ``stream_large``: the kernel's ``stream`` for
        results of ``STREAM_RESULT_BYTES`` or more; ``options``: its further keywords."""
        src = _relayout.contiguous(src, nthreads)
        if column_rows:
            options["column_rows"] = column_rows

        def kernel(out: Array, a: float, b: float) -> None:
            if stream_large:
                options["stream"] = out.nbytes >= STREAM_RESULT_BYTES
            run(src, w, out, bias, tap_off, *layout, a, b, scratch, nthreads, *extra, **options)

        compute_into(dst, alpha, beta, kernel, nthreads)

    # -- passes ----------------------------------------------------------------------------

    def prepare_weight(self, w: Array, nthreads: int) -> Optional[TransformedWeight]:
        """Nothing worth precomputing: the kernels read the (K, 1, R, S) weight directly."""
        return None

    def forward(self, x: Array, w: Array, bias: Optional[Array], y: Array, alpha: float,
                beta: float, nthreads: int, prepared: Optional[TransformedWeight] = None) -> None:
        """``y = alpha * (conv(x, w) + bias) + beta * y`` (logical NCHW views)."""
        g, lay = self.geom, self._nchw
        b = NO_BIAS[g.dtype] if bias is None else bias
        if self._nhwc(x, y):
            inner, x = self._unpadded(x, nthreads)
            if inner is not g:
                DepthwiseConvolution.for_geometry(inner).forward(x, w, bias, y, alpha, beta,
                                                                 nthreads)
                return
            if not np.isfinite(w).all():  # no padding materialised: 0 * Inf must give NaN
                DirectConvolution.for_geometry(g).forward(x, w, bias, y, alpha, beta, nthreads)
                return
            kernels.forward_nhwc(x.transpose(0, 2, 3, 1), self._tap_major_weight(w),
                                 y.transpose(0, 2, 3, 1), b, *self._args, alpha, beta,
                                 self._tap_lists(nthreads), nthreads)
            return
        if blocked.few_channel_forward(g):
            fwd = self._few_channel_forward()
            fwd.forward(x, w, y, b, alpha, beta, self._scratch(fwd.scratch, nthreads), nthreads)
            return
        if blocked.applies(g, "forward"):
            bl = self._blocked_layout()
            bl.forward(x, w, y, b, alpha, beta,
                       self._scratch(bl.scratch_elements("forward"), nthreads), nthreads)
            return
        taps, args, scratch = self._forward_args(nthreads)
        self._run_nchw(kernels.forward_nchw, x, lay.forward_weight(w), y, b, alpha, beta, taps,
                       args, self._scratch(scratch, nthreads), nthreads,
                       column_rows=g.R if lay.columns else 0, stream_large=True)

    def _few_channel_forward(self) -> blocked.FewChannelForward:
        """The few-channel forward kernel's tables (built on first use)."""
        if self._few_forward is None:
            self._few_forward = blocked.FewChannelForward(self.geom, self._padding)
        return self._few_forward

    def _few_channel_weights(self) -> blocked.FewChannelWeights:
        """The few-channel weight-gradient kernel's tables (built on first use)."""
        if self._few is None:
            self._few = blocked.FewChannelWeights(self.geom, self._padding)
        return self._few

    def _blocked_layout(self) -> blocked.BlockedLayout:
        """The channel-blocked kernels' tables (built on first use)."""
        if self._blocked is None:
            self._blocked = blocked.BlockedLayout(self.geom, self._padding)
        return self._blocked

    def _forward_args(self, nthreads: int) -> Tuple[Taps, Tuple[Any, ...], int]:
        """(taps, the kernel's layout arguments, scratch elements per thread) of the NCHW
        forward on ``nthreads`` threads, built once (a tenth of a tiny call's Python)."""
        cached = self._forward_calls.get(nthreads)
        if cached is None:
            g, lay = self.geom, self._nchw
            band, rows, taps, scratch = lay.forward_band(nthreads)
            args = (g.groups, g.stride[0], g.stride[1], *self._padding, rows, lay.Wq,
                    lay.fwd_NR, lay.fwd_NV, band)
            cached = self._forward_calls[nthreads] = (taps, args, scratch)
        return cached

    def backward_data(self, dy: Array, w: Array, dx: Array, alpha: float, beta: float,
                      nthreads: int, bias: Optional[Array] = None) -> None:
        """``dx = alpha * (conv_backward_data(dy, w) + bias) + beta * dx`` (logical NCHW)."""
        g, lay = self.geom, self._nchw
        finite = bool(np.isfinite(w).all())
        if g.padding_mode != "zeros" and (self._nhwc(dy, dx) or not finite
                                          or self._folds_after()):
            self._fold_padded_gradient(dy, w, dx, alpha, beta, nthreads, bias, finite)
            return
        b = NO_BIAS[g.dtype] if bias is None else bias
        if self._nhwc(dy, dx):
            # at stride 1, the forward rows on the flipped weight (begin padding
            # dilation * (kernel - 1) - begin; taps past dy's end read nothing, as the
            # scatter over existing outputs has it): see FLIPPED_FORWARD_MEASUREMENTS
            begin = tuple(lo for lo, _ in flipped_pads((g.R, g.S), g.dilation, g.pads))
            if g.stride == (1, 1) and min(begin) >= 0:
                kernels.forward_nhwc(dy.transpose(0, 2, 3, 1), self._tap_major_weight(w, True),
                                     dx.transpose(0, 2, 3, 1), b, 1, 1, g.dilation[0],
                                     g.dilation[1], begin[0], begin[1], alpha, beta,
                                     self._tap_lists(nthreads), nthreads)
                return
            kernels.backward_data_nhwc(dy.transpose(0, 2, 3, 1), self._tap_major_weight(w),
                                       dx.transpose(0, 2, 3, 1), b, *self._args, alpha, beta,
                                       self._tap_lists(nthreads), nthreads)
            return
        if not finite:
            # the spread-out gradient holds zeros where no output exists: 0 * Inf would
            # put NaN where the definition (a scatter over existing outputs) has none
            DirectConvolution.for_geometry(g).backward_data(dy, w, dx, alpha, beta, nthreads,
                                                            bias=bias)
            return
        if blocked.applies(g, "backward_data"):
            bl = self._blocked_layout()
            bl.backward_data(dy, w, dx, b, alpha, beta,
                             self._scratch(bl.scratch_elements("backward_data"), nthreads),
                             nthreads)
            return
        if self._by_phases():
            ph = lay.phases(nthreads)
            self._run_nchw(kernels.backward_data_phases_nchw, dy, ph.weights(g, w), dx, b,
                           alpha, beta, ph.off,
                           (ph.widx, ph.start, g.groups, ph.base_h, ph.base_w, ph.rows, ph.Wb,
                            ph.band), self._scratch(ph.scratch, nthreads), nthreads)
            return
        band, rows, taps, scratch = lay.backward_data_band(nthreads)
        folding: Tuple[Any, ...] = ()
        if lay.folds:
            folding = (*self._padding[:2], g.pads[0][0], g.pads[1][0])
        plain: Dict[str, Any] = {}
        if lay.folds and lay.columns_bd:  # the padding's pixels on the plain kernel
            plain = dict(fold_taps=lay.fold_taps(nthreads),
                         fold_weights=lay.flipped(w, columns=False), fold_NR=lay.fold_NR,
                         fold_NV=lay.fold_NV)
        self._run_nchw(kernels.backward_data_nchw, dy, lay.flipped(w), dx, b, alpha, beta,
                       taps, (g.groups, g.stride[0], g.stride[1], lay.base_h, lay.base_w, rows,
                              lay.Wb, lay.NR_bd, lay.NV_bd, band),
                       self._scratch(scratch, nthreads), nthreads, folding,
                       column_rows=g.R if lay.columns_bd else 0, **plain)

    def _by_phases(self) -> bool:
        """True when the NCHW data gradient runs by stride phases (``_PhaseLayout``): stride
        (2, 2), dilation 1, zero padding, filters up to 3x3.  One-off loops, 1 thread, AMD
        EPYC Zen 5 (AVX-512), ms, the spread-out correlation -> phases: 3x3 filters 384 -> 384
        depthwise 28x28 1.01 -> 0.68, 3 -> 32 at 128x128 1.84 -> 1.47, 3 -> 64 at 112x112
        3.36 -> 2.73; but 5x5, 3 -> 16 at 128x128 1.64 -> 1.95 (the spread-out gradient's
        column kernel keeps a filter's rows in registers, the phases' plain loop does not)."""
        g = self.geom
        return (g.stride == (2, 2) and g.dilation == (1, 1) and g.padding_mode == "zeros"
                and g.R <= 3 and g.S <= 3)

    def _folds_after(self) -> bool:
        """True when a padding mode's NCHW data gradient is computed over the padded input
        (on the column kernel) and folded afterwards, not by the kernels (FOLD_AFTER_TAPS)."""
        g = self.geom
        if g.Kg * g.R * g.S < FOLD_AFTER_TAPS:
            return False
        inner = DepthwiseConvolution.for_geometry(g.kernel_geometry)
        assert isinstance(inner, DepthwiseConvolution)
        return bool(inner._nchw.columns_bd)

    def _fold_padded_gradient(self, dy: Array, w: Array, dx: Array, alpha: float, beta: float,
                              nthreads: int, bias: Optional[Array], finite: bool) -> None:
        """A padding mode's data gradient where the NCHW kernels do not fold it (NHWC
        memory, non-finite weights, many taps): the padded input's gradient (the depthwise
        kernels, or the direct algorithm for a non-finite weight) folded by
        ``cconv._boundary``."""
        g = self.geom
        _, boundary = self._boundary_in(dx)
        inner = (DepthwiseConvolution if finite else DirectConvolution).for_geometry(
            g.kernel_geometry)
        boundary.fold_gradient(
            lambda padded: inner.backward_data(dy, w, padded, 1.0, 0.0, nthreads), dx, alpha,
            beta, bias, nthreads)

    def _weight_splits(self) -> int:
        g = self.geom
        work = g.N * g.OH * g.OW * g.C * g.R * g.S
        return max(1, min(g.N * g.OH, TARGET_WEIGHT_JOBS, -(-work // MIN_WEIGHT_JOB_WORK)))

    def backward_weight(self, dy: Array, x: Array, nthreads: int) -> Array:
        """The weight gradient as a new contiguous (K, 1, R, S) array."""
        g = self.geom
        if self._nhwc(dy, x) and g.padding_mode != "zeros":
            inner, x = self._unpadded(x, nthreads)
            return DepthwiseConvolution.for_geometry(inner).backward_weight(dy, x, nthreads)
        grad = self._backward_weight(dy, x, nthreads)
        if not np.isfinite(grad).all():
            inner, x = self._unpadded(x, nthreads)
            return DirectConvolution.for_geometry(inner).backward_weight(dy, x, nthreads)
        return grad

    def _backward_weight(self, dy: Array, x: Array, nthreads: int) -> Array:
        g = self.geom
        RS = g.R * g.S
        if self._nhwc(dy, x):
            partial = np.empty((self._weight_splits(), RS, g.C), g.dtype)
            kernels.backward_weight_nhwc(dy.transpose(0, 2, 3, 1), x.transpose(0, 2, 3, 1),
                                         partial, *self._args, g.R, g.S, nthreads)
            total = partial.sum(axis=0)  # the splits in a fixed order
            return np.ascontiguousarray(total.T, g.dtype).reshape(g.K, 1, g.R, g.S)
        if blocked.applies(g, "backward_weight"):
            bl = self._blocked_layout()
            return bl.backward_weight(
                dy, x, self._scratch(bl.scratch_elements("backward_weight"), nthreads),
                nthreads)
        if blocked.few_channel_weights(g):
            few = self._few_channel_weights()
            return few.backward_weight(dy, x, self._scratch(few.scratch, nthreads), nthreads)
        lay = self._nchw
        grad = np.empty((g.K, g.Cg * RS), np.float64)
        kernels.backward_weight_nchw(np.ascontiguousarray(dy), np.ascontiguousarray(x), grad,
                                     lay.tap_off, g.groups, g.stride[0], g.stride[1],
                                     *self._padding, lay.rows, lay.Wq, lay.Dq,
                                     self._scratch(lay.weight_scratch, nthreads), nthreads,
                                     lay.weight_band)
        return grad.astype(g.dtype).reshape(g.K, g.Cg, g.R, g.S)

    def workspace_bytes(self, op: str, nthreads: int) -> int:
        """Scratch of one call in the geometry's own layout (contiguous operands)."""
        g, lay = self.geom, self._nchw
        item = g.dtype.itemsize
        nhwc = g.layout == "NHWC" and g.Kg == 1 and g.Cg == 1
        taps = 4 * g.R * g.S * 8  # the NHWC kernels' (tap, pixel) lists per thread
        folds_after = (op == "backward_data" and g.padding_mode != "zeros"
                       and self._folds_after())
        if (nhwc or folds_after) and g.padding_mode != "zeros":
            # the NHWC kernels read the input padded beforehand / write the padded gradient
            k = g.kernel_geometry
            return (k.N * k.C * k.H * k.W * item
                    + DepthwiseConvolution.for_geometry(k).workspace_bytes(op, nthreads))
        if not nhwc and op == "forward" and blocked.few_channel_forward(g):
            fwd = self._few_channel_forward()
            return int(nthreads * fwd.scratch * item + g.C * g.R * g.S * fwd.kpad * item)
        if (not nhwc and op == "backward_weight" and not blocked.applies(g, op)
                and blocked.few_channel_weights(g)):
            few = self._few_channel_weights()  # its scratch, then the partial sums
            return int(nthreads * few.scratch * item
                       + g.N * few.nbands * g.C * g.R * g.S * few.kpad * item)
        if not nhwc and blocked.applies(g, op):
            bl = self._blocked_layout()
            weights = g.R * g.S * bl.kpad * item  # the regrouped weights / partial sums
            return int(nthreads * bl.scratch_elements(op) * item
                       + weights * (g.N if op == "backward_weight" else 1))
        if op == "forward":
            return int(nthreads * (taps if nhwc else lay.forward_band(nthreads)[3] * item))
        if op == "backward_data":
            if nhwc:
                return int(nthreads * taps + g.R * g.S * g.C * item)
            return int(nthreads * lay.backward_data_band(nthreads)[3] * item
                       + g.K * g.Cg * g.R * g.S * item)
        if nhwc:
            return int(self._weight_splits() * g.R * g.S * g.C * item)
        return int(nthreads * lay.weight_scratch * item + g.K * g.Cg * g.R * g.S * 8)
