"""Data with known truth for the ports of upstream xdem 0.2.3's ``tests/test_coreg`` cases.

Upstream's cases run on a crop of its Longyearbyen DEMs (20 m pixels) and a glacier mask; that
data is not available offline. These helpers give the same situations on a 200 x 200 crop of
the bundled 1 m lidar DEM, built with upstream's own public functions, so the truth is known:

- :func:`translated` is upstream's ``ref.translate(dx, dy) + dz``: the same values on a grid
  moved by ``(dx, dy)``, plus ``dz`` (``apply_matrix(..., resample=False)``);
- :func:`moved` is upstream's ``apply_matrix(ref, matrix, centroid=(left, bottom, mean))``;
- :func:`glacier_pair` stands in for the Longyearbyen pair: a known translation, and a block of
  "glacier" that changed by metres, excluded by an inlier mask;
- :func:`points_of` is upstream's ``ref.to_pointcloud(data_column_name="z", subsample=n).ds``
  and :func:`values_at` its ``interp_points(..., as_array=True)`` (bilinear).

Shifts of upstream's cases are scaled from its 20 m pixels to our 1 m pixels (the same number
of pixels), so that their tolerances, stated in pixels (``ref.res[0]``), mean the same here.
"""

from __future__ import annotations

import functools

import geopandas as gpd
import numpy as np
import xarray as xr

import xdem
from xdem.coreg import apply_matrix, matrix_from_translations_rotations

#: Upstream's pixel size (Longyearbyen, metres) over ours: shifts in metres are divided by it.
UPSTREAM_RES = 20.0


@functools.lru_cache(maxsize=1)
def _crop() -> xdem.DEM:
    dem = xdem.DEM(xdem.examples.get_path("lidar"))
    b = dem.bounds
    return dem.crop((b.left, b.bottom, b.left + 200.0, b.bottom + 200.0))


def small_ref() -> xdem.DEM:
    """The 200 x 200 (1 m) south-west crop of the bundled lidar DEM, as upstream's ``xdem.DEM``."""
    return _crop()


def translated(dem: xdem.DEM, dx: float, dy: float, dz: float = 0.0) -> xdem.DEM:
    """Upstream's ``dem.translate(dx, dy) + dz``: same values, grid moved by ``(dx, dy)``."""
    return apply_matrix(dem, matrix_from_translations_rotations(dx, dy, dz), resample=False)


def corner_centroid(dem: xdem.DEM) -> tuple[float, float, float]:
    """The centroid upstream's rigid cases move the DEM about: ``(left, bottom, nanmean)``."""
    return dem.bounds.left, dem.bounds.bottom, float(np.nanmean(dem.data))


def moved(dem: xdem.DEM, shifts_rotations: tuple[float, ...]) -> xdem.DEM:
    """The DEM moved by ``matrix_from_translations_rotations(*shifts_rotations)`` about its
    corner centroid (resampled on its grid), as upstream's rigid cases build theirs."""
    matrix = matrix_from_translations_rotations(*shifts_rotations)
    return apply_matrix(dem, matrix, centroid=corner_centroid(dem))


def points_of(dem: xdem.DEM, n: int = 5000, seed: int = 42) -> gpd.GeoDataFrame:
    """``n`` random valid pixel centres of ``dem`` as points with a ``z`` column."""
    values = np.ma.filled(dem.data.astype(np.float64), np.nan)
    rows, cols = np.nonzero(np.isfinite(values))
    pick = np.random.default_rng(seed).choice(rows.size, size=min(n, rows.size), replace=False)
    r, c = rows[pick], cols[pick]
    x, y = dem.transform * (c + 0.5, r + 0.5)
    return gpd.GeoDataFrame(data={"z": values[r, c]}, geometry=gpd.points_from_xy(x, y), crs=dem.crs)


def values_at(dem: xdem.DEM, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Bilinear values of ``dem`` at the points ``(x, y)`` (NaN outside)."""
    da = dem.to_xarray().squeeze(drop=True)
    out = da.interp(x=xr.DataArray(np.asarray(x), dims="p"), y=xr.DataArray(np.asarray(y), dims="p"))
    return np.asarray(out.values, dtype=np.float64)


def point_dh(ref: xdem.DEM, points: gpd.GeoDataFrame) -> np.ndarray:
    """``ref - z`` at the points (upstream: ``ref.interp_points(...) - points["z"]``)."""
    return values_at(ref, points.geometry.x.values, points.geometry.y.values) - points["z"].to_numpy()


def raster_dh(ref: xdem.DEM, other: xdem.DEM) -> np.ndarray:
    """``ref - other`` on ``ref``'s grid as a float array with NaN for nodata."""
    diff = ref - other.reproject(ref)
    return np.ma.filled(diff.data.astype(np.float64), np.nan)


def glacier_pair(dx: float = 2.3, dy: float = -1.4, dz: float = 1.8,
                 change: float = -8.0) -> tuple[xdem.DEM, xdem.DEM, np.ndarray, tuple[float, float, float]]:
    """A stand-in for upstream's Longyearbyen pair: the crop, and a copy of it translated by
    ``(dx, dy, dz)`` (resampled onto the same grid) whose "glacier" (a 60 x 80 pixel block)
    changed by ``change`` metres on top. Returns ``(ref, tba, inlier_mask, truth)`` where the
    mask is False on the glacier and ``truth`` is the correction ``(-dx, -dy, -dz)``."""
    ref = small_ref()
    tba = apply_matrix(ref, matrix_from_translations_rotations(dx, dy, dz))
    glacier = np.zeros(ref.shape, dtype=bool)
    glacier[40:100, 90:170] = True
    tba = tba + np.where(glacier, change, 0.0)
    return ref, tba, ~glacier, (-dx, -dy, -dz)
