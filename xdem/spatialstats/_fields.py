"""Inputs of the uncertainty workflow: rasters of any kind as lazy fields, and their stable masks.

A *field* is what upstream's functions take as ``dvalues``, an explanatory variable or
``errors``: a numpy array (masked values become NaN), a dask array, an
:class:`xarray.DataArray` or an :class:`xdem.DEM`. :func:`as_field` gives its 2-D data (a
numpy or dask array, float) and a function that wraps a result of the same shape back into
the input's kind (numpy in, numpy out; dask, DataArray or DEM in, the same, lazy).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dask.array as da
import numpy as np
import xarray as xr

from xdem import stats as _stats
from xdem.errors import InputError
from xdem.masks import stable_mask_like

__all__ = ["Field", "as_field", "stable_values", "lazy"]


def _is_dem(x: object) -> bool:
    return type(x).__name__ == "DEM" and hasattr(x, "to_xarray") and hasattr(x, "_like")


@dataclass(frozen=True)
class Field:
    """The data of a raster input and how to give a result back in the input's kind."""

    data: np.ndarray | da.Array
    grid: xr.DataArray | None  # the georeferenced grid, when the input had one
    source: object

    @property
    def is_numpy(self) -> bool:
        return isinstance(self.data, np.ndarray)

    def like(self, values: np.ndarray | da.Array) -> Any:
        """``values`` (the shape of the field) in the kind of the input."""
        if self.grid is not None:
            arr = self.grid.copy(data=values)
            if _is_dem(self.source):
                return self.source._like(arr)  # type: ignore[attr-defined]
            return arr
        if self.is_numpy and isinstance(values, da.Array):
            return np.asarray(values.compute())
        return values


def as_field(x: object, name: str = "dvalues") -> Field:
    """The field of ``x`` (numpy, masked, dask, DataArray or DEM), float, any number of dimensions."""
    source = x
    if _is_dem(x):
        x = x.to_xarray()  # type: ignore[attr-defined]
    grid = None
    if isinstance(x, xr.DataArray):
        grid = x if x.ndim == 2 else None
        x = x.data
    if isinstance(x, da.Array):
        data: np.ndarray | da.Array = _stats.masked_as_nan(x)
    elif isinstance(x, (np.ndarray, list, tuple, float, int, np.number)):
        data = np.ma.filled(np.ma.asarray(x, dtype=np.float64), np.nan)
    else:
        raise InputError(f"{name} must be a numpy, dask or xarray array or an xdem.DEM, got {type(source).__name__}")
    if data.dtype.kind not in "fiub":
        raise InputError(f"{name} must be numeric, got dtype {data.dtype}")
    if data.dtype.kind != "f":
        data = data.astype(np.float64)
    return Field(data=data, grid=grid, source=source)


def chunks_of(data: np.ndarray | da.Array) -> tuple | None:
    """The chunks of a dask array, ``None`` for numpy."""
    return data.chunks if isinstance(data, da.Array) else None


def lazy(data: np.ndarray | da.Array, chunks: tuple | None = None) -> da.Array:
    """``data`` as a dask array (numpy in one chunk, or on ``chunks``)."""
    if isinstance(data, da.Array):
        return data if chunks is None else data.rechunk(chunks)
    return da.from_array(data, chunks=chunks if chunks is not None else data.shape)


def _mask_array(mask: object, shape: tuple[int, ...], which: str) -> np.ndarray | da.Array:
    if _is_dem(mask):
        mask = mask.to_xarray()  # type: ignore[attr-defined]
    if isinstance(mask, xr.DataArray):
        mask = mask.data
    if not isinstance(mask, (np.ndarray, da.Array)):
        raise InputError(
            f"the {which} mask is a {type(mask).__name__}, which needs a georeferenced dvalues "
            "(an xarray.DataArray or xdem.DEM); with plain arrays give a boolean array"
        )
    if mask.shape != shape:
        raise InputError(f"the {which} mask has shape {mask.shape} but dvalues has {shape}; build it on dvalues' grid")
    return np.ma.filled(mask, False).astype(bool) if isinstance(mask, np.ndarray) else mask.astype(bool)


def stable_values(field: Field, stable_mask: object, unstable_mask: object) -> np.ndarray | da.Array:
    """The values of ``field`` on stable terrain (inside ``stable_mask``, outside ``unstable_mask``;
    ``None``: everywhere, nothing excluded), NaN elsewhere; lazy for dask."""
    if stable_mask is None and unstable_mask is None:
        return field.data
    if field.grid is not None and field.grid.rio.crs is not None:
        grid = field.grid.copy(data=lazy(field.data))
        stable: np.ndarray | da.Array = stable_mask_like(grid, inlier_mask=_unwrap(stable_mask),
                                                         exclude_mask=_unwrap(unstable_mask))
    else:
        stable = np.ones(field.data.shape, dtype=bool)
        if stable_mask is not None:
            stable = _mask_array(stable_mask, field.data.shape, "stable") & stable
        if unstable_mask is not None:
            stable = stable & ~_mask_array(unstable_mask, field.data.shape, "unstable")
    if field.is_numpy and isinstance(stable, np.ndarray):
        return np.where(stable, field.data, np.nan)
    return da.where(stable, lazy(field.data, chunks_of(field.data)), np.nan)


def _unwrap(mask: object) -> Any:
    """geoutils Vectors are read through their GeoDataFrame (``.ds``); DEMs through their DataArray."""
    if type(mask).__name__ == "Vector" and hasattr(mask, "ds"):
        return mask.ds
    if _is_dem(mask):
        return mask.to_xarray()  # type: ignore[attr-defined]
    return mask


def apply_blocks(kernel: Callable[..., np.ndarray], fields: list[Field]) -> Any:
    """``kernel(*arrays)`` elementwise over ``fields`` (broadcast), numpy eagerly or dask block by
    block on the first dask field's chunks; the result in the kind of the first field."""
    first = fields[0]
    if all(f.is_numpy for f in fields):
        return first.like(kernel(*np.broadcast_arrays(*[f.data for f in fields])))
    chunks = next(chunks_of(f.data) for f in fields if not f.is_numpy)
    arrays = [lazy(f.data, chunks) if f.data.shape == first.data.shape else f.data for f in fields]
    out = da.map_blocks(kernel, *arrays, dtype=np.float64, meta=np.array((), dtype=np.float64))
    return first.like(out)
