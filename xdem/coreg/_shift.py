"""Translating a DEM lazily (:func:`shift_dem`) and the matrix of a translation: the apply side
of every translation, used by the estimators, the pipeline and the window sampler alike.
This module imports nothing from :mod:`xdem.coreg`."""

from __future__ import annotations

import math

import numpy as np
import xarray as xr
from affine import Affine

from xdem.errors import InputError
from xdem.io.grid import dask_data, get_transform, shift_in_pixels, with_transform
from xdem.kernels.interp import RESAMPLINGS, footprint, shift_block_kernel
from xdem.overlap import map_overlap_nan

__all__ = ["shift_dem", "translation_matrix", "check_resampling"]


def translation_matrix(shift_x: float, shift_y: float, shift_z: float) -> np.ndarray:
    """4 x 4 homogeneous matrix of a translation."""
    m = np.eye(4)
    m[:3, 3] = (shift_x, shift_y, shift_z)
    return m


def check_resampling(resampling: str) -> str:
    """``resampling`` if it is a known interpolation name, else a clear :class:`~xdem.errors.InputError`."""
    if resampling not in RESAMPLINGS:
        raise InputError(f"resampling must be one of {', '.join(RESAMPLINGS)}, got {resampling!r}")
    return resampling


def shift_dem(
    dem: xr.DataArray,
    *,
    shift_x: float,
    shift_y: float,
    shift_z: float = 0.0,
    resampling: str = "bilinear",
    resample: bool = True,
) -> xr.DataArray:
    """Lazily translate a DEM: ``out(x, y) = dem(x - shift_x, y - shift_y) + shift_z``.

    With ``resample=True`` the output is on ``dem``'s grid, computed by a NaN-local
    interpolation over ``map_overlap`` whose ``depth`` is the shift in pixels plus the
    kernel footprint (a NaN hole grows by at most the footprint). With ``resample=False``
    the data is untouched and the geotransform is moved instead.

    Examples
    --------
    >>> import xdem
    >>> dem = xdem.open_dem(xdem.examples.get_path("lidar"))
    >>> out = shift_dem(dem, shift_x=0.5, shift_y=0.0)
    >>> out.shape == dem.shape
    True
    """
    check_resampling(resampling)
    if not resample:
        out = with_transform(dem, Affine.translation(shift_x, shift_y) @ get_transform(dem))
        return out + np.asarray(shift_z, dtype=dem.dtype) if shift_z else out
    drow, dcol = shift_in_pixels(dem, shift_x, shift_y)
    data = dask_data(dem)
    if abs(drow) < 1e-12 and abs(dcol) < 1e-12:
        out_data = data
    else:
        before, after = footprint(resampling)
        depth = {
            0: min(int(math.ceil(abs(drow))) + max(before, after) + 1, max(data.shape[0] - 1, 0)),
            1: min(int(math.ceil(abs(dcol))) + max(before, after) + 1, max(data.shape[1] - 1, 0)),
        }
        out_data = map_overlap_nan(
            shift_block_kernel, data, depth=(depth[0], depth[1]), dtype=data.dtype, name="shift",
            drow=drow, dcol=dcol, resampling=resampling,
        )
    if shift_z:
        out_data = out_data + np.asarray(shift_z, dtype=data.dtype)
    shifted: xr.DataArray = dem.copy(data=out_data).rio.write_nodata(np.nan, encoded=False)
    return shifted
