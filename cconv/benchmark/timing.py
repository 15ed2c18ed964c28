"""Interleaved timing of several contenders, and the statistics reported for them."""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Dict, List, Tuple

__all__ = ["BATCH_SECONDS", "PRIME_SECONDS", "SETTLE_SECONDS", "summarize", "time_interleaved"]

# Idle time before each timed round (0: none).  A library's OpenMP / BLAS threads spin for a
# while after a call (libgomp's default is about 5 ms here); timed right after another
# library's call, a contender would share the cores with those spinning threads (cconv's
# forward measured up to 2-3x slower right after an ONNX Runtime or PyTorch call).  The
# layer suite does not sleep but primes (below), which outlasts that spinning.
SETTLE_SECONDS = 0.01
# Seconds of untimed calls of a contender right before each of its timed rounds, in the
# layer suite.  On a virtual machine a core that has idled for ~10 ms or more runs the next
# milliseconds several times slower (measured on these 2-vCPU machines: a 2-thread Winograd
# layer of 2.2 ms took 6.5 ms as the first call after a 50 ms pause, 3.4 ms as the second,
# 2.3 ms from the third; PyTorch the same; a 0.6 ms layer stayed 5x slower on 2 threads
# than on 1 after two priming calls).  Priming by time wakes the cores, so a timed call
# runs as calls inside a loop (a training step, a pipeline) do.
PRIME_SECONDS = 0.015
# Seconds of back-to-back calls timed as one round in the layer suite (their mean is the
# round's time): one short call's time mostly measures the machine's jitter.
BATCH_SECONDS = 0.01


def time_interleaved(contenders: Dict[str, Callable[[], Any]], warmup: int, repeats: int,
                     timer: Callable[[], float], min_time: float = 0.0, max_repeats: int = 200,
                     settle: float = SETTLE_SECONDS, prime: float = 0.0, batch: float = 0.0,
                     ) -> Tuple[Dict[str, List[float]], Dict[str, Any], Dict[str, str]]:
    """Warm up, then time rounds of every contender in turn.

    Parameters
    ----------
    contenders : dict
        Label -> zero-argument callable.
    warmup : int
        Untimed calls per contender first (at least one is made, for its result).
    repeats : int
        Rounds timed at least.
    timer : callable
        Clock returning seconds.
    min_time : float, optional
        More rounds follow, up to `max_repeats`, until every contender has spent this
        many seconds in timed calls: the median of a few fast calls swings with the noise
        of the machine.
    max_repeats : int, optional
        Cap on the number of rounds `min_time` may add.
    settle : float, optional
        Seconds of real sleep before each timed round (:data:`SETTLE_SECONDS`); 0 for none.
    prime : float, optional
        Seconds of untimed calls of the same contender (at least one when positive) between
        the sleep and its timed round (:data:`PRIME_SECONDS` in the layer suite).  Default
        0: none.
    batch : float, optional
        A round is as many back-to-back calls as the contender's last warm-up call (timed
        with :func:`time.perf_counter`) says fill this many seconds, at least one; the
        round's time is their mean.  Default 0: one call per round.

    Returns
    -------
    times : dict
        Label -> list of seconds per call, one per round.
    outputs : dict
        Label -> result of its first warm-up call.
    errors : dict
        Label -> message of the ValueError its warm-up raised.  Such a contender cannot
        run the case (an algorithm that does not apply to the shape) and is not timed.
    """
    outputs: Dict[str, Any] = {}
    errors: Dict[str, str] = {}
    calls: Dict[str, int] = {}
    live: List[str] = []
    for label, fn in contenders.items():
        try:
            for i in range(max(1, warmup)):
                t0 = time.perf_counter()
                r = fn()
                took = time.perf_counter() - t0
                if i == 0:
                    outputs[label] = r
        except ValueError as exc:
            errors[label] = str(exc) or exc.__class__.__name__
            continue
        calls[label] = max(1, min(1000, int(batch / took))) if batch > 0 and took > 0 else 1
        live.append(label)
    times: Dict[str, List[float]] = {label: [] for label in live}
    spent = dict.fromkeys(live, 0.0)
    i = 0
    while live and (i < repeats or (i < max_repeats and min(spent.values()) < min_time)):
        # Rotate who goes first, and reverse the order every len(live) rounds, so that a
        # slow spell of the machine, or the cache state left by the previous call, hits
        # every contender alike.  (Reversing every other round instead would undo the
        # rotation of two contenders: the same one would always go first.)
        k = i % len(live)
        order = live[k:] + live[:k]
        if (i // len(live)) % 2:
            order = order[::-1]
        for label in order:
            fn, count = contenders[label], calls[label]
            if settle > 0:
                time.sleep(settle)
            if prime > 0:
                until = time.perf_counter() + prime
                fn()
                while time.perf_counter() < until:
                    fn()
            t0 = timer()
            for _ in range(count):
                fn()
            took = timer() - t0
            times[label].append(took / count)
            spent[label] += took
        i += 1
    return times, outputs, errors


def summarize(times: List[float], flops: int) -> Dict[str, Any]:
    """Median, minimum and throughput of a list of call times.

    Parameters
    ----------
    times : list of float
        Seconds per call.
    flops : int
        Operations of one call.

    Returns
    -------
    dict
        ``times_s``, ``median_s``, ``min_s`` and ``gflops`` (`flops` / median / 1e9).
    """
    med = statistics.median(times)
    return {
        "times_s": list(times),
        "median_s": med,
        "min_s": min(times),
        "gflops": flops / med / 1e9 if med > 0 else float("inf"),
    }
