"""VerticalShift and Nuth & Kääb: known truth, chunk independence, laziness, bad input."""

from __future__ import annotations

import json

import dask
import numpy as np
import pytest
import xarray as xr
from affine import Affine
from helpers import MaxResult, count_computes
from reference import check_chunk_independence

import xdem
from xdem.coreg import CoregPipeline, NuthKaab, VerticalShift, shift_dem
from xdem.errors import (
    CRSError,
    FlatTerrainWarning,
    InputError,
    NotEnoughDataError,
    NotFittedError,
    OverlapError,
)
from xdem.examples import example_pair
from xdem.io.grid import with_transform

PIX = 1.0  # the bundled DEM has 1 m pixels
TOL_PX = 0.01  # horizontal tolerance (pixels) required by the issue
TOL_Z = 0.01  # vertical tolerance (m)


def _errors(nk, truth):
    return (nk.shift_x_ - truth["shift_x"], nk.shift_y_ - truth["shift_y"], nk.shift_z_ - truth["shift_z"])


@pytest.mark.parametrize("mode", ["resample", "transform"])
@pytest.mark.parametrize("resampling", ["bilinear", "cubic"])
def test_nuthkaab_recovers_known_subpixel_shift(mode, resampling):
    ref, tba, truth = example_pair(mode=mode, chunks=128)
    nk = NuthKaab(resampling=resampling, random_state=1).fit(ref, tba)
    ex, ey, ez = _errors(nk, truth)
    assert abs(ex) < TOL_PX * PIX and abs(ey) < TOL_PX * PIX, (ex, ey)
    assert abs(ez) < TOL_Z, ez
    assert nk.converged_ and nk.horizontal_constrained_
    assert 1 <= nk.n_iterations_ <= nk.max_iterations


@pytest.mark.parametrize("shift", [(-6.4, 4.35, -12.0), (0.21, 0.37, 0.0), (9.5, -0.6, 30.0)])
def test_nuthkaab_other_shifts_including_several_pixels(shift):
    ref, tba, truth = example_pair(shift_x=shift[0], shift_y=shift[1], shift_z=shift[2], chunks=100)
    nk = NuthKaab(random_state=0).fit(ref, tba)
    ex, ey, ez = _errors(nk, truth)
    assert max(abs(ex), abs(ey)) < TOL_PX and abs(ez) < TOL_Z, (ex, ey, ez)


def test_nuthkaab_on_synthetic_fractal_terrain():
    synthetic = pytest.importorskip("xdem.examples.synthetic")  # part of the package
    ref = synthetic.fractal_terrain((384, 384), seed=3, chunks=128)
    dx, dy, dz = 2.6, -3.3, 4.0
    t = ref.rio.transform()
    tba = with_transform(ref, Affine.translation(dx, dy) @ t) + dz  # exact: geotransform shift
    res = abs(t.a)
    nk = NuthKaab(random_state=2).fit(ref, tba)
    assert abs(nk.shift_x_ + dx) < TOL_PX * res and abs(nk.shift_y_ + dy) < TOL_PX * res
    assert abs(nk.shift_z_ + dz) < TOL_Z


def test_aligned_dem_matches_reference_after_apply(fitted_example_pair):
    ref, tba, _, nk = fitted_example_pair
    aligned = nk.apply(tba)
    dh_before = (tba - ref).values
    dh_after = (aligned - ref).values[10:-10, 10:-10]
    nmad = lambda a: 1.4826 * np.nanmedian(np.abs(a - np.nanmedian(a)))  # noqa: E731
    assert nmad(dh_after) < 0.05 * nmad(dh_before)
    assert abs(np.nanmedian(dh_after)) < 0.01


def test_vertical_shift_median_mean_and_callable():
    ref, tba, truth = example_pair(mode="transform", shift_x=0.0, shift_y=0.0, shift_z=2.5)
    assert VerticalShift().fit(ref, tba).shift_z_ == pytest.approx(-2.5, abs=1e-6)
    assert VerticalShift(vshift_reduc_func=np.mean).fit(ref, tba).shift_z_ == pytest.approx(-2.5, abs=1e-5)
    vs = VerticalShift(vshift_reduc_func=lambda a: np.percentile(a, 50)).fit(ref, tba)
    assert vs.shift_z_ == pytest.approx(-2.5, abs=1e-6)
    out = vs.apply(tba)
    np.testing.assert_allclose(out.values, tba.values - 2.5, atol=1e-5)


def test_vertical_shift_on_every_pixel_is_exact_and_gathers_nothing():
    ref, tba, _ = example_pair(mode="transform", shift_x=0.0, shift_y=0.0, shift_z=2.5, holes=4, noise=0.3, chunks=100)
    dh = tba.values.astype(np.float64) - ref.values.astype(np.float64)
    for func in (np.median, np.mean):
        with MaxResult() as cb, count_computes() as c:
            vs = VerticalShift(vshift_reduc_func=func).fit(ref, tba)
        assert vs.shift_z_ == pytest.approx(-float(getattr(np, "nan" + func.__name__)(dh)), abs=1e-9)
        assert vs.count_ == int(np.isfinite(dh).sum())
        assert 1 <= c.count <= (1 if func is np.mean else 4)
        # out of core: no task result is larger than a chunk (100 x 100 float64)
        assert cb.max_bytes <= 100 * 100 * 8 + 1000, cb.max_bytes


def test_fitted_shifts_independent_of_chunking_scheduler_and_numpy():
    ref, tba, _ = example_pair(chunks=400)

    def fit(r, t):
        nk = NuthKaab(subsample=20_000, random_state=7).fit(r, t)
        return [nk.shift_x_, nk.shift_y_, nk.shift_z_]

    res = check_chunk_independence(fit, ref, tba, atol=1e-9)
    assert np.all(np.isfinite(res))


def test_vertical_shift_independent_of_chunking():
    ref, tba, _ = example_pair(holes=5, noise=0.2)
    check_chunk_independence(
        lambda r, t: VerticalShift(subsample=5000, random_state=3).fit(r, t).shift_z_, ref, tba, atol=1e-12
    )


def test_apply_is_lazy_and_fit_computes_a_documented_number_of_times():
    ref, tba, _ = example_pair(chunks=128)
    nk = NuthKaab()
    with count_computes() as c:
        nk.fit(ref, tba)
    assert c.count == nk.passes_ <= 3  # 1 to draw the subsample and cut windows + 0-2 window re-reads
    with count_computes() as c:
        out = nk.apply(tba)
    assert c.count == 0
    pipe_out = (VerticalShift() + NuthKaab()).fit(ref, tba)
    with count_computes() as c2:
        out2 = pipe_out.apply(tba)
    assert c2.count == 0
    assert isinstance(out.data, dask.array.Array) and isinstance(out2.data, dask.array.Array)


def test_nan_holes_do_not_spread_beyond_footprint_in_apply():
    ref, tba, _ = example_pair(mode="transform", shift_x=0, shift_y=0, shift_z=0, chunks=64)
    arr = tba.values.copy()
    arr[200, 150] = np.nan
    arr[100:103, 300:302] = np.nan
    dem = tba.copy(data=arr)
    for resampling, (before, after) in [("bilinear", (0, 1)), ("cubic", (1, 2))]:
        out = shift_dem(dem, shift_x=0.3, shift_y=-0.4, resampling=resampling).values
        nan_out = np.isnan(out[5:-5, 5:-5])
        # out[i, j] samples (i - 0.4, j - 0.3): it reads rows i - 1 - before .. i - 1 + after, and the same
        # for columns, so a NaN at (r, c) reaches rows r + 1 - after .. r + 1 + before only.
        grown = np.zeros_like(arr, dtype=bool)
        for r, c in np.argwhere(np.isnan(arr)):
            grown[r + 1 - after : r + 1 + before + 1, c + 1 - after : c + 1 + before + 1] = True
        assert nan_out.sum() > 0
        assert not (nan_out & ~grown[5:-5, 5:-5]).any(), resampling


def test_integer_shift_is_an_exact_copy_and_resample_false_keeps_data():
    ref, tba, _ = example_pair(mode="transform", shift_x=0, shift_y=0, shift_z=0, chunks=128)
    out = shift_dem(tba, shift_x=2.0, shift_y=-3.0).values
    # out(x, y) = tba(x - 2, y + 3): column j reads j - 2, and y + 3 is 3 rows north: row i reads i - 3
    np.testing.assert_array_equal(out[3:, 2:], tba.values[:-3, :-2])
    assert np.isnan(out[:3]).all() and np.isnan(out[:, :2]).all()
    moved = shift_dem(tba, shift_x=0.25, shift_y=0.5, shift_z=1.0, resample=False)
    np.testing.assert_array_equal(moved.values, tba.values + np.float32(1.0))
    assert moved.rio.transform().c == pytest.approx(tba.rio.transform().c + 0.25)
    assert moved.rio.transform().f == pytest.approx(tba.rio.transform().f + 0.5)


def test_accumulated_shift_applied_once():
    """Applying the fitted shift once (not twice) aligns the DEM: a second application misaligns it."""
    ref, tba, truth = example_pair(mode="transform", chunks=128)
    nk = NuthKaab().fit(ref, tba)
    once = nk.apply(tba, resample=False)
    _, aligned_t = xdem.io.grid.align_pair(ref, once)
    assert abs(np.nanmedian((aligned_t - ref).values)) < 0.01
    assert nk.apply(tba, resample=False).rio.transform().c == pytest.approx(
        tba.rio.transform().c + truth["shift_x"], abs=TOL_PX
    )


def test_area_or_point_tag_gives_no_half_pixel_shift(tmp_path, lidar_path):
    import rasterio

    point = tmp_path / "point.tif"
    with rasterio.open(lidar_path) as src:
        profile, data = src.profile, src.read(1)
    with rasterio.open(point, "w", **profile) as dst:
        dst.write(data, 1)
        dst.update_tags(AREA_OR_POINT="Point")
    with rasterio.open(point) as src:
        assert src.tags().get("AREA_OR_POINT") == "Point"
    nk = NuthKaab().fit(lidar_path, point)
    assert abs(nk.shift_x_) < 1e-6 and abs(nk.shift_y_) < 1e-6 and abs(nk.shift_z_) < 1e-6


def test_sklearn_conventions_and_json_roundtrip(tmp_path):
    nk = NuthKaab(max_iterations=5, subsample=10_000, random_state=4)
    assert nk.get_params()["max_iterations"] == 5
    assert nk.set_params(tolerance=0.01) is nk and nk.tolerance == 0.01
    with pytest.raises(InputError, match="no parameter"):
        nk.set_params(nope=1)
    assert "NuthKaab(" in repr(nk) and "not fitted" in nk.info(as_str=True)
    ref, tba, _ = example_pair(chunks=200)
    with pytest.raises(NotFittedError, match="fit"):
        nk.apply(tba)
    assert nk.fit(ref, tba) is nk
    assert nk.to_matrix()[:3, 3] == pytest.approx(nk.to_translations())
    path = tmp_path / "nk.json"
    nk.to_json(path)
    doc = json.loads(path.read_text())
    assert doc["method"] == "NuthKaab" and doc["learned"]["shift_x_"] == nk.shift_x_
    loaded = xdem.coreg.Coreg.from_json(path)
    assert isinstance(loaded, NuthKaab) and loaded.to_translations() == nk.to_translations()
    np.testing.assert_array_equal(loaded.apply(tba).values, nk.apply(tba).values)
    assert "shift_x_" in nk.info(as_str=True)
    out = NuthKaab(subsample=5000).fit_and_apply(ref, tba)
    assert out.shape == tba.shape


def test_nonoverlapping_dems_error():
    ref, tba, _ = example_pair(mode="transform", shift_x=0, shift_y=0)
    far = with_transform(tba, Affine.translation(10_000.0, 0.0) @ tba.rio.transform())
    with pytest.raises(OverlapError, match="do not overlap"):
        NuthKaab().fit(ref, far)


def test_too_few_valid_pixels_error_with_counts():
    ref, tba, _ = example_pair(chunks=100)
    mask = np.zeros(ref.shape, dtype=bool)
    mask[:5, :5] = True
    with pytest.raises(NotEnoughDataError, match=r"found \d+ of 160000"):
        NuthKaab().fit(ref, tba, inlier_mask=mask)
    with pytest.raises(NotEnoughDataError, match="found 0"):
        VerticalShift().fit(ref, tba * np.nan)


def test_geographic_crs_with_projected_coordinates_names_the_fix():
    """A geographic REF is coregistered in its local UTM zone (tests/coreg/test_frames.py); one whose
    coordinates are not longitudes/latitudes (a wrong CRS label) is a clear error."""
    ref, tba, _ = example_pair()
    geo = ref.rio.write_crs("EPSG:4326")
    with pytest.raises(CRSError, match="not longitudes/latitudes; set its real CRS"):
        NuthKaab().fit(geo, geo)


def test_flat_terrain_warns_and_estimates_only_vertical():
    ref, _, _ = example_pair()
    flat = ref.copy(data=np.full(ref.shape, 100.0, dtype=np.float32))
    with pytest.warns(FlatTerrainWarning, match="too flat"):
        nk = NuthKaab().fit(flat, flat + 3.0)
    assert not nk.horizontal_constrained_ and nk.shift_x_ == 0.0 and nk.shift_y_ == 0.0
    assert nk.shift_z_ == pytest.approx(-3.0)


def test_subsample_larger_than_valid_pixels_uses_all():
    ref, tba, _ = example_pair(holes=4)
    big = VerticalShift(subsample=10**9).fit(ref, tba)
    full = VerticalShift(subsample=1.0).fit(ref, tba)
    assert big.count_ == full.count_ == int(np.isfinite((tba - ref).values).sum())
    assert big.shift_z_ == full.shift_z_


def test_inlier_and_exclude_masks(tmp_path):
    ref, tba, truth = example_pair(mode="transform", shift_x=0, shift_y=0, shift_z=1.0)
    arr = tba.values.copy()
    arr[:200] += 50.0  # unstable area (e.g. a glacier)
    tba2 = tba.copy(data=arr)
    stable = np.ones(ref.shape, dtype=bool)
    stable[:200] = False
    vs = VerticalShift().fit(ref, tba2, inlier_mask=xr.DataArray(stable, dims=("y", "x")))
    assert vs.shift_z_ == pytest.approx(-1.0, abs=1e-5)
    import geopandas as gpd
    from shapely.geometry import box

    t = ref.rio.transform()
    poly = box(t.c, t.f - 200, t.c + 400, t.f)  # the northern 200 rows
    gdf = gpd.GeoDataFrame(geometry=[poly], crs=ref.rio.crs)
    gpkg = tmp_path / "glacier.gpkg"
    gdf.to_file(gpkg)
    vs2 = VerticalShift().fit(ref, tba2, exclude_mask=gpkg)
    assert vs2.shift_z_ == pytest.approx(-1.0, abs=1e-5)
    vs3 = VerticalShift().fit(ref, tba2, inlier_mask=gdf)
    assert vs3.shift_z_ == pytest.approx(-51.0, abs=1e-4)


def test_pipeline_steps_see_previous_output_and_order_matters():
    ref, tba, truth = example_pair(chunks=128)
    pipe = VerticalShift() + NuthKaab()
    assert isinstance(pipe, CoregPipeline)
    pipe.fit(ref, tba)
    vs, nk = pipe.steps
    # the vertical shift is removed first, so Nuth & Kääb sees only what is left of it
    assert abs(vs.shift_z_) > 1.0
    assert nk.shift_z_ == pytest.approx(truth["shift_z"] - vs.shift_z_, abs=TOL_Z)
    total = np.array(pipe.to_translations())
    np.testing.assert_allclose(total, [truth["shift_x"], truth["shift_y"], truth["shift_z"]], atol=0.01)
    rev = (NuthKaab() + VerticalShift()).fit(ref, tba)
    assert abs(rev.steps[1].shift_z_) < 0.01  # fitted after NuthKaab: nothing left
    assert abs(rev.steps[0].shift_z_ - nk.shift_z_) > 1.0  # Nuth & Kääb first or second: order matters


def test_pipeline_merges_affine_steps_into_one_resampling():
    ref, tba, _ = example_pair(chunks=128)
    pipe = (NuthKaab() + NuthKaab(max_iterations=3)).fit(ref, tba)
    out = pipe.apply(tba)
    layers = [k for k in out.data.dask.layers if k.startswith("shift-overlap")]
    assert len(layers) == 1
    merged = shift_dem(tba, shift_x=pipe.to_translations()[0], shift_y=pipe.to_translations()[1],
                       shift_z=pipe.to_translations()[2])
    np.testing.assert_array_equal(out.values, merged.values)


def test_pipeline_subsample_and_random_state_reach_every_step():
    """Every step fits with the pipeline's subsample and seed, and the user's step objects keep
    the hyper-parameters they were given (nothing mutates them)."""
    steps = [VerticalShift(), NuthKaab()]
    before = [s.get_params() for s in steps]
    pipe = CoregPipeline(steps, subsample=1234, random_state=9)
    ref, tba, _ = example_pair(chunks=200)
    pipe.fit(ref, tba)
    assert [s.get_params() for s in pipe.steps] == before
    assert pipe.steps[0].count_ == 1234
    explicit = CoregPipeline([VerticalShift(subsample=1234, random_state=9), NuthKaab(subsample=1234, random_state=9)])
    assert explicit.fit(ref, tba).to_translations() == pipe.to_translations()
    doc = json.loads(pipe.to_json())
    again = xdem.coreg.Coreg.from_json(json.dumps(doc))
    assert isinstance(again, CoregPipeline) and again.to_translations() == pipe.to_translations()


def test_slope_aspect_from_windows_equal_terrain_rasters():
    """Nuth & Kääb takes slope/aspect at the sampled pixels from gathered windows; they must
    equal xdem.terrain's full rasters there (edges included)."""
    from xdem.coreg._windows import gather_windows, terrain_at_windows

    ref, _, _ = example_pair(holes=3, chunks=96)
    arr = ref.values.copy()
    arr[50:53, 70:75] = np.nan
    dem = ref.copy(data=dask.array.from_array(arr, chunks=96))
    rng = np.random.default_rng(0)
    rows = np.r_[rng.integers(0, 400, 3000), 0, 399, 51, 49]
    cols = np.r_[rng.integers(0, 400, 3000), 0, 399, 72, 70]
    for method in ("horn", "zevenbergthorne"):
        win = gather_windows(dem.data, rows, cols, 2)
        slope, aspect = terrain_at_windows(win, 2, res_x=1.0, res_y=1.0, method=method)
        s_full = xdem.terrain.slope(dem, method=method).values[rows, cols]
        a_full = xdem.terrain.aspect(dem, method=method).values[rows, cols]
        np.testing.assert_allclose(slope, s_full, rtol=1e-5, atol=1e-5, equal_nan=True)
        np.testing.assert_allclose(aspect, a_full, rtol=1e-5, atol=1e-4, equal_nan=True)
        assert np.isnan(slope[-4:-1]).all()  # DEM corners and a pixel next to the hole
