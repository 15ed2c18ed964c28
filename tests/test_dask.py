"""cconv.dask: chunked convolution and gradients against the float64 reference and the
in-memory cconv call, on the threaded scheduler and on a two-process dask.distributed
LocalCluster; the chunking rules (halo, stride alignment, boundary added once), the tree
reduction of the weight gradient and the thread policy."""

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import dask  # noqa: E402

import cconv  # noqa: E402
import cconv.dask as cdask  # noqa: E402
from support.checks import assert_close  # noqa: E402
from support.reference import (mode_limit_ok, ref_backward_data,  # noqa: E402
                               ref_backward_weight, ref_conv2d, resolve_padding)
from support.strategies import (from_layout, to_layout, weight_from_layout,  # noqa: E402
                                weight_to_layout)

# Dask against the in-memory call: the same kernels on other tile boundaries.
IN_MEMORY_RTOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}
NUMPY_MODES = {"zeros": "constant", "constant": "constant", "reflect": "reflect",
               "symmetric": "symmetric", "replicate": "edge", "circular": "wrap"}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(cconv.__file__)))


@pytest.fixture(scope="module")
def client():
    """A two-worker, one-thread-per-worker process cluster, shared by the module's tests."""
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster, set_as_default=False) as c:
            yield c


def _case(layout, weight_layout, dtype, n=4, c=4, k=6, h=19, w=17, r=3, s=3, groups=1,
          seed=0):
    """Random NCHW/OIHW float64 values and the same numbers as cconv arguments."""
    rng = np.random.default_rng(seed)
    x64 = rng.standard_normal((n, c, h, w)).astype(dtype).astype(np.float64)
    w64 = rng.standard_normal((k, c // groups, r, s)).astype(dtype).astype(np.float64)
    b64 = rng.standard_normal(k).astype(dtype).astype(np.float64)
    return (x64, w64, b64, to_layout(x64.astype(dtype), layout),
            weight_to_layout(w64.astype(dtype), weight_layout), b64.astype(dtype))


def _reference_forward(x64, w64, b64, kw):
    """float64 NCHW reference: numpy.pad with the mode, then an unpadded convolution."""
    pads = resolve_padding(kw.get("padding", 0), x64.shape[2:], w64.shape[2:],
                           kw.get("stride", 1), kw.get("dilation", 1))
    mode = NUMPY_MODES[kw.get("padding_mode", "zeros")]
    extra = {"constant_values": kw.get("padding_value", 0.0)} if mode == "constant" else {}
    xp = np.pad(x64, ((0, 0), (0, 0)) + tuple(pads), mode=mode, **extra)
    return ref_conv2d(xp, w64, b64, stride=kw.get("stride", 1),
                      dilation=kw.get("dilation", 1), groups=kw.get("groups", 1))


def _in_memory_close(got, x, weight, bias, kw, what):
    want = cconv.conv2d(x, weight, bias, **kw)
    assert_close(got, want, rtol=IN_MEMORY_RTOL[want.dtype], what=what)


FORWARD_CASES = [
    dict(padding=1),
    dict(stride=2, padding=1),
    dict(stride=2, padding=((0, 2), (1, 0)), dilation=2),
    dict(dilation=3, padding="same"),
    dict(stride=3, padding="same_lower", dilation=2),
    dict(padding=2, padding_mode="reflect"),
    dict(stride=2, padding=3, padding_mode="symmetric"),
    dict(padding=(2, 1), padding_mode="replicate", dilation=2),
    dict(stride=2, padding=4, padding_mode="circular"),
    dict(padding=1, padding_mode="constant", padding_value=-1.5),
    dict(padding=1, groups=2),
]


# --------------------------------------------------------------------------------------------
# forward, threaded scheduler
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kw", FORWARD_CASES, ids=repr)
@pytest.mark.parametrize("layout,weight_layout", [("NCHW", "OIHW"), ("NHWC", "HWIO")])
def test_forward_spatial_and_batch_chunks(kw, layout, weight_layout):
    x64, w64, b64, x, weight, bias = _case(layout, weight_layout, np.float32,
                                           groups=kw.get("groups", 1))
    chunks = (3, 2, 5, 4) if layout == "NCHW" else (3, 5, 4, 2)  # channels split on purpose
    y = cdask.conv2d(da.from_array(x, chunks=chunks), weight, bias, layout=layout,
                     weight_layout=weight_layout, **kw)
    assert y.numblocks[2 if layout == "NCHW" else 1] > 1  # really split over height
    got = y.compute(scheduler="threads")
    assert got.dtype == np.float32
    assert_close(from_layout(got, layout), _reference_forward(x64, w64, b64, kw),
                 what=f"dask forward {kw}")
    _in_memory_close(got, x, weight, bias, dict(kw, layout=layout,
                                                 weight_layout=weight_layout), "vs in-memory")


def _fits(size, axis, kernel, kw):
    """True when an input axis of ``size`` (0 height, 1 width) has an output under ``kw``
    (stride, dilation, padding in any form of the random test) and a padding its
    padding_mode can make."""
    stride, dilation, padding = kw["stride"][axis], kw["dilation"][axis], kw["padding"]
    if padding == "full":
        pads = (dilation * (kernel - 1),) * 2
    elif isinstance(padding, str):
        pads = resolve_padding(padding, (size, size), (kernel, kernel), stride, dilation)[0]
    else:
        pads = padding[axis]
    return (size + sum(pads) >= dilation * (kernel - 1) + 1
            and mode_limit_ok(kw["padding_mode"], [pads], [size]))


@given(data=st.data())
def test_forward_any_chunking_equals_in_memory(data):
    """Random geometry, padding mode and chunk sizes (down to 1 pixel, smaller than the halo)."""
    r, s = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    kw = dict(stride=(data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))),
              dilation=(data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))),
              padding=data.draw(st.one_of(
                  st.sampled_from(["valid", "same", "same_lower", "full"]),
                  st.tuples(st.tuples(st.integers(0, 4), st.integers(0, 4)),
                            st.tuples(st.integers(0, 4), st.integers(0, 4))))),
              padding_mode=data.draw(st.sampled_from(sorted(NUMPY_MODES))),
              layout=data.draw(st.sampled_from(["NCHW", "NHWC"])))
    # The sizes from 3 to 16 that the kernel fits and the mode can pad (reflect: padding
    # smaller than the size, circular: at most the size): built valid rather than filtered
    # out (too many rejected draws fail Hypothesis's health check).
    h, w = (data.draw(st.sampled_from([v for v in range(3, 17) if _fits(v, axis, k, kw)]))
            for axis, k in enumerate((r, s)))
    if kw["padding_mode"] == "constant":
        kw["padding_value"] = 0.25
    x64, w64, b64, x, weight, bias = _case(kw["layout"], "OIHW", np.float64, n=3, c=2, k=3,
                                           h=h, w=w, r=r, s=s, seed=data.draw(st.integers(0, 9)))
    want = cconv.conv2d(x, weight, bias, **kw)
    hc, wc = data.draw(st.integers(1, h)), data.draw(st.integers(1, w))
    chunks = (data.draw(st.integers(1, 3)), 2, hc, wc)
    if kw["layout"] == "NHWC":
        chunks = (chunks[0], hc, wc, 2)
    y = cdask.conv2d(da.from_array(x, chunks=chunks), weight, bias, **kw)
    assert y.shape == want.shape
    got = y.compute(scheduler="threads")
    assert_close(got, want, rtol=1e-12, what=f"{kw}, chunks {chunks}")


def test_stride_rule_sets_output_chunks():
    """Padded chunk boundaries are the input's, shifted by the leading pad and rounded down to
    a multiple of the stride; the output chunks follow."""
    x = da.zeros((1, 1, 24, 24), chunks=(1, 1, 8, 24), dtype=np.float32)
    y = cdask.conv2d(x, np.ones((1, 1, 3, 3), np.float32), stride=2, padding=1)
    # boundaries 8 and 16, + 1 pad = 9 and 17 -> padded rows 8 and 16 -> output rows 4 and 8
    assert y.chunks[2] == (4, 4, 4)
    y = cdask.conv2d(x, np.ones((1, 1, 3, 3), np.float32), stride=3, padding=(2, 0))
    # 8 + 2 = 10 -> 9 (row 3); 16 + 2 = 18 (row 6); 28 padded rows -> 9 output rows
    assert y.chunks[2] == (3, 3, 3)


def test_halo_is_exactly_what_the_kernel_needs(monkeypatch):
    """Each task gets its chunk plus max(dilation*(kernel-1)+1-stride, 0) rows of the next."""
    seen = []
    real = cconv.functional.conv2d

    def recording(x, *args, **kwargs):
        seen.append(x.shape[2])
        assert kwargs["padding"] == 0  # boundary added once, never per chunk
        return real(x, *args, **kwargs)

    monkeypatch.setattr(cconv.functional, "conv2d", recording)
    x = da.ones((1, 1, 30, 5), chunks=(1, 1, 10, 5), dtype=np.float64)
    w = np.ones((1, 1, 3, 1))
    # extent 5 (kernel 3, dilation 2), stride 2: halo 3; padding 2 -> padded 34 rows,
    # boundaries 12 and 22 -> chunks 12, 10, 12 plus the halo for all but the last
    y = cdask.conv2d(x, w, stride=(2, 1), dilation=(2, 1), padding=(2, 0),
                     padding_mode="replicate")
    assert y.chunks[2] == (6, 5, 4)
    got = y.compute(scheduler="sync")
    assert sorted(seen) == sorted([12 + 3, 10 + 3, 12])
    np.testing.assert_array_equal(got, np.full((1, 1, 15, 5), 3.0))  # replicated ones


def test_numpy_input_and_channel_chunks():
    x64, w64, b64, x, weight, bias = _case("NCHW", "OIHW", np.float64)
    y = cdask.conv2d(x, weight, padding=1)  # a NumPy array: one chunk
    assert_close(y.compute(scheduler="sync"), ref_conv2d(x64, w64, pads=((1, 1), (1, 1))))
    y = cdask.conv2d(da.from_array(x, chunks=(2, 1, 19, 17)), weight, padding=1)
    assert y.chunks[1] == (6,)
    assert_close(y.compute(scheduler="threads"), ref_conv2d(x64, w64, pads=((1, 1), (1, 1))))


# --------------------------------------------------------------------------------------------
# gradients, threaded scheduler
# --------------------------------------------------------------------------------------------

GRADIENT_CASES = [
    dict(padding=1),
    dict(stride=2, padding=((1, 0), (0, 2)), dilation=2),
    dict(padding=1, groups=2),
]


@pytest.mark.parametrize("kw", GRADIENT_CASES, ids=repr)
@pytest.mark.parametrize("layout,weight_layout", [("NCHW", "OIHW"), ("NHWC", "HWIO")])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gradients_over_batch_chunks(kw, layout, weight_layout, dtype):
    x64, w64, _, x, weight, _ = _case(layout, weight_layout, dtype, n=7,
                                      groups=kw.get("groups", 1))
    kw = dict(kw, layout=layout, weight_layout=weight_layout)
    pads = resolve_padding(kw["padding"], x64.shape[2:], w64.shape[2:], kw.get("stride", 1),
                           kw.get("dilation", 1))
    y64 = ref_conv2d(x64, w64, pads=pads, stride=kw.get("stride", 1),
                     dilation=kw.get("dilation", 1), groups=kw.get("groups", 1))
    g64 = np.random.default_rng(5).standard_normal(y64.shape).astype(dtype).astype(np.float64)
    g = to_layout(g64.astype(dtype), layout)
    geo = dict(stride=kw.get("stride", 1), pads=pads, dilation=kw.get("dilation", 1),
               groups=kw.get("groups", 1))
    gd = da.from_array(g, chunks=(2,) + g.shape[1:])
    dx = cdask.conv2d_backward_data(gd, weight, x.shape, **kw)
    assert dx.chunks[0] == (2, 2, 2, 1)
    dx = dx.compute(scheduler="threads")
    assert dx.dtype == dtype
    assert_close(from_layout(dx, layout), ref_backward_data(g64, w64, x64.shape, **geo))
    assert_close(dx, cconv.conv2d_backward_data(g, weight, x.shape, **kw),
                 rtol=IN_MEMORY_RTOL[np.dtype(dtype)])
    dw = cdask.conv2d_backward_weight(gd, da.from_array(x, chunks=(3,) + x.shape[1:]),
                                      weight.shape, **kw).compute(scheduler="threads")
    assert dw.dtype == dtype
    assert_close(weight_from_layout(dw, weight_layout),
                 ref_backward_weight(g64, x64, w64.shape, **geo))
    assert_close(dw, cconv.conv2d_backward_weight(g, x, weight.shape, **kw),
                 rtol=IN_MEMORY_RTOL[np.dtype(dtype)])


@pytest.mark.parametrize("mode", ["reflect", "circular", "constant"])
def test_gradients_with_padding_modes(mode):
    _, _, _, x, weight, _ = _case("NCHW", "OIHW", np.float64, n=5)
    kw = dict(stride=2, padding=2, padding_mode=mode)
    if mode == "constant":
        kw["padding_value"] = 3.0
    g = np.random.default_rng(1).standard_normal(cconv.conv2d(x, weight, **kw).shape)
    gd = da.from_array(g, chunks=(2, 6, 5, 5))
    dx = cdask.conv2d_backward_data(gd, weight, x.shape, **kw).compute(scheduler="threads")
    assert_close(dx, cconv.conv2d_backward_data(g, weight, x.shape, **kw), rtol=1e-12)
    dw = cdask.conv2d_backward_weight(gd, da.from_array(x, chunks=(1, 4, 19, 17)),
                                      weight.shape, **kw).compute(scheduler="threads")
    assert_close(dw, cconv.conv2d_backward_weight(g, x, weight.shape, **kw), rtol=1e-12)


def test_weight_gradient_is_a_tree_reduction():
    x = da.ones((16, 2, 6, 6), chunks=(2, 2, 6, 6))
    g = da.ones((16, 3, 4, 4), chunks=(2, 3, 4, 4))
    dw = cdask.conv2d_backward_weight(g, x, (3, 2, 3, 3), split_every=2)
    graph = dict(dw.__dask_graph__())
    deps = {key: dask.core.get_dependencies(graph, key) for key in graph}
    partial_keys = {k for k in graph if str(k[0] if isinstance(k, tuple) else k)
                    .startswith("backward_weight_block")}
    assert len(partial_keys) == 8
    # every task downstream of the 8 partial gradients adds at most split_every inputs
    downstream, frontier = set(), set(partial_keys)
    while frontier:
        frontier = {k for k, d in deps.items() if d & frontier} - downstream
        downstream |= frontier
    assert downstream and all(len(deps[k]) <= 2 for k in downstream)

    def depth(key):
        return 0 if key in partial_keys else 1 + max(depth(d) for d in deps[key]
                                                     if d in downstream | partial_keys)

    (final,) = [k for k in downstream if not any(k in d for d in deps.values())]
    assert depth(final) >= 3  # log2(8) levels of pairwise sums (+ the final cast)
    np.testing.assert_allclose(dw.compute(scheduler="threads"),
                               cconv.conv2d_backward_weight(np.ones((16, 3, 4, 4)),
                                                            np.ones((16, 2, 6, 6)), (3, 2, 3, 3)))


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------

def test_bad_arguments_name_themselves():
    x = da.ones((2, 3, 8, 8), chunks=(1, 3, 4, 4))
    w = np.ones((4, 3, 3, 3))
    with pytest.raises(ValueError, match="x must be 4-D"):
        cdask.conv2d(da.ones((3, 8, 8)), w)
    with pytest.raises(TypeError, match="x has dtype int"):
        cdask.conv2d(da.ones((2, 3, 8, 8), dtype=np.int32), w)
    with pytest.raises(ValueError, match="padding_mode"):
        cdask.conv2d(x, w, padding=1, padding_mode="mirror")
    with pytest.raises(ValueError, match="bias"):
        cdask.conv2d(x, w, np.ones(5))
    with pytest.raises(ValueError, match="num_threads"):
        cdask.conv2d(x, w, num_threads=0)
    with pytest.raises(ValueError, match="grad_out has shape"):
        cdask.conv2d_backward_data(da.ones((2, 4, 5, 5)), w, (2, 3, 8, 8))
    with pytest.raises(ValueError, match="grad_out has shape"):
        cdask.conv2d_backward_weight(da.ones((2, 4, 5, 5)), x, w.shape)
    with pytest.raises(ValueError, match="split_every"):
        cdask.conv2d_backward_weight(da.ones((2, 4, 6, 6)), x, w.shape, split_every=1)


def test_import_is_lazy_and_a_missing_dask_names_the_extra():
    code = ("import sys, cconv\n"
            "assert not {'cconv.dask', 'dask'} & set(sys.modules), 'imported eagerly'\n"
            "sys.modules['dask'] = sys.modules['dask.array'] = None\n"
            "try:\n    import cconv.dask\nexcept ImportError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert 'pip install "cconv[dask]"' in out.stdout


# --------------------------------------------------------------------------------------------
# thread policy
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("num_threads", [None, 2])
def test_threaded_scheduler_tasks_run_single_threaded(monkeypatch, num_threads):
    """Recorded at the cconv calls themselves: 1 thread per task unless the caller says."""
    used = []
    for name in ("conv2d", "conv2d_backward_data", "conv2d_backward_weight"):
        real = getattr(cconv.functional, name)

        def recording(*args, _real=real, **kwargs):
            used.append(kwargs["num_threads"])
            return _real(*args, **kwargs)

        monkeypatch.setattr(cconv.functional, name, recording)
    x = da.ones((4, 2, 12, 12), chunks=(2, 2, 6, 6))
    w = np.ones((3, 2, 3, 3))
    g = da.ones((4, 3, 12, 12), chunks=(1, 3, 12, 12))
    dask.compute(cdask.conv2d(x, w, padding=1, num_threads=num_threads),
                 cdask.conv2d_backward_data(g, w, x.shape, padding=1, num_threads=num_threads),
                 cdask.conv2d_backward_weight(g, x, w.shape, padding=1,
                                              num_threads=num_threads),
                 scheduler="threads")
    assert len(used) == 8 + 4 + 4
    assert set(used) == {1 if num_threads is None else num_threads}


def test_policy_outside_dask():
    assert cdask.task_num_threads() == 1
    assert cdask.task_num_threads(3) == 3
    with pytest.raises(TypeError, match="num_threads"):
        cdask.task_num_threads(1.5)


# --------------------------------------------------------------------------------------------
# dask.distributed LocalCluster (two worker processes)
# --------------------------------------------------------------------------------------------

def test_distributed_policy_follows_the_worker(client):
    workers = list(client.scheduler_info()["workers"])

    def on_each_worker(*args):
        return client.gather([client.submit(cdask.task_num_threads, *args, pure=False,
                                            workers=[w]) for w in workers])

    # distributed's nanny gives workers OMP_NUM_THREADS=1: with one task thread, one thread
    assert on_each_worker() == [1, 1]
    assert on_each_worker(2) == [2, 2]
    client.run(cconv.set_num_threads, 2)  # a worker's budget of 2, over its 1 task thread
    try:
        assert on_each_worker() == [2, 2]
    finally:
        client.run(cconv.set_num_threads, 1)


@pytest.mark.parametrize("layout,weight_layout,kw", [
    ("NCHW", "OIHW", dict(stride=2, padding=1, dilation=2)),
    ("NHWC", "HWIO", dict(stride=2, padding=2, padding_mode="reflect")),
], ids=["NCHW-stride-dilation", "NHWC-stride-reflect"])
def test_distributed_forward_and_gradients(client, layout, weight_layout, kw):
    x64, w64, b64, x, weight, bias = _case(layout, weight_layout, np.float32, n=6)
    kw = dict(kw, layout=layout, weight_layout=weight_layout)
    chunks = (2, 4, 7, 6) if layout == "NCHW" else (2, 7, 6, 4)
    xd = da.from_array(x, chunks=chunks)
    y = cdask.conv2d(xd, weight, bias, **kw)
    g = np.random.default_rng(2).standard_normal(y.shape).astype(np.float32)
    gd = da.from_array(g, chunks=(3,) + g.shape[1:])
    got, dx, dw = client.compute([y, cdask.conv2d_backward_data(gd, weight, x.shape, **kw),
                                  cdask.conv2d_backward_weight(gd, xd, weight.shape, **kw)],
                                 sync=True)
    assert_close(from_layout(got, layout), _reference_forward(x64, w64, b64, kw))
    _in_memory_close(got, x, weight, bias, kw, "distributed forward")
    assert_close(dx, cconv.conv2d_backward_data(g, weight, x.shape, **kw), rtol=1e-5)
    assert_close(dw, cconv.conv2d_backward_weight(g, x, weight.shape, **kw), rtol=1e-5)
