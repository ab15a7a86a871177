"""Tests of Zarr DEM stores: xdem.write_zarr, open_dem("*.zarr"), resume, CLI convert/info/coreg."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import rasterio
import xarray as xr
from affine import Affine
from click.testing import CliRunner
from forkserver import ForkServer
from helpers import MaxResult, count_computes, write_tif

import xdem
from xdem.cli import main
from xdem.errors import CRSError, InputError, OutputError
from xdem.io import zarr_store as zs
from xdem.io.zarr import write_zarr

ROOT = Path(__file__).resolve().parents[2]
CRS = "EPSG:32633"
T = Affine(2.0, 0, 500000.0, 0, -2.0, 5200000.0)


def _dem(data: np.ndarray, *, chunks: int | tuple[int, int] = 64, transform: Affine = T) -> xr.DataArray:
    ny, nx = data.shape
    x = transform.c + (np.arange(nx) + 0.5) * transform.a
    y = transform.f + (np.arange(ny) + 0.5) * transform.e
    out = xr.DataArray(da.from_array(data, chunks=chunks), dims=("y", "x"), coords={"y": y, "x": x})
    return out.rio.write_crs(CRS).rio.write_transform(transform)


def _holes(shape: tuple[int, int], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    z = (rng.normal(size=shape) * 50 + 800).astype(np.float32)
    z[rng.random(shape) < 0.05] = np.nan
    z[10:80, 20:150] = np.nan  # whole chunks of nodata (not stored: all fill)
    return z


def _objects(store: Path) -> dict[str, bytes]:
    """Every chunk object of a store, by key: what 'bit for bit' compares."""
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*"))
            if p.is_file() and "/c/" in str(p.relative_to(store)) and zs.BOOK not in p.parts}


# ---------------------------------------------------------------------------- round trip


def test_roundtrip_values_georef_nodata_chunks(tmp_path: Path) -> None:
    z = _holes((300, 250))  # not a multiple of the store chunks: partial edge chunks
    dem = _dem(z, chunks=(70, 90))
    result = write_zarr(dem, tmp_path / "dem.zarr", chunks=(64, 96))
    assert result.written == 5 * 3 and result.kept == 0
    opened = xdem.open_dem(result.path)
    np.testing.assert_array_equal(opened.values, z)  # NaN where NaN, exact elsewhere
    assert opened.rio.crs == CRS and opened.rio.transform() == T
    assert all(c % 64 == 0 for c in opened.chunks[0][:-1]) and all(c % 96 == 0 for c in opened.chunks[1][:-1])
    assert xdem.open_dem(result.path, chunks=64).chunks[0][0] == 64
    raw = xr.open_zarr(result.path, mask_and_scale=False)["dem"]  # the variable is always "dem"
    assert raw.encoding["chunks"] == (64, 96)
    assert float(raw.attrs["_FillValue"]) == -9999.0  # nodata as the CF _FillValue
    assert int((raw.values == -9999.0).sum()) == int(np.isnan(z).sum())
    assert (tmp_path / "dem.zarr" / zs.BOOK / zs.COMPLETE).is_file()


def test_xarray_and_rioxarray_read_the_store_without_xdem(tmp_path: Path) -> None:
    z = _holes((200, 160))
    path = write_zarr(_dem(z), tmp_path / "plain.zarr").path
    code = (
        "import sys, warnings, json, numpy as np, xarray as xr, rioxarray\n"
        "warnings.filterwarnings('error', message='.*onsolidated.*')\n"  # consolidated: no fallback warning
        "warnings.filterwarnings('error', message='.*not recognized as a component.*')\n"  # .xdem/ is not listed
        f"ds = xr.open_zarr({str(path)!r})\n"
        "a = ds['dem']\n"
        "assert 'xdem' not in sys.modules\n"
        "print(json.dumps({'crs': str(ds.rio.crs), 'var_crs': str(a.rio.crs), 't': list(a.rio.transform())[:6],"
        " 'nodata': float(a.rio.encoded_nodata), 'nan': int(np.isnan(a.values).sum()), 'sum': float(np.nansum(a.values))}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["crs"] == got["var_crs"] == CRS
    assert got["t"] == list(T)[:6]
    assert got["nodata"] == -9999.0 and got["nan"] == int(np.isnan(z).sum())
    assert got["sum"] == pytest.approx(float(np.nansum(z.astype(np.float64))), rel=1e-6)


def test_store_written_by_xarray_alone_is_opened(tmp_path: Path) -> None:
    z = _holes((128, 128))
    arr = _dem(z).rename("height").rio.write_nodata(np.nan, encoded=False)
    arr.to_dataset().to_zarr(tmp_path / "foreign.zarr", zarr_format=3, consolidated=False)
    opened = xdem.open_dem(tmp_path / "foreign.zarr")
    np.testing.assert_array_equal(opened.values, z)
    assert opened.rio.crs == CRS


def test_write_is_one_compute_bounded_by_a_chunk(tmp_path: Path) -> None:
    dem = _dem(_holes((256, 256)), chunks=64)
    with count_computes() as c, MaxResult() as m, dask.config.set(scheduler="threads"):
        write_zarr(dem * 2, tmp_path / "x.zarr")
    assert c.count == 1
    assert m.max_2d_bytes <= 64 * 64 * 4  # no task result larger than one chunk


def test_gdal_block_cache_is_bounded_while_the_chunks_are_read(tmp_path: Path) -> None:
    """The chunks of a file-backed DEM are read by GDAL in the writing process: its block cache is
    bounded during the compute (GDAL's default, 5 % of the RAM, made the peak RSS of a 20000^2 write
    1.7 GiB against 0.5 GiB bounded; benchmarks/bench_zarr.py)."""
    from rasterio._env import get_gdal_config

    from xdem.io.cog import GDAL_CACHE_BYTES

    seen: list[int] = []

    def record(block: np.ndarray) -> np.ndarray:
        if block.size:  # not dask's call on an empty array to infer the output type
            seen.append(int(get_gdal_config("GDAL_CACHEMAX")))
        return block

    dem = _dem(_holes((128, 128)), chunks=64)
    write_zarr(dem.copy(data=dem.data.map_blocks(record, dtype=dem.dtype)), tmp_path / "x.zarr")
    assert seen and set(seen) == {GDAL_CACHE_BYTES}  # bytes, as GDAL gives it back: megabytes


# ---------------------------------------------------------------------------- resume


def test_resume_writes_only_missing_or_damaged_chunks_and_equals_a_clean_write(tmp_path: Path) -> None:
    dem = _dem(_holes((320, 320)), chunks=64) + 1
    clean = write_zarr(dem, tmp_path / "clean.zarr").path
    part = write_zarr(dem, tmp_path / "part.zarr").path
    # simulate a writer killed mid-way: no completion marker, some records missing, one
    # chunk half-written after its record, one chunk written but not yet recorded
    (part / zs.BOOK / zs.COMPLETE).unlink()
    for key in [(0, 0), (2, 3), (4, 4)]:
        zs.record_path(part, *key).unlink()
    obj = zs.chunk_object(part, "dem", 1, 1)
    obj.write_bytes(obj.read_bytes()[:50])
    # zarr's temporary file of a chunk write cut short (a SIGKILL between write and rename)
    obj.with_name(obj.name + ".0123abcd.partial").write_bytes(b"half a chunk")
    assert zs.store_status(part) == "incomplete"
    with pytest.raises(InputError, match="incomplete"):
        xdem.open_dem(part)
    assert xdem.open_dem(part, allow_incomplete=True).shape == (320, 320)
    result = write_zarr(dem, part, resume=True)
    assert (result.written, result.kept) == (4, 21)
    assert _objects(part) == _objects(clean)
    np.testing.assert_array_equal(xdem.open_dem(part).values, xdem.open_dem(clean).values)
    assert write_zarr(dem, part, resume=True).written == 0  # complete: nothing to do


def test_resume_refuses_a_different_computation(tmp_path: Path) -> None:
    dem = _dem(_holes((128, 128)), chunks=64)
    path = write_zarr(dem + 1, tmp_path / "s.zarr").path
    (path / zs.BOOK / zs.COMPLETE).unlink()
    with pytest.raises(OutputError, match="different computation.*dask_token"):
        write_zarr(dem + 2, path, resume=True)
    with pytest.raises(OutputError, match="different computation.*extra"):
        write_zarr(dem + 1, path, resume=True, fingerprint={"coreg": "another fit"})
    result = write_zarr(dem + 2, path, resume=True, overwrite=True)  # start again
    assert result.written == 4
    np.testing.assert_array_equal(xdem.open_dem(path).values, (dem + 2).values)


def test_resume_of_a_store_killed_while_being_created(tmp_path: Path) -> None:
    dem = _dem(_holes((128, 128)), chunks=64)
    clean = write_zarr(dem, tmp_path / "clean.zarr").path
    path = write_zarr(dem, tmp_path / "s.zarr").path
    for f in [path / "zarr.json", path / "dem" / "zarr.json", path / zs.BOOK / zs.COMPLETE]:
        f.unlink()  # killed after its fingerprint, before its metadata was complete
    for f in (path / zs.BOOK / "done").iterdir():
        f.unlink()
    assert write_zarr(dem, path, resume=True).written == 4
    assert _objects(path) == _objects(clean)


def test_second_writer_of_the_same_store_is_refused(tmp_path: Path) -> None:
    dem = _dem(_holes((128, 128)), chunks=64)
    path = write_zarr(dem, tmp_path / "s.zarr").path
    (path / zs.BOOK / zs.COMPLETE).unlink()
    with zs.writer_lock(path), pytest.raises(OutputError, match="another process"):
        write_zarr(dem, path, resume=True)


# ---------------------------------------------------------------------------- bad inputs and outputs


def test_bad_stores_are_refused(tmp_path: Path) -> None:
    folder = tmp_path / "notastore.zarr"
    folder.mkdir()
    (folder / "readme.txt").write_text("hello")
    with pytest.raises(InputError, match="not a Zarr store"):
        xdem.open_dem(folder)
    with pytest.raises(OutputError, match="never"):  # overwrite never deletes a folder that is not a store
        write_zarr(_dem(_holes((64, 64))), folder, overwrite=True)
    assert (folder / "readme.txt").exists()
    with pytest.raises(InputError, match="not found"):
        xdem.open_dem(tmp_path / "missing.zarr")
    no_crs = xr.DataArray(np.ones((32, 32), np.float32), dims=("y", "x"),
                          coords={"y": np.arange(32.0), "x": np.arange(32.0)}, name="z")
    no_crs.to_dataset().to_zarr(tmp_path / "nocrs.zarr", zarr_format=3, consolidated=False)
    with pytest.raises(CRSError, match="no CRS"):
        xdem.open_dem(tmp_path / "nocrs.zarr")
    two = _dem(_holes((32, 32))).rename("a").to_dataset()
    two["b"] = two["a"] + 1
    two.to_zarr(tmp_path / "two.zarr", zarr_format=3, consolidated=False)
    with pytest.raises(InputError, match="exactly one 2-D variable"):
        xdem.open_dem(tmp_path / "two.zarr")


def test_existing_store_and_inputs_are_protected(tmp_path: Path) -> None:
    dem = _dem(_holes((128, 128)), chunks=64)
    path = write_zarr(dem, tmp_path / "s.zarr").path
    with pytest.raises(OutputError, match="already exists"):
        write_zarr(dem, path)
    opened = xdem.open_dem(path)
    with pytest.raises(OutputError, match="inputs"):  # never onto its own input, even with overwrite
        write_zarr(opened + 1, path, overwrite=True)
    (tmp_path / "sub").mkdir()
    tif = write_tif(tmp_path / "sub" / "dem.tif", np.ones((32, 32), np.float32), crs=CRS)
    with pytest.raises(OutputError, match="inputs"):  # nor onto a folder holding an input
        write_zarr(xdem.open_dem(tif), tmp_path / "sub", overwrite=True)
    assert (tmp_path / "sub" / "dem.tif").exists()
    result = write_zarr(dem * 3, path, overwrite=True)
    np.testing.assert_array_equal(xdem.open_dem(result.path).values, (dem * 3).values)
    with pytest.raises(InputError, match="compressor"):
        write_zarr(dem, tmp_path / "c.zarr", compressor="snappy")
    with pytest.raises(InputError, match="chunks"):
        write_zarr(dem, tmp_path / "c.zarr", chunks=8)


@pytest.mark.parametrize("compressor", ["blosc", "gzip", "none"])
def test_compressors_round_trip(tmp_path: Path, compressor: str) -> None:
    z = _holes((100, 100))
    path = write_zarr(_dem(z), tmp_path / "c.zarr", compressor=compressor).path
    np.testing.assert_array_equal(xdem.open_dem(path).values, z)


# ---------------------------------------------------------------------------- distributed


def test_two_worker_local_cluster_write_equals_threaded(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    import warnings

    src = write_tif(tmp_path / "src.tif", _holes((256, 192)), crs=CRS, transform=T, tiled=True, blocksize=64)
    with dask.config.set(scheduler="threads"):
        threaded = write_zarr(xdem.open_dem(src, chunks=64) * 2, tmp_path / "threads.zarr").path
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Port .* is already in use")
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=None, silence_logs=40)
    with cluster, distributed.Client(cluster) as client:
        result = write_zarr(xdem.open_dem(src, chunks=64) * 2, tmp_path / "cluster.zarr")
        prefixes = set(cluster.scheduler.task_prefixes)
        writers = client.run(os.getpid)
    assert "write_chunk" in prefixes and len(writers) == 2  # the chunks were written by the workers
    assert result.written == 12
    assert _objects(threaded) == _objects(result.path)


# ---------------------------------------------------------------------------- CLI


def test_cli_convert_and_info(tmp_path: Path) -> None:
    z = _holes((200, 130))
    src = write_tif(tmp_path / "src.tif", z, crs=CRS, transform=T, nodata=-9999.0)
    runner = CliRunner()
    res = runner.invoke(main, ["convert", str(src), str(tmp_path / "a.zarr"), "--chunks", "64"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["info", str(tmp_path / "a.zarr"), "--json"])
    assert res.exit_code == 0, res.output
    meta = json.loads(res.output)
    assert meta["driver"] == "Zarr" and meta["crs"] == CRS and meta["file_blocks"] == [64, 64]
    assert meta["nodata"] == -9999.0 and meta["stats"]["count"] == int(np.isfinite(z).sum())
    res = runner.invoke(main, ["convert", str(tmp_path / "a.zarr"), str(tmp_path / "back.tif")])
    assert res.exit_code == 0, res.output
    with rasterio.open(tmp_path / "back.tif") as f:
        back = f.read(1, masked=True).filled(np.nan)
    np.testing.assert_array_equal(back, z)
    res = runner.invoke(main, ["convert", str(src), str(tmp_path / "a.zarr")])
    assert res.exit_code == 1 and "already exists" in res.output and len(res.output.strip().splitlines()) == 1
    res = runner.invoke(main, ["convert", str(src), str(tmp_path / "b.tif"), "--resume"])
    assert res.exit_code == 1 and "--resume applies to Zarr outputs" in res.output
    res = runner.invoke(main, ["convert", str(tmp_path / "a.zarr"), str(tmp_path / "a.zarr"), "--overwrite"])
    assert res.exit_code == 1 and "SOURCE" in res.output


@pytest.fixture(scope="module")
def big_pair(tmp_path_factory) -> dict:
    """A 1024 x 1024 pair of the sine terrain, TBA moved by (6, -4, 2) m: a coreg's write of
    256 chunks of 64 pixels takes a second or two on one thread, long enough to be killed midway."""
    from truth import SineTerrain, dem_of

    folder = tmp_path_factory.mktemp("zbig")
    terrain = SineTerrain(crs=CRS, origin=(500000.0, 5200000.0))
    t = Affine(10.0, 0, 500000.0, 0, -10.0, 5210240.0)
    ref = dem_of(terrain, crs=CRS, transform=t, shape=(1024, 1024)).values
    tba = dem_of(terrain, crs=CRS, transform=t, shape=(1024, 1024), move=(6.0, -4.0, 2.0)).values
    return {"ref": write_tif(folder / "ref.tif", ref, crs=CRS, transform=t, tiled=True, blocksize=64),
            "tba": write_tif(folder / "tba.tif", tba, crs=CRS, transform=t, tiled=True, blocksize=64)}


def _coreg_args(pair: dict, out: Path, *extra: str) -> list[str]:
    # --subsample: the fit (run again by every resume) on 20,000 pixels instead of NuthKaab's default
    # 500,000; this test checks the store, not the fit's accuracy (tests/coreg/test_nuth_kaab.py does)
    return ["coreg", str(pair["ref"]), str(pair["tba"]), "-o", str(out), "--chunks", "64",
            "--subsample", "20000", "--no-stats", "-q", "--workers", "1", *extra]


def test_kill_9_mid_write_then_resume_equals_an_uninterrupted_run(big_pair: dict, tmp_path: Path,
                                                                  fork_server_test_env: ForkServer) -> None:
    import time

    # the runs that are killed or terminated are processes of their own, forked by the test process's
    # fork server (tests/conftest.py: real processes with the test's environment, without a fresh
    # process's 3 s of imports); the others run in this one (CliRunner: the same command, exit code and stderr)
    runner = CliRunner()
    clean = tmp_path / "clean.zarr"
    res = runner.invoke(main, _coreg_args(big_pair, clean))
    assert res.exit_code == 0, res.output
    out = tmp_path / "out.zarr"
    proc = fork_server_test_env.popen(_coreg_args(big_pair, out), cwd=tmp_path, logs=tmp_path / "killed",
                                      env=dict(os.environ))
    done = out / zs.BOOK / "done"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if done.is_dir() and len(os.listdir(done)) >= 40:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the write ended before it could be killed"
    proc.kill()  # SIGKILL: no clean-up runs
    assert proc.wait() == -9
    n_done = len(os.listdir(done))
    assert zs.store_status(out) == "incomplete" and 40 <= n_done < 256
    res = runner.invoke(main, ["info", str(out), "--no-stats"])
    assert res.exit_code == 1 and "incomplete" in res.output
    res = runner.invoke(main, _coreg_args(big_pair, out))
    assert res.exit_code == 1 and "--resume" in res.stderr  # exists: resume or overwrite, not silently
    # a resume with a different input is refused (and leaves the store as it was)
    other = dict(big_pair, ref=big_pair["tba"])
    res = runner.invoke(main, _coreg_args(other, out, "--resume"))
    assert res.exit_code == 1 and "different computation" in res.stderr, res.stderr
    assert zs.store_status(out) == "incomplete"
    recorded = zs.done_chunks(out, "dem")
    assert len(recorded) >= n_done - 2  # at most the chunks being written at the kill lost their record
    kept = {k: zs.chunk_object(out, "dem", *k).stat().st_mtime_ns for k in recorded
            if zs.chunk_object(out, "dem", *k).exists()}
    # a resume stopped by SIGTERM (a job's time limit) exits 143 and keeps the store for the next resume
    proc = fork_server_test_env.popen(_coreg_args(big_pair, out, "--resume"), cwd=tmp_path, logs=tmp_path / "resumed",
                                      env=dict(os.environ))
    while time.monotonic() < deadline and proc.poll() is None and len(os.listdir(done)) < n_done + 60:
        time.sleep(0.01)
    assert proc.poll() is None, "the resumed write ended before it could be terminated"
    proc.terminate()
    _, err = proc.communicate()
    assert proc.returncode == 143 and f"kept the unfinished store {out} for --resume" in err, err
    assert zs.store_status(out) == "incomplete"
    res = runner.invoke(main, _coreg_args(big_pair, out, "--resume", "--json"))
    assert res.exit_code == 0, res.stderr
    assert zs.store_status(out) == "complete"
    assert {k: zs.chunk_object(out, "dem", *k).stat().st_mtime_ns for k in kept} == kept  # not written again
    clean_objects = _objects(clean)
    assert len([k for k in clean_objects if k.startswith("dem/")]) == 256  # no chunk is all nodata here
    assert _objects(out) == clean_objects


def test_store_content_does_not_depend_on_the_input_chunking(tmp_path: Path) -> None:
    z = _holes((300, 260))
    a = write_zarr(_dem(z, chunks=(50, 70)) * 2, tmp_path / "a.zarr", chunks=64).path
    b = write_zarr(_dem(z, chunks=(300, 13)) * 2, tmp_path / "b.zarr", chunks=64).path
    assert _objects(a) == _objects(b)


def test_coreg_to_zarr_equals_coreg_to_cog_and_reads_zarr_inputs(tmp_path: Path) -> None:
    from xdem.examples import write_example_pair
    from xdem.io.sources import region_reader
    from xdem.workflows import CoregRequest, run_coreg

    pair = write_example_pair(tmp_path)
    runs = {}
    for name in ("out.tif", "out.zarr"):
        runs[name] = run_coreg(CoregRequest(reference=pair["ref"], to_be_aligned=pair["tba"], output=tmp_path / name,
                                            coreg=xdem.coreg.NuthKaab(), stats="sampled", random_state=1))
    tif, zarr_ = (xdem.open_dem(tmp_path / n) for n in ("out.tif", "out.zarr"))
    np.testing.assert_array_equal(zarr_.values, tif.values)  # the same aligned DEM, whatever the format
    assert runs["out.zarr"].document["stats"]["after"] == runs["out.tif"].document["stats"]["after"]
    # a store as the reference: the same fit as from the GeoTIFF
    write_zarr(xdem.open_dem(pair["ref"]), tmp_path / "ref.zarr", chunks=128)
    read = region_reader(xdem.open_dem(tmp_path / "ref.zarr"))
    np.testing.assert_array_equal(read(slice(3, 50), slice(100, 260)), xdem.open_dem(pair["ref"]).values[3:50, 100:260])
    again = run_coreg(CoregRequest(reference=tmp_path / "ref.zarr", to_be_aligned=pair["tba"],
                                   output=tmp_path / "again.tif", coreg=xdem.coreg.NuthKaab(), stats="none"))
    assert again.document["steps"] == runs["out.tif"].document["steps"]
    with pytest.raises(InputError, match="Zarr outputs"):
        run_coreg(CoregRequest(reference=pair["ref"], to_be_aligned=pair["tba"], output=tmp_path / "x.tif",
                               coreg=xdem.coreg.NuthKaab(), resume=True))
