"""The bundled stand-ins for upstream's Longyearbyen files: what they are, and their truth."""

from __future__ import annotations

import geopandas as gpd
import numpy as np
import pytest
import rasterio

import xdem
from xdem.examples import get_path
from xdem.examples.standins import ERRORS, OUTLINES, TRUTH, error_field, thinning, write_standins
from xdem.io.grid import block_xy


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    return write_standins(tmp_path_factory.mktemp("standins"))


def test_names_resolve_to_bundled_files():
    assert get_path("lidar_ref_dem") == get_path("lidar")
    assert get_path("lidar_tba_dem").name == "lidar_tba_dem.tif"
    assert get_path("lidar_outlines").name == "lidar_outlines.gpkg"
    assert {"lidar_ref_dem", "lidar_tba_dem", "lidar_outlines"} <= set(xdem.examples.available())


def test_bundled_tba_is_what_write_standins_makes(rebuilt):
    with rasterio.open(get_path("lidar_tba_dem")) as a, rasterio.open(rebuilt["lidar_tba_dem"]) as b:
        assert a.transform == b.transform and a.crs == b.crs
        np.testing.assert_allclose(a.read(1), b.read(1), atol=1e-4, equal_nan=True)


def test_bundled_outlines_are_what_write_standins_makes(rebuilt):
    a, b = gpd.read_file(get_path("lidar_outlines")), gpd.read_file(rebuilt["lidar_outlines"])
    assert list(a["NAME"]) == [o.name for o in OUTLINES]
    assert a.crs == b.crs and a.crs.to_epsg() == 26915
    assert all(ga.equals_exact(gb, 1e-6) for ga, gb in zip(a.geometry, b.geometry))


def test_one_outline_reaches_beyond_the_dem():
    with rasterio.open(get_path("lidar")) as src:
        bounds = src.bounds
    outlines = gpd.read_file(get_path("lidar_outlines"))
    outside = [g.bounds[1] < bounds.bottom for g in outlines.geometry]
    assert outside == [False, False, True]


def test_tba_is_shifted_reference_plus_known_thinning():
    """Away from the outlines, tba - ref(x - dx, y - dy) is dz; inside, dz plus the thinning."""
    ref, tba, truth = xdem.examples.example_pair()
    with rasterio.open(get_path("lidar_tba_dem")) as src:
        bundled = src.read(1)
        x, y = block_xy(src.transform, 0, 0, bundled.shape)
    dh = bundled - tba.values  # example_pair's tba has no thinning
    expected = thinning(x[None, :], y[:, None])
    ok = np.isfinite(dh)
    np.testing.assert_allclose(dh[ok], expected[ok], atol=1e-4)
    assert expected.min() == pytest.approx(-6.0, abs=0.05) and (expected[expected < 0] <= -1.0).all()
    assert TRUTH == {"shift_x": truth["shift_x"], "shift_y": truth["shift_y"], "shift_z": truth["shift_z"]}


def test_nuth_kaab_on_stable_terrain_finds_the_truth():
    """NuthKaab with the outlines excluded recovers the known shift (1 cm: sub-pixel on 1 m pixels)."""
    import geoutils as gu

    ref = gu.Raster(get_path("lidar_ref_dem"))
    stable = ~gu.Vector(get_path("lidar_outlines")).create_mask(ref)
    nk = xdem.coreg.NuthKaab().fit(xdem.DEM(get_path("lidar_ref_dem")), xdem.DEM(get_path("lidar_tba_dem")),
                                   inlier_mask=stable)
    got = nk.to_translations()
    for name, value in zip(("shift_x", "shift_y", "shift_z"), got):
        assert value == pytest.approx(TRUTH[name], abs=0.01)


def test_bundled_coreg_and_ddem_are_what_write_standins_makes(rebuilt):
    for name in ("lidar_tba_dem_coreg", "lidar_ddem"):
        with rasterio.open(get_path(name)) as a, rasterio.open(rebuilt[name]) as b:
            assert a.transform == b.transform and a.crs == b.crs
            np.testing.assert_allclose(a.read(1), b.read(1), atol=1e-4)
    a, b = gpd.read_file(get_path("lidar_outlines_2010")), gpd.read_file(rebuilt["lidar_outlines_2010"])
    assert all(ga.equals_exact(gb, 1e-6) for ga, gb in zip(a.geometry, b.geometry))


def test_ddem_is_reference_minus_coreg_and_its_errors_have_the_stated_spread():
    """lidar_ddem = ref - coreg = -thinning - errors, the errors exactly error_field's; off the
    outlines their spread is 0.05 + 0.01 * slope: the NMAD of dh / sigma(slope) is 1 within 10 %
    (160,000 pixels correlated over 40 m: about 100 independent patches; other seeds of the
    field give 0.97 to 1.04 over the whole grid)."""
    with rasterio.open(get_path("lidar")) as r, rasterio.open(get_path("lidar_tba_dem_coreg")) as c, \
            rasterio.open(get_path("lidar_ddem")) as d:
        ref, coreg, ddem, transform = r.read(1).astype(float), c.read(1).astype(float), d.read(1), r.transform
    np.testing.assert_allclose(ddem, ref - coreg, atol=1e-3)
    x, y = block_xy(transform, 0, 0, ref.shape)
    stable = thinning(x[None, :], y[:, None]) == 0
    gy, gx = np.gradient(ref, 1.0)
    z = ddem / (ERRORS.sigma(np.degrees(np.arctan(np.hypot(gx, gy)))))
    assert xdem.spatialstats.nmad(z[stable]) == pytest.approx(1.0, rel=0.10)
    np.testing.assert_allclose(ddem + thinning(x[None, :], y[:, None]), -error_field(ref, transform), atol=1e-3)
    glacier = ~stable
    assert np.median(ddem[glacier] + thinning(x[None, :], y[:, None])[glacier]) == pytest.approx(0.0, abs=0.05)
    shrunk = gpd.read_file(get_path("lidar_outlines_2010")).area.to_numpy()
    assert np.allclose(shrunk / gpd.read_file(get_path("lidar_outlines")).area.to_numpy(), 0.81, rtol=1e-3)
