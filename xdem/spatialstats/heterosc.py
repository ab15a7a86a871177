r"""Heteroscedasticity of elevation errors: their spread as a function of terrain, out of core.

GlacioHack/xdem 0.2.3's names, argument orders and defaults (Hugonnet et al. 2022, IEEE
JSTARS 15, 6456-6472):

1. :func:`xdem.spatialstats.nd_binning` bins dh on stable terrain by explanatory variables
   (slope, maximum curvature...) with a spread statistic (NMAD): exact grouped order
   statistics, one grouped pass per statistic, memory one chunk;
2. :func:`interp_nd_binning` turns the binned spread into a function of the variables (linear
   between bin centres, nearest beyond; bins with fewer than ``min_count`` values are filled
   from their neighbours);
3. :func:`two_step_standardization` divides dh by that function, drops outliers beyond
   ``fac_spread_outliers`` spreads, and rescales so that the z-scores have a spread of 1
   (exact NMADs of a lazy array);
4. the error map is the fitted function mapped block by block over the variables (lazy).

:func:`estimate_model_heteroscedasticity` chains 1-3; :func:`infer_heteroscedasticity_from_stable`
also masks the stable terrain and returns the error map. Every number is the same for any
chunking and for numpy or dask inputs (exact statistics; the function is evaluated per pixel).

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> slope = rng.uniform(0, 40, (200, 200))
>>> dh = rng.normal(size=slope.shape) * (1 + 0.1 * slope)
>>> errors, df, fun = infer_heteroscedasticity_from_stable(dh, [slope], list_var_names=["slope"])
>>> bool(abs(float(fun((np.array([35.0]),))[0]) / 4.5 - 1) < 0.1)
True
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any

import dask.array as da
import numpy as np
import pandas as pd

from xdem.errors import InputError
from xdem.spatialstats._fields import apply_blocks, as_field, chunks_of, stable_values
from xdem.spatialstats.upstream import nd_binning, nmad

__all__ = ["interp_nd_binning", "get_perbin_nd_binning", "two_step_standardization",
           "estimate_model_heteroscedasticity", "infer_heteroscedasticity_from_stable", "BinnedFunction"]

Statistic = str | Callable[..., Any]
_INTERVAL = re.compile(r"^\s*([\[(])\s*([^,]+),\s*([^\])]+)([\])])\s*$")


def _stat_name(statistic: Statistic) -> str:
    return statistic if isinstance(statistic, str) else getattr(statistic, "__name__", repr(statistic))


def _as_interval(x: object) -> pd.Interval | float:
    """A pandas Interval (read back from CSV as a string such as ``"[0.0, 5.0)"``), NaN for none."""
    if isinstance(x, pd.Interval):
        return x
    m = _INTERVAL.match(str(x)) if isinstance(x, str) else None
    if m is None:
        return np.nan
    left, right = m.group(1) == "[", m.group(4) == "]"
    closed = "both" if left and right else "left" if left else "right" if right else "neither"
    return pd.Interval(float(m.group(2)), float(m.group(3)), closed=closed)


def _table(df: pd.DataFrame, names: list[str], statistic: Statistic, min_count: int | None) -> tuple[pd.DataFrame, str]:
    """The rows of ``df`` binned by exactly ``names`` (checked), with the statistic's column name."""
    if not isinstance(df, pd.DataFrame) or df.empty:
        raise InputError("the binning table is empty; give the DataFrame of nd_binning")
    stat = _stat_name(statistic)
    for col in [*names, stat] + (["count"] if min_count is not None else []):
        if col not in df.columns:
            raise InputError(f"column {col!r} is not in the binning table (columns: {', '.join(map(str, df.columns))})")
    sub = df[df["nd"] == len(names)].copy() if "nd" in df.columns else df.copy()
    for name in names:
        sub = sub[sub[name].notna()]
    if sub.empty:
        raise InputError(f"the binning table has no {len(names)}-D binning by {names}")
    return sub, stat


class BinnedFunction:
    """A function of the explanatory variables from binned statistics (what
    :func:`interp_nd_binning` returns): call it with a tuple of arrays (numpy, dask, DataArray or
    DEM; numpy scalars too) in the order of the variables; ``scale`` multiplies its values.
    Lazy (block by block) for dask inputs; NaN where a variable is NaN."""

    def __init__(self, axes: list[np.ndarray], values: np.ndarray, scale: float = 1.0) -> None:
        from scipy.interpolate import RegularGridInterpolator

        self.axes, self.values, self.scale = axes, values, float(scale)
        self._rgi = RegularGridInterpolator(tuple(axes), values, method="linear", bounds_error=False, fill_value=None)

    def scaled(self, factor: float) -> BinnedFunction:
        """The same function times ``factor``."""
        return BinnedFunction(self.axes, self.values, self.scale * float(factor))

    def _kernel(self, *arrays: np.ndarray) -> np.ndarray:
        shape = np.broadcast_shapes(*[a.shape for a in arrays])
        pts = np.stack([np.broadcast_to(np.asarray(a, dtype=np.float64), shape).ravel() for a in arrays], axis=-1)
        ok = np.isfinite(pts).all(axis=1)
        out = np.full(pts.shape[0], np.nan)
        if ok.any():
            out[ok] = self._rgi(pts[ok]) * self.scale
        return out.reshape(shape)

    def __call__(self, xi: Sequence[object] | object, *rest: object) -> Any:
        args = list(xi) if isinstance(xi, (tuple, list)) else [xi]
        args += list(rest)
        if len(args) != len(self.axes):
            raise InputError(f"this error function takes {len(self.axes)} variable(s) in a tuple, got {len(args)}")
        return apply_blocks(self._kernel, [as_field(a, "variable") for a in args])


def interp_nd_binning(
    df: pd.DataFrame,
    list_var_names: str | list[str],
    statistic: Statistic = nmad,
    interpolate_method: str = "linear",
    min_count: int | None = 100,
) -> BinnedFunction:
    """A function of the variables interpolating a statistic of an N-D binning (upstream's semantics).

    The bin centres of the rows of ``df`` binned by exactly ``list_var_names`` (intervals of
    :func:`~xdem.spatialstats.nd_binning`, their CSV strings, or numbers) form a grid; bins with
    fewer than ``min_count`` values (``None``: none left out) or without a value are filled by
    ``interpolate_method`` (``"linear"`` or ``"nearest"``, :func:`scipy.interpolate.griddata`)
    inside the valid bins' hull and by the nearest bin beyond; the function interpolates
    linearly between bin centres and takes the edge bins' values beyond them.

    Examples
    --------
    >>> df = pd.DataFrame({"var1": [1, 2, 3, 1, 2, 3, 1, 2, 3], "var2": [1, 1, 1, 2, 2, 2, 3, 3, 3],
    ...                    "statistic": [1, 2, 3, 4, 5, 6, 7, 8, 9]})
    >>> fun = interp_nd_binning(df, ["var1", "var2"], statistic="statistic", min_count=None)
    >>> float(fun((1.5, 1.5))), float(fun((-1, 1)))
    (3.0, 1.0)
    """
    from scipy.interpolate import griddata

    names = [list_var_names] if isinstance(list_var_names, str) else list(list_var_names)
    if interpolate_method not in ("linear", "nearest"):
        raise InputError(f"interpolate_method must be 'linear' or 'nearest', got {interpolate_method!r}")
    sub, stat = _table(df, names, statistic, min_count)
    mids = {}
    for name in names:
        col = sub[name].to_numpy()
        if all(isinstance(v, (int, float, np.integer, np.floating)) for v in col):
            mids[name] = col.astype(np.float64)
        else:
            ivs = [_as_interval(v) for v in col]
            mids[name] = np.array([iv.mid if isinstance(iv, pd.Interval) else np.nan for iv in ivs])
    values = sub[stat].to_numpy(dtype=np.float64).copy()
    if min_count is not None:
        values[sub["count"].to_numpy(dtype=np.float64) < min_count] = np.nan
    coords = np.column_stack([mids[n] for n in names])
    ok = np.isfinite(values) & np.isfinite(coords).all(axis=1)
    if not ok.any():
        raise InputError(f"no bin of the table has a valid {stat!r} (with min_count={min_count}); "
                         "lower min_count or use fewer bins")
    axes = [np.unique(coords[ok, i]) for i in range(len(names))]
    grid = np.stack([g.ravel() for g in np.meshgrid(*axes, indexing="ij")], axis=-1)
    filled = griddata(coords[ok], values[ok], grid, method="nearest")  # exact at the valid bins
    known = (grid[:, None, :] == coords[ok][None, :, :]).all(axis=2).any(axis=1)
    if not known.all() and interpolate_method == "linear" and ok.sum() > len(names):
        try:
            inside = griddata(coords[ok], values[ok], grid, method="linear")
        except Exception:  # scipy.spatial.QhullError: the valid bins span fewer dimensions
            inside = np.full(len(grid), np.nan)
        use = ~known & np.isfinite(inside)
        filled[use] = inside[use]
    table = filled.reshape([len(a) for a in axes])
    # one more bin each side, equal to the edge bin: linear beyond the centres is then the nearest value
    ext_axes = [np.concatenate([[a[0] - 1.0], a, [a[-1] + 1.0]]) for a in axes]
    return BinnedFunction(ext_axes, np.pad(table, 1, mode="edge"))


def _perbin_kernel(*arrays: np.ndarray, lefts: list[np.ndarray], rights: list[np.ndarray],
                   closed_right: list[np.ndarray], table: np.ndarray) -> np.ndarray:
    shape = np.broadcast_shapes(*[a.shape for a in arrays])
    index = []
    inside = np.ones(shape, dtype=bool)
    for a, lo, hi, cr in zip(arrays, lefts, rights, closed_right, strict=True):
        v = np.broadcast_to(a, shape)
        i = np.clip(np.searchsorted(lo, v, side="right") - 1, 0, len(lo) - 1)
        inside &= (v >= lo[i]) & ((v < hi[i]) | (cr[i] & (v == hi[i])))
        index.append(i)
    return np.where(inside, table[tuple(index)], np.nan)


def get_perbin_nd_binning(
    df: pd.DataFrame,
    list_var: Sequence[object],
    list_var_names: str | list[str],
    statistic: Statistic = np.nanmedian,
    min_count: int | None = 0,
) -> Any:
    """Per pixel, the statistic of the bin of ``df`` its variables fall in (NaN outside every bin or
    where the bin counts ``min_count`` values or fewer), as upstream; lazy for dask inputs.

    Examples
    --------
    >>> from xdem.spatialstats import nd_binning
    >>> x = np.arange(10.0)
    >>> df = nd_binning(x, [x], ["x"], list_var_bins=[[0.0, 5.0, 10.0]])
    >>> get_perbin_nd_binning(df, [np.array([1.0, 7.0, 12.0])], ["x"]).tolist()
    [2.0, 7.0, nan]
    """
    names = [list_var_names] if isinstance(list_var_names, str) else list(list_var_names)
    if len(list_var) != len(names):
        raise InputError(f"get_perbin_nd_binning needs one name per variable, got {len(list_var)} and {len(names)}")
    sub, stat = _table(df, names, statistic, min_count)
    intervals = {n: [_as_interval(v) for v in sub[n]] for n in names}
    uniq = {n: sorted({iv for iv in intervals[n] if isinstance(iv, pd.Interval)}, key=lambda iv: iv.left) for n in names}
    table = np.full([len(uniq[n]) for n in names], np.nan)
    pos = {n: {iv: i for i, iv in enumerate(uniq[n])} for n in names}
    count = sub["count"].to_numpy(dtype=np.float64) if "count" in sub.columns else np.full(len(sub), np.inf)
    for row, (s, c) in enumerate(zip(sub[stat].to_numpy(dtype=np.float64), count, strict=True)):
        key = tuple(pos[n].get(intervals[n][row]) for n in names)
        if None not in key and (min_count is None or c > min_count):
            table[key] = s
    kw: dict[str, Any] = dict(lefts=[np.array([iv.left for iv in uniq[n]]) for n in names],
              rights=[np.array([iv.right for iv in uniq[n]]) for n in names],
              closed_right=[np.array([iv.closed_right for iv in uniq[n]]) for n in names], table=table)
    return apply_blocks(functools.partial(_perbin_kernel, **kw), [as_field(v, "variable") for v in list_var])


def _spread(statistic: Callable[..., Any]) -> Callable[[Any], float]:
    """Our exact, out-of-core version of upstream's spread statistic (by its name)."""
    name = _stat_name(statistic)
    if name == "nmad":
        return lambda x: nmad(x)
    if name in ("std", "nanstd"):
        return lambda x: float(da.nanstd(da.asarray(x)).compute()) if isinstance(x, da.Array) else float(np.nanstd(x))
    raise InputError(f"spread_statistic {name!r} is not available here; use xdem.spatialstats.nmad or np.nanstd")


def two_step_standardization(
    dvalues: object,
    list_var: Sequence[object],
    unscaled_error_fun: Callable[..., Any],
    spread_statistic: Callable[..., Any] = nmad,
    fac_spread_outliers: float | None = 7,
) -> tuple[Any, Callable[..., Any]]:
    """Standardise ``dvalues`` by an error function of the variables, rescaled to a spread of 1.

    ``z = dvalues / unscaled_error_fun(list_var)``; values beyond ``fac_spread_outliers`` times
    the spread of ``z`` become NaN (``None``: kept); ``z`` is divided by its new spread
    (``spread_statistic``, the NMAD by default, exact). Returns ``z`` (the kind of ``dvalues``,
    lazy for dask) and the rescaled error function (``spread * unscaled_error_fun``), as upstream.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> x = rng.uniform(1, 3, 5000)
    >>> z, fun = two_step_standardization(rng.normal(size=5000) * 2 * x, [x], lambda v: v[0])
    >>> round(nmad(z), 6), bool(abs(float(fun((np.array(1.0),))) / 2 - 1) < 0.05)
    (1.0, True)
    """
    spread = _spread(spread_statistic)
    field = as_field(dvalues)
    err = as_field(unscaled_error_fun(tuple(list_var)), "the error function's values")
    z = field.data / (err.data if field.is_numpy or not err.is_numpy else da.from_array(err.data, chunks=-1))
    if fac_spread_outliers is not None:
        limit = float(fac_spread_outliers) * spread(z)
        z = np.where(np.abs(z) > limit, np.nan, z) if isinstance(z, np.ndarray) else da.where(abs(z) > limit, np.nan, z)
    scale = spread(z)
    if not (np.isfinite(scale) and scale > 0):
        raise InputError("the standardised values have no spread (all NaN or constant); check dvalues and the masks")
    z = z / scale
    if isinstance(unscaled_error_fun, BinnedFunction):
        return field.like(z), unscaled_error_fun.scaled(scale)

    def error_fun(*args: Any) -> Any:
        return scale * unscaled_error_fun(*args)

    return field.like(z), error_fun


def estimate_model_heteroscedasticity(
    dvalues: object,
    list_var: Sequence[object],
    list_var_names: Sequence[str],
    spread_statistic: Callable[..., Any] = nmad,
    list_var_bins: int | Sequence[int | Sequence[float]] | None = None,
    min_count: int | None = 100,
    fac_spread_outliers: float | None = 7,
) -> tuple[pd.DataFrame, Callable[..., Any]]:
    """Binned spread of ``dvalues`` by the variables and the error function fitted to it.

    :func:`~xdem.spatialstats.nd_binning` with ``spread_statistic`` (``list_var_bins``: 10
    equal-width bins by default), :func:`interp_nd_binning` (bins under ``min_count`` values
    filled from their neighbours), then :func:`two_step_standardization`. Returns
    ``(df, error_function)`` (upstream's ``_estimate_model_heteroscedasticity``).
    """
    names = list(list_var_names)
    _spread(spread_statistic)  # refuse an unknown statistic before any pass
    values = as_field(dvalues).data
    variables = [as_field(v, "an explanatory variable").data for v in list_var]
    df = nd_binning(values, variables, names, list_var_bins=list_var_bins, statistics=[spread_statistic])
    fun = interp_nd_binning(df, names, statistic=_stat_name(spread_statistic), min_count=min_count)
    final = two_step_standardization(dvalues, list_var, fun, spread_statistic=spread_statistic,
                                     fac_spread_outliers=fac_spread_outliers)[1]
    return df, final


def infer_heteroscedasticity_from_stable(
    dvalues: object,
    list_var: Sequence[object],
    stable_mask: object = None,
    unstable_mask: object = None,
    list_var_names: Sequence[str] | None = None,
    spread_statistic: Callable[..., Any] = nmad,
    list_var_bins: int | Sequence[int | Sequence[float]] | None = None,
    min_count: int | None = 100,
    fac_spread_outliers: float | None = 7,
) -> tuple[Any, pd.DataFrame, Callable[..., Any]]:
    """Error map, binned spread and error function of ``dvalues`` from its stable terrain.

    Parameters
    ----------
    dvalues
        Differences whose signal is zero on stable terrain (dh), 2-D: numpy, dask, DataArray
        or :class:`xdem.DEM`.
    list_var
        Explanatory variables on the grid of ``dvalues`` (e.g. slope and maximum curvature).
    stable_mask, unstable_mask
        Stable terrain to use and unstable terrain to leave out (e.g. glacier outlines): boolean
        arrays, or for a georeferenced ``dvalues`` also vector files, GeoDataFrames, geoutils
        Vectors or rasters (:func:`xdem.masks.stable_mask_like`); ``None``: all terrain.
    list_var_names
        Names of the variables (default ``var1, var2, ...``).
    spread_statistic, list_var_bins, min_count, fac_spread_outliers
        As :func:`estimate_model_heteroscedasticity`.

    Returns
    -------
    errors
        The error (1 sigma) of every pixel from its variables, the kind of ``dvalues`` (lazy for
        dask: the fitted function mapped block by block).
    df
        The binned spread (upstream's :func:`~xdem.spatialstats.nd_binning` layout).
    error_function
        Call it with a tuple of the variables' values.
    """
    names = list(list_var_names) if list_var_names is not None else [f"var{i + 1}" for i in range(len(list_var))]
    if len(names) != len(list_var) or not names:
        raise InputError(f"give one name per explanatory variable: {len(list_var)} variables, {len(names)} names")
    field = as_field(dvalues)
    stable = stable_values(field, stable_mask, unstable_mask)
    variables = [as_field(v, "an explanatory variable").data for v in list_var]
    df, fun = estimate_model_heteroscedasticity(stable, variables, names, spread_statistic=spread_statistic,
                                                list_var_bins=list_var_bins, min_count=min_count,
                                                fac_spread_outliers=fac_spread_outliers)
    errors = fun(tuple(list_var))
    if field.is_numpy or not isinstance(errors, np.ndarray):
        return (errors if field.grid is None else field.like(as_field(errors).data)), df, fun
    return field.like(da.from_array(errors, chunks=chunks_of(field.data))), df, fun
