"""cconv.compat.onednn in 1-D and 3-D: Graph API Convolution / ConvolutionBackwardData /
ConvolutionBackwardWeights on 3-D and 5-D arrays (NCX / NXC data, OIX / XIO weights).

Every result is checked against the float64 reference of ``support.reference_nd`` (which
works channels first with (K, C/groups, kernel...) weights; the padding the Graph API
attributes imply is resolved by ``resolve_padding``, the reference's own rule) and, when
PyTorch is installed, against ``torch.nn.functional.conv1d`` / ``conv3d`` and autograd.
"""

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.checks import assert_close
from support.reference_nd import (conv_output_sizes, from_channels_last, ref_backward_data,
                                  ref_backward_weight, ref_conv, resolve_padding,
                                  to_channels_last, weight_from_last, weight_to_last)

from cconv.compat import onednn

AUTO_PADS = ("none", "valid", "same_upper", "same_lower")
FORMATS = [("NXC", "XIO"), ("NXC", "OIX"), ("NCX", "XIO"), ("NCX", "OIX")]


# ------------------------------------------------------------------ format conversions


def in_format(a, data_format):
    """A channels-first (N, C, X...) array in ``data_format`` order."""
    return to_channels_last(a) if data_format == "NXC" else np.ascontiguousarray(a)


def from_format(a, data_format):
    """An array in ``data_format`` order as channels-first (N, C, X...)."""
    return from_channels_last(a) if data_format == "NXC" else a


def w_in_format(w, weights_format):
    """A (K, C/groups, kX...) weight in ``weights_format`` order."""
    return weight_to_last(w) if weights_format == "XIO" else np.ascontiguousarray(w)


def w_from_format(w, weights_format):
    return weight_from_last(w) if weights_format == "XIO" else w


# ------------------------------------------------------------------ problems


@dataclass
class Problem:
    """One convolution described by Graph API attributes, with reference values."""

    data_format: str
    weights_format: str
    groups: int
    stride: tuple
    dilation: tuple
    pads_begin: tuple
    pads_end: tuple
    auto_pad: str
    x: np.ndarray  # float64, channels first
    w: np.ndarray  # float64, (K, C/groups, kX...)
    b: np.ndarray
    broadcast: bool = False  # pass equal per-axis attributes as one int

    @property
    def rank(self):
        return self.x.ndim - 2

    def _attr(self, values):
        return values[0] if self.broadcast and len(set(values)) == 1 else list(values)

    @property
    def attrs(self):
        return dict(strides=self._attr(self.stride), pads_begin=self._attr(self.pads_begin),
                    pads_end=self._attr(self.pads_end), dilations=self._attr(self.dilation),
                    auto_pad=self.auto_pad, groups=self.groups, data_format=self.data_format,
                    weights_format=self.weights_format)

    @property
    def pads(self):
        """The (begin, end) per axis the attributes mean, by the reference's rules."""
        if self.auto_pad == "none":
            return tuple(zip(self.pads_begin, self.pads_end))
        mode = {"valid": "valid", "same_upper": "same", "same_lower": "same_lower"}
        return resolve_padding(mode[self.auto_pad], self.x.shape[2:], self.w.shape[2:],
                               self.stride, self.dilation)

    @property
    def ref_kw(self):
        return dict(stride=self.stride, pads=self.pads, dilation=self.dilation,
                    groups=self.groups)

    def out_shape(self):
        sizes = conv_output_sizes(self.x.shape[2:], self.w.shape[2:], self.stride, self.pads,
                                  self.dilation)
        return (self.x.shape[0], self.w.shape[0]) + sizes


def make_problem(spatial, kernel, *, n=1, cg=1, kg=1, groups=1, stride=1, dilation=1,
                 pads_begin=0, pads_end=0, auto_pad="none", formats=("NXC", "XIO"), seed=0,
                 broadcast=False):
    rank = len(spatial)

    def per_axis(v):
        return (v,) * rank if isinstance(v, int) else tuple(v)

    rng = np.random.default_rng(seed)
    return Problem(formats[0], formats[1], groups, per_axis(stride), per_axis(dilation),
                   per_axis(pads_begin), per_axis(pads_end), auto_pad,
                   rng.standard_normal((n, cg * groups, *spatial)),
                   rng.standard_normal((kg * groups, cg, *kernel)),
                   rng.standard_normal(kg * groups), broadcast)


@st.composite
def problems(draw, rank):
    max_size = 9 if rank == 1 else 5
    ints = lambda lo, hi: st.lists(st.integers(lo, hi), min_size=rank, max_size=rank)  # noqa
    kernel, stride, dilation = draw(ints(1, 3)), draw(ints(1, 3)), draw(ints(1, 2))
    pads_begin, pads_end = draw(ints(0, 2)), draw(ints(0, 2))
    auto_pad = draw(st.sampled_from(AUTO_PADS))
    # Each size drawn from the smallest with an output (built valid rather than filtered
    # out: too many rejected draws fail Hypothesis's health check).  "same_*" pads to an
    # output at any size, "valid" not at all, "none" by pads_begin + pads_end.
    spatial = []
    for k, d, lo, hi in zip(kernel, dilation, pads_begin, pads_end):
        pads = {"none": lo + hi, "valid": 0}.get(auto_pad, (k - 1) * d)
        spatial.append(draw(st.integers(max(1, (k - 1) * d + 1 - pads), max_size)))
    p = make_problem(
        spatial, kernel, n=draw(st.integers(1, 2)),
        cg=draw(st.integers(1, 2)), kg=draw(st.integers(1, 2)), groups=draw(st.integers(1, 3)),
        stride=stride, dilation=dilation, pads_begin=pads_begin,
        pads_end=pads_end, auto_pad=auto_pad,
        formats=draw(st.sampled_from(FORMATS)), seed=draw(st.integers(0, 2**16)),
        broadcast=draw(st.booleans()))
    assert min(p.out_shape()[2:]) >= 1
    return p


# ------------------------------------------------------------------ the three ops


def run_forward(p):
    x = in_format(p.x, p.data_format)
    w = w_in_format(p.w, p.weights_format)
    return from_format(onednn.convolution_forward(x, w, p.b, **p.attrs), p.data_format)


def run_backward_data(p, gy, dst_form="full"):
    dy = in_format(gy, p.data_format)
    w = w_in_format(p.w, p.weights_format)
    dst_shape = {"full": in_format(p.x, p.data_format).shape, "spatial": p.x.shape[2:],
                 "none": None}[dst_form]
    dx = onednn.convolution_backward_data(dy, w, dst_shape, **p.attrs)
    return from_format(dx, p.data_format)


def run_backward_weights(p, gy, shape_form="full"):
    x = in_format(p.x, p.data_format)
    dy = in_format(gy, p.data_format)
    ws = w_in_format(p.w, p.weights_format).shape if shape_form == "full" else p.w.shape[2:]
    dw = onednn.convolution_backward_weights(x, dy, ws, **p.attrs)
    return w_from_format(dw, p.weights_format)


def check_against_reference(p, dst_form="full", shape_form="full"):
    assert_close(run_forward(p), ref_conv(p.x, p.w, p.b, **p.ref_kw), what="forward")
    gy = np.random.default_rng(7).standard_normal(p.out_shape())
    assert_close(run_backward_data(p, gy, dst_form),
                 ref_backward_data(gy, p.w, p.x.shape, **p.ref_kw), what="backward data")
    assert_close(run_backward_weights(p, gy, shape_form),
                 ref_backward_weight(gy, p.x, p.w.shape, **p.ref_kw), what="backward weights")


# ------------------------------------------------------------------ hand-worked 1-D cases


def sig(values):
    """A 1-D NXC signal (1, W, 1)."""
    return np.asarray(values, dtype=np.float64).reshape(1, -1, 1)


def filt(values):
    """A 1-D XIO filter (kW, 1, 1)."""
    return np.asarray(values, dtype=np.float64).reshape(-1, 1, 1)


def test_1d_forward_same_upper_vs_same_lower():
    # x = [1, 2], w = [1, 10]: same_lower pads the start -> [10, 21]; same_upper the end ->
    # [21, 2]
    x, w = sig([1, 2]), filt([1, 10])
    np.testing.assert_allclose(onednn.convolution_forward(x, w, auto_pad="same_lower").ravel(),
                               [10, 21])
    np.testing.assert_allclose(onednn.convolution_forward(x, w, auto_pad="same_upper").ravel(),
                               [21, 2])


def test_3d_forward_signal_along_depth_with_stride_and_pads():
    # x along D = [1, 2, 3, 4, 5], w = [1, 10], stride 2, pad 1 at the start:
    # padded [0, 1, 2, 3, 4, 5] -> [0 + 10, 2 + 30, 4 + 50] = [10, 32, 54]
    x = np.arange(1.0, 6.0).reshape(1, 5, 1, 1, 1)
    w = np.array([1.0, 10.0]).reshape(2, 1, 1, 1, 1)
    y = onednn.convolution_forward(x, w, strides=[2, 1, 1], pads_begin=[1, 0, 0])
    assert y.shape == (1, 3, 1, 1, 1)
    np.testing.assert_allclose(y.ravel(), [10, 32, 54])


def test_1d_backward_weights_hand_worked():
    # same_upper: y0 = f0 x0 + f1 x1, y1 = f0 x1; x = [1, 2], dy = [1, 1] -> df = [3, 2]
    df = onednn.convolution_backward_weights(sig([1, 2]), np.ones((1, 2, 1)), [2, 1, 1],
                                             auto_pad="same_upper")
    np.testing.assert_allclose(df.ravel(), [3, 2])
    # the kernel size alone gives the same (C/groups from src, K from diff_dst)
    df = onednn.convolution_backward_weights(sig([1, 2]), np.ones((1, 2, 1)), [2],
                                             auto_pad="same_upper")
    assert df.shape == (2, 1, 1)
    np.testing.assert_allclose(df.ravel(), [3, 2])


# ------------------------------------------------------------------ fixed geometries


# Odd sizes, batch 1, two groups, strides, dilations and asymmetric pads on every axis.
GEOMETRIES = {
    1: dict(spatial=(11,), kernel=(3,), stride=(2,), dilation=(2,), pads_begin=(2,),
            pads_end=(1,)),
    3: dict(spatial=(5, 6, 7), kernel=(2, 3, 1), stride=(2, 1, 3), dilation=(1, 2, 1),
            pads_begin=(1, 0, 2), pads_end=(0, 2, 1)),
}


@pytest.mark.parametrize("auto_pad", AUTO_PADS)
@pytest.mark.parametrize("formats", FORMATS)
@pytest.mark.parametrize("rank", [1, 3])
def test_every_auto_pad_and_format(rank, formats, auto_pad):
    p = make_problem(**GEOMETRIES[rank], cg=2, kg=3, groups=2, auto_pad=auto_pad,
                     formats=formats, seed=rank)
    check_against_reference(p)


@pytest.mark.parametrize("formats", FORMATS)
@pytest.mark.parametrize("rank", [1, 3])
def test_depthwise(rank, formats):
    # groups == C, two outputs per input channel
    p = make_problem(**GEOMETRIES[rank], n=2, cg=1, kg=2, groups=3, formats=formats, seed=3)
    check_against_reference(p)


@pytest.mark.parametrize("rank", [1, 3])
def test_shape_arguments_by_spatial_entries_only(rank):
    p = make_problem(**GEOMETRIES[rank], n=2, cg=2, kg=1, groups=2, auto_pad="same_lower",
                     seed=5)
    check_against_reference(p, dst_form="spatial", shape_form="spatial")


def test_float32_3d():
    p = make_problem(**GEOMETRIES[3], cg=2, kg=2, groups=1, formats=("NCX", "OIX"), seed=9)
    x, w = p.x.astype(np.float32), p.w.astype(np.float32)
    y = onednn.convolution_forward(x, w, **p.attrs)
    assert y.dtype == np.float32
    assert_close(y, ref_conv(x, w, **p.ref_kw))


# ------------------------------------------------------------------ dst_shape ambiguity


def test_1d_dst_shape_resolves_strided_ambiguity():
    # k=1, stride 2: forward inputs of W=3 and W=4 both give 2 outputs
    dy, w = np.array([1.0, 2.0]).reshape(1, 2, 1), filt([1])
    np.testing.assert_allclose(onednn.convolution_backward_data(dy, w, strides=2).ravel(),
                               [1, 0, 2])
    for dst_shape in ([1, 4, 1], [4]):
        np.testing.assert_allclose(
            onednn.convolution_backward_data(dy, w, dst_shape, strides=2).ravel(), [1, 0, 2, 0])
    np.testing.assert_allclose(
        onednn.convolution_backward_data(dy, w, strides=[2], output_padding=1).ravel(),
        [1, 0, 2, 0])


@pytest.mark.parametrize("formats", FORMATS)
def test_3d_dst_shape_resolves_strided_ambiguity(formats):
    # kernel (1, 1, 1), stride 2: sizes (3, 3, 3) and (4, 3, 4) both give (2, 2, 2) outputs
    df, wf = formats
    rng = np.random.default_rng(11)
    gy = rng.standard_normal((2, 3, 2, 2, 2))
    w = rng.standard_normal((3, 2, 1, 1, 1))
    dy, wl = in_format(gy, df), w_in_format(w, wf)
    kw = dict(strides=2, data_format=df, weights_format=wf)
    for x_shape in ((2, 2, 3, 3, 3), (2, 2, 4, 3, 4)):
        want = ref_backward_data(gy, w, x_shape, stride=2)
        full = in_format(np.empty(x_shape), df).shape
        for dst_shape in (full, x_shape[2:]):
            dx = onednn.convolution_backward_data(dy, wl, dst_shape, **kw)
            assert_close(from_format(dx, df), want)
    # without dst_shape: the smallest size, (3, 3, 3), or that plus output_padding
    assert_close(from_format(onednn.convolution_backward_data(dy, wl, **kw), df),
                 ref_backward_data(gy, w, (2, 2, 3, 3, 3), stride=2))
    dx = onednn.convolution_backward_data(dy, wl, output_padding=[1, 0, 1], **kw)
    assert_close(from_format(dx, df), ref_backward_data(gy, w, (2, 2, 4, 3, 4), stride=2))


@pytest.mark.parametrize("auto_pad", ["same_upper", "same_lower"])
def test_dst_shape_sets_the_same_padding(auto_pad):
    # k=3, stride 2: W=5 and W=6 both give 3 outputs, but "same" pads 2 and 1 respectively
    rng = np.random.default_rng(4)
    gy, w = rng.standard_normal((1, 1, 3)), rng.standard_normal((1, 1, 3))
    kw = dict(strides=2, auto_pad=auto_pad, data_format="NCX", weights_format="OIX")
    for size in (5, 6):
        pads = resolve_padding("same" if auto_pad == "same_upper" else "same_lower", (size,),
                               (3,), 2)
        assert_close(onednn.convolution_backward_data(gy, w, [size], **kw),
                     ref_backward_data(gy, w, (1, 1, size), stride=2, pads=pads))
    # without dst_shape: (3 - 1) * 2 + 1 = 5
    assert onednn.convolution_backward_data(gy, w, **kw).shape == (1, 1, 5)


# ------------------------------------------------------------------ randomized


@settings(max_examples=80, deadline=None)
@given(problems(1), st.sampled_from(["full", "spatial"]))
def test_1d_matches_reference(p, form):
    check_against_reference(p, dst_form=form, shape_form=form)


@settings(max_examples=50, deadline=None)
@given(problems(3), st.sampled_from(["full", "spatial"]))
def test_3d_matches_reference(p, form):
    check_against_reference(p, dst_form=form, shape_form=form)


def torch_conv(p, gy_seed=7):
    """y, dx, dw of PyTorch in float64, channels first; asymmetric pads by F.pad."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    conv = {1: F.conv1d, 3: F.conv3d}[p.rank]
    xt = torch.tensor(p.x, requires_grad=True)
    wt = torch.tensor(p.w, requires_grad=True)
    flat = [side for pair in reversed(p.pads) for side in pair]  # F.pad: last axis first
    y = conv(F.pad(xt, flat), wt, torch.tensor(p.b), p.stride, 0, p.dilation, p.groups)
    gy = np.random.default_rng(gy_seed).standard_normal(tuple(y.shape))
    dx, dw = torch.autograd.grad(y, (xt, wt), torch.tensor(gy))
    return y.detach().numpy(), gy, dx.numpy(), dw.numpy()


@settings(max_examples=50, deadline=None)
@given(st.sampled_from([1, 3]).flatmap(problems))
def test_matches_torch(p):
    y, gy, dx, dw = torch_conv(p)
    assert_close(run_forward(p), y, what="forward")
    assert_close(run_backward_data(p, gy), dx, what="backward data")
    assert_close(run_backward_weights(p, gy), dw, what="backward weights")


@pytest.mark.parametrize("auto_pad", AUTO_PADS)
@pytest.mark.parametrize("rank", [1, 3])
def test_fixed_geometries_match_torch(rank, auto_pad):
    p = make_problem(**GEOMETRIES[rank], cg=2, kg=3, groups=2, auto_pad=auto_pad,
                     formats=("NXC", "XIO"), seed=rank + 20)
    y, gy, dx, dw = torch_conv(p)
    assert_close(run_forward(p), y, what="forward")
    assert_close(run_backward_data(p, gy, "spatial"), dx, what="backward data")
    assert_close(run_backward_weights(p, gy, "spatial"), dw, what="backward weights")


# ------------------------------------------------------------------ bad input

X1, W1 = np.ones((1, 5, 2)), np.ones((2, 2, 2))  # NXC / XIO, 1-D
X3, W3 = np.ones((1, 4, 4, 4, 2)), np.ones((2, 2, 2, 2, 2))  # NXC / XIO, 3-D


@pytest.mark.parametrize("x, w, kw, match", [
    (X1, W1, dict(strides=[1, 1]), "strides must have 1 entry"),
    (X3, W3, dict(strides=[1, 1]), "strides must have 3 entries"),
    (X3, W3, dict(dilations=[1, 1, 1, 1]), "dilations"),
    (X1, W1, dict(pads_begin=[0, 0]), "pads_begin"),
    (X3, W3, dict(pads_end=[1]), "pads_end"),
    (X3, W3, dict(strides=[1, 0, 1]), "strides must be positive"),
    (X1, W1, dict(dilations=0), "dilations"),
    (X1, W1, dict(pads_begin=[-1]), "non-negative"),
    (X3, W3, dict(groups=0), "groups"),
    (X1, W1, dict(data_format="NWC"), "data_format"),
    (X3, W3, dict(weights_format="DHWIO"), "weights_format"),
    (X1, W1, dict(auto_pad="same"), "auto_pad"),
])
def test_bad_attributes(x, w, kw, match):
    with pytest.raises(ValueError, match=match):
        onednn.convolution_forward(x, w, **kw)


@pytest.mark.parametrize("kw", [dict(strides=1.5), dict(strides=[2.0]), dict(groups=True),
                                dict(pads_end=[None])])
def test_non_integer_attributes_are_type_errors(kw):
    name = next(iter(kw))
    with pytest.raises(TypeError, match=name):
        onednn.convolution_forward(X1, W1, **kw)


def test_operand_ranks_must_agree():
    with pytest.raises(ValueError, match="src and weights"):
        onednn.convolution_forward(X1, W3)
    with pytest.raises(ValueError, match="diff_dst and weights"):
        onednn.convolution_backward_data(np.ones((1, 2, 2, 2, 2)), W1)
    with pytest.raises(ValueError, match="src and diff_dst"):
        onednn.convolution_backward_weights(X3, np.ones((1, 4, 2)), [2, 2, 2])


@pytest.mark.parametrize("shape", [(5, 2), (1, 2, 2, 2, 2, 2)])
def test_unsupported_ranks(shape):
    with pytest.raises(ValueError, match="src must be 3-D, 4-D or 5-D"):
        onednn.convolution_forward(np.ones(shape), np.ones(shape))


def test_bad_shape_arguments():
    dy1 = np.ones((1, 4, 2))
    with pytest.raises(ValueError, match="dst_shape must have 3 entries"):
        onednn.convolution_backward_data(dy1, W1, [1, 5])
    with pytest.raises(ValueError, match="dst_shape must have 5 entries"):
        onednn.convolution_backward_data(np.ones((1, 3, 3, 3, 2)), W3, [1, 4, 4, 4])
    with pytest.raises(ValueError, match="output_padding"):
        onednn.convolution_backward_data(dy1, W1, output_padding=[0, 0])
    with pytest.raises(ValueError, match="weights_shape must have 3 entries"):
        onednn.convolution_backward_weights(X1, dy1, [2, 2])
    with pytest.raises(ValueError, match="weights_shape must have 5 entries"):
        onednn.convolution_backward_weights(X3, np.ones((1, 3, 3, 3, 2)), [2, 2, 2, 2])
    # kernel sizes only, with groups that do not divide src's channels (3)
    with pytest.raises(ValueError, match="groups"):
        onednn.convolution_backward_weights(np.ones((1, 5, 3)), np.ones((1, 4, 2)), [2],
                                            groups=2)


def test_inconsistent_shapes_name_diff_dst():
    # W=5, k=2 -> 4 outputs, but diff_dst has 3
    with pytest.raises(ValueError, match="diff_dst"):
        onednn.convolution_backward_data(np.ones((1, 3, 2)), W1, [5])
    with pytest.raises(ValueError, match="diff_dst"):
        onednn.convolution_backward_weights(X1, np.ones((1, 3, 2)), W1.shape)
    # 3-D: stride 2 -> (2, 2, 2) outputs for (3, 3, 3) .. (4, 4, 4), not (5, 4, 4)
    with pytest.raises(ValueError, match="diff_dst"):
        onednn.convolution_backward_data(np.ones((1, 2, 2, 2, 2)), W3, [5, 4, 4], strides=2,
                                         auto_pad="same_upper")
    # no input size is consistent: a clear error asking for dst_shape
    with pytest.raises(ValueError, match="dst_shape"):
        onednn.convolution_backward_data(np.ones((1, 1, 2)), W1, pads_begin=2, pads_end=2)


def test_2d_weights_shape_by_kernel_sizes():
    # the 2-D path accepts the kernel-sizes form of weights_shape too, with the same result
    rng = np.random.default_rng(2)
    x, dy = rng.standard_normal((1, 5, 6, 4)), rng.standard_normal((1, 4, 5, 6))
    full = onednn.convolution_backward_weights(x, dy, [2, 2, 2, 6], groups=2)
    short = onednn.convolution_backward_weights(x, dy, [2, 2], groups=2)
    assert full.shape == (2, 2, 2, 6)
    np.testing.assert_array_equal(short, full)
