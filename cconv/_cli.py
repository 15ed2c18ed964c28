"""The ``cconv`` command (also ``python -m cconv``).

Subcommands: ``info`` (what this build is and runs on), ``check`` (a self-test of every
algorithm, pass and SIMD level against a float64 reference), ``bench`` (the benchmark
suite), ``find`` (warm the ``algo="find"`` cache for a list of layers) and ``config``
(``cconv.show_config()``).  Each lives in its own module; this one only parses arguments
and prints.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, TypeVar

__all__ = ["build_parser", "main"]

T = TypeVar("T")


def _option(convert: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse ``type`` that reports ``convert``'s ValueError message as a usage error."""
    def parse(text: str) -> T:
        try:
            return convert(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    parse.__name__ = getattr(convert, "__name__", "value")
    return parse


def _at_least(minimum: float, kind: Callable[[str], Any] = int) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        value = kind(text)
        if not value >= minimum:  # also rejects a NaN float
            raise ValueError(f"must be >= {minimum}, got {text}")
        return value
    convert.__name__ = getattr(kind, "__name__", "value")
    return _option(convert)


def _thread_counts(text: str) -> Any:
    """One thread count as an int, several (``"1,2"``) as a list of them."""
    from .benchmark import parse_threads

    counts = parse_threads(text)
    return counts[0] if len(counts) == 1 else counts


def _add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    from ._geometry import COMPUTE_DTYPES
    from .benchmark import parse_algos, parse_passes, select_layers

    parser.add_argument("--suite", choices=("layers", "scipy"), default="layers",
                        help="'layers' (default): network layers against PyTorch and ONNX "
                             "Runtime; 'scipy': the image-filter suite against SciPy "
                             "(cconv.benchmark.scipy_suite)")
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
    parser.add_argument("--threads", type=_option(_thread_counts), default=None,
                        metavar="N[,N...]",
                        help="threads for cconv, torch.set_num_threads and ONNX Runtime "
                             "(default: cconv.get_num_threads()); several counts, e.g. "
                             "1,2, time every case at each and report the scaling")
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
    parser.add_argument("--no-onnxruntime", action="store_true",
                        help="do not compare with ONNX Runtime even if it is installed")
    parser.add_argument("--no-check", action="store_true",
                        help="skip the comparison of cconv's results with the other libraries'")
    parser.add_argument("--json", default=None, metavar="PATH",
                        help="also write all results (raw times included) as JSON to PATH")
    parser.add_argument("--markdown", default=None, metavar="PATH",
                        help="also write the Markdown report to PATH")
    parser.add_argument("--list", action="store_true", help="list the layer table and exit")
    parser.add_argument("--quiet", action="store_true", help="no progress display on stderr")
    parser.add_argument("--no-peaks", action="store_true",
                        help="skip measuring the machine's GEMM peak, FMA peak and copy "
                             "bandwidth (the %% peak, %% FMA and %% BW columns stay empty)")


def build_parser(prog: str = "cconv") -> argparse.ArgumentParser:
    """The parser of the ``cconv`` command and its subcommands.

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
        description="cconv: CPU 2-D convolution (Cython + OpenMP). Commands: 'info' shows the "
                    "build and the machine, 'check' self-tests every algorithm on every SIMD "
                    "level, 'bench' times the layer suite, 'find' tunes a list of layers, "
                    "'config' prints cconv.show_config().",
    )
    sub = parser.add_subparsers(dest="command", metavar="{info,check,bench,find,config}")
    info = sub.add_parser(
        "info", help="version, SIMD levels, OpenMP, BLAS, compiler, Find cache",
        description="What this cconv is and runs on: version, the SIMD level in use and those "
                    "this CPU supports, the OpenMP runtime and its threads, BLAS, the compiler "
                    "and flags of the build, the Find cache's location and size.")
    info.add_argument("--json", action="store_true", help="print the same as JSON")
    check = sub.add_parser(
        "check", help="self-test every algorithm, pass and SIMD level (under a minute)",
        description="Run every algorithm (cconv.ALGORITHMS and auto) on every pass (forward, "
                    "backward-data, backward-weight, transposed) and every SIMD level this CPU "
                    "supports, on a few dozen shapes, against a float64 NumPy reference. "
                    "Prints a table; the exit status is 1 if any check failed.")
    check.add_argument("--levels", default=None, metavar="LEVEL[,LEVEL...]",
                       help="SIMD levels to check (default: every level this CPU supports)")
    check.add_argument("--json", default=None, metavar="PATH",
                       help="also write every check's record as JSON to PATH")
    bench = sub.add_parser(
        "bench",
        help="time forward/backward passes on real network layers (vs PyTorch, ONNX Runtime)",
        description="Time cconv's conv2d passes on real network layers, against PyTorch "
                    "(every pass) and ONNX Runtime (forward) in the same process and thread "
                    "count when they are installed.",
    )
    _add_bench_arguments(bench)
    find = sub.add_parser(
        "find", help="warm the algo='find' cache for a list of layer shapes",
        description="Run Find (time every usable algorithm, remember the fastest) for each "
                    "layer of a shapes file, so later calls with algo='find' start tuned. "
                    "Text format: one layer per line, 'N C H W K R S' then key=value fields "
                    "(stride, padding, dilation, groups, layout, weight_layout, dtype, "
                    "padding_mode, padding_value, passes); JSON: a list of objects with the "
                    "same keys. See the cconv._find_shapes docstring for examples.")
    find.add_argument("--shapes", required=True, metavar="FILE", help="the shapes file")
    find.add_argument("--threads", type=_at_least(1), default=None,
                      help="thread count the later calls use (Find is per thread count; "
                           "default: cconv.get_num_threads())")
    find.add_argument("--json", default=None, metavar="PATH",
                      help="also write the winners as JSON to PATH")
    sub.add_parser("config", help="print cconv.show_config()",
                   description="Print cconv.show_config(): version, SIMD level, OpenMP, "
                               "threads.")
    return parser


def _write_json(path: str, data: Any) -> None:
    with open(path, "w") as f:
        json.dump(data, f, indent=1, default=str)
    print(f"results written to {path}", file=sys.stderr)


def _info(args: argparse.Namespace) -> int:
    from . import _info

    data = _info.collect()
    print(json.dumps(data, indent=1, default=str) if args.json else _info.format_info(data))
    return 0


def _check(args: argparse.Namespace) -> int:
    import time

    from . import _selfcheck

    levels = None if args.levels is None else [lv.strip().lower() for lv in
                                               args.levels.split(",") if lv.strip()]
    start = time.perf_counter()
    try:
        report = _selfcheck.run_levels(levels, progress=lambda line: print(
            f"cconv check: {line}", file=sys.stderr, flush=True))
    except ValueError as exc:
        print(f"cconv check: error: {exc}", file=sys.stderr)
        return 2
    ok = _selfcheck.passed(report)
    results: List[Dict[str, Any]] = report["results"]
    print(f"cconv check: {len(_selfcheck.CASES)} shapes x {len(_selfcheck.PASSES)} passes, "
          f"SIMD levels {', '.join(report['levels'])}")
    print(_selfcheck.format_table(report))
    failed = sum(not r["ok"] for r in results)
    print(f"cconv check: {'PASSED' if ok else 'FAILED'}: {len(results)} checks, "
          f"{failed} failed, {time.perf_counter() - start:.1f} s")
    if args.json:
        _write_json(args.json, report)
    return 0 if ok else 1


def _bench_layers(args: argparse.Namespace) -> Dict[str, Any]:
    from .benchmark import run_suite, select_layers
    from .benchmark.progress import Progress

    progress = None
    if not args.quiet:
        layers = args.layers if args.layers is not None else select_layers(None)
        threads = args.threads if isinstance(args.threads, list) else [args.threads]
        progress = Progress(len(layers) * len(args.passes) * len(threads))
    try:
        return run_suite(
            layers=args.layers, passes=args.passes, algos=args.algos, threads=args.threads,
            repeats=args.repeats, warmup=args.warmup, min_time=args.min_time,
            dtype=args.dtype, quick=args.quick, torch=not args.no_torch,
            check=not args.no_check, progress=progress,
            onnxruntime=not args.no_onnxruntime, peaks=not args.no_peaks)
    finally:
        if progress is not None:
            progress.close()


def _bench_scipy(args: argparse.Namespace) -> Optional[Dict[str, Any]]:
    """Run ``cconv.benchmark.scipy_suite``: its ``run_suite`` gets the options it accepts."""
    try:
        suite = importlib.import_module("cconv.benchmark.scipy_suite")
    except ImportError as exc:
        print(f"cconv bench --suite scipy: not available: {exc}. It needs the module "
              "cconv.benchmark.scipy_suite and SciPy (pip install 'cconv[test]').",
              file=sys.stderr)
        return None
    from .benchmark.progress import Progress

    offered: Dict[str, Any] = dict(threads=args.threads, repeats=args.repeats,
                                   warmup=args.warmup, min_time=args.min_time,
                                   quick=args.quick, check=not args.no_check)
    accepted = inspect.signature(suite.run_suite).parameters
    kwargs = {k: v for k, v in offered.items() if k in accepted}
    progress = None if args.quiet or "progress" not in accepted else Progress(
        getattr(suite, "CASE_COUNT", 0) or 1)
    if progress is not None:
        kwargs["progress"] = progress
    try:
        result: Dict[str, Any] = suite.run_suite(**kwargs)
    finally:
        if progress is not None:
            progress.close()
    return result


def _bench(args: argparse.Namespace) -> int:
    from .benchmark import format_layer_table, format_markdown

    if args.list:
        print(format_layer_table())
        return 0
    if args.suite == "scipy":
        result = _bench_scipy(args)
        if result is None:
            return 2
        fmt = getattr(importlib.import_module("cconv.benchmark.scipy_suite"),
                      "format_markdown")
        text: str = fmt(result)
    else:
        result = _bench_layers(args)
        text = format_markdown(result)
    print(text)
    if args.json:
        _write_json(args.json, result)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
        print(f"Markdown report written to {args.markdown}", file=sys.stderr)
    return 0


def _find(args: argparse.Namespace) -> int:
    from . import _find_shapes

    try:
        specs = _find_shapes.read_shapes(args.shapes)
    except (OSError, ValueError) as exc:
        print(f"cconv find: error: {exc}", file=sys.stderr)
        return 2
    records = []
    for spec in specs:
        try:
            rows = _find_shapes.warm(spec, args.threads)
        except (TypeError, ValueError) as exc:
            print(f"cconv find: error: {exc}", file=sys.stderr)
            return 2
        for row in rows:
            how = "cached" if row["cached"] else f"measured in {row['seconds']:.2f} s"
            print(f"{spec.label():<48} {row['pass']:<16} {row['algo']:<10} ({how})")
            records.append(dict(row, layer=spec.label(), where=spec.where))
    from . import _find_cache

    print(f"cconv find: {len(records)} winners for {len(specs)} layers in {_find_cache.path()}")
    if args.json:
        _write_json(args.json, records)
    return 0


def main(argv: Optional[Sequence[str]] = None, prog: str = "cconv") -> int:
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
        Exit status: 0 on success, 1 when ``cconv check`` finds a failure, 2 for invalid
        arguments (before anything runs) or an unusable input file.
    """
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    commands: Dict[str, Callable[[argparse.Namespace], int]] = {
        "info": _info, "check": _check, "bench": _bench, "find": _find}
    if args.command in commands:
        return commands[args.command](args)
    if args.command == "config":
        from . import _config

        _config.show_config()
        return 0
    parser.print_help()
    return 0
