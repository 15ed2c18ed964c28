"""1-D convolution: every pass against the float64 N-d reference and PyTorch, plans, errors.

conv1d runs as conv2d with a height of 1; besides the reference sweeps, one test checks that
the two give the very same numbers (the lift adds nothing of its own).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cconv
from cconv import _plan_nd
from cconv import functional_nd as F
from support.checks import assert_close
from support.checks_nd import PASSES, check_case, check_out_alpha_beta
from support.reference_nd import (ref_backward_data, ref_backward_weight, ref_conv,
                                  ref_conv_transpose, to_channels_last, weight_to_last)
from support.strategies_nd import conv_cases, transpose_cases

rng = np.random.default_rng(4321)


def rand(*shape, dtype=np.float64):
    return rng.standard_normal(shape).astype(dtype)


# -- the reference sweeps ---------------------------------------------------------------------

@given(conv_cases(1, max_size=20, max_kernel=5, max_n=3))
def test_conv1d_every_pass_matches_reference(case):
    check_case(F, case)


@given(transpose_cases(1, max_size=9, max_kernel=5, max_n=3))
def test_conv_transpose1d_every_pass_matches_reference(case):
    check_case(F, case, transposed=True)


@settings(max_examples=25)
@given(conv_cases(1, max_size=12), st.sampled_from(PASSES), st.sampled_from([1.0, -0.5]),
       st.sampled_from([0.0, 1.0, 0.25]), st.sampled_from(["C", "strided"]))
def test_conv1d_out_alpha_beta(case, pss, alpha, beta, out_form):
    check_out_alpha_beta(F, case, pss, alpha, beta, out_form)


@settings(max_examples=25)
@given(transpose_cases(1, max_size=6), st.sampled_from(PASSES), st.sampled_from([1.0, 2.0]),
       st.sampled_from([0.0, -1.0]), st.sampled_from(["C", "strided"]))
def test_conv_transpose1d_out_alpha_beta(case, pss, alpha, beta, out_form):
    check_out_alpha_beta(F, case, pss, alpha, beta, out_form, transposed=True)


# -- the H = 1 lift ---------------------------------------------------------------------------

@pytest.mark.parametrize("layout, weight_layout", [("NCW", "OIW"), ("NWC", "WIO")])
def test_conv1d_is_conv2d_of_height_one(layout, weight_layout):
    x, w, b = rand(2, 6, 40, dtype=np.float32), rand(4, 3, 5, dtype=np.float32), rand(4)
    kw = dict(stride=2, dilation=3, groups=2)
    if layout == "NWC":
        x, w = to_channels_last(x), weight_to_last(w)
    y = F.conv1d(x, w, b, padding=(3, 1), layout=layout, weight_layout=weight_layout, **kw)
    axis, waxis = (2, 2) if layout == "NCW" else (1, 0)
    y2 = cconv.conv2d(np.expand_dims(x, axis), np.expand_dims(w, waxis), b,
                      padding=((0, 0), (3, 1)), layout="NCHW" if layout == "NCW" else "NHWC",
                      weight_layout="OIHW" if layout == "NCW" else "HWIO", **kw)
    np.testing.assert_array_equal(y, np.squeeze(y2, axis))
    dy = rand(*y.shape, dtype=np.float32)
    dw = F.conv1d_backward_weight(dy, x, w.shape, padding=(3, 1), layout=layout,
                                  weight_layout=weight_layout, **kw)
    dw2 = cconv.conv2d_backward_weight(np.expand_dims(dy, axis), np.expand_dims(x, axis),
                                       np.expand_dims(w, waxis).shape, padding=((0, 0), (3, 1)),
                                       layout="NCHW" if layout == "NCW" else "NHWC",
                                       weight_layout="OIHW" if layout == "NCW" else "HWIO",
                                       **kw)
    np.testing.assert_array_equal(dw, np.squeeze(dw2, waxis))


@pytest.mark.parametrize("padding, pads", [
    (2, ((2, 2),)), ((2,), ((2, 2),)), ((1, 3), ((1, 3),)), (((1, 3),), ((1, 3),)),
    ("same", ((2, 2),)), ("full", ((4, 4),)), ("valid", ((0, 0),)),
])
def test_padding_forms(padding, pads):
    x, w = rand(2, 3, 11), rand(4, 3, 5)
    assert_close(F.conv1d(x, w, padding=padding), ref_conv(x, w, pads=pads))


def test_long_dilations_as_in_wavenet():
    x, w = rand(1, 4, 1200, dtype=np.float32), rand(4, 4, 2, dtype=np.float32)
    for dilation in (1, 64, 512):
        pads = ((dilation, 0),)  # causal: only the past
        y = F.conv1d(x, w, padding=pads, dilation=dilation)
        assert y.shape == x.shape
        assert_close(y, ref_conv(x, w, pads=pads, dilation=dilation))
        dy = rand(*y.shape, dtype=np.float32)
        assert_close(F.conv1d_backward_data(dy, w, x.shape, padding=pads, dilation=dilation),
                     ref_backward_data(dy, w, x.shape, pads=pads, dilation=dilation))
        assert_close(F.conv1d_backward_weight(dy, x, w.shape, padding=pads, dilation=dilation),
                     ref_backward_weight(dy, x, w.shape, pads=pads, dilation=dilation))


@pytest.mark.parametrize("algo, c, k, groups, kernel", [
    ("direct", 3, 5, 1, 4), ("gemm", 4, 6, 2, 1), ("depthwise", 4, 8, 4, 7),
])
def test_explicit_algorithms(algo, c, k, groups, kernel):
    x, w = rand(2, c, 30), rand(k, c // groups, kernel)
    pads = ((0, 0),) if algo == "gemm" else ((2, 1),)
    kw = dict(padding=pads, groups=groups, algo=algo)
    ref = ref_conv(x, w, pads=pads, groups=groups)
    dy = rand(*ref.shape)
    assert_close(F.conv1d(x, w, **kw), ref)
    assert_close(F.conv1d_backward_data(dy, w, x.shape, **kw),
                 ref_backward_data(dy, w, x.shape, pads=pads, groups=groups))
    assert_close(F.conv1d_backward_weight(dy, x, w.shape, **kw),
                 ref_backward_weight(dy, x, w.shape, pads=pads, groups=groups))


def test_one_pixel_output_empty_batch_and_float16():
    x, w = rand(1, 3, 7, dtype=np.float16), rand(2, 3, 7, dtype=np.float16)
    y = F.conv1d(x, w)
    assert y.shape == (1, 2, 1) and y.dtype == np.float16
    assert_close(y, ref_conv(x, w))
    assert F.conv1d(np.zeros((0, 3, 7)), w).shape == (0, 2, 1)


def test_fused_backward_matches_separate_calls():
    x, w = rand(2, 4, 17), rand(6, 2, 3)
    kw = dict(stride=2, padding="same", groups=2, padding_mode="reflect")
    dy = rand(*F.conv1d(x, w, **kw).shape)
    dx, dw, db = F.conv1d_backward(dy, x, w, **kw)
    np.testing.assert_array_equal(dx, F.conv1d_backward_data(dy, w, x.shape, **kw))
    np.testing.assert_array_equal(dw, F.conv1d_backward_weight(dy, x, w.shape, **kw))
    np.testing.assert_array_equal(db, F.conv1d_backward_bias(dy))
    assert_close(F.conv1d_backward_bias(to_channels_last(dy), layout="NWC"), dy.sum(axis=(0, 2)))
    tkw = dict(stride=3, padding=(1, 2), output_padding=2, groups=2)
    xt, wt = rand(1, 4, 5), rand(4, 3, 4)
    gy = rand(*F.conv_transpose1d(xt, wt, **tkw).shape)
    tdx, tdw, tdb = F.conv_transpose1d_backward(gy, xt, wt, need=("data", "weight"), **tkw)
    assert tdb is None
    np.testing.assert_array_equal(tdx, F.conv_transpose1d_backward_data(gy, wt, xt.shape, **tkw))
    np.testing.assert_array_equal(tdw,
                                  F.conv_transpose1d_backward_weight(gy, xt, wt.shape, **tkw))


# -- plans and find ---------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["NCW", "NWC"])
def test_plan_conv1d_matches_the_functions(layout):
    x = rand(2, 4, 33, dtype=np.float32)
    w = rand(6, 2, 5, dtype=np.float32)
    wl = "OIW"
    if layout == "NWC":
        x, w, wl = to_channels_last(x), weight_to_last(w), "WIO"
    kw = dict(padding="same", dilation=2, groups=2, layout=layout, weight_layout=wl)
    plan = _plan_nd.plan_conv1d(x.shape, w.shape, **kw)
    y = F.conv1d(x, w, **kw)
    assert plan.output_shape == y.shape and plan.algorithm in cconv.ALGORITHMS
    assert plan.workspace_bytes == plan.workspace_bytes_for("forward") >= 0
    np.testing.assert_allclose(plan.forward(x, w), y, rtol=1e-6, atol=1e-6)
    dy = rand(*y.shape, dtype=np.float32)
    np.testing.assert_allclose(plan.backward_data(dy, w),
                               F.conv1d_backward_data(dy, w, x.shape, **kw), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(plan.backward_weight(dy, x),
                               F.conv1d_backward_weight(dy, x, w.shape, **kw), rtol=1e-6,
                               atol=1e-5)
    out = np.zeros(w.shape, np.float32)
    assert plan.backward_weight(dy, x, out=out, alpha=-1.0) is out
    np.testing.assert_allclose(out, -F.conv1d_backward_weight(dy, x, w.shape, **kw), rtol=1e-6,
                               atol=1e-5)
    with pytest.raises(ValueError, match="but this plan is for input shape"):
        plan.forward(x[:, :-1], w)


def test_find_algorithms_nd_1d():
    results = _plan_nd.find_algorithms_nd((2, 4, 64), (4, 4, 3), padding=1)
    assert results and "direct" in [r.algo for r in results]
    assert [r.time_ms for r in results] == sorted(r.time_ms for r in results)
    with pytest.raises(ValueError, match="layout must be one of"):
        _plan_nd.find_algorithms_nd((2, 4, 64), (4, 4, 3), layout="NCDHW")


# -- PyTorch ----------------------------------------------------------------------------------

@pytest.mark.parametrize("n, c, k, width, kernel, stride, padding, dilation, groups", [
    (2, 3, 5, 31, 3, 1, 1, 1, 1),
    (1, 4, 6, 50, 4, 3, 2, 2, 2),
    (3, 6, 6, 25, 5, 2, 0, 1, 6),
    (2, 64, 64, 256, 2, 1, 0, 16, 1),
])
@pytest.mark.parametrize("layout", ["NCW", "NWC"])
def test_conv1d_and_gradients_match_torch(n, c, k, width, kernel, stride, padding, dilation,
                                          groups, layout):
    torch = pytest.importorskip("torch")
    x, w, b = rand(n, c, width), rand(k, c // groups, kernel), rand(k)
    xt, wt, bt = (torch.from_numpy(a).requires_grad_() for a in (x, w, b))
    y = torch.nn.functional.conv1d(xt, wt, bt, stride, padding, dilation, groups)
    g = rand(*y.shape)
    dx, dw, db = torch.autograd.grad(y, (xt, wt, bt), torch.from_numpy(g))
    cl = layout == "NWC"
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups, layout=layout,
              weight_layout="WIO" if cl else "OIW")
    xa, ga, wa = ((to_channels_last(x), to_channels_last(g), weight_to_last(w)) if cl
                  else (x, g, w))
    back = (lambda a: np.moveaxis(a, -1, 1)) if cl else (lambda a: a)
    wback = (lambda a: np.transpose(a, (2, 1, 0))) if cl else (lambda a: a)
    assert_close(back(F.conv1d(xa, wa, b, **kw)), y.detach().numpy())
    gx, gw, gb = F.conv1d_backward(ga, xa, wa, **kw)
    assert_close(back(gx), dx.numpy())
    assert_close(wback(gw), dw.numpy())
    assert_close(gb, db.numpy())
    assert_close(ref_conv(x, w, b, stride, ((padding, padding),), dilation, groups),
                 y.detach().numpy())


@pytest.mark.parametrize("stride, padding, output_padding, dilation, groups", [
    (2, 1, 1, 1, 1), (3, 2, 2, 2, 2), (1, 0, 2, 3, 1),
])
def test_conv_transpose1d_and_gradients_match_torch(stride, padding, output_padding, dilation,
                                                    groups):
    torch = pytest.importorskip("torch")
    x, w, b = rand(2, 4, 9), rand(4, 6 // groups, 4), rand(6)
    xt, wt, bt = (torch.from_numpy(a).requires_grad_() for a in (x, w, b))
    y = torch.nn.functional.conv_transpose1d(xt, wt, bt, stride, padding, output_padding,
                                             groups, dilation)
    g = rand(*y.shape)
    dx, dw = torch.autograd.grad(y, (xt, wt), torch.from_numpy(g))
    kw = dict(stride=stride, padding=padding, output_padding=output_padding,
              dilation=dilation, groups=groups)
    assert_close(F.conv_transpose1d(x, w, b, **kw), y.detach().numpy())
    gx, gw, _ = F.conv_transpose1d_backward(g, x, w, **kw)
    assert_close(gx, dx.numpy())
    assert_close(gw, dw.numpy())
    assert_close(ref_conv_transpose(x, w, b, stride, ((padding, padding),), output_padding,
                                    dilation, groups), y.detach().numpy())


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular", "constant"])
def test_padding_modes_match_torch(mode):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    x, w = rand(2, 3, 12), rand(4, 3, 5)
    value = -1.25 if mode == "constant" else 0.0
    extra = {"value": value} if mode == "constant" else {}
    xt, wt = (torch.from_numpy(a).requires_grad_() for a in (x, w))
    y = tf.conv1d(tf.pad(xt, (3, 1), mode=mode, **extra), wt, stride=2)
    g = rand(*y.shape)
    dx, dw = torch.autograd.grad(y, (xt, wt), torch.from_numpy(g))
    kw = dict(padding=(3, 1), stride=2, padding_mode=mode, padding_value=value)
    assert_close(F.conv1d(x, w, **kw), y.detach().numpy())
    assert_close(F.conv1d_backward_data(g, w, x.shape, **kw), dx.numpy())
    assert_close(F.conv1d_backward_weight(g, x, w.shape, **kw), dw.numpy())


def test_dlpack_inputs_are_accepted():
    torch = pytest.importorskip("torch")
    x, w = rand(2, 3, 10), rand(4, 3, 3)
    assert_close(F.conv1d(torch.from_numpy(x), torch.from_numpy(w)), ref_conv(x, w))


# -- errors -----------------------------------------------------------------------------------

X = np.zeros((2, 4, 10))
W = np.zeros((6, 2, 3))
DY = np.zeros((2, 6, 8))


@pytest.mark.parametrize("call, error, match", [
    (lambda: F.conv1d(X[0], W, groups=2), ValueError,
     r"x must be 3-D \(N, C, W\) for layout 'NCW', got 2-D shape \(4, 10\)"),
    (lambda: F.conv1d(X[..., None], W, groups=2), ValueError, "x must be 3-D"),
    (lambda: F.conv1d(X, W[..., None], groups=2), ValueError,
     r"weight must be 3-D \(K, C/groups, kW\) for weight_layout 'OIW', got 4-D"),
    (lambda: F.conv1d(X, W, groups=2, layout="NCHW"), ValueError,
     r"layout must be one of \('NCW', 'NWC'\), got 'NCHW'"),
    (lambda: F.conv1d(X, W, groups=2, weight_layout="OIHW"), ValueError,
     r"weight_layout must be one of \('OIW', 'WIO'\)"),
    (lambda: F.conv1d(X, W), ValueError, "weight has 2 input channels per group but x has 4"),
    (lambda: F.conv1d(X, W, groups=4), ValueError, "groups=4 does not divide the 6 output"),
    (lambda: F.conv1d(X, W, groups=0), ValueError, "groups must be positive"),
    (lambda: F.conv1d(X, W, groups=2, padding=-1), ValueError, "padding must be non-negative"),
    (lambda: F.conv1d(X, W, groups=2, padding=(1, -1)), ValueError,
     "padding must be non-negative"),
    (lambda: F.conv1d(X, W, groups=2, padding=(1, 2, 3)), ValueError,
     r"padding must have 1 entries \(width\)"),
    (lambda: F.conv1d(X, W, groups=2, padding=1.5), TypeError, "padding must be"),
    (lambda: F.conv1d(X, W, groups=2, stride=(1, 1)), TypeError,
     r"stride must be an int or \(int,\), got \(1, 1\)"),
    (lambda: F.conv1d(X, W, groups=2, stride=-2), ValueError, "stride must be positive"),
    (lambda: F.conv1d(X, W, groups=2, dilation=6), ValueError,
     r"kernel extent 13 \(size 3, dilation 6\) is larger than the padded input 10 .* width"),
    (lambda: F.conv1d(X, W, groups=2, padding=10, padding_mode="reflect"), ValueError,
     "needs padding smaller than the input size"),
    (lambda: F.conv1d(X, W, groups=2, padding=11, padding_mode="circular"), ValueError,
     "needs padding at most the input size"),
    (lambda: F.conv1d(X, W, groups=2, padding_value="x", padding_mode="constant"), TypeError,
     "padding_value must be a real number"),
    (lambda: F.conv1d(X, W, groups=2, algo="winograd"), ValueError,
     r"algo='winograd' cannot run this convolution \(run as a 2-D convolution of height 1\)"),
    (lambda: F.conv1d(X, W, np.zeros((6, 1)), groups=2), ValueError, "bias must have shape"),
    (lambda: F.conv1d(X, W, groups=2, out=np.zeros((2, 6, 9))), ValueError, "out has shape"),
    (lambda: F.conv1d(X, W, groups=2, out=np.zeros((2, 6, 8), np.float16)), TypeError,
     "out has dtype float16"),
    (lambda: F.conv1d(X, W, groups=2, out=[0.0]), TypeError, "out must be a numpy.ndarray"),
    (lambda: F.conv1d(X.astype(np.complex128), W, groups=2), TypeError, "x has dtype complex"),
    (lambda: F.conv1d_backward_data(DY, W, (2, 4), groups=2), ValueError,
     r"input_shape must be 3-D \(N, C, W\) for layout 'NCW'"),
    (lambda: F.conv1d_backward_data(DY, W, "shape", groups=2), TypeError,
     "input_shape must be a sequence of 3 ints"),
    (lambda: F.conv1d_backward_data(DY[:, :, 1:], W, X.shape, groups=2), ValueError,
     r"grad_out has shape \(2, 6, 7\) but input_shape=\(2, 4, 10\) gives a convolution "
     r"output of shape \(2, 6, 8\) \(NCW\)"),
    (lambda: F.conv1d_backward_weight(DY, X, (6, 2), groups=2), ValueError,
     "weight_shape must be 3-D"),
    (lambda: F.conv1d_backward_bias(DY, layout="NHWC"), ValueError, "layout must be one of"),
    (lambda: F.conv_transpose1d(DY, np.zeros((6, 2, 3)), padding="full"), ValueError,
     r"padding string must be one of \('valid',\)"),
    (lambda: F.conv_transpose1d(DY, np.zeros((6, 2, 3)), stride=2, output_padding=2),
     ValueError, "output_padding implies output padding 2 along width"),
    (lambda: F.conv_transpose1d(DY, np.zeros((6, 2, 3)), output_shape=(2, 2, 11)), ValueError,
     "output_shape implies output padding 1 along width"),
    (lambda: F.conv_transpose1d(DY, np.zeros((6, 2, 3)), padding=5), ValueError,
     "transposed convolution output would be"),
    (lambda: _plan_nd.plan_conv1d((2, 4, 10), (6, 2, 3), groups=2, layout="NDHWC"), ValueError,
     "layout must be one of"),
])
def test_bad_arguments_raise_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


# -- the benchmark suite ----------------------------------------------------------------------

def test_nd_benchmark_suite_and_script_run():
    pytest.importorskip("torch")
    import os
    import subprocess
    import sys

    from cconv.benchmark import nd_suite

    layer = nd_suite.NdLayer("tiny1d", 2, 8, 8, (300,), (2,), dilation=16)
    rows = nd_suite.run_nd_suite([layer], threads=(1,), repeats=1, passes=("forward",))[
        "results"]
    assert len(rows) == 1 and rows[0]["flops"] == 2 * 2 * 8 * (300 - 16) * 8 * 2
    assert set(rows[0]["contenders"]) == {"cconv:NCW", "cconv:NWC", "torch:NCW", "torch:NWC"}
    assert max(rows[0]["max_rel_err"].values()) < 1e-4
    with pytest.raises(ValueError, match="matches none"):
        nd_suite.select_nd_layers("no-such-layer")
    script = os.path.join(os.path.dirname(__file__), os.pardir, "bench", "nd_bench.py")
    done = subprocess.run([sys.executable, script, "--quick", "--layers", "wavenet.64.k2.d8",
                           "--threads", "1", "--passes", "forward", "--repeats", "1"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "| wavenet.64.k2.d8 |" in done.stdout and "quick mode" in done.stdout
