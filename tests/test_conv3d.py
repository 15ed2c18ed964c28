"""3-D convolution: every pass against the float64 N-d reference and PyTorch, plans, errors.

conv3d runs as a loop over depth taps, each a 2-D convolution of a batch of depth slices;
these tests know nothing of that and compare with ``support.reference_nd``, which loops over
every kernel tap of the volume.
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
                                  ref_conv_transpose, resolve_padding, to_channels_last,
                                  weight_to_last)
from support.strategies_nd import conv_cases, transpose_cases

rng = np.random.default_rng(1234)


def rand(*shape, dtype=np.float64):
    return rng.standard_normal(shape).astype(dtype)


# -- the reference sweeps ---------------------------------------------------------------------

@given(conv_cases(3))
def test_conv3d_every_pass_matches_reference(case):
    check_case(F, case)


@given(transpose_cases(3))
def test_conv_transpose3d_every_pass_matches_reference(case):
    check_case(F, case, transposed=True)


@settings(max_examples=25)
@given(conv_cases(3, max_size=4), st.sampled_from(PASSES), st.sampled_from([1.0, -0.5]),
       st.sampled_from([0.0, 1.0, 0.25]), st.sampled_from(["C", "strided"]))
def test_conv3d_out_alpha_beta(case, pss, alpha, beta, out_form):
    check_out_alpha_beta(F, case, pss, alpha, beta, out_form)


@settings(max_examples=25)
@given(transpose_cases(3, max_size=3), st.sampled_from(PASSES), st.sampled_from([1.0, 2.0]),
       st.sampled_from([0.0, -1.0]), st.sampled_from(["C", "strided"]))
def test_conv_transpose3d_out_alpha_beta(case, pss, alpha, beta, out_form):
    check_out_alpha_beta(F, case, pss, alpha, beta, out_form, transposed=True)


# -- algorithms, special shapes ---------------------------------------------------------------

@pytest.mark.parametrize("algo, c, k, groups, kernel, padding", [
    ("direct", 3, 5, 1, (3, 2, 3), ((1, 0), 1, (2, 1))),
    ("winograd", 4, 4, 1, (2, 3, 3), (1, 1, 1)),
    ("gemm", 4, 6, 2, (3, 1, 1), ((1, 2), 0, 0)),
    ("depthwise", 4, 8, 4, (3, 3, 3), "same"),
])
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_explicit_algorithms(algo, c, k, groups, kernel, padding, layout):
    x, w = rand(2, c, 5, 6, 7), rand(k, c // groups, *kernel)
    kw = dict(padding=padding, groups=groups, algo=algo, layout=layout)
    ref_pads = resolve_padding(padding, x.shape[2:], kernel)
    ref = ref_conv(x, w, pads=ref_pads, groups=groups)
    dy = rand(*ref.shape)
    xl = to_channels_last(x) if layout == "NDHWC" else x
    dyl = to_channels_last(dy) if layout == "NDHWC" else dy
    back = (lambda a: np.moveaxis(a, -1, 1)) if layout == "NDHWC" else (lambda a: a)
    assert_close(back(F.conv3d(xl, w, **kw)), ref)
    assert_close(back(F.conv3d_backward_data(dyl, w, xl.shape, **kw)),
                 ref_backward_data(dy, w, x.shape, pads=ref_pads, groups=groups))
    assert_close(F.conv3d_backward_weight(dyl, xl, w.shape, **kw),
                 ref_backward_weight(dy, x, w.shape, pads=ref_pads, groups=groups))


def test_output_slices_that_see_only_padding_get_the_bias():
    x, w, b = rand(1, 2, 1, 3, 3), rand(3, 2, 1, 1, 1), rand(3)
    y = F.conv3d(x, w, b, padding=((2, 2), 0, 0))
    assert y.shape == (1, 3, 5, 3, 3)
    for d in (0, 1, 3, 4):
        np.testing.assert_array_equal(y[:, :, d], np.broadcast_to(b[None, :, None, None],
                                                                  (1, 3, 3, 3)))
    assert_close(y, ref_conv(x, w, b, pads=((2, 2), (0, 0), (0, 0))))
    # a stride past the padded input: one output slice, which reads only padding
    y = F.conv3d(x, w, b, padding=((3, 0), 0, 0), stride=(9, 1, 1))
    assert y.shape == (1, 3, 1, 3, 3)
    np.testing.assert_array_equal(y[0, :, 0], np.broadcast_to(b[:, None, None], (3, 3, 3)))


def test_one_pixel_output_and_batch_one():
    x, w = rand(1, 3, 3, 4, 5), rand(2, 3, 3, 4, 5)
    y = F.conv3d(x, w)
    assert y.shape == (1, 2, 1, 1, 1)
    assert_close(y, ref_conv(x, w))
    dy = rand(1, 2, 1, 1, 1)
    assert_close(F.conv3d_backward_data(dy, w, x.shape), ref_backward_data(dy, w, x.shape))
    assert_close(F.conv3d_backward_weight(dy, x, w.shape), ref_backward_weight(dy, x, w.shape))


def test_empty_batch_gives_zeros_and_scales_out():
    x, w = np.zeros((0, 2, 3, 3, 3)), rand(4, 2, 2, 2, 2)
    y = F.conv3d(x, w)
    assert y.shape == (0, 4, 2, 2, 2)
    dw = F.conv3d_backward_weight(np.zeros((0, 4, 2, 2, 2)), x, w.shape)
    np.testing.assert_array_equal(dw, 0)
    out = np.ones(w.shape)
    F.conv3d_backward_weight(np.zeros((0, 4, 2, 2, 2)), x, w.shape, out=out, beta=0.5)
    np.testing.assert_array_equal(out, 0.5)


def test_fused_backward_matches_separate_calls():
    x, w = rand(2, 4, 4, 5, 3), rand(6, 2, 2, 3, 2)
    kw = dict(stride=(1, 2, 1), padding=((1, 0), 1, (0, 1)), groups=2, layout="NCDHW")
    dy = rand(*F.conv3d(x, w, **kw).shape)
    dx, dw, db = F.conv3d_backward(dy, x, w, **kw)
    np.testing.assert_array_equal(dx, F.conv3d_backward_data(dy, w, x.shape, **kw))
    np.testing.assert_array_equal(dw, F.conv3d_backward_weight(dy, x, w.shape, **kw))
    np.testing.assert_array_equal(db, F.conv3d_backward_bias(dy))
    assert F.conv3d_backward(dy, x, w, need=("weight",), **kw)[0::2] == (None, None)
    tkw = dict(stride=2, padding=1, output_padding=(1, 0, 1), groups=2)
    xt, wt = rand(1, 4, 3, 2, 3), rand(4, 3, 3, 3, 2)
    gy = rand(*F.conv_transpose3d(xt, wt, **tkw).shape)
    tdx, tdw, tdb = F.conv_transpose3d_backward(gy, xt, wt, **tkw)
    np.testing.assert_array_equal(tdx, F.conv_transpose3d_backward_data(gy, wt, xt.shape, **tkw))
    np.testing.assert_array_equal(tdw,
                                  F.conv_transpose3d_backward_weight(gy, xt, wt.shape, **tkw))
    assert_close(tdb, gy.sum(axis=(0, 2, 3, 4)))
    with pytest.raises(ValueError, match="need entries"):
        F.conv3d_backward(dy, x, w, need=("bias", "everything"), **kw)


def test_weight_gradient_is_deterministic_across_thread_counts():
    x, w = rand(2, 8, 6, 9, 9, dtype=np.float32), rand(8, 8, 3, 3, 3, dtype=np.float32)
    dy = rand(2, 8, 6, 9, 9, dtype=np.float32)
    one = F.conv3d_backward_weight(dy, x, w.shape, padding=1, num_threads=1)
    two = F.conv3d_backward_weight(dy, x, w.shape, padding=1, num_threads=2)
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(
        two, F.conv3d_backward_weight(dy, x, w.shape, padding=1, num_threads=2))


def test_layouts_give_the_same_numbers():
    x, w, b = rand(2, 3, 4, 5, 6), rand(4, 3, 2, 3, 2), rand(4)
    kw = dict(stride=(2, 1, 2), padding="same", dilation=(1, 2, 1))
    y = F.conv3d(x, w, b, **kw)
    yl = F.conv3d(to_channels_last(x), weight_to_last(w), b, layout="NDHWC",
                  weight_layout="DHWIO", **kw)
    assert_close(np.moveaxis(yl, -1, 1), y)


def test_float16_and_mixed_dtypes():
    x, w = rand(1, 3, 4, 4, 4, dtype=np.float16), rand(2, 3, 3, 3, 3, dtype=np.float32)
    y = F.conv3d(x, w, padding=1)
    assert y.dtype == np.float32
    assert_close(y, ref_conv(x, w, pads=((1, 1),) * 3))
    y16 = F.conv3d(x, w.astype(np.float16), padding=1)
    assert y16.dtype == np.float16
    assert_close(y16, ref_conv(x, w.astype(np.float16), pads=((1, 1),) * 3))


# -- plans and find ---------------------------------------------------------------------------

@pytest.mark.parametrize("layout, mode", [("NCDHW", "zeros"), ("NDHWC", "reflect"),
                                          ("NCDHW", "circular")])
def test_plan_conv3d_matches_the_functions(layout, mode):
    shape_cf = (2, 4, 5, 6, 7)
    x = rand(*shape_cf, dtype=np.float32)
    if layout == "NDHWC":
        x = to_channels_last(x)
    wl = "DHWIO" if layout == "NDHWC" else "OIDHW"
    w = rand(3, 3, 3, 4, 6, dtype=np.float32) if wl == "DHWIO" else rand(6, 4, 3, 3, 3,
                                                                          dtype=np.float32)
    kw = dict(padding=((1, 1), (1, 0), 2), stride=(1, 2, 1), layout=layout, weight_layout=wl,
              padding_mode=mode)
    plan = cconv._plan_nd.plan_conv3d(x.shape, w.shape, **kw)
    y = F.conv3d(x, w, **kw)
    assert plan.output_shape == y.shape
    assert plan.algorithm in cconv.ALGORITHMS
    assert plan.workspace_bytes >= 0 and plan.workspace_bytes_for("backward_weight") >= 0
    np.testing.assert_allclose(plan.forward(x, w), y, rtol=1e-6, atol=1e-6)
    dy = rand(*y.shape, dtype=np.float32)
    np.testing.assert_allclose(plan.backward_data(dy, w),
                               F.conv3d_backward_data(dy, w, x.shape, **kw), rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(plan.backward_weight(dy, x),
                               F.conv3d_backward_weight(dy, x, w.shape, **kw), rtol=1e-6,
                               atol=1e-4)
    # float64 operands on a float32 plan compute in float64; out / alpha / beta as functions
    y64 = plan.forward(x.astype(np.float64), w.astype(np.float64))
    assert y64.dtype == np.float64
    out = np.ones(y.shape, np.float32)
    assert plan.forward(x, w, out=out, alpha=2.0, beta=1.0) is out
    np.testing.assert_allclose(out, 2 * y + 1, rtol=1e-5, atol=1e-5)


def test_plan_rejects_arrays_of_other_shapes():
    plan = _plan_nd.plan_conv3d((1, 2, 4, 4, 4), (3, 2, 3, 3, 3))
    with pytest.raises(ValueError, match=r"x has shape \(1, 2, 4, 4, 5\), but this plan is for "
                                         r"input shape \(1, 2, 4, 4, 4\)"):
        plan.forward(np.zeros((1, 2, 4, 4, 5), np.float32), np.zeros((3, 2, 3, 3, 3)))
    with pytest.raises(ValueError, match="weight has shape"):
        plan.backward_data(np.zeros((1, 3, 2, 2, 2)), np.zeros((3, 2, 3, 3, 2)))
    with pytest.raises(TypeError, match="dtype"):
        _plan_nd.plan_conv3d((1, 2, 4, 4, 4), (3, 2, 3, 3, 3), dtype="int32")


def test_find_algorithms_nd_times_usable_algorithms():
    results = _plan_nd.find_algorithms_nd((1, 4, 4, 6, 6), (4, 4, 3, 3, 3), padding=1,
                                          op="backward_data")
    names = [r.algo for r in results]
    assert [r.time_ms for r in results] == sorted(r.time_ms for r in results)
    # exactly the algorithms that run the 2-D problem of a depth tap (one sample's 4 slices)
    tap = cconv.plan_conv2d((4, 4, 6, 6), (4, 4, 3, 3), padding=1).geometry
    assert sorted(names) == sorted(cconv.algorithms.usable(tap, "backward_data"))
    assert all(r.workspace_bytes >= 0 for r in results)
    with pytest.raises(ValueError, match="x_shape must be 3-D"):
        _plan_nd.find_algorithms_nd((1, 4, 6, 6), (4, 4, 3, 3))
    with pytest.raises(ValueError, match="op must be one of"):
        _plan_nd.find_algorithms_nd((1, 4, 4, 6, 6), (4, 4, 3, 3, 3), op="sideways")


# -- PyTorch ----------------------------------------------------------------------------------

TORCH_CASES = [
    # (N, C, K, D, H, W, kernel, stride, padding, dilation, groups)
    (2, 3, 4, 5, 6, 7, (3, 3, 3), 1, 1, 1, 1),
    (1, 4, 6, 7, 5, 6, (2, 3, 1), (2, 1, 2), (1, 0, 1), (1, 2, 1), 2),
    (2, 4, 8, 6, 6, 6, (3, 3, 3), 2, 1, 1, 4),
    (1, 2, 2, 4, 4, 4, (1, 1, 1), 1, 0, 1, 1),
]


@pytest.mark.parametrize("case", TORCH_CASES)
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_conv3d_and_gradients_match_torch(case, layout):
    torch = pytest.importorskip("torch")
    n, c, k, d, h, w_, kernel, stride, padding, dilation, groups = case
    x, w, b = rand(n, c, d, h, w_), rand(k, c // groups, *kernel), rand(k)
    xt, wt, bt = (torch.from_numpy(a).requires_grad_() for a in (x, w, b))
    y = torch.nn.functional.conv3d(xt, wt, bt, stride, padding, dilation, groups)
    g = rand(*y.shape)
    dx, dw, db = torch.autograd.grad(y, (xt, wt, bt), torch.from_numpy(g))
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups, layout=layout,
              weight_layout="DHWIO" if layout == "NDHWC" else "OIDHW")
    cl = layout == "NDHWC"
    xa, ga = (to_channels_last(x), to_channels_last(g)) if cl else (x, g)
    wa = weight_to_last(w) if cl else w
    back = (lambda a: np.moveaxis(a, -1, 1)) if cl else (lambda a: a)
    wback = (lambda a: np.transpose(a, (4, 3, 0, 1, 2))) if cl else (lambda a: a)
    assert_close(back(F.conv3d(xa, wa, b, **kw)), y.detach().numpy())
    gx, gw, gb = F.conv3d_backward(ga, xa, wa, **kw)
    assert_close(back(gx), dx.numpy())
    assert_close(wback(gw), dw.numpy())
    assert_close(gb, db.numpy())
    # the reference agrees with PyTorch too
    pads = tuple((p, p) for p in ((padding,) * 3 if isinstance(padding, int) else padding))
    assert_close(ref_conv(x, w, b, stride, pads, dilation, groups), y.detach().numpy())


@pytest.mark.parametrize("stride, padding, output_padding, dilation, groups", [
    (2, 1, 1, 1, 1),
    ((1, 2, 3), (0, 1, 2), (0, 1, 2), (2, 1, 1), 2),
    (1, 0, (1, 0, 1), 2, 1),
])
def test_conv_transpose3d_and_gradients_match_torch(stride, padding, output_padding, dilation,
                                                    groups):
    torch = pytest.importorskip("torch")
    x, w, b = rand(2, 4, 3, 4, 3), rand(4, 6 // groups, 3, 2, 3), rand(6)
    xt, wt, bt = (torch.from_numpy(a).requires_grad_() for a in (x, w, b))
    y = torch.nn.functional.conv_transpose3d(xt, wt, bt, stride, padding, output_padding,
                                             groups, dilation)
    g = rand(*y.shape)
    dx, dw = torch.autograd.grad(y, (xt, wt), torch.from_numpy(g))
    kw = dict(stride=stride, padding=padding, output_padding=output_padding,
              dilation=dilation, groups=groups)
    assert_close(F.conv_transpose3d(x, w, b, **kw), y.detach().numpy())
    gx, gw, _ = F.conv_transpose3d_backward(g, x, w, **kw)
    assert_close(gx, dx.numpy())
    assert_close(gw, dw.numpy())
    pads = tuple((p, p) for p in ((padding,) * 3 if isinstance(padding, int) else padding))
    assert_close(ref_conv_transpose(x, w, b, stride, pads, output_padding, dilation, groups),
                 y.detach().numpy())


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular", "constant"])
def test_padding_modes_match_torch(mode):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    x, w = rand(2, 3, 4, 5, 6), rand(4, 3, 3, 2, 3)
    pads = ((2, 1), (1, 0), (0, 2))
    value = 0.75 if mode == "constant" else 0.0
    xt, wt = (torch.from_numpy(a).requires_grad_() for a in (x, w))
    extra = {"value": value} if mode == "constant" else {}
    torch_pad = (pads[2][0], pads[2][1], pads[1][0], pads[1][1], pads[0][0], pads[0][1])
    y = tf.conv3d(tf.pad(xt, torch_pad, mode=mode, **extra), wt, stride=(2, 1, 1))
    g = rand(*y.shape)
    dx, dw = torch.autograd.grad(y, (xt, wt), torch.from_numpy(g))
    kw = dict(padding=pads, stride=(2, 1, 1), padding_mode=mode, padding_value=value)
    assert_close(F.conv3d(x, w, **kw), y.detach().numpy())
    assert_close(F.conv3d_backward_data(g, w, x.shape, **kw), dx.numpy())
    assert_close(F.conv3d_backward_weight(g, x, w.shape, **kw), dw.numpy())


def test_dlpack_inputs_are_accepted():
    torch = pytest.importorskip("torch")
    x, w = rand(1, 2, 3, 4, 5), rand(3, 2, 2, 2, 2)
    y = F.conv3d(torch.from_numpy(x), torch.from_numpy(w))
    assert isinstance(y, np.ndarray)
    assert_close(y, ref_conv(x, w))


# -- errors -----------------------------------------------------------------------------------

X = np.zeros((1, 4, 5, 5, 5))
W = np.zeros((6, 2, 3, 3, 3))
DY = np.zeros((1, 6, 3, 3, 3))


@pytest.mark.parametrize("call, error, match", [
    (lambda: F.conv3d(X[0], W, groups=2), ValueError,
     r"x must be 5-D \(N, C, D, H, W\) for layout 'NCDHW', got 4-D shape \(4, 5, 5, 5\)"),
    (lambda: F.conv3d(X, W[0], groups=2), ValueError,
     r"weight must be 5-D \(K, C/groups, kD, kH, kW\) for weight_layout 'OIDHW', got 4-D"),
    (lambda: F.conv3d(X, W, groups=2, layout="NCHW"), ValueError,
     r"layout must be one of \('NCDHW', 'NDHWC'\), got 'NCHW'"),
    (lambda: F.conv3d(X, W, groups=2, weight_layout="HWIO"), ValueError,
     r"weight_layout must be one of \('OIDHW', 'DHWIO'\)"),
    (lambda: F.conv3d(X, W), ValueError, r"weight has 2 input channels per group but x has 4"),
    (lambda: F.conv3d(X, W, groups=3), ValueError, r"groups=3 does not divide the 4 input"),
    (lambda: F.conv3d(X, W, groups=2, padding=-1), ValueError,
     "padding must be non-negative"),
    (lambda: F.conv3d(X, W, groups=2, padding=(1, (0, -2), 1)), ValueError,
     "padding must be non-negative"),
    (lambda: F.conv3d(X, W, groups=2, padding=(1, 1)), ValueError,
     r"padding must have 3 entries \(depth, height, width\)"),
    (lambda: F.conv3d(X, W, groups=2, padding="sideways"), ValueError, "padding string"),
    (lambda: F.conv3d(X, W, groups=2, stride=0), ValueError, "stride must be positive"),
    (lambda: F.conv3d(X, W, groups=2, stride=(1, 1)), TypeError,
     "stride must be an int or 3 ints"),
    (lambda: F.conv3d(X, W, groups=2, dilation=1.5), TypeError, "dilation must be"),
    (lambda: F.conv3d(X, W, groups=2, dilation=(3, 1, 1)), ValueError,
     r"kernel extent 7 \(size 3, dilation 3\) is larger than the padded input 5 .* along depth"),
    (lambda: F.conv3d(X, W, groups=2, padding=(5, 1, 1), padding_mode="reflect"), ValueError,
     r"padding_mode='reflect' needs padding smaller than the input size.* along depth"),
    (lambda: F.conv3d(X, W, groups=2, padding_mode="mirror"), ValueError,
     "padding_mode must be one of"),
    (lambda: F.conv3d(X, W, groups=2, padding=1, padding_value=1.0), ValueError,
     "padding_value=1.0 applies only to padding_mode='constant'"),
    (lambda: F.conv3d(X, W, np.zeros(5), groups=2), ValueError, r"bias must have shape \(6,\)"),
    (lambda: F.conv3d(X, W, groups=2, out=np.zeros((1, 6, 3, 3, 4))), ValueError,
     "out has shape"),
    (lambda: F.conv3d(X, W, groups=2, out=np.zeros((1, 6, 3, 3, 3), np.float32)), TypeError,
     "out has dtype float32"),
    (lambda: F.conv3d(X.astype(int), W, groups=2), TypeError, "x has dtype int64"),
    (lambda: F.conv3d(X, W, groups=2, algo="fastest"), ValueError, "algo must be one of"),
    (lambda: F.conv3d(X, W, groups=2, num_threads=0), ValueError,
     "num_threads must be positive"),
    (lambda: F.conv3d(X, W, groups=2, alpha="2"), TypeError, "alpha must be a real number"),
    (lambda: F.conv3d_backward_data(DY, W, (1, 4, 5, 5), groups=2), ValueError,
     r"input_shape must be 5-D"),
    (lambda: F.conv3d_backward_data(DY[:, :, :2], W, X.shape, groups=2), ValueError,
     r"grad_out has shape \(1, 6, 2, 3, 3\) but input_shape=\(1, 4, 5, 5, 5\) gives a "
     r"convolution output of shape \(1, 6, 3, 3, 3\)"),
    (lambda: F.conv3d_backward_weight(DY, X, (6, 2, 3, 3), groups=2), ValueError,
     "weight_shape must be 5-D"),
    (lambda: F.conv3d_backward_bias(DY[0]), ValueError, "grad_out must be 5-D"),
    (lambda: F.conv3d_backward_bias(DY, layout="NCW"), ValueError, "layout must be one of"),
    (lambda: F.conv_transpose3d(DY, W, groups=2, padding="same"), ValueError,
     r"padding string must be one of \('valid',\)"),
    (lambda: F.conv_transpose3d(DY, W, groups=2, output_padding=(2, 0, 0)), ValueError,
     r"output_padding implies output padding 2 along depth; it must be >= 0 and smaller "
     r"than stride 1 or dilation 1"),
    (lambda: F.conv_transpose3d(DY, W, groups=2, output_shape=(1, 6, 5, 5, 5)), ValueError,
     r"output_shape \(1, 6, 5, 5, 5\) does not match batch 1 and output channels 4"),
    (lambda: F.conv_transpose3d(DY, np.zeros((4, 2, 3, 3, 3)), groups=2), ValueError,
     "weight has 4 input channels but x has 6"),
    (lambda: F.conv_transpose3d_backward_data(X, W, (1, 6, 3, 3, 2), groups=2), ValueError,
     "grad_out has shape"),
])
def test_bad_arguments_raise_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


# -- the benchmark suite ----------------------------------------------------------------------

def test_nd_benchmark_suite_times_every_layout_and_agrees_with_torch():
    pytest.importorskip("torch")
    from cconv.benchmark import nd_suite

    layer = nd_suite.NdLayer("tiny3d", 2, 4, 6, (4, 5, 6), (3, 3, 3), padding=1)
    assert nd_suite.nd_flops(layer) == 2 * 2 * 6 * (4 * 5 * 6) * 4 * 27
    result = nd_suite.run_nd_suite([layer], threads=(1,), repeats=1)
    rows = result["results"]
    assert [r["pass"] for r in rows] == list(nd_suite.PASSES)
    for r in rows:
        assert set(r["contenders"]) == {"cconv:NCDHW", "cconv:NDHWC", "torch:NCDHW",
                                        "torch:NDHWC"}
        assert all(v["status"] == "ok" and v["gflops"] > 0 for v in r["contenders"].values())
        assert set(r["max_rel_err"]) == {"cconv:NCDHW", "cconv:NDHWC"}
        assert max(r["max_rel_err"].values()) < 1e-4
        assert r["ratio"] > 0
    text = nd_suite.format_nd_markdown(result)
    assert "## 3-D" in text and "tiny3d" in text and "## 1-D" not in text
    quick = nd_suite.select_nd_layers("unet3d", rank=3)[0].quick()
    assert quick.N == 1 and max(quick.spatial) <= 12


# -- depthwise NDHWC forward: the depth taps in the depthwise kernel's registers ---------------

@pytest.fixture
def ndhwc_calls(monkeypatch):
    """A list that grows by one per call of the 3-D depthwise NDHWC kernel."""
    from cconv import _simd
    calls = []
    real = _simd.depthwise.forward_ndhwc
    monkeypatch.setattr(_simd.depthwise, "forward_ndhwc",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


DEPTHWISE_3D_CASES = [
    # N, C, (D, H, W), kernel, stride, dilation, padding (begin, end per axis)
    (2, 8, (5, 6, 7), (3, 3, 3), (1, 1, 1), (1, 1, 1), ((1, 1), (1, 1), (1, 1))),
    (1, 20, (7, 9, 11), (3, 3, 3), (2, 2, 2), (1, 1, 1), ((1, 1), (1, 1), (1, 1))),
    (2, 5, (6, 8, 7), (3, 1, 5), (1, 2, 1), (2, 1, 1), ((2, 0), (0, 1), (3, 4))),
    (1, 3, (4, 4, 9), (2, 2, 3), (1, 1, 3), (1, 1, 2), ((0, 3), (2, 2), (5, 0))),
    (1, 70, (2, 3, 3), (3, 3, 3), (1, 1, 1), (1, 1, 1), ((1, 1), (1, 1), (1, 1))),  # C > 4 VL
    # rows with pairs of interior pixels (the weights loaded once for two), every channel
    # block kind: four vectors, single vectors, the scalar tail
    (1, 87, (3, 4, 11), (3, 3, 3), (1, 1, 1), (1, 1, 1), ((1, 1), (1, 1), (1, 1))),
    (1, 36, (3, 3, 13), (1, 2, 3), (1, 1, 2), (1, 1, 2), ((0, 0), (1, 0), (2, 2))),
    # rows of several pixel blocks (3-wide, column stride 1: AVX-512's blocks of 4 output
    # pixels) then pairs and a single: widths 16 and 19, 64 and 83 channels
    (1, 64, (3, 4, 16), (3, 3, 3), (1, 1, 1), (1, 1, 1), ((1, 1), (1, 1), (1, 1))),
    (2, 83, (2, 3, 19), (2, 3, 3), (1, 2, 1), (2, 1, 1), ((1, 0), (1, 1), (1, 1))),
]


@pytest.mark.parametrize("case", DEPTHWISE_3D_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_depthwise_ndhwc_forward_sums_depth_taps_in_one_kernel(case, dtype, ndhwc_calls):
    N, C, spatial, kernel, stride, dilation, pads = case
    x = rand(N, C, *spatial)
    w = rand(C, 1, *kernel)
    b = rand(C)
    ref = ref_conv(x, w, b, stride, pads, dilation, C)
    xl = np.ascontiguousarray(to_channels_last(x)).astype(dtype)
    got = cconv.conv3d(xl, w.astype(dtype), b.astype(dtype), stride=stride, padding=pads,
                       dilation=dilation, groups=C, layout="NDHWC")
    assert ndhwc_calls, "the 3-D depthwise kernel did not run"
    assert got.dtype == dtype
    assert_close(np.moveaxis(got, -1, 1), ref, dtype=dtype)
    # out / alpha / beta, and the same numbers with the DHWIO weight layout
    out = np.ascontiguousarray(to_channels_last(rand(*ref.shape))).astype(dtype)
    start = out.astype(np.float64)
    r = cconv.conv3d(xl, np.ascontiguousarray(weight_to_last(w)).astype(dtype),
                     b.astype(dtype), stride=stride, padding=pads, dilation=dilation,
                     groups=C, layout="NDHWC", weight_layout="DHWIO", out=out, alpha=-0.5,
                     beta=0.25)
    assert r is out
    assert_close(np.moveaxis(out, -1, 1), -0.5 * ref + 0.25 * np.moveaxis(start, -1, 1),
                 dtype=dtype)


def test_depthwise_ndhwc_forward_skips_what_it_does_not_cover(ndhwc_calls):
    # a channel multiplier, NCDHW, a padding mode and algo="direct" stay on the tap loop
    x = rand(1, 4, 4, 5, 6)
    xl = np.ascontiguousarray(to_channels_last(x))
    for w, kw in [(rand(8, 1, 3, 3, 3), dict(layout="NDHWC")),
                  (rand(4, 1, 3, 3, 3), dict(layout="NCDHW")),
                  (rand(4, 1, 3, 3, 3), dict(layout="NDHWC", padding_mode="reflect")),
                  (rand(4, 1, 3, 3, 3), dict(layout="NDHWC", algo="direct"))]:
        src = x if kw["layout"] == "NCDHW" else xl
        got = cconv.conv3d(src, w, padding=1, groups=4, **kw)
        mode = kw.get("padding_mode", "zeros")
        ref = ref_conv(x, w, None, 1, ((1, 1),) * 3, 1, 4, mode=mode)
        assert_close(got if kw["layout"] == "NCDHW" else np.moveaxis(got, -1, 1), ref,
                     dtype=np.float64)
    assert not ndhwc_calls


def test_plan_conv3d_runs_the_depthwise_ndhwc_kernel_too(ndhwc_calls):
    x = rand(2, 6, 5, 7, 8)
    w = rand(8, 1, 3, 3, 3)[:6]
    xl = np.ascontiguousarray(to_channels_last(x))
    plan = cconv.plan_conv3d(xl.shape, w.shape, padding=1, groups=6, layout="NDHWC",
                             dtype=np.float64)
    got = plan.forward(xl, w)
    assert ndhwc_calls
    assert_close(np.moveaxis(got, -1, 1), ref_conv(x, w, None, 1, ((1, 1),) * 3, 1, 6),
                 dtype=np.float64)


# -- depthwise NDHWC data gradient at stride 1: the forward kernel, weights flipped --------------

@pytest.mark.parametrize("case", [c for c in DEPTHWISE_3D_CASES if c[4] == (1, 1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_depthwise_ndhwc_data_gradient_runs_the_forward_kernel(case, dtype, ndhwc_calls):
    """At stride 1 the data gradient is the correlation of the output gradient with the
    flipped weight (begin padding ``dilation * (kernel - 1) - begin``): one kernel call, the
    reference's numbers, with out / alpha / beta, both weight layouts and the fused
    backward and the plan."""
    N, C, spatial, kernel, stride, dilation, pads = case
    w = rand(C, 1, *kernel)
    shape = (N, C) + spatial
    out_sizes = [s + lo + hi - d * (k - 1)
                 for s, (lo, hi), d, k in zip(spatial, pads, dilation, kernel)]
    gy = rand(N, C, *out_sizes)
    ref = ref_backward_data(gy, w, shape, stride, pads, dilation, C)
    gyl = np.ascontiguousarray(to_channels_last(gy)).astype(dtype)
    shape_l = (N,) + spatial + (C,)
    kw = dict(padding=pads, dilation=dilation, groups=C, layout="NDHWC")
    got = cconv.conv3d_backward_data(gyl, w.astype(dtype), shape_l, **kw)
    assert len(ndhwc_calls) == 1
    assert got.dtype == dtype
    assert_close(np.moveaxis(got, -1, 1), ref, dtype=dtype)
    out = np.ascontiguousarray(to_channels_last(rand(*shape))).astype(dtype)
    start = np.moveaxis(out.astype(np.float64), -1, 1)
    r = cconv.conv3d_backward_data(gyl, np.ascontiguousarray(weight_to_last(w)).astype(dtype),
                                   shape_l, weight_layout="DHWIO", out=out, alpha=-0.5,
                                   beta=0.25, **kw)
    assert r is out
    assert_close(np.moveaxis(out, -1, 1), -0.5 * ref + 0.25 * start, dtype=dtype)
    xl = np.ascontiguousarray(to_channels_last(rand(*shape))).astype(dtype)
    dx, _, _ = cconv.conv3d_backward(gyl, xl, w.astype(dtype), need="data", **kw)
    assert np.array_equal(dx, got)
    plan = cconv.plan_conv3d(shape_l, w.shape, dtype=dtype, **kw)
    assert np.array_equal(plan.backward_data(gyl, w.astype(dtype)), got)
    assert len(ndhwc_calls) == 4


@pytest.mark.parametrize("kw", [
    dict(stride=(1, 1, 2)),                             # a stride: the tap loop
    dict(padding=((3, 1), (1, 1), (1, 1))),             # more begin padding than taps reach
    dict(padding=((1, 1), (1, 1), (0, 6)), dilation=2),  # end padding past the taps: kernel
    dict(padding_mode="circular"),
    dict(algo="direct"),
])
def test_depthwise_ndhwc_data_gradient_elsewhere_matches_the_reference(kw, ndhwc_calls):
    """Shapes the flipped forward does not take go to the tap loop; end padding beyond the
    taps' reach is the kernel's (those taps read nothing): every one the reference's."""
    kw = dict(dict(padding=1, dilation=1, stride=1), **kw)
    x_shape = (2, 5, 4, 6, 7)
    w = rand(5, 1, 3, 3, 3)
    y = cconv.conv3d(rand(*x_shape), w, groups=5, **kw)  # the output size
    gy = rand(*y.shape)
    mode = kw.pop("padding_mode", "zeros")
    algo = kw.pop("algo", "auto")
    pads = kw["padding"] if isinstance(kw["padding"], tuple) else ((1, 1),) * 3
    ref = ref_backward_data(gy, w, x_shape, kw["stride"], pads, kw["dilation"], 5, mode=mode)
    shape_l = (x_shape[0],) + x_shape[2:] + (x_shape[1],)
    del ndhwc_calls[:]
    got = cconv.conv3d_backward_data(np.ascontiguousarray(to_channels_last(gy)), w, shape_l,
                                     groups=5, layout="NDHWC", padding_mode=mode, algo=algo,
                                     **kw)
    assert_close(np.moveaxis(got, -1, 1), ref, dtype=np.float64)
    on_kernel = "dilation" in kw and kw["dilation"] == 2
    assert len(ndhwc_calls) == int(on_kernel)


@pytest.mark.parametrize("bad", [np.inf, np.nan])
@pytest.mark.parametrize("layout, weight_layout, groups, stride, dilation", [
    ("NDHWC", "OIDHW", 4, 1, 1),   # the one-kernel depthwise path must step aside
    ("NDHWC", "DHWIO", 4, 1, 1),
    ("NCDHW", "OIDHW", 1, 1, 1),   # the tap loop: depth slices in the padding
    ("NCDHW", "DHWIO", 2, (2, 1, 1), (1, 1, 2)),
    ("NDHWC", "OIDHW", 1, 1, (2, 1, 1)),
])
def test_a_non_finite_weight_meeting_zero_padding_gives_nan(bad, layout, weight_layout, groups,
                                                           stride, dilation):
    # zero padding is part of the input: a non-finite weight meeting it gives 0 * Inf = NaN,
    # as in the reference and PyTorch, in the depth padding too (which the tap loop skips)
    x = rand(1, 4, 3, 4, 5)
    w = rand(4, 4 // groups, 3, 3, 3)
    w[2, 0, 0, 1, 1] = bad
    src = np.ascontiguousarray(to_channels_last(x)) if layout == "NDHWC" else x
    wl = np.ascontiguousarray(weight_to_last(w)) if weight_layout == "DHWIO" else w
    got = cconv.conv3d(src, wl, padding=2, groups=groups, stride=stride, dilation=dilation,
                       layout=layout, weight_layout=weight_layout)
    with np.errstate(invalid="ignore"):
        ref = ref_conv(x, w, None, stride, ((2, 2),) * 3, dilation, groups)
    got = np.moveaxis(got, -1, 1) if layout == "NDHWC" else got
    assert np.isnan(ref).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    finite = np.isfinite(ref)
    assert_close(np.where(finite, got, 0), np.where(finite, ref, 0), dtype=np.float64)
