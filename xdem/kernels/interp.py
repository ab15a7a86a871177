"""NaN-local interpolation kernels: shift a block, or evaluate points inside windows.

Both use separable convolution weights with a finite footprint (bilinear: 2 x 2, cubic:
Keys' cubic convolution with a = -0.5, 4 x 4) and no spline pre-filter, so a NaN only
affects outputs whose footprint gives it a non-zero weight: holes grow by at most the
footprint, never further. An exact integer shift copies the data.

Keys' cubic convolution moves the phase of a wave exactly as bilinear interpolation does
(its correction to the linear interpolant is a real multiple of it, wave by wave): on rough
terrain a DEM evaluated at a fraction ``f`` of a pixel looks displaced by a small amount
that depends on ``f`` (0.01 pixel for waves of 8 pixels at ``f = 0.2``). The fits that
evaluate a DEM between pixels to measure its displacement use ``"lagrange"`` instead
(:data:`FIT_INTERPOLATION`): the 4-point Lagrange (cubic polynomial) interpolation, same
4 x 4 footprint, 8 times less phase error on waves of 8 pixels and 50 times less on waves
of 20 (not C1 across pixels, so it is not offered to resample a DEM).

On terrain whose spectrum reaches 2 to 3 pixels the 4-point Lagrange interpolation still
displaces the shortest waves enough to bias a fitted pure shift by about 0.0015 pixel; the
6- and 8-point Lagrange interpolations (``"lagrange6"``, ``"lagrange8"``: polynomials of degree
5 and 7 through 6 x 6 and 8 x 8 footprints, :func:`lagrange_weights`) leave about a half and a
quarter of it (:data:`FIT_INTERPOLATIONS`, offered by :class:`~xdem.coreg.LZD`'s
``fit_interpolation``).
"""

from __future__ import annotations

import math

import numpy as np

from xdem.kernels._interp_loops import CODES, shift_loop, windows_loop

__all__ = ["RESAMPLINGS", "FIT_INTERPOLATION", "FIT_INTERPOLATIONS", "footprint", "weights_1d", "lagrange_weights",
           "shift_block_kernel", "interp_windows_kernel", "interp_windows_numpy", "interp_windows_separable"]

#: Interpolation names accepted by ``resampling`` arguments.
RESAMPLINGS = ("bilinear", "cubic")
#: Interpolation used by fits that measure a displacement by evaluating a DEM between pixels
#: (see the module notes); also accepted by :func:`footprint`, :func:`weights_1d` and
#: :func:`interp_windows_kernel`.
FIT_INTERPOLATION = "lagrange"
#: Lagrange interpolations through more points (see the module notes) -> their number of points
#: per axis; also accepted by :func:`footprint`, :func:`weights_1d` and :func:`interp_windows_kernel`.
_LAGRANGE_POINTS = {"lagrange6": 6, "lagrange8": 8}
#: The interpolations a fit may evaluate a DEM with, between pixels: 4, 6 and 8 points per axis.
FIT_INTERPOLATIONS = (FIT_INTERPOLATION, *_LAGRANGE_POINTS)


def footprint(resampling: str) -> tuple[int, int]:
    """``(before, after)`` pixels an interpolation reads around ``floor(position)``."""
    if resampling == "bilinear":
        return (0, 1)
    if resampling in ("cubic", "lagrange"):
        return (1, 2)
    if resampling in _LAGRANGE_POINTS:
        return (_LAGRANGE_POINTS[resampling] // 2 - 1, _LAGRANGE_POINTS[resampling] // 2)
    raise ValueError(f"resampling must be one of {RESAMPLINGS}, got {resampling!r}")


def weights_1d(frac: np.ndarray | float, resampling: str) -> list[tuple[int, np.ndarray | float]]:
    """``(offset, weight)`` pairs around ``floor(position)`` for fractional parts ``frac``."""
    f = frac
    if resampling == "bilinear":
        return [(0, 1.0 - f), (1, f)]
    if resampling == "cubic":
        a = -0.5

        def near(t: np.ndarray | float) -> np.ndarray | float:  # |t| <= 1
            return (a + 2.0) * (t * t * t) - (a + 3.0) * (t * t) + 1.0

        def far(t: np.ndarray | float) -> np.ndarray | float:  # 1 < |t| < 2
            return a * (t * t * t) - 5.0 * a * (t * t) + 8.0 * a * t - 4.0 * a

        return [(-1, far(1.0 + f)), (0, near(f)), (1, near(1.0 - f)), (2, far(2.0 - f))]
    if resampling == "lagrange":  # the cubic through the 4 nodes -1, 0, 1, 2 (exactly 0, 1, 0, 0 at f = 0)
        return [(-1, -f * (f - 1.0) * (f - 2.0) / 6.0), (0, (f + 1.0) * (f - 1.0) * (f - 2.0) / 2.0),
                (1, -(f + 1.0) * f * (f - 2.0) / 2.0), (2, (f + 1.0) * f * (f - 1.0) / 6.0)]
    if resampling in _LAGRANGE_POINTS:
        return lagrange_weights(f, _LAGRANGE_POINTS[resampling])
    raise ValueError(f"resampling must be one of {RESAMPLINGS}, got {resampling!r}")


def lagrange_weights(frac: np.ndarray | float, points: int) -> list[tuple[int, np.ndarray | float]]:
    """``(offset, weight)`` pairs of the Lagrange interpolation through ``points`` (even) nodes
    ``1 - points / 2 ... points / 2`` around ``floor(position)``: the polynomial of degree
    ``points - 1`` through them, at the fractions ``frac``. Exactly ``1`` at offset 0 and ``0``
    elsewhere for ``frac = 0`` (a NaN neighbour does not spread there).

    Examples
    --------
    >>> w = lagrange_weights(0.25, 6)
    >>> [o for o, _ in w], round(sum(float(v) for _, v in w), 12)
    ([-2, -1, 0, 1, 2, 3], 1.0)
    >>> abs(sum(float(v) * o**5 for o, v in w) - 0.25**5) < 1e-12  # exact for degree 5
    True
    """
    f = frac
    nodes = range(1 - points // 2, points // 2 + 1)
    out: list[tuple[int, np.ndarray | float]] = []
    for o in nodes:
        w: np.ndarray | float = 1.0
        for m in nodes:
            if m != o:
                w = w * ((f - m) / float(o - m))
        out.append((o, w))
    return out


def _accumulate(terms: list[tuple[np.ndarray | float, np.ndarray]], shape: tuple[int, ...]) -> np.ndarray:
    """Sum of ``weight * value`` skipping exact zero weights (so a NaN there does not spread)."""
    out = np.zeros(shape, dtype=np.float64)
    for w, v in terms:
        w_arr = np.asarray(w, dtype=np.float64)
        if w_arr.ndim == 0:
            if w_arr == 0.0:
                continue
            out += w_arr * v
        else:
            out += np.where(w_arr == 0.0, 0.0, w_arr * np.where(w_arr == 0.0, 0.0, v))
    return out


def shift_block_kernel(block: np.ndarray, *, drow: float, dcol: float, resampling: str = "bilinear") -> np.ndarray:
    """Resample a block at positions shifted by ``(drow, dcol)`` pixels.

    ``out[i, j]`` is the interpolated value of ``block`` at row ``i + drow`` and column
    ``j + dcol``; NaN where the footprint leaves the block or touches a NaN with non-zero
    weight. Meant for ``map_overlap`` with ``depth >= ceil(|shift|) + footprint``.

    The weighted terms are summed in float64 pixel by pixel in one compiled pass for float32
    and float64 blocks (:func:`xdem.kernels._interp_loops.shift_loop`: no temporary; the same
    operations in the same order as the numpy expression used for other dtypes, which
    accumulates the terms one at a time into a single float64 buffer from views of ``block``).

    Examples
    --------
    >>> b = np.arange(16.0).reshape(4, 4)
    >>> float(shift_block_kernel(b, drow=0.5, dcol=0.0)[1, 1])
    7.0
    """
    ny, nx = block.shape
    kr, kc = math.floor(drow), math.floor(dcol)
    fr, fc = drow - kr, dcol - kc
    rows = [(kr + o, w) for o, w in weights_1d(fr, resampling) if w != 0.0]
    cols = [(kc + o, w) for o, w in weights_1d(fc, resampling) if w != 0.0]
    # output rows i whose every term i + dr stays inside the block, same for columns
    r0, r1 = max(0, -min(d for d, _ in rows)), min(ny, ny - max(d for d, _ in rows))
    c0, c1 = max(0, -min(d for d, _ in cols)), min(nx, nx - max(d for d, _ in cols))
    if r1 <= r0 or c1 <= c0:
        return np.full(block.shape, np.nan, dtype=block.dtype)
    if block.dtype in (np.float32, np.float64):  # one compiled pass, the same operations (tested)
        out = np.empty(block.shape, dtype=block.dtype)
        out[:r0], out[r1:], out[:, :c0], out[:, c1:] = np.nan, np.nan, np.nan, np.nan  # the border only
        w = np.array([float(wr * wc) for _, wr in rows for _, wc in cols], dtype=block.dtype)
        shift_loop(block, np.array([d for d, _ in rows]), np.array([d for d, _ in cols]), w, r0, r1, c0, c1, out)
        return out
    out = np.full(block.shape, np.nan, dtype=block.dtype)
    acc = np.zeros((r1 - r0, c1 - c0), dtype=np.float64)
    tmp = np.empty_like(acc)
    for dr, wr in rows:
        for dc, wc in cols:
            np.multiply(block[r0 + dr : r1 + dr, c0 + dc : c1 + dc], float(wr * wc), out=tmp)
            acc += tmp
    out[r0:r1, c0:c1] = acc
    return out


def interp_windows_kernel(
    windows: np.ndarray, prow: np.ndarray, pcol: np.ndarray, *, resampling: str = "bilinear"
) -> np.ndarray:
    """Interpolate each of ``n`` small windows at one fractional position.

    Parameters
    ----------
    windows
        ``(n, h, w)`` values around each point.
    prow, pcol
        ``(n,)`` positions inside each window, in window pixel units.
    resampling
        ``"bilinear"`` or ``"cubic"``.

    Returns
    -------
    numpy.ndarray
        ``(n,)`` values; NaN where the footprint leaves the window or meets a NaN.

    Examples
    --------
    >>> w = np.arange(16.0).reshape(1, 4, 4)
    >>> interp_windows_kernel(w, np.array([1.5]), np.array([2.0])).tolist()
    [8.0]
    """
    before, after = footprint(resampling)
    windows, prow, pcol = np.asarray(windows), np.asarray(prow), np.asarray(pcol)
    if windows.dtype in (np.float32, np.float64) and prow.dtype == pcol.dtype == np.float64 and resampling in CODES:
        # one compiled pass, the same operations (tested), no point-sized temporaries
        prow, pcol = (np.ascontiguousarray(np.broadcast_to(p, windows.shape[:1])) for p in (prow, pcol))
        out = np.empty(windows.shape[0])
        windows_loop(windows, prow, pcol, CODES[resampling], before, after, out)
        return out
    return interp_windows_numpy(windows, prow, pcol, resampling=resampling)


def interp_windows_numpy(
    windows: np.ndarray, prow: np.ndarray, pcol: np.ndarray, *, resampling: str = "bilinear"
) -> np.ndarray:
    """:func:`interp_windows_kernel` in vectorised numpy: the reference of its compiled loop
    (:func:`xdem.kernels._interp_loops.windows_loop`; the tests hold the two equal to the bit) and
    the route for other dtypes."""
    n, h, w = windows.shape
    before, after = footprint(resampling)
    ir = np.floor(prow).astype(np.int64)
    ic = np.floor(pcol).astype(np.int64)
    fr, fc = prow - ir, pcol - ic
    inside = (ir - before >= 0) & (ir + after < h) & (ic - before >= 0) & (ic + after < w)
    irc, icc = np.clip(ir, before, h - 1 - after), np.clip(ic, before, w - 1 - after)
    idx = np.arange(n)
    terms = []
    for orow, wr in weights_1d(fr, resampling):
        for ocol, wc in weights_1d(fc, resampling):
            terms.append((wr * wc, windows[idx, irc + orow, icc + ocol].astype(np.float64)))
    out = _accumulate(terms, (n,))
    out[~inside] = np.nan
    return out


#: Points interpolated together by :func:`interp_windows_separable` (bounds its float64 buffers:
#: 8 MiB per row of an 8 x 8 footprint).
_SEPARABLE_GROUP = 1 << 14


def interp_windows_separable(
    windows: np.ndarray, prow: np.ndarray, pcol: np.ndarray, *, resampling: str
) -> np.ndarray:
    """:func:`interp_windows_kernel` by separable sums: each window's footprint is gathered once
    (in groups of points) and reduced along columns, then rows, with the 1-D weights. The same
    values to rounding (the order of the sums differs) and the same NaN rule (a NaN counts
    only where its weight is non-zero); faster for the large footprints of ``"lagrange6"`` and
    ``"lagrange8"``.

    Examples
    --------
    >>> w = np.add.outer(np.arange(10.0) ** 3, np.arange(10.0))[None]  # z = row^3 + col
    >>> float(interp_windows_separable(w, np.array([4.5]), np.array([4.25]), resampling="lagrange8")[0])
    95.375
    """
    n, h, w = windows.shape
    before, after = footprint(resampling)
    ir = np.floor(prow).astype(np.int64)
    ic = np.floor(pcol).astype(np.int64)
    inside = (ir - before >= 0) & (ir + after < h) & (ic - before >= 0) & (ic + after < w)
    irc, icc = np.clip(ir, before, h - 1 - after), np.clip(ic, before, w - 1 - after)
    offsets = np.arange(-before, after + 1)
    out = np.empty(n, dtype=np.float64)
    for s in range(0, n, _SEPARABLE_GROUP):
        g = slice(s, min(n, s + _SEPARABLE_GROUP))
        wr = np.stack([np.broadcast_to(v, ir[g].shape) for _, v in weights_1d(prow[g] - ir[g], resampling)], axis=1)
        wc = np.stack([np.broadcast_to(v, ic[g].shape) for _, v in weights_1d(pcol[g] - ic[g], resampling)], axis=1)
        rows = (irc[g, None] + offsets)[:, :, None]
        cols = (icc[g, None] + offsets)[:, None, :]
        block = windows[np.arange(g.start, g.stop)[:, None, None], rows, cols].astype(np.float64)
        nan = np.isnan(block)
        if nan.any():  # a NaN counts only where its weight is non-zero
            block[nan & ((wr[:, :, None] == 0.0) | (wc[:, None, :] == 0.0))] = 0.0
        out[g] = np.einsum("ni,ni->n", np.einsum("nij,nj->ni", block, wc), wr)
    out[~inside] = np.nan
    return out

