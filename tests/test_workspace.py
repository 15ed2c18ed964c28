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
    assert _workspace.pooled_bytes() == 2 * 4000
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
        ws.empty(2000, np.float32)  # 8000 bytes: kept
        ws.empty(2000, np.float32)  # would make 16000: dropped
    assert _workspace.pooled_bytes() == 8000
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
    assert _workspace.pooled_bytes() <= 4 * 4096 * 8
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
