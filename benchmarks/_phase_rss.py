"""``xdem coreg ARGS...`` in this process, with its resident memory sampled per phase.

Run: ``python benchmarks/_phase_rss.py JSON_OUT coreg REF TBA -o OUT ...`` (the arguments of
``xdem``). A thread reads ``VmRSS`` (``/proc/self/status``) and glibc's heap figures
(``mallinfo2``: heap size, bytes in use, bytes free) every 50 ms, each sample tagged with the
phase running: ``fit``, ``write:blocks`` (the block-writing pass, warp and statistics),
``write:overviews`` (:func:`xdem.io._cog_overviews.overviews_into_temp`), ``write:cogcopy``
(GDAL's COG copy), ``measure`` (the statistics' finish) and ``other`` (imports, opening,
documents). Writes ``{"phases": {phase: {"rss": peak, "heap": peak, "heap_free": at the RSS
peak, "where": the main thread's innermost xdem frames then}}, "peak": peak}`` (bytes) to
``JSON_OUT``; the exit code is the command's (``PHASE_RSS_STOP_AFTER=fit``: the process ends,
exit 0, once the fit is done, e.g. to study the fit's peak alone). Used by
``bench_memory.py --phases``. Linux only (``/proc``; the heap figures need glibc >= 2.33).
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

PHASE = ["other"]
#: Peak figures per phase, filled by the sampling thread.
PHASES: dict[str, dict[str, Any]] = {}


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


def _tagged(mod: Any, name: str, label: str, *, stop_to: str | None = None) -> None:
    """Tag the calls of ``mod.name`` as phase ``label``; with ``stop_to``, write the figures there
    and end the process once that call returns (``PHASE_RSS_STOP_AFTER=fit``: measure the fit alone)."""
    fn = getattr(mod, name)

    def run(*args: Any, **kwargs: Any) -> Any:
        PHASE.append(label)
        try:
            result = fn(*args, **kwargs)
        finally:
            PHASE.pop()
        if stop_to is not None:
            time.sleep(0.1)  # one more sample
            _write(stop_to)
            os._exit(0)
        return result

    setattr(mod, name, run)


def _where(ident: int) -> list[str]:
    """The innermost xdem frames (``module:function:line``) of thread ``ident``'s stack, innermost last."""
    frame, out = sys._current_frames().get(ident), []
    while frame is not None and len(out) < 6:
        name = frame.f_code.co_filename
        if "/xdem/" in name and "/benchmarks/" not in name:
            out.append(f"{name.rsplit('/xdem/', 1)[1]}:{frame.f_code.co_name}:{frame.f_lineno}")
        frame = frame.f_back
    return out[::-1]


def _write(out: str) -> None:
    with open(out, "w") as f:
        json.dump({"phases": PHASES, "peak": max((p["rss"] for p in PHASES.values()), default=0)}, f, indent=1)


def main() -> int:
    out, args = sys.argv[1], sys.argv[2:]
    import xdem.io.cog as cog
    import xdem.workflows.coreg as wf
    from xdem.cli import main as cli

    stop = os.environ.get("PHASE_RSS_STOP_AFTER")
    for name in ("fit", "write", "measure"):
        _tagged(wf, name, name, stop_to=out if stop == name else None)
    for name, label in (("_store_blocks", "write:blocks"), ("overviews_into_temp", "write:overviews"),
                        ("copy_with_progress", "write:cogcopy")):
        _tagged(cog, name, label)
    heap, done = _heap(), threading.Event()
    phases = PHASES
    main_thread = threading.get_ident()

    def sample() -> None:
        while not done.is_set():
            rss, (size, free), phase = _rss(), heap(), PHASE[-1]
            p = phases.setdefault(phase, {"rss": 0, "heap": 0, "heap_free": 0, "where": []})
            if rss > p["rss"]:
                p["rss"], p["heap_free"], p["where"] = rss, free, _where(main_thread)
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
        _write(out)
    return code


if __name__ == "__main__":
    sys.exit(main())
