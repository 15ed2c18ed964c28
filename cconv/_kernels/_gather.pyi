# Type stub of the compiled ``_gather`` extension (``_gather.pyx``): keep the two in step
# (tests/test_docs.py compares them with the built module).  Data arrays are 4-D C-contiguous
# float32 or float64 (one Cython fused type: both data arrays of a call share it); index
# tables are int64.
from typing import Any

import numpy as np
import numpy.typing as npt

def gather_sum(src: npt.NDArray[Any], dst: npt.NDArray[Any], row_ptr: npt.NDArray[np.int64],
               row_idx: npt.NDArray[np.int64], col_ptr: npt.NDArray[np.int64],
               col_idx: npt.NDArray[np.int64], c0: int, c1: int, shift: int,
               alpha: float, beta: float, num_threads: int) -> None: ...
def fold_ring(ring: npt.NDArray[Any], dst: npt.NDArray[Any], row_src: npt.NDArray[np.int64],
              col_src: npt.NDArray[np.int64], top: int, left: int, alpha: float,
              num_threads: int) -> None: ...
def pad_copy(src: npt.NDArray[Any], dst: npt.NDArray[Any], row_src: npt.NDArray[np.int64],
             col_src: npt.NDArray[np.int64], left: int, fill: float,
             num_threads: int) -> None: ...
