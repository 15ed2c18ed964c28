"""Layer classes, shares of the machine's ceilings, and the performance targets checked on
a suite run.

cconv's performance goals are stated per class of layer (1x1, depthwise, few input
channels, strided, dilated, 3x3) against PyTorch's faster layout and against the machine's
own ceilings measured in the same run (:mod:`.machine`).  This module names each row's
class, computes its share of the GEMM peak (compute-bound work) or of the copy bandwidth
(depthwise work, which is memory-bound), and evaluates the targets, so that a report states
every miss rather than leaving it to be found in the table.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from .layers import Layer

__all__ = ["Target", "check_targets", "describe_target", "geometric_means", "layer_class",
           "min_bytes", "optional_pct", "thread_scaling"]

Row = Dict[str, Any]

# The pass each operand plays in: (inputs read, output written), by pass.
_OPERANDS = {
    "forward": (("x", "w"), "y"),
    "backward_data": (("gy", "w"), "x"),
    "backward_weight": (("gy", "x"), "w"),
}


def layer_class(layer: Layer) -> str:
    """The class a layer's targets are stated for.

    Parameters
    ----------
    layer : Layer

    Returns
    -------
    str
        ``"depthwise"`` (one input channel per group, groups > 1), ``"few-channel"`` (at
        most 4 input channels per group), ``"1x1"``, ``"strided"``, ``"dilated"``,
        ``"3x3"`` (3x3, stride 1) or ``"other"``, tested in that order.
    """
    cg = layer.C // layer.groups
    if layer.groups > 1 and cg == 1:
        return "depthwise"
    if cg <= 4:
        return "few-channel"
    if layer.R == layer.S == 1:
        return "1x1"
    if layer.stride > 1:
        return "strided"
    if layer.dilation > 1:
        return "dilated"
    if layer.R == layer.S == 3:
        return "3x3"
    return "other"


def min_bytes(layer: Layer, n: int, pss: str, itemsize: int) -> int:
    """Bytes a pass must move at least: each operand read once and the result written once.

    Parameters
    ----------
    layer : Layer
    n : int
        Batch size.
    pss : {"forward", "backward_data", "backward_weight"}
    itemsize : int
        Bytes per element.

    Returns
    -------
    int
    """
    oh, ow = layer.output_hw
    sizes = {"x": n * layer.C * layer.H * layer.W,
             "w": layer.K * (layer.C // layer.groups) * layer.R * layer.S,
             "gy": n * layer.K * oh * ow}
    sizes["y"] = sizes["gy"]
    reads, written = _OPERANDS[pss]
    return itemsize * (sum(sizes[k] for k in reads) + sizes[written])


def geometric_means(rows: Iterable[Row], key: str = "ratio",
                    ) -> Dict[Tuple[int, str], Tuple[float, int]]:
    """Geometric mean of ``row[key]`` per (threads, pass), over rows where it is set.

    Parameters
    ----------
    rows : iterable of dict
        Suite rows.
    key : str, optional

    Returns
    -------
    dict
        (threads, pass) -> (geometric mean, number of rows).
    """
    logs: Dict[Tuple[int, str], List[float]] = defaultdict(list)
    for r in rows:
        v = r.get(key)
        if v is not None and v > 0:
            logs[(r["threads"], r["pass"])].append(math.log(v))
    order = {p: i for i, p in enumerate(_OPERANDS)}  # forward, backward_data, backward_weight
    keys = sorted(logs, key=lambda k: (k[0], order.get(k[1], len(order)), k[1]))
    return {k: (math.exp(sum(logs[k]) / len(logs[k])), len(logs[k])) for k in keys}


def thread_scaling(rows: Iterable[Row]) -> List[Dict[str, Any]]:
    """Speed-up of the most threads over one thread, per (layer, pass, algo) timed at both.

    Parameters
    ----------
    rows : iterable of dict

    Returns
    -------
    list of dict
        ``layer``, ``pass``, ``algo``, ``N``, ``threads`` (the larger count) and
        ``speedup`` (one-thread median over the larger count's).
    """
    by_case: Dict[Tuple[str, str, str], Dict[int, Row]] = defaultdict(dict)
    for r in rows:
        if r["cconv"].get("status") == "ok":
            by_case[(r["layer"], r["pass"], r["algo"])][r["threads"]] = r
    out = []
    for (layer, pss, algo), runs in by_case.items():
        most = max(runs)
        if 1 in runs and most > 1:
            out.append({"layer": layer, "pass": pss, "algo": algo, "N": runs[most]["N"],
                        "threads": most, "speedup": runs[1]["cconv"]["median_s"]
                        / runs[most]["cconv"]["median_s"]})
    return out


class Target(NamedTuple):
    """One performance target, and the rows that miss it.

    Attributes
    ----------
    text : str
        The target, in words.
    checked : int
        How many values were held against it (0: nothing in the run applies).
    misses : list of str
        One line per value that falls short.
    """

    text: str
    checked: int
    misses: List[str]


def _label(r: Row) -> str:
    return f"{r['layer']} {r['pass']} ({r['threads']}t, {r['algo']})"


def _floor(text: str, rows: Sequence[Row], key: str, least: float, fmt: str = ".2f",
           unit: str = "") -> Target:
    """Every row's ``key`` at least `least`."""
    vals = [(r, float(r[key])) for r in rows if r.get(key) is not None]
    misses = [f"{_label(r)}: {v:{fmt}}{unit}" for r, v in vals if v < least]
    return Target(text, len(vals), misses)


def check_targets(rows: Sequence[Row]) -> List[Target]:
    """Hold a suite run against cconv's performance targets.

    Parameters
    ----------
    rows : sequence of dict
        Rows of :func:`~cconv.benchmark.run_suite`.

    Returns
    -------
    list of Target
        In the order: every layer and pass at least 1.0x PyTorch's faster layout; geometric
        mean per pass at least 1.3x; 1x1 layers at 85% of the GEMM peak; ``algo="direct"``
        at 85% on 3x3 layers; stride-2 and dilated layers at 80%; depthwise at 1.5x PyTorch
        and 70% of the copy bandwidth; few-channel forward at 1.0x and backward-data at 2x;
        backward-weight at 1.0x; 2 threads at least 1.85x one thread on N=8 layers (when
        the run timed both).
    """
    ok = [r for r in rows if r["cconv"].get("status") == "ok"]
    auto = [r for r in ok if r["algo"] in ("auto", "find")]
    of = defaultdict(list)
    for r in auto:
        of[r["class"]].append(r)
    targets = [_floor("every layer and pass at least 1.0x PyTorch's faster layout", auto,
                      "ratio", 1.0)]
    geo_misses, geo_count = [], 0
    for (threads, pss), (g, count) in geometric_means(auto).items():
        geo_count += 1
        if g < 1.3:
            geo_misses.append(f"{pss} ({threads}t): {g:.2f} over {count} layers")
    targets.append(Target("geometric mean over the suite at least 1.3x for each pass",
                          geo_count, geo_misses))
    targets.append(_floor("1x1 layers: every pass at least 85% of the GEMM peak", of["1x1"],
                          "pct_peak", 85.0, ".0f", "%"))
    direct_3x3 = [r for r in ok if r["algo"] == "direct" and r["class"] == "3x3"]
    targets.append(_floor('algo="direct" on 3x3 layers at least 85% of the GEMM peak',
                          direct_3x3, "pct_peak", 85.0, ".0f", "%"))
    targets.append(_floor("stride-2 and dilated layers at least 80% of the GEMM peak",
                          of["strided"] + of["dilated"], "pct_peak", 80.0, ".0f", "%"))
    targets.append(_floor("depthwise: at least 1.5x PyTorch channels_last on every pass",
                          of["depthwise"], "ratio_channels_last", 1.5))
    targets.append(_floor("depthwise: at least 70% of the copy bandwidth", of["depthwise"],
                          "pct_bandwidth", 70.0, ".0f", "%"))
    few = of["few-channel"]
    targets.append(_floor("few input channels: forward at least 1.0x PyTorch",
                          [r for r in few if r["pass"] == "forward"], "ratio", 1.0))
    targets.append(_floor("few input channels: backward-data at least 2x PyTorch",
                          [r for r in few if r["pass"] == "backward_data"], "ratio", 2.0))
    targets.append(_floor("backward-weight at least 1.0x PyTorch on every layer",
                          [r for r in auto if r["pass"] == "backward_weight"], "ratio", 1.0))
    scaling = [s for s in thread_scaling(auto) if s["N"] >= 8 and s["threads"] == 2]
    targets.append(Target(
        "2 threads at least 1.85x one thread on every N=8 layer", len(scaling),
        [f"{s['layer']} {s['pass']}: {s['speedup']:.2f}x" for s in scaling
         if s["speedup"] < 1.85]))
    return targets


def describe_target(t: Target) -> str:
    """One markdown line for a target: met, missed (with the misses), or not measured.

    Parameters
    ----------
    t : Target

    Returns
    -------
    str
    """
    if not t.checked:
        return f"- {t.text}: not measured in this run"
    if not t.misses:
        return f"- {t.text}: **met** ({t.checked} checked)"
    head = f"- {t.text}: **missed** by {len(t.misses)} of {t.checked}"
    return head + "".join(f"\n  - {m}" for m in t.misses)


def optional_pct(value: Optional[float], ceiling: Optional[float]) -> Optional[float]:
    """``100 * value / ceiling``, or None when either is missing.

    Parameters
    ----------
    value, ceiling : float or None

    Returns
    -------
    float or None
    """
    if value is None or not ceiling:
        return None
    return 100.0 * value / ceiling
