"""Convolution of dask arrays: cconv's kernels on every chunk, halos where chunks meet.

``import cconv`` does not import this module; ``import cconv.dask`` needs dask
(``pip install "cconv[dask]"``).

Chunking
--------
* **Batch**: chunks are independent; each is one task.
* **Channels**: rechunked to a single chunk (a convolution mixes all the channels of a group).
* **Height and width** (:func:`conv2d` only): the boundary (zeros, a constant or a padding
  mode) is added once to the whole array, never per chunk, so chunk edges inside the image
  see the real neighbouring pixels and the image's edges see exactly the padding
  :func:`cconv.conv2d` would use.  Each chunk is then convolved without padding after
  receiving, from the chunk after it, a halo of ``max(dilation * (kernel - 1) + 1 - stride,
  0)`` rows (columns): output row ``i`` reads padded rows ``i * stride`` to ``i * stride +
  dilation * (kernel - 1)``, so a chunk needs rows beyond its end only
  (``dask.array.overlap.overlap`` with that one-sided depth and ``boundary="none"``).
* **Stride rule**: along each spatial axis the padded input is rechunked so that every chunk
  boundary is a multiple of the stride (in padded coordinates); a chunk starting at padded
  row ``j * stride`` then yields output rows from ``j``.  The boundaries are the input's own,
  shifted by the leading padding and rounded down to a multiple of the stride; a boundary
  that would leave a chunk shorter than the halo (or start one past the last output row) is
  dropped, merging the chunks on either side.
* The gradients (:func:`conv2d_backward_data`, :func:`conv2d_backward_weight`) run over batch
  chunks; their other axes are rechunked to single chunks.  The weight gradient's per-chunk
  partial sums are added by a tree reduction (``split_every`` partial sums per task, in
  float64), never by one task that gathers them all.

Threads
-------
:func:`task_num_threads` decides how many OpenMP threads each task's cconv call uses:

* ``num_threads`` given: that many, whatever runs the task.
* On a ``dask.distributed`` worker: the worker process's cconv thread budget
  (:func:`cconv.get_num_threads` there, set by ``OMP_NUM_THREADS`` -- which distributed's
  nanny sets to 1 by default -- or by :func:`cconv.set_num_threads` run on the workers)
  divided by the worker's task threads (``Worker.state.nthreads``), at least 1: the worker
  runs that many tasks at once, and together they use the budget, not more.
* Anywhere else (dask's threaded, multiprocessing and synchronous schedulers): 1.  The local
  schedulers already run one task per core, so threads inside a task would only oversubscribe
  the cores.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Sequence, cast

import numpy as np

try:
    import dask.array as _dask_array
    from dask.array import Array
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError('cconv.dask needs dask: pip install "cconv[dask]"') from exc

from . import _geometry as _geometry_module
from . import _threads as _threads_module
from . import functional as _functional_module

__all__ = ["conv2d", "conv2d_backward_data", "conv2d_backward_weight", "task_num_threads"]

# cconv's internal modules carry no type hints; Any-typed aliases keep ``mypy --strict`` from
# flagging every call, and looking functions up at call time lets tests observe the calls.
_functional: Any = _functional_module
_geometry: Any = _geometry_module
_threads: Any = _threads_module
# dask.array's functions and Array methods carry no type hints either: dask arrays are Any
# inside this module, and Array only where the public functions hand them back.
_da: Any = _dask_array

# cconv's padding modes as numpy.pad / dask.array.pad modes.
_NUMPY_PAD_MODES = {"zeros": "constant", "constant": "constant", "reflect": "reflect",
                    "symmetric": "symmetric", "replicate": "edge", "circular": "wrap"}


# -- the thread policy ------------------------------------------------------------------------

def _worker_threads() -> int | None:
    """Task threads of the dask.distributed worker running this code, None off a worker."""
    distributed = sys.modules.get("distributed")
    if distributed is None:  # a process that never imported distributed is no worker
        return None
    try:
        worker = distributed.get_worker()
    except ValueError:  # distributed's way of saying "not in a worker's task"
        return None
    return int(worker.state.nthreads)


def task_num_threads(num_threads: int | None = None) -> int:
    """The OpenMP threads one dask task's cconv call uses (the module's thread policy).

    Parameters
    ----------
    num_threads : int, optional
        The caller's explicit choice, used as is.

    Returns
    -------
    int
        ``num_threads`` if given; on a dask.distributed worker, the worker's cconv thread
        budget divided by its task threads (at least 1); otherwise 1.
    """
    if num_threads is not None:
        return int(_threads.check_num_threads(num_threads))
    worker_threads = _worker_threads()
    if worker_threads is None:
        return 1
    return max(1, int(_threads.get_num_threads()) // max(worker_threads, 1))


# -- argument handling ------------------------------------------------------------------------

def _as_dask(value: Any, name: str) -> Any:
    """``value`` as a float dask array (other arrays get dask's automatic chunks)."""
    arr = value if isinstance(value, Array) else _da.asarray(value)
    _geometry.check_dtype(arr.dtype, name)
    if arr.ndim != 4:
        raise ValueError(f"{name} must be 4-D, got {arr.ndim}-D shape {arr.shape}")
    return arr


def _as_numpy(value: Any, name: str) -> np.ndarray:
    """A small operand (weight, bias) in memory: computed if it is a dask array."""
    if isinstance(value, Array):
        value = cast(Any, value).compute()
    return np.asarray(_geometry.as_float_array(value, name))


def _single_chunk(value: np.ndarray) -> Any:
    """An in-memory operand as a one-chunk dask array: one copy in the graph, shared by tasks."""
    return _da.from_array(value, chunks=value.shape)


def _axes(layout: str) -> tuple[int, tuple[int, int]]:
    """(channel axis, (height axis, width axis)) of ``layout``; the batch axis is 0."""
    return (1, (2, 3)) if layout == "NCHW" else (3, (1, 2))


def _data_index(layout: str, channel: str, height: str, width: str) -> str:
    """blockwise index string of a 4-D activation in ``layout`` (batch index ``n``)."""
    return f"n{channel}{height}{width}" if layout == "NCHW" else f"n{height}{width}{channel}"


def _weight_index(weight_layout: str, indices: str) -> str:
    """blockwise index string of a weight, ``indices`` given in (K, C/groups, R, S) order."""
    return indices if weight_layout == "OIHW" else indices[2:] + indices[1::-1]


def _check_split_every(split_every: int) -> int:
    if not _geometry._is_int(split_every) or split_every < 2:
        raise ValueError(f"split_every must be an int >= 2, got {split_every!r}")
    return int(split_every)


# -- padding and spatial chunks ---------------------------------------------------------------

def _pad_axis(x: Any, axis: int, lo: int, hi: int, mode: str, value: float) -> Any:
    """``numpy.pad`` of one axis of the whole dask array, in ``mode`` (a numpy.pad mode)."""
    if lo == 0 and hi == 0:
        return x
    if mode == "constant":
        widths = [(0, 0)] * x.ndim
        widths[axis] = (lo, hi)
        return _da.pad(x, widths, mode="constant", constant_values=value)
    # The padded border as indices into the axis, by numpy.pad itself: its semantics exactly,
    # for any padding width (dask.array.pad's reflect/wrap assume widths below the size).
    size = x.shape[axis]
    index = np.pad(np.arange(size), (lo, hi), mode=cast(Any, mode))
    parts = []
    if lo:
        parts.append(_da.take(x, index[:lo], axis=axis))
    parts.append(x)
    if hi:
        parts.append(_da.take(x, index[lo + size:], axis=axis))
    return _da.concatenate(parts, axis=axis)


def _spatial_chunks(chunks: Sequence[int], pad_lo: int, padded: int, extent: int, stride: int,
                    out_size: int) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """Chunks of one padded spatial axis, the matching output chunks, and the halo.

    Parameters
    ----------
    chunks : sequence of int
        The input's chunk sizes along the (unpadded) axis.
    pad_lo : int
        Padding before the first row.
    padded : int
        The padded length.
    extent : int
        ``dilation * (kernel - 1) + 1``.
    stride : int
    out_size : int
        Output length.

    Returns
    -------
    (padded_chunks, output_chunks, halo)
        Every padded chunk but the last starts and ends on a multiple of ``stride`` and is at
        least ``halo`` long; chunk ``j`` plus ``halo`` rows of the next one yields exactly
        ``output_chunks[j]`` rows.
    """
    halo = max(extent - stride, 0)
    # Fewest output rows per chunk so that every chunk can lend the halo to the one before.
    min_rows = max(1, -(-halo // stride))
    starts = [0]
    for boundary in np.cumsum(chunks)[:-1]:
        row = (int(boundary) + pad_lo) // stride
        if row - starts[-1] >= min_rows and row < out_size:
            starts.append(row)
    ends = starts[1:] + [out_size]
    out_chunks = tuple(e - s for s, e in zip(starts, ends))
    padded_chunks = tuple(n * stride for n in out_chunks[:-1]) + (padded - starts[-1] * stride,)
    return padded_chunks, out_chunks, halo


def _padded_with_halos(x: Any, geom: Any,
                       spatial_axes: tuple[int, int]) -> tuple[Any, dict[str, Any]]:
    """``x`` padded once as a whole, rechunked by the stride rule, each chunk extended by the
    halo from the next; and the output chunks along "h" and "w" (blockwise indices)."""
    input_chunks = [x.chunks[axis] for axis in spatial_axes]
    mode = _NUMPY_PAD_MODES[geom.padding_mode]
    for axis, (lo, hi) in zip(spatial_axes, geom.pads):
        x = _pad_axis(x, axis, lo, hi, mode, geom.padding_value)
    padded_chunks, out_chunks, depth = {}, {}, {}
    for axis, index, chunks, (pad_lo, _), kernel, stride, dilation, out_size in zip(
            spatial_axes, "hw", input_chunks, geom.pads, (geom.R, geom.S), geom.stride,
            geom.dilation, (geom.OH, geom.OW)):
        padded_chunks[axis], out_chunks[index], halo = _spatial_chunks(
            chunks, pad_lo, x.shape[axis], dilation * (kernel - 1) + 1, stride, out_size)
        depth[axis] = (0, halo if len(padded_chunks[axis]) > 1 else 0)
    x = x.rechunk(padded_chunks)
    if any(hi for _, hi in depth.values()):
        x = _da.overlap.overlap(x, depth=depth, boundary="none")
    return x, out_chunks


# -- forward ----------------------------------------------------------------------------------

def _forward_block(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, *,
                   keywords: dict[str, Any], num_threads: int | None) -> np.ndarray:
    """One task: an unpadded convolution of a padded chunk with its halo."""
    return np.asarray(_functional.conv2d(x, weight, bias, padding=0,
                                         num_threads=task_num_threads(num_threads), **keywords))


def conv2d(x: Any, weight: Any, bias: Any = None, *, stride: int | Sequence[int] = 1,
           padding: Any = 0, dilation: int | Sequence[int] = 1, groups: int = 1,
           layout: str = "NCHW", weight_layout: str = "OIHW", padding_mode: str = "zeros",
           padding_value: float = 0.0, algo: str = "auto",
           num_threads: int | None = None) -> Array:
    """:func:`cconv.conv2d` of a dask array, lazily, chunk by chunk.

    Batch chunks run independently; height / width chunks are convolved with a halo from
    their neighbour after the boundary has been added once to the whole array (see the
    module docstring for the chunking and stride rules and the thread policy).

    Parameters
    ----------
    x : dask.array.Array or array_like
        (N, C, H, W) for ``layout="NCHW"`` or (N, H, W, C) for ``"NHWC"``; chunked along any
        axis (the channel axis is rechunked to one chunk).
    weight : array_like
        As for :func:`cconv.conv2d`; held in memory and shared by every task.
    bias : array_like, optional
        (K,).
    stride, padding, dilation, groups, layout, weight_layout, padding_mode, padding_value
        As in :func:`cconv.conv2d`.
    algo : str
        As in :func:`cconv.conv2d`, chosen per chunk.
    num_threads : int, optional
        Threads per task; default :func:`task_num_threads`.

    Returns
    -------
    dask.array.Array
        The output, of dtype ``numpy.result_type(x, weight)``, chunked like ``x`` along the
        batch, in one chunk along the output channels, and along height / width in the
        output chunks that the padded input's chunks yield.
    """
    xd = _as_dask(x, "x")
    w = _as_numpy(weight, "weight")
    dtype = np.result_type(xd.dtype, w.dtype)
    geom = _geometry.make_geometry(xd.shape, w.shape, stride=stride, padding=padding,
                                   dilation=dilation, groups=groups, layout=layout,
                                   weight_layout=weight_layout,
                                   dtype=_geometry.compute_dtype(xd.dtype, w.dtype),
                                   padding_mode=padding_mode, padding_value=padding_value)
    if num_threads is not None:
        _threads.check_num_threads(num_threads)
    b = None if bias is None else _single_chunk(_geometry.check_bias(bias, geom.K, dtype))
    channel_axis, spatial_axes = _axes(layout)
    xd, out_chunks = _padded_with_halos(xd.rechunk({channel_axis: -1}), geom, spatial_axes)
    keywords = dict(stride=stride, dilation=dilation, groups=groups, layout=layout,
                    weight_layout=weight_layout, algo=algo)
    block = functools.partial(_forward_block, keywords=keywords, num_threads=num_threads)
    out = _da.blockwise(block, _data_index(layout, "k", "h", "w"),
                        xd, _data_index(layout, "c", "h", "w"),
                        _single_chunk(w), _weight_index(weight_layout, "kgrs"),
                        b, None if b is None else "k",
                        concatenate=True, adjust_chunks=out_chunks, dtype=dtype,
                        meta=np.empty((0, 0, 0, 0), dtype))
    return cast(Array, out)


# -- gradients --------------------------------------------------------------------------------

def _batch_chunked(value: Any, name: str) -> Any:
    """A 4-D operand as a dask array in one chunk along every axis but the batch."""
    return _as_dask(value, name).rechunk({1: -1, 2: -1, 3: -1})


def _backward_data_block(grad_out: np.ndarray, weight: np.ndarray, *,
                         input_shape: tuple[int, ...], keywords: dict[str, Any],
                         num_threads: int | None) -> np.ndarray:
    """One task: the data gradient of one batch chunk."""
    shape = (grad_out.shape[0],) + tuple(input_shape[1:])
    return np.asarray(_functional.conv2d_backward_data(
        grad_out, weight, shape, num_threads=task_num_threads(num_threads), **keywords))


def _backward_weight_block(grad_out: np.ndarray, x: np.ndarray, *,
                           weight_shape: tuple[int, ...], keywords: dict[str, Any],
                           num_threads: int | None) -> np.ndarray:
    """One task: one batch chunk's weight gradient, with a leading axis of length 1."""
    dw = _functional.conv2d_backward_weight(grad_out, x, weight_shape,
                                            num_threads=task_num_threads(num_threads),
                                            **keywords)
    return np.asarray(dw)[np.newaxis]


def _gradient_geometry(grad_out: Any, x_shape: Any, w_shape: Any, x_name: str,
                       w_name: str, keywords: dict[str, Any], dtype: np.dtype) -> Any:
    """Validate a gradient call; ``grad_out`` must have the forward output's shape."""
    geom = _geometry.make_geometry(x_shape, w_shape, dtype=_geometry.compute_dtype(dtype),
                                   x_name=x_name, w_name=w_name, **keywords)
    expected = tuple(geom.output_shape())
    if tuple(grad_out.shape) != expected:
        raise ValueError(f"grad_out has shape {tuple(grad_out.shape)}, but {x_name} "
                         f"{tuple(x_shape)} and {w_name} {tuple(w_shape)} give a "
                         f"convolution output of shape {expected}")
    return geom


def conv2d_backward_data(grad_out: Any, weight: Any, input_shape: Sequence[int], *,
                         stride: int | Sequence[int] = 1, padding: Any = 0,
                         dilation: int | Sequence[int] = 1, groups: int = 1,
                         layout: str = "NCHW", weight_layout: str = "OIHW",
                         padding_mode: str = "zeros", padding_value: float = 0.0,
                         algo: str = "auto", num_threads: int | None = None) -> Array:
    """:func:`cconv.conv2d_backward_data` of a dask array, one task per batch chunk.

    Parameters
    ----------
    grad_out : dask.array.Array or array_like
        Gradient of the convolution's output, in ``layout`` order; rechunked to one chunk
        along every axis but the batch.
    weight : array_like
        The convolution's weight, held in memory.
    input_shape : sequence of 4 ints
        Shape of the convolution's input in ``layout`` order.
    stride, padding, dilation, groups, layout, weight_layout, padding_mode, padding_value, algo
        As in :func:`cconv.conv2d`.
    num_threads : int, optional
        Threads per task; default :func:`task_num_threads`.

    Returns
    -------
    dask.array.Array of shape ``input_shape``
        Chunked like ``grad_out`` along the batch.
    """
    keywords = dict(stride=stride, padding=padding, dilation=dilation, groups=groups,
                    layout=layout, weight_layout=weight_layout, padding_mode=padding_mode,
                    padding_value=padding_value)
    g = _batch_chunked(grad_out, "grad_out")
    w = _as_numpy(weight, "weight")
    dtype = np.result_type(g.dtype, w.dtype)
    shape = _geometry.check_shape4(input_shape, "input_shape")
    _gradient_geometry(g, shape, w.shape, "input_shape", "weight", keywords, dtype)
    if num_threads is not None:
        _threads.check_num_threads(num_threads)
    block = functools.partial(_backward_data_block, input_shape=shape,
                              keywords=dict(keywords, algo=algo), num_threads=num_threads)
    channel_axis, (h_axis, w_axis) = _axes(layout)
    out = _da.blockwise(block, _data_index(layout, "c", "h", "w"),
                        g, _data_index(layout, "k", "a", "b"),
                        _single_chunk(w), _weight_index(weight_layout, "kgrs"),
                        concatenate=True, dtype=dtype, meta=np.empty((0, 0, 0, 0), dtype),
                        new_axes={"c": shape[channel_axis], "h": shape[h_axis],
                                  "w": shape[w_axis]})
    return cast(Array, out)


def conv2d_backward_weight(grad_out: Any, x: Any, weight_shape: Sequence[int], *,
                           stride: int | Sequence[int] = 1, padding: Any = 0,
                           dilation: int | Sequence[int] = 1, groups: int = 1,
                           layout: str = "NCHW", weight_layout: str = "OIHW",
                           padding_mode: str = "zeros", padding_value: float = 0.0,
                           algo: str = "auto", num_threads: int | None = None,
                           split_every: int = 4) -> Array:
    """:func:`cconv.conv2d_backward_weight` of dask arrays: per batch chunk, then a tree sum.

    Parameters
    ----------
    grad_out : dask.array.Array or array_like
        Gradient of the convolution's output, in ``layout`` order.
    x : dask.array.Array or array_like
        The convolution's input; its batch chunks are aligned with ``grad_out``'s.
    weight_shape : sequence of 4 ints
        Shape of the weight in ``weight_layout`` order.
    stride, padding, dilation, groups, layout, weight_layout, padding_mode, padding_value, algo
        As in :func:`cconv.conv2d`.
    num_threads : int, optional
        Threads per task; default :func:`task_num_threads`.
    split_every : int
        How many partial sums one task of the reduction tree adds (>= 2).

    Returns
    -------
    dask.array.Array of shape ``weight_shape``
        One chunk; the per-chunk gradients are summed in float64 and rounded once to
        ``numpy.result_type(grad_out, x)``.
    """
    keywords = dict(stride=stride, padding=padding, dilation=dilation, groups=groups,
                    layout=layout, weight_layout=weight_layout, padding_mode=padding_mode,
                    padding_value=padding_value)
    g = _batch_chunked(grad_out, "grad_out")
    xd = _batch_chunked(x, "x")
    dtype = np.result_type(g.dtype, xd.dtype)
    shape = _geometry.check_shape4(weight_shape, "weight_shape")
    _gradient_geometry(g, xd.shape, shape, "x", "weight_shape", keywords, dtype)
    if num_threads is not None:
        _threads.check_num_threads(num_threads)
    split_every = _check_split_every(split_every)
    block = functools.partial(_backward_weight_block, weight_shape=shape,
                              keywords=dict(keywords, algo=algo), num_threads=num_threads)
    # One partial gradient per batch chunk along a new leading axis (indexed like the batch).
    partials = _da.blockwise(block, "nKGRS", g, _data_index(layout, "k", "a", "b"),
                            xd, _data_index(layout, "c", "h", "w"),
                            concatenate=True, dtype=dtype, meta=np.empty((0,) * 5, dtype),
                            adjust_chunks={"n": 1},
                            new_axes=dict(zip("KGRS", shape)))
    total = partials.sum(axis=0, dtype=np.float64, split_every=split_every)
    return cast(Array, total.astype(dtype))
