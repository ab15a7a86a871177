"""Compiled loops of :mod:`xdem.kernels.interp`: the same operations, in the same order, as its
numpy expressions (tested equal bit for bit), in one pass without block- or point-sized
temporaries.

- :func:`shift_loop`: every output pixel is ``sum_k float64(block[i + dr_k, j + dc_k] * w_k)``
  with the weights ``w_k`` in the block's dtype, summed from ``0.0`` in float64 in the order of
  the terms: what ``numpy.multiply(view, w, out=float64)`` then ``acc += tmp`` compute (for a
  float32 block numpy multiplies in float32, the Python-float weight taken as float32).
- :func:`windows_loop`: every point is ``sum_k (0.0 if w_k == 0 else w_k * float64(v_k))`` with
  ``w_k = wr_a * wc_b`` (float64), the 1-D weights of :func:`xdem.kernels.interp.weights_1d`
  written out with the same operations.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["CODES", "shift_loop", "windows_loop", "weights_into"]

#: Resampling name -> code of the compiled weights.
CODES = {"bilinear": 0, "cubic": 1, "lagrange": 2}


@numba.njit(cache=True, nogil=True)
def shift_loop(block: np.ndarray, drs: np.ndarray, dcs: np.ndarray, w: np.ndarray, r0: int, r1: int, c0: int,
               c1: int, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``out[i, j]`` for ``r0 <= i < r1``, ``c0 <= j < c1``: the weighted terms at offsets
    ``(drs[a], dcs[b])`` with weight ``w[a * len(dcs) + b]`` (``block``'s dtype)."""
    na, nb = len(drs), len(dcs)
    if na == 2 and nb == 2:  # bilinear: the four terms written out, a loop the compiler vectorises
        _shift_2x2(block, drs[0], drs[1], dcs[0], dcs[1], w[0], w[1], w[2], w[3], r0, r1, c0, c1, out)
        return
    for i in range(r0, r1):
        for j in range(c0, c1):
            acc = 0.0
            for a in range(na):
                ii = i + drs[a]
                for b in range(nb):
                    acc += np.float64(block[ii, j + dcs[b]] * w[a * nb + b])
            out[i, j] = acc


@numba.njit(cache=True, nogil=True)
def _shift_2x2(block: np.ndarray, da: int, db: int, ca: int, cb: int, w0: float, w1: float, w2: float, w3: float,
               r0: int, r1: int, c0: int, c1: int, out: np.ndarray) -> None:  # pragma: no cover - compiled
    for i in range(r0, r1):
        ra, rb = block[i + da], block[i + db]
        o = out[i]
        for j in range(c0, c1):
            acc = 0.0
            acc += np.float64(ra[j + ca] * w0)
            acc += np.float64(ra[j + cb] * w1)
            acc += np.float64(rb[j + ca] * w2)
            acc += np.float64(rb[j + cb] * w3)
            o[j] = acc


@numba.njit(cache=True, nogil=True, inline="always")
def weights_into(f: float, code: int, out: np.ndarray) -> int:  # pragma: no cover - compiled
    """The 1-D weights of :func:`xdem.kernels.interp.weights_1d` at fractional part ``f`` into ``out``
    (same operations; ``code`` from :data:`CODES`); returns the offset of the first weight from the
    floor (0 for bilinear, -1 for the 4-tap kernels)."""
    if code == 0:
        out[0] = 1.0 - f
        out[1] = f
        return 0
    if code == 1:  # Keys, a = -0.5
        a = -0.5
        t = 1.0 + f
        out[0] = a * (t * t * t) - 5.0 * a * (t * t) + 8.0 * a * t - 4.0 * a
        t = f
        out[1] = (a + 2.0) * (t * t * t) - (a + 3.0) * (t * t) + 1.0
        t = 1.0 - f
        out[2] = (a + 2.0) * (t * t * t) - (a + 3.0) * (t * t) + 1.0
        t = 2.0 - f
        out[3] = a * (t * t * t) - 5.0 * a * (t * t) + 8.0 * a * t - 4.0 * a
        return -1
    out[0] = -f * (f - 1.0) * (f - 2.0) / 6.0
    out[1] = (f + 1.0) * (f - 1.0) * (f - 2.0) / 2.0
    out[2] = -(f + 1.0) * f * (f - 2.0) / 2.0
    out[3] = (f + 1.0) * f * (f - 1.0) / 6.0
    return -1


@numba.njit(cache=True, nogil=True)
def windows_loop(windows: np.ndarray, prow: np.ndarray, pcol: np.ndarray, code: int, before: int, after: int,
                 out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``out[k]``: window ``k`` interpolated at ``(prow[k], pcol[k])``; NaN where the footprint
    (``before``/``after`` pixels around the floor) leaves the window or the position is not finite."""
    _, h, w = windows.shape
    taps = 2 if code == 0 else 4
    wr = np.empty(4)
    wc = np.empty(4)
    for k in range(len(prow)):
        r, c = prow[k], pcol[k]
        if not (abs(r) < np.inf and abs(c) < np.inf):
            out[k] = np.nan
            continue
        ir, ic = int(np.floor(r)), int(np.floor(c))
        if ir - before < 0 or ir + after >= h or ic - before < 0 or ic + after >= w:
            out[k] = np.nan
            continue
        weights_into(r - ir, code, wr)
        weights_into(c - ic, code, wc)
        acc = 0.0
        for a in range(taps):
            row = ir - before + a
            for b in range(taps):
                weight = wr[a] * wc[b]
                acc += 0.0 if weight == 0.0 else weight * np.float64(windows[k, row, ic - before + b])
        out[k] = acc
