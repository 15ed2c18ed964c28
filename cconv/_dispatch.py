"""Choosing an algorithm per shape: an ordered list, a heuristic, and MIOpen-style Find.

Like oneDNN's ``cpu_convolution_list.cpp``, each algorithm says whether it can
run a problem (``why_not`` returns the reason it cannot); ``"auto"`` takes the
first usable entry of the preference list, ``"find"`` times every usable one
once per (shape, pass, threads, SIMD level) and remembers the winner in
memory and in an on-disk JSON cache (``$CCONV_CACHE_DIR`` or
``~/.cache/cconv``), written by atomic replace so concurrent processes never
leave it half-written.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: replace stays atomic, concurrent writers may drop entries
    fcntl = None

import numpy as np

from ._direct import DirectConvolution
from ._gemm import GemmConvolution
from ._simd import LEVEL
from ._winograd import WinogradConvolution

OPS = ("forward", "backward_data", "backward_weight")
# Preference order for "auto"; an algorithm appears here once it is implemented.
_IMPLEMENTATIONS = collections.OrderedDict([("direct", DirectConvolution),
                                           ("winograd", WinogradConvolution),
                                           ("gemm", GemmConvolution)])
ALGORITHMS = tuple(_IMPLEMENTATIONS)

AlgoResult = collections.namedtuple("AlgoResult", ["algo", "time_ms", "workspace_bytes"])


def why_not(algo, geom, op):
    """Why ``algo`` cannot run ``op`` on ``geom``, or None if it can."""
    impl = _IMPLEMENTATIONS[algo]
    reason = getattr(impl, "why_not", None)
    return reason(geom, op) if reason else None


def check_algo(algo):
    """Validate the ``algo`` keyword."""
    choices = ("auto", "find") + ALGORITHMS
    if not isinstance(algo, str) or algo not in choices:
        raise ValueError(f"algo must be one of {choices}, got {algo!r}")
    return algo


@functools.lru_cache(maxsize=128)
def implementation(geom, algo):
    """The (cached) implementation object of ``algo`` for ``geom``: it holds the schedules."""
    return _IMPLEMENTATIONS[algo](geom)


def usable(geom, op):
    """Algorithms that can run ``op`` on ``geom``, in preference order."""
    return [a for a in ALGORITHMS if why_not(a, geom, op) is None]


def heuristic(geom, op):
    """The algorithm ``"auto"`` picks: the first usable one in preference order, except:

    Winograd (3x3 stride-1 dilation-1 layers) for forward and backward-data with at least
    32 input and output channels per group and 14x14 output pixels per image (7x7 from 64
    channels), and for backward-weight with at least 64 channels per group, 32 with at
    least 1024 output pixels over the batch, or 16 with at least 4096.
    Measured against the direct kernel (``python -m cconv bench --algos direct,winograd``,
    2 threads, N=8 unless noted; ``find_algorithms`` for the small cases):
    forward / backward-data 1.3-1.5x at 32 channels 56x56, 1.3-1.7x on res2 56x56,
    1.6-1.8x on res3 28x28, 1.65-1.8x on res4 14x14, 1.35-1.6x on res5 7x7 (512 channels),
    1.9-2.25x on vgg16 56x56, 1.2-1.6x at batch 1 (28x28, 14x14); but 1.0x at 16 channels
    and 0.94-1.1x at 32 channels 7x7; at 7x7 ``bench/algo_ab.py`` (median of 25) measured
    1.2-1.5x at 64 channels (batch 8) and 1.02-1.1x at 64-128 channels (batch 1).
    Backward-weight 1.4-2.3x from 64 channels (1.5x at batch 1 7x7);
    ``bench/algo_ab.py --op backward_weight`` (median of 25, C = K):
    1.9x at 64 channels 8x28x28, 1.5-1.7x at 32 channels (2x28x28 to 8x56x56) but 0.93-0.95x
    at 1x7x7 and 1x14x14, 1.3-1.4x at 16 channels with 2x56x56 to 8x28x28 but 0.86-0.89x at
    8x7x7 and 1x14x14, 0.54x at 4-8 channels, 0.33x at 3 channels.  Depthwise (one channel
    per group) ~0.05x: never chosen.
    """
    candidates = usable(geom, op)
    if "winograd" in candidates:
        channels, pixels = min(geom.Cg, geom.Kg), geom.OH * geom.OW
        if op == "backward_weight":
            batch_pixels = geom.N * pixels
            if (channels >= 64 or (channels >= 32 and batch_pixels >= 1024)
                    or (channels >= 16 and batch_pixels >= 4096)):
                return "winograd"
        elif channels >= 32 and (pixels >= 14 * 14 or (channels >= 64 and pixels >= 7 * 7)):
            return "winograd"
    return candidates[0]


def select(geom, op, algo, num_threads):
    """Resolve ``algo`` ("auto", "find" or a name) to an implementation object for ``op``."""
    check_algo(algo)
    if algo == "auto":
        algo = heuristic(geom, op)
    elif algo == "find":
        # An empty batch has nothing to time: the heuristic's choice computes it as well.
        algo = _find_cache.winner(geom, op, num_threads) if geom.N else heuristic(geom, op)
    else:
        reason = why_not(algo, geom, op)
        if reason:
            raise ValueError(f"algo={algo!r} cannot run this convolution: {reason}")
    return implementation(geom, algo)


def _random_operands(geom, op, rng):
    g = geom
    x = rng.standard_normal((g.N, g.C, g.H, g.W)).astype(g.dtype)
    w = rng.standard_normal((g.K, g.Cg, g.R, g.S)).astype(g.dtype)
    y = rng.standard_normal((g.N, g.K, g.OH, g.OW)).astype(g.dtype)
    return x, w, y


def time_algorithms(geom, op, num_threads, repeats=3):
    """Time every usable algorithm on random data; fastest first.

    Returns
    -------
    list of AlgoResult
    """
    if op not in OPS:
        raise ValueError(f"op must be one of {OPS}, got {op!r}")
    rng = np.random.default_rng(0)
    x, w, y = _random_operands(geom, op, rng)
    results = []
    for algo in usable(geom, op):
        impl = implementation(geom, algo)
        if op == "forward":
            out = np.empty_like(y)
            call = lambda: impl.forward(x, w, None, out, 1.0, 0.0, num_threads)  # noqa: E731
        elif op == "backward_data":
            out = np.empty_like(x)
            call = lambda: impl.backward_data(y, w, out, 1.0, 0.0, num_threads)  # noqa: E731
        else:
            call = lambda: impl.backward_weight(y, x, num_threads)  # noqa: E731
        call()  # warm-up: builds schedules, touches memory
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        results.append(AlgoResult(algo, float(np.median(times)) * 1e3,
                                  int(impl.workspace_bytes(op))))
    return sorted(results, key=lambda r: r.time_ms)


class _FindCache:
    """Winners of Find, in memory and in a JSON file replaced atomically."""

    def __init__(self):
        self._lock = threading.Lock()
        self._memory = {}

    @staticmethod
    def path():
        root = os.environ.get("CCONV_CACHE_DIR") or os.path.join(Path.home(), ".cache", "cconv")
        return Path(root) / "find-cache.json"

    @staticmethod
    def key(geom, op, num_threads):
        fields = (geom.N, geom.C, geom.H, geom.W, geom.K, geom.R, geom.S, geom.stride,
                  geom.dilation, geom.pads, geom.groups, geom.dtype.name)
        return f"{op}|{LEVEL}|t{num_threads}|" + "|".join(map(str, fields))

    def _read(self):
        try:
            with open(self.path()) as f:
                data = json.load(f)
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    @staticmethod
    @contextmanager
    def _locked(path):
        """Hold an exclusive lock on a side file so read-merge-replace of concurrent
        processes is serialised (each keeps the others' entries)."""
        if fcntl is None:
            yield
            return
        with open(path.with_name(path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _write(self, key, algo):
        path = self.path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with self._locked(path):
                self._merge_and_replace(path, key, algo)
        except OSError:
            pass  # a read-only home only costs a re-run of Find next time

    def _merge_and_replace(self, path, key, algo):
        data = self._read()
        data[key] = algo
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".find-cache.", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, sort_keys=True)
        os.replace(tmp, path)  # readers see the old file or the new one, never half of one

    def winner(self, geom, op, num_threads):
        key = self.key(geom, op, num_threads)
        with self._lock:
            algo = self._memory.get(key)
        if algo is None:
            algo = self._read().get(key)
            if algo not in ALGORITHMS or why_not(algo, geom, op):
                algo = time_algorithms(geom, op, num_threads)[0].algo
                self._write(key, algo)
            with self._lock:
                self._memory[key] = algo
        return algo


_find_cache = _FindCache()
