"""Applying a fitted correction in its frame (the reference's CRS) to a DEM in any CRS or onto
another grid: the steps become :class:`xdem.warp.FrameOp` s, merged and resampled once by
:func:`xdem.warp.warp_dem`.

A step is either *frame-defined* (a translation, a ramp of the coordinates: it says what
happens at each point of the frame, :meth:`Coreg._frame_op`) or *frame-free* (it only looks
at elevation values and at bias variables given on the DEM's grid, :meth:`Coreg._frame_free`:
the same on any grid). Anything else (along-track coordinates, slopes measured in the DEM's
own horizontal units) cannot be applied outside its frame, and says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import xarray as xr

from xdem.errors import InputError
from xdem.warp import FrameOp, Grid, NotMergeable, same_crs, warp_dem

if TYPE_CHECKING:  # the estimators import this module; it needs only their methods
    from xdem.coreg.base import Coreg

__all__ = ["frame_of", "needs_frame_route", "apply_in_frame"]


def frame_of(coreg: Coreg) -> str | None:
    """CRS the (fitted) correction is defined in, or ``None`` (loaded from an old JSON
    document without ``crs_``: then applied in the CRS of the DEM it is applied to)."""
    for step in coreg.steps:
        crs = vars(step).get("crs_")
        if crs is not None:
            return str(crs)
    return None


def needs_frame_route(coreg: Coreg, dem: xr.DataArray, target: Grid | None) -> bool:
    """Whether ``coreg`` cannot be applied to ``dem`` along ``dem``'s own axes: ``dem`` is in
    another CRS than the correction's frame, or the output is asked on another grid."""
    own = Grid.of(dem)
    frame = frame_of(coreg)
    return (frame is not None and not same_crs(frame, own.crs)) or (target is not None and not target.same_as(own))


def apply_in_frame(
    coreg: Coreg, dem: xr.DataArray, bias_vars: dict[str, xr.DataArray], target: Grid | None
) -> xr.DataArray:
    """Lazily apply a fitted ``coreg`` to ``dem`` through its frame, onto ``target`` (default:
    ``dem``'s grid). Consecutive frame-defined steps are merged into one warp (one
    resampling); a frame-free step in between is applied on the grid at hand."""
    frame = frame_of(coreg) or Grid.of(dem).crs
    resampling = "bilinear"

    def onto_output(current: xr.DataArray, op: FrameOp) -> xr.DataArray:
        """``current`` moved by ``op`` onto the output grid (one warp; none when nothing changes)."""
        grid = target if target is not None else Grid.of(current)
        if op.is_identity and grid.same_as(Grid.of(current)):
            return current
        if op.is_translation and not any(op.shift[:2]) and grid.same_as(Grid.of(current)):
            # a vertical shift is the same in any CRS: no warp (which would lose edge pixels)
            shifted: xr.DataArray = (current + op.shift[2]).assign_attrs(current.attrs)
            return shifted
        return warp_dem(current, grid=grid, op=op, resampling=resampling)

    current = dem
    pending = FrameOp(frame)
    for step in coreg.steps:
        op = step._frame_op()
        if op is not None:
            try:
                pending = pending.then(op)
            except NotMergeable:  # a rotation after a ramp: resample once more, then go on
                current, pending = onto_output(current, pending), FrameOp(frame).then(op)
            resampling = step.resampling or resampling
            continue
        # later steps run on the output grid: a step needing the frame works there if it is in the frame
        current, pending = onto_output(current, pending), FrameOp(frame)
        if not step._frame_free() and not same_crs(frame, Grid.of(current).crs):
            raise InputError(
                f"{type(step).__name__} uses map coordinates or horizontal distances, so it applies only to a DEM "
                f"in the CRS it was fitted in ({frame}), but this DEM is in {Grid.of(current).crs}; reproject the "
                "DEM into that CRS first (e.g. gdalwarp -t_srs), or apply with grid=<the reference> (CLI: --grid ref)"
            )
        current = step._apply(current, bias_vars, True)
    return onto_output(current, pending)
