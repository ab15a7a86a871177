"""The to-be-aligned DEM moved by a rigid matrix, at the sampled reference pixels, from small
windows in memory: the working set of the rigid estimators (:class:`~xdem.coreg.LZD`).

The subsample is drawn once (:meth:`RigidSample.from_pair`, one pass, two when few pixels are
valid) with windows of both DEMs cut around the sampled pixels in the same pass: the
reference's give its gradient there, the to-be-aligned DEM's its values near each point.
Under a rigid matrix ``M`` the moved surface above a sampled position ``q`` comes from the
source point whose image lies above ``q``: its position depends on its own moved elevation
when ``M`` rotates about x or y, and is solved per point by the fixed point of
:func:`xdem.kernels.rigid.solve_elevation`, interpolating each point's window
(:func:`xdem.kernels.interp.interp_windows_kernel`, with the 4-point Lagrange interpolation,
whose phase error is far below that of cubic convolution: see :mod:`xdem.kernels.interp`).
Positions differ from point to point
under a rotation, so each point has its own window; the windows of the points whose source
position leaves them are gathered again around the new positions, for all those points in
one pass (:func:`xdem.coreg._windows.gather_windows`), and only then (:attr:`RigidSampler.reads`).
"""

from __future__ import annotations

from dataclasses import dataclass

import dask.array as da
import numpy as np
import xarray as xr

from xdem.coreg._data import FitData
from xdem.coreg._point_sample import PointSample
from xdem.coreg._shift import shift_dem
from xdem.coreg._windows import gather_windows
from xdem.io.grid import dask_data, get_resolution, get_transform
from xdem.kernels.interp import FIT_INTERPOLATION, footprint, interp_windows_kernel, interp_windows_separable
from xdem.kernels.lzd import window_gradient
from xdem.kernels.rigid import InverseCoefficients, solve_elevation, split_matrix
from xdem.kernels.rigid_warp import ONE_STEP_PX, one_step_range
from xdem.points.bucket import pixel_positions
from xdem.sampling import Sample, sample_valid

__all__ = ["RigidSampler", "RigidSample", "moved_gradient", "gradient_step", "WINDOW_MARGIN", "REFRESH_MARGIN"]

#: A pass gathering windows again is made when some point's predicted source position comes
#: closer than this (pixels) to the edge of what the interpolation can read in its window
#: (room for the prediction's error: the fixed point moves the positions by far less).
WINDOW_MARGIN = 0.25
#: ... and that pass also re-centres every point with less room than this (pixels), so that
#: points lingering near their window's edge do not each trigger a pass of their own later.
REFRESH_MARGIN = 0.75
#: Rounds of "gather the windows left by the final positions, solve those points again" at most.
_MAX_REGATHERS = 3


class RigidSampler:
    """Elevations of ``tba`` moved by a rigid 4 x 4 matrix, above the sampled pixels.

    ``sampler(matrix, guess)`` returns the moved surface's elevation above every sampled
    pixel (NaN where the source is NaN, off the grid, or the fixed point did not settle);
    ``guess`` (elevations close to the answer, e.g. the reference's or the last ones) tells
    where the sources are before solving, so that windows are gathered before, not after.

    Parameters
    ----------
    tba
        The to-be-aligned DEM on the reference's grid (north-up).
    rows, cols
        Global pixel indices of the sampled pixels.
    interpolation
        Interpolation inside the windows (:func:`xdem.kernels.interp.weights_1d`):
        :data:`~xdem.kernels.interp.FIT_INTERPOLATION` to measure displacements.
    half
        Windows are ``2 half + 2`` pixels wide, starting ``half`` pixels before their centre.
    centre
        A point near the data (the rotation centre of the fit): coordinates are taken
        relative to it for precision.
    x, y
        Positions to evaluate at instead of the pixel centres (points anywhere: the point
        route); ``rows, cols`` are then the pixels holding them (``floor`` of their
        fractional positions), where their first windows are cut.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> z = np.add.outer(np.arange(20.0), np.zeros(20))  # z = row index: rises to the south
    >>> dem = xr.DataArray(z, dims=("y", "x"), coords={"y": -np.arange(20) - 0.5, "x": np.arange(20) + 0.5})
    >>> s = RigidSampler(dem, np.array([10]), np.array([10]), interpolation="lagrange", half=2,
    ...                  centre=np.zeros(3))
    >>> m = np.eye(4); m[1, 3] = -1.0  # moved 1 m south: the surface above row 10 is that of row 9
    >>> s(m, np.array([10.0])).round(9).tolist(), s.reads
    ([9.0], 1)
    """

    def __init__(self, tba: xr.DataArray, rows: np.ndarray, cols: np.ndarray, *, interpolation: str, half: int,
                 centre: np.ndarray, x: np.ndarray | None = None, y: np.ndarray | None = None) -> None:
        self.arr = dask_data(tba)
        get_resolution(tba)  # north-up grids only (a clear error otherwise)
        t = get_transform(tba)
        self.inv = ~t
        self.rows = np.asarray(rows, dtype=np.int64)
        self.cols = np.asarray(cols, dtype=np.int64)
        self.x = t.c + (self.cols + 0.5) * t.a if x is None else np.asarray(x, dtype=np.float64)
        self.y = t.f + (self.rows + 0.5) * t.e if y is None else np.asarray(y, dtype=np.float64)
        self.interpolation = interpolation
        self.half = int(half)
        self.size = 2 * self.half + 2
        self.before, self.after = footprint(interpolation)
        self.centre = np.asarray(centre, dtype=np.float64)
        n = len(self.rows)
        self.win: np.ndarray | None = None
        self.wrow = np.full(n, np.iinfo(np.int64).min // 4, dtype=np.int64)  # no window yet
        self.wcol = self.wrow.copy()
        self.reads = 0

    def prime(self, windows: np.ndarray) -> None:
        """Use ``windows`` cut around the sampled pixels themselves (by the draw)."""
        self.win = windows
        self.wrow, self.wcol = self.rows.copy(), self.cols.copy()

    # --- geometry ---------------------------------------------------------------------------
    def _positions(self, coef: InverseCoefficients, ids: np.ndarray | slice
                   ) -> tuple[np.ndarray, np.ndarray, float, float]:
        """Source pixel positions at moved elevation ``zc`` (the centre's) and their change per
        unit of moved elevation: ``(prow0, pcol0, drow, dcol)``."""
        zc = float(self.centre[2])
        x0, y0 = coef.q0(self.x[ids], self.y[ids])
        inv = self.inv
        b0, b1 = float(coef.b[0]), float(coef.b[1])
        xs, ys = x0 + b0 * zc, y0 + b1 * zc
        pcol = inv.a * xs + inv.b * ys + inv.c - 0.5
        prow = inv.d * xs + inv.e * ys + inv.f - 0.5
        return prow, pcol, inv.d * b0 + inv.e * b1, inv.a * b0 + inv.b * b1

    def _inside(self, ids: np.ndarray, prow: np.ndarray, pcol: np.ndarray, margin: float) -> np.ndarray:
        """Whether the interpolation at these positions reads only inside the points' windows
        (with ``margin`` pixels to spare)."""
        lo, hi = self.before + margin, self.size - self.after - margin
        lr = prow - (self.wrow[ids] - self.half)
        lc = pcol - (self.wcol[ids] - self.half)
        inside: np.ndarray = (lr >= lo) & (lr < hi) & (lc >= lo) & (lc < hi)
        return inside

    def _gather(self, ids: np.ndarray, prow: np.ndarray, pcol: np.ndarray) -> None:
        """Cut new windows (one pass) for the points ``ids``, around positions ``prow, pcol``."""
        fin = np.isfinite(prow) & np.isfinite(pcol)
        ids, prow, pcol = ids[fin], prow[fin], pcol[fin]
        if not len(ids):
            return
        # centred on floor(position): the interpolation can then move a pixel either way (cubic)
        wr, wc = np.floor(prow).astype(np.int64), np.floor(pcol).astype(np.int64)
        new = gather_windows(self.arr, wr, wc, self.half)
        if self.win is None:
            self.win = np.full((len(self.rows), self.size, self.size), np.nan, dtype=np.float32)
        self.win[ids] = new
        self.wrow[ids], self.wcol[ids] = wr, wc
        self.reads += 1

    # --- evaluation -------------------------------------------------------------------------
    def __call__(self, matrix: np.ndarray, guess: np.ndarray) -> np.ndarray:
        coef = InverseCoefficients(*split_matrix(matrix, self.centre), self.centre)
        zc = float(self.centre[2])
        n = len(self.rows)
        every = np.arange(n)
        prow0, pcol0, drow, dcol = self._positions(coef, every)
        a0 = coef.a(self.x, self.y)
        # the fixed point starts from the guess: solved for u = z - (guess - zc), whose start zc is z = guess
        delta = np.where(np.isfinite(guess), guess, zc) - zc
        pr, pc = prow0 + drow * delta, pcol0 + dcol * delta
        if not self._inside(every, pr, pc, WINDOW_MARGIN).all():
            out = ~self._inside(every, pr, pc, REFRESH_MARGIN)
            self._gather(every[out], pr[out], pc[out])
        z = np.full(n, np.nan)
        todo = every
        for round_ in range(_MAX_REGATHERS + 1):
            d = delta[todo]
            u, rows, cols, esc = self._solve(coef, todo, prow0[todo] + drow * d, pcol0[todo] + dcol * d, drow, dcol,
                                             a0[todo] - d * (1.0 - coef.k))
            z[todo] = u + d
            # a point whose iterations read outside its window is NaN (or stopped there): gather its
            # window where it went, and solve it again from the elevation that sent it there
            left = esc.escaped | ~self._inside(todo, rows, cols, 0.0)
            if not left.any() or round_ == _MAX_REGATHERS:
                z[todo[esc.escaped]] = np.nan
                break
            rows = np.where(esc.escaped, esc.prow, rows)[left]
            cols = np.where(esc.escaped, esc.pcol, cols)[left]
            todo = todo[left]
            self._gather(todo, rows, cols)
            slope2 = drow * drow + dcol * dcol
            if slope2 > 0:
                delta[todo] = ((rows - prow0[todo]) * drow + (cols - pcol0[todo]) * dcol) / slope2
        return z

    def _solve(self, coef: InverseCoefficients, ids: np.ndarray, prow: np.ndarray, pcol: np.ndarray,
               drow: float, dcol: float, a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, _Escapes]:
        esc = _Escapes(len(ids))
        win = self.win
        if win is None:
            return np.full(len(prow), np.nan), prow, pcol, esc
        every = len(ids) == len(self.rows)
        sub = win if every else win[ids]  # a view for every point (the first round), a copy of a few otherwise
        r0 = (self.wrow[ids] - self.half).astype(np.float64)
        c0 = (self.wcol[ids] - self.half).astype(np.float64)
        lo, hi = self.before, self.size - self.after
        # the 4 x 4 interpolations as they always were; the larger footprints by separable sums
        interpolate = interp_windows_kernel if self.before <= 1 else interp_windows_separable

        def sample(pr: np.ndarray, pc: np.ndarray, idx: np.ndarray) -> np.ndarray:
            whole = idx.size == len(r0)  # every point (idx is 0..n-1): no copy of the windows
            lr, lc = (pr - r0, pc - c0) if whole else (pr - r0[idx], pc - c0[idx])
            out = ~((lr >= lo) & (lr < hi) & (lc >= lo) & (lc < hi))
            esc.note(idx[out], pr[out], pc[out])
            return interpolate(sub if whole else sub[idx], lr, lc, resampling=self.interpolation)

        u, rows, cols = solve_elevation(sample, prow, pcol, drow, dcol, a, k=coef.k, rzz=coef.rzz,
                                        z0=float(self.centre[2]), one_step=self._one_step(coef, sub, a, drow, dcol))
        return u, rows, cols, esc


    def _one_step(self, coef: InverseCoefficients, win: np.ndarray, a: np.ndarray, drow: float, dcol: float) -> bool:
        """Whether the first evaluation (at each point's guess: the elevation ``z0`` of the
        shifted unknown) is the fixed point's answer within
        :data:`~xdem.kernels.rigid_warp.ONE_STEP_PX`: the moved elevation ``(a + rzz v) / (1 - k)``
        cannot move the positions by more than that from the start, ``v`` being any value the
        interpolation can make of the windows (:func:`~xdem.kernels.rigid_warp.one_step_range`).
        ``a`` is relative to the start (see :meth:`__call__`): the start is elevation ``z0``."""
        slope = float(np.hypot(drow, dcol))
        if slope == 0.0 or a.size == 0 or not np.isfinite(a).all():
            return False
        bounds = one_step_range(win, float(a.min()), float(a.max()), rzz=coef.rzz, k=coef.k)
        z0 = float(self.centre[2])
        return bounds is not None and slope * max(bounds[1] - z0, z0 - bounds[0]) <= ONE_STEP_PX


class _Escapes:
    """Points whose fixed point read outside their windows, and the last such position."""

    def __init__(self, n: int) -> None:
        self.escaped = np.zeros(n, dtype=bool)
        self.prow = np.full(n, np.nan)
        self.pcol = np.full(n, np.nan)

    def note(self, which: np.ndarray, prow: np.ndarray, pcol: np.ndarray) -> None:
        """Points ``which`` (indices) read at ``(prow, pcol)``, outside their windows."""
        if which.size:
            self.escaped[which] = True
            self.prow[which], self.pcol[which] = prow, pcol


@dataclass
class RigidSample:
    """The fit's subsample: pixels, coordinates, reference elevations and gradients, and the
    sampler of the moved to-be-aligned DEM."""

    sample: Sample
    x: np.ndarray
    y: np.ndarray
    ref: np.ndarray
    gx: np.ndarray
    gy: np.ndarray
    centre: np.ndarray
    sampler: RigidSampler

    @property
    def passes(self) -> int:
        """Computes so far: the draw (1, or 2 when few pixels are valid) plus the sampler's reads."""
        return self.sample.passes + self.sampler.reads

    @classmethod
    def from_pair(
        cls,
        data: FitData,
        *,
        subsample: float | int,
        random_state: int | None,
        min_count: int,
        what: str,
        start: np.ndarray,
        interpolation: str = FIT_INTERPOLATION,
        half: int = 2,
    ) -> RigidSample:
        """Draw the subsample with windows of both DEMs (one pass; two when few pixels are valid).

        The rotation centre is the centroid of the sampled reference points. ``start`` is the
        rigid matrix the fit starts from: when it moves the grid's centre horizontally, pixels
        are drawn where the to-be-aligned DEM shifted by that motion is valid (by cubic
        convolution, whose footprint is that of every 4 x 4 interpolation), as for
        :class:`~xdem.coreg.NuthKaab`'s ``initial_shift``. The windows of the to-be-aligned DEM are
        cut around the sampled pixels themselves; the sampler gathers new ones (one more pass)
        for the points whose source positions under ``start`` are not inside them.
        """
        valid = data.valid()
        t = get_transform(data.ref)
        ny, nx = data.ref.shape[-2:]
        cx, cy = t.c + t.a * nx / 2.0, t.f + t.e * ny / 2.0  # the grid's centre (north-up)
        motion = np.asarray(start, dtype=np.float64) @ np.array([cx, cy, 0.0, 1.0]) - np.array([cx, cy, 0.0, 1.0])
        if motion[0] != 0.0 or motion[1] != 0.0:
            moved = shift_dem(data.tba, shift_x=float(motion[0]), shift_y=float(motion[1]), resampling="cubic")
            valid = da.isfinite(data.ref.data) & da.isfinite(moved.data.rechunk(data.ref.data.chunks)) & data.inlier
        s = sample_valid(valid, {"ref": data.ref.data}, subsample=subsample, random_state=random_state,
                         min_count=min_count, what=what, windows={"win_ref": data.ref.data, "win_tba": data.tba.data},
                         half=half)
        win_ref, win_tba = s.pop("win_ref"), s.pop("win_tba")
        gx, gy = window_gradient(win_ref, half, step_x=t.a, step_y=t.e)
        del win_ref
        x = t.c + (s["col"] + 0.5) * t.a
        y = t.f + (s["row"] + 0.5) * t.e
        ref = s["ref"]
        centre = np.array([np.mean(x), np.mean(y), np.mean(ref)])
        sampler = RigidSampler(data.tba, s["row"], s["col"], interpolation=interpolation, half=half, centre=centre)
        sampler.prime(win_tba)
        return cls(sample=s, x=x, y=y, ref=ref, gx=gx, gy=gy, centre=centre, sampler=sampler)

    @classmethod
    def from_points(cls, ps: PointSample, *, start: np.ndarray, min_count: int, half: int = 2,
                    interpolation: str = FIT_INTERPOLATION) -> RigidSample:
        """The drawn points as the sample of a DEM moved onto them: the points' positions are
        the sampled positions, their elevations the reference, the gradient that of the DEM
        moved by ``start`` at the points (:func:`moved_gradient`, half a pixel apart; the
        estimator takes it again as the DEM moves). Fewer than ``min_count`` points where the
        moved DEM and its gradient are finite is a clear error."""
        pts, data = ps.points, ps.data
        dem = data.dem.copy(data=data.values)  # NaN outside the inlier mask
        prow, pcol = pixel_positions(dem, pts.x, pts.y)
        centre = ps.centre()
        sampler = RigidSampler(dem, np.floor(np.nan_to_num(prow)).astype(np.int64),
                               np.floor(np.nan_to_num(pcol)).astype(np.int64), interpolation=interpolation,
                               half=half, centre=centre, x=pts.x, y=pts.y)
        ref = np.asarray(pts.z, dtype=np.float64).copy()
        gx, gy = moved_gradient(sampler, start, ref, gradient_step(dem))
        ss = cls(sample=Sample(n_valid=pts.count), x=pts.x, y=pts.y, ref=ref, gx=gx, gy=gy, centre=centre,
                 sampler=sampler)
        fin = np.isfinite(sampler(start, ref) - ref) & np.isfinite(gx) & np.isfinite(gy)
        ps.require(int(fin.sum()), min_count)
        return ss


def gradient_step(dem: xr.DataArray) -> float:
    """The step of :func:`moved_gradient` on ``dem``: half its mean pixel size."""
    return 0.5 * float(np.mean(get_resolution(dem)))


def moved_gradient(sampler: RigidSampler, matrix: np.ndarray, guess: np.ndarray, step: float
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Gradient ``(dz/dx, dz/dy)`` of the surface moved by ``matrix`` at the sampler's
    positions: central differences ``step`` apart (the surface moved by ``-e`` after
    ``matrix`` shows at ``q`` what the moved surface has at ``q + e``; at the solution it is
    the reference's gradient, the linearisation of the DEM route).

    Examples
    --------
    The plane ``z = 2 x + 0.5 y`` at a point between pixel centres:

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
