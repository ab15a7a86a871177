"""HTML report (``xdem.report.write_report``) and the ``xdem report`` command.

The headless-Chromium test opens the report in a real browser: every image must decode and
every number tagged with ``data-key`` must equal the JSON summary of ``xdem coreg``.
"""

from __future__ import annotations

import base64
import html as _html
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
from click.testing import CliRunner
from helpers import MaxResult, compare_shown, json_at

import xdem.coreg
import xdem.examples
from xdem.cli import main
from xdem.errors import NotEnoughDataError, OutputError, OverlapError
from xdem.report import figures as F
from xdem.report import write_report
from xdem.report.data import coarsen_mean, decimated_maps, decimation_factor
from xdem.report.html import fmt

SECTIONS = ("statistics", "maps", "histograms", "nuth-kaab", "parameters", "slope-classes", "processing")


def _keys(text: str) -> dict[str, str]:
    """``data-key`` -> text of the element, from the HTML source (scalars only)."""
    return {k: v for k, v in re.findall(r'data-key="([^"]+)">([^<]*)<', text)}


def _no_stray_files(folder: Path, expected: set[str]) -> None:
    assert {p.name for p in folder.iterdir()} == expected


@pytest.fixture(scope="module")
def fitted():
    ref, tba, truth = xdem.examples.example_pair(chunks=200)
    nk = xdem.coreg.NuthKaab(subsample=50_000).fit(ref, tba)
    return ref, tba, nk.apply(tba), nk, truth


@pytest.fixture(scope="module")
def report_text(fitted, tmp_path_factory):
    ref, tba, aligned, nk, _ = fitted
    path = write_report(tmp_path_factory.mktemp("rep") / "report.html", ref=ref, tba=tba, aligned=aligned,
                        coreg=nk, subsample=20_000)
    return path.read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------ API
def test_report_is_one_self_contained_html(report_text):
    text = report_text
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    for sid in SECTIONS:
        assert f'<section id="{sid}">' in text
    srcs = re.findall(r'<img [^>]*src="([^"]+)"', text)
    assert len(srcs) >= 4  # maps, histograms, Nuth & Kääb, iterations
    for src in srcs:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    for bad in ('src="http', "href=\"http", "<script", "<link", "url(", "@import"):
        assert bad not in text


def test_report_numbers_are_the_exact_statistics_and_fitted_shifts(fitted, report_text):
    ref, tba, aligned, nk, truth = fitted
    keys = _keys(report_text)
    dh_before = tba.data - ref.data
    assert keys["report.stats.before.median"] == fmt(xdem.stats.median(dh_before))
    assert keys["report.stats.after.nmad"] == fmt(xdem.stats.nmad(aligned.data - ref.data))
    assert keys["report.stats.before.count"] == str(int(da.isfinite(dh_before).sum().compute()))
    assert keys["coreg.steps.0.learned.shift_x_"] == fmt(nk.shift_x_)
    assert keys["coreg.steps.0.learned.shift_y_"] == fmt(nk.shift_y_)
    assert keys["coreg.matrix.2.3"] == fmt(nk.shift_z_)
    assert abs(float(keys["coreg.steps.0.learned.shift_x_"]) - truth["shift_x"]) < 0.01


def test_summary_values_are_rendered_with_their_json_path(fitted, tmp_path):
    ref, tba, aligned, nk, _ = fitted
    summary = {
        "steps": [{"method": "NuthKaab", "shift_x": nk.shift_x_, "shift_y": nk.shift_y_, "shift_z": nk.shift_z_,
                   "history": nk.history_, "params": {"bin_count": 72}}],
        "matrix": nk.to_matrix().tolist(),
        "stats": {"before": {"median": 2.123456, "nmad": 0.5, "count": 12},
                  "after": {"median": -1e-5, "nmad": 0.0123, "count": 11}},
        "timing": {"fit_s": 1.25}, "peak_rss_mb": 300.5, "chunks": [128, 128], "scheduler": "threads",
    }
    text = write_report(tmp_path / "r.html", ref=ref, tba=tba, aligned=aligned, summary=summary,
                        subsample=5_000, max_pixels=10_000).read_text()
    keys = _keys(text)
    for key in ("stats.before.median", "stats.after.median", "stats.after.nmad", "stats.before.count",
                "steps.0.shift_x", "steps.0.shift_z", "matrix.0.3", "timing.fit_s", "peak_rss_mb", "chunks.1"):
        assert keys[key] == fmt(json_at(summary, key)), key
    # 4 significant figures, never "-0.0000"
    assert keys["stats.before.median"] == "2.123" and keys["stats.after.median"] == "-1e-05"
    assert not any(k.startswith("report.stats") for k in keys)  # the summary's statistics are not recomputed


# ----------------------------------------------------------------------- decimated maps
def test_coarsen_mean_is_the_nan_ignoring_block_mean_for_any_chunking():
    rng = np.random.default_rng(1)
    arr = rng.normal(size=(203, 157)).astype(np.float32)
    arr[10:40, 20:60] = np.nan  # whole NaN cells and partial ones
    k = 7
    ny, nx = 203 // k, 157 // k
    blocks = arr[: ny * k, : nx * k].astype(np.float64).reshape(ny, k, nx, k)
    with np.errstate(invalid="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            expected = np.nanmean(blocks, axis=(1, 3))
    for chunks in (203, 50, (31, 64)):
        got = coarsen_mean(da.from_array(arr, chunks=chunks), k).compute()
        np.testing.assert_allclose(got, expected, rtol=1e-6, equal_nan=True)
    assert np.isnan(got).any() and np.isfinite(got).any()


def test_decimated_maps_only_compute_small_arrays():
    ref, tba, _ = xdem.examples.example_pair(chunks=50)  # 64 blocks
    max_pixels = 2500
    cb = MaxResult()
    with cb:
        maps, k = decimated_maps({"ref": ref.data, "before": tba.data - ref.data}, shape=ref.shape, max_pixels=max_pixels)
    assert k == decimation_factor(ref.shape, max_pixels) == 8
    assert cb.tasks > 64
    assert cb.max_bytes <= max_pixels * 8 * 2
    for m in maps.values():
        assert m.size <= max_pixels and m.shape == (50, 50)
    full = ref.values.astype(np.float64)
    np.testing.assert_allclose(maps["ref"][3, 4], full[24:32, 32:40].mean(), rtol=1e-6)


def test_whole_report_never_holds_a_full_resolution_array(tmp_path, monkeypatch):
    # the statistics' sampled values are a (3, n) array bounded by STATS_SUBSAMPLE (2 million, more
    # than this grid's 160 000 pixels): lowered here so that any array as large as the grid is a raster
    monkeypatch.setattr(xdem.stats, "STATS_SUBSAMPLE", 5_000)
    ref, tba, _ = xdem.examples.example_pair(chunks=100)  # 16 blocks
    nk = xdem.coreg.NuthKaab(subsample=5_000).fit(ref, tba)
    cb = MaxResult()
    with cb:
        write_report(tmp_path / "r.html", ref=ref, tba=tba, aligned=nk.apply(tba), coreg=nk,
                     max_pixels=2500, subsample=5_000)
    # No raster larger than a chunk (100 x 100 float64 plus overlap) is ever produced. 1-D
    # results (sampled or gathered values of the exact statistics) are bounded by the
    # subsample and xdem.stats.MAX_GATHER, not by the grid.
    full = ref.size * 4  # one full-resolution float32 DEM
    assert cb.max_2d_bytes < full / 4, cb.max_2d_bytes
    assert cb.max_bytes <= max(full / 4, xdem.stats.MAX_GATHER * 8), cb.max_bytes


# --------------------------------------------------------------------------- bad input
def test_no_overlap_raises_and_writes_nothing(tmp_path):
    ref, _, _ = xdem.examples.example_pair()
    _, far, _ = xdem.examples.example_pair(mode="transform", shift_x=5000.0, shift_y=0.0)
    with pytest.raises(OverlapError, match="do not overlap"):
        write_report(tmp_path / "r.html", ref=ref, tba=far)
    _no_stray_files(tmp_path, set())


def test_no_valid_pixel_in_common_raises_and_writes_nothing(tmp_path):
    ref, tba, _ = xdem.examples.example_pair(shift_x=0, shift_y=0)
    empty = tba.copy(data=da.full(tba.shape, np.nan, dtype=np.float32, chunks=tba.data.chunks))
    with pytest.raises(NotEnoughDataError, match="no pixel is valid in both.*0 of 160000"):
        write_report(tmp_path / "r.html", ref=ref, tba=empty)
    _no_stray_files(tmp_path, set())


def test_all_nan_panels_give_a_note_not_a_crash(tmp_path, monkeypatch):
    ref, tba, _ = xdem.examples.example_pair(shift_x=0, shift_y=0)
    aligned = tba.copy(data=da.full(tba.shape, np.nan, dtype=np.float32, chunks=tba.data.chunks))
    titles = []
    real_empty = F._empty
    monkeypatch.setattr(F, "_empty", lambda ax, title: (titles.append(title), real_empty(ax, title)))
    out = write_report(tmp_path / "r.html", ref=ref, tba=tba, aligned=aligned, max_pixels=5_000, subsample=5_000)
    assert out.exists()
    assert any("dh after" in t for t in titles)  # map panel
    assert any("diagnostic, after" in t for t in titles)  # Nuth & Kääb panel
    assert "No valid dh after" in out.read_text()
    # a figure of nothing at all
    nan = np.full((5, 5), np.nan)
    png = F.maps_figure({"ref": nan, "before": nan}, extent=(0, 5, 0, 5), crs="EPSG:32632", units="m", factor=1)
    assert base64.b64decode(png)[:4] == b"\x89PNG"
    assert base64.b64decode(F.histogram_figure({"before": np.array([np.nan])}, units="m", n_valid=0))[:4] == b"\x89PNG"


def test_overwrite_rules_and_atomic_write(fitted, tmp_path):
    ref, tba, _, _, _ = fitted
    target = tmp_path / "r.html"
    target.write_text("old")
    with pytest.raises(OutputError, match="already exists"):
        write_report(target, ref=ref, tba=tba)
    assert target.read_text() == "old"
    write_report(target, ref=ref, tba=tba, overwrite=True, max_pixels=5_000, subsample=2_000)
    assert target.read_text().startswith("<!DOCTYPE html>")
    _no_stray_files(tmp_path, {"r.html"})
    with pytest.raises(OutputError, match="is a folder"):
        write_report(tmp_path, ref=ref, tba=tba)
    with pytest.raises(OutputError, match="does not exist"):
        write_report(tmp_path / "missing" / "r.html", ref=ref, tba=tba)
    src = xdem.examples.get_path("lidar")
    with pytest.raises(OutputError, match="input"):
        write_report(src, ref=src, tba=tba, overwrite=True)


# --------------------------------------------------------------------------------- CLI
@pytest.fixture(scope="module")
def pair_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pair")
    xdem.examples.write_example_pair(folder)
    return folder


def test_cli_report(pair_files, tmp_path):
    runner = CliRunner()
    out = tmp_path / "before.html"
    args = ["report", str(pair_files / "ref.tif"), str(pair_files / "tba.tif"), "-o", str(out),
            "--max-pixels", "5000", "--subsample", "2000"]
    res = runner.invoke(main, args)
    assert res.exit_code == 0, res.output
    assert res.output.strip() == str(out) and out.exists()
    assert 'id="maps"' in out.read_text()
    res = runner.invoke(main, args)  # exists, no --overwrite
    assert res.exit_code == 1 and "already exists" in res.output
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    res = runner.invoke(main, [*args, "--overwrite", "--json-summary", str(bad)])
    assert res.exit_code == 1 and "not a JSON document" in res.output
    res = runner.invoke(main, ["report", str(pair_files / "ref.tif"), str(pair_files / "tba.tif")])
    assert res.exit_code == 2  # -o missing


# ------------------------------------------------------------------------- Chromium
def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail(
        "headless Chromium is required by this test but was not found; install it with "
        "`apt-get install -y chromium chromium-driver` (`make test` does it when run as root)"
    )


def _run_chromium(*args: str) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp(prefix="xdem-chromium-")
    try:
        cmd = [
            _chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}", *args,
        ]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


_CHECK_SCRIPT = """<script>
window.addEventListener("load", function () {
  var imgs = Array.prototype.map.call(document.images, function (i) { return [i.naturalWidth, i.naturalHeight]; });
  var keys = Array.prototype.map.call(document.querySelectorAll("[data-key]"),
                                      function (e) { return [e.getAttribute("data-key"), e.textContent]; });
  var pre = document.createElement("pre");
  pre.id = "xdem-check";
  pre.style.display = "none";  // in the DOM, not on the screenshot: the page is shown as it is
  pre.textContent = JSON.stringify({images: imgs, keys: keys});
  document.body.appendChild(pre);
});
</script>"""


def shown_in_chromium(page: Path, probe: Path, *screenshot: str) -> dict:
    """What headless Chromium shows of ``page``: ``{"images": [[w, h], ...], "keys": ...}`` read by
    :data:`_CHECK_SCRIPT` from a copy of the page written to ``probe``. ``screenshot``: Chromium's
    ``--screenshot=PNG`` and ``--window-size=W,H``, taken by the same browser run (one start-up
    instead of two; the check's output is hidden, so the picture is the page's); the run is in
    ``check["proc"]``."""
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", _CHECK_SCRIPT + "</body>"), encoding="utf-8")
    proc = _run_chromium("--dump-dom", *screenshot, probe.as_uri())
    found = re.search(r'<pre id="xdem-check"[^>]*>(.*?)</pre>', proc.stdout, re.S)
    assert found, f"Chromium did not run the check (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return {**json.loads(_html.unescape(found.group(1))), "proc": proc}


@pytest.mark.slow
def test_report_in_headless_chromium(pair_files, tmp_path):

    import matplotlib.image

    runner = CliRunner()
    ref, tba = str(pair_files / "ref.tif"), str(pair_files / "tba.tif")
    aligned, js, report = tmp_path / "aligned.tif", tmp_path / "coreg.json", tmp_path / "report.html"
    res = runner.invoke(main, ["coreg", ref, tba, "-o", str(aligned), "--json-out", str(js), "-q"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["report", ref, tba, str(aligned), "-o", str(report), "--json-summary", str(js)])
    assert res.exit_code == 0, res.output
    summary = json.loads(js.read_text())

    # Every image decodes and every number equals the JSON, as the browser shows them.
    shot = tmp_path / "report.png"  # and a screenshot of the whole page, by the same browser run
    check = shown_in_chromium(report, tmp_path / "probe.html", f"--screenshot={shot}", "--window-size=1400,3000")
    assert len(check["images"]) >= 4
    assert all(w > 0 and h > 0 for w, h in check["images"]), check["images"]
    shown = dict(check["keys"])
    compared = compare_shown(summary, shown)
    for key in ("stats.before.median", "stats.before.nmad", "stats.before.count", "stats.after.median",
                "stats.after.nmad", "stats.after.count", "steps.0.shift_x", "steps.0.shift_y", "steps.0.shift_z"):
        assert shown[key] == fmt(json_at(summary, key)), key
    assert compared >= 30

    # Screenshot of the whole page: a real, non-blank picture.
    assert shot.exists(), check["proc"].stderr[-2000:]
    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[:2] == (3000, 1400)
    assert pixels[..., :3].std() > 0.05  # not a blank page
    if os.environ.get("XDEM_KEEP_SCREENSHOT"):
        shutil.copy(shot, os.environ["XDEM_KEEP_SCREENSHOT"])
