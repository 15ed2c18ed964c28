#!/usr/bin/env python
"""Time SciPy's image filters against cconv's SciPy front ends and print a Markdown table.

    python bench/scipy_bench.py                 # full run (a few minutes), 1 and 2 threads
    python bench/scipy_bench.py --quick         # small images: checks that everything runs
    python bench/scipy_bench.py --threads 1 --json scipy.json

All the work is in :mod:`cconv.benchmark.scipy_suite`; this script finds the package
(installed, or built in place in the repository root), runs it and prints the report.
"""

import argparse
import json
import os
import sys

try:
    import cconv  # noqa: F401  (installed package)
except ImportError:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cconv.benchmark import scipy_suite


def main(argv=None):
    """Parse the options, run the suite, print the table; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,2", metavar="T[,T...]",
                        help="cconv thread counts (default 1,2; SciPy is single-threaded)")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds at least")
    parser.add_argument("--min-time", type=float, default=0.5, metavar="SECONDS",
                        help="more rounds (up to 3x --repeats) until each contender spent this")
    parser.add_argument("--quick", action="store_true", help="small images (a smoke run)")
    parser.add_argument("--no-peak", action="store_true", help="skip the GEMM peak")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the results")
    args = parser.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",") if t.strip()]
    result = scipy_suite.run_suite(
        threads=threads, repeats=args.repeats, min_time=args.min_time, quick=args.quick,
        peak=not args.no_peak, progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(scipy_suite.format_markdown(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
