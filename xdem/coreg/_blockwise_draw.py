"""Nuth & Kääb's draws of many tiles of a :class:`~xdem.coreg.BlockwiseCoreg` in one pass.

Each tile's draw is the one :func:`~xdem.coreg._windows.sample_with_terrain` makes on the tile
alone (the pixels whose hash, keyed on the pixel's index in the tile, is among the ``n``
smallest of the tile's valid pixels; windows of both DEMs cut from the tile, NaN beyond it),
but a group of neighbouring tiles is drawn in one pass over the group's region: every block
of the region draws the candidates of each tile it meets
(:func:`xdem.sampling._candidates_block` on the block's part of that tile, with the tile's
own offsets), where one pass per tile decoded every chunk once per tile meeting it (about 6
times with 1000-pixel tiles and 2048-pixel chunks). The same candidates, so the same sample
whatever the grouping and the chunking. Groups are whole rows of tiles while their candidates'
windows fit in :data:`GROUP_BYTES` (a row is split beyond): memory is bounded by that, not by
the DEM. A tile with too few candidates (fewer valid pixels than the first pass
assumed) is drawn again alone, as :func:`~xdem.sampling.sample_valid` would.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import dask
import dask.array as da
import numpy as np

from xdem.coreg._data import FitData
from xdem.coreg._windows import SlopedSample, WindowSampler, sample_with_terrain, terrain_at_windows
from xdem.errors import NotEnoughDataError
from xdem.io._heap import release_free_heap
from xdem.io.grid import block_tasks, read_region, signed_resolution
from xdem.sampling import OVERSAMPLE, Sample, _bound, _candidates_block, join_windows, resolve_count

__all__ = ["GROUP_BYTES", "BAND_BYTES", "tile_groups", "draw_tiles", "chunk_bands", "draw_bands"]

Tile = tuple[int, int, int, int]
#: One block's candidates for one tile (:func:`xdem.sampling._candidates_block`).
Candidates = dict[str, Any]

#: Memory allowed for the candidates of one group of tiles (windows of both DEMs around each).
GROUP_BYTES = 128 * 2**20
#: Memory allowed for the candidates of the tiles drawn band by band (:func:`chunk_bands`): those of
#: every tile begun and not finished when a band of blocks ends.
BAND_BYTES = 192 * 2**20
#: Bytes per candidate: two 6 x 6 float32 windows, the hash, indices and value.
_CANDIDATE_BYTES = 2 * 36 * 4 + 40


def _limit(subsample: float | int, npix: int) -> int:
    """The hash bound of the first pass of :func:`~xdem.sampling.sample_valid` on ``npix`` pixels."""
    frac = float(subsample) if subsample <= 1 else min(1.0, float(subsample) * (1.0 + OVERSAMPLE) / max(npix, 1))
    return _bound(frac, npix)


def _expected(subsample: float | int, tile: Tile) -> int:
    npix = (tile[1] - tile[0]) * (tile[3] - tile[2])
    return int(min(1.0, _limit(subsample, npix) / 2**64) * npix) + 1


def tile_groups(tiles: Sequence[Tile], subsample: float | int) -> list[list[int]]:
    """Indices of ``tiles`` (row-major) in groups drawn in one pass each: whole rows of tiles
    while their candidates fit in :data:`GROUP_BYTES` together; a row that alone does not is
    split into runs of consecutive tiles that do.

    Examples
    --------
    >>> tile_groups([(0, 10, 0, 10), (0, 10, 10, 20), (10, 20, 0, 10)], 50)
    [[0, 1, 2]]
    """
    rows: dict[int, list[int]] = {}
    for i, tile in enumerate(tiles):
        rows.setdefault(tile[0], []).append(i)
    groups: list[list[int]] = []
    current: list[int] = []
    used = 0
    for row in rows.values():
        sizes = [_expected(subsample, tiles[i]) * _CANDIDATE_BYTES for i in row]
        if used + sum(sizes) <= GROUP_BYTES:
            current += row
            used += sum(sizes)
            continue
        if current:
            groups.append(current)
        current, used = [], 0
        if sum(sizes) <= GROUP_BYTES:
            current, used = list(row), sum(sizes)
            continue
        for i, size in zip(row, sizes):  # a row too large for one pass: runs of its tiles
            if current and used + size > GROUP_BYTES:
                groups.append(current)
                current, used = [], 0
            current.append(i)
            used += size
        groups.append(current)
        current, used = [], 0
    if current:
        groups.append(current)
    return groups


def _block(valid: np.ndarray, ref: np.ndarray, tba: np.ndarray, *, row0: int, col0: int, origin: tuple[int, int],
           tiles: Sequence[Tile], limits: Sequence[int], half: int, random_state: int | None) -> list[Candidates | None]:
    """Per tile of ``tiles``: the candidates of its part of this block (``None`` if it misses the block)."""
    gr0, gc0 = origin[0] + row0, origin[1] + col0
    gr1, gc1 = gr0 + valid.shape[0], gc0 + valid.shape[1]
    out: list[Candidates | None] = []
    for (r0, r1, c0, c1), limit in zip(tiles, limits):
        a0, a1, b0, b1 = max(r0, gr0), min(r1, gr1), max(c0, gc0), min(c1, gc1)
        if a0 >= a1 or b0 >= b1:
            out.append(None)
            continue
        part = (slice(a0 - gr0, a1 - gr0), slice(b0 - gc0, b1 - gc0))
        out.append(_candidates_block(valid[part], ref[part], ref[part], tba[part], names=("ref",),
                                     win_names=("win_ref", "win_tba"), half=half, limit=limit, nrows=r1 - r0,
                                     ncols=c1 - c0, random_state=random_state, row0=a0 - r0, col0=b0 - c0))
    return out


def _region_arrays(data: FitData, region: tuple[slice, slice]) -> list[da.Array]:
    """The valid mask, ``ref`` and ``tba`` over ``region``, each block of a DEM read from a file read
    straight from it (:func:`~xdem.io.grid.read_region`): a group of tiles decodes only the file's
    tiles under it, not every chunk it meets (once per group: about 6 times at 20000^2)."""
    ref, tba = read_region(data.ref.data, *region), read_region(data.tba.data, *region)
    inlier = data.inlier[region]
    if inlier.chunks != ref.chunks:
        inlier = inlier.rechunk(ref.chunks)
    valid: da.Array = da.isfinite(ref) & da.isfinite(tba) & inlier
    return [valid, ref, tba]


def _sample(parts: list[Candidates], subsample: float | int, ncols: int) -> Sample | None:
    """The tile's sample from its candidates, as :func:`~xdem.sampling.sample_valid` makes it
    (``None``: too few candidates, draw the tile alone)."""
    n_valid = int(sum(int(p["n_valid"]) for p in parts))
    n = resolve_count(subsample, n_valid)
    if sum(len(p["h"]) for p in parts) < n:
        return None
    keys = ("h", "row", "col", "ref")
    merged = {k: np.concatenate([p[k] for p in parts]) for k in keys}
    order = np.argpartition(merged["h"], n - 1)[:n] if 0 < n < len(merged["h"]) else np.arange(n)
    index = merged["row"][order] * ncols + merged["col"][order]
    order = order[np.argsort(index)]
    values = {k: merged[k][order] for k in keys[1:]}
    wanted = values["row"] * ncols + values["col"]
    for k in ("win_ref", "win_tba"):
        values[k] = join_windows([p["wkey"] for p in parts], [p.pop(k) for p in parts], wanted)
    return Sample(values=values, n_valid=n_valid, passes=1)


def _sloped(sub: FitData, s: Sample, *, half: int, resampling: str, terrain_method: str,
            res: tuple[float, float]) -> SlopedSample:
    """What :func:`~xdem.coreg._windows.sample_with_terrain` returns for this sample (``res``: the
    pair's :func:`~xdem.io.grid.signed_resolution`, read once for all tiles)."""
    win_ref, win_tba = s.pop("win_ref"), s.pop("win_tba")
    res_x, res_y = res
    slope, aspect = terrain_at_windows(win_ref, half, res_x=res_x, res_y=res_y, method=terrain_method)
    sampler = WindowSampler(sub.tba, s["row"], s["col"], resampling, half, res=res)
    sampler.prime(win_tba)
    return SlopedSample(sample=s, slope=slope, aspect=aspect, sampler=sampler)


def draw_tiles(data: FitData, subs: Sequence[FitData], tiles: Sequence[Tile], *, subsample: float | int,
               random_state: int | None, half: int, resampling: str, terrain_method: str) -> list[SlopedSample | None]:
    """Nuth & Kääb's sample of each of ``tiles`` (global pixel bounds; ``subs`` their slices of
    ``data``) in one pass over their bounding box: per tile what :func:`sample_with_terrain`
    gives on the tile alone (``initial_shift`` none), ``None`` where no pixel is valid."""
    R0, R1 = min(t[0] for t in tiles), max(t[1] for t in tiles)
    C0, C1 = min(t[2] for t in tiles), max(t[3] for t in tiles)
    region = (slice(R0, R1), slice(C0, C1))
    limits = [_limit(subsample, (t[1] - t[0]) * (t[3] - t[2])) for t in tiles]
    res = signed_resolution(data.ref)
    tasks = block_tasks(_block, _region_arrays(data, region), origin=(R0, C0), tiles=list(tiles), limits=limits, half=half,
                        random_state=random_state)
    blocks: list[list[Candidates | None]] = list(dask.compute(*tasks))
    release_free_heap()  # what the pass freed (decoded chunks' temporaries) goes back (xdem.io._heap)
    out: list[SlopedSample | None] = []
    for k, (tile, sub) in enumerate(zip(tiles, subs)):
        parts: list[Candidates] = [p for b in blocks if (p := b[k]) is not None]
        for b in blocks:
            b[k] = None  # release the candidates once used
        out.append(_finish(parts, sub, tile, subsample=subsample, random_state=random_state, half=half,
                           resampling=resampling, terrain_method=terrain_method, res=res))
    return out


def _finish(parts: list[Candidates], sub: FitData, tile: Tile, *, subsample: float | int, random_state: int | None,
            half: int, resampling: str, terrain_method: str, res: tuple[float, float]) -> SlopedSample | None:
    """A tile's sample from all its candidates (emptied), drawn alone when too few; ``None``: no valid pixel."""
    s = _sample(parts, subsample, tile[3] - tile[2])
    parts.clear()
    if s is not None:
        return None if s.n_valid == 0 else _sloped(sub, s, half=half, resampling=resampling,
                                                    terrain_method=terrain_method, res=res)
    try:
        return sample_with_terrain(sub, subsample=subsample, random_state=random_state, min_count=1,
                                   what="Nuth & Kääb", resampling=resampling, terrain_method=terrain_method, half=half)
    except NotEnoughDataError:
        return None


def chunk_bands(tiles: Sequence[Tile], row_chunks: Sequence[int], subsample: float | int) -> list[tuple[int, int]] | None:
    """Bands of whole rows of chunks over ``tiles`` for :func:`draw_bands`: consecutive rows of
    chunks join a band while the candidates of the tiles it meets (each counted for its rows up
    to the band's end: those begun before are still held) fit in :data:`BAND_BYTES`; ``None`` when
    one row of chunks alone does not (then :func:`tile_groups` plans the draw).

    Examples
    --------
    >>> chunk_bands([(0, 100, 0, 100), (100, 200, 0, 100)], (64, 64, 72), 50)  # all in one pass
    [(0, 200)]
    """
    R0, R1 = min(t[0] for t in tiles), max(t[1] for t in tiles)
    edges = np.cumsum((0,) + tuple(int(c) for c in row_chunks))
    rows = [(max(int(a), R0), min(int(b), R1)) for a, b in zip(edges[:-1], edges[1:]) if a < R1 and b > R0]

    def held(a0: int, a1: int) -> float:
        return sum(_expected(subsample, t) * _CANDIDATE_BYTES * min(1.0, (a1 - t[0]) / (t[1] - t[0]))
                   for t in tiles if t[0] < a1 and t[1] > a0)

    bands: list[tuple[int, int]] = []
    for a0, a1 in rows:
        if bands and held(bands[-1][0], a1) <= BAND_BYTES:
            bands[-1] = (bands[-1][0], a1)
        elif held(a0, a1) <= BAND_BYTES:
            bands.append((a0, a1))
        else:
            return None
    return bands


def draw_bands(data: FitData, subs: Sequence[FitData], tiles: Sequence[Tile], bands: Sequence[tuple[int, int]], *,
               subsample: float | int, random_state: int | None, half: int, resampling: str,
               terrain_method: str) -> Iterator[list[tuple[int, SlopedSample | None]]]:
    """:func:`draw_tiles` of all ``tiles`` a band of whole rows of chunks at a time
    (:func:`chunk_bands`): each chunk is decoded once (a group of whole rows of tiles decodes the
    rows of chunks it straddles, each about twice). A tile's candidates are held from band to band
    until its last row; after each band, the tiles it finished, as ``(index in tiles, sample)``.
    The same candidates, so the same samples as :func:`draw_tiles`."""
    C0, C1 = min(t[2] for t in tiles), max(t[3] for t in tiles)
    limits = [_limit(subsample, (t[1] - t[0]) * (t[3] - t[2])) for t in tiles]
    parts: dict[int, list[Candidates]] = {}
    res = signed_resolution(data.ref)
    for a0, a1 in bands:
        meet = [k for k, t in enumerate(tiles) if t[0] < a1 and t[1] > a0]
        region = (slice(a0, a1), slice(C0, C1))
        tasks = block_tasks(_block, _region_arrays(data, region), origin=(a0, C0),
                            tiles=[tiles[k] for k in meet], limits=[limits[k] for k in meet], half=half,
                            random_state=random_state)
        blocks: list[list[Candidates | None]] = list(dask.compute(*tasks))
        release_free_heap()  # as after a group's pass (draw_tiles)
        for j, k in enumerate(meet):
            parts.setdefault(k, []).extend(p for b in blocks if (p := b[j]) is not None)
        del blocks
        done = [k for k in meet if tiles[k][1] <= a1]
        yield [(k, _finish(parts.pop(k), subs[k], tiles[k], subsample=subsample, random_state=random_state,
                           half=half, resampling=resampling, terrain_method=terrain_method, res=res)) for k in done]
