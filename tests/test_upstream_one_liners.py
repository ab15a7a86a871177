"""55 everyday one-liners of upstream xdem 0.2.3's API, each run on the bundled data with its
result checked against upstream's meaning (issue 26).

The one-liners are taken from upstream's API documentation at tag v0.2.3 (``doc/source/
dem_class.md``, ``cheatsheet.md``, ``api.md``) and its gallery: the DEM object, its use with
geoutils (``Vector.create_mask/crop/plot``, ``get_xy_rotated``, ``gu.stats.nmad``) and numpy,
coregistration, terrain, spatial statistics and examples. The DEMs are the bundled lidar DEM
(400 x 400, 1 m) and the pair of :func:`xdem.examples.write_example_pair` (a known shift); the
glacier outlines are a polygon built here.

Count (run with this module against ``main`` before the DEM interoperability change, then
after it):

- before: 33 of 55 run with upstream's meaning (22 fail: geoutils' functions refuse the DEM,
  numpy functions on DEMs, ``dem[gu_mask]``, ``dem[:]``, the upstream-only DEM methods...);
- after: 48 of 55 run; the other 7 needed issue 27 (dDEM, DEMCollection, vertical CRSs, volume,
  the uncertainty workflow, which now runs) and each raises one clear :class:`~xdem.errors.InputError` line
  naming issue 27, which is what they assert;
- issue 27's vertical datums: ``set_vcrs`` and ``to_vcrs`` run (checked against the undulation);
- issue 27's gap filling: ``xdem.volume.hypsometric_interpolation`` runs (checked on a constant change);
- issue 27's DEM series: ``DEMCollection`` runs (a cumulative series of a known change).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from types import SimpleNamespace

import geopandas as gpd
import geoutils as gu
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import rasterio
import shapely
from affine import Affine

import xdem
from xdem.errors import InputError

matplotlib.use("Agg")

ONE_LINERS: dict[str, Callable[[SimpleNamespace], None]] = {}


def one_liner(code: str) -> Callable[[Callable[[SimpleNamespace], None]], Callable[[SimpleNamespace], None]]:
    """Register a check under the upstream code it runs."""
    def register(func: Callable[[SimpleNamespace], None]) -> Callable[[SimpleNamespace], None]:
        ONE_LINERS[code] = func
        return func
    return register


@pytest.fixture(scope="module")
def d(tmp_path_factory) -> SimpleNamespace:
    folder = tmp_path_factory.mktemp("one_liners")
    files = xdem.examples.write_example_pair(folder)
    path = xdem.examples.get_path("lidar")
    dem = xdem.DEM(path)
    b = dem.bounds
    polygon = shapely.box(b.left + 100, b.bottom + 100, b.left + 250, b.bottom + 300)
    outlines = folder / "outlines.gpkg"
    gpd.GeoDataFrame({"NAME": ["Testbreen"]}, geometry=[polygon], crs=dem.crs).to_file(outlines)
    x = np.arange(40) + 0.5
    plane = xdem.DEM.from_array(np.tile(0.1 * x, (40, 1)).astype(np.float32), Affine(1, 0, 0, 0, -1, 40),
                                "EPSG:32633", nodata=-9999)
    with rasterio.open(path) as src:
        raw = src.read(1, masked=True)
    return SimpleNamespace(path=path, dem=dem, ref=xdem.DEM(files["ref"]), tba=xdem.DEM(files["tba"]),
                           truth=json.loads(files["truth_path"].read_text()), outlines=str(outlines),
                           polygon=polygon, plane=plane, raw=raw, folder=folder)


def _inside(d: SimpleNamespace) -> np.ndarray:
    """The truth of the outline mask: pixel centres inside the polygon."""
    t, (h, w) = d.dem.transform, d.dem.shape
    cols, rows = np.meshgrid(np.arange(w) + 0.5, np.arange(h) + 0.5)
    xs, ys = t * (cols, rows)
    return np.asarray(shapely.contains_xy(d.polygon, xs, ys))


# --- the DEM object ---------------------------------------------------------------------------
@one_liner("dem = xdem.DEM(filename)")
def _open(d):
    assert d.dem.shape == (400, 400) and d.dem.res == (1.0, 1.0)


@one_liner("dem.info(stats=True)")
def _info_stats(d):
    text = d.dem.info(stats=True, verbose=False)
    assert f"{float(d.raw.mean()):.3f}" in text


@one_liner("dem.crs, dem.transform, dem.bounds, dem.nodata")
def _georef(d):
    with rasterio.open(d.path) as src:
        assert (d.dem.crs, d.dem.transform, d.dem.bounds, d.dem.nodata) == (src.crs, src.transform, src.bounds,
                                                                            src.nodata)


@one_liner("dem.data")
def _data(d):
    data = d.dem.data
    assert isinstance(data, np.ma.MaskedArray)
    np.testing.assert_allclose(float(data.mean()), float(d.raw.mean()), rtol=1e-6)


@one_liner("np.shape(dem.data)")
def _shape_data(d):
    assert np.shape(d.dem.data) == (400, 400)


@one_liner("dem.crop([xmin, ymin, xmax, ymax])")
def _crop(d):
    b = d.dem.bounds
    assert d.dem.crop([b.left, b.bottom, b.left + 100, b.bottom + 50]).shape == (50, 100)


@one_liner("dem.reproject(ref)")
def _reproject_ref(d):
    b = d.dem.bounds
    ref = d.dem.crop([b.left + 10, b.bottom + 10, b.left + 60, b.bottom + 40])
    out = d.dem.reproject(ref)
    assert out.shape == ref.shape and out.transform == ref.transform
    np.testing.assert_allclose(out.data.filled(np.nan), ref.data.filled(np.nan), atol=1e-3)


@one_liner("dem.to_file('dem.tif')")
def _to_file(d):
    path = d.folder / "dem.tif"
    d.dem.to_file(path)
    with rasterio.open(path) as src:
        np.testing.assert_allclose(src.read(1, masked=True).mean(), d.raw.mean(), rtol=1e-6)


@one_liner("ddem = dem_2009 - dem_1990")
def _subtract(d):
    ddem = d.dem - (d.dem - 1.5)
    assert isinstance(ddem, xdem.DEM) and abs(float(ddem.data.mean()) - 1.5) < 1e-4


@one_liner("dem + numpy_array")
def _plus_array(d):
    out = d.dem + np.full(d.dem.shape, 2.0)
    assert isinstance(out, xdem.DEM) and abs(float(out.data.mean()) - float(d.raw.mean()) - 2) < 1e-3


@one_liner("dem[dem > 300]")
def _index_by_comparison(d):
    threshold = float(np.ma.median(d.raw))
    values = d.dem[d.dem > threshold]
    assert values.ndim == 1 and values.min() > threshold and values.size == int((d.raw > threshold).sum())


@one_liner("dem.copy(new_array=array)")
def _copy_new_array(d):
    out = d.dem.copy(new_array=np.ones(d.dem.shape))
    assert out.transform == d.dem.transform and float(out.data.sum()) == 400 * 400


@one_liner("xdem.DEM.from_array(array, transform, crs, nodata)")
def _from_array(d):
    dem = xdem.DEM.from_array(np.ones((3, 4)), Affine(2, 0, 0, 0, -2, 6), "EPSG:32633", nodata=-9999)
    assert dem.bounds == (0, 0, 8, 6) and dem.nodata == -9999


@one_liner("dem[:]")
def _index_all(d):
    values = d.dem[:]
    assert isinstance(values, np.ma.MaskedArray) and values.shape == (400, 400)


@one_liner("dem[mask] = 0")
def _setitem(d):
    dem = xdem.DEM(d.path)
    dem[dem > float(np.ma.median(d.raw))] = 0
    assert int((dem.data == 0).sum()) == int((d.raw > np.ma.median(d.raw)).sum())


# --- terrain ----------------------------------------------------------------------------------
@one_liner("dem.slope()")
def _slope(d):
    assert abs(float(d.plane.slope().data[20, 20]) - math.degrees(math.atan(0.1))) < 1e-4


@one_liner("dem.slope(surface_fit='ZevenbergThorne')")
def _slope_zt(d):
    assert abs(float(d.plane.slope(surface_fit="ZevenbergThorne").data[20, 20]) - math.degrees(math.atan(0.1))) < 1e-4


@one_liner("dem.aspect()")
def _aspect(d):
    assert abs(float(d.plane.aspect().data[20, 20]) - 270.0) < 1e-4  # rising eastwards: faces west


@one_liner("dem.hillshade()")
def _hillshade(d):
    values = d.dem.hillshade().data
    assert 0 <= values.min() and values.max() <= 255


@one_liner("dem.curvature()")
def _curvature(d):
    assert abs(float(d.plane.curvature().data[20, 20])) < 1e-3  # float32 rounding


@one_liner("dem.topographic_position_index()")
def _tpi(d):
    assert abs(float(d.plane.topographic_position_index().data[20, 20])) < 1e-5


@one_liner("dem.terrain_ruggedness_index()")
def _tri(d):
    assert float(d.plane.terrain_ruggedness_index().data[20, 20]) > 0


@one_liner("dem.roughness()")
def _roughness(d):
    assert abs(float(d.plane.roughness().data[20, 20]) - 0.2) < 1e-5  # 3 x 3 window: max - min


@one_liner("dem.get_stats()")
def _get_stats(d):
    ours, theirs = xdem.DEM(d.path).get_stats(), gu.Raster(d.path).get_stats()
    assert set(ours) == set(theirs)
    for name in ("Mean", "Median", "NMAD", "90th percentile", "Valid count"):
        assert float(ours[name]) == pytest.approx(float(theirs[name]), rel=1e-6)


@one_liner("dem.get_terrain_attribute(['aspect', 'slope'])")
def _dem_get_terrain_attribute(d):
    aspect, slope = d.plane.get_terrain_attribute(["aspect", "slope"])
    assert isinstance(slope, xdem.DEM) and abs(float(aspect.data[20, 20]) - 270) < 1e-4


@one_liner("xdem.terrain.get_terrain_attribute(dem.data, resolution=dem.res, attribute=[...])")
def _terrain_on_array(d):
    slope, hs = xdem.terrain.get_terrain_attribute(d.plane.data, resolution=d.plane.res,
                                                   attribute=["slope", "hillshade"])
    assert abs(float(slope[20, 20]) - math.degrees(math.atan(0.1))) < 1e-4 and 0 <= np.nanmax(hs) <= 255


@one_liner("dem.slope().plot(cmap='Reds', cbar_title='Slope (°)')")
def _slope_plot(d):
    ax = d.dem.slope().plot(cmap="Reds", cbar_title="Slope (°)")
    assert ax.images and ax.figure.axes[-1].get_ylabel() == "Slope (°)"
    plt.close("all")


# --- coregistration ---------------------------------------------------------------------------
@one_liner("xdem.coreg.NuthKaab().fit(ref, tba).meta['outputs']['affine']")
def _nuth_kaab_meta(d):
    out = xdem.coreg.NuthKaab().fit(d.ref, d.tba).meta["outputs"]["affine"]
    assert abs(out["shift_x"] - d.truth["shift_x"]) < 0.05 and abs(out["shift_y"] - d.truth["shift_y"]) < 0.05


@one_liner("nuth_kaab.fit_and_apply(ref, tba, inlier_mask)")
def _fit_and_apply(d):
    inlier = ~gu.Vector(d.outlines).create_mask(d.ref)
    aligned = xdem.coreg.NuthKaab().fit_and_apply(d.ref, d.tba, inlier)
    assert isinstance(aligned, xdem.DEM) and gu.stats.nmad((aligned - d.ref).data) < 0.1


@one_liner("tba.coregister_3d(ref, NuthKaab() + VerticalShift())")
def _coregister_3d(d):
    aligned = d.tba.coregister_3d(d.ref, xdem.coreg.NuthKaab() + xdem.coreg.VerticalShift())
    assert abs(float(np.ma.median((aligned - d.ref).data))) < 0.05


@one_liner("xdem.coreg.VerticalShift().fit(ref, ref + 2.5)")
def _vertical_shift(d):
    out = xdem.coreg.VerticalShift().fit(d.ref, d.ref + 2.5).meta["outputs"]["affine"]
    assert abs(out["shift_z"] + 2.5) < 1e-3


@one_liner("coreg.to_matrix()")
def _to_matrix(d):
    matrix = xdem.coreg.VerticalShift().fit(d.ref, d.ref + 2.5).to_matrix()
    assert matrix.shape == (4, 4) and abs(matrix[2, 3] + 2.5) < 1e-3


@one_liner("xdem.coreg.apply_matrix(dem, matrix)")
def _apply_matrix(d):
    matrix = np.eye(4)
    matrix[2, 3] = 1.0
    out = xdem.coreg.apply_matrix(d.dem, matrix)
    assert abs(float(np.nanmean(np.asarray(out.data) - d.raw.filled(np.nan))) - 1.0) < 1e-3


@one_liner("(NuthKaab() + VerticalShift()).pipeline")
def _pipeline(d):
    steps = (xdem.coreg.NuthKaab() + xdem.coreg.VerticalShift()).pipeline
    assert [type(s).__name__ for s in steps] == ["NuthKaab", "VerticalShift"]


# --- geoutils with DEMs -----------------------------------------------------------------------
@one_liner("gu.Vector(path).create_mask(dem)")
def _create_mask(d):
    mask = gu.Vector(d.outlines).create_mask(d.dem)
    np.testing.assert_array_equal(np.asarray(mask.data), _inside(d))


@one_liner("~gu.Vector(path).create_mask(dem)")
def _inverted_mask(d):
    mask = ~gu.Vector(d.outlines).create_mask(d.dem)
    assert int(np.asarray(mask.data).sum()) == 400 * 400 - int(_inside(d).sum())


@one_liner("gu.Vector(path).crop(dem, clip=True)")
def _vector_crop(d):
    b = d.dem.crop([d.dem.bounds.left, d.dem.bounds.bottom, d.dem.bounds.left + 200, d.dem.bounds.top]).bounds
    cropped = gu.Vector(d.outlines).crop(d.dem.crop(list(b)), clip=True)
    assert cropped.bounds.right == pytest.approx(b.right)


@one_liner("vect.plot(dem, fc='none', ec='k')")
def _vector_plot(d):
    _, ax = plt.subplots()
    gu.Vector(d.outlines).plot(d.dem, fc="none", ec="k", ax=ax)
    assert ax.collections
    plt.close("all")


@one_liner("dem[gu_mask]")
def _index_by_geoutils_mask(d):
    values = d.dem[gu.Vector(d.outlines).create_mask(d.dem)]
    assert values.ndim == 1 and values.size == int(_inside(d).sum())
    np.testing.assert_allclose(values.mean(), d.raw[_inside(d)].mean(), rtol=1e-6)


@one_liner("gu.stats.nmad(ddem[mask])")
def _nmad_of_masked(d):
    ddem = d.tba - d.ref
    mask = ~gu.Vector(d.outlines).create_mask(d.ref)
    expected = gu.stats.nmad(ddem.data[np.asarray(mask.data)])
    assert gu.stats.nmad(ddem[mask]) == pytest.approx(expected) and expected > 0


@one_liner("np.ma.median(ddem[mask])")
def _median_of_masked(d):
    ddem = d.dem - (d.dem - 1.5)
    assert float(np.ma.median(ddem[gu.Vector(d.outlines).create_mask(d.dem)])) == pytest.approx(1.5, abs=1e-4)


@one_liner("gu.raster.get_xy_rotated(dem, along_track_angle=90)")
def _get_xy_rotated(d):
    xx, yy = gu.raster.get_xy_rotated(d.dem, along_track_angle=90)
    assert xx.shape == (400, 400) and float(xx.max()) == pytest.approx(399) and float(yy.min()) == 0


# --- numpy on DEMs ----------------------------------------------------------------------------
@one_liner("np.nanmean(dem)")
def _nanmean(d):
    assert float(np.nanmean(d.dem)) == pytest.approx(float(d.raw.mean()), rel=1e-6)


@one_liner("np.median(dem)")
def _median(d):
    assert float(np.median(d.dem)) == pytest.approx(float(np.ma.median(d.raw)), rel=1e-6)


@one_liner("np.minimum(dem % 360, 360 - dem % 360)")
def _minimum(d):
    out = np.minimum(d.dem % 360, 360 - d.dem % 360)
    r = d.raw % 360
    assert isinstance(out, xdem.DEM)
    np.testing.assert_allclose(out.data.filled(np.nan), np.minimum(r, 360 - r).filled(np.nan), atol=1e-3)


@one_liner("dem.plot(ax='new', cbar_title='Elevation (m)')")
def _plot_new(d):
    ax = d.dem.plot(ax="new", cbar_title="Elevation (m)")
    assert ax.figure.axes[1].get_ylabel() == "Elevation (m)"
    plt.close("all")


# --- spatial statistics and examples ----------------------------------------------------------
@one_liner("xdem.spatialstats.nmad(ddem.data)")
def _spatialstats_nmad(d):
    values = (d.dem - d.dem * 0).data
    assert xdem.spatialstats.nmad(values) == pytest.approx(1.4826 * np.ma.median(np.abs(d.raw - np.ma.median(d.raw))),
                                                          rel=1e-4)


@one_liner("xdem.spatialstats.nd_binning(dh, list_var=[slope], ...)")
def _nd_binning(d):
    dh = np.arange(100, dtype=float)
    df = xdem.spatialstats.nd_binning(dh, list_var=[dh], list_var_names=["slope"], statistics=["count"],
                                      list_var_bins=[[0, 50, 100]])
    assert sorted(df[df.nd == 1]["count"].tolist()) == [50, 50]


# --- needing issue 27: one InputError line naming it ------------------------------------------
def _issue_27(call: Callable[[], object]) -> None:
    with pytest.raises(InputError, match="issue 27") as info:
        call()
    assert "\n" not in str(info.value)


@one_liner("xdem.dDEM(ddem, start_time, end_time)")
def _ddem(d):
    dem = xdem.DEM(d.path)
    ddem = xdem.dDEM(dem - dem, start_time=np.datetime64("1990-08-01"), end_time=np.datetime64("2009-08-01"))
    assert ddem.time.days == 6940 and ddem.shape == dem.shape and float(np.nanmax(np.abs(ddem.data))) == 0.0


@one_liner("xdem.DEMCollection(dems, timestamps)")
def _dem_collection(d):
    dem = xdem.DEM(d.path)
    c = xdem.DEMCollection([dem, dem - 2.0], timestamps=[np.datetime64("2009-08-01"), np.datetime64("1990-08-01")])
    c.subtract_dems()  # reference (2009) minus DEM: +2 m over 1990-2009; the 1990 DEM is 2 m lower
    assert c.get_cumulative_series("dh").tolist() == [0.0, 2.0]


@one_liner("dem.set_vcrs('Ellipsoid')")
def _set_vcrs(d):
    dem = xdem.DEM(d.path)
    dem.set_vcrs("Ellipsoid")
    assert dem.vcrs == "Ellipsoid" and dem.vcrs_name.startswith("Ellipsoid") and dem.ccrs.to_epsg() is None


@one_liner("dem.to_vcrs('EGM96')")
def _to_vcrs(d):
    dem = xdem.DEM(d.path, vcrs="Ellipsoid")
    diff = (dem.to_vcrs("EGM96") - dem).data  # H - h = -N: Minnesota's EGM96 undulation is about -28 m
    assert dem.vcrs == "Ellipsoid" and 27 < float(diff.min()) <= float(diff.max()) < 29


@one_liner("dem.estimate_uncertainty(other)")
def _estimate_uncertainty(d):
    noise = np.random.default_rng(1).normal(scale=0.5, size=d.dem.shape)  # white, sigma 0.5 m: the truth
    other = d.dem.copy(new_array=np.ma.filled(d.raw, np.nan).astype(float) + noise)
    errors, corr = d.dem.estimate_uncertainty(other, list_vario_models=("spherical", "gaussian"), random_state=1)
    assert isinstance(errors, xdem.DEM) and float(np.nanmedian(errors.data.filled(np.nan))) == pytest.approx(0.5, rel=0.1)
    assert float(corr(0.0)) == 1.0 and float(corr(10.0)) < 0.1  # uncorrelated beyond a pixel


@one_liner("xdem.volume.hypsometric_interpolation(ddem, ref_dem, mask)")
def _volume(d):
    inside = _inside(d)
    ddem = np.full(d.dem.shape, -2.0)
    ddem[::7, ::3] = np.nan  # voids inside and outside the mask
    filled = xdem.volume.hypsometric_interpolation(ddem, d.dem.data, inside)
    assert np.array_equal(filled[inside], np.full(int(inside.sum()), -2.0))  # a constant change: the curve is it
    assert filled.mask[~inside].sum() == np.isnan(ddem[~inside]).sum()  # voids outside the mask stay void


@one_liner("xdem.spatialstats.infer_heteroscedasticity_from_stable(dh, list_var)")
def _heteroscedasticity(d):
    slope = d.dem.slope()
    s = np.ma.filled(slope.data, np.nan).astype(float)
    dh = d.dem.copy(new_array=np.random.default_rng(0).normal(size=s.shape) * (0.5 + 0.05 * s))  # sigma = 0.5 + 0.05 slope
    errors, df, fun = xdem.spatialstats.infer_heteroscedasticity_from_stable(dh, [slope], unstable_mask=gu.Vector(d.outlines))
    assert isinstance(errors, xdem.DEM) and "nmad" in df.columns  # 160,000 independent draws: the spread within 10 %
    assert float(fun((np.array([10.0]),))[0]) == pytest.approx(1.0, rel=0.1)


def test_there_are_55_one_liners():
    assert len(ONE_LINERS) == 55


@pytest.mark.parametrize("code", list(ONE_LINERS))
def test_upstream_one_liner_runs_with_upstreams_meaning(code, d):
    ONE_LINERS[code](d)
