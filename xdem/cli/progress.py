"""One progress bar over a whole ``xdem coreg`` run: percent and ETA, on stderr.

The run is a known sequence of stages (outlier filters, fit, the block-writing pass, GDAL's
COG copy, statistics, verdict, report), each given a share of the bar by :data:`WEIGHTS`
(measured proportions of a default run's wall time, rounded). Inside a stage, dask's
callbacks give the fraction of tasks done in each compute, and GDAL's progress callback
(:data:`xdem.io.cog.COPY_PROGRESS`, defined in :mod:`xdem.io._gdal_copy`) the fraction of the COG copy. The bar never goes back.
On a terminal it is redrawn in place; otherwise (a log file, a pipe) one line is printed at
every tenth of the run. ``--quiet`` shows nothing; ``--verbose`` adds one line per iteration of
the iterative methods (the ``xdem.iterations`` logger).

Examples
--------
>>> import io
>>> out = io.StringIO()
>>> bar = RunBar(["fitting", "writing"], stream=out)
>>> bar.begin("fitting"); bar.fraction(1.0); bar.begin("writing"); bar.copy(1.0); bar.finish()
>>> out.getvalue().splitlines()[-1].startswith("[100%]")
True
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, TextIO

from dask.callbacks import Callback

from xdem.io._gdal_copy import COPY_PROGRESS

__all__ = ["RunBar", "WEIGHTS", "stage_key", "iteration_lines", "LineStream"]


class LineStream(Protocol):
    """Where :func:`iteration_lines` prints: a text stream (``sys.stderr``) or any object with
    ``write(text)`` and ``flush()``."""

    def write(self, text: str, /) -> object: ...

    def flush(self) -> None: ...

#: Share of each stage in the bar (the writing stage: block pass, then GDAL's COG copy).
WEIGHTS = {"outlier filters": 1.0, "fitting": 4.0, "writing": 4.0, "copy": 2.0, "statistics": 1.0, "verdict": 1.0,
           "writing the report": 2.0}
#: Share of a stage's band one compute may fill: the fit makes several computes (each fills half
#: of what is left), the other stages one.
_SHARE = {"fitting": 0.5}


def stage_key(text: str) -> str:
    """The :data:`WEIGHTS` key of a stage announced as ``text``.

    Examples
    --------
    >>> stage_key("writing /tmp/a.tif (and the statistics of dh)"), stage_key("writing the report r.html")
    ('writing', 'writing the report')
    """
    for key in sorted(WEIGHTS, key=len, reverse=True):
        if text.startswith(key):
            return key
    return text


class _Tasks(Callback):
    """Fraction of the tasks done in each dask compute, forwarded to the bar."""

    def __init__(self, bar: RunBar) -> None:
        super().__init__()
        self.bar = bar
        self.total = 0

    def _start_state(self, dsk: Any, state: Any) -> None:
        self.total = sum(len(state[k]) for k in ("ready", "waiting", "running", "finished"))
        self.bar.compute_started()

    def _posttask(self, key: Any, result: Any, dsk: Any, state: Any, worker_id: Any) -> None:
        if self.total:
            self.bar.fraction(len(state["finished"]) / self.total)


class RunBar:
    """The bar: ``begin(stage)`` at each stage, ``fraction(f)`` from dask, ``copy(f)`` from GDAL,
    ``finish()`` at the end. ``plan``: the stages the run will go through (their weights
    make 100 %; an unplanned stage adds its weight)."""

    def __init__(self, plan: Sequence[str], *, stream: TextIO | None = None, interval: float = 0.2) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        keys = [stage_key(p) for p in plan]
        if "writing" in keys and "copy" not in keys:
            keys.append("copy")
        self.planned = set(keys)
        self.total = sum(WEIGHTS.get(k, 1.0) for k in keys) or 1.0
        self.done = 0.0  # weight of the finished stages
        self.stage = ""
        self.band = 0.0  # weight of the current stage's band being filled by dask
        self.base = 0.0  # part of that band filled before the current compute
        self.part = 0.0  # part of the band filled so far
        self.copy_part = 0.0
        self.t0 = time.perf_counter()
        self.last_draw = 0.0
        self.last_tenth = -1
        self.interval = interval
        self.shown = 0.0

    # -- inputs
    def begin(self, text: str) -> None:
        """A new stage starts (the previous one is complete)."""
        self._close_stage()
        self.stage = stage_key(text)
        self.band = WEIGHTS.get(self.stage, 1.0)
        if self.stage not in self.planned:  # a stage the plan did not foresee: the bar makes room for it
            self.planned.add(self.stage)
            self.total += self.band + (WEIGHTS["copy"] if self.stage == "writing" else 0.0)
        self.base = self.part = self.copy_part = 0.0
        self._draw(force=True)

    def compute_started(self) -> None:
        """A dask compute starts inside the current stage."""
        self.base = self.part

    def fraction(self, f: float) -> None:
        """Fraction ``f`` of the current compute's tasks is done."""
        share = _SHARE.get(self.stage, 1.0)
        self.part = max(self.part, self.base + (1.0 - self.base) * share * min(max(f, 0.0), 1.0))
        self._draw()

    def copy(self, f: float) -> None:
        """Fraction ``f`` of the COG copies is done (GDAL's progress callback)."""
        self.copy_part = max(self.copy_part, min(max(f, 0.0), 1.0))
        self.part = max(self.part, 1.0)  # the block pass is over
        self._draw()

    def finish(self) -> None:
        """The run is over: 100 % and the elapsed time, on its own line."""
        self._close_stage()
        self.shown = 1.0
        self._write(f"[100%] done in {time.perf_counter() - self.t0:.1f} s", end="\n")

    def clear(self) -> None:
        """Remove the bar from the terminal line (before another message is printed)."""
        if self.tty:
            self.stream.write("\r\033[K")
            self.stream.flush()

    # -- drawing
    def _close_stage(self) -> None:
        if self.stage:
            self.done += self.band + (WEIGHTS["copy"] if self.stage == "writing" else 0.0)
            self.stage = ""
            self.band = 0.0

    def _now(self) -> float:
        extra = self.band * self.part + (WEIGHTS["copy"] * self.copy_part if self.stage == "writing" else 0.0)
        self.shown = max(self.shown, min((self.done + extra) / self.total, 0.999))
        return self.shown

    def _draw(self, *, force: bool = False) -> None:
        p = self._now()
        t = time.perf_counter()
        elapsed = t - self.t0
        eta = elapsed * (1.0 - p) / p if p > 0.02 else None
        text = (f"[{100 * p:3.0f}%] {self.stage or '...'}, elapsed {elapsed:.0f} s"
                + (f", ETA {eta:.0f} s" if eta is not None else ""))
        if self.tty:
            if force or t - self.last_draw >= self.interval:
                self.last_draw = t
                self._write(text, end="")
        elif int(10 * p) > self.last_tenth:
            self.last_tenth = int(10 * p)
            self._write(text, end="\n")

    def _write(self, text: str, *, end: str) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + text + end)
        else:
            self.stream.write(text + ("\n" if not end else end))
        self.stream.flush()

    @contextlib.contextmanager
    def tracking(self) -> Iterator[None]:
        """Dask's callbacks and GDAL's copy progress feed the bar inside the block."""
        token = COPY_PROGRESS.set(self.copy)
        try:
            with _Tasks(self):
                yield
        finally:
            COPY_PROGRESS.reset(token)


@contextlib.contextmanager
def iteration_lines(bar: RunBar | None, stream: LineStream | None = None) -> Iterator[None]:
    """Print the ``xdem.iterations`` log (one line per iteration of the iterative methods) on
    ``stream`` (stderr) inside the block, clearing the bar first."""
    out = stream if stream is not None else sys.stderr

    class _Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if bar is not None:
                bar.clear()
            out.write("  " + record.getMessage() + "\n")
            out.flush()

    logger = logging.getLogger("xdem.iterations")
    handler, old = _Handler(level=logging.INFO), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
