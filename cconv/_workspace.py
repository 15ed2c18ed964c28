"""Scratch buffers kept between calls.

A fresh multi-megabyte ``numpy.empty`` is served by ``mmap``, so every call pays a page
fault per 4 KiB page and the kernel zeroes each page before the convolution touches it
(measured: ~9% of a Winograd backward-weight call on resnet50 res4).  Winograd and direct
calls take their packed operands and scratch from a small pool and give them back when done,
as does the data gradient of a padding mode for the padded input's gradient it folds (the
GEMM algorithm allocates its buffers with NumPy).

The pool is shared by all threads (a lock guards it; each call owns the buffers it took)
and holds at most ``LIMIT_BYTES`` (256 MiB, or ``CCONV_WORKSPACE_MB`` from the environment;
0 disables pooling): buffers that would exceed it are simply dropped.  Only internal
buffers go through it, never an array returned to the caller.  A forked child starts with
an empty pool and a fresh lock.

Results are the other fresh memory of a call.  Those of 1 MiB and more
(:func:`empty_result`) are allocated through a NumPy memory handler
(``cconv._kernels._results``, :func:`results`) that keeps the memory of freed results of
1 MiB and more, at most ``RESULT_LIMIT_BYTES`` (256 MiB, or
``CCONV_RESULT_CACHE_MB``; 0 disables it), and serves the next result of the same size from
it: a loop that filters image after image, or trains, frees a result before it asks for the
next.  Measured: a 4096x4096 float32 image filtered 5x5 on 2 threads (AMD EPYC Zen 5,
AVX-512) took 8.1-8.4 ms into fresh memory, 5.8-5.9 ms into memory written before.  A
result the caller keeps is never touched again; its memory is freed or kept when NumPy frees
the array.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from typing import Any, Iterator, List

import numpy as np
import numpy.typing as npt

from ._kernels import _results


def _limit_from_env(name: str) -> int:
    value = os.environ.get(name, "").strip()
    try:
        return max(0, int(value)) * 1024 * 1024 if value else 256 * 1024 * 1024
    except ValueError:
        return 256 * 1024 * 1024


LIMIT_BYTES = _limit_from_env("CCONV_WORKSPACE_MB")
RESULT_LIMIT_BYTES = _limit_from_env("CCONV_RESULT_CACHE_MB")
_results.set_limit(RESULT_LIMIT_BYTES)

# Where pooled buffers, prepared weights and results start: a whole cache line, so that a
# full-width AVX-512 load or store at the start of a vector-aligned row never splits across
# two lines (NumPy's allocator aligns to 16 bytes).  The result handler aligns to the same
# ``_results.ALIGN_BYTES``.
ALIGN_BYTES = _results.ALIGN_BYTES

_lock = threading.Lock()
_free: dict[int, list[npt.NDArray[np.uint8]]] = {}
_pooled_bytes = 0


def _aligned_view(raw: npt.NDArray[np.uint8], dtype: np.dtype[Any],
                  size: int) -> npt.NDArray[Any]:
    # raw holds ALIGN_BYTES more than size elements: skip to the first aligned byte
    skip = -raw.ctypes.data % ALIGN_BYTES
    return raw[skip:skip + size * dtype.itemsize].view(dtype)


def aligned_empty(shape: Any, dtype: npt.DTypeLike) -> npt.NDArray[Any]:
    """``numpy.empty(shape, dtype)`` starting on an ``ALIGN_BYTES`` boundary (NumPy's
    allocator aligns to 16 bytes): for the operands a kernel prepares once and reads on
    every call, such as tap-major weights.

    Parameters
    ----------
    shape : int or tuple of int
    dtype : data-type

    Returns
    -------
    ndarray
        C-contiguous, uninitialised, a view into a slightly larger buffer.
    """
    dtype = np.dtype(dtype)
    size = math.prod(shape) if isinstance(shape, tuple) else int(shape)
    raw = np.empty(max(1, size) * dtype.itemsize + ALIGN_BYTES, np.uint8)
    return _aligned_view(raw, dtype, size).reshape(shape)


def _take(nbytes: int) -> npt.NDArray[np.uint8]:
    global _pooled_bytes
    with _lock:
        stack = _free.get(nbytes)
        if stack:
            _pooled_bytes -= nbytes
            return stack.pop()
    return np.empty(nbytes, np.uint8)


def _give(raw: npt.NDArray[np.uint8]) -> None:
    global _pooled_bytes
    with _lock:
        if _pooled_bytes + raw.nbytes <= LIMIT_BYTES:
            _free.setdefault(raw.nbytes, []).append(raw)
            _pooled_bytes += raw.nbytes


def _after_fork() -> None:
    global _lock, _free, _pooled_bytes
    _lock = threading.Lock()
    _free = {}
    _pooled_bytes = 0
    _results.after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def clear() -> None:
    """Drop every pooled buffer and every kept result block (their memory returns to the
    allocator)."""
    global _pooled_bytes
    with _lock:
        _free.clear()
        _pooled_bytes = 0
    _results.clear()


def pooled_bytes() -> int:
    """Bytes currently held by the pool."""
    return _pooled_bytes


class _Scope:
    def __init__(self) -> None:
        self._taken: List[npt.NDArray[np.uint8]] = []

    def empty(self, size: int, dtype: npt.DTypeLike) -> npt.NDArray[Any]:
        """An uninitialised 1-D array of ``size`` elements of ``dtype``, valid in the scope,
        starting on an ``ALIGN_BYTES`` boundary."""
        dtype = np.dtype(dtype)
        raw = _take(max(1, int(size)) * dtype.itemsize + ALIGN_BYTES)
        self._taken.append(raw)
        return _aligned_view(raw, dtype, size)

    def release(self) -> None:
        """Give the scope's buffers back to the pool (none of them may be used after)."""
        for raw in self._taken:
            _give(raw)
        self._taken = []


@contextlib.contextmanager
def scope() -> Iterator[_Scope]:
    """``with scope() as ws: buf = ws.empty(n, dtype)``; buffers return to the pool on exit."""
    s = _Scope()
    try:
        yield s
    finally:
        s.release()


@contextlib.contextmanager
def results() -> Iterator[None]:
    """Allocate the arrays of the block through the result handler (see the module
    docstring): ``with results(): y = np.empty(shape, dtype)``.  ``numpy.zeros`` in the
    block still gets fresh, zeroed memory."""
    previous = _results.install()
    try:
        yield
    finally:
        _results.restore(previous)


def empty_result(shape: Any, dtype: npt.DTypeLike) -> npt.NDArray[Any]:
    """``numpy.empty(shape, dtype)`` for a result: through the result handler when it is
    large enough to be kept (installing the handler costs ~1 us, a tenth of a tiny call)."""
    if not isinstance(dtype, np.dtype):
        dtype = np.dtype(dtype)
    if math.prod(shape) * dtype.itemsize < _results.MIN_BYTES:
        return np.empty(shape, dtype)
    with results():
        return np.empty(shape, dtype)


def kept_result_bytes() -> int:
    """Bytes of freed results kept for the next call."""
    return int(_results.held_bytes())
