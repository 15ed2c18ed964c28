"""cconv.compat.onednn: Graph API Convolution / ConvolutionBackwardData /
ConvolutionBackwardWeights.

Hand-worked cases use NXC data (N, H, W, C) with a signal along H and XIO weights (KH, 1, 1, 1).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cconv
from cconv.compat import onednn


def sig(values):
    return np.asarray(values, dtype=np.float64).reshape(1, -1, 1, 1)


def filt(values):
    return np.asarray(values, dtype=np.float64).reshape(-1, 1, 1, 1)


# ------------------------------------------------------------------ auto_pad


def test_backward_data_same_upper_vs_same_lower():
    # dst (forward input) H=2, k=2, stride 1: total padding 1.
    # same_upper (bottom): y0 = 1*x0 + 10*x1, y1 = 1*x1        -> dx = [1, 10 + 1]  = [1, 11]
    # same_lower (top):    y0 = 10*x0,        y1 = x0 + 10*x1   -> dx = [10 + 1, 10] = [11, 10]
    dy, w = np.ones((1, 2, 1, 1)), filt([1, 10])
    up = onednn.convolution_backward_data(dy, w, [1, 2, 1, 1], auto_pad="same_upper")
    lo = onednn.convolution_backward_data(dy, w, [1, 2, 1, 1], auto_pad="same_lower")
    np.testing.assert_allclose(up.ravel(), [1, 11])
    np.testing.assert_allclose(lo.ravel(), [11, 10])


def test_forward_same_lower_puts_the_extra_row_on_top():
    # x = [1, 2], w = [1, 10]: same_lower -> [0*1 + 1*10, 1 + 20] = [10, 21]; same_upper -> [21, 2]
    x, w = sig([1, 2]), filt([1, 10])
    np.testing.assert_allclose(onednn.convolution_forward(x, w, auto_pad="same_lower").ravel(),
                               [10, 21])
    np.testing.assert_allclose(onednn.convolution_forward(x, w, auto_pad="same_upper").ravel(),
                               [21, 2])


def test_auto_pad_overrides_explicit_pads():
    x, w = sig([1, 2, 3]), filt([1, 10])
    # valid: y = [1 + 20, 2 + 30]; the pads given are ignored
    y = onednn.convolution_forward(x, w, pads_begin=[5, 5], pads_end=[5, 5], auto_pad="valid")
    np.testing.assert_allclose(y.ravel(), [21, 32])
    y = onednn.convolution_forward(x, w, pads_begin=[5, 0], pads_end=[5, 0], auto_pad="SAME_LOWER")
    np.testing.assert_allclose(y.ravel(), [10, 21, 32])
    # auto_pad "none" uses them: top 1 -> [10, 21, 32, 3] with bottom 1 too
    y = onednn.convolution_forward(x, w, pads_begin=[1, 0], pads_end=[1, 0], auto_pad="none")
    np.testing.assert_allclose(y.ravel(), [10, 21, 32, 3])


def test_same_with_stride():
    # H=5, k=2, stride 2: out 3, total (3-1)*2 + 2 - 5 = 1: same_lower pads top 1:
    # y = [0 + 10*1, 2 + 10*3, 4 + 10*5] = [10, 32, 54]
    y = onednn.convolution_forward(sig([1, 2, 3, 4, 5]), filt([1, 10]), strides=[2, 2],
                                   auto_pad="same_lower")
    np.testing.assert_allclose(y.ravel(), [10, 32, 54])


# ------------------------------------------------------------------ dst_shape / output_padding


def test_dst_shape_resolves_strided_ambiguity():
    # k=1, stride 2: forward inputs of H=3 and H=4 both give 2 outputs.
    dy = np.array([1.0, 2.0]).reshape(1, 2, 1, 1)
    w = filt([1])
    # without dst_shape: the smallest consistent size, (2-1)*2 + 1 = 3
    np.testing.assert_allclose(onednn.convolution_backward_data(dy, w, strides=2).ravel(),
                               [1, 0, 2])
    # dst_shape picks 4 (full or spatial-only)
    np.testing.assert_allclose(
        onednn.convolution_backward_data(dy, w, [1, 4, 1, 1], strides=2).ravel(), [1, 0, 2, 0])
    np.testing.assert_allclose(
        onednn.convolution_backward_data(dy, w, [4, 1], strides=2).ravel(), [1, 0, 2, 0])
    # output_padding adds to the inferred size when dst_shape is absent
    np.testing.assert_allclose(
        onednn.convolution_backward_data(dy, w, strides=2, output_padding=[1, 0]).ravel(),
        [1, 0, 2, 0])


def test_inconsistent_dst_shape_or_output_padding_raises():
    dy, w = np.ones((1, 2, 1, 1)), filt([1])
    with pytest.raises(ValueError, match="diff_dst"):
        onednn.convolution_backward_data(dy, w, [1, 5, 1, 1], strides=2)  # 5 -> 3 outputs
    with pytest.raises(ValueError, match="diff_dst"):
        onednn.convolution_backward_data(dy, w, strides=2, output_padding=[2, 0])  # 5 -> 3 outputs


def test_explicit_pads_backward_data_shape_and_values():
    # pads_begin 1, pads_end 0, k=2, dy of size 2 -> dst = (2-1)*1 + 2 - 1 - 0 = 2
    # forward: y0 = 10*x0, y1 = x0 + 10*x1 -> dx = [10 + 1, 10]  (dy = ones)
    dx = onednn.convolution_backward_data(np.ones((1, 2, 1, 1)), filt([1, 10]), pads_begin=[1, 0],
                                          pads_end=[0, 0])
    assert dx.shape == (1, 2, 1, 1)
    np.testing.assert_allclose(dx.ravel(), [11, 10])


# ------------------------------------------------------------------ dilations, formats, groups


def test_dilations_are_one_based():
    x, w = sig([1, 2, 3, 4, 5]), filt([1, 10])
    np.testing.assert_allclose(onednn.convolution_forward(x, w, dilations=1).ravel(),
                               [21, 32, 43, 54])
    # dilation 2: y[i] = x[i] + 10 x[i+2]
    np.testing.assert_allclose(onednn.convolution_forward(x, w, dilations=[2, 1]).ravel(),
                               [31, 42, 53])
    with pytest.raises(ValueError, match="dilations"):
        onednn.convolution_forward(x, w, dilations=0)


def test_ncx_oix_formats():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, 6, 4))  # NXC
    w = rng.standard_normal((3, 2, 4, 6))  # XIO
    y = onednn.convolution_forward(x, w, strides=[1, 2], pads_begin=[1, 0], pads_end=[0, 1])
    ncx_oix = dict(data_format="NCX", weights_format="OIX")
    y2 = onednn.convolution_forward(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1),
                                    strides=[1, 2], pads_begin=[1, 0], pads_end=[0, 1], **ncx_oix)
    np.testing.assert_allclose(y2, y.transpose(0, 3, 1, 2), rtol=1e-9, atol=1e-9)
    dx = onednn.convolution_backward_data(y, w, x.shape, strides=[1, 2], pads_begin=[1, 0],
                                          pads_end=[0, 1])
    dx2 = onednn.convolution_backward_data(y2, w.transpose(3, 2, 0, 1),
                                           x.transpose(0, 3, 1, 2).shape, strides=[1, 2],
                                           pads_begin=[1, 0], pads_end=[0, 1], **ncx_oix)
    np.testing.assert_allclose(dx2, dx.transpose(0, 3, 1, 2), rtol=1e-9, atol=1e-9)


def test_groups_weights_hold_c_over_groups_inputs():
    # 4 input channels, groups 2, XIO (1, 1, 2, 2) of ones: out0 = x0 + x1, out1 = x2 + x3
    x = np.array([1.0, 2, 4, 8]).reshape(1, 1, 1, 4)
    y = onednn.convolution_forward(x, np.ones((1, 1, 2, 2)), groups=2)
    np.testing.assert_allclose(y.ravel(), [3, 12])
    # backward data: each output's gradient goes back to its own group's channels
    dx = onednn.convolution_backward_data(np.array([1.0, 10.0]).reshape(1, 1, 1, 2),
                                          np.ones((1, 1, 2, 2)), [1, 1, 1, 4], groups=2)
    np.testing.assert_allclose(dx.ravel(), [1, 1, 10, 10])


@pytest.mark.parametrize("kw", [dict(data_format="NHWC"), dict(weights_format="HWIO"),
                                dict(auto_pad="same"), dict(strides=0), dict(pads_begin=-1),
                                dict(groups=0), dict(strides=[1, 1, 1])])
def test_bad_attributes(kw):
    with pytest.raises((ValueError, TypeError)):
        onednn.convolution_forward(np.ones((1, 3, 3, 1)), np.ones((1, 1, 1, 1)), **kw)


def test_backward_weights_hand_worked():
    # same_upper forward y0 = f0 x0 + f1 x1, y1 = f0 x1 ; x = [1, 2], dy = [1, 1] -> df = [3, 2]
    df = onednn.convolution_backward_weights(sig([1, 2]), np.ones((1, 2, 1, 1)), [2, 1, 1, 1],
                                             auto_pad="same_upper")
    np.testing.assert_allclose(df.ravel(), [3, 2])
    # same_lower: y0 = f1 x0, y1 = f0 x0 + f1 x1 -> df = [x0, x0 + x1] = [1, 3]
    df = onednn.convolution_backward_weights(sig([1, 2]), np.ones((1, 2, 1, 1)), [2, 1, 1, 1],
                                             auto_pad="same_lower")
    np.testing.assert_allclose(df.ravel(), [1, 3])


# ------------------------------------------------------------------ cross-checks


def _with_output(c):
    """``c`` with each size raised to the kernel extent its padding leaves uncovered, so that
    every case has an output: built valid rather than filtered out (too many rejected draws
    fail Hypothesis's health check).  "same_*" pads to an output at any size."""
    c = dict(c)
    if c["auto_pad"] in ("none", "valid"):
        for i, (size, k) in enumerate((("h", "kh"), ("w", "kw"))):
            pads = c["pb"][i] + c["pe"][i] if c["auto_pad"] == "none" else 0
            c[size] = max(c[size], (c[k] - 1) * c["d"][i] + 1 - pads)
    return c


attributes = st.fixed_dictionaries(dict(
    n=st.integers(1, 2), h=st.integers(1, 7), w=st.integers(1, 7), cg=st.integers(1, 2),
    kg=st.integers(1, 2), g=st.integers(1, 2), kh=st.integers(1, 3), kw=st.integers(1, 3),
    s=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    d=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    pb=st.tuples(st.integers(0, 2), st.integers(0, 2)),
    pe=st.tuples(st.integers(0, 2), st.integers(0, 2)),
    auto_pad=st.sampled_from(["none", "valid", "same_upper", "same_lower"]),
    seed=st.integers(0, 2**16),
))
cases = attributes.map(_with_output)


def _pads(c):
    out = []
    for i, (n, k) in enumerate(((c["h"], c["kh"]), (c["w"], c["kw"]))):
        s, d = c["s"][i], c["d"][i]
        if c["auto_pad"] == "valid":
            out.append((0, 0))
        elif c["auto_pad"] == "none":
            out.append((c["pb"][i], c["pe"][i]))
        else:
            total = max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)
            lo = (total + 1) // 2 if c["auto_pad"] == "same_lower" else total // 2
            out.append((lo, total - lo))
        assert n + sum(out[-1]) >= (k - 1) * d + 1
    return tuple(out)


@settings(max_examples=30, deadline=None)
@given(cases)
def test_all_three_ops_match_core(c):
    pads = _pads(c)
    rng = np.random.default_rng(c["seed"])
    C, K = c["cg"] * c["g"], c["kg"] * c["g"]
    x = rng.standard_normal((c["n"], c["h"], c["w"], C))
    w = rng.standard_normal((c["kh"], c["kw"], c["cg"], K))
    attrs = dict(strides=c["s"], pads_begin=c["pb"], pads_end=c["pe"], dilations=c["d"],
                 auto_pad=c["auto_pad"], groups=c["g"])
    core = dict(stride=c["s"], padding=pads, dilation=c["d"], groups=c["g"], layout="NHWC",
                weight_layout="HWIO")
    y = onednn.convolution_forward(x, w, **attrs)
    np.testing.assert_allclose(y, cconv.conv2d(x, w, **core), rtol=1e-9, atol=1e-9)
    dy = rng.standard_normal(y.shape)
    dx = onednn.convolution_backward_data(dy, w, x.shape, **attrs)
    np.testing.assert_allclose(dx, cconv.conv2d_backward_data(dy, w, x.shape, **core),
                               rtol=1e-9, atol=1e-9)
    dw = onednn.convolution_backward_weights(x, dy, w.shape, **attrs)
    np.testing.assert_allclose(dw, cconv.conv2d_backward_weight(dy, x, w.shape, **core),
                               rtol=1e-9, atol=1e-9)


# torch's transposed convolution takes symmetric padding only
symmetric_cases = attributes.map(
    lambda c: {**c, "pe": c["pb"], "auto_pad": ("none", "valid")[c["seed"] % 2]}
).map(_with_output)


@settings(max_examples=20, deadline=None)
@given(symmetric_cases)
def test_backward_data_without_dst_shape_against_torch_transpose(c):
    torch = pytest.importorskip("torch")
    pads = _pads(c)
    rng = np.random.default_rng(c["seed"])
    K = c["kg"] * c["g"]
    oh = (c["h"] + sum(pads[0]) - (c["kh"] - 1) * c["d"][0] - 1) // c["s"][0] + 1
    ow = (c["w"] + sum(pads[1]) - (c["kw"] - 1) * c["d"][1] - 1) // c["s"][1] + 1
    dy = rng.standard_normal((c["n"], oh, ow, K))
    w = rng.standard_normal((c["kh"], c["kw"], c["cg"], K))
    op = [rng.integers(0, max(c["s"][i], c["d"][i])) for i in range(2)]
    attrs = dict(strides=c["s"], pads_begin=c["pb"], pads_end=c["pe"], dilations=c["d"],
                 auto_pad=c["auto_pad"], groups=c["g"], output_padding=op)
    sizes = [(o - 1) * c["s"][i] + (k - 1) * c["d"][i] + 1 - sum(pads[i]) + op[i]
             for i, (o, k) in enumerate(((oh, c["kh"]), (ow, c["kw"])))]
    if min(sizes) < 1:  # no input size is consistent: a clear error, not a crash
        with pytest.raises(ValueError):
            onednn.convolution_backward_data(dy, w, **attrs)
        return
    # torch conv_transpose2d weight (in=K, out/groups=C/g, kh, kw): the conv weight (K, C/g, kh, kw)
    want = torch.nn.functional.conv_transpose2d(
        torch.tensor(dy.transpose(0, 3, 1, 2)), torch.tensor(w.transpose(3, 2, 0, 1).copy()),
        stride=c["s"], padding=(pads[0][0], pads[1][0]), output_padding=op, dilation=c["d"],
        groups=c["g"]).numpy()
    try:
        dx = onednn.convolution_backward_data(dy, w, **attrs)
    except ValueError:
        # output_padding >= stride is inconsistent with dy for oneDNN: torch allows it when
        # < dilation
        assert any(op[i] >= c["s"][i] for i in range(2))
        return
    np.testing.assert_allclose(dx, want.transpose(0, 2, 3, 1), rtol=1e-9, atol=1e-9)
