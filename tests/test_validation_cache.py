"""The caches that keep a small call's validation cheap (the geometry's, and the public
functions' remembered call setups) must never change what validation decides or what a
call computes: an argument that equals a valid one as a dict key (``True == 1``, ``2.0 == 2``,
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
from support.reference_nd import ref_backward_data, ref_backward_weight, ref_conv

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


# -- the call setups (``cconv.functional``): every pass remembers what its arguments derive --

PASSES = ("forward", "backward_data", "backward_weight")


def _call(op, x, w, dy, shape=None, **kw):
    """One pass of the public API on (x, w, dy); ``shape`` overrides its shape argument."""
    if op == "forward":
        return cconv.conv2d(x, w, **kw)
    if op == "backward_data":
        return cconv.conv2d_backward_data(dy, w, x.shape if shape is None else shape, **kw)
    return cconv.conv2d_backward_weight(dy, x, w.shape if shape is None else shape, **kw)


def _reference(op, x, w, dy, stride, pads, mode):
    if op == "forward":
        return ref_conv(x, w, stride=stride, pads=pads, mode=mode)
    if op == "backward_data":
        return ref_backward_data(dy, w, x.shape, stride=stride, pads=pads, mode=mode)
    return ref_backward_weight(dy, x, w.shape, stride=stride, pads=pads, mode=mode)


@pytest.mark.parametrize("op", PASSES)
@pytest.mark.parametrize("keyword, good, bad", [
    ("stride", 1, True), ("stride", (1, 1), (1.0, 1)), ("dilation", 1, True),
    ("groups", 1, 1.0), ("padding", 1, True), ("padding", ((1, 1), (1, 1)), ((True, 1), (1, 1))),
])
def test_every_pass_refuses_an_equal_bad_argument_after_a_remembered_call(op, keyword, good,
                                                                            bad):
    dy = np.ones((1, 4, 8, 8), np.float32)
    valid = {"padding": 1, keyword: good}
    first = _call(op, X, W, dy, **valid)
    np.testing.assert_array_equal(_call(op, X, W, dy, **valid), first)  # remembered
    with pytest.raises(TypeError, match=keyword):
        _call(op, X, W, dy, **dict(valid, **{keyword: bad}))


@pytest.mark.parametrize("op, name", [("backward_data", "input_shape"),
                                      ("backward_weight", "weight_shape")])
def test_a_shape_argument_with_float_or_bool_entries_is_refused_after_a_remembered_call(op, name):
    dy = np.ones((1, 4, 8, 8), np.float32)
    good = X.shape if op == "backward_data" else W.shape
    expected = _call(op, X, W, dy, shape=good, padding=1)
    np.testing.assert_array_equal(_call(op, X, W, dy, shape=good, padding=1), expected)
    np.testing.assert_array_equal(_call(op, X, W, dy, shape=list(good), padding=1), expected)
    for bad in [good[:2] + (8.0,) + good[3:], good[:2] + (True,) + good[3:]]:
        with pytest.raises(TypeError, match=name):
            _call(op, X, W, dy, shape=bad, padding=1)


@pytest.mark.parametrize("op", ["backward_data", "backward_weight"])
def test_a_gradient_of_the_wrong_shape_is_refused_after_a_remembered_call(op):
    dy = np.ones((1, 4, 8, 8), np.float32)
    for _ in range(2):
        _call(op, X, W, dy, padding=1)
    with pytest.raises(ValueError, match="grad_out"):
        _call(op, X, W, np.ones((1, 4, 7, 8), np.float32), padding=1)
    with pytest.raises(ValueError, match="grad_out"):
        _call(op, X, W, dy, padding=0)  # the same gradient, another geometry


@pytest.mark.parametrize("op", PASSES)
@pytest.mark.parametrize("mode", ["zeros", "reflect", "circular"])
@pytest.mark.parametrize("stride", [1, 2])
def test_remembered_calls_compute_what_the_reference_does(op, mode, stride):
    """The second and third calls (their setup remembered, the operands' values new) match
    the float64 reference as the first does, with the padding mode's fold or padding."""
    rng = np.random.default_rng(stride)
    pads = ((1, 2), (2, 1))
    for _ in range(3):
        x = rng.standard_normal((2, 3, 9, 10)).astype(np.float32)
        w = rng.standard_normal((5, 3, 3, 4)).astype(np.float32)
        out = ref_conv(x, w, stride=stride, pads=pads, mode=mode).shape
        dy = rng.standard_normal(out).astype(np.float32)
        got = _call(op, x, w, dy, stride=stride, padding=pads, padding_mode=mode)
        ref = _reference(op, x, w, dy, stride, pads, mode)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


@pytest.mark.parametrize("op", PASSES)
def test_remembered_dtypes_and_layouts_give_the_uncached_results(op, monkeypatch):
    """float16, mixed float32/float64 and NHWC calls, remembered, equal the same calls made
    with no setup remembered at all (``_call_key`` answering None), bit for bit."""
    from cconv import functional

    rng = np.random.default_rng(7)
    cases = [(np.float16, np.float16, "NCHW"), (np.float32, np.float64, "NCHW"),
             (np.float32, np.float32, "NHWC")]
    for xd, wd, layout in cases:
        x = rng.standard_normal((2, 4, 6, 7)).astype(xd)
        w = rng.standard_normal((6, 4, 3, 3)).astype(wd)
        dy = rng.standard_normal((2, 6, 6, 7)).astype(xd)
        kw = dict(padding=1)
        if layout == "NHWC":
            x, dy = x.transpose(0, 2, 3, 1).copy(), dy.transpose(0, 2, 3, 1).copy()
            w = w.transpose(2, 3, 1, 0).copy()
            kw.update(layout="NHWC", weight_layout="HWIO")
        remembered = [_call(op, x, w, dy, **kw) for _ in range(2)][1]
        with monkeypatch.context() as patch:
            patch.setattr(functional, "_call_key", lambda *args: None)
            fresh = _call(op, x, w, dy, **kw)
        operands = (xd, xd) if op == "backward_weight" else (xd, wd)  # (grad_out, x)
        assert remembered.dtype == fresh.dtype == np.result_type(*operands)
        np.testing.assert_array_equal(remembered, fresh)


def test_lists_and_array_subclasses_after_a_remembered_call():
    """Operands that are not plain ndarrays are converted as always (no setup is keyed on
    them), and give the plain arrays' result."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 4, 8, 8)).astype(np.float32)
    expected = [cconv.conv2d(x, W, padding=1) for _ in range(2)][1]
    np.testing.assert_array_equal(cconv.conv2d(x.tolist(), W, padding=1),
                                  cconv.conv2d(x.astype(np.float64), W, padding=1))
    sub = x.view(type("Sub", (np.ndarray,), {}))
    np.testing.assert_array_equal(cconv.conv2d(sub, W, padding=1), expected)

    class Duck:  # an array-like with an ndarray's shape and dtype: it must be converted
        shape, dtype = x.shape, x.dtype

        def __array__(self, dtype=None, copy=None):
            return x

    np.testing.assert_array_equal(cconv.conv2d(Duck(), W, padding=1), expected)


def test_remembered_setups_stay_bounded(monkeypatch):
    from cconv import functional

    monkeypatch.setattr(functional, "_SETUPS_SIZE", 4)
    monkeypatch.setattr(functional, "_SETUPS", {})
    for size in range(6, 16):
        cconv.conv2d(np.ones((1, 4, size, size), np.float32), W, padding=1)
        assert 1 <= len(functional._SETUPS) <= 4


@pytest.mark.parametrize("rank, keyword, good, bad", [
    (1, "stride", 1, True), (1, "padding", ((1, 1),), ((True, 1),)), (1, "padding", 1, 1.0),
    (1, "dilation", (1,), (True,)),
    (3, "stride", (1, 1, 1), (1, True, 1)), (3, "padding", ((1, 1), (1, 1), (1, 1)),
                                             ((1, 1), (1.0, 1), (1, 1))),
    (3, "groups", 1, True),
])
def test_nd_calls_refuse_an_equal_bad_argument_after_a_remembered_call(rank, keyword, good,
                                                                       bad):
    """The 1-D and 3-D functions key their geometries (and their 2-D calls' setups) on
    per-side padding pairs too: a pair holding a bool or a float is still refused."""
    conv = cconv.conv1d if rank == 1 else cconv.conv3d
    x = np.ones((1, 4) + (6,) * rank, np.float32)
    w = np.ones((4, 4) + (3,) * rank, np.float32)
    valid = {"padding": 1, keyword: good}
    first = conv(x, w, **valid)
    np.testing.assert_array_equal(conv(x, w, **valid), first)
    with pytest.raises(TypeError, match=keyword):
        conv(x, w, **dict(valid, **{keyword: bad}))


def _call_nd(rank, op, x, w, dy, **kw):
    name = {1: "conv1d", 3: "conv3d"}[rank]
    if op == "forward":
        return getattr(cconv, name)(x, w, **kw)
    if op == "backward_data":
        return getattr(cconv, f"{name}_backward_data")(dy, w, x.shape, **kw)
    return getattr(cconv, f"{name}_backward_weight")(dy, x, w.shape, **kw)


@pytest.mark.parametrize("rank", [1, 3])
@pytest.mark.parametrize("op", PASSES)
def test_remembered_nd_calls_match_the_reference_and_the_uncached_calls(rank, op,
                                                                        monkeypatch):
    """1-D and 3-D calls with their setups remembered (three calls, new values each time)
    match the float64 reference with a reflect padding and a stride, and the same calls
    made with nothing remembered, bit for bit; a gradient of another shape is still
    refused."""
    from cconv import functional

    rng = np.random.default_rng(rank)
    spatial, kernel = (11,) * rank, (3,) * rank
    pads = ((2, 1),) + ((1, 1),) * (rank - 1)
    kw = dict(stride=2, padding=pads, padding_mode="reflect")
    for _ in range(3):
        x = rng.standard_normal((2, 3) + spatial).astype(np.float32)
        w = rng.standard_normal((4, 3) + kernel).astype(np.float32)
        out = ref_conv(x, w, stride=2, pads=pads, mode="reflect").shape
        dy = rng.standard_normal(out).astype(np.float32)
        got = _call_nd(rank, op, x, w, dy, **kw)
        ref = _reference(op, x, w, dy, 2, pads, "reflect")
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    with monkeypatch.context() as patch:
        patch.setattr(functional, "_call_key", lambda *args: None)
        fresh = _call_nd(rank, op, x, w, dy, **kw)
    np.testing.assert_array_equal(got, fresh)
    if op != "forward":
        with pytest.raises(ValueError, match="grad_out"):
            _call_nd(rank, op, x, w, dy[..., :-1], **kw)
