"""The compiled col2im (``_col2im``) against a plain float64 loop, on every SIMD level.

``dst[n, c, r*dh + i*sh, s*dw + j*sw] += cols[c, r, s, n, i, j]``: every tap's products
added onto a window of the padded input gradient.  The window is a strided view (its rows
contiguous), so the elements around it must stay untouched, also where a stride-2 vector
step rewrites the odd elements between its products; and the taps must be added in order
(r, then s), as NumPy's slice adds did, so the result is the same bits as those adds.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

DTYPES = (np.float32, np.float64)

pytestmark = pytest.mark.kernels


def _reference(cols, dst, sh, sw, dh, dw):
    """The float64 sums, one element at a time."""
    out = dst.astype(np.float64)
    C, R, S, N, rows, ncols = cols.shape
    for n in range(N):
        for c in range(C):
            for r in range(R):
                for s in range(S):
                    for i in range(rows):
                        for j in range(ncols):
                            out[n, c, r * dh + i * sh, s * dw + j * sw] += cols[c, r, s, n, i, j]
    return out


def _slice_adds(cols, dst, sh, sw, dh, dw):
    """The NumPy col2im it replaces: one strided slice add per tap, taps in order."""
    C, R, S, N, rows, ncols = cols.shape
    for r in range(R):
        for s in range(S):
            dst[:, :, r * dh:r * dh + (rows - 1) * sh + 1:sh,
                s * dw:s * dw + (ncols - 1) * sw + 1:sw] += cols[:, r, s].transpose(1, 0, 2, 3)


def _case(rng, dtype, C, R, S, N, rows, ncols, sh, sw, dh, dw, extra):
    H = (rows - 1) * sh + (R - 1) * dh + 1 + extra
    W = (ncols - 1) * sw + (S - 1) * dw + 1 + extra
    cols = rng.standard_normal((C, R, S, N, rows, ncols)).astype(dtype)
    # the window lies inside a larger buffer: one row above, two columns left, more right
    base = rng.standard_normal((N, C, H + 2, W + 5)).astype(dtype)
    return cols, base, (slice(None), slice(None), slice(1, H + 1), slice(2, W + 2))


@pytest.mark.parametrize("dtype", DTYPES)
@given(C=st.integers(1, 3), R=st.integers(1, 7), S=st.integers(1, 7), N=st.integers(1, 2),
       rows=st.integers(1, 6), ncols=st.integers(1, 41), sh=st.integers(1, 3),
       sw=st.integers(1, 3), dh=st.integers(1, 2), dw=st.integers(1, 3),
       extra=st.integers(0, 3), seed=st.integers(0, 2**31))
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_matches_reference_and_slice_adds(kmods, dtype, C, R, S, N, rows, ncols, sh, sw, dh,
                                          dw, extra, seed):
    rng = np.random.default_rng(seed)
    cols, base, window = _case(rng, dtype, C, R, S, N, rows, ncols, sh, sw, dh, dw, extra)
    got, numpy_adds = base.copy(), base.copy()
    kmods.col2im.scatter_add(cols, got[window], sh, sw, dh, dw, 2)
    _slice_adds(cols, numpy_adds[window], sh, sw, dh, dw)
    assert np.array_equal(got, numpy_adds)  # same order of adds: same bits
    ref = base.astype(np.float64)
    ref[window] = _reference(cols, base[window], sh, sw, dh, dw)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert np.abs(got - ref).max() <= tol * max(1.0, np.abs(ref).max())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ncols", [15, 16, 17, 32, 33, 64, 100])
def test_stride_two_rows_keep_their_odd_elements(kmods, dtype, ncols):
    """Long rows at column stride 2 (the vector path): a window whose last product is its
    last column, the element after it belonging to the buffer outside the window."""
    rng = np.random.default_rng(ncols)
    cols, base, window = _case(rng, dtype, 2, 3, 7, 1, 4, ncols, 2, 2, 1, 1, 0)
    got, expected = base.copy(), base.copy()
    kmods.col2im.scatter_add(cols, got[window], 2, 2, 1, 1, 1)
    _slice_adds(cols, expected[window], 2, 2, 1, 1)
    assert np.array_equal(got, expected)
    outside = np.ones(base.shape, bool)
    outside[window] = False
    assert np.array_equal(got[outside], base[outside])
    # the same in a buffer that ends with the window: an element written past the last
    # column of the last row would leave the allocation (tools/asan-test.sh runs this)
    exact = base[window].copy()
    kmods.col2im.scatter_add(cols, exact, 2, 2, 1, 1, 1)
    assert np.array_equal(exact, expected[window])


def test_threads_do_not_change_bits(kmods):
    rng = np.random.default_rng(5)
    cols, base, window = _case(rng, np.float32, 3, 7, 7, 3, 9, 30, 2, 2, 1, 1, 2)
    results = []
    for nthreads in (1, 2, 5):
        out = base.copy()
        kmods.col2im.scatter_add(cols, out[window], 2, 2, 1, 1, nthreads)
        results.append(out)
    assert all(np.array_equal(results[0], r) for r in results[1:])


def test_bad_arguments_are_value_errors(kmods):
    cols = np.zeros((2, 3, 3, 1, 4, 4), np.float32)
    dst = np.zeros((1, 2, 6, 6), np.float32)
    kmods.col2im.scatter_add(cols, dst, 1, 1, 1, 1, 1)  # fits exactly
    with pytest.raises(ValueError, match="too small"):
        kmods.col2im.scatter_add(cols, dst[:, :, :5], 1, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="too small"):
        kmods.col2im.scatter_add(cols, dst, 2, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="images"):
        kmods.col2im.scatter_add(cols, np.zeros((2, 2, 6, 6), np.float32), 1, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="contiguous"):
        kmods.col2im.scatter_add(cols, np.zeros((1, 2, 6, 12), np.float32)[..., ::2],
                                 1, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="positive"):
        kmods.col2im.scatter_add(cols, dst, 0, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="num_threads"):
        kmods.col2im.scatter_add(cols, dst, 1, 1, 1, 1, 0)


# -- pixel-major (channels-last) columns ---------------------------------------------------


def _pixel_slice_adds(cols, dst, sh, sw, dh, dw):
    """NumPy's col2im of pixel-major columns (N, rows, cols, G, R, S, Cg) onto an NHWC
    window: one slice add per tap, taps in order."""
    N, rows, ncols, G, R, S, Cg = cols.shape
    for r in range(R):
        for s in range(S):
            dst[:, r * dh:r * dh + (rows - 1) * sh + 1:sh,
                s * dw:s * dw + (ncols - 1) * sw + 1:sw] += \
                cols[:, :, :, :, r, s].reshape(N, rows, ncols, G * Cg)


def _pixel_reference(cols, dst, sh, sw, dh, dw):
    out = dst.astype(np.float64)
    N, rows, ncols, G, R, S, Cg = cols.shape
    for n, i, j, g, r, s, c in np.ndindex(*cols.shape):
        out[n, r * dh + i * sh, s * dw + j * sw, g * Cg + c] += cols[n, i, j, g, r, s, c]
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@given(N=st.integers(1, 2), rows=st.integers(1, 5), ncols=st.integers(1, 9),
       G=st.integers(1, 2), R=st.integers(1, 4), S=st.integers(1, 4),
       Cg=st.sampled_from([1, 3, 16, 19]), sh=st.integers(1, 3), sw=st.integers(1, 3),
       dh=st.integers(1, 2), dw=st.integers(1, 2), extra=st.integers(0, 2),
       seed=st.integers(0, 2**31))
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_pixel_major_matches_reference_and_slice_adds(kmods, dtype, N, rows, ncols, G, R, S,
                                                      Cg, sh, sw, dh, dw, extra, seed):
    rng = np.random.default_rng(seed)
    H = (rows - 1) * sh + (R - 1) * dh + 1 + extra
    W = (ncols - 1) * sw + (S - 1) * dw + 1 + extra
    cols = rng.standard_normal((N, rows, ncols, G, R, S, Cg)).astype(dtype)
    base = rng.standard_normal((N, H + 3, W + 2, G * Cg)).astype(dtype)
    window = (slice(None), slice(2, H + 2), slice(1, W + 1))
    got, numpy_adds = base.copy(), base.copy()
    kmods.col2im.scatter_add_pixels(cols, got[window], sh, sw, dh, dw, 2)
    _pixel_slice_adds(cols, numpy_adds[window], sh, sw, dh, dw)
    assert np.array_equal(got, numpy_adds)  # same order of adds; nothing outside touched
    ref = base.astype(np.float64)
    ref[window] = _pixel_reference(cols, base[window], sh, sw, dh, dw)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert np.abs(got - ref).max() <= tol * max(1.0, np.abs(ref).max())


def test_pixel_major_bad_arguments_are_value_errors(kmods):
    cols = np.zeros((1, 4, 4, 1, 3, 3, 2), np.float32)
    dst = np.zeros((1, 6, 6, 2), np.float32)
    kmods.col2im.scatter_add_pixels(cols, dst, 1, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="too small"):
        kmods.col2im.scatter_add_pixels(cols, dst[:, :, :5], 1, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="channels"):
        kmods.col2im.scatter_add_pixels(cols, np.zeros((1, 6, 6, 3), np.float32),
                                        1, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="contiguous"):
        kmods.col2im.scatter_add_pixels(cols, np.zeros((1, 6, 6, 4), np.float32)[..., ::2],
                                        1, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="positive"):
        kmods.col2im.scatter_add_pixels(cols, dst, 1, 1, 0, 1, 1)
