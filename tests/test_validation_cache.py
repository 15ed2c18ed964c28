"""The caches that keep a small call's validation cheap must never change what validation
decides: an argument that equals a valid one as a dict key (``True == 1``, ``2.0 == 2``,
``(1, True) == (1, 1)``) is still refused after the valid one was cached, and a geometry
keeps working as a cache key after pickling (its hash is recomputed where it lands)."""

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import cconv
from cconv import _geometry

X = np.ones((1, 4, 8, 8), np.float32)
W = np.ones((4, 4, 3, 3), np.float32)


@pytest.mark.parametrize("keyword, good, bad", [
    ("stride", 1, True), ("stride", 1, 1.0), ("stride", (1, 1), (1, True)),
    ("stride", (1, 1), (1.0, 1)), ("dilation", 1, True), ("dilation", (1, 1), (True, 1)),
    ("groups", 1, True), ("groups", 1, 1.0), ("padding", 1, True),
    ("padding", (1, 1), (True, 1)), ("padding", ((1, 1), (1, 1)), ((True, 1), (1, 1))),
    ("padding", ((1, 1), (1, 1)), ((1.0, 1), (1, 1))),
])
def test_a_cached_valid_call_does_not_admit_an_equal_bad_argument(keyword, good, bad):
    assert good == bad  # equal as dict keys: only the cache key's types tell them apart
    valid = {"padding": 1, keyword: good}
    for _ in range(2):  # the second call finds the cached geometry
        expected = cconv.conv2d(X, W, **valid)
    assert expected.shape == (1, 4, 8, 8)
    with pytest.raises(TypeError, match=keyword):
        cconv.conv2d(X, W, **dict(valid, **{keyword: bad}))


def test_shapes_with_float_or_bool_entries_are_refused_after_caching():
    _geometry.make_geometry((1, 4, 8, 8), (4, 4, 3, 3), padding=1)
    for bad in [(1, 4, 8.0, 8), (1, 4, True, 8)]:
        with pytest.raises(TypeError):
            _geometry.make_geometry(bad, (4, 4, 3, 3), padding=1)


def test_byte_order_does_not_share_an_entry_with_the_native_dtype():
    """A big-endian operand computes the same result as the native one (the compute dtype
    is native either way)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 4, 8, 8)).astype(np.float32)
    native = cconv.conv2d(x, W, padding=1)
    swapped = cconv.conv2d(x.astype(">f4"), W.astype(">f4"), padding=1)
    np.testing.assert_array_equal(native, swapped)


def test_compute_and_result_dtypes_are_remembered_correctly():
    for a, b, compute, result in [(np.float16, np.float16, np.float32, np.float16),
                                  (np.float16, np.float32, np.float32, np.float32),
                                  (np.float32, np.float64, np.float64, np.float64)]:
        for _ in range(2):
            assert _geometry.compute_dtype(np.dtype(a), np.dtype(b)) == compute
            assert _geometry.result_type(np.dtype(a), np.dtype(b)) == result


def test_a_geometry_hashes_afresh_in_another_process():
    """String fields hash differently in every process: a pickled geometry must not carry
    its old hash, or equal geometries would miss each other in dicts."""
    geom = cconv.plan_conv2d((2, 4, 9, 9), (6, 4, 3, 3), padding="same").geometry
    hash(geom)  # computed and remembered here
    code = ("import pickle, sys, cconv; g = pickle.loads(sys.stdin.buffer.read()); "
            "h = cconv.plan_conv2d((2, 4, 9, 9), (6, 4, 3, 3), padding='same').geometry; "
            "print(g == h and hash(g) == hash(h) and {h: 1}.get(g) == 1)")
    # the cconv this process imported (installed or built in place), from the filesystem
    # root so that no source tree in the working directory shadows it
    home = os.path.dirname(os.path.dirname(os.path.abspath(cconv.__file__)))
    env = dict(os.environ, PYTHONPATH=home)
    done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(geom),
                          capture_output=True, check=True, env=env, cwd=os.path.abspath(os.sep))
    assert done.stdout.decode().strip() == "True"
