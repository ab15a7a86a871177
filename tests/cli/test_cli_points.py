"""``xdem coreg`` with a points reference and ``xdem info`` of a points file.
"""

from __future__ import annotations

import geopandas as gpd
import pandas as pd
import pytest
from point_tracks import CRS, MOVES, SIZE, shifted

import xdem
from xdem.points import read_points


def test_cli_coreg_reference_points(tmp_path, track_points: gpd.GeoDataFrame) -> None:
    import json

    from click.testing import CliRunner

    from xdem.cli import main

    dx, dy, dz = MOVES[0]
    tba = tmp_path / "tba.tif"
    shifted(MOVES[0]).rio.to_raster(tba)
    pts = tmp_path / "ref_points.gpkg"
    track_points[["h_noisy", "geometry"]].rename(columns={"h_noisy": "h"}).to_file(pts)
    out = tmp_path / "aligned.tif"
    report = tmp_path / "report.html"
    res = CliRunner().invoke(main, ["coreg", str(pts), str(tba), "-o", str(out), "--z-column", "h", "--json",
                                    "--report", str(report)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    step = doc["steps"][0]
    assert abs(step["shift_x"] + dx) <= 0.08 and abs(step["shift_y"] + dy) <= 0.08 and abs(step["shift_z"] + dz) <= 0.02
    assert doc["points"]["count"] == len(track_points) and doc["points"]["n_outliers"] >= int(0.03 * len(track_points))
    before, after = doc["stats"]["before"], doc["stats"]["after"]
    assert abs(after["median"]) < 0.05 and after["nmad"] < 0.5 < before["nmad"]  # the noise (0.3 m) is what is left
    assert doc["stats"]["after_without_outliers"]["count"] < after["count"]
    page = report.read_text()
    assert page.count("data:image/png;base64,") == 2 and "Tracks coloured by dh" in page and doc["report"]
    written = xdem.open_dem(out)
    assert written.shape == (SIZE, SIZE)
    # reverse: DEM reference, points to align: a moved points file
    moved = tmp_path / "moved.gpkg"
    res = CliRunner().invoke(main, ["coreg", str(tba), str(pts), "-o", str(moved), "--z-column", "h", "--json",
                                    "--method", "nuthkaab"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["output_kind"] == "points" and abs(doc["steps"][0]["shift_x"] - dx) <= 0.08
    assert abs(doc["stats"]["after"]["median"]) < 0.05
    assert len(gpd.read_file(moved)) == len(track_points)
    # a CSV without CRS (--points-crs) and a pipeline
    csv = tmp_path / "ref_points.csv"
    p = read_points(pts, z_column="h")
    pd.DataFrame({"x": p.x, "y": p.y, "h": p.z}).to_csv(csv, index=False)
    res = CliRunner().invoke(main, ["coreg", str(csv), str(tba), "-o", str(tmp_path / "a2.tif"), "--z-column", "h",
                                    "--points-crs", CRS, "--method", "nuthkaab+deramp", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [s["method"] for s in doc["steps"]] == ["NuthKaab", "Deramp"]
    assert abs(doc["steps"][0]["shift_x"] + dx) <= 0.08 and doc["points"]["n_outliers"] > 0
    assert abs(doc["stats"]["after"]["median"]) < 0.05
    # the output kind must match the side being aligned
    res = CliRunner().invoke(main, ["coreg", str(pts), str(tba), "-o", str(tmp_path / "x.gpkg"), "--z-column", "h"])
    assert res.exit_code == 2 and "must end in .tif or .tiff" in res.output  # a DEM is aligned: a GeoTIFF is written


def test_cli_info_points(tmp_path, track_points: gpd.GeoDataFrame) -> None:
    import json

    from click.testing import CliRunner

    from xdem.cli import main

    pts = tmp_path / "points.gpkg"
    track_points.to_crs("EPSG:4326").to_file(pts)
    res = CliRunner().invoke(main, ["info", str(pts), "--z-column", "h", "--json"])
    assert res.exit_code == 0, res.output
    meta = json.loads(res.stdout)
    assert meta["count"] == len(track_points) and meta["crs"] == "EPSG:4326"
    assert meta["z_min"] == pytest.approx(float(track_points["h"].min()))
    res = CliRunner().invoke(main, ["info", str(pts), "--z-column", "h"])
    assert res.exit_code == 0 and "Points:" in res.output
