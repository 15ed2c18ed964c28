# Generated from _depthwise.pyx.tp by setup.py: edit the template, not this file.
"""Depthwise convolution kernels (one input channel per group) for SIMD level avx2.

Depthwise layers do 2 * R * S flops per output element and move every activation through
memory once, so they are bound by memory bandwidth, not by multiply-adds: these kernels read
each input plane (NCHW) or pixel row (NHWC) once, keep the working set of one plane or row
in L1/L2, and vectorise the loop that is contiguous in memory.  They are plain loops that
gcc vectorises for the level's vector width (built once per SIMD level like every kernel).

NCHW ("row-vector"): a job is one output plane; per output row, each tap adds
``w[r, s] * input_row[o * sw + offset]`` to a row accumulator over the output pixels ``o``
where the input pixel exists (no padding is materialised).  For stride ``sw > 1`` the
input plane is first split into ``sw`` phase planes, ``phase[p][j] = x[j * sw + p]``, so
every tap reads a contiguous run: ``x[o * sw + off] = phase[off mod sw][o + off div sw]``.
Backward-data scatters the same way into phase-split accumulators, backward-weight takes
dot products of gradient rows with input rows (16 partial sums in a fixed order).

NHWC ("channel-vector"): a job is one output row; per output pixel, each tap adds
``w[r, s, :] * x[ih, iw, :]`` over the contiguous channels.  Backward-weight jobs own a
block of 16 channels and a fixed slice of the batch; their partial sums are added in order
by the caller, so results do not depend on the thread count.

Names: ``N`` batch, ``C`` input channels, ``K = C * mult`` output channels, ``H, W`` input
and ``OH, OW`` output size, ``R, S`` kernel size, ``sh, sw`` stride, ``dh, dw`` dilation,
``pt, pl`` top / left padding, ``off`` a tap's column offset ``s * dw - pl``.
"""

from cython.parallel cimport prange, threadid

ctypedef fused real:
    float
    double

cdef enum:
    # Channels per NHWC backward-weight job, and lanes of the partial dot products: one
    # AVX-512 float vector, two AVX2 ones.
    CBLOCK = 16

CHANNEL_BLOCK = CBLOCK


cdef inline Py_ssize_t _floordiv(Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    # The module is compiled with C division (cdivision): round toward -inf by hand.
    if a >= 0:
        return a // b
    return -((-a + b - 1) // b)


cdef inline Py_ssize_t _phase_len(Py_ssize_t size, Py_ssize_t stride, Py_ssize_t p) noexcept nogil:
    """Elements j with j * stride + p < size."""
    return (size - p + stride - 1) // stride if p < size else 0


cdef void _split_phases(const real *src, real *dst, Py_ssize_t rows, Py_ssize_t W,
                        Py_ssize_t sw) noexcept nogil:
    """``dst[row][p][j] = src[row][j * sw + p]``; each phase row padded to ``ceil(W/sw)``."""
    cdef Py_ssize_t row, p, j, n, width = (W + sw - 1) // sw
    cdef const real *s
    cdef real *d
    for row in range(rows):
        for p in range(sw):
            s = src + row * W + p
            d = dst + (row * sw + p) * width
            n = _phase_len(W, sw, p)
            for j in range(n):
                d[j] = s[j * sw]


cdef inline void _axpy_range(real *acc, const real *src, real wv, Py_ssize_t lo,
                             Py_ssize_t hi) noexcept nogil:
    cdef Py_ssize_t o
    for o in range(lo, hi):
        acc[o] = acc[o] + wv * src[o]


cdef inline void _store_row(real *dst, const real *acc, Py_ssize_t n, real bias, real alpha,
                            real beta) noexcept nogil:
    cdef Py_ssize_t o
    if beta == 0:
        for o in range(n):
            dst[o] = alpha * (acc[o] + bias)
    else:
        for o in range(n):
            dst[o] = alpha * (acc[o] + bias) + beta * dst[o]


cdef void _forward_plane(const real *x, const real *w, real *y, real *acc, real *phases,
                         Py_ssize_t H, Py_ssize_t W, Py_ssize_t OH, Py_ssize_t OW,
                         Py_ssize_t R, Py_ssize_t S, Py_ssize_t sh, Py_ssize_t sw,
                         Py_ssize_t dh, Py_ssize_t dw, Py_ssize_t pt, Py_ssize_t pl,
                         real bias, real alpha, real beta) noexcept nogil:
    cdef Py_ssize_t oh, r, s, ih, off, p, q, lo, hi, o, width = (W + sw - 1) // sw
    cdef const real *row
    if sw > 1:
        _split_phases(x, phases, H, W, sw)
    for oh in range(OH):
        for o in range(OW):
            acc[o] = 0
        for r in range(R):
            ih = oh * sh + r * dh - pt
            if ih < 0 or ih >= H:
                continue
            for s in range(S):
                off = s * dw - pl
                p = off - _floordiv(off, sw) * sw
                q = _floordiv(off, sw)
                if sw > 1:
                    row = phases + (ih * sw + p) * width
                    hi = _phase_len(W, sw, p)
                else:
                    row = x + ih * W
                    hi = W
                # outputs o with 0 <= o + q < hi
                lo = max(0, -q)
                hi = min(OW, hi - q)
                if lo < hi:
                    _axpy_range(acc, row + q, w[r * S + s], lo, hi)
        _store_row(y + oh * OW, acc, OW, bias, alpha, beta)


def forward_nchw(const real[:, :, :, ::1] x, const real[:, :, :, ::1] w, real[:, :, :, ::1] y,
                 const real[::1] bias, Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t dh,
                 Py_ssize_t dw, Py_ssize_t pt, Py_ssize_t pl, double alpha, double beta,
                 real[:, ::1] scratch, int num_threads):
    """Depthwise forward on contiguous NCHW: ``y = alpha * (conv(x, w) + bias) + beta * y``.

    Parameters
    ----------
    x : (N, C, H, W) contiguous
    w : (K, 1, R, S) contiguous, ``K = C * mult``: output channel ``k`` reads input ``k // mult``
    y : (N, K, OH, OW) contiguous
    bias : (K,) or empty for none
    sh, sw, dh, dw, pt, pl : stride, dilation, top / left padding
    alpha, beta : epilogue scaling; ``beta == 0`` never reads ``y``
    scratch : (num_threads, forward_scratch_size(...)) per-thread rows
    num_threads : int
    """
    cdef Py_ssize_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3]
    cdef Py_ssize_t K = w.shape[0], R = w.shape[2], S = w.shape[3]
    cdef Py_ssize_t OH = y.shape[2], OW = y.shape[3]
    cdef Py_ssize_t mult = K // C, plane, n, k, t
    cdef real a = alpha, b = beta
    _check(N, C, K, y.shape[0], y.shape[1], w.shape[1], bias.shape[0])
    if scratch.shape[0] < num_threads or scratch.shape[1] < forward_scratch_size(H, W, OW, sw):
        raise ValueError("scratch too small")
    if N == 0:
        return
    with nogil:
        for plane in prange(N * K, num_threads=num_threads, schedule="static"):
            n = plane // K
            k = plane % K
            t = threadid()
            _forward_plane(&x[n, k // mult, 0, 0], &w[k, 0, 0, 0], &y[n, k, 0, 0],
                           &scratch[t, 0], &scratch[t, OW], H, W, OH, OW, R, S, sh, sw, dh, dw,
                           pt, pl, bias[k] if bias.shape[0] else 0, a, b)


def forward_scratch_size(Py_ssize_t H, Py_ssize_t W, Py_ssize_t OW, Py_ssize_t sw):
    """Elements of per-thread scratch :func:`forward_nchw` needs."""
    return OW + (H * sw * ((W + sw - 1) // sw) if sw > 1 else 0)


cdef void _backward_data_plane(const real *dy, const real *w, real *dx, real *acc,
                               Py_ssize_t mult, Py_ssize_t dy_plane, Py_ssize_t H, Py_ssize_t W,
                               Py_ssize_t OH, Py_ssize_t OW, Py_ssize_t R, Py_ssize_t S,
                               Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t dh, Py_ssize_t dw,
                               Py_ssize_t pt, Py_ssize_t pl, real bias, real alpha,
                               real beta) noexcept nogil:
    """One input-gradient plane: the sum over its ``mult`` output channels of the scatter
    of ``dy * w`` (phase-split rows for ``sw > 1``, so every tap writes a contiguous run)."""
    cdef Py_ssize_t ih, r, s, t, oh, off, p, q, lo, hi, j, m, width = (W + sw - 1) // sw
    cdef real *accp
    cdef const real *src
    for ih in range(H):
        for j in range(sw * width):
            acc[j] = 0
        for m in range(mult):
            for r in range(R):
                t = ih + pt - r * dh
                if t < 0 or t - _floordiv(t, sh) * sh != 0:
                    continue
                oh = t // sh
                if oh >= OH:
                    continue
                src = dy + m * dy_plane + oh * OW
                for s in range(S):
                    off = s * dw - pl
                    p = off - _floordiv(off, sw) * sw
                    q = _floordiv(off, sw)
                    accp = acc + p * width
                    # dx column (o + q) * sw + p  <-  dy column o
                    lo = max(0, -q)
                    hi = min(OW, _phase_len(W, sw, p) - q)
                    if lo < hi:
                        _axpy_range(accp + q, src, w[(m * R + r) * S + s], lo, hi)
        if sw == 1:
            _store_row(dx + ih * W, acc, W, bias, alpha, beta)
        else:
            for j in range(W):
                acc[sw * width + j] = acc[(j % sw) * width + j // sw]
            _store_row(dx + ih * W, acc + sw * width, W, bias, alpha, beta)


def backward_data_nchw(const real[:, :, :, ::1] dy, const real[:, :, :, ::1] w,
                       real[:, :, :, ::1] dx, const real[::1] bias, Py_ssize_t sh,
                       Py_ssize_t sw, Py_ssize_t dh, Py_ssize_t dw, Py_ssize_t pt, Py_ssize_t pl,
                       double alpha, double beta, real[:, ::1] scratch, int num_threads):
    """Depthwise backward-data on contiguous NCHW: ``dx = alpha * (dx_conv + bias) + beta * dx``.

    ``dy`` (N, K, OH, OW), ``w`` (K, 1, R, S), ``dx`` (N, C, H, W); ``bias`` (C,) or empty
    (transposed convolution's bias); ``scratch`` (num_threads, backward_data_scratch_size).
    """
    cdef Py_ssize_t N = dx.shape[0], C = dx.shape[1], H = dx.shape[2], W = dx.shape[3]
    cdef Py_ssize_t K = w.shape[0], R = w.shape[2], S = w.shape[3]
    cdef Py_ssize_t OH = dy.shape[2], OW = dy.shape[3]
    cdef Py_ssize_t mult = K // C, plane, n, c, t
    cdef real a = alpha, b = beta
    _check(N, C, K, dy.shape[0], dy.shape[1], w.shape[1], 0)
    if bias.shape[0] not in (0, C):
        raise ValueError(f"bias must have {C} elements or none, got {bias.shape[0]}")
    if scratch.shape[0] < num_threads or scratch.shape[1] < backward_data_scratch_size(W, sw):
        raise ValueError("scratch too small")
    if N == 0:
        return
    with nogil:
        for plane in prange(N * C, num_threads=num_threads, schedule="static"):
            n = plane // C
            c = plane % C
            t = threadid()
            _backward_data_plane(&dy[n, c * mult, 0, 0], &w[c * mult, 0, 0, 0], &dx[n, c, 0, 0],
                                 &scratch[t, 0], mult, OH * OW, H, W, OH, OW, R, S, sh, sw, dh,
                                 dw, pt, pl, bias[c] if bias.shape[0] else 0, a, b)


def backward_data_scratch_size(Py_ssize_t W, Py_ssize_t sw):
    """Elements of per-thread scratch :func:`backward_data_nchw` needs."""
    return sw * ((W + sw - 1) // sw) + (W if sw > 1 else 0)


cdef double _dot(const real *a, const real *b, Py_ssize_t n) noexcept nogil:
    # 16 partial sums in a fixed order: vectorises, and the result depends only on n.
    cdef real lanes[CBLOCK]
    cdef Py_ssize_t i, j, l, full = n - n % CBLOCK
    cdef double total = 0
    for l in range(CBLOCK):
        lanes[l] = 0
    for i in range(full // CBLOCK):
        j = i * CBLOCK
        for l in range(CBLOCK):
            lanes[l] = lanes[l] + a[j + l] * b[j + l]
    for j in range(full, n):
        total += a[j] * b[j]
    for l in range(CBLOCK):
        total += lanes[l]
    return total


cdef void _backward_weight_channel(const real *x, const real *dy, double *grad, real *phases,
                                   Py_ssize_t N, Py_ssize_t x_image, Py_ssize_t dy_image,
                                   Py_ssize_t H, Py_ssize_t W, Py_ssize_t OH, Py_ssize_t OW,
                                   Py_ssize_t R, Py_ssize_t S, Py_ssize_t sh, Py_ssize_t sw,
                                   Py_ssize_t dh, Py_ssize_t dw, Py_ssize_t pt,
                                   Py_ssize_t pl) noexcept nogil:
    cdef Py_ssize_t n, oh, r, s, ih, off, p, q, lo, hi, width = (W + sw - 1) // sw
    cdef const real *row
    cdef const real *g
    for n in range(N):
        if sw > 1:
            _split_phases(x + n * x_image, phases, H, W, sw)
        for oh in range(OH):
            g = dy + n * dy_image + oh * OW
            for r in range(R):
                ih = oh * sh + r * dh - pt
                if ih < 0 or ih >= H:
                    continue
                for s in range(S):
                    off = s * dw - pl
                    p = off - _floordiv(off, sw) * sw
                    q = _floordiv(off, sw)
                    if sw > 1:
                        row = phases + (ih * sw + p) * width
                        hi = _phase_len(W, sw, p)
                    else:
                        row = x + n * x_image + ih * W
                        hi = W
                    lo = max(0, -q)
                    hi = min(OW, hi - q)
                    if lo < hi:
                        grad[r * S + s] += _dot(g + lo, row + q + lo, hi - lo)


def backward_weight_nchw(const real[:, :, :, ::1] dy, const real[:, :, :, ::1] x,
                         double[:, ::1] grad, Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t dh,
                         Py_ssize_t dw, Py_ssize_t pt, Py_ssize_t pl, Py_ssize_t R,
                         Py_ssize_t S, real[:, ::1] scratch, int num_threads):
    """Depthwise weight gradient on contiguous NCHW into ``grad`` (K, R*S), float64 sums.

    One output channel per job, the batch walked in order inside it: every element is
    summed in the same order at any thread count.
    """
    cdef Py_ssize_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3]
    cdef Py_ssize_t K = dy.shape[1], OH = dy.shape[2], OW = dy.shape[3]
    cdef Py_ssize_t mult = K // C, k, t
    _check(N, C, K, dy.shape[0], K, 1, 0)
    if grad.shape[0] != K or grad.shape[1] != R * S:
        raise ValueError(f"grad must be ({K}, {R * S}), got ({grad.shape[0]}, {grad.shape[1]})")
    if scratch.shape[0] < num_threads or scratch.shape[1] < forward_scratch_size(H, W, 0, sw):
        raise ValueError("scratch too small")
    grad[:, :] = 0
    if N == 0:
        return
    with nogil:
        for k in prange(K, num_threads=num_threads, schedule="dynamic"):
            t = threadid()
            _backward_weight_channel(&x[0, k // mult, 0, 0], &dy[0, k, 0, 0], &grad[k, 0],
                                     &scratch[t, 0], N, C * H * W, K * OH * OW, H, W, OH, OW,
                                     R, S, sh, sw, dh, dw, pt, pl)


# -- NHWC (channel-vector) --------------------------------------------------------------------

cdef inline void _store_pixel(real *dst, const real *acc, const real *bias, Py_ssize_t C,
                              real alpha, real beta) noexcept nogil:
    cdef Py_ssize_t c
    if bias == NULL:
        if beta == 0:
            for c in range(C):
                dst[c] = alpha * acc[c]
        else:
            for c in range(C):
                dst[c] = alpha * acc[c] + beta * dst[c]
    elif beta == 0:
        for c in range(C):
            dst[c] = alpha * (acc[c] + bias[c])
    else:
        for c in range(C):
            dst[c] = alpha * (acc[c] + bias[c]) + beta * dst[c]


cdef inline void _fma_channels(real *acc, const real *a, const real *b,
                               Py_ssize_t C) noexcept nogil:
    cdef Py_ssize_t c
    for c in range(C):
        acc[c] = acc[c] + a[c] * b[c]


cdef void _forward_row_nhwc(const real *x, const real *wt, real *y, real *acc, const real *bias,
                            Py_ssize_t oh, Py_ssize_t H, Py_ssize_t W, Py_ssize_t C,
                            Py_ssize_t OW, Py_ssize_t R, Py_ssize_t S, Py_ssize_t sh,
                            Py_ssize_t sw, Py_ssize_t dh, Py_ssize_t dw, Py_ssize_t pt,
                            Py_ssize_t pl, real alpha, real beta) noexcept nogil:
    cdef Py_ssize_t ow, r, s, ih, iw, c
    for ow in range(OW):
        for c in range(C):
            acc[c] = 0
        for r in range(R):
            ih = oh * sh + r * dh - pt
            if ih < 0 or ih >= H:
                continue
            for s in range(S):
                iw = ow * sw + s * dw - pl
                if iw < 0 or iw >= W:
                    continue
                _fma_channels(acc, wt + (r * S + s) * C, x + (ih * W + iw) * C, C)
        _store_pixel(y + ow * C, acc, bias, C, alpha, beta)


def forward_nhwc(const real[:, :, :, ::1] x, const real[:, :, ::1] wt, real[:, :, :, ::1] y,
                 const real[::1] bias, Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t dh,
                 Py_ssize_t dw, Py_ssize_t pt, Py_ssize_t pl, double alpha, double beta,
                 real[:, ::1] scratch, int num_threads):
    """Depthwise forward (multiplier 1) on contiguous NHWC: ``x`` (N, H, W, C), ``wt``
    (R, S, C), ``y`` (N, OH, OW, C); ``scratch`` (num_threads, C)."""
    cdef Py_ssize_t N = x.shape[0], H = x.shape[1], W = x.shape[2], C = x.shape[3]
    cdef Py_ssize_t R = wt.shape[0], S = wt.shape[1], OH = y.shape[1], OW = y.shape[2]
    cdef Py_ssize_t row, n, oh, t
    cdef real a = alpha, b = beta
    cdef const real *bias_ptr = &bias[0] if bias.shape[0] else NULL
    _check(N, C, C, y.shape[0], y.shape[3], 1, bias.shape[0])
    if wt.shape[2] != C:
        raise ValueError(f"wt must have {C} channels, got {wt.shape[2]}")
    if scratch.shape[0] < num_threads or scratch.shape[1] < C:
        raise ValueError("scratch too small")
    if N == 0:
        return
    with nogil:
        for row in prange(N * OH, num_threads=num_threads, schedule="static"):
            n = row // OH
            oh = row % OH
            t = threadid()
            _forward_row_nhwc(&x[n, 0, 0, 0], &wt[0, 0, 0], &y[n, oh, 0, 0], &scratch[t, 0],
                              bias_ptr, oh, H, W, C, OW, R, S, sh, sw, dh, dw, pt, pl, a, b)


cdef void _backward_data_row_nhwc(const real *dy, const real *wt, real *dx, real *acc,
                                  const real *bias, Py_ssize_t ih, Py_ssize_t W, Py_ssize_t C,
                                  Py_ssize_t OH, Py_ssize_t OW, Py_ssize_t R, Py_ssize_t S,
                                  Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t dh, Py_ssize_t dw,
                                  Py_ssize_t pt, Py_ssize_t pl, real alpha,
                                  real beta) noexcept nogil:
    cdef Py_ssize_t iw, r, s, t, u, oh, ow, c
    for iw in range(W):
        for c in range(C):
            acc[c] = 0
        for r in range(R):
            t = ih + pt - r * dh
            if t < 0 or t - _floordiv(t, sh) * sh != 0:
                continue
            oh = t // sh
            if oh >= OH:
                continue
            for s in range(S):
                u = iw + pl - s * dw
                if u < 0 or u - _floordiv(u, sw) * sw != 0:
                    continue
                ow = u // sw
                if ow >= OW:
                    continue
                _fma_channels(acc, wt + (r * S + s) * C, dy + (oh * OW + ow) * C, C)
        _store_pixel(dx + iw * C, acc, bias, C, alpha, beta)


def backward_data_nhwc(const real[:, :, :, ::1] dy, const real[:, :, ::1] wt,
                       real[:, :, :, ::1] dx, const real[::1] bias, Py_ssize_t sh,
                       Py_ssize_t sw, Py_ssize_t dh, Py_ssize_t dw, Py_ssize_t pt, Py_ssize_t pl,
                       double alpha, double beta, real[:, ::1] scratch, int num_threads):
    """Depthwise backward-data (multiplier 1) on contiguous NHWC: ``dy`` (N, OH, OW, C),
    ``wt`` (R, S, C), ``dx`` (N, H, W, C); ``scratch`` (num_threads, C)."""
    cdef Py_ssize_t N = dx.shape[0], H = dx.shape[1], W = dx.shape[2], C = dx.shape[3]
    cdef Py_ssize_t R = wt.shape[0], S = wt.shape[1], OH = dy.shape[1], OW = dy.shape[2]
    cdef Py_ssize_t row, n, ih, t
    cdef real a = alpha, b = beta
    cdef const real *bias_ptr = &bias[0] if bias.shape[0] else NULL
    _check(N, C, C, dy.shape[0], dy.shape[3], 1, bias.shape[0])
    if wt.shape[2] != C:
        raise ValueError(f"wt must have {C} channels, got {wt.shape[2]}")
    if scratch.shape[0] < num_threads or scratch.shape[1] < C:
        raise ValueError("scratch too small")
    if N == 0:
        return
    with nogil:
        for row in prange(N * H, num_threads=num_threads, schedule="static"):
            n = row // H
            ih = row % H
            t = threadid()
            _backward_data_row_nhwc(&dy[n, 0, 0, 0], &wt[0, 0, 0], &dx[n, ih, 0, 0],
                                    &scratch[t, 0], bias_ptr, ih, W, C, OH, OW, R, S, sh, sw, dh,
                                    dw, pt, pl, a, b)


cdef void _backward_weight_block_nhwc(const real *x, const real *dy, real *part,
                                      Py_ssize_t n0, Py_ssize_t n1, Py_ssize_t c0,
                                      Py_ssize_t cn, Py_ssize_t H, Py_ssize_t W, Py_ssize_t C,
                                      Py_ssize_t OH, Py_ssize_t OW, Py_ssize_t R, Py_ssize_t S,
                                      Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t dh,
                                      Py_ssize_t dw, Py_ssize_t pt,
                                      Py_ssize_t pl) noexcept nogil:
    """``part[r*S + s][c]`` (CBLOCK wide) = sum over images n0..n1-1 and output pixels of
    dy[n, oh, ow, c0 + c] * x[n, ih, iw, c0 + c] for the ``cn`` channels of the block."""
    cdef Py_ssize_t n, oh, ow, r, s, ih, iw, c, lo, hi, off
    cdef const real *g
    cdef const real *xi
    cdef real *acc
    for c in range(R * S * CBLOCK):
        part[c] = 0
    for n in range(n0, n1):
        for oh in range(OH):
            for r in range(R):
                ih = oh * sh + r * dh - pt
                if ih < 0 or ih >= H:
                    continue
                for s in range(S):
                    acc = part + (r * S + s) * CBLOCK
                    off = s * dw - pl
                    # outputs ow with 0 <= ow * sw + off < W
                    lo = max(0, (-off + sw - 1) // sw) if off < 0 else 0
                    hi = min(OW, _floordiv(W - 1 - off, sw) + 1)
                    for ow in range(lo, hi):
                        g = dy + ((n * OH + oh) * OW + ow) * C + c0
                        xi = x + ((n * H + ih) * W + ow * sw + off) * C + c0
                        if cn == CBLOCK:
                            for c in range(CBLOCK):
                                acc[c] = acc[c] + g[c] * xi[c]
                        else:
                            for c in range(cn):
                                acc[c] = acc[c] + g[c] * xi[c]


def backward_weight_nhwc(const real[:, :, :, ::1] dy, const real[:, :, :, ::1] x,
                         real[:, :, :, ::1] partial, Py_ssize_t sh, Py_ssize_t sw,
                         Py_ssize_t dh, Py_ssize_t dw, Py_ssize_t pt, Py_ssize_t pl,
                         Py_ssize_t R, Py_ssize_t S, int num_threads):
    """Depthwise weight-gradient partial sums (multiplier 1) on contiguous NHWC.

    ``partial`` (splits, channel blocks, R*S, 16): split ``i`` sums images
    ``[i*N // splits, (i+1)*N // splits)``; the caller adds the splits in order.
    """
    cdef Py_ssize_t N = x.shape[0], H = x.shape[1], W = x.shape[2], C = x.shape[3]
    cdef Py_ssize_t OH = dy.shape[1], OW = dy.shape[2]
    cdef Py_ssize_t splits = partial.shape[0], nblocks = partial.shape[1]
    cdef Py_ssize_t job, i, cb, c0
    _check(N, C, C, dy.shape[0], dy.shape[3], 1, 0)
    if nblocks != (C + CBLOCK - 1) // CBLOCK or partial.shape[2] != R * S \
            or partial.shape[3] != CBLOCK or splits < 1:
        raise ValueError("partial has the wrong shape")
    with nogil:
        for job in prange(splits * nblocks, num_threads=num_threads, schedule="dynamic"):
            i = job // nblocks
            cb = job % nblocks
            c0 = cb * CBLOCK
            _backward_weight_block_nhwc(&x[0, 0, 0, 0], &dy[0, 0, 0, 0], &partial[i, cb, 0, 0],
                                        i * N // splits, (i + 1) * N // splits, c0,
                                        min(CBLOCK, C - c0), H, W, C, OH, OW, R, S, sh, sw, dh,
                                        dw, pt, pl)


cdef _check(Py_ssize_t N, Py_ssize_t C, Py_ssize_t K, Py_ssize_t other_n, Py_ssize_t other_k,
            Py_ssize_t w_in, Py_ssize_t nbias):
    # The kernels' own bounds check on the arrays they are given (callers validated the user's).
    if C < 1 or K % C or other_n != N or other_k != K or w_in != 1:
        raise ValueError(f"inconsistent depthwise shapes: N={N} C={C} K={K} "
                         f"({other_n}, {other_k}, {w_in})")
    if nbias not in (0, K):
        raise ValueError(f"bias must have {K} elements or none, got {nbias}")
