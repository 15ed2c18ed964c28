"""algo="gemm" on every shape: im2col in bounded chunks, all three passes, against the
float64 reference (and PyTorch when installed).

Covered: odd sizes, stride, dilation, asymmetric padding, groups, depthwise (with a channel
multiplier), NHWC, batch 1, one-pixel outputs, kernels larger than the unpadded input,
padding modes, transposed convolution, out / alpha / beta, chunking forced down to single
pixels, the same bits at any thread count (every pass), NaN / Inf as in the reference, and
a workspace figure that bounds what a call allocates.
"""

import tracemalloc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cconv
from cconv._geometry import make_geometry
from cconv.algorithms import REGISTRY, gemm_schedule
from support.checks import assert_close
from support.reference import (
    ref_backward_data,
    ref_backward_weight,
    ref_conv2d,
    ref_conv_transpose2d,
    ref_conv_transpose2d_backward_data,
    ref_conv_transpose2d_backward_weight,
    resolve_padding,
)
from support.strategies import (
    MEMORY_FORMS,
    build_conv_case,
    conv_cases,
    from_layout,
    random_array,
    to_layout,
    transpose_cases,
    weight_from_layout,
    weight_to_layout,
    with_memory,
)

GEMM = REGISTRY["gemm"]
F32_64 = (np.float32, np.float64)


def _ref_y(case):
    return ref_conv2d(case.x64, case.w64, case.b64, case.stride, case.pads, case.dilation,
                      case.groups)


def _ref_dx(case, g64):
    return ref_backward_data(g64, case.w64, (case.n, case.c, case.h, case.w), case.stride,
                             case.pads, case.dilation, case.groups)


def _ref_dw(case, g64):
    return ref_backward_weight(g64, case.x64, case.w64.shape, case.stride, case.pads,
                               case.dilation, case.groups)


def _all_passes(case, g, **extra):
    """(y, dx, dw) of algo="gemm", each in logical NCHW / OIHW order."""
    kw = dict(case.kwargs, algo="gemm", **extra)
    y = cconv.conv2d(case.x, case.weight, case.bias, **kw)
    dx = cconv.conv2d_backward_data(g, case.weight, case.x_shape, **kw)
    dw = cconv.conv2d_backward_weight(g, case.x, case.weight_shape, **kw)
    return (from_layout(y, case.layout), from_layout(dx, case.layout),
            weight_from_layout(dw, case.weight_layout))


def _check_all_passes(case, g64, g, **extra):
    y, dx, dw = _all_passes(case, g, **extra)
    rdt = case.result_dtype
    assert_close(y, _ref_y(case), rdt, what="forward")
    assert_close(dx, _ref_dx(case, g64), np.result_type(g.dtype, case.weight.dtype),
                 what="backward_data")
    assert_close(dw, _ref_dw(case, g64), np.result_type(g.dtype, case.x.dtype),
                 what="backward_weight")


# --------------------------------------------------------------------------------------------
# every shape, every pass, against the reference
# --------------------------------------------------------------------------------------------

@given(case=conv_cases(max_c=12, max_hw=13), g_mem=st.sampled_from(MEMORY_FORMS))
def test_every_pass_matches_reference(case, g_mem):
    g64, g = case.grad_out(memory=g_mem)
    _check_all_passes(case, g64, g)


EDGE_SHAPES = {  # name: (N, C, K, H, W, R, S, keywords)
    "batch1_odd": (1, 3, 5, 7, 11, 3, 5, dict(stride=(2, 3), padding=((2, 0), (1, 3)))),
    "one_pixel_output": (2, 4, 3, 5, 5, 5, 5, dict()),
    "one_pixel_strided": (1, 2, 3, 4, 6, 3, 3, dict(stride=9, padding=1)),
    "kernel_beyond_input": (2, 3, 4, 2, 3, 5, 4, dict(padding=((2, 3), (1, 2)))),
    "one_by_one_input": (3, 2, 2, 1, 1, 3, 3, dict(padding=1)),
    "padded_1x1": (2, 5, 3, 4, 6, 1, 1, dict(padding=((1, 0), (2, 1)))),
    "padded_1x1_strided": (2, 4, 6, 7, 5, 1, 1, dict(stride=3, padding=2)),
    "stride_beyond_kernel": (2, 3, 2, 11, 10, 2, 2, dict(stride=(4, 3))),
    "dilated": (1, 4, 4, 13, 12, 3, 3, dict(dilation=(3, 2), padding=(2, 3))),
    "grouped": (2, 6, 9, 8, 7, 3, 3, dict(groups=3, padding=1, stride=2)),
    "depthwise": (2, 5, 5, 9, 8, 3, 3, dict(groups=5, padding="same")),
    "depthwise_multiplier": (1, 3, 6, 7, 7, 5, 3, dict(groups=3, padding=(2, 1), stride=2)),
    "one_channel": (2, 1, 4, 9, 9, 3, 3, dict(padding="same_lower")),
    "wide_kernel": (1, 2, 3, 4, 20, 1, 7, dict(padding=((0, 0), (3, 3)))),
}


@pytest.mark.parametrize("dtype", F32_64)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("name", sorted(EDGE_SHAPES))
def test_edge_shapes_match_reference(name, layout, dtype):
    n, c, k, h, w, r, s, kw = EDGE_SHAPES[name]
    case = build_conv_case(n, c, k, h, w, r, s, layout=layout, x_dtype=dtype, seed=7, **kw)
    g64, g = case.grad_out()
    _check_all_passes(case, g64, g)


@pytest.mark.parametrize("mode", ["reflect", "symmetric", "replicate", "circular",
                                  "constant"])
def test_padding_modes(mode):
    # The algorithms see zero padding only (the input is padded beforehand): gemm runs the
    # padded problem like any other.
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 7, 9))
    w = rng.standard_normal((6, 2, 3, 3))
    pads = ((2, 1), (1, 2))
    extra = dict(padding_value=1.5) if mode == "constant" else {}
    np_mode = {"replicate": "edge", "circular": "wrap"}.get(mode, mode)
    np_extra = dict(constant_values=1.5) if mode == "constant" else {}
    xp = np.pad(x, ((0, 0), (0, 0)) + pads, mode=np_mode, **np_extra)
    y = cconv.conv2d(x, w, padding=pads, padding_mode=mode, groups=2, algo="gemm", **extra)
    assert_close(y, ref_conv2d(xp, w, groups=2), np.float64, what=f"forward {mode}")


# --------------------------------------------------------------------------------------------
# out / alpha / beta
# --------------------------------------------------------------------------------------------

@given(case=conv_cases(max_c=8, max_hw=10, dtypes=F32_64, mixed=False),
       alpha=st.sampled_from([1.0, 0.5, -2.0]), beta=st.sampled_from([0.0, 1.0, -0.75]),
       data=st.data())
def test_out_alpha_beta(case, alpha, beta, data):
    dtype = case.x_dtype
    rng = np.random.default_rng(case.seed + 2)
    g64, g = case.grad_out()
    kw = dict(case.kwargs, algo="gemm", alpha=alpha, beta=beta)
    targets = [
        ("forward", case.out_shape_nchw, _ref_y(case),
         lambda out: cconv.conv2d(case.x, case.weight, case.bias, out=out, **kw)),
        ("backward_data", (case.n, case.c, case.h, case.w), _ref_dx(case, g64),
         lambda out: cconv.conv2d_backward_data(g, case.weight, case.x_shape, out=out, **kw)),
    ]
    for what, shape, ref, call in targets:
        old = random_array(rng, shape, dtype)
        out = with_memory(to_layout(old.copy(), case.layout),
                          data.draw(st.sampled_from(["C", "F", "sliced"]), label="out memory"))
        if beta == 0:
            out[...] = np.nan  # beta == 0 never reads out
        got = call(out)
        assert got is out
        assert_close(from_layout(out, case.layout), alpha * ref + beta * old.astype(np.float64),
                     dtype, what=what)
    wold = random_array(rng, case.weight_shape, dtype)
    wout = wold.copy()
    cconv.conv2d_backward_weight(g, case.x, case.weight_shape, out=wout, **kw)
    ref_w = weight_to_layout(_ref_dw(case, g64), case.weight_layout)
    assert_close(wout, alpha * ref_w + beta * wold.astype(np.float64), dtype,
                 what="backward_weight")


# --------------------------------------------------------------------------------------------
# transposed convolution (forward = backward-data; its gradients = forward, backward-weight)
# --------------------------------------------------------------------------------------------

@given(case=transpose_cases(max_c=10, max_hw=8), g_mem=st.sampled_from(MEMORY_FORMS))
def test_conv_transpose2d_all_passes(case, g_mem):
    kw = dict(case.kwargs, algo="gemm")
    y = cconv.conv_transpose2d(case.x, case.weight, case.bias, **kw)
    assert y.shape == case.out_shape
    assert_close(from_layout(y, case.layout),
                 ref_conv_transpose2d(case.x64, case.w64, case.b64, case.stride, case.pads,
                                      case.output_padding, case.dilation, case.groups),
                 case.dtype, what="conv_transpose2d")
    g64, g = case.grad_out(g_mem)
    dx = cconv.conv_transpose2d_backward_data(g, case.weight, case.x_shape, **kw)
    assert_close(from_layout(dx, case.layout),
                 ref_conv_transpose2d_backward_data(g64, case.w64, case.x64.shape, case.stride,
                                                    case.pads, case.dilation, case.groups),
                 case.dtype, what="conv_transpose2d_backward_data")
    dw = cconv.conv_transpose2d_backward_weight(g, case.x, case.weight_shape, **kw)
    assert_close(weight_from_layout(dw, case.weight_layout),
                 ref_conv_transpose2d_backward_weight(g64, case.x64, case.w64.shape,
                                                      case.stride, case.pads, case.dilation,
                                                      case.groups),
                 case.dtype, what="conv_transpose2d_backward_weight")


# --------------------------------------------------------------------------------------------
# chunking
# --------------------------------------------------------------------------------------------

def _covers_once(geom, plan):
    hits = np.zeros((geom.N, geom.OH, geom.OW), np.int64)
    for chunk in plan:
        hits[slice(*chunk.images), slice(*chunk.rows), slice(*chunk.cols)] += 1
    return bool((hits == 1).all())


@given(n=st.integers(1, 4), c=st.integers(1, 9), k=st.integers(1, 9), h=st.integers(1, 30),
       w=st.integers(1, 30), r=st.integers(1, 4), s=st.integers(1, 4),
       stride=st.integers(1, 3), pad=st.integers(0, 2),
       budget=st.sampled_from([1, 500, 4000, 30000, 10**6, 10**9]))
def test_chunks_tile_the_output_within_the_budget(n, c, k, h, w, r, s, stride, pad, budget):
    if h + 2 * pad < r or w + 2 * pad < s:
        return
    geom = make_geometry((n, c, h, w), (k, c, r, s), stride=stride, padding=pad)
    plan = gemm_schedule.plan(geom, budget)
    assert _covers_once(geom, plan)
    assert plan.largest == next(iter(plan))
    for chunk in plan:
        size = ColumnSize(chunk)
        assert size.pixels >= 1
        fits = gemm_schedule.chunk_bytes(geom, *size.extent) <= budget
        assert fits or size.extent == (1, 1, 1), (chunk, budget)
        assert all(a <= b for a, b in zip(size.extent, ColumnSize(plan.largest).extent))
    if gemm_schedule.chunk_bytes(geom, n, geom.OH, geom.OW) <= budget:
        assert len(plan) == 1  # everything fits: one chunk, one matrix product


class ColumnSize:
    """A chunk's (images, rows, cols) and pixel count."""

    def __init__(self, chunk):
        self.extent = tuple(b - a for a, b in chunk)
        self.pixels = chunk.pixels


CHUNK_CASES = {  # name: (N, C, K, H, W, R, S, keywords, budget): each budget forces a kind
    "pixel_runs": (2, 3, 4, 9, 10, 3, 3, dict(padding=1, stride=(1, 2)), 1),
    "short_runs": (2, 3, 4, 9, 10, 3, 3, dict(padding=((0, 2), (1, 0)), dilation=2), 700),
    "row_bands": (2, 4, 6, 12, 11, 3, 3, dict(padding=1, groups=2), 3000),
    "image_groups": (5, 3, 4, 6, 7, 3, 2, dict(padding=(1, 0)), 9000),
    "depthwise_bands": (2, 6, 6, 10, 9, 3, 3, dict(groups=6, padding=1, stride=2), 1500),
}


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("name", sorted(CHUNK_CASES))
def test_tiny_chunks_give_the_unchunked_result(name, layout, monkeypatch):
    n, c, k, h, w, r, s, kw, budget = CHUNK_CASES[name]
    case = build_conv_case(n, c, k, h, w, r, s, layout=layout, x_dtype=np.float64, seed=11,
                           **kw)
    g64, g = case.grad_out()
    whole = _all_passes(case, g)
    geom = make_geometry(case.x_shape, case.weight_shape, dtype=np.float64, **case.kwargs)
    assert len(gemm_schedule.plan(geom, gemm_schedule.CHUNK_BUDGET_BYTES)) == 1
    monkeypatch.setattr(gemm_schedule, "CHUNK_BUDGET_BYTES", budget)
    plan = gemm_schedule.plan(geom, budget)
    assert len(plan) > 2  # really chunked
    chunked = _all_passes(case, g)
    for what, a, b in zip(("forward", "backward_data", "backward_weight"), whole, chunked):
        assert_close(b, a, np.float64, rtol=1e-12, what=f"{what} chunked vs whole")
    _check_all_passes(case, g64, g)  # and against the reference, still chunked


# --------------------------------------------------------------------------------------------
# threads: the same bits at any thread count; BLAS's own setting left as it was
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("budget", [None, 12000])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("dtype", F32_64)
def test_bitwise_identical_at_any_thread_count(dtype, layout, budget, monkeypatch):
    if budget is not None:  # many chunks, more than any thread count here
        monkeypatch.setattr(gemm_schedule, "CHUNK_BUDGET_BYTES", budget)
    case = build_conv_case(3, 16, 24, 41, 37, 3, 3, stride=(1, 2), padding=((1, 2), (0, 1)),
                           groups=2, layout=layout, x_dtype=dtype, seed=5)
    geom = make_geometry(case.x_shape, case.weight_shape, dtype=dtype, **case.kwargs)
    chunks = len(GEMM(geom)._chunked.plan())
    assert chunks > (10 if budget else 2)
    _, g = case.grad_out()
    runs = [_all_passes(case, g, num_threads=t) for t in (1, 2, 3)]
    for other in runs[1:]:
        for what, a, b in zip(("forward", "backward_data", "backward_weight"), runs[0], other):
            assert np.array_equal(a, b), what


def test_leaves_the_blas_thread_count_as_it_was():
    from threadpoolctl import threadpool_info

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    before = blas_threads()
    x = np.ones((2, 4, 9, 9), np.float32)
    w = np.ones((3, 4, 3, 3), np.float32)
    cconv.conv2d(x, w, padding=1, algo="gemm", num_threads=1)
    cconv.conv2d_backward_weight(np.ones((2, 3, 9, 9), np.float32), x, w.shape, padding=1,
                                 algo="gemm", num_threads=2)
    assert blas_threads() == before


# --------------------------------------------------------------------------------------------
# NaN and Inf land where they do in the float64 reference
# --------------------------------------------------------------------------------------------

SPECIAL_GEOMS = {  # name: (x shape NCHW, weight shape OIHW, keywords)
    "padded_3x3": ((2, 3, 6, 7), (4, 3, 3, 3), dict(padding=1)),
    "strided_dilated": ((1, 4, 11, 9), (4, 2, 3, 2), dict(stride=2, dilation=(2, 1),
                                                           padding=((2, 0), (1, 1)), groups=2)),
    "depthwise": ((1, 3, 7, 8), (6, 1, 3, 3), dict(groups=3, padding=2)),
    "padded_1x1": ((2, 3, 5, 4), (2, 3, 1, 1), dict(padding=1, stride=2)),
}
SPECIALS = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}


def _same_specials(got, ref, what):
    got = np.asarray(got, np.float64)
    for test in (np.isnan, np.isposinf, np.isneginf):
        assert np.array_equal(test(got), test(ref)), f"{what}: {test.__name__} pattern differs"
    fin = np.isfinite(ref)
    assert np.allclose(got[fin], ref[fin], rtol=1e-4, atol=1e-4), f"{what}: finite values"


@pytest.mark.parametrize("budget", [None, 1])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("special", sorted(SPECIALS))
@pytest.mark.parametrize("geom", sorted(SPECIAL_GEOMS))
def test_nan_and_inf_propagate_like_reference(geom, special, layout, budget, monkeypatch):
    if budget is not None:
        monkeypatch.setattr(gemm_schedule, "CHUNK_BUDGET_BYTES", budget)
    xs, ws, kw = SPECIAL_GEOMS[geom]
    value = SPECIALS[special]
    rng = np.random.default_rng(2)
    x = rng.random(xs) + 0.5  # no zeros: 0 * Inf would blur the pattern
    w = rng.random(ws) + 0.5
    stride, dil = kw.get("stride", 1), kw.get("dilation", 1)
    pads = resolve_padding(kw.get("padding", 0), xs[2:], ws[2:], stride, dil)
    rk = dict(stride=stride, pads=pads, dilation=dil, groups=kw.get("groups", 1))
    call = dict(kw, layout=layout, algo="gemm")
    lay = lambda a: to_layout(a, layout)  # noqa: E731
    back = lambda a: from_layout(a, layout)  # noqa: E731
    xv = x.copy()
    xv[0, 1, xs[2] // 2, xs[3] // 2] = value
    xv[-1, -1, 0, -1] = value  # a corner, seen through the padding
    wv = w.copy()
    wv[-1, 0, 0, -1] = value  # meets the zero padding: 0 * Inf = NaN there, as defined
    with np.errstate(invalid="ignore", over="ignore"):
        for what, xx, ww in (("x", xv, w), ("w", x, wv)):
            ref = ref_conv2d(xx, ww, None, **rk)
            _same_specials(back(cconv.conv2d(lay(xx), ww, **call)), ref, f"forward, {what}")
        gy = rng.random(ref.shape) + 0.5
        gv = gy.copy()
        gv[0, 0, ref.shape[2] // 2, ref.shape[3] // 2] = value
        for what, gg, ww in (("dy", gv, w), ("w", gy, wv)):
            ref = ref_backward_data(gg, ww, xs, **rk)
            got = cconv.conv2d_backward_data(lay(gg), ww, lay(x).shape, **call)
            _same_specials(back(got), ref, f"backward_data, {what}")
        for what, gg, xx in (("dy", gv, x), ("x", gy, xv)):
            ref = ref_backward_weight(gg, xx, ws, **rk)
            got = cconv.conv2d_backward_weight(lay(gg), lay(xx), ws, **call)
            _same_specials(got, ref, f"backward_weight, {what}")


# --------------------------------------------------------------------------------------------
# the contract: every shape usable; an honest workspace figure
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["forward", "backward_data", "backward_weight"])
@pytest.mark.parametrize("xs, ws, kw", [
    ((1, 4, 9, 9), (4, 4, 3, 3), dict(padding=1)),
    ((2, 6, 11, 9), (4, 3, 5, 5), dict(padding="same", groups=2, stride=2)),
    ((1, 4, 8, 8), (8, 1, 3, 3), dict(groups=4, dilation=2)),
    ((1, 3, 5, 5), (2, 3, 1, 1), dict(padding=1)),
])
def test_find_algorithms_lists_gemm_everywhere(op, xs, ws, kw):
    geom = make_geometry(xs, ws, **kw)
    assert GEMM.why_not(geom, op) is None
    algos = [r.algo for r in cconv.find_algorithms(xs, ws, op=op, **kw)]
    assert "gemm" in algos and "direct" in algos


WORKSPACE_CASES = [  # (x shape NCHW, weight shape, keywords, budget)
    ((4, 16, 30, 30), (24, 16, 3, 3), dict(padding=1), None),
    ((2, 8, 40, 40), (8, 8, 5, 5), dict(padding=2, stride=2), 1 << 16),
    ((3, 20, 17, 19), (12, 10, 3, 5), dict(padding=((1, 0), (2, 1)), groups=2, dilation=(2, 1),
                                           layout="NHWC"), 1 << 16),
]


@pytest.mark.parametrize("nthreads", [1, 2])
@pytest.mark.parametrize("op", ["forward", "backward_data", "backward_weight"])
@pytest.mark.parametrize("xs, ws, kw, budget", WORKSPACE_CASES)
def test_workspace_bounds_what_a_call_allocates(xs, ws, kw, budget, op, nthreads,
                                                monkeypatch):
    if budget is not None:
        monkeypatch.setattr(gemm_schedule, "CHUNK_BUDGET_BYTES", budget)
    layout = kw.get("layout", "NCHW")
    shape = xs if layout == "NCHW" else (xs[0], xs[2], xs[3], xs[1])
    geom = make_geometry(shape, ws, **kw)
    impl = GEMM(geom)
    rng = np.random.default_rng(0)

    def operand(nchw):  # a logical NCHW view of memory in the layout
        a = rng.standard_normal(nchw).astype(np.float32)
        return from_layout(to_layout(a, layout), layout)

    x, dy = operand(xs), operand((geom.N, geom.K, geom.OH, geom.OW))
    w = rng.standard_normal(ws).astype(np.float32)
    out = np.empty_like(dy) if op == "forward" else np.empty_like(x)
    run = {"forward": lambda: impl.forward(x, w, None, out, 1.0, 0.0, nthreads),
           "backward_data": lambda: impl.backward_data(dy, w, out, 1.0, 0.0, nthreads),
           "backward_weight": lambda: impl.backward_weight(dy, x, nthreads)}[op]
    run()  # first calls set up BLAS, thread pools and caches
    tracemalloc.start()
    try:
        run()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    reported = impl.workspace_bytes(op, nthreads)
    result = w.nbytes if op == "backward_weight" else 0
    # slack: NumPy's ufunc buffers (8192 elements per operand) and small Python objects
    assert peak <= reported + result + (1 << 17), (peak, reported)
    if nthreads == 1:  # and not a wild overestimate
        assert reported <= 1.25 * peak, (peak, reported)


# --------------------------------------------------------------------------------------------
# PyTorch
# --------------------------------------------------------------------------------------------

@given(case=conv_cases(max_c=10, max_hw=12, dtypes=F32_64))
def test_matches_torch(case):
    pytest.importorskip("torch")
    from support.torch_ops import torch_conv2d

    rdt = case.result_dtype
    g64, g = case.grad_out(rdt)
    y_t, dx_t, dw_t, _ = torch_conv2d(case.x64, case.w64, case.b64, case.stride, case.pads,
                                      case.dilation, case.groups, g64)
    y, dx, dw = _all_passes(case, g)
    assert_close(y, y_t, rdt, what="forward vs torch")
    assert_close(dx, dx_t, rdt, what="backward_data vs torch")
    assert_close(dw, dw_t, rdt, what="backward_weight vs torch")
