"""``xdem coreg`` on the example pair with a known shift (click CliRunner, in process)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import click
import dask
import numpy as np
import pytest
import rasterio
from click.testing import CliRunner
from helpers import count_computes
from rio_cogeo.cogeo import cog_validate

import xdem
import xdem.coreg
from xdem.cli import main
from xdem.cli._common import check_scheduler, use_scheduler
from xdem.cli.coreg import build_coreg, resolve_methods
from xdem.examples import write_example_pair


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """ref.tif, tba.tif, truth.json of the default example pair in a module-wide folder."""
    return write_example_pair(tmp_path_factory.mktemp("pair"))


@pytest.fixture(scope="module")
def runner():
    return CliRunner()


def _run(runner, pair, out, *args):
    return runner.invoke(main, ["coreg", str(pair["ref"]), str(pair["tba"]), "-o", str(out), *args])


def _sha(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.fixture(scope="module")
def default_run(pair, runner, tmp_path_factory):
    """Default NuthKaab run with --json (not quiet: progress must stay off stdout)."""
    out = tmp_path_factory.mktemp("out") / "aligned.tif"
    res = _run(runner, pair, out, "--json")
    assert res.exit_code == 0, res.output
    return res, out


def test_output_is_cog_with_recovered_shift(default_run, pair):
    res, out = default_run
    valid, errors, _ = cog_validate(str(out), quiet=True)
    assert valid, errors
    doc = json.loads(res.stdout)
    step = doc["steps"][0]
    truth = pair["truth"]
    assert step["method"] == "NuthKaab"
    for k in ("shift_x", "shift_y", "shift_z"):
        assert abs(step[k] - truth[k]) < 0.01, (k, step[k], truth[k])
    with rasterio.open(out) as dst, rasterio.open(pair["tba"]) as src:
        assert dst.transform == src.transform and dst.crs == src.crs and dst.shape == src.shape
        assert dst.nodata == -9999
        aligned = dst.read(1, masked=True).filled(np.nan)
    ref = xdem.open_dem(pair["ref"]).values
    inner = (slice(10, -10), slice(10, -10))
    assert np.nanmedian(np.abs(aligned[inner] - ref[inner])) < 0.02  # the aligned DEM matches the reference


def test_json_document_alone_on_stdout(default_run, pair):
    res, out = default_run
    doc = json.loads(res.stdout)  # the whole stdout is one JSON document
    assert "fitting" in res.stderr  # progress went to stderr
    for key in ("steps", "matrix", "stats", "output", "inputs", "timing", "peak_rss_mb", "chunks", "scheduler"):
        assert key in doc, key
    assert doc["output"] == str(out.resolve())
    assert doc["scheduler"] == "threads" and doc["chunks"] == [400, 400]
    m = np.asarray(doc["matrix"])
    step = doc["steps"][0]
    assert m.shape == (4, 4) and doc["matrix_is_complete"] is True
    np.testing.assert_allclose(m[:3, 3], [step["shift_x"], step["shift_y"], step["shift_z"]])
    np.testing.assert_allclose(m[:3, :3], np.eye(3))
    before, after = doc["stats"]["before"], doc["stats"]["after"]
    assert after["nmad"] < before["nmad"] / 10
    assert abs(before["median"] - pair["truth"]["dz"]) < 0.1 and abs(after["median"]) < 0.01
    assert 0 < after["count"] <= before["count"] <= 400 * 400
    assert step["params"]["subsample"] == 500_000 and isinstance(step["converged"], bool)
    assert set(doc["timing"]) >= {"fit_s", "write_s", "total_s"} and doc["timing"]["total_s"] > 0
    assert doc["peak_rss_mb"] > 0
    assert doc["inputs"]["reference"] == str(pair["ref"].resolve())


def test_vshift_equals_minus_median_before(pair, runner, tmp_path):
    res = _run(runner, pair, tmp_path / "v.tif", "--method", "vshift", "--json", "--quiet")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    (step,) = doc["steps"]
    assert step["method"] == "VerticalShift" and step["shift_x"] == 0 and step["shift_y"] == 0
    assert abs(step["shift_z"] + doc["stats"]["before"]["median"]) < 1e-3
    assert abs(doc["stats"]["after"]["median"]) < 1e-3
    assert res.stderr == ""  # --quiet


def test_pipeline_nuthkaab_plus_vshift(pair, runner, tmp_path):
    res = _run(runner, pair, tmp_path / "p.tif", "--method", "nuthkaab+vshift", "--json", "--quiet")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    nk, vs = doc["steps"]
    assert (nk["method"], vs["method"]) == ("NuthKaab", "VerticalShift")
    truth = pair["truth"]
    assert abs(nk["shift_x"] - truth["shift_x"]) < 0.01 and abs(nk["shift_y"] - truth["shift_y"]) < 0.01
    assert abs(vs["shift_z"]) < 0.01  # nothing left after Nuth & Kaab
    m = np.asarray(doc["matrix"])
    np.testing.assert_allclose(m[:3, 3], [nk["shift_x"], nk["shift_y"], nk["shift_z"] + vs["shift_z"]])
    assert abs(m[2, 3] - truth["shift_z"]) < 0.01
    assert cog_validate(str(tmp_path / "p.tif"), quiet=True)[0]


def test_subsample_and_random_state_reach_every_step(pair, runner, tmp_path):
    res = _run(runner, pair, tmp_path / "s.tif", "--method", "nuthkaab+vshift", "--subsample", "20000",
               "--random-state", "42", "--json", "--quiet", "--no-stats")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["stats"] is None
    for step in doc["steps"]:
        assert step["params"]["subsample"] == 20000 and isinstance(step["params"]["subsample"], int)
        assert step["params"]["random_state"] == 42
    assert doc["steps"][0]["count"] <= 20000  # the subsample was really used by the fit
    model = build_coreg(resolve_methods("vshift+nuthkaab"), {"subsample": 0.5, "random_state": 3})
    assert [s.get_params()["subsample"] for s in model.steps] == [0.5, 0.5]
    assert [s.get_params()["random_state"] for s in model.steps] == [3, 3]


def test_exclude_mask_removes_pixels(pair, runner, tmp_path, default_run):
    with rasterio.open(pair["ref"]) as src:
        profile = src.profile
    mask = np.zeros((400, 400), dtype=np.uint8)
    mask[:, :150] = 1  # "glacier" on the left: excluded
    profile.update(dtype="uint8", nodata=None, compress="deflate")
    with rasterio.open(tmp_path / "glacier.tif", "w", **profile) as dst:
        dst.write(mask, 1)
    res = _run(runner, pair, tmp_path / "m.tif", "--exclude-mask", str(tmp_path / "glacier.tif"), "--json", "--quiet")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    full = json.loads(default_run[0].stdout)
    assert doc["stats"]["before"]["count"] < full["stats"]["before"]["count"] * 0.7
    assert doc["steps"][0]["count"] < full["steps"][0]["count"] * 0.7
    assert abs(doc["steps"][0]["shift_x"] - pair["truth"]["shift_x"]) < 0.02
    assert doc["inputs"]["exclude_mask"] == str((tmp_path / "glacier.tif").resolve())


def test_unknown_method_is_usage_error(pair, runner, tmp_path):
    res = _run(runner, pair, tmp_path / "x.tif", "--method", "nuthkaab+foo")
    assert res.exit_code == 2
    assert "unknown method 'foo'" in res.stderr and "nuthkaab" in res.stderr and "vshift" in res.stderr
    assert not (tmp_path / "x.tif").exists()


def test_option_no_step_takes_is_usage_error(pair, runner, tmp_path):
    res = _run(runner, pair, tmp_path / "x.tif", "--poly-order", "2")
    assert res.exit_code == 2 and "takes --poly-order" in res.stderr


def test_bad_scheduler_and_workers_are_usage_errors(pair, runner, tmp_path):
    res = _run(runner, pair, tmp_path / "x.tif", "--scheduler", "gpu")
    assert res.exit_code == 2 and "is not a scheduler" in res.stderr
    res = _run(runner, pair, tmp_path / "x.tif", "--scheduler", "synchronous", "--workers", "2")
    assert res.exit_code == 2 and "--workers only applies" in res.stderr


@pytest.fixture
def no_fit(monkeypatch):
    """Make any fit fail loudly: the checks under test must happen before fitting."""

    def fail(*args, **kwargs):
        raise AssertionError("fit() was called although the command should have stopped before")

    monkeypatch.setattr(xdem.coreg.Coreg, "fit", fail)


def test_existing_output_refused_before_fitting(pair, runner, tmp_path, no_fit):
    out = tmp_path / "exists.tif"
    out.write_bytes(b"precious")
    res = _run(runner, pair, out)
    assert res.exit_code == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "already exists" in lines[0] and "--overwrite" in lines[0]
    assert out.read_bytes() == b"precious"
    json_out = tmp_path / "c.json"
    json_out.write_text("{}")
    res = _run(runner, pair, tmp_path / "new.tif", "--json-out", str(json_out))
    assert res.exit_code == 1 and "already exists" in res.stderr and json_out.read_text() == "{}"


def test_output_equal_to_input_refused(pair, runner, no_fit):
    before = _sha(pair["tba"])
    for target in (pair["tba"], pair["ref"]):
        res = _run(runner, pair, target, "--overwrite")
        assert res.exit_code == 1 and "same file as the" in res.stderr, res.output
    assert _sha(pair["tba"]) == before


def test_report_unavailable_fails_before_work(pair, runner, tmp_path, monkeypatch, no_fit):
    monkeypatch.setitem(sys.modules, "xdem.report", None)  # importing it now fails
    res = _run(runner, pair, tmp_path / "r.tif", "--report", str(tmp_path / "r.html"))
    assert res.exit_code == 1 and "--report" in res.stderr and "xdem.report" in res.stderr
    assert not (tmp_path / "r.tif").exists() and not (tmp_path / "r.html").exists()


def test_report_and_json_out(pair, runner, tmp_path):
    report, json_out = tmp_path / "r.html", tmp_path / "c.json"
    res = _run(runner, pair, tmp_path / "r.tif", "--method", "vshift", "--report", str(report),
               "--json-out", str(json_out), "--quiet")
    assert res.exit_code == 0, res.output
    assert res.stdout == ""  # no --json: nothing on stdout
    doc = json.loads(json_out.read_text())
    assert doc["report"] == str(report.resolve()) and doc["timing"]["report_s"] > 0
    html = report.read_text()
    assert 'data-key="stats.after.nmad"' in html and "VerticalShift" in html


def test_missing_input_is_one_line_error(pair, runner, tmp_path, no_fit):
    res = runner.invoke(main, ["coreg", str(pair["ref"]), str(tmp_path / "nope.tif"), "-o", str(tmp_path / "o.tif")])
    assert res.exit_code == 1 and len(res.stderr.strip().splitlines()) == 1 and "not found" in res.stderr


def test_method_names_resolve_through_registry():
    assert [c.__name__ for c in resolve_methods("NuthKaab + VerticalShift")] == ["NuthKaab", "VerticalShift"]
    assert [c.__name__ for c in resolve_methods("vshift")] == ["VerticalShift"]

    @xdem.coreg.base.register
    class MyNewMethod(xdem.coreg.VerticalShift):  # a newly registered method needs no CLI edit
        pass

    try:
        assert resolve_methods("nuthkaab+my-new-method")[1] is MyNewMethod
    finally:
        xdem.coreg.METHODS.pop("mynewmethod")
    with pytest.raises(click.BadParameter, match="empty method name"):
        resolve_methods("nuthkaab+")


def test_use_scheduler_local_modes():
    import dask.array as da

    with use_scheduler("threads", workers=3) as info:
        assert info["workers"] == 3 and dask.config.get("num_workers") == 3
        assert int(da.ones(6, chunks=2).sum().compute()) == 6
    with use_scheduler("synchronous") as info:
        assert dask.config.get("scheduler") == "synchronous"
    assert check_scheduler("TCP://127.0.0.1:8786", None) == "TCP://127.0.0.1:8786"
    with pytest.raises(click.BadParameter):
        check_scheduler("tcp://h:1", 2)


def test_help_in_subprocess():
    proc = subprocess.run([sys.executable, "-m", "xdem", "coreg", "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "--method" in proc.stdout and "--scheduler" in proc.stdout and "REF TBA" in proc.stdout


def test_default_sampled_stats_equal_exact_stats_on_a_small_pair(default_run, pair, runner, tmp_path):
    """The default statistics use a 2-million-pixel subsample: on the 400 x 400 pair it holds
    every pixel, so they must equal --exact-stats."""
    res, _ = default_run
    sampled = json.loads(res.stdout)["stats"]
    out = tmp_path / "exact.tif"
    res2 = _run(runner, pair, out, "--json", "--exact-stats", "--quiet")
    assert res2.exit_code == 0, res2.output
    exact = json.loads(res2.stdout)["stats"]
    assert "subsample" in sampled["method"] and "exact" in exact["method"]
    for when in ("before", "after"):
        assert sampled[when]["count"] == exact[when]["count"] == sampled[when]["sampled"]
        assert sampled[when]["median"] == pytest.approx(exact[when]["median"], abs=1e-9)
        assert sampled[when]["nmad"] == pytest.approx(exact[when]["nmad"], abs=1e-9)


def test_statistics_fused_in_the_write_equal_those_of_the_written_file(pair, tmp_path, monkeypatch):
    """With REF and TBA on one grid, the CLI computes the sampled statistics in the writing
    pass, from the aligned blocks before they are written: they must equal the statistics of
    the written COG read back, on a subsample smaller than the grid."""
    from xdem.cli import _coreg_run as cli_coreg  # the run of `xdem coreg`, where STATS_SUBSAMPLE is read
    monkeypatch.setattr(cli_coreg, "STATS_SUBSAMPLE", 20_000)
    out = tmp_path / "a.tif"
    model = xdem.coreg.NuthKaab(subsample=20_000).fit(str(pair["ref"]), str(pair["tba"]))
    ref, tba = xdem.open_dem(pair["ref"], chunks=128), xdem.open_dem(pair["tba"], chunks=128)
    aligned = model.apply(tba)
    block_stats, finish = cli_coreg._stats_while_writing(ref, tba, aligned, inlier_mask=None, exclude_mask=None,
                                                         random_state=5)
    with count_computes() as c:
        written = xdem.write_cog(aligned, out, also=[block_stats])
    assert c.count == 1  # one pass writes the blocks and draws the statistics
    fused = finish(written.also[0])
    after = cli_coreg.sampled_stats(ref, tba, xdem.open_dem(out, chunks=200), random_state=5)
    assert 0 < fused["after"]["sampled"] < fused["after"]["count"]  # a real subsample
    for when in ("before", "after"):
        for key in ("median", "nmad", "count", "sampled"):
            assert fused[when][key] == after[when][key], (when, key)


# ------------------------------------------------------------------ rigid methods (issue 13)
def test_dhminimize_pipeline_and_resampling_reach_every_step(pair, runner, tmp_path):
    res = _run(runner, pair, tmp_path / "d.tif", "--method", "nuthkaab+dhminimize", "--resampling", "cubic",
               "--subsample", "20000", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    nk, dm = doc["steps"]
    assert (nk["method"], dm["method"]) == ("NuthKaab", "DhMinimize")
    assert nk["params"]["resampling"] == dm["params"]["resampling"] == "cubic"
    assert doc["inputs"]["options"]["resampling"] == "cubic"
    truth = pair["truth"]
    m = np.asarray(doc["matrix"])
    total = [nk[k] + dm[k] for k in ("shift_x", "shift_y", "shift_z")]
    np.testing.assert_allclose(m[:3, 3], total, atol=1e-12)  # translations add up
    np.testing.assert_allclose(doc["translation"], total, atol=1e-12)
    assert doc["rotations_deg"] == [0.0, 0.0, 0.0] and doc["matrix_is_complete"] is True
    assert doc["rotation_centre"] == dm["centroid"]  # the rigid step's centre (no step rotates)
    for k, v in zip(("shift_x", "shift_y", "shift_z"), total):
        assert abs(v - truth[k]) < 0.01, (k, v, truth[k])
    assert dm["matrix"] and len(dm["centroid"]) == 3 and dm["rotation_z"] == 0.0  # the learned transform is in the JSON
    assert "rigid transform (2 steps merged: one resampling): translation (" in res.stderr


def test_resampling_defaults_and_refusals(pair, runner, tmp_path):
    none = dict.fromkeys(("poly_order", "angle", "terrain_attribute", "fit_or_bin", "subsample", "random_state",
                          "initial_shift", "on_divergence", "resampling"))
    model = build_coreg(resolve_methods("nuthkaab+dhminimize"), none)
    assert [s.resampling for s in model.steps] == ["bilinear", "cubic"]  # each method's own default
    model = build_coreg(resolve_methods("nuthkaab+dhminimize"), {**none, "resampling": "bilinear"})
    assert [s.resampling for s in model.steps] == ["bilinear", "bilinear"]
    res = _run(runner, pair, tmp_path / "x.tif", "--method", "vshift", "--resampling", "cubic")
    assert res.exit_code == 2 and "takes --resampling" in res.stderr
    assert "dhminimize" in res.stderr and "nuthkaab" in res.stderr  # who takes it
    res = _run(runner, pair, tmp_path / "x.tif", "--resampling", "nearest")
    assert res.exit_code == 2 and "nearest" in res.stderr
    assert not (tmp_path / "x.tif").exists()
    proc = runner.invoke(main, ["coreg", "--help"])
    assert "--resampling [bilinear|cubic]" in proc.output and "dhminimize" in proc.output


def test_fit_interpolation_reaches_lzd_only(pair, runner, tmp_path):
    """``--fit-interpolation`` (issue 28) sets LZD's, not Nuth & Kääb's (which has none); alone
    with a method without it, a usage error naming who takes it."""
    res = _run(runner, pair, tmp_path / "f.tif", "--method", "nuthkaab+lzd", "--fit-interpolation", "lagrange8",
               "--subsample", "20000", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    nk, lzd = doc["steps"]
    assert lzd["params"]["fit_interpolation"] == "lagrange8" and "fit_interpolation" not in nk["params"]
    for k, v in zip(("shift_x", "shift_y", "shift_z"), doc["translation"]):
        assert abs(v - pair["truth"][k]) < 0.01, (k, v, pair["truth"][k])
    res = _run(runner, pair, tmp_path / "x.tif", "--method", "nuthkaab", "--fit-interpolation", "lagrange8")
    assert res.exit_code == 2 and "takes --fit-interpolation" in res.stderr and "lzd" in res.stderr
    assert not (tmp_path / "x.tif").exists()


def test_a_given_transform_is_not_a_method():
    with pytest.raises(click.BadParameter, match="unknown method 'rigidtransform'") as err:
        resolve_methods("nuthkaab+rigidtransform")
    assert "dhminimize" in str(err.value) and "coregpipeline" not in str(err.value)


@pytest.mark.parametrize(("text", "names"), [
    ("icp", ["ICP"]), ("lzd", ["LZD"]), ("dhminimize", ["DhMinimize"]), ("DhMinimize", ["DhMinimize"]),
    ("nuthkaab+lzd", ["NuthKaab", "LZD"]), ("nuthkaab+icp", ["NuthKaab", "ICP"]),
    ("lzd+deramp", ["LZD", "Deramp"]), ("icp+lzd+vshift", ["ICP", "LZD", "VerticalShift"]),
])
def test_rigid_methods_resolve_and_take_the_rigid_options(text, names):
    classes = resolve_methods(text)
    assert [c.__name__ for c in classes] == names
    model = build_coreg(classes, {"resampling": "cubic", "initial_shift": (1.0, -2.0), "subsample": 5000})
    steps = model.steps if len(names) > 1 else [model]
    takers = [s for s in steps if "initial_shift" in s.get_params()]
    for step in steps:
        params = step.get_params()
        if "resampling" in params:
            assert params["resampling"] == "cubic"
        if "initial_shift" in params:  # the start goes to the first step that takes it, not to the later ones
            start = params["initial_shift"]
            assert (tuple(start) == (1.0, -2.0)) if step is takers[0] else start is None


def test_rotating_step_summary_lines():
    """What the CLI prints for a rotating step and for the merged transform of a pipeline."""
    from xdem.cli.coreg import _fmt_step
    from xdem.coreg import merged_transform
    from xdem.workflows._summary import steps_summary, transform_lines

    a = xdem.coreg.RigidTransform.from_rotations(0.01, -0.02, 0.25, translation=(1.0, 2.0, 0.5),
                                                 centroid=(500.0, 400.0, 100.0))
    b = xdem.coreg.RigidTransform.from_translations(0.5, -1.0, 0.25)
    pipe = xdem.coreg.CoregPipeline([a, b])
    (step,) = steps_summary(a)
    line = _fmt_step(step)
    assert line.startswith("RigidTransform: rotations rx=+0.010000°, ry=-0.020000°, rz=+0.250000° about "
                           "(500.000, 400.000, 100.000), then translation shift_x=+1.0000, shift_y=+2.0000")
    m = merged_transform(pipe)
    np.testing.assert_allclose(m["matrix"], b.to_matrix() @ a.to_matrix(), atol=1e-12)
    np.testing.assert_allclose(m["matrix"], pipe.to_matrix(), atol=1e-12)
    np.testing.assert_allclose(m["rotations_deg"], [0.01, -0.02, 0.25], atol=1e-9)
    assert m["centre"] == [500.0, 400.0, 100.0] and m["complete"] is True
    np.testing.assert_allclose(m["translation"], [1.5, 1.0, 0.75], atol=1e-9)  # the centre moves by both
    doc = {"steps": [step, step], "rotations_deg": m["rotations_deg"], "rotation_centre": m["centre"],
           "translation": m["translation"], "matrix_is_complete": True}
    (text,) = transform_lines(doc)
    assert text.startswith("rigid transform (2 steps merged: one resampling): rotations rx=+0.010000°")
    assert "about (500.000, 400.000, 100.000), then translation (+1.5000, +1.0000, +0.7500)" in text


@pytest.fixture(scope="module")
def rotated_pair(tmp_path_factory):
    """A 300 x 300 DEM of rough analytic terrain at 5 m pixels and the same terrain rotated by
    (0.01, -0.015, 0.2) degrees about its centre and translated by (2.0, -1.5, 0.4) m
    (``truth.rigid_dem_of``, exact): the transform to find is the inverse of that motion."""
    from affine import Affine
    from truth import SineTerrain, dem_of, rigid_dem_of

    from xdem.kernels.rigid import rigid_matrix, rotation_matrix

    crs, x0, y0, res, n = "EPSG:32633", 500_000.0, 5_000_000.0, 5.0, 300
    terrain = SineTerrain(crs=crs, origin=(x0, y0))
    t = Affine(res, 0.0, x0, 0.0, -res, y0)
    centre = np.array([x0 + n * res / 2, y0 - n * res / 2, 1000.0])
    motion = rigid_matrix(rotation_matrix(0.01, -0.015, 0.2), np.array([2.0, -1.5, 0.4]), centre)
    folder = tmp_path_factory.mktemp("rotated")
    ref = dem_of(terrain, crs=crs, transform=t, shape=(n, n))
    tba = rigid_dem_of(terrain, transform=t, shape=(n, n), matrix=motion)
    ref.rio.to_raster(folder / "ref.tif")
    tba.rio.to_raster(folder / "tba.tif")
    return {"ref": folder / "ref.tif", "tba": folder / "tba.tif", "fix": np.linalg.inv(motion), "centre": centre}


@pytest.mark.parametrize("method", ["lzd", "icp", "nuthkaab+lzd"])
def test_rotation_is_found_printed_and_in_the_json(rotated_pair, runner, tmp_path, method):
    """The rotation reaches the JSON (per step and merged), the printed summary and the output.
    Tolerances are the CLI plumbing's, not the methods' accuracy targets (tested with them): the
    rotations within 0.002 degree, the residual NMAD below 5 % of the one before."""
    from xdem.kernels.rigid import rotations_of, split_matrix

    out = tmp_path / "r.tif"
    res = _run(runner, rotated_pair, out, "--method", method, "--resampling", "cubic", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    fix = rotated_pair["fix"]
    want = rotations_of(split_matrix(fix, np.zeros(3))[0])
    np.testing.assert_allclose(doc["rotations_deg"], want, atol=0.002)
    m = np.asarray(doc["matrix"])
    np.testing.assert_allclose(split_matrix(m, np.asarray(doc["rotation_centre"]))[1], doc["translation"], atol=1e-9)
    rigid_steps = [s for s in doc["steps"] if "rotation_z" in s]
    assert rigid_steps and all(len(s["matrix"]) == 4 and len(s["centroid"]) == 3 for s in rigid_steps)
    assert "rotations rx=" in res.stderr and "about (" in res.stderr
    assert doc["stats"]["after"]["nmad"] < 0.05 * doc["stats"]["before"]["nmad"]
    assert doc["matrix_is_complete"] is True


def test_initial_shift_starts_the_first_step_only(pair, runner, tmp_path):
    """``--initial-shift`` is where a pipeline starts: given again to the second step (which
    fits after the first one's correction), it would be counted twice."""
    truth = pair["truth"]
    start = (round(truth["shift_x"]), round(truth["shift_y"]))
    res = _run(runner, pair, tmp_path / "i.tif", "--method", "nuthkaab+icp", "--initial-shift", *map(str, start),
               "--subsample", "20000", "--json", "--no-stats")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    nk, icp = doc["steps"]
    for k, v in zip(("shift_x", "shift_y", "shift_z"), doc["translation"]):
        assert abs(v - truth[k]) < 0.05, (k, v, truth[k])
    assert tuple(nk["params"]["initial_shift"]) == start and icp["params"]["initial_shift"] is None
