"""Inlier masks: which pixels are stable terrain, as lazy boolean arrays on a DEM's grid."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import xarray as xr

from xdem.errors import InputError, OverlapError
from xdem.io import remote
from xdem.io.grid import _reproject_like, align_pair, block_pixel_offsets, dask_data, get_transform, same_grid
from xdem.io.open import open_dem
from xdem.typing import GeoDataFrameLike, MaskLike, PathLike

__all__ = ["inlier_mask_like", "stable_mask_like", "rasterize_like", "labels_like", "read_polygons", "mask_path",
           "burn_shapes"]

_VECTOR_SUFFIXES = {".gpkg", ".shp", ".geojson", ".json", ".fgb", ".gml", ".kml", ".parquet"}


def burn_shapes(shapes: list, *, out_shape: tuple[int, int], transform: Any, dtype: str,
                all_touched: bool = False) -> np.ndarray:
    """:func:`rasterio.features.rasterize` of ``(geometry, value)`` pairs with fill 0, burnt into a
    GDAL in-memory (``MEM``) dataset instead of a numpy array.

    Given a numpy array, rasterize wraps it in an in-memory raster inside ``warnings.catch_warnings()``
    with ``simplefilter("ignore")``. That block swaps the process-wide filter list and is not
    thread-safe: interleaved with another thread's block (a second burn, dask's own ``nanmin`` chunks,
    any library's), it can leave "ignore every warning" installed for the rest of the process. 30 of
    30 threaded passes over 400 blocks did so here, after which no warning of the user's session
    (xdem's input checks included) was shown. Burnt into a dataset, rasterize enters no such block,
    so threads burn at once; the values are those of the numpy route (``tests/test_warning_filters.py``).

    Examples
    --------
    >>> from affine import Affine
    >>> from shapely import box
    >>> int(burn_shapes([(box(0, 0, 2, 3), 1)], out_shape=(4, 4), transform=Affine.identity(), dtype="uint8").sum())
    6
    """
    import rasterio
    from rasterio.features import rasterize

    height, width = out_shape
    # GDAL's MEM driver allocates its bands zeroed: the fill of 0
    with rasterio.open("", "w+", driver="MEM", width=width, height=height, count=1, dtype=dtype,
                       transform=transform) as ds:
        rasterize(shapes, out_shape=out_shape, transform=transform, all_touched=all_touched, dtype=dtype,
                  dst_path=ds)
        return ds.read(1)


def _rasterize_block(block: np.ndarray, *, geoms: list, transform, labels: bool = False,
                     block_info=None) -> np.ndarray:
    """One block of the burnt polygons: True inside (or, with ``labels``, ``i + 1`` inside polygon ``i``)."""
    from affine import Affine
    from shapely import box
    from shapely.strtree import STRtree

    row0, col0 = block_pixel_offsets(block_info)
    t = transform @ Affine.translation(col0, row0)
    ny, nx = block.shape
    empty = np.zeros(block.shape, dtype=np.int32 if labels else bool)
    if not any(g is not None for g in geoms):
        return empty
    x0, y0 = t @ (0, 0)
    x1, y1 = t @ (nx, ny)
    tree = STRtree([g if g is not None else box(0, 0, 0, 0) for g in geoms])
    hits = sorted(i for i in tree.query(box(min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)))
                  if geoms[i] is not None)
    if len(hits) == 0:
        return empty
    if labels:  # later polygons burn over earlier ones where they overlap
        return burn_shapes([(geoms[i], i + 1) for i in hits], out_shape=(ny, nx), transform=t, dtype="int32")
    burned = burn_shapes([(geoms[i], 1) for i in hits], out_shape=(ny, nx), transform=t, dtype="uint8")
    return burned.astype(bool)


def mask_path(mask: str | os.PathLike) -> Path | str:
    """The path a mask file is read from: a local ``Path`` (checked to exist), or for a URL or
    ``/vsi...`` path the GDAL path (:func:`xdem.io.remote.gdal_path`; GDAL and pyogrio read
    it), after the store said it is there (:func:`xdem.io.remote.check_object`).

    Raises
    ------
    xdem.errors.InputError
        The file is missing (one line naming it; for a URL, the store's answer).

    Examples
    --------
    >>> import xdem
    >>> mask_path(xdem.examples.get_path("lidar")).name
    'lidar_dem.tif'
    """
    if remote.is_remote(mask):
        remote.check_object(mask, label="mask")
        return remote.gdal_path(mask)
    path = Path(mask)
    if not path.exists():
        raise InputError(f"mask file not found: '{path}'")
    return path


def _read_vector(path: str | os.PathLike) -> Any:
    """``geopandas.read_file(path)`` (a local path or a GDAL ``/vsi...`` path), any failure
    (corrupt, truncated, not a vector file) as one :class:`~xdem.errors.InputError` naming
    the mask."""
    import geopandas as gpd

    try:
        return gpd.read_file(path)
    except Exception as exc:  # noqa: BLE001 - pyogrio/fiona/GDAL raise many types
        detail = remote.redact(" ".join(str(exc).split()) or type(exc).__name__)
        path = remote.redact(os.fspath(path))
        raise InputError(
            f"cannot read the vector mask '{path}' ({detail}); the file is corrupt, truncated or not a vector "
            "format GDAL reads (GeoPackage, Shapefile, GeoJSON...): export it again"
        ) from exc


def read_polygons(vector: PathLike | GeoDataFrameLike, crs: object) -> Any:
    """The polygons of ``vector`` (a vector file's path or a GeoDataFrame) in ``crs``, as a new
    GeoDataFrame (the caller's is never changed); one :class:`~xdem.errors.InputError` line for a
    file that cannot be read, something else than a GeoDataFrame, or one without a CRS."""
    import geopandas as gpd

    gdf = _read_vector(vector) if isinstance(vector, (str, os.PathLike)) else vector
    if not isinstance(gdf, gpd.GeoDataFrame):
        raise InputError(f"expected a vector file or GeoDataFrame, got {type(vector).__name__}")
    if gdf.crs is None:
        raise InputError("the vector mask has no CRS; set one, e.g. gdf.set_crs('EPSG:XXXX')")
    return gdf.to_crs(crs)


def rasterize_like(vector: PathLike | GeoDataFrameLike, dem: xr.DataArray) -> da.Array:
    """Lazy boolean array on ``dem``'s grid, True inside the polygons of ``vector``.

    ``vector`` is a path to a vector file or a :class:`geopandas.GeoDataFrame`; it is
    reprojected to the DEM's CRS once and burnt chunk by chunk (pixel centres inside).
    """
    gdf = read_polygons(vector, dem.rio.crs)
    geoms = [g for g in gdf.geometry if g is not None and not g.is_empty]
    return da.map_blocks(
        _rasterize_block, dask_data(dem), geoms=geoms, transform=get_transform(dem), dtype=bool,
        meta=np.array((), dtype=bool),
    )


def labels_like(vector: PathLike | GeoDataFrameLike, dem: xr.DataArray) -> da.Array:
    """Lazy int32 polygon index map on ``dem``'s grid: ``0`` outside every polygon, ``i + 1``
    inside the polygon of row ``i`` of ``vector`` (pixel centres inside; where polygons overlap,
    the later row wins), burnt chunk by chunk, so memory is one chunk whatever the DEM's size.

    Examples
    --------
    >>> from xdem.examples.glaciers import glacier_set
    >>> g = glacier_set((200, 200), chunks=100)
    >>> labels = labels_like(g.outlines, g.ref)
    >>> bool((labels.compute() == g.index.values).all())
    True
    """
    gdf = read_polygons(vector, dem.rio.crs)
    geoms = [None if g is None or g.is_empty else g for g in gdf.geometry]
    return da.map_blocks(
        _rasterize_block, dask_data(dem), geoms=geoms, transform=get_transform(dem), labels=True, dtype=np.int32,
        meta=np.array((), dtype=np.int32),
    )


def inlier_mask_like(mask: MaskLike, dem: xr.DataArray, *, exclude: bool = False) -> da.Array:
    """Lazy boolean inlier mask (True = stable, used for fitting) on ``dem``'s grid.

    Parameters
    ----------
    mask
        ``None`` (every pixel), a boolean DataArray or numpy array on the DEM's grid, a raster
        path (non-zero and not nodata = True), a vector file path or a GeoDataFrame
        (inside the polygons = True).
    dem
        The DEM whose grid and chunks the mask takes.
    exclude
        Invert the mask: the areas given are unstable terrain to EXCLUDE (e.g. glaciers).

    Examples
    --------
    >>> import xdem
    >>> dem = xdem.open_dem(xdem.examples.get_path("lidar"))
    >>> bool(inlier_mask_like(None, dem).all().compute())
    True
    """
    data = dask_data(dem)
    if mask is None:
        if exclude:
            raise InputError("exclude=True needs a mask of the areas to exclude")
        return da.ones(data.shape, dtype=bool, chunks=data.chunks)
    if isinstance(mask, (str, os.PathLike)):
        path: Path | str = mask_path(mask)
        said = str(path) if isinstance(path, Path) else remote.redact(os.fspath(mask))
        if remote.suffix(path) in _VECTOR_SUFFIXES:
            out = rasterize_like(path, dem)
        else:
            m = open_dem(path if isinstance(path, Path) else os.fspath(mask))
            m = (m.fillna(0) != 0).astype(np.float32)
            try:
                _, m = align_pair(dem, m, resampling="nearest")
            except OverlapError as exc:
                if exclude:  # excludes nothing (xdem.checks warns of it before the fit)
                    return da.ones(data.shape, dtype=bool, chunks=data.chunks)
                mb = tuple(round(v, 3) for v in m.rio.bounds())
                db = tuple(round(v, 3) for v in dem.rio.bounds())
                raise OverlapError(
                    f"the mask '{said}' does not overlap the DEM: mask bounds {mb} in {m.rio.crs}, DEM bounds {db} "
                    f"in {dem.rio.crs}; give a mask covering the reference DEM (and check its CRS)"
                ) from exc
            if m.shape != dem.shape:  # covers part of the DEM: nothing outside it is inlier (upstream's reprojection)
                m = _reproject_like(m, dem, resampling="nearest").fillna(0)
            out = m.data > 0.5
    elif isinstance(mask, xr.DataArray) and mask.rio.crs is not None and not same_grid(mask, dem):
        m = _reproject_like(mask.fillna(0).astype(np.float32), dem, resampling="nearest").fillna(0)
        out = m.data > 0.5  # a georeferenced mask on another grid: onto the DEM's (upstream's reprojection)
    elif isinstance(mask, xr.DataArray):
        if mask.shape != dem.shape:
            raise InputError(
                f"the inlier mask (shape {mask.shape}) is not on the reference grid (shape {dem.shape}); "
                "build it on the reference DEM's grid or pass a raster/vector file"
            )
        out = da.asarray(mask.data).astype(bool)
    elif isinstance(mask, np.ndarray):
        if mask.shape != dem.shape:
            raise InputError(f"the inlier mask has shape {mask.shape} but the reference DEM has {dem.shape}")
        out = da.from_array(mask.astype(bool), chunks=data.chunks)
    elif type(mask).__name__ == "GeoDataFrame":
        out = rasterize_like(mask, dem)
    elif type(mask).__name__ in ("Mask", "Raster") and hasattr(mask, "transform"):  # geoutils: its to_xarray
        return _geoutils_mask(mask, dem, exclude=exclude)  # fails on boolean rasters, read its .data
    elif type(mask).__name__ == "DEM" and hasattr(mask, "to_xarray"):  # an xdem.DEM (a comparison of DEMs)
        return inlier_mask_like(mask.to_xarray(), dem, exclude=exclude)
    else:
        raise InputError(
            f"cannot use a {type(mask).__name__} as inlier mask; pass a boolean DataArray, a raster or vector path, "
            "or a GeoDataFrame"
        )
    out = out.rechunk(data.chunks)
    return ~out if exclude else out


def _geoutils_mask(mask: Any, dem: xr.DataArray, *, exclude: bool) -> da.Array:
    """A geoutils Mask (or boolean Raster) on ``dem``'s grid: non-zero and not masked = True."""
    if tuple(mask.transform) != tuple(get_transform(dem)):
        raise InputError("the geoutils mask is not on the reference grid; build it on the reference DEM's grid")
    values = np.ma.filled(np.ma.asarray(mask.data), 0).squeeze() != 0
    return inlier_mask_like(values, dem, exclude=exclude)


def stable_mask_like(dem: xr.DataArray, *, inlier_mask: MaskLike = None, exclude_mask: MaskLike = None) -> da.Array:
    """Lazy boolean mask of the stable pixels on ``dem``'s grid: inside ``inlier_mask`` (areas
    to USE; ``None`` = everywhere) and outside ``exclude_mask`` (areas to EXCLUDE, e.g.
    glacier outlines; ``None`` = nothing excluded). Both accept what
    :func:`inlier_mask_like` accepts.

    Examples
    --------
    >>> import xdem
    >>> dem = xdem.open_dem(xdem.examples.get_path("lidar"))
    >>> bool(stable_mask_like(dem).all().compute())
    True
    """
    stable = inlier_mask_like(inlier_mask, dem)
    if exclude_mask is not None:
        stable = stable & inlier_mask_like(exclude_mask, dem, exclude=True)
    return stable
