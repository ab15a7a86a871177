"""Out-of-core, lock-free, resumable writing of DEMs to Zarr stores.

:func:`write_zarr` writes the store's metadata first (xarray's ``to_zarr`` with
``compute=False``: the variable, ``x``/``y``, ``spatial_ref``), then runs ONE dask task per
store chunk that computes the chunk, writes it with :mod:`zarr` straight into its own object
(no lock: the dask chunks are the store's chunks, so no two tasks touch the same object) and
then writes the chunk's record. Any scheduler works, ``distributed`` included: workers write
directly (they must see the store's folder, or reach its bucket: an ``s3://`` store needs no
shared disk, each task opens the store from the URL and the worker's environment). Last come the consolidated metadata and the
completion marker. The layout and bookkeeping are described in :mod:`xdem.io.zarr_store`.

Where the store is written (a documented choice): in place, at ``path``. A COG is written to a
temporary file and moved into place; a store being written IS the checkpoint a resumed write
continues, so it must be found at ``path``. It is recognisable as incomplete (``.xdem/`` holds
a fingerprint but no completion marker) from the first byte written, and
:func:`xdem.open_dem` refuses it. It is kept on any error (including Ctrl-C and SIGTERM) so
that ``resume=True`` can finish it; under the CLI, a signal's one line says so
(:func:`xdem.interrupt.note_kept`).

Resume: ``resume=True`` on an incomplete store compares the fingerprint of this write (the
dask token of the array written, the input files' sizes and modification times, the store
layout and the caller's ``fingerprint``, e.g. a fitted coregistration's JSON) with the
store's; a different computation is refused. The chunks whose record matches the chunk's
object are kept, the others are computed and written again: the result equals an
uninterrupted write bit for bit (chunks are compressed deterministically).

Safety, as :func:`xdem.write_cog`: never onto an input (nor a folder holding one), no
replacement without ``overwrite`` (and only of a Zarr store or a file: a folder that is not a
Zarr store is never deleted), one writer per store at a time (``.xdem/writer.lock``; in object storage, which has no locks,
two writers of the same store at once are not detected: see :mod:`xdem.io.zarr_store`).
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import rasterio
import xarray as xr

from xdem import interrupt
from xdem.errors import InputError, OutputError
from xdem.io import remote
from xdem.io import zarr_store as zs
from xdem.io.atomic import check_output_path
from xdem.io.cluster import check_workers_see
from xdem.io.cog import GDAL_CACHE_BYTES, _active_client, _prepare_data, one_band
from xdem.io.jsondoc import jsonable
from xdem.io.open import auto_chunks
from xdem.io.sources import find_sources
from xdem.io.zarr_store import answered

__all__ = ["write_zarr", "ZarrResult", "COMPRESSORS", "VARIABLE", "check_store_path"]

#: Name of the DEM variable in the stores :func:`write_zarr` writes (``xr.open_zarr(path)["dem"]``).
VARIABLE = "dem"
#: Compressors accepted by :func:`write_zarr` (``"zstd"``, level 3, is the default).
COMPRESSORS = ("zstd", "blosc", "gzip", "none")


@dataclass(frozen=True)
class ZarrResult:
    """What :func:`write_zarr` did: the absolute ``path`` of the store (its ``s3://`` URL, a
    ``str``, in object storage), the number of chunks it
    computed and wrote (``written``) and kept from an earlier, interrupted write (``kept``).

    Path-like: ``os.fspath(result)`` is the store's path.
    """

    path: Path | str
    written: int
    kept: int
    fingerprint: dict = field(repr=False, default_factory=dict)

    def __fspath__(self) -> str:
        return os.fspath(self.path)


def _codecs(compressor: str) -> tuple:
    import zarr.codecs

    name = str(compressor).lower()
    if name == "zstd":
        return (zarr.codecs.ZstdCodec(level=3),)
    if name == "blosc":
        return (zarr.codecs.BloscCodec(cname="zstd", clevel=3, shuffle="bitshuffle"),)
    if name == "gzip":
        return (zarr.codecs.GzipCodec(level=6),)
    if name == "none":
        return ()
    raise InputError(f"compressor={compressor!r} is not supported; use one of {list(COMPRESSORS)}")


def _store_chunks(data: da.Array, chunks: Any) -> tuple[int, int]:
    if chunks is None:
        rows, cols = data.chunks
        regular = len(set(rows[:-1])) <= 1 and rows[-1] <= rows[0] and len(set(cols[:-1])) <= 1 and cols[-1] <= cols[0]
        return (rows[0], cols[0]) if regular else auto_chunks((int(data.shape[0]), int(data.shape[1])))
    if isinstance(chunks, (int, np.integer)) and not isinstance(chunks, bool):
        chunks = (chunks, chunks)
    if not (isinstance(chunks, (tuple, list)) and len(chunks) == 2 and all(
            isinstance(c, (int, np.integer)) and not isinstance(c, bool) and c >= 16 for c in chunks)):
        raise InputError(f"chunks must be None, an int or a (rows, cols) tuple of at least 16 pixels, got {chunks!r}")
    return min(int(chunks[0]), int(data.shape[0])), min(int(chunks[1]), int(data.shape[1]))


def _identities(sources: set[Path]) -> list[dict]:
    out = []
    for src in sorted(sources):
        entry: dict[str, Any] = {"path": str(src)}
        with contextlib.suppress(OSError):
            st = src.stat()
            entry.update(size=st.st_size, mtime_ns=st.st_mtime_ns)
        out.append(entry)
    return out


def _fingerprint(data: da.Array, *, variable: str, store_chunks: tuple[int, int], nodata: float | None,
                 compressor: str, sources: set[Path], extra: Mapping[str, Any] | None) -> dict:
    doc = {
        "format": "xdem-zarr-1",
        "dask_token": dask.base.tokenize(data),
        "variable": variable,
        "shape": [int(s) for s in data.shape],
        "chunks": list(store_chunks),
        "dtype": np.dtype(data.dtype).name,
        "nodata": None if nodata is None or np.isnan(nodata) else float(nodata),
        "compressor": compressor,
        "inputs": _identities(sources),
        "extra": jsonable(dict(extra or {})),
    }
    return json.loads(json.dumps(doc, sort_keys=True))  # as it reads back from the store


def _check_path(path: Path, sources: set[Path]) -> None:
    """Refuse a store path that is an input, inside one, or holds one (an overwrite would delete it)."""
    target = path.resolve()
    for src in sources:
        if src == target or target in src.parents:
            raise OutputError(f"'{path}' is one of the inputs of the DEM being written, or holds one; write to another "
                              "path (an input is never replaced, even with overwrite)")
    if not path.exists():
        check_output_path(path, overwrite=False, what="output store")  # its folder exists and is writable


def check_store_path(path: str | os.PathLike, *, overwrite: bool, resume: bool,
                     inputs: Iterable[tuple[str, str | os.PathLike]] = ()) -> Path | str:
    """The cheap checks of a store to write, before any computation (:func:`write_zarr` makes
    them again, with the fingerprint): returns the absolute path (the ``s3://`` URL of a store
    in object storage) or raises :class:`~xdem.errors.OutputError` in one line.

    Refused: a folder that does not exist or is not writable (a bucket that does not exist or
    refuses access, an endpoint with no answer), a path that is one of ``inputs``
    (``(label, path)`` pairs) or holds one, an existing store or file without ``overwrite`` or
    ``resume`` (with ``resume``: one not written by xdem), a folder that is not a Zarr store.

    Examples
    --------
    >>> check_store_path("/tmp/new_store.zarr", overwrite=False, resume=False).name
    'new_store.zarr'
    """
    store = zs.locate(path)
    if store.remote:
        for label, src in inputs:
            s = zs.locate(src).url if remote.is_remote(os.fspath(src)) else None
            if s is not None and (s == store.url or s.startswith(store.url + "/")):
                raise OutputError(f"output store '{store.url}' is {label}, or holds it; write to another path "
                                  "(an input is never replaced, even with overwrite)")
        status = answered(store, store.status)
        shown: Path | str = store.url
    else:
        p = Path(store.url)
        target = p.resolve()
        for label, src in inputs:
            if remote.is_remote(os.fspath(src)):
                continue
            s_path = Path(os.path.abspath(os.fspath(src))).resolve()
            if s_path == target or target in s_path.parents:
                raise OutputError(f"output store '{p}' is {label}, or holds it; write to another path "
                                  "(an input is never replaced, even with overwrite)")
        _check_path(p, set())
        status = zs.store_status(p)
        shown = p
    if status == "other" and store.is_folder():
        raise OutputError(f"'{shown}' is a folder that is not a Zarr store; it is never replaced: choose another path")
    if status == "missing" or overwrite or (resume and status in ("incomplete", "complete")):
        return shown
    if resume:
        raise OutputError(f"cannot resume '{shown}': it is not a store written by xdem; pass --overwrite to replace it")
    hint = " (an incomplete store: pass --resume to finish it)" if status == "incomplete" else ""
    raise OutputError(f"output store '{shown}' already exists{hint}; pass --overwrite to replace it or choose another path")


def _prepare_target(store: zs.Store, fp: dict, *, overwrite: bool,
                    resume: bool) -> AbstractSet[tuple[int, int]] | None:
    """Decide what to do with ``store``: the chunks to keep (a resume, maybe none), an empty
    frozenset (a fresh write: the store is missing or was cleared) or ``None`` (already complete
    with this fingerprint)."""
    status = store.status()
    path = store.url
    if status == "missing":
        return _FRESH
    if resume and status in ("incomplete", "complete"):
        old = store.read_json(zs.BOOK, zs.FINGERPRINT)
        if old == fp:
            if status == "complete":
                return None
            if not store.remote:  # a PUT is atomic: an object store has no half-written chunk files
                _drop_partials(Path(path) / fp["variable"])
            return store.done_chunks(fp["variable"])
        if not overwrite:
            prev = old if isinstance(old, dict) else {}
            differ = sorted(k for k in set(fp) | set(prev) if prev.get(k) != fp.get(k))
            raise OutputError(f"cannot resume '{path}': it was written by a different computation (differs in: "
                              f"{', '.join(differ) or 'unreadable fingerprint'}); pass overwrite=True / --overwrite to "
                              "start again, or write to another path")
    elif resume and status == "foreign" and not overwrite:
        raise OutputError(f"cannot resume '{path}': it is a Zarr store not written by xdem; pass overwrite=True / "
                          "--overwrite to replace it, or write to another path")
    if not overwrite:
        what = {"incomplete": "an incomplete store (pass resume=True / --resume to finish it)",
                "complete": "a complete store", "foreign": "a Zarr store", "other": "a file or folder"}[status]
        raise OutputError(f"'{path}' already exists ({what}); pass overwrite=True / --overwrite to replace it or "
                          "choose another path")
    if status == "other" and store.is_folder():
        raise OutputError(f"'{path}' is a folder that is not a Zarr store; it is never deleted, even with overwrite: "
                          "choose another path")
    store.remove()
    return _FRESH


def _drop_partials(variable_dir: Path) -> None:
    """Remove the temporary files of chunk writes cut short by a kill (zarr's local store writes
    ``<chunk>.<id>.partial`` and renames it): never part of a chunk, they would stay in the
    store forever."""
    if variable_dir.is_dir():
        for stale in variable_dir.rglob("*.partial"):
            stale.unlink(missing_ok=True)


#: "Nothing to keep, create the store" (a resume keeping no chunk returns a plain empty set).
_FRESH: frozenset[tuple[int, int]] = frozenset()


def _initialise(data: da.Array, dem: xr.DataArray, store: zs.Store, *, variable: str, store_chunks: tuple[int, int],
                nodata: float | None, codecs: tuple, fp: dict) -> None:
    """Create the store: bookkeeping first (so it is recognisably incomplete), then metadata
    and coordinates (xarray, ``compute=False``: no chunk is computed)."""
    store.create()
    interrupt.note_kept(store.url, f"the unfinished store {store.url} for --resume (run the same command with --resume "
                                   "to finish it)")
    store.start_book(fp)
    arr = xr.DataArray(data, dims=("y", "x"), coords={"y": dem["y"].values, "x": dem["x"].values}, name=variable)
    arr = arr.rio.write_crs(dem.rio.crs).rio.write_transform(dem.rio.transform(recalc=False))
    arr.attrs.update({k: v for k, v in dem.attrs.items() if k in ("AREA_OR_POINT", "units", "long_name")})
    ds = arr.to_dataset()
    # both: rioxarray finds the CRS through grid_mapping, plain xr.open_zarr makes spatial_ref a coordinate
    encoding: dict[str, Any] = {"chunks": store_chunks, "compressors": codecs, "coordinates": "spatial_ref"}
    if nodata is not None:
        encoding["_FillValue"] = np.dtype(data.dtype).type(nodata)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not recognized as a component of a Zarr hierarchy.*")
        ds[variable].encoding.update(encoding)  # keeps rioxarray's grid_mapping encoding
        ds.to_zarr(store.zarr_store(), mode="a", compute=False, zarr_format=3, consolidated=False)


def _write_chunk(block: np.ndarray, *, store: str, variable: str, i: int, j: int, row0: int, col0: int) -> int:
    """One task: write chunk ``(i, j)`` into its own object, then its record (after the chunk).
    Only ``store``'s path or URL travels: the task opens the store from its own environment."""
    arr = zs.open_array(store, variable, mode="r+", zarr_format=3)
    arr[row0 : row0 + block.shape[0], col0 : col0 + block.shape[1]] = block
    zs.locate(store).write_record(variable, i, j)
    return 1


def _finalise(store: zs.Store, fp: dict) -> None:
    import zarr

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*onsolidated metadata.*")
        warnings.filterwarnings("ignore", message=".*not recognized as a component of a Zarr hierarchy.*")
        zarr.consolidate_metadata(store.zarr_store())
    store.write_json(fp, zs.BOOK, zs.COMPLETE)


def _compute(tasks: list, *, progress: bool) -> None:
    client = _active_client(tasks[0]) if tasks else None
    if client is not None:
        futures = client.compute(tasks)
        try:
            if progress:
                from distributed import progress as dprogress

                dprogress(futures)
            client.gather(futures)
        except BaseException:
            client.cancel(futures)
            raise
    else:
        # the chunks are read by GDAL in this process: bound its block cache (by default 5 % of the RAM,
        # which reading a large DEM fills: 1.7 GiB of peak RSS at 20000^2 without this), as write_cog does
        with rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_BYTES), contextlib.ExitStack() as stack:
            if progress:
                from dask.diagnostics import ProgressBar

                stack.enter_context(ProgressBar())
            dask.compute(*tasks)


def write_zarr(
    dem: xr.DataArray,
    path: str | os.PathLike,
    *,
    overwrite: bool = False,
    resume: bool = False,
    chunks: int | tuple[int, int] | None = None,
    compressor: str = "zstd",
    nodata: float | None = -9999,
    progress: bool = False,
    fingerprint: Mapping[str, object] | None = None,
) -> ZarrResult:
    """Write a 2-D DataArray of any size to a Zarr v3 store, out of core, lock-free and resumable.

    The DEM is the store's variable ``dem``. Every chunk is computed and written by one task (any dask scheduler, ``distributed``
    included: workers write straight into the store). The store reads with
    ``xarray.open_zarr`` (``.rio.crs``, ``.rio.transform()`` and ``.rio.nodata`` work) and with
    :func:`xdem.open_dem`. It is written in place; until its completion marker is written
    last, it is recognisably incomplete and :func:`xdem.open_dem` refuses it.

    Parameters
    ----------
    dem
        2-D DataArray (dask- or numpy-backed) with rioxarray georeferencing.
    path
        The store (a folder, conventionally ``*.zarr``). Its parent folder must exist.
    overwrite
        Replace an existing store or file (never an input, nor a folder that is not a Zarr store).
    resume
        Finish an incomplete store written by the same computation: only the chunks without a
        valid record are computed. A store from a different computation is refused (unless
        ``overwrite``: then it is written again); a missing store is written from scratch; a
        complete one from the same computation is left as it is.
    chunks
        Store chunks (int or ``(rows, cols)``, at least 16). Default: the DEM's own dask chunks
        if regular, else about 2048 pixels a side. The DEM is rechunked to them.
    compressor
        ``"zstd"`` (default), ``"blosc"`` (zstd with bit shuffling), ``"gzip"`` or ``"none"``.
    nodata
        Value written for NaN, stored as ``_FillValue``. ``None`` keeps NaN.
    progress
        Show a progress bar (dask's, or ``distributed.progress`` under a client).
    fingerprint
        More to record about the computation and compare on resume (JSON-able), e.g. the
        fitted coregistration's :meth:`~xdem.coreg.Coreg.to_dict`.

    Returns
    -------
    ZarrResult
        The absolute path and the numbers of chunks written and kept.

    Raises
    ------
    xdem.errors.OutputError
        The path exists (without ``overwrite``/``resume``), is or holds an input, is being
        written by another process, or a resume finds a different computation.
    xdem.errors.InputError
        ``dem`` is not 2-D, or ``chunks``/``compressor``/``nodata`` are invalid.

    Examples
    --------
    >>> import xarray as xr, xdem
    >>> dem = xdem.open_dem(xdem.examples.get_path("lidar"))
    >>> result = xdem.write_zarr(dem + 1, "/tmp/lidar_plus_one.zarr", overwrite=True, chunks=128)
    >>> result.written, str(xr.open_zarr(result.path)["dem"].rio.crs)
    (16, 'EPSG:26915')
    >>> xdem.write_zarr(dem + 1, "/tmp/lidar_plus_one.zarr", resume=True, chunks=128).written
    0
    """
    dem = one_band(dem, "write_zarr")
    if dem.rio.crs is None:
        raise InputError("the DEM has no CRS; set one with dem.rio.write_crs('EPSG:XXXX') before writing it")
    codecs = _codecs(compressor)
    data, _, tag = _prepare_data(dem, nodata)
    store_chunks = _store_chunks(data, chunks)
    data = data.rechunk(store_chunks)
    store = zs.locate(path)
    variable = VARIABLE
    sources = find_sources(dem)
    if store.remote:
        target = Path(remote.gdal_path(store.url))  # how sources know a remote input (xdem.io.open)
        if any(src == target or target in src.parents for src in sources):
            raise OutputError(f"'{store.url}' is one of the inputs of the DEM being written, or holds one; write to "
                              "another path (an input is never replaced, even with overwrite)")
        answered(store, store.status)  # the bucket is there and answers, before any computation
    else:
        _check_path(Path(store.url), sources)
        # the tasks write the chunks: under a distributed client its workers must see the folder
        check_workers_see(_active_client(data), Path(store.url).parent, what=f"the Zarr store {store.url}")
    fp = _fingerprint(data, variable=variable, store_chunks=store_chunks, nodata=tag, compressor=str(compressor).lower(),
                      sources=sources, extra=fingerprint)
    return _write(data, dem, store, fp, overwrite=overwrite, resume=resume, codecs=codecs, nodata=tag, progress=progress)


def _write(data: da.Array, dem: xr.DataArray, store: zs.Store, fp: dict, *, overwrite: bool, resume: bool,
           codecs: tuple, nodata: float | None, progress: bool) -> ZarrResult:
    """:func:`write_zarr` once its arguments are checked: prepare the store, write the chunks to keep, finish."""
    out: Path | str = store.url if store.remote else Path(store.url)
    variable = fp["variable"]
    total = len(data.chunks[0]) * len(data.chunks[1])
    local_book = not store.remote and (Path(store.url) / zs.BOOK).is_dir()
    with contextlib.ExitStack() as stack:
        if local_book:  # an xdem store: nobody else may be writing it while it is resumed or replaced
            stack.enter_context(store.lock())
        keep = _prepare_target(store, fp, overwrite=overwrite, resume=resume)
        if keep is None:
            interrupt.note_kept(out, f"the complete store {out} (--resume found it finished)")
            return ZarrResult(path=out, written=0, kept=total, fingerprint=fp)
        if not keep:  # fresh, or a resume with no chunk to keep: its metadata may be half-written, start again
            if keep is not _FRESH:
                store.remove()
            _initialise(data, dem, store, variable=variable, store_chunks=tuple(fp["chunks"]), nodata=nodata,
                        codecs=codecs, fp=fp)
            stack.enter_context(store.lock())
        blocks = data.to_delayed()
        rows = np.cumsum((0,) + data.chunks[0][:-1])
        cols = np.cumsum((0,) + data.chunks[1][:-1])
        tasks = [dask.delayed(_write_chunk, pure=True)(blocks[i, j], store=store.url, variable=variable, i=i, j=j,
                                                      row0=int(rows[i]), col0=int(cols[j]))
                 for i in range(len(rows)) for j in range(len(cols)) if (i, j) not in keep]
        interrupt.note_kept(out, f"the unfinished store {out} for --resume (run the same command with --resume to "
                                 "finish it)")
        try:
            with interrupt.stage(f"the Zarr write of {out}", key="zarr"):
                _compute(tasks, progress=progress)
                _finalise(store, fp)
        except store.errors() as exc:
            fix = ("check the bucket's access rights and the endpoint" if store.remote
                   else "check free disk space and permissions")
            raise OutputError(f"cannot write '{out}' ({remote.redact(str(exc))}); {fix}, then resume with "
                              "resume=True / --resume") from exc
    interrupt.note_kept(out, f"the complete store {out}, written before the signal (--resume finds it finished)")
    return ZarrResult(path=out, written=len(tasks), kept=total - len(tasks), fingerprint=fp)
