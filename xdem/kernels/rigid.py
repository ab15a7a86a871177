"""Numpy kernels of rigid transforms: the matrix algebra, and the per-pixel solve that applying
a rotation about x or y to a gridded DEM needs.

Convention (the whole package): a rigid transform moves every point ``P = (x, y, z)`` of the
to-be-aligned DEM to ``P' = R (P - c) + c + t``: a rotation ``R`` about the centre ``c`` (the
*centroid*, chosen for conditioning: rotating about the CRS origin would turn a thousandth of
a degree into metres of translation), then the translation ``t`` (the motion of the centre).
``R = Rz(rz) @ Ry(ry) @ Rx(rx)`` (rotations about the fixed x, then y, then z axes; angles
counter-clockwise looking down the axis). The 4 x 4 homogeneous matrix of the transform in
the CRS's coordinates is ``[[R, c + t - R c], [0, 0, 0, 1]]``.

Applying it to a grid (:func:`solve_elevation`): an output pixel at horizontal position ``q``
shows the moved surface there, i.e. the source point ``P`` whose image has horizontal
coordinates ``q``. Its position depends on its own moved elevation ``z'`` (rotations about x
and y tilt the vertical), ``P_xy = Q0 + b z'``, and ``z' = (a + R_zz z_src(P_xy)) / (1 - k)``:
a fixed point, contracting by about ``|b| * slope`` (1e-3 per iteration for a tenth of a degree
on 45 degree slopes), so a few iterations give the elevation to machine precision.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.spatial.transform import Rotation

__all__ = ["rotation_matrix", "rotations_of", "rigid_matrix", "split_matrix", "transform_points",
           "InverseCoefficients", "solve_elevation", "MAX_FIXED_POINT_ITERATIONS",
           "FIXED_POINT_TOLERANCE"]

#: Iterations of the fixed point in :func:`solve_elevation` before giving up (never reached
#: for rotations about x and y below several degrees).
MAX_FIXED_POINT_ITERATIONS = 20
#: Relative change of the moved elevation at which the fixed point of :func:`solve_elevation` stops.
FIXED_POINT_TOLERANCE = 1e-9


def rotation_matrix(rx: float, ry: float, rz: float, *, degrees: bool = True) -> np.ndarray:
    """``Rz(rz) @ Ry(ry) @ Rx(rx)`` (3 x 3).

    Examples
    --------
    >>> np.round(rotation_matrix(0, 0, 90) @ [1.0, 0.0, 0.0], 12).tolist()  # x axis to y axis
    [0.0, 1.0, 0.0]
    """
    m: np.ndarray = Rotation.from_euler("xyz", [rx, ry, rz], degrees=degrees).as_matrix()
    return m


def rotations_of(rotation: np.ndarray, *, degrees: bool = True) -> tuple[float, float, float]:
    """``(rx, ry, rz)`` of a rotation matrix (inverse of :func:`rotation_matrix`).

    Examples
    --------
    >>> [round(a, 9) for a in rotations_of(rotation_matrix(0.1, -0.02, 0.3))]
    [0.1, -0.02, 0.3]
    """
    rx, ry, rz = Rotation.from_matrix(np.asarray(rotation, dtype=np.float64)).as_euler("xyz", degrees=degrees)
    return float(rx), float(ry), float(rz)


def rigid_matrix(rotation: np.ndarray, translation: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """4 x 4 matrix of ``P -> R (P - c) + c + t``.

    Examples
    --------
    >>> m = rigid_matrix(rotation_matrix(0, 0, 90), np.zeros(3), np.array([10.0, 0.0, 0.0]))
    >>> np.round(transform_points(m, np.array([11.0]), np.array([0.0]), np.array([5.0])), 12).ravel().tolist()
    [10.0, 1.0, 5.0]
    """
    r = np.asarray(rotation, dtype=np.float64)
    c = np.asarray(centre, dtype=np.float64)
    m = np.eye(4)
    m[:3, :3] = r
    m[:3, 3] = c + np.asarray(translation, dtype=np.float64) - r @ c
    return m


def split_matrix(matrix: np.ndarray, centre: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(R, t)`` of a 4 x 4 rigid matrix for the centre ``c`` (``t`` = the motion of ``c``).

    Raises ``ValueError`` if the matrix is not rigid (its 3 x 3 part is not a rotation, or its
    last row is not ``0 0 0 1``).
    """
    m = np.asarray(matrix, dtype=np.float64)
    if m.shape != (4, 4) or not np.all(np.isfinite(m)):
        raise ValueError(f"a rigid transform is a finite 4 x 4 matrix, got shape {m.shape}")
    r = m[:3, :3]
    if not np.allclose(m[3], [0, 0, 0, 1], atol=1e-12) or not np.allclose(r @ r.T, np.eye(3), atol=1e-9) \
            or np.linalg.det(r) < 0:
        raise ValueError("the matrix is not rigid: its 3 x 3 part must be a rotation (orthonormal, "
                         "determinant +1) and its last row 0 0 0 1")
    c = np.asarray(centre, dtype=np.float64)
    return r.copy(), m[:3, 3] + r @ c - c


def transform_points(matrix: np.ndarray, x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``(3, n)`` images of the points under a 4 x 4 matrix (exact, float64)."""
    m = np.asarray(matrix, dtype=np.float64)
    p = np.vstack([np.ravel(x), np.ravel(y), np.ravel(z)]).astype(np.float64)
    return m[:3, :3] @ p + m[:3, 3:4]


class InverseCoefficients:
    """The constants of the per-pixel inverse of ``P -> R (P - c) + c + t`` (see the module notes).

    For an output horizontal position ``q``: ``P_xy = Q0(q) + b z'`` and
    ``z' = (a(q) + R_zz z_src(P_xy)) / (1 - k)``.
    """

    def __init__(self, rotation: np.ndarray, translation: np.ndarray, centre: np.ndarray) -> None:
        r = np.asarray(rotation, dtype=np.float64)
        self.rotation = r
        self.rt = r.T
        self.centre = np.asarray(centre, dtype=np.float64)
        self.shift = np.asarray(translation, dtype=np.float64)
        self.b = self.rt[:2, 2].copy()
        self.k = float(r[2, 0] * self.b[0] + r[2, 1] * self.b[1])
        self.rzz = float(r[2, 2])

    @property
    def tilts(self) -> bool:
        """Whether positions depend on elevation (a rotation about x or y)."""
        return bool(np.any(self.b != 0.0) or self.rotation[2, 0] != 0.0 or self.rotation[2, 1] != 0.0)

    def q0(self, qx: np.ndarray, qy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Source horizontal position of the output position ``q`` for a moved elevation of 0."""
        c, t, rt = self.centre, self.shift, self.rt
        dx, dy, dz = qx - c[0] - t[0], qy - c[1] - t[1], -c[2] - t[2]
        return rt[0, 0] * dx + rt[0, 1] * dy + rt[0, 2] * dz + c[0], rt[1, 0] * dx + rt[1, 1] * dy + rt[1, 2] * dz + c[1]

    def a(self, qx: np.ndarray, qy: np.ndarray) -> np.ndarray:
        """The constant term ``a(q)`` of the elevation equation."""
        r, c, t = self.rotation, self.centre, self.shift
        x0, y0 = self.q0(qx, qy)
        a0: np.ndarray = r[2, 0] * (x0 - c[0]) + r[2, 1] * (y0 - c[1]) - r[2, 2] * c[2] + c[2] + t[2]
        return a0


def solve_elevation(
    sample: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray],
    prow0: np.ndarray,
    pcol0: np.ndarray,
    drow: np.ndarray | float,
    dcol: np.ndarray | float,
    a: np.ndarray | float,
    *,
    k: float,
    rzz: float,
    z0: float = 0.0,
    tol: float = FIXED_POINT_TOLERANCE,
    starts: tuple[float, ...] = (),
    one_step: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The moved elevation at output pixels, by fixed-point iteration.

    The source pixel position of an output pixel whose moved elevation is ``z'`` is
    ``(prow0 + drow (z' - z0), pcol0 + dcol (z' - z0))`` (exact for a source in the frame's
    CRS, where it is affine; linearised over metres otherwise); ``sample(prow, pcol, idx)``
    interpolates the source there for the pixels ``idx`` (indices into the flattened pixels;
    1-D positions). Iterates
    ``z' = (a + rzz * sample(...)) / (1 - k)`` on each pixel until its change is at most ``tol``
    times its magnitude (or :data:`MAX_FIXED_POINT_ITERATIONS`). A pixel whose source is NaN
    at the start (``z0``) is started again from each elevation of ``starts`` in turn until one
    reads a value; a pixel meeting a NaN later stays NaN. ``one_step``: the caller has bounded
    the positions' change over every elevation the pixels can take to a negligible amount
    (:func:`xdem.kernels.rigid_warp.one_step_level`): the first evaluation is the answer.

    Returns
    -------
    z, prow, pcol
        The moved elevations (NaN where the source is NaN at the solution or on the way to it,
        or where the iteration did not settle) and the final source positions.

    Examples
    --------
    A source tilted by 1 in 1000 along rows, positions moving by 0.01 pixel per unit of elevation:

    >>> src = lambda r, c, idx: 0.001 * r
    >>> z, r, c = solve_elevation(src, np.array([100.0]), np.array([0.0]), 0.01, 0.0, 0.0, k=0.0, rzz=1.0)
    >>> round(float(z[0]), 9)  # z = 0.001 (100 + 0.01 z)
    0.100001
    """
    shape = np.shape(prow0)
    scale = 1.0 / (1.0 - k)
    p0, c0, dr, dc, a0 = (np.broadcast_to(np.asarray(v, dtype=np.float64), shape).reshape(-1)
                          for v in (prow0, pcol0, drow, dcol, a))
    everyone = np.arange(p0.size)

    def moved(z: np.ndarray | float, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The elevation read for pixels ``idx`` at elevations ``z``, and where it was read."""
        pr = p0[idx] + dr[idx] * (z - z0)
        pc = c0[idx] + dc[idx] * (z - z0)
        return (a0[idx] + rzz * sample(pr, pc, idx)) * scale, pr, pc

    z, pr, pc = moved(z0, everyone)
    if one_step or not (dr.any() or dc.any()):
        return z.reshape(shape), pr.reshape(shape), pc.reshape(shape)
    missing = np.flatnonzero(~np.isfinite(z))
    for level in starts:
        # NaN where the start position falls: start again from other elevations, the same for
        # every pixel (so the result does not depend on the chunking)
        if missing.size == 0:
            break
        z[missing] = moved(float(level), missing)[0]
        missing = missing[~np.isfinite(z[missing])]
    # Each pixel iterates until its own change is below tol (so its value does not depend on its
    # neighbours in the chunk); a pixel whose source is NaN somewhere on its way stays NaN: never
    # a value read at a position that does not belong to its own elevation.
    active = np.flatnonzero(np.isfinite(z))
    change = np.zeros(0)
    for _ in range(MAX_FIXED_POINT_ITERATIONS):
        new, pr[active], pc[active] = moved(z[active], active)
        change = np.abs(new - z[active])
        z[active] = new
        unsettled = np.isfinite(change) & (change > tol * np.maximum(np.abs(new), 1.0))
        active, change = active[unsettled], change[unsettled]
        if active.size == 0:
            break
    far_off = change > 1e3 * tol * np.maximum(np.abs(z[active]), 1.0)
    z[active[far_off]] = np.nan
    return z.reshape(shape), pr.reshape(shape), pc.reshape(shape)
