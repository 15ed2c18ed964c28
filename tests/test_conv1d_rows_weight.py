"""The weight gradient of long 1-D convolutions on the row kernels (``rows.weight``).

The direct algorithm runs the weight gradient of a one-row problem (a conv1d lifted to H = 1)
on ``rows.weight`` when the output row holds at least ``ROW_KERNEL_MIN_TILES`` tiles, the
column stride is 1, the padding is zeros, a group has at least ``ROW_WEIGHT_MIN_CHANNELS``
input channels, and both activations are contiguous NCW arrays of the compute dtype.  The
kernel puts a group's input channels in the vector lanes (a window of the input transposed
per item of ``chunk`` output columns, zero outside the row) and broadcasts the output
gradient; partial sums per piece of the (image, chunk) items are added in a fixed order.

Tested here, against the float64 N-d reference (``support.reference_nd``) within the
rounding bound of ``test_conv1d_rows`` and against PyTorch's autograd when installed: a
hypothesis sweep over groups, channel counts around the lane and register-block widths,
kernel sizes, dilations that make one window for all taps or one per tap, padding forms
(asymmetric, past the kernel extent), batch and dtype; that the kernel ran exactly when the
rule says; the fused ``conv1d_backward``; identical bits on 1-3 threads; the fallbacks; the
kernel's own refusals of inconsistent arguments (nothing written); and that the reported
workspace is what a call takes from the pool.
"""

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cconv
from cconv import _threads, _workspace
from cconv.algorithms import direct
from support.reference_nd import ref_backward_weight

from test_conv1d_rows import (MIN_TILES, ROWS, TILE_WIDTH, assert_within_rounding,
                              long_cases, make_case)

MIN_CHANNELS = direct.ROW_WEIGHT_MIN_CHANNELS


@contextlib.contextmanager
def weight_calls():
    """Record (pieces, chunk, dw, pl, nthreads) of every ``rows.weight`` call in the block."""
    calls = []
    original = ROWS.weight

    def counting(x, dy, partial, dw, pl, chunk, scratch, nthreads):
        calls.append((partial.shape[0], chunk, dw, pl, nthreads))
        return original(x, dy, partial, dw, pl, chunk, scratch, nthreads)

    ROWS.weight = counting
    try:
        yield calls
    finally:
        ROWS.weight = original


def check_weight(case, algo, nthreads=None):
    """conv1d_backward_weight of ``case`` against the reference; returns (result, calls)."""
    kw = case.ref_kwargs
    with weight_calls() as calls:
        dw = cconv.conv1d_backward_weight(case.dy, case.x, case.w.shape, algo=algo,
                                          num_threads=nthreads, **case.kwargs)
    assert dw.dtype == case.dtype and dw.shape == case.w.shape
    terms = case.dy.shape[0] * case.dy.shape[2]
    assert_within_rounding(dw, ref_backward_weight(case.dy, case.x, case.w.shape, **kw),
                           ref_backward_weight(np.abs(case.dy), np.abs(case.x), case.w.shape,
                                               **kw), terms, case.dtype, f"weight {algo}")
    return dw, calls


# -- 1. the sweep -----------------------------------------------------------------------------

# channels per group around the lanes (4 / 8 / 16 float32, half that float64) and the
# register blocks (4 or 6 gradient rows, 3 or 4 vectors of input channels)
CHANNELS = st.one_of(
    st.sampled_from([(1, 8, 1), (1, 8, 6), (1, 15, 7), (1, 16, 13), (1, 17, 5), (2, 9, 4),
                     (3, 12, 2), (1, 33, 12), (1, 64, 7), (1, 65, 3), (2, 24, 11)]),
    st.tuples(st.integers(1, 3), st.integers(MIN_CHANNELS, 40), st.integers(1, 14)))


# up to 7 taps at dilations up to 300: past the smallest chunk (128 columns), so some draws
# take a window per tap; more tiles, so rows span several chunks
WEIGHT_CASES = long_cases(channels=CHANNELS, max_taps=7, dilations=(1, 2, 5, 40, 150, 300),
                          more_tiles=8, bias=False)


@settings(max_examples=60, deadline=None)
@given(WEIGHT_CASES, st.sampled_from(["direct", "auto"]))
def test_long_rows_weight_gradient_matches_reference(case, algo):
    _, calls = check_weight(case, algo)
    assert len(calls) == 1, calls  # the rule holds for every drawn case: auto picks direct
    pieces, chunk, dw, pl, _ = calls[0]
    assert (dw, pl) == (case.dilation, case.pads[0])
    items = case.x.shape[0] * -(-case.dy.shape[2] // chunk)
    assert 1 <= pieces <= min(direct.ROW_WEIGHT_PIECES, items)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_windows_per_tap_and_shared(dtype):
    """Taps further apart than a chunk get a window each, nearer taps share one; rows of
    several chunks, several images and pieces: both right."""
    vl = ROWS.VECTOR_LENGTH[dtype]
    chunk = ROWS.weight_chunk(-(-20 // vl) * vl, dtype)
    tiles = 2 * chunk // TILE_WIDTH[dtype] + MIN_TILES
    for dilation, apart in ((3, False), (chunk // 2 + 1, True)):
        case = make_case(dtype, 1, 20, 9, 3, dilation, (dilation + 5, 2), tiles=tiles,
                         extra=3, bias=False, n=3)
        _, calls = check_weight(case, "auto")
        assert calls[0][1] == chunk and ((3 - 1) * dilation > chunk) == apart
        assert case.dy.shape[2] > 2 * chunk and calls[0][0] > 1


# -- 2. the rule ------------------------------------------------------------------------------

@pytest.mark.parametrize("cg, short, expect", [(MIN_CHANNELS, 0, True),
                                               (MIN_CHANNELS - 1, 0, False),
                                               (MIN_CHANNELS, 1, False)])
def test_rule_channels_and_row_length(cg, short, expect):
    """From ROW_WEIGHT_MIN_CHANNELS input channels per group and MIN_TILES tiles of output
    row: the kernel runs under algo "direct"; below either, the blocked tiles; all right."""
    tw = TILE_WIDTH["float32"]
    case = make_case("float32", 1, cg, 5, 3, 2, "valid", tiles=MIN_TILES, extra=-short,
                     bias=False)
    assert case.dy.shape[2] == MIN_TILES * tw - short
    geom = cconv.plan_conv1d(case.x.shape, case.w.shape, dtype="float32",
                             **case.kwargs).plan_2d.geometry
    assert direct.runs_on_rows(geom, "backward_weight") == expect
    _, calls = check_weight(case, "direct")
    assert len(calls) == int(expect)


def test_fused_backward_uses_both_row_kernels():
    case = make_case("float64", 2, 10, 7, 4, 3, (9, 1), extra=11)
    with weight_calls() as calls:
        dx, dw, db = cconv.conv1d_backward(case.dy, case.x, case.w, **case.kwargs)
    assert len(calls) == 1
    terms = case.dy.shape[0] * case.dy.shape[2]
    kw = case.ref_kwargs
    assert_within_rounding(dw, ref_backward_weight(case.dy, case.x, case.w.shape, **kw),
                           ref_backward_weight(np.abs(case.dy), np.abs(case.x), case.w.shape,
                                               **kw), terms, case.dtype, "dw")
    assert_within_rounding(dx, *case.backward_data_ref(), case.kg * case.s, case.dtype, "dx")
    np.testing.assert_allclose(db, case.dy.sum(axis=(0, 2)), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("variant", ["strided_x", "strided_dy", "nwc", "float16",
                                     "reflect", "stride2"])
def test_fallbacks_match_reference(variant):
    """Operands the kernel does not take (strided views, channels-last memory, a padding
    mode, stride 2) fall back to the blocked tiles; float16 is computed on contiguous
    float32 copies, on the kernel.  The numbers are right either way."""
    case = make_case("float32", 1, 12, 6, 3, 2, (2, 2), extra=5, bias=False)
    x, dy, kw = case.x, case.dy, dict(case.kwargs)
    ref_kw = dict(case.ref_kwargs)
    if variant == "strided_x":
        holder = np.zeros(x.shape[:2] + (2 * x.shape[2],), np.float32)
        holder[..., ::2] = x
        x = holder[..., ::2]
    elif variant == "strided_dy":
        holder = np.zeros(dy.shape[:2] + (3 * dy.shape[2],), np.float32)
        holder[..., 1::3] = dy
        dy = holder[..., 1::3]
    elif variant == "float16":
        x, dy = x.astype(np.float16), dy.astype(np.float16)
    elif variant == "reflect":
        kw["padding_mode"] = ref_kw["mode"] = "reflect"
    elif variant == "stride2":
        kw["stride"] = ref_kw["stride"] = 2
        dy = dy[..., : (x.shape[2] + 4 - 5) // 2 + 1].copy()
    layout = dict(layout="NWC", weight_layout="OIW") if variant == "nwc" else {}
    xa, dya = ((np.ascontiguousarray(np.moveaxis(a, 1, -1)) for a in (x, dy))
               if variant == "nwc" else (x, dy))
    with weight_calls() as calls:
        got = cconv.conv1d_backward_weight(dya, xa, case.w.shape, **kw, **layout)
    ref = ref_backward_weight(dy, x, case.w.shape, **ref_kw)
    bound = ref_backward_weight(np.abs(dy), np.abs(x), case.w.shape, **ref_kw)
    dtype = np.float16 if variant == "float16" else np.float32
    assert_within_rounding(got, ref, bound, dy.shape[0] * dy.shape[2], dtype, variant)
    # float16 operands are converted to contiguous float32 arrays: the kernel runs them
    assert len(calls) == (1 if variant == "float16" else 0), (variant, calls)


def test_wavenet_weight_gradient_matches_torch():
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    rng = np.random.default_rng(11)
    for dtype, channels, length, kernel, dilation in [("float64", 16, 3001, 2, 8),
                                                      ("float32", 32, 4001, 3, 64)]:
        x = rng.standard_normal((2, channels, length)).astype(dtype)
        w = rng.standard_normal((channels, channels, kernel)).astype(dtype)
        pads = ((kernel - 1) * dilation, 0)
        wt = torch.from_numpy(w).requires_grad_()
        yt = tf.conv1d(tf.pad(torch.from_numpy(x), pads), wt, dilation=dilation)
        dy = rng.standard_normal(tuple(yt.shape)).astype(dtype)
        (dwt,) = torch.autograd.grad(yt, wt, torch.from_numpy(dy))
        with weight_calls() as calls:
            got = cconv.conv1d_backward_weight(dy, x, w.shape, padding=pads, dilation=dilation)
        assert len(calls) == 1
        rk = dict(pads=(pads,), dilation=dilation)
        assert_within_rounding(got, dwt.numpy().astype(np.float64),
                               ref_backward_weight(abs(dy), abs(x), w.shape, **rk),
                               2 * 2 * length, dtype, "torch")


# -- 3. threads, refusals, workspace -----------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_thread_counts_give_identical_bits(dtype):
    """The pieces do not depend on the thread count and are added in a fixed order: 1, 2
    and 3 threads give the same bits."""
    # about 4000 samples whatever the tile width: enough work for 3 threads, several pieces
    case = make_case(dtype, 2, 17, 9, 3, 4, (6, 1), tiles=MIN_TILES + 4000 // TILE_WIDTH[dtype],
                     extra=7, n=3, bias=False, seed=4)
    results = []
    for nthreads in (1, 2, 3):
        got, calls = check_weight(case, "auto", nthreads)
        used = 1 if _threads._single_threaded_child else nthreads
        assert [c[4] for c in calls] == [used] and calls[0][0] > 1  # several pieces
        results.append(got)
    for got in results[1:]:
        np.testing.assert_array_equal(got, results[0])


def _kernel_args(dtype=np.float32, n=2, c=10, k=7, width=300, s=3, dw=2, pl=1, pieces=3,
                 threads=2):
    rng = np.random.default_rng(0)
    vl = ROWS.VECTOR_LENGTH[np.dtype(dtype).name]
    cgp = -(-c // vl) * vl
    ow = width + 2 * pl - (s - 1) * dw
    chunk = ROWS.weight_chunk(cgp, np.dtype(dtype).name)
    return dict(x=rng.standard_normal((n, c, 1, width)).astype(dtype),
                dy=rng.standard_normal((n, k, 1, ow)).astype(dtype),
                partial=np.full((pieces, 1, k, s, cgp), 7.0, dtype), dw=dw, pl=pl,
                chunk=chunk, scratch=np.zeros((threads, ROWS.weight_scratch_size(
                    cgp, s, dw, chunk)), dtype), num_threads=threads)


def test_kernel_refuses_inconsistent_arguments_and_writes_nothing():
    args = _kernel_args()
    ROWS.weight(**dict(args, partial=args["partial"].copy()))  # the good call runs
    x, dy, partial, scratch = args["x"], args["dy"], args["partial"], args["scratch"]
    vl = ROWS.VECTOR_LENGTH["float32"]
    bad = [dict(x=np.zeros((2, 10, 2, 300), np.float32)),         # two rows
           dict(dy=np.zeros((3,) + dy.shape[1:], np.float32)),    # batch
           dict(partial=np.full((3, 1, 6, 3, 16), 7.0, np.float32)),   # K != G * Kg
           dict(partial=np.full((3, 7, 1, 3, 16), 7.0, np.float32)),   # C % G
           dict(partial=np.full((3, 1, 7, 3, vl + 1), 7.0, np.float32)),  # not whole vectors
           dict(partial=np.full((0, 1, 7, 3, 16), 7.0, np.float32)),   # no pieces
           dict(scratch=scratch[:, :-1]), dict(scratch=scratch[:1]),
           dict(dw=0), dict(chunk=0), dict(num_threads=0)]
    if 10 > vl:
        bad.append(dict(partial=np.full((3, 1, 7, 3, vl), 7.0, np.float32)))  # Cgp < Cg
    for change in bad:
        call = dict(args, **change)
        call["partial"] = np.array(call["partial"])  # a fresh 7-filled copy
        with pytest.raises(ValueError):
            ROWS.weight(**call)
        assert (call["partial"] == 7.0).all(), f"{sorted(change)}: wrote before refusing"
    assert x.shape[2] == 1 and (partial == 7.0).all()


def test_workspace_is_what_a_call_takes():
    """``workspace_bytes("backward_weight", t)`` equals the bytes the call takes from the
    pool at that thread count (scratch per thread and the pieces' partial sums)."""
    case = make_case("float32", 2, 12, 5, 3, 2, (1, 1), tiles=MIN_TILES + 5, extra=1,
                     bias=False)
    geom = cconv.plan_conv1d(case.x.shape, case.w.shape, dtype="float32",
                             **case.kwargs).plan_2d.geometry
    for nthreads in (1, 3):
        taken = []
        original = _workspace._Scope.empty

        def recording(self, size, dtype):
            taken.append(int(size) * np.dtype(dtype).itemsize)
            return original(self, size, dtype)

        _workspace._Scope.empty = recording
        try:
            with weight_calls() as calls:
                direct.DirectConvolution(geom).backward_weight(
                    case.dy[:, :, None, :], case.x[:, :, None, :], nthreads)
        finally:
            _workspace._Scope.empty = original
        assert len(calls) == 1
        assert direct.DirectConvolution(geom).workspace_bytes("backward_weight",
                                                              nthreads) == sum(taken)
