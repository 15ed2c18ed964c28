"""What the SciPy front ends share: boundary extension rules and the one core call.

Both ``scipy.ndimage`` and ``scipy.signal`` filter an image whose outside is defined by a
boundary rule.  Here that image is always a stack of single-channel planes (N, 1, H, W) filtered
by one (R, S) kernel with explicit per-side padding, so it is one :func:`cconv.conv2d` call with
``padding_mode`` (a stack of volumes (N, 1, D, H, W) and a 3-D kernel: one :func:`cconv.conv3d`
call).  Where a rule asks for more padding than the core takes for that mode (a
kernel larger than the image), the axis is extended here by index arithmetic that follows
SciPy's rules, which stay periodic for any amount of padding, and the core gets no padding on
that axis.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional, Tuple

import numpy as np
import numpy.typing as npt

import cconv as _cc

from .. import _workspace
from .._convert import load_integers

__all__ = ["PADDING_MODES", "Pads", "core_max_pad", "correlate_in_strips", "correlate_planes",
           "extend_indices", "pad_axis"]

PADDING_MODES = ("zeros", "constant", "reflect", "symmetric", "replicate", "circular")

Pads = Tuple[Tuple[int, int], ...]

# The core's functions carry no annotations; typed names for the calls made here, by rank.
_conv2d: Callable[..., npt.NDArray[Any]] = _cc.conv2d
_conv3d: Callable[..., npt.NDArray[Any]] = _cc.conv3d


def extend_indices(n: int, before: int, after: int, mode: str) -> npt.NDArray[np.intp]:
    """Source index of every sample of an axis of ``n`` samples extended by a boundary rule.

    Parameters
    ----------
    n : int
        Samples on the axis; at least 1.
    before, after : int
        Samples added in front of and behind the axis; any non-negative amount.
    mode : {"reflect", "symmetric", "replicate", "circular"}
        ``"symmetric"`` repeats the edge sample (period ``2 n``), ``"reflect"`` does not
        (period ``2 n - 2``; a single sample is repeated), ``"replicate"`` repeats the edge
        sample forever, ``"circular"`` wraps around (period ``n``).

    Returns
    -------
    ndarray of intp, shape (before + n + after,)
        Entry ``i`` is the sample that extended position ``i - before`` shows.
    """
    if n < 1:
        raise ValueError(f"cannot extend an axis of {n} samples by {mode!r} boundary rules")
    j = np.arange(-before, n + after, dtype=np.intp)
    if mode == "replicate":
        return np.clip(j, 0, n - 1)
    if mode == "circular":
        return j % n
    if mode == "symmetric":
        k = j % (2 * n)
        return np.where(k < n, k, 2 * n - 1 - k)
    if mode == "reflect":
        if n == 1:
            return np.zeros_like(j)
        period = 2 * n - 2
        k = j % period
        return np.where(k < n, k, period - k)
    raise ValueError(f"no index rule for padding mode {mode!r}")


def pad_axis(x: npt.NDArray[Any], axis: int, before: int, after: int, mode: str,
             value: float = 0.0) -> npt.NDArray[Any]:
    """``x`` extended along ``axis`` by a boundary rule (a new array).

    Parameters
    ----------
    x : ndarray
    axis : int
    before, after : int
        Samples added in front of and behind the axis.
    mode : str
        One of :data:`PADDING_MODES`; ``"zeros"`` and ``"constant"`` fill with ``value``.
    value : float, optional
        The fill of ``"constant"``.

    Returns
    -------
    ndarray
    """
    if mode in ("zeros", "constant"):
        widths = [(0, 0)] * x.ndim
        widths[axis] = (before, after)
        fill = 0.0 if mode == "zeros" else value
        return np.pad(x, widths, mode="constant", constant_values=fill)
    return np.take(x, extend_indices(x.shape[axis], before, after, mode), axis=axis)


def core_max_pad(mode: str, n: int) -> Optional[int]:
    """The largest padding per side that the core takes for ``mode`` on an axis of ``n``.

    Parameters
    ----------
    mode : str
        One of :data:`PADDING_MODES`.
    n : int
        Samples on the axis.

    Returns
    -------
    int or None
        None where any amount is taken.
    """
    # The core keeps PyTorch's limits for these two (reflect padding below the size, circular
    # padding up to it); its symmetric and replicate padding take any amount.
    if n == 0:
        return 0
    if mode == "reflect":
        return n - 1
    if mode == "circular":
        return n
    return None


def correlate_planes(x: npt.NDArray[Any], kernel: npt.NDArray[Any], pads: Pads, mode: str,
                     value: float, num_threads: Optional[int],
                     out: Optional[npt.NDArray[Any]] = None) -> npt.NDArray[Any]:
    """Cross-correlate every plane (or volume) of ``x`` with ``kernel`` on the extended image.

    Parameters
    ----------
    x : ndarray, shape (N, 1, H, W) or (N, 1, D, H, W)
        float32 or float64; any strides.
    kernel : ndarray, shape (R, S) or (T, R, S)
        Same dtype as ``x``.
    pads : ((top, bottom), (left, right)), with (front, back) first for volumes
        Samples added on each side before the valid correlation.
    mode : str
        One of :data:`PADDING_MODES`.
    value : float
        The fill of ``"constant"``.
    num_threads : int or None
        Threads for the core call (None: cconv's setting).
    out : ndarray, optional
        (N, 1, H + top + bottom - R + 1, W + left + right - S + 1) of ``x``'s dtype (and the
        depth likewise for volumes); receives the result.

    Returns
    -------
    ndarray, shape (N, 1, OH, OW) or (N, 1, OD, OH, OW)
        ``out`` when given.
    """
    pad_list = [tuple(p) for p in pads]
    for i, axis in enumerate(range(2, x.ndim)):
        before, after = pad_list[i]
        limit = core_max_pad(mode, x.shape[axis])
        if limit is not None and max(before, after) > limit:
            x = pad_axis(x, axis, before, after, mode, value)
            pad_list[i] = (0, 0)
    padding = tuple(pad_list)
    if mode == "constant" and value == 0.0:
        mode = "zeros"
    kw: dict[str, Any] = {}
    if any(p != (0, 0) for p in padding) and mode != "zeros":
        kw["padding_mode"] = mode
        if mode == "constant":
            kw["padding_value"] = value
    conv = _conv3d if x.ndim == 5 else _conv2d
    return conv(x, kernel[np.newaxis, np.newaxis], padding=padding, out=out,
                num_threads=num_threads, **kw)


# Below this many elements a conversion is not worth splitting over threads.
PARALLEL_CAST_ELEMENTS = 1 << 20
# Elements per block of a split conversion: source, destination and any intermediate stay
# in the core's L2 cache.
CAST_BLOCK_ELEMENTS = 1 << 16


def assign(dst: npt.NDArray[Any], src: npt.NDArray[Any], num_threads: Optional[int],
           through: Optional[npt.DTypeLike] = None) -> None:
    """``dst[...] = src`` (``src`` converted to ``through`` first, when given), in blocks
    along the first axis long enough to split, on up to ``num_threads`` threads.

    NumPy's casts release the GIL, so the blocks convert in parallel; each block's
    intermediate (``through``) is small.  Integer (or bool) sources into float32 / float64
    go through cconv's own parallel loop instead (``load_integers``), on the OpenMP threads
    the core call then computes on.  Results are those of the whole-array assignment.  An
    invalid ``num_threads`` converts on one thread (the core call reports it).
    """
    nthreads = _cc.get_num_threads() if num_threads is None else num_threads
    valid = isinstance(nthreads, int) and not isinstance(nthreads, bool) and nthreads > 1
    if through is None and load_integers(dst, src, nthreads if valid else 1):
        return
    axis = next((i for i, n in enumerate(dst.shape) if valid and n >= 2 * nthreads), None)
    if not valid or dst.size < PARALLEL_CAST_ELEMENTS or axis is None:
        dst[...] = src if through is None else src.astype(through)
        return
    step = max(1, CAST_BLOCK_ELEMENTS * dst.shape[axis] // dst.size)
    starts = list(range(0, dst.shape[axis], step))

    def lane(first: int) -> None:  # every nthreads-th block from ``first``
        for start in starts[first::nthreads]:
            index = (slice(None),) * axis + (slice(start, start + step),)
            part = src[index]
            dst[index] = part if through is None else part.astype(through)

    list(_pool(nthreads).map(lane, range(nthreads)))


_executor: Optional[ThreadPoolExecutor] = None
_executor_workers = 0
_executor_lock = threading.Lock()


def _pool(nthreads: int) -> ThreadPoolExecutor:
    """A thread pool of at least ``nthreads`` workers, kept between calls."""
    global _executor, _executor_workers
    with _executor_lock:
        if _executor is None or _executor_workers < nthreads:
            _executor = ThreadPoolExecutor(nthreads, thread_name_prefix="cconv-cast")
            _executor_workers = nthreads
        return _executor


def _forget_pool() -> None:
    # A forked child has none of the parent's worker threads: it starts a pool of its own.
    global _executor, _executor_workers, _executor_lock
    _executor, _executor_workers, _executor_lock = None, 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def cast(src: npt.NDArray[Any], dtype: npt.DTypeLike,
         num_threads: Optional[int]) -> npt.NDArray[Any]:
    """``src.astype(dtype, copy=False)``, converted in parallel blocks (:func:`assign`)."""
    if src.dtype == dtype:
        return src
    dst = np.empty(src.shape, dtype)
    assign(dst, src, num_threads)
    return dst


# A conversion (integer image, float64 sums) goes through strips of at most this many
# output elements: the converted input and the sums are then strip-sized buffers used
# again for every strip, where whole-image ones would be fresh memory, which the kernel
# zeroes page by page on first touch.  A 4096x4096 uint16 image, 5x5 kernel, 2 threads
# (AMD EPYC Zen 4, AVX-512): 45% of the whole-image call was that zeroing.  Small enough
# that a strip's sums are still in cache when they are converted: the same image on an
# AMD EPYC Zen 5 (AVX-512), strips of 2^18 / 2^19 / 2^20 / 2^21 elements, medians of
# 1-second loops: 19-32 / 17.5-18.0 / 20.2-21.2 / 26.0 ms on 2 threads, 29-30 / 28.4 /
# 30-31 / 34.7 ms on 1 (smaller strips pay more per-strip overhead).
STRIP_ELEMENTS = 1 << 19


def _extended_rows(n: int, before: int, after: int, mode: str) -> npt.NDArray[np.intp]:
    """The source row of every row of an axis extended by ``mode`` (-1: the fill value)."""
    if mode in ("zeros", "constant"):
        j = np.arange(-before, n + after, dtype=np.intp)
        j[(j < 0) | (j >= n)] = -1
        return j
    return extend_indices(n, before, after, mode)


def correlate_in_strips(x: npt.NDArray[Any], kernel: npt.NDArray[Any], pads: Pads, mode: str,
                        value: float, dtype: npt.DTypeLike, store: Callable[..., None],
                        num_threads: Optional[int]) -> bool:
    """:func:`correlate_planes` of ``x`` converted to ``dtype``, strip by strip of output rows.

    Each strip's input rows (its halo, and the padding rows ``mode`` builds above the first
    and below the last row, taken by index) are converted into one reused buffer and
    correlated with no vertical padding; ``store(first_row, sums)`` receives each strip's
    sums, ``(N, 1, rows, OW)`` of ``dtype``, valid until the next call.

    Parameters
    ----------
    x : ndarray, shape (N, 1, H, W)
        Any dtype NumPy converts to ``dtype``; any strides.
    kernel : ndarray, shape (R, S) of ``dtype``
    pads, mode, value, num_threads
        As for :func:`correlate_planes`.
    dtype : float32 or float64
    store : callable

    Returns
    -------
    bool
        False, having done nothing, where strips do not pay (an image of fewer than two
        strips) or are not built (volumes).
    """
    if x.ndim != 4:
        return False
    N, _, H, W = x.shape
    R, S = kernel.shape
    (top, bottom), horizontal = pads
    OH = H + top + bottom - R + 1
    OW = W + horizontal[0] + horizontal[1] - S + 1
    rows = max(1, STRIP_ELEMENTS // max(1, N * OW))
    if OH < 2 * rows or OW <= 0:
        return False
    source = _extended_rows(H, top, bottom, mode)
    # The strip buffers come from the workspace pool: kept between calls, their pages are
    # not faulted (and zeroed by the kernel) again on every call.
    with _workspace.scope() as ws:
        in_flat = ws.empty(N * (rows + R - 1) * W, dtype)
        out_flat = ws.empty(N * rows * OW, dtype)
        for first in range(0, OH, rows):
            n = min(rows, OH - first)
            # (the last strip takes the front of each buffer: contiguous, as the core wants)
            in_buf = in_flat[:N * (n + R - 1) * W].reshape(N, 1, n + R - 1, W)
            out_buf = out_flat[:N * n * OW].reshape(N, 1, n, OW)
            _fill_strip(in_buf, x, source[first:first + n + R - 1], first - top, value,
                        num_threads)
            store(first, correlate_planes(in_buf, kernel, ((0, 0), horizontal), mode, value,
                                          num_threads, out=out_buf))
    return True


def _fill_strip(buf: npt.NDArray[Any], x: npt.NDArray[Any], index: npt.NDArray[np.intp],
                offset: int, value: float, num_threads: Optional[int]) -> None:
    """``buf``'s rows = ``x``'s rows ``index`` (-1: ``value``), converted.  Buffer row ``i``
    holds image row ``offset + i`` where that lies in the image (one run, converted in
    parallel blocks); the rows the padding adds (by ``index``) are copied one by one.
    (A strip with padding rows was converted whole through NumPy's fancy indexing: ~6 ms
    of a 4096x4096 uint16 image's ~65 on 1 thread, where the block conversion takes ~3.)"""
    H, rows = x.shape[2], len(index)
    lo = min(max(-offset, 0), rows)
    hi = max(min(H - offset, rows), lo)
    if hi > lo:
        assign(buf[:, :, lo:hi], x[:, :, offset + lo:offset + hi], num_threads)
    for row in (*range(lo), *range(hi, rows)):
        buf[:, :, row] = value if index[row] < 0 else x[:, :, int(index[row])]
