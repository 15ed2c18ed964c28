"""oneDNN Graph API ``Convolution``, ``ConvolutionBackwardData``, ``ConvolutionBackwardWeights``.

Attributes are those of the Graph API ops (2-D only):

* ``data_format``: ``"NXC"`` (default; arrays (N, H, W, C)) or ``"NCX"`` ((N, C, H, W)).
* ``weights_format``: ``"XIO"`` (default; (KH, KW, C/groups, K)) or ``"OIX"``
  ((K, C/groups, KH, KW)).
* ``strides``, ``pads_begin``, ``pads_end``, ``dilations``: ints or (h, w) lists. Graph API
  dilations count like PyTorch's: ``1`` means no dilation (the oneDNN *primitive* API's 0).
* ``auto_pad``: ``"none"`` (use ``pads_begin`` / ``pads_end``), ``"valid"`` (no padding),
  ``"same_upper"`` / ``"same_lower"``: ``pads_begin`` / ``pads_end`` are ignored and computed, as
  oneDNN's shape inference does, with the *forward* convolution's rule from the forward input's
  spatial size ``in`` (the ``src`` of the forward op, i.e. ``dst_shape`` for backward data):
  ``total = max((ceil(in / s) - 1) * s + (k - 1) * d + 1 - in, 0)``; ``same_upper`` puts the odd
  extra at the end (``begin = total // 2``), ``same_lower`` at the beginning
  (``begin = (total + 1) // 2``). (oneDNN itself only implements auto_pad same_* for dilation 1;
  here any dilation is accepted with the effective kernel size.)
* ``groups``: the channel groups.

``convolution_backward_data(diff_dst, weights, dst_shape=None, ...)``: ``dst_shape`` is the shape
of the result (``diff_src``, the forward input), full 4-D in ``data_format`` order or its 2
spatial entries. It resolves the ambiguity of strided convolutions (several input sizes give the
same output size). Without it the smallest consistent size is used, plus ``output_padding``:
``(out - 1) * s + (k - 1) * d + 1 - pads_begin - pads_end + output_padding`` (``valid`` / ``none``),
``(out - 1) * s + 1 + output_padding`` (``same_*``). Every call checks that ``diff_dst`` has the
forward output's shape for the resolved result shape (``ValueError`` otherwise).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence, Tuple, cast

import numpy as np
import numpy.typing as npt

import cconv as _cc

from . import _conv_out, _int, _pair, _same_pads

if TYPE_CHECKING:
    from .._geometry import IntOrPair, Pads, Pair, Shape4
    from . import _ConvKeywords

Array = npt.NDArray[Any]

__all__ = ["convolution_forward", "convolution_backward_data", "convolution_backward_weights"]

_LAYOUTS = {"NXC": "NHWC", "NCX": "NCHW"}
_WEIGHT_LAYOUTS = {"XIO": "HWIO", "OIX": "OIHW"}
_AUTO_PAD = ("none", "valid", "same_upper", "same_lower")


class _Attrs:
    def __init__(
        self,
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
        self.layout = _LAYOUTS[data_format]
        self.weight_layout = _WEIGHT_LAYOUTS[weights_format]
        self.data_format = data_format
        self.auto_pad = ap
        self.stride = _pair(strides, "strides")
        self.dilation = _pair(dilations, "dilations")
        if min(self.stride) < 1:
            raise ValueError(f"strides must be positive, got {strides!r}")
        if min(self.dilation) < 1:
            raise ValueError(
                f"dilations must be >= 1 (1 = no dilation in the Graph API), got {dilations!r}"
            )
        self.pads_begin = _pair(pads_begin, "pads_begin")
        self.pads_end = _pair(pads_end, "pads_end")
        if min(self.pads_begin + self.pads_end) < 0:
            raise ValueError(
                f"pads_begin / pads_end must be non-negative, got {pads_begin!r} / {pads_end!r}"
            )
        self.groups = _int(groups, "groups")
        if self.groups < 1:
            raise ValueError(f"groups must be positive, got {groups!r}")

    # -- shapes
    def spatial(self, shape: Sequence[int]) -> Pair:
        return (shape[1], shape[2]) if self.layout == "NHWC" else (shape[2], shape[3])

    def channels(self, shape: Sequence[int]) -> int:
        return shape[3] if self.layout == "NHWC" else shape[1]

    def data_shape(self, n: int, c: int, hw: Sequence[int]) -> Shape4:
        return (n, hw[0], hw[1], c) if self.layout == "NHWC" else (n, c, hw[0], hw[1])

    def kernel(self, w_shape: Sequence[int]) -> Pair:
        return (
            (w_shape[0], w_shape[1]) if self.weight_layout == "HWIO" else (w_shape[2], w_shape[3])
        )

    def out_channels(self, w_shape: Sequence[int]) -> int:
        return w_shape[3] if self.weight_layout == "HWIO" else w_shape[0]

    def pads(self, in_hw: Sequence[int], k_hw: Sequence[int]) -> Pads:
        """Explicit ((top, bottom), (left, right)) for a forward input of spatial size in_hw."""
        if self.auto_pad == "valid":
            return ((0, 0), (0, 0))
        if self.auto_pad in ("same_upper", "same_lower"):
            lower = self.auto_pad == "same_lower"
            return cast("Pads", tuple(
                _same_pads(in_hw[i], k_hw[i], self.stride[i], self.dilation[i], lower)
                for i in range(2)
            ))
        return cast("Pads", tuple((self.pads_begin[i], self.pads_end[i]) for i in range(2)))

    def out_hw(self, in_hw: Sequence[int], k_hw: Sequence[int], pads: Pads) -> Pair:
        return cast("Pair", tuple(
            _conv_out(in_hw[i], k_hw[i], self.stride[i], self.dilation[i], *pads[i])
            for i in range(2)
        ))

    def kwargs(self, pads: Pads) -> _ConvKeywords:
        return dict(
            stride=self.stride,
            padding=pads,
            dilation=self.dilation,
            groups=self.groups,
            layout=self.layout,
            weight_layout=self.weight_layout,
        )


def _as4(a: npt.ArrayLike, what: str) -> Array:
    a = np.asarray(a)
    if a.ndim != 4:
        raise ValueError(f"{what} must be 4-D (2-D spatial convolution), got shape {a.shape}")
    return a


def _check_dst(attrs: _Attrs, diff_dst: Array, x_shape: Sequence[int], k_hw: Pair, pads: Pads,
               op: str) -> None:
    want = attrs.out_hw(attrs.spatial(x_shape), k_hw, pads)
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
    strides: IntOrPair = 1,
    pads_begin: IntOrPair = 0,
    pads_end: IntOrPair = 0,
    dilations: IntOrPair = 1,
    auto_pad: Optional[str] = "none",
    groups: int = 1,
    data_format: str = "NXC",
    weights_format: str = "XIO",
) -> Array:
    """Graph API ``Convolution``: ``dst = conv(src, weights) + bias``.

    A cross-correlation, as oneDNN computes it.

    Parameters
    ----------
    src : array_like
        The input: (N, H, W, C) for ``data_format="NXC"``, (N, C, H, W) for ``"NCX"``;
        float16, float32 or float64.
    weights : array_like
        (KH, KW, C/groups, K) for ``weights_format="XIO"``, (K, C/groups, KH, KW) for
        ``"OIX"``.
    bias : array_like, optional
        Shape (K,), added to every output pixel.
    strides : int or (int, int)
        Positive, per (h, w).
    pads_begin, pads_end : int or (int, int)
        Non-negative zero padding before (top, left) and after (bottom, right) each spatial
        axis; used only with ``auto_pad="none"``.
    dilations : int or (int, int)
        Graph API convention: 1 means no dilation (the primitive API's 0).
    auto_pad : {"none", "valid", "same_upper", "same_lower"} or None
        Case-insensitive; None is ``"none"``. ``"valid"`` pads nothing; ``"same_*"`` compute
        the padding that makes the output ``ceil(in / stride)`` (the odd extra at the end
        for ``"same_upper"``, at the beginning for ``"same_lower"``), ignoring
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
        ``dst``: (N, OH, OW, K) or (N, K, OH, OW) in ``data_format``, with ``OH = (H +
        top + bottom - dilation_h*(KH - 1) - 1) // stride_h + 1`` (likewise OW), of dtype
        ``numpy.result_type(src, weights)`` (float16 computed in float32).
    """
    a = _Attrs(
        strides, pads_begin, pads_end, dilations, auto_pad, groups, data_format, weights_format
    )
    x = _as4(src, "src")
    w = _as4(weights, "weights")
    pads = a.pads(a.spatial(x.shape), a.kernel(w.shape))
    return _cc.conv2d(x, w, bias, **a.kwargs(pads))


def convolution_backward_data(
    diff_dst: npt.ArrayLike,
    weights: npt.ArrayLike,
    dst_shape: Optional[Sequence[int]] = None,
    *,
    strides: IntOrPair = 1,
    pads_begin: IntOrPair = 0,
    pads_end: IntOrPair = 0,
    dilations: IntOrPair = 1,
    auto_pad: Optional[str] = "none",
    output_padding: IntOrPair = 0,
    groups: int = 1,
    data_format: str = "NXC",
    weights_format: str = "XIO",
) -> Array:
    """Graph API ``ConvolutionBackwardData``: the gradient of ``Convolution`` w.r.t. ``src``.

    Parameters
    ----------
    diff_dst : array_like
        Gradient of the forward output, (N, OH, OW, K) for ``"NXC"`` or (N, K, OH, OW) for
        ``"NCX"``; it must have the forward output's shape for the resolved ``diff_src``
        shape (ValueError otherwise).
    weights : array_like
        The forward weights, in ``weights_format`` order.
    dst_shape : sequence of ints, optional
        Shape of the result (``diff_src``, the forward ``src``): 4 entries in
        ``data_format`` order, or its 2 spatial entries (N then comes from ``diff_dst``, C
        from ``weights`` and ``groups``). It resolves the input size that strided
        convolutions leave ambiguous. Default: the smallest consistent size plus
        ``output_padding``, ``(OH - 1)*stride + (KH - 1)*dilation + 1 - pads_begin -
        pads_end + output_padding`` (no padding for ``"valid"``), or ``(OH - 1)*stride + 1
        + output_padding`` for ``"same_*"``.
    strides, pads_begin, pads_end, dilations, groups, data_format, weights_format
        The forward op's attributes, as in :func:`convolution_forward`.
    auto_pad : {"none", "valid", "same_upper", "same_lower"} or None
        As in :func:`convolution_forward`; ``"same_*"`` padding is computed from the
        resolved ``diff_src`` spatial size (the forward input's).
    output_padding : int or (int, int)
        Non-negative extra rows / columns added to the inferred size; ignored when
        ``dst_shape`` is given.

    Returns
    -------
    ndarray
        ``diff_src``: the resolved shape, in ``data_format`` order, of dtype
        ``numpy.result_type(diff_dst, weights)``.
    """
    a = _Attrs(
        strides, pads_begin, pads_end, dilations, auto_pad, groups, data_format, weights_format
    )
    dy = _as4(diff_dst, "diff_dst")
    w = _as4(weights, "weights")
    k_hw = a.kernel(w.shape)
    n = dy.shape[0]
    c = (w.shape[2] if a.weight_layout == "HWIO" else w.shape[1]) * a.groups
    x_shape: Tuple[int, ...]
    if dst_shape is not None:
        sizes = [_int(v, "dst_shape") for v in np.asarray(dst_shape).reshape(-1).tolist()]
        if len(sizes) == 2:
            x_shape = a.data_shape(n, c, sizes)
        elif len(sizes) == 4:
            x_shape = tuple(sizes)
        else:
            raise ValueError(
                f"dst_shape must have 4 entries (or the 2 spatial ones), got {len(sizes)}: {sizes}"
            )
    else:
        op = _pair(output_padding, "output_padding")
        if min(op) < 0:
            raise ValueError(f"output_padding must be non-negative, got {output_padding!r}")
        out = a.spatial(dy.shape)
        hw = []
        for i in range(2):
            eff = (k_hw[i] - 1) * a.dilation[i] + 1
            if a.auto_pad in ("same_upper", "same_lower"):
                size = (out[i] - 1) * a.stride[i] + 1 + op[i]
            else:
                begin, end = (0, 0) if a.auto_pad == "valid" else (a.pads_begin[i], a.pads_end[i])
                size = (out[i] - 1) * a.stride[i] + eff - begin - end + op[i]
            hw.append(size)
        if min(hw) < 1:
            raise ValueError(
                f"the inferred diff_src spatial size {tuple(hw)} is not positive; pass dst_shape"
            )
        x_shape = a.data_shape(n, c, hw)
    pads = a.pads(a.spatial(x_shape), k_hw)
    _check_dst(a, dy, x_shape, k_hw, pads, "ConvolutionBackwardData")
    return _cc.conv2d_backward_data(dy, w, x_shape, **a.kwargs(pads))


def convolution_backward_weights(
    src: npt.ArrayLike,
    diff_dst: npt.ArrayLike,
    weights_shape: Sequence[int],
    *,
    strides: IntOrPair = 1,
    pads_begin: IntOrPair = 0,
    pads_end: IntOrPair = 0,
    dilations: IntOrPair = 1,
    auto_pad: Optional[str] = "none",
    groups: int = 1,
    data_format: str = "NXC",
    weights_format: str = "XIO",
) -> Array:
    """Graph API ``ConvolutionBackwardWeights``: the gradient of ``Convolution`` w.r.t. weights.

    Parameters
    ----------
    src : array_like
        The forward input, in ``data_format`` order.
    diff_dst : array_like
        Gradient of the forward output, in ``data_format`` order; it must have the forward
        output's shape for ``src`` and ``weights_shape`` (ValueError otherwise).
    weights_shape : sequence of 4 ints
        Shape of the weights (and of the result) in ``weights_format`` order:
        (KH, KW, C/groups, K) for ``"XIO"``, (K, C/groups, KH, KW) for ``"OIX"``.
    strides, pads_begin, pads_end, dilations, auto_pad, groups, data_format, weights_format
        The forward op's attributes, as in :func:`convolution_forward`.

    Returns
    -------
    ndarray
        ``diff_weights`` of shape ``weights_shape``, summed over the batch, of dtype
        ``numpy.result_type(src, diff_dst)``.
    """
    a = _Attrs(
        strides, pads_begin, pads_end, dilations, auto_pad, groups, data_format, weights_format
    )
    x = _as4(src, "src")
    dy = _as4(diff_dst, "diff_dst")
    ws = [_int(v, "weights_shape") for v in np.asarray(weights_shape).reshape(-1).tolist()]
    if len(ws) != 4:
        raise ValueError(f"weights_shape must have 4 entries, got {len(ws)}: {ws}")
    k_hw = a.kernel(ws)
    pads = a.pads(a.spatial(x.shape), k_hw)
    _check_dst(a, dy, x.shape, k_hw, pads, "ConvolutionBackwardWeights")
    return _cc.conv2d_backward_weight(dy, x, tuple(ws), **a.kwargs(pads))
