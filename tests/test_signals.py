"""Signals are never lost: SIGINT and SIGTERM at any moment of any stage end the run with
128 + signum (130, 143), one line on stderr saying what was removed and what was kept, and no
partial output (an unfinished Zarr store is kept for --resume).

Moments are deterministic, whatever the load: the child process stops itself (SIGSTOP) at a
chosen progress event of a chosen stage (the test hook ``XDEM_TEST_PAUSE_AT``, see
:mod:`xdem.interrupt`); the test waits until it is stopped, sends the signal, then SIGCONT, so
the signal arrives exactly there. 30+ moments are drawn by a seeded RNG across the stages of
``xdem coreg`` (fit, block writes, GDAL's COG copy -- inside its progress callback --, the
verdict, statistics, the report, a Zarr write) and of ``xdem report``, ``terrain`` and
``convert``. They run in real child processes forked by tests/forkserver.py (which imports
xdem once: a fresh ``python -m xdem`` per moment would spend most of the time importing); the
SIGINT and startup tests use real ``python -m xdem`` processes.

A child started with SIGINT ignored (a shell's background job) keeps ignoring it, so every
child here gets the default SIGINT back explicitly (the launching shell may ignore it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from forkserver import ForkServer
from helpers import write_tif

from xdem.io import zarr_store as zs

ROOT = Path(__file__).resolve().parents[1]
#: Seed of the drawn moments.
SEED = 23
N_PIXELS = 768
#: Number of moments drawn per stage, and its number of progress events, measured on this pair
#: with --chunks 256 (e.g. 8 calls of GDAL's progress callback in the COG copy): an event past
#: the last pauses at the stage's end, still inside it.
QUOTA = {"fit": 5, "blocks": 5, "copy": 6, "verdict": 2, "stats": 3, "zarr": 4, "report": 2, "report_cmd": 2,
         "terrain": 3, "convert": 2}
EVENTS = {"fit": 168, "blocks": 72, "copy": 8, "verdict": 144, "stats": 82, "zarr": 27, "report": 162,
          "report_cmd": 13, "terrain": 8, "convert": 108}


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    """REF (smooth terrain plus noise) and TBA = REF + 1, 768^2, tiled, uncompressed."""
    folder = tmp_path_factory.mktemp("pair")
    y, x = np.mgrid[0:N_PIXELS, 0:N_PIXELS].astype(np.float32)
    ref = (100 + 20 * np.sin(x / 50) * np.cos(y / 70) + 0.01 * x
           + np.random.default_rng(0).normal(0, 0.3, x.shape)).astype(np.float32)
    write_tif(folder / "ref.tif", ref, tiled=True, blocksize=128, compress=None)
    write_tif(folder / "tba.tif", ref + 1, tiled=True, blocksize=128, compress=None)
    return folder / "ref.tif", folder / "tba.tif"


@pytest.fixture(scope="module")
def server():
    srv = ForkServer(pythonpath=str(ROOT))
    yield srv
    srv.close()


# ---------------------------------------------------------------------------- moments


@dataclass(frozen=True)
class Moment:
    """One signal at one moment: the stage (test-hook key), its n-th event, the signal."""

    stage: str
    n: int
    sig: int

    @property
    def key(self) -> str:
        return {"report_cmd": "report", "terrain": "copy", "convert": "zarr"}.get(self.stage, self.stage)

    def __str__(self) -> str:
        return f"{self.stage}:{self.n}:{signal.Signals(self.sig).name}"


def _draw() -> list[Moment]:
    """The moments, from a seeded RNG: each stage gets both signals (alternating from a random start)."""
    rng = np.random.default_rng(SEED)
    moments = []
    for stage, count in QUOTA.items():
        first = int(rng.integers(2))
        # the stage's start, then distinct events (one past the last: the stage's end)
        events = [0, *sorted(int(n) for n in rng.choice(np.arange(1, EVENTS[stage] + 2), count - 1, replace=False))]
        for i, n in enumerate(events):
            moments.append(Moment(stage, n, (signal.SIGINT, signal.SIGTERM)[(first + i) % 2]))
    return moments


MOMENTS = _draw()


def _command(m: Moment, pair: tuple[Path, Path], out: Path) -> tuple[list[str], Path, str]:
    """The command run for moment ``m``, its output and the stage phrase its line must name."""
    ref, tba = (str(p) for p in pair)
    coreg = ["coreg", ref, tba, "--method", "vshift", "--chunks", "256", "-q"]
    cog, store, report = out / "out.tif", out / "out.zarr", out / "r.html"
    if m.stage in ("fit", "blocks", "copy", "verdict"):
        phrase = {"fit": "the fit", "blocks": f"the block writes of {cog}", "copy": f"the COG copy of {cog}",
                  "verdict": "the verdict"}[m.stage]
        return [*coreg, "-o", str(cog), *(["--exact-stats"] if m.stage == "verdict" else [])], cog, phrase
    if m.stage in ("stats", "zarr"):  # a store's statistics are computed after it is complete
        phrase = "the statistics of dh" if m.stage == "stats" else f"the Zarr write of {store}"
        return [*coreg, "-o", str(store)], store, phrase
    if m.stage == "report":
        return [*coreg, "-o", str(cog), "--report", str(report), "--json-out", str(out / "c.json")], cog, \
            f"the report {report}"
    if m.stage == "report_cmd":
        return ["report", ref, tba, "-o", str(report)], report, f"the report {report}"
    if m.stage == "terrain":
        return ["terrain", ref, "-o", str(out / "slope.tif"), "-a", "slope"], out / "slope.tif", \
            f"the COG copy of {out / 'slope.tif'}"
    return ["convert", ref, str(store), "--chunks", "128"], store, f"the Zarr write of {store}"


def _state(pid: int) -> str:
    """The process state letter of ``pid`` (``T``: stopped, ``Z``: ended, not yet reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


def wait_stopped(pid: int, *, timeout: float = 180) -> None:
    """Wait until ``pid`` has stopped itself at the test hook's moment."""
    t0 = time.monotonic()
    while (state := _state(pid)) != "T":
        if state in ("Z", "X", "?"):
            raise AssertionError(f"process {pid} ended without reaching its moment")
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"process {pid} did not reach its moment in {timeout:.0f} s")
        time.sleep(0.005)


def deliver(pid: int, *signals: int) -> None:
    """Send ``signals`` to the stopped ``pid``, then let it continue: they arrive at its moment."""
    for sig in signals:
        os.kill(pid, sig)
    os.kill(pid, signal.SIGCONT)


@dataclass
class Outcome:
    folder: Path
    code: int
    stderr: str
    left: list[str]
    store_status: str | None


def _run_moments(server: ForkServer, pair: tuple[Path, Path], root: Path, moments: list[Moment],
                 *, in_flight: int = 2) -> dict[Moment, Outcome]:
    """Run every moment, ``in_flight`` children at a time (each waits, stopped, for its signal)."""
    started: list[tuple[Moment, int, Path, Path]] = []
    outcomes: dict[Moment, Outcome] = {}

    def start(m: Moment) -> None:
        out = root / str(m).replace(":", "-")
        out.mkdir()
        args, target, _ = _command(m, pair, out)
        pid = server.run(args, cwd=out, stdout=root / f"{out.name}.out", stderr=root / f"{out.name}.err",
                         env={"XDEM_TEST_PAUSE_AT": f"{m.key}:{m.n}"})
        started.append((m, pid, out, target))

    queue = list(moments)
    t0 = time.monotonic()
    while queue or started:
        while queue and len(started) < in_flight:
            start(queue.pop(0))
        m, pid, out, target = started.pop(0)
        try:
            wait_stopped(pid)
            deliver(pid, m.sig)
        finally:
            code = server.wait(pid)
        status = zs.store_status(target) if target.suffix == ".zarr" else None
        print(f"{m}: exit {code} after {time.monotonic() - t0:.1f} s, cpu {server.cpu_s[pid]:.2f} s")
        outcomes[m] = Outcome(out, code, (root / f"{out.name}.err").read_text(), sorted(os.listdir(out)), status)
    return outcomes


@pytest.fixture(scope="module")
def outcomes(server, pair, tmp_path_factory) -> dict[Moment, Outcome]:
    return _run_moments(server, pair, tmp_path_factory.mktemp("moments"), MOMENTS)


def one_error_line(stderr: str) -> str:
    """stderr is exactly one ``Error:`` line: no traceback, no "Exception ignored", nothing else."""
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), stderr
    return lines[0]


def test_moments_cover_every_stage_with_both_signals():
    assert len(MOMENTS) >= 30
    for stage in QUOTA:
        assert {m.sig for m in MOMENTS if m.stage == stage} == {signal.SIGINT, signal.SIGTERM}, stage
    assert len(set(MOMENTS)) == len(MOMENTS)


@pytest.mark.parametrize("moment", MOMENTS, ids=str)
def test_signal_at_a_moment_ends_the_run_with_128_plus_signum(moment, outcomes, pair):
    got = outcomes[moment]
    code = 128 + moment.sig
    assert got.code == code, got.stderr
    line = one_error_line(got.stderr)
    _, target, phrase = _command(moment, pair, got.folder)
    verb = "interrupted by SIGINT (Ctrl-C)" if moment.sig == signal.SIGINT else "terminated by SIGTERM"
    assert line.startswith(f"Error: {verb} during {phrase}; "), line
    if target.suffix == ".zarr" and got.left:  # the store, kept: unfinished (for --resume) or complete
        assert got.left == [target.name], got.left
        complete = moment.stage == "stats"
        assert got.store_status == ("complete" if complete else "incomplete")
        assert f"kept the {'complete' if complete else 'unfinished'} store {target}" in line, line
        assert line.endswith(f"(exit code {code})") and "no output was left" not in line, line
    else:
        assert got.left == [], got.left  # no output, no temporary file
        assert line.endswith(f"; no output was left (exit code {code})"), line
    if moment.stage in ("copy", "terrain"):  # the block pass had written its temporary GTiff
        assert "temporary file" in line, line
    if moment.stage in ("verdict", "report"):  # after the COG was moved into place: removed again
        assert f"removed the output already written ({target})" in line, line
