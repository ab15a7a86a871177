"""Small windows gathered around sampled pixels: the in-memory working set of the
shift-estimating methods (:class:`~xdem.coreg.NuthKaab`, :class:`~xdem.coreg.NuthKaabDeramp`).

Instead of re-reading whole rasters at every iteration, these methods read, once, a window
of ``2 h + 2`` pixels around each sampled pixel (one pass), evaluate the to-be-aligned DEM
at any shift by interpolation inside the windows, and read again only when the shift leaves
them. The slope and aspect of the reference at the sampled pixels come from the same
windows (the 3 x 3 neighbourhood of each pixel), so no full-size terrain raster is computed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol, overload

import dask
import dask.array as da
import numpy as np
import xarray as xr

from xdem.coreg._data import FitData
from xdem.coreg._iterate import initial_shift_of
from xdem.coreg._shift import shift_dem
from xdem.io.grid import check_projected, get_resolution, shift_in_pixels_at, signed_resolution
from xdem.kernels.interp import footprint, interp_windows_kernel
from xdem.sampling import Sample, partial_windows, sample_valid
from xdem.terrain.kernels import slope_aspect_at_centres

__all__ = ["gather_windows", "WindowSampler", "terrain_at_windows", "SlopedSample", "sample_with_terrain"]


@overload
def gather_windows(arrays: da.Array, rows: np.ndarray, cols: np.ndarray, half: int) -> np.ndarray: ...


@overload
def gather_windows(arrays: Sequence[da.Array], rows: np.ndarray, cols: np.ndarray, half: int) -> list[np.ndarray]: ...


def gather_windows(
    arrays: da.Array | Sequence[da.Array], rows: np.ndarray, cols: np.ndarray, half: int
) -> np.ndarray | list[np.ndarray]:
    """Read windows of ``2*half+2`` pixels around integer centres, in one compute.

    Window ``k`` starts at pixel ``(rows[k] - half, cols[k] - half)``. Each chunk holding a
    part of some window is read once, for all ``arrays`` together (they must share one grid
    and chunking), and gives the parts it holds (:func:`xdem.sampling.partial_windows`),
    joined in memory: no ``overlap``, so memory is bounded by the chunk size and the number
    of points, not the DEM size. Window pixels outside the grid are NaN.

    Returns one ``(n, 2h+2, 2h+2)`` float32 array, or a list of them when given a sequence.
    """
    single = isinstance(arrays, da.Array)
    arrs: list[da.Array] = [arrays] if isinstance(arrays, da.Array) else list(arrays)
    rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
    size = 2 * half + 2
    outs = [np.full((len(rows), size, size), np.nan, dtype=np.float32) for _ in arrs]
    r_edges = np.cumsum((0,) + arrs[0].chunks[0])
    c_edges = np.cumsum((0,) + arrs[0].chunks[1])
    blocks = [a.to_delayed(optimize_graph=False) for a in arrs]  # shared keys: each block read once
    # block rows/columns reached by each window: rows r - half ... r + half + 1
    bi0 = np.clip(np.searchsorted(r_edges, rows - half, side="right") - 1, 0, len(r_edges) - 2)
    bi1 = np.clip(np.searchsorted(r_edges, rows + half + 1, side="right") - 1, 0, len(r_edges) - 2)
    bj0 = np.clip(np.searchsorted(c_edges, cols - half, side="right") - 1, 0, len(c_edges) - 2)
    bj1 = np.clip(np.searchsorted(c_edges, cols + half + 1, side="right") - 1, 0, len(c_edges) - 2)
    reach = (rows + half + 1 >= 0) & (rows - half < r_edges[-1]) & (cols + half + 1 >= 0) & (cols - half < c_edges[-1])
    tasks, groups = [], []
    for i in range(len(r_edges) - 1):
        for j in range(len(c_edges) - 1):
            ids = np.flatnonzero(reach & (bi0 <= i) & (i <= bi1) & (bj0 <= j) & (j <= bj1))
            if len(ids) == 0:
                continue
            lrow, lcol = rows[ids] - r_edges[i], cols[ids] - c_edges[j]
            tasks.append([dask.delayed(partial_windows)(b[i, j], lrow, lcol, half) for b in blocks])
            groups.append(ids)
    for ids, wins in zip(groups, dask.compute(*tasks)):
        for out, win in zip(outs, wins):
            out[ids] = np.fmax(out[ids], win)
    return outs[0] if single else outs


def terrain_at_windows(
    windows: np.ndarray, half: int, *, res_x: float, res_y: float, method: str
) -> tuple[np.ndarray, np.ndarray]:
    """Slope and aspect (degrees) at the centre pixel of each window.

    The 3 x 3 neighbourhood of each centre goes to
    :func:`xdem.terrain.kernels.slope_aspect_at_centres` (the operations of
    :func:`~xdem.terrain.kernels.slope_aspect_kernel`, at those pixels only): the values equal
    those of :func:`xdem.terrain.slope`/:func:`~xdem.terrain.aspect`.
    """
    nb = windows[:, half - 1 : half + 2, half - 1 : half + 2]
    slope, aspect = slope_aspect_at_centres(nb, res_x=res_x, res_y=res_y, method=method)
    return np.degrees(slope), np.degrees(aspect)


class WindowSampler:
    """Values of ``tba`` moved by ``(sx, sy)`` at the sampled pixels, from cached windows.

    ``sampler(sx, sy)`` returns ``tba(x - sx, y - sy)`` at every sampled pixel. Windows are
    re-read (one pass) only when the shift leaves the cached ones; ``reads`` counts them.
    """

    def __init__(self, tba: xr.DataArray, rows: np.ndarray, cols: np.ndarray, resampling: str, half: int = 2, *,
                 res: tuple[float, float] | None = None):
        self.arr = tba.data
        self.grid = tba
        #: ``(res_x, res_y)`` of ``tba`` (:func:`~xdem.io.grid.signed_resolution`; ``res`` when the caller
        #: read it already), read once: each reading of the transform from the coordinates costs far
        #: more than the division
        self.res = signed_resolution(tba) if res is None else res
        self.rows, self.cols = rows, cols
        self.resampling = resampling
        self.half = half
        self.before, self.after = footprint(resampling)
        self.R: int | None = None
        self.C: int | None = None
        self.win: np.ndarray | None = None
        self.reads = 0

    def prime(self, windows: np.ndarray) -> None:
        """Use ``windows`` (gathered at zero shift, centred on the sampled pixels)."""
        self.R, self.C, self.win = 0, 0, windows

    def release(self) -> None:
        """Free the cached windows once the sampler's last use is done (before a solve allocates
        its own arrays); a later call reads them again (one more pass, counted in ``reads``)."""
        self.R, self.C, self.win = None, None, None

    def __call__(self, sx: float, sy: float) -> np.ndarray:
        h = self.half
        drow, dcol = shift_in_pixels_at(self.res, sx, sy)
        win, R, C = self.win, self.R, self.C  # all None before the first read, all set after it
        if win is None or R is None or C is None or not all(
            self.before <= p - c + h < 2 * h + 1 - self.after for p, c in ((drow, R), (dcol, C))
        ):
            self.R, self.C = R, C = int(round(drow)), int(round(dcol))
            self.win = win = gather_windows(self.arr, self.rows + R, self.cols + C, h)
            self.reads += 1
        n = len(self.rows)
        return interp_windows_kernel(win, np.full(n, drow - R + h), np.full(n, dcol - C + h), resampling=self.resampling)


@dataclass
class SlopedSample:
    """A subsample with the reference's slope and aspect (degrees) and a primed sampler."""

    sample: Sample
    slope: np.ndarray
    aspect: np.ndarray
    sampler: WindowSampler

    @property
    def passes(self) -> int:
        """Computes so far: the draw with its windows (1, or 2 when few pixels are valid,
        :func:`xdem.sampling.sample_valid`) plus the sampler's later reads."""
        return self.sample.passes + self.sampler.reads


def sample_with_terrain(
    data: FitData,
    *,
    subsample: float | int,
    random_state: int | None,
    min_count: int,
    what: str,
    resampling: str,
    terrain_method: str,
    half: int = 2,
    initial_shift: tuple[float, ...] | None = None,
) -> SlopedSample:
    """Draw the subsample and cut windows of both DEMs around it: one pass over the data
    (two when few pixels are valid).

    The windows are cut in the same pass as the draw (:func:`xdem.sampling.sample_valid`). Slope and
    aspect come from the reference windows. With an ``initial_shift`` ``(sx, sy)``, pixels are
    drawn where ``tba`` moved by that shift is valid (not where ``tba`` itself is), and the
    sampler cuts the ``tba`` windows around the shifted positions at its first call (one
    more pass).
    """
    valid = data.valid()
    windows = {"win_ref": data.ref.data, "win_tba": data.tba.data}
    start = initial_shift_of(initial_shift)
    if start[:2] != (0.0, 0.0):
        moved = shift_dem(data.tba, shift_x=start[0], shift_y=start[1],
                          resampling=resampling)
        valid = da.isfinite(data.ref.data) & da.isfinite(moved.data.rechunk(data.ref.data.chunks)) & data.inlier
        del windows["win_tba"]
    s = sample_valid(
        valid, {"ref": data.ref.data}, subsample=subsample, random_state=random_state,
        min_count=min_count, what=what, windows=windows, half=half,
    )
    win_ref, win_tba = s.pop("win_ref"), s.pop("win_tba", None)
    res_x, res_y = signed_resolution(data.ref)
    slope, aspect = terrain_at_windows(win_ref, half, res_x=res_x, res_y=res_y, method=terrain_method)
    sampler = WindowSampler(data.tba, s["row"], s["col"], resampling, half)
    if win_tba is not None:
        sampler.prime(win_tba)
    return SlopedSample(sample=s, slope=slope, aspect=aspect, sampler=sampler)


class ShiftEstimator(Protocol):
    """The hyper-parameters :func:`shift_fit_sample` and :class:`xdem.coreg._point_sample.ShiftSample` read
    (NuthKaab, NuthKaabDeramp)."""

    subsample: float | int
    random_state: int | None
    resampling: str
    terrain_method: str
    initial_shift: tuple[float, ...] | None
    on_divergence: str
    _min_points: ClassVar[int]
    _half: ClassVar[int]


def shift_fit_sample(est: ShiftEstimator, data: FitData, what: str) -> tuple[SlopedSample, tuple[float, float]]:
    """The common start of the shift estimators' fits: a projected reference, its pixel size
    ``(dx, dy)``, and the subsample with its windows and terrain (:func:`sample_with_terrain`)
    drawn with the estimator's hyper-parameters."""
    check_projected(data.ref, what)
    ss = sample_with_terrain(
        data, subsample=est.subsample, random_state=est.random_state, min_count=est._min_points, what=what,
        resampling=est.resampling, terrain_method=est.terrain_method, half=est._half, initial_shift=est.initial_shift,
    )
    return ss, get_resolution(data.ref)
