"""Markdown reports: the results of a suite run, and the layer table."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from .layers import LAYERS, Layer, conv_flops
from .targets import check_targets, describe_target, geometric_means, thread_scaling

__all__ = ["format_layer_table", "format_markdown"]

# Largest error relative to PyTorch's largest magnitude that is not flagged in the table:
# a few float32 roundings over a long reduction, or float64 ones.
_TOLERANCE = {"float32": 1e-3, "float64": 1e-9}
# A contender's version field when it did not run.
_ABSENT = ("not installed", "not used")


def _fmt(v: Optional[float], spec: str = ".1f") -> str:
    return "-" if v is None else format(v, spec)


def _shape_str(r: Dict[str, Any]) -> str:
    s = f"{r['C']}->{r['K']} {r['R']}x{r['S']}"
    if r["stride"] != 1:
        s += f" s{r['stride']}"
    if r["padding"]:
        s += f" p{r['padding']}"
    if r["dilation"] != 1:
        s += f" d{r['dilation']}"
    if r["groups"] != 1:
        s += f" g{r['groups']}"
    return s + f" {r['H']}x{r['W']}"


def _rounds_text(m: Dict[str, Any]) -> str:
    """How a timed round runs: primed, batched (the layer suite's defaults) or one call."""
    prime, batch = m.get("prime_s") or 0, m.get("batch_s") or 0
    parts = []
    if prime:
        parts.append(f"each round follows {prime * 1e3:g} ms of untimed calls of the same "
                     "contender (wakes idle cores)")
    if batch:
        parts.append(f"a round is the mean of back-to-back calls filling ~{batch * 1e3:g} ms")
    return ("; " + "; ".join(parts)) if parts else ""


def _header(m: Dict[str, Any]) -> List[str]:
    tt = m.get("torch_threads")
    torch_threads = (f" ({', '.join(map(str, tt)) if isinstance(tt, list) else tt} threads)"
                     if tt else "")
    cfg = m.get("cconv_config")
    simd = (f"; cconv SIMD {cfg.get('simd', '?')}, OpenMP {cfg.get('openmp', '?')}"
            if cfg else "")
    min_time = (f" or more (at least {m['min_time']:g} s of timed calls per contender)"
                if m.get("min_time") else "")
    ort = m.get("onnxruntime_version")
    ort_text = f"; onnxruntime {ort}" if ort else ""
    threads = m["threads"]
    threads_text = (", ".join(map(str, threads)) if isinstance(threads, list)
                    else str(threads))
    lines = [
        "# cconv benchmark",
        "",
        (f"- cconv {m['cconv_version']}, {threads_text} threads; "
         f"torch {m['torch_version']}{torch_threads}{ort_text}; numpy {m['numpy_version']}; "
         f"Python {m['python']}"),
        (f"- CPU: {m['cpu_model']}"
         + (f", {m['cpu_family']}" if m.get("cpu_family") else "")
         + f" ({m['cpu_count']} logical CPUs){simd}"),
        (f"- dtype {m['dtype']}, NCHW; median of {m['repeats']} timed rounds{min_time} after "
         f"{m['warmup']} warm-up, contenders interleaved; {m['timer']}"
         + _rounds_text(m)),
        (f"- GFLOP/s = {m['flops_formula']} / median time; "
         "ratio = cconv / torch GFLOP/s, torch in its faster memory format (NCHW, or "
         "channels_last where marked cl; > 1: cconv faster)"
         + ("; ratio ort = cconv / ONNX Runtime (forward only; ONNX Runtime holds the weight "
            "as an initializer, so it may pre-pack it)" if ort and ort not in _ABSENT else "")),
    ]
    for c in m.get("ceilings") or []:
        g, cp = c["gemm"], c["copy"]
        lines.append(
            f"- machine ceilings, {c['threads']} thread(s): float32 GEMM peak "
            f"{g['gflops']:.1f} GFLOP/s (numpy.matmul {g['n']}^3, median)"
            + (f"; FMA peak of cconv's {c['fma']['level']} kernels {c['fma']['gflops']:.1f} "
               "GFLOP/s (register-only multiply-adds)" if c.get("fma") else "")
            + f"; copy bandwidth "
            f"{cp['gb_s']:.1f} GB/s (STREAM-like copy of {cp['bytes'] // 2 >> 20} MiB, "
            "read + write counted); % peak = cconv GFLOP/s over the GEMM peak, % FMA over "
            "the FMA peak, % BW "
            "(depthwise) = the pass's least traffic over its time, over the bandwidth")
    if m.get("quick"):
        lines.append("- **quick mode**: N=1 for every layer (smoke test, not representative)")
    if "elapsed_s" in m:
        lines.append(f"- suite wall time: {m['elapsed_s']:.1f} s")
    return lines


def _row_cells(r: Dict[str, Any], tol: float) -> List[str]:
    c = r["cconv"]
    cl = r.get("torch_best") == "channels_last"
    t = r["torch_channels_last"] if cl else r["torch"]
    algo = r["algo"]
    if r.get("plan_algorithm") and r["plan_algorithm"] != algo:
        algo = f"{algo} ({r['plan_algorithm']})"  # what auto / find chose
    if c["status"] == "ok":
        cms, cgf = _fmt(c["median_s"] * 1e3, ".2f"), _fmt(c["gflops"])
        err = r.get("max_rel_err")
        if err is not None and not err <= tol:  # NaN is flagged too
            cgf += f" (err {err:.1e}!)"
    else:
        cms = cgf = "n/a"
    if t.get("status") == "ok":
        tms, tgf = _fmt(t["median_s"] * 1e3, ".2f") + (" cl" if cl else ""), _fmt(t["gflops"])
    else:
        tms = tgf = "-"
    bw = r.get("pct_bandwidth") if r.get("class") == "depthwise" else None
    return [r["layer"], _shape_str(r), str(r["N"]), str(r["threads"]), r["pass"], algo, cms,
            cgf, _fmt(r.get("pct_peak"), ".0f"), _fmt(r.get("pct_fma"), ".0f"), _fmt(bw, ".0f"),
            tms, tgf,
            _fmt(r.get("ratio"), ".2f")]


def _ort_cells(r: Dict[str, Any]) -> List[str]:
    o = r.get("onnxruntime") or {}
    if o.get("status") != "ok":
        return ["-", "-"]
    return [_fmt(o["median_s"] * 1e3, ".2f"), _fmt(r.get("ratio_onnxruntime"), ".2f")]


def format_markdown(result: Dict[str, Any]) -> str:
    """Render the results of :func:`~cconv.benchmark.run_suite` as a markdown report.

    Parameters
    ----------
    result : dict
        What :func:`~cconv.benchmark.run_suite` returned.

    Returns
    -------
    str
        A header (versions, threads, CPU, settings) and one table row per
        (layer, pass, algo): median time and GFLOP/s of cconv and PyTorch, and
        ``ratio`` = cconv / torch GFLOP/s (> 1: cconv faster).  ``ort ms`` and
        ``ratio ort`` (cconv / ONNX Runtime) appear when ONNX Runtime ran.  A ``x direct`` column
        (GFLOP/s over the direct algorithm's) appears when ``direct`` was timed with
        another algorithm.
    """
    m = result["meta"]
    lines = _header(m) + [""]
    rows = result["results"]
    has_direct_cmp = any(r.get("vs_direct") is not None for r in rows)
    has_ort = any((r.get("onnxruntime") or {}).get("status") == "ok" for r in rows)
    head = ["layer", "shape", "N", "threads", "pass", "algo", "cconv ms", "cconv GFLOP/s",
            "% peak", "% FMA", "% BW", "torch ms", "torch GFLOP/s", "ratio"]
    if has_ort:
        head += ["ort ms", "ratio ort"]
    if has_direct_cmp:
        head.append("x direct")
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join("---" if i < 6 else "---:" for i in range(len(head))) + "|")
    tol = _TOLERANCE.get(m.get("dtype"), 1e-3)
    for r in rows:
        cells = _row_cells(r, tol)
        if has_ort:
            cells += _ort_cells(r)
        if has_direct_cmp:
            cells.append(_fmt(r.get("vs_direct"), ".2f"))
        lines.append("| " + " | ".join(cells) + " |")
    lines += _summary(rows)
    return "\n".join(lines) + "\n"


def _summary(rows: List[Dict[str, Any]]) -> List[str]:
    """Geometric means per pass, thread scaling and the targets, after the table."""
    auto = [r for r in rows if r["algo"] in ("auto", "find")]
    lines: List[str] = []
    means = geometric_means(auto)
    if means:
        lines += ["", "Geometric mean of the ratios to PyTorch (auto):", ""]
        lines += [f"- {pss}, {t} thread(s): {g:.2f} over {count} layers"
                  for (t, pss), (g, count) in means.items()]
    scaling = thread_scaling(auto)
    if scaling:
        lines += ["", "Thread scaling (one-thread time over the larger count's, auto):", "",
                  "| layer | N | pass | threads | speed-up |", "|---|---:|---|---:|---:|"]
        lines += [f"| {s['layer']} | {s['N']} | {s['pass']} | {s['threads']} | "
                  f"{s['speedup']:.2f} |" for s in scaling]
    if rows and "class" in rows[0]:
        lines += ["", "Performance targets, held against this run:", ""]
        lines += [describe_target(t) for t in check_targets(rows)]
    return lines


def format_layer_table(layers: Sequence[Layer] = LAYERS) -> str:
    """The layers as a markdown table, with the GFLOP of one pass each.

    Parameters
    ----------
    layers : sequence of Layer, optional
        Default :data:`~cconv.benchmark.LAYERS`.

    Returns
    -------
    str
    """
    head = ["name", "N", "C", "K", "H", "W", "R", "S", "stride", "padding", "dilation",
            "groups", "GFLOP/pass"]
    lines = ["| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
    for la in layers:
        cells = [la.name, *map(str, la[1:]), f"{conv_flops(la) / 1e9:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
