"""The sample types that feed an estimator's one fit code from either route: `PointSample`
(the points route's shared work: drawn points, `dh` there, counts, the "no points" error,
outliers, the sign for `points_are_ref`), `ShiftSample` (the shift family, `from_pair` /
`from_points`) and `RigidSample.from_points` (LZD).

Truth: a plane DEM ``z = 0.1 x - 0.05 y`` (exact under the fits' Lagrange interpolation) and
points on it at known positions, some outside the DEM; for `from_pair`, the bundled example
pair and the estimator's own fit on it.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import xdem
from xdem.coreg._data import PointFitData, prepare_pair
from xdem.coreg._point_sample import PointSample, ShiftSample, draw_points, reversed_history
from xdem.coreg._rigid_sample import RigidSample
from xdem.errors import NotEnoughDataError
from xdem.io.grid import grid_shape
from xdem.points import PointSet

CRS = "EPSG:32633"
N = 60  # pixels of 1 m


def _plane_dem() -> xr.DataArray:
    x = np.arange(N) + 0.5
    y = -(np.arange(N) + 0.5)
    z = 0.1 * x[None, :] - 0.05 * y[:, None]
    return xr.DataArray(da.from_array(z, chunks=20), dims=("y", "x"), coords={"y": y, "x": x}).rio.write_crs(CRS)


def _points(n_inside: int = 200, n_outside: int = 5, seed: int = 1) -> PointSet:
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.uniform(5, N - 5, n_inside), np.full(n_outside, 10 * N)])
    y = np.concatenate([-rng.uniform(5, N - 5, n_inside), np.full(n_outside, -5.0)])
    return PointSet(x, y, 0.1 * x - 0.05 * y + 1.0, crs=CRS)  # 1 m above the plane


def _Needs(count: int) -> type[xdem.coreg.NuthKaab]:
    """NuthKaab needing ``count`` points (the synthetic samples are small)."""
    return type("NuthKaabNeeding", (xdem.coreg.NuthKaab,), {"_min_points": count})


def _data(points_are_ref: bool, outlier_nmad: float | None = 4.0, points: PointSet | None = None) -> PointFitData:
    dem = _plane_dem()
    return PointFitData(dem=dem, values=dem.data, points=_points() if points is None else points,
                        points_are_ref=points_are_ref, outlier_nmad=outlier_nmad)


def test_draw_points_is_reproducible_and_keeps_order():
    pts = _points()
    a, b = draw_points(pts, 50, 7), draw_points(pts, 50, 7)
    assert a.count == 50 and np.array_equal(a.x, b.x)
    order = np.searchsorted(pts.x, a.x, sorter=np.argsort(pts.x))
    assert np.all(np.diff(np.argsort(pts.x)[order]) > 0)  # input order kept
    assert draw_points(pts, 1.0, None) is pts


@pytest.mark.parametrize("points_are_ref", [True, False])
def test_dh_sign_follows_the_side_of_the_points(points_are_ref):
    ps = PointSample.from_points(_data(points_are_ref), subsample=1.0, random_state=None, what="Demo")
    dh, fin = ps.dh(need=10)
    expected = -1.0 if points_are_ref else 1.0  # dh = tba - ref, the points 1 m above the DEM
    np.testing.assert_allclose(dh[fin], expected, atol=1e-9)
    assert ps.sign == (1.0 if points_are_ref else -1.0)


def test_counts_of_points_outside_and_outliers():
    pts = _points()
    z = pts.z.copy()
    z[:3] += 50.0  # three blunders
    ps = PointSample.from_points(_data(True, points=PointSet(pts.x, pts.y, z, crs=CRS)), subsample=1.0,
                                 random_state=None, what="Demo")
    dh, fin = ps.dh(need=10)
    ok = ps.inliers(dh, fin)
    assert ps.has_outliers(fin, ok)
    assert ps.counts(fin, ok) == {"n_points_": 205, "n_outside_": 5, "n_outliers_": 3}


def test_without_outlier_nmad_every_finite_point_is_an_inlier():
    ps = PointSample.from_points(_data(True, outlier_nmad=None), subsample=1.0, random_state=None, what="Demo")
    dh, fin = ps.dh(need=10)
    ok = ps.inliers(dh, fin)
    assert ok is fin and not ps.has_outliers(fin, ok)


def test_too_few_points_on_the_dem_is_a_clear_error():
    ps = PointSample.from_points(_data(True), subsample=1.0, random_state=None, what="Demo")
    with pytest.raises(NotEnoughDataError, match=r"Demo: only 200 of 205 points fall on valid DEM pixels "
                                                 r"\(need 500\); check that the points overlap the DEM"):
        ps.dh(need=500)


def test_centre_is_that_of_the_finite_points():
    pts = _points(n_outside=0)
    z = pts.z.copy()
    z[0] = np.nan
    ps = PointSample.from_points(_data(True, points=PointSet(pts.x, pts.y, z, crs=CRS)), subsample=1.0,
                                 random_state=None, what="Demo")
    np.testing.assert_array_equal(ps.centre(), [pts.x[1:].mean(), pts.y[1:].mean(), z[1:].mean()])


def test_reversed_history_negates_each_shift():
    assert reversed_history([[1.0, -2.0], [0.5, 0.0]]) == [[-1.0, 2.0], [-0.5, -0.0]]


@pytest.mark.parametrize("points_are_ref", [True, False])
def test_shift_sample_from_points_has_what_the_shift_estimators_need(points_are_ref):
    data = _data(points_are_ref)
    nk = _Needs(10)(initial_shift=(2.0, -1.0))  # a small synthetic sample
    ss = ShiftSample.from_points(data, nk, what="Nuth & Kääb")
    assert ss.points is not None
    sign = 1.0 if points_are_ref else -1.0
    assert ss.start == (sign * 2.0, sign * -1.0)  # the DEM is the side moved
    np.testing.assert_array_equal(ss.ref, ss.points.points.z)
    np.testing.assert_array_equal(ss.x, ss.points.points.x)
    inside = np.isfinite(ss.sampler(*ss.start))
    assert int(inside.sum()) == 200
    np.testing.assert_allclose(np.tan(np.radians(ss.slope[inside])), np.hypot(0.1, 0.05), rtol=1e-6)  # float32 terrain
    assert ss.passes == 1 and ss.rows is None and ss.grid is data.dem


def test_shift_sample_from_points_needs_enough_points():
    with pytest.raises(NotEnoughDataError, match=r"Nuth & Kääb: only 200 of 205 points .*need 201"):
        ShiftSample.from_points(_data(True), _Needs(201)(), what="Nuth & Kääb")


def test_shift_sample_from_pair_feeds_the_same_fit_as_nuth_kaab():
    ref, tba, _ = xdem.examples.example_pair(mode="transform")
    nk = xdem.coreg.NuthKaab(subsample=20_000, random_state=3).fit(ref, tba)
    data = prepare_pair(ref, tba)
    again = xdem.coreg.NuthKaab(subsample=20_000, random_state=3)
    ss = ShiftSample.from_pair(data, again, what="Nuth & Kääb")
    assert ss.rows is not None and ss.points is None
    again._fit_on_sample(ss.ref, ss.slope, ss.aspect, ss.sampler, resolution=ss.resolution,
                         shape=grid_shape(ss.grid), start=ss.start)
    assert (again.shift_x_, again.shift_y_, again.shift_z_) == (nk.shift_x_, nk.shift_y_, nk.shift_z_)
    assert ss.passes == nk.passes_


def test_rigid_sample_from_points_has_the_moved_dem_gradient():
    ps = PointSample.from_points(_data(True), subsample=1.0, random_state=None, what="LZD")
    ss = RigidSample.from_points(ps, start=np.eye(4), min_count=10, half=2)
    inside = np.isfinite(ss.gx)
    assert int(inside.sum()) == 200
    np.testing.assert_allclose(ss.gx[inside], 0.1, atol=1e-5)  # float32 windows
    np.testing.assert_allclose(ss.gy[inside], -0.05, atol=1e-5)
    np.testing.assert_array_equal(ss.ref, ps.points.z)
    with pytest.raises(NotEnoughDataError, match="LZD: only 200 of 205 points"):
        RigidSample.from_points(ps, start=np.eye(4), min_count=201, half=2)
