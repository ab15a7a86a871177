"""Out-of-core, lock-free, resumable writing of DEMs to Zarr stores.

:func:`write_zarr` writes the store's metadata first (xarray's ``to_zarr`` with
``compute=False``: the variable, ``x``/``y``, ``spatial_ref``), then runs ONE dask task per
store chunk that computes the chunk, writes it with :mod:`zarr` straight into its own object
(no lock: the dask chunks are the store's chunks, so no two tasks touch the same object) and
then writes the chunk's record. Any scheduler works, ``distributed`` included: workers write
directly (they must see the store's folder). Last come the consolidated metadata and the
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
Zarr store is never deleted), one writer per store at a time (``.xdem/writer.lock``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
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
from xdem.io import zarr_store as zs
from xdem.io.atomic import check_output_path
from xdem.io.cluster import check_workers_see
from xdem.io.cog import GDAL_CACHE_MB, _active_client, _prepare_data, one_band
from xdem.io.jsondoc import jsonable
from xdem.io.open import auto_chunks
from xdem.io.sources import find_sources

__all__ = ["write_zarr", "ZarrResult", "COMPRESSORS", "VARIABLE", "check_store_path"]

#: Name of the DEM variable in the stores :func:`write_zarr` writes (``xr.open_zarr(path)["dem"]``).
VARIABLE = "dem"
#: Compressors accepted by :func:`write_zarr` (``"zstd"``, level 3, is the default).
COMPRESSORS = ("zstd", "blosc", "gzip", "none")


@dataclass(frozen=True)
class ZarrResult:
    """What :func:`write_zarr` did: the absolute ``path`` of the store, the number of chunks it
    computed and wrote (``written``) and kept from an earlier, interrupted write (``kept``).

    Path-like: ``os.fspath(result)`` is the store's path.
    """

    path: Path
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
                     inputs: Iterable[tuple[str, str | os.PathLike]] = ()) -> Path:
    """The cheap checks of a store to write, before any computation (:func:`write_zarr` makes
    them again, with the fingerprint): returns the absolute path or raises
    :class:`~xdem.errors.OutputError` in one line.

    Refused: a folder that does not exist or is not writable, a path that is one of ``inputs``
    (``(label, path)`` pairs) or holds one, an existing store or file without ``overwrite`` or
    ``resume`` (with ``resume``: one not written by xdem), a folder that is not a Zarr store.

    Examples
    --------
    >>> check_store_path("/tmp/new_store.zarr", overwrite=False, resume=False).name
    'new_store.zarr'
    """
    p = Path(os.path.abspath(os.fspath(path)))
    target = p.resolve()
    for label, src in inputs:
        s = Path(os.path.abspath(os.fspath(src))).resolve()
        if s == target or target in s.parents:
            raise OutputError(f"output store '{p}' is {label}, or holds it; write to another path "
                              "(an input is never replaced, even with overwrite)")
    _check_path(p, set())
    status = zs.store_status(p)
    if status == "other" and p.is_dir():
        raise OutputError(f"'{p}' is a folder that is not a Zarr store; it is never replaced: choose another path")
    if status == "missing" or overwrite or (resume and status in ("incomplete", "complete")):
        return p
    if resume:
        raise OutputError(f"cannot resume '{p}': it is not a store written by xdem; pass --overwrite to replace it")
    hint = " (an incomplete store: pass --resume to finish it)" if status == "incomplete" else ""
    raise OutputError(f"output store '{p}' already exists{hint}; pass --overwrite to replace it or choose another path")


def _prepare_target(path: Path, fp: dict, *, overwrite: bool, resume: bool) -> AbstractSet[tuple[int, int]] | None:
    """Decide what to do with ``path``: the chunks to keep (a resume, maybe none), an empty
    frozenset (a fresh write: ``path`` is missing or was cleared) or ``None`` (already complete
    with this fingerprint)."""
    status = zs.store_status(path)
    if status == "missing":
        return _FRESH
    if resume and status in ("incomplete", "complete"):
        old = zs.read_json(path / zs.BOOK / zs.FINGERPRINT)
        if old == fp:
            if status == "complete":
                return None
            _drop_partials(path / fp["variable"])
            return zs.done_chunks(path, fp["variable"])
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
    if status == "other" and path.is_dir():
        raise OutputError(f"'{path}' is a folder that is not a Zarr store; it is never deleted, even with overwrite: "
                          "choose another path")
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()
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


def _initialise(data: da.Array, dem: xr.DataArray, path: Path, *, variable: str, store_chunks: tuple[int, int],
                nodata: float | None, codecs: tuple, fp: dict) -> None:
    """Create the store: bookkeeping first (so it is recognisably incomplete), then metadata
    and coordinates (xarray, ``compute=False``: no chunk is computed)."""
    try:
        path.mkdir()
    except FileExistsError:
        raise OutputError(f"'{path}' was created by another process while this one was starting to write it; "
                          "it was left untouched: choose another path") from None
    interrupt.note_kept(path, f"the unfinished store {path} for --resume (run the same command with --resume to "
                              "finish it)")
    zs.start_book(path, fp)
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
        ds.to_zarr(path, mode="a", compute=False, zarr_format=3, consolidated=False)


def _write_chunk(block: np.ndarray, *, store: str, variable: str, i: int, j: int, row0: int, col0: int) -> int:
    """One task: write chunk ``(i, j)`` into its own object, then its record (after the chunk)."""
    import zarr

    arr = zarr.open_array(store, path=variable, mode="r+")
    arr[row0 : row0 + block.shape[0], col0 : col0 + block.shape[1]] = block
    path = Path(store)
    zs.write_json_atomic(zs.record_path(path, i, j), zs.chunk_record(path, variable, i, j))
    return 1


def _finalise(path: Path, fp: dict) -> None:
    import zarr

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*onsolidated metadata.*")
        warnings.filterwarnings("ignore", message=".*not recognized as a component of a Zarr hierarchy.*")
        zarr.consolidate_metadata(str(path))
    zs.write_json_atomic(path / zs.BOOK / zs.COMPLETE, fp)


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
        with rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_MB), contextlib.ExitStack() as stack:
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
    out = Path(os.path.abspath(os.fspath(path)))
    variable = VARIABLE
    sources = find_sources(dem)
    _check_path(out, sources)
    check_workers_see(_active_client(data), out.parent, what=f"the Zarr store {out}")  # the tasks write the chunks
    fp = _fingerprint(data, variable=variable, store_chunks=store_chunks, nodata=tag, compressor=str(compressor).lower(),
                      sources=sources, extra=fingerprint)
    total = len(data.chunks[0]) * len(data.chunks[1])
    with contextlib.ExitStack() as stack:
        if (out / zs.BOOK).is_dir():  # an xdem store: nobody else may be writing it while it is resumed or replaced
            stack.enter_context(zs.writer_lock(out))
        keep = _prepare_target(out, fp, overwrite=overwrite, resume=resume)
        if keep is None:
            interrupt.note_kept(out, f"the complete store {out} (--resume found it finished)")
            return ZarrResult(path=out, written=0, kept=total, fingerprint=fp)
        if not keep:  # fresh, or a resume with no chunk to keep: its metadata may be half-written, start again
            if keep is not _FRESH:
                shutil.rmtree(out)
            _initialise(data, dem, out, variable=variable, store_chunks=store_chunks, nodata=tag, codecs=codecs, fp=fp)
            stack.enter_context(zs.writer_lock(out))
        blocks = data.to_delayed()
        rows = np.cumsum((0,) + data.chunks[0][:-1])
        cols = np.cumsum((0,) + data.chunks[1][:-1])
        tasks = [dask.delayed(_write_chunk, pure=True)(blocks[i, j], store=str(out), variable=variable, i=i, j=j,
                                                      row0=int(rows[i]), col0=int(cols[j]))
                 for i in range(len(rows)) for j in range(len(cols)) if (i, j) not in keep]
        interrupt.note_kept(out, f"the unfinished store {out} for --resume (run the same command with --resume to "
                                 "finish it)")
        try:
            with interrupt.stage(f"the Zarr write of {out}", key="zarr"):
                _compute(tasks, progress=progress)
                _finalise(out, fp)
        except OSError as exc:
            raise OutputError(f"cannot write '{out}' ({exc}); check free disk space and permissions, then resume with "
                              "resume=True / --resume") from exc
    interrupt.note_kept(out, f"the complete store {out}, written before the signal (--resume finds it finished)")
    return ZarrResult(path=out, written=len(tasks), kept=total - len(tasks), fingerprint=fp)
