"""DEM inputs over HTTP(S): a Range-capable HTTP server on 127.0.0.1 started by the tests.

The server runs in its own process (``python test_http.py FOLDER LOG``): GDAL holds the GIL
while it opens a file, so a server thread of the test process would never answer.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import xdem
from xdem.cli import main
from xdem.errors import InputError
from xdem.examples import write_example_pair
from xdem.io.remote import gdal_path, is_remote, redact

#: Paths the server refuses, and with what.
REFUSED = {"/forbidden.tif": 403}


class RangeHandler(SimpleHTTPRequestHandler):
    """HEAD and GET of a folder's files, with ``Range: bytes=a-b`` (206) and chosen refusals."""

    log: Path | None = None

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
        pass

    def _file(self) -> Path | None:
        path = self.path.split("?")[0]
        if RangeHandler.log is not None:
            with RangeHandler.log.open("a") as f:
                f.write(json.dumps([self.command, path, self.headers.get("Range")]) + "\n")
        if path in REFUSED:
            self.send_error(REFUSED[path])
            return None
        target = Path(self.directory) / path.lstrip("/")
        if not target.is_file():
            self.send_error(404)
            return None
        return target

    def do_HEAD(self) -> None:  # noqa: N802
        target = self._file()
        if target is not None:
            self.send_response(200)
            self.send_header("Content-Length", str(target.stat().st_size))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()

    def do_GET(self) -> None:  # noqa: N802
        target = self._file()
        if target is None:
            return
        data = target.read_bytes()
        wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range") or "")
        if wanted:
            start = int(wanted.group(1))
            end = min(int(wanted.group(2) or len(data) - 1), len(data) - 1)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
            data = data[start:end + 1]
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The example pair as COGs in a folder served on 127.0.0.1: (local folder, base URL)."""
    folder = tmp_path_factory.mktemp("served")
    pair = write_example_pair(tmp_path_factory.mktemp("pair"))
    for name in ("ref", "tba"):
        xdem.write_cog(xdem.open_dem(pair[name]), folder / f"{name}.tif")
    log = folder.parent / f"{folder.name}.log"
    server = subprocess.Popen([sys.executable, __file__, str(folder), str(log)], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    port = int(server.stdout.readline())
    before = os.environ.get("GDAL_HTTP_MAX_RETRY")
    os.environ["GDAL_HTTP_MAX_RETRY"] = "0"  # a refusal is final: no retry
    try:
        yield folder, f"http://127.0.0.1:{port}"
    finally:
        if before is None:
            os.environ.pop("GDAL_HTTP_MAX_RETRY", None)
        else:
            os.environ["GDAL_HTTP_MAX_RETRY"] = before
        server.terminate()
        server.wait(10)


def _requests(folder: Path) -> list[list[str | None]]:
    log = folder.parent / f"{folder.name}.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_paths_are_recognised():
    assert gdal_path("https://h/x.tif") == "/vsicurl/https://h/x.tif"
    assert gdal_path("/vsicurl/http://h/x.tif") == "/vsicurl/http://h/x.tif"
    assert gdal_path("x.tif") == "x.tif" and not is_remote("x.tif")
    assert redact("see http://u:pw@h/x and https://h/y") == "see http://***@h/x and https://h/y"
    with pytest.raises(InputError, match=r"'s3://b/x.tif': s3:// URLs are not supported yet"):
        gdal_path("s3://b/x.tif")


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


if __name__ == "__main__":  # the server: python test_http.py FOLDER LOG; prints its port
    RangeHandler.log = Path(sys.argv[2])
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: RangeHandler(*a, directory=sys.argv[1]))
    print(httpd.server_address[1], flush=True)
    httpd.serve_forever()
