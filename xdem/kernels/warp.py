"""Numpy kernels of the mapping-driven warp: NaN-local interpolation of one source window at
arbitrary fractional pixel positions (one output chunk at a time).

The weights are those of :mod:`xdem.kernels.interp` (bilinear 2 x 2, Keys cubic 4 x 4, no
pre-filter), so a NaN only reaches the outputs whose footprint gives it a non-zero weight,
exactly as :func:`xdem.kernels.interp.shift_block_kernel` does for a pure shift.
"""

from __future__ import annotations

import numpy as np

from xdem.kernels.interp import footprint, weights_1d

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
    before, after = footprint(resampling)
    finite = np.isfinite(prow) & np.isfinite(pcol)
    pr = np.where(finite, prow, 0.0)
    pc = np.where(finite, pcol, 0.0)
    ir = np.floor(pr).astype(np.int64)
    ic = np.floor(pc).astype(np.int64)
    fr, fc = pr - ir, pc - ic
    inside = finite & (ir - before >= 0) & (ir + after < h) & (ic - before >= 0) & (ic + after < w)
    np.clip(ir, before, max(h - 1 - after, before), out=ir)
    np.clip(ic, before, max(w - 1 - after, before), out=ic)
    out = np.zeros(pr.shape, dtype=np.float64)
    if h == 0 or w == 0:
        out[:] = np.nan
        return out
    src = window.astype(np.float64, copy=False)
    flat = src.ravel()
    col_terms = weights_1d(fc, resampling)
    for orow, wr in weights_1d(fr, resampling):
        base = np.clip(ir + orow, 0, h - 1) * w
        for ocol, wc in col_terms:
            weight = wr * wc
            values = flat[base + np.clip(ic + ocol, 0, w - 1)]
            # a zero weight must not let a NaN through (holes grow by the footprint only)
            out += np.where(weight == 0.0, 0.0, weight * values)
    out[~inside] = np.nan
    return out
