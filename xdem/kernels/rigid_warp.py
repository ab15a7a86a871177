"""Compiled kernels of the rigid warp: each output pixel's moved elevation solved and
interpolated in one loop over the pixels of a strip (no position-sized temporaries).

Per pixel this is :func:`xdem.kernels.rigid.solve_elevation` (the same fixed point, restarts,
tolerance and give-up rule, pixel by pixel, so a pixel's value does not depend on the others):
the source position at moved elevation ``z`` is ``(p0 + dr (z - z0), c0 + dc (z - z0))`` and
``z = (a + rzz * src(position)) / (1 - k)``.

The one-step route (:func:`one_step_level`): when the positions can move by at most
:data:`ONE_STEP_PX` pixel over every elevation the moved surface can take in the chunk (a
rotation about x or y of a few 1e-8 degrees, as fitted on a pure shift), every pixel is read
once, at the middle of that range, instead of 2 to 5 times: its position is then within half
of :data:`ONE_STEP_PX` of the fixed point's.

On a grid in the frame's CRS (the usual case) the mapping is affine in the output pixel's
row and column: :func:`rigid_affine_strip` evaluates it per pixel from nine coefficients
instead of reading position arrays; :func:`rigid_arrays_strip` takes the arrays (other CRSs,
from the warp's lattice).

Runs of one translation (:data:`RUN_PX`): in the one-step route, along a row of output pixels
the source position moves by one column per column plus a drift (the rotation, a few 1e-9 pixel
per pixel for what LZD and ICP fit on a pure shift). Over a run of pixels whose positions stay
within :data:`RUN_PX` of the run's own translation, every pixel is read with that translation's
weights: separably, a pass down the rows then one along the columns (2 x 4 products a pixel for
cubic instead of 4 x 4 and two weight evaluations; about 3x less CPU on a 2048-pixel chunk).
Voids spread as in the per-pixel read (a NaN read with a non-zero weight makes the pixel NaN);
the values differ from it by the position's change of at most :data:`RUN_PX` and rounding.
A run whose fractional position lies within twice :data:`RUN_PX` of a whole pixel (where a
pixel of the run could read other pixels), and any row where runs would be shorter than
:data:`MIN_RUN` pixels (a real rotation, another resolution), is read pixel by pixel.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from xdem.kernels._interp_loops import weights_into
from xdem.kernels.warp import CODES, interp_one

__all__ = ["ONE_STEP_PX", "RUN_PX", "MIN_RUN", "OVERSHOOT", "one_step_range", "one_step_level", "strip_level",
           "rigid_affine_strip", "rigid_arrays_strip"]

#: Largest possible change of a source position (pixels) over the moved elevations of a chunk
#: for which each pixel is read once (the one-step route).
ONE_STEP_PX = 1e-6
#: Largest distance (pixels) between a pixel's source position and the one it is read at in a run
#: of one translation (module notes). With the one-step route's half of :data:`ONE_STEP_PX`, a
#: position is within 7.5e-7 pixel of the fixed point's. ``0`` reads every pixel by itself.
RUN_PX = 2.5e-7
#: Shortest run of one translation worth its two passes; below it, pixel by pixel.
MIN_RUN = 16
#: Bound of ``sum |weight|`` of the 2-D interpolations (Keys cubic: 1.25 ** 2 = 1.5625;
#: bilinear: 1), rounded up: an interpolated value is within this many half-ranges of the
#: middle of the values it reads.
_OVERSHOOT = 2.0
#: The same bound per interpolation, exact: the largest ``sum |weight|`` of the 1-D weights is
#: 1 (bilinear) and 1.25 (Keys cubic and 4-point Lagrange, at a fractional part of 0.5:
#: ``(-1, 9, 9, -1) / 16``), squared for the 2-D interpolation, plus 1e-6 of room for rounding.
OVERSHOOT = {"bilinear": 1.0 + 1e-6, "cubic": 1.5625 * (1.0 + 1e-6), "lagrange": 1.5625 * (1.0 + 1e-6)}


def one_step_range(window: np.ndarray, a_lo: float, a_hi: float, *, rzz: float, k: float,
                   overshoot: float = _OVERSHOOT) -> tuple[float, float] | None:
    """Bounds of the moved elevation ``z = (a + rzz v) / (1 - k)`` for ``a`` in ``[a_lo, a_hi]``
    and ``v`` any interpolated value of ``window`` (within ``overshoot`` half-ranges of the
    middle of its finite values: :data:`_OVERSHOOT` holds for every interpolation, :data:`OVERSHOOT`
    gives each one's own); ``None`` if nothing is finite.

    Examples
    --------
    >>> one_step_range(np.array([[1000.0, 2000.0]]), 0.0, 1.0, rzz=1.0, k=0.0)
    (500.0, 2501.0)
    """
    if not (math.isfinite(a_lo) and math.isfinite(a_hi)):
        return None
    if window.size == 0:
        return None
    lo, hi = float(np.fmin.reduce(window, axis=None)), float(np.fmax.reduce(window, axis=None))  # NaN: none finite
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo) * overshoot
    scale = 1.0 / (1.0 - k)
    zs = [(a + rzz * v) * scale for a in (a_lo, a_hi) for v in (mid - half, mid + half)]
    return min(zs), max(zs)


def one_step_level(window: np.ndarray, a_lo: float, a_hi: float, slope: float, *, rzz: float,
                   k: float, resampling: str | None = None) -> float | None:
    """The moved elevation at which every pixel of a chunk can be read once, or ``None``.

    The moved elevations are within :func:`one_step_range`; positions change by ``slope``
    pixels per unit of moved elevation. If ``slope`` times the width of that range is at most
    :data:`ONE_STEP_PX`, its middle (every position is then within half of
    :data:`ONE_STEP_PX` of its fixed point's); else ``None`` (the fixed point is needed).
    ``resampling`` (the interpolation reading ``window``) bounds the interpolated values by its
    own :data:`OVERSHOOT`; ``None``: by :data:`_OVERSHOOT`, which holds for all.

    Examples
    --------
    >>> w = np.array([[1000.0, 1500.0], [np.nan, 2000.0]])
    >>> one_step_level(w, 0.5, 0.7, 2e-10, rzz=1.0, k=0.0)  # 2e-10 px/m over 2000 m: one step
    1500.6
    >>> one_step_level(w, 0.5, 0.7, 1e-8, rzz=1.0, k=0.0) is None  # 2e-5 px: the fixed point
    True
    """
    overshoot = _OVERSHOOT if resampling is None else OVERSHOOT[resampling]
    bounds = one_step_range(window, a_lo, a_hi, rzz=rzz, k=k, overshoot=overshoot)
    if bounds is None or not math.isfinite(slope) or slope * (bounds[1] - bounds[0]) > ONE_STEP_PX:
        return None
    return 0.5 * (bounds[0] + bounds[1])


def strip_level(window: np.ndarray, window0: tuple[int, int], rows: tuple[int, int], cols: tuple[int, int],
                coef: np.ndarray, *, drow: float, dcol: float, z0: float, k: float, rzz: float, resampling: str,
                footprint: tuple[int, int]) -> float | None:
    """:func:`one_step_level` for the output pixels ``rows x cols`` of an affine mapping (see
    :func:`rigid_affine_strip`) from the part of ``window`` they can read, when the chunk's
    window as a whole does not allow one step: their moved elevations are within the bounds of
    the whole window (:func:`one_step_range`), so their positions within the rows and columns
    reached over those bounds, whose values bound the moved elevations again, more narrowly.

    Examples
    --------
    Two halves 1000 m apart: one step for the rows reading a single half, not for the whole.

    >>> win = np.vstack([np.full((20, 20), 1000.0), np.full((20, 20), 2000.0)])
    >>> coef = np.array([5.0, 1.0, 0.0, 5.0, 0.0, 1.0, 0.0, 0.0, 0.0])
    >>> args = dict(drow=2e-9, dcol=0.0, z0=1000.0, k=0.0, rzz=1.0, resampling="bilinear", footprint=(0, 1))
    >>> one_step_level(win, 0.0, 0.0, 2e-9, rzz=1.0, k=0.0, resampling="bilinear") is None
    True
    >>> strip_level(win, (0, 0), (0, 10), (0, 10), coef, **args)
    1000.0
    """
    slope = math.hypot(drow, dcol)
    r = np.array([rows[0], rows[0], rows[1] - 1, rows[1] - 1], dtype=np.float64)
    c = np.array([cols[0], cols[1] - 1, cols[0], cols[1] - 1], dtype=np.float64)
    a = coef[6] + coef[7] * r + coef[8] * c
    whole = one_step_range(window, float(a.min()), float(a.max()), rzz=rzz, k=k, overshoot=OVERSHOOT[resampling])
    if whole is None or not (slope > 0.0 and slope * (whole[1] - whole[0]) <= 1.0):
        return None
    ends = [(z - z0) for z in whole]
    pr = np.floor(np.concatenate([coef[0] + coef[1] * r + coef[2] * c + drow * e for e in ends]))
    pc = np.floor(np.concatenate([coef[3] + coef[4] * r + coef[5] * c + dcol * e for e in ends]))
    if not (np.isfinite(pr).all() and np.isfinite(pc).all()):
        return None
    before, after = footprint
    r0, r1 = max(int(pr.min()) - before - window0[0], 0), min(int(pr.max()) + after + 1 - window0[0], window.shape[0])
    c0, c1 = max(int(pc.min()) - before - window0[1], 0), min(int(pc.max()) + after + 1 - window0[1], window.shape[1])
    if r1 <= r0 or c1 <= c0:
        return None
    return one_step_level(window[r0:r1, c0:c1], float(a.min()), float(a.max()), slope, rzz=rzz, k=k,
                          resampling=resampling)


@numba.njit(cache=True, nogil=True, inline="always")
def _solve_one(window: np.ndarray, wr0: float, wc0: float, p0: float, c0: float, dr: float, dc: float, a: float,
               z0: float, scale: float, rzz: float, tol: float, starts: np.ndarray, max_iter: int, code: int,
               one_step: bool, z_one: float, wr: np.ndarray, wc: np.ndarray,
               res: np.ndarray) -> None:  # pragma: no cover - compiled
    """One pixel: ``res = (z, prow, pcol)`` (see the module notes)."""
    if one_step:
        pr = p0 + dr * (z_one - z0)
        pc = c0 + dc * (z_one - z0)
        res[0] = (a + rzz * interp_one(window, pr - wr0, pc - wc0, code, wr, wc)) * scale
        res[1], res[2] = pr, pc
        return
    pr = p0 + dr * 0.0
    pc = c0 + dc * 0.0
    z = (a + rzz * interp_one(window, pr - wr0, pc - wc0, code, wr, wc)) * scale
    res[1], res[2] = pr, pc
    if dr == 0.0 and dc == 0.0:
        res[0] = z
        return
    for s in range(starts.size):  # NaN at the start: start again from other elevations
        if math.isfinite(z):
            break
        level = starts[s]
        z = (a + rzz * interp_one(window, p0 + dr * (level - z0) - wr0, c0 + dc * (level - z0) - wc0,
                                  code, wr, wc)) * scale
    if not math.isfinite(z):
        res[0] = z
        return
    change = 0.0
    settled = False
    for _ in range(max_iter):
        pr = p0 + dr * (z - z0)
        pc = c0 + dc * (z - z0)
        new = (a + rzz * interp_one(window, pr - wr0, pc - wc0, code, wr, wc)) * scale
        change = abs(new - z)
        z = new
        if not (math.isfinite(change) and change > tol * max(abs(new), 1.0)):
            settled = True
            break
    res[1], res[2] = pr, pc
    if not settled and change > 1e3 * tol * max(abs(z), 1.0):
        z = np.nan
    res[0] = z


@numba.njit(cache=True, nogil=True, inline="always")
def _escapes(pr: float, pc: float, wr0: float, wc0: float, wh: int, ww: int, src_h: int, src_w: int,
             before: int, after: int) -> bool:  # pragma: no cover - compiled
    """Whether the footprint at ``(pr, pc)`` is inside the source but not inside the window."""
    if not (math.isfinite(pr) and math.isfinite(pc)):
        return False
    fr, fc = math.floor(pr), math.floor(pc)
    in_src = fr - before >= 0 and fr + after < src_h and fc - before >= 0 and fc + after < src_w
    in_win = fr - before >= wr0 and fr + after < wr0 + wh and fc - before >= wc0 and fc + after < wc0 + ww
    return in_src and not in_win


@numba.njit(cache=True, nogil=True)
def _affine_loop(window: np.ndarray, wr0: float, wc0: float, row0: int, col0: int, coef: np.ndarray, dr: float,
                 dc: float, z0: float, scale: float, rzz: float, tol: float, starts: np.ndarray, max_iter: int,
                 code: int, one_step: bool, z_one: float, src_h: int, src_w: int, before: int, after: int,
                 out: np.ndarray) -> int:  # pragma: no cover - compiled
    wr = np.empty(4)
    wc = np.empty(4)
    res = np.empty(3)
    wh, ww = window.shape
    escaped = 0
    for i in range(out.shape[0]):
        r = float(row0 + i)
        for j in range(out.shape[1]):
            c = float(col0 + j)
            p0 = coef[0] + coef[1] * r + coef[2] * c
            q0 = coef[3] + coef[4] * r + coef[5] * c
            a = coef[6] + coef[7] * r + coef[8] * c
            _solve_one(window, wr0, wc0, p0, q0, dr, dc, a, z0, scale, rzz, tol, starts, max_iter, code, one_step,
                       z_one, wr, wc, res)
            out[i, j] = res[0]
            if _escapes(res[1], res[2], wr0, wc0, wh, ww, src_h, src_w, before, after):
                escaped += 1
    return escaped


@numba.njit(cache=True, nogil=True, inline="always")
def _inside_one(window: np.ndarray, x: float, y: float, code: int, taps: int, wr: np.ndarray,
                wc: np.ndarray) -> float:  # pragma: no cover - compiled
    """:func:`xdem.kernels.warp.interp_one` at a finite position whose footprint is known to be
    inside ``window`` (no position or bounds tests; the same weights, products and sum in the
    same order, so the same bits); ``taps`` (2 or 4) a constant of the caller's branch.

    A NaN read with a non-zero weight is not tested for tap by tap: it makes the sum NaN, which
    is then returned as ``np.nan`` (the value :func:`~xdem.kernels.warp.interp_one` returns), so
    the loop has one branch per tap (a zero weight, whose pixel is skipped) instead of three."""
    ir, ic = math.floor(x), math.floor(y)
    r0 = int(ir) + weights_into(x - ir, code, wr)
    c0 = int(ic) + weights_into(y - ic, code, wc)
    acc = 0.0
    for a in range(taps):
        wa = wr[a]
        for b in range(taps):
            weight = wa * wc[b]
            if weight != 0.0:  # a zero weight neither needs its pixel nor lets its NaN through
                acc += weight * window[r0 + a, c0 + b]
    if math.isnan(acc):
        return np.nan
    return acc


@numba.njit(cache=True, nogil=True, inline="always")
def _inside(x: float, y: float, wh: int, ww: int, before: int, after: int) -> bool:  # pragma: no cover - compiled
    """Whether the footprint at window position ``(x, y)`` is inside the window (``False`` for
    a position that is not finite)."""
    return x - before >= 0.0 and x < wh - after and y - before >= 0.0 and y < ww - after


@numba.njit(cache=True, nogil=True, inline="always")
def _pixels(window: np.ndarray, wr0: float, wc0: float, p_r: float, p_c: float, p_a: float, coef: np.ndarray,
            shift_r: float, shift_c: float, scale: float, rzz: float, code: int, col0: int, j0: int, j1: int,
            wr: np.ndarray, wc: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """Pixels ``j0 .. j1 - 1`` of one output row, inside the window, each read by itself, by a
    loop whose number of taps is a constant."""
    if code != 0:
        for j in range(j0, j1):
            c = float(col0 + j)
            v = _inside_one(window, ((p_r + coef[2] * c) + shift_r) - wr0, ((p_c + coef[5] * c) + shift_c) - wc0,
                            code, 4, wr, wc)
            out[j] = ((p_a + coef[8] * c) + rzz * v) * scale
    else:
        for j in range(j0, j1):
            c = float(col0 + j)
            v = _inside_one(window, ((p_r + coef[2] * c) + shift_r) - wr0, ((p_c + coef[5] * c) + shift_c) - wc0,
                            code, 2, wr, wc)
            out[j] = ((p_a + coef[8] * c) + rzz * v) * scale


@numba.njit(cache=True, nogil=True, inline="always")
def _read_run(window: np.ndarray, x: float, y: float, n: int, code: int, run_px: float, wr: np.ndarray,
              wc: np.ndarray, buf: np.ndarray) -> bool:  # pragma: no cover - compiled
    """``buf[:n]``: the window read at ``(x, y + t)`` for ``t < n`` (a run of one translation, module
    notes), a pass down the rows then one along the columns; ``False`` (nothing read) when a
    fractional part is within twice ``run_px`` of a whole pixel (every pixel of the run, within
    ``run_px`` of ``(x, y + t)``, then has the same whole part, with room for rounding)."""
    ir, ic = math.floor(x), math.floor(y)
    fr, fc = x - ir, y - ic
    edge = 2.0 * run_px
    if fr < edge or fr > 1.0 - edge or fc < edge or fc > 1.0 - edge:
        return False
    r0 = int(ir) + weights_into(fr, code, wr)
    c0 = int(ic) + weights_into(fc, code, wc)
    taps = 2 if code == 0 else 4
    for t in range(n + taps - 1):
        acc = 0.0
        for a in range(taps):
            if wr[a] != 0.0:  # as in _inside_one: a zero weight neither reads its pixel nor lets its NaN through
                acc += wr[a] * window[r0 + a, c0 + t]
        buf[t] = acc
    for t in range(n):  # in place: buf[t] is read last by this t
        acc = 0.0
        for b in range(taps):
            if wc[b] != 0.0:
                acc += wc[b] * buf[t + b]
        buf[t] = np.nan if math.isnan(acc) else acc
    return True


@numba.njit(cache=True, nogil=True)
def _affine_one_step_loop(window: np.ndarray, wr0: float, wc0: float, row0: int, col0: int, coef: np.ndarray,
                          shift_r: float, shift_c: float, scale: float, rzz: float, code: int, src_h: int,
                          src_w: int, before: int, after: int, run_px: float,
                          out: np.ndarray) -> int:  # pragma: no cover - compiled
    """The one-step branch of :func:`_affine_loop` (same count of escaped footprints), in a loop
    of its own. Along a row the positions are monotone in the column (so is their floating-point
    evaluation), so the pixels whose footprint is inside the window are one run: the pixels
    before and after it (at a raster's border) are read as :func:`_solve_one` reads them (the same
    values), the run without position or bounds tests, in runs of one translation within
    ``run_px`` (module notes) or else pixel by pixel (the same values)."""
    wr = np.empty(4)
    wc = np.empty(4)
    wh, ww = window.shape
    nc = out.shape[1]
    buf = np.empty(nc + 3)
    drift = max(abs(coef[2]), abs(coef[5] - 1.0))  # change of the fractional positions per column
    run = 0 if run_px <= 0.0 else (nc if drift == 0.0 else int(min(2.0 * run_px / drift, float(nc))))
    escaped = 0
    for i in range(out.shape[0]):
        r = float(row0 + i)
        p_r, p_c, p_a = coef[0] + coef[1] * r, coef[3] + coef[4] * r, coef[6] + coef[7] * r
        lo, hi = 0, nc
        for side in range(2):  # the border pixels on the left, then on the right
            while lo < hi:
                j = lo if side == 0 else hi - 1
                c = float(col0 + j)
                pr, pc = (p_r + coef[2] * c) + shift_r, (p_c + coef[5] * c) + shift_c
                if _inside(pr - wr0, pc - wc0, wh, ww, before, after):
                    break
                v = interp_one(window, pr - wr0, pc - wc0, code, wr, wc)
                out[i, j] = ((p_a + coef[8] * c) + rzz * v) * scale
                if _escapes(pr, pc, wr0, wc0, wh, ww, src_h, src_w, before, after):
                    escaped += 1
                if side == 0:
                    lo += 1
                else:
                    hi -= 1
        row = out[i]
        if run < MIN_RUN:
            _pixels(window, wr0, wc0, p_r, p_c, p_a, coef, shift_r, shift_c, scale, rzz, code, col0, lo, hi, wr, wc,
                    row)
            continue
        j = lo
        while j < hi:
            n = min(run, hi - j)
            half = 0.5 * (n - 1)
            cm = float(col0 + j) + half  # the run's translation: its middle pixel's
            x = ((p_r + coef[2] * cm) + shift_r) - wr0
            y = (((p_c + coef[5] * cm) + shift_c) - wc0) - half
            if _read_run(window, x, y, n, code, run_px, wr, wc, buf):
                for t in range(n):
                    row[j + t] = ((p_a + coef[8] * float(col0 + j + t)) + rzz * buf[t]) * scale
            else:
                _pixels(window, wr0, wc0, p_r, p_c, p_a, coef, shift_r, shift_c, scale, rzz, code, col0, j, j + n,
                        wr, wc, row)
            j += n
    return escaped


@numba.njit(cache=True, nogil=True)
def _arrays_loop(window: np.ndarray, wr0: float, wc0: float, p0: np.ndarray, c0: np.ndarray, dr: np.ndarray,
                 dc: np.ndarray, a: np.ndarray, z0: float, scale: float, rzz: float, tol: float, starts: np.ndarray,
                 max_iter: int, code: int, one_step: bool, z_one: float, src_h: int, src_w: int, before: int,
                 after: int, out: np.ndarray) -> int:  # pragma: no cover - compiled
    wr = np.empty(4)
    wc = np.empty(4)
    res = np.empty(3)
    wh, ww = window.shape
    escaped = 0
    for i in range(out.size):
        _solve_one(window, wr0, wc0, p0[i], c0[i], dr[i], dc[i], a[i], z0, scale, rzz, tol, starts, max_iter, code,
                   one_step, z_one, wr, wc, res)
        out[i] = res[0]
        if _escapes(res[1], res[2], wr0, wc0, wh, ww, src_h, src_w, before, after):
            escaped += 1
    return escaped


def _window(window: np.ndarray) -> np.ndarray:
    if window.dtype in (np.float32, np.float64):
        return np.ascontiguousarray(window)
    return np.ascontiguousarray(window, dtype=np.float64)


def rigid_affine_strip(
    window: np.ndarray, window0: tuple[int, int], rows: tuple[int, int], cols: tuple[int, int],
    coef: np.ndarray, *, drow: float, dcol: float, z0: float, k: float, rzz: float, tol: float,
    starts: tuple[float, ...], max_iter: int, resampling: str, z_one: float | None,
    src_shape: tuple[int, int], footprint: tuple[int, int], out: np.ndarray,
) -> int:
    """Moved elevations of the output pixels ``rows x cols`` (``[start, stop)`` each) into ``out``.

    ``coef``: 9 numbers, the affine mapping of the output pixel ``(r, c)``: source row
    ``coef[0] + coef[1] r + coef[2] c`` and column ``coef[3] + coef[4] r + coef[5] c`` at moved
    elevation ``z0``, and ``a = coef[6] + coef[7] r + coef[8] c``; positions change by
    ``(drow, dcol)`` per unit of moved elevation. ``window`` holds the source from pixel
    ``window0``. ``z_one``: read each pixel once at that moved elevation (the one-step route,
    :func:`one_step_level`); ``None``: one step if these rows alone allow it (:func:`strip_level`),
    else the fixed point. Returns the number of pixels whose
    footprint is inside the source (``src_shape``) but not inside the window (the caller's
    footprint was too small: it must fail loudly).

    Examples
    --------
    A plane rising by 1 per row, a tilt moving positions by 0.01 row per unit of elevation:

    >>> win = np.add.outer(np.arange(20.0), np.zeros(20))
    >>> coef = np.array([5.0, 1.0, 0.0, 5.0, 0.0, 1.0, 0.0, 0.0, 0.0])
    >>> out = np.empty((1, 1))
    >>> rigid_affine_strip(win, (0, 0), (0, 1), (0, 1), coef, drow=0.01, dcol=0.0, z0=0.0, k=0.0, rzz=1.0,
    ...                    tol=1e-12, starts=(), max_iter=20, resampling="bilinear", z_one=None,
    ...                    src_shape=(20, 20), footprint=(0, 1), out=out)
    0
    >>> round(float(out[0, 0]), 9)  # z = 5 + 0.01 z
    5.050505051
    """
    coef = np.asarray(coef, dtype=np.float64)
    if z_one is None:  # the chunk's window as a whole needs the fixed point: these rows may not
        z_one = strip_level(window, window0, rows, cols, coef, drow=drow, dcol=dcol, z0=z0, k=k, rzz=rzz,
                            resampling=resampling, footprint=footprint)
    one, level = z_one is not None, 0.0 if z_one is None else float(z_one)
    if one:
        shift_r, shift_c = float(drow) * (level - float(z0)), float(dcol) * (level - float(z0))
        return int(_affine_one_step_loop(_window(window), float(window0[0]), float(window0[1]), int(rows[0]),
                                         int(cols[0]), coef, shift_r, shift_c, 1.0 / (1.0 - k), float(rzz),
                                         CODES[resampling], int(src_shape[0]), int(src_shape[1]),
                                         int(footprint[0]), int(footprint[1]), float(RUN_PX), out))
    return int(_affine_loop(_window(window), float(window0[0]), float(window0[1]), int(rows[0]), int(cols[0]),
                            coef, float(drow), float(dcol), float(z0), 1.0 / (1.0 - k),
                            float(rzz), float(tol), np.asarray(starts, dtype=np.float64), int(max_iter),
                            CODES[resampling], one, level, int(src_shape[0]),
                            int(src_shape[1]), int(footprint[0]), int(footprint[1]), out))


def rigid_arrays_strip(
    window: np.ndarray, window0: tuple[int, int], prow0: np.ndarray, pcol0: np.ndarray,
    drow: np.ndarray | float, dcol: np.ndarray | float, a: np.ndarray | float, *, z0: float, k: float,
    rzz: float, tol: float, starts: tuple[float, ...], max_iter: int, resampling: str, z_one: float | None,
    src_shape: tuple[int, int], footprint: tuple[int, int],
) -> tuple[np.ndarray, int]:
    """:func:`rigid_affine_strip` from per-pixel arrays (positions at ``z0``, their change per
    unit of elevation, ``a``; scalars broadcast): ``(z, escaped)``, ``z`` float64 of
    ``prow0``'s shape.

    Examples
    --------
    >>> win = np.add.outer(np.arange(20.0), np.zeros(20))
    >>> z, esc = rigid_arrays_strip(win, (0, 0), np.array([5.0]), np.array([5.0]), 0.01, 0.0, 0.0, z0=0.0,
    ...                             k=0.0, rzz=1.0, tol=1e-12, starts=(), max_iter=20, resampling="bilinear",
    ...                             z_one=None, src_shape=(20, 20), footprint=(0, 1))
    >>> round(float(z[0]), 9), esc
    (5.050505051, 0)
    """
    shape = np.shape(prow0)
    p0, c0, dr, dc, a0 = (np.ascontiguousarray(np.broadcast_to(np.asarray(v, dtype=np.float64), shape)).reshape(-1)
                          for v in (prow0, pcol0, drow, dcol, a))
    out = np.empty(p0.size, dtype=np.float64)
    one, level = z_one is not None, 0.0 if z_one is None else float(z_one)
    esc = _arrays_loop(_window(window), float(window0[0]), float(window0[1]), p0, c0, dr, dc, a0, float(z0),
                       1.0 / (1.0 - k), float(rzz), float(tol), np.asarray(starts, dtype=np.float64), int(max_iter),
                       CODES[resampling], one, level, int(src_shape[0]),
                       int(src_shape[1]), int(footprint[0]), int(footprint[1]), out)
    return out.reshape(shape), int(esc)
