"""The on-disk cache of ``algo="find"`` winners.

One JSON file (``$CCONV_CACHE_DIR/find-cache.json``, default ``~/.cache/cconv``) maps a key
to an algorithm name.  The key holds everything a timing depends on: the cconv version and
SIMD level (another build or kernel variant may rank the algorithms differently), the pass,
the thread count and every field of the geometry.  Writers merge and replace the file
atomically under a lock file, so concurrent processes never leave it half-written and keep
each other's entries.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, Optional

from ._version import __version__
from ._simd import LEVEL

if TYPE_CHECKING:
    from ._geometry import ConvGeometry

fcntl: Optional[ModuleType]  # None where the platform has no fcntl
try:
    import fcntl
except ImportError:  # Windows: replace stays atomic, concurrent writers may drop entries
    fcntl = None


def path() -> Path:
    """Where the cache file lives (follows ``CCONV_CACHE_DIR`` at every call)."""
    root = os.environ.get("CCONV_CACHE_DIR") or os.path.join(Path.home(), ".cache", "cconv")
    return Path(root) / "find-cache.json"


def key(geom: ConvGeometry, op: str, num_threads: int) -> str:
    """The cache key of one (geometry, pass, thread count) on this build and SIMD level."""
    fields = (geom.N, geom.C, geom.H, geom.W, geom.K, geom.R, geom.S, geom.stride,
              geom.dilation, geom.pads, geom.groups, geom.dtype.name)
    return f"v{__version__}|{LEVEL}|{op}|t{num_threads}|" + "|".join(map(str, fields))


def _read() -> Dict[str, Any]:  # JSON: values of any type (winner() checks them)
    try:
        with open(path()) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


@contextmanager
def _locked(file_path: Path) -> Iterator[None]:
    """Hold an exclusive lock on a side file so the read-merge-replace of concurrent
    processes is serialised (each keeps the others' entries)."""
    if fcntl is None:
        yield
        return
    with open(file_path.with_name(file_path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _merge_and_replace(file_path: Path, entry: str, algo: str) -> None:
    data = _read()
    data[entry] = algo
    fd, tmp = tempfile.mkstemp(dir=file_path.parent, prefix=".find-cache.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, sort_keys=True)
    os.replace(tmp, file_path)  # readers see the old file or the new one, never half of one


class FindCache:
    """Find winners, in memory and in the JSON file.

    Parameters
    ----------
    measure : callable
        ``measure(geom, op, num_threads) -> str``: times the candidates and returns the
        winner's name; called on a miss.
    valid : callable
        ``valid(algo, geom, op) -> bool``: whether a stored name can still run the shape
        (an entry from another build may name an algorithm this one lacks).
    """

    def __init__(self, measure: Callable[[ConvGeometry, str, int], str],
                 valid: Callable[[str, ConvGeometry, str], bool]) -> None:
        self._measure = measure
        self._valid = valid
        self._lock = threading.Lock()
        self._memory: Dict[str, str] = {}

    def winner(self, geom: ConvGeometry, op: str, num_threads: int) -> str:
        """The remembered winner of (geom, op, num_threads), measured on a miss."""
        entry = key(geom, op, num_threads)
        with self._lock:
            algo = self._memory.get(entry)
        if algo is None:
            algo = _read().get(entry)
            if not isinstance(algo, str) or not self._valid(algo, geom, op):
                algo = self._measure(geom, op, num_threads)
                self._write(entry, algo)
            with self._lock:
                self._memory[entry] = algo
        return algo

    @staticmethod
    def _write(entry: str, algo: str) -> None:
        file_path = path()
        try:
            file_path.parent.mkdir(parents=True, exist_ok=True)
            with _locked(file_path):
                _merge_and_replace(file_path, entry, algo)
        except OSError:
            pass  # a read-only home only costs a re-run of Find next time
