"""The rigid methods on points (issue 15, part 2): ICP, LZD and DhMinimize on a DEM-points pair,
either way round.

Truth: :func:`truth.rigid_dem_of` gives a DEM of :class:`truth.SineTerrain` moved by a known
rigid matrix ``M`` (rotations of tenths of a degree about the three axes, a translation of a few
metres), solved independently of the package; the points (the ground tracks of
``test_points``) are exact samples of the unmoved terrain. The transform to apply to the DEM is
``inv(M)``; to the points (``fit(dem, points)``), ``M``.

Tolerances: the issue's accuracy targets, measured where they matter: the largest horizontal
and vertical motion error over the points (a rotation error of 1e-4 degree moves a point 2.5
km from the centre by 4 mm). Exact points: horizontal 0.03 m, vertical 0.02 m; noisy points
(0.3 m noise, 3 % blunders of +-25 m): horizontal 0.08 m. Measured (LZD / ICP): exact points
below 1e-6 degree and 1e-4 m; noisy, rotations 1.6e-4 degree and translations 5 mm (motion
errors under 0.02 m at the points). DhMinimize (a translation) measured 1e-4 m exact, 0.045 m
noisy (the NMAD's minimum is flatter than a least-squares one).
"""

from __future__ import annotations

import dask
import geopandas as gpd
import numpy as np
import point_tracks as tp
import pytest
import xarray as xr
from helpers import count_computes
from reference import check_chunk_independence
from truth import rigid_dem_of

import xdem
from xdem.errors import NotEnoughDataError
from xdem.kernels.rigid import rigid_matrix, rotation_matrix

RIGID = (xdem.coreg.LZD, xdem.coreg.ICP)


@pytest.fixture(scope="module")
def pts() -> gpd.GeoDataFrame:
    return tp.track_gdf()


@pytest.fixture(scope="module")
def truth(pts: gpd.GeoDataFrame) -> np.ndarray:
    """The rigid matrix that moved the terrain into the DEM (about the points' middle)."""
    c = np.array([pts.geometry.x.mean(), pts.geometry.y.mean(), pts["h"].mean()])
    return rigid_matrix(rotation_matrix(0.1, -0.15, 0.3), np.array([3.3, -2.1, 1.5]), c)


def moved_dem(m: np.ndarray, chunks: int = 256) -> xr.DataArray:
    return rigid_dem_of(tp.TERRAIN, transform=tp.TRANSFORM, shape=(tp.SIZE, tp.SIZE), matrix=m, chunks=chunks)


@pytest.fixture(scope="module")
def dem(truth: np.ndarray) -> xr.DataArray:
    return moved_dem(truth)


def motion_errors(fitted: np.ndarray, expected: np.ndarray, pts: gpd.GeoDataFrame) -> tuple[float, float]:
    """Largest horizontal and vertical difference between the two transforms' images of the points."""
    p = np.column_stack([pts.geometry.x, pts.geometry.y, pts["h"], np.ones(len(pts))])
    d = p @ (fitted - expected).T
    return float(np.hypot(d[:, 0], d[:, 1]).max()), float(np.abs(d[:, 2]).max())


@pytest.mark.parametrize("cls", RIGID, ids=lambda c: c.__name__)
@pytest.mark.parametrize(("column", "tol_xy"), [("h", 0.03), ("h_noisy", 0.08)])
def test_rigid_points_both_ways(cls, column: str, tol_xy: float, pts, truth, dem) -> None:
    fwd = cls().fit(pts, dem, z_column=column)  # reference points: the DEM is moved back by inv(M)
    rev = cls().fit(dem, pts, z_column=column)  # points to align: moved onto the DEM by M
    for fitted, expected in ((fwd, np.linalg.inv(truth)), (rev, truth)):
        exy, ez = motion_errors(fitted.to_matrix(), expected, pts)
        assert exy <= tol_xy and ez <= 0.02, (cls.__name__, column, exy, ez)
        assert fitted.crs_ == tp.CRS and fitted.n_points_ == len(pts) and fitted.n_outside_ == 0
    if column == "h_noisy":  # every +-25 m blunder rejected, few of the noise points
        n_blunders = int(0.03 * len(pts))
        assert n_blunders <= fwd.n_outliers_ <= n_blunders + 0.005 * len(pts)
    # the reverse fit is the inverse of the forward one (same data, the other side moved)
    exy, ez = motion_errors(fwd.to_matrix() @ rev.to_matrix(), np.eye(4), pts)
    assert exy <= tol_xy and ez <= 0.02


@pytest.mark.parametrize("move", [tp.MOVES[0], tp.MOVES[2]], ids=["move1", "subpixel"])
def test_dhminimize_points_both_ways(move, pts) -> None:
    d = tp.shifted(move)
    for column, tol_xy in (("h", 0.03), ("h_noisy", 0.08)):
        fwd = xdem.coreg.DhMinimize().fit(pts, d, z_column=column)
        rev = xdem.coreg.DhMinimize().fit(d, pts, z_column=column)
        assert np.all(np.abs(np.add(fwd.to_translations(), move)[:2]) <= tol_xy), (column, fwd.to_translations())
        assert abs(fwd.shift_z_ + move[2]) <= 0.02
        np.testing.assert_allclose(rev.to_translations(), -np.array(fwd.to_translations()), atol=1e-12)
        assert fwd.converged_ and fwd.rotation_z_ == 0.0
    assert fwd.n_outliers_ >= int(0.03 * len(pts))


@pytest.mark.parametrize("cls", (*RIGID, xdem.coreg.DhMinimize), ids=lambda c: c.__name__)
def test_rigid_points_chunk_independent(cls, pts, truth) -> None:
    m = truth if cls is not xdem.coreg.DhMinimize else rigid_matrix(np.eye(3), np.array([4.2, -2.7, 1.0]), np.zeros(3))

    def fit(d: xr.DataArray) -> list[float]:
        f = cls().fit(pts, d, z_column="h_noisy")
        return [*np.ravel(f.to_matrix()), f.n_outliers_, f.n_iterations_]

    check_chunk_independence(fit, moved_dem(m), chunkings=(128, 333), schedulers=("threads", "sync"), atol=0.0)


def test_rigid_points_geographic_outside_and_lazy_apply(pts, truth, dem) -> None:
    far = pts.iloc[:300].copy()
    far["geometry"] = far.geometry.translate(20_000.0, 0.0)
    both = gpd.GeoDataFrame(np.concatenate([pts.to_numpy(), far.to_numpy()]), columns=pts.columns,
                            geometry="geometry", crs=tp.CRS).astype({"h": float, "h_noisy": float})
    lzd = xdem.coreg.LZD().fit(both.to_crs("EPSG:4326"), dem, z_column="h")
    assert lzd.n_outside_ == 300 and lzd.crs_ == tp.CRS
    assert motion_errors(lzd.to_matrix(), np.linalg.inv(truth), pts)[0] <= 0.03
    with count_computes() as cc:
        out = lzd.apply(dem)
    assert cc.count == 0 and isinstance(out.data, dask.array.Array)
    diff = (out - moved_dem(np.eye(4))).values[40:-40, 40:-40]
    assert np.nanmedian(np.abs(diff)) < 0.02
    icp = xdem.coreg.ICP().fit(dem, both, z_column="h")  # points to align, some off the DEM
    assert icp.n_outside_ == 300 and motion_errors(icp.to_matrix(), truth, pts)[0] <= 0.03


@pytest.mark.parametrize("cls", (*RIGID, xdem.coreg.DhMinimize), ids=lambda c: c.__name__)
def test_rigid_points_no_valid_pixels(cls, pts, dem) -> None:
    far = pts.copy()
    far["geometry"] = far.geometry.translate(20_000.0, 0.0)
    with pytest.raises(NotEnoughDataError, match="fall on valid DEM pixels|have the reference around them"):
        cls().fit(far, dem, z_column="h")


@pytest.mark.parametrize("cls", (*RIGID, xdem.coreg.DhMinimize), ids=lambda c: c.__name__)
def test_rigid_points_large_shift_and_initial_shift(cls, pts) -> None:
    """A shift of 15 pixels (60, -45) m, found from no start (DhMinimize: its search box moves
    on from its edge); ``initial_shift`` has the sign of the result whichever side the points
    are on: started at the answer, a fit takes fewer iterations than from no start (started
    at its negative, it takes more: measured LZD 3 / 5 / 6, ICP 2 / 5 / 7, DhMinimize 29 / 71 /
    93)."""
    move = (60.0, -45.0, 2.0)
    d = tp.shifted(move)
    for args, sign in (((pts, d), -1.0), ((d, pts), 1.0)):
        free = cls().fit(*args, z_column="h")
        given = cls(initial_shift=(sign * move[0], sign * move[1])).fit(*args, z_column="h")
        for f in (free, given):
            assert np.all(np.abs(np.subtract(f.to_translations(), np.multiply(sign, move))) <= 0.03), f.to_translations()
        assert given.n_iterations_ < free.n_iterations_


def test_lzd_fit_interpolation_on_points(pts, truth, dem) -> None:
    """The 8-point fit interpolation (10 x 10 windows) on the point route, both ways: the same
    tolerances as the default's (exact points: 0.03 m horizontally, 0.02 m vertically)."""
    for fitted, expected in ((xdem.coreg.LZD(fit_interpolation="lagrange8").fit(pts, dem, z_column="h"),
                              np.linalg.inv(truth)),
                             (xdem.coreg.LZD(fit_interpolation="lagrange8").fit(dem, pts, z_column="h"), truth)):
        exy, ez = motion_errors(fitted.to_matrix(), expected, pts)
        assert exy <= 0.03 and ez <= 0.02, (exy, ez)
