"""conv3d on the folded direct kernels (``cconv.algorithms.direct_volume``: the depth taps in
the tile kernels' reduction, the volume packed once) against the float64 N-d reference:
forward and data gradient over random shapes, both layouts, the ``out`` / ``alpha`` /
``beta`` epilogue, and which problems run on them."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cconv
from cconv import functional_nd as F
from cconv import _nd_execute
from cconv._kernels import _runtime
from cconv.algorithms import direct_volume
from support.checks import assert_close
from support.checks_nd import as_reference, check_out_alpha_beta, conv_call, conv_reference
from support.reference_nd import ref_backward_data
from support.strategies_nd import conv_cases


class _Counted:
    """Counts the folded forward runs (the data gradient runs one too)."""

    def __init__(self, mp):
        self.runs = 0
        original = direct_volume.forward

        def counted(*args, **kwargs):
            self.runs += 1
            return original(*args, **kwargs)

        mp.setattr(direct_volume, "forward", counted)


def _geometry(case):
    shape = case.arrays["x"].shape
    return cconv.plan_conv3d(shape, case.arrays["w"].shape, **{
        k: v for k, v in case.kwargs.items() if k != "padding_value"}).geometry


@settings(max_examples=150, deadline=None)
@given(conv_cases(3, max_size=6, modes=("zeros",)), st.sampled_from(["forward",
                                                                        "backward_data"]))
def test_folded_passes_match_reference(case, pss):
    case.kwargs["algo"] = "direct"
    with pytest.MonkeyPatch.context() as mp:
        spy = _Counted(mp)
        got = conv_call(F, case, pss)
    assert got.dtype == case.result_dtype
    assert_close(as_reference(case, pss, got), conv_reference(case, pss), dtype=case.dtype,
                 what=pss)
    geom = _geometry(case)
    if pss == "forward":
        assert spy.runs == int(direct_volume.applies(geom))
    elif direct_volume.backward_data_geometry(geom) is None or not direct_volume.applies(geom):
        assert spy.runs == 0


@settings(max_examples=25, deadline=None)
@given(conv_cases(3, max_size=4, modes=("zeros",)), st.sampled_from(["forward",
                                                                        "backward_data"]),
       st.sampled_from([1.0, -0.5]), st.sampled_from([0.0, 1.0, 0.25]),
       st.sampled_from(["C", "strided"]))
def test_folded_out_alpha_beta(case, pss, alpha, beta, out_form):
    case.kwargs["algo"] = "direct"
    check_out_alpha_beta(F, case, pss, alpha, beta, out_form)


def _operands(seed, shape, wshape):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape).astype(np.float32),
            rng.standard_normal(wshape).astype(np.float32))


@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_stride_one_data_gradient_runs_folded_and_threads_do_not_change_it(layout):
    x, w = _operands(3, (2, 6, 7, 9, 8), (10, 3, 3, 2, 3))
    kw = dict(padding=((1, 1), (0, 1), (2, 0)), dilation=(1, 2, 1), groups=2, algo="direct")
    gy = np.random.default_rng(4).standard_normal(cconv.conv3d(x, w, **kw).shape)
    gy = gy.astype(np.float32)
    if layout == "NDHWC":
        to = (0, 2, 3, 4, 1)
        xs, gys = x.transpose(to).copy(), gy.transpose(to).copy()
    else:
        xs, gys = x, gy
    with pytest.MonkeyPatch.context() as mp:
        spy = _Counted(mp)
        one = cconv.conv3d_backward_data(gys, w, xs.shape, layout=layout, num_threads=1, **kw)
        three = cconv.conv3d_backward_data(gys, w, xs.shape, layout=layout, num_threads=3,
                                           **kw)
        y1 = cconv.conv3d(xs, w, layout=layout, num_threads=1, **kw)
        y3 = cconv.conv3d(xs, w, layout=layout, num_threads=3, **kw)
    assert spy.runs == 4
    assert np.array_equal(one, three) and np.array_equal(y1, y3)
    ref = ref_backward_data(gy.astype(np.float64), w.astype(np.float64), x.shape,
                            stride=(1, 1, 1), pads=kw["padding"], dilation=kw["dilation"],
                            groups=2)
    back = one.transpose(0, 4, 1, 2, 3) if layout == "NDHWC" else one
    assert_close(back, ref, np.float32)


@pytest.mark.parametrize("vendor", ["amd", "other"])
def test_auto_folds_where_measured_faster(vendor):
    """auto (AMD's measurements, and any CPU but Intel): folded for few-channel, strided and
    dilated layers and 32-channel Winograd taps; the tap loop for 64-channel Winograd taps,
    1x1x1 (BLAS) and padding modes."""
    def geom(c, k, kernel, **kw):
        return cconv.plan_conv3d((1, c, 8, 16, 16), (k, c) + kernel, **kw).geometry

    def preferred(g, op):
        return _nd_execute.preferred(g, op, vendor)

    assert preferred(geom(3, 64, (3, 3, 3), padding=1), "forward")
    assert preferred(geom(64, 128, (3, 3, 3), padding=1, stride=2), "forward")
    assert preferred(geom(32, 32, (3, 3, 3), padding=1), "forward")
    assert not preferred(geom(64, 64, (3, 3, 3), padding=1), "forward")
    assert not preferred(geom(64, 64, (1, 1, 1)), "forward")
    assert preferred(geom(32, 32, (3, 3, 3), padding=1), "backward_data")
    assert not preferred(geom(3, 64, (3, 3, 3), padding=1), "backward_data")
    assert not direct_volume.applies(geom(8, 8, (3, 3, 3), padding=1, padding_mode="reflect"))
    depthwise = cconv.plan_conv3d((1, 8, 8, 16, 16), (8, 1, 3, 3, 3), groups=8).geometry
    assert not direct_volume.applies(depthwise)


def test_auto_takes_the_winograd_taps_from_16_channels_on_intel():
    """Intel's measurements: the Winograd taps (where the 2-D heuristic takes Winograd for
    the slices) from 16 channels per group on both sides, the folded kernels below (and for
    what is not Winograd's)."""
    def geom(c, k, kernel, **kw):
        return cconv.plan_conv3d((1, c, 8, 64, 64), (k, c) + kernel, **kw).geometry

    def preferred(g, op):
        return _nd_execute.preferred(g, op, "intel")

    for op in ("forward", "backward_data"):
        assert not preferred(geom(16, 16, (3, 3, 3), padding=1), op)
        assert not preferred(geom(32, 32, (3, 3, 3), padding=1), op)
        assert preferred(geom(8, 16, (3, 3, 3), padding=1), op)
        assert preferred(geom(8, 8, (3, 3, 3), padding=1), op)
    assert preferred(geom(3, 64, (3, 3, 3), padding=1), "forward")
    assert preferred(geom(32, 32, (3, 3, 3), padding=1, dilation=2), "forward")


def test_the_vendor_rule_follows_this_cpu():
    vendor = _runtime.cpu_vendor()
    assert vendor in _nd_execute.WINOGRAD_TAPS_FROM_CHANNELS
    assert _nd_execute.CPU_VENDOR == vendor
    g = cconv.plan_conv3d((1, 32, 8, 16, 16), (32, 32, 3, 3, 3), padding=1).geometry
    assert _nd_execute.preferred(g, "forward") == _nd_execute.preferred(g, "forward", vendor)
