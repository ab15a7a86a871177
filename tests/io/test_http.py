"""DEM inputs over HTTP(S): a Range-capable HTTP server on 127.0.0.1 started by the tests.

The server (:func:`servers.http_server`) runs in its own process: GDAL holds the GIL while it
opens a file, so a server thread of the test process would never answer.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import write_masks, write_point_files
from servers import environ, http_server, requests_of, set_faults

import xdem
from xdem.cli import main
from xdem.errors import InputError
from xdem.examples import write_example_pair
from xdem.io import remote
from xdem.io.remote import gdal_path, is_remote, redact


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The example pair as COGs in a folder served on 127.0.0.1: (local folder, base URL)."""
    folder = tmp_path_factory.mktemp("served")
    pair = write_example_pair(tmp_path_factory.mktemp("pair"))
    for name in ("ref", "tba"):
        xdem.write_cog(xdem.open_dem(pair[name]), folder / f"{name}.tif")
    set_faults(folder, {"/forbidden.tif": {"status": 403}})
    log = folder.parent / f"{folder.name}.log"
    with environ({"GDAL_HTTP_MAX_RETRY": "0"}), http_server(folder, log) as url:  # a refusal is final: no retry
        yield folder, url


def _requests(folder: Path) -> list[list]:
    return requests_of(folder.parent / f"{folder.name}.log")


def test_paths_are_recognised():
    assert gdal_path("https://h/x.tif") == "/vsicurl/https://h/x.tif"
    assert gdal_path("/vsicurl/http://h/x.tif") == "/vsicurl/http://h/x.tif"
    assert gdal_path("x.tif") == "x.tif" and not is_remote("x.tif")
    assert redact("see http://u:pw@h/x and https://h/y") == "see http://***@h/x and https://h/y"
    assert gdal_path("s3://b/k/x.tif") == "/vsis3/b/k/x.tif" and gdal_path("gs://b/x.tif") == "/vsigs/b/x.tif"
    assert gdal_path("az://c/x.tif") == "/vsiaz/c/x.tif"
    with pytest.raises(InputError, match=r"'ftp://h/x.tif': ftp:// URLs are not supported"):
        gdal_path("ftp://h/x.tif")


@pytest.mark.parametrize(("url", "names"), [("gs://some-bucket/x.tif", "GS_SECRET_ACCESS_KEY"),
                                             ("az://container/x.tif", "AZURE_STORAGE_ACCOUNT")])
def test_google_and_azure_without_credentials_are_one_line(url, names, monkeypatch):
    for var in ("GS_SECRET_ACCESS_KEY", "GS_ACCESS_KEY_ID", "GOOGLE_APPLICATION_CREDENTIALS", "GS_NO_SIGN_REQUEST",
                "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_CONNECTION_STRING", "AZURE_NO_SIGN_REQUEST"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CPL_GS_CREDENTIALS_FILE", os.devnull)  # not a developer's ~/.boto
    res = CliRunner().invoke(main, ["info", url])
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert res.exit_code == 1 and len(lines) == 1, res.output
    assert f"'{url}' (no credentials: " in lines[0] and names in lines[0] and "NO_SIGN_REQUEST" in lines[0]


def test_open_dem_over_http_equals_local(served):
    folder, url = served
    local = xdem.open_dem(folder / "ref.tif")
    for source in (f"{url}/ref.tif", f"/vsicurl/{url}/ref.tif"):
        remote = xdem.open_dem(source)
        assert remote.chunks == local.chunks and remote.name == "ref"
        assert remote.rio.crs == local.rio.crs and remote.rio.transform() == local.rio.transform()
        np.testing.assert_array_equal(remote.values, local.values)


def test_open_dem_missing_url(served):
    _, url = served
    with pytest.raises(InputError, match=r"'http://127.0.0.1:\d+/nosuch.tif' .*HTTP 404"):
        xdem.open_dem(f"{url}/nosuch.tif")


def _coreg(args: list[str]) -> dict:
    res = CliRunner().invoke(main, ["coreg", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_coreg_over_http_equals_local(served, tmp_path):
    folder, url = served
    local = _coreg([str(folder / "ref.tif"), str(folder / "tba.tif"), "-o", str(tmp_path / "local.tif")])
    (folder.parent / f"{folder.name}.log").unlink(missing_ok=True)
    remote = _coreg([f"{url}/ref.tif", f"{url}/tba.tif", "-o", str(tmp_path / "remote.tif")])
    assert remote["steps"] == local["steps"]
    assert any(r[2] and r[2].startswith("bytes=") for r in _requests(folder))
    np.testing.assert_array_equal(xdem.open_dem(tmp_path / "remote.tif").values,
                                  xdem.open_dem(tmp_path / "local.tif").values)


def test_info_over_http(served):
    _, url = served
    res = CliRunner().invoke(main, ["info", f"{url}/ref.tif", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["size"] == json.loads(
        CliRunner().invoke(main, ["info", str(served[0] / "ref.tif"), "--json"]).stdout)["size"]


@pytest.mark.parametrize(("name", "code"), [("nosuch.tif", "404"), ("forbidden.tif", "403")])
@pytest.mark.parametrize("command", ["coreg", "info"])
def test_refused_url_is_one_line(served, tmp_path, name, code, command):
    folder, url = served
    bad = f"{url}/{name}"
    args = [bad, str(folder / "tba.tif"), "-o", str(tmp_path / "o.tif")] if command == "coreg" else [bad]
    res = CliRunner().invoke(main, [command, *args])
    assert res.exit_code == 1, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and bad in lines[0] and code in lines[0], res.output
    assert "Traceback" not in res.output


def test_password_never_shown(served, tmp_path):
    folder, url = served
    bad = url.replace("http://", "http://user:s3cret@") + "/nosuch.tif"
    for args in (["info", bad], ["coreg", bad, str(folder / "tba.tif"), "-o", str(tmp_path / "o.tif")]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 1 and "s3cret" not in res.output and "***@" in res.output, res.output


@pytest.fixture(scope="module")
def served_inputs(served):
    """The masks and points of the pair (:func:`helpers.write_masks`,
    :func:`helpers.write_point_files`) served next to it: (local folder, base URL, points CRS)."""
    folder, url = served
    write_masks(folder)
    return folder, url, write_point_files(folder)


def _coreg_run(ref: str, tba: str, out: Path, *extra: str) -> dict:
    res = CliRunner().invoke(main, ["coreg", ref, tba, "-o", str(out), "--json", "--quiet", *extra])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_coreg_with_masks_over_http_equals_local(served_inputs, tmp_path):
    folder, url, _ = served_inputs
    masks = lambda base: ["--inlier-mask", f"{base}/inlier.gpkg", "--exclude-mask", f"{base}/exclude.tif"]  # noqa: E731
    local = _coreg_run(str(folder / "ref.tif"), str(folder / "tba.tif"), tmp_path / "local.tif", *masks(str(folder)))
    (folder.parent / f"{folder.name}.log").unlink(missing_ok=True)
    there = _coreg_run(f"{url}/ref.tif", f"/vsicurl/{url}/tba.tif", tmp_path / "http.tif", *masks(url))
    assert there["steps"] == local["steps"] and there["stats"] == local["stats"]
    asked = {r[1] for r in _requests(folder)}
    assert {"/inlier.gpkg", "/exclude.tif"} <= asked
    np.testing.assert_array_equal(xdem.open_dem(tmp_path / "http.tif").values,
                                  xdem.open_dem(tmp_path / "local.tif").values)


@pytest.mark.parametrize("name", ["points.csv", "points.parquet", "points.gpkg", "points.las"])
def test_points_over_http_equal_local(served_inputs, name):
    folder, url, crs = served_inputs
    local = xdem.points.read_points(folder / name, source_crs=crs)
    there = xdem.points.read_points(f"{url}/{name}", source_crs=crs)
    assert there.count == local.count > 0
    for axis in ("x", "y", "z"):
        np.testing.assert_array_equal(getattr(there, axis), getattr(local, axis))


def test_coreg_with_points_over_http_equals_local(served_inputs, tmp_path):
    folder, url, crs = served_inputs
    local = _coreg_run(str(folder / "points.csv"), str(folder / "tba.tif"), tmp_path / "l.tif", "--points-crs", crs)
    there = _coreg_run(f"{url}/points.csv", f"{url}/tba.tif", tmp_path / "h.tif", "--points-crs", crs)
    assert there["steps"] == local["steps"]
    np.testing.assert_array_equal(xdem.open_dem(tmp_path / "h.tif").values, xdem.open_dem(tmp_path / "l.tif").values)


@pytest.mark.parametrize(("flag", "name", "code"), [
    ("--inlier-mask", "nosuch.gpkg", "404"), ("--exclude-mask", "nosuch.tif", "404"),
    ("--exclude-mask", "forbidden.gpkg", "403"), ("points", "nosuch.csv", "404"), ("points", "forbidden.csv", "403")])
def test_refused_mask_or_points_url_is_one_line(served_inputs, tmp_path, flag, name, code):
    folder, url, crs = served_inputs
    set_faults(folder, {"/forbidden.tif": {"status": 403}, "/forbidden.gpkg": {"status": 403},
                        "/forbidden.csv": {"status": 403}})
    bad = url.replace("http://", "http://user:s3cret@") + f"/{name}"
    ref = bad if flag == "points" else str(folder / "ref.tif")
    args = ["coreg", ref, str(folder / "tba.tif"), "-o", str(tmp_path / "o.tif"), "--points-crs", crs]
    if flag != "points":
        args = [*args[:-2], flag, bad]
    res = CliRunner().invoke(main, args)
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert res.exit_code == 1 and len(lines) == 1 and "Traceback" not in res.output, res.output
    shown = bad.replace("user:s3cret@", "***@")
    assert shown in lines[0] and code in lines[0] and "s3cret" not in res.output, res.output


def test_table_over_http_with_gdal_credentials(served_inputs, monkeypatch):
    """A table over HTTP is read with the headers GDAL sends for rasters (GDAL_HTTP_HEADERS)."""
    folder, url, crs = served_inputs
    monkeypatch.setenv("GDAL_HTTP_HEADERS", "X-Test-Token: abc, X-Other: 1")
    assert remote.filesystem(url).kwargs["headers"] == {"X-Test-Token": "abc", "X-Other": "1"}
    assert xdem.points.read_points(f"{url}/points.csv", source_crs=crs).count > 0


def test_url_password_never_in_output_or_json(served_inputs, tmp_path):
    """A run that reads URLs with a password (the server ignores it) shows and records them as
    ``***@``: the output, the JSON's inputs."""
    folder, url, _ = served_inputs
    base = url.replace("http://", "http://user:s3cret@")
    res = CliRunner().invoke(main, ["coreg", f"{base}/ref.tif", f"{base}/tba.tif", "-o", str(tmp_path / "o.tif"),
                                    "--inlier-mask", f"{base}/inlier.gpkg", "--json-out", str(tmp_path / "o.json")])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "o.json").read_text())
    hidden = url.replace("http://", "http://***@")
    assert doc["inputs"]["reference"] == f"{hidden}/ref.tif" and doc["inputs"]["inlier_mask"] == f"{hidden}/inlier.gpkg"
    assert "s3cret" not in res.output and "s3cret" not in (tmp_path / "o.json").read_text()
