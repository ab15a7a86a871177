"""Open DEMs lazily as dask-backed :class:`xarray.DataArray` objects."""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import psutil
import rasterio
import rasterio.windows
import rioxarray  # noqa: F401  (registers the .rio accessor)
import xarray as xr
from rasterio.errors import RasterioIOError

from xdem.errors import ChunkSizeError, CRSError, InputError, OutputError, ReadError
from xdem.io import _spill, remote
from xdem.io import zarr_store as zs
from xdem.io.grid import dask_data, grid_shape
from xdem.io.sources import register_region_reader, register_source
from xdem.kernels.nodata import nan_where_equal
from xdem.typing import DEMLike

__all__ = ["open_dem", "open_zarr_dem", "auto_chunks", "DEFAULT_CHUNK_PIXELS"]

#: Target side of an in-memory chunk, in pixels, when ``chunks="auto"``.
DEFAULT_CHUNK_PIXELS = 2048
#: A chunk of a remote DEM whose read fails (a dropped connection: GDAL retries 5xx answers
#: itself, not broken transfers) is read again this many times, after 0.5 s, 1 s...
REMOTE_READ_RETRIES = 2
REMOTE_RETRY_DELAY_S = 0.5


def _round_to_multiple(value: int, base: int, size: int) -> int:
    """Round ``value`` up to a multiple of ``base``, capped at ``size``."""
    if base <= 0:
        return min(value, size)
    return int(min(size, max(base, int(np.ceil(value / base)) * base)))


def auto_chunks(
    shape: tuple[int, int], block_shape: tuple[int, int] | None = None, *, target: int = DEFAULT_CHUNK_PIXELS
) -> tuple[int, int]:
    """Chunk shape for a raster: about ``target`` pixels a side, a multiple of its tiles.

    Parameters
    ----------
    shape
        ``(rows, cols)`` of the raster.
    block_shape
        ``(rows, cols)`` of the file's internal blocks (tiles or strips), if any.
    target
        Wanted chunk side in pixels.

    Examples
    --------
    >>> auto_chunks((10000, 10000), (512, 512))
    (2048, 2048)
    """
    rows, cols = shape
    brow, bcol = block_shape if block_shape else (1, 1)
    if bcol >= cols:  # strips: full-width blocks, choose rows to keep about target**2 pixels
        crow = _round_to_multiple(max(1, target * target // max(cols, 1)), brow, rows)
        return (crow, cols)
    return (_round_to_multiple(target, brow, rows), _round_to_multiple(target, bcol, cols))


def _check_chunk_memory(chunks: tuple[int, int], itemsize: int = 8) -> None:
    """Refuse chunks so large that a few of them cannot fit in available memory."""
    need = chunks[0] * chunks[1] * itemsize * 16  # a kernel holds about 16 chunk-sized temporaries
    avail = psutil.virtual_memory().available
    if need > avail:
        raise ChunkSizeError(
            f"chunks of {chunks[0]} x {chunks[1]} pixels need about {need / 2**30:.1f} GiB per task "
            f"but only {avail / 2**30:.1f} GiB is available; pass smaller chunks, e.g. chunks=2048"
        )


def _normalise_chunks(chunks: Any, shape: tuple[int, int], block_shape: tuple[int, int] | None) -> tuple[int, int]:
    if chunks is None or chunks == "auto":
        out = auto_chunks(shape, block_shape)
    elif isinstance(chunks, (int, np.integer)):
        if chunks <= 0:
            raise InputError(f"chunks must be a positive number of pixels, got {chunks}")
        out = (min(int(chunks), shape[0]), min(int(chunks), shape[1]))
    elif isinstance(chunks, (tuple, list)) and len(chunks) == 2:
        if min(int(c) for c in chunks) <= 0:
            raise InputError(f"chunks must be positive numbers of pixels, got {chunks}")
        out = (min(int(chunks[0]), shape[0]), min(int(chunks[1]), shape[1]))
    else:
        raise InputError(f"chunks must be 'auto', an int or a (rows, cols) tuple, got {chunks!r}")
    _check_chunk_memory(out)
    return out


def _float_dtype(dtype: np.dtype) -> np.dtype:
    """Floating dtype used for a DEM of ``dtype``: float64 stays, everything else is float32."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def _nodata_of(arr: xr.DataArray, nodata: float | None) -> float | None:
    """The value read as nodata: ``nodata`` if given, else the file's (decoded or encoded)."""
    value = arr.rio.nodata if nodata is None else nodata
    return arr.rio.encoded_nodata if value is None else value


def _nodata_to_nan(data: da.Array, value: float) -> da.Array:
    """``da.where(data == value, nan, data)`` (``value`` in the data's dtype), one compiled pass a
    chunk (:func:`xdem.kernels.nodata.nan_where_equal`)."""
    return da.map_blocks(nan_where_equal, data, value=float(value), dtype=data.dtype, token="nodata-to-nan",
                         meta=np.empty((0,) * data.ndim, dtype=data.dtype))


def _finish(arr: xr.DataArray, nodata: float | None, name: Hashable | None, *, nan_done: bool = False) -> xr.DataArray:
    """Cast to float, turn nodata into NaN (unless ``nan_done``: the reader did), drop the band
    axis, keep georeferencing."""
    if "band" in arr.dims:
        arr = arr.squeeze("band", drop=True)
    elif "band" in arr.coords:
        arr = arr.drop_vars("band")
    if arr.ndim != 2:
        raise InputError(f"a DEM must be 2-D (y, x), got dims {arr.dims}; select one band first")
    crs = arr.rio.crs
    transform = arr.rio.transform(recalc=False)
    file_nodata = _nodata_of(arr, nodata)
    fdtype = _float_dtype(arr.dtype)
    data = dask_data(arr, chunks=auto_chunks(grid_shape(arr))).astype(fdtype, copy=False)
    if file_nodata is not None and not np.isnan(file_nodata) and not nan_done:
        data = _nodata_to_nan(data, file_nodata)
    out = xr.DataArray(data, dims=("y", "x"), coords={"y": arr["y"].values, "x": arr["x"].values}, name=name)
    attrs = {k: v for k, v in arr.attrs.items() if k in ("AREA_OR_POINT", "units", "long_name")}
    out.attrs.update(attrs)
    if crs is not None:
        out = out.rio.write_crs(crs)
    out = out.rio.write_transform(transform)
    out = out.rio.write_nodata(np.nan, encoded=False)
    return out


def _check_not_truncated(src: Any, path: Path | str, *, max_blocks: int = 200_000) -> None:
    """Refuse a GeoTIFF whose blocks end beyond the end of the file (a truncated copy).

    Only TIFF metadata is read (block offsets and sizes); files with more than ``max_blocks``
    blocks are not checked.
    """
    if src.driver not in ("GTiff", "COG") or not src.block_shapes or isinstance(path, str):
        return  # a remote file's size is the server's: GDAL reports a short read itself
    brows, bcols = src.block_shapes[0]
    nby, nbx = -(-src.height // brows), -(-src.width // bcols)
    if nby * nbx > max_blocks:
        return
    size = path.stat().st_size
    bidx = src.count  # the last band's blocks come last in band-interleaved files
    for i in range(nby):
        for j in range(nbx):
            off = src.get_tag_item(f"BLOCK_OFFSET_{j}_{i}", "TIFF", bidx=bidx)
            if not off or int(off) == 0:
                continue  # sparse (never written) block
            nbytes = src.get_tag_item(f"BLOCK_SIZE_{j}_{i}", "TIFF", bidx=bidx)
            if int(off) + int(nbytes or 0) > size:
                raise InputError(
                    f"'{path}' is truncated or corrupt (block {i},{j} ends at byte {int(off) + int(nbytes or 0)} "
                    f"of a {size}-byte file); copy or download it again"
                )


def _check_vrt_sources(src: Any, path: Path | str) -> None:
    """Refuse a VRT one of whose (local) source files is missing, naming both."""
    if src.driver != "VRT":
        return
    for f in src.files[1:]:
        if "://" in f or f.startswith("/vsi"):
            continue  # remote or virtual: checked when read
        if not Path(f).exists():
            raise ReadError(f"the VRT '{path}' refers to a missing source file '{f}'; restore it or rebuild the VRT")


class _NamedReader:
    """Array-like over a lazily opened raster for :func:`dask.array.from_array`: a read error
    inside a dask task becomes one :class:`~xdem.errors.ReadError` naming the file, the window
    and (from GDAL's message) the damaged tile or missing source."""

    def __init__(self, lazy: xr.DataArray, path: Path | str, *, band: int = 1, spill_id: str | None = None,
                 chunks: tuple[int, int] = (1, 1), nan_value: float | None = None) -> None:
        self.lazy = lazy
        self.path = path
        self.band = band
        self.shape = lazy.shape
        self.dtype = lazy.dtype
        self.ndim = lazy.ndim
        #: name of this file's spill (:mod:`xdem.io._spill`), ``None``: never spilled
        self.spill_id = spill_id
        self.chunks = chunks
        #: the value made NaN in each decoded block, in place (a floating file's nodata), or ``None``
        self.nan_value = nan_value

    def _spill(self, key: tuple[slice, ...]) -> _spill.SpillFile | None:
        """This file's spill in the active run (:func:`xdem.io._spill.spill_scope`), if any and
        if ``key`` reads the band (``(band, rows, cols)``, the band axis ``0:1``)."""
        spill = _spill.active_spill() if self.spill_id is not None else None
        if spill is None or not (isinstance(self.path, str) or spill.local_files):  # a local file: if the run asks
            return None
        if len(key) != 3 or not all(isinstance(k, slice) for k in key) or key[0].indices(1) != (0, 1, 1):
            return None
        return spill.file(self.spill_id or "", shape=(self.shape[-2], self.shape[-1]), dtype=np.dtype(self.dtype),
                          chunks=self.chunks)

    def __getitem__(self, key: tuple[slice, ...]) -> np.ndarray:
        spill = self._spill(key)
        if spill is not None and (values := spill.get(key[1], key[2])) is not None:
            return self._nan(values[None])
        data = self._decode(key)
        if spill is not None:
            spill.put(key[1], key[2], data[0])
        return self._nan(data)

    def _nan(self, data: np.ndarray) -> np.ndarray:
        """``data`` (a block this reader just decoded, or read from its spill: its own) with
        :attr:`nan_value` made NaN in place: no second chunk-sized array per block."""
        if self.nan_value is None:
            return data
        return nan_where_equal(data, value=self.nan_value, in_place=True)

    def _decode(self, key: tuple[slice, ...]) -> np.ndarray:
        """``key`` read (decoded) from the file, retried for a remote file."""
        remote_path = isinstance(self.path, str)
        for attempt in range(1 + (REMOTE_READ_RETRIES if remote_path else 0)):
            try:
                if attempt:
                    return self._read_uncached(key)
                return np.asarray(self.lazy[key].values)
            except Exception as exc:  # noqa: BLE001 - rasterio/GDAL raise many types
                message = _read_error_message(self.path, self.shape, key, exc, attempts=attempt + 1)
            if remote_path and attempt < REMOTE_READ_RETRIES:
                time.sleep(REMOTE_RETRY_DELAY_S * 2**attempt)  # GDAL retried 5xx itself; this is a broken transfer
        # raised outside the except block, without cause or context: GDAL's CPLE_* exceptions
        # do not survive pickling, and distributed would then replace ours by a bare Exception
        raise ReadError(message)

    def _read_uncached(self, key: tuple[slice, ...]) -> np.ndarray:
        """Read ``key`` again from a fresh open of the remote file whose cached bytes GDAL drops
        (``CPL_VSIL_CURL_NON_CACHED``): a broken transfer may have left a bad block in the cache."""
        rows, cols = key[-2].indices(self.shape[-2]), key[-1].indices(self.shape[-1])
        window = rasterio.windows.Window(cols[0], rows[0], cols[1] - cols[0], rows[1] - rows[0])
        with rasterio.Env(CPL_VSIL_CURL_NON_CACHED=str(self.path)), rasterio.open(self.path) as src:
            data = src.read(self.band, window=window)
        return data[None][key[0]] if self.ndim == 3 else data


class _RegionReader:
    """Any region of an opened DEM read straight from its file, with :func:`_finish`'s casts:
    the same values as the lazy DEM's chunks hold there (see
    :func:`xdem.io.sources.register_region_reader`). In a run that spills the file
    (:mod:`xdem.io._spill`), the whole chunks under the region not stored yet are decoded and
    stored first, and the region read from the spill: a region cutting chunks (a group of
    blockwise tiles) then decodes, or downloads, each chunk once in the run, as chunk reads do."""

    def __init__(self, reader: _NamedReader, dtype: np.dtype, nodata: float | None) -> None:
        self.reader = reader
        self.dtype = np.dtype(dtype)
        self.nodata = nodata

    def __call__(self, rows: slice, cols: slice) -> np.ndarray:
        key = (slice(0, 1), rows, cols)
        spill = self.reader._spill(key)
        if spill is not None:  # a file spilled in this run: its chunks under the region decoded once, whole
            for whole_rows, whole_cols in spill.missing(rows, cols):
                self.reader[(slice(0, 1), whole_rows, whole_cols)]
        data = self.reader[key][0].astype(self.dtype, copy=False)
        if self.nodata is not None and not np.isnan(self.nodata) and self.reader.nan_value is None:  # else: done
            data = np.where(data == self.dtype.type(self.nodata), self.dtype.type(np.nan), data)
        return data


def _read_error_message(path: Path | str, shape: tuple[int, ...], key: tuple[slice, ...], exc: BaseException,
                        *, attempts: int = 1) -> str:
    import re

    shown = remote.redact(remote.fsspec_url(path) or str(path)) if isinstance(path, str) else str(path)
    rows, cols = key[-2].indices(shape[-2]), key[-1].indices(shape[-1])
    detail = " ".join(dict.fromkeys(str(e) for e in (exc.__cause__, exc.__context__, exc) if e is not None))
    where = f"rows {rows[0]}-{rows[1] - 1}, columns {cols[0]}-{cols[1] - 1}"
    tile = re.search(r"X offset (\d+), Y offset (\d+)", detail)
    if tile:
        where += f", tile column {tile.group(1)} row {tile.group(2)}"
    missing = re.search(r"([^\s:']+): No such file or directory", detail)
    if missing:
        return (f"cannot read '{shown}' ({where}): its source '{missing.group(1)}' is missing; "
                "restore it or rebuild the VRT")
    detail = detail.replace("Read failed. See previous exception for details.", "").strip() or type(exc).__name__
    if isinstance(path, str):  # remote: a broken transfer looks like a damaged tile to GDAL
        return (f"cannot read '{shown}' ({where}: {detail}) after {attempts} attempts; the connection failed or the "
                "file is damaged: check the network and the server, then run again")
    return f"cannot read '{shown}' ({where}: {detail}); the file is damaged: copy or download it again"


def _open_lazily(path: Path | str, *, band: int, ck: tuple[int, int], spill: bool = False,
                 nodata: float | None = None) -> tuple[xr.DataArray, _NamedReader]:
    """The band of ``path`` (a local path or a GDAL ``/vsi...`` path) as a dask-backed DataArray
    read through :class:`_NamedReader`, and that reader (whose decoded chunks go to the run's
    spill, :mod:`xdem.io._spill`, if ``spill``). A floating band's nodata (``nodata``, else the
    file's) is made NaN by the reader as it decodes (its ``nan_value``); :func:`_finish` then
    leaves it."""
    import dask.base

    opened = rioxarray.open_rasterio(path, lock=False, masked=False, cache=False)
    if not isinstance(opened, xr.DataArray):  # a Dataset or list of them: a file of subdatasets
        raise TypeError(f"it opens as a {type(opened).__name__} of subdatasets, not as one raster")
    lazy = opened.isel(band=[band - 1])
    nan_value = _nodata_of(lazy, nodata)
    if nan_value is None or np.isnan(nan_value) or _float_dtype(lazy.dtype) != lazy.dtype:
        nan_value = None  # nothing to replace, or replaced after the cast to float (_finish)
    if isinstance(path, str):  # remote: the URL names it (no local stat)
        token = dask.base.tokenize(path, band, ck, nan_value)
    else:
        stat = path.stat()
        token = dask.base.tokenize(str(path.resolve()), stat.st_mtime_ns, stat.st_size, band, ck, nan_value)
    name = f"open_dem-{_stem(path)}-{token}"
    reader = _NamedReader(lazy, path, band=band, spill_id=name if spill else None, chunks=ck, nan_value=nan_value)
    data = da.from_array(reader, chunks=(1, ck[0], ck[1]), lock=False, name=name, meta=np.array((), dtype=lazy.dtype))
    return lazy.copy(data=data), reader


def _stem(path: Path | str) -> str:
    """The file name without suffix of a local path or of a URL / ``/vsi...`` path."""
    return Path(str(path).split("?")[0]).stem


def _open_path(path: Path | str, *, chunks: Any, band: int | None, nodata: float | None) -> xr.DataArray:
    """:func:`open_dem` of a raster file (local ``Path``, or a GDAL ``/vsi...`` path as a ``str``),
    with one ``nodata`` value (or the file's)."""
    if isinstance(path, str):
        remote.check_remote(path)
    elif not path.exists():
        raise InputError(f"DEM file not found: '{path}'; check the path")
    elif path.is_dir():
        raise InputError(f"'{path}' is a folder, not a raster file; pass a GeoTIFF, COG or VRT")
    shown = remote.redact(str(path))
    try:
        with rasterio.Env(**remote.HTTP_OPTIONS), rasterio.open(path) as src:
            count = src.count
            shape = (src.height, src.width)
            block_shape = src.block_shapes[0] if src.block_shapes else None
            has_crs = src.crs is not None
            # a remote file's second download costs more than a local raw copy (xdem.io._spill); a
            # local compressed file or VRT only when the run's spill asks (XDEM_SPILL=1, or a blockwise
            # run: Spill.local_files): its page-cache writes cost more system time than a second
            # decode's user time where measured, less than a blockwise fit's extra decodes
            spill = isinstance(path, str) or src.driver == "VRT" or src.compression is not None
            _check_not_truncated(src, path)
            _check_vrt_sources(src, path)
    except RasterioIOError as exc:
        raise InputError(f"cannot read '{shown}' as a raster ({remote.redact(str(exc))}); is it a GeoTIFF/COG/VRT "
                         "and not corrupt?") from exc
    if band is None:
        if count != 1:
            raise InputError(f"'{shown}' has {count} bands; choose one with band=N (1 to {count})")
        band = 1
    if not 1 <= band <= count:
        raise InputError(f"band={band} is out of range for '{shown}', which has {count} band(s)")
    if not has_crs:
        raise CRSError(f"'{shown}' has no CRS; assign one first, e.g. gdal_edit.py -a_srs EPSG:XXXX '{shown}'")
    ck = _normalise_chunks(chunks, shape, tuple(block_shape) if block_shape else None)
    try:
        arr, reader = _open_lazily(path, band=band, ck=ck, spill=spill, nodata=nodata)
    except Exception as exc:  # rasterio raises many types for corrupt files
        raise InputError(f"cannot read '{shown}' as a raster ({remote.redact(str(exc))}); is it a GeoTIFF/COG/VRT "
                         "and not corrupt?") from exc
    if isinstance(path, Path):
        register_source(arr.data, path)  # lets writers refuse to overwrite this input
    out = _finish(arr, nodata, name=_stem(path), nan_done=reader.nan_value is not None)
    register_region_reader(out, _RegionReader(reader, out.dtype, _nodata_of(arr, nodata)))
    return out


def _mask_and_scale(dem: xr.DataArray, values: Sequence[float], scale: float) -> xr.DataArray:
    """``dem`` with every value of ``values`` made NaN, then multiplied by ``scale``, lazily.

    The result is derived (no region reader: :func:`xdem.io.sources.region_reader` gives
    ``None``), so nothing reads the file's raw values for it, e.g. from overviews."""
    data = dem.data
    dtype = data.dtype
    for value in values:
        if not np.isnan(value):
            data = _nodata_to_nan(data, value)
    if scale != 1.0:
        data = data * dtype.type(scale)
    return dem.copy(data=data)


def open_dem(
    source: DEMLike,
    *,
    chunks: int | tuple[int, int] | str = "auto",
    band: int | None = None,
    nodata: float | Sequence[float] | None = None,
    allow_incomplete: bool = False,
    vertical_scale: float = 1.0,
) -> xr.DataArray:
    """Open a DEM lazily as a 2-D, floating-point, dask-backed DataArray.

    Only metadata is read. Nodata (the file's, or ``nodata``) becomes NaN, integer DEMs
    become float32, and the CRS and transform are kept on ``.rio``.

    Parameters
    ----------
    source
        A path to anything rasterio opens (GeoTIFF, COG, VRT), a Zarr store holding one 2-D
        variable with a ``spatial_ref`` grid mapping (``*.zarr``, see :func:`xdem.write_zarr`;
        its chunks are a multiple of the store's), an :class:`xarray.DataArray`
        with rioxarray georeferencing (numpy- or dask-backed), or a :class:`geoutils.Raster`.
    chunks
        ``"auto"`` (default: about 2048 pixels a side, a multiple of the file's tiles), an int
        (square chunks) or a ``(rows, cols)`` tuple.
    band
        Band to read, starting at 1. ``None`` requires a single-band source.
    nodata
        Value to treat as nodata instead of the file's own, or several values instead of it
        (e.g. the file's and an undeclared void sentinel such as -9999, see
        :mod:`xdem.checks`): all become NaN.
    allow_incomplete
        Read a Zarr store whose writer stopped before the end (refused by default: chunks not
        yet written read as nodata).
    vertical_scale
        Factor multiplying the elevations (after nodata), lazily: e.g. 0.3048 for a DEM in
        feet, to metres.

    Returns
    -------
    xarray.DataArray
        Dims ``("y", "x")``, dask-backed, float32 or float64, NaN where there is no data.

    Raises
    ------
    xdem.errors.InputError
        Missing or unreadable file, several bands and no ``band``, bad ``chunks``, a folder
        that is not a Zarr store, an incomplete Zarr store.
    xdem.errors.CRSError
        The source has no CRS.

    Examples
    --------
    >>> import xdem
    >>> dem = xdem.open_dem(xdem.examples.get_path("lidar"))
    >>> dem.dims, str(dem.dtype)
    (('y', 'x'), 'float32')

    A DEM in feet, with voids of -9999 its file does not declare:

    >>> feet = xdem.open_dem(xdem.examples.get_path("lidar"), nodata=[-9999.0], vertical_scale=0.3048)
    """
    if nodata is None:
        values: list[float] = []
    elif isinstance(nodata, Sequence) or isinstance(nodata, np.ndarray):
        values = [float(v) for v in nodata]
    else:
        values = [float(nodata)]
    if not (np.isfinite(vertical_scale) and vertical_scale > 0):
        raise InputError(f"vertical_scale must be a positive number, got {vertical_scale!r}")
    dem = _open_dem(source, chunks=chunks, band=band, nodata=values[0] if values else None,
                    allow_incomplete=allow_incomplete)
    if len(values) > 1 or vertical_scale != 1.0:
        dem = _mask_and_scale(dem, values[1:], float(vertical_scale)).rio.write_nodata(np.nan, encoded=False)
    return dem


def _open_dem(source: DEMLike, *, chunks: Any, band: int | None, nodata: float | None,
              allow_incomplete: bool) -> xr.DataArray:
    """:func:`open_dem` with at most one nodata value and no scale."""
    if isinstance(source, str) and remote.is_remote(source) and zs.is_zarr_path(source):
        return open_zarr_dem(source, chunks=chunks, band=band, nodata=nodata, allow_incomplete=allow_incomplete)
    if isinstance(source, str) and remote.is_remote(source):
        return _open_path(remote.gdal_path(source), chunks=chunks, band=band, nodata=nodata)
    if isinstance(source, (str, os.PathLike)):
        if zs.is_zarr_path(source):
            return open_zarr_dem(Path(os.path.abspath(os.fspath(source))), chunks=chunks, band=band, nodata=nodata,
                                 allow_incomplete=allow_incomplete)
        return _open_path(Path(source), chunks=chunks, band=band, nodata=nodata)
    if isinstance(source, xr.DataArray):
        return _open_dataarray(source, chunks=chunks, band=band, nodata=nodata)
    if type(source).__name__ in ("Raster", "DEM") and hasattr(source, "to_xarray"):  # geoutils' and xdem.DEM
        return _open_dataarray(source.to_xarray(), chunks=chunks, band=band, nodata=nodata)
    raise InputError(
        f"cannot open a DEM from a {type(source).__name__}; pass a file path, an xarray.DataArray or a geoutils.Raster"
    )


def _open_dataarray(arr: xr.DataArray, *, chunks: Any, band: int | None, nodata: float | None) -> xr.DataArray:
    if "band" in arr.dims and arr.sizes["band"] > 1:
        if band is None:
            raise InputError(f"the DataArray has {arr.sizes['band']} bands; choose one with band=N")
        arr = arr.isel(band=[band - 1])
    elif "band" in arr.dims and band not in (None, 1):
        raise InputError(f"band={band} is out of range: the DataArray has 1 band")
    if arr.rio.crs is None:
        raise CRSError("the DataArray has no CRS; set one with dem.rio.write_crs('EPSG:XXXX')")
    if arr.rio.x_dim != "x" or arr.rio.y_dim != "y":
        arr = arr.rename({arr.rio.y_dim: "y", arr.rio.x_dim: "x"})
    shape = (arr.sizes["y"], arr.sizes["x"])
    data = arr.data
    if isinstance(data, da.Array) and chunks == "auto":
        pass  # keep the caller's chunking
    else:
        ck = _normalise_chunks(chunks, shape, None)
        arr = arr.chunk({"y": ck[0], "x": ck[1]} if "band" not in arr.dims else {"band": 1, "y": ck[0], "x": ck[1]})
    return _finish(arr, nodata, name=arr.name)


# ---------------------------------------------------------------------------- Zarr stores


def _open_dataset(store: zs.Store) -> xr.Dataset:
    with warnings.catch_warnings():  # non-consolidated stores, and .xdem/ is not a Zarr node
        warnings.filterwarnings("ignore", message=".*consolidated.*")
        warnings.filterwarnings("ignore", message=".*not recognized as a component of a Zarr hierarchy.*")
        return xr.open_zarr(store.zarr_store(read_only=True), chunks=None, mask_and_scale=False, decode_coords="all")


def _dem_variable(ds: xr.Dataset, path: Path | str) -> str:
    names = [str(n) for n, v in ds.data_vars.items() if v.ndim == 2]
    if len(names) != 1:
        found = "none" if not names else ", ".join(names)
        raise InputError(f"'{path}' is not a DEM store: it must hold exactly one 2-D variable (found {found}); "
                         "open the one you want with xarray.open_zarr and pass that DataArray to open_dem")
    return names[0]


class ZarrRegionReader:
    """Any region of a DEM store's variable, nodata as NaN, as :func:`_finish`
    casts it: a region reader (:func:`xdem.io.sources.register_region_reader`)."""

    def __init__(self, path: Path | str, variable: str, dtype: np.dtype, nodata: float | None) -> None:
        self.path = str(path)
        self.variable = variable
        self.dtype = np.dtype(dtype)
        self.nodata = nodata

    def __call__(self, rows: slice, cols: slice) -> np.ndarray:
        arr = zs.open_array(self.path, self.variable, mode="r")
        data = np.asarray(arr[rows, cols]).astype(self.dtype, copy=False)
        if self.nodata is not None and not np.isnan(self.nodata):
            data = np.where(data == self.dtype.type(self.nodata), self.dtype.type(np.nan), data)
        return data


def _lazy_data(store: zs.Store, variable: str, ck: tuple[int, int]) -> Any:
    """The variable's chunks as a dask array with a name that depends only on the store's path,
    metadata and completion times (ETags in object storage) and on ``ck`` (so that the same
    store opened twice, even in two processes, gives the same graph: what a resumed write's
    fingerprint compares)."""
    import dask.base

    stamps = [(name, stamp) for name in ("zarr.json", f"{zs.BOOK}/{zs.COMPLETE}")
              if (stamp := store.stamp(*name.split("/"))) is not None]
    where = store.url if store.remote else str(Path(store.url).resolve())
    token = dask.base.tokenize(where, variable, stamps, ck)
    arr = zs.open_array(store.url, variable, mode="r")
    return da.from_array(arr, chunks=ck, lock=False, name=f"open_dem-{Path(store.name).stem}-{token}",
                         meta=np.array((), dtype=arr.dtype))


def open_zarr_dem(path: Path | str, *, chunks: int | tuple[int, int] | str, band: int | None, nodata: float | None,
                  allow_incomplete: bool = False) -> xr.DataArray:
    """Open the DEM of a Zarr store lazily (the :func:`xdem.open_dem` path for stores): a local
    path or an ``s3://`` URL.

    Chunks are a multiple of the store's chunks (``"auto"``) or as given.
    """
    store = zs.locate(path)
    path = store.url if store.remote else Path(store.url)
    try:
        status = zs.answered(store, store.status)
    except OutputError as exc:
        raise InputError(str(exc).replace("output store", "DEM store", 1)) from None
    if status == "missing":
        raise InputError(f"DEM store not found: '{path}'; check the path")
    if status == "other":
        raise InputError(f"'{path}' is not a Zarr store (no zarr.json at its root); pass a GeoTIFF, COG, VRT or a "
                         "Zarr store written by xdem.write_zarr or xarray's to_zarr")
    if status == "incomplete" and not allow_incomplete:
        raise InputError(f"'{path}' is an incomplete Zarr store (its writer stopped before the end); finish it with "
                         "write_zarr(..., resume=True) / --resume, or pass allow_incomplete=True to read it anyway")
    if band not in (None, 1):
        raise InputError(f"band={band} is out of range for the Zarr store '{path}', which holds one DEM")
    try:
        ds = _open_dataset(store)
    except Exception as exc:  # zarr raises many types for damaged metadata
        raise InputError(f"cannot read '{path}' as a Zarr store ({type(exc).__name__}: {exc}); is it complete and "
                         "not corrupt?") from exc
    name = _dem_variable(ds, path)
    arr = ds[name]
    if arr.rio.crs is None:
        raise CRSError(f"the Zarr store '{path}' has no CRS (no spatial_ref grid mapping); write one with "
                       "dem.rio.write_crs('EPSG:XXXX') before to_zarr")
    if arr.rio.x_dim != "x" or arr.rio.y_dim != "y":
        arr = arr.rename({arr.rio.y_dim: "y", arr.rio.x_dim: "x"})
    stored = arr.encoding.get("preferred_chunks", {})
    block = (int(stored.get("y", arr.shape[0])), int(stored.get("x", arr.shape[1])))
    ck = _normalise_chunks(chunks, (int(arr.shape[0]), int(arr.shape[1])), block)
    arr = arr.copy(data=_lazy_data(store, name, ck))
    # an input is never written over: a store in object storage is known by its GDAL path, as remote COGs
    register_source(arr.data, remote.gdal_path(store.url) if store.remote else path)
    out = _finish(arr, nodata, name=Path(store.name).stem)
    register_region_reader(out, ZarrRegionReader(store.url, name, out.dtype, _nodata_of(arr, nodata)))
    return out
