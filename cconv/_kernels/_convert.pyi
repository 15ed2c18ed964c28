# Type stub of the compiled ``_convert`` extension (``_convert.pyx``): keep the two in step
# (tests/test_docs.py compares them with the built module).  Sources are contiguous 1-D
# float32 or float64 arrays; results contiguous 1-D integer arrays of the same length.
from typing import Any

import numpy.typing as npt

def store(src: npt.NDArray[Any], dst: npt.NDArray[Any], num_threads: int) -> None: ...
