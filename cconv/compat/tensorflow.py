"""TensorFlow ``Conv2D`` / ``DepthwiseConv2dNative`` and their backprops on cconv.

Conventions kept from TensorFlow (``tf.raw_ops`` / ``tf.nn``):

* ``data_format`` ``"NHWC"`` (default) or ``"NCHW"``; results come back in the same format.
* Filters are always ``[fh, fw, in_channels, out_channels]`` (cconv's ``"HWIO"``), whatever the
  data format. If the input has a multiple of ``in_channels`` channels the convolution is grouped
  (TensorFlow's rule: ``groups = input_depth // filter_in_depth``).
* Depthwise filters are ``[fh, fw, in_channels, channel_multiplier]``; output channel
  ``c * channel_multiplier + m`` is input channel ``c`` convolved with ``filter[:, :, c, m]``.
* ``strides`` / ``dilations``: a 4-list in ``data_format`` order whose batch and channel entries
  must be 1 (else ``ValueError``, as TensorFlow refuses them), or an int / 1-list / 2-list
  ``(h, w)``. ``dilations=None`` means no dilation.
* ``padding``: ``"VALID"``; ``"SAME"`` (output size ``ceil(in / stride)``, the total padding
  ``max((out - 1) * stride + (k - 1) * dilation + 1 - in, 0)`` split with the odd extra row /
  column at the bottom / right); ``"EXPLICIT"`` with ``explicit_paddings`` (8 ints, a
  (before, after) pair per dimension in ``data_format`` order, batch and channel pairs 0); or,
  as ``tf.nn.conv2d`` accepts, a list of four (before, after) pairs in ``data_format`` order.
* Backprop functions take the forward input's size (``input_sizes``: 4 entries in
  ``data_format`` order, or the 2 spatial ones) or the filter's (``filter_sizes``), and check
  that ``out_backprop`` has the forward output's shape for that size.

Arguments after ``dilations`` (``explicit_paddings``, ``use_cudnn_on_gpu``, ``name``) are
keyword-only; ``use_cudnn_on_gpu`` and ``name`` are accepted and ignored. Beyond TensorFlow's CPU
kernels, unequal row/column strides and dilations are accepted for the depthwise ops too.
"""

import numbers

import numpy as np

import cconv as _cc

from .._geometry import conv_output_size
from . import _int, _same_pads

__all__ = [
    "conv2d",
    "conv2d_backprop_input",
    "conv2d_backprop_filter",
    "depthwise_conv2d_native",
    "depthwise_conv2d_native_backprop_input",
    "depthwise_conv2d_native_backprop_filter",
]


# ------------------------------------------------------------------------------ argument parsing


def _data_format(data_format):
    if isinstance(data_format, bytes):
        data_format = data_format.decode()
    if data_format not in ("NHWC", "NCHW"):
        raise ValueError(f"data_format must be 'NHWC' or 'NCHW', got {data_format!r}")
    return data_format


def _hw_axes(data_format):
    """(h axis, w axis, channel axis) of a 4-D array in data_format."""
    return (1, 2, 3) if data_format == "NHWC" else (2, 3, 1)


def _spatial(values, what, data_format, default=1):
    """strides / dilations -> (h, w)."""
    if values is None:
        return (default, default)
    if isinstance(values, numbers.Integral) and not isinstance(values, bool):
        v = _int(values, what)
        items = [v, v]
    else:
        items = [_int(v, what) for v in values]
    if len(items) == 1:
        items = items * 2
    if len(items) == 4:
        h, w, c = _hw_axes(data_format)
        if items[0] != 1 or items[c] != 1:
            raise ValueError(
                f"Current implementation does not yet support {what} in the batch and depth "
                f"dimensions: {what}={list(items)} with data_format={data_format!r} has batch "
                f"entry {items[0]} and channel entry {items[c]} (both must be 1)"
            )
        items = [items[h], items[w]]
    if len(items) != 2:
        raise ValueError(
            f"{what} must be an int or have 1, 2 or 4 entries, got {len(items)}: {values!r}"
        )
    if min(items) < 1:
        raise ValueError(f"{what} must be positive, got {values!r}")
    return tuple(items)


def _explicit_from_pairs(pairs, data_format, what):
    """Four (before, after) pairs in data_format order -> ((top, bottom), (left, right))."""
    pairs = [tuple(_int(v, what) for v in p) for p in pairs]
    if len(pairs) != 4 or any(len(p) != 2 for p in pairs):
        raise ValueError(
            f"{what} must hold 4 (before, after) pairs (8 values) in {data_format} order, "
            f"got {pairs!r}"
        )
    h, w, c = _hw_axes(data_format)
    if pairs[0] != (0, 0) or pairs[c] != (0, 0):
        raise ValueError(
            f"{what} must be 0 in the batch and channel dimensions for "
            f"data_format={data_format!r}, got batch {pairs[0]} and channel {pairs[c]}"
        )
    if min(min(p) for p in pairs) < 0:
        raise ValueError(f"{what} must be non-negative, got {pairs!r}")
    return (pairs[h], pairs[w])


def _padding(padding, explicit_paddings, data_format):
    """-> 'SAME' | 'VALID' | ((top, bottom), (left, right))."""
    if isinstance(padding, bytes):
        padding = padding.decode()
    explicit = list(explicit_paddings) if explicit_paddings is not None else []
    if isinstance(padding, str):
        mode = padding.upper()
        if mode not in ("SAME", "VALID", "EXPLICIT"):
            raise ValueError(f"padding must be 'SAME', 'VALID' or 'EXPLICIT', got {padding!r}")
        if mode != "EXPLICIT":
            if explicit:
                raise ValueError(
                    "explicit_paddings must be empty if padding is not 'EXPLICIT' "
                    f"(padding={padding!r}, explicit_paddings={explicit_paddings!r})"
                )
            return mode
        if len(explicit) != 8:
            raise ValueError(
                "padding='EXPLICIT' needs explicit_paddings with 8 values "
                f"(2 per dimension of {data_format}), got {explicit_paddings!r}"
            )
        return _explicit_from_pairs(
            [explicit[i : i + 2] for i in range(0, 8, 2)], data_format, "explicit_paddings"
        )
    if explicit:
        raise ValueError("explicit_paddings must be empty when padding is given as a list of pairs")
    return _explicit_from_pairs(list(padding), data_format, "padding")


def _resolve_pads(pad, in_hw, k_hw, stride, dilation):
    if pad == "VALID":
        return ((0, 0), (0, 0))
    if pad == "SAME":
        return tuple(_same_pads(in_hw[i], k_hw[i], stride[i], dilation[i]) for i in range(2))
    return pad


def _out_hw(in_hw, k_hw, stride, dilation, pads):
    out = []
    for i in range(2):
        eff = (k_hw[i] - 1) * dilation[i] + 1
        padded = in_hw[i] + pads[i][0] + pads[i][1]
        if padded < eff:
            raise ValueError(
                f"filter of effective size {eff} (size {k_hw[i]}, dilation {dilation[i]}) is "
                f"larger than the padded input ({padded}) along {'HW'[i]}"
            )
        out.append(conv_output_size(in_hw[i], k_hw[i], stride[i], dilation[i], *pads[i]))
    return tuple(out)


def _as4(a, what):
    a = np.asarray(a)
    if a.ndim != 4:
        raise ValueError(f"{what} must be 4-D, got shape {a.shape}")
    return a


def _shape4(sizes, what):
    sizes = [_int(v, what) for v in np.asarray(sizes).reshape(-1).tolist()]
    if len(sizes) != 4:
        raise ValueError(f"{what} must have 4 entries, got {len(sizes)}: {sizes}")
    return tuple(sizes)


def _groups(in_c, filt_in, filt_out, what="filter"):
    if filt_in <= 0 or in_c % filt_in != 0:
        raise ValueError(
            f"input depth ({in_c}) must be a multiple of {what} in_channels ({filt_in})"
        )
    g = in_c // filt_in
    if filt_out % g != 0:
        raise ValueError(
            f"{what} out_channels ({filt_out}) must be divisible by the number of groups "
            f"({g} = {in_c} / {filt_in})"
        )
    return g


class _Conv:
    """Resolved geometry of one TensorFlow convolution call."""

    def __init__(
        self, x_shape, f_shape, strides, padding, data_format, dilations, explicit_paddings
    ):
        self.fmt = _data_format(data_format)
        self.stride = _spatial(strides, "strides", self.fmt)
        self.dilation = _spatial(dilations, "dilations", self.fmt)
        h, w, c = _hw_axes(self.fmt)
        self.in_hw = (x_shape[h], x_shape[w])
        self.k_hw = (f_shape[0], f_shape[1])
        pad = _padding(padding, explicit_paddings, self.fmt)
        self.pads = _resolve_pads(pad, self.in_hw, self.k_hw, self.stride, self.dilation)
        self.out_hw = _out_hw(self.in_hw, self.k_hw, self.stride, self.dilation, self.pads)
        self.x_shape = tuple(x_shape)

    def out_shape(self, n, k):
        return (n, *self.out_hw, k) if self.fmt == "NHWC" else (n, k, *self.out_hw)

    def kwargs(self, groups):
        return dict(
            stride=self.stride,
            padding=self.pads,
            dilation=self.dilation,
            groups=groups,
            layout=self.fmt,
            weight_layout="HWIO",
        )

    def check_out_backprop(self, dy, n, k, op):
        want = self.out_shape(n, k)
        if tuple(dy.shape) != want:
            raise ValueError(
                f"{op}: out_backprop has shape {tuple(dy.shape)} but the forward convolution "
                f"of an input of shape {self.x_shape} gives {want}"
            )


def _input_sizes(input_sizes, dy, in_c, data_format, what="input_sizes"):
    sizes = [_int(v, what) for v in np.asarray(input_sizes).reshape(-1).tolist()]
    if len(sizes) == 2:  # spatial only: batch from out_backprop, depth from the filter
        n = dy.shape[0]
        return (
            (n, sizes[0], sizes[1], in_c)
            if data_format == "NHWC"
            else (n, in_c, sizes[0], sizes[1])
        )
    if len(sizes) != 4:
        raise ValueError(
            f"{what} must have 4 entries (or the 2 spatial ones), got {len(sizes)}: {sizes}"
        )
    return tuple(sizes)


# ------------------------------------------------------------------------------ Conv2D


def conv2d(
    input,
    filter,
    strides,
    padding,
    data_format="NHWC",
    dilations=None,
    explicit_paddings=None,
    *,
    use_cudnn_on_gpu=True,
    name=None,
):
    """``tf.raw_ops.Conv2D`` / ``tf.nn.conv2d``: input (data_format), filter [fh, fw, in, out]."""
    x = _as4(input, "input")
    f = _as4(filter, "filter")
    g_ = _Conv(x.shape, f.shape, strides, padding, data_format, dilations, explicit_paddings)
    c = _hw_axes(g_.fmt)[2]
    groups = _groups(x.shape[c], f.shape[2], f.shape[3])
    return _cc.conv2d(x, f, **g_.kwargs(groups))


def conv2d_backprop_input(
    input_sizes,
    filter,
    out_backprop,
    strides,
    padding,
    data_format="NHWC",
    dilations=None,
    *,
    explicit_paddings=None,
    use_cudnn_on_gpu=True,
    name=None,
):
    """``tf.raw_ops.Conv2DBackpropInput``: gradient of :func:`conv2d` w.r.t. its input."""
    f = _as4(filter, "filter")
    dy = _as4(out_backprop, "out_backprop")
    fmt = _data_format(data_format)
    c = _hw_axes(fmt)[2]
    x_shape = _input_sizes(input_sizes, dy, f.shape[2], fmt)
    g_ = _Conv(x_shape, f.shape, strides, padding, fmt, dilations, explicit_paddings)
    groups = _groups(x_shape[c], f.shape[2], f.shape[3])
    g_.check_out_backprop(dy, x_shape[0], f.shape[3], "Conv2DBackpropInput")
    return _cc.conv2d_backward_data(dy, f, x_shape, **g_.kwargs(groups))


def conv2d_backprop_filter(
    input,
    filter_sizes,
    out_backprop,
    strides,
    padding,
    data_format="NHWC",
    dilations=None,
    *,
    explicit_paddings=None,
    use_cudnn_on_gpu=True,
    name=None,
):
    """``tf.raw_ops.Conv2DBackpropFilter``: gradient of :func:`conv2d` w.r.t. its filter."""
    x = _as4(input, "input")
    dy = _as4(out_backprop, "out_backprop")
    f_shape = _shape4(filter_sizes, "filter_sizes")
    g_ = _Conv(x.shape, f_shape, strides, padding, data_format, dilations, explicit_paddings)
    c = _hw_axes(g_.fmt)[2]
    groups = _groups(x.shape[c], f_shape[2], f_shape[3], "filter_sizes")
    g_.check_out_backprop(dy, x.shape[0], f_shape[3], "Conv2DBackpropFilter")
    return _cc.conv2d_backward_weight(dy, x, f_shape, **g_.kwargs(groups))


# ---------------------------------------------------------------------------- DepthwiseConv2dNative


def _depthwise_weight(f):
    """[fh, fw, C, M] -> cconv HWIO [fh, fw, 1, C*M]; output channel c*M + m (a C-order reshape)."""
    fh, fw, c, m = f.shape
    return np.reshape(f, (fh, fw, 1, c * m))


def _check_depth(in_c, f_c, what):
    if in_c != f_c:
        raise ValueError(
            f"input depth ({in_c}) must equal {what} in_channels (dimension 2, {f_c}) "
            "for a depthwise convolution"
        )


def depthwise_conv2d_native(
    input,
    filter,
    strides,
    padding,
    data_format="NHWC",
    dilations=None,
    *,
    explicit_paddings=None,
    name=None,
):
    """``tf.raw_ops.DepthwiseConv2dNative``: filter [fh, fw, in_channels, channel_multiplier]."""
    x = _as4(input, "input")
    f = _as4(filter, "filter")
    g_ = _Conv(x.shape, f.shape, strides, padding, data_format, dilations, explicit_paddings)
    c = _hw_axes(g_.fmt)[2]
    _check_depth(x.shape[c], f.shape[2], "filter")
    return _cc.conv2d(x, _depthwise_weight(f), **g_.kwargs(f.shape[2]))


def depthwise_conv2d_native_backprop_input(
    input_sizes,
    filter,
    out_backprop,
    strides,
    padding,
    data_format="NHWC",
    dilations=None,
    *,
    explicit_paddings=None,
    name=None,
):
    """``tf.raw_ops.DepthwiseConv2dNativeBackpropInput``: gradient w.r.t. the input."""
    f = _as4(filter, "filter")
    dy = _as4(out_backprop, "out_backprop")
    fmt = _data_format(data_format)
    c = _hw_axes(fmt)[2]
    x_shape = _input_sizes(input_sizes, dy, f.shape[2], fmt)
    _check_depth(x_shape[c], f.shape[2], "filter")
    g_ = _Conv(x_shape, f.shape, strides, padding, fmt, dilations, explicit_paddings)
    g_.check_out_backprop(
        dy, x_shape[0], f.shape[2] * f.shape[3], "DepthwiseConv2dNativeBackpropInput"
    )
    return _cc.conv2d_backward_data(dy, _depthwise_weight(f), x_shape, **g_.kwargs(f.shape[2]))


def depthwise_conv2d_native_backprop_filter(
    input,
    filter_sizes,
    out_backprop,
    strides,
    padding,
    data_format="NHWC",
    dilations=None,
    *,
    explicit_paddings=None,
    name=None,
):
    """``tf.raw_ops.DepthwiseConv2dNativeBackpropFilter``: gradient w.r.t. the filter.

    The result has shape ``filter_sizes``.
    """
    x = _as4(input, "input")
    dy = _as4(out_backprop, "out_backprop")
    f_shape = _shape4(filter_sizes, "filter_sizes")
    g_ = _Conv(x.shape, f_shape, strides, padding, data_format, dilations, explicit_paddings)
    c = _hw_axes(g_.fmt)[2]
    _check_depth(x.shape[c], f_shape[2], "filter_sizes")
    fh, fw, cin, m = f_shape
    g_.check_out_backprop(dy, x.shape[0], cin * m, "DepthwiseConv2dNativeBackpropFilter")
    dw = _cc.conv2d_backward_weight(dy, x, (fh, fw, 1, cin * m), **g_.kwargs(cin))
    return np.reshape(dw, f_shape)
