r"""Standard error of the mean elevation change over an area of any shape (upstream 0.2.3's names).

The variance of the mean of the errors :math:`e_i \epsilon_i` (errors :math:`e_i` from the
heteroscedasticity, standardised errors :math:`\epsilon_i` of correlation :math:`\rho`) over the
:math:`n` pixels of an area is :math:`\frac{1}{n^2}\sum_{i,j} e_i e_j \rho(d_{ij})`; the number
of effective samples is :math:`n_{eff} = \bar{e}^2 / \mathrm{that}`.

* :func:`neff_exact`: the double sum, for coordinates in memory (batched: memory ``n x 256``);
* :func:`neff_hugonnet_approx`: one of the two sums on a random subset of ``subsample`` points
  (Hugonnet et al. 2022, Eq. 18);
* :func:`number_effective_samples`: a number (an area, as a disk: Rolstad et al. 2009, see
  :mod:`xdem.spatialstats.uncertainty`) or a polygon (rasterised on the errors' grid or at a
  resolution, then the approximation above, out of core);
* :func:`spatial_error_propagation`: for each area, mean error / :math:`\sqrt{n_{eff}}`.

Out of core: a polygon is rasterised block by block on its bounding window of the grid; the
subset of ``subsample`` pixels is a reproducible draw (:func:`xdem.sampling.sample_valid`, the
same for any chunking); the sum over all pixels of the area is a block-wise pass whose memory is
one block times ``subsample`` (in batches), summed exactly (integer mantissas per exponent), so
the result is identical for any chunking.

Examples
--------
>>> import numpy as np, pandas as pd
>>> params = pd.DataFrame({"model": ["spherical"], "range": [100.0], "psill": [1.0]})
>>> xy = np.stack(np.meshgrid(np.arange(0.0, 200.0, 10.0), np.arange(0.0, 200.0, 10.0)), -1).reshape(-1, 2)
>>> n = neff_exact(xy, np.ones(len(xy)), params)
>>> bool(1 < n < len(xy))
True
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import dask
import dask.array as da
import numpy as np
import xarray as xr
from affine import Affine

from xdem.errors import InputError, NotEnoughDataError
from xdem.io.grid import block_tasks, block_xy, get_transform
from xdem.masks import _read_vector, rasterize_like, read_polygons
from xdem.sampling import DEFAULT_SEED, sample_valid
from xdem.spatialstats._fields import as_field, lazy
from xdem.spatialstats.correlation import correlation_from_variogram
from xdem.spatialstats.uncertainty import neff_circular_approx_numerical
from xdem.spatialstats.variogram import VariogramParams, _components

__all__ = ["neff_exact", "neff_hugonnet_approx", "number_effective_samples", "spatial_error_propagation"]

_BATCH = 256  # rows of a distance matrix at a time
Exact = dict[int, int]  # exponent -> sum of the integer mantissas (53 bits) of the values with it


# ----------------------------------------------------------------------- exact sums
def exact_sum(values: np.ndarray) -> Exact:
    """The exact sum of float64 ``values`` as integer mantissa sums per binary exponent: merging
    such sums is exact, so a total does not depend on how the values were grouped (chunks)."""
    v = np.asarray(values, dtype=np.float64).ravel()
    v = v[v != 0]
    if not v.size:
        return {}
    m, e = np.frexp(v)
    mant = np.ldexp(m, 53).astype(np.int64)
    out: Exact = {}
    order = np.argsort(e, kind="stable")
    e, mant = e[order], mant[order]
    starts = np.flatnonzero(np.r_[True, e[1:] != e[:-1]])
    for s, t in zip(starts, np.r_[starts[1:], e.size], strict=True):
        seg = mant[s:t]
        pad = np.zeros((-seg.size) % 512, dtype=np.int64)
        partial = np.concatenate([seg, pad]).reshape(-1, 512).sum(axis=1)  # < 2^62 each
        out[int(e[s])] = sum(int(x) for x in partial.tolist())
    return out


def merge_exact(parts: Sequence[Exact]) -> Exact:
    out: Exact = {}
    for p in parts:
        for k, v in p.items():
            out[k] = out.get(k, 0) + v
    return out


def exact_value(s: Exact) -> float:
    if not s:
        return 0.0
    lo = min(s)
    total = sum(v << (k - lo) for k, v in s.items())
    return float(Fraction(total) * Fraction(2) ** (lo - 53))


# -------------------------------------------------------------- double sums in memory
def _row_terms(xy: np.ndarray, e: np.ndarray, sub_xy: np.ndarray, sub_e: np.ndarray,
               rho: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Per point i: ``e_i * sum_j e_j rho(|x_i - x_j|)`` over the points j of ``sub_xy``, in batches."""
    from scipy.spatial.distance import cdist

    out = np.empty(len(xy))
    for s in range(0, len(xy), _BATCH):
        d = cdist(xy[s:s + _BATCH], sub_xy)
        out[s:s + _BATCH] = e[s:s + _BATCH] * (np.asarray(rho(d)) * sub_e[None, :]).sum(axis=1)
    return out


def _check_points(coords: np.ndarray, errors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    xy = np.asarray(coords, dtype=np.float64)
    e = np.asarray(errors, dtype=np.float64).ravel()
    if xy.ndim != 2 or xy.shape[1] != 2 or len(xy) != len(e) or not len(e):
        raise InputError(f"coords must be (N, 2) and errors (N,), got {xy.shape} and {e.shape}")
    if not (np.isfinite(xy).all() and np.isfinite(e).all()):
        raise InputError("coords and errors must be finite; drop the pixels without an error first")
    return xy, e


def neff_exact(coords: np.ndarray, errors: np.ndarray, params_variogram_model: VariogramParams,
               vectorized: bool = True) -> float:
    """Number of effective samples of N points from the full double sum of covariances (any shape).

    ``coords`` ``(N, 2)`` pixel centres, ``errors`` ``(N,)``; ``vectorized`` is upstream's testing
    switch (the sum is batched either way: memory N x 256).
    """
    xy, e = _check_points(coords, errors)
    rho = correlation_from_variogram(params_variogram_model)
    var = exact_value(exact_sum(_row_terms(xy, e, xy, e, rho))) / len(e) ** 2
    return float(np.mean(e)) ** 2 / var


def neff_hugonnet_approx(coords: np.ndarray, errors: np.ndarray, params_variogram_model: VariogramParams,
                         subsample: int = 1000, vectorized: bool = True, random_state: int | None = None) -> float:
    """Number of effective samples with one of the two sums on ``subsample`` random points
    (Hugonnet et al. 2022, Eq. 18); ``random_state=None`` uses :data:`xdem.sampling.DEFAULT_SEED`."""
    xy, e = _check_points(coords, errors)
    m = min(int(subsample), len(e))
    pick = np.random.default_rng(DEFAULT_SEED if random_state is None else random_state).choice(len(e), m, replace=False)
    rho = correlation_from_variogram(params_variogram_model)
    var = exact_value(exact_sum(_row_terms(xy, e, xy[pick], e[pick], rho))) / (len(e) * m)
    return float(np.mean(e)) ** 2 / var


# --------------------------------------------------------------- areas out of core
def _area_block(mask: np.ndarray, err: np.ndarray, *, row0: int, col0: int, transform: Affine, sub_xy: np.ndarray,
                sub_e: np.ndarray, rho: Callable[[np.ndarray], np.ndarray]) -> tuple[int, Exact, Exact]:
    ok = mask & np.isfinite(err)
    r, c = np.nonzero(ok)
    if not r.size:
        return 0, {}, {}
    x, y = block_xy(transform, row0, col0, mask.shape)
    e = err[r, c].astype(np.float64)
    terms = _row_terms(np.column_stack([x[c], y[r]]), e, sub_xy, sub_e, rho)
    return int(r.size), exact_sum(e), exact_sum(terms)


def _area_stats(mask: da.Array, errors: da.Array, transform: Affine, params: VariogramParams, subsample: int,
                random_state: int | None) -> tuple[int, float, float]:
    """Pixels, mean error and number of effective samples of the masked pixels (two or three passes)."""
    valid = mask & da.isfinite(errors)
    s = sample_valid(valid, {"e": errors}, subsample=subsample, random_state=random_state, min_count=1,
                     what="the area's number of effective samples")
    x, y = block_xy(transform, 0, 0, (1, 1))
    sub_xy = np.column_stack([x[0] + s["col"] * transform.a, y[0] + s["row"] * transform.e])
    tasks = block_tasks(_area_block, [mask, errors], transform=transform, sub_xy=sub_xy, sub_e=s["e"],
                        rho=correlation_from_variogram(params))
    parts = dask.compute(*tasks)
    n = sum(p[0] for p in parts)
    mean_e = exact_value(merge_exact([p[1] for p in parts])) / n
    var = exact_value(merge_exact([p[2] for p in parts])) / (n * len(s["e"]))
    return n, mean_e, mean_e**2 / var


def _window(grid: xr.DataArray, bounds: tuple[float, float, float, float]) -> xr.DataArray:
    """The part of ``grid`` (whole pixels) covering ``bounds``, lazily."""
    inv = ~get_transform(grid)
    (ca, ra), (cb, rb) = inv @ (bounds[0], bounds[1]), inv @ (bounds[2], bounds[3])
    c0, c1 = max(0, math.floor(min(ca, cb))), min(grid.shape[1], math.ceil(max(ca, cb)))
    r0, r1 = max(0, math.floor(min(ra, rb))), min(grid.shape[0], math.ceil(max(ra, rb)))
    if c1 <= c0 or r1 <= r0:
        raise InputError(f"the area (bounds {tuple(round(b, 1) for b in bounds)}) does not overlap the errors' grid")
    return grid.isel(y=slice(r0, r1), x=slice(c0, c1))


def _is_vector(area: object) -> bool:
    return isinstance(area, (str, os.PathLike)) or type(area).__name__ in ("GeoDataFrame", "Vector")


def _polygon_stats(area: object, grid: xr.DataArray, params: VariogramParams, subsample: int,
                   random_state: int | None) -> tuple[int, float, float]:
    area = area.ds if type(area).__name__ == "Vector" else area  # type: ignore[attr-defined]
    gdf = read_polygons(area, grid.rio.crs)  # type: ignore[arg-type]
    win = _window(grid, tuple(gdf.total_bounds))
    mask = rasterize_like(gdf, win)
    errors = lazy(win.data, mask.chunks)
    if not bool(mask.any().compute()):
        raise NotEnoughDataError("the area covers no pixel centre of the grid; give a larger area or a finer grid")
    return _area_stats(mask, errors.astype(np.float64), get_transform(win), params, subsample, random_state)


def _finite_sums(block: np.ndarray, *, row0: int, col0: int) -> tuple[int, Exact]:
    v = block[np.isfinite(block)].astype(np.float64)
    return int(v.size), exact_sum(v)


def _exact_mean(data: da.Array) -> float:
    """Mean of the finite values, summed exactly (the same for any chunking)."""
    parts = dask.compute(*block_tasks(_finite_sums, [data]))
    n = sum(p[0] for p in parts)
    if not n:
        raise NotEnoughDataError("the errors have no finite value")
    return exact_value(merge_exact([p[1] for p in parts])) / n


def _grid_of(errors: object) -> xr.DataArray:
    field = as_field(errors, "errors")
    if field.grid is None or field.grid.rio.crs is None:
        raise InputError("errors must be georeferenced (an xarray.DataArray with a CRS or an xdem.DEM) to use polygons")
    return field.grid.copy(data=lazy(field.data))


def number_effective_samples(area: float | object, params_variogram_model: VariogramParams,
                             rasterize_resolution: float | object | None = None, *, subsample: int = 1000,
                             random_state: int | None = None) -> float:
    """Number of effective samples of an area (a number: a disk of that area; a polygon: any shape).

    Parameters
    ----------
    area
        An area in the variogram's units squared (:func:`~xdem.spatialstats.neff_circular_approx_numerical`),
        or polygons: a GeoDataFrame (all rows together), a geoutils Vector or a vector file.
    params_variogram_model
        ``model``, ``range``, ``psill`` (or ``sill``).
    rasterize_resolution
        For polygons: a pixel size (m), or a raster (DataArray, DEM) whose grid to use; default a
        fifth of the shortest range (with a warning, as upstream).
    subsample, random_state
        Points of the subset sum and their seed (:func:`neff_hugonnet_approx`'s keywords).
    """
    _components(params_variogram_model)
    if not _is_vector(area):
        if isinstance(area, bool) or not isinstance(area, (int, float, np.integer, np.floating)):
            raise InputError(f"area must be a number or polygons (GeoDataFrame, Vector, vector file), got {area!r}")
        return neff_circular_approx_numerical(float(area), params_variogram_model)
    if rasterize_resolution is None:
        rasterize_resolution = min(r for _m, r, _s in _components(params_variogram_model)) / 5.0
        warnings.warn("rasterize_resolution is not set: using a fifth of the shortest correlation range", stacklevel=2)
    if isinstance(rasterize_resolution, (int, float, np.integer, np.floating)):
        grid = _grid_at(area, float(rasterize_resolution))
    else:
        grid = _grid_of(rasterize_resolution)
        grid = grid.copy(data=da.ones(grid.shape, dtype=np.float64, chunks=grid.data.chunks))  # no heteroscedasticity
    return _polygon_stats(area, grid, params_variogram_model, subsample, random_state)[2]


def _grid_at(area: object, res: float, chunks: int = 1024) -> xr.DataArray:
    """A lazy grid of ones (errors of 1) at ``res`` over the polygons' bounds, in their CRS."""
    if not (np.isfinite(res) and res > 0):
        raise InputError(f"rasterize_resolution must be a positive pixel size, got {res!r}")
    area = area.ds if type(area).__name__ == "Vector" else area  # type: ignore[attr-defined]
    gdf: Any = _read_vector(area) if isinstance(area, (str, os.PathLike)) else area
    if type(gdf).__name__ != "GeoDataFrame" or gdf.crs is None:
        raise InputError("the area must be polygons with a CRS (a GeoDataFrame, geoutils Vector or vector file)")
    x0, y0, x1, y1 = gdf.total_bounds
    nx, ny = max(1, math.ceil((x1 - x0) / res)), max(1, math.ceil((y1 - y0) / res))
    x = x0 + (np.arange(nx) + 0.5) * res
    y = y1 - (np.arange(ny) + 0.5) * res
    grid = xr.DataArray(da.ones((ny, nx), chunks=chunks), coords={"y": y, "x": x}, dims=("y", "x"))
    return grid.rio.write_crs(gdf.crs).rio.write_transform(Affine(res, 0, x0, 0, -res, y1))


def spatial_error_propagation(areas: Sequence[float | object], errors: object, params_variogram_model: VariogramParams,
                              *, subsample: int = 1000, random_state: int | None = None) -> list[float]:
    """Standard error (1 sigma) of the mean of dh over each area: mean error / sqrt(n_eff).

    Parameters
    ----------
    areas
        Numbers (areas as disks; the mean error is then that of the whole grid) or polygons
        (GeoDataFrame, geoutils Vector, vector file: the pixels whose centres are inside).
    errors
        The error map (e.g. of :func:`~xdem.spatialstats.infer_heteroscedasticity_from_stable`):
        DataArray or DEM for polygons; numpy too for numbers only.
    params_variogram_model
        The correlation of the standardised errors (``model``, ``range``, ``psill``).
    subsample, random_state
        As :func:`neff_hugonnet_approx`.
    """
    out = []
    mean_all: float | None = None
    for area in areas:
        if _is_vector(area):
            _n, mean_e, neff = _polygon_stats(area, _grid_of(errors), params_variogram_model, subsample, random_state)
        else:
            neff = number_effective_samples(area, params_variogram_model)
            if mean_all is None:
                mean_all = _exact_mean(lazy(as_field(errors, "errors").data))
            mean_e = mean_all
        out.append(float(mean_e / np.sqrt(neff)))
    return out

