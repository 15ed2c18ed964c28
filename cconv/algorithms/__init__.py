"""The convolution algorithms and their registry.

Each module here is one algorithm behind the contract of :class:`base.Algorithm`
(``why_not``, ``forward``, ``backward_data``, ``backward_weight``, ``prepare_weight``,
``workspace_bytes(op, nthreads)``), with the module that schedules it beside it:

=============  =========================  ==============================================
algorithm      module (+ schedule)        kernels (``cconv/_kernels``)
=============  =========================  ==============================================
``direct``     direct.py                  _layout.pyx (packing), _tiles.pyx.tp (tiles);
               + direct_schedule.py       _rows.pyx.tp (long one-row problems: 1-D)
``winograd``   winograd.py                _layout.pyx, _winograd.pyx.tp, which includes
               + winograd_schedule.py     _winograd_gemm.pxi.tp, _winograd_transforms.pxi.tp
``gemm``       gemm.py + gemm_schedule.py none: NumPy's BLAS (``numpy.matmul``) on the
               + im2col.py                activations in place (1x1) or on bounded im2col
                                          chunks (every other shape)
``depthwise``  depthwise.py               _depthwise.pyx.tp (row- and channel-vector loops;
                                          depthwise and few-channel groups)
=============  =========================  ==============================================

The registry order is the order of preference when a shape could use several and no
heuristic rule applies (see ``cconv._dispatch``); ``direct`` runs every shape and is the
reference the others fall back to.  Nothing here imports the dispatcher.

A geometry with another ``padding_mode`` is the algorithm's own problem only for the passes
in its ``padding_mode_ops`` (the depthwise kernels build every mode in their band buffers,
for forward and the weight gradient).  Otherwise the algorithm sees only zero padding: it
runs the geometry's ``kernel_geometry`` (the padded input's problem; ``cconv._boundary`` pads
before and folds after).  ``why_not`` and ``usable`` do not depend on the mode.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, Type

from .base import OPS, Algorithm, TransformedWeight
from .depthwise import DepthwiseConvolution
from .direct import DirectConvolution
from .gemm import GemmConvolution
from .winograd import WinogradConvolution

if TYPE_CHECKING:
    from .._geometry import ConvGeometry

REGISTRY: Dict[str, Type[Algorithm]] = {
    cls.name: cls for cls in (DirectConvolution, WinogradConvolution, GemmConvolution,
                              DepthwiseConvolution)}
ALGORITHMS = tuple(REGISTRY)

__all__ = ["ALGORITHMS", "OPS", "REGISTRY", "Algorithm", "TransformedWeight", "implementation",
           "usable", "why_not"]


def why_not(algo: str, geom: ConvGeometry, op: str) -> Optional[str]:
    """Why algorithm ``algo`` cannot run pass ``op`` on ``geom``, or None if it can."""
    return REGISTRY[algo].why_not(geom.kernel_geometry, op)


def usable(geom: ConvGeometry, op: str) -> List[str]:
    """Names of the algorithms that can run ``op`` on ``geom``, in registry order."""
    geom = geom.kernel_geometry
    return [name for name, cls in REGISTRY.items() if cls.why_not(geom, op) is None]


def implementation(geom: ConvGeometry, algo: str, op: Optional[str] = None) -> Algorithm:
    """The cached instance of algorithm ``algo`` for ``geom`` (it holds the schedules).

    For pass ``op`` in the algorithm's ``padding_mode_ops`` the instance runs ``geom`` itself,
    padding mode included; otherwise (and without ``op``) it runs ``geom.kernel_geometry``,
    and the caller pads / folds (``cconv._execute``)."""
    cls = REGISTRY[algo]
    return cls.for_geometry(geom if op in cls.padding_mode_ops else geom.kernel_geometry)
