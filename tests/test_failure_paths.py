"""Failure paths (issue 11): damaged inputs, signals, a full disk, a bad mask, two runs on one
output, a diverging fit, a failure after the output was written. Each failure must end with one
line naming the file and saying what to do, exit code 1 (143 for SIGTERM), and nothing new left
in the output folder.

CLI tests run ``xdem`` in a real child process (signals are sent to it), forked by a fork server
(tests/forkserver.py) that has imported xdem once: each child is its own process (its signals,
threads, exit code) and ends with the interpreter's whole shutdown, as ``python -m xdem`` does;
only the seconds of imports per run are saved (no test here is about the start-up).
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from click.testing import CliRunner
from forkserver import Forked, ForkServer
from helpers import write_tif

import xdem
from xdem.cli import main
from xdem.coreg import NuthKaab, NuthKaabDeramp
from xdem.errors import ConvergenceError, ConvergenceWarning, InputError, OutputError, OverlapError, ReadError
from xdem.examples import example_pair, write_example_pair
from xdem.io import atomic
from xdem.io.cog import write_cog

# end-to-end (real CLI processes killed, signalled, run concurrently): `pytest -m "not slow"` skips them
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
#: Displacement of the bundled 400 m lidar DEM by more than half its width (see the divergence tests).
FAR = (-260.0, 120.0)


#: The module's fork server and a folder for its children's stdout and stderr (see :func:`forks`).
_FORKS: dict[str, Any] = {}


@pytest.fixture(scope="module", autouse=True)
def forks(fork_server_test_env: ForkServer, tmp_path_factory):
    """The fork server of the module's ``xdem`` runs, shared by the test process's modules
    (tests/conftest.py); its environment is the test's (BLAS threads included: the runs compute
    as a fresh ``python -m xdem`` would)."""
    _FORKS.update(server=fork_server_test_env, logs=tmp_path_factory.mktemp("fork-logs"), n=0)
    yield _FORKS["server"]
    _FORKS.pop("server")


def _child(args: list[str], *, script: Path | None = None) -> Forked:
    """A command running in a forked child, its stdout and stderr in the module's log folder."""
    _FORKS["n"] += 1
    return _FORKS["server"].popen(args, cwd=Path.cwd(), logs=_FORKS["logs"] / str(_FORKS["n"]), script=script,
                                  finalize=True)


def _xdem(*args: str) -> subprocess.CompletedProcess:
    child = _child(list(args))
    out, err = child.communicate(timeout=120)
    return subprocess.CompletedProcess(["xdem", *args], child.returncode, out, err)


def _popen(*args: str) -> Forked:
    """``xdem ARGS`` (``args`` starting with ``-m xdem``) or ``python SCRIPT ARGS``, not waited for;
    SIGINT raises KeyboardInterrupt in it, as in a fresh Python started with SIGINT's default."""
    if args[:2] == ("-m", "xdem"):
        return _child(list(args[2:]))
    return _child(list(args[1:]), script=Path(args[0]))


def _one_line_error(stderr: str, *needles: str) -> str:
    """The ``Error:`` line of ``stderr``: exactly one, no traceback, containing ``needles``."""
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, stderr
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


def _temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith((".xdem-tmp-", ".xdem-lock-")))


def _wait_for_temp(proc: Forked, folder: Path, *, name: str = "blocks.tif", pid: int | None = None,
                   timeout: float = 60) -> None:
    """Wait until a temp file ``*name`` (of process ``pid``, if given) is in ``folder``."""
    t0 = time.time()
    start = f".xdem-tmp-{pid}-" if pid is not None else ".xdem-tmp-"
    while not any(n.endswith(name) and n.startswith(start) for n in _temps(folder)):
        if proc.poll() is not None:
            raise AssertionError(f"child ended before writing: {proc.communicate()}")
        if time.time() - t0 > timeout:
            proc.kill()
            raise AssertionError("no temp file appeared")
        time.sleep(0.02)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return write_example_pair(tmp_path_factory.mktemp("pair"))


@pytest.fixture(scope="module")
def big_pair(tmp_path_factory):
    """3000 x 3000 smooth REF and TBA = REF + 1 (36 MB each): writing the aligned DEM takes seconds."""
    folder = tmp_path_factory.mktemp("big")
    n = 3000
    y, x = np.mgrid[0:n, 0:n].astype(np.float32)
    rng = np.random.default_rng(0)
    ref = (100 + 20 * np.sin(x / 150) * np.cos(y / 210) + 0.01 * x + rng.normal(0, 0.5, (n, n))).astype(np.float32)
    write_tif(folder / "ref.tif", ref, tiled=True, compress=None)
    write_tif(folder / "tba.tif", ref + 1, tiled=True, compress=None)
    return folder / "ref.tif", folder / "tba.tif"


def _big_coreg(big_pair, out: Path, *extra: str) -> Forked:
    ref, tba = big_pair
    return _popen("-m", "xdem", "coreg", str(ref), str(tba), "-o", str(out), "--method", "vshift", "-q",
                  "--no-stats", *extra)


def _signal_mid_write(big_pair, folder: Path, out: Path, sig: int, *extra: str,
                      phase: str = "blocks.tif") -> Forked:
    """Start a big coreg and deliver ``sig`` while it is verifiably mid-write: the child is
    stopped (SIGSTOP) once the phase's temp file appears, and the signal is sent only if that
    temp is still there and the output not yet in place, then the child continues. On a loaded
    machine the test process may notice the temp late, when the child has already finished:
    such a run proves nothing and is repeated (at most three times)."""
    for _ in range(3):
        proc = _big_coreg(big_pair, out, *extra)
        _wait_for_temp(proc, folder, name=phase)
        proc.send_signal(signal.SIGSTOP)
        mid = any(n.endswith(phase) for n in _temps(folder)) and not out.exists()
        if mid:
            proc.send_signal(sig)
        proc.send_signal(signal.SIGCONT)
        if mid:
            return proc
        proc.communicate(timeout=60)
        out.unlink(missing_ok=True)
    raise AssertionError(f"no run could be interrupted while writing ({phase})")


# ---------------------------------------------------------------------------- damaged inputs


def _damaged_tif(path: Path) -> Path:
    """A deflate-compressed tiled GeoTIFF with garbage in the middle of tile (row 1, column 2)."""
    data = (np.add.outer(np.arange(1024), np.arange(1024)) * 0.1).astype(np.float32)
    write_tif(path, data, tiled=True, blocksize=256, compress="deflate")
    with rasterio.open(path) as src:  # the tile's byte range, from the TIFF TileOffsets/TileByteCounts
        offset = int(src.get_tag_item("BLOCK_OFFSET_2_1", "TIFF", bidx=1))
        size = int(src.get_tag_item("BLOCK_SIZE_2_1", "TIFF", bidx=1))
    with open(path, "r+b") as fh:
        fh.seek(offset + size // 3)
        fh.write(b"\xff" * 64)
    return path


def test_damaged_tile_is_one_error_naming_file_and_tile(tmp_path):
    path = _damaged_tif(tmp_path / "rot.tif")
    dem = xdem.open_dem(path, chunks=512)  # metadata only: fine
    with pytest.raises(ReadError) as err:
        dem.sum().compute()
    msg = str(err.value)
    assert str(path) in msg and "tile column 2 row 1" in msg and "rows 0-511, columns 512-1023" in msg, msg
    assert "\n" not in msg and "See previous exception" not in msg
    assert float(dem[:256, :256].sum().compute()) > 0  # the other tiles still read


@pytest.mark.parametrize("scheduler", ["threads", "processes"])
def test_cli_damaged_tile(tmp_path, scheduler):
    """Also from a worker process: the error must survive pickling (no GDAL exception attached)."""
    path = _damaged_tif(tmp_path / "rot.tif")
    res = _xdem("coreg", str(path), str(path), "-o", str(tmp_path / "out.tif"), "--method", "vshift",
                "--scheduler", scheduler, *(["--workers", "1"] if scheduler == "processes" else []))
    assert res.returncode == 1
    _one_line_error(res.stderr, str(path), "tile column 2 row 1", "copy or download it again")
    assert not (tmp_path / "out.tif").exists() and _temps(tmp_path) == []


def _vrt(path: Path, source: Path, shape=(400, 400)) -> Path:
    with rasterio.open(source) as src:
        t = src.transform
    path.write_text(
        f'<VRTDataset rasterXSize="{shape[1]}" rasterYSize="{shape[0]}"><SRS>EPSG:32632</SRS>'
        f"<GeoTransform>{t.c}, {t.a}, 0, {t.f}, 0, {t.e}</GeoTransform>"
        '<VRTRasterBand dataType="Float32" band="1"><SimpleSource>'
        f'<SourceFilename relativeToVRT="0">{source}</SourceFilename><SourceBand>1</SourceBand>'
        "</SimpleSource></VRTRasterBand></VRTDataset>"
    )
    return path


def test_vrt_with_missing_source(tmp_path):
    src = write_tif(tmp_path / "part.tif", np.ones((400, 400), dtype=np.float32))
    vrt = _vrt(tmp_path / "mosaic.vrt", src)
    dem = xdem.open_dem(vrt)
    src.unlink()  # disappears after the open: the lazy read fails
    with pytest.raises(ReadError) as err:
        dem.sum().compute()
    assert str(vrt) in str(err.value) and str(src) in str(err.value) and "is missing" in str(err.value)
    with pytest.raises(ReadError) as err:  # missing when opened: refused at once
        xdem.open_dem(vrt)
    assert str(vrt) in str(err.value) and str(src) in str(err.value)


def test_cli_vrt_with_missing_source(tmp_path, pair):
    src = write_tif(tmp_path / "part.tif", np.ones((400, 400), dtype=np.float32))
    vrt = _vrt(tmp_path / "mosaic.vrt", src)
    src.unlink()
    res = _xdem("coreg", str(vrt), str(pair["tba"]), "-o", str(tmp_path / "out.tif"))
    assert res.returncode == 1
    _one_line_error(res.stderr, str(vrt), str(src))
    assert not (tmp_path / "out.tif").exists()


# ---------------------------------------------------------------------------- masks


def test_raster_mask_not_overlapping_names_the_mask(tmp_path, pair):
    with rasterio.open(pair["ref"]) as src:
        t, crs = src.transform, src.crs
    far = rasterio.Affine(t.a, 0, t.c + 100_000, 0, t.e, t.f)
    mask = write_tif(tmp_path / "stable.tif", np.ones((50, 50), dtype=np.uint8), transform=far, crs=crs)
    with pytest.raises(OverlapError, match="stable.tif"):
        NuthKaab().fit(pair["ref"], pair["tba"], inlier_mask=mask)
    res = _xdem("coreg", str(pair["ref"]), str(pair["tba"]), "-o", str(tmp_path / "o.tif"), "--inlier-mask", str(mask))
    assert res.returncode == 1
    line = _one_line_error(res.stderr, f"the inlier mask '{mask}' does not overlap REF")
    assert "the DEMs do not overlap" not in line


@pytest.mark.parametrize("name, content", [
    ("glaciers.gpkg", b"\x00garbage, not SQLite" * 50),
    ("glaciers.geojson", b'{"type": "FeatureCollection", "features": [{"type": "Feature", "geometry": {"type": "Pol'),
])
def test_corrupt_vector_mask_names_the_mask(tmp_path, pair, name, content):
    mask = tmp_path / name
    mask.write_bytes(content)
    with pytest.raises(InputError, match=name):
        NuthKaab().fit(pair["ref"], pair["tba"], exclude_mask=mask)
    res = _xdem("coreg", str(pair["ref"]), str(pair["tba"]), "-o", str(tmp_path / "o.tif"), "--exclude-mask", str(mask))
    assert res.returncode == 1
    _one_line_error(res.stderr, f"cannot read the vector mask '{mask}'")
    assert not (tmp_path / "o.tif").exists()


# ---------------------------------------------------------------------------- divergence


def test_far_shift_raises_with_initial_shift_hint():
    ref, tba, truth = example_pair(shift_x=FAR[0], shift_y=FAR[1])
    with pytest.raises(ConvergenceError, match=r"initial_shift=\(dx, dy\).*--initial-shift DX DY"):
        NuthKaab().fit(ref, tba)


@pytest.mark.parametrize("cls", [NuthKaab, NuthKaabDeramp])
def test_initial_shift_recovers_far_shift(cls):
    ref, tba, truth = example_pair(shift_x=FAR[0], shift_y=FAR[1])
    start = (truth["shift_x"] - 4.3, truth["shift_y"] + 3.1)  # a rough first estimate, 5 m off
    model = cls(initial_shift=start)
    aligned = model.fit(ref, tba).apply(tba)
    assert abs(model.shift_x_ - truth["shift_x"]) < 0.01 and abs(model.shift_y_ - truth["shift_y"]) < 0.01
    assert abs(model.shift_z_ - truth["shift_z"]) < 0.01 and model.converged_
    assert aligned.chunks is not None  # apply stays lazy
    assert model.get_params()["initial_shift"] == start


def test_initial_shift_takes_an_optional_dz():
    """Every affine method takes (dx, dy[, dz]); NuthKaab estimates dz at the end, so a given dz
    changes nothing."""
    ref, tba, truth = example_pair(shift_x=FAR[0], shift_y=FAR[1])
    start = (truth["shift_x"] - 4.3, truth["shift_y"] + 3.1)
    two = NuthKaab(initial_shift=start).fit(ref, tba)
    three = NuthKaab(initial_shift=(*start, 25.0)).fit(ref, tba)
    assert two.to_translations() == three.to_translations()


@pytest.mark.parametrize("cls, far", [(NuthKaab, (230.0, 0.0)), (NuthKaabDeramp, (-260.0, 120.0))])
def test_far_shift_that_stops_unconverged_is_an_error_too(cls, far):
    """Beyond half the DEM's width the estimate may wander without passing the divergence
    limit and stop at max_iterations still moving: an unusable result is an error as well
    (before: a ConvergenceWarning and exit 0 with a meaningless shift)."""
    ref, tba, _ = example_pair(shift_x=far[0], shift_y=far[1])
    with pytest.raises(ConvergenceError, match=r"(did not converge|diverged).*initial_shift=\(dx, dy\)"):
        cls().fit(ref, tba)
    with pytest.warns(ConvergenceWarning):
        model = cls(on_divergence="warn").fit(ref, tba)
    assert not model.converged_


def test_short_max_iterations_still_only_warns():
    """Stopping early with a small last step is a usable result: a warning, not an error."""
    ref, tba, _ = example_pair()
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        nk = NuthKaab(max_iterations=1).fit(ref, tba)
    assert not nk.converged_ and nk.shift_x_ != 0.0


def test_on_divergence_warn_accepts_partial_result():
    ref, tba, _ = example_pair(shift_x=FAR[0], shift_y=FAR[1])
    with pytest.warns(ConvergenceWarning, match="diverged"):
        nk = NuthKaab(on_divergence="warn").fit(ref, tba)
    assert (nk.shift_x_, nk.shift_y_) == (0.0, 0.0) and not nk.converged_


@pytest.mark.parametrize("kw", [{"initial_shift": (1.0,)}, {"initial_shift": "ab"}, {"initial_shift": (np.nan, 0)},
                                {"initial_shift": (1.0, 2.0, 3.0, 4.0)},
                                {"on_divergence": "ignore"}])
def test_divergence_params_validated_in_fit(kw):
    ref, tba, _ = example_pair()
    model = NuthKaab(**kw)  # stored only
    with pytest.raises(InputError):
        model.fit(ref, tba)


def test_cli_far_shift(tmp_path):
    files = write_example_pair(tmp_path / "far", shift_x=FAR[0], shift_y=FAR[1])
    truth = files["truth"]
    out = tmp_path / "out.tif"
    res = _xdem("coreg", str(files["ref"]), str(files["tba"]), "-o", str(out))  # a process: no traceback at all
    assert res.returncode == 1
    _one_line_error(res.stderr, "diverged", "--initial-shift DX DY", "--allow-divergence")
    assert not out.exists() and _temps(tmp_path) == []
    # the successful runs in this process (a process of its own adds 3 s of imports per run)
    res = CliRunner().invoke(main, ["coreg", str(files["ref"]), str(files["tba"]), "-o", str(out),
                                    "--initial-shift", "256", "-117", "--json", "-q"])
    assert res.exit_code == 0, res.stderr
    step = json.loads(res.stdout)["steps"][0]
    assert abs(step["shift_x"] + FAR[0]) < 0.01 and abs(step["shift_y"] + FAR[1]) < 0.01, (step, truth)
    res = CliRunner().invoke(main, ["coreg", str(files["ref"]), str(files["tba"]), "-o", str(tmp_path / "partial.tif"),
                                    "--allow-divergence", "-q"])
    assert res.exit_code == 0 and "Warning:" in res.stderr and "diverged" in res.stderr, res.stderr


# ---------------------------------------------------------------------------- the final move


def _output_appears_before_the_move(monkeypatch, out: Path, content: bytes) -> None:
    """Another run writes ``out`` after the checks, while this one validates its COG."""
    import xdem.io.cog as cog

    validate = cog._validate

    def other_run_finishes_first(tmp: str) -> None:
        out.write_bytes(content)
        validate(tmp)

    monkeypatch.setattr(cog, "_validate", other_run_finishes_first)


def test_output_created_meanwhile_is_not_replaced(tmp_path, monkeypatch, lidar_dem):
    out = tmp_path / "out.tif"
    _output_appears_before_the_move(monkeypatch, out, b"the other run's output")
    with pytest.raises(OutputError, match="created by another process"):
        write_cog(lidar_dem, out)
    assert out.read_bytes() == b"the other run's output" and _temps(tmp_path) == []


def test_no_replace_falls_back_to_renameat2(tmp_path, monkeypatch):
    def no_links(src, dst):
        raise OSError(errno.EPERM, "hard links not supported")

    monkeypatch.setattr(os, "link", no_links)
    (tmp_path / "a").write_text("new")
    (tmp_path / "taken").write_text("old")
    with pytest.raises(OutputError):
        atomic.move_into_place(tmp_path / "a", tmp_path / "taken", overwrite=False)
    assert (tmp_path / "taken").read_text() == "old"
    atomic.move_into_place(tmp_path / "a", tmp_path / "free", overwrite=False)
    assert (tmp_path / "free").read_text() == "new" and not (tmp_path / "a").exists()


def test_cli_second_run_on_same_output_exits_1(tmp_path, pair, monkeypatch):
    """The output appears between the checks and the final move (another run finished first)."""
    out = tmp_path / "out.tif"
    _output_appears_before_the_move(monkeypatch, out, b"first run")
    res = CliRunner().invoke(main, ["coreg", str(pair["ref"]), str(pair["tba"]), "-o", str(out), "--method", "vshift",
                                    "--json-out", str(tmp_path / "c.json")])
    assert res.exit_code == 1
    _one_line_error(res.stderr, str(out), "created by another process")
    assert out.read_bytes() == b"first run" and not (tmp_path / "c.json").exists() and _temps(tmp_path) == []


def test_cli_two_concurrent_runs(tmp_path, pair):
    """Two real runs on one -o: exactly one wins, the other exits 1 and the output is the winner's."""
    out = tmp_path / "out.tif"
    methods = ["vshift", "nuthkaab"]
    procs = [_popen("-m", "xdem", "coreg", str(pair["ref"]), str(pair["tba"]), "-o", str(out), "--method", m, "-q",
                    "--no-stats", "--json-out", str(tmp_path / f"{m}.json")) for m in methods]
    results = [(p.wait(timeout=120), p.communicate()[1]) for p in procs]
    assert sorted(code for code, _ in results) == [0, 1], results
    _one_line_error(next(err for code, err in results if code == 1), str(out))
    winner = methods[[code for code, _ in results].index(0)]
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".json"] == [f"{winner}.json"] and _temps(tmp_path) == []
    ref = xdem.open_dem(pair["ref"])
    with rasterio.open(out) as src:
        aligned = src.read(1, masked=True).filled(np.nan)
    shifted = winner == "nuthkaab"  # vshift keeps the 3 m horizontal offset: a large residual
    residual = float(np.nanmedian(np.abs(aligned - ref.values)))
    assert (residual < 0.1) == shifted, (winner, residual)


# ---------------------------------------------------------------------------- signals


@pytest.mark.parametrize("scheduler, phase", [("threads", "blocks.tif"), ("processes", "blocks.tif"),
                                              ("threads", "-out.tif")])
def test_sigterm_during_write_cleans_up_like_ctrl_c(tmp_path, big_pair, scheduler, phase):
    """SIGTERM in the block-writing pass (dask) or in GDAL's COG copy (handled when it returns)."""
    out = tmp_path / "out.tif"
    proc = _signal_mid_write(big_pair, tmp_path, out, signal.SIGTERM, "--scheduler", scheduler,
                             *(["--workers", "1"] if scheduler == "processes" else []), phase=phase)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    _one_line_error(stderr, "terminated by SIGTERM")
    assert list(tmp_path.iterdir()) == []


def test_sigint_during_write_cleans_up(tmp_path, big_pair):
    out = tmp_path / "out.tif"
    proc = _signal_mid_write(big_pair, tmp_path, out, signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGINT and list(tmp_path.iterdir()) == [], stderr
    _one_line_error(stderr, "interrupted by SIGINT (Ctrl-C)")


_WRITER = """
import sys, numpy as np, xarray as xr
import rioxarray  # noqa: F401
from xdem.io.cog import write_cog
n = 3000
a = np.random.default_rng(0).normal(size=(n, n)).astype("float32")
dem = xr.DataArray(a, dims=("y", "x"), coords={"y": np.arange(n)[::-1] + 0.5, "x": np.arange(n) + 0.5})
dem = dem.rio.write_crs("EPSG:32632").chunk(512)
write_cog(dem, sys.argv[1])
"""


def test_sigkill_temps_removed_by_a_later_write_never_those_of_a_live_writer(tmp_path, lidar_dem):
    script = tmp_path.parent / f"{tmp_path.name}-writer.py"
    script.write_text(_WRITER)
    live = _popen(str(script), str(tmp_path / "live.tif"))
    killed = _popen(str(script), str(tmp_path / "killed.tif"))
    try:
        _wait_for_temp(live, tmp_path, pid=live.pid)
        live.send_signal(signal.SIGSTOP)  # a live writer, paused so that it cannot finish meanwhile
        _wait_for_temp(killed, tmp_path, pid=killed.pid)
        killed.kill()  # SIGKILL: no clean-up at all
        killed.wait(timeout=30)
        dead = [n for n in _temps(tmp_path) if n.startswith(f".xdem-tmp-{killed.pid}-")]
        alive = [n for n in _temps(tmp_path) if n.startswith(f".xdem-tmp-{live.pid}-")]
        assert dead and alive and any(n.endswith("owner.lock") for n in dead)
        write_cog(lidar_dem, tmp_path / "later.tif")  # a later write in that folder
        left = _temps(tmp_path)
        assert not any(n.startswith(f".xdem-tmp-{killed.pid}-") for n in left), left
        assert any(n.startswith(f".xdem-tmp-{live.pid}-") for n in left), left  # never a live writer's
    finally:
        live.kill()
        live.wait(timeout=30)
        killed.kill()
        killed.wait(timeout=30)
    assert atomic.remove_stale_temps(tmp_path)  # the live writer is dead now too
    assert _temps(tmp_path) == []
    assert not (tmp_path / "killed.tif").exists() and not (tmp_path / "live.tif").exists()


def test_temps_without_owner_lock_are_removed_only_when_old_and_dead(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".xdem-tmp-{dead.pid}-{'a' * 32}-out.json"
    fresh = tmp_path / f".xdem-tmp-{dead.pid}-{'b' * 32}-out.json"
    mine = tmp_path / f".xdem-tmp-{os.getpid()}-{'c' * 32}-out.json"
    for p in (stale, fresh, mine):
        p.write_text("{}")
    old = time.time() - 2 * 3600
    os.utime(stale, (old, old))
    os.utime(mine, (old, old))
    atomic.remove_stale_temps(tmp_path)
    assert not stale.exists() and fresh.exists() and mine.exists()


# ---------------------------------------------------------------------------- disk full


def test_disk_full_during_cog_copy_is_one_error(tmp_path, monkeypatch, lidar_dem):
    """GDAL's COG copy fails with ENOSPC (injected; rasterio raises CPLE errors or OSError)."""
    import xdem.io.cog as cog

    def full(tmp, out, **kw):
        Path(out).write_bytes(b"partial COG")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cog, "_copy_to_cog", full)
    with pytest.raises(OutputError, match=r"no space left .* MB are needed .* MB were free") as err:
        write_cog(lidar_dem, tmp_path / "out.tif")
    assert "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []


def _mount_tmpfs(folder: Path, size: str) -> bool:
    folder.mkdir()
    if sys.platform != "linux" or os.geteuid() != 0:
        return False
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    return res.returncode == 0


def test_disk_full_real_tmpfs(tmp_path, big_pair):
    """A real full disk: a 60 MB tmpfs holds the 36 MB temporary GTiff but not the COG as well.

    Needs root (CI runs as root). Where mounting is impossible the same CLI run goes to a
    normal folder and must succeed: the fallback path is asserted instead of skipping."""
    small = tmp_path / "small"
    mounted = _mount_tmpfs(small, "60m")
    try:
        ref, tba = big_pair
        rng = np.random.default_rng(1)  # incompressible data: the COG is as large as the raw DEM
        noisy = tmp_path / "noisy.tif"
        write_tif(noisy, rng.normal(size=(3000, 3000)).astype(np.float32), tiled=True, compress=None)
        out = small / "out.tif"
        res = _xdem("coreg", str(noisy), str(noisy.with_name("noisy.tif")), "-o", str(out), "--method", "vshift",
                    "-q", "--no-stats", "--json-out", str(small / "c.json"))
        if mounted:
            assert res.returncode == 1, res.stderr
            _one_line_error(res.stderr, "no space left", str(small), "MB are needed")
            assert list(small.iterdir()) == []
        else:
            assert res.returncode == 0, res.stderr
            assert out.exists() and _temps(small) == []
    finally:
        if mounted:
            subprocess.run(["umount", str(small)], check=True)


# ---------------------------------------------------------------------------- exit 1 after the output was written


def _fail_stats(monkeypatch):
    from xdem.errors import NotEnoughDataError
    from xdem.workflows import _summary  # where the statistics stage of the run finds dh_stats

    def boom(*args, **kwargs):
        raise NotEnoughDataError("no stable pixel left for the statistics (injected)")

    monkeypatch.setattr(_summary, "dh_stats", boom)


def test_failure_after_write_removes_the_new_output(tmp_path, pair, monkeypatch):
    _fail_stats(monkeypatch)
    out = tmp_path / "out.tif"
    res = CliRunner().invoke(main, ["coreg", str(pair["ref"]), str(pair["tba"]), "-o", str(out), "--exact-stats"])
    assert res.exit_code == 1
    _one_line_error(res.stderr, "injected")
    assert list(tmp_path.iterdir()) == []


def test_failure_after_write_with_overwrite_restores_the_previous_output(tmp_path, pair, monkeypatch):
    out = tmp_path / "out.tif"
    out.write_bytes(b"previous result")
    _fail_stats(monkeypatch)
    res = CliRunner().invoke(main, ["coreg", str(pair["ref"]), str(pair["tba"]), "-o", str(out), "--exact-stats",
                                    "--overwrite"])
    assert res.exit_code == 1
    assert out.read_bytes() == b"previous result" and [p.name for p in tmp_path.iterdir()] == ["out.tif"]


def test_json_folder_gone_after_write_exits_1_and_leaves_nothing(tmp_path, big_pair):
    """A real failure after the output is in place: the --json-out folder disappears during the run."""
    out_dir, json_dir = tmp_path / "out", tmp_path / "json"
    out_dir.mkdir()
    json_dir.mkdir()
    proc = _big_coreg(big_pair, out_dir / "out.tif", "--json-out", str(json_dir / "c.json"))
    _wait_for_temp(proc, out_dir)  # the checks are done: the write has begun
    json_dir.rmdir()
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1
    _one_line_error(stderr, str(json_dir / "c.json"))
    assert list(out_dir.iterdir()) == []


def test_successful_run_keeps_outputs_and_no_backup(tmp_path, pair):
    out = tmp_path / "out.tif"
    out.write_bytes(b"old")
    res = CliRunner().invoke(main, ["coreg", str(pair["ref"]), str(pair["tba"]), "-o", str(out), "--overwrite",
                                    "--method", "vshift", "--json-out", str(tmp_path / "c.json"), "-q"])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json", "out.tif"] and out.read_bytes() != b"old"


def test_without_locks_stale_temps_fall_back_on_pid_and_age(tmp_path, monkeypatch):
    monkeypatch.setattr(atomic, "_flock", lambda fd, block: None)  # e.g. NFS without flock
    with atomic.owned_temps(tmp_path) as prefix:
        Path(prefix + "blocks.tif").write_bytes(b"x")
        assert atomic.remove_stale_temps(tmp_path) == []  # our own pid is alive
    assert _temps(tmp_path) == []


def test_damaged_input_on_a_nearly_full_disk_is_not_a_disk_error(tmp_path, monkeypatch):
    import shutil
    from collections import namedtuple

    import xdem.io.cog as cog

    dem = xdem.open_dem(_damaged_tif(tmp_path / "rot.tif"))
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(cog.shutil, "disk_usage", lambda p: usage(10**9, 10**9 - 1000, 1000))
    with pytest.raises(ReadError, match="rot.tif"):
        write_cog(dem, tmp_path / "out.tif")
    monkeypatch.setattr(cog.shutil, "disk_usage", shutil.disk_usage)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rot.tif"]
