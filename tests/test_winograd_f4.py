"""Winograd F(4x4,3x3): the forward and data gradient on 4x4 output tiles against the float64
reference, with the schedule's choice forced where a test needs it, and the choice itself."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cconv
from cconv._geometry import make_geometry
from cconv._simd import winograd as kernels
from cconv.algorithms import base as algorithm_base
from cconv.algorithms import winograd_schedule
from cconv.algorithms.winograd import WinogradConvolution
from support.checks import rel_err
from support.reference import fold_reference, ref_backward_data, ref_conv2d

# F(4x4)'s float32 error is about 20x F(2x2)'s (1e-5 to 2e-5 of the output's magnitude at
# 256-512 channels); the sweep's channel counts stay below 100.
TOL = {np.float32: 3e-5, np.float64: 1e-12}


@pytest.fixture
def f4_everywhere(monkeypatch):
    """Every shape whose packed channel blocks are whole vectors takes F(4x4) (algorithm
    instances are cached per geometry: the cache is emptied around the test)."""
    monkeypatch.setattr(winograd_schedule, "F4_MIN_TILES", 1)
    monkeypatch.setattr(winograd_schedule, "F4_MAX_PRODUCTS", 100.0)
    algorithm_base._instance.cache_clear()
    yield
    algorithm_base._instance.cache_clear()


def _vector_channels(draw, dtype):
    """A per-group channel count whose packed blocks are whole vectors at this build's
    vector length: one or two vectors, or more than two (blocks of one vector)."""
    vl = kernels.VECTOR_LENGTH[np.dtype(dtype).name]
    return draw(st.sampled_from([vl, 2 * vl, 2 * vl + draw(st.integers(1, 3 * vl))]))


@st.composite
def cases(draw):
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    groups = draw(st.sampled_from([1, 1, 2]))
    Cg, Kg = _vector_channels(draw, dtype), _vector_channels(draw, dtype)
    H, W = draw(st.integers(1, 19)), draw(st.integers(1, 19))
    pads = []
    for size in (H, W):
        lo, hi = draw(st.integers(0, 3)), draw(st.integers(0, 3))
        if size + lo + hi < 3:
            hi += 3 - (size + lo + hi)
        pads.append((lo, hi))
    return dict(N=draw(st.integers(1, 3)), C=groups * Cg, K=groups * Kg, H=H, W=W,
                pads=tuple(pads), groups=groups, dtype=dtype,
                layout=draw(st.sampled_from(["NCHW", "NHWC"])),
                seed=draw(st.integers(0, 2**31 - 1)))


def _to(a, layout):
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)) if layout == "NHWC" else a


def _from(a, layout):
    return a.transpose(0, 3, 1, 2) if layout == "NHWC" else a


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cases())
def test_forward_and_data_gradient_match_reference(f4_everywhere, case):
    rng = np.random.default_rng(case["seed"])
    dt, L, g, pads = case["dtype"], case["layout"], case["groups"], case["pads"]
    x = rng.standard_normal((case["N"], case["C"], case["H"], case["W"])).astype(dt)
    w = rng.standard_normal((case["K"], case["C"] // g, 3, 3)).astype(dt)
    geom = make_geometry(x.shape, w.shape, padding=pads, groups=g, dtype=dt)
    impl = WinogradConvolution(geom)
    assert impl._fwd4 is not None and impl._bwd4 is not None   # the path under test
    y_ref = ref_conv2d(x, w, None, 1, pads, 1, g)
    dy = rng.standard_normal(y_ref.shape).astype(dt)
    kw = dict(padding=pads, groups=g, layout=L, algo="winograd")
    if L == "NHWC":
        kw["weight_layout"] = "HWIO"     # the filter transform's channels-last gather
        w_in = np.ascontiguousarray(w.transpose(2, 3, 1, 0))
    else:
        w_in = w
    y = _from(cconv.conv2d(_to(x, L), w_in, **kw), L)
    assert rel_err(y, y_ref) <= TOL[dt]
    dx = _from(cconv.conv2d_backward_data(_to(dy, L), w_in, _to(x, L).shape, **kw), L)
    assert rel_err(dx, ref_backward_data(dy, w, x.shape, 1, pads, 1, g)) <= TOL[dt]


def test_bias_alpha_beta_strided_views_and_thread_counts(f4_everywhere):
    rng = np.random.default_rng(3)
    vl = kernels.VECTOR_LENGTH["float64"]
    C, K = 3 * vl, 2 * vl + 3
    x = rng.standard_normal((2, C, 14, 12))[:, :, ::-1, 1:]   # negative / offset strides
    w = rng.standard_normal((K, C, 3, 3))
    b = rng.standard_normal(K)
    out = rng.standard_normal((2, K, 14, 11))
    expect = 0.5 * (ref_conv2d(x, w, None, 1, ((1, 1), (1, 1)), 1, 1)
                    + b[None, :, None, None]) + 2.0 * out
    got = cconv.conv2d(x, w, b, padding=1, algo="winograd", out=out, alpha=0.5, beta=2.0)
    assert got is out
    assert rel_err(got, expect) <= 1e-12
    nan = np.full((2, K, 14, 11), np.nan)       # beta == 0 never reads out
    cconv.conv2d(x, w, b, padding=1, algo="winograd", out=nan, alpha=1.0, beta=0.0)
    assert np.isfinite(nan).all()
    # every output element is one job's fixed sum: the same bits on any thread count
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    ys = [cconv.conv2d(x32, w32, padding=1, algo="winograd", num_threads=t) for t in (1, 2, 3)]
    assert all(np.array_equal(ys[0], y) for y in ys[1:])


def test_prepared_weight_gives_the_same_bits(f4_everywhere):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 48, 10, 9)).astype(np.float32)
    w = rng.standard_normal((40, 48, 3, 3)).astype(np.float32)
    plan = cconv.plan_conv2d(x.shape, w.shape, padding=1, algo="winograd")
    assert np.array_equal(plan.forward(x, plan.prepare_weight(w)), plan.forward(x, w))


@pytest.mark.parametrize("channels", [256, 512])
def test_float32_accuracy_many_channels(f4_everywhere, channels):
    rng = np.random.default_rng(channels)
    x = rng.standard_normal((1, channels, 8, 8)).astype(np.float32)
    w = rng.standard_normal((channels, channels, 3, 3)).astype(np.float32)
    pads = ((1, 1), (1, 1))
    y_ref = ref_conv2d(x, w, None, 1, pads, 1, 1)
    dy = rng.standard_normal(y_ref.shape).astype(np.float32)
    y = cconv.conv2d(x, w, padding=1, algo="winograd")
    dx = cconv.conv2d_backward_data(dy, w, x.shape, padding=1, algo="winograd")
    errs = (rel_err(y, y_ref), rel_err(dx, ref_backward_data(dy, w, x.shape, 1, pads, 1, 1)))
    assert max(errs) <= 1e-4, errs


@pytest.mark.parametrize("special", [np.nan, np.inf])
def test_nonfinite_weight_lands_like_reference(f4_everywhere, special):
    # The F(4x4) filter transform notes a non-finite weight as it stores the transformed
    # filter; the call then runs the exact path.
    rng = np.random.default_rng(11)
    x = rng.random((2, 32, 9, 8)) + 0.5
    w = rng.random((32, 32, 3, 3)) + 0.5
    w[1, 2, 0, 1] = special
    with np.errstate(invalid="ignore", over="ignore"):
        ref = ref_conv2d(x, w, None, 1, ((1, 1), (1, 1)), 1, 1)
    got = cconv.conv2d(x, w, padding=1, algo="winograd")
    for test in (np.isnan, np.isposinf, np.isneginf):
        assert np.array_equal(test(got), test(ref))
    finite = np.isfinite(ref)
    assert finite.any() and not finite.all()
    assert rel_err(got[finite], ref[finite]) < 1e-12


@pytest.mark.parametrize("shape, f4", [
    ((8, 128, 28, 28), True),     # ResNet-50 res3: 4x4 tiles fit, 392 of them
    ((8, 64, 56, 56), True),      # res2
    ((8, 512, 7, 7), True),       # res5: 32 tiles, enough for the filter transform
    ((4, 512, 7, 7), False),      # 16 tiles: the filter transform does not pay
    ((8, 256, 14, 14), False),    # res4: a quarter of each 4x4 tile grid is past the image
    ((1, 128, 28, 28), True),
    ((8, 128, 13, 13), False),
])
def test_schedule_takes_f4_where_measured_faster(shape, f4):
    geom = make_geometry(shape, (shape[1], shape[1], 3, 3), padding=1)
    impl = WinogradConvolution(geom)
    assert (impl._fwd4 is not None) == f4
    assert (impl._bwd4 is not None) == f4
    if f4:   # the workspace reported is F(4x4)'s
        assert impl.workspace_bytes("forward", 2) == impl._fwd4.workspace_bytes(2)


def test_kernel_rejects_mismatched_buffers():
    geom = make_geometry((1, 32, 8, 8), (32, 32, 3, 3), padding=1)
    p = winograd_schedule.forward_problem(geom, tile=4)
    U = np.zeros(p.filter_size(), np.float32)
    packed = np.zeros(p.packed_input_size(), np.float32)
    scratch = np.zeros(p.scratch_per_thread, np.float32)
    y = np.zeros((1, 32, 8, 8), np.float32)
    args = [packed, p.N, p.G, p.ncb, p.block, p.Hp, p.Wp, p.tH, p.tW, U, p.Kg, p.Kb, p.tblock,
            p.kchunk, scratch, y, np.zeros(0, np.float32), 1.0, 0.0, 1]
    kernels.forward_float(*args, tile=4)      # the right sizes run
    for index, bad, message in [(0, packed[1:], "packed input"), (9, U[1:], "transformed"),
                                (14, scratch[:10], "scratch"),
                                (15, np.zeros((1, 32, 9, 8), np.float32), "output")]:
        wrong = list(args)
        wrong[index] = bad
        with pytest.raises(ValueError, match=message):
            kernels.forward_float(*wrong, tile=4)
    with pytest.raises(ValueError, match="ring / output window"):  # window past the ring
        kernels.forward_float(*args, ring=np.zeros((1, 32, 7, 8), np.float32), tile=4)
    with pytest.raises(ValueError, match="tile"):
        kernels.forward_float(*args, tile=3)


@pytest.mark.parametrize("pss", ["forward", "backward_data"])
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_3d_stacks_on_f4_match_reference_and_tap_loop(f4_everywhere, monkeypatch, pss, layout):
    # A 3-D pass whose depth taps run 2-D Winograd packs each image's slices once for all
    # taps (winograd.slice_range_forward); on F(4x4) (winograd.stack_tile) it gives the
    # reference's numbers and the per-tap loop's bits (the same kernel on the same tiles).
    from cconv import _nd_execute
    from cconv.algorithms import winograd
    from support.reference_nd import ref_backward_data as ref_dx3
    from support.reference_nd import ref_conv as ref_y3
    from support.reference_nd import (from_channels_last, resolve_padding, to_channels_last,
                                      weight_to_last)
    rng = np.random.default_rng(7)
    C, K = 2 * kernels.VECTOR_LENGTH["float32"], 40
    # the packed-once path needs a depth tap that reaches every slice it writes
    kw = (dict(padding=((1, 2), (1, 1), (0, 1)), dilation=(2, 1, 1)) if pss == "forward"
          else dict(padding=((1, 1), (1, 1), (0, 1)), dilation=1))
    x = rng.standard_normal((2, C, 6, 9, 10)).astype(np.float32)
    w = rng.standard_normal((K, C, 3, 3, 3)).astype(np.float32)
    plan = cconv.plan_conv3d(x.shape, w.shape, algo="winograd", **kw)
    dy = rng.standard_normal(plan.output_shape).astype(np.float32)
    tiles = []
    stack_tile = winograd.stack_tile
    monkeypatch.setattr(winograd, "stack_tile", lambda *a: tiles.append(stack_tile(*a))
                        or tiles[-1])

    def run():
        xs, dys, ws, kws = x, dy, w, kw
        if layout == "NDHWC":
            xs, dys, ws = to_channels_last(x), to_channels_last(dy), weight_to_last(w)
            kws = dict(kw, layout="NDHWC", weight_layout="DHWIO")
        if pss == "forward":
            got = cconv.conv3d(xs, ws, algo="winograd", **kws)
        else:
            got = cconv.conv3d_backward_data(dys, ws, xs.shape, algo="winograd", **kws)
        return np.ascontiguousarray(from_channels_last(got)) if layout == "NDHWC" else got

    got = run()
    assert tiles and set(tiles) == {4}          # the packed-once path ran on F(4x4)
    pads = resolve_padding(kw["padding"], x.shape[2:], w.shape[2:], 1, kw["dilation"])
    common = dict(pads=pads, dilation=kw["dilation"], groups=1)
    want = ref_y3(x, w, **common) if pss == "forward" else ref_dx3(dy, w, x.shape, **common)
    assert rel_err(got, want) <= TOL[np.float32]
    monkeypatch.setattr(_nd_execute, "_taps_packed_once", lambda *args: 0)
    np.testing.assert_array_equal(run(), got)


@pytest.mark.parametrize("mode", ["reflect", "circular", "replicate"])
def test_padding_modes_on_f4(f4_everywhere, mode):
    # The forward builds a padding mode as it packs the input (for F(4x4)'s taller packed
    # planes too); the data gradient's split path stays on F(2x2): both against the
    # reference on the input padded by numpy.pad.
    rng = np.random.default_rng(9)
    C, K = 2 * kernels.VECTOR_LENGTH["float64"], 24
    x = rng.standard_normal((2, C, 9, 7))
    w = rng.standard_normal((K, C, 3, 3))
    np_mode = {"reflect": "reflect", "circular": "wrap", "replicate": "edge"}[mode]
    padded = np.pad(x, ((0, 0), (0, 0), (2, 1), (1, 1)), mode=np_mode)
    y = cconv.conv2d(x, w, padding=((2, 1), (1, 1)), padding_mode=mode, algo="winograd")
    assert rel_err(y, ref_conv2d(padded, w, None, 1, ((0, 0), (0, 0)), 1, 1)) <= 1e-12
    dy = rng.standard_normal(y.shape)
    dx = cconv.conv2d_backward_data(dy, w, x.shape, padding=((2, 1), (1, 1)),
                                    padding_mode=mode, algo="winograd")
    dpad = ref_backward_data(dy, w, padded.shape, 1, ((0, 0), (0, 0)), 1, 1)
    want = np.zeros_like(x)       # fold the padded gradient onto the pixels it copies
    rows = np.pad(np.arange(9), (2, 1), mode=np_mode)
    cols = np.pad(np.arange(7), (1, 1), mode=np_mode)
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            want[:, :, r, c] += dpad[:, :, i, j]
    assert rel_err(dx, want) <= 1e-12


@pytest.mark.parametrize("mode", ["reflect", "symmetric", "replicate", "circular", "constant"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("shape, pads", [((2, 11, 9), ((1, 2), (3, 1))),
                                         ((1, 8, 8), ((1, 1), (1, 1))),
                                         ((3, 5, 13), ((2, 0), (0, 2)))])
@pytest.mark.parametrize("tile", [2, 4])
@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_padding_mode_data_gradient_on_each_tile(f4_everywhere, monkeypatch, mode, layout,
                                                 shape, pads, tile, beta):
    # A padding mode's data gradient writes the image's pixels from the output transform
    # and the padding's raw sums into a ring (folded afterwards): edge tiles straddle the
    # window.  Against the float64 reference of the padded input's gradient, folded; with
    # alpha / beta so both stores of the edge tiles (scaled into the result, raw into the
    # ring) are checked, on F(4x4) and on F(2x2); beta 0 takes the transposed stores, and
    # an odd channel count their scalar remainder.
    if tile == 2:
        monkeypatch.setattr(winograd_schedule, "F4_ENABLED", False)
    calls = []
    real = WinogradConvolution.backward_data_split

    def spy(self, *args, **kwargs):
        calls.append(self._bwd4 is not None)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(WinogradConvolution, "backward_data_split", spy)
    N, H, W = shape
    vl = kernels.VECTOR_LENGTH["float32"]
    C, K = vl - 1, 2 * vl
    rng = np.random.default_rng(7)
    w = rng.standard_normal((K, C, 3, 3))
    Hp, Wp = H + sum(pads[0]), W + sum(pads[1])
    gy = rng.standard_normal((N, K, Hp - 2, Wp - 2))
    dx0 = rng.standard_normal((N, C, H, W))
    expected = 2.0 * fold_reference(ref_backward_data(gy, w, (N, C, Hp, Wp)), (H, W), pads,
                                    mode) + beta * dx0
    out = _to(dx0.astype(np.float32), layout)
    cconv.conv2d_backward_data(_to(gy.astype(np.float32), layout), w.astype(np.float32),
                               out.shape, padding=pads, padding_mode=mode, layout=layout,
                               algo="winograd", out=out, alpha=2.0, beta=beta)
    got = out.transpose(0, 3, 1, 2) if layout == "NHWC" else out
    assert calls == ([] if mode == "constant" else [tile == 4])  # a constant folds nothing
    assert rel_err(got, expected) < TOL[np.float32]
