"""Heteroscedasticity (upstream 0.2.3's workflow) against the synthetic glacier set's known error model.

The set's errors have the spread ``sigma(slope) = 0.3 + 0.02 * slope`` (m, slope in degrees).
The spread recovered on stable terrain by slope bins is within 10 % of it in every bin of
5 degrees, and within 5 % on average: the errors are spatially correlated (Gaussian, range
400 m = 20 pixels, 80 % of the variance), so a bin of ~10^4 pixels holds only ~10^2
independent errors and its NMAD has a relative standard error of ~1.17 / sqrt(2 * 100) ~ 8 %
at worst (measured: at most 6.8 % off, 3.4 % on average); the slope is also the DEM's
(Florinsky's fit) rather than the model's analytic one.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr

import xdem
from xdem import spatialstats as ss
from xdem.errors import InputError
from xdem.examples.glaciers import glacier_set
from xdem.masks import labels_like

BINS = [np.arange(0.0, 50.0, 5.0)]
CENTRES = np.arange(2.5, 40.0, 5.0)


def _run(g, slope, **kw):
    return ss.infer_heteroscedasticity_from_stable(g.ddem, [slope], unstable_mask=g.outlines, list_var_names=["slope"],
                                                   list_var_bins=BINS, **kw)


@pytest.fixture(scope="module")
def fitted():
    g = glacier_set((400, 400), chunks=200)
    slope = xdem.terrain.slope(g.ref)
    return g, slope, *_run(g, slope)


def test_spread_by_slope_recovers_the_noise_model(fitted):
    g, _slope, _errors, df, fun = fitted
    ratio = np.asarray(fun((CENTRES,))) / g.noise.sigma(CENTRES)
    assert np.all(np.abs(ratio - 1) < 0.10), ratio
    assert abs(float(np.mean(ratio)) - 1) < 0.05
    assert list(df.columns) == ["nd", "count", "nmad", "slope"] and (df["count"] > 10_000).sum() >= 8


def test_error_map_is_lazy_and_matches_the_true_errors(fitted):
    g, _slope, errors, _df, fun = fitted
    assert isinstance(errors, xr.DataArray) and isinstance(errors.data, da.Array)
    assert errors.data.chunks == g.ddem.data.chunks
    ratio = (errors / g.error).values
    assert abs(float(np.nanmedian(ratio)) - 1) < 0.05  # everywhere, glaciers included


def test_identical_for_any_chunking(fitted):
    g, slope, errors, df, fun = fitted
    g2 = glacier_set((400, 400), chunks=(128, 96))
    errors2, df2, fun2 = _run(g2, xdem.terrain.slope(g2.ref))
    pd.testing.assert_frame_equal(df, df2)
    np.testing.assert_array_equal(errors.values, errors2.values)
    assert np.array_equal(fun((CENTRES,)), fun2((CENTRES,)))


def test_numpy_and_dask_give_the_same_numbers(fitted):
    g, slope, errors, df, _fun = fitted
    glaciers = labels_like(g.outlines, g.ref).compute() > 0
    out = ss.infer_heteroscedasticity_from_stable(g.ddem.values, [slope.values], unstable_mask=glaciers,
                                                  list_var_names=["slope"], list_var_bins=BINS)
    assert isinstance(out[0], np.ndarray)
    pd.testing.assert_frame_equal(out[1], df)
    np.testing.assert_array_equal(out[0], errors.values)


def test_interp_nd_binning_fills_sparse_bins_and_extrapolates_nearest():
    df = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0], "nmad": [1.0, 99.0, 3.0, 4.0], "count": [200, 5, 200, 200]})
    fun = ss.interp_nd_binning(df, "a", statistic="nmad", min_count=100)
    got = np.asarray(fun((np.array([0.0, 1.5, 2.0, 3.5, 10.0, np.nan]),)))
    np.testing.assert_allclose(got[:5], [1.0, 1.5, 2.0, 3.5, 4.0])  # the 5-count bin is filled linearly
    assert np.isnan(got[5])


def test_get_perbin_nd_binning_and_two_step_standardization():
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 10, (100, 100))
    dh = rng.normal(size=x.shape) * (1 + x)
    df = ss.nd_binning(dh, [x], ["x"], list_var_bins=[np.arange(0.0, 11.0, 1.0)])
    per = ss.get_perbin_nd_binning(df, [x], ["x"], statistic="nmad")
    k = np.floor(x).astype(int)
    np.testing.assert_array_equal(per, df["nmad"].to_numpy()[k])
    z, fun = ss.two_step_standardization(dh, [x], lambda v: 1 + v[0])
    assert ss.nmad(z) == pytest.approx(1.0, abs=1e-12)
    assert float(fun((np.array(0.0),))) == pytest.approx(1.0, rel=0.05)


def test_bad_inputs_are_one_line_errors(fitted):
    g, slope, *_ = fitted
    with pytest.raises(InputError, match="georeferenced"):
        ss.infer_heteroscedasticity_from_stable(g.ddem.values, [slope.values], unstable_mask=g.outlines)
    with pytest.raises(InputError, match="one name per"):
        ss.infer_heteroscedasticity_from_stable(g.ddem, [slope], list_var_names=["a", "b"])
    with pytest.raises(InputError, match="spread_statistic"):
        ss.infer_heteroscedasticity_from_stable(g.ddem, [slope], spread_statistic=np.nanvar)
