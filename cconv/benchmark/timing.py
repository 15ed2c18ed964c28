"""Interleaved timing of several contenders, and the statistics reported for them."""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Dict, List, Tuple

__all__ = ["SETTLE_SECONDS", "summarize", "time_interleaved"]

# Idle time before each timed call.  A library's OpenMP / BLAS threads spin for a while after
# a call (libgomp's default is about 5 ms here); timed right after another library's call,
# a contender would share the cores with those spinning threads (cconv's forward measured up
# to 2-3x slower right after an ONNX Runtime or PyTorch call).  The pause lets them sleep,
# so every call is timed on an idle machine, as a call inside a pipeline would be.
SETTLE_SECONDS = 0.01


def time_interleaved(contenders: Dict[str, Callable[[], Any]], warmup: int, repeats: int,
                     timer: Callable[[], float], min_time: float = 0.0, max_repeats: int = 200,
                     settle: float = SETTLE_SECONDS,
                     ) -> Tuple[Dict[str, List[float]], Dict[str, Any], Dict[str, str]]:
    """Warm up, then time rounds of one call of every contender each.

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
        Seconds of real sleep before each timed call (:data:`SETTLE_SECONDS`); 0 for none.

    Returns
    -------
    times : dict
        Label -> list of seconds, one per round.
    outputs : dict
        Label -> result of its first warm-up call.
    errors : dict
        Label -> message of the ValueError its warm-up raised.  Such a contender cannot
        run the case (an algorithm that does not apply to the shape) and is not timed.
    """
    outputs: Dict[str, Any] = {}
    errors: Dict[str, str] = {}
    live: List[str] = []
    for label, fn in contenders.items():
        try:
            for i in range(max(1, warmup)):
                r = fn()
                if i == 0:
                    outputs[label] = r
        except ValueError as exc:
            errors[label] = str(exc) or exc.__class__.__name__
            continue
        live.append(label)
    times: Dict[str, List[float]] = {label: [] for label in live}
    i = 0
    while live and (i < repeats or (i < max_repeats
                                    and min(sum(t) for t in times.values()) < min_time)):
        # Rotate who goes first, and reverse the order every len(live) rounds, so that a
        # slow spell of the machine, or the cache state left by the previous call, hits
        # every contender alike.  (Reversing every other round instead would undo the
        # rotation of two contenders: the same one would always go first.)
        k = i % len(live)
        order = live[k:] + live[:k]
        if (i // len(live)) % 2:
            order = order[::-1]
        for label in order:
            fn = contenders[label]
            if settle > 0:
                time.sleep(settle)
            t0 = timer()
            fn()
            times[label].append(timer() - t0)
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
