"""What a benchmark ran on: versions, CPU, threads and cconv's build configuration."""

import os
import platform

import numpy as np

import cconv

__all__ = ["cpu_model", "describe"]


def cpu_model():
    """The CPU's model name (from ``/proc/cpuinfo`` on Linux, else :mod:`platform`)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:  # not Linux
        pass
    return platform.processor() or platform.machine() or "unknown"


def describe(threads, torch, torch_requested):
    """The environment part of a suite's ``meta`` record.

    Parameters
    ----------
    threads : int
        Threads given to cconv (and PyTorch).
    torch : module or None
        The ``torch`` module when PyTorch is compared.
    torch_requested : bool
        Whether the comparison was asked for: tells "not installed" from "not used".

    Returns
    -------
    dict
    """
    if torch is not None:
        torch_version = str(torch.__version__)
    else:
        torch_version = "not installed" if torch_requested else "not used"
    return {
        "cconv_version": cconv.__version__,
        "threads": threads,
        "torch_version": torch_version,
        "torch_threads": int(torch.get_num_threads()) if torch is not None else None,
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "numpy_version": np.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cconv_config": {str(k): v for k, v in cconv.show_config(print_out=False).items()},
    }
