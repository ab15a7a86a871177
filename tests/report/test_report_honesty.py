"""What users read must match what was done (issue 11, section 2).

* the report uses the stable pixels (inlier/exclude masks) for every statistic, histogram,
  diagnostic, slope table and colour scale, outlines the mask and reports what happened
  inside it;
* NuthKaabDeramp's translation is in the matrix and its tilt in human units;
* a verdict (residual aspect-dependent amplitude, NMAD ratio) flags a job not done;
* the page shows the JSON's numbers, timing included;
* dh colours: negative red, positive blue.
"""

from __future__ import annotations

import base64
import html as _html
import io
import json
import re

import dask.array as da
import geopandas as gpd
import matplotlib.image
import numpy as np
import pytest
import rasterio
import shapely
from click.testing import CliRunner
from helpers import MaxResult, compare_shown, json_at

import xdem
import xdem.coreg
import xdem.examples
from xdem.cli import main
from xdem.io.grid import get_transform
from xdem.masks import rasterize_like
from xdem.report import figures as F
from xdem.report import write_report
from xdem.report.html import fmt
from xdem.spatialstats import stats_by_slope_class
from xdem.verdict import compute_verdict, residual_sinusoid

#: Integer-pixel displacement of the glacier pair (1 m pixels): resampling is then exact.
D = (3.0, -2.0)
GLACIER_DH = -20.0
#: Noise (m) of tba: the uncertainties inside the mask are then not zero.
NOISE = 0.3


def _keys(text: str) -> dict[str, str]:
    """``data-key`` -> text shown (HTML entities decoded, as a browser shows them)."""
    return {k: _html.unescape(v) for k, v in re.findall(r'data-key="([^"]+)">([^<]*)<', text)}


def _box(ref):
    t = get_transform(ref)
    return shapely.box(t.c + 100, t.f - 320, t.c + 260, t.f - 120)  # 160 x 200 m, 32000 pixels


@pytest.fixture(scope="module")
def glacier():
    """The example pair displaced by D, with a 'glacier' losing 20 m inside a box (in the
    reference frame), the exclude mask (the box, a GeoDataFrame) and a fitted NuthKaab."""
    ref, tba, _ = xdem.examples.example_pair(shift_x=D[0], shift_y=D[1], noise=NOISE, chunks=100)
    box = _box(ref)
    mask = gpd.GeoDataFrame(geometry=[box], crs=ref.rio.crs)
    # tba(x) = ref(x - D): the glacier seen at ref position p is at p + D in tba
    moved = gpd.GeoDataFrame(geometry=[shapely.affinity.translate(box, D[0], D[1])], crs=ref.rio.crs)
    tba = tba.copy(data=da.where(rasterize_like(moved, tba), tba.data + GLACIER_DH, tba.data))
    nk = xdem.coreg.NuthKaab(subsample=50_000).fit(ref, tba, exclude_mask=mask)
    return ref, tba, nk.apply(tba), nk, mask


@pytest.fixture(scope="module")
def glacier_report(glacier, tmp_path_factory):
    ref, tba, aligned, nk, mask = glacier
    seen = {}
    real_hist, real_maps = F.histogram_figure, F.maps_figure

    def hist(sample, **kw):
        seen["hist"] = {k: np.array(v) for k, v in sample.items()}
        return real_hist(sample, **kw)

    def maps(m, **kw):
        seen["limits"] = dict(kw.get("limits") or {})
        seen["stable_map"] = kw.get("stable_map")
        return real_maps(m, **kw)

    mp = pytest.MonkeyPatch()
    mp.setattr(F, "histogram_figure", hist)
    mp.setattr(F, "maps_figure", maps)
    try:
        path = write_report(tmp_path_factory.mktemp("gl") / "r.html", ref=ref, tba=tba, aligned=aligned, coreg=nk,
                            exclude_mask=mask, subsample=20_000, random_state=1)
    finally:
        mp.undo()
    return path.read_text(encoding="utf-8"), seen


def _stable_dh(glacier, name):
    ref, tba, aligned, _, mask = glacier
    other = aligned if name == "after" else tba
    inside = rasterize_like(mask, ref)
    dh = other.data.astype(np.float64) - ref.data.astype(np.float64)
    return da.where(~inside, dh, np.nan), dh


# ------------------------------------------------------------------------------ masks
def test_glacier_pair_statistics_use_stable_pixels(glacier, glacier_report):
    text, _ = glacier_report
    keys = _keys(text)
    for name in ("before", "after"):
        stable, everything = _stable_dh(glacier, name)
        s = xdem.spatialstats.robust_summary(stable)
        a = xdem.spatialstats.robust_summary(everything)
        for k in ("count", "median", "nmad", "min", "max"):
            assert keys[f"report.stats.{name}.{k}"] == fmt(s[k]), (name, k)
        assert keys[f"report.stats.{name}.min"] != fmt(a["min"])  # the glacier is not in there
    stable, everything = _stable_dh(glacier, "after")
    # the page's slope table on stable pixels: small RMSE, unlike the all-pixel one
    slope = xdem.terrain.slope(glacier[0])
    exp_stable = stats_by_slope_class(stable, slope.data)
    exp_all = stats_by_slope_class(everything, slope.data)
    for i in range(len(exp_stable)):
        if exp_stable["count"].iloc[i] == 0:
            continue
        # count exact; RMSE on the class's sampled pixels (20 000 drawn in all): within 10 % of the exact one
        assert keys[f"report.slope_classes.after.{i}.count"] == fmt(int(exp_stable["count"].iloc[i]))
        page = float(keys[f"report.slope_classes.after.{i}.rmse"])
        if int(keys[f"report.slope_classes.after.{i}.sample_count"]) >= 500:
            assert page == pytest.approx(float(exp_stable["rmse"].iloc[i]), rel=0.1)
        assert keys[f"report.slope_classes.after.{i}.rmse"] != fmt(float(exp_all["rmse"].iloc[i]))
    assert float(xdem.spatialstats.robust_summary(stable)["rmse"]) < 1.0
    assert float(xdem.spatialstats.robust_summary(everything)["rmse"]) > 5.0


def test_glacier_pair_histograms_diagnostic_and_colour_scales_use_stable_pixels(glacier, glacier_report):
    text, seen = glacier_report
    keys = _keys(text)
    stable, _ = _stable_dh(glacier, "before")
    stable_after, _ = _stable_dh(glacier, "after")  # one subsample: valid before AND after
    assert keys["report.n_valid"] == fmt(int((da.isfinite(stable) & da.isfinite(stable_after)).sum().compute()))
    before, after = seen["hist"]["before"], seen["hist"]["after"]
    assert before.size == after.size == 20_000
    assert np.nanmin(after) > -5.0  # no glacier pixel (-20 m) in the histogram
    # before alignment the glacier sits D = 3.6 m off its outline: a thin band leaks (< 2 %), not 20 %
    assert (before < -5.0).mean() < 0.02
    assert seen["limits"]["after"] < 1.0 and seen["limits"]["before"] < 6.0  # not set by the 20 m glacier
    frac = seen["stable_map"]
    assert frac is not None and frac.min() == 0.0 and frac.max() == 1.0  # the outline is drawn from it
    assert "The black line is the outline of the mask" in text
    assert "stable pixels only (inlier/exclude masks applied)" in text and "stable terrain only" in text  # notes
    assert keys["report.verdict.ok"] == "true"


#: SI factor of each unit the inside-mask block shows (``data-unit``).
_SI = {"m": 1.0, "m²": 1.0, "km²": 1e6, "m³": 1.0, "10⁶ m³": 1e6, "km³": 1e9, "t": 1e3, "Mt": 1e9, "Gt": 1e12, "m w.e.": 1.0,
       "pixels": 1.0, "samples": 1.0}


def _inside(text: str) -> dict[str, tuple[float, str]]:
    """``report.inside.*`` key -> (value in SI units, unit shown)."""
    found = re.findall(r'data-unit="([^"]+)" data-key="(report\.inside\.[^"]+)">([^<]*)<', text)
    return {k: (float(v) * _SI[_html.unescape(u)], _html.unescape(u)) for u, k, v in found if v != "—"}


def test_inside_mask_block_mean_volume_and_mass_in_readable_units(glacier, glacier_report):
    text, _ = glacier_report
    keys, shown = _keys(text), _inside(text)
    assert '<section id="inside-mask">' in text
    n_mask = 160 * 200
    assert keys["report.inside.mask_pixels"] == str(n_mask)
    area, unit = shown["report.inside.area"]
    assert unit == "km²" and keys["report.inside.area"] == "0.032" and area == n_mask  # 1 m pixels
    mean = shown["report.inside.after.mean_dh"][0]
    assert abs(mean - GLACIER_DH) < 0.05, mean
    assert shown["report.inside.before.mean_dh"][0] < -15.0  # + 2.5 m offset, glacier not yet on its outline
    rel = 2e-3  # each shown number has 4 significant figures (relative rounding <= 5e-4); products of two of them
    for name in ("before", "after"):
        m = shown[f"report.inside.{name}.mean_dh"][0]
        vol, vol_unit = shown[f"report.inside.{name}.volume"]
        assert vol_unit == "10⁶ m³" and abs(vol - area * m) <= rel * abs(vol)  # ~6e5 m³: below 0.01 km³
        u = shown[f"report.inside.{name}.mean_dh_uncertainty"][0]
        nmad = shown[f"report.inside.{name}.nmad_stable"][0]
        # between independent pixels (n_eff = pixels of the mask) and fully correlated errors
        assert nmad / np.sqrt(n_mask) * 0.99 <= u <= nmad * (1 + rel), (name, u, nmad)
        assert 1.0 <= shown[f"report.inside.{name}.n_eff"][0] <= n_mask * 1.0001
        vol_u = shown[f"report.inside.{name}.volume_uncertainty"][0]
        assert abs(vol_u - area * u) <= rel * vol_u + 1e-3
        # mass at 850 ± 60 kg/m³ (Huss 2013): M = rho V, sigma_M = hypot(rho sigma_V, V sigma_rho)
        mass, mass_unit = shown[f"report.inside.{name}.mass"]
        assert mass_unit == "Mt" and abs(mass - 850.0 * vol) <= rel * abs(mass)
        sigma_m = shown[f"report.inside.{name}.mass_uncertainty"][0]
        assert abs(sigma_m - np.hypot(850.0 * vol_u, 60.0 * vol)) <= rel * sigma_m
        we, we_unit = shown[f"report.inside.{name}.mean_dh_we"]
        assert we_unit == "m w.e." and abs(we - 0.85 * m) <= rel * abs(we)
    assert "n_eff" in text and "variogram" in text
    assert "850 ± 60 kg/m³ (Huss, 2013" in text


def test_masked_report_stays_out_of_core(tmp_path, monkeypatch):
    monkeypatch.setattr(xdem.stats, "STATS_SUBSAMPLE", 5_000)  # sampled values (3, n) below a raster's size
    ref, tba, _ = xdem.examples.example_pair(chunks=100)
    mask = gpd.GeoDataFrame(geometry=[_box(ref)], crs=ref.rio.crs)
    nk = xdem.coreg.NuthKaab(subsample=5_000).fit(ref, tba, exclude_mask=mask)
    cb = MaxResult()
    with cb:
        write_report(tmp_path / "r.html", ref=ref, tba=tba, aligned=nk.apply(tba), coreg=nk, exclude_mask=mask,
                     max_pixels=2500, subsample=5_000)
    full = ref.size * 4
    assert cb.max_2d_bytes < full / 4, cb.max_2d_bytes
    assert cb.max_bytes <= max(full / 4, xdem.stats.MAX_GATHER * 8), cb.max_bytes


# ---------------------------------------------------------------------- CLI, page == JSON
@pytest.fixture(scope="module")
def glacier_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("glpair")
    xdem.examples.write_example_pair(folder, shift_x=D[0], shift_y=D[1], noise=NOISE)
    ref = xdem.open_dem(folder / "ref.tif")
    box = _box(ref)
    moved = gpd.GeoDataFrame(geometry=[shapely.affinity.translate(box, D[0], D[1])], crs=ref.rio.crs)
    with rasterio.open(folder / "tba.tif") as src:
        profile, z = src.profile, src.read(1)
    g = rasterize_like(moved, xdem.open_dem(folder / "tba.tif")).compute()
    z = np.where(g & (z != profile.get("nodata")), z + GLACIER_DH, z).astype(z.dtype)
    with rasterio.open(folder / "tba.tif", "w", **profile) as dst:
        dst.write(z, 1)
    gpd.GeoDataFrame(geometry=[box], crs=ref.rio.crs).to_file(folder / "glacier.gpkg")
    return folder


@pytest.fixture(scope="module")
def coreg_report(glacier_files, tmp_path_factory):
    """``xdem coreg --exclude-mask --report --json-out`` on the glacier pair: (JSON, page path)."""
    f, out = glacier_files, tmp_path_factory.mktemp("run")
    res = CliRunner().invoke(main, [
        "coreg", str(f / "ref.tif"), str(f / "tba.tif"), "-o", str(out / "a.tif"), "--exclude-mask",
        str(f / "glacier.gpkg"), "--report", str(out / "r.html"), "--json-out", str(out / "c.json")])
    assert res.exit_code == 0, res.output
    return json.loads((out / "c.json").read_text()), out / "r.html"


def _compare(doc: dict, keys: dict[str, str]) -> int:
    """Assert every shown number whose key is in the JSON equals it; return how many."""
    return compare_shown(doc, keys)


def test_coreg_report_page_numbers_equal_json_with_masks(coreg_report):
    doc, page = coreg_report
    text = page.read_text()
    keys = _keys(text)
    assert _compare(doc, keys) >= 40
    for key in ("timing.fit_s", "timing.write_s", "timing.stats_s", "timing.verdict_s", "timing.report_s",
                "timing.total_s", "peak_rss_mb", "stats.before.count", "stats.after.count", "stats.before.sampled",
                "steps.0.count", "verdict.ok", "verdict.residual_amplitude_m", "verdict.nmad_ratio", "matrix.0.3"):
        assert keys[key] == fmt(json_at(doc, key)), key
    assert doc["timing"]["report_s"] > 0 and doc["timing"]["total_s"] > doc["timing"]["report_s"]
    assert "report.elapsed_s" not in keys  # one report time on the page: the JSON's
    # the masks reached the report; counts are labelled
    assert abs(float(keys["report.inside.after.mean_dh"]) - GLACIER_DH) < 0.05
    assert "count (valid stable pixels, exact)" in text and "count (sampled points in the final fit)" in text
    assert doc["verdict"]["ok"] is True and doc["verdict"]["passes"] == 0  # drawn in the writing pass


def test_coreg_report_numbers_in_headless_chromium(coreg_report, tmp_path):
    """The same comparison on what the browser shows (textContent of every data-key element)."""
    from test_report import shown_in_chromium

    doc, page = coreg_report
    check = shown_in_chromium(page, tmp_path / "probe.html")
    assert len(check["images"]) >= 4 and all(w > 0 and h > 0 for w, h in check["images"])
    shown = dict(check["keys"])
    assert _compare(doc, shown) >= 40
    for key in ("timing.report_s", "timing.total_s", "peak_rss_mb", "verdict.nmad_ratio", "stats.after.count"):
        assert shown[key] == fmt(json_at(doc, key)), key


def test_cli_report_takes_masks(glacier_files, coreg_report, tmp_path):
    """``xdem report`` with and without ``--exclude-mask`` on the aligned DEM of the module's
    ``xdem coreg --exclude-mask`` run (the fixture's: the same command, with its report too)."""
    f = glacier_files
    runner = CliRunner()
    aligned = coreg_report[1].with_name("a.tif")
    assert aligned.exists()
    base = ["report", str(f / "ref.tif"), str(f / "tba.tif"), str(aligned), "--subsample", "5000"]
    res = runner.invoke(main, [*base, "-o", str(tmp_path / "m.html"), "--exclude-mask", str(f / "glacier.gpkg")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, [*base, "-o", str(tmp_path / "n.html")])
    assert res.exit_code == 0, res.output
    masked, plain = _keys((tmp_path / "m.html").read_text()), _keys((tmp_path / "n.html").read_text())
    assert abs(float(masked["report.inside.after.mean_dh"]) - GLACIER_DH) < 0.05
    assert "report.inside.mask_pixels" not in plain
    assert float(masked["report.stats.after.min"]) > -5.0  # noise only (0.3 m)
    assert float(plain["report.stats.after.min"]) < -15.0  # without the mask the glacier is in the statistics


# ------------------------------------------------------------------------ NuthKaabDeramp
def test_nuthkaab_deramp_matrix_and_tilt_in_json(tmp_path):
    folder = tmp_path / "pair"
    xdem.examples.write_example_pair(folder, tilt=(0.004, -0.003))
    res = CliRunner().invoke(main, ["coreg", str(folder / "ref.tif"), str(folder / "tba.tif"), "-o",
                                    str(tmp_path / "a.tif"), "--method", "nuthkaab_deramp", "--json-out",
                                    str(tmp_path / "c.json"), "--report", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "c.json").read_text())
    truth = json.loads((folder / "truth.json").read_text())
    m = np.array(doc["matrix"])
    assert not np.allclose(m, np.eye(4))
    # z: minus the ramp of dh at the grid centre, after the shift: dz + tilt . (dx, dy)
    z = truth["shift_z"] - (0.004 * truth["dx"] - 0.003 * truth["dy"])
    np.testing.assert_allclose(m[:3, 3], [truth["shift_x"], truth["shift_y"], z], atol=0.002)
    assert doc["matrix_is_complete"] is False  # a ramp remains on top of the translation
    step = doc["steps"][0]
    assert step["tilt_m_per_km"] == pytest.approx(5.0, abs=0.01)  # |(4, -3)| m/km
    assert step["tilt_direction_deg"] == pytest.approx(np.degrees(np.arctan2(-4, 3)) % 360, abs=0.5)
    assert step["ramp_amplitude"] == pytest.approx((0.004 + 0.003) * 400, abs=0.01)
    assert "tilt 5.000 m/km down towards 307° from north" in res.stderr
    assert "ramp 2.800 m across the DEM" in res.stderr
    text = (tmp_path / "r.html").read_text()
    assert 'alt="Nuth and Kaab diagnostic"' in text and 'alt="Nuth and Kaab iterations"' in text
    assert len(step["history"]) == step["n_iterations"] >= 2


def test_report_draws_nuthkaab_deramp_curve_and_iterations(tmp_path, monkeypatch):
    ref, tba, truth = xdem.examples.example_pair(chunks=200, tilt=(0.004, -0.003))
    nkd = xdem.coreg.NuthKaabDeramp().fit(ref, tba)
    seen = {}
    real_nk, real_hist = F.nuth_kaab_figure, F.history_figure
    monkeypatch.setattr(F, "nuth_kaab_figure", lambda s, **kw: (seen.update(shift=kw["shift"]), real_nk(s, **kw))[1])
    monkeypatch.setattr(F, "history_figure", lambda h, **kw: (seen.update(history=h, label=kw["label"]),
                                                              real_hist(h, **kw))[1])
    write_report(tmp_path / "r.html", ref=ref, tba=tba, aligned=nkd.apply(tba), coreg=nkd, subsample=5_000,
                 max_pixels=10_000)
    assert seen["shift"] == pytest.approx((truth["shift_x"], truth["shift_y"]), abs=0.01)  # the fitted curve
    assert seen["history"] == nkd.history_ and seen["label"] == "NuthKaabDeramp"


def test_nuthkaab_deramp_translation_part_complete_only_without_ramp():
    ref, tba, truth = xdem.examples.example_pair(chunks=200)
    nkd = xdem.coreg.NuthKaabDeramp(poly_order=0).fit(ref, tba)
    (sx, sy, sz), complete = nkd.translation_part()
    assert complete and abs(sx - truth["shift_x"]) < 0.01 and abs(sz - truth["shift_z"]) < 0.01
    assert nkd.tilt_m_per_km_ == 0.0 and nkd.tilt_direction_deg_ is None and nkd.ramp_amplitude_ == 0.0


# ------------------------------------------------------------------------------- verdict
def test_residual_sinusoid_recovers_a_known_amplitude():
    rng = np.random.default_rng(0)
    slope, aspect = rng.uniform(5, 40, 20_000), rng.uniform(0, 360, 20_000)
    dh = 1.5 * np.cos(np.radians(30.0 - aspect)) * np.tan(np.radians(slope)) + rng.normal(0, 0.05, 20_000)
    res = residual_sinusoid(dh, slope, aspect)
    assert res["amplitude"] == pytest.approx(1.5, abs=0.03)
    assert res["direction_deg"] == pytest.approx(30.0, abs=2.0)
    assert residual_sinusoid(dh[:50], slope[:50], aspect[:50]) is None  # too few points


def test_verdict_flags_vshift_on_a_shifted_pair_and_passes_nuthkaab(tmp_path):
    folder = tmp_path / "pair"
    truth = xdem.examples.write_example_pair(folder)["truth"]
    runner = CliRunner()
    docs, errs = {}, {}
    for method in ("vshift", "nuthkaab"):
        res = runner.invoke(main, ["coreg", str(folder / "ref.tif"), str(folder / "tba.tif"), "-o",
                                   str(tmp_path / f"{method}.tif"), "--method", method, "--json-out",
                                   str(tmp_path / f"{method}.json")])
        assert res.exit_code == 0, res.output
        docs[method], errs[method] = json.loads((tmp_path / f"{method}.json").read_text()), res.stderr
    bad, good = docs["vshift"]["verdict"], docs["nuthkaab"]["verdict"]
    shift = float(np.hypot(truth["shift_x"], truth["shift_y"]))  # 3.66 m
    assert bad["ok"] is False
    assert bad["residual_amplitude_m"] == pytest.approx(shift, rel=0.1)  # first order: slightly under
    assert bad["residual_dh_m"] > 0.25 * bad["nmad_after"]  # shift x tan(slope) well above the noise
    assert bad["nmad_ratio"] == pytest.approx(1.0, abs=0.01)
    assert "residual sinusoid" in bad["hint"] and "nuthkaab" in bad["hint"]
    assert bad["status"] == "not ok" and bad["failed"] == ["residual_shift"]  # every other check passes
    assert "Verdict: NOT OK (failed: residual_shift;" in errs["vshift"]
    assert "hint (residual_shift: 3.4" in errs["vshift"] and "px, not <= 0.2 px): residual sinusoid" in errs["vshift"]
    assert good["ok"] is True and good["status"] == "ok" and good["hint"] is None and good["residual_amplitude_m"] < 0.02
    assert good["nmad_ratio"] < 0.05 and "Verdict: OK (9 of 9 checks passed)" in errs["nuthkaab"]
    assert good["passes"] == bad["passes"] == 0  # drawn in the pass that writes the aligned DEM
    # not fused with the write (--exact-stats): one pass of its own, the same verdict
    res = runner.invoke(main, ["coreg", str(folder / "ref.tif"), str(folder / "tba.tif"), "-o",
                               str(tmp_path / "exact.tif"), "--method", "vshift", "--exact-stats", "--json", "-q"])
    assert res.exit_code == 0, res.output
    other = json.loads(res.stdout)["verdict"]
    assert other["passes"] == 1 and other["ok"] is False
    assert other["residual_amplitude_m"] == pytest.approx(bad["residual_amplitude_m"], rel=0.02)


def test_verdict_flags_a_noisier_result():
    rng = np.random.default_rng(1)
    n = 5000
    sample = {"before": rng.normal(0, 1.0, n), "after": rng.normal(0, 1.5, n),
              "slope": rng.uniform(5, 30, n), "aspect": rng.uniform(0, 360, n)}
    v = compute_verdict(sample, pixel_size=1.0, methods=["nuthkaab"])
    assert v["ok"] is False and v["nmad_ratio"] == pytest.approx(1.5, rel=0.05) and "noisier" in v["hint"]
    assert compute_verdict({"before": sample["before"]}, pixel_size=1.0) is None


# ------------------------------------------------------------------------------ colours
def test_dh_colormap_negative_is_red():
    assert F.DH_CMAP == "RdBu"
    neg = np.full((40, 40), -5.0)
    neg[0, 0] = 5.0  # a symmetric scale
    png = F.maps_figure({"ref": np.ones((40, 40)), "before": neg}, extent=(0, 40, 0, 40), crs="EPSG:32632",
                        units="m", factor=1, limits={"before": 5.0})
    img = matplotlib.image.imread(io.BytesIO(base64.b64decode(png)), format="png")
    h, w = img.shape[:2]
    r, g, b = img[h // 2, int(w * 0.70), :3]  # middle of the dh panel (right half of the figure)
    assert r > 0.35 and r > b + 0.2, (r, g, b)
