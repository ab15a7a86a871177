"""Inputs from object storage: DEMs, masks (raster and vector) and points read from ``s3://``
and ``/vsis3/`` on moto's S3 server (its own process on 127.0.0.1), for every entry point
(``open_dem``, ``read_points``, ``xdem coreg``, ``info``, ``convert``, ``terrain``), each run
equal bit for bit to the same run on the local files; refusals (404, a missing bucket, 403
with the credential source, no answer) in one line; credentials from the environment, a
profile or none (``--anonymous``), and never shown.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import s3fs
from click.testing import CliRunner
from helpers import write_masks, write_point_files
from servers import free_port, iam_user, new_bucket, s3_client, s3_server

import xdem
from xdem.cli import main
from xdem.examples import write_example_pair
from xdem.io import remote
from xdem.points import read_points

NAMES = ("ref.tif", "tba.tif", "inlier.gpkg", "exclude.tif", "points.csv", "points.parquet", "points.gpkg", "points.las")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One S3 server; a bucket holding the example pair as COGs, the masks and the points, and
    the same files in a local folder: ``(folder, bucket, points CRS)``."""
    folder = tmp_path_factory.mktemp("local")
    pair = write_example_pair(tmp_path_factory.mktemp("pair"))
    for name in ("ref", "tba"):
        xdem.write_cog(xdem.open_dem(pair[name]), folder / f"{name}.tif")
    write_masks(folder)
    crs = write_point_files(folder)
    with s3_server():
        s3fs.S3FileSystem.clear_instance_cache()
        bucket = new_bucket()
        client = s3_client()
        for name in NAMES:
            client.upload_file(str(folder / name), bucket, f"in/{name}")
        yield folder, bucket, crs
    s3fs.S3FileSystem.clear_instance_cache()


def _invoke(args: list[str]) -> tuple[int, str]:
    res = CliRunner().invoke(main, args)
    return res.exit_code, res.output


def _ok(args: list[str]) -> str:
    code, out = _invoke(args)
    assert code == 0, out
    return out


def _one_line(args: list[str], *needles: str) -> str:
    """The run fails with exit 1 and one line holding every needle, no traceback."""
    code, out = _invoke(args)
    lines = [line for line in out.splitlines() if line.strip()]
    assert code == 1 and len(lines) == 1 and "Traceback" not in out, out
    assert all(n in lines[0] for n in needles), out
    return lines[0]


def test_open_dem_from_s3_equals_local(store):
    folder, bucket, _ = store
    local = xdem.open_dem(folder / "ref.tif")
    for source in (f"s3://{bucket}/in/ref.tif", f"/vsis3/{bucket}/in/ref.tif"):
        dem = xdem.open_dem(source)
        assert dem.chunks == local.chunks and dem.rio.transform() == local.rio.transform()
        np.testing.assert_array_equal(dem.values, local.values)


@pytest.mark.parametrize("name", ["points.csv", "points.parquet", "points.gpkg", "points.las"])
def test_read_points_from_s3_equals_local(store, name):
    folder, bucket, crs = store
    local = read_points(folder / name, source_crs=crs)
    for source in (f"s3://{bucket}/in/{name}", f"/vsis3/{bucket}/in/{name}"):
        points = read_points(source, source_crs=crs)
        assert points.count == local.count > 0 and points.name == source
        for axis in ("x", "y", "z"):
            np.testing.assert_array_equal(getattr(points, axis), getattr(local, axis))


def _coreg_json(ref: str, tba: str, out: Path, *extra: str) -> dict:
    _ok(["coreg", ref, tba, "-o", str(out), "--json-out", str(out.with_suffix(".json")), "--quiet", *extra])
    return json.loads(out.with_suffix(".json").read_text())


@pytest.mark.parametrize("form", ["s3://", "/vsis3/"])
def test_coreg_with_masks_from_s3_equals_local(store, tmp_path, form):
    folder, bucket, _ = store
    url = f"{form}{bucket}/in"
    local = _coreg_json(str(folder / "ref.tif"), str(folder / "tba.tif"), tmp_path / "local.tif",
                        "--inlier-mask", str(folder / "inlier.gpkg"), "--exclude-mask", str(folder / "exclude.tif"))
    there = _coreg_json(f"{url}/ref.tif", f"{url}/tba.tif", tmp_path / "s3.tif",
                        "--inlier-mask", f"{url}/inlier.gpkg", "--exclude-mask", f"{url}/exclude.tif")
    assert there["steps"] == local["steps"] and there["stats"] == local["stats"]
    assert there["inputs"]["reference"] == f"{url}/ref.tif" and there["inputs"]["inlier_mask"] == f"{url}/inlier.gpkg"
    assert there["input_checks"] == local["input_checks"]
    np.testing.assert_array_equal(xdem.open_dem(tmp_path / "s3.tif").values, xdem.open_dem(tmp_path / "local.tif").values)
    unmasked = _coreg_json(str(folder / "ref.tif"), str(folder / "tba.tif"), tmp_path / "plain.tif")
    assert unmasked["stats"] != local["stats"]  # the masks were read and used


def test_coreg_with_points_from_s3_equals_local(store, tmp_path):
    folder, bucket, crs = store
    local = _coreg_json(str(folder / "points.csv"), str(folder / "tba.tif"), tmp_path / "local.tif",
                        "--points-crs", crs)
    there = _coreg_json(f"s3://{bucket}/in/points.csv", f"s3://{bucket}/in/tba.tif", tmp_path / "s3.tif",
                        "--points-crs", crs)
    assert there["steps"] == local["steps"]
    np.testing.assert_array_equal(xdem.open_dem(tmp_path / "s3.tif").values, xdem.open_dem(tmp_path / "local.tif").values)


def test_info_convert_terrain_from_s3_equal_local(store, tmp_path):
    folder, bucket, _ = store
    url = f"s3://{bucket}/in"
    for name in ("ref.tif", "points.gpkg"):
        assert json.loads(_ok(["info", f"{url}/{name}", "--json"]))["bounds"] == json.loads(
            _ok(["info", str(folder / name), "--json"]))["bounds"]
    _ok(["convert", f"/vsis3/{bucket}/in/ref.tif", str(tmp_path / "c_s3.tif")])
    _ok(["convert", str(folder / "ref.tif"), str(tmp_path / "c_local.tif")])
    _ok(["terrain", f"{url}/ref.tif", "-o", str(tmp_path / "t_s3"), "-a", "slope,aspect"])
    _ok(["terrain", str(folder / "ref.tif"), "-o", str(tmp_path / "t_local"), "-a", "slope,aspect"])
    for a, b in (("c_s3.tif", "c_local.tif"), ("t_s3/slope.tif", "t_local/slope.tif"),
                 ("t_s3/aspect.tif", "t_local/aspect.tif")):
        np.testing.assert_array_equal(xdem.open_dem(tmp_path / a).values, xdem.open_dem(tmp_path / b).values)


@pytest.mark.parametrize(("where", "what"), [
    ("ref", "404"), ("ref", "bucket"), ("inlier", "404"), ("exclude", "bucket"), ("points", "404")])
def test_missing_input_is_one_line(store, tmp_path, where, what):
    folder, bucket, crs = store
    bad = f"s3://{bucket}/in/nosuch" if what == "404" else "s3://no-such-bucket-xdem/in/nosuch"
    bad += {"ref": ".tif", "inlier": ".gpkg", "exclude": ".tif", "points": ".csv"}[where]
    ref = bad if where in ("ref", "points") else str(folder / "ref.tif")
    args = ["coreg", ref, f"s3://{bucket}/in/tba.tif", "-o", str(tmp_path / "o.tif")]
    args += ["--points-crs", crs] if where == "points" else []
    if where in ("inlier", "exclude"):
        args += [f"--{where}-mask", bad]
    said = "404" if what == "404" else "does not exist"
    _one_line(args, bad, said)
    assert not (tmp_path / "o.tif").exists()


@pytest.mark.parametrize("command", ["info", "convert", "terrain"])
def test_missing_input_of_each_command_is_one_line(store, tmp_path, command):
    _, bucket, _ = store
    bad = f"s3://{bucket}/in/nosuch.tif"
    args = {"info": [bad], "convert": [bad, str(tmp_path / "o.tif")],
            "terrain": [bad, "-o", str(tmp_path / "o.tif"), "-a", "slope"]}[command]
    _one_line([command, *args], bad, "404")


def test_points_info_missing_is_one_line(store):
    _, bucket, _ = store
    bad = f"/vsis3/{bucket}/in/nosuch.parquet"
    _one_line(["info", bad], f"s3://{bucket}/in/nosuch.parquet", "404")


def test_endpoint_nobody_listens_on_is_one_line(store, tmp_path, monkeypatch):
    folder, _, _ = store
    endpoint = f"127.0.0.1:{free_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{endpoint}")
    monkeypatch.setenv("AWS_S3_ENDPOINT", endpoint)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        for bad, flag in (("s3://bucket-x/ref.tif", None), ("s3://bucket-x/mask.gpkg", "--exclude-mask")):
            ref = str(folder / "ref.tif") if flag else bad
            args = ["coreg", ref, str(folder / "tba.tif"), "-o", str(tmp_path / "o.tif")]
            _one_line(args + ([flag, bad] if flag else []), bad, "no answer")
    finally:
        s3fs.S3FileSystem.clear_instance_cache()


# ---------------------------------------------------------------------------- credentials


@pytest.fixture(scope="module")
def locked(store):
    """A second S3 server that authenticates (moto's INITIAL_NO_AUTH_ACTION_COUNT): an IAM
    user's keys, a bucket with the pair and a mask, written with them; the environment keeps
    keys the server does not know. ``(folder, bucket, (key id, secret))``. It stays the server of
    the environment until the module ends: the tests using it come last."""
    folder = store[0]
    with s3_server(auth_after=3):
        keys = iam_user()
        client = s3_client(aws_access_key_id=keys[0], aws_secret_access_key=keys[1])
        bucket = "xdem-locked"
        client.create_bucket(Bucket=bucket)
        for name in ("ref.tif", "tba.tif", "inlier.gpkg"):
            client.upload_file(str(folder / name), bucket, f"in/{name}")
        s3fs.S3FileSystem.clear_instance_cache()
        yield folder, bucket, keys
    s3fs.S3FileSystem.clear_instance_cache()


def _profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keys: tuple[str, str]) -> None:
    """Credentials only in a profile of a shared credentials file (none in the environment)."""
    path = tmp_path / "credentials"
    path.write_text(f"[xdem-test]\naws_access_key_id = {keys[0]}\naws_secret_access_key = {keys[1]}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(path))
    monkeypatch.setenv("AWS_PROFILE", "xdem-test")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    s3fs.S3FileSystem.clear_instance_cache()


def test_forbidden_names_the_credential_source(locked, tmp_path):
    folder, bucket, _ = locked
    for flag in ("--inlier-mask", None):
        url = f"s3://{bucket}/in/" + ("inlier.gpkg" if flag else "ref.tif")
        ref = str(folder / "ref.tif") if flag else url
        args = ["coreg", ref, str(folder / "tba.tif"), "-o", str(tmp_path / "o.tif")] + ([flag, url] if flag else [])
        _one_line(args, url, "403", "environment variables")


def test_anonymous_is_unsigned(locked, tmp_path):
    _, bucket, _ = locked
    url = f"s3://{bucket}/in/ref.tif"
    before = os.environ.get("AWS_NO_SIGN_REQUEST")
    _one_line(["info", url, "--anonymous"], url, "403", "anonymous (AWS_NO_SIGN_REQUEST)")
    _one_line(["convert", url, str(tmp_path / "c.tif"), "--anonymous"], url, "403", "anonymous")
    _one_line(["terrain", url, "-o", str(tmp_path / "t.tif"), "-a", "slope", "--anonymous"], url, "403", "anonymous")
    assert os.environ.get("AWS_NO_SIGN_REQUEST") == before  # for the run only


def test_profile_credentials_read_and_equal_local(locked, tmp_path, monkeypatch):
    folder, bucket, keys = locked
    _profile(tmp_path, monkeypatch, keys)
    assert remote.credential_source() == "profile 'xdem-test' (the shared credentials file)"
    url = f"s3://{bucket}/in"
    local = _coreg_json(str(folder / "ref.tif"), str(folder / "tba.tif"), tmp_path / "local.tif",
                        "--inlier-mask", str(folder / "inlier.gpkg"))
    there = _coreg_json(f"{url}/ref.tif", f"/vsis3/{bucket}/in/tba.tif", tmp_path / "s3.tif",
                        "--inlier-mask", f"{url}/inlier.gpkg")
    assert there["steps"] == local["steps"] and there["stats"] == local["stats"]
    np.testing.assert_array_equal(xdem.open_dem(tmp_path / "s3.tif").values, xdem.open_dem(tmp_path / "local.tif").values)


def test_credentials_never_shown(locked, tmp_path, monkeypatch):
    """The IAM secret, a bearer token in GDAL_HTTP_HEADERS and an AWS session token, planted,
    appear in none of the output, the JSON, the report and the one-line errors."""
    pytest.importorskip("matplotlib")
    folder, bucket, keys = locked
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", keys[0])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", keys[1])
    monkeypatch.setenv("GDAL_HTTP_HEADERS", "Authorization: Bearer PLANTED-TOKEN-7f3a")
    s3fs.S3FileSystem.clear_instance_cache()
    secrets = (keys[1], "PLANTED-TOKEN-7f3a")
    url = f"s3://{bucket}/in"
    out = tmp_path / "s3.tif"
    shown = _ok(["coreg", f"{url}/ref.tif", f"{url}/tba.tif", "-o", str(out), "--inlier-mask", f"{url}/inlier.gpkg",
                 "--json-out", str(tmp_path / "run.json"), "--report", str(tmp_path / "run.html"), "--json"])
    shown += _one_line(["info", f"{url}/nosuch.tif"], "404")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", keys[1] + "x")  # a wrong secret: refused, said without it
    s3fs.S3FileSystem.clear_instance_cache()
    shown += _one_line(["info", f"{url}/ref.tif"], "403", "environment variables")
    for text in (shown, (tmp_path / "run.json").read_text(), (tmp_path / "run.html").read_text()):
        assert text and not any(s in text for s in secrets)
