"""``map_overlap`` for 2-D kernels, with a NaN boundary and bounded memory.

:func:`map_overlap_nan` grows each block by a halo taken from its eight neighbours, runs a
numpy kernel on it and (optionally) trims the halo. It does what
``dask.array.map_overlap(..., boundary=np.nan)`` does, with one difference that matters
for DEMs larger than memory: the halo strips are **copied** out of each neighbour chunk in
a small task of their own. With ``dask.array.overlap`` the strips are numpy views, each of
which keeps its whole parent chunk alive until every block that needs it has run; on a
file-backed DEM that pinned several rows of chunks at once (measured: peak RSS of a
resampling pass 0.67 GiB at 8000^2 and 1.1 GiB at 16000^2, against 0.33 GiB for a
pointwise pass). Here a chunk is released as soon as its own block has run.

That alone still holds about one row of chunks: the block of chunk ``(i, j)`` needs the
strips of row ``i + 1``, so dask reads those chunks (to copy their strips) a whole row before
their own blocks run and keeps them until then (width x chunk rows x itemsize: 320 MB for a
40000-pixel-wide float32 DEM in 2048-pixel chunks; however the strips are split between
tasks, dask's ordering then leaves a few chunks per row waiting). When ``arr`` is a DEM read
from a file (:func:`xdem.io.sources.region_reader`), the four strips around each block are
instead read from the file by small tasks of their own (one band across each boundary
between two chunks, shared by both), and a block depends on its own chunk only: memory
holds the chunks of the running tasks, whatever the width (done when a row of chunks is
larger than :data:`READ_HALO_ROW_BYTES`). The price is decoding the file's tiles under the
bands once more (for a halo of a few pixels, 512-pixel tiles and 2048-pixel chunks: about 20
tiles more for the 16 of a chunk, in one read per boundary rather than one per side); the
result is the same to the bit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import dask.array as da
import numpy as np
import numpy.typing as npt
from dask.array.overlap import ensure_minimum_chunksize
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from xdem.io.sources import RegionReader, region_reader

__all__ = ["map_overlap_nan"]

_SIDES = (-1, 0, 1)
#: A DEM read from a file whose row of chunks takes more bytes than this has its halo strips
#: read from the file (module docstring); below it, holding that row costs less than decoding
#: the strips' tiles again (measured at 8000^2 in 2048-pixel chunks, 64 MB a row: +0.5 s CPU,
#: about a quarter of the resampling pass).
READ_HALO_ROW_BYTES = 128 * 2**20


def _strip(side: int, depth: int) -> slice:
    """Along one axis (rows or columns), the part of a chunk on one ``side``: -1 the first
    ``depth``, +1 the last ``depth``, 0 all of it."""
    if side < 0:
        return slice(0, depth)
    if side > 0:
        return slice(-depth, None)
    return slice(None)


def _edges(block: np.ndarray, dr: int, dc: int) -> dict[tuple[int, int], np.ndarray]:
    """Copies of the border strips and corners of ``block`` (never views of it)."""
    out = {}
    for sr in _SIDES:
        for sc in _SIDES:
            if (sr, sc) != (0, 0) and (sr == 0 or dr) and (sc == 0 or dc):
                out[(sr, sc)] = np.array(block[_strip(sr, dr), _strip(sc, dc)], copy=True)
    return out


def _read_window(read: RegionReader, window: tuple[int, int, int, int], shape: tuple[int, int]) -> np.ndarray:
    """``window`` (``(row0, row1, col0, col1)``, may reach beyond the array) read from the
    file, NaN beyond the array's ``shape``."""
    r0, r1, c0, c1 = window
    rr0, rr1, cc0, cc1 = max(r0, 0), min(r1, shape[0]), max(c0, 0), min(c1, shape[1])
    data = read(slice(rr0, rr1), slice(cc0, cc1))
    out = np.full((r1 - r0, c1 - c0), np.nan, dtype=data.dtype)
    out[rr0 - r0 : rr1 - r0, cc0 - c0 : cc1 - c0] = data
    return out


def _grown(center: np.ndarray, neighbours: list[Any], dr: int, dc: int,
           strips: Sequence[np.ndarray | None] = ()) -> np.ndarray:
    """``center`` grown by ``(dr, dc)`` with its neighbours' strips, or with ``strips`` (read
    from the file: above and below with the corners, left and right); NaN where there are none."""
    h, w = center.shape
    out = np.full((h + 2 * dr, w + 2 * dc), np.nan, dtype=center.dtype)
    out[dr : dr + h, dc : dc + w] = center
    places = [(slice(0, dr), slice(None)), (slice(dr + h, None), slice(None)), (slice(dr, dr + h), slice(0, dc)),
              (slice(dr, dr + h), slice(dc + w, None))]
    for (rs, cs), strip in zip(places, strips):
        if strip is not None:
            out[rs, cs] = strip
    k = 0
    for di in _SIDES:
        for dj in _SIDES:
            if (di, dj) == (0, 0):
                continue
            pieces = neighbours[k]
            k += 1
            if pieces is None or (di and not dr) or (dj and not dc):
                continue
            rs = {-1: slice(0, dr), 0: slice(dr, dr + h), 1: slice(dr + h, dr + h + dr)}[di]
            cs = {-1: slice(0, dc), 0: slice(dc, dc + w), 1: slice(dc + w, dc + w + dc)}[dj]
            out[rs, cs] = pieces[(-di, -dj)]
    return out


def _apply(func: Callable[..., np.ndarray], dr: int, dc: int, trim: bool, strips: Sequence[np.ndarray | None],
           center: np.ndarray, *neighbours: Any) -> np.ndarray:
    res = func(_grown(center, list(neighbours), dr, dc, strips))
    if trim:
        res = res[..., dr : res.shape[-2] - dr, dc : res.shape[-1] - dc]
    return res


_Kernel = tuple[Callable[..., np.ndarray], int, int, bool]  # func, dr, dc, trim: the first arguments of _apply


def _tasks_copying_halo(arr: da.Array, kernel: _Kernel, out_name: str, edge_name: str,
                        leading: int | None) -> dict[Any, Any]:
    """Tasks of the blocks grown with strips copied out of the neighbouring chunks."""
    nbr, nbc = arr.numblocks
    dr, dc = kernel[1], kernel[2]
    dsk: dict[Any, Any] = {(edge_name, i, j): (_edges, (arr.name, i, j), dr, dc) for i in range(nbr) for j in range(nbc)}
    for i in range(nbr):
        for j in range(nbc):
            neigh = [
                (edge_name, i + di, j + dj) if 0 <= i + di < nbr and 0 <= j + dj < nbc else None
                for di in _SIDES for dj in _SIDES if (di, dj) != (0, 0)
            ]
            key = (out_name, 0, i, j) if leading else (out_name, i, j)
            dsk[key] = (_apply, *kernel, [], (arr.name, i, j), *neigh)
    return dsk


def _band_strip(band: np.ndarray | None, part: tuple[slice, slice]) -> np.ndarray | None:
    """The part of a boundary band (:func:`_tasks_reading_halo`) that one block uses as a strip."""
    return None if band is None else band[part]


def _tasks_reading_halo(arr: da.Array, read: RegionReader, kernel: _Kernel, out_name: str, strip_name: str,
                        leading: int | None) -> dict[Any, Any]:
    """Tasks of the blocks grown with strips read from the file by tasks of their own: a block
    depends on its own chunk only. One band is read across each boundary between two chunks
    and shared by both (``depth`` on each side: the strip below the upper block and the strip
    above the lower one, with the corners; a strip left and right across a vertical boundary),
    so the file is read once per boundary rather than once per side."""
    rows, cols = np.cumsum((0,) + arr.chunks[0]), np.cumsum((0,) + arr.chunks[1])
    (ny, nx), (dr, dc) = arr.shape, kernel[1:3]
    nbr, nbc = len(arr.chunks[0]), len(arr.chunks[1])
    dsk: dict[Any, Any] = {}
    for i in range(nbr + 1):  # bands across the row boundaries (none at the array's edges)
        for j in range(nbc):
            if dr and 0 < i < nbr:
                r = int(rows[i])
                dsk[(strip_name, "h", i, j)] = (_read_window, read, (r - dr, r + dr, int(cols[j]) - dc,
                                                                     int(cols[j + 1]) + dc), (ny, nx))
    for i in range(nbr):
        for j in range(nbc + 1):
            if dc and 0 < j < nbc:
                c = int(cols[j])
                dsk[(strip_name, "v", i, j)] = (_read_window, read, (int(rows[i]), int(rows[i + 1]), c - dc,
                                                                     c + dc), (ny, nx))
    first, last = (slice(0, dr), slice(None)), (slice(dr, None), slice(None))
    left, right = (slice(None), slice(0, dc)), (slice(None), slice(dc, None))
    for i in range(nbr):
        for j in range(nbc):
            # in _grown's order: above, below, left, right (each the near half of a band)
            bands = [((strip_name, "h", i, j), first), ((strip_name, "h", i + 1, j), last),
                     ((strip_name, "v", i, j), left), ((strip_name, "v", i, j + 1), right)]
            strips = [(_band_strip, key, part) if key in dsk else None for key, part in bands]
            key = (out_name, 0, i, j) if leading else (out_name, i, j)
            dsk[key] = (_apply, *kernel, strips, (arr.name, i, j), *[None] * 8)
    return dsk


def map_overlap_nan(
    func: Callable[..., np.ndarray],
    arr: da.Array,
    *,
    depth: int | tuple[int, int],
    dtype: npt.DTypeLike,
    trim: bool = True,
    leading: int | None = None,
    name: str | None = None,
    **kwargs: object,
) -> da.Array:
    """Map ``func`` over blocks of a 2-D dask array grown by a NaN-filled halo.

    Parameters
    ----------
    func
        Numpy kernel: takes a block grown by ``depth`` on every side (NaN beyond the
        array) and keyword arguments ``kwargs``; returns an array of the grown shape (or of
        the block's shape when ``trim=False`` and the kernel trims itself), optionally with
        one leading axis of length ``leading``.
    arr
        2-D dask array. Chunks narrower than ``depth`` are merged first.
    depth
        Halo in pixels, one int or ``(rows, cols)``.
    dtype
        Output dtype.
    trim
        Cut the halo off ``func``'s output (as ``dask.array.map_overlap`` does).
    leading
        Length of a leading axis added by ``func``, if any.
    name
        Prefix of the task names.

    Returns
    -------
    dask.array.Array
        Lazy; chunks of ``arr`` (with the leading axis first if ``leading``).

    Examples
    --------
    >>> import dask.array as da, numpy as np
    >>> a = da.from_array(np.arange(36.0).reshape(6, 6), chunks=3)
    >>> def east(b):  # value of the next column, NaN past the last one
    ...     out = np.full_like(b, np.nan)
    ...     out[:, :-1] = b[:, 1:]
    ...     return out
    >>> e = map_overlap_nan(east, a, depth=1, dtype=float).compute()
    >>> e[0].tolist()
    [1.0, 2.0, 3.0, 4.0, 5.0, nan]
    """
    d = np.asarray(depth)  # what np.ndim(depth) looks at: 0-d for one depth, else (rows, cols)
    dr, dc = (int(d), int(d)) if d.ndim == 0 else (int(d[0]), int(d[1]))
    if dr < 0 or dc < 0:
        raise ValueError(f"depth must be >= 0, got {depth}")
    kernel = partial(func, **kwargs) if kwargs else func
    dtype = np.dtype(dtype)
    # chunks at least as deep as the halo (a halo deeper than the whole array: one chunk, NaN beyond)
    need_r, need_c = min(dr, arr.shape[0]), min(dc, arr.shape[1])
    if (need_r and min(arr.chunks[0]) < need_r) or (need_c and min(arr.chunks[1]) < need_c):
        arr = arr.rechunk((ensure_minimum_chunksize(max(need_r, 1), arr.chunks[0]),
                           ensure_minimum_chunksize(max(need_c, 1), arr.chunks[1])))
    row_bytes = arr.shape[1] * max(arr.chunks[0]) * arr.dtype.itemsize
    read = region_reader(arr) if row_bytes > READ_HALO_ROW_BYTES else None
    token = tokenize(kernel, arr, dr, dc, trim, leading, dtype, read is not None)
    prefix = name or getattr(func, "__name__", "kernel")
    out_name = f"{prefix}-overlap-{token}"
    if read is not None:  # a DEM read from a file: its halo too (module docstring)
        dsk = _tasks_reading_halo(arr, read, (kernel, dr, dc, trim), out_name, f"overlap-strip-{token}", leading)
    else:
        dsk = _tasks_copying_halo(arr, (kernel, dr, dc, trim), out_name, f"overlap-edges-{token}", leading)
    # dask's own stubs: da.Array's __dask_scheduler__ does not match its DaskCollection protocol
    graph = HighLevelGraph.from_collections(out_name, dsk, dependencies=[arr])  # type: ignore[list-item]
    chunks = (((leading,),) if leading else ()) + arr.chunks
    meta = np.empty((0,) * len(chunks), dtype=dtype)
    return da.Array(graph, out_name, chunks, meta=meta)
