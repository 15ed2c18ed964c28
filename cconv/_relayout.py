"""Layout conversions between channels-last and channel planes, on cconv's threads.

Most kernels read and write contiguous channel planes (NCHW) and OIHW weights.  A channels-
last call (NHWC activations, HWIO weights) converts where its algorithm has no kernel for
its layout.  NumPy's copy of a transposed view reads the source a whole row apart per
element, on one thread: 15 ms for an 8x56x56x256 float32 activation (a plain copy: 1.3-2.2
ms) and 9 ms for a 3x3x512x512 weight.  The compiled transposes here
(``_kernels/_relayout.pyx.tp``: register-transposed vector blocks, whole-vector loads and
stores) take 4.1 and 3.5 ms on one thread, 2.7 ms for the activation on two (AMD EPYC Zen
4, AVX-512).  Small arrays keep NumPy's copy: a call into the kernel costs more than it saves
below ``MIN_ELEMENTS``.  A converted activation is a temporary: its memory comes through
``_workspace.empty_result``, whose cache serves the next call's copy from memory already
mapped (a fresh 51 MB copy spent a fifth of an NHWC weight-gradient call zeroing pages), and
so do the weight conversions' buffers (a 9 MB weight's two: 7.5% of a res5 forward).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from . import _workspace
from ._simd import relayout as kernels

Array = npt.NDArray[Any]

# Below this many elements NumPy's copy is as fast (and one call cheaper).
MIN_ELEMENTS = 1 << 14
# Elements per thread below which a conversion runs on fewer threads: a parallel region
# costs more than it saves on less.
ELEMENTS_PER_THREAD = 1 << 16
_NATIVE = (np.dtype(np.float32), np.dtype(np.float64))


def _threads(size: int, nthreads: int) -> int:
    return max(1, min(nthreads, size // ELEMENTS_PER_THREAD))


def _compiled(a: Array) -> bool:
    return a.dtype in _NATIVE and a.size >= MIN_ELEMENTS


def contiguous(view: Array, nthreads: int) -> Array:
    """A C-contiguous copy of a logical ``(N, C, *spatial)`` view (or the view itself when it
    is one), transposed by the compiled kernel when the view's memory is channels-last.

    Parameters
    ----------
    view : numpy.ndarray
        A logical channels-first view, such as ``cconv._execute.nchw`` makes of an NHWC array.
    nthreads : int

    Returns
    -------
    numpy.ndarray
    """
    if view.flags.c_contiguous:
        return view
    order = (0, *range(2, view.ndim), 1)
    if not _compiled(view) or not view.transpose(order).flags.c_contiguous:
        return np.ascontiguousarray(view)
    n, c = view.shape[:2]
    out = _workspace.empty_result(view.shape, view.dtype)
    kernels.transpose(view.transpose(order).reshape(n, -1, c), out.reshape(n, c, -1), 1.0, 0.0,
                      _threads(view.size, nthreads))
    return out


def store(dst: Array, result: Array, alpha: float, beta: float, nthreads: int) -> bool:
    """``dst[...] = alpha * result + beta * dst`` for a channels-last ``dst`` seen as a
    logical ``(N, C, *spatial)`` view and a C-contiguous ``result`` of its shape and dtype;
    False (nothing done) when the compiled kernel does not apply.

    Parameters
    ----------
    dst, result : numpy.ndarray
    alpha, beta : float
    nthreads : int

    Returns
    -------
    bool
    """
    order = (0, *range(2, dst.ndim), 1)
    if (not _compiled(dst) or result.dtype != dst.dtype or result.shape != dst.shape
            or not result.flags.c_contiguous or not dst.transpose(order).flags.c_contiguous):
        return False
    n, c = dst.shape[:2]
    kernels.transpose(result.reshape(n, c, -1), dst.transpose(order).reshape(n, -1, c), alpha,
                      beta, _threads(dst.size, nthreads))
    return True


def weight_channels_first(weight: Array, nthreads: int) -> Array:
    """A C-contiguous ``(K, C, *spatial)`` copy of a ``(*spatial, C, K)`` weight (HWIO to
    OIHW, WIO to OIW, DHWIO to OIDHW).

    Two compiled transposes where the weight is large: ``(C, K)`` to ``(K, C)`` per
    spatial tap, then the taps swapped with the ``K * C`` pairs.

    Parameters
    ----------
    weight : numpy.ndarray
        Two or more axes, any strides.
    nthreads : int

    Returns
    -------
    numpy.ndarray
    """
    *spatial, c, k = weight.shape
    order = (weight.ndim - 1, weight.ndim - 2, *range(weight.ndim - 2))
    if not _compiled(weight) or not weight.flags.c_contiguous:
        return np.ascontiguousarray(weight.transpose(order))
    taps = weight.size // (c * k)
    threads = _threads(weight.size, nthreads)
    per_tap = _workspace.empty_result((taps, k, c), weight.dtype)
    kernels.transpose(weight.reshape(taps, c, k), per_tap, 1.0, 0.0, threads)
    out = _workspace.empty_result((k, c, *spatial), weight.dtype)
    kernels.transpose(per_tap.reshape(1, taps, k * c), out.reshape(1, k * c, taps), 1.0, 0.0,
                      threads)
    return out


def weight_channels_last(weight: Array, nthreads: int) -> Array:
    """The inverse of :func:`weight_channels_first`: a C-contiguous ``(*spatial, C, K)``
    copy of a ``(K, C, *spatial)`` weight (an OIHW gradient as HWIO).

    Parameters
    ----------
    weight : numpy.ndarray
        Two or more axes, any strides.
    nthreads : int

    Returns
    -------
    numpy.ndarray
    """
    k, c, *spatial = weight.shape
    order = (*range(2, weight.ndim), 1, 0)
    if not _compiled(weight) or not weight.flags.c_contiguous:
        return np.ascontiguousarray(weight.transpose(order))
    taps = weight.size // (c * k)
    threads = _threads(weight.size, nthreads)
    per_tap = _workspace.empty_result((taps, k, c), weight.dtype)
    kernels.transpose(weight.reshape(1, k * c, taps), per_tap.reshape(1, taps, k * c), 1.0,
                      0.0, threads)
    out = _workspace.empty_result((*spatial, c, k), weight.dtype)
    kernels.transpose(per_tap, out.reshape(taps, c, k), 1.0, 0.0, threads)
    return out
