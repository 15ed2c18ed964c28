"""Argument normalisation and validation: user arguments in, one ``ConvGeometry`` out.

This is the only place that looks at user input.  Everything downstream
(dispatcher, schedules, kernels) trusts a ``ConvGeometry``: sizes positive,
output at least one pixel, every size product representable in 64 bits.
Error messages name the argument and the values involved.
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
from dataclasses import dataclass
from typing import (TYPE_CHECKING, Any, Dict, Iterable, Optional, Sequence, SupportsFloat, Tuple,
                    Union, cast)

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from typing import TypeGuard

Array = npt.NDArray[Any]
Pair = Tuple[int, int]
Pads = Tuple[Pair, Pair]  # ((top, bottom), (left, right))
Shape4 = Tuple[int, int, int, int]
# What the size keywords accept (checked at run time here, whatever a caller's static type).
IntOrPair = Union[int, Sequence[int]]
Padding = Union[int, str, Sequence[Union[int, Sequence[int]]]]

LAYOUTS = ("NCHW", "NHWC")
WEIGHT_LAYOUTS = ("OIHW", "HWIO")
PADDING_STRINGS = ("valid", "same", "same_upper", "same_lower", "full")
# What fills the padding: zeros, a constant, or the input itself seen through a mirror, its
# edge or a wrap.  Names and meanings as PyTorch's ``padding_mode`` (and ``numpy.pad``'s
# "symmetric" for the mirror that repeats the edge).
PADDING_MODES = ("zeros", "constant", "reflect", "symmetric", "replicate", "circular")
# Dtypes the kernels compute in, and those accepted (float16 is computed in float32).
COMPUTE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
ACCEPTED_DTYPES = (np.dtype(np.float16),) + COMPUTE_DTYPES
# What the fused backward functions can compute.
NEEDS = ("data", "weight", "bias")
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class ConvGeometry:
    """A validated forward convolution problem; every pass and algorithm is described by it.

    Shapes are of the *forward* convolution: input (N, C, H, W), weight
    (K, C/groups, R, S), output (N, K, OH, OW), whatever the layouts.
    """

    N: int
    C: int
    H: int
    W: int
    K: int
    R: int
    S: int
    stride: Pair
    dilation: Pair
    pads: Pads
    groups: int
    layout: str
    weight_layout: str
    dtype: np.dtype[Any]  # the dtype kernels compute in: float32 or float64
    # "zeros" unless the padding copies the input (or is a non-zero constant); then the
    # kernels run ``kernel_geometry`` on an input padded beforehand (see ``cconv._boundary``).
    padding_mode: str = "zeros"
    padding_value: float = 0.0

    @functools.cached_property
    def kernel_geometry(self) -> ConvGeometry:
        """The zero-padding problem the algorithms run: this one, or for another padding
        mode the same convolution of the input padded beforehand, with no padding of its own
        (same output, same weight)."""
        if self.padding_mode == "zeros":
            return self
        (top, bottom), (left, right) = self.pads
        return dataclasses.replace(self, H=self.H + top + bottom, W=self.W + left + right,
                                   pads=((0, 0), (0, 0)), padding_mode="zeros",
                                   padding_value=0.0)

    @functools.cached_property
    def OH(self) -> int:
        return conv_output_size(self.H, self.R, self.stride[0], self.dilation[0], *self.pads[0])

    @functools.cached_property
    def OW(self) -> int:
        return conv_output_size(self.W, self.S, self.stride[1], self.dilation[1], *self.pads[1])

    @property
    def Cg(self) -> int:
        return self.C // self.groups

    @property
    def Kg(self) -> int:
        return self.K // self.groups

    @property
    def depthwise(self) -> bool:
        """True when each group has a single input channel (groups == C)."""
        return self.Cg == 1 and self.groups > 1

    @functools.cached_property
    def flops(self) -> int:
        """Multiply-adds x 2 of one pass of the direct convolution."""
        return 2 * self.N * self.K * self.OH * self.OW * self.Cg * self.R * self.S

    @functools.cached_property
    def _hash(self) -> int:
        return hash(tuple(getattr(self, f.name) for f in dataclasses.fields(self)))

    def __hash__(self) -> int:
        # Geometries key the algorithm, schedule and dispatch caches: hashing their twenty
        # fields on every lookup was ~1.5 us of a small call; they are immutable, so once.
        return self._hash

    def __getstate__(self) -> Dict[str, Any]:
        # A string's hash differs between processes: a pickled geometry (dask ships them)
        # hashes afresh where it lands.
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    def input_shape(self) -> Shape4:
        """The forward input's shape in ``layout`` order."""
        return _to_layout((self.N, self.C, self.H, self.W), self.layout)

    def output_shape(self) -> Shape4:
        """The forward output's shape in ``layout`` order."""
        return self._output_shape

    @functools.cached_property
    def _output_shape(self) -> Shape4:
        return _to_layout((self.N, self.K, self.OH, self.OW), self.layout)

    def weight_shape(self) -> Shape4:
        """The weight's shape in ``weight_layout`` order."""
        if self.weight_layout == "OIHW":
            return (self.K, self.Cg, self.R, self.S)
        return (self.R, self.S, self.Cg, self.K)


def conv_output_size(size: int, kernel: int, stride: int, dilation: int, pad_begin: int,
                     pad_end: int) -> int:
    """Output length of a convolution along one axis (may be <= 0 for an impossible one).

    ``floor((size + pad_begin + pad_end - dilation * (kernel - 1) - 1) / stride) + 1``: the
    one formula every pass, adapter and benchmark uses.
    """
    return (size + pad_begin + pad_end - dilation * (kernel - 1) - 1) // stride + 1


def flipped_pads(kernel: Sequence[int], dilation: Sequence[int],
                 pads: Sequence[Pair]) -> Tuple[Pair, ...]:
    """Per axis, the padding under which a unit-stride output gradient correlated with the
    flipped weight is the data gradient: ``dilation * (kernel - 1)`` less each side's
    padding (negative where that side's padding lies beyond the taps' reach)."""
    return tuple((d * (k - 1) - lo, d * (k - 1) - hi)
                 for k, d, (lo, hi) in zip(kernel, dilation, pads))


def transpose_output_size(size: int, kernel: int, stride: int, dilation: int, pad_begin: int,
                          pad_end: int) -> int:
    """Output length of a transposed convolution along one axis, before output padding:
    the largest input length of the convolution it transposes that gives ``size`` outputs
    without a remainder, ``(size - 1) * stride - pads + dilation * (kernel - 1) + 1``."""
    return (size - 1) * stride - pad_begin - pad_end + dilation * (kernel - 1) + 1


def _to_layout(nchw: Shape4, layout: str) -> Shape4:
    n, c, h, w = nchw
    return (n, c, h, w) if layout == "NCHW" else (n, h, w, c)


def _from_layout(shape: Sequence[int], layout: str) -> Shape4:
    """(N, C, H, W) from a shape in ``layout`` order."""
    if layout == "NCHW":
        return cast(Shape4, tuple(shape))
    n, h, w, c = shape
    return (n, c, h, w)


def _weight_oihw(shape: Sequence[int], weight_layout: str) -> Shape4:
    """(K, C/groups, R, S) from a weight shape in ``weight_layout`` order."""
    if weight_layout == "OIHW":
        return cast(Shape4, tuple(shape))
    r, s, cg, k = shape
    return (k, cg, r, s)


def _is_int(value: object) -> TypeGuard[numbers.Integral]:
    """True for an int or NumPy integer (never a bool)."""
    if type(value) is int:  # the common case, without the slower ABC check
        return True
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def normalize_pair(value: object, name: str, *, minimum: int) -> Pair:
    """Turn an int or a pair of ints into a pair, checking each is ``>= minimum``."""
    if _is_int(value):
        pair = (int(value), int(value))
    else:
        try:
            items = tuple(cast(Iterable[Any], value))  # the items are checked below
        except TypeError:
            raise TypeError(f"{name} must be an int or a pair of ints, got {value!r}") from None
        if len(items) != 2 or not all(_is_int(v) for v in items):
            raise TypeError(f"{name} must be an int or a pair of ints, got {value!r}")
        pair = (int(items[0]), int(items[1]))
    for v in pair:
        if v < minimum:
            kind = "positive" if minimum == 1 else f">= {minimum}"
            raise ValueError(f"{name} must be {kind}, got {value!r}")
    return pair


def check_choice(value: object, name: str, choices: Sequence[str]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise ValueError naming them."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def same_pads(size: int, kernel: int, stride: int, dilation: int, lower: bool) -> Pair:
    """Per-side padding of TensorFlow/oneDNN "SAME": output ceil(size / stride).

    The odd extra pixel goes at the end ("same_upper") or at the start ("same_lower").
    """
    out = -(-size // stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    small, large = total // 2, total - total // 2
    return (large, small) if lower else (small, large)


def normalize_padding(padding: object, *, spatial: Optional[Sequence[int]] = None,
                      kernel: Optional[Sequence[int]] = None,
                      stride: Optional[Sequence[int]] = None,
                      dilation: Optional[Sequence[int]] = None, allow_same: bool = True) -> Pads:
    """Per-side padding ((top, bottom), (left, right)) from any accepted form.

    Forms: int, (ph, pw), ((top, bottom), (left, right)), "valid", "full" (``dilation *
    (kernel - 1)`` on each side: every output that sees one input pixel), and (when
    ``allow_same``) "same" / "same_upper" / "same_lower", which need the spatial size.
    "full" and "same*" need the kernel and dilation, "same*" the stride too.
    """
    if isinstance(padding, str):
        mode = padding.lower()
        allowed = PADDING_STRINGS if allow_same else ("valid",)
        if mode not in allowed:
            raise ValueError(f"padding string must be one of {allowed}, got {padding!r}")
        if mode == "valid":
            return ((0, 0), (0, 0))
        # "full" and "same*" are allowed only to callers that pass the sizes they need.
        kernel, dilation = cast(Sequence[int], kernel), cast(Sequence[int], dilation)
        if mode == "full":
            return cast(Pads, tuple((dilation[i] * (kernel[i] - 1),) * 2 for i in range(2)))
        lower = mode == "same_lower"
        spatial, stride = cast(Sequence[int], spatial), cast(Sequence[int], stride)
        return cast(Pads, tuple(same_pads(spatial[i], kernel[i], stride[i], dilation[i], lower)
                                for i in range(2)))
    if _is_int(padding):
        p = int(padding)
        if p < 0:
            raise ValueError(f"padding must be non-negative, got {padding!r}")
        return ((p, p), (p, p))
    try:
        items = tuple(cast(Iterable[object], padding))
    except TypeError:
        raise TypeError(f"padding must be an int, a pair, per-side pairs or a string, "
                        f"got {padding!r}") from None
    if len(items) != 2:
        raise ValueError(f"padding must have 2 entries (height, width), got {padding!r}")
    pads = []
    for item in items:
        if _is_int(item):
            pads.append((int(item), int(item)))
            continue
        try:
            pair = tuple(cast(Iterable[Any], item))  # the items are checked below
        except TypeError:
            raise TypeError(f"padding entries must be ints or (begin, end) pairs, "
                            f"got {padding!r}") from None
        if len(pair) != 2 or not all(_is_int(v) for v in pair):
            raise TypeError(f"padding entries must be ints or (begin, end) pairs, got {padding!r}")
        pads.append((int(pair[0]), int(pair[1])))
    if any(v < 0 for pair in pads for v in pair):
        raise ValueError(f"padding must be non-negative, got {padding!r}")
    return cast(Pads, tuple(pads))


_NATIVE_ACCEPTED = frozenset(ACCEPTED_DTYPES)


def check_dtype(dtype: npt.DTypeLike, name: str) -> np.dtype[Any]:
    """Raise TypeError unless ``dtype`` is one of ``ACCEPTED_DTYPES`` (either byte order)."""
    if isinstance(dtype, np.dtype) and dtype in _NATIVE_ACCEPTED:  # the usual case, ~0.5 us
        return dtype
    dtype = np.dtype(dtype)
    if dtype.kind != "f" or dtype.newbyteorder("=") not in ACCEPTED_DTYPES:
        raise TypeError(f"{name} has dtype {dtype}; cconv computes in float16, float32 or "
                        f"float64 (convert explicitly)")
    return dtype


# DLPack device types (``__dlpack_device__()[0]``) whose memory the CPU reads directly.
_DLPACK_HOST_DEVICES = {1: "CPU", 3: "CUDA host (pinned)", 11: "ROCm host (pinned)"}
_DLPACK_DEVICE_NAMES = {2: "CUDA", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 9: "VPI",
                        10: "ROCm", 13: "CUDA managed", 14: "oneAPI"}


def _from_dlpack(value: Any, name: str) -> Array:  # Any: a DLPack exporter of any kind
    """A NumPy view of a DLPack-speaking array (no copy), or an error naming its device."""
    try:
        device_type, device_id = value.__dlpack_device__()
    except Exception as exc:  # e.g. PyTorch's "meta" tensors have no DLPack device
        raise ValueError(f"{name} is a {type(value).__name__} on a device cconv cannot read "
                         f"({exc}); cconv computes on the CPU: move it to host memory") from None
    if int(device_type) not in _DLPACK_HOST_DEVICES:
        device = _DLPACK_DEVICE_NAMES.get(int(device_type), f"DLPack device type "
                                                             f"{int(device_type)}")
        raise ValueError(f"{name} is a {type(value).__name__} on device {device}:{device_id}; "
                         f"cconv computes on the CPU: move it to host memory first")
    try:
        return np.from_dlpack(value)
    except (BufferError, TypeError, RuntimeError, ValueError) as exc:
        raise TypeError(f"{name} ({type(value).__name__}) could not be exported through "
                        f"DLPack: {exc}") from None


def as_float_array(value: object, name: str) -> Array:
    """``numpy.asarray(value)`` with a dtype check that names the argument.

    Any object with ``__dlpack__`` (a PyTorch CPU tensor, a JAX or CuPy array, ...) is
    viewed through DLPack without a copy; one on a GPU is a ValueError naming its device.
    """
    if type(value) is np.ndarray:
        arr = value
    elif not isinstance(value, np.ndarray) and hasattr(value, "__dlpack__"):
        arr = _from_dlpack(value, name)
    else:
        try:
            arr = np.asarray(value)
        except Exception as exc:  # ragged lists and the like
            raise TypeError(f"{name} could not be converted to an array: {exc}") from None
    check_dtype(arr.dtype, name)
    return arr


# (operand dtypes) -> compute dtype: ``numpy.result_type`` is ~1 us, a visible part of a
# small call; only the handful of accepted float dtypes ever reach here.
_COMPUTE_DTYPES: Dict[Tuple[Any, ...], np.dtype[Any]] = {}


def result_type(*dtypes: np.dtype[Any]) -> np.dtype[Any]:
    """``numpy.result_type`` of operand dtypes, remembered (see ``compute_dtype``)."""
    key = ("result",) + dtypes
    found = _COMPUTE_DTYPES.get(key)
    if found is None:
        found = np.result_type(*dtypes)
        if len(_COMPUTE_DTYPES) < 64:
            _COMPUTE_DTYPES[key] = found
    return found


def compute_dtype(*dtypes: npt.DTypeLike) -> np.dtype[Any]:
    """float64 if any operand is float64, else float32 (float16 is computed in float32)."""
    try:
        return _COMPUTE_DTYPES[dtypes]
    except (KeyError, TypeError):  # TypeError: an unhashable dtype-like
        pass
    result = np.result_type(*dtypes)
    found = np.dtype(np.float64) if result == np.float64 else np.dtype(np.float32)
    if all(isinstance(d, np.dtype) for d in dtypes) and len(_COMPUTE_DTYPES) < 64:
        _COMPUTE_DTYPES[dtypes] = found
    return found


def check_shape4(shape: object, name: str) -> Shape4:
    """A tuple of four non-negative ints, or ValueError naming ``name``."""
    if isinstance(shape, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of 4 ints, got {shape!r}")
    try:
        items = tuple(cast(Iterable[Any], shape))  # the items are checked below
    except TypeError:
        raise TypeError(f"{name} must be a sequence of 4 ints, got {shape!r}") from None
    if not all(_is_int(v) for v in items):
        raise TypeError(f"{name} must be a sequence of 4 ints, got {shape!r}")
    shape = tuple(int(v) for v in items)
    if len(shape) != 4:
        raise ValueError(f"{name} must be 4-D, got {len(shape)}-D shape {shape}")
    if any(v < 0 for v in shape):
        raise ValueError(f"{name} has a negative size: {shape}")
    return shape


def check_groups(groups: object) -> int:
    """``groups`` as a positive int: TypeError if it is not an int, ValueError if < 1."""
    if not _is_int(groups):
        raise TypeError(f"groups must be an int, got {groups!r}")
    groups = int(groups)
    if groups < 1:
        raise ValueError(f"groups must be positive, got {groups}")
    return groups


def _check_product(sizes: Sequence[int], what: str) -> int:
    product = 1
    for v in sizes:
        product *= int(v)
    # Bytes, at 8 per element, must fit in int64: every later offset then does too.
    if product * 8 > _INT64_MAX:
        raise ValueError(f"{what} has {product} elements, too many to index with 64-bit "
                         f"integers (sizes {tuple(sizes)})")
    return product


# Geometries of recent argument combinations: validation is most of a small call's Python
# time (a 1x4x8x8 convolution spent ~45% of its 70 us in make_geometry).  The key must tell
# ``stride=True`` or ``2.0`` from ``1`` or ``2`` (equal as dict keys), so it carries the type
# of every value and of every shape entry, and holds the arguments themselves only when the
# stride, padding, dilation and groups are plain ints (or a padding string, pairs of ints,
# or per-side pairs of them, as the 1-D and 3-D functions pass their 2-D calls): the usual
# call, keyed in ~1 us.  Other values (lists, NumPy integers and the like) are keyed by
# their repr (~2 us more).  Only valid arguments ever get an entry.
_GEOMETRY_CACHE: Dict[Tuple[object, ...], ConvGeometry] = {}
_GEOMETRY_CACHE_SIZE = 512


def is_exact(value: object) -> bool:
    """Whether ``value`` equals only values of its own types: a str, an int, a tuple of ints,
    or a tuple of such tuples (per-side padding pairs; bool is a subclass of int, so
    ``type(...) is int`` tells them apart)."""
    kind = type(value)
    if kind is int or kind is str:
        return True
    if kind is not tuple:
        return False
    for item in value:  # type: ignore[attr-defined]  # (loops: ~3x faster than all())
        kind = type(item)
        if kind is tuple:
            for entry in item:
                if type(entry) is not int:
                    return False
        elif kind is not int:
            return False
    return True


def cache_key(args: Tuple[Any, ...]) -> Tuple[object, ...]:
    """The validation caches' key of the arguments ``(x_shape, w_shape, stride, padding,
    dilation, groups, ...)``: equal only for arguments that validate alike (TypeError when
    one is unhashable)."""
    types = tuple(map(type, args)), tuple(map(type, args[0])), tuple(map(type, args[1]))
    stride, padding, dilation, groups = args[2:6]
    if is_exact(stride) and is_exact(padding) and is_exact(dilation) and is_exact(groups):
        return args, types
    return repr(args), types


def make_geometry(x_shape: Sequence[int], w_shape: Sequence[int], *, stride: IntOrPair = 1,
                  padding: Padding = 0, dilation: IntOrPair = 1, groups: int = 1,
                  layout: str = "NCHW", weight_layout: str = "OIHW",
                  dtype: npt.DTypeLike = np.float32, padding_mode: str = "zeros",
                  padding_value: float = 0.0, x_name: str = "x",
                  w_name: str = "weight") -> ConvGeometry:
    """Validate a forward convolution problem and return its ``ConvGeometry``.

    Results are remembered per argument combination (the same arguments always give the
    same geometry or the same error).

    Parameters
    ----------
    x_shape, w_shape : sequence of int
        Input shape in ``layout`` order and weight shape in ``weight_layout`` order.
    stride, padding, dilation, groups, layout, weight_layout, padding_mode, padding_value
        As in :func:`cconv.conv2d`.
    dtype : dtype
        The compute dtype (float32 or float64).
    x_name, w_name : str
        How error messages call the two shapes (e.g. "input_shape").

    Returns
    -------
    ConvGeometry
    """
    dtype = np.dtype(dtype)
    args = (x_shape, w_shape, stride, padding, dilation, groups, layout, weight_layout,
            padding_mode, padding_value, dtype, x_name, w_name)
    try:
        key = cache_key(args)
        geom = _GEOMETRY_CACHE.get(key)
    except TypeError:  # an unhashable argument (e.g. an array): validate without the cache
        return _make_geometry(*args)
    if geom is None:
        geom = _make_geometry(*args)
        if len(_GEOMETRY_CACHE) >= _GEOMETRY_CACHE_SIZE:
            _GEOMETRY_CACHE.clear()
        _GEOMETRY_CACHE[key] = geom
    return geom


def _make_geometry(x_shape: object, w_shape: object, stride: object, padding: object,
                   dilation: object, groups: object, layout: str, weight_layout: str,
                   padding_mode: str, padding_value: object, dtype: np.dtype[Any], x_name: str,
                   w_name: str) -> ConvGeometry:
    check_choice(layout, "layout", LAYOUTS)
    check_choice(weight_layout, "weight_layout", WEIGHT_LAYOUTS)
    x_shape = check_shape4(x_shape, x_name)
    w_shape = check_shape4(w_shape, w_name)
    N, C, H, W = _from_layout(x_shape, layout)
    K, Cg, R, S = _weight_oihw(w_shape, weight_layout)
    groups = check_groups(groups)
    if C == 0 or H == 0 or W == 0:
        raise ValueError(f"{x_name} must have non-zero channels and spatial size, "
                         f"got shape {x_shape} ({layout})")
    if K == 0 or Cg == 0 or R == 0 or S == 0:
        raise ValueError(f"{w_name} must have non-zero sizes, got shape {w_shape} "
                         f"({weight_layout})")
    if C % groups:
        raise ValueError(f"groups={groups} does not divide the {C} input channels of {x_name}")
    if K % groups:
        raise ValueError(f"groups={groups} does not divide the {K} output channels of {w_name}")
    if Cg * groups != C:
        raise ValueError(f"{w_name} has {Cg} input channels per group but {x_name} has "
                         f"{C} channels / groups={groups} = {C // groups}")
    stride = normalize_pair(stride, "stride", minimum=1)
    dilation = normalize_pair(dilation, "dilation", minimum=1)
    pads = normalize_padding(padding, spatial=(H, W), kernel=(R, S), stride=stride,
                             dilation=dilation)
    _check_product((N, C, H, W), x_name)
    _check_product((K, Cg, R, S), w_name)
    for axis, size, k, d, (lo, hi) in (("height", H, R, dilation[0], pads[0]),
                                       ("width", W, S, dilation[1], pads[1])):
        extent = d * (k - 1) + 1
        if size + lo + hi > _INT64_MAX // 64 or extent > _INT64_MAX // 64:
            raise ValueError(f"padding or dilation too large along {axis}")
        if extent > size + lo + hi:
            raise ValueError(f"kernel extent {extent} (size {k}, dilation {d}) is larger than "
                             f"the padded input {size + lo + hi} (size {size}, padding "
                             f"{(lo, hi)}) along {axis}")
    # A stride longer than the padded input yields one output row whatever its value, and
    # every pass depends on it only through that fact: cap it at the padded size, so no plan
    # iterates over (or multiplies by) an absurd stride.
    stride = cast(Pair, tuple(min(s, size + lo + hi)
                              for s, size, (lo, hi) in zip(stride, (H, W), pads)))
    padding_mode, padding_value = check_padding_mode(padding_mode, padding_value, pads, (H, W),
                                                     padding)
    geom = ConvGeometry(N=N, C=C, H=H, W=W, K=K, R=R, S=S, stride=stride, dilation=dilation,
                        pads=pads, groups=groups, layout=layout, weight_layout=weight_layout,
                        dtype=np.dtype(dtype), padding_mode=padding_mode,
                        padding_value=padding_value)
    _check_product((N, K, geom.OH, geom.OW), "the output")
    # Blocked buffers pad channels and the image; bound them too (loosely, x4 + margins).
    _check_product((max(N, 1), C + 64, H + sum(pads[0]) + 1, W + sum(pads[1]) + 1, 4),
                   "the padded input buffer")
    return geom


def check_padding_mode(padding_mode: str, padding_value: object, pads: Sequence[Pair],
                       spatial: Sequence[int], padding: object) -> Tuple[str, float]:
    """``(padding_mode, padding_value)`` normalised, or an error naming what is wrong.

    A constant of zero is the "zeros" mode (the kernels' own padding).  A mode that reads
    the input beyond its far edge needs the input to be large enough: "reflect" padding
    must be smaller than the size (PyTorch's rule), "circular" at most the size.
    "symmetric" and "replicate" accept any padding (the mirror repeats, as ``numpy.pad``).
    """
    check_choice(padding_mode, "padding_mode", PADDING_MODES)
    if isinstance(padding_value, (bool, np.bool_)) or not isinstance(padding_value,
                                                                      numbers.Real):
        raise TypeError(f"padding_value must be a real number, got {padding_value!r}")
    padding_value = float(padding_value)
    if padding_mode == "zeros" and padding_value != 0:
        raise ValueError(f"padding_value={padding_value!r} applies only to "
                         f"padding_mode='constant', got padding_mode='zeros'")
    if padding_mode in ("reflect", "symmetric", "replicate", "circular") and padding_value:
        raise ValueError(f"padding_value={padding_value!r} applies only to "
                         f"padding_mode='constant', got padding_mode={padding_mode!r}")
    if padding_mode == "constant" and padding_value == 0:
        padding_mode = "zeros"
    if padding_mode == "zeros" or pads == ((0, 0), (0, 0)):
        return "zeros", 0.0
    for axis, size, (lo, hi) in zip(("height", "width"), spatial, pads):
        limit = {"reflect": size - 1, "circular": size}.get(padding_mode)
        if limit is not None and max(lo, hi) > limit:
            rule = "smaller than" if padding_mode == "reflect" else "at most"
            raise ValueError(f"padding_mode={padding_mode!r} needs padding {rule} the input "
                             f"size: padding={padding!r} gives {(lo, hi)} along {axis}, "
                             f"where the input has size {size}")
    return padding_mode, padding_value


# -- the other arguments of a call ----------------------------------------------------------

def check_scalars(alpha: SupportsFloat, beta: SupportsFloat) -> Tuple[float, float]:
    """``alpha`` and ``beta`` as floats, or TypeError naming the one that is not real."""
    for name, value in (("alpha", alpha), ("beta", beta)):
        if type(value) is float:
            continue
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be a real number, got {value!r}")
    return float(alpha), float(beta)


def check_out(out: object, shape: Sequence[int], dtype: npt.DTypeLike) -> Optional[Array]:
    """``out`` if it can receive a result of ``shape`` and ``dtype``, else an error."""
    if out is None:
        return None
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray, got {type(out).__name__}")
    if out.shape != tuple(shape):
        raise ValueError(f"out has shape {out.shape}, expected {tuple(shape)}")
    if out.dtype != dtype:
        raise TypeError(f"out has dtype {out.dtype}, expected {np.dtype(dtype)}")
    if not out.flags.writeable:
        raise ValueError("out is read-only")
    return out


def check_bias(bias: object, channels: int, dtype: npt.DTypeLike) -> Optional[Array]:
    """``bias`` as a contiguous (channels,) array of ``dtype``, or None."""
    if bias is None:
        return None
    b = as_float_array(bias, "bias")
    if b.shape != (channels,):
        raise ValueError(f"bias must have shape ({channels},), got {b.shape}")
    return np.ascontiguousarray(b, dtype=dtype)


def check_grad_out(grad_out: Array, expected: Sequence[int], layout: str, shape_name: str,
                   shape: Sequence[int]) -> None:
    """ValueError unless ``grad_out`` has the convolution output shape ``expected``."""
    if grad_out.shape != tuple(expected):
        raise ValueError(f"grad_out has shape {grad_out.shape} but {shape_name}={tuple(shape)} "
                         f"gives a convolution output of shape {tuple(expected)} ({layout})")


def check_need(need: Union[str, Iterable[str]]) -> Tuple[str, ...]:
    """The ``need`` keyword of the fused backward functions as a tuple of names."""
    if isinstance(need, str):
        need = (need,)
    need = tuple(need)
    for item in need:
        if item not in NEEDS:
            raise ValueError(f"need entries must be among {NEEDS}, got {item!r}")
    return need


def make_transpose_geometry(x_shape: Sequence[int], w_shape: Sequence[int],
                            dtype: npt.DTypeLike, *, stride: IntOrPair, padding: Padding,
                            output_padding: IntOrPair, dilation: IntOrPair, groups: int,
                            layout: str, weight_layout: str,
                            output_shape: Optional[Sequence[int]],
                            padding_mode: str = "zeros",
                            padding_value: object = 0.0) -> Tuple[ConvGeometry, Pair]:
    """The geometry of the convolution that ``conv_transpose2d`` transposes.

    Returns ``(geom, extra)``: ``extra`` = (rows, cols) of zeros the transposed
    conv's input lacks at the bottom/right when ``output_padding >= stride``.
    ``padding_mode`` is that convolution's: the transposed convolution is its adjoint, which
    for "constant" is the adjoint of its linear part, the "zeros" convolution, so
    ``padding_value`` (checked by the same rules as for :func:`cconv.conv2d`) does not enter.
    """
    check_choice(layout, "layout", LAYOUTS)
    check_choice(weight_layout, "weight_layout", WEIGHT_LAYOUTS)
    x_shape = check_shape4(x_shape, "x")
    w_shape = check_shape4(w_shape, "weight")
    N, Cin, H, W = _from_layout(x_shape, layout)
    if Cin == 0 or H == 0 or W == 0:  # output_padding alone would make an output of them
        raise ValueError(f"x must have non-zero channels and spatial size, got shape "
                         f"{x_shape} ({layout})")
    stride_p = normalize_pair(stride, "stride", minimum=1)
    dilation_p = normalize_pair(dilation, "dilation", minimum=1)
    if weight_layout == "OIHW":
        _, kg, R, S = w_shape
    else:
        R, S, kg, _ = w_shape
    pads = normalize_padding(padding, allow_same=False)
    check_padding_mode(padding_mode, padding_value, ((0, 0), (0, 0)), (1, 1), padding)
    if padding_mode == "constant":
        padding_mode = "zeros"
    groups = check_groups(groups)
    base = [transpose_output_size(size, k, s, d, lo, hi)
            for size, s, (lo, hi), d, k in zip((H, W), stride_p, pads, dilation_p, (R, S))]
    if output_shape is not None:
        target = check_shape4(output_shape, "output_shape")
        tn, tk, th, tw = _from_layout(target, layout)
        if tn != N or tk != kg * groups:
            raise ValueError(f"output_shape {tuple(target)} does not match batch {N} and "
                             f"output channels {kg * groups}")
        op = (th - base[0], tw - base[1])
        name = "output_shape"
    else:
        op = normalize_pair(output_padding, "output_padding", minimum=0)
        name = "output_padding"
    for axis, value, s, d in zip(("height", "width"), op, stride_p, dilation_p):
        if not 0 <= value < max(s, d):
            raise ValueError(f"{name} implies output padding {value} along {axis}; it must be "
                             f">= 0 and smaller than stride {s} or dilation {d}")
    out_hw = [b + p for b, p in zip(base, op)]
    if min(out_hw) < 1:
        raise ValueError(f"transposed convolution output would be {tuple(out_hw)}: padding "
                         f"{pads} too large for input {H}x{W}")
    fwd_x = _to_layout((N, kg * groups, out_hw[0], out_hw[1]), layout)
    geom = make_geometry(fwd_x, w_shape, stride=stride_p, padding=pads, dilation=dilation_p,
                         groups=groups, layout=layout, weight_layout=weight_layout, dtype=dtype,
                         padding_mode=padding_mode, x_name="output_shape", w_name="weight")
    if geom.K != Cin:
        raise ValueError(f"weight has {geom.K} input channels but x has {Cin}")
    return geom, (geom.OH - H, geom.OW - W)


def check_transpose_grad_out(grad_out: Array, geom: ConvGeometry, layout: str) -> None:
    """``grad_out`` must have the transposed convolution's output shape (the forward input's)."""
    if grad_out.shape != geom.input_shape():
        raise ValueError(f"grad_out has shape {grad_out.shape} but x / input_shape and the "
                         f"keywords give a transposed convolution output of shape "
                         f"{geom.input_shape()} ({layout})")

