"""Hardening: zero-size dimensions, threads, the Find cache under concurrent processes, leaks,
determinism, and NaN / Inf propagation.

What each section asserts (and why) is in its heading; the float64 reference is
support.reference (checked against PyTorch in test_reference.py).
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import cconv
from support.reference import (
    ref_backward_data,
    ref_backward_weight,
    ref_conv2d,
    resolve_padding,
)

UNDER_SANITIZER = bool(os.environ.get("CCONV_UNDER_SANITIZER"))
F32 = np.float32


def _rand(shape, dtype=F32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# --------------------------------------------------------------------------------------------
# zero-size dimensions: N = 0 gives an empty result of the right shape (weight gradient:
# zeros); zero channels (C or K) or zero spatial size is a ValueError (the documented choice)
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("groups", [1, 2])
def test_batch_zero_gives_empty_results(layout, groups):
    C, K, H, W, R = 4, 6, 5, 7, 3
    nhwc = layout == "NHWC"
    xs = (0, H, W, C) if nhwc else (0, C, H, W)
    gs = (0, H - 2, W - 2, K) if nhwc else (0, K, H - 2, W - 2)
    x, gy = np.zeros(xs, F32), np.zeros(gs, F32)
    w = _rand((K, C // groups, R, R))
    kw = dict(groups=groups, layout=layout)

    y = cconv.conv2d(x, w, np.ones(K, F32), **kw)
    assert y.shape == gs and y.dtype == F32
    dx = cconv.conv2d_backward_data(gy, w, xs, **kw)
    assert dx.shape == xs and dx.dtype == F32
    dw = cconv.conv2d_backward_weight(gy, x, w.shape, **kw)
    assert dw.shape == w.shape and dw.dtype == F32 and not dw.any()
    db = cconv.conv2d_backward_bias(gy, layout=layout)
    assert db.shape == (K,) and not db.any()
    dx2, dw2, db2 = cconv.conv2d_backward(gy, x, w, **kw)
    assert dx2.shape == xs and dw2.shape == w.shape and not dw2.any() and db2.shape == (K,)
    # out / alpha / beta on an empty batch: out is returned, the weight gradient is beta * out
    out = np.full(w.shape, 2.0, F32)
    res = cconv.conv2d_backward_weight(gy, x, w.shape, out=out, beta=0.5, **kw)
    assert res is out and np.all(out == 1.0)

    # transposed convolution: x (N, C_in, H, W), weight (C_in, K/groups, R, S)
    wt = _rand((C, K // groups, R, R))
    t_in = (0, H, W, C) if nhwc else (0, C, H, W)
    t_out = (0, H + 2, W + 2, K) if nhwc else (0, K, H + 2, W + 2)
    yt = cconv.conv_transpose2d(np.zeros(t_in, F32), wt, **kw)
    assert yt.shape == t_out
    dxt = cconv.conv_transpose2d_backward_data(np.zeros(t_out, F32), wt, t_in, **kw)
    assert dxt.shape == t_in
    dwt = cconv.conv_transpose2d_backward_weight(np.zeros(t_out, F32), np.zeros(t_in, F32),
                                                 wt.shape, **kw)
    assert dwt.shape == wt.shape and not dwt.any()

    plan = cconv.plan_conv2d(xs, w.shape, groups=groups, layout=layout)
    assert tuple(plan.output_shape) == gs
    assert plan.forward(x, w).shape == gs


def test_find_with_empty_batch(tmp_path, monkeypatch):
    monkeypatch.setenv("CCONV_CACHE_DIR", str(tmp_path))
    x, gy = np.zeros((0, 2, 5, 5), F32), np.zeros((0, 3, 3, 3), F32)
    w = np.ones((3, 2, 3, 3), F32)
    assert cconv.conv2d(x, w, algo="find").shape == gy.shape
    assert cconv.conv2d_backward_data(gy, w, x.shape, algo="find").shape == x.shape
    dw = cconv.conv2d_backward_weight(gy, x, w.shape, algo="find")
    assert dw.shape == w.shape and not dw.any()




@pytest.mark.parametrize("shape", [(1, 2, 3, 4.5), "abcd", (1, 2, "3", 4)])
def test_shape_arguments_reject_non_integers(shape):
    with pytest.raises((ValueError, TypeError), match="x_shape"):
        cconv.plan_conv2d(shape, (1, 2, 1, 1))




@pytest.mark.parametrize("fn,need", [("conv2d_backward", ()), ("conv_transpose2d_backward", ()),
                                     ("conv_transpose2d_backward", ("bias",))])
def test_need_without_data_or_weight_still_validates(fn, need):
    z = np.zeros((1, 1, 4, 4), F32)
    with pytest.raises(ValueError, match="stride"):
        getattr(cconv, fn)(z, z, np.zeros((1, 1, 1, 1), F32), stride=0, need=need)




def test_transpose_bad_weight_layout():
    with pytest.raises(ValueError, match="weight_layout"):
        cconv.conv_transpose2d(np.zeros((1, 2, 4, 4), F32), np.zeros((2, 3, 1, 1), F32),
                               weight_layout="IOHW", output_shape=(1, 3, 4, 4))




def test_output_padding_float_names_argument():
    with pytest.raises((ValueError, TypeError), match="output_padding"):
        cconv.conv_transpose2d(np.zeros((1, 1, 4, 4), F32), np.zeros((1, 1, 3, 3), F32),
                               stride=2, output_padding=1.5)


ZERO_CASES = {  # name -> (x NCHW shape, weight OIHW shape)
    "C=0": ((1, 0, 5, 5), (2, 0, 3, 3)),
    "K=0": ((1, 3, 5, 5), (0, 3, 3, 3)),
    "H=0": ((1, 3, 0, 5), (2, 3, 1, 1)),
    "W=0": ((1, 3, 5, 0), (2, 3, 1, 1)),
    "R=0": ((1, 3, 5, 5), (2, 3, 0, 3)),
}


@pytest.mark.parametrize("case", sorted(ZERO_CASES))
def test_zero_channels_or_spatial_size_raise_value_error(case):
    xs, ws = ZERO_CASES[case]
    x, w = np.zeros(xs, F32), np.zeros(ws, F32)
    gy = np.zeros((1, ws[0], 3, 3), F32)
    calls = {
        "conv2d": lambda: cconv.conv2d(x, w),
        "backward_data": lambda: cconv.conv2d_backward_data(gy, w, xs),
        "backward_weight": lambda: cconv.conv2d_backward_weight(gy, x, ws),
        "backward": lambda: cconv.conv2d_backward(gy, x, w),
        "conv_transpose2d": lambda: cconv.conv_transpose2d(
            x, np.zeros((xs[1],) + ws[:1] + ws[2:], F32)),
        "plan": lambda: cconv.plan_conv2d(xs, ws),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=r"x|weight|input_shape|weight_shape|output_shape"):
            call()


# --------------------------------------------------------------------------------------------
# concurrency: 8 Python threads (the kernels release the GIL) give bitwise the serial results
# --------------------------------------------------------------------------------------------

def _thread_problems():
    probs = []
    for i in range(8):
        n, c, k = 1 + i % 2, 4 + 2 * i, 8 + i
        g = 2 if i % 3 == 0 else 1
        c, k = c - c % g, k - k % g
        r = 3 if i % 2 else 1 + i % 3
        h, w = 9 + i, 11 - i % 4
        stride = 1 + i % 2
        dtype = np.float64 if i % 4 == 3 else F32
        x = _rand((n, c, h, w), dtype, seed=i)
        wt = _rand((k, c // g, r, r), dtype, seed=100 + i)
        kw = dict(stride=stride, padding=i % 2, groups=g)
        y = cconv.conv2d(x, wt, **kw)
        gy = _rand(y.shape, dtype, seed=200 + i)
        wtt = _rand((c, k // g, r, r), dtype, seed=300 + i)
        probs.append((x, wt, gy, wtt, kw))
    return probs


def _all_passes(prob):
    x, wt, gy, wtt, kw = prob
    return (cconv.conv2d(x, wt, **kw),
            cconv.conv2d_backward_data(gy, wt, x.shape, **kw),
            cconv.conv2d_backward_weight(gy, x, wt.shape, **kw),
            cconv.conv_transpose2d(x, wtt, **kw),
            cconv.conv2d_backward_bias(gy))


def test_eight_threads_match_serial_bitwise():
    probs = _thread_problems()
    serial = [_all_passes(p) for p in probs]
    errors, mismatches = [], []
    start = threading.Barrier(8)

    def worker(i):
        try:
            start.wait()
            for rep in range(15):
                # rotate through the problems so that different shapes run at the same time
                j = (i + rep) % len(probs)
                for name, got, want in zip(("fwd", "bwd_data", "bwd_weight", "transpose", "bias"),
                                           _all_passes(probs[j]), serial[j]):
                    if got.dtype != want.dtype or not np.array_equal(got, want):
                        mismatches.append((i, rep, j, name))
        except Exception as exc:  # noqa: BLE001
            errors.append(repr(exc))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "threads did not finish"
    assert not errors, errors
    assert not mismatches, mismatches[:10]


_FIND_WORKER = textwrap.dedent("""
    import sys, numpy as np, cconv
    i = int(sys.argv[1])
    for rep in range(2):
        for j in range(6):
            c = 2 + j; h = 6 + i          # shapes unique to this process ...
            x = np.ones((1, c, h, 7), np.float32)
            w = np.ones((3, c, 3, 3), np.float32)
            cconv.conv2d(x, w, algo="find", num_threads=1)
            cconv.conv2d_backward_data(np.ones((1, 3, h - 2, 5), np.float32), w, x.shape,
                                       algo="find", num_threads=1)
        # ... and one shared by all of them
        cconv.conv2d(np.ones((1, 2, 5, 5), np.float32), np.ones((2, 2, 3, 3), np.float32),
                     algo="find", num_threads=1)
    print("done", i)
""")


_NPROC = 4


@pytest.fixture(scope="module")
def find_cache_run(tmp_path_factory):
    """Several processes running algo="find" at once on one cache dir; the cache file is
    parsed continually while they run.  Returns (parsed final cache, number of reads)."""
    cache_dir = tmp_path_factory.mktemp("find-cache-procs")
    env = dict(os.environ, CCONV_CACHE_DIR=str(cache_dir), OMP_NUM_THREADS="1")
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(cconv.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH")) if p)
    # cwd: `python -c` puts it first on sys.path; it must not be the source tree.
    procs = [subprocess.Popen([sys.executable, "-c", _FIND_WORKER, str(i)], env=env, cwd=pkg_root,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(_NPROC)]
    path = cache_dir / "find-cache.json"
    reads, bad_reads = 0, []
    while any(p.poll() is None for p in procs):
        try:
            text = path.read_text()
        except FileNotFoundError:
            continue
        try:
            json.loads(text)
        except ValueError as exc:
            bad_reads.append(f"{exc}: {text[:200]!r}")
        reads += 1
    errs = []
    for p in procs:
        _, err = p.communicate(timeout=120)
        if p.returncode:
            errs.append(err[-2000:])
    # The cache and its persistent lock file stay; any temporary file is a leftover.
    leftovers = [f.name for f in cache_dir.iterdir()
                 if f.name not in ("find-cache.json", "find-cache.json.lock")]
    return dict(data=json.loads(path.read_text()), reads=reads, bad_reads=bad_reads,
                errors=errs, leftovers=leftovers)


def test_find_cache_stays_valid_json_under_concurrent_processes(find_cache_run):
    """Atomic replace: every read of the cache file while 4 processes write it parses, the
    final file is a dict of known algorithms, and no temporary file is left behind."""
    run = find_cache_run
    assert not run["errors"], run["errors"]
    assert not run["bad_reads"], run["bad_reads"][:3]
    assert isinstance(run["data"], dict) and run["data"]
    assert all(v in cconv.ALGORITHMS for v in run["data"].values())
    assert not run["leftovers"], run["leftovers"]




def test_find_cache_keeps_every_process_entries(find_cache_run):
    data = find_cache_run["data"]
    # keys are "|"-separated fields, the pass among them (cconv._find_cache.key)
    fwd = [k for k in data if "forward" in k.split("|")]
    bwd = [k for k in data if "backward_data" in k.split("|")]
    # 6 forward + 6 backward-data shapes per process, plus one forward shape they share
    assert (len(fwd), len(bwd)) == (_NPROC * 6 + 1, _NPROC * 6)


# --------------------------------------------------------------------------------------------
# leaks: after warm-up, 10,000 calls of each pass grow RSS by less than 1%
# --------------------------------------------------------------------------------------------

def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _leak_calls():
    x = _rand((1, 4, 8, 8))
    w = _rand((4, 4, 3, 3))
    gy = _rand((1, 4, 6, 6))
    wt = _rand((4, 4, 3, 3))
    out = np.empty((1, 4, 6, 6), F32)
    return {
        "forward": lambda: cconv.conv2d(x, w),
        "forward_out": lambda: cconv.conv2d(x, w, out=out, alpha=0.5, beta=0.5),
        "backward_data": lambda: cconv.conv2d_backward_data(gy, w, x.shape),
        "backward_weight": lambda: cconv.conv2d_backward_weight(gy, x, w.shape),
        "backward_bias": lambda: cconv.conv2d_backward_bias(gy),
        "conv_transpose2d": lambda: cconv.conv_transpose2d(gy, wt),
        "transpose_backward": lambda: cconv.conv_transpose2d_backward(x, gy, wt),
        "bad_input": lambda: _expect_error(lambda: cconv.conv2d(x, w[:, :3])),
    }


def _expect_error(call):
    try:
        call()
    except ValueError:
        return
    raise AssertionError("expected ValueError")


@pytest.mark.skipif(UNDER_SANITIZER, reason="ASan's quarantine makes RSS grow by design")
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
@pytest.mark.parametrize("name", sorted(_leak_calls()))
def test_no_rss_growth_over_10000_calls(name):
    call = _leak_calls()[name]
    for _ in range(1000):
        call()
    gc.collect()
    before = _rss_bytes()
    for _ in range(10_000):
        call()
    gc.collect()
    after = _rss_bytes()
    growth = (after - before) / before
    assert growth < 0.01, f"{name}: RSS {before / 2**20:.1f} -> {after / 2**20:.1f} MiB"


# --------------------------------------------------------------------------------------------
# determinism: bitwise identical results for the same call, and across thread counts 1 and 2
# (the design: each output element is computed by one thread in a fixed order; backward-weight
# reduction splits depend only on the shape)
# --------------------------------------------------------------------------------------------

DET_CASES = {
    "dense": dict(x=(2, 32, 20, 20), w=(48, 32, 3, 3), kw={}),
    "strided_padded": dict(x=(3, 16, 23, 17), w=(24, 16, 5, 3),
                           kw=dict(stride=2, padding=((2, 1), (0, 1)), dilation=(1, 2))),
    "grouped_nhwc": dict(x=(2, 21, 19, 24), w=(18, 8, 3, 3),
                         kw=dict(groups=3, layout="NHWC", padding="same")),
    "depthwise": dict(x=(2, 24, 18, 18), w=(48, 1, 3, 3), kw=dict(groups=24, padding=1)),
    "big_batch_1x1": dict(x=(16, 8, 12, 12), w=(40, 8, 1, 1), kw={}),
}


def _det_run(case, dtype, nthreads):
    c = DET_CASES[case]
    x = _rand(c["x"], dtype, seed=1)
    w = _rand(c["w"], dtype, seed=2)
    kw = dict(c["kw"], num_threads=nthreads)
    y = cconv.conv2d(x, w, **kw)
    gy = _rand(y.shape, dtype, seed=3)
    k_in = w.shape[0]
    c_in = x.shape[3] if kw.get("layout") == "NHWC" else x.shape[1]
    wt = _rand((c_in,) + w.shape[1:], dtype, 4) if kw.get("groups", 1) == 1 else None
    res = [y, cconv.conv2d_backward_data(gy, w, x.shape, **kw),
           cconv.conv2d_backward_weight(gy, x, w.shape, **kw)]
    if wt is not None and kw.get("padding") != "same":
        res.append(cconv.conv_transpose2d(x, wt, **{k: v for k, v in kw.items()}))
    del k_in
    return res


@pytest.mark.parametrize("dtype", [F32, np.float64])
@pytest.mark.parametrize("case", sorted(DET_CASES))
def test_same_call_twice_is_bitwise_identical(case, dtype):
    for nthreads in (1, 2):
        a = _det_run(case, dtype, nthreads)
        b = _det_run(case, dtype, nthreads)
        for i, (u, v) in enumerate(zip(a, b)):
            assert np.array_equal(u, v), f"{case} pass {i} threads={nthreads}"


@pytest.mark.parametrize("dtype", [F32, np.float64])
@pytest.mark.parametrize("case", sorted(DET_CASES))
def test_thread_counts_1_and_2_are_bitwise_identical(case, dtype):
    one = _det_run(case, dtype, 1)
    two = _det_run(case, dtype, 2)
    names = ("forward", "backward_data", "backward_weight", "conv_transpose2d")
    for name, u, v in zip(names, one, two):
        assert np.array_equal(u, v), (f"{case} {name}: max diff "
                                      f"{np.abs(u.astype(float) - v).max():.3g}")


# --------------------------------------------------------------------------------------------
# NaN and Inf propagate like the float64 reference, for every listed algorithm
# --------------------------------------------------------------------------------------------

_ALGO = {}


def _algos_for(call):
    """Run ``call(algo)`` for the algorithm under test; skip when the shape cannot use it
    (ValueError naming algo).  Returns {algo: result}."""
    algo = _ALGO["algo"]
    try:
        return {algo: call(algo)}
    except ValueError as exc:
        if algo in ("auto", "direct") or "algo" not in str(exc):
            raise
        pytest.skip(f"{algo} cannot run this shape: {exc}")


def _same_specials(got, ref, what):
    got = np.asarray(got, np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(ref)), \
        f"{what}: NaN at {np.argwhere(np.isnan(got) != np.isnan(ref))[:5].tolist()}"
    assert np.array_equal(np.isposinf(got), np.isposinf(ref)), f"{what}: +Inf pattern differs"
    assert np.array_equal(np.isneginf(got), np.isneginf(ref)), f"{what}: -Inf pattern differs"
    fin = np.isfinite(ref)
    assert np.allclose(got[fin], ref[fin], rtol=1e-3, atol=1e-3), f"{what}: finite values differ"


NAN_GEOMS = {  # forward problems: x NCHW, w OIHW, keywords
    "3x3_s1_pad1": ((2, 4, 9, 10), (6, 4, 3, 3), dict(padding=1)),
    "3x3_s1_groups2": ((1, 4, 8, 8), (6, 2, 3, 3), dict(groups=2, padding=(0, 1))),
    "3x3_depthwise": ((1, 4, 7, 9), (4, 1, 3, 3), dict(groups=4, padding="same")),
    "5x3_s2_dil": ((1, 3, 13, 11), (5, 3, 5, 3), dict(stride=2, dilation=(1, 2), padding=2)),
    "1x1_gemm": ((2, 5, 4, 8), (7, 5, 1, 1), dict()),  # 32 pixels: gemm's in-place path
}
SPECIALS = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}




def _algo_params():
    params = []
    for algo in ("auto",) + tuple(cconv.ALGORITHMS):
        params.append(pytest.param(algo, id=algo))
    return params


def _nan_geometry(geom):
    """(xs, ws, kw, groups, stride pair, dilation pair, pads, OH, OW)."""
    xs, ws, kw = NAN_GEOMS[geom]
    stride = kw.get("stride", 1)
    stride = (stride, stride) if isinstance(stride, int) else stride
    dil = kw.get("dilation", 1)
    dil = (dil, dil) if isinstance(dil, int) else dil
    pads = resolve_padding(kw.get("padding", 0), xs[2:], ws[2:], stride, dil)
    oh, ow = cconv.plan_conv2d(xs, ws, **kw).output_shape[2:]
    return xs, ws, kw, kw.get("groups", 1), stride, dil, pads, oh, ow


def _nan_cases(test):
    """Run ``test(geom, special, dtype, algo)`` over every NaN geometry, special value,
    dtype and algorithm."""
    for name, values in (("dtype", [F32, np.float64]), ("geom", sorted(NAN_GEOMS)),
                         ("special", sorted(SPECIALS)), ("algo", _algo_params())):
        test = pytest.mark.parametrize(name, values)(test)
    return test


@_nan_cases
def test_nan_inf_propagate_like_reference(geom, special, dtype, algo):
    _ALGO["algo"] = algo
    xs, ws, kw, g, stride, dil, pads, oh, ow = _nan_geometry(geom)
    value = SPECIALS[special]
    x = _rand(xs, dtype, seed=5)
    w = _rand(ws, dtype, seed=6)
    w[w == 0] = 0.5  # a zero weight would turn Inf into NaN; keep the pattern simple
    # one special value in the interior, one on a corner (seen through padding)
    x[0, 1, xs[2] // 2, xs[3] // 2] = value
    x[-1, -1, 0, xs[3] - 1] = value
    y_any = cconv.conv2d(x, w, **kw)
    with np.errstate(invalid="ignore", over="ignore"):
        ref_y = ref_conv2d(x, w, None, stride, pads, dil, g)
    assert np.isnan(ref_y).any() or np.isinf(ref_y).any()
    for algo, y in _algos_for(lambda a: cconv.conv2d(x, w, algo=a, **kw)).items():
        _same_specials(y, ref_y, f"forward algo={algo}")

    # backward data: the special value in grad_out spreads over the inputs it came from
    gy = _rand(y_any.shape, dtype, seed=7)
    gy[0, 0, oh // 2, ow // 2] = value
    with np.errstate(invalid="ignore", over="ignore"):
        ref_dx = ref_backward_data(gy, w, xs, stride, pads, dil, g)
    for algo, dx in _algos_for(lambda a: cconv.conv2d_backward_data(gy, w, xs, algo=a,
                                                                    **kw)).items():
        _same_specials(dx, ref_dx, f"backward_data algo={algo}")

    # backward weight: a special value in x reaches the taps that saw it
    gy2 = _rand(y_any.shape, dtype, seed=8)
    with np.errstate(invalid="ignore", over="ignore"):
        ref_dw = ref_backward_weight(gy2, x, ws, stride, pads, dil, g)
    for algo, dw in _algos_for(lambda a: cconv.conv2d_backward_weight(gy2, x, ws, algo=a,
                                                                      **kw)).items():
        _same_specials(dw, ref_dw, f"backward_weight algo={algo}")


@_nan_cases
def test_nonfinite_weight_propagates_like_reference(geom, special, dtype, algo):
    # Forward multiplies the zero padding too (0 * Inf = NaN at the borders, as PyTorch);
    # backward-data is the scatter of grad_out * w over existing outputs only, so inputs
    # that no output of the special tap reaches stay finite (as PyTorch).
    _ALGO["algo"] = algo
    xs, ws, kw, g, stride, dil, pads, oh, ow = _nan_geometry(geom)
    x = _rand(xs, dtype, seed=15)
    w = _rand(ws, dtype, seed=16)
    w[w == 0] = 0.5
    w[-1, 0, 0, ws[3] - 1] = SPECIALS[special]
    y_any = cconv.conv2d(x, w, **kw)
    x[x == 0] = 0.5
    with np.errstate(invalid="ignore", over="ignore"):
        ref_y = ref_conv2d(x, w, None, stride, pads, dil, g)
    for algo, y in _algos_for(lambda a: cconv.conv2d(x, w, algo=a, **kw)).items():
        _same_specials(y, ref_y, f"forward algo={algo}")
    gy = _rand(y_any.shape, dtype, seed=17)
    gy[gy == 0] = 0.5
    with np.errstate(invalid="ignore", over="ignore"):
        ref_dx = ref_backward_data(gy, w, xs, stride, pads, dil, g)
    assert not np.isfinite(ref_dx).all()
    for algo, dx in _algos_for(lambda a: cconv.conv2d_backward_data(gy, w, xs, algo=a,
                                                                    **kw)).items():
        _same_specials(dx, ref_dx, f"backward_data algo={algo}")
    # with alpha, beta and bias through the transposed convolution of the same weights
    if g == 1 and kw.get("padding") != "same":
        bias = _rand((ws[1],), dtype, seed=18)
        out = _rand((xs[0], xs[1], xs[2], xs[3]), dtype, seed=19)
        expect = 2.0 * (ref_dx + bias.reshape(1, -1, 1, 1)) + 0.5 * out
        (top, _), (left, _) = pads
        got = cconv.conv_transpose2d(gy, w, bias, stride=stride, padding=(top, left),
                                     dilation=dil, output_shape=xs, out=out.copy(),
                                     alpha=2.0, beta=0.5)
        _same_specials(got, expect, "conv_transpose2d")
