"""xdem.DEM with geoutils and numpy as upstream 0.2.3's DEM (a geoutils Raster): geoutils'
functions take it, numpy's functions act on it with upstream's meaning, and it stays lazy."""

from __future__ import annotations

import warnings

import geopandas as gpd
import geoutils as gu
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import rasterio
import shapely
from helpers import count_computes

import xdem
from xdem.checks import InputCheckWarning
from xdem.errors import InputError

matplotlib.use("Agg")

LIDAR = xdem.examples.get_path("lidar")


@pytest.fixture(scope="module")
def raw() -> np.ma.MaskedArray:
    with rasterio.open(LIDAR) as src:
        return src.read(1, masked=True).astype(np.float64)


@pytest.fixture(scope="module")
def outlines(tmp_path_factory) -> tuple[str, shapely.Polygon]:
    """A polygon over part of the lidar DEM, written in geographic coordinates (another CRS)."""
    b = xdem.DEM(LIDAR).bounds
    polygon = shapely.box(b.left + 50, b.bottom + 60, b.left + 170, b.bottom + 300)
    path = tmp_path_factory.mktemp("outlines") / "outlines.gpkg"
    gpd.GeoDataFrame(geometry=[polygon], crs=xdem.DEM(LIDAR).crs).to_crs(4326).to_file(path)
    return str(path), polygon


# --- geoutils' functions take the DEM -------------------------------------------------------
def test_dem_is_a_geoutils_raster_and_create_mask_reads_no_values(outlines):
    dem = xdem.DEM(LIDAR)
    assert isinstance(dem, gu.Raster)
    with count_computes() as c:
        mask = gu.Vector(outlines[0]).create_mask(dem)
        cropped = gu.Vector(outlines[0]).crop(dem, clip=True)
    assert c.count == 0
    assert mask.shape == dem.shape and mask.transform == dem.transform and mask.crs == dem.crs
    assert cropped.bounds.left >= rasterio.warp.transform_bounds(dem.crs, 4326, *dem.bounds)[0] - 1e-9
    # 120 m x 240 m on a 1 m grid, up to the pixels the reprojected edges cut
    assert abs(int(np.asarray(mask.data).sum()) - 120 * 240) < 2 * (120 + 240)


def test_dem_indexed_by_a_geoutils_mask_gives_upstreams_1d_values(raw, outlines):
    dem = xdem.DEM(LIDAR)
    mask = gu.Vector(outlines[0]).create_mask(dem)
    inside = np.asarray(mask.data)
    values = dem[mask]
    assert values.ndim == 1 and values.size == inside.sum()
    np.testing.assert_allclose(np.sort(values.compressed()), np.sort(raw[inside].compressed()), rtol=1e-6)
    outside = dem[~mask]
    assert outside.size == dem.width * dem.height - inside.sum()


def test_geoutils_mask_of_another_grid_is_one_clear_error(outlines):
    dem = xdem.DEM(LIDAR)
    other = gu.Vector(outlines[0]).create_mask(dem.crop(list(dem.bounds)[:2] + [dem.bounds.left + 100,
                                                                                 dem.bounds.bottom + 100]))
    with pytest.raises(InputError, match="not on the DEM's grid") as info:
        dem[other]
    assert "\n" not in str(info.value)


def test_vector_plot_with_the_dem_as_reference_is_in_the_dems_crs(outlines):
    dem = xdem.DEM(LIDAR)
    _, ax = plt.subplots()
    gu.Vector(outlines[0]).plot(ref_crs=dem, fc="none", ec="k", ax=ax)
    left, bottom, right, top = outlines[1].bounds
    x0, x1 = ax.get_xlim()
    assert x0 <= left + 1 and x1 >= right - 1 and x1 - x0 < 200  # metres of the DEM's CRS, not degrees
    plt.close("all")


def test_get_xy_rotated_of_the_dem_is_geoutils_own_of_the_raster():
    ours = gu.raster.get_xy_rotated(xdem.DEM(LIDAR), along_track_angle=30)
    theirs = gu.raster.get_xy_rotated(gu.Raster(LIDAR), along_track_angle=30)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, atol=1e-9)


# --- numpy on DEMs ---------------------------------------------------------------------------
def test_numpy_ufuncs_of_dems_are_lazy_dems(raw):
    dem = xdem.DEM(LIDAR)
    with count_computes() as c:
        folded = np.minimum(dem % 360, 360 - dem % 360)
        pair = np.modf(dem)
        shifted = np.float64(2) + dem
    assert c.count == 0
    assert isinstance(folded, xdem.DEM) and isinstance(pair, tuple) and isinstance(shifted, xdem.DEM)
    r = raw % 360
    np.testing.assert_allclose(folded.data.filled(np.nan), np.minimum(r, 360 - r).filled(np.nan), atol=1e-3)
    np.testing.assert_allclose(pair[1].data.filled(np.nan), np.modf(raw.astype(np.float32))[1].filled(np.nan))


def test_numpy_reductions_of_a_dem_skip_nodata_as_upstreams_masked_array(raw):
    dem = xdem.DEM(LIDAR) - 0  # NaN where nodata
    with count_computes() as c:
        mean, std = np.nanmean(dem), np.std(dem, ddof=1)
    assert c.count == 2
    assert mean == pytest.approx(float(raw.mean()), rel=1e-6) and std == pytest.approx(float(raw.std(ddof=1)), rel=1e-5)
    assert float(np.median(dem)) == pytest.approx(float(np.ma.median(raw)), rel=1e-6)
    assert float(np.percentile(dem, 90)) == pytest.approx(float(np.percentile(raw.compressed(), 90)), rel=1e-6)
    isfinite = np.isfinite(dem)
    assert isinstance(isfinite, xdem.DEM) and isfinite.dtype == bool


def test_numpy_function_upstream_does_not_handle_raises_as_upstream():
    with pytest.raises(TypeError):
        np.flip(xdem.DEM(LIDAR))


# --- indexing, values, masks -----------------------------------------------------------------
def test_numpy_indexes_select_as_on_the_data(raw):
    dem = xdem.DEM(LIDAR)
    np.testing.assert_allclose(dem[10:20, 5], raw[10:20, 5], rtol=1e-6)
    rows, cols = np.where(raw > np.ma.median(raw))
    np.testing.assert_allclose(dem[rows[:50], cols[:50]], raw[rows[:50], cols[:50]], rtol=1e-6)
    assert dem[:].shape == dem.shape
    with pytest.raises(InputError, match="cannot index a DEM"):
        dem[500, 0]


def test_data_is_read_only_and_the_setter_replaces_values_of_this_dem_only(raw):
    dem = xdem.DEM(LIDAR)
    twin = dem.copy()
    with pytest.raises(ValueError, match="read-only"):
        dem.data[0, 0] = 1.0
    new = np.ma.masked_array(np.ones(dem.shape), mask=np.zeros(dem.shape, dtype=bool))
    new.mask[0, 0] = True
    dem.data = new
    assert float(dem.data.sum()) == dem.width * dem.height - 1 and bool(dem.data.mask[0, 0])
    np.testing.assert_allclose(twin.data.filled(np.nan), raw.filled(np.nan), rtol=1e-6)  # the twin is untouched
    np.testing.assert_allclose(xdem.DEM(LIDAR).data.filled(np.nan), raw.filled(np.nan), rtol=1e-6)  # the file too
    with pytest.raises(InputError, match="shape"):
        dem.data = np.ones((3, 3))


def test_setitem_and_set_mask_change_this_dem_lazily_and_nothing_else(raw):
    dem = xdem.DEM(LIDAR)
    before = dem.copy()
    high = dem > float(np.ma.median(raw))
    with count_computes() as c:
        dem[high] = 0
        dem[0:2, :] = np.ma.masked
    assert c.count == 0
    values = dem.data
    assert int((values == 0).sum()) == int((raw[2:] > np.ma.median(raw)).sum()) and values.mask[:2].all()
    np.testing.assert_allclose(before.data.filled(np.nan), raw.filled(np.nan), rtol=1e-6)
    other = xdem.DEM(LIDAR)
    other.set_mask(high)
    assert int(other.data.mask.sum()) == int(raw.mask.sum() + (raw > np.ma.median(raw)).sum())
    with pytest.raises(InputError, match="takes a number"):
        dem[high] = np.ones(3)
    with pytest.raises(InputError, match="boolean DEM"):
        high.set_mask(high)


def test_numeric_mask_is_cast_to_boolean_with_upstreams_warning(raw):
    dem = xdem.DEM(LIDAR)
    ones = dem.copy(new_array=np.zeros(dem.shape))
    ones[0:3, :] = 1
    with pytest.warns(UserWarning, match="cast to boolean"):
        values = (dem - 1)[ones.data]
    np.testing.assert_allclose(values, raw[0:3].ravel() - 1, rtol=1e-6)


def test_dem_plus_array_of_another_shape_is_one_clear_error():
    with pytest.raises(InputError, match="shape"):
        xdem.DEM(LIDAR) + np.ones((3, 3))


def test_geoutils_property_needing_in_memory_attributes_says_so():
    with pytest.raises(AttributeError, match="lazy DEM"):
        _ = xdem.DEM(LIDAR).count_on_disk
    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'"):
        _ = xdem.DEM(LIDAR).no_such_thing


def test_load_holds_the_values_and_geoutils_get_stats_runs_on_them():
    dem = xdem.DEM(LIDAR)
    assert not dem.is_loaded and dem.filename == str(LIDAR)
    stats = dem.get_stats(["mean", "nmad"])
    assert dem.is_loaded
    assert stats == pytest.approx(gu.Raster(LIDAR).get_stats(["mean", "nmad"]), rel=1e-6)


# --- terrain methods and plots ----------------------------------------------------------------
def test_every_upstream_terrain_method_is_there_lazy_or_one_issue_27_line():
    dem = xdem.DEM(LIDAR)
    with count_computes() as c:
        slope = dem.slope(surface_fit="ZevenbergThorne", degrees=False)
        attrs = dem.get_terrain_attribute(["slope", "max_curvature"])
    assert c.count == 0 and isinstance(slope, xdem.DEM) and len(attrs) == 2
    assert float(np.nanmax(slope)) < np.pi / 2
    rugosity = dem.rugosity()  # upstream's Jenness (2004): surface over planimetric area, >= 1
    assert isinstance(rugosity, xdem.DEM) and float(np.nanmin(rugosity)) >= 1.0
    with pytest.raises(InputError, match="mp_config"):
        dem.slope(mp_config=object())
    with pytest.raises(InputError, match="mp_config"):
        dem.rugosity(mp_config=object())


def test_plot_on_a_new_axes_and_a_bad_ax_is_one_clear_error():
    ax = xdem.DEM(LIDAR).plot(ax="new", cbar_title="Elevation (m)")
    assert ax.figure.axes[1].get_ylabel() == "Elevation (m)"
    with pytest.raises(InputError, match="'new'"):
        xdem.DEM(LIDAR).plot(ax="old")
    plt.close("all")


def test_constructor_takes_upstreams_arguments_in_upstreams_order():
    dem = xdem.DEM(LIDAR, None, False, False, True, 1, -9999.0)
    assert dem.nodata == -9999.0 and not dem.is_loaded
    with pytest.raises(InputError, match="reproject"):
        xdem.DEM(LIDAR, downsample=2)
    with pytest.raises(InputError, match="parse_sensor_metadata"):
        xdem.DEM(LIDAR, parse_sensor_metadata=True)


def test_arrays_given_to_a_dem_are_neither_shared_nor_made_read_only(raw):
    dem = xdem.DEM(LIDAR)
    array = np.zeros(dem.shape)
    total, copied = dem + array, dem.copy(new_array=array)
    _ = total.data, copied.data
    array[:] = 100.0  # the user's array stays theirs: writeable, and not read later by the DEMs
    assert float(total.data.mean()) == pytest.approx(float(raw.mean()), rel=1e-6)
    assert float(copied.data.max()) == 0.0


def test_an_undeclared_void_value_is_said_in_one_line_and_a_declared_one_is_silent(tmp_path):
    """-9999 holes in a file that declares no nodata stay elevations (upstream's meaning), so
    ``np.nanmean(dem)`` would be wrong without a word: the constructor says so, naming the fix."""
    with rasterio.open(LIDAR) as src:
        values, profile = src.read(1), src.profile
    values[100:150, 100:150] = -9999.0
    profile.update(nodata=None)
    bad = tmp_path / "holes.tif"
    with rasterio.open(bad, "w", **profile) as dst:
        dst.write(values, 1)
    with pytest.warns(InputCheckWarning, match=r"exactly -9999.*pass nodata=-9999") as record:
        xdem.DEM(bad)
    said = [str(r.message) for r in record if issubclass(r.category, InputCheckWarning)]
    assert len(said) == 1 and len(said[0].splitlines()) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputCheckWarning)
        declared = xdem.DEM(bad, nodata=-9999)
        xdem.DEM(LIDAR)
    assert float(np.nanmean(declared)) == pytest.approx(float(np.nanmean(xdem.DEM(LIDAR).data[values != -9999])),
                                                        rel=1e-6)
