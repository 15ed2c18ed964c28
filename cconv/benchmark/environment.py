"""What a benchmark ran on: versions, CPU, threads and cconv's build configuration."""

from __future__ import annotations

import os
import platform
from types import ModuleType
from typing import Any, Dict, Optional

import numpy as np

import cconv

__all__ = ["cpu_family", "cpu_model", "describe"]


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


# AMD's CPU families (``cpu family`` in /proc/cpuinfo): the microarchitecture behind a
# model name that says only "AMD EPYC" on a virtual machine.  Zen 3 and Zen 4 share family
# 25 (Zen 4 has AVX-512, Zen 3 does not); Zen 5 runs AVX-512 on full-width units.
_AMD_FAMILIES = {23: "Zen / Zen 2", 25: "Zen 3 / Zen 4", 26: "Zen 5"}


def cpu_family() -> str:
    """The CPU's vendor, family and model numbers (Linux), with AMD's microarchitecture.

    Returns
    -------
    str
        E.g. ``"AuthenticAMD family 26 model 2 (Zen 5)"``; ``""`` when unknown.
    """
    fields: Dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break  # the first CPU is enough
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        return ""
    vendor, family, model = (fields.get(k, "") for k in ("vendor_id", "cpu family", "model"))
    if not family:
        return ""
    text = f"{vendor} family {family} model {model}".strip()
    if vendor == "AuthenticAMD" and family.isdigit() and int(family) in _AMD_FAMILIES:
        text += f" ({_AMD_FAMILIES[int(family)]})"
    return text


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
        "cpu_family": cpu_family(),
        "cpu_count": os.cpu_count(),
        "numpy_version": np.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cconv_config": {str(k): v for k, v in cconv.show_config(print_out=False).items()},
    }
