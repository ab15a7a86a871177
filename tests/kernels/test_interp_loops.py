"""The compiled interpolation loops (:mod:`xdem.kernels._interp_loops`) and the slope/aspect at
window centres give exactly (bit for bit) what the numpy expressions they replace give: a block
shifted by fractional and integer amounts, windows interpolated at per-point positions, float32
and float64, NaNs, positions leaving the windows; slope/aspect at the centres of 3 x 3
neighbourhoods against the kernel run on a mosaic of them (flat cells, NaNs, both methods)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from xdem.coreg._windows import terrain_at_windows
from xdem.kernels.interp import interp_windows_kernel, interp_windows_numpy, shift_block_kernel, weights_1d
from xdem.terrain.kernels import slope_aspect_kernel


def _shift_numpy(block: np.ndarray, drow: float, dcol: float, resampling: str) -> np.ndarray:
    """The numpy definition: one float64 accumulator, ``multiply(view, w, out=float64)`` per term."""
    ny, nx = block.shape
    kr, kc = math.floor(drow), math.floor(dcol)
    rows = [(kr + o, w) for o, w in weights_1d(drow - kr, resampling) if w != 0.0]
    cols = [(kc + o, w) for o, w in weights_1d(dcol - kc, resampling) if w != 0.0]
    r0, r1 = max(0, -min(d for d, _ in rows)), min(ny, ny - max(d for d, _ in rows))
    c0, c1 = max(0, -min(d for d, _ in cols)), min(nx, nx - max(d for d, _ in cols))
    out = np.full(block.shape, np.nan, dtype=block.dtype)
    if r1 <= r0 or c1 <= c0:
        return out
    acc = np.zeros((r1 - r0, c1 - c0))
    tmp = np.empty_like(acc)
    for dr, wr in rows:
        for dc, wc in cols:
            np.multiply(block[r0 + dr : r1 + dr, c0 + dc : c1 + dc], float(wr * wc), out=tmp)
            acc += tmp
    out[r0:r1, c0:c1] = acc
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("resampling", ["bilinear", "cubic"])
def test_shift_block_kernel_equals_the_numpy_accumulation(dtype, resampling):
    rng = np.random.default_rng(1)
    block = (rng.normal(size=(61, 47)) * 300 + 1000).astype(dtype)
    block[rng.random(block.shape) < 0.03] = np.nan
    for drow, dcol in ((0.284, -0.634), (-3.5, 2.0), (1.0, 0.0), (0.0, 0.25), (-0.999, 7.001), (40.0, 0.5)):
        got = shift_block_kernel(block, drow=drow, dcol=dcol, resampling=resampling)
        ref = _shift_numpy(block, drow, dcol, resampling)
        assert got.dtype == ref.dtype
        np.testing.assert_array_equal(got, ref)
    assert np.isnan(shift_block_kernel(block, drow=100.5, dcol=0.0)).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("resampling", ["bilinear", "cubic", "lagrange"])
def test_interp_windows_kernel_equals_the_numpy_expression(dtype, resampling):
    rng = np.random.default_rng(2)
    n = 3001
    windows = (rng.normal(size=(n, 6, 6)) * 100).astype(dtype)
    windows[rng.random(windows.shape) < 0.02] = np.nan
    for prow, pcol in ((np.full(n, 2.284), np.full(n, 1.6)), (rng.uniform(-1.5, 7.5, n), rng.uniform(-1.5, 7.5, n)),
                       (np.full(n, 2.0), np.full(n, 3.0))):
        got = interp_windows_kernel(windows, prow, pcol, resampling=resampling)
        np.testing.assert_array_equal(got, interp_windows_numpy(windows, prow, pcol, resampling=resampling))
    assert np.isnan(interp_windows_kernel(windows[:2], np.array([np.nan, np.inf]), np.full(2, 2.0),
                                          resampling=resampling)).all()


def _terrain_on_a_mosaic(windows: np.ndarray, half: int, method: str) -> tuple[np.ndarray, np.ndarray]:
    """The definition: the 3 x 3 neighbourhoods side by side, the block kernel, every third column."""
    nb = windows[:, half - 1 : half + 2, half - 1 : half + 2].astype(np.float64)
    slope, aspect = slope_aspect_kernel(nb.transpose(1, 0, 2).reshape(3, -1), res_x=5.0, res_y=-4.0, method=method)
    return np.degrees(slope[0, 0::3]), np.degrees(aspect[0, 0::3])


@pytest.mark.parametrize("method", ["horn", "zevenbergthorne"])
def test_terrain_at_window_centres_equals_the_kernel_on_a_mosaic(method):
    rng = np.random.default_rng(3)
    for n in (1, 5, 1027):
        windows = (rng.normal(size=(n, 6, 6)) * 50).astype(np.float32)
        windows[rng.random(windows.shape) < 0.03] = np.nan
        windows[: n // 3, 1:4, 1:4] = 5.0  # flat: aspect NaN
        for half in (1, 2):
            got = terrain_at_windows(windows, half, res_x=5.0, res_y=-4.0, method=method)
            for g, r in zip(got, _terrain_on_a_mosaic(windows, half, method)):
                np.testing.assert_array_equal(g, r)
