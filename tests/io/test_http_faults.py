"""Faults of a remote DEM read over HTTP, from a real server on 127.0.0.1 (tests/servers.py):
503 answers then 200 (GDAL retries them), a connection dropped mid-read (xdem reads the chunk
again from a fresh, uncached open), faults that persist (one line, exit 1).

Each test serves its own copies of the pair under new names: GDAL caches what it downloaded per
URL for the life of the process, so a file read by an earlier test would hide a fault.
"""

from __future__ import annotations

import json
import shutil
import uuid

import numpy as np
import pytest
from click.testing import CliRunner
from servers import environ, http_server, requests_of, set_faults

import xdem
from xdem.cli import main
from xdem.errors import InputError
from xdem.examples import write_example_pair


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(folder served, base URL, request log, local aligned DEM of the same run)."""
    folder = tmp_path_factory.mktemp("served")
    pair = write_example_pair(tmp_path_factory.mktemp("pair"))
    for name in ("ref", "tba"):
        xdem.write_cog(xdem.open_dem(pair[name]), folder / f"{name}.tif")
    local = tmp_path_factory.mktemp("local") / "aligned.tif"
    res = CliRunner().invoke(main, ["coreg", str(folder / "ref.tif"), str(folder / "tba.tif"), "-o", str(local)])
    assert res.exit_code == 0, res.output
    log = folder.parent / f"{folder.name}.log"
    # a short backoff: a fast test
    with environ({"GDAL_HTTP_MAX_RETRY": "3", "GDAL_HTTP_RETRY_DELAY": "0.1"}), http_server(folder, log) as url:
        yield folder, url, log, xdem.open_dem(local).values


def _copies(folder) -> tuple[str, str]:
    """New names for the pair in ``folder`` (nothing cached for them yet): (ref, tba) file names."""
    tag = uuid.uuid4().hex[:8]
    for name in ("ref", "tba"):
        shutil.copyfile(folder / f"{name}.tif", folder / f"{name}-{tag}.tif")
    return f"ref-{tag}.tif", f"tba-{tag}.tif"


def _coreg(url: str, ref: str, tba: str, out, *, json_out: bool = False) -> tuple[int, str]:
    res = CliRunner().invoke(main, ["coreg", f"{url}/{ref}", f"{url}/{tba}", "-o", str(out), *(["--json"] * json_out)])
    return res.exit_code, res.stdout if json_out and res.exit_code == 0 else res.output


def test_503_answers_are_retried(served, tmp_path):
    folder, url, log, aligned = served
    ref, tba = _copies(folder)
    log.unlink(missing_ok=True)
    set_faults(folder, {f"/{ref}": {"status": 503, "times": 2}})
    code, output = _coreg(url, ref, tba, tmp_path / "a.tif")
    assert code == 0, output
    statuses = [r[3] for r in requests_of(log) if r[1] == f"/{ref}"]
    assert statuses[:2] == [503, 503] and all(s in (200, 206) for s in statuses[2:]) and len(statuses) > 2
    np.testing.assert_array_equal(xdem.open_dem(tmp_path / "a.tif").values, aligned)


def test_persistent_503_is_one_line(served):
    folder, url, _, _ = served
    ref, _ = _copies(folder)
    set_faults(folder, {f"/{ref}": {"status": 503}})
    with pytest.raises(InputError, match=rf"'{url}/{ref}' \(the server answered HTTP 503\)"):
        xdem.open_dem(f"{url}/{ref}")


def test_connection_dropped_mid_read_is_retried(served, tmp_path):
    folder, url, log, aligned = served
    ref, tba = _copies(folder)
    log.unlink(missing_ok=True)
    # the header (first GET) comes whole, the tile data's GET is cut after 3000 bytes, once
    set_faults(folder, {f"/{tba}": {"drop_after": 3000, "times": 1, "after": 1}})
    code, output = _coreg(url, ref, tba, tmp_path / "a.tif", json_out=True)
    assert code == 0, output
    gets = [r for r in requests_of(log) if r[1] == f"/{tba}" and r[0] == "GET"]
    assert [r[3] for r in gets].count(-1) == 1 and gets[-1][3] in (200, 206), gets  # dropped, then read again
    np.testing.assert_array_equal(xdem.open_dem(tmp_path / "a.tif").values, aligned)
    assert json.loads(output)["verdict"]["status"] == "ok"


def test_connection_always_dropped_is_one_line(served, tmp_path):
    folder, url, _, _ = served
    ref, tba = _copies(folder)
    set_faults(folder, {f"/{tba}": {"drop_after": 3000, "after": 1}})
    code, output = _coreg(url, ref, tba, tmp_path / "a.tif")
    lines = [line for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error")]  # after the progress lines (stderr)
    assert code == 1 and len(errors) == 1 and errors[0] == lines[-1], output
    assert f"'{url}/{tba}'" in errors[0] and "the connection failed" in errors[0] and "after 3 attempts" in errors[0]
    assert "Traceback" not in output and not (tmp_path / "a.tif").exists()
