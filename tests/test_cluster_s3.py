"""Object storage on a cluster without a shared disk (issue 25, item 5): ``xdem coreg s3://...``
with ``-o s3://...tif`` and ``-o s3://...zarr`` on two ``distributed.Nanny`` workers that each have
their own ``local_directory``, ``TMPDIR`` and working directory, against moto's S3 server on
127.0.0.1 (tests/servers.py). The results equal the same run on local files with the threaded
scheduler bit for bit, and the workers write no file (the audit of
``tests/test_cluster_no_shared_disk.py``).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import rasterio
from click.testing import CliRunner
from servers import new_bucket, s3_client, s3_server
from test_cluster_no_shared_disk import _worker_tmp_files, _worker_writes, own_folder_cluster

import xdem
from xdem.cli import main
from xdem.examples import write_example_pair

pytestmark = pytest.mark.slow

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The S3 server (its environment set before the workers start: they inherit it), a bucket
    with the example pair, and the local pair: (bucket, local pair)."""
    pair = write_example_pair(tmp_path_factory.mktemp("s3-cluster-pair"))
    with s3_server():
        bucket = new_bucket("cluster")
        for name in ("ref", "tba"):
            s3_client().upload_file(str(pair[name]), bucket, f"in/{name}.tif")
        yield bucket, pair


@pytest.fixture(scope="module")
def cluster(store, tmp_path_factory):
    """Workers with their own folders, started once the S3 server's environment is set."""
    with own_folder_cluster(tmp_path_factory.mktemp("s3-workers")) as running:
        yield running


def _coreg(inputs: list[str], output: str, scheduler: str) -> dict:
    res = CliRunner().invoke(main, ["coreg", *inputs, "-o", output, "--method", "nuthkaab", "--scheduler", scheduler,
                                    "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_coreg_s3_to_s3_cog_on_cluster(store, cluster, tmp_path):
    bucket, pair = store
    spec, client, folders = cluster
    local = _coreg([str(pair["ref"]), str(pair["tba"])], str(tmp_path / "local.tif"), "threads")
    transitions = spec.scheduler.transition_counter
    doc = _coreg([f"s3://{bucket}/in/ref.tif", f"s3://{bucket}/in/tba.tif"], f"s3://{bucket}/out/aligned.tif",
                 spec.scheduler_address)
    assert doc["workers"] == 2 and spec.scheduler.transition_counter > transitions + 100  # ran on the cluster
    assert doc["steps"] == local["steps"] and doc["stats"] == local["stats"]
    s3_client().download_file(bucket, "out/aligned.tif", str(tmp_path / "got.tif"))
    with rasterio.open(tmp_path / "got.tif") as got, rasterio.open(tmp_path / "local.tif") as want:
        np.testing.assert_array_equal(got.read(1), want.read(1))
        assert got.profile == want.profile
    assert _worker_tmp_files(folders) == set()
    assert _worker_writes(client, folders) == []


def test_coreg_s3_to_s3_zarr_on_cluster(store, cluster, tmp_path):
    bucket, pair = store
    spec, client, folders = cluster
    local = _coreg([str(pair["ref"]), str(pair["tba"])], str(tmp_path / "local.zarr"), "threads")
    doc = _coreg([f"s3://{bucket}/in/ref.tif", f"s3://{bucket}/in/tba.tif"], f"s3://{bucket}/out/aligned.zarr",
                 spec.scheduler_address)
    assert doc["workers"] == 2 and doc["steps"] == local["steps"]
    got = xdem.open_dem(f"s3://{bucket}/out/aligned.zarr")
    want = xdem.open_dem(tmp_path / "local.zarr")
    np.testing.assert_array_equal(got.values, want.values)
    assert got.rio.crs == want.rio.crs and got.rio.transform() == want.rio.transform()
    assert _worker_tmp_files(folders) == set()
    assert _worker_writes(client, folders) == []
