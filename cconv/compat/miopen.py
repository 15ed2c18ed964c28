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

import collections
import numbers

import numpy as np

import cconv as _cc

from . import _int

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


def _spatial_list(value, what):
    """2-D tuple or N-d list with 2 spatial entries (an int is used for both)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return (int(value), int(value))
    items = [_int(v, what) for v in value]
    if len(items) != 2:
        raise ValueError(
            f"{what} has {len(items)} spatial dimensions ({list(items)}); "
            "cconv supports 2-D convolution only"
        )
    return tuple(items)


def _shape(a, what):
    shape = tuple(int(s) for s in (a.shape if hasattr(a, "shape") else a))
    if len(shape) != 4:
        raise ValueError(f"{what} must be a 4-D NCHW shape (2 spatial dimensions), got {shape}")
    return shape


class ConvolutionDescriptor:
    """``miopenConvolutionDescriptor_t``: mode, pads, strides, dilations, groups, output padding."""

    def __init__(self, mode="convolution", pad=(0, 0), stride=(1, 1), dilation=(1, 1)):
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
        self.transpose_output_padding = (0, 0)

    spatial_dim = 2

    def __repr__(self):
        return (
            f"ConvolutionDescriptor(mode={self.mode!r}, pad={self.pad}, stride={self.stride}, "
            f"dilation={self.dilation}, group_count={self.group_count}, "
            f"transpose_output_padding={self.transpose_output_padding})"
        )

    def set_group_count(self, group_count):
        g = _int(group_count, "group_count")
        if g < 1:
            raise ValueError(f"group_count must be positive, got {group_count!r}")
        self.group_count = g

    def get_group_count(self):
        return self.group_count

    def set_transpose_output_padding(self, adj_h, adj_w):
        adj = (_int(adj_h, "adj_h"), _int(adj_w, "adj_w"))
        if min(adj) < 0:
            raise ValueError(f"transpose output padding must be non-negative, got {adj}")
        self.transpose_output_padding = adj

    # -- geometry
    def _check_channels(self, x_shape, w_shape):
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

    def get_forward_output_dim(self, x_shape, w_shape):
        """``miopenGetConvolutionForwardOutputDim`` -> (n, c, h, w)."""
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

    def _kwargs(self):
        return dict(
            stride=self.stride,
            padding=self.pad,
            dilation=self.dilation,
            groups=self.group_count,
            layout="NCHW",
            weight_layout="OIHW",
        )

    def _conv_problem(self, direction, x_shape, w_shape):
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


def _check_desc(desc):
    if not isinstance(desc, ConvolutionDescriptor):
        raise TypeError(f"desc must be a miopen.ConvolutionDescriptor, got {type(desc).__name__}")


def _check_same(what, got, want):
    if tuple(got) != tuple(want):
        raise ValueError(
            f"{what} has shape {tuple(got)} but the descriptor and inputs give {tuple(want)}"
        )


def _dtype(*arrays, default="float32"):
    for a in arrays:
        if hasattr(a, "dtype"):
            return np.dtype(a.dtype)
    return np.dtype(default)


# ------------------------------------------------------------------------------ workspace queries


def _workspace(desc, conv_x_shape, w_shape, dtype):
    best, err = None, None
    for algo in tuple(_cc.ALGORITHMS) + ("auto",):
        try:
            plan = _cc.plan_conv2d(conv_x_shape, w_shape, dtype=dtype, algo=algo, **desc._kwargs())
        except ValueError as e:  # algorithm not usable for this shape
            err = e
            continue
        best = max(best or 0, int(plan.workspace_bytes))
    if best is None:
        raise err
    return best


def convolution_forward_get_workspace_size(desc, w_shape, x_shape, y_shape, *, dtype=None):
    """``miopenConvolutionForwardGetWorkSpaceSize`` (shapes or arrays) -> bytes."""
    _check_desc(desc)
    x_s, w_s, y_s = (
        _shape(x_shape, "x_shape"),
        _shape(w_shape, "w_shape"),
        _shape(y_shape, "y_shape"),
    )
    _check_same("y", y_s, desc.get_forward_output_dim(x_s, w_s))
    conv_x, _ = desc._conv_problem("forward", x_s, w_s)
    return _workspace(desc, conv_x, w_s, dtype or _dtype(x_shape, w_shape))


def convolution_backward_data_get_workspace_size(desc, dy_shape, w_shape, dx_shape, *, dtype=None):
    """``miopenConvolutionBackwardDataGetWorkSpaceSize`` -> bytes."""
    _check_desc(desc)
    dy_s, w_s, dx_s = (
        _shape(dy_shape, "dy_shape"),
        _shape(w_shape, "w_shape"),
        _shape(dx_shape, "dx_shape"),
    )
    _check_same("dy", dy_s, desc.get_forward_output_dim(dx_s, w_s))
    conv_x, _ = desc._conv_problem("backward_data", dx_s, w_s)
    return _workspace(desc, conv_x, w_s, dtype or _dtype(dy_shape, w_shape))


def convolution_backward_weights_get_workspace_size(
    desc, dy_shape, x_shape, dw_shape, *, dtype=None
):
    """``miopenConvolutionBackwardWeightsGetWorkSpaceSize`` -> bytes."""
    _check_desc(desc)
    dy_s, x_s, dw_s = (
        _shape(dy_shape, "dy_shape"),
        _shape(x_shape, "x_shape"),
        _shape(dw_shape, "dw_shape"),
    )
    _check_same("dy", dy_s, desc.get_forward_output_dim(x_s, dw_s))
    conv_x, _ = desc._conv_problem("backward_weights", x_s, dw_s)
    return _workspace(desc, conv_x, dw_s, dtype or _dtype(dy_shape, x_shape))


# ------------------------------------------------------------------------------ Find


def _find(desc, direction, x_s, w_s, dtype, request_algo_count, workspace_size):
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
    desc, x, w, y, *, request_algo_count=None, workspace_size=None, exhaustive_search=False
):
    """``miopenFindConvolutionForwardAlgorithm``: time the usable algorithms.

    Returns [ConvAlgoPerf], fastest first.

    Only shapes and dtype of ``x``, ``w``, ``y`` are used (``y`` is not written).
    ``workspace_size`` (bytes) drops algorithms needing more, as MIOpen does.
    """
    _check_desc(desc)
    x_s, w_s = _shape(x, "x"), _shape(w, "w")
    _check_same("y", _shape(y, "y"), desc.get_forward_output_dim(x_s, w_s))
    return _find(desc, "forward", x_s, w_s, _dtype(x, w), request_algo_count, workspace_size)


def find_convolution_backward_data_algorithm(
    desc, dy, w, dx, *, request_algo_count=None, workspace_size=None, exhaustive_search=False
):
    """``miopenFindConvolutionBackwardDataAlgorithm`` -> [ConvAlgoPerf], fastest first."""
    _check_desc(desc)
    dx_s, w_s = _shape(dx, "dx"), _shape(w, "w")
    _check_same("dy", _shape(dy, "dy"), desc.get_forward_output_dim(dx_s, w_s))
    return _find(
        desc, "backward_data", dx_s, w_s, _dtype(dy, w), request_algo_count, workspace_size
    )


def find_convolution_backward_weights_algorithm(
    desc, dy, x, dw, *, request_algo_count=None, workspace_size=None, exhaustive_search=False
):
    """``miopenFindConvolutionBackwardWeightsAlgorithm`` -> [ConvAlgoPerf], fastest first."""
    _check_desc(desc)
    x_s, w_s = _shape(x, "x"), _shape(dw, "dw")
    _check_same("dy", _shape(dy, "dy"), desc.get_forward_output_dim(x_s, w_s))
    return _find(
        desc, "backward_weights", x_s, w_s, _dtype(dy, x), request_algo_count, workspace_size
    )


# ------------------------------------------------------------------------------ execute


def _algo(algo, direction):
    table = _DIRECTIONS[direction]
    if algo is None:
        return "auto"
    name = None
    if isinstance(algo, numbers.Integral) and not isinstance(algo, bool):
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


def _available(table):
    return [n for n, (_, c) in table.items() if c is not None and c in _cc.ALGORITHMS]


def _check_out(arr, what, want_shape):
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{what} must be a NumPy array written in place, got {type(arr).__name__}")
    if not arr.flags.writeable:
        raise ValueError(f"{what} must be writeable")
    _check_same(what, arr.shape, want_shape)


def _run(fn, args, out, alpha, beta, **kw):
    """Call a core function with MIOpen alpha/beta into ``out`` (the core writes it in place)."""
    return fn(*args, out=out, alpha=float(alpha), beta=float(beta), **kw)


def convolution_forward(alpha, x, w, desc, algo, beta, y):
    """``miopenConvolutionForward``: y = alpha * conv(x, w) + beta * y, in place (returns y).

    Transpose mode: y = alpha * conv_transpose(x, w) + beta * y.
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


def convolution_backward_data(alpha, dy, w, desc, algo, beta, dx):
    """``miopenConvolutionBackwardData``: dx = alpha * dL/dx + beta * dx, in place (returns dx).

    Transpose mode: the ordinary convolution of dy with w.
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


def convolution_backward_weights(alpha, dy, x, desc, algo, beta, dw):
    """``miopenConvolutionBackwardWeights``: dw = alpha * dL/dw + beta * dw, in place.

    Returns dw.
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


def _bias_vector(b, k, what):
    b = np.asarray(b)
    if b.shape not in ((k,), (1, k, 1, 1)):
        raise ValueError(f"{what} must have shape ({k},) or (1, {k}, 1, 1), got {b.shape}")
    return b.reshape(1, k, 1, 1)


def convolution_forward_bias(alpha, b, beta, y):
    """``miopenConvolutionForwardBias``: y = alpha * b + beta * y, in place.

    ``b`` is broadcast over N, H and W.
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


def convolution_backward_bias(alpha, dy, beta, db):
    """``miopenConvolutionBackwardBias``: db = alpha * sum_{N,H,W} dy + beta * db, in place."""
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
