"""Out-of-core writing of Cloud-Optimized GeoTIFFs (COG) from lazy DataArrays.

GDAL's COG driver can only copy an existing dataset, and ``rioxarray.to_raster(driver="COG")``
loads the whole array. :func:`write_cog` therefore works in two passes, both bounded in memory:

1. the dask array is stored block by block into a *tiled temporary GTiff* (every task opens the
   file in ``r+`` mode and writes its window under a lock: a ``distributed.Lock`` under an active
   ``distributed.Client``, otherwise a lock that holds across threads *and* processes);
2. GDAL's COG driver copies the temporary file into a temporary COG (compression, predictor,
   overviews), with ``GDAL_CACHEMAX`` bounded and all CPUs compressing.

The temporary COG is validated with :func:`rio_cogeo.cogeo.cog_validate` and only then moved
onto ``path`` by :func:`xdem.io.atomic.move_into_place` (never replacing a file that appeared
meanwhile unless ``overwrite``). All temporary files live in the output folder, are owned by
this process (:func:`xdem.io.atomic.owned_temps`: pid in the name, a lock held for its
lifetime) and are removed on any error, including ``KeyboardInterrupt``; those of a writer
killed outright (SIGKILL) are removed by the next write in that folder. A full disk is
reported as one :class:`~xdem.errors.OutputError` saying how much space is needed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import errno
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import dask
import dask.array as da
import numpy as np
import rasterio
import rasterio.shutil
import rasterio.windows
import xarray as xr

from xdem.errors import InputError, OutputError, XdemError
from xdem.io.atomic import TEMP_PREFIX, move_into_place, owned_temps
from xdem.io.grid import block_tasks
from xdem.io.sources import find_sources

__all__ = ["write_cog", "BlockStats", "TEMP_COMPRESS", "TEMP_COMPRESS_LOW_DISK", "GDAL_CACHE_MB"]

#: Compression of the intermediate tiled GTiff. Uncompressed was measured fastest end to end
#: (see docs/performance.md): writing it is a memory copy and the COG pass reads it without
#: decoding; it costs raw-size temporary disk space. When the output folder lacks that space,
#: :data:`TEMP_COMPRESS_LOW_DISK` is used instead.
TEMP_COMPRESS: str | None = None
#: Temp compression used when the raw temp file would not comfortably fit on disk.
TEMP_COMPRESS_LOW_DISK = "ZSTD"
#: GDAL block cache used by both passes, in MB.
GDAL_CACHE_MB = 256
_TEMP_PREFIX = TEMP_PREFIX
_COMPRESSIONS = {"deflate", "lzw", "zstd", "lzma", "packbits", "none"}


# ---------------------------------------------------------------------------- locks


class _ProcessLock:
    """A lock that holds across threads and processes of one machine (``flock`` on a file).

    Picklable: it only carries the lock file's path, so the ``processes`` scheduler can ship it.
    Falls back on a per-process lock where ``fcntl`` is missing (Windows).
    """

    _local_locks: dict[str, threading.Lock] = {}
    _guard = threading.Lock()

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    def __getstate__(self) -> dict:
        return {"path": self.path}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"])

    def _thread_lock(self) -> threading.Lock:
        with _ProcessLock._guard:
            return _ProcessLock._local_locks.setdefault(self.path, threading.Lock())

    def acquire(self) -> None:
        self._thread_lock().acquire()
        try:
            import fcntl  # noqa: PLC0415  (POSIX only)
        except ImportError:  # pragma: no cover - Windows
            return
        try:
            # never O_CREAT: the writer creates the file before any task runs, and a task still
            # running after a failed write (dask does not wait for it) must not re-create it
            # once the temporary files have been removed
            fd = os.open(self.path, os.O_RDWR)
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._fd = fd
        except BaseException:
            self._thread_lock().release()
            raise

    def release(self) -> None:
        try:
            if self._fd is not None:
                import fcntl  # noqa: PLC0415

                fcntl.flock(self._fd, fcntl.LOCK_UN)
                os.close(self._fd)
                self._fd = None
        finally:
            self._thread_lock().release()

    def __enter__(self) -> _ProcessLock:
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _active_client(arr: da.Array) -> Any:
    """The ``distributed.Client`` that dask would use to compute ``arr``, or ``None``."""
    try:
        from distributed import Client  # noqa: PLC0415
    except ImportError:  # pragma: no cover - distributed is a dependency
        return None
    scheduler = dask.base.get_scheduler(collections=[arr])
    client = getattr(scheduler, "__self__", None)
    return client if isinstance(client, Client) else None


# ---------------------------------------------------------------------------- block writer


class _WindowWriter:
    """Target for :func:`dask.array.store`: writes each block into a tiled GTiff window.

    Every ``__setitem__`` opens the file in ``r+`` mode under ``lock``, writes the window and
    closes it (flushing GDAL's cache), so tasks in threads, processes or distributed workers
    never share a GDAL handle.
    """

    def __init__(self, path: str, shape: tuple[int, int], dtype: np.dtype, lock: Any) -> None:
        self.path = path
        self.shape = shape
        self.dtype = dtype
        self.ndim = 2
        self.lock = lock

    def __setitem__(self, key: tuple[slice, slice], value: np.ndarray) -> None:
        (rows, cols) = key
        r0, r1, _ = rows.indices(self.shape[0])
        c0, c1, _ = cols.indices(self.shape[1])
        window = rasterio.windows.Window(c0, r0, c1 - c0, r1 - r0)
        block = np.ascontiguousarray(value, dtype=self.dtype)
        with self.lock, rasterio.Env(GDAL_CACHEMAX=64):
            with rasterio.open(self.path, "r+") as dst:
                dst.write(block, 1, window=window)


def _fill_kernel(block: np.ndarray, *, nodata: float, out_dtype: np.dtype) -> np.ndarray:
    """NaN -> ``nodata`` on one chunk, cast to ``out_dtype``."""
    out = block.astype(out_dtype, copy=True)
    if np.issubdtype(out_dtype, np.floating):
        out[np.isnan(out)] = nodata
    return out


def _prepare_data(dem: xr.DataArray, nodata: float | None) -> tuple[da.Array, np.dtype, float | None]:
    """Dask array to write (NaN replaced by ``nodata``), its dtype and the nodata tag."""
    data = dem.data
    dtype = np.dtype(data.dtype)
    if dtype == np.bool_:
        dtype = np.dtype(np.uint8)
    if dtype.kind not in "fiu":
        raise InputError(f"cannot write a DEM of dtype {dtype} as a COG; cast it to float32 first")
    if not isinstance(data, da.Array):
        from xdem.io.open import auto_chunks  # noqa: PLC0415

        data = da.from_array(np.asarray(data), chunks=auto_chunks(dem.shape))
    if nodata is None:
        return data.astype(dtype), dtype, (float("nan") if dtype.kind == "f" else None)
    nodata = float(nodata)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if not (nodata == int(nodata) and info.min <= nodata <= info.max):
            raise InputError(
                f"nodata={nodata:g} does not fit the DEM's {dtype} values; pass a nodata in "
                f"[{info.min}, {info.max}] or nodata=None"
            )
        return data.astype(dtype), dtype, nodata
    if np.isfinite(nodata) and float(dtype.type(nodata)) != nodata:
        raise InputError(f"nodata={nodata!r} is not exactly representable in {dtype}; pass e.g. nodata=-9999")
    out = data.map_blocks(_fill_kernel, nodata=nodata, out_dtype=dtype, dtype=dtype, meta=np.empty((0, 0), dtype=dtype))
    return out, dtype, nodata


# ---------------------------------------------------------------------------- path checks


def _check_output(dem: xr.DataArray, path: Path, *, overwrite: bool) -> Path:
    """Resolved output path, after refusing every unsafe destination."""
    path = Path(os.path.abspath(os.fspath(path)))
    folder = path.parent
    if not folder.exists():
        raise OutputError(f"output folder '{folder}' does not exist; create it first (mkdir -p '{folder}')")
    if not folder.is_dir():
        raise OutputError(f"'{folder}' is not a folder, so '{path.name}' cannot be written in it; choose another path")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"output folder '{folder}' is not writable; choose another folder or fix its permissions")
    resolved = path.resolve()
    for src in find_sources(dem):
        same = src == resolved
        if not same and src.exists() and path.exists():
            with contextlib.suppress(OSError):
                same = os.path.samefile(src, path)
        if same:
            raise OutputError(
                f"'{path}' is one of the inputs of the DEM being written; write to another path "
                "(even overwrite=True cannot replace a file that is still being read)"
            )
    if path.is_dir():
        raise OutputError(f"'{path}' is a folder; pass a file path such as '{path / 'dem.tif'}'")
    if path.exists() and not overwrite:
        raise OutputError(f"'{path}' already exists; pass overwrite=True to replace it or choose another path")
    return path


def _temp_files(folder: Path, name: str) -> contextlib.AbstractContextManager[str]:
    """A temp prefix in ``folder`` owned by this process (:func:`xdem.io.atomic.owned_temps`):
    every file with that prefix is removed on exit, stale temps of dead writers first."""
    return owned_temps(folder)


def _disk_full(exc: BaseException | None, folder: Path) -> bool:
    """Whether a write failure was a full disk: ENOSPC anywhere in the exception chain (GDAL
    often only says "Write failed"/"Seek error"), or under 1 MiB left in ``folder``."""
    seen = set()
    io_error = exc is None or isinstance(exc, OSError) or type(exc).__module__.startswith("rasterio")
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if getattr(exc, "errno", None) == errno.ENOSPC or "No space left" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    if not io_error:  # e.g. an error of the DEM's own graph: not the disk, however full
        return False
    with contextlib.suppress(OSError):
        return shutil.disk_usage(folder).free < 2**20
    return False


def _disk_full_error(out: Path, *, shape: tuple[int, int], dtype: np.dtype, free_mb: float) -> OutputError:
    raw = shape[0] * shape[1] * dtype.itemsize / 2**20
    return OutputError(
        f"no space left on the disk of '{out.parent}' while writing '{out.name}': up to {raw * 2.4:.0f} MB are needed "
        f"at once (a temporary GTiff of up to {raw:.0f} MB, plus the COG with its overviews, up to {raw * 1.4:.0f} MB "
        f"for incompressible data) and {free_mb:.0f} MB were free; free some space or write to another folder "
        "(nothing was left behind)"
    )


# ---------------------------------------------------------------------------- passes


@dataclass(frozen=True)
class BlockStats:
    """Something to compute from every block while it is written (see ``write_cog(also=)``).

    ``func(written_block, *blocks_of_others, row0=, col0=)`` runs in the task that writes the
    block (so nothing waits in memory for it) and returns a small result; ``others`` are
    dask arrays with the chunks of the written DEM.
    """

    func: Callable[..., Any]
    others: Sequence[da.Array] = ()


def _write_block(block: np.ndarray, *others: np.ndarray, target: Any,
                 stats: tuple[tuple[Callable[..., Any], int], ...], row0: int, col0: int) -> list:
    out, k = [], 0
    for func, n in stats:
        out.append(func(block, *others[k : k + n], row0=row0, col0=col0))
        k += n
    target[row0 : row0 + block.shape[0], col0 : col0 + block.shape[1]] = block
    return out


def _store_with_stats(data: da.Array, target: Any, also: Sequence[BlockStats]) -> list:
    """Tasks writing each block and computing ``also`` on it; results per ``also``, per block."""
    others = [o.rechunk(data.chunks) for b in also for o in b.others]
    stats = tuple((b.func, len(b.others)) for b in also)
    return block_tasks(_write_block, [data, *others], target=target, stats=stats)


def _store_blocks(data: da.Array, tmp: str, *, profile: dict, progress: bool, also: Sequence[BlockStats] = ()) -> list:
    """Pass 1: create the tiled temp GTiff and store every dask block into it; with ``also``,
    compute those per-block results in the writing tasks and return them (per ``also``, a
    list over the blocks in row-major order)."""
    with rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_MB):
        with rasterio.open(tmp, "w", **profile):
            pass  # create only; blocks are written by the tasks
    client = _active_client(data)
    if client is not None:
        from distributed import Lock, progress as dprogress  # noqa: PLC0415

        lock: Any = Lock(name=f"xdem-write-cog-{os.path.basename(tmp)}")
    else:
        lock = _ProcessLock(tmp + ".lock")
        with open(lock.path, "a"):
            pass  # created here, once; tasks only open it
    target = _WindowWriter(tmp, data.shape, np.dtype(profile["dtype"]), lock)
    stored: Any = _store_with_stats(data, target, also) if also else [da.store(data, target, lock=False, compute=False)]
    if client is not None:
        futures = client.compute(stored)
        try:
            if progress:
                dprogress(futures)
            results = client.gather(futures)
        except BaseException:
            client.cancel(futures)
            raise
    elif progress:
        from dask.diagnostics import ProgressBar  # noqa: PLC0415

        with ProgressBar():
            results = dask.compute(*stored)
    else:
        results = dask.compute(*stored)
    if not also:
        return []
    return [[r[k] for r in results] for k in range(len(also))]


def _copy_to_cog(tmp: str, out: str, *, compress: str, predictor: int | None, blocksize: int) -> None:
    """Pass 2: GDAL COG driver copy (compression, overviews) with a bounded cache."""
    options = {
        "BLOCKSIZE": blocksize,
        "COMPRESS": compress.upper(),
        "OVERVIEWS": "AUTO",
        "BIGTIFF": "IF_SAFER",
        "NUM_THREADS": "ALL_CPUS",
    }
    if predictor is not None:
        options["PREDICTOR"] = predictor
    with _captured_fd2() as captured, rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_MB, GDAL_NUM_THREADS="ALL_CPUS"):
        try:
            rasterio.shutil.copy(tmp, out, driver="COG", **options)
        except Exception:
            if "No space left on device" in captured.text():
                raise OSError(errno.ENOSPC, "No space left on device", out) from None
            raise
    if "No space left on device" in captured.text():  # GDAL may "succeed" with a truncated COG
        raise OSError(errno.ENOSPC, "No space left on device", out)


class _Captured:
    def __init__(self, fh: Any) -> None:
        self.fh = fh
        self.final: str | None = None

    def text(self) -> str:
        if self.final is not None or self.fh is None:
            return self.final or ""
        self.fh.flush()
        self.fh.seek(0)
        return self.fh.read().decode(errors="replace")


@contextlib.contextmanager
def _captured_fd2() -> Any:
    """Capture what is written on file descriptor 2 (libtiff prints "No space left on device"
    there from GDAL's threads, bypassing rasterio's error handler) during the block. Unless it
    reports a full disk (which becomes one clear error), the text is written back to fd 2."""
    import tempfile  # noqa: PLC0415

    if not _FD2_LOCK.acquire(blocking=False):  # another thread's copy is capturing: fd 2 is not ours
        yield _Captured(None)
        return
    try:
        saved = os.dup(2)
    except OSError:  # no stderr at all
        _FD2_LOCK.release()
        yield _Captured(None)
        return
    fh = tempfile.TemporaryFile()
    os.dup2(fh.fileno(), 2)
    captured = _Captured(fh)
    try:
        yield captured
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        _FD2_LOCK.release()
        text = captured.final = captured.text()
        fh.close()
        if text and "No space left on device" not in text:
            os.write(2, text.encode())


_FD2_LOCK = threading.Lock()


def _temp_options(shape: tuple[int, int], dtype: np.dtype, folder: Path) -> dict[str, Any]:
    """Creation options of the temp GTiff: uncompressed unless the folder is short of space."""
    raw = shape[0] * shape[1] * dtype.itemsize
    compress = TEMP_COMPRESS
    if compress is None and shutil.disk_usage(folder).free < 1.5 * raw:  # + the COG and its overviews
        compress = TEMP_COMPRESS_LOW_DISK
    if not compress:
        return {"BIGTIFF": "IF_NEEDED"}
    return {"compress": compress, "ZSTD_LEVEL": 1, "ZLEVEL": 1, "predictor": 3 if dtype.kind == "f" else 2,
            "BIGTIFF": "IF_SAFER"}


def _validate(out: str) -> None:
    from rio_cogeo.cogeo import cog_validate  # noqa: PLC0415

    valid, errors, _ = cog_validate(out, quiet=True)
    if not valid:
        raise OutputError(f"GDAL produced an invalid COG ({'; '.join(errors)}); please report this with your GDAL version")


def write_cog(
    dem: xr.DataArray,
    path: str | os.PathLike,
    *,
    overwrite: bool = False,
    compress: str = "deflate",
    blocksize: int = 512,
    nodata: float | None = -9999,
    progress: bool = False,
    also: Sequence[BlockStats] = (),
    results: list | None = None,
) -> Path:
    """Write a 2-D DataArray of any size to a Cloud-Optimized GeoTIFF, out of core.

    Memory stays bounded by a few chunks plus ``GDAL_CACHEMAX`` (256 MB), whatever the DEM
    size. Works with the threaded, synchronous and processes schedulers and under an active
    ``distributed.Client`` (workers must see ``path``'s folder). The file appears at ``path``
    only once complete and validated; on any error nothing is left behind.

    Parameters
    ----------
    dem
        2-D DataArray (dask- or numpy-backed) with rioxarray georeferencing.
    path
        Output file. Its folder must exist and be writable.
    overwrite
        Replace an existing file. A file the DEM is read from is never replaced.
    compress
        ``"deflate"`` (default), ``"lzw"``, ``"zstd"``, ``"lzma"``, ``"packbits"`` or ``"none"``.
        A predictor is added (3 for floats, 2 for integers) unless ``"none"``/``"packbits"``.
    blocksize
        Side of the internal tiles, a multiple of 16.
    nodata
        Value written for NaN and stored as the nodata tag. ``None`` keeps NaN (tag NaN for
        floats, no tag for integers).
    progress
        Show a progress bar (dask's, or ``distributed.progress`` under a client) for the
        block-writing pass.
    also
        :class:`BlockStats` to compute from every block in the task that writes it (e.g.
        statistics of the DEM against another one): arrays shared with ``dem`` are read and
        computed once, in the same pass.
    results
        A list that receives, for each of ``also``, the list of its per-block results
        (blocks in row-major order).

    Returns
    -------
    pathlib.Path
        The absolute path written.

    Raises
    ------
    xdem.errors.OutputError
        ``path`` exists (without ``overwrite``), is an input of ``dem``, or its folder is
        missing or not writable.
    xdem.errors.InputError
        ``dem`` is not 2-D, or ``compress``/``blocksize``/``nodata`` are invalid.

    Examples
    --------
    >>> import xdem
    >>> dem = xdem.open_dem(xdem.examples.get_path("lidar"))
    >>> xdem.write_cog(dem + 1, "/tmp/lidar_plus_one.tif", overwrite=True).name
    'lidar_plus_one.tif'
    """
    if not isinstance(dem, xr.DataArray):
        raise InputError(f"write_cog needs an xarray.DataArray, got {type(dem).__name__}; open it with xdem.open_dem")
    if dem.ndim == 3 and dem.shape[0] == 1:
        dem = dem[0]
    if dem.ndim != 2:
        raise InputError(f"write_cog writes 2-D DEMs, got dims {dem.dims}; select one band first")
    compress = str(compress).lower()
    if compress not in _COMPRESSIONS:
        raise InputError(f"compress={compress!r} is not supported; use one of {sorted(_COMPRESSIONS)}")
    if not isinstance(blocksize, (int, np.integer)) or blocksize < 16 or blocksize % 16:
        raise InputError(f"blocksize must be a positive multiple of 16 (e.g. 512), got {blocksize!r}")
    out = _check_output(dem, Path(path), overwrite=overwrite)
    data, dtype, tag = _prepare_data(dem, nodata)
    predictor = None if compress in ("none", "packbits") else (3 if dtype.kind == "f" else 2)
    profile: dict[str, Any] = {
        "driver": "GTiff",
        "width": dem.shape[1],
        "height": dem.shape[0],
        "count": 1,
        "dtype": dtype.name,
        "crs": dem.rio.crs,
        "transform": dem.rio.transform(),
        "nodata": tag,
        "tiled": True,
        "blockxsize": blocksize,
        "blockysize": blocksize,
    }
    profile.update(_temp_options(dem.shape, dtype, out.parent))
    free_mb = shutil.disk_usage(out.parent).free / 2**20
    with _temp_files(out.parent, out.name) as prefix:
        tmp, tmp_cog = prefix + "blocks.tif", prefix + out.name
        try:
            extra = _store_blocks(data, tmp, profile=profile, progress=progress, also=also)
            _copy_to_cog(tmp, tmp_cog, compress=compress, predictor=predictor, blocksize=blocksize)
            full = _disk_full(None, out.parent)  # GDAL may "succeed" with a truncated COG
        except Exception as exc:  # rasterio/GDAL raise RasterioIOError, OSError or CPLE_* errors
            if not isinstance(exc, XdemError) and _disk_full(exc, out.parent):  # not e.g. a ReadError of an input
                raise _disk_full_error(out, shape=dem.shape, dtype=dtype, free_mb=free_mb) from exc
            if isinstance(exc, (rasterio.errors.RasterioIOError, OSError)) and not isinstance(exc, OutputError):
                raise OutputError(f"cannot write '{out}' ({exc}); check free disk space and permissions") from exc
            raise
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # free the disk space before validating
        try:
            _validate(tmp_cog)
        except Exception as exc:
            if full or _disk_full(exc, out.parent):
                raise _disk_full_error(out, shape=dem.shape, dtype=dtype, free_mb=free_mb) from exc
            raise
        move_into_place(tmp_cog, out, overwrite=overwrite)
    if results is not None:
        results[:] = extra
    return out
