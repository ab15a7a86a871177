"""Exact grouped statistics of arrays larger than memory (the engine of binned statistics).

Every pixel carries a value ``v`` and a group id ``gid`` (``-1``: not counted). Two kinds of
statistics are computed per group, out of core and exactly:

* **moments** in one pass: count, mean, sum of squared deviations (M2), sum of squares,
  min, max. Each block gives its own moments; blocks are merged in a dask tree reduction
  with the pairwise update of Chan et al. (1979) (the M2 of a union is the sum of the M2s
  plus ``n_i (mean_i - mean)^2``), which is stable even when ``|mean| >> std``;
* **order statistics** (values of given ranks, hence medians and percentiles): the
  approach of :mod:`xdem.stats` (histogram refinement until few enough values remain to
  be gathered and partitioned in memory) generalised to many groups and ranks at once.
  A rank is tracked inside a value interval ``[lo, hi)`` (or ``[lo, hi]``); one pass
  histograms every open interval over ``linspace(lo, hi, nbins + 1)`` (edges are exact
  floats, so a bin is again an interval of values) and records the min and max inside it;
  the bin holding the rank becomes the new interval. Intervals holding few values are
  gathered in the same pass. Intervals whose values are all equal end at once.

Results equal numpy on the float64 values, for any chunking (up to float rounding in
merged sums for the moments). Memory: one block, ``nbins + 2`` counters per open interval
and per block, and at most :data:`xdem.stats.MAX_GATHER` gathered values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, cast

import dask
import dask.array as da
import numpy as np

from xdem import stats as _stats
from xdem.kernels.robust import bin_index

__all__ = [
    "Grouping", "bin_index", "group_ids", "gid_array", "group_moments", "group_order_statistics",
    "quantile_ranks", "combine_ranks", "MOMENTS",
]

#: Columns of the per-group moments array.
MOMENTS = ("count", "mean", "m2", "sumsq", "min", "max")
_SPLIT_EVERY = 16


class Grouping(NamedTuple):
    """Values ``arrays[0]`` grouped by the bins (``edges``) of the variables ``arrays[1:]``.

    The group id of a pixel is its bin index in C order over the variables, or ``-1``
    when the value or a variable is not finite or outside the edges. All arrays are 2-D
    dask arrays with the same chunks.
    """

    arrays: tuple[da.Array, ...]
    edges: tuple[np.ndarray, ...]

    @property
    def n_groups(self) -> int:
        return int(np.prod([e.size - 1 for e in self.edges]))


def group_ids(blocks: Sequence[np.ndarray], edges: Sequence[np.ndarray]) -> np.ndarray:
    """Group id of every pixel of one block (``-1``: not counted), see :class:`Grouping`.

    Bins are left-closed ``[e_i, e_{i+1})`` except the last, which also holds its upper
    edge (as in :func:`numpy.histogram`).
    """
    ok = np.isfinite(blocks[0])
    gid = None
    for var, e in zip(blocks[1:], edges):
        x = np.asarray(var, dtype=np.float64)
        ok &= (x >= e[0]) & (x <= e[-1])  # False for NaN
        idx = bin_index(x, e)
        gid = idx if gid is None else gid * (e.size - 1) + idx
    return np.where(ok, 0 if gid is None else gid, -1)


def _gid_block(*blocks: np.ndarray, edges: tuple[np.ndarray, ...]) -> np.ndarray:
    return group_ids(blocks, edges)


def gid_array(grouping: Grouping) -> da.Array:
    """Lazy group ids of a grouping (an int64 dask array on the grid of the values)."""
    return da.map_blocks(
        _gid_block, *grouping.arrays, edges=grouping.edges, dtype=np.int64, meta=np.empty((0, 0), np.int64)
    )


def _values(
    blocks: Sequence[np.ndarray], edges: Sequence[np.ndarray], centers: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """Float64 values and group ids of the counted pixels of one block (1-D).

    With ``centers``, the values are the absolute deviations ``|v - centers[group]|``.
    """
    gid = group_ids(blocks, edges).ravel()
    keep = gid >= 0
    g = gid[keep]
    v = np.asarray(blocks[0], dtype=np.float64).ravel()[keep]
    if centers is not None:
        v = np.abs(v - centers[g])
    return v, g


def _wrap_block(*blocks: np.ndarray, kernel: Callable, edges: tuple, centers: Any, kw: dict) -> np.ndarray:
    out = np.empty((1, 1), dtype=object)
    out[0, 0] = kernel(*_values(blocks, edges, centers), **kw)
    return out


def _unwrap(x: Any) -> Any:
    return x[0, 0] if isinstance(x, np.ndarray) and x.dtype == object else x


def _tree_reduce(grouping: Grouping, kernel: Callable, combine: Callable, *, centers=None, **kw) -> Any:
    """Lazy result of ``kernel(values, groups, **kw)`` on every block, merged by ``combine``.

    One task per block runs the kernel on the (fused) inputs, so each input block is
    computed once per pass; per-block results are merged in a tree, ``_SPLIT_EVERY`` at
    a time, so memory holds few of them at once.
    """
    nby, nbx = grouping.arrays[0].numblocks
    per = da.map_blocks(
        _wrap_block, *grouping.arrays, kernel=kernel, edges=grouping.edges, centers=centers, kw=kw,
        chunks=((1,) * nby, (1,) * nbx), dtype=object, meta=np.empty((0, 0), dtype=object),
    )
    parts = list(per.to_delayed().ravel())

    def merge(*xs: Any) -> Any:
        return combine([_unwrap(x) for x in xs])

    while len(parts) > 1:
        parts = [dask.delayed(merge, pure=True)(*parts[i:i + _SPLIT_EVERY]) for i in range(0, len(parts), _SPLIT_EVERY)]
    return parts[0]


# --------------------------------------------------------------------------- moments
def _moments_kernel(v: np.ndarray, g: np.ndarray, *, n_groups: int) -> np.ndarray:
    """Per-group ``MOMENTS`` of the values of one block, shape ``(n_groups, 6)``."""
    out = np.zeros((n_groups, 6))
    out[:, 4], out[:, 5] = np.inf, -np.inf
    if v.size:
        n = np.bincount(g, minlength=n_groups).astype(np.float64)
        s = np.bincount(g, weights=v, minlength=n_groups)
        mean = np.divide(s, n, out=np.zeros(n_groups), where=n > 0)
        out[:, 0], out[:, 1] = n, mean
        out[:, 2] = np.bincount(g, weights=(v - mean[g]) ** 2, minlength=n_groups)
        out[:, 3] = np.bincount(g, weights=v * v, minlength=n_groups)
        np.minimum.at(out[:, 4], g, v)
        np.maximum.at(out[:, 5], g, v)
    return out


def _merge_moments(parts: list[np.ndarray]) -> np.ndarray:
    """Merge per-block moments (pairwise update of Chan et al. 1979 for M2)."""
    m = np.stack(parts)
    n = m[..., 0].sum(axis=0)
    wsum = (m[..., 0] * m[..., 1]).sum(axis=0)
    mean = np.divide(wsum, n, out=np.zeros_like(n), where=n > 0)
    m2 = m[..., 2].sum(axis=0) + (m[..., 0] * (m[..., 1] - mean) ** 2).sum(axis=0)
    return np.stack([n, mean, m2, m[..., 3].sum(axis=0), m[..., 4].min(axis=0), m[..., 5].max(axis=0)], axis=-1)


def group_moments(grouping: Grouping) -> np.ndarray:
    """``(n_groups, 6)`` numpy array of the ``MOMENTS`` of each group (computes, one pass)."""
    g = grouping.n_groups
    res = _tree_reduce(grouping, _moments_kernel, _merge_moments, n_groups=g)
    return np.asarray(_unwrap(dask.compute(res)[0]))


# ----------------------------------------------------------------- order statistics
# An open interval: (group, lo, hi, closed) -- values v of the group with lo <= v < hi
# (or <= hi when closed).
_Interval = tuple[int, float, float, bool]


def _split_by_group(v: np.ndarray, g: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Values of groups ``0..n-1`` sorted by group, and the ``n + 1`` group starts."""
    keep = g < n
    v, g = v[keep], g[keep]
    if n <= 2**15:  # numpy sorts 16-bit integers by radix, in linear time
        g = g.astype(np.int16)
    starts = np.concatenate([[0], np.cumsum(np.bincount(g, minlength=n))])
    return v[np.argsort(g, kind="stable")], starts


def _in_interval(seg: np.ndarray, lo: float, hi: float, closed: bool) -> np.ndarray:
    upper = (seg <= hi) if closed else (seg < hi)
    return seg[(seg >= lo) & upper]


def _pass_kernel(
    v: np.ndarray, g: np.ndarray, *, refine: tuple[_Interval, ...], edges: np.ndarray | None,
    gather: tuple[_Interval, ...],
) -> tuple[np.ndarray | None, list[np.ndarray]]:
    """One block's share of a pass: per refined interval, counts in each bin then min and
    max (``(m, nbins + 2)``); per gathered interval, its values."""
    n = max(iv[0] for iv in refine + gather) + 1
    vs, starts = _split_by_group(v, g, n)
    hist = None
    if refine:
        if edges is None:
            raise ValueError("refined intervals need their bin edges")
        nb = edges.shape[1] - 1
        hist = np.zeros((len(refine), nb + 2))
        hist[:, nb], hist[:, nb + 1] = np.inf, -np.inf
        for i, (grp, lo, hi, closed) in enumerate(refine):
            sel = _in_interval(vs[starts[grp]:starts[grp + 1]], lo, hi, closed)
            if sel.size:
                hist[i, :nb] = np.bincount(bin_index(sel, edges[i]), minlength=nb)
                hist[i, nb], hist[i, nb + 1] = sel.min(), sel.max()
    parts = [_in_interval(vs[starts[grp]:starts[grp + 1]], lo, hi, closed) for grp, lo, hi, closed in gather]
    return hist, parts


_PassResult = tuple[np.ndarray | None, list[np.ndarray]]


def _merge_pass(results: list[_PassResult]) -> _PassResult:
    hists = [h for h, _p in results]
    hist = None
    if hists[0] is not None:
        # every block refines the same intervals: when the first has a histogram, all have one
        stack = np.stack(cast(list[np.ndarray], hists))
        hist = stack.sum(axis=0)
        hist[:, -2] = stack[:, :, -2].min(axis=0)
        hist[:, -1] = stack[:, :, -1].max(axis=0)
    parts = [np.concatenate(p) for p in zip(*[p for _h, p in results])]
    return hist, parts


def _n_bins(n_intervals: int) -> int:
    """Histogram bins per interval: keep ``n_intervals * nbins`` near 2**18 counters."""
    return int(np.clip(2**18 // max(n_intervals, 1), 256, 4096))


def group_order_statistics(
    grouping: Grouping,
    queries: Sequence[tuple[int, int]],
    *,
    counts: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    centers: np.ndarray | None = None,
    max_gather: int | None = None,
) -> np.ndarray:
    """Exact values of 0-based ranks within groups, out of core.

    Parameters
    ----------
    grouping
        The values and their groups.
    queries
        ``(group, rank)`` pairs, ``0 <= rank < counts[group]``.
    counts, lo, hi
        Per group: number of values, and bounds with ``lo <= every value <= hi``.
    centers
        If given, work on ``|value - centers[group]|`` instead of the values.
    max_gather
        Largest number of values gathered in memory at once (default
        :data:`xdem.stats.MAX_GATHER`).

    Returns
    -------
    numpy.ndarray
        The value of each query (float64), i.e. ``np.sort(values_of_group)[rank]``.
    """
    budget = _stats.MAX_GATHER if max_gather is None else int(max_gather)
    result = np.full(len(queries), np.nan)
    # Each open interval -> (count inside, list of (query index, rank inside)).
    open_: dict[_Interval, tuple[int, list[tuple[int, int]]]] = {}
    for q, (g, k) in enumerate(queries):
        key = (int(g), float(lo[g]), float(hi[g]), True)
        open_.setdefault(key, (int(counts[g]), []))[1].append((q, int(k)))
    while open_:
        gather: list[_Interval] = []
        refine: list[_Interval] = []
        used = 0
        for key, (n, queued) in sorted(open_.items(), key=lambda kv: kv[1][0]):
            if key[1] == key[2]:  # a single possible value
                for q, _k in queued:
                    result[q] = key[1]
            elif used + n <= budget:
                gather.append(key)
                used += n
            else:
                refine.append(key)
        if not (gather or refine):
            break
        nb = _n_bins(len(refine))
        edges = np.stack([np.linspace(key[1], key[2], nb + 1) for key in refine]) if refine else None
        res = _tree_reduce(
            grouping, _pass_kernel, _merge_pass, centers=centers, refine=tuple(refine), edges=edges,
            gather=tuple(gather),
        )
        hist, parts = _unwrap(dask.compute(res)[0])
        new_open: dict[_Interval, tuple[int, list[tuple[int, int]]]] = {}
        for i, key in enumerate(refine):
            if edges is None:  # set whenever refine is not empty
                raise AssertionError("refined intervals without bin edges")
            g, _lo, _hi, closed = key
            if hist[i, nb] == hist[i, nb + 1]:  # every value of the interval is equal
                for q, _k in open_[key][1]:
                    result[q] = hist[i, nb]
                continue
            cum = np.cumsum(hist[i, :nb])
            for q, k in open_[key][1]:
                j = int(np.searchsorted(cum, k, side="right"))
                before = int(cum[j - 1]) if j > 0 else 0
                sub = (g, float(edges[i, j]), float(edges[i, j + 1]), closed and j == nb - 1)
                new_open.setdefault(sub, (int(hist[i, j]), []))[1].append((q, k - before))
        for i, key in enumerate(gather):
            ranks = sorted({k for _q, k in open_[key][1]})
            part = np.partition(parts[i], ranks)
            for q, k in open_[key][1]:
                result[q] = part[k]
        open_ = new_open
    return result


# ------------------------------------------------------------------------- helpers
def quantile_ranks(n: int, q: float) -> tuple[int, int, float]:
    """Ranks and weight of numpy's default ("linear") quantile ``q`` of ``n`` values."""
    pos = q * (n - 1)
    k0 = int(np.floor(pos))
    k1 = min(k0 + 1, n - 1)
    return k0, k1, pos - k0


def combine_ranks(a: float, b: float, t: float) -> float:
    """Linear interpolation between order statistics, as numpy's quantile does it."""
    diff = b - a
    return float(b - diff * (1 - t)) if t >= 0.5 else float(a + diff * t)
