"""The report's maps read from the files' overviews (COGs), without a pass over the data.

A GeoTIFF written by :func:`xdem.io.write_cog` (GDAL's COG driver, ``OVERVIEWS=AUTO``)
carries internal overviews: reduced copies of the DEM by factors 2, 4, 8, ... When the
reference, the to-be-aligned and the aligned DEMs are files on one grid that all carry an
overview of factor ``f`` (the largest such factor not above the report's decimation ``k``,
so the overview has at least as many pixels as the map the report wants), the maps are read
from that level (a few MB whatever the DEM size) and, when it is still larger than
``max_pixels``, block-averaged by a further ``k2`` in memory. dh before/after on the map grid
is then ``tba overview - ref overview`` and ``aligned overview - ref overview``.

Overview values are GDAL's resampling, not exact block means: the COG driver's default for a
DEM is CUBIC (``RESAMPLING`` creation option; gdaladdo files may use AVERAGE or others), a
smoothing kernel a little wider than the block with small negative lobes, computed level from
level. They equal ``f x f`` block means of the full data to within a fraction of the
elevation variation over a few blocks (the report's caption says so); voids (nodata) of the
full data are ignored by GDAL except where a whole block is void.

Anything else (no overviews, a file on another grid, in-memory DEMs, a mask whose stable
fraction and inside sums need a pass anyway) uses the exact block means of
:func:`xdem.report.blocks.map_cells_block`, computed in the report's one pass.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
import xarray as xr

from xdem.io.grid import Grid, same_crs
from xdem.io.sources import find_sources, region_reader
from xdem.report.blocks import cell_means, decimation_factor

__all__ = ["MAX_READ", "OverviewMaps", "file_of", "overview_factor", "read_overview", "overview_maps"]


@dataclass(frozen=True)
class OverviewMaps:
    """Maps read from overviews: ``maps`` (``ref``, ``before``, ``after``), overview factor
    ``level_factor`` times in-memory block factor ``block``, and the overview ``resampling``."""

    maps: dict[str, np.ndarray]
    level_factor: int
    block: int
    resampling: str

    @property
    def factor(self) -> int:
        """Source pixels per map pixel, per side."""
        return self.level_factor * self.block


def file_of(source: object) -> Path | None:
    """The GeoTIFF a DEM argument is exactly (a path, or a DataArray from :func:`xdem.open_dem` of
    a file, not derived from it), or ``None``."""
    if isinstance(source, (str, os.PathLike)):
        p = Path(os.fspath(source))
        return p if p.is_file() else None
    reader = region_reader(source) if isinstance(source, xr.DataArray) else None
    if reader is not None:
        paths = find_sources(source)
        if len(paths) == 1:
            path = next(iter(paths))
            with rasterio.open(path) as src:  # opened with another nodata than the file's: not the file
                same = _same_nodata(getattr(reader, "nodata", None), src.nodata)
            return path if same else None
    return None


def _same_nodata(a: float | None, b: float | None) -> bool:
    def norm(v: float | None) -> float | None:
        return None if v is None or np.isnan(v) else float(v)

    return norm(a) == norm(b)


def _same_grid(src: Any, dem: xr.DataArray) -> bool:
    """Whether the file ``src`` (open) is one band on the grid of ``dem`` (to 1e-5 of a unit in its
    transform, as :meth:`affine.Affine.almost_equals`)."""
    if src.count != 1 or src.crs is None:
        return False
    file, own = Grid.of_dataset(src), Grid.of(dem)
    return file.shape == own.shape and same_crs(file.crs, own.crs) and file.transform.almost_equals(own.transform)


#: Largest overview read, in multiples of ``max_pixels`` (16 x 1 Mpixel float32: 64 MB).
MAX_READ = 16


def overview_factor(paths: list[Path], dem: xr.DataArray, *, k: int, max_pixels: int) -> tuple[int, int] | None:
    """``(f, k2)``: the overview factor ``2 <= f <= k`` that every file in ``paths`` carries (each
    single-band on the grid of ``dem``) and the block factor ``k2`` bringing it to at most
    ``max_pixels``, whose product ``f * k2`` is the smallest (the map closest to ``max_pixels``;
    ties: the smaller overview). Levels larger than :data:`MAX_READ` ``* max_pixels`` are not read.
    ``None`` when no level fits.

    Examples
    --------
    >>> import xdem
    >>> dem = xdem.open_dem(xdem.examples.get_path("lidar"))
    >>> overview_factor([], dem, k=4, max_pixels=10_000) is None  # no file, no common level
    True
    """
    common: set[int] | None = None
    try:
        for path in paths:
            with rasterio.open(path) as src:
                if not _same_grid(src, dem):
                    return None
                have = set(src.overviews(1))
            common = have if common is None else common & have
    except rasterio.errors.RasterioIOError:
        return None
    ny, nx = dem.shape
    best: tuple[int, int] | None = None
    for f in sorted(common or set(), reverse=True):
        shape = (ny // f, nx // f)
        if not 2 <= f <= k or shape[0] * shape[1] > MAX_READ * max_pixels or min(shape) < 1:
            continue
        k2 = decimation_factor(shape, max_pixels)
        if (shape[0] // k2) * (shape[1] // k2) == 0:
            continue
        if best is None or f * k2 < best[0] * best[1]:
            best = (f, k2)
    return best


def read_overview(path: Path, factor: int) -> tuple[np.ndarray, str]:
    """The overview of ``factor`` of a single-band file, as float32 with NaN for nodata, trimmed to
    the whole overview pixels (``(ny // factor, nx // factor)``), and its resampling name."""
    with rasterio.open(path) as src:
        level = src.overviews(1).index(factor)
        resampling = str(src.tags(1).get("RESAMPLING") or src.tags(ns="IMAGE_STRUCTURE").get("OVERVIEW_RESAMPLING")
                         or "")
        ny, nx = src.height // factor, src.width // factor
        nodata = src.nodata
    with rasterio.open(path, overview_level=level) as ov:
        arr = ov.read(1, window=((0, ny), (0, nx))).astype(np.float32)
    if nodata is not None and not np.isnan(nodata):
        arr[arr == np.float32(nodata)] = np.nan
    return arr, resampling


def overview_maps(paths: dict[str, Path], dem: xr.DataArray, *, k: int, max_pixels: int) -> OverviewMaps | None:
    """Maps ``ref`` and ``before``/``after`` from the overviews of ``paths`` (keys ``ref``, ``tba``,
    optional ``aligned``), on the grid of ``dem``; ``None`` when a file has no usable overview."""
    chosen = overview_factor(list(paths.values()), dem, k=k, max_pixels=max_pixels)
    if chosen is None:
        return None
    f, k2 = chosen
    read = {name: read_overview(p, f) for name, p in paths.items()}
    ref = read["ref"][0]
    rows, cols = (ref.shape[0] // k2) * k2, (ref.shape[1] // k2) * k2

    def small(a: np.ndarray) -> np.ndarray:
        return cell_means(a, k=k2) if k2 > 1 else a[:rows, :cols]

    maps = {"ref": small(ref)}
    for name, key in (("before", "tba"), ("after", "aligned")):
        if key in read:
            maps[name] = small(read[key][0] - ref)
    how = sorted({r for _, r in read.values() if r})
    how_text = "/".join(how) or "not recorded in the file, CUBIC for COGs written by xdem"
    return OverviewMaps(maps=maps, level_factor=f, block=k2, resampling=how_text)
