"""The point route of ``fit``: the points ARE the sample (DESIGN.md, seam 1).

The DEM is evaluated at the points out of core (:mod:`xdem.points.bucket`: the points are
bucketed by chunk in one pass, one task per chunk holding points), with the fits'
interpolation (:data:`xdem.kernels.interp.FIT_INTERPOLATION`, 4-point Lagrange: little phase
error between pixels) at the points' exact, fractional positions, the DEM's values being at
pixel centres. The estimators' kernels then run unchanged on those arrays.

Elevation differences are ``dh = tba - ref`` as everywhere. Whichever side the points are on,
the DEM is the one moved while fitting (its windows are in memory, the points are exact); a
fit of ``(dem, points)`` is that of ``(points, dem)`` reversed, which for a translation is
its negative.

Outliers (clouds, blunders): after a first fit, points whose ``dh`` is more than
``outlier_nmad`` NMADs from the median are rejected, iterated
(:func:`xdem.kernels.robust.nmad_inliers`), and the fit is repeated on the rest from the
first result. The counts are learned attributes: ``n_points_`` (read), ``n_outside_``
(drawn points with no valid DEM value: outside the DEM, on nodata or outside the inlier mask),
``n_outliers_`` (rejected).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from xdem.coreg._data import PointFitData
from xdem.coreg._iterate import check_divergence_params
from xdem.coreg._windows import terrain_at_windows
from xdem.errors import InputError, NotEnoughDataError
from xdem.io.grid import get_resolution, grid_shape, signed_resolution
from xdem.kernels.interp import FIT_INTERPOLATION
from xdem.kernels.robust import nmad_inliers
from xdem.points.bucket import PointSampler, dem_at_points, pixel_positions
from xdem.points.read import PointSet
from xdem.sampling import DEFAULT_SEED, resolve_count

if TYPE_CHECKING:  # the estimators import this module lazily; it needs only their methods
    from xdem.coreg.affine import NuthKaab, VerticalShift
    from xdem.coreg.biascorr import BiasCorr
    from xdem.coreg.deramp import Deramp
    from xdem.coreg.nuthkaab_deramp import NuthKaabDeramp

__all__ = ["draw_points", "dh_at_points", "fit_vertical_shift_points", "fit_nuth_kaab_points",
           "fit_nuth_kaab_deramp_points", "fit_deramp_points",
           "fit_biascorr_points"]


def draw_points(points: PointSet, subsample: float | int, random_state: int | None) -> PointSet:
    """A reproducible subsample of the points (all of them for ``subsample`` 1 or a count
    at least their number); the drawn points keep their input order."""
    n = points.count
    count = resolve_count(subsample, n)
    if count >= n:
        return points
    rng = np.random.default_rng(DEFAULT_SEED if random_state is None else int(random_state))
    return points.take(np.sort(rng.choice(n, size=count, replace=False)))


def _no_points(what: str, data: PointFitData, drawn: int, found: int, need: int) -> NotEnoughDataError:
    return NotEnoughDataError(
        f"{what}: only {found} of {drawn} points fall on valid DEM pixels (need {need}); check that the points "
        f"overlap the DEM (points CRS {data.points.source_crs}, DEM CRS {data.dem.rio.crs}), its nodata value and "
        "the inlier mask"
    )


def dh_at_points(data: PointFitData, subsample: float | int, random_state: int | None, *, what: str,
                 need: int) -> tuple[PointSet, np.ndarray, np.ndarray]:
    """The drawn points, ``dh = tba - ref`` there (one pass over the chunks holding points)
    and where it is finite; fewer than ``need`` finite values is a clear error."""
    pts = draw_points(data.points, subsample, random_state)
    prow, pcol = pixel_positions(data.dem, pts.x, pts.y)
    values, _, _ = dem_at_points(data.values, prow, pcol, resampling=FIT_INTERPOLATION)
    dh = values - pts.z if data.points_are_ref else pts.z - values
    fin = np.isfinite(dh)
    if int(fin.sum()) < need:
        raise _no_points(what, data, pts.count, int(fin.sum()), need)
    return pts, dh, fin


def fit_vertical_shift_points(est: VerticalShift, data: PointFitData) -> None:
    """:class:`~xdem.coreg.VerticalShift` on points: ``vshift_reduc_func`` of the inliers' ``dh``."""
    pts, dh, fin = dh_at_points(data, est.subsample, est.random_state, what="VerticalShift", need=1)
    ok = fin if data.outlier_nmad is None else nmad_inliers(dh, k=data.outlier_nmad)
    est.shift_x_ = 0.0
    est.shift_y_ = 0.0
    est.shift_z_ = -float(est.vshift_reduc_func(dh[ok]))
    est.count_ = int(ok.sum())
    _set_counts(est, data, pts, fin, ok)


def _set_counts(est: object, data: PointFitData, pts: PointSet, fin: np.ndarray, ok: np.ndarray) -> None:
    vars(est).update(n_points_=int(data.points.count), n_outside_=int(pts.count - fin.sum()),
                     n_outliers_=int(fin.sum() - ok.sum()))


def _shift_sample(est: NuthKaab | NuthKaabDeramp, data: PointFitData, what: str
                  ) -> tuple[PointSet, PointSampler, np.ndarray, np.ndarray, tuple[float, float], np.ndarray]:
    """The common start of the shift estimators on points: the drawn points, the sampler of
    the DEM with its windows cut at the start (one pass), the DEM's slope and aspect there, the
    start (for the DEM: negated when the points are the ones to align) and where dh is finite."""
    pts = draw_points(data.points, est.subsample, est.random_state)
    sampler = PointSampler(data.dem, pts, resampling=FIT_INTERPOLATION, half=est._half, data=data.values)
    sign = 1.0 if data.points_are_ref else -1.0  # the DEM is moved: (dem, points) is the reverse fit
    sx0, sy0 = check_divergence_params(initial_shift=est.initial_shift, on_divergence=est.on_divergence)
    start = (sign * sx0, sign * sy0)
    fin = np.isfinite(sampler(*start) - pts.z)
    if int(fin.sum()) < est._min_points:
        raise _no_points(what, data, pts.count, int(fin.sum()), est._min_points)
    assert sampler.windows is not None
    res_x, res_y = signed_resolution(data.dem)
    slope, aspect = terrain_at_windows(sampler.windows, est._half, res_x=res_x, res_y=res_y,
                                       method=est.terrain_method)
    return pts, sampler, slope, aspect, start, fin


def _refit_without_outliers(est: NuthKaab | NuthKaabDeramp, data: PointFitData, residual: np.ndarray,
                            refit: Callable[[np.ndarray, tuple[float, float]], None]) -> tuple[np.ndarray, np.ndarray]:
    """Reject the outlying residuals (iterated, :func:`~xdem.kernels.robust.nmad_inliers`) and
    refit without them from the first result; returns (finite, inliers)."""
    fin = np.isfinite(residual)
    if data.outlier_nmad is None:
        return fin, fin
    ok = nmad_inliers(residual, k=data.outlier_nmad)
    if int((fin & ~ok).sum()):
        history, iterations = list(est.history_), int(est.n_iterations_)
        refit(ok, (float(est.shift_x_), float(est.shift_y_)))
        est.history_ = history + list(est.history_)
        est.n_iterations_ = iterations + int(est.n_iterations_)
    return fin, ok


def fit_nuth_kaab_points(est: NuthKaab, data: PointFitData) -> None:
    """:class:`~xdem.coreg.NuthKaab` on points: the DEM's windows cut at the points (one
    pass), its slope and aspect there, the iterations of the DEM route on them, then a second
    run without the outliers, from the first result."""
    pts, sampler, slope, aspect, start, fin = _shift_sample(est, data, "Nuth & Kääb")
    resolution, shape = get_resolution(data.dem), grid_shape(data.dem)
    est._fit_on_sample(pts.z, slope, aspect, sampler, start=start, resolution=resolution, shape=shape)

    def refit(ok: np.ndarray, first: tuple[float, float]) -> None:
        est._fit_on_sample(np.where(ok, pts.z, np.nan), slope, aspect, sampler, start=first,
                           resolution=resolution, shape=shape)

    fin, ok = _refit_without_outliers(est, data, sampler(est.shift_x_, est.shift_y_) - pts.z, refit)
    if not data.points_are_ref:
        est.shift_x_, est.shift_y_, est.shift_z_ = -est.shift_x_, -est.shift_y_, -est.shift_z_
        est.history_ = [[-float(a), -float(b)] for a, b in est.history_]
    est.passes_ = int(sampler.reads)
    _set_counts(est, data, pts, fin, ok)


def fit_nuth_kaab_deramp_points(est: NuthKaabDeramp, data: PointFitData) -> None:
    """:class:`~xdem.coreg.NuthKaabDeramp` on points: as :func:`fit_nuth_kaab_points`, the
    ramp a polynomial of the points' coordinates. With points to align, the fit of the DEM
    onto the points is inverted exactly: shift ``-s`` and the surface ``-S(x + s)``, a
    polynomial of the same terms for ``poly_order <= 1`` (higher orders: a clear error)."""
    from xdem.coreg.deramp import check_poly_order, fitted_surface

    if not data.points_are_ref and check_poly_order(est.poly_order) > 1:
        raise InputError("NuthKaabDeramp with points to align supports poly_order <= 1; give the points as the "
                         "reference (fit(points, dem)) or use NuthKaab() + Deramp(poly_order=...)")
    pts, sampler, slope, aspect, start, fin = _shift_sample(est, data, "NuthKaabDeramp")
    resolution = get_resolution(data.dem)
    est._fit_on_sample(pts.z, slope, aspect, pts.x, pts.y, sampler, resolution=resolution, start=start, grid=data.dem)

    def refit(ok: np.ndarray, first: tuple[float, float]) -> None:
        est._fit_on_sample(np.where(ok, pts.z, np.nan), slope, aspect, pts.x, pts.y, sampler, resolution=resolution,
                           start=first, grid=data.dem)

    residual = sampler(est.shift_x_, est.shift_y_) - pts.z - fitted_surface(est).value(pts.x, pts.y)
    fin, ok = _refit_without_outliers(est, data, residual, refit)
    if not data.points_are_ref:
        sx, sy = float(est.shift_x_), float(est.shift_y_)
        lin = {tuple(t): float(c) for t, c in zip(est.terms_, est.coefs_)}
        c0 = lin.get((0, 0), 0.0) + (lin.get((1, 0), 0.0) * sx + lin.get((0, 1), 0.0) * sy) / float(est.scale_)
        est.coefs_ = np.array([-(c0 if tuple(t) == (0, 0) else lin[tuple(t)]) for t in est.terms_])
        est.shift_x_, est.shift_y_, est.shift_z_ = -sx, -sy, -float(est.coefs_[0])
        est.history_ = [[-float(a), -float(b)] for a, b in est.history_]
        est._describe_ramp(data.dem)
    est.passes_ = int(sampler.reads)
    _set_counts(est, data, pts, fin, ok)


def fit_deramp_points(est: Deramp, data: PointFitData) -> None:
    """:class:`~xdem.coreg.Deramp` on points: the surface fitted to ``dh`` at the points (no
    horizontal motion, so the same whichever side the points are on), then refitted without
    the points whose residual is an outlier."""
    from xdem.coreg.deramp import grid_normalisation, surface_terms

    need = max(len(surface_terms(est.poly_order)) + 1, 10)
    pts, dh, fin = dh_at_points(data, est.subsample, est.random_state, what="Deramp", need=need)
    norm = grid_normalisation(data.dem)
    residual = np.full(len(dh), np.nan)
    residual[fin] = est._fit_surface(pts.x[fin], pts.y[fin], dh[fin], norm)
    ok = fin
    if data.outlier_nmad is not None:
        ok = nmad_inliers(residual, k=data.outlier_nmad)
        if int(ok.sum()) < need:
            raise _no_points("Deramp", data, pts.count, int(ok.sum()), need)
        if int((fin & ~ok).sum()):
            est._fit_surface(pts.x[ok], pts.y[ok], dh[ok], norm)
    est.passes_ = 1
    _set_counts(est, data, pts, fin, ok)


def fit_biascorr_points(est: BiasCorr, data: PointFitData) -> None:
    """The :class:`~xdem.coreg.BiasCorr` family on points: ``dh`` at the points (one pass),
    the bias variables evaluated there (``est._points_variables``: gridded variables
    interpolated bilinearly, one pass each; coordinates computed), the model fitted on them,
    then refitted without the points whose residual is an outlier. Points where a variable is
    NaN count as outside."""
    from xdem.coreg.fitfuncs import single_thread_blas

    est._check_params()
    what = type(est).__name__
    pts, dh, fin = dh_at_points(data, est.subsample, est.random_state, what=what, need=10)
    prow, pcol = pixel_positions(data.dem, pts.x, pts.y)
    values, passes = est._points_variables(data, pts, prow, pcol)
    for v in values.values():
        fin = fin & np.isfinite(v)
    if int(fin.sum()) < 10:
        raise _no_points(what, data, pts.count, int(fin.sum()), 10)
    names = list(values)
    ok = fin
    with single_thread_blas():
        est._fit_values(names, [v[fin] for v in values.values()], dh[fin])
        if data.outlier_nmad is not None:
            residual = np.full(len(dh), np.nan)
            residual[fin] = dh[fin] - est.bias({k: v[fin] for k, v in values.items()})
            ok = nmad_inliers(residual, k=data.outlier_nmad)
            if int(ok.sum()) < 10:
                raise _no_points(what, data, pts.count, int(ok.sum()), 10)
            if int((fin & ~ok).sum()):
                est._fit_values(names, [v[ok] for v in values.values()], dh[ok])
    est.passes_ = 1 + int(passes)
    _set_counts(est, data, pts, fin, ok)
