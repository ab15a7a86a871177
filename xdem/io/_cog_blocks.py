"""Low-level pieces of :mod:`xdem.io.cog`: the lock that holds across threads and processes,
the window writer the block-storing tasks write through, and the capture of file descriptor 2
during GDAL's COG copy (libtiff reports a full disk there).

Examples
--------
>>> lock = _ProcessLock("/tmp/xdem-doc.lock")
>>> open(lock.path, "a").close()
>>> with lock:
...     pass
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import Any

import dask
import dask.array as da
import numpy as np
import rasterio
import rasterio.windows

from xdem.gdal_cache import GDAL_CACHE_BYTES
from xdem.io._heap import release_free_heap

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
        self.path = state["path"]
        self._fd = None

    def _thread_lock(self) -> threading.Lock:
        with _ProcessLock._guard:
            return _ProcessLock._local_locks.setdefault(self.path, threading.Lock())

    def acquire(self) -> None:
        self._thread_lock().acquire()
        try:
            import fcntl  # POSIX only
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
                import fcntl

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
    scheduler = dask.base.get_scheduler(collections=[arr])
    client = getattr(scheduler, "__self__", None)
    if client is None or "distributed" not in sys.modules:  # no Client before distributed is imported
        return None
    from distributed import Client

    return client if isinstance(client, Client) else None




class _WindowWriter:
    """Target for :func:`dask.array.store`: writes each block into a tiled GTiff window.

    Every ``__setitem__`` opens the file in ``r+`` mode under ``lock``, writes the window and
    closes it (flushing GDAL's cache), so tasks in threads or processes of one machine never
    share a GDAL handle. Not used under ``distributed`` (:mod:`xdem.io._cog_stream`: the
    client writes the blocks, the workers share no disk with it).
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
        with self.lock, rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_BYTES):
            with rasterio.open(self.path, "r+") as dst:
                dst.write(block, 1, window=window)
        del block
        release_free_heap()  # what the pass freed goes back to the system, not its history (_heap)


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
    import tempfile

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
