"""Gap filling of the synthetic glacier set against its known truth (xdem.examples.glaciers).

The set's voids (9, 14 and 31 % of its three glaciers, in their accumulation areas) are filled
and each glacier's volume change compared with the volume of the same elevation change without
voids (``GlacierSet.truth().volume_full``). Tolerances: 0.5 % for the local hypsometric methods
(each glacier's own curve; measured 0.01-0.2 %), 3 % for the regional ones (one curve or one
normalised signal for all glaciers; measured 0.1-0.6 %): a thinning that is one function of
elevation is what the hypsometric methods assume, so the remaining error is the noise of the
void pixels and the binning.
"""

from __future__ import annotations

import numpy as np
import pytest

import xdem
from xdem.examples.glaciers import glacier_set

TOLERANCE = {"local_hypsometric": 0.005, "regional_hypsometric": 0.03, "norm_regional_hypsometric": 0.03}


@pytest.fixture(scope="module")
def gset():
    return glacier_set((400, 400), chunks=200)


@pytest.fixture(scope="module")
def truth(gset):
    return gset.truth()


@pytest.fixture(scope="module")
def index(gset):
    return gset.index.values


def _volumes(filled: np.ndarray, index: np.ndarray, area: float, n: int) -> np.ndarray:
    return np.array([np.nansum(filled[index == k]) for k in range(1, n + 1)]) * area


@pytest.mark.parametrize("method", sorted(TOLERANCE))
def test_ddem_interpolate_recovers_each_glaciers_volume_change(gset, truth, index, method):
    ddem = xdem.dDEM(gset.ddem, start_time=gset.start, end_time=gset.end)
    filled = np.asarray(ddem.interpolate(method, reference_elevation=gset.ref, mask=gset.outlines))
    assert ddem.fill_method == method
    assert not np.isnan(filled[index > 0]).any()  # every glacier void filled
    valid = np.isfinite(gset.ddem.values)
    assert np.array_equal(filled[valid], gset.ddem.values[valid])  # valid pixels untouched
    rel = _volumes(filled, index, gset.pixel_area, len(truth)) / truth["volume_full"].to_numpy() - 1
    assert np.abs(rel).max() < TOLERANCE[method], rel
    assert (truth["void_fraction"] > 0.05).all()  # the test has voids to fill


def test_local_hypsometric_interpolation_with_residuals_recovers_the_volume(gset, truth, index):
    out = xdem.volume.local_hypsometric_interpolation(gset.ddem.data, gset.ref.data, index)
    filled = np.asarray(out.compute())
    assert np.isnan(filled[index == 0]).all()  # upstream's: off the glaciers is masked
    rel = _volumes(filled, index, gset.pixel_area, len(truth)) / truth["volume_full"].to_numpy() - 1
    assert np.abs(rel).max() < 0.005, rel


def test_regional_signal_is_the_normalised_thinning_profile(gset, index):
    signal = xdem.volume.get_regional_hypsometric_signal(gset.ddem.data, gset.ref.data, index)
    assert len(signal) == 20 and list(signal.columns)[:2] == ["w_mean", "median"]
    w = signal["w_mean"].to_numpy()
    # thinning decreases with elevation (-38 m low, -3 m high): the normalised signal rises from ~0 to ~1
    assert w[0] < 0.15 and w[-1] > 0.85 and np.all(np.diff(w) > -0.1)
    assert signal["count"].sum() == int((np.isfinite(gset.ddem.values) & (index > 0)).sum())
