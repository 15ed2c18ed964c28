#!/usr/bin/env python
"""Run cconv's layer benchmark suite from a checkout: the options of ``cconv bench``.

    python bench/run_suite.py --layers res3,vgg16 --algos direct,winograd --json out.json

All the work is in :mod:`cconv.benchmark`; this script only finds the package
(installed, or built in place in the repository root) and calls the command line.
"""

import os
import sys

try:
    import cconv  # noqa: F401  (installed package)
except ImportError:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cconv._cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
