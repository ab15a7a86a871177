"""Exact robust statistics of arrays larger than memory: median, NMAD and a summary.

The median of a dask array is found exactly, chunk by chunk, without sorting it:

1. one pass counts the finite values and finds their minimum and maximum;
2. one pass builds per-chunk histograms (:data:`N_BINS` bins between min and max), summed
   over chunks, which tells in which bin(s) the middle rank(s) fall;
3. if those bins hold at most :data:`MAX_GATHER` values they are gathered and partitioned
   in memory; otherwise the same is repeated inside them (a min/max pass, then a finer
   histogram) until few enough remain, or all remaining values are equal.

Bin indices (:func:`xdem.kernels.robust.equal_width_bin_index`) are a monotonic function
of the value, so bins split the sorted values into contiguous runs and the result is exact: it
equals ``numpy.nanmedian`` of the values in float64, for any chunking. Three passes over the
data are typical for a median, five for :func:`robust_summary` (median and NMAD). Memory is
bounded by the chunk size plus ``N_BINS`` counters per chunk and at most ``MAX_GATHER`` values.

NMAD follows the field's definition: ``1.4826 * median(|x - median(x)|)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, overload

import dask
import dask.array as da
import numpy as np

from xdem.errors import InputError, NotEnoughDataError
from xdem.io.cog import BlockStats
from xdem.io.grid import block_tasks
from xdem.kernels.draw import diff_extremes
from xdem.kernels.robust import NMAD_FACTOR, equal_width_bin_index
from xdem.kernels.robust import nmad as _nmad_in_memory
from xdem.sampling import hash_bound, resolve_count, select_finite_below

if TYPE_CHECKING:  # annotations only
    import xarray as xr
    from dask.delayed import Delayed

__all__ = ["median", "nmad", "robust_summary", "nanmin", "nanmax", "sampled_dh_stats", "dh_stats_tasks", "dh_stats_finish",
           "dh_stats_while_writing", "dh_stats_blocks", "NMAD_FACTOR", "N_BINS", "MAX_GATHER", "STATS_SUBSAMPLE", "stats_method"]

#: Pixels drawn by default for the sampled statistics of dh (``xdem coreg``, the report).
STATS_SUBSAMPLE = 2_000_000


def _skip_nan(x: np.ndarray, axis: tuple[int, ...], keepdims: bool, *, ufunc: np.ufunc) -> np.ndarray:
    """``ufunc.reduce`` of a block for :func:`nanmin` / :func:`nanmax`: NaN where a slice has no value."""
    x = np.asarray(x)
    if x.size == 0:  # an empty chunk: NaN, which the next reduction skips
        kept = [1 if i in axis else n for i, n in enumerate(x.shape)]
        return np.full(kept if keepdims else [n for i, n in enumerate(x.shape) if i not in axis], np.nan, x.dtype)
    return ufunc.reduce(x, axis=axis, keepdims=keepdims)


def nanmin(x: da.Array, *, axis: int | tuple[int, ...] | None = None) -> da.Array:
    """Lazy minimum skipping NaN, NaN when there is no value: ``dask.array.nanmin`` without its
    tasks' ``warnings.catch_warnings`` blocks.

    Those blocks swap the process-wide filter list from dask's threads; interleaved, they can leave
    a filter installed after the compute (``tests/test_warning_filters.py``). ``numpy.fmin`` skips
    NaN as ``nanmin`` does, silently.

    Examples
    --------
    >>> import dask.array as da
    >>> x = da.from_array(np.array([[np.nan, 3.0], [np.nan, 2.0]]), chunks=1)
    >>> float(nanmin(x).compute()), float(nanmax(x).compute()), bool(np.isnan(nanmin(x[:, 0]).compute()))
    (2.0, 3.0, True)
    """
    if x.dtype.kind != "f":
        return x.min(axis=axis)
    reduce = partial(_skip_nan, ufunc=np.fmin)
    return da.reduction(x, reduce, reduce, axis=axis, dtype=x.dtype, name="xdem-nanmin")


def nanmax(x: da.Array, *, axis: int | tuple[int, ...] | None = None) -> da.Array:
    """Lazy maximum skipping NaN, NaN when there is no value (see :func:`nanmin`)."""
    if x.dtype.kind != "f":
        return x.max(axis=axis)
    reduce = partial(_skip_nan, ufunc=np.fmax)
    return da.reduction(x, reduce, reduce, axis=axis, dtype=x.dtype, name="xdem-nanmax")


def stats_method(subsample: int = STATS_SUBSAMPLE) -> str:
    """The ``method`` line of sampled statistics drawn on ``subsample`` pixels (JSON ``stats.method``).

    Examples
    --------
    >>> stats_method(1000).startswith("median, NMAD, mean, std, RMSE and LE90 on a reproducible subsample")
    True
    """
    return (f"median, NMAD, mean, std, RMSE and LE90 on a reproducible subsample of about {subsample} x (valid "
            "fraction) stable valid pixels (the same pixels before and after); exact counts, min and max")


#: Histogram bins per refinement pass.
N_BINS = 2**16
#: Largest number of values gathered in memory to finish a median exactly.
MAX_GATHER = 2**21

# A selection condition keeps values whose bin index, in a histogram of `nbins` bins over
# [lo, hi], lies in [b_first, b_last]: (lo, hi, nbins, b_first, b_last).
_Cond = tuple[float, float, int, int, int]


def _unmasked(block: Any) -> np.ndarray:
    """A numpy masked array's values with the masked ones NaN (other arrays as they are)."""
    if not isinstance(block, np.ma.MaskedArray):
        return block
    return np.ma.filled(block.astype(np.result_type(block.dtype, np.float32)), np.nan)


@overload
def masked_as_nan(data: da.Array) -> da.Array: ...
@overload
def masked_as_nan(data: np.ndarray) -> np.ndarray: ...
@overload
def masked_as_nan(data: object) -> object: ...
def masked_as_nan(data: object) -> object:
    """``data`` with the masked values of a numpy masked array, or of masked dask chunks, made
    NaN (a float copy, lazily for dask): every statistic then ignores them, as upstream xdem
    does. Anything else is returned as it is.

    Examples
    --------
    >>> masked_as_nan(np.ma.masked_array([1.0, 5.0], mask=[0, 1])).tolist()
    [1.0, nan]
    """
    if isinstance(data, da.Array):
        if not isinstance(getattr(data, "_meta", None), np.ma.MaskedArray):
            return data
        dtype = np.result_type(data.dtype, np.float32)
        return da.map_blocks(_unmasked, data, dtype=dtype, meta=np.empty((0,) * data.ndim, dtype=dtype))
    if isinstance(data, np.ma.MaskedArray) and data.dtype.kind in "fiub":
        return _unmasked(data)
    return data


def _as_dask(x: Any) -> da.Array:
    """Dask array of the values of ``x`` (numpy, dask, or xarray object); masked values of numpy
    masked arrays or masked dask chunks are NaN (:func:`masked_as_nan`)."""
    data = masked_as_nan(getattr(x, "data", x) if not isinstance(x, (np.ndarray, da.Array)) else x)
    if isinstance(data, da.Array):
        return data
    arr = np.asarray(data)
    if arr.dtype.kind not in "fiub":
        raise InputError(f"statistics need a numeric array, got dtype {arr.dtype}")
    return da.from_array(arr, chunks=arr.shape or ())


def _value_bounds(cond: _Cond) -> tuple[np.float64, np.float64]:
    """Loose value interval surely containing every value whose bin is in [b0, b1]."""
    lo, hi, nbins, b0, b1 = cond
    width = (hi / 2 - lo / 2) / nbins * 2
    margin = width + 16 * np.finfo(np.float64).eps * max(abs(lo), abs(hi))
    with np.errstate(over="ignore"):
        return np.float64(lo + b0 * width - margin), np.float64(lo + (b1 + 1) * width + margin)


def _selected(block: np.ndarray, conds: tuple[_Cond, ...]) -> np.ndarray:
    """1-D float64 finite values of a block that satisfy every condition.

    A cheap interval test on the block keeps candidates; the exact bin test then runs
    on those few values only.
    """
    b = np.asarray(block)
    if not conds:
        fin = np.isfinite(b)
        vals = b.ravel() if fin.all() else b[fin]
        return vals.astype(np.float64)
    cand = None
    for cond in conds:  # float64 bounds: the comparison is done in float64
        lb, ub = _value_bounds(cond)
        m = (b >= lb) & (b <= ub)
        cand = m if cand is None else (cand & m)
    vals = b[cand].astype(np.float64)
    vals = vals[np.isfinite(vals)]
    for cond in conds:
        lo, hi, nbins, b0, b1 = cond
        idx = equal_width_bin_index(vals, lo=lo, hi=hi, n_bins=nbins)
        vals = vals[(idx >= b0) & (idx <= b1)]
    return vals


def _stats_kernel(block: np.ndarray, conds: tuple[_Cond, ...] = ()) -> np.ndarray:
    """``[[[count, min, max]]]`` of the selected values of one block."""
    b = np.asarray(block)
    if not conds:  # fast path, no float64 copy
        fin = np.isfinite(b)
        n = int(fin.sum())
        if n == 0:
            return np.array([[[0.0, np.inf, -np.inf]]])
        if n == b.size:
            return np.array([[[float(n), float(b.min()), float(b.max())]]])
        return np.array([[[float(n), float(b[fin].min()), float(b[fin].max())]]])
    sel = _selected(b, conds)
    if sel.size == 0:
        return np.array([[[0.0, np.inf, -np.inf]]])
    return np.array([[[float(sel.size), sel.min(), sel.max()]]])


def _hist_kernel(block: np.ndarray, conds: tuple[_Cond, ...], lo: float, hi: float, nbins: int) -> np.ndarray:
    """Counts, shape ``(1, 1, nbins)``, of the selected values of one block over [lo, hi]."""
    idx = equal_width_bin_index(_selected(block, conds), lo=lo, hi=hi, n_bins=nbins)
    return np.bincount(idx, minlength=nbins).astype(np.int64)[None, None, :]


def _gather_kernel(block: np.ndarray, conds: tuple[_Cond, ...]) -> np.ndarray:
    return _selected(block, conds)


def _as_2d(x: da.Array) -> da.Array:
    if x.ndim == 2:
        return x
    if x.ndim == 0:
        return x.reshape(1, 1)
    return x.reshape(-1, x.shape[-1]) if x.ndim > 2 else x.reshape(1, -1)


def _stats_graph(x: da.Array, conds: tuple[_Cond, ...]) -> tuple[da.Array, da.Array, da.Array]:
    nby, nbx = len(x.chunks[0]), len(x.chunks[1])
    per = da.map_blocks(
        _stats_kernel, x, conds=conds, new_axis=2, chunks=((1,) * nby, (1,) * nbx, (3,)),
        dtype=np.float64, meta=np.empty((0, 0, 0), np.float64),
    )
    return per[..., 0].sum(), per[..., 1].min(), per[..., 2].max()


def _run_stats(x: da.Array, conds: tuple[_Cond, ...]) -> tuple[int, float, float]:
    count, lo, hi = dask.compute(*_stats_graph(x, conds))
    return int(count), float(lo), float(hi)


def _run_hist(x: da.Array, conds: tuple[_Cond, ...], lo: float, hi: float, nbins: int) -> np.ndarray:
    nby, nbx = len(x.chunks[0]), len(x.chunks[1])
    per = da.map_blocks(
        _hist_kernel, x, conds=conds, lo=lo, hi=hi, nbins=nbins, new_axis=2,
        chunks=((1,) * nby, (1,) * nbx, (nbins,)), dtype=np.int64, meta=np.empty((0, 0, 0), np.int64),
    )
    return np.asarray(per.sum(axis=(0, 1)).compute())


def _run_gather(x: da.Array, conds: tuple[_Cond, ...]) -> np.ndarray:
    parts = [dask.delayed(_gather_kernel)(b, conds) for b in x.to_delayed().ravel()]
    return np.concatenate(dask.compute(*parts)) if parts else np.empty(0)


def _order_statistics(
    x: da.Array, ranks: tuple[int, int], *, stats: tuple[int, float, float] | None = None
) -> tuple[float, float]:
    """Exact values of two adjacent (or equal) 0-based ranks among the finite values of ``x``."""
    x = _as_2d(x)
    conds: tuple[_Cond, ...] = ()
    count, lo, hi = stats if stats is not None else _run_stats(x, conds)
    if count == 0:
        raise NotEnoughDataError(f"no valid (finite) value among {x.size} pixels; check the nodata value and the mask")
    k1, k2 = ranks
    if not 0 <= k1 <= k2 <= k1 + 1 or k2 >= count:
        raise ValueError(f"ranks must be adjacent and below {count}, got {ranks}")
    while True:
        if lo == hi:  # every remaining value is equal
            return lo, lo
        if count <= MAX_GATHER:
            vals = _run_gather(x, conds)
            part = np.partition(vals, sorted({k1, k2}))
            return float(part[k1]), float(part[k2])
        counts = _run_hist(x, conds, lo, hi, N_BINS)
        cum = np.cumsum(counts)
        b1, b2 = (int(np.searchsorted(cum, k, side="right")) for k in (k1, k2))
        if b1 != b2:
            # k2 = k1 + 1 straddles two bins: k1 is the largest value of bin b1 and k2 the
            # smallest of bin b2 (bins in between are empty). One pass finds both.
            g1 = _stats_graph(x, conds + ((lo, hi, N_BINS, b1, b1),))
            g2 = _stats_graph(x, conds + ((lo, hi, N_BINS, b2, b2),))
            hi1, lo2 = dask.compute(g1[2], g2[1])
            return float(hi1), float(lo2)
        before = int(cum[b1 - 1]) if b1 > 0 else 0
        k1, k2 = k1 - before, k2 - before
        conds = conds + ((lo, hi, N_BINS, b1, b1),)
        count = int(cum[b1]) - before
        if count > MAX_GATHER:
            count, lo, hi = _run_stats(x, conds)
        else:
            lo, hi = -np.inf, np.inf  # not needed: the next step gathers


def _middle_ranks(n: int) -> tuple[int, int]:
    return (n - 1) // 2, n // 2


def median(dem: np.ndarray | da.Array | xr.DataArray, *, _stats: tuple[int, float, float] | None = None) -> float:
    """Exact median of the finite values of a DEM, out of core.

    Parameters
    ----------
    dem
        numpy array (masked values of a :class:`numpy.ma.MaskedArray` are ignored, as in
        upstream xdem), dask array or :class:`xarray.DataArray`; NaN and infinities are ignored.

    Returns
    -------
    float
        Equal to ``numpy.nanmedian(values.astype("float64"))`` whatever the chunking.

    Raises
    ------
    xdem.errors.NotEnoughDataError
        No finite value.

    Examples
    --------
    >>> import numpy as np
    >>> median(np.array([3.0, np.nan, 1.0, 2.0, 10.0]))
    2.5
    >>> median(np.ma.masked_array([3.0, 1.0, 2.0, 1e9], mask=[0, 0, 0, 1]))
    2.0
    """
    x = _as_2d(_as_dask(dem))
    stats = _stats if _stats is not None else _run_stats(x, ())
    k1, k2 = _middle_ranks(stats[0]) if stats[0] else (0, 0)
    v1, v2 = _order_statistics(x, (k1, k2), stats=stats)
    return float((np.float64(v1) + np.float64(v2)) / 2)


def nmad(
    dem: np.ndarray | da.Array | xr.DataArray, *, center: float | None = None,
    _stats: tuple[int, float, float] | None = None,
) -> float:
    """Exact normalised median absolute deviation ``1.4826 * median(|x - median(x)|)``.

    Parameters
    ----------
    dem
        numpy array (masked values of a :class:`numpy.ma.MaskedArray` are ignored, as in
        upstream xdem), dask array or :class:`xarray.DataArray`; NaN and infinities are ignored.
    center
        Median of ``dem`` if already known (saves three passes).

    Examples
    --------
    >>> import numpy as np
    >>> nmad(np.array([1.0, 2.0, 3.0, 4.0, 100.0]))
    1.4826
    """
    x = _as_2d(_as_dask(dem))
    if center is None:
        _stats = _stats if _stats is not None else _run_stats(x, ())
        center = median(x, _stats=_stats)
    m = float(center)
    dev = abs(x.astype(np.float64) - m)
    dev_stats = None
    if _stats is not None and _stats[0] > 0:
        # Count and an enclosing range of |x - m| follow from those of x: saves a pass.
        # (The refinement only needs lo <= min and hi == max, computed the same way.)
        lo, hi = np.float64(_stats[1]), np.float64(_stats[2])
        dev_stats = (_stats[0], 0.0, float(max(abs(lo - m), abs(hi - m))))
    return float(NMAD_FACTOR * median(dev, _stats=dev_stats))


def robust_summary(dem: np.ndarray | da.Array | xr.DataArray) -> dict[str, float | int]:
    """Valid count and fraction, min, max, exact median and NMAD of a DEM, out of core.

    Returns
    -------
    dict
        ``count``, ``size``, ``valid_fraction``, ``min``, ``max``, ``median``, ``nmad``.

    Raises
    ------
    xdem.errors.NotEnoughDataError
        All values are NaN (or infinite).

    Examples
    --------
    >>> import numpy as np
    >>> robust_summary(np.array([[1.0, np.nan], [3.0, 2.0]]))["median"]
    2.0
    """
    x = _as_2d(_as_dask(dem))
    count, lo, hi = _run_stats(x, ())
    if count == 0:
        raise NotEnoughDataError(
            f"all {x.size} pixels are nodata/NaN (0 valid); check the nodata value or the band"
        )
    m = median(x, _stats=(count, lo, hi))
    return {
        "count": count,
        "size": int(x.size),
        "valid_fraction": count / x.size,
        "min": lo,
        "max": hi,
        "median": m,
        "nmad": nmad(x, center=m, _stats=(count, lo, hi)),
    }


def _dh_block(
    ref: np.ndarray, stable: np.ndarray, *others: np.ndarray, limit: int, ncols: int, random_state: int | None,
    row0: int, col0: int,
) -> dict[str, np.ndarray]:
    """One block of :func:`sampled_dh_stats`: exact counts, and the values at the drawn pixels
    (compiled passes over the block, no float64 copy of it nor any per-pixel mask)."""
    ref, stable = np.asarray(ref), np.asarray(stable, dtype=bool)
    counts = np.empty(len(others), dtype=np.int64)
    # exact extremes of each dh (min and max are exact whatever the blocks: chunk-independent)
    extremes = np.empty((len(others), 2))
    for i, o in enumerate(others):
        counts[i], extremes[i, 0], extremes[i, 1] = diff_extremes(ref, stable, np.asarray(o))
    r, c, _, _ = select_finite_below(ref, ref, stable, limit=limit, ncols=ncols, random_state=random_state,
                                     row0=row0, col0=col0)
    values = np.stack([np.asarray(a)[r, c].astype(np.float64) for a in (ref, *others)])
    return {"counts": counts, "extremes": extremes, "values": values}


def dh_stats_tasks(
    ref: np.ndarray | da.Array | xr.DataArray,
    others: Mapping[str, np.ndarray | da.Array | xr.DataArray],
    *,
    stable: np.ndarray | da.Array | None = None,
    subsample: float | int = 2_000_000,
    random_state: int | None = None,
) -> Delayed:
    """The lazy pass of :func:`sampled_dh_stats`: a :func:`dask.delayed` object whose result
    :func:`dh_stats_finish` turns into the statistics (one task per block, see
    :func:`xdem.io.grid.block_tasks`). To draw them while writing a DEM, use
    :func:`dh_stats_while_writing` instead; in another pass's tasks, :func:`dh_stats_blocks`."""
    func, arrays, _ = dh_stats_blocks(ref, others, stable=stable, subsample=subsample, random_state=random_state)
    names = tuple(others)
    return dask.delayed(_dh_merge)(block_tasks(func, arrays), names)


def dh_stats_blocks(
    ref: np.ndarray | da.Array | xr.DataArray,
    others: Mapping[str, np.ndarray | da.Array | xr.DataArray],
    *,
    stable: np.ndarray | da.Array | None = None,
    subsample: float | int = 2_000_000,
    random_state: int | None = None,
) -> tuple[Callable[..., dict[str, np.ndarray]], list[da.Array], Callable[[list], dict[str, dict[str, float | int] | None]]]:
    """:func:`sampled_dh_stats` as a function of one block, to run in another pass's tasks
    (e.g. :class:`xdem.sampling.BlockWork`): ``(func, arrays, finish)`` where
    ``func(*blocks_of_arrays, row0=, col0=)`` gives a block's small result and ``finish`` turns
    the list of every block's result into the statistics (:func:`dh_stats_finish`; ``None`` for
    a name without any valid value)."""
    ref = _as_2d(_as_dask(ref))
    limit, stable, names, arrs = _dh_inputs(ref, others, stable, subsample)
    func = partial(_dh_block, limit=limit, ncols=ref.shape[1], random_state=random_state)
    return func, [ref, stable, *arrs], lambda parts: dh_stats_finish(_dh_merge(parts, names), allow_empty=True)


def _dh_written_block(block: np.ndarray, *blocks: np.ndarray, per_block: Callable[..., Any], row0: int,
                      col0: int) -> dict[str, np.ndarray]:
    """``per_block`` (of :func:`dh_stats_blocks`) called as ``write_cog(also=...)`` calls it: the
    written block first, ignored (the unfilled values of the written DEM are among ``blocks``)."""
    del block
    return per_block(*blocks, row0=row0, col0=col0)


def dh_stats_while_writing(
    ref: np.ndarray | da.Array | xr.DataArray,
    others: Mapping[str, np.ndarray | da.Array | xr.DataArray],
    *,
    stable: np.ndarray | da.Array | None = None,
    subsample: float | int = 2_000_000,
    random_state: int | None = None,
) -> tuple[BlockStats, Callable[[list], dict[str, dict]]]:
    """:func:`sampled_dh_stats` computed in the tasks that write a DEM with
    :func:`xdem.write_cog` (``also=[stats]``): the blocks of ``ref``, ``stable`` and
    ``others`` are read in the writing pass, next to the written block, and nothing waits in
    memory. Returns the :class:`xdem.io.cog.BlockStats` and a function turning its per-block
    results into the statistics. All arrays must have the written DEM's grid and chunks."""
    func, arrays, _ = dh_stats_blocks(ref, others, stable=stable, subsample=subsample, random_state=random_state)
    names = tuple(others)
    return BlockStats(partial(_dh_written_block, per_block=func), arrays), lambda parts: dh_stats_finish(
        _dh_merge(parts, names))


def _dh_inputs(ref: da.Array, others: Mapping[str, np.ndarray | da.Array | xr.DataArray],
               stable: np.ndarray | da.Array | None, subsample: float | int) -> tuple:
    ny, nx = ref.shape
    resolve_count(subsample, 1)  # validate
    if stable is None:
        stable = da.ones(ref.shape, dtype=bool, chunks=ref.chunks)
    stable = da.asarray(stable).rechunk(ref.chunks)
    names = tuple(others)
    arrs = [_as_2d(_as_dask(others[k])).rechunk(ref.chunks) for k in names]
    frac = float(subsample) if subsample <= 1 else min(1.0, float(subsample) / (ny * nx))
    return hash_bound(frac), stable, names, arrs


def _dh_merge(parts: list[dict], names: tuple[str, ...]) -> dict:
    extremes = np.empty((len(names), 2))
    extremes[:, 0], extremes[:, 1] = np.inf, -np.inf
    for p in parts:
        e = p.get("extremes")
        if e is not None:
            extremes[:, 0] = np.minimum(extremes[:, 0], e[:, 0])
            extremes[:, 1] = np.maximum(extremes[:, 1], e[:, 1])
    return {
        "names": names,
        "counts": np.sum([p["counts"] for p in parts], axis=0) if parts else np.zeros(len(names), dtype=np.int64),
        "values": np.concatenate([p["values"] for p in parts], axis=1),
        "extremes": extremes,
    }


@overload
def dh_stats_finish(merged: dict, *, allow_empty: Literal[False] = False) -> dict[str, dict[str, float | int]]: ...
@overload
def dh_stats_finish(merged: dict, *, allow_empty: bool) -> dict[str, dict[str, float | int] | None]: ...
def dh_stats_finish(
    merged: dict, *, allow_empty: bool = False
) -> dict[str, dict[str, float | int]] | dict[str, dict[str, float | int] | None]:
    """Statistics from the result of :func:`dh_stats_tasks`: per name ``count``, ``min`` and
    ``max`` (exact: stable pixels valid in both), ``median``, ``nmad``, ``mean``, ``std``,
    ``rmse`` and ``le90`` (90 % quantile of ``|dh|``) on the ``sampled`` pixels (summed in
    sorted order, so that they are identical whatever the chunking). A name without any valid
    value raises :class:`~xdem.errors.NotEnoughDataError`, or is ``None`` with ``allow_empty``."""
    out: dict[str, dict[str, float | int] | None] = {}
    vals = merged["values"]
    for k, name in enumerate(merged["names"]):
        dh = vals[k + 1] - vals[0]
        dh = dh[np.isfinite(dh)]
        if dh.size == 0 and allow_empty:
            out[name] = None
            continue
        if dh.size == 0:
            raise NotEnoughDataError(f"no valid elevation difference for '{name}' on the stable pixels of the reference")
        m = float(np.median(dh))
        ordered = np.sort(dh)  # the same values in the same order for any chunking: identical sums
        mean = float(ordered.mean())
        lo, hi = (float(v) for v in merged["extremes"][k]) if "extremes" in merged else (float("nan"),) * 2
        out[name] = {
            "median": m,
            "nmad": _nmad_in_memory(dh, center=m),
            "count": int(merged["counts"][k]),
            "sampled": int(dh.size),
            "mean": mean,
            "std": float(np.sqrt(np.mean((ordered - mean) ** 2))),
            "rmse": float(np.sqrt(np.mean(ordered * ordered))),
            "min": lo,
            "max": hi,
            "le90": float(np.quantile(np.abs(dh), 0.9)),
        }
    return out


def sampled_dh_stats(
    ref: da.Array,
    others: dict[str, da.Array],
    *,
    stable: da.Array | None = None,
    subsample: float | int = 2_000_000,
    random_state: int | None = None,
) -> dict[str, dict]:
    """Statistics of ``dh = other - ref`` for several DEMs on one reproducible subsample.

    One pass over the data (:func:`dh_stats_tasks`, whatever the number of ``others``)
    draws the stable pixels, finite in ``ref``, whose hash (:mod:`xdem.sampling`) falls
    below ``subsample / pixels of the grid`` (a fraction ``<= 1`` is used as is): about
    ``subsample`` times the valid fraction of them, at most ``subsample`` on average, the
    same for any chunking. Every ``other`` is read at the same pixels, so "before" and
    "after" are compared on the same terrain. ``count`` is exact (all valid stable pixels
    where ``other`` is finite); ``median`` and ``nmad`` are exact on the subsample
    (``sampled`` pixels): with 2 million pixels their sampling error is about 0.1 % of the NMAD.

    Parameters
    ----------
    ref
        Reference DEM values (2-D dask array).
    others
        Name -> 2-D dask arrays on the same grid.
    stable
        Boolean dask array, True where a pixel may be used (default: all).
    subsample
        Fraction (``<= 1``) of the pixels, or the number of pixels (``> 1``) of a fully
        valid grid, drawn.
    random_state
        Seed of the draw.

    Returns
    -------
    dict
        Name -> ``{"median", "nmad", "count", "sampled", "mean", "std", "rmse", "min", "max", "le90"}``
        (see :func:`dh_stats_finish`).

    Examples
    --------
    >>> import dask.array as da, numpy as np
    >>> r = da.zeros((50, 50), chunks=20)
    >>> sampled_dh_stats(r, {"before": r + 2.0})["before"]["median"]
    2.0
    """
    task = dh_stats_tasks(ref, others, stable=stable, subsample=subsample, random_state=random_state)
    return dh_stats_finish(task.compute())
