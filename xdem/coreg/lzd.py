"""LZD: rigid coregistration by least squares on the elevation differences, linearised with the
reference's gradients (Rosenholm & Torlegård 1988)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from xdem.coreg._data import PointFitData
from xdem.coreg._iterate import (
    DIVERGENCE_FRACTION,
    ITERATION_LOG,
    check_divergence_params,
    initial_shift_of,
    not_converged,
)
from xdem.coreg._point_sample import PointSample
from xdem.coreg._rigid_sample import RigidSample, moved_gradient
from xdem.coreg._shift import check_resampling
from xdem.coreg.base import FitData, register
from xdem.coreg.rigid import RigidCoreg
from xdem.errors import ConvergenceError, ConvergenceWarning, FlatTerrainWarning, InputError, NotEnoughDataError
from xdem.io.grid import check_projected, get_resolution, grid_shape
from xdem.kernels.interp import FIT_INTERPOLATION, FIT_INTERPOLATIONS, footprint
from xdem.kernels.lzd import increment_matrix, lzd_step, step_motion
from xdem.kernels.rigid import rigid_matrix, rotation_matrix, rotations_of, split_matrix
from xdem.kernels.robust import nmad
from xdem.warp import crs_key

__all__ = ["LZD"]

#: Unknowns solved for (indices into :data:`xdem.kernels.lzd.UNKNOWNS`): all six; translation
#: only; and what flat terrain still constrains (the tilts and the vertical shift), with and
#: without rotations.
_ALL, _TRANSLATION, _FLAT, _FLAT_TRANSLATION = (0, 1, 2, 3, 4, 5), (3, 4, 5), (0, 1, 5), (5,)
#: The terrain constrains the horizontal unknowns when the column-normalised design of the
#: kept points has a condition number below this (flat or planar terrain: infinite or huge).
_MAX_CONDITION = 1e4
#: ... and at least this many sampled points are steeper than ``_MIN_SLOPE`` degrees.
_MIN_SLOPE = 1.0
#: LZD on points takes the moved DEM's gradient again when the transform has moved a point by
#: more than this (pixels) since it was last taken.
REGRADIENT_PX = 0.05


@register
class LZD(RigidCoreg):
    """Rigid coregistration (3 rotations, 3 translations) by the least-squares method of
    Rosenholm & Torlegård (1988), fitted on a subsample.

    The to-be-aligned DEM, moved by the current rigid transform, is evaluated above each
    sampled reference pixel (its moved surface there: the source position depends on the
    moved elevation under rotations about x and y and is solved per point); the residuals
    ``r = moved - ref`` are linearised in a small rotation about the centroid of the sampled
    points and a translation with the reference's gradient, solved in least squares with
    outlier rejection, and the increment is composed exactly with the transform
    (:mod:`xdem.kernels.lzd`). The iterations stop when a step moves no sampled point by
    more than ``tolerance`` pixels (usually after 3 to 5 steps). Near the solution the
    residuals are those of the interpolation and of the data alone: unlike Nuth & Kääb's
    aspect bins, the estimate has no bias of its own on rough terrain (and with
    ``only_translation=True`` the same least squares refine a translation).

    The fit evaluates the moved DEM between pixels with the 4-point Lagrange interpolation
    (:data:`xdem.kernels.interp.FIT_INTERPOLATION`), whatever ``resampling``: cubic
    convolution and bilinear interpolation displace the phase of short waves by up to 0.01
    pixel depending on the fraction of a pixel (:mod:`xdem.kernels.interp`), which a pure
    shift on steep terrain turns into a bias of about 0.001 pixel; the Lagrange
    interpolation, with the same 4 x 4 footprint, leaves about 0.0001 pixel on terrain whose
    shortest waves are 8 pixels or more. On rougher terrain, whose spectrum reaches 2 to 3
    pixels, it still leaves about 0.0015 pixel (0.007 m at 5 m pixels);
    ``fit_interpolation="lagrange8"`` (8 x 8 points, windows of 10 x 10 pixels) brings that to
    about 0.0004 pixel, at up to twice the fit's CPU time and 2.8 times the memory of the windows
    (``docs/rigid.md``, section Rough terrain).

    ``resampling`` (``apply``) defaults to ``"cubic"``: resampling sets a floor under the
    residuals after ``apply``; on terrain with waves down to 50 m at 5 m pixels it is
    0.072 m NMAD with bilinear interpolation and 0.003 m with cubic convolution.

    Passes over the full data in ``fit``: one to draw the subsample with small windows
    (6 x 6 pixels) of both DEMs around each sampled pixel (two when less than about 80 % of
    the pixels are valid, :func:`xdem.sampling.sample_valid`), plus one each time some
    points' source positions come within a quarter of a pixel of the edge of what their
    windows can serve, for those points (and the others close to it) only: 2 passes with a
    rotation of a few tenths of a degree (the first step moves the far points by a few
    pixels), 1 for a translation of less than a pixel or for a refinement after Nuth &
    Kääb, whatever ``max_iterations``. Memory is bounded by ``subsample``, not the DEM: the
    draw peaks at about 850 bytes per point (as Nuth & Kääb's), then the iterations run on
    the windows in memory (about 250 bytes per point held).

    Outliers: each step is solved in least squares, the points whose residual after it is
    further than ``outlier_factor`` (3) NMAD from the median are dropped and the step is
    solved again until the kept points no longer change.

    On flat or planar terrain (fewer than 100 sampled points steeper than 1 degree, or a
    design too ill-conditioned to separate the horizontal unknowns), only the tilts (rotations
    about x and y) and the vertical shift are estimated: a
    :class:`~xdem.errors.FlatTerrainWarning`, ``horizontal_constrained_ = False``.
    A fit that diverges (a sampled point moved by more than a quarter of the DEM's size from
    its start) or stops unconverged with an unusable result (still moving by more than 0.5
    pixel after 3 or more iterations, or having moved by more than 2 pixels without bringing
    the NMAD of the residuals below 0.8 of its start: :func:`xdem.coreg._iterate.not_converged`)
    raises a :class:`~xdem.errors.ConvergenceError`, unless ``on_divergence="warn"``; a
    usable unconverged result gives a :class:`~xdem.errors.ConvergenceWarning` and
    ``converged_ = False``.

    Parameters
    ----------
    max_iterations
        Maximum number of least-squares steps.
    tolerance
        Stop when a step moves every sampled point by less than this, in pixels (a rotation
        step below ``tolerance * pixel / distance`` radians for the farthest point).
    subsample
        Fraction (``<= 1``) or count (``> 1``) of valid pixels used.
    random_state
        Seed of the reproducible subsample.
    resampling
        ``"cubic"`` (default) or ``"bilinear"``: the interpolation of ``apply``.
    fit_interpolation
        How the fit evaluates the moved DEM between pixels: ``"lagrange"`` (default, 4 points
        per axis), ``"lagrange6"`` or ``"lagrange8"`` (6 or 8 points: less bias on terrain with
        waves of 2 to 3 pixels, larger windows; :mod:`xdem.kernels.interp`).
    only_translation
        Estimate a translation only (3 unknowns; no rotation).
    outlier_factor
        Points whose residual (after the step's fit) is further than this many NMAD from
        the median are rejected and the step solved again; ``None`` keeps every point.
    initial_shift
        ``(shift_x, shift_y)`` or ``(shift_x, shift_y, shift_z)``: a translation to start from
        (a first estimate of the result, in CRS units, same sign convention as the result);
        ``None`` starts from no motion. Pixels are then drawn where the shifted DEM is valid.
    on_divergence
        ``"raise"`` (default) or ``"warn"``: a diverging or unusable fit raises a
        :class:`~xdem.errors.ConvergenceError`, or, with ``"warn"``, warns and keeps only the
        vertical shift at the start (the transform reset to ``initial_shift``).

    Learned attributes
    ------------------
    matrix_, centroid_, rotation_x_, rotation_y_, rotation_z_, shift_x_, shift_y_, shift_z_
        The rigid transform (:class:`~xdem.coreg.RigidCoreg`); the centroid is that of the
        sampled reference points.
    n_iterations_ : int
    converged_ : bool
    horizontal_constrained_ : bool
    count_ : int
        Points kept in the last step.
    residual_nmad_ : float
        NMAD of ``moved tba - ref`` over the sampled points at the result.
    history_ : list of 6 floats per iteration
        ``[rx, ry, rz (degrees), shift_x, shift_y, shift_z]`` after each step.
    passes_ : int
        Computes made by the fit.

    Examples
    --------
    >>> import xdem
    >>> ref, tba, truth = xdem.examples.example_pair(mode="transform")
    >>> lzd = LZD(subsample=20_000).fit(ref, tba)
    >>> abs(lzd.shift_x_ - truth["shift_x"]) < 0.01, lzd.passes_ <= 3
    (True, True)
    """

    #: What it can do (:class:`~xdem.coreg.Capabilities`).
    tags = RigidCoreg.tags.but(horizontal=True, fits_points=True, initial_shift=True)
    _half: ClassVar[int] = 2  # windows of 6 x 6 pixels around the sampled pixels (4-point fit interpolation)
    _min_points: ClassVar[int] = 100
    history_labels: ClassVar[tuple[str, ...]] = ("rotation_x", "rotation_y", "rotation_z", "shift_x", "shift_y", "shift_z")

    def __init__(
        self,
        *,
        max_iterations: int = 30,
        tolerance: float = 0.001,
        subsample: float | int = 500_000,
        random_state: int | None = None,
        resampling: str = "cubic",
        only_translation: bool = False,
        outlier_factor: float | None = 3.0,
        initial_shift: tuple[float, float] | tuple[float, float, float] | None = None,
        on_divergence: str = "raise",
        fit_minimizer: Callable[..., object] | None = None,
        fit_loss_func: str | None = None,
        fit_interpolation: str = FIT_INTERPOLATION,
    ) -> None:
        self.fit_minimizer = fit_minimizer
        self.fit_loss_func = fit_loss_func
        self.max_iterations = max_iterations
        self.tolerance = tolerance
        self.subsample = subsample
        self.random_state = random_state
        self.resampling = resampling
        self.only_translation = only_translation
        self.outlier_factor = outlier_factor
        self.initial_shift = initial_shift
        self.on_divergence = on_divergence
        self.fit_interpolation = fit_interpolation

    # --- parameters ---------------------------------------------------------------------
    def _check_params(self) -> tuple[float, float, float]:
        """Validate the hyper-parameters; returns the starting translation."""
        check_resampling(self.resampling)
        if isinstance(self.max_iterations, bool) or not isinstance(self.max_iterations, (int, np.integer)) \
                or self.max_iterations < 1:
            raise InputError(f"max_iterations must be an integer >= 1, got {self.max_iterations!r}")
        if not _positive(self.tolerance):
            raise InputError(f"tolerance must be a number > 0 (pixels), got {self.tolerance!r}")
        if self.outlier_factor is not None and not _positive(self.outlier_factor):
            raise InputError(f"outlier_factor must be a number > 0 (NMADs) or None, got {self.outlier_factor!r}")
        if not isinstance(self.only_translation, (bool, np.bool_)):
            raise InputError(f"only_translation must be True or False, got {self.only_translation!r}")
        check_divergence_params(initial_shift=self.initial_shift, on_divergence=self.on_divergence)
        if self.fit_interpolation not in FIT_INTERPOLATIONS:
            raise InputError(f"fit_interpolation must be one of {', '.join(map(repr, FIT_INTERPOLATIONS))}, got "
                             f"{self.fit_interpolation!r}")
        return initial_shift_of(self.initial_shift)

    def _window_half(self) -> int:
        """``half`` of the fit's windows: as much room either way as the 4-point default has."""
        return max(self._half, footprint(self.fit_interpolation)[0] + 1)

    # --- fit ----------------------------------------------------------------------------------
    def _fit_points(self, data: PointFitData) -> None:
        """On points (:mod:`xdem.coreg._point_sample`): the DEM moved onto the points (their
        positions are the sampled positions, their elevations the reference:
        :meth:`RigidSample.from_points <xdem.coreg._rigid_sample.RigidSample.from_points>`),
        the steps of the DEM route on them with the moved DEM's gradient, taken again as it
        moves (:class:`_PointRun`), refitted without the outlying residuals. The fit of
        ``(points, dem)`` is that transform; the fit of ``(dem, points)`` its inverse (the
        gradient used is then the reference DEM's at the points)."""
        shift = self._check_params()
        ps = PointSample.from_points(data, subsample=self.subsample, random_state=self.random_state, what="LZD")
        m0 = np.eye(4)
        m0[:3, 3] = np.asarray(shift) * ps.sign  # the DEM moves: reversed for (dem, points)
        ss = RigidSample.from_points(ps, start=m0, min_count=self._min_points, half=self._window_half(),
                                     interpolation=self.fit_interpolation)
        unknowns = self._unknowns(ss)
        pixel, shape = float(np.mean(get_resolution(data.dem))), grid_shape(data.dem)
        run = _PointRun(self, ss, m0, unknowns, pixel=pixel, shape=shape, z=ps.points.z)
        matrix = run.iterate()
        history, iterations = list(run.history), run.iterations
        residual = run.residuals(matrix)
        fin = np.isfinite(residual)
        ok = ps.inliers(residual, fin)
        if ps.has_outliers(fin, ok):
            ss.ref = np.where(ok, ss.ref, np.nan)
            run = _PointRun(self, ss, matrix, unknowns, pixel=pixel, shape=shape, z=ps.points.z, at=run.at)
            matrix = run.iterate()
            history += run.history
            iterations += run.iterations
        if not data.points_are_ref:
            matrix = np.linalg.inv(matrix)
            history = _inverse_history(history, ss.centre)
        rotation, translation = split_matrix(matrix, ss.centre)
        self._set_transform(np.eye(3) if self.only_translation else rotation, translation, ss.centre)
        self.n_iterations_ = int(iterations)
        self.converged_ = run.converged
        self.horizontal_constrained_ = unknowns in (_ALL, _TRANSLATION)
        self.count_ = run.count
        self.residual_nmad_ = run.final_spread
        self.history_ = history
        self.passes_ = int(ss.sampler.reads)
        vars(self).update(ps.counts(fin, ok))

    def _fit(self, data: FitData) -> None:
        self._fit_from(data, np.eye(4))

    def fit_after(self, data: FitData, prior: np.ndarray) -> LZD:
        """Fit on a to-be-aligned DEM that earlier steps move by the rigid 4 x 4 matrix ``prior``,
        WITHOUT resampling it first: the fit starts from ``prior`` (then ``initial_shift``) on
        ``data.tba`` as it is, and learns the transform to apply after ``prior`` (the total
        times ``inv(prior)``), what fitting on the moved DEM would learn. A pipeline uses it so
        that a refinement after Nuth & Kääb (or any rigid step) sees the original DEM, not one
        already resampled (bilinear resampling moves rough terrain's phase by up to 0.01 pixel:
        :mod:`xdem.kernels.interp`)."""
        self._reset()
        self._fit_from(data, np.asarray(prior, dtype=np.float64))
        self.crs_ = crs_key(data.ref.rio.crs)
        return self

    def _fit_from(self, data: FitData, prior: np.ndarray) -> None:
        shift = self._check_params()
        check_projected(data.ref, "LZD")
        start = np.eye(4)
        start[:3, 3] = shift
        start = start @ prior
        ss = RigidSample.from_pair(data, subsample=self.subsample, random_state=self.random_state,
                                   min_count=self._min_points, what="LZD", start=start, half=self._window_half(),
                                   interpolation=self.fit_interpolation)
        unknowns = self._unknowns(ss)
        run = _Run(self, ss, start, unknowns, pixel=float(np.mean(get_resolution(data.ref))),
                   shape=grid_shape(data.ref), prior=prior)
        rotation, translation = split_matrix(run.iterate() @ np.linalg.inv(prior), ss.centre)
        if self.only_translation:
            rotation = np.eye(3)
        self._set_transform(rotation, translation, ss.centre)
        self.n_iterations_ = run.iterations
        self.converged_ = run.converged
        self.horizontal_constrained_ = unknowns in (_ALL, _TRANSLATION)
        self.count_ = run.count
        self.residual_nmad_ = run.final_spread
        self.history_ = run.history
        self.passes_ = int(ss.passes)

    def _unknowns(self, ss: RigidSample) -> tuple[int, ...]:
        """The unknowns the terrain constrains (see the class notes), warning on flat terrain."""
        full = _TRANSLATION if self.only_translation else _ALL
        fin = np.isfinite(ss.gx) & np.isfinite(ss.gy)
        sloped = int(np.count_nonzero(np.hypot(ss.gx[fin], ss.gy[fin]) >= math.tan(math.radians(_MIN_SLOPE))))
        d = np.vstack([ss.x - ss.centre[0], ss.y - ss.centre[1], ss.ref - ss.centre[2]])
        probe = lzd_step(np.zeros(len(ss.x)), d, ss.gx, ss.gy, scale=_spread(ss), unknowns=full, outlier_factor=None)
        if sloped >= self._min_points and probe.condition < _MAX_CONDITION:
            return full
        warnings.warn(
            f"LZD: the terrain is too flat or too planar to estimate a horizontal motion ({sloped} sampled points "
            f"steeper than {_MIN_SLOPE} degree(s), condition {probe.condition:.3g}); only the "
            + ("vertical shift is" if self.only_translation else "tilts (rotations about x and y) and the vertical shift are")
            + " estimated", FlatTerrainWarning, stacklevel=6)
        return _FLAT_TRANSLATION if self.only_translation else _FLAT


class _Run:
    """The iterations of one LZD fit, on the sample in memory."""

    def __init__(self, est: LZD, ss: RigidSample, m0: np.ndarray, unknowns: tuple[int, ...], *, pixel: float,
                 shape: tuple[int, int], prior: np.ndarray) -> None:
        self.est, self.ss, self.m0, self.unknowns = est, ss, m0, unknowns
        self.after_prior = np.linalg.inv(prior)
        self.pixel, self.shape = pixel, shape
        self.scale = _spread(ss)
        self.iterations = 0
        self.converged = False
        self.count = 0
        self.history: list[list[float]] = []
        self.final_spread = float("nan")
        self._z = ss.ref.copy()  # the last moved elevations: where to look for the sources next

    def residuals(self, matrix: np.ndarray) -> np.ndarray:
        """``moved tba - ref`` at the sampled points."""
        z = self.ss.sampler(matrix, self._z)
        self._z = np.where(np.isfinite(z), z, self._z)
        dz: np.ndarray = z - self.ss.ref
        return dz

    def moved_px(self, matrix: np.ndarray) -> float:
        """Largest distance (pixels) a sampled point is moved by ``matrix`` relative to the start."""
        ss = self.ss
        p = np.vstack([ss.x, ss.y, ss.ref, np.ones_like(ss.x)])
        delta = (matrix - self.m0) @ p
        return float(np.sqrt(np.max(np.sum(delta[:3] ** 2, axis=0)))) / self.pixel

    def iterate(self) -> np.ndarray:
        est, ss = self.est, self.ss
        matrix: np.ndarray = self.m0.copy()
        last = float("nan")
        limit = DIVERGENCE_FRACTION * max(self.shape)
        r = self.residuals(matrix)
        start_spread = _nmad(r)
        for self.iterations in range(1, int(est.max_iterations) + 1):
            d = np.vstack([ss.x - ss.centre[0], ss.y - ss.centre[1], r + ss.ref - ss.centre[2]])
            step = lzd_step(r, d, ss.gx, ss.gy, scale=self.scale, unknowns=self.unknowns,
                            outlier_factor=est.outlier_factor)
            self.count = int(np.count_nonzero(step.inliers))
            if self.count < max(est._min_points, len(self.unknowns)):
                raise NotEnoughDataError(
                    f"LZD: only {self.count} sampled points remain valid after {self.iterations - 1} steps (need "
                    f"{est._min_points}); the DEMs barely overlap or the motion is too large: start closer with "
                    "initial_shift=(dx, dy)")
            matrix = increment_matrix(step.increment, ss.centre) @ matrix
            fin = np.isfinite(r)
            last = float(np.max(step_motion(step.increment, d[:, fin]))) / self.pixel
            self.history.append(_summary(matrix @ self.after_prior, ss.centre))
            ITERATION_LOG.info("LZD: iteration %d: rotations %+.6f/%+.6f/%+.6f degrees, shift %+.4f/%+.4f/%+.4f "
                               "(step %.4f pixel)", len(self.history), *self.history[-1], last)
            moved = self.moved_px(matrix)
            if moved > limit:
                return self._give_up(_divergence(moved, self.iterations))
            r = self.residuals(matrix)
            if last < float(est.tolerance):
                self.converged = True
                break
        else:
            c = np.append(ss.centre, 1.0)
            began, now = self.m0 @ c - c, matrix @ c - c  # motions of the centroid
            reset = not_converged("LZD", step_px=last, moved_px=self.moved_px(matrix),
                                  nmad_ratio=_nmad(r) / start_spread if start_spread > 0 else float("nan"),
                                  sx=float(now[0]), sy=float(now[1]), iterations=self.iterations,
                                  tolerance=float(est.tolerance), start=(float(began[0]), float(began[1])),
                                  on_divergence=est.on_divergence)
            if reset:
                return self._vertical_only()
        self.final_spread = _nmad(r)
        return matrix

    def _give_up(self, message: str) -> np.ndarray:
        if self.est.on_divergence == "raise":
            raise ConvergenceError(message)
        warnings.warn(f"{message}; on_divergence='warn': the transform is reset to its start and only the vertical "
                      "shift is estimated", ConvergenceWarning, stacklevel=7)
        return self._vertical_only()

    def _vertical_only(self) -> np.ndarray:
        """The start moved vertically by the median residual there (the accepted partial result)."""
        self.converged = False
        r = self.residuals(self.m0)
        fin = np.isfinite(r)
        if not fin.any():
            raise NotEnoughDataError("LZD: no valid elevation difference at the start transform")
        matrix: np.ndarray = self.m0.copy()
        matrix[2, 3] -= float(np.median(r[fin]))
        self.count = int(np.count_nonzero(fin))
        self.final_spread = _nmad(r)
        return matrix


class _PointRun(_Run):
    """The iterations of LZD on points: the moved DEM's gradient at the points is taken again
    once the transform has moved some point by more than :data:`REGRADIENT_PX` since it was
    last taken (near the solution the steps are far smaller). ``at`` holds the transform it
    was last taken at, shared by a refit."""

    def __init__(self, est: LZD, ss: RigidSample, m0: np.ndarray, unknowns: tuple[int, ...], *, pixel: float,
                 shape: tuple[int, int], z: np.ndarray, at: list[np.ndarray] | None = None) -> None:
        super().__init__(est, ss, m0, unknowns, pixel=pixel, shape=shape, prior=np.eye(4))
        self.at = [m0] if at is None else at
        centre = ss.centre
        self._p = np.vstack([ss.x - centre[0], ss.y - centre[1], z - centre[2], np.ones(len(ss.x))])
        self._p[:3][:, ~np.isfinite(z)] = 0.0

    def residuals(self, matrix: np.ndarray) -> np.ndarray:
        r = super().residuals(matrix)
        c = np.eye(4)
        c[:3, 3] = self.ss.centre
        delta = ((matrix - self.at[0]) @ c) @ self._p
        if float(np.sqrt(np.max(np.sum(delta[:3] ** 2, axis=0)))) > REGRADIENT_PX * self.pixel:
            self.ss.gx, self.ss.gy = moved_gradient(self.ss.sampler, matrix, self._z, 0.5 * self.pixel)
            self.at[0] = matrix.copy()
        return r


def _inverse_history(history: list[list[float]], centre: np.ndarray) -> list[list[float]]:
    """``[rx, ry, rz, sx, sy, sz]`` summaries of the inverses of the summarised transforms."""
    out = []
    for h in history:
        m = np.linalg.inv(rigid_matrix(rotation_matrix(*h[:3]), np.asarray(h[3:], dtype=np.float64), centre))
        r, t = split_matrix(m, centre)
        out.append([*rotations_of(r), *(float(v) for v in t)])
    return out


def _divergence(moved_px: float, iterations: int) -> str:
    return (f"LZD diverged: a sampled point moved by {moved_px:.1f} pixels after {iterations} steps, more than a quarter "
            "of the DEM's size; if the DEMs really are that far apart, start from an estimate with initial_shift=(dx, dy) "
            "(e.g. from NuthKaab), otherwise check the inlier mask and the terrain, or accept a partial result with "
            "on_divergence='warn'")


def _summary(matrix: np.ndarray, centre: np.ndarray) -> list[float]:
    r, t = split_matrix(matrix, centre)
    return [*rotations_of(r), *(float(v) for v in t)]


def _spread(ss: RigidSample) -> float:
    """RMS horizontal distance of the sampled points from the centre (the rotations' scale)."""
    s = float(np.sqrt(np.mean((ss.x - ss.centre[0]) ** 2 + (ss.y - ss.centre[1]) ** 2)))
    return s if s > 0 else 1.0


def _nmad(r: np.ndarray) -> float:
    fin = np.isfinite(r)
    return nmad(r[fin]) if fin.any() else float("nan")


def _positive(v: object) -> bool:
    return bool(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and math.isfinite(v)
                and v > 0)
