"""The GEMM algorithm's 1x1 layers on the compiled product, against the float64 reference.

Shapes large enough to cross the product's blocking: channels past one two-vector strip
(16 / 32 / 8 lanes x 2 per SIMD level) and past a register tile (14 or 6 rows), pixel
counts past one 256-pixel panel with a short last one, the weight gradient's reduction
split over several partial sums; both layouts, groups, strides, float32 and float64.
"""

import numpy as np
import pytest
from support.reference import ref_backward_data, ref_backward_weight, ref_conv2d

import cconv
from cconv.algorithms import gemm


def _to(layout, a):
    return a if layout == "NCHW" else np.ascontiguousarray(a.transpose(0, 2, 3, 1))


def _close(got, want, dtype):
    scale = max(1.0, float(np.abs(want).max()))
    tol = 2e-5 if dtype == np.float32 else 1e-12
    assert np.abs(np.asarray(got, np.float64) - want).max() <= tol * scale


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("n, c, k, h, w, groups, stride, dtype", [
    (2, 70, 45, 17, 19, 1, 1, np.float32),    # 323 pixels: a panel and a short one
    (1, 33, 100, 23, 23, 1, 1, np.float64),
    (3, 64, 64, 9, 31, 2, 1, np.float32),     # grouped: 32 -> 32 per group
    (2, 40, 29, 20, 20, 1, 2, np.float32),    # stride 2: the product on every other pixel
    (1, 300, 20, 5, 60, 1, 1, np.float32),    # a reduction past one L1 chunk (256 rows)
])
def test_every_pass_matches_the_reference(layout, n, c, k, h, w, groups, stride, dtype):
    rng = np.random.default_rng(n * c + k)
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    wt = rng.standard_normal((k, c // groups, 1, 1)).astype(dtype)
    ref = ref_conv2d(x, wt, None, stride=stride, groups=groups)
    gy = rng.standard_normal(ref.shape).astype(dtype)
    kw = dict(groups=groups, layout=layout, stride=stride, algo="gemm")
    rkw = dict(groups=groups, stride=stride)
    _close(cconv.conv2d(_to(layout, x), wt, **kw), _to(layout, ref), dtype)
    _close(cconv.conv2d_backward_data(_to(layout, gy), wt, _to(layout, x).shape, **kw),
           _to(layout, ref_backward_data(gy, wt, x.shape, **rkw)), dtype)
    dw = cconv.conv2d_backward_weight(_to(layout, gy), _to(layout, x), wt.shape, **kw)
    _close(dw, ref_backward_weight(gy, x, wt.shape, **rkw), dtype)


@pytest.mark.parametrize("k, c", [(64, 256), (256, 64), (48, 48)])
def test_weight_gradient_streams_the_operand_with_more_channels(k, c):
    geom = cconv.plan_conv2d((2, c, 7, 7), (k, c, 1, 1)).geometry
    plan = gemm._WeightPlan(geom, 49)
    assert plan.transposed == (k < c)
    assert (plan.rows, plan.cols) == ((c, k) if k < c else (k, c))
    assert plan.padded_cols % plan.strip == 0 and plan.padded_cols >= plan.cols
    # splits depend on the shape only, never more than the reduction's chunks
    assert 1 <= plan.splits <= min(gemm.WEIGHT_SPLITS, 2 * -(-49 // gemm.WEIGHT_CHUNK))


def test_row_chunks_give_every_thread_work():
    tile = int(gemm._pointwise_kernels.TILE_ROWS)
    assert gemm._row_chunk(256, 64, 2) == 256            # enough panels: no split
    chunk = gemm._row_chunk(256, 1, 2)                   # one panel: rows split
    assert chunk % tile == 0 and -(-256 // chunk) >= 2
    assert gemm._row_chunk(5, 1, 16) == tile             # never below one tile


def _aligned_empty(shape, dtype, offset_bytes):
    """An empty array whose data starts ``offset_bytes`` past a 64-byte boundary."""
    itemsize = np.dtype(dtype).itemsize
    count = int(np.prod(shape))
    raw = np.empty(count + 128 // itemsize, dtype)
    start = (-raw.ctypes.data % 64 + offset_bytes) // itemsize
    return raw[start:start + count].reshape(shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("pixels, offset", [
    (16 * 16, 0),     # planes of whole vectors, aligned result: non-temporal stores
    (16 * 19, 0),     # a short last strip next to streamed full strips
    (17 * 16 + 8, 0),  # float32 planes not a whole number of vectors: plain stores
    (16 * 16, 16),    # a result off the vector boundary: plain stores
])
@pytest.mark.parametrize("L, M", [(70, 45), (300, 20)])
def test_streamed_product_matches_the_plain_one_and_the_reference(dtype, pixels, offset, L, M):
    # The product's `stream` stores whole strips by non-temporal stores where the result
    # allows it (gemm.STREAM_RESULT_BYTES decides when to ask); the same sums either way.
    kernels = gemm._pointwise_kernels
    suffix = "float" if dtype == np.float32 else "double"
    product = getattr(kernels, f"product_{suffix}")
    rng = np.random.default_rng(pixels + L)
    b = rng.standard_normal((2, L, pixels)).astype(dtype)
    a = rng.standard_normal(M * L).astype(dtype)
    panel = gemm._product_panel(2, pixels, np.dtype(dtype))
    scratch = np.empty(gemm._native_scratch_bytes(2, 1, L, M, pixels, np.dtype(dtype), 3)
                       // np.dtype(dtype).itemsize, dtype)
    want = np.einsum("ml,nlp->nmp", a.reshape(M, L).astype(np.float64), b.astype(np.float64))
    outs = []
    for stream in (False, True):
        out = _aligned_empty((2, M, pixels), dtype, offset)
        out[...] = np.nan
        product(b, a, 1, M, L, 1, out, panel, gemm._row_chunk(M, 2, 3), scratch, 3, stream)
        _close(out, want, dtype)
        outs.append(out)
    assert np.array_equal(outs[0], outs[1])


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_streamed_results_through_the_api(monkeypatch, layout):
    # Every result streamed (threshold 0): the forward and data gradient of 1x1 layers.
    monkeypatch.setattr(gemm, "STREAM_RESULT_BYTES", 0)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 40, 16, 16)).astype(np.float32)
    wt = rng.standard_normal((72, 40, 1, 1)).astype(np.float32)
    ref = ref_conv2d(x, wt, None)
    gy = rng.standard_normal(ref.shape).astype(np.float32)
    kw = dict(layout=layout, algo="gemm")
    _close(cconv.conv2d(_to(layout, x), wt, **kw), _to(layout, ref), np.float32)
    _close(cconv.conv2d_backward_data(_to(layout, gy), wt, _to(layout, x).shape, **kw),
           _to(layout, ref_backward_data(gy, wt, x.shape)), np.float32)


@pytest.mark.parametrize("rows_bytes", [None, 0])
@pytest.mark.parametrize("n, c, k, h, w, groups, dtype", [
    (2, 70, 45, 17, 19, 1, np.float32),   # partial strips and row tiles, several chunks
    (1, 300, 20, 5, 60, 2, np.float64),   # groups, double strips
    (3, 40, 96, 3, 3, 1, np.float32),     # fewer pixels than one reduction chunk
])
def test_nhwc_weight_gradient_on_pixel_rows(monkeypatch, rows_bytes, n, c, k, h, w, groups,
                                            dtype):
    # NHWC 1x1 weight gradients run on the pixel rows as they lie (``weight_pixels``); a
    # zero PIXEL_ROWS_BYTES gives the rows to the other operand.  Both match the reference
    # and give the same bits on any thread count.
    if rows_bytes is not None:
        monkeypatch.setattr(gemm, "PIXEL_ROWS_BYTES", rows_bytes)
    rng = np.random.default_rng(n + c + k)
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    gy = rng.standard_normal((n, k, h, w)).astype(dtype)
    shape = (k, c // groups, 1, 1)
    want = ref_backward_weight(gy, x, shape, groups=groups)
    got = [cconv.conv2d_backward_weight(_to("NHWC", gy), _to("NHWC", x), shape, groups=groups,
                                        layout="NHWC", algo="gemm", num_threads=t)
           for t in (1, 3)]
    _close(got[0], want, dtype)
    assert np.array_equal(got[0], got[1])
    plan = gemm._WeightPlan(cconv.plan_conv2d((n, h, w, c), shape, groups=groups,
                                              layout="NHWC").geometry, h * w, pixel_major=True)
    assert plan.transposed == ((k // groups < c // groups) != (rows_bytes == 0))


@pytest.mark.parametrize("n, c, k, side, groups, dtype", [
    (3, 40, 24, 7, 1, np.float32),    # rows are input channels (K < C): transposed sums
    (2, 24, 40, 5, 1, np.float64),    # rows are output channels
    (4, 36, 48, 3, 3, np.float32),    # groups
    (2, 8, 8, 1, 1, np.float32),      # one-pixel planes
])
def test_weight_gradient_of_small_planes_gathered_across_the_batch(monkeypatch, n, c, k, side,
                                                                    groups, dtype):
    # Planes under gemm.ACROSS_WEIGHT_PIXELS are gathered into one plane of the batch's
    # pixels before the compiled weight gradient: the float64 reference's gradient, and
    # the per-image path's within rounding (another order of the same sum).
    rng = np.random.default_rng(n * c + k)
    x = rng.standard_normal((n, c, side, side)).astype(dtype)
    gy = rng.standard_normal((n, k, side, side)).astype(dtype)
    shape = (k, c // groups, 1, 1)
    want = ref_backward_weight(gy, x, shape, groups=groups)
    assert side * side < gemm.ACROSS_WEIGHT_PIXELS
    gathered = cconv.conv2d_backward_weight(gy, x, shape, groups=groups, algo="gemm")
    monkeypatch.setattr(gemm, "ACROSS_WEIGHT_PIXELS", 0)
    cconv.algorithms.base._instance.cache_clear()
    per_image = cconv.conv2d_backward_weight(gy, x, shape, groups=groups, algo="gemm")
    _close(gathered, want, dtype)
    _close(per_image, want, dtype)
