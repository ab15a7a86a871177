"""IDW filling on a smooth field whose values in the voids are known, and its halo limit.

The field is a long-wavelength sine product (amplitude 10 m, wavelengths >= 300 px): inside a
disc of 10 pixels it is nearly linear, and IDW reproduces a linear field exactly when the valid
pixels around a void are symmetric; the error left is the curvature times the disc's size,
about 10 * (2 pi / 300)^2 * 10^2 / 2 = 0.2 m at worst, and far less on average.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from scipy.ndimage import distance_transform_edt

import xdem
from xdem.errors import InputError
from xdem.volume._idw import count_unfilled, idw_fill


@pytest.fixture(scope="module")
def field():
    rows, cols = np.mgrid[0:240, 0:260]
    truth = 10.0 * np.sin(2 * np.pi * cols / 300.0) * np.cos(2 * np.pi * rows / 400.0)
    voids = np.random.default_rng(3).random(truth.shape) < 0.05
    voids[100:140, 60:100] = True  # 40 px wide: its middle is more than 10 px from any value
    voids[20:26, 200:206] = True
    data = np.where(voids, np.nan, truth)
    return truth, voids, data


def test_idw_recovers_the_smooth_field_in_small_voids(field):
    truth, voids, data = field
    filled = xdem.volume.idw_interpolation(data, max_search_distance=10)
    assert np.array_equal(filled[~voids], truth[~voids])
    reach = distance_transform_edt(voids) <= 5  # well within reach
    reach[:10], reach[-10:], reach[:, :10], reach[:, -10:] = False, False, False, False  # edges: not enclosed
    reach[90:150, 50:110] = False  # the 40-px hole: wider than upstream's closing, left whole (next test)
    err = np.abs(filled - truth)[voids & reach]
    assert np.isfinite(err).all() and err.max() < 0.2 and err.mean() < 0.02


def test_voids_wider_than_the_halo_keep_nan_in_their_middle_and_are_counted(field):
    truth, voids, data = field
    arr = da.from_array(data, chunks=70)
    filled = idw_fill(arr, max_search_distance=10, extrapolate=True)
    out = filled.compute()
    beyond = distance_transform_edt(voids) > 10  # no valid pixel within the disc
    assert np.array_equal(np.isnan(out), beyond)
    assert count_unfilled(arr, filled) == int(beyond.sum()) > 0
    default = xdem.volume.idw_interpolation(data, max_search_distance=10)  # upstream's closing: a hole wider
    assert np.isnan(default[100:140, 60:100]).all()  # than the search distance is not filled at all
    assert np.isfinite(default[20:26, 200:206]).all()  # a 6-px one is


def test_without_extrapolation_nothing_grows_out_of_the_data():
    data = np.full((60, 60), np.nan)
    data[20:40, 20:40] = 1.0
    out = xdem.volume.idw_interpolation(data, max_search_distance=10)
    assert np.array_equal(np.isfinite(out), np.isfinite(data))
    grown = xdem.volume.idw_interpolation(data, max_search_distance=10, extrapolate=True)
    assert np.isfinite(grown).sum() > np.isfinite(data).sum()


def test_force_fill_takes_the_median_and_bad_distance_is_one_line():
    data = np.full((30, 30), np.nan)
    data[:5, :5] = np.arange(25.0).reshape(5, 5)
    out = xdem.volume.idw_interpolation(data, max_search_distance=3, force_fill=True)
    assert out[29, 29] == 12.0 and np.isfinite(out).all()
    with pytest.raises(InputError, match="max_search_distance") as info:
        xdem.volume.idw_interpolation(data, max_search_distance=0)
    assert "\n" not in str(info.value)
