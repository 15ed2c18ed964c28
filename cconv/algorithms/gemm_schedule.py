"""Chunks of the im2col GEMM: which output pixels one column buffer holds.

The GEMM algorithm turns a convolution into matrix products over a *column buffer*: for a
block of output pixels, every input value each of them reads (``C * R * S`` per pixel).  The
whole buffer would be ``R * S`` times the input, so the output is cut into chunks, each small
enough that its columns, its zero-padded input and its product stay under
:data:`CHUNK_BUDGET_BYTES`.  A chunk is, from the largest kind to the smallest,

* several whole images (when one image fits the budget),
* a band of output rows of one image (when one output row fits),
* a run of pixels of one output row (otherwise; a single pixel at the least).

Chunks depend on the shape and the budget only, never on the thread count, and are always
visited in the same order: each chunk's product is computed the same way whichever thread
runs it, and sums over chunks (the weight gradient; the input gradient where chunks'
input windows overlap) are added in chunk order, so results do not depend on the thread
count.  Splits are near-equal with any larger chunk first: the first chunk is the largest.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator, NamedTuple

if TYPE_CHECKING:
    from .._geometry import ConvGeometry

# Bytes of one chunk's working set (columns + zero-padded input + product).  Large enough
# that a chunk's matrix product has thousands of pixels to amortise BLAS's packing of the
# weight (a 64-channel 3x3 layer: ~3000 pixels per chunk), small enough that the buffers
# of the chunks in flight (one per thread) are still in the last-level cache when BLAS
# reads what NumPy just wrote (32 MiB on the 2-core AMD EPYC Zen 4 this was written on)
# and that the workspace stays far below the activations of a large batch.
CHUNK_BUDGET_BYTES = 8 << 20

# Every chunk's product runs on one BLAS thread, and threads work on different chunks (a
# threaded BLAS may block a product differently for another thread count, and results must
# not depend on it).  So that threads have chunks to share, a problem whose working set
# fits the budget is still cut into up to this many chunks, as long as each keeps at least
# MIN_PIECE_BYTES of work (smaller chunks cost more in Python overhead than they gain).
PARALLEL_PIECES = 8
MIN_PIECE_BYTES = 1 << 20

Span = tuple[int, int]


class Chunk(NamedTuple):
    """One block of output pixels: images ``[n0, n1)``, rows ``[i0, i1)``, columns ``[j0, j1)``.

    Attributes
    ----------
    images, rows, cols : tuple of int
        Half-open ranges of the output's batch, height and width.
    """

    images: Span
    rows: Span
    cols: Span

    @property
    def pixels(self) -> int:
        """Output pixels of the chunk (images x rows x columns)."""
        return ((self.images[1] - self.images[0]) * (self.rows[1] - self.rows[0])
                * (self.cols[1] - self.cols[0]))


@dataclass(frozen=True)
class ChunkPlan:
    """The chunks of one problem: every image range split into the same row bands and
    column runs (several of either only when each image range holds one image).

    Attributes
    ----------
    images, rows, cols : tuple of (int, int)
        The half-open ranges along the batch, the output height and the output width.
    """

    images: tuple[Span, ...]
    rows: tuple[Span, ...]
    cols: tuple[Span, ...]

    def __iter__(self) -> Iterator[Chunk]:
        """The chunks in their fixed order: image ranges, then row bands, then runs."""
        for images in self.images:
            for rows in self.rows:
                for cols in self.cols:
                    yield Chunk(images, rows, cols)

    def __len__(self) -> int:
        return len(self.images) * len(self.rows) * len(self.cols)

    @property
    def largest(self) -> Chunk:
        """The first chunk, which no other chunk exceeds along any axis (an empty one when
        the batch is empty)."""
        return Chunk(self.images[0] if self.images else (0, 0), self.rows[0], self.cols[0])

    @property
    def whole_images(self) -> bool:
        """True when every chunk is a range of whole images (chunks never overlap in the
        input then)."""
        return len(self.rows) == 1 and len(self.cols) == 1


def input_span(out: Span, stride: int, dilation: int, kernel: int) -> Span:
    """The padded-input positions ``[begin, end)`` that outputs ``out`` read along one axis.

    Parameters
    ----------
    out : tuple of int
        Half-open range of output positions.
    stride, dilation, kernel : int
        The convolution's stride, dilation and kernel size along the axis.

    Returns
    -------
    tuple of int
        Half-open range in padded-input coordinates (subtract the leading padding for the
        input's own).
    """
    return out[0] * stride, (out[1] - 1) * stride + (kernel - 1) * dilation + 1


def chunk_bytes(geom: ConvGeometry, images: int, rows: int, cols: int) -> int:
    """Working-set bytes of a chunk of ``images x rows x cols`` output pixels.

    Parameters
    ----------
    geom : ConvGeometry
    images, rows, cols : int
        The chunk's size along the batch, the output height and the output width.

    Returns
    -------
    int
        Bytes of its columns (``C*R*S`` per pixel), its product (``K`` per pixel) and its
        zero-padded input window.
    """
    g = geom
    pixels = rows * cols
    span_h = (rows - 1) * g.stride[0] + (g.R - 1) * g.dilation[0] + 1
    span_w = (cols - 1) * g.stride[1] + (g.S - 1) * g.dilation[1] + 1
    per_image = (g.C * g.R * g.S + g.K) * pixels + g.C * span_h * span_w
    return int(images * per_image * g.dtype.itemsize)


def even_splits(total: int, most: int) -> tuple[Span, ...]:
    """``[0, total)`` cut into the fewest near-equal ranges of at most ``most``, larger first.

    Parameters
    ----------
    total, most : int
        Positive length and largest range.

    Returns
    -------
    tuple of (int, int)
    """
    count = -(-total // max(1, most))
    small, extra = divmod(total, count)
    spans, start = [], 0
    for i in range(count):
        stop = start + small + (1 if i < extra else 0)
        spans.append((start, stop))
        start = stop
    return tuple(spans)


def _largest(fits: Callable[[int], bool], most: int) -> int:
    """The largest ``n`` in ``[1, most]`` with ``fits(n)`` (``fits`` decreasing), else 1."""
    lo, hi = 1, most
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


@functools.lru_cache(maxsize=256)
def plan(geom: ConvGeometry, budget: int) -> ChunkPlan:
    """The chunks of ``geom`` whose working sets fit ``budget`` bytes (or one pixel's does).

    Parameters
    ----------
    geom : ConvGeometry
    budget : int
        Bytes one chunk may use (:func:`chunk_bytes`).

    Returns
    -------
    ChunkPlan
    """
    g = geom
    whole_rows, whole_cols = ((0, g.OH),), ((0, g.OW),)
    if g.N == 0:
        return ChunkPlan((), whole_rows, whole_cols)
    per_image = chunk_bytes(g, 1, g.OH, g.OW)
    if per_image <= budget:
        images = even_splits(g.N, budget // per_image)
        return ChunkPlan(images, whole_rows, whole_cols)
    single = tuple((n, n + 1) for n in range(g.N))
    if chunk_bytes(g, 1, 1, g.OW) <= budget:
        rows = _largest(lambda n: chunk_bytes(g, 1, n, g.OW) <= budget, g.OH)
        return ChunkPlan(single, even_splits(g.OH, rows), whole_cols)
    cols = _largest(lambda n: chunk_bytes(g, 1, 1, n) <= budget, g.OW)
    return ChunkPlan(single, even_splits(g.OH, 1), even_splits(g.OW, cols))


def pass_budget(geom: ConvGeometry, budget: int) -> int:
    """The chunk budget of ``geom``'s passes: ``budget``, or less so that a small problem
    still makes up to :data:`PARALLEL_PIECES` chunks of at least :data:`MIN_PIECE_BYTES`.

    Parameters
    ----------
    geom : ConvGeometry
    budget : int
        The most one chunk may use (:data:`CHUNK_BUDGET_BYTES`).

    Returns
    -------
    int
    """
    whole = chunk_bytes(geom, geom.N, geom.OH, geom.OW)
    return min(budget, max(MIN_PIECE_BYTES, whole // PARALLEL_PIECES))
