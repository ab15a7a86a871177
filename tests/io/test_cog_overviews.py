"""The overviews :func:`xdem.write_cog` builds in its temporary GTiff before GDAL's COG copy
(:mod:`xdem.io._cog_overviews`): the levels and pixels GDAL's COG driver makes itself, with a
quarter less work."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import rasterio
import rasterio.shutil
import xarray as xr
from rasterio.transform import from_origin

import xdem.io._cog_overviews as ovr
from xdem.io import write_cog
from xdem.io._cog_overviews import cog_overview_factors

BLOCK = 128


def _terrain(shape: tuple[int, int], *, holes: bool) -> np.ndarray:
    rng = np.random.default_rng(4)
    y, x = np.mgrid[0 : shape[0], 0 : shape[1]].astype(np.float64)
    z = 800 + 40 * np.sin(x / 37.0) * np.cos(y / 23.0) + 0.05 * x + rng.normal(0, 0.3, shape)
    if holes:
        z[50:90, 200:260] = np.nan
        z[rng.random(shape) < 0.01] = np.nan
    return z.astype(np.float32)


def _dem(z: np.ndarray) -> xr.DataArray:
    t = from_origin(500000, 5200000, 5, 5)
    da = xr.DataArray(z, dims=("y", "x"), coords={"y": t.f + 5 * (np.arange(z.shape[0]) + 0.5) * t.e / 5,
                                                   "x": t.c + 5 * (np.arange(z.shape[1]) + 0.5)})
    da = da.rio.write_crs("EPSG:32633").rio.write_transform(t).rio.write_nodata(np.nan, encoded=False)
    return da.chunk({"y": 256, "x": 256})


def _driver_cog(z: np.ndarray, folder: Path) -> Path:
    """The same pixels copied by GDAL's COG driver from a plain uncompressed GTiff (it makes the overviews)."""
    plain, out = folder / "plain.tif", folder / "driver.tif"
    profile = dict(driver="GTiff", width=z.shape[1], height=z.shape[0], count=1, dtype="float32", nodata=-9999.0,
                   crs="EPSG:32633", transform=from_origin(500000, 5200000, 5, 5), tiled=True, blockxsize=BLOCK,
                   blockysize=BLOCK)
    with rasterio.open(plain, "w", **profile) as dst:
        dst.write(np.where(np.isnan(z), np.float32(-9999), z), 1)
    rasterio.shutil.copy(plain, out, driver="COG", COMPRESS="DEFLATE", PREDICTOR=3, BLOCKSIZE=BLOCK,
                         OVERVIEWS="AUTO", BIGTIFF="IF_SAFER")
    return out


def _levels(path: Path) -> list[np.ndarray]:
    with rasterio.open(path) as src:
        n = len(src.overviews(1))
    out = []
    for k in range(n):
        with rasterio.open(path, overview_level=k) as src:
            out.append(src.read(1))
    return out


@pytest.mark.parametrize("holes", [False, True])
def test_overviews_equal_the_cog_drivers_own_when_the_sides_divide(tmp_path, holes):
    z = _terrain((1024, 768), holes=holes)  # 1024 and 768 divide by 2, 4, 8 (levels down to 128 x 96)
    ours = write_cog(_dem(z), tmp_path / "ours.tif", blocksize=BLOCK)
    driver = _driver_cog(z, tmp_path)
    with rasterio.open(ours) as a, rasterio.open(driver) as b:
        assert a.overviews(1) == b.overviews(1) == [2, 4, 8]
        np.testing.assert_array_equal(a.read(1), b.read(1))
    mine, theirs = _levels(ours), _levels(driver)
    assert [m.shape for m in mine] == [(512, 384), (256, 192), (128, 96)]
    for m, t in zip(mine, theirs):
        np.testing.assert_array_equal(m, t)  # same resampling (cubic), same nodata handling: bit for bit


def test_overviews_are_gdaladdo_sizes_when_the_sides_do_not_divide(tmp_path):
    z = _terrain((1000, 770), holes=False)
    ours = write_cog(_dem(z), tmp_path / "ours.tif", blocksize=BLOCK)
    driver = _driver_cog(z, tmp_path)
    mine, theirs = _levels(ours), _levels(driver)
    # as many levels as the driver makes (halving until both sides fit one block)...
    assert len(mine) == len(theirs) == len(cog_overview_factors(770, 1000, BLOCK)) == 3
    # ...each ceil(side / factor) pixels (the driver rounds the halving down: 96 rows, not 97)
    assert [m.shape for m in mine] == [(500, 385), (250, 193), (125, 97)]
    assert [t.shape for t in theirs] == [(500, 385), (250, 192), (125, 96)]
    # where the sizes agree the pixels agree
    np.testing.assert_array_equal(mine[0], theirs[0])


def test_overviews_left_to_the_driver_for_a_compressed_temp(tmp_path, monkeypatch):
    seen = []
    real = ovr.build_overviews_with_progress
    monkeypatch.setattr(ovr, "build_overviews_with_progress", lambda *a, **k: seen.append(1) or real(*a, **k))
    z = _terrain((600, 600), holes=False)
    write_cog(_dem(z), tmp_path / "a.tif", blocksize=BLOCK)
    assert seen == [1]
    import xdem.io.cog as cog

    monkeypatch.setattr(cog, "TEMP_COMPRESS", "zstd")  # a compressed temp: the driver's smaller ZSTD file wins
    out = write_cog(_dem(z), tmp_path / "b.tif", blocksize=BLOCK)
    assert seen == [1]
    with rasterio.open(out) as src:
        assert src.overviews(1) == [2, 4, 8]


def test_overview_factors_follow_the_drivers_halving():
    assert cog_overview_factors(512, 512, 512) == []
    assert cog_overview_factors(513, 10, 512) == [2]
    assert cog_overview_factors(20000, 20000, 512) == [2, 4, 8, 16, 32, 64]  # 312 px at the last level
    assert cog_overview_factors(1025, 1025, 512) == [2]
