"""The paths a small call takes: the NCHW depthwise / few-channel kernels' one-thread loop
(no OpenMP region) against their parallel loop, the forward's input bands shared by a
group's output channels, and the band buffers kept per calling thread."""

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import cconv
from cconv.algorithms import depthwise
from support.checks import assert_close
from support.reference import ref_backward_data, ref_backward_weight, ref_conv2d

# (N, groups, Cg, Kg, H, W, R, S, stride, pads): few channels per group, several output
# channels per group (they share the group's input bands), odd sizes, 1-pixel outputs.
GROUPED = [
    (1, 1, 4, 4, 8, 8, 3, 3, (1, 1), ((1, 1), (1, 1))),  # the tiny call
    (2, 2, 3, 5, 9, 7, 3, 3, (1, 1), ((1, 1), (1, 1))),
    (3, 3, 2, 3, 11, 13, 5, 3, (2, 1), ((2, 1), (0, 1))),
    (1, 1, 3, 32, 17, 19, 3, 3, (1, 1), ((1, 1), (1, 1))),  # RGB-like bank
    (2, 4, 1, 2, 6, 5, 3, 3, (2, 2), ((1, 1), (1, 1))),  # depthwise multiplier 2
    (1, 2, 4, 1, 3, 3, 3, 3, (1, 1), ((0, 0), (0, 0))),  # one output pixel
]


def _operands(case, dtype, seed=0):
    N, groups, cg, kg, H, W, R, S = case[:8]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, groups * cg, H, W)).astype(dtype)
    w = rng.standard_normal((groups * kg, cg, R, S)).astype(dtype)
    return x, w


def _kw(case):
    return dict(stride=case[8], padding=case[9], groups=case[1])


def _ref_kw(case):
    return dict(stride=case[8], pads=case[9], groups=case[1])


def _bitwise_on_any_thread_count(passes, thread_counts=(1, 2, 3)):
    """``passes(threads)`` (a tuple of results) at each thread count; asserts every count
    gives the first's results bit for bit and returns them by count."""
    runs = {threads: passes(threads) for threads in thread_counts}
    first = runs[thread_counts[0]]
    for threads in thread_counts[1:]:
        for a, b in zip(first, runs[threads]):
            assert np.array_equal(a, b), f"{threads} threads differ from {thread_counts[0]}"
    return runs


@pytest.mark.parametrize("case", GROUPED)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_thread_loop_equals_the_parallel_loop(case, dtype):
    """Every NCHW pass of the few-channel kernels: one thread (the plain loop) against 2, 3
    and 5 (the OpenMP loop) bit for bit, and both against the float64 reference."""
    x, w = _operands(case, dtype)
    kw = _kw(case)
    y_ref = ref_conv2d(x.astype(np.float64), w.astype(np.float64), **_ref_kw(case))
    gy = np.random.default_rng(1).standard_normal(y_ref.shape).astype(dtype)
    dx_ref = ref_backward_data(gy.astype(np.float64), w.astype(np.float64), x.shape,
                               **_ref_kw(case))
    dw_ref = ref_backward_weight(gy.astype(np.float64), x.astype(np.float64), w.shape,
                                 **_ref_kw(case))
    runs = _bitwise_on_any_thread_count(lambda threads: (
        cconv.conv2d(x, w, algo="depthwise", num_threads=threads, **kw),
        cconv.conv2d_backward_data(gy, w, x.shape, algo="depthwise", num_threads=threads,
                                   **kw),
        cconv.conv2d_backward_weight(gy, x, w.shape, algo="depthwise", num_threads=threads,
                                     **kw)), (1, 2, 3, 5))
    for threads, got in runs.items():
        for value, ref, what in zip(got, (y_ref, dx_ref, dw_ref), ("forward", "data", "weight")):
            assert_close(value, ref, dtype, what=f"{what}, {threads} threads")


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("mode", ["zeros", "reflect"])
def test_bands_shared_by_a_group_are_refilled_per_band(monkeypatch, threads, mode):
    """Bands of a few rows (budget forced small): a thread's run of jobs crosses bands,
    groups and images, and each needs its own fill (forward: the group's input bands;
    backward-data: its output channels' gradient bands)."""
    monkeypatch.setattr(depthwise, "BAND_BYTES", 1)
    monkeypatch.setattr(depthwise, "COLUMN_BAND_BYTES", 1)
    monkeypatch.setattr(depthwise, "MIN_BAND_ROWS", 1)
    monkeypatch.setattr(depthwise, "COLUMN_MIN_BAND_ROWS", 1)
    case = (2, 3, 2, 4, 23, 10, 3, 3, (1, 1), ((1, 1), (1, 1)))
    x, w = _operands(case, np.float64, seed=5)
    plan = cconv.plan_conv2d(x.shape, w.shape, dtype=np.float64, algo="depthwise",
                             padding_mode=mode, **_kw(case))
    # a fresh instance: the cached one was laid out with the default budgets
    impl = depthwise.DepthwiseConvolution(plan.geometry)
    assert impl._nchw.forward_band(threads)[0] < case[4], "the case must be cut into bands"
    assert impl._nchw.backward_data_band(threads)[0] < case[4]
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="reflect") if mode != "zeros" else x
    pads = ((0, 0), (0, 0)) if mode != "zeros" else case[9]
    y = np.empty((2, 12, 23, 10))
    impl.forward(x, w, None, y, 1.0, 0.0, threads)
    assert_close(y, ref_conv2d(xp, w, stride=case[8], pads=pads, groups=3), np.float64)
    gy = np.random.default_rng(6).standard_normal(y.shape)
    dx = np.empty_like(x)
    impl.backward_data(gy, w, dx, 1.0, 0.0, threads)
    dx_ref = ref_backward_data(gy, w, x.shape, **_ref_kw(case))
    if mode == "reflect":  # the padded input's gradient, folded onto the pixels copied
        dxp = ref_backward_data(gy, w, xp.shape, stride=case[8], groups=3)
        dx_ref = dxp[:, :, 1:-1, 1:-1].copy()
        dx_ref[:, :, 1, :] += dxp[:, :, 0, 1:-1]
        dx_ref[:, :, -2, :] += dxp[:, :, -1, 1:-1]
        dx_ref[:, :, :, 1] += dxp[:, :, 1:-1, 0]
        dx_ref[:, :, :, -2] += dxp[:, :, 1:-1, -1]
        for r, c, rr, cc in ((0, 0, 1, 1), (0, -1, 1, -2), (-1, 0, -2, 1), (-1, -1, -2, -2)):
            dx_ref[:, :, rr, cc] += dxp[:, :, r, c]
    assert_close(dx, dx_ref, np.float64)


def test_band_buffers_kept_per_thread_serve_concurrent_calls():
    """Sixteen Python threads, each alternating two tiny geometries whose band buffers are
    kept per calling thread: every result equals the one computed alone."""
    shapes = [((1, 4, 8, 8), (4, 4, 3, 3)), ((1, 3, 9, 6), (6, 3, 3, 3))]
    rng = np.random.default_rng(7)
    operands = [(rng.standard_normal(xs).astype(np.float32),
                 rng.standard_normal(ws).astype(np.float32)) for xs, ws in shapes]
    alone = [cconv.conv2d(x, w, padding=1, num_threads=1) for x, w in operands]
    barrier = threading.Barrier(16)

    def worker(_):
        barrier.wait()
        return all(np.array_equal(cconv.conv2d(*operands[i % 2], padding=1, num_threads=1),
                                  alone[i % 2]) for i in range(200))

    with ThreadPoolExecutor(16) as pool:
        assert all(pool.map(worker, range(16)))


def test_small_band_buffers_are_reused_and_large_ones_are_not():
    x = np.ones((1, 4, 8, 8), np.float32)
    w = np.ones((4, 4, 3, 3), np.float32)
    impl = depthwise.DepthwiseConvolution.for_geometry(
        cconv.plan_conv2d(x.shape, w.shape, padding=1).geometry)
    assert impl._scratch(100, 2) is impl._scratch(100, 2)
    assert impl._scratch(100, 2).shape == (2, 100)
    big = depthwise.SMALL_SCRATCH_BYTES // 4 + 1
    assert impl._scratch(big, 1) is not impl._scratch(big, 1)


@pytest.mark.parametrize("stride", [1, 2])
def test_direct_packing_and_tiles_one_thread_loop_equals_the_parallel_loop(stride):
    """The direct algorithm's input / weight packing and tile loops: one thread (plain
    loops) against 2 and 3 (OpenMP), bit for bit, on a layer large enough for threads."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 24, 41, 39)).astype(np.float32)  # >= 2 threads by flops
    w = rng.standard_normal((24, 12, 3, 3)).astype(np.float32)
    kw = dict(stride=stride, padding=1, groups=2, algo="direct")
    y_ref = ref_conv2d(x.astype(np.float64), w.astype(np.float64), stride=stride,
                       pads=((1, 1), (1, 1)), groups=2)
    gy = rng.standard_normal(y_ref.shape).astype(np.float32)
    runs = _bitwise_on_any_thread_count(lambda threads: (
        cconv.conv2d(x, w, num_threads=threads, **kw),
        cconv.conv2d_backward_data(gy, w, x.shape, num_threads=threads, **kw),
        cconv.conv2d_backward_weight(gy, x, w.shape, num_threads=threads, **kw)))
    for threads, got in runs.items():
        assert_close(got[0], y_ref, np.float32, what=f"forward, {threads} threads")


@pytest.mark.parametrize("kind", ["rows", "pointwise", "winograd"])
def test_other_kernels_one_thread_loop_equals_the_parallel_loop(kind):
    """The row kernels (a long 1-D convolution), the NCHW 1x1 product and Winograd: one
    thread (plain loops) against 2 and 3 (OpenMP), bit for bit, every pass they run, on
    shapes large enough for threads; and against the float64 reference."""
    rng = np.random.default_rng(13)
    if kind == "rows":
        x = rng.standard_normal((2, 16, 1, 2000)).astype(np.float32)
        w = rng.standard_normal((24, 16, 1, 5)).astype(np.float32)
        kw = dict(padding=((0, 0), (2, 2)), algo="direct")
    elif kind == "pointwise":
        x = rng.standard_normal((2, 64, 20, 21)).astype(np.float32)
        w = rng.standard_normal((48, 64, 1, 1)).astype(np.float32)
        kw = dict(algo="gemm")
    else:
        x = rng.standard_normal((2, 32, 18, 17)).astype(np.float32)
        w = rng.standard_normal((32, 32, 3, 3)).astype(np.float32)
        kw = dict(padding=1, algo="winograd")
    pads = cconv.plan_conv2d(x.shape, w.shape, **kw).geometry.pads
    y_ref = ref_conv2d(x.astype(np.float64), w.astype(np.float64), pads=pads)
    gy = rng.standard_normal(y_ref.shape).astype(np.float32)
    runs = _bitwise_on_any_thread_count(lambda threads: (
        cconv.conv2d(x, w, num_threads=threads, **kw),
        cconv.conv2d_backward_data(gy, w, x.shape, num_threads=threads, **kw)))
    for threads, got in runs.items():
        assert_close(got[0], y_ref, np.float32, what=f"{kind} forward, {threads} threads")
