"""Nodata values made NaN, and NaN made nodata, in one compiled pass (no boolean mask, no second
pass of ``where``).

:func:`nan_where_equal` returns what ``numpy.where(block == value, nan, block)`` returns (in the
block's dtype, ``value`` compared in it), :func:`fill_nan` what ``out = block.astype(dtype);
out[isnan(out)] = value`` leaves, bit for bit (tested).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["nan_where_equal", "fill_nan"]


@numba.njit(cache=True, nogil=True)
def _nan_where_equal(flat: np.ndarray, value: float, out: np.ndarray) -> None:  # pragma: no cover - compiled
    for k in range(len(flat)):
        v = flat[k]
        out[k] = np.nan if v == value else v


def nan_where_equal(block: np.ndarray, *, value: float, in_place: bool = False) -> np.ndarray:
    """``block`` with every element equal to ``value`` (in the block's dtype) replaced by NaN.

    With ``in_place``, a writeable contiguous floating ``block`` is changed and returned (for an
    array its caller owns alone, e.g. a block just decoded: no second chunk-sized allocation);
    any other block is copied as without it.

    Examples
    --------
    >>> nan_where_equal(np.array([[1.0, -9999.0]], dtype=np.float32), value=-9999.0).tolist()
    [[1.0, nan]]
    >>> block = np.array([-9999.0, 2.0], dtype=np.float32)
    >>> nan_where_equal(block, value=-9999.0, in_place=True) is block, block.tolist()
    (True, [nan, 2.0])
    """
    block = np.asarray(block)
    target = block.dtype.type(value)
    if block.dtype not in (np.float32, np.float64) or not block.flags.c_contiguous:
        return np.where(block == target, block.dtype.type(np.nan), block)
    out = block if in_place and block.flags.writeable else np.empty_like(block)
    _nan_where_equal(block.reshape(-1), target, out.reshape(-1))
    return out


@numba.njit(cache=True, nogil=True)
def _fill_nan(flat: np.ndarray, value: float, out: np.ndarray) -> None:  # pragma: no cover - compiled
    for k in range(len(flat)):
        v = flat[k]
        out[k] = value if v != v else v


def fill_nan(block: np.ndarray, *, value: float, dtype: np.dtype) -> np.ndarray:
    """``block`` cast to the floating ``dtype``, NaN replaced by ``value`` (cast to ``dtype``).

    Examples
    --------
    >>> fill_nan(np.array([1.0, np.nan]), value=-9999.0, dtype=np.dtype(np.float32)).tolist()
    [1.0, -9999.0]
    """
    block, dtype = np.asarray(block), np.dtype(dtype)
    if block.dtype not in (np.float32, np.float64) or dtype not in (np.float32, np.float64) \
            or not block.flags.c_contiguous:
        out = block.astype(dtype, copy=True)
        out[np.isnan(out)] = value
        return out
    out = np.empty(block.shape, dtype=dtype)
    _fill_nan(block.reshape(-1), dtype.type(value), out.reshape(-1))
    return out
