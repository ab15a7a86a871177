"""Coregistration and COG writing under dask.distributed: Python API and ``xdem coreg --scheduler tcp://``.

One local cluster of two single-threaded worker processes serves the whole module.
"""

from __future__ import annotations

import json

import dask
import numpy as np
import pytest
import rasterio
from click.testing import CliRunner
from rio_cogeo.cogeo import cog_validate

import xdem
import xdem.coreg
from xdem.cli import main
from xdem.examples import write_example_pair
from xdem.io.cog import write_cog

# end-to-end (real dask.distributed clusters): `pytest -m 'not slow'` leaves them out; `make test` runs them
pytestmark = pytest.mark.slow

distributed = pytest.importorskip("distributed")

SHIFTS = ("shift_x_", "shift_y_", "shift_z_")


@pytest.fixture(scope="module")
def cluster():
    import warnings

    with warnings.catch_warnings():  # another cluster on this machine may hold port 8787
        warnings.filterwarnings("ignore", message="Port .* is already in use")
        c = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
        )
    with c:
        yield c


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return write_example_pair(tmp_path_factory.mktemp("dpair"))


@pytest.fixture(scope="module")
def threaded(pair, tmp_path_factory):
    """Pipeline fitted and written with the local threaded scheduler: the reference result."""
    with dask.config.set(scheduler="threads"):
        model = xdem.coreg.CoregPipeline([xdem.coreg.NuthKaab(), xdem.coreg.VerticalShift()], random_state=7)
        model.fit(str(pair["ref"]), str(pair["tba"]))
        out = write_cog(model.apply(str(pair["tba"])), tmp_path_factory.mktemp("thr") / "aligned.tif")
    return model, out


def _read(path) -> np.ndarray:
    with rasterio.open(path) as src:
        return src.read(1)


def _task_prefixes(cluster) -> set[str]:
    return set(cluster.scheduler.task_prefixes)


def test_api_under_client_matches_threads(cluster, pair, threaded, tmp_path, monkeypatch):
    ref_model, ref_out = threaded
    real_lock, locks = distributed.Lock, []

    def spy_lock(*args, **kwargs):  # returns a real distributed.Lock, records that one was made
        locks.append(kwargs.get("name", args[0] if args else None))
        return real_lock(*args, **kwargs)

    monkeypatch.setattr(distributed, "Lock", spy_lock)
    with distributed.Client(cluster) as client:
        assert dask.base.get_scheduler() == client.get
        model = xdem.coreg.CoregPipeline([xdem.coreg.NuthKaab(), xdem.coreg.VerticalShift()], random_state=7)
        model.fit(str(pair["ref"]), str(pair["tba"]))
        out = write_cog(model.apply(str(pair["tba"])), tmp_path / "aligned.tif")
        assert "shift-overlap" in _task_prefixes(cluster)  # the workers resampled the blocks...
    assert locks == []  # ...and sent them back: this process wrote them, no task took a lock to write a file
    for mine, theirs in zip(model.steps, ref_model.steps):
        for k in SHIFTS:
            assert abs(getattr(mine, k) - getattr(theirs, k)) < 1e-9, k
    assert abs(model.steps[0].shift_x_ - pair["truth"]["shift_x"]) < 0.01
    assert cog_validate(str(out), quiet=True)[0]
    np.testing.assert_array_equal(_read(out), _read(ref_out))  # identical pixels, written by the client
    assert not list(tmp_path.glob(".xdem-tmp-*"))


def test_cli_with_tcp_scheduler(cluster, pair, threaded, tmp_path):
    ref_model, ref_out = threaded
    out = tmp_path / "cli.tif"
    address = cluster.scheduler_address
    assert address.startswith("tcp://")
    transitions = cluster.scheduler.transition_counter
    res = CliRunner().invoke(main, [
        "coreg", str(pair["ref"]), str(pair["tba"]), "-o", str(out), "--method", "nuthkaab+vshift",
        "--random-state", "7", "--scheduler", address, "--json",
    ])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["scheduler"] == address and doc["workers"] == 2
    assert cluster.scheduler.transition_counter > transitions + 100  # the work ran on the cluster
    for step, theirs in zip(doc["steps"], ref_model.steps):
        for k in SHIFTS:
            assert abs(step[k[:-1]] - getattr(theirs, k)) < 1e-9, k
    assert cog_validate(str(out), quiet=True)[0]
    np.testing.assert_array_equal(_read(out), _read(ref_out))
    assert doc["stats"]["after"]["nmad"] < doc["stats"]["before"]["nmad"]
    # The CLI's client is closed and no longer the scheduler once the command returns.
    assert not isinstance(getattr(dask.base.get_scheduler(), "__self__", None), distributed.Client)


def test_cli_unreachable_scheduler_is_one_line_error(pair, tmp_path, monkeypatch):
    import socket

    import xdem.cli._common

    monkeypatch.setattr(xdem.cli._common, "_CONNECT_TIMEOUT_S", 2)

    with socket.socket() as s:  # a free port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = CliRunner().invoke(main, [
        "coreg", str(pair["ref"]), str(pair["tba"]), "-o", str(tmp_path / "x.tif"),
        "--scheduler", f"tcp://127.0.0.1:{port}", "--quiet",
    ])
    assert res.exit_code == 1, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot connect to the dask scheduler" in lines[0]
    assert not (tmp_path / "x.tif").exists()


def test_processes_scheduler_starts_and_closes_a_local_cluster():
    import dask.array as da

    from xdem.cli._common import use_scheduler

    with use_scheduler("processes", workers=1) as info:
        client = info["client"]
        assert info["workers"] == 1 and info["address"].startswith("tcp://")
        assert len(client.scheduler_info()["workers"]) == 1
        assert dask.base.get_scheduler() == client.get
        assert int(da.ones(8, chunks=2).sum().compute()) == 8
    assert client.status == "closed"
    assert dask.base.get_scheduler() != client.get


def test_frame_warp_under_client_matches_threads(cluster, pair, tmp_path):
    """The frame route (a DEM in another CRS than the fit) runs on worker processes (its task
    spec pickles, pyproj transformers are made per worker thread) and gives the same pixels."""
    tba = xdem.open_dem(str(pair["tba"]), chunks=128)
    other = tba.rio.reproject("EPSG:32614").chunk(128)  # the bundled DEM is in UTM 15N
    nk = xdem.coreg.Coreg.from_dict({"method": "NuthKaab", "learned": {
        "shift_x_": -3.27, "shift_y_": 1.64, "shift_z_": -2.5, "crs_": tba.rio.crs.to_string()}})
    with dask.config.set(scheduler="threads"):
        expected = nk.apply(other).values
    with distributed.Client(cluster):
        got = nk.apply(other).values
        assert "warp" in _task_prefixes(cluster)
    assert np.isfinite(got).mean() > 0.5
    np.testing.assert_array_equal(got, expected)


def test_blockwise_under_client_matches_threads(cluster):
    """BlockwiseCoreg fits its tiles from threads of the client process (one lazy fit per tile, each
    computed by the cluster: no compute inside a task) and gets what the threaded scheduler gets."""
    from xdem.examples import example_pair
    from xdem.testing import _learned_numbers

    ref, tba, _ = example_pair(chunks=128)

    def make():
        return xdem.coreg.BlockwiseCoreg(xdem.coreg.NuthKaab(subsample=5000), block_size=200)

    with dask.config.set(scheduler="threads"):
        local = make().fit(ref, tba)
        want = local.apply(tba).values
    with distributed.Client(cluster):
        remote = make().fit(ref, tba)
        got = remote.apply(tba).values
        assert "warp" in _task_prefixes(cluster)
    np.testing.assert_allclose(_learned_numbers(remote), _learned_numbers(local), atol=1e-9, rtol=0)
    np.testing.assert_allclose(got, want, atol=1e-6, rtol=0, equal_nan=True)
