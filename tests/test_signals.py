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

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import geopandas as gpd
import numpy as np
import pytest
import rioxarray  # noqa: F401 - .rio
import xarray as xr
from forkserver import ForkServer, proc_state, wait_stopped
from helpers import write_tif
from shapely.geometry import box

from xdem import interrupt
from xdem.io import zarr_store as zs
from xdem.io.cog import COPY_PROGRESS, write_cog

# end-to-end (real child processes signalled at many moments): `pytest -m 'not slow'` leaves them out; `make test` runs them
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
#: Seed of the drawn moments.
SEED = 23
N_PIXELS = 640
#: An event number past any stage's last: the moment is the stage's end.
END = 10**6
#: Number of moments drawn per stage, and its number of progress events, measured on this pair
#: with --chunks 256 (e.g. 8 calls of GDAL's progress callback in the COG copy): an event past
#: the last pauses at the stage's end, still inside it.
QUOTA = {"start": 2, "fit": 4, "blocks": 4, "copy": 6, "verdict": 2, "stats": 3, "zarr": 3, "report": 2, "report_cmd": 2,
         "terrain": 2, "convert": 2, "dh": 2}
EVENTS = {"start": 0, "fit": 114, "blocks": 72, "copy": 8, "verdict": 144, "stats": 82, "zarr": 27, "report": 162,
          "report_cmd": 13, "terrain": 8, "convert": 75, "dh": 372}


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    """REF (smooth terrain plus noise) and TBA = REF + 1, 640^2 (a COG of 2 x 2 tiles), tiled, uncompressed."""
    folder = tmp_path_factory.mktemp("pair")
    y, x = np.mgrid[0:N_PIXELS, 0:N_PIXELS].astype(np.float32)
    ref = (100 + 20 * np.sin(x / 50) * np.cos(y / 70) + 0.01 * x
           + np.random.default_rng(0).normal(0, 0.3, x.shape)).astype(np.float32)
    write_tif(folder / "ref.tif", ref, tiled=True, blocksize=128, compress=None)
    write_tif(folder / "tba.tif", ref + 1, tiled=True, blocksize=128, compress=None)
    # for `xdem dh`: a DEM with a spread of dh (noise) and one outline in the middle
    noisy = ref + np.random.default_rng(1).normal(0, 0.5, ref.shape).astype(np.float32)
    write_tif(folder / "noisy.tif", noisy, tiled=True, blocksize=128, compress=None)
    gpd.GeoDataFrame(geometry=[box(500200.0, 3999600.0, 500400.0, 3999800.0)], crs="EPSG:32632").to_file(
        folder / "outlines.gpkg")
    return folder / "ref.tif", folder / "tba.tif"


@pytest.fixture(scope="module")
def server(fork_server: ForkServer) -> ForkServer:
    """The test process's shared fork server (tests/conftest.py), one BLAS thread a child."""
    return fork_server


# ---------------------------------------------------------------------------- moments


@dataclass(frozen=True)
class Moment:
    """One signal at one moment: the stage (test-hook key), its n-th event, the signal."""

    stage: str
    n: int
    sig: int

    @property
    def key(self) -> str:
        return {"start": "run", "report_cmd": "report", "terrain": "copy", "convert": "zarr",
                "dh": "volume"}.get(self.stage, self.stage)

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
        if stage == "start":  # the command's start, and its very end (outputs in place, journal still open)
            events = [0, END]
        for i, n in enumerate(events):
            moments.append(Moment(stage, n, (signal.SIGINT, signal.SIGTERM)[(first + i) % 2]))
    return moments


MOMENTS = _draw()


def _command(m: Moment, pair: tuple[Path, Path], out: Path) -> tuple[list[str], Path, str]:
    """The command run for moment ``m``, its output and the stage phrase its line must name."""
    ref, tba = (str(p) for p in pair)
    coreg = ["coreg", ref, tba, "--method", "vshift", "--chunks", "256", "-q"]
    cog, store, report = out / "out.tif", out / "out.zarr", out / "r.html"
    if m.stage == "start":
        return [*coreg, "-o", str(cog)], cog, "xdem coreg"
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
    if m.stage == "dh":
        folder = pair[0].parent
        table = out / "c.gpkg"
        return ["dh", ref, str(folder / "noisy.tif"), "--outlines", str(folder / "outlines.gpkg"), "-o", str(table),
                "--chunks", "256"], table, f"the volume change of {folder / 'outlines.gpkg'}"
    return ["convert", ref, str(store), "--chunks", "128"], store, f"the Zarr write of {store}"


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
                 *, in_flight: int = 3) -> dict[Moment, Outcome]:
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
    if moment.stage in ("verdict", "report") or moment.n == END:  # after the COG was moved into place: removed again
        assert f"removed the output already written ({target})" in line, line


# ---------------------------------------------------------------------------- more than one signal


@pytest.mark.parametrize("stage", ["blocks:30", "copy:3"])
def test_a_second_signal_is_recorded_and_does_not_interrupt_the_clean_up(stage, server, pair, tmp_path):
    """SIGINT and SIGTERM at the same moment: the first handled ends the run, the other comes during
    the clean-up: recorded, named in the line, the clean-up completes, exit 128 + the first's number.
    Python runs pending handlers in signal-number order (SIGINT first), but the kernel hands the two
    process-directed signals to any of the process's threads: in the COG copy (GDAL's threads)
    SIGTERM's C handler can run, and Python see it, before SIGINT's (seen once, in a full-suite run
    under load), so there either may come first; in the block pass only SIGINT does."""
    m = Moment(stage.split(":")[0], int(stage.split(":")[1]), signal.SIGINT)
    args, target, phrase = _command(m, pair, tmp_path)
    pid = server.run(args, cwd=tmp_path, stdout=tmp_path.parent / f"{tmp_path.name}.out",
                     stderr=tmp_path.parent / f"{tmp_path.name}.err", env={"XDEM_TEST_PAUSE_AT": stage})
    try:
        wait_stopped(pid)
        deliver(pid, signal.SIGINT, signal.SIGTERM)
    finally:
        code = server.wait(pid)
    line = one_error_line((tmp_path.parent / f"{tmp_path.name}.err").read_text())
    first = {130: "interrupted by SIGINT (Ctrl-C)", 143: "terminated by SIGTERM"}
    assert code in (first if m.stage == "copy" else {130: first[130]}), line
    assert line.startswith(f"Error: {first[code]} during {phrase}; "), line
    assert line.endswith(f"no output was left (1 more signal received after it, recorded) (exit code {code})"), line
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------------------- real processes


def _python_xdem(args: list[str], *, folder: Path, pause: str, preexec: Callable[[], object]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDEM_TEST_PAUSE_AT": pause}
    return subprocess.Popen([sys.executable, "-m", "xdem", *args], cwd=folder, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env, preexec_fn=preexec)


def test_fresh_python_processes_ctrl_c_gives_130_and_sigint_ignored_at_start_stays_ignored(pair, tmp_path):
    """Two real ``python -m xdem`` processes, run side by side.

    - SIGINT restored to its default in the child (the launching shell may ignore it): Ctrl-C
      inside GDAL's progress callback gives 130, one line, nothing left.
    - SIGINT ignored at start (a script's background job): xdem keeps ignoring it (the POSIX
      convention; see xdem.interrupt), SIGTERM still ends the run: SIGINT and SIGTERM sent at the
      same moment give 143 (had SIGINT been handled, its handler would have run first: 130).
    """
    a, b = tmp_path / "default", tmp_path / "ignored"
    a.mkdir()
    b.mkdir()
    cmd_a, _, phrase_a = _command(Moment("copy", 3, signal.SIGINT), pair, a)
    cmd_b, _, phrase_b = _command(Moment("blocks", 20, signal.SIGTERM), pair, b)
    pa = _python_xdem(cmd_a, folder=a, pause="copy:3", preexec=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    pb = _python_xdem(cmd_b, folder=b, pause="blocks:20", preexec=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        wait_stopped(pa.pid)
        deliver(pa.pid, signal.SIGINT)
        wait_stopped(pb.pid)
        deliver(pb.pid, signal.SIGINT, signal.SIGTERM)
    finally:
        err_a = pa.communicate(timeout=180)[1]
        err_b = pb.communicate(timeout=180)[1]
    assert pa.returncode == 130, err_a
    assert one_error_line(err_a).startswith(f"Error: interrupted by SIGINT (Ctrl-C) during {phrase_a}; removed ")
    assert pb.returncode == 143, err_b
    line_b = one_error_line(err_b)
    assert line_b.startswith(f"Error: terminated by SIGTERM during {phrase_b}; "), line_b
    assert "more signal" not in line_b  # SIGINT never reached the process
    assert os.listdir(a) == [] and os.listdir(b) == []


def _cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    return "?"


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def test_signal_under_the_processes_scheduler_closes_the_cluster(server, pair, tmp_path):
    """--scheduler processes: SIGTERM in GDAL's copy (a client and its local cluster are up)
    ends with 143 and one line, and the cluster's worker processes end too."""
    m = Moment("copy", 3, signal.SIGTERM)
    args, _, phrase = _command(m, pair, tmp_path)
    err = tmp_path.parent / f"{tmp_path.name}.err"
    pid = server.run([*args, "--scheduler", "processes", "--workers", "1"], cwd=tmp_path, stdout=err.with_suffix(".out"),
                     stderr=err, env={"XDEM_TEST_PAUSE_AT": "copy:3"})
    try:
        wait_stopped(pid)
        workers = _descendants(pid)
        deliver(pid, signal.SIGTERM)
    finally:
        code = server.wait(pid)
    line = one_error_line(err.read_text())
    assert code == 143, line
    assert line.startswith(f"Error: terminated by SIGTERM during {phrase}; removed "), line
    assert workers, "the local cluster had no process"
    t0 = time.monotonic()  # they end once the main process is gone (a bound, not a timing: nothing waits on it)
    while (alive := {w: _cmdline(w) for w in workers if proc_state(w) not in ("?", "Z")}) and time.monotonic() - t0 < 60:
        time.sleep(0.1)
    assert not alive, alive
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------------------- in process


@pytest.fixture
def default_sigint():
    """Python's own SIGINT handler in this process for the test, as in a terminal: the suite may
    run as a background job (``make test &``, ``nohup``), which starts with SIGINT ignored, and
    xdem then rightly leaves SIGINT alone (see xdem.interrupt)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _dem(n: int = 1024) -> xr.DataArray:
    rng = np.random.default_rng(1)
    dem = xr.DataArray(rng.normal(100, 5, (n, n)).astype("float32"), dims=("y", "x"),
                       coords={"y": np.arange(n)[::-1] + 0.5, "x": np.arange(n) + 0.5})
    return dem.rio.write_crs("EPSG:32632").chunk(256)


@pytest.mark.parametrize("cli", [False, True], ids=["library", "cli-handler"])
def test_a_signal_inside_gdal_progress_callback_stops_the_copy_and_is_raised(cli, tmp_path, default_sigint):
    """The signal is sent from GDAL's progress callback itself, so Python's handler runs inside
    the ctypes callback, where a raised exception is swallowed (the copy used to finish and the
    file appeared). Now: the copy stops, the interruption is raised once GDAL has returned
    (KeyboardInterrupt with Python's own SIGINT handler, Terminated under the CLI's), nothing left."""
    calls: list[float] = []
    full: list[float] = []
    token = COPY_PROGRESS.set(full.append)
    try:
        write_cog(_dem(), tmp_path / "full.tif")  # the callbacks of a whole copy
    finally:
        COPY_PROGRESS.reset(token)
    os.unlink(tmp_path / "full.tif")

    def progress(fraction: float) -> None:
        calls.append(fraction)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM if cli else signal.SIGINT)

    token = COPY_PROGRESS.set(progress)
    try:
        with contextlib.ExitStack() as stack:
            if cli:
                stack.enter_context(interrupt.handling())
                stack.enter_context(interrupt.armed())
            with pytest.raises(interrupt.Terminated if cli else KeyboardInterrupt):
                write_cog(_dem(), tmp_path / "out.tif")
    finally:
        COPY_PROGRESS.reset(token)
    # GDAL stopped (its COG driver unwinds through a callback or two more), far from the end
    assert len(calls) < len(full) and max(calls) < 0.5 and max(full) == 1.0, (calls, full)
    assert os.listdir(tmp_path) == []
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the CLI's handler was removed again


def test_handler_raises_once_records_the_rest_and_checkpoints_raise_a_lost_signal(default_sigint):
    """The handler's rules, in this process (SIGTERM under interrupt.handling())."""
    with interrupt.handling() as run:
        os.kill(os.getpid(), signal.SIGTERM)  # before armed(): recorded only (setting up)
        assert run.signals == [signal.SIGTERM]
        with pytest.raises(interrupt.Terminated), interrupt.armed():
            pass  # raised as the armed block starts
        run.signals.clear()
        run.raised = False
        with interrupt.armed():
            with interrupt.deferred():
                os.kill(os.getpid(), signal.SIGTERM)  # in a C call with callbacks: recorded, "stop"
                assert interrupt.stop_requested()
            with pytest.raises(interrupt.Terminated):
                interrupt.checkpoint()  # raised after it
            try:
                raise RuntimeError("an error being handled: a clean-up")
            except RuntimeError:
                os.kill(os.getpid(), signal.SIGINT)  # a second signal during it: recorded, not raised
            assert run.signals == [signal.SIGTERM, signal.SIGINT]
            with pytest.raises(interrupt.Terminated) as caught:
                interrupt.checkpoint()  # the first raise was "swallowed": the next checkpoint raises it
            assert caught.value.exit_code == 143
    assert run.exit_code == 143
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL and signal.getsignal(signal.SIGINT) is not None
