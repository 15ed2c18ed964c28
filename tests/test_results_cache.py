"""Results allocated through cconv's NumPy memory handler (cconv._kernels._results): the
memory of a freed large result serves the next result of the same size, never leaks its old
contents into a result, and stays within its limit from any thread."""

import os
import threading

import numpy as np
import pytest

import cconv
from cconv import _workspace
from cconv._kernels import _results
from cconv.compat import ndimage as c_ndimage
from cconv.compat import signal as c_signal
from support.reference import ref_conv2d

try:
    from numpy._core.multiarray import get_handler_name
except ImportError:  # NumPy 1.x
    from numpy.core.multiarray import get_handler_name

LARGE = (2, 8, 160, 160)  # 1.6 MB of float32 results: above MIN_BYTES


def _address(a):
    return a.__array_interface__["data"][0]


@pytest.fixture(autouse=True)
def _fresh_cache():
    _results.clear()
    _results.set_limit(_workspace.RESULT_LIMIT_BYTES)
    yield
    _results.set_limit(_workspace.RESULT_LIMIT_BYTES)
    _results.clear()


def test_the_memory_of_a_freed_result_serves_the_next():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(LARGE, dtype=np.float32)
    w = rng.standard_normal((8, 8, 3, 3), dtype=np.float32)
    y = cconv.conv2d(x, w, padding=1)
    assert get_handler_name(y) == "cconv_results"
    assert y.nbytes >= _results.MIN_BYTES
    first = _address(y)
    want = y.copy()
    y[...] = np.nan  # what the next result must not see
    del y
    assert _workspace.kept_result_bytes() == want.nbytes
    again = cconv.conv2d(x, w, padding=1)
    assert _address(again) == first and _workspace.kept_result_bytes() == 0
    np.testing.assert_array_equal(again, want)


def test_a_result_the_caller_keeps_is_never_handed_out():
    x = np.ones(LARGE, np.float32)
    w = np.ones((8, 8, 3, 3), np.float32)
    kept = [cconv.conv2d(x, w, padding=1) for _ in range(3)]
    assert len({_address(a) for a in kept}) == 3
    assert _workspace.kept_result_bytes() == 0


def test_small_results_and_numpy_zeros_do_not_go_through_the_cache():
    y = cconv.conv2d(np.ones((1, 2, 8, 8), np.float32), np.ones((2, 2, 3, 3), np.float32))
    assert get_handler_name(y) != "cconv_results"  # not worth the handler's ~1 us a call
    del y
    assert _workspace.kept_result_bytes() == 0
    previous = _results.install()
    try:
        z = np.zeros(1 << 21, np.uint8)
    finally:
        _results.restore(previous)
    assert not z.any()
    kept = 1 << 21 if z.ctypes.data % _results.ALIGN_BYTES == 0 else 0
    del z  # freed through the handler: kept (served to np.empty only) if on a cache line
    assert _workspace.kept_result_bytes() == kept
    previous = _results.install()
    try:
        z = np.zeros(1 << 21, np.uint8)  # calloc: fresh and zeroed, never a kept block
    finally:
        _results.restore(previous)
    assert not z.any() and _workspace.kept_result_bytes() == kept


def test_the_limit_is_kept_and_the_oldest_blocks_go_first():
    _results.set_limit(3 << 20)
    previous = _results.install()
    try:
        blocks = [np.empty((1 << 20) + i * 4096, np.uint8) for i in range(5)]
    finally:
        _results.restore(previous)
    sizes = [b.nbytes for b in blocks]
    while blocks:  # freed oldest first
        del blocks[0]
    assert _workspace.kept_result_bytes() == sizes[3] + sizes[4]  # the two newest fit
    _results.set_limit(0)
    assert _workspace.kept_result_bytes() == 0
    y = cconv.conv2d(np.ones(LARGE, np.float32), np.ones((8, 8, 3, 3), np.float32), padding=1)
    del y
    assert _workspace.kept_result_bytes() == 0


@pytest.mark.parametrize("dtype", [np.float32, np.uint16, np.int32, np.complex64])
def test_scipy_front_ends_write_every_element_of_recycled_memory(dtype):
    scipy_ndimage = pytest.importorskip("scipy.ndimage")
    scipy_signal = pytest.importorskip("scipy.signal")
    rng = np.random.default_rng(1)
    image = (rng.random((700, 600)) * 1000).astype(dtype)
    if np.dtype(dtype).kind == "c":
        image = image + 1j * rng.random(image.shape).astype(np.float32)
    weights = rng.random((5, 4))
    for _ in range(2):  # the second call gets the first call's (poisoned) memory
        got = c_ndimage.correlate(image, weights, mode="mirror")
        want = scipy_ndimage.correlate(image, weights, mode="mirror")
        if np.dtype(dtype).kind in "iu":
            assert np.abs(got.astype(np.int64) - want.astype(np.int64)).max() <= 1
        else:
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
        got[...] = 77
        del got
    if np.dtype(dtype).kind == "f":
        for _ in range(2):
            got = c_signal.correlate2d(image, weights.astype(dtype), "valid")
            np.testing.assert_allclose(got, scipy_signal.correlate2d(image, weights, "valid"),
                                       rtol=1e-4, atol=1e-3)
            got[...] = np.nan
            del got


def test_results_from_many_threads_stay_correct_and_within_the_limit():
    _results.set_limit(8 << 20)
    rng = np.random.default_rng(2)
    x = rng.standard_normal(LARGE, dtype=np.float32)
    w = rng.standard_normal((8, 8, 3, 3), dtype=np.float32)
    want = ref_conv2d(x.astype(np.float64), w.astype(np.float64), pads=((1, 1), (1, 1)))
    errors = []

    def work():
        try:
            for _ in range(10):
                y = cconv.conv2d(x, w, padding=1, num_threads=1)
                np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
                y[...] = np.nan
                del y
                assert _workspace.kept_result_bytes() <= 8 << 20
        except Exception as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_forked_child_can_use_the_cache():
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    y = cconv.conv2d(np.ones(LARGE, np.float32), np.ones((8, 8, 3, 3), np.float32), padding=1)
    del y
    pid = os.fork()
    if pid == 0:  # child: report through the exit status
        try:
            z = cconv.conv2d(np.ones(LARGE, np.float32), np.ones((8, 8, 3, 3), np.float32),
                             padding=1, num_threads=1)
            ok = float(z[0, 0, 5, 5]) == 72.0
            del z
            _results.clear()
        except BaseException:
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
