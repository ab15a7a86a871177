"""Robust summaries and binned statistics of elevation differences, out of core.

Every statistic is exact by default (``subsample=None``):

* ``count``, ``mean``, ``std``, ``rmse``, ``min``, ``max`` come from per-block sums merged
  in a tree (one pass);
* ``median``, ``nmad`` and percentiles ``p<q>`` (e.g. ``"p2.5"``) come from exact grouped
  order statistics (histogram refinement then in-memory partition, see
  :mod:`xdem.spatialstats._grouped`): typically two passes for the medians and
  percentiles and two more for the NMADs.

With ``subsample`` set, the order statistics (median, NMAD, percentiles) are taken from a
reproducible, chunk-independent subsample of the valid pixels
(:func:`xdem.sampling.sample_valid`, one or two passes), while the sum-based statistics stay
exact on all pixels; a ``sample_count`` column says how many pixels each bin drew.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import dask.array as da
import numpy as np
import pandas as pd
import xarray as xr

from xdem import stats as _stats
from xdem.errors import EmptyBinWarning, InputError, NotEnoughDataError
from xdem.kernels.robust import group_by, nmad
from xdem.sampling import sample_valid
from xdem.spatialstats import _grouped

__all__ = ["binned_statistics", "stats_by_slope_class", "robust_summary", "DEFAULT_STATISTICS", "SLOPE_CLASSES"]

#: Statistics computed by :func:`binned_statistics` unless told otherwise.
DEFAULT_STATISTICS = ("count", "median", "nmad", "mean", "rmse")
#: Default slope classes (degrees) of :func:`stats_by_slope_class`.
SLOPE_CLASSES = (0, 5, 10, 20, 30, 40, 90)
_SUM_STATS = ("count", "mean", "std", "rmse", "min", "max")
_PCT = re.compile(r"^p(\d+(?:\.\d*)?)$")


# ------------------------------------------------------------------------ inputs
def _data(x: Any) -> Any:
    return x if isinstance(x, (np.ndarray, da.Array)) else getattr(x, "data", x)


def _check_same_grid(dh: Any, name: str, var: Any) -> None:
    """InputError if two DataArrays of the same shape have different x/y coordinates."""
    if not all(isinstance(a, xr.DataArray) and {"x", "y"} <= set(a.coords) for a in (dh, var)):
        return
    for c in ("x", "y"):
        a, b = np.asarray(dh[c].values, dtype=np.float64), np.asarray(var[c].values, dtype=np.float64)
        tol = 1e-6 * max(1.0, float(np.ptp(a)) / max(a.size, 1))  # a millionth of a pixel
        if a.shape == b.shape and not np.allclose(a, b, rtol=0, atol=tol):
            raise InputError(
                f"{name} is not on the grid of dh (different {c} coordinates); "
                "bring it onto dh's grid first, e.g. with xdem.io.grid.align_pair or .rio.reproject_match(dh)"
            )


def _align(dh: Any, variables: Mapping[str, Any]) -> tuple[da.Array, dict[str, da.Array]]:
    """dh and the variables as 2-D dask arrays on one chunking (dh's, else a variable's)."""
    for name, var in variables.items():
        _check_same_grid(dh, name, var)
    raw = {"dh": _data(dh), **{k: _data(v) for k, v in variables.items()}}
    raw = {k: _stats.masked_as_nan(a) for k, a in raw.items()}  # masked values are ignored (upstream's)
    shape = None
    for name, arr in raw.items():
        if not hasattr(arr, "shape") or not hasattr(arr, "dtype"):
            arr = raw[name] = np.asarray(arr)
        if arr.ndim != 2 or arr.dtype.kind not in "fiub":
            raise InputError(f"{name} must be a 2-D numeric array, got shape {arr.shape} and dtype {arr.dtype}")
        if shape is None:
            shape = arr.shape
        elif arr.shape != shape:
            raise InputError(f"{name} has shape {arr.shape} but dh has {shape}; put every variable on the grid of dh")
    chunks = next((a.chunks for a in raw.values() if isinstance(a, da.Array)), shape)
    out = {
        k: (a.rechunk(chunks) if isinstance(a, da.Array) else da.from_array(a, chunks=chunks)) for k, a in raw.items()
    }
    dh_arr = out.pop("dh")
    return dh_arr, out


def _parse_statistics(statistics: Sequence[str]) -> tuple[list[str], list[float]]:
    if isinstance(statistics, str):
        statistics = (statistics,)
    stats, pcts = [], []
    for s in statistics:
        m = _PCT.match(str(s))
        if s in _SUM_STATS or s in ("median", "nmad"):
            stats.append(s)
        elif m and 0 <= float(m.group(1)) <= 100:
            stats.append(f"p{float(m.group(1)):g}")
            pcts.append(float(m.group(1)))
        else:
            raise InputError(
                f"unknown statistic {s!r}; choose among {_SUM_STATS + ('median', 'nmad')} or 'p<q>' with 0 <= q <= 100"
            )
    if not stats:
        raise InputError("statistics is empty; ask for at least one, e.g. ('count', 'median', 'nmad')")
    return stats, pcts


def _minmax_kernel(*blocks: np.ndarray) -> np.ndarray:
    """Min and max of each variable over pixels where dh and every variable are finite."""
    arrs = [np.asarray(b, dtype=np.float64) for b in blocks]
    ok = np.logical_and.reduce([np.isfinite(a) for a in arrs])
    out = np.empty((1, 1, len(arrs) - 1, 2))
    for i, a in enumerate(arrs[1:]):
        sel = a[ok]
        out[0, 0, i] = (sel.min(), sel.max()) if sel.size else (np.inf, -np.inf)
    return out


def _resolve_edges(dh: da.Array, variables: dict[str, da.Array], bins: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Bin edges per variable; integer counts become equal-width edges over the valid range."""
    unknown = set(bins) - set(variables)
    if unknown:
        raise InputError(f"bins given for {sorted(unknown)} which are not in variables {sorted(variables)}")
    names = list(variables)
    edges: dict[str, np.ndarray] = {}
    need_range = []
    for name in names:
        b = bins.get(name, 10)
        scalar = np.isscalar(b)  # tested apart: np.isscalar's TypeGuard would type b as any scalar (str, complex...)
        if scalar:
            if isinstance(b, bool) or int(b) != b or int(b) < 1:
                raise InputError(
                    f"bins[{name!r}] must be a positive integer or an increasing array of edges, got {b!r}"
                )
            need_range.append(name)
        else:
            e = np.asarray(b, dtype=np.float64)
            if e.ndim != 1 or e.size < 2 or not np.all(np.diff(e) > 0) or not np.all(np.isfinite(e)):
                raise InputError(f"bins[{name!r}] must hold at least two finite, strictly increasing edges, got {b!r}")
            edges[name] = e
    if need_range:
        nby, nbx = dh.numblocks
        per = da.map_blocks(
            _minmax_kernel, dh, *variables.values(), new_axis=[2, 3], dtype=np.float64,
            chunks=((1,) * nby, (1,) * nbx, (len(names),), (2,)), meta=np.empty((0, 0, 0, 0), np.float64),
        )
        lo, hi = da.compute(per[..., 0].min(axis=(0, 1)), per[..., 1].max(axis=(0, 1)))
        for name in need_range:
            i = names.index(name)
            if not np.isfinite(lo[i]):
                raise NotEnoughDataError(
                    f"binned statistics need valid pixels but none has finite dh and {', '.join(names)}; "
                    "check the nodata values and that the rasters overlap"
                )
            a, b = float(lo[i]), float(hi[i])
            if a == b:  # like numpy.histogram: widen a degenerate range
                a, b = a - 0.5, b + 0.5
            edges[name] = np.linspace(a, b, int(bins.get(name, 10)) + 1)
    return {name: edges[name] for name in names}


# ----------------------------------------------------------------------- engine
def _grouped_table(
    grouping: _grouped.Grouping, stats: list[str], pcts: list[float], *,
    subsample: float | int | None, random_state: int | None, max_gather: int | None = None,
) -> dict[str, np.ndarray]:
    """Statistic name -> per-group values."""
    n_groups = grouping.n_groups
    mom = _grouped.group_moments(grouping)
    n = mom[:, 0]
    if not n.any():
        raise NotEnoughDataError(
            f"no valid pixel among {grouping.arrays[0].size} (dh and every variable finite, inside the bins); "
            "check the nodata values, the bins and that the rasters overlap"
        )
    has = n > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        table = {
            "count": n.astype(np.int64),
            "mean": np.where(has, mom[:, 1], np.nan),
            "std": np.where(has, np.sqrt(mom[:, 2] / n), np.nan),
            "rmse": np.where(has, np.sqrt(mom[:, 3] / n), np.nan),
            "min": np.where(has, mom[:, 4], np.nan),
            "max": np.where(has, mom[:, 5], np.nan),
        }
    want_q = "median" in stats or "nmad" in stats or bool(pcts)
    if not want_q:
        return table
    if subsample is not None:
        table.update(_sampled_quantiles(grouping, stats, pcts, subsample=subsample, random_state=random_state))
        return table
    groups = np.flatnonzero(has)
    keys = ["median"] + [f"p{p:g}" for p in pcts]
    queries: list[tuple[int, int]] = []
    plan: list[tuple[np.intp, str, int, float]] = []  # (group, statistic, index of its first query, weight)
    for g in groups:
        cnt = int(n[g])
        for key, p in zip(keys, [None, *pcts]):
            if p is None:  # median: mean of the two middle values, like numpy.median
                k0, k1, t = (cnt - 1) // 2, cnt // 2, 0.5
            else:
                k0, k1, t = _grouped.quantile_ranks(cnt, p / 100)
            plan.append((g, key, len(queries), t))
            queries += [(int(g), k0), (int(g), k1)]
    vals = _grouped.group_order_statistics(
        grouping, queries, counts=n, lo=mom[:, 4], hi=mom[:, 5], max_gather=max_gather
    )
    for key in keys:
        table[key] = np.full(n_groups, np.nan)
    for g, key, i, t in plan:
        a, b = vals[i], vals[i + 1]
        table[key][g] = (a + b) / 2 if key == "median" else _grouped.combine_ranks(a, b, t)
    if "nmad" in stats:
        med = np.nan_to_num(table["median"])
        hi = np.maximum(mom[:, 5] - med, med - mom[:, 4])
        dqueries: list[tuple[int, int]] = []
        dplan: list[tuple[np.intp, int]] = []
        for g in groups:
            k0, k1 = (int(n[g]) - 1) // 2, int(n[g]) // 2
            dplan.append((g, len(dqueries)))
            dqueries += [(int(g), k0), (int(g), k1)]
        dvals = _grouped.group_order_statistics(
            grouping, dqueries, counts=n, lo=np.zeros(n_groups), hi=hi, centers=med, max_gather=max_gather
        )
        nm = np.full(n_groups, np.nan)
        for g, i in dplan:
            nm[g] = _stats.NMAD_FACTOR * (dvals[i] + dvals[i + 1]) / 2
        table["nmad"] = nm
    return table


def _sampled_quantiles(
    grouping: _grouped.Grouping, stats: list[str], pcts: list[float], *,
    subsample: float | int, random_state: int | None,
) -> dict[str, np.ndarray]:
    n_groups = grouping.n_groups
    gid = _grouped.gid_array(grouping)
    s = sample_valid(
        gid >= 0, {"v": grouping.arrays[0], "gid": gid}, subsample=subsample, random_state=random_state,
        what="binned statistics",
    )
    g = s["gid"].astype(np.int64)
    out = {"sample_count": np.bincount(g, minlength=n_groups).astype(np.int64), "median": np.full(n_groups, np.nan)}
    if "nmad" in stats:
        out["nmad"] = np.full(n_groups, np.nan)
    for p in pcts:
        out[f"p{p:g}"] = np.full(n_groups, np.nan)
    groups = group_by(g)
    vs = s["v"][groups.order]
    for grp, a, b in zip(groups.keys, groups.starts, groups.ends):
        x = vs[a:b]
        m = float(np.median(x))
        out["median"][grp] = m
        if "nmad" in stats:
            out["nmad"][grp] = nmad(x, center=m)
        for p in pcts:
            out[f"p{p:g}"][grp] = float(np.percentile(x, p))
    return out


# ------------------------------------------------------------------------ public
def binned_statistics(
    dh: np.ndarray | da.Array | xr.DataArray,
    variables: Mapping[str, np.ndarray | da.Array | xr.DataArray],
    *,
    bins: Mapping[str, int | Sequence[float]] | None = None,
    statistics: Sequence[str] = DEFAULT_STATISTICS,
    subsample: float | int | None = None,
    random_state: int | None = None,
) -> pd.DataFrame:
    """Statistics of elevation differences in bins of one or two variables, out of core.

    Bins are left-closed, ``[e_i, e_{i+1})``, except the last one which also holds its
    upper edge (as :func:`numpy.histogram`). Pixels count when dh and every variable are
    finite and inside the bins.

    Exact by default: ``count``, ``mean``, ``std`` (population, ``ddof=0``), ``rmse``,
    ``min`` and ``max`` are merged per-block sums (one pass); ``median``, ``nmad`` and
    percentiles ``"p<q>"`` are exact grouped order statistics (histogram refinement, a few
    more passes; memory bounded by :data:`xdem.stats.MAX_GATHER` values). With
    ``subsample``, only the order statistics are computed on a reproducible subsample of
    the valid pixels (:func:`xdem.sampling.sample_valid`; chunk-independent), the sums stay
    exact, and a ``sample_count`` column is added.

    Each call reads the inputs several times: persist lazy terrain attributes that are
    expensive to recompute, or write them to disk first.

    Parameters
    ----------
    dh
        Elevation differences (tba - ref): 2-D numpy, dask or xarray.
    variables
        One or two (or more) name -> 2-D array on the grid of ``dh`` (e.g. slope, aspect,
        elevation, curvature).
    bins
        Name -> number of equal-width bins over the valid range of that variable (default
        10), or an increasing array of edges.
    statistics
        Among ``count, median, nmad, mean, std, rmse, min, max`` and ``p<q>``
        (``0 <= q <= 100``, numpy's linear interpolation).
    subsample
        ``None`` (exact), or a fraction (``<= 1``) or count (``> 1``) of valid pixels for
        the order statistics.
    random_state
        Seed of the subsample.

    Returns
    -------
    pandas.DataFrame
        One row per bin (C order over the variables, empty bins included with count 0),
        indexed by :class:`pandas.Interval` (a MultiIndex for several variables); columns
        ``<name>_lower``, ``<name>_upper``, ``<name>_center`` for each variable, then the
        statistics in the order asked.

    Raises
    ------
    xdem.errors.NotEnoughDataError
        No valid pixel at all.

    Warns
    -----
    xdem.errors.EmptyBinWarning
        Some bins hold no valid pixel (their statistics are NaN).

    Examples
    --------
    >>> import numpy as np
    >>> dh = np.array([[1.0, 2.0], [3.0, np.nan]])
    >>> slope = np.array([[1.0, 2.0], [30.0, 40.0]])
    >>> df = binned_statistics(dh, {"slope": slope}, bins={"slope": [0, 10, 90]})
    >>> df["count"].tolist(), df["median"].tolist()
    ([2, 1], [1.5, 3.0])
    """
    if not isinstance(variables, Mapping) or not variables:
        raise InputError("variables must be a non-empty dict of name -> 2-D array, e.g. {'slope': slope}")
    stats, pcts = _parse_statistics(statistics)
    dh_arr, var_arrs = _align(dh, variables)
    edges = _resolve_edges(dh_arr, var_arrs, bins or {})
    names = list(var_arrs)
    shape = tuple(e.size - 1 for e in edges.values())
    grouping = _grouped.Grouping((dh_arr, *var_arrs.values()), tuple(edges.values()))
    table = _grouped_table(grouping, stats, pcts, subsample=subsample, random_state=random_state)
    return _to_frame(table, stats, names, edges, shape, subsample is not None)


def _to_frame(
    table: dict[str, np.ndarray], stats: list[str], names: list[str], edges: dict[str, np.ndarray],
    shape: tuple[int, ...], sampled: bool,
) -> pd.DataFrame:
    idx = np.indices(shape).reshape(len(shape), -1)
    cols: dict[str, np.ndarray] = {}
    levels = []
    for d, name in enumerate(names):
        e = edges[name]
        lower, upper = e[:-1][idx[d]], e[1:][idx[d]]
        cols[f"{name}_lower"], cols[f"{name}_upper"], cols[f"{name}_center"] = lower, upper, (lower + upper) / 2
        levels.append(pd.IntervalIndex.from_arrays(lower, upper, closed="left", name=name))
    for s in stats:
        cols[s] = table[s]
    if sampled:
        cols["sample_count"] = table["sample_count"]
    index = levels[0] if len(levels) == 1 else pd.MultiIndex.from_arrays(levels)
    df = pd.DataFrame(cols, index=index)
    empty = int((table["count"] == 0).sum())
    if empty:
        warnings.warn(
            f"{empty} of {len(df)} bins hold no valid pixel (NaN statistics); use fewer or wider bins",
            EmptyBinWarning, stacklevel=3,
        )
    return df


def stats_by_slope_class(
    dh: np.ndarray | da.Array | xr.DataArray,
    slope: np.ndarray | da.Array | xr.DataArray,
    *,
    classes: Sequence[float] = SLOPE_CLASSES,
    statistics: Sequence[str] = ("count", "median", "nmad", "mean", "rmse"),
    subsample: float | int | None = None,
    random_state: int | None = None,
) -> pd.DataFrame:
    """Statistics of dh per slope class (e.g. 0-5, 5-10, ... degrees), out of core.

    A thin wrapper of :func:`binned_statistics` with ``bins={"slope": classes}``: count,
    mean and RMSE are exact sums; median and NMAD are exact (``subsample=None``) or taken
    on a reproducible subsample.

    Parameters
    ----------
    dh
        Elevation differences (tba - ref).
    slope
        Slope in degrees on the same grid, e.g. :func:`xdem.terrain.slope` of the reference.
    classes
        Increasing class edges in degrees; the last class includes its upper edge.

    Examples
    --------
    >>> import numpy as np
    >>> dh = np.array([[0.5, -0.5], [2.0, 4.0]])
    >>> slope = np.array([[1.0, 3.0], [25.0, 35.0]])
    >>> stats_by_slope_class(dh, slope, classes=(0, 5, 90))["rmse"].tolist()
    [0.5, 3.1622776601683795]
    """
    return binned_statistics(
        dh, {"slope": slope}, bins={"slope": classes}, statistics=statistics, subsample=subsample,
        random_state=random_state,
    )


def robust_summary(
    dh: np.ndarray | da.Array | xr.DataArray,
    *,
    percentiles: Sequence[float] = (2.5, 16, 84, 97.5),
    subsample: float | int | None = None,
    random_state: int | None = None,
) -> dict[str, float]:
    """Exact summary of dh out of core: counts, median, NMAD, mean, std, RMSE, min, max, percentiles.

    Extends :func:`xdem.stats.robust_summary` (same keys, plus ``mean``, ``std``
    (``ddof=0``), ``rmse`` and ``p<q>``). Everything is exact unless ``subsample`` is given,
    in which case median, NMAD and percentiles come from a reproducible subsample.

    Raises
    ------
    xdem.errors.NotEnoughDataError
        No finite value.

    Examples
    --------
    >>> import numpy as np
    >>> s = robust_summary(np.array([[1.0, 2.0], [3.0, np.nan]]), percentiles=(50,))
    >>> s["median"], s["p50"], s["count"]
    (2.0, 2.0, 3)
    """
    dh_arr, _ = _align(dh, {})
    stats = ["count", "median", "nmad", "mean", "std", "rmse", "min", "max"] + [f"p{p:g}" for p in percentiles]
    parsed, pcts = _parse_statistics(stats)
    try:
        table = _grouped_table(
            _grouped.Grouping((dh_arr,), ()), parsed, pcts, subsample=subsample, random_state=random_state
        )
    except NotEnoughDataError:
        raise NotEnoughDataError(
            f"all {dh_arr.size} pixels are nodata/NaN (0 valid); check the nodata value or the band"
        ) from None
    out: dict[str, float] = {"count": int(table["count"][0]), "size": int(dh_arr.size)}
    out["valid_fraction"] = out["count"] / out["size"]
    for s in parsed[1:]:
        out[s] = float(table[s][0])
    if subsample is not None:
        out["sample_count"] = int(table["sample_count"][0])
    return out
