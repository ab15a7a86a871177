"""A run-scoped spill of decoded input chunks: each chunk of a remote DEM file (and, with
``XDEM_SPILL=1``, of a local compressed one) is decoded once per run; later passes read its raw
values back from a local temporary file.

``xdem coreg`` reads both DEMs in the fit's sampling pass, then again in the block-writing pass
(the resampled output, the statistics of dh, the halo strips of wide DEMs). Decoding a deflate
tile costs far more than reading its raw bytes back from the page cache, and a remote file's
bytes would be downloaded again. Inside :func:`spill_scope`, the reader that
:func:`xdem.open_dem` builds for a file (``xdem.io.open._NamedReader``) writes every chunk it
decodes into the spill (:meth:`SpillFile.put`) and serves any window whose chunks are all there
from it (:meth:`SpillFile.get`), without decoding.

Layout: one flat file per input holding the file's decoded values (its own dtype, before nodata
and casts), chunk by chunk: the chunks of the reader's grid in row-major order, each stored
whole and row-major, at an offset computed from its index (``(row0 * width + col0 * rows of
its chunk row) * itemsize``), so no index is kept. A chunk is written and read back whole in
one ``pwrite``/``preadv`` (a layout row-major over the whole raster, GDAL's raw layout, needs
one system call per row: measured 1.5 to 2.7 times the system time); any other window (the one
a warp needs, a halo strip of a few pixels) reads, in each chunk it touches, the rows it spans
in one call (or, for a strip narrower than a quarter of the chunk, its own bytes row by row),
into a fresh array: never a memory map of the whole file, whose touched pages would count in
the process's memory. The chunks present are a set in memory; a window with a chunk missing is
decoded from the file, except through the region reader of :func:`xdem.open_dem`
(``xdem.io.open._RegionReader``: the warp's windows, halo strips, a blockwise group's blocks),
which first decodes and stores the whole chunks missing under it (:meth:`SpillFile.missing`).

Where and when: the files are temporaries of the run's output folder
(:func:`xdem.io.atomic.owned_temps`, removed on exit, on any error and on SIGINT/SIGTERM; those
of a killed run by the next writer there). The scope holds a spill only if the disk can take it:
every input's raw size plus ``reserve`` (the write pass's own temporaries) must fit in the free
space measured when the scope starts (:func:`free_bytes`); an input that would not fit is decoded
twice, as without a spill. By default only remote inputs (``/vsis3/``, ``/vsicurl/``...) are
spilled: ``XDEM_SPILL=1`` spills local compressed files and VRTs too (:func:`spill_local_files`:
for a run that decodes each chunk about twice it costs more than it saves on the disks measured),
and so does a run whose fit decodes them more often (``spill_scope(local_files=True)``: a blockwise
fit, 8 % less CPU at 20000^2); ``XDEM_SPILL=0`` turns the spill off. The same folder and budget
hold :class:`RecordFile` s (:func:`record_scope`), e.g. a blockwise fit's samples.
Callers decide the scheduler: the spill lives in this process, so only the local
threaded and synchronous schedulers may use it (worker processes see no active scope and simply
decode).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
import threading
from collections.abc import Hashable, Iterator, Mapping
from pathlib import Path

import numpy as np

from xdem.io.atomic import owned_temps

__all__ = ["SpillFile", "RecordFile", "record_scope", "Spill", "spill_scope",
           "active_spill", "spill_enabled", "spill_local_files", "free_bytes", "SPILL_ENV",
           "MARGIN_BYTES"]

#: Environment variable turning the spill off when set to ``0`` (or ``false``, ``no``, ``off``).
SPILL_ENV = "XDEM_SPILL"
#: Free space left untouched by the spill, on top of the caller's ``reserve``.
MARGIN_BYTES = 256 * 2**20

_ACTIVE: list[Spill] = []
_ACTIVE_LOCK = threading.Lock()


def spill_local_files() -> bool:
    """Whether local compressed files (and VRTs) are spilled too: only when ``XDEM_SPILL`` is
    ``1`` (or ``true``, ``yes``, ``on``). By default only remote inputs are (their second download
    costs more than a local write): on local files the spill's writes into the page cache cost
    more system time than the second decode's user time on the machine measured (8000^2
    ``nuthkaab``: 18.1-18.9 s CPU with it against 14.4-16.2 s without, 6-7 s of system time
    against 2).

    Examples
    --------
    >>> spill_local_files() in (True, False)
    True
    """
    return os.environ.get(SPILL_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def spill_enabled() -> bool:
    """Whether the environment allows a spill (``XDEM_SPILL`` is not ``0``/``false``/``no``/``off``).

    Examples
    --------
    >>> spill_enabled() in (True, False)
    True
    """
    return os.environ.get(SPILL_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def free_bytes(folder: str | os.PathLike) -> int:
    """Free bytes on the filesystem of ``folder`` (the probe tests replace)."""
    return int(shutil.disk_usage(folder).free)


def _span(sl: slice, size: int) -> tuple[int, int] | None:
    """``(start, stop)`` of a unit-step slice clipped to ``size``, or ``None`` (another step)."""
    start, stop, step = sl.indices(size)
    return (start, max(start, stop)) if step == 1 else None


class SpillFile:
    """The decoded values of one raster, row-major in one raw file, and which chunks are in it.

    Parameters
    ----------
    path
        The file (created here, sparse, of the raster's raw size).
    shape
        ``(rows, cols)`` of the raster.
    dtype
        Dtype of the values stored.
    chunks
        ``(rows, cols)`` of the chunk grid :meth:`put` recognises (the reader's chunks).

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> f = SpillFile(tempfile.mktemp(), shape=(4, 6), dtype=np.dtype("float32"), chunks=(2, 3))
    >>> a = np.arange(24, dtype="float32").reshape(4, 6)
    >>> f.get(slice(1, 3), slice(2, 4)) is None  # nothing spilled yet
    True
    >>> for r in (0, 2):
    ...     for c in (0, 3):
    ...         f.put(slice(r, r + 2), slice(c, c + 3), a[r:r + 2, c:c + 3])
    >>> f.get(slice(1, 3), slice(2, 4)).tolist()
    [[8.0, 9.0], [14.0, 15.0]]
    >>> f.close()
    """

    def __init__(self, path: str | os.PathLike, *, shape: tuple[int, int], dtype: np.dtype,
                 chunks: tuple[int, int]) -> None:
        self.path = os.fspath(path)
        self.shape = (int(shape[0]), int(shape[1]))
        self.dtype = np.dtype(dtype)
        self.chunks = (max(1, int(chunks[0])), max(1, int(chunks[1])))
        self.nbytes = self.shape[0] * self.shape[1] * self.dtype.itemsize
        self._present: set[tuple[int, int]] = set()
        self._lock = threading.Condition()
        self._busy = 0
        self._broken = False
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            _allocate(self._fd, self.nbytes)
        except OSError:
            self.close()
            raise

    def _chunk_of(self, rows: tuple[int, int], cols: tuple[int, int]) -> tuple[int, int] | None:
        """The chunk index of the window, if it is exactly one chunk of the grid."""
        (r0, r1), (c0, c1), (h, w), (ch, cw) = rows, cols, self.shape, self.chunks
        if r0 % ch or c0 % cw or r1 != min(r0 + ch, h) or c1 != min(c0 + cw, w) or r0 >= h or c0 >= w:
            return None
        return r0 // ch, c0 // cw

    @contextlib.contextmanager
    def _using(self) -> Iterator[int | None]:
        """The file descriptor while it is in use (``None`` once closed or broken)."""
        with self._lock:
            fd = None if self._broken else self._fd
            if fd is not None:
                self._busy += 1
        try:
            yield fd
        finally:
            if fd is not None:
                with self._lock:
                    self._busy -= 1
                    self._lock.notify_all()

    def _offset(self, row0: int, col0: int) -> int:
        """Byte offset of the chunk whose first pixel is ``(row0, col0)``: the chunks before it,
        row of chunks by row of chunks, each stored whole, row-major."""
        rows = min(self.chunks[0], self.shape[0] - row0)
        return (row0 * self.shape[1] + col0 * rows) * self.dtype.itemsize

    def _read_part(self, fd: int, out: np.ndarray, origin: tuple[int, int], chunk: tuple[int, int]) -> None:
        """Fill the part of ``out`` (the window whose first pixel is ``origin``) that lies in the
        chunk whose first pixel is ``chunk``: one read of the rows it spans when it takes a
        quarter of the chunk's width or more, else one read per row (a halo strip)."""
        (h, w), item = (min(self.chunks[0], self.shape[0] - chunk[0]), min(self.chunks[1], self.shape[1] - chunk[1])), \
            self.dtype.itemsize
        a, b = max(origin[0], chunk[0]), min(origin[0] + out.shape[0], chunk[0] + h)  # rows, in the raster
        c, d = max(origin[1], chunk[1]), min(origin[1] + out.shape[1], chunk[1] + w)  # columns
        dst = out[a - origin[0]:b - origin[0], c - origin[1]:d - origin[1]]
        base = self._offset(*chunk) + (a - chunk[0]) * w * item
        if 4 * (d - c) < w:
            for k in range(b - a):
                _pread_all(fd, dst[k].data.cast("B"), base + (k * w + c - chunk[1]) * item)
        elif d - c == w and dst.flags.c_contiguous:
            _pread_all(fd, dst.data.cast("B"), base)
        else:
            band = np.empty((b - a, w), dtype=self.dtype)
            _pread_all(fd, band.data.cast("B"), base)
            dst[...] = band[:, c - chunk[1]:d - chunk[1]]

    def put(self, rows: slice, cols: slice, data: np.ndarray) -> None:
        """Store ``data``, the values of the window ``rows, cols``, if that window is a chunk of
        the grid not stored yet; otherwise do nothing. A write error (a full disk) stops the
        spill of this file (its chunks are decoded again), it never fails the read."""
        rs, cs = _span(rows, self.shape[0]), _span(cols, self.shape[1])
        if rs is None or cs is None:
            return
        index = self._chunk_of(rs, cs)
        if index is None or data.shape != (rs[1] - rs[0], cs[1] - cs[0]):
            return
        with self._lock:
            if index in self._present:
                return
        values = np.ascontiguousarray(data, dtype=self.dtype)
        with self._using() as fd:
            if fd is None:
                return
            try:
                _pwrite_all(fd, values.data.cast("B"), self._offset(rs[0], cs[0]))
            except OSError:
                with self._lock:
                    self._broken = True
                return
            with self._lock:
                self._present.add(index)

    def get(self, rows: slice, cols: slice) -> np.ndarray | None:
        """The window's values (a new array) if every chunk it touches is stored, else ``None``."""
        rs, cs = _span(rows, self.shape[0]), _span(cols, self.shape[1])
        if rs is None or cs is None or rs[0] >= rs[1] or cs[0] >= cs[1]:
            return None
        (ch, cw) = self.chunks
        needed = {(i, j) for i in range(rs[0] // ch, (rs[1] - 1) // ch + 1)
                  for j in range(cs[0] // cw, (cs[1] - 1) // cw + 1)}
        with self._lock:
            if not needed <= self._present:
                return None
        out = np.empty((rs[1] - rs[0], cs[1] - cs[0]), dtype=self.dtype)
        with self._using() as fd:
            if fd is None:
                return None
            try:
                for i in range(rs[0] // ch, (rs[1] - 1) // ch + 1):
                    for j in range(cs[0] // cw, (cs[1] - 1) // cw + 1):
                        self._read_part(fd, out, (rs[0], cs[0]), (i * ch, j * cw))
            except OSError:
                return None
        return out

    def missing(self, rows: slice, cols: slice) -> list[tuple[slice, slice]]:
        """The whole chunks under the window ``rows, cols`` not stored yet (none once the spill of
        this file has stopped): what a reader decodes whole to serve the window from the spill."""
        rs, cs = _span(rows, self.shape[0]), _span(cols, self.shape[1])
        if rs is None or cs is None or rs[0] >= rs[1] or cs[0] >= cs[1]:
            return []
        (ch, cw), (h, w) = self.chunks, self.shape
        with self._lock:
            if self._broken:
                return []
            return [(slice(i * ch, min((i + 1) * ch, h)), slice(j * cw, min((j + 1) * cw, w)))
                    for i in range(rs[0] // ch, (rs[1] - 1) // ch + 1) for j in range(cs[0] // cw, (cs[1] - 1) // cw + 1)
                    if (i, j) not in self._present]

    @property
    def chunks_stored(self) -> int:
        """Number of chunks in the file."""
        with self._lock:
            return len(self._present)

    def close(self) -> None:
        """Wait for reads and writes in flight, then close the file (later calls store and serve nothing)."""
        with self._lock:
            self._broken = True
            while self._busy:
                self._lock.wait()
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def _allocate(fd: int, nbytes: int) -> None:
    """Give the file its ``nbytes``, allocated on disk when the filesystem can do it at once
    (``fallocate(2)``: the space is then reserved, and the first write of each page costs less
    than filling a sparse file: measured 1.5 to 3 times less system time on ext4); else sparse
    (``ftruncate``). Never glibc's ``posix_fallocate``, which emulates it by writing every block.
    ``OSError`` (ENOSPC) when the disk cannot hold it."""
    import ctypes
    import ctypes.util

    code = -1
    with contextlib.suppress(OSError, AttributeError, TypeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong)
        code = 0 if libc.fallocate(fd, 0, 0, nbytes) == 0 else ctypes.get_errno()
    if code == errno.ENOSPC:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    if code != 0:
        os.ftruncate(fd, nbytes)


def _pwrite_all(fd: int, buf: memoryview, offset: int) -> None:
    while len(buf):
        n = os.pwrite(fd, buf, offset)
        if n <= 0:
            raise OSError("short write to the spill")
        buf, offset = buf[n:], offset + n


def _pread_all(fd: int, buf: memoryview, offset: int) -> None:
    while len(buf):
        n = os.preadv(fd, [buf], offset)
        if n <= 0:
            raise OSError("short read from the spill")
        buf, offset = buf[n:], offset + n


class RecordFile:
    """Records of numpy arrays, each under a key, appended to one file and read back whole, within
    a capacity: what a later pass of the run needs again and memory cannot hold (the first
    round's sample of each :class:`~xdem.coreg.BlockwiseCoreg` tile, for the later rounds).

    Each record is written by one ``pwrite`` per array and read into fresh arrays by ``preadv``
    (no memory map: the pages stay in the page cache, outside the process's memory). Thread-safe;
    :meth:`close` removes the file.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> f = RecordFile(tempfile.mktemp(), capacity=64)
    >>> f.put("a", {"x": np.arange(3.0), "n": np.array([7])}), f.put("b", {"x": np.zeros(9)})  # 72 bytes > 64
    (True, False)
    >>> got = f.get("a")
    >>> got["x"].tolist(), int(got["n"][0]), f.get("b"), "a" in f
    ([0.0, 1.0, 2.0], 7, None, True)
    >>> f.close()
    """

    def __init__(self, path: str | os.PathLike, *, capacity: int) -> None:
        self.path = os.fspath(path)
        self.capacity = int(capacity)
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        self._end = 0
        self._index: dict[Hashable, list[tuple[str, np.dtype, tuple[int, ...], int]]] = {}
        self._lock = threading.Lock()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (its capacity is then free in a :class:`Spill`'s budget)."""
        return self._fd is None

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._index

    def put(self, key: Hashable, arrays: Mapping[str, np.ndarray]) -> bool:
        """Store ``arrays`` under ``key``; ``False`` (nothing stored) beyond the capacity, on a
        failed write (a full disk) or once closed."""
        parts = {name: np.ascontiguousarray(a) for name, a in arrays.items()}
        with self._lock:
            if self._fd is None or self._end + sum(a.nbytes for a in parts.values()) > self.capacity:
                return False
            entries, offset = [], self._end
            try:
                for name, a in parts.items():
                    _pwrite_all(self._fd, a.reshape(-1).view(np.uint8).data, offset)
                    entries.append((name, a.dtype, a.shape, offset))
                    offset += a.nbytes
            except OSError:
                return False
            self._end = offset
            self._index[key] = entries
            return True

    def get(self, key: Hashable) -> dict[str, np.ndarray] | None:
        """The arrays stored under ``key`` (fresh copies), or ``None``."""
        with self._lock:
            entries = self._index.get(key)
            if entries is None or self._fd is None:
                return None
            out = {}
            for name, dtype, shape, offset in entries:
                a = np.empty(shape, dtype=dtype)
                _pread_all(self._fd, a.reshape(-1).view(np.uint8).data, offset)
                out[name] = a
            return out

    def close(self) -> None:
        """Close and remove the file (later calls store and serve nothing)."""
        with self._lock:
            fd, self._fd = self._fd, None
            self._index.clear()
        if fd is not None:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(self.path)


class Spill:
    """The spill files of one run, one per input, in a temp prefix, within a disk budget.

    Parameters
    ----------
    prefix
        Temp-file prefix (a folder plus a name prefix) the files are created with.
    budget
        Bytes the files may take in all.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> spill = Spill(tempfile.mkdtemp() + "/run-", budget=10**6)
    >>> f = spill.file("dem-token", shape=(4, 4), dtype=np.dtype("int16"), chunks=(2, 2))
    >>> f is spill.file("dem-token", shape=(4, 4), dtype=np.dtype("int16"), chunks=(2, 2))
    True
    >>> spill.file("big", shape=(1000, 1000), dtype=np.dtype("float64"), chunks=(2, 2)) is None  # over budget
    True
    >>> spill.close()
    """

    def __init__(self, prefix: str, *, budget: int, local_files: bool = False) -> None:
        self.prefix = prefix
        self.budget = int(budget)
        #: Whether local compressed files and VRTs are spilled too (remote inputs always are).
        self.local_files = bool(local_files) or spill_local_files()
        self.files: dict[str, SpillFile | None] = {}
        self.kept: list[RecordFile] = []
        self._lock = threading.Lock()
        self._closed = False

    def file(self, ident: str, *, shape: tuple[int, int], dtype: np.dtype, chunks: tuple[int, int]) -> SpillFile | None:
        """The spill file of the input ``ident`` (created on first use), or ``None`` when it does
        not fit in the budget (that input is then decoded again by later passes)."""
        with self._lock:
            if self._closed:
                return None
            if ident in self.files:
                return self.files[ident]
            nbytes = int(shape[0]) * int(shape[1]) * np.dtype(dtype).itemsize
            made: SpillFile | None = None
            if self._used() + nbytes <= self.budget:
                with contextlib.suppress(OSError):
                    made = SpillFile(f"{self.prefix}spill-{len(self.files)}.raw", shape=shape, dtype=dtype, chunks=chunks)
            self.files[ident] = made
            return made

    def _used(self) -> int:
        """Bytes of the budget taken (the lock held): the inputs' files and the open record files."""
        return (sum(f.nbytes for f in self.files.values() if f is not None)
                + sum(r.capacity for r in self.kept if not r.closed))

    def records(self, capacity: int) -> RecordFile | None:
        """A new :class:`RecordFile` of ``capacity`` bytes, or ``None`` when the budget cannot hold it."""
        with self._lock:
            if self._closed or self._used() + capacity > self.budget:
                return None
            try:
                made = RecordFile(f"{self.prefix}records-{len(self.kept)}.raw", capacity=capacity)
            except OSError:
                return None
            self.kept.append(made)
            return made

    def close(self) -> None:
        """Close every file (removing them is the temp prefix's owner's job)."""
        with self._lock:
            self._closed = True
            files = [f for f in self.files.values() if f is not None]
            kept = list(self.kept)
        for f in files:
            f.close()
        for r in kept:
            r.close()


def active_spill() -> Spill | None:
    """The spill of the innermost :func:`spill_scope` of this process, or ``None``."""
    with _ACTIVE_LOCK:
        return _ACTIVE[-1] if _ACTIVE else None


@contextlib.contextmanager
def spill_scope(*, folder: str | os.PathLike | None, reserve: int = 0, enabled: bool = True,
                local_files: bool = False) -> Iterator[Spill | None]:
    """Spill the chunks decoded inside the block (module docstring); yields the :class:`Spill`,
    or ``None`` when there is none (``enabled`` false, ``XDEM_SPILL=0``, no ``folder``, or a
    disk without room for ``reserve`` plus a margin).

    Parameters
    ----------
    folder
        Where the temporary files go (the run's output folder).
    reserve
        Bytes of free space to leave for the run's own temporaries and outputs.
    enabled
        ``False``: no spill (e.g. a distributed scheduler).
    local_files
        Spill local compressed files and VRTs too (not only remote inputs), as ``XDEM_SPILL=1``
        does: for a run that decodes its inputs more than twice (a blockwise fit's regions).

    Examples
    --------
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> with spill_scope(folder=folder) as spill:
    ...     active_spill() is spill
    True
    >>> os.listdir(folder), active_spill() is None
    ([], True)
    """
    if not enabled or folder is None or not spill_enabled():
        yield None
        return
    with _spill_in(folder, reserve=reserve, local_files=local_files) as spill:
        if spill is None:
            yield None
            return
        with _ACTIVE_LOCK:
            _ACTIVE.append(spill)
        try:
            yield spill
        finally:
            with _ACTIVE_LOCK:
                _ACTIVE.remove(spill)


@contextlib.contextmanager
def _spill_in(folder: str | os.PathLike, *, reserve: int = 0, local_files: bool = False) -> Iterator[Spill | None]:
    """A :class:`Spill` with a temp prefix of its own in ``folder``, within the free space less
    ``reserve`` and :data:`MARGIN_BYTES` (``None``: no room, or no folder to ask), closed at the end
    and its files removed with the prefix."""
    try:
        budget = free_bytes(folder) - int(reserve) - MARGIN_BYTES
    except OSError:  # no folder to ask: no spill (the run's own checks name the problem)
        budget = 0
    if budget <= 0:
        yield None
        return
    with contextlib.ExitStack() as stack:
        try:
            prefix = stack.enter_context(owned_temps(Path(folder)))
        except OSError:
            prefix = None
        if prefix is None:
            yield None
            return
        spill = Spill(prefix, budget=budget, local_files=local_files)
        stack.callback(spill.close)
        yield spill


@contextlib.contextmanager
def record_scope(capacity: int) -> Iterator[RecordFile | None]:
    """A :class:`RecordFile` of ``capacity`` bytes for the block, removed when it exits: in the
    active spill's folder and budget (:func:`spill_scope`, the run's output folder), else in the
    system's temporary folder when its free space leaves :data:`MARGIN_BYTES`; ``None`` when
    ``XDEM_SPILL`` turns spills off, ``capacity`` is 0 or there is no room.

    Examples
    --------
    >>> import numpy as np
    >>> with record_scope(1024) as f:
    ...     f is None or f.put(0, {"x": np.ones(4)})
    True
    """
    if capacity <= 0 or not spill_enabled():
        yield None
        return
    with contextlib.ExitStack() as stack:
        spill = active_spill()
        if spill is None:  # a spill of the block's own, in the system's temporary folder
            spill = stack.enter_context(_spill_in(tempfile.gettempdir()))
        made = spill.records(capacity) if spill is not None else None
        if made is not None:
            stack.callback(made.close)
        yield made
