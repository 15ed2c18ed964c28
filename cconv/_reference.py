"""A plain float64 NumPy reference for 2-D convolution, for ``cconv check``.

It shares nothing with the kernels or with the argument handling of :mod:`cconv._geometry`:
padding strings, output sizes and padding modes are worked out here again from their
definitions, and every pass is one explicit loop over the kernel taps with an ``einsum`` per
tap, written for obviousness rather than speed.  The gradients are written on their own (a
scatter per tap, then the padding folded back onto the pixels it copies), never through the
forward pass, so a mistake shared by the library's passes cannot hide behind the same mistake
here.

Conventions: NCHW activations, OIHW weights ``(K, C // groups, R, S)``, ``pads`` as
``((top, bottom), (left, right))``.  Padding modes follow :func:`numpy.pad`: ``"zeros"``
and ``"constant"`` (with ``value``) add that value, ``"reflect"`` mirrors without repeating
the edge, ``"symmetric"`` repeats it, ``"replicate"`` is ``numpy.pad``'s ``"edge"`` and
``"circular"`` its ``"wrap"``.
"""

from __future__ import annotations

from typing import Tuple, Union

import numpy as np
import numpy.typing as npt

__all__ = ["Pads", "backward_data", "backward_weight", "forward", "output_size",
           "resolve_padding"]

Pads = Tuple[Tuple[int, int], Tuple[int, int]]
Padding = Union[int, str, Tuple[int, int], Pads]
F64 = npt.NDArray[np.float64]

_NUMPY_MODES = {"reflect": "reflect", "symmetric": "symmetric", "replicate": "edge",
                "circular": "wrap"}


def _same_pads(size: int, kernel: int, stride: int, dilation: int, lower: bool) -> Tuple[int, int]:
    # TensorFlow's SAME: ceil(size / stride) outputs; an odd leftover pixel goes at the end
    # ("same") or at the start ("same_lower").
    outputs = -(-size // stride)
    total = max(0, (outputs - 1) * stride + dilation * (kernel - 1) + 1 - size)
    half = total // 2
    return (total - half, half) if lower else (half, total - half)


def resolve_padding(padding: Padding, in_hw: Tuple[int, int], kernel_hw: Tuple[int, int],
                    stride: Tuple[int, int], dilation: Tuple[int, int]) -> Pads:
    """Any padding form as ``((top, bottom), (left, right))``.

    Parameters
    ----------
    padding : int, (int, int), ((int, int), (int, int)) or str
        ``"valid"``, ``"same"`` (= ``"same_upper"``), ``"same_lower"`` or ``"full"``
        (``dilation * (kernel - 1)`` on each side).
    in_hw, kernel_hw, stride, dilation : (int, int)
        Input size, kernel size, stride and dilation along (H, W).

    Returns
    -------
    ((int, int), (int, int))
    """
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0), (0, 0))
        if padding == "full":
            ph, pw = (dilation[i] * (kernel_hw[i] - 1) for i in range(2))
            return ((ph, ph), (pw, pw))
        lower = padding == "same_lower"
        top_bottom, left_right = (_same_pads(in_hw[i], kernel_hw[i], stride[i], dilation[i],
                                             lower) for i in range(2))
        return (top_bottom, left_right)
    if isinstance(padding, int):
        return ((padding, padding), (padding, padding))
    first, second = padding
    if isinstance(first, int) and isinstance(second, int):
        return ((first, first), (second, second))
    assert not isinstance(first, int) and not isinstance(second, int)
    return ((int(first[0]), int(first[1])), (int(second[0]), int(second[1])))


def output_size(size: int, kernel: int, stride: int, dilation: int, before: int,
                after: int) -> int:
    """Output length along one axis: ``(size + pads - dilation*(kernel-1) - 1) // stride + 1``.

    Parameters
    ----------
    size, kernel, stride, dilation, before, after : int

    Returns
    -------
    int
    """
    return (size + before + after - dilation * (kernel - 1) - 1) // stride + 1


def _sources(size: int, before: int, after: int, mode: str) -> npt.NDArray[np.intp]:
    """For each position of the padded axis, the input position it copies (-1: a constant)."""
    index = np.arange(size)
    if mode in _NUMPY_MODES:
        return np.pad(index, (before, after), mode=_NUMPY_MODES[mode])  # type: ignore[call-overload,no-any-return]
    return np.concatenate([np.full(before, -1), index, np.full(after, -1)])


def _pad(x: F64, pads: Pads, mode: str, value: float) -> F64:
    rows = _sources(x.shape[2], *pads[0], mode)
    cols = _sources(x.shape[3], *pads[1], mode)
    padded = x[:, :, np.maximum(rows, 0)][:, :, :, np.maximum(cols, 0)]
    fill = value if mode == "constant" else 0.0
    padded[:, :, rows < 0, :] = fill
    padded[:, :, :, cols < 0] = fill
    return padded


def _fold(grad_padded: F64, shape: Tuple[int, ...], pads: Pads, mode: str) -> F64:
    """The adjoint of :func:`_pad`: each padded pixel's gradient added onto its source."""
    rows = _sources(shape[2], *pads[0], mode)
    cols = _sources(shape[3], *pads[1], mode)
    # Rows, then columns, each moved to the front so that one index array addresses them.
    by_row = np.zeros((shape[2], shape[0], shape[1], grad_padded.shape[3]))
    np.add.at(by_row, rows[rows >= 0], grad_padded.transpose(2, 0, 1, 3)[rows >= 0])
    out = np.zeros((shape[3], shape[2], shape[0], shape[1]))
    np.add.at(out, cols[cols >= 0], by_row.transpose(3, 0, 1, 2)[cols >= 0])
    return out.transpose(2, 3, 1, 0)


def _window(r: int, s: int, out_hw: Tuple[int, int], stride: Tuple[int, int],
            dilation: Tuple[int, int]) -> Tuple[slice, slice]:
    """The rows and columns of the padded input that tap (r, s) reads for every output."""
    rows = slice(r * dilation[0], r * dilation[0] + (out_hw[0] - 1) * stride[0] + 1, stride[0])
    cols = slice(s * dilation[1], s * dilation[1] + (out_hw[1] - 1) * stride[1] + 1, stride[1])
    return rows, cols


def _grouped(a: F64, groups: int) -> F64:
    """(N, C, ...) -> (N, groups, C // groups, ...)."""
    return a.reshape(a.shape[0], groups, a.shape[1] // groups, *a.shape[2:])


def forward(x: npt.ArrayLike, w: npt.ArrayLike, *, stride: Tuple[int, int], pads: Pads,
            dilation: Tuple[int, int], groups: int, mode: str = "zeros",
            value: float = 0.0) -> F64:
    """The convolution (cross-correlation, as in deep learning) of NCHW ``x`` with OIHW ``w``.

    Parameters
    ----------
    x : array_like, (N, C, H, W)
    w : array_like, (K, C // groups, R, S)
    stride, dilation : (int, int)
    pads : ((int, int), (int, int))
    groups : int
    mode : str, optional
        Padding mode (see the module docstring); default zeros.
    value : float, optional
        The padding value of ``mode="constant"``.

    Returns
    -------
    ndarray of float64, (N, K, OH, OW)
    """
    xp = _pad(np.asarray(x, np.float64), pads, mode, value)
    wt = np.asarray(w, np.float64)
    K, _, R, S = wt.shape
    N = xp.shape[0]
    out_hw = (output_size(xp.shape[2], R, stride[0], dilation[0], 0, 0),
              output_size(xp.shape[3], S, stride[1], dilation[1], 0, 0))
    xg = _grouped(xp, groups)
    wg = wt.reshape(groups, K // groups, *wt.shape[1:])
    y = np.zeros((N, groups, K // groups, *out_hw))
    for r in range(R):
        for s in range(S):
            rows, cols = _window(r, s, out_hw, stride, dilation)
            y += np.einsum("ngchw,gkc->ngkhw", xg[:, :, :, rows, cols], wg[:, :, :, r, s])
    return y.reshape(N, K, *out_hw)


def backward_data(dy: npt.ArrayLike, w: npt.ArrayLike, x_shape: Tuple[int, ...], *,
                  stride: Tuple[int, int], pads: Pads, dilation: Tuple[int, int], groups: int,
                  mode: str = "zeros") -> F64:
    """The gradient of :func:`forward` with respect to ``x``.

    Parameters
    ----------
    dy : array_like, (N, K, OH, OW)
        Gradient of the forward result.
    w : array_like, (K, C // groups, R, S)
    x_shape : (int, int, int, int)
        The input's shape (N, C, H, W).
    stride, pads, dilation, groups, mode
        As in :func:`forward` (a constant padding value has no gradient).

    Returns
    -------
    ndarray of float64, ``x_shape``
    """
    g = np.asarray(dy, np.float64)
    wt = np.asarray(w, np.float64)
    K, _, R, S = wt.shape
    N, C, H, W = x_shape
    padded = np.zeros((N, C, H + sum(pads[0]), W + sum(pads[1])))
    pg = _grouped(padded, groups)  # a view: the scatter below writes `padded`
    gg = _grouped(g, groups)
    wg = wt.reshape(groups, K // groups, *wt.shape[1:])
    out_hw = (g.shape[2], g.shape[3])
    for r in range(R):
        for s in range(S):
            rows, cols = _window(r, s, out_hw, stride, dilation)
            pg[:, :, :, rows, cols] += np.einsum("ngkhw,gkc->ngchw", gg, wg[:, :, :, r, s])
    return _fold(padded, (N, C, H, W), pads, mode)


def backward_weight(dy: npt.ArrayLike, x: npt.ArrayLike, w_shape: Tuple[int, ...], *,
                    stride: Tuple[int, int], pads: Pads, dilation: Tuple[int, int], groups: int,
                    mode: str = "zeros", value: float = 0.0) -> F64:
    """The gradient of :func:`forward` with respect to ``w``.

    Parameters
    ----------
    dy : array_like, (N, K, OH, OW)
        Gradient of the forward result.
    x : array_like, (N, C, H, W)
        The forward input.
    w_shape : (int, int, int, int)
        The weight's shape (K, C // groups, R, S).
    stride, pads, dilation, groups, mode, value
        As in :func:`forward`.

    Returns
    -------
    ndarray of float64, ``w_shape``
    """
    g = np.asarray(dy, np.float64)
    xp = _pad(np.asarray(x, np.float64), pads, mode, value)
    K, Cg, R, S = w_shape
    xg = _grouped(xp, groups)
    gg = _grouped(g, groups)
    out_hw = (g.shape[2], g.shape[3])
    dw = np.zeros((groups, K // groups, Cg, R, S))
    for r in range(R):
        for s in range(S):
            rows, cols = _window(r, s, out_hw, stride, dilation)
            dw[:, :, :, r, s] = np.einsum("ngkhw,ngchw->gkc", gg, xg[:, :, :, rows, cols])
    return dw.reshape(K, Cg, R, S)
