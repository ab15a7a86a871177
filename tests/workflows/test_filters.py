"""Outlier filters (``--min-slope``, ``--max-slope``, ``--nmad-filter``) with points on one side.

Truth: points at pixel CENTRES of the example pair (400 x 400 pixels of 1 m, TBA = REF moved by
(3.27, -1.64, 2.5) m), with 3 % planted blunders of +50 m. At a pixel centre the 4-point
Lagrange interpolation the fit reads the DEM with has weights (0, 1, 0, 0): the DEM at a point
is the pixel's value exactly, so ``dh`` is known independently by indexing the arrays, and the
slope of the pixel holding the point by an independent numpy Horn slope of the DEM (and, on
planes, analytically). Record values are compared to 1e-9 (float64 arithmetic on the same
float32 values, in another order).

Fits: Nuth & Kääb on the points. Its own outlier rejection (4 NMADs on the residuals) already
drops the blunders, so both fits are at the floor the pair's cubic-spline resampling leaves
(0.1 to 0.3 mm here): the filtered fit must be at least as accurate as the unfiltered one, with
0.2 mm of slack (other subsets of points, other rounding), and within 0.05 m of the truth.
"""

from __future__ import annotations

import json
from dataclasses import replace

import geopandas as gpd
import numpy as np
import pytest
import rasterio
import xarray as xr
from affine import Affine
from click.testing import CliRunner

import xdem
from xdem.cli import main
from xdem.coreg._data import prepare_points
from xdem.errors import InputError, NotEnoughDataError
from xdem.kernels.robust import nmad
from xdem.workflows import CoregRequest, run_coreg
from xdem.workflows.filters import OutlierFilters, _slope_at_points, filter_points
from xdem.workflows.points import NOT_FOR_POINTS, dh_at_points_stats

N = 6000
BLUNDER = 50.0
K = 3.0
RECORD_KEYS = {"min_slope_deg", "max_slope_deg", "nmad_filter", "applied_to", "slope_at", "points", "stable_points",
               "kept_by_slope", "dh_median", "dh_nmad", "dh_range", "kept_points", "kept_fraction"}


def horn_slope(z: np.ndarray, res: float) -> np.ndarray:
    """Horn's slope (degrees) of a float64 grid, NaN on its edges: written here from the formula,
    independently of xdem.terrain."""
    z = np.asarray(z, dtype=np.float64)
    out = np.full(z.shape, np.nan)
    a, b, c = z[:-2, :-2], z[:-2, 1:-1], z[:-2, 2:]
    d, f = z[1:-1, :-2], z[1:-1, 2:]
    g, h, i = z[2:, :-2], z[2:, 1:-1], z[2:, 2:]
    gx = ((c + 2 * f + i) - (a + 2 * d + g)) / (8 * res)
    gy = ((g + 2 * h + i) - (a + 2 * b + c)) / (8 * res)
    out[1:-1, 1:-1] = np.degrees(np.arctan(np.hypot(gx, gy)))
    return out


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pair")
    made = xdem.examples.write_example_pair(folder)
    with rasterio.open(made["ref"]) as src:
        ref, transform, crs = src.read(1).astype(np.float64), src.transform, src.crs
    with rasterio.open(made["tba"]) as src:
        tba = src.read(1).astype(np.float64)
    rng = np.random.default_rng(7)
    rows, cols = rng.integers(8, 392, N), rng.integers(8, 392, N)  # the DEMs are valid 8 pixels in
    blunders = np.zeros(N, dtype=bool)
    blunders[rng.choice(N, size=int(0.03 * N), replace=False)] = True
    x = transform.c + (cols + 0.5) * transform.a
    y = transform.f + (rows + 0.5) * transform.e
    return {"folder": folder, "ref_path": made["ref"], "tba_path": made["tba"], "truth": made["truth"], "ref": ref,
            "tba": tba, "crs": crs, "rows": rows, "cols": cols, "x": x, "y": y, "blunders": blunders}


def side(pair, points_are_ref: bool) -> dict:
    """Points and the DEM of one direction, with the independent dh and slope at the points:
    reference points on REF (DEM to align: TBA), or points to align on TBA (reference DEM: REF)."""
    r, c = pair["rows"], pair["cols"]
    dem = pair["tba"] if points_are_ref else pair["ref"]
    z = (pair["ref"] if points_are_ref else pair["tba"])[r, c] + BLUNDER * pair["blunders"]
    dh = dem[r, c] - z if points_are_ref else z - dem[r, c]
    gdf = gpd.GeoDataFrame({"h": z}, geometry=gpd.points_from_xy(pair["x"], pair["y"]), crs=pair["crs"])
    name = "ref_points" if points_are_ref else "tba_points"
    path = pair["folder"] / f"{name}.gpkg"
    if not path.exists():
        gdf.to_file(path)
    return {"gdf": gdf, "path": path, "dem_path": pair["tba_path"] if points_are_ref else pair["ref_path"],
            "dh": dh, "slope": horn_slope(dem, 1.0)[r, c]}


def prepared(pair, points_are_ref: bool, chunks: int | str = "auto", **masks):
    s = side(pair, points_are_ref)
    dem = xdem.open_dem(s["dem_path"], chunks=chunks)
    data = prepare_points(s["gdf"], dem, z_column="h", **masks) if points_are_ref else \
        prepare_points(dem, s["gdf"], z_column="h", **masks)
    return data, s


def nmad_rule(dh: np.ndarray, k: float) -> tuple[float, float, np.ndarray]:
    med, spread = float(np.median(dh)), float(nmad(dh))
    return med, spread, np.abs(dh - med) <= k * spread


@pytest.mark.parametrize("points_are_ref", [True, False], ids=["reference_points", "points_to_align"])
def test_nmad_filter_removes_the_planted_blunders(pair, points_are_ref):
    data, s = prepared(pair, points_are_ref)
    keep, record = filter_points(data, filters=OutlierFilters(nmad_filter=K))
    med, spread, inside = nmad_rule(s["dh"], K)
    assert record["stable_points"] == N and record["kept_by_slope"] == N  # no slope limit
    assert record["dh_median"] == pytest.approx(med, abs=1e-9) and record["dh_nmad"] == pytest.approx(spread, abs=1e-9)
    assert record["dh_range"] == pytest.approx([med - K * spread, med + K * spread], abs=1e-9)
    assert not keep[pair["blunders"]].any()  # every blunder is out
    np.testing.assert_array_equal(keep, inside)  # and exactly the points the rule says
    clean_out = int((~inside & ~pair["blunders"]).sum())
    assert record["kept_points"] == N - pair["blunders"].sum() - clean_out == int(keep.sum())
    assert clean_out < 0.05 * N  # dh of a 3.6 m shift on this terrain: few clean points beyond 3 NMAD
    assert record["kept_fraction"] == pytest.approx(record["kept_points"] / N)


@pytest.mark.parametrize("points_are_ref", [True, False], ids=["reference_points", "points_to_align"])
def test_slope_limits_keep_exactly_the_points_within_them(pair, points_are_ref):
    data, s = prepared(pair, points_are_ref)
    lo, hi = 5.0, 20.0
    expected = (s["slope"] >= lo) & (s["slope"] <= hi)
    assert 0.2 * N < expected.sum() < 0.9 * N  # the limits cut on both sides
    assert np.min(np.abs(s["slope"] - lo)) > 1e-7 and np.min(np.abs(s["slope"] - hi)) > 1e-7  # no tie to round
    keep, record = filter_points(data, filters=OutlierFilters(min_slope=lo, max_slope=hi))
    np.testing.assert_array_equal(keep, expected)
    assert record["kept_by_slope"] == record["kept_points"] == int(expected.sum())
    assert record["dh_range"] is None and record["stable_points"] == N
    # the median and NMAD are those of every stable point, as for two DEMs (not only those kept by slope)
    assert record["dh_median"] == pytest.approx(float(np.median(s["dh"])), abs=1e-9)
    # and the slopes themselves: those of the independent Horn slope, and of xdem.terrain.slope
    prow, pcol = xdem.points.pixel_positions(data.dem, data.points.x, data.points.y)
    _, windows, _ = xdem.points.dem_at_points(data.values, prow, pcol, resampling="lagrange", half=1)
    got = _slope_at_points(windows, prow, pcol, res_x=1.0, res_y=-1.0)
    np.testing.assert_allclose(got, s["slope"], atol=1e-9)
    terrain = xdem.terrain.slope(data.dem).values[pair["rows"], pair["cols"]]
    np.testing.assert_allclose(got, terrain, atol=1e-4)  # float32 output


def test_slope_of_planes_of_known_slope():
    """Two planes meeting along a line: 10 degrees west of it, 45 degrees east; points off the
    pixel centres too (the slope is that of the pixel holding the point)."""
    res, n = 2.0, 120
    xs = (np.arange(n) + 0.5) * res
    x = np.broadcast_to(xs, (n, n))
    edge = 60.0 * res
    z = np.where(x < edge, np.tan(np.radians(10)) * x, np.tan(np.radians(10)) * edge + np.tan(np.radians(45)) * (x - edge))
    transform = Affine(res, 0.0, 0.0, 0.0, -res, n * res)
    dem = xr.DataArray(z.astype(np.float64), dims=("y", "x"), coords={"y": n * res - xs, "x": xs})
    dem = dem.rio.write_crs("EPSG:32633").rio.write_transform(transform).chunk(32)
    rng = np.random.default_rng(3)
    px, py = rng.uniform(4 * res, (n - 4) * res, 2000), rng.uniform(4 * res, (n - 4) * res, 2000)
    col = np.floor(px / res).astype(int)  # the pixel holding the point
    truth = np.where(col <= 58, 10.0, np.where(col >= 61, 45.0, np.nan))  # columns 59, 60 see both planes
    pts = gpd.GeoDataFrame({"z": np.interp(px, xs, z[0])}, geometry=gpd.points_from_xy(px, py), crs="EPSG:32633")
    keep, record = filter_points(prepare_points(pts, dem), filters=OutlierFilters(max_slope=30.0))
    known = np.isfinite(truth)
    np.testing.assert_array_equal(keep[known], truth[known] == 10.0)
    assert record["stable_points"] == 2000 and 0 < (~known).sum() < 200
    keep, _ = filter_points(prepare_points(pts, dem), filters=OutlierFilters(min_slope=44.9, max_slope=45.1))
    np.testing.assert_array_equal(keep[known], truth[known] == 45.0)


def test_masks_decide_the_stable_points_and_results_do_not_depend_on_chunks(pair):
    data, s = prepared(pair, True)
    exclude = xr.zeros_like(data.dem, dtype=bool)
    exclude[:, :200] = True  # the western half is unstable
    masked, _ = prepared(pair, True, exclude_mask=exclude)
    keep, record = filter_points(masked, filters=OutlierFilters(nmad_filter=K))
    east = pair["cols"] >= 200
    assert record["stable_points"] == int(east.sum())
    med, spread, inside = nmad_rule(s["dh"][east], K)
    assert record["dh_median"] == pytest.approx(med, abs=1e-9) and record["dh_nmad"] == pytest.approx(spread, abs=1e-9)
    assert not keep[~east].any() and np.array_equal(keep[east], inside)
    filters = OutlierFilters(min_slope=3.0, max_slope=25.0, nmad_filter=K)
    results = [filter_points(prepared(pair, True, chunks=c)[0], filters=filters) for c in (64, 150, 400)]
    for keep_c, record_c in results[1:]:
        np.testing.assert_array_equal(keep_c, results[0][0])
        assert record_c == results[0][1]


def test_filters_that_keep_nothing_or_no_overlap_say_so(pair):
    data, _ = prepared(pair, True)
    with pytest.raises(NotEnoughDataError, match="keep none of the 6000 points"):
        filter_points(data, filters=OutlierFilters(min_slope=89.0))
    far = replace(data, points=replace(data.points, x=data.points.x + 1e6))
    with pytest.raises(NotEnoughDataError, match="none of the 6000 points falls on a valid DEM pixel"):
        filter_points(far, filters=OutlierFilters(nmad_filter=K))
    with pytest.raises(InputError, match="must be below max_slope"):
        filter_points(data, filters=OutlierFilters(min_slope=30.0, max_slope=10.0))


def _error(doc: dict, truth: dict) -> float:
    step = doc["steps"][0]
    return float(np.hypot(step["shift_x"] - truth["shift_x"], step["shift_y"] - truth["shift_y"]))


@pytest.mark.parametrize("points_are_ref", [True, False], ids=["reference_points", "points_to_align"])
def test_run_coreg_with_filters_fits_on_the_kept_points_and_keeps_every_point_in_the_stats(pair, tmp_path,
                                                                                           points_are_ref):
    s = side(pair, points_are_ref)
    ref, tba = (s["path"], s["dem_path"]) if points_are_ref else (s["dem_path"], s["path"])
    out = ".tif" if points_are_ref else ".gpkg"
    docs = {}
    for name, filters in (("none", None), ("nmad", OutlierFilters(nmad_filter=K)),
                          ("all", OutlierFilters(min_slope=2.0, max_slope=25.0, nmad_filter=K))):
        result = run_coreg(CoregRequest(reference=ref, to_be_aligned=tba, output=tmp_path / f"{name}{out}",
                                        coreg=xdem.coreg.NuthKaab(), z_column="h", filters=filters,
                                        json_out=tmp_path / f"{name}.json"))
        docs[name] = json.loads((tmp_path / f"{name}.json").read_text())
        assert docs[name] == json.loads(result.json_text)
    assert docs["none"]["filters"] is None
    truth = pair["truth"]
    for name in ("nmad", "all"):
        doc = docs[name]
        assert set(doc["filters"]) == RECORD_KEYS
        assert doc["filters"]["points"] == doc["filters"]["stable_points"] == N
        # the fit saw the kept points only; the statistics before are over every point, blunders included
        assert doc["steps"][0]["count"] <= doc["filters"]["kept_points"] < N - pair["blunders"].sum() + 1
        expected = dh_at_points_stats(s["dh"])
        for key in ("count", "median", "nmad", "mean", "rmse"):
            assert doc["stats"]["before"][key] == pytest.approx(expected[key], abs=1e-9), key
        assert doc["stats"]["before"] == docs["none"]["stats"]["before"]
        assert doc["stats"]["after"]["count"] == docs["none"]["stats"]["after"]["count"] >= N - 10
        assert doc["stats"]["after"]["rmse"] > 1.0  # the blunders are still counted after
        assert _error(doc, truth) <= _error(docs["none"], truth) + 2e-4 and _error(doc, truth) < 0.05
        assert doc["steps"][0]["shift_z"] == pytest.approx(truth["shift_z"], abs=0.05)
    rec = docs["all"]["filters"]
    expected_slope = (s["slope"] >= 2.0) & (s["slope"] <= 25.0)
    med, spread, inside = nmad_rule(s["dh"], K)
    assert (rec["min_slope_deg"], rec["max_slope_deg"], rec["nmad_filter"]) == (2.0, 25.0, K)
    assert rec["kept_by_slope"] == int(expected_slope.sum())
    assert rec["kept_points"] == int((expected_slope & inside).sum())
    assert rec["dh_range"] == pytest.approx([med - K * spread, med + K * spread], abs=1e-9)


def test_cli_filters_with_points_both_ways(pair, tmp_path):
    runner = CliRunner()
    fwd, rev = side(pair, True), side(pair, False)
    res = runner.invoke(main, ["coreg", str(fwd["path"]), str(fwd["dem_path"]), "-o", str(tmp_path / "a.tif"),
                               "--z-column", "h", "--max-slope", "25", "--nmad-filter", "3", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    _, _, inside = nmad_rule(fwd["dh"], 3.0)
    kept = int((inside & (fwd["slope"] <= 25.0)).sum())
    assert doc["filters"]["kept_points"] == kept and doc["filters"]["max_slope_deg"] == 25.0
    assert f"Filters (fit only): slope <= 25°, |dh - {doc['filters']['dh_median']:.3f}| <= 3 x " in res.stderr
    assert f"; {kept} of {N} points on valid DEM pixels kept" in res.stderr
    res = runner.invoke(main, ["coreg", str(rev["dem_path"]), str(rev["path"]), "-o", str(tmp_path / "m.gpkg"),
                               "--z-column", "h", "--min-slope", "2", "--json", "-q"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["filters"]["kept_points"] == doc["filters"]["kept_by_slope"] == int((rev["slope"] >= 2.0).sum())
    assert doc["filters"]["nmad_filter"] is None and doc["filters"]["dh_range"] is None
    assert _error(doc, pair["truth"]) < 0.05


@pytest.mark.parametrize("flag, key", [("--dh-out", "dh_out"), ("--stable-mask-out", "stable_mask_out")])
def test_raster_outputs_with_points_are_one_line_usage_errors(pair, tmp_path, flag, key):
    s = side(pair, True)
    res = CliRunner().invoke(main, ["coreg", str(s["path"]), str(s["dem_path"]), "-o", str(tmp_path / "a.tif"),
                                    "--z-column", "h", flag, str(tmp_path / "x.tif")])
    assert res.exit_code == 2
    assert f"Invalid value for '{flag}': {NOT_FOR_POINTS[key]}" in res.stderr
    assert "Traceback" not in res.output and not (tmp_path / "a.tif").exists()
    with pytest.raises(InputError, match=f"^{key} is not available with points: it is a raster"):
        run_coreg(CoregRequest(reference=s["path"], to_be_aligned=s["dem_path"], output=tmp_path / "b.tif",
                               coreg=xdem.coreg.NuthKaab(), z_column="h", **{key: tmp_path / "x.tif"}))
