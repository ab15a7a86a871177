"""Tests of xdem.spatialstats: binned statistics against pandas on the full arrays,
variograms against Gaussian random fields of known covariance, and the uncertainty of
the mean against closed forms.

Random fields: circulant embedding. The covariance ``C(h) = sill - gamma(h)`` of the
chosen scikit-gstat model is evaluated on a periodic grid larger than the field by three
ranges; its 2-D FFT is the spectral density ``S``; ``ifft2(sqrt(S) * fft2(white noise))``
is then a stationary Gaussian field with exactly that covariance on the torus, and the
crop to the field is free of wrap-around correlation.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from affine import Affine
from reference import check_chunk_independence
from skgstat import models as skmodels

import xdem
from xdem import spatialstats as ss
from xdem import stats as xstats
from xdem.errors import EmptyBinWarning, InputError, NotEnoughDataError
from xdem.examples import example_pair

pytestmark = pytest.mark.filterwarnings("ignore::xdem.errors.EmptyBinWarning")


# --------------------------------------------------------------------- helpers
def gaussian_random_field(shape, comps, seed):
    """Stationary Gaussian field with covariance sum_k (sill_k - model_k(h; range_k, sill_k))."""
    ny, nx = shape
    pad = int(3 * max(r for _m, r, _s in comps))
    Ny, Nx = ny + pad, nx + pad
    iy = np.minimum(np.arange(Ny), Ny - np.arange(Ny))[:, None]
    ix = np.minimum(np.arange(Nx), Nx - np.arange(Nx))[None, :]
    d = np.hypot(iy, ix).ravel()
    cov = sum(s - getattr(skmodels, m)(d, r, s) for m, r, s in comps).reshape(Ny, Nx)
    spec = np.clip(np.fft.fft2(cov).real, 0, None)
    white = np.random.default_rng(seed).standard_normal((Ny, Nx))
    return np.fft.ifft2(np.sqrt(spec) * np.fft.fft2(white)).real[:ny, :nx]


def as_dem(arr, res=1.0, chunks=None):
    """DataArray (dims y, x) on a projected grid of pixel size ``res``."""
    ny, nx = arr.shape
    t = Affine(res, 0, 500000.0, 0, -res, 4000000.0)
    x = t.c + (np.arange(nx) + 0.5) * res
    y = t.f - (np.arange(ny) + 0.5) * res
    out = xr.DataArray(arr, dims=("y", "x"), coords={"y": y, "x": x})
    out = out.rio.write_crs("EPSG:32632").rio.write_transform(t)
    return out.chunk({"y": chunks, "x": chunks}) if chunks else out


@pytest.fixture(scope="module")
def pair_arrays():
    """dh (with holes and noise), slope, aspect and elevation of the example pair, in memory."""
    ref, tba, _ = example_pair(noise=0.2, holes=6, random_state=3, chunks=128)
    dh = (tba - ref).rename("dh")
    slope = xdem.terrain.slope(ref)
    aspect = xdem.terrain.aspect(ref)
    dh, slope, aspect, ref = dask.compute(dh, slope, aspect, ref)
    return dh, slope, aspect, ref


def pandas_reference(dh, variables, edges, statistics):
    """The same table from pandas groupby on the full arrays (independent binning via pd.cut)."""
    frame = pd.DataFrame({"dh": np.asarray(dh, dtype=np.float64).ravel()})
    keys = []
    for name, var in variables.items():
        frame[name] = pd.cut(np.asarray(var, dtype=np.float64).ravel(), edges[name], right=False)
        keys.append(name)
    frame = frame.dropna()
    grouped = frame.groupby(keys, observed=False)["dh"]
    out = {}
    for s in statistics:
        if s == "count":
            out[s] = grouped.count()
        elif s == "median":
            out[s] = grouped.median()
        elif s == "nmad":
            out[s] = grouped.apply(lambda x: 1.4826 * np.median(np.abs(x - np.median(x))) if len(x) else np.nan)
        elif s == "mean":
            out[s] = grouped.mean()
        elif s == "std":
            out[s] = grouped.std(ddof=0)
        elif s == "rmse":
            out[s] = grouped.apply(lambda x: np.sqrt(np.mean(x**2)) if len(x) else np.nan)
        elif s.startswith("p"):
            out[s] = grouped.quantile(float(s[1:]) / 100)
    return pd.DataFrame(out)


STATS = ("count", "median", "nmad", "mean", "std", "rmse", "p5", "p97.5")


# ------------------------------------------------------------ binned statistics
def test_binned_1d_equals_pandas(pair_arrays):
    dh, slope, _aspect, _ref = pair_arrays
    edges = {"slope": np.array([0.0, 2, 5, 10, 20, 45])}  # max slope < 45
    assert float(np.nanmax(slope)) < 45
    got = ss.binned_statistics(dh.chunk(100), {"slope": slope.chunk(100)}, bins=edges, statistics=STATS)
    want = pandas_reference(dh.values, {"slope": slope.values}, edges, STATS)
    assert got["count"].tolist() == want["count"].tolist()
    assert got["count"].sum() > 100_000
    for s in STATS[1:]:
        np.testing.assert_allclose(got[s].to_numpy(), want[s].to_numpy(), rtol=1e-12, atol=1e-12, err_msg=s)
    np.testing.assert_array_equal(got["slope_lower"], edges["slope"][:-1])
    np.testing.assert_array_equal(got["slope_upper"], edges["slope"][1:])
    assert isinstance(got.index, pd.IntervalIndex)


def test_binned_2d_equals_pandas(pair_arrays):
    dh, slope, aspect, _ref = pair_arrays
    edges = {"slope": np.array([0.0, 3, 8, 45]), "aspect": np.array([0.0, 90, 180, 270, 360.1])}
    stats = ("count", "median", "nmad", "mean", "rmse")
    got = ss.binned_statistics(dh, {"slope": slope, "aspect": aspect}, bins=edges, statistics=stats)
    want = pandas_reference(dh.values, {"slope": slope.values, "aspect": aspect.values}, edges, stats)
    assert len(got) == 3 * 4 and isinstance(got.index, pd.MultiIndex)
    assert got["count"].tolist() == want["count"].tolist()
    for s in stats[1:]:
        np.testing.assert_allclose(got[s].to_numpy(), want[s].to_numpy(), rtol=1e-12, atol=1e-12, err_msg=s)


def test_binned_integer_bins_match_numpy_histogram(pair_arrays):
    dh, _slope, _aspect, ref = pair_arrays
    got = ss.binned_statistics(dh, {"elevation": ref}, bins={"elevation": 7}, statistics=("count", "mean"))
    valid = np.isfinite(dh.values) & np.isfinite(ref.values)
    counts, edges = np.histogram(ref.values[valid].astype(np.float64), bins=7)  # float64 edges, as xdem
    np.testing.assert_array_equal(got["count"].to_numpy(), counts)
    np.testing.assert_allclose(got["elevation_lower"].to_numpy(), edges[:-1], rtol=1e-15)
    np.testing.assert_allclose(got["elevation_upper"].to_numpy(), edges[1:], rtol=1e-15)
    idx = np.clip(np.digitize(ref.values[valid].astype(np.float64), edges) - 1, 0, 6)
    means = [dh.values[valid][idx == i].astype(np.float64).mean() for i in range(7)]
    np.testing.assert_allclose(got["mean"].to_numpy(), means, rtol=1e-12)


def test_binned_exact_with_refinement_and_ties(monkeypatch):
    """A tiny gather budget forces histogram refinement; heavy ties force the all-equal exit."""
    rng = np.random.default_rng(5)
    dh = np.round(rng.standard_t(3, size=(180, 230)), 1)  # values on a 0.1 grid: many ties
    dh[rng.random(dh.shape) < 0.05] = np.nan
    dh[:20, :20] = 1e6  # outliers far away
    var = rng.uniform(0, 3, dh.shape)
    edges = {"v": np.array([0.0, 1, 2, 3.0])}
    stats = ("count", "median", "nmad", "p10", "p90", "mean")
    want = pandas_reference(dh, {"v": var}, edges, stats)
    monkeypatch.setattr(xstats, "MAX_GATHER", 300)
    got = ss.binned_statistics(da.from_array(dh, chunks=(47, 61)), {"v": var}, bins=edges, statistics=stats)
    for s in stats:
        np.testing.assert_allclose(got[s].to_numpy(), want[s].to_numpy(), rtol=1e-12, err_msg=s)


def test_binned_chunk_independent(pair_arrays):
    dh, slope, aspect, _ref = pair_arrays

    def table(d, s, a):
        return ss.binned_statistics(
            d, {"slope": s, "aspect": a}, bins={"slope": 4, "aspect": [0, 180, 360]},
            statistics=("count", "median", "nmad", "mean", "rmse", "p90"),
        )

    res = check_chunk_independence(table, dh, slope, aspect, atol=1e-9)
    assert np.isfinite(res).sum() > 50


def test_binned_number_of_passes(pair_arrays, compute_counter):
    dh, slope, _aspect, _ref = pair_arrays
    d, s = dh.chunk(128), slope.chunk(128)
    with compute_counter() as c:
        ss.binned_statistics(d, {"slope": s}, bins={"slope": [0, 5, 45]}, statistics=("count", "mean", "rmse"))
    assert c.count == 1  # sums only: one pass
    with compute_counter() as c:
        ss.binned_statistics(d, {"slope": s}, bins={"slope": 4})
    assert c.count == 4  # range of slope, sums, medians (gathered), NMADs (gathered)


def test_binned_subsample_is_reproducible_and_close(pair_arrays):
    dh, slope, _aspect, _ref = pair_arrays
    edges = {"slope": [0, 3, 8, 45]}
    exact = ss.binned_statistics(dh, {"slope": slope}, bins=edges)
    a = ss.binned_statistics(dh.chunk(64), {"slope": slope.chunk(64)}, bins=edges, subsample=20_000, random_state=4)
    b = ss.binned_statistics(dh.chunk(150), {"slope": slope.chunk(150)}, bins=edges, subsample=20_000, random_state=4)
    pd.testing.assert_frame_equal(a, b)
    # sums stay exact; the subsample holds 20,000 pixels in all
    pd.testing.assert_series_equal(a["count"], exact["count"])
    np.testing.assert_allclose(a["mean"], exact["mean"], rtol=1e-12)
    assert a["sample_count"].sum() == 20_000
    # order statistics from ~1/7 of the pixels: within a few standard errors of the exact ones
    se = 1.25 * exact["nmad"] / np.sqrt(a["sample_count"])
    assert np.all(np.abs(a["median"] - exact["median"]) < 5 * se)
    assert np.all(np.abs(a["nmad"] - exact["nmad"]) < 0.1 * exact["nmad"])


def test_stats_by_slope_class_matches_pandas(pair_arrays):
    dh, slope, _aspect, _ref = pair_arrays
    got = ss.stats_by_slope_class(dh.chunk(90), slope.chunk(90))
    classes = np.array(ss.SLOPE_CLASSES, dtype=float)
    want = pandas_reference(dh.values, {"slope": slope.values}, {"slope": classes}, ("count", "median", "nmad", "rmse"))
    assert got["slope_lower"].tolist() == list(classes[:-1])
    assert got["count"].tolist() == want["count"].tolist()
    for s in ("median", "nmad", "rmse"):
        np.testing.assert_allclose(got[s].to_numpy(), want[s].to_numpy(), rtol=1e-12, err_msg=s)


def test_robust_summary_matches_numpy_and_xdem_stats(pair_arrays):
    dh = pair_arrays[0]
    vals = dh.values[np.isfinite(dh.values)].astype(np.float64)
    got = ss.robust_summary(dh.chunk(70), percentiles=(1, 50, 99))
    assert got["count"] == vals.size and got["size"] == dh.size
    np.testing.assert_allclose(got["median"], np.median(vals), rtol=1e-14)
    assert got["median"] == xstats.median(dh) and got["nmad"] == pytest.approx(xstats.nmad(dh), rel=1e-14)
    np.testing.assert_allclose(got["mean"], vals.mean(), rtol=1e-12)
    np.testing.assert_allclose(got["std"], vals.std(), rtol=1e-12)
    np.testing.assert_allclose(got["rmse"], np.sqrt(np.mean(vals**2)), rtol=1e-12)
    np.testing.assert_allclose([got["p1"], got["p50"], got["p99"]], np.percentile(vals, [1, 50, 99]), rtol=1e-12)
    assert (got["min"], got["max"]) == (vals.min(), vals.max())
    assert ss.nmad(dh) == xstats.nmad(dh)  # upstream's signature (nfact) over the same exact NMAD


def test_robust_summary_refined_is_chunk_independent(pair_arrays, monkeypatch, compute_counter):
    """Histogram refinement (tiny gather budget) on float32 dh with holes, many chunkings."""
    dh = pair_arrays[0]
    monkeypatch.setattr(xstats, "MAX_GATHER", 2000)
    with compute_counter() as c:
        ss.robust_summary(dh.chunk(100))
    assert c.count >= 5  # sums, then at least two passes each for the quantiles and the NMAD
    res = check_chunk_independence(lambda d: ss.robust_summary(d, percentiles=(0, 10, 100)), dh, atol=1e-9)
    vals = dh.values[np.isfinite(dh.values)].astype(np.float64)
    got = ss.robust_summary(dh, percentiles=(0, 10, 100))
    assert (got["p0"], got["p100"]) == (vals.min(), vals.max())
    assert got["median"] == np.median(vals) and got["p10"] == pytest.approx(np.percentile(vals, 10), rel=1e-14)
    assert np.isfinite(res).all()


def test_empty_bins_warn(pair_arrays):
    dh, slope, _aspect, _ref = pair_arrays
    with pytest.warns(EmptyBinWarning, match="1 of 3 bins"):
        df = ss.binned_statistics(dh, {"slope": slope}, bins={"slope": [0, 10, 50, 90]})
    assert df["count"].iloc[-1] == 0 and np.isnan(df["median"].iloc[-1])


def test_bad_inputs_raise_clear_errors(pair_arrays):
    dh, slope, _aspect, _ref = pair_arrays
    with pytest.raises(InputError, match="unknown statistic"):
        ss.binned_statistics(dh, {"slope": slope}, statistics=("mode",))
    with pytest.raises(InputError, match="shape"):
        ss.binned_statistics(dh, {"slope": slope[:-1]})
    with pytest.raises(InputError, match="strictly increasing"):
        ss.binned_statistics(dh, {"slope": slope}, bins={"slope": [5, 1]})
    with pytest.raises(InputError, match="not in variables"):
        ss.binned_statistics(dh, {"slope": slope}, bins={"aspect": 3})
    moved = slope.assign_coords(x=slope["x"] + 1.0)
    with pytest.raises(InputError, match="not on the grid of dh"):
        ss.binned_statistics(dh, {"slope": moved})


def test_all_nan_raises_not_enough_data():
    nan = np.full((40, 50), np.nan)
    var = np.ones((40, 50))
    for call in (
        lambda: ss.binned_statistics(nan, {"v": var}, bins={"v": [0, 2]}),
        lambda: ss.binned_statistics(da.from_array(nan, chunks=16), {"v": var}, bins={"v": 3}),
        lambda: ss.stats_by_slope_class(nan, var),
        lambda: ss.robust_summary(nan),
        lambda: ss.sample_empirical_variogram(as_dem(nan)),
    ):
        with pytest.raises(NotEnoughDataError):
            call()


# ------------------------------------------------------------------- variogram
@pytest.mark.parametrize("model", ["spherical", "exponential", "gaussian"])
def test_variogram_recovers_range_and_sill(model):
    """Range 20 px = 40 m (2 m pixels), sill 4: fitted within 20 % (within 10 % for seeds 11-13)."""
    field = gaussian_random_field((300, 300), [(model, 20.0, 4.0)], seed=11)
    ev = ss.sample_empirical_variogram(as_dem(field, res=2.0), subsample=1000, random_state=2, max_lag=200)
    assert ev["count"].sum() > 100_000 and ev["exp"].notna().all()
    _fn, params = ss.fit_sum_model_variogram(model, ev)
    assert params["range"][0] == pytest.approx(40.0, rel=0.2)
    assert params["sill"][0] == pytest.approx(4.0, rel=0.2)


def test_sum_of_two_models_fits_two_scale_field_better():
    comps = [("spherical", 6.0, 1.0), ("spherical", 60.0, 3.0)]
    field = gaussian_random_field((400, 400), comps, seed=1)
    ev = ss.sample_empirical_variogram(field, subsample=2000, random_state=1, max_lag=200, n_lags=25)
    one, p1 = ss.fit_sum_model_variogram("spherical", ev)
    two, p2 = ss.fit_sum_model_variogram(["Sph", "Sph"], ev)
    ok = ev["count"] > 0
    rms = lambda fn: float(np.sqrt(np.mean((fn(ev["lag"][ok]) - ev["exp"][ok]) ** 2)))  # noqa: E731
    assert rms(two) < 0.5 * rms(one)
    assert p2["range"].tolist() == pytest.approx([6.0, 60.0], rel=0.35)
    assert p2["sill"].sum() == pytest.approx(4.0, rel=0.3)
    np.testing.assert_allclose(two(np.array([0.0, 1e4])), [0.0, p2["sill"].sum()], atol=1e-12)


def test_variogram_reproducible_and_chunk_independent():
    field = gaussian_random_field((150, 170), [("exponential", 15.0, 1.0)], seed=3)
    field[40:60, 30:90] = np.nan
    dem = as_dem(field.astype(np.float32), res=5.0)

    def ev(d):
        return ss.sample_empirical_variogram(d, subsample=400, n_variograms=2, random_state=9, n_lags=10)

    res = check_chunk_independence(ev, dem, atol=1e-9)
    assert np.isfinite(res).sum() > 30
    other = ss.sample_empirical_variogram(dem, subsample=400, n_variograms=2, random_state=10, n_lags=10)
    assert not np.allclose(other["exp"], ev(dem)["exp"])
    assert ev(dem).attrs["n_points"] == 400 and ev(dem)["err_exp"].notna().all()


def test_variogram_too_few_points():
    arr = np.full((100, 100), np.nan)
    arr[5, :ss.MIN_VARIOGRAM_POINTS - 1] = 1.0
    with pytest.raises(NotEnoughDataError, match=f"at least {ss.MIN_VARIOGRAM_POINTS}"):
        ss.sample_empirical_variogram(arr)
    with pytest.raises(NotEnoughDataError, match="at least 5 non-empty lag classes"):
        ss.fit_sum_model_variogram(["exp", "gau"], pd.DataFrame({"bins": [1.0, 2, 3], "exp": [1.0, 2, 2], "count": 9}))
    with pytest.raises(InputError, match="unknown variogram model"):
        ss.fit_sum_model_variogram("linear", pd.DataFrame({"bins": [1.0], "exp": [1.0], "count": [1]}))


def test_variogram_upstream_keywords_values_gsd_and_empirical_variogram():
    """Upstream's gallery calls sample_empirical_variogram(values=array, gsd=...) and
    fit_sum_model_variogram(list, empirical_variogram=df): a plain array of pixel size gsd gives
    the variogram of the same array georeferenced at that pixel size (same subsample, pair
    distances equal to rounding: rtol 1e-9)."""
    field = gaussian_random_field((80, 90), [("spherical", 10.0, 1.0)], seed=5)
    kw = dict(subsample=300, random_state=4, n_lags=8)
    plain = ss.sample_empirical_variogram(values=field, gsd=2.0, **kw)
    geo = ss.sample_empirical_variogram(as_dem(field, res=2.0), **kw)
    pixels = ss.sample_empirical_variogram(field, **kw)
    np.testing.assert_allclose(plain[["bins", "exp", "count"]], geo[["bins", "exp", "count"]], rtol=1e-9)
    assert plain["bins"].iloc[0] == pytest.approx(4.0) and pixels["bins"].iloc[0] == pytest.approx(2.0)
    assert ss.sample_empirical_variogram(as_dem(field, res=2.0), 2.0, **kw)["exp"].equals(geo["exp"])
    with pytest.raises(InputError, match="differs from the pixel size 2.0"):
        ss.sample_empirical_variogram(as_dem(field, res=2.0), gsd=5.0)
    for bad in (0.0, -1.0, np.nan, "2"):
        with pytest.raises(InputError, match="gsd"):
            ss.sample_empirical_variogram(field, gsd=bad)
    _fn, params = ss.fit_sum_model_variogram(list_models=["spherical"], empirical_variogram=geo)
    assert params["range"][0] > 0
    with pytest.raises(InputError, match="empirical_variogram must be"):
        ss.fit_sum_model_variogram(["spherical"], empirical_variogram=None)


def test_variogram_refuses_geographic_crs():
    dem = as_dem(np.zeros((60, 60))).rio.write_crs("EPSG:4326")
    with pytest.raises(xdem.errors.CRSError, match="projected"):
        ss.sample_empirical_variogram(dem)


# ------------------------------------------------------ uncertainty of the mean
ALL_MODELS = [("spherical", 100.0, 2.0), ("exponential", 100.0, 2.0), ("gaussian", 100.0, 2.0)]


@pytest.mark.parametrize("comp", ALL_MODELS + [("cubic", 100.0, 2.0)])
def test_small_area_keeps_single_pixel_error(comp):
    params = [comp, ("spherical", 1000.0, 1.0)]
    for area in (1e-6, 1e-2):
        se = ss.standard_error_of_mean(1.7, area=area, params=params)
        assert se == pytest.approx(1.7, rel=1e-3)
    assert ss.neff_circular_approx_numerical(1e-8, params) == pytest.approx(1.0, rel=1e-6)


def test_large_area_scaling_matches_closed_forms():
    area = 1e8  # disk radius 5642 m >> range 100 m
    for (model, r, s), ratio in zip(ALL_MODELS, (np.pi * 100**2 / 5, 2 * np.pi * (100 / 3) ** 2, np.pi * (100 / 2) ** 2)):
        se = ss.standard_error_of_mean(3.0, area=area, params=[(model, r, s)])
        assert se == pytest.approx(3.0 * np.sqrt(ratio / area), rel=1e-6), model
    # quadrupling the area halves the error once it is much larger than the range
    p = [("spherical", 100.0, 1.0)]
    assert ss.standard_error_of_mean(1.0, area=4e8, params=p) == pytest.approx(
        ss.standard_error_of_mean(1.0, area=1e8, params=p) / 2, rel=1e-9
    )


@pytest.mark.parametrize("area", [50.0, 3e3, 3.14e4, 2e5, 1e7])
def test_numerical_neff_equals_theoretical(area):
    for comp in ALL_MODELS:
        num = ss.neff_circular_approx_numerical(area, [comp])
        theo = ss.neff_circular_approx_theoretical(area, [comp])
        assert num == pytest.approx(theo, rel=1e-7), comp
    params = pd.DataFrame(ALL_MODELS[:2], columns=["model", "range", "sill"])
    num = ss.neff_circular_approx_numerical(area, params)
    assert num == pytest.approx(ss.neff_circular_approx_theoretical(area, params), rel=1e-7)
    assert 1 <= num <= max(1.0, area)


def test_neff_takes_upstream_keywords_area_and_params_variogram_model():
    """Upstream's gallery calls neff_circular_approx_numerical(area=..., params_variogram_model=...)."""
    params = pd.DataFrame(ALL_MODELS[:2], columns=["model", "range", "sill"])
    for fn in (ss.neff_circular_approx_numerical, ss.neff_circular_approx_theoretical):
        assert fn(area=3e4, params_variogram_model=params) == fn(3e4, params)


def test_neff_bad_inputs():
    with pytest.raises(InputError, match="area"):
        ss.neff_circular_approx_numerical(-1.0, ALL_MODELS)
    with pytest.raises(InputError, match="closed form"):
        ss.neff_circular_approx_theoretical(1e4, [("cubic", 10.0, 1.0)])
    with pytest.raises(InputError, match="zero total sill"):
        ss.neff_circular_approx_numerical(1e4, [("spherical", 10.0, 0.0)])
