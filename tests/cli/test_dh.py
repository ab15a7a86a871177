"""``xdem dh`` end to end on a small glacier set written to files (write_glacier_set)."""

from __future__ import annotations

import warnings
from datetime import datetime

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import rasterio
import rasterio._io
from affine import Affine
from click.testing import CliRunner
from rasterio.errors import NotGeoreferencedWarning
from rasterio.features import rasterize
from shapely.geometry import box

from xdem.cli import main
from xdem.examples.glaciers import END, START, glacier_set, write_glacier_set
from xdem.io.open import open_dem
from xdem.volume import ErrorModel, volume_change


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return write_glacier_set(tmp_path_factory.mktemp("glaciers"), shape=(400, 400))


def _args(files, out, *extra):
    return ["dh", str(files["ref"]), str(files["start"]), "--later", "ref", "--outlines", str(files["outlines"]),
            "-o", str(out), *extra]


@pytest.fixture(scope="module")
def run(files, tmp_path_factory):
    folder = tmp_path_factory.mktemp("out")
    out, dh_out = folder / "changes.gpkg", folder / "dh.tif"
    result = CliRunner().invoke(main, _args(files, out, "--start", "1990-08-01", "--end", "2009-08-01",
                                            "--dh-out", str(dh_out)))
    return result, out, dh_out


def test_table_equals_the_python_api(run, files):
    result, out, _ = run
    assert result.exit_code == 0, result.output
    assert result.output.strip() == str(out)
    got = gpd.read_file(out)
    dh = open_dem(files["ref"]) - open_dem(files["start"])
    want = volume_change(dh.rio.write_crs("EPSG:32633"), str(files["outlines"]), start=START, end=END)
    assert list(got["NAME"]) == list(want["NAME"])
    cols = [c for c in want.columns if c not in ("NAME", "geometry")]
    assert set(cols) <= set(got.columns)
    np.testing.assert_allclose(got[cols].to_numpy(float), want[cols].to_numpy(float), rtol=1e-12)
    assert got.crs == want.crs


def test_dh_out_is_later_minus_earlier(run, files):
    _, _, dh_out = run
    with rasterio.open(dh_out) as src:
        got = src.read(1, masked=True).filled(np.nan)
    want = (open_dem(files["ref"]) - open_dem(files["start"])).values
    np.testing.assert_allclose(got, want, atol=1e-5, equal_nan=True)


def test_csv_by_suffix_and_json(files, tmp_path, run):
    out = tmp_path / "changes.csv"
    result = CliRunner().invoke(main, _args(files, out, "--json"))
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out)
    assert "geometry" not in table.columns and len(table) == 3
    ref = gpd.read_file(run[1])
    np.testing.assert_allclose(table["volume_change"], ref["volume_change"], rtol=1e-12)
    assert '"dh": "ref minus aligned"' in result.output and '"volume_change_err"' in result.output
    assert not any(c.endswith("_rate") for c in table.columns)  # no dates, no rates


def test_refuses_to_overwrite_and_leaves_the_output(files, run):
    _, out, _ = run
    before = out.stat().st_mtime_ns
    result = CliRunner().invoke(main, _args(files, out))
    assert result.exit_code == 1
    assert result.output.startswith("Error:") and "--overwrite" in result.output and result.output.count("\n") == 1
    assert out.stat().st_mtime_ns == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["changes.gpkg", "dh.tif"]  # no temporary file


def test_bad_outlines_path_is_one_line(files, tmp_path):
    out = tmp_path / "c.gpkg"
    args = _args(files, out)
    args[args.index("--outlines") + 1] = str(tmp_path / "nope.gpkg")
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert result.output.startswith("Error:") and "nope.gpkg" in result.output and result.output.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_bad_suffix_and_dates_are_refused(files, tmp_path):
    result = CliRunner().invoke(main, _args(files, tmp_path / "c.txt"))
    assert result.exit_code == 2 and ".gpkg or .csv" in result.output
    result = CliRunner().invoke(main, _args(files, tmp_path / "c.csv", "--start", "2009-08-01", "--end", "1990-08-01"))
    assert result.exit_code == 1 and "must be after" in result.output
    assert list(tmp_path.iterdir()) == []
    assert datetime(1990, 8, 1) == START  # the dates given above are the set's


def test_heteroscedastic_error_by_slope_is_close_to_the_known_one(files, tmp_path, run):
    """--heteroscedastic bins dh's spread by REF's slope on stable terrain; the set's true error
    grows with slope (0.3 m + 0.02 m per degree). Against the known error map and variogram the
    standard errors agree within 20 % (measured: 2 % for the error map alone; the default two
    spherical models add about 10 %, tests/volume/test_change.py)."""
    out = tmp_path / "h.csv"
    result = CliRunner().invoke(main, _args(files, out, "--heteroscedastic"))
    assert result.exit_code == 0, result.output
    got = pd.read_csv(out)
    g = glacier_set((400, 400))
    known = volume_change(g.ddem, g.outlines, error=g.error,
                          error_model=ErrorModel(1.0, [("spherical", 1e-6, 0.2), ("gaussian", 400.0, 0.8)]))
    ratio = got["dh_noise_err"].to_numpy() / known["dh_noise_err"].to_numpy()
    assert np.all(np.abs(ratio - 1) < 0.2), ratio
    np.testing.assert_allclose(got["volume_change"], gpd.read_file(run[1])["volume_change"], rtol=1e-12)
    both = CliRunner().invoke(main, _args(files, tmp_path / "x.csv", "--heteroscedastic", "--error", str(files["ref"])))
    assert both.exit_code == 2 and "either --error or --heteroscedastic" in both.output


def test_fill_local_hypsometric_gives_the_full_volume(files, tmp_path):
    """--fill local_hypsometric: each glacier's volume within 0.5 % of the void-free truth (the
    unfilled means are 3-9 % off: voids sit in the accumulation areas); filled_fraction is the
    truth's void fraction (the fill reaches every void); the errors stay those of the unfilled run."""
    res = CliRunner().invoke(main, [*_args(files, tmp_path / "f.csv", "--fill", "local_hypsometric")])
    assert res.exit_code == 0, res.output
    got = pd.read_csv(tmp_path / "f.csv")
    truth = glacier_set((400, 400)).truth()
    np.testing.assert_allclose(got["volume_change"], truth["volume_full"], rtol=0.005)
    np.testing.assert_allclose(got["filled_fraction"], truth["void_fraction"], atol=1e-12)
    unfilled = CliRunner().invoke(main, [*_args(files, tmp_path / "u.csv")])
    assert unfilled.exit_code == 0, unfilled.output
    plain = pd.read_csv(tmp_path / "u.csv")
    assert (np.abs(plain["volume_change"] / truth["volume_full"].to_numpy() - 1) > 0.02).any()
    np.testing.assert_allclose(got["volume_change_err"], plain["volume_change_err"], rtol=1e-12)


def test_fill_with_a_voided_reference_says_so_in_one_line(files, tmp_path):
    """REF = the earlier DEM, which has the voids: the hypsometric curve cannot reach them."""
    args = ["dh", str(files["start"]), str(files["ref"]), "--outlines", str(files["outlines"]), "-o",
            str(tmp_path / "v.csv"), "--fill", "local_hypsometric"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.stderr.splitlines() if "voids on the glaciers" in ln)
    assert line.startswith("Warning: the reference DEM has ") and "void-free" in line


def test_fill_choices_are_the_ddem_methods():
    from xdem.cli.dh import FILL_METHODS
    from xdem.ddem import METHODS

    assert FILL_METHODS == METHODS


def test_outlines_off_the_dems_name_the_file_in_one_line(files, tmp_path):
    far = gpd.read_file(files["outlines"])
    far["geometry"] = far.translate(xoff=1e6)
    far.to_file(tmp_path / "far.gpkg")
    res = CliRunner().invoke(main, ["dh", str(files["ref"]), str(files["start"]), "--later", "ref", "--outlines",
                                    str(tmp_path / "far.gpkg"), "-o", str(tmp_path / "f.csv")])
    assert res.exit_code == 1, res.output
    assert res.output.strip() == f"Error: no outline of '{tmp_path / 'far.gpkg'}' covers a pixel centre of the dDEM; " \
        "check that the outlines and the DEMs cover one area, and the outlines' CRS (GeoJSON without one is read as " \
        "EPSG:4326)"
    assert not (tmp_path / "f.csv").exists()


class _RacingEnv(rasterio._io.Env):
    """rasterio's in-memory raster enters this Env between its ``catch_warnings`` "ignore" and
    its open without a geotransform: here another thread leaving its own ``catch_warnings`` block
    puts back the filters it had saved (those before rasterio's "ignore"), deterministically."""

    def __enter__(self):
        warnings.filters = warnings.filters[1:]  # rasterio's "ignore" is the first
        warnings._filters_mutated()
        return super().__enter__()


def test_a_thread_race_on_warning_filters_shows_no_in_memory_raster_warning(files, tmp_path, monkeypatch):
    """The race that printed a stray ``Warning: Dataset has no geotransform...`` line before the
    one-line error of ``xdem dh`` interrupted in its volume pass (tests/test_signals.py), made
    deterministic: first shown to give the warning to a plain rasterize, then a whole ``xdem dh``
    run (which burns the outlines with rasterize) under it prints no warning line."""
    monkeypatch.setattr(rasterio._io, "Env", _RacingEnv)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rasterize([(box(0, -10, 10, 0), 1)], out_shape=(4, 4), transform=Affine(5, 0, 0, 0, -5, 0))
    assert [type(w.message).__name__ for w in caught] == ["NotGeoreferencedWarning"]  # the race, reproduced
    with warnings.catch_warnings():  # pytest's configuration ignores this warning: a user's does not
        warnings.filterwarnings("always", category=NotGeoreferencedWarning)
        result = CliRunner().invoke(main, _args(files, tmp_path / "changes.csv"))
    assert result.exit_code == 0, result.output
    assert "geotransform" not in result.output and "NotGeoreferenced" not in result.output, result.output
