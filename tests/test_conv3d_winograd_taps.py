"""The 3-D forward and data gradient whose depth taps run Winograd on 2-D kernels, each
image's slices packed once for all taps (``_nd_execute._taps_packed_once``,
``winograd.slice_range_forward``) instead of once per tap."""

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cconv
from cconv import _nd_execute
from cconv.algorithms import winograd
from support.reference_nd import (from_channels_last, ref_backward_data, ref_conv,
                                  resolve_padding, to_channels_last, weight_to_last)

rng = np.random.default_rng(2028)
PASSES = ["forward", "backward_data"]


def rand(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


@contextlib.contextmanager
def shared_calls():
    """Records the packed-once calls (their numbers of taps)."""
    calls = []
    original = winograd.slice_range_forward

    def counting(geometry, x, taps, alpha, nthreads, data_gradient=False, tile=2):
        calls.append(len(taps))
        return original(geometry, x, taps, alpha, nthreads, data_gradient, tile)

    winograd.slice_range_forward = counting
    try:
        yield calls
    finally:
        winograd.slice_range_forward = original


@contextlib.contextmanager
def tap_loop_only():
    """The per-tap loop the packed-once path replaces."""
    original = _nd_execute._taps_packed_once
    _nd_execute._taps_packed_once = lambda *args: 0
    try:
        yield
    finally:
        _nd_execute._taps_packed_once = original


def operands(n, c, k, spatial, kw, dtype):
    groups = kw.get("groups", 1)
    x = rand(n, c, *spatial, dtype=dtype)
    w = rand(k, c // groups, 3, 3, 3, dtype=dtype)
    plan = cconv.plan_conv3d(x.shape, w.shape, dtype=dtype, algo="winograd", **kw)
    dy = rand(*plan.output_shape, dtype=dtype)
    return x, w, dy


def reference(pss, x, w, dy, kw):
    pads = resolve_padding(kw.get("padding", 0), x.shape[2:], w.shape[2:],
                           kw.get("stride", 1), kw.get("dilation", 1))
    common = dict(pads=pads, dilation=kw.get("dilation", 1), groups=kw.get("groups", 1))
    if pss == "forward":
        return ref_conv(x, w, **common)
    return ref_backward_data(dy, w, x.shape, **common)


def run(pss, x, w, dy, kw, layout="NCDHW", **call):
    """One pass in ``layout``, the result channels first."""
    if layout == "NDHWC":
        x, dy, w = to_channels_last(x), to_channels_last(dy), weight_to_last(w)
        kw = dict(kw, layout="NDHWC", weight_layout="DHWIO")
    if pss == "forward":
        got = cconv.conv3d(x, w, algo="winograd", **kw, **call)
    else:
        got = cconv.conv3d_backward_data(dy, w, x.shape, algo="winograd", **kw, **call)
    return np.ascontiguousarray(from_channels_last(got)) if layout == "NDHWC" else got


def assert_near(got, want, dtype):
    tol = 1e-5 if dtype == np.float32 else 1e-12
    scale = max(1.0, float(np.abs(want).max()))
    assert np.abs(got - want).max() <= tol * scale


@settings(max_examples=40, deadline=None)
@given(pss=st.sampled_from(PASSES), n=st.integers(1, 3), c=st.sampled_from([1, 3, 8, 17]),
       k=st.sampled_from([1, 5, 16]), d=st.integers(1, 7), h=st.integers(1, 9),
       w=st.integers(2, 9), depth_pad=st.sampled_from([0, 1, 2, (0, 2), (2, 1)]),
       depth_dilation=st.sampled_from([1, 2, 3]), groups=st.sampled_from([1, 2]),
       dtype=st.sampled_from([np.float32, np.float64]),
       layout=st.sampled_from(["NCDHW", "NDHWC"]))
def test_matches_the_reference_and_the_tap_loop(pss, n, c, k, d, h, w, depth_pad,
                                                depth_dilation, groups, dtype, layout):
    """Odd sizes, batch 1, one-pixel planes, asymmetric and past-the-extent depth padding,
    depth dilation (tap ranges of several lengths), groups, both layouts and dtypes: the
    reference's numbers, and the tap loop's bits (the same kernel on the same tiles)."""
    # Channel counts and depths built valid rather than filtered out (too many rejected
    # draws fail Hypothesis's health check): even counts for two groups, at least one
    # output slice.
    c, k = (c, k) if groups == 1 else (2 * -(-c // 2), 2 * -(-k // 2))
    pad_d = depth_pad if isinstance(depth_pad, tuple) else (depth_pad, depth_pad)
    d = max(d, 2 * depth_dilation + 1 - sum(pad_d))
    out_d = d + sum(pad_d) - 2 * depth_dilation
    assert out_d >= 1
    kw = dict(padding=(pad_d, (1, 1), (0, 1)), dilation=(depth_dilation, 1, 1), groups=groups)
    x, wt, dy = operands(n, c, k, (d, h, w), kw, dtype)
    with shared_calls() as calls:
        got = run(pss, x, wt, dy, kw, layout)
    assert_near(got, reference(pss, x, wt, dy, kw), dtype)
    with tap_loop_only():
        loop = run(pss, x, wt, dy, kw, layout)
    np.testing.assert_array_equal(got, loop)
    # the packed-once path runs where some depth tap reaches every slice it writes
    in_d, written = (d, out_d) if pss == "forward" else (out_d, d)
    spans = [[i for i in range(out_d) if 0 <= i + tap * depth_dilation - pad_d[0] < d]
             for tap in range(3)]
    reached = [s for s in spans if s]
    full = any(len(s) == written for s in reached) if pss == "forward" else any(
        len({i + tap * depth_dilation - pad_d[0] for i in s}) == written
        for tap, s in enumerate(spans) if s)
    del in_d
    if len(reached) >= 2 and full:
        assert calls == [len(reached)] * n, "the packed-once path did not run"
    else:
        assert calls == []


@pytest.mark.parametrize("pss", PASSES)
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_out_with_garbage_alpha_beta_and_bias(pss, layout):
    """The first tap writes ``out`` (``beta`` = 0 never reads it: NaN there stays out of the
    result), later taps add; ``alpha`` / ``beta`` and the bias apply once."""
    kw = dict(padding=1)
    x, w, dy = operands(2, 8, 16, (5, 6, 7), kw, np.float32)
    want = reference(pss, x, w, dy, kw)
    shape = want.shape if layout == "NCDHW" else to_channels_last(want).shape
    out = np.full(shape, np.nan, np.float32)
    with shared_calls() as calls:
        got = run(pss, x, w, dy, kw, layout, out=out)
    assert calls == [3, 3]
    assert_near(got, want, np.float32)
    start = rand(*shape)
    out = start.copy()
    run(pss, x, w, dy, kw, layout, out=out, alpha=0.5, beta=-2.0)
    start_first = from_channels_last(start) if layout == "NDHWC" else start
    got = from_channels_last(out) if layout == "NDHWC" else out
    assert_near(got, 0.5 * want - 2.0 * start_first, np.float32)
    if pss == "forward":
        b = rand(16)
        got = run(pss, x, w, dy, kw, layout, bias=b)
        assert_near(got, want + b[None, :, None, None, None], np.float32)


@pytest.mark.parametrize("pss", PASSES)
def test_same_bits_on_any_thread_count_and_through_a_plan(pss):
    kw = dict(padding=1)
    x, w, dy = operands(2, 16, 16, (4, 9, 10), kw, np.float32)
    first = run(pss, x, w, dy, kw, num_threads=1)
    for threads in (2, 3):
        np.testing.assert_array_equal(run(pss, x, w, dy, kw, num_threads=threads), first)
    plan = cconv.plan_conv3d(x.shape, w.shape, algo="winograd", **kw)
    with shared_calls() as calls:
        got = plan.forward(x, w) if pss == "forward" else plan.backward_data(dy, w)
    assert calls == [3, 3]
    np.testing.assert_array_equal(got, first)


@pytest.mark.parametrize("pss", PASSES)
@pytest.mark.parametrize("where", ["operand of the second image", "weight"])
def test_non_finite_values_fall_back_where_they_are(pss, where):
    """A NaN in the second image's slices: the first image is done packed, the rest by the
    tap loop (whose direct fallback puts the NaN only in the windows that hold it); a NaN
    weight: the tap loop from the start."""
    kw = dict(padding=1)
    x, w, dy = operands(2, 4, 4, (4, 6, 6), kw, np.float64)
    if where == "weight":
        w[1, 2, 0, 1, 1] = np.nan
    elif pss == "forward":
        x[1, 3, 2, 0, 0] = np.nan
    else:
        dy[1, 3, 2, 0, 0] = np.nan
    with shared_calls() as calls:
        got = run(pss, x, w, dy, kw)
    assert calls == ([] if where == "weight" else [3, 3])
    want = reference(pss, x, w, dy, kw)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = ~np.isnan(want)
    assert np.abs(got[finite] - want[finite]).max() <= 1e-12 * max(1.0, np.abs(want[finite]).max())


def test_keeps_the_tap_loop_where_it_does_not_apply():
    """Depth stride, a padding mode, direct 2-D kernels and transposed convolutions go
    through the tap loop."""
    x, w, dy = operands(1, 8, 8, (6, 6, 6), dict(padding=1), np.float32)
    with shared_calls() as calls:
        cconv.conv3d(x, w, padding=1, stride=(2, 1, 1), algo="winograd")
        cconv.conv3d(x, w, padding=1, padding_mode="reflect", algo="winograd")
        cconv.conv3d(x, w, padding=1, algo="direct")
        cconv.conv_transpose3d(dy, w.transpose(1, 0, 2, 3, 4).copy(), padding=1,
                               algo="winograd")
    assert calls == []


@pytest.mark.parametrize("pss", PASSES)
def test_scratch_within_the_plans_workspace(pss):
    """The whole packed stack (8 slices, where a tap's 2-D call packs 4 in the forward)
    and one tap's scratch at a time, within what the plan reports.  The forward's taps are
    of one length (no depth padding), so the pool holds no buffers of other sizes."""
    from cconv import _workspace
    pad = ((0, 0), (1, 1), (1, 1)) if pss == "forward" else ((2, 2), (1, 1), (1, 1))
    x = rand(2, 16, 8, 12, 12)
    w = rand(16, 16, 5, 3, 3)
    plan = cconv.plan_conv3d(x.shape, w.shape, padding=pad, algo="winograd")
    dy = rand(*plan.output_shape)
    _workspace.clear()
    with shared_calls() as calls:
        plan.forward(x, w) if pss == "forward" else plan.backward_data(dy, w)
    assert calls == [5, 5]
    assert 0 < _workspace.pooled_bytes() <= plan.workspace_bytes_for(pss)
