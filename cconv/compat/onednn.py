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

import numpy as np

import cconv as _cc

from . import _conv_out, _int, _pair, _same_pads

__all__ = ["convolution_forward", "convolution_backward_data", "convolution_backward_weights"]

_LAYOUTS = {"NXC": "NHWC", "NCX": "NCHW"}
_WEIGHT_LAYOUTS = {"XIO": "HWIO", "OIX": "OIHW"}
_AUTO_PAD = ("none", "valid", "same_upper", "same_lower")


class _Attrs:
    def __init__(
        self,
        strides,
        pads_begin,
        pads_end,
        dilations,
        auto_pad,
        groups,
        data_format,
        weights_format,
    ):
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
    def spatial(self, shape):
        return (shape[1], shape[2]) if self.layout == "NHWC" else (shape[2], shape[3])

    def channels(self, shape):
        return shape[3] if self.layout == "NHWC" else shape[1]

    def data_shape(self, n, c, hw):
        return (n, hw[0], hw[1], c) if self.layout == "NHWC" else (n, c, hw[0], hw[1])

    def kernel(self, w_shape):
        return (
            (w_shape[0], w_shape[1]) if self.weight_layout == "HWIO" else (w_shape[2], w_shape[3])
        )

    def out_channels(self, w_shape):
        return w_shape[3] if self.weight_layout == "HWIO" else w_shape[0]

    def pads(self, in_hw, k_hw):
        """Explicit ((top, bottom), (left, right)) for a forward input of spatial size in_hw."""
        if self.auto_pad == "valid":
            return ((0, 0), (0, 0))
        if self.auto_pad in ("same_upper", "same_lower"):
            lower = self.auto_pad == "same_lower"
            return tuple(
                _same_pads(in_hw[i], k_hw[i], self.stride[i], self.dilation[i], lower)
                for i in range(2)
            )
        return tuple((self.pads_begin[i], self.pads_end[i]) for i in range(2))

    def out_hw(self, in_hw, k_hw, pads):
        return tuple(
            _conv_out(in_hw[i], k_hw[i], self.stride[i], self.dilation[i], *pads[i])
            for i in range(2)
        )

    def kwargs(self, pads):
        return dict(
            stride=self.stride,
            padding=pads,
            dilation=self.dilation,
            groups=self.groups,
            layout=self.layout,
            weight_layout=self.weight_layout,
        )


def _as4(a, what):
    a = np.asarray(a)
    if a.ndim != 4:
        raise ValueError(f"{what} must be 4-D (2-D spatial convolution), got shape {a.shape}")
    return a


def _check_dst(attrs, diff_dst, x_shape, k_hw, pads, op):
    want = attrs.out_hw(attrs.spatial(x_shape), k_hw, pads)
    got = attrs.spatial(diff_dst.shape)
    if want != got:
        raise ValueError(
            f"{op}: diff_dst has spatial size {got} but a forward input of shape "
            f"{tuple(x_shape)} with strides {attrs.stride}, pads {pads}, "
            f"dilations {attrs.dilation} gives {want}"
        )


def convolution_forward(
    src,
    weights,
    bias=None,
    *,
    strides=1,
    pads_begin=0,
    pads_end=0,
    dilations=1,
    auto_pad="none",
    groups=1,
    data_format="NXC",
    weights_format="XIO",
):
    """Graph API ``Convolution``: dst = conv(src, weights) (+ bias, shape (K,))."""
    a = _Attrs(
        strides, pads_begin, pads_end, dilations, auto_pad, groups, data_format, weights_format
    )
    x = _as4(src, "src")
    w = _as4(weights, "weights")
    pads = a.pads(a.spatial(x.shape), a.kernel(w.shape))
    return _cc.conv2d(x, w, bias, **a.kwargs(pads))


def convolution_backward_data(
    diff_dst,
    weights,
    dst_shape=None,
    *,
    strides=1,
    pads_begin=0,
    pads_end=0,
    dilations=1,
    auto_pad="none",
    output_padding=0,
    groups=1,
    data_format="NXC",
    weights_format="XIO",
):
    """Graph API ``ConvolutionBackwardData``: diff_src of shape ``dst_shape``.

    See the module docstring for the attributes and ``dst_shape``.
    """
    a = _Attrs(
        strides, pads_begin, pads_end, dilations, auto_pad, groups, data_format, weights_format
    )
    dy = _as4(diff_dst, "diff_dst")
    w = _as4(weights, "weights")
    k_hw = a.kernel(w.shape)
    n = dy.shape[0]
    c = (w.shape[2] if a.weight_layout == "HWIO" else w.shape[1]) * a.groups
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
    src,
    diff_dst,
    weights_shape,
    *,
    strides=1,
    pads_begin=0,
    pads_end=0,
    dilations=1,
    auto_pad="none",
    groups=1,
    data_format="NXC",
    weights_format="XIO",
):
    """Graph API ``ConvolutionBackwardWeights``: diff_weights of shape ``weights_shape``.

    ``weights_shape`` is in ``weights_format`` order.
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
