"""The direct convolution pipeline of every SIMD level, wired here from the kernels.

Each pass is assembled as ``cconv/algorithms/direct.py`` does it, but with one level's
constants and runner: pack with ``_layout``, plan with ``direct_schedule`` (that level's
``VECTOR_LENGTH`` / ``TILE_ROWS``), run that level's ``run_jobs_*``, unpack or write straight
into an NCHW / NHWC result; compared with the float64 reference (``support.reference``).
"""

import numpy as np
import pytest
from cconv._geometry import make_geometry
from cconv._kernels import _layout
from cconv.algorithms import direct_schedule
from support.checks import assert_close
from support.reference import ref_backward_data, ref_backward_weight, ref_conv2d

pytestmark = pytest.mark.kernels

# name: (N, C, H, W, K, R, S, stride, padding, dilation, groups)
GEOMETRIES = {
    "stride2_pad1": (2, 3, 7, 6, 5, 3, 3, 2, 1, 1, 1),
    "dilation2_asym_pad_wide": (1, 5, 8, 9, 17, 3, 2, 1, ((2, 1), (0, 2)), 2, 1),
    "groups2_stride12": (2, 6, 5, 5, 4, 3, 3, (1, 2), 1, 1, 2),
    "depthwise_mult2_stride2": (1, 4, 6, 7, 8, 3, 3, 2, 1, 1, 4),
    "depthwise_dilation2_odd": (2, 5, 5, 6, 5, 3, 3, 1, 2, 2, 5),
    "pointwise_20_channels": (1, 20, 3, 4, 3, 1, 1, 1, 0, 1, 1),
    "stride3_kernel2_empty_phase": (1, 3, 8, 7, 4, 2, 2, 3, 0, 1, 1),
    "many_outputs_odd": (1, 2, 5, 3, 37, 3, 3, 1, 1, 1, 1),
}

NTHREADS = 2


def _geometry(name, dtype):
    N, C, H, W, K, R, S, stride, padding, dilation, groups = GEOMETRIES[name]
    return make_geometry((N, C, H, W), (K, C // groups, R, S), stride=stride, padding=padding,
                         dilation=dilation, groups=groups, dtype=dtype)


def _ref_args(g):
    return dict(stride=g.stride, pads=g.pads, dilation=g.dilation, groups=g.groups)


def _pack_activation(x, block, slots, mult, groups, pads, height, width):
    nblocks = -(-slots // block)
    packed = np.empty(x.shape[0] * groups * nblocks * height * width * block, x.dtype)
    bad = _layout.pack_input(x, packed, groups, x.shape[1] // groups, slots, mult, block,
                             pads[0], pads[1], height, width, NTHREADS)
    assert bad == 0
    return packed


def _pack_weight(w, groups, Kg, Cg, swap, col_block, red_block, taps):
    cols, reds = (Cg, Kg) if swap else (Kg, Cg)
    size = (groups * -(-cols // col_block) * -(-reds // red_block) * len(taps)
            * red_block * col_block)
    packed = np.empty(size, w.dtype)
    RS = w.shape[2] * w.shape[3]
    bad = _layout.pack_weight(w.reshape(-1), packed, groups, Kg, Cg, RS, swap, col_block,
                              red_block, np.asarray(taps, np.intp), NTHREADS)
    assert bad == 0
    return packed


def _pack_input(g, info, x):
    (pt, _), (pl, _) = g.pads
    if g.depthwise:
        return _pack_activation(x, info.KB, g.K, g.Kg, 1, (pt, pl), info.Hp,
                                info.Wp)
    if info.phases != (1, 1):
        # Stride phases: zero-pad the whole plane with NumPy (to whole phases), then pack
        # each phase's pixels x[a::sh, b::sw] as a plane of its own, phases outermost.
        sh, sw = info.phases
        H, W = x.shape[2:]
        padded = np.pad(x, ((0, 0), (0, 0), (pt, info.Hp * sh - H - pt),
                            (pl, info.Wp * sw - W - pl)))
        return np.concatenate([
            _pack_activation(np.ascontiguousarray(padded[:, :, a::sh, b::sw]), info.CB, g.Cg,
                             1, g.groups, (0, 0), info.Hp, info.Wp)
            for a in range(sh) for b in range(sw)])
    return _pack_activation(x, info.CB, g.Cg, 1, g.groups, (pt, pl), info.Hp, info.Wp)


def _run(tiles, p, A, B, out, **kw):
    run = getattr(tiles, f"run_jobs_{A.dtype.name}")
    run(tiles.KINDS[p.kind], A, B, out, p.jobs, p.table, NTHREADS, **kw)


def _result(shape, target, dtype, rng):
    """(logical NCHW result, flat array the kernels write for the NCHW / NHWC targets)."""
    N, C, H, W = shape
    if target == "NHWC":
        owner = rng.standard_normal((N, H, W, C)).astype(dtype)
        return owner.transpose(0, 3, 1, 2), owner.reshape(-1)
    owner = rng.standard_normal(shape).astype(dtype)
    return owner, owner.reshape(-1)


SCALINGS = {"plain": (1.0, 0.0, False), "alpha_beta_bias": (1.5, -0.5, True)}


def _scaled(ref, y0, bias, alpha, beta):
    if bias is not None:
        ref = ref + bias.astype(np.float64)[None, :, None, None]
    return alpha * ref + (beta * y0.astype(np.float64) if beta else 0)


@pytest.mark.parametrize("scaling", sorted(SCALINGS))
@pytest.mark.parametrize("target", ["blocked", "NCHW", "NHWC"])
@pytest.mark.parametrize("name", sorted(GEOMETRIES))
def test_forward(kmods, name, target, scaling, dtype, rtol):
    tiles, g = kmods.tiles, _geometry(name, dtype)
    vl = tiles.VECTOR_LENGTH[dtype.name]
    rng = np.random.default_rng(20)
    x = rng.standard_normal((g.N, g.C, g.H, g.W)).astype(dtype)
    w = rng.standard_normal((g.K, g.Cg, g.R, g.S)).astype(dtype)
    alpha, beta, with_bias = SCALINGS[scaling]
    bias = rng.standard_normal(g.K).astype(dtype) if with_bias else None
    p = direct_schedule.forward(g, vl, tiles.TILE_ROWS, target)
    info = p.info
    packed_x = _pack_input(g, info, x)
    taps = np.arange(g.R * g.S)
    if g.depthwise:
        packed_w = _pack_weight(w, 1, g.K, 1, False, info.KB, 1, taps)
    else:
        packed_w = _pack_weight(w, g.groups, g.Kg, g.Cg, False, info.KB, info.CB, taps)
    y, flat = _result((g.N, g.K, g.OH, g.OW), target, dtype, rng)
    y0 = y.copy()
    if target == "blocked":
        blocked = np.empty(p.out_size, dtype)
        _run(tiles, p, packed_x, packed_w, blocked)
        nblocks = info.Kb if g.depthwise else info.Kb
        block = info.KB if g.depthwise else info.KB
        _layout.unpack_output(blocked, y, 1 if g.depthwise else g.groups, nblocks, block, 1,
                              np.zeros(0, dtype) if bias is None else bias, alpha, beta,
                              NTHREADS)
    else:
        _run(tiles, p, packed_x, packed_w, flat, col_stride=info.col_stride, bias=bias,
             alpha=alpha, beta=beta)
    expected = _scaled(ref_conv2d(x, w, **_ref_args(g)), y0, bias, alpha, beta)
    assert_close(y, expected, rtol=rtol, what=f"{kmods.tiles.ISA} forward {name} {p.kind}")


def _backward_data_cases():
    for name in sorted(GEOMETRIES):
        N, C, H, W, K, R, S, stride, padding, dilation, groups = GEOMETRIES[name]
        # A depthwise multiplier sums several blocked columns per channel: blocked only.
        mult = groups == C and groups > 1 and K > C
        for target in ["blocked"] if mult else ["blocked", "NCHW", "NHWC"]:
            yield name, target


@pytest.mark.parametrize("scaling", sorted(SCALINGS))
@pytest.mark.parametrize("name,target", list(_backward_data_cases()))
def test_backward_data(kmods, name, target, scaling, dtype, rtol):
    tiles, g = kmods.tiles, _geometry(name, dtype)
    vl = tiles.VECTOR_LENGTH[dtype.name]
    rng = np.random.default_rng(21)
    dy = rng.standard_normal((g.N, g.K, g.OH, g.OW)).astype(dtype)
    w = rng.standard_normal((g.K, g.Cg, g.R, g.S)).astype(dtype)
    alpha, beta, with_bias = SCALINGS[scaling]
    bias = rng.standard_normal(g.C).astype(dtype) if with_bias else None
    p = direct_schedule.backward_data(g, vl, tiles.TILE_ROWS, target)
    info = p.info
    (lo_h, _), (lo_w, _) = info.pads
    packed_dy = _pack_activation(dy, info.dy_block, g.K if g.depthwise else g.Kg, 1,
                                 1 if g.depthwise else g.groups, (lo_h, lo_w), info.OHp,
                                 info.OWp)
    parts = []
    for taps_h, taps_w in info.phases:     # one packed weight per stride phase
        taps = (np.asarray(taps_h, np.intp)[:, None] * g.S
                + np.asarray(taps_w, np.intp)[None, :]).ravel()
        if g.depthwise:
            parts.append(_pack_weight(w, 1, g.K, 1, False, info.KB, 1, taps))
        else:
            parts.append(_pack_weight(w, g.groups, g.Kg, g.Cg, True, info.KB,
                                      info.dy_block, taps))
    packed_w = np.concatenate(parts + [np.zeros(1, dtype)])   # never empty
    dx, flat = _result((g.N, g.C, g.H, g.W), target, dtype, rng)
    dx0 = dx.copy()
    if target == "blocked":
        blocked = np.empty(p.out_size, dtype)
        _run(tiles, p, packed_dy, packed_w, blocked)
        _layout.unpack_output(blocked, dx, 1 if g.depthwise else g.groups, info.out_blocks,
                              info.KB, g.Kg if g.depthwise else 1,
                              np.zeros(0, dtype) if bias is None else bias, alpha, beta,
                              NTHREADS)
    else:
        _run(tiles, p, packed_dy, packed_w, flat, col_stride=info.col_stride, bias=bias,
             alpha=alpha, beta=beta)
    expected = _scaled(ref_backward_data(dy, w, dx.shape, **_ref_args(g)), dx0, bias, alpha,
                       beta)
    assert_close(dx, expected, rtol=rtol, what=f"{kmods.tiles.ISA} backward-data {name} {p.kind}")


@pytest.mark.parametrize("name", sorted(GEOMETRIES))
def test_backward_weight(kmods, name, dtype, rtol):
    _check_backward_weight(kmods, name, dtype, rtol)


@pytest.mark.parametrize("name", sorted(GEOMETRIES))
def test_backward_weight_in_one_pixel_pieces(kmods, name, dtype, rtol, monkeypatch):
    """The reduction cut into as many pieces as it has (image, pixel) pairs: each piece's
    partial sum is written, and the pieces add up to the gradient."""
    monkeypatch.setattr(direct_schedule, "REDUCTION_PIECE_BYTES", 1)
    monkeypatch.setattr(direct_schedule, "REDUCTION_PIECE_MIN_PIXELS", 1)
    monkeypatch.setattr(direct_schedule, "REDUCTION_PARTIALS_BYTES", 1 << 40)
    g = _geometry(name, dtype)
    p = direct_schedule.backward_weight(g, kmods.tiles.VECTOR_LENGTH[dtype.name],
                                        kmods.tiles.TILE_ROWS)
    assert p.info.splits == g.N * g.OH * g.OW
    _check_backward_weight(kmods, name, dtype, rtol)


def _check_backward_weight(kmods, name, dtype, rtol):
    tiles, g = kmods.tiles, _geometry(name, dtype)
    vl = tiles.VECTOR_LENGTH[dtype.name]
    rng = np.random.default_rng(22)
    x = rng.standard_normal((g.N, g.C, g.H, g.W)).astype(dtype)
    dy = rng.standard_normal((g.N, g.K, g.OH, g.OW)).astype(dtype)
    p = direct_schedule.backward_weight(g, vl, tiles.TILE_ROWS)
    info = p.info.forward
    packed_x = _pack_input(g, info, x)
    packed_dy = _pack_activation(dy, info.KB, g.K if g.depthwise else g.Kg, 1,
                                 1 if g.depthwise else g.groups, (0, 0), g.OH, g.OW)
    partial = np.full(p.out_size, np.nan, dtype)   # every partial sum must be written
    _run(tiles, p, packed_x, packed_dy, partial)
    total = partial.reshape(p.info.splits, -1).sum(axis=0)
    if g.depthwise:
        nb, block = info.Kb, info.KB
        grad = total.reshape(nb, g.R, g.S, block).transpose(0, 3, 1, 2)
        grad = grad.reshape(nb * block, g.R, g.S)[:g.K].reshape(g.K, 1, g.R, g.S)
    else:
        Kb, KB, Cb, CB = info.Kb, info.KB, info.Cb, info.CB
        grad = total.reshape(g.groups, Kb, Cb, g.R, g.S, CB, KB).transpose(0, 1, 6, 2, 5, 3, 4)
        grad = grad.reshape(g.groups, Kb * KB, Cb * CB, g.R, g.S)[:, :g.Kg, :g.Cg]
        grad = grad.reshape(g.K, g.Cg, g.R, g.S)
    expected = ref_backward_weight(dy, x, (g.K, g.Cg, g.R, g.S), **_ref_args(g))
    assert_close(grad, expected, rtol=rtol,
                 what=f"{kmods.tiles.ISA} backward-weight {name} {p.kind}")


def test_geometries_cover_every_tile_kind(kmods, dtype):
    """The geometries above run each tile kind on this level (so no kind goes untested)."""
    tiles = kmods.tiles
    vl = tiles.VECTOR_LENGTH[dtype.name]
    kinds = set()
    for name in GEOMETRIES:
        g = _geometry(name, dtype)
        kinds.add(direct_schedule.forward(g, vl, tiles.TILE_ROWS).kind)
        kinds.add(direct_schedule.backward_data(g, vl, tiles.TILE_ROWS).kind)
        kinds.add(direct_schedule.backward_weight(g, vl, tiles.TILE_ROWS).kind)
    assert kinds == {"dense", "narrow", "depthwise"}


@pytest.mark.parametrize("N, npix, base_jobs, pixel_bytes, partial_bytes", [
    (1, 16384, 1, 128, 1 << 10), (8, 16384, 82, 128, 147456), (8, 784, 332, 128, 589824),
    (3, 7, 1, 64, 64), (2, 100, 1, 1 << 20, 1), (16, 4096, 4, 64, 1 << 12),
    (5, 65, 1000, 128, 1 << 10), (8, 3136, 5000, 128, 9437184), (8, 3136, 2, 128, 9437184)])
def test_reduction_pieces_cover_the_reduction_once(N, npix, base_jobs, pixel_bytes,
                                                   partial_bytes):
    """The pieces partition images x pixels in order; they are at least as many as the job
    target asks for, and at most the cache size (unless an image's piece would fall below
    the least pixels) where their partial sums fit the budget, else within that budget."""
    pieces = direct_schedule._reduction_splits(N, npix, base_jobs, pixel_bytes, partial_bytes)
    covered = [(n, p) for n0, n1, p0, p1 in pieces for n in range(n0, n1) for p in range(p0, p1)]
    assert covered == [(n, p) for n in range(N) for p in range(npix)]
    least = direct_schedule.REDUCTION_PIECE_MIN_PIXELS
    parallel_want = -(-direct_schedule.TARGET_REDUCTION_JOBS // base_jobs)
    assert len(pieces) >= min(parallel_want, N * max(1, npix // least))
    budget = direct_schedule.REDUCTION_PARTIALS_BYTES // partial_bytes
    if -(-N * npix * pixel_bytes // direct_schedule.REDUCTION_PIECE_BYTES) > budget:
        want = max(parallel_want, budget, 1)
        assert len(pieces) <= (want if want <= N else -(-want // N) * N)
        return
    for n0, n1, p0, p1 in pieces:
        assert ((n1 - n0) * (p1 - p0) * pixel_bytes <= direct_schedule.REDUCTION_PIECE_BYTES
                or p1 - p0 < 2 * least)
