"""GDAL's ``CreateCopy`` with its progress callback, through the libgdal rasterio loaded.

rasterio's :func:`rasterio.shutil.copy` passes no progress function to GDAL, so the COG pass
(compression and overviews, often a third of a run) would be a silent wait, and a signal could
not stop it. This module calls ``GDALCreateCopy`` of the very same libgdal (resolved through
rasterio's extension module, so the drivers rasterio registered and the configuration its
``rasterio.Env`` set apply) with a ``GDALProgressFunc`` that forwards GDAL's completed fraction.
Where that library cannot be reached (a GDAL built without the symbol), :func:`copy_with_progress`
returns False and the caller copies with rasterio instead.

Signals (:mod:`xdem.interrupt`): Python would run a raising signal handler inside the callback,
where ctypes swallows the exception. The call runs in :func:`xdem.interrupt.deferred`, so a
signal is only recorded; the callback then returns 0 ("stop"), GDAL returns, and the recorded
signal is raised as the run's interruption once the handles are closed.
"""

from __future__ import annotations

import contextvars
import ctypes
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from xdem import interrupt

__all__ = ["copy_with_progress", "build_overviews_with_progress", "COPY_PROGRESS"]

#: Set (e.g. by the CLI's progress bar) to receive the COG copies' progress: called with the
#: fraction done of all the copies of the current write (GDAL's own progress callback). It lives
#: here, beside the copy, so that the command line's progress bar reads it without importing
#: :mod:`xdem.io.cog` (rasterio); :mod:`xdem.io.cog` exports it too.
COPY_PROGRESS: contextvars.ContextVar[Callable[[float], None] | None] = contextvars.ContextVar("COPY_PROGRESS",
                                                                                              default=None)

_PROGRESS = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_double, ctypes.c_char_p, ctypes.c_void_p)


@functools.lru_cache(maxsize=1)
def _libgdal() -> Any:
    """The libgdal rasterio uses, with the signatures needed here, or None.

    The symbols are looked up through rasterio's own extension module (``dlsym`` searches a
    library and the libraries it was linked with), never by name among the mapped libraries:
    other packages bring their own libgdal (pyogrio's wheels do), with other drivers and codecs.
    """
    import rasterio._base  # loads (and registers the drivers of) its libgdal

    path = getattr(rasterio._base, "__file__", None)
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(path)
        lib.GDALOpen.restype = ctypes.c_void_p
        lib.GDALOpen.argtypes = [ctypes.c_char_p, ctypes.c_int]
        lib.GDALGetDriverByName.restype = ctypes.c_void_p
        lib.GDALGetDriverByName.argtypes = [ctypes.c_char_p]
        lib.GDALBuildOverviews.restype = ctypes.c_int
        lib.GDALBuildOverviews.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                                           ctypes.c_int, ctypes.POINTER(ctypes.c_int), _PROGRESS, ctypes.c_void_p]
        lib.GDALCreateCopy.restype = ctypes.c_void_p
        lib.GDALCreateCopy.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int,
                                       ctypes.POINTER(ctypes.c_char_p), _PROGRESS, ctypes.c_void_p]
        lib.GDALClose.restype = ctypes.c_int
        lib.GDALClose.argtypes = [ctypes.c_void_p]
        lib.CPLGetLastErrorMsg.restype = ctypes.c_char_p
        lib.CPLGetLastErrorMsg.argtypes = []
        lib.GDALVersionInfo.restype = ctypes.c_char_p
        lib.GDALVersionInfo.argtypes = [ctypes.c_char_p]
    except (OSError, AttributeError):
        return None
    return lib


def copy_with_progress(src: str, dst: str, *, driver: str, options: Mapping[str, object],
                       progress: Callable[[float], None] | None = None) -> bool:
    """``GDALCreateCopy(driver, dst, src, options)`` calling ``progress(fraction)`` (if given) as
    GDAL advances. Returns False (nothing done) when libgdal cannot be reached this way.

    A signal during the copy stops it (the callback returns "stop") and is raised once GDAL has
    returned (:class:`xdem.interrupt.Interrupted` under the CLI, ``KeyboardInterrupt`` for
    Ctrl-C elsewhere); ``dst`` may then be partly written (the caller removes its temp files).

    Raises
    ------
    OSError
        GDAL failed (its last error message).
    """
    lib = _libgdal()
    if lib is None:
        return False
    drv = lib.GDALGetDriverByName(driver.encode())
    if not drv:
        return False
    opts = [f"{k}={v}".encode() for k, v in options.items()]
    arr = (ctypes.c_char_p * (len(opts) + 1))(*opts, None)

    callback = _PROGRESS(_reporter(progress))

    def copy(handle: int) -> str | None:
        out = lib.GDALCreateCopy(drv, dst.encode(), handle, 0, arr, callback, None)
        if not out:
            return f"cannot write '{dst}': {_last_error(lib)}"
        return f"cannot finish '{dst}': {_last_error(lib)}" if lib.GDALClose(out) != 0 else None

    _on_dataset(lib, src, update=False, work=copy)
    return True


def build_overviews_with_progress(path: str, *, factors: Sequence[int], resampling: str,
                                  progress: Callable[[float], None] | None = None) -> bool:
    """``GDALBuildOverviews`` of the dataset ``path`` (opened for update; all bands) with the
    decimation ``factors`` and ``resampling`` (a GDAL name such as ``"CUBIC"``), calling
    ``progress(fraction)`` as GDAL advances. Returns False (nothing done) when libgdal cannot be
    reached this way. A signal stops it as :func:`copy_with_progress` does.

    Raises
    ------
    OSError
        GDAL failed (its last error message).
    """
    lib = _libgdal()
    if lib is None:
        return False
    levels = (ctypes.c_int * len(factors))(*factors)
    callback = _PROGRESS(_reporter(progress))

    def build(handle: int) -> str | None:
        failed = lib.GDALBuildOverviews(handle, resampling.encode(), len(factors), levels, 0, None, callback, None)
        return f"cannot build the overviews of '{path}': {_last_error(lib)}" if failed else None

    _on_dataset(lib, path, update=True, work=build, finishing=f"cannot finish the overviews of '{path}'")
    return True


def _on_dataset(lib: Any, path: str, *, update: bool, work: Callable[[int], str | None],
                finishing: str | None = None) -> None:
    """Open ``path`` (for update if ``update``), run ``work(handle)`` (an error text or None) and
    close it, all inside :func:`xdem.interrupt.deferred` (a signal only stops GDAL through the
    progress callback); then raise the signal recorded meanwhile, else an ``OSError`` for the
    failure. A failed close of ``path`` is one (``finishing``: its text) only if ``finishing`` is given."""
    error = None
    with interrupt.deferred():
        handle = lib.GDALOpen(path.encode(), 1 if update else 0)
        if not handle:
            error = f"cannot open '{path}'{' for update' if update else ''}: {_last_error(lib)}"
        else:
            error = work(handle)
            stopped = interrupt.stop_requested()  # a stopped GDAL call's failure is the signal's
            if stopped:
                error = None
            if lib.GDALClose(handle) != 0 and finishing is not None and error is None and not stopped:
                error = f"{finishing}: {_last_error(lib)}"
    interrupt.checkpoint()  # the signal recorded meanwhile (if any) ends the run here
    if error is not None:
        raise OSError(error)


def _reporter(progress: Callable[[float], None] | None) -> Callable[[float, bytes | None, Any], int]:
    """GDAL's progress callback: forwards the fraction, returns "stop" (0) once a signal came."""

    def report(fraction: float, _msg: bytes | None, _data: Any) -> int:
        # runs inside interrupt.deferred(): no signal handler raises here, so nothing is swallowed
        try:
            interrupt.event()
            if progress is not None:
                progress(min(max(float(fraction), 0.0), 1.0))
        except Exception:  # noqa: BLE001 - a display error must never break the copy
            pass
        return 0 if interrupt.stop_requested() else 1

    return report


def _last_error(lib: Any) -> str:
    return (lib.CPLGetLastErrorMsg() or b"").decode(errors="replace")
