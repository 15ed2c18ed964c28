"""Benchmark suite of 1-D and 3-D layers: cconv against PyTorch's best layout, in one process.

For every layer of :data:`ND_LAYERS`, every pass (``forward``, ``backward_data``,
``backward_weight``) and every thread count, cconv is timed in both of its layouts (``NCW`` /
``NWC``, ``NCDHW`` / ``NDHWC``) and PyTorch in both of its own (contiguous, and channels last:
``torch.channels_last_3d`` in 3-D, a permuted NWC view in 1-D) on the same arrays, all calls
of one (layer, pass, threads) interleaved.  Throughput is GFLOP/s of the direct count
``2 * N * K * prod(output) * (C / groups) * prod(kernel)``; ``ratio`` is cconv's best
layout over PyTorch's best layout (> 1: cconv faster).

From the command line: ``python bench/nd_bench.py --help``.  From Python::

    from cconv.benchmark import nd_suite
    res = nd_suite.run_nd_suite(rank=3, quick=True)
    print(nd_suite.format_nd_markdown(res))
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from .. import _geometry as _geometry_module
from .. import functional_nd
from . import environment
from .contenders import import_torch, max_rel_err
from .timing import BATCH_SECONDS, PRIME_SECONDS, summarize, time_interleaved

__all__ = ["ND_LAYERS", "NdLayer", "PASSES", "format_nd_markdown", "nd_flops", "run_nd_suite",
           "select_nd_layers"]

# cconv's 2-D modules carry no type hints: an Any-typed alias keeps ``mypy --strict`` quiet.
_g2: Any = _geometry_module

PASSES = ("forward", "backward_data", "backward_weight")
Array = np.ndarray[Any, Any]
Row = Dict[str, Any]


class NdLayer(NamedTuple):
    """One 1-D or 3-D convolution layer of the suite.

    Input ``(N, C, *spatial)``, weight ``(K, C/groups, *kernel)``; ``stride``, ``padding``
    (each side) and ``dilation`` are the same along every axis; ``groups == C`` is
    depthwise.

    Attributes
    ----------
    name : str
    N, C, K : int
        Batch, input and output channels.
    spatial, kernel : tuple of int
        Input and kernel size per spatial axis (1 or 3 entries).
    stride, padding, dilation, groups : int
    """

    name: str
    N: int
    C: int
    K: int
    spatial: Tuple[int, ...]
    kernel: Tuple[int, ...]
    stride: int = 1
    padding: int = 0
    dilation: int = 1
    groups: int = 1

    @property
    def rank(self) -> int:
        """The number of spatial axes."""
        return len(self.spatial)

    @property
    def output(self) -> Tuple[int, ...]:
        """The output's spatial sizes."""
        p = self.padding
        return tuple(int(_g2.conv_output_size(s, k, self.stride, self.dilation, p, p))
                     for s, k in zip(self.spatial, self.kernel))

    def quick(self) -> "NdLayer":
        """A small version for smoke tests: batch 1, each axis cut to what the kernel needs
        plus a little (4096 samples in 1-D, 12 in 3-D)."""
        cap = 4096 if self.rank == 1 else 12
        spatial = tuple(max(min(s, cap), self.dilation * (k - 1) + 1)
                        for s, k in zip(self.spatial, self.kernel))
        return self._replace(N=1, spatial=spatial)


def _wavenet(channels: int, kernel: int, dilation: int, n: int) -> NdLayer:
    return NdLayer(f"wavenet.{channels}.k{kernel}.d{dilation}", n, channels, channels,
                   (16384,), (kernel,), dilation=dilation)


# WaveNet-style dilated stacks (unpadded, as the causal crop of a real stack leaves them),
# a filter bank over a long signal, and 3-D layers of C3D, a 3-D U-Net and a depthwise
# (separable) 3-D network.
ND_LAYERS: Tuple[NdLayer, ...] = (
    *(_wavenet(64, 2, d, 4) for d in (1, 8, 64, 512)),
    *(_wavenet(64, 3, d, 4) for d in (1, 32)),
    *(_wavenet(256, 2, d, 1) for d in (1, 16, 256)),
    _wavenet(256, 3, 4, 2),
    NdLayer("filterbank.1-32.k63", 1, 1, 32, (1 << 20,), (63,), padding=31),
    NdLayer("c3d.64.16x56x56", 2, 64, 64, (16, 56, 56), (3, 3, 3), padding=1),
    NdLayer("c3d.128.8x28x28", 2, 128, 128, (8, 28, 28), (3, 3, 3), padding=1),
    NdLayer("unet3d.32.64cube", 1, 32, 32, (64, 64, 64), (3, 3, 3), padding=1),
    NdLayer("depthwise3d.64.16x56x56", 2, 64, 64, (16, 56, 56), (3, 3, 3), padding=1,
            groups=64),
)


def nd_flops(layer: NdLayer, n: Optional[int] = None) -> int:
    """FLOPs of one pass of ``layer``, counted as direct convolution.

    Parameters
    ----------
    layer : NdLayer
    n : int, optional
        Batch size; default ``layer.N``.

    Returns
    -------
    int
        ``2 * N * K * prod(output) * (C / groups) * prod(kernel)``.
    """
    n = layer.N if n is None else n
    return (2 * n * layer.K * math.prod(layer.output) * (layer.C // layer.groups)
            * math.prod(layer.kernel))


def select_nd_layers(spec: Union[None, str, Sequence[str]] = None, rank: Optional[int] = None,
                     layers: Sequence[NdLayer] = ND_LAYERS) -> List[NdLayer]:
    """The layers of rank ``rank`` (1, 3 or None for both) whose name contains a substring.

    Parameters
    ----------
    spec : str or sequence of str, optional
        Comma-separated case-insensitive substrings; None, "" or "all": every layer.
    rank : {1, 3}, optional
    layers : sequence of NdLayer, optional

    Returns
    -------
    list of NdLayer

    Raises
    ------
    ValueError
        If nothing matches.
    """
    pool = [la for la in layers if rank is None or la.rank == rank]
    subs = [s.strip().lower() for s in (spec.split(",") if isinstance(spec, str) else
                                         (spec or [])) if s.strip()]
    chosen = pool if not subs or "all" in subs else [
        la for la in pool if any(s in la.name.lower() for s in subs)]
    if not chosen:
        raise ValueError(f"layers={spec!r} (rank {rank}) matches none of: "
                         f"{', '.join(la.name for la in pool)}")
    return chosen


# -- the timed calls -------------------------------------------------------------------------

def _layouts(rank: int) -> Tuple[Tuple[str, str], Tuple[str, str]]:
    """((channels-first layout, weight layout), (channels-last ones))."""
    return (("NCW", "OIW"), ("NWC", "WIO")) if rank == 1 else (("NCDHW", "OIDHW"),
                                                               ("NDHWC", "DHWIO"))


def _last(a: Array) -> Array:
    return np.ascontiguousarray(np.moveaxis(a, 1, -1))


def _weight_last(w: Array) -> Array:
    return np.ascontiguousarray(np.transpose(w, (*range(2, w.ndim), 1, 0)))


def _same(a: Array) -> Array:
    return a


def _first(a: Array) -> Array:
    """A channels-last result as a channels-first view."""
    return np.moveaxis(a, -1, 1)


def _weight_first(w: Array) -> Array:
    """A (*kernel, I, O) weight as an (O, I, *kernel) view."""
    return np.transpose(w, (w.ndim - 1, w.ndim - 2, *range(w.ndim - 2)))


def make_nd_data(layer: NdLayer, n: int, rng: np.random.Generator) -> Dict[str, Array]:
    """Random float32 operands of ``layer`` with batch ``n``, in both layouts.

    Parameters
    ----------
    layer : NdLayer
    n : int
    rng : numpy.random.Generator

    Returns
    -------
    dict
        ``x``, ``w``, ``gy`` channels first and ``x_last``, ``w_last``, ``gy_last``.
    """
    cg = layer.C // layer.groups
    x = rng.standard_normal((n, layer.C, *layer.spatial), dtype=np.float32)
    w = rng.standard_normal((layer.K, cg, *layer.kernel), dtype=np.float32)
    w /= np.float32(math.sqrt(cg * math.prod(layer.kernel)))  # outputs near unit size
    gy = rng.standard_normal((n, layer.K, *layer.output), dtype=np.float32)
    return {"x": x, "w": w, "gy": gy, "x_last": _last(x), "w_last": _weight_last(w),
            "gy_last": _last(gy)}


def cconv_nd_call(layer: NdLayer, pss: str, data: Dict[str, Array], last: bool,
                  threads: int) -> Callable[[], Array]:
    """A zero-argument callable running one cconv pass in one layout; it returns the result
    channels first.

    Parameters
    ----------
    layer : NdLayer
    pss : {"forward", "backward_data", "backward_weight"}
    data : dict
        From :func:`make_nd_data`.
    last : bool
        Channels-last layouts (``NWC`` / ``NDHWC``).
    threads : int

    Returns
    -------
    callable
    """
    (layout, wl) = _layouts(layer.rank)[int(last)]
    suffix = "_last" if last else ""
    x, w, gy = data["x" + suffix], data["w" + suffix], data["gy" + suffix]
    name = f"conv{layer.rank}d"
    kw: Dict[str, Any] = dict(stride=layer.stride, padding=layer.padding,
                              dilation=layer.dilation, groups=layer.groups, layout=layout,
                              weight_layout=wl, num_threads=threads)
    back = _first if last else _same
    wback = _weight_first if last else _same
    if pss == "forward":
        fn = getattr(functional_nd, name)
        return lambda: back(fn(x, w, **kw))
    if pss == "backward_data":
        fn = getattr(functional_nd, name + "_backward_data")
        return lambda: back(fn(gy, w, x.shape, **kw))
    fn = getattr(functional_nd, name + "_backward_weight")
    return lambda: wback(fn(gy, x, w.shape, **kw))


def torch_nd_call(torch: Any, layer: NdLayer, pss: str, data: Dict[str, Array],
                  last: bool) -> Callable[[], Any]:
    """A zero-argument callable running one PyTorch pass on cconv's arrays (shared memory).

    ``last``: the channels-last tensors (``torch.channels_last_3d`` memory in 3-D, a
    permuted NWC view in 1-D).  Gradients call ``aten.convolution_backward`` directly, so
    no forward pass or autograd bookkeeping is timed with them.

    Parameters
    ----------
    torch : module
    layer : NdLayer
    pss : {"forward", "backward_data", "backward_weight"}
    data : dict
        From :func:`make_nd_data`.
    last : bool

    Returns
    -------
    callable
        Returns a NumPy array, channels first.
    """
    if last:
        order = (0, layer.rank + 1, *range(1, layer.rank + 1))
        tx = torch.from_numpy(data["x_last"]).permute(*order)
        tgy = torch.from_numpy(data["gy_last"]).permute(*order)
        # The weight channels last as well, (K, *kernel, C/groups) in memory, made once here
        # so that no call converts it.
        tw = torch.from_numpy(np.ascontiguousarray(np.moveaxis(data["w"], 1, -1)))
        tw = tw.permute(*order)
    else:
        tx, tw, tgy = (torch.from_numpy(data[k]) for k in ("x", "w", "gy"))
    rank = layer.rank
    st, pd, dl = [layer.stride] * rank, [layer.padding] * rank, [layer.dilation] * rank
    conv = getattr(torch.nn.functional, f"conv{rank}d")

    if pss == "forward":
        def forward() -> Any:
            with torch.no_grad():
                return conv(tx, tw, None, st, pd, dl, layer.groups).numpy()
        return forward
    mask = [pss == "backward_data", pss == "backward_weight", False]
    idx = 0 if pss == "backward_data" else 1
    op = torch.ops.aten.convolution_backward

    def backward() -> Any:
        with torch.no_grad():
            return op(tgy, tx, tw, None, st, pd, dl, False, [0] * rank, layer.groups,
                      mask)[idx].numpy()
    return backward


# -- the runner --------------------------------------------------------------------------------

def run_nd_suite(layers: Union[None, str, Sequence[str], Sequence[NdLayer]] = None,
                 rank: Optional[int] = None, passes: Sequence[str] = PASSES,
                 threads: Sequence[int] = (1, 2), repeats: int = 5, warmup: int = 1,
                 min_time: float = 0.0, quick: bool = False, torch: bool = True,
                 progress: Optional[Callable[[str], None]] = None,
                 timer: Callable[[], float] = time.perf_counter, seed: int = 0,
                 ) -> Dict[str, Any]:
    """Time cconv's 1-D / 3-D passes in both layouts against PyTorch's (float32).

    Parameters
    ----------
    layers : str, sequence of str or sequence of NdLayer, optional
        Name substrings (see :func:`select_nd_layers`) or layers to run as given.
    rank : {1, 3}, optional
        Only the layers of this rank (default both).
    passes : sequence of str
        Among ``"forward"``, ``"backward_data"``, ``"backward_weight"``.
    threads : sequence of int
        Thread counts; each is given to cconv (``num_threads=``) and to
        ``torch.set_num_threads``.
    repeats, warmup, min_time
        As in :func:`cconv.benchmark.run_suite`.
    quick : bool
        Smoke test: every layer shrunk (:meth:`NdLayer.quick`), at most 2 repeats.
    torch : bool
        Compare with PyTorch when it is importable.
    progress : callable, optional
        Called with one line of text per (layer, pass, threads).
    timer : callable, optional
    seed : int, optional

    Returns
    -------
    dict
        ``{"meta": {...}, "results": [row, ...]}``, one row per (layer, pass, threads): the
        layer, ``flops``, an entry per contender (``"cconv:NCDHW"``, ``"torch:NDHWC"``, ...;
        ``status``, ``median_s``, ``gflops``, ...), ``best_cconv`` / ``best_torch`` (the
        label of the fastest of each), ``ratio`` (best cconv / best torch GFLOP/s), and
        ``max_rel_err`` of each cconv layout against PyTorch's contiguous result.
    """
    for p in passes:
        if p not in PASSES:
            raise ValueError(f"passes: unknown pass {p!r}; choose from {', '.join(PASSES)}")
    thread_list = [int(t) for t in threads]
    if not thread_list or min(thread_list) < 1:
        raise ValueError(f"threads: positive thread counts needed, got {threads!r}")
    if layers is not None and not isinstance(layers, str) and all(
            isinstance(la, NdLayer) for la in layers):
        layer_list = [la for la in layers if isinstance(la, NdLayer)]
    else:
        layer_list = select_nd_layers(layers, rank)  # type: ignore[arg-type]  # names
    if quick:
        layer_list = [la.quick() for la in layer_list]
        repeats, min_time = min(repeats, 2), 0.0
    tmod = import_torch() if torch else None
    meta = environment.describe(max(thread_list), tmod, torch)
    meta.update({"dtype": "float32", "passes": list(passes), "threads_list": thread_list,
                 "repeats": repeats, "warmup": warmup, "min_time": min_time,
                 "quick": bool(quick),
                 "flops_formula": "2*N*K*prod(output)*(C/groups)*prod(kernel) per pass",
                 "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    rng = np.random.default_rng(seed)
    results: List[Row] = []
    start = time.perf_counter()
    for layer in layer_list:
        data = make_nd_data(layer, layer.N, rng)
        flops = nd_flops(layer)
        for nthreads in thread_list:
            if tmod is not None:
                tmod.set_num_threads(nthreads)
            for pss in passes:
                contenders: Dict[str, Callable[[], Any]] = {}
                for last in (False, True):
                    label = _layouts(layer.rank)[int(last)][0]
                    contenders["cconv:" + label] = cconv_nd_call(layer, pss, data, last,
                                                                 nthreads)
                    if tmod is not None:
                        contenders["torch:" + label] = torch_nd_call(tmod, layer, pss, data,
                                                                     last)
                # primed, batched rounds, as the layer suite (see timing.PRIME_SECONDS)
                times, outputs, errors = time_interleaved(
                    contenders, warmup, repeats, timer, min_time, settle=0.0,
                    prime=PRIME_SECONDS, batch=BATCH_SECONDS)
                row = _row(layer, pss, nthreads, flops, times, outputs, errors)
                results.append(row)
                if progress is not None:
                    progress(_progress_line(row))
    meta["elapsed_s"] = time.perf_counter() - start
    return {"meta": meta, "results": results}


def _row(layer: NdLayer, pss: str, nthreads: int, flops: int, times: Dict[str, List[float]],
         outputs: Dict[str, Any], errors: Dict[str, str]) -> Row:
    """The result row of one (layer, pass, threads)."""
    entries: Dict[str, Any] = {}
    for label in list(times) + [e for e in errors if e not in times]:
        entries[label] = (dict(status="ok", **summarize(times[label], flops)) if label in times
                          else {"status": "error", "error": errors[label]})

    def best(prefix: str) -> Optional[str]:
        ok = [k for k, v in entries.items() if k.startswith(prefix) and v["status"] == "ok"]
        return max(ok, key=lambda k: entries[k]["gflops"]) if ok else None

    best_c, best_t = best("cconv:"), best("torch:")
    ratio = (entries[best_c]["gflops"] / entries[best_t]["gflops"]
             if best_c is not None and best_t is not None else None)
    first = _layouts(layer.rank)[0][0]
    ref = outputs.get("torch:" + first)
    errs = {k: max_rel_err(v, ref) for k, v in outputs.items()
            if k.startswith("cconv:") and ref is not None}
    return {"layer": layer.name, "rank": layer.rank, "N": layer.N, "C": layer.C, "K": layer.K,
            "spatial": list(layer.spatial), "kernel": list(layer.kernel),
            "stride": layer.stride, "padding": layer.padding, "dilation": layer.dilation,
            "groups": layer.groups, "pass": pss, "threads": nthreads, "flops": flops,
            "contenders": entries, "best_cconv": best_c, "best_torch": best_t,
            "ratio": ratio, "max_rel_err": errs}


def _progress_line(row: Row) -> str:
    cells = [f"{k} {v['gflops']:.1f}" for k, v in row["contenders"].items()
             if v["status"] == "ok"]
    ratio = "" if row["ratio"] is None else f" ratio {row['ratio']:.2f}"
    return (f"{row['layer']:<26} {row['pass']:<15} T={row['threads']} GFLOP/s: "
            f"{', '.join(cells)}{ratio}")


def _shape(row: Row) -> str:
    kern = "x".join(map(str, row["kernel"]))
    text = f"{row['N']}x{row['C']}->{row['K']} k{kern} on {'x'.join(map(str, row['spatial']))}"
    for key, default, tag in (("stride", 1, "s"), ("padding", 0, "p"), ("dilation", 1, "d"),
                              ("groups", 1, "g")):
        if row[key] != default:
            text += f" {tag}{row[key]}"
    return text


def format_nd_markdown(result: Dict[str, Any]) -> str:
    """Render :func:`run_nd_suite`'s result as markdown: a header, then one table per rank.

    Parameters
    ----------
    result : dict

    Returns
    -------
    str
        Columns: layer, shape, pass, threads, GFLOP/s of each contender, ``ratio`` (cconv's
        best layout / PyTorch's best layout) and cconv's largest error relative to PyTorch
        (flagged ``!`` above 1e-3).  A geometric mean of the ratios per rank and thread count
        follows each table.
    """
    m = result["meta"]
    lines = ["# cconv 1-D / 3-D benchmark", "",
             f"- cconv {m['cconv_version']}; torch {m['torch_version']}; numpy "
             f"{m['numpy_version']}; Python {m['python']}",
             f"- CPU: {m['cpu_model']} ({m['cpu_count']} logical CPUs); threads "
             f"{m['threads_list']}",
             f"- float32; median of {m['repeats']} timed calls after {m['warmup']} warm-up, "
             f"contenders interleaved; GFLOP/s = {m['flops_formula']} / median",
             "- ratio = cconv's best layout / PyTorch's best layout (> 1: cconv faster)"]
    if m.get("quick"):
        lines.append("- **quick mode**: shrunk layers, batch 1 (smoke test, not representative)")
    for rank in (1, 3):
        rows = [r for r in result["results"] if r["rank"] == rank]
        if not rows:
            continue
        labels = sorted({k for r in rows for k in r["contenders"]})
        head = ["layer", "shape", "pass", "threads", *labels, "ratio", "max err"]
        lines += ["", f"## {rank}-D", "", "| " + " | ".join(head) + " |",
                  "|" + "|".join(["---"] * 4 + ["---:"] * (len(head) - 4)) + "|"]
        for r in rows:
            cells = [r["layer"], _shape(r), r["pass"], str(r["threads"])]
            for label in labels:
                e = r["contenders"].get(label)
                cells.append(f"{e['gflops']:.1f}" if e and e["status"] == "ok" else "-")
            cells.append("-" if r["ratio"] is None else f"{r['ratio']:.2f}")
            err = max(r["max_rel_err"].values(), default=None)
            cells.append("-" if err is None else f"{err:.1e}" + ("!" if not err <= 1e-3 else ""))
            lines.append("| " + " | ".join(cells) + " |")
        for t in m["threads_list"]:
            ratios = [r["ratio"] for r in rows if r["threads"] == t and r["ratio"]]
            if ratios:
                geo = math.exp(sum(math.log(v) for v in ratios) / len(ratios))
                lines.append(f"\nGeometric mean of the ratios, {t} thread(s): {geo:.2f} "
                             f"(min {min(ratios):.2f})")
    return "\n".join(lines) + "\n"
