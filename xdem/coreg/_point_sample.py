"""The points route's sample: the points ARE the sample (DESIGN.md, seam 1).

A method is a kernel (:mod:`xdem.kernels`), an estimator module owning both of its fit routes
(``_fit`` on a DEM pair, ``_fit_points`` on points) and the sample constructors that feed the
same estimator code from either route: :class:`PointSample` here (``from_points``), with
:class:`ShiftSample` (``from_pair`` / ``from_points``) for the shift family
(:class:`~xdem.coreg.NuthKaab`, :class:`~xdem.coreg.NuthKaabDeramp`) and
:class:`xdem.coreg._rigid_sample.RigidSample` for :class:`~xdem.coreg.LZD`.

The DEM is evaluated at the points out of core (:mod:`xdem.points.bucket`: the points are
bucketed by chunk in one pass, one task per chunk holding points), with the fits'
interpolation (:data:`xdem.kernels.interp.FIT_INTERPOLATION`, 4-point Lagrange: little phase
error between pixels) at the points' exact, fractional positions, the DEM's values being at
pixel centres. The estimators' kernels then run unchanged on those arrays.

Conventions. Elevation differences are ``dh = tba - ref`` as everywhere. Whichever side the
points are on, the DEM is the one moved while fitting by the translation estimators (its
windows are in memory, the points are exact); a fit of ``(dem, points)`` is that of
``(points, dem)`` reversed, which for a translation is its negative (:attr:`PointSample.sign`).
The rigid methods move the side they naturally move (ICP the points, LZD and DhMinimize the
DEM) and invert the result when that side is the reference: the fitted transform always maps
the to-be-aligned side onto the reference, in the DEM's CRS (docs/rigid.md "transform
convention").

Outliers (clouds, blunders): after a first fit, points whose residual is more than
``outlier_nmad`` NMADs from the median are rejected, iterated
(:func:`xdem.kernels.robust.nmad_inliers`, :meth:`PointSample.inliers`), and the fit is
repeated on the rest from the first result (each rigid method keeps its own robust step on
top: ICP's ``rejection_factor``, LZD's ``outlier_factor``, DhMinimize's NMAD spread). The
counts are learned attributes (:meth:`PointSample.counts`): ``n_points_`` (read),
``n_outside_`` (drawn points with no valid DEM value: outside the DEM, on nodata or outside
the inlier mask), ``n_outliers_`` (rejected).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr

from xdem.coreg._data import FitData, PointFitData, ShiftSampler
from xdem.coreg._iterate import check_divergence_params
from xdem.coreg._windows import ShiftEstimator, shift_fit_sample, terrain_at_windows
from xdem.errors import NotEnoughDataError
from xdem.io.grid import get_resolution, get_transform, signed_resolution
from xdem.kernels.interp import FIT_INTERPOLATION
from xdem.kernels.robust import nmad_inliers
from xdem.points.bucket import PointSampler, dem_at_points, pixel_positions
from xdem.points.read import PointSet
from xdem.sampling import DEFAULT_SEED, resolve_count

__all__ = ["PointSample", "ShiftSample", "draw_points", "reversed_history"]


def draw_points(points: PointSet, subsample: float | int, random_state: int | None) -> PointSet:
    """A reproducible subsample of the points (all of them for ``subsample`` 1 or a count
    at least their number); the drawn points keep their input order.

    Examples
    --------
    >>> pts = PointSet(np.arange(5.0), np.zeros(5), np.ones(5), crs="EPSG:32633")
    >>> draw_points(pts, 3, 0).count, draw_points(pts, 1.0, 0) is pts
    (3, True)
    """
    n = points.count
    count = resolve_count(subsample, n)
    if count >= n:
        return points
    rng = np.random.default_rng(DEFAULT_SEED if random_state is None else int(random_state))
    return points.take(np.sort(rng.choice(n, size=count, replace=False)))


@dataclass
class PointSample:
    """The drawn points of a fit on points, and the shared work of that route.

    Build it with :meth:`from_points`. ``data`` is the fit's input (the DEM, its values with
    NaN outside the inlier mask, the points, which side they are on, ``outlier_nmad``),
    ``points`` the drawn points and ``what`` the method's name for error messages.

    Examples
    --------
    >>> import dask.array as da
    >>> import xarray as xr
    >>> from xdem.coreg._data import PointFitData
    >>> dem = xr.DataArray(da.zeros((10, 10), chunks=5), dims=("y", "x"),
    ...                    coords={"y": -np.arange(10) - 0.5, "x": np.arange(10) + 0.5}).rio.write_crs("EPSG:32633")
    >>> pts = PointSet(np.array([3.5, 5.2, 99.0]), np.array([-3.5, -4.7, -1.0]), np.array([1.0, 2.0, 3.0]),
    ...                crs="EPSG:32633")
    >>> ps = PointSample.from_points(PointFitData(dem=dem, values=dem.data, points=pts, points_are_ref=True),
    ...                              subsample=1.0, random_state=None, what="Demo")
    >>> dh, fin = ps.dh(need=1)
    >>> dh[fin].tolist(), fin.tolist(), ps.counts(fin, fin)
    ([-1.0, -2.0], [True, True, False], {'n_points_': 3, 'n_outside_': 1, 'n_outliers_': 0})
    """

    data: PointFitData
    points: PointSet
    what: str

    @classmethod
    def from_points(cls, data: PointFitData, *, subsample: float | int, random_state: int | None,
                    what: str) -> PointSample:
        """The points of ``data`` drawn with the estimator's ``subsample`` and ``random_state``."""
        return cls(data=data, points=draw_points(data.points, subsample, random_state), what=what)

    @property
    def sign(self) -> float:
        """``1`` when the points are the reference, ``-1`` when they are to be aligned: the
        factor from a translation of the DEM onto the points to the fitted one."""
        return 1.0 if self.data.points_are_ref else -1.0

    def no_points(self, found: int, need: int) -> NotEnoughDataError:
        """The error of too few drawn points on valid DEM pixels (``found`` of them, ``need`` needed)."""
        data = self.data
        return NotEnoughDataError(
            f"{self.what}: only {found} of {self.points.count} points fall on valid DEM pixels (need {need}); check "
            f"that the points overlap the DEM (points CRS {data.points.source_crs}, DEM CRS {data.dem.rio.crs}), its "
            "nodata value and the inlier mask"
        )

    def require(self, found: int, need: int) -> None:
        """Raise :meth:`no_points` when ``found < need``."""
        if found < need:
            raise self.no_points(found, need)

    def pixel_positions(self) -> tuple[np.ndarray, np.ndarray]:
        """The drawn points' fractional ``(row, col)`` on the DEM's grid."""
        return pixel_positions(self.data.dem, self.points.x, self.points.y)

    def dh(self, *, need: int) -> tuple[np.ndarray, np.ndarray]:
        """``dh = tba - ref`` at the drawn points (one pass over the chunks holding points) and
        where it is finite; fewer than ``need`` finite values is :meth:`no_points`."""
        prow, pcol = self.pixel_positions()
        values, _, _ = dem_at_points(self.data.values, prow, pcol, resampling=FIT_INTERPOLATION)
        dh = values - self.points.z if self.data.points_are_ref else self.points.z - values
        fin = np.isfinite(dh)
        self.require(int(fin.sum()), need)
        return dh, fin

    def inliers(self, residual: np.ndarray, fin: np.ndarray | None = None) -> np.ndarray:
        """Where ``residual`` is an inlier: within ``outlier_nmad`` NMADs of the median
        (iterated), or ``fin`` (default: where it is finite) without ``outlier_nmad``."""
        if self.data.outlier_nmad is None:
            return np.isfinite(residual) if fin is None else fin
        return nmad_inliers(residual, k=self.data.outlier_nmad)

    @staticmethod
    def has_outliers(fin: np.ndarray, ok: np.ndarray) -> bool:
        """Whether some finite value is not an inlier (a refit is then due)."""
        return bool(int((fin & ~ok).sum()))

    def counts(self, fin: np.ndarray, ok: np.ndarray) -> dict[str, int]:
        """The learned counts ``n_points_``, ``n_outside_`` and ``n_outliers_`` (module notes)."""
        return {"n_points_": int(self.data.points.count), "n_outside_": int(self.points.count - fin.sum()),
                "n_outliers_": int(fin.sum() - ok.sum())}

    def centre(self) -> np.ndarray:
        """The centroid of the drawn points with a finite elevation (zeros when none)."""
        x, y, z = self.points.x, self.points.y, self.points.z
        fin = np.isfinite(z)
        return np.array([np.mean(x[fin]), np.mean(y[fin]), np.mean(z[fin])]) if fin.any() else np.zeros(3)


@dataclass
class ShiftSample:
    """What the shift estimators' one fit code (``_fit_on_sample``) iterates on, from either route.

    ``ref`` the reference elevations at the sample, ``x``/``y`` their map coordinates,
    ``slope``/``aspect`` (degrees) there, ``sampler(sx, sy)`` the to-be-aligned side moved by a
    shift at the same places, ``start`` the shift the iterations start from, ``grid`` the DEM
    whose grid the fit is on (its ``resolution``). From a pair (:meth:`from_pair`) the sample
    is drawn pixels of the reference, the sampler the to-be-aligned DEM's windows; from points
    (:meth:`from_points`) the reference is the points (the DEM is the side moved: for points to
    align the fit is the reverse one, inverted by the estimator with ``points.sign``).
    """

    ref: np.ndarray
    x: np.ndarray
    y: np.ndarray
    slope: np.ndarray
    aspect: np.ndarray
    sampler: ShiftSampler
    start: tuple[float, float]
    grid: xr.DataArray
    resolution: tuple[float, float]
    passes_before: int
    rows: np.ndarray | None = None
    cols: np.ndarray | None = None
    points: PointSample | None = None

    @classmethod
    def from_pair(cls, data: FitData, est: ShiftEstimator, *, what: str) -> ShiftSample:
        """The subsample of a DEM pair with its windows and terrain (one pass; two when few
        pixels are valid: :func:`xdem.coreg._windows.shift_fit_sample`)."""
        ss, resolution = shift_fit_sample(est, data, what)
        s = ss.sample
        t = get_transform(data.ref)
        x = t.c + (np.asarray(s["col"], dtype=np.float64) + 0.5) * t.a
        y = t.f + (np.asarray(s["row"], dtype=np.float64) + 0.5) * t.e
        start = check_divergence_params(initial_shift=est.initial_shift, on_divergence=est.on_divergence)
        return cls(ref=s["ref"], x=x, y=y, slope=ss.slope, aspect=ss.aspect, sampler=ss.sampler, start=start,
                   grid=data.ref, resolution=resolution, passes_before=int(s.passes), rows=s["row"], cols=s["col"])

    @classmethod
    def from_points(cls, data: PointFitData, est: ShiftEstimator, *, what: str) -> ShiftSample:
        """The drawn points, the DEM's windows cut at the start around them (one pass), its
        slope and aspect there, the start (for the DEM: negated when the points are the ones
        to align); too few points where ``dh`` is finite is a clear error."""
        ps = PointSample.from_points(data, subsample=est.subsample, random_state=est.random_state, what=what)
        pts = ps.points
        sampler = PointSampler(data.dem, pts, resampling=FIT_INTERPOLATION, half=est._half, data=data.values)
        sx0, sy0 = check_divergence_params(initial_shift=est.initial_shift, on_divergence=est.on_divergence)
        start = (ps.sign * sx0, ps.sign * sy0)
        ps.require(int(np.isfinite(sampler(*start) - pts.z).sum()), est._min_points)
        assert sampler.windows is not None
        res_x, res_y = signed_resolution(data.dem)
        slope, aspect = terrain_at_windows(sampler.windows, est._half, res_x=res_x, res_y=res_y,
                                           method=est.terrain_method)
        return cls(ref=pts.z, x=pts.x, y=pts.y, slope=slope, aspect=aspect, sampler=sampler, start=start,
                   grid=data.dem, resolution=get_resolution(data.dem), passes_before=0, points=ps)

    @property
    def passes(self) -> int:
        """Computes so far: the draw (none for points) plus the sampler's reads."""
        return self.passes_before + int(self.sampler.reads)

    def without(self, ok: np.ndarray) -> np.ndarray:
        """The reference elevations with NaN where ``ok`` is False (a refit without outliers)."""
        return np.where(ok, self.ref, np.nan)


def reversed_history(history: list[list[float]]) -> list[list[float]]:
    """A shift history negated (the fit of the DEM onto points to align, reversed)."""
    return [[-float(a), -float(b)] for a, b in history]
