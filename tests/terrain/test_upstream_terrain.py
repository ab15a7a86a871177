"""Upstream 0.2.3's terrain science on the lazy engine: Florinsky's fit, Minár et al.'s curvatures,
rugosity, fractal roughness, texture shading.

Truth is constructed: polynomials the fits must reproduce exactly, a sphere and a cylinder whose
curvatures are known in closed form, a plane's surface area, a brute-force box count, a sinusoid
that the texture-shading filter scales by ``(1 / period)^alpha``. The engine was also compared,
outside this suite, with upstream 0.2.3's own functions (surfit/window/freq) on a random DEM: all
attributes agree to 1e-11 with the same NaN cells.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr
from affine import Affine
from helpers import count_computes

import xdem
from xdem.errors import InputError
from xdem.terrain import fits as F
from xdem.terrain import upstream_engine as E
from xdem.terrain import windowed as W

RES = 2.0


def georef(values: np.ndarray, rx: float = RES, ry: float = RES, chunks: int | tuple[int, int] | None = None
           ) -> xr.DataArray:
    ny, nx = values.shape
    data = da.from_array(values, chunks=chunks or values.shape)
    dem = xr.DataArray(data, dims=("y", "x"), coords={"y": 7e6 - (np.arange(ny) + 0.5) * ry,
                                                      "x": 5e5 + (np.arange(nx) + 0.5) * rx})
    return dem.rio.write_crs("EPSG:32633").rio.write_transform(Affine(rx, 0, 5e5, 0, -ry, 7e6))


def grid(n: int, res: float = RES, ry: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Easting and northing (metres) of the cells of an n x n grid centred on 0, row 0 northernmost."""
    ry = res if ry is None else ry
    r, c = np.mgrid[0:n, 0:n].astype(float)
    return (c - n // 2) * res, -(r - n // 2) * ry


def random_dem(ny: int = 90, nx: int = 100, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(ny, nx)).cumsum(0).cumsum(1) * 0.05


# ------------------------------------------------------------------ fits


@pytest.mark.parametrize("rx, ry", [(2.0, 2.0), (1.5, 3.0)])
def test_florinsky_fit_is_exact_for_a_cubic_surface(rx, ry):
    x, y = grid(11, rx, ry)
    z = 2e-4 * x**3 - 3e-4 * x**2 * y + 1e-4 * y**3 + 0.03 * x * y - 0.02 * x**2 + 0.5 * x - 0.3 * y + 7.0
    zx, zy, zxx, zyy, zxy = F.derivatives(z, res_x=rx, res_y=ry, fit="florinsky")
    X, Y = x[2:-2, 2:-2], y[2:-2, 2:-2]
    truth = (6e-4 * X**2 - 6e-4 * X * Y + 0.03 * Y - 0.04 * X + 0.5, -3e-4 * X**2 + 3e-4 * Y**2 + 0.03 * X - 0.3,
             1.2e-3 * X - 6e-4 * Y - 0.04, 6e-4 * Y, -6e-4 * X + 0.03)
    for got, want in zip((zx, zy, zxx, zyy, zxy), truth, strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-11)
    # Zevenbergen & Thorne is exact for quadrics only: on the cubic its z_x is off by z_xxx res^2 / 6
    zt = F.derivatives(z, res_x=rx, res_y=ry, fit="ZevenbergThorne")[0]
    assert np.abs(zt[1:-1, 1:-1] - truth[0]).max() > 1e-5


def test_the_fit_windows_and_edges_are_upstreams():
    z = random_dem(20, 20)
    z[10, 9] = np.nan
    for fit, depth in (("Florinsky", 2), ("ZevenbergThorne", 1), ("Horn", 1)):
        s = xdem.terrain.slope(z, surface_fit=fit, resolution=RES)
        bad = np.zeros(z.shape, bool)
        bad[:depth], bad[-depth:], bad[:, :depth], bad[:, -depth:] = True, True, True, True
        bad[10 - depth : 11 + depth, 9 - depth : 10 + depth] = True
        np.testing.assert_array_equal(np.isnan(s), bad)


# ------------------------------------------------------------------ curvatures in closed form


def test_sphere_curvatures_are_one_over_the_radius():
    """On a sphere every normal section has curvature 1/R (convex: +100/R per 100 m); the contour
    through (x, y) is a circle of radius rho = hypot(x, y) (planform 1/rho) and slope lines are
    straight in plan (flowline 0). Tolerance: the fit's error on a non-polynomial surface, ~(res/R)^2."""
    radius = 400.0
    x, y = grid(61)
    z = np.sqrt(radius**2 - x**2 - y**2)
    names = ["profile_curvature", "tangential_curvature", "planform_curvature", "flowline_curvature",
             "max_curvature", "min_curvature"]
    out = dict(zip(names, xdem.terrain.get_terrain_attribute(z, names, resolution=RES), strict=True))
    inner = (np.hypot(x, y) > 10) & (np.hypot(x, y) < 50)  # off the top (where upstream gives 0) and the edges
    for n in ("profile_curvature", "tangential_curvature", "max_curvature", "min_curvature"):
        np.testing.assert_allclose(out[n][inner], 100 / radius, rtol=1e-3)
    np.testing.assert_allclose(out["planform_curvature"][inner], 100 / np.hypot(x, y)[inner], rtol=1e-3)
    np.testing.assert_allclose(out["flowline_curvature"][inner], 0.0, atol=1e-4)
    flat = xdem.terrain.max_curvature(np.full((7, 7), 5.0), resolution=RES)
    assert flat[3, 3] == 0.0  # a zero gradient gives 0, as upstream (not NaN)


def test_cylinder_has_one_principal_curvature_and_straight_contours():
    radius = 300.0
    x, y = grid(41)
    z = np.sqrt(radius**2 - x**2)  # a ridge along the north
    names = ["profile_curvature", "tangential_curvature", "planform_curvature", "max_curvature", "min_curvature"]
    out = dict(zip(names, xdem.terrain.get_terrain_attribute(z, names, resolution=RES), strict=True))
    side = (np.abs(x) > 8) & (np.abs(x) < 30) & (np.abs(y) < 30)
    np.testing.assert_allclose(out["profile_curvature"][side], 100 / radius, rtol=1e-3)
    np.testing.assert_allclose(out["max_curvature"][side], 100 / radius, rtol=1e-3)
    for n in ("tangential_curvature", "planform_curvature", "min_curvature"):
        np.testing.assert_allclose(out[n][side], 0.0, atol=1e-6)


def test_directional_and_total_curvature_of_a_paraboloid():
    a = 0.01
    x, y = grid(15)
    z = -a * (x**2 + y**2)  # a dome: z_xx = z_yy = -2a
    kw = {"resolution": RES, "curv_method": "directional"}
    kmax, kmin = xdem.terrain.max_curvature(z, **kw), xdem.terrain.min_curvature(z, **kw)
    ring = (np.hypot(x, y) > 0) & np.isfinite(kmax)
    np.testing.assert_allclose(kmax[ring], 200 * a, rtol=1e-9)  # Wood: -((z_xx + z_yy) / 2 -/+ 0)
    np.testing.assert_allclose(kmin[ring], 200 * a, rtol=1e-9)
    total = xdem.terrain.curvature(z, resolution=RES)
    np.testing.assert_allclose(total[2:-2, 2:-2], -2 * (-4 * a) * 100, rtol=1e-9)  # upstream's -2 (z_xx + z_yy)
    with pytest.raises(InputError, match="Horn"):
        xdem.terrain.max_curvature(z, resolution=RES, surface_fit="Horn")


# ------------------------------------------------------------------ windowed and frequency attributes


@pytest.mark.parametrize("rx, ry", [(2.0, 2.0), (1.0, 3.0)])
def test_rugosity_of_a_plane_is_its_area_ratio(rx, ry):
    gx, gy = 0.4, -0.7
    x, y = grid(7, rx, ry)
    z = gx * x + gy * y
    got = xdem.terrain.rugosity(georef(z, rx, ry)).values  # a DataArray: any pixels
    np.testing.assert_allclose(got[1:-1, 1:-1], np.sqrt(1 + gx**2 + gy**2), rtol=1e-12)
    assert np.isnan(got[0]).all()


def _fractal_brute_force(z: np.ndarray, w: int) -> np.ndarray:
    """Taud & Parrot's box count as upstream writes it, one window at a time."""
    hw = w // 2
    pad = np.pad(z, hw, constant_values=np.nan)
    qs = [q for q in range(1, hw + 1) if hw % q == 0]
    out = np.full(z.shape, np.nan)
    for r in range(z.shape[0]):
        for c in range(z.shape[1]):
            win = pad[r : r + w, c : c + w]
            v = np.clip(win - win[hw, hw], 0, w)
            ns = [sum(v[a * q : (a + 1) * q, b * q : (b + 1) * q].max() for a in range((w - 1) // q)
                      for b in range((w - 1) // q)) / q for q in qs]
            out[r, c] = -np.polyfit(np.log(qs), np.log(ns), 1)[0]
    return out


def test_fractal_roughness_equals_a_brute_force_box_count():
    z = random_dem(16, 17, seed=4) * 40
    got = xdem.terrain.fractal_roughness(z, window_size=9)
    np.testing.assert_allclose(got, _fractal_brute_force(z, 9), rtol=1e-9, equal_nan=True)
    # upstream's boxes leave the window's last row and column out: NaN on the first 4 rows, the last 3 only
    assert np.isnan(got[:4]).all() and np.isnan(got[-3:]).all() and np.isfinite(got[-4, 4:-3]).any()
    assert np.isfinite(got[4:-3, 4:-3]).mean() > 0.9


def test_texture_shading_scales_a_sinusoid_by_its_frequency():
    period, alpha = 16, 0.8
    c = np.arange(64)
    z = np.tile(np.cos(2 * np.pi * c / period), (64, 1)) + 100.0  # the mean is removed (alpha > 0)
    got = xdem.terrain.texture_shading(georef(z, chunks=16), alpha=alpha).values
    np.testing.assert_allclose(got, (1 / period) ** alpha * (z - 100.0), atol=1e-12)


def test_texture_shading_above_its_size_limit_is_one_clear_line(monkeypatch):
    monkeypatch.setattr(E, "TEXTURE_SHADING_MAX_PIXELS", 100)
    with count_computes() as c, pytest.raises(InputError, match="global FFT filter.*limit") as err:
        xdem.terrain.texture_shading(georef(np.zeros((20, 20))))
    assert "\n" not in str(err.value) and c.count == 0
    with pytest.raises(InputError, match="between 0 and 2"):
        W.texture_shading_array(np.zeros((4, 4)), alpha=3.0)


# ------------------------------------------------------------------ the engine: chunks, laziness, objects


def test_every_upstream_attribute_is_chunk_independent():
    z = random_dem()
    z[40:43, 50] = np.nan
    names = list(E.UPSTREAM_NAMES)
    opts = E.UpstreamOptions(window_size=7)
    one = [o.values for o in E.upstream_attributes(georef(z), names, opts)]
    many = [o.values for o in E.upstream_attributes(georef(z, chunks=(23, 31)), names, opts)]
    for name, a, b in zip(names, one, many, strict=True):
        np.testing.assert_array_equal(a, b, err_msg=name)
        assert np.isfinite(a).sum() > z.size // 2, name


def test_a_dem_is_lazy_and_equals_its_numpy_array():
    z = random_dem(60, 70).astype(np.float32)
    dem = xdem.DEM.from_array(z, Affine(RES, 0, 5e5, 0, -RES, 7e6), "EPSG:32633")
    with count_computes() as c:
        kmax = dem.max_curvature()
        slope, rug = dem.get_terrain_attribute(["slope", "rugosity"])
        frac = xdem.terrain.fractal_roughness(dem)
    assert c.count == 0 and all(isinstance(o, xdem.DEM) for o in (kmax, slope, rug, frac))
    with count_computes() as c:
        values = kmax.to_xarray().values
    assert c.count == 1 and values.dtype == np.float32
    np.testing.assert_array_equal(values, xdem.terrain.max_curvature(z, resolution=RES))
    np.testing.assert_array_equal(slope.to_xarray().values, xdem.terrain.slope(z, resolution=RES))
    np.testing.assert_array_equal(frac.to_xarray().values, xdem.terrain.fractal_roughness(z))
    horn = dem.slope(method="Horn").to_xarray().values  # upstream's deprecated method= overrides surface_fit
    np.testing.assert_array_equal(horn, xdem.terrain.slope(z, surface_fit="Horn", resolution=RES))
    assert np.isfinite(horn[1]).sum() > 0 and np.isnan(slope.to_xarray().values[1]).all()  # Florinsky: 2 pixels


def test_dataarrays_keep_our_meaning_for_our_names_and_get_upstreams_for_its_own():
    z = random_dem(40, 40)
    g = georef(z, chunks=20)
    with count_computes() as c:
        ours, theirs, slope = xdem.terrain.get_terrain_attribute(g, ["maximum_curvature", "max_curvature", "slope"])
    assert c.count == 0
    np.testing.assert_array_equal(ours.values, xdem.terrain.attributes.maximum_curvature(g).values)
    np.testing.assert_array_equal(theirs.values, xdem.terrain.max_curvature(z, resolution=RES))
    assert not np.allclose(ours.values, theirs.values, equal_nan=True)
    np.testing.assert_array_equal(slope.values, xdem.terrain.slope(z, surface_fit="Horn", resolution=RES))
    florinsky = xdem.terrain.slope(g, surface_fit="Florinsky").values  # our slope may use Florinsky's fit
    np.testing.assert_allclose(florinsky, xdem.terrain.slope(z, resolution=RES), rtol=1e-12, equal_nan=True)
    with pytest.raises(InputError, match="Zevenbergen"):
        xdem.terrain.profile_curvature(g, surface_fit="Florinsky")


def test_terrain_bias_derives_upstreams_max_curvature():
    z = random_dem(50, 50, seed=2)
    ref = georef(z.astype(np.float32), chunks=25)
    tb = xdem.coreg.TerrainBias(terrain_attribute="max_curvature")
    got = tb._attribute(ref).compute()
    np.testing.assert_array_equal(got, xdem.terrain.max_curvature(z.astype(np.float32), resolution=RES))
    tba = ref + 0.05 * xdem.terrain.max_curvature(ref)
    fitted = xdem.coreg.TerrainBias(terrain_attribute="max_curvature", bin_sizes=10, min_bin_count=5).fit(ref, tba)
    assert fitted.var_names_ == ["max_curvature"]
