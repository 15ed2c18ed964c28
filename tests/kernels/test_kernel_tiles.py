"""The tile runner ``run_jobs_*`` of every SIMD level on hand-built job tables.

The expected result is a NumPy evaluation of the job semantics documented in
``cconv/_kernels/_tiles.pyx.tp``: for each job and each of its ``inner`` iterations,
``acc[p, :] += A[a + red[j] + rows[p]] * B[b + j*b_stride : ... + width]`` (depthwise: ``A`` a
vector of ``width`` lanes), rows ``p < nrows`` stored whole (plain) or through the epilogue
``out[outs[p] + k*col_stride] = alpha * (acc + bias[k]) + beta * out`` for ``k < ncols``.
"""

import numpy as np
import pytest

from cconv.algorithms.direct_schedule import JOB_FIELDS, OffsetTable, job_table, row_tiles

pytestmark = pytest.mark.kernels

KINDS = ("dense", "narrow", "depthwise")


def tile_shape(tiles, kind, dtype):
    """(columns per tile, rows per tile) of ``kind`` on one level."""
    vl = tiles.VECTOR_LENGTH[np.dtype(dtype).name]
    width = 2 * vl if kind == "dense" else vl
    rows = 2 * tiles.TILE_ROWS if kind == "narrow" else tiles.TILE_ROWS
    return width, rows


def ref_run_jobs(kind, width, A, B, out, jobs, table, col_stride=1, bias=None, alpha=1.0,
                 beta=0.0):
    """The documented job semantics, in float64, on a copy of ``out``."""
    A = A.astype(np.float64)
    B = B.astype(np.float64)
    out = out.astype(np.float64)
    lanes = np.arange(width)
    plain_call = col_stride == 1 and bias is None and alpha == 1 and beta == 0
    for row in jobs:
        f = dict(zip(JOB_FIELDS, (int(v) for v in row)))
        nrows, length, ncols = f["nrows"], f["length"], f["ncols"]
        rows = table[f["rows"] + np.arange(nrows)]
        outs = f["out"] + table[f["outs"] + np.arange(nrows)]
        red = table[f["red"] + np.arange(length)]
        b_stride = f["b_stride"] or width
        acc = np.zeros((nrows, width))
        for it in range(f["inner"]):
            a0 = f["a"] + it * f["a_step"]
            b0 = f["b"] + it * f["b_step"]
            if it > 0:                 # later iterations accumulate onto the stored tile
                acc = out[outs[:, None] + lanes].copy()
            Bm = B[b0 + np.arange(length)[:, None] * b_stride + lanes]         # (L, width)
            if kind == "depthwise":
                Am = A[a0 + rows[:, None, None] + red[None, :, None] + lanes]  # (P, L, width)
                acc += (Am * Bm[None]).sum(axis=1)
            else:
                acc += A[a0 + rows[:, None] + red[None, :]] @ Bm              # (P, width)
            if plain_call and ncols == width:
                out[outs[:, None] + lanes] = acc
                continue
            index = outs[:, None] + np.arange(ncols) * col_stride
            b = 0.0 if bias is None else bias.astype(np.float64)[f["bias"] + np.arange(ncols)]
            value = alpha * (acc[:, :ncols] + b)
            out[index] = value if beta == 0 else value + beta * out[index]
    return out


def _run(tiles, kind, A, B, out, jobs, table, **kw):
    run = getattr(tiles, f"run_jobs_{A.dtype.name}")
    run(tiles.KINDS[kind], A, B, out, jobs, table, kw.pop("nthreads", 2), **kw)


def _assert_matches(actual, expected, dtype):
    rtol = 2e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=10 * rtol)


def _blocked_jobs(width, T, rng):
    """Jobs writing disjoint ``T x width`` blocks of a blocked buffer: full and partial row
    counts, packed and strided B rows, several inner iterations, an empty reduction and one
    partial column count (which goes through the epilogue); the broadcast tiles asking
    for their input no, a few, one and more steps ahead than the reduction has (the last
    steps ask for nothing: an ask past the reduction's table would read outside it)."""
    # (nrows, length, extra b_stride, inner, ncols, ahead)
    specs = [(T, 5, 0, 1, width, 0), (1, 3, 3, 1, width, 2), (T - 1, 7, 0, 3, width, 1),
             (T, 0, 0, 1, width, 4), (2, 4, 1, 1, width - 1, 9), (T, 9, 0, 2, width, 3),
             (T, 40, 0, 1, width, 32)]
    table = OffsetTable()
    outs = table.add(np.arange(T) * width)
    columns = {name: [] for name in JOB_FIELDS}
    for index, (nrows, length, extra, inner, ncols, ahead) in enumerate(specs):
        rows = rng.permutation(40)[:T]
        values = dict(a=rng.integers(0, 10), b=rng.integers(0, 10),
                      red=table.add(rng.integers(0, 30, length)), length=length,
                      rows=table.add(rows), outs=outs, nrows=nrows, out=index * T * width,
                      inner=inner, a_step=7 if inner > 1 else 0,
                      b_step=11 if inner > 1 else 0, ncols=ncols, bias=0,
                      b_stride=width + extra if extra else 0, ahead=ahead)
        for name in JOB_FIELDS:
            columns[name].append(values[name])
    jobs = job_table(**{name: np.array(v) for name, v in columns.items()})
    return jobs, table.array(), len(specs) * T * width


@pytest.mark.parametrize("nthreads", [1, 2])
@pytest.mark.parametrize("kind", KINDS)
def test_run_jobs_blocked(kmods, kind, dtype, nthreads):
    """Plain stores into a blocked buffer (and a partial column count through the epilogue):
    rows past nrows and columns past ncols stay untouched."""
    tiles = kmods.tiles
    width, T = tile_shape(tiles, kind, dtype)
    rng = np.random.default_rng(10)
    jobs, table, size = _blocked_jobs(width, T, rng)
    A = rng.standard_normal(10 + 2 * 7 + 40 + 30 + width + 8).astype(dtype)
    B = rng.standard_normal(10 + 2 * 11 + 40 * (width + 3) + width + 8).astype(dtype)
    out = np.full(size + 5, 3.25, dtype)        # the tail is never written
    expected = ref_run_jobs(kind, width, A, B, out, jobs, table)
    _run(tiles, kind, A, B, out, jobs, table, nthreads=nthreads)
    _assert_matches(out, expected, dtype)
    # The reference must not be trivially the input: most elements were written.
    assert np.count_nonzero(expected != 3.25) > size // 2


def _target_jobs(width, T, channels, pixels, length, layout, rng):
    """Jobs writing a (channels x pixels) result straight into an NCHW- or NHWC-ordered
    array: column blocks of ``width`` (the last partial) times row tiles of ``T`` pixels
    (the last partial), as the forward pass does for its NCHW / NHWC targets."""
    table = OffsetTable()
    starts, nrows = row_tiles(pixels, T)
    rows = table.add(rng.integers(0, 40, pixels))
    red = table.add(rng.integers(0, 30, length))
    if layout == "NCHW":
        outs, col_stride = table.add(np.arange(pixels)), pixels
    else:
        outs, col_stride = table.add(np.arange(pixels) * channels), 1
    cb = np.arange(-(-channels // width))[:, None]
    first = cb * width
    jobs = job_table(a=0, b=cb * length * width, red=red, length=length, rows=rows + starts,
                     outs=outs + starts, nrows=nrows, ncols=np.minimum(width, channels - first),
                     bias=first, out=first * pixels if layout == "NCHW" else first)
    return jobs, table.array(), col_stride


SCALINGS = {"plain": (1.0, 0.0, False), "bias": (1.0, 0.0, True),
            "alpha_bias": (0.5, 0.0, True), "alpha_beta_bias": (-1.5, 0.75, True),
            "beta_only": (1.0, 2.0, False)}


@pytest.mark.parametrize("scaling", sorted(SCALINGS))
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("kind", KINDS)
def test_run_jobs_epilogue(kmods, kind, layout, scaling, dtype):
    """The epilogue into a strided (NCHW: col_stride = pixels) or channel-innermost target,
    partial row tiles and a partial last column block, bias / alpha / beta."""
    tiles = kmods.tiles
    width, T = tile_shape(tiles, kind, dtype)
    channels, pixels, length = 2 * width + 3, 2 * T + 3, 6
    rng = np.random.default_rng(11)
    jobs, table, col_stride = _target_jobs(width, T, channels, pixels, length, layout, rng)
    alpha, beta, with_bias = SCALINGS[scaling]
    A = rng.standard_normal(40 + 30 + width + 8).astype(dtype)
    B = rng.standard_normal(len(jobs) * length * width + width).astype(dtype)
    bias = rng.standard_normal(channels).astype(dtype) if with_bias else None
    out = rng.standard_normal(channels * pixels + 7).astype(dtype)
    if beta == 0:
        out[:channels * pixels] = np.nan           # beta == 0 never reads the target
    expected = ref_run_jobs(kind, width, A, B, out, jobs, table, col_stride, bias, alpha, beta)
    _run(tiles, kind, A, B, out, jobs, table, col_stride=col_stride, bias=bias, alpha=alpha,
         beta=beta)
    assert np.all(np.isfinite(out[:channels * pixels])), "an element was not written"
    _assert_matches(out, expected, dtype)


@pytest.mark.parametrize("kind", KINDS)
def test_run_jobs_accumulates_over_inner(kmods, kind, dtype):
    """``inner`` iterations sum: two iterations over halves of a reduction equal one
    iteration over the whole (the backward-weight split over images)."""
    tiles = kmods.tiles
    width, T = tile_shape(tiles, kind, dtype)
    rng = np.random.default_rng(12)
    L = 8
    A = rng.standard_normal(2 * 64 + width).astype(dtype)
    B = rng.standard_normal(2 * L * width).astype(dtype)
    table = OffsetTable()
    common = dict(red=table.add(rng.integers(0, 20, L)), rows=table.add(rng.integers(0, 40, T)),
                  outs=table.add(np.arange(T) * width), nrows=T, ncols=width, length=L)
    split = job_table(a=0, a_step=64, b=0, b_step=L * width, inner=2, **common)
    out = np.zeros(T * width, dtype)
    _run(tiles, kind, A, B, out, split, table.array())
    first = np.zeros_like(out)
    second = np.zeros_like(out)
    _run(tiles, kind, A, B, first, job_table(a=0, b=0, **common), table.array())
    _run(tiles, kind, A, B, second, job_table(a=64, b=L * width, **common), table.array())
    _assert_matches(out, first.astype(np.float64) + second, dtype)
    assert np.any(second != 0) and np.any(first != 0)


def test_run_jobs_validates(kmods, dtype):
    tiles = kmods.tiles
    run = getattr(tiles, f"run_jobs_{dtype.name}")
    z = np.zeros(64, dtype)
    jobs = job_table(ncols=1, nrows=1)
    table = np.zeros(4, np.int64)
    with pytest.raises(ValueError):
        run(7, z, z, z, jobs, table, 1)
    with pytest.raises(ValueError):
        run(tiles.KINDS["dense"], z, z, z, np.ascontiguousarray(jobs[:, :-1]), table, 1)
    out = np.full(64, 5.0, dtype)
    run(tiles.KINDS["dense"], z, z, out, np.zeros((0, len(JOB_FIELDS)), np.int64), table, 1)
    assert np.all(out == 5.0)


def test_level_constants(kmods, level):
    """The constants the schedules size buffers with agree with the module's level."""
    tiles = kmods.tiles
    assert tiles.ISA == level
    assert tiles.JOB_FIELDS == JOB_FIELDS
    assert tiles.VECTOR_LENGTH["float32"] == 2 * tiles.VECTOR_LENGTH["float64"]
    assert tiles.ROWS == {"dense": tiles.TILE_ROWS, "narrow": 2 * tiles.TILE_ROWS,
                          "depthwise": tiles.TILE_ROWS}
    assert kmods.winograd.ISA == level
    assert kmods.winograd.VECTOR_LENGTH == tiles.VECTOR_LENGTH


def test_levels_under_test():
    """Every level the library could select is among those parametrizing these tests, and
    the portable baseline always is."""
    from cconv import _simd
    levels = _simd.available_levels()
    assert "base" in levels
    assert _simd.LEVEL in levels
    assert levels == [level for level in _simd.LEVELS if level in levels]   # best first
