"""``cconv check``: every algorithm, pass and SIMD level against the float64 reference.

Each SIMD level runs in a subprocess of its own (the level is fixed when cconv is imported,
by ``CCONV_SIMD``), which also turns a crash of one level's kernels into a failed row
instead of a dead check.  In a level, every case of :data:`CASES` that an algorithm accepts
is run through the public functions with ``algo=<name>`` for each pass of :data:`PASSES`
and compared with :mod:`cconv._reference`, a plain NumPy implementation that shares no code
with the kernels.  The cases cover both layouts and weight layouts, float32 and float64,
stride, dilation, groups (depthwise with a channel multiplier), every padding string,
asymmetric padding and every padding mode.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

from . import _reference as ref

__all__ = ["CASES", "PASSES", "Case", "format_table", "passed", "run_level", "run_levels"]

PASSES = ("forward", "backward_data", "backward_weight", "transposed")
# The conv pass whose kernels run each pass: a transposed convolution is the data gradient of
# the convolution it transposes.
_KERNEL_OP = {"forward": "forward", "backward_data": "backward_data",
              "backward_weight": "backward_weight", "transposed": "backward_data"}
# Largest error, relative to the reference's largest magnitude, that passes: a few roundings
# of a short reduction (Winograd's transforms included) in float32; a wrong index or a
# missed tap gives errors of order 1.
TOLERANCE = {"float32": 1e-4, "float64": 1e-10}

Result = Dict[str, Any]
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Case:
    """One convolution shape of the self-test.

    Attributes
    ----------
    N, C, H, W : int
        Input batch, channels and size.
    K, R, S : int
        Output channels and kernel size.
    stride, dilation : int or (int, int)
    padding : int, str or ((int, int), (int, int))
    groups : int
    layout : {"NCHW", "NHWC"}
    weight_layout : {"OIHW", "HWIO"}
    dtype : {"float32", "float64"}
    padding_mode : str
    padding_value : float
    """

    N: int
    C: int
    H: int
    W: int
    K: int
    R: int
    S: int
    stride: Any = 1
    padding: Any = 0
    dilation: Any = 1
    groups: int = 1
    layout: str = "NCHW"
    weight_layout: str = "OIHW"
    dtype: str = "float32"
    padding_mode: str = "zeros"
    padding_value: float = 0.0

    @property
    def name(self) -> str:
        """A short readable label of the case."""
        parts = [f"{self.N}x{self.C}x{self.H}x{self.W}->{self.K}", f"{self.R}x{self.S}"]
        for label, value, plain in (("stride", self.stride, 1), ("padding", self.padding, 0),
                                    ("dilation", self.dilation, 1), ("groups", self.groups, 1)):
            if value != plain:
                parts.append(f"{label}={value}".replace(" ", ""))
        if self.padding_mode != "zeros":
            parts.append(self.padding_mode + (f"({self.padding_value:g})"
                                              if self.padding_mode == "constant" else ""))
        return " ".join(parts + [f"{self.layout}/{self.weight_layout}", self.dtype])


_ASYM = ((2, 1), (0, 3))
CASES: Tuple[Case, ...] = (
    # general shapes: the direct algorithm; 3x3 stride 1 ones serve Winograd too
    Case(2, 3, 9, 7, 4, 3, 3, padding=1),
    Case(1, 8, 10, 12, 16, 3, 3, padding=1, layout="NHWC", dtype="float64"),
    Case(2, 16, 8, 8, 16, 3, 3, weight_layout="HWIO"),
    Case(1, 20, 6, 6, 24, 3, 3, padding="same", layout="NHWC", weight_layout="HWIO"),
    Case(1, 32, 7, 7, 32, 3, 3, padding=1, dtype="float64"),
    Case(2, 6, 9, 8, 10, 3, 3, padding=1, groups=2),
    Case(1, 4, 11, 9, 6, 3, 3, stride=2, padding=1, layout="NHWC"),
    Case(2, 6, 12, 12, 4, 3, 3, padding=2, dilation=2, groups=2, dtype="float64"),
    Case(1, 5, 7, 7, 3, 5, 5, padding=_ASYM),
    Case(1, 5, 8, 9, 4, 4, 2, stride=(2, 1), padding="same_lower", layout="NHWC"),
    Case(3, 3, 5, 4, 2, 2, 2, padding="same", dtype="float64"),
    Case(1, 4, 6, 6, 5, 3, 3, padding="valid", weight_layout="HWIO"),
    Case(1, 3, 5, 6, 2, 3, 2, padding="full", dilation=(1, 2)),
    Case(2, 7, 6, 5, 9, 1, 3, stride=(1, 2), padding=(0, 1), layout="NHWC", dtype="float64"),
    # 1x1 unpadded: the GEMM algorithm
    Case(2, 8, 6, 6, 16, 1, 1),
    Case(1, 8, 7, 9, 4, 1, 1, stride=2, layout="NHWC", dtype="float64"),
    Case(2, 16, 5, 5, 8, 1, 1, groups=4, layout="NHWC", weight_layout="HWIO"),
    Case(1, 12, 4, 4, 6, 1, 1, groups=3, dtype="float64"),
    # past one strip of channels, one register tile of rows and one 256-pixel panel
    Case(2, 40, 9, 9, 36, 1, 1),
    Case(1, 36, 17, 17, 40, 1, 1, layout="NHWC"),
    # one input channel per group: the depthwise algorithm
    Case(2, 8, 9, 9, 8, 3, 3, padding=1, groups=8),
    Case(1, 6, 10, 8, 12, 3, 3, stride=2, padding=1, groups=6, layout="NHWC"),
    Case(1, 1, 16, 16, 4, 5, 5, padding=2, dtype="float64"),
    Case(1, 12, 8, 8, 12, 3, 3, padding=2, dilation=2, groups=12, layout="NHWC",
         dtype="float64"),
    Case(2, 16, 7, 9, 32, 3, 3, padding="same", groups=16, weight_layout="HWIO"),
    # padding modes (each algorithm sees the padded problem)
    Case(1, 4, 7, 8, 5, 3, 3, padding=1, padding_mode="reflect"),
    Case(2, 3, 6, 5, 4, 3, 3, padding=_ASYM, padding_mode="symmetric", dtype="float64"),
    Case(1, 6, 8, 8, 6, 3, 3, padding=2, padding_mode="replicate", layout="NHWC"),
    Case(1, 5, 6, 7, 3, 5, 3, padding="same", padding_mode="circular", dtype="float64"),
    Case(1, 4, 6, 6, 4, 3, 3, padding=1, padding_mode="constant", padding_value=0.75),
    Case(2, 8, 8, 8, 8, 3, 3, stride=2, padding=1, groups=8, padding_mode="reflect",
         layout="NHWC"),
    Case(1, 16, 8, 8, 16, 3, 3, padding=1, padding_mode="circular", weight_layout="HWIO"),
)


def _pair(v: Any) -> Tuple[int, int]:
    return (int(v), int(v)) if np.ndim(v) == 0 else (int(v[0]), int(v[1]))


def _geometry(case: Case) -> Tuple[Tuple[int, int], Tuple[int, int], ref.Pads,
                                   Tuple[int, int, int, int]]:
    """Stride, dilation, per-side pads and the (N, K, OH, OW) output shape of ``case``."""
    stride, dilation = _pair(case.stride), _pair(case.dilation)
    pads = ref.resolve_padding(case.padding, (case.H, case.W), (case.R, case.S), stride,
                               dilation)
    oh = ref.output_size(case.H, case.R, stride[0], dilation[0], *pads[0])
    ow = ref.output_size(case.W, case.S, stride[1], dilation[1], *pads[1])
    return stride, dilation, pads, (case.N, case.K, oh, ow)


def _to_layout(a: npt.NDArray[Any], case: Case) -> npt.NDArray[Any]:
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)) if case.layout == "NHWC" else a


def _from_layout(a: npt.NDArray[Any], case: Case) -> npt.NDArray[Any]:
    return a.transpose(0, 3, 1, 2) if case.layout == "NHWC" else a


def _to_weight_layout(w: npt.NDArray[Any], case: Case) -> npt.NDArray[Any]:
    return np.ascontiguousarray(w.transpose(2, 3, 1, 0)) if case.weight_layout == "HWIO" else w


def _from_weight_layout(w: npt.NDArray[Any], case: Case) -> npt.NDArray[Any]:
    return w.transpose(3, 2, 0, 1) if case.weight_layout == "HWIO" else w


def _shape_in(shape: Tuple[int, ...], layout: str) -> Tuple[int, ...]:
    return (shape[0], shape[2], shape[3], shape[1]) if layout == "NHWC" else tuple(shape)


class _Operands:
    """Random operands of one case, in the case's dtype, and the reference results."""

    def __init__(self, case: Case, rng: np.random.Generator) -> None:
        self.case = case
        self.stride, self.dilation, self.pads, y_shape = _geometry(case)
        dtype = np.dtype(case.dtype)
        self.x = rng.standard_normal((case.N, case.C, case.H, case.W)).astype(dtype)
        self.w = rng.standard_normal((case.K, case.C // case.groups, case.R, case.S)
                                     ).astype(dtype)
        self.bias = rng.standard_normal(case.K).astype(dtype)
        self.dy = rng.standard_normal(y_shape).astype(dtype)

    def _geo(self) -> Dict[str, Any]:
        return dict(stride=self.stride, pads=self.pads, dilation=self.dilation,
                    groups=self.case.groups, mode=self.case.padding_mode)

    def reference(self, pss: str) -> F64:
        """The float64 reference result of pass ``pss``, NCHW / OIHW."""
        value = self.case.padding_value
        if pss == "forward":
            y = ref.forward(self.x, self.w, value=value, **self._geo())
            return y + self.bias.astype(np.float64)[None, :, None, None]
        if pss == "backward_weight":
            return ref.backward_weight(self.dy, self.x, self.w.shape, value=value,
                                       **self._geo())
        return ref.backward_data(self.dy, self.w, self.x.shape, **self._geo())

    def call(self, pss: str, algo: str) -> npt.NDArray[Any]:
        """Run pass ``pss`` through cconv's public functions; the result NCHW / OIHW."""
        import cconv

        case = self.case
        kw: Dict[str, Any] = dict(stride=case.stride, dilation=case.dilation,
                                  groups=case.groups, layout=case.layout,
                                  weight_layout=case.weight_layout, algo=algo)
        if case.padding_mode != "zeros":
            kw["padding_mode"] = case.padding_mode
        x, dy = _to_layout(self.x, case), _to_layout(self.dy, case)
        w = _to_weight_layout(self.w, case)
        if pss == "transposed":
            # The transposed convolution's weight (C_in, K/groups, R, S) is the convolution's
            # (K, C/groups, R, S); its padding is given per side (strings mean other rules).
            out = cconv.conv_transpose2d(dy, w, padding=self.pads,
                                         output_shape=_shape_in(self.x.shape, case.layout),
                                         **kw)
            return _from_layout(out, case)
        kw["padding"] = case.padding
        if case.padding_mode == "constant":
            kw["padding_value"] = case.padding_value
        if pss == "forward":
            return _from_layout(cconv.conv2d(x, w, self.bias, **kw), case)
        if pss == "backward_data":
            out = cconv.conv2d_backward_data(dy, w, _shape_in(self.x.shape, case.layout), **kw)
            return _from_layout(out, case)
        w_shape = _to_weight_layout(np.empty(self.w.shape, np.int8), case).shape
        return _from_weight_layout(cconv.conv2d_backward_weight(dy, x, w_shape, **kw), case)


def _applies(algo: str, case: Case, pss: str) -> bool:
    """Whether ``algo`` can run ``pss`` on ``case`` (the library's own applicability rule)."""
    import cconv
    from cconv import algorithms

    if algo == "auto":
        return True
    extra: Dict[str, Any] = ({} if case.padding_mode == "zeros"
                             else {"padding_mode": case.padding_mode})
    if case.padding_mode == "constant":
        extra["padding_value"] = case.padding_value
    plan = cconv.plan_conv2d(
        _shape_in((case.N, case.C, case.H, case.W), case.layout),
        _to_weight_layout(np.empty((case.K, case.C // case.groups, case.R, case.S), np.int8),
                          case).shape,
        stride=case.stride, padding=case.padding, dilation=case.dilation, groups=case.groups,
        layout=case.layout, weight_layout=case.weight_layout, dtype=case.dtype, **extra)
    return algorithms.why_not(algo, plan.geometry, _KERNEL_OP[pss]) is None


def _relative_error(result: npt.NDArray[Any], expected: F64) -> float:
    got = np.asarray(result, np.float64)
    if got.shape != expected.shape:
        return float("inf")
    scale = float(np.max(np.abs(expected))) if expected.size else 0.0
    diff = float(np.max(np.abs(got - expected))) if expected.size else 0.0
    return diff / (scale or 1.0)


def _supported(case: Case) -> bool:
    """False for padding modes this build does not know (checked by the API, not assumed)."""
    if case.padding_mode == "zeros":
        return True
    import inspect

    import cconv

    return "padding_mode" in inspect.signature(cconv.conv2d).parameters


def run_level(cases: Sequence[Case] = CASES, seed: int = 0) -> List[Result]:
    """Run every case, algorithm and pass on the SIMD level this process loaded.

    Parameters
    ----------
    cases : sequence of Case, optional
        Default :data:`CASES`.
    seed : int, optional
        Seed of the random operands.

    Returns
    -------
    list of dict
        One record per (case, algorithm, pass) that the algorithm accepts: ``level``,
        ``algo``, ``pass``, ``case``, ``dtype``, ``ok``, ``error`` (relative to the
        reference's largest magnitude), ``tolerance`` and ``message`` (an exception's text).
    """
    import cconv
    from cconv import _simd

    rng = np.random.default_rng(seed)
    results: List[Result] = []
    for case in cases:
        if not _supported(case):
            continue
        operands = _Operands(case, rng)
        tol = TOLERANCE[case.dtype]
        for pss in PASSES:
            expected = operands.reference(pss)
            for algo in ("auto", *cconv.ALGORITHMS):
                record: Result = dict(level=_simd.LEVEL, algo=algo, pass_=pss, case=case.name,
                                      dtype=case.dtype, tolerance=tol, error=None,
                                      message="", ok=False)
                try:
                    if not _applies(algo, case, pss):
                        continue
                    err = _relative_error(operands.call(pss, algo), expected)
                    record.update(error=err, ok=bool(err <= tol))
                except Exception as exc:  # a failure of any kind is a row of the report
                    record["message"] = f"{type(exc).__name__}: {exc}"
                results.append(record)
    return results


def _child_main() -> None:
    """Entry of a per-level subprocess: the records of :func:`run_level` as JSON on stdout."""
    json.dump(run_level(), sys.stdout)


def _run_in_subprocess(level: str, timeout: float) -> Tuple[List[Result], float]:
    # The subprocess imports the same cconv as this process, whatever its working directory.
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = (f"import sys; sys.path.insert(0, {package_parent!r}); "
            "from cconv._selfcheck import _child_main; _child_main()")
    env = dict(os.environ, CCONV_SIMD=level)
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=timeout)
        records: List[Result] = json.loads(done.stdout) if done.returncode == 0 else []
        problem = "" if done.returncode == 0 else (
            f"exit status {done.returncode}: {done.stderr.strip()[-2000:]}")
    except subprocess.TimeoutExpired:
        records, problem = [], f"timed out after {timeout:g} s"
    except ValueError as exc:  # unreadable output
        records, problem = [], f"unreadable output: {exc}"
    if problem:
        records = [dict(level=level, algo="*", pass_="*", case="(the whole level)",
                        dtype="-", tolerance=None, error=None, message=problem, ok=False)]
    return records, time.perf_counter() - start


def run_levels(levels: Optional[Sequence[str]] = None, timeout: float = 300.0,
               progress: Optional[Callable[[str], None]] = None) -> Dict[str, Any]:
    """Run :func:`run_level` once per SIMD level, each in a fresh subprocess.

    Parameters
    ----------
    levels : sequence of str, optional
        Default: every level this CPU supports and this build has.
    timeout : float, optional
        Seconds one level may take.
    progress : callable, optional
        Called with a line of text as each level finishes.

    Returns
    -------
    dict
        ``levels`` (the levels run), ``results`` (the records of every level) and
        ``seconds`` (per level).

    Raises
    ------
    ValueError
        If a level is not available here.
    """
    from cconv import _simd

    available = _simd.available_levels()
    chosen = list(available if levels is None else levels)
    unknown = [lv for lv in chosen if lv not in available]
    if unknown or not chosen:
        raise ValueError(f"levels: {unknown or chosen} not available here; this CPU and "
                         f"build have {', '.join(available)}")
    results: List[Result] = []
    seconds: Dict[str, float] = {}
    for level in chosen:
        records, elapsed = _run_in_subprocess(level, timeout)
        results.extend(records)
        seconds[level] = elapsed
        if progress is not None:
            bad = sum(not r["ok"] for r in records)
            progress(f"{level}: {len(records)} checks, {bad} failed ({elapsed:.1f} s)")
    return {"levels": chosen, "results": results, "seconds": seconds,
            "cases": [dict(asdict(c), name=c.name) for c in CASES]}


def format_table(report: Dict[str, Any]) -> str:
    """The results of :func:`run_levels` as a text table, failures listed below it.

    Parameters
    ----------
    report : dict
        What :func:`run_levels` returned.

    Returns
    -------
    str
        One row per (algorithm, pass), one column per SIMD level: the number of cases
        that passed out of those run (``FAIL`` when any failed, ``none`` when no case
        applied), and the worst error relative to its tolerance over all levels.
    """
    import cconv

    levels: List[str] = report["levels"]
    results: List[Result] = report["results"]
    head = ["algorithm", "pass", *levels, "worst err/tol"]
    rows = [head]
    for algo in ("auto", *cconv.ALGORITHMS):
        for pss in PASSES:
            cells = [algo, pss]
            worst = 0.0
            for level in levels:
                mine = [r for r in results if r["algo"] in (algo, "*") and r["level"] == level
                        and r["pass_"] in (pss, "*")]
                bad = sum(not r["ok"] for r in mine)
                cells.append("none" if not mine else f"FAIL {bad}/{len(mine)}" if bad
                             else f"ok {len(mine)}")
                for r in mine:
                    if r["error"] is not None and r["tolerance"]:
                        worst = max(worst, r["error"] / r["tolerance"])
            cells.append(f"{worst:.2g}")
            rows.append(cells)
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    failures = [r for r in results if not r["ok"]]
    for r in failures[:50]:
        detail = r["message"] or f"error {r['error']:.3g} > tolerance {r['tolerance']:g}"
        lines.append(f"FAIL [{r['level']}] {r['algo']} {r['pass_']} {r['case']}: {detail}")
    if len(failures) > 50:
        lines.append(f"... and {len(failures) - 50} more failures")
    return "\n".join(lines)


def passed(report: Dict[str, Any]) -> bool:
    """True when every check passed and every (algorithm, pass) ran at least one case.

    Parameters
    ----------
    report : dict
        What :func:`run_levels` returned.

    Returns
    -------
    bool
    """
    import cconv

    results: List[Result] = report["results"]
    if not results or not all(r["ok"] for r in results):
        return False
    ran = {(r["level"], r["algo"], r["pass_"]) for r in results}
    return all((level, algo, pss) in ran for level in report["levels"]
               for algo in ("auto", *cconv.ALGORITHMS) for pss in PASSES)
