"""padding_mode: every pass and algorithm against numpy.pad + the float64 reference, and PyTorch.

The reference for a mode is independent of cconv's index arithmetic: the forward pass pads
with ``numpy.pad`` and runs the zero-padding reference; the data gradient scatters the padded
input's gradient back through the index image ``numpy.pad(arange(H*W), mode)`` (which pixel
each padded pixel copies); the transposed convolution is that data gradient.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cconv
from support.checks import assert_close
from support.reference import (NUMPY_MODE, conv_output_size, fold_reference, mode_limit_ok,
                               np_pad, ref_backward_data, ref_backward_weight, ref_conv2d)
from support.strategies import from_layout, to_layout

MODES = tuple(NUMPY_MODE)
ALGOS = ("auto", "direct", "winograd", "gemm", "depthwise")


@st.composite
def mode_cases(draw):
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    cg = draw(st.integers(1, 3))
    kg = draw(st.integers(1, 3))
    if draw(st.booleans()) and groups == 1:
        groups, cg, kg = 3, 1, draw(st.integers(1, 2))  # depthwise
    r, s = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    h, w = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    mode = draw(st.sampled_from(MODES))
    pads = tuple((draw(st.integers(0, 4)), draw(st.integers(0, 4))) for _ in range(2))
    if not mode_limit_ok(mode, pads, (h, w)):
        pads = tuple((min(lo, size - 1), min(hi, size - 1)) for (lo, hi), size
                     in zip(pads, (h, w)))
    for (lo, hi), size, k, d in zip(pads, (h, w), (r, s), dilation):
        if size + lo + hi < d * (k - 1) + 1:
            r = s = 1
            dilation = (1, 1)
    return dict(n=draw(st.integers(1, 2)), c=cg * groups, k=kg * groups, h=h, w=w, r=r, s=s,
                groups=groups, stride=stride, dilation=dilation, pads=pads, mode=mode,
                value=draw(st.sampled_from([0.0, 1.5])) if mode == "constant" else 0.0,
                layout=draw(st.sampled_from(["NCHW", "NHWC"])),
                dtype=draw(st.sampled_from([np.float32, np.float64])))


def _arrays(case, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((case["n"], case["c"], case["h"], case["w"]))
    w = rng.standard_normal((case["k"], case["c"] // case["groups"], case["r"], case["s"]))
    return x, w


def _kw(case):
    return dict(stride=case["stride"], padding=case["pads"], dilation=case["dilation"],
                groups=case["groups"], layout=case["layout"], padding_mode=case["mode"],
                padding_value=case["value"])


def _ref_forward(case, x, w):
    xp = np_pad(x, case["pads"], case["mode"], case["value"])
    return ref_conv2d(xp, w, stride=case["stride"], dilation=case["dilation"],
                      groups=case["groups"])


@settings(max_examples=120, deadline=None)
@given(mode_cases())
def test_every_pass_matches_numpy_pad_reference(case):
    x, w = _arrays(case)
    dt, layout = case["dtype"], case["layout"]
    kw = _kw(case)
    y_ref = _ref_forward(case, x, w)
    y = cconv.conv2d(to_layout(x.astype(dt), layout), w.astype(dt), **kw)
    assert_close(from_layout(y, layout), y_ref, dt, what="forward")

    gy = np.random.default_rng(1).standard_normal(y_ref.shape)
    hp = case["h"] + sum(case["pads"][0])
    wp = case["w"] + sum(case["pads"][1])
    common = dict(stride=case["stride"], dilation=case["dilation"], groups=case["groups"])
    dxp = ref_backward_data(gy, w, (case["n"], case["c"], hp, wp), **common)
    dx_ref = fold_reference(dxp, (case["h"], case["w"]), case["pads"], case["mode"])
    dx = cconv.conv2d_backward_data(to_layout(gy.astype(dt), layout), w.astype(dt),
                                    to_layout(x, layout).shape, **kw)
    assert_close(from_layout(dx, layout), dx_ref, dt, what="backward_data")

    xp = np_pad(x, case["pads"], case["mode"], case["value"])
    dw_ref = ref_backward_weight(gy, xp, w.shape, **common)
    dw = cconv.conv2d_backward_weight(to_layout(gy.astype(dt), layout),
                                      to_layout(x.astype(dt), layout), w.shape, **kw)
    assert_close(dw, dw_ref, dt, what="backward_weight")


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("mode", ["reflect", "symmetric", "replicate", "circular", "constant"])
def test_each_algorithm_runs_each_mode(algo, mode):
    groups, c, k = (4, 4, 8) if algo == "depthwise" else (1, 6, 5)
    r = 3
    case = dict(n=2, c=c, k=k, h=9, w=8, r=r, s=r, groups=groups, stride=(1, 1),
                dilation=(1, 1), pads=((2, 1), (1, 2)), mode=mode,
                value=-0.75 if mode == "constant" else 0.0, layout="NCHW", dtype=np.float64)
    x, w = _arrays(case)
    kw = _kw(case)
    y = cconv.conv2d(x, w, algo=algo, **kw)
    assert_close(y, _ref_forward(case, x, w), np.float64, what=f"{algo} forward")
    gy = np.random.default_rng(2).standard_normal(y.shape)
    dx = cconv.conv2d_backward_data(gy, w, x.shape, algo=algo, **kw)
    dx_auto = cconv.conv2d_backward_data(gy, w, x.shape, algo="direct", **kw)
    hp, wp = case["h"] + sum(case["pads"][0]), case["w"] + sum(case["pads"][1])
    dxp = ref_backward_data(gy, w, (2, c, hp, wp), groups=groups)
    assert_close(dx, fold_reference(dxp, (9, 8), case["pads"], mode), np.float64)
    assert_close(dx, dx_auto, np.float64)
    dw = cconv.conv2d_backward_weight(gy, x, w.shape, algo=algo, **kw)
    dw_ref = ref_backward_weight(gy, np_pad(x, case["pads"], mode, case["value"]), w.shape,
                                 groups=groups)
    assert_close(dw, dw_ref, np.float64)


def test_adjoint_identity_for_every_mode():
    """<conv(x), g> == <x, backward_data(g)> for the linear modes (a definition check)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 7, 6))
    w = rng.standard_normal((4, 3, 3, 2))
    for mode in ("zeros", "reflect", "symmetric", "replicate", "circular"):
        kw = dict(padding=((2, 1), (1, 1)), stride=(2, 1), padding_mode=mode)
        y = cconv.conv2d(x, w, **kw)
        g = rng.standard_normal(y.shape)
        dx = cconv.conv2d_backward_data(g, w, x.shape, **kw)
        assert np.isclose(np.vdot(y, g), np.vdot(x, dx), rtol=1e-12)


@settings(max_examples=60, deadline=None)
@given(mode_cases(), st.integers(0, 1))
def test_conv_transpose_is_the_adjoint(case, output_padding):
    """conv_transpose2d with a mode == the data gradient of conv2d with that mode; its
    gradients are conv2d's forward and weight gradient with that mode."""
    if case["mode"] == "constant":
        case["value"] = 0.0
    if output_padding >= max(min(case["stride"]), min(case["dilation"])):
        output_padding = 0
    x_fwd, w = _arrays(case, seed=4)
    layout, dt = case["layout"], case["dtype"]
    kw = _kw(case)
    kw.pop("padding_value")
    y_fwd = cconv.conv2d(to_layout(x_fwd, layout), w, **kw)  # shape of the transposed input
    xt = np.random.default_rng(5).standard_normal(from_layout(y_fwd, layout).shape)
    wt = w  # (C_in of the transpose = K of the conv, K/groups, R, S)
    out_shape = to_layout(x_fwd, layout).shape
    yt = cconv.conv_transpose2d(to_layout(xt.astype(dt), layout), wt.astype(dt),
                                output_shape=out_shape, **kw)
    expected = cconv.conv2d_backward_data(to_layout(xt, layout), w, out_shape, **kw)
    assert_close(from_layout(yt, layout), from_layout(expected, layout), dt, what="transpose")
    gt = np.random.default_rng(6).standard_normal(out_shape)
    dxt = cconv.conv_transpose2d_backward_data(gt.astype(dt), wt.astype(dt), xt.shape
                                               if layout == "NCHW" else
                                               to_layout(xt, layout).shape,
                                               output_shape=out_shape, **kw)
    assert_close(dxt, cconv.conv2d(gt, w, **kw), dt, what="transpose backward_data")
    dwt = cconv.conv_transpose2d_backward_weight(gt.astype(dt), to_layout(xt, layout).astype(dt),
                                                 w.shape, output_shape=out_shape, **kw)
    assert_close(dwt, cconv.conv2d_backward_weight(to_layout(xt, layout), gt, w.shape, **kw),
                 dt, what="transpose backward_weight")


def test_circular_transpose_is_periodic():
    """A stride-1 circular transposed convolution with 'same' padding is a periodic
    convolution: shifting the input shifts the output cyclically."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 2, 8, 8))
    w = rng.standard_normal((2, 3, 3, 3))
    y = cconv.conv_transpose2d(x, w, padding=1, padding_mode="circular")
    y_shift = cconv.conv_transpose2d(np.roll(x, (2, 3), axis=(2, 3)), w, padding=1,
                                     padding_mode="circular")
    np.testing.assert_allclose(y_shift, np.roll(y, (2, 3), axis=(2, 3)), atol=1e-12)


def test_full_padding():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 2, 5, 6))
    w = rng.standard_normal((3, 2, 3, 2))
    y = cconv.conv2d(x, w, padding="full", dilation=(1, 2))
    assert y.shape == (1, 3, 7, 8)
    assert_close(y, ref_conv2d(x, w, pads=((2, 2), (2, 2)), dilation=(1, 2)), np.float64)
    # the full correlation's adjoint is the valid correlation
    g = rng.standard_normal(y.shape)
    dx = cconv.conv2d_backward_data(g, w, x.shape, padding="full", dilation=(1, 2))
    assert np.isclose(np.vdot(y, g), np.vdot(x, dx))


def test_plan_and_find_take_modes():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 4, 10, 10)).astype(np.float32)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    case = dict(pads=((1, 1), (1, 1)), mode="reflect", value=0.0, stride=(1, 1),
                dilation=(1, 1), groups=1)
    plan = cconv.plan_conv2d(x.shape, w.shape, padding=1, padding_mode="reflect")
    assert plan.output_shape == (2, 6, 10, 10)
    assert_close(plan.forward(x, w), _ref_forward(case, x.astype(np.float64), w), np.float32)
    # the depthwise, direct and Winograd kernels build the mode where they copy the input
    # (band buffers, packing): the same scratch as zero padding; GEMM runs the padded
    # input's problem, so its padded copy is extra scratch
    assert plan.algorithm == "depthwise"
    for algo in ("depthwise", "direct", "winograd"):
        with_mode = cconv.plan_conv2d(x.shape, w.shape, padding=1, padding_mode="reflect",
                                      algo=algo)
        zeros_plan = cconv.plan_conv2d(x.shape, w.shape, padding=1, algo=algo)
        assert with_mode.workspace_bytes == zeros_plan.workspace_bytes, algo
        assert_close(with_mode.forward(x, w), plan.forward(x, w), np.float32)
    gemm = cconv.plan_conv2d(x.shape, w.shape, padding=1, padding_mode="reflect", algo="gemm")
    padded_plan = cconv.plan_conv2d((2, 4, 12, 12), w.shape, padding=0, algo="gemm")
    assert gemm.workspace_bytes == padded_plan.workspace_bytes + 2 * 4 * 12 * 12 * 4
    assert_close(gemm.forward(x, w), plan.forward(x, w), np.float32)
    g = rng.standard_normal((2, 6, 10, 10)).astype(np.float32)
    assert_close(plan.backward_data(g, w),
                 cconv.conv2d_backward_data(g, w, x.shape, padding=1, padding_mode="reflect"),
                 np.float32)
    assert_close(plan.backward_weight(g, x),
                 cconv.conv2d_backward_weight(g, x, w.shape, padding=1,
                                              padding_mode="reflect"), np.float32)
    results = cconv.find_algorithms(x.shape, w.shape, padding=1, padding_mode="circular")
    assert {r.algo for r in results} >= {"direct", "winograd"}


def test_alpha_beta_out_with_modes():
    rng = np.random.default_rng(10)
    x = rng.standard_normal((2, 3, 6, 7))
    w = rng.standard_normal((4, 3, 3, 3))
    kw = dict(padding=2, padding_mode="symmetric")
    y = cconv.conv2d(x, w, **kw)
    g = rng.standard_normal(y.shape)
    dx = cconv.conv2d_backward_data(g, w, x.shape, **kw)
    out = rng.standard_normal(x.shape)
    expected = 2.0 * dx + 0.5 * out
    got = cconv.conv2d_backward_data(g, w, x.shape, out=out, alpha=2.0, beta=0.5, **kw)
    assert got is out
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    # a non-contiguous out receives the same
    big = rng.standard_normal((2, 3, 6, 14))
    view = big[:, :, :, ::2]
    before = view.copy()
    cconv.conv2d_backward_data(g, w, x.shape, out=view, alpha=2.0, beta=0.5, **kw)
    np.testing.assert_allclose(view, 2.0 * dx + 0.5 * before, rtol=1e-12, atol=1e-12)


def test_transpose_bias_not_folded():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 3, 5, 5))
    w = rng.standard_normal((3, 2, 3, 3))
    b = np.array([1.0, -2.0])
    y = cconv.conv_transpose2d(x, w, b, padding=1, padding_mode="replicate")
    y0 = cconv.conv_transpose2d(x, w, padding=1, padding_mode="replicate")
    np.testing.assert_allclose(y - y0, np.broadcast_to(b[None, :, None, None], y.shape),
                               atol=1e-12)


@pytest.mark.parametrize("mode,pad,size", [("reflect", 3, 3), ("reflect", 5, 4),
                                           ("circular", 4, 3)])
def test_mode_needing_more_input_is_a_value_error(mode, pad, size):
    x = np.zeros((1, 1, size, 8))
    w = np.zeros((1, 1, 1, 1))
    with pytest.raises(ValueError, match="padding_mode") as info:
        cconv.conv2d(x, w, padding=pad, padding_mode=mode)
    assert str(size) in str(info.value) and "padding" in str(info.value)


def test_largest_allowed_paddings_work():
    rng = np.random.default_rng(12)
    x = rng.standard_normal((1, 1, 3, 3))
    w = rng.standard_normal((1, 1, 1, 1))
    for mode, pad in (("reflect", 2), ("circular", 3), ("symmetric", 7), ("replicate", 9)):
        case = dict(pads=((pad, pad), (pad, pad)), mode=mode, value=0.0, stride=(1, 1),
                    dilation=(1, 1), groups=1)
        y = cconv.conv2d(x, w, padding=pad, padding_mode=mode)
        assert_close(y, _ref_forward(case, x, w), np.float64, what=mode)


def test_bad_mode_arguments():
    x = np.zeros((1, 1, 4, 4))
    w = np.zeros((1, 1, 3, 3))
    with pytest.raises(ValueError, match="padding_mode"):
        cconv.conv2d(x, w, padding=1, padding_mode="mirror")
    with pytest.raises(TypeError, match="padding_value"):
        cconv.conv2d(x, w, padding=1, padding_mode="constant", padding_value="1")
    with pytest.raises(ValueError, match="padding_value"):
        cconv.conv2d(x, w, padding=1, padding_mode="reflect", padding_value=2.0)
    with pytest.raises(ValueError, match="padding_mode"):
        cconv.conv_transpose2d(x, w, padding_mode="wrap")


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular", "constant"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_against_torch_autograd(mode, layout):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(13)
    x = rng.standard_normal((2, 4, 9, 7))
    w = rng.standard_normal((6, 2, 3, 3))
    pads = ((2, 1), (1, 2))
    value = 0.5 if mode == "constant" else 0.0
    xt = torch.tensor(x, requires_grad=True)
    wt = torch.tensor(w, requires_grad=True)
    padded = F.pad(xt, (pads[1][0], pads[1][1], pads[0][0], pads[0][1]), mode=mode,
                   value=value) if mode == "constant" else \
        F.pad(xt, (pads[1][0], pads[1][1], pads[0][0], pads[0][1]), mode=mode)
    yt = F.conv2d(padded, wt, stride=(2, 1), dilation=(1, 2), groups=2)
    g = rng.standard_normal(tuple(yt.shape))
    yt.backward(torch.tensor(g))
    kw = dict(padding=pads, stride=(2, 1), dilation=(1, 2), groups=2, padding_mode=mode,
              padding_value=value, layout=layout)
    y = cconv.conv2d(to_layout(x, layout), w, **kw)
    assert_close(from_layout(y, layout), yt.detach().numpy(), np.float64)
    dx, dw, _ = cconv.conv2d_backward(to_layout(g, layout), to_layout(x, layout), w, **kw)
    assert_close(from_layout(dx, layout), xt.grad.numpy(), np.float64)
    assert_close(dw, wt.grad.numpy(), np.float64)


def test_output_size_rule_is_unchanged_by_mode():
    x = np.ones((1, 1, 7, 7))
    w = np.ones((1, 1, 3, 3))
    for mode in MODES:
        y = cconv.conv2d(x, w, padding=((1, 2), (0, 1)), stride=2, padding_mode=mode)
        assert y.shape[2:] == conv_output_size((7, 7), (3, 3), (2, 2), ((1, 2), (0, 1)),
                                               (1, 1))
        if mode not in ("zeros", "constant"):
            # every padded pixel copies a one: the sum of a 3x3 window of ones
            np.testing.assert_allclose(y, 9.0)


def test_transpose_accepts_padding_value_and_ignores_it():
    """The adjoint of a constant-padded convolution is that of its linear part (zeros)."""
    rng = np.random.default_rng(14)
    x = rng.standard_normal((1, 3, 5, 5))
    w = rng.standard_normal((3, 2, 3, 3))
    zeros = cconv.conv_transpose2d(x, w, padding=1)
    const = cconv.conv_transpose2d(x, w, padding=1, padding_mode="constant", padding_value=2.5)
    np.testing.assert_array_equal(const, zeros)
    g = rng.standard_normal(zeros.shape)
    dx, dw, _ = cconv.conv_transpose2d_backward(g, x, w, padding=1, padding_mode="constant",
                                                padding_value=2.5)
    dx0, dw0, _ = cconv.conv_transpose2d_backward(g, x, w, padding=1)
    np.testing.assert_array_equal(dx, dx0)
    np.testing.assert_array_equal(dw, dw0)
    with pytest.raises(ValueError, match="padding_value"):
        cconv.conv_transpose2d(x, w, padding=1, padding_mode="reflect", padding_value=1.0)
    with pytest.raises(TypeError, match="padding_value"):
        cconv.conv_transpose2d(x, w, padding=1, padding_mode="constant", padding_value="1")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stride, dilation, pads", [
    ((1, 1), (1, 1), ((5, 2), (4, 3))), ((1, 2), (2, 1), ((5, 2), (4, 3))),
    ((2, 3), (1, 2), ((5, 2), (4, 3))), ((1, 1), (1, 1), ((40, 3), (0, 33)))])
def test_depthwise_kernels_build_and_fold_each_mode(mode, stride, dilation, pads, depthwise_path):
    """The depthwise kernels build the padding in their band buffers and fold the data
    gradient as they store it (no padded copy): tall planes cut into bands on several
    threads, column phases of a stride, paddings wider than a band (where the mode allows)."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 2, 70, 37))
    w = rng.standard_normal((4, 1, 5, 4))
    case = dict(pads=pads, mode=mode, value=-0.75 if mode == "constant" else 0.0,
                stride=stride, dilation=dilation, groups=2)
    kw = dict(stride=stride, padding=pads, dilation=dilation, groups=2, padding_mode=mode,
              padding_value=case["value"], algo="depthwise")
    y_ref = _ref_forward(case, x, w)
    gy = rng.standard_normal(y_ref.shape)
    common = dict(stride=stride, dilation=dilation, groups=2)
    dw_ref = ref_backward_weight(gy, np_pad(x, pads, mode, case["value"]), w.shape, **common)
    padded_shape = (1, 2, 70 + sum(pads[0]), 37 + sum(pads[1]))
    dx_ref = fold_reference(ref_backward_data(gy, w, padded_shape, **common), (70, 37), pads,
                            mode)
    results = []
    for threads in (1, 3):
        y = cconv.conv2d(x, w, num_threads=threads, **kw)
        assert_close(y, y_ref, np.float64, what=f"forward, {threads} threads")
        dw = cconv.conv2d_backward_weight(gy, x, w.shape, num_threads=threads, **kw)
        assert_close(dw, dw_ref, np.float64, what=f"backward_weight, {threads} threads")
        dx = cconv.conv2d_backward_data(gy, w, x.shape, num_threads=threads, **kw)
        assert_close(dx, dx_ref, np.float64, what=f"backward_data, {threads} threads")
        out = np.ones_like(x)
        cconv.conv2d_backward_data(gy, w, x.shape, num_threads=threads, out=out, alpha=2.0,
                                   beta=-0.5, **kw)
        assert_close(out, 2.0 * dx_ref - 0.5, np.float64, what="backward_data alpha / beta")
        results.append((y, dw, dx))
    # every output is summed the same way whatever the band split
    for one, three in zip(*results):
        np.testing.assert_array_equal(one, three)


@pytest.mark.parametrize("algo", ["direct", "winograd"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_packing_builds_each_mode(algo, mode, layout):
    """Direct and Winograd build the padding mode as they pack the input (forward and the
    weight gradient): asymmetric padding, groups, both layouts, a NaN reflected by the mode."""
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 4, 9, 11))
    w = rng.standard_normal((6, 2, 3, 3))
    pads = ((2, 1), (1, 2))
    case = dict(pads=pads, mode=mode, value=2.5 if mode == "constant" else 0.0,
                stride=(1, 1), dilation=(1, 1), groups=2)
    kw = dict(padding=pads, groups=2, padding_mode=mode, padding_value=case["value"],
              layout=layout, algo=algo)
    y = cconv.conv2d(to_layout(x, layout), w, **kw)
    assert_close(from_layout(y, layout), _ref_forward(case, x, w), np.float64)
    gy = rng.standard_normal(y.shape)
    dw = cconv.conv2d_backward_weight(gy, to_layout(x, layout), w.shape, **kw)
    dw_ref = ref_backward_weight(from_layout(gy, layout), np_pad(x, pads, mode, case["value"]),
                                 w.shape, stride=(1, 1), dilation=(1, 1), groups=2)
    assert_close(dw, dw_ref, np.float64)
    # a NaN next to the edge: the mode copies it into the padding, and every output whose
    # window holds it or a copy of it is NaN (Winograd falls back to the direct kernels)
    x[1, 3, 1, 0] = np.nan
    y = from_layout(cconv.conv2d(to_layout(x, layout), w, **kw), layout)
    expected = _ref_forward(case, x, w)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(expected))
    finite = ~np.isnan(expected)
    assert_close(y[finite], expected[finite], np.float64)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_depthwise_data_gradient_of_a_mode_with_an_infinite_weight(layout):
    """A non-finite weight: the data gradient is the scatter over existing outputs (no
    0 * Inf from the padding), folded by the mode, on either memory layout."""
    rng = np.random.default_rng(13)
    x = rng.standard_normal((2, 3, 9, 8))
    w = rng.standard_normal((3, 1, 3, 3))
    w[1, 0, 0, 2] = np.inf
    pads = ((1, 2), (2, 1))
    kw = dict(padding=pads, groups=3, padding_mode="reflect", layout=layout, algo="depthwise")
    gy = rng.standard_normal((2, 3, 10, 9))
    dx = from_layout(cconv.conv2d_backward_data(to_layout(gy, layout), w,
                                                to_layout(x, layout).shape, **kw), layout)
    with np.errstate(invalid="ignore"):
        expected = fold_reference(ref_backward_data(gy, w, (2, 3, 12, 11), groups=3), (9, 8),
                                  pads, "reflect")
    np.testing.assert_array_equal(np.isnan(dx), np.isnan(expected))
    np.testing.assert_array_equal(np.isinf(dx), np.isinf(expected))
    finite = np.isfinite(expected)
    assert_close(dx[finite], expected[finite], np.float64)
