#!/usr/bin/env python
"""Winograd jobs per thread, A/B in one process: chunks of output channels fixed by the
shape ("old", factor 0) against chunks cut until the jobs are at least 1x ("f1") or 2x
("f2") the threads (``FORWARD_JOBS_PER_THREAD`` / ``WEIGHT_JOBS_PER_THREAD`` of
``cconv.algorithms.winograd_schedule``), interleaved, with PyTorch (NCHW) at the same
thread count when it is installed.  Prints a Markdown table; every variant must give the
same bits (the chunks change no sum).

    python bench/winograd_jobs.py --threads 4,8,16
"""

import argparse
import os
import sys
import time

import numpy as np

try:
    import cconv  # noqa: F401  (installed package)
except ImportError:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import cconv
from cconv.algorithms import winograd_schedule as schedule
from cconv.benchmark.timing import time_interleaved

# (pass, layer, N, C, K, H = W), 3x3 padding 1: the suite's layers with few tile blocks.
CASES = [("forward", "batch1.256", 1, 256, 256, 14), ("forward", "batch1.128", 1, 128, 128, 28),
         ("forward", "res5", 8, 512, 512, 7), ("forward", "res4", 8, 256, 256, 14),
         ("backward_data", "batch1.256", 1, 256, 256, 14),
         ("backward_data", "res5", 8, 512, 512, 7),
         ("backward_weight", "res3", 8, 128, 128, 28), ("backward_weight", "res2", 8, 64, 64, 56),
         ("backward_weight", "res4", 8, 256, 256, 14),
         ("backward_weight", "batch1.128", 1, 128, 128, 28)]


def _call(op, x, w, dy, threads):
    if op == "forward":
        return cconv.conv2d(x, w, padding=1, num_threads=threads)
    if op == "backward_data":
        return cconv.conv2d_backward_data(dy, w, x.shape, padding=1, num_threads=threads)
    return cconv.conv2d_backward_weight(dy, x, w.shape, padding=1, num_threads=threads)


def _torch_call(torch, op, x, w, dy):
    tx, tw, tg = (torch.from_numpy(a) for a in (x, w, dy))
    if op == "forward":
        return lambda: torch.nn.functional.conv2d(tx, tw, padding=1)
    mask = [op == "backward_data", op == "backward_weight", False]
    index = 0 if op == "backward_data" else 1
    return lambda: torch.ops.aten.convolution_backward(
        tg, tx, tw, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, mask)[index]


def main(argv=None):
    """Run every case at every thread count; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="2", help="thread counts, e.g. 4,8,16")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        torch = None
    saved = schedule.FORWARD_JOBS_PER_THREAD, schedule.WEIGHT_JOBS_PER_THREAD
    rng = np.random.default_rng(0)
    print("| pass | layer | threads | old ms | f1 ms | f2 ms | old/f1 | old/f2 | PyTorch ms |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for op, name, n, c, k, h in CASES:
        x = rng.standard_normal((n, c, h, h), dtype=np.float32)
        w = rng.standard_normal((k, c, 3, 3), dtype=np.float32)
        dy = rng.standard_normal((n, k, h, h), dtype=np.float32)
        attr = "WEIGHT_JOBS_PER_THREAD" if op == "backward_weight" else "FORWARD_JOBS_PER_THREAD"
        for threads in [int(t) for t in args.threads.split(",")]:
            def variant(factor, threads=threads):
                def run():
                    setattr(schedule, attr, factor)
                    return _call(op, x, w, dy, threads)
                return run
            calls = {"old": variant(0), "f1": variant(1), "f2": variant(2)}
            if torch is not None:
                torch.set_num_threads(threads)
                calls["torch"] = _torch_call(torch, op, x, w, dy)
            times, outs, _ = time_interleaved(calls, 1, 5, time.perf_counter, min_time=0.15,
                                              max_repeats=12, settle=0.0, prime=0.015,
                                              batch=0.03)
            ms = {key: 1e3 * float(np.median(v)) for key, v in times.items()}
            if not (np.array_equal(outs["old"], outs["f1"])
                    and np.array_equal(outs["old"], outs["f2"])):
                raise SystemExit(f"{op} {name}: the variants differ")
            peer = f"{ms['torch']:.2f}" if "torch" in ms else "-"
            print(f"| {op} | {name} | {threads} | {ms['old']:.2f} | {ms['f1']:.2f} | "
                  f"{ms['f2']:.2f} | {ms['old'] / ms['f1']:.2f} | {ms['old'] / ms['f2']:.2f} "
                  f"| {peer} |", flush=True)
    schedule.FORWARD_JOBS_PER_THREAD, schedule.WEIGHT_JOBS_PER_THREAD = saved
    return 0


if __name__ == "__main__":
    sys.exit(main())
