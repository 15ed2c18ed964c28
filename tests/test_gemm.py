"""The GEMM path (algo="gemm"): 1x1, stride-1, unpadded convolutions, against the reference."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

import cconv
from support.reference import ref_backward_data, ref_backward_weight, ref_conv2d


def _close(got, want, dtype):
    scale = max(1.0, float(np.abs(want).max()))
    tol = 1e-4 if dtype == np.float32 else 1e-10
    assert np.abs(np.asarray(got, np.float64) - want).max() <= tol * scale


@st.composite
def gemm_cases(draw):
    groups = draw(st.integers(1, 3))
    cg, kg = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    n, h, w = draw(st.integers(1, 3)), draw(st.integers(1, 9)), draw(st.integers(1, 9))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    layout = draw(st.sampled_from(["NCHW", "NHWC"]))
    return n, groups * cg, h, w, groups * kg, groups, dtype, layout, draw(st.integers(0, 2**31))


def _to(layout, a):
    return a if layout == "NCHW" else np.ascontiguousarray(a.transpose(0, 2, 3, 1))


@given(gemm_cases())
def test_gemm_matches_reference_on_all_passes(case):
    n, c, h, w, k, groups, dtype, layout, seed = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    wt = rng.standard_normal((k, c // groups, 1, 1)).astype(dtype)
    b = rng.standard_normal(k).astype(dtype)
    gy = rng.standard_normal((n, k, h, w)).astype(dtype)
    kw = dict(groups=groups, layout=layout, algo="gemm")
    _close(cconv.conv2d(_to(layout, x), wt, b, **kw),
           _to(layout, ref_conv2d(x, wt, b, groups=groups)), dtype)
    _close(cconv.conv2d_backward_data(_to(layout, gy), wt, _to(layout, x).shape, **kw),
           _to(layout, ref_backward_data(gy, wt, x.shape, groups=groups)), dtype)
    _close(cconv.conv2d_backward_weight(_to(layout, gy), _to(layout, x), wt.shape, **kw),
           ref_backward_weight(gy, x, wt.shape, groups=groups), dtype)


@pytest.mark.parametrize("beta", [0.0, 1.5])
def test_gemm_out_alpha_beta_in_place(beta):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 16, 8, 8)).astype(np.float32)   # 64 pixels: the in-place path
    wt = rng.standard_normal((24, 16, 1, 1)).astype(np.float32)
    out = rng.standard_normal((2, 24, 8, 8)).astype(np.float32)
    old = out.copy()
    if beta == 0:
        out[0, 0, 0, 0] = np.nan  # beta == 0 never reads out
    res = cconv.conv2d(x, wt, algo="gemm", out=out, alpha=0.5, beta=beta)
    assert res is out
    _close(out, 0.5 * ref_conv2d(x, wt) + beta * old, np.float32)


@pytest.mark.parametrize("kw,reason", [(dict(padding=1), "padding"), (dict(stride=2), "stride")])
def test_gemm_refuses_other_shapes(kw, reason):
    x = np.ones((1, 2, 6, 6), np.float32)
    with pytest.raises(ValueError, match=reason):
        cconv.conv2d(x, np.ones((3, 2, 1, 1), np.float32), algo="gemm", **kw)
    with pytest.raises(ValueError, match="1x1"):
        cconv.conv2d(x, np.ones((3, 2, 3, 3), np.float32), algo="gemm")
