#!/usr/bin/env python
"""Time cconv's 1-D and 3-D convolution against PyTorch's best layout, all three passes.

    python bench/nd_bench.py                       # every layer, 1 and 2 threads
    python bench/nd_bench.py --rank 3 --layers c3d --threads 2 --json nd.json
    python bench/nd_bench.py --quick               # smoke test: shrunk layers, batch 1

The work is in :mod:`cconv.benchmark.nd_suite`; this script finds the package (installed,
or built in place in the repository root), parses the options and prints the markdown
report (and writes the raw results as JSON with ``--json``).
"""

import argparse
import json
import os
import sys
from typing import List, Optional, Sequence

try:
    import cconv  # noqa: F401  (installed package)
except ImportError:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cconv.benchmark import nd_suite


def _ints(text: str) -> List[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints, got {text!r}")
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive ints, got {text!r}")
    return values


def _passes(text: str) -> List[str]:
    names = [p.strip().replace("-", "_") for p in text.split(",") if p.strip()]
    if names == ["all"]:
        return list(nd_suite.PASSES)
    bad = [p for p in names if p not in nd_suite.PASSES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"passes must be among {nd_suite.PASSES} or 'all', "
                                         f"got {text!r}")
    return names


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rank", type=int, choices=(1, 3), default=None,
                        help="only the 1-D or the 3-D layers (default both)")
    parser.add_argument("--layers", default=None,
                        help="comma-separated substrings of layer names (default all)")
    parser.add_argument("--passes", type=_passes, default=list(nd_suite.PASSES),
                        help="forward,backward_data,backward_weight or all (default all)")
    parser.add_argument("--threads", type=_ints, default=[1, 2],
                        help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls at least")
    parser.add_argument("--warmup", type=int, default=1, help="untimed calls first")
    parser.add_argument("--min-time", type=float, default=0.0,
                        help="seconds of timed calls per contender at least")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: shrunk layers, batch 1, at most 2 repeats")
    parser.add_argument("--no-torch", action="store_true", help="do not time PyTorch")
    parser.add_argument("--json", metavar="PATH", help="also write the raw results here")
    parser.add_argument("--list", action="store_true", help="list the layers and exit")
    args = parser.parse_args(argv)
    if args.list:
        for layer in nd_suite.select_nd_layers(args.layers, args.rank):
            print(f"{layer.name:<28} {layer.rank}-D  GFLOP/pass "
                  f"{nd_suite.nd_flops(layer) / 1e9:.2f}")
        return 0
    result = nd_suite.run_nd_suite(
        layers=args.layers, rank=args.rank, passes=args.passes, threads=args.threads,
        repeats=args.repeats, warmup=args.warmup, min_time=args.min_time, quick=args.quick,
        torch=not args.no_torch, progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(nd_suite.format_nd_markdown(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
