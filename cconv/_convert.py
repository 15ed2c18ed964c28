"""Float sums stored into integer arrays as SciPy's C code stores them, in parallel.

The SciPy front ends (``cconv.compat``) sum integer images in float64 and must convert the
sums as SciPy does on x86-64 (toward zero; out of range, the low bits of a 32- or 64-bit
conversion or the type's minimum).  NumPy's casts do the same but ran at a tenth of memory
speed; the loops in ``_kernels/_convert.pyx`` spell the rules out and run on cconv's threads.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import numpy.typing as npt

from ._kernels import _convert
from ._threads import get_num_threads

Array = npt.NDArray[Any]


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
    if target.flags.c_contiguous and values.flags.c_contiguous:
        pairs = [(target, values)]
    elif (target.ndim > 1 and all(t.flags.c_contiguous for t in target)
          and all(v.flags.c_contiguous for v in values)):
        pairs = list(zip(target, values))
    else:
        return False
    nthreads = get_num_threads() if num_threads is None else num_threads
    for t, v in pairs:
        _convert.store(v.reshape(-1), t.reshape(-1), nthreads)
    return True
