"""Affine (translation) coregistrations: :class:`VerticalShift` and :class:`NuthKaab`.

Both learn a translation ``(shift_x_, shift_y_, shift_z_)`` to APPLY to the to-be-aligned
DEM: ``aligned(x, y) = tba(x - shift_x, y - shift_y) + shift_z``. Applying resamples the
DEM once with a NaN-local kernel over ``map_overlap`` (or, with ``resample=False``, moves
the geotransform and keeps the data exact).
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Literal

import dask
import dask.array as da
import numpy as np
import xarray as xr

from xdem import stats
from xdem.coreg._data import SharedPoints
from xdem.coreg._iterate import Iterations, check_divergence_params, iterate_shift, nmad_ratio
from xdem.coreg._matrix import as_centre
from xdem.coreg._point_sample import PointSample, ShiftSample, reversed_history
from xdem.coreg._shift import check_resampling, shift_dem, translation_matrix
from xdem.coreg.base import METHODS, Coreg, FitData, PointFitData, register
from xdem.errors import FlatTerrainWarning, InputError, NotEnoughDataError
from xdem.io.grid import grid_shape
from xdem.kernels.nuth_kaab import nuth_kaab_step as _nuth_kaab_step
from xdem.sampling import sample_valid
from xdem.typing import CRSLike
from xdem.warp import FrameOp

__all__ = ["AffineCoreg", "VerticalShift", "NuthKaab", "shift_dem", "translation_matrix"]  # the last two: from _shift


def check_iteration_params(*, resampling: str, max_iterations: int, tolerance: float) -> None:
    """Validate the hyper-parameters shared by the iterative shift estimators."""
    check_resampling(resampling)
    if int(max_iterations) < 1:
        raise InputError(f"max_iterations must be >= 1, got {max_iterations}")
    if not tolerance > 0:
        raise InputError(f"tolerance must be > 0 (pixels), got {tolerance}")


class AffineCoreg(Coreg):
    """A coregistration that is a translation ``(shift_x_, shift_y_, shift_z_)``."""

    #: What it can do (:class:`~xdem.coreg.Capabilities`).
    tags = Coreg.tags.but(affine=True, in_frame=True, blockwise_step=True, moves_points=True)
    resampling: str  # set by each subclass (class attribute or __init__)
    shift_x_: float
    shift_y_: float
    shift_z_: float

    def to_translations(self) -> tuple[float, float, float]:
        """``(shift_x, shift_y, shift_z)`` to apply to the to-be-aligned DEM."""
        self._check_fitted()
        return (float(self.shift_x_), float(self.shift_y_), float(self.shift_z_))

    def to_rotations(self, degrees: bool = True) -> tuple[float, float, float]:
        """``(0, 0, 0)``: a translation does not rotate (upstream's ``to_rotations`` of it)."""
        self._check_fitted()
        return (0.0, 0.0, 0.0)

    def to_matrix(self, *, centre: Sequence[float] | Literal["centroid"] | None = None) -> np.ndarray:
        """4 x 4 affine matrix of the translation (numpy). A translation's matrix is the same
        about any point: ``centre`` (as in :meth:`~xdem.coreg.RigidCoreg.to_matrix`) is only
        checked."""
        if centre is not None and not (isinstance(centre, str) and centre == "centroid"):
            as_centre(centre)
        return translation_matrix(*self.to_translations())

    @classmethod
    def from_matrix(cls, matrix: np.ndarray | Sequence[Sequence[float]], *, centroid: Sequence[float] | None = None,
                    centre: Sequence[float] | None = None, crs: CRSLike | None = None) -> AffineCoreg:
        """Upstream's ``AffineCoreg.from_matrix``: a fitted, applicable
        :class:`~xdem.coreg.RigidTransform` (see :meth:`xdem.coreg.RigidCoreg.from_matrix`)."""
        given: AffineCoreg = METHODS["rigidtransform"].from_matrix(matrix, centroid=centroid, centre=centre, crs=crs)  # type: ignore[attr-defined]
        return given

    @classmethod
    def from_translations(cls, x: float = 0.0, y: float = 0.0, z: float = 0.0, *, crs: CRSLike | None = None,
                          x_off: float | None = None, y_off: float | None = None,
                          z_off: float | None = None) -> AffineCoreg:
        """Upstream's ``from_translations(x_off, y_off, z_off)``: a fitted translation
        (:meth:`xdem.coreg.RigidCoreg.from_translations`)."""
        given: AffineCoreg = METHODS["rigidtransform"].from_translations(  # type: ignore[attr-defined]
            x, y, z, crs=crs, x_off=x_off, y_off=y_off, z_off=z_off)
        return given

    @classmethod
    def from_rotations(cls, rx: float = 0.0, ry: float = 0.0, rz: float = 0.0, *, degrees: bool = True,
                       translation: Sequence[float] = (0.0, 0.0, 0.0), centroid: Sequence[float] = (0.0, 0.0, 0.0),
                       crs: CRSLike | None = None, x_rot: float | None = None, y_rot: float | None = None,
                       z_rot: float | None = None, use_degrees: bool | None = None) -> AffineCoreg:
        """Upstream's ``from_rotations(x_rot, y_rot, z_rot, use_degrees)``: a fitted rotation
        (:meth:`xdem.coreg.RigidCoreg.from_rotations`)."""
        given: AffineCoreg = METHODS["rigidtransform"].from_rotations(  # type: ignore[attr-defined]
            rx, ry, rz, degrees=degrees, translation=translation, centroid=centroid, crs=crs, x_rot=x_rot,
            y_rot=y_rot, z_rot=z_rot, use_degrees=use_degrees)
        return given

    def _frame_op(self) -> FrameOp:
        frame = vars(self).get("crs_")  # None: loaded from a JSON without it, applies in the DEM's CRS
        return FrameOp(str(frame) if frame is not None else "", shift=self.to_translations())

    def _apply(self, dem: xr.DataArray, bias_vars: dict[str, xr.DataArray], resample: bool) -> xr.DataArray:
        sx, sy, sz = self.to_translations()
        return shift_dem(dem, shift_x=sx, shift_y=sy, shift_z=sz, resampling=self.resampling, resample=resample)


@register
class VerticalShift(AffineCoreg):
    """Vertical shift: a statistic (median by default) of ``dh = tba - ref``.

    With ``subsample=1`` (the default: every valid pixel) and the median or the mean, the
    statistic is exact and computed out of core (the median: a count/min/max pass, then
    :func:`xdem.stats.median`'s histogram refinement, 2 to 4 passes in all; the mean: one
    pass), so memory stays bounded on any DEM size. With a smaller subsample, or another
    callable, the values of a reproducible subsample are gathered (one pass, two when few
    pixels are valid: :func:`xdem.sampling.sample_valid`); a callable with ``subsample=1``
    gathers every valid pixel in memory (8 bytes each), so give it a count on large DEMs.

    Parameters
    ----------
    vshift_reduc_func
        Statistic of ``dh`` (``np.median``, ``np.mean`` or any callable on a 1-D array).
    subsample
        Fraction (``<= 1``) or count (``> 1``) of valid pixels used.
    random_state
        Seed of the reproducible subsample.

    Examples
    --------
    >>> import xdem
    >>> ref, tba, truth = xdem.examples.example_pair(mode="transform", shift_x=0, shift_y=0)
    >>> vs = VerticalShift().fit(ref, tba)
    >>> round(vs.shift_z_, 6) == round(truth["shift_z"], 6)
    True
    """

    #: What it can do (:class:`~xdem.coreg.Capabilities`).
    tags = AffineCoreg.tags.but(removes_median=True, fits_points=True)
    _callable_params = ("vshift_reduc_func",)
    resampling = "bilinear"

    def __init__(
        self,
        *,
        vshift_reduc_func: Callable[[np.ndarray], float] = np.median,
        subsample: float | int = 1.0,
        random_state: int | None = None,
    ) -> None:
        self.vshift_reduc_func = vshift_reduc_func
        self.subsample = subsample
        self.random_state = random_state

    def _fit(self, data: FitData) -> None:
        func = self.vshift_reduc_func
        self.shift_x_ = 0.0
        self.shift_y_ = 0.0
        if _all_pixels(self.subsample) and func in _EXACT_REDUCERS:
            # every valid pixel: an exact out-of-core statistic, nothing gathered in memory
            valid = data.valid()
            dh = da.where(valid, data.tba.data.astype(np.float64) - data.ref.data.astype(np.float64), np.nan)
            mean = _EXACT_REDUCERS[func] == "mean"
            if mean:
                count, total = dask.compute(valid.sum(), da.nansum(dh))
            else:
                st = stats._run_stats(dh, ())  # (count, min, max): the median's first pass
                count = st[0]
            if count < 1:
                raise NotEnoughDataError(
                    f"VerticalShift needs at least 1 valid pixels but found 0 of {valid.size} (valid = finite in both "
                    "DEMs and inside the inlier mask); check the overlap, the nodata value and the inlier mask"
                )
            value = float(total) / int(count) if mean else stats.median(dh, _stats=st)
            self.shift_z_ = -float(value)
            self.count_ = int(count)
            return
        s = sample_valid(
            data.valid(), {"dh": data.tba.data - data.ref.data}, subsample=self.subsample,
            random_state=self.random_state, min_count=1, what="VerticalShift",
        )
        self.shift_z_ = -float(func(s["dh"]))
        self.count_ = int(len(s["dh"]))


    def _fit_points(self, data: PointFitData) -> None:
        """On points: ``vshift_reduc_func`` of the inliers' ``dh`` at the drawn points."""
        ps = PointSample.from_points(data, subsample=self.subsample, random_state=self.random_state,
                                     what="VerticalShift")
        dh, fin = ps.dh(need=1)
        ok = ps.inliers(dh, fin)
        self.shift_x_ = 0.0
        self.shift_y_ = 0.0
        self.shift_z_ = -float(self.vshift_reduc_func(dh[ok]))
        self.count_ = int(ok.sum())
        vars(self).update(ps.counts(fin, ok))


def _all_pixels(subsample: float | int) -> bool:
    """Whether ``subsample`` means every valid pixel (the fraction 1)."""
    return isinstance(subsample, (float, int, np.floating, np.integer)) and not isinstance(subsample, bool) and subsample == 1


#: Statistics computed exactly out of core when every pixel is used.
_EXACT_REDUCERS: dict[Any, str] = {np.median: "median", np.nanmedian: "median", np.mean: "mean", np.nanmean: "mean"}


# ---------------------------------------------------------------------------------------------
# Nuth & Kääb
# ---------------------------------------------------------------------------------------------
@register
class NuthKaab(AffineCoreg):
    """Horizontal and vertical shift by Nuth & Kääb (2011), fitted on a subsample.

    On sloped terrain a horizontal shift makes ``dh = tba - ref`` depend on aspect:
    ``dh / tan(slope) = a cos(b - aspect) + c``. The relation is fitted robustly (median of
    ``dh / tan(slope)`` in ``bin_count`` aspect bins, linear least squares on the bins),
    the to-be-aligned DEM is moved by ``(a sin b, a cos b)``, and the step is repeated
    until it is below ``tolerance`` pixels or ``max_iterations`` is reached. The vertical
    shift is then ``vshift_reduc_func(dh)`` at the final horizontal shift. The accumulated
    shift is applied once, by a single resampling.

    Passes over the full data in ``fit``: one to draw the subsample and cut small windows,
    6 x 6 pixels, of both DEMs around the sampled pixels (two when less than about 80 % of
    the pixels are valid, :func:`xdem.sampling.sample_valid`), plus one more only each time
    the shift leaves those windows (more than about 2 pixels from where they were cut):
    usually 1 or 2 passes, whatever ``max_iterations``. Iterations run on the gathered windows in memory (bounded by
    ``subsample``: about 300 bytes per point).

    Slope and aspect of the reference are computed at the sampled pixels only, from their
    3 x 3 neighbourhoods in the windows, with the kernels of :mod:`xdem.terrain` (Horn by
    default): the values equal :func:`xdem.terrain.slope` and :func:`xdem.terrain.aspect`.
    Pixels with a slope below ``min_slope`` degrees do not enter the horizontal fit. If too
    few sloped pixels or aspect directions remain, the horizontal shift is not estimated: a
    :class:`~xdem.errors.FlatTerrainWarning` is emitted, ``horizontal_constrained_`` is False
    and ``shift_x_ = shift_y_ = 0``. Not converging
    emits a :class:`~xdem.errors.ConvergenceWarning` with ``converged_ = False`` when the
    result is usable. Diverging (the shift moving more than a quarter of the DEM's size from
    its start, typically when the DEMs are offset by more than about half their width), or
    stopping unconverged with an unusable result (still moving by more than 0.5 pixel per
    iteration after 3 or more, or having moved more than 2 pixels without bringing the NMAD
    of dh below 0.8 of its start: :func:`xdem.coreg._iterate.not_converged`), raises a
    :class:`~xdem.errors.ConvergenceError` that suggests ``initial_shift``, unless
    ``on_divergence="warn"``.

    Parameters
    ----------
    max_iterations
        Maximum number of iterations.
    tolerance
        Stop when a step is smaller than this, in pixels.
    subsample
        Fraction (``<= 1``) or count (``> 1``) of valid pixels used.
    random_state
        Seed of the reproducible subsample.
    bin_count
        Number of aspect bins.
    min_slope
        Minimum slope (degrees) of pixels entering the horizontal fit.
    vshift_reduc_func
        Statistic of ``dh`` for the vertical shift.
    resampling
        ``"bilinear"`` or ``"cubic"``: used to evaluate the DEM in fit and to apply.
    terrain_method
        Slope/aspect method: ``"horn"`` or ``"zevenbergthorne"``.
    initial_shift
        ``(shift_x, shift_y[, shift_z])`` to start the iterations from (a first estimate of the
        result, in CRS units, same sign convention; ``shift_z`` is accepted as by every affine
        method, but the vertical shift is always estimated at the end); ``None`` starts from 0.
        Pixels are then drawn
        where the moved DEM is valid and the windows are cut around the shifted positions.
        Use it when the DEMs are offset by more than about a quarter of their size. The
        to-be-aligned DEM is first brought onto the reference grid, cropped to where both
        exist: the shifted positions must fall inside that overlap (true for DEMs on one
        grid; a DEM whose geotransform is off by that much is better fixed there).
    offset_threshold
        Upstream's name of ``tolerance`` (pixels, as upstream): used when given.
    bin_sizes
        Upstream's name of ``bin_count`` (an integer): used when given.
    on_divergence
        ``"raise"`` (default): a diverging fit, or one stopped unconverged with an unusable
        result, raises :class:`~xdem.errors.ConvergenceError`.
        ``"warn"``: accept a partial result: a :class:`~xdem.errors.ConvergenceWarning`, the
        horizontal shift is reset to its start (``initial_shift`` or 0), ``converged_`` is
        False, and only the vertical shift is estimated.

    Learned attributes
    ------------------
    shift_x_, shift_y_, shift_z_ : float
        Translation to apply to the to-be-aligned DEM (CRS units).
    n_iterations_ : int
    converged_ : bool
    horizontal_constrained_ : bool
    count_ : int
        Points in the final horizontal fit.
    history_ : list of [shift_x, shift_y]
        Shift after each iteration.
    passes_ : int
        Computes made by the fit.

    Examples
    --------
    >>> import xdem
    >>> ref, tba, truth = xdem.examples.example_pair(mode="transform")
    >>> nk = NuthKaab().fit(ref, tba)
    >>> abs(nk.shift_x_ - truth["shift_x"]) < 0.01
    True
    """

    #: What it can do (:class:`~xdem.coreg.Capabilities`).
    tags = AffineCoreg.tags.but(horizontal=True, removes_median=True, fits_points=True)
    _callable_params = ("vshift_reduc_func",)
    _half: ClassVar[int] = 2  # windows of 6 x 6 pixels around the sampled pixels
    _min_points: ClassVar[int] = 100
    history_labels: ClassVar[tuple[str, ...]] = ("shift_x", "shift_y")

    def __init__(
        self,
        *,
        max_iterations: int = 10,
        tolerance: float = 0.001,
        subsample: float | int = 500_000,
        random_state: int | None = None,
        bin_count: int = 72,
        min_slope: float = 1.0,
        vshift_reduc_func: Callable[[np.ndarray], float] = np.median,
        resampling: str = "bilinear",
        terrain_method: str = "horn",
        initial_shift: tuple[float, ...] | None = None,
        on_divergence: str = "raise",
        offset_threshold: float | None = None,
        bin_sizes: int | None = None,
        bin_before_fit: bool | None = None,
        fit_optimizer: Callable[..., object] | None = None,
        bin_statistic: Callable[[np.ndarray], float] | None = None,
        vertical_shift: bool = True,
    ) -> None:
        self.bin_before_fit = bin_before_fit
        self.fit_optimizer = fit_optimizer
        self.bin_statistic = bin_statistic
        self.vertical_shift = vertical_shift
        self.initial_shift = initial_shift
        self.on_divergence = on_divergence
        self.max_iterations = max_iterations
        self.tolerance = tolerance
        self.subsample = subsample
        self.random_state = random_state
        self.bin_count = bin_count
        self.min_slope = min_slope
        self.vshift_reduc_func = vshift_reduc_func
        self.resampling = resampling
        self.terrain_method = terrain_method
        self.offset_threshold = offset_threshold
        self.bin_sizes = bin_sizes

    def _after_fit(self) -> None:
        """Upstream's ``vertical_shift=False``: the horizontal shift only (``shift_z_ = 0``)."""
        if self.vertical_shift is False:
            self.shift_z_ = 0.0

    def _upstream(self, ours: str, theirs: str) -> int | float:
        """The value of our hyper-parameter ``ours`` or of upstream's name of it, ``theirs``."""
        mine, given = getattr(self, ours), getattr(self, theirs)
        if given is None:
            return mine  # type: ignore[no-any-return]
        default = inspect.signature(type(self).__init__).parameters[ours].default
        if mine != default and mine != given:
            raise InputError(f"{theirs}={given} is upstream's name of {ours}={mine}: give only one of them")
        return given  # type: ignore[no-any-return]

    @property
    def _tolerance(self) -> float:
        return float(self._upstream("tolerance", "offset_threshold"))

    @property
    def _bin_count(self) -> int:
        return int(self._upstream("bin_count", "bin_sizes"))

    def _check_params(self) -> None:
        check_iteration_params(resampling=self.resampling, max_iterations=self.max_iterations, tolerance=self._tolerance)
        if self._bin_count < 3:
            raise InputError(f"bin_count must be >= 3, got {self._bin_count}")
        check_divergence_params(initial_shift=self.initial_shift, on_divergence=self.on_divergence)

    def _fit(self, data: FitData) -> None:
        self._check_params()
        ss = ShiftSample.from_pair(data, self, what="Nuth & Kääb")
        self._fit_on_sample(ss.ref, ss.slope, ss.aspect, ss.sampler, resolution=ss.resolution,
                            shape=grid_shape(ss.grid), start=ss.start)
        self.passes_ = int(ss.passes)
        if data.collect_points:  # a pipeline asks: its next step may fit on these points
            assert ss.rows is not None and ss.cols is not None
            self._shared_points = SharedPoints(ss.rows, ss.cols, ss.ref, ss.sampler, self.subsample,
                                               self.random_state)

    def _fit_points(self, data: PointFitData) -> None:
        """On points (:mod:`xdem.coreg._point_sample`): the iterations of the DEM route on the
        DEM's windows cut at the points (one pass), with its slope and aspect there, then a
        second run without the outliers from the first result; reversed for points to align."""
        self._check_params()
        ss = ShiftSample.from_points(data, self, what="Nuth & Kääb")
        ps = ss.points
        assert ps is not None
        shape = grid_shape(ss.grid)
        self._fit_on_sample(ss.ref, ss.slope, ss.aspect, ss.sampler, start=ss.start, resolution=ss.resolution,
                            shape=shape)
        residual = ss.sampler(self.shift_x_, self.shift_y_) - ss.ref
        fin = np.isfinite(residual)
        ok = ps.inliers(residual, fin)
        if ps.has_outliers(fin, ok):
            history, iterations = list(self.history_), int(self.n_iterations_)
            self._fit_on_sample(ss.without(ok), ss.slope, ss.aspect, ss.sampler, resolution=ss.resolution,
                                shape=shape, start=(float(self.shift_x_), float(self.shift_y_)))
            self.history_ = history + list(self.history_)
            self.n_iterations_ = iterations + int(self.n_iterations_)
        if not data.points_are_ref:
            self.shift_x_, self.shift_y_, self.shift_z_ = -self.shift_x_, -self.shift_y_, -self.shift_z_
            self.history_ = reversed_history(self.history_)
        self.passes_ = int(ss.passes)
        vars(self).update(ps.counts(fin, ok))

    # learned attributes set by _fit_on_sample (both routes), read by _fit_points
    history_: list[list[float]]
    n_iterations_: int

    def _fit_on_sample(self, ref: np.ndarray, slope: np.ndarray, aspect: np.ndarray,
                       evaluate: Callable[[float, float], np.ndarray], *, resolution: tuple[float, float],
                       shape: tuple[int, int], start: tuple[float, float]) -> None:
        """The iterations on a gathered sample (pixels of a reference DEM, or points): ``ref``
        the reference elevations, ``slope``/``aspect`` (degrees) there, ``evaluate(sx, sy)``
        the to-be-aligned DEM moved by the shift at the same places."""
        dx, dy = resolution
        sloped = np.isfinite(slope) & np.isfinite(aspect) & (slope >= self.min_slope)
        tan_slope = np.tan(np.radians(slope))
        asp = np.radians(aspect)
        used = {"n_fit": 0}

        def step(sx: float, sy: float) -> tuple[float, float] | None:
            dh = evaluate(sx, sy) - ref
            ok = sloped & np.isfinite(dh)
            used["n_fit"] = n_fit = int(ok.sum())
            if n_fit < self._min_points:
                raise NotEnoughDataError(
                    f"Nuth & Kääb: only {n_fit} sampled pixels remain valid at shift ({sx:.3f}, {sy:.3f}) "
                    f"(need {self._min_points}); the DEMs barely overlap or the shift is too large"
                )
            east, north, n_bins = _nuth_kaab_step(dh[ok], tan_slope[ok], asp[ok], n_bins=self._bin_count,
                                                  min_bin_count=10)
            if not np.isfinite(east) or n_bins < max(3, self._bin_count // 8):
                return None  # too few aspect directions
            return -east, -north

        constrained = int(sloped.sum()) >= self._min_points
        run = Iterations(start, [], 0, converged=False, constrained=False)
        if constrained:
            run = iterate_shift(
                step, what="Nuth & Kääb", start=start, resolution=(dx, dy), shape=shape,
                max_iterations=int(self.max_iterations), tolerance=self._tolerance,
                on_divergence=self.on_divergence, spread_ratio=lambda a, b: nmad_ratio(evaluate, ref, a, b),
            )
        if not run.constrained:
            warnings.warn(
                f"the terrain is too flat to estimate a horizontal shift ({int(sloped.sum())} sampled pixels steeper "
                f"than {self.min_slope} degrees, or too few aspect directions); only the vertical shift is estimated",
                FlatTerrainWarning, stacklevel=5,
            )
        sx, sy = run.shift
        history, iterations, converged, constrained, n_fit = (
            run.history, run.n_iterations, run.converged, run.constrained, used["n_fit"])
        dh = evaluate(sx, sy) - ref
        fin = np.isfinite(dh)
        if not fin.any():
            raise NotEnoughDataError("Nuth & Kääb: no valid elevation difference at the final shift")
        self.shift_x_ = float(sx)
        self.shift_y_ = float(sy)
        self.shift_z_ = -float(self.vshift_reduc_func(dh[fin]))
        self.n_iterations_ = int(iterations)
        self.converged_ = bool(converged)
        self.horizontal_constrained_ = bool(constrained)
        self.count_ = int(n_fit)
        self.history_ = history
