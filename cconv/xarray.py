"""Convolution of xarray DataArrays over two named spatial dimensions.

``import cconv`` does not import this module; ``import cconv.xarray`` needs xarray
(``pip install "cconv[xarray]"``).

:func:`conv2d` runs through ``xarray.apply_ufunc(..., dask="allowed")``:

* a NumPy-backed DataArray is convolved in memory by :func:`cconv.conv2d`;
* a dask-backed one by :func:`cconv.dask.conv2d`, lazily, so chunks along the spatial
  dimensions get the halos (and the boundary is added once, to the whole array) that
  ``dask="parallelized"`` could not give them; the result stays dask-backed.

Every dimension other than the two spatial ones and the channel dimension is a batch
dimension: its coordinates are kept.  The output's channel dimension is named
``out_channel_dim`` and has no coordinates.  A spatial dimension keeps its coordinates when
the output is as long as the input along it with stride 1 (``padding="same"``, or any padding
that keeps the size; output pixel ``i`` is then taken to sit at input pixel ``i``); otherwise
its coordinates are dropped.  Attributes are dropped (a convolution changes what the values
mean).
"""

from __future__ import annotations

from typing import Any, Hashable, Sequence

import numpy as np

try:
    import xarray as xr
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError('cconv.xarray needs xarray: pip install "cconv[xarray]"') from exc

from . import _geometry as _geometry_module
from . import functional as _functional_module

__all__ = ["conv2d"]

# cconv's internal modules carry no type hints; Any-typed aliases keep ``mypy --strict`` from
# flagging every call.
_functional: Any = _functional_module
_geometry: Any = _geometry_module


def _check_dims(da: xr.DataArray, dims: Sequence[Hashable], channel_dim: Hashable | None,
                out_channel_dim: Hashable | None) -> tuple[Hashable, Hashable]:
    """The two spatial dimensions, after checking every dimension argument against ``da``."""
    if isinstance(dims, str) or len(dims) != 2 or dims[0] == dims[1]:
        raise ValueError(f"dims must name two different dimensions, got {dims!r}")
    for name, value in (("dims", dims[0]), ("dims", dims[1]), ("channel_dim", channel_dim)):
        if value is not None and value not in da.dims:
            raise ValueError(f"{name}: {value!r} is not a dimension of the DataArray "
                             f"(dimensions {da.dims})")
    if channel_dim in dims:
        raise ValueError(f"channel_dim {channel_dim!r} is also one of dims {tuple(dims)}")
    if out_channel_dim is not None and (out_channel_dim in dims or (
            out_channel_dim in da.dims and out_channel_dim != channel_dim)):
        raise ValueError(f"out_channel_dim {out_channel_dim!r} is already a spatial or batch "
                         f"dimension of the DataArray (dimensions {da.dims})")
    return dims[0], dims[1]


def _apply(values: Any, weight: np.ndarray, bias: Any, *, has_channel: bool,
           has_out_channel: bool, layout: str, keywords: dict[str, Any]) -> Any:
    """The convolution of ``values`` (batch dims, then the core dims in ``layout`` order)."""
    core = 3 if has_channel else 2
    batch_shape = values.shape[:values.ndim - core]
    x = values.reshape((-1,) + values.shape[values.ndim - core:])
    channel_axis = 1 if layout == "NCHW" else 3
    if not has_channel:
        x = np.expand_dims(x, channel_axis) if isinstance(x, np.ndarray) else x[:, None]
    if isinstance(values, np.ndarray):
        y = _functional.conv2d(x, weight, bias, layout=layout, **keywords)
    else:
        from . import dask as cconv_dask  # only dask-backed arrays get here: dask is installed

        y = cconv_dask.conv2d(x, weight, bias, layout=layout, **keywords)
    if not has_out_channel:  # a single output channel and no name for it
        y = y[:, 0] if layout == "NCHW" else y[..., 0]
    return y.reshape(batch_shape + y.shape[1:])


def conv2d(da: xr.DataArray, weight: Any, bias: Any = None, *,
           dims: Sequence[Hashable] = ("y", "x"), channel_dim: Hashable | None = None,
           out_channel_dim: Hashable | None = None, stride: int | Sequence[int] = 1,
           padding: Any = 0, dilation: int | Sequence[int] = 1, groups: int = 1,
           weight_layout: str = "OIHW", padding_mode: str = "zeros",
           padding_value: float = 0.0, algo: str = "auto",
           num_threads: int | None = None) -> xr.DataArray:
    """:func:`cconv.conv2d` over the named dimensions ``dims`` of a DataArray.

    Parameters
    ----------
    da : xarray.DataArray
        NumPy- or dask-backed, floating point.  Dimensions other than ``dims`` and
        ``channel_dim`` are batch dimensions (any number, including none).
    weight : array_like
        (K, C/groups, R, S) for ``weight_layout="OIHW"`` or (R, S, C/groups, K) for
        ``"HWIO"``; C is 1 without ``channel_dim``.  Without ``channel_dim`` a 2-D (R, S)
        weight is a single filter.
    bias : array_like, optional
        (K,).
    dims : pair of dimension names
        The (height, width) dimensions.
    channel_dim : dimension name, optional
        The input's channel dimension; None for single-channel data.
    out_channel_dim : dimension name, optional
        Name of the output's channel dimension; default ``channel_dim``.  When both are None
        the weight must have one output channel, and the output has no channel dimension.
    stride, padding, dilation, groups, weight_layout, padding_mode, padding_value, algo,
    num_threads
        As in :func:`cconv.conv2d` (for dask-backed data, :func:`cconv.dask.conv2d`).  The
        data layout follows the DataArray: channels after both spatial dimensions are read
        as NHWC, otherwise as NCHW, without a transposed copy.

    Returns
    -------
    xarray.DataArray
        Batch dimensions and their coordinates as in ``da``, the output channel dimension in
        place of the input's (or before the spatial ones), and the spatial dimensions with
        the output's sizes; spatial coordinates kept only where the size is unchanged with
        stride 1 (see the module docstring).  Dask-backed input gives a dask-backed result.
    """
    if not isinstance(da, xr.DataArray):
        raise TypeError(f"da must be an xarray.DataArray, got {type(da).__name__}")
    y_dim, x_dim = _check_dims(da, dims, channel_dim, out_channel_dim)
    out_name = channel_dim if out_channel_dim is None else out_channel_dim
    w = np.asarray(_geometry.as_float_array(weight, "weight"))
    if w.ndim == 2 and channel_dim is None:
        w = w[np.newaxis, np.newaxis] if weight_layout == "OIHW" else w[:, :, None, None]
    if w.ndim != 4:
        raise ValueError(f"weight must be 4-D (or 2-D without channel_dim), got shape "
                         f"{w.shape}")
    spatial = [da.dims.index(y_dim), da.dims.index(x_dim)]
    channel_last = channel_dim is not None and da.dims.index(channel_dim) > max(spatial)
    layout = "NHWC" if channel_last else "NCHW"
    channels = 1 if channel_dim is None else da.sizes[channel_dim]
    x_shape = (1, channels, da.sizes[y_dim], da.sizes[x_dim])
    keywords: dict[str, Any] = dict(
        stride=stride, padding=padding, dilation=dilation, groups=groups,
        weight_layout=weight_layout, padding_mode=padding_mode, padding_value=padding_value,
        algo=algo, num_threads=num_threads)
    geom = _geometry.make_geometry(
        x_shape, w.shape, dtype=_geometry.compute_dtype(da.dtype, w.dtype),
        **{k: v for k, v in keywords.items() if k not in ("algo", "num_threads")})
    if out_name is None and geom.K != 1:
        raise ValueError(f"weight has {geom.K} output channels: name their dimension with "
                         f"out_channel_dim")
    core_in: list[Hashable] = [y_dim, x_dim]
    core_out: list[Hashable] = [y_dim, x_dim]
    if channel_dim is not None:
        core_in.insert(2 if channel_last else 0, channel_dim)
    if out_name is not None:
        core_out.insert(2 if channel_last else 0, out_name)
    excluded = {y_dim, x_dim} | ({channel_dim} if channel_dim is not None else set())
    result: xr.DataArray = xr.apply_ufunc(
        _apply, da, input_core_dims=[core_in], output_core_dims=[core_out],
        exclude_dims=excluded, dask="allowed", keep_attrs=False,
        kwargs=dict(weight=w, bias=bias, has_channel=channel_dim is not None,
                    has_out_channel=out_name is not None, layout=layout, keywords=keywords))
    kept = {dim for dim, size, out_size, step in ((y_dim, geom.H, geom.OH, geom.stride[0]),
                                                  (x_dim, geom.W, geom.OW, geom.stride[1]))
            if size == out_size and step == 1}
    for name, coord in da.coords.items():
        touched = set(coord.dims) & excluded
        if touched and touched <= kept:
            result = result.assign_coords({name: coord})
    return result.transpose(*_output_order(da.dims, channel_dim, out_name, (y_dim, x_dim)))


def _output_order(dims: Sequence[Hashable], channel_dim: Hashable | None,
                  out_name: Hashable | None, spatial: Sequence[Hashable]) -> list[Hashable]:
    """The input's dimension order with the output channel in place of the input's (or, when
    the input had none, just before the first spatial dimension)."""
    order = [d for d in dims if d != channel_dim or out_name == channel_dim]
    if out_name is None or out_name in order:
        return order
    if channel_dim is not None:
        order.insert(list(dims).index(channel_dim), out_name)
        return order
    order.insert(min(order.index(d) for d in spatial), out_name)
    return order
