"""Threaded computes leave the process's warning filters as they were: no task enters a
``warnings.catch_warnings`` block.

Such a block saves the process-wide filter list on entry and puts it back on exit. Two threads'
blocks interleaved (one enters, the other enters, the first leaves, the second leaves) leave the
second block's filters installed for the rest of the process; rasterio's block around its
in-memory raster installs "ignore every warning", which then hid every later warning, xdem's
input checks included. The spy (``helpers.filter_blocks_in_threads``) makes the property
deterministic: each test below recorded entries before its fix.
"""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
from affine import Affine
from helpers import filter_blocks_in_threads
from rasterio.features import rasterize
from shapely import Point, box
from truth import SineTerrain, dem_of, grid_around

from xdem.examples.glaciers import glacier_set
from xdem.masks import burn_shapes, labels_like
from xdem.stats import nanmax, nanmin
from xdem.warp import FrameOp, Grid, warp_dem

TERRAIN_CRS = "EPSG:32615"
X0, Y0 = 400_000.0, 5_100_000.0


def test_warp_into_another_crs_enters_no_filter_block_in_its_tasks():
    """The mapped (non-rigid) warp checks each strip's source positions against its window; the
    positions' extremes used to be taken inside a block silencing all-NaN warnings."""
    terrain = SineTerrain(crs=TERRAIN_CRS, origin=(X0, Y0))
    t, shape = grid_around((X0, Y0 - 2000.0, X0 + 2000.0, Y0), TERRAIN_CRS, "EPSG:3413", 10.0)
    src = dem_of(terrain, crs="EPSG:3413", transform=t, shape=shape, chunks=64)
    src = src.where(~((src.x > src.x[40]) & (src.x < src.x[90]) & (src.y < src.y[30])))  # a void
    out = warp_dem(src, grid=Grid.of(src), op=FrameOp(TERRAIN_CRS, shift=(3.2, -1.7, 1.5)), resampling="cubic",
                   chunks=(50, 50))
    expected = out.compute(scheduler="sync").values
    before = list(warnings.filters)
    with filter_blocks_in_threads() as entered:
        got = out.compute(scheduler="threads", num_workers=4).values
    assert entered == []
    assert warnings.filters == before
    np.testing.assert_array_equal(got, expected)
    assert np.isnan(got).any() and np.isfinite(got).sum() > 0.5 * got.size


def test_threaded_burning_enters_no_filter_block():
    """rasterize into a numpy array enters a block with "ignore every warning": before the fix
    every threaded pass over these 400 blocks left it installed, and no later warning was shown."""
    g = glacier_set((400, 400), chunks=20)  # 400 blocks
    before = list(warnings.filters)
    for _ in range(3):
        with filter_blocks_in_threads() as entered:
            labels = labels_like(g.outlines, g.ref).compute(scheduler="threads", num_workers=4)
        assert entered == []
        assert warnings.filters == before
        assert (labels == g.index.values).all()
    with pytest.warns(UserWarning, match="still shown"):
        warnings.warn("still shown", UserWarning, stacklevel=1)


@pytest.mark.parametrize("all_touched", [False, True])
@pytest.mark.parametrize("dtype", ["uint8", "int32"])
def test_burn_shapes_gives_rasterios_array_route(all_touched, dtype):
    """Burnt into a GDAL in-memory dataset (no filter block), the values are those of rasterize
    into a numpy array, later shapes over earlier ones, outside them 0."""
    t = Affine(10.0, 0.0, 1000.0, 0.0, -10.0, 5000.0)
    shapes = [(Point(1500 + 90 * i, 4500 - 70 * i).buffer(120 + 10 * i, 16), i + 1) for i in range(6)]
    shapes.append((box(1000, 4000, 1333, 4333), 9))
    got = burn_shapes(shapes, out_shape=(97, 103), transform=t, dtype=dtype, all_touched=all_touched)
    want = rasterize(shapes, out_shape=(97, 103), transform=t, fill=0, all_touched=all_touched, dtype=dtype)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(got)) == 8


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_nanmin_nanmax_give_numpys_values_without_filter_blocks(axis):
    """xdem.stats.nanmin / nanmax (used for the DEM's statistics, the binning ranges) give numpy's
    nan-skipping extremes, NaN for an all-NaN slice, for any chunking; dask's own enter a filter
    block in every task."""
    rng = np.random.default_rng(3)
    a = rng.normal(size=(60, 70))
    a[rng.random(a.shape) < 0.3] = np.nan
    a[:, 5] = np.nan
    a[7, :] = np.nan
    with warnings.catch_warnings():  # numpy's own warning on the all-NaN slices
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.nanmin(a, axis=axis), np.nanmax(a, axis=axis)
    for chunks in [(60, 70), (7, 9), (1, 70)]:
        x = da.from_array(a, chunks=chunks)
        with filter_blocks_in_threads() as entered:
            got = da.compute(nanmin(x, axis=axis), nanmax(x, axis=axis), scheduler="threads", num_workers=4)
        assert entered == []
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
    assert np.isnan(nanmin(da.from_array(np.full((4, 4), np.nan), chunks=2)).compute())
    assert nanmax(da.from_array(np.arange(12).reshape(3, 4), chunks=2), axis=axis).compute().tolist() == \
        np.arange(12).reshape(3, 4).max(axis=axis).tolist()
