"""What a benchmark ran on: versions, CPU, threads and cconv's build configuration."""

from __future__ import annotations

import os
import platform
from types import ModuleType
from typing import Any, Dict, Optional

import numpy as np

import cconv

__all__ = ["cpu_model", "describe"]


def cpu_model() -> str:
    """The CPU's model name (from ``/proc/cpuinfo`` on Linux, else :mod:`platform`).

    Returns
    -------
    str
    """
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:  # not Linux
        pass
    return platform.processor() or platform.machine() or "unknown"


def _version(module: Optional[ModuleType], requested: bool) -> str:
    """A contender's version, or why it did not run."""
    if module is not None:
        return str(getattr(module, "__version__", "?"))
    return "not installed" if requested else "not used"


def describe(threads: int, torch: Optional[ModuleType], torch_requested: bool,
             onnxruntime: Optional[ModuleType] = None,
             onnxruntime_requested: bool = False) -> Dict[str, Any]:
    """The environment part of a suite's ``meta`` record.

    Parameters
    ----------
    threads : int
        Threads given to cconv (and PyTorch).
    torch : module or None
        The ``torch`` module when PyTorch is compared.
    torch_requested : bool
        Whether the comparison was asked for: tells "not installed" from "not used".
    onnxruntime : module or None, optional
        The ``onnxruntime`` module when ONNX Runtime is compared.
    onnxruntime_requested : bool, optional
        As ``torch_requested``, for ONNX Runtime.

    Returns
    -------
    dict
    """
    return {
        "cconv_version": cconv.__version__,
        "threads": threads,
        "torch_version": _version(torch, torch_requested),
        "torch_threads": int(torch.get_num_threads()) if torch is not None else None,
        "onnxruntime_version": _version(onnxruntime, onnxruntime_requested),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "numpy_version": np.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cconv_config": {str(k): v for k, v in cconv.show_config(print_out=False).items()},
    }
