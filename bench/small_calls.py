#!/usr/bin/env python
"""Per-call time of small convolutions, cconv against PyTorch: the fixed cost of a call.

    python bench/small_calls.py --threads 2
    python bench/small_calls.py --threads 1 --calls 5000

Each case runs ``--calls`` back-to-back forward calls per round, rounds alternating between
cconv and PyTorch (same arrays, same thread count); the figure is the median over rounds of
the mean time per call.  The first case is the tiny call of the performance targets: N=1,
C=K=4, 8x8, 3x3.
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

# (N, C, K, H=W, kernel): padding kernel // 2, stride 1
CASES = ((1, 4, 4, 8, 3), (1, 4, 4, 8, 1), (1, 16, 16, 14, 3), (1, 32, 32, 7, 3),
         (1, 32, 32, 14, 3))


def _per_call(call, calls):
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - start) / calls


def main(argv=None):
    """Print cconv's and PyTorch's time per call and their ratio for each case."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--calls", type=int, default=2000, help="calls per round")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args(argv)
    threads = args.threads or cconv.get_num_threads()
    try:
        import torch
        torch.set_num_threads(threads)
    except ImportError:
        torch = None
    rng = np.random.default_rng(0)
    print(f"threads {threads}; per call, median of {args.rounds} rounds of {args.calls} calls")
    print(f"{'N,C,K,HxW,k':22s} {'cconv us':>9s} {'torch us':>9s} {'ratio':>6s}")
    for n, c, k, size, r in CASES:
        x = rng.standard_normal((n, c, size, size), dtype=np.float32)
        w = rng.standard_normal((k, c, r, r), dtype=np.float32)
        contenders = {"cconv": lambda: cconv.conv2d(x, w, padding=r // 2, num_threads=threads)}
        if torch is not None:
            xt, wt = torch.from_numpy(x), torch.from_numpy(w)
            contenders["torch"] = lambda: torch.nn.functional.conv2d(xt, wt, padding=r // 2)
        times = {name: [] for name in contenders}
        for call in contenders.values():
            _per_call(call, args.calls // 10 + 1)  # warm-up: caches, thread teams
        for _ in range(args.rounds):
            for name, call in contenders.items():
                times[name].append(_per_call(call, args.calls))
        ours = 1e6 * float(np.median(times["cconv"]))
        line = f"{n},{c},{k},{size}x{size},{r}x{r}".ljust(22) + f" {ours:9.1f}"
        if torch is not None:
            theirs = 1e6 * float(np.median(times["torch"]))
            line += f" {theirs:9.1f} {ours / theirs:6.2f}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
