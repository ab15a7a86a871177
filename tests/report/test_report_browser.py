"""The HTML reports of ``xdem coreg --report`` rendered in headless Chromium for a masked pair,
a tilted pair, a blockwise run and a points run: every image decodes, every number tagged with
``data-key`` equals the JSON document, the sections of issue 17 are there, and a screenshot of
each page is saved in the test's tmp folder."""

from __future__ import annotations

import json

import geopandas as gpd
import matplotlib.image
import numpy as np
import pytest
import rasterio
from click.testing import CliRunner
from helpers import compare_shown, json_at
from shapely.geometry import Point, box
from test_report import shown_in_chromium

import xdem
from xdem.cli import main
from xdem.report.html import fmt

# end-to-end (headless Chromium): `pytest -m 'not slow'` leaves them out; `make test` runs them
pytestmark = pytest.mark.slow


def _browser_check(report, tmp_path, name):
    """Images and data-key texts as Chromium shows them; a screenshot ``<name>.png`` in tmp_path."""
    shot = tmp_path / f"{name}.png"
    check = shown_in_chromium(report, tmp_path / f"{name}-probe.html", f"--screenshot={shot}", "--window-size=1400,2400")
    assert shot.exists(), check["proc"].stderr[-2000:]
    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[:2] == (2400, 1400) and pixels[..., :3].std() > 0.05  # a real, non-blank page
    return check


def _numbers_equal_json(check, doc, *, required):
    assert check["images"] and all(w > 0 and h > 0 for w, h in check["images"]), check["images"]
    shown = dict(check["keys"])
    compared = compare_shown(doc, shown)
    for key in required:
        assert shown[key] == fmt(json_at(doc, key)), key
    return compared


_MAIN = ["stats.before.count", "stats.before.mean", "stats.before.median", "stats.before.std", "stats.before.nmad",
         "stats.before.rmse", "stats.before.min", "stats.before.max", "stats.before.le90", "stats.after.count",
         "stats.after.mean", "stats.after.median", "stats.after.std", "stats.after.nmad", "stats.after.rmse",
         "stats.after.min", "stats.after.max", "stats.after.le90", "inputs.reference_facts.crs",
         "inputs.to_be_aligned_facts.size.0", "inputs.reference_facts.resolution.0"]


@pytest.fixture(scope="module")
def runner():
    return CliRunner()


def _coreg(runner, folder, ref, tba, *extra):
    out, js, report = folder / "aligned.tif", folder / "run.json", folder / "report.html"
    res = runner.invoke(main, ["coreg", str(ref), str(tba), "-o", str(out), "--json-out", str(js), "--report",
                               str(report), "-q", *extra])
    assert res.exit_code == 0, res.output
    return json.loads(js.read_text()), report


def test_masked_pair(runner, tmp_path):
    pair = xdem.examples.write_example_pair(tmp_path / "pair")
    with rasterio.open(pair["ref"]) as src:
        b = src.bounds
    glacier = box(b.left + 100, b.bottom + 100, b.left + 250, b.bottom + 250)
    mask = tmp_path / "glacier.gpkg"
    gpd.GeoDataFrame(geometry=[glacier], crs=src.crs).to_file(mask)
    doc, report = _coreg(runner, tmp_path, pair["ref"], pair["tba"], "--exclude-mask", str(mask))
    text = report.read_text()
    for sid in ("inputs", "maps", "diagnostics", "inside-mask"):
        assert f'id="{sid}"' in text, sid
    assert "ONE colour scale" in text and "outline of the mask" in text
    check = _browser_check(report, tmp_path, "masked")
    n = _numbers_equal_json(check, doc, required=_MAIN + ["translation_px.0", "translation_px.1"])
    assert n >= 40
    assert len(check["images"]) >= 8  # shared-scale maps, own-scale maps, histograms, NK, slope, elevation, CDF, profiles
    assert doc["translation_px"][0] == pytest.approx(doc["translation"][0] / 1.0)  # 1 m pixels


def test_tilted_pair(runner, tmp_path):
    pair = xdem.examples.write_example_pair(tmp_path / "pair", tilt=(0.002, -0.001))
    doc, report = _coreg(runner, tmp_path, pair["ref"], pair["tba"], "--method", "nuthkaab_deramp")
    step = doc["steps"][0]
    assert step["tilt_m_per_km"] == pytest.approx(np.hypot(2.0, 1.0), rel=0.02)  # 0.002 and 0.001 m/m
    check = _browser_check(report, tmp_path, "tilted")
    _numbers_equal_json(check, doc, required=_MAIN + ["steps.0.tilt_m_per_km", "steps.0.tilt_direction_deg",
                                                       "translation_px.0"])
    assert "Translation in pixels, tilt" in report.read_text()


def test_blockwise_run(runner, tmp_path):
    pair = xdem.examples.write_example_pair(tmp_path / "pair")
    doc, report = _coreg(runner, tmp_path, pair["ref"], pair["tba"], "--method", "blockwise:nuthkaab",
                         "--block-size", "128", "--block-iterations", "1")
    assert 'id="blockwise"' in report.read_text()
    check = _browser_check(report, tmp_path, "blockwise")
    _numbers_equal_json(check, doc, required=_MAIN)


def test_points_run(runner, tmp_path):
    pair = xdem.examples.write_example_pair(tmp_path / "pair")
    ref = xdem.open_dem(pair["ref"])
    rng = np.random.default_rng(0)
    rows, cols = rng.integers(20, 380, 3000), rng.integers(20, 380, 3000)
    t = ref.rio.transform()
    x, y = t.c + (cols + 0.5) * t.a, t.f + (rows + 0.5) * t.e
    z = ref.values[rows, cols]
    points = tmp_path / "ref_points.gpkg"
    gpd.GeoDataFrame({"z": z}, geometry=[Point(a, b) for a, b in zip(x, y)], crs=ref.rio.crs).to_file(points)
    doc, report = _coreg(runner, tmp_path, points, pair["tba"])
    check = _browser_check(report, tmp_path, "points")
    _numbers_equal_json(check, doc, required=["stats.before.median", "stats.before.nmad", "stats.after.median",
                                              "stats.after.nmad", "stats.after.count"])
