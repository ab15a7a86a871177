"""Source windows of the warp's output chunks read once per chunk and once per boundary.

When the warp keeps a DEM on its own grid and moves it by a few pixels (a fitted shift or
rotation), each output chunk's source window (:func:`xdem.warp._footprint`) is the chunk's own
region of the source plus a halo of a few pixels. Read from the file window by window, the
tiles under each halo are decoded again by every chunk that reaches them (at 8000^2 in
2048-pixel chunks of 512-pixel tiles: the 16 windows cover 22 x 22 tiles, the chunks 16 x 16).
Here a window is assembled from pieces read by tasks shared with the neighbouring chunks:

* the chunk's own part of the window (its *core*), read by a task of its own;
* across each boundary between two chunks, one *band* holding what both need from the other
  side (rows for a boundary between two rows of chunks, with the corners; columns for a
  boundary between two columns), read once for both.

Every piece is its own read (never a view of a larger array), so memory holds the pieces of
the running tasks and the few-pixel bands waiting for their second chunk (a band is read
after the core before it, above or on the left: having no input, bands would otherwise all be
read first): a few chunks and about two rows of bands (12 pixels x the width each, for a halo of
6), whatever the DEM's size. The assembled window holds the same values as one read
of it, so the warp's results are the same to the bit. Windows whose halo is not thin (a
reprojection, a large shift) are read in one piece as before (:func:`shared_window_tasks`
returns ``None``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xdem.io.sources import RegionReader

__all__ = ["shared_window_tasks"]

#: A rectangle of source pixels ``(row0, row1, col0, col1)``.
Rect = tuple[int, int, int, int]


def _bbox(rects: list[Rect]) -> Rect | None:
    """The smallest rectangle holding every non-empty one of ``rects``, or ``None``."""
    rects = [r for r in rects if r[0] < r[1] and r[2] < r[3]]
    if not rects:
        return None
    return min(r[0] for r in rects), max(r[1] for r in rects), min(r[2] for r in rects), max(r[3] for r in rects)


def _parts(win: Rect, core: Rect) -> dict[str, Rect]:
    """``win`` split along the edges of the chunk's ``core``: above and below (full width of the
    window), and left, inside and right of the core (rows of the core)."""
    wr0, wr1, wc0, wc1 = win
    r0, r1, c0, c1 = core
    mr0, mr1 = max(wr0, r0), min(wr1, r1)
    return {"top": (wr0, min(wr1, r0), wc0, wc1), "bottom": (max(wr0, r1), wr1, wc0, wc1),
            "left": (mr0, mr1, wc0, min(wc1, c0)), "core": (mr0, mr1, max(wc0, c0), min(wc1, c1)),
            "right": (mr0, mr1, max(wc0, c1), wc1)}


def _halo_needs(windows: dict[tuple[int, int], Rect | None], row_edges: np.ndarray,
                col_edges: np.ndarray) -> tuple[dict[Any, Rect], dict[tuple[int, int], dict[str, Rect]]]:
    """Each chunk's window split into parts (:func:`_parts`), and the band of each boundary:
    ``("h", i, j)`` between chunk rows ``i - 1`` and ``i`` in chunk column ``j`` (the bottom part
    of the upper chunk's window and the top part of the lower one's), ``("v", i, j)`` between
    chunk columns ``j - 1`` and ``j`` in chunk row ``i`` (right and left parts)."""
    parts: dict[tuple[int, int], dict[str, Rect]] = {}
    for (i, j), win in windows.items():
        if win is not None:
            core = (int(row_edges[i]), int(row_edges[i + 1]), int(col_edges[j]), int(col_edges[j + 1]))
            parts[(i, j)] = _parts(win, core)
    bands: dict[Any, Rect] = {}
    for i in range(1, len(row_edges) - 1):
        for j in range(len(col_edges) - 1):
            box = _bbox([p[side] for p, side in ((parts.get((i - 1, j)), "bottom"), (parts.get((i, j)), "top"))
                         if p is not None])
            if box is not None:
                bands[("h", i, j)] = box
    for i in range(len(row_edges) - 1):
        for j in range(1, len(col_edges) - 1):
            box = _bbox([p[side] for p, side in ((parts.get((i, j - 1)), "right"), (parts.get((i, j)), "left"))
                         if p is not None])
            if box is not None:
                bands[("v", i, j)] = box
    return bands, parts


def _read(read: RegionReader, rect: Rect, *after: Any) -> np.ndarray:
    """``rect`` read from the file; ``after``: results of the tasks that must run first (unused)."""
    return read(slice(rect[0], rect[1]), slice(rect[2], rect[3]))


def _ready(_core: np.ndarray) -> None:
    """The token of a core read (see :func:`shared_window_tasks`)."""
    return None


def _place(shape: tuple[int, int], places: np.ndarray, *pieces: np.ndarray) -> np.ndarray:
    """A window of ``shape`` assembled from ``pieces``: row ``k`` of ``places`` puts the block
    ``(rows, cols)`` of piece ``k`` from its pixel ``(src_row, src_col)`` at the window's pixel
    ``(dst_row, dst_col)`` (``places[k] = dst_row, dst_col, src_row, src_col, rows, cols``); the
    pieces cover the window."""
    out = np.empty(shape, dtype=pieces[0].dtype)
    for (dr, dc, sr, sc, nr, nc), piece in zip(places.tolist(), pieces):
        out[dr:dr + nr, dc:dc + nc] = piece[sr:sr + nr, sc:sc + nc]
    return out


def _placed_task(win: Rect, parts: dict[str, Rect], sources: dict[str, tuple[Any, Rect]]) -> tuple[Any, ...]:
    """The task assembling the window ``win`` from its non-empty ``parts``, each cut from the
    piece ``sources[part] = (key, rect read by that key)``."""
    rows, keys = [], []
    for side, (r0, r1, c0, c1) in parts.items():
        if r0 >= r1 or c0 >= c1:
            continue
        key, (kr0, _, kc0, _) = sources[side]
        rows.append((r0 - win[0], c0 - win[2], r0 - kr0, c0 - kc0, r1 - r0, c1 - c0))
        keys.append(key)
    return (_place, (win[1] - win[0], win[3] - win[2]), np.array(rows, dtype=np.int64), *keys)


def _inside(inner: Rect, outer: Rect) -> bool:
    return inner[0] >= inner[1] or inner[2] >= inner[3] or (
        outer[0] <= inner[0] and inner[1] <= outer[1] and outer[2] <= inner[2] and inner[3] <= outer[3])


def shared_window_tasks(windows: dict[tuple[int, int], Rect | None], *, row_edges: np.ndarray,
                        col_edges: np.ndarray, read: RegionReader,
                        name: str) -> tuple[dict[Any, Any], dict[tuple[int, int], tuple[Any, ...]]] | None:
    """Tasks reading the output chunks' source ``windows`` (``(i, j) -> rect``, ``None``: no
    window) in shared pieces (module notes), the chunks being ``row_edges x col_edges`` of the
    source's own grid.

    Returns
    -------
    tuple or None
        ``(read tasks, {(i, j): task giving the window of chunk (i, j)})``; ``None`` when a band
        would be thicker than half the smallest chunk (the halo is not thin: read each window in
        one piece).
    """
    bands, parts = _halo_needs(windows, row_edges, col_edges)
    thin = min(int(np.diff(row_edges).min()), int(np.diff(col_edges).min())) // 2
    for (kind, _, _), (r0, r1, c0, c1) in bands.items():
        if (r1 - r0 if kind == "h" else c1 - c0) > thin:
            return None
    dsk: dict[Any, Any] = {}
    placed: dict[tuple[int, int], tuple[Any, ...]] = {}
    for (i, j), p in parts.items():
        core = p["core"]
        if core[0] < core[1] and core[2] < core[3]:
            dsk[(name, "core", i, j)] = (_read, read, core)
            dsk[(name, "ready", i, j)] = (_ready, (name, "core", i, j))
    for band, rect in bands.items():
        # read once the core before it is (the chunk above, or on the left): a band waits for its
        # second chunk, not every band from the start (bands have no input: dask would read them all first)
        kind, i, j = band
        before = (name, "ready", i - 1, j) if kind == "h" else (name, "ready", i, j - 1)
        dsk[(name, kind, i, j)] = (_read, read, rect) + ((before,) if before in dsk else ())
    for (i, j), p in parts.items():
        sources = {"top": ("h", i, j), "bottom": ("h", i + 1, j), "left": ("v", i, j), "right": ("v", i, j + 1)}
        found: dict[str, tuple[Any, Rect]] = {}
        for side, band in sources.items():
            got = bands.get(band)
            if got is not None:
                found[side] = ((name,) + band, got)
            elif p[side][0] < p[side][1] and p[side][2] < p[side][3]:
                return None  # a part beyond the source's chunks (cannot happen on the source's grid)
        core = p["core"]
        if core[0] < core[1] and core[2] < core[3]:
            found["core"] = ((name, "core", i, j), core)
        if not all(_inside(p[side], found[side][1]) for side in p if side in found):
            return None
        win = windows[(i, j)]
        assert win is not None
        placed[(i, j)] = _placed_task(win, p, found)
    return dsk, placed
