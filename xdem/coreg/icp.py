"""Iterative Closest Point (:class:`ICP`): a rigid transform (3 rotations, 3 translations) fitted
on a reproducible subsample, out of core.

The source points are the to-be-aligned DEM's pixels of the subsample, ``(x, y, z)`` at pixel
centres in the reference's CRS. The reference is read as small windows around the moved
source points (6 x 6 pixels each, around the cell that holds the moved point), the first ones
cut in the same pass as the draw (:func:`xdem.sampling.sample_valid`), one pixel wider each
side (8 x 8) so that they also hold the windows of the cells next to it; the corners of each
window's middle cell are target points, so the reference is dense wherever a source point
lands, however sparse the subsample is on a large DEM. An iteration (:mod:`xdem.kernels.icp`):

1. moves the source points by the current estimate; when one leaves the reach of its window
   (more than half a pixel outside the window's middle cell), the windows move to the cells
   of the moved points: inside the draw's 8 x 8 windows while every cell is at most a pixel
   from its drawn pixel, else cut again (one more pass over the data, counted in ``passes_``);
2. matches each to its nearest target pixel in 3-D (:class:`scipy.spatial.cKDTree`), then
   refines the match on the local surface: the bicubic surface of that pixel's window (the
   interpolation of ``resampling="cubic"``) gives the point below or above the moved point and
   the normal there (its gradient; at a pixel centre, the central differences of the 3 x 3
   neighbourhood). A point whose matched window does not hold the surface at its position
   (no reference there) is left out;
3. drops matches further than ``rejection_factor`` NMAD from the median distance;
4. solves a point-to-plane (linearised, 6 x 6 least squares) or point-to-point (closed form,
   accelerated) increment, and stops when no sampled point moves by more than ``tolerance``
   pixels.

Measured with nearest reference pixels alone (no refinement), the rotation case of the tests
is already within 5e-6 degrees once the reference is dense (sparse targets are what spoils
ICP on DEMs); the refinement divides the residual NMAD by about 8 and the bias of a
sub-pixel translation by about 3 (0.009 m with the tangent plane of the matched pixel, 0.004 m
on rough 5 m terrain with the bicubic surface).

Everything after the draw works on the sample in memory, in the order of the global pixel
indices: the fit is identical whatever the chunking or scheduler.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import ClassVar

import dask.array as da
import numpy as np
from affine import Affine
from scipy.spatial import cKDTree
from scipy.spatial.transform import Rotation

from xdem.coreg._data import PointFitData
from xdem.coreg._iterate import DIVERGENCE_FRACTION, initial_shift_of
from xdem.coreg._point_sample import PointSample
from xdem.coreg._shift import check_resampling
from xdem.coreg._windows import gather_windows
from xdem.coreg.base import FitData, register
from xdem.coreg.rigid import RigidCoreg
from xdem.errors import ConvergenceError, ConvergenceWarning, FlatTerrainWarning, InputError, NotEnoughDataError
from xdem.io._heap import release_before_solve
from xdem.io.grid import check_projected, get_resolution, get_transform, grid_shape
from xdem.kernels.icp import (
    acceleration,
    cell_corner_targets,
    compose,
    cubic_surface,
    max_motion,
    move_points,
    plane_distances,
    point_to_plane_step,
    point_to_point_step,
    reject_outliers,
    unit_normals,
)
from xdem.kernels.rigid import split_matrix
from xdem.kernels.robust import nmad
from xdem.sampling import sample_valid
from xdem.warp import crs_key

__all__ = ["ICP", "METHODS_ICP"]

#: The ``method`` values of :class:`ICP`.
METHODS_ICP = ("point_to_plane", "point_to_point")
#: Half-size of the reference windows: ``2 * half + 2 = 6`` pixels, starting two pixels before
#: the cell that holds the moved point (the window's middle cell).
_HALF = 2
#: A moved point is in reach of its window while it is at most this many pixels outside the
#: window's middle cell; further, the windows are cut again around the moved points.
_REACH_PX = 0.5
#: The draw cuts the windows this many pixels wider on each side (8 x 8): the windows of cells up
#: to a pixel away from the drawn ones are inside them, so a sub-pixel shift needs no other pass.
_SPARE = 1
#: Points matched at a time (each point's match is its own: the same whatever the batches).
_BATCH = 65536


class _Reference:
    """Reference windows around the moved source points, their target pixels (the corners of
    each window's middle cell) in a :class:`~scipy.spatial.cKDTree`, and the match of moved
    points on the bicubic surface of the window of their nearest target."""

    def __init__(self, ref: da.Array, transform: Affine, centre: np.ndarray, ncols: int) -> None:
        self.ref = ref
        self.ncols = ncols
        self.transform = transform
        self.inverse = ~transform
        self.centre = centre
        self.reads = 0
        self.rows = self.cols = np.zeros(0, dtype=np.int64)
        self.stored = (np.zeros(0, dtype=np.int64),) * 2
        self.origin = (np.zeros(0, dtype=np.int64),) * 2
        self.windows = np.zeros((0, 2 * _HALF + 2, 2 * _HALF + 2), dtype=np.float32)
        self.tree: cKDTree | None = None

    def pixel_coords(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Fractional ``(col, row)`` of points, pixel centres at integers."""
        ia, ib, ic, id_, ie, if_ = self.inverse[:6]
        x, y = points[:, 0], points[:, 1]
        return ia * x + ib * y + ic - 0.5, id_ * x + ie * y + if_ - 0.5

    def store(self, windows: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> None:
        """Keep square windows of ``2 h + 2`` pixels (``h >= _HALF``) cut around pixels ``(rows, cols)``."""
        self.windows, self.stored = windows, (rows, cols)

    def _origins(self, rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Where the windows of cells ``(rows, cols)`` start inside the stored ones (None if one
        is not inside)."""
        spare = (self.windows.shape[1] - 2) // 2 - _HALF
        if len(rows) != len(self.stored[0]):
            return None
        dr, dc = rows - self.stored[0], cols - self.stored[1]
        if spare < 0 or np.any(np.abs(dr) > spare) or np.any(np.abs(dc) > spare):
            return None
        return dr + spare, dc + spare

    def use(self, rows: np.ndarray, cols: np.ndarray) -> None:
        """Take the (stored) windows whose middle cell starts at pixel ``(rows, cols)`` and index
        their target pixels (the cell's four corners, where finite), deduplicated by global
        pixel index in a deterministic order."""
        origin = self._origins(rows, cols)
        if origin is None:
            raise ValueError("ICP: the stored windows do not hold these cells")  # a bug, not bad input
        self.rows, self.cols, self.origin = rows, cols, origin
        self.tree, self.owner = None, np.zeros(0, dtype=np.int64)  # the previous targets go before the new ones
        t = self.transform
        k, (r0, c0) = np.arange(len(rows)), origin
        corners = np.stack([self.windows[k, r0 + _HALF + a, c0 + _HALF + b] for a in (0, 1) for b in (0, 1)], axis=1)
        pts, self.owner = cell_corner_targets(corners.reshape(-1, 2, 2), rows, cols, self.ncols,
                                              (t.a, t.b, t.c, t.d, t.e, t.f), self.centre)
        # the sliding-midpoint tree builds in half the time and answers the same exact queries
        self.tree = cKDTree(pts, balanced_tree=False) if len(pts) else None

    def follow(self, points: np.ndarray) -> int:
        """Move the windows to the cells of ``points`` if one has left the reach of its window:
        inside the stored windows when they hold the new ones, else cut again around the points
        (one pass over the data); returns the number of passes made (0 or 1)."""
        u, v = self.pixel_coords(points)
        fin = np.isfinite(u) & np.isfinite(v)
        if len(self.rows) != len(points):  # no windows yet for these points (the point route)
            c = r = np.zeros(len(points), dtype=np.int64)
            away = np.ones(len(points), dtype=bool)
        else:
            c, r = self.cols, self.rows
            away = fin & ((u < c - _REACH_PX) | (u > c + 1 + _REACH_PX) | (v < r - _REACH_PX) | (v > r + 1 + _REACH_PX))
        if not away.any():
            return 0
        rows = np.where(fin, np.floor(np.where(fin, v, 0.0)), r).astype(np.int64)
        cols = np.where(fin, np.floor(np.where(fin, u, 0.0)), c).astype(np.int64)
        if self._origins(rows, cols) is not None:
            self.use(rows, cols)
            return 0
        self.tree, self.windows = None, np.zeros((0,) + self.windows.shape[1:], dtype=np.float32)  # freed before the pass
        self.store(gather_windows(self.ref, rows, cols, _HALF), rows, cols)
        self.use(rows, cols)
        self.reads += 1
        return 1

    def surface(self, index: np.ndarray, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Points of the bicubic surface of ``windows[index]`` at the points' horizontal
        positions (NaN elevation where the footprint is not inside the window), and the unit
        normals there."""
        u, v = self.pixel_coords(points)
        z, zu, zv = cubic_surface(self.windows, index, v - (self.rows[index] - _HALF), u - (self.cols[index] - _HALF),
                                  origin=self.origin, size=2 * _HALF + 2)
        ia, ib, _, id_, ie, _ = self.inverse[:6]
        normals = unit_normals(zu * ia + zv * id_, zu * ib + zv * ie)
        return np.column_stack([points[:, 0], points[:, 1], z]), normals

    def match(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each moved point: the point of the reference surface below or above it (the
        bicubic surface of the window of its nearest target pixel in 3-D), the unit normal
        there, and whether the match holds (that window holds the surface there)."""
        m = len(points)
        surf, normals = np.full((m, 3), np.nan), np.full((m, 3), np.nan)
        if self.tree is None:
            return surf, normals, np.zeros(m, dtype=bool)
        for a in range(0, m, _BATCH):  # in batches: the temporaries of a batch, not of all points
            p = points[a:a + _BATCH]
            _, j = self.tree.query(p - self.centre)
            surf[a:a + _BATCH], normals[a:a + _BATCH] = self.surface(self.owner[j], p)
        return surf, normals, np.isfinite(surf[:, 2])

    def vertical_offsets(self, points: np.ndarray) -> np.ndarray:
        """``z - reference`` at each point's horizontal position, from its own window (no
        nearest neighbour: valid however far apart the DEMs are vertically)."""
        surf, _ = self.surface(np.arange(len(points)), points)
        dz: np.ndarray = points[:, 2] - surf[:, 2]
        return dz


@register
class ICP(RigidCoreg):
    """Iterative Closest Point: a rigid transform (rotations about x, y, z and a translation)
    that puts the to-be-aligned DEM's points on the reference surface.

    Point-to-plane (Chen & Medioni 1992, the default) minimises the distances of the points
    to the reference's tangent planes: it converges in a few iterations (3 to 5 in the tests).
    Point-to-point (Besl & McKay 1992) minimises the distances to the closest surface points:
    it converges linearly (slowly where the DEMs slide along gentle slopes), accelerated here
    as Besl & McKay propose (:func:`xdem.kernels.icp.acceleration`): 10 to 30 iterations in
    the tests, for about the same accuracy. See :mod:`xdem.coreg.icp` for the steps.

    Passes over the data: the draw with the first windows (one, two when few pixels are
    valid), plus one each time the windows are cut again around the moved points (when the
    estimate moves a point more than half a pixel outside its window and its cell is more than
    a pixel from the draw's: none for a sub-pixel shift, else usually once or twice, on the
    first iterations). Memory: the subsample with an 8 x 8 window of the reference per point
    (256 bytes; 6 x 6 once cut again) and its target pixels (at most 4 per point, about 100 bytes each in the
    k-d tree): a few hundred bytes per point, whatever the DEM's size; an iteration's least
    squares are reduced 65,536 points at a time (:func:`xdem.kernels.icp.point_to_plane_step`).

    Before the first iteration the vertical offset is removed (the median elevation
    difference at the sampled points, unless ``initial_shift`` gives ``dz``), so that 3-D
    nearest neighbours are meaningful. Large horizontal offsets (tens of pixels) are found when
    the terrain has long wavelengths, in more iterations and passes; ``initial_shift`` (or a
    :class:`~xdem.coreg.NuthKaab` step before: ``NuthKaab() + ICP()``) saves them, and is
    needed where the terrain repeats at shorter scales than the offset. Flat terrain constrains
    neither the horizontal shift nor the rotation about z: those stay at their start, with a
    :class:`~xdem.errors.FlatTerrainWarning`.

    Parameters
    ----------
    method
        ``"point_to_plane"`` or ``"point_to_point"`` (upstream's ``"point-to-plane"`` and
        ``"point-to-point"`` are the same).
    max_iterations
        Maximum number of iterations; stopping there emits a
        :class:`~xdem.errors.ConvergenceWarning` (``converged_ = False``).
    tolerance
        Stop when the last increment moves no sampled point by more than this, in pixels.
    subsample
        Fraction (``<= 1``) or count (``> 1``) of the valid pixels used as source points.
    random_state
        Seed of the reproducible subsample.
    rejection_factor
        Matches whose point-to-plane distance is more than this many NMAD from the median are
        dropped at each iteration; ``None`` keeps every match.
    initial_shift
        ``(dx, dy)`` or ``(dx, dy, dz)``: a translation to start from (CRS units, the same
        sign as the result: applied to the to-be-aligned DEM); ``None`` starts from no
        horizontal shift. Without ``dz`` the vertical start is the median elevation difference.
    resampling
        ``"cubic"`` (default) or ``"bilinear"``: the interpolation used to APPLY the fitted
        transform (the fit reads pixel values only). Cubic, because the resampling sets a floor
        under any residual: on rough terrain at 5 m pixels bilinear leaves centimetres of NMAD
        (0.05 m with wavelengths down to 50 m), above the accuracy of the fit itself, cubic
        a few millimetres.

    Learned attributes
    ------------------
    matrix_, centroid_, rotation_x_, rotation_y_, rotation_z_, shift_x_, shift_y_, shift_z_
        The transform (:class:`~xdem.coreg.RigidCoreg`); the centroid is the mean of the
        source points.
    n_iterations_ : int
    converged_ : bool
    count_ : int
        Matches used in the last iteration.
    residual_nmad_ : float
        NMAD of the point-to-plane distances of the source points at the fitted transform (m).
    passes_ : int
        Computes (passes over the data) made by the fit.

    Examples
    --------
    >>> import xdem
    >>> ref, tba, truth = xdem.examples.example_pair(mode="transform")
    >>> icp = ICP(subsample=20_000).fit(ref, tba)
    >>> abs(icp.shift_x_ - truth["shift_x"]) < 0.05, abs(icp.rotation_z_) < 0.01
    (True, True)
    """

    #: What it can do (:class:`~xdem.coreg.Capabilities`).
    tags = RigidCoreg.tags.but(horizontal=True, fits_points=True, initial_shift=True)
    _min_points: ClassVar[int] = 100

    def __init__(
        self,
        *,
        method: str = "point_to_plane",
        max_iterations: int = 100,
        tolerance: float = 1e-4,
        subsample: float | int = 500_000,
        random_state: int | None = None,
        rejection_factor: float | None = 4.0,
        initial_shift: tuple[float, float] | tuple[float, float, float] | None = None,
        resampling: str = "cubic",
        picky: bool | None = None,
        only_translation: bool | None = None,
        fit_minimizer: Callable[..., object] | None = None,
        fit_loss_func: str | None = None,
        standardize: bool = True,
    ) -> None:
        self.picky = picky
        self.only_translation = only_translation
        self.fit_minimizer = fit_minimizer
        self.fit_loss_func = fit_loss_func
        self.standardize = standardize
        self.method = method
        self.max_iterations = max_iterations
        self.tolerance = tolerance
        self.subsample = subsample
        self.random_state = random_state
        self.rejection_factor = rejection_factor
        self.initial_shift = initial_shift
        self.resampling = resampling

    @property
    def _method(self) -> str:
        """``method`` with upstream's spelling accepted (``"point-to-plane"``, ``"point-to-point"``)."""
        return str(self.method).replace("-", "_")

    def _check_params(self) -> tuple[float, float, float | None]:
        """Validate the hyper-parameters; returns the start ``(dx, dy, dz or None)``."""
        if self._method not in METHODS_ICP:
            raise InputError(f"method must be one of {', '.join(METHODS_ICP)}, got {self.method!r}")
        check_resampling(self.resampling)
        if isinstance(self.max_iterations, bool) or not isinstance(self.max_iterations, (int, np.integer)) \
                or self.max_iterations < 1:
            raise InputError(f"max_iterations must be an integer >= 1, got {self.max_iterations!r}")
        if not _positive(self.tolerance):
            raise InputError(f"tolerance must be a number > 0 (pixels), got {self.tolerance!r}")
        if self.rejection_factor is not None and not _positive(self.rejection_factor):
            raise InputError(f"rejection_factor must be a number > 0 (NMADs) or None, got {self.rejection_factor!r}")
        dx, dy, dz = initial_shift_of(self.initial_shift)
        given_dz = self.initial_shift is not None and len(tuple(self.initial_shift)) == 3
        return dx, dy, (dz if given_dz else None)

    def _fit(self, data: FitData) -> None:
        self._fit_from(data, None)

    def fit_after(self, data: FitData, prior: np.ndarray) -> ICP:
        """Fit on a to-be-aligned DEM that earlier steps move by the rigid 4 x 4 matrix ``prior``,
        WITHOUT resampling it: the sampled points of ``data.tba`` are moved by ``prior`` exactly,
        and the fit learns the transform to apply after ``prior``. A pipeline uses it so that
        ``NuthKaab() + ICP()`` refines on the original DEM, not on one Nuth & Kääb has already
        resampled (bilinear resampling moves rough terrain's phase: on the issue's rotation case
        the translation error is 0.003 m on the resampled DEM, 0.0002 m this way)."""
        self._reset()
        self._fit_from(data, np.asarray(prior, dtype=np.float64))
        self.crs_ = crs_key(data.ref.rio.crs)
        return self

    def _fit_from(self, data: FitData, prior: np.ndarray | None) -> None:
        sx, sy, sz = self._check_params()
        check_projected(data.ref, "ICP")
        pixel = min(get_resolution(data.ref))
        transform, shape = get_transform(data.ref), grid_shape(data.ref)
        ref = da.where(data.inlier, data.ref.data, np.nan)  # no target on excluded terrain
        s = sample_valid(data.valid(), {"tba": data.tba.data}, subsample=self.subsample,
                         random_state=self.random_state, min_count=self._min_points, what="ICP",
                         windows={"win_ref": ref}, half=_HALF + _SPARE)
        rows, cols = s["row"], s["col"]
        cc, rr = cols + 0.5, rows + 0.5
        t = transform
        points = np.column_stack([t.a * cc + t.b * rr + t.c, t.d * cc + t.e * rr + t.f, s["tba"]])
        if prior is not None:  # the points where the earlier steps put them (exact: no resampling)
            points = points @ prior[:3, :3].T + prior[:3, 3]
        centre = points.mean(axis=0)
        reference = _Reference(ref, transform, centre, shape[1])
        reference.store(s.pop("win_ref"), rows, cols)
        reference.use(rows, cols)
        release_before_solve()  # the draw's freed memory goes back first (xdem.io._heap)
        self._solve(reference, points, np.array([sx, sy, 0.0 if sz is None else sz]), sz is None, pixel=pixel,
                    shape=shape)
        self.passes_ = int(s.passes + reference.reads)

    def _solve(self, reference: _Reference, points: np.ndarray, shift: np.ndarray, vertical_start: bool, *,
               pixel: float, shape: tuple[int, int]) -> np.ndarray:
        """The fit of ``points`` onto ``reference`` from the translation ``shift`` (its vertical
        part replaced by the median offset when ``vertical_start``); sets the learned attributes
        (all but ``passes_``) and returns the point-to-plane distances at the result (NaN where
        unmatched)."""
        centre = reference.centre
        reference.follow(move_points(points, np.eye(3), shift, centre))
        if vertical_start:  # remove the vertical offset first: 3-D nearest neighbours need it
            dz = reference.vertical_offsets(move_points(points, np.eye(3), shift, centre))
            dz = dz[np.isfinite(dz)]
            if len(dz) < self._min_points:
                raise NotEnoughDataError(f"ICP: only {len(dz)} sampled points have the reference around them "
                                         f"(need {self._min_points}); the DEMs barely overlap")
            shift[2] -= float(np.median(dz))
        rot, shift, iterations, converged, count = self._iterate(
            reference, points, centre, shift, pixel=pixel, limit=DIVERGENCE_FRACTION * max(shape) * pixel)
        q = move_points(points, rot, shift, centre)
        reference.follow(q)
        surf, normals, ok = reference.match(q)
        dist = plane_distances(q, surf, normals, ok)
        self._set_transform(rot, shift, centre)
        self.n_iterations_ = int(iterations)
        self.converged_ = bool(converged)
        self.count_ = int(count)
        self.residual_nmad_ = float(nmad(dist[ok])) if ok.any() else float("nan")
        return dist

    def _fit_points(self, data: PointFitData) -> None:
        """On points (:mod:`xdem.coreg._point_sample`): the points moved onto the DEM's surface
        (the DEM's windows cut around the moved points, as the reference's are on the DEM
        route), refitted without the points whose vertical residual is an outlier. The fit of
        ``(dem, points)`` is that transform; the fit of ``(points, dem)`` its inverse."""
        sx, sy, sz = self._check_params()
        ps = PointSample.from_points(data, subsample=self.subsample, random_state=self.random_state, what="ICP")
        pts = ps.points
        points = np.column_stack([pts.x, pts.y, pts.z])
        keep = np.isfinite(pts.z)
        centre = ps.centre()
        pixel, shape = min(get_resolution(data.dem)), grid_shape(data.dem)
        reference = _Reference(data.values, get_transform(data.dem), centre, shape[1])
        shift = -ps.sign * np.array([sx, sy, 0.0 if sz is None else sz])  # that of the result: points to align move
        dist = np.full(pts.count, np.nan)
        ps.require(int(keep.sum()), self._min_points)
        self._solve(reference, points[keep], shift, sz is None, pixel=pixel, shape=shape)
        total = self.to_matrix()
        # residuals judged vertically, in each point's own window (a blunder far above the surface
        # matches nothing in 3-D, but is still over valid DEM pixels: an outlier, not outside)
        dist[keep] = reference.vertical_offsets(move_points(points[keep], self.rotation(),
                                                            np.asarray(self.to_translations()), centre))
        fin = np.isfinite(dist)
        ok = ps.inliers(dist, fin)
        iterations = int(self.n_iterations_)
        if ps.has_outliers(fin, ok):
            sub = ok[keep]  # the windows follow the moved points: reuse those of the inliers
            again = _Reference(data.values, get_transform(data.dem), centre, shape[1])
            again.store(reference.windows[sub], reference.stored[0][sub], reference.stored[1][sub])
            again.use(reference.rows[sub], reference.cols[sub])
            moved = move_points(points[ok], self.rotation(), np.asarray(self.to_translations()), centre)
            self._solve(again, moved, np.zeros(3), False, pixel=pixel, shape=shape)
            total = self.to_matrix() @ total
            iterations += int(self.n_iterations_)
            reference.reads += again.reads
        if data.points_are_ref:
            total = np.linalg.inv(total)
        self._set_transform(*split_matrix(total, centre), centre)
        self.n_iterations_ = iterations
        self.passes_ = int(reference.reads)
        vars(self).update(ps.counts(fin, ok))

    def _iterate(self, reference: _Reference, points: np.ndarray, centre: np.ndarray, shift: np.ndarray, *,
                 pixel: float, limit: float) -> tuple[np.ndarray, np.ndarray, int, bool, int]:
        """The ICP iterations from ``shift``: ``(R, t, iterations, converged, matches)``."""
        rot = np.eye(3)
        start = shift.copy()  # the points' motion from their start is max_motion(rot, shift - start): no copy of them
        spread = float(np.sqrt(np.mean(np.sum((points - centre) ** 2, axis=1)))) or 1.0
        previous: np.ndarray | None = None
        converged, flat, step, count, iterations = False, False, float("nan"), 0, 0
        for iterations in range(1, int(self.max_iterations) + 1):
            q = move_points(points, rot, shift, centre)
            reference.follow(q)
            surf, normals, ok = reference.match(q)
            dist = plane_distances(q, surf, normals, ok)
            ok = reject_outliers(dist, self.rejection_factor)
            count = int(ok.sum())
            if count < self._min_points:
                raise NotEnoughDataError(f"ICP: only {count} source points match the reference at iteration "
                                         f"{iterations} (need {self._min_points}); the DEMs barely overlap or are "
                                         "too far apart: give initial_shift=(dx, dy)")
            if self._method == "point_to_plane":
                d_rot, d_shift, rank = point_to_plane_step(q, surf, normals, centre, where=ok)
                flat = flat or rank < 6
            else:
                targets = q[ok] - dist[ok, None] * normals[ok]  # closest points of the local tangent planes
                d_rot, d_shift = point_to_point_step(q[ok], targets, centre)
            rot, shift = compose(rot, shift, d_rot, d_shift)
            step = max_motion(d_rot, d_shift, centre, q, where=ok) / pixel
            if step < float(self.tolerance):
                converged = True
                break
            if self._method == "point_to_point":
                current = np.concatenate([Rotation.from_matrix(d_rot).as_rotvec() * spread, d_shift])
                factor = acceleration(previous, current)
                previous = None if factor else current  # after a jump, two fresh steps before the next one
                if factor:
                    rot, shift = compose(rot, shift, Rotation.from_rotvec(current[:3] * factor / spread).as_matrix(),
                                         current[3:] * factor)
            if max_motion(rot, shift - start, centre, points) > limit:
                raise ConvergenceError(
                    f"ICP diverged: after {iterations} iterations the transform moves points by more than a quarter "
                    "of the DEM's size; if the DEMs really are that far apart, start from an estimate with "
                    "initial_shift=(dx, dy), or fit NuthKaab() + ICP()")
            del q, surf, normals, dist, ok  # this iteration's matches go before the next one builds its own
        if flat:
            warnings.warn("ICP: the terrain does not constrain all six parameters (flat or one-directional "
                          "slopes); the unconstrained ones (horizontal shift, rotation about z) stay at their start",
                          FlatTerrainWarning, stacklevel=5)
        if not converged:
            warnings.warn(f"ICP did not converge in {iterations} iterations (last step {step:.2g} px > tolerance "
                          f"{self.tolerance} px); raise max_iterations or tolerance", ConvergenceWarning, stacklevel=5)
        return rot, shift, iterations, converged, count


def _positive(value: object) -> bool:
    return (not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))
            and math.isfinite(float(value)) and float(value) > 0)
