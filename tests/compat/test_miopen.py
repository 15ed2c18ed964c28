"""cconv.compat.miopen: descriptor, output dims, workspace, Find, execute with alpha/beta, bias."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cconv
from cconv.compat import miopen


def arr(values, shape):
    return np.asarray(values, dtype=np.float64).reshape(shape)


# ------------------------------------------------------------------ descriptor and output dims


def test_convolution_output_dim():
    d = miopen.ConvolutionDescriptor("convolution", pad=(1, 0), stride=(2, 1), dilation=(1, 2))
    # H: (5 + 2 - 3) // 2 + 1 = 3 ; W: (6 + 0 - (2*2 + 1)) // 1 + 1 = 2
    assert d.get_forward_output_dim((2, 3, 5, 6), (4, 3, 3, 3)) == (2, 4, 3, 2)


def test_transpose_output_dim_with_output_padding_and_groups():
    d = miopen.ConvolutionDescriptor("transpose", pad=(1, 1), stride=(2, 3))
    d.set_transpose_output_padding(1, 2)
    d.set_group_count(2)
    # x (1, 4, 3, 3), w (C_in=4, K/groups=3, 3, 3): channels 3 * 2 = 6
    # H: 2*(3-1) + 1*(3-1) + 1 - 2*1 + 1 = 6 ; W: 3*(3-1) + 2 + 1 - 2 + 2 = 9
    assert d.get_forward_output_dim((1, 4, 3, 3), (4, 3, 3, 3)) == (1, 6, 6, 9)


def test_transpose_output_padding_must_be_below_stride():
    d = miopen.ConvolutionDescriptor("transpose", stride=(2, 2))
    d.set_transpose_output_padding(2, 0)
    with pytest.raises(ValueError, match="output padding"):
        d.get_forward_output_dim((1, 1, 3, 3), (1, 1, 3, 3))


def test_channel_checks():
    d = miopen.ConvolutionDescriptor()
    with pytest.raises(ValueError, match="Channels"):
        d.get_forward_output_dim((1, 3, 5, 5), (2, 2, 3, 3))
    d.set_group_count(3)
    # depthwise, multiplier 2
    assert d.get_forward_output_dim((1, 3, 5, 5), (6, 1, 3, 3)) == (1, 6, 3, 3)
    t = miopen.ConvolutionDescriptor("transpose")
    with pytest.raises(ValueError, match="Channels"):
        t.get_forward_output_dim((1, 3, 5, 5), (2, 3, 3, 3))  # x channels must equal w[0]


def test_nd_lists_and_modes():
    d = miopen.ConvolutionDescriptor("miopenTranspose", pad=[1, 2], stride=[2, 1], dilation=[1, 1])
    assert (d.mode, d.pad, d.stride) == ("transpose", (1, 2), (2, 1))
    assert miopen.ConvolutionDescriptor(1).mode == "transpose"
    for bad in ([1, 1, 1], [1]):
        with pytest.raises(ValueError, match="spatial"):
            miopen.ConvolutionDescriptor(pad=bad)
        with pytest.raises(ValueError, match="spatial"):
            miopen.ConvolutionDescriptor(stride=bad)
    with pytest.raises(ValueError, match="mode"):
        miopen.ConvolutionDescriptor("depthwise")
    with pytest.raises(ValueError):
        miopen.ConvolutionDescriptor(stride=(0, 1))
    with pytest.raises(ValueError):
        miopen.ConvolutionDescriptor().set_group_count(0)


# ------------------------------------------------------------------ execute, hand-worked


def test_transpose_mode_forward_scatters_with_output_padding():
    # x = [1, 2] along W, w = [1, 10], stride 2, adj 1: out W = 2*(2-1) + 2 + 1 = 5
    # y[2i + j] += x[i] w[j] -> [1, 10, 2, 20, 0]  (the last column is the output padding)
    d = miopen.ConvolutionDescriptor("transpose", stride=(1, 2))
    d.set_transpose_output_padding(0, 1)
    x, w = arr([1, 2], (1, 1, 1, 2)), arr([1, 10], (1, 1, 1, 2))
    y = np.full(d.get_forward_output_dim(x.shape, w.shape), np.nan)
    assert y.shape == (1, 1, 1, 5)
    out = miopen.convolution_forward(1.0, x, w, d, "miopenConvolutionFwdAlgoDirect", 0.0, y)
    assert out is y
    np.testing.assert_allclose(y.ravel(), [1, 10, 2, 20, 0])


def test_transpose_mode_backward_data_is_the_forward_convolution():
    # dy (the transposed output, W=5) convolved with w = [1, 10], stride 2:
    # dx[i] = dy[2i] + 10 dy[2i+1]
    d = miopen.ConvolutionDescriptor("transpose", stride=(1, 2))
    d.set_transpose_output_padding(0, 1)
    dy, w = arr([1, 2, 3, 4, 5], (1, 1, 1, 5)), arr([1, 10], (1, 1, 1, 2))
    dx = np.zeros((1, 1, 1, 2))
    miopen.convolution_backward_data(1.0, dy, w, d, None, 0.0, dx)
    np.testing.assert_allclose(dx.ravel(), [1 + 20, 3 + 40])
    # ... and backward weights: dw[j] = sum_i x[i] dy[2i + j]; x = [1, 2] -> [1*1 + 2*3, 1*2 + 2*4]
    dw = np.zeros((1, 1, 1, 2))
    miopen.convolution_backward_weights(1.0, dy, arr([1, 2], (1, 1, 1, 2)), d, None, 0.0, dw)
    np.testing.assert_allclose(dw.ravel(), [7, 10])


def test_alpha_beta_in_place():
    d = miopen.ConvolutionDescriptor(pad=(0, 1))
    x, w = arr([1, 2, 3], (1, 1, 1, 3)), arr([1, 10], (1, 1, 1, 2))
    # conv with pad 1 on W: [0 + 10, 1 + 20, 2 + 30, 3 + 0] = [10, 21, 32, 3]
    y = np.full((1, 1, 1, 4), 5.0)
    miopen.convolution_forward(2.0, x, w, d, "miopenConvolutionFwdAlgoDirect", 3.0, y)
    np.testing.assert_allclose(y.ravel(), [2 * 10 + 15, 2 * 21 + 15, 2 * 32 + 15, 2 * 3 + 15])
    # beta = 0 never reads y: NaN in it is harmless
    y[...] = np.nan
    miopen.convolution_forward(1.0, x, w, d, None, 0.0, y)
    np.testing.assert_allclose(y.ravel(), [10, 21, 32, 3])
    # backward data / weights accumulate the same way
    dx = np.ones((1, 1, 1, 3))
    miopen.convolution_backward_data(1.0, np.ones((1, 1, 1, 4)), w, d, None, 1.0, dx)
    np.testing.assert_allclose(dx.ravel(), [1 + 11, 1 + 11, 1 + 11])
    dw = np.full((1, 1, 1, 2), 100.0)
    miopen.convolution_backward_weights(0.5, np.ones((1, 1, 1, 4)), x, d, None, -1.0, dw)
    np.testing.assert_allclose(dw.ravel(), [0.5 * 6 - 100, 0.5 * 6 - 100])


def test_non_contiguous_destination_is_written():
    d = miopen.ConvolutionDescriptor()
    x, w = arr([1, 2, 3], (1, 1, 1, 3)), arr([1, 10], (1, 1, 1, 2))
    big = np.zeros((1, 1, 1, 4))
    y = big[..., ::2]  # a strided view of shape (1, 1, 1, 2)
    miopen.convolution_forward(1.0, x, w, d, None, 0.0, y)
    np.testing.assert_allclose(big.ravel(), [21, 0, 32, 0])


def test_wrong_output_shape_raises():
    d = miopen.ConvolutionDescriptor()
    with pytest.raises(ValueError, match="shape"):
        miopen.convolution_forward(1.0, np.ones((1, 1, 4, 4)), np.ones((1, 1, 3, 3)), d, None,
                                   0.0, np.zeros((1, 1, 3, 3)))


def test_bias_forward_and_backward():
    y = np.ones((2, 3, 2, 2))
    b = arr([1, 2, 3], (1, 3, 1, 1))
    miopen.convolution_forward_bias(2.0, b, 1.0, y)  # y = 2 b + y
    np.testing.assert_allclose(y[1, :, 1, 0], [3, 5, 7])
    y[...] = np.nan
    miopen.convolution_forward_bias(1.0, arr([1, 2, 3], (3,)), 0.0, y)  # beta 0 never reads y
    np.testing.assert_allclose(y[0, :, 0, 1], [1, 2, 3])
    dy = np.zeros((2, 3, 2, 2))
    dy[:, 1] = 1.0
    dy[1, 2, 0, 0] = 5.0
    db = np.full((1, 3, 1, 1), 10.0)
    miopen.convolution_backward_bias(1.0, dy, 0.5, db)  # db = sum + 0.5 db
    np.testing.assert_allclose(db.ravel(), [5, 8 + 5, 5 + 5])
    db1 = np.zeros(3)
    miopen.convolution_backward_bias(2.0, dy, 0.0, db1)
    np.testing.assert_allclose(db1, [0, 16, 10])
    with pytest.raises(ValueError, match="shape"):
        miopen.convolution_forward_bias(1.0, np.ones(4), 0.0, y)


# ---------------------------------------------------------- algorithms: Find, names, workspace

MIOPEN_NAMES = {
    "forward": {"miopenConvolutionFwdAlgoDirect", "miopenConvolutionFwdAlgoWinograd",
                "miopenConvolutionFwdAlgoGEMM"},
    "backward_data": {"miopenConvolutionBwdDataAlgoDirect", "miopenConvolutionBwdDataAlgoWinograd",
                      "miopenConvolutionBwdDataAlgoGEMM"},
    "backward_weights": {"miopenConvolutionBwdWeightsAlgoDirect",
                         "miopenConvolutionBwdWeightsAlgoWinograd",
                         "miopenConvolutionBwdWeightsAlgoGEMM"},
}


def _check_perf(results, direction):
    assert results, "Find returned nothing"
    times = [r.time_ms for r in results]
    assert times == sorted(times)
    for r in results:
        algo, t, mem = r  # plain 3-tuples too
        assert algo in MIOPEN_NAMES[direction] or algo.startswith("cconv:")
        assert "FFT" not in algo and "ImplicitGEMM" not in algo
        assert t >= 0 and isinstance(mem, int) and mem >= 0


@pytest.mark.parametrize("mode", ["convolution", "transpose"])
def test_find_all_directions_and_run_each_result(mode):
    rng = np.random.default_rng(3)
    d = miopen.ConvolutionDescriptor(mode, pad=(1, 1))
    x = rng.standard_normal((2, 4, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 4, 3, 3)).astype(np.float32)  # 3x3 stride 1: Winograd is usable
    y = np.zeros(d.get_forward_output_dim(x.shape, w.shape), np.float32)
    fwd = miopen.find_convolution_forward_algorithm(d, x, w, y)
    _check_perf(fwd, "forward")
    ref = None
    for r in fwd:
        miopen.convolution_forward(1.0, x, w, d, r.algo, 0.0, y)
        ref = y.copy() if ref is None else ref
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    dx = np.zeros_like(x)
    _check_perf(miopen.find_convolution_backward_data_algorithm(d, dy, w, dx), "backward_data")
    dw = np.zeros_like(w)
    _check_perf(miopen.find_convolution_backward_weights_algorithm(d, dy, x, dw),
                "backward_weights")
    assert len(miopen.find_convolution_forward_algorithm(d, x, w, y, request_algo_count=1)) == 1


def test_find_lists_only_usable_algorithms():
    # 5x5 kernel: Winograd F(2x2,3x3) is not usable, so it must not be listed
    d = miopen.ConvolutionDescriptor()
    x, w = np.zeros((1, 2, 8, 8), np.float32), np.zeros((2, 2, 5, 5), np.float32)
    res = miopen.find_convolution_forward_algorithm(d, x, w, np.zeros((1, 2, 4, 4), np.float32))
    assert all("Winograd" not in r.algo for r in res)
    assert all(r.algo[6:] in cconv.ALGORITHMS for r in res if r.algo.startswith("cconv:"))


@pytest.mark.parametrize("call, algo", [
    ("forward", "miopenConvolutionFwdAlgoFFT"), ("forward", "miopenConvolutionFwdAlgoImplicitGEMM"),
    ("forward", 2),
    ("backward_data", "miopenConvolutionBwdDataAlgoFFT"),
    ("backward_data", "miopenTransposeBwdDataAlgoGEMM"),
    ("backward_weights", "miopenConvolutionBwdWeightsAlgoImplicitGEMM"), ("backward_weights", 5),
])
def test_fft_and_implicit_gemm_are_unavailable(call, algo):
    d = miopen.ConvolutionDescriptor()
    x, w, y = np.ones((1, 1, 4, 4)), np.ones((1, 1, 3, 3)), np.zeros((1, 1, 2, 2))
    with pytest.raises(ValueError, match="not available"):
        if call == "forward":
            miopen.convolution_forward(1.0, x, w, d, algo, 0.0, y)
        elif call == "backward_data":
            miopen.convolution_backward_data(1.0, y, w, d, algo, 0.0, np.zeros_like(x))
        else:
            miopen.convolution_backward_weights(1.0, y, x, d, algo, 0.0, np.zeros_like(w))


FWD_NAMES = {"miopenConvolutionFwdAlgoDirect": ("direct", 1),
             "miopenConvolutionFwdAlgoWinograd": ("winograd", 3),
             "miopenConvolutionFwdAlgoGEMM": ("gemm", 0)}


@pytest.mark.parametrize("name", sorted(FWD_NAMES))
def test_algorithm_names_map_to_cconv(name):
    d = miopen.ConvolutionDescriptor()
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 5))
    w = np.random.default_rng(1).standard_normal((2, 2, 3, 3))
    y = np.zeros((1, 2, 3, 3))
    cc_name, enum_value = FWD_NAMES[name]
    # this build lacks it: a clear error, never a silent substitute
    if cc_name not in cconv.ALGORITHMS:
        for spelling in (name, enum_value):
            with pytest.raises(ValueError, match="not available"):
                miopen.convolution_forward(1.0, x, w, d, spelling, 0.0, y)
        return
    if cc_name == "gemm":  # cconv's GEMM path takes 1x1 stride-1 unpadded convolutions only
        w = np.random.default_rng(1).standard_normal((2, 2, 1, 1))
        y = np.zeros((1, 2, 5, 5))
    want = np.asarray(cconv.conv2d(x, w, algo=cc_name))
    for spelling in (name, getattr(miopen, name), enum_value, cc_name):
        y[...] = np.nan
        miopen.convolution_forward(1.0, x, w, d, spelling, 0.0, y)
        np.testing.assert_allclose(y, want, rtol=1e-9, atol=1e-9)


def test_auto_and_wrong_direction_names():
    d = miopen.ConvolutionDescriptor()
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 5))
    w = np.random.default_rng(1).standard_normal((2, 2, 3, 3))
    want = np.asarray(cconv.conv2d(x, w))
    for algo in ("auto", None):
        y = np.zeros((1, 2, 3, 3))
        miopen.convolution_forward(1.0, x, w, d, algo, 0.0, y)
        np.testing.assert_allclose(y, want, rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError, match="not a forward algorithm"):
        miopen.convolution_forward(1.0, x, w, d, "miopenConvolutionBwdDataAlgoDirect", 0.0,
                                   np.zeros((1, 2, 3, 3)))
    with pytest.raises(ValueError, match="not a forward algorithm"):
        miopen.convolution_forward(1.0, x, w, d, "fft", 0.0, np.zeros((1, 2, 3, 3)))


def test_winograd_on_an_unusable_shape_is_refused_by_the_core():
    d = miopen.ConvolutionDescriptor()
    with pytest.raises(ValueError, match="(?i)winograd|3x3"):
        miopen.convolution_forward(1.0, np.ones((1, 2, 5, 5)), np.ones((2, 2, 2, 2)), d,
                                   "miopenConvolutionFwdAlgoWinograd", 0.0, np.zeros((1, 2, 4, 4)))


def test_workspace_queries_are_the_max_over_usable_algorithms():
    d = miopen.ConvolutionDescriptor(pad=(1, 1))
    xs, ws = (1, 4, 8, 8), (4, 4, 3, 3)
    ys = d.get_forward_output_dim(xs, ws)
    plans = []
    for a in cconv.ALGORITHMS:
        try:
            plans.append(cconv.plan_conv2d(xs, ws, padding=(1, 1), algo=a).workspace_bytes)
        except ValueError:
            pass
    size = miopen.convolution_forward_get_workspace_size(d, ws, xs, ys)
    assert isinstance(size, int) and size == max(plans)
    assert miopen.convolution_backward_data_get_workspace_size(d, ys, ws, xs) >= 0
    assert miopen.convolution_backward_weights_get_workspace_size(d, ys, xs, ws) >= 0
    with pytest.raises(ValueError, match="shape"):
        miopen.convolution_forward_get_workspace_size(d, ws, xs, (1, 4, 7, 7))
    with pytest.raises(ValueError, match="spatial|4-D"):
        miopen.convolution_forward_get_workspace_size(d, (4, 4, 3, 3, 3), (1, 4, 8, 8, 8),
                                                      (1, 4, 8, 8, 8))


# ------------------------------------------------------------------ cross-checks


cases = st.fixed_dictionaries(dict(
    n=st.integers(1, 2), h=st.integers(1, 6), w=st.integers(1, 6), cg=st.integers(1, 2),
    kg=st.integers(1, 2), g=st.integers(1, 3), kh=st.integers(1, 3), kw=st.integers(1, 3),
    s=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    p=st.tuples(st.integers(0, 2), st.integers(0, 2)),
    d=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    adj=st.tuples(st.integers(0, 2), st.integers(0, 2)), alpha=st.sampled_from([1.0, 0.5]),
    beta=st.sampled_from([0.0, 1.0, -2.0]), seed=st.integers(0, 2**16),
))


@settings(max_examples=25, deadline=None)
@given(cases)
def test_convolution_mode_matches_core(c):
    C, K = c["cg"] * c["g"], c["kg"] * c["g"]
    # an output: sizes raised to the kernel extent the padding leaves uncovered (built valid
    # rather than filtered out: too many rejected draws fail Hypothesis's health check)
    c = dict(c)
    for i, (size, k) in enumerate((("h", "kh"), ("w", "kw"))):
        c[size] = max(c[size], (c[k] - 1) * c["d"][i] + 1 - 2 * c["p"][i])
    rng = np.random.default_rng(c["seed"])
    desc = miopen.ConvolutionDescriptor("convolution", c["p"], c["s"], c["d"])
    desc.set_group_count(c["g"])
    x = rng.standard_normal((c["n"], C, c["h"], c["w"]))
    w = rng.standard_normal((K, c["cg"], c["kh"], c["kw"]))
    kw = dict(stride=c["s"], padding=c["p"], dilation=c["d"], groups=c["g"])
    ref = np.asarray(cconv.conv2d(x, w, **kw))
    y0 = rng.standard_normal(ref.shape)
    y = y0.copy()
    miopen.convolution_forward(c["alpha"], x, w, desc, None, c["beta"], y)
    np.testing.assert_allclose(y, c["alpha"] * ref + c["beta"] * y0, rtol=1e-9, atol=1e-9)
    dy = rng.standard_normal(ref.shape)
    dx = np.zeros_like(x)
    miopen.convolution_backward_data(c["alpha"], dy, w, desc, None, 0.0, dx)
    np.testing.assert_allclose(
        dx, c["alpha"] * np.asarray(cconv.conv2d_backward_data(dy, w, x.shape, **kw)),
        rtol=1e-9, atol=1e-9)
    dw = np.zeros_like(w)
    miopen.convolution_backward_weights(1.0, dy, x, desc, None, 0.0, dw)
    np.testing.assert_allclose(dw, cconv.conv2d_backward_weight(dy, x, w.shape, **kw),
                               rtol=1e-9, atol=1e-9)


@settings(max_examples=25, deadline=None)
@given(cases)
def test_transpose_mode_against_torch(c):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    adj = tuple(a % s for a, s in zip(c["adj"], c["s"]))  # MIOpen: output padding < stride
    C, K = c["cg"] * c["g"], c["kg"] * c["g"]
    rng = np.random.default_rng(c["seed"])
    desc = miopen.ConvolutionDescriptor("transpose", c["p"], c["s"], c["d"])
    desc.set_group_count(c["g"])
    desc.set_transpose_output_padding(*adj)
    x = rng.standard_normal((c["n"], C, c["h"], c["w"]))
    w = rng.standard_normal((C, c["kg"], c["kh"], c["kw"]))
    out_hw = [(n - 1) * c["s"][i] - 2 * c["p"][i] + (k - 1) * c["d"][i] + 1 + adj[i]
              for i, (n, k) in enumerate(((c["h"], c["kh"]), (c["w"], c["kw"])))]
    if min(out_hw) < 1:
        with pytest.raises(ValueError):
            desc.get_forward_output_dim(x.shape, w.shape)
        return
    assert desc.get_forward_output_dim(x.shape, w.shape) == (c["n"], K, *out_hw)
    xt = torch.tensor(x, requires_grad=True)
    wt = torch.tensor(w, requires_grad=True)
    yt = F.conv_transpose2d(xt, wt, stride=c["s"], padding=c["p"], output_padding=adj,
                            dilation=c["d"], groups=c["g"])
    y = np.zeros(tuple(yt.shape))
    miopen.convolution_forward(1.0, x, w, desc, None, 0.0, y)
    np.testing.assert_allclose(y, yt.detach().numpy(), rtol=1e-9, atol=1e-9)
    dy = rng.standard_normal(y.shape)
    yt.backward(torch.tensor(dy))
    dx = np.zeros_like(x)
    miopen.convolution_backward_data(1.0, dy, w, desc, None, 0.0, dx)
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-9, atol=1e-9)
    dw = np.zeros_like(w)
    miopen.convolution_backward_weights(1.0, dy, x, desc, None, 0.0, dw)
    np.testing.assert_allclose(dw, wt.grad.numpy(), rtol=1e-9, atol=1e-9)


def test_each_workspace_query_reports_its_own_pass():
    """The backward queries report the workspace of their own pass, not the forward one's."""
    import cconv
    from cconv.compat import miopen

    desc = miopen.ConvolutionDescriptor(pad=(1, 1))
    x_shape, w_shape = (2, 64, 14, 14), (64, 64, 3, 3)
    y_shape = desc.get_forward_output_dim(x_shape, w_shape)

    def largest(op):
        sizes = []
        for algo in tuple(cconv.ALGORITHMS) + ("auto",):
            try:
                plan = cconv.plan_conv2d(x_shape, w_shape, padding=1, algo=algo)
            except ValueError:
                continue
            sizes.append(plan.workspace_bytes_for(op))
        return max(sizes)

    assert miopen.convolution_forward_get_workspace_size(
        desc, w_shape, x_shape, y_shape) == largest("forward")
    assert miopen.convolution_backward_data_get_workspace_size(
        desc, y_shape, w_shape, x_shape) == largest("backward_data")
    assert miopen.convolution_backward_weights_get_workspace_size(
        desc, y_shape, x_shape, w_shape) == largest("backward_weight")
    assert largest("backward_weight") != largest("forward")  # the case tells them apart
