"""cconv.xarray: values against the float64 reference, dimensions and coordinates of the
result, NumPy- and dask-backed DataArrays (chunked over the spatial dimensions too)."""

import os
import subprocess
import sys

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
pytest.importorskip("dask.array")

import cconv  # noqa: E402
import cconv.xarray as cx  # noqa: E402
from support.checks import assert_close  # noqa: E402
from support.reference import ref_conv2d, resolve_padding  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(cconv.__file__)))


def _field(seed=0, chunks=None):
    """(time, band, y, x) data with coordinates on every dimension and a 2-D coordinate."""
    rng = np.random.default_rng(seed)
    da = xr.DataArray(
        rng.standard_normal((3, 2, 12, 10)), dims=("time", "band", "y", "x"), name="t2m",
        coords={"time": [10, 20, 30], "band": ["r", "g"], "y": np.linspace(0, 1, 12),
                "x": np.arange(10) * 0.5, "lon": (("y", "x"), rng.standard_normal((12, 10))),
                "day": ("time", ["mon", "tue", "wed"])},
        attrs={"units": "K"})
    return da if chunks is None else da.chunk(chunks)


def _reference(values_nchw, w, b=None, **kw):
    pads = resolve_padding(kw.pop("padding", 0), values_nchw.shape[2:], w.shape[2:],
                           kw.get("stride", 1), kw.get("dilation", 1))
    return ref_conv2d(values_nchw, w, b, pads=pads, **kw)


WEIGHT = np.random.default_rng(1).standard_normal((4, 2, 3, 3))
BIAS = np.arange(4.0)


def test_channels_in_and_out_with_same_padding_keep_coordinates():
    da = _field()
    out = cx.conv2d(da, WEIGHT, BIAS, channel_dim="band", out_channel_dim="feature",
                    padding="same")
    assert out.dims == ("time", "feature", "y", "x")
    assert out.sizes == {"time": 3, "feature": 4, "y": 12, "x": 10}
    assert out.name == "t2m" and out.attrs == {}
    assert_close(out.values, _reference(da.values, WEIGHT, BIAS, padding="same"))
    for name in ("time", "day", "y", "x", "lon"):  # batch and unchanged spatial coordinates
        xr.testing.assert_identical(out[name], da[name])
    assert "band" not in out.coords and "feature" not in out.coords


def test_strided_output_drops_spatial_coordinates():
    da = _field()
    out = cx.conv2d(da, WEIGHT, channel_dim="band", stride=(2, 1), padding=1)
    assert out.dims == ("time", "band", "y", "x")  # out_channel_dim defaults to channel_dim
    assert out.sizes == {"time": 3, "band": 4, "y": 6, "x": 10}
    assert "y" not in out.coords and "lon" not in out.coords
    xr.testing.assert_identical(out["x"], da["x"])  # stride 1 and same size along x
    xr.testing.assert_identical(out["time"], da["time"])
    assert_close(out.values, _reference(da.values, WEIGHT, stride=(2, 1), padding=1))


def test_valid_padding_drops_both():
    out = cx.conv2d(_field(), WEIGHT, channel_dim="band", out_channel_dim="f")
    assert out.sizes["y"] == 10 and out.sizes["x"] == 8
    assert not {"y", "x", "lon"} & set(out.coords)


def test_single_channel_data_and_a_single_filter():
    da = _field().isel(band=0).transpose("y", "time", "x")  # batch dim between the spatial ones
    blur = np.full((3, 3), 1 / 9)
    out = cx.conv2d(da, blur, padding="same", padding_mode="reflect")
    assert out.dims == ("y", "time", "x")
    values = da.transpose("time", "y", "x").values[:, None]
    want = ref_conv2d(np.pad(values, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="reflect"),
                      blur[None, None])[:, 0]
    assert_close(out.transpose("time", "y", "x").values, want)
    xr.testing.assert_identical(out["band"], da["band"])  # the scalar coordinate stays


def test_new_channel_dimension_from_single_channel_data():
    da = _field().isel(band=0, drop=True)
    w = np.random.default_rng(2).standard_normal((5, 1, 2, 2))
    out = cx.conv2d(da, w, out_channel_dim="feature")
    assert out.dims == ("time", "feature", "y", "x")
    assert_close(out.values, _reference(da.values[:, None], w))
    with pytest.raises(ValueError, match="out_channel_dim"):
        cx.conv2d(da, w)  # five output channels need a name


def test_channel_last_data_is_read_as_nhwc():
    da = _field().transpose("time", "y", "x", "band")
    out = cx.conv2d(da, WEIGHT.transpose(2, 3, 1, 0), channel_dim="band",
                    out_channel_dim="feature", weight_layout="HWIO", padding=1)
    assert out.dims == ("time", "y", "x", "feature")
    assert_close(out.transpose("time", "feature", "y", "x").values,
                 _reference(_field().values, WEIGHT, padding=1))


def test_no_batch_dimension_and_several():
    da = _field()
    one = cx.conv2d(da.isel(time=0), WEIGHT, channel_dim="band", out_channel_dim="f")
    assert one.dims == ("f", "y", "x")
    assert_close(one.values, _reference(da.values[:1], WEIGHT)[0])
    many = da.expand_dims(member=2).copy()
    many[1] *= -1
    out = cx.conv2d(many, WEIGHT, channel_dim="band", out_channel_dim="f")
    assert out.dims == ("member", "time", "f", "y", "x")
    assert_close(out.values[1], -_reference(da.values, WEIGHT))


@pytest.mark.parametrize("kw", [dict(padding="same"), dict(stride=2, padding=1, dilation=2),
                                dict(padding=2, padding_mode="reflect")], ids=repr)
def test_dask_backed_chunked_over_space_equals_numpy_backed(kw):
    lazy = cx.conv2d(_field(chunks={"time": 2, "y": 5, "x": 4}), WEIGHT, BIAS,
                     channel_dim="band", out_channel_dim="feature", **kw)
    assert lazy.chunks is not None  # still dask-backed
    eager = cx.conv2d(_field(), WEIGHT, BIAS, channel_dim="band", out_channel_dim="feature", **kw)
    assert lazy.dims == eager.dims
    assert set(lazy.coords) == set(eager.coords)
    computed = lazy.compute(scheduler="threads")
    assert_close(computed.values, eager.values, rtol=1e-12)
    xr.testing.assert_identical(computed.coords.to_dataset(), eager.coords.to_dataset())


def test_dask_backed_without_channel_dim():
    da = _field().isel(band=1, drop=True)
    w = np.random.default_rng(3).standard_normal((3, 3))
    lazy = cx.conv2d(da.chunk({"y": 4, "x": 3}), w, padding="same")
    assert lazy.chunks is not None and lazy.dims == ("time", "y", "x")
    assert_close(lazy.compute(scheduler="threads").values,
                 _reference(da.values[:, None], w[None, None], padding="same")[:, 0])


def test_bad_arguments_name_themselves():
    da = _field()
    with pytest.raises(ValueError, match="dims: 'lat' is not a dimension"):
        cx.conv2d(da, WEIGHT, dims=("lat", "x"), channel_dim="band")
    with pytest.raises(ValueError, match="channel_dim"):
        cx.conv2d(da, WEIGHT, channel_dim="y")
    with pytest.raises(ValueError, match="out_channel_dim 'time'"):
        cx.conv2d(da, WEIGHT, channel_dim="band", out_channel_dim="time")
    with pytest.raises(ValueError, match="dims must name two"):
        cx.conv2d(da, WEIGHT, dims="yx", channel_dim="band")
    with pytest.raises(TypeError, match="da must be an xarray.DataArray"):
        cx.conv2d(da.values, WEIGHT)
    with pytest.raises(ValueError, match="weight"):
        cx.conv2d(da, WEIGHT[:, :1], channel_dim="band")  # 1 input channel per group, not 2


def test_import_is_lazy_and_a_missing_xarray_names_the_extra():
    code = ("import sys, cconv\n"
            "assert not {'cconv.xarray', 'xarray'} & set(sys.modules), 'imported eagerly'\n"
            "sys.modules['xarray'] = None\n"
            "try:\n    import cconv.xarray\nexcept ImportError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert 'pip install "cconv[xarray]"' in out.stdout
