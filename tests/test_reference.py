"""The float64 reference (support/reference.py) itself, without cconv.

Every other test trusts the reference, so it is checked here: against PyTorch (float64
torch.nn.functional + autograd, when torch is installed) on a table that covers stride,
dilation, asymmetric padding and groups one at a time and all together, plus a hypothesis
sweep; and, without torch, by hand-computed values and by the adjoint identities that tie
each forward pass to its two gradients.
"""

import numpy as np
import pytest
from hypothesis import given

from support.reference import (
    NO_PADS,
    ref_backward_bias,
    ref_backward_data,
    ref_backward_weight,
    ref_conv2d,
    ref_conv_transpose2d,
    ref_conv_transpose2d_backward_data,
    ref_conv_transpose2d_backward_weight,
)
from support.strategies import conv_cases, transpose_cases

TOL = dict(rtol=1e-10, atol=1e-10)

# name: x (N, C, H, W), w (K, C/groups, R, S), stride, pads, dilation, groups
CONV_CASES = {
    "plain": ((2, 3, 7, 6), (4, 3, 3, 3), (1, 1), NO_PADS, (1, 1), 1),
    "stride": ((2, 3, 9, 8), (4, 3, 3, 2), (2, 3), ((1, 1), (0, 0)), (1, 1), 1),
    "dilation": ((1, 2, 11, 10), (3, 2, 3, 3), (1, 1), ((0, 0), (2, 2)), (2, 3), 1),
    "asymmetric_padding": ((2, 3, 6, 7), (2, 3, 3, 3), (1, 1), ((2, 0), (0, 3)), (1, 1), 1),
    "groups": ((2, 6, 7, 7), (9, 2, 3, 3), (1, 2), ((1, 1), (1, 1)), (1, 1), 3),
    "depthwise": ((1, 4, 8, 8), (8, 1, 3, 3), (2, 2), ((1, 0), (0, 1)), (1, 1), 4),
    "all_at_once": ((2, 6, 13, 11), (4, 3, 3, 2), (2, 3), ((2, 1), (0, 3)), (2, 2), 2),
}

# name: x (N, C_in, H, W), w (C_in, K/groups, R, S), stride, pads, output_padding, dilation,
# groups
TRANSPOSE_CASES = {
    "plain": ((2, 3, 5, 4), (3, 2, 3, 3), (1, 1), NO_PADS, (0, 0), (1, 1), 1),
    "stride_output_padding": ((2, 3, 5, 4), (3, 2, 3, 2), (2, 3), ((1, 1), (0, 0)), (1, 2),
                              (1, 1), 1),
    "dilation": ((1, 2, 4, 5), (2, 3, 3, 3), (1, 1), ((0, 0), (1, 1)), (0, 0), (2, 3), 1),
    "asymmetric_padding": ((2, 3, 5, 5), (3, 2, 3, 3), (2, 2), ((2, 0), (0, 3)), (1, 0),
                           (1, 1), 1),
    "groups": ((2, 6, 5, 5), (6, 2, 3, 3), (2, 1), ((1, 1), (1, 1)), (1, 0), (1, 1), 3),
    "all_at_once": ((2, 4, 5, 6), (4, 3, 3, 2), (2, 3), ((2, 1), (0, 3)), (1, 2), (2, 2), 2),
}


def _torch_ops():
    pytest.importorskip("torch")
    from support import torch_ops
    return torch_ops


def _conv_operands(name, seed=0):
    xs, ws, stride, pads, dilation, groups = CONV_CASES[name]
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    b = rng.standard_normal(ws[0])
    y_shape = ref_conv2d(x, w, None, stride, pads, dilation, groups).shape
    g = rng.standard_normal(y_shape)
    return x, w, b, g, (stride, pads, dilation, groups)


def _transpose_operands(name, seed=0):
    xs, ws, stride, pads, op, dilation, groups = TRANSPOSE_CASES[name]
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    b = rng.standard_normal(ws[1] * groups)
    y_shape = ref_conv_transpose2d(x, w, None, stride, pads, op, dilation, groups).shape
    g = rng.standard_normal(y_shape)
    return x, w, b, g, stride, pads, op, dilation, groups


# --------------------------------------------------------------------------------------------
# against PyTorch
# --------------------------------------------------------------------------------------------

def _check_conv_against_torch(x, w, b, g, stride, pads, dilation, groups):
    y_t, dx_t, dw_t, db_t = _torch_ops().torch_conv2d(x, w, b, stride, pads, dilation,
                                                      groups, g)
    args = (stride, pads, dilation, groups)
    np.testing.assert_allclose(ref_conv2d(x, w, b, *args), y_t, **TOL)
    np.testing.assert_allclose(ref_backward_data(g, w, x.shape, *args), dx_t, **TOL)
    np.testing.assert_allclose(ref_backward_weight(g, x, w.shape, *args), dw_t, **TOL)
    np.testing.assert_allclose(ref_backward_bias(g), db_t, **TOL)


def _check_transpose_against_torch(x, w, b, g, stride, pads, op, dilation, groups):
    y_t, dx_t, dw_t = _torch_ops().torch_conv_transpose2d(x, w, b, stride, pads, op, dilation,
                                                          groups, g)
    np.testing.assert_allclose(
        ref_conv_transpose2d(x, w, b, stride, pads, op, dilation, groups), y_t, **TOL)
    np.testing.assert_allclose(
        ref_conv_transpose2d_backward_data(g, w, x.shape, stride, pads, dilation, groups),
        dx_t, **TOL)
    np.testing.assert_allclose(
        ref_conv_transpose2d_backward_weight(g, x, w.shape, stride, pads, dilation, groups),
        dw_t, **TOL)


@pytest.mark.parametrize("name", sorted(CONV_CASES))
def test_conv_reference_matches_torch(name):
    """Forward, backward-data, backward-weight and the bias gradient."""
    x, w, b, g, args = _conv_operands(name)
    _check_conv_against_torch(x, w, b, g, *args)


@pytest.mark.parametrize("name", sorted(TRANSPOSE_CASES))
def test_transpose_reference_matches_torch(name):
    """Transposed convolution and its data and weight gradients."""
    x, w, b, g, *args = _transpose_operands(name)
    _check_transpose_against_torch(x, w, b, g, *args)


@given(case=conv_cases(dtypes=(np.float64,), memory_forms=("C",)))
def test_conv_reference_matches_torch_sweep(case):
    _torch_ops()
    g64, _ = case.grad_out(np.float64)
    _check_conv_against_torch(case.x64, case.w64, case.b64, g64, case.stride, case.pads,
                              case.dilation, case.groups)


@given(case=transpose_cases(dtypes=(np.float64,), memory_forms=("C",)))
def test_transpose_reference_matches_torch_sweep(case):
    _torch_ops()
    g64, _ = case.grad_out()
    _check_transpose_against_torch(case.x64, case.w64, case.b64, g64, case.stride, case.pads,
                                   case.output_padding, case.dilation, case.groups)


# --------------------------------------------------------------------------------------------
# without PyTorch
# --------------------------------------------------------------------------------------------

def test_conv_reference_by_hand():
    x = np.arange(1.0, 10.0).reshape(1, 1, 3, 3)
    w = np.array([[[[1.0, 0.0], [0.0, -1.0]]]])                  # x[i, j] - x[i+1, j+1]
    np.testing.assert_array_equal(ref_conv2d(x, w), np.full((1, 1, 2, 2), -4.0))
    # padding 1 on top / left only, stride 2: outputs at padded rows / cols 0 and 2
    y = ref_conv2d(x, w, np.array([0.5]), 2, ((1, 0), (1, 0)))
    np.testing.assert_array_equal(y, [[[[0.5 - 1.0, 0.5 - 3.0], [0.5 - 7.0, 0.5 + 5.0 - 9.0]]]])
    # dilation 2 on a 3x3 input: the corners only
    np.testing.assert_array_equal(ref_conv2d(x, w, None, 1, NO_PADS, 2), [[[[1.0 - 9.0]]]])
    # groups: each output channel sees its own input channel
    x2 = np.stack([x[0, 0], 10 * x[0, 0]])[None]
    y2 = ref_conv2d(x2, np.concatenate([w, 2 * w]), None, 1, NO_PADS, 1, 2)
    np.testing.assert_array_equal(y2, np.concatenate([np.full((1, 1, 2, 2), -4.0),
                                                      np.full((1, 1, 2, 2), -80.0)], axis=1))


def _dot(a, b):
    return float(np.sum(a * b))


@pytest.mark.parametrize("name", sorted(CONV_CASES))
def test_conv_reference_gradients_are_adjoints(name):
    """<conv(x, w), g> == <x, backward_data(g, w)> == <w, backward_weight(g, x)>."""
    x, w, _, g, args = _conv_operands(name, seed=1)
    a = _dot(ref_conv2d(x, w, None, *args), g)
    assert np.isclose(_dot(x, ref_backward_data(g, w, x.shape, *args)), a, rtol=1e-12)
    assert np.isclose(_dot(w, ref_backward_weight(g, x, w.shape, *args)), a, rtol=1e-12)


@pytest.mark.parametrize("name", sorted(TRANSPOSE_CASES))
def test_transpose_reference_gradients_are_adjoints(name):
    x, w, _, g, stride, pads, op, dilation, groups = _transpose_operands(name, seed=2)
    a = _dot(ref_conv_transpose2d(x, w, None, stride, pads, op, dilation, groups), g)
    dx = ref_conv_transpose2d_backward_data(g, w, x.shape, stride, pads, dilation, groups)
    dw = ref_conv_transpose2d_backward_weight(g, x, w.shape, stride, pads, dilation, groups)
    assert np.isclose(_dot(x, dx), a, rtol=1e-12)
    assert np.isclose(_dot(w, dw), a, rtol=1e-12)


def test_transpose_reference_data_gradient_is_forward_conv():
    """The data gradient of a transposed conv is the forward conv of grad_out, the weight
    gradient is conv2d's weight gradient with roles swapped."""
    rng = np.random.default_rng(37)
    x = rng.standard_normal((2, 6, 5, 4))
    w = rng.standard_normal((6, 2, 3, 2))
    pads = ((1, 2), (0, 1))
    g = rng.standard_normal(ref_conv_transpose2d(x, w, None, 2, pads, 1, 1, 3).shape)
    dx = ref_conv_transpose2d_backward_data(g, w, x.shape, 2, pads, 1, 3)
    # conv2d of g with the same pads, then cropped to the input size
    dx2 = ref_conv2d(g, w, None, 2, ((1, 2 - 1), (0, 1 - 1)), 1, 3)[:, :, :5, :4]
    np.testing.assert_allclose(dx, dx2, rtol=1e-12, atol=1e-12)
    dw = ref_conv_transpose2d_backward_weight(g, x, w.shape, 2, pads, 1, 3)
    dw2 = np.einsum("nchw,nchw->", ref_conv_transpose2d(x, w, None, 2, pads, 1, 1, 3), g)
    assert np.isclose(np.sum(dw * w), dw2, rtol=1e-12)
    # and backward_data of conv2d (a scatter) is the transposed conv for output_padding 0
    y = ref_conv_transpose2d(x, w, None, 2, pads, 0, 1, 3)
    np.testing.assert_allclose(ref_backward_data(x, w, y.shape, 2, pads, 1, 3), y,
                               rtol=1e-12, atol=1e-12)
