"""cconv: CPU 2-D convolution for NumPy, in Cython with OpenMP.

What it computes: 2-D convolution forward, its gradients with respect to data,
weight and bias, and transposed convolution; any stride, padding, dilation and
groups (depthwise included), NCHW or NHWC, float16/32/64.

How a call flows::

    conv2d(x, w, ...)                       functional.py: the public functions
      -> make_geometry(...)                 _geometry.py: validate once -> ConvGeometry
      -> _dispatch.select(geom, op, algo)   _dispatch.py: "auto" heuristic, "find" (+ _find_cache)
      -> _execute.forward(impl, ...)        _execute.py: operands to kernel views, result out
      -> DirectConvolution.forward          algorithms/direct.py: pack -> tile jobs -> unpack
           -> direct_schedule.forward       algorithms/direct_schedule.py: job tables (NumPy)
           -> _tiles_<isa>.run_jobs_*       _kernels/_tiles.pyx.tp: OpenMP prange over tiles
              (long one-row problems:       _kernels/_rows.pyx.tp: vectors along the row,
               _rows_<isa>.correlate)       read and written in place)

The algorithms (``cconv/algorithms/``: direct, winograd, gemm) share one contract
(``algorithms/base.py``); each module sits beside its schedule.  Imports flow one way:
functional / _plan -> _dispatch -> algorithms -> _kernels; nothing below imports upward.

Why it is shaped like this: the direct kernels are register tiles (14 pixels x
32 channels on AVX-512) that keep every accumulator in a vector register; the
data they read is repacked with channels innermost so each tile step is a few
broadcasts and fused multiply-adds.  One tile kernel serves every pass: the
scheduler only changes which offsets it walks.  The kernels are compiled per
SIMD level and the best one the CPU supports is loaded at import
(``CCONV_SIMD`` overrides).
"""

from ._version import __version__
from ._config import show_config
from ._dispatch import AlgoResult
from .algorithms import ALGORITHMS
from ._plan import ConvPlan, PreparedWeight, plan_conv2d
from ._threads import get_num_threads, set_num_threads
from .functional import (conv2d, conv2d_backward, conv2d_backward_bias, conv2d_backward_data,
                         conv2d_backward_weight, conv_transpose2d, conv_transpose2d_backward,
                         conv_transpose2d_backward_data, conv_transpose2d_backward_weight)
from ._plan_nd import Conv1dPlan, Conv3dPlan, find_algorithms, plan_conv1d, plan_conv3d
from .functional_nd import (conv1d, conv1d_backward, conv1d_backward_bias, conv1d_backward_data,
                            conv1d_backward_weight, conv3d, conv3d_backward, conv3d_backward_bias,
                            conv3d_backward_data, conv3d_backward_weight, conv_transpose1d,
                            conv_transpose1d_backward, conv_transpose1d_backward_data,
                            conv_transpose1d_backward_weight, conv_transpose3d,
                            conv_transpose3d_backward, conv_transpose3d_backward_data,
                            conv_transpose3d_backward_weight)

__all__ = ["__version__", "ALGORITHMS", "AlgoResult", "ConvPlan", "PreparedWeight", "conv2d",
           "conv2d_backward", "conv2d_backward_bias", "conv2d_backward_data",
           "conv2d_backward_weight", "conv_transpose2d", "conv_transpose2d_backward",
           "conv_transpose2d_backward_data", "conv_transpose2d_backward_weight",
           "find_algorithms", "get_num_threads", "plan_conv2d", "set_num_threads", "show_config",
           "Conv1dPlan", "Conv3dPlan", "plan_conv1d", "plan_conv3d",
           "conv1d", "conv1d_backward", "conv1d_backward_bias", "conv1d_backward_data",
           "conv1d_backward_weight", "conv3d", "conv3d_backward", "conv3d_backward_bias",
           "conv3d_backward_data", "conv3d_backward_weight", "conv_transpose1d",
           "conv_transpose1d_backward", "conv_transpose1d_backward_data",
           "conv_transpose1d_backward_weight", "conv_transpose3d", "conv_transpose3d_backward",
           "conv_transpose3d_backward_data", "conv_transpose3d_backward_weight"]
