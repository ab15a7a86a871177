"""The run-scoped spill of decoded input chunks (:mod:`xdem.io._spill`): with it, each chunk of
each compressed input is decoded once per ``xdem coreg`` run, and the run's results are the same
to the bit as without it; the spill never outlives its run (success, failure, SIGTERM) and is
not used where it cannot be (short disk, distributed schedulers).

Decodes are counted by wrapping ``xdem.io.open._NamedReader._decode`` (the one place a window
of a file is read with rasterio), per window.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import os
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import rasterio
from forkserver import wait_stopped
from helpers import write_tif
from servers import environ, http_server, requests_of
from test_signals import deliver

import xdem
from xdem.coreg import _blockwise_draw as blockwise_draw
from xdem.coreg import _blockwise_samples as blockwise_samples
from xdem.errors import InputError
from xdem.io import _spill
from xdem.io import open as io_open
from xdem.workflows import CoregRequest, run_coreg
from xdem.workflows import coreg as workflow

N, CHUNK = 600, 256
#: chunks of one input: 3 x 3 of 256 (the last ones 88 pixels)
N_CHUNKS = 9
#: what differs between two runs of the same request
VOLATILE = ("timing", "peak_rss_mb", "peak_rss_children_mb", "output")


def _terrain(seed: int) -> np.ndarray:
    y, x = np.mgrid[0:N, 0:N].astype(np.float32)
    noise = np.random.default_rng(seed).normal(0, 0.3, x.shape)
    return (100 + 20 * np.sin(x / 50) * np.cos(y / 70) + 0.01 * x + noise).astype(np.float32)


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    """REF and TBA (REF shifted by (1, -2) pixels and raised by 1 m), deflate-compressed tiled GeoTIFFs."""
    folder = tmp_path_factory.mktemp("spill_pair")
    ref = _terrain(0)
    tba = np.roll(ref, (1, -2), axis=(0, 1)) + np.float32(1)
    write_tif(folder / "ref.tif", ref, tiled=True, blocksize=128)
    write_tif(folder / "tba.tif", tba, tiled=True, blocksize=128)
    return folder / "ref.tif", folder / "tba.tif"


@contextlib.contextmanager
def counted_decodes() -> Iterator[collections.Counter]:
    """Count every window decoded from a file: ``(file name, row0, row1, col0, col1) -> calls``."""
    calls: collections.Counter = collections.Counter()
    original = io_open._NamedReader._decode

    def decode(self: io_open._NamedReader, key: tuple[slice, ...]) -> np.ndarray:
        calls[(Path(str(self.path)).name, key[1].start, key[1].stop, key[2].start, key[2].stop)] += 1
        return original(self, key)

    io_open._NamedReader._decode = decode  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        io_open._NamedReader._decode = original  # type: ignore[method-assign]


def _run(ref: str | Path, tba: str | Path, out: Path, *, spill: bool, monkeypatch: pytest.MonkeyPatch,
         coreg: xdem.coreg.Coreg | None = None) -> tuple[str, dict, collections.Counter]:
    """One run: the sha256 of the output's pixels, its document without the volatile keys, the decodes."""
    monkeypatch.setenv(_spill.SPILL_ENV, "1" if spill else "0")
    with counted_decodes() as calls:
        result = run_coreg(CoregRequest(reference=str(ref), to_be_aligned=str(tba), output=str(out),
                                        coreg=coreg if coreg is not None else xdem.coreg.NuthKaab(), chunks=CHUNK))
    with rasterio.open(out) as src:
        digest = hashlib.sha256(src.read().tobytes()).hexdigest()
    doc = {k: v for k, v in json.loads(result.json_text).items() if k not in VOLATILE}
    return digest, doc, calls


@pytest.fixture(scope="module")
def runs(pair, tmp_path_factory) -> dict[bool, tuple[str, dict, collections.Counter, list[str]]]:
    """The same NuthKaab run with and without the spill, each in a folder of its own (and what it left there)."""
    out: dict[bool, tuple[str, dict, collections.Counter, list[str]]] = {}
    with pytest.MonkeyPatch.context() as mp:
        for spill in (True, False):
            folder = tmp_path_factory.mktemp(f"spill_{spill}")
            digest, doc, calls = _run(*pair, folder / "aligned.tif", spill=spill, monkeypatch=mp)
            out[spill] = (digest, doc, calls, sorted(os.listdir(folder)))
    return out


def test_spill_on_and_off_give_the_same_aligned_dem_and_document(runs):
    (on_digest, on_doc, _, _), (off_digest, off_doc, _, _) = runs[True], runs[False]
    assert on_digest == off_digest
    assert json.dumps(on_doc, sort_keys=True) == json.dumps(off_doc, sort_keys=True)
    assert on_doc["verdict"]["ok"] and abs(on_doc["steps"][0]["shift_z"] + 1.0) < 0.05  # a real fit, not NaNs


def test_each_chunk_of_each_input_is_decoded_once_with_the_spill(runs):
    on, off = runs[True][2], runs[False][2]
    assert set(on.values()) == {1}
    assert sorted(on) == sorted(k for k in off if k[0] in ("ref.tif", "tba.tif"))  # the same windows: the chunks
    assert sum(1 for k in on if k[0] == "ref.tif") == N_CHUNKS and sum(1 for k in on if k[0] == "tba.tif") == N_CHUNKS
    assert sum(off.values()) >= 2 * sum(on.values())  # without: each read again by the write pass


def test_the_spill_is_gone_after_a_run(runs):
    assert runs[True][3] == ["aligned.tif"]


def test_the_spill_is_gone_after_a_failed_run(pair, tmp_path, monkeypatch):
    seen: list[list[str]] = []

    def failing_measure(state: object) -> None:
        seen.append(sorted(os.listdir(tmp_path)))
        raise InputError("a failure after the write pass")

    monkeypatch.setattr(workflow, "measure", failing_measure)
    with pytest.raises(InputError, match="a failure after the write pass"):
        _run(*pair, tmp_path / "aligned.tif", spill=True, monkeypatch=monkeypatch)
    assert sum(name.endswith("spill-0.raw") or name.endswith("spill-1.raw") for name in seen[0]) == 2  # it was there
    assert os.listdir(tmp_path) == []


def test_no_spill_when_the_disk_is_short(pair, tmp_path, monkeypatch):
    # enough for the write pass's reserve and margin, not for one input's raw values (N * N * 4 bytes)
    monkeypatch.setattr(_spill, "free_bytes", lambda folder: 4 * N * N * 3 + _spill.MARGIN_BYTES + N * N * 4 - 1)
    with _spill.spill_scope(folder=tmp_path, reserve=4 * N * N * 3) as spill:
        assert spill is not None
        assert spill.file("x", shape=(N, N), dtype=np.dtype("float32"), chunks=(CHUNK, CHUNK)) is None
    monkeypatch.setattr(_spill, "free_bytes", lambda folder: 10 * 2**20)
    _, _, calls = _run(*pair, tmp_path / "aligned.tif", spill=True, monkeypatch=monkeypatch)
    assert max(calls.values()) > 1
    assert os.listdir(tmp_path) == ["aligned.tif"]


@pytest.mark.parametrize("scheduler", ["tcp://127.0.0.1:8786", "processes"])
def test_no_spill_on_a_distributed_or_process_scheduler(scheduler, pair, tmp_path, monkeypatch):
    @contextlib.contextmanager
    def environment() -> Iterator[dict]:  # the run computes here; the scheduler it is told of decides
        yield {"scheduler": scheduler, "workers": 2, "address": None, "client": None}

    monkeypatch.setenv(_spill.SPILL_ENV, "1")
    scopes: list[object] = []
    real_scope = workflow.spill_scope

    @contextlib.contextmanager
    def watched(**kwargs: object) -> Iterator[object]:
        with real_scope(**kwargs) as spill:  # type: ignore[arg-type]
            scopes.append(spill)
            yield spill

    monkeypatch.setattr(workflow, "spill_scope", watched)
    request = CoregRequest(reference=str(pair[0]), to_be_aligned=str(pair[1]), output=str(tmp_path / "a.tif"),
                           coreg=xdem.coreg.VerticalShift(), chunks=CHUNK, stats="none")
    run_coreg(request, environment=environment())
    assert scopes == [None]


def test_a_window_across_chunks_reads_what_was_put_and_a_full_disk_stops_the_spill(tmp_path, monkeypatch):
    values = np.arange(7 * 19, dtype=np.int16).reshape(7, 19)
    f = _spill.SpillFile(tmp_path / "s.raw", shape=(7, 19), dtype=np.dtype("int16"), chunks=(3, 8))
    f.put(slice(0, 3), slice(1, 9), values[0:3, 1:9])  # not a chunk of the grid: ignored
    assert f.chunks_stored == 0
    for r in range(0, 7, 3):
        for c in range(0, 19, 8):
            f.put(slice(r, r + 3), slice(c, c + 8), values[r:r + 3, c:c + 8])
    assert f.chunks_stored == 9
    rng = np.random.default_rng(0)
    for _ in range(300):  # any window: whole chunks, parts of them, strips read row by row
        r0, c0 = int(rng.integers(0, 7)), int(rng.integers(0, 19))
        r1, c1 = int(rng.integers(r0 + 1, 8)), int(rng.integers(c0 + 1, 20))
        np.testing.assert_array_equal(f.get(slice(r0, r1), slice(c0, c1)), values[r0:r1, c0:c1])
    np.testing.assert_array_equal(f.get(slice(None), slice(None)), values)
    f.close()
    assert f.get(slice(0, 3), slice(0, 4)) is None  # closed: the reader decodes

    def full(*args: object) -> int:
        raise OSError(28, "No space left on device")

    g = _spill.SpillFile(tmp_path / "t.raw", shape=(7, 9), dtype=np.dtype("int16"), chunks=(3, 4))
    monkeypatch.setattr(_spill.os, "pwrite", full)
    g.put(slice(0, 3), slice(0, 4), values[:3, :4])
    monkeypatch.undo()
    g.put(slice(3, 6), slice(0, 4), values[3:6, :4])
    assert g.chunks_stored == 0 and g.get(slice(0, 3), slice(0, 4)) is None
    g.close()


def test_records_read_back_what_was_put_within_their_capacity_from_threads(tmp_path, monkeypatch):
    """A RecordFile (the blockwise samples' file) gives back each record's arrays bit for bit,
    whatever the order and the threads that wrote them, refuses a record beyond its capacity or
    after a failed write (a full disk: nothing half stored), and closing removes the file."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(1)
    records = {i: {"a": rng.normal(size=(int(rng.integers(0, 50)), 6, 6)).astype(np.float32),
                   "b": rng.integers(0, 2**31, size=int(rng.integers(1, 30))).astype(np.int32)} for i in range(40)}
    size = sum(a.nbytes for r in records.values() for a in r.values())
    f = _spill.RecordFile(tmp_path / "r.raw", capacity=size)
    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(lambda i: f.put(i, records[i]), range(40)))
    assert os.path.getsize(tmp_path / "r.raw") == size
    assert not f.put("more", {"x": np.zeros(1, dtype=np.uint8)})  # full
    for i in reversed(range(40)):
        got = f.get(i)
        assert got is not None and set(got) == {"a", "b"}
        for k in ("a", "b"):
            assert got[k].dtype == records[i][k].dtype
            np.testing.assert_array_equal(got[k], records[i][k])
    g = _spill.RecordFile(tmp_path / "g.raw", capacity=10**6)
    monkeypatch.setattr(_spill.os, "pwrite", lambda *a: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    assert not g.put(0, {"x": np.ones(8)}) and 0 not in g and g.get(0) is None
    monkeypatch.undo()
    assert g.put(1, {"x": np.ones(8)}) and g.get(1)["x"].tolist() == [1.0] * 8
    f.close()
    g.close()
    assert os.listdir(tmp_path) == [] and f.get(0) is None and not f.put(0, {"x": np.ones(1)})


def test_record_scope_takes_the_runs_budget_or_the_temporary_folders_room_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with _spill.record_scope(1000) as f:
        assert f is not None and f.put(0, {"x": np.ones(10)})
        assert [n for n in os.listdir(tmp_path) if n.endswith("records-0.raw")]
    assert os.listdir(tmp_path) == []
    with pytest.raises(RuntimeError, match="stop"), _spill.record_scope(1000) as f:
        assert f is not None
        raise RuntimeError("stop")
    assert os.listdir(tmp_path) == []
    monkeypatch.setenv(_spill.SPILL_ENV, "0")
    with _spill.record_scope(1000) as f:
        assert f is None
    monkeypatch.delenv(_spill.SPILL_ENV)
    monkeypatch.setattr(_spill, "free_bytes", lambda folder: _spill.MARGIN_BYTES + 999)  # no room for 1000 bytes
    with _spill.record_scope(1000) as f:
        assert f is None
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.setattr(_spill, "free_bytes", lambda folder: _spill.MARGIN_BYTES + 5000)
    with _spill.spill_scope(folder=run) as spill:  # a run's spill: its folder, within its budget
        with _spill.record_scope(3000) as f, _spill.record_scope(3000) as g:
            assert f is not None and g is None
            assert [n for n in os.listdir(run) if n.endswith("records-0.raw")]
        assert not [n for n in os.listdir(run) if n.endswith(".raw")]
        with _spill.record_scope(3000) as f:  # the first one's room is free again
            assert f is not None
            # an input's file counts the records' room too: 3000 + 2500 bytes exceed the budget
            assert spill is not None and spill.file("in", shape=(25, 25), dtype=np.dtype("float32"), chunks=(25, 25)) is None
        assert spill.file("in2", shape=(25, 25), dtype=np.dtype("float32"), chunks=(25, 25)) is not None
        assert spill is not None
    assert os.listdir(tmp_path) == ["run"] and os.listdir(run) == []


def test_a_remote_input_is_downloaded_once_with_the_spill(pair, tmp_path, monkeypatch):
    served = tmp_path / "served"
    served.mkdir()
    for p in pair:
        os.link(p, served / p.name)
    log = tmp_path / "http.log"
    size = (served / "tba.tif").stat().st_size
    with environ({"GDAL_HTTP_MAX_RETRY": "0"}), http_server(served, log) as url:
        ref, tba = f"/vsicurl/{url}/ref.tif", f"/vsicurl/{url}/tba.tif"
        # GDAL keeps no downloaded bytes between reads: without the spill a later pass downloads again
        # (its 64 MiB block cache, xdem.gdal_cache, may still hold a few decoded tiles of this small file)
        monkeypatch.setenv("CPL_VSIL_CURL_NON_CACHED", f"{ref}:{tba}")
        got: dict[bool, tuple[str, dict, collections.Counter, int]] = {}
        local, local_doc, _ = _run(*pair, tmp_path / "local.tif", spill=True, monkeypatch=monkeypatch)
        # the bytes fetched from the fit on (before it, the input checks read a few tiles of each file)
        starts: list[int] = []
        real_fit = workflow.fit
        monkeypatch.setattr(workflow, "fit", lambda state: (starts.append(len(requests_of(log))), real_fit(state)))
        for spill in (True, False):
            digest, doc, calls = _run(ref, tba, tmp_path / f"remote_{spill}.tif", spill=spill, monkeypatch=monkeypatch)
            fetched = sum(r[4] for r in requests_of(log)[starts[-1]:] if r[0] == "GET" and r[1] == "/tba.tif")
            got[spill] = (digest, doc, calls, fetched)
    assert got[True][0] == got[False][0] == local
    assert got[True][1]["steps"] == got[False][1]["steps"] == local_doc["steps"]
    assert set(got[True][2].values()) == {1} and len(got[True][2]) == 2 * N_CHUNKS
    # each tile's bytes once, plus a 32 KiB header read by each open of the file (about 6% of this small file)
    assert got[True][3] <= 1.15 * size
    # without the spill a later pass fetches tiles again: measured 1.49-1.92x (2.0x with no block cache): how many
    # decoded tiles the 64 MiB cache still holds depends on the order the threads ran; the spill's bound is 1.15x
    assert got[False][3] >= 1.3 * size


@pytest.mark.slow  # a real child process signalled mid-run (tests/forkserver.py), as tests/test_signals.py
def test_sigterm_during_the_block_writes_removes_the_spill(pair, tmp_path, fork_server_test_env):
    # the test process's shared fork server with the test's environment (tests/conftest.py)
    fork_server = fork_server_test_env
    out = tmp_path / "run"
    out.mkdir()
    args = ["coreg", str(pair[0]), str(pair[1]), "-o", str(out / "a.tif"), "--method", "nuthkaab", "--chunks",
            str(CHUNK), "-q"]
    pid = fork_server.run(args, cwd=out, stdout=tmp_path / "out.txt", stderr=tmp_path / "err.txt",
                          env={"XDEM_TEST_PAUSE_AT": "blocks:2", _spill.SPILL_ENV: "1"})
    try:
        wait_stopped(pid)
        during = sorted(os.listdir(out))
        deliver(pid, signal.SIGTERM)
    finally:
        code = fork_server.wait(pid)
    assert sum(name.endswith(".raw") and "spill-" in name for name in during) == 2, during
    assert code == 143, (tmp_path / "err.txt").read_text()
    assert os.listdir(out) == []


def test_local_compressed_inputs_are_not_spilled_by_default(pair, tmp_path, monkeypatch):
    # a local deflate file is decoded again by the writing pass unless XDEM_SPILL=1 (its page-cache
    # writes cost more than the second decode where measured); remote inputs are spilled by default
    monkeypatch.delenv(_spill.SPILL_ENV, raising=False)
    with counted_decodes() as calls:
        run_coreg(CoregRequest(reference=str(pair[0]), to_be_aligned=str(pair[1]), output=str(tmp_path / "a.tif"),
                               coreg=xdem.coreg.NuthKaab(), chunks=CHUNK))
    assert calls and max(calls.values()) >= 2
    assert not [n for n in os.listdir(tmp_path) if "spill" in n]


def test_region_reads_of_a_spilled_file_decode_each_chunk_once_whole(pair, tmp_path, monkeypatch):
    """A blockwise fit on a wide DEM reads regions of rows of tiles that cut the chunks (``xdem.io.grid.read_region``);
    with the spill, each such read first decodes the whole chunks under it not stored yet: every
    chunk of each input decoded once, whole, in the run (fit rounds and write pass), the same output
    and document as without the spill."""
    def coreg() -> xdem.coreg.Coreg:
        return xdem.coreg.BlockwiseCoreg(xdem.coreg.NuthKaab(subsample=2000), block_size=150)

    monkeypatch.setattr(blockwise_draw, "BAND_BYTES", 1)  # groups of tiles, as on a wide DEM
    monkeypatch.setattr(blockwise_draw, "GROUP_BYTES", 1)  # here one tile each
    monkeypatch.setattr(blockwise_samples, "SAMPLE_CACHE_BYTES", 1)  # and round 2 draws them again,
    monkeypatch.setattr(blockwise_samples, "SPILL_SAMPLES", False)  # not from a file of the samples
    (tmp_path / "on").mkdir()
    (tmp_path / "off").mkdir()
    on = _run(*pair, tmp_path / "on" / "aligned.tif", spill=True, monkeypatch=monkeypatch, coreg=coreg())
    off = _run(*pair, tmp_path / "off" / "aligned.tif", spill=False, monkeypatch=monkeypatch, coreg=coreg())
    assert on[0] == off[0] and json.dumps(on[1], sort_keys=True) == json.dumps(off[1], sort_keys=True)
    chunks = {(r0, min(r0 + CHUNK, N), c0, min(c0 + CHUNK, N)) for r0 in range(0, N, CHUNK) for c0 in range(0, N, CHUNK)}
    for name in ("ref.tif", "tba.tif"):
        assert {k[1:] for k in on[2] if k[0] == name} == chunks and all(on[2][(name, *c)] == 1 for c in chunks)
    assert sum(off[2].values()) > sum(on[2].values())


def test_a_blockwise_run_keeps_its_samples_file_in_the_output_folder_and_leaves_nothing(pair, tmp_path, monkeypatch):
    """``xdem coreg``'s route: beyond SAMPLE_CACHE_BYTES the blockwise samples' file is a temporary of
    the run's spill (the output's folder, never the system's temporary folder), read back in round 2;
    after the run only the output is left, and the output and document are those of the draw again."""
    def coreg() -> xdem.coreg.Coreg:
        return xdem.coreg.BlockwiseCoreg(xdem.coreg.NuthKaab(subsample=2000), block_size=150)

    elsewhere = tmp_path / "system-tmp"
    elsewhere.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(elsewhere))
    monkeypatch.setattr(blockwise_samples, "SAMPLE_CACHE_BYTES", 1)
    read_back = blockwise_samples.TileSample.of_arrays
    seen: list[list[str]] = []

    def spy(arrays: dict) -> blockwise_samples.TileSample:
        seen.append(sorted(os.listdir(tmp_path / "file")) + sorted(os.listdir(elsewhere)))
        return read_back(arrays)

    monkeypatch.setattr(blockwise_samples.TileSample, "of_arrays", spy)
    (tmp_path / "file").mkdir()
    (tmp_path / "draw").mkdir()
    stored = _run(*pair, tmp_path / "file" / "aligned.tif", spill=True, monkeypatch=monkeypatch, coreg=coreg())
    assert seen and all(any(n.startswith(".xdem-tmp-") and n.endswith("records-0.raw") for n in names) for names in seen)
    assert os.listdir(tmp_path / "file") == ["aligned.tif"] and os.listdir(elsewhere) == []
    read = len(seen)
    drawn = _run(*pair, tmp_path / "draw" / "aligned.tif", spill=False, monkeypatch=monkeypatch, coreg=coreg())
    assert len(seen) == read  # XDEM_SPILL=0: drawn again, nothing read back
    assert stored[0] == drawn[0] and json.dumps(stored[1], sort_keys=True) == json.dumps(drawn[1], sort_keys=True)


def test_a_blockwise_run_spills_local_compressed_inputs_by_default(pair, tmp_path, monkeypatch):
    """A blockwise fit reads regions of rows of tiles that cut the chunks (about two decodes of each
    chunk a round), so its run spills local compressed inputs without ``XDEM_SPILL=1``: every chunk
    of each input decoded once in the whole run, the output and document those of ``XDEM_SPILL=0``,
    nothing left. A Nuth & Kääb run does not (``test_local_compressed_inputs_are_not_spilled_by_default``)."""
    def coreg() -> xdem.coreg.Coreg:
        return xdem.coreg.BlockwiseCoreg(xdem.coreg.NuthKaab(subsample=2000), block_size=150)

    monkeypatch.setattr(blockwise_draw, "BAND_BYTES", 1)  # groups of tiles, as on a wide DEM
    monkeypatch.setattr(blockwise_draw, "GROUP_BYTES", 1)
    monkeypatch.delenv(_spill.SPILL_ENV, raising=False)
    (tmp_path / "default").mkdir()
    with counted_decodes() as calls:
        result = run_coreg(CoregRequest(reference=str(pair[0]), to_be_aligned=str(pair[1]),
                                        output=str(tmp_path / "default" / "aligned.tif"), coreg=coreg(), chunks=CHUNK))
    chunks = {(r0, min(r0 + CHUNK, N), c0, min(c0 + CHUNK, N)) for r0 in range(0, N, CHUNK) for c0 in range(0, N, CHUNK)}
    for name in ("ref.tif", "tba.tif"):
        assert {k[1:] for k in calls if k[0] == name} == chunks and all(calls[(name, *c)] == 1 for c in chunks)
    assert os.listdir(tmp_path / "default") == ["aligned.tif"]
    with rasterio.open(tmp_path / "default" / "aligned.tif") as src:
        digest = hashlib.sha256(src.read().tobytes()).hexdigest()
    doc = {k: v for k, v in json.loads(result.json_text).items() if k not in VOLATILE}
    (tmp_path / "off").mkdir()
    off = _run(*pair, tmp_path / "off" / "aligned.tif", spill=False, monkeypatch=monkeypatch, coreg=coreg())
    assert off[0] == digest and json.dumps(off[1], sort_keys=True) == json.dumps(doc, sort_keys=True)
    assert max(off[2].values()) > 1
