"""Point files really read (issue 15, part 2): CSV, Parquet (x, y, z columns), GeoParquet
(WKB and GeoArrow encodings, 2-D with an elevation column or 3-D), LAS and LAZ (laspy with
the lazrs backend, both in the ``test`` extra), read in batches straight into coordinate
arrays (never one DataFrame of geometries), and fitted on exactly as the GeoDataFrame they
were written from.
"""

from __future__ import annotations

import geopandas as gpd
import laspy
import numpy as np
import pandas as pd
import point_tracks as tp
import pyarrow.parquet as pq
import pytest
from pyproj import CRS as ProjCRS

import xdem
from xdem.errors import InputError
from xdem.points import read_points


@pytest.fixture(scope="module")
def pts() -> gpd.GeoDataFrame:
    x, y = tp.tracks()
    z = tp.TERRAIN(x, y)
    return gpd.GeoDataFrame({"h": z, "h_noisy": tp.noisy(z)}, geometry=gpd.points_from_xy(x, y), crs=tp.CRS)


@pytest.fixture
def small_batches(monkeypatch):
    """Batches of 1000 rows (about 9 per file), and no whole-file reader allowed."""
    import xdem.points.read as reader

    monkeypatch.setattr(reader, "BATCH_ROWS", 1000)

    def refuse(*args, **kwargs):
        raise AssertionError("a whole-file reader was called")

    monkeypatch.setattr(gpd, "read_parquet", refuse)
    monkeypatch.setattr(pd, "read_parquet", refuse)
    monkeypatch.setattr(laspy, "read", refuse)
    batches: list[int] = []
    original = pq.ParquetFile.iter_batches

    def counting(self, *args, **kwargs):
        for b in original(self, *args, **kwargs):
            batches.append(b.num_rows)
            yield b

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", counting)
    return batches


def _same(p, pts: gpd.GeoDataFrame, column: str = "h", atol: float = 0.0) -> None:
    assert p.count == len(pts) and p.crs == tp.CRS
    np.testing.assert_allclose(p.x, pts.geometry.x.to_numpy(), rtol=0, atol=atol)
    np.testing.assert_allclose(p.y, pts.geometry.y.to_numpy(), rtol=0, atol=atol)
    np.testing.assert_allclose(p.z, pts[column].to_numpy(), rtol=0, atol=atol)


def test_parquet_table(tmp_path, pts, small_batches) -> None:
    path = tmp_path / "tracks.parquet"
    pd.DataFrame({"x": pts.geometry.x, "y": pts.geometry.y, "h": pts["h"], "other": "a"}).to_parquet(
        path, row_group_size=700)
    _same(read_points(path, z_column="h", source_crs=tp.CRS), pts)
    assert max(small_batches) <= 1000 and sum(small_batches) == len(pts)
    with pytest.raises(xdem.errors.CRSError, match="source_crs"):
        read_points(path, z_column="h")
    with pytest.raises(InputError, match="no column 'z'"):
        read_points(path, source_crs=tp.CRS)
    with pytest.raises(InputError, match="not numeric"):
        read_points(path, z_column="other", source_crs=tp.CRS)


@pytest.mark.parametrize("encoding", ["WKB", "geoarrow"])
def test_geoparquet(tmp_path, pts, small_batches, encoding: str) -> None:
    flat = tmp_path / "flat.parquet"
    pts.to_parquet(flat, geometry_encoding=encoding, row_group_size=2000)
    _same(read_points(flat, z_column="h_noisy"), pts, column="h_noisy")
    assert max(small_batches) <= 1000
    with pytest.raises(InputError, match="no elevation"):
        read_points(flat)
    solid = tmp_path / "solid.geoparquet"
    gpd.GeoDataFrame(geometry=gpd.points_from_xy(pts.geometry.x, pts.geometry.y, pts["h"]), crs=tp.CRS).to_crs(
        "EPSG:4326").to_parquet(solid, geometry_encoding=encoding)
    p = read_points(solid, crs=tp.CRS)  # geographic, 3-D geometries: into the DEM's CRS
    assert p.source_crs == "EPSG:4326"
    _same(p, pts, atol=1e-6)


def _write_las(path, pts: gpd.GeoDataFrame, crs: str | None = tp.CRS) -> None:
    header = laspy.LasHeader(point_format=6, version="1.4")
    header.scales = np.array([0.001, 0.001, 0.001])
    header.offsets = np.array([pts.geometry.x.min(), pts.geometry.y.min(), 0.0]).round()
    if crs is not None:
        header.add_crs(ProjCRS.from_user_input(crs))
    las = laspy.LasData(header)
    las.x, las.y, las.z = pts.geometry.x.to_numpy(), pts.geometry.y.to_numpy(), pts["h"].to_numpy()
    las.intensity = np.arange(len(pts)) % 1000
    las.write(path)


@pytest.mark.parametrize("suffix", [".las", ".laz"])
def test_las_and_laz(tmp_path, pts, small_batches, suffix: str) -> None:
    path = tmp_path / f"tracks{suffix}"
    _write_las(path, pts)
    _same(read_points(path), pts, atol=5e-4)  # coordinates stored to the millimetre (scales 0.001)
    assert read_points(path, z_column="intensity").z[:3].tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(InputError, match="no dimension 'h'"):
        read_points(path, z_column="h")
    bare = tmp_path / f"bare{suffix}"
    _write_las(bare, pts, crs=None)
    with pytest.raises(xdem.errors.CRSError, match="source_crs"):
        read_points(bare)
    assert read_points(bare, source_crs=tp.CRS).count == len(pts)


def test_laz_without_backend_is_a_clear_error(tmp_path, pts, monkeypatch) -> None:
    path = tmp_path / "tracks.laz"
    _write_las(path, pts)
    monkeypatch.setattr(laspy.LazBackend, "detect_available", staticmethod(lambda: ()))
    with pytest.raises(InputError, match=r"needs a LAZ backend: pip install 'laspy\[lazrs\]'"):
        read_points(path)


def test_fit_from_files_equals_geodataframe(tmp_path, pts) -> None:
    dem = tp.shifted(tp.MOVES[0])
    base = xdem.coreg.NuthKaab().fit(pts, dem, z_column="h_noisy").to_translations()
    gpq, csv = tmp_path / "t.parquet", tmp_path / "t.csv"
    pts.to_parquet(gpq)
    pd.DataFrame({"x": pts.geometry.x, "y": pts.geometry.y, "z": pts["h_noisy"]}).to_csv(csv, index=False)
    assert xdem.coreg.NuthKaab().fit(gpq, dem, z_column="h_noisy").to_translations() == base
    from_csv = read_points(csv, source_crs=tp.CRS)  # a CSV has no CRS: read it first, fit on the PointSet
    assert xdem.coreg.NuthKaab().fit(from_csv, dem).to_translations() == pytest.approx(base, abs=1e-9)


def test_dense_chunk_split_into_bounded_tasks(pts) -> None:
    """50 000 points inside one 256 x 256 chunk, batches of 5 000: ten tasks of at most 5 000
    points each (a task's result: 5 000 values and 6 x 6 windows, 0.76 MB, never the 50 000
    points' 7.6 MB), with the values of one unsplit evaluation."""
    import dask
    from helpers import MaxResult

    from xdem.points import dem_at_points

    dem = tp.shifted((0.0, 0.0, 0.0))
    rng = np.random.default_rng(4)
    prow, pcol = rng.uniform(300.0, 500.0, (2, 50_000))  # all in chunk (1, 1) of 256 pixels
    whole, wins, tasks = dem_at_points(dem.data, prow, pcol, resampling="lagrange", half=2)
    assert tasks == 1
    with dask.config.set(scheduler="sync"), MaxResult() as mr:
        parts, pwins, tasks = dem_at_points(dem.data, prow, pcol, resampling="lagrange", half=2, batch_points=5000)
    assert tasks == 10
    np.testing.assert_array_equal(parts, whole)
    np.testing.assert_array_equal(pwins, wins)
    assert mr.max_bytes <= 5000 * (8 + 36 * 4) + 300_000  # one batch of results (+ a 256 x 256 chunk's worth)
