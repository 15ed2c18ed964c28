"""Command line of cconv: ``python -m cconv {bench,config} ...``.

``python -m cconv bench [options]``
    Run the layer benchmark suite (see ``python -m cconv bench --help``).
``python -m cconv config``
    Print ``cconv.show_config()``: version, SIMD level, OpenMP and threads.
"""

import argparse
import sys


def build_parser():
    """The top-level argument parser with its ``bench`` and ``config`` commands.

    Returns
    -------
    argparse.ArgumentParser
    """
    from cconv import benchmarks

    parser = argparse.ArgumentParser(
        prog="python -m cconv",
        description="cconv: CPU 2-D convolution (Cython + OpenMP). Commands: "
                    "'bench' times the layer suite, 'config' shows the build configuration.",
    )
    sub = parser.add_subparsers(dest="command", metavar="{bench,config}")
    bench = sub.add_parser(
        "bench",
        help="time forward/backward passes on real network layers (vs PyTorch if installed)",
        description="Time cconv's conv2d passes on real network layers, against PyTorch "
                    "in the same process and thread count when it is installed.",
    )
    benchmarks.add_bench_arguments(bench)
    sub.add_parser("config", help="print cconv.show_config()",
                   description="Print cconv.show_config().")
    return parser


def main(argv=None):
    """Entry point of ``python -m cconv``.

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name; default ``sys.argv[1:]``.

    Returns
    -------
    int
        Process exit status.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "bench":
        from cconv import benchmarks

        return benchmarks.run_from_args(args, parser)
    if args.command == "config":
        from cconv import benchmarks

        print(benchmarks._show_config_text())  # prints once, whether it prints or returns
        return 0
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
