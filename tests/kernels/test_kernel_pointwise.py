"""The compiled 1x1 product (``_pointwise``) against a float64 einsum, on every SIMD level.

``out[n, g*M + m, p] = sum_l A_g[m, l] * b[n, g*L + l, p]`` with ``A_g`` read through
strides: ``(a_row, a_red) = (L, 1)`` is a (M, L) weight as stored (the forward pass),
``(1, M)`` its transpose (backward-data).  Odd pixel counts (short strips), reductions past
one L1 chunk, row counts that are not whole register tiles, groups, blockings and thread
counts are all exercised; the blocking must not change a single bit.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

DTYPES = (np.float32, np.float64)
# max |error| <= RTOL * max |reference| for a sum of ~16 terms (scaled up for longer sums)
RTOL = {np.dtype(np.float32): 2e-5, np.dtype(np.float64): 1e-12}

pytestmark = pytest.mark.kernels


def _product_scratch(mod, nthreads, panel, lr, strip):
    """The scratch elements the product asks for: each thread's part, a strip more so
    that it can start on a vector boundary, and a strip to align the first."""
    return nthreads * ((panel + mod.TILE_ROWS) * max(lr, strip) + strip) + strip


def _run(mod, b, w, groups, m_rows, transpose, panel=None, mchunk=None, nthreads=2,
         out=None, across=False, pack_rows=True):
    n, gl, p = b.shape
    lr = gl // groups
    strip = mod.STRIP[b.dtype.name]
    panel = panel or 2 * strip
    mchunk = mchunk or m_rows
    a_row, a_red = (1, m_rows) if transpose else (lr, 1)
    if out is None:
        out = np.full((n, groups * m_rows, p), np.nan, b.dtype)
    scratch = np.empty(_product_scratch(mod, nthreads, panel, lr, strip), b.dtype)
    fn = mod.product_float if b.dtype == np.float32 else mod.product_double
    fn(b, w.reshape(-1), groups, m_rows, a_row, a_red, out, panel, mchunk, scratch, nthreads,
       False, across, pack_rows)
    return out


def _reference(b, w, groups, m_rows, transpose):
    """float64 sum over l of A_g[m, l] * b[n, g, l, p]; w is (G, M, L) or (G, L, M)."""
    n, gl, p = b.shape
    a = w.astype(np.float64)
    if transpose:
        a = a.transpose(0, 2, 1)
    planes = b.astype(np.float64).reshape(n, groups, gl // groups, p)
    return np.einsum("gml,nglp->ngmp", a, planes).reshape(n, groups * m_rows, p)


# kmods only loads modules: nothing in it to reset between examples
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 3), groups=st.integers(1, 3), lr=st.integers(1, 40),
       m_rows=st.integers(1, 33), pixels=st.integers(1, 150), transpose=st.booleans(),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**31 - 1))
def test_matches_float64_reference(kmods, n, groups, lr, m_rows, pixels, transpose, dtype,
                                   seed):
    rng = np.random.default_rng(seed)
    b = rng.standard_normal((n, groups * lr, pixels)).astype(dtype)
    wshape = (groups, lr, m_rows) if transpose else (groups, m_rows, lr)
    w = rng.standard_normal(wshape).astype(dtype)
    got = _run(kmods.pointwise, b, w, groups, m_rows, transpose)
    want = _reference(b, w, groups, m_rows, transpose)
    scale = max(1.0, float(np.abs(want).max()))
    assert np.abs(got - want).max() <= RTOL[np.dtype(dtype)] * scale * max(1, lr / 16)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("transpose", [False, True])
def test_long_reduction_crosses_the_l1_chunks(kmods, dtype, transpose):
    # L = 600 spans three chunks of LCHUNK reduction rows; 70 pixels end in a short strip.
    mod = kmods.pointwise
    assert mod.LCHUNK < 600
    rng = np.random.default_rng(1)
    b = rng.standard_normal((2, 600, 70)).astype(dtype)
    w = rng.standard_normal((1, 600, 19) if transpose else (1, 19, 600)).astype(dtype)
    got = _run(mod, b, w, 1, 19, transpose)
    want = _reference(b, w, 1, 19, transpose)
    assert np.abs(got - want).max() <= 4 * RTOL[np.dtype(dtype)] * float(np.abs(want).max())


@pytest.mark.parametrize("dtype", DTYPES)
def test_blocking_and_threads_do_not_change_a_bit(kmods, dtype):
    mod = kmods.pointwise
    rng = np.random.default_rng(2)
    b = rng.standard_normal((2, 2 * 37, 301)).astype(dtype)
    w = rng.standard_normal((2, 45, 37)).astype(dtype)
    strip = mod.STRIP[np.dtype(dtype).name]
    first = _run(mod, b, w, 2, 45, False, panel=strip, mchunk=45, nthreads=1)
    for panel, mchunk, nthreads in [(4 * strip, mod.TILE_ROWS, 2), (8 * strip, 1, 3),
                                    (strip, 2 * mod.TILE_ROWS, 4)]:
        again = _run(mod, b, w, 2, 45, False, panel=panel, mchunk=mchunk, nthreads=nthreads)
        assert np.array_equal(first, again), (panel, mchunk, nthreads)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pixels", [None, 5, 131])   # None: two vectors' worth
@pytest.mark.parametrize("stream", [False, True])
def test_result_at_any_offset_in_a_vector_gives_the_same_bits(kmods, dtype, pixels, stream):
    # A result starting inside a vector (NumPy's allocations start 16 bytes past a 64-byte
    # boundary) has its panels shifted so the strips fall on vector boundaries (where the
    # planes are whole vectors); the bits are the aligned result's, and nothing outside
    # the result is written.
    mod = kmods.pointwise
    item = np.dtype(dtype).itemsize
    vl = 64 // item
    strip = mod.STRIP[np.dtype(dtype).name]
    p = pixels or 2 * vl
    rng = np.random.default_rng(3)
    b = rng.standard_normal((2, 2 * 11, p)).astype(dtype)
    w = rng.standard_normal((2, 17, 11)).astype(dtype)
    want = _run(mod, b, w, 2, 17, False, panel=2 * strip)
    scratch = np.empty(_product_scratch(mod, 2, 2 * strip, 11, strip), dtype)
    fn = mod.product_float if np.dtype(dtype) == np.float32 else mod.product_double
    size = want.size
    buf = np.empty(size + 3 * vl, dtype)
    base = (-buf.ctypes.data % 64) // item      # the first element on a 64-byte boundary
    for offset in range(vl):
        buf[:] = np.inf
        start = base + offset
        out = buf[start:start + size].reshape(want.shape)
        fn(b, w.reshape(-1), 2, 17, 11, 1, out, 2 * strip, 17, scratch, 2, stream)
        assert np.array_equal(out, want), offset
        assert np.isinf(buf[:start]).all() and np.isinf(buf[start + size:]).all(), offset


def test_bad_arguments_raise_instead_of_writing_out_of_bounds(kmods):
    mod = kmods.pointwise
    strip = mod.STRIP["float32"]
    b = np.ones((1, 8, 40), np.float32)
    w = np.ones(8 * 5, np.float32)
    out = np.empty((1, 5, 40), np.float32)
    good = np.empty(_product_scratch(mod, 1, strip, 8, strip), np.float32)
    mod.product_float(b, w, 1, 5, 8, 1, out, strip, 5, good, 1)
    assert np.all(out == 8)
    bad = [
        dict(out=np.empty((1, 6, 40), np.float32)),       # rows do not match M
        dict(a=w[:-1]),                                    # weight too short
        dict(panel=strip + 1),                             # not a whole number of strips
        dict(mchunk=0),
        dict(a_row=9),                                     # strides leave the weight block
        dict(scratch=good[:-1]),
        dict(G=3),                                         # 8 rows are not 3 groups
    ]
    for change in bad:
        args = dict(b=b, a=w, G=1, M=5, a_row=8, a_red=1, out=out, panel=strip, mchunk=5,
                    scratch=good, num_threads=1)
        args.update(change)
        with pytest.raises(ValueError, match="pointwise product"):
            mod.product_float(args["b"], args["a"], args["G"], args["M"], args["a_row"],
                              args["a_red"], args["out"], args["panel"], args["mchunk"],
                              args["scratch"], args["num_threads"])


def _run_weight(mod, rows, strips, groups, chunk=64, group_strips=2, splits=3, nthreads=2):
    n, gr, p = rows.shape
    s_cols = strips.shape[1] // groups
    strip = mod.STRIP[rows.dtype.name]
    padded = -(-s_cols // strip) * strip
    chunks = n * -(-p // chunk)
    splits = max(1, min(splits, chunks))
    partial = np.full((splits, groups, gr // groups, padded), np.nan, rows.dtype)
    scratch = np.empty(nthreads * group_strips * chunk * strip + strip, rows.dtype)
    fn = mod.weight_float if rows.dtype == np.float32 else mod.weight_double
    fn(rows, strips, groups, partial, chunk, group_strips, scratch, nthreads)
    total = partial[0].copy()
    for part in partial[1:]:
        total += part
    return total, padded


# kmods only loads modules: nothing in it to reset between examples
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 3), groups=st.integers(1, 3), r_rows=st.integers(1, 33),
       s_cols=st.integers(1, 70), pixels=st.integers(1, 150), chunk=st.integers(1, 80),
       splits=st.integers(1, 5), dtype=st.sampled_from(DTYPES),
       seed=st.integers(0, 2**31 - 1))
def test_weight_matches_float64_reference(kmods, n, groups, r_rows, s_cols, pixels, chunk,
                                          splits, dtype, seed):
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((n, groups * r_rows, pixels)).astype(dtype)
    strips = rng.standard_normal((n, groups * s_cols, pixels)).astype(dtype)
    got, padded = _run_weight(kmods.pointwise, rows, strips, groups, chunk=chunk,
                              splits=splits)
    want = np.einsum("ngrp,ngsp->grs", rows.astype(np.float64).reshape(n, groups, r_rows, -1),
                     strips.astype(np.float64).reshape(n, groups, s_cols, -1))
    scale = max(1.0, float(np.abs(want).max()))
    tol = RTOL[np.dtype(dtype)] * scale * max(1, n * pixels / 16)
    assert np.abs(got[:, :, :s_cols] - want).max() <= tol
    assert np.all(got[:, :, s_cols:] == 0)  # columns past the channels are zero lanes


@pytest.mark.parametrize("dtype", DTYPES)
def test_weight_bits_do_not_depend_on_threads_or_strip_groups(kmods, dtype):
    mod = kmods.pointwise
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((2, 40, 333)).astype(dtype)
    strips = rng.standard_normal((2, 70, 333)).astype(dtype)
    first, _ = _run_weight(mod, rows, strips, 1, group_strips=1, nthreads=1)
    for group_strips, nthreads in [(2, 2), (3, 4), (8, 3)]:
        again, _ = _run_weight(mod, rows, strips, 1, group_strips=group_strips,
                               nthreads=nthreads)
        assert np.array_equal(first, again), (group_strips, nthreads)


def test_weight_bad_arguments_raise(kmods):
    mod = kmods.pointwise
    strip = mod.STRIP["float32"]
    rows = np.ones((1, 6, 20), np.float32)
    strips = np.ones((1, 5, 20), np.float32)
    partial = np.empty((2, 1, 6, strip), np.float32)
    scratch = np.empty(2 * 10 * strip + strip, np.float32)
    mod.weight_float(rows, strips, 1, partial, 10, 2, scratch, 1)
    assert np.all(partial[:, :, :, :5] == 10) and np.all(partial[:, :, :, 5:] == 0)
    bad = [
        dict(strips=np.ones((1, 5, 21), np.float32)),           # pixels differ
        dict(partial=np.empty((2, 1, 6, strip + 1), np.float32)),  # not whole strips
        dict(partial=np.empty((3, 1, 6, strip), np.float32)),   # 3 splits of 2 chunks
        dict(partial=np.empty((2, 1, 7, strip), np.float32)),   # rows do not match
        dict(scratch=scratch[:-1]),
        dict(chunk=0),
        dict(G=2),                                              # 5 channels are not 2 groups
    ]
    for change in bad:
        args = dict(rows=rows, strips=strips, G=1, partial=partial, chunk=10, group_strips=2,
                    scratch=scratch, num_threads=1)
        args.update(change)
        with pytest.raises(ValueError, match="pointwise weight"):
            mod.weight_float(args["rows"], args["strips"], args["G"], args["partial"],
                             args["chunk"], args["group_strips"], args["scratch"],
                             args["num_threads"])


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(2, 6), groups=st.integers(1, 2), lr=st.integers(1, 30),
       m_rows=st.integers(1, 31), pixels=st.integers(1, 80), strips=st.integers(1, 4),
       transpose=st.booleans(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**31 - 1))
def test_panels_across_images_give_the_per_image_bits(kmods, n, groups, lr, m_rows, pixels,
                                                     strips, transpose, dtype, seed):
    # Small planes laid end to end and cut into panels that cross images (several images,
    # or a plane smaller than a strip, per strip): every pixel lands in its own image's
    # plane, with the bits of panels within each plane (the same sums in the same order),
    # and nothing outside the result is written.
    mod = kmods.pointwise
    rng = np.random.default_rng(seed)
    b = rng.standard_normal((n, groups * lr, pixels)).astype(dtype)
    w = rng.standard_normal((groups, lr, m_rows) if transpose else (groups, m_rows, lr))
    w = w.astype(dtype)
    want = _run(mod, b, w, groups, m_rows, transpose)
    strip = mod.STRIP[np.dtype(dtype).name]
    buf = np.full(want.size + 2 * strip, np.inf, dtype)
    out = buf[strip:strip + want.size].reshape(want.shape)
    _run(mod, b, w, groups, m_rows, transpose, panel=strips * strip, mchunk=mod.TILE_ROWS,
         out=out, across=True)
    assert np.array_equal(out, want)
    assert np.isinf(buf[:strip]).all() and np.isinf(buf[strip + want.size:]).all()
    ref = _reference(b, w, groups, m_rows, transpose)
    assert np.abs(out - ref).max() <= RTOL[np.dtype(dtype)] * max(1.0, np.abs(ref).max()) \
        * max(1, lr / 16)


@pytest.mark.parametrize("dtype", DTYPES)
def test_weight_read_in_place_gives_the_packed_bits(kmods, dtype):
    # pack_rows=False reads the rows operand through its strides (NHWC pixel rows) instead
    # of packing it in register tiles: the same sums, in the same order.
    rng = np.random.default_rng(4)
    b = rng.standard_normal((2, 2 * 23, 77)).astype(dtype)
    w = rng.standard_normal((2, 31, 23)).astype(dtype)
    want = _run(kmods.pointwise, b, w, 2, 31, False)
    again = _run(kmods.pointwise, b, w, 2, 31, False, mchunk=5, pack_rows=False)
    assert np.array_equal(again, want)
