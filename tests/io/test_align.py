"""Lazy alignment of a DEM pair onto one grid (xdem.io.grid.align_pair)."""

from __future__ import annotations

import numpy as np
import pytest
from affine import Affine
from helpers import count_computes

import xdem
from xdem.errors import OverlapError
from xdem.examples import example_pair
from xdem.io.grid import align_pair, get_transform, same_grid, with_transform


def _interior(a: np.ndarray, m: int = 10) -> np.ndarray:
    return a[m:-m, m:-m]


def test_same_grid_unchanged(lidar_dem):
    tba = lidar_dem + 1
    with count_computes() as c:
        r, t = align_pair(lidar_dem, tba)
    assert c.count == 0
    assert r is lidar_dem and t is tba


def test_pixel_aligned_offset_is_an_exact_crop(lidar_dem):
    t0 = get_transform(lidar_dem)
    # tba pixel (r, c) sits where the reference pixel (r + 7, c + 5) is.
    tba = with_transform(lidar_dem + 1, t0 * Affine.translation(5, 7))
    with count_computes() as c:
        r, t = align_pair(lidar_dem, tba)
    assert c.count == 0
    assert same_grid(r, t) and r.shape == t.shape == (393, 395)
    assert get_transform(r) == t0 * Affine.translation(5, 7)
    ref_np = lidar_dem.values
    np.testing.assert_array_equal(r.values, ref_np[7:, 5:])
    np.testing.assert_array_equal(t.values, ref_np[:-7, :-5] + np.float32(1))


def test_pixel_aligned_subset(lidar_dem):
    sub = lidar_dem.isel(y=slice(10, 300), x=slice(20, 390))
    r, t = align_pair(lidar_dem, sub)
    np.testing.assert_array_equal(r.values, lidar_dem.values[10:300, 20:390])
    np.testing.assert_array_equal(t.values, r.values)


def test_subpixel_offset_reprojected_lazily_close_to_truth():
    dx, dy = 0.4, -0.3
    ref, tba, _ = example_pair(mode="transform", shift_x=dx, shift_y=dy, shift_z=0.0, chunks=128)
    _, truth, _ = example_pair(mode="resample", shift_x=dx, shift_y=dy, shift_z=0.0)  # cubic spline
    with count_computes() as c:
        r, t = align_pair(ref, tba)
    assert c.count == 0
    assert same_grid(r, t)
    tv = t.values.astype(np.float64)
    # Compare with the spline-resampled truth on the reference grid, away from the edges.
    tr = truth.sel(x=r.x, y=r.y).values.astype(np.float64)
    diff = _interior(tv - tr)
    assert np.isfinite(diff).all()
    assert np.median(np.abs(diff)) < 0.02 and np.abs(diff).max() < 0.5
    # And it differs clearly from the unshifted reference (the shift matters).
    assert np.median(np.abs(_interior(tv - r.values))) > 5 * np.median(np.abs(diff))


def test_different_resolution(lidar_dem):
    fine = lidar_dem.values.astype(np.float64)
    coarse = fine.reshape(200, 2, 200, 2).mean(axis=(1, 3)).astype(np.float32)
    t0 = get_transform(lidar_dem)
    arr = lidar_dem.isel(y=slice(0, 200), x=slice(0, 200)).copy(data=coarse)
    tba = xdem.open_dem(with_transform(arr, t0 * Affine.scale(2)), chunks=64)
    with count_computes() as c:
        r, t = align_pair(lidar_dem, tba)
    assert c.count == 0
    assert same_grid(r, t) and r.shape[0] >= 398
    diff = _interior(t.values.astype(np.float64) - r.values)
    assert np.isfinite(diff).all()
    assert np.median(np.abs(diff)) < 0.15  # 2 m block means resampled to 1 m vs the 1 m truth
    assert abs(np.median(diff)) < 0.02  # no bias: the grids are registered correctly


def test_different_crs_roundtrip(lidar_dem):
    from rasterio.enums import Resampling

    moved = lidar_dem.compute().rio.reproject("EPSG:32615", resampling=Resampling.bilinear, nodata=np.nan)
    tba = xdem.open_dem(moved, chunks=100)
    assert tba.rio.crs.to_epsg() == 32615
    with count_computes() as c:
        r, t = align_pair(lidar_dem, tba)
    assert c.count == 0
    assert r.rio.crs == lidar_dem.rio.crs and same_grid(r, t)
    diff = _interior(t.values.astype(np.float64) - r.values, 15)
    valid = np.isfinite(diff)
    assert valid.mean() > 0.95
    assert np.median(np.abs(diff[valid])) < 0.1 and abs(np.median(diff[valid])) < 0.02


def test_non_overlapping_pair_raises(lidar_dem):
    far = with_transform(lidar_dem, Affine.translation(0, 5_000) * get_transform(lidar_dem))
    with pytest.raises(OverlapError, match="do not overlap"):
        align_pair(lidar_dem, far)
    other_crs = lidar_dem.compute().rio.reproject("EPSG:32615")
    other_far = with_transform(other_crs, Affine.translation(50_000, 0) * get_transform(other_crs))
    with pytest.raises(OverlapError, match="do not overlap"):
        align_pair(lidar_dem, xdem.open_dem(other_far))
    r, _ = align_pair(lidar_dem, xdem.open_dem(other_crs))  # same place, other CRS: fine
    assert r.shape[0] > 390
