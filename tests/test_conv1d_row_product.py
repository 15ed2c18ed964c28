"""Long 1-D convolutions on the 1x1 product's register tile (``gemm.row_product``).

The direct algorithm runs the forward pass and the (stride-1) data gradient of a one-row
problem (a conv1d lifted to H = 1, see ``direct.runs_on_rows``) as the compiled pointwise
product over panels of output columns packed as the im2col of their taps, when the result
has at least ``direct.ROW_PRODUCT_MIN_ROWS`` rows per group (output channels forward, input
channels for the data gradient) and ``beta == 0``; otherwise the row kernels run
(tests/test_conv1d_rows.py).  The product's panels read zero outside the row (the padding),
its strips get ``alpha * (sum + bias)`` while in cache.

Tested here, against the float64 N-d reference within the rounding bound of a float sum
(``test_conv1d_rows.assert_within_rounding``) and against PyTorch when installed: a
hypothesis sweep of the row harness's long cases (groups, depthwise multipliers, 1-9 taps,
dilations, asymmetric padding and padding past the kernel extent, bias, batch, float32 /
float64) with the product running exactly where the rule says; ``out`` / ``alpha`` /
``beta``; float16 operands; identical bits on 1-3 threads; and the kernel's own edge cases
(an input row shorter than the taps reach, an empty input row: the bias alone) and
refusals.
"""

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings

import cconv
from cconv import _simd
from cconv.algorithms import direct
from support.reference_nd import ref_conv

from test_conv1d_rows import (MIN_TILES, TILE_WIDTH, assert_within_rounding,
                              check_identical_across_threads, check_wavenet_against_torch,
                              long_cases, make_case)

MIN_ROWS = direct.ROW_PRODUCT_MIN_ROWS


@contextlib.contextmanager
def product_calls():
    """Record (rows out per group, taps, tap_step, shift, nthreads) of every
    ``row_product`` call the direct algorithm makes inside the block (it still runs)."""
    calls = []
    original = direct.row_product

    def counting(b, a, groups, out, taps, tap_step, shift, bias, alpha, nthreads):
        calls.append((out.shape[1] // groups, taps, tap_step, shift, nthreads))
        return original(b, a, groups, out, taps, tap_step, shift, bias, alpha, nthreads)

    direct.row_product = counting
    try:
        yield calls
    finally:
        direct.row_product = original


def check_product_passes(case, algo="direct"):
    """Forward, data gradient and conv_transpose1d (the data gradient plus a bias) of
    ``case`` against the reference; the product ran exactly where the rule says."""
    pl, span = case.pads[0], case.span
    with product_calls() as calls:
        y = cconv.conv1d(case.x, case.w, case.b, algo=algo, **case.kwargs)
    assert_within_rounding(y, *case.forward_ref(), case.cg * case.s + 1, case.dtype, "forward")
    assert [c[:4] for c in calls] == ([(case.kg, case.s, case.dilation, pl)]
                                      if case.kg >= MIN_ROWS else [])
    with product_calls() as calls:
        dx = cconv.conv1d_backward_data(case.dy, case.w, case.x.shape, algo=algo,
                                        **case.kwargs)
    assert_within_rounding(dx, *case.backward_data_ref(), case.kg * case.s, case.dtype,
                           "backward_data")
    backward_rule = [(case.cg, case.s, case.dilation, span - pl)] if case.cg >= MIN_ROWS else []
    assert [c[:4] for c in calls] == backward_rule
    with product_calls() as calls:
        t = cconv.conv_transpose1d(case.dy, case.w, case.bt, padding=case.pads,
                                   dilation=case.dilation, groups=case.groups, algo=algo)
    assert_within_rounding(t, *case.transpose_ref(), case.kg * case.s + 1, case.dtype,
                           "transpose")
    assert [c[:4] for c in calls] == backward_rule


@settings(max_examples=60, deadline=None)
@given(long_cases())
def test_long_rows_match_reference(case):
    check_product_passes(case)


@pytest.mark.parametrize("groups, cg, kg, s, dilation, padding", [
    (1, 64, 64, 2, 1, 0),            # WaveNet, unpadded
    (1, 16, 24, 3, 40, (80, 0)),     # causal, dilated
    (2, 8, 13, 5, 2, (0, 11)),       # groups, a partial register tile of rows
    (1, 1, 32, 63, 1, 31),           # a filter bank: 63 reduction rows of one channel
    (1, 9, 30, 4, 7, (38, 0)),       # left padding past the kernel extent
    (4, 8, 8, 1, 1, "valid"),        # pointwise rows
    (4, 1, 8, 1, 1, (0, 1)),         # one tap, the result a column wider than the row
    (2, 3, 8, 1, 1, (0, 5)),
    (1, 20, 9, 9, 40, "same"),
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_corner_cases_match_reference(dtype, groups, cg, kg, s, dilation, padding):
    check_product_passes(make_case(dtype, groups, cg, kg, s, dilation, padding, n=2, extra=13))


def test_auto_takes_the_product():
    """``auto`` picks the direct algorithm for these rows (``_dispatch.ROW_MIN_CHANNELS``),
    so the product runs from the plain call too."""
    check_product_passes(make_case("float32", 1, 16, 16, 3, 4, "same", extra=3), algo="auto")


@pytest.mark.parametrize("alpha, beta", [(2.5, 0.0), (1.0, 0.0), (-0.5, 1.0), (1.0, -2.0)])
def test_out_alpha_beta(alpha, beta):
    """``alpha`` is the product's epilogue; a ``beta`` sends the call to the row kernels
    (the product writes its result without reading ``out``); both right."""
    case = make_case("float64", 1, 12, 10, 3, 5, (4, 6), extra=7, seed=3)
    ref, terms = case.forward_ref()
    start = np.random.default_rng(4).standard_normal(ref.shape)
    out = start.copy() if beta else np.full(ref.shape, np.nan)
    with product_calls() as calls:
        got = cconv.conv1d(case.x, case.w, case.b, out=out, alpha=alpha, beta=beta,
                           algo="direct", **case.kwargs)
    assert got is out
    assert len(calls) == (1 if beta == 0 else 0)
    assert_within_rounding(out, alpha * ref + beta * start, abs(alpha) * terms + abs(beta)
                           * np.abs(start), case.cg * case.s + 2, case.dtype, "out=")
    dref, dterms = case.backward_data_ref()
    dstart = np.random.default_rng(5).standard_normal(dref.shape)
    dout = dstart.copy() if beta else np.full(dref.shape, np.nan)
    with product_calls() as calls:
        cconv.conv1d_backward_data(case.dy, case.w, case.x.shape, out=dout, alpha=alpha,
                                   beta=beta, algo="direct", **case.kwargs)
    assert len(calls) == (1 if beta == 0 else 0)
    assert_within_rounding(dout, alpha * dref + beta * dstart, abs(alpha) * dterms
                           + abs(beta) * np.abs(dstart), case.kg * case.s + 2, case.dtype,
                           "backward_data out=")


def test_float16_operands_run_in_float32():
    case = make_case("float32", 1, 8, 16, 3, 2, "same", extra=9, seed=8)
    x16, w16, b16 = (a.astype(np.float16) for a in (case.x, case.w, case.b))
    with product_calls() as calls:
        y = cconv.conv1d(x16, w16, b16, dilation=2, padding="same")
    assert y.dtype == np.float16 and len(calls) == 1
    pads = (case.pads,)
    x, w, b = (a.astype(np.float64) for a in (x16, w16, b16))
    assert_within_rounding(y, ref_conv(x, w, b, pads=pads, dilation=2),
                           ref_conv(abs(x), abs(w), abs(b), pads=pads, dilation=2), 8 * 3 + 1,
                           np.float16, "float16")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_thread_counts_give_identical_results(dtype):
    """Each output element is one job's sum in a fixed order: 1, 2 and 3 threads give the
    same bits, forward and data gradient."""
    tiles = max(MIN_TILES + 1, 960 // TILE_WIDTH[dtype])
    case = make_case(dtype, 2, 24, 30, 5, 16, (70, 3), tiles=tiles, extra=7, seed=2)
    check_identical_across_threads(case, product_calls, lambda call: call[4])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("channels, length, kernel, dilation", [(64, 3000, 2, 64),
                                                                (32, 4001, 3, 8)])
def test_wavenet_layers_match_torch(dtype, channels, length, kernel, dilation):
    """Causal dilated layers with bias, and their data gradient, against torch's conv1d and
    autograd, on the product."""
    check_wavenet_against_torch(dtype, channels, length, kernel, dilation,
                                kernel * 100 + dilation, product_calls, lambda call: call[3])


# -- the kernel itself ------------------------------------------------------------------------

PRODUCT = {np.float32: _simd.pointwise.product_float, np.float64: _simd.pointwise.product_double}


def run_kernel(x, w, bias, taps, tap_step, shift, out_width, alpha=1.0, nthreads=1):
    """``_pointwise.product_<T>`` with taps on (N, C, W) ``x`` and (K, C, taps) ``w``."""
    dtype = x.dtype.type
    strip = _simd.pointwise.STRIP[x.dtype.name]
    panel = 2 * strip
    k, c = w.shape[0], w.shape[1]
    out = np.full((x.shape[0], k, out_width), np.nan, x.dtype)
    per = (panel + _simd.pointwise.TILE_ROWS) * max(c * taps, strip) + strip
    scratch = np.empty(nthreads * per + strip, x.dtype)
    PRODUCT[dtype](x, np.ascontiguousarray(w).reshape(-1), 1, k, c * taps, 1, out, panel, 14,
                   scratch, nthreads, False, False, True, taps, tap_step, shift, bias, alpha)
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("width, taps, tap_step, shift, out_width", [
    (5, 3, 4, 6, 70),     # the taps reach past both ends of a short row
    (40, 2, 1, -3, 37),   # a negative shift: output pixel 0 reads column 3 on
    (33, 4, 9, 0, 9),     # a result narrower than a strip
    (48, 1, 1, 0, 49),    # one tap, no shift, a result wider than the row
    (40, 1, 1, 0, 23),    # and narrower
])
def test_kernel_reads_zero_outside_the_row(dtype, width, taps, tap_step, shift, out_width):
    rng = np.random.default_rng(width)
    x = rng.standard_normal((2, 3, width)).astype(dtype)
    w = rng.standard_normal((17, 3, taps)).astype(dtype)
    bias = rng.standard_normal(17).astype(dtype)
    got = run_kernel(x, w, bias, taps, tap_step, shift, out_width, alpha=0.5)
    # the reference: columns p + t*tap_step - shift, zero outside [0, width)
    want = np.zeros(got.shape)
    for t in range(taps):
        cols = np.arange(out_width) + t * tap_step - shift
        inside = (cols >= 0) & (cols < width)
        taken = np.zeros((2, 3, out_width))
        taken[:, :, inside] = x[:, :, cols[inside]]
        want += np.einsum("kc,ncp->nkp", w[:, :, t].astype(np.float64), taken)
    want = 0.5 * (want + bias[None, :, None])
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernel_empty_row_gives_the_bias(dtype):
    x = np.zeros((2, 3, 0), dtype)
    w = np.ones((5, 3, 2), dtype)
    bias = np.arange(5, dtype=dtype)
    got = run_kernel(x, w, bias, 2, 1, 4, 6, alpha=-2.0)
    np.testing.assert_array_equal(got, np.broadcast_to(-2.0 * bias[None, :, None], got.shape))
    got = run_kernel(x, w, None, 2, 1, 4, 6)
    np.testing.assert_array_equal(got, 0)


def test_kernel_refuses_inconsistent_arguments():
    x = np.zeros((1, 4, 50), np.float32)
    w = np.zeros((8, 4, 3), np.float32)
    with pytest.raises(ValueError, match="bias must have 8"):
        run_kernel(x, w, np.zeros(7, np.float32), 3, 1, 0, 48)
    with pytest.raises(ValueError, match="tap_step"):
        run_kernel(x, w, None, 3, 0, 0, 48)
    kernel = _simd.pointwise.product_float
    scratch = np.empty(1 << 16, np.float32)
    out = np.zeros((1, 8, 48), np.float32)
    with pytest.raises(ValueError, match="across"):
        kernel(x, w.reshape(-1), 1, 8, 12, 1, out, 32, 14, scratch, 1, False, True, True, 3,
               1, 0)
    with pytest.raises(ValueError, match="shapes"):  # 7 result rows where M is 8
        kernel(x, w.reshape(-1), 1, 8, 12, 1, np.zeros((1, 7, 48), np.float32), 32, 14,
               scratch, 1, False, False, True, 3, 1, 0)
    assert not out.any()  # nothing written by the refused calls



def test_panel_width_follows_the_byte_budget_and_leaves_the_bits_alone(monkeypatch):
    """Wider panels for shorter reductions (``gemm.ROW_PANEL_BYTES``), whole strips within
    ``ROW_PANEL_PIXELS``, never wider than the row; any width gives the same bits (each
    element is one tile's sum over the same reduction order)."""
    from cconv.algorithms import gemm
    strip = _simd.pointwise.STRIP["float32"]
    lo, hi = gemm.ROW_PANEL_PIXELS
    f32 = np.dtype(np.float32)
    assert gemm._row_panel(128, 16384, f32) == min(hi, gemm.ROW_PANEL_BYTES // 512 // strip
                                                     * strip)
    assert gemm._row_panel(4096, 16384, f32) == lo
    assert gemm._row_panel(8, 16384, f32) == hi
    assert gemm._row_panel(128, 70, f32) == -(-70 // strip) * strip
    for reduction in (1, 100, 333, 5000):
        panel = gemm._row_panel(reduction, 9999, np.dtype(np.float64))
        assert panel % _simd.pointwise.STRIP["float64"] == 0 and lo <= panel <= hi
    case = make_case("float32", 1, 16, 20, 3, 5, "same", tiles=12, extra=3)
    results = []
    for budget in (0, 64 << 10, 1 << 30):
        monkeypatch.setattr(gemm, "ROW_PANEL_BYTES", budget)
        with product_calls() as calls:
            results.append(cconv.conv1d(case.x, case.w, case.b, **case.kwargs))
        assert len(calls) == 1
    for y in results[1:]:
        np.testing.assert_array_equal(y, results[0])
    assert_within_rounding(results[0], *case.forward_ref(), case.cg * case.s + 1, case.dtype,
                           "forward")
