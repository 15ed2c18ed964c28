"""The NCHW depthwise / few-channel weight gradient in bands of output rows.

A pass copies a band of the group's input rows once for every output channel of a thread's
run, and a plane taller than ``WEIGHT_BAND_BYTES`` allows is walked in several bands.  Small
budgets force bands of one, two or three rows here, on shapes whose bands end mid-plane,
with strides, dilation, padding modes and 1-4 input channels per group; each result is
checked against the float64 reference and must be the same bits at any thread count.
One-channel groups with at most 12 taps read the gradient rows in place (a row narrower
than a vector is copied), with a masked last vector when a row is not whole vectors.
"""

import numpy as np
import pytest

import cconv
from cconv._geometry import make_geometry
from cconv.algorithms import depthwise
from support.checks import assert_close
from support.reference import np_pad, ref_backward_weight

# the row-vector kernels' tests: the channel-blocked path (small planes) is off
pytestmark = pytest.mark.usefixtures("row_kernels")

CASES = [
    # (x shape, w shape, groups, stride, dilation, pads, mode)
    ((2, 3, 17, 23), (8, 3, 3, 3), 1, 1, 1, ((1, 1), (1, 1)), "zeros"),
    ((2, 4, 19, 20), (8, 2, 3, 3), 2, 2, 1, ((1, 0), (2, 1)), "reflect"),
    ((1, 6, 15, 33), (6, 1, 5, 3), 6, 1, 2, ((4, 3), (2, 2)), "circular"),
    ((2, 2, 21, 18), (12, 1, 3, 5), 2, (2, 1), 1, ((0, 2), (2, 2)), "replicate"),
    ((3, 1, 13, 40), (5, 1, 7, 7), 1, 1, 1, ((3, 3), (3, 3)), "symmetric"),
    # one pass of at most 12 taps over one input channel reads the gradient in place:
    # whole vectors, then the vector ending at the row's end (37, 35 columns), or none (32)
    ((2, 5, 9, 37), (5, 1, 3, 3), 5, 1, 1, ((1, 1), (1, 1)), "zeros"),
    ((1, 4, 7, 32), (8, 1, 3, 3), 4, 1, 1, ((1, 1), (1, 1)), "reflect"),
    ((2, 3, 11, 70), (3, 1, 3, 3), 3, 2, 1, ((1, 1), (1, 1)), "zeros"),
    ((2, 2, 10, 41), (2, 1, 1, 11), 2, 1, 1, ((0, 0), (5, 5)), "circular"),
]


def _layer(case, dtype, band_bytes, monkeypatch):
    xs, ws, groups, stride, dilation, pads, mode = case
    monkeypatch.setattr(depthwise, "WEIGHT_BAND_BYTES", band_bytes)
    geom = make_geometry(xs, ws, stride=stride, dilation=dilation, padding=pads, groups=groups,
                         padding_mode=mode, dtype=dtype)
    return depthwise.DepthwiseConvolution(geom)  # built here: the patched budget applies


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("band_rows", [1, 2, 3, None])
def test_banded_weight_gradient_matches_reference(case, dtype, band_rows, monkeypatch):
    xs, ws, groups, stride, dilation, pads, mode = case
    rng = np.random.default_rng(hash((xs, band_rows)) % 2**32)
    x = rng.standard_normal(xs)
    probe = _layer(case, dtype, 1 << 30, monkeypatch)._nchw
    item = np.dtype(dtype).itemsize
    per_row = (probe.geom.Cg * probe.geom.stride[1] * probe.geom.stride[0] * probe.Wq
               + probe.Dq) * item
    budget = 1 << 30 if band_rows is None else band_rows * per_row
    impl = _layer(case, dtype, budget, monkeypatch)
    g = impl.geom
    assert impl._nchw.weight_band == (g.OH if band_rows is None else min(band_rows, g.OH))
    gy = rng.standard_normal((xs[0], ws[0], g.OH, g.OW))
    grads = [impl.backward_weight(gy.astype(dtype), x.astype(dtype), t) for t in (1, 2, 3)]
    for other in grads[1:]:
        np.testing.assert_array_equal(other, grads[0])  # any thread count: the same bits
    st = stride if isinstance(stride, tuple) else (stride, stride)
    xp = np_pad(x, pads, mode)
    want = ref_backward_weight(gy, xp, ws, stride=st, dilation=(dilation, dilation),
                               groups=groups)
    assert_close(grads[0], want, dtype)


def test_the_suite_rgb_layer_is_banded():
    """3 -> 32 on 256^2: the three padded input planes and a gradient plane are a
    megabyte, so the budget cuts them into bands."""
    geom = make_geometry((8, 3, 256, 256), (32, 3, 3, 3), padding=1)
    lay = depthwise.DepthwiseConvolution(geom)._nchw
    assert 1 < lay.weight_band < 256
    item = 4
    assert (3 * lay.rows * lay.Wq + lay.weight_band * lay.Dq) * item <= \
        depthwise.WEIGHT_BAND_BYTES + 3 * (lay.rows - lay.weight_band) * lay.Wq * item
    assert cconv._dispatch.heuristic(geom, "backward_weight") == "depthwise"
