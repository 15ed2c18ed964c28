"""Long 1-D convolutions on the direct algorithm's row-vector kernels (``cconv._simd.rows``).

The direct algorithm runs forward and backward-data of a one-row problem (a conv1d lifted to
H = 1) on the row kernels when the output row (forward) / input row (backward-data) holds at
least ``ROW_KERNEL_MIN_TILES`` tiles of ``rows.TILE_WIDTH[dtype]`` columns, at column stride 1
with zero padding, on contiguous NCW arrays of the compute dtype; anything else falls back to
the blocked tiles.  The other 1-D tests use rows of at most 20 samples and never get there.

Tested here, against the float64 N-d reference (``support.reference_nd``), plain NumPy for the
non-finite weight, and PyTorch when installed:

* a hypothesis sweep of rows of several tiles (partial last tile) over batch, groups
  (depthwise with a multiplier, grouped), channel counts around the kernels' 4-channel
  register block, kernel sizes 1-9, dilations up to 40, asymmetric / "same" / "valid"
  padding, left padding past the kernel extent (negative equivalent padding of the data
  gradient), bias, float32 / float64: conv1d, conv1d_backward_data and conv_transpose1d
  (stride 1: the data gradient plus a bias), with algo "direct" and "auto";
* that those calls really ran the row kernels (a counting wrapper around the module the
  direct algorithm calls), and that ``runs_on_rows`` and the row-length threshold agree;
* out / alpha / beta, the fallbacks (NWC, strided views, float16, padding modes, stride 2),
  a non-finite weight in backward-data, plans with prepared weights, and thread counts
  (bitwise equal results).

Results are checked elementwise against the rounding-error bound of a floating-point sum:
``|got - ref| <= 2 (n + 8) u * sum|terms|``, ``n`` the reduction length, ``u`` the unit
roundoff, ``sum|terms|`` the same convolution of the operands' absolute values.  A wrong tap,
offset, channel or tile edge moves an element by O(sum|terms|), far past that bound.
"""

import contextlib
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cconv
from cconv import _dispatch, _threads
from cconv.algorithms import direct
from support.reference_nd import (ref_backward_data, ref_backward_weight, ref_conv,
                                  ref_conv_transpose, resolve_padding, to_channels_last)

ROWS = direct.row_kernels            # the kernel module direct.py calls (this SIMD level)
TILE_WIDTH = ROWS.TILE_WIDTH         # read at test time: 96 / 48 with AVX-512, 24 / 12 AVX2
MIN_TILES = direct.ROW_KERNEL_MIN_TILES
MIN_CHANNELS = _dispatch.ROW_MIN_CHANNELS
UNIT = {np.dtype(np.float32): 2.0 ** -24, np.dtype(np.float64): 2.0 ** -53}


# the row kernels take every one-row pass here (see conftest.one_row_kernels_only)
pytestmark = pytest.mark.usefixtures("one_row_kernels_only")


# -- helpers ----------------------------------------------------------------------------------

@dataclass
class Call:
    """One call of ``rows.correlate``: what it was asked to compute."""

    out_width: int
    dw: int
    pl: int
    alpha: float
    beta: float
    nthreads: int


@contextlib.contextmanager
def row_calls():
    """Record every row-kernel call made inside the block (the kernel still runs)."""
    calls = []
    original = ROWS.correlate

    def counting(x, w, y, bias, rows, dw, pl, alpha, beta, scratch, nthreads):
        calls.append(Call(y.shape[3], dw, pl, alpha, beta, nthreads))
        return original(x, w, y, bias, rows, dw, pl, alpha, beta, scratch, nthreads)

    ROWS.correlate = counting
    try:
        yield calls
    finally:
        ROWS.correlate = original


def assert_within_rounding(got, ref, bound, terms, dtype, what=""):
    """``|got - ref| <= 2 (terms + 8) u bound`` elementwise (module docstring); for a float16
    result (computed in float32) also its final rounding, ``2**-11 |ref|``."""
    got64 = np.asarray(got, np.float64)
    assert got64.shape == ref.shape, f"{what}: shape {got64.shape} != {ref.shape}"
    assert np.isfinite(got64).all(), f"{what}: non-finite values"
    compute = np.dtype(np.float32) if np.dtype(dtype) == np.float16 else np.dtype(dtype)
    tol = 2 * (terms + 8) * UNIT[compute] * bound
    if np.dtype(dtype) == np.float16:
        tol = tol + 2.0 ** -11 * np.abs(ref) + 2.0 ** -24  # (+ float16's subnormal step)
    err = np.abs(got64 - ref)
    if not (err <= tol).all():
        i = np.unravel_index(np.argmax(err - tol), ref.shape)
        raise AssertionError(f"{what}: error {err[i]:.3e} > bound {tol[i]:.3e} at {i}: got "
                             f"{got64[i]!r}, reference {ref[i]!r} ({(err > tol).sum()} bad)")


def absolute(a):
    return None if a is None else np.abs(np.asarray(a, np.float64))


@dataclass
class Case:
    """A long 1-D problem: its arrays (compute dtype, contiguous NCW) and keywords."""

    dtype: np.dtype
    groups: int
    cg: int
    kg: int
    s: int
    dilation: int
    padding: object          # as passed to cconv
    pads: tuple              # resolved (left, right)
    shapes: tuple            # (x, w, dy) shapes and the seed, for a readable repr
    x: np.ndarray = field(repr=False)             # (N, C, W)
    w: np.ndarray = field(repr=False)             # (K, Cg, S)
    b: Optional[np.ndarray] = field(repr=False)   # (K,) or None
    bt: Optional[np.ndarray] = field(repr=False)  # (C,) or None: conv_transpose1d's bias
    dy: np.ndarray = field(repr=False)            # (N, K, OW)

    @property
    def span(self):
        return (self.s - 1) * self.dilation

    @property
    def kwargs(self):
        return dict(padding=self.padding, dilation=self.dilation, groups=self.groups)

    @property
    def ref_kwargs(self):
        return dict(pads=(self.pads,), dilation=self.dilation, groups=self.groups)

    def forward_ref(self):
        return (ref_conv(self.x, self.w, self.b, **self.ref_kwargs),
                ref_conv(absolute(self.x), absolute(self.w), absolute(self.b),
                         **self.ref_kwargs))

    def backward_data_ref(self):
        return (ref_backward_data(self.dy, self.w, self.x.shape, **self.ref_kwargs),
                ref_backward_data(absolute(self.dy), absolute(self.w), self.x.shape,
                                  **self.ref_kwargs))

    def transpose_ref(self):
        return (ref_conv_transpose(self.dy, self.w, self.bt, **self.ref_kwargs),
                ref_conv_transpose(absolute(self.dy), absolute(self.w), absolute(self.bt),
                                   **self.ref_kwargs))


def make_case(dtype, groups, cg, kg, s, dilation, padding, n=2, tiles=MIN_TILES, extra=1,
              bias=True, seed=0):
    """A case whose output row and input row both hold at least ``tiles`` tiles: the output
    row is ``tiles * TILE_WIDTH + extra`` long, or longer where the padding exceeds the
    kernel extent (then the input row is that long)."""
    dtype = np.dtype(dtype)
    span = (s - 1) * dilation
    row = tiles * TILE_WIDTH[dtype.name] + extra
    pads = resolve_padding(padding, (row,), (s,), 1, dilation)[0]  # stride 1: any width
    width = row + max(0, span - pads[0] - pads[1])
    out_width = width + pads[0] + pads[1] - span
    rng = np.random.default_rng(seed)

    def rand(*shape):
        return rng.standard_normal(shape).astype(dtype)

    c, k = groups * cg, groups * kg
    shapes = ((n, c, width), (k, cg, s), (n, k, out_width), f"bias={bias}", f"seed={seed}")
    return Case(dtype, groups, cg, kg, s, dilation, padding, pads, shapes, rand(n, c, width),
                rand(k, cg, s), rand(k) if bias else None, rand(c) if bias else None,
                rand(n, k, out_width))


def lifted_geometry(case):
    """The ConvGeometry (H = 1) cconv runs for the case (through a 1-D plan)."""
    plan = cconv.plan_conv1d(case.x.shape, case.w.shape, dtype=case.dtype, **case.kwargs)
    return plan.plan_2d.geometry


def check_passes(case, algos=("direct", "auto")):
    """Forward, backward-data and conv_transpose1d of ``case`` against the reference, and
    the row kernels ran where they must: always for algo "direct" (the shapes are long
    enough), and for "auto" when a group has >= ROW_MIN_CHANNELS channels on either side."""
    geom = lifted_geometry(case)
    assert direct.runs_on_rows(geom, "forward") and direct.runs_on_rows(geom, "backward_data")
    # the weight gradient's rule adds a channel count (tests/test_conv1d_rows_weight.py)
    assert direct.runs_on_rows(geom, "backward_weight") == (
        case.cg >= direct.ROW_WEIGHT_MIN_CHANNELS and case.dy.shape[2] >= MIN_TILES * TILE_WIDTH[
            case.dtype.name])
    fwd, bwd, tr = case.forward_ref(), case.backward_data_ref(), case.transpose_ref()
    pl = case.pads[0]
    for algo in algos:
        must = algo == "direct" or max(case.cg, case.kg) >= MIN_CHANNELS
        with row_calls() as calls:
            y = cconv.conv1d(case.x, case.w, case.b, algo=algo, **case.kwargs)
        assert y.dtype == case.dtype
        assert_within_rounding(y, *fwd, case.cg * case.s + 1, case.dtype, f"forward {algo}")
        if must:
            assert [(c.out_width, c.pl, c.dw) for c in calls] == [
                (y.shape[2], pl, case.dilation)], calls

        # backward-data: the flipped filter with the equivalent left padding span - pl
        # (negative when the padding reaches past the kernel extent)
        with row_calls() as calls:
            dx = cconv.conv1d_backward_data(case.dy, case.w, case.x.shape, algo=algo,
                                            **case.kwargs)
        assert dx.dtype == case.dtype
        assert_within_rounding(dx, *bwd, case.kg * case.s, case.dtype, f"backward_data {algo}")
        if must:
            assert [(c.out_width, c.pl) for c in calls] == [
                (case.x.shape[2], case.span - pl)], calls

        # conv_transpose1d at stride 1 is that data gradient plus a bias
        with row_calls() as calls:
            t = cconv.conv_transpose1d(case.dy, case.w, case.bt, padding=case.pads,
                                       dilation=case.dilation, groups=case.groups, algo=algo)
        assert_within_rounding(t, *tr, case.kg * case.s + 1, case.dtype, f"transpose {algo}")
        if must:
            assert [(c.out_width, c.pl) for c in calls] == [
                (case.x.shape[2], case.span - pl)], calls


# -- 1. the sweep -----------------------------------------------------------------------------

# (groups, C/groups, K/groups): depthwise with a multiplier, grouped, K/groups not a multiple
# of the 4-channel register block, and free draws.
CHANNELS = st.one_of(
    st.sampled_from([(4, 1, 2), (4, 1, 4), (4, 1, 8), (2, 8, 3), (2, 8, 8), (1, 1, 8),
                     (1, 3, 5), (1, 7, 13), (1, 20, 9), (2, 5, 7), (3, 11, 1), (1, 24, 11),
                     (1, 10, 22)]),
    st.tuples(st.integers(1, 3), st.integers(1, 20), st.integers(1, 16)))


def draw_padding(draw, span):
    """A padding for a filter extent ``span``: "same", "valid", asymmetric, or a left
    padding past the extent (the data gradient's equivalent padding is then negative)."""
    form = draw(st.sampled_from(["same", "valid", "asymmetric", "past_extent"]))
    if form in ("same", "valid"):
        return form
    if form == "asymmetric":
        left = draw(st.integers(0, span + 3))
        return (left, draw(st.integers(0, span + 3).filter(lambda v: v != left)))
    return (span + draw(st.integers(1, 40)), draw(st.integers(0, span)))


@st.composite
def long_cases(draw, channels=CHANNELS, max_taps=9, dilations=(1, 2, 3, 5, 16, 40),
               more_tiles=2, bias=True):
    """Long-row cases: (groups, C/groups, K/groups) from ``channels``, 1 to ``max_taps``
    taps at one of ``dilations``, any padding form, ``MIN_TILES`` to ``MIN_TILES +
    more_tiles`` tiles plus a partial one, a drawn bias where ``bias``."""
    dtype = draw(st.sampled_from(["float32", "float64"]))
    groups, cg, kg = draw(channels)
    s = draw(st.integers(1, max_taps))
    dilation = 1 if s == 1 else draw(st.sampled_from(dilations))
    padding = draw_padding(draw, (s - 1) * dilation)
    tiles = draw(st.integers(MIN_TILES, MIN_TILES + more_tiles))
    extra = draw(st.integers(0, TILE_WIDTH[dtype] - 1))  # 0: the last tile full
    return make_case(dtype, groups, cg, kg, s, dilation, padding, n=draw(st.integers(1, 3)),
                     tiles=tiles, extra=extra, bias=draw(st.booleans()) if bias else False,
                     seed=draw(st.integers(0, 2 ** 32 - 1)))


@settings(max_examples=80, deadline=None)
@given(long_cases())
def test_long_rows_match_reference(case):
    check_passes(case)


def _chunked(dtype):
    """A case whose reduction (C/groups forward, K/groups backward) spans at least three of
    the kernels' reduction chunks (``rows.reduction_chunk``)."""
    s, dilation = 9, 40
    chunk = ROWS.reduction_chunk(10 ** 6, 1, s, dilation, dtype)
    return make_case(dtype, 1, 2 * chunk + 3, 2 * chunk + 1, s, dilation, (7, 300), n=1,
                     extra=5)


CORNERS = {
    # depthwise with a multiplier, padding past the extent on the left
    "depthwise_x4": lambda: make_case("float32", 4, 1, 4, 7, 3, (30, 2), extra=17),
    "depthwise_x2_f64": lambda: make_case("float64", 4, 1, 2, 3, 40, "same", n=1),
    "grouped_16_k13": lambda: make_case("float64", 2, 8, 13, 5, 2, (0, 11), n=3, extra=0),
    "k5_past_extent": lambda: make_case("float32", 1, 3, 5, 4, 7, (21 + 17, 0), extra=95),
    "k9_same_d40": lambda: make_case("float32", 1, 20, 9, 9, 40, "same", extra=33),
    "pointwise_valid": lambda: make_case("float64", 1, 9, 7, 1, 1, "valid", extra=47),
    "pointwise_padded": lambda: make_case("float32", 3, 2, 3, 1, 1, (3, 0), n=1),
    "chunked_f32": lambda: _chunked("float32"),
    "chunked_f64": lambda: _chunked("float64"),
}


@pytest.mark.parametrize("name", sorted(CORNERS))
def test_corner_cases_match_reference(name):
    case = CORNERS[name]()
    if name.startswith("chunked"):  # the case is what it claims: several chunks
        for channels in (case.cg, case.kg):  # forward's reduction, backward-data's
            chunk = ROWS.reduction_chunk(channels, 1, case.s, case.dilation, case.dtype.name)
            assert -(-channels // chunk) >= 3, (channels, chunk)
    check_passes(case)


# -- 2. the row path runs exactly from ROW_KERNEL_MIN_TILES tiles ------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("short", [0, 1])
def test_row_threshold(dtype, short):
    """A row of MIN_TILES tiles runs the row kernels, one sample less the blocked tiles; both
    right.  (So the sweep's lengths, all >= MIN_TILES tiles, are on the row path.)"""
    tw, s, d = TILE_WIDTH[dtype], 3, 2
    n_out = MIN_TILES * tw - short
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 8, n_out + (s - 1) * d)).astype(dtype)  # "valid": OW = n_out
    w = rng.standard_normal((8, 8, s)).astype(dtype)
    dy = rng.standard_normal((2, 8, n_out)).astype(dtype)
    dx_shape = (2, 8, n_out)  # backward-data of "same": input row n_out long
    kw = dict(dilation=d, algo="direct")
    with row_calls() as calls:
        y = cconv.conv1d(x, w, **kw)
    assert len(calls) == 1 - short
    bound = ref_conv(np.abs(x), np.abs(w), dilation=d)
    assert_within_rounding(y, ref_conv(x, w, dilation=d), bound, 8 * s, dtype, "forward")
    pads = ((d, d),)
    with row_calls() as calls:
        dx = cconv.conv1d_backward_data(dy, w, dx_shape, padding="same", **kw)
    assert len(calls) == 1 - short
    assert_within_rounding(dx, ref_backward_data(dy, w, dx_shape, pads=pads, dilation=d),
                           ref_backward_data(np.abs(dy), np.abs(w), dx_shape, pads=pads,
                                             dilation=d), 8 * s, dtype, "backward_data")
    plan = cconv.plan_conv1d(x.shape, w.shape, dilation=d, dtype=dtype)
    assert direct.runs_on_rows(plan.plan_2d.geometry, "forward") == (short == 0)


def test_few_channel_weight_gradient_does_not_use_rows():
    """conv1d_backward on a long row with fewer input channels per group than the weight
    gradient's row kernel needs: the data gradient runs on the rows, the weight gradient on
    the blocked tiles; both right."""
    case = make_case("float64", 2, 6, 9, 3, 4, (8, 1), extra=11)
    assert case.cg < direct.ROW_WEIGHT_MIN_CHANNELS
    with row_calls() as calls:
        dx, dw, db = cconv.conv1d_backward(case.dy, case.x, case.w, **case.kwargs)
    assert len(calls) == 1 and calls[0].out_width == case.x.shape[2]
    assert_within_rounding(dx, *case.backward_data_ref(), case.kg * case.s, case.dtype, "dx")
    kw = case.ref_kwargs
    terms = case.dy.shape[0] * case.dy.shape[2]
    assert_within_rounding(dw, ref_backward_weight(case.dy, case.x, case.w.shape, **kw),
                           ref_backward_weight(np.abs(case.dy), np.abs(case.x), case.w.shape,
                                               **kw), terms, case.dtype, "dw")
    np.testing.assert_allclose(db, case.dy.sum(axis=(0, 2)), rtol=1e-12, atol=1e-12)


# -- 3. out / alpha / beta --------------------------------------------------------------------

@pytest.mark.parametrize("pss", ["forward", "backward_data"])
@pytest.mark.parametrize("beta", [0.0, 1.0, 0.5])
def test_out_alpha_beta(pss, beta):
    """``out = alpha * result + beta * out``: a contiguous ``out`` on the row kernels (beta
    reaches the kernel; beta == 0 must not read the NaN-filled out), a strided one through the
    blocked path; the same numbers."""
    case = make_case("float32", 2, 8, 5, 5, 3, (4, 9), extra=41)
    alpha = -1.5
    if pss == "forward":
        ref, bound = case.forward_ref()
        terms = case.cg * case.s + 1

        def call(**kw):
            return cconv.conv1d(case.x, case.w, case.b, algo="direct", **case.kwargs, **kw)
    else:
        ref, bound = case.backward_data_ref()
        terms = case.kg * case.s

        def call(**kw):
            return cconv.conv1d_backward_data(case.dy, case.w, case.x.shape, algo="direct",
                                              **case.kwargs, **kw)
    shape = ref.shape
    start = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    results = {}
    for form in ("contiguous", "strided"):
        if form == "strided":
            holder = np.zeros(shape[:-1] + (2 * shape[-1],), np.float32)
            out = holder[..., ::2]
        else:
            out = np.empty(shape, np.float32)
        out[...] = start if beta != 0 else np.nan
        with row_calls() as calls:
            got = call(out=out, alpha=alpha, beta=beta)
        assert got is out
        if form == "contiguous":  # the kernel's epilogue did the scaling
            assert [(c.alpha, c.beta) for c in calls] == [(alpha, beta)]
        else:
            assert calls == []
            assert not holder[..., 1::2].any()  # nothing written between the elements
        expected = alpha * ref + beta * start.astype(np.float64)
        assert_within_rounding(out, expected, abs(alpha) * bound + abs(beta * start), terms + 2,
                               np.float32, f"{pss} {form} out")
        results[form] = out.astype(np.float64)
    assert_within_rounding(results["strided"], results["contiguous"], 2 * abs(alpha) * bound
                           + 2 * abs(beta * start), terms + 2, np.float32, "strided vs rows")


# -- 4. fallbacks -----------------------------------------------------------------------------

FALLBACKS = ["NWC", "strided_view", "float16", "reflect", "circular", "stride2"]


@pytest.mark.parametrize("pss", ["forward", "backward_data"])
@pytest.mark.parametrize("variant", FALLBACKS)
def test_fallbacks_match_reference_and_row_path(variant, pss):
    """Inputs the row kernels do not take (NWC, a strided view, stride 2, a padding mode
    the direct forward builds while packing) go through the blocked tiles; float16 is
    computed on a float32 copy.  Each against the reference, and where the problem is the
    same, against the row path's result."""
    case = make_case("float32", 1, 6, 9, 4, 5, (7, 2), extra=29)
    x, w, dy = case.x, case.w, case.dy
    kw = dict(case.kwargs, algo="direct")
    if pss == "forward":
        ref, bound = case.forward_ref()
        with row_calls() as calls:
            row_path = cconv.conv1d(x, w, case.b, **kw)
        terms = case.cg * case.s + 1
    else:
        ref, bound = case.backward_data_ref()
        with row_calls() as calls:
            row_path = cconv.conv1d_backward_data(dy, w, x.shape, **kw)
        terms = case.kg * case.s
    assert len(calls) == 1
    rows_expected = 0
    dtype = np.float32

    def run(xa, dya, **extra):
        if pss == "forward":
            return cconv.conv1d(xa, w, case.b, **dict(kw, **extra))
        return cconv.conv1d_backward_data(dya, w, xa.shape, **dict(kw, **extra))

    if variant == "NWC":
        x_nwc, dy_nwc = to_channels_last(x), to_channels_last(dy)
        with row_calls() as calls:
            got = run(x_nwc, dy_nwc, layout="NWC")
        got = np.moveaxis(got, -1, 1)
    elif variant == "strided_view":
        x_long = np.zeros(x.shape[:2] + (2 * x.shape[2],), np.float32)
        dy_long = np.zeros(dy.shape[:2] + (2 * dy.shape[2],), np.float32)
        x_long[..., ::2], dy_long[..., ::2] = x, dy
        with row_calls() as calls:
            got = run(x_long[..., ::2], dy_long[..., ::2])
    elif variant == "float16":
        x16, w16, dy16, b16 = (a.astype(np.float16) for a in (x, w, dy, case.b))
        with row_calls() as calls:
            if pss == "forward":
                got = cconv.conv1d(x16, w16, b16, **kw)
            else:
                got = cconv.conv1d_backward_data(dy16, w16, x.shape, **kw)
        assert got.dtype == np.float16
        rows_expected = 1  # computed on a contiguous float32 copy: the row kernels run
        as64 = [a.astype(np.float64) for a in (x16, w16, dy16, b16)]
        x64, w64, dy64, b64 = as64
        if pss == "forward":
            ref = ref_conv(x64, w64, b64, **case.ref_kwargs)
            bound = ref_conv(abs(x64), abs(w64), abs(b64), **case.ref_kwargs)
        else:
            ref = ref_backward_data(dy64, w64, x.shape, **case.ref_kwargs)
            bound = ref_backward_data(abs(dy64), abs(w64), x.shape, **case.ref_kwargs)
        # exactly the float32 computation on the float16 values, rounded
        f32 = [a.astype(np.float32) for a in (x16, w16, dy16, b16)]
        if pss == "forward":
            same = cconv.conv1d(f32[0], f32[1], f32[3], **kw)
        else:
            same = cconv.conv1d_backward_data(f32[2], f32[1], x.shape, **kw)
        np.testing.assert_array_equal(got, same.astype(np.float16))
        dtype = np.float16
    elif variant in ("reflect", "circular"):
        mode = variant
        with row_calls() as calls:
            got = run(x, dy, padding_mode=mode)
        rows_expected = None  # the data gradient may run the rows on the padded row
        if pss == "forward":
            ref = ref_conv(x, w, case.b, mode=mode, **case.ref_kwargs)
            bound = ref_conv(abs(x), abs(w), abs(case.b), mode=mode, **case.ref_kwargs)
        else:
            ref = ref_backward_data(dy, w, x.shape, mode=mode, **case.ref_kwargs)
            bound = ref_backward_data(abs(dy), abs(w), x.shape, mode=mode, **case.ref_kwargs)
            terms += 4  # the fold adds the padding's gradient onto the pixels it copies
    else:  # stride 2
        rk = dict(case.ref_kwargs, stride=2)
        if pss == "forward":
            with row_calls() as calls:
                got = cconv.conv1d(x, w, case.b, stride=2, **kw)
            ref = ref_conv(x, w, case.b, **rk)
            bound = ref_conv(abs(x), abs(w), abs(case.b), **rk)
        else:
            dy2 = np.ascontiguousarray(dy[..., : (dy.shape[2] + 1) // 2])
            with row_calls() as calls:
                got = cconv.conv1d_backward_data(dy2, w, x.shape, stride=2, **kw)
            ref = ref_backward_data(dy2, w, x.shape, **rk)
            bound = ref_backward_data(abs(dy2), abs(w), x.shape, **rk)
    if rows_expected is not None:
        assert len(calls) == rows_expected, (variant, calls)
    assert_within_rounding(got, ref, bound, terms, dtype, f"{variant} {pss}")
    if variant in ("NWC", "strided_view"):  # the same problem: the row path's numbers
        assert_within_rounding(got, row_path.astype(np.float64), 2 * bound, terms, dtype,
                               f"{variant} vs rows")


# -- 5. backward-data with a non-finite weight ------------------------------------------------

def exact_backward_data(dy, w, width, pads, dilation, groups):
    """dx by the definition, in float64: for every weight w[k, c, s] and every output o
    that exists, dx[c_global, o + s*d - pl] += dy[k, o] * w[k, c, s] when that input exists.
    Only existing terms are summed, so 0 * Inf never arises."""
    dy, w = dy.astype(np.float64), w.astype(np.float64)
    n, k_all, out_w = dy.shape
    _, cg, s_all = w.shape
    kg = k_all // groups
    dx = np.zeros((n, cg * groups, width))
    with np.errstate(invalid="ignore", over="ignore"):
        for k in range(k_all):
            for c in range(cg):
                channel = (k // kg) * cg + c
                for s in range(s_all):
                    offset = s * dilation - pads[0]
                    o = np.arange(out_w)
                    i = o + offset
                    keep = (i >= 0) & (i < width)
                    dx[:, channel, i[keep]] += dy[:, k, o[keep]] * w[k, c, s]
    return dx


@pytest.mark.parametrize("dtype, value, tap, padding", [
    ("float64", np.inf, 0, (0, 0)),        # inputs at the row's end no output of tap 0 reaches
    ("float64", -np.inf, 2, (16, 0)),      # causal
    ("float64", np.nan, 0, (16 + 9, 3)),   # padding past the extent
    ("float32", np.inf, 2, (5, 20)),
    ("float32", np.nan, 1, "same"),
])
def test_backward_data_nonfinite_weight(dtype, value, tap, padding):
    """A NaN / Inf weight on a long row: the result is the definition's (only existing terms;
    a zero-filled window would put 0 * Inf = NaN where no output of the tap reaches), with
    algo "direct" and "auto", and PyTorch's (float64) where installed."""
    s, d, groups = 3, 8, 2
    case = make_case(dtype, groups, 4, 8, s, d, padding, extra=13, seed=11)
    w = case.w.copy()
    w[3, 1, tap] = value
    width = case.x.shape[2]
    expected = exact_backward_data(case.dy, w, width, case.pads, d, groups)
    bound = exact_backward_data(np.abs(case.dy), np.abs(np.where(np.isfinite(w), w, 0)), width,
                                case.pads, d, groups)
    finite = np.isfinite(expected)
    assert (~finite).any() and finite.any()  # the weight reaches some inputs, not all
    results = {}
    for algo in ("direct", "auto"):
        got = cconv.conv1d_backward_data(case.dy, w, case.x.shape, algo=algo, **case.kwargs)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expected), err_msg=algo)
        np.testing.assert_array_equal(got[~finite], expected[~finite], err_msg=algo)
        assert_within_rounding(got[finite], expected[finite], bound[finite], 8 * s, dtype, algo)
        results[algo] = got
    torch = pytest.importorskip("torch") if dtype == "float64" else None
    if torch is not None:
        x_t = torch.zeros(case.x.shape, dtype=torch.float64, requires_grad=True)
        y_t = torch.nn.functional.conv1d(torch.nn.functional.pad(x_t, case.pads),
                                         torch.from_numpy(w), dilation=d, groups=groups)
        (dx_t,) = torch.autograd.grad(y_t, x_t, torch.from_numpy(case.dy))
        dx_t = dx_t.numpy()
        np.testing.assert_array_equal(np.isnan(dx_t), np.isnan(expected))
        np.testing.assert_array_equal(dx_t[~finite], expected[~finite])
        assert_within_rounding(results["direct"][finite], dx_t[finite], bound[finite], 8 * s,
                               dtype, "vs torch")


# -- 6. PyTorch on WaveNet-like layers --------------------------------------------------------

@pytest.mark.parametrize("dtype, channels, length, kernel, dilation", [
    ("float64", 16, 3001, 2, 1),
    ("float64", 32, 2000, 2, 8),
    ("float64", 16, 5000, 3, 64),
    ("float64", 32, 4097, 3, 8),
    ("float32", 32, 4001, 2, 64),
])
def test_wavenet_layers_match_torch(dtype, channels, length, kernel, dilation):
    """Causal dilated layers (left padding (kernel-1)*dilation): forward with bias and the
    data gradient against torch's conv1d and its autograd, on the row kernels."""
    # both passes on the rows ("auto")
    check_wavenet_against_torch(dtype, channels, length, kernel, dilation,
                                kernel * 1000 + dilation, row_calls, lambda call: call.pl)


def check_wavenet_against_torch(dtype, channels, length, kernel, dilation, seed, spy, pl_of):
    """A causal dilated layer (left padding (kernel-1)*dilation), 2 signals: forward with
    bias and the data gradient against torch's conv1d and its autograd; each pass ran once
    on the kernel ``spy`` records (``pl_of(call)`` its left padding: the layer's forward,
    0 for the data gradient's flipped filter)."""
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, channels, length)).astype(dtype)
    w = rng.standard_normal((channels, channels, kernel)).astype(dtype)
    b = rng.standard_normal(channels).astype(dtype)
    pads = ((kernel - 1) * dilation, 0)
    xt = torch.from_numpy(x).requires_grad_()
    yt = tf.conv1d(tf.pad(xt, pads), torch.from_numpy(w), torch.from_numpy(b), dilation=dilation)
    dy = rng.standard_normal(tuple(yt.shape)).astype(dtype)
    (dxt,) = torch.autograd.grad(yt, xt, torch.from_numpy(dy))
    terms = channels * kernel + 1
    with spy() as calls:
        y = cconv.conv1d(x, w, b, padding=pads, dilation=dilation)
        dx = cconv.conv1d_backward_data(dy, w, x.shape, padding=pads, dilation=dilation)
    assert [pl_of(call) for call in calls] == [pads[0], 0]
    rk = dict(pads=(pads,), dilation=dilation)
    assert_within_rounding(y, yt.detach().numpy().astype(np.float64),
                           ref_conv(abs(x), abs(w), abs(b), **rk), terms, dtype, "forward")
    assert_within_rounding(dx, dxt.numpy().astype(np.float64),
                           ref_backward_data(abs(dy), abs(w), x.shape, **rk), terms, dtype,
                           "backward_data")


# -- 7. plans and prepared weights ------------------------------------------------------------

def lift(a):
    """(N, C, W) -> (N, C, 1, W): the 2-D plan's NCHW view."""
    return a[:, :, None, :]


def test_plan_prepared_weight_rows_and_fallbacks():
    """A 1-D plan (Conv1dPlan has no prepare_weight: its 2-D plan ``plan_2d`` does, on the
    lifted (K, C/groups, 1, S) weight).  The weight prepared for the row kernels gives the
    unprepared numbers bitwise on the row path, and correct numbers when the call falls
    back to the blocked tiles (which then pack their own weight): an NCW view of
    channels-last memory, a strided view, a strided ``out``, float64 operands on a float32
    plan."""
    case = make_case("float32", 2, 8, 7, 3, 16, (40, 5), extra=57)
    x, w, b = case.x, case.w, case.b
    plan = cconv.plan_conv1d(x.shape, w.shape, dtype="float32", **case.kwargs)
    assert plan.algorithm == "direct" and not hasattr(plan, "prepare_weight")
    ref, bound = case.forward_ref()
    terms = case.cg * case.s + 1
    with row_calls() as calls:
        plain = plan.forward(x, w, b)
    assert len(calls) == 1
    assert_within_rounding(plain, ref, bound, terms, np.float32, "plan forward")
    p2 = plan.plan_2d
    prepared = p2.prepare_weight(w[:, :, None, :])
    assert prepared.algorithm == "direct"
    with row_calls() as calls:
        y = p2.forward(x[:, :, None, :], prepared, b)[:, :, 0]
    assert len(calls) == 1
    np.testing.assert_array_equal(y, plain)

    channels_last = np.moveaxis(to_channels_last(x), -1, 1)  # NCW values, NWC memory
    x_long = np.zeros(x.shape[:2] + (2 * x.shape[2],), np.float32)
    x_long[..., 1::2] = x
    holder = np.zeros(y.shape[:2] + (1, 3 * y.shape[2]), np.float32)
    for what, xa, out in [("channels-last memory", channels_last, None),
                          ("strided view", x_long[..., 1::2], None),
                          ("strided out", x, holder[..., ::3])]:
        with row_calls() as calls:
            got = p2.forward(lift(xa), prepared, b, out=out)
        assert calls == [], what
        assert_within_rounding(got[:, :, 0], ref, bound, terms, np.float32, what)
    # float64 operands on the float32 plan: computed in float64, the float32 packing unused
    with row_calls() as calls:
        got = p2.forward(lift(x.astype(np.float64)), prepared, b.astype(np.float64))
    assert got.dtype == np.float64 and len(calls) == 1
    assert_within_rounding(got[:, :, 0], ref, bound, terms, np.float64, "float64 operands")
    # the data gradient through the 1-D plan (rows) and through the prepared weight
    dref, dbound = case.backward_data_ref()
    with row_calls() as calls:
        dx = plan.backward_data(case.dy, w)
        dx2 = p2.backward_data(lift(case.dy), prepared)[:, :, 0]
    assert len(calls) == 2
    assert_within_rounding(dx, dref, dbound, case.kg * case.s, np.float32, "plan backward")
    np.testing.assert_array_equal(dx2, dx)


def test_plan_nwc_with_prepared_weight():
    """An NWC plan's prepared weight is packed for the row kernels (the geometry is a long
    row) but every NWC call falls back to the blocked tiles: the numbers are still right."""
    case = make_case("float64", 1, 9, 10, 5, 3, "same", extra=3)
    x_nwc = to_channels_last(case.x)
    plan = cconv.plan_conv1d(x_nwc.shape, case.w.shape, dtype="float64", layout="NWC",
                             **case.kwargs)
    prepared = plan.plan_2d.prepare_weight(case.w[:, :, None, :])
    ref, bound = case.forward_ref()
    with row_calls() as calls:
        got = plan.plan_2d.forward(x_nwc[:, None], prepared, case.b)[:, 0]
        plain = plan.forward(x_nwc, case.w, case.b)
    assert calls == []
    terms = case.cg * case.s + 1
    assert_within_rounding(np.moveaxis(got, -1, 1), ref, bound, terms, np.float64, "prepared")
    assert_within_rounding(np.moveaxis(plain, -1, 1), ref, bound, terms, np.float64, "plain")


# -- 8. threads -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_thread_counts_give_identical_results(dtype):
    """Each output element is summed by one thread in a fixed order: 1, 2 and 3 threads give
    the same bits (forward and backward-data, chunked reduction, groups, partial blocks)."""
    # rows of >= 480 samples whatever the tile width: enough work that 3 threads are used
    tiles = max(MIN_TILES + 1, 480 // TILE_WIDTH[dtype])
    case = make_case(dtype, 2, 24, 13, 5, 16, (70, 3), tiles=tiles, extra=7, seed=2)
    check_identical_across_threads(case, row_calls, lambda call: call.nthreads)


def check_identical_across_threads(case, spy, threads_of):
    """conv1d and its data gradient of ``case`` on 1, 2 and 3 threads: each pass ran once
    per call on the kernel ``spy`` records (``threads_of(call)`` its thread count), with the
    same bits on every count, and right."""
    results = []
    for nthreads in (1, 2, 3):
        with spy() as calls:
            y = cconv.conv1d(case.x, case.w, case.b, num_threads=nthreads, **case.kwargs)
            dx = cconv.conv1d_backward_data(case.dy, case.w, case.x.shape,
                                            num_threads=nthreads, **case.kwargs)
        # not cut for small work (a process forked after an OpenMP team runs one thread)
        used = 1 if _threads._single_threaded_child else nthreads
        assert [threads_of(call) for call in calls] == [used, used]
        results.append((y, dx))
    for y, dx in results[1:]:
        np.testing.assert_array_equal(y, results[0][0])
        np.testing.assert_array_equal(dx, results[0][1])
    assert_within_rounding(results[0][0], *case.forward_ref(), case.cg * case.s + 1,
                           case.dtype, "forward")
    assert_within_rounding(results[0][1], *case.backward_data_ref(), case.kg * case.s,
                           case.dtype, "backward_data")
