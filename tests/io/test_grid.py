"""The one grid type, :class:`xdem.io.grid.Grid`: from a DEM, from an open file, to odc-geo."""

from __future__ import annotations

import dask
import numpy as np
import pytest
import rasterio
from affine import Affine

import xdem
import xdem.warp
from xdem.errors import CRSError
from xdem.examples import get_path
from xdem.io import sources
from xdem.io.grid import Grid, crs_key, read_region, same_crs, same_grid, with_transform
from xdem.io.sources import find_sources, region_reader


def test_grid_of_a_dem_is_the_grid_of_its_file():
    dem = xdem.open_dem(get_path("lidar"))
    with rasterio.open(get_path("lidar")) as src:
        file = Grid.of_dataset(src)
    assert Grid.of(dem) == file and Grid.of(dem).same_as(file)
    assert file.bounds == tuple(dem.rio.bounds()) and file.resolution == (1.0, 1.0)


def test_grid_is_the_grid_of_the_warp_and_compares_like_same_grid():
    assert xdem.warp.Grid is Grid and xdem.warp.crs_key is crs_key and xdem.warp.same_crs is same_crs
    dem = xdem.open_dem(get_path("lidar"))
    moved = with_transform(dem, dem.rio.transform() * Affine.translation(0.5, 0))
    assert Grid.of(dem).same_as(Grid.of(dem)) and same_grid(dem, dem)
    assert not Grid.of(dem).same_as(Grid.of(moved)) and not same_grid(dem, moved)


def test_grid_as_a_geobox_keeps_shape_transform_and_crs():
    g = Grid((3, 4), Affine(2.0, 0.0, 100.0, 0.0, -2.0, 50.0), "EPSG:32615")
    box = g.geobox()
    assert (tuple(box.shape), box.affine, box.crs.epsg) == ((3, 4), g.transform, 32615)
    x, y = g.centres(np.array([0]), np.array([0]))
    assert (float(x[0]), float(y[0])) == (101.0, 49.0)


def test_grid_needs_a_crs():
    dem = xdem.open_dem(get_path("lidar"))
    with pytest.raises(CRSError, match="no CRS"):
        Grid.of(dem.drop_vars("spatial_ref"))


def test_read_region_reads_each_block_from_the_file_with_the_values_of_the_chunks(tmp_path):
    """``read_region`` of a DEM opened from a file: blocks are the region cut by the chunks, each
    read from the file for its own window only (the reader sees the block's window, never the
    whole chunk), with the values of slicing the lazy DEM; a derived array is sliced as usual."""
    dem = xdem.open_dem(get_path("lidar"), chunks=128)
    rows, cols = slice(100, 300), slice(50, 260)
    read = region_reader(dem)
    seen: list[tuple[slice, slice]] = []

    def spy(r: slice, c: slice) -> np.ndarray:
        seen.append((r, c))
        return read(r, c)

    sources.register_region_reader(dem, spy)
    try:
        part = read_region(dem.data, rows, cols)
        with dask.config.set(scheduler="synchronous"):
            got = part.compute()
    finally:
        sources.register_region_reader(dem, read)
    assert part.chunks == dem.data[rows, cols].chunks == ((28, 128, 44), (78, 128, 4))
    np.testing.assert_array_equal(got, dem.values[rows, cols])
    assert sorted((r.start, r.stop, c.start, c.stop) for r, c in seen) == sorted(
        (r0, r1, c0, c1) for r0, r1 in ((100, 128), (128, 256), (256, 300)) for c0, c1 in ((50, 128), (128, 256), (256, 260)))
    assert find_sources(part) == find_sources(dem)
    derived = read_region((dem + 1).data, rows, cols)
    assert region_reader(dem + 1) is None and derived.name != part.name
    np.testing.assert_array_equal(derived.compute(), dem.values[rows, cols] + 1)
