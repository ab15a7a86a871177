"""Numpy kernels of the mapping-driven warp: NaN-local interpolation of one source window at
arbitrary fractional pixel positions (one output chunk at a time).

The weights are those of :mod:`xdem.kernels.interp` (bilinear 2 x 2, Keys cubic 4 x 4, no
pre-filter), so a NaN only reaches the outputs whose footprint gives it a non-zero weight,
exactly as :func:`xdem.kernels.interp.shift_block_kernel` does for a pure shift.
"""

from __future__ import annotations

import numpy as np

from xdem.kernels.interp import weights_1d

__all__ = ["interp_positions_kernel"]


def interp_positions_kernel(
    window: np.ndarray, prow: np.ndarray, pcol: np.ndarray, *, resampling: str = "bilinear"
) -> np.ndarray:
    """Interpolate a 2-D ``window`` at fractional positions ``(prow, pcol)``.

    Parameters
    ----------
    window
        ``(h, w)`` source values; the value of ``window[i, j]`` is at position ``(i, j)``.
    prow, pcol
        Positions (any equal shapes) in the window's pixel units; NaN positions give NaN.
    resampling
        ``"bilinear"`` or ``"cubic"``.

    Returns
    -------
    numpy.ndarray
        float64 of the positions' shape; NaN where the footprint leaves the window or
        touches a NaN with a non-zero weight.

    Notes
    -----
    The terms are accumulated one at a time into one buffer (no stack of per-term arrays),
    so the kernel holds a few position-sized arrays whatever the interpolation.

    Examples
    --------
    >>> w = np.arange(16.0).reshape(4, 4)
    >>> interp_positions_kernel(w, np.array([1.5]), np.array([2.0])).tolist()
    [8.0]
    >>> interp_positions_kernel(w, np.array([3.5]), np.array([0.0])).tolist()  # leaves the window
    [nan]
    """
    h, w = window.shape
    finite = np.isfinite(prow) & np.isfinite(pcol)
    if h == 0 or w == 0:
        return np.full(np.shape(prow), np.nan)
    pr = np.where(finite, prow, 0.0)
    pc = np.where(finite, pcol, 0.0)
    ir = np.floor(pr).astype(np.int64)
    ic = np.floor(pc).astype(np.int64)
    fr, fc = pr - ir, pc - ic
    out = np.zeros(pr.shape, dtype=np.float64)
    outside = ~finite
    flat = window.astype(np.float64, copy=False).ravel()
    col_terms = [(ic + ocol, wc) for ocol, wc in weights_1d(fc, resampling)]
    for orow, wr in weights_1d(fr, resampling):
        rows = ir + orow
        row_out = (rows < 0) | (rows >= h)
        base = np.clip(rows, 0, h - 1) * w
        for cols, wc in col_terms:
            weight = wr * wc
            used = weight != 0.0  # a zero weight neither needs its pixel nor lets its NaN through
            outside |= used & (row_out | (cols < 0) | (cols >= w))
            out += np.where(used, weight * flat[base + np.clip(cols, 0, w - 1)], 0.0)
    out[outside] = np.nan
    return out
