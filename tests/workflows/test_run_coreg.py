"""``xdem.workflows.run_coreg``: the ``xdem coreg`` job called from Python."""

from __future__ import annotations

import json

import numpy as np
import pytest
import rasterio
from click.testing import CliRunner
from helpers import write_points_at_pixels
from rio_cogeo.cogeo import cog_validate

import xdem
import xdem.coreg
from xdem.cli import main
from xdem.errors import NotEnoughDataError, OutputError
from xdem.examples import write_example_pair
from xdem.workflows import CoregRequest, CoregResult, run_coreg

#: Keys of the document that depend on the run (time, memory, where it ran, the output path).
VOLATILE = {"timing", "peak_rss_mb", "peak_rss_children_mb", "output", "scheduler", "workers"}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return write_example_pair(tmp_path_factory.mktemp("wpair"))


def _read(path) -> np.ndarray:
    with rasterio.open(path) as src:
        return src.read(1)


def _same(a, b, path="doc"):
    """Equal documents, floats to 1e-12 relative (JSON round trip)."""
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, float):
        assert b == pytest.approx(a, rel=1e-12, abs=1e-12), path
    else:
        assert a == b, path


@pytest.mark.parametrize("grid", ["tba", "ref"])
def test_run_coreg_document_equals_the_cli_json(pair, tmp_path, grid):
    request = CoregRequest(reference=pair["ref"], to_be_aligned=pair["tba"], output=tmp_path / "py.tif",
                           coreg=xdem.coreg.NuthKaab(random_state=7), random_state=7, options={"random_state": 7},
                           grid=grid, json_out=tmp_path / "py.json")
    result = run_coreg(request)
    assert isinstance(result, CoregResult)
    res = CliRunner().invoke(main, ["coreg", str(pair["ref"]), str(pair["tba"]), "-o", str(tmp_path / "cli.tif"),
                                    "--random-state", "7", "--grid", grid, "--json", "--quiet"])
    assert res.exit_code == 0, res.output
    cli_doc = json.loads(res.stdout)
    py_doc = json.loads(result.json_text)
    assert json.loads((tmp_path / "py.json").read_text()) == py_doc  # --json-out == the document
    _same({k: v for k, v in cli_doc.items() if k not in VOLATILE}, {k: v for k, v in py_doc.items() if k not in VOLATILE})
    assert py_doc["output"] == str(tmp_path / "py.tif") and result.output == tmp_path / "py.tif"
    assert set(result.timings) == {"fit_s", "write_s", "stats_s", "verdict_s", "report_s", "total_s"}
    assert cog_validate(str(result.output), quiet=True)[0]
    np.testing.assert_array_equal(_read(result.output), _read(tmp_path / "cli.tif"))  # the same pixels
    assert result.coreg.shift_x_ == pytest.approx(cli_doc["steps"][0]["shift_x"], abs=1e-12)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cli.tif", "py.json", "py.tif"]  # no temporary files


def test_run_coreg_exact_and_no_stats(pair, tmp_path):
    base = dict(reference=pair["ref"], to_be_aligned=pair["tba"], coreg=xdem.coreg.VerticalShift())
    none = run_coreg(CoregRequest(**base, output=tmp_path / "a.tif", stats="none")).document
    assert none["stats"] is None and none["verdict"] is None and none["inputs"]["method"] == "verticalshift"
    exact = run_coreg(CoregRequest(**base, output=tmp_path / "b.tif", stats="exact")).document
    assert exact["stats"]["method"].startswith("exact") and exact["verdict"] is not None
    assert abs(exact["stats"]["after"]["median"]) < 1e-3


def test_run_coreg_failure_after_the_write_leaves_nothing(pair, tmp_path, monkeypatch):
    def boom(*args, **kwargs):
        raise NotEnoughDataError("injected")

    from xdem.workflows import _summary  # where the statistics stage finds dh_stats

    monkeypatch.setattr(_summary, "dh_stats", boom)
    request = CoregRequest(reference=pair["ref"], to_be_aligned=pair["tba"], output=tmp_path / "out.tif",
                           coreg=xdem.coreg.VerticalShift(), stats="exact")
    with pytest.raises(NotEnoughDataError, match="injected"):
        run_coreg(request)
    assert list(tmp_path.iterdir()) == []


def test_run_coreg_refuses_an_existing_output_before_fitting(pair, tmp_path, monkeypatch):
    (tmp_path / "out.tif").write_bytes(b"keep")
    monkeypatch.setattr(xdem.coreg.Coreg, "fit", lambda *a, **k: pytest.fail("fitted before the checks"))
    with pytest.raises(OutputError, match="already exists"):
        run_coreg(CoregRequest(reference=pair["ref"], to_be_aligned=pair["tba"], output=tmp_path / "out.tif",
                               coreg=xdem.coreg.VerticalShift()))
    assert (tmp_path / "out.tif").read_bytes() == b"keep"


class _GivenRotation(xdem.coreg.RigidCoreg):
    """A stand-in rigid method (not registered): its "fit" sets a known rotation about the middle
    of the reference, so that the run's document and report can be checked against it."""

    ROTATIONS = (0.01, -0.02, 0.2)

    def __init__(self, *, resampling: str = "cubic") -> None:
        self.resampling = resampling

    def _fit(self, data):
        from xdem.kernels.rigid import rotation_matrix

        centre = (float(data.ref.x.mean()), float(data.ref.y.mean()), 100.0)
        self._set_transform(rotation_matrix(*self.ROTATIONS), (1.5, -0.5, 0.25), centre)


def test_run_coreg_document_and_report_carry_the_rigid_transform(pair, tmp_path):
    """Rotations (degrees), their centre, the translation and the merged matrix are in the
    document (merged: the pipeline's to_matrix) and on the report page, with their JSON keys."""
    from xdem.kernels.rigid import rotations_of, split_matrix
    from xdem.report.html import fmt

    model = _GivenRotation() + xdem.coreg.DhMinimize(subsample=20_000)
    result = run_coreg(CoregRequest(reference=pair["ref"], to_be_aligned=pair["tba"], output=tmp_path / "a.tif",
                                    coreg=model, report=tmp_path / "r.html", json_out=tmp_path / "a.json"))
    doc = json.loads((tmp_path / "a.json").read_text())
    rot, dm = result.coreg.steps
    np.testing.assert_allclose(doc["matrix"], result.coreg.to_matrix(), rtol=0, atol=1e-9)
    np.testing.assert_allclose(doc["matrix"], dm.to_matrix() @ rot.to_matrix(), rtol=0, atol=1e-9)
    assert doc["matrix_is_complete"] is True and doc["rotation_centre"] == rot.centroid_
    np.testing.assert_allclose(doc["rotations_deg"], _GivenRotation.ROTATIONS, atol=1e-9)
    r, t = split_matrix(np.asarray(doc["matrix"]), np.asarray(doc["rotation_centre"]))
    np.testing.assert_allclose(rotations_of(r), doc["rotations_deg"], atol=1e-12)
    np.testing.assert_allclose(t, doc["translation"], atol=1e-9)
    step = doc["steps"][0]
    assert [step[f"rotation_{a}"] for a in "xyz"] == pytest.approx(list(_GivenRotation.ROTATIONS), abs=1e-12)
    assert step["centroid"] == rot.centroid_ and len(step["matrix"]) == 4
    html = (tmp_path / "r.html").read_text()
    assert "Rotations and translation of the rigid transform" in html
    for i in range(3):
        for key in ("rotations_deg", "rotation_centre", "translation"):
            assert f'data-key="{key}.{i}">{fmt(doc[key][i])}<' in html, (key, i)
    # a report from the fitted coregistration alone computes the same numbers (keys coreg.*)
    from xdem.report import write_report

    ref, tba = xdem.open_dem(pair["ref"]), xdem.open_dem(pair["tba"])
    page = write_report(tmp_path / "alone.html", ref=ref, tba=tba, coreg=result.coreg, max_pixels=5_000,
                        subsample=2_000).read_text()
    for i in range(3):
        assert f'data-key="coreg.rotations_deg.{i}">{fmt(doc["rotations_deg"][i])}<' in page


def _count_opens(monkeypatch) -> tuple[dict, dict]:
    """Count, per file name, the DEMs opened (:func:`xdem.open_dem` of a path) and the output
    paths checked in a run."""
    import collections
    import os

    import xdem.io.open
    from xdem.workflows import _summary

    opened: dict = collections.Counter()
    checked: dict = collections.Counter()
    real_open, real_check = xdem.io.open._open_path, _summary.check_new_output

    def open_path(path, **kwargs):
        opened[os.path.basename(path)] += 1
        return real_open(path, **kwargs)

    def check(path, **kwargs):
        checked[os.path.basename(path)] += 1
        return real_check(path, **kwargs)

    monkeypatch.setattr(xdem.io.open, "_open_path", open_path)
    monkeypatch.setattr(_summary, "check_new_output", check)
    return opened, checked


def test_one_run_opens_each_input_once_and_checks_each_path_once(pair, tmp_path, monkeypatch):
    opened, checked = _count_opens(monkeypatch)
    res = CliRunner().invoke(main, ["coreg", str(pair["ref"]), str(pair["tba"]), "-o", str(tmp_path / "out.tif"),
                                    "--exact-stats", "--report", str(tmp_path / "r.html"),
                                    "--json-out", str(tmp_path / "c.json"), "--dh-out", str(tmp_path / "dh.tif")])
    assert res.exit_code == 0, res.output
    # the written output is opened once too, for the statistics, the verdict and the report
    assert dict(opened) == {"ref.tif": 1, "tba.tif": 1, "out.tif": 1}
    assert dict(checked) == {"out.tif": 1, "c.json": 1, "dh.tif": 1, "r.html": 1}


def test_points_go_through_the_same_stages_opening_each_input_once(pair, tmp_path, monkeypatch):
    crs = write_points_at_pixels(tmp_path / "pts.csv", pair["ref"], step=5)
    import xdem.workflows.points as wp

    reads: list = []
    real_read = wp.read_points
    monkeypatch.setattr(wp, "read_points", lambda source, **kw: reads.append(source) or real_read(source, **kw))
    opened, checked = _count_opens(monkeypatch)
    res = CliRunner().invoke(main, ["coreg", str(tmp_path / "pts.csv"), str(pair["tba"]), "-o",
                                    str(tmp_path / "out.tif"), "--points-crs", crs, "--json-out",
                                    str(tmp_path / "c.json")])
    assert res.exit_code == 0, res.output
    assert len(reads) == 1 and dict(opened) == {"tba.tif": 1, "out.tif": 1}
    assert dict(checked) == {"out.tif": 1, "c.json": 1}
    assert json.loads((tmp_path / "c.json").read_text())["points"]["side"] == "reference"
