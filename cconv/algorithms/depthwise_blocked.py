"""Channels in the vector lanes: the channel-blocked NCHW depthwise path for small planes,
and the few-channel filter banks' strided forward and weight gradient.

The row-vector NCHW kernels vectorise along a plane's rows; on a plane of a few vectors per
row (MobileNet's 28x28 and smaller) a plane's fixed costs (the fill, the partial vectors at
its edges, a stride's column phases) are most of its time.  The channel-blocked kernels
(``cconv/_kernels/_blocked.pyx.tp``) take a vector's worth of channels at a time instead:
their planes transposed into pixel vectors in a per-thread buffer (with the padding,
whatever its mode), every tap a weight vector, output pixels in register blocks, the result
transposed back.  This module builds their tables: the padding maps, the output grids
("phases") with their taps, and the per-thread scratch.

* Forward: one phase, the padded input read at the stride.
* Data gradient (multiplier 1): for stride ``(sh, sw)``, ``sh * sw`` phases
  of the input gradient; the pixel ``(a + sh i, b + sw j)`` takes filter tap ``(r, s)``
  when ``a + pt - r dh`` and ``b + pl - s dw`` divide by the stride, from output-gradient
  pixel ``(i + (a + pt - r dh) / sh, j + (b + pl - s dw) / sw)``: a stride-1
  correlation of the zero-padded gradient with that phase's taps only.  For a padding
  mode the phases cover the padded input, and the kernel adds each padding pixel's gradient
  onto the pixel it copies before storing the image's.
* Weight gradient: per image and tap, the gradient's pixel vectors times the padded
  input's; the images' partial sums added in order (the result does not depend on the
  thread count).

A filter bank over a one- to four-channel image (groups 1: an RGB layer, ResNet-50's stem)
puts its *output* channels in the lanes instead (``FewChannelForward``,
``FewChannelWeights``): every input pixel is broadcast to a vector of output channels, so
all vector loads are aligned, where the row kernels read the input at each tap's column
offset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional, Tuple

import numpy as np
import numpy.typing as npt

from .. import _boundary, _relayout
from .._simd import blocked as kernels
from .base import compute_into, memory_layout

if TYPE_CHECKING:
    from .._geometry import ConvGeometry

Array = npt.NDArray[Any]
Table = npt.NDArray[np.int64]

# Which geometries take the channel-blocked path, per pass (``applies``): from one-off loops
# of the public calls, medians, AMD EPYC Zen 5, MobileNetV2's depthwise 3x3 layers on 8
# images, time of the row-vector kernels over the channel-blocked ones (> 1: blocked
# faster), forward / data gradient / weight gradient, 1 and 2 threads:
#
#   layer        AVX-512 kernels 1t      2t                  AVX2 kernels 1t     2t
#   32 @112 s1   0.98/1.10/2.22   1.19/1.16/2.13   1.15/1.12/1.13   1.10/1.05/0.90
#   96 @112 s2   1.59/0.75/2.00   1.41/0.76/1.76   1.60/0.94/1.64   1.54/0.96/1.61
#   144 @56 s1   0.90/0.89/1.97   0.95/0.84/1.59   0.94/0.91/0.86   1.05/0.98/0.86
#   144 @56 s2   0.89/0.76/1.06   1.10/0.82/1.03   1.22/1.13/1.08   1.29/1.06/1.01
#   192 @28 s1   1.01/0.87/1.36   1.10/0.96/1.32   1.12/1.04/1.05   1.20/1.08/1.01
#   192 @28 s2   1.22/1.22/1.63   1.26/1.04/1.57   1.57/1.54/1.72   1.57/1.28/1.60
#   384 @14 s1   1.56/1.25/2.03   1.60/1.30/2.08   1.70/1.40/1.76   1.98/1.50/1.66
#   576 @14 s2   2.22/1.94/3.31   2.32/1.81/3.23   1.99/1.93/2.45   2.31/1.75/2.93
#   960 @7 s1    2.75/2.37/3.48   3.20/2.40/3.46   2.11/1.71/2.53   2.79/2.02/2.75
#
# So: every pass on a padded plane of at most SMALL_PLANE pixels (up to 30x30: MobileNet's
# 28x28 with its padding), except the stride-1 data gradient, which gains from
# SMALL_GRADIENT_PLANE down; beyond that, the forward pass and the weight gradient at
# stride 2 in both axes, and the AVX-512 weight gradient at any stride, as long as a
# thread's buffers stay within BUFFER_BYTES (a core's L2 holds them; 112x112 at 16 float
# channels a vector is 1.6 MiB and keeps the row kernels).
SMALL_PLANE = 32 * 32
SMALL_GRADIENT_PLANE = 16 * 16
BUFFER_BYTES = 1 << 20
# The few-channel weight gradient (``FewChannelWeights``): output rows per job, so that the
# gradient band's pixel vectors stay in L2.  Measured against the row kernels and the direct
# algorithm (one-off loops, AMD EPYC Zen 5, float32 NCHW, ms, new / row kernels / direct;
# AVX-512 kernels on 1 and 2 threads, then the AVX2 build on 2).  Since then a job takes two
# vectors of output channels, on AVX-512 each broadcast input pixel feeding both: the first
# four rows' new kernel a further 8-11% faster (RGB 7.57 -> 7.02 ms, 4.07 -> 3.70).
FEW_CHANNEL_WEIGHT_MEASUREMENTS = (
    ("8x3x256x256 -> 32, 3x3", "7.57 / 12.08 / 16.35", "4.07 / 6.25 / 9.13",
     "5.93 / 7.96 / 10.24"),
    ("16x3x112x112 -> 64, 3x3", "5.44 / 8.89 / 11.25", "2.82 / 4.82 / 6.67",
     "4.52 / 5.99 / 7.79"),
    ("8x4x128x128 -> 128, 3x3", "8.82 / 14.01 / 16.70", "4.66 / 7.59 / 9.18",
     "7.18 / 9.72 / 12.11"),
    ("8x2x256x256 -> 16, 3x3", "2.97 / 4.62 / 8.24", "1.58 / 2.45 / 4.62",
     "2.18 / 3.03 / 6.15"),
    ("8x3x128x128 -> 64, 5x5", "9.94 / 12.11 / 11.26", "4.85 / 6.34 / 7.71",
     "8.47 / 9.14 / 9.89"),
    ("8x3x224x224 -> 64, 7x7 stride 2 (ResNet-50 conv1)", "10.71 / 23.17 / 14.91",
     "6.13 / 12.16 / 9.39", "10.88 / 15.06 / 13.72"),
    ("4x1x512x512 -> 16, 5x5", "8.39 / 10.52 / 16.01", "4.37 / 5.84 / 9.39",
     "7.35 / 7.89 / 9.59"),
    # four output channels fill a quarter (AVX-512) or half (AVX2) of the lanes: rows win
    ("1x4x1024x1024 -> 4, 5x5", "23.73 / 8.46 / 38.71", "12.55 / 4.49 / 24.23",
     "11.19 / 6.52 / 19.06"),
)
# Tried and not kept: the same sums with the pixels in the lanes, the gradient read where it
# lies (no transpose), a register block of 6 gradient rows x 4 taps (8 x 3 let GCC reload
# each gradient vector per tap).  AMD EPYC Zen 4 (AVX-512), 1 thread, ms, pixel lanes /
# this kernel: RGB 8x3x256x256 -> 32 15.90 / 15.28 (15.78 with the gradient 64-byte
# aligned), 8x4x128x128 -> 128 25.02 / 17.31, 8x3x128x128 -> 64 5x5 22.61 / 21.19: the
# input's loads at every column offset split across cache lines and cap it near 60% of the
# FMA peak.
# The few-channel forward (``FewChannelForward``), output channels in the lanes, two
# vectors of them per job: one-off loops, AMD EPYC Zen 5 (AVX-512 kernels), float32 NCHW,
# ms, new / auto before (the direct kernel at a stride, the row kernels at stride 1), 1 and
# 2 threads.  Taken at a stride only.
FEW_CHANNEL_FORWARD_MEASUREMENTS = (
    ("8x3x224x224 -> 64, 7x7 stride 2 (ResNet-50 conv1)", "8.41 / 10.32", "4.44 / 6.07"),
    ("8x3x112x112 -> 32, 3x3 stride 2", "0.26 / 0.62", "0.14 / 0.36"),
    ("8x3x256x256 -> 32, 3x3 (rows)", "7.73 / 6.28", "4.09 / 3.44"),
    ("8x3x256x256 -> 64, 3x3 (rows)", "15.72 / 12.62", "8.07 / 6.54"),
    ("8x3x128x128 -> 64, 5x5 (rows)", "6.89 / 5.52", "3.46 / 2.89"),
    ("4x1x512x512 -> 16, 5x5 (rows)", "8.85 / 5.07", "4.48 / 2.78"),
    ("4x4x128x128 -> 32, 3x3 (rows)", "1.11 / 0.93", "0.55 / 0.48"),
)
# With an NHWC result it takes stride 1 too: the row kernels' planes had to be transposed
# into the result.  NHWC calls, ms, this kernel / the row kernels and a transposed result,
# 1 and 2 threads (AMD EPYC Zen 4, AVX-512, float32; 3x3 unless noted, padding "same"):
FEW_CHANNEL_NHWC_FORWARD_MEASUREMENTS = (
    ("8x64x64x3 -> 64", "1.86 / 2.74", "0.97 / 1.76"),
    ("8x128x128x4 -> 32", "5.58 / 8.35", "2.40 / 4.99"),
    ("4x512x512x1 -> 16, 5x5", "13.5 / 22.8", "7.7 / 15.1"),
    ("2x32x32x3 -> 128", "0.35 / 0.39", "0.17 / 0.28"),
    ("8x56x56x2 -> 64, 1x1", "0.53 / 2.03", "0.27 / 0.74"),
    ("8x100x100x3 -> 16, 7x7", "3.95 / 5.76", "1.96 / 3.36"),
    ("1x64x64x1 -> 32", "0.068 / 0.154", "0.046 / 0.144"),
)
FEW_BAND_BYTES = 256 * 1024
# (tests set this to 0 to keep every plane on the row kernels, or huge to send them all
# here: the names above are then ignored)
MAX_PADDED_PIXELS: Optional[int] = None


class BlockedLayout:
    """The tables of the channel-blocked kernels for one geometry (``vl`` channels a
    vector): see the module docstring."""

    def __init__(self, geom: ConvGeometry, padding: Tuple[Any, ...]) -> None:
        g = self.geom = geom
        vl = self.vl = vector_length(g)
        self.kpad = -(-g.K // vl) * vl
        # forward / weight gradient: the input padded by the geometry's mode (the
        # algorithm's maps: row_src, col_src, left padding, value)
        self.row_src, self.col_src, _, self.value = padding
        Wp = len(self.col_src)
        self.off = _frozen(_tap_offsets(g, Wp) * vl)
        self.widx = _frozen(np.arange(g.R * g.S))
        self.phases = _frozen(np.array(
            [[0, g.OW, 1, g.OH, g.OW, g.stride[0], g.stride[1], 0, g.R * g.S,
              int(g.stride[1] == 1 and g.dilation[1] == 1 and g.S == 3)]]))
        self.scratch = (len(self.row_src) * Wp + g.OH * g.OW) * vl
        self._data: Tuple[Any, ...] = ()

    def weights(self, w: Array) -> Array:
        """(R*S, Kpad): see :func:`_lane_weights`."""
        return _lane_weights(self.geom, w, self.kpad)

    def scratch_elements(self, op: str) -> int:
        """Elements of one thread's buffers for pass ``op``."""
        return int(self.data_gradient()[7] if op == "backward_data" else self.scratch)

    def forward(self, x: Array, w: Array, y: Array, bias: Array, alpha: float, beta: float,
                scratch: Array, nthreads: int) -> None:
        """``y = alpha * (conv(x, w) + bias) + beta * y`` (NCHW views, ``bias`` possibly
        empty)."""
        g = self.geom
        (pt, _), (pl, _) = g.pads

        def call(out: Array, a: float, b: float) -> None:
            kernels.correlate(_relayout.contiguous(x, nthreads), self.weights(w), out, bias,
                              self.row_src, self.col_src, pt, pl, self.value, g.Kg,
                              self.phases, self.off, self.widx, a, b, scratch, nthreads)
        compute_into(y, alpha, beta, call, nthreads)

    def backward_data(self, dy: Array, w: Array, dx: Array, bias: Array, alpha: float,
                      beta: float, scratch: Array, nthreads: int) -> None:
        """``dx = alpha * (conv_backward_data(dy, w) + bias) + beta * dx`` (multiplier 1; a
        padding mode's gradient folded in the kernel)."""
        row_src, col_src, top, left, phases, off, widx, _, folding = self.data_gradient()

        def call(out: Array, a: float, b: float) -> None:
            kernels.correlate(_relayout.contiguous(dy, nthreads), self.weights(w), out, bias,
                              row_src, col_src, top, left, 0.0, 1, phases, off, widx, a, b,
                              scratch, nthreads, *folding)
        compute_into(dx, alpha, beta, call, nthreads)

    def backward_weight(self, dy: Array, x: Array, scratch: Array, nthreads: int) -> Array:
        """The weight gradient as a new contiguous (K, 1, R, S) array: per-image sums added
        in order, whatever the thread count."""
        g = self.geom
        (pt, _), (pl, _) = g.pads
        partial = np.empty((g.N, g.R * g.S, self.kpad), g.dtype)
        kernels.weight(_relayout.contiguous(dy, nthreads), _relayout.contiguous(x, nthreads),
                       partial, self.row_src, self.col_src, pt, pl, self.value, g.Kg, g.stride[0],
                       g.stride[1], self.off, scratch, nthreads)
        total = partial.sum(axis=0, dtype=np.float64)
        return np.ascontiguousarray(total[:, :g.K].T, g.dtype).reshape(g.K, 1, g.R, g.S)

    def data_gradient(self) -> Tuple[Any, ...]:
        """(row_src, col_src, pt, pl, phases, off, widx, scratch, folding) of the data
        gradient: the output gradient zero-padded so that every phase's taps read inside
        it; ``folding`` () for zero padding, else the kernel's fold maps and offsets (the
        input's padding maps)."""
        if not self._data:
            self._data = self._data_gradient()
        return self._data

    def _data_gradient(self) -> Tuple[Any, ...]:
        # a padding mode: the gradient of the padded input (its zero-padding problem), each
        # padding pixel then folded onto the pixel it copies (the kernel's fold_rows / cols)
        g = self.geom.kernel_geometry
        (sh, sw), (dh, dw) = g.stride, g.dilation
        (pt, _), (pl, _) = g.pads
        grids = []
        for a in range(min(sh, g.H)):
            rows = [(r, (a + pt - r * dh) // sh) for r in range(g.R)
                    if (a + pt - r * dh) % sh == 0]
            for b in range(min(sw, g.W)):
                cols = [(s, (b + pl - s * dw) // sw) for s in range(g.S)
                        if (b + pl - s * dw) % sw == 0]
                grids.append((a, b, -(-(g.H - a) // sh), -(-(g.W - b) // sw),
                              [(r * g.S + s, er, es) for r, er in rows for s, es in cols]))
        shifts = [(er, es) for *_, taps in grids for _, er, es in taps]
        top = max([0] + [-er for er, _ in shifts])
        left = max([0] + [-es for _, es in shifts])
        # rows / columns of the padded gradient the grids reach, at least the gradient
        height = max([g.OH + top] + [n + er + top for _, _, n, _, taps in grids
                                      for _, er, _ in taps])
        width = max([g.OW + left] + [m + es + left for _, _, _, m, taps in grids
                                      for _, _, es in taps])
        phases: List[List[int]] = []
        off: List[int] = []
        widx: List[int] = []
        for a, b, n, m, taps in grids:
            # a row's taps by increasing offset; 3-wide rows of neighbours go as triples
            taps = sorted(taps, key=lambda tap: (tap[1], tap[2]))
            triples = (len(taps) % 3 == 0 and all(
                taps[i + 1][1:] == (taps[i][1], taps[i][2] + 1)
                and taps[i + 2][1:] == (taps[i][1], taps[i][2] + 2)
                for i in range(0, len(taps), 3)))
            phases.append([a * g.W + b, sh * g.W, sw, n, m, 1, 1, len(off),
                           len(off) + len(taps), int(triples and len(taps) > 0)])
            off += [((er + top) * width + es + left) * self.vl for _, er, es in taps]
            widx += [t for t, _, _ in taps]
        row_src = _boundary.padded_source(g.OH, top, height - g.OH - top, "zeros")
        col_src = _boundary.padded_source(g.OW, left, width - g.OW - left, "zeros")
        tables = [_frozen(t) for t in (row_src, col_src, phases, off, widx)]
        scratch = (height * width + g.H * g.W) * self.vl
        folding: Tuple[Any, ...] = ()
        if g is not self.geom:
            (top_pad, _), (left_pad, _) = self.geom.pads
            folding = (self.row_src, self.col_src, top_pad, left_pad)
        return (tables[0], tables[1], top, left, tables[2], tables[3], tables[4], scratch,
                folding)


def applies(geom: ConvGeometry, op: str) -> bool:
    """True when the channel-blocked kernels take pass ``op`` of this NCHW depthwise
    geometry (one input channel per group, a nonempty image and output; the data gradient
    with multiplier 1): see ``SMALL_PLANE``.  The thread count plays no
    part: the two paths sum in different orders, and results must not depend on it."""
    g = geom
    if g.Cg != 1 or g.H * g.W == 0 or g.OH * g.OW == 0:
        return False
    (pt, pb), (pl, pr) = g.pads
    padded = (g.H + pt + pb) * (g.W + pl + pr)
    if op == "backward_data" and g.Kg != 1:
        return False
    if MAX_PADDED_PIXELS is not None:
        return padded <= MAX_PADDED_PIXELS
    strided = g.stride[0] >= 2 and g.stride[1] >= 2
    vector_bytes = vector_length(g) * g.dtype.itemsize
    fits = (padded + g.OH * g.OW) * vector_bytes <= BUFFER_BYTES
    if op == "backward_data":
        return padded <= (SMALL_PLANE if strided else SMALL_GRADIENT_PLANE)
    if padded <= SMALL_PLANE:
        return True
    if op == "forward":
        return strided and fits
    return (strided or vector_bytes == 64) and fits


class FewChannelWeights:
    """The tables of the few-channel weight-gradient kernel (``kernels.weight_few``): a
    filter bank over a one- to four-channel image (groups 1), output channels in the lanes,
    the input pixels broadcast (see that kernel)."""

    def __init__(self, geom: ConvGeometry, padding: Tuple[Any, ...]) -> None:
        g = self.geom = geom
        self.row_src, self.col_src, self.pl, self.value = padding
        Wp = len(self.col_src)
        self.off = _frozen(_tap_offsets(g, Wp))
        self.in_rows = (g.R - 1) * g.dilation[0] + 1
        vl = vector_length(g)
        self.kpad = -(-g.K // vl) * vl
        # output rows per job: the gradient band's pixel vectors within FEW_BAND_BYTES
        row_bytes = g.OW * vl * g.dtype.itemsize
        self.band = max(1, min(g.OH, FEW_BAND_BYTES // max(1, row_bytes)))
        self.nbands = -(-g.OH // self.band)
        self.scratch = (2 * self.band * g.OW * vl
                        + g.C * ((self.band - 1) * g.stride[0] + self.in_rows) * Wp)

    def backward_weight(self, dy: Array, x: Array, scratch: Array, nthreads: int) -> Array:
        """The weight gradient as a new contiguous (K, C, R, S) array: the bands' and
        images' partial sums added in order, whatever the thread count."""
        g = self.geom
        partial = np.empty((g.N, self.nbands, g.C * g.R * g.S, self.kpad), g.dtype)
        # a channels-last gradient is read as it lies: its pixels are the kernel's vectors
        channels_last = memory_layout(dy) == "NHWC"
        kernels.weight_few(dy.transpose(0, 2, 3, 1) if channels_last
                           else _relayout.contiguous(dy, nthreads),
                           _relayout.contiguous(x, nthreads), partial, self.row_src,
                           self.col_src, self.pl, self.value, g.stride[0], g.stride[1],
                           self.off, self.in_rows, self.band, scratch, nthreads, channels_last)
        total = partial.sum(axis=(0, 1), dtype=np.float64)
        return np.ascontiguousarray(total[:, :g.K].T, g.dtype).reshape(g.K, g.C, g.R, g.S)


class FewChannelForward:
    """The tables of the few-channel forward kernel (``kernels.forward_few``): a strided
    filter bank over a one- to four-channel image (groups 1), two vectors of output
    channels per job, the input pixels broadcast (see ``FEW_CHANNEL_FORWARD_MEASUREMENTS``).
    """

    def __init__(self, geom: ConvGeometry, padding: Tuple[Any, ...]) -> None:
        g = self.geom = geom
        self.row_src, self.col_src, self.pl, self.value = padding
        Wp = len(self.col_src)
        vl = vector_length(g)
        self.kpad = -(-g.K // vl) * vl
        self.in_rows = (g.R - 1) * g.dilation[0] + 1
        row_bytes = g.OW * vl * g.dtype.itemsize
        self.band = max(1, min(g.OH, FEW_BAND_BYTES // 4 // max(1, row_bytes)))
        rows = (self.band - 1) * g.stride[0] + self.in_rows  # a channel's rows in a band
        channels = np.arange(g.C)[:, None] * rows * Wp
        self.off = _frozen((channels + _tap_offsets(g, Wp)[None, :]).ravel())
        self.scratch = 2 * self.band * g.OW * vl + g.C * rows * Wp

    def forward(self, x: Array, w: Array, y: Array, bias: Array, alpha: float, beta: float,
                scratch: Array, nthreads: int) -> None:
        """``y = alpha * (conv(x, w) + bias) + beta * y`` (NCHW views, ``bias`` possibly
        empty)."""
        g = self.geom
        wt = _lane_weights(g, w, self.kpad)

        def call(out: Array, a: float, b: float, channels_last: bool = False) -> None:
            kernels.forward_few(_relayout.contiguous(x, nthreads), wt, out, bias, self.row_src,
                                self.col_src, self.pl, self.value, g.stride[0], g.stride[1],
                                self.off, self.in_rows, self.band, a, b, scratch, nthreads,
                                channels_last)
        if memory_layout(y) == "NHWC":
            # the kernel's pixel vectors of output channels are the NHWC pixels: stored as
            # they are, no transposed copy of the result
            call(y.transpose(0, 2, 3, 1), alpha, beta, True)
            return
        compute_into(y, alpha, beta, call, nthreads)


def few_channel_forward(geom: ConvGeometry) -> bool:
    """True when the few-channel forward kernel takes this geometry: one group of at most
    four input channels, at least a vector of output channels, a stride or an NHWC result
    (at stride 1 the row kernels measured faster on NCHW,
    ``FEW_CHANNEL_FORWARD_MEASUREMENTS``, but their planes must be transposed into an
    NHWC result, which this kernel writes as it computes it:
    ``FEW_CHANNEL_NHWC_FORWARD_MEASUREMENTS``), nonempty."""
    g = geom
    return (g.groups == 1 and 1 <= g.C <= 4 and g.K >= vector_length(g)
            and (g.stride != (1, 1) or g.layout == "NHWC")
            and g.H * g.W > 0 and g.OH * g.OW > 0)


def few_channel_weights(geom: ConvGeometry) -> bool:
    """True when the few-channel weight-gradient kernel takes this NCHW geometry: one group
    of at most four input channels and at least a vector of output channels (its lanes;
    see ``FEW_CHANNEL_WEIGHT_MEASUREMENTS``), nonempty."""
    g = geom
    return (g.groups == 1 and 1 <= g.C <= 4 and g.K >= vector_length(g)
            and g.H * g.W > 0 and g.OH * g.OW > 0)


def vector_length(geom: ConvGeometry) -> int:
    """Channels per vector of the kernels for ``geom``'s dtype."""
    return _VECTOR_LENGTH[geom.dtype]


# keyed by the dtype itself: ``dtype.name`` is computed in Python on every access (a tenth of
# a tiny call's time went to it)
_VECTOR_LENGTH = {np.dtype(name): int(lanes) for name, lanes in kernels.VECTOR_LENGTH.items()}


def _frozen(values: Any) -> Table:
    """A contiguous int64 table, read-only: shared by every call."""
    table = np.ascontiguousarray(values, dtype=np.int64)
    table.setflags(write=False)
    return table


def _tap_offsets(g: ConvGeometry, row: int) -> Table:
    """(R*S,): each filter tap's offset ``r * dh * row + s * dw`` in rows of ``row``
    elements (pixels, or pixel vectors once multiplied by the vector length)."""
    r, s = np.meshgrid(np.arange(g.R), np.arange(g.S), indexing="ij")
    return (r * g.dilation[0] * row + s * g.dilation[1]).ravel()


def _lane_weights(g: ConvGeometry, w: Array, kpad: int) -> Array:
    """(Cg*R*S, Kpad): each tap's weights of every output channel side by side (the vector
    lanes), zero past the last channel."""
    wt = np.zeros((g.Cg * g.R * g.S, kpad), g.dtype)
    wt[:, :g.K] = w.reshape(g.K, -1).T
    return wt
