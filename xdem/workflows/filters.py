"""Outlier filters applied before any fit: slope limits and an NMAD filter on ``dh`` before.

``xdem coreg --min-slope / --max-slope / --nmad-filter K`` build, with :func:`filter_mask`, one
lazy boolean mask on the reference grid: the stable mask (``inlier_mask`` and ``exclude_mask``)
AND the slope of REF within the limits AND ``|dh - median(dh)| <= K * NMAD(dh)``, where
``dh = tba - ref`` before the coregistration. That mask is what the method fits on, whatever the
method (it is passed as the fit's ``inlier_mask``); the statistics, the verdict and the report
keep the stable mask alone, so that "before" and "after" describe the same terrain as without
filters. The median and NMAD of ``dh`` come from one reproducible subsample of the stable pixels
(one pass, which also counts exactly the stable pixels and those within the slope limits).

With points on one side, :func:`filter_points` is the same rule at the points: which points
the fit uses, the statistics keeping every point (see its notes).

Examples
--------
>>> import xdem
>>> ref, tba, _ = xdem.examples.example_pair()
>>> mask, record = filter_mask(ref, tba, filters=OutlierFilters(max_slope=40.0, nmad_filter=3.0))
>>> mask.shape == ref.shape, record["max_slope_deg"], record["nmad_filter"]
(True, 40.0, 3.0)
>>> 0 < record["kept_by_slope"] < record["stable_pixels"]
True
"""

from __future__ import annotations

from dataclasses import dataclass

import dask.array as da
import numpy as np
import xarray as xr

from xdem.coreg._data import PointFitData
from xdem.coreg._windows import terrain_at_windows
from xdem.errors import InputError, NotEnoughDataError
from xdem.io.grid import align_pair, local_metric_crs, reproject_to_crs, signed_resolution
from xdem.kernels.interp import FIT_INTERPOLATION
from xdem.kernels.robust import nmad
from xdem.masks import stable_mask_like
from xdem.points.bucket import POSITION_QUANTUM, dem_at_points, pixel_positions
from xdem.sampling import sample_valid
from xdem.terrain.attributes import get_terrain_attribute
from xdem.typing import MaskLike
from xdem.workflows.document import FiltersRecord

__all__ = ["OutlierFilters", "filter_mask", "filter_points", "usable_mask", "FILTER_SUBSAMPLE"]

#: Pixels of a fully valid grid drawn for the median and NMAD of ``dh`` before (the threshold
#: of ``--nmad-filter``): enough for a relative error of the NMAD well under 1 %.
FILTER_SUBSAMPLE = 500_000


@dataclass(frozen=True, kw_only=True)
class OutlierFilters:
    """Which pixels to leave out of the fit, besides the masks.

    Parameters
    ----------
    min_slope, max_slope
        Keep pixels whose slope of REF (degrees, Horn) is within these limits (``None``: no
        limit). Pixels whose slope is unknown (the DEM's edges, next to nodata) are left out
        when a limit is given.
    nmad_filter
        Keep pixels with ``|dh - median(dh)| <= nmad_filter * NMAD(dh)``, ``dh = tba - ref``
        before the coregistration (``None``: no filter). Must be > 0.

    Examples
    --------
    >>> OutlierFilters(max_slope=40).active, OutlierFilters().active
    (True, False)
    """

    min_slope: float | None = None
    max_slope: float | None = None
    nmad_filter: float | None = None

    @property
    def active(self) -> bool:
        """Whether any filter is set."""
        return any(v is not None for v in (self.min_slope, self.max_slope, self.nmad_filter))

    def check(self) -> None:
        """Raise :class:`~xdem.errors.InputError` for limits that keep nothing or are not numbers."""
        for name, v in (("min_slope", self.min_slope), ("max_slope", self.max_slope)):
            if v is not None and not 0 <= float(v) <= 90:
                raise InputError(f"{name} must be a slope in degrees between 0 and 90, got {v}")
        if self.min_slope is not None and self.max_slope is not None and self.min_slope >= self.max_slope:
            raise InputError(f"min_slope ({self.min_slope}) must be below max_slope ({self.max_slope})")
        if self.nmad_filter is not None and not float(self.nmad_filter) > 0:
            raise InputError(f"nmad_filter must be > 0 (a number of NMADs), got {self.nmad_filter}")


def _slope_limits(filters: OutlierFilters) -> tuple[float, float] | None:
    """``(lo, hi)`` of the slope limits (infinite when one is not given); ``None`` without any."""
    if filters.min_slope is None and filters.max_slope is None:
        return None
    return (-np.inf if filters.min_slope is None else float(filters.min_slope),
            np.inf if filters.max_slope is None else float(filters.max_slope))


def _limits_record(filters: OutlierFilters) -> FiltersRecord:
    """The limits as the JSON document records them."""
    return {"min_slope_deg": None if filters.min_slope is None else float(filters.min_slope),
            "max_slope_deg": None if filters.max_slope is None else float(filters.max_slope),
            "nmad_filter": None if filters.nmad_filter is None else float(filters.nmad_filter)}


def _metric(ref: xr.DataArray) -> xr.DataArray:
    """``ref`` on the grid the fit works on (a geographic REF: the UTM zone of its centre), as
    :func:`xdem.coreg._data.prepare_pair` brings it, so that the mask is on that grid."""
    if ref.rio.crs is not None and ref.rio.crs.is_geographic:
        return reproject_to_crs(ref, local_metric_crs(ref))
    return ref


def filter_mask(
    ref: xr.DataArray,
    tba: xr.DataArray,
    *,
    filters: OutlierFilters,
    inlier_mask: MaskLike = None,
    exclude_mask: MaskLike = None,
    random_state: int | None = None,
    subsample: int = FILTER_SUBSAMPLE,
) -> tuple[xr.DataArray, FiltersRecord]:
    """The mask a fit uses with ``filters`` (lazy, on REF's fitting grid) and what it did.

    Parameters
    ----------
    ref, tba
        The opened DEMs (:func:`xdem.open_dem`); ``tba`` is brought onto ``ref``'s grid lazily.
    filters
        The limits (:class:`OutlierFilters`).
    inlier_mask, exclude_mask
        The stable terrain, as for :meth:`xdem.coreg.Coreg.fit`.
    random_state
        Seed of the subsample giving the median and NMAD of ``dh``.
    subsample
        Pixels of a fully valid grid drawn for them.

    Returns
    -------
    mask : xarray.DataArray
        Boolean, lazy, True where the fit may use a pixel; pass it as the fit's ``inlier_mask``.
    record : dict
        For the JSON document: the limits, ``stable_pixels`` (exact count of stable pixels
        valid in both DEMs), ``kept_by_slope`` (exact, of those), ``dh_median``, ``dh_nmad`` and
        the kept ``dh_range`` of the NMAD filter (on ``sampled`` pixels), ``kept_fraction_sampled``
        (fraction of the sampled pixels every filter keeps).

    Raises
    ------
    xdem.errors.InputError
        Invalid limits (:meth:`OutlierFilters.check`).
    xdem.errors.NotEnoughDataError
        No stable pixel valid in both DEMs.
    """
    filters.check()
    base = _metric(ref)
    base, moved = align_pair(base, tba)
    if moved.data.chunks != base.data.chunks:
        moved = moved.chunk(dict(zip(("y", "x"), base.data.chunks)))
    stable = stable_mask_like(base, inlier_mask=inlier_mask, exclude_mask=exclude_mask)
    dh = moved.data - base.data
    valid = stable & da.isfinite(dh)
    keep = valid
    slope = None
    limits = _slope_limits(filters)
    if limits is not None:
        lo, hi = limits
        slope = get_terrain_attribute(base, "slope").data
        keep = keep & (slope >= lo) & (slope <= hi)  # NaN slope: False, left out
    arrays = {"dh": dh} if slope is None else {"dh": dh, "slope": slope}
    sample = sample_valid(valid, arrays, subsample=subsample, random_state=random_state,
                          what="the outlier filters", extra_counts={"kept_by_slope": keep})
    values = sample["dh"]
    med = float(np.median(values)) if values.size else None
    spread = float(nmad(values)) if values.size else None
    record: FiltersRecord = {
        **_limits_record(filters),
        "applied_to": "the fit only (statistics, verdict and report use the stable mask)",
        "stable_pixels": int(sample.n_valid),
        "kept_by_slope": int(sample.counts["kept_by_slope"]),
        "sampled": int(values.size),
        "dh_median": med,
        "dh_nmad": spread,
        "dh_range": None,
    }
    kept_sampled = np.ones(values.size, dtype=bool)
    if slope is not None and values.size:
        kept_sampled &= (sample["slope"] >= lo) & (sample["slope"] <= hi)
    if filters.nmad_filter is not None and med is not None and spread is not None:
        k = float(filters.nmad_filter)
        lo_dh, hi_dh = med - k * spread, med + k * spread
        record["dh_range"] = [lo_dh, hi_dh]
        keep = keep & (dh >= lo_dh) & (dh <= hi_dh)
        kept_sampled &= (values >= lo_dh) & (values <= hi_dh)
    record["kept_fraction_sampled"] = float(kept_sampled.mean()) if values.size else None
    return _on(keep, base), record


def filter_points(data: PointFitData, *, filters: OutlierFilters) -> tuple[np.ndarray, FiltersRecord]:
    """Which points a fit with ``filters`` uses, and what it did: :func:`filter_mask` at the points.

    One pass over the chunks holding points (:func:`xdem.points.dem_at_points`) gives, at each
    point, the DEM as the fit reads it (4-point Lagrange at the point's exact position, NaN
    outside the masks, as :meth:`xdem.coreg._point_sample.PointSample.dh`) and, with a slope limit,
    a 4 x 4 window around it, from which the slope of the DEM pixel holding the point (the
    nearest pixel centre: Horn, 3 x 3, the values of :func:`xdem.terrain.slope`) is taken. A
    point is *stable* when ``dh = tba - ref`` is finite there (inside the DEM, off nodata,
    inside the masks). The median and NMAD of ``dh`` are exact over the stable points, as
    :func:`filter_mask`'s are over the stable pixels (not only those within the slope limits).

    Parameters
    ----------
    data
        The DEM and the points as the fit prepares them
        (:class:`xdem.coreg._data.PointFitData`, :func:`xdem.coreg._data.prepare_points`).
    filters
        The limits (:class:`OutlierFilters`).

    Returns
    -------
    keep : numpy.ndarray
        Boolean, one per point of ``data.points``: stable and within every filter.
    record : dict
        For the JSON document: the limits, ``points`` (read), ``stable_points``,
        ``kept_by_slope`` (stable points within the slope limits), ``dh_median``, ``dh_nmad``
        and the kept ``dh_range`` of the NMAD filter (over the stable points), ``kept_points``
        (every filter) and ``kept_fraction`` (of the stable points); all exact.

    Raises
    ------
    xdem.errors.InputError
        Invalid limits (:meth:`OutlierFilters.check`).
    xdem.errors.NotEnoughDataError
        No stable point, or none left by the filters.

    Examples
    --------
    >>> import geopandas as gpd, numpy as np, xdem
    >>> from xdem.coreg._data import prepare_points
    >>> ref, tba, _ = xdem.examples.example_pair()
    >>> x, y = np.meshgrid(ref.x.values[20:380:10], ref.y.values[20:380:10])
    >>> z = ref.sel(x=x[0], y=y[:, 0]).values.astype(float)
    >>> pts = gpd.GeoDataFrame({"z": z.ravel()}, geometry=gpd.points_from_xy(x.ravel(), y.ravel()), crs=ref.rio.crs)
    >>> keep, record = filter_points(prepare_points(pts, tba), filters=OutlierFilters(max_slope=20.0))
    >>> record["points"], bool(record["kept_by_slope"] == record["kept_points"] == keep.sum() < record["stable_points"])
    (1296, True)
    """
    filters.check()
    pts, limits = data.points, _slope_limits(filters)
    prow, pcol = pixel_positions(data.dem, pts.x, pts.y)
    values, windows, _ = dem_at_points(data.values, prow, pcol, resampling=FIT_INTERPOLATION,
                                       half=None if limits is None else 1)
    dh = values - pts.z if data.points_are_ref else pts.z - values
    del values
    keep = np.isfinite(dh)
    stable = int(keep.sum())
    if not stable:
        raise NotEnoughDataError(
            f"outlier filters: none of the {pts.count} points falls on a valid DEM pixel; check that the points "
            f"overlap the DEM (points CRS {pts.source_crs}, DEM CRS {data.dem.rio.crs}), its nodata value and the masks")
    if limits is not None:
        assert windows is not None
        res_x, res_y = signed_resolution(data.dem)
        slope = _slope_at_points(windows, prow, pcol, res_x=res_x, res_y=res_y)
        del windows
        keep &= (slope >= limits[0]) & (slope <= limits[1])  # NaN slope: False, left out
    del prow, pcol
    values_dh = dh[np.isfinite(dh)]
    med, spread = float(np.median(values_dh)), float(nmad(values_dh))
    del values_dh
    record: FiltersRecord = {
        **_limits_record(filters),
        "applied_to": "the fit only (statistics and report use every point)",
        "slope_at": "the DEM pixel holding each point (Horn, as xdem.terrain.slope)",
        "points": pts.count,
        "stable_points": stable,
        "kept_by_slope": int(keep.sum()),
        "dh_median": med,
        "dh_nmad": spread,
        "dh_range": None,
    }
    if filters.nmad_filter is not None:
        k = float(filters.nmad_filter)
        lo_dh, hi_dh = med - k * spread, med + k * spread
        record["dh_range"] = [lo_dh, hi_dh]
        keep &= (dh >= lo_dh) & (dh <= hi_dh)
    kept = int(keep.sum())
    record["kept_points"] = kept
    record["kept_fraction"] = kept / stable
    if not kept:
        raise NotEnoughDataError(f"the outlier filters keep none of the {stable} points on valid DEM pixels "
                                 f"({_describe(record)}); widen the limits")
    return keep, record


def _describe(record: FiltersRecord) -> str:
    """The limits of a filters record, e.g. ``slope <= 30, |dh - median| <= 3 NMAD``."""
    parts = [f"slope >= {record['min_slope_deg']:g}" if record["min_slope_deg"] is not None else "",
             f"slope <= {record['max_slope_deg']:g}" if record["max_slope_deg"] is not None else "",
             f"|dh - median| <= {record['nmad_filter']:g} NMAD" if record["nmad_filter"] is not None else ""]
    return ", ".join(p for p in parts if p)


#: Points whose 3 x 3 neighbourhoods are gathered at once by :func:`_slope_at_points`.
_SLOPE_BATCH = 1_000_000


def _slope_at_points(windows: np.ndarray, prow: np.ndarray, pcol: np.ndarray, *, res_x: float,
                     res_y: float) -> np.ndarray:
    """Slope (degrees, Horn) of the pixel holding each point, from the 4 x 4 windows
    :func:`xdem.points.dem_at_points` cut with ``half=1``.

    A window starts at ``floor(q) - 1``, ``q`` the position rounded as the tasks round it
    (:data:`xdem.points.bucket.POSITION_QUANTUM`); the pixel holding the point is
    ``floor(q + 0.5)``, one of the window's two middle rows (columns), so its 3 x 3
    neighbourhood is in the window: rows ``d .. d + 2`` with ``d = floor(q + 0.5) - floor(q)``.
    """
    out = np.full(len(prow), np.nan)
    three = np.arange(3)
    for s in range(0, len(prow), _SLOPE_BATCH):
        e = min(s + _SLOPE_BATCH, len(prow))
        offsets = []
        for pos in (prow[s:e], pcol[s:e]):
            q = np.round(pos * POSITION_QUANTUM) / POSITION_QUANTUM
            d = np.floor(q + 0.5) - np.floor(q)
            d[~np.isfinite(d)] = 0  # a point in no chunk: its window is all NaN
            offsets.append(d.astype(np.int64)[:, None] + three)
        rows, cols = offsets
        around = windows[s:e][np.arange(e - s)[:, None, None], rows[:, :, None], cols[:, None, :]]
        out[s:e] = terrain_at_windows(around, 1, res_x=res_x, res_y=res_y, method="horn")[0]
    return out


def usable_mask(ref: xr.DataArray, tba: xr.DataArray, *, inlier_mask: MaskLike = None,
                exclude_mask: MaskLike = None) -> xr.DataArray:
    """Lazy boolean mask on REF's fitting grid: stable (the masks) and valid in both DEMs,
    the pixels a fit without filters may use (``xdem coreg --stable-mask-out``).

    Examples
    --------
    >>> import xdem
    >>> ref, tba, _ = xdem.examples.example_pair()
    >>> m = usable_mask(ref, tba)
    >>> m.dtype.name, bool(m.any())
    ('bool', True)
    """
    base, moved = align_pair(_metric(ref), tba)
    if moved.data.chunks != base.data.chunks:
        moved = moved.chunk(dict(zip(("y", "x"), base.data.chunks)))
    keep = stable_mask_like(base, inlier_mask=inlier_mask, exclude_mask=exclude_mask)
    keep = keep & da.isfinite(base.data) & da.isfinite(moved.data)
    return _on(keep, base)


def _on(keep: da.Array, base: xr.DataArray) -> xr.DataArray:
    mask = xr.DataArray(keep, dims=("y", "x"), coords={"y": base["y"], "x": base["x"]}, name="fit_mask")
    out: xr.DataArray = mask.rio.write_crs(base.rio.crs).rio.write_transform(base.rio.transform())
    return out
