"""cconv.compat.arrayfire: convolve2NN / convolve2GradientNN semantics.

Arrays are (d0, d1, C, N) / (f0, f1, C, K); the convolution is a true one (filter flipped).
Expected values below are worked out by hand in the comments.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cconv
from cconv.compat import arrayfire as af


def col(values, axis=0):
    """A 1-D signal laid along d0 (axis=0) or d1 (axis=1), as a (d0, d1, 1, 1) array."""
    v = np.asarray(values, dtype=np.float64)
    return v.reshape((-1, 1, 1, 1) if axis == 0 else (1, -1, 1, 1))


# ------------------------------------------------------------------ hand-worked: the flip


def test_true_convolution_flips_the_filter():
    # s = [1, 2, 3], f = [1, 2, 3], no padding: one output, sum_i s[i] * f[2 - i]
    # = 1*3 + 2*2 + 3*1 = 10 (a cross-correlation would give 1 + 4 + 9 = 14).
    y = af.convolve2_nn(col([1, 2, 3]), col([1, 2, 3]), (1, 1), (0, 0), (1, 1))
    assert y.shape == (1, 1, 1, 1)
    assert y[0, 0, 0, 0] == pytest.approx(10.0)


def test_full_convolution_with_padding_along_d0():
    # padding 2 on d0 gives the full convolution [1,2,3] * [1,2,3] = [1, 4, 10, 12, 9]
    # (cross-correlation would be [3, 8, 14, 8, 3]).
    y = af.convolve2_nn(col([1, 2, 3]), col([1, 2, 3]), (1, 1), (2, 0), (1, 1))
    assert y.shape == (5, 1, 1, 1)
    np.testing.assert_allclose(y.ravel(), [1, 4, 10, 12, 9])


def test_asymmetric_filter_shows_orientation_on_both_axes():
    # signal [0, 1, 0, 0] with filter [1, 10] and padding 1: the impulse at 1 is copied as the
    # filter itself, in filter order: y = [0, 1, 10, 0, 0]  (y[n] = sum_k f[k] s[n - k]).
    for axis in (0, 1):
        pad = (1, 0) if axis == 0 else (0, 1)
        y = af.convolve2_nn(col([0, 1, 0, 0], axis), col([1, 10], axis), 1, pad, 1)
        np.testing.assert_allclose(y.ravel(), [0, 1, 10, 0, 0])


# ------------------------------------------------------------------ hand-worked: dimension order


def test_stride_index_0_acts_on_d0_and_index_1_on_d1():
    s = np.arange(1.0, 6.0)  # 1..5
    one = np.ones((1, 1, 1, 1))
    # stride (2, 1) along d0 keeps s[0], s[2], s[4]
    y0 = af.convolve2_nn(col(s, 0), one, (2, 1), (0, 0), (1, 1))
    assert y0.shape == (3, 1, 1, 1)
    np.testing.assert_allclose(y0.ravel(), [1, 3, 5])
    # the same stride on a signal laid along d1 leaves it alone
    y1 = af.convolve2_nn(col(s, 1), one, (2, 1), (0, 0), (1, 1))
    assert y1.shape == (1, 5, 1, 1)
    np.testing.assert_allclose(y1.ravel(), s)
    # and stride (1, 2) subsamples d1
    y2 = af.convolve2_nn(col(s, 1), one, (1, 2), (0, 0), (1, 1))
    assert y2.shape == (1, 3, 1, 1)


def test_padding_and_dilation_are_per_axis():
    s = np.arange(1.0, 6.0)
    f = col([1.0, 0.0, 0.0])  # 3 taps along d0; with dilation 2 the effective size is 5
    y = af.convolve2_nn(col(s, 0), f, (1, 1), (0, 0), (2, 1))
    # flipped filter [0, 0, 1] dilated by 2 picks s[i + 4]: one output equal to 5
    assert y.shape == (1, 1, 1, 1) and y[0, 0, 0, 0] == pytest.approx(5.0)
    # padding (0, 3) pads d1 only: d0 stays valid-sized, d1 grows by 6
    y = af.convolve2_nn(np.ones((4, 2, 1, 1)), np.ones((2, 1, 1, 1)), 1, (0, 3), 1)
    assert y.shape == (3, 8, 1, 1)


def test_channels_are_dim2_and_batch_is_dim3():
    # signal (2, 2, C=2, N=3): channel 0 = n, channel 1 = 100 * n; 1x1 filter with K=2:
    # out k=0: 1*ch0 + 10*ch1 ; out k=1: 2*ch0 (filter[0, 0, c, k]).
    n = np.arange(3.0)
    x = np.zeros((2, 2, 2, 3))
    x[:, :, 0, :] = n
    x[:, :, 1, :] = 100 * n
    f = np.zeros((1, 1, 2, 2))
    f[0, 0, :, 0] = [1, 10]
    f[0, 0, :, 1] = [2, 0]
    y = af.convolve2_nn(x, f, 1, 0, 1)
    assert y.shape == (2, 2, 2, 3)
    np.testing.assert_allclose(y[1, 0, 0, :], n * 1001)
    np.testing.assert_allclose(y[0, 1, 1, :], n * 2)


def test_fewer_dimensions_get_trailing_singletons():
    y = af.convolve2_nn(np.ones((4, 3)), np.ones((2, 2)), 1, 0, 1)
    assert y.shape == (3, 2, 1, 1)
    np.testing.assert_allclose(y, 4.0)


def test_channel_mismatch_is_a_value_error():
    with pytest.raises(ValueError, match="channels"):
        af.convolve2_nn(np.ones((4, 4, 2, 1)), np.ones((2, 2, 3, 1)), 1, 0, 1)


# ------------------------------------------------------------------ hand-worked: gradients


def test_gradients_of_the_flipped_convolution():
    # y = s[0]*f[2] + s[1]*f[1] + s[2]*f[0]  (=10 for s = f = [1, 2, 3]), dy = 1:
    # dy/df = [s[2], s[1], s[0]] = [3, 2, 1];  dy/ds = [f[2], f[1], f[0]] = [3, 2, 1].
    s = col([1, 2, 3])
    f = col([1, 2, 5])  # dy/ds = [5, 2, 1] distinguishes the flip from f itself
    y = af.convolve2_nn(s, f, 1, 0, 1)
    g = np.ones_like(y)
    df = af.convolve2_gradient_nn(g, s, f, y, 1, 0, 1, "filter")
    ds = af.convolve2_gradient_nn(g, s, f, y, 1, 0, 1, "data")
    assert df.shape == f.shape and ds.shape == s.shape
    np.testing.assert_allclose(df.ravel(), [3, 2, 1])
    np.testing.assert_allclose(ds.ravel(), [5, 2, 1])


def test_bias_gradient_sums_d0_d1_and_batch_to_shape_K():
    g = np.zeros((2, 3, 2, 4))  # (o0, o1, K=2, N=4)
    g[:, :, 0, :] = 1.0
    g[:, :, 1, :] = np.arange(4.0)
    db = af.convolve2_gradient_nn(g, None, None, g, 1, 0, 1, "bias")
    assert db.shape == (2,)
    np.testing.assert_allclose(db, [2 * 3 * 4, 2 * 3 * (0 + 1 + 2 + 3)])


@pytest.mark.parametrize(
    "spelling, kind",
    [("filter", "filter"), (1, "filter"), ("AF_CONV_GRADIENT_FILTER", "filter"),
     (af.AF_CONV_GRADIENT_FILTER, "filter"),
     ("data", "data"), (2, "data"), ("AF_CONV_GRADIENT_DATA", "data"),
     ("bias", "bias"), (3, "bias"), ("AF_CONV_GRADIENT_BIAS", "bias"), (np.int32(3), "bias")],
)
def test_grad_type_spellings(spelling, kind):
    rng = np.random.default_rng(0)
    s, f = rng.standard_normal((5, 4, 2, 1)), rng.standard_normal((3, 2, 2, 3))
    y = af.convolve2_nn(s, f, 1, 1, 1)
    g = rng.standard_normal(y.shape)
    want = {"filter": f.shape, "data": s.shape, "bias": (3,)}[kind]
    got = af.convolve2_gradient_nn(g, s, f, y, 1, 1, 1, spelling)
    ref = af.convolve2_gradient_nn(g, s, f, y, 1, 1, 1, kind)
    assert got.shape == want
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("bad", [0, "AF_CONV_GRADIENT_DEFAULT", 4, "weights", None, 2.0])
def test_bad_grad_type(bad):
    s = np.ones((3, 3, 1, 1))
    y = af.convolve2_nn(s, s[:2, :2], 1, 0, 1)
    with pytest.raises(ValueError, match="grad_type"):
        af.convolve2_gradient_nn(np.ones_like(y), s, s[:2, :2], y, 1, 0, 1, bad)


def test_gradient_checks_convolved_output_shape():
    s = np.ones((3, 3, 1, 1))
    with pytest.raises(ValueError, match="convolved_output"):
        af.convolve2_gradient_nn(np.ones((2, 2, 1, 1)), s, s[:2, :2], np.ones((3, 2, 1, 1)), 1, 0,
                                 1, "data")


# ------------------------------------------------------------------ cross-checks


def _with_output(g):
    """``g`` with each signal size raised to the filter extent its padding leaves uncovered:
    every case has an output (built valid rather than filtered out: too many rejected draws
    fail Hypothesis's health check)."""
    g = dict(g)
    for ax, (size, f) in enumerate((("d0", "f0"), ("d1", "f1"))):
        g[size] = max(g[size], (g[f] - 1) * g["dil"][ax] + 1 - 2 * g["p"][ax])
    return g


geometry = st.fixed_dictionaries(dict(
    d0=st.integers(1, 7), d1=st.integers(1, 7), c=st.integers(1, 3), n=st.integers(1, 2),
    k=st.integers(1, 3), f0=st.integers(1, 3), f1=st.integers(1, 3),
    s=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    p=st.tuples(st.integers(0, 2), st.integers(0, 2)),
    dil=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    seed=st.integers(0, 2**16),
)).map(_with_output)


def _case(g):
    for ax in (0, 1):
        size = (g["d0"], g["d1"])[ax] + 2 * g["p"][ax]
        assert size >= (g[("f0", "f1")[ax]] - 1) * g["dil"][ax] + 1
    rng = np.random.default_rng(g["seed"])
    s = rng.standard_normal((g["d0"], g["d1"], g["c"], g["n"]))
    f = rng.standard_normal((g["f0"], g["f1"], g["c"], g["k"]))
    return s, f


@settings(max_examples=25, deadline=None)
@given(geometry)
def test_matches_core_conv2d_with_flipped_filter(g):
    s, f = _case(g)
    y = af.convolve2_nn(s, f, g["s"], g["p"], g["dil"])
    # the same thing spelled on the core API: NCHW with H = d1, W = d0, filter reversed
    x_nchw = np.ascontiguousarray(s.transpose(3, 2, 1, 0))
    w_oihw = np.ascontiguousarray(f.transpose(3, 2, 1, 0)[:, :, ::-1, ::-1])
    ref = cconv.conv2d(x_nchw, w_oihw, stride=g["s"][::-1], padding=g["p"][::-1],
                       dilation=g["dil"][::-1])
    np.testing.assert_allclose(y, np.asarray(ref).transpose(3, 2, 1, 0), rtol=1e-9, atol=1e-9)


@settings(max_examples=20, deadline=None)
@given(geometry)
def test_against_torch_autograd(g):
    torch = pytest.importorskip("torch")
    s, f = _case(g)
    y = af.convolve2_nn(s, f, g["s"], g["p"], g["dil"])
    # ArrayFire's a(i0, i1, c, n) is torch's x[n, c, i0, i1] with stride/padding/dilation in
    # (d0, d1) order
    xs = torch.tensor(s.transpose(3, 2, 0, 1), requires_grad=True)
    wf = torch.tensor(f.transpose(3, 2, 0, 1), requires_grad=True)
    yt = torch.nn.functional.conv2d(xs, torch.flip(wf, (2, 3)), stride=g["s"], padding=g["p"],
                                    dilation=g["dil"])
    np.testing.assert_allclose(y, yt.detach().numpy().transpose(2, 3, 1, 0), rtol=1e-9, atol=1e-9)
    gy = np.random.default_rng(g["seed"] + 1).standard_normal(y.shape)
    yt.backward(torch.tensor(gy.transpose(3, 2, 0, 1)))
    df = af.convolve2_gradient_nn(gy, s, f, y, g["s"], g["p"], g["dil"], "filter")
    ds = af.convolve2_gradient_nn(gy, s, f, y, g["s"], g["p"], g["dil"], "data")
    db = af.convolve2_gradient_nn(gy, s, f, y, g["s"], g["p"], g["dil"], "bias")
    np.testing.assert_allclose(df, wf.grad.numpy().transpose(2, 3, 1, 0), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ds, xs.grad.numpy().transpose(2, 3, 1, 0), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(db, gy.sum(axis=(0, 1, 3)), rtol=1e-9, atol=1e-9)
