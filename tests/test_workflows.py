"""``xdem.workflows.run_coreg``: the ``xdem coreg`` job called from Python."""

from __future__ import annotations

import json

import numpy as np
import pytest
import rasterio
from click.testing import CliRunner
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


def test_run_coreg_failure_after_the_write_leaves_nothing(pair, tmp_path):
    def boom(*args, **kwargs):
        raise NotEnoughDataError("injected")

    request = CoregRequest(reference=pair["ref"], to_be_aligned=pair["tba"], output=tmp_path / "out.tif",
                           coreg=xdem.coreg.VerticalShift(), stats="exact")
    with pytest.raises(NotEnoughDataError, match="injected"):
        run_coreg(request, exact_stats=boom)
    assert list(tmp_path.iterdir()) == []


def test_run_coreg_refuses_an_existing_output_before_fitting(pair, tmp_path, monkeypatch):
    (tmp_path / "out.tif").write_bytes(b"keep")
    monkeypatch.setattr(xdem.coreg.Coreg, "fit", lambda *a, **k: pytest.fail("fitted before the checks"))
    with pytest.raises(OutputError, match="already exists"):
        run_coreg(CoregRequest(reference=pair["ref"], to_be_aligned=pair["tba"], output=tmp_path / "out.tif",
                               coreg=xdem.coreg.VerticalShift()))
    assert (tmp_path / "out.tif").read_bytes() == b"keep"
