"""Saving and loading a module's state dictionary as a NumPy ``.npz`` file."""

from __future__ import annotations

import os
from typing import IO, Any, Dict, Union

import numpy as np

from ._types import Array
from .module import Module

__all__ = ["load", "load_state_dict", "save"]

PathOrFile = Union[str, "os.PathLike[str]", IO[bytes]]


def save(module: Module, file: PathOrFile) -> None:
    """Write ``module.state_dict()`` to an uncompressed ``.npz`` archive.

    Parameters
    ----------
    module : Module
    file : str, path-like or binary file
        NumPy appends ``.npz`` to a path that lacks it.
    """
    # typed loosely: NumPy's stubs fear a key named like one of savez's keywords
    arrays: Dict[str, Any] = module.state_dict()
    np.savez(file, **arrays)


def load_state_dict(file: PathOrFile) -> Dict[str, Array]:
    """Read a state dictionary written by :func:`save` (no pickled objects are accepted).

    Parameters
    ----------
    file : str, path-like or binary file

    Returns
    -------
    dict of str to ndarray
    """
    with np.load(file, allow_pickle=False) as archive:
        return {key: archive[key] for key in archive.files}


def load(module: Module, file: PathOrFile, strict: bool = True) -> None:
    """Load a file written by :func:`save` into ``module`` in place.

    Parameters
    ----------
    module : Module
    file : str, path-like or binary file
    strict : bool
        As in :meth:`Module.load_state_dict`.
    """
    module.load_state_dict(load_state_dict(file), strict=strict)
