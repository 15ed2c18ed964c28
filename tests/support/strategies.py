"""Hypothesis strategies for convolution problems, and the layout / memory helpers they use.

A drawn case carries the float64 NCHW / OIHW values the reference works on *and* the arrays to
hand to cconv (in the drawn layout, weight layout, dtype and memory order); both hold exactly the
same numbers, so the reference never sees rounding the library did not see.
"""

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from .reference import (
    conv_output_size,
    nchw_to_nhwc,
    nhwc_to_nchw,
    oihw_to_hwio,
    resolve_padding,
    resolve_transpose_padding,
    transpose_output_size,
)

FLOAT_DTYPES = (np.float32, np.float64, np.float16)
MEMORY_FORMS = ("C", "C", "F", "sliced", "negstride")
FWD_PADDING_FORMS = ("int", "pair", "per_side", "valid", "same", "same_upper", "same_lower")
TRANSPOSE_PADDING_FORMS = ("int", "pair", "per_side", "valid")


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------

def with_memory(a, form):
    """An array equal to ``a`` but laid out in memory as ``form`` says."""
    a = np.ascontiguousarray(a)
    if form == "C":
        return a
    if form == "F":
        return np.asfortranarray(a)
    if form == "sliced":
        big = np.full(a.shape[:-1] + (2 * a.shape[-1],), np.nan, dtype=a.dtype)
        big[..., 1::2] = a
        return big[..., 1::2]
    if form == "negstride":
        flip = (slice(None, None, -1),) * a.ndim
        return np.ascontiguousarray(a[flip])[flip]
    raise ValueError(form)


def to_layout(a_nchw, layout):
    return np.ascontiguousarray(nchw_to_nhwc(a_nchw)) if layout == "NHWC" else a_nchw


def from_layout(a, layout):
    return nhwc_to_nchw(a) if layout == "NHWC" else a


def weight_to_layout(w_oihw, weight_layout):
    return np.ascontiguousarray(oihw_to_hwio(w_oihw)) if weight_layout == "HWIO" else w_oihw


def weight_from_layout(w, weight_layout):
    return np.transpose(w, (3, 2, 0, 1)) if weight_layout == "HWIO" else w


def shape_in_layout(shape_nchw, layout):
    n, c, h, w = shape_nchw
    return (n, h, w, c) if layout == "NHWC" else (n, c, h, w)


def weight_shape_in_layout(shape_oihw, weight_layout):
    o, i, r, s = shape_oihw
    return (r, s, i, o) if weight_layout == "HWIO" else (o, i, r, s)


def random_array(rng, shape, dtype):
    """Standard normal values, exactly representable in ``dtype``."""
    return rng.standard_normal(shape).astype(dtype)


def result_dtype(*dtypes):
    return np.result_type(*[np.dtype(d) for d in dtypes])


# --------------------------------------------------------------------------------------------
# strategy pieces
# --------------------------------------------------------------------------------------------

@st.composite
def channels(draw, max_c=20):
    """(C, K, groups): plain, grouped, or depthwise with channel multiplier."""
    mode = draw(st.sampled_from(["plain", "plain", "grouped", "depthwise"]))
    if mode == "plain":
        c = draw(st.one_of(st.integers(1, max_c), st.sampled_from([1, 2, 3, 5, 7, 11, 13, 17, 19])))
        k = draw(st.one_of(st.integers(1, max_c), st.sampled_from([1, 2, 3, 5, 7, 11, 13, 17, 19])))
        return c, k, 1
    if mode == "grouped" and max_c >= 2:
        g = draw(st.integers(2, min(5, max_c)))
        cg = draw(st.integers(1, max_c // g))
        kg = draw(st.integers(1, max_c // g))
        return g * cg, g * kg, g
    if mode == "grouped":          # max_c < 2: nothing to group
        return 1, 1, 1
    c = draw(st.integers(1, min(10, max_c)))
    m = draw(st.integers(1, 2 if 2 * c <= max(max_c, 2) else 1))
    return c, m * c, c


def _axis_param(draw, lo, hi):
    """(h, w) drawn per axis, returned as int when equal (sometimes), tuple or list otherwise."""
    h = draw(st.integers(lo, hi))
    w = draw(st.one_of(st.just(h), st.integers(lo, hi)))
    form = draw(st.sampled_from(["int", "tuple", "list"]))
    if form == "int" and h == w:
        return (h, w), h
    if form == "list":
        return (h, w), [h, w]
    return (h, w), (h, w)


def _padding_spec(draw, forms, max_pad=3):
    form = draw(st.sampled_from(forms))
    if form == "int":
        p = draw(st.integers(0, max_pad))
        return p
    if form == "pair":
        return (draw(st.integers(0, max_pad)), draw(st.integers(0, max_pad)))
    if form == "per_side":
        top, bottom, left, right = (draw(st.integers(0, max_pad)) for _ in range(4))
        return ((top, bottom), (left, right))
    return form  # a string


@dataclass
class ConvCase:
    """A forward-convolution problem: reference values plus the arrays to hand to cconv."""
    n: int
    c: int
    k: int
    h: int
    w: int
    r: int
    s: int
    groups: int
    stride: tuple            # per axis ints
    dilation: tuple
    pads: tuple              # resolved ((t, b), (l, r))
    kwargs: dict             # stride / padding / dilation / groups / layouts, as passed
    layout: str
    weight_layout: str
    x64: np.ndarray          # NCHW float64 (values exactly those of x)
    w64: np.ndarray          # OIHW float64
    b64: object              # (K,) float64 or None
    x: np.ndarray            # argument for cconv
    weight: np.ndarray
    bias: object
    x_dtype: np.dtype
    w_dtype: np.dtype
    seed: int
    x_mem: str = "C"         # memory form of x / weight: C, F, sliced, negstride
    w_mem: str = "C"

    @property
    def out_hw(self):
        return conv_output_size((self.h, self.w), (self.r, self.s), self.stride, self.pads,
                                self.dilation)

    @property
    def out_shape_nchw(self):
        return (self.n, self.k) + self.out_hw

    @property
    def out_shape(self):
        return shape_in_layout(self.out_shape_nchw, self.layout)

    @property
    def x_shape(self):
        return shape_in_layout((self.n, self.c, self.h, self.w), self.layout)

    @property
    def weight_shape(self):
        return weight_shape_in_layout((self.k, self.c // self.groups, self.r, self.s),
                                      self.weight_layout)

    @property
    def result_dtype(self):
        return result_dtype(self.x_dtype, self.w_dtype)

    def grad_out(self, dtype=None, memory="C"):
        """A random grad_out (float64 NCHW values, argument array in layout)."""
        rng = np.random.default_rng(self.seed + 1)
        dtype = self.result_dtype if dtype is None else np.dtype(dtype)
        g = random_array(rng, self.out_shape_nchw, dtype)
        return g.astype(np.float64), with_memory(to_layout(g, self.layout), memory)

    def __repr__(self):  # short, for hypothesis' falsifying-example report
        return (f"ConvCase(x={self.x_shape} {self.x_dtype} {self.layout}, "
                f"w={self.weight_shape} {self.w_dtype} {self.weight_layout}, "
                f"bias={self.bias is not None}, kwargs={self.kwargs}, pads={self.pads}, "
                f"x strides={self.x.strides}, w strides={self.weight.strides}, seed={self.seed})")


@st.composite
def conv_cases(draw, max_c=20, max_hw=23, max_n=3, max_k=5, dtypes=FLOAT_DTYPES, mixed=True,
               layouts=("NCHW", "NHWC"), weight_layouts=("OIHW", "HWIO"),
               padding_forms=FWD_PADDING_FORMS, memory_forms=MEMORY_FORMS, bias=None,
               kernel=None, stride=None, dilation=None, n=None):
    c, k, groups = draw(channels(max_c))
    if kernel is None:
        r = draw(st.integers(1, max_k))
        s = draw(st.one_of(st.just(r), st.integers(1, max_k)))
    else:
        r, s = kernel
    stride_arg = _axis_param(draw, 1, 3)[1] if stride is None else stride
    if dilation is None:
        dil_v, dil_arg = _axis_param(draw, 1, 3)
    else:
        dil_v, dil_arg = (dilation, dilation), dilation
    padding = _padding_spec(draw, padding_forms)

    eff = ((r - 1) * dil_v[0] + 1, (s - 1) * dil_v[1] + 1)
    if isinstance(padding, str):
        need = (1, 1) if padding.startswith("same") else eff
    else:
        (top, bottom), (left, right) = resolve_padding(padding, (1, 1), (1, 1))
        need = (max(1, eff[0] - top - bottom), max(1, eff[1] - left - right))
    h = draw(st.integers(need[0], max(need[0], max_hw)))
    w = draw(st.integers(need[1], max(need[1], max_hw)))
    nn = draw(st.integers(1, max_n)) if n is None else n

    layout = draw(st.sampled_from(layouts))
    weight_layout = draw(st.sampled_from(weight_layouts))
    x_dtype = np.dtype(draw(st.sampled_from(dtypes)))
    w_dtype = x_dtype
    if mixed and draw(st.integers(0, 4)) == 0:
        w_dtype = np.dtype(draw(st.sampled_from(dtypes)))
    use_bias = draw(st.booleans()) if bias is None else bias
    x_mem = draw(st.sampled_from(memory_forms))
    w_mem = draw(st.sampled_from(memory_forms))
    seed = draw(st.integers(0, 2**31 - 1))

    return build_conv_case(nn, c, k, h, w, r, s, groups, stride_arg, padding, dil_arg,
                           layout, weight_layout, x_dtype, w_dtype, use_bias, x_mem, w_mem, seed)


def build_conv_case(n, c, k, h, w, r, s, groups=1, stride=1, padding=0, dilation=1,
                    layout="NCHW", weight_layout="OIHW", x_dtype=np.float32, w_dtype=None,
                    bias=True, x_mem="C", w_mem="C", seed=0):
    """A ConvCase from explicit parameters (the strategies draw these; tests may fix them)."""
    x_dtype = np.dtype(x_dtype)
    w_dtype = x_dtype if w_dtype is None else np.dtype(w_dtype)
    stride_v = (stride, stride) if isinstance(stride, int) else tuple(stride)
    dil_v = (dilation, dilation) if isinstance(dilation, int) else tuple(dilation)
    pads = resolve_padding(padding, (h, w), (r, s), stride_v, dil_v)
    rng = np.random.default_rng(seed)
    x_nchw = random_array(rng, (n, c, h, w), x_dtype)
    w_oihw = random_array(rng, (k, c // groups, r, s), w_dtype)
    rdt = result_dtype(x_dtype, w_dtype)
    b = random_array(rng, (k,), rdt) if bias else None
    kwargs = dict(stride=stride, padding=padding, dilation=dilation, groups=groups,
                  layout=layout, weight_layout=weight_layout)
    return ConvCase(
        n=n, c=c, k=k, h=h, w=w, r=r, s=s, groups=groups, stride=stride_v, dilation=dil_v,
        pads=pads, kwargs=kwargs, layout=layout, weight_layout=weight_layout,
        x64=x_nchw.astype(np.float64), w64=w_oihw.astype(np.float64),
        b64=None if b is None else b.astype(np.float64),
        x=with_memory(to_layout(x_nchw, layout), x_mem),
        weight=with_memory(weight_to_layout(w_oihw, weight_layout), w_mem),
        bias=b, x_dtype=x_dtype, w_dtype=w_dtype, seed=seed, x_mem=x_mem, w_mem=w_mem)


@dataclass
class TransposeCase:
    """A conv_transpose2d problem (PyTorch semantics)."""
    n: int
    cin: int
    k: int
    h: int
    w: int
    r: int
    s: int
    groups: int
    stride: tuple
    dilation: tuple
    pads: tuple
    output_padding: tuple
    kwargs: dict             # everything passed to conv_transpose2d except x/weight/bias
    layout: str
    weight_layout: str
    x64: np.ndarray          # (N, C_in, H, W) float64
    w64: np.ndarray          # (C_in, K/groups, R, S) float64
    b64: object
    x: np.ndarray
    weight: np.ndarray
    bias: object
    dtype: np.dtype
    seed: int
    x_mem: str = "C"
    w_mem: str = "C"

    @property
    def out_hw(self):
        return transpose_output_size((self.h, self.w), (self.r, self.s), self.stride, self.pads,
                                     self.dilation, self.output_padding)

    @property
    def out_shape_nchw(self):
        return (self.n, self.k) + self.out_hw

    @property
    def out_shape(self):
        return shape_in_layout(self.out_shape_nchw, self.layout)

    @property
    def x_shape(self):
        return shape_in_layout((self.n, self.cin, self.h, self.w), self.layout)

    @property
    def weight_shape(self):
        # (C_in, K/groups, R, S) -> HWIO means (R, S, K/groups, C_in)
        return weight_shape_in_layout((self.cin, self.k // self.groups, self.r, self.s),
                                      self.weight_layout)

    def grad_out(self, memory="C"):
        rng = np.random.default_rng(self.seed + 1)
        g = random_array(rng, self.out_shape_nchw, self.dtype)
        return g.astype(np.float64), with_memory(to_layout(g, self.layout), memory)

    def __repr__(self):
        return (f"TransposeCase(x={self.x_shape} {self.dtype} {self.layout}, "
                f"w={self.weight_shape} {self.weight_layout}, bias={self.bias is not None}, "
                f"kwargs={self.kwargs}, pads={self.pads}, output_padding={self.output_padding}, "
                f"out={self.out_shape}, seed={self.seed})")


@st.composite
def transpose_cases(draw, max_c=12, max_hw=10, max_n=3, max_k=5, dtypes=FLOAT_DTYPES,
                    layouts=("NCHW", "NHWC"), weight_layouts=("OIHW", "HWIO"),
                    memory_forms=MEMORY_FORMS, use_output_shape=None):
    cin, k, groups = draw(channels(max_c))
    r = draw(st.integers(1, max_k))
    s = draw(st.one_of(st.just(r), st.integers(1, max_k)))
    stride_v, stride_arg = _axis_param(draw, 1, 3)
    dil_v, dil_arg = _axis_param(draw, 1, 3)
    padding = _padding_spec(draw, TRANSPOSE_PADDING_FORMS)
    pads = resolve_transpose_padding(padding)
    op = tuple(draw(st.integers(0, max(sv, dv) - 1)) for sv, dv in zip(stride_v, dil_v))

    def min_size(axis):
        for size in range(1, 64):
            if transpose_output_size((size, size), (r, s), stride_v, pads, dil_v, op)[axis] >= 1:
                return size
        raise AssertionError("unreachable")

    h = draw(st.integers(min_size(0), max(min_size(0), max_hw)))
    w = draw(st.integers(min_size(1), max(min_size(1), max_hw)))
    nn = draw(st.integers(1, max_n))
    layout = draw(st.sampled_from(layouts))
    weight_layout = draw(st.sampled_from(weight_layouts))
    dtype = np.dtype(draw(st.sampled_from(dtypes)))
    use_bias = draw(st.booleans())
    x_mem = draw(st.sampled_from(memory_forms))
    w_mem = draw(st.sampled_from(memory_forms))
    seed = draw(st.integers(0, 2**31 - 1))
    by_shape = draw(st.booleans()) if use_output_shape is None else use_output_shape

    if by_shape:
        output = dict(output_shape=shape_in_layout(
            (nn, k) + transpose_output_size((h, w), (r, s), stride_v, pads, dil_v, op), layout))
    else:
        output = dict(output_padding=op if (op[0] != op[1] or draw(st.booleans())) else op[0])
    return build_transpose_case(nn, cin, k, h, w, r, s, groups, stride_arg, padding, dil_arg,
                                layout, weight_layout, dtype, use_bias, x_mem, w_mem, seed,
                                **output)


def build_transpose_case(n, cin, k, h, w, r, s, groups=1, stride=1, padding=0, dilation=1,
                         layout="NCHW", weight_layout="OIHW", dtype=np.float32, bias=True,
                         x_mem="C", w_mem="C", seed=0, output_padding=None, output_shape=None):
    """A TransposeCase from explicit parameters; give output_padding or output_shape."""
    dtype = np.dtype(dtype)
    stride_v = (stride, stride) if isinstance(stride, int) else tuple(stride)
    dil_v = (dilation, dilation) if isinstance(dilation, int) else tuple(dilation)
    pads = resolve_transpose_padding(padding)
    base = transpose_output_size((h, w), (r, s), stride_v, pads, dil_v, 0)
    kwargs = dict(stride=stride, padding=padding, dilation=dilation, groups=groups,
                  layout=layout, weight_layout=weight_layout)
    if output_shape is not None:
        nchw = (output_shape[0], output_shape[3]) + tuple(output_shape[1:3]) \
            if layout == "NHWC" else tuple(output_shape)
        op = (nchw[2] - base[0], nchw[3] - base[1])
        kwargs["output_shape"] = output_shape
    else:
        op = (output_padding, output_padding) if isinstance(output_padding, int) \
            else tuple(output_padding or (0, 0))
        kwargs["output_padding"] = 0 if output_padding is None else output_padding
    rng = np.random.default_rng(seed)
    x_nchw = random_array(rng, (n, cin, h, w), dtype)
    w_t = random_array(rng, (cin, k // groups, r, s), dtype)
    b = random_array(rng, (k,), dtype) if bias else None
    return TransposeCase(
        n=n, cin=cin, k=k, h=h, w=w, r=r, s=s, groups=groups, stride=stride_v,
        dilation=dil_v, pads=pads, output_padding=op, kwargs=kwargs, layout=layout,
        weight_layout=weight_layout, x64=x_nchw.astype(np.float64), w64=w_t.astype(np.float64),
        b64=None if b is None else b.astype(np.float64),
        x=with_memory(to_layout(x_nchw, layout), x_mem),
        weight=with_memory(weight_to_layout(w_t, weight_layout), w_mem),
        bias=b, dtype=dtype, seed=seed, x_mem=x_mem, w_mem=w_mem)
