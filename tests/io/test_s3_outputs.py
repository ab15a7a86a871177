"""Outputs to object storage (issue 25, item 2 and the output faults of item 6), against moto's S3
server in its own process: COG, dh, stable mask, JSON and report uploaded and equal to the same
run written locally; an existing key refused before any computation, replaced with
--overwrite; the conditional put losing a race; SIGTERM in the middle of a multipart upload;
a full local temp; a missing bucket; the journal deleting what a failed run uploaded; a
planted secret nowhere in what a run prints or writes.

The ``xdem`` runs are real child processes (own environment, ``TMPDIR``, signals, stdout, stderr
and exit code, ending with the interpreter's whole shutdown) forked by tests/forkserver.py, which
has imported the commands' engines once: a fresh ``python -m xdem`` spends ~3.5 s of CPU importing
before it does anything."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import boto3
import numpy as np
import pytest
import rasterio
from click.testing import CliRunner
from forkserver import ForkServer, wait_stopped
from servers import _wait_http, free_port, new_bucket, s3_client, s3_env, s3_server

import xdem
from xdem.cli import main
from xdem.errors import OutputError, XdemError
from xdem.io import atomic, upload

ROOT = Path(__file__).resolve().parents[2]
#: A recognisable secret: it must appear in nothing a run prints or writes.
PLANTED_SECRET = "planted-SECRET-a7f3c9e1d2b4"


@pytest.fixture(scope="module")
def server():
    """moto's S3 server for the module, with the planted secret as the credentials' secret."""
    with s3_server(secret=PLANTED_SECRET) as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return xdem.examples.write_example_pair(tmp_path_factory.mktemp("pair"))


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp), **extra}


#: The module's fork server and a folder for its children's stdout and stderr (see :func:`forks`).
_FORKS: dict = {}


@pytest.fixture(scope="module", autouse=True)
def forks(fork_server_test_env: ForkServer, tmp_path_factory):
    """The fork server of the module's ``xdem`` runs (:func:`_start`), shared by the test process's
    modules (tests/conftest.py); its environment is the test's, with its BLAS threads (no
    one-thread setting: the runs must compute as a fresh one)."""
    _FORKS.update(server=fork_server_test_env, logs=tmp_path_factory.mktemp("fork-logs"), n=0)
    yield _FORKS["server"]
    _FORKS.pop("server")


def _start(args: list, *, tmp: Path, **extra: str) -> tuple[int, Path, Path]:
    """Start ``xdem *args`` in a child process with ``TMPDIR=tmp`` (and ``extra`` in its environment)
    in this process's working directory; returns its pid and the files of its stdout and stderr."""
    _FORKS["n"] += 1
    out, err = (_FORKS["logs"] / f"{_FORKS['n']}.{name}" for name in ("out", "err"))
    pid = _FORKS["server"].run([os.fspath(a) for a in args], cwd=Path.cwd(), stdout=out, stderr=err, env=_env(tmp, **extra),
                               finalize=True)
    return pid, out, err


def _finish(args: list, pid: int, out: Path, err: Path) -> subprocess.CompletedProcess:
    """Wait for child ``pid`` (killed after 600 s); its exit code, stdout and stderr."""
    code = _FORKS["server"].wait(pid, timeout=600)
    return subprocess.CompletedProcess(["xdem", *map(os.fspath, args)], code, out.read_text(), err.read_text())


def _xdem(args: list, *, tmp: Path, **extra: str) -> subprocess.CompletedProcess:
    tmp.mkdir(exist_ok=True)
    return _finish(args, *_start(args, tmp=tmp, **extra))


def _keys(bucket: str) -> dict[str, str]:
    """Key -> ETag of every object in ``bucket``."""
    return {o["Key"]: o["ETag"] for o in s3_client().list_objects_v2(Bucket=bucket).get("Contents", [])}


def _get(bucket: str, key: str) -> bytes:
    return s3_client().get_object(Bucket=bucket, Key=key)["Body"].read()


def _open_uploads(bucket: str) -> list:
    return s3_client().list_multipart_uploads(Bucket=bucket).get("Uploads", [])


@pytest.fixture(scope="module")
def runs(server, pair, tmp_path_factory):
    """The same coregistration written locally and to the bucket: every output kind."""
    local, tmp, bucket = tmp_path_factory.mktemp("local"), tmp_path_factory.mktemp("tmpdir"), new_bucket()
    outputs = {"-o": "aligned.tif", "--dh-out": "dh.tif", "--stable-mask-out": "stable.tif", "--json-out": "run.json",
               "--report": "report.html"}
    base = [pair["ref"], pair["tba"], "--random-state", "0"]
    # the local run in this process (CliRunner: the same command, exit code and stderr, without a
    # process's 3 s of imports); the run to the bucket is a process of its own, with its TMPDIR
    res = CliRunner().invoke(main, ["coreg", *map(str, base), *[a for o, n in outputs.items() for a in (o, str(local / n))]])
    done_local = subprocess.CompletedProcess(["xdem", "coreg"], res.exit_code, res.stdout, res.stderr)
    done_s3 = _xdem(["coreg", *base, *[a for o, n in outputs.items() for a in (o, f"s3://{bucket}/out/{n}")]], tmp=tmp)
    return {"local": local, "bucket": bucket, "tmp": tmp, "outputs": outputs, "done_local": done_local, "done_s3": done_s3}


def test_every_output_kind_uploaded_and_equal_to_the_local_run(runs):
    assert runs["done_local"].returncode == 0, runs["done_local"].stderr
    assert runs["done_s3"].returncode == 0, runs["done_s3"].stderr
    bucket, local = runs["bucket"], runs["local"]
    assert sorted(_keys(bucket)) == sorted(f"out/{n}" for n in runs["outputs"].values())
    for name in ("aligned.tif", "dh.tif", "stable.tif"):  # the COG bytes hold nothing run-specific
        assert _get(bucket, f"out/{name}") == (local / name).read_bytes(), name
    doc, doc_local = json.loads(_get(bucket, "out/run.json")), json.loads((local / "run.json").read_text())
    assert doc["output"] == f"s3://{bucket}/out/aligned.tif" and doc["report"] == f"s3://{bucket}/out/report.html"
    assert doc["stats"] == doc_local["stats"] and doc["steps"] == doc_local["steps"]
    assert doc["verdict"] == doc_local["verdict"]
    assert _get(bucket, "out/report.html").startswith(b"<!DOCTYPE html>")
    assert _open_uploads(bucket) == []
    assert list(runs["tmp"].iterdir()) == []  # the staging in TMPDIR is gone


def test_planted_secret_is_in_nothing_the_run_printed_or_wrote(runs):
    done, bucket = runs["done_s3"], runs["bucket"]
    assert done.returncode == 0
    texts = [done.stdout, done.stderr] + [_get(bucket, k).decode("latin-1") for k in _keys(bucket)]
    assert all(PLANTED_SECRET not in t for t in texts)
    assert os.environ["AWS_SECRET_ACCESS_KEY"] == PLANTED_SECRET  # the secret was really the one in use


def test_existing_key_refused_before_any_computation_and_replaced_with_overwrite(server, pair, tmp_path):
    bucket = new_bucket()
    s3_client().put_object(Bucket=bucket, Key="aligned.tif", Body=b"someone else's")
    args = ["coreg", pair["ref"], pair["tba"], "-o", f"s3://{bucket}/aligned.tif"]
    t0 = time.monotonic()
    done = _xdem(args, tmp=tmp_path / "t")
    assert done.returncode == 1
    line = done.stderr.strip().splitlines()[-1]
    assert "already exists; pass --overwrite" in line and f"s3://{bucket}/aligned.tif" in line, done.stderr
    assert "fitting" not in done.stderr + done.stdout and time.monotonic() - t0 < 30
    assert _get(bucket, "aligned.tif") == b"someone else's"
    done = _xdem([*args, "--overwrite"], tmp=tmp_path / "t")
    assert done.returncode == 0, done.stderr
    with rasterio.open(f"/vsis3/{bucket}/aligned.tif") as ds:
        assert ds.driver == "GTiff" and ds.overviews(1) is not None


def test_missing_bucket_is_one_line_before_any_computation(server, pair, tmp_path):
    for option in ("-o", "--json-out", "--report"):
        name = "x.tif" if option == "-o" else "x.json" if option == "--json-out" else "x.html"
        out = ["-o", str(tmp_path / "aligned.tif")] if option != "-o" else []
        done = _xdem(["coreg", pair["ref"], pair["tba"], *out, option, f"s3://no-such-bucket-xdem/{name}"],
                     tmp=tmp_path / "t")
        assert done.returncode == 1
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "the bucket 'no-such-bucket-xdem' does not exist" in lines[0], done.stderr
        assert "Traceback" not in done.stderr and not (tmp_path / "aligned.tif").exists()


def test_conditional_put_losing_the_race_leaves_the_other_object(server, pair, tmp_path):
    """The key is created between the check and the upload (the run paused at its upload):
    the run ends with exit 1 and one line, the other writer's object untouched, nothing else left."""
    bucket = new_bucket()
    args = ["coreg", pair["ref"], pair["tba"], "-o", f"s3://{bucket}/aligned.tif", "--json-out", f"s3://{bucket}/run.json"]
    pid, out, err_file = _start(args, tmp=tmp_path, XDEM_TEST_PAUSE_AT="upload:0")
    try:
        wait_stopped(pid)
        s3_client().put_object(Bucket=bucket, Key="aligned.tif", Body=b"the other writer")
    finally:
        os.kill(pid, signal.SIGCONT)
        done = _finish(args, pid, out, err_file)
    err = done.stderr
    assert done.returncode == 1, err
    line = err.strip().splitlines()[-1]
    assert "was created by another writer while this run was writing it" in line, err
    assert _get(bucket, "aligned.tif") == b"the other writer"
    assert list(_keys(bucket)) == ["aligned.tif"] and _open_uploads(bucket) == []
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def big_dem(tmp_path_factory):
    """A 2048 x 2048 float32 DEM of noise: ~16 MiB as an uncompressed COG, four 5 MiB parts."""
    path = tmp_path_factory.mktemp("big") / "big.tif"
    data = np.random.default_rng(0).normal(100, 10, (2048, 2048)).astype("float32")
    profile = {"driver": "GTiff", "width": 2048, "height": 2048, "count": 1, "dtype": "float32", "crs": "EPSG:32633",
               "transform": rasterio.Affine(1, 0, 500000, 0, -1, 5000000), "tiled": True, "nodata": -9999}
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data, 1)
    return path


def test_sigterm_during_a_multipart_upload_leaves_no_object_and_no_open_upload(server, big_dem, tmp_path):
    bucket = new_bucket()
    url = f"s3://{bucket}/big.tif"
    args = ["convert", str(big_dem), url, "--compress", "none"]
    pid, out, err_file = _start(args, tmp=tmp_path, XDEM_TEST_PAUSE_AT="upload:2", XDEM_UPLOAD_PART_SIZE=str(5 * 2**20))
    try:
        wait_stopped(pid)
        uploads = _open_uploads(bucket)
        assert len(uploads) == 1  # two parts sent, the upload is open
        parts = s3_client().list_parts(Bucket=bucket, Key="big.tif", UploadId=uploads[0]["UploadId"])["Parts"]
        assert [p["PartNumber"] for p in parts] == [1, 2]
        os.kill(pid, signal.SIGTERM)
    finally:
        os.kill(pid, signal.SIGCONT)
        done = _finish(args, pid, out, err_file)
    err = done.stderr
    assert done.returncode == 143, err
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"Error: terminated by SIGTERM during the upload of {url}"), err
    assert _keys(bucket) == {} and _open_uploads(bucket) == []
    assert list(tmp_path.iterdir()) == []


def test_multipart_upload_equals_the_local_file(server, big_dem, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    monkeypatch.setenv(upload.PART_SIZE_ENV, str(5 * 2**20))
    bucket = new_bucket()
    dem = xdem.open_dem(big_dem)
    result = xdem.write_cog(dem, f"s3://{bucket}/big.tif", compress="none")
    local = xdem.write_cog(dem, tmp_path / "big.tif", compress="none")
    assert os.fspath(result) == f"s3://{bucket}/big.tif"
    assert _get(bucket, "big.tif") == Path(os.fspath(local)).read_bytes()
    assert "-" in _keys(bucket)["big.tif"]  # a multipart ETag: the upload went in parts
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.tif"]


def test_disk_full_local_temp_says_how_much_and_tmpdir(server, pair, tmp_path, monkeypatch):
    import xdem.io.cog as cog

    def full(tmp, out, **kw):
        Path(out).write_bytes(b"partial COG")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setattr(cog, "_copy_to_cog", full)
    bucket = new_bucket()
    with pytest.raises(OutputError, match=r"no space left .* temporary folder .*TMPDIR.* MB are needed") as err:
        xdem.write_cog(xdem.open_dem(pair["ref"]), f"s3://{bucket}/aligned.tif")
    assert "\n" not in str(err.value) and f"s3://{bucket}/aligned.tif" in str(err.value)
    assert list(tmp_path.iterdir()) == [] and _keys(bucket) == {}


def test_journal_deletes_what_a_failed_run_uploaded_if_still_its_own(server, pair, tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    bucket = new_bucket()
    dem = xdem.open_dem(pair["ref"])
    with pytest.raises(XdemError, match="a later failure"), atomic.output_journal():
        xdem.write_cog(dem, f"s3://{bucket}/ours.tif")
        xdem.write_cog(dem, f"s3://{bucket}/replaced.tif")
        atomic.publish_deferred()
        assert sorted(_keys(bucket)) == ["ours.tif", "replaced.tif"]
        s3_client().put_object(Bucket=bucket, Key="replaced.tif", Body=b"another writer, after our upload")
        raise XdemError("a later failure")
    assert _keys(bucket).keys() == {"replaced.tif"}
    assert _get(bucket, "replaced.tif") == b"another writer, after our upload"
    assert list(tmp_path.iterdir()) == []


def test_outputs_to_other_schemes_or_without_a_key_are_one_line():
    with pytest.raises(OutputError, match="go to s3://"):
        upload.object_url("gs://bucket/out.tif")
    with pytest.raises(OutputError, match="names no object"):
        upload.object_url("s3://bucket/")


def test_moved_points_uploaded_equal_to_the_local_run(server, pair, tmp_path):
    import geopandas as gpd
    from helpers import write_points_at_pixels

    points = tmp_path / "points.csv"
    crs = write_points_at_pixels(points, pair["tba"], step=20)  # the points to align: TBA's surface
    bucket = new_bucket()
    args = ["coreg", str(pair["ref"]), str(points), "--points-crs", crs, "-o"]
    local = _xdem([*args, str(tmp_path / "moved.gpkg"), "--json"], tmp=tmp_path / "t1")
    remote_run = _xdem([*args, f"s3://{bucket}/moved.gpkg", "--json"], tmp=tmp_path / "t2")
    assert local.returncode == 0 and remote_run.returncode == 0, remote_run.stderr
    assert json.loads(remote_run.stdout)["steps"] == json.loads(local.stdout)["steps"]
    (tmp_path / "got.gpkg").write_bytes(_get(bucket, "moved.gpkg"))
    got, want = gpd.read_file(tmp_path / "got.gpkg"), gpd.read_file(tmp_path / "moved.gpkg")
    assert len(got) == len(want) > 100 and got.crs == want.crs
    np.testing.assert_array_equal(got.geometry.x, want.geometry.x)
    np.testing.assert_array_equal(got.geometry.z if got.has_z.all() else got["z"], want.geometry.z if want.has_z.all()
                                  else want["z"])
    assert os.listdir(tmp_path / "t2") == []  # the staging is gone
    again = _xdem([*args, f"s3://{bucket}/moved.gpkg"], tmp=tmp_path / "t3")
    assert again.returncode == 1 and "already exists" in again.stderr and "--overwrite" in again.stderr


def test_terrain_attributes_uploaded_under_a_prefix_equal_to_the_local_run(server, pair, tmp_path):
    bucket = new_bucket()
    done = _xdem(["terrain", pair["ref"], "-o", f"s3://{bucket}/attrs/"], tmp=tmp_path / "t")
    assert done.returncode == 0, done.stderr
    local = _xdem(["terrain", pair["ref"], "-o", str(tmp_path / "attrs")], tmp=tmp_path / "t")
    assert local.returncode == 0, local.stderr
    assert sorted(_keys(bucket)) == ["attrs/aspect.tif", "attrs/hillshade.tif", "attrs/slope.tif"]
    for key in _keys(bucket):
        assert _get(bucket, key) == (tmp_path / key).read_bytes(), key
    assert not Path("s3:").exists() and list((tmp_path / "t").iterdir()) == []
    again = _xdem(["terrain", pair["ref"], "-o", f"s3://{bucket}/attrs/"], tmp=tmp_path / "t")
    assert again.returncode == 1 and "already exists; pass --overwrite" in again.stderr.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def write_denied():
    """A second moto server that checks credentials (IAM): a bucket, and a user allowed
    everything in S3 but PutObject. Yields (its environment for that user, the bucket)."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "4"},  # the 4 set-up calls below
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_http(f"{endpoint}/moto-api/", proc)
        env = s3_env(endpoint)
        keys = {"aws_access_key_id": env["AWS_ACCESS_KEY_ID"], "aws_secret_access_key": env["AWS_SECRET_ACCESS_KEY"]}
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **keys).create_bucket(Bucket="denied-bucket")
        iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1", **keys)
        iam.create_user(UserName="reader")
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["s3:*"], "Resource": "*"},
                                                         {"Effect": "Deny", "Action": ["s3:PutObject"], "Resource": "*"}]}
        iam.put_user_policy(UserName="reader", PolicyName="no-put", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        env.update(AWS_ACCESS_KEY_ID=key["AccessKeyId"], AWS_SECRET_ACCESS_KEY=key["SecretAccessKey"])
        yield env, "denied-bucket"
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)


def test_upload_refused_with_403_after_the_run_is_one_line_and_leaves_nothing(write_denied, pair, tmp_path):
    env, bucket = write_denied
    done = _xdem(["coreg", pair["ref"], pair["tba"], "-o", f"s3://{bucket}/aligned.tif", "--json-out",
                  f"s3://{bucket}/run.json"], tmp=tmp_path / "t", **env)
    assert done.returncode == 1
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith(f"Error: cannot upload output 's3://{bucket}/aligned.tif' (the store answered 403, "
                           "credentials: environment variables)"), done.stderr
    assert env["AWS_SECRET_ACCESS_KEY"] not in done.stderr + done.stdout and "Traceback" not in done.stderr
    client = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name="us-east-1",
                          aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])
    assert client.list_objects_v2(Bucket=bucket).get("KeyCount") == 0
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    assert list((tmp_path / "t").iterdir()) == []


def test_unknown_credentials_are_a_403_before_any_computation(write_denied, pair, tmp_path):
    env, bucket = write_denied
    env = {**env, "AWS_ACCESS_KEY_ID": "AKIAUNKNOWN000000000", "AWS_SECRET_ACCESS_KEY": PLANTED_SECRET}
    done = _xdem(["coreg", pair["ref"], pair["tba"], "-o", f"s3://{bucket}/aligned.tif"], tmp=tmp_path / "t", **env)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "(the store answered 403, credentials: environment variables)" in lines[0], done.stderr
    assert PLANTED_SECRET not in done.stderr + done.stdout


def test_xdem_report_to_object_storage(runs, pair, tmp_path):
    bucket = runs["bucket"]
    done = _xdem(["report", pair["ref"], pair["tba"], "-o", f"s3://{bucket}/alone/report.html"], tmp=tmp_path / "t")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == f"s3://{bucket}/alone/report.html"
    assert _get(bucket, "alone/report.html").startswith(b"<!DOCTYPE html>")
    assert list((tmp_path / "t").iterdir()) == []


def test_unwritable_tmpdir_is_one_line_naming_tmpdir(server, pair, tmp_path):
    bucket = new_bucket()
    done = _xdem(["coreg", pair["ref"], pair["tba"], "-o", f"s3://{bucket}/aligned.tif"], tmp=tmp_path,
                 TMPDIR=str(tmp_path / "missing"))
    assert done.returncode == 1
    line = done.stderr.strip().splitlines()[-1]
    assert f"TMPDIR '{tmp_path / 'missing'}' is not a writable folder" in line, done.stderr
    assert "fitting" not in done.stderr and _keys(bucket) == {}
