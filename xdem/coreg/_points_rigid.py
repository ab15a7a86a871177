"""The rigid methods on points (:class:`~xdem.coreg.ICP`, :class:`~xdem.coreg.LZD`,
:class:`~xdem.coreg.DhMinimize`), either side being the points.

Each method moves the side it naturally moves, and the result is inverted when that side is
the reference: the fitted transform always maps the to-be-aligned side onto the reference, in
the DEM's CRS (the frame, ``crs_``; docs/rigid.md "transform convention").

- ICP moves a point cloud onto a surface: the points are moved onto the DEM (the DEM's
  windows are cut around the moved points, as the reference's are on the DEM route). The fit
  of ``(dem, points)`` is that transform; the fit of ``(points, dem)`` its inverse.
- LZD evaluates a moved surface above fixed positions: the DEM is moved onto the points (the
  points' positions are the sampled positions, their elevations the reference), linearised
  with the gradient of the moved DEM at the points, refreshed at every step (central
  differences of the moved surface, half a pixel apart: at the solution it is the
  reference's gradient, the linearisation of the DEM route). The fit of ``(points, dem)`` is
  that transform; the fit of ``(dem, points)`` its inverse (the gradient used is then the
  reference DEM's at the points).
- DhMinimize: the DEM moved by a horizontal shift is interpolated at the points
  (:class:`xdem.points.PointSampler`, with ``resampling``) and the spread of ``dh`` minimised;
  a translation, negated for ``(dem, points)``.

Outliers: each method keeps its own robust step (ICP's ``rejection_factor``, LZD's
``outlier_factor``, DhMinimize's NMAD spread). On top, as for the other methods on points,
points whose residual at the first result is more than ``outlier_nmad`` NMADs from the median
are rejected (:func:`xdem.kernels.robust.nmad_inliers`) and the fit repeated on the rest from
that result; the counts are ``n_points_``, ``n_outside_``, ``n_outliers_``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from xdem.coreg._data import PointFitData
from xdem.coreg._points_fit import _no_points, _set_counts, draw_points
from xdem.coreg._rigid_sample import RigidSample, RigidSampler
from xdem.io.grid import get_resolution, get_transform, grid_shape, shift_in_pixels, signed_resolution
from xdem.kernels.interp import FIT_INTERPOLATION
from xdem.kernels.rigid import rigid_matrix, rotation_matrix, rotations_of, split_matrix
from xdem.kernels.robust import nmad_inliers
from xdem.points.bucket import PointSampler, pixel_positions
from xdem.sampling import Sample

if TYPE_CHECKING:  # the estimators import this module lazily
    from xdem.coreg.dhminimize import DhMinimize
    from xdem.coreg.icp import ICP
    from xdem.coreg.lzd import LZD

__all__ = ["fit_icp_points", "fit_lzd_points", "fit_dhminimize_points", "moved_gradient"]

#: LZD on points takes the moved DEM's gradient again when the transform has moved a point by
#: more than this (pixels) since it was last taken.
REGRADIENT_PX = 0.05
#: DhMinimize on points searches within this many pixels of its start (``initial_shift``); an
#: optimum at the edge of that box starts a new search around it.
SEARCH_PX = 10.0


def _centre(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    fin = np.isfinite(z)
    return np.array([np.mean(x[fin]), np.mean(y[fin]), np.mean(z[fin])]) if fin.any() else np.zeros(3)


def _inverse_history(history: list[list[float]], centre: np.ndarray) -> list[list[float]]:
    """``[rx, ry, rz, sx, sy, sz]`` summaries of the inverses of the summarised transforms."""
    out = []
    for h in history:
        m = np.linalg.inv(rigid_matrix(rotation_matrix(*h[:3]), np.asarray(h[3:], dtype=np.float64), centre))
        r, t = split_matrix(m, centre)
        out.append([*rotations_of(r), *(float(v) for v in t)])
    return out


# --- ICP ----------------------------------------------------------------------------------------
def fit_icp_points(est: ICP, data: PointFitData) -> None:
    """:class:`~xdem.coreg.ICP` on points: the points moved onto the DEM's surface (the module
    notes), refitted without the points whose vertical residual is an outlier, inverted for
    reference points."""
    from xdem.coreg.icp import _Reference
    from xdem.kernels.icp import move_points

    sx, sy, sz = est._check_params()
    pts = draw_points(data.points, est.subsample, est.random_state)
    points = np.column_stack([pts.x, pts.y, pts.z])
    keep = np.isfinite(pts.z)
    centre = _centre(pts.x, pts.y, pts.z)
    dem = data.dem
    pixel, shape = min(get_resolution(dem)), grid_shape(dem)
    reference = _Reference(data.values, get_transform(dem), centre, shape[1])
    sign = -1.0 if data.points_are_ref else 1.0  # initial_shift is that of the result: points to align move by it
    shift = sign * np.array([sx, sy, 0.0 if sz is None else sz])
    dist = np.full(pts.count, np.nan)
    if int(keep.sum()) < est._min_points:
        raise _no_points("ICP", data, pts.count, int(keep.sum()), est._min_points)
    est._solve(reference, points[keep], shift, sz is None, pixel=pixel, shape=shape)
    total = est.to_matrix()
    # residuals judged vertically, in each point's own window (a blunder far above the surface
    # matches nothing in 3-D, but is still over valid DEM pixels: an outlier, not outside)
    dist[keep] = reference.vertical_offsets(move_points(points[keep], est.rotation(),
                                                        np.asarray(est.to_translations()), centre))
    fin = np.isfinite(dist)
    ok = fin if data.outlier_nmad is None else nmad_inliers(dist, k=data.outlier_nmad)
    iterations = int(est.n_iterations_)
    if int((fin & ~ok).sum()):
        sub = ok[keep]  # the windows follow the moved points: reuse those of the inliers
        again = _Reference(data.values, get_transform(dem), centre, shape[1])
        again.use(reference.windows[sub], reference.rows[sub], reference.cols[sub])
        moved = move_points(points[ok], est.rotation(), np.asarray(est.to_translations()), centre)
        est._solve(again, moved, np.zeros(3), False, pixel=pixel, shape=shape)
        total = est.to_matrix() @ total
        iterations += int(est.n_iterations_)
        reference.reads += again.reads
    if data.points_are_ref:
        total = np.linalg.inv(total)
    est._set_transform(*split_matrix(total, centre), centre)
    est.n_iterations_ = iterations
    est.passes_ = int(reference.reads)
    _set_counts(est, data, pts, fin, ok)


# --- LZD ----------------------------------------------------------------------------------------
def moved_gradient(sampler: RigidSampler, matrix: np.ndarray, guess: np.ndarray, step: float
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Gradient ``(dz/dx, dz/dy)`` of the surface moved by ``matrix`` at the sampler's
    positions: central differences ``step`` apart (the surface moved by ``-e`` after
    ``matrix`` shows at ``q`` what the moved surface has at ``q + e``).

    Examples
    --------
    The plane ``z = 2 x + 0.5 y`` at a point between pixel centres:

    >>> import xarray as xr
    >>> z = np.add.outer(-0.5 * (np.arange(20.0) + 0.5), 2.0 * (np.arange(20.0) + 0.5))
    >>> dem = xr.DataArray(z, dims=("y", "x"), coords={"y": -np.arange(20) - 0.5, "x": np.arange(20) + 0.5})
    >>> s = RigidSampler(dem, np.array([10]), np.array([7]), interpolation="lagrange", half=2,
    ...                  centre=np.zeros(3), x=np.array([7.3]), y=np.array([-10.6]))
    >>> gx, gy = moved_gradient(s, np.eye(4), np.array([9.3]), 0.5)
    >>> gx.round(9).tolist(), gy.round(9).tolist(), s(np.eye(4), np.array([9.0])).round(9).tolist()
    ([2.0], [0.5], [9.3])
    """

    def at(dx: float, dy: float) -> np.ndarray:
        t = np.eye(4)
        t[0, 3], t[1, 3] = -dx, -dy
        return sampler(t @ matrix, guess)

    return (at(step, 0.0) - at(-step, 0.0)) / (2 * step), (at(0.0, step) - at(0.0, -step)) / (2 * step)


def fit_lzd_points(est: LZD, data: PointFitData) -> None:
    """:class:`~xdem.coreg.LZD` on points: the DEM moved onto the points (module notes), the
    steps of the DEM route on them with the moved DEM's gradient, refitted without the
    outlying residuals, inverted for points to align."""
    from xdem.coreg.lzd import _ALL, _TRANSLATION, _Run

    shift = est._check_params()
    pts = draw_points(data.points, est.subsample, est.random_state)
    dem = data.dem.copy(data=data.values)  # NaN outside the inlier mask
    prow, pcol = pixel_positions(dem, pts.x, pts.y)
    centre = _centre(pts.x, pts.y, pts.z)
    sampler = RigidSampler(dem, np.floor(np.nan_to_num(prow)).astype(np.int64),
                           np.floor(np.nan_to_num(pcol)).astype(np.int64), interpolation=FIT_INTERPOLATION,
                           half=est._half, centre=centre, x=pts.x, y=pts.y)
    m0 = np.eye(4)
    m0[:3, 3] = np.asarray(shift) * (1.0 if data.points_are_ref else -1.0)  # the DEM moves: reversed for (dem, points)
    pixel = float(np.mean(get_resolution(dem)))
    step = 0.5 * pixel
    ref = np.asarray(pts.z, dtype=np.float64).copy()
    gx, gy = moved_gradient(sampler, m0, ref, step)
    ss = RigidSample(sample=Sample(n_valid=pts.count), x=pts.x, y=pts.y, ref=ref, gx=gx, gy=gy, centre=centre,
                     sampler=sampler)
    fin = np.isfinite(sampler(m0, ref) - ref) & np.isfinite(gx) & np.isfinite(gy)
    if int(fin.sum()) < est._min_points:
        raise _no_points("LZD", data, pts.count, int(fin.sum()), est._min_points)
    unknowns = est._unknowns(ss)

    at = [m0]  # the transform the gradient was last taken at
    p = np.vstack([pts.x - centre[0], pts.y - centre[1], pts.z - centre[2], np.ones(pts.count)])
    p[:3][:, ~np.isfinite(pts.z)] = 0.0

    class _PointRun(_Run):
        def residuals(self, matrix: np.ndarray) -> np.ndarray:
            r = super().residuals(matrix)
            # the gradient follows the moved DEM; taken again once the transform has moved some
            # point by more than REGRADIENT_PX since (near the solution the steps are far smaller)
            c = np.eye(4)
            c[:3, 3] = centre
            delta = ((matrix - at[0]) @ c) @ p
            if float(np.sqrt(np.max(np.sum(delta[:3] ** 2, axis=0)))) > REGRADIENT_PX * pixel:
                self.ss.gx, self.ss.gy = moved_gradient(self.ss.sampler, matrix, self._z, step)
                at[0] = matrix.copy()
            return r

    run = _PointRun(est, ss, m0, unknowns, pixel=pixel, shape=grid_shape(dem), prior=np.eye(4))
    matrix = run.iterate()
    history, iterations = list(run.history), run.iterations
    residual = run.residuals(matrix)
    fin = np.isfinite(residual)
    ok = fin if data.outlier_nmad is None else nmad_inliers(residual, k=data.outlier_nmad)
    if int((fin & ~ok).sum()):
        ss.ref = np.where(ok, ss.ref, np.nan)
        run = _PointRun(est, ss, matrix, unknowns, pixel=pixel, shape=grid_shape(dem), prior=np.eye(4))
        matrix = run.iterate()
        history += run.history
        iterations += run.iterations
    if not data.points_are_ref:
        matrix = np.linalg.inv(matrix)
        history = _inverse_history(history, centre)
    rotation, translation = split_matrix(matrix, centre)
    est._set_transform(np.eye(3) if est.only_translation else rotation, translation, centre)
    est.n_iterations_ = int(iterations)
    est.converged_ = run.converged
    est.horizontal_constrained_ = unknowns in (_ALL, _TRANSLATION)
    est.count_ = run.count
    est.residual_nmad_ = run.final_spread
    est.history_ = history
    est.passes_ = int(sampler.reads)
    _set_counts(est, data, pts, fin, ok)


# --- DhMinimize ---------------------------------------------------------------------------------
def fit_dhminimize_points(est: DhMinimize, data: PointFitData) -> None:
    """:class:`~xdem.coreg.DhMinimize` on points: the horizontal shift of the DEM minimising
    ``spread_func`` of ``dh`` at the points (searched within :data:`SEARCH_PX` pixels of the
    start, again around the optimum while it is at the edge of the box; the windows cut again
    when the shift leaves them), the vertical shift minus the median ``dh`` of the inliers
    there; negated for points to align."""
    import warnings

    from xdem.coreg._iterate import DIVERGENCE_FRACTION, divergence_message
    from xdem.coreg.dhminimize import _EDGE_PX
    from xdem.errors import ConvergenceError, ConvergenceWarning

    initial = est._check_params()
    pts = draw_points(data.points, est.subsample, est.random_state)
    sign = 1.0 if data.points_are_ref else -1.0  # the DEM is moved: (dem, points) is the reverse fit
    start = (0.0, 0.0) if initial is None else (sign * initial[0], sign * initial[1])
    sampler = PointSampler(data.dem, pts, resampling=est.resampling, half=est._half, data=data.values)
    assert sampler is not None
    dh0 = sampler(*start) - pts.z
    assert sampler.windows is not None
    use = np.isfinite(dh0) & np.isfinite(sampler.windows).all(axis=(1, 2))  # one set whatever the shift
    if int(use.sum()) < est._min_points:
        raise _no_points("DhMinimize", data, pts.count, int(use.sum()), est._min_points)
    res_x, res_y = signed_resolution(data.dem)
    z = np.where(use, pts.z, np.nan)  # the points outside `use` never enter the spread

    def shift_of(p: np.ndarray) -> tuple[float, float]:
        return float(-p[1] * res_x), float(p[0] * res_y)

    def objective(p: np.ndarray) -> float:
        dh = sampler(*shift_of(p)) - z
        return float(est.spread_func(dh[np.isfinite(dh)]))

    pos0 = np.array(shift_in_pixels(data.dem, *start), dtype=np.float64)
    pos, iterations, converged = pos0, 0, False
    limit = DIVERGENCE_FRACTION * max(grid_shape(data.dem))
    while True:  # a search box around pos; moved on when the optimum is at its edge
        lo, hi = pos - SEARCH_PX, pos + SEARCH_PX
        pos, nit, success = est._minimize(objective, pos, lo, hi, int(est.max_iterations) - iterations)
        iterations += nit
        if float(np.hypot(*(pos - pos0))) > limit:
            raise ConvergenceError(divergence_message("DhMinimize", *shift_of(pos), iterations, start))
        if not (np.any(pos - lo < _EDGE_PX) or np.any(hi - pos < _EDGE_PX)):
            converged = success
            break
        if iterations >= int(est.max_iterations):
            break
    if not converged:
        warnings.warn(f"DhMinimize did not converge in {iterations} iterations (max_iterations={est.max_iterations}, "
                      f"tolerance {est.tolerance} px); raise max_iterations, or start closer with initial_shift",
                      ConvergenceWarning, stacklevel=5)
    sx, sy = shift_of(pos)
    dh = sampler(sx, sy) - pts.z
    fin = np.isfinite(dh)
    ok = fin if data.outlier_nmad is None else nmad_inliers(dh, k=data.outlier_nmad)
    sz = -float(np.median(dh[ok]))
    centre = _centre(pts.x, pts.y, pts.z)
    est._set_transform(np.eye(3), (sign * sx, sign * sy, sign * sz), centre)
    est.spread_ = float(est.spread_func(dh[use & fin]))
    est.n_iterations_ = int(iterations)
    est.converged_ = bool(converged)
    est.count_ = int(ok.sum())
    est.passes_ = int(sampler.reads)
    _set_counts(est, data, pts, fin, ok)
