"""Zarr DEM stores: layout and bookkeeping (the writer is :mod:`xdem.io.zarr`, the reader
:func:`xdem.io.open.open_zarr_dem`), on a local disk or in object storage (``s3://``).

A DEM store written by :func:`xdem.write_zarr` is a Zarr v3 group that ``xarray.open_zarr``
reads without xdem: one 2-D variable (dims ``y``, ``x``) with its ``x``/``y`` pixel-centre
coordinates, a ``spatial_ref`` grid-mapping variable (CF attributes, ``crs_wkt`` and GDAL's
``GeoTransform``, as ``rioxarray``'s ``rio.write_crs`` writes it) and the nodata value as the
variable's ``_FillValue`` attribute. Next to it, xdem's bookkeeping lives in a ``.xdem/``
folder (prefix) inside the store:

- ``.xdem/fingerprint.json``: what is being written (written first, before any chunk);
- ``.xdem/done/<i>.<j>.json``: one record per chunk, written after the chunk: the size and
  CRC-32 of the chunk's file on a local disk, the size and ETag of the chunk's object in
  object storage (or that it is absent: an all-fill chunk is not stored);
- ``.xdem/complete.json``: the completion marker, written last (after the consolidated
  metadata), holding the fingerprint again;
- ``.xdem/writer.lock`` (local stores only): ``flock``-ed by the process writing the store.

A store with a ``.xdem/`` folder but no completion marker is *incomplete*: :func:`~xdem.io.open.open_zarr_dem`
refuses it unless ``allow_incomplete``. A store without ``.xdem/`` was written by another tool
and is read as it is.

Every operation goes through an fsspec file system (:class:`Store`): the local one for a path,
s3fs for ``s3://`` (:func:`xdem.io.remote.filesystem`: endpoint, anonymous access and
requester-pays from the environment). What differs in object storage (a documented choice):

- a PUT of one object is atomic (it appears whole or not at all), so records and markers are
  written directly (a local file goes through a temporary file and :func:`os.replace`), and a
  chunk object is never half-written;
- a chunk's record holds the object's size and ETag, which one listing of the chunks returns
  for up to 1000 objects: checking the records on resume costs no GET of any chunk (a CRC would
  re-read, and pay the egress of, the whole store);
- there is no lock: one writer per store is the user's to ensure (two writers of the same
  store at once are not detected; see ``docs/zarr.md``).
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import shutil
import uuid
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

from xdem.errors import OutputError
from xdem.io import atomic, remote

if TYPE_CHECKING:  # annotations only
    from fsspec import AbstractFileSystem
    from zarr import Array
    from zarr.abc.store import Store as ZarrStore

    from xdem.typing import JSONValue

__all__ = ["is_zarr_path", "is_dem_store", "store_status", "locate", "Store", "answered", "open_array", "BOOK", "COMPLETE",
           "FINGERPRINT"]

#: Folder of xdem's bookkeeping inside a store.
BOOK = ".xdem"
#: Completion marker (inside :data:`BOOK`).
COMPLETE = "complete.json"
#: Fingerprint of the computation being written (inside :data:`BOOK`).
FINGERPRINT = "fingerprint.json"
_DONE = "done"
_LOCK = "writer.lock"
_METADATA = ("zarr.json", ".zgroup", ".zarray", ".zattrs")
T = TypeVar("T")


def is_zarr_path(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a Zarr store: a ``.zarr`` suffix, or a local folder holding Zarr
    metadata (a URL is not looked up: it must end with ``.zarr``).

    Examples
    --------
    >>> is_zarr_path("aligned.zarr"), is_zarr_path("aligned.tif"), is_zarr_path("s3://b/dems/aligned.zarr/")
    (True, False, True)
    """
    text = os.fspath(path)
    if remote.is_remote(text):
        return text.rstrip("/").lower().endswith(".zarr")
    return Path(text).suffix.lower() == ".zarr" or is_dem_store(text)


def is_dem_store(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a local folder with Zarr metadata at its root (v3 ``zarr.json`` or v2)."""
    p = Path(os.fspath(path))
    return p.is_dir() and any((p / name).is_file() for name in _METADATA)


class Store:
    """Where a store is: ``url`` (an absolute local path, or ``s3://bucket/key`` without a
    trailing ``/``), its fsspec file system ``fs`` and its ``root`` in that file system.

    Examples
    --------
    >>> s = locate("/tmp/a.zarr")
    >>> s.url, s.remote, s.key(".xdem", "done")
    ('/tmp/a.zarr', False, '/tmp/a.zarr/.xdem/done')
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.remote = remote.is_remote(url)
        self._fs: AbstractFileSystem | None = None

    @property
    def fs(self) -> AbstractFileSystem:
        """The store's file system (created at first use: a local store needs no fsspec import)."""
        if self._fs is None:
            if self.remote:
                self._fs = remote.filesystem(self.url)
            else:
                from fsspec.implementations.local import LocalFileSystem

                self._fs = LocalFileSystem()
        return self._fs

    @property
    def root(self) -> str:
        return self.url.split("://", 1)[1] if self.remote else self.url

    @property
    def bucket(self) -> str:
        return self.root.split("/", 1)[0]

    @property
    def name(self) -> str:
        """The store's last path component (``aligned.zarr``)."""
        return posixpath.basename(self.url)

    def key(self, *parts: str) -> str:
        """The file-system path of ``parts`` inside the store."""
        return "/".join((self.root, *parts))

    def storage_options(self) -> dict[str, object]:
        """The fsspec options for zarr/xarray (endpoint, anonymous...: never a credential)."""
        return dict(self.fs.storage_options) if self.remote else {}

    def zarr_store(self, *, read_only: bool = False) -> str | ZarrStore:
        """What zarr and xarray open: the path of a local store, an ``FsspecStore`` of a remote one."""
        if not self.remote:
            return self.url
        from zarr.storage import FsspecStore

        return FsspecStore.from_url(self.url, storage_options=self.storage_options(), read_only=read_only)

    # ------------------------------------------------------------------------ state

    def _names(self) -> set[str] | None:
        """Names at the store's root (``None``: nothing there)."""
        if self.remote:
            self.fs.invalidate_cache(self.root)
        try:
            return {posixpath.basename(n.rstrip("/")) for n in self.fs.ls(self.root, detail=False)}
        except (FileNotFoundError, NotADirectoryError):
            return None

    def status(self) -> str:
        """As :func:`store_status`."""
        if self.fs.isfile(self.root):
            return "other"
        names = self._names()
        if names is None:
            return "missing"
        if BOOK in names and self.fs.isdir(self.key(BOOK)):
            return "complete" if self.fs.isfile(self.key(BOOK, COMPLETE)) else "incomplete"
        return "foreign" if names & set(_METADATA) else "other"

    def is_folder(self) -> bool:
        """Whether the store's path is a folder (locally) or a non-empty prefix (object storage)."""
        return bool(self._names()) if self.remote else Path(self.url).is_dir()

    def stamp(self, *parts: str) -> str | int | None:
        """When ``parts`` last changed (local mtime in ns, the object's ETag), ``None`` if missing."""
        try:
            info = self.fs.info(self.key(*parts))
        except FileNotFoundError:
            return None
        return str(info.get("ETag")) if self.remote else int(os.stat(self.key(*parts)).st_mtime_ns)

    # ------------------------------------------------------------------------ bookkeeping

    def read_json(self, *parts: str) -> JSONValue:
        """The JSON document at ``parts``, or ``None`` if it is missing or unreadable."""
        try:
            return json.loads(self.fs.cat_file(self.key(*parts)))
        except (OSError, ValueError):
            return None

    def write_json(self, doc: object, *parts: str) -> None:
        """Write ``doc`` at ``parts``, never half-written (one PUT; locally a temp file and a rename)."""
        if self.remote:
            self.fs.pipe_file(self.key(*parts), json.dumps(doc, sort_keys=True).encode())
        else:
            write_json_atomic(Path(self.key(*parts)), doc)

    def chunk_key(self, variable: str, i: int, j: int) -> str:
        """Key of chunk ``(i, j)`` of ``variable`` (Zarr v3 default chunk keys, ``/`` separator)."""
        return self.key(variable, "c", str(i), str(j))

    def chunk_record(self, variable: str, i: int, j: int) -> dict:
        """The record of chunk ``(i, j)`` as stored now (see the module notes), or absent."""
        obj = self.chunk_key(variable, i, j)
        if self.remote:
            self.fs.invalidate_cache(posixpath.dirname(obj))
            try:
                info = self.fs.info(obj)
            except FileNotFoundError:
                return {"absent": True}
            return _object_record(info)
        try:
            raw = Path(obj).read_bytes()
        except FileNotFoundError:
            return {"absent": True}
        return {"bytes": len(raw), "crc32": zlib.crc32(raw)}

    def write_record(self, variable: str, i: int, j: int) -> None:
        """Record chunk ``(i, j)`` as it is now (after it was written)."""
        self.write_json(self.chunk_record(variable, i, j), BOOK, _DONE, f"{i}.{j}.json")

    def done_chunks(self, variable: str) -> set[tuple[int, int]]:
        """Chunks whose record exists AND matches the chunk's object now (checked: a chunk being
        written when the writer died has no record, or one that no longer matches)."""
        if not self.remote:
            return _local_done_chunks(Path(self.url), variable)
        folder = self.key(BOOK, _DONE)
        self.fs.invalidate_cache(self.root)
        try:
            records = self.fs.cat(self.fs.find(folder), on_error="omit")  # concurrent GETs of the small records
            found = self.fs.find(self.key(variable, "c"), detail=True)  # one LIST per 1000 chunks: no chunk GET
        except FileNotFoundError:
            return set()
        now = {key: _object_record(info) for key, info in found.items()}
        out: set[tuple[int, int]] = set()
        for name, raw in records.items():
            ij = _record_key(posixpath.basename(name))
            if ij is None or isinstance(raw, Exception):
                continue
            with contextlib.suppress(ValueError):
                if json.loads(raw) == now.get(self.chunk_key(variable, *ij), {"absent": True}):
                    out.add(ij)
        return out

    def start_book(self, fingerprint: dict) -> None:
        """Create ``.xdem/`` with its fingerprint (before anything else is written in the store)."""
        if not self.remote:
            Path(self.key(BOOK, _DONE)).mkdir(parents=True, exist_ok=True)
        self.write_json(fingerprint, BOOK, FINGERPRINT)

    def create(self) -> None:
        """Make the store's folder (locally: refused if another process made it meanwhile)."""
        if self.remote:
            return  # a prefix exists once an object is written under it
        try:
            Path(self.url).mkdir()
        except FileExistsError:
            raise OutputError(f"'{self.url}' was created by another process while this one was starting to write it; "
                              "it was left untouched: choose another path") from None

    def remove(self) -> None:
        """Delete the store (or the file/object at its path)."""
        if self.remote:
            self.fs.rm(self.root, recursive=True)
            self.fs.invalidate_cache(self.root)
        elif Path(self.url).is_dir():
            shutil.rmtree(self.url)
        else:
            Path(self.url).unlink()

    def errors(self) -> tuple[type[Exception], ...]:
        """What a failed operation on the store raises: ``OSError`` (s3fs translates the store's
        answers), and botocore's own errors for an endpoint that does not answer."""
        if not self.remote:
            return (OSError,)
        from botocore.exceptions import BotoCoreError  # s3fs's dependency

        return (OSError, BotoCoreError)

    def lock(self) -> contextlib.AbstractContextManager[None]:
        """The writer's lock (:func:`writer_lock`) of a local store; none in object storage."""
        return contextlib.nullcontext() if self.remote else writer_lock(Path(self.url))


def locate(path: str | os.PathLike) -> Store:
    """The :class:`Store` at ``path``: a local path (made absolute), ``s3://bucket/key`` or
    ``/vsis3/bucket/key``.

    Raises
    ------
    xdem.errors.OutputError
        Another URL scheme: Zarr stores are local or on S3 (S3-compatible servers included).
    """
    text = os.fspath(path)
    if not remote.is_remote(text):
        return Store(os.path.abspath(text))
    url = remote.fsspec_url(text) or text
    if remote.scheme(url) != "s3" or "/" not in url.split("://", 1)[1].strip("/"):
        raise OutputError(f"'{remote.redact(text)}': Zarr stores are read and written on a local disk or in S3 "
                          "(s3://bucket/path.zarr, S3-compatible servers through AWS_ENDPOINT_URL); use one of those")
    return Store(url.rstrip("/"))


def answered(store: Store, ask: Callable[[], T]) -> T:
    """``ask()`` (a question to ``store``: its status...), with what an object store answers
    turned into one line: a bucket that does not exist, 403 (with the credential source, never
    a credential), no answer.

    Raises
    ------
    xdem.errors.OutputError
        The store's bucket does not exist, refused access or did not answer.
    """
    if not store.remote:
        return ask()
    where = f"output store '{remote.redact(store.url)}'"
    try:
        result = ask()
        if result == "missing" and not store.fs.exists(store.bucket):
            raise OutputError(f"{where}: the bucket '{store.bucket}' does not exist; create it or check the bucket "
                              "name and the endpoint (AWS_ENDPOINT_URL)")
        return result
    except PermissionError:
        raise OutputError(f"{where}: the store answered 403 (access denied, credentials: {remote.credential_source()}); "
                          "check the access rights to the bucket") from None
    except store.errors() as exc:
        first = remote.redact(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        raise OutputError(f"{where}: no answer from the store ({first}); check the endpoint (AWS_ENDPOINT_URL) "
                          "and the network") from None


def store_status(path: str | os.PathLike) -> str:
    """``"missing"``, ``"complete"`` (xdem's marker), ``"incomplete"`` (xdem's bookkeeping, no
    marker), ``"foreign"`` (Zarr metadata, no bookkeeping: written by another tool) or
    ``"other"`` (a file, or a folder that is not a Zarr store)."""
    return locate(path).status()


def open_array(url: str, variable: str, *, mode: str, zarr_format: Literal[2, 3] | None = None) -> Array:
    """The zarr array ``variable`` of the store at ``url`` (a task opens it itself: only the URL
    travels in the graph, the file system is made from the worker's environment).
    ``zarr_format=3`` (the stores xdem writes) reads ``zarr.json`` alone: in object storage,
    without it, zarr also asks for the v2 metadata (3 HEAD and 2 LIST requests more a task)."""
    import zarr

    store = locate(url)
    return zarr.open_array(store.zarr_store(read_only=mode == "r"), path=variable, mode=mode, zarr_format=zarr_format)


def _object_record(info: dict) -> dict:
    return {"bytes": int(info["size"]), "etag": str(info.get("ETag", "")).strip('"')}


def _record_key(name: str) -> tuple[int, int] | None:
    parts = name[: -len(".json")].split(".") if name.endswith(".json") else []
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1])


# ---------------------------------------------------------------------------- local bookkeeping


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
    """The JSON document at the local ``path``, or ``None`` if it is missing or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def chunk_object(store: Path, variable: str, i: int, j: int) -> Path:
    """File of chunk ``(i, j)`` of ``variable`` in a local store."""
    return store / variable / "c" / str(i) / str(j)


def chunk_record(store: Path, variable: str, i: int, j: int) -> dict:
    """The record of chunk ``(i, j)`` of a local store as it is now: size and CRC-32, or absent."""
    return Store(os.path.abspath(store)).chunk_record(variable, i, j)


def record_path(store: Path, i: int, j: int) -> Path:
    """Where the record of chunk ``(i, j)`` of a local store lives."""
    return store / BOOK / _DONE / f"{i}.{j}.json"


def done_chunks(store: str | os.PathLike, variable: str) -> set[tuple[int, int]]:
    """:meth:`Store.done_chunks` of the store at ``store``."""
    return locate(store).done_chunks(variable)


def _local_done_chunks(store: Path, variable: str) -> set[tuple[int, int]]:
    out: set[tuple[int, int]] = set()
    with contextlib.suppress(OSError):
        for f in (store / BOOK / _DONE).iterdir():
            ij = _record_key(f.name)
            if ij is not None and read_json(f) == chunk_record(store, variable, *ij):
                out.add(ij)
    return out


def start_book(store: Path, fingerprint: dict) -> None:
    """Create ``.xdem/`` of a local store with its fingerprint."""
    Store(os.path.abspath(store)).start_book(fingerprint)


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
