"""A fork server running ``xdem`` commands or gallery scripts (tests/test_examples_gallery.py) in
real child processes. The ``xdem`` ones are shared by the modules of a test process: tests/conftest.py
starts one of each kind at first use (fixtures ``fork_server`` and ``fork_server_test_env``).

Starting ``python -m xdem`` costs seconds of imports (dask, xarray, rasterio, numba...); a test
that interrupts a run at 30+ moments would spend most of its time importing. This script
imports the CLI once, then forks one child per command: each child is a real process (its
own signals, threads and exit code) that runs ``xdem`` exactly as ``python -m xdem`` does after
its imports, and ends as the interpreter does (waiting for its threads, then the atexit
functions; see :func:`_child`). The server itself never computes anything, so it has no Python
thread when it forks (pyarrow's jemalloc keeps one native background thread, which jemalloc
itself handles across fork).

Protocol, one JSON object per line on stdin, one answer per line on stdout:

- ``{"op": "run", "args": [...], "cwd": ..., "env": {...}, "stdout": path, "stderr": path,
  "sigint": "default" | "ignore"}`` -> ``{"pid": N}``; with ``"script": path`` instead of
  ``"args"``, the child runs that script as ``python path *args`` would (``__main__``, ``sys.argv``,
  ``sys.path[0]`` its folder). With ``"finalize": true``, the child ends with the interpreter's
  whole shutdown (module teardown included: what an object's ``__del__`` prints then appears
  in its stderr), as a fresh process would; otherwise see :func:`_child`. The child starts like a fresh Python:
  SIGINT raises ``KeyboardInterrupt`` (or is ignored, as in a job started with SIGINT ignored),
  SIGTERM has its default action, until the CLI installs its own handlers.
- ``{"op": "wait", "pid": N}`` -> ``{"status": S, "cpu_s": T}`` (``os.wait4``'s status, and the
  child's CPU time).

:class:`ForkServer` is the test side.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import json
import os
import runpy
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Mapping
from pathlib import Path

#: What a server imports before it forks. "cli": the commands' engines (they import them lazily, so
#: that ``xdem --help`` stays fast; importing ``xdem.cli`` alone would leave every child to import
#: numpy, dask, xarray, rasterio... again, ~2.5 s of CPU a child). "gallery": the packages the
#: gallery scripts import (~3 s of CPU a script); a script still imports what it uses itself (xdem
#: imports its sub-modules on first use, and the scripts import every other package they name).
PRELOADS = {
    "cli": ("zarr", "xdem.cli", "xdem.cli._convert_run", "xdem.cli._coreg_run", "xdem.cli._dh_run", "xdem.cli._terrain_run",
            "xdem.cli.coreg",
            "xdem.io.zarr", "xdem.report", "xdem.report.write"),
    "gallery": ("numpy", "matplotlib.pyplot", "pandas", "scipy.ndimage", "dask", "rasterio", "geoutils", "xdem",
                "xdem.examples", "xdem.coreg", "xdem.terrain", "xdem.stats", "xdem.spatialstats"),
}


def _child(req: dict) -> None:
    """In the forked child: become a fresh ``xdem`` process, run the command, exit (never returns)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN if req.get("sigint") == "ignore" else signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.environ.update(req.get("env", {}))
    tempfile.tempdir = None  # TMPDIR as the request sets it, as in a fresh process
    os.chdir(req["cwd"])
    for fd, name in ((1, "stdout"), (2, "stderr")):
        target = os.open(req[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    devnull = os.open(os.devnull, os.O_RDONLY)  # not the server's requests
    os.dup2(devnull, 0)
    os.close(devnull)
    script = req.get("script")
    try:
        if script is not None:
            sys.argv = [script, *req["args"]]
            sys.path[0] = os.path.dirname(script)
            runpy.run_path(script, run_name="__main__")
        else:
            sys.argv = ["xdem", *req["args"]]
            from xdem.cli import main

            main(args=req["args"], prog_name="xdem")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            print(exc.code, file=sys.stderr)
    except BaseException:  # as the interpreter does with an uncaught exception
        traceback.print_exc()
        code = 1
    if req.get("finalize"):  # the whole interpreter shutdown, module teardown included (~0.5 s)
        raise SystemExit(code)  # out of the server loop: the child ends as `python` does
    # The interpreter's shutdown as far as a program can tell: wait for the non-daemon threads
    # (dask's pool finishing its tasks), then the atexit functions. Tearing down the modules is
    # skipped: in a forked child it would copy every page of the server's heap (0.5 s a child).
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


#: The coregistrations whose compiled loops a warm-up compiles (or loads from numba's cache), by
#: group: "coreg" are those of ``xdem coreg``'s usual methods; "more" are the loops only other
#: methods use (ICP, CPD, a ramp, a blockwise field), which the gallery scripts also run.
#: Cold (an empty cache), "coreg" costs about 17 s of CPU, "more" about 10 s; with a warm cache
#: 2 s and 3 s.
WARM_STEPS = {"coreg": ("NuthKaab", "VerticalShift", "LZD"), "more": ("ICP", "CPD", "Deramp", "BlockwiseCoreg")}
#: What each fork server warms before it forks.
SERVER_WARMS = {"cli": ("coreg",), "gallery": ("coreg",)}


def _warm_kernels(groups: tuple[str, ...] = ("coreg",)) -> None:
    """Compile, or load from numba's cache, the compiled loops of the coregistrations of
    :data:`WARM_STEPS` ``groups``, so that the children of a server inherit them (each child would
    otherwise load or, with an empty cache, compile them again: about 15 s of CPU a child for
    ``nuthkaab`` on a fresh clone).

    Single-threaded on purpose (dask's synchronous scheduler, a plain tiled GTiff): the server must
    have no thread when it forks."""
    import dask
    import numpy as np
    import rasterio
    from rasterio.transform import from_origin

    import xdem

    y, x = np.mgrid[0:256, 0:256].astype(np.float32)
    ref = (100 + 20 * np.sin(x / 30) * np.cos(y / 40) + 0.02 * x).astype(np.float32)
    ref[:3, :3] = -9999.0
    profile = dict(driver="GTiff", width=256, height=256, count=1, dtype="float32", crs="EPSG:32632",
                   transform=from_origin(500000, 4000000, 5, 5), nodata=-9999.0, tiled=True, blockxsize=128,
                   blockysize=128)
    steps = {"BlockwiseCoreg": lambda: xdem.coreg.BlockwiseCoreg(xdem.coreg.NuthKaab(), block_size_fit=128)}
    with tempfile.TemporaryDirectory() as tmp, dask.config.set(scheduler="synchronous"):
        paths = [os.path.join(tmp, f"{name}.tif") for name in ("ref", "tba")]
        for path, values in zip(paths, (ref, np.roll(ref, 1, axis=1) + 1)):
            with rasterio.open(path, "w", **profile) as dst:
                dst.write(values, 1)
        a, b = (xdem.open_dem(p, chunks=128) for p in paths)
        for group in groups:
            for name in WARM_STEPS[group]:
                step = steps[name]() if name in steps else getattr(xdem.coreg, name)()
                step.fit(a, b).apply(b).compute()


def serve(preload: str) -> None:
    """The server loop (``python tests/forkserver.py PRELOAD``)."""
    for module in PRELOADS[preload]:  # the slow imports, once
        importlib.import_module(module)
    threads = len(os.listdir("/proc/self/task"))
    _warm_kernels(SERVER_WARMS[preload])
    if len(os.listdir("/proc/self/task")) != threads:  # a thread would not survive the fork
        raise SystemExit("the fork server's warm-up started a thread")
    # The imports' and warm-up's objects to the permanent generation: a child's garbage collections
    # then never walk them (nor write their headers, which would copy each page of the server's heap).
    gc.collect()
    gc.freeze()
    out = sys.stdout
    for line in sys.stdin:
        req = json.loads(line)
        if req["op"] == "run":
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(req)
            out.write(json.dumps({"pid": pid}) + "\n")
        elif req["op"] == "wait":
            _, status, usage = os.wait4(req["pid"], 0)
            out.write(json.dumps({"status": status, "cpu_s": usage.ru_utime + usage.ru_stime}) + "\n")
        out.flush()


#: Seconds the first request waits for a server's start (its imports and warm-up).
START_TIMEOUT_S = 600


class ForkServer:
    """The test side: ``run(args, ...)`` starts a command in a forked child and returns its pid;
    ``wait(pid)`` returns its exit code (negative: killed by that signal)."""

    def __init__(self, *, pythonpath: str, preload: str = "cli", env: dict[str, str] | None = None,
                 unset: tuple[str, ...] = (), base: Mapping[str, str] | None = None) -> None:
        """``preload``: a key of :data:`PRELOADS`; ``env``: added to the server's environment
        (default: one BLAS/OpenMP thread a child); ``unset``: variables removed from it; ``base``:
        the environment these apply to (default: ``os.environ`` as it is now)."""
        env = {**(os.environ if base is None else base), "PYTHONPATH": pythonpath,
               **({"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"} if env is None else env)}
        for name in ("XDEM_TEST_PAUSE_AT", *unset):
            env.pop(name, None)
        self.cpu_s: dict[int, float] = {}
        #: one request and its answer at a time (threads may share the server: see :meth:`wait_ended`)
        self._lock = threading.RLock()
        #: whether the server has answered once (its first answer waits for its imports and warm-up)
        self.ready = False
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), preload], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def _ask(self, req: dict, *, timeout: float) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        with self._lock:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
            if not ready:
                raise TimeoutError(f"the fork server did not answer {req['op']} in {timeout:.0f} s")
            line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the fork server ended (exit code {self.proc.wait()})")
        return json.loads(line)

    def run(self, args: list[str], *, cwd: Path, stdout: Path, stderr: Path, env: dict | None = None,
            sigint: str = "default", script: Path | None = None, finalize: bool = False) -> int:
        """Start ``xdem *args`` (or ``python script *args``) in a child; returns its pid.
        ``finalize``: the child ends with the interpreter's whole shutdown (see the protocol)."""
        req = {"op": "run", "args": args, "cwd": str(cwd), "env": env or {}, "stdout": str(stdout),
               "stderr": str(stderr), "sigint": sigint, "finalize": finalize,
               **({"script": str(script)} if script is not None else {})}
        # the first request waits for the server's start (imports, kernel warm-up: minutes on a loaded
        # machine); after a timeout the server is stopped, so that no later request reads its late answer
        try:
            answer = self._ask(req, timeout=60 if self.ready else START_TIMEOUT_S)
        except TimeoutError:
            self.proc.kill()
            raise
        self.ready = True
        return int(answer["pid"])

    def wait(self, pid: int, *, timeout: float = 180) -> int:
        """The exit code of child ``pid`` (killed with SIGKILL if it has not ended in ``timeout`` s);
        its CPU time is then in ``self.cpu_s[pid]``. The server answers no other request meanwhile."""
        with self._lock:
            try:
                answer = self._ask({"op": "wait", "pid": pid}, timeout=timeout)
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                assert self.proc.stdout is not None
                self.proc.stdout.readline()  # the server's late answer: the next request must not read it
                raise
            self.cpu_s[pid] = float(answer["cpu_s"])
        return os.waitstatus_to_exitcode(int(answer["status"]))

    def wait_ended(self, pid: int, *, timeout: float = 180) -> int:
        """As :meth:`wait`, but the server stays free for other threads' requests until the child has
        ended (this thread watches its state; the server then reaps it at once): one server runs
        children side by side. A child still running after ``timeout`` s is killed (SIGKILL), then
        :class:`TimeoutError`."""
        t0 = time.monotonic()
        while proc_state(pid) not in ("Z", "X", "?"):
            if time.monotonic() - t0 > timeout:
                os.kill(pid, signal.SIGKILL)
                self.wait(pid)
                raise TimeoutError(f"child {pid} did not end in {timeout:.0f} s")
            time.sleep(0.02)
        return self.wait(pid)

    def popen(self, args: list[str], *, cwd: Path, logs: Path, env: dict | None = None,
              script: Path | None = None, finalize: bool = True) -> Forked:
        """Start ``xdem *args`` (or ``python script *args``) in a child (see :meth:`run`), its stdout
        and stderr in files ``logs.out`` and ``logs.err``: a :class:`Forked`, used as a
        :class:`subprocess.Popen`."""
        out, err = logs.with_name(logs.name + ".out"), logs.with_name(logs.name + ".err")
        pid = self.run(args, cwd=cwd, stdout=out, stderr=err, env=env, script=script, finalize=finalize)
        return Forked(self, pid, out, err)

    def close(self) -> None:
        """End the server (after its children)."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def proc_state(pid: int) -> str:
    """The state letter of process ``pid`` (``T``: stopped, ``Z``: ended, not yet reaped; ``?``: none)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


def wait_stopped(pid: int, *, timeout: float = 180) -> None:
    """Wait until ``pid`` has stopped itself at the test hook's moment (``XDEM_TEST_PAUSE_AT``)."""
    t0 = time.monotonic()
    while (state := proc_state(pid)) != "T":
        if state in ("Z", "X", "?"):
            raise AssertionError(f"process {pid} ended without reaching its moment")
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"process {pid} did not reach its moment in {timeout:.0f} s")
        time.sleep(0.005)


class Forked:
    """A child of a :class:`ForkServer`, with the part of :class:`subprocess.Popen` the tests use
    (the server, not this process, is its parent: it reaps it when asked by :meth:`wait`)."""

    def __init__(self, server: ForkServer, pid: int, out: Path, err: Path) -> None:
        self.server, self.pid, self.out, self.err = server, pid, out, err
        self.returncode: int | None = None

    def state(self) -> str:
        """The process state letter (see :func:`proc_state`)."""
        return proc_state(self.pid)

    def wait(self, timeout: float = 180) -> int:
        if self.returncode is None:
            self.returncode = self.server.wait(self.pid, timeout=timeout)
        return self.returncode

    def poll(self) -> int | None:
        if self.returncode is None and self.state() in ("Z", "X", "?"):
            self.wait()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:  # never a reaped (possibly reused) pid
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def communicate(self, timeout: float = 180) -> tuple[str, str]:
        """Wait for the child; its stdout and stderr (text)."""
        self.wait(timeout)
        return self.out.read_text(), self.err.read_text()


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "warm":  # `python tests/forkserver.py warm GROUP...`: compile, exit
        _warm_kernels(tuple(sys.argv[2:]))
    else:
        serve(sys.argv[1] if len(sys.argv) > 1 else "cli")
