"""The report's work on each block, done in the task that draws its subsample from that block.

:func:`xdem.report.data.collect` makes ONE pass over the data: every task reads one block of
each DEM and, besides the subsample's candidates (:func:`xdem.sampling.sample_valid`), runs the
functions here on it (:class:`xdem.sampling.BlockWork`), each returning a small result merged
in memory afterwards. One task per block, whatever is computed: the blocks are released as
soon as it ends (separate reductions over the same reads made dask hold every block read for
one until the others caught up: 1.3 GB for an 8000 x 8000 pair in 512-pixel chunks, growing
with the grid).

* :func:`map_cells_block` / :func:`merge_map_cells`: NaN-ignoring ``k x k`` block means of the
  maps (the cells a chunk border cuts get their sums from several blocks); the one
  implementation of the maps' block means, also behind :func:`xdem.report.data.coarsen_mean`
  (lazy, for a dask array) and :func:`cell_means` (an array in memory, e.g. an overview);
* :func:`class_counts_block`: valid pixels per slope class (integers);
* :func:`inside_block_sums`: pixels of the mask and the count and sum of each dh inside it.

Examples
--------
>>> import numpy as np
>>> z = np.arange(36.0).reshape(6, 6)
>>> parts = [map_cells_block(z[r:r + 3, c:c + 3], k=2, shape=(6, 6), row0=r, col0=c)
...          for r in (0, 3) for c in (0, 3)]
>>> merge_map_cells(parts, shape=(6, 6), k=2)[0][0].tolist()  # means of 2 x 2 cells, across blocks
[3.5, 5.5, 7.5]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeAlias

import numpy as np

from xdem.errors import InputError

__all__ = ["decimation_factor", "map_cells_block", "merge_map_cells", "cell_means", "class_counts_block",
           "inside_block_sums", "merge_inside", "MapCells"]

#: One block's part of the maps (:func:`map_cells_block`): ``(cell_row0, cell_col0, sums, counts)``.
MapCells: TypeAlias = tuple[int, int, list[np.ndarray], list[np.ndarray]]


def decimation_factor(shape: tuple[int, int], max_pixels: int) -> int:
    """Smallest ``k >= 1`` such that ``(ny // k) * (nx // k) <= max_pixels``.

    Examples
    --------
    >>> decimation_factor((400, 400), 10_000)
    4
    """
    if int(max_pixels) < 1:
        raise InputError(f"max_pixels must be >= 1, got {max_pixels}")
    ny, nx = shape
    k = max(1, int(math.ceil(math.sqrt(ny * nx / max_pixels))))
    while (ny // k) * (nx // k) > max_pixels:
        k += 1
    return k


def map_cells_block(*blocks: np.ndarray, k: int, shape: tuple[int, int], row0: int, col0: int) -> MapCells | None:
    """Sums and counts of the finite values of each block in the ``k x k`` map cells it touches
    (cells of the grid trimmed to ``(ny // k) * k`` rows and ``(nx // k) * k`` columns):
    ``(cell_row0, cell_col0, sums, counts)`` (float64 and int64 arrays, one per block given),
    or ``None`` when the block lies in the trimmed margin."""
    ny, nx = blocks[0].shape
    r_end, c_end = min(row0 + ny, (shape[0] // k) * k), min(col0 + nx, (shape[1] // k) * k)
    if r_end <= row0 or c_end <= col0:
        return None
    cr0, cc0 = row0 // k, col0 // k
    nr, nc = (r_end - 1) // k + 1 - cr0, (c_end - 1) // k + 1 - cc0
    pr, pc = row0 - cr0 * k, col0 - cc0 * k  # the block's first pixel in its first cell
    sums, counts = [], []
    for b in blocks:
        frame = np.full((nr * k, nc * k), np.nan)
        frame[pr : pr + r_end - row0, pc : pc + c_end - col0] = b[: r_end - row0, : c_end - col0]
        total, n = _cell_sums(frame, k)
        sums.append(total)
        counts.append(n)
    return cr0, cc0, sums, counts


def _cell_sums(frame: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Sums (float64) and counts of the finite values in each ``k x k`` cell of ``frame``,
    whose sides are multiples of ``k``."""
    v = np.asarray(frame, dtype=np.float64).reshape(frame.shape[0] // k, k, frame.shape[1] // k, k)
    ok = np.isfinite(v)
    return np.where(ok, v, 0.0).sum(axis=(1, 3)), ok.sum(axis=(1, 3))


def _means(total: np.ndarray, n: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, total / np.maximum(n, 1), np.nan).astype(np.float32)


def cell_means(a: np.ndarray, *, k: int) -> np.ndarray:
    """NaN-ignoring means (float32) of the ``k x k`` cells of an array in memory, trimmed to
    ``(ny // k, nx // k)`` cells: the values :func:`merge_map_cells` gives for the same array
    in blocks. Cells without any finite value are NaN.

    Examples
    --------
    >>> import numpy as np
    >>> cell_means(np.array([[1.0, np.nan, 5.0], [3.0, np.nan, 7.0]]), k=2).tolist()
    [[2.0]]
    """
    rows, cols = (a.shape[0] // k) * k, (a.shape[1] // k) * k
    return _means(*_cell_sums(a[:rows, :cols], k))


def merge_map_cells(parts: Sequence[MapCells | None], *, shape: tuple[int, int], k: int) -> list[np.ndarray]:
    """The maps (float32, NaN where a cell has no finite value) from every block's
    :func:`map_cells_block`, in row-major block order (the same order for any scheduler)."""
    out_shape = (shape[0] // k, shape[1] // k)
    sums: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    for part in parts:
        if part is None:
            continue
        cr0, cc0, s, c = part
        if not sums:
            sums = [np.zeros(out_shape) for _ in s]
            counts = [np.zeros(out_shape, dtype=np.int64) for _ in s]
        for total, n, si, ci in zip(sums, counts, s, c):
            total[cr0 : cr0 + si.shape[0], cc0 : cc0 + si.shape[1]] += si
            n[cr0 : cr0 + ci.shape[0], cc0 : cc0 + ci.shape[1]] += ci
    return [_means(total, n) for total, n in zip(sums, counts)]


def class_counts_block(slope: np.ndarray, *dhs: np.ndarray, edges: np.ndarray, row0: int, col0: int) -> np.ndarray:
    """Valid pixels of each ``dh`` (rows) in each slope class (columns) of one block; the last
    class includes its upper edge (as :func:`xdem.spatialstats.stats_by_slope_class`)."""
    del row0, col0
    out = np.zeros((len(dhs), len(edges) - 1), dtype=np.int64)
    for i, dh in enumerate(dhs):
        out[i] = np.histogram(slope[np.isfinite(dh) & np.isfinite(slope)], bins=edges)[0]
    return out


def inside_block_sums(stable: np.ndarray, *dhs: np.ndarray, row0: int, col0: int) -> np.ndarray:
    """``[mask pixels, count_1, sum_1, count_2, sum_2, ...]`` of one block: pixels that are not
    stable, and per dh the count and sum of its finite values there (float64)."""
    del row0, col0
    inside = ~np.asarray(stable, dtype=bool)
    out = [float(np.count_nonzero(inside))]
    for dh in dhs:
        sel = inside & np.isfinite(dh)
        out += [float(np.count_nonzero(sel)), float(np.asarray(dh, dtype=np.float64)[sel].sum())]
    return np.array(out)


def merge_inside(parts: Sequence[np.ndarray], names: Sequence[str]) -> dict[str, float]:
    """The sums of :func:`xdem.report.masked.inside_block` from every block's
    :func:`inside_block_sums` (added in row-major block order)."""
    total = np.sum(np.stack(parts), axis=0)
    out: dict[str, float] = {"mask_pixels": int(total[0])}
    for i, name in enumerate(names):
        out[f"{name}.count"] = int(total[1 + 2 * i])
        out[f"{name}.sum"] = float(total[2 + 2 * i])
    return out
