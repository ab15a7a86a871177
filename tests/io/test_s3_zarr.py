"""Tests of Zarr DEM stores in object storage (``s3://``) against moto's S3 server on 127.0.0.1:
write_zarr, open_dem, plain xarray, the CLI, kill then --resume, refusals, a LocalCluster."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import s3fs
import xarray as xr
from affine import Affine
from click.testing import CliRunner
from forkserver import ForkServer
from helpers import write_tif
from servers import new_bucket, s3_client, s3_server

import xdem
from xdem.cli import main
from xdem.errors import InputError, OutputError
from xdem.io import zarr_store as zs
from xdem.io.zarr import write_zarr

CRS = "EPSG:32633"
T = Affine(2.0, 0, 500000.0, 0, -2.0, 5200000.0)
#: A recognisable secret, planted as the S3 secret key (moto accepts any): it must appear nowhere.
SECRET = "xdem-planted-secret-4f1c9a7e"


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    """moto's S3 server in its own process, the environment pointing GDAL and s3fs at it."""
    with s3_server(secret=SECRET) as endpoint:
        yield endpoint


@pytest.fixture
def bucket(s3: str) -> str:
    return new_bucket()


def _dem(data: np.ndarray, *, chunks: int = 64) -> xr.DataArray:
    ny, nx = data.shape
    x = T.c + (np.arange(nx) + 0.5) * T.a
    y = T.f + (np.arange(ny) + 0.5) * T.e
    out = xr.DataArray(da.from_array(data, chunks=chunks), dims=("y", "x"), coords={"y": y, "x": x})
    return out.rio.write_crs(CRS).rio.write_transform(T)


def _holes(shape: tuple[int, int], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    z = (rng.normal(size=shape) * 50 + 800).astype(np.float32)
    z[rng.random(shape) < 0.05] = np.nan
    return z


def _local_chunks(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*"))
            if p.is_file() and "/c/" in str(p.relative_to(store)) and zs.BOOK not in p.parts}


def _s3_objects(bucket: str, prefix: str) -> dict[str, bytes]:
    """Every object under ``prefix`` (read with boto3, not with the code under test), by key."""
    client = s3_client()
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
            for o in page.get("Contents", [])]
    return {k[len(prefix) + 1:]: client.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys}


def _s3_chunks(bucket: str, prefix: str) -> dict[str, bytes]:
    return {k: v for k, v in _s3_objects(bucket, prefix).items() if "/c/" in k and not k.startswith(zs.BOOK)}


def _no_secret(*texts: str | bytes) -> None:
    for text in texts:
        raw = text if isinstance(text, bytes) else text.encode()
        assert SECRET.encode() not in raw


# ---------------------------------------------------------------------------- write and read back


def test_s3_store_equals_the_local_store_bit_for_bit(bucket: str, tmp_path: Path) -> None:
    dem = _dem(_holes((300, 250)), chunks=64) + 1
    local = write_zarr(dem, tmp_path / "local.zarr")
    url = f"s3://{bucket}/dems/aligned.zarr"
    result = write_zarr(dem, url)
    assert result.path == url and (result.written, result.kept) == (local.written, local.kept) == (20, 0)
    chunks = _s3_chunks(bucket, "dems/aligned.zarr")
    assert chunks == _local_chunks(local.path)
    objects = _s3_objects(bucket, "dems/aligned.zarr")
    assert not [k for k in objects if k.endswith(".partial") or ".tmp-" in k]  # a PUT is atomic: no temp objects
    assert json.loads(objects[f"{zs.BOOK}/{zs.COMPLETE}"]) == result.fingerprint
    record = json.loads(objects[f"{zs.BOOK}/done/0.0.json"])
    assert set(record) == {"bytes", "etag"} and record["bytes"] == len(chunks["dem/c/0/0"])
    assert len([k for k in objects if k.startswith(f"{zs.BOOK}/done/")]) == 20
    _no_secret(*objects.values())
    back = xdem.open_dem(url)
    assert back.rio.crs == dem.rio.crs and back.rio.transform() == dem.rio.transform()
    np.testing.assert_array_equal(back.values, xdem.open_dem(local.path).values)
    np.testing.assert_array_equal(back.values, dem.values)
    np.testing.assert_array_equal(xdem.open_dem(url, chunks=128).values, dem.values)  # chunks: multiples of the store's


def test_plain_xarray_reads_the_s3_store(bucket: str, s3: str) -> None:
    dem = _dem(_holes((128, 192)))
    url = f"s3://{bucket}/plain.zarr"
    write_zarr(dem, url)
    for options in ({"storage_options": {"endpoint_url": s3}}, {}):  # {}: s3fs finds AWS_ENDPOINT_URL itself
        s3fs.S3FileSystem.clear_instance_cache()
        ds = xr.open_zarr(url, decode_coords="all", **options)
        arr = ds["dem"]
        assert str(arr.rio.crs) == CRS and arr.rio.transform() == T
        assert arr.rio.encoded_nodata == -9999.0
        np.testing.assert_array_equal(arr.values, dem.values)


def test_overwrite_resume_and_refusals_on_s3(bucket: str) -> None:
    dem = _dem(_holes((128, 128)))
    url = f"s3://{bucket}/s.zarr"
    write_zarr(dem, url)
    with pytest.raises(OutputError, match="already exists") as err:
        write_zarr(dem + 1, url)
    assert len(str(err.value).splitlines()) == 1
    assert write_zarr(dem, url, resume=True).written == 0  # complete, same computation: nothing to do
    with pytest.raises(OutputError, match="different computation"):
        s3_client().delete_object(Bucket=bucket, Key=f"s.zarr/{zs.BOOK}/{zs.COMPLETE}")
        write_zarr(dem + 1, url, resume=True)
    assert write_zarr(dem + 1, url, overwrite=True).written == 4
    np.testing.assert_array_equal(xdem.open_dem(url).values, (dem + 1).values)
    with pytest.raises(OutputError, match="one of the inputs"):
        write_zarr(xdem.open_dem(url) * 2, url, overwrite=True)  # never written over its own input
    np.testing.assert_array_equal(xdem.open_dem(url).values, (dem + 1).values)
    s3_client().put_object(Bucket=bucket, Key="notzarr.zarr/readme.txt", Body=b"hello")
    with pytest.raises(OutputError, match="not a Zarr store"):
        write_zarr(dem, f"s3://{bucket}/notzarr.zarr", overwrite=True)  # a prefix that is not a store: never deleted
    assert _s3_objects(bucket, "notzarr.zarr") == {"readme.txt": b"hello"}


def test_missing_bucket_and_unsupported_scheme_are_one_line(s3: str) -> None:
    dem = _dem(_holes((64, 64)))
    with pytest.raises(OutputError, match="the bucket 'xdem-no-such-bucket' does not exist") as err:
        write_zarr(dem, "s3://xdem-no-such-bucket/a.zarr")
    assert len(str(err.value).splitlines()) == 1
    with pytest.raises(InputError, match="the bucket 'xdem-no-such-bucket' does not exist"):
        xdem.open_dem("s3://xdem-no-such-bucket/a.zarr")
    with pytest.raises(OutputError, match="local disk or in S3"):
        write_zarr(dem, "gs://b/a.zarr")


def test_no_answer_from_the_endpoint_is_one_line(s3: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from servers import free_port

    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        t0 = time.monotonic()
        with pytest.raises(OutputError, match="no answer from the store") as err:
            write_zarr(_dem(_holes((64, 64))), "s3://b/a.zarr")
        assert len(str(err.value).splitlines()) == 1 and time.monotonic() - t0 < 60
    finally:
        s3fs.S3FileSystem.clear_instance_cache()


def test_access_denied_is_one_line_with_the_credential_source_and_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INITIAL_NO_AUTH_ACTION_COUNT", "0")  # this server (its own) checks credentials: 403
    with s3_server():
        os.environ["AWS_SECRET_ACCESS_KEY"] = SECRET  # s3_server() puts the outer value back at its end
        s3fs.S3FileSystem.clear_instance_cache()
        try:
            with pytest.raises(OutputError, match="answered 403.*credentials: environment variables") as err:
                write_zarr(_dem(_holes((64, 64))), "s3://somebucket/a.zarr")
            with pytest.raises(InputError, match="answered 403") as err2:
                xdem.open_dem("s3://somebucket/a.zarr")
        finally:
            s3fs.S3FileSystem.clear_instance_cache()
    assert len(str(err.value).splitlines()) == 1
    _no_secret(str(err.value), str(err2.value))


# ---------------------------------------------------------------------------- kill, then resume


def test_kill_9_mid_write_then_resume_writes_only_the_missing_chunks(bucket: str, tmp_path: Path,
                                                                     fork_server_test_env: ForkServer) -> None:
    z = _holes((512, 512), seed=3)
    src = write_tif(tmp_path / "src.tif", z, crs=CRS, transform=T, tiled=True, blocksize=64)
    clean = write_zarr(xdem.open_dem(src, chunks=64), tmp_path / "clean.zarr", chunks=64)
    url = f"s3://{bucket}/killed.zarr"
    # a real process of its own, forked by the test process's fork server (tests/conftest.py), with
    # this test's environment (the S3 server's variables) and without a fresh process's 3 s of imports
    proc = fork_server_test_env.popen(["convert", str(src), url, "--chunks", "64", "--scheduler", "threads",
                                       "--workers", "1"], cwd=tmp_path, logs=tmp_path / "killed",
                                      env={**os.environ, "XDEM_TEST_PAUSE_AT": "zarr:90"})
    deadline = time.monotonic() + 180
    while proc.state() != "T" and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.state() == "T", proc.communicate()[1] if proc.poll() is not None else "not stopped"
    proc.send_signal(signal.SIGKILL)  # no clean-up runs
    assert proc.wait() == -signal.SIGKILL
    assert zs.store_status(url) == "incomplete"
    with pytest.raises(InputError, match="incomplete"):
        xdem.open_dem(url)
    assert xdem.open_dem(url, allow_incomplete=True).shape == (512, 512)
    recorded = zs.done_chunks(url, "dem")
    assert 10 <= len(recorded) < 64  # about a third: each chunk is a few dask tasks (events)
    before = {k: v for k, v in _s3_objects(bucket, "killed.zarr").items() if "/c/" in k}
    stamps = {k: o["LastModified"] for k, o in ((k, s3_client().head_object(Bucket=bucket, Key=f"killed.zarr/{k}"))
                                                 for k in before)}
    time.sleep(1.1)  # LastModified has a resolution of one second: a rewritten chunk would show
    result = write_zarr(xdem.open_dem(src, chunks=64), url, resume=True, chunks=64)
    assert (result.written, result.kept) == (64 - len(recorded), len(recorded))
    kept = {f"dem/c/{i}/{j}" for i, j in recorded} & set(before)
    assert kept and all(s3_client().head_object(Bucket=bucket, Key=f"killed.zarr/{k}")["LastModified"] == stamps[k]
                        for k in kept)  # the recorded chunks were not written again
    assert zs.store_status(url) == "complete"
    assert _s3_chunks(bucket, "killed.zarr") == _local_chunks(clean.path)
    np.testing.assert_array_equal(xdem.open_dem(url).values, xdem.open_dem(clean.path).values)


# ---------------------------------------------------------------------------- the CLI


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from truth import SineTerrain, dem_of

    folder = tmp_path_factory.mktemp("s3pair")
    terrain = SineTerrain(crs=CRS, origin=(500000.0, 5200000.0))
    t = Affine(10.0, 0, 500000.0, 0, -10.0, 5202560.0)
    ref = dem_of(terrain, crs=CRS, transform=t, shape=(256, 256)).values
    tba = dem_of(terrain, crs=CRS, transform=t, shape=(256, 256), move=(6.0, -4.0, 2.0)).values
    return {"ref": write_tif(folder / "ref.tif", ref, crs=CRS, transform=t, tiled=True, blocksize=64),
            "tba": write_tif(folder / "tba.tif", tba, crs=CRS, transform=t, tiled=True, blocksize=64)}


def _coreg(pair: dict, out: str, *extra: str) -> list[str]:
    return ["coreg", str(pair["ref"]), str(pair["tba"]), "-o", out, "--chunks", "64", "--subsample", "20000",
            "--workers", "1", *extra]


def test_cli_coreg_to_an_s3_store(pair: dict, bucket: str, tmp_path: Path) -> None:
    runner = CliRunner()
    local = tmp_path / "aligned.zarr"
    res = runner.invoke(main, [*_coreg(pair, str(local)), "-q"])
    assert res.exit_code == 0, res.output
    url = f"s3://{bucket}/runs/aligned.zarr"
    res = runner.invoke(main, [*_coreg(pair, url), "--json-out", str(tmp_path / "run.json")])
    assert res.exit_code == 0, res.output
    assert zs.store_status(url) == "complete"
    assert _s3_chunks(bucket, "runs/aligned.zarr") == _local_chunks(local)
    np.testing.assert_array_equal(xdem.open_dem(url).values, xdem.open_dem(local).values)
    doc = (tmp_path / "run.json").read_text()
    assert url in doc
    res2 = runner.invoke(main, _coreg(pair, url))  # exists: refused before any computation, in one line
    assert res2.exit_code == 1 and "already exists" in res2.stderr and "--overwrite" in res2.stderr
    assert len(res2.stderr.strip().splitlines()) == 1
    res3 = runner.invoke(main, [*_coreg(pair, url), "--resume", "-q"])
    assert res3.exit_code == 0, res3.output
    res4 = runner.invoke(main, [*_coreg(pair, url), "--overwrite", "-q"])
    assert res4.exit_code == 0, res4.output
    res5 = runner.invoke(main, _coreg(pair, "s3://xdem-no-such-bucket/aligned.zarr"))
    assert res5.exit_code == 1 and "does not exist" in res5.stderr and len(res5.stderr.strip().splitlines()) == 1
    _no_secret(res.output, res2.output, res3.output, res4.output, res5.output, doc,
               *_s3_objects(bucket, "runs/aligned.zarr").values())


# ---------------------------------------------------------------------------- a cluster with no shared disk


def test_local_cluster_workers_write_the_chunks_to_s3(bucket: str, tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    import warnings

    dem = _dem(_holes((256, 192), seed=5)) * 2  # in the graph: the workers read no file
    local = write_zarr(dem, tmp_path / "threads.zarr")
    folders = [tmp_path / "w0", tmp_path / "w1"]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Port .* is already in use")
        cluster = distributed.SpecCluster(
            scheduler={"cls": distributed.Scheduler, "options": {"dashboard_address": None}},
            workers={f"w{k}": {"cls": distributed.Nanny, "options": {"nthreads": 1, "local_directory": str(d),
                                                                      "env": {"TMPDIR": str(d)}}}
                     for k, d in enumerate(folders)}, silence_logs=40)
    url = f"s3://{bucket}/cluster.zarr"
    with cluster, distributed.Client(cluster) as client:
        result = write_zarr(dem, url)
        prefixes = set(cluster.scheduler.task_prefixes)
        dirs = client.run(lambda dask_worker: dask_worker.local_directory)
    assert "write_chunk" in prefixes and len(dirs) == 2 and len(set(dirs.values())) == 2
    assert result.written == 12
    assert _s3_chunks(bucket, "cluster.zarr") == _local_chunks(local.path)
    for d in folders:  # nothing of the store was written to a worker's own disk
        assert not [p for p in d.rglob("*") if p.is_file() and ("/c/" in str(p) or p.suffix == ".json"
                                                               and "xdem" in p.read_text(errors="ignore"))]
