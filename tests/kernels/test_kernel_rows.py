"""The row-vector kernel ``correlate`` of every SIMD level against a NumPy float64 reference.

``y[n, k, oh, ow] = alpha * (sum_{c, r, s} w[k, c, r, s] * x[n, g*Cg + c, rows[oh, r],
ow + s*dw - pl] + bias[k]) + beta * y``, zero where ``rows[oh, r] == -1`` or the column is
outside the row, on shapes whose rows span interior tiles, edge tiles (padding on either
side, a negative left padding, a window longer than the row) and a partial last tile, with
groups and output-channel counts that leave a partial register block.
"""

import numpy as np
import pytest

pytestmark = pytest.mark.kernels


def pack(w, groups, kb):
    """(K, Cg, R, S) -> (groups, blocks, Cg, R, S, kb), zero past each group's channels."""
    K, Cg, R, S = w.shape
    Kg = K // groups
    blocks = -(-Kg // kb)
    packed = np.zeros((groups, blocks * kb, Cg, R, S), w.dtype)
    packed[:, :Kg] = w.reshape(groups, Kg, Cg, R, S)
    return np.ascontiguousarray(packed.reshape(groups, blocks, kb, Cg, R, S)
                                .transpose(0, 1, 3, 4, 5, 2))


def ref_correlate(x, w, y0, bias, rows, dw, pl, groups, alpha, beta):
    N, C, H, W = x.shape
    K, Cg, R, S = w.shape
    OH, OW = y0.shape[2:]
    Kg = K // groups
    acc = np.zeros((N, K, OH, OW))
    xf, wf = x.astype(np.float64), w.astype(np.float64)
    for oh in range(OH):
        for r in range(R):
            ih = rows[oh, r]
            if ih < 0:
                continue
            for s in range(S):
                cols = np.arange(OW) + s * dw - pl
                inside = (cols >= 0) & (cols < W)
                taken = np.zeros((N, C, OW))
                taken[:, :, inside] = xf[:, :, ih, cols[inside]]
                for g in range(groups):
                    acc[:, g * Kg:(g + 1) * Kg, oh] += np.einsum(
                        "kc,ncw->nkw", wf[g * Kg:(g + 1) * Kg, :, r, s],
                        taken[:, g * Cg:(g + 1) * Cg])
    if bias is not None:
        acc += bias.astype(np.float64)[None, :, None, None]
    out = alpha * acc
    if beta != 0:
        out = out + beta * y0.astype(np.float64)
    return out


def row_table(OH, R, H, sh, dh, pt):
    rows = np.arange(OH)[:, None] * sh + np.arange(R)[None, :] * dh - pt
    return np.where((rows >= 0) & (rows < H), rows, -1).astype(np.int64)


CASES = [
    # N, C, K, groups, H, W, R, S, sh, dh, dw, pt, pl, OW
    (1, 3, 5, 1, 1, 300, 1, 3, 1, 1, 1, 0, 1, 300),       # 1-D, partial block, both edges
    (2, 4, 8, 2, 1, 257, 1, 5, 1, 1, 7, 0, 28, 257),      # grouped, dilated, wide padding
    (1, 6, 9, 3, 1, 200, 1, 2, 1, 1, 3, 0, -5, 150),      # negative left padding
    (2, 2, 9, 1, 5, 130, 3, 2, 2, 2, 1, 1, 0, 129),       # 2-D rows with skipped tap rows
    (1, 1, 4, 1, 1, 40, 1, 9, 1, 1, 20, 0, 90, 221),      # window wider than the row
    (3, 8, 13, 1, 1, 1000, 1, 1, 1, 1, 1, 0, 0, 1000),    # 1x1, many interior tiles
    (1, 5, 3, 1, 1, 17, 1, 4, 1, 1, 1, 0, 3, 17),         # shorter than one tile
    # many channels: the reduction runs in L1-sized chunks (see test_chunked_cases_chunk)
    (1, 160, 10, 1, 1, 400, 1, 5, 1, 1, 30, 0, 50, 400),
    (2, 256, 6, 2, 3, 230, 2, 3, 1, 2, 9, 1, 4, 220),
]
CHUNKED = CASES[-2:]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:8])))
@pytest.mark.parametrize("nthreads", [1, 3])
def test_correlate_matches_reference(kmods, dtype, rtol, case, nthreads):
    rk = kmods.rows
    N, C, K, groups, H, W, R, S, sh, dh, dw, pt, pl, OW = case
    rng = np.random.default_rng(sum(case))
    OH = (H + 2 * pt - (R - 1) * dh - 1) // sh + 1
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    w = rng.standard_normal((K, C // groups, R, S)).astype(dtype)
    rows = row_table(OH, R, H, sh, dh, pt)
    size = rk.scratch_size(C // groups, K // groups, R, S, dw, dtype.name)
    for bias, alpha, beta in [(None, 1.0, 0.0), (rng.standard_normal(K).astype(dtype), -0.5,
                                                 0.75)]:
        y0 = rng.standard_normal((N, K, OH, OW)).astype(dtype)
        y = y0.copy()
        if beta == 0:
            y[...] = np.nan  # beta == 0 must not read y
        scratch = np.full((nthreads, size), np.nan, dtype)  # the kernel must not read junk
        rk.correlate(x, pack(w, groups, rk.KB), y, np.zeros(0, dtype) if bias is None
                     else bias, rows, dw, pl, alpha, beta, scratch, nthreads)
        ref = ref_correlate(x, w, y0, bias, rows, dw, pl, groups, alpha, beta)
        err = np.abs(y - ref).max()
        assert err <= rtol * max(np.abs(ref).max(), 1) * max(1, C * R * S / 16), err


@pytest.mark.parametrize("case", CHUNKED, ids=lambda c: "x".join(map(str, c[:8])))
def test_chunked_cases_chunk(kmods, dtype, case):
    # the last CASES must split their reduction, or the chunked path goes untested
    N, C, K, groups, H, W, R, S, sh, dh, dw, pt, pl, OW = case
    assert kmods.rows.reduction_chunk(C // groups, R, S, dw, dtype.name) < C // groups


def test_correlate_same_result_on_any_thread_count(kmods):
    rk = kmods.rows
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 16, 1, 2000)).astype(np.float32)
    w = rng.standard_normal((12, 16, 1, 3)).astype(np.float32)
    rows = np.zeros((1, 1), np.int64)
    results = []
    for nt in (1, 2, 5):
        y = np.empty((2, 12, 1, 1998), np.float32)
        scratch = np.empty((nt, rk.scratch_size(16, 12, 1, 3, 1, "float32")), np.float32)
        rk.correlate(x, pack(w, 1, rk.KB), y, np.zeros(0, np.float32), rows, 1, 0, 1.0, 0.0,
                     scratch, nt)
        results.append(y)
    assert all(np.array_equal(results[0], r) for r in results[1:])


def test_correlate_refuses_bad_arguments(kmods):
    rk = kmods.rows
    f = np.float32
    x = np.zeros((1, 4, 2, 50), f)
    w = pack(np.zeros((6, 4, 2, 3), f), 1, rk.KB)
    y = np.zeros((1, 6, 1, 48), f)
    rows = np.array([[0, 1]], np.int64)
    scratch = np.zeros((2, rk.scratch_size(4, 6, 2, 3, 1, "float32")), f)
    none = np.zeros(0, f)
    rk.correlate(x, w, y, none, rows, 1, 0, 1.0, 0.0, scratch, 2)  # the valid call
    with pytest.raises(ValueError, match="rows"):
        rk.correlate(x, w, y, none, np.array([[0, 2]], np.int64), 1, 0, 1.0, 0.0, scratch, 2)
    with pytest.raises(ValueError, match="rows"):
        rk.correlate(x, w, y, none, np.array([[0, -2]], np.int64), 1, 0, 1.0, 0.0, scratch, 2)
    with pytest.raises(ValueError, match="rows must be"):
        rk.correlate(x, w, y, none, np.zeros((2, 2), np.int64), 1, 0, 1.0, 0.0, scratch, 2)
    with pytest.raises(ValueError, match="scratch"):
        rk.correlate(x, w, y, none, rows, 1, 0, 1.0, 0.0,
                     np.zeros((2, scratch.shape[1] - 1), f), 2)
    with pytest.raises(ValueError, match="scratch"):
        rk.correlate(x, w, y, none, rows, 1, 0, 1.0, 0.0, scratch, 3)
    with pytest.raises(ValueError, match="bias"):
        rk.correlate(x, w, y, np.zeros(5, f), rows, 1, 0, 1.0, 0.0, scratch, 2)
    with pytest.raises(ValueError, match="output channels"):
        rk.correlate(x, w, np.zeros((1, 12, 1, 48), f), none, rows, 1, 0, 1.0, 0.0, scratch, 2)
    with pytest.raises(ValueError, match="inconsistent"):
        rk.correlate(np.zeros((1, 5, 2, 50), f), w, y, none, rows, 1, 0, 1.0, 0.0, scratch, 2)
    with pytest.raises(ValueError, match="dw"):
        rk.correlate(x, w, y, none, rows, 0, 0, 1.0, 0.0, scratch, 2)
    with pytest.raises(ValueError, match="last axis"):
        rk.correlate(x, np.zeros((1, 2, 4, 2, 3, rk.KB + 1), f), y, none, rows, 1, 0, 1.0,
                     0.0, scratch, 2)
