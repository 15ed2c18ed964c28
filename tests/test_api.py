"""Planning, algorithm search, threads, configuration report, array-likes."""

import numbers
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

import cconv
from support.checks import assert_close
from support.reference import ref_backward_data, ref_backward_weight, ref_conv2d
from support.strategies import conv_cases, from_layout, random_array, weight_from_layout

OPS = ("forward", "backward_data", "backward_weight")


def _geometry_kwargs(case):
    return {k: case.kwargs[k] for k in ("stride", "padding", "dilation", "groups", "layout",
                                        "weight_layout")}


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


# --------------------------------------------------------------------------------------------
# plan_conv2d
# --------------------------------------------------------------------------------------------

@given(case=conv_cases(max_c=12, max_hw=14, mixed=False, memory_forms=("C",)),
       dtype_as=st.sampled_from(["dtype", "str", "type"]))
def test_plan_matches_functional_api(case, dtype_as):
    dtype = {"dtype": case.x_dtype, "str": case.x_dtype.name,
             "type": case.x_dtype.type}[dtype_as]
    kw = _geometry_kwargs(case)
    plan = cconv.plan_conv2d(case.x_shape, case.weight_shape, dtype=dtype, **kw)
    y = cconv.conv2d(case.x, case.weight, case.bias, **kw)
    assert tuple(plan.output_shape) == y.shape == case.out_shape
    assert plan.algorithm in cconv.ALGORITHMS
    assert _is_int(plan.workspace_bytes) and plan.workspace_bytes >= 0

    yp = plan.forward(case.x, case.weight, case.bias)
    assert yp.shape == y.shape and yp.dtype == y.dtype
    ref = ref_conv2d(case.x64, case.w64, case.b64, case.stride, case.pads, case.dilation,
                     case.groups)
    assert_close(from_layout(yp, case.layout), ref, y.dtype, what="plan.forward")
    assert_close(yp, y.astype(np.float64), y.dtype, what="plan.forward vs conv2d")

    g64, g = case.grad_out()
    dx = plan.backward_data(g, case.weight)
    assert dx.shape == case.x_shape
    assert_close(from_layout(dx, case.layout),
                 ref_backward_data(g64, case.w64, (case.n, case.c, case.h, case.w), case.stride,
                                   case.pads, case.dilation, case.groups),
                 dx.dtype, what="plan.backward_data")
    assert_close(dx, cconv.conv2d_backward_data(g, case.weight, case.x_shape, **kw)
                 .astype(np.float64), dx.dtype)
    dw = plan.backward_weight(g, case.x)
    assert dw.shape == case.weight_shape
    assert_close(weight_from_layout(dw, case.weight_layout),
                 ref_backward_weight(g64, case.x64, case.w64.shape, case.stride, case.pads,
                                     case.dilation, case.groups),
                 dw.dtype, what="plan.backward_weight")
    assert_close(dw, cconv.conv2d_backward_weight(g, case.x, case.weight_shape, **kw)
                 .astype(np.float64), dw.dtype)


def test_plan_defaults_and_forward_out():
    rng = np.random.default_rng(51)
    x = random_array(rng, (2, 3, 9, 9), np.float32)
    w = random_array(rng, (4, 3, 3, 3), np.float32)
    plan = cconv.plan_conv2d(x.shape, w.shape)
    assert tuple(plan.output_shape) == (2, 4, 7, 7)
    out = np.full((2, 4, 7, 7), np.nan, np.float32)
    res = plan.forward(x, w, out=out)
    assert res is out
    assert_close(out, ref_conv2d(x, w), np.float32)


@pytest.mark.parametrize("algo", ["direct", "auto"])
def test_plan_explicit_algorithm(algo):
    plan = cconv.plan_conv2d((1, 4, 10, 10), (8, 4, 3, 3), padding=1, algo=algo)
    if algo == "direct":
        assert plan.algorithm == "direct"
    assert plan.algorithm in cconv.ALGORITHMS


def test_plan_winograd_only_where_it_applies():
    plan = cconv.plan_conv2d((1, 8, 12, 12), (8, 8, 3, 3), padding=1, algo="winograd")
    assert plan.algorithm == "winograd"
    with pytest.raises(ValueError):
        cconv.plan_conv2d((1, 8, 12, 12), (8, 8, 5, 5), padding=2, algo="winograd")
    plan = cconv.plan_conv2d((1, 8, 12, 12), (8, 8, 5, 5), padding=2)
    assert plan.algorithm != "winograd"


# --------------------------------------------------------------------------------------------
# find_algorithms and algo="find"
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("x_shape, w_shape, kw", [
    ((1, 8, 12, 12), (8, 8, 3, 3), dict(padding=1)),
    ((2, 6, 11, 9), (4, 3, 5, 5), dict(padding="same", groups=2)),
    ((1, 4, 10, 10), (6, 4, 3, 3), dict(stride=2)),
    ((1, 10, 9, 9), (3, 3, 5, 10), dict(weight_layout="HWIO", dilation=2, groups=2)),
])
def test_find_algorithms(op, x_shape, w_shape, kw):
    res = cconv.find_algorithms(x_shape, w_shape, op=op, **kw)
    assert isinstance(res, list) and len(res) >= 1
    times = []
    for r in res:
        assert isinstance(r, tuple) and len(r) == 3
        algo, time_ms, ws = r
        assert (r.algo, r.time_ms, r.workspace_bytes) == (algo, time_ms, ws)
        assert algo in cconv.ALGORITHMS
        assert algo not in ("auto", "find")
        assert isinstance(time_ms, numbers.Real) and time_ms >= 0
        assert _is_int(ws) and ws >= 0
        times.append(time_ms)
    assert times == sorted(times), "fastest first"
    algos = [r.algo for r in res]
    assert len(set(algos)) == len(algos)
    assert "direct" in algos
    r_, s_ = (w_shape[0], w_shape[1]) if kw.get("weight_layout") == "HWIO" else w_shape[2:]
    stride = kw.get("stride", 1)
    dilation = kw.get("dilation", 1)
    if not ((r_, s_) == (3, 3) and stride == 1 and dilation == 1):
        assert "winograd" not in algos, "find_algorithms listed an algorithm the shape cannot use"


def test_find_algorithms_accepts_dtype_and_threads():
    res = cconv.find_algorithms((1, 4, 8, 8), (4, 4, 3, 3), op="forward", padding=1,
                                dtype="float64", num_threads=1)
    assert len(res) >= 1


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("ksz, stride", [(3, 1), (5, 1), (3, 2), (1, 1)])
def test_algo_find_gives_the_direct_result(layout, ksz, stride):
    rng = np.random.default_rng(52)
    x = random_array(rng, (2, 8, 12, 12), np.float32)
    w = random_array(rng, (8, 8, ksz, ksz), np.float32)
    b = random_array(rng, (8,), np.float32)
    xl = x if layout == "NCHW" else np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    kw = dict(stride=stride, padding="same", layout=layout)
    direct = cconv.conv2d(xl, w, b, algo="direct", **kw)
    for _ in range(2):                       # second call uses the remembered winner
        found = cconv.conv2d(xl, w, b, algo="find", **kw)
        assert found.shape == direct.shape and found.dtype == direct.dtype
        assert_close(found, direct.astype(np.float64), np.float32)
    g = random_array(rng, direct.shape, np.float32)
    assert_close(cconv.conv2d_backward_data(g, w, xl.shape, algo="find", **kw),
                 cconv.conv2d_backward_data(g, w, xl.shape, algo="direct", **kw)
                 .astype(np.float64), np.float32)
    assert_close(cconv.conv2d_backward_weight(g, xl, w.shape, algo="find", **kw),
                 cconv.conv2d_backward_weight(g, xl, w.shape, algo="direct", **kw)
                 .astype(np.float64), np.float32)


# --------------------------------------------------------------------------------------------
# threads
# --------------------------------------------------------------------------------------------

@pytest.fixture
def restore_threads():
    before = cconv.get_num_threads()
    yield before
    cconv.set_num_threads(before)


def test_get_num_threads_is_positive_int():
    n = cconv.get_num_threads()
    assert _is_int(n) and n >= 1


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_set_get_num_threads_round_trip(restore_threads, n):
    cconv.set_num_threads(n)
    assert cconv.get_num_threads() == n


@pytest.mark.parametrize("num_threads", [1, 2, 3])
@pytest.mark.parametrize("op", ["forward", "backward_data", "backward_weight", "transpose"])
def test_num_threads_does_not_change_results(num_threads, op):
    rng = np.random.default_rng(53)
    x = random_array(rng, (3, 12, 15, 13), np.float64)
    w = random_array(rng, (10, 6, 3, 3), np.float64)
    g = random_array(rng, (3, 10, 15, 13), np.float64)
    kw = dict(padding=1, groups=2)
    if op == "forward":
        def f(**t):
            return cconv.conv2d(x, w, **kw, **t)
    elif op == "backward_data":
        def f(**t):
            return cconv.conv2d_backward_data(g, w, x.shape, **kw, **t)
    elif op == "backward_weight":
        def f(**t):
            return cconv.conv2d_backward_weight(g, x, w.shape, **kw, **t)
    else:
        wt = random_array(rng, (12, 5, 3, 3), np.float64)

        def f(**t):
            return cconv.conv_transpose2d(x, wt, stride=2, padding=1, groups=2, **t)
    default = f()
    threaded = f(num_threads=num_threads)
    np.testing.assert_allclose(threaded, default, rtol=1e-12, atol=1e-12)


def test_per_call_num_threads_does_not_change_global(restore_threads):
    cconv.set_num_threads(2)
    cconv.conv2d(np.ones((1, 2, 5, 5)), np.ones((2, 2, 3, 3)), num_threads=1)
    assert cconv.get_num_threads() == 2


def test_threadpool_limits_is_followed_and_restored(restore_threads):
    before = cconv.get_num_threads()
    with threadpool_limits(limits=1):
        assert cconv.get_num_threads() == 1
        y1 = cconv.conv2d(np.ones((1, 2, 6, 6)), np.ones((3, 2, 3, 3)))
    assert cconv.get_num_threads() == before
    np.testing.assert_array_equal(y1, 18.0)


def test_threadpool_limits_openmp_api(restore_threads):
    before = cconv.get_num_threads()
    with threadpool_limits(limits=1, user_api="openmp"):
        assert cconv.get_num_threads() == 1
    assert cconv.get_num_threads() == before


def test_set_num_threads_after_threadpool_limits(restore_threads):
    """The latest of set_num_threads / threadpool_limits wins."""
    with threadpool_limits(limits=1):
        cconv.set_num_threads(2)
        assert cconv.get_num_threads() == 2


def test_omp_num_threads_environment():
    root = os.path.dirname(os.path.dirname(os.path.abspath(cconv.__file__)))
    env = dict(os.environ, OMP_NUM_THREADS="3",
               PYTHONPATH=os.pathsep.join([root] + [p for p in sys.path if p]))
    out = subprocess.run(
        [sys.executable, "-c", "import cconv; print(cconv.get_num_threads())"],
        env=env, capture_output=True, text=True, timeout=120, cwd=root)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "3"


# --------------------------------------------------------------------------------------------
# show_config, array-likes
# --------------------------------------------------------------------------------------------

def test_show_config():
    cfg = cconv.show_config()
    assert isinstance(cfg, dict)
    for key in ("version", "simd", "openmp", "num_threads"):
        assert key in cfg, f"show_config() lacks {key!r}: {sorted(cfg)}"
    assert isinstance(cfg["version"], str) and cfg["version"]
    assert cfg["num_threads"] == cconv.get_num_threads()


def test_array_likes_are_accepted():
    x = [[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]]]        # (1, 1, 3, 3)
    w = [[[[1.0, 0.0], [0.0, -1.0]]], [[[0.5, 0.5], [0.5, 0.5]]]]     # (2, 1, 2, 2)
    b = (1.0, -1.0)
    y = cconv.conv2d(x, w, b)
    assert isinstance(y, np.ndarray)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, ref_conv2d(np.array(x), np.array(w), np.array(b)),
                               rtol=1e-12)
    np.testing.assert_allclose(y[0, 0], [[-3.0, -3.0], [-3.0, -3.0]])
    g = y.tolist()
    dx = cconv.conv2d_backward_data(g, w, (1, 1, 3, 3))
    np.testing.assert_allclose(dx, ref_backward_data(np.array(g), np.array(w), (1, 1, 3, 3)),
                               rtol=1e-12)
    dw = cconv.conv2d_backward_weight(g, x, [2, 1, 2, 2])
    np.testing.assert_allclose(dw, ref_backward_weight(np.array(g), np.array(x), (2, 1, 2, 2)),
                               rtol=1e-12)
    db = cconv.conv2d_backward_bias(g)
    np.testing.assert_allclose(db, np.array(g).sum(axis=(0, 2, 3)), rtol=1e-12)


def test_array_like_float32_scalars_keep_dtype():
    x = np.ones((1, 2, 4, 4), np.float32)
    w = [[[[np.float32(1)]], [[np.float32(1)]]]]                      # (1, 2, 1, 1) float32 scalars
    y = cconv.conv2d(x, w)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, 2.0)


@settings(max_examples=15)
@given(case=conv_cases(max_c=4, max_hw=6, memory_forms=("C",), dtypes=(np.float64,)))
def test_array_like_sweep(case):
    y = cconv.conv2d(case.x.tolist(), case.weight.tolist(),
                     None if case.bias is None else case.bias.tolist(), **case.kwargs)
    ref = ref_conv2d(case.x64, case.w64, case.b64, case.stride, case.pads, case.dilation,
                     case.groups)
    assert_close(from_layout(y, case.layout), ref, np.float64)
