"""The timed calls: cconv's passes, PyTorch's on the same arrays, and their inputs."""

import math

import numpy as np

import cconv

__all__ = [
    "cconv_call",
    "import_torch",
    "make_data",
    "max_rel_err",
    "planned_algorithm",
    "torch_call",
]


def make_data(layer, n, dtype, rng):
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
    return tuple(a.astype(dtype, copy=False) for a in (x, w, gy))


def cconv_call(layer, pss, algo, x, w, gy, threads):
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
    kw = {"stride": layer.stride, "padding": layer.padding, "dilation": layer.dilation,
          "groups": layer.groups, "algo": algo, "num_threads": threads}
    if pss == "forward":
        return lambda: cconv.conv2d(x, w, **kw)
    if pss == "backward_data":
        return lambda: cconv.conv2d_backward_data(gy, w, x.shape, **kw)
    return lambda: cconv.conv2d_backward_weight(gy, x, w.shape, **kw)


def import_torch():
    """The ``torch`` module, or None when it is not installed (it is optional)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def torch_call(torch, layer, pss, x, w, gy):
    """A zero-argument callable running one PyTorch pass on the arrays of cconv.

    Parameters
    ----------
    torch : module
        The ``torch`` module.
    layer : Layer
    pss : {"forward", "backward_data", "backward_weight"}
    x, w, gy : numpy.ndarray
        Shared with PyTorch through ``torch.from_numpy``, so both read the same memory.

    Returns
    -------
    callable
        Returns a tensor.
    """
    tx, tw, tgy = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(gy)
    st, pd, dl = [layer.stride] * 2, [layer.padding] * 2, [layer.dilation] * 2
    g = layer.groups

    if pss == "forward":
        def forward():
            with torch.no_grad():
                return torch.nn.functional.conv2d(tx, tw, None, st, pd, dl, g)
        return forward

    # The gradient operator itself, rather than autograd, so that no forward pass or graph
    # bookkeeping is timed along with the gradient.
    mask = [pss == "backward_data", pss == "backward_weight", False]
    idx = 0 if pss == "backward_data" else 1
    op = torch.ops.aten.convolution_backward

    def backward():
        with torch.no_grad():
            return op(tgy, tx, tw, None, st, pd, dl, False, [0, 0], g, mask)[idx]
    return backward


def planned_algorithm(layer, n, dtype, algo):
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


def max_rel_err(a, ref):
    """Largest absolute difference of `a` from `ref`, over the largest magnitude of `ref`.

    Parameters
    ----------
    a, ref : array_like
        Result and reference; a shape mismatch gives ``inf``.

    Returns
    -------
    float
    """
    a = np.asarray(a, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if a.shape != ref.shape:
        return float("inf")
    if not ref.size:
        return 0.0
    scale = float(np.max(np.abs(ref))) or 1.0  # an all-zero reference: absolute error
    return float(np.max(np.abs(a - ref))) / scale
