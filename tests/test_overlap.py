"""The halo runner equals dask's map_overlap (NaN boundary) and never pins whole chunks."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from xdem.overlap import _edges, map_overlap_nan


def _laplace(b: np.ndarray) -> np.ndarray:
    out = np.full_like(b, np.nan)
    out[1:-1, 1:-1] = b[:-2, 1:-1] + b[2:, 1:-1] + b[1:-1, :-2] + b[1:-1, 2:] - 4 * b[1:-1, 1:-1]
    return out


@pytest.mark.parametrize("chunks", [(5, 7), (10, 53), (37, 4), (3, 3)])
@pytest.mark.parametrize("depth", [1, (3, 2), (0, 2)])
def test_equals_dask_map_overlap_with_nan_boundary(chunks, depth):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(37, 53))
    x[5:9, 10:12] = np.nan
    a = da.from_array(x, chunks=chunks)
    d = depth if isinstance(depth, tuple) else (depth, depth)
    ref = da.map_overlap(_laplace, a, depth={0: d[0], 1: d[1]}, boundary=np.nan, dtype=float).compute()
    mine = map_overlap_nan(_laplace, a, depth=depth, dtype=float).compute()
    np.testing.assert_array_equal(mine, ref)


def test_halo_strips_are_copies_not_views():
    block = np.arange(100.0).reshape(10, 10)
    for piece in _edges(block, 2, 3).values():
        assert not np.shares_memory(piece, block)


def test_leading_axis_and_untrimmed_kernel():
    x = np.arange(64.0).reshape(8, 8)
    a = da.from_array(x, chunks=3)
    out = map_overlap_nan(lambda b: np.stack([b[1:-1, 1:-1], 2 * b[1:-1, 1:-1]]), a, depth=1, dtype=float,
                          trim=False, leading=2)
    np.testing.assert_array_equal(out.compute(), np.stack([x, 2 * x]))
