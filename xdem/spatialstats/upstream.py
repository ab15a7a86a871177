"""GlacioHack/xdem 0.2.3's ``nmad`` and ``nd_binning``, on our exact out-of-core statistics.

:func:`nmad` takes upstream's ``nfact``; :func:`nd_binning` returns upstream's table layout
(one row per bin: an ``nd`` column, the statistics named as upstream names them, e.g.
``count``, ``nanmedian``, ``nmad``, then one column of left-closed :class:`pandas.Interval`
per variable; the 1-D binnings of each variable first, then every pair, then all variables
when there are more than two). The numbers come from
:func:`xdem.spatialstats.binned_statistics` (exact), so numpy, masked, dask and xarray inputs
all work; masked and non-finite values are left out, as upstream.

Examples
--------
>>> import numpy as np
>>> from xdem.spatialstats import nd_binning, nmad
>>> dh = np.ma.masked_array([1.0, 2.0, 3.0, 100.0], mask=[False, False, False, True])
>>> round(nmad(dh), 4)
1.4826
>>> slope = np.array([5.0, 15.0, 25.0, 35.0])
>>> df = nd_binning(dh, [slope], ["slope"], list_var_bins=2)
>>> list(df.columns)
['nd', 'count', 'nanmedian', 'nmad', 'slope']
>>> df["count"].tolist()  # the masked 35 is out: bins [5, 15) and [15, 25]
[1.0, 2.0]
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Sequence

import dask
import dask.array as da
import numpy as np
import pandas as pd
import xarray as xr

from xdem import stats as _stats
from xdem.errors import EmptyBinWarning, InputError
from xdem.kernels.robust import NMAD_FACTOR
from xdem.spatialstats.binned import binned_statistics

__all__ = ["nmad", "nd_binning", "UPSTREAM_STATISTICS"]

ArrayLike = np.ndarray | da.Array | xr.DataArray
Statistic = str | Callable[[np.ndarray], float]

#: Upstream's statistic names (a string or a function's ``__name__``) -> ours.
UPSTREAM_STATISTICS = {
    "count": "count", "median": "median", "nanmedian": "median", "nmad": "nmad", "mean": "mean",
    "nanmean": "mean", "std": "std", "nanstd": "std", "min": "min", "nanmin": "min", "max": "max", "nanmax": "max",
}


def nmad(data: ArrayLike, nfact: float = 1.4826, *, center: float | None = None) -> float:
    """Normalised median absolute deviation ``nfact * median(|x - median(x)|)``, exact.

    Masked values of a :class:`numpy.ma.MaskedArray`, NaN and infinities are ignored; numpy,
    dask and xarray inputs, any shape (as upstream's ``xdem.spatialstats.nmad``).

    Parameters
    ----------
    data
        The values.
    nfact
        Normalisation factor; 1.4826 (the default) makes it the standard deviation of a
        normal distribution.
    center
        Median of ``data`` if already known (saves passes).

    Raises
    ------
    xdem.errors.NotEnoughDataError
        No valid value (upstream returns NaN).

    Examples
    --------
    >>> import numpy as np
    >>> nmad(np.array([1.0, 2.0, np.nan, 3.0]), nfact=1)
    1.0
    """
    value = _stats.nmad(data, center=center)
    return value if nfact == NMAD_FACTOR else float(value / NMAD_FACTOR * nfact)


def _as_2d(x: ArrayLike | np.ma.MaskedArray) -> np.ndarray | da.Array:
    """A 2-D numpy or dask array (masked -> NaN; other shapes as one row), as binned_statistics takes."""
    if isinstance(x, xr.DataArray):
        x = x.data
    if isinstance(x, da.Array):
        return x if x.ndim == 2 else x.reshape(1, -1)
    arr = np.ma.filled(np.ma.asarray(x, dtype=np.float64), np.nan)
    return arr if arr.ndim == 2 else arr.reshape(1, -1)


def _statistics(statistics: Sequence[Statistic]) -> list[tuple[str, str]]:
    """(upstream column name, our statistic) pairs, ``count`` first if it was left out (as upstream)."""
    out: list[tuple[str, str]] = []
    for f in statistics:
        col = f if isinstance(f, str) else getattr(f, "__name__", repr(f))
        if col not in UPSTREAM_STATISTICS:
            raise InputError(f"statistic {col!r} is not available in nd_binning here; "
                             f"use one of {', '.join(sorted(UPSTREAM_STATISTICS))}")
        out.append((col, UPSTREAM_STATISTICS[col]))
    if "count" not in [c for c, _ in out]:
        out.insert(0, ("count", "count"))
    return out


def _edges(values: np.ndarray | da.Array, variables: list[np.ndarray | da.Array], bins: Sequence[int | Sequence[float]],
           ranges: Sequence[tuple[float, float]] | None) -> list[np.ndarray]:
    """Upstream's (scipy's) bin edges: equal-width over the range of the jointly valid values."""
    valid = np.isfinite(da.asarray(values))
    for v in variables:
        valid = valid & np.isfinite(da.asarray(v))
    lazy = [(_stats.nanmin(da.where(valid, da.asarray(v), np.nan)), _stats.nanmax(da.where(valid, da.asarray(v), np.nan)))
            for i, v in enumerate(variables) if isinstance(bins[i], (int, np.integer)) and ranges is None]
    found = iter(dask.compute(*lazy))  # all-NaN gives NaN: reported below
    edges = []
    for i, b in enumerate(bins):
        if not isinstance(b, (int, np.integer)):
            edges.append(np.asarray(b, dtype=np.float64))
            continue
        lo, hi = ranges[i] if ranges is not None else next(found)
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise InputError("nd_binning: no pixel where the values and every variable are finite")
        if lo == hi:  # scipy widens an empty range by 0.5 each side
            lo, hi = lo - 0.5, hi + 0.5
        edges.append(np.linspace(float(lo), float(hi), int(b) + 1))
    return edges


def _table(values: np.ndarray | da.Array, variables: dict[str, np.ndarray | da.Array], edges: dict[str, np.ndarray],
           stats: list[tuple[str, str]]) -> pd.DataFrame:
    ours = list(dict.fromkeys(s for _, s in stats))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyBinWarning)  # upstream: empty bins are NaN, without a warning
        table = binned_statistics(values, variables, bins={n: e.tolist() for n, e in edges.items()}, statistics=ours)
    out = pd.DataFrame({"nd": np.full(len(table), len(variables))})
    for col, s in stats:
        out[col] = table[s].to_numpy(dtype=np.float64)
    intervals = [pd.IntervalIndex.from_breaks(edges[n], closed="left") for n in variables]
    grids = np.meshgrid(*[np.arange(len(ii)) for ii in intervals], indexing="ij")  # C order, as the rows
    for name, ii, g in zip(variables, intervals, grids, strict=True):
        out[name] = ii[g.ravel()]
    return out


def nd_binning(
    values: ArrayLike,
    list_var: Sequence[ArrayLike],
    list_var_names: Sequence[str],
    list_var_bins: int | Sequence[int | Sequence[float]] | None = None,
    statistics: Sequence[Statistic] = ("count", np.nanmedian, nmad),
    list_ranges: Sequence[tuple[float, float]] | None = None,
) -> pd.DataFrame:
    """Statistics of ``values`` in bins of one or several variables, in upstream xdem's layout.

    Parameters
    ----------
    values
        The values (e.g. dh), any shape; numpy (masked), dask or xarray.
    list_var
        The explanatory variables, each of the shape of ``values``.
    list_var_names
        Their names (the columns of the result).
    list_var_bins
        Number of equal-width bins for every variable (default 10), or one count or array of
        edges per variable.
    statistics
        Names or functions among :data:`UPSTREAM_STATISTICS` (``np.nanmedian``, :func:`nmad`,
        ``"count"``...); ``count`` is always computed.
    list_ranges
        One ``(min, max)`` per variable for the equal-width bins (default: the range of the
        values where everything is finite).

    Returns
    -------
    pandas.DataFrame
        Columns ``nd``, the statistics, then one column of :class:`pandas.Interval` per
        variable; the 1-D rows of each variable, then each pair (2-D), then all (n-D, n > 2).

    Examples
    --------
    >>> import numpy as np
    >>> dh, slope, aspect = np.arange(8.0), np.arange(8.0), np.arange(8.0) % 2
    >>> df = nd_binning(dh, [slope, aspect], ["slope", "aspect"], list_var_bins=2)
    >>> df.groupby("nd").size().tolist()
    [4, 4]
    """
    names = list(list_var_names)
    if len(list_var) != len(names) or not names:
        raise InputError(f"nd_binning needs one name per variable, got {len(list_var)} variables and {len(names)} names")
    n = len(names)
    bins: list[int | Sequence[float]] = (
        [10] * n if list_var_bins is None
        else [int(list_var_bins)] * n if isinstance(list_var_bins, (int, np.integer))
        else list(list_var_bins)
    )
    if len(bins) != n or (list_ranges is not None and len(list_ranges) != n):
        raise InputError(f"nd_binning: list_var_bins and list_ranges need one entry per variable ({n})")
    stats = _statistics(statistics)
    vals = _as_2d(values)
    variables = {name: _as_2d(v) for name, v in zip(names, list_var, strict=True)}
    edges = dict(zip(names, _edges(vals, list(variables.values()), bins, list_ranges), strict=True))
    groups: list[tuple[str, ...]] = [(name,) for name in names] + list(itertools.combinations(names, 2))
    if n > 2:
        groups.append(tuple(names))
    frames = [_table(vals, {g: variables[g] for g in group}, {g: edges[g] for g in group}, stats) for group in groups]
    return pd.concat(frames)
