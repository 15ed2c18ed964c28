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

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any, Iterable, List, Optional, Sequence, Tuple, Union, cast

import numpy as np
import numpy.typing as npt

import cconv as _cc

from .._geometry import conv_output_size
from . import _int, _same_pads

if TYPE_CHECKING:
    from .._geometry import Pads, Pair, Shape4
    from . import _ConvKeywords

Array = npt.NDArray[Any]
# strides / dilations: an int, or 1, 2 or 4 ints; padding: a name or (before, after) pairs
Ints = Union[int, Sequence[int]]
PaddingArg = Union[str, bytes, Sequence[Sequence[int]]]

__all__ = [
    "conv2d",
    "conv2d_backprop_input",
    "conv2d_backprop_filter",
    "depthwise_conv2d_native",
    "depthwise_conv2d_native_backprop_input",
    "depthwise_conv2d_native_backprop_filter",
]


# ------------------------------------------------------------------------------ argument parsing


def _data_format(data_format: Union[str, bytes]) -> str:
    if isinstance(data_format, bytes):
        data_format = data_format.decode()
    if data_format not in ("NHWC", "NCHW"):
        raise ValueError(f"data_format must be 'NHWC' or 'NCHW', got {data_format!r}")
    return data_format


def _hw_axes(data_format: str) -> Tuple[int, int, int]:
    """(h axis, w axis, channel axis) of a 4-D array in data_format."""
    return (1, 2, 3) if data_format == "NHWC" else (2, 3, 1)


def _spatial(values: object, what: str, data_format: str, default: int = 1) -> Pair:
    """strides / dilations -> (h, w)."""
    if values is None:
        return (default, default)
    if not isinstance(values, bool) and isinstance(values, numbers.Integral):
        v = _int(values, what)
        items = [v, v]
    else:
        items = [_int(v, what) for v in cast(Iterable[Any], values)]
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
    return cast("Pair", tuple(items))


def _explicit_from_pairs(pairs: Iterable[Sequence[int]], data_format: str, what: str) -> Pads:
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
    return cast("Pads", (pairs[h], pairs[w]))


def _padding(padding: object, explicit_paddings: Optional[Iterable[int]],
             data_format: str) -> Union[str, Pads]:
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
    return _explicit_from_pairs(list(cast(Iterable[Any], padding)), data_format, "padding")


def _resolve_pads(pad: Union[str, Pads], in_hw: Pair, k_hw: Pair, stride: Pair,
                  dilation: Pair) -> Pads:
    if pad == "VALID":
        return ((0, 0), (0, 0))
    if pad == "SAME":
        return cast("Pads", tuple(_same_pads(in_hw[i], k_hw[i], stride[i], dilation[i])
                                  for i in range(2)))
    return cast("Pads", pad)  # explicit pairs


def _out_hw(in_hw: Pair, k_hw: Pair, stride: Pair, dilation: Pair, pads: Pads) -> Pair:
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
    return cast("Pair", tuple(out))


def _as4(a: npt.ArrayLike, what: str) -> Array:
    a = np.asarray(a)
    if a.ndim != 4:
        raise ValueError(f"{what} must be 4-D, got shape {a.shape}")
    return a


def _shape4(sizes: object, what: str) -> Shape4:
    sizes = [_int(v, what) for v in np.asarray(sizes).reshape(-1).tolist()]
    if len(sizes) != 4:
        raise ValueError(f"{what} must have 4 entries, got {len(sizes)}: {sizes}")
    return cast("Shape4", tuple(sizes))


def _groups(in_c: int, filt_in: int, filt_out: int, what: str = "filter") -> int:
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
        self,
        x_shape: Sequence[int],
        f_shape: Sequence[int],
        strides: object,
        padding: object,
        data_format: Union[str, bytes],
        dilations: object,
        explicit_paddings: Optional[Iterable[int]],
    ) -> None:
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

    def out_shape(self, n: int, k: int) -> Shape4:
        return (n, *self.out_hw, k) if self.fmt == "NHWC" else (n, k, *self.out_hw)

    def kwargs(self, groups: int) -> _ConvKeywords:
        return dict(
            stride=self.stride,
            padding=self.pads,
            dilation=self.dilation,
            groups=groups,
            layout=self.fmt,
            weight_layout="HWIO",
        )

    def check_out_backprop(self, dy: Array, n: int, k: int, op: str) -> None:
        want = self.out_shape(n, k)
        if tuple(dy.shape) != want:
            raise ValueError(
                f"{op}: out_backprop has shape {tuple(dy.shape)} but the forward convolution "
                f"of an input of shape {self.x_shape} gives {want}"
            )


def _input_sizes(input_sizes: object, dy: Array, in_c: int, data_format: str,
                 what: str = "input_sizes") -> Shape4:
    sizes: List[int] = [_int(v, what) for v in np.asarray(input_sizes).reshape(-1).tolist()]
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
    return cast("Shape4", tuple(sizes))


# ------------------------------------------------------------------------------ Conv2D


def conv2d(
    input: npt.ArrayLike,
    filter: npt.ArrayLike,
    strides: Ints,
    padding: PaddingArg,
    data_format: Union[str, bytes] = "NHWC",
    dilations: Optional[Ints] = None,
    explicit_paddings: Optional[Sequence[int]] = None,
    *,
    use_cudnn_on_gpu: bool = True,
    name: Optional[str] = None,
) -> Array:
    """``tf.raw_ops.Conv2D`` / ``tf.nn.conv2d``: 2-D cross-correlation, TensorFlow's way.

    Parameters
    ----------
    input : array_like
        (batch, in_height, in_width, in_depth) for ``"NHWC"``, (batch, in_depth, in_height,
        in_width) for ``"NCHW"``; float16, float32 or float64.
    filter : array_like
        [fh, fw, in_channels, out_channels] whatever ``data_format``. ``in_depth`` must be a
        multiple of ``in_channels``: a larger multiple makes a grouped convolution with
        ``in_depth // in_channels`` groups, which must divide ``out_channels``.
    strides : int or sequence of int
        Positive. An int or 1 entry: both spatial axes; 2 entries: (h, w); 4 entries: one
        per dimension in ``data_format`` order, whose batch and depth entries must be 1.
    padding : str or sequence of 4 (int, int)
        ``"VALID"`` (none); ``"SAME"`` (output ``ceil(in / stride)``, total padding
        ``max((out - 1)*stride + (k - 1)*dilation + 1 - in, 0)``, the odd extra row / column
        at the bottom / right); ``"EXPLICIT"`` (from ``explicit_paddings``); or, as
        ``tf.nn.conv2d`` accepts, four (before, after) pairs in ``data_format`` order with
        zero batch and depth pairs. Names are case-insensitive; bytes are accepted.
    data_format : {"NHWC", "NCHW"}
        Layout of ``input`` and of the result (str or bytes).
    dilations : int or sequence of int, optional
        As ``strides``; None or 1 means no dilation.
    explicit_paddings : sequence of 8 int, optional
        With ``padding="EXPLICIT"`` only: a (before, after) pair per dimension in
        ``data_format`` order, non-negative, 0 for batch and depth.
    use_cudnn_on_gpu : bool
        Accepted and ignored (cconv runs on the CPU).
    name : str, optional
        Accepted and ignored.

    Returns
    -------
    ndarray
        (batch, out_height, out_width, out_channels) or (batch, out_channels, out_height,
        out_width) in ``data_format``, with ``out = (in + before + after - (k - 1)*dilation -
        1) // stride + 1``, of dtype ``numpy.result_type(input, filter)`` (float16 computed
        in float32).
    """
    x = _as4(input, "input")
    f = _as4(filter, "filter")
    g_ = _Conv(x.shape, f.shape, strides, padding, data_format, dilations, explicit_paddings)
    c = _hw_axes(g_.fmt)[2]
    groups = _groups(x.shape[c], f.shape[2], f.shape[3])
    return _cc.conv2d(x, f, **g_.kwargs(groups))


def conv2d_backprop_input(
    input_sizes: npt.ArrayLike,
    filter: npt.ArrayLike,
    out_backprop: npt.ArrayLike,
    strides: Ints,
    padding: PaddingArg,
    data_format: Union[str, bytes] = "NHWC",
    dilations: Optional[Ints] = None,
    *,
    explicit_paddings: Optional[Sequence[int]] = None,
    use_cudnn_on_gpu: bool = True,
    name: Optional[str] = None,
) -> Array:
    """``tf.raw_ops.Conv2DBackpropInput``: gradient of :func:`conv2d` w.r.t. its input.

    Parameters
    ----------
    input_sizes : array_like of int
        Shape of the forward ``input``: 4 entries in ``data_format`` order, or its 2 spatial
        entries (batch then comes from ``out_backprop``, depth from ``filter``). It resolves
        the input size that strided convolutions leave ambiguous.
    filter : array_like
        The forward filter, [fh, fw, in_channels, out_channels].
    out_backprop : array_like
        Gradient of the forward output, in ``data_format`` order; it must have the forward
        output's shape for ``input_sizes`` (ValueError otherwise).
    strides, padding, data_format, dilations, explicit_paddings, use_cudnn_on_gpu, name
        The forward call's arguments, as in :func:`conv2d` (``"SAME"`` padding is computed
        from ``input_sizes``).

    Returns
    -------
    ndarray
        Of shape ``input_sizes`` (completed to 4-D) in ``data_format``, of dtype
        ``numpy.result_type(filter, out_backprop)``.
    """
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
    input: npt.ArrayLike,
    filter_sizes: npt.ArrayLike,
    out_backprop: npt.ArrayLike,
    strides: Ints,
    padding: PaddingArg,
    data_format: Union[str, bytes] = "NHWC",
    dilations: Optional[Ints] = None,
    *,
    explicit_paddings: Optional[Sequence[int]] = None,
    use_cudnn_on_gpu: bool = True,
    name: Optional[str] = None,
) -> Array:
    """``tf.raw_ops.Conv2DBackpropFilter``: gradient of :func:`conv2d` w.r.t. its filter.

    Parameters
    ----------
    input : array_like
        The forward input, in ``data_format`` order.
    filter_sizes : array_like of int
        Shape of the filter, 4 entries [fh, fw, in_channels, out_channels]; a grouped
        convolution when the input depth is a multiple of ``in_channels``, as in
        :func:`conv2d`.
    out_backprop : array_like
        Gradient of the forward output, in ``data_format`` order; it must have the forward
        output's shape (ValueError otherwise).
    strides, padding, data_format, dilations, explicit_paddings, use_cudnn_on_gpu, name
        The forward call's arguments, as in :func:`conv2d`.

    Returns
    -------
    ndarray
        Of shape ``filter_sizes``, summed over the batch, of dtype
        ``numpy.result_type(input, out_backprop)``.
    """
    x = _as4(input, "input")
    dy = _as4(out_backprop, "out_backprop")
    f_shape = _shape4(filter_sizes, "filter_sizes")
    g_ = _Conv(x.shape, f_shape, strides, padding, data_format, dilations, explicit_paddings)
    c = _hw_axes(g_.fmt)[2]
    groups = _groups(x.shape[c], f_shape[2], f_shape[3], "filter_sizes")
    g_.check_out_backprop(dy, x.shape[0], f_shape[3], "Conv2DBackpropFilter")
    return _cc.conv2d_backward_weight(dy, x, f_shape, **g_.kwargs(groups))


# ---------------------------------------------------------------------------- DepthwiseConv2dNative


def _depthwise_weight(f: Array) -> Array:
    """[fh, fw, C, M] -> cconv HWIO [fh, fw, 1, C*M]; output channel c*M + m (a C-order reshape)."""
    fh, fw, c, m = f.shape
    return np.reshape(f, (fh, fw, 1, c * m))


def _check_depth(in_c: int, f_c: int, what: str) -> None:
    if in_c != f_c:
        raise ValueError(
            f"input depth ({in_c}) must equal {what} in_channels (dimension 2, {f_c}) "
            "for a depthwise convolution"
        )


def depthwise_conv2d_native(
    input: npt.ArrayLike,
    filter: npt.ArrayLike,
    strides: Ints,
    padding: PaddingArg,
    data_format: Union[str, bytes] = "NHWC",
    dilations: Optional[Ints] = None,
    *,
    explicit_paddings: Optional[Sequence[int]] = None,
    name: Optional[str] = None,
) -> Array:
    """``tf.raw_ops.DepthwiseConv2dNative``: each input channel convolved on its own.

    Output channel ``c * channel_multiplier + m`` is input channel ``c`` cross-correlated
    with ``filter[:, :, c, m]``.

    Parameters
    ----------
    input : array_like
        (batch, height, width, in_channels) for ``"NHWC"``, (batch, in_channels, height,
        width) for ``"NCHW"``; float16, float32 or float64.
    filter : array_like
        [fh, fw, in_channels, channel_multiplier]; ``in_channels`` must equal the input's.
    strides, padding, data_format, dilations, explicit_paddings
        As in :func:`conv2d`; unlike TensorFlow's CPU kernel, unequal row and column
        strides and dilations are accepted.
    name : str, optional
        Accepted and ignored.

    Returns
    -------
    ndarray
        (batch, out_height, out_width, in_channels * channel_multiplier) or its NCHW
        order in ``data_format``, of dtype ``numpy.result_type(input, filter)``.
    """
    x = _as4(input, "input")
    f = _as4(filter, "filter")
    g_ = _Conv(x.shape, f.shape, strides, padding, data_format, dilations, explicit_paddings)
    c = _hw_axes(g_.fmt)[2]
    _check_depth(x.shape[c], f.shape[2], "filter")
    return _cc.conv2d(x, _depthwise_weight(f), **g_.kwargs(f.shape[2]))


def depthwise_conv2d_native_backprop_input(
    input_sizes: npt.ArrayLike,
    filter: npt.ArrayLike,
    out_backprop: npt.ArrayLike,
    strides: Ints,
    padding: PaddingArg,
    data_format: Union[str, bytes] = "NHWC",
    dilations: Optional[Ints] = None,
    *,
    explicit_paddings: Optional[Sequence[int]] = None,
    name: Optional[str] = None,
) -> Array:
    """``tf.raw_ops.DepthwiseConv2dNativeBackpropInput``: gradient w.r.t. the input.

    Parameters
    ----------
    input_sizes : array_like of int
        Shape of the forward ``input``: 4 entries in ``data_format`` order, or its 2 spatial
        entries (batch then comes from ``out_backprop``, channels from ``filter``).
    filter : array_like
        The forward filter, [fh, fw, in_channels, channel_multiplier].
    out_backprop : array_like
        Gradient of the forward output (in_channels * channel_multiplier channels), in
        ``data_format`` order; it must have the forward output's shape for ``input_sizes``
        (ValueError otherwise).
    strides, padding, data_format, dilations, explicit_paddings, name
        The forward call's arguments, as in :func:`depthwise_conv2d_native`.

    Returns
    -------
    ndarray
        Of shape ``input_sizes`` (completed to 4-D) in ``data_format``, of dtype
        ``numpy.result_type(filter, out_backprop)``.
    """
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
    input: npt.ArrayLike,
    filter_sizes: npt.ArrayLike,
    out_backprop: npt.ArrayLike,
    strides: Ints,
    padding: PaddingArg,
    data_format: Union[str, bytes] = "NHWC",
    dilations: Optional[Ints] = None,
    *,
    explicit_paddings: Optional[Sequence[int]] = None,
    name: Optional[str] = None,
) -> Array:
    """``tf.raw_ops.DepthwiseConv2dNativeBackpropFilter``: gradient w.r.t. the filter.

    Parameters
    ----------
    input : array_like
        The forward input, in ``data_format`` order.
    filter_sizes : array_like of int
        Shape of the filter, 4 entries [fh, fw, in_channels, channel_multiplier];
        ``in_channels`` must equal the input's.
    out_backprop : array_like
        Gradient of the forward output, in ``data_format`` order; it must have the forward
        output's shape (ValueError otherwise).
    strides, padding, data_format, dilations, explicit_paddings, name
        The forward call's arguments, as in :func:`depthwise_conv2d_native`.

    Returns
    -------
    ndarray
        Of shape ``filter_sizes``, summed over the batch, of dtype
        ``numpy.result_type(input, out_backprop)``.
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
