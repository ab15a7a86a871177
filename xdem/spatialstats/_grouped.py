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

from collections.abc import Sequence

import dask
import dask.array as da
import numpy as np

from xdem import stats as _stats

__all__ = ["group_moments", "group_order_statistics", "quantile_ranks", "combine_ranks", "MOMENTS"]

#: Columns of the per-group moments array.
MOMENTS = ("count", "mean", "m2", "sumsq", "min", "max")


# --------------------------------------------------------------------------- moments
def _moments_kernel(v: np.ndarray, gid: np.ndarray, *, n_groups: int) -> np.ndarray:
    """Per-group ``MOMENTS`` of one block, shape ``(1, 1, n_groups, 6)``."""
    v = np.asarray(v, dtype=np.float64).ravel()
    g = np.asarray(gid).ravel()
    keep = g >= 0
    v, g = v[keep], g[keep]
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
    return out[None, None]


def _merge_moments(x: np.ndarray, axis=None, keepdims: bool = False) -> np.ndarray:
    """Merge moments along the two leading block axes (Chan et al. pairwise update)."""
    m = x.reshape((-1,) + x.shape[-2:])
    n = m[..., 0].sum(axis=0)
    wsum = (m[..., 0] * m[..., 1]).sum(axis=0)
    mean = np.divide(wsum, n, out=np.zeros_like(n), where=n > 0)
    m2 = m[..., 2].sum(axis=0) + (m[..., 0] * (m[..., 1] - mean) ** 2).sum(axis=0)
    out = np.stack([n, mean, m2, m[..., 3].sum(axis=0), m[..., 4].min(axis=0), m[..., 5].max(axis=0)], axis=-1)
    return out[None, None] if keepdims else out


def _chunk_identity(x: np.ndarray, axis=None, keepdims: bool = False) -> np.ndarray:
    return x


def moments_graph(v: da.Array, gid: da.Array, n_groups: int) -> da.Array:
    """Lazy ``(n_groups, 6)`` array of the ``MOMENTS`` of each group (one pass)."""
    nby, nbx = v.numblocks
    per = da.map_blocks(
        _moments_kernel, v, gid, n_groups=n_groups, new_axis=[2, 3],
        chunks=((1,) * nby, (1,) * nbx, (n_groups,), (6,)), dtype=np.float64,
        meta=np.empty((0, 0, 0, 0), np.float64),
    )
    return da.reduction(
        per, chunk=_chunk_identity, combine=_merge_moments, aggregate=_merge_moments, axis=(0, 1),
        keepdims=False, dtype=np.float64, concatenate=True, meta=np.empty((0, 0), np.float64),
    )


def group_moments(v: da.Array, gid: da.Array, n_groups: int) -> np.ndarray:
    """``(n_groups, 6)`` numpy array of the ``MOMENTS`` of each group (computes, one pass)."""
    return np.asarray(moments_graph(v, gid, n_groups).compute())


# ----------------------------------------------------------------- order statistics
# An open interval: (group, lo, hi, closed) -- values v of the group with lo <= v < hi
# (or <= hi when closed).
_Interval = tuple[int, float, float, bool]


def _split_by_group(v: np.ndarray, gid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Valid values of a block sorted by group id, and the sorted ids."""
    v = np.asarray(v, dtype=np.float64).ravel()
    g = np.asarray(gid).ravel()
    keep = g >= 0
    v, g = v[keep], g[keep]
    order = np.argsort(g, kind="stable")
    return v[order], g[order]


def _in_interval(seg: np.ndarray, lo: float, hi: float, closed: bool) -> np.ndarray:
    upper = (seg <= hi) if closed else (seg < hi)
    return seg[(seg >= lo) & upper]


def _hist_kernel(
    v: np.ndarray, gid: np.ndarray, *, intervals: tuple[_Interval, ...], edges: np.ndarray
) -> np.ndarray:
    """Per interval: counts in each of ``nbins`` bins, then min and max; ``(1, 1, m, nbins + 2)``."""
    vs, gs = _split_by_group(v, gid)
    nb = edges.shape[1] - 1
    out = np.zeros((len(intervals), nb + 2))
    out[:, nb], out[:, nb + 1] = np.inf, -np.inf
    for i, (g, lo, hi, closed) in enumerate(intervals):
        a, b = np.searchsorted(gs, [g, g + 1])
        sel = _in_interval(vs[a:b], lo, hi, closed)
        if sel.size:
            idx = np.clip(np.searchsorted(edges[i], sel, side="right") - 1, 0, nb - 1)
            out[i, :nb] = np.bincount(idx, minlength=nb)
            out[i, nb], out[i, nb + 1] = sel.min(), sel.max()
    return out[None, None]


def _gather_kernel(v: np.ndarray, gid: np.ndarray, intervals: tuple[_Interval, ...]) -> list[np.ndarray]:
    """Values of one block inside each interval (a list, one array per interval)."""
    vs, gs = _split_by_group(v, gid)
    parts = []
    for g, lo, hi, closed in intervals:
        a, b = np.searchsorted(gs, [g, g + 1])
        parts.append(_in_interval(vs[a:b], lo, hi, closed))
    return parts


def _n_bins(n_intervals: int) -> int:
    """Histogram bins per interval: keep ``n_intervals * nbins`` near 2**18 counters."""
    return int(np.clip(2**18 // max(n_intervals, 1), 256, 4096))


def group_order_statistics(
    v: da.Array,
    gid: da.Array,
    queries: Sequence[tuple[int, int]],
    *,
    counts: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    max_gather: int | None = None,
) -> np.ndarray:
    """Exact values of 0-based ranks within groups, out of core.

    Parameters
    ----------
    v, gid
        Dask arrays of values and group ids (``-1``: ignored), same shape and chunks.
    queries
        ``(group, rank)`` pairs, ``0 <= rank < counts[group]``.
    counts, lo, hi
        Per group: number of values, and bounds with ``lo <= every value <= hi``.
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
        for key, (n, _) in sorted(open_.items(), key=lambda kv: kv[1][0]):
            if key[1] == key[2]:  # a single possible value
                for q, _k in open_[key][1]:
                    result[q] = key[1]
            elif used + n <= budget:
                gather.append(key)
                used += n
            else:
                refine.append(key)
        graphs: list = []
        if refine:
            nb = _n_bins(len(refine))
            edges = np.stack([np.linspace(key[1], key[2], nb + 1) for key in refine])
            nby, nbx = v.numblocks
            per = da.map_blocks(
                _hist_kernel, v, gid, intervals=tuple(refine), edges=edges, new_axis=[2, 3],
                chunks=((1,) * nby, (1,) * nbx, (len(refine),), (nb + 2,)), dtype=np.float64,
                meta=np.empty((0, 0, 0, 0), np.float64),
            )
            graphs += [per[..., :nb].sum(axis=(0, 1)), per[..., nb].min(axis=(0, 1)), per[..., nb + 1].max(axis=(0, 1))]
        if gather:
            vb, gb = v.to_delayed().ravel(), gid.to_delayed().ravel()
            graphs += [dask.delayed(_gather_kernel)(a, b, tuple(gather)) for a, b in zip(vb, gb)]
        computed = dask.compute(*graphs) if graphs else ()
        new_open: dict[_Interval, tuple[int, list[tuple[int, int]]]] = {}
        if refine:
            hist, mins, maxs = computed[:3]
            computed = computed[3:]
            for i, key in enumerate(refine):
                g, _lo, _hi, closed = key
                if mins[i] == maxs[i]:  # every value of the interval is equal
                    for q, _k in open_[key][1]:
                        result[q] = mins[i]
                    continue
                cum = np.cumsum(hist[i])
                for q, k in open_[key][1]:
                    j = int(np.searchsorted(cum, k, side="right"))
                    before = int(cum[j - 1]) if j > 0 else 0
                    last = j == nb - 1
                    sub = (g, float(edges[i, j]), float(edges[i, j + 1]), closed and last)
                    new_open.setdefault(sub, (int(hist[i, j]), []))[1].append((q, k - before))
        if gather:
            for i, key in enumerate(gather):
                vals = np.concatenate([part[i] for part in computed])
                ranks = sorted({k for _q, k in open_[key][1]})
                part = np.partition(vals, ranks)
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
