#!/usr/bin/env python
"""A/B cconv algorithms (and PyTorch) on one convolution: many interleaved calls, min and median.

    python bench/algo_ab.py --shape 8,128,28,28 --op backward_weight --threads 2
    python bench/algo_ab.py --shape 8,256,14,14 --algos direct,winograd,torch
    python bench/algo_ab.py --shape 8,128,56,56 --stride 2 --op backward_weight --algos gemm

The suite (``python -m cconv bench``) reports medians of a few calls interleaved with
PyTorch; on a shared, noisy machine the minimum of many interleaved calls of just the
contenders named here is the steadier figure of what each can do.  Prints both.
"""

import argparse
import os
import sys
import time

import numpy as np

try:
    import cconv
except ImportError:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import cconv


def main(argv=None):
    """Time ``--algos`` (default direct,winograd) on a 3x3 padding-1 layer; print ratios."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="8,128,28,28", help="N,C,H,W (K = C, 3x3, padding 1)")
    ap.add_argument("--op", default="forward",
                    choices=["forward", "backward_data", "backward_weight"])
    ap.add_argument("--algos", default="direct,winograd",
                    help="cconv algorithms, and 'torch' for PyTorch on the same arrays")
    ap.add_argument("--stride", type=int, default=1)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=25)
    args = ap.parse_args(argv)
    n, c, h, w_ = (int(v) for v in args.shape.split(","))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c, h, w_), dtype=np.float32)
    w = rng.standard_normal((c, c, 3, 3), dtype=np.float32)
    st = args.stride
    dy = rng.standard_normal((n, c, (h - 1) // st + 1, (w_ - 1) // st + 1), dtype=np.float32)
    kw = {"padding": 1, "stride": st, "num_threads": args.threads}
    calls = {
        "forward": lambda a: cconv.conv2d(x, w, algo=a, **kw),
        "backward_data": lambda a: cconv.conv2d_backward_data(dy, w, x.shape, algo=a, **kw),
        "backward_weight": lambda a: cconv.conv2d_backward_weight(dy, x, w.shape, algo=a, **kw),
    }
    algos = args.algos.split(",")
    contenders = {a: (lambda a=a: calls[args.op](a)) for a in algos if a != "torch"}
    if "torch" in algos:
        import torch

        from cconv.benchmark import Layer
        from cconv.benchmark.contenders import torch_call
        torch.set_num_threads(args.threads or cconv.get_num_threads())
        layer = Layer("ab", n, c, c, h, w_, 3, 3, st, 1, 1, 1)
        contenders["torch"] = torch_call(torch, layer, args.op, x, w, dy)
    times = {a: [] for a in algos}
    for a in algos:
        contenders[a]()  # warm-up: schedules, pools, threads
    for _ in range(args.repeats):
        for a in algos:
            t = time.perf_counter()
            contenders[a]()
            times[a].append(time.perf_counter() - t)
    base = algos[0]
    for a in algos:
        mn, md = min(times[a]), float(np.median(times[a]))
        print(f"{a:10s} min {1e3 * mn:8.2f} ms  median {1e3 * md:8.2f} ms  "
              f"{base}/{a}: min {min(times[base]) / mn:.2f}  "
              f"median {np.median(times[base]) / md:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
