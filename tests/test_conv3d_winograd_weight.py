"""The 3-D weight gradient whose depth taps run Winograd on 2-D kernels, each image's slices
packed once for all taps (``_nd_execute._reduce_packed_once``,
``winograd.slice_range_weight_gradients``) instead of once per tap."""

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cconv
from cconv import _nd_execute
from cconv.algorithms import winograd
from support.reference_nd import (ref_backward_weight, resolve_padding, to_channels_last,
                                  weight_to_last)

rng = np.random.default_rng(2027)


def rand(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


@contextlib.contextmanager
def shared_calls():
    """Counts the calls of the packed-once gradient (a list of their pair counts)."""
    calls = []
    original = winograd.slice_range_weight_gradients

    def counting(geometry, dy, x, pairs, nthreads):
        calls.append(len(pairs))
        return original(geometry, dy, x, pairs, nthreads)

    winograd.slice_range_weight_gradients = counting
    try:
        yield calls
    finally:
        winograd.slice_range_weight_gradients = original


@contextlib.contextmanager
def tap_loop_only():
    """The per-tap loop the packed-once path replaces."""
    original = _nd_execute._reduce_packed_once
    _nd_execute._reduce_packed_once = lambda *args: False
    try:
        yield
    finally:
        _nd_execute._reduce_packed_once = original


def reference(dy, x, weight_shape, kw):
    pads = resolve_padding(kw.get("padding", 0), x.shape[2:], weight_shape[2:],
                           kw.get("stride", 1), kw.get("dilation", 1))
    return ref_backward_weight(dy.astype(np.float64), x.astype(np.float64), weight_shape,
                               stride=kw.get("stride", 1), pads=pads,
                               dilation=kw.get("dilation", 1), groups=kw.get("groups", 1))


def check(n, c, k, spatial, kw, dtype=np.float32, layout="NCDHW", threads=None):
    groups = kw.get("groups", 1)
    x = rand(n, c, *spatial, dtype=dtype)
    weight_shape = (k, c // groups, 3, 3, 3)
    plan = cconv.plan_conv3d(x.shape, weight_shape, dtype=dtype, algo="winograd", **kw)
    dy = rand(*plan.output_shape, dtype=dtype)
    want = reference(dy, x, weight_shape, kw)
    if layout == "NDHWC":
        last_shape = weight_to_last(np.empty(weight_shape)).shape
        args = (to_channels_last(dy), to_channels_last(x), last_shape)
        extra = dict(layout="NDHWC", weight_layout="DHWIO")
    else:
        args, extra = (dy, x, weight_shape), {}
    with shared_calls() as calls:
        got = cconv.conv3d_backward_weight(*args, algo="winograd", num_threads=threads,
                                           **extra, **kw)
    if layout == "NDHWC":
        got = np.ascontiguousarray(np.transpose(got, (4, 3, 0, 1, 2)))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    scale = max(1.0, float(np.abs(want).max()))
    assert np.abs(got - want).max() <= tol * scale
    with tap_loop_only():
        loop = cconv.conv3d_backward_weight(*args, algo="winograd", num_threads=threads,
                                            **extra, **kw)
    if layout == "NDHWC":
        loop = np.ascontiguousarray(np.transpose(loop, (4, 3, 0, 1, 2)))
    return got, loop, calls


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 3), c=st.sampled_from([1, 3, 8, 17]), k=st.sampled_from([1, 5, 16]),
       d=st.integers(1, 7), h=st.integers(1, 9), w=st.integers(2, 9),
       depth_pad=st.sampled_from([0, 1, 2, (0, 2), (2, 1)]),
       depth_dilation=st.sampled_from([1, 2, 3]), groups=st.sampled_from([1, 2]),
       dtype=st.sampled_from([np.float32, np.float64]),
       layout=st.sampled_from(["NCDHW", "NDHWC"]))
def test_matches_the_reference_and_the_tap_loop(n, c, k, d, h, w, depth_pad, depth_dilation,
                                                groups, dtype, layout):
    """Odd sizes, batch 1, one-pixel planes, asymmetric and past-the-extent depth padding,
    depth dilation (tap ranges of several lengths), groups, both layouts and dtypes: the
    reference's numbers, and the tap loop's bits (the same kernel on the same tiles)."""
    # Channel counts and depths made valid rather than filtered (filtering them failed
    # Hypothesis's health check on some seeds): even counts for two groups, at least one
    # output slice; the width padding (0, 1) needs two columns (w >= 2).
    c, k = (c, k) if groups == 1 else (2 * -(-c // 2), 2 * -(-k // 2))
    pad_d = depth_pad if isinstance(depth_pad, tuple) else (depth_pad, depth_pad)
    d = max(d, 2 * depth_dilation + 1 - sum(pad_d))
    out_d = d + sum(pad_d) - 2 * depth_dilation
    assert out_d >= 1
    kw = dict(padding=(pad_d, (1, 1), (0, 1)), dilation=(depth_dilation, 1, 1), groups=groups)
    got, loop, calls = check(n, c, k, (d, h, w), kw, dtype, layout)
    # the depth taps that meet the input: one gradient each
    reached = sum(any(0 <= od + tap * depth_dilation - pad_d[0] < d for od in range(out_d))
                  for tap in range(3))
    if reached >= 2:
        assert calls == [reached] * n, "the packed-once path did not run"
    else:
        assert calls == []
    np.testing.assert_array_equal(got, loop)


def test_runs_under_auto_and_through_a_plan():
    """``auto`` picks Winograd for a U-Net-like level and so the packed-once path; a 3-D
    plan's weight gradient takes it too, with the same bits."""
    x, dy = rand(1, 32, 6, 24, 24), rand(1, 32, 6, 24, 24)
    with shared_calls() as calls:
        auto = cconv.conv3d_backward_weight(dy, x, (32, 32, 3, 3, 3), padding=1)
        plan = cconv.plan_conv3d(x.shape, (32, 32, 3, 3, 3), padding=1)
        planned = plan.backward_weight(dy, x)
    assert calls == [3, 3]
    np.testing.assert_array_equal(auto, planned)
    want = reference(dy, x, (32, 32, 3, 3, 3), dict(padding=1))
    assert np.abs(auto - want).max() <= 1e-5 * np.abs(want).max()


def test_same_bits_on_any_thread_count():
    x, dy = rand(3, 8, 5, 10, 11), rand(3, 8, 5, 10, 11)
    runs = []
    for threads in (1, 2, 3):
        with shared_calls() as calls:
            runs.append(cconv.conv3d_backward_weight(dy, x, (8, 8, 3, 3, 3), padding=1,
                                                     algo="winograd", num_threads=threads))
        assert calls == [3, 3, 3]
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(runs[0], runs[2])


@pytest.mark.parametrize("kw", [
    dict(padding=1, stride=(2, 1, 1)),        # depth stride: the tap ranges skip slices
    dict(padding=1, padding_mode="reflect"),  # depth padding built by copying slices
    dict(padding=1, algo="direct"),
    dict(padding=(1, 0, 0), kernel=(3, 1, 1)),  # not 3x3 per tap: no Winograd
])
def test_other_convolutions_keep_the_tap_loop(kw):
    kw = dict(kw)
    kernel = kw.pop("kernel", (3, 3, 3))
    algo = kw.pop("algo", "auto")
    x = rand(2, 8, 6, 8, 8, dtype=np.float64)
    weight_shape = (8, 8, *kernel)
    plan = cconv.plan_conv3d(x.shape, weight_shape, dtype=np.float64, **kw)
    dy = rand(*plan.output_shape, dtype=np.float64)
    with shared_calls() as calls:
        got = cconv.conv3d_backward_weight(dy, x, weight_shape, algo=algo, **kw)
    assert calls == []
    mode = kw.pop("padding_mode", "zeros")
    if mode == "zeros":
        want = reference(dy, x, weight_shape, kw)
        assert np.abs(got - want).max() <= 1e-12 * max(1.0, np.abs(want).max())


def test_transposed_weight_gradient_keeps_the_tap_loop():
    x, w = rand(2, 8, 5, 7, 7), rand(8, 6, 3, 3, 3)
    y = cconv.conv_transpose3d(x, w, padding=1)
    dy = rand(*y.shape)
    with shared_calls() as calls:
        got = cconv.conv_transpose3d_backward_weight(dy, x, w.shape, padding=1,
                                                     algo="winograd")
    assert calls == []
    # the transposed convolution's weight gradient is the convolution's with the roles
    # of its input and output swapped
    want = cconv.conv3d_backward_weight(x, dy, w.shape, padding=1, algo="direct")
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("where", ["x", "dy"])
def test_non_finite_operands_fall_back_with_nan_where_it_belongs(where):
    """Winograd's tiles would spread a NaN; the packing notices it and the call goes the
    direct way, as the tap loop does."""
    x, dy = rand(1, 4, 5, 8, 8, dtype=np.float64), rand(1, 4, 5, 8, 8, dtype=np.float64)
    (x if where == "x" else dy)[0, 1, 2, 3, 4] = np.nan
    with shared_calls() as calls:
        got = cconv.conv3d_backward_weight(dy, x, (4, 4, 3, 3, 3), padding=1, algo="winograd")
    assert calls == [3]  # tried, refused
    want = cconv.conv3d_backward_weight(dy, x, (4, 4, 3, 3, 3), padding=1, algo="direct")
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got).any() and not np.isnan(got).all()
    finite = ~np.isnan(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-10, atol=1e-10)


def test_unequal_or_strided_pairs_are_refused():
    geom = cconv.plan_conv2d((4, 3, 6, 6), (2, 3, 3, 3), padding=1).geometry

    def geometry(n):
        import dataclasses
        return dataclasses.replace(geom, N=n)

    x, dy = rand(4, 3, 6, 6), rand(4, 2, 6, 6)
    for pairs in ([(slice(0, 2), slice(0, 3))], [(slice(0, 4, 2), slice(0, 4, 2))]):
        with pytest.raises(ValueError, match="step-1 ranges of equal lengths"):
            winograd.slice_range_weight_gradients(geometry, dy, x, pairs, 1)
