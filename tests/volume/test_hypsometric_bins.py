"""Upstream's binning helpers: their tables against numpy on the same values, in memory and out of core."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pandas as pd
import pytest

import xdem
from xdem.volume import _tables


@pytest.fixture(scope="module")
def values():
    rng = np.random.default_rng(1)
    z = rng.uniform(300, 800, size=(120, 130))
    dh = -0.02 * (800 - z) + rng.normal(0, 1, size=z.shape)
    dh[rng.random(z.shape) < 0.2] = np.nan
    return dh, z


def _expected(dh, z, edges, agg):
    idx = np.digitize(z, edges) - 1
    out = []
    for i in range(edges.size - 1):
        v = dh[(idx == i) & np.isfinite(dh)]
        out.append((agg(v) if v.size else np.nan, v.size))
    return np.array(out)


@pytest.mark.parametrize("kind, bins", [("fixed", 50.0), ("count", 7)])
def test_binning_in_memory_and_out_of_core_are_numpys(values, kind, bins, monkeypatch):
    dh, z = values
    table = xdem.volume.hypsometric_binning(dh, z, bins=bins, kind=kind)
    edges = np.r_[table.index.left[0], table.index.right]
    exp = _expected(dh, z, edges, np.median)
    assert np.allclose(table[["value", "count"]].to_numpy(), exp, equal_nan=True)
    monkeypatch.setattr(_tables, "MAX_GATHER", 500)  # force refinement passes (histograms of histograms)
    lazy = xdem.volume.hypsometric_binning(da.from_array(dh, chunks=37), da.from_array(z, chunks=37), bins=bins,
                                           kind=kind)
    assert np.array_equal(lazy.to_numpy(), table.to_numpy(), equal_nan=True)  # exact medians, not close ones
    monkeypatch.setattr(_tables, "MAX_COUNTERS", 8)  # many open ranks: 4 bins each, more passes, same medians
    coarse = xdem.volume.hypsometric_binning(da.from_array(dh, chunks=37), da.from_array(z, chunks=37), bins=bins,
                                             kind=kind)
    assert np.array_equal(coarse.to_numpy(), table.to_numpy(), equal_nan=True)
    mean = xdem.volume.hypsometric_binning(da.from_array(dh, chunks=50), da.from_array(z, chunks=50), bins=bins,
                                           kind=kind, aggregation_function=np.mean)
    assert np.allclose(mean["value"], _expected(dh, z, edges, np.mean)[:, 0])


def test_interpolate_fit_and_area(values):
    dh, z = values
    table = xdem.volume.hypsometric_binning(dh, z, bins=25.0)
    holed = table.copy()
    holed.iloc[5:8, 0] = np.nan
    filled = xdem.volume.interpolate_hypsometric_bins(holed)
    assert np.isfinite(filled["value"]).all()
    assert np.allclose(filled["value"].iloc[5:8], table["value"].iloc[5:8], atol=0.6)  # noise 1 m / sqrt(n)
    poly = xdem.volume.fit_hypsometric_bins_poly(table, degree=1)
    slope = np.polyfit(table.index.mid.to_numpy(dtype=float), poly["value"].to_numpy(), 1)[0]
    assert slope == pytest.approx(0.02, abs=0.003)  # the linear trend of the values
    area = xdem.volume.calculate_hypsometry_area(table, z, pixel_size=20.0)
    assert isinstance(area, pd.Series) and area.sum() == pytest.approx(z.size * 400.0)
    lazy_area = xdem.volume.calculate_hypsometry_area(table, da.from_array(z, chunks=40), pixel_size=20.0,
                                                      timeframe="mean")
    assert lazy_area.sum() <= area.sum() and lazy_area.sum() > 0.9 * area.sum()
