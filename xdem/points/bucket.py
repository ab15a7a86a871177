"""Evaluating a DEM at points out of core: bucket the points by chunk, one task per chunk.

:func:`dem_at_points` converts the points to fractional pixel positions (pixel values are at
pixel CENTRES: ``col = (x - x0) / a - 0.5``), sorts them by the chunk that holds them (one
pass, :func:`bucket_points`) and builds one task per chunk that holds points: the chunk
grown by a small halo from copies of its neighbours' border strips
(:func:`xdem.overlap._edges`, as :func:`xdem.overlap.map_overlap_nan` does), evaluated at its
points by :func:`xdem.kernels.points.at_points_kernel`. A task holds one chunk, its halo and
its points; the results are the points' values (and windows), joined in memory.

:class:`PointSampler` keeps the windows cut around the points, so that the DEM moved by a
shift is evaluated at the points in memory, and reads again only when the shift leaves them.
"""

from __future__ import annotations

from dataclasses import dataclass

import dask
import dask.array as da
import numpy as np
import xarray as xr
from dask.array.overlap import ensure_minimum_chunksize

from xdem.errors import CRSError
from xdem.io.grid import dask_data, get_transform, shift_in_pixels_at, signed_resolution
from xdem.kernels.interp import footprint, interp_windows_kernel
from xdem.kernels.points import at_points_kernel
from xdem.overlap import _SIDES, _edges, _grown
from xdem.points.read import PointSet

#: Positions are rounded to multiples of 1 / POSITION_QUANTUM pixel before chunk offsets are
#: taken off (exact in float64 for grids up to 2^22 pixels a side).
POSITION_QUANTUM = float(2**30)
#: Points evaluated per compute by :func:`dem_at_points` (their positions, values and the
#: tasks' temporaries: about 100 MB).
BATCH_POINTS = 2_000_000

__all__ = ["pixel_positions", "bucket_points", "Bucket", "dem_at_points", "PointSampler"]


def pixel_positions(dem: xr.DataArray, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fractional ``(row, col)`` of map coordinates, pixel ``(i, j)``'s value being at ``(i, j)``.

    Examples
    --------
    >>> import xarray as xr, rioxarray  # noqa: F401
    >>> from affine import Affine
    >>> dem = xr.DataArray(np.zeros((2, 2)), dims=("y", "x")).rio.write_transform(Affine(5, 0, 100, 0, -5, 200))
    >>> [v.tolist() for v in pixel_positions(dem, np.array([102.5]), np.array([197.5]))]  # first pixel centre
    [[0.0], [0.0]]
    """
    t = get_transform(dem)
    if t.b != 0 or t.d != 0:
        raise CRSError("rotated or sheared grids are not supported; warp the DEM to a north-up grid with gdalwarp")
    return (np.asarray(y, dtype=np.float64) - t.f) / t.e - 0.5, (np.asarray(x, dtype=np.float64) - t.c) / t.a - 0.5


@dataclass(frozen=True)
class Bucket:
    """The points (indices ``ids``) whose position falls in chunk ``(i, j)``."""

    i: int
    j: int
    ids: np.ndarray


def _block_of(pos: np.ndarray, ids: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Block index (int32) of ``floor(pos[ids])`` among block ``edges`` (in-place temporaries)."""
    t = pos[ids]
    np.floor(t, out=t)
    np.clip(t, 0, edges[-1] - 1, out=t)
    b = np.searchsorted(edges, t, side="right")
    del t
    b -= 1
    return b.astype(np.int32)


def bucket_points(chunks: tuple[tuple[int, ...], tuple[int, ...]], prow: np.ndarray,
                  pcol: np.ndarray) -> list[Bucket]:
    """Group points by the chunk holding ``floor(position)``, in one sort.

    Points outside the grid's footprint (``-0.5 <= position < size - 0.5`` on both axes) or
    with NaN positions are in no bucket. Memory: about 28 bytes per point at the peak (the
    sort), besides the positions.

    Examples
    --------
    >>> b = bucket_points(((2, 2), (3,)), np.array([0.2, 3.1, 9.0]), np.array([1.0, 1.0, 1.0]))
    >>> [(k.i, k.j, k.ids.tolist()) for k in b]
    [(0, 0, [0]), (1, 0, [1])]
    """
    r_edges, c_edges = np.cumsum((0,) + tuple(chunks[0])), np.cumsum((0,) + tuple(chunks[1]))
    inside = (prow >= -0.5) & (prow < r_edges[-1] - 0.5)
    inside &= (pcol >= -0.5) & (pcol < c_edges[-1] - 0.5)
    ids = np.flatnonzero(inside)
    del inside
    ncol = len(c_edges) - 1
    key = _block_of(prow, ids, r_edges).astype(np.int64 if (len(r_edges) - 1) * ncol >= 2**31 else np.int32)
    key *= ncol
    key += _block_of(pcol, ids, c_edges)
    order = np.argsort(key, kind="stable")
    key, ids = key[order], ids[order]
    del order
    if not len(key):
        return []
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    ends = np.r_[starts[1:], len(key)]
    return [Bucket(int(key[s] // ncol), int(key[s] % ncol), ids[s:e]) for s, e in zip(starts, ends)]


def _point_task(lrow: np.ndarray, lcol: np.ndarray, halo: int, resampling: str, half: int | None,
                center: np.ndarray, *neighbours: object) -> tuple[np.ndarray, np.ndarray | None]:
    block = _grown(np.asarray(center, dtype=np.float64), list(neighbours), halo, halo)
    return at_points_kernel(block, lrow + halo, lcol + halo, resampling=resampling, half=half)


def _local(pos: np.ndarray, ids: np.ndarray, offset: int) -> np.ndarray:
    """Positions of ``ids`` relative to a chunk starting at ``offset``: rounded to the
    :data:`POSITION_QUANTUM` grid first, so that the offset is taken off exactly (a point's
    value does not depend on which chunk holds it: chunk independence)."""
    t = pos[ids] * POSITION_QUANTUM
    np.round(t, out=t)
    t /= POSITION_QUANTUM
    t -= offset
    return t


def _batch_tasks(group: list[Bucket], blocks: np.ndarray, prow: np.ndarray, pcol: np.ndarray, r_edges: np.ndarray,
                 c_edges: np.ndarray, halo: int, resampling: str, half: int | None) -> list[object]:
    """One delayed task per bucket of ``group``: its chunk, the border strips of its
    neighbours (one edge task per neighbour, shared), its points' local positions."""
    nbr, nbc = blocks.shape
    edges: dict[tuple[int, int], object] = {}

    def edge(i: int, j: int) -> object:
        if (i, j) not in edges:
            edges[(i, j)] = dask.delayed(_edges, pure=True)(blocks[i, j], halo, halo)
        return edges[(i, j)]

    tasks = []
    for b in group:
        neigh = [edge(b.i + di, b.j + dj) if 0 <= b.i + di < nbr and 0 <= b.j + dj < nbc else None
                 for di in _SIDES for dj in _SIDES if (di, dj) != (0, 0)]
        tasks.append(dask.delayed(_point_task)(_local(prow, b.ids, int(r_edges[b.i])),
                                               _local(pcol, b.ids, int(c_edges[b.j])), halo, resampling, half,
                                               blocks[b.i, b.j], *neigh))
    return tasks


def dem_at_points(
    arr: da.Array, prow: np.ndarray, pcol: np.ndarray, *, resampling: str, half: int | None = None,
    batch_points: int | None = None,
) -> tuple[np.ndarray, np.ndarray | None, int]:
    """Values of ``arr`` at fractional positions (and windows with ``half``), out of core.

    The points are bucketed by chunk (:func:`bucket_points`); consecutive buckets are
    computed together until they hold ``batch_points`` points (one compute each: a chunk is
    read once, its neighbours' border strips once per batch they serve), so that the tasks'
    arguments and results stay bounded whatever the number of points. A chunk holding more
    than ``batch_points`` points is split into several tasks (and computes) of at most that
    many: a task's memory is one chunk, its halo and at most ``batch_points`` points (their
    positions, values and windows), whatever the density of the points.

    Parameters
    ----------
    arr
        2-D dask array (a DEM's data; NaN = no data).
    prow, pcol
        ``(n,)`` positions from :func:`pixel_positions`.
    resampling
        Interpolation of :func:`xdem.kernels.points.at_points_kernel`.
    half
        Also cut windows of ``2 half + 2`` pixels (see the kernel).
    batch_points
        Points per compute (default :data:`BATCH_POINTS`).

    Returns
    -------
    values : numpy.ndarray
        ``(n,)`` float64, NaN outside the grid or where the footprint meets a NaN.
    windows : numpy.ndarray or None
        ``(n, 2 half + 2, 2 half + 2)`` float32 (NaN for points in no chunk).
    tasks : int
        Chunk tasks run (chunks holding points, a dense chunk counting once per batch).

    Examples
    --------
    >>> a = da.from_array(np.arange(36.0).reshape(6, 6), chunks=3)
    >>> v, _, n = dem_at_points(a, np.array([2.5, 0.0, 7.0]), np.array([2.5, 4.0, 0.0]), resampling="bilinear")
    >>> v.tolist(), n
    ([17.5, 4.0, nan], 2)
    """
    prow, pcol = np.asarray(prow, dtype=np.float64), np.asarray(pcol, dtype=np.float64)
    batch = int(batch_points or BATCH_POINTS)
    halo = max(footprint(resampling)[1], 0 if half is None else half + 1) + 1
    need_r, need_c = min(halo, arr.shape[0]), min(halo, arr.shape[1])
    if min(arr.chunks[0]) < need_r or min(arr.chunks[1]) < need_c:  # neighbours must hold the whole halo
        arr = arr.rechunk((ensure_minimum_chunksize(need_r, arr.chunks[0]),
                           ensure_minimum_chunksize(need_c, arr.chunks[1])))
    values = np.full(len(prow), np.nan)
    windows = None if half is None else np.full((len(prow), 2 * half + 2, 2 * half + 2), np.nan, dtype=np.float32)
    # a chunk holding more than a batch of points (a dense survey over one chunk) is served by
    # several tasks of at most a batch each: a task never holds more than one chunk, its halo
    # and one batch of points, however the points are distributed
    buckets = [Bucket(b.i, b.j, b.ids[s:s + batch]) for b in bucket_points(arr.chunks, prow, pcol)
               for s in range(0, len(b.ids), batch)]
    r_edges, c_edges = np.cumsum((0,) + arr.chunks[0]), np.cumsum((0,) + arr.chunks[1])
    blocks = arr.to_delayed(optimize_graph=False)  # shared keys: each block read once per compute
    k = 0
    while k < len(buckets):
        group: list[Bucket] = []
        count = 0
        while k < len(buckets) and (not group or count + len(buckets[k].ids) <= batch):
            group.append(buckets[k])
            count += len(buckets[k].ids)
            k += 1
        tasks = _batch_tasks(group, blocks, prow, pcol, r_edges, c_edges, halo, resampling, half)
        for b, (vals, wins) in zip(group, dask.compute(*tasks)):
            values[b.ids] = vals
            if windows is not None and wins is not None:
                windows[b.ids] = wins
        del tasks
    return values, windows, len(buckets)


class PointSampler:
    """Values of a DEM moved by ``(sx, sy)`` at points, from windows cut around them.

    ``sampler(sx, sy)`` returns ``dem(x - sx, y - sy)`` at every point (the sign convention
    of the translations). The windows (``2 half + 2`` pixels) are cut at the first call and
    again (one pass, :func:`dem_at_points`) only when the shift takes a point's interpolation
    footprint out of its window; ``reads`` counts the passes.

    Parameters
    ----------
    dem
        The DEM (its grid gives the pixel positions; ``data`` its values, e.g. masked).
    points
        The points, in the DEM's CRS.
    resampling
        Interpolation (``"lagrange"``, ``"cubic"`` or ``"bilinear"``).
    data
        Values to read instead of ``dem``'s (same grid and chunks), e.g. with NaN outside an
        inlier mask.
    """

    def __init__(self, dem: xr.DataArray, points: PointSet, *, resampling: str, half: int = 2,
                 data: da.Array | None = None) -> None:
        #: ``(res_x, res_y)`` of ``dem`` (:func:`~xdem.io.grid.signed_resolution`), read once, as
        #: :class:`~xdem.coreg._windows.WindowSampler` does: reading the transform from the
        #: coordinates on every call costs far more than the division
        self.res = signed_resolution(dem)
        self.arr = dask_data(dem) if data is None else data
        self.prow, self.pcol = pixel_positions(dem, points.x, points.y)
        self.anchor_row, self.anchor_col = np.floor(self.prow), np.floor(self.pcol)
        self.resampling = resampling
        self.half = half
        self.before, self.after = footprint(resampling)
        self.R: int | None = None
        self.C: int | None = None
        self.windows: np.ndarray | None = None
        self.reads = 0

    def _read(self, R: int, C: int) -> np.ndarray:
        _, win, _ = dem_at_points(self.arr, self.anchor_row + R, self.anchor_col + C, resampling=self.resampling,
                                  half=self.half)
        assert win is not None
        self.R, self.C, self.windows = R, C, win
        self.reads += 1
        return win

    def release(self) -> None:
        """Free the cached windows once the sampler's last use is done; a later call reads them
        again (counted in ``reads``)."""
        self.R, self.C, self.windows = None, None, None

    def __call__(self, sx: float, sy: float) -> np.ndarray:
        h = self.half
        drow, dcol = shift_in_pixels_at(self.res, sx, sy)
        win, R, C = self.windows, self.R, self.C
        if win is None or R is None or C is None or not self._fits(drow - R, dcol - C):
            R, C = int(round(drow)), int(round(dcol))
            win = self._read(R, C)
        prow = self.prow - self.anchor_row + (drow - R) + h
        pcol = self.pcol - self.anchor_col + (dcol - C) + h
        return interp_windows_kernel(win, prow, pcol, resampling=self.resampling)

    def _fits(self, dr: float, dc: float) -> bool:
        size = 2 * self.half + 2
        ok = True
        for frac, d in ((self.prow - self.anchor_row, dr), (self.pcol - self.anchor_col, dc)):
            f = np.floor(frac + d + self.half)
            fin = np.isfinite(f)
            ok = ok and bool(np.all((f[fin] - self.before >= 0) & (f[fin] + self.after < size)))
        return ok
