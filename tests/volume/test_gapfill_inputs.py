"""Bad inputs to gap filling give one InputError line naming the fix; numpy inputs come back as numpy."""

from __future__ import annotations

import geopandas as gpd
import numpy as np
import pytest
import shapely

import xdem
from xdem.errors import InputError
from xdem.examples.glaciers import glacier_set


@pytest.fixture(scope="module")
def gset():
    return glacier_set((200, 200), chunks=100)


@pytest.fixture
def ddem(gset):
    return xdem.dDEM(gset.ddem, start_time=gset.start, end_time=gset.end)


def _one_line(call, match):
    with pytest.raises(InputError, match=match) as info:
        call()
    assert "\n" not in str(info.value)


def test_unknown_method_is_one_line(ddem):
    _one_line(lambda: ddem.interpolate("kriging"), "unknown interpolation method 'kriging'")
    assert ddem.fill_method == ""
    _one_line(ddem.count_unfilled, "nothing filled yet")


def test_idw_leaves_the_voids_beyond_its_reach_and_counts_them(gset):
    values = gset.ddem.values.copy()
    values[50:90, 50:90] = np.nan  # 40 px wide: beyond the closing of the valid pixels (9 px)
    ddem = xdem.dDEM(gset.ddem.copy(data=values), start_time=gset.start, end_time=gset.end)
    filled = np.asarray(ddem.interpolate("idw"))
    before = np.isnan(values)
    left = int((before & np.isnan(filled)).sum())
    assert ddem.fill_method == "idw" and ddem.count_unfilled() == left
    assert np.isnan(filled[50:90, 50:90]).all() and 1600 <= left < before.sum()  # the small voids are filled


def test_hypsometric_methods_need_the_reference_and_the_outlines(ddem, gset):
    for method in ("local_hypsometric", "regional_hypsometric", "norm_regional_hypsometric"):
        _one_line(lambda m=method: ddem.interpolate(m, mask=gset.outlines), "needs reference_elevation")
        _one_line(lambda m=method: ddem.interpolate(m, reference_elevation=gset.ref), "needs mask")
    _one_line(lambda: xdem.volume.hypsometric_interpolation(gset.ddem.values, None, gset.index.values > 0),
              "ref_dem")


def test_outlines_that_do_not_overlap_are_one_line_naming_the_file(ddem, gset, tmp_path):
    far = gpd.GeoDataFrame({"NAME": ["Farbreen"]}, geometry=[shapely.box(0, 0, 1000, 1000)], crs="EPSG:32633")
    path = tmp_path / "far.gpkg"
    far.to_file(path)
    _one_line(lambda: ddem.interpolate("local_hypsometric", reference_elevation=gset.ref, mask=str(path)),
              "far.gpkg' do not overlap the dDEM")
    _one_line(lambda: ddem.interpolate("local_hypsometric", reference_elevation=gset.ref, mask=far.to_crs(4326)),
              "do not overlap")
    _one_line(lambda: xdem.volume.local_hypsometric_interpolation(gset.ddem.values, gset.ref.values,
                                                                  np.zeros(gset.ddem.shape)), "covers no pixel")


def test_outlines_in_another_crs_and_from_a_file_give_the_same_fill(ddem, gset, tmp_path):
    path = tmp_path / "outlines.gpkg"
    gset.outlines.to_crs(4326).to_file(path)
    a = np.asarray(ddem.interpolate("regional_hypsometric", reference_elevation=gset.ref, mask=gset.outlines))
    b = np.asarray(ddem.interpolate("regional_hypsometric", reference_elevation=xdem.DEM(gset.ref), mask=str(path)))
    inside = gset.index.values > 0
    assert np.isfinite(a[inside]).all() and np.allclose(a[inside], b[inside], atol=0.05)  # outlines resampled


def test_wrong_shapes_and_types_are_one_line(gset):
    _one_line(lambda: xdem.volume.hypsometric_interpolation(gset.ddem.values, np.zeros((3, 3)),
                                                            gset.index.values > 0), "has shape")
    _one_line(lambda: xdem.volume.hypsometric_binning(np.zeros(3), np.zeros(3), kind="bogus"), "bin kind")


def test_numpy_in_numpy_out_and_the_input_is_not_written(gset):
    dh = gset.ddem.values.copy()
    before = dh.copy()
    out = xdem.volume.norm_regional_hypsometric_interpolation(dh, gset.ref.values, gset.index.values)
    assert isinstance(out, np.ndarray) and np.array_equal(dh, before, equal_nan=True)
    assert np.isnan(out).sum() < np.isnan(dh).sum()
