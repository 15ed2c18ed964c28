"""The channel-blocked NCHW depthwise kernels (``cconv/_kernels/_blocked.pyx.tp``): every
pass against the float64 reference on random shapes (channel counts around whole vectors,
planes smaller and larger than a vector, strides, dilations, multipliers, every padding
mode where the pass takes it), the same bits on any thread count, which path ``auto``
takes, and the kernels' refusal of tables that would read or write outside."""

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cconv
from cconv.algorithms import depthwise_blocked as blocked
from cconv.algorithms.depthwise import DepthwiseConvolution
from support.checks import assert_close
from support.reference import (NUMPY_MODE, fold_reference, mode_limit_ok, np_pad,
                               ref_backward_data, ref_backward_weight, ref_conv2d)

MODES = sorted(NUMPY_MODE)


def _output(h, w, r, s, stride, dilation, pads, mode):
    """(H, W, padding, OH, OW) of a drawn case, which must have an output and a padding its
    mode can make (other cases are refused elsewhere): the drawn sizes are raised to the
    smallest that do (built valid rather than filtered out: too many rejected draws fail
    Hypothesis's health check).  Reflect padding must be smaller than the size, circular
    at most the size."""
    pt, pb, pl, pr = pads
    padding = ((pt, pb), (pl, pr))
    edge = {"reflect": 1, "circular": 0}.get(mode)

    def fit(size, k, d, lo, hi):
        size = max(size, (k - 1) * d + 1 - lo - hi)
        return size if edge is None else max(size, max(lo, hi) + edge)

    h, w = fit(h, r, dilation[0], pt, pb), fit(w, s, dilation[1], pl, pr)
    oh = (h + pt + pb - (r - 1) * dilation[0] - 1) // stride[0] + 1
    ow = (w + pl + pr - (s - 1) * dilation[1] - 1) // stride[1] + 1
    assert oh >= 1 and ow >= 1 and mode_limit_ok(mode, padding, (h, w))
    return h, w, padding, oh, ow


class _Spy:
    """Counts the calls of the blocked kernels (and still runs them)."""

    def __init__(self, patch):
        self.calls = {"correlate": 0, "weight": 0, "weight_few": 0, "forward_few": 0}
        for name in self.calls:
            kernel = getattr(blocked.kernels, name)
            patch.setattr(blocked.kernels, name, self._counted(name, kernel))

    def _counted(self, name, kernel):
        def run(*args, **kwargs):
            self.calls[name] += 1
            return kernel(*args, **kwargs)
        return run


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 3), c=st.sampled_from([1, 3, 7, 8, 9, 16, 17, 33]),
       mult=st.integers(1, 3), h=st.integers(1, 12), w=st.integers(1, 12),
       r=st.integers(1, 5), s=st.integers(1, 5), sh=st.integers(1, 3), sw=st.integers(1, 3),
       dh=st.integers(1, 2), dw=st.integers(1, 2),
       pads=st.lists(st.integers(0, 3), min_size=4, max_size=4),
       mode=st.sampled_from(MODES),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**16))
def test_random_shapes_match_reference(n, c, mult, h, w, r, s, sh, sw, dh, dw, pads, mode,
                                       dtype, seed):
    h, w, padding, oh, ow = _output(h, w, r, s, (sh, sw), (dh, dw), pads, mode)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    wt = rng.standard_normal((c * mult, 1, r, s)).astype(dtype)
    gy = rng.standard_normal((n, c * mult, oh, ow)).astype(dtype)
    bias = rng.standard_normal(c * mult).astype(dtype)
    value = 0.75 if mode == "constant" else 0.0
    kw = dict(stride=(sh, sw), dilation=(dh, dw), padding=padding, groups=c,
              padding_mode=mode, padding_value=value, algo="depthwise")
    ref_kw = dict(stride=(sh, sw), dilation=(dh, dw), groups=c)
    xp = np_pad(x.astype(np.float64), padding, mode, value)
    y_ref = ref_conv2d(xp, wt.astype(np.float64), bias.astype(np.float64), **ref_kw)
    dw_ref = ref_backward_weight(gy.astype(np.float64), xp, wt.shape, **ref_kw)
    # a mode's data gradient: the padded input's, each padding pixel's folded back
    dx_ref = fold_reference(ref_backward_data(gy.astype(np.float64), wt.astype(np.float64),
                                              xp.shape, **ref_kw), (h, w), padding, mode)
    results = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(blocked, "MAX_PADDED_PIXELS", 1 << 40)
        spy = _Spy(patch)
        for threads in (1, 3):
            y = cconv.conv2d(x, wt, bias, num_threads=threads, **kw)
            gw = cconv.conv2d_backward_weight(gy, x, wt.shape, num_threads=threads, **kw)
            results.append((y, gw))
            assert_close(y, y_ref, dtype, what=f"forward, {threads} threads")
            assert_close(gw, dw_ref, dtype, what=f"backward_weight, {threads} threads")
            dx = cconv.conv2d_backward_data(gy, wt, x.shape, num_threads=threads, **kw)
            assert_close(dx, dx_ref, dtype, what=f"backward_data, {threads} threads")
            results[-1] += (dx,)
    for first, other in zip(results[0], results[1]):
        assert np.array_equal(first, other)  # any thread count: the same bits
    # (a multiplier's data gradient sums planes: the row kernels' job; a one-channel
    # image's strided filter bank goes to the few-channel forward when its output
    # channels fill a vector)
    from cconv._geometry import make_geometry
    geom = make_geometry(x.shape, wt.shape, stride=(sh, sw), dilation=(dh, dw),
                         padding=padding, groups=c, dtype=dtype)
    forward_here = not blocked.few_channel_forward(geom)
    assert spy.calls["correlate"] == 2 * forward_here + 2 * (mult == 1)
    assert spy.calls["forward_few"] == 2 * (not forward_here)
    assert spy.calls["weight"] == 2


@pytest.mark.parametrize("beta", [0.0, -2.0])
def test_epilogue_and_non_contiguous_output(beta):
    # alpha / beta / bias on both passes that store, into a strided view of a bigger array
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 19, 7, 6)).astype(np.float32)
    wt = rng.standard_normal((19, 1, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(19).astype(np.float32)
    kw = dict(stride=2, padding=1, groups=19, algo="depthwise")
    y_ref = ref_conv2d(x.astype(np.float64), wt.astype(np.float64), bias.astype(np.float64),
                       stride=2, pads=((1, 1), (1, 1)), groups=19)
    gy = rng.standard_normal(y_ref.shape).astype(np.float32)
    dx_ref = ref_backward_data(gy.astype(np.float64), wt.astype(np.float64), x.shape,
                               stride=2, pads=((1, 1), (1, 1)), groups=19)
    for out_shape, ref, run in [
            (y_ref.shape, y_ref, lambda out: cconv.conv2d(x, wt, bias, out=out, alpha=0.5,
                                                          beta=beta, **kw)),
            (x.shape, dx_ref, lambda out: cconv.conv2d_backward_data(
                gy, wt, x.shape, out=out, alpha=0.5, beta=beta, **kw))]:
        big = rng.standard_normal(out_shape[:3] + (2 * out_shape[3],)).astype(np.float32)
        start = big[..., ::2].copy()
        run(big[..., ::2])
        assert_close(big[..., ::2], 0.5 * ref + beta * start, np.float32)


def test_auto_takes_the_blocked_path_on_small_planes_only():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((32, 1, 3, 3)).astype(np.float32)
    with pytest.MonkeyPatch.context() as patch:
        spy = _Spy(patch)
        small = rng.standard_normal((2, 32, 14, 14)).astype(np.float32)
        cconv.conv2d(small, w, padding=1, groups=32, algo="depthwise")
        assert spy.calls["correlate"] == 1
        large = rng.standard_normal((1, 32, 40, 40)).astype(np.float32)  # 42^2 > 32^2
        cconv.conv2d(large, w, padding=1, groups=32, algo="depthwise")
        assert spy.calls["correlate"] == 1
        nhwc = np.ascontiguousarray(small.transpose(0, 2, 3, 1))  # channels-last memory
        cconv.conv2d(nhwc, w, padding=1, groups=32, layout="NHWC", algo="depthwise")
        assert spy.calls["correlate"] == 1


def test_which_passes_take_the_blocked_path():
    # the rule of depthwise_blocked.applies on MobileNetV2's layers (see its table)
    from cconv._geometry import make_geometry

    def takes(c, hw, stride, op, dtype=np.float32, **kw):
        geom = make_geometry((8, c, hw, hw), (c, 1, 3, 3), stride=stride, padding=1,
                             groups=c, dtype=dtype, **kw)
        return blocked.applies(geom, op)

    for op in ("forward", "backward_data", "backward_weight"):
        assert takes(576, 14, 2, op) and takes(960, 7, 1, op)
        assert not takes(144, 56, 1, op) or op == "backward_weight"
    assert takes(192, 28, 1, "forward") and not takes(192, 28, 1, "backward_data")
    assert takes(192, 28, 2, "backward_data") and not takes(144, 56, 2, "backward_data")
    assert takes(96, 112, 2, "forward")  # 114^2 + 56^2 pixel vectors fit 1 MiB
    assert not takes(32, 112, 1, "backward_weight")  # 1.6 MiB of AVX-512 buffers
    wide = blocked.vector_length(make_geometry((1, 16, 8, 8), (16, 1, 3, 3), groups=16))
    assert takes(144, 56, 1, "backward_weight") == (wide * 4 == 64)
    # a mode's data gradient folds in the kernel; a multiplier's sums planes: row kernels
    assert takes(96, 14, 1, "backward_data", padding_mode="reflect")
    assert takes(96, 14, 1, "forward", padding_mode="reflect")
    geom = make_geometry((2, 8, 9, 9), (16, 1, 3, 3), padding=1, groups=8)
    assert blocked.applies(geom, "forward") and not blocked.applies(geom, "backward_data")
    few = make_geometry((2, 6, 9, 9), (6, 2, 3, 3), padding=1, groups=3)
    assert not any(blocked.applies(few, op) for op in ("forward", "backward_weight"))


def _forward_tables(x, wt, pads=1):
    """A valid forward call's arguments (3x3, stride 1, zero padding ``pads``)."""
    from cconv._geometry import make_geometry
    geom = make_geometry(x.shape, wt.shape, padding=pads, groups=x.shape[1], dtype=x.dtype)
    lay = blocked.BlockedLayout(geom, DepthwiseConvolution(geom)._padding)
    y = np.zeros((x.shape[0], x.shape[1], geom.OH, geom.OW), x.dtype)
    args = dict(x=x, wt=lay.weights(wt), y=y, bias=np.zeros(0, x.dtype), row_src=lay.row_src,
                col_src=lay.col_src, pt=pads, pl=pads, value=0.0, mult=1,
                phases=lay.phases.copy(), off=lay.off.copy(), widx=lay.widx.copy(),
                alpha=1.0, beta=0.0, scratch=np.zeros((1, lay.scratch), x.dtype),
                num_threads=1)
    return args


def test_kernels_refuse_tables_that_read_or_write_outside():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 20, 5, 6)).astype(np.float32)
    wt = rng.standard_normal((20, 1, 3, 3)).astype(np.float32)
    good = _forward_tables(x, wt)
    blocked.kernels.correlate(**good)  # the layout's own tables pass
    assert_close(good["y"], ref_conv2d(x.astype(np.float64), wt.astype(np.float64),
                                       pads=((1, 1), (1, 1)), groups=20), np.float32)
    vl = blocked.kernels.VECTOR_LENGTH["float32"]
    bad = []
    off = good["off"].copy()
    off[-1] += vl  # the last tap one pixel further: past the buffer's end
    bad.append(dict(off=off))
    off = good["off"].copy()
    off[0] = -vl
    bad.append(dict(off=off))
    off = good["off"].copy()
    off[1] += 1  # not a whole pixel vector
    bad.append(dict(off=off))
    phases = good["phases"].copy()
    phases[0, 3] += 1  # one output row more than the plane has
    bad.append(dict(phases=phases))
    phases = good["phases"].copy()
    phases[0, 8] += 1  # a tap past the table
    bad.append(dict(phases=phases))
    phases = good["phases"].copy()
    phases[0, 9] = 2  # neither single taps nor triples
    bad.append(dict(phases=phases))
    assert good["phases"][0, 9] == 1  # 3x3 at stride 1: the taps go as triples ...
    off = good["off"].copy()
    off[[0, 1]] = off[[1, 0]]  # ... so a triple of taps that are not neighbours is refused
    bad.append(dict(off=off))
    widx = good["widx"].copy()
    widx[4] = 9  # a weight row past the 9 taps
    bad.append(dict(widx=widx))
    row_src = good["row_src"].copy()
    row_src[0] = 5  # a row past the plane
    bad.append(dict(row_src=row_src))
    col_src = good["col_src"].copy()
    col_src[2] = 0  # an image column that is not where the map says
    bad.append(dict(col_src=col_src))
    bad.append(dict(scratch=np.zeros((1, good["scratch"].shape[1] - 1), np.float32)))
    bad.append(dict(wt=np.zeros((9, 16), np.float32)))  # not the channels rounded up
    bad.append(dict(mult=2))
    for change in bad:
        args = dict(good, y=np.full_like(good["y"], 7.0), **change)
        with pytest.raises(ValueError):
            blocked.kernels.correlate(**args)
        assert (args["y"] == 7.0).all(), f"{sorted(change)}: wrote before refusing"


def test_weight_kernel_refuses_taps_outside_the_buffer():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 9, 6, 5)).astype(np.float64)
    wt = rng.standard_normal((9, 1, 3, 3)).astype(np.float64)
    good = _forward_tables(x, wt)
    gy = rng.standard_normal(good["y"].shape)
    kpad = good["wt"].shape[1]
    partial = np.full((2, 9, kpad), 7.0)
    args = dict(dy=gy, x=x, partial=partial, row_src=good["row_src"], col_src=good["col_src"],
                pt=1, pl=1, value=0.0, mult=1, sh=1, sw=1, off=good["off"],
                scratch=good["scratch"], num_threads=1)
    blocked.kernels.weight(**args)
    want = ref_backward_weight(gy, x, wt.shape, pads=((1, 1), (1, 1)), groups=9)
    assert_close(partial.sum(axis=0)[:, :9].T.reshape(9, 1, 3, 3), want, np.float64)
    # stride 2 for a stride-1 gradient: rows past the buffer; taps off the pixel vectors
    for change in (dict(sh=2), dict(off=good["off"] + 1)):
        bad = dict(args, **change, partial=np.full((2, 9, kpad), 7.0))
        with pytest.raises(ValueError):
            blocked.kernels.weight(**bad)
        assert (bad["partial"] == 7.0).all()


@contextlib.contextmanager
def _few_channel_path(band_bytes):
    """The few-channel kernels with bands of ``band_bytes``, spied on (one-channel banks
    kept off the depthwise channel-blocked path)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(blocked, "FEW_BAND_BYTES", band_bytes)
        patch.setattr(blocked, "MAX_PADDED_PIXELS", 0)
        yield _Spy(patch)


# a filter bank over a one- to four-channel image, output channels around whole vectors
FEW_CHANNEL_CASES = dict(
    n=st.integers(1, 3), c=st.integers(1, 4), k=st.sampled_from([4, 8, 16, 17, 33, 40]),
    h=st.integers(1, 20), w=st.integers(1, 20), r=st.integers(1, 5), s=st.integers(1, 5),
    sh=st.integers(1, 3), sw=st.integers(1, 3), dh=st.integers(1, 2), dw=st.integers(1, 2),
    pads=st.lists(st.integers(0, 3), min_size=4, max_size=4), mode=st.sampled_from(MODES),
    band_bytes=st.sampled_from([1, 700, 3000, 1 << 22]),
    dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**16))


@settings(max_examples=50, deadline=None)
@given(**FEW_CHANNEL_CASES)
def test_few_channel_weight_gradient_matches_reference(n, c, k, h, w, r, s, sh, sw, dh, dw,
                                                       pads, mode, band_bytes, dtype, seed):
    # a filter bank over a one- to four-channel image: output channels in the lanes, bands
    # of output rows (one row, a few, the whole plane), every padding mode
    h, w, padding, oh, ow = _output(h, w, r, s, (sh, sw), (dh, dw), pads, mode)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    gy = rng.standard_normal((n, k, oh, ow)).astype(dtype)
    value = -0.5 if mode == "constant" else 0.0
    kw = dict(stride=(sh, sw), dilation=(dh, dw), padding=padding, padding_mode=mode,
              padding_value=value, algo="depthwise")
    want = ref_backward_weight(gy.astype(np.float64), np_pad(x.astype(np.float64), padding,
                                                              mode, value),
                               (k, c, r, s), stride=(sh, sw), dilation=(dh, dw))
    results = []
    with _few_channel_path(band_bytes) as spy:
        for threads in (1, 3):
            grad = cconv.conv2d_backward_weight(gy, x, (k, c, r, s), num_threads=threads, **kw)
            assert_close(grad, want, dtype, what=f"{threads} threads")
            results.append(grad)
    assert np.array_equal(results[0], results[1])  # any thread count: the same bits
    from cconv._geometry import make_geometry
    geom = make_geometry(x.shape, (k, c, r, s), stride=(sh, sw), dilation=(dh, dw),
                         padding=padding, dtype=dtype)
    takes = k >= blocked.vector_length(geom)
    assert blocked.few_channel_weights(geom) == takes
    assert spy.calls["weight_few"] == (2 if takes else 0)


def test_few_channel_weight_kernel_refuses_reads_outside_its_band():
    from cconv._geometry import make_geometry
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 9, 11)).astype(np.float32)
    geom = make_geometry(x.shape, (16, 3, 3, 3), padding=1)
    algo = DepthwiseConvolution(geom)
    few = blocked.FewChannelWeights(geom, algo._padding)
    gy = rng.standard_normal((2, 16, geom.OH, geom.OW)).astype(np.float32)
    shape = (2, few.nbands, 27, few.kpad)
    args = dict(dy=gy, x=x, partial=np.zeros(shape, np.float32), row_src=few.row_src,
                col_src=few.col_src, pl=few.pl, value=few.value, sh=1, sw=1, off=few.off,
                in_rows=few.in_rows, band=few.band,
                scratch=np.zeros((1, few.scratch), np.float32), num_threads=1)
    blocked.kernels.weight_few(**args)  # the layout's own tables pass
    total = args["partial"].sum(axis=(0, 1))[:, :16].T.reshape(16, 3, 3, 3)
    assert_close(total, ref_backward_weight(gy.astype(np.float64), x.astype(np.float64),
                                            (16, 3, 3, 3), pads=((1, 1), (1, 1))), np.float32)
    off = few.off.copy()
    off[-1] += 1  # the last tap one column further: past its padded row
    row_src = few.row_src.copy()
    row_src[3] = 9  # a row past the image
    col_src = few.col_src.copy()
    col_src[0] = 11  # a column past the image
    for change in (dict(off=off), dict(row_src=row_src), dict(col_src=col_src),
                   dict(in_rows=2), dict(sh=2), dict(row_src=few.row_src[:-1]),
                   dict(scratch=np.zeros((1, few.scratch - 1), np.float32)),
                   dict(partial=np.zeros((2, few.nbands + 1, 27, few.kpad), np.float32))):
        bad = dict(args, **change)
        bad["partial"] = np.full(bad["partial"].shape, 7.0, np.float32)
        with pytest.raises(ValueError):
            blocked.kernels.weight_few(**bad)
        assert (bad["partial"] == 7.0).all(), f"{sorted(change)}: wrote before refusing"


@settings(max_examples=50, deadline=None)
@given(**FEW_CHANNEL_CASES)
def test_few_channel_forward_matches_reference(n, c, k, h, w, r, s, sh, sw, dh, dw, pads,
                                               mode, band_bytes, dtype, seed):
    # a strided filter bank over a one- to four-channel image: output channels in the
    # lanes, two vectors of them a job (an odd count leaves one), bands of output rows,
    # every padding mode, bias and the epilogue
    h, w, padding, oh, ow = _output(h, w, r, s, (sh, sw), (dh, dw), pads, mode)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    wt = rng.standard_normal((k, c, r, s)).astype(dtype)
    bias = rng.standard_normal(k).astype(dtype)
    value = 1.5 if mode == "constant" else 0.0
    kw = dict(stride=(sh, sw), dilation=(dh, dw), padding=padding, padding_mode=mode,
              padding_value=value, algo="depthwise")
    want = ref_conv2d(np_pad(x.astype(np.float64), padding, mode, value),
                      wt.astype(np.float64), bias.astype(np.float64), stride=(sh, sw),
                      dilation=(dh, dw))
    results = []
    with _few_channel_path(band_bytes) as spy:
        for threads in (1, 3):
            y = cconv.conv2d(x, wt, bias, num_threads=threads, **kw)
            assert_close(y, want, dtype, what=f"{threads} threads")
            results.append(y)
        start = rng.standard_normal(want.shape).astype(dtype)
        out = start.copy()
        cconv.conv2d(x, wt, bias, out=out, alpha=0.5, beta=-1.0, **kw)
        assert_close(out, 0.5 * want - start, dtype, what="alpha / beta")
    assert np.array_equal(results[0], results[1])  # any thread count: the same bits
    from cconv._geometry import make_geometry
    geom = make_geometry(x.shape, wt.shape, stride=(sh, sw), dilation=(dh, dw),
                         padding=padding, dtype=dtype)
    takes = k >= blocked.vector_length(geom) and geom.stride != (1, 1)
    assert blocked.few_channel_forward(geom) == takes
    assert spy.calls["forward_few"] == (3 if takes else 0)


def test_few_channel_forward_kernel_refuses_reads_outside_its_band():
    from cconv._geometry import make_geometry
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 17, 15)).astype(np.float32)
    geom = make_geometry(x.shape, (16, 3, 3, 3), stride=2, padding=1)
    fwd = blocked.FewChannelForward(geom, DepthwiseConvolution(geom)._padding)
    wt = rng.standard_normal((16, 3, 3, 3)).astype(np.float32)
    packed = np.zeros((27, fwd.kpad), np.float32)
    packed[:, :16] = wt.reshape(16, 27).T
    y = np.zeros((2, 16, geom.OH, geom.OW), np.float32)
    args = dict(x=x, wt=packed, y=y, bias=np.zeros(0, np.float32), row_src=fwd.row_src,
                col_src=fwd.col_src, pl=fwd.pl, value=fwd.value, sh=2, sw=2, off=fwd.off,
                in_rows=fwd.in_rows, band=fwd.band, alpha=1.0, beta=0.0,
                scratch=np.zeros((1, fwd.scratch), np.float32), num_threads=1)
    blocked.kernels.forward_few(**args)  # the layout's own tables pass
    assert_close(y, ref_conv2d(x.astype(np.float64), wt.astype(np.float64), stride=2,
                               pads=((1, 1), (1, 1))), np.float32)
    off = fwd.off.copy()
    off[2] += 1  # a tap one column further: past its padded row
    big = fwd.off.copy()
    big[-1] += 10**6  # past the last channel's rows
    row_src = fwd.row_src.copy()
    row_src[0] = 17
    for change in (dict(off=off), dict(off=big), dict(row_src=row_src), dict(in_rows=2),
                   dict(sh=3), dict(band=fwd.band + 1),
                   dict(scratch=np.zeros((1, fwd.scratch - 1), np.float32)),
                   dict(wt=packed[:26]), dict(bias=np.zeros(3, np.float32))):
        bad = dict(args, **change)
        bad["y"] = np.full(y.shape, 7.0, np.float32)
        with pytest.raises(ValueError):
            blocked.kernels.forward_few(**bad)
        assert (bad["y"] == 7.0).all(), f"{sorted(change)}: wrote before refusing"


def test_workspace_counts_the_lane_kernels_buffers():
    # what a call of each lane kernel allocates: per-thread scratch, regrouped weights,
    # partial sums; the row kernels' estimate would miss the partial sums
    from cconv._geometry import make_geometry
    rgb = make_geometry((8, 3, 64, 64), (32, 3, 3, 3), padding=1)
    stem = make_geometry((2, 3, 32, 32), (32, 3, 7, 7), stride=2, padding=3)
    small = make_geometry((4, 32, 14, 14), (32, 1, 3, 3), padding=1, groups=32)
    for geom in (rgb, stem, small):
        algo = DepthwiseConvolution(geom)
        item = geom.dtype.itemsize
        if blocked.applies(geom, "backward_weight"):
            lay = blocked.BlockedLayout(geom, DepthwiseConvolution(geom)._padding)
            want = 3 * lay.scratch * item + geom.N * geom.R * geom.S * lay.kpad * item
        else:
            few = blocked.FewChannelWeights(geom, algo._padding)
            want = (3 * few.scratch * item
                    + geom.N * few.nbands * geom.C * geom.R * geom.S * few.kpad * item)
        assert algo.workspace_bytes("backward_weight", 3) == want
    fwd = blocked.FewChannelForward(stem, DepthwiseConvolution(stem)._padding)
    assert DepthwiseConvolution(stem).workspace_bytes("forward", 2) == (
        2 * fwd.scratch * 4 + 3 * 49 * fwd.kpad * 4)
