"""The suite runner: every (layer, pass) timed for cconv, PyTorch and ONNX Runtime (forward),
results checked."""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

import cconv

from .._geometry import COMPUTE_DTYPES
from . import environment
from .contenders import (
    cconv_call,
    import_onnxruntime,
    import_torch,
    make_data,
    max_rel_err,
    onnxruntime_call,
    planned_algorithm,
    torch_call,
)
from .layers import Layer, conv_flops, select_layers
from .machine import copy_bandwidth, fma_peak, gemm_peak
from .targets import layer_class, min_bytes, optional_pct
from .timing import (
    BATCH_SECONDS,
    PRIME_SECONDS,
    SETTLE_SECONDS,
    summarize,
    time_interleaved,
)

__all__ = ["PASSES", "measure_ceilings", "parse_algos", "parse_passes", "parse_threads",
           "run_suite"]

PASSES = ("forward", "backward_data", "backward_weight")

_PASS_ALIASES = {
    "forward": ("forward",),
    "fwd": ("forward",),
    "backward_data": ("backward_data",),
    "bwd_data": ("backward_data",),
    "data": ("backward_data",),
    "backward_weight": ("backward_weight",),
    "bwd_weight": ("backward_weight",),
    "weight": ("backward_weight",),
    "backward": ("backward_data", "backward_weight"),
    "all": PASSES,
}


Row = Dict[str, Any]


def _split(spec: Union[str, Sequence[str]]) -> List[str]:
    return spec.split(",") if isinstance(spec, str) else list(spec)


def parse_passes(passes: Union[None, str, Sequence[str]] = None) -> List[str]:
    """The passes named by `passes`, in :data:`PASSES` order.

    Parameters
    ----------
    passes : str or sequence of str, optional
        Comma-separated names or a sequence of them: ``forward`` (``fwd``),
        ``backward_data`` (``bwd_data``, ``data``), ``backward_weight`` (``bwd_weight``,
        ``weight``), ``backward`` (both gradients) or ``all``; ``-`` may stand for ``_``.
        Default: all three.

    Returns
    -------
    list of str

    Raises
    ------
    ValueError
        For an unknown name or an empty list.
    """
    if passes is None:
        return list(PASSES)
    chosen: set[str] = set()
    for p in _split(passes):
        p = p.strip().lower().replace("-", "_")
        if not p:
            continue
        if p not in _PASS_ALIASES:
            raise ValueError(f"passes: unknown pass {p!r}; choose from {', '.join(PASSES)}")
        chosen.update(_PASS_ALIASES[p])
    if not chosen:
        raise ValueError("passes: empty")
    return [p for p in PASSES if p in chosen]


def parse_algos(algos: Union[None, str, Sequence[str]] = None) -> List[str]:
    """The cconv algorithms named by `algos`, duplicates dropped.

    Parameters
    ----------
    algos : str or sequence of str, optional
        Comma-separated names or a sequence of them: ``auto``, ``find`` or names in
        ``cconv.ALGORITHMS``.  Default ``["auto"]``.

    Returns
    -------
    list of str

    Raises
    ------
    ValueError
        For an unknown name or an empty list.
    """
    if algos is None:
        return ["auto"]
    known = ["auto", "find", *cconv.ALGORITHMS]
    out: List[str] = []
    for a in _split(algos):
        a = a.strip().lower()
        if not a:
            continue
        if a not in known:
            raise ValueError(f"algos: unknown algorithm {a!r}; "
                             f"cconv offers {', '.join(known)}")
        if a not in out:
            out.append(a)
    if not out:
        raise ValueError("algos: empty")
    return out


def parse_threads(threads: Union[None, int, str, Sequence[int]] = None) -> List[int]:
    """The thread counts named by `threads`, duplicates dropped, in the order given.

    Parameters
    ----------
    threads : int, str or sequence of int, optional
        One count, comma-separated counts (``"1,2"``) or a sequence of them.  Default: the
        one count ``cconv.get_num_threads()``.

    Returns
    -------
    list of int

    Raises
    ------
    ValueError
        For a count below 1, a non-integer or an empty list.
    """
    if threads is None:
        return [int(cconv.get_num_threads())]
    items = (threads.split(",") if isinstance(threads, str)
             else [threads] if isinstance(threads, (int, np.integer)) else list(threads))
    out: List[int] = []
    for item in items:
        if isinstance(item, str) and not item.strip():
            continue
        try:
            count = int(item)
        except (TypeError, ValueError):
            raise ValueError(f"threads: expected integers, got {item!r}") from None
        if count < 1:
            raise ValueError(f"threads: must be >= 1, got {count}")
        if count not in out:
            out.append(count)
    if not out:
        raise ValueError("threads: empty")
    return out


def measure_ceilings(threads: int, quick: bool = False) -> Dict[str, Any]:
    """The machine's float32 GEMM peak, FMA peak and copy bandwidth on `threads` threads.

    Parameters
    ----------
    threads : int
    quick : bool, optional
        Small operands (a smoke test: the figures are then below the real ceilings).

    Returns
    -------
    dict
        ``threads``, ``gemm`` (see :func:`~cconv.benchmark.machine.gemm_peak`) and
        ``copy`` (see :func:`~cconv.benchmark.machine.copy_bandwidth`).
    """
    # The GEMM last, then a pause: OpenBLAS's idle threads spin after a product (an FMA
    # peak measured right after it came out at half, its threads sharing the cores).
    fma = fma_peak(threads, 0.005 if quick else 0.05, 2 if quick else 5)
    copy = copy_bandwidth((16 if quick else 256) << 20, 2 if quick else 5, threads)
    gemm = gemm_peak(512 if quick else 2048, 2 if quick else 5, threads)
    time.sleep(0.01 if quick else 0.3)
    return {"threads": threads, "gemm": gemm, "fma": fma, "copy": copy}


def run_suite(
    layers: Union[None, str, Sequence[str], Sequence[Layer]] = None,
    passes: Union[None, str, Sequence[str]] = None,
    algos: Union[None, str, Sequence[str]] = None,
    threads: Union[None, int, str, Sequence[int]] = None,
    repeats: int = 5,
    warmup: int = 1,
    min_time: float = 0.0,
    dtype: str = "float32",
    quick: bool = False,
    torch: bool = True,
    check: bool = True,
    progress: Optional[Callable[[str], None]] = None,
    timer: Callable[[], float] = time.perf_counter,
    seed: int = 0,
    onnxruntime: bool = True,
    peaks: bool = True,
    prime: float = PRIME_SECONDS,
    batch: float = BATCH_SECONDS,
) -> Dict[str, Any]:
    """Time cconv (and PyTorch and ONNX Runtime when installed) on a set of layers.

    Every requested pass of every layer is timed for every requested cconv algorithm and
    for PyTorch on the same arrays, with the same thread count (ONNX Runtime, an inference
    engine, runs the forward pass only); the calls of all contenders of one (layer, pass)
    are interleaved (see
    :func:`~cconv.benchmark.timing.time_interleaved`).  PyTorch runs both its memory
    formats (NCHW and channels-last) and the faster one is the reference.  Before the
    layers, the machine's ceilings are measured with the same thread count (see
    :func:`measure_ceilings`), and every row gets its share of them.

    Parameters
    ----------
    layers : str, sequence of str or sequence of Layer, optional
        Comma-separated name substrings (see :func:`select_layers`), or :class:`Layer`
        objects to run as given.  Default: the whole :data:`LAYERS` table.
    passes : str or sequence of str, optional
        See :func:`parse_passes`.  Default: all three.
    algos : str or sequence of str, optional
        See :func:`parse_algos`.  A shape an algorithm cannot handle (cconv raises
        ValueError) is reported as ``n/a``.  Default ``["auto"]``.
    threads : int, str or sequence of int, optional
        Thread count for cconv (``num_threads=``), ``torch.set_num_threads`` and ONNX
        Runtime; several counts (see :func:`parse_threads`) time every case at each.
        Default ``cconv.get_num_threads()``.
    repeats : int, optional
        Timed calls per contender at least; the median is reported.  Default 5.
    warmup : int, optional
        Untimed calls per contender before timing.  Default 1.
    min_time : float, optional
        Seconds of timed calls each contender gets at least: rounds continue past
        `repeats` (up to 200) until then.  Default 0 (`repeats` rounds exactly).
    dtype : {"float32", "float64"}, optional
        Data type of all arrays.
    quick : bool, optional
        Smoke-test mode: batch N=1, at most 2 repeats and no `min_time`.
    torch : bool, optional
        Compare with PyTorch when it is importable.  Default True.
    check : bool, optional
        Compare the warm-up results of cconv with PyTorch's and record the largest error
        relative to PyTorch's largest magnitude.
    progress : callable, optional
        Called with one line of text after each (layer, pass).
    timer : callable, optional
        Clock returning seconds; default :func:`time.perf_counter`.
    seed : int, optional
        Seed of the random input data.
    onnxruntime : bool, optional
        Compare the forward pass with ONNX Runtime when ``onnxruntime`` and ``onnx`` are
        importable (float32 only).  Default True.
    peaks : bool, optional
        Measure the GEMM peak and the copy bandwidth first.  Default True.
    prime : float, optional
        Seconds of untimed calls of a contender right before each of its timed rounds
        (see :func:`~cconv.benchmark.timing.time_interleaved`): the timed calls then run
        on awake cores, as calls in a loop do, and other contenders' threads have stopped
        spinning.  Default :data:`~cconv.benchmark.timing.PRIME_SECONDS`; 0 times each
        round after a :data:`~cconv.benchmark.timing.SETTLE_SECONDS` sleep instead.
    batch : float, optional
        Seconds of back-to-back calls timed as one round (their mean is the round's time).
        Default :data:`~cconv.benchmark.timing.BATCH_SECONDS`; 0: one call per round.

    Returns
    -------
    dict
        ``{"meta": {...}, "results": [row, ...]}``.  ``meta`` holds the environment, the
        settings and ``ceilings`` (one :func:`measure_ceilings` record per thread count;
        ``threads`` is the count, or the list of counts when several ran).  One row per
        (layer, threads, pass, algo): the shape, the batch ``N`` used, ``flops``, ``class``
        (see :func:`~cconv.benchmark.targets.layer_class`), ``bytes`` (the least traffic
        of the pass), a ``cconv``, a ``torch`` (NCHW), a ``torch_channels_last`` and an
        ``onnxruntime`` entry (``status`` "ok" / "n/a" / "error" / "not installed" /
        "not used", ``times_s``, ``median_s``, ``gflops``), ``torch_best`` (the faster
        memory format, ``"nchw"`` or ``"channels_last"``), ``ratio`` (cconv GFLOP/s over
        PyTorch's faster format's), ``ratio_nchw`` and ``ratio_channels_last`` (over each
        format), ``ratio_onnxruntime`` (cconv / ONNX Runtime), ``pct_peak`` (cconv's
        GFLOP/s in % of the GEMM peak), ``pct_fma`` (in % of the FMA peak),
        ``pct_bandwidth`` (``bytes`` over the time, in % of the copy bandwidth), ``vs_direct``
        (GFLOP/s over the direct algorithm's, when that was timed too), ``max_rel_err`` (against
        PyTorch) and
        ``max_rel_err_onnxruntime``.

    Raises
    ------
    ValueError
        For an invalid argument, before anything is timed.
    """
    dtype = np.dtype(dtype).name
    if dtype not in [d.name for d in COMPUTE_DTYPES]:
        raise ValueError(f"dtype: expected float32 or float64, got {dtype!r}")
    layer_list: List[Layer]
    if layers is not None and not isinstance(layers, str) and all(
            isinstance(layer, Layer) for layer in layers):
        layer_list = [layer for layer in layers if isinstance(layer, Layer)]
    else:
        layer_list = select_layers(layers)  # type: ignore[arg-type]  # names, not Layers
    pass_list = parse_passes(passes)
    algo_list = parse_algos(algos)
    repeats, warmup, min_time = int(repeats), int(warmup), float(min_time)
    if repeats < 1:
        raise ValueError(f"repeats: must be >= 1, got {repeats}")
    if warmup < 0:
        raise ValueError(f"warmup: must be >= 0, got {warmup}")
    if not min_time >= 0:  # also rejects NaN
        raise ValueError(f"min_time: must be >= 0, got {min_time!r}")
    prime, batch = float(prime), float(batch)
    if not prime >= 0:
        raise ValueError(f"prime: must be >= 0, got {prime!r}")
    if not batch >= 0:
        raise ValueError(f"batch: must be >= 0, got {batch!r}")
    if quick:
        repeats, min_time = min(repeats, 2), 0.0
    thread_list = parse_threads(threads)

    tmod = import_torch() if torch else None
    if tmod is not None:
        tmod.set_num_threads(thread_list[0])
    ort = import_onnxruntime() if onnxruntime else None

    meta = environment.describe(thread_list[0], tmod, torch, ort, onnxruntime)
    if len(thread_list) > 1:
        meta["threads"] = meta["torch_threads"] = thread_list
    meta.update({
        "dtype": dtype,
        "passes": pass_list,
        "algos": algo_list,
        "repeats": repeats,
        "min_time": min_time,
        "warmup": warmup,
        "prime_s": prime,
        "batch_s": batch,
        "quick": bool(quick),
        "timer": getattr(timer, "__name__", str(timer)),
        "flops_formula": "2*N*K*OH*OW*(C/groups)*R*S per pass",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    })

    t_start = time.perf_counter()
    ceilings = {t: measure_ceilings(t, quick) for t in thread_list} if peaks else {}
    meta["ceilings"] = list(ceilings.values())
    rng = np.random.default_rng(seed)
    results: List[Row] = []
    for layer in layer_list:
        n = 1 if quick else layer.N
        flops = conv_flops(layer, n)
        x, w, gy = make_data(layer, n, dtype, rng)
        plan_algo = {a: planned_algorithm(layer, n, dtype, a)
                     for a in algo_list if a in ("auto", "find")}
        for t in thread_list:
            if tmod is not None:
                tmod.set_num_threads(t)
            for pss in pass_list:
                rows = _time_case(layer, n, pss, t, algo_list, flops, (x, w, gy), tmod, ort,
                                  (warmup, repeats, min_time, prime, batch), timer, meta,
                                  plan_algo if pss == "forward" else {}, check)
                for row in rows:
                    _add_shares(row, layer, ceilings.get(t), np.dtype(dtype).itemsize)
                results.extend(rows)
                if progress is not None:
                    progress(_progress_line(layer, pss, n, rows))
    if tmod is not None:
        tmod.set_num_threads(thread_list[0])
    meta["elapsed_s"] = time.perf_counter() - t_start
    return {"meta": meta, "results": results}


def _time_case(layer: Layer, n: int, pss: str, threads: int, algo_list: List[str], flops: int,
               data: Tuple[Any, Any, Any], tmod: Any, ort: Any,
               settings: Tuple[int, int, float, float, float], timer: Callable[[], float],
               meta: Dict[str, Any], plan_algo: Dict[str, Optional[str]], check: bool,
               ) -> List[Row]:
    """Time one (layer, threads, pass) for every contender; its rows."""
    x, w, gy = data
    contenders = {"cconv:" + a: cconv_call(layer, pss, a, x, w, gy, threads)
                  for a in algo_list}
    if tmod is not None:
        contenders["torch"] = torch_call(tmod, layer, pss, x, w, gy)
        contenders["torch:channels_last"] = torch_call(tmod, layer, pss, x, w, gy,
                                                       channels_last=True)
    ort_problem: Optional[Dict[str, Any]] = None
    if ort is not None and pss == "forward":
        try:
            contenders["onnxruntime"] = onnxruntime_call(ort, layer, x, w, threads)
        except ValueError as exc:  # a dtype it lacks: not applicable
            ort_problem = {"status": "n/a", "reason": str(exc)}
        except Exception as exc:  # its own failure is reported, not fatal
            ort_problem = {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
    warmup, repeats, min_time, prime, batch = settings
    times, outputs, errors = time_interleaved(
        contenders, warmup, repeats, timer, min_time,
        settle=0.0 if prime > 0 else SETTLE_SECONDS, prime=prime, batch=batch)
    return _case_rows(layer, n, pss, threads, algo_list, flops, times, outputs, errors, meta,
                      plan_algo, check, ort_problem)


def _add_shares(row: Row, layer: Layer, ceiling: Optional[Dict[str, Any]],
                itemsize: int) -> None:
    """The row's class, least traffic, and shares of the machine's ceilings."""
    row["class"] = layer_class(layer)
    row["bytes"] = min_bytes(layer, row["N"], row["pass"], itemsize)
    row["pct_peak"] = row["pct_fma"] = row["pct_bandwidth"] = None
    c = row["cconv"]
    if ceiling is None or c["status"] != "ok":
        return
    row["pct_peak"] = optional_pct(c["gflops"], ceiling["gemm"]["gflops"])
    if ceiling.get("fma"):
        row["pct_fma"] = optional_pct(c["gflops"], ceiling["fma"]["gflops"])
    row["pct_bandwidth"] = optional_pct(row["bytes"] / c["median_s"] / 1e9,
                                        ceiling["copy"]["gb_s"])


def _entry(label: str, times: Dict[str, List[float]], errors: Dict[str, str], flops: int,
           absent: Dict[str, Any]) -> Dict[str, Any]:
    """A contender's record: its timings, its error, or ``absent`` when it did not run."""
    if label in times:
        return dict(status="ok", **summarize(times[label], flops))
    if label in errors:
        return {"status": "error", "error": errors[label]}
    return absent


def _case_rows(layer: Layer, n: int, pss: str, threads: int, algo_list: List[str], flops: int,
               times: Dict[str, List[float]], outputs: Dict[str, Any], errors: Dict[str, str],
               meta: Dict[str, Any], plan_algo: Dict[str, Optional[str]], check: bool,
               ort_problem: Optional[Dict[str, Any]] = None) -> List[Row]:
    """The result rows of one (layer, pass), one per cconv algorithm."""
    # Not compared: the status says why ("not installed" or "not used").
    t_entry = _entry("torch", times, errors, flops, {"status": meta["torch_version"]})
    tcl_entry = _entry("torch:channels_last", times, errors, flops,
                       {"status": meta["torch_version"]})
    torch_ok = {name: e for name, e in (("nchw", t_entry), ("channels_last", tcl_entry))
                if e["status"] == "ok"}
    best = max(torch_ok, key=lambda k: torch_ok[k]["gflops"]) if torch_ok else None
    ort_version = meta.get("onnxruntime_version", "not used")
    o_absent = ort_problem or (
        {"status": "n/a", "reason": "ONNX Runtime runs the forward pass only"}
        if pss != "forward" and ort_version not in ("not installed", "not used")
        else {"status": ort_version})
    o_entry = _entry("onnxruntime", times, errors, flops, o_absent)
    ort_ref = outputs.get("onnxruntime")
    direct_gf = None
    if "cconv:direct" in times:
        direct_gf = summarize(times["cconv:direct"], flops)["gflops"]
    ref = outputs.get("torch")
    if ref is not None:
        ref = ref.numpy()

    oh, ow = layer.output_hw
    rows: List[Row] = []
    for a in algo_list:
        label = "cconv:" + a
        row = {
            "layer": layer.name, "pass": pss, "algo": a, "plan_algorithm": plan_algo.get(a),
            "N": n, "N_full": layer.N, "C": layer.C, "K": layer.K, "H": layer.H,
            "W": layer.W, "R": layer.R, "S": layer.S, "stride": layer.stride,
            "padding": layer.padding, "dilation": layer.dilation, "groups": layer.groups,
            "OH": oh, "OW": ow, "flops": flops, "dtype": meta["dtype"],
            "threads": threads, "torch": t_entry, "torch_channels_last": tcl_entry,
            "torch_best": best, "onnxruntime": o_entry, "ratio": None, "ratio_nchw": None,
            "ratio_channels_last": None, "ratio_onnxruntime": None, "vs_direct": None,
            "max_rel_err": None, "max_rel_err_onnxruntime": None,
        }
        if label in times:
            c_entry = dict(status="ok", **summarize(times[label], flops))
            for name, e in torch_ok.items():
                row["ratio_" + name] = c_entry["gflops"] / e["gflops"]
            if best is not None:
                row["ratio"] = row["ratio_" + best]
            if o_entry["status"] == "ok":
                row["ratio_onnxruntime"] = c_entry["gflops"] / o_entry["gflops"]
                if check and ort_ref is not None:
                    row["max_rel_err_onnxruntime"] = max_rel_err(outputs[label], ort_ref)
            if direct_gf and a != "direct":
                row["vs_direct"] = c_entry["gflops"] / direct_gf
            if check and ref is not None:
                row["max_rel_err"] = max_rel_err(outputs[label], ref)
        else:
            c_entry = {"status": "n/a", "reason": errors.get(label)}
        row["cconv"] = c_entry
        rows.append(row)
    return rows


def _progress_line(layer: Layer, pss: str, n: int, rows: List[Row]) -> str:
    cells = [f"{r['algo']} {r['cconv']['gflops']:.1f}" if r["cconv"]["status"] == "ok"
             else f"{r['algo']} n/a" for r in rows]
    best = rows[0]["torch_best"]
    t = rows[0]["torch_channels_last" if best == "channels_last" else "torch"]
    tpart = (f"torch {t['gflops']:.1f}{' (cl)' if best == 'channels_last' else ''}"
             if best else "")
    o = rows[0]["onnxruntime"]
    opart = f" ort {o['gflops']:.1f}" if o["status"] == "ok" else ""
    return (f"{layer.name:<26} {pss:<15} N={n:<2d} {rows[0]['threads']}t GFLOP/s: "
            f"{', '.join(cells)} {tpart}{opart}").rstrip()
