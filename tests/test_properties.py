"""Property tests (hypothesis) of the three graph builders every method relies on: the
reproducible subsample, the halo runner and the frame warp, over random shapes, chunkings,
masks, seeds, depths and shifts. Each compares against a brute-force numpy definition."""

from __future__ import annotations

import dask.array as da
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xdem.kernels.interp import shift_block_kernel
from xdem.overlap import map_overlap_nan
from xdem.sampling import pixel_uniform, resolve_count, sample_valid
from xdem.warp import FrameOp, Grid, warp_dem

#: Derandomised so that CI runs the same examples every time; explore locally by raising
#: max_examples and dropping derandomize (400 random examples each passed when written).
SETTINGS = settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def grids(draw, *, max_side: int = 40):
    """A shape, a chunking (maybe ragged) and a random field with NaN holes."""
    ny, nx = draw(st.integers(1, max_side)), draw(st.integers(1, max_side))
    cy, cx = draw(st.integers(1, ny)), draw(st.integers(1, nx))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(ny, nx))
    z[rng.random(z.shape) < draw(st.floats(0.0, 0.95))] = np.nan
    return z, (cy, cx)


@SETTINGS
@given(grids(), st.one_of(st.integers(1, 2000), st.floats(0.01, 1.0)), st.integers(0, 10**6))
def test_subsample_is_the_smallest_hashes_of_valid_pixels(grid, subsample, seed):
    """Definition: the ``n`` valid pixels with the smallest per-pixel hash, sorted by global
    index; whatever the chunking."""
    z, chunks = grid
    valid = np.isfinite(z)
    n_valid = int(valid.sum())
    if n_valid == 0:
        return
    s = sample_valid(da.isfinite(da.from_array(z, chunks=chunks)), {"z": da.from_array(z, chunks=chunks)},
                     subsample=subsample, random_state=seed)
    u = pixel_uniform(0, 0, z.shape, z.shape[1], seed)
    flat = np.flatnonzero(valid.ravel())
    n = resolve_count(subsample, n_valid)
    chosen = np.sort(flat[np.argsort(u.ravel()[flat], kind="stable")[:n]])
    np.testing.assert_array_equal(s["row"] * z.shape[1] + s["col"], chosen)
    np.testing.assert_array_equal(s["z"], z.ravel()[chosen])
    assert s.n_valid == n_valid


def _neighbour_mean(b: np.ndarray) -> np.ndarray:
    out = np.full_like(b, np.nan)
    out[1:-1, 1:-1] = (b[:-2, 1:-1] + b[2:, 1:-1] + b[1:-1, :-2] + b[1:-1, 2:]) / 4.0
    return out


@SETTINGS
@given(grids(), st.integers(1, 4), st.integers(1, 4))
def test_halo_runner_equals_padding_the_whole_array(grid, dr, dc):
    """Definition: the kernel run on the whole array padded with NaN, then trimmed."""
    z, chunks = grid
    padded = np.pad(z, ((dr, dr), (dc, dc)), constant_values=np.nan)
    expected = _neighbour_mean(padded)[dr:dr + z.shape[0], dc:dc + z.shape[1]]
    got = map_overlap_nan(_neighbour_mean, da.from_array(z, chunks=chunks), depth=(dr, dc), dtype=float).compute()
    np.testing.assert_array_equal(got, expected)


#: Shifts on a 1/64-metre lattice (1/128 pixel): binary fractions, so that both formulations
#: (pixel offsets, coordinates) round alike and the comparison can be exact about NaN pixels.
SHIFTS = st.integers(-256, 256).map(lambda k: k / 64.0)


@SETTINGS
@given(grids(max_side=30), SHIFTS, SHIFTS, st.sampled_from(["bilinear", "cubic"]),
       st.integers(3, 30), st.integers(3, 30))
def test_warp_equals_shifting_the_whole_array(grid, sx, sy, resampling, oy, ox):
    """Definition: in the DEM's own CRS, the warp onto its own grid is the whole array
    resampled at the shifted positions (NaN where the footprint leaves it), for any output
    chunking."""
    import xarray as xr
    from affine import Affine

    z, chunks = grid
    t = Affine(2.0, 0.0, 500000.0, 0.0, -2.0, 4000000.0)
    ny, nx = z.shape
    dem = xr.DataArray(da.from_array(z.astype(np.float32), chunks=chunks), dims=("y", "x"),
                       coords={"y": 4000000.0 - 2.0 * (np.arange(ny) + 0.5), "x": 500000.0 + 2.0 * (np.arange(nx) + 0.5)})
    dem = dem.rio.write_crs("EPSG:32633").rio.write_transform(t)
    g = Grid.of(dem)
    got = warp_dem(dem, grid=g, op=FrameOp(g.crs, shift=(sx, sy, 0.0)), resampling=resampling,
                   chunks=(oy, ox)).values
    drow, dcol = sy / 2.0, -sx / 2.0  # out(x, y) = z(x - sx, y - sy): rows go south, y - sy is sy/2 rows down
    pad = 8
    padded = np.pad(z.astype(np.float32), pad, constant_values=np.nan)
    expected = shift_block_kernel(padded, drow=drow, dcol=dcol, resampling=resampling)[pad:pad + ny, pad:pad + nx]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_allclose(got, expected, atol=2e-5, equal_nan=True)
