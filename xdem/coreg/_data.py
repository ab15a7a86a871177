"""The data every fit works on, and nothing else: :class:`FitData`, :func:`prepare_pair`,
:func:`as_dem`, and the points a pipeline step may hand to the next (:class:`SharedPoints`).

This module imports nothing from :mod:`xdem.coreg`, so that the estimators, the pipeline and
the window sampler all depend on it and never on each other through it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, cast

import dask.array as da
import numpy as np
import xarray as xr

from xdem.errors import InputError
from xdem.io.grid import (
    align_pair,
    check_projected,
    local_metric_crs,
    reproject_to_crs,
    same_grid,
)
from xdem.io.open import open_dem
from xdem.masks import stable_mask_like
from xdem.points.read import PointSet, is_points_source, read_points
from xdem.typing import BiasVars, DEMLike, MaskLike, PointsLike

__all__ = ["FitData", "SharedPoints", "ShiftSampler", "prepare_pair", "as_dem", "PointFitData", "prepare_points"]


class ShiftSampler(Protocol):
    """The to-be-aligned side moved by a shift ``(sx, sy)`` at a sample, from cached windows, and
    the reads it made (:class:`xdem.coreg._windows.WindowSampler`, :class:`xdem.points.PointSampler`);
    ``release()`` frees the windows once the sampler's last use is done."""

    reads: int

    def __call__(self, sx: float, sy: float, /) -> np.ndarray: ...

    def release(self) -> None:
        """Free the cached windows (a later call reads them again)."""


@dataclass(frozen=True)
class SharedPoints:
    """A Nuth & Kääb subsample that later steps of a pipeline can fit on without a pass.

    ``dh()`` is ``tba`` moved by ``shift`` (the pipeline's merged translation so far, with
    the interpolation of ``apply``) minus the reference, at the sampled pixels, evaluated from
    the windows gathered by Nuth & Kääb (``sampler(shift_x, shift_y)`` gives ``tba`` there): the
    values of the lazily corrected DEM. A step may use it when it would draw the same
    subsample (``subsample`` and ``random_state`` equal); its pixels are those of the Nuth &
    Kääb draw still valid after the shift. ``last_use`` (set by the pipeline, which knows that no
    later step fits on these points: this step corrects the DEM in a way they cannot follow, or
    it is the last step) makes :meth:`dh` free the sampler's windows once read.
    """

    rows: np.ndarray
    cols: np.ndarray
    ref: np.ndarray
    sampler: ShiftSampler
    subsample: float | int
    random_state: int | None
    shift: tuple[float, float, float] = (0.0, 0.0, 0.0)
    last_use: bool = False

    def moved(self, shift: tuple[float, float, float], *, last_use: bool = False) -> SharedPoints:
        """The same points for ``tba`` moved by ``shift`` (the merged translation so far);
        ``last_use``: the step given them is the last to read them."""
        return SharedPoints(self.rows, self.cols, self.ref, self.sampler, self.subsample, self.random_state, shift,
                            last_use)

    def serves(self, subsample: float | int, random_state: int | None) -> bool:
        """Whether a step with these settings would draw this subsample."""
        return subsample == self.subsample and random_state == self.random_state

    def dh(self) -> np.ndarray:
        """``dh`` of the corrected DEM at the points (NaN where it is not valid); frees the
        sampler's windows after reading them when these are the points' ``last_use`` (a later
        call reads them again: one more pass)."""
        sx, sy, sz = self.shift
        dh: np.ndarray = self.sampler(sx, sy) + sz - self.ref
        if self.last_use:
            self.sampler.release()
        return dh


def as_dem(source: DEMLike) -> xr.DataArray:
    """Open anything :func:`xdem.open_dem` accepts, keeping an already-open DEM's chunks."""
    return open_dem(source)


@dataclass
class FitData:
    """A DEM pair on one grid, with its inlier mask and optional bias variables.

    Attributes
    ----------
    ref, tba
        DataArrays on the same grid (tba reprojected lazily if needed).
    inlier
        Lazy boolean array, True where a pixel may be used.
    bias_vars
        Name -> DataArray on the same grid (bias corrections only).
    points
        Inside a :class:`~xdem.coreg.CoregPipeline`: the subsample drawn by an earlier
        Nuth & Kääb step, able to give ``dh`` of ``tba`` at its pixels without reading the
        data again, or ``None``.
    collect_points
        Set by a pipeline when a later step could fit on this step's subsample: the step
        then keeps its points for :meth:`xdem.coreg.Coreg.pop_shared_points`.
    """

    ref: xr.DataArray
    tba: xr.DataArray
    inlier: da.Array
    bias_vars: dict[str, xr.DataArray]
    points: SharedPoints | None = None
    collect_points: bool = False

    def valid(self) -> da.Array:
        """Lazy mask: finite in both DEMs and inside the inlier mask."""
        mask: da.Array = da.isfinite(self.ref.data) & da.isfinite(self.tba.data) & self.inlier
        return mask


def prepare_pair(
    ref: DEMLike,
    tba: DEMLike,
    *,
    inlier_mask: MaskLike = None,
    exclude_mask: MaskLike = None,
    bias_vars: BiasVars | None = None,
) -> FitData:
    """Open both DEMs, bring ``tba`` onto ``ref``'s grid lazily, build the masks.

    ``inlier_mask`` marks stable pixels (True = used); ``exclude_mask`` marks unstable
    ones (e.g. glacier outlines; True/inside = not used). Both may be given.
    """
    ref_d, tba_d = as_dem(ref), as_dem(tba)
    if ref_d.rio.crs is not None and ref_d.rio.crs.is_geographic:
        # a geographic reference is coregistered in the UTM zone of its centre (metres); the
        # fitted correction records that CRS (crs_) and is applied there (xdem.warp)
        ref_d = reproject_to_crs(ref_d, local_metric_crs(ref_d))
    check_projected(ref_d, "coregistration")
    ref_d, tba_d = align_pair(ref_d, tba_d)
    if tba_d.data.chunks != ref_d.data.chunks:
        tba_d = tba_d.chunk(dict(zip(("y", "x"), ref_d.data.chunks)))
    mask = stable_mask_like(ref_d, inlier_mask=inlier_mask, exclude_mask=exclude_mask)
    bv: dict[str, xr.DataArray] = {}
    for name, var in (bias_vars or {}).items():
        v = as_dem(var)
        if not same_grid(v, ref_d):
            _, v = align_pair(ref_d, v)
        if not same_grid(v, ref_d):
            raise InputError(f"bias variable '{name}' does not cover the reference grid; give it on the same grid")
        bv[name] = v.chunk(dict(zip(("y", "x"), ref_d.data.chunks)))
    return FitData(ref=ref_d, tba=tba_d, inlier=mask, bias_vars=bv)


@dataclass
class PointFitData:
    """A DEM and a point set (either may be the reference), for the point route of ``fit``.

    Attributes
    ----------
    dem
        The DEM side (projected; its CRS is the frame of the fitted correction).
    values
        ``dem``'s lazy values with NaN outside the inlier mask (what the points read).
    points
        The point set, in ``dem``'s CRS.
    points_are_ref
        True when the points are the reference (``fit(points, dem)``), False for
        ``fit(dem, points)``.
    outlier_nmad
        Points whose ``dh`` is more than this many NMADs from the median are rejected
        (iterated, :func:`xdem.kernels.robust.nmad_inliers`); ``None`` keeps them all.
    bias_vars
        Name -> variable on ``dem``'s grid (bias corrections: interpolated at the points).
    """

    dem: xr.DataArray
    values: da.Array
    points: PointSet
    points_are_ref: bool
    outlier_nmad: float | None = 4.0
    bias_vars: dict[str, xr.DataArray] = field(default_factory=dict)


def prepare_points(
    ref: DEMLike | PointsLike,
    tba: DEMLike | PointsLike,
    *,
    inlier_mask: MaskLike = None,
    exclude_mask: MaskLike = None,
    z_column: str | None = None,
    outlier_nmad: float | None = 4.0,
    bias_vars: BiasVars | None = None,
) -> PointFitData:
    """Open the DEM side, read the points (:func:`xdem.points.read_points`) into the DEM's
    CRS, mask the DEM's values outside the inlier mask, bring ``bias_vars`` onto the DEM's
    grid. Exactly one side must be points."""
    ref_pts, tba_pts = is_points_source(ref), is_points_source(tba)
    if ref_pts and tba_pts:
        raise InputError("both inputs are points: one side of a coregistration must be a DEM")
    if outlier_nmad is not None and not float(outlier_nmad) > 0:
        raise InputError(f"outlier_nmad must be > 0 (or None to keep every point), got {outlier_nmad}")
    dem = as_dem(cast(DEMLike, tba if ref_pts else ref))
    if dem.rio.crs is not None and dem.rio.crs.is_geographic:
        dem = reproject_to_crs(dem, local_metric_crs(dem))  # metres, as prepare_pair does
    check_projected(dem, "coregistration")
    points = read_points(ref if ref_pts else tba, z_column=z_column, crs=dem.rio.crs)
    mask = stable_mask_like(dem, inlier_mask=inlier_mask, exclude_mask=exclude_mask)
    values = da.where(mask, dem.data, np.nan) if not (inlier_mask is None and exclude_mask is None) else dem.data
    if not isinstance(values, da.Array):
        values = da.from_array(np.asarray(values), chunks=-1)
    bv: dict[str, xr.DataArray] = {}
    for name, var in (bias_vars or {}).items():
        v = as_dem(var)
        if not same_grid(v, dem):
            _, v = align_pair(dem, v)
        if not same_grid(v, dem):
            raise InputError(f"bias variable '{name}' does not cover the DEM's grid; give it on the same grid")
        bv[name] = v
    return PointFitData(dem=dem, values=values, points=points, points_are_ref=ref_pts,
                        outlier_nmad=None if outlier_nmad is None else float(outlier_nmad), bias_vars=bv)
