"""Vertical CRSs (:mod:`xdem.vcrs`, ``DEM.set_vcrs`` / ``DEM.to_vcrs``, ``xdem coreg --to-vcrs``).

Truth used here:

- EGM96 undulations at grid nodes and cell centres read from the grid file itself with numpy
  (the .gtx layout: a big-endian header of 4 doubles and 2 ints, then float32 rows from the
  south): PROJ interpolates bilinearly, so at a node it must give the node's value and at a
  cell centre the mean of the 4 nodes (tolerance 1e-4 m: float32 storage and summation);
- NGA's EGM96 test points (lat, lon, N) of the EGM96 distribution's interpolation test
  (INPUT.DAT / OUTINTPT.DAT, as widely quoted, e.g. GeographicLib's documentation). NGA's
  values come from its own interpolation of the 15' grid (a bicubic spline through the 6 x 6
  nodes around the point), PROJ's from bilinear interpolation of PROJ's copy of that grid: they
  agree to a few centimetres (measured: at most 5.6 cm), so the tolerance of the default
  (bilinear) route is 0.07 m. ``interpolation="spline"`` is NGA's method: measured within 2.2 mm
  of the six values, so its tolerance is 0.005 m (the values are rounded to 1 mm, the grid is
  stored in float32, and the spline's end conditions are not documented by NGA);
- an EGM2008 stand-in: a plane of undulations written as ``us_nga_egm08_25.tif`` in a temporary
  ``XDEM_GRIDS_DIR`` (bilinear interpolation of a plane is exact), for the "found" route.
"""

from __future__ import annotations

import cloudpickle
import numpy as np
import pyproj
import pytest
import rasterio
from click.testing import CliRunner
from helpers import count_computes, write_tif
from rasterio.transform import from_origin

import xdem
import xdem.vcrs as V
from xdem.cli import main
from xdem.errors import InputError
from xdem.examples import write_example_pair

EGM96 = V.find_grid("egm96_15.gtx")  # Debian's proj-data (README: set-up); the test needs it
#: NGA's EGM96 test points: latitude, longitude (0-360), undulation N (m).
NGA_POINTS = [(38.6281550, 269.7791550, -31.628), (-14.6212170, 305.0211140, -2.969),
              (46.8743190, 102.4487290, -43.575), (-23.6174460, 133.8747120, 15.871),
              (38.6254730, 359.9995000, 50.066), (-0.4667440, 0.0023000, 17.329)]


def _gtx_nodes(path: str) -> tuple[np.ndarray, float, float, float]:
    raw = open(path, "rb").read()
    lat0, lon0, dlat, dlon = np.frombuffer(raw[:32], ">f8")
    rows, cols = np.frombuffer(raw[32:40], ">i4")
    return np.frombuffer(raw[40:], ">f4").reshape(rows, cols).astype(np.float64), lat0, lon0, dlat


def _geographic_dem(lon0: float, lat0: float, shape: tuple[int, int], step: float = 0.25) -> xdem.DEM:
    """Zero ellipsoid heights on a lon/lat grid whose first pixel centre is (lon0, lat0)."""
    t = from_origin(lon0 - step / 2, lat0 + step / 2, step, step)
    return xdem.DEM.from_array(np.zeros(shape, dtype=np.float64), t, "EPSG:4326", vcrs="Ellipsoid")


@pytest.fixture(scope="module")
def lidar():
    return xdem.DEM(xdem.examples.get_path("lidar"), vcrs="Ellipsoid")


def test_egm96_at_grid_nodes_and_cell_centres_is_the_grid_read_by_hand():
    nodes, lat0, lon0, d = _gtx_nodes(EGM96)
    i0, j0 = int((45.0 - lat0) / d), int((-100.0 - lon0) / d)  # node (45 N, 100 W), then rows go north
    # a DEM whose centres are the nodes 45..46 N, 100..99 W (north-up: first row is the northmost)
    at_nodes = _geographic_dem(-100.0, 46.0, (5, 5)).to_vcrs("EGM96").to_xarray().values
    want = -nodes[i0:i0 + 5, j0:j0 + 5][::-1]  # H = 0 - N
    np.testing.assert_allclose(at_nodes, want, atol=1e-4)
    mid = _geographic_dem(-100.0 + d / 2, 46.0 - d / 2, (4, 4)).to_vcrs("EGM96").to_xarray().values
    block = nodes[i0:i0 + 5, j0:j0 + 5][::-1]
    want_mid = -(block[:-1, :-1] + block[1:, :-1] + block[:-1, 1:] + block[1:, 1:]) / 4
    np.testing.assert_allclose(mid, want_mid, atol=1e-4)


@pytest.mark.parametrize(("lat", "lon", "n"), NGA_POINTS)
def test_egm96_at_nga_test_points_within_a_few_centimetres(lat, lon, n):
    lon = lon - 360 if lon > 180 else lon
    h = _geographic_dem(lon, lat, (2, 2), step=1e-6).to_vcrs(5773).to_xarray().values  # centre [0, 0] on the point
    assert h[0, 0] == pytest.approx(-n, abs=0.07)


@pytest.mark.parametrize(("lat", "lon", "n"), NGA_POINTS)
def test_egm96_spline_at_nga_test_points_within_5_mm(lat, lon, n):
    lon = lon - 360 if lon > 180 else lon
    dem = _geographic_dem(lon, lat, (2, 2), step=1e-6)
    h = dem.to_vcrs(5773, interpolation="spline").to_xarray().values
    assert h[0, 0] == pytest.approx(-n, abs=0.005)
    assert V.geoid_undulation(dem.to_xarray(), interpolation="spline").values[0, 0] == pytest.approx(n, abs=0.005)


def test_egm96_spline_at_grid_nodes_is_the_node_and_is_smooth_between():
    nodes, lat0, lon0, d = _gtx_nodes(EGM96)
    i0, j0 = int((45.0 - lat0) / d), int((-100.0 - lon0) / d)
    at_nodes = V.geoid_undulation(_geographic_dem(-100.0, 46.0, (5, 5)).to_xarray(), interpolation="spline").values
    np.testing.assert_allclose(at_nodes, nodes[i0:i0 + 5, j0:j0 + 5][::-1], atol=1e-4)  # interpolating spline
    # across the antimeridian the grid wraps: 179.9 E and -180.1 (= 179.9 E) give the same value
    east = V.geoid_undulation(_geographic_dem(179.9, 10.0, (2, 2)).to_xarray(), interpolation="spline").values
    west = V.geoid_undulation(_geographic_dem(-180.1, 10.0, (2, 2)).to_xarray(), interpolation="spline").values
    assert east[0, 0] == pytest.approx(west[0, 0], abs=1e-9)
    line = _geographic_dem(-100.2, 45.1, (2, 161), step=0.0025).to_xarray()  # across the node at 100 W
    fine = V.geoid_undulation(line, interpolation="spline").values[0]
    bil = V.geoid_undulation(line).values[0]
    assert np.abs(fine - bil).max() < 0.1  # the two interpolations of the same grid, within centimetres
    assert np.abs(np.diff(fine, 2)).max() < np.abs(np.diff(bil, 2)).max()  # no kinks at the nodes


def test_unknown_geoid_interpolation_is_one_line(lidar):
    with pytest.raises(InputError, match="one of bilinear, spline"):
        lidar.to_vcrs("EGM96", interpolation="cubic")


def test_round_trip_and_chunk_independent_and_lazy(lidar):
    arr64 = lidar.to_xarray().astype("float64")
    outs = []
    for chunks in (100, 160, None):
        src = arr64.chunk(chunks) if chunks else arr64.compute()  # numpy-backed for None
        with count_computes() as c:
            geoid = V.convert_heights(src, source="Ellipsoid", target="EGM96")
            back = V.convert_heights(geoid, source="EGM96", target="Ellipsoid")
        assert c.count == 0
        outs.append(geoid.values)
        np.testing.assert_allclose(back.values, arr64.values, rtol=0, atol=1e-6)  # float64: exact to 1e-9
    assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], outs[2])
    assert np.ptp(outs[0] - arr64.values) > 0  # the undulation varies over the DEM (not a constant)
    splines = [V.geoid_undulation(arr64.chunk(c), interpolation="spline").values for c in (100, 160)]
    assert np.array_equal(splines[0], splines[1])
    # the graph crosses process boundaries (dask.distributed): no transformer in it
    again = cloudpickle.loads(cloudpickle.dumps(V.convert_heights(arr64.chunk(200), source="Ellipsoid",
                                                                  target="EGM96").data))
    assert np.array_equal(again.compute(), outs[0])


def test_set_vcrs_declares_to_vcrs_converts_neither_mutates(lidar):
    before = lidar.to_xarray().values.copy()
    dem = xdem.DEM(lidar)
    dem.set_vcrs("EGM96")
    assert dem.vcrs.to_epsg() == 5773 and dem.vcrs_grid == "us_nga_egm96_15.tif"
    assert np.array_equal(dem.to_xarray().values, before) and lidar.vcrs == "Ellipsoid"
    with count_computes() as c:
        out = lidar.to_vcrs("EGM96")
    assert c.count == 0
    assert out.vcrs_name == "EGM96 height" and "EGM96" in out.ccrs.name
    assert lidar.vcrs == "Ellipsoid" and np.array_equal(lidar.to_xarray().values, before)
    n = V.geoid_undulation(lidar.to_xarray(), vcrs="EGM96").values
    np.testing.assert_allclose(out.to_xarray().values, before - n, atol=1e-4)  # float32 DEM: 3e-5 at 300 m
    inplace = xdem.DEM(lidar)
    assert inplace.to_vcrs("EGM96", inplace=True) is None
    assert inplace.vcrs.to_epsg() == 5773 and lidar.vcrs == "Ellipsoid"
    np.testing.assert_array_equal(inplace.to_xarray().values, out.to_xarray().values)
    forced = xdem.DEM(xdem.examples.get_path("lidar")).to_vcrs("Ellipsoid", force_source_vcrs="EGM96")
    np.testing.assert_allclose(forced.to_xarray().values, before + n, atol=1e-4)


def test_the_vertical_crs_a_file_declares_is_read(tmp_path):
    path = write_tif(tmp_path / "compound.tif", np.ones((4, 4), "float32"), crs="EPSG:32633+5773")
    assert xdem.DEM(path).vcrs.to_epsg() == 5773
    with pytest.warns(UserWarning, match="will override"):
        assert xdem.DEM(path, vcrs="Ellipsoid").vcrs == "Ellipsoid"
    assert xdem.DEM(write_tif(tmp_path / "plain.tif", np.ones((4, 4), "float32"))).vcrs is None


@pytest.mark.parametrize(("value", "match"), [("EGM2020", "not recognised"), (32633, "not a vertical CRS"),
                                              (3.5, "vcrs must be")])
def test_bad_vcrs_is_one_line(value, match):
    with pytest.raises(InputError, match=match) as e:
        V.parse_vcrs(value)
    assert "\n" not in str(e.value)


def test_no_vcrs_to_convert_from_is_one_line():
    dem = xdem.DEM(xdem.examples.get_path("lidar"))
    with pytest.raises(InputError, match="set_vcrs"):
        dem.to_vcrs("EGM96")


def test_missing_grid_names_the_file_and_the_folders(tmp_path, monkeypatch, lidar):
    monkeypatch.setenv("XDEM_GRIDS_DIR", str(tmp_path))
    monkeypatch.delenv("PROJ_DATA", raising=False)
    monkeypatch.delenv("PROJ_LIB", raising=False)
    monkeypatch.setattr(V, "SEARCH_PLACES", [V._env_dirs])
    with pytest.raises(InputError) as e:
        lidar.to_vcrs("EGM08")
    msg = str(e.value)
    assert "us_nga_egm08_25.tif" in msg and str(tmp_path) in msg and "projsync" in msg and "\n" not in msg


def _plane_grid(folder) -> None:
    """``N = 10 + 0.1 lon + 0.2 lat`` on nodes every 0.25 degrees over 40-50 N, 100-85 W."""
    lon, lat = np.arange(-100, -84.99, 0.25), np.arange(50, 39.99, -0.25)
    n = 10 + 0.1 * lon[None, :] + 0.2 * lat[:, None]
    with rasterio.open(folder / "us_nga_egm08_25.tif", "w", driver="GTiff", width=lon.size, height=lat.size, count=1,
                       dtype="float32", crs="EPSG:4326", transform=from_origin(-100.125, 50.125, 0.25, 0.25)) as f:
        f.write(n.astype("float32"), 1)


def test_egm2008_route_with_a_grid_in_xdem_grids_dir(tmp_path, monkeypatch, lidar):
    folder = tmp_path / "grids with spaces"  # PROJ gets the path quoted
    folder.mkdir()
    _plane_grid(folder)
    monkeypatch.setenv("XDEM_GRIDS_DIR", str(folder))
    arr = lidar.to_xarray()
    xs, ys = np.meshgrid(arr.x.values, arr.y.values)  # pixel centres
    lon, lat = pyproj.Transformer.from_crs(26915, 4269, always_xy=True).transform(xs, ys)
    want_n = 10 + 0.1 * lon + 0.2 * lat
    h = arr.values.astype(np.float64)
    out = lidar.to_vcrs("EGM08")
    assert out.vcrs.to_epsg() == 3855
    np.testing.assert_allclose(out.to_xarray().values, h - want_n, atol=1e-4)  # float32 grid and DEM
    n96 = V.geoid_undulation(arr, vcrs="EGM96").values
    via = lidar.to_vcrs("EGM96").to_vcrs(3855)  # geoid to geoid through the ellipsoid
    np.testing.assert_allclose(via.to_xarray().values, h - want_n, atol=2e-4)
    assert np.ptp(n96 - want_n) > 0  # two different grids: a real conversion


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return write_example_pair(tmp_path_factory.mktemp("vpair"))


def test_cli_warns_on_different_vertical_crss_and_converts_with_to_vcrs(pair, tmp_path):
    runner = CliRunner()
    base = ["coreg", str(pair["ref"]), str(pair["tba"]), "--no-stats", "-q"]
    res = runner.invoke(main, [*base, "-o", str(tmp_path / "a.tif"), "--ref-vcrs", "Ellipsoid", "--tba-vcrs", "5773"])
    assert res.exit_code == 0, res.output
    assert "not comparable" in res.output and "--to-vcrs" in res.output
    res = runner.invoke(main, [*base, "-o", str(tmp_path / "b.tif"), "--to-vcrs", "EGM96"])
    assert res.exit_code == 1 and "give --ref-vcrs" in res.output and len(res.output.strip().splitlines()) == 1
    res = runner.invoke(main, [*base, "-o", str(tmp_path / "c.tif"), "--ref-vcrs", "Ellipsoid", "--tba-vcrs",
                               "Ellipsoid", "--to-vcrs", "EGM96"])
    assert res.exit_code == 0, res.output
    out = xdem.DEM(tmp_path / "c.tif")
    assert out.vcrs.to_epsg() == 5773  # the COG declares the compound CRS
    # the same shift in both DEMs: the fit sees dh as before; the output is tba_aligned - N
    aligned = xdem.DEM(str(tmp_path / "a.tif")).to_xarray().values
    n = V.geoid_undulation(xdem.open_dem(pair["tba"]), vcrs="EGM96").values
    ok = np.isfinite(aligned) & np.isfinite(out.to_xarray().values)
    np.testing.assert_allclose(out.to_xarray().values[ok], (aligned - n)[ok], atol=1e-3)
    res = runner.invoke(main, [*base, "-o", str(tmp_path / "d.tif"), "--force-vcrs", "Ellipsoid", "--to-vcrs",
                               "EGM96", "--geoid-interpolation", "spline"])
    assert res.exit_code == 0, res.output
    n_spline = V.geoid_undulation(xdem.open_dem(pair["tba"]), vcrs="EGM96", interpolation="spline").values
    spline_out = xdem.DEM(tmp_path / "d.tif").to_xarray().values
    np.testing.assert_allclose(spline_out[ok], (aligned - n_spline)[ok], atol=1e-3)
    assert np.abs(n_spline - n).max() > 1e-4  # the option changed the conversion
    res = runner.invoke(main, [*base, "-o", str(tmp_path / "e.tif"), "--force-vcrs", "Ellipsoid", "--ref-vcrs", "5773"])
    assert res.exit_code == 2 and "--force-vcrs" in res.output
