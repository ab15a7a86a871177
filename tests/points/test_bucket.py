"""Evaluating a DEM at points out of core (:mod:`xdem.points.bucket`): the pixel-centre
convention, exact values on the analytic terrain, points outside, one task per chunk holding
points, batches, chunk independence.

Truth: :class:`truth.SineTerrain` is exact anywhere, so points along ground tracks carry the
true elevation at their exact positions, and :func:`truth.dem_of` gives a DEM of the same
terrain moved by a known translation (the shift to apply to that DEM is its negative).
"""

from __future__ import annotations

import dask
import geopandas as gpd
import numpy as np
import xarray as xr
from helpers import MaxResult, count_computes
from point_tracks import RES, SIZE, X0, Y0
from reference import check_chunk_independence

from xdem.points import bucket_points, dem_at_points, pixel_positions, read_points


def test_pixel_centre_convention(dem0: xr.DataArray) -> None:
    rows, cols = np.array([0, 10, 999, 500]), np.array([0, 700, 3, 999])
    x = X0 + (cols + 0.5) * RES
    y = Y0 + SIZE * RES - (rows + 0.5) * RES
    prow, pcol = pixel_positions(dem0, x, y)
    np.testing.assert_array_equal(prow, rows)
    np.testing.assert_array_equal(pcol, cols)
    values, _, _ = dem_at_points(dem0.data, prow, pcol, resampling="lagrange")
    np.testing.assert_array_equal(values, dem0.values[rows, cols])  # exactly the pixel values


def test_dem_at_points_equals_terrain(dem0: xr.DataArray, track_points: gpd.GeoDataFrame) -> None:
    p = read_points(track_points, z_column="h")
    prow, pcol = pixel_positions(dem0, p.x, p.y)
    for resampling, tol in (("lagrange", 0.01), ("bilinear", 0.15)):
        values, _, _ = dem_at_points(dem0.data, prow, pcol, resampling=resampling)
        err = values - p.z
        assert np.isfinite(err).all()
        # float32 DEM values (~1e-4 m) plus the interpolation's error on waves >= 40 pixels
        assert np.abs(err).max() < tol, (resampling, np.abs(err).max())
    # half a pixel off (the classic mistake) is far worse: the test can tell
    bad, _, _ = dem_at_points(dem0.data, prow + 0.5, pcol + 0.5, resampling="lagrange")
    assert np.abs(bad - p.z).max() > 0.3


def test_points_outside_are_nan_and_counted(dem0: xr.DataArray) -> None:
    prow = np.array([-0.6, -0.5, 0.0, 998.9, 999.0, 1200.0, np.nan])
    pcol = np.full(len(prow), 10.0)
    values, _, tasks = dem_at_points(dem0.data, prow, pcol, resampling="bilinear")
    # rows -0.5 .. 0 and 999.0 have no neighbour to interpolate with: NaN, not extrapolated
    assert np.isfinite(values).tolist() == [False, False, True, True, True, False, False]
    assert tasks == 2  # only the chunks holding points (first and last row of chunks)


def test_bucketing_one_task_per_chunk_with_points(dem0: xr.DataArray, track_points: gpd.GeoDataFrame) -> None:
    p = read_points(track_points, z_column="h")
    prow, pcol = pixel_positions(dem0, p.x, p.y)
    buckets = bucket_points(dem0.data.chunks, prow, pcol)
    ids = np.concatenate([b.ids for b in buckets])
    assert sorted(ids.tolist()) == list(range(p.count))  # every point in exactly one bucket
    for b in buckets:
        r0, c0 = b.i * 256, b.j * 256
        assert ((np.floor(prow[b.ids]) >= r0) & (np.floor(prow[b.ids]) < r0 + 256)).all()
        assert ((np.floor(pcol[b.ids]) >= c0) & (np.floor(pcol[b.ids]) < c0 + 256)).all()
    with dask.config.set(scheduler="threads"), MaxResult() as mr, count_computes() as cc:
        _, win, tasks = dem_at_points(dem0.data, prow, pcol, resampling="lagrange", half=2)
    assert cc.count == 1 and tasks == len(buckets) <= 16
    # no task result beyond one chunk (256^2 float32 = 262 kB, one task's points' windows ~1 MB)
    assert mr.max_2d_bytes <= 256 * 256 * 8
    assert win is not None and np.isfinite(win).all()


def test_batches_give_the_same_values(dem0: xr.DataArray, track_points: gpd.GeoDataFrame) -> None:
    p = read_points(track_points, z_column="h")
    prow, pcol = pixel_positions(dem0, p.x, p.y)
    whole, _, _ = dem_at_points(dem0.data, prow, pcol, resampling="lagrange")
    with count_computes() as cc:
        parts, _, tasks = dem_at_points(dem0.data, prow, pcol, resampling="lagrange", batch_points=1000)
    np.testing.assert_array_equal(parts, whole)
    assert 1 < cc.count <= tasks  # whole buckets per compute: at least one bucket, about 1000 points


def test_dem_at_points_chunk_independent(dem0: xr.DataArray, track_points: gpd.GeoDataFrame) -> None:
    p = read_points(track_points.iloc[::7], z_column="h")

    def values(dem: xr.DataArray) -> dict[str, np.ndarray]:
        prow, pcol = pixel_positions(dem, p.x, p.y)
        data = dem.data if isinstance(dem.data, dask.array.Array) else dask.array.from_array(dem.data)
        v, w, _ = dem_at_points(data, prow, pcol, resampling="lagrange", half=2)
        assert w is not None
        return {"v": v, "w": w}

    check_chunk_independence(values, dem0, chunkings=(97, 300), schedulers=("threads",), atol=0.0)
