"""The GEMM path: a 1x1, stride-1, unpadded convolution on NCHW data is a matrix product.

Per image and group, forward is ``Y[k, :] = sum_c W[k, c] * X[c, :]`` over the flattened
pixels and backward-data ``dX[c, :] = sum_k W[k, c] * dY[k, :]``.  Both run on the same
register-tile kernel as the direct algorithm (``_tiles.pyx.tp``), with the roles it was
built for exchanged: rows are output channels (weights broadcast), vector lanes are
``2*VL`` consecutive pixels read straight from the NCHW planes and written straight into
the NCHW result with whole-vector stores.  Nothing is packed except the weight (read in
place) and, when the pixel count is not a multiple of ``2*VL``, a zero-padded copy of the
planes.  ``auto`` never picks it (the direct kernel measured at least as fast on the 1x1
layers timed); ``algo="gemm"`` and ``"find"`` do.

Backward-weight of a 1x1 convolution, ``dW = dY X^T``, reduces over pixels: the direct
algorithm's backward-weight is exactly that GEMM, so this class delegates it.
"""

from __future__ import annotations

import numpy as np

from .._simd import tiles
from . import direct_schedule
from .base import Algorithm
from .direct import DirectConvolution


def _planes(array_nchw, npix_pad, dtype):
    """A C-contiguous (N, C, npix_pad) array of the image planes: ``array_nchw`` itself when
    its planes already are, else a (zero-padded) copy."""
    n, c, h, w = array_nchw.shape
    if npix_pad == h * w and array_nchw.flags.c_contiguous and array_nchw.dtype == dtype:
        return array_nchw.reshape(n, c, h * w)
    planes = np.zeros((n, c, npix_pad), dtype)
    planes[:, :, :h * w] = array_nchw.reshape(n, c, h * w)
    return planes


class GemmConvolution(Algorithm):
    """1x1 stride-1 unpadded convolution as a blocked GEMM over NCHW planes."""

    name = "gemm"

    @classmethod
    def why_not(cls, geom, op):
        """None if the GEMM path can run ``op`` on ``geom``, else the reason."""
        if (geom.R, geom.S) != (1, 1):
            return f"the GEMM path needs a 1x1 kernel, got {geom.R}x{geom.S}"
        if tuple(geom.stride) != (1, 1):
            return f"the GEMM path needs stride 1, got stride {tuple(geom.stride)}"
        if geom.pads != ((0, 0), (0, 0)):
            return f"the GEMM path needs zero padding, got {geom.pads}"
        return None

    def __init__(self, geom):
        super().__init__(geom)
        self.lanes = 2 * tiles.VECTOR_LENGTH[geom.dtype.name]
        self.npix = geom.OH * geom.OW
        self.npix_pad = -(-self.npix // self.lanes) * self.lanes
        self._run = getattr(tiles, f"run_jobs_{geom.dtype.name}")
        self._jobs = {}

    def _schedule(self, op):
        """Jobs over (image, group, pixel block, row block); pixel blocks innermost-but-one so
        consecutive jobs share the same input columns."""
        if op in self._jobs:
            return self._jobs[op]
        g, T, P = self.geom, tiles.TILE_ROWS, self.npix_pad
        if op == "forward":  # rows: output channels k; reduction: input channels c
            rows_n, red_n, in_ch, out_ch = g.Kg, g.Cg, g.C, g.K
            row_offsets = np.arange(g.K) * g.Cg               # W[k, :] start
            red_offsets = np.arange(g.Cg)                      # + c
        else:  # backward-data: rows: input channels c; reduction: output channels k
            rows_n, red_n, in_ch, out_ch = g.Cg, g.Kg, g.K, g.C
            row_offsets = (np.arange(g.C) // g.Cg) * g.Kg * g.Cg + np.arange(g.C) % g.Cg
            red_offsets = np.arange(g.Kg) * g.Cg                # W[g*Kg + k, c]
        table = direct_schedule.OffsetTable()
        red = table.add(red_offsets)
        rows = table.add(row_offsets)
        outs = table.add(np.arange(out_ch) * P)
        starts, nrows = direct_schedule.row_tiles(rows_n, T)
        n = np.arange(g.N)[:, None, None, None]
        grp = np.arange(g.groups)[None, :, None, None]
        pix = np.arange(0, P, self.lanes)[None, None, :, None]
        first_row = grp * rows_n + starts  # global channel of the job's first row
        jobs = direct_schedule.job_table(
            a=0, b=(n * in_ch + grp * red_n) * P + pix, b_stride=P, red=red, length=red_n,
            rows=rows + first_row, outs=outs + first_row, nrows=nrows, out=n * out_ch * P + pix,
            ncols=self.lanes)
        self._jobs[op] = (jobs, table.array())
        return self._jobs[op]

    def workspace_bytes(self, op, nthreads):
        """Bytes allocated besides the result: padded plane copies when pixels need padding."""
        g = self.geom
        if op == "backward_weight":
            return DirectConvolution.for_geometry(g).workspace_bytes(op, nthreads)
        if self.npix_pad == self.npix:
            return 0
        return int((g.C + g.K) * g.N * self.npix_pad * g.dtype.itemsize)

    def _gemm(self, op, w, src, dst, bias, alpha, beta, nthreads):
        g = self.geom
        jobs, table = self._schedule(op)
        planes = _planes(src, self.npix_pad, g.dtype)
        # In place when the result's planes are the kernel's output rows; a bias (added per
        # row, which the kernel's epilogue adds per column) goes through a temporary.
        in_place = (self.npix_pad == self.npix and dst.flags.c_contiguous
                    and dst.dtype == g.dtype and bias is None)
        if in_place:
            self._run(tiles.KINDS["dense"], w.reshape(-1), planes.reshape(-1), dst.reshape(-1),
                      jobs, table, nthreads, 1, None, alpha, beta)
            return
        out = np.empty(dst.shape[0] * dst.shape[1] * self.npix_pad, g.dtype)
        self._run(tiles.KINDS["dense"], w.reshape(-1), planes.reshape(-1), out, jobs, table,
                  nthreads)
        result = out.reshape(dst.shape[0], dst.shape[1], self.npix_pad)[:, :, :self.npix]
        result = result.reshape(dst.shape)
        if bias is not None:
            result = result + bias[None, :, None, None]
        if beta == 0:
            dst[...] = alpha * result
        else:
            dst[...] = alpha * result + beta * dst

    def prepare_weight(self, w, nthreads):
        """Nothing to precompute: the GEMM reads the weight as it is."""
        return None

    def forward(self, x, w, bias, y, alpha, beta, nthreads, prepared=None):
        """``y = alpha * (conv(x, w) + bias) + beta * y`` (logical NCHW views); ``prepared``
        is always None (:meth:`prepare_weight` has nothing to precompute)."""
        self._gemm("forward", w, x, y, bias, alpha, beta, nthreads)

    def backward_data(self, dy, w, dx, alpha, beta, nthreads, bias=None):
        """``dx = alpha * (conv_backward_data(dy, w) + bias) + beta * dx``."""
        self._gemm("backward_data", w, dy, dx, bias, alpha, beta, nthreads)

    def backward_weight(self, dy, x, nthreads):
        """The weight gradient: the direct algorithm's pixel-reduction GEMM."""
        return DirectConvolution.for_geometry(self.geom).backward_weight(dy, x, nthreads)
