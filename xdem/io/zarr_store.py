"""Zarr DEM stores: layout and bookkeeping (the writer is :mod:`xdem.io.zarr`, the reader
:func:`xdem.io.open.open_zarr_dem`).

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

A store with a ``.xdem/`` folder but no completion marker is *incomplete*: :func:`~xdem.io.open.open_zarr_dem`
refuses it unless ``allow_incomplete``. A store without ``.xdem/`` was written by another tool
and is read as it is.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from xdem.errors import OutputError
from xdem.io import atomic

if TYPE_CHECKING:  # annotations only
    from xdem.typing import JSONValue

__all__ = ["is_zarr_path", "is_dem_store", "store_status", "BOOK", "COMPLETE", "FINGERPRINT"]

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


def write_json_atomic(path: Path, doc: object) -> None:
    """Write ``doc`` to ``path`` through a temp file and :func:`os.replace` (never half-written)."""
    tmp = path.with_name(f".tmp-{os.getpid()}-{uuid.uuid4().hex}-{path.name}")
    try:
        tmp.write_text(json.dumps(doc, sort_keys=True))
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def read_json(path: Path) -> JSONValue:
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
    fd = os.open(store / BOOK / _LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if atomic._flock(fd, block=False) is False:
            raise OutputError(f"'{store}' is being written by another process; wait for it to finish or choose another path")
        yield
    finally:
        os.close(fd)
