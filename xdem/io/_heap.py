"""Give the free memory that glibc's heaps keep back to the system once it passes a bound.

glibc never returns a free region in the middle of a heap: only the top is trimmed. In the
block-writing pass the heaps fill with buffers below the mmap threshold (GDAL's 1 MiB tiles,
the warp's strips) freed in another order than they were allocated, between long-lived small
ones (each block's sampled statistics); the heaps then grow while most of them is free
(8000^2 ``xdem coreg``: 530 MB of heap, 390 MB of it free and resident after the pass), and
the more blocks, the more places pin them. :func:`release_free_heap`, called once a block is
written, hands the free pages back with ``malloc_trim(0)`` when more than
:data:`RELEASE_ABOVE` bytes are free and the process grew by as much since the last trim, so
what stays resident is bounded by what the running tasks hold plus that bound, not by the
history of the pass; a fit trims once before its solves above :data:`SOLVE_RELEASE_ABOVE`.
Below the bound nothing is done (a trim costs the page faults of touching
those pages again). Not glibc (or glibc < 2.33, no ``mallinfo2``):
nothing is done.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
import threading
from typing import Any

__all__ = ["release_free_heap", "release_before_solve", "free_heap_bytes", "RELEASE_ABOVE", "SOLVE_RELEASE_ABOVE"]

#: Free heap bytes above which :func:`release_free_heap` trims (twice the CLI's ``TOP_PAD``:
#: what the CLI's two arenas keep on purpose to avoid page faults is left alone).
RELEASE_ABOVE = 128 << 20
#: Free heap bytes above which a fit trims once before its least-squares solves
#: (:func:`release_before_solve`): the sample's windows and
#: temporaries it has just freed go back to the system before the solver allocates its copies
#: of the design matrix, so the peak is not the freed memory plus the solver's (issue 28:
#: ``nuthkaab+deramp`` at 40000^2). Once a fit, so the page faults of a trim are paid once.
SOLVE_RELEASE_ABOVE = 32 << 20


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]


@functools.lru_cache(maxsize=1)
def _glibc() -> Any:
    """glibc with ``mallinfo2`` and ``malloc_trim`` typed, or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
        libc.mallinfo2.argtypes = []
        libc.malloc_trim.restype = ctypes.c_int
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
    except (OSError, AttributeError):  # not glibc, or older than 2.33
        return None
    return libc


def free_heap_bytes() -> int | None:
    """Bytes free inside glibc's heaps (all arenas; ``mallinfo2().fordblks``), or None off glibc.

    Examples
    --------
    >>> n = free_heap_bytes()
    >>> n is None or n >= 0
    True
    """
    libc = _glibc()
    return None if libc is None else int(libc.mallinfo2().fordblks)


def release_free_heap(*, above: int | None = None, grown: int | None = None) -> bool:
    """``malloc_trim(0)`` (every whole free page of every arena back to the system) if the heaps
    hold more than ``above`` (default :data:`RELEASE_ABOVE`) free bytes and the process's resident
    memory grew by more than ``above`` since the last trim; returns whether it trimmed.

    Free bytes stay free after a trim (only their pages go), so the growth since the last trim is
    what says whether freed buffers were touched again and kept: without it every call would
    trim, and every block would fault its pages in again. ``grown`` replaces that growth bound
    (``0``: no growth asked, trim whenever more than ``above`` bytes are free), for a call made
    once at the end of a pass (the end of a draw) rather than once a block.

    Examples
    --------
    >>> release_free_heap(above=1 << 62)
    False
    """
    libc = _glibc()
    bound = RELEASE_ABOVE if above is None else above
    growth = bound if grown is None else grown
    if libc is None or libc.mallinfo2().fordblks <= bound or (grown != 0 and _resident() - _AFTER_LAST[0] <= growth):
        return False
    with _TRIM:
        libc.malloc_trim(0)
        _AFTER_LAST[0] = _resident()
    return True


def release_before_solve() -> bool:
    """Trim once before a fit's least-squares solves if more than :data:`SOLVE_RELEASE_ABOVE`
    bytes are free, whatever the growth since the last trim; returns whether it trimmed.

    What a fit has just freed (its sample's windows, a previous step's design matrix) goes back
    to the system before the solver allocates its own copies, so the fit's peak is not the sum.

    Examples
    --------
    >>> release_before_solve() in (True, False)
    True
    """
    return release_free_heap(above=SOLVE_RELEASE_ABOVE, grown=0)


#: Resident bytes right after the last trim (0 before the first).
_AFTER_LAST = [0]
_TRIM = threading.Lock()


def _resident() -> int:
    """Resident bytes of this process (``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
