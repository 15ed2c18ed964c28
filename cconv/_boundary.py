"""Padding modes other than zeros: pad the input before the kernels, fold gradients after.

A convolution with ``padding_mode`` "reflect", "symmetric", "replicate", "circular" or a
non-zero "constant" is the zero-padding-free convolution (``ConvGeometry.kernel_geometry``)
of the input padded with that mode.  So every algorithm runs every mode unchanged:

- forward and the weight gradient read ``pad(x)``;
- the data gradient is computed for the padded input, then *folded*: the gradient of each
  padded pixel is added to the input pixel it copies (the adjoint of ``pad``).  A constant
  copies nothing, so its fold is a crop.

An algorithm that can write the image's pixels of that gradient straight into the result
(``Algorithm.backward_data_split``: Winograd's output transform) sends only the padding's
pixels to a buffer, which :meth:`Boundary.fold_split` then adds onto the pixels they copy:
the result is written once, and only the padding's pixels are read back.  ResNet-50's
64-channel 3x3 layer (8 images of 56x56, 2 threads, AMD EPYC Zen 5): reflect / zeros
1.41 -> 1.24 (``bench/padding_modes.py``).

Transposed convolution is the data gradient of the convolution it transposes, so it folds
too (and its own gradients pad).  An algorithm that copies its input anyway may build the
padding there instead (``Algorithm.padding_mode_ops``, from :func:`padded_source`: the
depthwise band buffers build every mode for forward and the weight gradient); then no
padded copy is made for that pass.  Padding costs one parallel copy of the input (the image's
rows copied whole, only the padding looked up; ``_kernels/_gather.pyx``), folding one
gather-sum; the padded array is the only extra memory.

Which input pixel a padded pixel copies, for position ``i`` relative to the input's start
(negative before it, ``>= size`` after it)::

    reflect    d c b | a b c d | c b a    mirror without repeating the edge (period 2(size-1))
    symmetric  c b a | a b c d | d c b    mirror repeating the edge (period 2 size)
    replicate  a a a | a b c d | d d d    the nearest edge pixel
    circular   b c d | a b c d | a b c    wrap around (period size)
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, Optional, Tuple

import numpy as np
import numpy.typing as npt

from . import _workspace
from ._kernels import _gather

if TYPE_CHECKING:
    from ._geometry import ConvGeometry

Array = npt.NDArray[Any]
Index = npt.NDArray[np.int64]


def source_index(position: npt.ArrayLike, size: int, mode: str) -> Index:
    """Index of the input pixel copied at ``position`` (an int array), or -1 for a constant."""
    i = np.asarray(position, dtype=np.int64)
    if mode == "reflect":
        if size == 1:
            return np.zeros_like(i)
        period = 2 * (size - 1)
        k = i % period
        return np.where(k < size, k, period - k)
    if mode == "symmetric":
        k = i % (2 * size)
        return np.where(k < size, k, 2 * size - 1 - k)
    if mode == "replicate":
        return np.clip(i, 0, size - 1)
    if mode == "circular":
        return i % size
    return np.where((i >= 0) & (i < size), i, -1)  # constant


def padded_source(size: int, pad_begin: int, pad_end: int, mode: str) -> Index:
    """For each index of an axis padded by ``pad_begin`` / ``pad_end``, the input index it
    copies, or -1 for the value of a constant (or zero) padding; contiguous int64."""
    padded = np.arange(-pad_begin, size + pad_end, dtype=np.int64)
    return np.ascontiguousarray(source_index(padded, size, mode), dtype=np.int64)


@functools.lru_cache(maxsize=256)
def padding_maps(geom: ConvGeometry) -> Tuple[Any, ...]:
    """``(row_src, col_src, value)`` of ``geom``'s padding mode for the packing kernels
    (``_layout.pack_input``), or ``()`` for zero padding (their own)."""
    if geom.padding_mode == "zeros":
        return ()
    (top, bottom), (left, right) = geom.pads
    return (padded_source(geom.H, top, bottom, geom.padding_mode),
            padded_source(geom.W, left, right, geom.padding_mode), geom.padding_value)


def _csr(lists_of: Tuple[Index, Index], n_rows: int) -> Tuple[Index, Index]:
    """CSR (pointers, indices) of ``lists_of`` = (row, index) pairs, rows in 0..n_rows-1,
    the indices of a row in increasing order (the fold's fixed summation order)."""
    rows, idx = lists_of
    order = np.lexsort((idx, rows))
    rows, idx = rows[order], idx[order]
    ptr = np.zeros(n_rows + 1, np.int64)
    np.add.at(ptr, rows + 1, 1)
    return np.cumsum(ptr), np.ascontiguousarray(idx, dtype=np.int64)


def _longest_run(indices: Index) -> Tuple[int, int]:
    """[start, stop) of the longest run of consecutive values in sorted ``indices``."""
    if indices.size == 0:
        return 0, 0
    breaks = np.flatnonzero(np.diff(indices) != 1)
    starts = np.concatenate(([0], breaks + 1))
    stops = np.concatenate((breaks + 1, [indices.size]))
    best = int(np.argmax(stops - starts))
    return int(indices[starts[best]]), int(indices[stops[best] - 1]) + 1


class AxisMap:
    """The padding of one axis: which input index each padded index copies, both ways."""

    def __init__(self, size: int, pad_begin: int, pad_end: int, mode: str) -> None:
        source = padded_source(size, pad_begin, pad_end, mode)
        copies = source >= 0
        positions = np.arange(source.size, dtype=np.int64)
        # padding: padded index p reads source[p] (-1: nothing, for a constant)
        self.source = source
        self.begin = pad_begin
        # folding: input index s sums every padded index that copied it
        self.fold = _csr((source[copies], positions[copies]), size)
        # the input indices [interior[0], interior[1]) sum only themselves (at + pad_begin)
        counts = np.diff(self.fold[0])
        alone = np.flatnonzero(counts == 1)
        alone = alone[self.fold[1][self.fold[0][alone]] == alone + pad_begin]
        self.interior = _longest_run(alone)


def _layout_blocks(array: Array, layout: str) -> Array:
    """A C-contiguous (B, H, W, L) view: NCHW -> (N*C, H, W, 1), NHWC -> itself."""
    if layout == "NCHW":
        n, c, h, w = array.shape
        return array.reshape(n * c, h, w, 1)
    return array


class Boundary:
    """Pad and fold for one geometry whose ``padding_mode`` is not "zeros"."""

    def __init__(self, geom: ConvGeometry) -> None:
        self.geom = geom
        (top, bottom), (left, right) = geom.pads
        self.rows = AxisMap(geom.H, top, bottom, geom.padding_mode)
        self.cols = AxisMap(geom.W, left, right, geom.padding_mode)
        self.value = geom.padding_value

    def pad(self, x: npt.ArrayLike, num_threads: int) -> Array:
        """``x`` (the geometry's input, in its layout) padded, contiguous, compute dtype."""
        g, k = self.geom, self.geom.kernel_geometry
        src = np.ascontiguousarray(x, dtype=g.dtype)
        dst = np.empty(k.input_shape(), g.dtype)
        _gather.pad_copy(_layout_blocks(src, g.layout), _layout_blocks(dst, g.layout),
                         self.rows.source, self.cols.source, self.cols.begin, self.value,
                         num_threads)
        return dst

    def fold_gradient(self, padded_gradient: Callable[[Array], None], dx: Array, alpha: float,
                      beta: float, bias: Optional[Array], num_threads: int) -> None:
        """``dx = alpha * (fold(padded input's gradient) + bias) + beta * dx``.

        ``padded_gradient(buffer)`` writes the padded input's gradient into ``buffer``, a
        logical NCHW view of a pooled array in the geometry's layout (a fresh array of that
        size would be zeroed page by page by the OS on every call); ``dx`` is a logical
        NCHW view of the result, any strides; ``bias`` (C,) or None."""
        g, k = self.geom, self.geom.kernel_geometry
        target = dx if g.layout == "NCHW" else dx.transpose(0, 2, 3, 1)  # layout order
        scratch = target if target.flags.c_contiguous else np.empty(target.shape, g.dtype)
        if scratch is not target and beta != 0:
            scratch[...] = target
        with _workspace.scope() as ws:
            padded = ws.empty(k.N * k.C * k.H * k.W, g.dtype).reshape(k.input_shape())
            padded_gradient(padded if g.layout == "NCHW" else padded.transpose(0, 3, 1, 2))
            self.fold(padded, scratch, alpha, beta, num_threads)
        if bias is not None:
            scratch += alpha * (bias if g.layout == "NHWC" else bias[:, None, None])
        if scratch is not target:
            target[...] = scratch

    def fold_split(self, split_gradient: Callable[[Array, Array, Tuple[int, int]], bool],
                   dx: Array, alpha: float, num_threads: int) -> bool:
        """The fold for an algorithm that writes the image's pixels of the padded input's
        gradient straight into the result (``Algorithm.backward_data_split``): only the
        padding's pixels go through a buffer and are added afterwards, so the result is not
        written twice.  False (nothing written) where the split does not run: ``dx`` not
        contiguous in its layout, or the algorithm declines.

        ``split_gradient(ring, dx, origin)`` writes ``dx`` (epilogue included) and the
        padding's raw gradient into ``ring``, a logical NCHW view of a pooled array of the
        padded input's shape; ``dx`` a logical NCHW view of the result."""
        g, k = self.geom, self.geom.kernel_geometry
        target = dx if g.layout == "NCHW" else dx.transpose(0, 2, 3, 1)  # layout order
        if not target.flags.c_contiguous:
            return False
        with _workspace.scope() as ws:
            ring = ws.empty(k.N * k.C * k.H * k.W, g.dtype).reshape(k.input_shape())
            if not split_gradient(ring if g.layout == "NCHW" else ring.transpose(0, 3, 1, 2),
                                  dx, (self.rows.begin, self.cols.begin)):
                return False
            _gather.fold_ring(_layout_blocks(ring, g.layout), _layout_blocks(target, g.layout),
                              self.rows.source, self.cols.source, self.rows.begin,
                              self.cols.begin, alpha, num_threads)
        return True

    def fold(self, grad_padded: Array, out: Array, alpha: float, beta: float,
             num_threads: int) -> None:
        """``out = alpha * fold(grad_padded) + beta * out``; both in the layout, contiguous."""
        g = self.geom
        c0, c1 = self.cols.interior
        _gather.gather_sum(_layout_blocks(grad_padded, g.layout), _layout_blocks(out, g.layout),
                           *self.rows.fold, *self.cols.fold, c0, c1, self.cols.begin, alpha,
                           beta, num_threads)


@functools.lru_cache(maxsize=256)
def for_geometry(geom: ConvGeometry) -> Optional[Boundary]:
    """The :class:`Boundary` of ``geom``, or None when its padding is zeros (the kernels')."""
    return None if geom.padding_mode == "zeros" else Boundary(geom)
