"""Compatibility adapters: other libraries' convolution calling conventions on cconv.

Each module keeps one library's names, argument order, array layouts and edge-case
semantics, and translates them into a single call to the public core API
(``cconv.conv2d``, ``conv2d_backward_data``, ``conv2d_backward_weight``,
``conv2d_backward_bias``, ``conv_transpose2d``, ``plan_conv2d``, ``find_algorithms``, and their
1-D / 3-D counterparts ``conv1d`` / ``conv3d`` ... for the adapters that take those ranks).
No adapter contains a convolution loop of its own: the array work done here is transposing /
flipping / reshaping views, boundary extension beyond what the core's padding modes accept
(SciPy's modes repeat periodically for any kernel size), (for MIOpen's bias calls) a
broadcast add, and one exception: ``signal`` sums 32/64-bit integer inputs exactly over the
kernel taps in NumPy when float64 could round them (SciPy wraps such sums as integers).

The adapters::

    from cconv.compat import arrayfire   # convolve2_nn, convolve2_gradient_nn   (d0, d1, C, N)
    from cconv.compat import tensorflow  # conv1d/2d/3d, depthwise_conv2d_native, backprops
                                         #   (NWC / NHWC / NDHWC)
    from cconv.compat import onednn      # Graph API convolution_forward / _backward_data /
                                         #   _backward_weights, 1-D to 3-D (NCX / NXC)
    from cconv.compat import miopen      # Convolution(Nd)Descriptor, Find, execute with
                                         #   alpha/beta, 1-D to 3-D
    from cconv.compat import ndimage     # scipy.ndimage.correlate / convolve (modes, origin, axes)
    from cconv.compat import signal      # scipy.signal.convolve2d / correlate2d

Padding is always resolved to explicit per-side amounts here (TensorFlow "SAME", oneDNN
auto_pad, ...) before the core is called, so each adapter's rule is visible in its own module.
"""

from __future__ import annotations

import importlib as _importlib
from types import ModuleType as _ModuleType
from typing import TYPE_CHECKING, Any, Iterable, Tuple, cast

if TYPE_CHECKING:
    from typing import TypedDict

    from .._geometry import IntOrPair, Padding

    class _ConvKeywords(TypedDict, total=False):
        """The geometry keywords an adapter passes on to the core functions."""

        stride: IntOrPair
        padding: Padding
        dilation: IntOrPair
        groups: int
        layout: str
        weight_layout: str

__all__ = ["arrayfire", "tensorflow", "onednn", "miopen", "ndimage", "signal"]


# lazy submodule access: ``cconv.compat.miopen`` without importing all
def __getattr__(name: str) -> _ModuleType:
    if name in __all__:
        return _importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---------------------------------------------------------------------------------------------
# Small helpers shared by the adapters (argument normalisation only).


def _int(value: object, what: str) -> int:
    """A Python int from an int-like (numpy integers included); bool and floats are refused."""
    import numbers

    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what} must be an integer, got {value!r}")
    return int(value)


def _pair(value: object, what: str) -> Tuple[int, int]:
    """int -> (v, v); 2-sequence -> (a, b). Anything else is a ValueError naming ``what``."""
    import numbers

    if not isinstance(value, bool) and isinstance(value, numbers.Integral):
        return (int(value), int(value))
    try:
        items = list(cast(Iterable[Any], value))  # the items are checked below
    except TypeError:
        raise TypeError(f"{what} must be an int or a pair of ints, got {value!r}") from None
    if len(items) != 2:
        raise ValueError(f"{what} must have 2 entries (height, width), got {len(items)}: {value!r}")
    return (_int(items[0], what), _int(items[1], what))


# The "same" padding rule and the output size have one home, cconv._geometry; the adapters
# use them under these names.
from .._geometry import conv_output_size as _geometry_conv_out  # noqa: E402
from .._geometry import same_pads as _geometry_same_pads  # noqa: E402

_conv_out = _geometry_conv_out  # an assignment, so type checkers see the adapters' import


def _same_pads(in_size: int, kernel: int, stride: int, dilation: int,
               lower: bool = False) -> Tuple[int, int]:
    """TensorFlow / ONNX / oneDNN "SAME" padding for one axis -> (begin, end); the odd extra
    pixel goes to the end ("same_upper", TensorFlow) or to the beginning ("same_lower")."""
    return _geometry_same_pads(in_size, kernel, stride, dilation, lower)
