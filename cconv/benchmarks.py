"""Benchmark suite of real network layers: cconv against PyTorch, one process.

What it measures
----------------
For every layer of :data:`LAYERS`, every requested pass (``forward``,
``backward_data``, ``backward_weight``) and every requested cconv algorithm
(``auto`` by default), the wall time of one call is taken with
:func:`time.perf_counter`: a warm-up call first, then the median of
``repeats`` calls.  When PyTorch is importable, the same pass is timed with
``torch.nn.functional.conv2d`` / ``torch.ops.aten.convolution_backward`` on
the *same* NCHW arrays (shared memory through ``torch.from_numpy``), with
``torch.set_num_threads`` equal to cconv's thread count.  The repeats of all
contenders of one (layer, pass) are interleaved, with a rotating order, so
that noise on the machine hits all of them alike.

Throughput is reported as GFLOP/s with the direct-convolution count

    FLOPs = 2 * N * K * OH * OW * (C / groups) * R * S

for each of the three passes (so Winograd's figure is an *effective*
throughput), and ``ratio = cconv GFLOP/s / torch GFLOP/s`` (> 1 means cconv
is faster).

Use it as ``python -m cconv bench [options]`` (see ``--help``) or from Python::

    from cconv import benchmarks
    res = benchmarks.run_suite(layers="res3", passes=("forward",), repeats=3)
    print(benchmarks.format_markdown(res))
"""

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from collections import namedtuple

import numpy as np

import cconv

__all__ = [
    "Layer",
    "LAYERS",
    "PASSES",
    "conv_flops",
    "output_size",
    "select_layers",
    "run_suite",
    "format_markdown",
    "build_parser",
    "add_bench_arguments",
    "main",
]

PASSES = ("forward", "backward_data", "backward_weight")

#: One convolution layer of the suite.  ``stride``, ``padding`` and
#: ``dilation`` are symmetric ints; ``groups == C`` is depthwise.
#: ``reduced_n`` is the batch the default (non ``--full``) run uses for the
#: layer; ``None`` means the real ``N``.
Layer = namedtuple(
    "Layer",
    "name N C K H W R S stride padding dilation groups reduced_n",
    defaults=(None,),
)

# The layer suite of issue 2 (N=8 unless noted).  Columns:
#   name, N, C, K, H, W, R, S, stride, padding, dilation, groups[, reduced_n]
LAYERS = (
    Layer("resnet50.conv1", 8, 3, 64, 224, 224, 7, 7, 2, 3, 1, 1),
    Layer("resnet50.res2.3x3", 8, 64, 64, 56, 56, 3, 3, 1, 1, 1, 1),
    Layer("resnet50.res2.1x1_64-256", 8, 64, 256, 56, 56, 1, 1, 1, 0, 1, 1),
    Layer("resnet50.res2.1x1_256-64", 8, 256, 64, 56, 56, 1, 1, 1, 0, 1, 1),
    Layer("resnet50.res3.3x3", 8, 128, 128, 28, 28, 3, 3, 1, 1, 1, 1),
    Layer("resnet50.res3.3x3s2", 8, 128, 128, 56, 56, 3, 3, 2, 1, 1, 1),
    Layer("resnet50.res4.3x3", 8, 256, 256, 14, 14, 3, 3, 1, 1, 1, 1),
    Layer("resnet50.res5.3x3", 8, 512, 512, 7, 7, 3, 3, 1, 1, 1, 1),
    Layer("vgg16.conv1_2", 2, 64, 64, 224, 224, 3, 3, 1, 1, 1, 1),
    Layer("vgg16.conv3_2", 8, 256, 256, 56, 56, 3, 3, 1, 1, 1, 1),
    Layer("vgg16.conv4_2", 8, 512, 512, 28, 28, 3, 3, 1, 1, 1, 1),
    Layer("mobilenetv2.dw144", 8, 144, 144, 56, 56, 3, 3, 1, 1, 1, 144),
    Layer("mobilenetv2.dw384s2", 8, 384, 384, 28, 28, 3, 3, 2, 1, 1, 384),
    Layer("dilated.64.d2", 8, 64, 64, 128, 128, 3, 3, 1, 2, 2, 1),
    Layer("filter.1-16.5x5", 4, 1, 16, 512, 512, 5, 5, 1, 2, 1, 1),
    Layer("rgb.3-32.3x3", 8, 3, 32, 256, 256, 3, 3, 1, 1, 1, 1),
    Layer("batch1.128.3x3", 1, 128, 128, 28, 28, 3, 3, 1, 1, 1, 1),
    Layer("batch1.256.3x3", 1, 256, 256, 14, 14, 3, 3, 1, 1, 1, 1),
)

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

_TOLERANCE = {"float32": 1e-3, "float64": 1e-9}


# ----------------------------------------------------------------------------
# Shapes and FLOPs
# ----------------------------------------------------------------------------

def output_size(size, kernel, stride, padding, dilation):
    """Spatial output size of a convolution along one axis.

    Parameters
    ----------
    size, kernel, stride, padding, dilation : int
        Input size, kernel size, stride, symmetric padding per side and
        dilation along the axis.

    Returns
    -------
    int
        ``(size + 2*padding - dilation*(kernel-1) - 1) // stride + 1``.
    """
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def conv_flops(layer, n=None):
    """FLOPs of one pass of `layer`, counted as direct convolution.

    Parameters
    ----------
    layer : Layer
        The layer.
    n : int, optional
        Batch size to count with; default ``layer.N``.

    Returns
    -------
    int
        ``2 * N * K * OH * OW * (C / groups) * R * S``; the same figure is
        used for forward, backward-data and backward-weight.
    """
    n = layer.N if n is None else n
    oh = output_size(layer.H, layer.R, layer.stride, layer.padding, layer.dilation)
    ow = output_size(layer.W, layer.S, layer.stride, layer.padding, layer.dilation)
    return 2 * n * layer.K * oh * ow * (layer.C // layer.groups) * layer.R * layer.S


def select_layers(spec=None, layers=LAYERS):
    """Pick layers whose name contains one of the given substrings.

    Parameters
    ----------
    spec : str or sequence of str, optional
        Comma-separated substrings (case-insensitive), or a sequence of
        them.  ``None``, ``""`` or ``"all"`` selects every layer.
    layers : sequence of Layer, optional
        The table to select from; default :data:`LAYERS`.

    Returns
    -------
    list of Layer
        The matching layers, in table order.

    Raises
    ------
    ValueError
        If nothing matches.
    """
    if spec is None:
        return list(layers)
    if isinstance(spec, str):
        spec = spec.split(",")
    subs = [s.strip().lower() for s in spec if s.strip()]
    if not subs or "all" in subs:
        return list(layers)
    chosen = [l for l in layers if any(s in l.name.lower() for s in subs)]
    if not chosen:
        raise ValueError(
            "layers=%r matches none of: %s" % (",".join(subs), ", ".join(l.name for l in layers))
        )
    return chosen


def _parse_passes(passes):
    if passes is None:
        return list(PASSES)
    if isinstance(passes, str):
        passes = passes.split(",")
    out = []
    for p in passes:
        p = p.strip().lower().replace("-", "_")
        if not p:
            continue
        if p not in _PASS_ALIASES:
            raise ValueError("passes: unknown pass %r; choose from %s" % (p, ", ".join(PASSES)))
        for q in _PASS_ALIASES[p]:
            if q not in out:
                out.append(q)
    if not out:
        raise ValueError("passes: empty")
    return [p for p in PASSES if p in out]


def _parse_algos(algos):
    """Validate the algorithm list against cconv.ALGORITHMS (+ auto, find)."""
    if algos is None:
        return ["auto"]
    if isinstance(algos, str):
        algos = algos.split(",")
    known = ["auto", "find"] + list(getattr(cconv, "ALGORITHMS", ("direct", "winograd", "gemm")))
    out = []
    for a in algos:
        a = a.strip().lower()
        if not a:
            continue
        if a not in known:
            raise ValueError("algos: unknown algorithm %r; cconv offers %s" % (a, ", ".join(known)))
        if a not in out:
            out.append(a)
    if not out:
        raise ValueError("algos: empty")
    return out


# ----------------------------------------------------------------------------
# Environment
# ----------------------------------------------------------------------------

def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _cconv_version():
    v = getattr(cconv, "__version__", None)
    if v:
        return str(v)
    try:
        from importlib.metadata import version

        return version("cconv")
    except Exception:
        return "unknown"


def _import_torch():
    try:
        import torch
    except Exception:
        return None
    return torch


def _show_config_dict():
    """show_config()'s return value when it is a dict (silenced), else {}."""
    import contextlib
    import io

    try:
        with contextlib.redirect_stdout(io.StringIO()):
            r = cconv.show_config()
    except Exception:
        return {}
    return {str(k): v for k, v in r.items()} if isinstance(r, dict) else {}


def _show_config_text():
    """show_config() output as a string, whether it prints or returns."""
    import contextlib
    import io

    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            r = cconv.show_config()
    except Exception as exc:  # never let the report kill the run
        return "show_config() failed: %r" % (exc,)
    text = buf.getvalue()
    if not text.strip() and r is not None:  # it returned rather than printed
        text = r if isinstance(r, str) else json.dumps(r, default=str, indent=1)
    return text.strip()


# ----------------------------------------------------------------------------
# The contenders
# ----------------------------------------------------------------------------

class _NotApplicable(Exception):
    pass


def _make_data(layer, n, dtype, rng):
    oh = output_size(layer.H, layer.R, layer.stride, layer.padding, layer.dilation)
    ow = output_size(layer.W, layer.S, layer.stride, layer.padding, layer.dilation)
    x = rng.standard_normal((n, layer.C, layer.H, layer.W), dtype=np.float32).astype(dtype, copy=False)
    w = rng.standard_normal((layer.K, layer.C // layer.groups, layer.R, layer.S), dtype=np.float32)
    w = (w / math.sqrt(layer.C // layer.groups * layer.R * layer.S)).astype(dtype, copy=False)
    gy = rng.standard_normal((n, layer.K, oh, ow), dtype=np.float32).astype(dtype, copy=False)
    return x, w, gy


def _cconv_fn(layer, pss, algo, x, w, gy, threads):
    kw = dict(
        stride=layer.stride,
        padding=layer.padding,
        dilation=layer.dilation,
        groups=layer.groups,
        algo=algo,
        num_threads=threads,
    )
    if pss == "forward":
        return lambda: cconv.conv2d(x, w, **kw)
    if pss == "backward_data":
        return lambda: cconv.conv2d_backward_data(gy, w, x.shape, **kw)
    return lambda: cconv.conv2d_backward_weight(gy, x, w.shape, **kw)


def _torch_fn(torch, layer, pss, x, w, gy):
    tx, tw, tgy = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(gy)
    st, pd, dl, g = [layer.stride] * 2, [layer.padding] * 2, [layer.dilation] * 2, layer.groups
    F = torch.nn.functional

    if pss == "forward":
        def fwd():
            with torch.no_grad():
                return F.conv2d(tx, tw, None, st, pd, dl, g)
        return fwd

    mask = [pss == "backward_data", pss == "backward_weight", False]
    idx = 0 if pss == "backward_data" else 1
    op = getattr(getattr(torch.ops, "aten", None), "convolution_backward", None)
    if op is not None:
        def bwd():
            with torch.no_grad():
                return op(tgy, tx, tw, None, st, pd, dl, False, [0, 0], g, mask)[idx]
        return bwd

    # Fallback for very old PyTorch: autograd.
    def bwd_autograd():
        xa = tx.detach().requires_grad_(pss == "backward_data")
        wa = tw.detach().requires_grad_(pss == "backward_weight")
        y = F.conv2d(xa, wa, None, st, pd, dl, g)
        (gx,) = torch.autograd.grad(y, [xa if idx == 0 else wa], tgy)
        return gx
    return bwd_autograd


def _plan_algorithm(layer, n, dtype, algo):
    """The algorithm cconv's planner picks for `algo` (forward), or None."""
    try:
        plan = cconv.plan_conv2d(
            (n, layer.C, layer.H, layer.W),
            (layer.K, layer.C // layer.groups, layer.R, layer.S),
            stride=layer.stride,
            padding=layer.padding,
            dilation=layer.dilation,
            groups=layer.groups,
            dtype=dtype,
            algo=algo,
        )
        return str(plan.algorithm)
    except Exception:
        return None


def _rel_err(a, ref):
    a = np.asarray(a, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if a.shape != ref.shape:
        return float("inf")
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    if scale == 0.0:
        scale = 1.0
    return float(np.max(np.abs(a - ref))) / scale if ref.size else 0.0


def _time_case(contenders, warmup, repeats, timer, min_time=0.0, max_repeats=200):
    """Warm up, then interleave `repeats` timed calls of every contender.

    More rounds follow (up to `max_repeats`) until every contender has spent `min_time`
    seconds in timed calls: a median of a few fast calls swings with a noisy machine.
    `contenders` maps a label to a zero-argument callable.  Returns
    ``(times, outputs, errors)``: lists of seconds per label, the warm-up
    result per label, and the ValueError message of labels that do not
    apply (those are dropped from the timing).
    """
    outputs, errors = {}, {}
    live = []
    for label, fn in contenders.items():
        try:
            for i in range(max(1, warmup)):
                r = fn()
                if i == 0:
                    outputs[label] = r
        except ValueError as exc:
            errors[label] = str(exc) or exc.__class__.__name__
            continue
        live.append(label)
    times = {label: [] for label in live}
    i = 0
    while live and (i < repeats or (i < max_repeats
                                    and min(sum(t) for t in times.values()) < min_time)):
        k = i % len(live)
        order = live[k:] + live[:k]  # rotate who goes first
        if i % 2:
            order = order[::-1]
        for label in order:
            fn = contenders[label]
            t0 = timer()
            fn()
            times[label].append(timer() - t0)
        i += 1
    return times, outputs, errors


def _stats(times, flops):
    med = statistics.median(times)
    return {
        "times_s": list(times),
        "median_s": med,
        "min_s": min(times),
        "gflops": flops / med / 1e9 if med > 0 else float("inf"),
    }


# ----------------------------------------------------------------------------
# The runner
# ----------------------------------------------------------------------------

def run_suite(
    layers=None,
    passes=None,
    algos=None,
    threads=None,
    repeats=5,
    warmup=1,
    min_time=0.0,
    dtype="float32",
    quick=False,
    full=False,
    torch=True,
    check=True,
    progress=None,
    timer=time.perf_counter,
    seed=0,
):
    """Time cconv (and PyTorch when available) on a set of layers.

    Parameters
    ----------
    layers : str, sequence of str or sequence of Layer, optional
        Comma-separated name substrings (see :func:`select_layers`), or
        :class:`Layer` objects to run as given (custom layers).  Default:
        the whole :data:`LAYERS` table.
    passes : str or sequence of str, optional
        Any of ``forward``, ``backward_data``, ``backward_weight`` (also
        ``backward`` = both gradients, ``all``).  Default: all three.
    algos : str or sequence of str, optional
        cconv algorithms: ``auto``, ``find`` or names in
        ``cconv.ALGORITHMS``.  A shape an algorithm cannot handle (cconv
        raises ValueError) is reported as ``n/a``.  Default ``["auto"]``.
    threads : int, optional
        Thread count for cconv (``num_threads=``) and for
        ``torch.set_num_threads``.  Default ``cconv.get_num_threads()``.
    repeats : int, optional
        Timed calls per contender; the median is reported.  Default 5.
    warmup : int, optional
        Untimed calls per contender before timing.  Default 1.
    min_time : float, optional
        Seconds of timed calls each contender gets at least: rounds continue past
        ``repeats`` (up to 200) until then.  Default 0 (``repeats`` rounds exactly);
        the command line uses 0.5.
    dtype : {"float32", "float64"}, optional
        Data type of all arrays.
    quick : bool, optional
        Smoke-test mode: batch N=1 and at most 2 repeats.
    full : bool, optional
        Use the issue's batch sizes even for layers that have a reduced
        default batch (``Layer.reduced_n``).
    torch : bool, optional
        Compare with PyTorch when it is importable.  Default True.
    check : bool, optional
        Compare the warm-up results of cconv and PyTorch and record the
        maximum error relative to PyTorch's maximum magnitude.
    progress : callable, optional
        Called with one line of text after each (layer, pass).
    timer : callable, optional
        Clock returning seconds; default :func:`time.perf_counter`.
    seed : int, optional
        Seed of the random input data.

    Returns
    -------
    dict
        ``{"meta": {...}, "results": [row, ...]}`` where each row describes
        one (layer, pass, algo): the shape, ``n`` used, ``flops``, a
        ``cconv`` and a ``torch`` entry (``status`` "ok" / "n/a" /
        "not installed", ``times_s``, ``median_s``, ``gflops``), ``ratio``
        (cconv / torch GFLOP/s), ``vs_direct`` (GFLOP/s over the direct
        algorithm's when it was timed too) and ``max_rel_err``.
    """
    dtype = np.dtype(dtype).name
    if dtype not in ("float32", "float64"):
        raise ValueError("dtype: expected float32 or float64, got %r" % (dtype,))
    if layers is not None and not isinstance(layers, str) and all(isinstance(l, Layer) for l in layers):
        layer_list = list(layers)
    else:
        layer_list = select_layers(layers)
    pass_list = _parse_passes(passes)
    algo_list = _parse_algos(algos)
    repeats = int(repeats)
    warmup = int(warmup)
    if repeats < 1:
        raise ValueError("repeats: must be >= 1, got %d" % repeats)
    min_time = float(min_time)
    if not min_time >= 0:
        raise ValueError("min_time: must be >= 0, got %r" % min_time)
    if warmup < 0:
        raise ValueError("warmup: must be >= 0, got %d" % warmup)
    if quick:
        repeats, min_time = min(repeats, 2), 0.0
    if threads is None:
        threads = int(cconv.get_num_threads())
    else:
        threads = int(threads)
        if threads < 1:
            raise ValueError("threads: must be >= 1, got %d" % threads)
        cconv.set_num_threads(threads)

    tmod = _import_torch() if torch else None
    if tmod is not None:
        tmod.set_num_threads(threads)

    reduced = {}
    meta = {
        "cconv_version": _cconv_version(),
        "threads": threads,
        "torch_version": (str(tmod.__version__) if tmod is not None
                          else ("not installed" if torch else "not used")),
        "torch_threads": int(tmod.get_num_threads()) if tmod is not None else None,
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "numpy_version": np.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "dtype": dtype,
        "passes": pass_list,
        "algos": algo_list,
        "repeats": repeats,
        "min_time": min_time,
        "warmup": warmup,
        "quick": bool(quick),
        "full": bool(full),
        "timer": getattr(timer, "__name__", str(timer)),
        "flops_formula": "2*N*K*OH*OW*(C/groups)*R*S per pass",
        "reduced_n": reduced,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }

    cfg = _show_config_dict()
    if cfg:
        meta["cconv_config"] = cfg

    rng = np.random.default_rng(seed)
    results = []
    t_start = time.perf_counter()
    for layer in layer_list:
        if quick:
            n = 1
        elif not full and layer.reduced_n is not None and layer.reduced_n < layer.N:
            n = layer.reduced_n
            reduced[layer.name] = {"N": layer.N, "used": n}
        else:
            n = layer.N
        flops = conv_flops(layer, n)
        x, w, gy = _make_data(layer, n, dtype, rng)
        oh, ow = gy.shape[2], gy.shape[3]
        plan_algo = {a: _plan_algorithm(layer, n, dtype, a) for a in algo_list
                     if a in ("auto", "find")}
        for pss in pass_list:
            contenders = {}
            for a in algo_list:
                contenders["cconv:" + a] = _cconv_fn(layer, pss, a, x, w, gy, threads)
            if tmod is not None:
                contenders["torch"] = _torch_fn(tmod, layer, pss, x, w, gy)
            times, outputs, errors = _time_case(contenders, warmup, repeats, timer, min_time)

            if tmod is not None:
                if "torch" in times:
                    t_entry = dict(status="ok", **_stats(times["torch"], flops))
                else:
                    t_entry = {"status": "error", "error": errors.get("torch")}
            else:
                t_entry = {"status": meta["torch_version"]}

            direct_gf = None
            if "cconv:direct" in times:
                direct_gf = _stats(times["cconv:direct"], flops)["gflops"]

            line = []
            for a in algo_list:
                label = "cconv:" + a
                row = {
                    "layer": layer.name,
                    "pass": pss,
                    "algo": a,
                    "plan_algorithm": plan_algo.get(a) if pss == "forward" else None,
                    "N": n,
                    "N_full": layer.N,
                    "C": layer.C,
                    "K": layer.K,
                    "H": layer.H,
                    "W": layer.W,
                    "R": layer.R,
                    "S": layer.S,
                    "stride": layer.stride,
                    "padding": layer.padding,
                    "dilation": layer.dilation,
                    "groups": layer.groups,
                    "OH": int(oh),
                    "OW": int(ow),
                    "flops": flops,
                    "dtype": dtype,
                    "threads": threads,
                    "torch": t_entry,
                    "ratio": None,
                    "vs_direct": None,
                    "max_rel_err": None,
                }
                if label in times:
                    c_entry = dict(status="ok", **_stats(times[label], flops))
                    if t_entry.get("status") == "ok":
                        row["ratio"] = c_entry["gflops"] / t_entry["gflops"]
                    if direct_gf and a != "direct":
                        row["vs_direct"] = c_entry["gflops"] / direct_gf
                    if check and "torch" in outputs and label in outputs:
                        ref = outputs["torch"]
                        ref = ref.detach().numpy() if hasattr(ref, "detach") else ref
                        row["max_rel_err"] = _rel_err(outputs[label], ref)
                    line.append("%s %.1f" % (a, c_entry["gflops"]))
                else:
                    c_entry = {"status": "n/a", "reason": errors.get(label)}
                    line.append("%s n/a" % a)
                row["cconv"] = c_entry
                results.append(row)
            if progress is not None:
                tpart = ("torch %.1f" % t_entry["gflops"]) if t_entry.get("status") == "ok" else ""
                progress("%-26s %-15s N=%-2d GFLOP/s: %s %s" % (
                    layer.name, pss, n, ", ".join(line), tpart))
            outputs = None
    meta["elapsed_s"] = time.perf_counter() - t_start
    return {"meta": meta, "results": results}


# ----------------------------------------------------------------------------
# Reporting
# ----------------------------------------------------------------------------

def _fmt(v, spec="%.1f"):
    return "-" if v is None else spec % v


def _shape_str(r):
    s = "%d->%d %dx%d" % (r["C"], r["K"], r["R"], r["S"])
    if r["stride"] != 1:
        s += " s%d" % r["stride"]
    if r["padding"]:
        s += " p%d" % r["padding"]
    if r["dilation"] != 1:
        s += " d%d" % r["dilation"]
    if r["groups"] != 1:
        s += " g%d" % r["groups"]
    s += " %dx%d" % (r["H"], r["W"])
    return s


def format_markdown(result):
    """Render the results of :func:`run_suite` as a markdown report.

    Parameters
    ----------
    result : dict
        What :func:`run_suite` returned.

    Returns
    -------
    str
        A header (versions, threads, CPU, settings) and one table row per
        (layer, pass, algo): median time and GFLOP/s of cconv and PyTorch,
        and ``ratio`` = cconv / torch GFLOP/s (> 1: cconv faster).
    """
    m = result["meta"]
    lines = [
        "# cconv benchmark",
        "",
        "- cconv %s, %s threads; torch %s%s; numpy %s; Python %s"
        % (m["cconv_version"], m["threads"], m["torch_version"],
           (" (%s threads)" % m["torch_threads"]) if m.get("torch_threads") else "",
           m["numpy_version"], m["python"]),
        "- CPU: %s (%s logical CPUs)%s" % (
            m["cpu_model"], m["cpu_count"],
            "; cconv SIMD %s, OpenMP %s" % (m["cconv_config"].get("simd", "?"),
                                           m["cconv_config"].get("openmp", "?"))
            if m.get("cconv_config") else ""),
        "- dtype %s, NCHW; median of %d timed calls%s after %d warm-up, contenders "
        "interleaved; %s"
        % (m["dtype"], m["repeats"],
           " or more (at least %g s per contender)" % m["min_time"] if m.get("min_time") else "",
           m["warmup"], m["timer"]),
        "- GFLOP/s = %s / median time; ratio = cconv / torch GFLOP/s (> 1: cconv faster)"
        % m["flops_formula"],
    ]
    if m.get("quick"):
        lines.append("- **quick mode**: N=1 for every layer (smoke test, not representative)")
    if m.get("reduced_n"):
        lines.append(
            "- **batch reduced** to keep the default run short (use `--full` for the issue's N): "
            + ", ".join("%s N=%d (not %d)" % (k, v["used"], v["N"]) for k, v in m["reduced_n"].items())
        )
    if "elapsed_s" in m:
        lines.append("- suite wall time: %.1f s" % m["elapsed_s"])
    lines.append("")

    rows = result["results"]
    has_direct_cmp = any(r.get("vs_direct") is not None for r in rows)
    head = ["layer", "shape", "N", "pass", "algo", "cconv ms", "cconv GFLOP/s",
            "torch ms", "torch GFLOP/s", "ratio"]
    if has_direct_cmp:
        head.append("x direct")
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join("---" if i < 5 else "---:" for i in range(len(head))) + "|")
    tol = _TOLERANCE.get(m.get("dtype"), 1e-3)
    for r in rows:
        c, t = r["cconv"], r["torch"]
        algo = r["algo"]
        if r.get("plan_algorithm") and r["plan_algorithm"] != algo:
            algo = "%s (%s)" % (algo, r["plan_algorithm"])
        if c["status"] == "ok":
            cms, cgf = _fmt(c["median_s"] * 1e3, "%.2f"), _fmt(c["gflops"])
            err = r.get("max_rel_err")
            if err is not None and not err <= tol:
                cgf += " (err %.1e!)" % err
        else:
            cms, cgf = "n/a", "n/a"
        if t.get("status") == "ok":
            tms, tgf = _fmt(t["median_s"] * 1e3, "%.2f"), _fmt(t["gflops"])
        else:
            tms = tgf = "-"
        cells = [r["layer"], _shape_str(r), str(r["N"]), r["pass"], algo, cms, cgf, tms, tgf,
                 _fmt(r.get("ratio"), "%.2f")]
        if has_direct_cmp:
            cells.append(_fmt(r.get("vs_direct"), "%.2f"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------

def add_bench_arguments(parser):
    """Add the benchmark options to an :class:`argparse.ArgumentParser`.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        Parser (or sub-parser) to extend.

    Returns
    -------
    argparse.ArgumentParser
        The same parser.
    """
    parser.add_argument("--layers", default=None, metavar="SUBSTR[,SUBSTR...]",
                        help="run layers whose name contains one of these substrings "
                             "(case-insensitive); default: all. Use --list to see names.")
    parser.add_argument("--passes", default="forward,backward_data,backward_weight",
                        metavar="PASS[,PASS...]",
                        help="forward, backward_data, backward_weight (or 'backward', 'all'); "
                             "default: all three")
    parser.add_argument("--algos", default="auto", metavar="ALGO[,ALGO...]",
                        help="cconv algorithms to time: auto, find, or names in cconv.ALGORITHMS "
                             "(e.g. direct,winograd,gemm); shapes an algorithm cannot handle "
                             "print n/a. Default: auto")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for cconv and torch.set_num_threads "
                             "(default: cconv.get_num_threads())")
    parser.add_argument("--repeats", type=int, default=5,
                        help="timed calls per contender, median reported (default 5)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="untimed warm-up calls per contender (default 1)")
    parser.add_argument("--min-time", type=float, default=0.5, metavar="SECONDS",
                        help="keep timing rounds (beyond --repeats, at most 200) until each "
                             "contender has run this long (default 0.5; 0 for exactly "
                             "--repeats)")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                        help="data type (default float32)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: N=1 and at most 2 repeats")
    parser.add_argument("--full", action="store_true",
                        help="use the issue's batch sizes for every layer (the default run may "
                             "reduce N of the largest layers; the table header says so)")
    parser.add_argument("--no-torch", action="store_true",
                        help="do not compare with PyTorch even if it is installed")
    parser.add_argument("--no-check", action="store_true",
                        help="skip the comparison of cconv's results with PyTorch's")
    parser.add_argument("--json", default=None, metavar="PATH",
                        help="also write all results (raw times included) as JSON to PATH")
    parser.add_argument("--list", action="store_true",
                        help="list the layer table and exit")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress lines on stderr")
    return parser


def build_parser(prog="python -m cconv bench"):
    """The argument parser of the benchmark command.

    Parameters
    ----------
    prog : str, optional
        Program name shown in the usage line.

    Returns
    -------
    argparse.ArgumentParser
    """
    p = argparse.ArgumentParser(
        prog=prog,
        description="Time cconv's conv2d passes on real network layers, against PyTorch "
                    "in the same process and thread count when it is installed.",
    )
    return add_bench_arguments(p)


def _list_layers(full):
    lines = ["| name | N | C | K | H | W | R | S | stride | padding | dilation | groups | GFLOP/pass |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for l in LAYERS:
        n = l.N if (full or l.reduced_n is None) else l.reduced_n
        ncell = str(l.N) if n == l.N else "%d (full %d)" % (n, l.N)
        lines.append("| %s | %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %.2f |" % (
            l.name, ncell, l.C, l.K, l.H, l.W, l.R, l.S, l.stride, l.padding, l.dilation,
            l.groups, conv_flops(l, n) / 1e9))
    return "\n".join(lines)


def run_from_args(args, parser=None):
    """Run the benchmark for parsed command-line arguments.

    Parameters
    ----------
    args : argparse.Namespace
        As produced by :func:`build_parser`.
    parser : argparse.ArgumentParser, optional
        Used to report invalid option values (exit status 2).

    Returns
    -------
    int
        Process exit status.
    """
    if args.list:
        print(_list_layers(args.full))
        return 0
    try:  # validate every option before spending any time
        select_layers(args.layers)
        _parse_passes(args.passes)
        _parse_algos(args.algos)
        for name in ("threads", "repeats"):
            v = getattr(args, name)
            if v is not None and v < 1:
                raise ValueError("--%s: must be >= 1, got %d" % (name, v))
        if args.warmup < 0:
            raise ValueError("--warmup: must be >= 0, got %d" % args.warmup)
        if not args.min_time >= 0:
            raise ValueError("--min-time: must be >= 0, got %r" % args.min_time)
    except ValueError as exc:
        if parser is None:
            raise
        parser.error(str(exc))  # exits with status 2
    progress = None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    result = run_suite(
        layers=args.layers,
        passes=args.passes,
        algos=args.algos,
        threads=args.threads,
        repeats=args.repeats,
        warmup=args.warmup,
        min_time=args.min_time,
        dtype=args.dtype,
        quick=args.quick,
        full=args.full,
        torch=not args.no_torch,
        check=not args.no_check,
        progress=progress,
    )
    print(format_markdown(result))
    if args.json:
        result["meta"]["show_config"] = _show_config_text()
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, default=str)
        print("results written to %s" % args.json, file=sys.stderr)
    return 0


def main(argv=None, prog="python -m cconv bench"):
    """Command-line entry point of the benchmark.

    Parameters
    ----------
    argv : list of str, optional
        Arguments (without the program name); default ``sys.argv[1:]``.
    prog : str, optional
        Program name for the usage line.

    Returns
    -------
    int
        Process exit status (2 for bad arguments).
    """
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    return run_from_args(args, parser)
