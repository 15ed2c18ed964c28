"""out= / alpha / beta (MIOpen/cuDNN semantics): out[...] = alpha * result + beta * out, returning
out itself; beta == 0 never reads out; without out alpha scales and beta is ignored."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import cconv
from support.checks import assert_close, rtol_for
from support.reference import (
    ref_backward_data,
    ref_backward_weight,
    ref_conv2d,
    ref_conv_transpose2d,
)
from support.strategies import (
    build_conv_case,
    build_transpose_case,
    conv_cases,
    from_layout,
    random_array,
    to_layout,
    transpose_cases,
    weight_from_layout,
)

OPS = ["forward", "backward_data", "backward_weight", "transpose"]
SCALARS = st.sampled_from([1.0, 0.5, -2.0, 3.25])
BETAS = st.sampled_from([0.0, 1.0, -0.5, 2.0])


def _problem(op, case):
    """-> (call(**out_kwargs), reference result in the argument layout, result dtype)."""
    if op == "transpose":
        ref = ref_conv_transpose2d(case.x64, case.w64, case.b64, case.stride, case.pads,
                                   case.output_padding, case.dilation, case.groups)

        def call(**kw):
            return cconv.conv_transpose2d(case.x, case.weight, case.bias, **case.kwargs, **kw)
        return call, to_layout(ref, case.layout), case.dtype
    rdt = case.result_dtype
    if op == "forward":
        ref = ref_conv2d(case.x64, case.w64, case.b64, case.stride, case.pads, case.dilation,
                         case.groups)

        def call(**kw):
            return cconv.conv2d(case.x, case.weight, case.bias, **case.kwargs, **kw)
        return call, to_layout(ref, case.layout), rdt
    g64, g = case.grad_out(dtype=rdt)
    if op == "backward_data":
        ref = ref_backward_data(g64, case.w64, (case.n, case.c, case.h, case.w), case.stride,
                                case.pads, case.dilation, case.groups)

        def call(**kw):
            return cconv.conv2d_backward_data(g, case.weight, case.x_shape, **case.kwargs, **kw)
        return call, to_layout(ref, case.layout), rdt
    ref = ref_backward_weight(g64, case.x64, case.w64.shape, case.stride, case.pads,
                              case.dilation, case.groups)
    if case.weight_layout == "HWIO":
        ref = np.transpose(ref, (2, 3, 1, 0))

    def call(**kw):
        return cconv.conv2d_backward_weight(g, case.x, case.weight_shape, **case.kwargs, **kw)
    return call, ref, rdt


def _cases(op):
    if op == "transpose":
        return transpose_cases(max_c=8, max_hw=7)
    return conv_cases(max_c=10, max_hw=12)


@st.composite
def op_cases(draw):
    op = draw(st.sampled_from(OPS))
    return op, draw(_cases(op))


@given(oc=op_cases(), alpha=SCALARS, beta=BETAS, seed=st.integers(0, 2**31 - 1))
def test_out_alpha_beta(oc, alpha, beta, seed):
    op, case = oc
    call, ref, rdt = _problem(op, case)
    out0 = random_array(np.random.default_rng(seed), ref.shape, rdt)
    out = out0.copy()
    res = call(out=out, alpha=alpha, beta=beta)
    assert res is out, f"{op}: out= must return the out array itself"
    assert out.dtype == rdt and out.shape == ref.shape
    expected = alpha * ref + beta * out0.astype(np.float64)
    # two roundings: the convolution (relative to |alpha * result|) and the final axpby
    scale = max(np.abs(alpha * ref).max(initial=0) + abs(beta) * np.abs(out0).max(initial=0),
                1e-3)
    err = np.abs(out.astype(np.float64) - expected).max(initial=0)
    assert err <= rtol_for(rdt) * scale, (op, alpha, beta, err, scale)


@given(oc=op_cases(), alpha=SCALARS)
def test_beta_zero_never_reads_out(oc, alpha):
    op, case = oc
    call, ref, rdt = _problem(op, case)
    out = np.full(ref.shape, np.nan, dtype=rdt)
    res = call(out=out, alpha=alpha, beta=0.0)
    assert res is out
    assert_close(out, alpha * ref, rdt, what=f"{op} beta=0 with NaN in out")
    out2 = np.full(ref.shape, np.inf, dtype=rdt)
    call(out=out2, alpha=alpha)                         # beta defaults to 0
    assert_close(out2, alpha * ref, rdt, what=f"{op} default beta with inf in out")


@given(oc=op_cases(), alpha=SCALARS, beta=BETAS)
def test_without_out_alpha_scales_and_beta_is_ignored(oc, alpha, beta):
    op, case = oc
    call, ref, rdt = _problem(op, case)
    res = call(alpha=alpha, beta=beta)
    assert res.shape == ref.shape and res.dtype == rdt
    assert_close(res, alpha * ref, rdt, what=f"{op} alpha={alpha} beta={beta} (no out)")


def _fixed_problem(op):
    """A small, fixed, non-trivial problem per op for the error tests."""
    if op == "transpose":
        return build_transpose_case(2, 4, 6, 5, 4, 3, 3, groups=2, stride=2, padding=1,
                                    output_padding=1, seed=1)
    return build_conv_case(2, 4, 6, 7, 6, 3, 2, groups=2, stride=(2, 1), padding=1, seed=1)


@pytest.mark.parametrize("op", OPS)
def test_out_wrong_shape_raises(op):
    case = _fixed_problem(op)
    call, ref, rdt = _problem(op, case)
    for shape in [ref.shape[:-1] + (ref.shape[-1] + 1,), ref.shape[1:], (1,) + ref.shape]:
        with pytest.raises(ValueError, match="out"):
            call(out=np.zeros(shape, rdt))


@pytest.mark.parametrize("op", OPS)
def test_out_wrong_dtype_raises(op):
    case = _fixed_problem(op)
    call, ref, rdt = _problem(op, case)
    for dt in [np.float16, np.float32, np.float64, np.int32]:
        if np.dtype(dt) == rdt:
            continue
        with pytest.raises((TypeError, ValueError), match="out"):
            call(out=np.zeros(ref.shape, dt))


@pytest.mark.parametrize("op", OPS)
def test_out_read_only_raises(op):
    case = _fixed_problem(op)
    call, ref, rdt = _problem(op, case)
    out = np.zeros(ref.shape, rdt)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="out"):
        call(out=out)
    np.testing.assert_array_equal(out, 0)


@pytest.mark.parametrize("op", OPS)
def test_out_not_an_array_raises(op):
    case = _fixed_problem(op)
    call, ref, rdt = _problem(op, case)
    with pytest.raises((TypeError, ValueError), match="out"):
        call(out=np.zeros(ref.shape, rdt).tolist())


@pytest.mark.parametrize("op", OPS)
def test_non_contiguous_out_is_written_right_or_refused(op):
    """out with the right shape and dtype but strided: either refused with a ValueError, or
    written correctly in place (never silently wrong, never writing outside its view)."""
    case = _fixed_problem(op)
    call, ref, rdt = _problem(op, case)
    big = np.full(ref.shape[:-1] + (2 * ref.shape[-1],), 7.0, dtype=rdt)
    out = big[..., ::2]
    try:
        res = call(out=out, alpha=1.0, beta=1.0)
    except ValueError as exc:
        assert "out" in str(exc)
        return
    assert res is out
    assert_close(out, ref + 7.0, rdt)
    np.testing.assert_array_equal(big[..., 1::2], 7.0)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_forward_accumulate_into_out(layout, dtype):
    """The training-loop idiom: accumulate two convolutions into one buffer with beta=1."""
    rng = np.random.default_rng(41)
    x1 = random_array(rng, (2, 3, 8, 8), dtype)
    x2 = random_array(rng, (2, 3, 8, 8), dtype)
    w = random_array(rng, (4, 3, 3, 3), dtype)
    b = random_array(rng, (4,), dtype)
    out = np.zeros((2, 4, 8, 8) if layout == "NCHW" else (2, 8, 8, 4), dtype)
    cconv.conv2d(to_layout(x1, layout), w, b, padding=1, layout=layout, out=out)
    cconv.conv2d(to_layout(x2, layout), w, b, padding=1, layout=layout, out=out, beta=1.0)
    pads = ((1, 1), (1, 1))
    ref = ref_conv2d(x1, w, b, 1, pads) + ref_conv2d(x2, w, b, 1, pads)
    assert_close(from_layout(out, layout), ref, dtype)


def test_alpha_applies_to_bias_too():
    """Result = convolution + bias; alpha scales the whole result."""
    x = np.zeros((1, 2, 4, 4))
    w = np.ones((3, 2, 3, 3))
    b = np.array([1.0, 2.0, 3.0])
    y = cconv.conv2d(x, w, b, alpha=2.0)
    np.testing.assert_array_equal(y, np.broadcast_to((2 * b)[None, :, None, None], y.shape))


def test_backward_weight_out_with_hwio():
    rng = np.random.default_rng(42)
    x = random_array(rng, (2, 4, 6, 6), np.float64)
    g = random_array(rng, (2, 5, 4, 4), np.float64)
    out0 = random_array(rng, (3, 3, 4, 5), np.float64)
    out = out0.copy()
    res = cconv.conv2d_backward_weight(g, x, (3, 3, 4, 5), weight_layout="HWIO", out=out,
                                       alpha=0.5, beta=-1.0)
    assert res is out
    ref = ref_backward_weight(g, x, (5, 4, 3, 3))
    assert_close(weight_from_layout(out, "HWIO"),
                 0.5 * ref - weight_from_layout(out0, "HWIO"), np.float64)


# -- out sharing memory with an operand ----------------------------------------------------------
#
# The kernels write their output while they still read their inputs (tile by tile, row by row),
# so an ``out`` that is the input itself (an in-place update, x = conv(x)) must get the result as
# if the operands had been copied first, as NumPy's ufuncs do.  Each case has an output of the
# input's shape; the expected value is the float64 reference on the untouched operands.

ALIAS_CASES = {
    # name: (x shape, weight shape, keywords)
    "direct 3x3": ((2, 6, 9, 11), (6, 6, 3, 3), dict(padding=1, algo="direct")),
    "winograd 3x3": ((2, 8, 10, 10), (8, 8, 3, 3), dict(padding=1, algo="winograd")),
    "gemm 1x1": ((2, 16, 12, 12), (16, 16, 1, 1), dict(algo="gemm")),
    "depthwise": ((1, 4, 400, 300), (4, 1, 3, 3), dict(padding=1, groups=4, algo="depthwise")),
    "direct NHWC": ((2, 6, 9, 11), (6, 6, 3, 3), dict(padding=1, algo="direct",
                                                      layout="NHWC")),
}


@pytest.mark.parametrize("name", list(ALIAS_CASES))
@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_out_that_is_the_input_gets_the_result_of_the_untouched_input(name, beta):
    x_shape, w_shape, kw = ALIAS_CASES[name]
    rng = np.random.default_rng(11)
    x64 = rng.standard_normal(x_shape)
    w64 = rng.standard_normal(w_shape)
    layout = kw.get("layout", "NCHW")
    x = to_layout(x64.astype(np.float32), layout)
    dy = x.copy()
    expected_fwd = 1.5 * ref_conv2d(x64, w64, None, (1, 1), _pads(kw), (1, 1),
                                    kw.get("groups", 1)) + beta * x64
    expected_bwd = 1.5 * ref_backward_data(x64, w64, x_shape, (1, 1), _pads(kw), (1, 1),
                                           kw.get("groups", 1)) + beta * x64
    got = cconv.conv2d(x, w64.astype(np.float32), out=x, alpha=1.5, beta=beta, **kw)
    assert got is x
    assert_close(from_layout(got, layout), expected_fwd, dtype=np.float32)
    got = cconv.conv2d_backward_data(dy, w64.astype(np.float32), dy.shape, out=dy, alpha=1.5,
                                     beta=beta, **kw)
    assert got is dy
    assert_close(from_layout(got, layout), expected_bwd, dtype=np.float32)


def _pads(kw):
    p = kw.get("padding", 0)
    return ((p, p), (p, p))


@pytest.mark.parametrize("rank_layout", [("NWC", 1), ("NCW", 1), ("NDHWC", 3)])
def test_nd_out_that_is_the_input(rank_layout):
    from support.reference_nd import ref_conv, to_channels_last
    layout, rank = rank_layout
    rng = np.random.default_rng(12)
    spatial = (500,) if rank == 1 else (4, 5, 6)
    x64 = rng.standard_normal((2, 8) + spatial)
    w64 = rng.standard_normal((8, 8) + (3,) * rank)
    x = x64.astype(np.float32)
    if layout.endswith("C"):
        x = np.ascontiguousarray(to_channels_last(x))
    conv = cconv.conv1d if rank == 1 else cconv.conv3d
    got = conv(x, w64.astype(np.float32), padding=1, layout=layout, out=x, beta=1.0)
    assert got is x
    expected = ref_conv(x64, w64, None, (1,) * rank, ((1, 1),) * rank, (1,) * rank, 1) + x64
    if layout.endswith("C"):
        got = np.moveaxis(got, -1, 1)
    assert_close(got, expected, dtype=np.float32)
