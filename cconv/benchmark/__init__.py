"""Benchmark suite of real network layers: cconv against PyTorch, in one process.

For every layer of :data:`LAYERS`, every requested pass (``forward``, ``backward_data``,
``backward_weight``) and every requested cconv algorithm (``auto`` by default), calls are
timed with :func:`time.perf_counter` after a warm-up and the median is reported.  When
PyTorch is installed, the same pass is timed with ``torch.nn.functional.conv2d`` /
``torch.ops.aten.convolution_backward`` on the same NCHW arrays and the same thread count;
the calls of all contenders of one (layer, pass) are interleaved so that noise on the
machine hits all of them alike.

Throughput is GFLOP/s of the direct-convolution count
``2 * N * K * OH * OW * (C / groups) * R * S`` for each pass (an *effective* figure for
Winograd), and ``ratio`` is cconv's GFLOP/s over PyTorch's (> 1: cconv is faster).

From the command line: ``cconv bench --help`` (or ``python -m cconv bench``).  From Python::

    from cconv import benchmark
    res = benchmark.run_suite(layers="res3", passes="forward", repeats=3)
    print(benchmark.format_markdown(res))

Modules: :mod:`.layers` (the layer table), :mod:`.timing` (interleaved timing),
:mod:`.contenders` (the timed calls), :mod:`.environment` (what it ran on),
:mod:`.machine` (the GEMM peak and copy bandwidth measured in the same run),
:mod:`.targets` (layer classes, shares of those ceilings, the performance targets),
:mod:`.suite` (the runner) and :mod:`.report` (markdown).
"""

from .layers import LAYERS, Layer, conv_flops, select_layers
from .report import format_layer_table, format_markdown
from .suite import PASSES, measure_ceilings, parse_algos, parse_passes, parse_threads, run_suite

__all__ = [
           "LAYERS",
           "PASSES",
           "Layer",
           "conv_flops",
           "format_layer_table",
           "format_markdown",
           "measure_ceilings",
           "parse_algos",
           "parse_passes",
           "parse_threads",
           "run_suite",
           "select_layers",
]
