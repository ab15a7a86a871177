"""Reproducible, chunk-independent subsampling of valid pixels.

Every pixel gets a pseudo-random number in ``[0, 1)`` from a counter-based hash
(SplitMix64) of its *global* index ``row * ncols + col`` and the seed. The subsample is the
``n`` valid pixels with the smallest numbers. It depends only on the seed, the grid and the
valid mask: never on the chunking, the scheduler, or whether the input is numpy or dask.

Drawing it takes two passes over the inputs, each a map-then-reduce with small per-block
results:

1. per block, a histogram (4096 bins) of the numbers of the valid pixels;
2. per block, the candidates below the histogram edge that holds the ``n``-th number,
   with the values of the requested arrays at those pixels.

The ``n`` candidates with the smallest numbers are then kept (ties are impossible: the
hash is a bijection on 64 bits).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Callable

import dask
import dask.array as da
import numpy as np

from xdem.errors import InputError, NotEnoughDataError

__all__ = ["pixel_uniform", "resolve_count", "sample_valid", "Sample", "DEFAULT_SEED"]

#: Seed used when ``random_state=None``: results are reproducible by default.
DEFAULT_SEED = 0
_NBINS = 4096
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser on a uint64 array (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = x + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _seed_key(random_state: int | None) -> np.uint64:
    seed = DEFAULT_SEED if random_state is None else int(random_state)
    if seed < 0:
        raise InputError(f"random_state must be a non-negative integer, got {random_state}")
    return _splitmix64(np.array([seed], dtype=np.uint64))[0]


def pixel_uniform(row0: int, col0: int, shape: tuple[int, int], ncols: int, random_state: int | None) -> np.ndarray:
    """Pseudo-random numbers in ``[0, 1)`` for a block of pixels, keyed on global indices.

    Parameters
    ----------
    row0, col0
        Global index of the block's first pixel.
    shape
        Block shape.
    ncols
        Number of columns of the whole grid.
    random_state
        Seed (``None`` means :data:`DEFAULT_SEED`).

    Examples
    --------
    >>> a = pixel_uniform(0, 0, (4, 4), 4, 1)
    >>> b = pixel_uniform(2, 2, (2, 2), 4, 1)
    >>> bool((a[2:, 2:] == b).all())
    True
    """
    h = _pixel_hash(row0, col0, shape, ncols, random_state)
    return (h >> np.uint64(11)).astype(np.float64) * (1.0 / 2.0**53)


def _pixel_hash(row0: int, col0: int, shape: tuple[int, int], ncols: int, random_state: int | None) -> np.ndarray:
    """``_splitmix64(global index ^ seed key)`` of a block, computed in place (one temporary):
    about 3 times faster than the out-of-place expression on a 2048^2 block, same bits."""
    with np.errstate(over="ignore"):
        z = np.arange(row0, row0 + shape[0], dtype=np.uint64)[:, None] * np.uint64(ncols)
        z = z + np.arange(col0, col0 + shape[1], dtype=np.uint64)[None, :]
        z ^= _seed_key(random_state)
        z += _GOLDEN
        t = z >> np.uint64(30)
        z ^= t
        z *= np.uint64(0xBF58476D1CE4E5B9)
        np.right_shift(z, np.uint64(27), out=t)
        z ^= t
        z *= np.uint64(0x94D049BB133111EB)
        np.right_shift(z, np.uint64(31), out=t)
        z ^= t
    return z


def resolve_count(subsample: float | int, n_valid: int) -> int:
    """Number of pixels to draw: a fraction (``<= 1``) or a count (``> 1``) of ``n_valid``.

    A count larger than ``n_valid`` means "all valid pixels".
    """
    if isinstance(subsample, bool) or not isinstance(subsample, (int, float, np.integer, np.floating)) or subsample <= 0:
        raise InputError(f"subsample must be a fraction in (0, 1] or a count > 1, got {subsample!r}")
    if subsample <= 1:
        return int(min(n_valid, max(1, round(float(subsample) * n_valid)))) if n_valid else 0
    return int(min(n_valid, int(subsample)))


class Sample(dict):
    """Values of arrays at the drawn pixels (a dict of 1-D numpy arrays), plus metadata.

    Keys ``"row"`` and ``"col"`` hold the global pixel indices (sorted by global index);
    other keys are the names of the sampled arrays. ``n_valid`` is the number of valid
    pixels the draw was made from.
    """

    n_valid: int = 0
    counts: dict[str, int] = {}


def _hist_block(valid: np.ndarray, *, ncols: int, random_state: int | None, block_info=None) -> np.ndarray:
    loc = block_info[0]["array-location"]
    h = _pixel_hash(loc[0][0], loc[1][0], valid.shape, ncols, random_state)
    # bin of u = (h >> 11) / 2**53 among _NBINS = 2**12 equal bins: its top 12 bits, no float
    hist = np.bincount((h[valid] >> np.uint64(64 - 12)).astype(np.intp), minlength=_NBINS)
    return hist[None, None, :]


def cut_windows(block: np.ndarray, lrow: np.ndarray, lcol: np.ndarray, half: int) -> np.ndarray:
    """Windows ``(n, 2h+2, 2h+2)`` (float32) of ``block`` starting at ``(lrow - h, lcol - h)``."""
    size = 2 * half + 2
    view = np.lib.stride_tricks.sliding_window_view(block, (size, size))
    return np.ascontiguousarray(view[lrow - half, lcol - half]).astype(np.float32)


def _candidates_block(
    valid: np.ndarray, *arrays: np.ndarray, names: tuple[str, ...], win_names: tuple[str, ...], half: int,
    edge: float, ncols: int, random_state: int | None, row0: int, col0: int,
) -> dict[str, np.ndarray]:
    u = pixel_uniform(row0, col0, valid.shape, ncols, random_state)
    keep = valid & (u < edge)
    r, c = np.nonzero(keep)
    out = {"u": u[r, c], "row": r.astype(np.int64) + row0, "col": c.astype(np.int64) + col0}
    for name, arr in zip(names, arrays[: len(names)]):
        out[name] = np.asarray(arr)[r, c].astype(np.float64)
    for name, arr in zip(win_names, arrays[len(names) :]):  # overlapped by half + 1
        out[name] = cut_windows(np.asarray(arr), r + half + 1, c + half + 1, half)
    return out


def sample_valid(
    valid: da.Array,
    arrays: Mapping[str, da.Array],
    *,
    subsample: float | int,
    random_state: int | None,
    min_count: int = 1,
    what: str = "the fit",
    extra_counts: Mapping[str, da.Array] | None = None,
    windows: Mapping[str, da.Array] | None = None,
    half: int = 2,
) -> Sample:
    """Draw a reproducible subsample of the valid pixels and gather arrays there.

    Parameters
    ----------
    valid
        2-D boolean dask array, True where a pixel may be drawn.
    arrays
        Name -> 2-D dask arrays on the same grid and chunks as ``valid``, gathered at the
        drawn pixels (as float64).
    subsample
        Fraction of the valid pixels (``<= 1``) or their count (``> 1``; more than there
        are means all of them).
    random_state
        Seed; the draw is identical for any chunking and scheduler.
    min_count
        Raise :class:`~xdem.errors.NotEnoughDataError` when fewer valid pixels exist.
    what
        Name of the caller, used in error messages.
    extra_counts
        Name -> 2-D boolean dask arrays whose True pixels are counted exactly during the
        first pass (no extra pass); the counts are in ``Sample.counts``.
    windows
        Name -> 2-D dask arrays from which a window of ``2*half+2`` pixels starting at
        ``(row - half, col - half)`` around every drawn pixel is cut in the second pass (no
        extra pass); NaN outside the grid. Returned as ``(n, 2h+2, 2h+2)`` float32 arrays.
    half
        Half-size of those windows.

    Returns
    -------
    Sample
        Dict of 1-D arrays: ``row``, ``col`` and one entry per name of ``arrays``.

    Examples
    --------
    >>> import dask.array as da, numpy as np
    >>> z = da.from_array(np.arange(100.0).reshape(10, 10), chunks=4)
    >>> s = sample_valid(da.isfinite(z), {"z": z}, subsample=10, random_state=3)
    >>> len(s["z"])
    10
    """
    valid = da.asarray(valid)
    ny, nx = valid.shape
    arrays = {k: da.asarray(v).rechunk(valid.chunks) for k, v in arrays.items()}
    hist = da.map_blocks(
        _hist_block, valid, ncols=nx, random_state=random_state, dtype=np.int64,
        chunks=((1,) * valid.numblocks[0], (1,) * valid.numblocks[1], (_NBINS,)), new_axis=2,
    )
    extra = {k: da.asarray(v).rechunk(valid.chunks).sum() for k, v in (extra_counts or {}).items()}
    hist, extra = dask.compute(hist.sum(axis=(0, 1)), extra)
    n_valid = int(hist.sum())
    if n_valid < min_count:
        raise NotEnoughDataError(
            f"{what} needs at least {min_count} valid pixels but found {n_valid} of {ny * nx} "
            "(valid = finite in both DEMs, inside the inlier mask, and method-specific criteria); "
            "check the overlap, the nodata value and the inlier mask"
        )
    n = resolve_count(subsample, n_valid)
    cum = np.cumsum(hist)
    b = int(np.searchsorted(cum, n))  # first bin where the cumulative count reaches n
    edge = 1.0 if n >= n_valid else (b + 1) / _NBINS
    names = tuple(arrays)
    win_names = tuple(windows or {})
    if set(win_names) & set(names):
        raise InputError(f"a name is both sampled and windowed: {sorted(set(win_names) & set(names))}")
    win_arrays = [
        da.overlap.overlap(
            da.asarray(windows[k]).rechunk(valid.chunks).astype(np.float32),
            depth={0: half + 1, 1: half + 1}, boundary=np.nan,
        )
        for k in win_names
    ]
    row_starts = np.cumsum((0,) + valid.chunks[0][:-1])
    col_starts = np.cumsum((0,) + valid.chunks[1][:-1])
    vblocks = valid.to_delayed()
    ablocks = [arrays[k].to_delayed() for k in names] + [w.to_delayed() for w in win_arrays]
    tasks = []
    for i in range(valid.numblocks[0]):
        for j in range(valid.numblocks[1]):
            tasks.append(
                dask.delayed(_candidates_block)(
                    vblocks[i, j], *[ab[i, j] for ab in ablocks], names=names, win_names=win_names, half=half,
                    edge=edge, ncols=nx,
                    random_state=random_state, row0=int(row_starts[i]), col0=int(col_starts[j]),
                )
            )
    parts = dask.compute(*tasks)
    keys = ("u", "row", "col") + names + win_names
    merged = {k: np.concatenate([p[k] for p in parts]) for k in keys}
    order = np.argsort(merged["u"], kind="stable")[:n]
    order = order[np.lexsort((merged["col"][order], merged["row"][order]))]
    out = Sample({k: merged[k][order] for k in keys[1:]})
    out.n_valid = n_valid
    out.counts = {k: int(v) for k, v in extra.items()}
    return out
