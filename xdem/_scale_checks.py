"""Vertical units compared through the spread of elevations (part of :func:`xdem.checks.check_inputs`).

Feet against metres (or centimetres, millimetres) scale every elevation, so also the spread
of the elevations over one area: the ratio of the two inputs' spreads (10th to 90th
percentile) on the same area is the ratio of their units, whatever the datum offset or a
real change of a few metres. Two DEMs are compared on windows over their overlap
(:func:`xdem.checks.read_windows`), points against the DEM at up to 1000 of them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from xdem._check_base import (
    SUSPICIOUS_RATIO,
    UNIT_FACTORS,
    UNIT_TOLERANCE,
    DemCheck,
    Finding,
    _fix,
    _windows,
    read_windows,
    window_ground_side,
)

if TYPE_CHECKING:  # annotations only: the point readers are not imported
    from xdem.points.read import PointSet

__all__ = ["pair_scale_finding", "scale_finding", "points_scale_finding"]


def _overlap_values(check: DemCheck, boxes: list[tuple[float, float, float, float]], crs: Any) -> np.ndarray:
    """Elevations of ``check``'s DEM in ``boxes`` (in ``crs``), its nodata NaN, times its scale."""
    import rasterio
    from rasterio.warp import transform_bounds

    with rasterio.open(check.path) as src:
        if src.crs != crs:
            boxes = [transform_bounds(crs, src.crs, *b) for b in boxes]
        values = read_windows(src, check.band, boxes)
    for value in check.nodata or ():
        if not np.isnan(value):
            values[values == value] = np.nan
    return values[np.isfinite(values)] * check.vertical_scale


def _spread(values: np.ndarray) -> float:
    lo, hi = np.percentile(values, [10, 90])
    return float(hi - lo)


def pair_scale_finding(ref: DemCheck, tba: DemCheck) -> Finding | None:
    """:func:`scale_finding` of the two DEMs' elevations in windows over their overlap."""
    import rasterio
    from rasterio.warp import transform_bounds

    with rasterio.open(ref.path) as r, rasterio.open(tba.path) as t:
        crs, rb = r.crs, r.bounds
        tb = t.bounds if t.crs == r.crs else transform_bounds(t.crs, r.crs, *t.bounds)
        # windows cheap for both: the smaller of their cheap sides (TBA's: in REF's units, roughly)
        t_side = window_ground_side(t, tba.band) * ((tb[2] - tb[0]) / (t.bounds[2] - t.bounds[0]))
        side = min(window_ground_side(r, ref.band), t_side)
    box = (max(rb[0], tb[0]), max(rb[1], tb[1]), min(rb[2], tb[2]), min(rb[3], tb[3]))
    if box[0] >= box[2] or box[1] >= box[3]:
        return None  # no overlap: said by the fit
    boxes = _windows(box, side)
    return scale_finding(_overlap_values(ref, boxes, crs), _overlap_values(tba, boxes, crs),
                         ref_name=f"REF '{ref.path}'", tba_name=f"TBA '{tba.path}'")


def scale_finding(zr: np.ndarray, zt: np.ndarray, *, ref_name: str, tba_name: str,
                  min_count: int = 500) -> Finding | None:
    """A unit mismatch (error) or a suspicious ratio (warning) of the spreads (10th to 90th
    percentile) of elevations ``zr`` of REF and ``zt`` of TBA sampled on the same area (when
    both have under a metre of relief, of their median absolute levels); ``None`` if fine or
    fewer than ``min_count`` values.

    Examples
    --------
    >>> z = np.linspace(380.0, 410.0, 1000)
    >>> scale_finding(z, z / 0.3048, ref_name="REF", tba_name="TBA").message[:40]
    'TBA looks like feet and REF like metres:'
    >>> scale_finding(z, z + 2.5, ref_name="REF", tba_name="TBA") is None
    True
    """
    if min(zr.size, zt.size) < min_count:
        return None
    sr, st = _spread(zr), _spread(zt)
    if min(sr, st) < 1.0:  # under a metre of relief: the spreads are noise; compare the levels
        sr, st = float(np.median(np.abs(zr))), float(np.median(np.abs(zt)))
        if min(sr, st) < 20.0:
            return None
    ratio = st / sr
    details = {"spread_ref": sr, "spread_tba": st, "ratio": ratio}
    numbers = (f"on their overlap TBA's elevations spread {ratio:.3g} times as much as REF's (10th-90th "
               f"percentile {st:.4g} against {sr:.4g})")
    for factor, (tba_unit, ref_unit) in UNIT_FACTORS.items():
        if abs(math.log(ratio / factor)) < math.log(UNIT_TOLERANCE):
            fix = (_fix("to_be_aligned", "vertical_scale", f"{1 / factor:.6g}") if factor > 1
                   else _fix("reference", "vertical_scale", f"{factor:.6g}"))
            odd = "TBA" if factor > 1 else "REF"
            return Finding("vertical_scale", "error", "to_be_aligned",
                           f"{tba_name} looks like {tba_unit} and {ref_name} like {ref_unit}: {numbers}, "
                           f"as {tba_unit} against {ref_unit} would; convert with {fix}, or tag {odd}'s vertical CRS "
                           f"in {max(tba_unit, ref_unit, key=lambda u: u != 'metres')}", {**details, "factor": factor})
    if not 1 / SUSPICIOUS_RATIO < ratio < SUSPICIOUS_RATIO:
        return Finding("vertical_scale", "warning", "to_be_aligned",
                       f"{numbers}: no unit factor, but are both in the same vertical units (and of the same "
                       f"area)? If not, convert with {_fix('to_be_aligned', 'vertical_scale', 'F')}", details)
    return None


def points_scale_finding(dem: DemCheck, points: PointSet, *, points_side: Literal["reference", "to_be_aligned"],
                         count: int = 1000) -> Finding | None:
    """:func:`scale_finding` of points (a :class:`~xdem.points.PointSet`, elevations already
    scaled) against the DEM of ``dem`` at up to ``count`` of them (read point by point)."""
    import rasterio

    if dem.resolution == (0.0, 0.0) or not points.count:
        return None
    with rasterio.open(dem.path) as src:
        local = points.to_crs(src.crs)
        b = src.bounds
        inside = np.flatnonzero((local.x >= b.left) & (local.x <= b.right) & (local.y >= b.bottom)
                                & (local.y <= b.top) & np.isfinite(local.z))
        idx = inside[np.linspace(0, inside.size - 1, min(count, inside.size)).astype(int)] if inside.size else inside
        values = np.array([v[0] for v in src.sample(zip(local.x[idx], local.y[idx]), indexes=dem.band)], dtype=float)
        declared = src.nodata
    for value in (*(dem.nodata or ()), *(() if declared is None else (declared,))):
        if not np.isnan(value):
            values[values == value] = np.nan
    values = values * dem.vertical_scale
    keep = np.isfinite(values)
    zp, zd = local.z[idx][keep], values[keep]
    names = {"points": f"the points '{points.name}'", "dem": f"the DEM '{dem.path}'"}
    if points_side == "reference":
        return scale_finding(zp, zd, ref_name=f"REF ({names['points']})", tba_name=f"TBA ({names['dem']})",
                             min_count=50)
    return scale_finding(zd, zp, ref_name=f"REF ({names['dem']})", tba_name=f"TBA ({names['points']})", min_count=50)
