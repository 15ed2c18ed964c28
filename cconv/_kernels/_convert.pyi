# Type stub of the compiled ``_convert`` extension (``_convert.pyx``): keep the two in step
# (tests/test_docs.py compares them with the built module).  ``load``: contiguous 1-D
# integer sources, float32 or float64 results; ``store``: contiguous 1-D float32 or float64
# sources, integer results of the same length.
from typing import Any

import numpy.typing as npt

def load(src: npt.NDArray[Any], dst: npt.NDArray[Any], num_threads: int) -> None: ...
def store(src: npt.NDArray[Any], dst: npt.NDArray[Any], num_threads: int) -> None: ...
