"""The least-squares step of LZD (Rosenholm & Torlegård 1988), on sampled arrays in memory.

A rigid transform of the to-be-aligned surface is refined by small increments: a rotation
``w = (wx, wy, wz)`` (radians, a rotation vector) about the centre ``c`` and a translation
``t = (tx, ty, tz)``. At a sampled reference position ``q``, let ``P = (q_x, q_y, z')`` be the
point of the moved to-be-aligned surface above it, ``d = P - c``, ``r = z' - z_ref(q)`` the
residual and ``g = (gx, gy)`` the gradient of the surface there. The increment moves ``P`` by
``dP = w x d + t``; the moved surface then shows, at ``q``, the elevation
``z' + dPz - gx dPx - gy dPy`` (to first order), so the increment that cancels the residuals
solves, in least squares over the points,

    ``r + dPz - gx dPx - gy dPy = 0``,

linear in the six unknowns with coefficients (:func:`lzd_design`)

    ``wx: dy + gy dz``, ``wy: -dx - gx dz``, ``wz: gx dy - gy dx``, ``tx: -gx``, ``ty: -gy``, ``tz: 1``.

The rotation columns are divided by a length ``scale`` (the sample's spread) so that every
column is of order one and the normal equations stay well conditioned. Outliers (changes,
vegetation, blunders) are rejected on the residuals of the fitted model: points further than
``outlier_factor`` NMAD from their median are dropped and the system is solved again, until
the kept points no longer change (:func:`lzd_step`). The increment is then composed exactly
(:func:`increment_matrix`): ``M <- (rotation exp(w) about c, then t) @ M``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.spatial.transform import Rotation

from xdem.kernels.rigid import rigid_matrix
from xdem.kernels.robust import nmad

__all__ = ["UNKNOWNS", "window_gradient", "lzd_design", "lzd_step", "LzdStep", "increment_matrix", "step_motion"]

#: Names of the six unknowns, in the order of the design's columns and of the increments.
UNKNOWNS = ("wx", "wy", "wz", "tx", "ty", "tz")
#: Rounds of outlier rejection in one step at most (they stop earlier when nothing changes).
MAX_REJECTION_ROUNDS = 8


def window_gradient(windows: np.ndarray, half: int, *, step_x: float, step_y: float) -> tuple[np.ndarray, np.ndarray]:
    """Gradient ``(dz/dx, dz/dy)`` at the centre pixel ``(half, half)`` of each window.

    Fourth-order central differences (``(-z2 + 8 z1 - 8 z-1 + z-2) / 12``, exact for
    polynomials of degree 4, and 0.97 of the slope of a wave of 6 pixels where the
    second-order difference gives 0.83) where the 5 pixels are finite, second-order
    differences where only the 3 central ones are, NaN otherwise.

    Parameters
    ----------
    windows
        ``(n, s, s)`` values, ``s >= half + 3`` and ``half >= 2``.
    half
        Index of the centre pixel in both directions.
    step_x, step_y
        Signed CRS increments of ``x`` per column and of ``y`` per row (the geotransform's
        ``a`` and ``e``: ``step_y`` is negative on a north-up grid).

    Examples
    --------
    >>> rows, cols = np.mgrid[0:6, 0:6].astype(float)
    >>> z = 2.0 * (10.0 * cols) + 0.5 * (-5.0 * rows)  # z = 2 x + 0.5 y, x = 10 col, y = -5 row
    >>> gx, gy = window_gradient(z[None], 2, step_x=10.0, step_y=-5.0)
    >>> round(float(gx[0]), 12), round(float(gy[0]), 12)
    (2.0, 0.5)
    """
    w = np.asarray(windows)  # the 8 pixels used, not the windows, are taken as float64 (exact: the same numbers)
    h = int(half)

    def derivative(m2: np.ndarray, m1: np.ndarray, p1: np.ndarray, p2: np.ndarray) -> np.ndarray:
        m2, m1, p1, p2 = (np.asarray(v, dtype=np.float64) for v in (m2, m1, p1, p2))
        fourth = (m2 - 8.0 * m1 + 8.0 * p1 - p2) / 12.0
        second = (p1 - m1) / 2.0
        dz: np.ndarray = np.where(np.isfinite(fourth), fourth, second)
        return dz

    d_col = derivative(w[:, h, h - 2], w[:, h, h - 1], w[:, h, h + 1], w[:, h, h + 2])
    d_row = derivative(w[:, h - 2, h], w[:, h - 1, h], w[:, h + 1, h], w[:, h + 2, h])
    return d_col / float(step_x), d_row / float(step_y)


def lzd_design(d: np.ndarray, gx: np.ndarray, gy: np.ndarray, *, scale: float = 1.0) -> np.ndarray:
    """The ``(n, 6)`` coefficients of ``(wx * scale, wy * scale, wz * scale, tx, ty, tz)`` (see
    the module notes): the change of the moved surface's elevation above each point per
    unit of each unknown.

    Parameters
    ----------
    d
        ``(3, n)`` offsets of the moved points from the centre.
    gx, gy
        ``(n,)`` gradient of the surface at the points.
    scale
        Length dividing the rotation columns (conditioning); the solution's rotations are
        then ``w * scale``.

    Examples
    --------
    A unit rotation about z seen at ``d = (1, 0, 0)`` on a surface rising along y: the point
    moves by ``+y``, so the surface above ``q`` drops by ``gy``.

    >>> lzd_design(np.array([[1.0], [0.0], [0.0]]), np.array([0.0]), np.array([2.0])).round(12).tolist()
    [[0.0, -1.0, -2.0, -0.0, -2.0, 1.0]]
    """
    dx, dy, dz = (np.asarray(v, dtype=np.float64) for v in d)
    gx = np.asarray(gx, dtype=np.float64)
    gy = np.asarray(gy, dtype=np.float64)
    inv = 1.0 / float(scale)
    return np.column_stack([
        (dy + gy * dz) * inv,
        (-dx - gx * dz) * inv,
        (gx * dy - gy * dx) * inv,
        -gx,
        -gy,
        np.ones_like(gx),
    ])


class LzdStep(NamedTuple):
    """Outcome of :func:`lzd_step`."""

    #: ``(wx, wy, wz, tx, ty, tz)``: rotation vector (radians) and translation; zeros for fixed unknowns.
    increment: np.ndarray
    #: Points kept by the outlier rejection (a mask over the input points).
    inliers: np.ndarray
    #: NMAD of the fitted model's residuals over the kept points.
    spread: float
    #: Ratio of the largest to the smallest singular value of the kept, column-normalised design.
    condition: float


def lzd_step(
    r: np.ndarray,
    d: np.ndarray,
    gx: np.ndarray,
    gy: np.ndarray,
    *,
    scale: float,
    unknowns: tuple[int, ...] = (0, 1, 2, 3, 4, 5),
    outlier_factor: float | None = 3.0,
) -> LzdStep:
    """One robust least-squares increment cancelling the residuals ``r`` (module notes).

    Parameters
    ----------
    r
        ``(n,)`` residuals ``z'_moved - z_ref`` (NaN: not used).
    d, gx, gy, scale
        As :func:`lzd_design` (NaN gradients: point not used).
    unknowns
        Indices (into :data:`UNKNOWNS`) of the unknowns solved for; the others stay 0
        (``(3, 4, 5)``: translation only).
    outlier_factor
        Points whose model residual is further than this many NMAD from the median are
        rejected, and the system solved again, until the kept set is stable (at most
        :data:`MAX_REJECTION_ROUNDS` rounds). ``None``: plain least squares.

    Examples
    --------
    Residuals made by a known small increment are recovered (the model is linear in it):

    >>> rng = np.random.default_rng(1)
    >>> d = rng.normal(0.0, 100.0, (3, 500)); gx, gy = rng.normal(0.0, 0.5, (2, 500))
    >>> true = np.array([1e-4, -2e-4, 3e-4, 0.5, -0.2, 0.1])
    >>> r = -lzd_design(d, gx, gy) @ true
    >>> np.allclose(lzd_step(r, d, gx, gy, scale=100.0).increment, true)
    True
    """
    a = lzd_design(d, gx, gy, scale=scale)
    if tuple(unknowns) != tuple(range(a.shape[1])):  # else the columns as they are (no copy)
        a = a[:, list(unknowns)]
    b = -np.asarray(r, dtype=np.float64)
    ok = np.isfinite(b) & np.all(np.isfinite(a), axis=1)
    keep = ok.copy()
    sol = np.zeros(len(unknowns))
    used, e, gram = keep, np.zeros(0), None
    for _ in range(MAX_REJECTION_ROUNDS):
        sol, gram = _solve(a[keep], b[keep])
        used, e = keep, (a[ok] @ sol) - b[ok]  # the model's residuals: r + A x
        if outlier_factor is None or not len(e):
            break
        med = float(np.median(e))
        new = ok.copy()
        new[ok] = np.abs(e - med) <= max(float(outlier_factor) * nmad(e, center=med), 1e-12)
        if np.array_equal(new, keep):
            break
        keep = new
    spread = nmad(e[used[ok]])  # of the points of the last solve
    increment = np.zeros(6)
    increment[list(unknowns)] = sol
    increment[:3] /= float(scale)
    # the last solve's normal matrix is the kept points' (unless the rounds ran out on a new set)
    condition = _condition(a[keep]) if keep is not used else _condition_of(gram, int(np.count_nonzero(keep)))
    return LzdStep(increment=increment, inliers=keep, spread=spread, condition=condition)


def _normal(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """The column-normalised design, its column norms (a zero column's taken as 1), its normal
    matrix ``A^T A`` and whether a column is zero."""
    norms = np.sqrt(np.einsum("ij,ij->j", a, a))
    zero = norms == 0
    norms[zero] = 1.0
    an = a / norms
    return an, norms, an.T @ an, bool(zero.any())


def _solve(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Least squares by the normal equations of the column-normalised system (its columns
    are of order one by construction, so ``A^T A`` is well conditioned); and that normal
    matrix (``None`` if a column is zero)."""
    an, norms, gram, zero = _normal(a)
    x, *_ = np.linalg.lstsq(gram, an.T @ b, rcond=None)
    scaled: np.ndarray = x / norms
    return scaled, (None if zero else gram)


def _condition_of(gram: np.ndarray | None, rows: int) -> float:
    """Condition number of a column-normalised design of ``rows`` rows from its normal matrix
    (``None``: a zero column; ``inf`` then and for fewer rows than columns)."""
    if gram is None or rows < gram.shape[0]:
        return float("inf")
    ev = np.linalg.eigvalsh(gram)
    return float(np.sqrt(ev[-1] / ev[0])) if ev[0] > 0 else float("inf")


def _condition(a: np.ndarray) -> float:
    """Condition number of the column-normalised design (``inf`` for a zero column)."""
    _, _, gram, zero = _normal(a)
    return _condition_of(None if zero else gram, len(a))


def increment_matrix(increment: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """4 x 4 matrix of the increment ``(wx, wy, wz, tx, ty, tz)`` as an exact rigid transform:
    the rotation of vector ``w`` about ``centre``, then the translation ``t``.

    Examples
    --------
    >>> m = increment_matrix(np.array([0.0, 0.0, np.pi / 2, 1.0, 0.0, 0.0]), np.zeros(3))
    >>> np.round(m @ [1.0, 0.0, 0.0, 1.0], 12).tolist()
    [1.0, 1.0, 0.0, 1.0]
    """
    inc = np.asarray(increment, dtype=np.float64)
    return rigid_matrix(Rotation.from_rotvec(inc[:3]).as_matrix(), inc[3:], np.asarray(centre, dtype=np.float64))


def step_motion(increment: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``|w x d + t|``: how far the increment moves each point (first order), in CRS units.

    Examples
    --------
    >>> step_motion(np.array([0.0, 0.0, 1e-3, 0.0, 0.0, 0.0]), np.array([[1000.0], [0.0], [0.0]])).round(9).tolist()
    [1.0]
    """
    inc = np.asarray(increment, dtype=np.float64)
    dd = np.asarray(d, dtype=np.float64)
    moved = np.cross(inc[:3], dd, axisb=0, axisc=0) + inc[3:, None]
    motion: np.ndarray = np.sqrt(np.sum(moved**2, axis=0))
    return motion
