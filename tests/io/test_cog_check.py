"""xdem.io._cog_check.cog_layout_errors against rio_cogeo's cog_validate (GDAL's rules), the
check the COG writer used before, on valid COGs and on GeoTIFFs breaking each kind of rule."""

from __future__ import annotations

import numpy as np
import pytest
import rasterio
import rasterio.shutil
from rasterio.enums import Resampling
from rasterio.transform import from_origin
from rio_cogeo.cogeo import cog_validate

from xdem.io._cog_check import cog_layout_errors

SIDE = 1100  # above 512 (the tiling rule) and not a multiple of the 256-pixel blocks


def _plain(path, **options) -> str:
    profile = dict(driver="GTiff", width=SIDE, height=SIDE - 60, count=1, dtype="float32", crs="EPSG:32633",
                   transform=from_origin(0, 0, 1, 1), nodata=-9999.0, **options)
    values = np.arange(SIDE * (SIDE - 60), dtype=np.float32).reshape(1, SIDE - 60, SIDE)
    values[:, :300, :300] = -9999.0  # a nodata corner: sparse files store no block there
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(values)
    return str(path)


def _with_overviews(path, *, external: bool = False, **options) -> str:
    _plain(path, **options)
    with rasterio.Env(TIFF_USE_OVR=external), rasterio.open(path, "r+") as dst:
        dst.build_overviews([2, 4], Resampling.average)  # added after the data: IFDs at the end
    return str(path)


CASES = {
    "cog": lambda p: rasterio.shutil.copy(_plain(p.with_suffix(".src.tif")), p, driver="COG", BLOCKSIZE=256) or str(p),
    "cog_sparse": lambda p: rasterio.shutil.copy(_plain(p.with_suffix(".src.tif")), p, driver="COG", BLOCKSIZE=256,
                                                 SPARSE_OK=True) or str(p),
    "cog_no_overviews": lambda p: rasterio.shutil.copy(_plain(p.with_suffix(".src.tif")), p, driver="COG",
                                                       OVERVIEWS="NONE") or str(p),
    "striped": lambda p: _plain(p),
    "tiled": lambda p: _plain(p, tiled=True, blockxsize=256, blockysize=256),
    "tiled_overviews_after": lambda p: _with_overviews(p, tiled=True, blockxsize=256, blockysize=256),
    "striped_overviews_after": lambda p: _with_overviews(p),
    "external_ovr": lambda p: _with_overviews(p, external=True, tiled=True, blockxsize=256, blockysize=256),
    "envi": lambda p: rasterio.shutil.copy(_plain(p.with_suffix(".src.tif")), p.with_suffix(".img"),
                                           driver="ENVI") or str(p.with_suffix(".img")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_cog_layout_errors_agree_with_rio_cogeo(tmp_path, case):
    path = CASES[case](tmp_path / f"{case}.tif")
    valid, expected, _ = cog_validate(path, quiet=True)
    got = cog_layout_errors(path)
    assert (not got) == valid
    assert len(got) == len(expected), (got, expected)
    if case.startswith("cog"):
        assert got == []
    elif case != "tiled":  # a tiled GTiff written in one go may keep its IFD first: a COG without overviews
        assert got
