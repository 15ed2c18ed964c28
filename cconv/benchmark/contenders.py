"""The timed calls: cconv's passes, PyTorch's and ONNX Runtime's on the same arrays, and
their inputs."""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any, Callable, Optional, Tuple

import numpy as np
import numpy.typing as npt

import cconv

from .layers import Layer

__all__ = [
    "cconv_call",
    "import_onnxruntime",
    "import_torch",
    "make_data",
    "max_rel_err",
    "onnxruntime_call",
    "planned_algorithm",
    "torch_call",
]

Array = npt.NDArray[Any]


def make_data(layer: Layer, n: int, dtype: str, rng: np.random.Generator,
              ) -> Tuple[Array, Array, Array]:
    """Random input, weight and output gradient of `layer` with batch `n`.

    Parameters
    ----------
    layer : Layer
    n : int
        Batch size.
    dtype : str
        ``"float32"`` or ``"float64"``.
    rng : numpy.random.Generator

    Returns
    -------
    x, w, gy : numpy.ndarray
        NCHW input, OIHW weight and NCHW output gradient.
    """
    oh, ow = layer.output_hw
    cg = layer.C // layer.groups
    # Drawn in float32 whatever `dtype`, so both dtypes time the same numbers.
    x = rng.standard_normal((n, layer.C, layer.H, layer.W), dtype=np.float32)
    w = rng.standard_normal((layer.K, cg, layer.R, layer.S), dtype=np.float32)
    # Fan-in scaling keeps outputs near unit size, where relative errors are meaningful.
    w = w / math.sqrt(cg * layer.R * layer.S)
    gy = rng.standard_normal((n, layer.K, oh, ow), dtype=np.float32)
    return (x.astype(dtype, copy=False), w.astype(dtype, copy=False),
            gy.astype(dtype, copy=False))


def cconv_call(layer: Layer, pss: str, algo: str, x: Array, w: Array, gy: Array,
               threads: int) -> Callable[[], Any]:
    """A zero-argument callable running one cconv pass.

    Parameters
    ----------
    layer : Layer
    pss : {"forward", "backward_data", "backward_weight"}
    algo : str
        ``"auto"``, ``"find"`` or one of ``cconv.ALGORITHMS``.
    x, w, gy : numpy.ndarray
        As returned by :func:`make_data`.
    threads : int
        ``num_threads`` of the call.

    Returns
    -------
    callable
    """
    kw: dict[str, Any] = {"stride": layer.stride, "padding": layer.padding,
                          "dilation": layer.dilation, "groups": layer.groups, "algo": algo,
                          "num_threads": threads}
    if pss == "forward":
        return lambda: cconv.conv2d(x, w, **kw)
    if pss == "backward_data":
        return lambda: cconv.conv2d_backward_data(gy, w, x.shape, **kw)
    return lambda: cconv.conv2d_backward_weight(gy, x, w.shape, **kw)


def import_torch() -> Optional[ModuleType]:
    """The ``torch`` module, or None when it is not installed (it is optional).

    Returns
    -------
    module or None
    """
    try:
        import torch
    except ImportError:
        return None
    return torch


def torch_call(torch: Any, layer: Layer, pss: str, x: Array, w: Array, gy: Array,
               channels_last: bool = False) -> Callable[[], Any]:
    """A zero-argument callable running one PyTorch pass on the arrays of cconv.

    Parameters
    ----------
    torch : module
        The ``torch`` module.
    layer : Layer
    pss : {"forward", "backward_data", "backward_weight"}
    x, w, gy : numpy.ndarray
        Shared with PyTorch through ``torch.from_numpy``, so both read the same memory.
    channels_last : bool, optional
        Run on channels-last copies of the three arrays instead (made here, outside the
        timed call), PyTorch's other memory format: which of the two is faster depends on
        the layer, and a fair comparison takes PyTorch's faster one.

    Returns
    -------
    callable
        Returns a tensor (in the memory format it ran in; its NCHW view is the result).
    """
    tx, tw, tgy = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(gy)
    if channels_last:
        fmt = torch.channels_last
        tx, tw, tgy = (t.contiguous(memory_format=fmt) for t in (tx, tw, tgy))
    st, pd, dl = [layer.stride] * 2, [layer.padding] * 2, [layer.dilation] * 2
    g = layer.groups

    if pss == "forward":
        def forward() -> Any:
            with torch.no_grad():
                return torch.nn.functional.conv2d(tx, tw, None, st, pd, dl, g)
        return forward

    # The gradient operator itself, rather than autograd, so that no forward pass or graph
    # bookkeeping is timed along with the gradient.
    mask = [pss == "backward_data", pss == "backward_weight", False]
    idx = 0 if pss == "backward_data" else 1
    op = torch.ops.aten.convolution_backward

    def backward() -> Any:
        with torch.no_grad():
            return op(tgy, tx, tw, None, st, pd, dl, False, [0, 0], g, mask)[idx]
    return backward


def import_onnxruntime() -> Optional[ModuleType]:
    """The ``onnxruntime`` module when it and ``onnx`` (which builds the model) are installed.

    Returns
    -------
    module or None
    """
    try:
        import onnx  # noqa: F401  (only checked here; onnxruntime_call imports its helpers)
        import onnxruntime
    except ImportError:
        return None
    module: ModuleType = onnxruntime
    return module


def onnxruntime_call(ort: Any, layer: Layer, x: Array, w: Array, threads: int,
                     ) -> Callable[[], Any]:
    """A zero-argument callable running the layer's forward pass in ONNX Runtime.

    The model, one ``Conv`` node, is built in memory with ``onnx.helper``; the weight is an
    initializer, as in an exported network (ONNX Runtime may pre-pack it when the session
    is created, outside the timed calls).  The session runs ``threads`` intra-op threads.

    Parameters
    ----------
    ort : module
        The ``onnxruntime`` module.
    layer : Layer
    x, w : numpy.ndarray
        NCHW float32 input and OIHW weight.
    threads : int

    Returns
    -------
    callable
        Returns the NCHW result as a NumPy array.

    Raises
    ------
    ValueError
        For a dtype ONNX Runtime's CPU convolution lacks (it has float32 only), so that the
        suite reports the case as not applicable.
    """
    from onnx import TensorProto, helper, numpy_helper

    if x.dtype != np.float32:
        raise ValueError(f"ONNX Runtime's CPU Conv runs float32 only, not {x.dtype}")
    pad, st, dl = layer.padding, layer.stride, layer.dilation
    node = helper.make_node("Conv", ["X", "W"], ["Y"], kernel_shape=[layer.R, layer.S],
                            strides=[st, st], pads=[pad, pad, pad, pad], dilations=[dl, dl],
                            group=layer.groups)
    graph = helper.make_graph(
        [node], "conv", [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.ascontiguousarray(w), "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # read by every ONNX Runtime release since 1.10
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # ONNX Runtime's pool spins after each run by default; timed interleaved with the other
    # contenders, its spinning threads would take the cores from them (cconv's forward on
    # 2 cores measured up to 3x slower beside a spinning session).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    feed = {"X": x}
    return lambda: session.run(None, feed)[0]


def planned_algorithm(layer: Layer, n: int, dtype: str, algo: str) -> Optional[str]:
    """The forward algorithm cconv's planner picks for `algo`, or None if none applies.

    Parameters
    ----------
    layer : Layer
    n : int
        Batch size.
    dtype : str
    algo : str
        ``"auto"`` or ``"find"``.

    Returns
    -------
    str or None
    """
    try:
        plan = cconv.plan_conv2d(
            (n, layer.C, layer.H, layer.W),
            (layer.K, layer.C // layer.groups, layer.R, layer.S),
            stride=layer.stride, padding=layer.padding, dilation=layer.dilation,
            groups=layer.groups, dtype=dtype, algo=algo,
        )
    except ValueError:
        return None
    return str(plan.algorithm)


def max_rel_err(a: npt.ArrayLike, ref: npt.ArrayLike) -> float:
    """Largest absolute difference of `a` from `ref`, over the largest magnitude of `ref`.

    Parameters
    ----------
    a, ref : array_like
        Result and reference; a shape mismatch gives ``inf``.

    Returns
    -------
    float
    """
    got = np.asarray(a, dtype=np.float64)
    want = np.asarray(ref, dtype=np.float64)
    if got.shape != want.shape:
        return float("inf")
    if not want.size:
        return 0.0
    scale = float(np.max(np.abs(want))) or 1.0  # an all-zero reference: absolute error
    return float(np.max(np.abs(got - want))) / scale
