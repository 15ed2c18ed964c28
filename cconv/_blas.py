"""NumPy's BLAS with the thread count of a cconv call.

The GEMM algorithm multiplies with ``numpy.matmul``, whose BLAS (OpenBLAS, MKL, ...) keeps its
own thread pool.  Each call sets that pool to the call's thread count and restores it
afterwards, so ``num_threads``, :func:`cconv.set_num_threads` and
``threadpoolctl.threadpool_limits`` govern BLAS as they govern the OpenMP kernels, and the two
pools never run full teams at the same time (cconv's kernels are idle while BLAS runs).
Setting the count is a direct library call (about a microsecond); the libraries are found
once, on first use.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, List, Optional, TypeVar

import numpy.typing as npt

T = TypeVar("T")

_lock = threading.Lock()
# threadpoolctl's library controllers (threadpoolctl ships no type information).
_libraries: Optional[List[Any]] = None
_executor: Optional[ThreadPoolExecutor] = None


def _blas_libraries() -> List[Any]:
    global _libraries
    with _lock:
        if _libraries is None:
            from threadpoolctl import ThreadpoolController

            _libraries = list(ThreadpoolController().select(user_api="blas").lib_controllers)
    return _libraries


# Blocks running under ``threads`` now, across every Python thread, and the counts the
# libraries had before the first of them (restored when the last one leaves).
_depth = 0
_saved_counts: List[int] = []


@contextmanager
def threads(n: int) -> Iterator[None]:
    """Run the block with every loaded BLAS library limited to ``n`` threads.

    Blocks may overlap across Python threads and nest: each sets ``n`` on entering, and the
    last to leave restores the count the libraries had before the first entered (a
    per-block save and restore would leave a wrong count behind when two calls from two
    threads interleave).  cconv itself asks for ``n = 1`` only: its own Python threads run
    the single-threaded BLAS pieces (:func:`map_pieces`).
    """
    global _depth, _saved_counts
    libraries = _blas_libraries()
    with _lock:
        if _depth == 0:
            _saved_counts = [lib.get_num_threads() for lib in libraries]
        _depth += 1
        for lib in libraries:
            if lib.get_num_threads() != n:
                lib.set_num_threads(n)
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for lib, count in zip(libraries, _saved_counts):
                    if lib.get_num_threads() != count:
                        lib.set_num_threads(count)


def _pool() -> ThreadPoolExecutor:
    global _executor
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2),
                                           thread_name_prefix="cconv-blas")
        return _executor


def _forget_pool() -> None:
    # A forked child has none of the parent's worker threads (a pool inherited from the
    # parent would queue work forever): it starts a pool of its own.
    global _executor, _lock
    _executor, _lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def map_pieces(pieces: Iterable[T], work: Callable[[T], Any], nthreads: int) -> List[Any]:
    """``[work(p) for p in pieces]``, each on a single BLAS thread, up to ``nthreads`` at
    once in Python threads (NumPy releases the GIL in ``matmul``); results in order.

    With pieces fixed by the shape, results do not depend on ``nthreads``: every piece is
    computed by the same single-threaded BLAS call whichever thread runs it.
    """
    pieces = list(pieces)
    results: List[Any] = [None] * len(pieces)
    with threads(1):
        if nthreads == 1 or len(pieces) <= 1:
            return [work(p) for p in pieces]
        # Each worker takes the next piece as it finishes one (pieces of unequal size, or
        # a worker descheduled by the OS, would leave a fixed split waiting on one lane).
        order = iter(range(len(pieces)))
        take = threading.Lock()

        def lane() -> None:
            while True:
                with take:
                    i = next(order, None)
                if i is None:
                    return
                results[i] = work(pieces[i])

        lanes = [_pool().submit(lane) for _ in range(min(nthreads, len(pieces)))]
        for future in lanes:
            future.result()  # re-raises a piece's exception
    return results


def ordered_sum(pieces: Iterable[T], product: Callable[[T], npt.NDArray[Any]],
                nthreads: int) -> npt.NDArray[Any]:
    """``sum(product(p) for p in pieces)``, added in the order of ``pieces``.

    Each product runs on a single BLAS thread (a threaded BLAS may split a long reduction
    differently for another thread count), up to ``nthreads`` at once (:func:`map_pieces`).
    The pieces depend on the shape only, so the result is the same at any thread count.
    """
    parts: List[npt.NDArray[Any]] = map_pieces(pieces, product, nthreads)
    total = parts[0].copy()
    for part in parts[1:]:
        total += part
    return total
