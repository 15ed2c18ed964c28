"""``cconv._kernels._layout`` (one build for every SIMD level) against NumPy constructions.

pack_input: the blocked, zero-padded ``[N][G][blocks][height][width][block]`` layout for NCHW,
NHWC, strided (stride phases of a row among them), negative-stride and cropped inputs, groups,
depthwise multipliers, block sizes of every SIMD level; its non-finite count.
unpack_output: blocked buffers back into any-strided results with bias, alpha and beta,
multiplier sums straddling blocks.
pack_weight: forward and backward-data (swapped) weight blocks, tap subsets, non-finite count.
"""

import numpy as np
import pytest

from cconv._kernels import _layout

pytestmark = pytest.mark.kernels

NTHREADS = (1, 2)


# -- references ----------------------------------------------------------------------------

def ref_pack_input(x, groups, cpg, slots, mult, block, pt, pl, height, width):
    """packed[n][g][b][hp][wp][c] = x[n, g*cpg + s // mult, hp - pt, wp - pl] (s = b*block + c),
    0 for slots >= slots or pixels outside the image."""
    N, C, H, W = x.shape
    nb = -(-slots // block)
    out = np.zeros((N, groups, nb * block, height, width), x.dtype)
    hs = np.arange(height) - pt
    ws = np.arange(width) - pl
    rows = np.flatnonzero((hs >= 0) & (hs < H))
    cols = np.flatnonzero((ws >= 0) & (ws < W))
    for g in range(groups):
        for s in range(slots):
            plane = out[:, g, s]
            plane[:, rows[:, None], cols[None, :]] = (
                x[:, g * cpg + s // mult][:, hs[rows][:, None], ws[cols][None, :]])
    return out.reshape(N, groups, nb, block, height, width).transpose(0, 1, 2, 4, 5, 3)


def ref_unpack_output(packed, y0, groups, nblocks, block, msum, bias, alpha, beta):
    N, C, OH, OW = y0.shape
    cpg = C // groups
    P = packed.astype(np.float64).reshape(N, groups, nblocks, OH * OW, block)
    P = P.transpose(0, 1, 2, 4, 3).reshape(N, groups, nblocks * block, OH, OW)
    acc = np.zeros((N, C, OH, OW))
    for c in range(C):
        first = (c % cpg) * msum
        acc[:, c] = P[:, c // cpg, first:first + msum].sum(axis=1)
    if bias is not None:
        acc += bias.astype(np.float64)[None, :, None, None]
    result = alpha * acc
    if beta != 0:
        result = result + beta * y0.astype(np.float64)
    return result


def ref_pack_weight(w, groups, swap, col_block, red_block, taps):
    """packed[g][cb][rb][t][i][j] (see _layout.pack_weight), zero past the channel counts."""
    K, Cg, R, S = w.shape
    Kg = K // groups
    wf = w.reshape(groups, Kg, Cg, R * S)[..., taps]          # (G, Kg, Cg, T)
    M = wf.transpose(0, 2, 1, 3) if swap else wf                # (G, cols, reds, T)
    cols, reds = M.shape[1:3]
    ncb, nrb = -(-cols // col_block), -(-reds // red_block)
    P = np.zeros((groups, ncb * col_block, nrb * red_block, len(taps)), w.dtype)
    P[:, :cols, :reds] = M
    P = P.reshape(groups, ncb, col_block, nrb, red_block, len(taps))
    return P.transpose(0, 1, 3, 5, 4, 2)                        # g cb rb t i j


# -- pack_input ----------------------------------------------------------------------------

def _x_nchw(rng, dtype):
    return rng.standard_normal((2, 5, 6, 7)).astype(dtype)


def _x_nhwc(rng, dtype):       # channels innermost: the channel-by-channel path
    return rng.standard_normal((2, 6, 7, 5)).astype(dtype).transpose(0, 3, 1, 2)


def _x_strided(rng, dtype):    # every other channel, rows and columns reversed, step -2
    return rng.standard_normal((2, 8, 9, 12)).astype(dtype)[:, 1::2, ::-1, ::-2]


def _x_wide_rows(rng, dtype):  # long contiguous rows: the in-register transposes
    return rng.standard_normal((1, 20, 3, 37)).astype(dtype)


def _x_phase_to_end(rng, dtype):  # stride phase 0 of both axes: ends on the array's last element
    return rng.standard_normal((2, 9, 5, 41)).astype(dtype)[:, :, ::2, ::2]


def _x_phase_odd(rng, dtype):  # stride phase 1 of both axes: every other element from the 2nd
    return rng.standard_normal((1, 8, 6, 36)).astype(dtype)[:, :, 1::2, 1::2]


def _x_small(rng, dtype):
    return rng.standard_normal((1, 6, 5, 5)).astype(dtype)


# (make x, groups, channels_per_group, slots_per_group, mult, block, pad_top, pad_left,
#  extra height, extra width): height = H + extra height (may crop), likewise width.
PACK_CASES = {
    "nchw_partial_block": (_x_nchw, 1, 5, 5, 1, 4, 1, 2, 3, 3),
    "nchw_block_per_level_f32": (_x_nchw, 1, 5, 5, 1, 16, 0, 1, 0, 2),
    "nhwc_block3": (_x_nhwc, 1, 5, 5, 1, 3, 2, 0, 2, 1),
    "nhwc_groups": (_x_nhwc, 5, 1, 1, 1, 2, 1, 1, 2, 2),
    "groups": (_x_small, 2, 3, 3, 1, 2, 0, 0, 0, 0),
    "groups_slots_padded": (_x_small, 3, 2, 2, 1, 8, 1, 1, 2, 2),
    "depthwise_mult2": (_x_nchw, 1, 5, 10, 2, 4, 2, 1, 4, 2),
    "depthwise_mult3_nhwc": (_x_nhwc, 1, 5, 15, 3, 8, 1, 1, 2, 2),
    "strided_negative": (_x_strided, 1, 4, 4, 1, 8, 1, 1, 2, 3),
    "strided_groups": (_x_strided, 2, 2, 2, 1, 2, 0, 2, 0, 2),
    "wide_rows_blocks": (_x_wide_rows, 1, 20, 20, 1, 16, 1, 3, 2, 5),
    "wide_rows_groups": (_x_wide_rows, 4, 5, 5, 1, 4, 0, 1, 0, 2),
    "crop": (_x_nchw, 1, 5, 5, 1, 4, -1, -2, -3, -3),
    "crop_bottom_pad_top": (_x_wide_rows, 1, 20, 20, 1, 8, 2, -3, -1, -10),
    "phase_blocks": (_x_phase_to_end, 1, 9, 9, 1, 16, 1, 1, 1, 2),
    "phase_groups": (_x_phase_to_end, 3, 3, 3, 1, 4, 0, 2, 0, 3),
    "phase_odd": (_x_phase_odd, 1, 8, 8, 1, 8, 1, 0, 1, 0),
    "phase_odd_crop": (_x_phase_odd, 2, 4, 4, 1, 4, 0, -3, 0, -5),
    "block1": (_x_small, 1, 6, 6, 1, 1, 1, 1, 2, 2),
    "block64": (_x_wide_rows, 1, 20, 20, 1, 64, 0, 0, 1, 0),
}


def _pack(x, groups, cpg, slots, mult, block, pt, pl, height, width, nthreads):
    nb = -(-slots // block)
    packed = np.full(x.shape[0] * groups * nb * height * width * block, np.nan, x.dtype)
    bad = _layout.pack_input(x, packed, groups, cpg, slots, mult, block, pt, pl, height, width,
                             nthreads)
    return packed, bad


@pytest.mark.parametrize("nthreads", NTHREADS)
@pytest.mark.parametrize("case", sorted(PACK_CASES))
def test_pack_input_matches_numpy(case, dtype, nthreads):
    make, groups, cpg, slots, mult, block, pt, pl, eh, ew = PACK_CASES[case]
    x = make(np.random.default_rng(0), dtype)
    H, W = x.shape[2:]
    height, width = H + eh, W + ew
    packed, bad = _pack(x, groups, cpg, slots, mult, block, pt, pl, height, width, nthreads)
    expected = ref_pack_input(x, groups, cpg, slots, mult, block, pt, pl, height, width)
    # Every element written (the buffer started as NaN), padding and spare slots zero.
    np.testing.assert_array_equal(packed, expected.ravel())
    assert bad == 0


@pytest.mark.parametrize("block", [1, 2, 4, 8, 16, 32])
def test_pack_input_block_sizes(block, dtype):
    """The channel blocks every level uses (VL and 2*VL of float32 / float64)."""
    rng = np.random.default_rng(block)
    x = rng.standard_normal((2, 13, 4, 9)).astype(dtype)
    packed, bad = _pack(x, 1, 13, 13, 1, block, 1, 1, 6, 11, 2)
    np.testing.assert_array_equal(
        packed, ref_pack_input(x, 1, 13, 13, 1, block, 1, 1, 6, 11).ravel())
    assert bad == 0


def _bad_planes(expected):
    """Planes (n, g, b) of a reference packing that received a NaN or an infinity."""
    return int(np.any(~np.isfinite(expected), axis=(3, 4, 5)).sum())


NONFINITE_LAYOUTS = {"nchw": lambda x: x,
                     "nhwc": lambda x: np.ascontiguousarray(x.transpose(0, 2, 3, 1))
                     .transpose(0, 3, 1, 2),
                     "strided": lambda x: np.repeat(x, 2, axis=3)[..., ::2]}


@pytest.mark.parametrize("layout", sorted(NONFINITE_LAYOUTS))
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_pack_input_nonfinite_count(value, layout, dtype):
    rng = np.random.default_rng(1)
    base = rng.standard_normal((2, 5, 6, 9)).astype(dtype)
    # Channel 1 with multiplier 2 fills slots 2 and 3: blocks 0 and 1 of block size 3.
    base[1, 1, 2, 3] = value
    base[0, 4, 5, 8] = value          # last pixel: the scalar tail of a transposed row
    x = NONFINITE_LAYOUTS[layout](base)
    args = (1, 5, 10, 2, 3, 1, 1, 8, 11)
    packed, bad = _pack(x, *args, 2)
    expected = ref_pack_input(x, *args)
    np.testing.assert_array_equal(packed, expected.ravel())
    assert bad == _bad_planes(expected) == 4


@pytest.mark.parametrize("layout", sorted(NONFINITE_LAYOUTS))
def test_pack_input_nonfinite_outside_window_ignored(layout, dtype):
    """Values cropped away are not copied, so they are not reported; huge finite values are
    not non-finite."""
    rng = np.random.default_rng(2)
    base = rng.standard_normal((1, 4, 6, 9)).astype(dtype)
    base[0, 0, 0, 4] = np.nan        # row 0: cropped by pad_top = -1
    base[0, 2, 3, 8] = np.inf        # last column: cropped by the width
    base[0, 3, 2, 2] = np.finfo(dtype).max
    base[0, 1, 4, 4] = -np.finfo(dtype).max
    base[0, 1, 4, 5] = np.finfo(dtype).tiny / 4   # subnormal
    x = NONFINITE_LAYOUTS[layout](base)
    args = (1, 4, 4, 1, 2, -1, 0, 5, 8)
    packed, bad = _pack(x, *args, 1)
    np.testing.assert_array_equal(packed, ref_pack_input(x, *args).ravel())
    assert bad == 0


def test_pack_input_rejects_bad_sizes(dtype):
    x = np.zeros((1, 2, 3, 3), dtype)
    with pytest.raises(ValueError):
        _layout.pack_input(x, np.zeros(10, dtype), 1, 2, 2, 1, 2, 0, 0, 3, 3, 1)
    with pytest.raises(ValueError):
        _layout.pack_input(x, np.zeros(65 * 9, dtype), 1, 2, 2, 1, 65, 0, 0, 3, 3, 1)


# -- unpack_output -------------------------------------------------------------------------

# (N, C, OH, OW, groups, block, msum): nblocks follows from the slots per group.
UNPACK_CASES = {
    "groups_spare_slots": (2, 6, 3, 4, 2, 4, 1),
    "two_blocks_many_pixels": (1, 5, 9, 10, 1, 4, 1),   # > 64 pixels: several pixel chunks
    "mult2_straddles": (2, 3, 4, 5, 1, 3, 2),
    "mult3_groups_straddles": (1, 4, 3, 3, 2, 4, 3),
    "mult2_one_block": (1, 4, 5, 3, 1, 8, 2),
}


def _target(kind, shape, dtype, rng):
    """(y view, the array owning it): a logical NCHW view in the memory layout ``kind``."""
    N, C, H, W = shape
    if kind == "nchw":
        owner = rng.standard_normal(shape).astype(dtype)
        return owner, owner
    if kind == "nhwc":
        owner = rng.standard_normal((N, H, W, C)).astype(dtype)
        return owner.transpose(0, 3, 1, 2), owner
    owner = rng.standard_normal((N, 2 * C, H + 1, W)).astype(dtype)
    return owner[:, ::2, 1:, ::-1], owner


@pytest.mark.parametrize("scaling", ["plain", "bias_alpha", "bias_alpha_beta"])
@pytest.mark.parametrize("target", ["nchw", "nhwc", "strided"])
@pytest.mark.parametrize("case", sorted(UNPACK_CASES))
def test_unpack_output_matches_numpy(case, target, scaling, dtype):
    N, C, OH, OW, groups, block, msum = UNPACK_CASES[case]
    rng = np.random.default_rng(3)
    nblocks = -(-(C // groups) * msum // block)
    packed = rng.standard_normal(N * groups * nblocks * OH * OW * block).astype(dtype)
    y, owner = _target(target, (N, C, OH, OW), dtype, rng)
    bias = rng.standard_normal(C).astype(dtype) if scaling != "plain" else None
    alpha, beta = {"plain": (1.0, 0.0), "bias_alpha": (0.5, 0.0),
                   "bias_alpha_beta": (-1.5, 0.75)}[scaling]
    if beta == 0:
        y[...] = np.nan               # beta == 0 never reads y
    y0 = y.copy()
    before = owner.copy()
    _layout.unpack_output(packed, y, groups, nblocks, block, msum,
                          np.zeros(0, dtype) if bias is None else bias, alpha, beta, 2)
    expected = ref_unpack_output(packed, y0, groups, nblocks, block, msum, bias, alpha, beta)
    np.testing.assert_allclose(y, expected, rtol=1e-6 if dtype == np.float32 else 1e-14,
                               atol=1e-6 if dtype == np.float32 else 1e-14)
    if target == "strided":       # nothing outside the view changed
        mask = np.ones(owner.shape, bool)
        mask[:, ::2, 1:, ::-1] = False
        np.testing.assert_array_equal(owner[mask], before[mask])


def test_unpack_output_rejects_bad_sizes(dtype):
    y = np.zeros((1, 2, 2, 2), dtype)
    with pytest.raises(ValueError):
        _layout.unpack_output(np.zeros(7, dtype), y, 1, 1, 2, 1, np.zeros(0, dtype), 1.0,
                              0.0, 1)
    with pytest.raises(ValueError):
        _layout.unpack_output(np.zeros(8, dtype), y, 1, 1, 2, 1, np.zeros(3, dtype), 1.0,
                              0.0, 1)


# -- pack_weight ---------------------------------------------------------------------------

# (w shape, groups, swap, col_block, red_block, taps or None for all)
WEIGHT_CASES = {
    "forward": ((5, 3, 3, 3), 1, False, 4, 2, None),
    "forward_groups_wide": ((6, 17, 2, 2), 2, False, 8, 16, None),
    "backward_data_phase": ((6, 5, 3, 2), 2, True, 4, 3, [0, 2, 5]),
    "backward_data_all": ((7, 3, 3, 3), 1, True, 2, 4, None),
    "depthwise": ((6, 1, 3, 3), 1, False, 4, 1, [8, 0, 4]),
    "one_by_one": ((3, 20, 1, 1), 1, False, 16, 10, None),
}


@pytest.mark.parametrize("nthreads", NTHREADS)
@pytest.mark.parametrize("case", sorted(WEIGHT_CASES))
def test_pack_weight_matches_numpy(case, dtype, nthreads):
    shape, groups, swap, col_block, red_block, taps = WEIGHT_CASES[case]
    K, Cg, R, S = shape
    taps = np.arange(R * S) if taps is None else np.asarray(taps)
    w = np.random.default_rng(4).standard_normal(shape).astype(dtype)
    expected = ref_pack_weight(w, groups, swap, col_block, red_block, taps)
    packed = np.full(expected.size, np.nan, dtype)
    bad = _layout.pack_weight(w.ravel(), packed, groups, K // groups, Cg, R * S, swap,
                              col_block, red_block, taps.astype(np.intp), nthreads)
    np.testing.assert_array_equal(packed, expected.ravel())
    assert bad == 0


@pytest.mark.parametrize("value", [np.nan, np.inf])
@pytest.mark.parametrize("swap", [False, True])
def test_pack_weight_nonfinite_count(swap, value, dtype):
    K, Cg, R, S = 6, 5, 3, 3
    w = np.random.default_rng(5).standard_normal((K, Cg, R, S)).astype(dtype)
    w[1, 2, 0, 1] = value            # tap 1
    w[5, 4, 2, 2] = value            # tap 8
    w[3, 0, 1, 1] = value            # tap 4: left out of the taps below
    taps = np.array([0, 1, 2, 8], np.intp)
    expected = ref_pack_weight(w, 2, swap, 2, 2, taps)
    packed = np.empty(expected.size, dtype)
    bad = _layout.pack_weight(w.ravel(), packed, 2, 3, Cg, R * S, swap, 2, 2, taps, 2)
    np.testing.assert_array_equal(packed, expected.ravel())
    blocks = np.any(~np.isfinite(expected), axis=(3, 4, 5)).sum()
    assert bad == blocks == 2


def test_pack_weight_rejects_bad_taps(dtype):
    w = np.zeros(2 * 9, dtype)
    with pytest.raises(ValueError):
        _layout.pack_weight(w, np.zeros(2 * 9, dtype), 1, 2, 1, 9, False, 2, 1,
                            np.array([0, 9], np.intp), 1)


# -- pack_input with a padding mode -------------------------------------------------------

NUMPY_PAD = {"reflect": "reflect", "symmetric": "symmetric", "replicate": "edge",
             "circular": "wrap"}


@pytest.mark.parametrize("layout", sorted(NONFINITE_LAYOUTS))
@pytest.mark.parametrize("mode", sorted(NUMPY_PAD) + ["constant"])
def test_pack_input_builds_padding_modes(mode, layout, dtype):
    """With row / column maps the packing builds the mode's padding: the same buffer as
    packing ``numpy.pad(x, mode)`` without padding, rows / columns past the maps zero (the
    plane may be larger than the padded image), groups and a multiplier included."""
    from cconv._boundary import padded_source

    rng = np.random.default_rng(3)
    base = rng.standard_normal((2, 4, 5, 7)).astype(dtype)
    x = NONFINITE_LAYOUTS[layout](base)
    (pt, pb), (pl, pr) = (2, 1), (3, 2)
    rows = padded_source(5, pt, pb, mode)
    cols = padded_source(7, pl, pr, mode)
    value = 1.5 if mode == "constant" else 0.0
    widths = ((0, 0), (0, 0), (pt, pb), (pl, pr))
    padded = (np.pad(base, widths, mode="constant", constant_values=value)
              if mode == "constant" else np.pad(base, widths, mode=NUMPY_PAD[mode]))
    height, width = 5 + pt + pb + 2, 7 + pl + pr + 3
    args = (2, 2, 4, 2, 3, pt, pl, height, width)  # 2 groups, multiplier 2, block 3
    for nthreads in NTHREADS:
        packed = np.full(2 * 2 * 2 * height * width * 3, np.nan, dtype)
        bad = _layout.pack_input(x, packed, *args, nthreads, rows, cols, value)
        expected = ref_pack_input(padded, 2, 2, 4, 2, 3, 0, 0, height, width)
        np.testing.assert_array_equal(packed, expected.ravel())
        assert bad == 0


def test_pack_input_rejects_bad_maps(dtype):
    x = np.zeros((1, 2, 3, 3), dtype)
    packed = np.zeros(2 * 5 * 5, dtype)
    good = np.array([-1, 0, 1, 2, -1], np.int64)
    for rows, cols, pl in [(good, good[:4], 2),                       # image does not fit
                           (np.array([0, 1, 3, 2, 1], np.int64), good, 1),  # row 3 of 3
                           (good, np.array([-2, 0, 1, 2, 1], np.int64), 1),
                           (np.arange(6, dtype=np.int64) % 3, good, 1)]:   # taller than plane
        with pytest.raises(ValueError):
            _layout.pack_input(x, packed, 1, 2, 2, 1, 2, 1, pl, 5, 5, 1, rows, cols, 0.0)
    with pytest.raises(ValueError):
        _layout.pack_input(x, packed, 1, 2, 2, 1, 2, 1, 1, 5, 5, 1, good, None, 0.0)


def test_pack_input_counts_a_nonfinite_constant(dtype):
    """An infinite or NaN padding value lands in the packed planes: they are counted."""
    from cconv._boundary import padded_source

    x = np.ones((1, 2, 3, 3), dtype)
    rows, cols = padded_source(3, 1, 1, "constant"), padded_source(3, 1, 1, "constant")
    packed = np.empty(2 * 5 * 5, dtype)
    bad = _layout.pack_input(x, packed, 1, 2, 2, 1, 1, 1, 1, 5, 5, 1, rows, cols, np.inf)
    assert bad == 2
    assert np.isinf(packed.reshape(2, 5, 5)[:, 0]).all()


# (x shape (N, C, H, W), channels last, groups, block, pad_top, pad_left, phase_h, phase_w)
PHASE_CASES = {
    "stride2": ((2, 9, 11, 13), False, 1, 4, 1, 1, 2, 2),
    "stride2_nhwc_groups": ((2, 6, 10, 9), True, 2, 2, 1, 2, 2, 2),
    "stride3x2_blocks": ((1, 20, 13, 17), False, 1, 16, 3, 0, 3, 2),
    "stride1x3": ((2, 5, 6, 7), False, 5, 1, 0, 2, 1, 3),
    "stride3_pad1": ((1, 7, 14, 11), False, 1, 8, 1, 2, 3, 3),
    "padding_only_phases": ((1, 3, 1, 2), False, 1, 4, 0, 0, 3, 3),
}


@pytest.mark.parametrize("nthreads", NTHREADS)
@pytest.mark.parametrize("case", sorted(PHASE_CASES))
def test_pack_input_phases_matches_the_views(case, dtype, nthreads):
    """Every stride phase of the padded input, as pack_input makes of the strided view
    that phase holds (zeros for a phase that only padding falls on)."""
    shape, last, groups, block, pt, pl, ph, pw = PHASE_CASES[case]
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(dtype)
    if last:
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    N, C, H, W = x.shape
    height, width = -(-(H + pt + 1) // ph), -(-(W + pl + 2) // pw)
    cpg = C // groups
    size = N * groups * -(-cpg // block) * height * width * block
    packed = np.full(ph * pw * size, np.nan, dtype)
    bad = _layout.pack_input_phases(x, packed, groups, cpg, block, pt, pl, height, width,
                                    ph, pw, nthreads)
    assert bad == 0
    for a in range(ph):
        h0 = (a - pt) % ph
        for b in range(pw):
            w0 = (b - pl) % pw
            view = x[:, :, h0::ph, w0::pw]
            expected = ref_pack_input(view, groups, cpg, cpg, 1, block, (h0 + pt) // ph,
                                      (w0 + pl) // pw, height, width)
            part = packed[(a * pw + b) * size:(a * pw + b + 1) * size]
            np.testing.assert_array_equal(part, expected.ravel())


def test_pack_input_phases_counts_nonfinite_and_rejects_bad_sizes(dtype):
    x = np.ones((1, 4, 5, 5), dtype)
    x[0, 2, 3, 1] = np.inf
    size = 1 * 1 * 1 * 3 * 3 * 4
    packed = np.empty(4 * size, dtype)
    # pixel (3, 1) + padding 1 -> padded (4, 2): phase (0, 0), one plane
    assert _layout.pack_input_phases(x, packed, 1, 4, 4, 1, 1, 3, 3, 2, 2, 1) == 1
    with pytest.raises(ValueError, match="packed has"):
        _layout.pack_input_phases(x, packed[:-1], 1, 4, 4, 1, 1, 3, 3, 2, 2, 1)
    with pytest.raises(ValueError, match="phases"):
        _layout.pack_input_phases(x, packed, 1, 4, 4, 1, 1, 3, 3, 0, 2, 1)
    with pytest.raises(ValueError, match="block"):
        _layout.pack_input_phases(x, packed, 1, 4, 0, 1, 1, 3, 3, 2, 2, 1)
    with pytest.raises(ValueError, match="block"):  # (divided by it before the check once)
        _layout.pack_input(x, packed, 1, 4, 4, 1, 0, 1, 1, 3, 3, 1)
