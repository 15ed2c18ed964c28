"""The channels-last depthwise forward (2-D NHWC and 3-D NDHWC) on inputs anywhere within a
cache line, and its row orders.

Where the AVX-512 row blocks run (3-wide filter, column stride and dilation 1), a row with
enough interior blocks starts its blocks' channel vectors on the input's cache lines: the
last vector of a pixel runs into the next pixel, with the weights and bias rotated to
match, and the rows' first and last blocks unrotated.  The result must not depend on where
the input starts (NumPy puts large arrays 16 bytes past a line), nor on the row order:
3-D rows go in bands through the depth (prefetching the next depth's row where the input is
taken as streamed from memory), 2-D rows in bands of ``ROW_BAND`` (each row asking for the
input rows the next one reads first).  Every other build runs the same tests on its own
kernels."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cconv
from cconv import _simd
from support.checks import assert_close
from support.reference import ref_backward_data, ref_conv2d
from support.reference_nd import ref_conv

LINE = 64


def _at_offset(a, elements):
    """A C-contiguous copy of ``a`` starting ``elements`` items past a 64-byte boundary."""
    item = a.dtype.itemsize
    buf = np.empty(a.size + 2 * LINE // item, a.dtype)
    first = (-buf.ctypes.data % LINE) // item + elements
    view = buf[first:first + a.size].reshape(a.shape)
    view[...] = a
    assert view.ctypes.data % LINE == elements * item
    return view


def _forward(x, w, b, rank, **kw):
    C = x.shape[-1]
    if rank == 2:
        return cconv.conv2d(x, w, b, groups=C, layout="NHWC", weight_layout="HWIO",
                            algo="depthwise", **kw)
    return cconv.conv3d(x, w, b, groups=C, layout="NDHWC", weight_layout="DHWIO", **kw)


def _reference(x, w, b, rank, pads, stride=1):
    """float64 channels-first reference of the channels-last operands, back channels last."""
    C = x.shape[-1]
    xc = np.moveaxis(x.astype(np.float64), -1, 1)
    wc = np.moveaxis(w.astype(np.float64), -1, 0)  # (C, *kernel, 1) -> (C, 1, *kernel)
    wc = np.moveaxis(wc, -1, 1)
    padded = np.pad(xc, ((0, 0), (0, 0)) + tuple(pads))
    if rank == 2:
        y = ref_conv2d(padded, wc, stride=(1, stride), groups=C)
    else:
        y = ref_conv(padded, wc, groups=C)
    y = y + b.astype(np.float64).reshape((1, C) + (1,) * rank)
    return np.moveaxis(y, 1, -1)


# (rank, spatial input size, channels): rows long enough for rotated blocks (56, 30, 23
# columns: 54, 28 and 21 interior pixels, ending on each residue of the 4-pixel blocks)
# and a row just too short (17 columns: 15 interior pixels, 3 blocks)
CASES = [
    (2, (5, 56), 64), (2, (4, 30), 48), (2, (3, 23), 32), (2, (4, 17), 64),
    (2, (3, 21), 80), (3, (3, 4, 30), 32), (3, (4, 3, 23), 64), (3, (2, 2, 56), 16),
]


@pytest.mark.parametrize("rank, size, channels", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_any_input_alignment_gives_the_same_bits(rank, size, channels, dtype):
    rng = np.random.default_rng(channels * 100 + size[-1])
    x = rng.standard_normal((2, *size, channels)).astype(dtype)
    w = rng.standard_normal((3,) * rank + (1, channels)).astype(dtype)
    b = rng.standard_normal(channels).astype(dtype)
    pads = [(1, 1)] * rank
    want = _reference(x, w, b, rank, pads)
    vector = 64 // np.dtype(dtype).itemsize
    results = []
    for offset in range(vector):
        y = _forward(_at_offset(x, offset), w, b, rank, padding=1)
        assert_close(y, want, dtype, what=f"input {offset} items past a line")
        results.append(y)
    for offset, y in enumerate(results[1:], 1):
        assert np.array_equal(y, results[0]), f"input {offset} items past a line"


@pytest.mark.parametrize("rank, size, channels", [CASES[0], CASES[5]])
def test_accumulating_into_out_and_misaligned_output(rank, size, channels):
    """``beta`` != 0 reads the output, so no channel is written twice: the rows keep their
    plain blocks; a result array off a cache line of its own is written the same."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, *size, channels)).astype(np.float32)
    w = rng.standard_normal((3,) * rank + (1, channels)).astype(np.float32)
    b = rng.standard_normal(channels).astype(np.float32)
    want = _reference(x, w, b, rank, [(1, 1)] * rank)
    start = rng.standard_normal(want.shape).astype(np.float32)
    for x_offset, out_offset in [(4, 0), (0, 4), (4, 4), (3, 9)]:
        out = _at_offset(start, out_offset)
        got = _forward(_at_offset(x, x_offset), w, b, rank, padding=1, out=out, alpha=0.5,
                       beta=2.0)
        assert got is out
        assert_close(out, 0.5 * want + 2.0 * start, np.float32, what="alpha / beta")
        out = _at_offset(np.zeros_like(start), out_offset)
        _forward(_at_offset(x, x_offset), w, b, rank, padding=1, out=out)
        assert_close(out, want, np.float32, what="out")


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_row_orders_give_the_same_bits(monkeypatch, threads):
    """3-D rows in bands of any height through the depth, the input taken as streamed (the
    next depth's row prefetched) or cached: the same bits as plain row order, on any thread
    count."""
    rng = np.random.default_rng(threads)
    x = _at_offset(rng.standard_normal((2, 5, 11, 24, 64)).astype(np.float32), 4)
    w = rng.standard_normal((3, 3, 3, 1, 64)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    want = _reference(x, w, b, 3, [(1, 1), (0, 2), (1, 1)])
    module = _simd.depthwise
    got = {}
    for band_bytes in (0, 1 << 16, 1 << 30):
        for streamed_bytes in (0, 1 << 40):
            monkeypatch.setattr(module, "DEPTH_BAND_BYTES", band_bytes)
            monkeypatch.setattr(module, "STREAMED_INPUT_BYTES", streamed_bytes)
            got[band_bytes, streamed_bytes] = _forward(
                x, w, b, 3, padding=((1, 1), (0, 2), (1, 1)), num_threads=threads)
    first = next(iter(got.values()))
    assert_close(first, want, np.float32, what="band rows")
    for key, y in got.items():
        assert np.array_equal(y, first), key


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("stride", [1, 2])
def test_2d_row_bands_give_the_same_bits(monkeypatch, threads, stride):
    """2-D rows in bands of one row, a few (the last band short, bands across images) or
    the whole image: each row, whichever band and thread computes it, is the reference's,
    bit for bit the same as one row a job."""
    rng = np.random.default_rng(10 * threads + stride)
    x = _at_offset(rng.standard_normal((3, 13, 30, 48)).astype(np.float32), 4)
    w = rng.standard_normal((3, 3, 1, 48)).astype(np.float32)
    b = rng.standard_normal(48).astype(np.float32)
    pads = [(1, 2), (1, 1)]
    padded = np.pad(x.astype(np.float64), ((0, 0), (1, 2), (1, 1), (0, 0)))
    want = sum(padded[:, r:r + stride * ((13 + 3 - 3) // stride) + 1:stride,
                      s:s + stride * ((30 + 2 - 3) // stride) + 1:stride]
               * w[r, s, 0].astype(np.float64) for r in range(3) for s in range(3)) + b
    got = {}
    for band in (1, 4, 5, 1 << 20):
        monkeypatch.setattr(_simd.depthwise, "ROW_BAND", band)
        got[band] = _forward(x, w, b, 2, stride=stride, padding=pads, num_threads=threads)
    assert got[1].shape == want.shape
    assert_close(got[1], want, np.float32, what="row bands")
    for band, y in got.items():
        assert np.array_equal(y, got[1]), band


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 2), h=st.integers(1, 6), w=st.integers(1, 40),
       vectors=st.integers(1, 5), extra=st.sampled_from([0, 0, 0, 3]),
       pads=st.lists(st.integers(0, 2), min_size=4, max_size=4),
       offset=st.integers(0, 15), stride=st.sampled_from([1, 2]), seed=st.integers(0, 2**16))
def test_random_rows_match_reference(n, h, w, vectors, extra, pads, offset, stride, seed):
    """Any row width, padding and column stride 1 or 2 (so any split into edge pixels,
    blocks and pairs), any start within a line, channel counts on and off a whole number
    of vectors."""
    channels = 16 * vectors + extra
    # an output: sizes raised to what the padding leaves the 3x3 taps short of (built valid
    # rather than filtered out: too many rejected draws fail Hypothesis's health check)
    h, w = max(h, 3 - pads[0] - pads[1]), max(w, 3 - pads[2] - pads[3])
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, h, w, channels)).astype(np.float32)
    wt = rng.standard_normal((3, 3, 1, channels)).astype(np.float32)
    b = rng.standard_normal(channels).astype(np.float32)
    padding = ((pads[0], pads[1]), (pads[2], pads[3]))
    want = _reference(x, wt, b, 2, list(padding), stride=stride)
    got = _forward(_at_offset(x, offset), wt, b, 2, padding=padding, stride=(1, stride))
    assert_close(got, want, np.float32, what="random rows")
    assert np.array_equal(got, _forward(_at_offset(x, 0), wt, b, 2, padding=padding,
                                        stride=(1, stride)))


@pytest.mark.parametrize("dilation, pads, on_rows", [
    ((1, 1), ((1, 1), (1, 1)), True),
    ((2, 1), ((0, 3), (2, 0)), True),    # asymmetric, dilated rows
    ((1, 2), ((2, 1), (1, 4)), True),    # end padding past the taps: rows write less
    ((1, 1), ((3, 0), (1, 1)), False),   # more begin padding than the taps reach: gather
])
@pytest.mark.parametrize("threads", [1, 2])
def test_2d_data_gradient_at_stride_1_runs_the_forward_rows(monkeypatch, dilation, pads,
                                                            on_rows, threads):
    """The NHWC depthwise data gradient at stride 1 is the forward rows on the flipped
    weight (begin padding ``dilation * (kernel - 1) - begin``): the reference's values with
    out / alpha / beta, and as ``conv_transpose2d`` (its forward, with a bias)."""
    calls = []
    module = _simd.depthwise
    real = module.forward_nhwc
    monkeypatch.setattr(module, "forward_nhwc",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    rng = np.random.default_rng(threads + 10 * dilation[0])
    n, h, w, c = 2, 9, 30, 48
    wt = rng.standard_normal((3, 3, 1, c)).astype(np.float32)
    oh = h + sum(pads[0]) - 2 * dilation[0]
    ow = w + sum(pads[1]) - 2 * dilation[1]
    gy = rng.standard_normal((n, oh, ow, c)).astype(np.float32)
    w_oihw = np.moveaxis(wt.astype(np.float64), -1, 0).transpose(0, 3, 1, 2)
    want = np.moveaxis(ref_backward_data(np.moveaxis(gy, -1, 1), w_oihw, (n, c, h, w),
                                         pads=pads, dilation=dilation, groups=c), 1, -1)
    kw = dict(padding=pads, dilation=dilation, groups=c, layout="NHWC",
              weight_layout="HWIO", algo="depthwise", num_threads=threads)
    got = cconv.conv2d_backward_data(gy, wt, (n, h, w, c), **kw)
    assert len(calls) == int(on_rows)
    assert_close(got, want, np.float32, what="data gradient")
    out = _at_offset(rng.standard_normal(want.shape).astype(np.float32), 3)
    start = out.astype(np.float64)
    assert cconv.conv2d_backward_data(gy, wt, (n, h, w, c), out=out, alpha=0.5, beta=-2.0,
                                      **kw) is out
    assert_close(out, 0.5 * want - 2.0 * start, np.float32, what="out, alpha, beta")
    b = rng.standard_normal(c).astype(np.float32)
    up = cconv.conv_transpose2d(gy, wt, b, output_shape=(n, h, w, c), **kw)
    assert_close(up, want + b, np.float32, what="conv_transpose2d")
    assert len(calls) == 3 * int(on_rows)
