""":class:`DhMinimize`: the horizontal shift that minimises a robust spread of ``dh``, found by
:func:`scipy.optimize.minimize` on a subsample held in memory.

The working set is the subsample of the reference's values and a window of ``2 h + 2`` pixels
(``h = 3``: 8 x 8) of the to-be-aligned DEM around each sampled pixel, cut in the same pass as
the draw (:func:`xdem.sampling.sample_valid`). At any shift within about 2 pixels of where the
windows were cut, ``tba`` moved by the shift is interpolated inside them
(:func:`xdem.kernels.dhminimize.interp_windows_at`): the optimiser runs in memory and reads
nothing. The search is bounded to that region; when its optimum lies near the region's edge,
the windows are cut again around it (one more pass) and the search resumes there, so passes
over the data are 1 + the number of such moves (2 pixels or more each), whatever the number of
evaluations.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import ClassVar

import dask.array as da
import numpy as np
from scipy.optimize import minimize

from xdem.coreg._data import PointFitData
from xdem.coreg._iterate import DIVERGENCE_FRACTION, divergence_message, initial_shift_of
from xdem.coreg._point_sample import PointSample
from xdem.coreg._shift import shift_dem
from xdem.coreg._windows import gather_windows
from xdem.coreg.affine import check_iteration_params
from xdem.coreg.base import FitData, register
from xdem.coreg.rigid import RigidCoreg, RigidTransform
from xdem.errors import ConvergenceError, ConvergenceWarning, InputError, NotEnoughDataError
from xdem.io.grid import check_projected, get_transform, grid_shape, shift_in_pixels, signed_resolution
from xdem.kernels.dhminimize import interp_windows_at
from xdem.kernels.interp import footprint
from xdem.kernels.robust import nmad
from xdem.points.bucket import PointSampler
from xdem.sampling import sample_valid
from xdem.warp import crs_key

__all__ = ["DhMinimize", "OPTIMIZERS"]

#: ``method`` values: the :func:`scipy.optimize.minimize` methods used (derivative-free, bounded).
OPTIMIZERS = ("Nelder-Mead", "Powell")
#: Size of the optimiser's first steps (pixels): the starting simplex (Nelder-Mead), the
#: starting directions (Powell).
_FIRST_STEP_PX = 0.5
#: An optimum closer than this (pixels) to the edge of the windows' region moves the windows.
_EDGE_PX = 0.5
#: DhMinimize on points searches within this many pixels of its start (``initial_shift``); an
#: optimum at the edge of that box starts a new search around it.
SEARCH_PX = 10.0


@register
class DhMinimize(RigidCoreg):
    """Horizontal and vertical shift minimising a robust spread of ``dh = tba - ref``.

    The horizontal shift ``(shift_x, shift_y)`` minimises ``spread_func`` (NMAD by default) of
    ``dh`` of the to-be-aligned DEM moved by it, over a reproducible subsample, with
    :func:`scipy.optimize.minimize` (``method``: Nelder-Mead or Powell, both derivative-free);
    the vertical shift is minus the median of ``dh`` at the optimum. It makes no assumption
    on the terrain beyond "the right shift makes ``dh`` tightest": a fallback when Nuth & Kääb
    or LZD do not fit (e.g. terrain whose slopes are too few or in too few directions for Nuth
    & Kääb's aspect fit), at the price of more evaluations. It estimates a translation only.

    Passes over the full data in ``fit``: one to draw the subsample and cut 8 x 8 windows of
    the to-be-aligned DEM around the sampled pixels (two when less than about 80 % of the
    pixels are valid, :func:`xdem.sampling.sample_valid`; one more with ``initial_shift``, for
    the windows around the shifted positions), plus one each time the optimum lies near the
    edge of the region the windows cover (within 0.5 pixel of 2 pixels from where they were
    cut, 3 with bilinear): the search is bounded to that region, and resumes in new windows
    cut around its optimum. Memory: about 270 bytes per sampled point (the windows, float32).
    Each evaluation interpolates every window at one shift and takes ``spread_func`` of the
    result (about 0.1 s for 500 000 points with the NMAD); Nelder-Mead needs about 60
    evaluations (30 iterations) per window region to reach the default ``tolerance``, Powell
    about 100 (3 iterations). Only sampled points whose whole window is valid (no
    NaN, inside the grid) enter the spread, so that the set of points does not change with
    the shift within one region.

    Parameters
    ----------
    spread_func
        Spread of ``dh`` to minimise, a callable on a 1-D array of finite values returning a
        float (default :func:`xdem.kernels.robust.nmad`: robust to outliers such as unstable
        terrain). Stored by name in JSON (``"nmad"``, ``"std"``).
    method
        ``"Nelder-Mead"`` (default) or ``"Powell"``: the :func:`scipy.optimize.minimize` method.
    subsample
        Fraction (``<= 1``) or count (``> 1``) of valid pixels used.
    random_state
        Seed of the reproducible subsample.
    resampling
        ``"cubic"`` (default) or ``"bilinear"``: the interpolation of the to-be-aligned DEM at a
        shift, in fit and in apply. Cubic because bilinear interpolation smooths the DEM by
        an amount that depends on the fractional part of the shift (most at half a pixel):
        the spread of ``dh`` is lowered at half-pixel shifts, which biases the optimum
        towards them.
    initial_shift
        ``(shift_x, shift_y)`` (or ``(shift_x, shift_y, shift_z)``: the vertical part has no
        effect, the spread does not depend on it) to start from, in CRS units, same sign
        convention as the result; ``None`` starts from 0. Pixels are then drawn where the
        moved DEM is valid. Use it when the DEMs are offset by more than a few pixels: far
        from the optimum the spread of ``dh`` is nearly flat.
    max_iterations
        Maximum number of optimiser iterations, over all regions.
    tolerance
        Stop when the optimiser's steps are below this, in pixels (Nelder-Mead: the size of
        the simplex; Powell: the move of one iteration, its line searches being that precise).

    Learned attributes
    ------------------
    shift_x_, shift_y_, shift_z_ : float
        Translation to apply to the to-be-aligned DEM (CRS units).
    matrix_, centroid_, rotation_x_, rotation_y_, rotation_z_
        The rigid transform (:class:`~xdem.coreg.RigidCoreg`); the rotations are 0, the
        centroid is the middle of the subsample (mean position and mean reference elevation).
    spread_ : float
        ``spread_func`` of ``dh`` at the optimum (before the vertical shift).
    n_iterations_ : int
        Optimiser iterations, over all regions.
    converged_ : bool
        Whether the optimiser met ``tolerance`` within ``max_iterations``.
    count_ : int
        Points in the spread at the optimum.
    passes_ : int
        Computes made by the fit.

    Examples
    --------
    >>> import xdem
    >>> ref, tba, truth = xdem.examples.example_pair(mode="transform")
    >>> dm = DhMinimize(subsample=20_000).fit(ref, tba)
    >>> abs(dm.shift_x_ - truth["shift_x"]) < 0.05, abs(dm.shift_y_ - truth["shift_y"]) < 0.05
    (True, True)
    """

    #: What it can do (:class:`~xdem.coreg.Capabilities`).
    tags = RigidCoreg.tags.but(horizontal=True, fits_points=True, initial_shift=True)
    _callable_params = ("spread_func",)
    _half: ClassVar[int] = 3  # windows of 8 x 8 pixels around the sampled pixels
    _min_points: ClassVar[int] = 100

    def __init__(
        self,
        *,
        spread_func: Callable[[np.ndarray], float] = nmad,
        method: str = "Nelder-Mead",
        subsample: float | int = 500_000,
        random_state: int | None = None,
        resampling: str = "cubic",
        initial_shift: tuple[float, float] | tuple[float, float, float] | None = None,
        max_iterations: int = 200,
        tolerance: float = 0.0001,
        fit_minimizer: Callable[..., object] | None = None,
        fit_loss_func: Callable[[np.ndarray], float] | None = None,
    ) -> None:
        self.fit_minimizer = fit_minimizer
        self.fit_loss_func = fit_loss_func
        self.spread_func = spread_func
        self.method = method
        self.subsample = subsample
        self.random_state = random_state
        self.resampling = resampling
        self.initial_shift = initial_shift
        self.max_iterations = max_iterations
        self.tolerance = tolerance

    def _check_params(self) -> tuple[float, float] | None:
        check_iteration_params(resampling=self.resampling, max_iterations=self.max_iterations, tolerance=self.tolerance)
        if not callable(self.spread_func):
            raise InputError(f"spread_func must be a callable on a 1-D array (e.g. xdem.kernels.robust.nmad), got "
                             f"{self.spread_func!r}")
        if self.method not in OPTIMIZERS:
            raise InputError(f"method must be one of {', '.join(OPTIMIZERS)}, got {self.method!r}")
        return None if self.initial_shift is None else initial_shift_of(self.initial_shift)[:2]

    def fit_after(self, data: FitData, prior: np.ndarray) -> DhMinimize:
        """Fit on a to-be-aligned DEM that earlier steps move by the rigid 4 x 4 matrix ``prior``.

        A pipeline calls it so that a refinement after another step sees the original DEM, not
        one already resampled (bilinear resampling smooths the terrain by an amount that
        depends on the fractional shift: the spread's optimum moves). A translation ``prior``
        is not applied: the search starts from it (plus ``initial_shift``) on ``data.tba`` as
        it is, and the learned translation is the total minus ``prior``, what fitting on the
        moved DEM would learn. A rotating ``prior`` is applied first (with ``resampling``): the
        windows can only follow one common shift.
        """
        m = np.asarray(prior, dtype=np.float64)
        self._reset()
        if not np.array_equal(m[:3, :3], np.eye(3)):
            moved = RigidTransform.from_matrix(m).set_params(resampling=self.resampling)
            self._fit_from(replace(data, tba=moved._apply(data.tba, {}, True)), (0.0, 0.0, 0.0))
        else:
            self._fit_from(data, (float(m[0, 3]), float(m[1, 3]), float(m[2, 3])))
        self.crs_ = crs_key(data.ref.rio.crs)
        return self

    def _fit_points(self, data: PointFitData) -> None:
        """On points (:mod:`xdem.coreg._point_sample`): the horizontal shift of the DEM
        (interpolated at the points with ``resampling``: :class:`xdem.points.PointSampler`)
        minimising ``spread_func`` of ``dh`` at the points (:meth:`_search_points`), the vertical
        shift minus the median ``dh`` of the inliers there; a translation, negated for
        ``(dem, points)``."""
        initial = self._check_params()
        ps = PointSample.from_points(data, subsample=self.subsample, random_state=self.random_state,
                                     what="DhMinimize")
        pts = ps.points
        start = (0.0, 0.0) if initial is None else (ps.sign * initial[0], ps.sign * initial[1])
        sampler = PointSampler(data.dem, pts, resampling=self.resampling, half=self._half, data=data.values)
        dh0 = sampler(*start) - pts.z
        assert sampler.windows is not None
        use = np.isfinite(dh0) & np.isfinite(sampler.windows).all(axis=(1, 2))  # one set whatever the shift
        ps.require(int(use.sum()), self._min_points)
        res_x, res_y = signed_resolution(data.dem)
        z = np.where(use, pts.z, np.nan)  # the points outside `use` never enter the spread

        def shift_of(p: np.ndarray) -> tuple[float, float]:
            return float(-p[1] * res_x), float(p[0] * res_y)

        def objective(p: np.ndarray) -> float:
            dh = sampler(*shift_of(p)) - z
            return float(self.spread_func(dh[np.isfinite(dh)]))

        pos0 = np.array(shift_in_pixels(data.dem, *start), dtype=np.float64)
        pos, iterations, converged = self._search_points(objective, pos0, shift_of, start=start,
                                                         limit=DIVERGENCE_FRACTION * max(grid_shape(data.dem)))
        sx, sy = shift_of(pos)
        dh = sampler(sx, sy) - pts.z
        fin = np.isfinite(dh)
        ok = ps.inliers(dh, fin)
        sz = -float(np.median(dh[ok]))
        sign = ps.sign
        self._set_transform(np.eye(3), (sign * sx, sign * sy, sign * sz), ps.centre())
        self.spread_ = float(self.spread_func(dh[use & fin]))
        self.n_iterations_ = int(iterations)
        self.converged_ = bool(converged)
        self.count_ = int(ok.sum())
        self.passes_ = int(sampler.reads)
        vars(self).update(ps.counts(fin, ok))

    def _search_points(self, objective: Callable[[np.ndarray], float], pos0: np.ndarray,
                       shift_of: Callable[[np.ndarray], tuple[float, float]], *, start: tuple[float, float],
                       limit: float) -> tuple[np.ndarray, int, bool]:
        """The search on points from ``pos0`` (pixels): within :data:`SEARCH_PX` pixels of it,
        again around the optimum while it is at the edge of the box; ``(pos, iterations,
        converged)``, diverging beyond ``limit`` pixels a :class:`~xdem.errors.ConvergenceError`."""
        pos, iterations, converged = pos0, 0, False
        while True:  # a search box around pos; moved on when the optimum is at its edge
            lo, hi = pos - SEARCH_PX, pos + SEARCH_PX
            pos, nit, success = self._minimize(objective, pos, lo, hi, int(self.max_iterations) - iterations)
            iterations += nit
            if float(np.hypot(*(pos - pos0))) > limit:
                raise ConvergenceError(divergence_message("DhMinimize", *shift_of(pos), iterations, start))
            if not (np.any(pos - lo < _EDGE_PX) or np.any(hi - pos < _EDGE_PX)):
                converged = success
                break
            if iterations >= int(self.max_iterations):
                break
        if not converged:
            warnings.warn(f"DhMinimize did not converge in {iterations} iterations (max_iterations="
                          f"{self.max_iterations}, tolerance {self.tolerance} px); raise max_iterations, or start "
                          "closer with initial_shift", ConvergenceWarning, stacklevel=5)
        return pos, iterations, converged

    def _fit(self, data: FitData) -> None:
        self._fit_from(data, (0.0, 0.0, 0.0))

    def _fit_from(self, data: FitData, prior: tuple[float, float, float]) -> None:
        initial = self._check_params()
        check_projected(data.ref, "DhMinimize")
        res_x, res_y = signed_resolution(data.ref)
        h = self._half
        before, after = footprint(self.resampling)
        given = initial if initial is not None else (0.0, 0.0)
        start = (prior[0] + given[0], prior[1] + given[1])
        moved_start = start != (0.0, 0.0)
        pos = np.array(shift_in_pixels(data.ref, *start))  # (drow, dcol): tba is read there
        win_arrays = {} if moved_start else {"win": data.tba.data}
        valid = data.valid()
        if moved_start:  # draw where tba moved by the starting shift is valid
            moved = shift_dem(data.tba, shift_x=start[0], shift_y=start[1], resampling=self.resampling)
            valid = da.isfinite(data.ref.data) & da.isfinite(moved.data.rechunk(data.ref.data.chunks)) & data.inlier
        s = sample_valid(valid, {"ref": data.ref.data}, subsample=self.subsample, random_state=self.random_state,
                         min_count=self._min_points, what="DhMinimize", windows=win_arrays, half=h)
        rows, cols, ref = s["row"], s["col"], s["ref"]
        reads = 0
        centre = (0, 0)
        win = s.get("win")
        if win is None:
            centre = (int(round(pos[0])), int(round(pos[1])))
            win = gather_windows(data.tba.data, rows + centre[0], cols + centre[1], h)
            reads += 1
        limit = DIVERGENCE_FRACTION * max(grid_shape(data.ref))
        spread = self.spread_func
        iterations, converged = 0, False
        while True:
            full = np.isfinite(win).all(axis=(1, 2))
            n_full = int(full.sum())
            if n_full < self._min_points:
                raise NotEnoughDataError(
                    f"DhMinimize: only {n_full} sampled pixels have a valid {2 * h + 2} x {2 * h + 2} window of the "
                    f"to-be-aligned DEM around shift ({-pos[1] * res_x:.3f}, {pos[0] * res_y:.3f}) (need "
                    f"{self._min_points}); the DEMs barely overlap, have many holes, or the shift is too large")
            w, r = win[full], ref[full]
            offset = np.array([h - centre[0], h - centre[1]], dtype=np.float64)

            def objective(p: np.ndarray, w: np.ndarray = w, r: np.ndarray = r, offset: np.ndarray = offset) -> float:
                dh = interp_windows_at(w, p[0] + offset[0], p[1] + offset[1], resampling=self.resampling) - r
                return float(spread(dh))

            lo = np.array(centre, dtype=np.float64) + before - h
            hi = np.array(centre, dtype=np.float64) + h + 1 - after - 1e-9
            pos, nit, success = self._minimize(objective, pos, lo, hi, int(self.max_iterations) - iterations)
            iterations += nit
            moved_px = math.hypot(*(pos - np.array(shift_in_pixels(data.ref, *start))))
            if moved_px > limit:
                raise ConvergenceError(divergence_message("DhMinimize", -pos[1] * res_x, pos[0] * res_y, iterations,
                                                          start))
            near_edge = bool(np.any(pos - lo < _EDGE_PX) or np.any(hi - pos < _EDGE_PX))
            if not near_edge:
                converged = success
                break
            if iterations >= int(self.max_iterations):
                break
            centre = (int(round(pos[0])), int(round(pos[1])))
            win = gather_windows(data.tba.data, rows + centre[0], cols + centre[1], h)
            reads += 1
        if not converged:
            warnings.warn(f"DhMinimize did not converge in {iterations} iterations (max_iterations="
                          f"{self.max_iterations}, tolerance {self.tolerance} px); raise max_iterations, or start "
                          "closer with initial_shift", ConvergenceWarning, stacklevel=4)
        dh = interp_windows_at(w, pos[0] + offset[0], pos[1] + offset[1], resampling=self.resampling) - r
        sx, sy = float(-pos[1] * res_x), float(pos[0] * res_y)
        transform = get_transform(data.ref)
        x = transform.c + (cols + 0.5) * transform.a + (rows + 0.5) * transform.b
        y = transform.f + (cols + 0.5) * transform.d + (rows + 0.5) * transform.e
        total = (sx, sy, -float(np.median(dh)))
        self._set_transform(np.eye(3), tuple(t - p for t, p in zip(total, prior)),
                            (float(np.mean(x)), float(np.mean(y)), float(np.mean(ref))))
        self.spread_ = float(spread(dh))
        self.n_iterations_ = int(iterations)
        self.converged_ = converged
        self.count_ = int(len(dh))
        self.passes_ = int(s.passes + reads)

    def _minimize(self, objective: Callable[[np.ndarray], float], pos: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                  maxiter: int) -> tuple[np.ndarray, int, bool]:
        """One bounded search from ``pos`` inside ``[lo, hi]`` (pixels): the optimum, the
        iterations it took, and whether it met ``tolerance``.

        Nelder-Mead stops when its simplex is smaller than ``tolerance``. Powell stops when an
        iteration moves the shift by less than ``tolerance`` (its own test, on the relative
        decrease of the objective, never ends when the spread approaches 0 along a valley)."""
        tol = float(self.tolerance)
        # first steps towards the inside of the region
        steps = np.where(pos + _FIRST_STEP_PX < hi, _FIRST_STEP_PX, -_FIRST_STEP_PX)
        bounds = list(zip(lo, hi))
        if self.method == "Nelder-Mead":
            simplex = np.array([pos, pos + [steps[0], 0.0], pos + [0.0, steps[1]]])
            options = {"xatol": tol, "fatol": np.inf, "maxiter": max(maxiter, 1), "initial_simplex": simplex}
            result = minimize(objective, pos, method=self.method, bounds=bounds, options=options)
            return np.asarray(result.x, dtype=np.float64), int(result.nit), bool(result.success)
        test = _StepTest(np.asarray(pos, dtype=np.float64), tol)
        options = {"xtol": tol, "ftol": 1e-12, "maxiter": max(maxiter, 1), "direc": np.diag(steps)}
        result = minimize(objective, pos, method=self.method, bounds=bounds, options=options, callback=test)
        return np.asarray(result.x, dtype=np.float64), max(int(result.nit), test.nit), bool(result.success or test.small)


class _StepTest:
    """Powell's callback: stops the search (``StopIteration``) once an iteration moves the
    shift by less than ``tol`` pixels."""

    def __init__(self, start: np.ndarray, tol: float) -> None:
        self.x, self.tol, self.nit, self.small = start, tol, 0, False

    def __call__(self, xk: np.ndarray) -> None:
        self.nit += 1
        self.small = float(np.max(np.abs(xk - self.x))) < self.tol
        self.x = np.array(xk, dtype=np.float64)
        if self.small:
            raise StopIteration
