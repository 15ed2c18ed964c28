"""TensorFlow's convolutions and their backprops on cconv: Conv1D, Conv2D, Conv3D, depthwise.

The functions::

    conv1d, conv1d_backprop_input, conv1d_backprop_filter            tf.nn.conv1d and gradients
    conv2d, conv2d_backprop_input, conv2d_backprop_filter            tf.raw_ops.Conv2D*
    conv3d, conv3d_backprop_input_v2, conv3d_backprop_filter_v2      tf.raw_ops.Conv3D*
    depthwise_conv2d_native, depthwise_conv2d_native_backprop_input,
    depthwise_conv2d_native_backprop_filter                          DepthwiseConv2dNative*

Conventions kept from TensorFlow (``tf.raw_ops`` / ``tf.nn``):

* ``data_format``: ``"NWC"`` (default) or ``"NCW"`` in 1-D (``tf.nn.conv1d``'s deprecated
  names ``"NHWC"`` / ``"NCHW"`` are accepted for them too), ``"NHWC"`` (default) or
  ``"NCHW"`` in 2-D, ``"NDHWC"`` (default) or ``"NCDHW"`` in 3-D; results come back in the
  same format.
* Filters are always ``[*kernel, in_channels, out_channels]`` (cconv's ``"WIO"``, ``"HWIO"``,
  ``"DHWIO"``), whatever the data format. If the input has a multiple of ``in_channels``
  channels the convolution is grouped (TensorFlow's rule: ``groups = input_depth //
  filter_in_depth``, which must divide ``out_channels``); this holds in 1-D and 3-D too,
  although TensorFlow's CPU kernels refuse grouped Conv3D.
* Depthwise filters are ``[fh, fw, in_channels, channel_multiplier]``; output channel
  ``c * channel_multiplier + m`` is input channel ``c`` convolved with ``filter[:, :, c, m]``.
* ``strides`` / ``dilations``: a list of ``rank + 2`` entries in ``data_format`` order whose
  batch and channel entries must be 1 (else ``ValueError``, as TensorFlow refuses them), or an
  int / 1 entry / ``rank`` spatial entries. ``dilations=None`` means no dilation.
* ``padding``: ``"VALID"``; ``"SAME"`` (output size ``ceil(in / stride)`` per spatial axis,
  the total padding ``max((out - 1) * stride + (k - 1) * dilation + 1 - in, 0)`` split with
  the odd extra pixel at the end: bottom / right / back); for Conv2D, ``"EXPLICIT"`` with
  ``explicit_paddings`` (8 ints, a (before, after) pair per dimension in ``data_format``
  order, batch and channel pairs 0); or, as ``tf.nn.conv2d`` accepts, a list of ``rank + 2``
  (before, after) pairs in ``data_format`` order. TensorFlow's Conv1D and Conv3D take only
  ``"SAME"`` and ``"VALID"``; the list of pairs is accepted for them as an extension.
* Backprop functions take the forward input's size (``input_sizes``: ``rank + 2`` entries in
  ``data_format`` order, or the ``rank`` spatial ones) or the filter's (``filter_sizes``), and
  check that ``out_backprop`` has the forward output's shape for that size.
* TensorFlow has no Conv1D op: ``tf.nn.conv1d`` runs Conv2D on the input expanded to height 1
  (filter ``[1, fw, in, out]``), so its gradients are Conv2DBackpropInput /
  Conv2DBackpropFilter of that problem with the unit axis dropped. That is what
  :func:`conv1d_backprop_input` / :func:`conv1d_backprop_filter` return; cconv computes them
  as 1-D convolution gradients (the same numbers).

Arguments after ``dilations`` (``explicit_paddings``, ``use_cudnn_on_gpu``, ``name``) are
keyword-only; ``use_cudnn_on_gpu`` and ``name`` are accepted and ignored. Inputs must have
exactly ``rank + 2`` dimensions (``tf.nn.conv1d`` / ``conv2d``'s extra leading batch
dimensions are not taken). Beyond TensorFlow's CPU kernels, unequal per-axis strides and
dilations are accepted for the depthwise ops, and dilations for Conv3D.
"""

from __future__ import annotations

import numbers
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, List, NamedTuple, Optional,
                    Sequence, Tuple, Union, cast)

import numpy as np
import numpy.typing as npt

import cconv as _cc

from .._geometry import conv_output_size
from . import _int, _same_pads

if TYPE_CHECKING:
    from . import _ConvKeywords

Array = npt.NDArray[Any]
# strides / dilations: an int, or 1, rank or rank + 2 ints; padding: a name or (before, after)
# pairs
Ints = Union[int, Sequence[int]]
PaddingArg = Union[str, bytes, Sequence[Sequence[int]]]
# resolved geometry: one entry (or one (before, after) pair) per spatial axis
Sizes = Tuple[int, ...]
PadPairs = Tuple[Tuple[int, int], ...]

__all__ = [
    "conv1d",
    "conv1d_backprop_input",
    "conv1d_backprop_filter",
    "conv2d",
    "conv2d_backprop_input",
    "conv2d_backprop_filter",
    "conv3d",
    "conv3d_backprop_input_v2",
    "conv3d_backprop_filter_v2",
    "depthwise_conv2d_native",
    "depthwise_conv2d_native_backprop_input",
    "depthwise_conv2d_native_backprop_filter",
]


# ------------------------------------------------------------------------------ argument parsing

# (channels last, channels first) per spatial rank
_FORMATS = {1: ("NWC", "NCW"), 2: ("NHWC", "NCHW"), 3: ("NDHWC", "NCDHW")}
# tf.nn.conv1d still takes the 2-D names of its formats (deprecated there, same meaning)
_CONV1D_ALIASES = {"NHWC": "NWC", "NCHW": "NCW"}


class _Spec(NamedTuple):
    """What varies between TensorFlow's convolutions of different rank, messages included."""

    rank: int
    strides: str  # the stride argument's name
    filter: str  # the filter argument's name


_CONV1D = _Spec(1, "stride", "filters")
_CONV2D = _Spec(2, "strides", "filter")
_CONV3D = _Spec(3, "strides", "filter")


def _data_format(data_format: Union[str, bytes], rank: int = 2) -> str:
    if isinstance(data_format, bytes):
        data_format = data_format.decode()
    if rank == 1 and isinstance(data_format, str):
        data_format = _CONV1D_ALIASES.get(data_format, data_format)
    last, first = _FORMATS[rank]
    if data_format not in (last, first):
        raise ValueError(f"data_format must be {last!r} or {first!r}, got {data_format!r}")
    return data_format


def _channel_axis(data_format: str) -> int:
    return len(data_format) - 1 if data_format.endswith("C") else 1


def _spatial_axes(data_format: str) -> Sizes:
    """Axes of the spatial dimensions of an array in data_format, outermost first."""
    first = 1 if data_format.endswith("C") else 2
    return tuple(range(first, first + len(data_format) - 2))


def _spatial_names(data_format: str) -> str:
    """The spatial axes' letters ("NDHWC" -> "DHW"); with "IO" added, cconv's filter layout."""
    return data_format.replace("N", "").replace("C", "")


def _counts(rank: int) -> str:
    """The accepted numbers of strides / dilations entries, spelt out: "1, 2 or 4"."""
    counts = sorted({1, rank, rank + 2})
    return ", ".join(str(c) for c in counts[:-1]) + f" or {counts[-1]}"


def _ints(values: object, what: str) -> List[int]:
    """An int -> [v]; a sequence -> its ints (each checked by _int)."""
    if not isinstance(values, bool) and isinstance(values, numbers.Integral):
        return [_int(values, what)]
    try:
        items = list(cast(Iterable[Any], values))
    except TypeError:
        raise TypeError(f"{what} must be an int or a sequence of ints, got {values!r}") from None
    return [_int(v, what) for v in items]


def _spatial(values: object, what: str, data_format: str, default: int = 1) -> Sizes:
    """strides / dilations -> one entry per spatial axis, outermost first."""
    rank = len(data_format) - 2
    if values is None:
        return (default,) * rank
    items = _ints(values, what)
    if len(items) == 1:
        items = items * rank
    if len(items) == rank + 2:
        c = _channel_axis(data_format)
        if items[0] != 1 or items[c] != 1:
            raise ValueError(
                f"Current implementation does not yet support {what} in the batch and depth "
                f"dimensions: {what}={list(items)} with data_format={data_format!r} has batch "
                f"entry {items[0]} and channel entry {items[c]} (both must be 1)"
            )
        items = [items[a] for a in _spatial_axes(data_format)]
    if len(items) != rank:
        raise ValueError(
            f"{what} must be an int or have {_counts(rank)} entries, got {len(items)}: "
            f"{values!r}"
        )
    if min(items) < 1:
        raise ValueError(f"{what} must be positive, got {values!r}")
    return tuple(items)


def _explicit_from_pairs(pairs: Iterable[Sequence[int]], data_format: str, what: str) -> PadPairs:
    """rank + 2 (before, after) pairs in data_format order -> one pair per spatial axis."""
    pairs = [tuple(_int(v, what) for v in p) for p in pairs]
    n = len(data_format)
    if len(pairs) != n or any(len(p) != 2 for p in pairs):
        raise ValueError(
            f"{what} must hold {n} (before, after) pairs ({2 * n} values) in {data_format} "
            f"order, got {pairs!r}"
        )
    c = _channel_axis(data_format)
    if pairs[0] != (0, 0) or pairs[c] != (0, 0):
        raise ValueError(
            f"{what} must be 0 in the batch and channel dimensions for "
            f"data_format={data_format!r}, got batch {pairs[0]} and channel {pairs[c]}"
        )
    if min(min(p) for p in pairs) < 0:
        raise ValueError(f"{what} must be non-negative, got {pairs!r}")
    return tuple(cast("Tuple[int, int]", pairs[a]) for a in _spatial_axes(data_format))


def _named_padding(padding: str, explicit: List[int], explicit_paddings: object,
                   data_format: str) -> Union[str, PadPairs]:
    """'SAME' | 'VALID' | 'EXPLICIT' (with explicit_paddings) -> 'SAME' | 'VALID' | pairs."""
    mode = padding.upper()
    n = len(data_format)
    # Of TensorFlow's convolutions only Conv2D has an EXPLICIT mode (and explicit_paddings).
    if n != 4 and mode not in ("SAME", "VALID"):
        raise ValueError(
            f"padding must be 'SAME', 'VALID' or a list of {n} (before, after) pairs, "
            f"got {padding!r}"
        )
    if mode not in ("SAME", "VALID", "EXPLICIT"):
        raise ValueError(f"padding must be 'SAME', 'VALID' or 'EXPLICIT', got {padding!r}")
    if mode != "EXPLICIT":
        if explicit:
            raise ValueError(
                "explicit_paddings must be empty if padding is not 'EXPLICIT' "
                f"(padding={padding!r}, explicit_paddings={explicit_paddings!r})"
            )
        return mode
    if len(explicit) != 2 * n:
        raise ValueError(
            f"padding='EXPLICIT' needs explicit_paddings with {2 * n} values "
            f"(2 per dimension of {data_format}), got {explicit_paddings!r}"
        )
    return _explicit_from_pairs(
        [explicit[i : i + 2] for i in range(0, 2 * n, 2)], data_format, "explicit_paddings"
    )


def _padding(padding: object, explicit_paddings: Optional[Iterable[int]],
             data_format: str) -> Union[str, PadPairs]:
    """-> 'SAME' | 'VALID' | one (before, after) pair per spatial axis."""
    if isinstance(padding, bytes):
        padding = padding.decode()
    explicit = list(explicit_paddings) if explicit_paddings is not None else []
    if isinstance(padding, str):
        return _named_padding(padding, explicit, explicit_paddings, data_format)
    if explicit:
        raise ValueError("explicit_paddings must be empty when padding is given as a list of pairs")
    return _explicit_from_pairs(list(cast(Iterable[Any], padding)), data_format, "padding")


def _resolve_pads(pad: Union[str, PadPairs], in_sizes: Sizes, k_sizes: Sizes, stride: Sizes,
                  dilation: Sizes) -> PadPairs:
    if pad == "VALID":
        return ((0, 0),) * len(in_sizes)
    if pad == "SAME":
        return tuple(_same_pads(in_sizes[i], k_sizes[i], stride[i], dilation[i])
                     for i in range(len(in_sizes)))
    return cast("PadPairs", pad)  # explicit pairs


def _out_sizes(in_sizes: Sizes, k_sizes: Sizes, stride: Sizes, dilation: Sizes, pads: PadPairs,
               names: str) -> Sizes:
    """Forward output size per spatial axis; ``names``: the axes' letters for messages."""
    out = []
    for i in range(len(in_sizes)):
        eff = (k_sizes[i] - 1) * dilation[i] + 1
        padded = in_sizes[i] + pads[i][0] + pads[i][1]
        if padded < eff:
            raise ValueError(
                f"filter of effective size {eff} (size {k_sizes[i]}, dilation {dilation[i]}) is "
                f"larger than the padded input ({padded}) along {names[i]}"
            )
        out.append(conv_output_size(in_sizes[i], k_sizes[i], stride[i], dilation[i], *pads[i]))
    return tuple(out)


def _as_nd(a: npt.ArrayLike, what: str, ndim: int) -> Array:
    a = np.asarray(a)
    if a.ndim != ndim:
        raise ValueError(f"{what} must be {ndim}-D, got shape {a.shape}")
    return a


def _shape(sizes: object, what: str, ndim: int) -> Sizes:
    values = [_int(v, what) for v in np.asarray(sizes).reshape(-1).tolist()]
    if len(values) != ndim:
        raise ValueError(f"{what} must have {ndim} entries, got {len(values)}: {values}")
    return tuple(values)


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
    """Resolved geometry of one TensorFlow convolution call (any spatial rank)."""

    def __init__(
        self,
        x_shape: Sequence[int],
        f_shape: Sequence[int],
        strides: object,
        padding: object,
        data_format: Union[str, bytes],
        dilations: object,
        explicit_paddings: Optional[Iterable[int]],
        spec: _Spec = _CONV2D,
    ) -> None:
        self.fmt = _data_format(data_format, spec.rank)
        self.stride = _spatial(strides, spec.strides, self.fmt)
        self.dilation = _spatial(dilations, "dilations", self.fmt)
        self.in_sizes = tuple(x_shape[a] for a in _spatial_axes(self.fmt))
        self.k_sizes = tuple(f_shape[: spec.rank])
        pad = _padding(padding, explicit_paddings, self.fmt)
        self.pads = _resolve_pads(pad, self.in_sizes, self.k_sizes, self.stride, self.dilation)
        self.out_sizes = _out_sizes(self.in_sizes, self.k_sizes, self.stride, self.dilation,
                                    self.pads, _spatial_names(self.fmt))
        self.x_shape = tuple(x_shape)

    def out_shape(self, n: int, k: int) -> Sizes:
        return (n, *self.out_sizes, k) if self.fmt.endswith("C") else (n, k, *self.out_sizes)

    def kwargs(self, groups: int) -> _ConvKeywords:
        return dict(
            stride=self.stride,
            padding=self.pads,
            dilation=self.dilation,
            groups=groups,
            layout=self.fmt,
            weight_layout=_spatial_names(self.fmt) + "IO",
        )

    def check_out_backprop(self, dy: Array, n: int, k: int, op: str) -> None:
        want = self.out_shape(n, k)
        if tuple(dy.shape) != want:
            raise ValueError(
                f"{op}: out_backprop has shape {tuple(dy.shape)} but the forward convolution "
                f"of an input of shape {self.x_shape} gives {want}"
            )


def _input_sizes(input_sizes: object, dy: Array, in_c: int, data_format: str,
                 what: str = "input_sizes") -> Sizes:
    sizes: List[int] = [_int(v, what) for v in np.asarray(input_sizes).reshape(-1).tolist()]
    rank = len(data_format) - 2
    if len(sizes) == rank:  # spatial only: batch from out_backprop, depth from the filter
        n = dy.shape[0]
        return (n, *sizes, in_c) if data_format.endswith("C") else (n, in_c, *sizes)
    if len(sizes) != rank + 2:
        spatial = "the spatial one" if rank == 1 else f"the {rank} spatial ones"
        raise ValueError(
            f"{what} must have {rank + 2} entries (or {spatial}), got {len(sizes)}: {sizes}"
        )
    return tuple(sizes)


# ------------------------------------------------------------------------------ rank-generic passes

# cconv's passes per spatial rank; TensorFlow's filter order is theirs ("WIO", "HWIO", "DHWIO")
_FORWARD: Dict[int, Callable[..., Array]] = {1: _cc.conv1d, 2: _cc.conv2d, 3: _cc.conv3d}
_BACKWARD_DATA: Dict[int, Callable[..., Array]] = {
    1: _cc.conv1d_backward_data, 2: _cc.conv2d_backward_data, 3: _cc.conv3d_backward_data
}
_BACKWARD_WEIGHT: Dict[int, Callable[..., Array]] = {
    1: _cc.conv1d_backward_weight, 2: _cc.conv2d_backward_weight, 3: _cc.conv3d_backward_weight
}


def _forward(spec: _Spec, input: npt.ArrayLike, filter: npt.ArrayLike, strides: object,
             padding: object, data_format: Union[str, bytes], dilations: object,
             explicit_paddings: Optional[Sequence[int]]) -> Array:
    """The forward convolution of rank ``spec.rank``, TensorFlow's way."""
    ndim = spec.rank + 2
    x = _as_nd(input, "input", ndim)
    f = _as_nd(filter, spec.filter, ndim)
    g_ = _Conv(x.shape, f.shape, strides, padding, data_format, dilations, explicit_paddings,
               spec)
    groups = _groups(x.shape[_channel_axis(g_.fmt)], f.shape[-2], f.shape[-1], spec.filter)
    return _FORWARD[spec.rank](x, f, **g_.kwargs(groups))


def _backprop_input(spec: _Spec, op: str, input_sizes: npt.ArrayLike, filter: npt.ArrayLike,
                    out_backprop: npt.ArrayLike, strides: object, padding: object,
                    data_format: Union[str, bytes], dilations: object,
                    explicit_paddings: Optional[Sequence[int]]) -> Array:
    """The input gradient of :func:`_forward`; ``op`` names the call in messages."""
    ndim = spec.rank + 2
    f = _as_nd(filter, spec.filter, ndim)
    dy = _as_nd(out_backprop, "out_backprop", ndim)
    fmt = _data_format(data_format, spec.rank)
    x_shape = _input_sizes(input_sizes, dy, f.shape[-2], fmt)
    g_ = _Conv(x_shape, f.shape, strides, padding, fmt, dilations, explicit_paddings, spec)
    groups = _groups(x_shape[_channel_axis(fmt)], f.shape[-2], f.shape[-1], spec.filter)
    g_.check_out_backprop(dy, x_shape[0], f.shape[-1], op)
    return _BACKWARD_DATA[spec.rank](dy, f, x_shape, **g_.kwargs(groups))


def _backprop_filter(spec: _Spec, op: str, input: npt.ArrayLike, filter_sizes: npt.ArrayLike,
                     out_backprop: npt.ArrayLike, strides: object, padding: object,
                     data_format: Union[str, bytes], dilations: object,
                     explicit_paddings: Optional[Sequence[int]]) -> Array:
    """The filter gradient of :func:`_forward`; ``op`` names the call in messages."""
    ndim = spec.rank + 2
    x = _as_nd(input, "input", ndim)
    dy = _as_nd(out_backprop, "out_backprop", ndim)
    f_shape = _shape(filter_sizes, "filter_sizes", ndim)
    g_ = _Conv(x.shape, f_shape, strides, padding, data_format, dilations, explicit_paddings,
               spec)
    groups = _groups(x.shape[_channel_axis(g_.fmt)], f_shape[-2], f_shape[-1], "filter_sizes")
    g_.check_out_backprop(dy, x.shape[0], f_shape[-1], op)
    return _BACKWARD_WEIGHT[spec.rank](dy, x, f_shape, **g_.kwargs(groups))


# ------------------------------------------------------------------------------ Conv1D


def conv1d(
    input: npt.ArrayLike,
    filters: npt.ArrayLike,
    stride: Ints,
    padding: PaddingArg,
    data_format: Union[str, bytes] = "NWC",
    dilations: Optional[Ints] = None,
    *,
    name: Optional[str] = None,
) -> Array:
    """``tf.nn.conv1d``: 1-D cross-correlation, TensorFlow's way.

    TensorFlow runs it as Conv2D on the input expanded to height 1 (filter ``[1, fw, in,
    out]``); cconv runs the 1-D convolution directly, with the same result.

    Parameters
    ----------
    input : array_like
        (batch, in_width, in_depth) for ``"NWC"``, (batch, in_depth, in_width) for
        ``"NCW"``; float16, float32 or float64.
    filters : array_like
        [fw, in_channels, out_channels] whatever ``data_format``. ``in_depth`` must be a
        multiple of ``in_channels``: a larger multiple makes a grouped convolution with
        ``in_depth // in_channels`` groups, which must divide ``out_channels``.
    stride : int or sequence of int
        Positive. An int or 1 entry: the width stride; 3 entries: one per dimension in
        ``data_format`` order, whose batch and depth entries must be 1.
    padding : str or sequence of 3 (int, int)
        ``"VALID"`` (none) or ``"SAME"`` (output ``ceil(in / stride)``, total padding
        ``max((out - 1)*stride + (k - 1)*dilation + 1 - in, 0)``, the odd extra column at
        the end); case-insensitive, bytes accepted. Beyond ``tf.nn.conv1d``, three (before,
        after) pairs in ``data_format`` order with zero batch and depth pairs.
    data_format : {"NWC", "NCW"}
        Layout of ``input`` and of the result (str or bytes); ``"NHWC"`` and ``"NCHW"`` are
        taken as ``"NWC"`` and ``"NCW"``, as ``tf.nn.conv1d`` does.
    dilations : int or sequence of int, optional
        As ``stride``; None or 1 means no dilation.
    name : str, optional
        Accepted and ignored.

    Returns
    -------
    ndarray
        (batch, out_width, out_channels) or (batch, out_channels, out_width) in
        ``data_format``, with ``out = (in + before + after - (k - 1)*dilation - 1) // stride
        + 1``, of dtype ``numpy.result_type(input, filters)`` (float16 computed in float32).
    """
    return _forward(_CONV1D, input, filters, stride, padding, data_format, dilations, None)


def conv1d_backprop_input(
    input_sizes: npt.ArrayLike,
    filters: npt.ArrayLike,
    out_backprop: npt.ArrayLike,
    stride: Ints,
    padding: PaddingArg,
    data_format: Union[str, bytes] = "NWC",
    dilations: Optional[Ints] = None,
    *,
    name: Optional[str] = None,
) -> Array:
    """Gradient of :func:`conv1d` w.r.t. its input, as TensorFlow computes it.

    TensorFlow has no Conv1D op: the gradient of ``tf.nn.conv1d`` is
    ``Conv2DBackpropInput`` of the height-1 Conv2D that ``tf.nn.conv1d`` runs, with the unit
    axis dropped. This returns those numbers (computed as a 1-D gradient).

    Parameters
    ----------
    input_sizes : array_like of int
        Shape of the forward ``input``: 3 entries in ``data_format`` order, or its width
        alone (batch then comes from ``out_backprop``, depth from ``filters``). It resolves
        the input size that strided convolutions leave ambiguous.
    filters : array_like
        The forward filters, [fw, in_channels, out_channels].
    out_backprop : array_like
        Gradient of the forward output, in ``data_format`` order; it must have the forward
        output's shape for ``input_sizes`` (ValueError otherwise).
    stride, padding, data_format, dilations, name
        The forward call's arguments, as in :func:`conv1d` (``"SAME"`` padding is computed
        from ``input_sizes``).

    Returns
    -------
    ndarray
        Of shape ``input_sizes`` (completed to 3-D) in ``data_format``, of dtype
        ``numpy.result_type(filters, out_backprop)``.
    """
    return _backprop_input(_CONV1D, "conv1d_backprop_input", input_sizes, filters,
                           out_backprop, stride, padding, data_format, dilations, None)


def conv1d_backprop_filter(
    input: npt.ArrayLike,
    filter_sizes: npt.ArrayLike,
    out_backprop: npt.ArrayLike,
    stride: Ints,
    padding: PaddingArg,
    data_format: Union[str, bytes] = "NWC",
    dilations: Optional[Ints] = None,
    *,
    name: Optional[str] = None,
) -> Array:
    """Gradient of :func:`conv1d` w.r.t. its filters, as TensorFlow computes it.

    TensorFlow's gradient is ``Conv2DBackpropFilter`` of the height-1 Conv2D that
    ``tf.nn.conv1d`` runs (filter ``[1, fw, in, out]``), with the unit axis dropped. This
    returns those numbers (computed as a 1-D gradient).

    Parameters
    ----------
    input : array_like
        The forward input, in ``data_format`` order.
    filter_sizes : array_like of int
        Shape of the filters, 3 entries [fw, in_channels, out_channels]; a grouped
        convolution when the input depth is a multiple of ``in_channels``, as in
        :func:`conv1d`.
    out_backprop : array_like
        Gradient of the forward output, in ``data_format`` order; it must have the forward
        output's shape (ValueError otherwise).
    stride, padding, data_format, dilations, name
        The forward call's arguments, as in :func:`conv1d`.

    Returns
    -------
    ndarray
        Of shape ``filter_sizes``, summed over the batch, of dtype
        ``numpy.result_type(input, out_backprop)``.
    """
    return _backprop_filter(_CONV1D, "conv1d_backprop_filter", input, filter_sizes,
                            out_backprop, stride, padding, data_format, dilations, None)


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
    return _forward(_CONV2D, input, filter, strides, padding, data_format, dilations,
                    explicit_paddings)


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
    return _backprop_input(_CONV2D, "Conv2DBackpropInput", input_sizes, filter, out_backprop,
                           strides, padding, data_format, dilations, explicit_paddings)


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
    return _backprop_filter(_CONV2D, "Conv2DBackpropFilter", input, filter_sizes, out_backprop,
                            strides, padding, data_format, dilations, explicit_paddings)


# ------------------------------------------------------------------------------ Conv3D


def conv3d(
    input: npt.ArrayLike,
    filter: npt.ArrayLike,
    strides: Ints,
    padding: PaddingArg,
    data_format: Union[str, bytes] = "NDHWC",
    dilations: Optional[Ints] = (1, 1, 1, 1, 1),
    *,
    name: Optional[str] = None,
) -> Array:
    """``tf.raw_ops.Conv3D`` / ``tf.nn.conv3d``: 3-D cross-correlation, TensorFlow's way.

    Parameters
    ----------
    input : array_like
        (batch, in_depth, in_height, in_width, in_channels) for ``"NDHWC"``, (batch,
        in_channels, in_depth, in_height, in_width) for ``"NCDHW"``; float16, float32 or
        float64.
    filter : array_like
        [fd, fh, fw, in_channels, out_channels] whatever ``data_format``. The input's
        channels must be a multiple of ``in_channels``: a larger multiple makes a grouped
        convolution with ``input_channels // in_channels`` groups, which must divide
        ``out_channels`` (TensorFlow's rule; its CPU kernel refuses groups, cconv does not).
    strides : int or sequence of int
        Positive. 5 entries, one per dimension in ``data_format`` order, whose batch and
        channel entries must be 1 (as the raw op takes them); also an int or 1 entry (all
        spatial axes) or 3 entries (d, h, w).
    padding : str or sequence of 5 (int, int)
        ``"VALID"`` (none) or ``"SAME"`` (per spatial axis: output ``ceil(in / stride)``,
        total padding ``max((out - 1)*stride + (k - 1)*dilation + 1 - in, 0)``, the odd
        extra pixel at the back / bottom / right); case-insensitive, bytes accepted. Beyond
        Conv3D, five (before, after) pairs in ``data_format`` order with zero batch and
        channel pairs.
    data_format : {"NDHWC", "NCDHW"}
        Layout of ``input`` and of the result (str or bytes).
    dilations : int or sequence of int, optional
        As ``strides``; None or all 1 means no dilation (TensorFlow's CPU kernel accepts
        only that, cconv any positive dilation).
    name : str, optional
        Accepted and ignored.

    Returns
    -------
    ndarray
        (batch, out_depth, out_height, out_width, out_channels) or its NCDHW order in
        ``data_format``, with ``out = (in + before + after - (k - 1)*dilation - 1) // stride
        + 1`` per spatial axis, of dtype ``numpy.result_type(input, filter)`` (float16
        computed in float32).
    """
    return _forward(_CONV3D, input, filter, strides, padding, data_format, dilations, None)


def conv3d_backprop_input_v2(
    input_sizes: npt.ArrayLike,
    filter: npt.ArrayLike,
    out_backprop: npt.ArrayLike,
    strides: Ints,
    padding: PaddingArg,
    data_format: Union[str, bytes] = "NDHWC",
    dilations: Optional[Ints] = (1, 1, 1, 1, 1),
    *,
    name: Optional[str] = None,
) -> Array:
    """``tf.raw_ops.Conv3DBackpropInputV2``: gradient of :func:`conv3d` w.r.t. its input.

    Parameters
    ----------
    input_sizes : array_like of int
        Shape of the forward ``input``: 5 entries in ``data_format`` order, or (beyond the
        raw op) its 3 spatial entries (batch then comes from ``out_backprop``, channels from
        ``filter``). It resolves the input size that strided convolutions leave ambiguous.
    filter : array_like
        The forward filter, [fd, fh, fw, in_channels, out_channels].
    out_backprop : array_like
        Gradient of the forward output, in ``data_format`` order; it must have the forward
        output's shape for ``input_sizes`` (ValueError otherwise).
    strides, padding, data_format, dilations, name
        The forward call's arguments, as in :func:`conv3d` (``"SAME"`` padding is computed
        from ``input_sizes``).

    Returns
    -------
    ndarray
        Of shape ``input_sizes`` (completed to 5-D) in ``data_format``, of dtype
        ``numpy.result_type(filter, out_backprop)``.
    """
    return _backprop_input(_CONV3D, "Conv3DBackpropInputV2", input_sizes, filter,
                           out_backprop, strides, padding, data_format, dilations, None)


def conv3d_backprop_filter_v2(
    input: npt.ArrayLike,
    filter_sizes: npt.ArrayLike,
    out_backprop: npt.ArrayLike,
    strides: Ints,
    padding: PaddingArg,
    data_format: Union[str, bytes] = "NDHWC",
    dilations: Optional[Ints] = (1, 1, 1, 1, 1),
    *,
    name: Optional[str] = None,
) -> Array:
    """``tf.raw_ops.Conv3DBackpropFilterV2``: gradient of :func:`conv3d` w.r.t. its filter.

    Parameters
    ----------
    input : array_like
        The forward input, in ``data_format`` order.
    filter_sizes : array_like of int
        Shape of the filter, 5 entries [fd, fh, fw, in_channels, out_channels]; a grouped
        convolution when the input's channels are a multiple of ``in_channels``, as in
        :func:`conv3d`.
    out_backprop : array_like
        Gradient of the forward output, in ``data_format`` order; it must have the forward
        output's shape (ValueError otherwise).
    strides, padding, data_format, dilations, name
        The forward call's arguments, as in :func:`conv3d`.

    Returns
    -------
    ndarray
        Of shape ``filter_sizes``, summed over the batch, of dtype
        ``numpy.result_type(input, out_backprop)``.
    """
    return _backprop_filter(_CONV3D, "Conv3DBackpropFilterV2", input, filter_sizes,
                            out_backprop, strides, padding, data_format, dilations, None)


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
    x = _as_nd(input, "input", 4)
    f = _as_nd(filter, "filter", 4)
    g_ = _Conv(x.shape, f.shape, strides, padding, data_format, dilations, explicit_paddings)
    c = _channel_axis(g_.fmt)
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
    f = _as_nd(filter, "filter", 4)
    dy = _as_nd(out_backprop, "out_backprop", 4)
    fmt = _data_format(data_format)
    c = _channel_axis(fmt)
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
    x = _as_nd(input, "input", 4)
    dy = _as_nd(out_backprop, "out_backprop", 4)
    f_shape = _shape(filter_sizes, "filter_sizes", 4)
    g_ = _Conv(x.shape, f_shape, strides, padding, data_format, dilations, explicit_paddings)
    c = _channel_axis(g_.fmt)
    _check_depth(x.shape[c], f_shape[2], "filter_sizes")
    fh, fw, cin, m = f_shape
    g_.check_out_backprop(dy, x.shape[0], cin * m, "DepthwiseConv2dNativeBackpropFilter")
    dw = _cc.conv2d_backward_weight(dy, x, (fh, fw, 1, cin * m), **g_.kwargs(cin))
    return np.reshape(dw, f_shape)
