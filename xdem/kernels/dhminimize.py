"""Kernels of :class:`~xdem.coreg.DhMinimize`: the to-be-aligned DEM at one shift, interpolated
inside small windows, and the spread of the elevation differences there.

Every sampled pixel is moved by the same shift, so its fractional position inside its window is
the same for all windows: the separable weights (:func:`xdem.kernels.interp.weights_1d`) are
scalars and the interpolation is a few weighted sums of window slices (no per-point indexing).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from xdem.kernels.interp import footprint, weights_1d

__all__ = ["interp_windows_at", "spread_at"]


def interp_windows_at(windows: np.ndarray, prow: float, pcol: float, *, resampling: str = "cubic") -> np.ndarray:
    """Interpolate every window at the same fractional position ``(prow, pcol)``.

    Parameters
    ----------
    windows
        ``(n, h, w)`` values around each point.
    prow, pcol
        Position inside the windows, in window pixel units (row, column).
    resampling
        ``"bilinear"`` or ``"cubic"`` (Keys, ``a = -0.5``), as :func:`xdem.kernels.interp.interp_windows_kernel`.

    Returns
    -------
    numpy.ndarray
        ``(n,)`` float64 values: equal (to rounding) to ``interp_windows_kernel`` at that position
        for every window. A NaN given a non-zero weight gives NaN.

    Raises
    ------
    ValueError
        The footprint of the position leaves the windows.

    Examples
    --------
    >>> w = np.arange(32.0).reshape(2, 4, 4)
    >>> interp_windows_at(w, 1.5, 2.0, resampling="bilinear").tolist()
    [8.0, 24.0]
    """
    n, h, w = windows.shape
    before, after = footprint(resampling)
    ir, ic = math.floor(prow), math.floor(pcol)
    if ir - before < 0 or ir + after >= h or ic - before < 0 or ic + after >= w:
        raise ValueError(f"position ({prow}, {pcol}) is too close to the edge of {h} x {w} windows for {resampling}")
    rows = np.zeros((n, w), dtype=np.float64)
    for orow, wr in weights_1d(prow - ir, resampling):
        if wr != 0.0:
            rows += float(wr) * windows[:, ir + orow, :].astype(np.float64)
    out = np.zeros(n, dtype=np.float64)
    for ocol, wc in weights_1d(pcol - ic, resampling):
        if wc != 0.0:
            out += float(wc) * rows[:, ic + ocol]
    return out


def spread_at(windows: np.ndarray, ref: np.ndarray, prow: float, pcol: float, *, resampling: str,
              spread: Callable[[np.ndarray], float]) -> float:
    """``spread(dh)``, ``dh`` the windows interpolated at ``(prow, pcol)`` minus ``ref``, over finite values.

    Examples
    --------
    >>> w = np.arange(32.0).reshape(2, 4, 4)
    >>> spread_at(w, np.array([8.0, 20.0]), 1.5, 2.0, resampling="bilinear", spread=np.ptp)
    4.0
    """
    dh = interp_windows_at(windows, prow, pcol, resampling=resampling) - ref
    return float(spread(dh[np.isfinite(dh)]))
