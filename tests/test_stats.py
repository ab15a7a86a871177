"""Exact out-of-core median / NMAD against numpy, for several chunkings."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr
from helpers import count_computes

import xdem.stats as st
from xdem.errors import NotEnoughDataError


def _np_median(a):
    return float(np.nanmedian(np.asarray(a, dtype=np.float64)[np.isfinite(a)]))


def _np_nmad(a):
    v = np.asarray(a, dtype=np.float64)
    v = v[np.isfinite(v)]
    return float(1.4826 * np.median(np.abs(v - np.median(v))))


@pytest.fixture
def small_bins(monkeypatch):
    """Force several refinement levels: few bins and a tiny gather limit."""
    monkeypatch.setattr(st, "N_BINS", 64)
    monkeypatch.setattr(st, "MAX_GATHER", 200)


def _data(kind: str, shape=(101, 123), seed=0):
    rng = np.random.default_rng(seed)
    if kind == "normal":
        a = rng.normal(400, 10, size=shape).astype(np.float32)
    elif kind == "heavy":
        a = rng.standard_cauchy(size=shape)
    elif kind == "integer":  # many ties
        a = rng.integers(0, 7, size=shape).astype(np.float32)
    elif kind == "extreme":  # span overflows float64
        a = rng.normal(size=shape) * 1e307
        a[0, 0], a[0, 1] = -1.7e308, 1.7e308
    else:
        raise ValueError(kind)
    a[rng.random(shape) < 0.15] = np.nan
    a.flat[7] = np.inf
    return a


@pytest.mark.parametrize("kind", ["normal", "heavy", "integer", "extreme"])
@pytest.mark.parametrize("chunks", [(30, 41), (7, 123), (101, 19)])
def test_median_nmad_exact_any_chunking(kind, chunks, small_bins):
    a = _data(kind)
    x = da.from_array(a, chunks=chunks)
    assert st.median(x) == _np_median(a)
    assert st.nmad(x) == _np_nmad(a)


@pytest.mark.parametrize("n", [1, 2, 3, 100, 101])
def test_even_and_odd_counts(n, small_bins):
    a = np.random.default_rng(n).normal(size=n)
    for chunks in (n, max(1, n // 3)):
        assert st.median(da.from_array(a, chunks=chunks)) == float(np.median(a))


def test_middle_ranks_straddle_two_bins(small_bins):
    # 60 zeros and 60 ones: the two middle values fall in the first and the last bin.
    a = np.r_[np.zeros(60), np.ones(60)].reshape(12, 10)
    assert st.median(da.from_array(a, chunks=(5, 5))) == 0.5
    assert st.nmad(da.from_array(a, chunks=(5, 5))) == pytest.approx(1.4826 * 0.5)


def test_numpy_and_xarray_input_equal_dask():
    a = _data("normal", shape=(300, 310), seed=3)
    expected = _np_median(a)
    assert st.median(a) == expected
    assert st.median(xr.DataArray(a, dims=("y", "x"))) == expected
    assert st.median(da.from_array(a, chunks=64)) == expected


def test_default_settings_two_passes():
    a = _data("normal", shape=(600, 500), seed=5)
    x = da.from_array(a, chunks=128)
    # Default gather limit is larger than this array: 2 passes (stats, gather).
    with count_computes() as c:
        assert st.median(x) == _np_median(a)
    assert c.count == 2


def test_refinement_pass_count(monkeypatch):
    monkeypatch.setattr(st, "MAX_GATHER", 1000)
    a = _data("normal", shape=(600, 500), seed=5)
    with count_computes() as c:
        assert st.median(da.from_array(a, chunks=128)) == _np_median(a)
    assert c.count == 3  # stats, histogram, gather of the middle bin


def test_constant_array_stops_early(small_bins):
    a = np.full((100, 100), 3.5, dtype=np.float32)
    assert st.median(da.from_array(a, chunks=30)) == 3.5
    assert st.nmad(a) == 0.0


def test_robust_summary_values():
    a = _data("normal", shape=(200, 200), seed=9)
    s = st.robust_summary(da.from_array(a, chunks=64))
    finite = np.isfinite(a)
    assert s["count"] == int(finite.sum())
    assert s["size"] == a.size
    assert s["valid_fraction"] == pytest.approx(finite.mean())
    assert s["min"] == float(a[finite].min()) and s["max"] == float(a[finite].max())
    assert s["median"] == _np_median(a) and s["nmad"] == _np_nmad(a)


def test_all_nan_raises_with_counts():
    a = np.full((20, 30), np.nan, dtype=np.float32)
    with pytest.raises(NotEnoughDataError, match="all 600 pixels"):
        st.robust_summary(da.from_array(a, chunks=10))
    with pytest.raises(NotEnoughDataError, match="600 pixels"):
        st.median(a)


@pytest.mark.parametrize("kind", ["normal", "integer", "extreme"])
def test_robust_summary_refined_exact(kind, small_bins):
    a = _data(kind, seed=11)
    s = st.robust_summary(da.from_array(a, chunks=(40, 70)))
    assert s["median"] == _np_median(a) and s["nmad"] == _np_nmad(a)


def test_robust_summary_five_passes(monkeypatch):
    monkeypatch.setattr(st, "MAX_GATHER", 1000)
    a = _data("normal", shape=(600, 500), seed=5)
    with count_computes() as c:
        s = st.robust_summary(da.from_array(a, chunks=128))
    assert c.count == 5  # stats; histogram + gather for the median; the same for the NMAD
    assert s["nmad"] == _np_nmad(a)


def test_sampled_dh_stats_equal_exact_when_the_sample_holds_every_pixel():
    from xdem.stats import robust_summary, sampled_dh_stats

    rng = np.random.default_rng(11)
    ref = rng.normal(100.0, 5.0, size=(120, 90))
    before = ref + rng.normal(2.0, 0.7, size=ref.shape)
    after = ref + rng.normal(0.0, 0.1, size=ref.shape)
    after[:10] = np.nan
    stable = np.ones(ref.shape, dtype=bool)
    stable[50:60] = False
    res = sampled_dh_stats(
        da.from_array(ref, chunks=37), {"before": da.from_array(before, chunks=50), "after": da.from_array(after, chunks=64)},
        stable=da.from_array(stable, chunks=30), subsample=10**7,
    )
    for name, other in (("before", before), ("after", after)):
        dh = np.where(stable, other - ref, np.nan)
        exact = robust_summary(dh)
        assert res[name]["median"] == pytest.approx(exact["median"], abs=1e-12)
        assert res[name]["nmad"] == pytest.approx(exact["nmad"], abs=1e-12)
        assert res[name]["count"] == exact["count"] == res[name]["sampled"]


def test_sampled_dh_stats_subsample_is_chunk_independent_and_counts_exact():
    from xdem.stats import sampled_dh_stats

    rng = np.random.default_rng(12)
    ref = rng.normal(size=(200, 150))
    other = ref + rng.normal(1.0, 2.0, size=ref.shape)
    other[rng.random(ref.shape) < 0.2] = np.nan
    results = [
        sampled_dh_stats(da.from_array(ref, chunks=c), {"x": da.from_array(other, chunks=c)}, subsample=2000, random_state=4)
        for c in (40, 77, 200)
    ]
    assert all(r == results[0] for r in results)
    assert results[0]["x"]["count"] == int(np.isfinite(other).sum())
    assert results[0]["x"]["sampled"] < 2000 and results[0]["x"]["median"] == pytest.approx(1.0, abs=0.15)


def test_sampled_dh_stats_extra_statistics_are_those_of_numpy():
    """mean, std, RMSE, LE90 of the sampled pixels (all of them here: the subsample exceeds the
    grid) and the exact min and max equal numpy's on the valid dh; identical for any chunking."""
    from xdem.stats import sampled_dh_stats

    rng = np.random.default_rng(3)
    ref = rng.normal(size=(90, 70))
    other = ref + rng.normal(0.5, 1.5, size=ref.shape)
    other[rng.random(ref.shape) < 0.1] = np.nan
    dh = (other - ref)[np.isfinite(other)]
    got = [sampled_dh_stats(da.from_array(ref, chunks=c), {"x": da.from_array(other, chunks=c)}, subsample=10**6)["x"]
           for c in (17, 90)]
    assert got[0] == got[1]
    s = got[0]
    assert s["sampled"] == s["count"] == dh.size
    assert s["mean"] == pytest.approx(dh.mean(), rel=1e-12) and s["std"] == pytest.approx(dh.std(), rel=1e-12)
    assert s["rmse"] == pytest.approx(np.sqrt(np.mean(dh**2)), rel=1e-12)
    assert (s["min"], s["max"]) == (dh.min(), dh.max())
    assert s["le90"] == pytest.approx(np.quantile(np.abs(dh), 0.9), rel=1e-12)
