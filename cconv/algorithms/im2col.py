"""Column buffers of the GEMM algorithm: im2col, col2im and the matrices BLAS multiplies.

For one chunk of output pixels (``gemm_schedule``), group ``g``'s columns are a matrix
``X_g`` of ``red = C/groups * R * S`` rows (one per input channel and kernel tap) by ``P``
columns (one per output pixel), and the passes are the products

* forward:          ``Y_g = W_g @ X_g``       (``W_g``: the group's (K/groups, red) weight),
* backward-data:    ``X_g = W_g^T @ dY_g``, then col2im adds every tap's rows back onto
  the zero-padded input gradient,
* backward-weight:  ``dW_g = dY_g @ X_g^T``.

A :class:`ColumnLayout` stores them in one of two orientations, chosen from the
activations' layout so that building the columns reads the input along its contiguous
axis and the products land in the output's order:

* channel-major (NCHW): columns ``[G][C/groups][R][S][pixels]``, products ``[K][pixels]``;
* pixel-major (NHWC):   columns ``[pixels][G][R][S][C/groups]``, products ``[pixels][K]``.

Either way BLAS sees each group's matrices as plain (possibly transposed) 2-D operands, so
one batched ``numpy.matmul`` per chunk does every group.  Pixels are ordered (image, output
row, output column).  The zero padding is materialised (``input_window``): a NaN or Inf
weight meeting it gives ``0 * Inf = NaN`` as the definition does, and col2im adds only the
products of existing outputs, so non-finite values land where they do in a plain float64
convolution.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import as_strided

from .._simd import col2im as col2im_kernels
from .gemm_schedule import Chunk, input_span

if TYPE_CHECKING:
    from .._geometry import ConvGeometry

Array = npt.NDArray[Any]


class Scratch:
    """Reusable flat buffers, one per name, grown on demand (one chunk's buffers are views
    of them, so a pass allocates its workspace once rather than once per chunk).

    Parameters
    ----------
    dtype : numpy.dtype
        The dtype of every buffer.
    """

    def __init__(self, dtype: np.dtype[Any]) -> None:
        self.dtype = dtype
        self._buffers: dict[str, Array] = {}

    def take(self, name: str, shape: tuple[int, ...], zero: bool = False) -> Array:
        """A C-contiguous array of ``shape`` over buffer ``name`` (its old values unless
        ``zero``).

        Parameters
        ----------
        name : str
            The buffer; views of the same name overlap, views of different names never do.
        shape : tuple of int
        zero : bool
            Fill the view with zeros.

        Returns
        -------
        ndarray
        """
        size = int(np.prod(shape, dtype=np.int64))
        flat = self._buffers.get(name)
        if flat is None or flat.size < size:
            flat = np.zeros(size, self.dtype) if zero else np.empty(size, self.dtype)
            self._buffers[name] = flat
        elif zero:
            flat[:size] = 0
        return flat[:size].reshape(shape)


def _reshaped_view(array: Array, shape: tuple[int, ...]) -> Array | None:
    """``array`` reshaped to ``shape`` without a copy, or None when that needs one."""
    try:
        return array.reshape(shape, copy=False)
    except ValueError:  # the elements are not one strided run
        return None
    except TypeError:  # NumPy < 2.1 has no ``copy``: setting the shape raises, never copies
        view = array.view()
        try:
            view.shape = shape
        except AttributeError:
            return None
        return view


def _blasable(matrix: Array) -> bool:
    """True when BLAS can read the 2-D ``matrix`` in place: unit stride along one axis and
    a leading dimension of at least the other's length (NumPy copies or loops otherwise)."""
    item = matrix.itemsize
    (rows, cols), (s_rows, s_cols) = matrix.shape, matrix.strides
    row_major = s_cols == item and s_rows % item == 0 and s_rows >= cols * item
    col_major = s_rows == item and s_cols % item == 0 and s_cols >= rows * item
    return bool(row_major or col_major)


class ColumnLayout:
    """The buffers of one orientation of the column matrices for one geometry.

    Parameters
    ----------
    geom : ConvGeometry
        The (zero-padding) convolution.
    pixel_major : bool
        Pixel-major buffers (for NHWC activations) instead of channel-major ones.
    """

    def __init__(self, geom: ConvGeometry, pixel_major: bool) -> None:
        self.geom = geom
        self.pixel_major = pixel_major

    # -- shapes and views ------------------------------------------------------------------

    @staticmethod
    def extent(chunk: Chunk) -> tuple[int, int, int]:
        """(images, rows, columns) of a chunk."""
        return (chunk.images[1] - chunk.images[0], chunk.rows[1] - chunk.rows[0],
                chunk.cols[1] - chunk.cols[0])

    def window_spans(self, chunk: Chunk) -> tuple[tuple[int, int], tuple[int, int]]:
        """The padded-input rows and columns ``[begin, end)`` the chunk's outputs read."""
        g = self.geom
        return (input_span(chunk.rows, g.stride[0], g.dilation[0], g.R),
                input_span(chunk.cols, g.stride[1], g.dilation[1], g.S))

    def image(self, scratch: Scratch, name: str, shape: tuple[int, int, int, int],
              zero: bool = False) -> Array:
        """A logical (N, C, H, W) array of ``shape`` over buffer ``name``, stored NHWC when
        pixel-major, NCHW otherwise."""
        n, c, h, w = shape
        if self.pixel_major:
            return scratch.take(name, (n, h, w, c), zero).transpose(0, 3, 1, 2)
        return scratch.take(name, shape, zero)

    def zeros(self, shape: tuple[int, int, int, int]) -> Array:
        """A new zero-filled logical (N, C, H, W) array of ``shape``, stored NHWC when
        pixel-major, NCHW otherwise."""
        n, c, h, w = shape
        if self.pixel_major:
            return np.zeros((n, h, w, c), self.geom.dtype).transpose(0, 3, 1, 2)
        return np.zeros(shape, self.geom.dtype)

    def columns(self, chunk: Chunk, scratch: Scratch) -> tuple[Array, Array]:
        """The chunk's column buffer, as two views of buffer ``"columns"``.

        Returns
        -------
        taps : ndarray
            (images, G, C/groups, R, S, rows, cols): entry ``[n, g, c, r, s, i, j]`` is
            the padded input of channel ``g*C/groups + c`` that output pixel (i, j) of the
            chunk meets at kernel tap (r, s).
        matrix : ndarray
            (G, red, pixels): the groups' column matrices ``X_g``.
        """
        g = self.geom
        n, rows, cols = self.extent(chunk)
        pixels = n * rows * cols
        if self.pixel_major:
            buf = scratch.take("columns", (n, rows, cols, g.groups, g.R, g.S, g.Cg))
            taps = buf.transpose(0, 3, 6, 4, 5, 1, 2)
            matrix = buf.reshape(pixels, g.groups, -1).transpose(1, 2, 0)
        else:
            buf = scratch.take("columns", (g.groups, g.Cg, g.R, g.S, n, rows, cols))
            taps = buf.transpose(4, 0, 1, 2, 3, 5, 6)
            matrix = buf.reshape(g.groups, -1, pixels)
        return taps, matrix

    def product(self, chunk: Chunk, channels: int, scratch: Scratch,
                name: str = "product") -> tuple[Array, Array]:
        """A new per-pixel buffer of ``channels`` values for the chunk's pixels.

        Returns
        -------
        block : ndarray
            Logical (images, channels, rows, cols) view.
        matrix : ndarray
            (G, channels/G, pixels) view: the groups' matrices.
        """
        g = self.geom
        n, rows, cols = self.extent(chunk)
        if self.pixel_major:
            buf = scratch.take(name, (n, rows, cols, channels))
            return buf.transpose(0, 3, 1, 2), self._pixel_rows(buf.reshape(-1, channels))
        buf = scratch.take(name, (channels, n, rows, cols))
        return buf.transpose(1, 0, 2, 3), buf.reshape(g.groups, channels // g.groups, -1)

    def _pixel_rows(self, flat: Array) -> Array:
        """(G, channels/G, pixels) view of a (pixels, channels) matrix."""
        return flat.reshape(flat.shape[0], self.geom.groups, -1).transpose(1, 2, 0)

    def matrix_view(self, block: Array) -> Array | None:
        """The (G, channels/G, pixels) matrices of a logical (images, channels, rows, cols)
        ``block`` as a view BLAS reads and writes in place, or None if there is none."""
        channels = block.shape[1]
        if self.pixel_major:
            logical = block.transpose(0, 2, 3, 1)
            shape2 = (-1, channels)
        else:
            logical = block.transpose(1, 0, 2, 3)
            shape2 = (channels, -1)
        flat = _reshaped_view(logical, shape2)
        if flat is None or not _blasable(flat):
            return None
        if self.pixel_major:
            return self._pixel_rows(flat)
        return flat.reshape(self.geom.groups, channels // self.geom.groups, -1)

    def as_matrix(self, block: Array, chunk: Chunk, scratch: Scratch) -> Array:
        """:meth:`matrix_view` of ``block`` (the chunk's slice of an activation), or the
        same matrices copied into buffer ``"block"``."""
        view = self.matrix_view(block)
        if view is not None:
            return view
        copy, matrix = self.product(chunk, block.shape[1], scratch, name="block")
        copy[...] = block
        return matrix

    # -- weights ---------------------------------------------------------------------------

    def weight_matrix(self, w: Array) -> Array:
        """(G, K/groups, red): the groups' weight matrices, reduction in the columns' order
        (a view of a contiguous (K, C/groups, R, S) ``w`` when channel-major)."""
        g = self.geom
        if not self.pixel_major:
            return w.reshape(g.groups, g.Kg, -1)
        taps_last = w.reshape(g.groups, g.Kg, g.Cg, g.R, g.S).transpose(0, 1, 3, 4, 2)
        return np.ascontiguousarray(taps_last).reshape(g.groups, g.Kg, -1)

    def weight_from_matrix(self, matrix: Array) -> Array:
        """The contiguous (K, C/groups, R, S) weight of (G, K/groups, red) matrices."""
        g = self.geom
        if not self.pixel_major:
            return np.ascontiguousarray(matrix).reshape(g.K, g.Cg, g.R, g.S)
        taps_last = matrix.reshape(g.groups, g.Kg, g.R, g.S, g.Cg).transpose(0, 1, 4, 2, 3)
        return np.ascontiguousarray(taps_last).reshape(g.K, g.Cg, g.R, g.S)

    # -- im2col / col2im -------------------------------------------------------------------

    def input_window(self, x: Array, chunk: Chunk, scratch: Scratch) -> Array:
        """The zero-padded input the chunk reads, logical (images, C, rows, cols): a view of
        ``x`` when it lies inside the input, else a copy into buffer ``"window"`` with the
        padding as zeros."""
        g = self.geom
        (r0, r1), (c0, c1) = self.window_spans(chunk)
        r0, r1 = r0 - g.pads[0][0], r1 - g.pads[0][0]  # input coordinates
        c0, c1 = c0 - g.pads[1][0], c1 - g.pads[1][0]
        n0, n1 = chunk.images
        if r0 >= 0 and c0 >= 0 and r1 <= g.H and c1 <= g.W:
            return x[n0:n1, :, r0:r1, c0:c1]
        window = self.image(scratch, "window", (n1 - n0, g.C, r1 - r0, c1 - c0), zero=True)
        lo_r, hi_r, lo_c, hi_c = max(r0, 0), min(r1, g.H), max(c0, 0), min(c1, g.W)
        if lo_r < hi_r and lo_c < hi_c:
            window[:, :, lo_r - r0:hi_r - r0, lo_c - c0:hi_c - c0] = \
                x[n0:n1, :, lo_r:hi_r, lo_c:hi_c]
        return window

    def _grouped(self, image: Array) -> Array:
        """(images, G, C/groups, rows, cols) view of a logical (images, C, rows, cols)."""
        n, c, h, w = image.shape
        return image.reshape(n, self.geom.groups, c // self.geom.groups, h, w)  # a split: a view

    def fill_columns(self, taps: Array, window: Array) -> None:
        """im2col: copy every tap's strided view of ``window`` (:meth:`input_window`) into
        ``taps`` (:meth:`columns`), in one NumPy copy over a 7-D strided view."""
        g = self.geom
        src = self._grouped(window)
        (sh, sw), (dh, dw) = g.stride, g.dilation
        sn, sg, sc, s_row, s_col = src.strides
        rows, cols = taps.shape[5], taps.shape[6]
        # Tap (r, s) of output (i, j) reads window row r*dh + i*sh, column s*dw + j*sw:
        # all inside the window, which spans exactly what the chunk's outputs read.
        view = as_strided(src, shape=src.shape[:3] + (g.R, g.S, rows, cols),
                          strides=(sn, sg, sc, dh * s_row, dw * s_col, sh * s_row, sw * s_col),
                          writeable=False)
        np.copyto(taps, view)

    def scatter_columns(self, taps: Array, window: Array) -> None:
        """col2im: add every tap's columns onto its strided view of ``window`` (the chunk's
        part of the zero-padded input gradient, its rows or pixels' channels contiguous as
        the buffers here make them), taps in order (they overlap), in a compiled loop
        (``_kernels/_col2im.pyx.tp``: NumPy's add into a strided view copies it out and back
        per tap, a quarter of ResNet-50's stem data gradient)."""
        g = self.geom
        (sh, sw), (dh, dw) = g.stride, g.dilation
        n, _, _, _, _, rows, cols = taps.shape
        if self.pixel_major:
            # the buffer (n, rows, cols, G, R, S, Cg); the window's NHWC storage
            col2im_kernels.scatter_add_pixels(taps.transpose(0, 5, 6, 1, 3, 4, 2),
                                              window.transpose(0, 2, 3, 1), sh, sw, dh, dw, 1)
        else:
            # the buffer (G, Cg, R, S, n, rows, cols)
            col2im_kernels.scatter_add(
                taps.transpose(1, 2, 3, 4, 0, 5, 6).reshape(g.C, g.R, g.S, n, rows, cols),
                window, sh, sw, dh, dw, 1)
