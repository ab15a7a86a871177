"""Hypsometric gap filling (upstream's ``hypsometric_interpolation`` and
``local_hypsometric_interpolation``), in two stages that both run out of core:

1. grouped passes (:mod:`xdem.volume._glaciers`): per glacier its elevation range, then per
   glacier and 50 m elevation bin the exact median of the valid elevation changes; from this small
   table, one curve of elevation per glacier (bins' medians, empty bins interpolated along elevation);
2. a lazy, pointwise map: each void takes its glacier's curve at its reference elevation (the local
   variant adds the residuals to the curve, filled by IDW within 10 pixels, chunk by chunk with a
   halo of 10 pixels, :mod:`xdem.volume._idw`).

Memory is one chunk (plus a halo for the residuals) and the table, whatever the DEM's size; the
values do not depend on the chunking (medians are exact order statistics).
"""

from __future__ import annotations

import warnings
from typing import Any

import dask.array as da
import numpy as np

from xdem._check_base import InputCheckWarning
from xdem.errors import EmptyBinWarning, InputError
from xdem.volume._binning import bin_edges
from xdem.volume._glaciers import Bins, Curves, GlacierStats, binned_stats, curves_from_bins, glacier_stats, model_values
from xdem.volume._idw import idw_fill
from xdem.volume._inputs import as_labels, as_lazy, give_back

__all__ = ["hypsometric_interpolation", "local_hypsometric_interpolation", "glacier_curves", "prepare", "fill_voids"]

#: Upstream's bin size (m) of the hypsometric methods.
BIN_SIZE = 50.0
#: Upstream's search distance (pixels) of the IDW passes of the hypsometric methods.
IDW_DISTANCE = 10


def prepare(voided_ddem: Any, ref_dem: Any, index: Any, *, index_name: str = "mask") -> tuple[da.Array, ...]:
    """The dDEM, the reference elevation and the glacier index map as aligned dask arrays."""
    if ref_dem is None:
        raise InputError("ref_dem (the reference elevation) is needed by the hypsometric methods; pass the DEM "
                         "the dDEM was computed against")
    if index is None:
        raise InputError(f"{index_name} (the glacier outlines or index map) is needed by the hypsometric methods")
    dh = as_lazy(voided_ddem, "voided_ddem")
    z = as_lazy(ref_dem, "ref_dem", shape=dh.shape, chunks=dh.chunks)
    labels = as_labels(index, index_name, shape=dh.shape, chunks=dh.chunks)
    return dh, z, labels


def _check_glaciers(stats: GlacierStats, what: str) -> None:
    if stats.labels.size == 0:
        raise InputError(f"the {what} covers no pixel of the dDEM; check that the outlines or index map overlap "
                         "the dDEM (and their CRS)")
    if not stats.n_inlier.any():
        raise InputError(f"the {what} covers no pixel where both the dDEM and the reference elevation are valid; "
                         "nothing to fill from")
    voids = int((stats.n_pixels - stats.n_zvalid).sum())
    if voids:
        warnings.warn(f"the reference DEM has {voids} voids on the glaciers: no hypsometric value there (left to IDW "
                      "or NaN); give a void-free reference elevation (e.g. the later DEM, or fill it first)",
                      InputCheckWarning, stacklevel=4)


def glacier_curves(dh: da.Array, z: da.Array, labels: da.Array, *, edges_from: str = "inlier",
                   min_coverage: float = 0.0, count_threshold: int | None = None,
                   what: str = "mask") -> tuple[Curves, GlacierStats]:
    """Each glacier's hypsometric curve (50 m bins from the lowest elevation of its ``inlier`` or
    ``all`` pixels); glaciers under ``min_coverage`` or without a valid bin get none (one warning
    says how many)."""
    stats = glacier_stats(labels, dh, z)
    _check_glaciers(stats, what)
    lo, hi = (stats.zmin_inlier, stats.zmax_inlier) if edges_from == "inlier" else (stats.zmin_all, stats.zmax_all)
    keep = (stats.n_inlier > 0) & (stats.coverage >= min_coverage) & np.isfinite(lo)
    bins = Bins.of(stats.labels[keep], [bin_edges(a, b, BIN_SIZE, "fixed") for a, b in zip(lo[keep], hi[keep])])
    curves, skipped = curves_from_bins(binned_stats(labels, dh, z, bins), bins, count_threshold=count_threshold)
    left = int((~keep).sum()) + skipped
    if left:
        warnings.warn(f"{left} of {stats.labels.size} glaciers left unfilled (valid pixels under {min_coverage:.0%} "
                      "of the glacier, or no elevation bin with values)", EmptyBinWarning, stacklevel=3)
    return Curves.of(curves), stats


def fill_voids(dh: da.Array, model: da.Array) -> da.Array:
    """Lazy: the voids of ``dh`` where the model has a value take it; the rest is ``dh``."""
    return da.where(da.isnan(dh) & da.isfinite(model), model, dh)


def hypsometric_interpolation(voided_ddem: Any, ref_dem: Any, mask: Any) -> Any:
    """Fill the voids inside ``mask`` with the hypsometric curve of all the pixels of the mask.

    Upstream's function: 50 m bins of reference elevation from the lowest valid pixel of the mask,
    the median elevation change in each, empty bins interpolated (polynomial of order 3), the curve
    through the bins' middles extended linearly beyond them. Voids outside the mask stay NaN.

    Parameters
    ----------
    voided_ddem
        Elevation change with voids (NaN or masked): numpy, dask, DataArray or DEM.
    ref_dem
        Reference elevation on the same grid.
    mask
        True (or non-zero) where the curve is estimated and voids are filled.

    Returns
    -------
    numpy.ma.MaskedArray, dask.array.Array or xarray.DataArray
        As ``voided_ddem`` came (masked where still void for numpy input).
    """
    dh, z, labels = prepare(voided_ddem, ref_dem, mask)
    labels = (labels != 0).astype(np.int64)
    curves, _ = glacier_curves(dh, z, labels, edges_from="inlier")
    return give_back(fill_voids(dh, model_values(labels, z, curves)), voided_ddem, masked=True)


def local_hypsometric_interpolation(voided_ddem: Any, ref_dem: Any, mask: Any, min_coverage: float = 0.2,
                                    count_threshold: int | None = 1, nodata: float = -9999,
                                    plot: bool = False) -> Any:
    """Fill each glacier's voids with its own hypsometric curve plus the local residuals.

    Upstream's function: per glacier of the index map ``mask`` (0 off glacier) with at least
    ``min_coverage`` of valid pixels, 50 m bins from its lowest pixel, the median change in each
    (bins under ``count_threshold`` pixels left out), empty bins interpolated along elevation; the
    residuals (change minus curve) are filled by IDW within 10 pixels (zero beyond) and added to the
    curve. Valid pixels keep their values; pixels off the glaciers filled are masked (``nodata``).

    Returns
    -------
    numpy.ma.MaskedArray, dask.array.Array or xarray.DataArray
        As ``voided_ddem`` came; NaN (masked, fill value ``nodata``) off the filled glaciers.
    """
    if plot:
        raise InputError("plot=True is not available here; plot the result with matplotlib")
    dh, z, labels = prepare(voided_ddem, ref_dem, mask)
    curves, _ = glacier_curves(dh, z, labels, edges_from="all", min_coverage=min_coverage,
                               count_threshold=count_threshold)
    ideal = model_values(labels, z, curves)
    residual = idw_fill(dh - ideal, max_search_distance=IDW_DISTANCE, extrapolate=False)
    residual = da.where(da.isnan(residual), 0.0, residual)
    out = da.where(da.isfinite(ideal), da.where(da.isnan(dh), ideal + residual, dh), np.nan)
    result = give_back(out, voided_ddem, masked=True)
    if isinstance(result, np.ma.MaskedArray):
        result.fill_value = nodata
    return result
