"""Many Python threads at once on the module state cconv touches at run time.

Thread settings (``set_num_threads`` / ``get_num_threads``), the Find cache (``algo="find"``
and ``find_algorithms``, in memory and on disk), the workspace pool, plan creation with its
cached algorithm instances and schedules, and the BLAS thread count GEMM sets and restores:
16 threads start together (a barrier) and each makes many calls.  Every result must equal
the one computed alone beforehand (cconv's results do not depend on the thread count, so
equality is exact), no exception may escape, and the shared state must be consistent
afterwards.  A short switch interval makes the interpreter change threads often, so that
the normal (GIL) build interleaves them as a free-threaded one would.
"""

import json
import os
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import cconv
from cconv import _find_cache, _workspace
from support import reference as ref

THREADS = 16


@pytest.fixture(autouse=True)
def frequent_switches():
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(previous)


@pytest.fixture(autouse=True)
def restore_thread_settings():
    before = cconv.get_num_threads()
    yield
    cconv.set_num_threads(before)


def hammer(work, calls):
    """Run ``work(thread_index, call_index)`` ``calls`` times in each of THREADS threads,
    all released together; every return value, by thread."""
    barrier = threading.Barrier(THREADS)

    def worker(t):
        barrier.wait()
        return [work(t, i) for i in range(calls)]

    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(worker, range(THREADS)))  # re-raises a worker's exception


def assert_close(got, want):
    """Equal up to float32 roundings of another algorithm (Find may pick another one)."""
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * float(np.abs(want).max()))


def _problem(seed, n, c, k, hw, r, dtype=np.float32, **kw):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, hw, hw)).astype(dtype)
    w = rng.standard_normal((k, c // kw.get("groups", 1), r, r)).astype(dtype)
    return x, w, kw


PROBLEMS = [
    _problem(1, 2, 8, 8, 9, 3, padding=1),                          # direct / winograd
    _problem(2, 1, 32, 32, 10, 3, padding=1),                       # winograd (auto)
    _problem(3, 2, 16, 8, 7, 1),                                    # gemm
    _problem(4, 1, 12, 12, 8, 3, padding=1, groups=12),             # depthwise
    _problem(5, 1, 6, 4, 11, 5, np.float64, stride=2, padding=2, dilation=1),
]


def test_thread_settings_and_calls_from_many_threads():
    expected = [cconv.conv2d(x, w, **kw, num_threads=1) for x, w, kw in PROBLEMS]

    def work(t, i):
        n = 1 + (t + i) % 2
        cconv.set_num_threads(n)
        seen = cconv.get_num_threads()
        x, w, kw = PROBLEMS[(t + i) % len(PROBLEMS)]
        y = cconv.conv2d(x, w, **kw)
        return seen, (t + i) % len(PROBLEMS), y

    for results in hammer(work, 12):
        for seen, which, y in results:
            # Another thread may have set the process-wide value in between: 1 or 2.
            assert seen in (1, 2)
            np.testing.assert_array_equal(y, expected[which])
    cconv.set_num_threads(2)
    assert cconv.get_num_threads() == 2  # the last word wins, whoever said it before


def test_workspace_pool_hands_each_scope_its_own_buffers():
    sizes = [1000, 4096, 4096, 12345]

    def work(t, i):
        with _workspace.scope() as ws:
            bufs = [ws.empty(n, np.float32) for n in sizes]
            for b in bufs:
                b[:] = t
            # Let the other threads run while these buffers are held.
            threading.Event().wait(0.0005)
            return all(bool((b == t).all()) for b in bufs)

    assert all(all(ok) for ok in hammer(work, 30))
    with _workspace._lock:
        held = sum(b.nbytes for stack in _workspace._free.values() for b in stack)
    assert held == _workspace.pooled_bytes() <= _workspace.LIMIT_BYTES


def test_winograd_calls_share_the_pool_safely():
    problems = [_problem(10 + j, 1 + j % 2, 16 + 8 * j, 16, 8 + 2 * j, 3, padding=1)
                for j in range(4)]
    ops = []
    for x, w, kw in problems:
        y = cconv.conv2d(x, w, **kw, algo="winograd")
        dy = np.ones_like(y)
        ops.append((x, w, kw, y, cconv.conv2d_backward_data(dy, w, x.shape, **kw,
                                                            algo="winograd"),
                    cconv.conv2d_backward_weight(dy, x, w.shape, **kw, algo="winograd")))

    def work(t, i):
        x, w, kw, y, dx, dw = ops[(t + i) % len(ops)]
        dy = np.ones_like(y)
        pss = (t + i) % 3
        if pss == 0:
            return bool(np.array_equal(cconv.conv2d(x, w, **kw, algo="winograd"), y))
        if pss == 1:
            got = cconv.conv2d_backward_data(dy, w, x.shape, **kw, algo="winograd")
            return bool(np.array_equal(got, dx))
        got = cconv.conv2d_backward_weight(dy, x, w.shape, **kw, algo="winograd")
        return bool(np.array_equal(got, dw))

    assert all(all(ok) for ok in hammer(work, 6))
    # And the results are right, not only repeatable.
    x, w, kw, y, _, _ = ops[0]
    np.testing.assert_allclose(y, ref.ref_conv2d(x, w, pads=((1, 1), (1, 1))), rtol=1e-4,
                               atol=1e-4)


def test_find_cache_from_many_threads(tmp_path, monkeypatch):
    monkeypatch.setenv("CCONV_CACHE_DIR", str(tmp_path))
    shapes = PROBLEMS[:4]
    expected = [cconv.conv2d(x, w, **kw) for x, w, kw in shapes]

    def work(t, i):
        j = (t + i) % len(shapes)
        x, w, kw = shapes[j]
        if (t + i) % 5 == 0:
            timings = cconv.find_algorithms(x.shape, w.shape, **kw, num_threads=1)
            return j, None, [r.algo for r in timings]
        return j, cconv.conv2d(x, w, **kw, algo="find", num_threads=1), None

    for results in hammer(work, 5):
        for j, y, timed in results:
            if y is not None:
                assert_close(y, expected[j])
            else:
                assert timed and set(timed) <= set(cconv.ALGORITHMS)
    # The file is whole JSON holding one valid winner per (shape, forward, 1 thread).
    data = json.loads((tmp_path / "find-cache.json").read_text())
    for x, w, kw in shapes:
        plan = cconv.plan_conv2d(x.shape, w.shape, **kw)
        key = _find_cache.key(plan.geometry.kernel_geometry, "forward", 1)
        assert data[key] in cconv.ALGORITHMS
    assert not list(tmp_path.glob(".find-cache.*.tmp"))  # no temporary file left behind


def test_plans_created_concurrently_are_correct():
    def work(t, i):
        x, w, kw = PROBLEMS[(t * 7 + i) % len(PROBLEMS)]
        plan = cconv.plan_conv2d(x.shape, w.shape, dtype=x.dtype, **kw)
        pw = plan.prepare_weight(w)
        return (t * 7 + i) % len(PROBLEMS), plan.forward(x, pw, num_threads=1)

    expected = [cconv.conv2d(x, w, **kw, num_threads=1) for x, w, kw in PROBLEMS]
    for results in hammer(work, 8):
        for which, y in results:
            assert_close(y, expected[which])


def test_gemm_leaves_the_blas_thread_count_as_it_found_it():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    blas = threadpoolctl.ThreadpoolController().select(user_api="blas")
    if not blas.lib_controllers:
        pytest.skip("NumPy's BLAS is not visible to threadpoolctl here")
    before = [lib.get_num_threads() for lib in blas.lib_controllers]
    # Enough work (4.7 MFLOP) that a call asking for 2 threads gets them.
    x, w, _ = _problem(6, 1, 64, 64, 24, 1)
    dy = np.ones((1, 64, 24, 24), np.float32)
    expected = (cconv.conv2d(x, w, algo="gemm", num_threads=1),
                cconv.conv2d_backward_weight(dy, x, w.shape, algo="gemm", num_threads=1))

    def work(t, i):
        # Different thread counts per call: each call sets BLAS's count and restores it.
        n = 1 + (t + i) % 2
        if i % 2:
            return 1, cconv.conv2d_backward_weight(dy, x, w.shape, algo="gemm", num_threads=n)
        return 0, cconv.conv2d(x, w, algo="gemm", num_threads=n)

    for results in hammer(work, 6):
        for which, got in results:
            assert_close(got, expected[which])
    after = [lib.get_num_threads() for lib in blas.lib_controllers]
    assert after == before


class _FakeBlas:
    """A BLAS library controller that only remembers its thread count."""

    def __init__(self, n):
        self.n = n

    def get_num_threads(self):
        return self.n

    def set_num_threads(self, n):
        self.n = n


def test_blas_thread_count_is_restored_when_calls_overlap(monkeypatch):
    # Two calls overlap: A (1 thread) enters, B (2 threads) enters, A leaves, B leaves.  Each
    # restoring "the count it found" would leave B's view of A's setting (1) behind.
    from cconv import _blas

    lib = _FakeBlas(4)
    monkeypatch.setattr(_blas, "_libraries", [lib])
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def call_a():
        with _blas.threads(1):
            a_in.set()
            b_in.wait(5)
        a_out.set()

    def call_b():
        a_in.wait(5)
        with _blas.threads(2):
            b_in.set()
            a_out.wait(5)

    threads = [threading.Thread(target=call_a), threading.Thread(target=call_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert lib.n == 4


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_computes_without_hanging():
    """After the parent ran cconv on two threads, a forked child must not hang: its OpenMP
    kernels run on one thread (GNU OpenMP cannot start a team there) and cconv's Python
    thread pools (BLAS pieces, the SciPy front ends' conversions) start afresh, where a pool
    inherited from the parent has no worker threads.  Results are the parent's (they do not
    depend on the thread count); the child is killed by an alarm if it hangs."""
    from cconv.compat._scipy_common import PARALLEL_CAST_ELEMENTS, assign

    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 64, 32, 32)).astype(np.float32)  # several BLAS pieces
    w1 = rng.standard_normal((32, 64, 1, 1)).astype(np.float32)
    w3 = rng.standard_normal((16, 64, 3, 3)).astype(np.float32)
    image = rng.standard_normal((4, PARALLEL_CAST_ELEMENTS // 2)) * 1000
    gemm = cconv.conv2d(x, w1, algo="gemm", num_threads=2)
    direct = cconv.conv2d(x, w3, padding=1, algo="direct", num_threads=2)  # an OpenMP team
    converted = np.empty(image.shape, np.int16)
    assign(converted, image, 2, through=np.int32)  # the pools start in the parent
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 only if every call finishes with the same result
        code = 1
        try:
            signal.alarm(20)
            same = cconv.get_num_threads() == 1
            same &= np.array_equal(cconv.conv2d(x, w1, algo="gemm", num_threads=2), gemm)
            same &= np.array_equal(cconv.conv2d(x, w3, padding=1, algo="direct",
                                                num_threads=2), direct)
            again = np.empty_like(converted)
            assign(again, image, 2, through=np.int32)
            code = 0 if same and np.array_equal(again, converted) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
