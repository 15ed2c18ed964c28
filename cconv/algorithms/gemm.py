"""The GEMM algorithm: every convolution as matrix products.

**Unpadded 1x1 convolutions** are matrix products as they stand.  With ``X`` the input's
pixels (a stride > 1 first takes every stride-th pixel) and ``W`` the (K, C) weight of a
group:

* NCHW memory: per image and group ``Y[k, :] = W @ X[c, :]`` over the flattened pixels,
  read and written in place by a compiled product of cconv's own (``_pointwise``: panels
  of 256 pixels packed into two-vector strips, the weight packed in register-tile rows,
  the Winograd kernels' register tile over them; planes under 256 pixels laid end to end
  across the batch in panels of 128), forward and backward-data alike.  It measured
  1.5-1.9x NumPy's OpenBLAS, which on an AMD EPYC Zen 5 (AVX-512) runs its AVX2 kernels:
  8x256x56x56 -> 64 at 158 / 315 GFLOP/s on 1 / 2 threads against 100 / 190;
* NHWC memory: the whole batch at once, ``Y(NHW, K) = X(NHW, C) @ W^T``, again in place:
  by the compiled product for one group (the pixels are its streamed rows, the weight its
  packed strips), by NumPy's BLAS for several.

Backward-data is ``W^T @ dY`` (scattered back to the stride-th pixels), backward-weight
``dY @ X^T``: for float32 and float64 by compiled kernels of cconv's own (``_pointwise``:
``weight`` on NCHW planes, ``weight_pixels`` on NHWC pixel rows), partial sums over a
split of the batch's pixels fixed by the shape, added in order; for other dtypes by BLAS,
summed in a fixed order over pieces of the batch (per image, or per 4096 NHWC pixels).
Every BLAS product is cut into pieces fixed by the shape (``PIECE_PIXELS`` output pixels
forward and backward-data), each a single-threaded BLAS
product, the pieces spread over Python threads: a threaded BLAS splits a product
differently for another thread count (float64 results changed between 1 and 2 OpenBLAS
threads), and the result must not depend on it.  The compiled product sums each output
element in one job, in one order, whatever the blocking: the same bits at any thread count.

**Every other shape** (any kernel, stride, dilation, padding, groups) goes through im2col in
bounded chunks (``im2col``, ``gemm_schedule``): for a chunk of output pixels the columns
(every input value each pixel reads, from a zero-padded copy of the chunk's input window)
are built with one strided NumPy copy, then one batched matmul per chunk does every group:

* forward ``Y = W @ X`` per chunk, written into the output;
* backward-data ``X = W^T @ dY`` per chunk, then col2im adds each tap's rows onto the
  zero-padded input gradient, which is cropped into the result;
* backward-weight ``dW = sum over chunks of dY @ X^T``.

Each chunk's work runs on one Python thread with BLAS on one thread, up to ``num_threads``
chunks at once (NumPy releases the GIL in its copies, adds and products, so im2col and
col2im run in parallel too), and whatever is summed over chunks (the weight gradient, the
input gradient where chunks' windows overlap) is added in chunk order.  The chunks depend
on the shape only, so every pass gives the same bits at any thread count; a threaded BLAS
would not (OpenBLAS blocks a product's reduction differently on one thread and on two).
"""

from __future__ import annotations

import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Callable, Iterable, TypeVar, cast

import numpy as np
import numpy.typing as npt

from .. import _blas, _relayout
from .._simd import pointwise as _pointwise_kernels
from . import gemm_schedule
from .base import Algorithm, TransformedWeight, compute_into, memory_layout
from .gemm_schedule import Chunk, ChunkPlan
from .im2col import ColumnLayout, Scratch

if TYPE_CHECKING:
    from .._geometry import ConvGeometry

Array = npt.NDArray[Any]
T = TypeVar("T")

# The data gradient of a strided layer with at most this many input channels per group
# (ResNet-50's stem) runs on channel-major columns even for NHWC memory, the output gradient
# transposed into planes first: the pixel-major col2im of a few channels per pixel spent
# most of its time in small copies.  8x112x112x64 -> 3 channels, 7x7 stride 2, NHWC (AMD
# EPYC Zen 4, AVX-512, interleaved): 117 -> 45 ms on 1 thread, 102 -> 44 ms on 2; the
# stride-1 RGB 3 -> 32 layer measured 32 -> 37 ms, so stride 1 keeps the pixel-major columns.
FEW_GRADIENT_CHANNELS = 4


# Output pixels per piece of a 1x1 forward / backward-data product: enough for BLAS to run at
# full speed on one thread, few enough that one image's pixels spread over the threads.
PIECE_PIXELS = 2048


def _pieces(pixels: int) -> list[slice]:
    """Consecutive slices of at most PIECE_PIXELS covering ``pixels`` (fixed by the shape),
    as equal as whole multiples of 16 pixels allow (no short last piece: 56x56 = 3136 is
    1568 + 1568, not 2048 + 1088)."""
    count = -(-pixels // PIECE_PIXELS)
    size = -(-pixels // count)
    size = min(PIECE_PIXELS, -(-size // 16) * 16)
    return [slice(i, min(i + size, pixels)) for i in range(0, pixels, size)]


# Pixels per job of the compiled 1x1 product of NCHW planes (``_pointwise``): a multiple of
# every level's strip (32 float32 pixels on AVX-512); 256 measured best of 64 / 128 / 256
# (AMD EPYC Zen 5, AVX-512: 8x256x56x56 -> 64 at 158 GFLOP/s on 1 thread, 315 on 2, where
# NumPy's OpenBLAS ran 100 and 190).
PANEL_PIXELS = 256
# Results of the compiled 1x1 product from this many bytes are written with non-temporal
# stores: a result that size would not stay in a 32 MiB last-level cache for the next layer,
# and plain stores read every line before writing it.  8 images, interleaved with PyTorch in
# one process, ms plain -> streaming, 1 / 2 threads (AMD EPYC Zen 4, AVX-512): 64 -> 256
# 56x56 forward (a 25.7 MB result) 10.87 -> 9.75 / 5.91 -> 4.85 (PyTorch 10.60 / 4.49);
# 256 -> 64 56x56 data gradient 10.35 -> 9.10 / 5.72 -> 4.50 (PyTorch 12.12 / 4.44).
# Results of 12.8 MB (28x28, 512 channels) gained 1.01-1.05x on one thread.
STREAM_RESULT_BYTES = 16 << 20
# Jobs per thread the 1x1 product aims at at least (rows are split when the panels of the
# batch are fewer), so that dynamic scheduling evens out the threads' shares.
JOBS_PER_THREAD = 4


def _row_chunk(rows: int, jobs: int, nthreads: int) -> int:
    """Rows per job of the compiled 1x1 product: all of them, or whole register tiles split
    so that ``jobs`` panels make about ``JOBS_PER_THREAD * nthreads`` jobs.  Any split gives
    the same bits: each output element is one job's sum, in the same order."""
    tile = int(_pointwise_kernels.TILE_ROWS)
    want = -(-JOBS_PER_THREAD * nthreads // max(1, jobs))
    if want <= 1:
        return rows
    tiles = -(-rows // tile)
    return tile * -(-tiles // min(want, tiles))


# The dtypes the compiled 1x1 kernels have, with their kernels' name suffix.
_NATIVE_SUFFIX = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


def _native_kernel(name: str, dtype: np.dtype[Any]) -> Callable[..., Any] | None:
    """``_pointwise``'s kernel ``name`` for ``dtype``, or None when it has none."""
    suffix = _NATIVE_SUFFIX.get(dtype)
    return None if suffix is None else cast(Callable[..., Any],
                                            getattr(_pointwise_kernels, f"{name}_{suffix}"))


# Planes of fewer pixels than PANEL_PIXELS (ResNet-50's 14x14 and 7x7 layers) are laid end
# to end across the batch and cut into panels of ACROSS_PANEL_PIXELS: each pass over the
# weight then serves several images, and only the batch's last strip is short (a 7x7
# plane alone filled two 32-pixel strips with 15 zeros).  Intel Xeon model 207, AVX-512,
# 8 images, kernel calls interleaved, best of 15, per-plane panels -> 128 across, ms, 1 / 2
# threads: 2048 -> 512 7x7 forward 8.24 -> 6.96 / 4.73 -> 3.94, data gradient 8.75 ->
# 7.35 / 4.06 -> 3.35; 512 -> 2048 7x7 forward 8.10 -> 6.47 / 4.04 -> 3.08; 1024 -> 256
# 14x14 forward 6.87 -> 6.12 / 3.49 -> 3.15; 256 -> 1024 14x14 forward 6.43 -> 5.65 /
# 3.80 -> 3.11.  Panels of 64, 192 and 256 measured within 10% of 128, no better overall.
ACROSS_PANEL_PIXELS = 128


def _runs_across(images: int, pixels: int) -> bool:
    """Whether the compiled product's panels run across the images' planes (see
    ACROSS_PANEL_PIXELS): several images of planes smaller than a panel."""
    return images > 1 and pixels < PANEL_PIXELS


def _product_panel(images: int, pixels: int, dtype: np.dtype[Any]) -> int:
    """Pixels per panel of the compiled product: ACROSS_PANEL_PIXELS across small planes,
    else PANEL_PIXELS or fewer whole strips."""
    strip = int(_pointwise_kernels.STRIP[dtype.name])
    if _runs_across(images, pixels):
        return ACROSS_PANEL_PIXELS
    return min(PANEL_PIXELS, -(-pixels // strip) * strip)


def _native_scratch_bytes(images: int, groups: int, rows_in: int, rows_out: int, pixels: int,
                          dtype: np.dtype[Any], nthreads: int, pack_rows: bool = True,
                          panel: int | None = None) -> int:
    """Bytes of the compiled product's scratch for ``rows_in`` reduction rows and
    ``rows_out`` result rows per group over ``images`` x ``pixels`` columns: the packed
    panels (passed in; ``panel`` pixels each, default ``_product_panel``'s) and, with
    ``pack_rows``, the weight packed in register tiles (its own) (0 for a dtype it does not
    run)."""
    if dtype not in _NATIVE_SUFFIX:
        return 0
    tile = int(_pointwise_kernels.TILE_ROWS)
    packed_weight = groups * -(-rows_out // tile) * tile * rows_in if pack_rows else 0
    if panel is None:
        panel = _product_panel(images, pixels, dtype)
    panels = _product_scratch(panel, rows_in, dtype, nthreads)
    return (panels + packed_weight) * dtype.itemsize


def _product_scratch(panel: int, rows_in: int, dtype: np.dtype[Any], nthreads: int) -> int:
    """Elements of the scratch the compiled product packs its panels in: per thread a panel
    of ``rows_in`` rows and the tile buffer, a strip more per thread and in all (the kernel
    starts each thread's part on a vector boundary)."""
    strip = int(_pointwise_kernels.STRIP[dtype.name])
    tile = int(_pointwise_kernels.TILE_ROWS)
    return nthreads * ((panel + tile) * max(rows_in, strip) + strip) + strip


def _run_product(b: Array, a: Array, groups: int, rows_out: int, a_row: int, a_red: int,
                 out: Array, nthreads: int, pack_rows: bool = True) -> bool:
    """``out[n, g*M + m, p] = sum_l a[g*M*L + m*a_row + l*a_red] * b[n, g*L + l, p]`` with
    the compiled product (``_pointwise.product_<T>``: M = ``rows_out``) for contiguous
    (N, G*L, P) ``b`` and (N, G*M, P) ``out``, its blocking chosen here; False (nothing
    done) for a dtype it does not run.  ``pack_rows``: pack ``a`` in register tiles first
    (a weight), else read it in place (activations: the copy would be a pass over them)."""
    kernel = _native_kernel("product", b.dtype)
    if kernel is None or a.dtype != b.dtype or out.dtype != b.dtype:
        return False
    n, rows, pixels = b.shape
    across = _runs_across(n, pixels)
    panel = _product_panel(n, pixels, b.dtype)
    panels = -(-n * pixels // panel) if across else n * -(-pixels // panel)
    mchunk = _row_chunk(rows_out, groups * panels, nthreads)
    scratch = np.empty(_product_scratch(panel, rows // groups, b.dtype, nthreads), b.dtype)
    kernel(b, a, groups, rows_out, a_row, a_red, out, panel, mchunk, scratch, nthreads,
           out.nbytes >= STREAM_RESULT_BYTES, across, pack_rows)
    return True


def row_product(b: Array, a: Array, groups: int, out: Array, taps: int, tap_step: int,
                shift: int, bias: Array | None, alpha: float, nthreads: int) -> bool:
    """A convolution along rows (column stride 1) as the compiled product: ``out[n, g*M + m,
    p] = alpha * (sum_{c, t} a[g*M + m, c*taps + t] * b[n, g*C + c, p + t*tap_step - shift]
    + bias[g*M + m])``, columns outside ``b``'s rows reading zero.

    Parameters
    ----------
    b : (N, G*C, W) contiguous array
    a : (G*M, C*taps) contiguous array of ``b``'s dtype
    groups : int
    out : (N, G*M, P) contiguous array of ``b``'s dtype (written, never read)
    taps, tap_step, shift : int
        Reduction taps per input row, the columns between them, and the column of output
        pixel 0's first tap (negated).
    bias : (G*M,) array or None
    alpha : float
    nthreads : int

    Returns
    -------
    bool
        False (nothing done) for a dtype the compiled product does not run.

    Each panel of output columns is packed as the im2col of its taps (``_pack_taps``: zero
    outside the row), then every row tile of ``a`` streams it: the 1x1 product's register
    tile and blocking, with the taps in its reduction.
    """
    kernel = _native_kernel("product", b.dtype)
    if kernel is None or a.dtype != b.dtype or out.dtype != b.dtype:
        return False
    n, rows_out, pixels = out.shape
    reduction = a.shape[1]
    panel = _row_panel(reduction, pixels, b.dtype)
    mchunk = _row_chunk(rows_out // groups, groups * n * -(-pixels // panel), nthreads)
    scratch = np.empty(_product_scratch(panel, reduction, b.dtype, nthreads), b.dtype)
    kernel(b, a.reshape(-1), groups, rows_out // groups, reduction, 1, out, panel, mchunk,
           scratch, nthreads, out.nbytes >= STREAM_RESULT_BYTES, False, True, taps,
           tap_step, shift, bias, alpha)
    return True


# Bytes of one packed panel of ``row_product`` (its im2col of the taps): a short reduction
# takes wider panels, so each row tile's pass over a panel is longer.  Fixed 256-pixel
# panels against 512 and 1024 (Intel Xeon model 207, AVX-512, float32, WaveNet layers,
# interleaved; 256-pixel time over the other's, 1 / 2 threads): 4 x 64 -> 64, 2 taps (a
# 128-row reduction) 1.08-1.12 / 1.05-1.06 at 512, 1.14-1.15 / 1.09 at 1024; 3 taps
# 1.12 / 1.08 at 512; 1 x 256 -> 256, 2 taps (512 rows) 0.99-1.00 / 0.99 at 512, 0.85-0.86
# / 0.86-0.89 at 1024.  256 KiB gives 512 pixels to the first, 256 to the last (and fits
# half of the smallest L2 cache these machines have, AMD Zen 3's 512 KiB).  Fixed 256
# against this rule, in a faster phase of the same VM: 2 taps 1.02-1.03 / 1.04-1.10, 3
# taps 1.00-1.01 / 1.00-1.01 (their rule panels 320 pixels), 256 channels (the same
# panels) 1.01-1.03.
ROW_PANEL_BYTES = 256 << 10
ROW_PANEL_PIXELS = (PANEL_PIXELS, 1024)


def _row_panel(reduction: int, pixels: int, dtype: np.dtype[Any]) -> int:
    """Pixels per panel of :func:`row_product`: ROW_PANEL_BYTES of packed panel, whole
    strips within ROW_PANEL_PIXELS, no wider than the row."""
    strip = int(_pointwise_kernels.STRIP[dtype.name])
    fit = ROW_PANEL_BYTES // max(1, reduction * dtype.itemsize) // strip * strip
    lo, hi = ROW_PANEL_PIXELS
    return min(max(lo, min(hi, fit)), -(-pixels // strip) * strip)


def row_product_bytes(images: int, groups: int, reduction: int, rows_out: int, pixels: int,
                      dtype: np.dtype[Any], nthreads: int) -> int:
    """Bytes :func:`row_product` allocates for ``images`` rows of ``pixels`` output columns,
    ``reduction`` (channels x taps) and ``rows_out`` rows per group: its panels and the
    weight packed in register tiles (0 for a dtype it does not run)."""
    if dtype not in _NATIVE_SUFFIX:
        return 0
    return _native_scratch_bytes(images, groups, reduction, rows_out, pixels, dtype, nthreads,
                                 panel=_row_panel(reduction, pixels, dtype))


def _native_product(planes: Array, wg: Array, transpose: bool, result: Array,
                    nthreads: int) -> bool:
    """``result[n, g] = W_g @ planes[n, g]`` (``W_g^T`` when ``transpose``) with the compiled
    register-tiled product, for float32 / float64 planes (N, G, rows, pixels) and a
    contiguous (G, Kg, Cg) weight; False (nothing done) for other dtypes."""
    n, groups, rows_in, pixels = planes.shape
    rows_out = result.shape[2]
    cg = wg.shape[2]
    a_row, a_red = (1, cg) if transpose else (cg, 1)
    return _run_product(planes.reshape(n, groups * rows_in, pixels), wg.reshape(-1), groups,
                        rows_out, a_row, a_red, result.reshape(n, groups * rows_out, pixels),
                        nthreads)


# The compiled 1x1 weight gradient (``_pointwise.weight_<T>``): reduction chunks of
# WEIGHT_CHUNK pixels, jobs of WEIGHT_GROUP_STRIPS strips of output columns, the reduction
# cut into at most WEIGHT_SPLITS partial sums (fewer when they would pass
# WEIGHT_PARTIAL_BYTES), added in order.  Chunk 256 and 4 strips measured best of
# 64 / 128 / 256 and 2 / 4 (Zen 5, AVX-512: 8x64x56x56 -> 256 at 190 GFLOP/s on 1 thread and
# 363 on 2, where the per-image BLAS products ran 94 and 178).  The splits depend on the
# shape only: the same bits at any thread count.
WEIGHT_CHUNK = 256
WEIGHT_GROUP_STRIPS = 4
WEIGHT_SPLITS = 16
WEIGHT_PARTIAL_BYTES = 8 << 20
# NCHW planes of fewer pixels are gathered into one plane across the batch first: each
# register tile then sums WEIGHT_CHUNK pixels per call instead of one small plane (a 7x7
# plane's 49), for the cost of copying both operands.  Intel Xeon model 207, AVX-512, 8
# images, interleaved, median of 31 paired rounds, per-image / gathered time, 1 / 2
# threads: 2048 -> 512 7x7 1.12 / 1.13, 512 -> 2048 7x7 1.11 / 1.13; 14x14 planes (196
# pixels) lost: 1024 -> 256 and 256 -> 1024 0.93 on 1 thread.
ACROSS_WEIGHT_PIXELS = 128


# The compiled weight gradient of pixel-major (NHWC) operands broadcasts its rows operand
# where it lies: a chunk of its pixels spans WEIGHT_CHUNK x channels, read again for every
# strip.  Past this many bytes the operand with fewer channels takes the rows instead.  8
# images, float32, 1 thread, ms, BLAS / rows with more channels / rows with fewer (AMD EPYC
# Zen 4, AVX-512, interleaved): 64 -> 256 56x56 11.95 / 9.45 / 10.89; 128 -> 512 28x28
# 10.30 / 12.23 / 10.33; 1024 -> 256 14x14 9.74 / 12.40 / 9.94; 2 threads: 6.54 / 5.35 /
# 6.80, 6.72 / 5.95 / 5.43, 9.84 / 7.45 / 5.94.
PIXEL_ROWS_BYTES = 256 << 10


class _WeightPlan:
    """How the compiled 1x1 weight gradient of a geometry runs: the operand whose rows
    stream through the register tile is the one with more rows per group (more reuse of
    each packed, transposed strip of the other); for pixel-major operands only while a
    chunk of its rows stays within PIXEL_ROWS_BYTES."""

    def __init__(self, geom: ConvGeometry, pixels: int, pixel_major: bool = False) -> None:
        dtype = geom.dtype
        self.native = dtype in _NATIVE_SUFFIX
        self.transposed = geom.Kg < geom.Cg  # rows are input channels, strips output ones
        if pixel_major and WEIGHT_CHUNK * max(geom.Kg, geom.Cg) * dtype.itemsize > \
                PIXEL_ROWS_BYTES:
            self.transposed = not self.transposed
        self.rows, self.cols = ((geom.Cg, geom.Kg) if self.transposed else (geom.Kg, geom.Cg))
        strip = int(_pointwise_kernels.STRIP[dtype.name]) if self.native else 1
        self.strip = strip
        self.padded_cols = -(-self.cols // strip) * strip
        # NCHW planes smaller than a chunk are gathered into one plane across the batch
        self.across = not pixel_major and geom.N > 1 and pixels < ACROSS_WEIGHT_PIXELS
        self.gathered = geom.N * (geom.K + geom.C) * pixels if self.across else 0
        # reduction chunks: per image of NCHW planes, across the batch of pixel rows
        chunks = (-(-geom.N * pixels // WEIGHT_CHUNK) if pixel_major or self.across
                  else geom.N * -(-pixels // WEIGHT_CHUNK))
        partial = geom.groups * self.rows * self.padded_cols * dtype.itemsize
        self.splits = max(1, min(chunks, WEIGHT_SPLITS, WEIGHT_PARTIAL_BYTES // max(1, partial)))

    def scratch_elements(self, nthreads: int) -> int:
        return nthreads * WEIGHT_GROUP_STRIPS * WEIGHT_CHUNK * self.strip + self.strip

    def workspace_bytes(self, geom: ConvGeometry, nthreads: int) -> int:
        """Partial sums, their total (and its transpose), the packing scratch and the
        gathered planes."""
        part = geom.groups * self.rows * self.padded_cols
        totals = 2 if self.transposed else 1
        return ((self.splits + totals) * part + self.scratch_elements(nthreads)
                + self.gathered) * geom.dtype.itemsize


def _native_weight_pixels(dy: Array, xs: Array, geom: ConvGeometry, plan: _WeightPlan,
                          nthreads: int) -> Array:
    """The (G, Kg, Cg) weight gradient of the contiguous pixel matrices of NHWC ``dy``
    (pixels, K) and ``xs`` (pixels, C) by the compiled product (``weight_pixels``: the rows
    operand broadcast where it lies, the other's channels copied into strips, no
    transposes), partial sums over fixed splits of the batch's pixels added in order."""
    rows_op, strips_op = (xs, dy) if plan.transposed else (dy, xs)
    return _run_weight("weight_pixels", rows_op, strips_op, geom, plan, nthreads)


def _run_weight(name: str, rows_op: Array, strips_op: Array, geom: ConvGeometry,
                plan: _WeightPlan, nthreads: int) -> Array:
    """Run the compiled weight-gradient kernel ``name`` (``weight`` or ``weight_pixels``)
    into the plan's partial sums and add them up (:func:`_sum_splits`)."""
    partial = np.empty((plan.splits, geom.groups, plan.rows, plan.padded_cols), geom.dtype)
    scratch = np.empty(plan.scratch_elements(nthreads), geom.dtype)
    kernel = _native_kernel(name, geom.dtype)
    assert kernel is not None  # plan.native
    kernel(rows_op, strips_op, geom.groups, partial, WEIGHT_CHUNK, WEIGHT_GROUP_STRIPS,
           scratch, nthreads)
    return _sum_splits(partial, plan, nthreads)


def _sum_splits(partial: Array, plan: _WeightPlan, nthreads: int) -> Array:
    """The (G, Kg, Cg) gradient from partial sums (splits, G, rows, padded columns), added
    in split order: the same bits at any thread count.  A transposed plan's sums are
    swapped by the compiled transpose: the caller's copy of NumPy's transposed view took a
    quarter of 2048 -> 512 7x7's weight gradient (`perf`, Intel Xeon model 207, 1 thread)."""
    total: Array = partial[0]
    for part in partial[1:]:
        total += part
    if not plan.transposed:
        grad: Array = total[:, :, :plan.cols]
        return grad
    swapped = _relayout.contiguous(total.transpose(0, 2, 1), nthreads)
    return swapped[:, :plan.cols]


def _native_weight(dy: Array, xs: Array, geom: ConvGeometry, plan: _WeightPlan,
                   nthreads: int) -> Array:
    """The (G, Kg, Cg) weight gradient of contiguous NCHW ``dy`` and ``xs`` (the pixels the
    1x1 kernel reads) by the compiled product as ``plan`` (a native one) says: partial sums
    over fixed splits of the reduction, added in order."""
    n, _, h, wd = dy.shape
    a = dy.reshape(n, geom.K, h * wd)
    b = xs.reshape(n, geom.C, h * wd)
    if plan.across:
        # one plane of the batch's pixels per channel (ACROSS_WEIGHT_PIXELS)
        a = np.ascontiguousarray(a.transpose(1, 0, 2)).reshape(1, geom.K, n * h * wd)
        b = np.ascontiguousarray(b.transpose(1, 0, 2)).reshape(1, geom.C, n * h * wd)
    rows_op, strips_op = (b, a) if plan.transposed else (a, b)
    return _run_weight("weight", rows_op, strips_op, geom, plan, nthreads)


def _native_rows_product(flat: Array, mat: Array, out: Array, nthreads: int) -> bool:
    """``out = flat @ mat.T`` with the compiled product, for a contiguous pixel matrix
    ``flat`` (pixels, in) of an NHWC array, a (out, in) matrix and a contiguous (pixels, out)
    result, float32 / float64; False (nothing done) otherwise.  The pixels are the rows that
    stream through the register tile, ``mat.T`` the packed strips."""
    if (flat.dtype not in _NATIVE_SUFFIX or not flat.flags.c_contiguous
            or not out.flags.c_contiguous):
        return False
    pixels, rows_in = flat.shape
    rows_out = out.shape[1]
    return _run_product(np.ascontiguousarray(mat.T).reshape(1, rows_in, rows_out),
                        flat.reshape(-1), 1, pixels, rows_in, 1,
                        out.reshape(1, pixels, rows_out), nthreads, pack_rows=False)


# Pixels per piece of the NHWC weight-gradient reduction (at most 64 pieces): each piece is
# one single-threaded BLAS product; the pieces are fixed by the shape and added in order.
WEIGHT_CHUNK_PIXELS = 4096


# NaN and Inf in the operands are data, propagated as the definition says (0 * Inf = NaN
# included): NumPy's floating-point warnings about them would only be noise, and the
# other algorithms (compiled kernels) give none.
_QUIET: dict[str, Any] = dict(invalid="ignore", over="ignore")


# Thin wrappers over _blas and base, under the names this module's call sites use.
def _blas_threads(n: int) -> AbstractContextManager[None]:
    return cast("AbstractContextManager[None]", _blas.threads(n))


def _quietly(work: Callable[[Any], T]) -> Callable[[Any], T]:
    """``work`` under :data:`_QUIET` on whichever thread runs it (pool threads do not
    inherit the caller's ``numpy.errstate``)."""
    def quiet(item: Any) -> T:
        with np.errstate(**_QUIET):
            return work(item)

    return quiet


def _ordered_sum(pieces: Iterable[Any], product: Callable[[Any], Array], nthreads: int) -> Array:
    return _blas.ordered_sum(pieces, _quietly(product), nthreads)


def _memory_layout(array: Array) -> str | None:
    return memory_layout(array)


def pointwise(geom: ConvGeometry) -> bool:
    """True when ``geom`` is an unpadded 1x1 convolution: plain matrix products, no columns.

    Parameters
    ----------
    geom : ConvGeometry

    Returns
    -------
    bool
    """
    return (geom.R, geom.S) == (1, 1) and geom.pads == ((0, 0), (0, 0))


def _scale_in_place(result: Array, bias: Array | None, alpha: float) -> None:
    """``result = alpha * (result + bias)``, ``bias`` along axis 1."""
    if bias is not None:
        result += bias.reshape((1, -1) + (1,) * (result.ndim - 2))
    if alpha != 1:
        result *= alpha


def _writes_in_place(dst: Array, src: Array, dtype: np.dtype[Any]) -> bool:
    """Whether a pointwise product may be written straight into ``dst``: contiguous memory
    in the layout of ``src`` (which the product keeps), of the compute dtype."""
    layout = _memory_layout(dst)
    return dst.dtype == dtype and layout is not None and layout == _memory_layout(src)


def _epilogue(result: Array, dst: Array, bias: Array | None, alpha: float,
              beta: float) -> None:
    """``dst = alpha * (result + bias) + beta * dst`` (``beta == 0`` never reads ``dst``);
    ``result`` and ``dst`` in the same logical order, ``bias`` along axis 1."""
    _scale_in_place(result, bias, alpha)
    if beta == 0:
        dst[...] = result
    else:
        dst *= beta
        dst += result


def _region(chunk: Chunk) -> tuple[slice, slice, slice, slice]:
    """The index of a chunk's pixels in a logical (N, C, H, W) output."""
    return (slice(*chunk.images), slice(None), slice(*chunk.rows), slice(*chunk.cols))


# The Python threads that run chunks, made on first use (idle threads cost nothing).
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _each_chunk(chunks: Iterable[Chunk], work: Callable[[Chunk], T],
                add: Callable[[Chunk, T], None] | None, nthreads: int) -> None:
    """``work(chunk)`` for every chunk, up to ``nthreads`` at once in Python threads (NumPy
    releases the GIL in its copies, adds and ``matmul``), BLAS on one thread; then
    ``add(chunk, result)`` in chunk order on the calling thread.

    Chunks go in waves of ``nthreads``; only the order of ``add`` calls matters to the
    result, and it is the chunks' order whatever the thread count.
    """
    global _pool
    quiet = _quietly(work)
    chunks = iter(chunks)
    with _blas_threads(1):
        while wave := list(itertools.islice(chunks, nthreads)):
            if len(wave) == 1:
                results = [quiet(wave[0])]
            else:
                with _pool_lock:
                    if _pool is None:
                        _pool = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2),
                                                   thread_name_prefix="cconv-gemm")
                results = list(_pool.map(quiet, wave))
            if add is not None:
                for chunk, result in zip(wave, results):
                    add(chunk, result)


class ChunkedGemm:
    """im2col + GEMM in bounded chunks for one geometry: any kernel, stride, dilation,
    padding, groups and layout (``GemmConvolution`` uses it beyond unpadded 1x1 kernels).

    Every chunk's work (columns, one single-threaded batched matmul, col2im) runs on one
    Python thread, up to ``nthreads`` chunks at once; whatever is summed over chunks is
    added in chunk order on the calling thread.

    Parameters
    ----------
    geom : ConvGeometry
        The (zero-padding) convolution; its ``layout`` picks the orientation of the
        column buffers (pixel-major for NHWC).
    """

    def __init__(self, geom: ConvGeometry) -> None:
        self.geom = geom
        self.layout = ColumnLayout(geom, geom.layout == "NHWC")
        # FEW_GRADIENT_CHANNELS: the data gradient's columns when they differ from ``layout``
        self._gradient_planes = (ColumnLayout(geom, False) if self.layout.pixel_major
                                 and geom.Cg <= FEW_GRADIENT_CHANNELS and geom.stride != (1, 1)
                                 else None)

    def plan(self) -> ChunkPlan:
        """The chunks every pass runs, under the budget in force now.

        Returns
        -------
        ChunkPlan
        """
        budget = gemm_schedule.pass_budget(self.geom, gemm_schedule.CHUNK_BUDGET_BYTES)
        return gemm_schedule.plan(self.geom, budget)

    def _scratch(self, local: threading.local) -> Scratch:
        """The calling thread's buffers for this call."""
        scratch = getattr(local, "scratch", None)
        if scratch is None:
            scratch = local.scratch = Scratch(self.geom.dtype)
        return cast(Scratch, scratch)

    def _columns(self, x: Array, chunk: Chunk, scratch: Scratch) -> tuple[Array, Array]:
        """im2col of ``x`` for ``chunk``: the (taps, matrix) views of its column buffer."""
        taps, columns = self.layout.columns(chunk, scratch)
        self.layout.fill_columns(taps, self.layout.input_window(x, chunk, scratch))
        return taps, columns

    def forward(self, x: Array, w: Array, bias: Array | None, y: Array, alpha: float,
                beta: float, nthreads: int) -> None:
        """``y = alpha * (conv(x, w) + bias) + beta * y`` (logical NCHW views).

        Parameters
        ----------
        x, w, bias, y, alpha, beta, nthreads
            As :meth:`Algorithm.forward`.
        """
        lay, local = self.layout, threading.local()
        if np.may_share_memory(x, y):  # later chunks must read the input as it was
            x = x.copy()
        wm = lay.weight_matrix(w)

        def work(chunk: Chunk) -> None:  # chunks write disjoint parts of y
            scratch = self._scratch(local)
            _, columns = self._columns(x, chunk, scratch)
            dst = y[_region(chunk)]
            in_place = lay.matrix_view(dst) if beta == 0 else None
            if in_place is not None:  # BLAS writes the output itself
                np.matmul(wm, columns, out=in_place)
                _scale_in_place(dst, bias, alpha)
                return
            block, matrix = lay.product(chunk, self.geom.K, scratch)
            np.matmul(wm, columns, out=matrix)
            _epilogue(block, dst, bias, alpha, beta)

        _each_chunk(self.plan(), work, None, nthreads)

    def backward_data(self, dy: Array, w: Array, dx: Array, alpha: float, beta: float,
                      nthreads: int, bias: Array | None = None) -> None:
        """``dx = alpha * (conv_backward_data(dy, w) + bias) + beta * dx`` (logical NCHW).

        A chunk of whole images col2im's into their own zero-padded gradient and writes
        their part of ``dx``; chunks within an image col2im into their own windows, which
        are then added onto the image's padded gradient in chunk order.

        Parameters
        ----------
        dy, w, dx, alpha, beta, nthreads, bias
            As :meth:`Algorithm.backward_data`.
        """
        if np.may_share_memory(dy, dx):
            dy = dy.copy()
        lay = self._gradient_planes
        if lay is not None:
            # the planes' columns, from a gradient transposed into planes, into planes
            # transposed back into ``dx``
            planes = _relayout.contiguous(dy, nthreads)
            compute_into(dx, alpha, beta, lambda out, a, b: self._col2im(
                lay, planes, w, out, a, b, nthreads, bias), nthreads)
            return
        self._col2im(self.layout, dy, w, dx, alpha, beta, nthreads, bias)

    def _col2im(self, lay: ColumnLayout, dy: Array, w: Array, dx: Array, alpha: float,
                beta: float, nthreads: int, bias: Array | None) -> None:
        """:meth:`backward_data` on the columns of ``lay``."""
        g, local = self.geom, threading.local()
        wt = lay.weight_matrix(w).transpose(0, 2, 1)
        (pt, pb), (pl, pr) = g.pads
        padded_shape = (g.C, g.H + pt + pb, g.W + pl + pr)
        plan = self.plan()

        def finish(padded: Array, images: tuple[int, int]) -> None:
            _epilogue(padded[:, :, pt:pt + g.H, pl:pl + g.W], dx[slice(*images)], bias, alpha,
                      beta)

        def work(chunk: Chunk) -> Array | None:
            scratch = self._scratch(local)
            taps, columns = lay.columns(chunk, scratch)
            np.matmul(wt, lay.as_matrix(dy[_region(chunk)], chunk, scratch), out=columns)
            (r0, r1), (c0, c1) = lay.window_spans(chunk)
            n = chunk.images[1] - chunk.images[0]
            if plan.whole_images:
                padded = lay.image(scratch, "padded", (n,) + padded_shape, zero=True)
                lay.scatter_columns(taps, padded[:, :, r0:r1, c0:c1])
                finish(padded, chunk.images)
                return None
            window = lay.zeros((n, g.C, r1 - r0, c1 - c0))  # added on the calling thread
            lay.scatter_columns(taps, window)
            return window

        if plan.whole_images:
            _each_chunk(plan, work, None, nthreads)
            return
        padded = lay.zeros((1,) + padded_shape)  # the padded gradient of one image

        def add(chunk: Chunk, window: Array | None) -> None:
            (r0, r1), (c0, c1) = lay.window_spans(chunk)
            padded[:, :, r0:r1, c0:c1] += window
            if chunk.rows[1] == g.OH and chunk.cols[1] == g.OW:  # the image's last chunk
                finish(padded, chunk.images)
                padded[...] = 0

        _each_chunk(plan, work, add, nthreads)

    def backward_weight(self, dy: Array, x: Array, nthreads: int) -> Array:
        """The weight gradient as a new contiguous (K, C/groups, R, S) array.

        Parameters
        ----------
        dy, x, nthreads
            As :meth:`Algorithm.backward_weight`.

        Returns
        -------
        ndarray
        """
        g, lay, local = self.geom, self.layout, threading.local()
        total = np.zeros((g.groups, g.Kg, g.Cg * g.R * g.S), g.dtype)

        def work(chunk: Chunk) -> Array:
            _, columns = self._columns(x, chunk, self._scratch(local))
            dym = lay.as_matrix(dy[_region(chunk)], chunk, self._scratch(local))
            grad: Array = np.matmul(dym, columns.transpose(0, 2, 1))  # (G, K/groups, red)
            return grad

        def add(chunk: Chunk, part: Array) -> None:
            total[...] += part

        _each_chunk(self.plan(), work, add, nthreads)
        return lay.weight_from_matrix(total)

    def workspace_bytes(self, op: str, nthreads: int) -> int:
        """Bytes one call of ``op`` allocates besides its result: per thread at work, a
        chunk's column buffer, zero-padded input window and product (or copy of ``dy``'s
        chunk); a reordered weight (NHWC); for backward-data the zero-padded gradient of a
        chunk's images, or per thread the window of a chunk within an image plus the
        image's padded gradient; for backward-weight a partial product per thread and the
        total.

        Parameters
        ----------
        op : {"forward", "backward_data", "backward_weight"}
        nthreads : int

        Returns
        -------
        int
        """
        g = self.geom
        plan = self.plan()
        if not len(plan):
            return 0
        lanes = min(nthreads, len(plan))
        n, rows, cols = ColumnLayout.extent(plan.largest)
        pixels = n * rows * cols
        weight = g.K * g.Cg * g.R * g.S
        reordered = weight if self.layout.pixel_major else 0
        columns = (g.C * g.R * g.S + g.K) * pixels
        (r0, r1), (c0, c1) = self.layout.window_spans(plan.largest)
        window = n * g.C * (r1 - r0) * (c1 - c0)
        padding = window if g.pads != ((0, 0), (0, 0)) else 0  # else read in place
        if op == "forward":
            total = lanes * (columns + padding) + reordered
        elif op == "backward_data":
            (pt, pb), (pl, pr) = g.pads
            padded = n * g.C * (g.H + pt + pb) * (g.W + pl + pr)
            if plan.whole_images:
                total = lanes * (columns + padded) + reordered
            else:  # a wave's windows are held until added, and the next wave's computed
                total = lanes * (columns + 2 * window) + padded + reordered
        else:
            total = lanes * (columns + padding + 2 * weight) + weight + reordered
        return int(total * g.dtype.itemsize)


class GemmConvolution(Algorithm):
    """Convolution as BLAS matrix products: unpadded 1x1 kernels (any stride, groups,
    layout) directly, every other shape through chunked im2col (:class:`ChunkedGemm`)."""

    name = "gemm"

    @classmethod
    def why_not(cls, geom: ConvGeometry, op: str) -> str | None:
        """None: the GEMM algorithm runs every shape and pass."""
        return None

    def __init__(self, geom: ConvGeometry) -> None:
        super().__init__(geom)
        self._strided = tuple(geom.stride) != (1, 1)
        self._chunked = None if pointwise(geom) else ChunkedGemm(geom)

    def _pixels(self, x: Array) -> Array:
        """The input pixels the 1x1 kernel reads (every stride-th one), as a logical NCHW
        array whose memory is contiguous in the order of ``x``'s."""
        if not self._strided:
            return x
        sh, sw = self.geom.stride
        sub = x[:, :, ::sh, ::sw]
        if _memory_layout(x) == "NHWC":
            return np.ascontiguousarray(sub.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
        return np.ascontiguousarray(sub)

    def _weight(self, w: Array) -> Array:
        g = self.geom
        return w.reshape(g.groups, g.Kg, g.Cg)

    def _product(self, src: Array, w: Array, transpose: bool, nthreads: int,
                 into: Array | None = None) -> Array:
        """``W @ src`` (``W^T @ src`` when ``transpose``) per group and pixel, for a logical
        NCHW ``src`` of contiguous NCHW or NHWC memory; a new logical NCHW array, or
        ``into`` (a logical NCHW view of contiguous memory in ``src``'s layout, the compute
        dtype) filled and returned."""
        g = self.geom
        wg = self._weight(w)
        if transpose:
            wg = wg.transpose(0, 2, 1)
        rows_in, rows_out = wg.shape[2], wg.shape[1]
        n, _, h, wd = src.shape
        # Pieces of PIECE_PIXELS output pixels, fixed by the shape, each one single-threaded
        # BLAS product (_blas.map_pieces): the same bits at any thread count.
        if _memory_layout(src) == "NHWC":
            flat = src.transpose(0, 2, 3, 1).reshape(n * h * wd, g.groups * rows_in)
            out = (np.empty((n * h * wd, g.groups * rows_out), g.dtype) if into is None
                   else into.transpose(0, 2, 3, 1).reshape(n * h * wd, g.groups * rows_out))
            if g.groups == 1 and _native_rows_product(flat, wg[0], out, nthreads):
                return out.reshape(n, h, wd, -1).transpose(0, 3, 1, 2)

            def rows(piece: slice) -> None:
                for grp in range(g.groups):  # (P, in) @ (in, out), BLAS on strided views
                    np.matmul(flat[piece, grp * rows_in:(grp + 1) * rows_in], wg[grp].T,
                              out=out[piece, grp * rows_out:(grp + 1) * rows_out])

            _blas.map_pieces(_pieces(n * h * wd), _quietly(rows), nthreads)
            return out.reshape(n, h, wd, -1).transpose(0, 3, 1, 2)
        planes = np.ascontiguousarray(src).reshape(n, g.groups, rows_in, h * wd)
        result: Array = (np.empty((n, g.groups, rows_out, h * wd), g.dtype) if into is None
                         else into.reshape(n, g.groups, rows_out, h * wd))
        if _native_product(planes, np.ascontiguousarray(self._weight(w)), transpose, result,
                           nthreads):
            return result.reshape(n, g.groups * rows_out, h, wd)

        def columns(piece: tuple[int, slice]) -> None:
            image, pixels = piece
            np.matmul(wg, planes[image, :, :, pixels], out=result[image, :, :, pixels])

        _blas.map_pieces([(i, p) for i in range(n) for p in _pieces(h * wd)],
                         _quietly(columns), nthreads)
        return result.reshape(n, g.groups * rows_out, h, wd)

    def prepare_weight(self, w: Array, nthreads: int) -> TransformedWeight | None:
        """Nothing to precompute: BLAS reads the weight as it is (or a cheap reorder)."""
        return None

    def forward(self, x: Array, w: Array, bias: Array | None, y: Array, alpha: float,
                beta: float, nthreads: int, prepared: TransformedWeight | None = None) -> None:
        """``y = alpha * (conv(x, w) + bias) + beta * y`` (logical NCHW views)."""
        with np.errstate(**_QUIET):
            if self._chunked is not None:
                self._chunked.forward(x, w, bias, y, alpha, beta, nthreads)
                return
            pixels = self._pixels(x)
            if beta == 0 and _writes_in_place(y, pixels, self.geom.dtype):
                # the products straight into y (no result buffer to fault in and copy)
                _scale_in_place(self._product(pixels, w, False, nthreads, into=y), bias, alpha)
                return
            result = self._product(pixels, w, False, nthreads)
            _epilogue(result, y, bias, alpha, beta)

    def backward_data(self, dy: Array, w: Array, dx: Array, alpha: float, beta: float,
                      nthreads: int, bias: Array | None = None) -> None:
        """``dx = alpha * (conv_backward_data(dy, w) + bias) + beta * dx``; with a stride
        only every stride-th pixel receives a product (the others get the bias alone)."""
        with np.errstate(**_QUIET):
            self._backward_data(dy, w, dx, alpha, beta, nthreads, bias)

    def _backward_data(self, dy: Array, w: Array, dx: Array, alpha: float, beta: float,
                       nthreads: int, bias: Array | None) -> None:
        if self._chunked is not None:
            self._chunked.backward_data(dy, w, dx, alpha, beta, nthreads, bias)
            return
        if not self._strided and beta == 0 and _writes_in_place(dx, dy, self.geom.dtype):
            _scale_in_place(self._product(dy, w, True, nthreads, into=dx), bias, alpha)
            return
        result = self._product(dy, w, True, nthreads)
        if not self._strided:
            _epilogue(result, dx, bias, alpha, beta)
            return
        sh, sw = self.geom.stride
        full = np.zeros(dx.shape, dx.dtype)
        full[:, :, ::sh, ::sw] = result
        _epilogue(full, dx, bias, alpha, beta)

    def backward_weight(self, dy: Array, x: Array, nthreads: int) -> Array:
        """The weight gradient ``sum_n dY_n X_n^T`` as a new (K, C/groups, R, S) array."""
        with np.errstate(**_QUIET):
            return self._backward_weight(dy, x, nthreads)

    def _backward_weight(self, dy: Array, x: Array, nthreads: int) -> Array:
        if self._chunked is not None:
            return self._chunked.backward_weight(dy, x, nthreads)
        g = self.geom
        xs = self._pixels(x)
        n, _, h, wd = dy.shape
        pieces: Iterable[Any]
        product: Callable[[Any], Array]
        a: Array
        b: Array
        if _memory_layout(dy) == "NHWC" and _memory_layout(xs) == "NHWC":
            a = dy.transpose(0, 2, 3, 1).reshape(-1, g.K)
            b = xs.transpose(0, 2, 3, 1).reshape(-1, g.C)
            plan = _WeightPlan(g, h * wd, pixel_major=True)
            if plan.native and a.shape[0]:
                native = _native_weight_pixels(a, b, g, plan, nthreads)
                return np.ascontiguousarray(native, g.dtype).reshape(g.K, g.Cg, 1, 1)
            step = max(WEIGHT_CHUNK_PIXELS, -(-a.shape[0] // 64))
            pieces = [slice(i, i + step) for i in range(0, a.shape[0], step)]

            def product(rows: slice) -> Array:
                grad = np.empty((g.groups, g.Kg, g.Cg), g.dtype)
                for grp in range(g.groups):
                    np.matmul(a[rows, grp * g.Kg:(grp + 1) * g.Kg].T,
                              b[rows, grp * g.Cg:(grp + 1) * g.Cg], out=grad[grp])
                return grad
        else:
            plan = _WeightPlan(g, h * wd)
            if plan.native:
                native = _native_weight(np.ascontiguousarray(dy), np.ascontiguousarray(xs), g,
                                        plan, nthreads)
                return np.ascontiguousarray(native, g.dtype).reshape(g.K, g.Cg, 1, 1)
            a = np.ascontiguousarray(dy).reshape(n, g.groups, g.Kg, h * wd)
            b = np.ascontiguousarray(xs).reshape(n, g.groups, g.Cg, h * wd)
            pieces = range(n)

            def product(image: int) -> Array:
                grad: Array = np.matmul(a[image], b[image].transpose(0, 2, 1))  # (G, Kg, Cg)
                return grad
        grad = _ordered_sum(pieces, product, nthreads)
        return np.ascontiguousarray(grad, g.dtype).reshape(g.K, g.Cg, 1, 1)

    def workspace_bytes(self, op: str, nthreads: int) -> int:
        """Bytes besides the result: for 1x1 kernels the product (then scaled into the
        result), the strided pixels, and per-image weight-gradient products; otherwise
        those of :meth:`ChunkedGemm.workspace_bytes`."""
        if self._chunked is not None:
            return self._chunked.workspace_bytes(op, nthreads)
        g = self.geom
        item = g.dtype.itemsize
        sub = g.N * g.C * g.OH * g.OW if self._strided else 0
        native = 0
        if op != "backward_weight" and (g.layout != "NHWC" or g.groups == 1):
            rows_in, rows_out = (g.Cg, g.Kg) if op == "forward" else (g.Kg, g.Cg)
            # NCHW: panels of pixels, rows_in deep; NHWC: panels of output channels
            native = (_native_scratch_bytes(g.N, g.groups, rows_in, rows_out, g.OH * g.OW,
                                            g.dtype, nthreads) if g.layout != "NHWC" else
                      _native_scratch_bytes(1, 1, rows_in, g.N * g.OH * g.OW, rows_out,
                                            g.dtype, nthreads, pack_rows=False))
            if g.layout == "NHWC":
                native += g.K * g.Cg * g.dtype.itemsize  # the transposed weight
        if op == "forward":
            return int((g.N * g.K * g.OH * g.OW + sub) * item) + native
        if op == "backward_data":
            full = g.N * g.C * g.H * g.W if self._strided else 0
            return int((g.N * g.C * g.OH * g.OW + full) * item) + native
        plan = _WeightPlan(g, g.OH * g.OW, pixel_major=g.layout == "NHWC")
        if plan.native:
            return int(sub * item) + plan.workspace_bytes(g, nthreads)
        return int((sub + g.N * g.K * g.Cg) * item)
