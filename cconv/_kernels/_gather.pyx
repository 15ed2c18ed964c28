# cython: language_level=3
"""Building and folding the padding of a padding mode (``cconv._boundary``).

- ``pad_copy``: every pixel of the padded image copies one pixel of the input (reflect,
  symmetric, replicate, circular) or none (a constant); the image's own columns are one
  contiguous copy per row.
- ``gather_sum``, its adjoint: every input pixel sums the gradient of the padded pixels that
  copied it (itself and its mirror images or wrap-arounds), "output pixel (r, c) = sum of
  source pixels (i, j) for i in rows[r], j in cols[c]" with the lists in CSR form.  Writing
  each output element once from its list of sources (a gather) needs no atomics and sums in a
  fixed order, so the fold is deterministic at any thread count.
- ``fold_ring``: the fold for a gradient whose image pixels are in place already,
  adding only the padding's pixels.

Arrays are 4-D and C-contiguous as (B, H, W, L): NCHW data is (N*C, H, W, 1), NHWC data is
(N, H, W, C), so the innermost loop runs over contiguous channels when there are any.

A job is one row, and the rows are split statically (each thread one contiguous run): a row
of an NCHW plane is a few dozen elements, so a dynamic schedule's shared counter cost about
as much as the row.  The reflect-mode data gradient of ResNet-50's 64-channel 3x3 layer (8
images, 56x56, 2 threads, AMD EPYC Zen 5): 4.45-4.67 -> 3.47-3.81 ms against 2.75-2.88 ms
with zero padding; ``bench/padding_modes.py``'s geometric mean 1.116 -> 1.074.
"""

from cython.parallel cimport prange
from libc.stdint cimport int64_t
from libc.string cimport memcpy

cdef extern from *:
    void __builtin_prefetch(const void *p) noexcept nogil

# Rows ahead whose padding columns ``fold_ring`` asks for while it folds a row.
cdef enum:
    FOLD_PREFETCH_ROWS = 8

ctypedef fused real:
    float
    double


def gather_sum(const real[:, :, :, ::1] src, real[:, :, :, ::1] dst,
               const int64_t[::1] row_ptr, const int64_t[::1] row_idx,
               const int64_t[::1] col_ptr, const int64_t[::1] col_idx,
               Py_ssize_t c0, Py_ssize_t c1, Py_ssize_t shift,
               double alpha, double beta, int num_threads):
    """``dst = alpha * gathered + beta * dst`` (``beta == 0`` never reads ``dst``).

    ``gathered[b, r, c, l]`` is the sum of ``src[b, i, j, l]`` over ``i`` in
    ``row_idx[row_ptr[r]:row_ptr[r+1]]`` and ``j`` in ``col_idx[col_ptr[c]:col_ptr[c+1]]``
    (zero where either list is empty; a fold's lists never are: every pixel copies itself).  Columns ``c0 <= c < c1`` have the single source
    ``c + shift`` (an image's interior, which a fold copies): in rows with a single source
    row they are copied as one contiguous run.  The caller guarantees the lists index inside
    ``src``, that ``row_ptr`` / ``col_ptr`` have ``dst``'s height / width + 1 entries, and the
    promise about ``c0 .. c1``.
    """
    cdef Py_ssize_t B = dst.shape[0], H = dst.shape[1], W = dst.shape[2], L = dst.shape[3]
    cdef Py_ssize_t job, b, r, c, l, a, e, k, run, n_other, skip, m
    cdef int64_t i, j
    cdef real acc
    cdef real alpha_r = <real>alpha, beta_r = <real>beta
    cdef real *out
    cdef const real *row
    if B == 0 or H == 0 or W == 0 or L == 0:
        return
    if not (0 <= c0 <= c1 <= W) or (c1 > c0 and (c0 + shift < 0 or c1 + shift > src.shape[2])):
        raise ValueError(f"interior columns [{c0}, {c1}) + {shift} do not fit")
    run = (c1 - c0) * L
    for job in prange(B * H, nogil=True, schedule="static", num_threads=num_threads):
        b = job // H
        r = job - b * H
        skip = 0
        if row_ptr[r + 1] - row_ptr[r] == 1 and run > 0:
            skip = c1 - c0
            out = &dst[b, r, c0, 0]
            row = &src[b, row_idx[row_ptr[r]], c0 + shift, 0]
            if beta == 0:
                for k in range(run):
                    out[k] = alpha_r * row[k]
            else:
                for k in range(run):
                    out[k] = alpha_r * row[k] + beta_r * out[k]
        n_other = W - skip
        for m in range(n_other):  # every column, or those outside the copied run
            c = m if (skip == 0 or m < c0) else m + skip
            for l in range(L):
                acc = 0
                for a in range(row_ptr[r], row_ptr[r + 1]):
                    i = row_idx[a]
                    for e in range(col_ptr[c], col_ptr[c + 1]):
                        j = col_idx[e]
                        acc = acc + src[b, i, j, l]
                if beta == 0:
                    dst[b, r, c, l] = alpha_r * acc
                else:
                    dst[b, r, c, l] = alpha_r * acc + beta_r * dst[b, r, c, l]


cdef inline void _prefetch4(const void *a, const void *b, const void *c,
                            const void *d) noexcept nogil:
    # For fold_ring: ask for the lines holding both ends of a ring row and of the result
    # row it folds into.  The fold reads and writes a few elements per row, one or two
    # lines apart at each end, so the hardware's stride prefetch never gets ahead of it
    # (NCHW planes of 56x56 pixels: 1 ms for ResNet-50 res2's ring, half of it with
    # everything in cache).
    __builtin_prefetch(a)
    __builtin_prefetch(b)
    __builtin_prefetch(c)
    __builtin_prefetch(d)


def fold_ring(const real[:, :, :, ::1] ring, real[:, :, :, ::1] dst,
              const int64_t[::1] row_src, const int64_t[::1] col_src, Py_ssize_t top,
              Py_ssize_t left, double alpha, int num_threads):
    """``dst[b, row_src[r], col_src[c], :] += alpha * ring[b, r, c, :]`` for every pixel
    ``(r, c)`` of the padded ``ring`` outside the image's window (rows ``top ..`` and columns
    ``left ..``, ``dst``'s height and width) whose indices are not -1.

    The fold of a gradient whose image pixels were written into ``dst`` already (the
    algorithms' ``backward_data_split``): only the padding's pixels are read.  A job is one
    (b) block, its pixels added in row-major order: deterministic at any thread count.
    """
    cdef Py_ssize_t B = ring.shape[0], Hp = ring.shape[1], Wp = ring.shape[2]
    cdef Py_ssize_t L = ring.shape[3], H = dst.shape[1], W = dst.shape[2]
    cdef Py_ssize_t b, r, c, l, m, n_cols
    cdef int64_t sr, sc
    cdef real a = <real>alpha
    cdef bint image_row
    if dst.shape[0] != B or dst.shape[3] != L:
        raise ValueError("ring and dst differ in blocks or channels")
    if row_src.shape[0] != Hp or col_src.shape[0] != Wp:
        raise ValueError("row_src / col_src do not match the ring")
    if top < 0 or left < 0 or top + H > Hp or left + W > Wp:
        raise ValueError(f"window {H}x{W} at ({top}, {left}) does not fit the ring {Hp}x{Wp}")
    for r in range(Hp):
        if row_src[r] < -1 or row_src[r] >= H:
            raise ValueError("row_src indexes outside dst")
    for c in range(Wp):
        if col_src[c] < -1 or col_src[c] >= W:
            raise ValueError("col_src indexes outside dst")
    if B == 0 or L == 0:
        return
    for b in prange(B, nogil=True, schedule="static", num_threads=num_threads):
        for r in range(Hp):
            if r + FOLD_PREFETCH_ROWS < Hp and row_src[r + FOLD_PREFETCH_ROWS] >= 0:
                sr = row_src[r + FOLD_PREFETCH_ROWS]
                _prefetch4(&ring[b, r + FOLD_PREFETCH_ROWS, 0, 0],
                           &ring[b, r + FOLD_PREFETCH_ROWS, Wp - 1, 0], &dst[b, sr, 0, 0],
                           &dst[b, sr, W - 1, 0])
            sr = row_src[r]
            if sr < 0:
                continue
            image_row = top <= r < top + H
            n_cols = Wp - W if image_row else Wp
            for m in range(n_cols):  # every column, or the padding's on the image's rows
                c = m if (not image_row or m < left) else m + W
                sc = col_src[c]
                if sc < 0:
                    continue
                for l in range(L):
                    dst[b, sr, sc, l] = dst[b, sr, sc, l] + a * ring[b, r, c, l]


def pad_copy(const real[:, :, :, ::1] src, real[:, :, :, ::1] dst,
             const int64_t[::1] row_src, const int64_t[::1] col_src, Py_ssize_t left,
             double fill, int num_threads):
    """``dst[b, r, c, :] = src[b, row_src[r], col_src[c], :]``, or ``fill`` where either
    index is -1: the padding of every mode, where each padded pixel copies at most one.

    Columns ``left .. left + src width`` are the image itself (``col_src[c] == c - left``)
    and are copied as one contiguous run per row; only the padding columns are looked up.
    """
    cdef Py_ssize_t B = dst.shape[0], H = dst.shape[1], W = dst.shape[2], L = dst.shape[3]
    cdef Py_ssize_t Ws = src.shape[2], run = Ws * L
    cdef Py_ssize_t job, b, r, c, l, i
    cdef int64_t sr, sc
    cdef real fill_r = <real>fill
    cdef real *out
    cdef const real *row
    if B == 0 or H == 0 or W == 0 or L == 0:
        return
    for job in prange(B * H, nogil=True, schedule="static", num_threads=num_threads):
        b = job // H
        r = job - b * H
        out = &dst[b, r, 0, 0]
        sr = row_src[r]
        if sr < 0:
            for i in range(W * L):
                out[i] = fill_r
            continue
        row = &src[b, sr, 0, 0]
        memcpy(&out[left * L], row, run * sizeof(real))  # the image's own columns
        for i in range(W - Ws):  # the padding columns, left then right
            c = i if i < left else i + Ws
            sc = col_src[c]
            for l in range(L):
                out[c * L + l] = fill_r if sc < 0 else row[sc * L + l]
