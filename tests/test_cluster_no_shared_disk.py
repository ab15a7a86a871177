"""A dask.distributed cluster whose workers share no disk with the client: no worker task writes
a file, the outputs equal the threaded scheduler's bit for bit, and SIGTERM during the block
pass cancels the work and leaves nothing behind.

The cluster (a scheduler and two ``distributed.Nanny`` workers, started here) gives each worker
its own ``local_directory``, its own ``TMPDIR`` and its own working directory. A worker plugin
installs an audit hook (:func:`sys.addaudithook`) in each worker process that records every
``open`` with a write mode or write flags and every rename, replace, remove, mkdir, rmdir,
and wraps ``rasterio.open`` to record every mode but ``"r"``; GDAL writes in C, so the test also
compares the files under the input and output folders and under every worker folder before
and after.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import dask
import numpy as np
import pytest
import rasterio
from click.testing import CliRunner
from forkserver import ForkServer

import xdem
from xdem.cli import main
from xdem.examples import write_example_pair
from xdem.io.cog import BlockStats, write_cog

# end-to-end (a real cluster of worker processes): `pytest -m 'not slow'` leaves them out
pytestmark = pytest.mark.slow

distributed = pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[1]
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_PATH_EVENTS = {"os.rename", "os.replace", "os.remove", "os.rmdir", "os.mkdir", "os.truncate", "os.link",
                "os.symlink", "shutil.rmtree", "shutil.move", "shutil.copyfile"}


class WriteAudit(distributed.WorkerPlugin):
    """In each worker process: cwd = its own folder; record every write-like file operation."""

    name = "xdem-write-audit"

    def setup(self, worker) -> None:  # noqa: ANN001 - distributed's signature
        import rasterio as rio

        os.chdir(worker.local_directory)
        records: list[tuple[str, str]] = []
        worker._xdem_writes = records

        def hook(event: str, args: tuple) -> None:
            if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
                mode, flags = (args[1] if len(args) > 1 else None), (args[2] if len(args) > 2 else 0)
                if (isinstance(mode, str) and set(mode) & set("wax+")) or (isinstance(flags, int) and flags & _WRITE_FLAGS):
                    records.append((event, os.fsdecode(args[0])))
            elif event in _PATH_EVENTS:
                records.extend((event, os.fsdecode(a)) for a in args[:2] if isinstance(a, (str, bytes, os.PathLike)))

        sys.addaudithook(hook)
        real_open = rio.open

        def spy_open(fp, mode="r", *a, **k):  # noqa: ANN001, ANN202 - rasterio's signature
            if mode != "r":
                records.append((f"rasterio.open:{mode}", str(fp)))
            return real_open(fp, mode, *a, **k)

        # pickled by reference as the real one (tasks carry readers holding rasterio.open)
        spy_open.__module__, spy_open.__qualname__ = real_open.__module__, real_open.__qualname__
        rio.open = spy_open


def _writes(dask_worker) -> list[tuple[str, str]]:  # noqa: ANN001 - client.run passes the worker
    return list(getattr(dask_worker, "_xdem_writes", []))


def _files(*folders: Path) -> set[str]:
    return {str(p) for f in folders for p in f.rglob("*") if p.is_file()}


def _warm_numba_cache(folder: Path) -> str:
    """Fill ``folder``, a worker's own ``NUMBA_CACHE_DIR``, with the compiled kernels this process's
    numba cache holds (as on a machine that ran xdem before), and return it.

    Each worker would otherwise compile every kernel it runs (about 15 s of CPU a worker; the
    suite's warm-up, tests/conftest.py, has already compiled them). What a worker still compiles,
    numba writes there, in the worker's own folder, as before."""
    kernels = ROOT / "xdem" / "kernels"
    # numba's layout of a NUMBA_CACHE_DIR (numba.core.caching._CacheLocator.get_suitable_cache_subpath)
    subpath = f"{kernels.name}_{hashlib.sha1(str(kernels).encode()).hexdigest()}"
    own = os.environ.get("NUMBA_CACHE_DIR")
    source = Path(own) / subpath if own else kernels / "__pycache__"
    (folder / subpath).mkdir(parents=True)
    for path in source.glob("*.nb[ic]"):
        shutil.copy2(path, folder / subpath / path.name)
    return str(folder)


@contextlib.contextmanager
def own_folder_cluster(base: Path) -> Iterator[tuple]:
    """A scheduler and two single-threaded ``Nanny`` workers, each with its own
    ``local_directory``, ``TMPDIR`` and (through :class:`WriteAudit`) working directory under
    ``base``, the audit installed: yields ``(cluster, client, [(local, tmp) per worker])``. The
    workers inherit ``os.environ`` as it is now (e.g. a test S3 server's variables)."""
    import warnings

    folders = []
    workers = {}
    for i in range(2):
        local, tmp = base / f"w{i}-local", base / f"w{i}-tmp"
        local.mkdir(), tmp.mkdir()
        folders.append((local, tmp))
        # NUMBA_CACHE_DIR: numba's on-disk kernel cache, a per-machine cache of the worker's own
        env = {"TMPDIR": str(tmp), "NUMBA_CACHE_DIR": _warm_numba_cache(local / "numba"), "PYTHONPATH": str(ROOT)}
        workers[f"w{i}"] = {"cls": distributed.Nanny, "options": {
            "nthreads": 1, "local_directory": str(local), "env": env, "silence_logs": 40}}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Port .* is already in use")
        spec = distributed.SpecCluster(workers=workers, silence_logs=40,
                                       scheduler={"cls": distributed.Scheduler, "options": {"dashboard": False}})
    with spec, distributed.Client(spec, set_as_default=False) as client:
        client.wait_for_workers(2)
        client.register_plugin(WriteAudit())
        yield spec, client, folders


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with own_folder_cluster(tmp_path_factory.mktemp("workers")) as running:
        yield running


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return write_example_pair(tmp_path_factory.mktemp("nsd-pair"))


def _read(path) -> np.ndarray:
    with rasterio.open(path) as src:
        return src.read(1)


def _worker_writes(client, folders) -> list[tuple[str, str, str]]:
    """What the workers wrote outside their own local_directory (the folder given to each)."""
    bad = []
    for name, records in client.run(lambda dask_worker: (dask_worker.name, _writes(dask_worker))).values():
        own = os.path.realpath(folders[int(str(name)[1:])][0]) + os.sep
        bad.extend((name, ev, p) for ev, p in records if not os.path.realpath(p).startswith(own))
    return bad


def _worker_tmp_files(folders) -> set[str]:
    return _files(*[tmp for _, tmp in folders])


def _sum_block(block: np.ndarray, *, row0: int, col0: int) -> tuple[int, int, float]:
    return row0, col0, float(np.nansum(block, dtype=np.float64))


def test_write_cog_workers_write_no_file(cluster, pair, tmp_path):
    spec, client, folders = cluster
    dem = xdem.open_dem(str(pair["ref"]), chunks=96)
    stats = BlockStats(_sum_block)
    with dask.config.set(scheduler="threads"):
        want = write_cog(dem * 2 - 1, tmp_path / "threads.tif", also=[stats])
    before_inputs = _files(pair["ref"].parent)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    with dask.config.set(scheduler=client):
        got = write_cog(dem * 2 - 1, out_dir / "cluster.tif", also=[stats])
    np.testing.assert_array_equal(_read(got), _read(want))
    assert got.also == want.also and len(got.also[0]) == 25  # 5 x 5 blocks: per-block results, row-major, from the tasks
    assert _files(out_dir) == {str(out_dir / "cluster.tif")}
    assert _files(pair["ref"].parent) == before_inputs
    assert _worker_tmp_files(folders) == set()
    assert _worker_writes(client, folders) == []
    assert "block_result" in spec.scheduler.task_prefixes  # the workers computed the blocks


def test_cli_coreg_with_tcp_scheduler_workers_write_no_file(cluster, pair, tmp_path):
    spec, client, folders = cluster
    args = [str(pair["ref"]), str(pair["tba"]), "--method", "nuthkaab+vshift", "--random-state", "7", "--json"]

    def run(folder: Path, scheduler: str) -> tuple[dict, str]:
        folder.mkdir()
        res = CliRunner().invoke(main, ["coreg", *args, "-o", str(folder / "aligned.tif"), "--dh-out",
                                        str(folder / "dh.tif"), "--stable-mask-out", str(folder / "stable.tif"),
                                        "--scheduler", scheduler])
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout), res.stderr

    local, _ = run(tmp_path / "threads", "threads")
    transitions = spec.scheduler.transition_counter
    doc, err = run(tmp_path / "cluster", spec.scheduler_address)
    counts = re.findall(r"^blocks written: (\d+)/(\d+)$", err, re.M)  # the progress: a line per tenth (not a tty)
    assert counts and counts[-1][0] == counts[-1][1] and len(counts) <= 10
    assert doc["workers"] == 2 and spec.scheduler.transition_counter > transitions + 100  # ran on the cluster
    for name in ("aligned.tif", "dh.tif", "stable.tif"):
        np.testing.assert_array_equal(_read(tmp_path / "cluster" / name), _read(tmp_path / "threads" / name), name)
    assert doc["steps"] == local["steps"] and doc["stats"] == local["stats"]
    assert _files(tmp_path / "cluster") == {str(tmp_path / "cluster" / n) for n in ("aligned.tif", "dh.tif", "stable.tif")}
    assert _worker_tmp_files(folders) == set()
    assert _worker_writes(client, folders) == []


def test_sigterm_in_block_pass_cancels_and_cleans(cluster, pair, tmp_path, tmp_path_factory,
                                                  fork_server_test_env: ForkServer):
    spec, client, folders = cluster
    out = tmp_path / "aligned.tif"
    # a real process of its own (SIGINT's default, as a fresh Python), forked by the test process's fork
    # server (tests/conftest.py) with this test's environment, without a fresh process's 3 s of imports
    proc = fork_server_test_env.popen(["coreg", str(pair["ref"]), str(pair["tba"]), "-o", str(out), "--chunks", "64",
                                       "--scheduler", spec.scheduler_address, "--quiet"], cwd=tmp_path,
                                      logs=tmp_path_factory.mktemp("sigterm-logs") / "coreg",
                                      env={**os.environ, "XDEM_TEST_PAUSE_AT": "blocks:3"})
    t0 = time.monotonic()
    while proc.state() != "T":  # the child stopped itself after its 3rd block written
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < 180, "the child never reached its moment"
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGTERM)
    os.kill(proc.pid, signal.SIGCONT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert os.listdir(tmp_path) == []  # no output, no temp GTiff
    t0 = time.monotonic()
    def busy() -> dict:  # tasks still computing, waiting or held in memory ("released" ones hold nothing)
        return {k: ts.state for k, ts in spec.scheduler.tasks.items() if ts.state != "released"}

    while busy() and time.monotonic() - t0 < 30:  # the futures were cancelled: the cluster idles
        time.sleep(0.1)
    assert not busy()
    assert _worker_writes(client, folders) == []


# ---------------------------------------------------------------------------- workers that cannot see the client's folder

_HIDE = 'mount -t tmpfs xdem-hidden "$1" && shift && exec "$@"'


def _can_hide(folder: Path) -> bool:
    """Whether a process can be given its own mount namespace with an empty tmpfs over ``folder``."""
    try:
        return subprocess.run(["unshare", "-m", "sh", "-c", _HIDE, "sh", str(folder), "true"],
                              capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="module")
def blind(tmp_path_factory):
    """A scheduler and two worker processes, each in its own mount namespace where the client's
    output folder is an empty tmpfs: truly no disk shared for the outputs (inputs stay visible)."""
    hidden = tmp_path_factory.mktemp("client-only")
    if not _can_hide(hidden):
        pytest.skip("needs `unshare -m` and tmpfs mounts (root or user namespaces)")
    base = tmp_path_factory.mktemp("blind-workers")
    with distributed.LocalCluster(n_workers=0, dashboard_address=None, silence_logs=40) as lc:
        procs = []
        for i in range(2):
            local = base / f"b{i}"
            local.mkdir()
            env = {**os.environ, "TMPDIR": str(local), "NUMBA_CACHE_DIR": _warm_numba_cache(local / "numba"),
                   "PYTHONPATH": str(ROOT)}
            procs.append(subprocess.Popen(
                ["unshare", "-m", "sh", "-c", _HIDE, "sh", str(hidden), sys.executable, "-m", "distributed.cli.dask_worker",
                 lc.scheduler_address, "--nthreads", "1", "--no-nanny", "--name", f"b{i}", "--local-directory", str(local)],
                env=env, cwd=local, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        try:
            with distributed.Client(lc, set_as_default=False) as client:
                client.wait_for_workers(2, timeout=120)
                yield client, hidden
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(timeout=30)


def test_blind_workers_write_cog_equals_threads(blind, pair):
    client, hidden = blind
    dem = xdem.open_dem(str(pair["tba"]), chunks=96)
    (hidden / "witness.txt").write_text("the client sees this file")
    assert list(client.run(os.listdir, str(hidden)).values()) == [[], []]  # the workers see an empty folder
    with dask.config.set(scheduler="threads"):
        want = _read(write_cog(dem - 3, hidden / "threads.tif"))
    with dask.config.set(scheduler=client):
        got = write_cog(dem - 3, hidden / "cluster.tif")
    np.testing.assert_array_equal(_read(got), want)
    assert sorted(os.listdir(hidden)) == ["cluster.tif", "threads.tif", "witness.txt"]


def test_blind_workers_local_zarr_is_one_line(blind, pair):
    client, hidden = blind
    dem = xdem.open_dem(str(pair["tba"]), chunks=96)
    before = sorted(os.listdir(hidden))
    with dask.config.set(scheduler=client), pytest.raises(xdem.errors.OutputError) as err:
        xdem.write_zarr(dem, hidden / "out.zarr")
    text = str(err.value)
    assert "\n" not in text and "2 of the 2 dask workers" in text and str(hidden) in text and "s3://" in text
    assert sorted(os.listdir(hidden)) == before  # no store, no probe left
