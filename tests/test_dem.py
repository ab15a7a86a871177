"""xdem.DEM: upstream xdem's DEM object over the lazy DataArray of open_dem."""

from __future__ import annotations

import json

import geoutils as gu
import matplotlib
import numpy as np
import pytest
import rasterio
import xarray as xr
from affine import Affine
from helpers import count_computes, write_tif

import xdem
from xdem.coreg import BiasCorr, NuthKaab, VerticalShift
from xdem.errors import InputError

matplotlib.use("Agg")

LIDAR = xdem.examples.get_path("lidar")
NODATA = -9999.0
TOL_PX = 0.01  # the tolerance of tests/coreg/test_nuth_kaab.py (pixels; the pair is on a 1 m grid)
TOL_Z = 0.01


@pytest.fixture
def holed(tmp_path):
    """A small DEM with nodata pixels (-9999), its values and its path."""
    rng = np.random.default_rng(0)
    values = (100.0 + rng.normal(0, 5, (60, 80))).astype(np.float32)
    values[5:9, 10:20] = NODATA
    path = write_tif(tmp_path / "holed.tif", values, nodata=NODATA)
    return path, values


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pair")
    xdem.examples.write_example_pair(folder)
    return folder, json.loads((folder / "truth.json").read_text())


# --- construction ---------------------------------------------------------------------------
def test_dem_from_a_path_has_rasterios_georeferencing(holed):
    path, _ = holed
    dem = xdem.DEM(path)
    with rasterio.open(path) as src:
        assert dem.crs == src.crs and dem.transform == src.transform and dem.res == src.res
        assert dem.shape == (src.height, src.width) and (dem.width, dem.height) == (src.width, src.height)
        assert dem.bounds == src.bounds and dem.nodata == src.nodata and dem.dtype == np.dtype(src.dtypes[0])


def test_dem_from_each_kind_of_source_gives_the_same_values(holed):
    path, _ = holed
    expected = xdem.DEM(path).data
    with rasterio.open(path) as src:
        from_dataset = xdem.DEM(src)
    sources = [from_dataset, xdem.DEM(str(path)), xdem.DEM(xdem.DEM(path)), xdem.DEM(gu.Raster(path)),
               xdem.DEM(xdem.open_dem(path))]
    for dem in sources:
        np.testing.assert_array_equal(dem.data.filled(np.nan), expected.filled(np.nan))
        assert dem.transform == xdem.DEM(path).transform


def test_dem_from_array_keeps_georeferencing_and_masks_nodata():
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    data[0, 0] = NODATA
    dem = xdem.DEM.from_array(data, Affine(2.0, 0, 100.0, 0, -2.0, 50.0), "EPSG:32633", nodata=NODATA)
    assert dem.transform == Affine(2.0, 0, 100.0, 0, -2.0, 50.0) and dem.crs == rasterio.crs.CRS.from_epsg(32633)
    assert dem.data.mask.tolist()[0][:2] == [True, False] and dem.data.mask.sum() == 1
    assert dem.nodata == NODATA and dem.dtype == np.float32


def test_dem_from_an_array_without_georeferencing_is_one_clear_error():
    with pytest.raises(InputError, match="from_array"):
        xdem.DEM(np.ones((3, 3)))


def test_dem_and_dataarray_convert_both_ways(holed):
    path, _ = holed
    dem = xdem.DEM(path)
    arr = dem.to_xarray()
    assert isinstance(arr, xr.DataArray) and arr.chunks is not None
    back = xdem.DEM(arr)
    assert back.transform == dem.transform and back.shape == dem.shape
    xr.testing.assert_identical(xdem.open_dem(dem), xdem.open_dem(arr))


# --- values ---------------------------------------------------------------------------------
def test_dem_data_is_a_masked_array_masked_where_nodata(holed):
    path, values = holed
    data = xdem.DEM(path).data
    assert isinstance(data, np.ma.MaskedArray)
    np.testing.assert_array_equal(data.mask, values == NODATA)
    np.testing.assert_array_equal(data.compressed(), values[values != NODATA])
    assert data.fill_value == NODATA


def test_dem_arithmetic_with_dems_arrays_and_scalars(holed):
    path, values = holed
    dem = xdem.DEM(path)
    v = np.where(values == NODATA, np.nan, values).astype(np.float64)
    cases = [(dem - dem * 0.5, v - v * 0.5), (2 + dem, 2 + v), (10 / dem, 10 / v), (dem ** 2, v ** 2),
             (dem - np.ones(dem.shape), v - 1), (-dem, -v), (abs(dem - 100), abs(v - 100))]
    for result, expected in cases:
        assert isinstance(result, xdem.DEM)
        np.testing.assert_allclose(result.data.filled(np.nan), expected, rtol=1e-6)
    assert (dem - dem).nodata == NODATA


def test_dem_comparisons_give_masks_for_indexing(holed):
    path, values = holed
    dem = xdem.DEM(path)
    high = dem > 100
    assert isinstance(high, xdem.DEM) and high.dtype == bool
    expected = values[(values != NODATA) & (values > 100)]
    np.testing.assert_array_equal(np.sort(dem[high].compressed()), np.sort(expected))
    np.testing.assert_array_equal(np.sort(dem[~high].compressed()), np.sort(values[(values != NODATA) & (values <= 100)]))
    assert dem[(dem > 100) & (dem < 105)].size == ((values > 100) & (values < 105)).sum()


def test_dem_arithmetic_on_different_grids_is_one_clear_error(holed):
    dem = xdem.DEM(holed[0])
    with pytest.raises(InputError, match="same grid"):
        dem - dem.crop([dem.bounds.left, dem.bounds.bottom, dem.bounds.left + 10, dem.bounds.bottom + 10])
    with pytest.raises(InputError, match="shape"):
        dem + np.ones((2, 2))


def test_dem_laziness_construction_arithmetic_crop_reproject_terrain_apply(pair):
    folder, _ = pair
    vs = VerticalShift().fit(folder / "ref.tif", folder / "tba.tif")
    with count_computes() as c:
        ref, tba = xdem.DEM(folder / "ref.tif"), xdem.DEM(folder / "tba.tif")
        ddem = (tba - ref) * 2 + 1
        _ = ddem > 0
        _ = ref.crop([ref.bounds.left, ref.bounds.bottom, ref.bounds.left + 100, ref.bounds.bottom + 100])
        _ = ref.reproject(res=2.0), ref.reproject(ref=tba), ref.slope(), ref.curvature()
        aligned = vs.apply(tba)
    assert c.count == 0
    assert isinstance(aligned, xdem.DEM)


def test_dem_crop_to_bounds_and_to_another_dem():
    dem = xdem.DEM(LIDAR)
    left, bottom = dem.bounds.left, dem.bounds.bottom
    small = dem.crop([left, bottom, left + 50, bottom + 30])
    assert small.shape == (30, 50) and small.bounds.left == left and small.bounds.bottom == bottom
    np.testing.assert_array_equal(small.data, dem.data[-30:, :50])
    assert dem.crop(small).shape == (30, 50)


def test_dem_reproject_to_a_resolution_a_crs_and_a_reference():
    dem = xdem.DEM(LIDAR)
    coarse = dem.reproject(res=2.0)
    assert coarse.res == (2.0, 2.0) and coarse.shape == (200, 200)
    assert dem.reproject(ref=coarse).transform == coarse.transform
    assert dem.reproject(crs="EPSG:4326").crs == rasterio.crs.CRS.from_epsg(4326)
    with pytest.raises(InputError, match="ref, crs or res"):
        dem.reproject()


# --- terrain, files, plots ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["slope", "aspect", "hillshade", "curvature", "profile_curvature",
                                  "planform_curvature", "max_curvature", "min_curvature", "terrain_ruggedness_index",
                                  "topographic_position_index", "roughness", "rugosity"])
def test_dem_terrain_attributes_are_upstreams_as_on_a_numpy_array(name):
    """An xdem.DEM is an upstream object: its attributes are upstream 0.2.3's (Florinsky's fit...),
    the same as those of its values as a numpy array with resolution=."""
    dem = xdem.DEM(LIDAR)
    got = getattr(dem, name)()
    assert isinstance(got, xdem.DEM)
    values = xdem.open_dem(LIDAR).values
    kw = {} if name in ("aspect", "terrain_ruggedness_index", "topographic_position_index", "roughness") \
        else {"resolution": dem.res[0]}
    expected = getattr(xdem.terrain, name)(values, **kw)
    np.testing.assert_array_equal(got.to_xarray().values, expected)


def test_dem_slope_in_radians_and_get_terrain_attribute():
    dem = xdem.DEM(LIDAR)
    np.testing.assert_allclose(dem.slope(degrees=False).data, np.deg2rad(dem.slope().data), rtol=1e-5)
    slope, aspect = dem.get_terrain_attribute(["slope", "aspect"])
    np.testing.assert_array_equal(aspect.data, dem.aspect().data)


def test_dem_to_file_round_trip(holed, tmp_path):
    path, values = holed
    out = tmp_path / "out.tif"
    xdem.DEM(path).to_file(out)
    back = xdem.DEM(out)
    assert back.nodata == NODATA and back.transform == xdem.DEM(path).transform
    np.testing.assert_array_equal(back.data.mask, values == NODATA)
    np.testing.assert_array_equal(back.data.compressed(), values[values != NODATA])
    with rasterio.open(out) as src:
        assert src.profile.get("tiled") and src.overviews(1) is not None


def test_dem_info_and_plot_with_colorbar():
    dem = xdem.DEM(LIDAR)
    text = dem.info(stats=True, verbose=False)
    assert text is not None and "Size:         400, 400" in text
    assert f"{float(np.nanmax(dem.data)):.3f}" in text
    ax = dem.plot(cmap="terrain", cbar_title="Elevation (m)")
    assert ax.figure.axes[1].get_ylabel() == "Elevation (m)"
    ax2 = dem.plot(add_cbar=False)
    assert len(ax2.figure.axes) == 1


# --- coregistration -----------------------------------------------------------------------------
def test_dem_coregister_3d_recovers_the_known_shift(pair):
    folder, truth = pair
    ref, tba = xdem.DEM(folder / "ref.tif"), xdem.DEM(folder / "tba.tif")
    nk = NuthKaab()
    aligned = tba.coregister_3d(ref, nk)
    assert isinstance(aligned, xdem.DEM)
    assert abs(nk.shift_x_ - truth["shift_x"]) < TOL_PX and abs(nk.shift_y_ - truth["shift_y"]) < TOL_PX
    assert abs(nk.shift_z_ - truth["shift_z"]) < TOL_Z
    dh = (aligned - ref).data
    assert float(np.ma.median(np.ma.abs(dh))) < 0.05 < float(np.ma.median(np.ma.abs((tba - ref).data)))


def test_dem_coregister_3d_passes_fit_and_apply_arguments_as_upstream(pair):
    """Upstream's ``coregister_3d(ref, coreg, inlier_mask, bias_vars, random_state, **kwargs)`` is its
    ``fit_and_apply``: ``resample=`` and the bias variables reach the apply step too."""
    folder, _ = pair
    ref, tba = xdem.DEM(folder / "ref.tif"), xdem.DEM(folder / "tba.tif")
    aligned = tba.coregister_3d(ref, NuthKaab(), resample=True, random_state=1)
    direct = NuthKaab().fit_and_apply(ref, tba, random_state=1, resample=True)
    np.testing.assert_array_equal(aligned.data.filled(np.nan), direct.data.filled(np.nan))
    ramp = ref + (ref - 395.0) * 0.1  # a bias proportional to elevation
    corr = BiasCorr(bias_var_names=["elevation"], fit_or_bin="bin", bin_sizes=20)
    corrected = ramp.coregister_3d(ref, corr, bias_vars={"elevation": ref})
    assert float(np.ma.median(np.ma.abs((corrected - ref).data))) < 0.1 < float(np.ma.median(np.ma.abs((ramp - ref).data)))


def test_coreg_takes_dems_and_dem_masks(pair):
    folder, truth = pair
    ref, tba = xdem.DEM(folder / "ref.tif"), xdem.DEM(folder / "tba.tif")
    stable = ref > float(np.median(ref.data.compressed()))
    vs = VerticalShift().fit(ref, tba, inlier_mask=stable)
    native = VerticalShift().fit(folder / "ref.tif", folder / "tba.tif", inlier_mask=stable.to_xarray())
    assert vs.shift_z_ == native.shift_z_
    everywhere = VerticalShift().fit(ref, tba)
    assert vs.shift_z_ != everywhere.shift_z_
    assert isinstance(VerticalShift().fit_and_apply(ref, tba), xdem.DEM)
    assert isinstance(vs.apply(tba.to_xarray()), xr.DataArray)


def test_coreg_takes_a_geoutils_mask(pair):
    folder, _ = pair
    ref = xdem.DEM(folder / "ref.tif")
    high = gu.Raster(folder / "ref.tif") > float(np.median(ref.data.compressed()))
    vs = VerticalShift().fit(ref, xdem.DEM(folder / "tba.tif"), inlier_mask=high)
    native = VerticalShift().fit(ref, xdem.DEM(folder / "tba.tif"), inlier_mask=ref > float(np.median(ref.data.compressed())))
    assert vs.shift_z_ == pytest.approx(native.shift_z_, abs=1e-9)


def test_upstream_style_snippets_run_unchanged(pair):
    folder, truth = pair
    dem_2009 = xdem.DEM(str(folder / "ref.tif"))
    dem_1990 = xdem.DEM(str(folder / "tba.tif"))
    ddem = dem_2009 - dem_1990
    slope = dem_2009.slope()
    assert isinstance(ddem, xdem.DEM) and isinstance(slope, xdem.DEM)
    coreg = xdem.coreg.NuthKaab()
    aligned = coreg.fit_and_apply(dem_2009, dem_1990)
    assert isinstance(aligned, xdem.DEM)
    assert abs(coreg.shift_x_ - truth["shift_x"]) < TOL_PX
    stable = slope < 40
    dh = (aligned - dem_2009)[stable.data.filled(False)]
    assert float(np.ma.median(np.ma.abs(dh))) < 0.05


def test_dem_coregister_3d_refuses_a_non_coregistration_in_one_line(pair):
    folder, _ = pair
    with pytest.raises(InputError, match="coreg_method must be a coregistration"):
        xdem.DEM(folder / "tba.tif").coregister_3d(xdem.DEM(folder / "ref.tif"), "nuthkaab")


def test_dem_copy_shares_the_grid_and_never_changes_the_original(holed):
    dem = xdem.DEM(holed[0])
    before = dem.data.copy()
    twice = dem.copy(new_array=dem.data * 2)
    np.testing.assert_allclose(twice.data.filled(np.nan), before.filled(np.nan) * 2, rtol=1e-6)
    assert twice.transform == dem.transform and twice.nodata == dem.nodata
    np.testing.assert_array_equal(dem.data.filled(np.nan), before.filled(np.nan))
    np.testing.assert_array_equal(twice.data.mask, before.mask)
