"""The small CLI features of issue 17: outlier filters, --dh-out / --stable-mask-out, output
suffixes, file modes, `xdem methods`, did-you-mean, vertical CRSs, write-pair's names."""

from __future__ import annotations

import json
import os
import re
import stat

import numpy as np
import pytest
import rasterio
from click.testing import CliRunner
from rasterio.crs import CRS

import xdem
from xdem.cli import main
from xdem.examples import write_example_pair
from xdem.io.atomic import default_file_mode


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return write_example_pair(tmp_path_factory.mktemp("pair"))


@pytest.fixture(scope="module")
def runner():
    return CliRunner()


@pytest.fixture(scope="module")
def filtered_run(pair, runner, tmp_path_factory):
    """One run with every new output and filter (--workers 1, so the text says '1 worker')."""
    folder = tmp_path_factory.mktemp("filtered")
    args = ["coreg", str(pair["ref"]), str(pair["tba"]), "-o", str(folder / "aligned.tif"),
            "--dh-out", str(folder / "dh.tif"), "--stable-mask-out", str(folder / "mask.tif"),
            "--max-slope", "30", "--min-slope", "2", "--nmad-filter", "2", "--json-out", str(folder / "run.json"),
            "--workers", "1"]
    res = runner.invoke(main, args)
    assert res.exit_code == 0, res.output
    return res, folder, json.loads((folder / "run.json").read_text())


def _read(path):
    with rasterio.open(path) as src:
        return src.read(1, masked=True).filled(np.nan).astype(np.float64), src.profile, src.units


def test_stable_mask_out_is_the_filters_computed_independently(filtered_run, pair):
    """The mask written equals slope limits and the NMAD window recomputed with numpy from the
    files (the grid is 160 000 pixels, under the filter's subsample: median and NMAD are exact)."""
    res, folder, doc = filtered_run
    f = doc["filters"]
    assert (f["min_slope_deg"], f["max_slope_deg"], f["nmad_filter"]) == (2.0, 30.0, 2.0)
    ref = xdem.open_dem(pair["ref"]).values.astype(np.float64)
    tba = xdem.open_dem(pair["tba"]).values.astype(np.float64)
    dh = tba - ref
    valid = np.isfinite(dh)
    assert f["stable_pixels"] == int(valid.sum()) == f["sampled"]
    med = np.median(dh[valid])
    nmad = 1.4826 * np.median(np.abs(dh[valid] - med))
    assert f["dh_median"] == pytest.approx(med, abs=1e-6) and f["dh_nmad"] == pytest.approx(nmad, rel=1e-6)
    slope = xdem.terrain.slope(pair["ref"]).values.astype(np.float64)
    with np.errstate(invalid="ignore"):
        in_slope = valid & (slope >= 2) & (slope <= 30)
        want = in_slope & (np.abs(dh - med) <= 2 * nmad)
    assert f["kept_by_slope"] == int(in_slope.sum())
    mask, profile, _ = _read(folder / "mask.tif")
    assert profile["dtype"] == "uint8"
    # float32 dh on the sampled route vs float64 here: only pixels at the window's edge may differ
    differ = (mask == 1) != want
    assert differ.sum() <= 5, differ.sum()
    assert 0.3 < want.mean() < 0.95  # the filters remove something and keep most
    assert f["kept_fraction_sampled"] == pytest.approx(want.sum() / valid.sum(), abs=1e-4)


def test_filtered_fit_recovers_the_shift_and_stats_keep_every_stable_pixel(filtered_run, pair):
    res, folder, doc = filtered_run
    step = doc["steps"][0]
    for k in ("shift_x", "shift_y", "shift_z"):  # the filters leave enough terrain: same tolerance as unfiltered
        assert abs(step[k] - pair["truth"][k]) < 0.01, (k, step[k])
    assert doc["stats"]["before"]["count"] == doc["filters"]["stable_pixels"]  # statistics are not filtered
    assert "Filters (fit only): slope >= 2°, slope <= 30°" in res.stderr


def test_dh_out_equals_aligned_minus_ref(filtered_run, pair):
    res, folder, doc = filtered_run
    dh, profile, units = _read(folder / "dh.tif")
    aligned, _, _ = _read(folder / "aligned.tif")
    ref = xdem.open_dem(pair["ref"]).values.astype(np.float64)
    np.testing.assert_allclose(dh, aligned - ref, atol=1e-4, equal_nan=True)
    assert units == ("m",) and profile["nodata"] == -9999
    assert doc["dh_output"] == str(folder / "dh.tif") and doc["stable_mask_output"] == str(folder / "mask.tif")
    assert "writing" in res.stderr and "dh.tif" in res.stderr.split("writing", 1)[1].splitlines()[0]  # one pass


def test_one_worker_and_input_facts(filtered_run):
    res, folder, doc = filtered_run
    assert "(1 worker)" in res.stderr
    facts = doc["inputs"]["reference_facts"]
    assert facts["size"] == [400, 400] and facts["resolution"] == [1.0, 1.0] and facts["vertical_crs"] is None
    assert doc["inputs"]["vertical_warning"] is None


def test_files_are_written_with_the_plain_file_mode(filtered_run, pair):
    res, folder, doc = filtered_run
    mode = default_file_mode()
    for path in [pair["ref"], pair["tba"], pair["truth_path"], *folder.iterdir()]:
        assert stat.S_IMODE(os.stat(path).st_mode) == mode, path
    old = os.umask(0o022)
    try:
        assert default_file_mode() == 0o644
    finally:
        os.umask(old)


def test_output_suffix_and_slope_limits_are_usage_errors(pair, runner, tmp_path):
    base = ["coreg", str(pair["ref"]), str(pair["tba"])]
    res = runner.invoke(main, [*base, "-o", str(tmp_path / "aligned.png")])
    assert res.exit_code == 2 and "must end in .tif or .tiff" in res.stderr
    res = runner.invoke(main, [*base, "-o", str(tmp_path / "a.tif"), "--dh-out", str(tmp_path / "dh.img")])
    assert res.exit_code == 2 and "'--dh-out'" in res.stderr
    res = runner.invoke(main, [*base, "-o", str(tmp_path / "a.TIFF"), "--min-slope", "30", "--max-slope", "10"])
    assert res.exit_code == 2 and "must be below --max-slope" in res.stderr
    assert not list(tmp_path.iterdir())


def test_unknown_method_did_you_mean_documented_names(pair, runner, tmp_path):
    res = runner.invoke(main, ["coreg", str(pair["ref"]), str(pair["tba"]), "-o", str(tmp_path / "a.tif"),
                               "--method", "nuthkab+vshift"])
    assert res.exit_code == 2 and "did you mean nuthkaab?" in res.stderr
    listed = res.stderr.split("Methods:")[1].split("(")[0]
    assert "nuthkaab_deramp" in listed and "vshift" in listed and "blockwise" in listed
    assert "verticalshift" not in listed and " nk" not in listed  # internal names and aliases are not offered
    res = runner.invoke(main, ["coreg", str(pair["ref"]), str(pair["tba"]), "-o", str(tmp_path / "a.tif"),
                               "--method", "vshfit"])
    assert "did you mean vshift?" in res.stderr


def test_methods_lists_registry_options_and_defaults(runner):
    res = runner.invoke(main, ["methods", "--json"])
    assert res.exit_code == 0, res.output
    table = {m["name"]: m for m in json.loads(res.stdout)}
    from xdem.coreg.spec import _registry, documented_name

    assert set(table) == {documented_name(k) for k in _registry()}
    nk = {o["name"]: o for o in table["nuthkaab"]["options"]}
    assert nk["subsample"]["default"] == xdem.coreg.NuthKaab().subsample and nk["subsample"]["flag"] == "--subsample"
    assert {o["name"]: o["default"] for o in table["deramp"]["options"]}["poly_order"] == xdem.coreg.Deramp().poly_order
    text = runner.invoke(main, ["methods"]).output
    assert "nuthkaab  (NuthKaab)" in text and "angle = 0.0  [--angle]" in text


def test_directionalbias_says_which_angle_it_used(pair, runner, tmp_path):
    res = runner.invoke(main, ["coreg", str(pair["ref"]), str(pair["tba"]), "-o", str(tmp_path / "a.tif"),
                               "--method", "directionalbias", "--no-stats", "-q"])
    assert res.exit_code == 0, res.output
    assert "no --angle given, using 0 degrees" in res.stderr
    res = runner.invoke(main, ["coreg", str(pair["ref"]), str(pair["tba"]), "-o", str(tmp_path / "b.tif"),
                               "--method", "directionalbias", "--angle", "90", "--no-stats", "-q"])
    assert res.exit_code == 0 and "--angle" not in res.stderr


def _retag(src, dst, crs):
    with rasterio.open(src) as s:
        profile, data = s.profile, s.read()
    profile["crs"] = CRS.from_user_input(crs)
    with rasterio.open(dst, "w", **profile) as d:
        d.write(data)
    return dst


def test_vertical_crs_in_info_and_warned_by_coreg(pair, runner, tmp_path):
    geoid = _retag(pair["ref"], tmp_path / "ref_geoid.tif", "EPSG:26915+5703")  # NAVD88 height
    same = _retag(pair["tba"], tmp_path / "tba_same.tif", "EPSG:26915+5703")
    res = runner.invoke(main, ["info", str(geoid), "--no-stats"])
    assert res.exit_code == 0 and "Vertical CRS:  NAVD88 height (a geoid or datum, EPSG:5703)" in res.output
    res = runner.invoke(main, ["info", str(pair["ref"]), "--no-stats"])
    assert "Vertical CRS" not in res.output
    # same vertical reference: no warning
    res = runner.invoke(main, ["coreg", str(geoid), str(same), "-o", str(tmp_path / "a.tif"), "--no-stats", "-q"])
    assert res.exit_code == 0, res.output
    assert "vertical references" not in res.stderr
    other = _retag(pair["tba"], tmp_path / "tba_other.tif", "EPSG:26915+3855")  # EGM2008 height
    res = runner.invoke(main, ["coreg", str(geoid), str(other), "-o", str(tmp_path / "b.tif"), "--no-stats", "-q",
                               "--json"])
    assert res.exit_code == 0, res.output
    assert "Warning: REF and TBA have different vertical references: REF NAVD88 height" in res.stderr
    doc = json.loads(res.stdout)
    assert "EGM2008" in doc["inputs"]["vertical_warning"]
    assert doc["inputs"]["to_be_aligned_facts"]["vertical_crs"]["epsg"] == 3855


def test_write_pair_options_name_the_misalignment(runner, tmp_path):
    res = runner.invoke(main, ["examples", "write-pair", str(tmp_path / "a"), "--dx", "2", "--dy", "-1", "--dz", "3"])
    assert res.exit_code == 0, res.output
    truth = json.loads((tmp_path / "a" / "truth.json").read_text())
    assert (truth["shift_x"], truth["shift_y"], truth["shift_z"]) == (-2.0, 1.0, -3.0)
    assert "--shift-x" not in runner.invoke(main, ["examples", "write-pair", "--help"]).output


def test_dh_out_reads_no_more_than_the_aligned_write(pair, tmp_path, monkeypatch):
    """--dh-out is written in the same pass: the blocks of REF and TBA are read as many times
    with it as without it."""
    from helpers import count_block_reads

    from xdem.workflows import CoregRequest, run_coreg

    reads = count_block_reads(monkeypatch)
    counts = []
    for dh in (None, tmp_path / "dh.tif"):
        reads.clear()
        run_coreg(CoregRequest(reference=pair["ref"], to_be_aligned=pair["tba"], output=tmp_path / f"a{dh is None}.tif",
                               dh_out=dh, coreg=xdem.coreg.NuthKaab(), chunks=128))
        counts.append(dict(reads))
    assert counts[0] == counts[1] and counts[0]["ref.tif"] > 0


def test_info_prints_and_returns_units_and_labelled_history(capsys, fitted_example_pair):
    assert "[fitted" not in repr(xdem.coreg.NuthKaab())
    ref, tba, _, nk = fitted_example_pair
    assert nk.info() is None  # printed, returning None as upstream
    text = nk.info(as_str=True)
    assert capsys.readouterr().out.strip() == text.strip()  # the text printed
    lines = [line.strip() for line in text.splitlines()]
    assert f"shift_x_ = {nk.shift_x_:.6g} m" in lines and f"shift_z_ = {nk.shift_z_:.6g} m (DEM height units)" in lines
    assert "history_ (shift_x, shift_y after each iteration):" in lines
    iterations = [line for line in lines if line.startswith("iteration ")]
    assert len(iterations) == nk.n_iterations_ == len(nk.history_)
    last = nk.history_[-1]
    assert iterations[-1] == f"iteration {len(iterations)}: shift_x={last[0]:+.4f}, shift_y={last[1]:+.4f} (shift_x, shift_y: m)"
    assert repr(nk) == (f"NuthKaab() [fitted: shift_x={nk.shift_x_:+.4f} m, shift_y={nk.shift_y_:+.4f} m, "
                        f"shift_z={nk.shift_z_:+.4f} m]")
    assert nk.info(echo=False) == text and capsys.readouterr().out == ""
    lzd = xdem.coreg.LZD(subsample=20_000).fit(ref, tba)
    assert repr(lzd).startswith("LZD(subsample=20000) [fitted: rotations x/y/z ") and " degrees, shift_x=" in repr(lzd)
    lzd_text = lzd.info(echo=False)
    assert "rotation_z_ = " in lzd_text and "history_ (rotation_x, rotation_y, rotation_z, shift_x" in lzd_text
    pipe = (xdem.coreg.NuthKaab() + xdem.coreg.Deramp()).fit(ref, tba)
    assert repr(pipe).endswith("Deramp() [fitted]") and pipe.info(echo=False).count("learned:") == 2


def test_json_history_columns(filtered_run):
    res, folder, doc = filtered_run
    step = doc["steps"][0]
    assert step["history_columns"] == ["shift_x", "shift_y"] and len(step["history"][0]) == 2


def _docs_json_block(page: str, marker: str) -> dict:
    """The JSON block of ``docs/<page>`` starting with ``marker`` (a ``"key": {`` fragment)."""
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / page).read_text()
    start = text.index(marker)
    end = text.index("```", start)
    return json.loads("{" + text[start:end].strip().rstrip(",") + "}")


def _same_numbers(documented, real, path=""):
    """Every documented value equals the real one (numbers to the digits shown)."""
    if isinstance(documented, dict):
        for k, v in documented.items():
            _same_numbers(v, real[k], f"{path}.{k}")
    elif isinstance(documented, list):
        assert len(documented) == len(real), path
        for i, (a, b) in enumerate(zip(documented, real)):
            _same_numbers(a, b, f"{path}.{i}")
    elif isinstance(documented, float):
        digits = len(repr(documented).split(".")[1]) if "." in repr(documented) else 0
        assert abs(documented - real) <= 0.5 * 10 ** -digits + 1e-12, (path, documented, real)
    else:
        assert documented == real, (path, documented, real)


def test_docs_filters_json_is_that_of_a_real_run(filtered_run):
    """docs/cli.md's `filters` example is the document of the run above (same options)."""
    res, folder, doc = filtered_run
    documented = _docs_json_block("cli.md", '"filters": {')["filters"]
    assert set(documented) == set(doc["filters"])
    _same_numbers(documented, doc["filters"])


def _percents(stderr: str) -> list[int]:
    return [int(m) for m in re.findall(r"^\[\s*(\d+)%\]", stderr, re.M)]


def test_progress_bar_over_the_whole_run_quiet_and_verbose(pair, runner, tmp_path):
    """Not a terminal: one line per tenth of the run, never going back, ending at 100 %;
    --quiet: nothing; --verbose: one line per Nuth & Kääb iteration."""
    base = ["coreg", str(pair["ref"]), str(pair["tba"])]
    res = runner.invoke(main, [*base, "-o", str(tmp_path / "a.tif"), "--verbose", "--json"])
    assert res.exit_code == 0, res.output
    p = _percents(res.stderr)
    assert p == sorted(p) and p[-1] == 100 and len(p) >= 5, p
    assert re.search(r"^\[\s*\d+%\] writing, elapsed \d+ s, ETA \d+ s$", res.stderr, re.M)
    doc = json.loads(res.stdout)
    lines = re.findall(r"^  Nuth & Kääb: iteration (\d+): shift_x=", res.stderr, re.M)
    assert [int(n) for n in lines] == list(range(1, doc["steps"][0]["n_iterations"] + 1))
    res = runner.invoke(main, [*base, "-o", str(tmp_path / "b.tif"), "--quiet", "--verbose"])
    assert res.exit_code == 0 and res.stderr == ""
    res = runner.invoke(main, [*base, "-o", str(tmp_path / "c.tif")])
    assert "iteration 1" not in res.stderr and _percents(res.stderr)[-1] == 100


def test_cog_copy_reports_gdal_progress(tmp_path):
    """write_cog forwards GDAL's own progress callback of the COG copy: increasing fractions up
    to 1, several on the way for a multi-tile file, and the COG is the same as without."""
    import dask.array as da
    import xarray as xr
    from rio_cogeo.cogeo import cog_validate

    from xdem.io.cog import COPY_PROGRESS, write_cog

    n = 2048
    data = da.random.RandomState(0).random((n, n), chunks=512).astype("float32")
    dem = xr.DataArray(data, dims=("y", "x"), coords={"y": np.arange(n)[::-1] + 0.5, "x": np.arange(n) + 0.5})
    dem = dem.rio.write_crs("EPSG:32633").rio.write_transform(rasterio.Affine(1, 0, 0, 0, -1, n))
    seen: list[float] = []
    token = COPY_PROGRESS.set(seen.append)
    try:
        write_cog(dem, tmp_path / "with.tif")
    finally:
        COPY_PROGRESS.reset(token)
    write_cog(dem, tmp_path / "without.tif")
    assert len(seen) > 5 and seen == sorted(seen) and seen[-1] == 1.0 and 0 < seen[len(seen) // 2] < 1
    assert cog_validate(str(tmp_path / "with.tif"), quiet=True)[0]
    with rasterio.open(tmp_path / "with.tif") as a, rasterio.open(tmp_path / "without.tif") as b:
        assert a.profile == b.profile and (a.read(1) == b.read(1)).all() and a.overviews(1) == b.overviews(1)


def test_rio_plugin_through_the_declared_entry_point(pair, tmp_path):
    """`rio xdem coreg ...` with rasterio's real `rio` program, which finds the plugin through the
    `rasterio.rio_plugins` entry point declared in pyproject.toml (a distribution carrying that
    declaration is put on the subprocess's path: the venv's xdem was installed from elsewhere)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).parents[2]
    section = (root / "pyproject.toml").read_text().split('[project.entry-points."rasterio.rio_plugins"]\n', 1)[1]
    declared = dict(re.findall(r'^(\w+) = "([^"]+)"$', section.split("\n[", 1)[0], re.M))  # no tomllib on 3.10
    assert declared == {"xdem": "xdem.cli.rio:xdem"}
    dist = tmp_path / "site" / "xdem_rio_plugin-0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: xdem-rio-plugin\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[rasterio.rio_plugins]\n" + "".join(f"{k} = {v}\n" for k, v in declared.items()))
    rio = Path(sys.executable).with_name("rio")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(root)])}
    out = tmp_path / "aligned.tif"
    proc = subprocess.run([str(rio), "xdem", "coreg", str(pair["ref"]), str(pair["tba"]), "-o", str(out), "--json", "-q"],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    step = json.loads(proc.stdout)["steps"][0]
    assert abs(step["shift_x"] - pair["truth"]["shift_x"]) < 0.01 and out.exists()
    proc = subprocess.run([str(rio), "xdem", "coreg", str(pair["ref"]), str(pair["tba"]), "-o", str(out)],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 1 and "already exists" in proc.stderr  # xdem's one-line errors and exit codes


#: Values of the documented JSON that depend on the machine or the folder: only their presence is checked.
_VOLATILE = {"timing", "peak_rss_mb", "peak_rss_children_mb", "output", "workers", "inputs.reference",
             "inputs.to_be_aligned"}


def _same_except_volatile(documented, real, path=""):
    if path.lstrip(".") in _VOLATILE:
        return
    if isinstance(documented, dict):
        assert set(documented) == set(real), (path, set(documented) ^ set(real))
        for k, v in documented.items():
            _same_except_volatile(v, real[k], f"{path}.{k}")
    else:
        _same_numbers(documented, real, path)


def test_docs_cli_json_document_is_that_of_a_real_run(runner, tmp_path):
    """docs/cli.md's JSON document is what `xdem coreg pair/ref.tif pair/tba.tif -o pair/aligned.tif
    --json` prints on the pair of `xdem examples write-pair pair/`: the same keys everywhere, the
    same values to the digits shown (timings, memory, paths and the worker count excepted)."""
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    block = text[text.index("## JSON document"):]
    block = block[block.index("```json") + 7:]
    documented = json.loads(block[:block.index("```")])
    folder = tmp_path / "pair"
    assert runner.invoke(main, ["examples", "write-pair", str(folder)]).exit_code == 0
    res = runner.invoke(main, ["coreg", str(folder / "ref.tif"), str(folder / "tba.tif"), "-o",
                               str(folder / "aligned.tif"), "--json"])
    assert res.exit_code == 0, res.output
    _same_except_volatile(documented, json.loads(res.stdout))


def test_docs_did_you_mean_message_is_the_real_one(pair, runner, tmp_path):
    """The error shown in docs/cli.md ("Methods: `xdem methods`") is the one `--method nuthkab` gives."""
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    block = text[text.index("## Methods: `xdem methods`"):]
    block = block[block.index("```text") + 7:]
    documented = " ".join(block[:block.index("```")].split())
    res = runner.invoke(main, ["coreg", str(pair["ref"]), str(pair["tba"]), "-o", str(tmp_path / "a.tif"),
                               "--method", "nuthkab"])
    assert res.exit_code == 2
    assert " ".join(res.stderr.strip().splitlines()[-1].split()) == documented
