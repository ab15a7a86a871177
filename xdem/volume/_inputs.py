"""What the gap-filling functions accept (numpy, masked, dask, DataArray, DEM) and give back.

Every input becomes a float64 (or int32 for index maps) 2-D dask array on the chunks of the
dDEM; the result goes back as the dDEM came: computed numpy (masked where NaN) for numpy
input, lazy otherwise.
"""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np
import xarray as xr

from xdem.errors import InputError

__all__ = ["as_lazy", "as_labels", "give_back", "NUMPY_CHUNKS"]

#: Chunks given to numpy inputs (the results do not depend on them).
NUMPY_CHUNKS = 1024


def _raw(x: Any, name: str) -> Any:
    if isinstance(x, (np.ndarray, da.Array)):
        return x
    if isinstance(x, xr.DataArray):
        return x.data
    if hasattr(x, "to_xarray") and type(x).__name__ in ("DEM", "dDEM"):
        return x.to_xarray().data
    if hasattr(x, "data") and hasattr(x, "transform"):  # a geoutils Raster: its masked array
        return np.ma.asarray(x.data)
    if x is None:
        raise InputError(f"{name} is missing: pass an array, a DEM or a DataArray on the dDEM's grid")
    try:
        return np.asarray(x)
    except Exception as exc:  # noqa: BLE001 - anything numpy cannot read
        raise InputError(f"{name} must be an array, a DEM or a DataArray, got {type(x).__name__}") from exc


def as_lazy(x: Any, name: str, *, shape: tuple[int, ...] | None = None,
            chunks: tuple[tuple[int, ...], ...] | None = None) -> da.Array:
    """``x`` as a 2-D float64 dask array (masked or nodata values as NaN) of ``shape`` on ``chunks``."""
    raw = _raw(x, name)
    if isinstance(raw, np.ndarray):
        if np.ma.isMaskedArray(raw):
            raw = np.ma.filled(np.ma.asarray(raw).astype(np.float64), np.nan)
        raw = np.asarray(raw)
    raw = raw.squeeze() if raw.ndim > 2 else raw
    if raw.ndim != 2 or raw.dtype.kind not in "fiub":
        raise InputError(f"{name} must be a 2-D numeric array, got shape {raw.shape} and dtype {raw.dtype}")
    if shape is not None and tuple(raw.shape) != tuple(shape):
        raise InputError(f"{name} has shape {tuple(raw.shape)} but the dDEM has {tuple(shape)}; "
                         "bring it onto the dDEM's grid first (e.g. DEM.reproject(ddem))")
    arr = raw if isinstance(raw, da.Array) else da.from_array(raw, chunks=chunks or NUMPY_CHUNKS)
    arr = arr.astype(np.float64)
    return arr.rechunk(chunks) if chunks is not None else arr


def as_labels(x: Any, name: str, *, shape: tuple[int, ...], chunks: tuple[tuple[int, ...], ...]) -> da.Array:
    """An index map (0 outside, ``i > 0`` on glacier ``i``; booleans: True = 1) as int64 dask array."""
    arr = as_lazy(x, name, shape=shape, chunks=chunks)
    return da.where(da.isfinite(arr), arr, 0).astype(np.int64)


def give_back(result: da.Array, like: Any, *, masked: bool) -> Any:
    """``result`` in the kind of ``like``: numpy (masked where NaN if ``masked``), DataArray, or dask."""
    if isinstance(like, xr.DataArray):
        return like.copy(data=result.astype(like.dtype if like.dtype.kind == "f" else np.float64))
    if isinstance(like, da.Array):
        return result
    values = np.asarray(result.compute())
    return np.ma.masked_invalid(values) if masked else values
