"""Reading points (:func:`xdem.points.read_points`, :class:`xdem.points.PointSet`): GeoDataFrames,
files, batches, 3-D geometries, the readers' optional packages.
"""

from __future__ import annotations

import importlib.util

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
from point_tracks import CRS, X0, Y0

import xdem
from xdem.errors import InputError, ReadError
from xdem.points import PointSet, is_points_source, read_points


def test_track_geometry(track_points: gpd.GeoDataFrame) -> None:
    assert 8500 <= len(track_points) <= 9500


def test_read_geodataframe_z_column_and_crs(track_points: gpd.GeoDataFrame) -> None:
    p = read_points(track_points, z_column="h")
    assert p.count == len(track_points) and p.crs == CRS and p.source_crs == CRS
    np.testing.assert_array_equal(p.z, track_points["h"].to_numpy())
    g = read_points(track_points.to_crs("EPSG:4326"), z_column="h", crs=CRS)
    assert g.source_crs == "EPSG:4326" and g.crs == CRS
    np.testing.assert_allclose(g.x, p.x, atol=1e-6)
    np.testing.assert_allclose(g.y, p.y, atol=1e-6)


def test_read_3d_geometries_and_missing_z() -> None:
    gdf = gpd.GeoDataFrame(geometry=gpd.points_from_xy([1.0], [2.0], [3.5]), crs=CRS)
    assert read_points(gdf).z.tolist() == [3.5]
    flat = gpd.GeoDataFrame({"other": [1.0]}, geometry=gpd.points_from_xy([1.0], [2.0]), crs=CRS)
    with pytest.raises(InputError, match="z_column"):
        read_points(flat)
    with pytest.raises(InputError, match="no column 'h'"):
        read_points(flat, z_column="h")


def test_read_files(tmp_path, track_points: gpd.GeoDataFrame) -> None:
    gpkg = tmp_path / "tracks.gpkg"
    track_points.iloc[:50].to_file(gpkg)
    p = read_points(gpkg, z_column="h")
    assert p.count == 50 and p.name == str(gpkg) and p.crs == CRS
    np.testing.assert_allclose(p.z, track_points["h"].to_numpy()[:50])
    csv = tmp_path / "tracks.csv"
    pd.DataFrame({"x": p.x, "y": p.y, "elev": p.z}).to_csv(csv, index=False)
    c = read_points(csv, z_column="elev", source_crs=CRS)
    np.testing.assert_allclose(c.z, p.z)
    np.testing.assert_allclose(c.x, p.x)
    with pytest.raises(xdem.errors.CRSError, match="source_crs"):
        read_points(csv, z_column="elev")
    with pytest.raises(ReadError, match="not found"):
        read_points(tmp_path / "missing.gpkg")


def test_large_files_read_in_batches(tmp_path, monkeypatch, track_points: gpd.GeoDataFrame) -> None:
    import xdem.points.read as reader

    monkeypatch.setattr(reader, "BATCH_ROWS", 1000)  # 9 batches of the ~8900 points
    gpkg, csv = tmp_path / "tracks.gpkg", tmp_path / "tracks.csv"
    track_points.to_file(gpkg)
    p = read_points(gpkg, z_column="h_noisy")
    np.testing.assert_array_equal(p.z, track_points["h_noisy"].to_numpy())
    np.testing.assert_array_equal(p.x, track_points.geometry.x.to_numpy())
    pd.DataFrame({"x": p.x, "y": p.y, "z": p.z}).to_csv(csv, index=False)
    c = read_points(csv, source_crs=CRS)
    assert c.count == p.count
    np.testing.assert_allclose(c.y, p.y, rtol=1e-15)


def test_optional_readers_name_their_package(tmp_path) -> None:
    for suffix, module in ((".parquet", "pyarrow"), (".laz", "laspy")):
        path = tmp_path / f"points{suffix}"
        path.write_bytes(b"not a real file")
        if importlib.util.find_spec(module) is None:
            with pytest.raises(InputError, match=f"pip install {module}"):
                read_points(path)
        else:  # installed: a corrupt file is one clear error
            with pytest.raises(ReadError, match="cannot read points"):
                read_points(path)


def test_is_points_source(track_points: gpd.GeoDataFrame) -> None:
    assert is_points_source(track_points) and is_points_source("a.LAZ") and is_points_source("a.csv")
    assert not is_points_source("dem.tif") and not is_points_source(np.zeros(3))


def test_pointset_roundtrip() -> None:
    p = PointSet(np.array([X0 + 10.0]), np.array([Y0 + 20.0]), np.array([5.0]), crs=CRS)
    g = p.to_geodataframe()
    assert read_points(g).z.tolist() == [5.0] and p.to_crs(CRS) is p
