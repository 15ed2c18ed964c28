"""Cost of a padding mode against zero padding, per suite layer and pass (target: within 5%).

The depthwise, direct and Winograd kernels build a mode's padding as they copy their input
(forward, weight gradient); GEMM pads the input beforehand, and every data gradient folds
the padded input's gradient back.  This measures what a mode costs.  Interleaved calls,
medians; float32.

    python bench/padding_modes.py [--mode reflect] [--threads 2] [--repeats 9] [--layers a,b]
"""

from __future__ import annotations

import argparse
import time

import os
import sys

import numpy as np

try:
    import cconv  # the installed package
except ImportError:  # a checkout with an in-place build
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import cconv
from cconv.benchmark.layers import select_layers


def _median_times(calls, repeats):
    times = {name: [] for name in calls}
    for call in calls.values():
        call()
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(t)) for name, t in times.items()}


def main(argv=None):
    """Print, per layer and pass, zeros and mode times (ms) and mode / zeros."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="reflect")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--layers", default=None)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    ratios = []
    print(f"padding_mode={args.mode!r} vs 'zeros', {args.threads} threads, float32, "
          f"median of {args.repeats} interleaved calls")
    print(f"{'layer':28s} {'pass':16s} {'zeros ms':>9s} {'mode ms':>9s} {'mode/zeros':>10s}")
    for layer in select_layers(args.layers):
        if layer.padding == 0:
            continue  # no padding: every mode is zeros
        x = rng.standard_normal((layer.N, layer.C, layer.H, layer.W)).astype(np.float32)
        w = rng.standard_normal((layer.K, layer.C // layer.groups, layer.R, layer.S)).astype(
            np.float32)
        kw = dict(stride=layer.stride, padding=layer.padding, dilation=layer.dilation,
                  groups=layer.groups, num_threads=args.threads)
        gy = rng.standard_normal(cconv.conv2d(x, w, **kw).shape).astype(np.float32)
        passes = {
            "forward": lambda m: cconv.conv2d(x, w, padding_mode=m, **kw),
            "backward_data": lambda m: cconv.conv2d_backward_data(gy, w, x.shape,
                                                                  padding_mode=m, **kw),
            "backward_weight": lambda m: cconv.conv2d_backward_weight(gy, x, w.shape,
                                                                      padding_mode=m, **kw),
        }
        for name, run in passes.items():
            t = _median_times({"zeros": lambda: run("zeros"), "mode": lambda: run(args.mode)},
                              args.repeats)
            ratio = t["mode"] / t["zeros"]
            ratios.append(ratio)
            print(f"{layer.name:28s} {name:16s} {t['zeros'] * 1e3:9.2f} {t['mode'] * 1e3:9.2f} "
                  f"{ratio:10.3f}", flush=True)
    geomean = float(np.exp(np.mean(np.log(ratios))))
    print(f"geometric mean mode/zeros: {geomean:.3f} over {len(ratios)} layer-passes")


if __name__ == "__main__":
    main()
