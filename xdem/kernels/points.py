"""Kernel of the point route: one DEM chunk, grown by a halo, evaluated at the points that
fall in it (values by NaN-aware interpolation, and when asked a small window around each).

Positions are in the grown block's pixel units: the value of ``block[i, j]`` is at position
``(i, j)``, i.e. at the pixel CENTRE (the runner, :mod:`xdem.points.bucket`, converts map
coordinates with ``col = (x - x0) / a - 0.5``).
"""

from __future__ import annotations

import numpy as np

from xdem.kernels.warp import interp_positions_kernel

__all__ = ["at_points_kernel"]


def at_points_kernel(
    block: np.ndarray, prow: np.ndarray, pcol: np.ndarray, *, resampling: str, half: int | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """Values of ``block`` at ``(prow, pcol)`` and, with ``half``, the windows around them.

    Parameters
    ----------
    block
        2-D values (a chunk grown by a halo; NaN where there is no data).
    prow, pcol
        ``(n,)`` fractional positions in ``block``'s pixel units.
    resampling
        ``"bilinear"``, ``"cubic"`` or ``"lagrange"``
        (:func:`xdem.kernels.warp.interp_positions_kernel`).
    half
        With a value, also cut windows of ``2 half + 2`` pixels starting at
        ``(floor(prow) - half, floor(pcol) - half)``; pixels outside ``block`` are NaN.

    Returns
    -------
    values : numpy.ndarray
        ``(n,)`` float64; NaN where the footprint meets a NaN or leaves the block.
    windows : numpy.ndarray or None
        ``(n, 2 half + 2, 2 half + 2)`` float32.

    Examples
    --------
    >>> b = np.arange(16.0).reshape(4, 4)
    >>> v, w = at_points_kernel(b, np.array([1.5]), np.array([2.25]), resampling="bilinear", half=1)
    >>> v.tolist(), w.shape, bool(w[0, 1, 1] == b[1, 2])
    ([8.25], (1, 4, 4), True)
    """
    values = interp_positions_kernel(block, prow, pcol, resampling=resampling)
    if half is None:
        return values, None
    size = 2 * half + 2
    h, w = block.shape
    off = np.arange(size) - half
    r = np.floor(prow).astype(np.int64)[:, None] + off[None, :]
    c = np.floor(pcol).astype(np.int64)[:, None] + off[None, :]
    rin, cin = (r >= 0) & (r < h), (c >= 0) & (c < w)
    win = block[np.clip(r, 0, h - 1)[:, :, None], np.clip(c, 0, w - 1)[:, None, :]].astype(np.float32)
    win[~(rin[:, :, None] & cin[:, None, :])] = np.nan
    return values, win
