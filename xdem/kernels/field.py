"""A smooth displacement field through scattered estimates: a (smoothing) thin-plate spline.

Given values ``v_i`` (here: the translations ``dx, dy, dz`` fitted on tiles) at points ``c_i``,
the field is::

    f(q) = sum_i w_i phi(|q - c_i|) + sum_k a_k p_k(q),     phi(r) = r^2 log r,

with ``p_k`` the monomials of total degree ``<= degree`` (``1, u, v, u^2, u v, v^2``) and
``(w, a)`` the solution of ``[[K + diag(lambda_i), P], [P^T, 0]] [w; a] = [v; 0]``
(Duchon 1977; Wahba 1990). ``lambda_i = 0`` interpolates the values exactly; larger values
trade fidelity at ``c_i`` for less bending (``lambda -> inf``: the least-squares polynomial).
Far from the points the kernel part grows only logarithmically and the polynomial part dominates, so the field
extrapolates like its polynomial (linearly for ``degree=1``, quadratically for ``degree=2``)
instead of stopping flat at the outermost points.

Coordinates are normalised ``u = (x - centre_x) / scale`` (likewise ``v``) so that the
smoothing is independent of the CRS units. A monomial the points cannot determine (collinear
points, too few points) is left out, so any number of points >= 1 gives a field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

__all__ = ["ThinPlateField", "fit_thin_plate", "monomials", "neighbour_outliers", "compose"]



def monomials(degree: int) -> list[tuple[int, int]]:
    """Exponents ``(i, j)`` of ``u^i v^j`` with ``i + j <= degree``, by degree.

    Examples
    --------
    >>> monomials(1)
    [(0, 0), (1, 0), (0, 1)]
    """
    return [(d - j, j) for d in range(int(degree) + 1) for j in range(d + 1)]


def _design(u: np.ndarray, v: np.ndarray, terms: list[tuple[int, int]]) -> np.ndarray:
    return np.stack([u**i * v**j for i, j in terms], axis=-1) if terms else np.zeros(u.shape + (0,))


def _phi(r2: np.ndarray) -> np.ndarray:
    """``r^2 log r`` from ``r^2`` (0 at 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray = 0.5 * r2 * np.log(r2)
    out[r2 == 0.0] = 0.0
    return out


@numba.njit(cache=True, nogil=True)
def _add_kernel_sums(u: np.ndarray, v: np.ndarray, c: np.ndarray, w: np.ndarray,
                     out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``out[p, k] += sum_i w[i, k] phi(|q_p - c_i|)``, the centres summed in order for each point
    (a point's value does not depend on the other points evaluated with it); no temporaries."""
    m = w.shape[1]
    acc = np.empty(m)
    for p in range(u.size):
        acc[:] = 0.0
        for i in range(c.shape[0]):
            du = u[p] - c[i, 0]
            dv = v[p] - c[i, 1]
            r2 = du * du + dv * dv
            if r2 == 0.0:
                continue
            phi = 0.5 * r2 * math.log(r2)
            for k in range(m):
                acc[k] += phi * w[i, k]
        for k in range(m):
            out[p, k] += acc[k]


@dataclass(frozen=True)
class ThinPlateField:
    """A fitted field of ``n_out`` components (e.g. ``dx, dy, dz``): see the module notes.

    ``centres`` are the normalised points ``(n, 2)``, ``weights`` the kernel coefficients
    ``(n, n_out)``, ``terms`` the monomials kept, ``coefs`` their coefficients
    ``(n_terms, n_out)``; ``centre``/``scale`` the normalisation of coordinates.
    """

    centre: tuple[float, float]
    scale: float
    centres: tuple[tuple[float, ...], ...]
    weights: tuple[tuple[float, ...], ...]
    terms: tuple[tuple[int, int], ...]
    coefs: tuple[tuple[float, ...], ...]

    def points(self) -> tuple[np.ndarray, np.ndarray]:
        """The kernels' centres in the coordinates the field was fitted in (``x, y``)."""
        c = np.asarray(self.centres, dtype=np.float64).reshape(-1, 2)
        return self.centre[0] + self.scale * c[:, 0], self.centre[1] + self.scale * c[:, 1]

    def __call__(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The field at coordinates ``x, y`` (broadcastable): float64 of shape ``(*shape, n_out)``."""
        xb, yb = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
        u = ((xb - self.centre[0]) / self.scale).ravel()
        v = ((yb - self.centre[1]) / self.scale).ravel()
        c = np.asarray(self.centres, dtype=np.float64).reshape(-1, 2)
        w = np.asarray(self.weights, dtype=np.float64).reshape(c.shape[0], -1)
        a = np.asarray(self.coefs, dtype=np.float64).reshape(len(self.terms), -1)
        n_out = max(w.shape[1], a.shape[1])
        out = np.zeros((u.size, n_out))
        for k, (i, j) in enumerate(self.terms):
            out += (u**i * v**j)[:, None] * a[k]
        if c.shape[0]:  # a compiled loop per point (no (points x centres) temporaries)
            _add_kernel_sums(u, v, c, np.ascontiguousarray(w), out)
        return out.reshape(xb.shape + (n_out,))


def compose(fields: tuple[ThinPlateField, ...] | list[ThinPlateField], x: np.ndarray,
            y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fields of displacements ``(d_x, d_y, d_z)`` applied in order, each as
    ``out_k(q) = out_{k-1}(q - d_xy(q)) + d_z(q)``: at output positions ``x, y``, the position
    read in the first input and the total vertical change (the last field is evaluated at the
    output position, each earlier one where the later ones read).

    Examples
    --------
    >>> f = fit_thin_plate(np.zeros(1), np.zeros(1), np.array([[1.0, 2.0, 0.5]]), centre=(0.0, 0.0), scale=1.0)
    >>> [float(a[0]) for a in compose([f, f], np.array([10.0]), np.array([10.0]))]
    [8.0, 6.0, 1.0]
    """
    x, y = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
    vz = np.zeros(x.shape)
    for f in reversed(tuple(fields)):
        d = f(x, y)
        x, y, vz = x - d[..., 0], y - d[..., 1], vz + d[..., 2]
    return x, y, vz


#: Smallest singular value, relative to the largest, of the design with unit-norm columns for a
#: monomial to count as determined by the points: 4 tile centroids on two columns whose x differ by
#: a few centimetres do not determine x^2 (it would be nearly the constant, with huge opposite
#: coefficients that explode away from the points).
CONDITION_FLOOR = 0.05


def determined_terms(u: np.ndarray, v: np.ndarray, degree: int) -> list[tuple[int, int]]:
    """The monomials of :func:`monomials` ``(degree)`` that the points ``u, v`` determine well,
    in order: each is kept if the design of the kept ones plus it stays well conditioned
    (:data:`CONDITION_FLOOR`) and leaves at least one point more than terms (beyond the
    constant), so that no polynomial is fitted exactly through noise.

    A 2 x 2 grid of tiles whose centres moved a little (tiles partly masked) once kept ``u^2``,
    determined by those small moves only: its coefficient came from noise and the field
    extrapolated metres of error to the DEM's edges. Now such a grid gives a plane.

    Examples
    --------
    >>> u = np.array([-0.5, 0.5, -0.5001, 0.49]); v = np.array([-0.5, -0.52, 0.5, 0.5])
    >>> determined_terms(u, v, 2)  # four points of two columns: a plane, not x^2 (nor x y)
    [(0, 0), (1, 0), (0, 1)]
    >>> g = np.linspace(-1, 1, 3); uu, vv = (a.ravel() for a in np.meshgrid(g, g))
    >>> determined_terms(uu, vv, 2)  # a 3 x 3 grid: the whole quadratic
    [(0, 0), (1, 0), (0, 1), (2, 0), (1, 1), (0, 2)]
    """
    terms: list[tuple[int, int]] = []
    for t in monomials(degree):
        trial = terms + [t]
        if len(trial) > 1 and len(trial) >= len(u):
            break
        d = _design(u, v, trial)
        norms = np.linalg.norm(d, axis=0)
        if np.any(norms == 0):
            continue
        sv = np.linalg.svd(d / norms, compute_uv=False)
        if len(sv) == len(trial) and sv[-1] > CONDITION_FLOOR * sv[0]:
            terms = trial
    return terms


def fit_thin_plate(
    x: np.ndarray, y: np.ndarray, values: np.ndarray, *, centre: tuple[float, float], scale: float,
    smoothing: float | np.ndarray = 0.0, degree: int = 1,
) -> ThinPlateField:
    """Fit a :class:`ThinPlateField` to ``values`` ``(n, n_out)`` at points ``x, y`` ``(n,)``.

    Parameters
    ----------
    x, y
        Point coordinates (any CRS units).
    values
        ``(n,)`` or ``(n, n_out)`` values at the points.
    centre, scale
        Normalisation of the coordinates (smoothing is expressed in these units).
    smoothing
        ``lambda_i`` (one value, or one per point: ``smoothing / weight_i`` gives a weighted fit).
    degree
        Degree of the polynomial part (0, 1 or 2); monomials the points cannot determine are dropped.

    Examples
    --------
    >>> x = np.array([0.0, 1.0, 0.0, 1.0, 0.5]); y = np.array([0.0, 0.0, 1.0, 1.0, 0.5])
    >>> f = fit_thin_plate(x, y, 2.0 + 3.0 * x - y, centre=(0.5, 0.5), scale=1.0)
    >>> round(float(f(np.array([3.0]), np.array([-1.0]))[0, 0]), 9)  # a plane: exact, even far away
    12.0
    """
    vals = np.asarray(values, dtype=np.float64)
    vals = vals[:, None] if vals.ndim == 1 else vals
    u = (np.asarray(x, dtype=np.float64) - centre[0]) / scale
    v = (np.asarray(y, dtype=np.float64) - centre[1]) / scale
    n = u.size
    if n == 0:
        raise ValueError("a field needs at least one point")
    terms = determined_terms(u, v, degree)
    p = _design(u, v, terms)
    k = _phi((u[:, None] - u[None, :]) ** 2 + (v[:, None] - v[None, :]) ** 2)
    k[np.diag_indices(n)] += np.broadcast_to(np.asarray(smoothing, dtype=np.float64), (n,))
    m = len(terms)
    lhs = np.block([[k, p], [p.T, np.zeros((m, m))]])
    rhs = np.vstack([vals, np.zeros((m, vals.shape[1]))])
    try:
        sol = np.linalg.solve(lhs, rhs)
    except np.linalg.LinAlgError:  # coincident points without smoothing: the least-squares solution
        sol = np.linalg.lstsq(lhs, rhs, rcond=None)[0]
    def as_tuple(arr: np.ndarray) -> tuple[tuple[float, ...], ...]:
        return tuple(tuple(float(z) for z in row) for row in arr)

    return ThinPlateField(centre=(float(centre[0]), float(centre[1])), scale=float(scale),
                          centres=as_tuple(np.column_stack([u, v])), weights=as_tuple(sol[:n]),
                          terms=tuple(terms), coefs=as_tuple(sol[n:]))


def _trend(u: np.ndarray, v: np.ndarray, values: np.ndarray, keep: np.ndarray, degree: int) -> np.ndarray:
    """Least-squares polynomial (the monomials the kept points determine) evaluated at every point."""
    terms = determined_terms(u[keep], v[keep], degree)
    coefs = np.linalg.lstsq(_design(u[keep], v[keep], terms), values[keep], rcond=None)[0]
    return np.asarray(_design(u, v, terms) @ coefs)


def neighbour_outliers(
    u: np.ndarray, v: np.ndarray, values: np.ndarray, *, threshold: float, floor: np.ndarray,
    radius: float = 1.5, degree: int = 2, min_points: int = 4,
) -> np.ndarray:
    """Points whose values disagree with their neighbours', rejected one at a time.

    Each round: a least-squares polynomial of ``degree`` through the kept points is removed
    (the large-scale trend), the *anomaly* of a point is its residual minus the median residual
    of the kept points within ``radius`` (in the units of ``u, v``; the median of all kept
    points for an isolated one), and the point whose anomaly is largest against
    ``threshold * max(NMAD of the kept anomalies, floor)`` (component by component) is
    rejected if it exceeds it. Rejecting the worst point only, then recomputing, keeps a gross
    outlier from dragging its neighbours out with it. Stops when nothing exceeds or fewer than
    ``min_points`` points are kept.

    Parameters
    ----------
    u, v
        ``(n,)`` positions (e.g. in tile spacings).
    values
        ``(n, k)`` values (e.g. ``dx, dy, dz``).
    threshold
        Multiple of the robust spread beyond which a point is an outlier.
    floor
        ``(k,)`` smallest spread used per component (so that near-identical values do not make
        any tiny difference an outlier).

    Returns
    -------
    numpy.ndarray
        Boolean ``(n,)``: True for the rejected points.

    Examples
    --------
    >>> g = np.arange(4.0); u, v = [a.ravel() for a in np.meshgrid(g, g)]
    >>> vals = (0.5 * u + 0.01 * np.sin(7 * u * v))[:, None]; vals[5] += 3.0
    >>> np.flatnonzero(neighbour_outliers(u, v, vals, threshold=4.0, floor=np.array([0.01]))).tolist()
    [5]
    """
    vals = np.asarray(values, dtype=np.float64)
    vals = vals[:, None] if vals.ndim == 1 else vals
    n = vals.shape[0]
    bad = np.zeros(n, dtype=bool)
    near = ((u[:, None] - u[None, :]) ** 2 + (v[:, None] - v[None, :]) ** 2 <= radius**2) & ~np.eye(n, dtype=bool)
    while int((~bad).sum()) >= min_points:
        keep = ~bad
        resid = vals - _trend(u, v, vals, keep, degree)
        anomaly = np.empty_like(resid)
        for i in range(n):
            nb = near[i] & keep
            anomaly[i] = resid[i] - np.median(resid[nb] if nb.any() else resid[keep & (np.arange(n) != i)], axis=0)
        med = np.median(anomaly[keep], axis=0)
        spread = np.maximum(1.4826 * np.median(np.abs(anomaly[keep] - med), axis=0), floor)
        score = np.max(np.abs(anomaly) / (threshold * spread), axis=1)
        score[bad] = -np.inf
        worst = int(np.argmax(score))
        if not score[worst] > 1.0:
            break
        bad[worst] = True
    return bad
