"""The GEMM algorithm: an unpadded 1x1 convolution is a matrix product, done by NumPy's BLAS.

With ``X`` the input's pixels (a stride > 1 first takes every stride-th pixel) and ``W`` the
(K, C) weight of a group:

* NCHW memory: per image and group ``Y[k, :] = W @ X[c, :]`` over the flattened pixels, one
  batched ``numpy.matmul`` reading and writing the planes in place;
* NHWC memory: the whole batch at once, ``Y(NHW, K) = X(NHW, C) @ W^T``, again in place.

Backward-data is ``W^T @ dY`` (scattered back to the stride-th pixels), backward-weight
``dY @ X^T`` summed in a fixed order over pieces of the batch (per image, or per 4096 NHWC
pixels), each a single-threaded BLAS product, the pieces spread over Python threads: a
threaded BLAS splits a long reduction differently for another thread count, and the result
must not depend on it.  BLAS measured faster than the tile kernels on these shapes (NumPy's
OpenBLAS on an AMD EPYC Zen 4: 77 GFLOP/s on 1 thread and 138 on 2 for 8x64x56x56 -> 256,
where the direct kernel ran 34 and 52 and PyTorch 67 and 83).
"""

from __future__ import annotations

import numpy as np

from .. import _blas
from .base import Algorithm, memory_layout

# Pixels per piece of the NHWC weight-gradient reduction (at most 64 pieces): each piece is
# one single-threaded BLAS product; the pieces are fixed by the shape and added in order.
WEIGHT_CHUNK_PIXELS = 4096


def _epilogue(result, dst, bias, alpha, beta):
    """``dst = alpha * (result + bias) + beta * dst`` (``beta == 0`` never reads ``dst``);
    ``result`` and ``dst`` in the same logical order, ``bias`` along axis 1."""
    if bias is not None:
        result += bias.reshape((1, -1) + (1,) * (result.ndim - 2))
    if alpha != 1:
        result *= alpha
    if beta == 0:
        dst[...] = result
    else:
        dst *= beta
        dst += result


class GemmConvolution(Algorithm):
    """Unpadded 1x1 convolution (any stride, groups, layout) as BLAS matrix products."""

    name = "gemm"

    @classmethod
    def why_not(cls, geom, op):
        """None if the GEMM algorithm can run ``op`` on ``geom``, else the reason."""
        if (geom.R, geom.S) != (1, 1):
            return f"the GEMM algorithm needs a 1x1 kernel, got {geom.R}x{geom.S}"
        if geom.pads != ((0, 0), (0, 0)):
            return f"the GEMM algorithm needs zero padding, got {geom.pads}"
        return None

    def __init__(self, geom):
        super().__init__(geom)
        self._strided = tuple(geom.stride) != (1, 1)

    def _pixels(self, x):
        """The input pixels the 1x1 kernel reads (every stride-th one), as a logical NCHW
        array whose memory is contiguous in the order of ``x``'s."""
        if not self._strided:
            return x
        sh, sw = self.geom.stride
        sub = x[:, :, ::sh, ::sw]
        if memory_layout(x) == "NHWC":
            return np.ascontiguousarray(sub.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
        return np.ascontiguousarray(sub)

    def _weight(self, w):
        g = self.geom
        return w.reshape(g.groups, g.Kg, g.Cg)

    def _product(self, src, w, transpose, nthreads):
        """``W @ src`` (``W^T @ src`` when ``transpose``) per group and pixel, for a logical
        NCHW ``src`` of contiguous NCHW or NHWC memory; a new logical NCHW array."""
        g = self.geom
        wg = self._weight(w)
        if transpose:
            wg = wg.transpose(0, 2, 1)
        rows_in, rows_out = wg.shape[2], wg.shape[1]
        n, _, h, wd = src.shape
        with _blas.threads(nthreads):
            if memory_layout(src) == "NHWC":
                flat = src.transpose(0, 2, 3, 1).reshape(n * h * wd, g.groups * rows_in)
                out = np.empty((n * h * wd, g.groups * rows_out), g.dtype)
                for grp in range(g.groups):  # (P, in) @ (in, out), BLAS on strided views
                    np.matmul(flat[:, grp * rows_in:(grp + 1) * rows_in], wg[grp].T,
                              out=out[:, grp * rows_out:(grp + 1) * rows_out])
                return out.reshape(n, h, wd, -1).transpose(0, 3, 1, 2)
            planes = np.ascontiguousarray(src).reshape(n, g.groups, rows_in, h * wd)
            out = np.matmul(wg[None], planes)  # (N, G, out, P)
            return out.reshape(n, g.groups * rows_out, h, wd)

    def prepare_weight(self, w, nthreads):
        """Nothing to precompute: BLAS reads the weight as it is."""
        return None

    def forward(self, x, w, bias, y, alpha, beta, nthreads, prepared=None):
        """``y = alpha * (conv(x, w) + bias) + beta * y`` (logical NCHW views)."""
        result = self._product(self._pixels(x), w, False, nthreads)
        _epilogue(result, y, bias, alpha, beta)

    def backward_data(self, dy, w, dx, alpha, beta, nthreads, bias=None):
        """``dx = alpha * (conv_backward_data(dy, w) + bias) + beta * dx``; with a stride
        only every stride-th pixel receives a product (the others get the bias alone)."""
        result = self._product(dy, w, True, nthreads)
        if not self._strided:
            _epilogue(result, dx, bias, alpha, beta)
            return
        sh, sw = self.geom.stride
        full = np.zeros(dx.shape, dx.dtype)
        full[:, :, ::sh, ::sw] = result
        _epilogue(full, dx, bias, alpha, beta)

    def backward_weight(self, dy, x, nthreads):
        """The weight gradient ``sum_n dY_n X_n^T`` as a new (K, C/groups, 1, 1) array."""
        g = self.geom
        xs = self._pixels(x)
        n, _, h, wd = dy.shape
        if memory_layout(dy) == "NHWC" and memory_layout(xs) == "NHWC":
            a = dy.transpose(0, 2, 3, 1).reshape(-1, g.K)
            b = xs.transpose(0, 2, 3, 1).reshape(-1, g.C)
            step = max(WEIGHT_CHUNK_PIXELS, -(-a.shape[0] // 64))
            pieces = [slice(i, i + step) for i in range(0, a.shape[0], step)]

            def product(rows):
                grad = np.empty((g.groups, g.Kg, g.Cg), g.dtype)
                for grp in range(g.groups):
                    np.matmul(a[rows, grp * g.Kg:(grp + 1) * g.Kg].T,
                              b[rows, grp * g.Cg:(grp + 1) * g.Cg], out=grad[grp])
                return grad
        else:
            a = np.ascontiguousarray(dy).reshape(n, g.groups, g.Kg, h * wd)
            b = np.ascontiguousarray(xs).reshape(n, g.groups, g.Cg, h * wd)
            pieces = range(n)

            def product(image):
                return np.matmul(a[image], b[image].transpose(0, 2, 1))  # (G, Kg, Cg)
        grad = _blas.ordered_sum(pieces, product, nthreads)
        return np.ascontiguousarray(grad, g.dtype).reshape(g.K, g.Cg, 1, 1)

    def workspace_bytes(self, op, nthreads):
        """Bytes besides the result: the product (then scaled into the result), the strided
        pixels, and per-image weight-gradient products."""
        g = self.geom
        item = g.dtype.itemsize
        sub = g.N * g.C * g.OH * g.OW if self._strided else 0
        if op == "forward":
            return int((g.N * g.K * g.OH * g.OW + sub) * item)
        if op == "backward_data":
            full = g.N * g.C * g.H * g.W if self._strided else 0
            return int((g.N * g.C * g.OH * g.OW + full) * item)
        return int((sub + g.N * g.K * g.Cg) * item)
