"""Rigid Coherent Point Drift (Myronenko & Song 2010, https://doi.org/10.1109/TPAMI.2010.46) on
plain arrays: the expectation-maximisation of a Gaussian mixture centred on the moving points.

The moving points ``Y`` (``M x 3``) are the centroids of a Gaussian mixture of common variance
``sigma2``, plus a uniform component of weight ``w`` for outliers; the fixed points ``X``
(``N x 3``) are its data. Each iteration (the paper's Fig. 2, scale fixed at 1):

- E step: ``P[m, n]``, the posterior that ``x_n`` comes from the moved ``y_m``;
- M step: the rotation (from the SVD of the weighted cross-covariance, a reflection excluded),
  the translation and the variance that maximise the expected likelihood.

``P`` is never held whole: one compiled pass per iteration weighs, for each fixed point, only
the moving points whose weight is not negligible next to its nearest one's (below ``exp(-60)``
of it, a window of the moving points sorted along x), so memory is ``O(M + N)`` and time
shrinks with the variance. Stopping is upstream xdem's: the absolute change of the
objective ``Q`` (Eq. 7) below ``tolerance``, not before the third iteration.

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> x = rng.normal(size=(300, 3))
>>> res = rigid_cpd(x, x - [0.1, -0.05, 0.2], max_iterations=200, tolerance=1e-10)
>>> np.round(res.translation, 3).tolist(), bool(np.allclose(res.rotation, np.eye(3), atol=1e-3))
([0.1, -0.05, 0.2], True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

__all__ = ["CPDResult", "rigid_cpd"]

#: A pair is left out of the E step when its weight is below ``exp(-_CUT)`` times the largest of
#: its column: with at most 20 000 moving points, a relative change of the sums below 1e-22.
_CUT = 60.0


@dataclass(frozen=True)
class CPDResult:
    """The fitted ``T(y) = R y + t`` (moving onto fixed), the iterations run, whether the
    objective's change went below the tolerance, and the final variance."""

    rotation: np.ndarray
    translation: np.ndarray
    iterations: int
    converged: bool
    sigma2: float


def _sums(x: np.ndarray, ty: np.ndarray, sigma2: float, c: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``P 1`` (per moving point), ``P^T 1`` (per fixed point) and ``P X`` (``M x 3``).

    For each fixed point, only the moving points whose squared distance is within
    ``2 sigma2 * _CUT`` of its nearest one are weighed (found in the moving points sorted along
    x): every pair left out weighs less than ``exp(-_CUT)`` times the largest weight of its
    column, so the sums are the full ``M x N`` weighting's to a relative ``M exp(-_CUT)``.
    """
    order = np.argsort(ty[:, 0], kind="stable")
    tys = np.ascontiguousarray(ty[order], dtype=np.float64)
    xc = np.ascontiguousarray(x, dtype=np.float64)
    start = np.searchsorted(tys[:, 0], xc[:, 0])
    p1s, pt1, pxs = _sums_loop(xc, tys, start, 1.0 / (2.0 * sigma2), 2.0 * sigma2 * _CUT, float(c),
                               float(np.finfo(np.float64).eps))
    p1, px = np.empty_like(p1s), np.empty_like(pxs)
    p1[order], px[order] = p1s, pxs
    return p1, pt1, px


@numba.njit(cache=True, nogil=True)
def _d2(tys: np.ndarray, j: int, x: np.ndarray, n: int) -> float:  # pragma: no cover - compiled
    out = 0.0
    for k in range(x.shape[1]):
        diff = tys[j, k] - x[n, k]
        out += diff * diff
    return out


@numba.njit(cache=True, nogil=True)
def _nearest(tys: np.ndarray, x: np.ndarray, n: int, i0: int) -> float:  # pragma: no cover - compiled
    """Squared distance from ``x[n]`` to its nearest moving point (outward from ``i0`` along x)."""
    best = np.inf
    for step in (1, -1):
        j = i0 if step == 1 else i0 - 1
        while 0 <= j < tys.shape[0]:
            dx = tys[j, 0] - x[n, 0]
            if dx * dx >= best:
                break
            best = min(best, _d2(tys, j, x, n))
            j += step
    return best


@numba.njit(cache=True, nogil=True)
def _sums_loop(x: np.ndarray, tys: np.ndarray, start: np.ndarray, inv2s: float, lim: float, c: float,
               eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The E step's sums; ``tys`` sorted along x, ``start[n]`` where ``x[n]`` falls in that order."""
    n_fixed, d = x.shape
    m = tys.shape[0]
    p1, pt1, px = np.zeros(m), np.zeros(n_fixed), np.zeros((m, d))
    buf, idx = np.empty(m), np.empty(m, dtype=np.int64)
    for n in range(n_fixed):
        cut = _nearest(tys, x, n, start[n]) + lim
        cnt, total = 0, 0.0
        for step in (1, -1):
            j = start[n] if step == 1 else start[n] - 1
            while 0 <= j < m:
                dx = tys[j, 0] - x[n, 0]
                if dx * dx > cut:
                    break
                d2 = _d2(tys, j, x, n)
                if d2 <= cut:
                    w = np.exp(-d2 * inv2s)
                    buf[cnt], idx[cnt] = w, j
                    cnt += 1
                    total += w
                j += step
        den = max(total, eps) + c
        col = 0.0
        for i in range(cnt):
            w = buf[i] / den
            j = idx[i]
            p1[j] += w
            for k in range(d):
                px[j, k] += w * x[n, k]
            col += w
        pt1[n] = col
    return p1, pt1, px


def _initial_sigma2(x: np.ndarray, y: np.ndarray) -> float:
    """``sum ||x_n - y_m||^2 / (D N M)``, in closed form (no ``N x M`` array)."""
    n, d = x.shape
    m = len(y)
    total = float(m * np.sum(x**2) + n * np.sum(y**2)) - 2.0 * float(np.sum(x, axis=0) @ np.sum(y, axis=0))
    return float(total / (d * n * m))


def rigid_cpd(x: np.ndarray, y: np.ndarray, *, weight: float = 0.0, only_translation: bool = False,
              max_iterations: int = 100, tolerance: float = 1e-3) -> CPDResult:
    """Fit the rigid ``T(y) = R y + t`` that puts the moving points ``y`` on the fixed ``x``.

    Parameters
    ----------
    x, y
        Fixed (``N x 3``) and moving (``M x 3``) points, best centred and scaled to about unit
        spread (the variance starts at their mean squared distance).
    weight
        Weight of the uniform (outlier) component, in ``[0, 1)``.
    only_translation
        Keep ``R`` the identity.
    max_iterations, tolerance
        At most this many iterations; stop when the objective changes by less than ``tolerance``.
    """
    n, d = x.shape
    m = len(y)
    sigma2 = _initial_sigma2(x, y)
    sigma2_min = tolerance / 10.0
    rot, t = np.eye(d), np.zeros(d)
    q_prev = np.inf
    converged, it = False, 0
    for it in range(1, int(max_iterations) + 1):
        ty = y @ rot.T + t
        c = (2.0 * np.pi * sigma2) ** (d / 2.0) * weight / (1.0 - weight) * m / n
        p1, pt1, px = _sums(x, ty, sigma2, c)
        np_ = float(p1.sum())
        if not np_ > 0:
            break
        mu_x = pt1 @ x / np_
        mu_y = p1 @ y / np_
        y_hat = y - mu_y
        a = (px - p1[:, None] * mu_x[None, :]).T @ y_hat  # sum P[m, n] (x_n - mu_x)(y_m - mu_y)^T
        if only_translation:
            rot = np.eye(d)
        else:
            u, _, vt = np.linalg.svd(a)
            fix = np.ones(d)
            fix[-1] = np.linalg.det(u @ vt)
            rot = u @ np.diag(fix) @ vt
        t = mu_x - rot @ mu_y
        tr_ar = float(np.trace(a.T @ rot))
        xpx = float(pt1 @ np.sum((x - mu_x) ** 2, axis=1))
        ypy = float(p1 @ np.sum(y_hat**2, axis=1))
        q = (xpx - 2.0 * tr_ar + ypy) / (2.0 * sigma2) + d * np_ / 2.0 * np.log(sigma2)
        sigma2 = (xpx - tr_ar) / (np_ * d)
        if not sigma2 > 0:
            sigma2 = sigma2_min
        if it > 2 and abs(q_prev - q) < tolerance:
            converged = True
            break
        q_prev = q
    return CPDResult(rotation=rot, translation=t, iterations=it, converged=converged, sigma2=float(sigma2))
