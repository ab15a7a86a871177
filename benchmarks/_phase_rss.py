"""``xdem coreg ARGS...`` in this process, with its resident memory sampled per phase.

Run: ``python benchmarks/_phase_rss.py JSON_OUT coreg REF TBA -o OUT ...`` (the arguments of
``xdem``). A thread reads ``VmRSS`` (``/proc/self/status``) and glibc's heap figures
(``mallinfo2``: heap size, bytes in use, bytes free) every 50 ms, each sample tagged with the
phase running: ``fit``, ``write:blocks`` (the block-writing pass, warp and statistics),
``write:overviews`` (:func:`xdem.io._cog_overviews.overviews_into_temp`), ``write:cogcopy``
(GDAL's COG copy), ``measure`` (the statistics' finish) and ``other`` (imports, opening,
documents). Writes ``{"phases": {phase: {"rss": peak, "heap": peak, "heap_free": at the RSS
peak}}, "peak": peak}`` (bytes) to ``JSON_OUT``; the exit code is the command's. Used by
``bench_memory.py --phases``. Linux only (``/proc``; the heap figures need glibc >= 2.33).
"""

from __future__ import annotations

import ctypes
import json
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

PHASE = ["other"]


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                                               "uordblks", "fordblks", "keepcost")]


def _heap() -> Callable[[], tuple[int, int]]:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
    except (OSError, AttributeError):
        return lambda: (0, 0)

    def read() -> tuple[int, int]:
        m = libc.mallinfo2()
        return int(m.arena), int(m.fordblks)

    return read


def _rss() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))


def _tagged(mod: Any, name: str, label: str) -> None:
    fn = getattr(mod, name)

    def run(*args: Any, **kwargs: Any) -> Any:
        PHASE.append(label)
        try:
            return fn(*args, **kwargs)
        finally:
            PHASE.pop()

    setattr(mod, name, run)


def main() -> int:
    out, args = sys.argv[1], sys.argv[2:]
    import xdem.io.cog as cog
    import xdem.workflows.coreg as wf
    from xdem.cli import main as cli

    for name in ("fit", "write", "measure"):
        _tagged(wf, name, name)
    for name, label in (("_store_blocks", "write:blocks"), ("overviews_into_temp", "write:overviews"),
                        ("copy_with_progress", "write:cogcopy")):
        _tagged(cog, name, label)
    heap, done = _heap(), threading.Event()
    phases: dict[str, dict[str, int]] = {}

    def sample() -> None:
        while not done.is_set():
            rss, (size, free), phase = _rss(), heap(), PHASE[-1]
            p = phases.setdefault(phase, {"rss": 0, "heap": 0, "heap_free": 0})
            if rss > p["rss"]:
                p["rss"], p["heap_free"] = rss, free
            p["heap"] = max(p["heap"], size)
            time.sleep(0.05)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    code = 0
    try:
        cli.main(args=args, prog_name="xdem", standalone_mode=False)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        done.set()
        thread.join()
        with open(out, "w") as f:
            json.dump({"phases": phases, "peak": max((p["rss"] for p in phases.values()), default=0)}, f, indent=1)
    return code


if __name__ == "__main__":
    sys.exit(main())
