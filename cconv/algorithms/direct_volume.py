"""3-D direct convolution with the depth taps folded into the tile kernels' reduction.

The depth-tap loop (``cconv._nd_execute``) runs a 3-D convolution as one 2-D call per depth
tap, each packing its batch of input slices and reading and writing the whole output: a
volume is packed once per depth tap and the output crosses memory once per tap.  Here the
volume is packed once and every output element sums all its ``Cg * T * R * S`` products in
the register tiles of ``cconv/_kernels/_tiles.pyx.tp``, written once through their
epilogue.  The tile kernels walk offset tables, so a third spatial axis is only more
offsets:

* the packed input is ``[Dp][N][G][Cb][Hp][Wp][CB]``: the 2-D packed layout of each
  zero-padded depth slice (``cconv._kernels._layout.pack_input`` on the slice's 4-D view),
  the ``Dp = D + front + back`` slices one after another, the padding slices zero;
* a reduction step ``(cb, t, r, s, c)`` reads offset ``cb*plane + t*dd*slice +
  (r*dh*Wp + s*dw)*CB + c`` and an output pixel ``(od, oh, ow)`` starts at ``od*sd*slice +
  (oh*sh*Wp + ow*sw)*CB`` (``slice`` = elements per packed depth slice, ``plane`` = per
  channel block of one slice);
* the weight is packed as the 2-D forward weight of a (T*R) x S kernel: taps in (t, r, s)
  order, the order of the reduction;
* jobs write NCDHW or NDHWC results straight (``OD*OH*OW`` pixels per channel).

Backward-data at unit stride is the forward of the output gradient with the flipped,
channel-swapped weight and padding ``(k-1)*d - pad`` per side, so it runs here too (zero
padding, finite weights, ``pad <= (k-1)*d``).  The weight gradient stays on the tap loop:
folded the same way (rows (channel, tap), the reduction over the batch's pixels) it measured
0.55-1.04x the tap loop's direct kernels (AMD EPYC Zen 4, AVX-512; 128 channels on 8x28x28:
104 against 59 ms on 2 threads), each job streaming the whole output gradient of its piece.
Every output element is summed by one job in a fixed order: results do not depend on the
thread count.  Which 3-D calls run here is decided above the algorithms, in
``cconv._nd_execute.folds_depth`` (measured per shape class).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import TYPE_CHECKING, Any, Optional

import numpy as np
import numpy.typing as npt

from .. import _workspace
from .._geometry import flipped_pads
from .._kernels import _layout
from .._nd_geometry import NdGeometry, channels_last
from .._simd import tiles
from .direct import NO_BIAS
from .direct_schedule import (OffsetTable, _broadcast_tile, _placement, channel_blocks,
                              job_table, read_ahead, row_tiles)

if TYPE_CHECKING:
    from .._workspace import _Scope

Array = npt.NDArray[Any]


@dataclasses.dataclass(frozen=True)
class VolumeLayout:
    """The packed volume and the offsets of one 3-D geometry (see the module docstring):
    tile ``kind``, its ``tile_rows`` and ``KB`` columns, ``Kb`` column blocks and ``Cb``
    channel blocks of ``CB`` per group, the padded sizes, ``plane`` (elements of one channel
    block of one padded slice), ``slice_size`` (of one packed depth slice), and the offsets
    of every kernel tap and output pixel in the packed volume."""

    kind: str
    tile_rows: int
    KB: int
    Kb: int
    CB: int
    Cb: int
    Dp: int
    Hp: int
    Wp: int
    plane: int
    slice_size: int
    taps: npt.NDArray[np.int64]
    pixels: npt.NDArray[np.int64]


@dataclasses.dataclass(frozen=True)
class VolumePass:
    """Jobs of one folded 3-D pass over the buffers of ``layout``, writing a result whose
    output columns (channels) lie ``col_stride`` elements apart."""

    layout: VolumeLayout
    jobs: npt.NDArray[np.int64]
    table: npt.NDArray[np.int64]
    col_stride: int


def applies(geom: NdGeometry) -> bool:
    """True for the 3-D problems the folded kernels run: zero padding, not depthwise (the
    depthwise kernels have their own 3-D path)."""
    return (geom.rank == 3 and geom.padding_mode == "zeros"
            and not (geom.groups == geom.C and geom.Cg == 1))


@functools.lru_cache(maxsize=64)
def volume_layout(geom: NdGeometry) -> VolumeLayout:
    """The :class:`VolumeLayout` of ``geom``."""
    vl = tiles.VECTOR_LENGTH[geom.dtype.name]
    (pf, pk), (pt, pb), (pl, pr) = geom.pads
    D, H, W = geom.spatial
    T, R, S = geom.kernel
    sd, sh, sw = geom.stride
    dd, dh, dw = geom.dilation
    OD, OH, OW = geom.out_spatial
    Hp, Wp = H + pt + pb, W + pl + pr
    kind, tile_rows, KB = _broadcast_tile(geom.Kg, vl, tiles.TILE_ROWS)
    Cb, CB = channel_blocks(geom.Cg)
    plane = Hp * Wp * CB
    slice_size = geom.N * geom.groups * Cb * plane
    t, r, s = np.meshgrid(np.arange(T), np.arange(R), np.arange(S), indexing="ij")
    taps = (t * dd * slice_size + (r * dh * Wp + s * dw) * CB).ravel().astype(np.int64)
    od, oh, ow = np.meshgrid(np.arange(OD), np.arange(OH), np.arange(OW), indexing="ij")
    pixels = (od * sd * slice_size + (oh * sh * Wp + ow * sw) * CB).ravel().astype(np.int64)
    return VolumeLayout(kind, tile_rows, KB, -(-geom.Kg // KB), CB, Cb, D + pf + pk, Hp, Wp,
                        plane, slice_size, taps, pixels)


def _channel_taps(lay: VolumeLayout) -> npt.NDArray[np.int64]:
    """Offsets of the (channel block, tap, channel) steps, in the packed weight's order."""
    return (np.arange(lay.Cb)[:, None, None] * lay.plane + lay.taps[None, :, None]
            + np.arange(lay.CB)[None, None, :]).ravel()


@functools.lru_cache(maxsize=64)
def _tap_order(taps: int) -> Array:
    """``arange(taps)``, read-only and shared: the weight packer's tap order."""
    order = np.arange(taps, dtype=np.intp)
    order.flags.writeable = False
    return order


@functools.lru_cache(maxsize=64)
def schedule(geom: NdGeometry, target: str) -> VolumePass:
    """The jobs of ``geom``'s forward writing a contiguous ``target`` ("NCDHW" / "NDHWC"):
    rows are output pixels, the reduction runs over (channel block, tap, channel)."""
    lay = volume_layout(geom)
    G, Kg, KB, Kb = geom.groups, geom.Kg, lay.KB, lay.Kb
    reduction = _channel_taps(lay)
    npix = lay.pixels.size
    starts, nrows = row_tiles(npix, lay.tile_rows)
    table = OffsetTable()
    red = table.add(reduction)
    rows = table.add(lay.pixels)
    n = np.arange(geom.N)[:, None, None, None]
    grp = np.arange(G)[None, :, None, None]
    kb = np.arange(Kb)[None, None, :, None]
    place, scale, col_stride = _placement("NCHW" if target == "NCDHW" else "NHWC", n,
                                          grp * Kg + kb * KB, np.minimum(KB, Kg - kb * KB),
                                          geom.K, npix, KB, np.zeros(1, np.int64))
    outs = table.add(np.arange(npix) * scale)
    jobs = job_table(a=(n * G + grp) * lay.Cb * lay.plane,
                     b=(grp * Kb + kb) * reduction.size * KB, red=red, length=reduction.size,
                     rows=rows + starts, outs=outs + starts, nrows=nrows,
                     ahead=read_ahead(geom.dtype, tiles.VECTOR_LENGTH[geom.dtype.name],
                                      any(st > 1 for st in geom.stride)),
                     **place)
    return VolumePass(lay, jobs, table.array(), col_stride)


def _oidhw(weight: Array, geom: NdGeometry) -> Array:
    """The weight as a contiguous (K, C/groups, T, R, S) array of the compute dtype."""
    w = weight.astype(geom.dtype, copy=False)
    if channels_last(geom.weight_layout):  # DHWIO
        w = w.transpose(4, 3, 0, 1, 2)
    return np.ascontiguousarray(w)


def _slice_view(x: Array, d: int, cl: bool) -> Array:
    """Depth slice ``d`` of a 5-D activation as a logical (N, C, H, W) view."""
    view: Array = x[:, d].transpose(0, 3, 1, 2) if cl else x[:, :, d]
    return view


def _pack_volume(geom: NdGeometry, x: Array, ws: _Scope, nthreads: int) -> Array:
    """``x`` packed as ``[Dp][N][G][Cb][Hp][Wp][CB]`` into a buffer of the scope ``ws``:
    each depth slice by the 2-D packer, the depth padding's slices zero."""
    lay, cl = volume_layout(geom), geom.channels_last
    (pf, _), (pt, _), (pl, _) = geom.pads
    D = geom.spatial[0]
    xc = x.astype(geom.dtype, copy=False)
    packed = ws.empty(lay.Dp * lay.slice_size, geom.dtype)
    slices = packed.reshape(lay.Dp, lay.slice_size)
    slices[:pf] = 0
    slices[pf + D:] = 0
    for d in range(D):
        _layout.pack_input(_slice_view(xc, d, cl), slices[pf + d], geom.groups, geom.Cg,
                           geom.Cg, 1, lay.CB, pt, pl, lay.Hp, lay.Wp, nthreads)
    return packed


def _run(geom: NdGeometry) -> Any:
    return getattr(tiles, _RUN_JOBS[geom.dtype])


# the tile kernels' entry per compute dtype (``dtype.name`` is computed in Python on every
# access)
_RUN_JOBS = {np.dtype(name): f"run_jobs_{name}" for name in ("float32", "float64")}


def forward(geom: NdGeometry, x: Array, weight: Array, bias: Optional[Array], y: Array,
            alpha: float, beta: float, nthreads: int) -> None:
    """``y = alpha * (conv3d(x, weight) + bias) + beta * y`` of a validated problem
    (:func:`applies`) in ``geom``'s layouts; ``y`` a C-contiguous array of the compute
    dtype that no operand overlaps (``beta == 0`` never reads it)."""
    p = schedule(geom, "NDHWC" if geom.channels_last else "NCDHW")
    lay = p.layout
    b = (NO_BIAS[geom.dtype] if bias is None
         else np.ascontiguousarray(bias, dtype=geom.dtype))
    taps = math.prod(geom.kernel)  # (numpy.prod of a tuple: ~3 us of a small call)
    with _workspace.scope() as ws:
        packed_x = _pack_volume(geom, x, ws, nthreads)
        packed_w = ws.empty(geom.groups * lay.Kb * lay.Cb * taps * lay.CB * lay.KB,
                            geom.dtype)
        _layout.pack_weight(_oidhw(weight, geom).reshape(-1), packed_w, geom.groups, geom.Kg,
                            geom.Cg, taps, False, lay.KB, lay.CB,
                            _tap_order(taps), nthreads)
        _run(geom)(tiles.KINDS[lay.kind], packed_x, packed_w, y.reshape(-1), p.jobs, p.table,
                   nthreads, p.col_stride, b, alpha, beta)


def backward_data_geometry(geom: NdGeometry) -> Optional[NdGeometry]:
    """The forward problem whose result is ``geom``'s data gradient (the output gradient
    correlated with the flipped, channel-swapped weight), or None where that does not hold
    (stride above 1, or padding beyond ``(k-1)*d`` on a side)."""
    if any(s != 1 for s in geom.stride):
        return None
    pads = flipped_pads(geom.kernel, geom.dilation, geom.pads)
    if any(lo < 0 or hi < 0 for lo, hi in pads):
        return None
    return dataclasses.replace(geom, C=geom.K, K=geom.C, spatial=geom.out_spatial,
                               pads=pads, weight_layout="OIDHW")


def flipped_weight(weight: Array, geom: NdGeometry) -> Array:
    """(C, K/groups, T, R, S): per group, the weight with input and output channels swapped
    and every spatial axis reversed."""
    w = _oidhw(weight, geom)
    G, Kg, Cg = geom.groups, geom.Kg, geom.Cg
    per_group = w.reshape(G, Kg, Cg, *geom.kernel)[..., ::-1, ::-1, ::-1]
    return np.ascontiguousarray(per_group.transpose(0, 2, 1, 3, 4, 5)).reshape(
        G * Cg, Kg, *geom.kernel)


def backward_data(geom: NdGeometry, dy: Array, weight: Array, y: Array, alpha: float,
                  beta: float, nthreads: int) -> bool:
    """conv3d's data gradient into ``y`` (as :func:`forward` writes it) as a folded forward
    (see :func:`backward_data_geometry`); False, having written nothing, where that does not
    apply: also for a non-finite weight (the correlation would multiply it by the zero
    padding where the definition, a scatter over existing outputs, has no product)."""
    inner = backward_data_geometry(geom)
    if inner is None or not applies(inner):
        return False
    w = weight.astype(geom.dtype, copy=False)
    if not np.isfinite(w).all():
        return False
    forward(inner, dy, flipped_weight(w, geom), None, y, alpha, beta, nthreads)
    return True
