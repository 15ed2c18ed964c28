"""MIOpen's convolution layer on cconv: 2-D and N-d descriptors, output dims, workspace, Find, run.

Descriptors come from ``miopenInitConvolutionDescriptor`` (2-D: the
:class:`ConvolutionDescriptor` constructor) or ``miopenInitConvolutionNdDescriptor``
(:func:`init_convolution_nd_descriptor`, spatial_dim 1, 2 or 3). Tensors are channels first
with the descriptor's spatial rank: NCW (1-D), NCHW (2-D) or NCDHW (3-D). Filters are
``(K, C/groups, *kernel)`` in ``"convolution"`` mode and ``(C_in, K/groups, *kernel)`` in
``"transpose"`` mode (MIOpen checks ``x.C == w[0]`` there and produces ``w[1] * group_count``
channels). Every function takes tensors of rank ``2 + desc.spatial_dim`` and runs cconv's
convolution of that rank (``conv1d`` / ``conv2d`` / ``conv3d`` and their gradients and
transposes). MIOpen itself runs 1-D problems as 2-D ones of height 1; those work here with a
2-D descriptor too. Execution functions write their output array in place with MIOpen's
scaling: ``out = alpha * result + beta * out`` (``beta == 0`` never reads ``out``) and also
return it.

In transpose mode, as in MIOpen, "forward" is the transposed convolution (cconv's
``conv_transpose{1,2,3}d``, output size ``(in - 1) * stride - 2 * pad + dilation * (k - 1) + 1
+ adj`` per axis with ``adj`` the transpose output padding, which must be smaller than the
stride), "backward data" is the ordinary forward convolution of ``dy`` with the same filter,
and "backward weights" is the weight gradient of that convolution with ``x`` in the role of
its output gradient.

Algorithms. MIOpen's names map onto cconv's: ``...AlgoDirect`` -> ``"direct"``,
``...AlgoWinograd`` -> ``"winograd"``, ``...AlgoGEMM`` -> ``"gemm"``. cconv has no FFT,
ImplicitGEMM or TransposeGEMM convolution: Find never lists them and asking for them raises
``ValueError``. Any further cconv algorithm (a name in ``cconv.ALGORITHMS`` without a MIOpen
equivalent) is reported by Find as ``"cconv:<name>"``; execute accepts those, plain cconv names,
MIOpen's enum integers, and ``"auto"`` / ``None`` (cconv's heuristic). Find results are
``ConvAlgoPerf(algo, time_ms, memory)`` tuples, fastest first; ``memory`` is the workspace in bytes.
1-D and 3-D problems run as 2-D convolutions (height 1, or one per depth tap); Find lists, and
execute accepts, the algorithms that can run those (Winograd's 3x3 tiles never fit a 1-D kernel).

Workspace queries return the largest workspace among the algorithms cconv can use for the
problem (as MIOpen's ``GetWorkSpaceSize``), from ``cconv.plan_conv1d`` / ``plan_conv2d`` /
``plan_conv3d`` of the convolution that actually runs; cconv allocates its workspace itself,
so this is informational.
"""

from __future__ import annotations

import collections
import numbers
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple,
                    Union, cast)

import numpy as np
import numpy.typing as npt

import cconv as _cc

from . import _int

if TYPE_CHECKING:
    from . import _ConvKeywords

Array = npt.NDArray[Any]
# A shape, or an array (or anything with ``.shape``) standing for its shape.
ShapeLike = Union[Tuple[int, ...], List[int], Array]
# A MIOpen algorithm: its name, its enum value, a cconv name, "auto" or None.
AlgoArg = Union[str, int, None]
# Pads / strides / dilations: one int for every spatial axis, or one per axis.
IntOrInts = Union[int, Sequence[int]]
Shape = Tuple[int, ...]

__all__ = [
    "ConvolutionDescriptor",
    "ConvAlgoPerf",
    "init_convolution_nd_descriptor",
    "convolution_forward_get_workspace_size",
    "convolution_backward_data_get_workspace_size",
    "convolution_backward_weights_get_workspace_size",
    "find_convolution_forward_algorithm",
    "find_convolution_backward_data_algorithm",
    "find_convolution_backward_weights_algorithm",
    "convolution_forward",
    "convolution_backward_data",
    "convolution_backward_weights",
    "convolution_forward_bias",
    "convolution_backward_bias",
]

ConvAlgoPerf = collections.namedtuple("ConvAlgoPerf", ["algo", "time_ms", "memory"])
ConvAlgoPerf.__doc__ = """``miopenConvAlgoPerf_t``: one algorithm's result from a Find call.

Attributes
----------
algo : str
    The algorithm, by MIOpen's enum name for the direction searched (e.g.
    ``"miopenConvolutionFwdAlgoWinograd"``), or ``"cconv:<name>"`` for a cconv algorithm
    without a MIOpen equivalent. The execution functions accept it as their ``algo``.
time_ms : float
    Median time of the timed runs on random data of the problem's shape, in milliseconds.
memory : int
    Workspace the algorithm allocates for the problem, in bytes.
"""

# MIOpen algorithm names -> (enum value, cconv algorithm or None when cconv has none).
_FWD = {
    "miopenConvolutionFwdAlgoGEMM": (0, "gemm"),
    "miopenConvolutionFwdAlgoDirect": (1, "direct"),
    "miopenConvolutionFwdAlgoFFT": (2, None),
    "miopenConvolutionFwdAlgoWinograd": (3, "winograd"),
    "miopenConvolutionFwdAlgoImplicitGEMM": (5, None),
}
_BWD_DATA = {
    "miopenConvolutionBwdDataAlgoGEMM": (0, "gemm"),
    "miopenConvolutionBwdDataAlgoDirect": (1, "direct"),
    "miopenConvolutionBwdDataAlgoFFT": (2, None),
    "miopenConvolutionBwdDataAlgoWinograd": (3, "winograd"),
    "miopenTransposeBwdDataAlgoGEMM": (4, None),
    "miopenConvolutionBwdDataAlgoImplicitGEMM": (5, None),
}
_BWD_WEIGHTS = {
    "miopenConvolutionBwdWeightsAlgoGEMM": (0, "gemm"),
    "miopenConvolutionBwdWeightsAlgoDirect": (1, "direct"),
    "miopenConvolutionBwdWeightsAlgoWinograd": (3, "winograd"),
    "miopenConvolutionBwdWeightsAlgoImplicitGEMM": (5, None),
}
# module constants with MIOpen's enum names, e.g. miopen.miopenConvolutionFwdAlgoWinograd
globals().update({name: name for table in (_FWD, _BWD_DATA, _BWD_WEIGHTS) for name in table})
__all__ += [name for table in (_FWD, _BWD_DATA, _BWD_WEIGHTS) for name in table]

_DIRECTIONS = {"forward": _FWD, "backward_data": _BWD_DATA, "backward_weights": _BWD_WEIGHTS}
_MODES = {
    "convolution": "convolution",
    "miopenconvolution": "convolution",
    "transpose": "transpose",
    "miopentranspose": "transpose",
    0: "convolution",
    1: "transpose",
}


# Tensor and filter layout names per spatial rank (channels first, as MIOpen's NC* tensors).
_LAYOUTS: Dict[int, Tuple[str, str]] = {
    1: ("NCW", "OIW"),
    2: ("NCHW", "OIHW"),
    3: ("NCDHW", "OIDHW"),
}


def _spatial_dim(value: object) -> int:
    """A checked spatial rank: 1, 2 or 3."""
    rank = _int(value, "spatial_dim")
    if rank not in _LAYOUTS:
        raise ValueError(
            f"spatial_dim must be 1, 2 or 3 (NCW, NCHW or NCDHW tensors), got {rank}"
        )
    return rank


def _axes(rank: int) -> str:
    """The spatial axis letters of a rank: "W", "HW" or "DHW"."""
    return "DHW"[3 - rank:]


def _spatial_list(value: object, what: str, rank: int) -> Shape:
    """One int per spatial axis from an int (used for every axis) or a sequence of ``rank``."""
    if not isinstance(value, bool) and isinstance(value, numbers.Integral):
        return (int(value),) * rank
    try:
        entries = list(cast(Iterable[Any], value))
    except TypeError:
        raise TypeError(
            f"{what} must be an int or a sequence of {rank} ints, got {value!r}"
        ) from None
    items = [_int(v, what) for v in entries]
    if len(items) != rank:
        raise ValueError(
            f"{what} has {len(items)} spatial dimensions ({items}); the descriptor has "
            f"spatial_dim {rank} (init_convolution_nd_descriptor sets 1, 2 or 3)"
        )
    return tuple(items)


def _shape(a: object, what: str, rank: int) -> Shape:
    """The shape of an array or shape sequence, which must have 2 + ``rank`` entries."""
    shape = tuple(int(s) for s in cast(Iterable[Any], a.shape if hasattr(a, "shape") else a))
    if len(shape) != rank + 2:
        raise ValueError(
            f"{what} must be a {rank + 2}-D {_LAYOUTS[rank][0]} shape ({rank} spatial "
            f"dimension{'s' if rank > 1 else ''}, the descriptor's spatial_dim), got {shape}"
        )
    return shape


def _core(pattern: str, rank: int) -> Callable[..., Any]:
    """cconv's function of a spatial rank: ``_core("conv{}d_backward_data", 3)`` is
    ``cconv.conv3d_backward_data``."""
    return cast(Callable[..., Any], getattr(_cc, pattern.format(rank)))


class ConvolutionDescriptor:
    """``miopenConvolutionDescriptor_t``: mode, pads, strides, dilations, groups, output padding.

    Construction is ``miopenInitConvolutionDescriptor`` (2-D);
    :func:`init_convolution_nd_descriptor` is ``miopenInitConvolutionNdDescriptor`` (1-D, 2-D
    or 3-D). The group count and the transpose output padding are set afterwards, as in
    MIOpen.

    Parameters
    ----------
    mode : str or int, optional
        ``"convolution"`` (``miopenConvolution``, 0; default) or ``"transpose"``
        (``miopenTranspose``, 1); names are case-insensitive and may carry the ``miopen``
        prefix.
    pad : int or sequence of ints, optional
        Zero padding on both sides of each spatial axis ((pad_h, pad_w) in 2-D; an int is
        used for every axis); non-negative. In transpose mode it is the padding of the
        convolution being transposed (it shrinks the output). Default 0.
    stride : int or sequence of ints, optional
        Per spatial axis ((stride_h, stride_w) in 2-D); positive. Default 1.
    dilation : int or sequence of ints, optional
        Per spatial axis ((dilation_h, dilation_w) in 2-D); 1 (default) means no dilation.
    spatial_dim : int, optional, keyword-only
        The spatial rank: 2 (default), or 1 or 3 as :func:`init_convolution_nd_descriptor`
        sets it. Sequences given for ``pad``, ``stride`` and ``dilation`` must have this
        many entries.

    Attributes
    ----------
    mode : str
        ``"convolution"`` or ``"transpose"``.
    pad, stride, dilation : tuple of ints
        One entry per spatial axis ((d,) h, w order; just w in 1-D).
    group_count : int
        Channel groups (1 until :meth:`set_group_count`).
    transpose_output_padding : tuple of ints
        Extra outputs at the end of each spatial axis of the transposed convolution (all 0
        until :meth:`set_transpose_output_padding` / :meth:`set_transpose_nd_output_padding`).
    spatial_dim : int
        1, 2 or 3: tensors used with the descriptor are NCW, NCHW or NCDHW.
    """

    def __init__(self, mode: Union[str, int] = "convolution", pad: IntOrInts = 0,
                 stride: IntOrInts = 1, dilation: IntOrInts = 1, *,
                 spatial_dim: int = 2) -> None:
        key = mode.lower() if isinstance(mode, str) else mode
        if isinstance(key, bool) or key not in _MODES:
            raise ValueError(
                "mode must be 'convolution' or 'transpose' (miopenConvolution / miopenTranspose), "
                f"got {mode!r}"
            )
        self.mode = _MODES[key]
        self.spatial_dim = rank = _spatial_dim(spatial_dim)
        self.pad = _spatial_list(pad, "pad", rank)
        self.stride = _spatial_list(stride, "stride", rank)
        self.dilation = _spatial_list(dilation, "dilation", rank)
        if min(self.pad) < 0:
            raise ValueError(f"pad must be non-negative, got {pad!r}")
        if min(self.stride) < 1:
            raise ValueError(f"stride must be positive, got {stride!r}")
        if min(self.dilation) < 1:
            raise ValueError(f"dilation must be positive, got {dilation!r}")
        self.group_count = 1
        self.transpose_output_padding: Shape = (0,) * rank

    def __repr__(self) -> str:
        return (
            f"ConvolutionDescriptor(mode={self.mode!r}, pad={self.pad}, stride={self.stride}, "
            f"dilation={self.dilation}, group_count={self.group_count}, "
            f"transpose_output_padding={self.transpose_output_padding}, "
            f"spatial_dim={self.spatial_dim})"
        )

    def get_nd_descriptor(self) -> Tuple[int, List[int], List[int], List[int], str]:
        """``miopenGetConvolutionNdDescriptor``: the descriptor's geometry, per spatial axis.

        Returns
        -------
        tuple
            ``(spatial_dim, pad, stride, dilation, mode)``, the three middle entries lists of
            ``spatial_dim`` ints and ``mode`` ``"convolution"`` or ``"transpose"``.
        """
        return (self.spatial_dim, list(self.pad), list(self.stride), list(self.dilation),
                self.mode)

    def set_group_count(self, group_count: int) -> None:
        """``miopenSetConvolutionGroupCount``: split the channels into groups.

        Parameters
        ----------
        group_count : int
            Positive; must divide the input and output channel counts of the tensors used
            with this descriptor (checked when they are).
        """
        g = _int(group_count, "group_count")
        if g < 1:
            raise ValueError(f"group_count must be positive, got {group_count!r}")
        self.group_count = g

    def get_group_count(self) -> int:
        """The group count set by :meth:`set_group_count` (default 1).

        Returns
        -------
        int
        """
        return self.group_count

    def set_transpose_output_padding(self, adj_h: int, adj_w: int) -> None:
        """``miopenSetTransposeConvOutputPadding``: extra output rows / columns (2-D, transpose).

        Parameters
        ----------
        adj_h, adj_w : int
            Non-negative and, once tensors are checked against the descriptor, smaller than
            the stride along that axis; they pick one of the output sizes a strided
            transposed convolution can have. ValueError on a descriptor whose
            ``spatial_dim`` is not 2 (use :meth:`set_transpose_nd_output_padding`).
        """
        if self.spatial_dim != 2:
            raise ValueError(
                "set_transpose_output_padding takes (adj_h, adj_w) of a 2-D descriptor; this "
                f"one has spatial_dim {self.spatial_dim}: use set_transpose_nd_output_padding"
            )
        self._set_adj((_int(adj_h, "adj_h"), _int(adj_w, "adj_w")))

    def set_transpose_nd_output_padding(self, adj: Sequence[int]) -> None:
        """``miopenSetTransposeConvNdOutputPadding``: extra outputs per spatial axis (transpose).

        Parameters
        ----------
        adj : sequence of ints
            One entry per spatial axis (``spatial_dim`` of them, in (d,) h, w order),
            non-negative and, once tensors are checked against the descriptor, smaller than
            the stride along that axis.
        """
        self._set_adj(_spatial_list(adj, "adj", self.spatial_dim))

    def _set_adj(self, adj: Shape) -> None:
        if min(adj) < 0:
            raise ValueError(f"transpose output padding must be non-negative, got {adj}")
        self.transpose_output_padding = adj

    # -- geometry
    def _check_channels(self, x_shape: Shape, w_shape: Shape) -> None:
        g = self.group_count
        if self.mode == "convolution":
            if x_shape[1] != w_shape[1] * g or w_shape[0] % g != 0:
                raise ValueError(
                    f"Channels do not match for the filter: x has {x_shape[1]} channels, "
                    f"w {w_shape} with group_count {g} expects {w_shape[1] * g} "
                    f"(and K={w_shape[0]} divisible by {g})"
                )
        else:
            if x_shape[1] != w_shape[0] or w_shape[0] % g != 0:
                raise ValueError(
                    "Channels do not match for the filter: transpose mode needs "
                    f"x channels ({x_shape[1]}) == w[0] ({w_shape[0]}), "
                    f"divisible by group_count {g}"
                )
            if any(a >= s for a, s in zip(self.transpose_output_padding, self.stride)):
                raise ValueError(
                    "Output shape doesn't match due to invalid output padding: "
                    f"transpose output padding {self.transpose_output_padding} "
                    f"must be smaller than the stride {self.stride}"
                )

    def _output_size(self, axis: int, n_in: int, k: int) -> int:
        """The forward output size along spatial axis ``axis`` (below 1 when there is none)."""
        eff = self.dilation[axis] * (k - 1) + 1
        if self.mode == "transpose":
            return (
                self.stride[axis] * (n_in - 1)
                + eff
                - 2 * self.pad[axis]
                + self.transpose_output_padding[axis]
            )
        if n_in + 2 * self.pad[axis] < eff:
            return 0
        return (n_in + 2 * self.pad[axis] - eff) // self.stride[axis] + 1

    def get_forward_output_dim(self, x_shape: ShapeLike, w_shape: ShapeLike) -> Shape:
        """``miopenGetConvolution[Nd]ForwardOutputDim``: the shape of the forward result.

        Parameters
        ----------
        x_shape : sequence of 2 + spatial_dim ints or array
            The input, ``(N, C, *spatial)``: NCW, NCHW or NCDHW; an array stands for its shape.
        w_shape : sequence of 2 + spatial_dim ints or array
            The filter: ``(K, C/group_count, *kernel)`` in convolution mode,
            ``(C, K/group_count, *kernel)`` in transpose mode.

        Returns
        -------
        tuple of 2 + spatial_dim ints
            ``(N, K, *out)``. Per spatial axis, convolution mode: ``out = (in + 2*pad -
            dilation*(k - 1) - 1) // stride + 1``; transpose mode: ``out = stride*(in - 1)
            + dilation*(k - 1) + 1 - 2*pad + adj``. ValueError when a shape does not have
            2 + spatial_dim entries, the channels do not match the filter, the output padding
            is not smaller than the stride, or a size would be below 1.
        """
        rank = self.spatial_dim
        x_shape = _shape(x_shape, "x_shape", rank)
        w_shape = _shape(w_shape, "w_shape", rank)
        self._check_channels(x_shape, w_shape)
        out = []
        for i in range(rank):
            size = self._output_size(i, x_shape[2 + i], w_shape[2 + i])
            if size < 1:
                raise ValueError(
                    f"output size along {_axes(rank)[i]} would be {size} for input {x_shape}, "
                    f"filter {w_shape}, {self!r}"
                )
            out.append(size)
        c = w_shape[1] * self.group_count if self.mode == "transpose" else w_shape[0]
        return (x_shape[0], c, *out)

    def _kwargs(self) -> _ConvKeywords:
        layout, weight_layout = _LAYOUTS[self.spatial_dim]
        return dict(
            stride=self.stride,
            padding=self.pad,
            dilation=self.dilation,
            groups=self.group_count,
            layout=layout,
            weight_layout=weight_layout,
        )

    def _conv_problem(self, direction: str, x_shape: Shape, w_shape: Shape) -> Tuple[Shape, str]:
        """The ordinary convolution (its input shape, cconv op) that runs for a MIOpen direction.

        ``x_shape`` is MIOpen's x (the forward input in either mode).
        """
        if self.mode == "convolution":
            op = {
                "forward": "forward",
                "backward_data": "backward_data",
                "backward_weights": "backward_weight",
            }
            return x_shape, op[direction]
        y_shape = self.get_forward_output_dim(x_shape, w_shape)  # transposed output = conv input
        op = {
            "forward": "backward_data",
            "backward_data": "forward",
            "backward_weights": "backward_weight",
        }
        return y_shape, op[direction]


def init_convolution_nd_descriptor(spatial_dim: int, pad: IntOrInts, stride: IntOrInts,
                                   dilation: IntOrInts,
                                   mode: Union[str, int] = "convolution") -> ConvolutionDescriptor:
    """``miopenInitConvolutionNdDescriptor``: a descriptor of any spatial rank.

    Parameters
    ----------
    spatial_dim : int
        1, 2 or 3: the descriptor is used with NCW, NCHW or NCDHW tensors and filters of
        the same rank. With 2 the result equals the 2-D constructor's.
    pad : sequence of spatial_dim ints, or int
        Zero padding on both sides of each spatial axis, in (d,) h, w order; non-negative.
        An int is used for every axis.
    stride : sequence of spatial_dim ints, or int
        Per spatial axis; positive.
    dilation : sequence of spatial_dim ints, or int
        Per spatial axis; positive (1: no dilation).
    mode : str or int, optional
        ``"convolution"`` (default) or ``"transpose"``, as for :class:`ConvolutionDescriptor`.

    Returns
    -------
    ConvolutionDescriptor
        With ``spatial_dim`` set, group count 1 and no transpose output padding.
        ValueError when a list's length is not ``spatial_dim`` or a value is out of range.
    """
    return ConvolutionDescriptor(mode, pad, stride, dilation, spatial_dim=_spatial_dim(spatial_dim))


def _check_desc(desc: object) -> None:
    if not isinstance(desc, ConvolutionDescriptor):
        raise TypeError(f"desc must be a miopen.ConvolutionDescriptor, got {type(desc).__name__}")


def _check_same(what: str, got: Iterable[int], want: Iterable[int]) -> None:
    if tuple(got) != tuple(want):
        raise ValueError(
            f"{what} has shape {tuple(got)} but the descriptor and inputs give {tuple(want)}"
        )


def _dtype(*arrays: object, default: npt.DTypeLike = "float32") -> np.dtype[Any]:
    for a in arrays:
        if hasattr(a, "dtype"):
            return cast("np.dtype[Any]", np.dtype(a.dtype))  # the stubs cannot tell from Any
    return np.dtype(default)


# ------------------------------------------------------------------------------ workspace queries


def _workspace(desc: ConvolutionDescriptor, conv_x_shape: Shape, w_shape: Shape,
               dtype: npt.DTypeLike, op: str) -> int:
    """The largest workspace any algorithm needs for cconv pass ``op`` of the convolution."""
    best: Optional[int]
    err: Optional[ValueError]
    best, err = None, None
    plan_conv = _core("plan_conv{}d", desc.spatial_dim)
    for algo in tuple(_cc.ALGORITHMS) + ("auto",):
        try:
            plan = plan_conv(conv_x_shape, w_shape, dtype=dtype, algo=algo, **desc._kwargs())
        except ValueError as e:  # algorithm not usable for this shape
            err = e
            continue
        best = max(best or 0, int(plan.workspace_bytes_for(op)))
    if best is None:
        raise cast(ValueError, err)  # every algorithm, "auto" included, refused the shape
    return best


def convolution_forward_get_workspace_size(desc: ConvolutionDescriptor, w_shape: ShapeLike,
                                           x_shape: ShapeLike, y_shape: ShapeLike, *,
                                           dtype: Optional[npt.DTypeLike] = None) -> int:
    """``miopenConvolutionForwardGetWorkSpaceSize``: workspace of the forward pass.

    Parameters
    ----------
    desc : ConvolutionDescriptor
        The convolution (mode, pads, strides, dilations, groups).
    w_shape : sequence of 2 + spatial_dim ints or array
        The filter, ``(K, C/group_count, *kernel)`` (transpose mode:
        ``(C, K/group_count, *kernel)``); an array stands for its shape (and its dtype).
    x_shape : sequence of 2 + spatial_dim ints or array
        The input, ``(N, C, *spatial)``.
    y_shape : sequence of 2 + spatial_dim ints or array
        The output; must equal :meth:`ConvolutionDescriptor.get_forward_output_dim` of
        ``x_shape`` and ``w_shape`` (ValueError otherwise).
    dtype : dtype-like, optional
        float16, float32 or float64. Default: the dtype of ``x_shape`` or else ``w_shape``
        when one is an array, else float32.

    Returns
    -------
    int
        Bytes: the largest workspace :func:`cconv.plan_conv2d` (``plan_conv1d`` /
        ``plan_conv3d`` for spatial_dim 1 / 3) reports, at the default thread count, among
        the cconv algorithms that can run the convolution computed (in transpose mode, the
        convolution whose data gradient is the transposed one).
        Informational: cconv allocates its workspace itself. ValueError when no algorithm
        can run the problem.
    """
    _check_desc(desc)
    x_s, w_s, y_s = (
        _shape(x_shape, "x_shape", desc.spatial_dim),
        _shape(w_shape, "w_shape", desc.spatial_dim),
        _shape(y_shape, "y_shape", desc.spatial_dim),
    )
    _check_same("y", y_s, desc.get_forward_output_dim(x_s, w_s))
    conv_x, op = desc._conv_problem("forward", x_s, w_s)
    return _workspace(desc, conv_x, w_s, dtype or _dtype(x_shape, w_shape), op)


def convolution_backward_data_get_workspace_size(desc: ConvolutionDescriptor, dy_shape: ShapeLike,
                                                 w_shape: ShapeLike, dx_shape: ShapeLike, *,
                                                 dtype: Optional[npt.DTypeLike] = None) -> int:
    """``miopenConvolutionBackwardDataGetWorkSpaceSize``: workspace of the data gradient.

    Parameters
    ----------
    desc : ConvolutionDescriptor
        The convolution.
    dy_shape : sequence of 2 + spatial_dim ints or array
        The output gradient, ``(N, K, *out)``; must be the forward output shape for
        ``dx_shape`` and ``w_shape`` (ValueError otherwise).
    w_shape : sequence of 2 + spatial_dim ints or array
        The filter, laid out as for the forward pass of ``desc.mode``.
    dx_shape : sequence of 2 + spatial_dim ints or array
        The input gradient, i.e. the forward input's shape ``(N, C, *spatial)``.
    dtype : dtype-like, optional
        float16, float32 or float64. Default: the dtype of ``dy_shape`` or else ``w_shape``
        when one is an array, else float32.

    Returns
    -------
    int
        Bytes, found as in :func:`convolution_forward_get_workspace_size` for the ordinary
        convolution behind this pass. Informational: cconv allocates its workspace itself.
    """
    _check_desc(desc)
    dy_s, w_s, dx_s = (
        _shape(dy_shape, "dy_shape", desc.spatial_dim),
        _shape(w_shape, "w_shape", desc.spatial_dim),
        _shape(dx_shape, "dx_shape", desc.spatial_dim),
    )
    _check_same("dy", dy_s, desc.get_forward_output_dim(dx_s, w_s))
    conv_x, op = desc._conv_problem("backward_data", dx_s, w_s)
    return _workspace(desc, conv_x, w_s, dtype or _dtype(dy_shape, w_shape), op)


def convolution_backward_weights_get_workspace_size(
    desc: ConvolutionDescriptor,
    dy_shape: ShapeLike,
    x_shape: ShapeLike,
    dw_shape: ShapeLike,
    *,
    dtype: Optional[npt.DTypeLike] = None,
) -> int:
    """``miopenConvolutionBackwardWeightsGetWorkSpaceSize``: workspace of the filter gradient.

    Parameters
    ----------
    desc : ConvolutionDescriptor
        The convolution.
    dy_shape : sequence of 2 + spatial_dim ints or array
        The output gradient, ``(N, K, *out)``; must be the forward output shape for
        ``x_shape`` and ``dw_shape`` (ValueError otherwise).
    x_shape : sequence of 2 + spatial_dim ints or array
        The forward input, ``(N, C, *spatial)``.
    dw_shape : sequence of 2 + spatial_dim ints or array
        The filter gradient, i.e. the filter's shape for ``desc.mode``.
    dtype : dtype-like, optional
        float16, float32 or float64. Default: the dtype of ``dy_shape`` or else ``x_shape``
        when one is an array, else float32.

    Returns
    -------
    int
        Bytes, found as in :func:`convolution_forward_get_workspace_size` for the ordinary
        convolution behind this pass. Informational: cconv allocates its workspace itself.
    """
    _check_desc(desc)
    dy_s, x_s, dw_s = (
        _shape(dy_shape, "dy_shape", desc.spatial_dim),
        _shape(x_shape, "x_shape", desc.spatial_dim),
        _shape(dw_shape, "dw_shape", desc.spatial_dim),
    )
    _check_same("dy", dy_s, desc.get_forward_output_dim(x_s, dw_s))
    conv_x, op = desc._conv_problem("backward_weights", x_s, dw_s)
    return _workspace(desc, conv_x, dw_s, dtype or _dtype(dy_shape, x_shape), op)


# ------------------------------------------------------------------------------ Find


def _find(desc: ConvolutionDescriptor, direction: str, x_s: Shape, w_s: Shape,
          dtype: np.dtype[Any], request_algo_count: Optional[int],
          workspace_size: Optional[int]) -> List[ConvAlgoPerf]:
    conv_x, op = desc._conv_problem(direction, x_s, w_s)
    table = _DIRECTIONS[direction]
    to_miopen = {cc_name: name for name, (_, cc_name) in table.items() if cc_name is not None}
    results = []
    for r in _cc.find_algorithms(conv_x, w_s, op=op, dtype=dtype, **desc._kwargs()):
        name = to_miopen.get(r.algo, f"cconv:{r.algo}")
        results.append(ConvAlgoPerf(name, float(r.time_ms), int(r.workspace_bytes)))
    results.sort(key=lambda p: p.time_ms)
    if workspace_size is not None:
        results = [p for p in results if p.memory <= workspace_size]
    if request_algo_count is not None:
        n = _int(request_algo_count, "request_algo_count")
        if n < 1:
            raise ValueError(f"request_algo_count must be positive, got {request_algo_count!r}")
        results = results[:n]
    return results


def find_convolution_forward_algorithm(
    desc: ConvolutionDescriptor,
    x: ShapeLike,
    w: ShapeLike,
    y: ShapeLike,
    *,
    request_algo_count: Optional[int] = None,
    workspace_size: Optional[int] = None,
    exhaustive_search: bool = False,
) -> List[ConvAlgoPerf]:
    """``miopenFindConvolutionForwardAlgorithm``: time the algorithms that can run the pass.

    Each usable cconv algorithm runs once to warm up, then is timed on random data of the
    problem's shape and dtype at the default thread count.

    Parameters
    ----------
    desc : ConvolutionDescriptor
        The convolution.
    x : array or sequence of 2 + spatial_dim ints
        The input, ``(N, C, *spatial)``. Only its shape and dtype are used.
    w : array or sequence of 2 + spatial_dim ints
        The filter, ``(K, C/group_count, *kernel)`` (transpose mode:
        ``(C, K/group_count, *kernel)``). Only its shape and dtype are used.
    y : array or sequence of 2 + spatial_dim ints
        The output; its shape must be :meth:`ConvolutionDescriptor.get_forward_output_dim`
        of ``x`` and ``w`` (ValueError otherwise). It is not written.
    request_algo_count : int, optional
        Return at most this many (positive) results; default all.
    workspace_size : int, optional
        Bytes available for a workspace: algorithms needing more are left out, as MIOpen
        does. Default: no limit.
    exhaustive_search : bool, optional
        Accepted for MIOpen's signature and ignored: every usable algorithm is always timed.

    Returns
    -------
    list of ConvAlgoPerf
        Fastest first. The dtype timed is that of ``x`` or else ``w`` when one is an array,
        else float32.
    """
    _check_desc(desc)
    x_s, w_s = _shape(x, "x", desc.spatial_dim), _shape(w, "w", desc.spatial_dim)
    _check_same("y", _shape(y, "y", desc.spatial_dim), desc.get_forward_output_dim(x_s, w_s))
    return _find(desc, "forward", x_s, w_s, _dtype(x, w), request_algo_count, workspace_size)


def find_convolution_backward_data_algorithm(
    desc: ConvolutionDescriptor,
    dy: ShapeLike,
    w: ShapeLike,
    dx: ShapeLike,
    *,
    request_algo_count: Optional[int] = None,
    workspace_size: Optional[int] = None,
    exhaustive_search: bool = False,
) -> List[ConvAlgoPerf]:
    """``miopenFindConvolutionBackwardDataAlgorithm``: time the algorithms of the data gradient.

    Parameters
    ----------
    desc : ConvolutionDescriptor
        The convolution.
    dy : array or sequence of 2 + spatial_dim ints
        The output gradient, ``(N, K, *out)``; its shape must be the forward output shape for
        ``dx`` and ``w`` (ValueError otherwise). Only its shape and dtype are used.
    w : array or sequence of 2 + spatial_dim ints
        The filter, laid out as for the forward pass of ``desc.mode``.
    dx : array or sequence of 2 + spatial_dim ints
        The input gradient, of the forward input's shape ``(N, C, *spatial)``. It is not written.
    request_algo_count, workspace_size, exhaustive_search
        As in :func:`find_convolution_forward_algorithm`.

    Returns
    -------
    list of ConvAlgoPerf
        Fastest first, with backward-data algorithm names. The dtype timed is that of
        ``dy`` or else ``w`` when one is an array, else float32.
    """
    _check_desc(desc)
    dx_s, w_s = _shape(dx, "dx", desc.spatial_dim), _shape(w, "w", desc.spatial_dim)
    _check_same("dy", _shape(dy, "dy", desc.spatial_dim), desc.get_forward_output_dim(dx_s, w_s))
    return _find(
        desc, "backward_data", dx_s, w_s, _dtype(dy, w), request_algo_count, workspace_size
    )


def find_convolution_backward_weights_algorithm(
    desc: ConvolutionDescriptor,
    dy: ShapeLike,
    x: ShapeLike,
    dw: ShapeLike,
    *,
    request_algo_count: Optional[int] = None,
    workspace_size: Optional[int] = None,
    exhaustive_search: bool = False,
) -> List[ConvAlgoPerf]:
    """``miopenFindConvolutionBackwardWeightsAlgorithm``: time the filter-gradient algorithms.

    Parameters
    ----------
    desc : ConvolutionDescriptor
        The convolution.
    dy : array or sequence of 2 + spatial_dim ints
        The output gradient, ``(N, K, *out)``; its shape must be the forward output shape for
        ``x`` and ``dw`` (ValueError otherwise). Only its shape and dtype are used.
    x : array or sequence of 2 + spatial_dim ints
        The forward input, ``(N, C, *spatial)``.
    dw : array or sequence of 2 + spatial_dim ints
        The filter gradient, of the filter's shape for ``desc.mode``. It is not written.
    request_algo_count, workspace_size, exhaustive_search
        As in :func:`find_convolution_forward_algorithm`.

    Returns
    -------
    list of ConvAlgoPerf
        Fastest first, with backward-weights algorithm names. The dtype timed is that of
        ``dy`` or else ``x`` when one is an array, else float32.
    """
    _check_desc(desc)
    x_s, w_s = _shape(x, "x", desc.spatial_dim), _shape(dw, "dw", desc.spatial_dim)
    _check_same("dy", _shape(dy, "dy", desc.spatial_dim), desc.get_forward_output_dim(x_s, w_s))
    return _find(
        desc, "backward_weights", x_s, w_s, _dtype(dy, x), request_algo_count, workspace_size
    )


# ------------------------------------------------------------------------------ execute


def _algo(algo: object, direction: str) -> str:
    table = _DIRECTIONS[direction]
    if algo is None:
        return "auto"
    name = None
    if not isinstance(algo, bool) and isinstance(algo, numbers.Integral):
        name = next((n for n, (v, _) in table.items() if v == int(algo)), None)
    elif isinstance(algo, str):
        if algo == "auto" or algo in _cc.ALGORITHMS:
            return algo
        if algo.startswith("cconv:") and algo[6:] in _cc.ALGORITHMS:
            return algo[6:]
        name = algo if algo in table else None
    if name is None:
        raise ValueError(
            f"algo {algo!r} is not a {direction} algorithm; use one of "
            f"{_available(table)}, their enum values, a cconv algorithm "
            f"{tuple(_cc.ALGORITHMS)} or 'auto'"
        )
    cc_name = table[name][1]
    if cc_name is None:
        raise ValueError(
            f"{name} is not available: cconv has no FFT, ImplicitGEMM or TransposeGEMM convolution "
            f"(available: {_available(table)})"
        )
    if cc_name not in _cc.ALGORITHMS:
        raise ValueError(
            f"{name} is not available: this cconv build has no {cc_name!r} algorithm "
            f"(cconv.ALGORITHMS = {tuple(_cc.ALGORITHMS)}; available: {_available(table)})"
        )
    return cc_name


def _available(table: Dict[str, Tuple[int, Optional[str]]]) -> List[str]:
    return [n for n, (_, c) in table.items() if c is not None and c in _cc.ALGORITHMS]


def _check_out(arr: object, what: str, want_shape: Iterable[int]) -> None:
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{what} must be a NumPy array written in place, got {type(arr).__name__}")
    if not arr.flags.writeable:
        raise ValueError(f"{what} must be writeable")
    _check_same(what, arr.shape, want_shape)


def _run(fn: Callable[..., Array], args: Tuple[object, ...], out: Array, alpha: float,
         beta: float, **kw: object) -> Array:
    """Call a core function with MIOpen alpha/beta into ``out`` (the core writes it in place)."""
    return fn(*args, out=out, alpha=float(alpha), beta=float(beta), **kw)


def convolution_forward(alpha: float, x: npt.ArrayLike, w: npt.ArrayLike,
                        desc: ConvolutionDescriptor, algo: AlgoArg, beta: float,
                        y: Array) -> Array:
    """``miopenConvolutionForward``: ``y = alpha * conv(x, w) + beta * y``, in place.

    ``conv`` is cconv's :func:`~cconv.conv1d` / :func:`~cconv.conv2d` /
    :func:`~cconv.conv3d` by ``desc.spatial_dim``; in transpose mode it is the transposed
    convolution (:func:`~cconv.conv_transpose2d` and its 1-D / 3-D siblings, with the
    descriptor's output padding).

    Parameters
    ----------
    alpha : float
        Scale of the convolution's result.
    x : array_like
        The input, ``(N, C, *spatial)``; float16, float32 or float64.
    w : array_like
        The filter: ``(K, C/group_count, *kernel)`` in convolution mode,
        ``(C, K/group_count, *kernel)`` in transpose mode.
    desc : ConvolutionDescriptor
        The convolution (mode, pads, strides, dilations, groups).
    algo : str, int or None
        A MIOpen forward algorithm by enum name (``"miopenConvolutionFwdAlgoGEMM"``,
        ``"...Direct"``, ``"...Winograd"``, also this module's constants of those names) or
        enum value (0, 1, 3), a name Find returned (``"cconv:<name>"``), a cconv algorithm
        name, or ``"auto"`` / None for cconv's heuristic. FFT and ImplicitGEMM (which cconv
        does not have) raise ValueError.
    beta : float
        Scale of ``y``'s previous contents; 0 means they are never read (NaNs in them do
        not propagate).
    y : ndarray
        The output, written in place: a writeable NumPy array of shape
        :meth:`ConvolutionDescriptor.get_forward_output_dim` of ``x`` and ``w``
        ``(N, K, *out)``, of dtype ``numpy.result_type(x, w)``.

    Returns
    -------
    ndarray
        ``y`` itself, after the update.
    """
    _check_desc(desc)
    x, w = np.asarray(x), np.asarray(w)
    _check_out(y, "y", desc.get_forward_output_dim(x.shape, w.shape))
    a = _algo(algo, "forward")
    kw = desc._kwargs()
    if desc.mode == "convolution":
        return _run(_core("conv{}d", desc.spatial_dim), (x, w), y, alpha, beta, algo=a, **kw)
    del kw["weight_layout"]
    return _run(
        _core("conv_transpose{}d", desc.spatial_dim),
        (x, w),
        y,
        alpha,
        beta,
        algo=a,
        output_padding=desc.transpose_output_padding,
        **kw,
    )


def convolution_backward_data(alpha: float, dy: npt.ArrayLike, w: npt.ArrayLike,
                              desc: ConvolutionDescriptor, algo: AlgoArg, beta: float,
                              dx: Array) -> Array:
    """``miopenConvolutionBackwardData``: ``dx = alpha * dL/dx + beta * dx``, in place.

    In convolution mode ``dL/dx`` is the data gradient of the convolution (cconv's
    :func:`~cconv.conv2d_backward_data`, or its 1-D / 3-D sibling by ``desc.spatial_dim``);
    in transpose mode it is the ordinary convolution of ``dy`` with ``w``
    (:func:`~cconv.conv2d` and siblings), the gradient of a transposed convolution.

    Parameters
    ----------
    alpha : float
        Scale of the gradient.
    dy : array_like
        The output gradient, ``(N, K, *out)``; its shape must be the forward output shape for
        ``dx`` and ``w`` (ValueError otherwise).
    w : array_like
        The filter, laid out as for :func:`convolution_forward` in ``desc.mode``.
    desc : ConvolutionDescriptor
        The convolution.
    algo : str, int or None
        A MIOpen backward-data algorithm by enum name (``"miopenConvolutionBwdDataAlgoGEMM"``,
        ``"...Direct"``, ``"...Winograd"``) or value (0, 1, 3), a Find result name, a cconv
        algorithm name, or ``"auto"`` / None. FFT, TransposeGEMM and ImplicitGEMM raise
        ValueError.
    beta : float
        Scale of ``dx``'s previous contents; 0 means they are never read.
    dx : ndarray
        The input gradient, written in place: a writeable NumPy array of the forward input's
        shape ``(N, C, *spatial)``, of dtype ``numpy.result_type(dy, w)``. Its shape also fixes
        the input size that strided convolutions leave ambiguous.

    Returns
    -------
    ndarray
        ``dx`` itself, after the update.
    """
    _check_desc(desc)
    dy, w = np.asarray(dy), np.asarray(w)
    if not isinstance(dx, np.ndarray):
        raise TypeError(f"dx must be a NumPy array written in place, got {type(dx).__name__}")
    _check_same("dy", dy.shape, desc.get_forward_output_dim(dx.shape, w.shape))
    _check_out(dx, "dx", dx.shape)
    a = _algo(algo, "backward_data")
    rank, kw = desc.spatial_dim, desc._kwargs()
    if desc.mode == "convolution":
        return _run(
            _core("conv{}d_backward_data", rank), (dy, w, dx.shape), dx, alpha, beta, algo=a, **kw
        )
    return _run(_core("conv{}d", rank), (dy, w), dx, alpha, beta, algo=a, **kw)


def convolution_backward_weights(alpha: float, dy: npt.ArrayLike, x: npt.ArrayLike,
                                 desc: ConvolutionDescriptor, algo: AlgoArg, beta: float,
                                 dw: Array) -> Array:
    """``miopenConvolutionBackwardWeights``: ``dw = alpha * dL/dw + beta * dw``, in place.

    ``dL/dw`` is the filter gradient of the forward pass of ``desc.mode`` (convolution or
    transposed convolution), summed over the batch.

    Parameters
    ----------
    alpha : float
        Scale of the gradient.
    dy : array_like
        The output gradient, ``(N, K, *out)``; its shape must be the forward output shape for
        ``x`` and ``dw`` (ValueError otherwise).
    x : array_like
        The forward input, ``(N, C, *spatial)``.
    desc : ConvolutionDescriptor
        The convolution.
    algo : str, int or None
        A MIOpen backward-weights algorithm by enum name
        (``"miopenConvolutionBwdWeightsAlgoGEMM"``, ``"...Direct"``, ``"...Winograd"``) or
        value (0, 1, 3), a Find result name, a cconv algorithm name, or ``"auto"`` / None.
        ImplicitGEMM raises ValueError.
    beta : float
        Scale of ``dw``'s previous contents; 0 means they are never read.
    dw : ndarray
        The filter gradient, written in place: a writeable NumPy array of the filter's shape
        for ``desc.mode``, of dtype ``numpy.result_type(dy, x)``.

    Returns
    -------
    ndarray
        ``dw`` itself, after the update.
    """
    _check_desc(desc)
    dy, x = np.asarray(dy), np.asarray(x)
    if not isinstance(dw, np.ndarray):
        raise TypeError(f"dw must be a NumPy array written in place, got {type(dw).__name__}")
    _check_same("dy", dy.shape, desc.get_forward_output_dim(x.shape, dw.shape))
    _check_out(dw, "dw", dw.shape)
    a = _algo(algo, "backward_weights")
    weight_grad = _core("conv{}d_backward_weight", desc.spatial_dim)
    if desc.mode == "convolution":
        return _run(weight_grad, (dy, x, dw.shape), dw, alpha, beta, algo=a, **desc._kwargs())
    # transposed conv y = T(x, w) is the data gradient of conv(y', w); its weight gradient is that
    # conv's weight gradient with dy as the conv input and x as the conv's output gradient.
    return _run(weight_grad, (x, dy, dw.shape), dw, alpha, beta, algo=a, **desc._kwargs())


# ------------------------------------------------------------------------------ bias


def _bias_rank(a: Array, what: str) -> int:
    """The spatial rank of an NCW / NCHW / NCDHW tensor, or a ValueError naming it."""
    if a.ndim - 2 not in _LAYOUTS:
        raise ValueError(
            f"{what} must be a 3-D, 4-D or 5-D NumPy array (NCW, NCHW or NCDHW), got shape "
            f"{a.shape}"
        )
    return a.ndim - 2


def _bias_vector(b: npt.ArrayLike, k: int, what: str, rank: int) -> Array:
    """``b`` as a (1, K, 1, ...) array broadcasting over a tensor of spatial rank ``rank``."""
    b = np.asarray(b)
    full = (1, k) + (1,) * rank
    if b.shape not in ((k,), full):
        raise ValueError(f"{what} must have shape ({k},) or {full}, got {b.shape}")
    return b.reshape(full)


def convolution_forward_bias(alpha: float, b: npt.ArrayLike, beta: float, y: Array) -> Array:
    """``miopenConvolutionForwardBias``: ``y = alpha * b + beta * y``, in place.

    ``b`` is broadcast over N and the spatial axes; ``alpha=1, beta=1`` adds the bias to a
    convolution's output.

    Parameters
    ----------
    alpha : float
        Scale of the bias.
    b : array_like
        The bias, shape (K,) or (1, K, 1, ...) of ``y``'s rank, with K = ``y.shape[1]``.
    beta : float
        Scale of ``y``'s previous contents; 0 means they are never read.
    y : ndarray
        A writeable NCW, NCHW or NCDHW NumPy array (3-D, 4-D or 5-D), updated in place (in
        its own dtype).

    Returns
    -------
    ndarray
        ``y`` itself, after the update.
    """
    if not isinstance(y, np.ndarray):
        raise TypeError(f"y must be a NumPy array written in place, got {type(y).__name__}")
    rank = _bias_rank(y, "y")
    if not y.flags.writeable:
        raise ValueError("y must be writeable")
    bb = _bias_vector(b, y.shape[1], "b", rank)
    if float(beta) == 0.0:
        y[...] = float(alpha) * bb
    else:
        y[...] = float(alpha) * bb + float(beta) * y
    return y


def convolution_backward_bias(alpha: float, dy: npt.ArrayLike, beta: float, db: Array) -> Array:
    """``miopenConvolutionBackwardBias``: ``db = alpha * sum_{N,spatial} dy + beta * db``.

    Parameters
    ----------
    alpha : float
        Scale of the gradient.
    dy : array_like
        The output gradient, ``(N, K, *out)``: NCW, NCHW or NCDHW (3-D, 4-D or 5-D); float16,
        float32 or float64. The sum over N and the spatial axes is accumulated in float64
        (cconv's ``conv{1,2,3}d_backward_bias``).
    beta : float
        Scale of ``db``'s previous contents; 0 means they are never read.
    db : ndarray
        The bias gradient, a writeable NumPy array of shape (K,) or (1, K, 1, ...) of
        ``dy``'s rank, updated in place (in its own dtype).

    Returns
    -------
    ndarray
        ``db`` itself, after the update.
    """
    dy = np.asarray(dy)
    rank = _bias_rank(dy, "dy")
    if not isinstance(db, np.ndarray):
        raise TypeError(f"db must be a NumPy array written in place, got {type(db).__name__}")
    if not db.flags.writeable:
        raise ValueError("db must be writeable")
    _bias_vector(db, dy.shape[1], "db", rank)
    bias_grad = _core("conv{}d_backward_bias", rank)
    grad = np.asarray(bias_grad(dy, layout=_LAYOUTS[rank][0])).reshape(db.shape)
    if float(beta) == 0.0:
        db[...] = float(alpha) * grad
    else:
        db[...] = float(alpha) * grad + float(beta) * db
    return db
