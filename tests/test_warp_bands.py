"""The warp's source windows read in shared pieces (:mod:`xdem._warp_bands`)."""

from __future__ import annotations

import numpy as np
import pytest

import xdem
import xdem.warp
from xdem.warp import FrameOp, Grid, warp_dem

_ROWS, _COLS, _CHUNK = 96, 160, 32


@pytest.fixture(scope="module")
def file_dem(tmp_path_factory):
    """A float32 GTiff (16-pixel tiles, a nodata patch) opened in 32-pixel chunks."""
    import rasterio
    from rasterio.transform import from_origin

    rng = np.random.default_rng(3)
    z = (500 + np.cumsum(rng.normal(size=(_ROWS, _COLS)), axis=1)).astype("float32")
    z[30:36, 60:70] = -9999
    path = tmp_path_factory.mktemp("warp_bands") / "dem.tif"
    with rasterio.open(path, "w", driver="GTiff", width=_COLS, height=_ROWS, count=1, dtype="float32",
                       crs="EPSG:32633", transform=from_origin(1000, 5000, 2, 2), nodata=-9999, tiled=True,
                       blockxsize=16, blockysize=16) as dst:
        dst.write(z, 1)
    return xdem.open_dem(path, chunks=_CHUNK)


def _ops(grid: Grid) -> list[FrameOp]:
    """A shift of a few pixels, and a rotation about z and (slightly) x with a shift."""
    centre = np.array([grid.bounds[0] + 100.0, grid.bounds[1] + 90.0, 500.0])
    az, ax = 3e-3, 1e-6
    rz = np.array([[np.cos(az), -np.sin(az), 0.0], [np.sin(az), np.cos(az), 0.0], [0.0, 0.0, 1.0]])
    rx = np.array([[1.0, 0.0, 0.0], [0.0, np.cos(ax), -np.sin(ax)], [0.0, np.sin(ax), np.cos(ax)]])
    m = np.eye(4)
    m[:3, :3] = rz @ rx
    m[:3, 3] = (3.1, -4.6, 0.25)
    return [FrameOp(grid.crs, shift=(5.3, -2.2, 1.0)), FrameOp.rigid(grid.crs, m, centre)]


def _cut_keys(out) -> list:
    return [k for k in dict(out.data.__dask_graph__()) if isinstance(k, tuple) and k[0].startswith("warp-cut-")]


@pytest.mark.parametrize("resampling", ["bilinear", "cubic"])
def test_shared_windows_give_the_same_bits_as_one_read_per_chunk(file_dem, resampling, monkeypatch):
    grid = Grid.of(file_dem)
    for op in _ops(grid):
        shared = warp_dem(file_dem, grid=grid, op=op, resampling=resampling, z_range=(0.0, 1000.0))
        assert {k[1] for k in _cut_keys(shared)} == {"core", "ready", "h", "v"}  # read in shared pieces
        with monkeypatch.context() as m:
            m.setattr(xdem.warp, "shared_window_tasks", lambda *a, **k: None)
            single = warp_dem(file_dem, grid=grid, op=op, resampling=resampling, z_range=(0.0, 1000.0))
        assert all(len(k) == 5 for k in _cut_keys(single))  # one read per chunk
        a, b = shared.values, single.values
        assert np.isnan(a).sum() > 0
        np.testing.assert_array_equal(a, b)  # NaN at the same places too


def test_bands_are_read_once_per_boundary(file_dem):
    grid = Grid.of(file_dem)
    out = warp_dem(file_dem, grid=grid, op=FrameOp(grid.crs, shift=(5.3, -2.2, 1.0)))
    keys = _cut_keys(out)
    nbr, nbc = _ROWS // _CHUNK, _COLS // _CHUNK
    assert sum(k[1] == "core" for k in keys) == nbr * nbc
    assert sum(k[1] == "h" for k in keys) == (nbr - 1) * nbc
    assert sum(k[1] == "v" for k in keys) == nbr * (nbc - 1)


def test_a_thick_halo_is_read_in_one_piece(file_dem):
    """A shift of more than half a chunk: each window is read whole, as before."""
    grid = Grid.of(file_dem)
    out = warp_dem(file_dem, grid=grid, op=FrameOp(grid.crs, shift=(2.0 * _CHUNK, 0.0, 0.0)))
    keys = _cut_keys(out)
    assert keys and all(len(k) == 5 for k in keys)
    np.testing.assert_array_equal(out.values[:, _CHUNK:], file_dem.values[:, : _COLS - _CHUNK])
