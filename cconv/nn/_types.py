"""Type aliases shared by the ``cconv.nn`` modules."""

from __future__ import annotations

from typing import Any, Tuple, Union

import numpy as np
import numpy.typing as npt

#: Any NumPy array; the layers accept float16/32/64 and keep the dtype they are given.
Array = npt.NDArray[Any]
#: An int applied to both spatial axes, or a (height, width) pair.
IntPair = Union[int, Tuple[int, int]]
#: Convolution padding in every form cconv accepts: an int, a (height, width) pair,
#: per-side ((top, bottom), (left, right)) pairs, or a string such as "same".
Padding = Union[int, Tuple[int, int], Tuple[Tuple[int, int], Tuple[int, int]], str]
#: A dtype the parameters are created in.
DType = Union[type, np.dtype[Any], str]
#: A generator, a seed for one, or None for fresh OS entropy.
Seed = Union[np.random.Generator, int, None]
