#!/usr/bin/env python
"""Run cconv's layer benchmark suite: the same options as ``python -m cconv bench``.

    python bench/run_suite.py --layers res3,vgg16 --algos direct,winograd --json out.json

All the work is in :mod:`cconv.benchmarks`; this script only finds the package
(installed, or built in place in the repository root) and calls it.
"""

import os
import sys

try:
    import cconv  # noqa: F401  (installed package)
except ImportError:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cconv import benchmarks

if __name__ == "__main__":
    sys.exit(benchmarks.main(prog="python bench/run_suite.py"))
