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
