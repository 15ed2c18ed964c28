"""The machine's ceilings, measured in the benchmark's own run: float32 GEMM throughput and
memory bandwidth.

A third figure, the FMA peak, is the multiply-add throughput of cconv's own SIMD level with
no memory traffic at all: the ceiling no kernel passes.  It can lie far above the GEMM peak
when NumPy's BLAS does not use the widest vectors the CPU has (OpenBLAS runs its AVX2
kernels on an AMD Zen 5, whose AVX-512 units do twice the work: 124 against 260 GFLOP/s per
core measured).

A convolution's GFLOP/s means little alone: the same figure is near the limit on a laptop
and a third of it on a server.  The layer suite therefore measures, beside the layers and
with the same thread count, what the machine can do at best on compute-bound work (a large
float32 matrix product in NumPy's BLAS) and on memory-bound work (a STREAM-like copy), and
reports each layer as a share of the ceiling that bounds it.
"""

from __future__ import annotations

import importlib
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict

import numpy as np

__all__ = ["copy_bandwidth", "fma_peak", "gemm_peak"]


def _median_seconds(call: Callable[[], Any], repeats: int) -> float:
    """Median wall time of `repeats` timed calls (at least one), after one untimed call."""
    call()
    times = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return float(statistics.median(times))


def gemm_peak(n: int = 2048, repeats: int = 5, threads: int = 1) -> Dict[str, Any]:
    """float32 GEMM throughput of NumPy's BLAS on `threads` threads.

    Parameters
    ----------
    n : int, optional
        Size of the square matrices (2048: large enough for a BLAS to reach its peak,
        small enough to take well under a second).
    repeats : int, optional
        Timed products (after one untimed); the median is reported.
    threads : int, optional
        BLAS threads, set with ``threadpoolctl.threadpool_limits`` for the measurement only.

    Returns
    -------
    dict
        ``n``, ``threads``, ``median_s``, ``gflops`` (``2 n**3`` over the median).
    """
    threadpool_limits = importlib.import_module("threadpoolctl").threadpool_limits
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), np.float32)
    with threadpool_limits(limits=int(threads), user_api="blas"):
        med = _median_seconds(lambda: np.matmul(a, b, out=c), repeats)
    return {"n": n, "threads": int(threads), "median_s": med, "gflops": 2.0 * n**3 / med / 1e9}


def copy_bandwidth(nbytes: int = 256 << 20, repeats: int = 5,
                   threads: int = 1) -> Dict[str, Any]:
    """Memory bandwidth of a STREAM-like copy of `nbytes` on `threads` threads.

    The source is split into one contiguous slice per thread, each copied by
    :func:`numpy.copyto` in a worker thread (NumPy releases the GIL while it copies), so
    that `threads` cores stream at once.  As in STREAM's "Copy", every element counts twice
    (one read, one write); the arrays are far larger than the caches.

    Parameters
    ----------
    nbytes : int, optional
        Size of the source (and of the destination) in bytes.
    repeats : int, optional
        Timed copies (after one untimed, which also faults the destination's pages in).
    threads : int, optional

    Returns
    -------
    dict
        ``bytes`` (moved per copy, ``2 * nbytes``), ``threads``, ``median_s`` and ``gb_s``
        (GB/s, 1e9 bytes).
    """
    threads = max(1, int(threads))
    count = max(threads, int(nbytes) // 8)
    src = np.ones(count, np.float64)
    dst = np.empty_like(src)
    bounds = np.linspace(0, count, threads + 1).astype(np.int64)
    slices = [slice(int(lo), int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:])]

    def copy(part: slice) -> None:
        np.copyto(dst[part], src[part])

    with ThreadPoolExecutor(max_workers=threads) as pool:
        med = _median_seconds(lambda: list(pool.map(copy, slices)), repeats)
    moved = 2 * src.nbytes
    return {"bytes": moved, "threads": threads, "median_s": med, "gb_s": moved / med / 1e9}


def fma_peak(threads: int = 1, seconds: float = 0.05, repeats: int = 5) -> Dict[str, Any]:
    """float32 multiply-add throughput of cconv's SIMD level on `threads` threads.

    Every thread runs independent chains of vector FMAs on registers (``_pointwise``'s
    ``fma_peak_float``); nothing touches memory.

    Parameters
    ----------
    threads : int, optional
    seconds : float, optional
        Rough length of one timed run.
    repeats : int, optional
        Timed runs (after a short and a full untimed one); the median is reported.

    Returns
    -------
    dict
        ``level`` (cconv's SIMD level), ``threads``, ``median_s``, ``gflops``.
    """
    from .._simd import LEVEL, pointwise

    threads = max(1, int(threads))
    per_round = int(pointwise.FMA_CHAINS) * int(pointwise.STRIP["float32"])  # flops
    t0 = time.perf_counter()
    pointwise.fma_peak_float(100_000, threads)
    took = max(time.perf_counter() - t0, 1e-6)
    iterations = max(1000, int(100_000 * seconds / took))
    # the untimed run also wakes idle cores before the timed ones
    med = _median_seconds(lambda: pointwise.fma_peak_float(iterations, threads), repeats)
    return {"level": LEVEL, "threads": threads, "median_s": med,
            "gflops": iterations * per_round * threads / med / 1e9}
