"""Upstream 0.2.3's ``patches_method``: the empirical standard error of the mean over patches, out of core.

The mean of every patch (a disk or square of about ``area``, one per pixel centre) is a
convolution of the values (NaN counted out) by the patch's kernel, computed block by block
with a halo of the kernel's size (:func:`dask.array.map_overlap`; beyond the grid is NaN, as
upstream's ``scipy`` convolution with ``cval=nan``, so patches crossing the edge are left
out); patches with fewer than ``perc_min_valid`` % valid pixels are left out too. Patches
whose centres are ``p`` pixels apart (``p`` the kernel's width) do not overlap: for each of
the ``p x p`` offsets of that lattice the spread of the patch means (NMAD) is one estimate
of the standard error, and the result is their average, as upstream. The ``p^2`` spreads are
exact grouped order statistics of one lazy array grouped by offset
(:func:`xdem.spatialstats.binned_statistics`): a few passes whatever ``p``, memory of a block
and its halo, the same numbers for any chunking.

Examples
--------
>>> import numpy as np
>>> values = np.random.default_rng(0).normal(size=(300, 300))  # white noise of sigma 1
>>> df = patches_method(values, areas=[25.0], gsd=1.0, patch_shape="square")
>>> bool(abs(df["nmad"].iloc[0] * 5 - 1) < 0.1)  # sigma / sqrt(25 pixels)
True
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import dask.array as da
import numpy as np
import pandas as pd
from scipy import ndimage

from xdem.errors import EmptyBinWarning, InputError
from xdem.io.grid import block_pixel_offsets, get_resolution
from xdem.spatialstats._fields import as_field, lazy, stable_values
from xdem.spatialstats.binned import binned_statistics

__all__ = ["patches_method"]


def _kernel(area: float, gsd: float, shape: str) -> np.ndarray:
    """Upstream's patch: a square of ``round(sqrt(area) / gsd)`` pixels, or the disk inscribed in a
    square of ``round(2 sqrt(area / pi) / gsd)`` pixels (centres strictly inside its radius)."""
    if shape == "square":
        p = int(np.round(np.sqrt(area) / gsd))
        return np.ones((max(p, 1), max(p, 1)))
    p = max(int(np.round(2 * np.sqrt(area / np.pi) / gsd)), 1)
    c = p // 2
    radius = min(c, p - c)
    yy, xx = np.ogrid[:p, :p]
    disk = np.hypot(xx - c, yy - c) < radius
    return disk.astype(np.float64) if disk.any() else np.ones((1, 1))


def _mean_block(block: np.ndarray, *, kernel: np.ndarray, min_valid: float) -> np.ndarray:
    """Mean of the valid values under the kernel at every pixel (NaN when the kernel's square reaches
    beyond the grid, marked +inf in the halo, as upstream's ``cval=nan``; or too few valid)."""
    finite = np.isfinite(block)
    total = ndimage.convolve(np.where(finite, block, 0.0), kernel, mode="constant", cval=np.nan)
    count = ndimage.convolve(finite.astype(np.float64), kernel, mode="constant", cval=np.nan)
    beyond = ndimage.convolve(np.isposinf(block).astype(np.float64), np.ones_like(kernel), mode="constant", cval=1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / count
    return np.where((count >= min_valid) & (beyond == 0), mean, np.nan)


def _offset_block(block: np.ndarray, *, p: int, block_info: dict | None = None) -> np.ndarray:
    row0, col0 = block_pixel_offsets(block_info)
    rows = (row0 + np.arange(block.shape[0])) % p
    cols = (col0 + np.arange(block.shape[1])) % p
    return (rows[:, None] * p + cols[None, :]).astype(np.float64)


def _one_area(values: da.Array, area: float, gsd: float, shape: str, perc_min_valid: float,
              spread: str) -> tuple[float, float, float, da.Array, da.Array]:
    kernel = _kernel(area, gsd, shape)
    p = kernel.shape[0]
    depth = p // 2 + 1
    chunks = tuple(tuple(c) for c in values.chunks)
    if min(min(c) for c in chunks) < depth:
        values = values.rechunk(max(2 * depth, 256))
    values = da.where(da.isposinf(values), np.nan, values)  # +inf marks beyond the grid (a data inf is invalid anyway)
    mean = values.map_overlap(functools.partial(_mean_block, kernel=kernel, min_valid=kernel.sum() * perc_min_valid / 100),
                              depth=depth, boundary=np.inf, dtype=np.float64, meta=np.array((), dtype=np.float64))
    offset = da.map_blocks(functools.partial(_offset_block, p=p), mean, dtype=np.float64,
                           meta=np.array((), dtype=np.float64))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyBinWarning)
        table = binned_statistics(mean, {"offset": offset}, bins={"offset": list(np.arange(p * p + 1) - 0.5)},
                                  statistics=["count", spread])
    stat = float(np.nanmean(table[spread].to_numpy(dtype=np.float64)))
    count = float(np.mean(table["count"].to_numpy(dtype=np.float64)))
    return stat, count, float(kernel.sum() * gsd**2), mean, offset


def patches_method(
    values: object,
    areas: Sequence[float],
    gsd: float | None = None,
    stable_mask: object = None,
    unstable_mask: object = None,
    statistics_in_patch: Sequence[Callable[..., Any] | str] = (np.nanmean,),
    statistic_between_patches: Callable[..., Any] | str = "nmad",
    perc_min_valid: float = 80.0,
    patch_shape: str = "circular",
    vectorized: bool = True,
    convolution_method: str = "scipy",
    n_patches: int = 1000,
    return_in_patch_statistics: bool = False,
    random_state: int | None = None,
) -> pd.DataFrame | tuple[pd.DataFrame, pd.DataFrame]:
    """Spread of the mean of ``values`` between independent patches of each area (upstream's vectorised method).

    Parameters
    ----------
    values
        2-D numpy, dask, DataArray or :class:`xdem.DEM` (e.g. dh, or dh standardised by its errors).
    areas
        Patch areas (CRS units squared).
    gsd
        Pixel size for plain arrays (a georeferenced input gives its own).
    stable_mask, unstable_mask
        As :func:`~xdem.spatialstats.infer_heteroscedasticity_from_stable`.
    statistics_in_patch
        Only the mean (upstream's vectorised method).
    statistic_between_patches
        ``nmad`` (default, as upstream) or ``np.nanstd``.
    perc_min_valid
        Least percentage of valid pixels in a patch.
    patch_shape
        ``"circular"`` or ``"square"``.
    vectorized, convolution_method, n_patches, random_state
        Upstream's switches for its loop over random quadrants: only the vectorised method is here
        (``vectorized=False`` and ``convolution_method="numba"`` are refused in one line).
    return_in_patch_statistics
        Also return the mean and count of the patches of the lattice at offset (0, 0).

    Returns
    -------
    pandas.DataFrame
        One row per area: the spread (column named as the statistic), ``nb_indep_patches`` (mean over
        the offsets), ``exact_areas`` (the kernel's pixels times the pixel area), ``areas``.
    """
    if not vectorized or convolution_method != "scipy":
        raise InputError("only upstream's vectorized patches method (convolution_method='scipy') is available here")
    if patch_shape not in ("circular", "square"):
        raise InputError(f"patch_shape must be 'circular' or 'square', got {patch_shape!r}")
    names = [s if isinstance(s, str) else getattr(s, "__name__", "") for s in statistics_in_patch]
    if [n for n in names if n not in ("nanmean", "mean", "count")]:
        raise InputError(f"the vectorized patches method computes the mean in each patch only, got {names}")
    between = statistic_between_patches if isinstance(statistic_between_patches, str) \
        else getattr(statistic_between_patches, "__name__", "")
    spread = {"nmad": "nmad", "nanstd": "std", "std": "std"}.get(between)
    if spread is None:
        raise InputError(f"statistic_between_patches must be nmad or np.nanstd here, got {between!r}")
    if not 0 <= perc_min_valid <= 100:
        raise InputError(f"perc_min_valid is a percentage, got {perc_min_valid!r}")
    field = as_field(values, "values")
    if field.grid is not None and "x" in field.grid.coords and gsd is None:
        gsd = float(get_resolution(field.grid)[0])
    if gsd is None or not gsd > 0:
        raise InputError("values has no georeferencing: give gsd, the pixel size")
    data = lazy(stable_values(field, stable_mask, unstable_mask)).astype(np.float64)
    rows, frames = [], []
    for area in areas:
        stat, count, exact, mean, offset = _one_area(data, float(area), float(gsd), patch_shape, perc_min_valid, spread)
        rows.append((stat, count, exact, area))
        if return_in_patch_statistics:
            p = _kernel(float(area), float(gsd), patch_shape).shape[0]
            frames.append(pd.DataFrame({"nanmean": np.asarray(mean[::p, ::p]).ravel(), "areas": area,
                                        "exact_areas": exact}))
    df = pd.DataFrame(rows, columns=[between, "nb_indep_patches", "exact_areas", "areas"])
    return (df, pd.concat(frames, ignore_index=True)) if return_in_patch_statistics else df
