"""Horizontal shift and polynomial deramping estimated jointly: :class:`NuthKaabDeramp`.

Why: a tilt (or any smooth ramp) in ``dh = tba - ref`` is not purely aspect-driven, so
Nuth & Kääb fitted first absorbs part of it into the shift, and a deramp fitted afterwards
cannot undo that. Measured on the bundled 1 m DEM shifted by (9.6, -4.0) m with a plane of
``tilt=(0.004, -0.003)`` (about 2 m across the 400 m DEM): ``NuthKaab() + Deramp()`` (a
plane then: ``Deramp(poly_order=1, terms="total")`` today) in one pass is off by
(0.99, -1.02) m in shift and 0.08 m RMS in the plane, while this joint fit
recovers both to millimetres (see ``tests/coreg/test_nuthkaab_deramp.py``).

Model, linearised around the current shift ``(s_x, s_y)`` (Gauss-Newton)::

    tba(x - s_x, y - s_y) - ref(x, y)
        = d_ref/dx * e_x + d_ref/dy * e_y + sum_k c_k u^i_k v^j_k

with ``d_ref/dx = -tan(slope) sin(aspect)``, ``d_ref/dy = -tan(slope) cos(aspect)`` of the
reference (so the columns are those of Nuth & Kääb), ``u, v`` the normalised coordinates and
the total-degree terms of :class:`~xdem.coreg.Deramp` with ``terms="total"`` (not upstream's
``Deramp()`` default, ``"tensor"``: this class is ours, and a plane is what it is for). Each iteration solves this
linear least-squares problem on the sampled pixels (rejecting residuals beyond 4 NMAD and
solving again), moves the shift by ``(e_x, e_y)`` and re-evaluates ``tba`` by interpolation
in small windows gathered once around the sampled pixels, until the step is below
``tolerance`` pixels. The polynomial is finally refitted at the final shift.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, ClassVar

import numpy as np
import xarray as xr

from xdem.coreg._data import ShiftSampler
from xdem.coreg._iterate import Iterations, check_divergence_params, iterate_shift, nmad_ratio
from xdem.coreg._point_sample import ShiftSample, reversed_history
from xdem.coreg._shift import shift_dem
from xdem.coreg.affine import check_iteration_params
from xdem.coreg.base import Coreg, FitData, PointFitData, register
from xdem.coreg.deramp import (
    check_poly_order,
    fitted_surface,
    grid_normalisation,
    subtract_surface,
    surface_terms,
)
from xdem.coreg.fitfuncs import nmad, poly_design, robust_refine_linear, single_thread_blas
from xdem.errors import (
    FlatTerrainWarning,
    InputError,
    NotEnoughDataError,
)
from xdem.io._heap import release_before_solve
from xdem.io.grid import get_transform, grid_shape
from xdem.warp import FrameOp

__all__ = ["NuthKaabDeramp"]


def _solve_rejecting(design: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares, then again without the residuals beyond 4 NMAD of the first solve."""
    p: np.ndarray
    with single_thread_blas():
        p, *_ = np.linalg.lstsq(design, y, rcond=None)
        r = design @ p - y
        med = np.median(r)  # once: the NMAD's centre too
        keep = np.abs(r - med) <= max(4.0 * nmad(r, center=med), 1e-9)
        if keep.sum() >= design.shape[1] + 1 and not keep.all():
            p, *_ = np.linalg.lstsq(design[keep], y[keep], rcond=None)
    return p


@register
class NuthKaabDeramp(Coreg):
    """Horizontal shift and polynomial ramp of ``dh = tba - ref``, fitted jointly.

    The correction applied is ``corrected(x, y) = tba(x - shift_x_, y - shift_y_) -
    surface(x, y)``: one resampling (as :func:`~xdem.coreg.shift_dem`) followed by the
    subtraction of a polynomial of total degree ``poly_order`` of the coordinates (its
    constant term holds the vertical shift). See the module notes for the model and why a
    sequential ``NuthKaab() + Deramp()`` is biased when ``dh`` has a ramp.

    Passes over the full data in ``fit``: one to draw the subsample and cut small windows
    of both DEMs around it (two when few pixels are valid, as :class:`~xdem.coreg.NuthKaab`),
    and one more each time the shift leaves them (usually 1 or 2 in all).

    Parameters
    ----------
    poly_order
        Total degree of the ramp polynomial (``>= 0``; 1 = a plane).
    max_iterations
        Maximum number of Gauss-Newton iterations.
    tolerance
        Stop when a step is smaller than this, in pixels.
    subsample
        Fraction (``<= 1``) or count (``> 1``) of valid pixels used.
    random_state
        Seed of the reproducible subsample.
    min_slope
        Pixels flatter than this (degrees) constrain only the polynomial, not the shift.
    resampling
        ``"bilinear"`` or ``"cubic"``, to evaluate ``tba`` in fit and to apply.
    terrain_method
        Slope/aspect method of the reference: ``"horn"`` or ``"zevenbergthorne"``.
    initial_shift
        ``(shift_x, shift_y[, shift_z])`` to start the iterations from (CRS units, the sign of
        ``shift_x_``); ``None`` starts from 0. As :class:`~xdem.coreg.NuthKaab`.
    on_divergence
        ``"raise"`` (default): a shift moving more than a quarter of the DEM's size from its
        start raises :class:`~xdem.errors.ConvergenceError` (suggesting ``initial_shift``).
        ``"warn"``: a :class:`~xdem.errors.ConvergenceWarning`, the shift is reset to its
        start, ``converged_`` is False and only the polynomial is fitted there.

    Learned attributes
    ------------------
    shift_x_, shift_y_ : float
        Horizontal translation applied to ``tba`` (CRS units).
    shift_z_ : float
        ``-coefs_[0]``: the vertical shift at the centre of the reference grid, for reports
        (already part of the surface: not applied twice).
    coefs_, terms_, center_, scale_
        The ramp surface, as in :class:`~xdem.coreg.Deramp`.
    n_iterations_, converged_, count_, history_, passes_
        Iterations, convergence flag, points in the fit, shift after each iteration,
        computes made by the fit.
    tilt_m_per_km_, tilt_direction_deg_ : float
        Gradient of the fitted surface at the centre of the grid, in CRS units per 1000 CRS
        units (m per km in a metric CRS), and the direction in which it descends (where
        ``tba`` is lowest relative to ``ref``), in degrees clockwise from north (``None``
        without tilt).
    ramp_amplitude_ : float
        Max - min of the fitted surface over the grid extent (65 x 65 points, corners
        included: exact for a plane), in elevation units.
    horizontal_constrained_ : bool
        False when too few sampled pixels are steeper than ``min_slope``: a
        :class:`~xdem.errors.FlatTerrainWarning` is emitted, the shift stays 0 and only the
        polynomial is fitted.

    Examples
    --------
    >>> from xdem.examples import example_pair
    >>> ref, tba, truth = example_pair(shift_x=2.0, shift_y=-1.0, tilt=(0.002, 0.001))
    >>> nkd = NuthKaabDeramp(poly_order=1).fit(ref, tba)
    >>> round(nkd.shift_x_, 2), round(nkd.shift_y_, 2)
    (-2.0, 1.0)
    >>> corrected = nkd.apply(tba)  # lazy
    """

    #: What it can do (:class:`~xdem.coreg.Capabilities`).
    tags = Coreg.tags.but(horizontal=True, fits_points=True, in_frame=True, blockwise_step=True,
                                moves_points=True)
    resampling: str  # set by __init__
    _half: ClassVar[int] = 2
    _min_points: ClassVar[int] = 100
    history_labels: ClassVar[tuple[str, ...]] = ("shift_x", "shift_y")

    def __init__(
        self,
        *,
        poly_order: int = 1,
        max_iterations: int = 20,
        tolerance: float = 0.001,
        subsample: float | int = 500_000,
        random_state: int | None = None,
        min_slope: float = 1.0,
        resampling: str = "bilinear",
        terrain_method: str = "horn",
        initial_shift: tuple[float, ...] | None = None,
        on_divergence: str = "raise",
    ) -> None:
        self.initial_shift = initial_shift
        self.on_divergence = on_divergence
        self.poly_order = poly_order
        self.max_iterations = max_iterations
        self.tolerance = tolerance
        self.subsample = subsample
        self.random_state = random_state
        self.min_slope = min_slope
        self.resampling = resampling
        self.terrain_method = terrain_method

    def _check_params(self) -> None:
        check_poly_order(self.poly_order)
        check_iteration_params(resampling=self.resampling, max_iterations=self.max_iterations, tolerance=self.tolerance)
        check_divergence_params(initial_shift=self.initial_shift, on_divergence=self.on_divergence)

    def _fit(self, data: FitData) -> None:
        self._check_params()
        ss = ShiftSample.from_pair(data, self, what="NuthKaabDeramp")
        self._fit_on_sample(ss.ref, ss.slope, ss.aspect, ss.x, ss.y, ss.sampler, resolution=ss.resolution,
                            start=ss.start, grid=ss.grid, last_use=True)
        self.passes_ = ss.passes

    def _fit_points(self, data: PointFitData) -> None:
        """On points (:mod:`xdem.coreg._point_sample`): as :meth:`NuthKaab._fit_points
        <xdem.coreg.NuthKaab._fit_points>`, the ramp a polynomial of the points' coordinates.
        With points to align, the fit of the DEM onto the points is inverted exactly: shift
        ``-s`` and the surface ``-S(x + s)``, a polynomial of the same terms for
        ``poly_order <= 1`` (higher orders: a clear error)."""
        self._check_params()
        if not data.points_are_ref and check_poly_order(self.poly_order) > 1:
            raise InputError("NuthKaabDeramp with points to align supports poly_order <= 1; give the points as the "
                             "reference (fit(points, dem)) or use NuthKaab() + Deramp(poly_order=...)")
        ss = ShiftSample.from_points(data, self, what="NuthKaabDeramp")
        ps = ss.points
        assert ps is not None
        self._fit_on_sample(ss.ref, ss.slope, ss.aspect, ss.x, ss.y, ss.sampler, resolution=ss.resolution,
                            start=ss.start, grid=ss.grid)
        residual = ss.sampler(self.shift_x_, self.shift_y_) - ss.ref - fitted_surface(self).value(ss.x, ss.y)
        fin = np.isfinite(residual)
        ok = ps.inliers(residual, fin)
        if ps.has_outliers(fin, ok):
            history, iterations = list(self.history_), int(self.n_iterations_)
            self._fit_on_sample(ss.without(ok), ss.slope, ss.aspect, ss.x, ss.y, ss.sampler,
                                resolution=ss.resolution, start=(float(self.shift_x_), float(self.shift_y_)),
                                grid=ss.grid)
            self.history_ = history + list(self.history_)
            self.n_iterations_ = iterations + int(self.n_iterations_)
        if not data.points_are_ref:
            self._reverse(ss.grid)
        self.passes_ = int(ss.passes)
        vars(self).update(ps.counts(fin, ok))

    def _reverse(self, grid: xr.DataArray) -> None:
        """The fit of the DEM onto points to align, inverted: shift ``-s``, surface ``-S(x + s)``."""
        sx, sy = float(self.shift_x_), float(self.shift_y_)
        lin = {tuple(t): float(c) for t, c in zip(self.terms_, self.coefs_)}
        c0 = lin.get((0, 0), 0.0) + (lin.get((1, 0), 0.0) * sx + lin.get((0, 1), 0.0) * sy) / float(self.scale_)
        self.coefs_ = np.array([-(c0 if tuple(t) == (0, 0) else lin[tuple(t)]) for t in self.terms_])
        self.shift_x_, self.shift_y_, self.shift_z_ = -sx, -sy, -float(self.coefs_[0])
        self.history_ = reversed_history(self.history_)
        self._describe_ramp(grid)

    # learned attributes set by _fit_on_sample (both routes), read by _fit_points
    shift_x_: float
    shift_y_: float
    shift_z_: float
    history_: list[list[float]]
    n_iterations_: int
    coefs_: np.ndarray
    terms_: list[list[int]]
    scale_: float

    def _fit_on_sample(self, ref: np.ndarray, slope: np.ndarray, aspect: np.ndarray, x: np.ndarray, y: np.ndarray,
                       sampler: ShiftSampler, *, resolution: tuple[float, float],
                       start: tuple[float, float], grid: xr.DataArray, last_use: bool = False) -> None:
        """The joint iterations on a gathered sample (pixels of a reference DEM, or points):
        ``ref`` the reference elevations at map coordinates ``x, y``, ``slope``/``aspect``
        (degrees) there, ``sampler(sx, sy)`` the DEM to align moved by the shift at the same
        places; ``grid`` the reference grid (normalisation of the coordinates). With
        ``last_use`` the sampler is not called after this fit: its windows are freed before the
        final solve, with the iterations' design matrix and its inputs."""
        terms = surface_terms(self.poly_order)
        center, scale = grid_normalisation(grid)
        poly = poly_design(np.vstack([(x - center[0]) / scale, (y - center[1]) / scale]), terms)
        run, constrained = self._iterate(ref, slope, aspect, poly, sampler, resolution=resolution, start=start,
                                         grid=grid)
        sx, sy = run.shift
        history, it, converged = run.history, run.n_iterations, run.converged
        dh = sampler(sx, sy) - ref
        if last_use:
            sampler.release()
        ok = np.isfinite(dh)
        poly_ok, dh_ok = poly[ok], dh[ok]  # selected once, not at every evaluation of the residual
        del poly
        release_before_solve()  # what was freed goes back first (xdem.io._heap)
        p0 = _solve_rejecting(poly_ok, dh_ok)
        coefs, _ = robust_refine_linear(poly_ok, dh_ok, p0)
        self.shift_x_ = float(sx)
        self.shift_y_ = float(sy)
        self.shift_z_ = -float(coefs[0])
        self.coefs_ = coefs
        self.terms_ = [list(t) for t in terms]
        self.center_ = center
        self.scale_ = scale
        self.n_iterations_ = int(it)
        self.converged_ = bool(converged)
        self.horizontal_constrained_ = bool(constrained)
        self.count_ = int(ok.sum())
        self.history_ = history
        self._describe_ramp(grid)

    def _iterate(self, ref: np.ndarray, slope: np.ndarray, aspect: np.ndarray, poly: np.ndarray,
                 sampler: ShiftSampler, *, resolution: tuple[float, float], start: tuple[float, float],
                 grid: xr.DataArray) -> tuple[Iterations, bool]:
        """The Gauss-Newton iterations of :meth:`_fit_on_sample` (``poly`` the polynomial's columns):
        the run and whether the terrain constrains the shift. Their design matrix and its inputs
        are freed on return, before the final solve allocates its own."""
        tan_s = np.tan(np.radians(slope))
        asp = np.radians(aspect)
        sloped = np.isfinite(tan_s) & np.isfinite(asp) & (slope >= float(self.min_slope))
        gx = np.where(sloped, -tan_s * np.sin(np.where(sloped, asp, 0.0)), 0.0)
        gy = np.where(sloped, -tan_s * np.cos(np.where(sloped, asp, 0.0)), 0.0)
        constrained = int(sloped.sum()) >= self._min_points
        if not constrained:
            warnings.warn(
                f"the terrain is too flat to estimate a horizontal shift ({int(sloped.sum())} sampled pixels steeper "
                f"than {self.min_slope} degrees); only the polynomial ramp is estimated",
                FlatTerrainWarning, stacklevel=6,
            )
        design = np.column_stack([gx, gy, poly])

        def step(sx: float, sy: float) -> tuple[float, float]:
            dh = sampler(sx, sy) - ref
            ok = np.isfinite(dh)
            if int((ok & sloped).sum()) < self._min_points:
                raise NotEnoughDataError(
                    f"NuthKaabDeramp: only {int((ok & sloped).sum())} sampled pixels remain valid at shift "
                    f"({sx:.3f}, {sy:.3f}); the DEMs barely overlap or the shift is too large"
                )
            p = _solve_rejecting(design[ok], dh[ok])
            return float(p[0]), float(p[1])

        if not constrained:
            return Iterations(start, [], 0, converged=False, constrained=False), False
        run = iterate_shift(
            step, what="NuthKaabDeramp", start=start, resolution=resolution, shape=grid_shape(grid),
            max_iterations=int(self.max_iterations), tolerance=float(self.tolerance),
            on_divergence=self.on_divergence, spread_ratio=lambda a, b: nmad_ratio(sampler, ref, a, b),
        )
        return run, True

    def _describe_ramp(self, ref: xr.DataArray) -> None:
        """Human units of the fitted ramp: tilt at the grid centre and amplitude over the grid."""
        coefs = np.asarray(self.coefs_, dtype=np.float64)
        lin = {tuple(t): c for t, c in zip(self.terms_, coefs)}
        # d(surface)/dx, d(surface)/dy at the centre (u = v = 0): the linear terms only
        gx = lin.get((1, 0), 0.0) / self.scale_
        gy = lin.get((0, 1), 0.0) / self.scale_
        self.tilt_m_per_km_ = float(math.hypot(gx, gy) * 1000.0)
        self.tilt_direction_deg_ = float(math.degrees(math.atan2(-gx, -gy)) % 360.0) if (gx or gy) else None
        t = get_transform(ref)
        ny, nx = ref.shape
        xs = np.linspace(t.c, t.c + nx * t.a, 65)
        ys = np.linspace(t.f, t.f + ny * t.e, 65)
        gu, gv = np.meshgrid((xs - self.center_[0]) / self.scale_, (ys - self.center_[1]) / self.scale_)
        surface = poly_design(np.vstack([gu.ravel(), gv.ravel()]), [tuple(x) for x in self.terms_]) @ coefs
        self.ramp_amplitude_ = float(surface.max() - surface.min())

    def translation_part(self) -> tuple[tuple[float, float, float], bool]:
        """``((shift_x, shift_y, shift_z), complete)``: the translation of this correction.

        ``shift_z`` is :attr:`shift_z_`, minus the fitted surface at the centre of the
        reference grid (the constant term). ``complete`` is True only when the surface is a
        constant (every other coefficient is 0), i.e. when the translation is the whole
        correction; otherwise a ramp remains on top of the translation.
        """
        self._check_fitted()
        rest = np.asarray(self.coefs_, dtype=np.float64)[1:]
        return (float(self.shift_x_), float(self.shift_y_), float(self.shift_z_)), bool(not np.any(rest != 0.0))

    def _frame_op(self) -> FrameOp:
        shift = (float(self.shift_x_), float(self.shift_y_), 0.0)
        return FrameOp(str(self.crs_), shift=shift, surfaces=(fitted_surface(self),))

    def _apply(self, dem: xr.DataArray, bias_vars: dict[str, xr.DataArray], resample: bool) -> xr.DataArray:
        if not resample:
            raise InputError("NuthKaabDeramp is not a pure translation: resample=False is not possible")
        moved = shift_dem(dem, shift_x=self.shift_x_, shift_y=self.shift_y_, resampling=self.resampling)
        return subtract_surface(moved, center=self.center_, scale=self.scale_, terms=self.terms_, coefs=self.coefs_)

    def _restore(self, learned: dict[str, Any]) -> None:
        super()._restore(learned)
        if "coefs_" in learned:
            self.coefs_ = np.asarray(learned["coefs_"], dtype=np.float64)
