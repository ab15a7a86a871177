"""Zarr DEM stores: layout, bookkeeping and reading (the writer is :mod:`xdem.io.zarr`).

A DEM store written by :func:`xdem.write_zarr` is a Zarr v3 group that ``xarray.open_zarr``
reads without xdem: one 2-D variable (dims ``y``, ``x``) with its ``x``/``y`` pixel-centre
coordinates, a ``spatial_ref`` grid-mapping variable (CF attributes, ``crs_wkt`` and GDAL's
``GeoTransform``, as ``rioxarray``'s ``rio.write_crs`` writes it) and the nodata value as the
variable's ``_FillValue`` attribute. Next to it, xdem's bookkeeping lives in a ``.xdem/``
folder inside the store:

- ``.xdem/fingerprint.json``: what is being written (written first, before any chunk);
- ``.xdem/done/<i>.<j>.json``: one record per chunk, written after the chunk: the size and
  CRC-32 of the chunk's object (or that it is absent: an all-fill chunk is not stored);
- ``.xdem/complete.json``: the completion marker, written last (after the consolidated
  metadata), holding the fingerprint again;
- ``.xdem/writer.lock``: ``flock``-ed by the process writing the store.

A store with a ``.xdem/`` folder but no completion marker is *incomplete*: :func:`open_zarr_dem`
refuses it unless ``allow_incomplete``. A store without ``.xdem/`` was written by another tool
and is read as it is.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from xdem.errors import CRSError, InputError, OutputError

__all__ = ["is_zarr_path", "is_dem_store", "store_status", "open_zarr_dem", "BOOK", "COMPLETE", "FINGERPRINT"]

#: Folder of xdem's bookkeeping inside a store.
BOOK = ".xdem"
#: Completion marker (inside :data:`BOOK`).
COMPLETE = "complete.json"
#: Fingerprint of the computation being written (inside :data:`BOOK`).
FINGERPRINT = "fingerprint.json"
_DONE = "done"
_LOCK = "writer.lock"
_METADATA = ("zarr.json", ".zgroup", ".zarray", ".zattrs")


def is_zarr_path(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a Zarr store: a ``.zarr`` suffix, or a folder holding Zarr metadata.

    Examples
    --------
    >>> is_zarr_path("aligned.zarr"), is_zarr_path("aligned.tif")
    (True, False)
    """
    p = Path(os.fspath(path))
    return p.suffix.lower() == ".zarr" or is_dem_store(p)


def is_dem_store(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a folder with Zarr metadata at its root (v3 ``zarr.json`` or v2)."""
    p = Path(os.fspath(path))
    return p.is_dir() and any((p / name).is_file() for name in _METADATA)


def store_status(path: str | os.PathLike) -> str:
    """``"missing"``, ``"complete"`` (xdem's marker), ``"incomplete"`` (xdem's bookkeeping, no
    marker), ``"foreign"`` (Zarr metadata, no bookkeeping: written by another tool) or
    ``"other"`` (a file, or a folder that is not a Zarr store)."""
    p = Path(os.fspath(path))
    if not p.exists():
        return "missing"
    if p.is_dir() and (p / BOOK).is_dir():
        return "complete" if (p / BOOK / COMPLETE).is_file() else "incomplete"
    return "foreign" if is_dem_store(p) else "other"


# ---------------------------------------------------------------------------- bookkeeping


def write_json_atomic(path: Path, doc: Any) -> None:
    """Write ``doc`` to ``path`` through a temp file and :func:`os.replace` (never half-written)."""
    tmp = path.with_name(f".tmp-{os.getpid()}-{uuid.uuid4().hex}-{path.name}")
    try:
        tmp.write_text(json.dumps(doc, sort_keys=True))
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def read_json(path: Path) -> Any:
    """The JSON document at ``path``, or ``None`` if it is missing or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def chunk_object(store: Path, variable: str, i: int, j: int) -> Path:
    """File of chunk ``(i, j)`` of ``variable`` (Zarr v3 default chunk keys, ``/`` separator)."""
    return store / variable / "c" / str(i) / str(j)


def chunk_record(store: Path, variable: str, i: int, j: int) -> dict:
    """The record of chunk ``(i, j)`` as stored now: size and CRC-32 of its object, or absent."""
    obj = chunk_object(store, variable, i, j)
    try:
        raw = obj.read_bytes()
    except FileNotFoundError:
        return {"absent": True}
    return {"bytes": len(raw), "crc32": zlib.crc32(raw)}


def record_path(store: Path, i: int, j: int) -> Path:
    """Where the record of chunk ``(i, j)`` lives."""
    return store / BOOK / _DONE / f"{i}.{j}.json"


def done_chunks(store: Path, variable: str) -> set[tuple[int, int]]:
    """Chunks whose record exists AND matches the chunk's object now (checked: a chunk being
    written when the writer died has no record, or one that no longer matches)."""
    folder = store / BOOK / _DONE
    out: set[tuple[int, int]] = set()
    with contextlib.suppress(OSError):
        for f in folder.iterdir():
            parts = f.name[: -len(".json")].split(".") if f.name.endswith(".json") else []
            if len(parts) != 2 or not all(p.isdigit() for p in parts):
                continue
            i, j = int(parts[0]), int(parts[1])
            if read_json(f) == chunk_record(store, variable, i, j):
                out.add((i, j))
    return out


def start_book(store: Path, fingerprint: dict) -> None:
    """Create ``.xdem/`` with its fingerprint (before anything else is written in ``store``)."""
    (store / BOOK / _DONE).mkdir(parents=True, exist_ok=True)
    write_json_atomic(store / BOOK / FINGERPRINT, fingerprint)


@contextlib.contextmanager
def writer_lock(store: Path) -> Iterator[None]:
    """Hold ``.xdem/writer.lock`` for the block: a second writer of the same store is refused."""
    from xdem.io.atomic import _flock

    fd = os.open(store / BOOK / _LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if _flock(fd, block=False) is False:
            raise OutputError(f"'{store}' is being written by another process; wait for it to finish or choose another path")
        yield
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------- reading


def _open_dataset(path: Path) -> xr.Dataset:
    with warnings.catch_warnings():  # non-consolidated stores, and .xdem/ is not a Zarr node
        warnings.filterwarnings("ignore", message=".*consolidated.*")
        warnings.filterwarnings("ignore", message=".*not recognized as a component of a Zarr hierarchy.*")
        return xr.open_zarr(path, chunks=None, mask_and_scale=False, decode_coords="all")


def _dem_variable(ds: xr.Dataset, path: Path) -> str:
    names = [str(n) for n, v in ds.data_vars.items() if v.ndim == 2]
    if len(names) != 1:
        found = "none" if not names else ", ".join(names)
        raise InputError(f"'{path}' is not a DEM store: it must hold exactly one 2-D variable (found {found}); "
                         "open the one you want with xarray.open_zarr and pass that DataArray to open_dem")
    return names[0]


class ZarrRegionReader:
    """Any region of a DEM store's variable, nodata as NaN, as :func:`xdem.io.open._finish`
    casts it: a region reader (:func:`xdem.io.sources.register_region_reader`)."""

    def __init__(self, path: Path, variable: str, dtype: np.dtype, nodata: float | None) -> None:
        self.path = str(path)
        self.variable = variable
        self.dtype = np.dtype(dtype)
        self.nodata = nodata

    def __call__(self, rows: slice, cols: slice) -> np.ndarray:
        import zarr

        arr = zarr.open_array(self.path, path=self.variable, mode="r")
        data = np.asarray(arr[rows, cols]).astype(self.dtype, copy=False)
        if self.nodata is not None and not np.isnan(self.nodata):
            data = np.where(data == self.dtype.type(self.nodata), self.dtype.type(np.nan), data)
        return data


def _lazy_data(path: Path, variable: str, ck: tuple[int, int]) -> Any:
    """The variable's chunks as a dask array with a name that depends only on the store's path,
    metadata and completion times and on ``ck`` (so that the same store opened twice, even in
    two processes, gives the same graph: what a resumed write's fingerprint compares)."""
    import dask.array as da
    import dask.base
    import zarr

    stamps = [(name, (path / name).stat().st_mtime_ns) for name in ("zarr.json", f"{BOOK}/{COMPLETE}")
              if (path / name).exists()]
    token = dask.base.tokenize(str(path.resolve()), variable, stamps, ck)
    arr = zarr.open_array(str(path), path=variable, mode="r")
    return da.from_array(arr, chunks=ck, lock=False, name=f"open_dem-{path.stem}-{token}",
                         meta=np.array((), dtype=arr.dtype))


def open_zarr_dem(path: Path, *, chunks: Any, band: int | None, nodata: float | None,
                  allow_incomplete: bool = False) -> xr.DataArray:
    """Open the DEM of a Zarr store lazily (the :func:`xdem.open_dem` path for stores).

    Chunks are a multiple of the store's chunks (``"auto"``) or as given.
    """
    from xdem.io.open import _finish, _nodata_of, _normalise_chunks
    from xdem.io.sources import register_region_reader, register_source

    status = store_status(path)
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
        ds = _open_dataset(path)
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
    arr = arr.copy(data=_lazy_data(path, name, ck))
    register_source(arr.data, path)
    out = _finish(arr, nodata, name=path.stem)
    register_region_reader(out, ZarrRegionReader(path, name, out.dtype, _nodata_of(arr, nodata)))
    return out
