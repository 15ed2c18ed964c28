"""The direct weight gradient of strided layers, which packs the input split into stride
phases (``direct_schedule.phased``), against the float64 reference: strides 2-3 per axis,
dilation, asymmetric padding, groups, both layouts, batch 1, odd sizes and inputs so small
that some phases hold padding only.  And the order of the strided data gradient's phase
jobs."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import cconv
from cconv.algorithms import direct_schedule
from cconv.algorithms.direct import DirectConvolution
from support.checks import assert_close
from support.reference import ref_backward_weight, ref_conv2d


@st.composite
def strided_cases(draw):
    groups = draw(st.integers(1, 2))
    R, S = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    pads = ((draw(st.integers(0, 3)), draw(st.integers(0, 3))),
            (draw(st.integers(0, 3)), draw(st.integers(0, 3))))
    H = draw(st.integers(max(1, (R - 1) * dh + 1 - sum(pads[0])), 17))
    W = draw(st.integers(max(1, (S - 1) * dw + 1 - sum(pads[1])), 17))
    return dict(N=draw(st.integers(1, 3)), C=groups * draw(st.integers(2, 20)),
                K=groups * draw(st.integers(1, 20)), groups=groups, H=H, W=W, R=R, S=S,
                stride=(sh, sw), dilation=(dh, dw), pads=pads,
                layout=draw(st.sampled_from(["NCHW", "NHWC"])),
                dtype=draw(st.sampled_from([np.float32, np.float64])),
                threads=draw(st.sampled_from([1, 2, 3])), seed=draw(st.integers(0, 2**16)))


@settings(max_examples=80, deadline=None)
@given(strided_cases())
def test_phased_weight_gradient_matches_reference(case):
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal((case["N"], case["C"], case["H"], case["W"]))
    w_shape = (case["K"], case["C"] // case["groups"], case["R"], case["S"])
    rkw = dict(stride=case["stride"], dilation=case["dilation"], pads=case["pads"],
               groups=case["groups"])
    dy = rng.standard_normal(ref_conv2d(x, np.zeros(w_shape), **rkw).shape)
    kw = dict(stride=case["stride"], dilation=case["dilation"], padding=case["pads"],
              groups=case["groups"], layout=case["layout"])
    to = (lambda a: a) if case["layout"] == "NCHW" else (lambda a: a.transpose(0, 2, 3, 1))
    geom = cconv.plan_conv2d(to(x).shape, w_shape, dtype=case["dtype"], **kw).geometry
    p = DirectConvolution.for_geometry(geom).schedule("backward_weight")
    # (the geometry's stride: an axis with a single output may be canonicalised to 1)
    assert p.info.forward.phases == geom.stride, "strided layers run the phased packing"
    dtype = case["dtype"]
    gw = cconv.conv2d_backward_weight(to(dy).astype(dtype), to(x).astype(dtype), w_shape,
                                      algo="direct", num_threads=case["threads"], **kw)
    assert_close(gw, ref_backward_weight(dy, x, w_shape, **rkw), dtype,
                 what="backward_weight")


def test_phased_weight_gradient_is_the_same_at_any_thread_count():
    """The phases change where the input lies, not the summation order's determinism."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 24, 29, 31)).astype(np.float32)
    dy = rng.standard_normal((3, 40, 15, 16)).astype(np.float32)
    one = cconv.conv2d_backward_weight(dy, x, (40, 24, 3, 3), stride=2, padding=1,
                                       algo="direct", num_threads=1)
    three = cconv.conv2d_backward_weight(dy, x, (40, 24, 3, 3), stride=2, padding=1,
                                         algo="direct", num_threads=3)
    assert np.array_equal(one, three)


def test_forward_and_padding_modes_keep_the_whole_plane():
    """Only the weight gradient of a zero-padded strided layer splits its input; the
    forward (whose jobs walk taps) and a padding mode (whose maps index the whole plane)
    pack it whole."""
    geom = cconv.plan_conv2d((2, 8, 12, 12), (8, 8, 3, 3), stride=2, padding=1).geometry
    algorithm = DirectConvolution.for_geometry(geom)
    assert algorithm.schedule("forward").info.phases == (1, 1)
    assert algorithm.schedule("backward_weight").info.forward.phases == (2, 2)
    reflect = cconv.plan_conv2d((2, 8, 12, 12), (8, 8, 3, 3), stride=2, padding=1,
                                padding_mode="reflect").geometry
    assert not direct_schedule.phased(reflect)


def test_strided_data_gradient_runs_the_phases_of_the_same_rows_together():
    """The data gradient's jobs (one stride phase each) go block by block and, in a block,
    by the input row of their first pixel, the phases of the same rows together; every
    element of the result is written by exactly one job (so the order changes no sum)."""
    geom = cconv.plan_conv2d((2, 20, 23, 21), (24, 20, 3, 3), stride=2, padding=1).geometry
    p = DirectConvolution.for_geometry(geom).schedule("backward_data", "NCHW")
    fields = list(direct_schedule.JOB_FIELDS)
    jobs, table = p.jobs, p.table
    col = {name: jobs[:, fields.index(name)] for name in fields}
    hw = geom.H * geom.W
    writes = np.zeros(geom.N * geom.C * hw, np.int64)
    keys = []
    for i in range(len(jobs)):
        outs = table[col["outs"][i] + np.arange(col["nrows"][i])]
        cols = np.arange(col["ncols"][i]) * p.info.col_stride
        np.add.at(writes, (col["out"][i] + outs[:, None] + cols[None, :]).ravel(), 1)
        # (image and channel block, input row of the first pixel, phase)
        keys.append((col["out"][i], outs[0] // geom.W, col["red"][i]))
    assert np.all(writes == 1)
    assert keys == sorted(keys, key=lambda k: k[:2])
    # the block's first two input rows (one of each row phase) come first, from all phases
    first = [k for k in keys if k[0] == keys[0][0] and k[1] <= 1]
    assert keys[:len(first)] == first
    assert len(p.info.phases) == 4 and len({k[2] for k in first}) == 4


def test_tiles_ask_ahead_where_measured():
    """The ``ahead`` column follows ``read_ahead``: every forward and data-gradient tile
    with 64-byte vectors, AVX2's strided forward only, never SSE nor the weight gradient."""
    f32 = np.dtype(np.float32)
    steps = direct_schedule.READ_AHEAD_STEPS
    assert direct_schedule.read_ahead(f32, 16, False) == steps     # AVX-512
    assert direct_schedule.read_ahead(np.dtype(np.float64), 8, False) == steps
    assert direct_schedule.read_ahead(f32, 8, True) == steps       # AVX2, strided
    assert direct_schedule.read_ahead(f32, 8, False) == 0
    assert direct_schedule.read_ahead(f32, 4, True) == 0           # SSE
    ahead = direct_schedule.JOB_FIELDS.index("ahead")
    for stride in (1, 2):
        geom = cconv.plan_conv2d((2, 16, 12, 12), (32, 16, 3, 3), stride=stride,
                                 padding=1).geometry
        for vl in (16, 8):
            fwd = direct_schedule.forward(geom, vl, 6)
            bd = direct_schedule.backward_data(geom, vl, 6)
            bw = direct_schedule.backward_weight(geom, vl, 6)
            assert set(fwd.jobs[:, ahead]) == {direct_schedule.read_ahead(f32, vl, stride > 1)}
            assert set(bd.jobs[:, ahead]) == {direct_schedule.read_ahead(f32, vl, False)}
            assert set(bw.jobs[:, ahead]) == {0}
