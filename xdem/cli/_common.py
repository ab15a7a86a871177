"""Helpers shared by the ``xdem`` sub-commands: dask schedulers, progress, JSON output.

- :func:`scheduler_option` / :func:`workers_option`: the ``--scheduler`` and ``--workers``
  click options, validated by :func:`check_scheduler`.
- :func:`use_scheduler`: context manager that makes dask run on the chosen scheduler
  (threads, synchronous, a local cluster of processes, or a remote ``tcp://`` scheduler)
  and closes whatever it started.
- :class:`Progress`: stage messages, dask progress bars (local schedulers) or a periodic
  report (distributed) on stderr; silent when quiet.
- :func:`stdout_to_stderr`, :func:`one_line_warnings`.

Examples
--------
>>> with use_scheduler("synchronous") as info:
...     info["scheduler"]
'synchronous'
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, Protocol, TypeVar

import click
import dask
import dask.threaded

from xdem import interrupt
from xdem.cli.progress import RunBar
from xdem.errors import XdemError

_F = TypeVar("_F", bound=Callable[..., object])

__all__ = [
    "LOCAL_SCHEDULERS",
    "scheduler_option",
    "workers_option",
    "check_scheduler",
    "use_scheduler",
    "Progress",
    "stdout_to_stderr",
    "one_line_warnings",
]

#: Scheduler names accepted by ``--scheduler`` besides a ``tcp://host:port`` address.
LOCAL_SCHEDULERS = ("threads", "processes", "synchronous")
_REMOTE_PREFIXES = ("tcp://", "tls://", "ucx://", "inproc://", "ws://", "wss://")
_CONNECT_TIMEOUT_S = 10


# ---------------------------------------------------------------------------- options


def check_scheduler(scheduler: str, workers: int | None) -> str:
    """Validate ``--scheduler``/``--workers``; returns the scheduler name (lower-case) or address.

    Raises
    ------
    click.BadParameter
        Unknown scheduler, or ``--workers`` with a scheduler it does not apply to.
    """
    name = scheduler.strip()
    if name.lower() in LOCAL_SCHEDULERS:
        name = name.lower()
    elif not name.lower().startswith(_REMOTE_PREFIXES):
        raise click.BadParameter(
            f"'{scheduler}' is not a scheduler; use threads, processes, synchronous or the address of a "
            "running dask scheduler such as tcp://127.0.0.1:8786",
            param_hint="'--scheduler'",
        )
    if workers is not None and name not in ("threads", "processes"):
        raise click.BadParameter(
            f"--workers only applies to --scheduler threads or processes, not '{name}' "
            "(a remote cluster has its own workers)",
            param_hint="'--workers'",
        )
    return name


def scheduler_option(func: _F) -> _F:
    """Decorator adding ``--scheduler`` (default ``threads``)."""
    return click.option(
        "--scheduler", default="threads", show_default=True, metavar="threads|processes|synchronous|tcp://HOST:PORT",
        help="Where dask runs: local threads, a local cluster of worker processes (dask.distributed), "
             "one thread (debugging), or the address of a running dask scheduler.",
    )(func)


def workers_option(func: _F) -> _F:
    """Decorator adding ``--workers N``."""
    return click.option(
        "--workers", type=click.IntRange(min=1), default=None,
        help="Threads (threads) or single-threaded worker processes (processes); default: number of CPUs.",
    )(func)


# ---------------------------------------------------------------------------- schedulers


def _quiet_distributed_logs() -> contextlib.AbstractContextManager:
    """Lower the log level of distributed's loggers (they print INFO lines on stderr)."""
    stack = contextlib.ExitStack()
    for name in ("distributed", "distributed.scheduler", "distributed.nanny", "distributed.worker",
                 "distributed.core", "distributed.http.proxy"):
        logger = logging.getLogger(name)
        old = logger.level
        logger.setLevel(logging.ERROR)
        stack.callback(logger.setLevel, old)
    return stack


@contextlib.contextmanager
def use_scheduler(scheduler: str = "threads", workers: int | None = None) -> Iterator[dict]:
    """Run the dask computations of the ``with`` block on ``scheduler``.

    Parameters
    ----------
    scheduler
        ``"threads"`` (default; ``workers`` threads), ``"synchronous"`` (one thread, for
        debugging), ``"processes"`` (a ``distributed.LocalCluster`` of ``workers``
        single-threaded worker processes, started here and closed on exit) or the address
        of a running dask scheduler (``tcp://host:port``; a ``distributed.Client`` is
        connected here and closed on exit, the cluster keeps running).
    workers
        Number of threads or worker processes; default: number of CPUs.

    Yields
    ------
    dict
        ``{"scheduler", "workers", "address", "client"}`` (``address`` and ``client`` are
        ``None`` for threads and synchronous). The client is scoped to the block: it is
        not made the global default.

    Raises
    ------
    xdem.errors.XdemError
        The remote scheduler cannot be reached.

    Examples
    --------
    >>> import dask.array as da
    >>> with use_scheduler("threads", workers=2) as info:
    ...     int(da.ones(4, chunks=2).sum().compute()), info["workers"]
    (4, 2)
    """
    name = check_scheduler(scheduler or "threads", workers)
    info: dict[str, Any] = {"scheduler": name, "workers": workers, "address": None, "client": None}
    if name == "threads":
        info["workers"] = workers or os.cpu_count() or 1
        # dask's own threaded get, given as the function: named by a string, every compute()
        # would look for a distributed client first and import distributed (~0.15 s CPU) to do so
        with dask.config.set(scheduler=dask.threaded.get, num_workers=info["workers"]):
            yield info
        return
    if name == "synchronous":
        info["workers"] = 1
        with dask.config.set(scheduler="synchronous"):
            yield info
        return
    from distributed import Client, LocalCluster

    with contextlib.ExitStack() as stack:
        stack.enter_context(_quiet_distributed_logs())
        if name == "processes":
            n = workers or os.cpu_count() or 1
            with warnings.catch_warnings():  # "Port 8787 is already in use": harmless, a random port is used
                warnings.filterwarnings("ignore", message="Port .* is already in use")
                cluster = stack.enter_context(LocalCluster(
                    n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                    silence_logs=logging.CRITICAL,  # task errors are re-raised here, on one line
                ))
            client = stack.enter_context(Client(cluster, set_as_default=False))
            info["workers"] = n
        else:
            try:
                client = Client(name, timeout=_CONNECT_TIMEOUT_S, set_as_default=False)
            except (OSError, TimeoutError) as exc:
                raise XdemError(
                    f"cannot connect to the dask scheduler at {name} ({type(exc).__name__}: {exc}); "
                    "check the address and that `dask scheduler` is running there"
                ) from exc
            stack.enter_context(client)
            info["workers"] = len(client.scheduler_info().get("workers", {}))
        info["address"] = client.scheduler.address
        info["client"] = client
        stack.enter_context(client.as_current())  # Client.current()/distributed.progress find it
        stack.enter_context(dask.config.set(scheduler=client))
        yield info


# ---------------------------------------------------------------------------- progress



class TaskCounter(Protocol):
    """What the progress lines ask of a scheduler's client (``distributed.Client``): the tasks
    each worker is processing."""

    def processing(self) -> Mapping[str, Collection[object]]: ...  # noqa: D102


class Progress:
    """Progress reporting on stderr for a CLI command.

    ``stage(text)`` prints a timestamped line and, for the duration of the stage, shows
    dask's progress bar for computations longer than ``minimum`` seconds (local
    schedulers) or a periodic "still running" line every ``interval`` seconds
    (distributed, where dask's local callbacks do not fire). Nothing is printed when
    ``quiet``.

    Examples
    --------
    >>> p = Progress(quiet=True)
    >>> with p.stage("fitting"):
    ...     pass
    """

    def __init__(self, *, quiet: bool = False, client: TaskCounter | None = None, minimum: float = 1.0, interval: float = 10.0,
                 plan: list[str] | None = None):
        self.quiet = quiet
        self.client = client
        self.minimum = minimum
        self.interval = interval
        self.t0 = time.perf_counter()
        # one bar over the whole run (percent and ETA) when the stages are known, on local schedulers
        self.bar: Any = None
        if plan is not None and not quiet and client is None:
            self.bar = RunBar(plan)

    def finish(self) -> None:
        """End the run's bar (100 % and the total time), if any."""
        if self.bar is not None:
            self.bar.finish()

    def elapsed(self) -> float:
        """Seconds since this object was created."""
        return time.perf_counter() - self.t0

    def echo(self, text: str = "") -> None:
        """Print ``text`` on stderr unless quiet."""
        if not self.quiet:
            if self.bar is not None:
                self.bar.clear()
            click.echo(text, err=True)

    @contextlib.contextmanager
    def stage(self, text: str, *, bars: bool = True) -> Iterator[None]:
        """Announce ``text`` and report progress until the block ends; the stage is also what
        a signal's one line names (:func:`xdem.interrupt.stage`), quiet or not."""
        phrase, key = _stage_phrase(text)
        with interrupt.stage(phrase, key=key):
            with self._shown(text, bars=bars):
                yield

    @contextlib.contextmanager
    def _shown(self, text: str, *, bars: bool) -> Iterator[None]:
        if self.quiet:
            yield
            return
        self.echo(f"[{self.elapsed():7.1f} s] {text}")
        if self.bar is not None:
            self.bar.begin(text)
            with self.bar.tracking():
                yield
            return
        if self.client is not None:
            with self._heartbeat(text):
                yield
        elif bars:
            from dask.diagnostics import ProgressBar

            with ProgressBar(minimum=self.minimum, out=sys.stderr):
                yield
        else:
            yield

    @contextlib.contextmanager
    def _heartbeat(self, text: str) -> Iterator[None]:
        stop = threading.Event()
        start = time.perf_counter()

        def run() -> None:
            while not stop.wait(self.interval):
                tasks = ""
                with contextlib.suppress(Exception):  # a client that cannot say: no task count
                    if self.client is not None:
                        processing = self.client.processing()
                        tasks = f", {sum(len(v) for v in processing.values())} task(s) on {len(processing)} worker(s)"
                click.echo(f"           ... {text} ({time.perf_counter() - start:.0f} s{tasks})", err=True)

        thread = threading.Thread(target=run, name="xdem-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()


#: Stage announced (its first words) -> how a signal's line names it, and the test hook's key.
_PHRASES = {"outlier filters": ("the outlier filters", "filters"), "fitting": ("the fit", "fit"),
            "statistics": ("the statistics of dh", "stats"), "verdict": ("the verdict", "verdict")}


def _stage_phrase(text: str) -> tuple[str, str | None]:
    """``(phrase, key)`` of a stage announced as ``text`` (see :func:`xdem.interrupt.stage`).

    Examples
    --------
    >>> _stage_phrase("fitting"), _stage_phrase("writing the report /d/r.html")
    (('the fit', 'fit'), ('the report /d/r.html', 'report'))
    """
    if text.startswith("writing the report "):
        return f"the report {text[len('writing the report '):]}", "report"
    if text.startswith("writing "):
        return f"the writing of {text[len('writing '):]}", "write"
    for start, (phrase, key) in _PHRASES.items():
        if text.startswith(start):
            return phrase, key
    return text, None


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send everything printed on stdout to stderr (progress bars, stray prints).

    Used when stdout must carry nothing but one JSON document.
    """
    with contextlib.redirect_stdout(sys.stderr):
        yield


@contextlib.contextmanager
def one_line_warnings() -> Iterator[None]:
    """Show Python warnings as one ``Warning: <message>`` line on stderr."""

    def show(message: Any, category: type, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        click.echo(f"Warning: {message} [{category.__name__}]", err=True)

    old = warnings.showwarning
    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = old
