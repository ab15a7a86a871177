"""Plots of :func:`xdem.spatialstats.nd_binning` tables and of variograms (:func:`plot_variogram`), called
as upstream xdem 0.2.3 calls them.

:func:`plot_1d_binning` draws the sample count of each bin above the statistic at the bin
centres; :func:`plot_2d_binning` draws the statistic on the grid of two variables, with the
count along each. Both draw on ``ax`` (a new figure by default), hide statistics of bins with
fewer than ``min_count`` samples, save to ``out_fname`` if given and return ``None``, as
upstream. Interval columns read back from CSV (strings such as ``"[0.0, 5.0)"``) are accepted.

Examples
--------
>>> import matplotlib; matplotlib.use("Agg")
>>> import numpy as np
>>> from xdem.spatialstats import nd_binning, plot_1d_binning
>>> df = nd_binning(np.arange(100.0), [np.arange(100.0)], ["slope"], list_var_bins=5)
>>> plot_1d_binning(df, "slope", "nmad", min_count=1)
"""

from __future__ import annotations

import re
from collections.abc import Callable

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.colors import Colormap
from matplotlib.figure import Figure

from xdem.errors import InputError

__all__ = ["plot_1d_binning", "plot_2d_binning", "plot_variogram"]

_INTERVAL = re.compile(r"^\s*([\[(])\s*([^,]+),\s*([^\])]+)([\])])\s*$")


def _interval(x: object) -> pd.Interval:
    if isinstance(x, pd.Interval):
        return x
    m = _INTERVAL.match(str(x))
    if m is None:
        raise InputError(f"binning column value {x!r} is neither a pandas.Interval nor a string such as '[0, 5)'")
    left, right = m.group(1) == "[", m.group(4) == "]"
    closed = "both" if left and right else "left" if left else "right" if right else "neither"
    return pd.Interval(float(m.group(2)), float(m.group(3)), closed=closed)


def _subset(df: pd.DataFrame, names: list[str], statistic: str, nd: int, min_count: int) -> pd.DataFrame:
    for col in [*names, statistic, "count", "nd"]:
        if col not in df.columns:
            raise InputError(f"column {col!r} is not in the binning table (columns: {', '.join(map(str, df.columns))})")
    sub = df[df["nd"] == nd].copy()
    for name in names:
        sub = sub[sub[name].notna()]  # the 1-D rows of the other variables
        sub[name] = [_interval(x) for x in sub[name]]
        sub = sub[[np.isfinite(iv.mid) for iv in sub[name]]]
    sub.loc[sub["count"] < min_count, statistic] = np.nan
    return sub


def _axes(ax: Axes | None, figsize: tuple[float, float] | None = None) -> Axes:
    if ax is None:
        return plt.figure(figsize=figsize).add_subplot(111)
    if not isinstance(ax, Axes):
        raise InputError(f"ax must be a matplotlib Axes or None, got a {type(ax).__name__}")
    return ax


def _save(ax: Axes, out_fname: str | None) -> None:
    if out_fname is not None:
        fig = ax.figure
        (fig if isinstance(fig, Figure) else fig.figure).savefig(out_fname)


def _count_bars(ax: Axes, intervals: list[pd.Interval], counts: np.ndarray, vertical: bool = False) -> None:
    for iv, c in zip(intervals, counts, strict=True):
        if vertical:
            ax.fill_betweenx([iv.left, iv.right], 0, c, color="0.6", edgecolor="white", linewidth=0.5)
        else:
            ax.fill_between([iv.left, iv.right], 0, c, color="0.6", edgecolor="white", linewidth=0.5)


def plot_1d_binning(
    df: pd.DataFrame,
    var_name: str,
    statistic_name: str,
    label_var: str | None = None,
    label_statistic: str | None = None,
    min_count: int = 30,
    ax: Axes | None = None,
    out_fname: str | None = None,
) -> None:
    """Plot a statistic and the sample count along one binning variable of an ``nd_binning`` table.

    Parameters
    ----------
    df
        Output of :func:`xdem.spatialstats.nd_binning` (its 1-D rows are used).
    var_name, statistic_name
        Columns of the variable and of the statistic.
    label_var, label_statistic
        Axis labels (default: the column names).
    min_count
        Bins with fewer samples have their statistic hidden.
    ax
        Axes to draw in (default: a new figure).
    out_fname
        File to save the figure to.
    """
    sub = _subset(df, [var_name], statistic_name, 1, min_count)
    ax = _axes(ax)
    ax.axis("off")
    top, bottom = ax.inset_axes((0.0, 0.72, 1.0, 0.28)), ax.inset_axes((0.0, 0.0, 1.0, 0.65))
    intervals = list(sub[var_name])
    _count_bars(top, intervals, sub["count"].to_numpy())
    top.set_ylabel("Sample count")
    top.set_xticks([])
    bottom.scatter([iv.mid for iv in intervals], sub[statistic_name], marker="x")
    bottom.set_xlabel(label_var or var_name)
    bottom.set_ylabel(label_statistic or statistic_name)
    if intervals:
        for a in (top, bottom):
            a.set_xlim(min(iv.left for iv in intervals), max(iv.right for iv in intervals))
    _save(ax, out_fname)


def plot_2d_binning(
    df: pd.DataFrame,
    var_name_1: str,
    var_name_2: str,
    statistic_name: str,
    label_var_name_1: str | None = None,
    label_var_name_2: str | None = None,
    label_statistic: str | None = None,
    cmap: Colormap | str = "Reds",
    min_count: int = 30,
    scale_var_1: str = "linear",
    scale_var_2: str = "linear",
    vmin: float | None = None,
    vmax: float | None = None,
    nodata_color: str | tuple[float, float, float, float] = "yellow",
    ax: Axes | None = None,
    out_fname: str | None = None,
) -> None:
    """Plot a statistic on the grid of two binning variables of an ``nd_binning`` table, with counts.

    Parameters are upstream's: the two variables and the statistic (columns of ``df``), their
    labels, the colormap and its range (``vmin``, ``vmax``), the axis scales, the colour of
    bins without a value (``nodata_color``), ``min_count``, ``ax`` and ``out_fname``.
    """
    sub = _subset(df, [var_name_1, var_name_2], statistic_name, 2, min_count)
    ax = _axes(ax, figsize=(8, 6))
    ax.axis("off")
    top, main = ax.inset_axes((0.0, 0.75, 0.7, 0.25)), ax.inset_axes((0.0, 0.0, 0.7, 0.7))
    right = ax.inset_axes((0.75, 0.0, 0.25, 0.7))
    iv1 = sorted(set(sub[var_name_1]), key=lambda iv: iv.left)
    iv2 = sorted(set(sub[var_name_2]), key=lambda iv: iv.left)
    grid = np.full((len(iv2), len(iv1)), np.nan)
    counts1, counts2 = np.zeros(len(iv1)), np.zeros(len(iv2))
    for a, b, value, count in zip(sub[var_name_1], sub[var_name_2], sub[statistic_name], sub["count"], strict=True):
        i, j = iv1.index(a), iv2.index(b)
        grid[j, i] = value
        counts1[i] += np.nan_to_num(count)
        counts2[j] += np.nan_to_num(count)
    _count_bars(top, iv1, counts1)
    _count_bars(right, iv2, counts2, vertical=True)
    top.set_ylabel("Sample count")
    right.set_xlabel("Sample count")
    edges1 = [iv.left for iv in iv1] + [iv1[-1].right] if iv1 else [0.0, 1.0]
    edges2 = [iv.left for iv in iv2] + [iv2[-1].right] if iv2 else [0.0, 1.0]
    main.set_facecolor(nodata_color)
    mesh = main.pcolormesh(edges1, edges2, np.ma.masked_invalid(grid), cmap=cmap, vmin=vmin, vmax=vmax)
    main.set_xscale(scale_var_1)
    main.set_yscale(scale_var_2)
    main.set_xlabel(label_var_name_1 or var_name_1)
    main.set_ylabel(label_var_name_2 or var_name_2)
    top.set_xscale(scale_var_1)
    right.set_yscale(scale_var_2)
    top.set_xlim(edges1[0], edges1[-1])
    right.set_ylim(edges2[0], edges2[-1])
    top.tick_params(labelbottom=False)  # the main grid's axes label them
    right.tick_params(labelleft=False)
    cax = ax.inset_axes((0.75, 0.85, 0.25, 0.05))
    ax.figure.colorbar(mesh, cax=cax, orientation="horizontal", label=label_statistic or statistic_name)
    _save(ax, out_fname)


def _lag_edges(df: pd.DataFrame) -> np.ndarray:
    col = "lags" if "lags" in df.columns else "bins"
    for c in (col, "exp", "count"):
        if c not in df.columns:
            raise InputError(f"column {c!r} is not in the empirical variogram (columns: {', '.join(map(str, df.columns))})")
    return np.asarray(df[col], dtype=np.float64)


def plot_variogram(
    df: pd.DataFrame,
    list_fit_fun: list[Callable[[np.ndarray], np.ndarray]] | None = None,
    list_fit_fun_label: list[str] | None = None,
    ax: Axes | None = None,
    xscale: str = "linear",
    xscale_range_split: list[float] | None = None,
    xlabel: str | None = None,
    ylabel: str | None = None,
    xlim: tuple[float, float] | None = None,
    ylim: tuple[float, float] | None = None,
    out_fname: str | None = None,
) -> None:
    """Empirical variogram (``exp`` at the lag classes' centres, with ``err_exp`` when several
    variograms were averaged) under the pair count of each class, and fitted models, as upstream.

    ``xscale_range_split``: lags at which to cut the x axis into panels of their own scale.

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> df = pd.DataFrame({"bins": [10.0, 20.0, 40.0], "exp": [0.5, 0.8, 1.0], "count": [5, 9, 20]})
    >>> plot_variogram(df, [lambda h: np.minimum(h / 40, 1.0)], xscale_range_split=[20.0])
    """
    edges = _lag_edges(df)
    exp = np.asarray(df["exp"], dtype=np.float64)
    err = np.asarray(df["err_exp"], dtype=np.float64) if "err_exp" in df.columns else np.full(len(df), np.nan)
    lower = np.r_[0.0, edges[:-1]]
    centres = (lower + edges) / 2
    first = float(np.min(edges)) / 2 if xscale == "log" else 0.0
    splits = [first] + [float(v) for v in (xscale_range_split or []) if first < v < edges.max()] + [float(edges.max())]
    ax = _axes(ax)
    ax.axis("off")
    n = len(splits) - 1
    for k in range(n):
        w = 1.0 / n
        top = ax.inset_axes((k * w, 0.78, 0.94 * w, 0.22))
        bottom = ax.inset_axes((k * w, 0.0, 0.94 * w, 0.72))
        top.bar(lower, np.asarray(df["count"], dtype=np.float64), width=edges - lower, align="edge",
                color="0.6", edgecolor="white")
        if np.isnan(err).all():
            bottom.scatter(centres, exp, marker="x", label="Empirical variogram")
        else:
            bottom.errorbar(centres, exp, yerr=err, fmt="x", label="Empirical variogram (1-sigma spread)")
        h = np.linspace(splits[k], splits[k + 1], 500)
        for i, fun in enumerate(list_fit_fun or []):
            label = list_fit_fun_label[i] if list_fit_fun_label else ("Model fit" if i == 0 else None)
            bottom.plot(h, fun(h), linestyle="dashed", label=label)
        for a in (top, bottom):
            a.set_xscale(xscale)
            a.set_xlim(xlim if xlim is not None else (splits[k], splits[k + 1]))
        top.set_xticks([])
        bottom.set_ylim(ylim if ylim is not None else (0, 1.05 * np.nanmax(exp + np.nan_to_num(err))))
        if k == 0:
            top.set_ylabel("Pair count")
            bottom.set_ylabel(ylabel or "Variance")
        else:
            top.set_yticks([])
            bottom.set_yticks([])
        if k == n // 2:
            bottom.set_xlabel(xlabel or "Spatial lag (m)")
        if k == n - 1:
            bottom.legend(loc="lower right")
    _save(ax, out_fname)
