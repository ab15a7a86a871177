"""GlacioHack/xdem 0.2.3's names in xdem.spatialstats, xdem.terrain and xdem.examples, as upstream calls them.

Truth is constructed: planes of known slope and aspect, a paraboloid of known second
derivatives, scipy's binned statistics on the same values; laziness is counted with dask
callbacks.
"""

from __future__ import annotations

import dask.array as da
import matplotlib
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from affine import Affine
from scipy import stats as sps

import xdem
from tests.helpers import count_computes
from xdem.errors import InputError

matplotlib.use("Agg")


def plane(ny: int, nx: int, gx: float, gy: float, rx: float, ry: float) -> np.ndarray:
    """z = gx * easting + gy * northing, row 0 northernmost."""
    return gx * (np.arange(nx) * rx)[None, :] + gy * (-np.arange(ny) * ry)[:, None] + 50.0


def georef(values: np.ndarray, rx: float = 1.0, ry: float = 1.0, chunks: int | None = None) -> xr.DataArray:
    ny, nx = values.shape
    data = values if chunks is None else da.from_array(values, chunks=chunks)
    dem = xr.DataArray(data, dims=("y", "x"), coords={"y": 7e6 - (np.arange(ny) + 0.5) * ry,
                                                      "x": 5e5 + (np.arange(nx) + 0.5) * rx})
    return dem.rio.write_crs("EPSG:32633").rio.write_transform(Affine(rx, 0, 5e5, 0, -ry, 7e6))


# ------------------------------------------------------------------ terrain: numpy arrays, as upstream


@pytest.mark.parametrize("method", ["Horn", "ZevenbergThorne"])
@pytest.mark.parametrize("gx, gy, res", [(1.0, 0.0, 1.0), (0.0, 1.0, 2.0), (0.3, -0.4, 5.0), (-0.2, 0.1, (0.5, 0.5))])
def test_slope_and_aspect_of_a_numpy_plane_are_its_known_slope_and_aspect(method, gx, gy, res):
    z = plane(7, 8, gx, gy, *((res, res) if np.isscalar(res) else res))
    s = xdem.terrain.slope(z, method, resolution=res)
    a = xdem.terrain.aspect(z, method)
    assert isinstance(s, np.ndarray) and s.shape == z.shape
    assert np.allclose(s[1:-1, 1:-1], np.degrees(np.arctan(np.hypot(gx, gy))), atol=1e-9)
    downslope = np.degrees(np.arctan2(-gx, -gy)) % 360  # clockwise from north, the way the slope faces
    assert np.allclose(a[1:-1, 1:-1], downslope, atol=1e-9)
    rad = xdem.terrain.slope(z, surface_fit=method, degrees=False, resolution=res)
    assert np.allclose(rad[1:-1, 1:-1], np.arctan(np.hypot(gx, gy)))
    assert np.isnan(s[0]).all() and np.isnan(s[:, -1]).all()  # the one-pixel edge


def test_upstream_docstring_example_gives_45_and_180():
    dem = np.repeat(np.arange(3), 3)[::-1].reshape(3, 3)  # integers, as upstream's example
    slope, aspect = xdem.terrain.get_terrain_attribute(dem, ["slope", "aspect"], resolution=1,
                                                       surface_fit="ZevenbergThorne")
    assert slope.dtype == np.float32 and aspect.dtype == np.float32
    assert slope[1, 1] == 45.0 and aspect[1, 1] == 180.0


def test_masked_cells_blank_only_their_windows_and_the_input_is_untouched():
    z = plane(9, 9, 0.5, 0.2, 1.0, 1.0)
    masked = np.ma.masked_array(z.copy(), mask=np.zeros_like(z, bool))
    masked[4, 4] = np.ma.masked
    before = masked.copy()
    s = xdem.terrain.slope(masked, resolution=1, surface_fit="Horn")  # 3 x 3 windows (Florinsky's: 5 x 5)
    assert np.isnan(s[3:6, 3:6]).all()
    ok = np.isfinite(s)
    assert ok.sum() == 7 * 7 - 9
    assert np.allclose(s[ok], np.degrees(np.arctan(np.hypot(0.5, 0.2))))
    assert np.array_equal(masked.mask, before.mask) and np.array_equal(masked.data, before.data)


def test_flat_aspect_is_180_on_arrays_as_upstream_and_nan_on_dataarrays_as_ours():
    flat = np.full((5, 5), 3.0)
    assert np.all(xdem.terrain.aspect(flat)[2:-2, 2:-2] == 180.0)  # Florinsky's 5 x 5 fit by default
    assert np.isnan(xdem.terrain.aspect(georef(flat)).values[1:-1, 1:-1]).all()


@pytest.mark.parametrize("altitude", [45.0, 30.0])
def test_hillshade_of_arrays_follows_upstreams_formula(altitude):
    flat = np.zeros((5, 5))
    hs = xdem.terrain.hillshade(flat, altitude=altitude, resolution=1)
    assert np.allclose(hs[2:-2, 2:-2], 1.5 + 254 * np.sin(np.radians(altitude)))  # Florinsky: 2-pixel edge
    # a plane facing the light (north-west, azimuth 315): upstream = ours (gdaldem's) + 0.5
    z = plane(6, 6, 0.3, -0.3, 1.0, 1.0)  # rises to the south-east: faces north-west
    ours = xdem.terrain.hillshade(georef(z), altitude=altitude).values
    assert np.allclose(xdem.terrain.hillshade(z, resolution=1, altitude=altitude)[2:-2, 2:-2], ours[2:-2, 2:-2] + 0.5)


def test_curvature_of_a_paraboloid_in_upstream_units():
    a = 0.01
    y, x = np.mgrid[-4:5, -4:5].astype(float) * 2.0  # 2 m pixels
    z = a * (x**2 + y**2)  # z_xx = z_yy = 2a per metre
    up = xdem.terrain.curvature(z, resolution=2)
    assert np.allclose(up[2:-2, 2:-2], -2 * (2 * a + 2 * a) * 100)  # upstream 0.2.3: -2 (z_xx + z_yy) * 100 (100/m), Florinsky
    ours = xdem.terrain.curvature(georef(z, 2.0, 2.0)).values
    assert np.allclose(ours[1:-1, 1:-1], -(2 * a + 2 * a) * 100)  # ours: half of it
    with pytest.raises(InputError, match="Horn"):
        xdem.terrain.curvature(z, resolution=2, surface_fit="Horn")


def test_windowed_attributes_of_arrays_equal_those_of_dataarrays():
    z = np.random.default_rng(3).normal(size=(12, 11)).cumsum(axis=0)
    g = georef(z)
    for name, kw in [("terrain_ruggedness_index", {}), ("topographic_position_index", {}), ("roughness", {}),
                     ("terrain_ruggedness_index", {"method": "Wilson"})]:
        got = getattr(xdem.terrain, name)(z, **kw)
        assert isinstance(got, np.ndarray)
        np.testing.assert_allclose(got, getattr(xdem.terrain, name)(g, **kw).values, equal_nan=True)


def test_dataarrays_stay_lazy_with_upstream_arguments():
    dem = georef(plane(40, 40, 0.2, 0.1, 1.0, 1.0), chunks=20)
    with count_computes() as c:
        s = xdem.terrain.slope(dem, "ZevenbergThorne", degrees=False)
        outs = xdem.terrain.get_terrain_attribute(dem, ["slope", "max_curvature", "tri"], hillshade_azimuth=200,
                                                  tri_method="Wilson")
    assert c.count == 0 and isinstance(s.data, da.Array) and all(isinstance(o.data, da.Array) for o in outs)
    with count_computes() as c:
        values = s.values
    assert c.count == 1
    assert np.allclose(values[1:-1, 1:-1], np.arctan(np.hypot(0.2, 0.1)))


def test_upstream_only_options_and_bad_inputs_give_one_clear_line():
    z = plane(6, 6, 0.1, 0.1, 1.0, 1.0)
    # once "issue 27": upstream's names, Florinsky's fit and its curvatures now give numbers (tests/terrain/
    # test_upstream_terrain.py checks them); on a plane every curvature is 0 and the rugosity 1 / cos(slope)
    for name in ("tangential_curvature", "flowline_curvature", "min_curvature", "profile_curvature"):
        got = getattr(xdem.terrain, name)(z, resolution=1)
        assert np.allclose(got[2:-2, 2:-2], 0.0, atol=1e-9) and np.isnan(got[:2]).all()
    rug = xdem.terrain.get_terrain_attribute(z, "rugosity", resolution=1)
    assert np.allclose(rug[1:-1, 1:-1], np.sqrt(1 + 0.1**2 + 0.1**2))
    assert np.allclose(xdem.terrain.slope(z, surface_fit="Florinsky", resolution=1)[2:-2, 2:-2],
                       np.degrees(np.arctan(np.hypot(0.1, 0.1))))
    with pytest.raises(InputError, match="resolution"):
        xdem.terrain.rugosity(z)
    with pytest.raises(InputError, match="resolution"):
        xdem.terrain.slope(z)
    with pytest.raises(InputError, match="square pixels"):
        xdem.terrain.slope(z, resolution=(2.0, 1.0))  # upstream refuses them too (aspect takes no resolution)
    with pytest.raises(InputError, match="too small"):
        xdem.terrain.slope(np.ones((1, 5)), resolution=1)
    with pytest.raises(InputError, match="differs"):
        xdem.terrain.slope(georef(z), resolution=3)
    with pytest.raises(InputError, match="curv_method"):
        xdem.terrain.get_terrain_attribute(z, "curvature", resolution=1, curv_method="bogus")


# ------------------------------------------------------------------ spatialstats


def test_nmad_ignores_masked_and_nan_values_and_takes_nfact():
    rng = np.random.default_rng(0)
    x = rng.normal(size=1001)
    masked = np.ma.masked_array(np.concatenate([x, [1e6, -1e6]]), mask=[False] * 1001 + [True, True])
    mad = np.median(np.abs(x - np.median(x)))
    assert xdem.spatialstats.nmad(masked) == pytest.approx(1.4826 * mad, rel=1e-12)
    assert xdem.spatialstats.nmad(np.concatenate([x, [np.nan]]), nfact=1) == pytest.approx(mad, rel=1e-12)
    assert xdem.spatialstats.nmad(da.from_array(x.reshape(7, 143), chunks=50)) == pytest.approx(1.4826 * mad)


def _scipy_1d(values, var, bins):
    ok = np.isfinite(values) & np.isfinite(var)
    med, edges, _ = sps.binned_statistic(var[ok], values[ok], statistic=np.nanmedian, bins=bins)
    cnt = sps.binned_statistic(var[ok], values[ok], statistic="count", bins=bins)[0]
    return cnt, med, edges


def test_nd_binning_has_upstreams_layout_and_scipys_numbers():
    rng = np.random.default_rng(1)
    dh, slope, aspect = rng.normal(size=(30, 40)), rng.uniform(0, 60, (30, 40)), rng.uniform(0, 360, (30, 40))
    dh[0, :5] = np.nan
    df = xdem.spatialstats.nd_binning(dh, [slope, aspect], ["slope", "aspect"], list_var_bins=[4, 3])
    assert list(df.columns) == ["nd", "count", "nanmedian", "nmad", "slope", "aspect"]
    assert df["nd"].tolist() == [1] * 4 + [1] * 3 + [2] * 12
    one = df[(df.nd == 1) & df["slope"].notna()]
    cnt, med, edges = _scipy_1d(dh.ravel(), slope.ravel(), 4)
    assert np.array_equal(one["count"].to_numpy(), cnt)
    assert np.allclose(one["nanmedian"].to_numpy(), med)
    assert all(iv.closed == "left" for iv in one["slope"])
    assert np.allclose([iv.left for iv in one["slope"]], edges[:-1])
    two = df[df.nd == 2]
    ok = np.isfinite(dh)
    cnt2 = sps.binned_statistic_2d(slope[ok], aspect[ok], dh[ok], "count", bins=[4, 3])[0]
    assert np.array_equal(two["count"].to_numpy(), cnt2.ravel())  # slope outer, aspect inner, as upstream
    row = two.iloc[5]
    inside = ok & (slope >= row.slope.left) & (slope < row.slope.right) & (aspect >= row.aspect.left) & (
        aspect < row.aspect.right)
    assert row["count"] == inside.sum()
    assert row["nmad"] == pytest.approx(1.4826 * np.median(np.abs(dh[inside] - np.median(dh[inside]))))


def test_nd_binning_three_variables_labels_each_row_with_its_own_bins():
    rng = np.random.default_rng(2)
    v = [rng.uniform(0, 1, 500) for _ in range(3)]
    df = xdem.spatialstats.nd_binning(rng.normal(size=500), v, ["a", "b", "c"], list_var_bins=[2, 3, 4])
    nd3 = df[df.nd == 3]
    assert len(nd3) == 24 and df.groupby("nd").size().tolist() == [9, 26, 24]
    for _, row in nd3.sample(6, random_state=0).iterrows():
        inside = np.ones(500, bool)
        for name, var in zip("abc", v, strict=True):
            iv = row[name]
            last = iv.right == var.max()  # the last bin also holds its upper edge (scipy, numpy.histogram)
            inside &= (var >= iv.left) & ((var < iv.right) | (last & (var == iv.right)))
        assert row["count"] == inside.sum()


def test_nd_binning_masked_custom_edges_ranges_and_lazy_inputs():
    dh = np.ma.masked_array([1.0, 2.0, 3.0, 4.0, 50.0], mask=[0, 0, 0, 0, 1])
    var = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    df = xdem.spatialstats.nd_binning(dh, [var], ["v"], list_var_bins=[[0.0, 2.5, 10.0]],
                                      statistics=["count", np.nanmean])
    assert df["count"].tolist() == [2.0, 2.0] and df["nanmean"].tolist() == [1.5, 3.5]
    ranged = xdem.spatialstats.nd_binning(dh, [var], ["v"], list_var_bins=2, list_ranges=[(0.0, 8.0)])
    assert [iv.left for iv in ranged["v"]] == [0.0, 4.0] and ranged["count"].tolist() == [3.0, 1.0]
    rng = np.random.default_rng(4)
    z, s = rng.normal(size=(20, 20)), rng.uniform(0, 40, (20, 20))
    lazy = xdem.spatialstats.nd_binning(georef(z, chunks=7), [georef(s, chunks=7)], ["slope"])
    pd.testing.assert_frame_equal(lazy, xdem.spatialstats.nd_binning(z, [s], ["slope"]))
    with pytest.raises(InputError, match="statistic"):
        xdem.spatialstats.nd_binning(dh, [var], ["v"], statistics=[np.nanvar])
    with pytest.raises(InputError, match="one name per variable"):
        xdem.spatialstats.nd_binning(dh, [var, var], ["v"])


def test_plot_1d_and_2d_binning_draw_and_save(tmp_path):
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(5)
    dh, s, a = rng.normal(size=4000), rng.uniform(0, 50, 4000), rng.uniform(0, 360, 4000)
    df = xdem.spatialstats.nd_binning(dh, [s, a], ["slope", "aspect"], list_var_bins=5)
    fig, ax = plt.subplots()
    assert xdem.spatialstats.plot_1d_binning(df, "slope", "nmad", ax=ax, out_fname=str(tmp_path / "1d.png")) is None
    assert (tmp_path / "1d.png").stat().st_size > 0 and len(ax.child_axes) == 2
    points = ax.child_axes[1].collections[0].get_offsets()
    assert len(points) == 5
    df.to_csv(tmp_path / "t.csv", index=False)
    csv = pd.read_csv(tmp_path / "t.csv")  # intervals come back as strings such as "[0.0, 10.0)"
    assert isinstance(csv["slope"].iloc[0], str)
    xdem.spatialstats.plot_2d_binning(csv, "slope", "aspect", "nanmedian", out_fname=str(tmp_path / "2d.png"))
    assert (tmp_path / "2d.png").stat().st_size > 0
    with pytest.raises(InputError, match="not in the binning table"):
        xdem.spatialstats.plot_1d_binning(df, "elevation", "nmad")
    plt.close("all")


# ------------------------------------------------------------------ examples


@pytest.mark.parametrize("name", xdem.examples.UPSTREAM_EXAMPLES)
def test_upstream_example_names_say_offline_and_name_the_alternatives(name):
    with pytest.raises(InputError) as err:
        xdem.examples.get_path(name)
    msg = str(err.value)
    assert "\n" not in msg and "not bundled" in msg and "'lidar'" in msg and "write_example_pair" in msg


@pytest.mark.parametrize("call", [lambda: xdem.examples.get_all_data(), lambda: xdem.examples.get_path_test(
    "longyearbyen_ref_dem"), lambda: xdem.examples.download_longyearbyen_examples()])
def test_upstream_downloads_say_offline(call):
    with pytest.raises(InputError, match="nothing is downloaded"):
        call()


def test_bundled_names_still_work_and_unknown_names_still_say_so():
    assert xdem.examples.get_path("lidar", output_dir=None).name == "lidar_dem.tif"
    with pytest.raises(InputError, match="unknown example"):
        xdem.examples.get_path("everest")
