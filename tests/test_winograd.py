"""Winograd F(2x2,3x3): all three passes against the float64 reference (support.reference),
the job layouts its schedule picks, workspace, NaN / Inf (auto against timings is a benchmark:
bench/auto_vs_best.py)."""

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cconv
from cconv import _dispatch
from cconv._geometry import make_geometry
from cconv.algorithms import winograd_schedule
from cconv.algorithms.winograd import WinogradConvolution
from support.checks import rel_err
from support.reference import ref_backward_data, ref_backward_weight, ref_conv2d


def _ref_y(x, w, pads, groups):
    """3x3, stride 1, dilation 1, no bias."""
    return ref_conv2d(x, w, None, 1, pads, 1, groups)


def _ref_dx(dy, w, x_shape, pads, groups):
    return ref_backward_data(dy, w, x_shape, 1, pads, 1, groups)


def _ref_dw(dy, x, pads, groups):
    w_shape = (dy.shape[1], x.shape[1] // groups, 3, 3)
    return ref_backward_weight(dy, x, w_shape, 1, pads, 1, groups)


TOL = {np.float32: 1e-5, np.float64: 1e-12}


# -- the shape sweep --------------------------------------------------------------------------

@st.composite
def cases(draw):
    depthwise = draw(st.booleans()) and draw(st.booleans())
    if depthwise:
        C = draw(st.integers(1, 8))
        groups, K = C, C * draw(st.integers(1, 3))
    else:
        groups = draw(st.sampled_from([1, 1, 2, 3]))
        C = groups * draw(st.integers(1, 20 // groups))
        K = groups * draw(st.integers(1, 20 // groups))
    H, W = draw(st.integers(1, 15)), draw(st.integers(1, 15))
    pads = []
    for size in (H, W):
        lo, hi = draw(st.integers(0, 3)), draw(st.integers(0, 3))
        if size + lo + hi < 3:           # the kernel must fit in the padded input
            hi += 3 - (size + lo + hi)
        pads.append((lo, hi))
    return dict(N=draw(st.integers(1, 3)), C=C, K=K, H=H, W=W, pads=tuple(pads),
                groups=groups, layout=draw(st.sampled_from(["NCHW", "NHWC"])),
                dtype=draw(st.sampled_from([np.float32, np.float64])),
                seed=draw(st.integers(0, 2**31 - 1)))


def _operands(case):
    rng = np.random.default_rng(case["seed"])
    dt = case["dtype"]
    x = rng.standard_normal((case["N"], case["C"], case["H"], case["W"])).astype(dt)
    w = rng.standard_normal((case["K"], case["C"] // case["groups"], 3, 3)).astype(dt)
    y = _ref_y(x, w, case["pads"], case["groups"])
    dy = rng.standard_normal(y.shape).astype(dt)
    return x, w, y, dy


def _to(a, layout):
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)) if layout == "NHWC" else a


def _from(a, layout):
    return a.transpose(0, 3, 1, 2) if layout == "NHWC" else a


@settings(max_examples=60)
@given(cases())
def test_all_passes_match_reference(case):
    x, w, y_ref, dy = _operands(case)
    kw = dict(padding=case["pads"], groups=case["groups"], layout=case["layout"],
              algo="winograd")
    L, tol = case["layout"], TOL[case["dtype"]]
    y = _from(cconv.conv2d(_to(x, L), w, **kw), L)
    assert y.dtype == case["dtype"]
    assert rel_err(y, y_ref) <= tol
    dx = _from(cconv.conv2d_backward_data(_to(dy, L), w, _to(x, L).shape, **kw), L)
    assert rel_err(dx, _ref_dx(dy, w, x.shape, case["pads"], case["groups"])) <= tol
    dw = cconv.conv2d_backward_weight(_to(dy, L), _to(x, L), w.shape, **kw)
    assert dw.shape == w.shape and dw.flags.c_contiguous
    assert rel_err(dw, _ref_dw(dy, x, case["pads"], case["groups"])) <= tol


def test_bias_alpha_beta_and_strided_views():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 6, 9, 11))[:, :, ::-1, 1:]   # negative / offset strides
    w = rng.standard_normal((4, 6, 3, 3))
    b = rng.standard_normal(4)
    out = rng.standard_normal((2, 4, 9, 10))
    expect = 0.5 * (_ref_y(x, w, ((1, 1), (1, 1)), 1) + b[None, :, None, None]) + 2.0 * out
    got = cconv.conv2d(x, w, b, padding=1, algo="winograd", out=out, alpha=0.5, beta=2.0)
    assert got is out
    assert rel_err(got, expect) <= 1e-12
    nan = np.full((2, 4, 9, 10), np.nan)       # beta == 0 never reads out
    cconv.conv2d(x, w, b, padding=1, algo="winograd", out=nan, alpha=1.0, beta=0.0)
    assert np.isfinite(nan).all()


@pytest.mark.parametrize("channels", [256, 512])
def test_float32_accuracy_many_channels(channels):
    rng = np.random.default_rng(channels)
    x = rng.standard_normal((1, channels, 6, 7)).astype(np.float32)
    w = rng.standard_normal((channels, channels, 3, 3)).astype(np.float32)
    pads = ((1, 1), (1, 1))
    y_ref = _ref_y(x, w, pads, 1)
    dy = rng.standard_normal(y_ref.shape).astype(np.float32)
    y = cconv.conv2d(x, w, padding=1, algo="winograd")
    dx = cconv.conv2d_backward_data(dy, w, x.shape, padding=1, algo="winograd")
    dw = cconv.conv2d_backward_weight(dy, x, w.shape, padding=1, algo="winograd")
    errs = (rel_err(y, y_ref), rel_err(dx, _ref_dx(dy, w, x.shape, pads, 1)),
            rel_err(dw, _ref_dw(dy, x, pads, 1)))
    assert max(errs) <= 1e-4, errs


def test_backward_weight_is_deterministic_across_thread_counts():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 24, 20, 20)).astype(np.float32)
    dy = rng.standard_normal((3, 40, 20, 20)).astype(np.float32)
    dws = [cconv.conv2d_backward_weight(dy, x, (40, 24, 3, 3), padding=1, algo="winograd",
                                        num_threads=t) for t in (1, 2, 3)]
    assert all(np.array_equal(dws[0], d) for d in dws[1:])



@pytest.mark.parametrize("C, K, groups, dtype", [(40, 136, 1, np.float32), (34, 66, 2, np.float64)])
def test_more_threads_than_jobs_split_output_channels_same_bits(monkeypatch, C, K, groups,
                                                               dtype):
    # One image of 6x6 makes one tile block: on many threads every pass cuts its output
    # channels finer to make jobs (winograd_schedule.*_JOBS_PER_THREAD).  The chunks change
    # no sum, so every thread count gives the same bits, and they match the reference.
    # (Without the few-tiles layout, which splits the output channels whatever the threads.)
    monkeypatch.setattr(winograd_schedule, "FEW_TILES_BYTES", 0)
    geom = make_geometry((1, C, 6, 6), (K, C // groups, 3, 3), padding=1, groups=groups,
                         dtype=dtype)
    impl = WinogradConvolution(geom)
    fwd, wgt = impl._fwd, impl._wgt
    assert fwd.kchunk_for(1) == fwd.Kb and wgt.kchunk_for(1) == wgt.kchunk
    assert fwd.kchunk_for(16) < fwd.kchunk and wgt.kchunk_for(16) < wgt.kchunk
    assert fwd.jobs(fwd.kchunk_for(16)) > fwd.jobs(fwd.kchunk)
    rng = np.random.default_rng(C)
    x = rng.standard_normal((1, C, 6, 6)).astype(dtype)
    w = rng.standard_normal((K, C // groups, 3, 3)).astype(dtype)
    dy = rng.standard_normal((1, K, 6, 6)).astype(dtype)
    pads = ((1, 1), (1, 1))
    ys, dxs, dws = [], [], []
    for t in (1, 2, 7, 16):
        y, dx = np.empty(dy.shape, dtype), np.empty_like(x)
        impl.forward(x, w, None, y, 1.0, 0.0, t)
        impl.backward_data(dy, w, dx, 1.0, 0.0, t)
        ys.append(y)
        dxs.append(dx)
        dws.append(impl.backward_weight(dy, x, t))
    assert rel_err(ys[-1], _ref_y(x, w, pads, groups)) <= TOL[dtype]
    assert rel_err(dxs[-1], _ref_dx(dy, w, x.shape, pads, groups)) <= TOL[dtype]
    assert rel_err(dws[-1], _ref_dw(dy, x, pads, groups)) <= TOL[dtype]
    for got in (ys, dxs, dws):
        assert all(np.array_equal(got[0], other) for other in got[1:])

# Small shapes that the job-layout tests below drive through the big layers' code paths.
_JOB_LAYOUT_SHAPES = [
    (40, 72, 1, np.float32),     # vector input transform, partial output block
    (20, 136, 1, np.float32),    # scalar input transform (few channels), many output blocks
    (34, 66, 2, np.float64),     # groups, double vectors
]


@pytest.mark.parametrize("l2_bytes", [1 << 20, 96 << 10, 24 << 10, 4 << 10])
@pytest.mark.parametrize("C, K, groups, dtype", _JOB_LAYOUT_SHAPES)
def test_backward_weight_job_layouts_match_reference(monkeypatch, l2_bytes, C, K, groups,
                                                     dtype):
    # The L2 budget decides how backward-weight splits its work: halves of the 16 matrices,
    # output-channel chunks, tile blocks and splits.  Shrinking it drives small shapes
    # through every layout the big layers use.  The schedule reads the budget when an
    # instance is built: a fresh one (not the cached for_geometry) sees the patched value.
    monkeypatch.setattr(winograd_schedule, "WEIGHT_L2_BYTES", l2_bytes)
    geom = make_geometry((3, C, 9, 11), (K, C // groups, 3, 3), padding=((1, 2), (0, 1)),
                         groups=groups, dtype=dtype)
    impl = WinogradConvolution(geom)
    if l2_bytes <= 24 << 10:
        assert impl._wgt.parts == 2    # the halves are exercised
    rng = np.random.default_rng(l2_bytes + C)
    x = rng.standard_normal((3, C, 9, 11)).astype(dtype)
    dy = rng.standard_normal((3, K, geom.OH, geom.OW)).astype(dtype)
    dw = impl.backward_weight(dy, x, 2)
    assert rel_err(dw, _ref_dw(dy, x, geom.pads, groups)) <= TOL[dtype]
    # the splits are fixed by the shape: bitwise the same result on 1 and 3 threads
    assert np.array_equal(dw, impl.backward_weight(dy, x, 1))
    assert np.array_equal(dw, impl.backward_weight(dy, x, 3))


@pytest.mark.parametrize("tile_bytes", [1 << 20, 16 << 10])
@pytest.mark.parametrize("C, K, groups, dtype", _JOB_LAYOUT_SHAPES)
def test_forward_output_channel_chunks_match_reference(monkeypatch, tile_bytes, C, K, groups,
                                                       dtype):
    # Above BIG_FILTER_BYTES of transformed filter, forward (and backward-data) jobs are
    # (tile block, chunk of output-channel blocks); a zero threshold sends small shapes
    # through that layout (a fresh instance reads the patched values).
    monkeypatch.setattr(winograd_schedule, "BIG_FILTER_BYTES", 0)
    monkeypatch.setattr(winograd_schedule, "BIG_TILE_BYTES", tile_bytes)
    pads = ((2, 0), (1, 1))
    geom = make_geometry((3, C, 9, 11), (K, C // groups, 3, 3), padding=pads, groups=groups,
                         dtype=dtype)
    impl = WinogradConvolution(geom)
    if tile_bytes == 1 << 20:      # one tile block: chunks of output channels make the jobs
        assert impl._fwd.kchunk < impl._fwd.Kb
    else:                          # several (big) tile blocks
        assert impl._fwd.tblock < 3 * geom.OH * geom.OW // 4
    rng = np.random.default_rng(tile_bytes + C)
    x = rng.standard_normal((3, C, 9, 11)).astype(dtype)
    w = rng.standard_normal((K, C // groups, 3, 3)).astype(dtype)
    b = rng.standard_normal(K).astype(dtype)
    y = np.empty((3, K, geom.OH, geom.OW), dtype)
    impl.forward(x, w, b, y, 1.0, 0.0, 2)
    y_ref = _ref_y(x, w, pads, groups) + b[None, :, None, None]
    assert rel_err(y, y_ref) <= TOL[dtype]
    # one thread takes all output-channel blocks in one job: the same sums, the same bits
    y1 = np.empty_like(y)
    impl.forward(x, w, b, y1, 1.0, 0.0, 1)
    assert impl._fwd.kchunk_for(1) == impl._fwd.Kb
    assert np.array_equal(y1, y)
    dy = rng.standard_normal(y.shape).astype(dtype)
    dx = np.empty_like(x)
    impl.backward_data(dy, w, dx, 1.0, 0.0, 2)
    assert rel_err(dx, _ref_dx(dy, w, x.shape, pads, groups)) <= TOL[dtype]


@pytest.mark.parametrize("kw, reason", [
    (dict(w_shape=(4, 3, 5, 5)), "3x3 kernel, got 5x5"),
    (dict(w_shape=(4, 3, 1, 3)), "3x3 kernel, got 1x3"),
    (dict(stride=2), "stride 1"),
    (dict(dilation=2), "dilation 1"),
])
def test_ineligible_shapes_raise(kw, reason):
    w_shape = kw.pop("w_shape", (4, 3, 3, 3))
    x = np.ones((1, 3, 9, 9), np.float32)
    w = np.ones(w_shape, np.float32)
    with pytest.raises(ValueError, match=reason):
        cconv.conv2d(x, w, padding=1, algo="winograd", **kw)
    dy = np.ones(cconv.plan_conv2d(x.shape, w_shape, padding=1, **kw).output_shape, np.float32)
    with pytest.raises(ValueError, match=reason):
        cconv.conv2d_backward_data(dy, w, x.shape, padding=1, algo="winograd", **kw)
    with pytest.raises(ValueError, match=reason):
        cconv.conv2d_backward_weight(dy, x, w_shape, padding=1, algo="winograd", **kw)


def test_registered_and_workspace_reported():
    assert "winograd" in cconv.ALGORITHMS
    geom = make_geometry((8, 64, 28, 28), (64, 64, 3, 3), padding=1)
    assert "winograd" in _dispatch.usable(geom, "forward")
    small = WinogradConvolution(geom)
    big = WinogradConvolution(make_geometry((64, 64, 28, 28), (64, 64, 3, 3), padding=1))
    per_image = (64 * 28 * 28 + 64 * 28 * 28) * 4           # x and y of one image
    for op in _dispatch.OPS:
        for nthreads in (1, 2):
            ws_small = small.workspace_bytes(op, nthreads)
            ws_big = big.workspace_bytes(op, nthreads)
            assert ws_small > 0
            # Only the packed activations grow with the batch (~1x each, plus padding), never
            # the 16/4 x of transformed tiles: those live in fixed-size per-thread blocks.
            assert (ws_big - ws_small) / 56 <= 1.3 * per_image, (op, nthreads, ws_small, ws_big)
    plan = cconv.plan_conv2d((8, 64, 28, 28), (64, 64, 3, 3), padding=1, algo="winograd")
    assert plan.algorithm == "winograd" and plan.workspace_bytes > 0


# Layers on both sides of auto's Winograd rules: (x shape, weight shape, padding, groups).
# Depthwise is where Winograd is ~10x slower; the 1x1 layer can run direct or gemm.
@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nonfinite_weight_or_cropped_gradient_lands_like_reference(special, dtype):
    # The packing and the filter transform detect non-finite operands while copying them;
    # a special value only in the weights must send the call to the exact path too.
    rng = np.random.default_rng(11)
    x = rng.random((2, 3, 7, 6)).astype(dtype) + 0.5
    w = rng.random((4, 3, 3, 3)).astype(dtype) + 0.5
    w[1, 2, 0, 1] = special
    pads = ((1, 1), (1, 1))
    with np.errstate(invalid="ignore", over="ignore"):
        ref = _ref_y(x, w, pads, 1)
    got = cconv.conv2d(x, w, padding=1, algo="winograd")
    for test in (np.isnan, np.isposinf, np.isneginf):
        assert np.array_equal(test(got), test(ref))
    finite = np.isfinite(ref)
    assert finite.any() and not finite.all()
    assert rel_err(got[finite], ref[finite]) < 1e-5

    dy = rng.random((2, 4, 7, 6)).astype(dtype) + 0.5
    with np.errstate(invalid="ignore", over="ignore"):
        ref_dx = _ref_dx(dy, w, x.shape, pads, 1)
    dx = cconv.conv2d_backward_data(dy, w, x.shape, padding=1, algo="winograd")
    for test in (np.isnan, np.isposinf, np.isneginf):
        assert np.array_equal(test(dx), test(ref_dx))

    # padding 3 > 2: backward-data crops the first grad_out row, which reaches no input;
    # a NaN there must not appear anywhere in the result.
    w = rng.random((4, 3, 3, 3)).astype(dtype)
    dy = rng.random((2, 4, 9, 6)).astype(dtype)
    dy[0, 0, 0, 3] = special
    pads3 = ((3, 3), (1, 1))
    ref_dx = _ref_dx(dy, w, (2, 3, 5, 6), pads3, 1)
    assert np.isfinite(ref_dx).all()
    dx = cconv.conv2d_backward_data(dy, w, (2, 3, 5, 6), padding=(3, 1), algo="winograd")
    assert rel_err(dx, ref_dx) < 1e-5


_PEAK_RSS_SCRIPT = r"""
import json, resource, sys
import numpy as np
import cconv
from cconv._geometry import make_geometry
from cconv.algorithms import implementation

op = sys.argv[1]
threads = cconv.get_num_threads()   # OMP_NUM_THREADS, set by the test
N, C, H = 8, 128, 56
rng = np.random.default_rng(0)
x = rng.standard_normal((N, C, H, H), dtype=np.float32)
w = rng.standard_normal((C, C, 3, 3), dtype=np.float32)
dy = rng.standard_normal((N, C, H, H), dtype=np.float32)
small = [a[:1, :8, :8, :8].copy() for a in (x, dy)]
# warm everything but the big call (imports, schedules, thread pool)
cconv.conv2d(small[0], w[:8, :8], padding=1, algo="winograd")
cconv.conv2d_backward_weight(small[1], small[0], (8, 8, 3, 3), padding=1, algo="winograd")
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
if op == "forward":
    r = cconv.conv2d(x, w, padding=1, algo="winograd")
elif op == "backward_data":
    r = cconv.conv2d_backward_data(dy, w, x.shape, padding=1, algo="winograd")
else:
    r = cconv.conv2d_backward_weight(dy, x, w.shape, padding=1, algo="winograd")
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
geom = make_geometry(x.shape, w.shape, padding=1)
ws = implementation(geom, "winograd").workspace_bytes(op, threads)
print(json.dumps(dict(growth=after - before, result=r.nbytes, workspace=ws,
                      activations=x.nbytes, threads=threads)))
"""


@pytest.mark.parametrize("op", ["forward", "backward_data", "backward_weight"])
def test_peak_rss_stays_within_result_plus_reported_workspace(op):
    # The memory bound: a call needs the result and plan.workspace_bytes beyond its
    # operands, not 16/4 x the activations of transformed tiles.  Peak RSS growth of a
    # fresh process over one call (vgg-like 8x128x56x56, 12.8 MB activations).
    import json
    import subprocess
    import sys
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(cconv.__file__)))
    env = dict(os.environ, OMP_NUM_THREADS="2")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH")) if p)
    out = subprocess.run([sys.executable, "-c", _PEAK_RSS_SCRIPT, op], env=env, cwd=pkg_root,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    m = json.loads(out.stdout.strip().splitlines()[-1])
    assert m["threads"] == 2, m   # the workspace reported is that of the threads used
    allowed = m["result"] + m["workspace"] + 4 * 2**20  # 4 MiB of allocator slack
    assert m["growth"] <= allowed, m
    # and the workspace really is bounded: the packed operands (~1x the activations each)
    # plus cache-sized tile blocks, not the 4x of transforming every tile
    assert m["workspace"] < (2.6 if op == "backward_weight" else 1.4) * m["activations"], m


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("offset", [0, 1])
def test_streamed_filter_transform_same_values(dtype, offset):
    # A transformed filter above STREAM_FILTER_BYTES is stored around the caches where it
    # starts on a vector boundary (a plain store elsewhere): the same values either way,
    # through both gathers (contiguous filters and the data gradient's rotated view), with
    # partial blocks of filters and channels.
    from cconv import _workspace
    from cconv.algorithms import winograd as wmod
    geom = make_geometry((1, 45, 5, 5), (70, 45, 3, 3), padding=1, dtype=dtype)
    impl = WinogradConvolution(geom)
    rng = np.random.default_rng(offset)
    w = rng.standard_normal((70, 45, 3, 3)).astype(dtype)
    for problem, weight in ((impl._fwd, w), (impl._bwd, impl._rotated(w))):
        size = problem.filter_size()
        plain = np.full(size, np.nan, dtype)
        assert wmod.transform_filter(problem, weight, 1, plain) is plain
        raw = _workspace.aligned_empty(size + 1, dtype)
        streamed = raw[offset:offset + size]
        streamed[:] = np.nan
        problem.stream_filter = True
        try:
            assert wmod.transform_filter(problem, weight, 2, streamed) is streamed
        finally:
            problem.stream_filter = False
        assert np.array_equal(plain, streamed)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_few_tiles_make_one_block_split_by_output_channels(monkeypatch, dtype):
    # A batch-1 layer's transformed tiles fit one block (FEW_TILES_BYTES): forward and
    # backward-data jobs then split the output channels, so the transformed filter is read
    # once instead of once per block of TILE_ROWS tiles.  The sums are the same: the same
    # bits as the per-block layout, at any thread count.
    C, K, H = 128, 128, 12
    geom = make_geometry((1, C, H, H), (K, C, 3, 3), padding=1, dtype=dtype)
    few = WinogradConvolution(geom)
    tiles = few._fwd.tH * few._fwd.tW
    assert few._fwd.tblock >= tiles and few._bwd.tblock >= tiles
    assert few._fwd.jobs(few._fwd.kchunk) >= winograd_schedule.FEW_TILES_JOBS
    monkeypatch.setattr(winograd_schedule, "FEW_TILES_BYTES", 0)
    blocks = WinogradConvolution(geom)
    assert blocks._fwd.tblock < tiles
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, C, H, H)).astype(dtype)
    w = rng.standard_normal((K, C, 3, 3)).astype(dtype)
    dy = rng.standard_normal((1, K, H, H)).astype(dtype)
    # on more threads than its output-channel jobs serve, the blocks' layout runs
    assert few._fwd.layout_for(2)[0] == few._fwd.tblock
    many = few._fwd.G * few._fwd.Kb // winograd_schedule.FORWARD_JOBS_PER_THREAD + 1
    assert few._fwd.layout_for(many)[0] == blocks._fwd.tblock
    results = []
    for impl, t in ((blocks, 1), (few, 1), (few, 2), (few, 3), (few, many)):
        y, dx = np.empty(dy.shape, dtype), np.empty_like(x)
        impl.forward(x, w, None, y, 1.0, 0.0, t)
        impl.backward_data(dy, w, dx, 1.0, 0.0, t)
        results.append((y, dx))
    pads = ((1, 1), (1, 1))
    assert rel_err(results[1][0], _ref_y(x, w, pads, 1)) <= TOL[dtype]
    assert rel_err(results[1][1], _ref_dx(dy, w, x.shape, pads, 1)) <= TOL[dtype]
    for y, dx in results[1:]:
        assert np.array_equal(y, results[0][0]) and np.array_equal(dx, results[0][1])


def _filter_in_jobs_spy(monkeypatch, enabled=True):
    """Record whether each forward kernel call transformed its filter in its jobs (or
    force the separate transform with ``enabled=False``)."""
    from cconv.algorithms import winograd as winograd_module
    calls = []
    real = winograd_module.filter_in_jobs

    def spy(*args, **kwargs):
        calls.append(enabled and real(*args, **kwargs))
        return calls[-1]

    monkeypatch.setattr(winograd_module, "filter_in_jobs", spy)
    return calls


@pytest.mark.parametrize("C, K, H, groups", [(128, 128, 12, 1), (64, 96, 9, 2), (40, 136, 7, 1)])
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("big_filter", [False, True])
def test_filter_transformed_in_the_jobs_same_bits(monkeypatch, request, C, K, H, groups,
                                                  threads, big_filter):
    # With one tile block each job transforms its output blocks' filters (the same block
    # transform, the same GEMM order): the same bits as the separate transform, for the
    # forward pass (with bias and alpha) and the data gradient (the rotated filter).  The
    # one block of the few-tiles layout, or (big_filter) of a big filter's layout, whose
    # jobs take chunks of several output blocks.
    from cconv.algorithms.base import _instance
    if big_filter:
        monkeypatch.setattr(winograd_schedule, "BIG_FILTER_BYTES", 0)
        monkeypatch.setattr(winograd_schedule, "FEW_TILES_BYTES", 0)
        _instance.cache_clear()  # the public calls' cached schedules see the patch
        request.addfinalizer(_instance.cache_clear)
    rng = np.random.default_rng(C + K)
    x = rng.standard_normal((1, C, H, H)).astype(np.float32)
    w = rng.standard_normal((K, C // groups, 3, 3)).astype(np.float32)
    b = rng.standard_normal(K).astype(np.float32)
    kw = dict(padding=((1, 0), (2, 1)), groups=groups, algo="winograd", num_threads=threads)
    calls = _filter_in_jobs_spy(monkeypatch)
    y = cconv.conv2d(x, w, b, alpha=0.5, **kw)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    dx = cconv.conv2d_backward_data(dy, w, x.shape, **kw)
    geom = make_geometry(x.shape, w.shape, padding=kw["padding"], groups=groups,
                         dtype=np.float32)
    impl = WinogradConvolution(geom)
    problems = (impl._fwd4 or impl._fwd, impl._bwd4 or impl._bwd)
    assert calls == [p.single_block and not p.takes_many_threads_layout(threads)
                     for p in problems]
    if threads < 3:
        assert calls[0]  # the forward of every shape here takes it on 1 and 2 threads
    _filter_in_jobs_spy(monkeypatch, enabled=False)
    assert np.array_equal(y, cconv.conv2d(x, w, b, alpha=0.5, **kw))
    assert np.array_equal(dx, cconv.conv2d_backward_data(dy, w, x.shape, **kw))
    pads = ((1, 0), (2, 1))
    assert rel_err(y, 0.5 * (_ref_y(x, w, pads, groups) + b[None, :, None, None])) <= 1e-5
    assert rel_err(dx, _ref_dx(dy, w, x.shape, pads, groups)) <= 1e-5


def test_filter_in_the_jobs_not_with_beta_or_a_ring(monkeypatch):
    # beta != 0 needs y untouched when a filter turns out non-finite, so it transforms
    # apart; so does a padding mode's split data gradient (its ring)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 128, 12, 12)).astype(np.float32)
    w = rng.standard_normal((128, 128, 3, 3)).astype(np.float32)
    calls = _filter_in_jobs_spy(monkeypatch)
    y0 = rng.standard_normal((1, 128, 12, 12)).astype(np.float32)
    out = y0.copy()
    cconv.conv2d(x, w, padding=1, algo="winograd", out=out, beta=0.5)
    assert calls == [False]
    assert rel_err(out, _ref_y(x, w, ((1, 1), (1, 1)), 1) + 0.5 * y0) <= 1e-5
    cconv.conv2d_backward_data(y0, w, x.shape, padding=1, padding_mode="reflect",
                               algo="winograd")
    assert calls[1:] == [False]


@pytest.mark.parametrize("bad", [np.inf, np.nan])
def test_non_finite_filter_in_the_jobs_falls_back_to_direct(monkeypatch, bad):
    # The jobs find a non-finite filter after writing y: the call then runs the direct
    # kernel, whose infinities and NaNs are those of the plain sums (Winograd's transforms
    # would turn an infinity into NaN), over the whole result.
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 128, 12, 12)).astype(np.float32)
    w = rng.standard_normal((128, 128, 3, 3)).astype(np.float32)
    w[5, 7, 1, 2] = bad
    calls = _filter_in_jobs_spy(monkeypatch)
    y = cconv.conv2d(x, w, padding=1, algo="winograd")
    assert calls == [True]
    want = cconv.conv2d(x, w, padding=1, algo="direct")
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(y), np.isinf(want))
    finite = np.isfinite(want)
    assert finite.any() and not finite.all()
    assert rel_err(y[finite], want[finite]) <= 1e-5


def test_filter_in_the_jobs_kernel_checks_its_sizes():
    from cconv._simd import winograd as kernels
    from cconv.algorithms.winograd import pack_input
    from cconv import _workspace
    geom = make_geometry((1, 32, 6, 6), (64, 32, 3, 3), padding=1, dtype=np.float32)
    p = WinogradConvolution(geom)._fwd
    x = np.ones((1, 32, 6, 6), np.float32)
    w = np.ones((64, 32, 3, 3), np.float32)
    y = np.empty((1, 64, 6, 6), np.float32)
    with _workspace.scope() as ws:
        packed = pack_input(p, x, 1, ws)
        scratch = np.empty(p.scratch_per_thread + 36 * p.Cp * p.KB, np.float32)
        args = [packed, p.N, p.G, p.ncb, p.block, p.Hp, p.Wp, p.tH, p.tW,
                np.zeros(0, np.float32), p.Kg, p.Kb]
        tail = [scratch, y, np.zeros(0, np.float32), 1.0, 0.0, 1]
        tiles = p.tH * p.tW
        with pytest.raises(ValueError, match="filter does not match"):
            kernels.forward_float(*args, tiles, p.Kb, *tail, w=w[:32])
        with pytest.raises(ValueError, match="one tile block"):
            kernels.forward_float(*args, 1, p.Kb, *tail, w=w)
        # the slice holds the tiles' matrices and one output block's transformed filter
        pad, pts = kernels.MATRIX_PAD["float32"], p.points
        need = pts * (tiles * p.Cp + pad) + pts * (tiles * p.KB + pad) + pts * p.Cp * p.KB
        small = np.empty(need - 1, np.float32)
        with pytest.raises(ValueError, match="scratch is too small"):
            kernels.forward_float(*args, tiles, p.Kb, small, *tail[1:], w=w)
        assert kernels.forward_float(*args, tiles, p.Kb, np.empty(need, np.float32),
                                     *tail[1:], w=w) == 0
    assert rel_err(y, _ref_y(x, w, ((1, 1), (1, 1)), 1)) <= 1e-5
