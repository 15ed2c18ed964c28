"""oneDNN Graph API ``Convolution``, ``ConvolutionBackwardData``, ``ConvolutionBackwardWeights``.

Attributes are those of the Graph API ops; like oneDNN's, they are rank-generic: the spatial
rank comes from the arrays (3-D arrays: a 1-D convolution, 4-D: 2-D, 5-D: 3-D; the two
operands must have the same number of dimensions) and runs on ``cconv.conv1d``,
``cconv.conv2d`` or ``cconv.conv3d`` (and their gradients). ``X`` stands for the spatial
axes, in order: (W,), (H, W) or (D, H, W).

* ``data_format``: ``"NXC"`` (default; arrays (N, X..., C)) or ``"NCX"`` ((N, C, X...)).
* ``weights_format``: ``"XIO"`` (default; (kX..., C/groups, K)) or ``"OIX"``
  ((K, C/groups, kX...)).
* ``strides``, ``pads_begin``, ``pads_end``, ``dilations``: an int (the same for every spatial
  axis) or a list with one entry per spatial axis. Graph API dilations count like PyTorch's:
  ``1`` means no dilation (the oneDNN *primitive* API's 0).
* ``auto_pad``: ``"none"`` (use ``pads_begin`` / ``pads_end``), ``"valid"`` (no padding),
  ``"same_upper"`` / ``"same_lower"``: ``pads_begin`` / ``pads_end`` are ignored and computed
  per spatial axis, as oneDNN's shape inference does, with the *forward* convolution's rule
  from the forward input's spatial size ``in`` (the ``src`` of the forward op, i.e.
  ``dst_shape`` for backward data):
  ``total = max((ceil(in / s) - 1) * s + (k - 1) * d + 1 - in, 0)``; ``same_upper`` puts the odd
  extra at the end (``begin = total // 2``), ``same_lower`` at the beginning
  (``begin = (total + 1) // 2``). (oneDNN itself only implements auto_pad same_* for dilation 1;
  here any dilation is accepted with the effective kernel size.)
* ``groups``: the channel groups.

``convolution_backward_data(diff_dst, weights, dst_shape=None, ...)``: ``dst_shape`` is the shape
of the result (``diff_src``, the forward input), full (spatial rank + 2 entries) in
``data_format`` order or its spatial entries only. It resolves the ambiguity of strided
convolutions (several input sizes give the same output size). Without it the smallest
consistent size is used, plus ``output_padding``, per spatial axis:
``(out - 1) * s + (k - 1) * d + 1 - pads_begin - pads_end + output_padding`` (``valid`` / ``none``),
``(out - 1) * s + 1 + output_padding`` (``same_*``). Every call checks that ``diff_dst`` has the
forward output's shape for the resolved result shape (``ValueError`` otherwise).
``convolution_backward_weights(src, diff_dst, weights_shape, ...)`` likewise takes the full
weights shape in ``weights_format`` order or its kernel (spatial) entries only.
"""

from __future__ import annotations

import numbers
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, Optional, Sequence, Tuple,
                    Union, cast)

import numpy as np
import numpy.typing as npt

import cconv as _cc

from . import _conv_out, _int, _same_pads

if TYPE_CHECKING:
    from . import _ConvKeywords

Array = npt.NDArray[Any]
# What the size attributes accept: one int for every spatial axis, or one per axis.
IntOrInts = Union[int, Sequence[int]]
Ints = Tuple[int, ...]
Pads = Tuple[Tuple[int, int], ...]  # one (begin, end) pair per spatial axis

__all__ = ["convolution_forward", "convolution_backward_data", "convolution_backward_weights"]

# cconv's layout names per spatial rank, for each Graph API format.
_LAYOUTS: Dict[str, Dict[int, str]] = {
    "NXC": {1: "NWC", 2: "NHWC", 3: "NDHWC"},
    "NCX": {1: "NCW", 2: "NCHW", 3: "NCDHW"},
}
_WEIGHT_LAYOUTS: Dict[str, Dict[int, str]] = {
    "XIO": {1: "WIO", 2: "HWIO", 3: "DHWIO"},
    "OIX": {1: "OIW", 2: "OIHW", 3: "OIDHW"},
}
_AXES: Dict[int, str] = {1: "width", 2: "height, width", 3: "depth, height, width"}
_AUTO_PAD = ("none", "valid", "same_upper", "same_lower")

_Core = Callable[..., Array]
# The core's forward, data-gradient and weight-gradient functions per spatial rank.
_CORE: Dict[int, Tuple[_Core, _Core, _Core]] = {
    1: (_cc.conv1d, _cc.conv1d_backward_data, _cc.conv1d_backward_weight),
    2: (_cc.conv2d, _cc.conv2d_backward_data, _cc.conv2d_backward_weight),
    3: (_cc.conv3d, _cc.conv3d_backward_data, _cc.conv3d_backward_weight),
}


def _ints(value: object, what: str, rank: int) -> Ints:
    """int -> (v,) * rank; a sequence of ``rank`` ints -> their tuple.

    The rank-generic sibling of ``cconv.compat._pair`` (which is 2-D only), with its messages.
    """
    if not isinstance(value, bool) and isinstance(value, numbers.Integral):
        return (int(value),) * rank
    try:
        items = list(cast(Iterable[Any], value))  # the items are checked below
    except TypeError:
        raise TypeError(
            f"{what} must be an int or a sequence of {rank} ints, got {value!r}") from None
    if len(items) != rank:
        entries = "entry" if rank == 1 else "entries"
        raise ValueError(
            f"{what} must have {rank} {entries} ({_AXES[rank]}), got {len(items)}: {value!r}")
    return tuple(_int(v, what) for v in items)


def _shape(value: object, what: str) -> Ints:
    """A shape argument (any sequence or array of ints) as a flat tuple of ints."""
    return tuple(_int(v, what) for v in np.asarray(value).reshape(-1).tolist())


def _as_nd(a: npt.ArrayLike, what: str) -> Array:
    """``a`` as an array of 3, 4 or 5 dimensions (a 1-, 2- or 3-D convolution's operand)."""
    a = np.asarray(a)
    if a.ndim - 2 not in _CORE:
        raise ValueError(
            f"{what} must be 3-D, 4-D or 5-D (a 1-D, 2-D or 3-D convolution), got shape "
            f"{a.shape}")
    return a


def _spatial_rank(first: Array, second: Array, names: Tuple[str, str]) -> int:
    """The spatial rank the two operands share (ValueError when they do not agree)."""
    if first.ndim != second.ndim:
        raise ValueError(
            f"{names[0]} and {names[1]} must have the same number of dimensions, got shapes "
            f"{first.shape} ({first.ndim}-D) and {second.shape} ({second.ndim}-D)")
    return first.ndim - 2


class _Attrs:
    """The Graph API attributes of one call, checked, for a convolution of spatial ``rank``."""

    def __init__(
        self,
        rank: int,
        strides: object,
        pads_begin: object,
        pads_end: object,
        dilations: object,
        auto_pad: Optional[str],
        groups: object,
        data_format: str,
        weights_format: str,
    ) -> None:
        if data_format not in _LAYOUTS:
            raise ValueError(f"data_format must be 'NXC' or 'NCX', got {data_format!r}")
        if weights_format not in _WEIGHT_LAYOUTS:
            raise ValueError(f"weights_format must be 'XIO' or 'OIX', got {weights_format!r}")
        ap = "none" if auto_pad is None else str(auto_pad).lower()
        if ap not in _AUTO_PAD:
            raise ValueError(f"auto_pad must be one of {_AUTO_PAD}, got {auto_pad!r}")
        self.rank = rank
        self.layout = _LAYOUTS[data_format][rank]
        self.weight_layout = _WEIGHT_LAYOUTS[weights_format][rank]
        self.channels_last = data_format == "NXC"
        self.weights_last = weights_format == "XIO"
        self.auto_pad = ap
        self.stride = _ints(strides, "strides", rank)
        self.dilation = _ints(dilations, "dilations", rank)
        if min(self.stride) < 1:
            raise ValueError(f"strides must be positive, got {strides!r}")
        if min(self.dilation) < 1:
            raise ValueError(
                f"dilations must be >= 1 (1 = no dilation in the Graph API), got {dilations!r}"
            )
        self.pads_begin = _ints(pads_begin, "pads_begin", rank)
        self.pads_end = _ints(pads_end, "pads_end", rank)
        if min(self.pads_begin + self.pads_end) < 0:
            raise ValueError(
                f"pads_begin / pads_end must be non-negative, got {pads_begin!r} / {pads_end!r}"
            )
        self.groups = _int(groups, "groups")
        if self.groups < 1:
            raise ValueError(f"groups must be positive, got {groups!r}")

    # -- shapes (activations in data_format order, weights in weights_format order)
    def spatial(self, shape: Sequence[int]) -> Ints:
        return tuple(shape[1:-1] if self.channels_last else shape[2:])

    def channels(self, shape: Sequence[int]) -> int:
        return shape[-1] if self.channels_last else shape[1]

    def data_shape(self, n: int, c: int, spatial: Sequence[int]) -> Ints:
        return (n, *spatial, c) if self.channels_last else (n, c, *spatial)

    def kernel(self, w_shape: Sequence[int]) -> Ints:
        return tuple(w_shape[:-2] if self.weights_last else w_shape[2:])

    def in_channels_per_group(self, w_shape: Sequence[int]) -> int:
        return w_shape[-2] if self.weights_last else w_shape[1]

    def weights_shape(self, k: int, cg: int, kernel: Sequence[int]) -> Ints:
        return (*kernel, cg, k) if self.weights_last else (k, cg, *kernel)

    def full_shape(self, sizes: Ints, spatial_only: Callable[[Ints], Ints], what: str) -> Ints:
        """A shape argument given in full (rank + 2 entries) or as its spatial entries."""
        if len(sizes) == self.rank + 2:
            return sizes
        if len(sizes) == self.rank:
            return spatial_only(sizes)
        raise ValueError(
            f"{what} must have {self.rank + 2} entries (or the {self.rank} spatial ones), "
            f"got {len(sizes)}: {list(sizes)}"
        )

    # -- geometry
    def pads(self, in_sizes: Sequence[int], kernel: Sequence[int]) -> Pads:
        """Explicit (begin, end) per spatial axis for a forward input of spatial size
        ``in_sizes``."""
        if self.auto_pad == "valid":
            return ((0, 0),) * self.rank
        if self.auto_pad in ("same_upper", "same_lower"):
            lower = self.auto_pad == "same_lower"
            return tuple(
                _same_pads(in_sizes[i], kernel[i], self.stride[i], self.dilation[i], lower)
                for i in range(self.rank)
            )
        return tuple(zip(self.pads_begin, self.pads_end))

    def out_sizes(self, in_sizes: Sequence[int], kernel: Sequence[int], pads: Pads) -> Ints:
        return tuple(
            _conv_out(in_sizes[i], kernel[i], self.stride[i], self.dilation[i], *pads[i])
            for i in range(self.rank)
        )

    def smallest_input(self, out: Sequence[int], kernel: Sequence[int],
                       output_padding: Sequence[int]) -> Ints:
        """The smallest forward input sizes giving ``out`` outputs, plus ``output_padding``."""
        sizes = []
        for i in range(self.rank):
            if self.auto_pad in ("same_upper", "same_lower"):
                size = (out[i] - 1) * self.stride[i] + 1
            else:
                begin, end = ((0, 0) if self.auto_pad == "valid"
                              else (self.pads_begin[i], self.pads_end[i]))
                eff = (kernel[i] - 1) * self.dilation[i] + 1
                size = (out[i] - 1) * self.stride[i] + eff - begin - end
            sizes.append(size + output_padding[i])
        return tuple(sizes)

    def kwargs(self, pads: Pads) -> _ConvKeywords:
        return dict(
            stride=self.stride,
            padding=pads,
            dilation=self.dilation,
            groups=self.groups,
            layout=self.layout,
            weight_layout=self.weight_layout,
        )


def _check_dst(attrs: _Attrs, diff_dst: Array, x_shape: Sequence[int], kernel: Ints, pads: Pads,
               op: str) -> None:
    want = attrs.out_sizes(attrs.spatial(x_shape), kernel, pads)
    got = attrs.spatial(diff_dst.shape)
    if want != got:
        raise ValueError(
            f"{op}: diff_dst has spatial size {got} but a forward input of shape "
            f"{tuple(x_shape)} with strides {attrs.stride}, pads {pads}, "
            f"dilations {attrs.dilation} gives {want}"
        )


def convolution_forward(
    src: npt.ArrayLike,
    weights: npt.ArrayLike,
    bias: Optional[npt.ArrayLike] = None,
    *,
    strides: IntOrInts = 1,
    pads_begin: IntOrInts = 0,
    pads_end: IntOrInts = 0,
    dilations: IntOrInts = 1,
    auto_pad: Optional[str] = "none",
    groups: int = 1,
    data_format: str = "NXC",
    weights_format: str = "XIO",
) -> Array:
    """Graph API ``Convolution``: ``dst = conv(src, weights) + bias``, 1-D, 2-D or 3-D.

    A cross-correlation, as oneDNN computes it. The spatial rank is ``src.ndim - 2``.

    Parameters
    ----------
    src : array_like
        The input, 3-D, 4-D or 5-D: (N, X..., C) for ``data_format="NXC"``, (N, C, X...)
        for ``"NCX"``, where X... are the spatial axes (W), (H, W) or (D, H, W); float16,
        float32 or float64.
    weights : array_like
        As many dimensions as ``src``: (kX..., C/groups, K) for ``weights_format="XIO"``,
        (K, C/groups, kX...) for ``"OIX"``.
    bias : array_like, optional
        Shape (K,), added to every output pixel.
    strides : int or sequence of ints
        Positive; one int for every spatial axis or one per axis.
    pads_begin, pads_end : int or sequence of ints
        Non-negative zero padding before and after each spatial axis (one int for all or
        one per axis); used only with ``auto_pad="none"``.
    dilations : int or sequence of ints
        Graph API convention: 1 means no dilation (the primitive API's 0).
    auto_pad : {"none", "valid", "same_upper", "same_lower"} or None
        Case-insensitive; None is ``"none"``. ``"valid"`` pads nothing; ``"same_*"`` compute
        the padding that makes each output size ``ceil(in / stride)`` (the odd extra at the
        end for ``"same_upper"``, at the beginning for ``"same_lower"``), ignoring
        ``pads_begin`` / ``pads_end``; any dilation is accepted.
    groups : int
        Positive; divides C and K.
    data_format : {"NXC", "NCX"}
        Layout of ``src`` and of the result.
    weights_format : {"XIO", "OIX"}
        Layout of ``weights``.

    Returns
    -------
    ndarray
        ``dst``: (N, OX..., K) or (N, K, OX...) in ``data_format``, with, per spatial axis,
        ``O = (I + begin + end - dilation*(k - 1) - 1) // stride + 1``, of dtype
        ``numpy.result_type(src, weights)`` (float16 computed in float32).
    """
    x = _as_nd(src, "src")
    w = _as_nd(weights, "weights")
    rank = _spatial_rank(x, w, ("src", "weights"))
    a = _Attrs(
        rank, strides, pads_begin, pads_end, dilations, auto_pad, groups, data_format,
        weights_format
    )
    pads = a.pads(a.spatial(x.shape), a.kernel(w.shape))
    forward = _CORE[rank][0]
    return forward(x, w, bias, **a.kwargs(pads))


def convolution_backward_data(
    diff_dst: npt.ArrayLike,
    weights: npt.ArrayLike,
    dst_shape: Optional[Sequence[int]] = None,
    *,
    strides: IntOrInts = 1,
    pads_begin: IntOrInts = 0,
    pads_end: IntOrInts = 0,
    dilations: IntOrInts = 1,
    auto_pad: Optional[str] = "none",
    output_padding: IntOrInts = 0,
    groups: int = 1,
    data_format: str = "NXC",
    weights_format: str = "XIO",
) -> Array:
    """Graph API ``ConvolutionBackwardData``: the gradient of ``Convolution`` w.r.t. ``src``.

    Parameters
    ----------
    diff_dst : array_like
        Gradient of the forward output, 3-D, 4-D or 5-D in ``data_format`` order ((N, OX...,
        K) for ``"NXC"``, (N, K, OX...) for ``"NCX"``); it must have the forward output's
        shape for the resolved ``diff_src`` shape (ValueError otherwise).
    weights : array_like
        The forward weights, in ``weights_format`` order, with as many dimensions as
        ``diff_dst``.
    dst_shape : sequence of ints, optional
        Shape of the result (``diff_src``, the forward ``src``): all ``ndim`` entries in
        ``data_format`` order, or its ``ndim - 2`` spatial entries (N then comes from
        ``diff_dst``, C from ``weights`` and ``groups``). It resolves the input size that
        strided convolutions leave ambiguous. Default, per spatial axis: the smallest
        consistent size plus ``output_padding``, ``(O - 1)*stride + (k - 1)*dilation + 1 -
        pads_begin - pads_end + output_padding`` (no padding for ``"valid"``), or ``(O -
        1)*stride + 1 + output_padding`` for ``"same_*"``.
    strides, pads_begin, pads_end, dilations, groups, data_format, weights_format
        The forward op's attributes, as in :func:`convolution_forward`.
    auto_pad : {"none", "valid", "same_upper", "same_lower"} or None
        As in :func:`convolution_forward`; ``"same_*"`` padding is computed from the
        resolved ``diff_src`` spatial size (the forward input's).
    output_padding : int or sequence of ints
        Non-negative extra size added to the inferred size, one int for every spatial axis
        or one per axis; ignored when ``dst_shape`` is given.

    Returns
    -------
    ndarray
        ``diff_src``: the resolved shape, in ``data_format`` order, of dtype
        ``numpy.result_type(diff_dst, weights)``.
    """
    dy = _as_nd(diff_dst, "diff_dst")
    w = _as_nd(weights, "weights")
    rank = _spatial_rank(dy, w, ("diff_dst", "weights"))
    a = _Attrs(
        rank, strides, pads_begin, pads_end, dilations, auto_pad, groups, data_format,
        weights_format
    )
    kernel = a.kernel(w.shape)
    n, c = dy.shape[0], a.in_channels_per_group(w.shape) * a.groups
    x_shape: Ints
    if dst_shape is not None:
        x_shape = a.full_shape(_shape(dst_shape, "dst_shape"),
                               lambda sizes: a.data_shape(n, c, sizes), "dst_shape")
    else:
        op = _ints(output_padding, "output_padding", rank)
        if min(op) < 0:
            raise ValueError(f"output_padding must be non-negative, got {output_padding!r}")
        sizes = a.smallest_input(a.spatial(dy.shape), kernel, op)
        if min(sizes) < 1:
            raise ValueError(
                f"the inferred diff_src spatial size {sizes} is not positive; pass dst_shape"
            )
        x_shape = a.data_shape(n, c, sizes)
    pads = a.pads(a.spatial(x_shape), kernel)
    _check_dst(a, dy, x_shape, kernel, pads, "ConvolutionBackwardData")
    backward_data = _CORE[rank][1]
    return backward_data(dy, w, x_shape, **a.kwargs(pads))


def convolution_backward_weights(
    src: npt.ArrayLike,
    diff_dst: npt.ArrayLike,
    weights_shape: Sequence[int],
    *,
    strides: IntOrInts = 1,
    pads_begin: IntOrInts = 0,
    pads_end: IntOrInts = 0,
    dilations: IntOrInts = 1,
    auto_pad: Optional[str] = "none",
    groups: int = 1,
    data_format: str = "NXC",
    weights_format: str = "XIO",
) -> Array:
    """Graph API ``ConvolutionBackwardWeights``: the gradient of ``Convolution`` w.r.t. weights.

    Parameters
    ----------
    src : array_like
        The forward input, 3-D, 4-D or 5-D in ``data_format`` order.
    diff_dst : array_like
        Gradient of the forward output, in ``data_format`` order with as many dimensions as
        ``src``; it must have the forward output's shape for ``src`` and ``weights_shape``
        (ValueError otherwise).
    weights_shape : sequence of ints
        Shape of the weights (and of the result): all ``src.ndim`` entries in
        ``weights_format`` order ((kX..., C/groups, K) for ``"XIO"``, (K, C/groups, kX...)
        for ``"OIX"``), or the ``src.ndim - 2`` kernel sizes only (K then comes from
        ``diff_dst``, C/groups from ``src`` and ``groups``).
    strides, pads_begin, pads_end, dilations, auto_pad, groups, data_format, weights_format
        The forward op's attributes, as in :func:`convolution_forward`.

    Returns
    -------
    ndarray
        ``diff_weights`` of the full weights shape, summed over the batch, of dtype
        ``numpy.result_type(src, diff_dst)``.
    """
    x = _as_nd(src, "src")
    dy = _as_nd(diff_dst, "diff_dst")
    rank = _spatial_rank(x, dy, ("src", "diff_dst"))
    a = _Attrs(
        rank, strides, pads_begin, pads_end, dilations, auto_pad, groups, data_format,
        weights_format
    )
    ws = a.full_shape(_shape(weights_shape, "weights_shape"),
                      lambda kernel: _weights_from_operands(a, x, dy, kernel), "weights_shape")
    kernel = a.kernel(ws)
    pads = a.pads(a.spatial(x.shape), kernel)
    _check_dst(a, dy, x.shape, kernel, pads, "ConvolutionBackwardWeights")
    backward_weights = _CORE[rank][2]
    return backward_weights(dy, x, ws, **a.kwargs(pads))


def _weights_from_operands(attrs: _Attrs, x: Array, dy: Array, kernel: Ints) -> Ints:
    """The full weights shape for ``kernel``: K from ``diff_dst``, C/groups from ``src``."""
    c = attrs.channels(x.shape)
    if c % attrs.groups:
        raise ValueError(f"groups={attrs.groups} must divide src's {c} channels")
    return attrs.weights_shape(attrs.channels(dy.shape), c // attrs.groups, kernel)
