"""The scratch-buffer pool shared by calls (cconv._workspace)."""

import threading

import numpy as np
import pytest

from cconv import _workspace


def test_buffers_are_reused_after_the_scope_and_never_shared_inside_it():
    _workspace.clear()
    with _workspace.scope() as ws:
        a = ws.empty(1000, np.float32)
        b = ws.empty(1000, np.float32)
        assert a.shape == (1000,) and a.dtype == np.float32
        assert not np.shares_memory(a, b)
        a_addr = a.__array_interface__["data"][0]
    # each buffer holds ALIGN_BYTES more, to start on a cache line
    assert _workspace.pooled_bytes() == 2 * (4000 + _workspace.ALIGN_BYTES)
    with _workspace.scope() as ws:
        c = ws.empty(1000, np.float32)
        assert c.__array_interface__["data"][0] in (
            a_addr, b.__array_interface__["data"][0])
    with _workspace.scope() as ws:  # another dtype of the same byte size reuses it too
        d = ws.empty(500, np.float64)
        assert d.shape == (500,) and d.dtype == np.float64
    _workspace.clear()
    assert _workspace.pooled_bytes() == 0


def test_pool_respects_its_limit(monkeypatch):
    _workspace.clear()
    monkeypatch.setattr(_workspace, "LIMIT_BYTES", 10_000)
    with _workspace.scope() as ws:
        ws.empty(2000, np.float32)  # 8000 bytes (and the alignment's): kept
        ws.empty(2000, np.float32)  # would make over 16000: dropped
    assert _workspace.pooled_bytes() == 8000 + _workspace.ALIGN_BYTES
    _workspace.clear()


def test_concurrent_scopes_get_distinct_buffers():
    _workspace.clear()
    barrier = threading.Barrier(4)
    seen, errors = [], []

    def work(i):
        try:
            for _ in range(50):
                with _workspace.scope() as ws:
                    buf = ws.empty(4096, np.float64)
                    buf[:] = i
                    barrier.wait(timeout=10) if _ == 0 else None
                    if not (buf == i).all():
                        errors.append(i)
                    seen.append(buf.__array_interface__["data"][0])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert _workspace.pooled_bytes() <= 4 * (4096 * 8 + _workspace.ALIGN_BYTES)
    _workspace.clear()


@pytest.mark.parametrize("name", ["CCONV_WORKSPACE_MB", "CCONV_RESULT_CACHE_MB"])
def test_limit_from_environment(monkeypatch, name):
    monkeypatch.setenv(name, "3")
    assert _workspace._limit_from_env(name) == 3 * 1024 * 1024
    monkeypatch.setenv(name, "0")
    assert _workspace._limit_from_env(name) == 0
    monkeypatch.setenv(name, "lots")
    assert _workspace._limit_from_env(name) == 256 * 1024 * 1024


def test_forked_child_starts_with_an_empty_pool():
    import os
    import pytest
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    with _workspace.scope() as ws:
        ws.empty(100, np.float32)
    assert _workspace.pooled_bytes() > 0
    pid = os.fork()
    if pid == 0:  # child: report through the exit status
        ok = _workspace.pooled_bytes() == 0 and _workspace._lock.acquire(timeout=5)
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    _workspace.clear()


def _address(a):
    return a.__array_interface__["data"][0]


@pytest.mark.parametrize("size,dtype", [(1, np.float32), (1000, np.float32), (333, np.float64),
                                        (7, np.int64), (12345, np.uint8)])
def test_pooled_buffers_start_on_a_cache_line(size, dtype):
    """NumPy aligns its memory to 16 bytes; the pool's buffers start on 64, whatever the
    size, also when a buffer comes back from the pool for another dtype."""
    _workspace.clear()
    for _ in range(2):
        with _workspace.scope() as ws:
            bufs = [ws.empty(size, dtype) for _ in range(3)]
            for buf in bufs:
                assert _address(buf) % _workspace.ALIGN_BYTES == 0
                assert buf.shape == (size,) and buf.dtype == dtype
                buf[...] = 1  # the whole view lies inside its raw buffer
            assert not any(np.shares_memory(a, b) for i, a in enumerate(bufs)
                           for b in bufs[i + 1:])
    _workspace.clear()


@pytest.mark.parametrize("shape", [(3, 5, 7), (1,), (0, 4), (64, 64)])
def test_aligned_empty_is_a_writable_array_on_a_cache_line(shape):
    a = _workspace.aligned_empty(shape, np.float32)
    assert a.shape == shape and a.dtype == np.float32 and a.flags.c_contiguous
    if a.size:  # an empty array's address means nothing
        assert _address(a) % _workspace.ALIGN_BYTES == 0
    a[...] = 2.0
    assert (a == 2.0).all()


def test_large_results_start_on_a_cache_line():
    """Results of ``_results.MIN_BYTES`` and more come from the result handler, aligned to
    64 bytes, fresh or served again from a freed one."""
    from cconv._kernels import _results
    _workspace.clear()
    n = _results.MIN_BYTES // 4 + 3
    for _ in range(3):
        y = _workspace.empty_result((n,), np.float32)
        assert _address(y) % _results.ALIGN_BYTES == 0
        y[...] = 1.0
        del y
    _workspace.clear()


def test_release_gives_the_buffers_back_once():
    _workspace.clear()
    s = _workspace._Scope()
    s.empty(100, np.float64)
    assert _workspace.pooled_bytes() == 0
    s.release()
    assert _workspace.pooled_bytes() == 800 + _workspace.ALIGN_BYTES
    s.release()  # nothing left to give
    assert _workspace.pooled_bytes() == 800 + _workspace.ALIGN_BYTES
    _workspace.clear()


def test_a_depth_tap_loop_accumulates_in_a_pooled_buffer(monkeypatch):
    """An NCDHW 3-D call on the depth-tap loop sums its slices in a depth-major buffer from
    the pool (given back when the result is written), not in fresh memory each call."""
    import cconv

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 5, 6, 7)).astype(np.float32)
    w = rng.standard_normal((3, 4, 3, 3, 3)).astype(np.float32)
    requests = []
    original = _workspace._Scope.empty

    def recording(self, size, dtype):
        requests.append(int(size))
        return original(self, size, dtype)

    monkeypatch.setattr(_workspace._Scope, "empty", recording)
    _workspace.clear()
    y = cconv.conv3d(x, w, padding=1, algo="winograd")
    assert y.size in requests  # the (N, D, K, H, W) buffer
    held = _workspace.pooled_bytes()
    assert held >= y.nbytes
    again = cconv.conv3d(x, w, padding=1, algo="winograd")
    assert _workspace.pooled_bytes() == held  # the same buffers, taken and given back
    np.testing.assert_array_equal(y, again)
    _workspace.clear()


def test_results_served_from_kept_blocks_are_aligned_whatever_freed_them():
    """``numpy.zeros`` inside the result handler comes from ``calloc`` (16 bytes past a
    page on glibc for large blocks), ``ndarray.resize`` through its ``realloc``: such a
    block is freed rather than kept when it is off a cache line, so the next result of its
    size (which the cache would serve it to) still starts on one."""
    from cconv._kernels import _results
    n = _results.MIN_BYTES // 4 + 5
    for make in ("zeros", "resized"):
        _workspace.clear()
        with _workspace.results():
            if make == "zeros":
                z = np.zeros(n, np.float32)
                assert (z == 0).all()
            else:
                z = np.empty(n // 2, np.float32)
                z.resize(n, refcheck=False)
        del z  # the only block of this size freed: the next result gets it if kept
        y = _workspace.empty_result((n,), np.float32)
        assert _address(y) % _results.ALIGN_BYTES == 0, make
        y[...] = 3.0
        del y
    _workspace.clear()
