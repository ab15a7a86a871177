"""Out-of-core writing of Cloud-Optimized GeoTIFFs (COG) from lazy DataArrays.

GDAL's COG driver can only copy an existing dataset, and ``rioxarray.to_raster(driver="COG")``
loads the whole array. :func:`write_cog` therefore works in two passes, both bounded in memory:

1. the dask array is stored block by block into a *tiled temporary GTiff*: with a local
   scheduler every task opens the file in ``r+`` mode and writes its window under a lock that
   holds across threads *and* processes; under an active ``distributed.Client`` the workers
   compute the blocks and return them, and this process writes them (a bounded sliding window
   of blocks in flight, :mod:`xdem.io._cog_stream`): no task writes a file, so the workers need
   no disk shared with the client;
2. GDAL's COG driver copies the temporary file into a temporary COG (compression, predictor,
   overviews), with ``GDAL_CACHEMAX`` bounded and all CPUs compressing.

The temporary COG is validated with :func:`rio_cogeo.cogeo.cog_validate` and only then moved
onto ``path`` by :func:`xdem.io.atomic.move_into_place` (never replacing a file that appeared
meanwhile unless ``overwrite``). All temporary files live in the output folder, are owned by
this process (:func:`xdem.io.atomic.owned_temps`: pid in the name, a lock held for its
lifetime) and are removed on any error, including ``KeyboardInterrupt``; those of a writer
killed outright (SIGKILL) are removed by the next write in that folder. A full disk is
reported as one :class:`~xdem.errors.OutputError` saying how much space is needed.

:func:`write_cogs` writes several DataArrays (e.g. terrain attributes sharing one halo pass
over a DEM) with ONE block-storing compute: a task they share runs once per block. Each then
gets its own COG copy, validation and atomic move, with the same guarantees.

An output to object storage (``s3://``, ``/vsis3/``) is written the same way into a staging
folder of the system's temporary folder (``TMPDIR``), then uploaded in one conditional put when
the run's outputs are final (:mod:`xdem.io.upload`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import rasterio
import rasterio.shutil
import rasterio.windows
import xarray as xr

from xdem import interrupt
from xdem.errors import InputError, OutputError, XdemError
from xdem.gdal_cache import GDAL_CACHE_BYTES, GDAL_CACHE_MB  # both passes' GDAL block cache
from xdem.io import remote, upload

# the lock, window writer and fd-2 capture of the block-writing pass
from xdem.io._cog_blocks import _active_client, _captured_fd2, _ProcessLock, _WindowWriter
from xdem.io._cog_overviews import OVERVIEW_SHARE, overviews_into_temp, part
from xdem.io._cog_result import CogResult, _disk_full, _disk_full_error
from xdem.io._cog_stream import StreamItem, stream_blocks
from xdem.io._gdal_copy import COPY_PROGRESS, copy_with_progress
from xdem.io._heap import release_free_heap
from xdem.io.atomic import check_output_path, move_into_place, output_journal, owned_temps
from xdem.io.grid import block_tasks, dask_data, grid_shape
from xdem.io.open import auto_chunks
from xdem.io.sources import find_sources
from xdem.kernels.nodata import fill_nan

__all__ = ["write_cog", "write_cogs", "CogResult", "BlockStats", "TEMP_COMPRESS", "TEMP_COMPRESS_LOW_DISK", "GDAL_CACHE_MB",
           "GDAL_CACHE_BYTES"]

#: Compression of the intermediate tiled GTiff. Uncompressed was measured fastest end to end
#: (see docs/performance.md): writing it is a memory copy and the COG pass reads it without
#: decoding; it costs raw-size temporary disk space. When the output folder lacks that space,
#: :data:`TEMP_COMPRESS_LOW_DISK` is used instead.
TEMP_COMPRESS: str | None = None
#: Temp compression used when the raw temp file would not comfortably fit on disk.
TEMP_COMPRESS_LOW_DISK = "ZSTD"
_COMPRESSIONS = {"deflate", "lzw", "zstd", "lzma", "packbits", "none"}


def _fill_kernel(block: np.ndarray, *, nodata: float, out_dtype: np.dtype) -> np.ndarray:
    """NaN -> ``nodata`` on one chunk, cast to ``out_dtype`` (floats: one compiled pass)."""
    if np.issubdtype(out_dtype, np.floating):
        return fill_nan(block, value=nodata, dtype=out_dtype)
    return block.astype(out_dtype, copy=True)


def _prepare_data(dem: xr.DataArray, nodata: float | None) -> tuple[da.Array, np.dtype, float | None]:
    """Dask array to write (NaN replaced by ``nodata``), its dtype and the nodata tag."""
    data = dask_data(dem, chunks=auto_chunks(grid_shape(dem)))
    dtype = np.dtype(data.dtype)
    if dtype == np.bool_:
        dtype = np.dtype(np.uint8)
    if dtype.kind not in "fiu":
        raise InputError(f"cannot write a DEM of dtype {dtype} as a COG; cast it to float32 first")
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
    out = da.map_blocks(_fill_kernel, data, nodata=nodata, out_dtype=dtype, dtype=dtype, meta=np.empty((0, 0), dtype=dtype))
    return out, dtype, nodata


# ---------------------------------------------------------------------------- path checks


def _check_output(dem: xr.DataArray, path: Path, *, overwrite: bool) -> Path:
    """Resolved output path, after refusing every unsafe destination (:func:`check_output_path`,
    with the files the DEM is read from as inputs)."""
    return check_output_path(path, overwrite=overwrite, what="output",
                             inputs=[("one of the inputs of the DEM being written", src) for src in find_sources(dem)])


def _temp_files(folder: Path, name: str) -> contextlib.AbstractContextManager[str]:
    """A temp prefix in ``folder`` owned by this process (:func:`xdem.io.atomic.owned_temps`):
    every file with that prefix is removed on exit, stale temps of dead writers first."""
    return owned_temps(folder)


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


@dataclass(frozen=True)
class _Pass1:
    """One array of the block-storing pass: its data, temp GTiff, profile and ``also``."""

    data: da.Array
    tmp: str
    profile: dict
    also: Sequence[BlockStats] = ()


def _create_temps(items: Sequence[_Pass1]) -> None:
    """Create every temp GTiff, here (the client process: the file is local to it)."""
    for item in items:
        with rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_BYTES):
            with rasterio.open(item.tmp, "w", **item.profile):
                pass  # create only; the blocks are written by the pass


def _store_blocks(items: Sequence[_Pass1], *, progress: bool) -> list[list]:
    """Pass 1: create the tiled temp GTiffs and store every dask block of every array into
    its own, in ONE compute (a task the arrays share, e.g. a halo pass over one DEM, runs
    once per block); with ``also``, compute those per-block results in the block's task.
    Returns, per item, per ``also``, a list over the blocks in row-major order.

    Under a ``distributed.Client`` the workers compute the blocks and the client writes them
    (:mod:`xdem.io._cog_stream`: no task writes a file); otherwise the tasks write their
    windows under a lock that holds across threads and processes of this machine."""
    client = _active_client(items[0].data)
    _create_temps(items)
    if client is not None:
        stream = [StreamItem(it.data, it.tmp, np.dtype(it.profile["dtype"]), tuple((b.func, b.others) for b in it.also))
                  for it in items]
        return stream_blocks(stream, client=client, progress=progress, cache_bytes=GDAL_CACHE_BYTES)
    writers: list[Any] = []  # da.store targets
    for item in items:
        lock = _ProcessLock(item.tmp + ".lock")
        with open(lock.path, "a"):
            pass  # created here, once; tasks only open it
        writers.append(_WindowWriter(item.tmp, item.data.shape, np.dtype(item.profile["dtype"]), lock))
    plain = [(it.data, w) for it, w in zip(items, writers) if not it.also]
    stored: list = []
    if plain:  # one store over all of them: optimised together, so shared keys stay shared
        stored.append(da.store([d for d, _ in plain], [w for _, w in plain], lock=False, compute=False))
    spans: list[tuple[int, int] | None] = []
    for it, w in zip(items, writers):
        if it.also:
            tasks = _store_with_stats(it.data, w, it.also)
            spans.append((len(stored), len(stored) + len(tasks)))
            stored.extend(tasks)
        else:
            spans.append(None)
    if progress:
        from dask.diagnostics import ProgressBar

        with ProgressBar():
            results = dask.compute(*stored)
    else:
        results = dask.compute(*stored)
    out: list[list] = []
    for it, span in zip(items, spans):
        blocks = results[span[0] : span[1]] if span else []
        out.append([[r[k] for r in blocks] for k in range(len(it.also))])
    return out


def _copy_to_cog(tmp: str, out: str, *, compress: str, predictor: int | None, blocksize: int,
                 progress: Callable[[float], None] | None = None) -> None:
    """Pass 2: GDAL COG driver copy (compression, overviews) with a bounded cache; ``progress``
    receives GDAL's completed fraction (:mod:`xdem.io._gdal_copy`)."""
    options = {
        "BLOCKSIZE": blocksize,
        "COMPRESS": compress.upper(),
        "OVERVIEWS": "AUTO",
        "BIGTIFF": "IF_SAFER",
        "NUM_THREADS": "ALL_CPUS",
    }
    if predictor is not None:
        options["PREDICTOR"] = predictor
    with _captured_fd2() as captured, rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_BYTES, GDAL_NUM_THREADS="ALL_CPUS",
                                                   GDAL_TIFF_OVR_BLOCKSIZE=blocksize):
        try:
            built = overviews_into_temp(tmp, blocksize=blocksize, progress=part(progress, 0.0, OVERVIEW_SHARE))
            copy_progress = part(progress, OVERVIEW_SHARE if built else 0.0, 1.0)
            # with a callback even without a bar: a signal stops GDAL at once (it returns "stop")
            if not copy_with_progress(tmp, out, driver="COG", options=options, progress=copy_progress):
                with interrupt.deferred():  # rasterio's error handler is a Python callback too
                    rasterio.shutil.copy(tmp, out, driver="COG", **options)
                interrupt.checkpoint()
        except Exception:
            if "No space left on device" in captured.text():
                raise OSError(errno.ENOSPC, "No space left on device", out) from None
            raise
        except KeyboardInterrupt:
            captured.final = ""  # GDAL's "User terminated CreateCopy()": the CLI's one line says it
            raise
    if "No space left on device" in captured.text():  # GDAL may "succeed" with a truncated COG
        raise OSError(errno.ENOSPC, "No space left on device", out)




def _temp_options(shape: tuple[int, int], dtype: np.dtype, folder: Path, *, need: int | None = None) -> dict[str, Any]:
    """Creation options of the temp GTiff: uncompressed unless the folder is short of space
    (``need``: raw bytes of all the temps written at once in ``folder``, default this one's)."""
    raw = shape[0] * shape[1] * dtype.itemsize if need is None else need
    compress = TEMP_COMPRESS
    if compress is None and shutil.disk_usage(folder).free < 1.5 * raw:  # + the COG and its overviews
        compress = TEMP_COMPRESS_LOW_DISK
    if not compress:
        return {"BIGTIFF": "IF_NEEDED"}
    return {"compress": compress, "ZSTD_LEVEL": 1, "ZLEVEL": 1, "predictor": 3 if dtype.kind == "f" else 2,
            "BIGTIFF": "IF_SAFER"}


def _validate(out: str) -> None:
    from rio_cogeo.cogeo import cog_validate

    valid, errors, _ = cog_validate(out, quiet=True)
    if not valid:
        raise OutputError(f"GDAL produced an invalid COG ({'; '.join(errors)}); please report this with your GDAL version")


@dataclass(frozen=True)
class _Plan:
    """One output of :func:`_write`: checked path, data to store and GTiff options."""

    out: Path
    data: da.Array
    dtype: np.dtype
    predictor: int | None
    profile: dict
    shape: tuple[int, int]
    units: str | None = None
    target: str | None = None  # the s3:// URL ``out`` (its local staging) is uploaded to


def _checked_options(compress: str, blocksize: int) -> str:
    compress = str(compress).lower()
    if compress not in _COMPRESSIONS:
        raise InputError(f"compress={compress!r} is not supported; use one of {sorted(_COMPRESSIONS)}")
    if not isinstance(blocksize, (int, np.integer)) or blocksize < 16 or blocksize % 16:
        raise InputError(f"blocksize must be a positive multiple of 16 (e.g. 512), got {blocksize!r}")
    return compress


def one_band(dem: object, who: str) -> xr.DataArray:
    """``dem`` as a 2-D DataArray (a single band squeezed), else a one-line InputError naming ``who``."""
    if not isinstance(dem, xr.DataArray):
        raise InputError(f"{who} needs an xarray.DataArray, got {type(dem).__name__}; open it with xdem.open_dem")
    band = dem[0] if dem.ndim == 3 and dem.shape[0] == 1 else dem
    if band.ndim != 2:
        raise InputError(f"{who} writes 2-D DEMs, got dims {band.dims}; select one band first")
    return band


def _plan(dem: Any, path: str | os.PathLike, *, overwrite: bool, compress: str, blocksize: int,
          nodata: float | None, who: str = "write_cog") -> _Plan:
    """Check one output and prepare what pass 1 stores (nothing is computed or written)."""
    dem = one_band(dem, who)
    target = None
    if remote.is_remote(path):  # staged locally (TMPDIR), uploaded when the outputs are final
        target = upload.check_output_url(path, overwrite=overwrite, inputs=[("an input of the DEM", s) for s in
                                                                            find_sources(dem)])
        out = Path(upload.stage_output(target, overwrite=overwrite).local)
    else:
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
    units = dem.attrs.get("units")
    return _Plan(out=out, data=data, dtype=dtype, predictor=predictor, profile=profile, shape=tuple(dem.shape),
                 units=units if isinstance(units, str) and units else None, target=target)


def _tag_units(tmp: str, units: str | None) -> None:
    """The band's unit (GDAL unit type, which the COG copy keeps) from the DataArray's
    ``attrs["units"]`` (e.g. ``"degrees"``, ``"m"``)."""
    if units is None:
        return
    with rasterio.open(tmp, "r+") as dst:
        dst.units = (units,)


def _write(plans: Sequence[_Plan], *, overwrite: bool, compress: str, blocksize: int, progress: bool,
           also: Sequence[Sequence[BlockStats]]) -> list[CogResult]:
    """Pass 1 for every plan in one compute, then per plan the COG copy and validation, then
    every move into place (all or none: a failed move undoes the earlier ones)."""
    folders = list(dict.fromkeys(p.out.parent for p in plans))
    total = {f: sum(p.shape[0] * p.shape[1] * p.dtype.itemsize for p in plans if p.out.parent == f) for f in folders}
    free_mb = {f: shutil.disk_usage(f).free / 2**20 for f in folders}

    def full_error(plan: _Plan, exc: BaseException | None) -> OutputError:
        n = sum(1 for p in plans if p.out.parent == plan.out.parent)
        return _disk_full_error(plan.out, shape=plan.shape, dtype=plan.dtype, free_mb=free_mb[plan.out.parent], count=n,
                                target=plan.target)

    with contextlib.ExitStack() as stack:
        prefixes = {f: stack.enter_context(_temp_files(f, "")) for f in folders}
        items, tmps = [], []
        for i, plan in enumerate(plans):
            prefix = prefixes[plan.out.parent] + ("" if len(plans) == 1 else f"{i}-")
            tmp, tmp_cog = prefix + "blocks.tif", prefix + plan.out.name
            profile = {**plan.profile, **_temp_options(plan.shape, plan.dtype, plan.out.parent,
                                                       need=total[plan.out.parent])}
            items.append(_Pass1(plan.data, tmp, profile, tuple(also[i])))
            tmps.append((tmp, tmp_cog))
        current = plans[0]
        names = ", ".join(str(p.out) for p in plans)
        try:
            release_free_heap()  # what earlier work (e.g. a fit) freed: not kept through the pass
            with interrupt.stage(f"the block writes of {names}", key="blocks"), rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_BYTES):
                extra = _store_blocks(items, progress=progress)
            release_free_heap()
            full = False
            report = COPY_PROGRESS.get()
            for i, (plan, (tmp, tmp_cog)) in enumerate(zip(plans, tmps)):
                current = plan
                _tag_units(tmp, plan.units)
                step = None if report is None else (lambda f, i=i: report((i + f) / len(plans)))
                with interrupt.stage(f"the COG copy of {plan.out}", key="copy"):
                    _copy_to_cog(tmp, tmp_cog, compress=compress, predictor=plan.predictor, blocksize=blocksize,
                                 progress=step)
                full = full or _disk_full(None, plan.out.parent)  # GDAL may "succeed" with a truncated COG
                with contextlib.suppress(OSError):
                    os.unlink(tmp)  # free the disk space before the next copy
                release_free_heap()
        except Exception as exc:  # rasterio/GDAL raise RasterioIOError, OSError or CPLE_* errors
            if not isinstance(exc, XdemError) and _disk_full(exc, current.out.parent):  # not e.g. a ReadError
                raise full_error(current, exc) from exc
            if isinstance(exc, (rasterio.errors.RasterioIOError, OSError)) and not isinstance(exc, OutputError):
                raise OutputError(f"cannot write '{current.out}' ({exc}); check free disk space and permissions") from exc
            raise
        for plan, (_, tmp_cog) in zip(plans, tmps):
            try:
                _validate(tmp_cog)
            except Exception as exc:
                if full or _disk_full(exc, plan.out.parent):
                    raise full_error(plan, exc) from exc
                raise
        with output_journal():  # several outputs: a failed move removes those already moved
            for plan, (_, tmp_cog) in zip(plans, tmps):
                move_into_place(tmp_cog, plan.out, overwrite=overwrite)
    return [CogResult(path=plan.target or plan.out, also=tuple(x)) for plan, x in zip(plans, extra)]


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
) -> CogResult:
    """Write a 2-D DataArray of any size to a Cloud-Optimized GeoTIFF, out of core.

    Memory stays bounded by a few chunks plus ``GDAL_CACHEMAX`` (64 MiB), whatever the DEM
    size. Works with the threaded, synchronous and processes schedulers and under an active
    ``distributed.Client``: the workers compute the blocks and send them back, this process
    writes every file (the workers need no disk shared with it, only access to the inputs). The file appears at ``path``
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
        Show a progress bar (dask's, or a count of the blocks written under a client) for the
        block-writing pass.
    also
        :class:`BlockStats` to compute from every block in the task that writes it (e.g.
        statistics of the DEM against another one): arrays shared with ``dem`` are read and
        computed once, in the same pass. Their per-block results are ``result.also``.

    Returns
    -------
    CogResult
        ``path`` (absolute) and ``also`` (for each of ``also``, its per-block results, blocks
        in row-major order). Path-like: ``os.fspath(result)`` is the path.

    Raises
    ------
    xdem.errors.OutputError
        ``path`` exists (without ``overwrite``), is an input of ``dem``, or its folder is
        missing or not writable.
    xdem.errors.InputError
        ``dem`` is not 2-D, or ``compress``/``blocksize``/``nodata`` are invalid.

    See Also
    --------
    write_cogs : several DataArrays in one pass (e.g. terrain attributes of one DEM).

    Examples
    --------
    >>> import xdem
    >>> dem = xdem.open_dem(xdem.examples.get_path("lidar"))
    >>> xdem.write_cog(dem + 1, "/tmp/lidar_plus_one.tif", overwrite=True).path.name
    'lidar_plus_one.tif'
    """
    compress = _checked_options(compress, blocksize)
    with output_journal():  # an output to object storage: staged, uploaded when the (outermost) journal ends
        plan = _plan(dem, path, overwrite=overwrite, compress=compress, blocksize=blocksize, nodata=nodata)
        (result,) = _write([plan], overwrite=overwrite, compress=compress, blocksize=blocksize, progress=progress,
                           also=[also])
    return result


def write_cogs(
    items: Sequence[tuple[xr.DataArray, str | os.PathLike] | tuple[xr.DataArray, str | os.PathLike, float | None]],
    *,
    overwrite: bool = False,
    compress: str = "deflate",
    blocksize: int = 512,
    nodata: float | None = -9999,
    progress: bool = False,
    also: Sequence[Sequence[BlockStats]] | None = None,
) -> list[CogResult]:
    """Write several 2-D DataArrays to Cloud-Optimized GeoTIFFs in ONE pass over their inputs.

    Like :func:`write_cog` for each ``(array, path)`` pair, but the blocks of all arrays are
    stored into their temporary GTiffs by one dask compute: a task the arrays share (e.g. the
    halo pass of :func:`xdem.terrain.get_terrain_attribute` computing several attributes of
    one DEM, or the read of the DEM itself) runs once per block instead of once per output.
    Then each temporary file gets its GDAL COG copy and validation, and only when all are
    valid are they moved into place (never replacing a file that appeared meanwhile unless
    ``overwrite``); if a move fails, those already moved are undone. On any error nothing
    is left behind. Memory stays bounded by a few chunks of each array plus GDAL's cache.

    Parameters
    ----------
    items
        ``(array, path)`` pairs, or ``(array, path, nodata)`` for an output with its own nodata
        (e.g. ``None`` for a Byte mask); the paths must be distinct.
    overwrite, compress, blocksize, nodata, progress
        As for :func:`write_cog`, for every output.
    also
        For each item, the :class:`BlockStats` computed in the task writing each of its blocks
        (as :func:`write_cog`'s ``also``); results in each ``CogResult.also``.

    Returns
    -------
    list of CogResult
        One per item, in order.

    Raises
    ------
    xdem.errors.OutputError
        As :func:`write_cog`, for any of the paths; or a path given twice.
    xdem.errors.InputError
        An array is not 2-D, or the options are invalid.

    Examples
    --------
    >>> import xdem
    >>> dem = xdem.open_dem(xdem.examples.get_path("lidar"))
    >>> slope, aspect = xdem.terrain.get_terrain_attribute(dem, ["slope", "aspect"])
    >>> [r.path.name for r in xdem.io.cog.write_cogs([(slope, "/tmp/slope.tif"), (aspect, "/tmp/aspect.tif")],
    ...                                              overwrite=True)]
    ['slope.tif', 'aspect.tif']
    """
    compress = _checked_options(compress, blocksize)
    items = list(items)
    if not items:
        raise InputError("write_cogs needs at least one (array, path) pair")
    if also is not None and len(also) != len(items):
        raise InputError(f"write_cogs: also has {len(also)} entries for {len(items)} items; give one per item")
    with output_journal():  # outputs to object storage: staged, uploaded when the (outermost) journal ends
        return _write_all(items, overwrite=overwrite, compress=compress, blocksize=blocksize, nodata=nodata,
                          progress=progress, also=also)


def _write_all(items: list, *, overwrite: bool, compress: str, blocksize: int, nodata: float | None, progress: bool,
               also: Sequence[Sequence[BlockStats]] | None) -> list[CogResult]:
    """:func:`write_cogs` once its options are checked."""
    plans = [_plan(item[0], item[1], overwrite=overwrite, compress=compress, blocksize=blocksize,
                   nodata=item[2] if len(item) > 2 else nodata, who="write_cogs") for item in items]
    seen: dict[Path | str, int] = {}
    for i, plan in enumerate(plans):
        name = plan.target or plan.out
        if name in seen:
            raise OutputError(f"'{name}' is given for outputs {seen[name]} and {i}; give each output its own path")
        seen[name] = i
    sources = {src for item in items for src in find_sources(item[0])}
    for plan in plans:  # an output must not be an input of ANY of the arrays
        if plan.out.resolve() in sources:
            raise OutputError(
                f"'{plan.out}' is one of the inputs of the DEMs being written; write to another path "
                "(even overwrite=True cannot replace a file that is still being read)"
            )
    return _write(plans, overwrite=overwrite, compress=compress, blocksize=blocksize, progress=progress,
                  also=[tuple(a) for a in also] if also is not None else [() for _ in plans])
