"""Nodata made NaN in one compiled pass equals ``numpy.where(block == value, nan, block)`` bit for
bit (float32 and float64, signed zeros, infinities, NaN already there, non-contiguous blocks)."""

from __future__ import annotations

import numpy as np
import pytest

from xdem.kernels.nodata import nan_where_equal


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_where_equal_is_numpy_where(dtype):
    rng = np.random.default_rng(0)
    block = rng.normal(size=(37, 53)).astype(dtype)
    block[rng.random(block.shape) < 0.2] = -9999.0
    block[0, :5] = [np.nan, np.inf, -np.inf, -0.0, 0.0]
    for value in (-9999.0, 0.0, np.inf, 3.5):
        for b in (block, block[:, ::2]):
            got = nan_where_equal(b, value=value)
            ref = np.where(b == dtype(value), dtype(np.nan), b)
            assert got.dtype == ref.dtype and got.shape == ref.shape
            assert np.array_equal(got.view(np.uint8), ref.view(np.uint8))
    assert np.isnan(nan_where_equal(block, value=-9999.0)[block == -9999.0]).all()


@pytest.mark.parametrize("src, dst", [(np.float32, np.float32), (np.float64, np.float32), (np.float32, np.float64),
                                      (np.float64, np.float64)])
def test_fill_nan_is_the_cast_then_the_masked_assignment(src, dst):
    from xdem.kernels.nodata import fill_nan

    rng = np.random.default_rng(1)
    block = (rng.normal(size=(29, 31)) * 1e3).astype(src)
    block[rng.random(block.shape) < 0.2] = np.nan
    block[0, :4] = [np.inf, -0.0, 1e300 if src == np.float64 else 3e38, -np.inf]
    for value in (-9999.0, np.nan, 0.0):
        for b in (block, block[::3]):
            with np.errstate(over="ignore"):  # 1e300 -> float32 is inf in both
                got = fill_nan(b, value=value, dtype=np.dtype(dst))
                ref = b.astype(dst, copy=True)
            ref[np.isnan(ref)] = value
            assert got.dtype == ref.dtype and np.array_equal(got.view(np.uint8), ref.view(np.uint8))
