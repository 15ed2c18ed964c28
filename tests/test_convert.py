"""Integer images into float buffers (``cconv._convert.load_integers``, the SciPy front ends'
strip conversion) against NumPy's own casts: every integer dtype and bool, the extremes of
each type, values float32 and float64 must round, contiguous and per-plane-contiguous
arrays, any thread count; layouts and dtypes the loop does not take are left to the caller."""

import numpy as np
import pytest

from cconv._convert import load_integers
from cconv._kernels import _convert

INTEGER_DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
                  np.int64]


def _values(dtype, size, rng):
    """Random values of ``dtype`` with its extremes and, for 32/64-bit types, values that
    float32 / float64 cannot hold exactly (odd numbers above 2**24 and 2**53)."""
    if dtype is np.bool_:
        return rng.integers(0, 2, size).astype(np.bool_)
    info = np.iinfo(dtype)
    values = rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True)
    special = [info.min, info.max, 0, 1]
    if info.bits >= 32:
        special += [2**24 + 1, 2**24 + 3]
    if info.bits == 64:
        special += [2**53 + 1, 2**53 + 3, 2**63 - 1]
    if info.min < 0:
        special += [-1, -(2**24) - 1]
    values[:len(special)] = np.array(special, dtype=np.int64).astype(dtype)
    return values


@pytest.mark.parametrize("dtype", INTEGER_DTYPES)
@pytest.mark.parametrize("target", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_load_matches_numpy_casts(dtype, target, threads):
    rng = np.random.default_rng(np.dtype(dtype).itemsize * 10 + threads)
    values = _values(dtype, 100_003, rng)  # past the one-thread size, not a multiple of 2, 3
    dst = np.full(values.shape, np.nan, target)
    assert load_integers(dst, values, threads)
    np.testing.assert_array_equal(dst, values.astype(target))
    # the kernel itself, on a run below the parallel size
    small = np.full(37, np.nan, target)
    _convert.load(values[:37].view(np.uint8) if dtype is np.bool_ else values[:37], small,
                  threads)
    np.testing.assert_array_equal(small, values[:37].astype(target))


def test_load_takes_planes_that_are_contiguous_one_by_one():
    rng = np.random.default_rng(3)
    image = rng.integers(0, 65535, (3, 1, 40, 50), dtype=np.uint16)
    rows = image[:, :, 5:30]  # each plane's rows contiguous, the whole not
    assert not rows.flags.c_contiguous
    dst = np.empty(rows.shape, np.float64)
    assert load_integers(dst, rows, 2)
    np.testing.assert_array_equal(dst, rows.astype(np.float64))


@pytest.mark.parametrize("case", ["float source", "uint64 source", "int destination",
                                  "strided", "shape", "byte order"])
def test_load_declines_what_it_does_not_convert(case):
    rng = np.random.default_rng(4)
    values = rng.integers(0, 100, (4, 6), dtype=np.int32)
    dst = np.zeros((4, 6), np.float32)
    if case == "float source":
        values = values.astype(np.float64)
    elif case == "uint64 source":  # left to NumPy's cast
        values = values.astype(np.uint64)
    elif case == "int destination":
        dst = np.zeros((4, 6), np.int64)
    elif case == "strided":
        values = rng.integers(0, 100, (4, 12), dtype=np.int32)[:, ::2]
    elif case == "shape":
        dst = np.zeros((6, 4), np.float32)
    else:
        values = values.astype(">i4")
    before = dst.copy()
    assert not load_integers(dst, values, 2)
    np.testing.assert_array_equal(dst, before)  # nothing written


def test_load_refuses_mismatched_lengths():
    with pytest.raises(ValueError, match="elements"):
        _convert.load(np.zeros(5, np.int16), np.zeros(4, np.float32), 1)


@pytest.mark.parametrize("threads", [0, -1])
def test_kernels_refuse_thread_counts_below_one(threads):
    with pytest.raises(ValueError, match="num_threads"):
        _convert.load(np.zeros(5, np.int16), np.zeros(5, np.float32), threads)
    with pytest.raises(ValueError, match="num_threads"):
        _convert.store(np.zeros(5, np.float32), np.zeros(5, np.int16), threads)
