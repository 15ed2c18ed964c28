"""Hypothesis strategies for 1-D and 3-D convolution problems (any spatial rank).

A drawn case carries the float64 channels-first values the reference (``reference_nd``) works
on *and* the arrays to hand to cconv (in the drawn layout, weight layout, dtype and memory
order), holding exactly the same numbers.
"""

from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from .reference import mode_limit_ok
from .reference_nd import (conv_output_sizes, resolve_padding, to_channels_last,
                           transpose_output_sizes, weight_to_last)
from .strategies import with_memory

LAYOUTS = {1: ("NCW", "NWC"), 3: ("NCDHW", "NDHWC")}
WEIGHT_LAYOUTS = {1: ("OIW", "WIO"), 3: ("OIDHW", "DHWIO")}
MODES = ("zeros", "zeros", "zeros", "constant", "reflect", "symmetric", "replicate", "circular")
DTYPES = (np.float64, np.float64, np.float32, np.float16)


def in_layout(a, layout):
    """A channels-first array in ``layout`` order (contiguous)."""
    return to_channels_last(a) if layout.endswith("C") else np.ascontiguousarray(a)


def weight_in_layout(w, weight_layout):
    """An (O, I, *kernel) weight in ``weight_layout`` order (contiguous)."""
    return weight_to_last(w) if weight_layout.endswith("O") else np.ascontiguousarray(w)


def shape_in_layout(shape, layout):
    """A channels-first shape in ``layout`` order."""
    return (shape[0], *shape[2:], shape[1]) if layout.endswith("C") else tuple(shape)


def weight_shape_in_layout(shape, weight_layout):
    """An (O, I, *kernel) shape in ``weight_layout`` order."""
    return (*shape[2:], shape[1], shape[0]) if weight_layout.endswith("O") else tuple(shape)


@dataclass
class NdCase:
    """A convolution problem: reference values (channels first, float64) and cconv arrays."""

    rank: int
    groups: int
    stride: tuple
    dilation: tuple
    pads: tuple                  # resolved (begin, end) per axis
    mode: str
    value: float
    layout: str
    weight_layout: str
    dtype: type
    kwargs: dict                 # keywords as passed to cconv
    x: np.ndarray                # float64 reference values (channels first)
    w: np.ndarray
    b: np.ndarray
    gy: np.ndarray               # an output gradient of the output shape
    arrays: dict = field(default_factory=dict)   # "x", "w", "b", "gy" as passed to cconv
    output_padding: tuple = ()

    @property
    def result_dtype(self):
        return np.dtype(self.dtype)

    def to_cconv(self, a):
        """A channels-first result of cconv's in the reference's order (float64)."""
        a = np.asarray(a, dtype=np.float64)
        return np.moveaxis(a, -1, 1) if self.layout.endswith("C") else a

    def weight_to_cconv(self, a):
        """A weight result of cconv's as (O, I, *kernel), float64."""
        a = np.asarray(a, dtype=np.float64)
        if self.weight_layout.endswith("O"):
            return np.transpose(a, (a.ndim - 1, a.ndim - 2, *range(a.ndim - 2)))
        return a


@st.composite
def channel_counts(draw):
    """(C, K, groups): plain, grouped, or depthwise with a channel multiplier."""
    kind = draw(st.sampled_from(["plain", "plain", "grouped", "depthwise"]))
    if kind == "plain":
        return draw(st.integers(1, 4)), draw(st.integers(1, 4)), 1
    if kind == "grouped":
        g = draw(st.integers(2, 3))
        return g * draw(st.integers(1, 2)), g * draw(st.integers(1, 2)), g
    c = draw(st.integers(1, 4))
    return c, c * draw(st.integers(1, 2)), c


def _padding_argument(pads_list, form):
    """The padding keyword in ``form`` for explicit per-side pads (or a symmetric reduction)."""
    if form == "int":
        return pads_list[0][0]
    if form == "per_axis":
        return tuple(lo for lo, _ in pads_list)
    if form == "bare_pair":
        return tuple(pads_list[0])
    return tuple(tuple(p) for p in pads_list)


def _draw_pads(draw, rank, form, max_pad):
    if form == "int":
        p = draw(st.integers(0, max_pad))
        return [(p, p)] * rank
    if form == "per_axis":
        return [(p, p) for p in (draw(st.integers(0, max_pad)) for _ in range(rank))]
    return [(draw(st.integers(0, max_pad)), draw(st.integers(0, max_pad))) for _ in range(rank)]


def _values(draw, case_shape_x, case_shape_w, k, out_shape, dtype):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(case_shape_x).astype(dtype)
    w = rng.standard_normal(case_shape_w).astype(dtype)
    b = rng.standard_normal(k).astype(dtype)
    gy = rng.standard_normal(out_shape).astype(dtype)
    return x, w, b, gy


@st.composite
def conv_cases(draw, rank, max_size=7, max_kernel=3, max_n=2, modes=MODES, dtypes=DTYPES):
    """A forward convolution of spatial rank ``rank`` with every keyword drawn."""
    n = draw(st.integers(1, max_n))
    c, k, groups = draw(channel_counts())
    kernel = tuple(draw(st.integers(1, max_kernel)) for _ in range(rank))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(rank))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    forms = ["int", "per_axis", "per_side", "valid", "same", "same_lower", "full"]
    if rank == 1:
        forms.append("bare_pair")
    form = draw(st.sampled_from(forms))
    explicit = form in ("int", "per_axis", "per_side", "bare_pair")
    pads_list = _draw_pads(draw, rank, "per_side" if form == "bare_pair" else form, 2) \
        if explicit else [(0, 0)] * rank
    spatial = []
    for kk, d, (lo, hi) in zip(kernel, dilation, pads_list):
        # The padded input must hold the kernel's extent ("same" and "full" always do).
        extent = d * (kk - 1) + 1
        need = max(1, extent - lo - hi) if explicit or form == "valid" else 1
        spatial.append(draw(st.integers(need, need + max_size - 1)))
    spatial = tuple(spatial)
    padding = _padding_argument(pads_list, form) if explicit else form
    pads = resolve_padding(padding, spatial, kernel, stride, dilation)
    mode = draw(st.sampled_from(modes))
    if not mode_limit_ok(mode, pads, spatial):
        mode = "replicate"
    value = draw(st.sampled_from([1.5, -0.5])) if mode == "constant" else 0.0
    layout = draw(st.sampled_from(LAYOUTS[rank]))
    weight_layout = draw(st.sampled_from(WEIGHT_LAYOUTS[rank]))
    dtype = draw(st.sampled_from(dtypes))
    out = conv_output_sizes(spatial, kernel, stride, pads, dilation)
    x, w, b, gy = _values(draw, (n, c) + spatial, (k, c // groups) + kernel, k, (n, k) + out,
                          dtype)
    memory = draw(st.sampled_from(["C", "C", "sliced"]))
    stride_arg = stride[0] if len(set(stride)) == 1 and draw(st.booleans()) else stride
    kwargs = dict(stride=stride_arg, padding=padding, dilation=dilation, groups=groups,
                  layout=layout, weight_layout=weight_layout, padding_mode=mode,
                  padding_value=value)
    arrays = {"x": with_memory(in_layout(x, layout), memory),
              "w": with_memory(weight_in_layout(w, weight_layout), memory),
              "b": b, "gy": with_memory(in_layout(gy, layout), memory)}
    return NdCase(rank=rank, groups=groups, stride=stride, dilation=dilation, pads=pads,
                  mode=mode, value=value, layout=layout, weight_layout=weight_layout,
                  dtype=dtype, kwargs=kwargs, x=x.astype(np.float64), w=w.astype(np.float64),
                  b=b.astype(np.float64), gy=gy.astype(np.float64), arrays=arrays)


@st.composite
def transpose_cases(draw, rank, max_size=5, max_kernel=3, max_n=2, modes=MODES, dtypes=DTYPES):
    """A transposed convolution of spatial rank ``rank``: output_padding or output_shape."""
    n = draw(st.integers(1, max_n))
    cin, kk, groups = draw(channel_counts())
    kernel = tuple(draw(st.integers(1, max_kernel)) for _ in range(rank))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(rank))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    spatial = tuple(draw(st.integers(1, max_size)) for _ in range(rank))
    form = draw(st.sampled_from(["int", "per_axis", "per_side", "valid"]))
    pads_list = _draw_pads(draw, rank, form, 2) if form != "valid" else [(0, 0)] * rank
    op = tuple(draw(st.integers(0, max(s, d) - 1)) for s, d in zip(stride, dilation))
    # Keep every output size >= 1: drop the padding of an axis that would vanish.
    base = transpose_output_sizes(spatial, kernel, stride, pads_list, dilation, op)
    if min(base) < 1:
        form, pads_list = "valid", [(0, 0)] * rank
    padding = "valid" if form == "valid" else _padding_argument(pads_list, form)
    pads = resolve_padding(padding, (1,) * rank, kernel)
    out = transpose_output_sizes(spatial, kernel, stride, pads, dilation, op)
    mode = draw(st.sampled_from(modes))
    if not mode_limit_ok(mode, pads, out):
        mode = "replicate"
    layout = draw(st.sampled_from(LAYOUTS[rank]))
    weight_layout = draw(st.sampled_from(WEIGHT_LAYOUTS[rank]))
    dtype = draw(st.sampled_from(dtypes))
    x, w, b, gy = _values(draw, (n, cin) + spatial, (cin, kk // groups) + kernel, kk,
                          (n, kk) + out, dtype)
    kwargs = dict(stride=stride, padding=padding, dilation=dilation, groups=groups,
                  layout=layout, weight_layout=weight_layout, padding_mode=mode)
    if draw(st.booleans()):
        kwargs["output_shape"] = shape_in_layout((n, kk) + out, layout)
    else:
        kwargs["output_padding"] = op
    memory = draw(st.sampled_from(["C", "C", "sliced"]))
    arrays = {"x": with_memory(in_layout(x, layout), memory),
              "w": with_memory(weight_in_layout(w, weight_layout), memory),
              "b": b, "gy": with_memory(in_layout(gy, layout), memory)}
    return NdCase(rank=rank, groups=groups, stride=stride, dilation=dilation, pads=pads,
                  mode=mode, value=0.0, layout=layout, weight_layout=weight_layout,
                  dtype=dtype, kwargs=kwargs, x=x.astype(np.float64), w=w.astype(np.float64),
                  b=b.astype(np.float64), gy=gy.astype(np.float64), arrays=arrays,
                  output_padding=op)
