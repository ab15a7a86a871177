"""Grids: the one grid type :class:`Grid`, transforms, CRS checks, per-block coordinates and lazy
pair alignment.

A raster grid is described one way in xdem: a :class:`Grid` (``shape``, corner ``transform``,
``crs`` text), taken from a DEM (:meth:`Grid.of`) or an open raster file
(:meth:`Grid.of_dataset`). The functions below read the parts of a DEM's grid directly
(:func:`get_transform`, :func:`grid_shape`, :func:`get_resolution`); odc-geo's ``GeoBox`` is
only built from a :class:`Grid` (:meth:`Grid.geobox`) to hand a reprojection to odc-geo.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import dask.array as da
import numpy as np
import xarray as xr
from affine import Affine
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph
from pyproj import CRS

from xdem.errors import CRSError, OverlapError
from xdem.io.sources import find_sources, region_reader, register_source
from xdem.typing import CRSLike

if TYPE_CHECKING:  # types only; odc-geo is imported when a reprojection needs it (about 0.2 s)
    import rasterio.crs
    import rasterio.io
    from dask.delayed import Delayed
    from odc.geo.geobox import GeoBox

__all__ = [
    "Grid",
    "crs_key",
    "same_crs",
    "get_transform",
    "grid_shape",
    "get_resolution",
    "signed_resolution",
    "shift_in_pixels",
    "shift_in_pixels_at",
    "check_projected",
    "block_pixel_offsets",
    "block_xy",
    "block_tasks",
    "read_region",
    "same_grid",
    "with_transform",
    "align_pair",
    "dask_data",
    "local_metric_crs",
    "reproject_to_crs",
]


@dataclass(frozen=True)
class Grid:
    """A raster grid: ``shape`` (rows, cols), corner ``transform`` (GDAL convention) and ``crs``
    (text, :func:`crs_key`): the one grid type of xdem.

    Examples
    --------
    >>> g = Grid((2, 3), Affine(10.0, 0.0, 500.0, 0.0, -10.0, 1000.0), "EPSG:32615")
    >>> g.bounds, g.resolution
    ((500.0, 980.0, 530.0, 1000.0), (10.0, 10.0))
    >>> g.same_as(Grid((2, 3), Affine(10.0, 0.0, 500.0, 0.0, -10.0, 1000.0), "EPSG:32615"))
    True
    """

    shape: tuple[int, int]
    transform: Affine
    crs: str

    @classmethod
    def of(cls, dem: xr.DataArray) -> Grid:
        """The grid of a DEM (its CRS is required: :class:`~xdem.errors.CRSError` otherwise)."""
        return cls(grid_shape(dem), dem.rio.transform(), crs_key(dem.rio.crs))

    @classmethod
    def of_dataset(cls, src: rasterio.io.DatasetReader) -> Grid:
        """The grid of an open raster file (a ``rasterio`` dataset; its CRS is required)."""
        return cls((int(src.height), int(src.width)), src.transform, crs_key(src.crs))

    def same_as(self, other: Grid, *, rtol: float = 1e-9) -> bool:
        """Same shape, CRS and transform (to ``rtol`` of the pixel size)."""
        if self.shape != other.shape or not same_crs(self.crs, other.crs):
            return False
        scale = max(abs(self.transform.a), abs(self.transform.e), abs(self.transform.b), abs(self.transform.d))
        return all(math.isclose(p, q, rel_tol=rtol, abs_tol=rtol * scale)
                   for p, q in zip(self.transform[:6], other.transform[:6]))

    def centres(self, rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Map coordinates of pixel centres at (broadcastable) ``rows`` and ``cols``."""
        t = self.transform
        c = np.asarray(cols, dtype=np.float64) + 0.5
        r = np.asarray(rows, dtype=np.float64) + 0.5
        return t.c + t.a * c + t.b * r, t.f + t.d * c + t.e * r

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        """``(xmin, ymin, xmax, ymax)`` of the outer pixel edges (a north-up grid)."""
        return _edges_bounds(self.transform, self.shape)

    @property
    def resolution(self) -> tuple[float, float]:
        """Pixel size ``(x, y)``, positive."""
        return abs(self.transform.a), abs(self.transform.e)

    def geobox(self) -> GeoBox:
        """This grid as odc-geo's ``GeoBox``, to hand a reprojection to odc-geo."""
        from odc.geo.geobox import GeoBox

        return GeoBox(self.shape, self.transform, self.crs)


def crs_key(crs: object) -> str:
    """A stable text form of a CRS (``"EPSG:32615"`` when it has a code, else WKT).

    Examples
    --------
    >>> crs_key("epsg:32615")
    'EPSG:32615'
    """
    if crs is None:
        raise CRSError("the DEM has no CRS; set one with dem.rio.write_crs('EPSG:XXXX')")
    return CRS.from_user_input(crs).to_string()


@lru_cache(maxsize=64)
def same_crs(a: str, b: str) -> bool:
    """Whether two CRS texts describe the same CRS."""
    return a == b or CRS.from_user_input(a) == CRS.from_user_input(b)


def _edges_bounds(t: Affine, shape: tuple[int, int]) -> tuple[float, float, float, float]:
    ny, nx = shape
    xs = (t.c, t.c + nx * t.a)
    ys = (t.f, t.f + ny * t.e)
    return min(xs), min(ys), max(xs), max(ys)


def dask_data(dem: xr.DataArray, *, chunks: int | tuple[int, int] | str = "auto") -> da.Array:
    """The lazy data of a DEM: its dask array, or a numpy-backed DEM's values wrapped in one
    (``chunks`` as :func:`dask.array.from_array`; ignored for dask-backed DEMs).

    Examples
    --------
    >>> import xarray as xr
    >>> dask_data(xr.DataArray(np.zeros((4, 4)), dims=("y", "x")), chunks=2).numblocks
    (2, 2)
    """
    data = dem.data
    return data if isinstance(data, da.Array) else da.from_array(np.asarray(data), chunks=chunks)


def get_transform(dem: xr.DataArray) -> Affine:
    """Affine transform of ``dem`` (corner of the upper-left pixel, GDAL convention).

    GDAL already turns a GeoTIFF ``AREA_OR_POINT=Point`` raster's transform into this
    corner convention, so pixel centres are always at ``transform @ (col + 0.5, row + 0.5)``
    and no further half-pixel shift must be applied.
    """
    return dem.rio.transform()


def grid_shape(dem: xr.DataArray | da.Array | np.ndarray) -> tuple[int, int]:
    """``(rows, cols)`` of a raster: the sizes of its last two axes.

    Examples
    --------
    >>> grid_shape(np.zeros((1, 3, 4)))
    (3, 4)
    """
    ny, nx = dem.shape[-2:]
    return int(ny), int(nx)


def with_transform(dem: xr.DataArray, transform: Affine) -> xr.DataArray:
    """Copy of ``dem`` (same data, no compute) placed on ``transform``.

    Both the ``x``/``y`` pixel-centre coordinates and the stored GeoTransform are rewritten,
    since rioxarray derives the transform from the coordinates.
    """
    ny, nx = dem.shape[-2:]
    x, y = block_xy(transform, 0, 0, (ny, nx))
    out = dem.assign_coords(x=x, y=y)
    return out.rio.write_transform(transform)


def get_resolution(dem: xr.DataArray) -> tuple[float, float]:
    """``(dx, dy)`` pixel sizes as positive numbers, in CRS units."""
    t = get_transform(dem)
    if t.b != 0 or t.d != 0:
        raise CRSError("rotated or sheared grids are not supported; warp the DEM to a north-up grid with gdalwarp")
    return abs(t.a), abs(t.e)


def signed_resolution(dem: xr.DataArray) -> tuple[float, float]:
    """``(res_x, res_y)`` as the kernels use it: negative if columns go west or rows go north."""
    dx, dy = get_resolution(dem)
    t = get_transform(dem)
    return (dx if t.a > 0 else -dx), (dy if t.e < 0 else -dy)


def shift_in_pixels(dem: xr.DataArray, shift_x: float, shift_y: float) -> tuple[float, float]:
    """``(drow, dcol)`` such that ``dem`` moved by ``(shift_x, shift_y)`` (``out(x, y) =
    dem(x - shift_x, y - shift_y)``) is, at row ``i`` and column ``j``, ``dem`` at row
    ``i + drow`` and column ``j + dcol`` (rows go south: a shift to the north adds rows)."""
    return shift_in_pixels_at(signed_resolution(dem), shift_x, shift_y)


def shift_in_pixels_at(resolution: tuple[float, float], shift_x: float, shift_y: float) -> tuple[float, float]:
    """:func:`shift_in_pixels` on a grid of ``resolution`` (``(res_x, res_y)`` as
    :func:`signed_resolution` gives it), for callers that read the resolution once.

    Examples
    --------
    >>> shift_in_pixels_at((5.0, -5.0), 10.0, 5.0)
    (-1.0, -2.0)
    """
    res_x, res_y = resolution
    return shift_y / res_y, -shift_x / res_x


def check_projected(dem: xr.DataArray, what: str = "this operation") -> None:
    """Raise :class:`~xdem.errors.CRSError` unless ``dem`` has a projected CRS."""
    crs = dem.rio.crs
    if crs is None:
        raise CRSError(f"{what} needs a DEM with a CRS; set one with dem.rio.write_crs('EPSG:XXXX')")
    if crs.is_geographic:
        raise CRSError(
            f"{what} needs a projected CRS (metres), but the DEM is in geographic {crs.to_string()}; "
            "reproject it first, e.g. dem.rio.reproject(dem.rio.estimate_utm_crs()) or gdalwarp -t_srs EPSG:326XX"
        )


def block_pixel_offsets(block_info: dict | None, depth: int = 0) -> tuple[int, int]:
    """Global ``(row, col)`` of the first pixel of a block passed to a ``map_blocks`` kernel.

    ``block_info`` is dask's ``block_info`` argument (its key ``0`` describes the first
    input). ``depth`` is the overlap added by ``map_overlap``; the returned offset is that
    of the first pixel *including* the overlap (it may be negative at the edges).
    """
    if block_info is None:
        return (-depth, -depth)
    loc = block_info[0]["array-location"]
    return (loc[0][0] - depth, loc[1][0] - depth)


def block_tasks(func: Callable[..., object], arrays: Sequence[da.Array], **kwargs: object) -> list[Delayed]:
    """One :func:`dask.delayed` call per block, row-major:
    ``func(*blocks_of_arrays, row0=, col0=, **kwargs)`` with the block's global offsets.

    ``arrays`` are dask arrays with the same chunks. Their blocks are taken without
    optimising each array apart (``optimize_graph=False``), so a block they share (e.g. the
    read of a DEM used by two of them) keeps one key and is computed once.
    """
    import dask

    first = arrays[0]
    rows = np.cumsum((0,) + first.chunks[0][:-1])
    cols = np.cumsum((0,) + first.chunks[1][:-1])
    blocks = [a.to_delayed(optimize_graph=False) for a in arrays]
    return [
        dask.delayed(func)(*[b[i, j] for b in blocks], row0=int(rows[i]), col0=int(cols[j]), **kwargs)
        for i in range(first.numblocks[0])
        for j in range(first.numblocks[1])
    ]


def read_region(arr: da.Array, rows: slice, cols: slice) -> da.Array:
    """``arr[rows, cols]`` of a 2-D lazy array, in blocks of ``arr``'s chunks cut by the region.

    When ``arr`` is a DEM read from a file (:func:`~xdem.io.sources.region_reader`), each block
    is read straight from the file in a task of its own: it decodes only the file's tiles under
    the block. A block cut from ``arr``'s chunk decodes the whole chunk, so passes over regions
    that cut chunks (rows of 1000-pixel tiles over 2048-pixel chunks) decode each chunk once per
    region meeting it. Otherwise (a derived array): ``arr[rows, cols]``. The same values either way.

    Examples
    --------
    >>> import xdem
    >>> dem = xdem.open_dem(xdem.examples.get_path("lidar"), chunks=64)
    >>> part = read_region(dem.data, slice(10, 100), slice(5, 70))
    >>> part.chunks
    ((54, 36), (59, 6))
    >>> bool(np.array_equal(part.compute(), dem.values[10:100, 5:70], equal_nan=True))
    True
    """
    sub = arr[rows, cols]
    read = region_reader(arr)
    if read is None:
        return sub
    (r0, r1, rstep), (c0, c1, cstep) = rows.indices(arr.shape[0]), cols.indices(arr.shape[1])
    if rstep != 1 or cstep != 1:
        return sub
    name = f"read-region-{tokenize(arr.name, r0, r1, c0, c1)}"
    re, ce = np.cumsum((r0,) + sub.chunks[0]), np.cumsum((c0,) + sub.chunks[1])
    dsk: dict[Any, Any] = {(name, i, j): (read, slice(int(re[i]), int(re[i + 1])), slice(int(ce[j]), int(ce[j + 1])))
                           for i in range(len(sub.chunks[0])) for j in range(len(sub.chunks[1]))}
    out = da.Array(HighLevelGraph({name: dsk}, {name: set()}), name, sub.chunks, meta=np.empty((0, 0), dtype=arr.dtype))
    for path in find_sources(arr):
        register_source(out, path)
    return out


def block_xy(
    transform: Affine, row0: int, col0: int, shape: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """1-D centre coordinates ``(x, y)`` of a block of ``shape`` starting at ``(row0, col0)``.

    Only 1-D vectors are built; broadcast them (``x[None, :]``, ``y[:, None]``) rather than
    materialising a full meshgrid.
    """
    cols = np.arange(col0, col0 + shape[1], dtype=np.float64) + 0.5
    rows = np.arange(row0, row0 + shape[0], dtype=np.float64) + 0.5
    x = transform.c + cols * transform.a
    y = transform.f + rows * transform.e
    return x, y


def same_grid(a: xr.DataArray, b: xr.DataArray, *, rtol: float = 1e-9) -> bool:
    """True if both DEMs share CRS, shape and transform."""
    if a.shape != b.shape or a.rio.crs != b.rio.crs:
        return False
    ta, tb = get_transform(a), get_transform(b)
    scale = max(abs(ta.a), abs(ta.e))
    return all(math.isclose(p, q, rel_tol=rtol, abs_tol=rtol * scale) for p, q in zip(ta[:6], tb[:6]))


def _bounds(dem: xr.DataArray) -> tuple[float, float, float, float]:
    return _edges_bounds(get_transform(dem), grid_shape(dem))


def _crop_to_bounds(dem: xr.DataArray, bounds: tuple[float, float, float, float]) -> xr.DataArray:
    """Crop ``dem`` by whole pixels to the pixels whose centres fall inside ``bounds``."""
    t = get_transform(dem)
    xmin, ymin, xmax, ymax = bounds
    inv = ~t
    c0, r0 = inv @ (xmin, ymax)
    c1, r1 = inv @ (xmax, ymin)
    cmin, cmax = sorted((c0, c1))
    rmin, rmax = sorted((r0, r1))
    c_start, c_stop = max(0, int(math.ceil(cmin - 0.5 - 1e-9))), min(dem.shape[1], int(math.floor(cmax - 0.5 + 1e-9)) + 1)
    r_start, r_stop = max(0, int(math.ceil(rmin - 0.5 - 1e-9))), min(dem.shape[0], int(math.floor(rmax - 0.5 + 1e-9)) + 1)
    if c_stop <= c_start or r_stop <= r_start:
        raise OverlapError("the DEMs do not overlap; check that both cover the same area and have the right CRS")
    out = dem.isel(y=slice(r_start, r_stop), x=slice(c_start, c_stop))
    return out.rio.write_transform(t @ Affine.translation(c_start, r_start))


def align_pair(
    ref: xr.DataArray, tba: xr.DataArray, *, resampling: str = "bilinear"
) -> tuple[xr.DataArray, xr.DataArray]:
    """Bring ``tba`` onto the grid of ``ref``, lazily, cropped to their overlap.

    Same grid: returned unchanged. Same CRS and pixel size with pixel-aligned origins: both
    are cropped by whole pixels (exact, no resampling). Otherwise ``tba`` is reprojected
    onto the reference grid (cropped to the overlap) with odc-geo's dask-aware
    ``xr_reproject``, which builds a lazy graph reading only the source chunks each output
    chunk needs.

    Returns
    -------
    (ref, tba)
        Two DataArrays on one grid.

    Raises
    ------
    xdem.errors.OverlapError
        The DEMs do not overlap.
    """
    if same_grid(ref, tba):
        return ref, tba
    rb = _bounds(ref)
    tb_crs = tba.rio.crs
    if tb_crs != ref.rio.crs:
        from rasterio.warp import transform_bounds

        tb = transform_bounds(tb_crs, ref.rio.crs, *_bounds(tba), densify_pts=21)
    else:
        tb = _bounds(tba)
    inter = (max(rb[0], tb[0]), max(rb[1], tb[1]), min(rb[2], tb[2]), min(rb[3], tb[3]))
    if inter[0] >= inter[2] or inter[1] >= inter[3]:
        raise OverlapError(
            f"the DEMs do not overlap: reference bounds {tuple(round(v, 3) for v in rb)}, "
            f"to-be-aligned bounds {tuple(round(v, 3) for v in tb)} (in {ref.rio.crs}); check both cover one area"
        )
    ref_c = _crop_to_bounds(ref, inter)
    tr, tt = get_transform(ref), get_transform(tba)
    if tb_crs == ref.rio.crs and math.isclose(tr.a, tt.a) and math.isclose(tr.e, tt.e):
        off_c = (tt.c - tr.c) / tr.a
        off_r = (tt.f - tr.f) / tr.e
        if abs(off_c - round(off_c)) < 1e-6 and abs(off_r - round(off_r)) < 1e-6:
            tba_c = _crop_to_bounds(tba, inter)
            if tba_c.shape == ref_c.shape:
                return ref_c, tba_c.assign_coords(x=ref_c["x"].values, y=ref_c["y"].values)
    return ref_c, _reproject_like(tba, ref_c, resampling=resampling)


def _reproject_like(src: xr.DataArray, like: xr.DataArray, *, resampling: str) -> xr.DataArray:
    """Lazy reprojection of ``src`` onto the grid of ``like`` with odc-geo."""
    gbox = Grid(grid_shape(like), get_transform(like), crs_key(like.rio.crs)).geobox()
    return _reproject_to_geobox(src, gbox, crs=like.rio.crs, resampling=resampling)


def _reproject_to_geobox(src: xr.DataArray, gbox: GeoBox, *, crs: Any, resampling: str) -> xr.DataArray:
    from odc.geo.xr import xr_reproject

    src = src.rio.write_nodata(np.nan, encoded=False)
    out = xr_reproject(src, gbox, resampling=resampling, dst_nodata=np.nan)
    out = out.rename({d: n for d, n in zip(out.dims, ("y", "x"))})
    data = out.data.astype(src.dtype, copy=False)
    x, y = block_xy(gbox.affine, 0, 0, (int(gbox.shape[0]), int(gbox.shape[1])))
    res = xr.DataArray(data, dims=("y", "x"), coords={"y": y, "x": x}, name=src.name)
    res = res.rio.write_crs(crs).rio.write_transform(gbox.affine)
    return res.rio.write_nodata(np.nan, encoded=False)


def local_metric_crs(dem: xr.DataArray) -> rasterio.crs.CRS:
    """The UTM CRS (WGS 84) of the centre of ``dem``: where a geographic DEM is coregistered.

    Raises
    ------
    xdem.errors.CRSError
        The DEM's coordinates are not longitudes/latitudes of its geographic CRS.
    """
    xmin, ymin, xmax, ymax = _bounds(dem)
    if not (-180.0 <= xmin <= xmax <= 360.0 and -90.0 <= ymin <= ymax <= 90.0):
        raise CRSError(
            f"the DEM's CRS {dem.rio.crs} is geographic but its bounds {tuple(round(v, 3) for v in (xmin, ymin, xmax, ymax))} "
            "are not longitudes/latitudes; set its real CRS with dem.rio.write_crs(...) or gdal_edit.py -a_srs"
        )
    try:
        return dem.rio.estimate_utm_crs()
    except RuntimeError as exc:
        raise CRSError(f"no UTM zone found for a DEM in {dem.rio.crs} ({exc}); reproject it to a projected CRS first") from exc


def reproject_to_crs(dem: xr.DataArray, crs: CRSLike, *, resampling: str = "bilinear") -> xr.DataArray:
    """Lazily reproject ``dem`` into ``crs`` on a grid covering it with square pixels of about
    the same ground size (odc-geo's ``GeoBox.to_crs(resolution="auto")``)."""
    gbox = Grid.of(dem).geobox().to_crs(crs, resolution="auto")
    return _reproject_to_geobox(dem, gbox, crs=crs, resampling=resampling)
