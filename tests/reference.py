"""The reference helper: one function comparing numpy input, several dask chunkings and
schedulers for any computation on DEMs (``from reference import check_chunk_independence``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import dask
import numpy as np
import xarray as xr

__all__ = ["check_chunk_independence", "as_numpy_backed", "rechunked"]

DEFAULT_CHUNKINGS: tuple[int, ...] = (64, 128, 1000)
DEFAULT_SCHEDULERS: tuple[str, ...] = ("threads", "synchronous")


def as_numpy_backed(dem: xr.DataArray) -> xr.DataArray:
    """Same DEM with its values in memory (numpy-backed)."""
    return dem.copy(data=np.asarray(dem.values))


def rechunked(dem: xr.DataArray, chunks: int) -> xr.DataArray:
    """Same DEM re-chunked to ``chunks`` pixels a side (lazy)."""
    return dem.chunk({"y": chunks, "x": chunks})


def _flatten(result: Any) -> np.ndarray:
    if isinstance(result, xr.DataArray):
        return np.asarray(result.values, dtype=np.float64).ravel()
    if isinstance(result, dict):
        return np.concatenate([_flatten(result[k]) for k in sorted(result)])
    if isinstance(result, (list, tuple)):
        return np.concatenate([_flatten(r) for r in result]) if result else np.array([])
    return np.atleast_1d(np.asarray(result, dtype=np.float64)).ravel()


def check_chunk_independence(
    func: Callable[..., Any],
    *dems: xr.DataArray,
    chunkings: Iterable[int] = DEFAULT_CHUNKINGS,
    schedulers: Iterable[str] = DEFAULT_SCHEDULERS,
    atol: float = 1e-9,
    rtol: float = 0.0,
) -> np.ndarray:
    """Assert ``func(*dems)`` gives the same numbers for numpy input and every dask chunking
    and scheduler. Returns the numpy-input result (flattened) for further checks.

    ``func`` returns numbers, arrays, DataArrays, or dicts/lists of them; NaNs must match.
    """
    ref_result = _flatten(func(*[as_numpy_backed(d) for d in dems]))
    for chunks in chunkings:
        for scheduler in schedulers:
            with dask.config.set(scheduler=scheduler):
                got = _flatten(func(*[rechunked(d, chunks) for d in dems]))
            np.testing.assert_allclose(
                got, ref_result, atol=atol, rtol=rtol, equal_nan=True,
                err_msg=f"result differs for chunks={chunks}, scheduler={scheduler}",
            )
    return ref_result
