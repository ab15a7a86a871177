"""What the report shows, computed out of core: decimated maps, a subsample, statistics.

Every statistic, histogram, diagnostic and colour scale uses the stable pixels only (inside
the inlier mask, outside the exclude mask: :func:`xdem.masks.stable_mask_like`); the maps
show every pixel, with the outline of the mask. Inside the mask (e.g. glaciers) the mean dh
and volume change are computed in the pass of the decimated maps (:mod:`xdem.report.masked`).

Nothing here holds a full-resolution array in memory: maps are read from the files'
overviews when they have them (:mod:`xdem.report.overviews`), else are block means over
``k x k`` pixels computed chunk by chunk (:func:`xdem.report.blocks.map_cells_block`, also
behind :func:`coarsen_mean`), histograms and the
Nuth & Kääb diagnostic use a reproducible subsample (:func:`xdem.sampling.sample_valid`),
statistics are exact out-of-core reductions (:mod:`xdem.stats`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dask
import dask.array as da
import numpy as np
import xarray as xr

from xdem import stats as xstats
from xdem.errors import CRSError, EmptyBinWarning, InputError, NotEnoughDataError
from xdem.io.grid import align_pair, block_tasks, get_resolution, get_transform
from xdem.io.open import open_dem
from xdem.kernels.robust import nmad
from xdem.masks import stable_mask_like
from xdem.report import blocks
from xdem.report.blocks import decimation_factor
from xdem.report.overviews import overview_maps
from xdem.sampling import BlockWork, Sample, sample_valid
from xdem.spatialstats import stats_by_slope_class
from xdem.spatialstats.binned import SLOPE_CLASSES
from xdem.terrain import get_terrain_attribute
from xdem.typing import DEMLike, MaskLike

if TYPE_CHECKING:  # annotations only: pandas is imported where a table is built
    import pandas as pd

__all__ = ["decimation_factor", "coarsen_mean", "decimated_maps", "ReportData", "open_inputs",
           "collect", "sampled_slope_tables"]


# ---------------------------------------------------------------------------------------------
# Decimated maps
# ---------------------------------------------------------------------------------------------
def _map_cells_pass(arrays: list[da.Array], k: int) -> Any:
    """A :func:`dask.delayed` object: the NaN-ignoring ``k x k`` block means of same-grid 2-D
    arrays, one task per block (:func:`xdem.report.blocks.map_cells_block`, as the report's
    pass) and one merging them (:func:`xdem.report.blocks.merge_map_cells`)."""
    shape = arrays[0].shape
    if shape[0] // k == 0 or shape[1] // k == 0:
        raise InputError(f"cannot decimate a {shape} array by {k}; lower the decimation")
    arrays = [a.rechunk(arrays[0].chunks) for a in arrays]
    parts = block_tasks(partial(blocks.map_cells_block, k=k, shape=shape), arrays)
    return dask.delayed(blocks.merge_map_cells)(parts, shape=shape, k=k)


def coarsen_mean(arr: da.Array, k: int) -> da.Array:
    """Lazy ``k x k`` block means (NaN ignored) of a 2-D dask array; edges are trimmed.

    The means of the report's maps (:func:`xdem.report.blocks.map_cells_block`, one task per
    chunk, whatever its size against ``k``), merged into one ``(ny // k, nx // k)`` float32
    array: memory stays bounded by the chunk size.

    Examples
    --------
    >>> import dask.array as da
    >>> coarsen_mean(da.ones((10, 9), chunks=4), 3).compute().shape
    (3, 3)
    """
    arr = da.asarray(arr)
    if k <= 1:
        same: da.Array = arr.astype(np.float32)
        return same
    merged = _map_cells_pass([arr], k)
    out: da.Array = da.from_delayed(merged[0], shape=(arr.shape[0] // k, arr.shape[1] // k), dtype=np.float32)
    return out


def decimated_maps(
    arrays: dict[str, da.Array], *, shape: tuple[int, int], max_pixels: int
) -> tuple[dict[str, np.ndarray], int]:
    """Compute ``k x k`` block means of several same-grid arrays in one pass.

    Returns the small numpy maps (at most ``max_pixels`` pixels each) and ``k``.
    """
    k = decimation_factor(shape, max_pixels)
    values = _map_cells_pass([da.asarray(a) for a in arrays.values()], k).compute()
    return dict(zip(arrays, values)), k


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------
def _as_dem(source: Any, what: str) -> xr.DataArray:
    try:
        return open_dem(source)
    except InputError as exc:
        raise type(exc)(f"{what}: {exc}") from exc


def open_inputs(
    ref: DEMLike, tba: DEMLike, aligned: DEMLike | None = None
) -> tuple[xr.DataArray, xr.DataArray, xr.DataArray | None]:
    """Open the DEMs lazily and bring ``tba`` and ``aligned`` onto the reference grid.

    Raises :class:`~xdem.errors.OverlapError` when a DEM does not overlap the reference.
    """
    ref_d = _as_dem(ref, "reference DEM")
    tba_d = _as_dem(tba, "to-be-aligned DEM")
    ref_d, tba_d = align_pair(ref_d, tba_d)
    chunks = dict(zip(("y", "x"), ref_d.data.chunks))
    if tba_d.data.chunks != ref_d.data.chunks:
        tba_d = tba_d.chunk(chunks)
    al_d = None
    if aligned is not None:
        al_d = _as_dem(aligned, "aligned DEM")
        _, al_d = align_pair(ref_d, al_d)
        if al_d.shape != ref_d.shape:  # aligned covers only part of the (cropped) reference
            raise InputError(
                f"the aligned DEM covers {al_d.shape} pixels of the {ref_d.shape} overlap of the reference and "
                "to-be-aligned DEMs; give the aligned DEM on the grid of the to-be-aligned or reference DEM"
            )
        if al_d.data.chunks != ref_d.data.chunks:
            al_d = al_d.chunk(chunks)
    return ref_d, tba_d, al_d


# ---------------------------------------------------------------------------------------------
# Everything the report needs
# ---------------------------------------------------------------------------------------------
@dataclass
class ReportData:
    """Small, in-memory results shown in the report."""

    shape: tuple[int, int]
    resolution: tuple[float, float]
    crs: str
    units: str
    chunks: tuple[int, int]
    n_chunks: int
    extent: tuple[float, float, float, float]  # left, right, bottom, top of the decimated maps
    factor: int
    maps: dict[str, np.ndarray]
    sample: dict[str, np.ndarray]
    n_valid: int
    stats: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    masked: bool = False
    stable_map: np.ndarray | None = None  # fraction of stable pixels per map cell (mask outline)
    inside: dict[str, Any] | None = None  # sums inside the mask (xdem.report.masked.inside_sums)
    sample_passes: int = 1
    slope_classes: dict[str, Any] = field(default_factory=dict)
    slope_note: str | None = None
    slope_exact: bool = False  # slope tables exact (several passes) or count exact + sampled statistics
    stats_method: str | None = None  # how ``stats`` were computed (None: not computed, given by the summary)
    map_source: str = "block means"  # or the overviews the maps were read from (xdem.report.overviews)


def crs_label(dem: xr.DataArray) -> tuple[str, str]:
    """``("EPSG:xxxx", "m")``: CRS name and linear unit abbreviation."""
    crs = dem.rio.crs
    if crs is None:
        return "no CRS", "?"
    epsg = crs.to_epsg()
    name = f"EPSG:{epsg}" if epsg else crs.to_string()
    if crs.is_geographic:
        return name, "°"
    unit = (crs.linear_units or "").lower()
    return name, {"metre": "m", "meter": "m", "metres": "m", "meters": "m"}.get(unit, unit or "?")


def _decimated_extent(dem: xr.DataArray, k: int) -> tuple[float, float, float, float]:
    t = get_transform(dem)
    ny, nx = (dem.shape[0] // k) * k, (dem.shape[1] // k) * k
    xs = (t.c, t.c + nx * t.a)
    ys = (t.f, t.f + ny * t.e)
    return min(xs), max(xs), min(ys), max(ys)


def _exact_stats(dh: da.Array) -> dict[str, Any] | None:
    try:
        s = xstats.robust_summary(dh)
    except NotEnoughDataError:
        return None
    return {"count": s["count"], "median": s["median"], "nmad": s["nmad"], "min": s["min"], "max": s["max"]}


def _slope_tables(dhs: dict[str, da.Array], slope: xr.DataArray) -> dict[str, Any]:
    """Exact statistics of each ``dh`` by slope class (:func:`xdem.spatialstats.stats_by_slope_class`,
    several passes); ``None`` for a ``dh`` without any valid pixel. Empty classes stay in the table (count 0)."""
    out: dict[str, Any] = {}
    for name, dh in dhs.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EmptyBinWarning)  # shown as count 0 in the table
            try:
                out[name] = stats_by_slope_class(dh, slope.data)
            except NotEnoughDataError:
                out[name] = None
    return out


def sampled_slope_tables(
    sample: Sample | Mapping[str, np.ndarray], counts: np.ndarray, names: list[str], classes: tuple[float, ...]
) -> dict[str, pd.DataFrame | None]:
    """Statistics of each ``dh`` by slope class: ``count`` exact (``counts``: per dh and class,
    :func:`xdem.report.blocks.class_counts_block` summed), ``median``, ``nmad``, ``mean`` and ``rmse`` on the sampled
    pixels of the class (``sample_count`` of them; NaN for a class without any); ``None``
    for a ``dh`` without any valid pixel. Columns as :func:`xdem.spatialstats.stats_by_slope_class`
    plus ``sample_count``."""
    import pandas as pd

    edges = np.asarray(classes, dtype=np.float64)
    slope = np.asarray(sample["slope"], dtype=np.float64)
    klass = np.clip(np.searchsorted(edges, slope, side="right") - 1, 0, len(edges) - 2)
    klass[slope == edges[-1]] = len(edges) - 2
    inside = np.isfinite(slope) & (slope >= edges[0]) & (slope <= edges[-1])
    out: dict[str, pd.DataFrame | None] = {}
    for i, name in enumerate(names):
        if int(counts[i].sum()) == 0:
            out[name] = None
            continue
        v = np.asarray(sample[name], dtype=np.float64)
        rows = []
        for c in range(len(edges) - 1):
            x = np.sort(v[inside & (klass == c) & np.isfinite(v)])  # sorted: the same sums for any chunking
            rows.append({
                "slope_lower": edges[c], "slope_upper": edges[c + 1], "count": int(counts[i, c]),
                "sample_count": int(x.size),
                "median": float(np.median(x)) if x.size else np.nan,
                "nmad": float(nmad(x)) if x.size else np.nan,
                "mean": float(x.mean()) if x.size else np.nan,
                "rmse": float(np.sqrt(np.mean(x * x))) if x.size else np.nan,
            })
        out[name] = pd.DataFrame(rows)
    return out


def _draw(valid: da.Array, aligned: xr.DataArray | None, arrays: dict[str, da.Array], also: dict[str, BlockWork],
          *, subsample: int, random_state: int | None, masked: bool) -> Any:
    """The report's one subsample: where ref, tba AND aligned are valid (the same pixels before and
    after, so every figure has the same n), or, when the aligned DEM has no valid pixel there, where
    ref and tba are (one more pass, only then)."""
    tries = [valid & da.isfinite(aligned.data), valid] if aligned is not None else [valid]
    for i, where_valid in enumerate(tries):
        try:
            return sample_valid(where_valid, arrays, subsample=subsample, random_state=random_state, min_count=1,
                                also=also)
        except NotEnoughDataError as exc:
            if i + 1 < len(tries):
                continue
            where = " on stable terrain (outside the exclude mask, inside the inlier mask)" if masked else ""
            raise NotEnoughDataError(
                f"no pixel is valid in both the reference and the to-be-aligned DEM{where} (0 of {valid.size} on the "
                "reference grid); check that they cover the same area, their nodata values and the masks"
            ) from exc
    raise AssertionError("unreachable")


def collect(
    ref: xr.DataArray,
    tba: xr.DataArray,
    aligned: xr.DataArray | None,
    *,
    max_pixels: int,
    subsample: int,
    random_state: int | None,
    need_stats: bool,
    inlier_mask: MaskLike = None,
    exclude_mask: MaskLike = None,
    overview_files: dict[str, Path] | None = None,
    exact_stats: bool = False,
) -> ReportData:
    """Compute everything the report shows, out of core, in ONE pass over the data (small results).

    The pass reads each block of the inputs once and, from it, draws the subsample where ref, tba and
    aligned are all valid (the same pixels before and after; :func:`_draw`) for the histograms,
    Nuth & Kääb diagnostic, colour scales, dh against elevation, the sampled columns of the slope
    tables (:func:`xdem.sampling.sample_valid`), counts the valid pixels per slope class, computes
    the decimated maps (unless read from overviews), the sums inside the mask, and, when
    ``need_stats``, the statistics of dh (:func:`xdem.stats.dh_stats_blocks`: exact counts, min and
    max, the rest on a subsample of :data:`xdem.stats.STATS_SUBSAMPLE` pixels, as ``xdem coreg``).
    A second pass happens only when few pixels are valid (see ``sample_passes``).

    With ``exact_stats`` the statistics and the slope tables are exact instead (out-of-core
    quantiles: about twenty more passes).

    Statistics, the subsample and the slope tables use the stable pixels (``inlier_mask``,
    ``exclude_mask``: anything :func:`xdem.masks.stable_mask_like` takes); the decimated maps
    show every pixel, and with a mask the fraction of stable pixels per map cell and the sums
    inside the mask are computed in the same pass.

    Without a mask, when ``overview_files`` (keys ``ref``, ``tba`` and ``aligned`` if given: the
    files the DEMs are exactly, :func:`xdem.report.overviews.file_of`) are on the reference grid
    and carry overviews, the maps are read from them (:mod:`xdem.report.overviews`: GDAL's
    resampling instead of exact block means).

    Raises :class:`~xdem.errors.NotEnoughDataError` when the pair has no stable pixel valid in both.
    """
    masked = inlier_mask is not None or exclude_mask is not None
    stable = stable_mask_like(ref, inlier_mask=inlier_mask, exclude_mask=exclude_mask) if masked else None
    all_dhs = {"before": tba.data - ref.data}
    if aligned is not None:
        all_dhs["after"] = aligned.data - ref.data
    dhs = {k: da.where(stable, v, np.nan) for k, v in all_dhs.items()} if masked else dict(all_dhs)
    crs, units = crs_label(ref)
    slope = aspect = None
    note = None
    try:
        slope, aspect = get_terrain_attribute(ref, ["slope", "aspect"])
    except CRSError as exc:
        note = f"slope and aspect need a projected CRS ({exc})"
    arrays = dict(dhs)
    arrays["elevation"] = ref.data  # dh against elevation (hypsometric bias)
    if slope is not None and aspect is not None:  # both set by the same call
        arrays.update(slope=slope.data, aspect=aspect.data)
    valid = da.isfinite(ref.data) & da.isfinite(tba.data)
    if stable is not None:  # i.e. masked
        valid = valid & stable
    ny, nx = ref.shape  # 2-D, as every DEM from open_dem
    k = decimation_factor((ny, nx), max_pixels)
    ov = None
    if stable is None and overview_files is not None:
        ov = overview_maps(overview_files, ref, k=k, max_pixels=max_pixels)
    # everything below is computed in the tasks of the draw (each block read once, by one task)
    also: dict[str, BlockWork] = {}
    map_names: list[str] = []
    if ov is None:
        to_map = {"ref": ref.data, **all_dhs}
        if stable is not None:  # i.e. masked
            to_map["stable"] = stable.astype(np.float32)
        map_names = list(to_map)
        also["maps"] = BlockWork(partial(blocks.map_cells_block, k=k, shape=(ny, nx)), list(to_map.values()))
        if stable is not None:
            also["inside"] = BlockWork(blocks.inside_block_sums, [stable, *all_dhs.values()])
    finish_stats = None
    if need_stats and not exact_stats:
        others = {"before": tba.data, **({"after": aligned.data} if aligned is not None else {})}
        func, arrs, finish_stats = xstats.dh_stats_blocks(ref.data, others, stable=stable, subsample=xstats.STATS_SUBSAMPLE,
                                                   random_state=random_state)
        also["stats"] = BlockWork(func, arrs)
    if slope is not None and not exact_stats:
        also["slope_counts"] = BlockWork(partial(blocks.class_counts_block, edges=np.asarray(SLOPE_CLASSES, dtype=float)),
                                         [slope.data, *dhs.values()])
    sample = _draw(valid, aligned, arrays, also, subsample=subsample, random_state=random_state, masked=masked)
    done = sample.also
    inside: dict[str, Any] = {}
    if ov is not None:
        maps, k = ov.maps, ov.factor
        map_source = (f"overviews of factor {ov.level_factor} (GDAL resampling: {ov.resampling})"
                      + (f", then block means of {ov.block} × {ov.block}" if ov.block > 1 else ""))
    else:
        maps = dict(zip(map_names, blocks.merge_map_cells(done["maps"], shape=(ny, nx), k=k)))
        if "inside" in done:
            inside = blocks.merge_inside(done["inside"], list(all_dhs))
        map_source = "block means" if k > 1 else "full resolution"
    stable_map = maps.pop("stable", None)
    stats: dict[str, Any] = {}
    stats_how = None
    if need_stats and exact_stats:
        stats = {name: _exact_stats(dh) for name, dh in dhs.items()}
        stats_how = "exact (out-of-core quantiles, several passes)"
    elif need_stats:
        assert finish_stats is not None
        stats = finish_stats(done["stats"])
        stats_how = xstats.stats_method(xstats.STATS_SUBSAMPLE)
    tables: dict[str, Any] = {}
    if slope is not None and exact_stats:
        tables = _slope_tables(dhs, slope)
    elif slope is not None:
        tables = sampled_slope_tables(sample, np.sum(done["slope_counts"], axis=0), list(dhs), SLOPE_CLASSES)
    return ReportData(
        shape=(ny, nx), resolution=get_resolution(ref), crs=crs, units=units,
        chunks=(max(ref.data.chunks[0]), max(ref.data.chunks[1])),
        n_chunks=len(ref.data.chunks[0]) * len(ref.data.chunks[1]),
        extent=_decimated_extent(ref, k), factor=k, maps=maps, sample=dict(sample), n_valid=int(sample.n_valid),
        stats=stats, stats_method=stats_how, slope_classes=tables, slope_exact=exact_stats, slope_note=note,
        masked=masked, stable_map=stable_map, inside=inside or None,
        sample_passes=int(sample.passes), map_source=map_source,
    )
