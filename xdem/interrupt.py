"""Signals are never lost: SIGINT and SIGTERM end a command with exit code 128 + signum.

Python runs a signal handler between two bytecodes of the main thread, wherever that is: in a
ctypes callback (GDAL's progress callback), where a raised exception is swallowed
("Exception ignored on calling ctypes callback") and the run goes on; at the first bytecode of
a clean-up; in a library's ``__del__``. A handler that raises there loses the signal. So the
handler that :func:`handling` installs (the CLI runs every command in it):

- records the signal (the first one decides the exit code: 130 for SIGINT, 143 for SIGTERM) and
  the :func:`stage` the run was in;
- raises :class:`Interrupted` (a ``KeyboardInterrupt``: the clean-up of Ctrl-C runs) only when
  that is safe: never inside a :func:`deferred` block (a C call with Python callbacks: GDAL's
  ``CreateCopy``, whose progress callback then returns "stop", see :func:`stop_requested`);
  for a second signal, never while an exception is being handled (the clean-up of the first:
  it is recorded, not lost, and does not interrupt the clean-up);
- :func:`checkpoint` raises a recorded signal whose exception was lost (swallowed by a C
  callback or a library). It runs at every stage boundary, after every dask task of a local
  scheduler and when the command ends, so a recorded signal always ends the run.

Once the command has cleaned up and printed its line, a further signal ends the process at
once with the exit code of the first (:func:`handling` leaves that handler installed).

SIGTERM is always handled (``timeout``, SLURM and ``docker stop`` must be able to stop a job).
SIGINT is handled unless the process started with SIGINT ignored: a shell runs background jobs
of a script that way so that Ctrl-C at the terminal does not reach them (the POSIX convention
Python itself follows); such a job still stops on SIGTERM.

What the clean-up did is noted here (:func:`note_removed`, :func:`note_kept`,
:func:`note_restored`) for the one line the CLI prints (:func:`describe`).

Test hook (not a public option): with ``XDEM_TEST_PAUSE_AT="<key>:<n>"`` in the environment,
the process stops itself (SIGSTOP) once, at the ``n``-th event of the first stage with that key
(``n = 0``: its start; then each dask task finished in the main thread, each call of GDAL's
progress callback), or at the end of that stage if it has fewer events. A test waits for the
stop, sends its signal, then SIGCONT: the signal arrives at a known moment whatever the load.
Keys: ``filters``, ``fit``, ``write``, ``blocks`` (the block writes of a COG), ``copy`` (GDAL's
COG copy, paused inside its progress callback), ``stats``, ``verdict``, ``report``, ``zarr``
(the chunk writes of a Zarr store), ``upload`` (an upload to object storage: event ``n`` after its
part ``n``, see :mod:`xdem.io.upload`), ``run`` (the whole command).

Examples
--------
Outside :func:`handling` (a library call) nothing is recorded and :func:`checkpoint` does nothing:

>>> checkpoint(); stop_requested()
False
>>> Interrupted(2).exit_code, Interrupted(15).exit_code
(130, 143)
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from dask.callbacks import Callback

__all__ = ["Interrupted", "Terminated", "RunState", "handling", "armed", "finish", "deferred", "checkpoint",
           "stop_requested", "stage", "event", "note_removed", "note_kept", "note_restored", "describe", "signal_name",
           "PAUSE_ENV"]

#: Environment variable of the test hook (see the module notes).
PAUSE_ENV = "XDEM_TEST_PAUSE_AT"

_Handler = Callable[[int, FrameType | None], object] | int | None


class Interrupted(KeyboardInterrupt):
    """The run was interrupted by signal ``signum`` (SIGINT, or SIGTERM: :class:`Terminated`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        """128 + signum: the shell's convention (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + self.signum

    @classmethod
    def of(cls, signum: int) -> Interrupted:
        """The exception for ``signum``: :class:`Terminated` for SIGTERM."""
        return Terminated(signum) if signum == signal.SIGTERM else Interrupted(signum)


class Terminated(Interrupted):
    """The run was interrupted by SIGTERM (``timeout``, SLURM, ``docker stop``)."""


@dataclass
class RunState:
    """What :func:`handling` recorded: the signals received (in order), the stage the run was
    in when the first came, and what the clean-up removed, restored and kept."""

    signals: list[int] = field(default_factory=list)
    where: str | None = None
    stages: list[tuple[str, str | None]] = field(default_factory=list)
    raised: bool = False
    armed: bool = False
    deferring: int = 0
    finished: bool = False
    removed: list[str] = field(default_factory=list)
    temporary: set[str] = field(default_factory=set)
    restored: list[str] = field(default_factory=list)
    kept: dict[str, str] = field(default_factory=dict)
    pause: tuple[str, int] | None = None
    paused: bool = False
    events: dict[str, int] = field(default_factory=dict)

    @property
    def signum(self) -> int | None:
        """The first signal received, or None."""
        return self.signals[0] if self.signals else None

    @property
    def exit_code(self) -> int:
        """128 + the first signal (0 if none)."""
        return 128 + self.signals[0] if self.signals else 0


_STATE: RunState | None = None
#: Signals recorded by a :func:`deferred` block outside :func:`handling` (a library call).
_LOOSE: list[int] = []
_LOOSE_PREVIOUS: list[Callable[[int, FrameType | None], object]] = []


def _handle(signum: int, frame: FrameType | None) -> None:
    st = _STATE
    if st is None:  # pragma: no cover - handling() restores the handlers before clearing the state
        return
    st.signals.append(signum)
    if len(st.signals) == 1:
        st.where = st.stages[-1][0] if st.stages else None
    if st.finished:  # cleaned up and reported: a further signal ends the process now
        os._exit(st.exit_code)
    if not st.armed or st.deferring or (st.raised and sys.exc_info()[1] is not None):
        return  # outside armed(), inside a C call with callbacks, or the clean-up of the first signal
    st.raised = True
    raise Interrupted.of(st.signals[0])


def _pause_target() -> tuple[str, int] | None:
    text = os.environ.get(PAUSE_ENV, "")
    key, _, n = text.partition(":")
    return (key, int(n)) if key and n.isdigit() else None


def _installed(signum: int, previous: _Handler) -> bool:
    """Whether :func:`handling` takes over ``signum`` (see the module notes on SIGINT)."""
    return signum == signal.SIGTERM or previous is not signal.SIG_IGN


@contextlib.contextmanager
def handling() -> Iterator[RunState]:
    """Record SIGINT and SIGTERM for the block (main thread only; elsewhere, or nested, the
    block runs under the handlers in place) and yield the :class:`RunState`. Signals raise
    only inside :func:`armed` (the command itself); outside it (setting up, reporting) they
    are recorded.

    The previous handlers are restored when the block ends, unless the interrupted run called
    :func:`finish`: then a further signal ends the process at once.
    """
    global _STATE
    if threading.current_thread() is not threading.main_thread() or _STATE is not None:
        yield _STATE if _STATE is not None else RunState()
        return
    st = RunState(pause=_pause_target())
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    _STATE = st
    taken = [s for s, old in previous.items() if _installed(s, old)]
    try:
        for s in taken:
            signal.signal(s, _handle)
        with _TaskCheckpoints():
            yield st
    finally:
        if not st.finished:
            for s in taken:
                signal.signal(s, previous[s])
            _STATE = None


@contextlib.contextmanager
def armed() -> Iterator[None]:
    """Inside :func:`handling`, signals raise :class:`Interrupted` in the block (where safe).
    A signal recorded before the block is raised as it starts."""
    st = _STATE
    if st is None or st.armed:
        yield
        return
    st.armed = True
    try:
        checkpoint()
        yield
    finally:
        st.armed = False


def finish() -> None:
    """The interrupted run has cleaned up and printed its line: from now on a further signal
    ends the process at once with the exit code of the first."""
    if _STATE is not None:
        _STATE.finished = True


class _TaskCheckpoints(Callback):
    """After every dask task finished in the main thread (local schedulers): :func:`checkpoint`
    and the test hook."""

    def _posttask(self, key: object, result: object, dsk: object, state: object, worker_id: object) -> None:
        if threading.current_thread() is threading.main_thread():
            checkpoint()
            event()


def checkpoint() -> None:
    """Raise :class:`Interrupted` if a signal was recorded and its exception is not already
    unwinding the run (it was swallowed, or recorded in a :func:`deferred` block). Call it in
    normal flow only (not in a clean-up)."""
    st = _STATE
    if st is None or not st.signals or not st.armed or st.deferring or st.finished:
        return
    if st.raised and sys.exc_info()[1] is not None:
        return
    st.raised = True
    raise Interrupted.of(st.signals[0])


def stop_requested() -> bool:
    """Whether a signal was recorded (a C call's progress callback then returns "stop")."""
    return bool(_STATE.signals if _STATE is not None else _LOOSE)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A C call with Python callbacks runs in the block: signals are only recorded, never raised
    in it. After the block, call :func:`checkpoint` (under :func:`handling`), which raises the
    recorded signal as the run's interruption.

    Outside :func:`handling`, in the main thread, a Python SIGINT handler (``KeyboardInterrupt``)
    is deferred the same way and called once the block is over.
    """
    st = _STATE
    if threading.current_thread() is not threading.main_thread():  # signal handlers run in the main thread only
        yield
        return
    if st is not None:
        st.deferring += 1
        try:
            yield
        finally:
            st.deferring -= 1
        return
    if _LOOSE_PREVIOUS:  # nested: the outer block records and re-delivers
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):
        yield
        return
    _LOOSE.clear()
    _LOOSE_PREVIOUS.append(previous)
    signal.signal(signal.SIGINT, lambda signum, frame: _LOOSE.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _LOOSE_PREVIOUS.clear()
    if _LOOSE:
        _LOOSE.clear()
        previous(signal.SIGINT, None)


@contextlib.contextmanager
def stage(text: str, *, key: str | None = None) -> Iterator[None]:
    """The run is in stage ``text`` (e.g. "the COG copy of /data/out.tif") for the block: it names
    where a signal came in the CLI's line. ``key`` names the stage for the test hook."""
    st = _STATE
    if st is None:
        yield
        return
    checkpoint()
    st.stages.append((text, key))
    try:
        event(start=True)
        yield
        if st.pause is not None and not st.paused and st.pause[0] == key:
            _pause(st)  # the stage had fewer events than asked: pause at its end
        checkpoint()
    finally:
        st.stages.remove((text, key))


def event(*, start: bool = False) -> None:
    """One progress event of the current stage (for the test hook; cheap when it is off)."""
    st = _STATE
    if st is None or st.pause is None or st.paused or not st.stages:
        return
    key = st.stages[-1][1]
    if key is None or key != st.pause[0]:
        return
    n = 0 if start else st.events.get(key, 0) + 1
    if not start:
        st.events[key] = n
    if n == st.pause[1]:
        _pause(st)


def _pause(st: RunState) -> None:
    st.paused = True
    os.kill(os.getpid(), signal.SIGSTOP)


def note_removed(path: str | os.PathLike, *, temporary: bool = False) -> None:
    """The clean-up removed ``path``: a temporary file (``temporary=True``; its name starts with a
    prefix of four dash-separated parts, :data:`xdem.io.atomic.TEMP_PREFIX` + pid + id), or an
    output already moved into place."""
    if _STATE is not None:
        _STATE.removed.append(os.fspath(path))
        if temporary:
            _STATE.temporary.add(os.fspath(path))


def note_restored(path: str | os.PathLike) -> None:
    """The clean-up put back the file that ``path`` had replaced (``--overwrite``)."""
    if _STATE is not None:
        _STATE.restored.append(os.fspath(path))


def note_kept(path: str | os.PathLike, what: str) -> None:
    """``path`` is left on purpose; ``what`` says so in the CLI's line (e.g. "the unfinished
    store /d/out.zarr for --resume"). A later note on the same path replaces the earlier one."""
    if _STATE is not None:
        _STATE.kept[os.fspath(path)] = what


def signal_name(signum: int) -> str:
    """``"SIGINT (Ctrl-C)"``, ``"SIGTERM"``...

    Examples
    --------
    >>> signal_name(2), signal_name(15)
    ('SIGINT (Ctrl-C)', 'SIGTERM')
    """
    name = signal.Signals(signum).name if signum in signal.Signals._value2member_map_ else f"signal {signum}"
    return name + (" (Ctrl-C)" if signum == signal.SIGINT else "")


def _temp_summary(removed: list[str], temporary: set[str]) -> list[str]:
    """Removed files grouped as "N temporary files (prefix*) in folder" and outputs by name."""
    temps: dict[tuple[str, str], int] = {}
    outputs = []
    for p in removed:
        path = Path(p)
        if p in temporary:
            prefix = "-".join(path.name.split("-")[:4]) + "-*"
            temps[(str(path.parent), prefix)] = temps.get((str(path.parent), prefix), 0) + 1
        else:
            outputs.append(p)
    parts = [f"removed {n} temporary file{'s' if n > 1 else ''} ({prefix}) in {folder}"
             for (folder, prefix), n in temps.items()]
    if outputs:
        parts.append(f"removed the output{'s' if len(outputs) > 1 else ''} already written ({', '.join(outputs)})")
    return parts


def describe(st: RunState, *, finished: bool = False) -> str:
    """The CLI's one line for an interrupted run: the signal, the stage, what the clean-up
    removed, restored and kept. ``finished``: the signal came once the outputs were final.

    Examples
    --------
    >>> tmp = "/d/.xdem-tmp-42-0123456789abcdef0123456789abcdef-out.tif"
    >>> st = RunState(signals=[15], where="the COG copy of /d/out.tif", removed=[tmp], temporary={tmp})
    >>> describe(st)  # doctest: +NORMALIZE_WHITESPACE
    'terminated by SIGTERM during the COG copy of /d/out.tif; removed 1 temporary file
     (.xdem-tmp-42-0123456789abcdef0123456789abcdef-*) in /d; no output was left (exit code 143)'
    """
    first = st.signals[0]
    verb = "terminated by" if first == signal.SIGTERM else "interrupted by"
    if finished:
        return (f"{verb} {signal_name(first)} just after the run had finished; its outputs are complete and were "
                f"kept (exit code {st.exit_code})")
    parts = [f"{verb} {signal_name(first)} during {st.where or 'the start of the run'}"]
    parts += _temp_summary(st.removed, st.temporary)
    if st.restored:
        parts.append(f"restored the file{'s' if len(st.restored) > 1 else ''} replaced with --overwrite "
                     f"({', '.join(st.restored)})")
    parts += [f"kept {what}" for what in st.kept.values()]
    if not st.removed and not st.restored and not st.kept:
        parts.append("nothing had been written yet")
    if not st.kept:
        parts.append("no output was left")
    more = len(st.signals) - 1
    if more:
        parts[-1] += f" ({more} more signal{'s' if more > 1 else ''} received after it, recorded)"
    return "; ".join(parts) + f" (exit code {st.exit_code})"
