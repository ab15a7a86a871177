"""Nodata values made NaN in one compiled pass (no boolean mask, no second pass of ``where``).

:func:`nan_where_equal` returns what ``numpy.where(block == value, nan, block)`` returns (in the
block's dtype, ``value`` compared in it), bit for bit (tested).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["nan_where_equal"]


@numba.njit(cache=True, nogil=True)
def _nan_where_equal(flat: np.ndarray, value: float, out: np.ndarray) -> None:  # pragma: no cover - compiled
    for k in range(len(flat)):
        v = flat[k]
        out[k] = np.nan if v == value else v


def nan_where_equal(block: np.ndarray, *, value: float) -> np.ndarray:
    """``block`` with every element equal to ``value`` (in the block's dtype) replaced by NaN.

    Examples
    --------
    >>> nan_where_equal(np.array([[1.0, -9999.0]], dtype=np.float32), value=-9999.0).tolist()
    [[1.0, nan]]
    """
    block = np.asarray(block)
    target = block.dtype.type(value)
    if block.dtype not in (np.float32, np.float64) or not block.flags.c_contiguous:
        return np.where(block == target, block.dtype.type(np.nan), block)
    out = np.empty_like(block)
    _nan_where_equal(block.reshape(-1), target, out.reshape(-1))
    return out
