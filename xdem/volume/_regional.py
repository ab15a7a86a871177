"""Normalised regional hypsometric filling (upstream's ``get_regional_hypsometric_signal`` and
``norm_regional_hypsometric_interpolation``), out of core.

The regional signal: each glacier's elevation range cut in ``n_bins`` equal bins, the median
change in each, both axes scaled to 0-1 per glacier, averaged over the glaciers weighted by the
valid pixels. The filling: per glacier, the signal is laid over its elevation range, scaled
(``a * signal + b``, weighted least squares on its bins' medians, weights
``std / sqrt(count)``) and its voids take the scaled signal at their elevation. Every per-glacier
number comes from grouped passes (:mod:`xdem.volume._glaciers`); the fill is one lazy pointwise map.
The weights come from float sums whose rounding depends on the chunking; they are rounded to
6 significant digits so the fit, and the filled values, do not.
"""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np
import pandas as pd

from xdem.errors import InputError
from xdem.volume._binning import bin_edges
from xdem.volume._glaciers import Bins, Curves, GlacierStats, binned_stats, glacier_stats, model_values
from xdem.volume._hypsometry import fill_voids, prepare
from xdem.volume._inputs import give_back

__all__ = ["get_regional_hypsometric_signal", "norm_regional_hypsometric_interpolation", "regional_signal_of"]


def _stats(dh: da.Array, z: da.Array, labels: da.Array) -> GlacierStats:
    stats = glacier_stats(labels, dh, z)
    if stats.labels.size == 0:
        raise InputError("the glacier index map has no glacier (no value > 0) on the dDEM; check the outlines "
                         "overlap the dDEM (and their CRS)")
    voids = stats.n_pixels - stats.n_zvalid
    if voids.any():
        raise InputError(f"the reference DEM has {int(voids.sum())} voids on the glaciers; it must be void-free "
                         "there (fill it first)")
    return stats


def regional_signal_of(dh: da.Array, z: da.Array, labels: da.Array, stats: GlacierStats, *, n_bins: int = 20,
                       min_coverage: float = 0.05) -> pd.DataFrame:
    """The regional signal table from the aligned arrays and their glacier statistics."""
    keep = (stats.n_pixels >= 10) & (stats.coverage >= min_coverage) & (stats.n_inlier > 0)
    bins = Bins.of(stats.labels[keep], [bin_edges(a, b, n_bins, "count")
                                        for a, b in zip(stats.zmin_inlier[keep], stats.zmax_inlier[keep])])
    s = binned_stats(labels, dh, z, bins)
    values = s.median.reshape(-1, n_bins).T if bins.n_groups else np.zeros((n_bins, 0))
    counts = s.count.reshape(-1, n_bins).T.astype(np.float64) if bins.n_groups else np.zeros((n_bins, 0))
    with np.errstate(invalid="ignore", divide="ignore"):
        lo, hi = np.nanmin(values, axis=0, initial=np.inf), np.nanmax(values, axis=0, initial=-np.inf)
        values = (values - lo) / (hi - lo)
        w_mean = np.nansum(values * counts, axis=1) / np.nansum(counts, axis=1)
    columns = {"w_mean": w_mean}
    for name, func in (("median", np.nanmedian), ("std", np.nanstd)):
        columns[name] = _across(func, values)
    for name, q in (("sigma-1-lower", 16), ("sigma-1-upper", 84), ("sigma-2-lower", 2.5), ("sigma-2-upper", 97.5)):
        columns[name] = _across(lambda v, q=q, axis=1: np.nanpercentile(v, q, axis=axis), values)
    columns["count"] = np.nansum(counts, axis=1).astype(int)
    return pd.DataFrame(data=columns, index=pd.IntervalIndex.from_breaks(np.linspace(0, 1, n_bins + 1)))


def _across(func: Any, values: np.ndarray) -> np.ndarray:
    """``func(values, axis=1)`` with NaN for rows without a value (and no warning)."""
    out = np.full(values.shape[0], np.nan)
    rows = np.isfinite(values).any(axis=1)
    if rows.any():
        out[rows] = func(values[rows], axis=1)
    return out


def get_regional_hypsometric_signal(ddem: Any, ref_dem: Any, glacier_index_map: Any, n_bins: int = 20,
                                    min_coverage: float = 0.05) -> pd.DataFrame:
    """The normalised regional hypsometric signal (upstream's name, arguments and table).

    Glaciers of at least 10 pixels and ``min_coverage`` of valid pixels count; the reference DEM
    must be void-free on the glaciers.

    Returns
    -------
    pandas.DataFrame
        Indexed by ``n_bins`` intervals of normalised elevation (0-1): ``w_mean`` (the signal),
        ``median``, ``std``, ``sigma-1-lower``/``upper`` (16th/84th percentiles),
        ``sigma-2-lower``/``upper`` (2.5th/97.5th) across glaciers, and ``count`` (pixels).
    """
    dh, z, labels = prepare(ddem, ref_dem, glacier_index_map, index_name="glacier_index_map")
    return regional_signal_of(dh, z, labels, _stats(dh, z, labels), n_bins=n_bins, min_coverage=min_coverage)


def _round_sig(x: np.ndarray, digits: int = 6) -> np.ndarray:
    return np.array([float(f"{v:.{digits}g}") for v in x])


def _scaled_curve(signal: pd.Series, zmin: float, zmax: float, values: np.ndarray, counts: np.ndarray,
                  stds: np.ndarray, min_elevation_range: float) -> tuple[np.ndarray, np.ndarray] | None:
    """The signal scaled to one glacier's bins (upstream's weighted linear fit), or None."""
    mids = np.asarray(signal.index.mid, dtype=np.float64) * (zmax - zmin) + zmin
    full = np.isfinite(values)
    step = mids[1] - mids[0] if mids.size > 1 else 0.0
    if step <= 0 or full.sum() / mids.size < min_elevation_range or np.count_nonzero(full) < 2:
        return None
    sig = np.asarray(signal.values, dtype=np.float64)
    ok = full & np.isfinite(sig)
    if np.count_nonzero(ok) < 2:
        return None
    sigma = _round_sig(stds[ok] / np.sqrt(counts[ok]))
    sigma[sigma == 0.0] = 1e-8
    design = np.column_stack([sig[ok], np.ones(np.count_nonzero(ok))]) / sigma[:, None]
    (a, b), *_ = np.linalg.lstsq(design, values[ok] / sigma, rcond=None)
    knots = np.isfinite(sig)
    return mids[knots], a * sig[knots] + b


def norm_regional_hypsometric_interpolation(voided_ddem: Any, ref_dem: Any, glacier_index_map: Any,
                                            min_coverage: float = 0.1, regional_signal: pd.DataFrame | None = None,
                                            min_elevation_range: float = 0.33, idealized_ddem: bool = False) -> Any:
    """Fill each glacier's voids with the regional signal scaled to it (upstream's name and arguments).

    Glaciers under ``min_coverage`` of valid pixels, or whose bins with values span less than
    ``min_elevation_range`` of their elevation range, are left as they are. With
    ``idealized_ddem`` every glacier pixel takes the scaled signal (for error assessments).

    Returns
    -------
    numpy.ndarray, dask.array.Array or xarray.DataArray
        As ``voided_ddem`` came, NaN where still void.
    """
    dh, z, labels = prepare(voided_ddem, ref_dem, glacier_index_map, index_name="glacier_index_map")
    stats = _stats(dh, z, labels)
    if regional_signal is None:
        regional_signal = regional_signal_of(dh, z, labels, stats)
    signal = regional_signal["w_mean"]
    n = len(signal)
    keep = (stats.coverage >= min_coverage) & (stats.n_inlier > 0) & (stats.zmax_all > stats.zmin_all)
    edges = []
    for zmin, zmax in zip(stats.zmin_all[keep], stats.zmax_all[keep]):
        mids = np.asarray(signal.index.mid, dtype=np.float64) * (zmax - zmin) + zmin
        step = mids[1] - mids[0]
        edges.append(np.r_[mids[0] - step / 2, mids + step / 2])
    bins = Bins.of(stats.labels[keep], edges)
    s = binned_stats(labels, dh, z, bins)
    curves = {}
    for i, label in enumerate(bins.labels):
        g = slice(i * n, (i + 1) * n)
        j = int(np.searchsorted(stats.labels, label))
        curve = _scaled_curve(signal, stats.zmin_all[j], stats.zmax_all[j], s.median[g], s.count[g].astype(float),
                              s.std[g], min_elevation_range)
        if curve is not None and curve[0].size >= 2:
            curves[int(label)] = curve
    model = model_values(labels, z, Curves.of(curves))
    out = da.where(da.isfinite(model), model, dh) if idealized_ddem else fill_voids(dh, model)
    return give_back(out, voided_ddem, masked=False)
