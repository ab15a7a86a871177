"""The data every fit works on, and nothing else: :class:`FitData`, :func:`prepare_pair`,
:func:`as_dem`, and the points a pipeline step may hand to the next (:class:`SharedPoints`).

This module imports nothing from :mod:`xdem.coreg`, so that the estimators, the pipeline and
the window sampler all depend on it and never on each other through it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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
from xdem.typing import DEMLike, MaskLike

__all__ = ["FitData", "SharedPoints", "prepare_pair", "as_dem"]


@dataclass(frozen=True)
class SharedPoints:
    """A Nuth & Kääb subsample that later steps of a pipeline can fit on without a pass.

    ``dh()`` is ``tba`` moved by ``shift`` (the pipeline's merged translation so far, with
    the interpolation of ``apply``) minus the reference, at the sampled pixels, evaluated from
    the windows gathered by Nuth & Kääb (``sampler(shift_x, shift_y)`` gives ``tba`` there): the
    values of the lazily corrected DEM. A step may use it when it would draw the same
    subsample (``subsample`` and ``random_state`` equal); its pixels are those of the Nuth &
    Kääb draw still valid after the shift.
    """

    rows: np.ndarray
    cols: np.ndarray
    ref: np.ndarray
    sampler: Callable[[float, float], np.ndarray]
    subsample: float | int
    random_state: int | None
    shift: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def moved(self, shift: tuple[float, float, float]) -> SharedPoints:
        """The same points for ``tba`` moved by ``shift`` (the merged translation so far)."""
        return SharedPoints(self.rows, self.cols, self.ref, self.sampler, self.subsample, self.random_state, shift)

    def serves(self, subsample: float | int, random_state: int | None) -> bool:
        """Whether a step with these settings would draw this subsample."""
        return subsample == self.subsample and random_state == self.random_state

    def dh(self) -> np.ndarray:
        """``dh`` of the corrected DEM at the points (NaN where it is not valid)."""
        sx, sy, sz = self.shift
        return self.sampler(sx, sy) + sz - self.ref


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
        return da.isfinite(self.ref.data) & da.isfinite(self.tba.data) & self.inlier


def prepare_pair(
    ref: DEMLike,
    tba: DEMLike,
    *,
    inlier_mask: MaskLike = None,
    exclude_mask: MaskLike = None,
    bias_vars: dict[str, DEMLike] | None = None,
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
