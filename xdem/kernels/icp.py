"""Numpy kernels of the Iterative Closest Point method (:class:`xdem.coreg.ICP`), on points in memory.

One ICP iteration matches every source point ``p`` (already moved by the current estimate) to
the reference surface and solves for a small rigid increment ``P -> dR (P - c) + c + dt``
about the centre ``c`` (the convention of :mod:`xdem.kernels.rigid`):

- the reference surface near a matched reference pixel is the bicubic (Keys, ``a = -0.5``: the
  interpolation of ``resampling="cubic"``) through its 4 x 4 neighbourhood
  (:func:`cubic_surface`), whose gradient gives the normal ``n ~ (-z_x, -z_y, 1)``
  (:func:`unit_normals`); at a pixel centre that gradient is the central difference of the
  3 x 3 neighbourhood;
- point-to-plane (Chen & Medioni 1992, :func:`point_to_plane_step`): minimise
  ``sum (n . (dT(p) - s))^2`` linearised for small angles, a 6 x 6 least-squares problem in
  coordinates relative to ``c`` and scaled by their spread, so that the three rotation and the
  three translation columns have similar norms;
- point-to-point (Besl & McKay 1992, :func:`point_to_point_step`): the rotation and translation
  that best map the points onto their targets, in closed form (Kabsch: the SVD of the
  cross-covariance).

:func:`acceleration` extends point-to-point steps that keep one direction (Besl & McKay's
accelerated ICP, as a geometric series). :func:`reject_outliers` drops matches whose residual is further than ``k`` NMAD from the
median; :func:`max_motion` measures an increment (the convergence test).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from scipy.spatial.transform import Rotation

from xdem.kernels.robust import nmad

__all__ = ["cubic_weights", "cubic_surface", "cell_corner_targets", "unit_normals", "point_to_plane_step", "point_to_point_step",
           "reject_outliers", "plane_distances", "max_motion", "compose", "move_points", "acceleration"]


#: Rows of the point-to-plane system reduced at a time (:func:`point_to_plane_step`).
STEP_BATCH = 65536
#: Keys' cubic convolution parameter (that of :mod:`xdem.kernels.interp`).
_A = -0.5


def cubic_weights(frac: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keys' cubic weights of the pixels at offsets ``-1, 0, 1, 2`` from ``floor(position)``
    for fractional parts ``frac``, and their derivatives with respect to the position.

    Returns
    -------
    weights, derivatives
        Two ``(4, m)`` arrays; the weights sum to 1 and the derivatives to 0.

    Examples
    --------
    >>> w, dw = cubic_weights(np.array([0.0, 0.5]))
    >>> w[:, 0].tolist(), (dw[:, 0] + 0.0).tolist()  # at a pixel centre: the central difference
    ([0.0, 1.0, 0.0, 0.0], [-0.5, 0.0, 0.5, 0.0])
    """
    f = np.asarray(frac, dtype=np.float64)

    def near(t: np.ndarray) -> np.ndarray:
        w: np.ndarray = ((_A + 2.0) * t - (_A + 3.0)) * t * t + 1.0
        return w

    def far(t: np.ndarray) -> np.ndarray:
        w: np.ndarray = ((_A * t - 5.0 * _A) * t + 8.0 * _A) * t - 4.0 * _A
        return w

    def dnear(t: np.ndarray) -> np.ndarray:
        w: np.ndarray = (3.0 * (_A + 2.0) * t - 2.0 * (_A + 3.0)) * t
        return w

    def dfar(t: np.ndarray) -> np.ndarray:
        w: np.ndarray = (3.0 * _A * t - 10.0 * _A) * t + 8.0 * _A
        return w

    w = np.stack([far(1.0 + f), near(f), near(1.0 - f), far(2.0 - f)])
    dw = np.stack([dfar(1.0 + f), dnear(f), -dnear(1.0 - f), -dfar(2.0 - f)])
    return w, dw


@numba.njit(cache=True, nogil=True, inline="always")
def _weights_into(f: float, w: np.ndarray, dw: np.ndarray) -> None:  # pragma: no cover - compiled
    """One point of :func:`cubic_weights`, the same operations in the same order."""
    a = _A
    t = 1.0 + f
    w[0] = ((a * t - 5.0 * a) * t + 8.0 * a) * t - 4.0 * a
    dw[0] = (3.0 * a * t - 10.0 * a) * t + 8.0 * a
    t = f
    w[1] = ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0
    dw[1] = (3.0 * (a + 2.0) * t - 2.0 * (a + 3.0)) * t
    t = 1.0 - f
    w[2] = ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0
    dw[2] = -((3.0 * (a + 2.0) * t - 2.0 * (a + 3.0)) * t)
    t = 2.0 - f
    w[3] = ((a * t - 5.0 * a) * t + 8.0 * a) * t - 4.0 * a
    dw[3] = -((3.0 * a * t - 10.0 * a) * t + 8.0 * a)


@numba.njit(cache=True, nogil=True)
def _cubic_surface_loop(windows: np.ndarray, index: np.ndarray, prow: np.ndarray, pcol: np.ndarray,
                        origin_row: np.ndarray, origin_col: np.ndarray, n_rows: int, n_cols: int,
                        z: np.ndarray, zc: np.ndarray, zr: np.ndarray) -> None:  # pragma: no cover - compiled
    """:func:`cubic_surface` point by point: the operations of :func:`_cubic_surface_numpy` in its
    order (the 4 terms of a row summed first to last, the rows added to zero first to last)."""
    wr, dwr, wc, dwc = np.empty(4), np.empty(4), np.empty(4), np.empty(4)
    for k in range(index.size):
        pr, pc = prow[k], pcol[k]
        if not (math.isfinite(pr) and math.isfinite(pc)):
            z[k] = zc[k] = zr[k] = np.nan
            continue
        ir, ic = math.floor(pr), math.floor(pc)
        if not (ir >= 1 and ir + 2 < n_rows and ic >= 1 and ic + 2 < n_cols):
            z[k] = zc[k] = zr[k] = np.nan
            continue
        _weights_into(pr - ir, wr, dwr)
        _weights_into(pc - ic, wc, dwc)
        m = index[k]
        r0, c0 = int(ir) - 1 + origin_row[m], int(ic) - 1 + origin_col[m]
        sz, szr, szc = 0.0, 0.0, 0.0
        for a in range(4):
            v0 = np.float64(windows[m, r0 + a, c0])
            v1 = np.float64(windows[m, r0 + a, c0 + 1])
            v2 = np.float64(windows[m, r0 + a, c0 + 2])
            v3 = np.float64(windows[m, r0 + a, c0 + 3])
            along = wc[0] * v0 + wc[1] * v1 + wc[2] * v2 + wc[3] * v3
            across = dwc[0] * v0 + dwc[1] * v1 + dwc[2] * v2 + dwc[3] * v3
            sz += wr[a] * along
            szr += dwr[a] * along
            szc += wr[a] * across
        z[k], zr[k], zc[k] = sz, szr, szc


def cubic_surface(windows: np.ndarray, index: np.ndarray, prow: np.ndarray, pcol: np.ndarray, *,
                  origin: tuple[np.ndarray, np.ndarray] | None = None,
                  size: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Elevation and gradient ``(z, z_col, z_row)`` (per pixel) of the bicubic surface of
    ``windows[index]`` at positions ``(prow, pcol)`` inside them (window pixel units).

    NaN where the 4 x 4 footprint leaves the window or holds a NaN. A compiled loop (one pass,
    no ``(m, 4)`` temporaries) doing the operations of the numpy version in its order: the
    same bits (tests/coreg/test_icp.py).

    With ``origin = (rows, cols)`` and ``size``, window ``k`` is the ``size x size`` part of
    the stored ``windows[k]`` that starts at ``(rows[k], cols[k])`` (positions and the footprint
    test are relative to it): windows cut wider once serve cells a pixel or two away.

    Examples
    --------
    >>> w = np.add.outer(np.arange(6.0) ** 2, 3.0 * np.arange(6.0))[None]  # z = row^2 + 3 col
    >>> [round(float(a[0]), 9) for a in cubic_surface(w, np.array([0]), np.array([2.5]), np.array([2.25]))]
    [13.0, 3.0, 5.0]
    """
    index = np.ascontiguousarray(index, dtype=np.int64)
    prow = np.ascontiguousarray(prow, dtype=np.float64)
    pcol = np.ascontiguousarray(pcol, dtype=np.float64)
    z, zc, zr = np.empty(index.size), np.empty(index.size), np.empty(index.size)
    win = windows if windows.dtype in (np.float32, np.float64) else windows.astype(np.float64)
    if origin is None:
        origin = (np.zeros(len(windows), dtype=np.int64),) * 2
    n_rows, n_cols = windows.shape[1:] if size is None else (size, size)
    _cubic_surface_loop(np.ascontiguousarray(win), index, prow, pcol, np.asarray(origin[0], dtype=np.int64),
                        np.asarray(origin[1], dtype=np.int64), int(n_rows), int(n_cols), z, zc, zr)
    return z, zc, zr


def _cubic_surface_numpy(windows: np.ndarray, index: np.ndarray, prow: np.ndarray,
                         pcol: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`cubic_surface` in vectorised numpy (the reference of the compiled loop)."""
    n_rows, n_cols = windows.shape[1:]
    ir, ic = np.floor(prow).astype(np.int64), np.floor(pcol).astype(np.int64)
    inside = (ir >= 1) & (ir + 2 < n_rows) & (ic >= 1) & (ic + 2 < n_cols)
    ir, ic = np.clip(ir, 1, n_rows - 3), np.clip(ic, 1, n_cols - 3)
    wr, dwr = cubic_weights(prow - ir)
    wc, dwc = cubic_weights(pcol - ic)
    z = np.zeros(len(index))
    zr = np.zeros(len(index))
    zc = np.zeros(len(index))
    for a in range(4):
        row_vals = windows[index, ir + a - 1].astype(np.float64)  # (m, n_cols)
        vals = np.stack([row_vals[np.arange(len(index)), ic + b - 1] for b in range(4)])  # (4, m)
        along = np.sum(wc * vals, axis=0)
        z += wr[a] * along
        zr += dwr[a] * along
        zc += wr[a] * np.sum(dwc * vals, axis=0)
    bad = ~inside
    z[bad] = zr[bad] = zc[bad] = np.nan
    return z, zc, zr


@numba.njit(cache=True, nogil=True)
def _corner_targets_loop(perm: np.ndarray, pos: np.ndarray, keys: np.ndarray, z: np.ndarray, rows: np.ndarray,
                         cols: np.ndarray, coef: np.ndarray,
                         centre: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """:func:`cell_corner_targets` after the sort: one target per run of equal keys, from the
    run's candidate of lowest point-major index ``4 k + corner``."""
    n, m = rows.size, 0
    for i in range(perm.size):
        if i == 0 or keys[perm[i]] != keys[perm[i - 1]]:
            m += 1
    pts, owner = np.empty((m, 3)), np.empty(m, dtype=np.int64)
    a, b, c, d, e, f = coef[0], coef[1], coef[2], coef[3], coef[4], coef[5]
    i, t = 0, 0
    while i < perm.size:
        best = 4 * n
        first = i
        while i < perm.size and keys[perm[i]] == keys[perm[first]]:
            p = pos[perm[i]]
            best = min(best, 4 * (p % n) + p // n)
            i += 1
        k, corner = best // 4, best % 4
        cc = np.float64(cols[k] + corner % 2) + 0.5
        rr = np.float64(rows[k] + corner // 2) + 0.5
        pts[t, 0] = (a * cc + b * rr + c) - centre[0]
        pts[t, 1] = (d * cc + e * rr + f) - centre[1]
        pts[t, 2] = np.float64(z[corner * n + k]) - centre[2]
        owner[t] = k
        t += 1
    return pts, owner


def cell_corner_targets(corner_z: np.ndarray, rows: np.ndarray, cols: np.ndarray, ncols: int,
                        coef: tuple[float, float, float, float, float, float],
                        centre: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Target points of cells: the four corners (pixel centres) of the cell whose top-left
    pixel is ``(rows[k], cols[k])``, where their elevation is finite, one per pixel.

    Parameters
    ----------
    corner_z
        ``(n, 2, 2)`` elevations of the corner pixels of each cell.
    rows, cols
        ``(n,)`` integer pixel of each cell's top-left corner.
    ncols
        Width of the grid (the global pixel index is ``row * ncols + col``).
    coef
        ``(a, b, c, d, e, f)`` of the grid's affine transform.
    centre
        ``(3,)`` subtracted from the target points.

    Returns
    -------
    points, owner
        ``(m, 3)`` target points minus ``centre``, in increasing global pixel index, and the
        cell each was taken from: of the cells sharing a pixel, the first (``np.unique``'s
        first occurrence in the cell-by-cell, corner-by-corner order). The corner-major
        candidates are almost sorted already: a stable sort of them costs a few times less
        than ``np.unique`` of the cell-major ones, for the same result.

    Examples
    --------
    >>> z = np.ones((2, 2, 2), dtype=np.float32)
    >>> pts, owner = cell_corner_targets(z, np.array([0, 0]), np.array([0, 1]), 10, (1, 0, 0, 0, 1, 0), np.zeros(3))
    >>> pts[:, 0].tolist(), owner.tolist()  # the shared corners belong to the first cell
    ([0.5, 1.5, 2.5, 0.5, 1.5, 2.5], [0, 0, 1, 0, 0, 1])
    """
    n = len(rows)
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    cols = np.ascontiguousarray(cols, dtype=np.int64)
    z = np.ascontiguousarray(np.asarray(corner_z).reshape(n, 4).T).ravel()  # corner-major
    pos = np.flatnonzero(np.isfinite(z))
    offsets = np.array([0, 1, ncols, ncols + 1], dtype=np.int64)  # the corners' global index from the cell's
    keys = (rows * ncols + cols)[pos % n] + offsets[pos // n]  # finite corners only: no (4, n) temporaries
    perm = np.argsort(keys, kind="stable")
    return _corner_targets_loop(perm, pos, keys, z, rows, cols, np.asarray(coef, dtype=np.float64),
                                np.asarray(centre, dtype=np.float64))


def unit_normals(zx: np.ndarray, zy: np.ndarray) -> np.ndarray:
    """``(m, 3)`` upward unit normals ``(-z_x, -z_y, 1) / norm`` of surfaces with gradient ``(z_x, z_y)``.

    Examples
    --------
    >>> np.round(unit_normals(np.array([1.0]), np.array([0.0])), 6).tolist()
    [[-0.707107, -0.0, 0.707107]]
    """
    n = np.column_stack([-np.asarray(zx, dtype=np.float64), -np.asarray(zy, dtype=np.float64),
                         np.ones(np.shape(zx))])
    unit: np.ndarray = n / np.linalg.norm(n, axis=1)[:, None]
    return unit


def _batches(m: int, where: np.ndarray | None) -> list[np.ndarray]:
    """Indices of the rows ``where`` is True (all ``m`` when None), :data:`STEP_BATCH` at a time."""
    rows = np.arange(m) if where is None else np.flatnonzero(where)
    return [rows[a:a + STEP_BATCH] for a in range(0, len(rows), STEP_BATCH)]


def point_to_plane_step(points: np.ndarray, targets: np.ndarray, normals: np.ndarray, centre: np.ndarray, *,
                        where: np.ndarray | None = None, rcond: float = 1e-4) -> tuple[np.ndarray, np.ndarray, int]:
    """The rigid increment that best puts ``points`` on the planes ``(targets, normals)``.

    Minimises ``sum_i (n_i . (dR (p_i - c) + c + dt - q_i))^2`` with ``dR ~ I + [w]x`` (small
    angles): ``r_i + (d_i x n_i) . (L w) + n_i . dt = 0`` in least squares, ``d_i = (p_i - c) / L``
    and ``L`` the RMS distance of the points from ``c``, so that the six columns have norms of
    one order and the solve is well conditioned whatever the CRS's coordinates. ``dR`` is then
    the exact rotation of the vector ``w`` (no loss of orthonormality).

    The system is reduced :data:`STEP_BATCH` rows at a time to the triangular factor of its QR
    decomposition (7 x 7 with the right-hand side), then solved by ``lstsq`` on that factor: the
    same singular values, so the same rank and minimum-norm solution as ``lstsq`` on the whole
    ``(m, 6)`` design, whose copies (its own and LAPACK's, 48 bytes a row each) were the ICP
    fit's memory peak (issue 28).

    Parameters
    ----------
    points, targets, normals
        ``(m, 3)`` moved source points, points on the reference planes, unit normals.
    centre
        ``(3,)`` rotation centre ``c``.
    where
        Boolean ``(m,)``: the rows to use (all when None), without a copy of the others.
    rcond
        Relative singular value below which a direction is taken as unconstrained (its increment
        is 0): flat terrain constrains neither the horizontal shift nor the rotation about z.

    Returns
    -------
    rotation, translation, rank
        ``dR`` (3 x 3), ``dt`` (3,) and the number of constrained directions (6 when all are).

    Examples
    --------
    Points 0.5 above three perpendicular planes through the origin:

    >>> n = np.repeat(np.eye(3), 4, axis=0)
    >>> q = np.random.default_rng(0).normal(size=(12, 3)) * (1 - n)  # on the planes
    >>> r, t, rank = point_to_plane_step(q + 0.5 * n, q, n, np.zeros(3))
    >>> np.round(t, 9).tolist(), rank
    ([-0.5, -0.5, -0.5], 6)
    """
    c = np.asarray(centre, dtype=np.float64)
    batches = _batches(len(points), where)
    squares = sum(float(np.sum((np.asarray(points[b], dtype=np.float64) - c) ** 2)) for b in batches)
    scale = math.sqrt(squares / max(sum(len(b) for b in batches), 1)) or 1.0
    factor: np.ndarray = np.zeros((0, 7))
    for b in batches:
        p, n = np.asarray(points[b], dtype=np.float64), np.asarray(normals[b], dtype=np.float64)
        residual = np.sum((p - targets[b]) * n, axis=1)
        block = np.column_stack([np.cross((p - c) / scale, n), n, -residual])
        factor = np.asarray(np.linalg.qr(np.vstack([factor, block]), mode="r"))
    factor = np.vstack([factor, np.zeros((max(0, 6 - len(factor)), 7))])  # fewer than 6 rows: zero rows added
    x, _, rank, _ = np.linalg.lstsq(factor[:6, :6], factor[:6, 6], rcond=rcond)
    return Rotation.from_rotvec(x[:3] / scale).as_matrix(), x[3:].copy(), int(rank)


def point_to_point_step(points: np.ndarray, targets: np.ndarray, centre: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rigid increment ``P -> dR (P - c) + c + dt`` that best maps ``points`` onto
    ``targets`` (least squares, closed form: Kabsch's SVD of the cross-covariance of the
    centred point sets, with the reflection excluded).

    Examples
    --------
    >>> from xdem.kernels.rigid import rotation_matrix
    >>> p = np.random.default_rng(1).normal(size=(50, 3))
    >>> r0, c = rotation_matrix(1.0, -2.0, 30.0), np.array([1.0, 2.0, 3.0])
    >>> r, t = point_to_point_step(p, (p - c) @ r0.T + c + [0.5, 0.0, -1.0], c)
    >>> bool(np.allclose(r, r0)), np.round(t, 9).tolist()
    (True, [0.5, 0.0, -1.0])
    """
    p = np.asarray(points, dtype=np.float64)
    q = np.asarray(targets, dtype=np.float64)
    c = np.asarray(centre, dtype=np.float64)
    pm, qm = p.mean(axis=0), q.mean(axis=0)
    h = (p - pm).T @ (q - qm)
    u, _, vt = np.linalg.svd(h)
    flip = np.diag([1.0, 1.0, float(np.sign(np.linalg.det(vt.T @ u.T))) or 1.0])
    r = vt.T @ flip @ u.T
    return r, r @ (c - pm) + qm - c


def reject_outliers(residuals: np.ndarray, factor: float | None) -> np.ndarray:
    """Mask of the finite ``residuals`` within ``factor`` NMAD of their median (all finite
    ones when ``factor`` is None; a zero NMAD keeps the values equal to the median).

    Examples
    --------
    >>> reject_outliers(np.array([0.0, 0.1, -0.1, 0.05, 5.0, np.nan]), 3.0).tolist()
    [True, True, True, True, False, False]
    """
    r = np.asarray(residuals, dtype=np.float64)
    ok = np.isfinite(r)
    if factor is None or not ok.any():
        return ok
    med = float(np.median(r[ok]))
    spread = nmad(r[ok], center=med)
    return ok & (np.abs(r - med) <= float(factor) * spread)


def compose(rotation: np.ndarray, translation: np.ndarray, d_rotation: np.ndarray,
            d_translation: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(R, t)`` of the increment ``(dR, dt)`` applied after ``(R, t)``, both about the same centre:
    ``dR (R (P - c) + c + t - c) + c + dt = dR R (P - c) + c + (dR t + dt)``.

    Examples
    --------
    >>> r, t = compose(np.eye(3), np.array([1.0, 0.0, 0.0]), np.eye(3), np.array([0.0, 2.0, 0.0]))
    >>> t.tolist()
    [1.0, 2.0, 0.0]
    """
    return d_rotation @ rotation, d_rotation @ translation + d_translation


def move_points(points: np.ndarray, rotation: np.ndarray, translation: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """``(m, 3)`` images of ``points`` under ``P -> R (P - c) + c + t``, column by column (no
    BLAS call: as fast on a busy machine, and the same bits whatever the BLAS threads).

    Examples
    --------
    >>> from xdem.kernels.rigid import rotation_matrix
    >>> p = move_points(np.array([[2.0, 0.0, 5.0]]), rotation_matrix(0, 0, 90), np.zeros(3), np.array([1.0, 0, 0]))
    >>> np.round(p, 12).tolist()
    [[1.0, 1.0, 5.0]]
    """
    r = np.asarray(rotation, dtype=np.float64)
    d = np.asarray(points, dtype=np.float64) - centre
    out: np.ndarray = d[:, 0:1] * r[:, 0] + d[:, 1:2] * r[:, 1] + d[:, 2:3] * r[:, 2]
    out += np.asarray(centre, dtype=np.float64) + translation
    return out


def plane_distances(points: np.ndarray, targets: np.ndarray, normals: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Signed distances ``n_i . (p_i - q_i)`` of ``points`` to the planes ``(targets, normals)``,
    NaN where ``ok`` is False; column by column, so that no ``(m, 3)`` temporary is made (the
    same sums, in the same order, as ``np.sum((p - q) * n, axis=1)``).

    Examples
    --------
    >>> p, q = np.array([[0.0, 0.0, 2.0], [1.0, 1.0, 1.0]]), np.zeros((2, 3))
    >>> plane_distances(p, q, np.array([[0.0, 0.0, 1.0]] * 2), np.array([True, False])).tolist()
    [2.0, nan]
    """
    dist: np.ndarray = (points[:, 0] - targets[:, 0]) * normals[:, 0]
    for k in (1, 2):
        dist += (points[:, k] - targets[:, k]) * normals[:, k]
    dist[~np.asarray(ok, dtype=bool)] = np.nan
    return dist


def max_motion(rotation: np.ndarray, translation: np.ndarray, centre: np.ndarray, points: np.ndarray, *,
               where: np.ndarray | None = None) -> float:
    """Largest distance any of ``points`` (those where ``where`` is True, all when None) moves
    under ``P -> R (P - c) + c + t``, :data:`STEP_BATCH` points at a time.

    Examples
    --------
    >>> max_motion(np.eye(3), np.array([3.0, 4.0, 0.0]), np.zeros(3), np.zeros((2, 3)))
    5.0
    """
    most = 0.0
    for b in _batches(len(points), where):
        p = np.asarray(points[b], dtype=np.float64)
        motion = move_points(p, rotation, translation, centre) - p
        most = max(most, float(np.max(np.sum(motion * motion, axis=1))))
    return math.sqrt(most)


def acceleration(previous: np.ndarray | None, current: np.ndarray, *, max_angle: float = 10.0,
                 max_factor: float = 25.0) -> float:
    """How far to extend the ``current`` increment when it follows ``previous`` in one direction.

    Point-to-point ICP converges linearly: its increments (6-vectors, e.g. the rotation vector
    times the points' spread and the translation) shrink by a ratio ``rho`` while keeping their
    direction. Besl & McKay (1992) extend the step along that direction; here as the sum of the
    geometric series of the remaining increments, ``rho / (1 - rho)`` times the current one
    (at most ``max_factor``), when the two increments are within ``max_angle`` degrees of each
    other and shrinking. Returns 0 otherwise (or without ``previous``).

    Examples
    --------
    >>> acceleration(np.array([1.0, 0, 0, 0, 0, 0]), np.array([0.5, 0, 0, 0, 0, 0]))  # 0.5 + 0.25 + ...
    1.0
    >>> acceleration(np.array([1.0, 0, 0, 0, 0, 0]), np.array([0.0, 0.5, 0, 0, 0, 0]))  # turned: none
    0.0
    """
    if previous is None:
        return 0.0
    a, b = float(np.linalg.norm(previous)), float(np.linalg.norm(current))
    if a == 0.0 or b == 0.0 or b >= a:
        return 0.0
    if float(np.dot(previous, current)) / (a * b) < np.cos(np.radians(max_angle)):
        return 0.0
    rho = b / a
    return float(min(rho / (1.0 - rho), max_factor))
