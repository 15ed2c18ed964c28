"""Winograd F(2x2, 3x3) kernels of every SIMD level against NumPy.

``transform_filter_*`` against ``G g G^T`` in the documented ``U [G][Kb][16][Cp][KB]``
layout (and its non-finite count); ``weight_gradient_*`` against ``G^T P G``; ``forward_*``
(also as backward-data: rotated filter, cropping pads) and ``backward_weight_*`` +
``weight_gradient_*`` against the float64 reference (``support.reference``).  Sizes come from
``winograd_schedule``, whose ``kernels`` module is switched to the level under test.
"""

import numpy as np
import pytest
from cconv._geometry import make_geometry
from cconv._kernels import _layout
from cconv.algorithms import winograd_schedule
from support.checks import assert_close
from support.reference import ref_backward_data, ref_backward_weight, ref_conv2d

pytestmark = pytest.mark.kernels

CTYPE = {"float32": "float", "float64": "double"}
# Winograd F(2x2, 3x3) filter matrix (Lavin & Gray).
WINOGRAD_G = np.array([[1.0, 0.0, 0.0],
                       [0.5, 0.5, 0.5],
                       [0.5, -0.5, 0.5],
                       [0.0, 0.0, 1.0]])
NTHREADS = 2


def _kernel(kmods, name, dtype):
    return getattr(kmods.winograd, f"{name}_{CTYPE[np.dtype(dtype).name]}")


def _kb(kmods, dtype):
    """Output channels per GEMM column block of this level: two vectors."""
    return 2 * kmods.winograd.VECTOR_LENGTH[np.dtype(dtype).name]


@pytest.fixture
def schedule(kmods, monkeypatch):
    """``winograd_schedule`` sized with the constants of the level under test."""
    monkeypatch.setattr(winograd_schedule, "kernels", kmods.winograd)
    return winograd_schedule


# -- references ----------------------------------------------------------------------------

def ref_transform_filter(w, G, Cp, Kb, KB):
    """U[g][kb][xi][c][j] = (G w[g*Kg + kb*KB + j, c] G^T) flattened (xi = 4*row + col)."""
    K, Cg = w.shape[:2]
    Kg = K // G
    t = np.einsum("ir,kcrs,js->kcij", WINOGRAD_G, w.astype(np.float64), WINOGRAD_G)
    U = np.zeros((G, Kb * KB, 16, Cp))
    for g in range(G):
        U[g, :Kg, :, :Cg] = t[g * Kg:(g + 1) * Kg].reshape(Kg, Cg, 16).transpose(0, 2, 1)
    return U.reshape(G, Kb, KB, 16, Cp).transpose(0, 1, 3, 4, 2)


def ref_weight_gradient(partial, splits, G, Kb, Cp, KB, Kg, Cg):
    """dw[g*Kg + k, c] = G^T P G, P[xi] = sum over splits of partial[s][g][kb][xi][c][j]."""
    P = partial.astype(np.float64).reshape(splits, G, Kb, 16, Cp, KB).sum(axis=0)
    P = P.transpose(0, 1, 4, 3, 2).reshape(G, Kb * KB, Cp, 4, 4)[:, :Kg, :Cg]
    dw = np.einsum("ri,gkcij,js->gkcrs", WINOGRAD_G.T, P, WINOGRAD_G)
    return dw.reshape(G * Kg, Cg, 3, 3)


# -- transform_filter ----------------------------------------------------------------------

def _filters(shape, layout, dtype, rng):
    """A (K, Cg, 3, 3) filter view with the memory layout ``layout``."""
    K, Cg = shape[:2]
    if layout == "contiguous":
        return rng.standard_normal(shape).astype(dtype)
    if layout == "rotated":                    # as backward-data passes it
        return rng.standard_normal(shape).astype(dtype)[:, :, ::-1, ::-1]
    return rng.standard_normal((3, 3, Cg, K)).astype(dtype).transpose(3, 2, 0, 1)   # HWIO


# name: (G, Kg as (blocks of KB, extra), Cg, extra padded channels)
FILTER_CASES = {
    "small": (1, (0, 5), 3, 0),
    "groups_two_column_blocks": (2, (1, 3), 9, 0),
    "whole_column_block": (1, (1, 0), 8, 0),
    "channel_blocks_padded": (1, (0, 7), 17, 4),
    "spare_channel_block": (3, (0, 2), 2, 9),
}


@pytest.mark.parametrize("layout", ["contiguous", "rotated", "hwio"])
@pytest.mark.parametrize("case", sorted(FILTER_CASES))
def test_transform_filter(kmods, schedule, case, layout, dtype, rtol):
    G, (kbs, extra), Cg, pad = FILTER_CASES[case]
    KB = _kb(kmods, dtype)
    Kg = kbs * KB + extra
    Kb = -(-Kg // KB)
    Cp = schedule.padded_channels(Cg, KB // 2) + pad
    w = _filters((G * Kg, Cg, 3, 3), layout, dtype, np.random.default_rng(30))
    U = np.full(G * Kb * 16 * Cp * KB, np.nan, dtype)      # every element must be written
    bad = _kernel(kmods, "transform_filter", dtype)(w, G, Cp, Kb, U, NTHREADS)
    assert bad == 0
    expected = ref_transform_filter(w, G, Cp, Kb, KB)
    assert_close(U.reshape(expected.shape), expected, rtol=rtol, what=f"{kmods.winograd.ISA} U")


@pytest.mark.parametrize("layout", ["contiguous", "hwio"])
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_transform_filter_nonfinite_count(kmods, value, layout, dtype):
    KB = _kb(kmods, dtype)
    G, Kg, Cg = 2, KB + 3, 11                  # blocks: 2 groups x 2 column x 2 channel
    Kb, Cp = 2, 16
    w = _filters((G * Kg, Cg, 3, 3), layout, dtype, np.random.default_rng(31))
    w[0, 0, 0, 0] = value                      # block (0, 0, 0)
    w[Kg + KB + 1, 9, 2, 1] = value            # block (1, 1, 1)
    w[Kg + KB + 2, 10, 1, 1] = value           # the same block again
    U = np.empty(G * Kb * 16 * Cp * KB, dtype)
    transform = _kernel(kmods, "transform_filter", dtype)
    assert transform(w, G, Cp, Kb, U, NTHREADS) == 2
    w[...] = np.where(np.isfinite(w), w, 1.0)
    assert transform(w, G, Cp, Kb, U, NTHREADS) == 0


def test_transform_filter_rejects_bad_sizes(kmods, dtype):
    KB = _kb(kmods, dtype)
    w = np.zeros((3, 2, 3, 3), dtype)
    transform = _kernel(kmods, "transform_filter", dtype)
    with pytest.raises(ValueError):
        transform(w, 1, 2, 1, np.zeros(16 * 2 * KB - 1, dtype), 1)
    with pytest.raises(ValueError):                  # Cp smaller than the channels
        transform(w, 1, 1, 1, np.zeros(16 * 1 * KB, dtype), 1)


# -- weight_gradient -----------------------------------------------------------------------

@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("G,kbs,extra,Cg,Cp", [(1, 0, 5, 3, 3), (2, 1, 3, 17, 20),
                                              (1, 1, 0, 16, 16)])
def test_weight_gradient(kmods, G, kbs, extra, Cg, Cp, splits, dtype, rtol):
    KB = _kb(kmods, dtype)
    Kg = kbs * KB + extra
    Kb = -(-Kg // KB)
    rng = np.random.default_rng(32)
    partial = rng.standard_normal(splits * G * Kb * 16 * Cp * KB).astype(dtype)
    dw = np.full((G * Kg, Cg, 3, 3), np.nan, dtype)
    _kernel(kmods, "weight_gradient", dtype)(partial, splits, G, Kb, Cp, dw, NTHREADS)
    expected = ref_weight_gradient(partial, splits, G, Kb, Cp, KB, Kg, Cg)
    assert_close(dw, expected, rtol=rtol, what=f"{kmods.winograd.ISA} weight gradient")


# -- forward -------------------------------------------------------------------------------

# name: (N, C, H, W, K, padding, groups)
FORWARD_CASES = {
    "pad1_odd_partial_tiles": (2, 3, 5, 7, 5, 1, 1),
    "groups2": (1, 4, 6, 5, 6, 1, 2),
    "wide_channels_padded": (1, 33, 4, 4, 3, 1, 1),
    "many_filters_asym_pad": (1, 2, 3, 5, 37, ((0, 2), (1, 0)), 1),
    "valid_batch_of_three": (3, 3, 6, 6, 4, 0, 1),
    "pad2": (1, 2, 3, 4, 3, 2, 1),
    "depthwise": (2, 4, 5, 5, 4, 1, 4),
}


def _geometry(N, C, H, W, K, padding, groups, dtype):
    return make_geometry((N, C, H, W), (K, C // groups, 3, 3), padding=padding, groups=groups,
                         dtype=dtype)


def _run_forward(kmods, p, x, w, y, bias, alpha, beta, kchunk=None):
    """winograd.run_forward with this level's kernels: pack, transform, fused forward."""
    dt = np.dtype(p.dtype)
    packed = np.full(p.packed_input_size(), np.nan, dt)
    assert _layout.pack_input(x, packed, p.G, p.Cg, p.Cg, 1, p.block, p.pt, p.pl, p.Hp, p.Wp,
                              NTHREADS) == 0
    U = np.empty(p.filter_size(), dt)
    assert _kernel(kmods, "transform_filter", dt)(w, p.G, p.Cp, p.Kb, U, NTHREADS) == 0
    scratch = np.full(NTHREADS * p.scratch_per_thread, np.nan, dt)
    _kernel(kmods, "forward", dt)(packed, p.N, p.G, p.ncb, p.block, p.Hp, p.Wp, p.tH, p.tW, U,
                                  p.Kg, p.Kb, p.tblock, kchunk or p.kchunk, scratch, y,
                                  np.zeros(0, dt) if bias is None else bias, alpha, beta,
                                  NTHREADS)


SCALINGS = {"nchw_plain": ("NCHW", 1.0, 0.0, False),
            "nhwc_alpha_beta_bias": ("NHWC", 0.5, -1.25, True),
            "strided_bias": ("strided", 2.0, 0.0, True)}


def _result(shape, target, dtype, rng):
    N, C, H, W = shape
    if target == "NCHW":
        return rng.standard_normal(shape).astype(dtype)
    if target == "NHWC":
        return rng.standard_normal((N, H, W, C)).astype(dtype).transpose(0, 3, 1, 2)
    return rng.standard_normal((N, C, H, 2 * W)).astype(dtype)[..., ::-2]


def _scaled(ref, y0, bias, alpha, beta):
    if bias is not None:
        ref = ref + bias.astype(np.float64)[None, :, None, None]
    return alpha * ref + (beta * y0.astype(np.float64) if beta else 0)


@pytest.mark.parametrize("scaling", sorted(SCALINGS))
@pytest.mark.parametrize("case", sorted(FORWARD_CASES))
def test_forward(kmods, schedule, case, scaling, dtype, rtol):
    """Also with one output-channel block per job where there are several (kchunk 1)."""
    g = _geometry(*FORWARD_CASES[case], dtype)
    p = schedule.forward_problem(g)
    target, alpha, beta, with_bias = SCALINGS[scaling]
    rng = np.random.default_rng(33)
    x = rng.standard_normal((g.N, g.C, g.H, g.W)).astype(dtype)
    w = rng.standard_normal((g.K, g.Cg, 3, 3)).astype(dtype)
    bias = rng.standard_normal(g.K).astype(dtype) if with_bias else None
    shape = (g.N, g.K, g.OH, g.OW)
    y0 = _result(shape, target, dtype, np.random.default_rng(36))
    expected = _scaled(ref_conv2d(x, w, pads=g.pads, groups=g.groups), y0, bias, alpha, beta)
    for kchunk in sorted({p.kchunk, 1}):
        y = _result(shape, target, dtype, np.random.default_rng(36))   # y0, same layout
        if beta == 0:
            y[...] = np.nan                    # beta == 0 never reads y
        _run_forward(kmods, p, x, w, y, bias, alpha, beta, kchunk)
        assert_close(y, expected, rtol=rtol,
                     what=f"{kmods.winograd.ISA} winograd forward {case} kchunk {kchunk}")


# name: (N, C, H, W, K, padding, groups): pads above 2 make the forward problem crop.
BACKWARD_DATA_CASES = {
    "pad1": (2, 3, 5, 6, 4, 1, 1),
    "pad0_groups": (1, 4, 6, 5, 6, 0, 2),
    "pad3_crops": (1, 2, 3, 4, 5, ((3, 0), (1, 3)), 1),
}


@pytest.mark.parametrize("case", sorted(BACKWARD_DATA_CASES))
def test_forward_as_backward_data(kmods, schedule, case, dtype, rtol):
    """Backward-data as winograd.py runs it: the forward kernel on dy with the filter rotated
    by 180 degrees and channel roles swapped per group, padded by 2 - pad (negative: crop)."""
    g = _geometry(*BACKWARD_DATA_CASES[case], dtype)
    p = schedule.backward_data_problem(g)
    rng = np.random.default_rng(34)
    dy = rng.standard_normal((g.N, g.K, g.OH, g.OW)).astype(dtype)
    w = rng.standard_normal((g.K, g.Cg, 3, 3)).astype(dtype)
    wr = w.reshape(g.groups, g.Kg, g.Cg, 3, 3)[:, :, :, ::-1, ::-1].transpose(0, 2, 1, 3, 4)
    dx = np.full((g.N, g.C, g.H, g.W), np.nan, dtype)
    _run_forward(kmods, p, dy, wr.reshape(g.C, g.Kg, 3, 3), dx, None, 1.0, 0.0)
    expected = ref_backward_data(dy, w, dx.shape, pads=g.pads, groups=g.groups)
    assert_close(dx, expected, rtol=rtol,
                 what=f"{kmods.winograd.ISA} winograd backward-data {case}")


# -- backward_weight + weight_gradient -----------------------------------------------------

# name: (N, C, H, W, K, padding, groups)
WEIGHT_CASES = {
    "pad1_odd": (2, 3, 5, 7, 5, 1, 1),
    "groups2_batch": (3, 4, 4, 6, 6, 1, 2),
    "wide_channels": (1, 20, 6, 5, 3, ((1, 0), (2, 1)), 1),
    "many_filters": (1, 2, 4, 4, 37, 1, 1),
    "depthwise": (2, 3, 5, 4, 3, 0, 3),
}

# (parts, splits, kchunk, cchunk) overriding the schedule's; None: the schedule's own.
# splits 64 leaves most splits without tiles (their partial sums must be zeroed).
JOB_SPLITS = {"schedule": None, "halves_3_splits": (2, 3, 1, 1),
              "many_empty_splits": (1, 64, 1, 1), "whole_chunks": (2, 1, 99, 99)}


@pytest.mark.parametrize("jobs", sorted(JOB_SPLITS))
@pytest.mark.parametrize("case", sorted(WEIGHT_CASES))
def test_backward_weight(kmods, schedule, case, jobs, dtype, rtol):
    g = _geometry(*WEIGHT_CASES[case], dtype)
    s = schedule.weight_gradient_schedule(g)
    p = s.problem
    parts, splits, kchunk, cchunk = JOB_SPLITS[jobs] or (s.parts, s.splits, s.kchunk, s.cchunk)
    kchunk, cchunk = min(kchunk, p.Kb), min(cchunk, p.ncb)
    rng = np.random.default_rng(35)
    x = rng.standard_normal((g.N, g.C, g.H, g.W)).astype(dtype)
    dy = rng.standard_normal((g.N, g.K, g.OH, g.OW)).astype(dtype)
    packed_x = np.empty(p.packed_input_size(), dtype)
    assert _layout.pack_input(x, packed_x, p.G, p.Cg, p.Cg, 1, p.block, p.pt, p.pl, p.Hp,
                              p.Wp, NTHREADS) == 0
    packed_dy = np.empty(p.packed_grad_size(), dtype)
    assert _layout.pack_input(dy, packed_dy, g.groups, g.Kg, g.Kg, 1, p.KB, 0, 0, 2 * p.tH,
                              2 * p.tW, NTHREADS) == 0
    pad = kmods.winograd.MATRIX_PAD[dtype.name]
    # Enough scratch for any parts / chunks: 16 matrices of all Cp channels.
    per_thread = max(p.scratch_per_thread,
                     16 * (p.tblock * (p.Cp + pad) + pad) + 16 * (p.tblock * p.KB + pad))
    scratch = np.full(NTHREADS * per_thread, np.nan, dtype)
    partial = np.full(splits * p.partial_size(), np.nan, dtype)
    _kernel(kmods, "backward_weight", dtype)(
        packed_x, packed_dy, g.N, g.groups, p.ncb, p.block, p.Hp, p.Wp, p.Kb, p.tH, p.tW,
        p.tblock, splits, kchunk, cchunk, parts, scratch, partial, NTHREADS)
    assert np.all(np.isfinite(partial)), "a partial sum was not written"
    grad = np.full((g.K, g.Cg, 3, 3), np.nan, dtype)
    _kernel(kmods, "weight_gradient", dtype)(partial, splits, g.groups, p.Kb, p.Cp, grad,
                                             NTHREADS)
    expected = ref_backward_weight(dy, x, (g.K, g.Cg, 3, 3), pads=g.pads, groups=g.groups)
    assert_close(grad, expected, rtol=rtol,
                 what=f"{kmods.winograd.ISA} winograd backward-weight {case}")
