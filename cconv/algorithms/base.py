"""What every convolution algorithm provides: the contract the dispatcher relies on.

An algorithm is a class constructed from one validated ``ConvGeometry``; the instance holds
whatever it precomputes for that geometry (schedules, tile sizes) and runs any of the three
passes on arrays the public functions have already validated:

* activations as 4-D views in logical (N, C, H, W) order (any strides, compute dtype),
* weights as contiguous (K, C/groups, R, S) arrays of the compute dtype,
* results written as ``out = alpha * (result + bias) + beta * out`` into a logical NCHW view
  (``beta == 0`` never reads ``out``), except backward-weight, which returns a new array.

Instances are cached per (class, geometry) by :meth:`Algorithm.for_geometry`, so an algorithm
that falls back to another (Winograd to direct on NaN input, GEMM to direct for its weight
gradient) reuses that one's schedules without going through the dispatcher.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, FrozenSet, Optional, Tuple, Type

import numpy.typing as npt

from .. import _relayout, _workspace

if TYPE_CHECKING:
    from .._geometry import ConvGeometry

Array = npt.NDArray[Any]

OPS = ("forward", "backward_data", "backward_weight")


@dataclass(frozen=True)
class TransformedWeight:
    """A weight transformed once by one algorithm for one geometry.

    Attributes
    ----------
    algorithm : str
        The name of the algorithm that made it (and the only one that can use it).
    geometry : ConvGeometry
        The geometry it was made for.
    data : ndarray
        The transformed weight, in that algorithm's private layout.
    """

    algorithm: str
    geometry: ConvGeometry
    data: Array

    def serves(self, algorithm: Algorithm, geometry: ConvGeometry) -> bool:
        """True if ``algorithm`` running ``geometry`` can use this prepared weight."""
        return self.algorithm == algorithm.name and self.geometry == geometry


class Algorithm:
    """Base class of the convolution algorithms.

    Subclasses set :attr:`name` and implement every method below; :meth:`why_not` is the
    only one called before an instance exists.
    """

    name = "?"
    #: The passes this algorithm runs on the geometry's own padding mode, building the
    #: padding where it copies its input anyway; for the other passes (and every pass of the
    #: other algorithms) a padding mode is padded beforehand and folded after
    #: (``cconv._boundary``), and the algorithm sees ``ConvGeometry.kernel_geometry``.
    padding_mode_ops: FrozenSet[str] = frozenset()
    #: The passes (of ``forward`` and ``backward_data``) that read the (K, C/groups, R, S)
    #: weight with any strides: a channels-last HWIO weight is then passed as a transposed
    #: view, not converted.  The other passes get a contiguous OIHW weight.
    strided_weight_ops: FrozenSet[str] = frozenset()

    def __init__(self, geom: ConvGeometry) -> None:
        """Bind the algorithm to ``geom``; ValueError with the reason if it cannot run it."""
        reason = self.why_not(geom, "forward")
        if reason:
            raise ValueError(reason)
        self.geom = geom

    @classmethod
    def why_not(cls, geom: ConvGeometry, op: str) -> Optional[str]:
        """The reason this algorithm cannot run pass ``op`` on ``geom``, or None if it can.

        Parameters
        ----------
        geom : ConvGeometry
        op : {"forward", "backward_data", "backward_weight"}

        Returns
        -------
        str or None
        """
        raise NotImplementedError

    @classmethod
    def for_geometry(cls, geom: ConvGeometry) -> Algorithm:
        """The cached instance of this algorithm for ``geom`` (built on first use).

        Parameters
        ----------
        geom : ConvGeometry

        Returns
        -------
        Algorithm
        """
        # Classes are hashable; mypy reads ``type.__hash__`` as the instances' unbound method.
        return _instance(cls, geom)  # type: ignore[arg-type]

    def prepare_weight(self, w: Array, nthreads: int) -> Optional[TransformedWeight]:
        """Transform ``w`` once for :meth:`forward`.

        Returns
        -------
        TransformedWeight or None
            None when there is nothing to precompute (or the weight cannot be transformed,
            e.g. it holds NaN); :meth:`forward` then works from the plain weight.
        """
        raise NotImplementedError

    def forward(self, x: Array, w: Array, bias: Optional[Array], y: Array, alpha: float,
                beta: float, nthreads: int, prepared: Optional[TransformedWeight] = None) -> None:
        """``y = alpha * (conv(x, w) + bias) + beta * y``; ``prepared`` from
        :meth:`prepare_weight` of the same weight, or None."""
        raise NotImplementedError

    def backward_data(self, dy: Array, w: Array, dx: Array, alpha: float, beta: float,
                      nthreads: int, bias: Optional[Array] = None) -> None:
        """``dx = alpha * (conv_backward_data(dy, w) + bias) + beta * dx``; ``bias`` (C,)
        serves transposed convolution, whose forward pass this is."""
        raise NotImplementedError

    def backward_data_split(self, dy: Array, w: Array, dx: Array, ring: Array,
                            origin: Tuple[int, int], alpha: float, beta: float, nthreads: int,
                            bias: Optional[Array] = None) -> bool:
        """The data gradient of a padded input, split as a padding mode's fold wants it.

        The input pixels of the window at ``origin`` (top, left) of ``dx``'s height and
        width get ``dx = alpha * (gradient + bias) + beta * dx``; every other pixel of the
        (padded) input gets its raw gradient in ``ring`` (the geometry's input shape; its
        window is left alone).  Returns False, having written nothing, where the algorithm
        cannot split its output (the default) or falls back for this call; the caller then
        computes the whole padded gradient and folds it.
        """
        return False

    def backward_weight(self, dy: Array, x: Array, nthreads: int) -> Array:
        """The weight gradient as a new contiguous (K, C/groups, R, S) array."""
        raise NotImplementedError

    def workspace_bytes(self, op: str, nthreads: int) -> int:
        """Bytes one call of ``op`` on ``nthreads`` threads allocates besides its result.

        Parameters
        ----------
        op : {"forward", "backward_data", "backward_weight"}
        nthreads : int

        Returns
        -------
        int
        """
        raise NotImplementedError


def memory_layout(array_nchw: Array) -> Optional[str]:
    """"NCHW" when a logical (N, C, H, W) view is a C-contiguous NCHW array, "NHWC" when it is
    a C-contiguous NHWC one (checked second: a 1x1 image is both), else None."""
    if array_nchw.flags.c_contiguous:
        return "NCHW"
    if array_nchw.transpose(0, 2, 3, 1).flags.c_contiguous:
        return "NHWC"
    return None


@functools.lru_cache(maxsize=256)
def _instance(cls: Type[Algorithm], geom: ConvGeometry) -> Algorithm:
    return cls(geom)


def compute_into(y: Array, alpha: float, beta: float,
                 call: Callable[[Array, float, float], None], nthreads: int = 1) -> None:
    """``call(out, a, b)`` (a kernel writing ``out = a * result + b * out``) into ``y``, or,
    when ``y`` is not contiguous (the kernels take contiguous arrays), into a temporary
    whose result is then scaled into ``y`` (transposed on ``nthreads`` threads by
    ``cconv._relayout`` when ``y`` is a channels-last array)."""
    if y.flags.c_contiguous:
        call(y, alpha, beta)
        return
    tmp = _workspace.empty_result(y.shape, y.dtype)
    call(tmp, 1.0, 0.0)
    if _relayout.store(y, tmp, alpha, beta, nthreads):
        return
    y[...] = alpha * tmp if beta == 0 else alpha * tmp + beta * y
