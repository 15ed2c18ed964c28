"""The ``cconv`` command (also ``python -m cconv``): ``cconv bench`` and ``cconv config``."""

import argparse
import json
import sys

from . import _config
from ._geometry import COMPUTE_DTYPES
from .benchmark import (
    format_layer_table,
    format_markdown,
    parse_algos,
    parse_passes,
    run_suite,
    select_layers,
)

__all__ = ["build_parser", "main"]


def _option(convert):
    """An argparse ``type`` that reports ``convert``'s ValueError message as a usage error."""
    def parse(text):
        try:
            return convert(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    parse.__name__ = convert.__name__
    return parse


def _at_least(minimum, kind=int):
    def convert(text):
        value = kind(text)
        if not value >= minimum:  # also rejects a NaN float
            raise ValueError(f"must be >= {minimum}, got {text}")
        return value
    convert.__name__ = kind.__name__
    return _option(convert)


def _add_bench_arguments(parser):
    parser.add_argument("--layers", type=_option(select_layers), default=None,
                        metavar="SUBSTR[,SUBSTR...]",
                        help="run layers whose name contains one of these substrings "
                             "(case-insensitive); default: all. Use --list to see names.")
    parser.add_argument("--passes", type=_option(parse_passes),
                        default="forward,backward_data,backward_weight",
                        metavar="PASS[,PASS...]",
                        help="forward, backward_data, backward_weight (or 'backward', 'all'); "
                             "default: all three")
    parser.add_argument("--algos", type=_option(parse_algos), default="auto",
                        metavar="ALGO[,ALGO...]",
                        help="cconv algorithms to time: auto, find, or names in cconv.ALGORITHMS "
                             "(e.g. direct,winograd,gemm); shapes an algorithm cannot handle "
                             "print n/a. Default: auto")
    parser.add_argument("--threads", type=_at_least(1), default=None,
                        help="threads for cconv and torch.set_num_threads "
                             "(default: cconv.get_num_threads())")
    parser.add_argument("--repeats", type=_at_least(1), default=5,
                        help="timed calls per contender, median reported (default 5)")
    parser.add_argument("--warmup", type=_at_least(0), default=1,
                        help="untimed warm-up calls per contender (default 1)")
    parser.add_argument("--min-time", type=_at_least(0, float), default=0.5, metavar="SECONDS",
                        help="keep timing rounds (beyond --repeats, at most 200) until each "
                             "contender has run this long (default 0.5; 0 for exactly "
                             "--repeats)")
    parser.add_argument("--dtype", choices=[d.name for d in COMPUTE_DTYPES], default="float32",
                        help="data type (default float32)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: N=1 and at most 2 repeats")
    parser.add_argument("--no-torch", action="store_true",
                        help="do not compare with PyTorch even if it is installed")
    parser.add_argument("--no-check", action="store_true",
                        help="skip the comparison of cconv's results with PyTorch's")
    parser.add_argument("--json", default=None, metavar="PATH",
                        help="also write all results (raw times included) as JSON to PATH")
    parser.add_argument("--list", action="store_true", help="list the layer table and exit")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def build_parser(prog="cconv"):
    """The parser of the ``cconv`` command and its ``bench`` and ``config`` subcommands.

    Parameters
    ----------
    prog : str, optional
        Program name shown in usage lines.

    Returns
    -------
    argparse.ArgumentParser
    """
    parser = argparse.ArgumentParser(
        prog=prog,
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
    _add_bench_arguments(bench)
    sub.add_parser("config", help="print cconv.show_config()",
                   description="Print cconv.show_config(): version, SIMD level, OpenMP, "
                               "threads.")
    return parser


def _bench(args):
    if args.list:
        print(format_layer_table())
        return 0
    progress = None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    result = run_suite(
        layers=args.layers, passes=args.passes, algos=args.algos, threads=args.threads,
        repeats=args.repeats, warmup=args.warmup, min_time=args.min_time, dtype=args.dtype,
        quick=args.quick, torch=not args.no_torch, check=not args.no_check,
        progress=progress,
    )
    print(format_markdown(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, default=str)
        print(f"results written to {args.json}", file=sys.stderr)
    return 0


def main(argv=None, prog="cconv"):
    """Run the ``cconv`` command.

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name; default ``sys.argv[1:]``.
    prog : str, optional
        Program name shown in usage lines.

    Returns
    -------
    int
        Exit status.  Invalid arguments exit with status 2 before anything is timed.
    """
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.command == "bench":
        return _bench(args)
    if args.command == "config":
        _config.show_config()
        return 0
    parser.print_help()
    return 0
