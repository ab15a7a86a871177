"""Tests of out-of-core COG writing (xdem.write_cog) and input tracking (xdem.io.sources)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import rasterio
import xarray as xr
from affine import Affine
from dask.callbacks import Callback
from rasterio.env import get_gdal_config
from rio_cogeo.cogeo import cog_validate

import xdem
from xdem.errors import InputError, OutputError
from xdem.io.cog import write_cog
from xdem.io.sources import find_sources, register_source

LIDAR = Path(xdem.__file__).parent / "examples" / "data" / "lidar_dem.tif"
CRS = "EPSG:32633"


def _dem(data, *, chunks=None, transform=Affine(2.0, 0, 500000.0, 0, -2.0, 5200000.0)) -> xr.DataArray:
    """A georeferenced DataArray over ``data`` (numpy, or dask with ``chunks``)."""
    ny, nx = data.shape
    x = transform.c + (np.arange(nx) + 0.5) * transform.a
    y = transform.f + (np.arange(ny) + 0.5) * transform.e
    arr = da.from_array(data, chunks=chunks) if chunks is not None and isinstance(data, np.ndarray) else data
    out = xr.DataArray(arr, dims=("y", "x"), coords={"y": y, "x": x})
    return out.rio.write_crs(CRS).rio.write_transform(transform)


def _holes(shape, dtype, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    z = (rng.normal(size=shape) * 50 + 800).astype(dtype)
    z[rng.random(shape) < 0.05] = np.nan
    z[10:40, 20:70] = np.nan  # a large hole crossing tiles
    return z


def _read(path: Path):
    with rasterio.open(path) as src:
        return src.read(1), src.profile, src.tags(ns="IMAGE_STRUCTURE"), src.overviews(1)


def _no_temp(folder: Path) -> bool:
    return not [p for p in os.listdir(folder) if p.startswith(".xdem-tmp-")]


# ---------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("chunks", [400, (100, 130), (64, 400)])
def test_roundtrip_lidar(tmp_path: Path, chunks) -> None:
    dem = xdem.open_dem(LIDAR, chunks=chunks)
    out = write_cog(dem, tmp_path / "out.tif", blocksize=128)
    assert out == (tmp_path / "out.tif").absolute()
    valid, errors, _ = cog_validate(out, quiet=True)
    assert valid, errors
    values, profile, structure, overviews = _read(out)
    expected = dem.values
    np.testing.assert_array_equal(values, np.where(np.isnan(expected), -9999, expected))
    assert profile["nodata"] == -9999
    assert profile["dtype"] == "float32"
    assert profile["blockxsize"] == 128 and profile["tiled"]
    assert structure["COMPRESSION"] == "DEFLATE" and structure["PREDICTOR"] == "3"
    assert overviews  # 400 px > 128 px tiles: OVERVIEWS=AUTO made some
    with rasterio.open(LIDAR) as src:
        assert profile["crs"] == src.crs
        assert profile["transform"].almost_equals(src.transform, precision=1e-9)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("chunks", [None, (300, 260), (50, 77), (100, 33)])
def test_roundtrip_holes_and_chunkings(tmp_path: Path, dtype, chunks) -> None:
    z = _holes((300, 260), dtype)
    dem = _dem(z, chunks=chunks)
    out = write_cog(dem, tmp_path / "holes.tif", blocksize=64)
    assert cog_validate(out, quiet=True)[0]
    values, profile, _, _ = _read(out)
    assert profile["dtype"] == np.dtype(dtype).name
    np.testing.assert_array_equal(values, np.where(np.isnan(z), dtype(-9999), z))
    assert profile["transform"] == dem.rio.transform() and profile["crs"] == CRS
    reopened = xdem.open_dem(out)
    np.testing.assert_array_equal(np.isnan(reopened.values), np.isnan(z))


def test_nodata_none_keeps_nan_and_custom_nodata(tmp_path: Path) -> None:
    z = _holes((70, 90), np.float32)
    out = write_cog(_dem(z, chunks=32), tmp_path / "nan.tif", nodata=None, blocksize=32)
    values, profile, _, _ = _read(out)
    assert np.isnan(profile["nodata"])
    np.testing.assert_array_equal(values, z)  # NaN == NaN for assert_array_equal
    out = write_cog(_dem(z, chunks=32), tmp_path / "m1.tif", nodata=-1.5, compress="zstd", blocksize=32)
    values, profile, structure, _ = _read(out)
    assert profile["nodata"] == -1.5 and structure["COMPRESSION"] == "ZSTD"
    np.testing.assert_array_equal(values, np.where(np.isnan(z), np.float32(-1.5), z))


def test_integer_dem_predictor_2(tmp_path: Path) -> None:
    z = np.arange(100 * 120, dtype=np.int16).reshape(100, 120)
    out = write_cog(_dem(z, chunks=(40, 50)), tmp_path / "int.tif", nodata=0, blocksize=32)
    values, profile, structure, _ = _read(out)
    assert profile["dtype"] == "int16" and profile["nodata"] == 0 and structure["PREDICTOR"] == "2"
    np.testing.assert_array_equal(values, z)
    with pytest.raises(InputError, match="does not fit"):
        write_cog(_dem(z.astype(np.uint8)), tmp_path / "u8.tif")  # -9999 does not fit uint8


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"compress": "jpeg2000"}, "compress"), ({"blocksize": 100}, "multiple of 16"), ({"nodata": 0.1}, "representable")],
)
def test_bad_arguments(tmp_path: Path, kwargs, match) -> None:
    with pytest.raises(InputError, match=match):
        write_cog(_dem(np.zeros((20, 20), np.float32)), tmp_path / "x.tif", **kwargs)
    assert not (tmp_path / "x.tif").exists()


def test_rejects_non_2d(tmp_path: Path) -> None:
    arr = xr.DataArray(np.zeros((2, 3, 4)), dims=("band", "y", "x"))
    with pytest.raises(InputError, match="2-D"):
        write_cog(arr, tmp_path / "x.tif")
    with pytest.raises(InputError, match="DataArray"):
        write_cog(np.zeros((3, 4)), tmp_path / "x.tif")


# ---------------------------------------------------------------------------- safety


def test_refuses_overwrite_unless_asked(tmp_path: Path) -> None:
    path = tmp_path / "out.tif"
    path.write_bytes(b"precious")
    dem = _dem(np.ones((40, 40), np.float32), chunks=16)
    with pytest.raises(OutputError, match="overwrite=True"):
        write_cog(dem, path)
    assert path.read_bytes() == b"precious"
    write_cog(dem, path, overwrite=True, blocksize=16)
    np.testing.assert_array_equal(_read(path)[0], 1.0)
    assert _no_temp(tmp_path)


def test_refuses_to_write_onto_its_input(tmp_path: Path) -> None:
    src = tmp_path / "dem.tif"
    shutil.copy(LIDAR, src)
    before = src.read_bytes()
    dem = xdem.open_dem(src, chunks=128)
    for target in (src, tmp_path / "." / "dem.tif"):
        with pytest.raises(OutputError, match="inputs"):
            write_cog(dem * 2 + 1, target, overwrite=True)
    link = tmp_path / "link.tif"
    link.symlink_to(src)
    with pytest.raises(OutputError, match="inputs"):
        write_cog(dem.isel(x=slice(10, 200)), link, overwrite=True)
    assert src.read_bytes() == before and _no_temp(tmp_path)
    # a persisted copy no longer reads the file, so replacing it is allowed
    write_cog(dem.persist(), src, overwrite=True)


def test_find_sources(tmp_path: Path) -> None:
    a = xdem.open_dem(LIDAR)
    b_path = tmp_path / "b.tif"
    shutil.copy(LIDAR, b_path)
    b = xdem.open_dem(b_path)
    assert find_sources(a) == {LIDAR.resolve()}
    assert find_sources((a - b).data) == {LIDAR.resolve(), b_path.resolve()}
    assert find_sources(a.compute()) == set()
    c = da.ones((4, 4), chunks=2)
    register_source(c, tmp_path / "c.tif")
    assert find_sources(c.map_blocks(np.negative)) == {(tmp_path / "c.tif").resolve()}
    assert find_sources(da.zeros((5, 4), chunks=2) + 1) == set()


def test_refuses_missing_or_unwritable_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dem = _dem(np.ones((20, 20), np.float32))
    with pytest.raises(OutputError, match="does not exist"):
        write_cog(dem, tmp_path / "missing" / "out.tif")
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    with pytest.raises(OutputError, match="not a folder"):  # fails for root too
        write_cog(dem, a_file / "out.tif")
    with pytest.raises(OutputError, match="is a folder"):
        write_cog(dem, tmp_path, overwrite=True)
    # root may write anywhere, so simulate a read-only folder through os.access
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == tmp_path else real_access(p, mode, **kw))
    with pytest.raises(OutputError, match="not writable"):
        write_cog(dem, tmp_path / "out.tif")
    assert sorted(os.listdir(tmp_path)) == ["file.txt"]


def _failing(shape=(200, 200), chunks=50, bad=(2, 1), exc: BaseException | None = None) -> xr.DataArray:
    exc = RuntimeError("boom in block") if exc is None else exc

    def kernel(block, block_id=None):
        if block_id == bad:
            raise exc
        return block + 1

    return _dem(da.zeros(shape, chunks=chunks, dtype=np.float32).map_blocks(kernel, dtype=np.float32))


@pytest.mark.parametrize("scheduler", ["threads", "sync"])
def test_error_mid_write_leaves_nothing(tmp_path: Path, scheduler: str) -> None:
    path = tmp_path / "out.tif"
    with dask.config.set(scheduler=scheduler), pytest.raises(RuntimeError, match="boom in block"):
        write_cog(_failing(), path, blocksize=32)
    assert os.listdir(tmp_path) == []


def test_keyboard_interrupt_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "out.tif"
    path.write_bytes(b"old")
    with dask.config.set(scheduler="sync"), pytest.raises(KeyboardInterrupt):
        write_cog(_failing(exc=KeyboardInterrupt()), path, overwrite=True, blocksize=32)
    assert os.listdir(tmp_path) == ["out.tif"] and path.read_bytes() == b"old"


def test_invalid_cog_is_not_published(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rio_cogeo.cogeo

    monkeypatch.setattr(rio_cogeo.cogeo, "cog_validate", lambda *a, **k: (False, ["simulated"], []))
    with pytest.raises(OutputError, match="simulated"):
        write_cog(_dem(np.ones((20, 20), np.float32)), tmp_path / "out.tif")
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------------------- schedulers, memory


def test_processes_scheduler(tmp_path: Path) -> None:
    z = _holes((256, 320), np.float32, seed=3)
    with dask.config.set(scheduler="processes", num_workers=2):
        out = write_cog(_dem(z, chunks=(64, 96)), tmp_path / "p.tif", blocksize=32)
    np.testing.assert_array_equal(_read(out)[0], np.where(np.isnan(z), np.float32(-9999), z))
    assert _no_temp(tmp_path)


def test_distributed_cluster(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    distributed = pytest.importorskip("distributed")
    z = _holes((256, 320), np.float64, seed=4)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster):
            out = write_cog(_dem(z, chunks=(64, 96)), tmp_path / "d.tif", blocksize=32, progress=True)
    assert cog_validate(out, quiet=True)[0]
    np.testing.assert_array_equal(_read(out)[0], np.where(np.isnan(z), -9999.0, z))
    assert _no_temp(tmp_path)


def test_progress_bar_local(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    write_cog(_dem(np.ones((64, 64), np.float32), chunks=32), tmp_path / "p.tif", progress=True, blocksize=32)
    assert "100%" in capsys.readouterr().out


class _LargestResult(Callback):
    """Records the largest array produced by any task, and how many tasks ran."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0
        self.tasks = 0

    def _posttask(self, key, result, dsk, state, worker_id) -> None:
        self.tasks += 1
        if isinstance(result, np.ndarray):
            self.largest = max(self.largest, result.nbytes)


def test_does_not_load_whole_array(tmp_path: Path) -> None:
    shape, chunk = (1024, 1536), 128
    data = da.random.default_rng(0).normal(size=shape, chunks=chunk)  # float64, 96 chunks
    dem = _dem(data)
    with _LargestResult() as cb, dask.config.set(scheduler="threads"):
        write_cog(dem, tmp_path / "big.tif", blocksize=128)
    assert cb.tasks >= 96
    assert cb.largest <= chunk * chunk * 8  # never more than one chunk in a single task result
    assert cb.largest * 50 < data.nbytes


def test_compressed_temp_when_disk_is_short(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil as _shutil

    import xdem.io.cog as cog

    seen = []
    real_copy = cog._copy_to_cog

    def spy(tmp, out, **kw):
        with rasterio.open(tmp) as src:
            seen.append(src.compression)
        real_copy(tmp, out, **kw)

    usage = _shutil.disk_usage(tmp_path)
    monkeypatch.setattr(cog.shutil, "disk_usage", lambda p: usage._replace(free=1000))
    monkeypatch.setattr(cog, "_copy_to_cog", spy)
    z = _holes((200, 150), np.float32, seed=5)
    out = write_cog(_dem(z, chunks=(45, 70)), tmp_path / "z.tif", blocksize=32)  # partial tiles rewritten
    assert seen and seen[0] is not None and seen[0].name == "zstd"
    np.testing.assert_array_equal(_read(out)[0], np.where(np.isnan(z), np.float32(-9999), z))
    assert _no_temp(tmp_path)


# ---------------------------------------------------------------------------- CogResult, write_cogs


def test_write_cog_returns_a_path_like_result(tmp_path: Path) -> None:
    from xdem.io.cog import BlockStats, CogResult

    dem = _dem(np.arange(64 * 48, dtype=np.float32).reshape(64, 48), chunks=32)
    result = write_cog(dem, tmp_path / "r.tif", blocksize=16, also=[BlockStats(lambda b, row0, col0: (row0, col0))])
    assert isinstance(result, CogResult) and result.path == (tmp_path / "r.tif").absolute()
    assert os.fspath(result) == str(result) == str(tmp_path / "r.tif") and result == tmp_path / "r.tif"
    assert result.also == ([(0, 0), (0, 32), (32, 0), (32, 32)],)
    assert result.path.name == "r.tif"
    with rasterio.open(result) as src:
        assert src.shape == (64, 48)


def test_write_cogs_one_compute_shared_blocks_run_once(tmp_path: Path) -> None:
    from xdem.io.cog import write_cogs

    z = _holes((96, 80), np.float32, seed=3)
    runs = []

    def shared(block):  # a task the outputs share: must run once per block
        if block.size:  # not dask's meta probe
            runs.append(block.shape)
        return block * 2

    base = da.from_array(z, chunks=32).map_blocks(shared, dtype=np.float32)
    outs = [_dem(base + k) for k in range(3)]
    with dask.config.set(scheduler="threads"):
        results = write_cogs([(o, tmp_path / f"o{k}.tif") for k, o in enumerate(outs)], blocksize=16)
    assert len(runs) == 3 * 3  # 9 blocks, each computed once for the three outputs
    for k, r in enumerate(results):
        assert r.path == (tmp_path / f"o{k}.tif").absolute() and cog_validate(r, quiet=True)[0]
        np.testing.assert_array_equal(_read(r)[0], np.where(np.isnan(z), np.float32(-9999), z * 2 + k))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o0.tif", "o1.tif", "o2.tif"]


def test_write_cogs_refuses_duplicates_and_leaves_nothing_on_failure(tmp_path: Path, monkeypatch) -> None:
    import xdem.io.cog as cog
    from xdem.io.cog import write_cogs

    dem = _dem(np.ones((40, 40), np.float32), chunks=20)
    with pytest.raises(OutputError, match="given for outputs 0 and 1"):
        write_cogs([(dem, tmp_path / "a.tif"), (dem + 1, tmp_path / "a.tif")])
    (tmp_path / "c.tif").write_bytes(b"keep")
    with pytest.raises(OutputError, match="already exists"):
        write_cogs([(dem, tmp_path / "a.tif"), (dem, tmp_path / "c.tif")])
    real_move = cog.move_into_place

    def second_exists(tmp, path, *, overwrite):  # another process creates the second output meanwhile
        if Path(path).name == "b.tif":
            Path(path).write_bytes(b"theirs")
        real_move(tmp, path, overwrite=overwrite)

    monkeypatch.setattr(cog, "move_into_place", second_exists)
    with pytest.raises(OutputError, match="created by another process"):
        write_cogs([(dem, tmp_path / "a.tif"), (dem + 1, tmp_path / "b.tif")], blocksize=16)
    # the first output, already moved, was removed again; theirs and ours untouched; no temps
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.tif", "c.tif"]
    assert (tmp_path / "b.tif").read_bytes() == b"theirs" and (tmp_path / "c.tif").read_bytes() == b"keep"


def test_copy_with_progress_uses_the_libgdal_rasterio_links_even_when_another_is_loaded() -> None:
    """pyogrio's wheels bring their own libgdal (other version, other codecs); once both are
    loaded, GDAL's copy must still go through rasterio's (the one whose drivers and
    configuration rasterio set): the version it reports is rasterio's."""
    import pyogrio  # noqa: F401 - loads its own libgdal, mapped next to rasterio's

    from xdem.io import _gdal_copy

    _gdal_copy._libgdal.cache_clear()
    lib = _gdal_copy._libgdal()
    assert lib is not None
    assert lib.GDALVersionInfo(b"RELEASE_NAME").decode() == rasterio.__gdal_version__


# ---------------------------------------------------------------------------- GDAL's block cache


def test_gdal_block_cache_is_megabytes_in_both_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """GDAL's block cache, read back from GDAL while the blocks are computed, inside each block
    write and inside the COG copy, is :data:`GDAL_CACHE_BYTES`: megabytes, bounded. (An integer
    given to ``rasterio.Env(GDAL_CACHEMAX=)`` is bytes: the 256 of earlier sessions was a 256-byte
    cache.) The process's own setting is back afterwards."""
    import xdem.io._cog_blocks as blocks
    import xdem.io.cog as cog
    from xdem.gdal_cache import GDAL_CACHE_BYTES, GDAL_CACHE_MB

    assert GDAL_CACHE_BYTES == GDAL_CACHE_MB * 2**20 and 16 <= GDAL_CACHE_MB <= 256
    seen: dict[str, set[int]] = {"compute": set(), "block write": set(), "COG copy": set()}
    open_, copy_ = rasterio.open, cog.copy_with_progress

    def record(block: np.ndarray) -> np.ndarray:
        if block.size:  # not dask's call on an empty array to infer the output type
            seen["compute"].add(int(get_gdal_config("GDAL_CACHEMAX")))
        return block

    def opening(path, mode="r", *args, **kwargs):  # noqa: ANN001, ANN202
        if mode == "r+":
            seen["block write"].add(int(get_gdal_config("GDAL_CACHEMAX")))
        return open_(path, mode, *args, **kwargs)

    def copying(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        seen["COG copy"].add(int(get_gdal_config("GDAL_CACHEMAX")))
        return copy_(*args, **kwargs)

    monkeypatch.setattr(blocks.rasterio, "open", opening)
    monkeypatch.setattr(cog, "copy_with_progress", copying)
    before = int(get_gdal_config("GDAL_CACHEMAX"))
    dem = _dem(_holes((128, 128), "float32"), chunks=64)
    with dask.config.set(scheduler="threads"):
        write_cog(dem.copy(data=dem.data.map_blocks(record, dtype=dem.dtype)), tmp_path / "x.tif")
    assert seen == {"compute": {GDAL_CACHE_BYTES}, "block write": {GDAL_CACHE_BYTES}, "COG copy": {GDAL_CACHE_BYTES}}
    assert int(get_gdal_config("GDAL_CACHEMAX")) == before
