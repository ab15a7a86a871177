"""The typed JSON document (:mod:`xdem.workflows.document`) says what a run writes: every key a
run's document (and each of its parts) holds is declared, and every required key is there."""

from __future__ import annotations

import json

import pytest
from helpers import write_points_at_pixels

import xdem.coreg
from xdem.examples import write_example_pair
from xdem.workflows import CoregRequest, run_coreg
from xdem.workflows import document as D
from xdem.workflows.filters import OutlierFilters

#: The typed part of each key of the document holding a JSON object.
PARTS = {"frame": D.FrameSummary, "stats": D.StatsRecord, "verdict": D.VerdictRecord, "filters": D.FiltersRecord,
         "input_checks": D.InputChecksRecord, "inputs": D.InputsRecord, "timing": D.Timing, "points": D.PointsRecord}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return write_example_pair(tmp_path_factory.mktemp("dpair"))


def _keys(td: type) -> tuple[frozenset[str], frozenset[str]]:
    return td.__required_keys__, td.__required_keys__ | td.__optional_keys__  # type: ignore[attr-defined]


def _declared(doc: dict, td: type, where: str) -> None:
    required, declared = _keys(td)
    assert set(doc) <= declared, f"{where}: undeclared keys {sorted(set(doc) - declared)}"
    assert required <= set(doc), f"{where}: missing keys {sorted(required - set(doc))}"


def _check(doc: dict) -> None:
    _declared(doc, D.CoregDocument, "document")
    for key, td in PARTS.items():
        if isinstance(doc.get(key), dict):
            _declared(doc[key], td, key)
    for name in ("before", "after", "after_without_outliers"):
        if isinstance((doc.get("stats") or {}).get(name), dict):
            _declared(doc["stats"][name], D.DhStats, f"stats.{name}")
    for check in (doc.get("verdict") or {}).get("checks", []):
        _declared(check, D.CheckRecord, "verdict.checks")


def test_a_pair_document_has_the_declared_keys(pair, tmp_path):
    result = run_coreg(CoregRequest(reference=pair["ref"], to_be_aligned=pair["tba"], output=tmp_path / "a.tif",
                                    coreg=xdem.coreg.NuthKaab(), filters=OutlierFilters(max_slope=40.0, nmad_filter=3.0),
                                    json_out=tmp_path / "a.json"))
    _check(result.document)
    assert json.loads((tmp_path / "a.json").read_text()) == json.loads(result.json_text)


def test_a_points_document_has_the_declared_keys(pair, tmp_path):
    crs = write_points_at_pixels(tmp_path / "pts.csv", pair["ref"], step=7)
    result = run_coreg(CoregRequest(reference=tmp_path / "pts.csv", to_be_aligned=pair["tba"], output=tmp_path / "o.tif",
                                    coreg=xdem.coreg.NuthKaab(), points_crs=crs,
                                    filters=OutlierFilters(max_slope=40.0)))
    _check(result.document)
    assert result.document["points"]["side"] == "reference"
