"""Unit tests of the plain numpy kernels of xdem.kernels (nuth_kaab, robust)."""

from __future__ import annotations

import numpy as np
import pytest

from xdem.kernels.nuth_kaab import nuth_kaab_step
from xdem.kernels.robust import NMAD_FACTOR, bin_index, equal_width_bin_index, group_by, nmad, nmad_inliers

N_BINS = 72
WIDTH = 2 * np.pi / N_BINS


def _analytic(rng: np.random.Generator, *, a: float, b: float, c: float, per_bin: int) -> tuple[np.ndarray, ...]:
    """``dh = a tan(s) cos(b - asp) + c`` with random slopes and aspects, ``per_bin`` (odd)
    random aspects strictly inside each of the first 36 aspect bins and their mirrors
    ``asp + pi`` (same slope): ``median(dh) = c`` (to rounding) and, ``b`` on a bin edge, the
    relation is monotonic inside every bin, so the bin medians lie on the sinusoid."""
    k = np.repeat(np.arange(N_BINS // 2), per_bin)
    asp = (k + rng.uniform(0.01, 0.99, k.size)) * WIDTH
    asp = np.concatenate([asp, asp + np.pi])
    slope = np.tile(np.radians(rng.uniform(5.0, 45.0, k.size)), 2)
    tan_s = np.tan(slope)
    dh = a * tan_s * np.cos(b - asp) + c
    return dh, tan_s, asp


@pytest.mark.parametrize(("a", "b_deg", "c"), [(2.0, 30.0, 0.7), (0.35, 245.0, -3.0), (7.5, 0.0, 0.0)])
def test_nuth_kaab_step_recovers_an_analytic_shift(a: float, b_deg: float, c: float) -> None:
    rng = np.random.default_rng(int(b_deg))
    b = np.radians(b_deg)
    dh, tan_s, asp = _analytic(rng, a=a, b=b, c=c, per_bin=31)
    east, north, used = nuth_kaab_step(dh, tan_s, asp, n_bins=N_BINS, min_bin_count=10)
    assert used == N_BINS
    assert abs(east - a * np.sin(b)) < 1e-9
    assert abs(north - a * np.cos(b)) < 1e-9


def test_nuth_kaab_step_is_robust_to_gross_outliers() -> None:
    rng = np.random.default_rng(42)
    a, b, c, n = 3.0, np.radians(130.0), 1.5, 40_000
    asp = rng.uniform(0.0, 2 * np.pi, n)
    tan_s = np.tan(np.radians(rng.uniform(5.0, 45.0, n)))
    dh = a * tan_s * np.cos(b - asp) + c
    bad = rng.random(n) < 0.10
    dh[bad] += rng.choice([-1.0, 1.0], bad.sum()) * rng.uniform(50.0, 500.0, bad.sum())
    east, north, used = nuth_kaab_step(dh, tan_s, asp, n_bins=N_BINS, min_bin_count=10)
    assert used == N_BINS
    assert abs(east - a * np.sin(b)) < 0.02 * a
    assert abs(north - a * np.cos(b)) < 0.02 * a


def test_nuth_kaab_step_too_few_bins() -> None:
    asp = np.full(50, 1.0)
    east, north, used = nuth_kaab_step(np.ones(50), np.ones(50), asp, n_bins=N_BINS, min_bin_count=10)
    assert used == 1 and np.isnan(east) and np.isnan(north)


def test_nuth_kaab_step_is_the_one_of_affine_and_verdict() -> None:
    from xdem.coreg import affine

    assert affine._nuth_kaab_step is nuth_kaab_step


# ------------------------------------------------------------------------------- robust
def test_nmad_equals_numpy() -> None:
    rng = np.random.default_rng(0)
    v = rng.standard_t(3, 10_001)
    ref = 1.4826 * np.median(np.abs(v - np.median(v)))
    assert nmad(v) == ref
    assert nmad(v, center=0.25) == 1.4826 * np.median(np.abs(v - 0.25))
    assert nmad(v.astype(np.float32)) == pytest.approx(ref, rel=1e-6)
    assert np.isnan(nmad(np.array([])))
    assert NMAD_FACTOR == 1.4826


def test_one_nmad_factor() -> None:
    import xdem.stats

    assert xdem.stats.NMAD_FACTOR is NMAD_FACTOR


def test_group_by_matches_unique() -> None:
    rng = np.random.default_rng(1)
    keys = rng.integers(-3, 20, 1000)
    values = rng.normal(size=1000)
    g = group_by(keys)
    np.testing.assert_array_equal(g.keys, np.unique(keys))
    vs = values[g.order]
    for k, s0, s1 in zip(g.keys, g.starts, g.ends):
        np.testing.assert_array_equal(vs[s0:s1], values[keys == k])  # stable: input order kept
    assert g.ends[-1] == keys.size and (g.starts[1:] == g.ends[:-1]).all()
    e = group_by(np.array([], dtype=np.int64))
    assert e.keys.size == e.starts.size == e.ends.size == e.order.size == 0
    # small non-negative keys go through a 16-bit radix sort, others not: the same stable order either way
    for k in (rng.integers(0, 36, 5000), rng.integers(0, 2**15, 5000), rng.integers(0, 2**40, 5000),
              rng.integers(0, 200, 5000).astype(np.uint8), rng.integers(-1, 36, 5000)):
        np.testing.assert_array_equal(group_by(k).order, np.argsort(k, kind="stable"))


@pytest.mark.parametrize("n_bins", [4, 31, 33, 200])
def test_bin_index_equals_searchsorted(n_bins: int) -> None:
    rng = np.random.default_rng(n_bins)
    edges = np.sort(rng.uniform(-10, 10, n_bins + 1))
    x = np.concatenate([rng.uniform(-12, 12, 5000), edges, [edges[0] - 1, edges[-1] + 1]])
    ref = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, n_bins - 1)
    np.testing.assert_array_equal(bin_index(x, edges), ref)
    drop = bin_index(x, edges, outside="drop")
    outside = (x < edges[0]) | (x > edges[-1])
    np.testing.assert_array_equal(drop[~outside], ref[~outside])
    assert (drop[outside] == -1).all()
    assert bin_index(np.array([edges[-1]]), edges, outside="drop")[0] == n_bins - 1  # last bin closed
    assert bin_index(np.array([np.nan]), edges, outside="drop")[0] == -1


def test_bin_index_matches_histogram() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=3000)
    counts, edges = np.histogram(x, bins=17)
    np.testing.assert_array_equal(np.bincount(bin_index(x, edges), minlength=17), counts)


def test_bin_index_rejects_unknown_outside() -> None:
    with pytest.raises(ValueError):
        bin_index(np.zeros(2), np.array([0.0, 1.0]), outside="ignore")


def test_equal_width_bin_index() -> None:
    rng = np.random.default_rng(4)
    x = np.sort(rng.uniform(-1.0, 11.0, 10_000))
    idx = equal_width_bin_index(x, lo=0.0, hi=10.0, n_bins=7)
    assert idx.dtype == np.int64 and idx.min() == 0 and idx.max() == 6
    assert (np.diff(idx) >= 0).all()  # monotonic: a bin is a run of the sorted values
    inner = (x > 0) & (x < 10)
    assert (idx[inner] == np.floor(x[inner] / 10.0 * 7).astype(np.int64)).all()
    np.testing.assert_array_equal(equal_width_bin_index(np.array([0.0, 10.0]), lo=0.0, hi=10.0, n_bins=7), [0, 6])
    # a span overflowing float64, and a zero span
    big = equal_width_bin_index(np.array([-1e308, 0.0, 1e308]), lo=-1e308, hi=1e308, n_bins=4)
    np.testing.assert_array_equal(big, [0, 2, 3])
    np.testing.assert_array_equal(equal_width_bin_index(np.array([2.0, 2.0]), lo=2.0, hi=2.0, n_bins=4), [0, 0])


@pytest.mark.parametrize("resampling", ["bilinear", "cubic", "lagrange"])
def test_compiled_interpolation_equals_the_numpy_reference(resampling):
    """The compiled loop of ``interp_positions_kernel`` gives the vectorised numpy kernel's values
    bit for bit: NaN pixels, positions on and beyond the window's edges, integer positions
    (zero weights must not let a NaN through), NaN positions, a float32 window."""
    from xdem.kernels.warp import interp_positions_kernel, interp_positions_numpy

    rng = np.random.default_rng(3)
    window = (rng.normal(size=(60, 80)) * 100).astype(np.float32)
    window[rng.random(window.shape) < 0.03] = np.nan
    prow = rng.uniform(-3, 63, size=(90, 70))
    pcol = rng.uniform(-3, 83, size=(90, 70))
    prow[::4] = np.round(prow[::4])
    pcol[:, ::3] = np.round(pcol[:, ::3])
    prow[0, :5] = np.nan
    pcol[1, :5] = np.inf
    a = interp_positions_kernel(window, prow, pcol, resampling=resampling)
    b = interp_positions_numpy(window, prow, pcol, resampling=resampling)
    assert a.shape == b.shape == prow.shape and a.dtype == np.float64
    assert np.array_equal(a, b, equal_nan=True)
    assert 0.05 < np.isnan(a).mean() < 0.6 and np.isfinite(a).sum() > 1000  # both cases exercised
    with pytest.raises(ValueError, match="resampling"):
        interp_positions_kernel(window, prow, pcol, resampling="nearest")


@pytest.mark.parametrize("resampling", ["bilinear", "cubic", "lagrange"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_window_interpolation_equals_the_numpy_reference(resampling, dtype):
    """``interp_windows_kernel`` (one compiled loop over the points) gives the vectorised numpy
    form's values bit for bit: NaN pixels, footprints leaving the window, integer positions (a
    zero weight must not let a NaN through), NaN and infinite positions."""
    from xdem.kernels.interp import interp_windows_kernel, interp_windows_numpy

    rng = np.random.default_rng(5)
    windows = (rng.normal(size=(20000, 6, 6)) * 100 + 1000).astype(dtype)
    windows[rng.random(windows.shape) < 0.005] = np.nan
    prow = rng.uniform(-0.5, 5.5, 20000)
    pcol = rng.uniform(0.5, 4.5, 20000)
    prow[::7] = np.round(prow[::7])
    pcol[::5] = 2.0
    prow[:3] = np.nan
    pcol[3] = np.inf
    a = interp_windows_kernel(windows, prow, pcol, resampling=resampling)
    with np.errstate(invalid="ignore"):
        b = interp_windows_numpy(windows, prow, pcol, resampling=resampling)
    assert a.shape == b.shape == (20000,) and a.dtype == np.float64
    assert np.array_equal(a, b, equal_nan=True)
    assert 0.05 < np.isnan(a).mean() < 0.8 and np.isfinite(a).sum() > 4000  # both cases exercised


def test_nmad_inliers_rejects_blunders() -> None:
    rng = np.random.default_rng(0)
    v = rng.normal(0.0, 0.3, 1000)
    v[:30] += 25.0
    v[30:40] = np.nan
    ok = nmad_inliers(v, k=4.0)
    assert not ok[:40].any()
    assert ok[40:].mean() > 0.99


def test_run_medians_are_numpys_medians_bit_for_bit() -> None:
    """The compiled medians of runs (aspect bins in ``nuth_kaab_step``) equal ``np.median`` of each
    run exactly, float32 and float64, odd and even runs, runs holding NaN (NaN), empty runs."""
    from xdem.kernels.robust import run_medians

    rng = np.random.default_rng(5)
    for dtype in (np.float32, np.float64):
        values = (rng.normal(size=3001) * 1e3).astype(dtype)
        values[::7] = np.round(values[::7] / 100.0) * 100.0  # ties around the middle
        values[17] = np.nan
        g = group_by(rng.integers(0, 72, values.size))
        v = values[g.order]
        starts, ends = np.r_[g.starts, 5], np.r_[g.ends, 5]  # and one empty run
        want = [np.median(v[a:b]) if b > a else np.nan for a, b in zip(starts, ends)]
        got = run_medians(v, starts, ends)
        np.testing.assert_array_equal(got, np.array(want, dtype=np.float64))
        assert np.isnan(got).sum() == 2 and {int(b - a) % 2 for a, b in zip(g.starts, g.ends)} == {0, 1}


def test_thin_plate_field_is_the_formula_whatever_the_points_evaluated_with() -> None:
    """``ThinPlateField`` (its kernel sums compiled) equals ``sum w phi(|q - c|) + polynomial``
    written out in numpy to 1e-12 relative, and a point's value is the same, bit for bit,
    evaluated alone or among others (what makes the warp's field independent of the chunking)."""
    from xdem.kernels.field import _phi, fit_thin_plate, monomials

    rng = np.random.default_rng(2)
    cx, cy = rng.uniform(0, 8000, 30), rng.uniform(0, 8000, 30)
    field = fit_thin_plate(cx, cy, rng.normal(size=(30, 3)), centre=(4000.0, 4000.0), scale=1000.0, degree=2)
    x, y = rng.uniform(-500, 8500, 2000), rng.uniform(-500, 8500, 2000)
    x[:3], y[:3] = cx[:3], cy[:3]  # at centres: phi(0) = 0
    got = field(x, y)
    u, v = (x - 4000.0) / 1000.0, (y - 4000.0) / 1000.0
    c, w = np.asarray(field.centres), np.asarray(field.weights)
    k = _phi((u[:, None] - c[None, :, 0]) ** 2 + (v[:, None] - c[None, :, 1]) ** 2)
    poly = np.stack([u**i * v**j for i, j in field.terms], axis=-1) @ np.asarray(field.coefs)
    assert [tuple(t) for t in field.terms] == monomials(2)
    np.testing.assert_allclose(got, k @ w + poly, rtol=1e-12, atol=1e-12 * np.abs(got).max())
    np.testing.assert_array_equal(field(x[5:9], y[5:9]), got[5:9])
