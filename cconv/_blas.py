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

_lock = threading.Lock()
_libraries = None
_executor = None


def _blas_libraries():
    global _libraries
    with _lock:
        if _libraries is None:
            from threadpoolctl import ThreadpoolController

            _libraries = list(ThreadpoolController().select(user_api="blas").lib_controllers)
    return _libraries


@contextmanager
def threads(n):
    """Run the block with every loaded BLAS library limited to ``n`` threads."""
    libraries = _blas_libraries()
    previous = [lib.get_num_threads() for lib in libraries]
    for lib, count in zip(libraries, previous):
        if count != n:
            lib.set_num_threads(n)
    try:
        yield
    finally:
        for lib, count in zip(libraries, previous):
            if count != n:
                lib.set_num_threads(count)


def ordered_sum(pieces, product, nthreads):
    """``sum(product(p) for p in pieces)``, added in the order of ``pieces``.

    Each product runs on a single BLAS thread (a threaded BLAS may split a long reduction
    differently for another thread count), and up to ``nthreads`` of them run at once in
    Python threads (NumPy releases the GIL in ``matmul``).  The pieces depend on the shape
    only, so the result is the same at any thread count.
    """
    global _executor
    pieces = list(pieces)
    with threads(1):
        if nthreads == 1 or len(pieces) == 1:
            parts = [product(p) for p in pieces]
        else:
            with _lock:
                if _executor is None:
                    _executor = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2),
                                                   thread_name_prefix="cconv-blas")
            lanes = [pieces[i::nthreads] for i in range(min(nthreads, len(pieces)))]
            done = list(_executor.map(lambda lane: [product(p) for p in lane], lanes))
            parts = [None] * len(pieces)
            for i, lane_parts in enumerate(done):
                parts[i::len(lanes)] = lane_parts
    total = parts[0].copy()
    for part in parts[1:]:
        total += part
    return total
