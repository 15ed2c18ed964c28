"""cconv against PyTorch (torch.nn.functional + autograd), when torch is installed.

The float64 reference itself is checked against torch in test_reference.py."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import cconv  # noqa: E402
from support.checks import assert_close  # noqa: E402
from support.strategies import (  # noqa: E402
    conv_cases,
    from_layout,
    random_array,
    to_layout,
    transpose_cases,
    weight_from_layout,
    weight_to_layout,
)
from support.torch_ops import F, as_tensor, torch_conv2d, torch_conv_transpose2d  # noqa: E402

F32_64 = (np.float32, np.float64)


# --------------------------------------------------------------------------------------------
# cconv vs torch, hypothesis sweep
# --------------------------------------------------------------------------------------------

@given(case=conv_cases(dtypes=F32_64), algo=st.sampled_from(["auto", "direct"]))
def test_conv2d_and_gradients_match_torch(case, algo):
    rdt = case.result_dtype
    g64, g = case.grad_out(rdt)
    y_t, dx_t, dw_t, db_t = torch_conv2d(case.x64, case.w64, case.b64, case.stride, case.pads,
                                         case.dilation, case.groups, g64)
    kw = dict(case.kwargs, algo=algo)
    y = cconv.conv2d(case.x, case.weight, case.bias, **kw)
    assert y.shape == case.out_shape
    assert_close(from_layout(y, case.layout), y_t, rdt, what="forward vs torch")
    dx = cconv.conv2d_backward_data(g, case.weight, case.x_shape, **kw)
    assert_close(from_layout(dx, case.layout), dx_t, rdt, what="backward_data vs torch")
    dw = cconv.conv2d_backward_weight(g, case.x, case.weight_shape, **kw)
    assert_close(weight_from_layout(dw, case.weight_layout), dw_t, rdt,
                 what="backward_weight vs torch")
    db = cconv.conv2d_backward_bias(g, layout=case.layout)
    assert_close(db, db_t, rdt, what="backward_bias vs torch")


@given(case=transpose_cases(dtypes=F32_64))
def test_conv_transpose2d_matches_torch(case):
    g64, g = case.grad_out()
    y_t, dx_t, dw_t = torch_conv_transpose2d(case.x64, case.w64, case.b64, case.stride,
                                             case.pads, case.output_padding, case.dilation,
                                             case.groups, g64)
    y = cconv.conv_transpose2d(case.x, case.weight, case.bias, **case.kwargs)
    assert y.shape == case.out_shape
    assert_close(from_layout(y, case.layout), y_t, case.dtype, what="conv_transpose2d vs torch")
    dx = cconv.conv_transpose2d_backward_data(g, case.weight, case.x_shape, **case.kwargs)
    assert_close(from_layout(dx, case.layout), dx_t, case.dtype, what="dx vs torch")
    dw = cconv.conv_transpose2d_backward_weight(g, case.x, case.weight_shape, **case.kwargs)
    assert_close(weight_from_layout(dw, case.weight_layout), dw_t, case.dtype,
                 what="dw vs torch")


@pytest.mark.filterwarnings("ignore:Using padding='same'")
def test_torch_same_padding_is_same_upper():
    """torch's padding="same" (stride 1) puts the odd extra pixel at the end: cconv's "same"."""
    rng = np.random.default_rng(61)
    for k, d in [(2, 1), (4, 1), (4, 3), (3, 2), (5, 1)]:
        x = random_array(rng, (1, 3, 9, 8), np.float64)
        w = random_array(rng, (2, 3, k, k), np.float64)
        yt = F.conv2d(as_tensor(x), as_tensor(w), None, 1, "same", d).numpy()
        for padding in ("same", "same_upper"):
            y = cconv.conv2d(x, w, padding=padding, dilation=d)
            assert_close(y, yt, np.float64, what=f"k={k} d={d} {padding}")


# --------------------------------------------------------------------------------------------
# real layer shapes
# --------------------------------------------------------------------------------------------

LAYERS = [
    # name, N, C, K, H, W, kernel, stride, padding, groups
    ("resnet 3x3 64->64", 1, 64, 64, 56, 56, 3, 1, 1, 1),
    ("mobilenet depthwise 32 s2", 1, 32, 32, 56, 56, 3, 2, 1, 32),
    ("resnet 1x1 64->256", 1, 64, 256, 28, 28, 1, 1, 0, 1),
    ("resnet stem 7x7 s2", 1, 3, 64, 64, 64, 7, 2, 3, 1),
    ("resnext grouped 3x3", 2, 64, 64, 14, 14, 3, 1, 1, 8),
    ("vgg 3x3 128->128 batch 2", 2, 128, 128, 14, 14, 3, 1, 1, 1),
]


@pytest.mark.parametrize("name, n, c, k, h, w, ks, stride, padding, groups", LAYERS,
                         ids=[layer[0] for layer in LAYERS])
@pytest.mark.parametrize("layout, weight_layout", [("NCHW", "OIHW"), ("NHWC", "HWIO")])
def test_real_layers_match_torch(name, n, c, k, h, w, ks, stride, padding, groups, layout,
                                 weight_layout):
    rng = np.random.default_rng(62)
    x = random_array(rng, (n, c, h, w), np.float32)
    wt = random_array(rng, (k, c // groups, ks, ks), np.float32)
    b = random_array(rng, (k,), np.float32)
    pads = ((padding, padding), (padding, padding))
    ho = (h + 2 * padding - ks) // stride + 1
    wo = (w + 2 * padding - ks) // stride + 1
    g = random_array(rng, (n, k, ho, wo), np.float32)
    y_t, dx_t, dw_t, db_t = torch_conv2d(x, wt, b, (stride, stride), pads, (1, 1), groups, g)
    kw = dict(stride=stride, padding=padding, groups=groups, layout=layout,
              weight_layout=weight_layout)
    xl, wl, gl = to_layout(x, layout), weight_to_layout(wt, weight_layout), to_layout(g, layout)
    y = cconv.conv2d(xl, wl, b, **kw)
    assert_close(from_layout(y, layout), y_t, np.float32, what=f"{name} forward")
    dx = cconv.conv2d_backward_data(gl, wl, xl.shape, **kw)
    assert_close(from_layout(dx, layout), dx_t, np.float32, what=f"{name} backward_data")
    dw = cconv.conv2d_backward_weight(gl, xl, wl.shape, **kw)
    assert_close(weight_from_layout(dw, weight_layout), dw_t, np.float32,
                 what=f"{name} backward_weight")
    assert_close(cconv.conv2d_backward_bias(gl, layout=layout), db_t, np.float32,
                 what=f"{name} backward_bias")


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_real_transpose_layer_matches_torch(layout):
    """DCGAN / U-Net style upsampling: 64 -> 32, 4x4, stride 2, padding 1, on 28x28."""
    rng = np.random.default_rng(63)
    x = random_array(rng, (2, 64, 28, 28), np.float32)
    w = random_array(rng, (64, 32, 4, 4), np.float32)
    b = random_array(rng, (32,), np.float32)
    g = random_array(rng, (2, 32, 56, 56), np.float32)
    y_t, dx_t, dw_t = torch_conv_transpose2d(x, w, b, (2, 2), ((1, 1), (1, 1)), (0, 0), (1, 1),
                                             1, g)
    y = cconv.conv_transpose2d(to_layout(x, layout), w, b, stride=2, padding=1, layout=layout)
    assert_close(from_layout(y, layout), y_t, np.float32, what="transpose forward")
    dx = cconv.conv_transpose2d_backward_data(to_layout(g, layout), w, to_layout(x, layout).shape,
                                              stride=2, padding=1, layout=layout)
    assert_close(from_layout(dx, layout), dx_t, np.float32, what="transpose backward_data")
    dw = cconv.conv_transpose2d_backward_weight(to_layout(g, layout), to_layout(x, layout),
                                                w.shape, stride=2, padding=1, layout=layout)
    assert_close(dw, dw_t, np.float32, what="transpose backward_weight")
