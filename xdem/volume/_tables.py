"""Small keyed tables of large rasters, out of core: the grouped passes of gap filling.

Every pass maps a numpy kernel over the blocks of a few aligned 2-D dask arrays; the kernel
returns a **sparse** keyed table (the keys present in its block and one row of numbers per
key); the tables are merged by key in a tree of at most :data:`SPLIT_EVERY` at a time. Memory
is one block plus tables whose size is the number of keys (glaciers, or glacier x elevation
bin), never the number of pixels.

:func:`group_medians` gives exact per-group counts, min, max, sums and medians (numpy's median:
the mean of the two middle values) by histogram refinement: each open rank sits in a closed
value interval ``[lo, hi]`` holding exactly the group's values in it; a pass histograms it in
up to :data:`N_BINS` bins (fewer when many ranks are open: :data:`MAX_COUNTERS` in all), with the
bins' own min and max, so the next interval is again exact; once few values remain, it gathers
them. Medians are order statistics, so they do not depend on the chunking; the sums do, by float
rounding only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import dask
import dask.array as da
import numpy as np

__all__ = ["keyed_reduce", "tree_table", "group_medians", "GroupStats", "SPLIT_EVERY", "N_BINS", "MAX_GATHER",
           "MAX_COUNTERS"]

SPLIT_EVERY = 16
#: Bins of a refinement pass (per open rank), at most.
N_BINS = 64
#: Histogram counters of a refinement pass, all open ranks together, at most (fewer bins per rank
#: when many ranks are open, so the merged table stays small whatever the number of groups).
MAX_COUNTERS = 2**20
#: Values gathered in memory at most in one pass (all groups together).
MAX_GATHER = 2**21
_GATHER_EACH = 4 * N_BINS
_UFUNC = {"sum": np.add, "min": np.minimum, "max": np.maximum}

Table = tuple[np.ndarray, np.ndarray]  # (keys int64 (k,), columns float64 (k, m))


def keyed_reduce(keys: np.ndarray, cols: np.ndarray, ops: Sequence[str]) -> Table:
    """Rows with equal keys merged (``ops``: one of ``sum``, ``min``, ``max`` per column); sorted keys.

    Examples
    --------
    >>> k, c = keyed_reduce(np.array([3, 1, 3]), np.array([[1.0, 5.0], [2.0, 2.0], [4.0, 1.0]]), ("sum", "min"))
    >>> k.tolist(), c.tolist()
    ([1, 3], [[2.0, 2.0], [5.0, 1.0]])
    """
    keys = np.asarray(keys, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.float64).reshape(keys.size, len(ops))
    if keys.size == 0:
        return keys, cols
    order = np.argsort(keys, kind="stable")
    k, c = keys[order], cols[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    out = np.empty((starts.size, len(ops)))
    for j, op in enumerate(ops):
        out[:, j] = _UFUNC[op].reduceat(c[:, j], starts)
    return k[starts], out


def _merge_tables(parts: list[Any], ops: tuple[str, ...]) -> Table:
    keys = np.concatenate([p[0] for p in parts])
    cols = np.concatenate([p[1].reshape(-1, len(ops)) for p in parts])
    return keyed_reduce(keys, cols, ops)


def _wrap(*blocks: np.ndarray, kernel: Callable[..., Any]) -> np.ndarray:
    out = np.empty((1, 1), dtype=object)
    out[0, 0] = kernel(*blocks)
    return out


def _unwrap(x: Any) -> Any:
    return x[0, 0] if isinstance(x, np.ndarray) and x.dtype == object else x


def tree_table(kernel: Callable[..., Any], arrays: Sequence[da.Array], merge: Callable[[list[Any]], Any]) -> Any:
    """``merge`` of ``kernel(*blocks)`` over every block of ``arrays`` (same chunks), computed.

    One task per block, merged :data:`SPLIT_EVERY` at a time, so few block results are held
    at once; the result is whatever ``merge`` returns.
    """
    nby, nbx = arrays[0].numblocks
    per = da.map_blocks(_wrap, *arrays, kernel=kernel, chunks=((1,) * nby, (1,) * nbx), dtype=object,
                        meta=np.empty((0, 0), dtype=object))
    parts = list(per.to_delayed().ravel())

    def combine(*xs: Any) -> Any:
        return merge([_unwrap(x) for x in xs])

    while len(parts) > 1:
        parts = [dask.delayed(combine, pure=True)(*parts[i:i + SPLIT_EVERY])
                 for i in range(0, len(parts), SPLIT_EVERY)]
    return _unwrap(dask.compute(parts[0])[0])


# ------------------------------------------------------------------- grouped medians
GroupFn = Callable[..., tuple[np.ndarray, np.ndarray]]  # blocks -> (group id per counted value, values)


@dataclass(frozen=True)
class GroupStats:
    """Per group ``0..n-1``: ``count`` of values, ``min``, ``max``, ``sum``, ``sumsq`` and ``median`` (NaN if empty)."""

    count: np.ndarray
    min: np.ndarray
    max: np.ndarray
    sum: np.ndarray
    sumsq: np.ndarray
    median: np.ndarray

    @property
    def std(self) -> np.ndarray:
        """Population standard deviation (numpy's ``nanstd``), from the sums."""
        n = np.maximum(self.count, 1)
        mean = self.sum / n
        return np.where(self.count > 0, np.sqrt(np.maximum(self.sumsq / n - mean * mean, 0.0)), np.nan)


def _moments_kernel(*blocks: np.ndarray, groups: GroupFn) -> Table:
    g, v = groups(*blocks)
    cols = np.column_stack([np.ones(v.size), v, v, v, v * v])
    return keyed_reduce(g, cols, ("sum", "min", "max", "sum", "sum"))


@dataclass(frozen=True)
class _Queries:
    """Open ranks: ``slot[g, s]`` the query of group ``g``'s s-th rank (-1: none); per query its
    state (0 done, 1 refine, 2 gather) and closed interval ``[lo, hi]``."""

    slot: np.ndarray
    state: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    nbins: int = 64


def _query_of_values(g: np.ndarray, v: np.ndarray, q: _Queries, want: int) -> tuple[np.ndarray, np.ndarray]:
    """(query, value) pairs of the values inside an open interval of state ``want``."""
    qs, vs = [], []
    for s in range(q.slot.shape[1]):
        qi = q.slot[g, s]
        ok = qi >= 0
        qi, vv = qi[ok], v[ok]
        ok = (q.state[qi] == want) & (vv >= q.lo[qi]) & (vv <= q.hi[qi])
        qs.append(qi[ok])
        vs.append(vv[ok])
    return np.concatenate(qs).astype(np.int64), np.concatenate(vs)


def _pass_kernel(*blocks: np.ndarray, groups: GroupFn, q: _Queries) -> tuple[Table, Table]:
    g, v = groups(*blocks)
    qi, vv = _query_of_values(g, v, q, 1)
    width = q.hi[qi] - q.lo[qi]
    b = np.minimum(np.floor((vv - q.lo[qi]) / width * q.nbins), q.nbins - 1).astype(np.int64)
    hist = keyed_reduce(qi * q.nbins + b, np.column_stack([np.ones(vv.size), vv, vv]), ("sum", "min", "max"))
    gq, gv = _query_of_values(g, v, q, 2)
    return hist, (gq, gv.reshape(-1, 1))


def _merge_pass(parts: list[tuple[Table, Table]]) -> tuple[Table, Table]:
    hist = _merge_tables([p[0] for p in parts], ("sum", "min", "max"))
    gathered = (np.concatenate([p[1][0] for p in parts]), np.concatenate([p[1][1] for p in parts]))
    return hist, gathered


def _initial_queries(count: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[_Queries, np.ndarray, np.ndarray]:
    """The queries of the two middle ranks of every non-empty group (one when they coincide)."""
    n_groups = count.size
    slot = np.full((n_groups, 2), -1, dtype=np.int64)
    groups = np.flatnonzero(count > 0)
    k0, k1 = (count[groups] - 1) // 2, count[groups] // 2
    two = k1 != k0
    q0 = np.arange(groups.size)
    q1 = groups.size + np.cumsum(two) - 1
    slot[groups, 0] = q0
    slot[groups[two], 1] = q1[two]
    qgroup = np.r_[groups, groups[two]]
    rank = np.r_[k0, k1[two]].astype(np.int64)
    q = _Queries(slot=slot, state=np.ones(qgroup.size, dtype=np.int8), lo=lo[qgroup].astype(np.float64),
                 hi=hi[qgroup].astype(np.float64))
    return q, rank, count[qgroup].astype(np.int64)


def _plan(q: _Queries, size: np.ndarray, value: np.ndarray) -> None:
    """Close intervals of one value; mark the smallest ones for gathering within the budget."""
    single = (q.state > 0) & (q.lo == q.hi)
    value[single] = q.lo[single]
    q.state[single] = 0
    open_ = np.flatnonzero(q.state > 0)
    order = open_[np.argsort(size[open_], kind="stable")]
    cum = np.cumsum(size[order])
    gather = order[(size[order] <= _GATHER_EACH) & (cum <= MAX_GATHER)]
    q.state[open_] = 1
    q.state[gather] = 2


def _resolve(q: _Queries, rank: np.ndarray, size: np.ndarray, value: np.ndarray, hist: Table, gathered: Table) -> None:
    """Update the queries with one pass's histograms (narrower intervals) and gathered values (done)."""
    keys, cols = hist
    if keys.size:
        qk = keys // q.nbins
        cum = np.cumsum(cols[:, 0])
        first = np.flatnonzero(np.r_[True, qk[1:] != qk[:-1]])
        before = np.repeat(cum[first] - cols[first, 0], np.diff(np.r_[first, keys.size]))
        incl, excl = cum - before, cum - before - cols[:, 0]
        r = rank[qk]
        hit = (excl <= r) & (r < incl)
        qh = qk[hit]
        rank[qh] = r[hit] - excl[hit].astype(np.int64)
        size[qh] = cols[hit, 0].astype(np.int64)
        q.lo[qh], q.hi[qh] = cols[hit, 1], cols[hit, 2]
    gq, gv = gathered
    done = np.flatnonzero(q.state == 2)
    if done.size:
        order = np.lexsort((gv[:, 0], gq))
        gq, gv = gq[order], gv[order, 0]
        starts = np.searchsorted(gq, done)
        value[done] = gv[starts + rank[done]]
        q.state[done] = 0


def group_medians(groups: GroupFn, arrays: Sequence[da.Array], n_groups: int) -> GroupStats:
    """Exact per-group statistics of the values ``groups(*blocks)`` gives on each block.

    Parameters
    ----------
    groups
        Numpy function of one block of each of ``arrays``: the group id (``0..n_groups-1``) and
        the value of every counted pixel (1-D arrays; pixels not counted are left out).
    arrays
        2-D dask arrays with the same chunks.
    n_groups
        Number of groups.

    Examples
    --------
    >>> a = da.from_array(np.array([[1.0, 5.0, 2.0, 9.0], [4.0, 3.0, np.nan, 7.0]]), chunks=2)
    >>> def by_column_pair(b):
    ...     ok = np.isfinite(b)
    ...     return np.zeros(b.shape, dtype=np.int64)[ok], b[ok]
    >>> s = group_medians(by_column_pair, [a], 1)
    >>> int(s.count[0]), float(s.median[0]) == float(np.nanmedian(a.compute()))
    (7, True)
    """
    ops = ("sum", "min", "max", "sum", "sum")
    keys, cols = tree_table(partial(_moments_kernel, groups=groups), arrays, partial(_merge_tables, ops=ops))
    table = np.zeros((n_groups, 5))
    table[:, 1], table[:, 2] = np.nan, np.nan
    table[keys] = cols
    count = table[:, 0].astype(np.int64)
    median = np.full(n_groups, np.nan)
    q, rank, size = _initial_queries(count, table[:, 1], table[:, 2])
    value = np.full(q.state.size, np.nan)
    _plan(q, size, value)
    while (q.state > 0).any():
        # bins per open rank: at most MAX_COUNTERS histogram counters in all (the merged table's size)
        q = replace(q, nbins=int(np.clip(MAX_COUNTERS // max(int((q.state == 1).sum()), 1), 4, N_BINS)))
        hist, gathered = tree_table(partial(_pass_kernel, groups=groups, q=q), arrays, _merge_pass)
        _resolve(q, rank, size, value, hist, gathered)
        _plan(q, size, value)
    has = np.flatnonzero(count > 0)
    median[has] = value[q.slot[has, 0]]
    two = has[q.slot[has, 1] >= 0]
    median[two] = (value[q.slot[two, 0]] + value[q.slot[two, 1]]) / 2
    return GroupStats(count=count, min=table[:, 1], max=table[:, 2], sum=table[:, 3], sumsq=table[:, 4],
                      median=median)
