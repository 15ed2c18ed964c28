"""How many OpenMP threads a call uses.

Precedence: a call's ``num_threads`` > the latest of :func:`set_num_threads`,
``threadpoolctl.threadpool_limits`` and ``OMP_NUM_THREADS``.  threadpoolctl
and ``OMP_NUM_THREADS`` act on the OpenMP runtime's ``omp_get_max_threads``
of the calling thread; :func:`set_num_threads` sets that too and also records
a process-wide value that other Python threads see.

A process forked after cconv may have run a parallel region uses one thread: GNU OpenMP (the
runtime cconv's wheels ship) cannot start a thread team in such a child, whose first
parallel region would wait forever for threads that were not forked (PyTorch does the same).
Multithreaded worker processes need the "spawn" or "forkserver" start method of
:mod:`multiprocessing`.
"""

from __future__ import annotations

import os
import threading
from typing import Optional

from ._geometry import _is_int
from ._kernels import _runtime

_lock = threading.Lock()
_process_default = _runtime.max_threads()  # what OpenMP gives a thread nobody configured
_user_threads: Optional[int] = None
# True once a call may have started an OpenMP team (it resolved more than one thread); a
# process forked after that is a single-threaded child (see the module docstring).
_team_may_have_run = False
_single_threaded_child = False


def _after_fork_in_child() -> None:
    global _single_threaded_child, _lock
    _lock = threading.Lock()
    if _team_may_have_run:
        _single_threaded_child = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def set_num_threads(n: int) -> None:
    """Set the number of threads cconv uses by default.

    Parameters
    ----------
    n : int
        Positive thread count.  Later ``threadpool_limits`` blocks override it
        while they are active.
    """
    global _user_threads
    n = check_num_threads(n)
    with _lock:
        _user_threads = n
        _runtime.set_max_threads(n)


def get_num_threads() -> int:
    """Return the number of threads a call without ``num_threads`` uses.

    Returns
    -------
    int
    """
    if _single_threaded_child:
        return 1
    current = _runtime.max_threads()
    with _lock:
        user = _user_threads
    # The calling thread's OpenMP value differs from the process default only when
    # set_num_threads or threadpoolctl changed it, so it is the latest word.
    if user is not None and current == _process_default:
        return user
    return current


def check_num_threads(n: object, name: str = "num_threads") -> int:
    """Validate a thread count: a positive int, else ValueError/TypeError naming ``name``."""
    if not _is_int(n):
        raise TypeError(f"{name} must be a positive int, got {n!r}")
    if n <= 0:
        raise ValueError(f"{name} must be positive, got {n}")
    return int(n)


def resolve_num_threads(num_threads: Optional[int]) -> int:
    """The thread count for one call: ``num_threads`` if given, else :func:`get_num_threads`."""
    global _team_may_have_run
    n = get_num_threads() if num_threads is None else check_num_threads(num_threads)
    if _single_threaded_child:
        return 1
    if n > 1:
        _team_may_have_run = True
    return n


# A call whose work is under this many flops per thread uses fewer threads (at least one):
# waking a second thread costs more than it saves on such calls, and on a loaded machine a
# parallel region can wait milliseconds for a descheduled thread (scikit-learn's OpenMP
# helpers follow the same rule).  Measured on an idle 2-core AMD EPYC Zen 4 (3x3 forward,
# median of 300 calls): 2 threads gained nothing at 0.02 MFLOP, 0-13% at 1.2 MFLOP, 19% at
# 4.7 MFLOP and 30-40% from 19 MFLOP; so below 1 MFLOP per thread, fewer threads.
MIN_FLOPS_PER_THREAD = 1_000_000


def threads_for_work(flops: int, nthreads: int) -> int:
    """The threads a call of ``flops`` floating-point operations uses out of ``nthreads``.

    Each thread gets at least ``MIN_FLOPS_PER_THREAD`` flops (about 20 us of a core's work),
    so small convolutions run on one thread and large ones on all ``nthreads``.

    Parameters
    ----------
    flops : int
    nthreads : int

    Returns
    -------
    int
    """
    if _single_threaded_child:
        return 1
    return int(max(1, min(nthreads, flops // MIN_FLOPS_PER_THREAD)))
