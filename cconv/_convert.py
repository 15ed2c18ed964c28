"""Integer images into float buffers and float sums into integer arrays, in parallel.

The SciPy front ends (``cconv.compat``) sum integer images in float64: each strip of the
image is converted to floats (:func:`load_integers`, on cconv's OpenMP threads, which then
compute it), and the sums must be converted back as SciPy does on x86-64 (toward zero; out
of range, the low bits of a 32- or 64-bit conversion or the type's minimum).  NumPy's casts
do the same but ran at a tenth of memory speed (and on one thread); the loops in
``_kernels/_convert.pyx`` spell the rules out and run on cconv's threads.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import numpy as np
import numpy.typing as npt

from ._kernels import _convert
from ._threads import get_num_threads

Array = npt.NDArray[Any]


# Conversions smaller than this run on one thread: a parallel region costs more than it
# saves on them.
MIN_PARALLEL_ELEMENTS = 1 << 15


def _contiguous_pairs(a: Array, b: Array) -> Optional[List[Tuple[Array, Array]]]:
    """``[(a, b)]`` when both are contiguous, their sub-arrays along the first axis when
    those are, else None."""
    if a.flags.c_contiguous and b.flags.c_contiguous:
        return [(a, b)]
    if (a.ndim > 1 and all(x.flags.c_contiguous for x in a)
            and all(y.flags.c_contiguous for y in b)):
        return list(zip(a, b))
    return None


def load_integers(dst: Array, values: Array, num_threads: Optional[int]) -> bool:
    """``dst[...] = values`` for integer or bool ``values`` and a float32 / float64 ``dst``
    of the same shape, by the parallel loop of ``cconv._kernels._convert`` (the same
    results as NumPy's cast), where both are contiguous (or contiguous per index of their
    first axis).

    Parameters
    ----------
    dst : ndarray
        float32 or float64, written in place.
    values : ndarray
        Integer or bool, of ``dst``'s shape.
    num_threads : int or None
        Threads (None: cconv's setting).

    Returns
    -------
    bool
        False, having written nothing, where the loop does not apply (uint64 and
        non-integer ``values``, other results, non-native byte order, other memory
        layouts).
    """
    kind, size = values.dtype.kind, values.dtype.itemsize
    if (dst.dtype not in (np.float32, np.float64) or kind not in "biu"
            or (kind == "u" and size == 8) or not values.dtype.isnative
            or dst.shape != values.shape):
        return False
    source = values.view(np.uint8) if kind == "b" else values
    pairs = _contiguous_pairs(dst, source)
    if pairs is None:
        return False
    nthreads = get_num_threads() if num_threads is None else num_threads
    if dst.size < MIN_PARALLEL_ELEMENTS:
        nthreads = 1
    for d, v in pairs:
        _convert.load(v.reshape(-1), d.reshape(-1), nthreads)
    return True


def store_integers(dst: Array, values: Array, num_threads: Optional[int]) -> bool:
    """``dst[...] = values`` (float32 or float64 sums into an integer or bool ``dst``) as
    SciPy's C code converts a double on x86-64, by the parallel loops of
    ``cconv._kernels._convert``, where both arrays are contiguous (or contiguous per index
    of their first axis).

    Parameters
    ----------
    dst : ndarray
        Integer or bool result, written in place.
    values : ndarray
        Sums of ``dst``'s shape.
    num_threads : int or None
        Threads (None: cconv's setting).

    Returns
    -------
    bool
        False, having written nothing, where the loops do not apply (uint64 or non-native
        byte order results, float16 sums, other memory layouts).
    """
    kind, size = dst.dtype.kind, dst.dtype.itemsize
    if (values.dtype not in (np.float32, np.float64) or kind not in "biu"
            or not dst.dtype.isnative or (kind == "u" and size == 8)):
        return False
    target = dst.view(np.uint8) if kind == "b" else dst
    pairs = _contiguous_pairs(target, values)
    if pairs is None:
        return False
    nthreads = get_num_threads() if num_threads is None else num_threads
    for t, v in pairs:
        _convert.store(v.reshape(-1), t.reshape(-1), nthreads)
    return True
