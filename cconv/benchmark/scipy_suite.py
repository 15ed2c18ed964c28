"""SciPy's image filters against cconv's SciPy front ends (``cconv bench --suite scipy``).

Each case filters one large image (or a stack of images) with ``scipy.ndimage.correlate`` or
``scipy.signal.correlate2d`` and with the same call of :mod:`cconv.compat.ndimage` /
:mod:`cconv.compat.signal`, on the same arrays in the same process, the calls interleaved
(:func:`.timing.time_interleaved`) so that noise on the machine hits both alike.  SciPy is
single-threaded; cconv runs at each requested thread count (``num_threads``).  Every row
reports the medians, SciPy's time over cconv's (``speedup``), and cconv's GFLOP/s of the
direct count ``2 * taps * output pixels``.

The same run measures the machine's float32 GEMM peak on one thread (``numpy.matmul`` of two
square matrices under ``threadpoolctl.threadpool_limits(1)``, median), and reports cconv's
single-image GFLOP/s on one thread as a percentage of it: how far the filter is from what the
core can do on dense arithmetic.

Results are checked: the largest difference from SciPy's result relative to its largest
magnitude (float32), or in integer steps (uint16, where SciPy truncates its float64 sums and a
sum within rounding of an integer may come out one lower or higher).

From Python::

    from cconv.benchmark import scipy_suite
    result = scipy_suite.run_suite(quick=True)
    print(scipy_suite.format_markdown(result))
"""

from __future__ import annotations

import importlib
import platform
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

import cconv

from . import environment
from .machine import gemm_peak
from .timing import BATCH_SECONDS, PRIME_SECONDS, summarize, time_interleaved

__all__ = ["CASES", "CASE_COUNT", "ScipyCase", "format_markdown", "gemm_peak", "run_suite"]

# The core's configuration report carries no annotations; one typed name for it.
_show_config: Callable[..., Dict[Any, Any]] = cconv.show_config


@dataclass(frozen=True)
class ScipyCase:
    """One timed filter call.

    Attributes
    ----------
    library : str
        ``"ndimage"`` (``correlate``, mode ``"reflect"``) or ``"signal"`` (``correlate2d``,
        mode ``"same"``, boundary ``"fill"``).
    shape, quick_shape : tuple of int
        Image (or stack) shape of a full and of a ``quick`` run.
    dtype : str
        The image's dtype.
    kernel : (int, int)
        Kernel size.
    axes : tuple of int, optional
        ndimage's ``axes`` for a stack of images.
    """

    library: str
    shape: Tuple[int, ...]
    quick_shape: Tuple[int, ...]
    dtype: str
    kernel: Tuple[int, int]
    axes: Optional[Tuple[int, ...]] = None

    def label(self, quick: bool) -> str:
        """The case as the table names it, with the run's shape."""
        shape = self.quick_shape if quick else self.shape
        text = (f"{self.library} {self.dtype} {'x'.join(map(str, shape))} "
                f"{self.kernel[0]}x{self.kernel[1]}")
        if self.axes is not None:
            text += f" axes={self.axes}"
        return text + (" same" if self.library == "signal" else "")

    def flops(self, quick: bool) -> int:
        """Multiply-adds counted twice over every output pixel of the run's shape."""
        shape = self.quick_shape if quick else self.shape
        return 2 * self.kernel[0] * self.kernel[1] * int(np.prod(shape))


CASES = (
    ScipyCase("ndimage", (4096, 4096), (256, 256), "float32", (3, 3)),
    ScipyCase("ndimage", (4096, 4096), (256, 256), "float32", (5, 5)),
    ScipyCase("ndimage", (4096, 4096), (256, 256), "float32", (9, 9)),
    ScipyCase("ndimage", (4096, 4096), (256, 256), "uint16", (5, 5)),
    ScipyCase("ndimage", (64, 512, 512), (4, 64, 64), "float32", (5, 5), axes=(1, 2)),
    ScipyCase("signal", (2048, 2048), (128, 128), "float32", (9, 9)),
)

# Steps reported to a progress callback: the GEMM peak, then one per case.
CASE_COUNT = len(CASES) + 1


def _import_scipy() -> Tuple[Any, Any]:
    try:
        ndi = importlib.import_module("scipy.ndimage")
        sig = importlib.import_module("scipy.signal")
    except ImportError as exc:
        raise ImportError("the SciPy benchmark needs SciPy: pip install 'cconv[test]' "
                          f"(or scipy) ({exc})") from None
    return ndi, sig


def _data(case: ScipyCase, quick: bool, seed: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    shape = case.quick_shape if quick else case.shape
    if case.dtype == "uint16":
        image = rng.integers(0, 65536, shape).astype(np.uint16)
    else:
        image = rng.standard_normal(shape, dtype=np.float32).astype(case.dtype)
    # A smoothing kernel (positive, summing to 1): integer results stay in range, as they
    # would for a real image.
    kernel = rng.random(case.kernel) + 0.1
    kernel /= kernel.sum()
    # signal.correlate2d computes in the arrays' common dtype: a float32 kernel keeps float32
    return image, kernel.astype(np.float32) if case.library == "signal" else kernel


def _calls(case: ScipyCase, image: np.ndarray, kernel: np.ndarray,
           threads: Sequence[int]) -> Dict[str, Callable[[], np.ndarray]]:
    from ..compat import ndimage as c_ndi
    from ..compat import signal as c_sig

    ndi, sig = _import_scipy()
    kw: Dict[str, Any] = {} if case.axes is None else {"axes": case.axes}

    def scipy_call() -> np.ndarray:
        if case.library == "signal":
            return sig.correlate2d(image, kernel, "same")  # type: ignore[no-any-return]
        return ndi.correlate(image, kernel, **kw)  # type: ignore[no-any-return]

    def cconv_call(t: int) -> Callable[[], np.ndarray]:
        if case.library == "signal":
            return lambda: c_sig.correlate2d(image, kernel, "same", num_threads=t)
        return lambda: c_ndi.correlate(image, kernel, num_threads=t, **kw)

    calls: Dict[str, Callable[[], np.ndarray]] = {"scipy": scipy_call}
    for t in threads:
        calls[f"cconv {t}t"] = cconv_call(t)
    return calls


def _difference(got: np.ndarray, want: np.ndarray) -> float:
    """Relative (float) or integer-step (integer, modulo the width) difference from SciPy's."""
    if want.dtype.kind in "iu":
        period = 1 << (8 * want.dtype.itemsize)
        steps = (got.astype(np.int64) - want.astype(np.int64)) % period
        return float(np.minimum(steps, period - steps).max())
    diff = float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max())
    return diff / max(float(np.abs(want).max()), 1e-30)


def run_suite(threads: Union[None, int, Sequence[int]] = None, repeats: int = 5,
              warmup: int = 1, min_time: float = 0.5, quick: bool = False, check: bool = True,
              progress: Optional[Callable[[str], None]] = None,
              cases: Sequence[ScipyCase] = CASES, peak: bool = True) -> Dict[str, Any]:
    """Time every case for SciPy and cconv.

    Parameters
    ----------
    threads : int or sequence of int, optional
        cconv thread counts; default 1 and 2.
    repeats : int, optional
        Interleaved rounds timed at least.
    warmup : int, optional
        Untimed calls of each contender first.
    min_time : float, optional
        More rounds (up to ``3 * repeats``) until every contender has spent this long.
    quick : bool, optional
        Small images (a smoke run; its times mean little).
    check : bool, optional
        Compare every cconv result with SciPy's.
    progress : callable, optional
        Called with a line after the GEMM peak and after every case.
    cases : sequence of ScipyCase, optional
        Default :data:`CASES`.
    peak : bool, optional
        Measure the one-thread float32 GEMM peak.

    Returns
    -------
    dict
        ``meta`` (environment), ``peak`` (from :func:`gemm_peak`, or None) and ``rows``: one
        dict per case and thread count.
    """
    _import_scipy()
    if threads is None:
        counts: List[int] = [1, 2]
    elif isinstance(threads, int):
        counts = [threads]
    else:
        counts = [int(t) for t in threads]
    peak_result = gemm_peak(512 if quick else 2048) if peak else None
    if progress is not None:
        gflops = f"{peak_result['gflops']:.1f} GFLOP/s" if peak_result else "skipped"
        progress(f"float32 GEMM peak, 1 thread: {gflops}")
    rows: List[Dict[str, Any]] = []
    for case in cases:
        image, kernel = _data(case, quick)
        calls = _calls(case, image, kernel, counts)
        # primed, batched rounds, as the layer suite (see timing.PRIME_SECONDS)
        times, outputs, errors = time_interleaved(calls, warmup, repeats, time.perf_counter,
                                                  min_time=min_time, max_repeats=3 * repeats,
                                                  settle=0.0, prime=PRIME_SECONDS,
                                                  batch=BATCH_SECONDS)
        if errors:
            raise RuntimeError(f"{case.label(quick)}: {errors}")
        flops = case.flops(quick)
        base = summarize(times["scipy"], flops)
        for t in counts:
            mine = summarize(times[f"cconv {t}t"], flops)
            # the float32 peak compares with float32 single-image work only (uint16 is
            # computed in float64)
            single = case.axes is None and t == 1 and case.dtype == "float32"
            rows.append({
                "case": case.label(quick), "library": case.library, "dtype": case.dtype,
                "shape": list(case.quick_shape if quick else case.shape),
                "kernel": list(case.kernel), "threads": t, "flops": flops,
                "scipy_median_s": base["median_s"], "scipy_min_s": base["min_s"],
                "cconv_median_s": mine["median_s"], "cconv_min_s": mine["min_s"],
                "speedup": base["median_s"] / mine["median_s"],
                "scipy_gflops": base["gflops"], "cconv_gflops": mine["gflops"],
                "pct_of_peak": (100.0 * mine["gflops"] / peak_result["gflops"]
                                if single and peak_result else None),
                "max_diff": (_difference(outputs[f"cconv {t}t"], outputs["scipy"])
                             if check else None),
                "rounds": len(times["scipy"]),
            })
        if progress is not None:
            progress(case.label(quick) + ": " + ", ".join(
                f"{r['threads']}t {r['speedup']:.2f}x" for r in rows[-len(counts):]))
    meta = {
        "cconv_version": cconv.__version__,
        "scipy_version": _scipy_version(),
        "numpy_version": np.__version__,
        "python": platform.python_version(),
        "cpu_model": environment.cpu_model(),
        "threads": counts, "repeats": repeats, "min_time": min_time, "quick": quick,
        "cconv_config": {str(k): v for k, v in _show_config(print_out=False).items()},
    }
    return {"meta": meta, "peak": peak_result, "rows": rows}


def _scipy_version() -> str:
    return str(importlib.import_module("scipy").__version__)


def _fmt(value: Optional[float], spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_markdown(result: Dict[str, Any]) -> str:
    """The result of :func:`run_suite` as a Markdown report.

    Parameters
    ----------
    result : dict

    Returns
    -------
    str
    """
    m = result["meta"]
    peak = result.get("peak")
    lines = [
        "# cconv vs SciPy: image filters",
        "",
        f"- cconv {m['cconv_version']} (SIMD {m['cconv_config'].get('simd', '?')}), SciPy "
        f"{m['scipy_version']}, NumPy {m['numpy_version']}, Python {m['python']}",
        f"- CPU: {m['cpu_model']}; SciPy single-threaded, cconv at {m['threads']} threads; "
        f"medians of at least {m['repeats']} interleaved rounds" + (
            " (quick run: small images)" if m["quick"] else ""),
    ]
    if peak:
        lines.append(f"- float32 GEMM peak, 1 thread (numpy.matmul {peak['n']}^3, median): "
                     f"{peak['gflops']:.1f} GFLOP/s")
    lines += [
        "",
        "| case | threads | SciPy ms | cconv ms | speedup | cconv GFLOP/s | % GEMM peak (1t) "
        "| max diff |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        diff = r["max_diff"]
        diff_s = "-" if diff is None else (f"{diff:.0f} step(s)" if r["dtype"] == "uint16"
                                           else f"{diff:.1e}")
        lines.append(
            f"| {r['case']} | {r['threads']} | {1e3 * r['scipy_median_s']:.1f} | "
            f"{1e3 * r['cconv_median_s']:.1f} | {r['speedup']:.2f} | {r['cconv_gflops']:.1f} | "
            f"{_fmt(r['pct_of_peak'], '.1f')} | {diff_s} |")
    return "\n".join(lines) + "\n"
