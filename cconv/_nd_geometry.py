"""Argument validation for 1-D and 3-D convolution: user arguments in, one ``NdGeometry`` out.

The rank-generic counterpart of ``cconv._geometry``: the same rules and the same messages,
with shapes, layouts and axes of the spatial rank (1: width; 3: depth, height, width).
Everything downstream (the H = 1 lift of 1-D problems onto the 2-D functions, the depth-tap
loop of 3-D ones) trusts an ``NdGeometry``: sizes positive, every output at least one pixel,
every size product representable in 64 bits.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Dict, Sequence, Tuple

import numpy as np

from . import _geometry as _geometry_module

# cconv's 2-D modules carry no type hints: an Any-typed alias keeps ``mypy --strict`` from
# flagging every call into them.
_g2: Any = _geometry_module

__all__ = ["AXES", "LAYOUTS", "WEIGHT_LAYOUTS", "NdGeometry", "check_shape",
           "make_nd_geometry", "make_nd_transpose_geometry", "check_transpose_grad_out"]

Pads = Tuple[Tuple[int, int], ...]

# Layout names per spatial rank: channels first, then channels last (oneDNN's NCX / NXC).
LAYOUTS: Dict[int, Tuple[str, str]] = {1: ("NCW", "NWC"), 3: ("NCDHW", "NDHWC")}
WEIGHT_LAYOUTS: Dict[int, Tuple[str, str]] = {1: ("OIW", "WIO"), 3: ("OIDHW", "DHWIO")}
AXES: Dict[int, Tuple[str, ...]] = {1: ("width",), 3: ("depth", "height", "width")}
# How error messages spell the axes of each layout.
_DIMS = {"NCW": "(N, C, W)", "NWC": "(N, W, C)", "NCDHW": "(N, C, D, H, W)",
         "NDHWC": "(N, D, H, W, C)", "OIW": "(K, C/groups, kW)", "WIO": "(kW, C/groups, K)",
         "OIDHW": "(K, C/groups, kD, kH, kW)", "DHWIO": "(kD, kH, kW, C/groups, K)"}
_INT64_MAX = 2**63 - 1


def channels_last(layout: str) -> bool:
    """True for ``"NWC"`` / ``"NDHWC"`` (and the weight layouts ``"WIO"`` / ``"DHWIO"``)."""
    return not layout.startswith(("NC", "OI"))


def to_layout(n: int, c: int, spatial: Sequence[int], layout: str) -> Tuple[int, ...]:
    """An activation shape in ``layout`` order from batch, channels and spatial sizes."""
    if channels_last(layout):
        return (n, *spatial, c)
    return (n, c, *spatial)


def from_layout(shape: Sequence[int], layout: str) -> Tuple[int, int, Tuple[int, ...]]:
    """``(N, C, spatial)`` of an activation shape in ``layout`` order."""
    if channels_last(layout):
        return shape[0], shape[-1], tuple(shape[1:-1])
    return shape[0], shape[1], tuple(shape[2:])


def weight_to_layout(k: int, cg: int, kernel: Sequence[int],
                     weight_layout: str) -> Tuple[int, ...]:
    """A weight shape in ``weight_layout`` order from (out channels, in channels per group,
    kernel sizes)."""
    if channels_last(weight_layout):
        return (*kernel, cg, k)
    return (k, cg, *kernel)


def weight_from_layout(shape: Sequence[int],
                       weight_layout: str) -> Tuple[int, int, Tuple[int, ...]]:
    """``(K, C/groups, kernel)`` of a weight shape in ``weight_layout`` order."""
    if channels_last(weight_layout):
        return shape[-1], shape[-2], tuple(shape[:-2])
    return shape[0], shape[1], tuple(shape[2:])


@dataclasses.dataclass(frozen=True)
class NdGeometry:
    """A validated forward convolution problem of spatial rank 1 or 3.

    Shapes are of the *forward* convolution: input (N, C, *spatial), weight
    (K, C/groups, *kernel), output (N, K, *out_spatial), whatever the layouts.
    """

    N: int
    C: int
    K: int
    spatial: Tuple[int, ...]
    kernel: Tuple[int, ...]
    stride: Tuple[int, ...]
    dilation: Tuple[int, ...]
    pads: Pads
    groups: int
    layout: str
    weight_layout: str
    dtype: np.dtype[Any]  # what the 2-D calls compute in: float32 or float64
    padding_mode: str = "zeros"
    padding_value: float = 0.0

    @property
    def rank(self) -> int:
        """The number of spatial axes."""
        return len(self.spatial)

    @property
    def Cg(self) -> int:
        """Input channels per group."""
        return self.C // self.groups

    @property
    def Kg(self) -> int:
        """Output channels per group."""
        return self.K // self.groups

    @property
    def channels_last(self) -> bool:
        """True for the ``"NWC"`` / ``"NDHWC"`` layouts."""
        return channels_last(self.layout)

    @functools.cached_property
    def out_spatial(self) -> Tuple[int, ...]:
        """The output's spatial sizes."""
        return tuple(int(_g2.conv_output_size(size, k, s, d, lo, hi)) for size, k, s, d, (lo, hi)
                     in zip(self.spatial, self.kernel, self.stride, self.dilation, self.pads))

    @property
    def flops(self) -> int:
        """Multiply-adds x 2 of one pass of the direct convolution."""
        return (2 * self.N * self.K * math.prod(self.out_spatial) * self.Cg
                * math.prod(self.kernel))

    def input_shape(self) -> Tuple[int, ...]:
        """The forward input's shape in ``layout`` order."""
        return to_layout(self.N, self.C, self.spatial, self.layout)

    def output_shape(self) -> Tuple[int, ...]:
        """The forward output's shape in ``layout`` order."""
        return to_layout(self.N, self.K, self.out_spatial, self.layout)

    def weight_shape(self) -> Tuple[int, ...]:
        """The weight's shape in ``weight_layout`` order."""
        return weight_to_layout(self.K, self.Cg, self.kernel, self.weight_layout)


# -- pieces ---------------------------------------------------------------------------------

def _is_int(value: object) -> bool:
    return bool(_g2._is_int(value))


def _rank_word(rank: int) -> str:
    return "an int or (int,)" if rank == 1 else f"an int or {rank} ints"


def normalize_tuple(value: Any, name: str, rank: int, *, minimum: int) -> Tuple[int, ...]:
    """An int or ``rank`` ints as a ``rank``-tuple, each checked ``>= minimum``."""
    if _is_int(value):
        items: Tuple[Any, ...] = (int(value),) * rank
    else:
        try:
            items = tuple(value)
        except TypeError:
            raise TypeError(f"{name} must be {_rank_word(rank)}, got {value!r}") from None
        if len(items) != rank or not all(_is_int(v) for v in items):
            raise TypeError(f"{name} must be {_rank_word(rank)}, got {value!r}")
    result = tuple(int(v) for v in items)
    for v in result:
        if v < minimum:
            kind = "positive" if minimum == 1 else f">= {minimum}"
            raise ValueError(f"{name} must be {kind}, got {value!r}")
    return result


def _pair(item: Any, padding: object) -> Tuple[int, int]:
    """One axis of a padding argument: an int or a (begin, end) pair."""
    if _is_int(item):
        return (int(item), int(item))
    try:
        pair = tuple(item)
    except TypeError:
        raise TypeError(f"padding entries must be ints or (begin, end) pairs, "
                        f"got {padding!r}") from None
    if len(pair) != 2 or not all(_is_int(v) for v in pair):
        raise TypeError(f"padding entries must be ints or (begin, end) pairs, got {padding!r}")
    return (int(pair[0]), int(pair[1]))


def normalize_padding(padding: Any, rank: int, *, spatial: Sequence[int] = (),
                      kernel: Sequence[int] = (), stride: Sequence[int] = (),
                      dilation: Sequence[int] = (), allow_same: bool = True) -> Pads:
    """Per-side padding, one (begin, end) pair per spatial axis, from any accepted form.

    Forms: an int; one entry per axis, each an int or a (begin, end) pair; in 1-D also a
    bare (begin, end) pair; "valid", "full" (``dilation * (kernel - 1)`` each side) and,
    when ``allow_same``, "same" / "same_upper" / "same_lower" (output ``ceil(size /
    stride)``, the odd extra pixel at the end or the start).
    """
    if isinstance(padding, str):
        mode = padding.lower()
        allowed = _g2.PADDING_STRINGS if allow_same else ("valid",)
        if mode not in allowed:
            raise ValueError(f"padding string must be one of {allowed}, got {padding!r}")
        if mode == "valid":
            return ((0, 0),) * rank
        if mode == "full":
            return tuple((d * (k - 1), d * (k - 1)) for k, d in zip(kernel, dilation))
        return tuple(tuple(_g2.same_pads(size, k, s, d, mode == "same_lower"))
                     for size, k, s, d in zip(spatial, kernel, stride, dilation))
    if _is_int(padding):
        p = int(padding)
        if p < 0:
            raise ValueError(f"padding must be non-negative, got {padding!r}")
        return ((p, p),) * rank
    try:
        items = tuple(padding)
    except TypeError:
        raise TypeError(f"padding must be an int, {rank} per-axis entries or a string, "
                        f"got {padding!r}") from None
    if rank == 1 and len(items) == 2 and all(_is_int(v) for v in items):
        items = (items,)  # 1-D: a bare pair is (begin, end); one entry per axis is (p,)
    if len(items) != rank:
        names = ", ".join(AXES[rank])
        raise ValueError(f"padding must have {rank} entries ({names}), got {padding!r}")
    pads = tuple(_pair(item, padding) for item in items)
    if any(v < 0 for pair in pads for v in pair):
        raise ValueError(f"padding must be non-negative, got {padding!r}")
    return pads


def check_shape(shape: Any, name: str, layout: str) -> Tuple[int, ...]:
    """A tuple of ``len(layout)`` non-negative ints, or an error naming ``name``."""
    ndim = len(layout)
    what = f"a sequence of {ndim} ints {_DIMS[layout]} for layout {layout!r}"
    if isinstance(shape, (str, bytes)):
        raise TypeError(f"{name} must be {what}, got {shape!r}")
    try:
        items = tuple(shape)
    except TypeError:
        raise TypeError(f"{name} must be {what}, got {shape!r}") from None
    if not all(_is_int(v) for v in items):
        raise TypeError(f"{name} must be {what}, got {shape!r}")
    result = tuple(int(v) for v in items)
    if len(result) != ndim:
        kind = "weight_layout" if layout[0] != "N" else "layout"
        raise ValueError(f"{name} must be {ndim}-D {_DIMS[layout]} for {kind} {layout!r}, "
                         f"got {len(result)}-D shape {result}")
    if any(v < 0 for v in result):
        raise ValueError(f"{name} has a negative size: {result}")
    return result


def check_padding_mode(padding_mode: object, padding_value: object, pads: Pads,
                       spatial: Sequence[int], padding: object) -> Tuple[str, float]:
    """``(padding_mode, padding_value)`` normalised as in 2-D, the size limits of "reflect"
    (padding smaller than the input) and "circular" (at most the input) checked per axis."""
    rank = len(spatial)
    # The 2-D rules for the names and the value; its limits are checked below, per axis.
    mode, value = _g2.check_padding_mode(padding_mode, padding_value, ((1, 1), (1, 1)),
                                         (2**62, 2**62), padding)
    if mode == "zeros" or all(p == (0, 0) for p in pads):
        return "zeros", 0.0
    for axis, size, (lo, hi) in zip(AXES[rank], spatial, pads):
        limit = {"reflect": size - 1, "circular": size}.get(mode)
        if limit is not None and max(lo, hi) > limit:
            rule = "smaller than" if mode == "reflect" else "at most"
            raise ValueError(f"padding_mode={mode!r} needs padding {rule} the input "
                             f"size: padding={padding!r} gives {(lo, hi)} along {axis}, "
                             f"where the input has size {size}")
    return str(mode), float(value)


# -- the forward geometry --------------------------------------------------------------------

_CACHE: Dict[Any, NdGeometry] = {}
_CACHE_SIZE = 512


def make_nd_geometry(x_shape: object, w_shape: object, *, stride: object = 1,
                     padding: object = 0, dilation: object = 1, groups: object = 1,
                     layout: str, weight_layout: str, dtype: Any = np.float32,
                     padding_mode: object = "zeros", padding_value: object = 0.0,
                     x_name: str = "x", w_name: str = "weight", rank: int) -> NdGeometry:
    """Validate a forward convolution problem of spatial rank 1 or 3.

    Results are remembered per argument combination (the same arguments always give the
    same geometry or the same error), as in 2-D.

    Parameters
    ----------
    x_shape, w_shape : sequence of int
        Input shape in ``layout`` order and weight shape in ``weight_layout`` order.
    stride, padding, dilation, groups, padding_mode, padding_value
        As in :func:`cconv.conv1d` / :func:`cconv.conv3d`.
    layout, weight_layout : str
        Layout names of the rank.
    dtype : dtype
        The compute dtype (float32 or float64).
    x_name, w_name : str
        How error messages call the two shapes.
    rank : int
        The spatial rank the caller serves (1 or 3): the layout names must be of it.

    Returns
    -------
    NdGeometry
    """
    dtype = np.dtype(dtype)
    args = (x_shape, w_shape, stride, padding, dilation, groups, layout, weight_layout,
            padding_mode, padding_value, dtype.str, x_name, w_name, rank)
    try:
        key = _g2.cache_key(args)
        geom = _CACHE.get(key)
    except TypeError:  # an unhashable argument: validate without the cache
        key, geom = None, None
    if geom is None:
        geom = _make_nd_geometry(x_shape, w_shape, stride, padding, dilation, groups, layout,
                                 weight_layout, padding_mode, padding_value, dtype, x_name,
                                 w_name, rank)
        if key is not None:
            if len(_CACHE) >= _CACHE_SIZE:
                _CACHE.clear()
            _CACHE[key] = geom
    return geom


def _check_layouts(layout: object, weight_layout: object, rank: int) -> None:
    _g2.check_choice(layout, "layout", LAYOUTS[rank])
    _g2.check_choice(weight_layout, "weight_layout", WEIGHT_LAYOUTS[rank])


def _make_nd_geometry(x_shape: object, w_shape: object, stride: object, padding: object,
                      dilation: object, groups: object, layout: str, weight_layout: str,
                      padding_mode: object, padding_value: object, dtype: np.dtype[Any],
                      x_name: str, w_name: str, rank: int) -> NdGeometry:
    _check_layouts(layout, weight_layout, rank)
    xs = check_shape(x_shape, x_name, layout)
    ws = check_shape(w_shape, w_name, weight_layout)
    N, C, spatial = from_layout(xs, layout)
    K, Cg, kernel = weight_from_layout(ws, weight_layout)
    groups = int(_g2.check_groups(groups))
    if C == 0 or 0 in spatial:
        raise ValueError(f"{x_name} must have non-zero channels and spatial size, "
                         f"got shape {xs} ({layout})")
    if K == 0 or Cg == 0 or 0 in kernel:
        raise ValueError(f"{w_name} must have non-zero sizes, got shape {ws} ({weight_layout})")
    if C % groups:
        raise ValueError(f"groups={groups} does not divide the {C} input channels of {x_name}")
    if K % groups:
        raise ValueError(f"groups={groups} does not divide the {K} output channels of {w_name}")
    if Cg * groups != C:
        raise ValueError(f"{w_name} has {Cg} input channels per group but {x_name} has "
                         f"{C} channels / groups={groups} = {C // groups}")
    strides = normalize_tuple(stride, "stride", rank, minimum=1)
    dilations = normalize_tuple(dilation, "dilation", rank, minimum=1)
    pads = normalize_padding(padding, rank, spatial=spatial, kernel=kernel, stride=strides,
                             dilation=dilations)
    _g2._check_product((N, C, *spatial), x_name)
    _g2._check_product((K, Cg, *kernel), w_name)
    for axis, size, k, d, (lo, hi) in zip(AXES[rank], spatial, kernel, dilations, pads):
        extent = d * (k - 1) + 1
        if size + lo + hi > _INT64_MAX // 64 or extent > _INT64_MAX // 64:
            raise ValueError(f"padding or dilation too large along {axis}")
        if extent > size + lo + hi:
            raise ValueError(f"kernel extent {extent} (size {k}, dilation {d}) is larger than "
                             f"the padded input {size + lo + hi} (size {size}, padding "
                             f"{(lo, hi)}) along {axis}")
    # As in 2-D: a stride longer than the padded input yields one output whatever its value.
    strides = tuple(min(s, size + lo + hi) for s, size, (lo, hi) in zip(strides, spatial, pads))
    mode, value = check_padding_mode(padding_mode, padding_value, pads, spatial, padding)
    geom = NdGeometry(N=N, C=C, K=K, spatial=spatial, kernel=kernel, stride=strides,
                      dilation=dilations, pads=pads, groups=groups, layout=layout,
                      weight_layout=weight_layout, dtype=np.dtype(dtype), padding_mode=mode,
                      padding_value=value)
    _g2._check_product((N, K, *geom.out_spatial), "the output")
    _g2._check_product((max(N, 1), C + 64, *(size + lo + hi + 1 for size, (lo, hi)
                                            in zip(spatial, pads)), 4), "the padded input buffer")
    return geom


# -- transposed convolution ------------------------------------------------------------------

def make_nd_transpose_geometry(x_shape: object, w_shape: object, dtype: Any, *, stride: object,
                               padding: object, output_padding: object, dilation: object,
                               groups: object, layout: str, weight_layout: str,
                               output_shape: object, padding_mode: object = "zeros",
                               rank: int, x_name: str = "x",
                               w_name: str = "weight") -> Tuple[NdGeometry, Tuple[int, ...]]:
    """The geometry of the convolution that a transposed convolution transposes.

    ``x_name`` / ``w_name``: how messages call the transposed convolution's input shape and
    weight shape.

    Returns ``(geom, extra)``: ``extra`` = per axis, the output slices of that convolution
    beyond the transposed convolution's input (zeros it lacks at the end, when the output
    padding is at least the stride).  ``padding_mode`` is the convolution's; "constant"
    transposes to "zeros" (the adjoint of its linear part), as in 2-D.
    """
    _check_layouts(layout, weight_layout, rank)
    xs = check_shape(x_shape, x_name, layout)
    ws = check_shape(w_shape, w_name, weight_layout)
    N, Cin, spatial = from_layout(xs, layout)
    if Cin == 0 or min(spatial) == 0:  # output_padding alone would make an output of them
        raise ValueError(f"{x_name} must have non-zero channels and spatial size, got shape "
                         f"{xs} ({layout})")
    strides = normalize_tuple(stride, "stride", rank, minimum=1)
    dilations = normalize_tuple(dilation, "dilation", rank, minimum=1)
    _, kg, kernel = weight_from_layout(ws, weight_layout)
    pads = normalize_padding(padding, rank, allow_same=False)
    _g2.check_choice(padding_mode, "padding_mode", _g2.PADDING_MODES)
    mode = "zeros" if padding_mode == "constant" else str(padding_mode)
    groups = int(_g2.check_groups(groups))
    base = [int(_g2.transpose_output_size(size, k, s, d, lo, hi)) for size, s, (lo, hi), d, k
            in zip(spatial, strides, pads, dilations, kernel)]
    if output_shape is not None:
        target = check_shape(output_shape, "output_shape", layout)
        tn, tk, tspatial = from_layout(target, layout)
        if tn != N or tk != kg * groups:
            raise ValueError(f"output_shape {target} does not match batch {N} and "
                             f"output channels {kg * groups}")
        extra_out = tuple(t - b for t, b in zip(tspatial, base))
        name = "output_shape"
    else:
        extra_out = normalize_tuple(output_padding, "output_padding", rank, minimum=0)
        name = "output_padding"
    for axis, value, s, d in zip(AXES[rank], extra_out, strides, dilations):
        if not 0 <= value < max(s, d):
            raise ValueError(f"{name} implies output padding {value} along {axis}; it must be "
                             f">= 0 and smaller than stride {s} or dilation {d}")
    out_spatial = tuple(b + p for b, p in zip(base, extra_out))
    if min(out_spatial) < 1:
        sizes = "x".join(str(v) for v in spatial)
        raise ValueError(f"transposed convolution output would be {out_spatial}: padding "
                         f"{pads} too large for input {sizes}")
    fwd_x = to_layout(N, kg * groups, out_spatial, layout)
    geom = make_nd_geometry(fwd_x, ws, stride=strides, padding=pads, dilation=dilations,
                            groups=groups, layout=layout, weight_layout=weight_layout,
                            dtype=dtype, padding_mode=mode, x_name="output_shape",
                            w_name=w_name, rank=rank)
    if geom.K != Cin:
        raise ValueError(f"{w_name} has {geom.K} input channels but {x_name} has {Cin}")
    return geom, tuple(o - size for o, size in zip(geom.out_spatial, spatial))


def check_transpose_grad_out(grad_out: np.ndarray[Any, Any], geom: NdGeometry) -> None:
    """``grad_out`` must have the transposed convolution's output shape (the forward input's)."""
    if grad_out.shape != geom.input_shape():
        raise ValueError(f"grad_out has shape {grad_out.shape} but x / input_shape and the "
                         f"keywords give a transposed convolution output of shape "
                         f"{geom.input_shape()} ({geom.layout})")


def check_grad_out(grad_out: np.ndarray[Any, Any], geom: NdGeometry, shape_name: str,
                   shape: Sequence[int]) -> None:
    """``grad_out`` must have the convolution's output shape."""
    if grad_out.shape != geom.output_shape():
        raise ValueError(f"grad_out has shape {grad_out.shape} but {shape_name}={tuple(shape)} "
                         f"gives a convolution output of shape {geom.output_shape()} "
                         f"({geom.layout})")
