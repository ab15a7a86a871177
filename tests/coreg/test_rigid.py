"""Applying any rigid transform, lazily and out of core: rotations about z, x and y plus
translations, in the frame, onto other grids, merged in pipelines, and to points.

Truth: the analytic terrain of ``tests/truth.py`` moved by a known rigid matrix
(:func:`truth.rigid_dem_of`, solved independently of the package). Applying the inverse matrix
must give the terrain back up to the resampling noise, which is measured on the same terrain
by applying a perfectly known pure translation of similar size (the floor): the rotation may
not add more than half of it again. Moving in the wrong direction is asserted far worse, so
that the tolerance cannot hide a sign error.
"""

from __future__ import annotations

import geopandas as gpd
import numpy as np
import pytest
import shapely
from affine import Affine
from helpers import MaxResult, count_computes
from truth import SineTerrain, dem_of, nmad, rigid_dem_of

import xdem
from xdem.coreg import CoregPipeline, RigidTransform
from xdem.errors import InputError
from xdem.kernels.rigid import rigid_matrix, rotation_matrix, transform_points
from xdem.warp import FrameOp, Grid, NotMergeable

CRS = "EPSG:32633"
RES, N = 5.0, 320
X0, Y0 = 500000.0, 5000000.0
TERRAIN = SineTerrain(crs=CRS, origin=(X0, Y0), shortest=60.0, longest=2000.0)
T = Affine(RES, 0.0, X0, 0.0, -RES, Y0)
CENTRE = np.array([X0 + N * RES / 2, Y0 - N * RES / 2, 1000.0])
MOVE = np.array([1.3, -2.1, 0.7])


def _matrix(rotations: tuple[float, float, float]) -> np.ndarray:
    return rigid_matrix(rotation_matrix(*rotations), MOVE, CENTRE)


def _interior(a: np.ndarray, margin: int = 12) -> np.ndarray:
    return a[margin:-margin, margin:-margin]


@pytest.fixture(scope="module")
def ref():
    return dem_of(TERRAIN, crs=CRS, transform=T, shape=(N, N), chunks=100)


def _floor(ref, resampling: str) -> float:
    """NMAD left by resampling alone: a pure known translation of the same size, undone."""
    tba = dem_of(TERRAIN, crs=CRS, transform=T, shape=(N, N), move=tuple(MOVE), chunks=100)
    back = RigidTransform.from_translations(*(-MOVE), crs=CRS).set_params(resampling=resampling)
    return nmad(_interior(back.apply(tba).values - ref.values))


@pytest.mark.parametrize("rotations", [(0.0, 0.0, 0.3), (0.03, -0.02, 0.3), (0.4, 0.3, -0.5)])
@pytest.mark.parametrize("resampling", ["bilinear", "cubic"])
def test_inverse_rotation_gives_the_terrain_back(ref, rotations, resampling):
    m = _matrix(rotations)
    tba = rigid_dem_of(TERRAIN, transform=T, shape=(N, N), matrix=m, chunks=100)
    back = RigidTransform.from_matrix(np.linalg.inv(m), centroid=CENTRE, crs=CRS).set_params(resampling=resampling)
    with count_computes() as c:
        out = back.apply(tba)
    assert c.count == 0
    err = nmad(_interior(out.values - ref.values))
    floor = _floor(ref, resampling)
    assert err <= 1.5 * floor + 1e-4, (err, floor)
    assert np.isfinite(_interior(out.values, 40)).all()
    wrong = RigidTransform.from_matrix(m, centroid=CENTRE, crs=CRS).apply(tba).values
    assert nmad(_interior(wrong - ref.values, 40)) > 20 * max(err, 1e-3)


def test_rotation_about_centroid_is_reported_about_it():
    t = RigidTransform.from_rotations(0.01, -0.02, 0.3, translation=tuple(MOVE), centroid=tuple(CENTRE), crs=CRS)
    assert np.allclose(t.to_rotations(), (0.01, -0.02, 0.3), atol=1e-12)
    assert np.allclose(t.to_translations(), MOVE, atol=1e-9)
    moved = transform_points(t.to_matrix(), *CENTRE[:, None])[:, 0]
    np.testing.assert_allclose(moved, CENTRE + MOVE, atol=1e-8)  # the centre moves by the translation


def test_apply_is_chunk_independent_and_bounded(ref):
    m = _matrix((0.05, -0.04, 0.4))
    tba = rigid_dem_of(TERRAIN, transform=T, shape=(N, N), matrix=m, chunks=100)
    back = RigidTransform.from_matrix(np.linalg.inv(m), centroid=CENTRE, crs=CRS).set_params(resampling="cubic")
    with MaxResult() as mr:
        np.nansum(back.apply(tba).data).compute(scheduler="sync")  # a reduction: no final concatenation
    assert 0 < mr.max_2d_bytes <= 100 * 100 * 4  # no task result larger than a chunk: no global halo
    base = back.apply(tba).values
    for chunks in (64, {"y": 97, "x": 160}):
        other = back.apply(tba.chunk(chunks)).values
        np.testing.assert_allclose(other, base, atol=1e-6, rtol=0, equal_nan=True)
    numpy_in = back.apply(tba.compute()).values
    np.testing.assert_allclose(numpy_in, base, atol=1e-6, rtol=0, equal_nan=True)


def test_output_on_a_grid_of_another_crs_is_the_terrain_there(ref):
    """The transform lives in the frame (UTM 33N); the output is asked on a UTM 34N grid (about
    5 degrees of grid convergence): each output pixel must show the terrain at its own place."""
    from truth import grid_around

    m = _matrix((0.02, 0.01, 0.3))
    tba = rigid_dem_of(TERRAIN, transform=T, shape=(N, N), matrix=m, chunks=100)
    inner = (X0 + 300, Y0 - N * RES + 300, X0 + N * RES - 300, Y0 - 300)
    t34, shape34 = grid_around(inner, CRS, "EPSG:32634", RES)
    truth34 = dem_of(TERRAIN, crs="EPSG:32634", transform=t34, shape=shape34, chunks=100)
    back = RigidTransform.from_matrix(np.linalg.inv(m), centroid=CENTRE, crs=CRS).set_params(resampling="cubic")
    out = back.apply(tba, grid=truth34)
    assert out.rio.crs.to_epsg() == 32634 and out.shape == truth34.shape
    d = out.values - truth34.values
    assert np.isfinite(d).mean() > 0.8
    assert nmad(d) <= 1.5 * _floor(ref, "cubic") + 1e-4, (nmad(d), _floor(ref, "cubic"))


def test_an_elevation_outside_the_assumed_range_fails_loudly(ref):
    from xdem.warp import warp_dem

    m = _matrix((0.5, 0.5, 0.0))
    tba = rigid_dem_of(TERRAIN, transform=T, shape=(N, N), matrix=m, chunks=100)
    op = FrameOp.rigid(CRS, np.linalg.inv(m), CENTRE)
    with pytest.raises(RuntimeError, match="z_range"):
        warp_dem(tba, grid=Grid.of(tba), op=op, z_range=(-40000.0, -39000.0)).compute()
    with pytest.raises(ValueError, match="z_range"):
        warp_dem(tba, grid=Grid.of(tba), op=op, z_range=(5.0, 1.0))


def test_pipeline_merges_rigid_steps_into_one_resampling(ref):
    a = RigidTransform.from_rotations(0.02, 0.0, 0.2, translation=(1.0, 0.5, 0.2), centroid=tuple(CENTRE), crs=CRS)
    b = RigidTransform.from_translations(-0.4, 0.9, -0.1, crs=CRS)
    c = RigidTransform.from_rotations(0.0, -0.03, -0.1, centroid=tuple(CENTRE + 100), crs=CRS)
    pipe = a + b + c
    np.testing.assert_allclose(pipe.to_matrix(), c.to_matrix() @ b.to_matrix() @ a.to_matrix(), atol=1e-9)
    single = RigidTransform.from_matrix(pipe.to_matrix(), centroid=tuple(CENTRE), crs=CRS)
    assert np.allclose(pipe.to_rotations(), single.to_rotations(), atol=1e-9)
    tba = rigid_dem_of(TERRAIN, transform=T, shape=(N, N), matrix=_matrix((0.0, 0.0, 0.1)), chunks=100)
    merged = pipe.apply(tba)
    np.testing.assert_allclose(merged.values, single.apply(tba).values, atol=1e-4, rtol=0, equal_nan=True)
    warps = [k for k in merged.data.dask.layers if str(k).startswith("warp-") and not str(k).startswith("warp-cut")]
    assert len(warps) == 1  # one resampling for three steps


def test_translations_alone_keep_the_halo_fast_path(ref):
    pipe = RigidTransform.from_translations(1.0, 0.0, crs=CRS) + RigidTransform.from_translations(0.5, -2.0, 1.0, crs=CRS)
    out = pipe.apply(ref)
    assert not any(str(k).startswith("warp-") for k in out.data.dask.layers)
    assert pipe.to_translations() == (1.5, -2.0, 1.0)
    assert pipe.to_rotations() == (0.0, 0.0, 0.0)


def test_a_rotation_after_a_ramp_is_not_merged():
    from xdem.warp import Surface

    ramp = FrameOp(CRS, surfaces=(Surface(center=(X0, Y0), scale=1000.0, terms=((1, 0),), coefs=(0.5,)),))
    rot = FrameOp.rigid(CRS, _matrix((0.0, 0.0, 0.2)), CENTRE)
    with pytest.raises(NotMergeable):
        ramp.then(rot)
    merged = rot.then(ramp)  # a ramp after a rotation merges: it is evaluated on the output
    assert merged.rotation is not None and len(merged.surfaces) == 1


def test_resample_false_refuses_a_rotation(ref):
    t = RigidTransform.from_rotations(rz=0.1, centroid=tuple(CENTRE), crs=CRS)
    with pytest.raises(InputError, match="resample=False"):
        t.apply(ref, resample=False)


def test_json_round_trip_and_a_tampered_matrix(ref, tmp_path):
    t = RigidTransform.from_rotations(0.01, 0.02, 0.3, translation=(1.0, 2.0, 3.0), centroid=tuple(CENTRE), crs=CRS)
    doc = t.to_dict()
    for key in ("matrix_", "centroid_", "rotation_x_", "rotation_y_", "rotation_z_", "shift_x_"):
        assert key in doc["learned"]
    again = xdem.coreg.Coreg.from_dict(doc)
    np.testing.assert_array_equal(again.apply(ref).values, t.apply(ref).values)
    doc["learned"]["rotation_z_"] = 0.5
    with pytest.raises(InputError, match="disagrees"):
        xdem.coreg.Coreg.from_dict(doc)
    with pytest.raises(InputError, match="not rigid"):
        RigidTransform.from_matrix(np.diag([2.0, 1.0, 1.0, 1.0]))


def test_points_are_moved_exactly_in_the_frame():
    m = _matrix((0.02, -0.01, 0.3))
    t = RigidTransform.from_matrix(m, centroid=tuple(CENTRE), crs=CRS)
    rng = np.random.default_rng(0)
    x = X0 + rng.uniform(0, N * RES, 50)
    y = Y0 - rng.uniform(0, N * RES, 50)
    z = TERRAIN(x, y)
    pts = gpd.GeoDataFrame({"z": z}, geometry=shapely.points(x, y), crs=CRS)
    expected = transform_points(m, x, y, z)
    out = t.apply_points(pts)
    np.testing.assert_allclose(np.c_[out.geometry.x, out.geometry.y, out["z"]], expected.T, atol=1e-6)
    assert np.array_equal(pts["z"], z)  # the input is not modified
    # points in degrees: moved in the frame (UTM 33N) and brought back
    geo = gpd.GeoDataFrame(geometry=shapely.points(x, y, z), crs=CRS).to_crs("EPSG:4326")
    back = t.apply_points(geo).to_crs(CRS)
    np.testing.assert_allclose(np.c_[back.geometry.x, back.geometry.y, back.geometry.z], expected.T, atol=1e-5)
    with pytest.raises(InputError, match="no elevation"):
        t.apply_points(gpd.GeoDataFrame(geometry=shapely.points(x, y), crs=CRS))
    moved = t.apply(pts)  # upstream's apply(points) moves them too (issue 26)
    np.testing.assert_allclose(np.c_[moved.geometry.x, moved.geometry.y, moved["z"]], expected.T, atol=1e-6)


def test_points_through_a_pipeline_equal_the_product():
    a = RigidTransform.from_rotations(0.0, 0.01, 0.2, centroid=tuple(CENTRE), crs=CRS)
    b = RigidTransform.from_translations(1.0, -1.0, 0.5, crs=CRS)
    pts = gpd.GeoDataFrame(geometry=[shapely.Point(X0 + 10, Y0 - 20, 1000.0)], crs=CRS)
    got = (a + b).apply_points(pts).geometry[0].coords[0]
    want = transform_points(b.to_matrix() @ a.to_matrix(), np.array([X0 + 10]), np.array([Y0 - 20]), np.array([1000.0]))
    np.testing.assert_allclose(got, want[:, 0], atol=1e-8)
    assert isinstance(a + b, CoregPipeline)


def test_fixed_point_never_returns_a_value_read_at_a_foreign_position():
    """A pixel whose source is NaN at one iterate stays NaN, instead of being read again at the
    start position (which belongs to another elevation)."""
    from xdem.kernels.rigid import solve_elevation

    def src(r, c, idx):  # NaN for the positions near row 50.2 only: the start position falls there
        v = 0.01 * r * 100.0
        return np.where(np.abs(r - 50.2) < 0.05, np.nan, v)

    prow0, pcol0 = np.array([50.2, 10.0]), np.zeros(2)
    z, r, _ = solve_elevation(src, prow0, pcol0, 0.001, 0.0, 0.0, k=0.0, rzz=1.0, z0=0.0)
    assert np.isnan(z[0])  # no restart levels: NaN at the start stays NaN
    assert abs(z[1] - (10.0 + 0.001 * z[1])) < 1e-9
    z, r, _ = solve_elevation(src, prow0, pcol0, 0.001, 0.0, 0.0, k=0.0, rzz=1.0, z0=0.0, starts=(100.0,))
    assert abs(z[0] - (50.2 + 0.001 * z[0])) < 1e-9  # restarted elsewhere: a genuine fixed point

    def holes(r, c, idx):  # the source is NaN on the way: row 50.25 only
        return np.where(np.abs(r - 50.25) < 0.01, np.nan, r * 1.0)

    z, r, _ = solve_elevation(holes, np.array([50.2]), np.zeros(1), 0.001, 0.0, 0.0, k=0.0, rzz=1.0, z0=0.0)
    assert np.isnan(z[0])  # 50.2 -> z = 50.2 -> row 50.2502: NaN there, and not read again at 50.2


def test_each_pixel_settles_on_its_own():
    """A pixel's value does not depend on the other pixels solved with it (so not on the chunk):
    solved alone or among pixels that need more iterations, it is the same."""
    from xdem.kernels.rigid import solve_elevation

    def src(r, c, idx):
        return 30.0 * np.sin(r / 7.0) + 0.5 * c

    prow0, pcol0 = np.array([10.0, 20.0, 30.0]), np.array([5.0, 6.0, 7.0])
    drow = np.array([0.002, 0.02, 0.05])  # the last pixel converges the slowest
    together, _, _ = solve_elevation(src, prow0, pcol0, drow, 0.0, 0.0, k=0.0, rzz=1.0)
    for i in range(3):
        alone, _, _ = solve_elevation(src, prow0[i:i + 1], pcol0[i:i + 1], drow[i:i + 1], 0.0, 0.0, k=0.0, rzz=1.0)
        assert alone[0] == together[i]
        assert abs(together[i] - src(prow0[i] + drow[i] * together[i], pcol0[i], None)) < 1e-6


def _max_held(arr) -> int:
    """Most task results dask would hold at once computing ``arr`` block by block, each block
    consumed as soon as it is made (as a write does), in dask's own order."""
    from dask.order import diagnostics

    sink = arr.map_blocks(lambda b: np.zeros((1, 1)), chunks=(1, 1), dtype=float)
    return max(diagnostics(dict(sink.__dask_graph__()))[1])


def test_a_dem_opened_from_a_file_is_warped_from_windows_read_per_chunk(tmp_path):
    """A DEM opened from a file: each output chunk reads its own window from the file (one task),
    so what is held does not grow with the grid, where windows cut from the source's chunks keep
    rows of chunks alive. Same values bit for bit; the file is still known as the input (so a
    writer refuses to overwrite it); nodata read as NaN in the windows too."""
    from xdem.io.sources import find_sources, region_reader

    path = tmp_path / "dem.tif"
    dem0 = dem_of(SineTerrain(crs=CRS, origin=(X0, Y0), shortest=60.0), crs=CRS, transform=T, shape=(300, 300))
    dem0 = dem0.where(~((dem0.x < X0 + 200) & (dem0.y < Y0 - 1000)))  # a nodata corner
    xdem.write_cog(dem0, path)
    centre = (X0 + 750.0, Y0 - 750.0, 1000.0)
    t = RigidTransform.from_rotations(0.02, -0.03, 0.4, translation=(1.0, -2.0, 0.5), centroid=centre, crs=CRS)
    t.set_params(resampling="cubic")
    held = {}
    for chunks in (100, 50, 25):
        dem = xdem.open_dem(path, chunks=chunks)
        read = region_reader(dem)
        assert read is not None and region_reader(dem + 0) is None
        np.testing.assert_array_equal(read(slice(7, 90), slice(150, 300)), dem.values[7:90, 150:300])
        direct, generic = t.apply(dem), t.apply(dem + 0)  # dem + 0: no reader, windows cut from chunks
        np.testing.assert_array_equal(direct.values, generic.values)
        assert np.isnan(direct.values).mean() > 0.05
        assert [p.name for p in find_sources(direct)] == ["dem.tif"]
        held[chunks] = (_max_held(direct.data), _max_held(generic.data))
    assert max(d for d, _ in held.values()) <= 3, held  # a window and an output at a time
    assert held[25][1] > held[50][1] > held[100][1] > 3, held  # rows of chunks: grows with the grid


def _routes(monkeypatch, force_iterative: bool = False) -> list:
    """Record what :func:`xdem.kernels.rigid_warp.one_step_level` decided in each chunk (None:
    the fixed point, unless a strip allows one step: :func:`~xdem.kernels.rigid_warp.strip_level`);
    ``force_iterative``: always the fixed point."""
    import xdem.kernels.rigid_warp as RW
    import xdem.warp as W

    seen: list = []
    real = W.one_step_level

    def spy(*args, **kwargs):
        got = None if force_iterative else real(*args, **kwargs)
        seen.append(got)
        return got

    monkeypatch.setattr(W, "one_step_level", spy)
    if force_iterative:
        monkeypatch.setattr(RW, "strip_level", lambda *args, **kwargs: None)
    return seen


def test_one_step_route_equals_the_fixed_point_for_a_tiny_rotation(monkeypatch):
    """A rotation of a few 1e-8 degrees (what LZD and ICP fit on a pure shift) moves no source
    position by 1e-6 pixel over the elevations: each pixel is read once. Against the fixed point
    (3 reads per pixel, forced), on float64 data with voids: the same voids, values within
    1e-6 pixel times the local slope (measured: 1e-7 px)."""
    m = _matrix((6e-8, -5e-8, 3e-8))
    tba = rigid_dem_of(TERRAIN, transform=T, shape=(N, N), matrix=m, chunks=100).astype("float64")
    tba = tba.where(~((tba.x < X0 + 300) & (tba.y < Y0 - 1000)))
    back = RigidTransform.from_matrix(np.linalg.inv(m), centroid=CENTRE, crs=CRS).set_params(resampling="cubic")
    with monkeypatch.context() as mp:
        routes = _routes(mp)
        one = back.apply(tba).values
    assert len(routes) == 16 and all(r is not None for r in routes)
    with monkeypatch.context() as mp:
        routes = _routes(mp, force_iterative=True)
        fixed = back.apply(tba).values
    assert len(routes) == 16
    np.testing.assert_array_equal(np.isnan(one), np.isnan(fixed))
    assert 0.05 < np.isnan(one).mean() < 0.2
    gy, gx = np.gradient(fixed)
    slope_px = np.maximum(np.hypot(gx, gy), 1e-3)  # metres per pixel
    assert np.nanmax(np.abs(one - fixed) / slope_px) <= 1e-6
    assert np.nanmax(np.abs(one - fixed)) > 0  # the routes are different computations


def test_a_large_tilt_takes_the_fixed_point_and_gives_the_terrain_back(ref, monkeypatch):
    m = _matrix((0.4, 0.3, -0.5))
    tba = rigid_dem_of(TERRAIN, transform=T, shape=(N, N), matrix=m, chunks=100)
    back = RigidTransform.from_matrix(np.linalg.inv(m), centroid=CENTRE, crs=CRS).set_params(resampling="cubic")
    routes = _routes(monkeypatch)
    out = back.apply(tba).values
    assert len(routes) == 16 and all(r is None for r in routes)
    err = nmad(_interior(out - ref.values))
    assert err <= 1.5 * _floor(ref, "cubic") + 1e-4, err


def test_compiled_solve_equals_the_numpy_fixed_point():
    """:func:`xdem.kernels.rigid_warp.rigid_arrays_strip` is :func:`solve_elevation` pixel by pixel,
    bit for bit: restarts at NaN starts, a pixel meeting a NaN on its way stays NaN, positions
    leaving the window counted."""
    from xdem.kernels.rigid import solve_elevation
    from xdem.kernels.rigid_warp import rigid_arrays_strip
    from xdem.kernels.warp import interp_positions_kernel

    rng = np.random.default_rng(3)
    win = 100.0 + 30.0 * np.sin(np.add.outer(np.arange(60.0) / 5.0, np.arange(50.0) / 7.0))
    win[20:24, 10:14] = np.nan
    n = 2000
    p0, c0 = rng.uniform(2, 56, n), rng.uniform(2, 46, n)
    dr, dc, a = rng.uniform(-0.02, 0.02, n), rng.uniform(-0.02, 0.02, n), rng.uniform(-5, 5, n)
    starts = (0.0, 50.0, 120.0)
    for resampling in ("bilinear", "cubic"):
        want, _, _ = solve_elevation(lambda r, c, idx, how=resampling: interp_positions_kernel(win, r, c, resampling=how),
                                     p0, c0, dr, dc, a, k=0.001, rzz=0.999, z0=100.0, starts=starts)
        got, esc = rigid_arrays_strip(win, (0, 0), p0, c0, dr, dc, a, z0=100.0, k=0.001, rzz=0.999, tol=1e-9,
                                      starts=starts, max_iter=20, resampling=resampling, z_one=None,
                                      src_shape=win.shape, footprint=(1, 2))
        np.testing.assert_array_equal(got, want)
        assert esc == 0 and 0 < np.isnan(got).sum() < n // 10
    _, esc = rigid_arrays_strip(win[:, :30], (0, 0), p0, c0, dr, dc, a, z0=100.0, k=0.001, rzz=0.999, tol=1e-9,
                                starts=starts, max_iter=20, resampling="cubic", z_one=None, src_shape=win.shape,
                                footprint=(1, 2))
    assert esc > 0  # read beyond a window smaller than the source: counted, never a silent NaN


def test_strip_route_equals_the_fixed_point_where_the_chunk_needs_it(monkeypatch):
    """A chunk whose window spans 0 .. 3000 m with a tilt of 4e-10 pixel per metre cannot be read
    in one step (1.9e-6 px over its elevations) but each strip of rows reading one half of it can
    (:func:`xdem.kernels.rigid_warp.strip_level`): the strips' values equal the fixed point's
    (forced) within 1e-6 pixel times the local slope, and differ from them (another computation)."""
    import xdem.kernels.rigid_warp as RW

    rng = np.random.default_rng(3)
    win = np.vstack([1000 + np.cumsum(rng.normal(0, 2, (40, 60)), axis=1),
                     2500 + np.cumsum(rng.normal(0, 2, (40, 60)), axis=1)])
    coef = np.array([3.3, 1.0, 1e-9, 4.6, -1e-9, 1.0, 0.5, 1e-9, -1e-9])
    args = dict(drow=4e-10, dcol=-1e-10, z0=1500.0, k=0.0, rzz=1.0, tol=1e-9, starts=(0.0, 3000.0), max_iter=20,
                resampling="cubic", z_one=None, src_shape=win.shape, footprint=(1, 2))
    assert RW.one_step_level(win, 0.5, 0.5, float(np.hypot(4e-10, 1e-10)), rzz=1.0, k=0.0, resampling="cubic") is None
    levels = [RW.strip_level(win, (0, 0), (r, r + 10), (0, 50), coef, drow=4e-10, dcol=-1e-10, z0=1500.0, k=0.0,
                             rzz=1.0, resampling="cubic", footprint=(1, 2)) for r in (0, 10, 40, 60)]
    assert all(level is not None for level in levels) and levels[0] < 1500 < levels[-1]
    rows = [(0, 30), (40, 70)]
    strips = [np.empty((30, 50)) for _ in rows]
    for (r0, r1), out in zip(rows, strips):
        assert RW.rigid_affine_strip(win, (0, 0), (r0, r1), (0, 50), coef, out=out, **args) == 0
    monkeypatch.setattr(RW, "strip_level", lambda *a, **k: None)
    fixed = [np.empty((30, 50)) for _ in rows]
    for (r0, r1), out in zip(rows, fixed):
        RW.rigid_affine_strip(win, (0, 0), (r0, r1), (0, 50), coef, out=out, **args)
    one, ref = np.vstack(strips), np.vstack(fixed)
    assert np.isfinite(ref).all()
    gy, gx = np.gradient(win)
    slope_px = float(np.max(np.hypot(gx, gy)))  # metres per pixel, the steepest
    assert np.max(np.abs(one - ref)) <= 1e-6 * slope_px
    assert np.max(np.abs(one - ref)) > 0


def test_one_step_loop_equals_the_per_pixel_solve_at_borders_and_voids(monkeypatch):
    """The affine one-step loop (no bounds tests inside the run of pixels whose footprint is in
    the window), pixel by pixel (runs of one translation off), reads every pixel as the per-pixel
    solve does, bit for bit: at a void, at the source's border (NaN) and beyond a window smaller
    than the source (counted the same)."""
    import xdem.kernels.rigid_warp as RW
    from xdem.kernels.rigid_warp import rigid_affine_strip, rigid_arrays_strip

    monkeypatch.setattr(RW, "RUN_PX", 0.0)
    rng = np.random.default_rng(5)
    win = 1000 + np.cumsum(rng.normal(0, 2, (40, 50)), axis=1)
    win[10:13, 20:22] = np.nan
    coef = np.array([-1.7, 1.0, 2e-9, -2.4, -2e-9, 1.0, 0.5, 1e-9, -1e-9])
    rr, cc = np.meshgrid(np.arange(40.0), np.arange(50.0), indexing="ij")
    prow, pcol, a = coef[0] + coef[1] * rr + coef[2] * cc, coef[3] + coef[4] * rr + coef[5] * cc, \
        coef[6] + coef[7] * rr + coef[8] * cc
    for resampling, taps in (("bilinear", (0, 1)), ("cubic", (1, 2))):
        for shape, w0 in ((win.shape, (0, 0)), ((80, 80), (3, 3))):  # the whole source; a window of a larger one
            args = dict(z0=1000.0, k=1e-9, rzz=1.0, tol=1e-9, starts=(), max_iter=20, resampling=resampling,
                        z_one=1000.3, src_shape=shape, footprint=taps)
            out = np.empty((40, 50))
            esc = rigid_affine_strip(win, w0, (0, 40), (0, 50), coef, drow=1e-9, dcol=2e-9, out=out, **args)
            want, want_esc = rigid_arrays_strip(win, w0, prow, pcol, 1e-9, 2e-9, a, **args)
            np.testing.assert_array_equal(out, want)
            assert esc == want_esc and (esc > 0) == (shape != win.shape)
            assert 0 < np.isnan(out).mean() < 0.4 and np.isfinite(out).mean() > 0.6


@pytest.mark.parametrize("resampling", ["bilinear", "cubic"])
def test_runs_of_one_translation_read_within_run_px_of_each_pixel(resampling, monkeypatch):
    """Runs of one translation (:data:`xdem.kernels.rigid_warp.RUN_PX`) against the same loop pixel
    by pixel, on a rough surface with voids and the source's border, rows drifting by 2e-9 pixel
    a column: the same voids and count of escaped footprints, values within ``RUN_PX`` pixel times
    the steepest slope (what moving a position by that much can change), and not the same
    computation. A mapping drifting by 0.01 pixel a column (runs shorter than ``MIN_RUN``) and a
    translation within ``RUN_PX`` of whole pixels are read pixel by pixel: the same bits."""
    from scipy.ndimage import gaussian_filter

    import xdem.kernels.rigid_warp as RW

    run_px = RW.RUN_PX
    rng = np.random.default_rng(7)
    win = 1000 + gaussian_filter(rng.normal(0, 300, (60, 400)), 1.5)  # rough: slopes of up to about 60 m a pixel
    win[20:24, 100:130] = np.nan
    taps = (0, 1) if resampling == "bilinear" else (1, 2)
    args = dict(drow=1e-9, dcol=2e-9, z0=1000.0, k=1e-9, rzz=1.0, tol=1e-9, starts=(), max_iter=20,
                resampling=resampling, z_one=1000.3, footprint=taps)

    def read(coef, run_px, shape=win.shape, w0=(0, 0)):
        monkeypatch.setattr(RW, "RUN_PX", run_px)
        out = np.empty((50, 400))
        esc = RW.rigid_affine_strip(win, w0, (0, 50), (0, 400), coef, src_shape=shape, out=out, **args)
        return out, esc

    gy, gx = np.gradient(win)
    steepest = 2.0 * float(np.nanmax(np.hypot(gx, gy)))  # metres per pixel, with room for the interpolant's
    drifting = np.array([-1.7, 1.0, 2e-9, -2.4, -3e-9, 1.0, 0.5, 1e-9, -1e-9])
    for shape, w0 in ((win.shape, (0, 0)), ((80, 450), (3, 3))):
        runs, esc_runs = read(drifting, run_px, shape, w0)
        pixels, esc_pixels = read(drifting, 0.0, shape, w0)
        np.testing.assert_array_equal(np.isnan(runs), np.isnan(pixels))
        assert esc_runs == esc_pixels and (esc_runs > 0) == (shape != win.shape)
        assert 0.02 < np.isnan(runs).mean() < 0.3
        diff = np.nanmax(np.abs(runs - pixels))
        assert 0 < diff <= run_px * steepest, diff
    for coef in (np.array([-1.7, 1.0, 0.01, -2.4, -3e-9, 1.0, 0.5, 1e-9, -1e-9]),  # runs of 0: pixel by pixel
                 np.array([-2.0 - 1e-7, 1.0, 0.0, -3.0 + 1e-7, 0.0, 1.0, 0.5, 0.0, 0.0])):  # near whole pixels
        np.testing.assert_array_equal(read(coef, run_px)[0], read(coef, 0.0)[0])
