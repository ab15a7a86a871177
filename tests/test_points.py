"""Point-cloud references (issue 15): reading points, evaluating a DEM at them out of core,
and fitting VerticalShift / NuthKaab on a DEM-points pair, either way round.

Truth: :class:`truth.SineTerrain` is exact anywhere, so points along ground tracks carry the
true elevation at their exact positions, and :func:`truth.dem_of` gives a DEM of the same
terrain moved by a known translation (the shift to apply to that DEM is its negative).

Tolerances: the DEM (5 m pixels) is evaluated at the points by 4-point Lagrange interpolation;
on this terrain (wavelengths >= 200 m = 40 pixels) its error is millimetres, and the accuracy
targets of the issue (horizontal 0.03 m exact / 0.08 m noisy, vertical 0.02 m) are what the
fits are held to.
"""

from __future__ import annotations

import importlib.util

import dask
import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from affine import Affine
from helpers import MaxResult, count_computes
from reference import check_chunk_independence
from truth import SineTerrain, dem_of

import xdem
from xdem.errors import InputError, NotEnoughDataError, ReadError
from xdem.kernels.robust import nmad_inliers
from xdem.points import PointSet, bucket_points, dem_at_points, is_points_source, pixel_positions, read_points

CRS = "EPSG:32633"
X0, Y0 = 500_000.0, 4_000_000.0
RES = 5.0
SIZE = 1000  # 5 km
TRANSFORM = Affine(RES, 0.0, X0, 0.0, -RES, Y0 + SIZE * RES)
TERRAIN = SineTerrain(crs=CRS, origin=(X0, Y0))


def tracks(n_tracks: int = 12, beams: int = 3, spacing: float = 19.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Twelve 3-beam ground tracks crossing the 5 km DEM: near north-south lines (headings
    within 15 degrees), beams 90 m apart across track, a point every ``spacing`` metres:
    about 9000 points, all strictly inside the DEM."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    along = np.arange(60.0, SIZE * RES - 60.0, spacing)
    for k in range(n_tracks):
        heading = np.radians(rng.uniform(-15.0, 15.0))
        cx = X0 + (k + 0.5) * SIZE * RES / n_tracks
        for b in range(beams):
            off = (b - 1) * 90.0
            t = along - SIZE * RES / 2
            x = cx + off * np.cos(heading) + t * np.sin(heading)
            y = Y0 + SIZE * RES / 2 - off * np.sin(heading) + t * np.cos(heading)
            keep = (x > X0 + 30) & (x < X0 + SIZE * RES - 30)
            xs.append(x[keep])
            ys.append(y[keep])
    return np.concatenate(xs), np.concatenate(ys)


def noisy(z: np.ndarray, seed: int = 1) -> np.ndarray:
    """``z`` + N(0, 0.3 m), and 3 % blunders of +-25 m."""
    rng = np.random.default_rng(seed)
    out = z + rng.normal(0.0, 0.3, len(z))
    idx = rng.choice(len(z), size=int(0.03 * len(z)), replace=False)
    out[idx] += rng.choice([-25.0, 25.0], size=len(idx))
    return out


@pytest.fixture(scope="module")
def track_points() -> gpd.GeoDataFrame:
    x, y = tracks()
    z = TERRAIN(x, y)
    return gpd.GeoDataFrame({"h": z, "h_noisy": noisy(z)}, geometry=gpd.points_from_xy(x, y), crs=CRS)


def track_gdf() -> gpd.GeoDataFrame:
    """The tracks' points as a GeoDataFrame: ``h`` exact, ``h_noisy`` the noisy copy."""
    x, y = tracks()
    z = TERRAIN(x, y)
    return gpd.GeoDataFrame({"h": z, "h_noisy": noisy(z)}, geometry=gpd.points_from_xy(x, y), crs=CRS)


def shifted(move: tuple[float, float, float], chunks: int = 256) -> xr.DataArray:
    return dem_of(TERRAIN, crs=CRS, transform=TRANSFORM, shape=(SIZE, SIZE), move=move, chunks=chunks)


@pytest.fixture(scope="module")
def dem0() -> xr.DataArray:
    return shifted((0.0, 0.0, 0.0))


MOVES = [(7.3, -4.1, 2.0), (-11.6, 8.45, -3.5), (0.6, 1.3, 0.25)]


@pytest.fixture(scope="module", params=MOVES, ids=["move1", "move2", "subpixel"])
def moved(request: pytest.FixtureRequest) -> tuple[xr.DataArray, tuple[float, float, float]]:
    return shifted(request.param), request.param


# --- reading ---------------------------------------------------------------------------------
def test_track_geometry(track_points: gpd.GeoDataFrame) -> None:
    assert 8500 <= len(track_points) <= 9500


def test_read_geodataframe_z_column_and_crs(track_points: gpd.GeoDataFrame) -> None:
    p = read_points(track_points, z_column="h")
    assert p.count == len(track_points) and p.crs == CRS and p.source_crs == CRS
    np.testing.assert_array_equal(p.z, track_points["h"].to_numpy())
    g = read_points(track_points.to_crs("EPSG:4326"), z_column="h", crs=CRS)
    assert g.source_crs == "EPSG:4326" and g.crs == CRS
    np.testing.assert_allclose(g.x, p.x, atol=1e-6)
    np.testing.assert_allclose(g.y, p.y, atol=1e-6)


def test_read_3d_geometries_and_missing_z() -> None:
    gdf = gpd.GeoDataFrame(geometry=gpd.points_from_xy([1.0], [2.0], [3.5]), crs=CRS)
    assert read_points(gdf).z.tolist() == [3.5]
    flat = gpd.GeoDataFrame({"other": [1.0]}, geometry=gpd.points_from_xy([1.0], [2.0]), crs=CRS)
    with pytest.raises(InputError, match="z_column"):
        read_points(flat)
    with pytest.raises(InputError, match="no column 'h'"):
        read_points(flat, z_column="h")


def test_read_files(tmp_path, track_points: gpd.GeoDataFrame) -> None:
    gpkg = tmp_path / "tracks.gpkg"
    track_points.iloc[:50].to_file(gpkg)
    p = read_points(gpkg, z_column="h")
    assert p.count == 50 and p.name == str(gpkg) and p.crs == CRS
    np.testing.assert_allclose(p.z, track_points["h"].to_numpy()[:50])
    csv = tmp_path / "tracks.csv"
    pd.DataFrame({"x": p.x, "y": p.y, "elev": p.z}).to_csv(csv, index=False)
    c = read_points(csv, z_column="elev", source_crs=CRS)
    np.testing.assert_allclose(c.z, p.z)
    np.testing.assert_allclose(c.x, p.x)
    with pytest.raises(xdem.errors.CRSError, match="source_crs"):
        read_points(csv, z_column="elev")
    with pytest.raises(ReadError, match="not found"):
        read_points(tmp_path / "missing.gpkg")


def test_large_files_read_in_batches(tmp_path, monkeypatch, track_points: gpd.GeoDataFrame) -> None:
    import xdem.points.read as reader

    monkeypatch.setattr(reader, "BATCH_ROWS", 1000)  # 9 batches of the ~8900 points
    gpkg, csv = tmp_path / "tracks.gpkg", tmp_path / "tracks.csv"
    track_points.to_file(gpkg)
    p = read_points(gpkg, z_column="h_noisy")
    np.testing.assert_array_equal(p.z, track_points["h_noisy"].to_numpy())
    np.testing.assert_array_equal(p.x, track_points.geometry.x.to_numpy())
    pd.DataFrame({"x": p.x, "y": p.y, "z": p.z}).to_csv(csv, index=False)
    c = read_points(csv, source_crs=CRS)
    assert c.count == p.count
    np.testing.assert_allclose(c.y, p.y, rtol=1e-15)


def test_optional_readers_name_their_package(tmp_path) -> None:
    for suffix, module in ((".parquet", "pyarrow"), (".laz", "laspy")):
        path = tmp_path / f"points{suffix}"
        path.write_bytes(b"not a real file")
        if importlib.util.find_spec(module) is None:
            with pytest.raises(InputError, match=f"pip install {module}"):
                read_points(path)
        else:  # installed: a corrupt file is one clear error
            with pytest.raises(ReadError, match="cannot read points"):
                read_points(path)


def test_is_points_source(track_points: gpd.GeoDataFrame) -> None:
    assert is_points_source(track_points) and is_points_source("a.LAZ") and is_points_source("a.csv")
    assert not is_points_source("dem.tif") and not is_points_source(np.zeros(3))


# --- the DEM at points ------------------------------------------------------------------------
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


def test_nmad_inliers_rejects_blunders() -> None:
    rng = np.random.default_rng(0)
    v = rng.normal(0.0, 0.3, 1000)
    v[:30] += 25.0
    v[30:40] = np.nan
    ok = nmad_inliers(v, k=4.0)
    assert not ok[:40].any()
    assert ok[40:].mean() > 0.99


# --- fitting ----------------------------------------------------------------------------------
def test_nuth_kaab_exact_points(moved, track_points: gpd.GeoDataFrame) -> None:
    dem, (dx, dy, dz) = moved
    nk = xdem.coreg.NuthKaab().fit(track_points, dem, z_column="h")
    assert abs(nk.shift_x_ + dx) <= 0.03 and abs(nk.shift_y_ + dy) <= 0.03, (nk.shift_x_, nk.shift_y_)
    assert abs(nk.shift_z_ + dz) <= 0.02, nk.shift_z_
    assert nk.converged_ and nk.n_points_ == len(track_points) and nk.n_outside_ == 0
    assert nk.crs_ == CRS


def test_nuth_kaab_noisy_points(moved, track_points: gpd.GeoDataFrame) -> None:
    dem, (dx, dy, dz) = moved
    nk = xdem.coreg.NuthKaab().fit(track_points, dem, z_column="h_noisy")
    assert abs(nk.shift_x_ + dx) <= 0.08 and abs(nk.shift_y_ + dy) <= 0.08, (nk.shift_x_, nk.shift_y_)
    assert abs(nk.shift_z_ + dz) <= 0.02, nk.shift_z_
    n_blunders = int(0.03 * len(track_points))
    # every +-25 m blunder is rejected, and few of the 0.3 m noise points (4 NMAD: ~0.01 %)
    assert n_blunders <= nk.n_outliers_ <= n_blunders + 0.005 * len(track_points)


def test_reverse_pair_and_apply_points(track_points: gpd.GeoDataFrame) -> None:
    dx, dy, dz = MOVES[0]
    dem = shifted(MOVES[0])
    fwd = xdem.coreg.NuthKaab().fit(track_points, dem, z_column="h")
    rev = xdem.coreg.NuthKaab().fit(dem, track_points, z_column="h")
    assert abs(rev.shift_x_ - dx) <= 0.03 and abs(rev.shift_y_ - dy) <= 0.03 and abs(rev.shift_z_ - dz) <= 0.02
    np.testing.assert_allclose(rev.to_translations(), -np.array(fwd.to_translations()), atol=1e-12)
    # the reverse fit moves the points onto the DEM (exactly, apply_points)
    moved_pts = rev.apply_points(track_points, z_name="h")
    p = read_points(moved_pts, z_column="h")
    values, _, _ = dem_at_points(dem.data, *pixel_positions(dem, p.x, p.y), resampling="lagrange")
    assert np.nanmax(np.abs(values - p.z)) < 0.05
    assert np.median(np.abs(values - p.z)) < 0.01


def test_geographic_points_utm_dem(moved, track_points: gpd.GeoDataFrame) -> None:
    dem, (dx, dy, dz) = moved
    nk = xdem.coreg.NuthKaab().fit(track_points.to_crs("EPSG:4326"), dem, z_column="h")
    assert abs(nk.shift_x_ + dx) <= 0.03 and abs(nk.shift_y_ + dy) <= 0.03 and abs(nk.shift_z_ + dz) <= 0.02
    assert nk.crs_ == CRS  # the frame is the DEM's CRS


def test_vertical_shift_points(track_points: gpd.GeoDataFrame) -> None:
    dem = shifted((0.0, 0.0, 3.25))
    for column in ("h", "h_noisy"):
        vs = xdem.coreg.VerticalShift().fit(track_points, dem, z_column=column)
        assert abs(vs.shift_z_ + 3.25) <= 0.02, (column, vs.shift_z_)
        rev = xdem.coreg.VerticalShift().fit(dem, track_points, z_column=column)
        assert rev.shift_z_ == pytest.approx(-vs.shift_z_, abs=1e-12)
    assert vs.n_outliers_ >= int(0.03 * len(track_points))
    assert vs.count_ == len(track_points) - vs.n_outliers_


def test_deramp_points(track_points: gpd.GeoDataFrame) -> None:
    tilt = (2e-4, -1e-4)  # 0.2 m/km east, -0.1 m/km north: a 1.5 m ramp across the DEM
    dem = dem_of(TERRAIN, crs=CRS, transform=TRANSFORM, shape=(SIZE, SIZE), tilt=tilt, move=(0.0, 0.0, 0.7),
                 chunks=256)
    for column, tol in (("h", 1e-6), ("h_noisy", 2e-5)):
        dr = xdem.coreg.Deramp(poly_order=1).fit(track_points, dem, z_column=column)
        slope_x, slope_y = dr.coefs_[1] / dr.scale_, dr.coefs_[2] / dr.scale_
        assert abs(slope_x - tilt[0]) <= tol and abs(slope_y - tilt[1]) <= tol, (column, slope_x, slope_y)
        # the surface at the terrain origin is the vertical offset (the plane is 0 there)
        assert abs(float(dr.surface(np.array([X0]), np.array([Y0]))[0]) - 0.7) <= 0.02
        # reverse: the same surface (dh = tba - ref, no horizontal motion), minus: it is removed from the points
        rev = xdem.coreg.Deramp(poly_order=1).fit(dem, track_points, z_column=column)
        np.testing.assert_allclose(rev.coefs_, -dr.coefs_, atol=1e-9)
    assert dr.n_outliers_ >= int(0.03 * len(track_points))
    flat = dr.apply(dem)  # lazy, as for two DEMs
    assert np.nanmax(np.abs((flat - shifted((0.0, 0.0, 0.0))).values)) < 0.05


def test_pipeline_on_points(track_points: gpd.GeoDataFrame) -> None:
    tilt = (1e-4, 5e-5)
    dx, dy, dz = MOVES[1]
    dem = dem_of(TERRAIN, crs=CRS, transform=TRANSFORM, shape=(SIZE, SIZE), tilt=tilt, move=MOVES[1], chunks=256)
    pipe = (xdem.coreg.NuthKaab() + xdem.coreg.Deramp(poly_order=1)).fit(track_points, dem, z_column="h_noisy")
    nk, dr = pipe.steps
    # the tilt biases Nuth & Kääb's first step a little; the ramp is then found on the shifted DEM
    assert abs(nk.shift_x_ + dx) <= 0.3 and abs(nk.shift_y_ + dy) <= 0.3
    assert abs(dr.coefs_[1] / dr.scale_ - tilt[0]) <= 2e-5 and abs(dr.coefs_[2] / dr.scale_ - tilt[1]) <= 2e-5
    with count_computes() as cc:
        out = pipe.apply(dem)
    assert cc.count == 0
    diff = (out - shifted((0.0, 0.0, 0.0))).values[20:-20, 20:-20]
    assert np.nanmedian(np.abs(diff)) < 0.1
    # points to align: the pipeline moves them onto the DEM
    rev = (xdem.coreg.NuthKaab() + xdem.coreg.Deramp(poly_order=1)).fit(dem, track_points, z_column="h")
    p = read_points(rev.apply_points(track_points, z_name="h"), z_column="h")
    values, _, _ = dem_at_points(dem.data, *pixel_positions(dem, p.x, p.y), resampling="lagrange")
    assert np.median(np.abs(values - p.z)) < 0.05


def test_nuth_kaab_deramp_points(track_points: gpd.GeoDataFrame) -> None:
    tilt = (1e-4, 5e-5)  # 0.1 m/km east, 0.05 m/km north
    dx, dy, dz = MOVES[0]
    dem = dem_of(TERRAIN, crs=CRS, transform=TRANSFORM, shape=(SIZE, SIZE), tilt=tilt, move=MOVES[0], chunks=256)
    for column, tol_xy in (("h", 0.03), ("h_noisy", 0.08)):
        nkd = xdem.coreg.NuthKaabDeramp().fit(track_points, dem, z_column=column)
        assert abs(nkd.shift_x_ + dx) <= tol_xy and abs(nkd.shift_y_ + dy) <= tol_xy, (column, nkd.shift_x_, nkd.shift_y_)
        slope_x, slope_y = nkd.coefs_[1] / nkd.scale_, nkd.coefs_[2] / nkd.scale_
        assert abs(slope_x - tilt[0]) <= 1e-5 and abs(slope_y - tilt[1]) <= 1e-5, (column, slope_x, slope_y)
    assert nkd.n_outliers_ >= int(0.03 * len(track_points))
    diff = (nkd.apply(dem) - shifted((0.0, 0.0, 0.0))).values[20:-20, 20:-20]
    assert np.nanmedian(np.abs(diff)) < 0.02
    # points to align: the inverse (shift -s, surface -S(x + s)) moves the points onto the DEM
    rev = xdem.coreg.NuthKaabDeramp().fit(dem, track_points, z_column="h")
    assert abs(rev.shift_x_ - dx) <= 0.03 and abs(rev.shift_y_ - dy) <= 0.03
    p = read_points(rev.apply_points(track_points, z_name="h"), z_column="h")
    values, _, _ = dem_at_points(dem.data, *pixel_positions(dem, p.x, p.y), resampling="lagrange")
    assert np.median(np.abs(values - p.z)) < 0.01


def test_points_partly_outside(dem0: xr.DataArray, track_points: gpd.GeoDataFrame) -> None:
    far = track_points.iloc[:500].copy()
    far["geometry"] = far.geometry.translate(20_000.0, 0.0)
    both = pd.concat([track_points, far], ignore_index=True)
    nk = xdem.coreg.NuthKaab().fit(both, shifted(MOVES[0]), z_column="h")
    assert nk.n_outside_ == 500 and nk.n_points_ == len(both)
    assert abs(nk.shift_x_ + MOVES[0][0]) <= 0.03


def test_no_points_over_valid_pixels(dem0: xr.DataArray, track_points: gpd.GeoDataFrame) -> None:
    far = track_points.copy()
    far["geometry"] = far.geometry.translate(20_000.0, 0.0)
    for method in (xdem.coreg.NuthKaab(), xdem.coreg.VerticalShift()):
        with pytest.raises(NotEnoughDataError, match="fall on valid DEM pixels"):
            method.fit(far, dem0, z_column="h")
    holes = dem0.where(dem0 < -1e9)  # all nodata
    with pytest.raises(NotEnoughDataError, match="0 of"):
        xdem.coreg.NuthKaab().fit(track_points, holes, z_column="h")


def test_inlier_mask_applies_to_points(dem0: xr.DataArray, track_points: gpd.GeoDataFrame) -> None:
    west = xr.DataArray(np.broadcast_to(np.arange(SIZE) < SIZE // 2, (SIZE, SIZE)), dims=("y", "x"),
                        coords={"y": dem0.y, "x": dem0.x})
    vs = xdem.coreg.VerticalShift().fit(track_points, dem0, z_column="h", inlier_mask=west)
    x = track_points.geometry.x.to_numpy()
    assert vs.n_outside_ == pytest.approx(int((x >= X0 + SIZE * RES / 2).sum()), abs=60)
    assert vs.n_outside_ > 0.4 * len(track_points)


def test_fit_chunk_independent(track_points: gpd.GeoDataFrame) -> None:
    dem = shifted(MOVES[1])

    def fit(d: xr.DataArray) -> list[float]:
        nk = xdem.coreg.NuthKaab().fit(track_points, d, z_column="h_noisy")
        return [*nk.to_translations(), nk.n_outliers_]

    check_chunk_independence(fit, dem, chunkings=(128, 333), schedulers=("threads", "sync"), atol=0.0)


def test_apply_computes_nothing_and_corrects_dem(track_points: gpd.GeoDataFrame) -> None:
    dx, dy, dz = MOVES[0]
    dem = shifted(MOVES[0])
    nk = xdem.coreg.NuthKaab().fit(track_points, dem, z_column="h")
    with count_computes() as cc:
        out = nk.apply(dem)
    assert cc.count == 0 and isinstance(out.data, dask.array.Array)
    truth = shifted((0.0, 0.0, 0.0))
    diff = (out - truth).values[20:-20, 20:-20]
    assert np.nanmedian(np.abs(diff)) < 0.02


def test_unsupported_pairs(dem0: xr.DataArray, track_points: gpd.GeoDataFrame) -> None:
    with pytest.raises(InputError, match="RigidTransform does not fit on points yet; methods that do: biascorr, "
                       "deramp, dhminimize, directionalbias, icp, lzd, nuthkaab, nuthkaabderamp, terrainbias"):
        xdem.coreg.RigidTransform().fit(track_points, dem0, z_column="h")
    with pytest.raises(InputError, match="BiasCorr needs bias_vars"):
        xdem.coreg.BiasCorr().fit(track_points, dem0, z_column="h")
    with pytest.raises(InputError, match="poly_order <= 1"):
        xdem.coreg.NuthKaabDeramp(poly_order=2).fit(dem0, track_points, z_column="h")
    with pytest.raises(InputError, match="RigidTransform does not fit on points yet"):
        (xdem.coreg.NuthKaab() + xdem.coreg.RigidTransform()).fit(track_points, dem0, z_column="h")
    with pytest.raises(InputError, match="both inputs are points"):
        xdem.coreg.NuthKaab().fit(track_points, track_points, z_column="h")
    with pytest.raises(InputError, match="outlier_nmad"):
        xdem.coreg.NuthKaab().fit(track_points, dem0, z_column="h", outlier_nmad=0)


def test_pointset_roundtrip() -> None:
    p = PointSet(np.array([X0 + 10.0]), np.array([Y0 + 20.0]), np.array([5.0]), crs=CRS)
    g = p.to_geodataframe()
    assert read_points(g).z.tolist() == [5.0] and p.to_crs(CRS) is p


# --- command line -----------------------------------------------------------------------------
def test_cli_coreg_reference_points(tmp_path, track_points: gpd.GeoDataFrame) -> None:
    import json

    from click.testing import CliRunner

    from xdem.cli import main

    dx, dy, dz = MOVES[0]
    tba = tmp_path / "tba.tif"
    shifted(MOVES[0]).rio.to_raster(tba)
    pts = tmp_path / "ref_points.gpkg"
    track_points[["h_noisy", "geometry"]].rename(columns={"h_noisy": "h"}).to_file(pts)
    out = tmp_path / "aligned.tif"
    report = tmp_path / "report.html"
    res = CliRunner().invoke(main, ["coreg", str(pts), str(tba), "-o", str(out), "--z-column", "h", "--json",
                                    "--report", str(report)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    step = doc["steps"][0]
    assert abs(step["shift_x"] + dx) <= 0.08 and abs(step["shift_y"] + dy) <= 0.08 and abs(step["shift_z"] + dz) <= 0.02
    assert doc["points"]["count"] == len(track_points) and doc["points"]["n_outliers"] >= int(0.03 * len(track_points))
    before, after = doc["stats"]["before"], doc["stats"]["after"]
    assert abs(after["median"]) < 0.05 and after["nmad"] < 0.5 < before["nmad"]  # the noise (0.3 m) is what is left
    assert doc["stats"]["after_without_outliers"]["count"] < after["count"]
    page = report.read_text()
    assert page.count("data:image/png;base64,") == 2 and "Tracks coloured by dh" in page and doc["report"]
    written = xdem.open_dem(out)
    assert written.shape == (SIZE, SIZE)
    # reverse: DEM reference, points to align: a moved points file
    moved = tmp_path / "moved.gpkg"
    res = CliRunner().invoke(main, ["coreg", str(tba), str(pts), "-o", str(moved), "--z-column", "h", "--json",
                                    "--method", "nuthkaab"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["output_kind"] == "points" and abs(doc["steps"][0]["shift_x"] - dx) <= 0.08
    assert abs(doc["stats"]["after"]["median"]) < 0.05
    assert len(gpd.read_file(moved)) == len(track_points)
    # a CSV without CRS (--points-crs) and a pipeline
    csv = tmp_path / "ref_points.csv"
    p = read_points(pts, z_column="h")
    pd.DataFrame({"x": p.x, "y": p.y, "h": p.z}).to_csv(csv, index=False)
    res = CliRunner().invoke(main, ["coreg", str(csv), str(tba), "-o", str(tmp_path / "a2.tif"), "--z-column", "h",
                                    "--points-crs", CRS, "--method", "nuthkaab+deramp", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [s["method"] for s in doc["steps"]] == ["NuthKaab", "Deramp"]
    assert abs(doc["steps"][0]["shift_x"] + dx) <= 0.08 and doc["points"]["n_outliers"] > 0
    assert abs(doc["stats"]["after"]["median"]) < 0.05
    # the output kind must match the side being aligned
    res = CliRunner().invoke(main, ["coreg", str(pts), str(tba), "-o", str(tmp_path / "x.gpkg"), "--z-column", "h"])
    assert res.exit_code == 2 and "must end in .tif or .tiff" in res.output  # a DEM is aligned: a GeoTIFF is written


def test_cli_info_points(tmp_path, track_points: gpd.GeoDataFrame) -> None:
    import json

    from click.testing import CliRunner

    from xdem.cli import main

    pts = tmp_path / "points.gpkg"
    track_points.to_crs("EPSG:4326").to_file(pts)
    res = CliRunner().invoke(main, ["info", str(pts), "--z-column", "h", "--json"])
    assert res.exit_code == 0, res.output
    meta = json.loads(res.stdout)
    assert meta["count"] == len(track_points) and meta["crs"] == "EPSG:4326"
    assert meta["z_min"] == pytest.approx(float(track_points["h"].min()))
    res = CliRunner().invoke(main, ["info", str(pts), "--z-column", "h"])
    assert res.exit_code == 0 and "Points:" in res.output
