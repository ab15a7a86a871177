"""Agreement of xdem.terrain with GDAL's gdaldem (3.6.2) on the bundled real lidar DEM.

The references in ``tests/data/gdaldem/`` were produced once with the command lines of
``tests/data/gdaldem/COMMANDS.md``; gdaldem is never called here.

Tolerances (float32 DEM, 1 m pixels):

- Zevenbergen & Thorne slope and aspect: 1e-4 degree (every cell where gdaldem has a value).
- Horn slope/aspect: gdaldem sums the weighted 3x3 window in float32 while xdem sums in
  float64, which moves the gradient by up to ~5e-5 m/m. We compare the gradient vectors
  ``-tan(slope) * (sin(aspect), cos(aspect))`` to 1e-4 m/m, slope to 1e-4 rad (0.0057 degree),
  percent slope to 0.01 % (1e-4 m/m), and aspect to 0.2 degree where the slope exceeds 1 degree
  (1e-4 / tan(1 degree) = 0.33 degree is the bound implied by the gradient tolerance).
- Hillshade: gdaldem writes Byte (rounded), so 0.51 of the 1-255 scale.
- TRI (Riley and Wilson), roughness: 1e-4 m; TPI: 1e-4 m.
- NaN pattern: exactly gdaldem's nodata pattern (edges, holes, flat aspect).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import rasterio

import xdem

DATA = Path(__file__).parents[1] / "data" / "gdaldem"
INPUT = DATA / "input.tif"
T = xdem.terrain


def read_ref(name: str) -> np.ndarray:
    """gdaldem output as float64 with its nodata turned into NaN."""
    with rasterio.open(DATA / name) as src:
        values = src.read(1).astype(np.float64)
        nodata = src.nodata
    values[values == nodata] = np.nan
    return values


def ours(attr) -> np.ndarray:
    values = attr.values
    assert values.dtype == np.float32
    return values.astype(np.float64)


def assert_same_nan(got: np.ndarray, ref: np.ndarray) -> None:
    mismatch = np.isnan(got) != np.isnan(ref)
    assert not mismatch.any(), f"NaN pattern differs from gdaldem at {np.argwhere(mismatch)[:5].tolist()}"


def assert_close(got: np.ndarray, ref: np.ndarray, atol: float) -> None:
    assert_same_nan(got, ref)
    np.testing.assert_allclose(got, ref, atol=atol, rtol=0, equal_nan=True)


def angle_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs((a - b + 180.0) % 360.0 - 180.0)


def gradient_vector(slope_deg: np.ndarray, aspect_deg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = np.tan(np.radians(slope_deg))
    return -t * np.sin(np.radians(aspect_deg)), -t * np.cos(np.radians(aspect_deg))


def test_reference_files_are_small_and_present():
    files = list(DATA.glob("*.tif"))
    assert len(files) >= 20
    assert sum(f.stat().st_size for f in files) < 4 * 2**20
    assert "gdaldem slope" in (DATA / "COMMANDS.md").read_text()


def test_edges_are_nan_like_gdaldem_without_compute_edges():
    s = ours(T.slope(INPUT))
    assert np.isnan(s[0]).all() and np.isnan(s[-1]).all() and np.isnan(s[:, 0]).all() and np.isnan(s[:, -1]).all()
    assert not np.isnan(s[1:-1, 1:-1]).any()


def test_zevenbergen_thorne_slope_and_aspect():
    assert_close(ours(T.slope(INPUT, method="zevenbergthorne")), read_ref("slope_zt.tif"), atol=1e-4)
    a, ref = ours(T.aspect(INPUT, method="zevenbergen_thorne")), read_ref("aspect_zt.tif")
    assert_same_nan(a, ref)
    assert np.nanmax(angle_diff(a, ref)) < 1e-4


@pytest.mark.parametrize("source, slope_ref, aspect_ref", [
    ("input.tif", "slope_horn.tif", "aspect_horn.tif"),
    ("input_holes.tif", "slope_holes_horn.tif", "aspect_holes_horn.tif"),
])
def test_horn_slope_and_aspect(source, slope_ref, aspect_ref):
    s, a = (ours(x) for x in T.get_terrain_attribute(DATA / source, ["slope", "aspect"]))
    gs, ga = read_ref(slope_ref), read_ref(aspect_ref)
    assert_close(np.radians(s), np.radians(gs), atol=1e-4)
    assert_same_nan(a, ga)  # edges, holes, and flat cells (-9999 in gdaldem) alike
    ox, oy = gradient_vector(s, a)
    gx, gy = gradient_vector(gs, ga)
    valid = ~np.isnan(ga)
    assert np.max(np.hypot(ox - gx, oy - gy)[valid]) < 1e-4
    steep = valid & (gs > 1.0)
    assert steep.sum() > 0.9 * valid.sum()
    assert np.max(angle_diff(a, ga)[steep]) < 0.2


def test_flat_patch_has_nan_aspect_where_gdaldem_has_nodata():
    a = ours(T.aspect(DATA / "input_holes.tif"))
    ga = read_ref("aspect_holes_horn.tif")
    flat = np.zeros_like(a, dtype=bool)
    flat[151:156, 141:147] = True  # interior of the 7 x 8 flat patch written by make_holes.py
    assert np.isnan(ga[flat]).all() and np.isnan(a[flat]).all()
    s = ours(T.slope(DATA / "input_holes.tif"))
    assert (s[flat] == 0).all()


def test_percent_slope_and_anisotropic_pixels():
    assert_close(ours(T.slope(INPUT, units="percent")), read_ref("slope_percent_horn.tif"), atol=1e-2)
    s = ours(T.slope(DATA / "input_res1x2.tif"))
    assert_close(np.radians(s), np.radians(read_ref("slope_res1x2_horn.tif")), atol=1e-4)


def test_gdaldem_aspect_ignores_pixel_size_but_xdem_does_not():
    """Documented divergence: on 1 x 2 m pixels gdaldem's aspect is its 1 x 1 m aspect."""
    ref = read_ref("aspect_res1x2_zt.tif")
    same_values_square = ours(T.aspect(INPUT, method="zevenbergthorne"))
    assert np.nanmax(angle_diff(same_values_square, ref)) < 1e-4
    true_aniso = ours(T.aspect(DATA / "input_res1x2.tif", method="zevenbergthorne"))
    assert np.nanmax(angle_diff(true_aniso, ref)) > 5.0


@pytest.mark.parametrize("method, ref", [("horn", "hillshade_horn.tif"), ("zevenbergthorne", "hillshade_zt.tif")])
def test_hillshade_default_light(method, ref):
    assert_close(ours(T.hillshade(INPUT, method=method)), read_ref(ref), atol=0.51)


def test_hillshade_custom_light_and_z_factor():
    h = ours(T.hillshade(INPUT, azimuth=200, altitude=30, z_factor=3))
    assert_close(h, read_ref("hillshade_az200_alt30_z3_horn.tif"), atol=0.51)


@pytest.mark.parametrize("algorithm, ref", [("riley", "tri_riley.tif"), ("wilson", "tri_wilson.tif")])
def test_terrain_ruggedness_index(algorithm, ref):
    assert_close(ours(T.terrain_ruggedness_index(INPUT, algorithm=algorithm)), read_ref(ref), atol=1e-4)


def test_tri_default_is_riley():
    assert_close(ours(T.terrain_ruggedness_index(INPUT)), read_ref("tri_riley.tif"), atol=1e-4)


@pytest.mark.parametrize("source, ref", [("input.tif", "tpi.tif"), ("input_holes.tif", "tpi_holes.tif")])
def test_topographic_position_index(source, ref):
    assert_close(ours(T.topographic_position_index(DATA / source)), read_ref(ref), atol=1e-4)


def test_roughness():
    assert_close(ours(T.roughness(INPUT)), read_ref("roughness.tif"), atol=1e-4)


def test_all_at_once_matches_gdaldem():
    """The single-pass stacked computation gives the same values as the single attributes."""
    names = ["slope", "hillshade", "tri", "tpi", "roughness"]
    outs = [ours(x) for x in T.get_terrain_attribute(INPUT, names)]
    refs = ["slope_horn.tif", "hillshade_horn.tif", "tri_riley.tif", "tpi.tif", "roughness.tif"]
    tols = [np.degrees(1e-4), 0.51, 1e-4, 1e-4, 1e-4]
    for got, ref, tol in zip(outs, refs, tols):
        assert_close(got, read_ref(ref), atol=tol)
