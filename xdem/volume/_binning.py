"""Hypsometric bins: elevation change binned by reference elevation (upstream's small-table functions).

:func:`hypsometric_binning` takes numpy arrays (any aggregation function, in memory, as upstream)
or dask/xarray arrays (median or mean, exact and out of core). The other functions work on the
small table of bins it returns; :func:`calculate_hypsometry_area` also counts a dask DEM's pixels
out of core.

One difference from upstream 0.2.3: its ``hypsometric_binning`` stored the statistics of bin
``i`` at position ``i - 1`` (the last bin's at the first position); here each bin holds its own.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import partial
from typing import Any

import dask.array as da
import numpy as np
import pandas as pd

from xdem.errors import InputError
from xdem.stats import nanmax, nanmin
from xdem.volume._inputs import as_lazy
from xdem.volume._tables import group_medians

__all__ = ["hypsometric_binning", "interpolate_hypsometric_bins", "fit_hypsometric_bins_poly",
           "calculate_hypsometry_area", "bin_edges", "bins_table", "extrapolated"]

_KINDS = ("fixed", "count", "quantile", "custom")


def bin_edges(zmin: float, zmax: float, bins: float | np.ndarray, kind: str) -> np.ndarray:
    """Edges of upstream's bin kinds ``fixed`` (size), ``count`` (number) and ``custom`` (the edges)."""
    if isinstance(bins, np.ndarray) or kind == "custom":
        return np.asarray(bins, dtype=np.float64)
    if kind == "fixed":
        return np.arange(zmin, zmax + bins + 1e-6, step=bins)  # +1e-6: one bin when zmin == zmax
    if kind == "count":
        return np.linspace(zmin, zmax + 1e-6 / bins, num=int(bins + 1))
    raise InputError(f"invalid bin kind {kind!r}; choose among {list(_KINDS)}")


def bins_table(values: np.ndarray, counts: np.ndarray, edges: np.ndarray) -> pd.DataFrame:
    """The table of bins upstream returns: ``value`` and ``count`` indexed by the elevation intervals."""
    return pd.DataFrame(index=pd.IntervalIndex.from_breaks(edges), data=np.vstack([values, counts]).T,
                        columns=["value", "count"])


def _binning_numpy(ddem: np.ndarray, ref: np.ndarray, bins: float | np.ndarray, kind: str,
                   aggregation_function: Callable[[np.ndarray], float]) -> pd.DataFrame:
    ddem = np.ma.filled(np.ma.asarray(ddem).astype(np.float64), np.nan).ravel()
    ref = np.ma.filled(np.ma.asarray(ref).astype(np.float64), np.nan).ravel()
    ok = np.isfinite(ref)
    ddem, ref = ddem[ok], ref[ok]
    if kind == "quantile" and not isinstance(bins, np.ndarray):
        edges = np.percentile(ref, np.linspace(0, 100, num=int(bins) + 1))
        edges[-1] += 1e-6
    else:
        if ref.size == 0 and not (isinstance(bins, np.ndarray) or kind == "custom"):
            raise InputError("the reference elevation has no valid value where the dDEM is; nothing to bin")
        edges = bin_edges(float(ref.min()) if ref.size else 0.0, float(ref.max()) if ref.size else 0.0, bins, kind)
    idx = np.digitize(ref, edges) - 1
    nb = edges.size - 1
    values = np.full(nb, np.nan)
    counts = np.zeros(nb, dtype=int)
    for i in range(nb):
        sel = ddem[idx == i]
        sel = sel[np.isfinite(sel)]
        if sel.size:
            values[i], counts[i] = aggregation_function(sel), sel.size
    return bins_table(values, counts, edges)


def _bin_groups(dh: np.ndarray, z: np.ndarray, *, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    idx = (np.digitize(z, edges) - 1).ravel()
    v = dh.ravel()
    ok = np.isfinite(v) & np.isfinite(z.ravel()) & (idx >= 0) & (idx < edges.size - 1)
    return idx[ok].astype(np.int64), v[ok]


def _binning_lazy(ddem: Any, ref: Any, bins: float | np.ndarray, kind: str,
                  aggregation_function: Callable[[np.ndarray], float]) -> pd.DataFrame:
    if aggregation_function not in (np.median, np.nanmedian, np.mean, np.nanmean):
        raise InputError("out of core, hypsometric_binning aggregates with np.median or np.mean only; "
                         "pass numpy arrays for another aggregation_function")
    if kind == "quantile" and not isinstance(bins, np.ndarray):
        raise InputError("kind='quantile' needs the values in memory: pass numpy arrays or use kind='fixed'/'count'")
    dh = as_lazy(ddem, "ddem")
    z = as_lazy(ref, "ref_dem", shape=dh.shape, chunks=dh.chunks)
    if isinstance(bins, np.ndarray) or kind == "custom":
        edges = bin_edges(0.0, 0.0, bins, kind)
    else:
        zmin, zmax = (float(v) for v in da.compute(nanmin(z), nanmax(z)))
        if not np.isfinite(zmin):
            raise InputError("the reference elevation has no valid value; nothing to bin")
        edges = bin_edges(zmin, zmax, bins, kind)
    s = group_medians(partial(_bin_groups, edges=edges), [dh, z], edges.size - 1)
    mean = np.where(s.count > 0, s.sum / np.maximum(s.count, 1), np.nan)
    values = s.median if aggregation_function in (np.median, np.nanmedian) else mean
    return bins_table(values, s.count, edges)


def hypsometric_binning(ddem: Any, ref_dem: Any, bins: float | np.ndarray = 50.0, kind: str = "fixed",
                        aggregation_function: Callable[[np.ndarray], float] = np.median) -> pd.DataFrame:
    """Elevation change aggregated in bins of reference elevation (upstream's name and arguments).

    Parameters
    ----------
    ddem
        Elevation change (NaN or masked: left out), 1-D or 2-D; numpy in memory, dask or
        DataArray out of core.
    ref_dem
        Reference elevation of the same shape; the bins span its valid values.
    bins
        Bin size (``fixed``), number of bins (``count``, ``quantile``) or the edges.
    kind
        ``fixed``, ``count``, ``quantile`` or ``custom``.
    aggregation_function
        Statistic of each bin (default the median; out of core: median or mean).

    Returns
    -------
    pandas.DataFrame
        Indexed by the elevation intervals: ``value`` (the statistic) and ``count`` (valid pixels).

    Examples
    --------
    >>> z = np.array([100.0, 120.0, 160.0, 170.0, 190.0])
    >>> dh = np.array([-3.0, -1.0, -2.0, np.nan, 0.0])
    >>> t = hypsometric_binning(dh, z, bins=50.0)
    >>> t["value"].tolist(), t["count"].tolist()
    ([-2.0, -1.0], [2.0, 2.0])
    """
    if kind not in _KINDS:
        raise InputError(f"invalid bin kind {kind!r}; choose among {list(_KINDS)}")
    if np.shape(ddem) != np.shape(ref_dem):
        raise InputError(f"ddem has shape {np.shape(ddem)} but ref_dem has {np.shape(ref_dem)}; give both on one grid")
    if isinstance(ddem, np.ndarray) and isinstance(ref_dem, np.ndarray):
        return _binning_numpy(ddem, ref_dem, bins, kind, aggregation_function)
    return _binning_lazy(ddem, ref_dem, bins, kind, aggregation_function)


def interpolate_hypsometric_bins(hypsometric_bins: pd.DataFrame, value_column: str = "value",
                                 method: str = "polynomial", order: int = 3,
                                 count_threshold: int | None = None) -> pd.DataFrame:
    """Fill the empty bins by interpolation along elevation (pandas' ``interpolate``; upstream's).

    Bins under ``count_threshold`` are left out of the interpolation and keep their value.
    With ``order + 1`` valid bins or fewer nothing is interpolated (a warning says so), as
    upstream. Nothing is extrapolated beyond the outermost valid bins by the polynomial.
    """
    bins = hypsometric_bins.copy()
    bins.index = bins.index.mid
    under = None
    if count_threshold is not None:
        if "count" not in hypsometric_bins.columns:
            raise InputError("count_threshold needs a 'count' column in the bins")
        under = bins["count"] < count_threshold
        bins.loc[under, value_column] = np.nan
    if np.count_nonzero(np.isfinite(bins[value_column])) <= order + 1:
        warnings.warn("Not enough valid bins for interpolation -> returning copy", UserWarning, stacklevel=2)
        return hypsometric_bins.copy()
    bins[value_column] = bins[value_column].interpolate(method=method, order=order, limit_direction="both")
    if under is not None:
        bins.loc[under, value_column] = hypsometric_bins.loc[under.values, value_column].values
    bins.index = hypsometric_bins.index
    return bins


def fit_hypsometric_bins_poly(hypsometric_bins: pd.DataFrame, value_column: str = "value", degree: int = 3,
                              iterations: int = 1, count_threshold: int | None = None) -> pd.DataFrame:
    """Replace the bins by a polynomial of elevation fitted to them (upstream's).

    At each of ``iterations``, bins whose residual exceeds three standard deviations of the
    residuals are left out of the next fit. Returns ``value`` (the polynomial at each bin's
    middle) and ``count``.
    """
    bins = hypsometric_bins.copy()
    mids = np.asarray(bins.index.mid, dtype=np.float64)
    y = np.asarray(bins[value_column], dtype=np.float64).copy()
    if count_threshold is not None:
        if "count" not in hypsometric_bins.columns:
            raise InputError("count_threshold needs a 'count' column in the bins")
        y[np.asarray(bins["count"]) < count_threshold] = np.nan
    valid = np.isfinite(y)
    if np.count_nonzero(valid) <= degree:
        raise InputError(f"{np.count_nonzero(valid)} valid bins cannot constrain a polynomial of degree {degree}")
    fitted = np.full(mids.size, np.nan)
    for _ in range(max(int(iterations), 1)):
        coeffs = np.polyfit(mids[valid], y[valid], deg=degree)
        fitted = np.polyval(coeffs, mids)
        resid = fitted - y
        before = valid.copy()
        valid &= ~(np.abs(np.nan_to_num(resid)) > 3 * np.nanstd(resid))
        if np.array_equal(valid, before):
            break
    return pd.DataFrame(index=hypsometric_bins.index, data=np.vstack([fitted, bins["count"]]).T,
                        columns=["value", "count"])


def calculate_hypsometry_area(ddem_bins: pd.Series | pd.DataFrame, ref_dem: Any,
                              pixel_size: float | tuple[float, float], timeframe: str = "reference") -> pd.Series:
    """Area (map units squared) in each elevation bin (upstream's); a dask DEM is counted out of core.

    ``timeframe``: ``reference`` bins the reference elevation, ``nonreference`` the elevation
    minus the change (interpolated along the bins), ``mean`` the elevation minus half of it.
    The reference DEM must have no void.
    """
    if timeframe not in ("reference", "nonreference", "mean"):
        raise InputError(f"timeframe={timeframe!r} is invalid; choose 'reference', 'nonreference' or 'mean'")
    series = ddem_bins["value"] if isinstance(ddem_bins, pd.DataFrame) else ddem_bins
    if isinstance(ref_dem, np.ndarray):
        z = da.from_array(np.ma.filled(np.ma.asarray(ref_dem).astype(np.float64), np.nan))
    else:
        z = as_lazy(ref_dem, "ref_dem")
    edges = np.r_[[series.index.left[0]], series.index.right].astype(np.float64)
    if timeframe != "reference":
        if np.isnan(series.values).any():
            raise InputError("the dDEM bins have NaNs; fill them first (interpolate_hypsometric_bins)")
        mids, vals = np.asarray(series.index.mid, dtype=np.float64), np.asarray(series.values, dtype=np.float64)
        change = da.map_blocks(extrapolated, z, xp=mids, fp=vals, dtype=np.float64)
        z = z - (change / 2 if timeframe == "mean" else change)
    counts, nans = da.compute(da.histogram(z, bins=edges)[0], da.isnan(z).sum())
    if int(nans):
        raise InputError(f"the reference DEM has {int(nans)} voids; calculate_hypsometry_area needs a void-free DEM")
    area = pixel_size[0] * pixel_size[1] if isinstance(pixel_size, tuple) else pixel_size**2
    return pd.Series(index=series.index, data=np.asarray(counts) * area)


def extrapolated(x: np.ndarray, xp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """Piecewise-linear interpolation through ``(xp, fp)`` (increasing ``xp``, two points or more),
    extended linearly beyond both ends (scipy's ``interp1d(fill_value="extrapolate")``).

    Examples
    --------
    >>> extrapolated(np.array([-1.0, 0.5, 3.0]), np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.0, 4.0])).tolist()
    [-1.0, 0.5, 7.0]
    """
    y = np.interp(x, xp, fp)
    lo, hi = x < xp[0], x > xp[-1]
    y[lo] = fp[0] + (x[lo] - xp[0]) * (fp[1] - fp[0]) / (xp[1] - xp[0])
    y[hi] = fp[-1] + (x[hi] - xp[-1]) * (fp[-1] - fp[-2]) / (xp[-1] - xp[-2])
    return y
