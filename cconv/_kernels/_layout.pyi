# Type stub of the compiled ``_layout`` extension (``_layout.pyx``): keep the two in step
# (tests/test_docs.py compares them with the built module).  Arrays are float32 or float64
# (one Cython fused type: all arrays of a call share it); index tables are int64 / intp.
from typing import Any, Optional

import numpy as np
import numpy.typing as npt

def pack_input(x: npt.NDArray[Any], packed: npt.NDArray[Any], groups: int,
               channels_per_group: int, slots_per_group: int, mult: int, block: int,
               pad_top: int, pad_left: int, height: int, width: int,
               num_threads: int, row_src: Optional[npt.NDArray[np.int64]] = None,
               col_src: Optional[npt.NDArray[np.int64]] = None, value: float = 0.0) -> int: ...
def pack_input_phases(x: npt.NDArray[Any], packed: npt.NDArray[Any], groups: int,
                      channels_per_group: int, block: int, pad_top: int, pad_left: int,
                      height: int, width: int, phase_h: int, phase_w: int,
                      num_threads: int) -> int: ...
def unpack_output(packed: npt.NDArray[Any], y: npt.NDArray[Any], groups: int, nblocks: int,
                  block: int, msum: int, bias: npt.NDArray[Any], alpha: float, beta: float,
                  num_threads: int) -> None: ...
def pack_weight(w: npt.NDArray[Any], packed: npt.NDArray[Any], groups: int, Kg: int, Cg: int,
                RS: int, swap: bool, col_block: int, red_block: int, taps: npt.NDArray[Any],
                num_threads: int) -> int: ...
