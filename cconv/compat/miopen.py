"""MIOpen's convolution layer on cconv: descriptor, output-dim and workspace queries, Find, execute.

Tensors are NCHW, filters are (K, C/groups, R, S) in ``"convolution"`` mode and
(C_in, K/groups, R, S) in ``"transpose"`` mode (MIOpen checks ``x.C == w[0]`` there and produces
``w[1] * group_count`` channels). Execution functions write their output array in place with
MIOpen's scaling: ``out = alpha * result + beta * out`` (``beta == 0`` never reads ``out``) and
also return it.

In transpose mode, as in MIOpen, "forward" is the transposed convolution (cconv's
``conv_transpose2d``, output size ``(in - 1) * stride - 2 * pad + dilation * (k - 1) + 1 + adj``
with ``adj`` the transpose output padding, which must be smaller than the stride), "backward
data" is the ordinary forward convolution of ``dy`` with the same filter, and "backward weights"
is the weight gradient of that convolution with ``x`` in the role of its output gradient.

Algorithms. MIOpen's names map onto cconv's: ``...AlgoDirect`` -> ``"direct"``,
``...AlgoWinograd`` -> ``"winograd"``, ``...AlgoGEMM`` -> ``"gemm"``. cconv has no FFT,
ImplicitGEMM or TransposeGEMM convolution: Find never lists them and asking for them raises
``ValueError``. Any further cconv algorithm (a name in ``cconv.ALGORITHMS`` without a MIOpen
equivalent) is reported by Find as ``"cconv:<name>"``; execute accepts those, plain cconv names,
MIOpen's enum integers, and ``"auto"`` / ``None`` (cconv's heuristic). Find results are
``ConvAlgoPerf(algo, time_ms, memory)`` tuples, fastest first; ``memory`` is the workspace in bytes.

Workspace queries return the largest workspace among the algorithms cconv can use for the
problem (as MIOpen's ``GetWorkSpaceSize``), from ``cconv.plan_conv2d`` of the convolution that
actually runs; cconv allocates its workspace itself, so this is informational.
"""

from __future__ import annotations

import collections
import numbers
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Tuple, Union, cast

import numpy as np
import numpy.typing as npt

import cconv as _cc

from . import _int

if TYPE_CHECKING:
    from .._geometry import IntOrPair, Pair, Shape4
    from . import _ConvKeywords

Array = npt.NDArray[Any]
# A shape, or an array (or anything with ``.shape``) standing for its shape.
ShapeLike = Union[Tuple[int, ...], List[int], Array]
# A MIOpen algorithm: its name, its enum value, a cconv name, "auto" or None.
AlgoArg = Union[str, int, None]

__all__ = [
    "ConvolutionDescriptor",
    "ConvAlgoPerf",
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


def _spatial_list(value: object, what: str) -> Pair:
    """2-D tuple or N-d list with 2 spatial entries (an int is used for both)."""
    if not isinstance(value, bool) and isinstance(value, numbers.Integral):
        return (int(value), int(value))
    items = [_int(v, what) for v in cast(Iterable[Any], value)]
    if len(items) != 2:
        raise ValueError(
            f"{what} has {len(items)} spatial dimensions ({list(items)}); "
            "cconv supports 2-D convolution only"
        )
    return cast("Pair", tuple(items))


def _shape(a: object, what: str) -> Shape4:
    shape = tuple(int(s) for s in cast(Iterable[Any], a.shape if hasattr(a, "shape") else a))
    if len(shape) != 4:
        raise ValueError(f"{what} must be a 4-D NCHW shape (2 spatial dimensions), got {shape}")
    return shape


class ConvolutionDescriptor:
    """``miopenConvolutionDescriptor_t``: mode, pads, strides, dilations, groups, output padding.

    Construction is ``miopenInitConvolutionDescriptor`` (2-D); the group count and the
    transpose output padding are set afterwards, as in MIOpen.

    Parameters
    ----------
    mode : str or int, optional
        ``"convolution"`` (``miopenConvolution``, 0; default) or ``"transpose"``
        (``miopenTranspose``, 1); names are case-insensitive and may carry the ``miopen``
        prefix.
    pad : int or (int, int), optional
        Zero padding (pad_h, pad_w) on both sides of each spatial axis; non-negative. In
        transpose mode it is the padding of the convolution being transposed (it shrinks
        the output).
    stride : int or (int, int), optional
        (stride_h, stride_w); positive.
    dilation : int or (int, int), optional
        (dilation_h, dilation_w); 1 means no dilation.

    Attributes
    ----------
    mode : str
        ``"convolution"`` or ``"transpose"``.
    pad, stride, dilation : (int, int)
        As given, per (h, w).
    group_count : int
        Channel groups (1 until :meth:`set_group_count`).
    transpose_output_padding : (int, int)
        Extra rows / columns of the transposed convolution's output (``adj_h``, ``adj_w``;
        (0, 0) until :meth:`set_transpose_output_padding`).
    spatial_dim : int
        Always 2: cconv convolves 2-D images.
    """

    def __init__(self, mode: Union[str, int] = "convolution", pad: IntOrPair = (0, 0),
                 stride: IntOrPair = (1, 1), dilation: IntOrPair = (1, 1)) -> None:
        key = mode.lower() if isinstance(mode, str) else mode
        if isinstance(key, bool) or key not in _MODES:
            raise ValueError(
                "mode must be 'convolution' or 'transpose' (miopenConvolution / miopenTranspose), "
                f"got {mode!r}"
            )
        self.mode = _MODES[key]
        self.pad = _spatial_list(pad, "pad")
        self.stride = _spatial_list(stride, "stride")
        self.dilation = _spatial_list(dilation, "dilation")
        if min(self.pad) < 0:
            raise ValueError(f"pad must be non-negative, got {pad!r}")
        if min(self.stride) < 1:
            raise ValueError(f"stride must be positive, got {stride!r}")
        if min(self.dilation) < 1:
            raise ValueError(f"dilation must be positive, got {dilation!r}")
        self.group_count = 1
        self.transpose_output_padding: Pair = (0, 0)

    spatial_dim = 2

    def __repr__(self) -> str:
        return (
            f"ConvolutionDescriptor(mode={self.mode!r}, pad={self.pad}, stride={self.stride}, "
            f"dilation={self.dilation}, group_count={self.group_count}, "
            f"transpose_output_padding={self.transpose_output_padding})"
        )

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
        """``miopenSetTransposeConvOutputPadding``: extra output rows / columns (transpose mode).

        Parameters
        ----------
        adj_h, adj_w : int
            Non-negative and, once tensors are checked against the descriptor, smaller than
            the stride along that axis; they pick one of the output sizes a strided
            transposed convolution can have.
        """
        adj = (_int(adj_h, "adj_h"), _int(adj_w, "adj_w"))
        if min(adj) < 0:
            raise ValueError(f"transpose output padding must be non-negative, got {adj}")
        self.transpose_output_padding = adj

    # -- geometry
    def _check_channels(self, x_shape: Shape4, w_shape: Shape4) -> None:
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
            for i in range(2):
                if self.transpose_output_padding[i] >= self.stride[i]:
                    raise ValueError(
                        "Output shape doesn't match due to invalid output padding: "
                        f"transpose output padding {self.transpose_output_padding} "
                        f"must be smaller than the stride {self.stride}"
                    )

    def get_forward_output_dim(self, x_shape: ShapeLike, w_shape: ShapeLike) -> Shape4:
        """``miopenGetConvolutionForwardOutputDim``: the shape of the forward result.

        Parameters
        ----------
        x_shape : sequence of 4 ints or array
            The input, (N, C, H, W); an array stands for its shape.
        w_shape : sequence of 4 ints or array
            The filter: (K, C/group_count, R, S) in convolution mode, (C, K/group_count, R, S)
            in transpose mode.

        Returns
        -------
        tuple of 4 ints
            (N, K, OH, OW). Convolution mode: ``OH = (H + 2*pad_h - dilation_h*(R - 1) - 1)
            // stride_h + 1``; transpose mode: ``OH = stride_h*(H - 1) + dilation_h*(R - 1)
            + 1 - 2*pad_h + adj_h`` (likewise for W). ValueError when the channels do not
            match the filter, the output padding is not smaller than the stride, or a size
            would be below 1.
        """
        x_shape = _shape(x_shape, "x_shape")
        w_shape = _shape(w_shape, "w_shape")
        self._check_channels(x_shape, w_shape)
        out = []
        for i in range(2):
            n_in, k = x_shape[2 + i], w_shape[2 + i]
            eff = self.dilation[i] * (k - 1) + 1
            if self.mode == "transpose":
                size = (
                    self.stride[i] * (n_in - 1)
                    + eff
                    - 2 * self.pad[i]
                    + self.transpose_output_padding[i]
                )
            else:
                size = (
                    (n_in + 2 * self.pad[i] - eff) // self.stride[i] + 1
                    if n_in + 2 * self.pad[i] >= eff
                    else 0
                )
            if size < 1:
                raise ValueError(
                    f"output size along {'HW'[i]} would be {size} for input {x_shape}, "
                    f"filter {w_shape}, {self!r}"
                )
            out.append(size)
        c = w_shape[1] * self.group_count if self.mode == "transpose" else w_shape[0]
        return (x_shape[0], c, out[0], out[1])

    def _kwargs(self) -> _ConvKeywords:
        return dict(
            stride=self.stride,
            padding=self.pad,
            dilation=self.dilation,
            groups=self.group_count,
            layout="NCHW",
            weight_layout="OIHW",
        )

    def _conv_problem(self, direction: str, x_shape: Shape4,
                      w_shape: Shape4) -> Tuple[Shape4, str]:
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


def _workspace(desc: ConvolutionDescriptor, conv_x_shape: Shape4, w_shape: Shape4,
               dtype: npt.DTypeLike, op: str) -> int:
    """The largest workspace any algorithm needs for cconv pass ``op`` of the convolution."""
    best: Optional[int]
    err: Optional[ValueError]
    best, err = None, None
    for algo in tuple(_cc.ALGORITHMS) + ("auto",):
        try:
            plan = _cc.plan_conv2d(conv_x_shape, w_shape, dtype=dtype, algo=algo, **desc._kwargs())
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
    w_shape : sequence of 4 ints or array
        The filter, (K, C/group_count, R, S) (transpose mode: (C, K/group_count, R, S)); an
        array stands for its shape (and its dtype).
    x_shape : sequence of 4 ints or array
        The input, (N, C, H, W).
    y_shape : sequence of 4 ints or array
        The output; must equal :meth:`ConvolutionDescriptor.get_forward_output_dim` of
        ``x_shape`` and ``w_shape`` (ValueError otherwise).
    dtype : dtype-like, optional
        float16, float32 or float64. Default: the dtype of ``x_shape`` or else ``w_shape``
        when one is an array, else float32.

    Returns
    -------
    int
        Bytes: the largest workspace :func:`cconv.plan_conv2d` reports, at the default
        thread count, among the cconv algorithms that can run the convolution computed (in
        transpose mode, the convolution whose data gradient is the transposed one).
        Informational: cconv allocates its workspace itself. ValueError when no algorithm
        can run the problem.
    """
    _check_desc(desc)
    x_s, w_s, y_s = (
        _shape(x_shape, "x_shape"),
        _shape(w_shape, "w_shape"),
        _shape(y_shape, "y_shape"),
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
    dy_shape : sequence of 4 ints or array
        The output gradient, (N, K, OH, OW); must be the forward output shape for
        ``dx_shape`` and ``w_shape`` (ValueError otherwise).
    w_shape : sequence of 4 ints or array
        The filter, laid out as for the forward pass of ``desc.mode``.
    dx_shape : sequence of 4 ints or array
        The input gradient, i.e. the forward input's shape (N, C, H, W).
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
        _shape(dy_shape, "dy_shape"),
        _shape(w_shape, "w_shape"),
        _shape(dx_shape, "dx_shape"),
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
    dy_shape : sequence of 4 ints or array
        The output gradient, (N, K, OH, OW); must be the forward output shape for
        ``x_shape`` and ``dw_shape`` (ValueError otherwise).
    x_shape : sequence of 4 ints or array
        The forward input, (N, C, H, W).
    dw_shape : sequence of 4 ints or array
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
        _shape(dy_shape, "dy_shape"),
        _shape(x_shape, "x_shape"),
        _shape(dw_shape, "dw_shape"),
    )
    _check_same("dy", dy_s, desc.get_forward_output_dim(x_s, dw_s))
    conv_x, op = desc._conv_problem("backward_weights", x_s, dw_s)
    return _workspace(desc, conv_x, dw_s, dtype or _dtype(dy_shape, x_shape), op)


# ------------------------------------------------------------------------------ Find


def _find(desc: ConvolutionDescriptor, direction: str, x_s: Shape4, w_s: Shape4,
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
    x : array or sequence of 4 ints
        The input, (N, C, H, W). Only its shape and dtype are used.
    w : array or sequence of 4 ints
        The filter, (K, C/group_count, R, S) (transpose mode: (C, K/group_count, R, S)).
        Only its shape and dtype are used.
    y : array or sequence of 4 ints
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
    x_s, w_s = _shape(x, "x"), _shape(w, "w")
    _check_same("y", _shape(y, "y"), desc.get_forward_output_dim(x_s, w_s))
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
    dy : array or sequence of 4 ints
        The output gradient, (N, K, OH, OW); its shape must be the forward output shape for
        ``dx`` and ``w`` (ValueError otherwise). Only its shape and dtype are used.
    w : array or sequence of 4 ints
        The filter, laid out as for the forward pass of ``desc.mode``.
    dx : array or sequence of 4 ints
        The input gradient, of the forward input's shape (N, C, H, W). It is not written.
    request_algo_count, workspace_size, exhaustive_search
        As in :func:`find_convolution_forward_algorithm`.

    Returns
    -------
    list of ConvAlgoPerf
        Fastest first, with backward-data algorithm names. The dtype timed is that of
        ``dy`` or else ``w`` when one is an array, else float32.
    """
    _check_desc(desc)
    dx_s, w_s = _shape(dx, "dx"), _shape(w, "w")
    _check_same("dy", _shape(dy, "dy"), desc.get_forward_output_dim(dx_s, w_s))
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
    dy : array or sequence of 4 ints
        The output gradient, (N, K, OH, OW); its shape must be the forward output shape for
        ``x`` and ``dw`` (ValueError otherwise). Only its shape and dtype are used.
    x : array or sequence of 4 ints
        The forward input, (N, C, H, W).
    dw : array or sequence of 4 ints
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
    x_s, w_s = _shape(x, "x"), _shape(dw, "dw")
    _check_same("dy", _shape(dy, "dy"), desc.get_forward_output_dim(x_s, w_s))
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

    In transpose mode ``conv`` is the transposed convolution (cconv's
    :func:`~cconv.conv_transpose2d` with the descriptor's output padding).

    Parameters
    ----------
    alpha : float
        Scale of the convolution's result.
    x : array_like
        The input, (N, C, H, W); float16, float32 or float64.
    w : array_like
        The filter: (K, C/group_count, R, S) in convolution mode, (C, K/group_count, R, S)
        in transpose mode.
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
        :meth:`ConvolutionDescriptor.get_forward_output_dim` of ``x`` and ``w`` (N, K, OH,
        OW), of dtype ``numpy.result_type(x, w)``.

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
        return _run(_cc.conv2d, (x, w), y, alpha, beta, algo=a, **kw)
    del kw["weight_layout"]
    return _run(
        _cc.conv_transpose2d,
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
    :func:`~cconv.conv2d_backward_data`); in transpose mode it is the ordinary convolution
    of ``dy`` with ``w`` (:func:`~cconv.conv2d`), the gradient of a transposed convolution.

    Parameters
    ----------
    alpha : float
        Scale of the gradient.
    dy : array_like
        The output gradient, (N, K, OH, OW); its shape must be the forward output shape for
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
        shape (N, C, H, W), of dtype ``numpy.result_type(dy, w)``. Its shape also fixes the
        input size that strided convolutions leave ambiguous.

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
    if desc.mode == "convolution":
        return _run(
            _cc.conv2d_backward_data, (dy, w, dx.shape), dx, alpha, beta, algo=a, **desc._kwargs()
        )
    return _run(_cc.conv2d, (dy, w), dx, alpha, beta, algo=a, **desc._kwargs())


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
        The output gradient, (N, K, OH, OW); its shape must be the forward output shape for
        ``x`` and ``dw`` (ValueError otherwise).
    x : array_like
        The forward input, (N, C, H, W).
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
    if desc.mode == "convolution":
        return _run(
            _cc.conv2d_backward_weight, (dy, x, dw.shape), dw, alpha, beta, algo=a, **desc._kwargs()
        )
    # transposed conv y = T(x, w) is the data gradient of conv(y', w); its weight gradient is that
    # conv's weight gradient with dy as the conv input and x as the conv's output gradient.
    return _run(
        _cc.conv2d_backward_weight, (x, dy, dw.shape), dw, alpha, beta, algo=a, **desc._kwargs()
    )


# ------------------------------------------------------------------------------ bias


def _bias_vector(b: npt.ArrayLike, k: int, what: str) -> Array:
    b = np.asarray(b)
    if b.shape not in ((k,), (1, k, 1, 1)):
        raise ValueError(f"{what} must have shape ({k},) or (1, {k}, 1, 1), got {b.shape}")
    return b.reshape(1, k, 1, 1)


def convolution_forward_bias(alpha: float, b: npt.ArrayLike, beta: float, y: Array) -> Array:
    """``miopenConvolutionForwardBias``: ``y = alpha * b + beta * y``, in place.

    ``b`` is broadcast over N, H and W; ``alpha=1, beta=1`` adds the bias to a convolution's
    output.

    Parameters
    ----------
    alpha : float
        Scale of the bias.
    b : array_like
        The bias, shape (K,) or (1, K, 1, 1) with K = ``y.shape[1]``.
    beta : float
        Scale of ``y``'s previous contents; 0 means they are never read.
    y : ndarray
        A writeable 4-D NCHW NumPy array, updated in place (in its own dtype).

    Returns
    -------
    ndarray
        ``y`` itself, after the update.
    """
    if not isinstance(y, np.ndarray) or y.ndim != 4:
        raise ValueError(
            f"y must be a 4-D NCHW NumPy array, got {getattr(y, 'shape', type(y).__name__)}"
        )
    if not y.flags.writeable:
        raise ValueError("y must be writeable")
    bb = _bias_vector(b, y.shape[1], "b")
    if float(beta) == 0.0:
        y[...] = float(alpha) * bb
    else:
        y[...] = float(alpha) * bb + float(beta) * y
    return y


def convolution_backward_bias(alpha: float, dy: npt.ArrayLike, beta: float, db: Array) -> Array:
    """``miopenConvolutionBackwardBias``: ``db = alpha * sum_{N,H,W} dy + beta * db``, in place.

    Parameters
    ----------
    alpha : float
        Scale of the gradient.
    dy : array_like
        The output gradient, 4-D NCHW (N, K, OH, OW); float16, float32 or float64. The sum
        over N, OH and OW is accumulated in float64.
    beta : float
        Scale of ``db``'s previous contents; 0 means they are never read.
    db : ndarray
        The bias gradient, a writeable NumPy array of shape (K,) or (1, K, 1, 1), updated in
        place (in its own dtype).

    Returns
    -------
    ndarray
        ``db`` itself, after the update.
    """
    dy = np.asarray(dy)
    if dy.ndim != 4:
        raise ValueError(f"dy must be 4-D NCHW, got shape {dy.shape}")
    if not isinstance(db, np.ndarray):
        raise TypeError(f"db must be a NumPy array written in place, got {type(db).__name__}")
    if not db.flags.writeable:
        raise ValueError("db must be writeable")
    k = dy.shape[1]
    _bias_vector(db, k, "db")
    grad = np.asarray(_cc.conv2d_backward_bias(dy, layout="NCHW")).reshape(db.shape)
    if float(beta) == 0.0:
        db[...] = float(alpha) * grad
    else:
        db[...] = float(alpha) * grad + float(beta) * db
    return db
