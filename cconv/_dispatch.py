"""Choosing an algorithm per shape and pass: the ``auto`` heuristic and MIOpen-style Find.

Like oneDNN's ordered implementation lists, each algorithm says whether it can run a problem
(``why_not`` gives the reason it cannot); ``"auto"`` applies the rules of :func:`heuristic`,
which were fitted to the measurements in :data:`WINOGRAD_MEASUREMENTS`; ``"find"`` times
every usable algorithm once per (shape, pass, threads, SIMD level, version) and remembers
the winner (``cconv._find_cache``)::

    functional / _plan ──> _dispatch.select ──> algorithms.implementation(geom, name)
                               │                     direct | winograd | gemm
                               └──> _find_cache (on a "find" miss: time_algorithms)
"""

from __future__ import annotations

import collections
import functools
import time
from typing import TYPE_CHECKING, Any, Callable, List, Tuple

import numpy as np
import numpy.typing as npt

from . import _find_cache
from .algorithms import ALGORITHMS, depthwise_blocked, implementation, usable, why_not
from .algorithms import OPS as OPS  # part of this module's interface (callers check ``op``)
from .algorithms.direct import runs_on_rows
from .algorithms.gemm import pointwise
from .algorithms.winograd_schedule import f4_problem

if TYPE_CHECKING:
    from ._geometry import ConvGeometry
    from .algorithms.base import Algorithm

Array = npt.NDArray[Any]

AlgoResult = collections.namedtuple("AlgoResult", ["algo", "time_ms", "workspace_bytes"])
AlgoResult.__doc__ = """One algorithm's timing from :func:`cconv.find_algorithms` (a named tuple).

Attributes
----------
algo : str
    The algorithm, one of ``cconv.ALGORITHMS``; pass it as ``algo=`` to run it.
time_ms : float
    Median wall-clock time of the timed calls of the pass on random data of the problem's
    shape and dtype, after one warm-up call, in milliseconds.
workspace_bytes : int
    Scratch memory the algorithm allocates for the pass at the thread count timed, in bytes.
"""

# Winograd / direct time ratios behind the "auto" rules (> 1: Winograd faster), float32,
# 2 threads, C = K, 3x3 stride 1 padding 1, on a 2-core AVX-512 VM (Cascade Lake).
# Columns: pass, channels per group, batch, output height = width (None: not recorded, a
# range of layers), (lowest, highest) ratio over the runs, source.  Sources: "suite" =
# ``cconv bench --algos direct,winograd`` (medians of >= 7 interleaved calls, 4 runs);
# "ab" = ``python bench/algo_ab.py`` (median of 25 interleaved calls); "find" =
# ``cconv.find_algorithms``.
WINOGRAD_MEASUREMENTS = (
    ("forward/backward_data", 16, None, None, (1.0, 1.0), "find"),
    ("forward/backward_data", 32, None, 7, (0.94, 1.1), "find"),
    ("forward/backward_data", 32, 8, 56, (1.3, 1.5), "suite"),
    ("forward/backward_data", 64, 8, 56, (1.3, 1.7), "suite"),
    ("forward/backward_data", 64, 8, 7, (1.2, 1.5), "ab"),
    ("forward/backward_data", 64, 1, 7, (1.02, 1.1), "ab"),
    ("forward/backward_data", 128, 1, 7, (1.02, 1.1), "ab"),
    ("forward/backward_data", 128, 8, 28, (1.6, 1.8), "suite"),
    ("forward/backward_data", 128, 1, 28, (1.2, 1.6), "suite"),
    ("forward/backward_data", 256, 1, 14, (1.2, 1.6), "suite"),
    ("forward/backward_data", 256, 8, 14, (1.65, 1.8), "suite"),
    ("forward/backward_data", 256, 8, 56, (1.9, 2.25), "suite"),
    ("forward/backward_data", 512, 8, 7, (1.35, 1.6), "suite"),
    ("backward_weight", 3, None, None, (0.33, 0.33), "ab"),
    ("backward_weight", 4, None, None, (0.54, 0.54), "ab"),
    ("backward_weight", 8, None, None, (0.54, 0.54), "ab"),
    ("backward_weight", 16, 8, 7, (0.86, 0.89), "ab"),
    ("backward_weight", 16, 1, 14, (0.86, 0.89), "ab"),
    ("backward_weight", 16, 8, 28, (1.3, 1.4), "ab"),
    ("backward_weight", 16, 2, 56, (1.3, 1.4), "ab"),
    ("backward_weight", 32, 1, 7, (0.93, 0.95), "ab"),
    ("backward_weight", 32, 1, 14, (0.93, 0.95), "ab"),
    ("backward_weight", 32, 2, 28, (1.5, 1.7), "ab"),
    ("backward_weight", 32, 8, 56, (1.5, 1.7), "ab"),
    ("backward_weight", 64, 8, 28, (1.9, 1.9), "ab"),
    ("backward_weight", 64, 8, None, (1.4, 2.3), "suite"),
    ("all", 1, 8, 56, (0.05, 0.1), "suite"),  # depthwise (one channel per group)
)


# Direct / Winograd time ratios (> 1: Winograd faster) where Winograd runs F(4x4,3x3)
# (``winograd_schedule.f4_problem``) below the F(2x2) rule's channel counts: float32, C = K,
# padding 1, interleaved, AMD EPYC Zen 4, forward / backward-data.  Columns: layer, AVX-512
# kernels 1 thread, 2 threads, AVX2 kernels (``CCONV_SIMD=avx2``) 1 thread, 2 threads.
F4_AUTO_MEASUREMENTS = (
    ("8x16 56x56", (2.13, 2.35), (2.17, 2.23), (2.09, 2.20), (2.22, 3.01)),
    ("1x16 56x56", (2.28, 2.20), (1.85, 1.94), (1.86, 2.21), None),
    ("8x16 28x28", (2.83, 2.42), (1.95, 2.15), None, None),
    ("2x16 112x112", (1.75, 2.51), (2.34, 2.19), None, None),
    ("8x16 8x8", (1.87, 1.85), (1.19, 1.54), (1.27, 1.32), None),
    ("8x32 7x7", (1.76, 1.61), (1.20, 1.12), (1.47, 1.16), (1.12, 1.26)),
)
F4_AUTO_MIN_CHANNELS = 16


# Depthwise-kernel / direct time ratios (> 1: depthwise kernels faster), float32, NCHW,
# ``cconv bench --layers mobilenetv2.dw144,mobilenetv2.dw384s2,filter.1-16.5x5 --algos
# direct,depthwise --threads T`` on a 2-core AVX-512 VM (AMD EPYC Zen 4).  Columns: layer,
# threads, forward, backward-data, backward-weight.
DEPTHWISE_MEASUREMENTS = (
    ("8x144x56x56 3x3 groups 144", 1, 3.14, 2.35, 1.40),
    ("8x144x56x56 3x3 groups 144", 2, 3.05, 2.52, 1.43),
    ("8x384x28x28 3x3 stride 2 groups 384", 1, 1.64, 2.76, 1.01),
    ("8x384x28x28 3x3 stride 2 groups 384", 2, 1.95, 3.38, 0.83),
    # a later run, backward-weight only (python timing loop, minimum of 15 calls)
    ("8x384x28x28 3x3 stride 2 groups 384", 1, None, None, 1.32),
    ("8x384x28x28 3x3 stride 2 groups 384", 2, None, None, 1.40),
    # NHWC (channel-vector kernels), backward-weight only
    ("8x384x28x28 3x3 stride 2 groups 384, NHWC", 1, None, None, 12.8),
    ("8x384x28x28 3x3 stride 2 groups 384, NHWC", 2, None, None, 14.4),
    ("4x1x512x512 -> 16, 5x5", 1, 1.49, 8.65, 1.31),
    ("4x1x512x512 -> 16, 5x5", 2, 2.21, 7.63, 1.22),
)


# Few-channel row-vector kernels ("depthwise" with 2-4 input channels per group) / direct time
# ratios, float32, NCHW, 2 threads, median (and min) of 7 interleaved calls on a 2-core AVX-512
# VM (AMD EPYC Zen 4) loaded by other jobs (load average ~8: read the ratios as rough).
# Columns: layer, forward, backward-data, backward-weight.
FEW_CHANNEL_MEASUREMENTS = (
    ("8x3x224x224 -> 64, 7x7 stride 2 (ResNet-50 conv1)", 0.66, 1.10, 0.43),
    ("8x3x256x256 -> 32, 3x3", 1.62, 2.77, 1.29),
    ("1x4x1024x1024 -> 4, 5x5", 3.33, 2.97, 1.94),
    ("4x2x512x512 -> 2, 3x3", 5.12, 2.77, 8.93),
)

# The weight gradient with 2-4 input channels per group: depthwise / direct times at 1 and 2
# threads, AMD EPYC Zen 5 (AVX-512), float32, NCHW, medians of 1-second loops, after the
# few-channel kernels fill a group's input band once for all its output channels and walk
# L2-sized bands.  The direct kernel wins once a group's outputs x taps are many (its column
# vectors fill); the rule switches at FEW_CHANNEL_DIRECT_WEIGHT_TAPS (Kg x R x S, between
# the 1152 and 1600 measured).  Columns: layer, 1 thread, 2 threads.  (Zen 4, before those
# changes, the 3 -> 32 and 3 -> 64 layers had measured 1.3-1.5x, and the rule switched at
# 16 outputs.)
FEW_CHANNEL_WEIGHT_MEASUREMENTS = (
    ("8x3x256x256 -> 32, 3x3 (the suite's rgb layer)", 0.81, 0.75),
    ("16x3x112x112 -> 64, 3x3 (a C3D stem depth tap)", 0.83, 0.70),
    ("8x3x112x112 -> 64, 3x3", 0.83, 0.59),
    ("8x4x128x128 -> 128, 3x3", 0.88, 0.82),
    ("8x2x256x256 -> 16, 3x3", 0.57, 0.55),
    ("1x4x1024x1024 -> 4, 5x5", 0.21, 0.19),
    ("8x3x128x128 -> 64, 5x5", 1.29, 1.08),
)
FEW_CHANNEL_DIRECT_WEIGHT_TAPS = 1400

# The data gradient with 2-4 input channels per group at stride 1: depthwise-kernel / GEMM
# times (> 1: GEMM faster), AMD EPYC Zen 5 (AVX-512), float32, NCHW, medians of 0.08 s loops,
# 1 and 2 threads.  The few-channel kernels fill the output channels' gradient bands once
# for a group's input channels (they refilled them per input channel when GEMM took this
# from 32 outputs: the rgb layer was 2.07 / 1.43 then); GEMM's one product per chunk now
# wins only from hundreds of output channels on small planes.  The rule takes GEMM from
# FEW_CHANNEL_GEMM_GRAD_OUTPUTS output channels per group and at most
# FEW_CHANNEL_GEMM_GRAD_TAPS taps.  Columns: layer, 1 thread, 2 threads.
FEW_CHANNEL_GRAD_MEASUREMENTS = (
    ("8x3x256x256 -> 32, 3x3 (the suite's rgb layer)", 0.61, 0.58),
    ("8x3x112x112 -> 64, 3x3", 0.75, 0.51),
    ("8x3x256x256 -> 16, 3x3", 0.53, 0.38),
    ("8x2x256x256 -> 16, 3x3", 0.57, 0.46),
    ("2x3x256x256 -> 32, 5x5", 0.50, 0.38),
    ("4x4x256x256 -> 8, 3x3", 0.24, 0.16),
    ("1x4x1024x1024 -> 4, 5x5", 0.13, 0.08),
    ("8x4x128x128 -> 128, 3x3", 0.90, 0.76),
    ("8x3x128x128 -> 64, 5x5", 0.55, 0.48),
    ("8x3x64x64 -> 256, 3x3", 0.81, 0.66),
    ("8x2x56x56 -> 256, 5x5", 0.88, 0.72),
    ("8x4x32x32 -> 512, 3x3", 1.77, 1.47),
)
FEW_CHANNEL_GEMM_GRAD_OUTPUTS = 512
FEW_CHANNEL_GEMM_GRAD_TAPS = 9


# Backward-data of strided layers with few input channels: direct / GEMM times (> 1: GEMM
# faster), float32, NCHW, 2 threads, cconv.find_algorithms (median of 3) on a 2-core AVX-512
# VM (AMD EPYC Zen 4).  The direct kernel's output-channel vectors are mostly empty there
# (3 input channels are the data gradient's outputs); with 16 or more channels direct wins.
# Columns: layer, direct ms, gemm ms.
STRIDED_FEW_CHANNEL_GRAD_MEASUREMENTS = (
    ("8x3x224x224 -> 64, 7x7 stride 2 (ResNet-50 conv1)", 118.5, 42.8),
    ("8x3x128x128 -> 32, 3x3 stride 2", 5.64, 3.53),
    ("8x16x64x64 -> 32, 5x5 stride 2", 3.43, 7.97),
    ("8x64x56x56 -> 64, 3x3 stride 2", 6.97, 9.84),
    ("8x128x56x56 -> 128, 3x3 stride 2", 14.32, 22.5),
)


# ... but at stride 2 the few-channel kernels, with their data gradient by stride phases
# (filters up to 3x3) or the spread-out gradient's column kernel, beat GEMM up to
# STRIDED_FEW_CHANNEL_DEPTHWISE_TAPS output channels times taps per group.  GEMM / few-channel
# kernel time ratios (> 1: the kernels faster), float32, NCHW, medians of 9 calls with
# ``out=``, 1 and 2 threads, 2-vCPU AMD EPYC Zen 5 (AVX-512).  Columns: layer (Kg*R*S),
# 1 thread, 2 threads.  GEMM's data gradient gains little from a second thread here.
STRIDED_FEW_CHANNEL_DEPTHWISE_TAPS = 400
STRIDED_FEW_CHANNEL_DEPTHWISE_MEASUREMENTS = (
    ("8x3x128x128 -> 16, 3x3 (144)", 1.78, 4.39),
    ("8x2x256x256 -> 16, 3x3 (144)", 1.45, 1.92),
    ("4x4x128x128 -> 24, 3x3 (216)", 1.49, 2.93),
    ("8x3x128x128 -> 32, 3x3 (288)", 1.13, 2.52),
    ("8x3x128x128 -> 16, 5x5 (400)", 1.84, 2.33),
    ("8x3x128x128 -> 48, 3x3 (432)", 0.85, 1.18),
    ("8x3x112x112 -> 64, 3x3 (576)", 0.65, 0.79),
    ("8x3x128x128 -> 16, 7x7 (784)", 1.21, 1.50),
    ("8x3x128x128 -> 32, 5x5 (800)", 0.97, 1.27),
)


# Depthwise / direct (row-vector kernels) time ratios on lifted 1-D convolutions, float32,
# NCW, (min, median) of 15 interleaved calls, 2-core AMD EPYC Zen 4 VM, AVX-512 kernels.
# Columns: layer, threads, pass, (input, output) channels per group, (min, median).  Above
# 1: the row kernels are faster.  The rule takes them from 8 channels per group on either
# side.
ROW_MIN_CHANNELS = 8
ROW_KERNEL_MEASUREMENTS = (
    ("1x1x262144 -> 32, k63 pad 31", 1, "forward", (1, 32), (1.49, 1.49)),
    ("1x1x262144 -> 32, k63 pad 31", 2, "forward", (1, 32), (1.38, 1.06)),
    ("1x1x262144 -> 32, k63 pad 31", 2, "backward_data", (1, 32), (3.15, 3.82)),
    ("2x1x65536 -> 8, k15 pad 7", 1, "forward", (1, 8), (1.47, 1.43)),
    ("2x1x65536 -> 8, k15 pad 7", 2, "forward", (1, 8), (1.55, 1.57)),
    ("2x2x65536 -> 16, k7 pad 3", 2, "forward", (2, 16), (1.31, 1.14)),
    ("4x32x16384 -> 128, groups 32, k5", 1, "forward", (1, 4), (1.06, 1.06)),
    ("4x32x16384 -> 128, groups 32, k5", 2, "forward", (1, 4), (0.78, 0.72)),
    ("4x64x16384 -> 64, groups 64, k3", 2, "forward", (1, 1), (0.47, 0.53)),
    ("4x64x16384 -> 64, groups 64, k3", 2, "backward_data", (1, 1), (0.60, 0.54)),
)


# GEMM (NumPy's BLAS) / direct time ratios on unpadded 1x1 layers, float32, NCHW, 8x56x56,
# minimum and median of 15 interleaved calls in a process without PyTorch, on a 2-core
# AVX-512 VM (AMD EPYC Zen 4, OpenBLAS SkylakeX kernels).  Columns: C -> K, threads, pass,
# (min ratio, median ratio).
GEMM_MEASUREMENTS = (
    ("64->256", 1, "forward", (1.44, 1.33)), ("64->256", 2, "forward", (1.19, 1.31)),
    ("64->256", 1, "backward_data", (1.63, 1.73)), ("64->256", 2, "backward_data", (2.40, 2.19)),
    ("64->256", 1, "backward_weight", (1.52, 1.57)),
    ("64->256", 2, "backward_weight", (1.41, 0.89)),
    ("256->64", 1, "forward", (1.53, 1.52)), ("256->64", 2, "forward", (2.06, 1.57)),
    ("256->64", 1, "backward_data", (1.18, 1.09)), ("256->64", 2, "backward_data", (1.10, 1.00)),
    ("256->64", 1, "backward_weight", (1.07, 1.16)),
    ("256->64", 2, "backward_weight", (1.15, 0.72)),
)


_ALGO_CHOICES = ("auto", "find") + ALGORITHMS


def check_algo(algo: object) -> str:
    """Validate the ``algo`` keyword."""
    if not isinstance(algo, str) or algo not in _ALGO_CHOICES:
        raise ValueError(f"algo must be one of {_ALGO_CHOICES}, got {algo!r}")
    return algo


@functools.lru_cache(maxsize=1024)
def heuristic(geom: ConvGeometry, op: str) -> str:
    """The algorithm ``"auto"`` picks for pass ``op`` of ``geom``.

    Winograd (3x3 stride-1 dilation-1 layers) for forward and backward-data with at least
    32 input and output channels per group and 14x14 output pixels per image (7x7 from 64
    channels), or from :data:`F4_AUTO_MIN_CHANNELS` where it runs F(4x4,3x3) (1.1-3.0x
    the direct kernel there, :data:`F4_AUTO_MEASUREMENTS`); for backward-weight with at
    least 64 channels per group, 32 with at least 1024 output pixels over the batch, or 16
    with at least 4096.  Otherwise the first usable algorithm in registry order (direct).
    The thresholds separate the rows of :data:`WINOGRAD_MEASUREMENTS` where Winograd won
    from those where it did not.

    The direct algorithm for forward and backward-data of long one-row problems (lifted 1-D
    convolutions, see ``algorithms.direct.runs_on_rows``) with at least
    :data:`ROW_MIN_CHANNELS` input or output channels per group: 1.06-3.8x the depthwise
    kernels on filter banks and few-channel layers, while with at most 4 of each the
    depthwise kernels win (:data:`ROW_KERNEL_MEASUREMENTS`); and for their weight gradient
    from ``algorithms.direct.ROW_WEIGHT_MIN_CHANNELS`` input channels per group: 1.07-4.3x
    GEMM on 1 thread, 1.06-8.2x on 2 (64 -> 64 with 1 and 2 taps, 128 -> 128 1x1, 256 ->
    256, 8 -> 64 and 16 -> 16 with 9 taps, 16384 samples; ``find_algorithms``, AMD EPYC Zen
    5, AVX-512).

    The depthwise kernels wherever each group has one input channel (depthwise layers, and
    filter banks over one-channel images): they measured 1.2-8.7x the direct algorithm on
    every pass of the layers timed, except one run of the NCHW stride-2 weight gradient at
    0.83x, which a later run put at 1.3-1.4x (:data:`DEPTHWISE_MEASUREMENTS`).  With two to
    four input channels per group, at stride 1 only: 1.3-8.9x there, while ResNet-50's
    stride-2 7x7 stem measured 0.43-1.1x (:data:`FEW_CHANNEL_MEASUREMENTS`).  The weight
    gradient of a filter bank over a one- to four-channel image (one group, at least a
    vector of output channels) at any stride: its own kernel, output channels in the lanes,
    1.1-2.9x the direct algorithm and 1.1-2.2x the row kernels, ResNet-50's stem included
    (``depthwise_blocked.FEW_CHANNEL_WEIGHT_MEASUREMENTS``); and their strided forward,
    1.2-2.7x the direct kernel (``FEW_CHANNEL_FORWARD_MEASUREMENTS`` there); other grouped
    layers' weight
    gradient only below :data:`FEW_CHANNEL_DIRECT_WEIGHT_TAPS` output channels times
    taps per group: with 64 outputs of 5x5 the direct kernel measured 1.1-1.3x faster, with
    up to 128 of 3x3 the few-channel kernels 1.1-1.8x (:data:`FEW_CHANNEL_WEIGHT_MEASUREMENTS`);
    and for the data gradient only with fewer than
    :data:`FEW_CHANNEL_GEMM_GRAD_OUTPUTS` output channels per group or more than
    :data:`FEW_CHANNEL_GEMM_GRAD_TAPS` taps: the few-channel kernels measured 1.1-12x GEMM
    up to 256 outputs, GEMM 1.5-1.8x them with 512 (:data:`FEW_CHANNEL_GRAD_MEASUREMENTS`).

    GEMM (NumPy's BLAS) for unpadded 1x1 layers, every pass: 1.0-2.4x the direct kernel on
    forward and backward-data, 1.07-1.57x on backward-weight at 1 thread but 0.72-0.89x by
    the median at 2 (min 1.15-1.41x; :data:`GEMM_MEASUREMENTS`).  BLAS does not depend on
    cconv's SIMD level: with the baseline kernels the direct weight gradient measured 2.4x
    slower than GEMM, so GEMM is the choice that holds on every build.  GEMM also for the
    data gradient of strided layers with at most 4 input channels per group (ResNet-50's
    stem: 2.8x the direct kernel; :data:`STRIDED_FEW_CHANNEL_GRAD_MEASUREMENTS`), except at
    stride 2 with at most :data:`STRIDED_FEW_CHANNEL_DEPTHWISE_TAPS` output channels times
    taps per group, where the few-channel kernels measured 1.1-4.4x GEMM
    (:data:`STRIDED_FEW_CHANNEL_DEPTHWISE_MEASUREMENTS`).
    """
    geom = geom.kernel_geometry  # what the algorithms run (padding modes pad beforehand)
    candidates = usable(geom, op)
    if runs_on_rows(geom, op) and max(geom.Cg, geom.Kg) >= ROW_MIN_CHANNELS:
        return "direct"  # ROW_KERNEL_MEASUREMENTS
    if (op == "backward_weight" and "depthwise" in candidates
            and depthwise_blocked.few_channel_weights(geom)):
        return "depthwise"  # depthwise_blocked.FEW_CHANNEL_WEIGHT_MEASUREMENTS
    if (op == "forward" and "depthwise" in candidates
            and depthwise_blocked.few_channel_forward(geom)):
        return "depthwise"  # depthwise_blocked.FEW_CHANNEL_FORWARD_MEASUREMENTS
    few_channel_weight = (op == "backward_weight" and geom.Cg > 1
                          and geom.Kg * geom.R * geom.S >= FEW_CHANNEL_DIRECT_WEIGHT_TAPS)
    few_channel_grad = (op == "backward_data" and 1 < geom.Cg <= 4
                        and geom.Kg >= FEW_CHANNEL_GEMM_GRAD_OUTPUTS
                        and geom.R * geom.S <= FEW_CHANNEL_GEMM_GRAD_TAPS
                        and "gemm" in candidates)  # FEW_CHANNEL_GRAD_MEASUREMENTS
    if few_channel_grad:
        return "gemm"
    if (op == "backward_data" and geom.stride == (2, 2) and 1 < geom.Cg <= 4
            and geom.Kg * geom.R * geom.S <= STRIDED_FEW_CHANNEL_DEPTHWISE_TAPS
            and "depthwise" in candidates):  # STRIDED_FEW_CHANNEL_DEPTHWISE_MEASUREMENTS
        return "depthwise"
    if ("depthwise" in candidates and (geom.Cg == 1 or geom.stride == (1, 1))
            and not few_channel_weight):
        return "depthwise"
    if pointwise(geom):  # unpadded 1x1: matrix products on the activations in place
        return "gemm"
    if (op == "backward_data" and geom.stride != (1, 1) and geom.Cg <= 4
            and "gemm" in candidates):  # STRIDED_FEW_CHANNEL_GRAD_MEASUREMENTS
        return "gemm"
    if "winograd" in candidates:
        channels, pixels = min(geom.Cg, geom.Kg), geom.OH * geom.OW
        if op == "backward_weight":
            batch_pixels = geom.N * pixels
            if (channels >= 64 or (channels >= 32 and batch_pixels >= 1024)
                    or (channels >= 16 and batch_pixels >= 4096)):
                return "winograd"
        elif channels >= 32 and (pixels >= 14 * 14 or (channels >= 64 and pixels >= 7 * 7)):
            return "winograd"
        elif (channels >= F4_AUTO_MIN_CHANNELS
              and f4_problem(geom, op == "backward_data") is not None):
            return "winograd"  # F4_AUTO_MEASUREMENTS
    return candidates[0]


def select(geom: ConvGeometry, op: str, algo: str, num_threads: int) -> Algorithm:
    """Resolve ``algo`` ("auto", "find" or a name) to an algorithm instance for ``op`` (of
    ``geom`` itself where the algorithm builds its padding mode, see
    ``algorithms.implementation``)."""
    check_algo(algo)
    outer, geom = geom, geom.kernel_geometry
    if algo == "auto":
        algo = heuristic(geom, op)
    elif algo == "find":
        # An empty batch has nothing to time: the heuristic's choice computes it as well.
        algo = _find.winner(geom, op, num_threads) if geom.N else heuristic(geom, op)
    else:
        reason = why_not(algo, geom, op)
        if reason:
            raise ValueError(f"algo={algo!r} cannot run this convolution: {reason}")
    return implementation(outer, algo, op)


def _random_operands(geom: ConvGeometry,
                     rng: np.random.Generator) -> Tuple[Array, Array, Array]:
    g = geom
    x = rng.standard_normal((g.N, g.C, g.H, g.W)).astype(g.dtype)
    w = rng.standard_normal((g.K, g.Cg, g.R, g.S)).astype(g.dtype)
    y = rng.standard_normal((g.N, g.K, g.OH, g.OW)).astype(g.dtype)
    return x, w, y


def time_algorithms(geom: ConvGeometry, op: str, num_threads: int,
                    repeats: int = 3) -> List[AlgoResult]:
    """Time every usable algorithm on random data; fastest first.

    Returns
    -------
    list of AlgoResult
    """
    if op not in OPS:
        raise ValueError(f"op must be one of {OPS}, got {op!r}")
    geom = geom.kernel_geometry
    x, w, y = _random_operands(geom, np.random.default_rng(0))
    results = []
    for algo in usable(geom, op):
        impl = implementation(geom, algo)
        call: Callable[[], object]
        if op == "forward":
            out = np.empty_like(y)
            call = lambda: impl.forward(x, w, None, out, 1.0, 0.0, num_threads)  # noqa: E731
        elif op == "backward_data":
            out = np.empty_like(x)
            call = lambda: impl.backward_data(y, w, out, 1.0, 0.0, num_threads)  # noqa: E731
        else:
            call = lambda: impl.backward_weight(y, x, num_threads)  # noqa: E731
        call()  # warm-up: builds schedules, touches memory
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        results.append(AlgoResult(algo, float(np.median(times)) * 1e3,
                                  int(impl.workspace_bytes(op, num_threads))))
    return sorted(results, key=lambda r: r.time_ms)


_find = _find_cache.FindCache(
    measure=lambda geom, op, nthreads: time_algorithms(geom, op, nthreads)[0].algo,
    valid=lambda algo, geom, op: algo in ALGORITHMS and why_not(algo, geom, op) is None)
