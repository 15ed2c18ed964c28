"""Depthwise convolution (one input channel per group) on kernels of its own.

A depthwise layer does ``2 * R * S`` flops per output element: it is bound by memory
traffic, and the channel-blocked register tiles of the direct algorithm (built for long
channel reductions) spend their time packing and unpacking.  These kernels read the
activations in place instead, in the layout they come in:

* NCHW (or any other memory order, after one contiguous copy): a job is one image plane;
  taps add shifted input rows to a row accumulator, strided layers read phase-split rows.
* NHWC with channel multiplier 1: a job is one output row, every tap a multiply-add over the
  contiguous channels.

Every output element is summed by one thread in a fixed order, and the weight gradient is
split over the batch by shape only, so results do not depend on the thread count.

NaN and Inf: no padding is materialised, but by definition (and in PyTorch) an infinite
weight or gradient meeting the zero padding gives ``0 * Inf = NaN``.  A forward call with a
non-finite weight, and a weight gradient that comes out non-finite, are therefore computed
by the direct algorithm, which multiplies the padding like the definition does.
Kernels: ``cconv/_kernels/_depthwise.pyx.tp``.
"""

from __future__ import annotations

import numpy as np

from .._simd import depthwise as kernels
from .base import Algorithm
from .direct import NO_BIAS, DirectConvolution

# Backward-weight NHWC: split the batch until about this many (split, channel block) jobs
# exist; the split depends on the shape only (deterministic results).
TARGET_WEIGHT_JOBS = 32


def _memory_layout(array_nchw):
    """"NHWC" when a logical NCHW view is a C-contiguous NHWC array, "NCHW" when it is a
    C-contiguous NCHW one, else None (the kernels then get a contiguous copy)."""
    if array_nchw.flags.c_contiguous:
        return "NCHW"
    if array_nchw.transpose(0, 2, 3, 1).flags.c_contiguous:
        return "NHWC"
    return None


class DepthwiseConvolution(Algorithm):
    """Depthwise convolution of one geometry: ``groups == C`` (a one-channel input counts),
    any multiplier, stride, dilation and padding, NCHW or NHWC."""

    name = "depthwise"

    @classmethod
    def why_not(cls, geom, op):
        """None when every group has one input channel (depthwise layers, and one-channel
        inputs filtered by a bank of K filters), else the reason."""
        if geom.Cg != 1:
            return (f"the depthwise kernels need one input channel per group (groups == C), "
                    f"got {geom.Cg} channels per group")
        return None

    def __init__(self, geom):
        super().__init__(geom)
        g = geom
        self._args = (g.stride[0], g.stride[1], g.dilation[0], g.dilation[1], g.pads[0][0],
                      g.pads[1][0])

    # -- helpers ---------------------------------------------------------------------------

    def _nhwc(self, *arrays):
        """True when the channel-vector kernels apply: multiplier 1 and NHWC memory."""
        return self.geom.Kg == 1 and all(_memory_layout(a) == "NHWC" for a in arrays)

    def _tap_major_weight(self, w):
        """(K, 1, R, S) -> (R, S, K) contiguous, the NHWC kernels' weight."""
        return np.ascontiguousarray(w[:, 0].transpose(1, 2, 0))

    def _scratch(self, size, nthreads):
        return np.empty((nthreads, max(1, size)), self.geom.dtype)

    def _run_nchw(self, run, src, w, dst, bias, alpha, beta, scratch, nthreads):
        """An NCHW kernel from a contiguous copy of ``src`` (when it is not one) into ``dst``,
        or into a temporary when ``dst`` is not contiguous (epilogue applied on the copy)."""
        src = np.ascontiguousarray(src)
        if dst.flags.c_contiguous:
            run(src, w, dst, bias, *self._args, alpha, beta, scratch, nthreads)
            return
        tmp = np.empty(dst.shape, self.geom.dtype)
        run(src, w, tmp, bias, *self._args, 1.0, 0.0, scratch, nthreads)
        dst[...] = alpha * tmp if beta == 0 else alpha * tmp + beta * dst

    # -- passes ----------------------------------------------------------------------------

    def prepare_weight(self, w, nthreads):
        """Nothing worth precomputing: the kernels read the (K, 1, R, S) weight directly."""
        return None

    def forward(self, x, w, bias, y, alpha, beta, nthreads, prepared=None):
        """``y = alpha * (conv(x, w) + bias) + beta * y`` (logical NCHW views)."""
        g = self.geom
        if not np.isfinite(w).all():
            DirectConvolution.for_geometry(g).forward(x, w, bias, y, alpha, beta, nthreads)
            return
        b = NO_BIAS[g.dtype] if bias is None else bias
        if self._nhwc(x, y):
            kernels.forward_nhwc(x.transpose(0, 2, 3, 1), self._tap_major_weight(w),
                                 y.transpose(0, 2, 3, 1), b, *self._args, alpha, beta,
                                 self._scratch(g.C, nthreads), nthreads)
            return
        scratch = self._scratch(kernels.forward_scratch_size(g.H, g.W, g.OW, g.stride[1]),
                                nthreads)
        self._run_nchw(kernels.forward_nchw, x, w, y, b, alpha, beta, scratch, nthreads)

    def backward_data(self, dy, w, dx, alpha, beta, nthreads, bias=None):
        """``dx = alpha * (conv_backward_data(dy, w) + bias) + beta * dx`` (logical NCHW)."""
        g = self.geom
        b = NO_BIAS[g.dtype] if bias is None else bias
        if self._nhwc(dy, dx):
            kernels.backward_data_nhwc(dy.transpose(0, 2, 3, 1), self._tap_major_weight(w),
                                       dx.transpose(0, 2, 3, 1), b, *self._args, alpha, beta,
                                       self._scratch(g.C, nthreads), nthreads)
            return
        scratch = self._scratch(kernels.backward_data_scratch_size(g.W, g.stride[1]), nthreads)
        self._run_nchw(kernels.backward_data_nchw, dy, w, dx, b, alpha, beta, scratch,
                       nthreads)

    def _weight_splits(self):
        g = self.geom
        blocks = -(-g.C // kernels.CHANNEL_BLOCK)
        return max(1, min(g.N, -(-TARGET_WEIGHT_JOBS // blocks)))

    def backward_weight(self, dy, x, nthreads):
        """The weight gradient as a new contiguous (K, 1, R, S) array."""
        grad = self._backward_weight(dy, x, nthreads)
        if not np.isfinite(grad).all():
            return DirectConvolution.for_geometry(self.geom).backward_weight(dy, x, nthreads)
        return grad

    def _backward_weight(self, dy, x, nthreads):
        g = self.geom
        RS = g.R * g.S
        if self._nhwc(dy, x):
            block = kernels.CHANNEL_BLOCK
            blocks = -(-g.C // block)
            partial = np.empty((self._weight_splits(), blocks, RS, block), g.dtype)
            kernels.backward_weight_nhwc(dy.transpose(0, 2, 3, 1), x.transpose(0, 2, 3, 1),
                                         partial, *self._args, g.R, g.S, nthreads)
            total = partial.sum(axis=0)  # the splits in a fixed order
            grad = total.transpose(0, 2, 1).reshape(blocks * block, RS)[:g.C]
            return np.ascontiguousarray(grad, g.dtype).reshape(g.K, 1, g.R, g.S)
        grad = np.empty((g.K, RS), np.float64)
        scratch = self._scratch(kernels.forward_scratch_size(g.H, g.W, 0, g.stride[1]),
                                nthreads)
        kernels.backward_weight_nchw(np.ascontiguousarray(dy), np.ascontiguousarray(x), grad,
                                     *self._args, g.R, g.S, scratch, nthreads)
        return grad.astype(g.dtype).reshape(g.K, 1, g.R, g.S)

    def workspace_bytes(self, op, nthreads):
        """Scratch of one call in the geometry's own layout (contiguous operands)."""
        g = self.geom
        item = g.dtype.itemsize
        nhwc = g.layout == "NHWC" and g.Kg == 1
        if op == "forward":
            per_thread = g.C if nhwc else kernels.forward_scratch_size(g.H, g.W, g.OW,
                                                                       g.stride[1])
            return int(nthreads * max(1, per_thread) * item)
        if op == "backward_data":
            per_thread = g.C if nhwc else kernels.backward_data_scratch_size(g.W, g.stride[1])
            return int(nthreads * max(1, per_thread) * item + (g.K * g.R * g.S * item
                                                                if nhwc else 0))
        if nhwc:
            blocks = -(-g.C // kernels.CHANNEL_BLOCK)
            return int(self._weight_splits() * blocks * g.R * g.S * kernels.CHANNEL_BLOCK
                       * item)
        per_thread = kernels.forward_scratch_size(g.H, g.W, 0, g.stride[1])
        return int(nthreads * max(1, per_thread) * item + g.K * g.R * g.S * 8)
