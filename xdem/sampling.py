"""Reproducible, chunk-independent subsampling of valid pixels.

Every pixel gets a pseudo-random number in ``[0, 1)`` from a counter-based hash
(SplitMix64) of its *global* index ``row * ncols + col`` and the seed. The subsample is the
``n`` valid pixels with the smallest numbers. It depends only on the seed, the grid and the
valid mask: never on the chunking, the scheduler, or whether the input is numpy or dask.

Drawing it is a map-then-reduce with small per-block results, usually in ONE pass over
the inputs: every block returns its number of valid pixels and the valid pixels whose hash
is below a bound chosen so that, with a margin, at least ``n`` of them exist over the grid
(the values of the requested arrays, and optionally small windows of other arrays, are
taken there at the same time). The ``n`` smallest hashes are kept (ties are impossible: the
hash is a bijection on 64 bits). When the valid pixels are too few for the first bound
(less than about 80 % of the grid valid and a count asked for), the exact number of valid
pixels is now known and a second pass with a bound computed from it completes the draw:
the result is the same either way, only the number of passes differs (``Sample.passes``).

Every pass is purely block-wise (no ``overlap``): a window that crosses a chunk border is
cut in pieces, each block giving the part it holds, and the pieces are joined in memory.
Memory is bounded by the chunk size and the number of sampled points, whatever the size
of the DEM.
"""

from __future__ import annotations

import math
import mmap
from collections.abc import Callable, ItemsView, Iterable, Iterator, KeysView, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import dask
import dask.array as da
import numpy as np

from xdem.errors import InputError, NotEnoughDataError
from xdem.io._heap import release_free_heap
from xdem.io.grid import block_tasks
from xdem.kernels.draw import (
    cut_windows_nan,
    cut_windows_nan_into,
    draw_block,
    hash_block,
    hash_keys,
    join_pieces,
    select_finite_block,
)

__all__ = ["pixel_uniform", "resolve_count", "sample_valid", "Sample", "BlockWork", "DEFAULT_SEED"]

#: Seed used when ``random_state=None``: results are reproducible by default.
DEFAULT_SEED = 0
#: Candidates asked from the first pass beyond a requested COUNT, as a fraction of it: the
#: draw needs one pass when at least 1 / (1 + this) of the pixels are valid.
OVERSAMPLE = 0.25
#: Binomial margin on the candidates' number, in standard deviations.
_SIGMAS = 6.0
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
#: Window pieces of a block at least this large (bytes) get pages of their own (:func:`_own_pages`).
#: Small on purpose: a block's pieces shrink as the DEM grows (the same count of windows spread over
#: more blocks; Nuth & Kääb's at 40000^2 with 2048^2 chunks: about 236 KiB a block), and pieces left in
#: glibc's heap are held through the pass between buffers freed around them: at 40000^2 with the
#: former 256 KiB the fit's heap held 441 MiB free at its peak (issue 28). At 16 KiB (four pages)
#: the pages a piece wastes stay under a quarter of it.
OWN_PAGES_BYTES = 16 * 2**10


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
    """``_splitmix64(global index ^ seed key)`` of a block: a compiled loop (:func:`xdem.kernels.draw.hash_block`; one pass, no
    temporary; about 5 times faster than the in-place numpy expression), the same bits as
    :func:`_splitmix64` (tested)."""
    out = np.empty(shape, dtype=np.uint64)
    hash_block(np.uint64(row0), np.uint64(col0), np.uint64(ncols), _seed_key(random_state), out)
    return out


def resolve_count(subsample: float | int, n_valid: int) -> int:
    """Number of pixels to draw: a fraction (``<= 1``) or a count (``> 1``) of ``n_valid``.

    A count larger than ``n_valid`` means "all valid pixels".
    """
    if isinstance(subsample, bool) or not isinstance(subsample, (int, float, np.integer, np.floating)) or subsample <= 0:
        raise InputError(f"subsample must be a fraction in (0, 1] or a count > 1, got {subsample!r}")
    if subsample <= 1:
        return int(min(n_valid, max(1, round(float(subsample) * n_valid)))) if n_valid else 0
    return int(min(n_valid, int(subsample)))


@dataclass
class Sample:
    """Values of arrays at the drawn pixels, and how they were drawn.

    Read like a dict of 1-D numpy arrays (``s["row"]``, ``"dh" in s``, ``s.keys()``,
    ``s.items()``, ``s.get("x")``, ``dict(s)``): keys ``"row"`` and ``"col"`` hold the
    global pixel indices (sorted by global index); other keys are the names of the sampled
    arrays (and windows).

    Attributes
    ----------
    values
        Name -> values at the drawn pixels.
    n_valid
        Number of valid pixels the draw was made from.
    counts
        Name -> exact number of True pixels of each ``extra_counts`` array.
    passes
        Passes over the data the draw made (1 or 2).
    also
        Name -> the per-block results (row-major) of each :class:`BlockWork` given to
        :func:`sample_valid` (first pass).

    Examples
    --------
    >>> s = Sample(values={"row": np.array([0, 1]), "dh": np.array([0.5, -0.5])}, n_valid=10, passes=1)
    >>> s["dh"].tolist(), "row" in s, sorted(s.keys()), s.n_valid
    ([0.5, -0.5], True, ['dh', 'row'], 10)
    """

    values: dict[str, np.ndarray] = field(default_factory=dict)
    n_valid: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    passes: int = 0
    also: dict[str, list] = field(default_factory=dict)

    def __getitem__(self, key: str) -> np.ndarray:
        return self.values[key]

    def __contains__(self, key: object) -> bool:
        return key in self.values

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def keys(self) -> KeysView[str]:
        """Names of the sampled arrays."""
        return self.values.keys()

    def items(self) -> ItemsView[str, np.ndarray]:
        """``(name, values)`` pairs."""
        return self.values.items()

    def get(self, key: str, default: np.ndarray | None = None) -> np.ndarray | None:
        """``self[key]`` if present, else ``default``."""
        return self.values.get(key, default)

    def __setitem__(self, key: str, value: np.ndarray) -> None:
        self.values[key] = value

    @overload
    def pop(self, key: str) -> np.ndarray: ...

    @overload
    def pop(self, key: str, default: np.ndarray | None, /) -> np.ndarray | None: ...

    def pop(self, key: str, *default: np.ndarray | None) -> np.ndarray | None:
        """Remove and return the values of ``key`` (e.g. windows once used)."""
        return self.values.pop(key, *default)


def cut_windows(block: np.ndarray, lrow: np.ndarray, lcol: np.ndarray, half: int) -> np.ndarray:
    """Windows ``(n, 2h+2, 2h+2)`` (float32) of ``block`` starting at ``(lrow - h, lcol - h)``."""
    size = 2 * half + 2
    view = np.lib.stride_tricks.sliding_window_view(block, (size, size))
    return view[lrow - half, lcol - half].astype(np.float32, copy=False)


def partial_windows(block: np.ndarray, lrow: np.ndarray, lcol: np.ndarray, half: int) -> np.ndarray:
    """Windows as :func:`cut_windows`, for centres anywhere (e.g. up to ``half + 1`` pixels outside ``block``);
    NaN where a window leaves the block (another block holds that part)."""
    lrow, lcol = np.asarray(lrow, dtype=np.int64), np.asarray(lcol, dtype=np.int64)
    return cut_windows_nan(np.asarray(block), lrow, lcol, half)  # one compiled loop, no padded copy


def join_windows(keys: np.ndarray | Sequence[np.ndarray], parts: np.ndarray | Sequence[np.ndarray],
                 wanted: np.ndarray) -> np.ndarray:
    """Join window pieces: for each key of ``wanted`` (sorted, unique), the element-wise
    ``fmax`` of every piece with that key (pieces of one window never overlap, so this puts
    each pixel where its block left it). Every wanted key must have at least one piece.
    ``keys`` and ``parts`` may be lists (e.g. one per block): they are not concatenated."""
    key_list = [keys] if isinstance(keys, np.ndarray) else list(keys)
    part_list = [parts] if isinstance(parts, np.ndarray) else list(parts)
    shape = part_list[0].shape[1:] if part_list else (0, 0)
    return _join_stream(zip(key_list, part_list), np.asarray(wanted), shape,
                        part_list[0].dtype if part_list else np.dtype(np.float32))


def _join_stream(pieces: Iterable[tuple[np.ndarray, np.ndarray]], wanted: np.ndarray, shape: tuple[int, ...],
                 dtype: np.dtype) -> np.ndarray:
    """:func:`join_windows` of ``(keys, pieces)`` pairs taken one at a time: a pair the iterator
    no longer holds is freed as soon as it is joined (the draw's pieces then never coexist
    with the whole joined array)."""
    out = np.empty((len(wanted), *shape), dtype=dtype)
    seen = np.zeros(len(wanted), dtype=np.int64)
    for k, p in pieces:
        if len(wanted):
            pos = np.minimum(np.searchsorted(wanted, k), len(wanted) - 1)
            pos[wanted[pos] != k] = -1  # pieces of windows not drawn
            join_pieces(pos, p, out, seen)
        del k, p
    if not seen.all():
        raise AssertionError("a sampled window is missing some of its pieces")
    return out


def _own_pages(shape: tuple[int, ...], dtype: type) -> np.ndarray:
    """An uninitialised array; from :data:`OWN_PAGES_BYTES` up, on an anonymous memory map of
    its own, so that its pages go back to the system when it is freed, whatever the allocator
    keeps (glibc keeps freed blocks below its mmap threshold in the heap, and the draw's pieces
    are freed while the joined windows grow)."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    if nbytes < OWN_PAGES_BYTES or not hasattr(mmap, "MAP_PRIVATE"):
        return np.empty(shape, dtype=dtype)
    pages = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    return np.frombuffer(pages, dtype=dtype).reshape(shape)


def _candidates_block(
    valid: np.ndarray, *arrays: np.ndarray, names: tuple[str, ...], win_names: tuple[str, ...], half: int,
    limit: int, nrows: int, ncols: int, random_state: int | None, row0: int, col0: int,
) -> dict[str, np.ndarray]:
    """A block's valid count and candidates (``valid & below(hash, limit)``, row-major), with
    the windows around them and around the margin pixels below ``limit`` whose windows reach into
    the block (their validity is decided by their own block; unused pieces are dropped): one
    compiled pass (:func:`xdem.kernels.draw.draw_block`), no per-pixel temporary."""
    ny, nx = valid.shape
    er0, er1, ec0, ec1 = row0, row0 + ny, col0, col0 + nx
    if win_names:  # the block and a margin: the centres whose windows reach into it
        er0, er1 = max(row0 - half - 1, 0), min(row0 + ny + half, nrows)
        ec0, ec1 = max(col0 - half - 1, 0), min(col0 + nx + half, ncols)
    every = limit >= 2**64
    cap = int(min(1.0, limit / 2**64) * (er1 - er0) * (ec1 - ec0) * 1.05) + 1024
    r, c, h, n_valid, wr, wc = draw_block(
        np.asarray(valid, dtype=bool), row0, col0, ncols, _seed_key(random_state), np.uint64(0 if every else limit),
        every, er0, er1, ec0, ec1, bool(win_names), cap,
    )
    # ``h`` is a view of the kernel's first guess (``cap``): a copy of its own does not pin the rest
    out = {"h": h.copy(), "row": r + row0, "col": c + col0, "n_valid": np.int64(n_valid)}
    for name, arr in zip(names, arrays[: len(names)]):
        out[name] = np.asarray(arr)[r, c].astype(np.float64)
    if win_names:
        out["wkey"] = wr * ncols + wc
        size = 2 * half + 2
        for name, arr in zip(win_names, arrays[len(names) :]):
            out[name] = _own_pages((len(wr), size, size), np.float32)
            cut_windows_nan_into(np.asarray(arr), wr - row0, wc - col0, half, out[name])
    return out


def hash_bound(p: float) -> int:
    """Hash bound (exclusive) below which a uniform 64-bit hash falls with probability ``p``
    (``2**64``, every hash, for ``p >= 1``)."""
    return 2**64 if p >= 1.0 else int(p * 2**64)


def below(h: np.ndarray, limit: int) -> np.ndarray:
    """Boolean mask of the hashes ``h`` below ``limit`` (:func:`hash_bound`)."""
    return h < np.uint64(limit) if limit < 2**64 else np.ones(h.shape, dtype=bool)


def select_finite_below(
    a: np.ndarray, b: np.ndarray, mask: np.ndarray, *, limit: int, ncols: int, random_state: int | None, row0: int,
    col0: int,
) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The pixels of a block finite in ``a`` and ``b``, True in ``mask`` and whose hash (global
    offset ``row0, col0`` on a grid of ``ncols`` columns) is below ``limit``: their local rows
    and columns (row-major), the number of pixels finite in both and the number of those in
    ``mask``. One compiled pass (:func:`xdem.kernels.draw.select_finite_block`): the same pixels
    as ``isfinite(a) & isfinite(b) & mask & below(hash, limit)``, without those arrays.

    Examples
    --------
    >>> a = np.array([[1.0, np.nan], [3.0, 4.0]])
    >>> r, c, n_finite, n_mask = select_finite_below(a, a, a > 3, limit=2**64, ncols=2, random_state=0, row0=0, col0=0)
    >>> r.tolist(), c.tolist(), n_finite, n_mask
    ([1], [1], 3, 1)
    """
    a, b = np.asarray(a), np.asarray(b)
    every = limit >= 2**64
    cap = int(min(1.0, limit / 2**64) * a.size * 1.05) + 1024
    return select_finite_block(a, b, np.asarray(mask, dtype=bool), row0, col0, ncols, _seed_key(random_state),
                               np.uint64(0 if every else limit), every, cap)


def _bound(frac: float, n: int) -> int:
    """:func:`hash_bound` of ``frac`` plus a binomial margin of :data:`_SIGMAS` standard
    deviations over ``n`` pixels."""
    if frac >= 1.0 or n <= 0:
        return 2**64
    return hash_bound(frac + _SIGMAS * math.sqrt(frac * (1.0 - frac) / n) + 1.0 / n)


@dataclass(frozen=True)
class BlockWork:
    """Something to compute from every block in the draw's pass (``sample_valid(also=)``).

    ``func(*blocks_of_arrays, row0=, col0=)`` runs in the task that draws from the block, on the
    blocks of ``arrays`` (dask arrays on the grid of ``valid``; rechunked to its chunks), with
    the block's global offsets, and returns a small result.

    Examples
    --------
    >>> import dask.array as da, numpy as np
    >>> z = da.ones((6, 6), chunks=3)
    >>> count = BlockWork(lambda b, row0, col0: int(b.sum()), [z])
    >>> s = sample_valid(z > 0, {"z": z}, subsample=4, random_state=0, also={"n": count})
    >>> s.also["n"]
    [9, 9, 9, 9]
    """

    func: Callable[..., Any]
    arrays: Sequence[da.Array] = ()


_ALSO = "__also__"


@dataclass(frozen=True)
class _Work:
    """The :class:`BlockWork` of one pass: names, functions and how many arrays each takes."""

    names: tuple[str, ...] = ()
    funcs: tuple[tuple[Callable[..., Any], int], ...] = ()
    arrays: tuple[da.Array, ...] = ()

    @classmethod
    def of(cls, also: Mapping[str, BlockWork], chunks: tuple) -> _Work:
        arrays = tuple(da.asarray(a).rechunk(chunks) for w in also.values() for a in w.arrays)
        return cls(tuple(also), tuple((w.func, len(w.arrays)) for w in also.values()), arrays)


def _block_with_work(
    *blocks: np.ndarray, n_draw: int, work: tuple[tuple[Callable[..., Any], int], ...], row0: int, col0: int,
    **kwargs: Any,
) -> dict[str, Any]:
    """:func:`_candidates_block` on the first ``n_draw`` blocks, then each work's function on its own."""
    out: dict[str, Any] = _candidates_block(*blocks[:n_draw], row0=row0, col0=col0, **kwargs)
    if work:
        rest, k, done = blocks[n_draw:], 0, []
        for func, n in work:
            done.append(func(*rest[k : k + n], row0=row0, col0=col0))
            k += n
        out[_ALSO] = done
    return out


def _draw(
    valid: da.Array, arrays: Mapping[str, da.Array], win_arrays: list[da.Array], names: tuple[str, ...],
    win_names: tuple[str, ...], half: int, limit: int, random_state: int | None, extra: Mapping[str, da.Array],
    work: _Work, keep: int,
) -> tuple[list[dict], dict]:
    """One pass: every block's valid count and candidates below ``limit`` (and ``extra`` sums,
    and ``work`` on every block, in the same task), row of blocks after row of blocks reduced to
    what can be among the ``keep`` smallest hashes (:func:`_trim`)."""
    tasks = _draw_tasks(valid, arrays, win_arrays, names, win_names, half, limit, random_state, work)
    per_row = valid.numblocks[1]
    held: Any = []
    for i in range(0, len(tasks), per_row):  # after the last row everything is held: the final cut does the rest
        held = dask.delayed(_trim)(held, tasks[i : i + per_row], keep=keep if i + per_row < len(tasks) else 0,
                                   key=_seed_key(random_state), names=names, win_names=win_names)
    extra_out, parts = dask.compute(dict(extra), held)
    release_free_heap()  # before the sample is joined and fitted: the pass's freed buffers go back
    return list(parts), extra_out


def _trim(held: list[dict], row: list[dict], *, keep: int, key: np.uint64, names: tuple[str, ...],
          win_names: tuple[str, ...]) -> list[dict]:
    """The blocks drawn so far (``held``, then a new ``row``), less what cannot be among the
    ``keep`` smallest hashes of the valid pixels: the candidates, and the window pieces whose
    centre has a hash, above the ``keep``-th smallest candidate hash so far (the final sample's
    are at most that: exact, whatever the chunking). Held candidates then stay about ``keep``
    (not ``1 + OVERSAMPLE`` times it) whatever the number of blocks; ``keep=0`` drops nothing.
    The blocks' results are cut in place, one after the other (each block's result has this task
    as its only user): a copy of them all never coexists with them."""
    release_free_heap()  # what the row's blocks freed (xdem.io._heap): not kept resident row after row
    parts = [*held, *row]
    if not keep or sum(len(p["h"]) for p in parts) <= keep:
        return parts
    top = np.partition(np.concatenate([p["h"] for p in parts]), keep - 1)[keep - 1]
    for p in parts:
        _cut_above(p, top, key, names, win_names)
    return parts


def _cut_above(part: dict, top: np.uint64, key: np.uint64, names: tuple[str, ...], win_names: tuple[str, ...]) -> None:
    """Remove from a block's result (in place) the candidates and window pieces whose hash is above ``top``."""
    kept = part["h"] <= top
    if not kept.all():
        for name in ("h", "row", "col", *names):
            part[name] = part[name][kept]
    if win_names and len(part["wkey"]):
        hashes = np.empty(len(part["wkey"]), dtype=np.uint64)
        hash_keys(part["wkey"], key, hashes)
        kept = hashes <= top
        if not kept.all():
            part["wkey"] = part["wkey"][kept]
            for name in win_names:
                cut = _own_pages((int(kept.sum()), *part[name].shape[1:]), np.float32)
                part[name] = np.compress(kept, part[name], axis=0, out=cut)


def _draw_tasks(
    valid: da.Array, arrays: Mapping[str, da.Array], win_arrays: list[da.Array], names: tuple[str, ...],
    win_names: tuple[str, ...], half: int, limit: int, random_state: int | None, work: _Work | None = None,
) -> list:
    """The per-block tasks of one pass of the draw (lazy)."""
    ny, nx = valid.shape
    work = work or _Work()
    draw = [valid, *(arrays[k] for k in names), *win_arrays]
    return block_tasks(
        _block_with_work, [*draw, *work.arrays], n_draw=len(draw), work=work.funcs, names=names,
        win_names=win_names, half=half, limit=limit, nrows=ny, ncols=nx, random_state=random_state,
    )


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
    also: Mapping[str, BlockWork] | None = None,
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
        ``(row - half, col - half)`` around every drawn pixel is cut in the same pass (no
        extra pass); NaN outside the grid. Returned as ``(n, 2h+2, 2h+2)`` float32 arrays.
    half
        Half-size of those windows.
    also
        Name -> :class:`BlockWork`: more results computed from every block in the first pass,
        in the task that draws from that block (its inputs are read once for all, and nothing
        waits in memory for another task). Their per-block results, row-major, are in
        ``Sample.also``.

    Returns
    -------
    Sample
        Read like a dict of 1-D arrays: ``row``, ``col`` and one entry per name of ``arrays`` (and of
        ``windows``); ``passes`` is the number of passes made (1, or 2 when fewer than
        about 80 % of the pixels are valid and ``subsample`` is a count).

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
    npix = ny * nx
    arrays = {k: da.asarray(v).rechunk(valid.chunks) for k, v in arrays.items()}
    names = tuple(arrays)
    win_names = tuple(windows or {})
    if set(win_names) & set(names):
        raise InputError(f"a name is both sampled and windowed: {sorted(set(win_names) & set(names))}")
    win_arrays = [da.asarray(windows[k]).rechunk(valid.chunks) for k in win_names]  # type: ignore[index]
    extra = {k: da.asarray(v).rechunk(valid.chunks).sum() for k, v in (extra_counts or {}).items()}
    work = _Work.of(also or {}, valid.chunks)
    resolve_count(subsample, 1)  # validate early
    # pass 1: a bound expected to give enough valid candidates if most pixels are valid
    frac = float(subsample) if subsample <= 1 else min(1.0, float(subsample) * (1.0 + OVERSAMPLE) / max(npix, 1))
    # at most this many are drawn (a count, or the fraction of every pixel): more candidates are never needed
    most = max(1, int(subsample) if subsample > 1 else round(float(subsample) * npix))
    parts, extra = _draw(valid, arrays, win_arrays, names, win_names, half, _bound(frac, npix), random_state, extra,
                         work, most)
    done = [p.pop(_ALSO, ()) for p in parts]
    also_done = {name: [d[i] for d in done] for i, name in enumerate(work.names)}
    del done
    n_valid = int(sum(int(p["n_valid"]) for p in parts))
    if n_valid < min_count:
        raise NotEnoughDataError(
            f"{what} needs at least {min_count} valid pixels but found {n_valid} of {npix} "
            "(valid = finite in both DEMs, inside the inlier mask, and method-specific criteria); "
            "check the overlap, the nodata value and the inlier mask"
        )
    n = resolve_count(subsample, n_valid)
    passes = 1
    while sum(len(p["h"]) for p in parts) < n:
        # too few valid pixels for that bound: one more pass, with a bound from the exact count
        frac = min(1.0, n / n_valid) if passes == 1 else min(1.0, 2 * frac)
        parts = []  # freed before the next pass, not held through it
        parts, _ = _draw(valid, arrays, win_arrays, names, win_names, half, _bound(frac, n_valid), random_state, {},
                         _Work(), max(n, 1))
        passes += 1
    keys = ("h", "row", "col") + names
    merged = {k: np.concatenate([p.pop(k) for p in parts]) for k in keys}
    # the n smallest hashes (a unique set: the hash is a bijection), ordered by global index
    order = np.argpartition(merged["h"], n - 1)[:n] if 0 < n < len(merged["h"]) else np.arange(n)
    index = merged["row"][order] * nx + merged["col"][order]
    order = order[np.argsort(index)]
    values = {k: merged[k][order] for k in keys[1:]}
    if win_names:
        wanted = values["row"] * nx + values["col"]  # sorted: rows then columns
        size = 2 * half + 2
        for k in win_names:  # each block's pieces freed once joined
            values[k] = _join_stream(((p["wkey"], p.pop(k)) for p in parts), wanted, (size, size),
                                     np.dtype(np.float32))
    del parts, merged
    # once a draw: what its pass left free in the heap goes back before the fit works on the sample
    # (40000^2 nuthkaab+deramp: 197 MiB free at the fit's peak without it; issue 28)
    release_free_heap(grown=0)
    return Sample(values=values, n_valid=n_valid, counts={k: int(v) for k, v in extra.items()}, passes=passes,
                  also=also_done)
