"""Rigid Coherent Point Drift (Myronenko & Song 2010, https://doi.org/10.1109/TPAMI.2010.46) on
plain arrays: the expectation-maximisation of a Gaussian mixture centred on the moving points.

The moving points ``Y`` (``M x 3``) are the centroids of a Gaussian mixture of common variance
``sigma2``, plus a uniform component of weight ``w`` for outliers; the fixed points ``X``
(``N x 3``) are its data. Each iteration (the paper's Fig. 2, scale fixed at 1):

- E step: ``P[m, n]``, the posterior that ``x_n`` comes from the moved ``y_m``;
- M step: the rotation (from the SVD of the weighted cross-covariance, a reflection excluded),
  the translation and the variance that maximise the expected likelihood.

``P`` is never held whole: it is built block by block over the fixed points (each column's
normalisation needs all the moving points, which every block holds), so memory is
``M x block`` floats whatever ``N``. Stopping is upstream xdem's: the absolute change of the
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

import numpy as np

__all__ = ["CPDResult", "rigid_cpd"]

#: Elements of a block of ``P`` (``M x block``): 32 MB of float64.
_BLOCK_ELEMENTS = 4_000_000


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
    """``P 1`` (per moving point), ``P^T 1`` (per fixed point) and ``P X`` (``M x 3``), blockwise."""
    m = len(ty)
    block = max(1, _BLOCK_ELEMENTS // max(m, 1))
    p1 = np.zeros(m)
    pt1 = np.zeros(len(x))
    px = np.zeros((m, x.shape[1]))
    ty2 = np.sum(ty**2, axis=1)[:, None]
    for start in range(0, len(x), block):
        xb = x[start:start + block]
        d2 = np.maximum(ty2 + np.sum(xb**2, axis=1)[None, :] - 2.0 * ty @ xb.T, 0.0)
        k = np.exp(-d2 / (2.0 * sigma2))
        den = np.maximum(k.sum(axis=0), np.finfo(np.float64).eps) + c
        p = k / den
        p1 += p.sum(axis=1)
        pt1[start:start + block] = p.sum(axis=0)
        px += p @ xb
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
