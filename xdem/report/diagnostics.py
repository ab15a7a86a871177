"""The report's diagnostic figures of issue 17, from small arrays (decimated maps, the
subsample, the exact slope-class tables): dh over a hillshade on ONE shared colour scale,
NMAD and median by slope class, dh against elevation, the CDF of ``|dh|`` and row/column profiles.

Colour convention of every dh map: negative (tba below ref, e.g. thinning) red, positive blue
(:data:`xdem.report.figures.DH_CMAP`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from xdem.kernels.robust import nmad
from xdem.report.figures import (
    _AFTER,
    _BEFORE,
    AFTER_AXIS_RATIO,
    _dh_cmap,
    _empty,
    _hillshade,
    draw_voids,
    merged_legend,
    own_axis,
    sample_n,
    symmetric_limit,
    to_png_base64,
)
from xdem.report.html import fmt_float

if TYPE_CHECKING:  # annotations only: pandas is not imported to draw
    import pandas as pd
    from matplotlib.axes import Axes

__all__ = ["shared_scale_figure", "slope_class_figure", "elevation_figure", "cdf_figure", "profiles_figure",
           "binned_by"]

_COLOURS = {"before": _BEFORE, "after": _AFTER}
_TITLES = {"before": "dh before = tba − ref", "after": "dh after = aligned − ref"}


def shared_scale_figure(maps: Mapping[str, np.ndarray], *, extent: Sequence[float], crs: str, units: str,
                        limit: float, stable_map: np.ndarray | None = None) -> str:
    """dh before and after over a hillshade of REF on ONE colour scale, symmetric at ``limit``
    (the report passes the 98th percentile of ``|dh|`` before), so that the two panels compare
    directly; the mask outline (0.5 contour of ``stable_map``) in black."""
    names = [n for n in ("before", "after") if n in maps]
    fig = Figure(figsize=(5.4 * max(len(names), 1) + 0.8, 4.6), layout="constrained")
    axes = fig.subplots(1, max(len(names), 1), squeeze=False)[0]
    left, right, bottom, top = (float(v) for v in extent)
    ref = maps.get("ref")
    shade = None
    if ref is not None and np.isfinite(ref).any():
        ny, nx = ref.shape
        shade = _hillshade(ref, (right - left) / max(nx, 1), (top - bottom) / max(ny, 1))
    norm = TwoSlopeNorm(vcenter=0.0, vmin=-limit, vmax=limit)
    im = None
    for ax, name in zip(axes, names):
        arr = maps[name]
        title = f"{_TITLES[name]}, shared scale ±{fmt_float(limit, sig=3)} {units}"
        if not np.isfinite(arr).any():
            _empty(ax, title)
            continue
        if shade is not None:
            ax.imshow(shade, extent=(left, right, bottom, top), cmap="gray", origin="upper", interpolation="nearest")
        im = ax.imshow(arr, extent=(left, right, bottom, top), cmap=_dh_cmap(), norm=norm,
                       alpha=0.75 if shade is not None else 1.0, interpolation="nearest", origin="upper")
        draw_voids(ax, arr, extent=extent)  # opaque, over the hillshade: a void never reads as dh = 0
        if stable_map is not None and np.nanmin(stable_map) < 0.5 < np.nanmax(stable_map):
            ax.contour(stable_map, levels=[0.5], colors="k", linewidths=0.9, extent=(left, right, bottom, top),
                       origin="upper")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(f"Easting ({units}), {crs}", fontsize=8)
        ax.set_ylabel(f"Northing ({units}), {crs}", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(4))
        ax.ticklabel_format(useOffset=False, style="plain")
    if im is not None:
        cb = fig.colorbar(im, ax=list(axes), shrink=0.85, extend="both")
        cb.set_label(f"dh ({units}): negative red, positive blue", fontsize=8)
    return to_png_base64(fig)


def slope_class_figure(tables: Mapping[str, pd.DataFrame | None], *, units: str, exact: bool = True) -> str:
    """NMAD and median of dh by slope class, before and after (the report's tables: exact, from
    :func:`xdem.spatialstats.stats_by_slope_class`, or on its subsample when not ``exact``); the
    "after" curve on its own right axis when the shared one would flatten it (:func:`own_axis`)."""
    fig = Figure(figsize=(11.0, 3.8), layout="constrained")
    axes = fig.subplots(1, 2)
    curves: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {"nmad": {}, "median": {}}
    for name, df in tables.items():
        if df is None or not len(df):
            continue
        centres = 0.5 * (np.asarray(df["slope_lower"], float) + np.asarray(df["slope_upper"], float))
        for col in curves:
            if col in df:
                curves[col][name] = (centres, np.asarray(df[col], float))
    if not any(curves.values()):
        _empty(axes[0], "NMAD of dh by slope class")
        _empty(axes[1], "median of dh by slope class")
        return to_png_base64(fig)
    for ax, (col, what) in zip(axes, (("nmad", "NMAD"), ("median", "median"))):
        drawn = curves[col]
        twin = None
        if "after" in drawn:
            twin = own_axis(ax, [drawn["before"][1]] if "before" in drawn else [], [drawn["after"][1]],
                            what=f"{what} of dh ({units})")
        for name, (x, y) in drawn.items():
            target = twin if name == "after" and twin is not None else ax
            target.plot(x, y, "o-", color=_COLOURS.get(name, "k"), label=name, ms=4)
        ax.axhline(0.0, color="k", lw=0.6)
        ax.set_xlabel("Slope of the reference (degrees, class centre)", fontsize=8)
        ax.set_ylabel(f"{what} of dh ({units})", fontsize=8)
        how = "exact" if exact else "sampled: n per class = sample_count"
        ax.set_title(f"{what} of dh by slope class ({how})", fontsize=10)
        ax.tick_params(labelsize=7)
        merged_legend(ax, twin, fontsize=8)
    return to_png_base64(fig)


def binned_by(x: np.ndarray, y: np.ndarray, *, nbins: int = 20, min_count: int = 20) -> dict[str, np.ndarray]:
    """Median and NMAD of ``y`` in ``nbins`` equal-count bins of ``x`` (bins with fewer than
    ``min_count`` values dropped): ``{"x", "median", "nmad", "count"}``.

    Examples
    --------
    >>> b = binned_by(np.arange(1000.0), np.ones(1000), nbins=4)
    >>> b["median"].tolist(), b["count"].tolist()
    ([1.0, 1.0, 1.0, 1.0], [250, 250, 250, 250])
    """
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    out: dict[str, list[float]] = {"x": [], "median": [], "nmad": [], "count": []}
    if x.size == 0:
        return {k: np.array(v, dtype=float) for k, v in out.items()}
    edges = np.unique(np.quantile(x, np.linspace(0, 1, nbins + 1)))
    idx = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(edges) - 2)
    for i in range(len(edges) - 1):
        sel = idx == i
        if sel.sum() < min_count:
            continue
        out["x"].append(float(np.median(x[sel])))
        out["median"].append(float(np.median(y[sel])))
        out["nmad"].append(float(nmad(y[sel])))
        out["count"].append(int(sel.sum()))
    return {k: np.array(v, dtype=float if k != "count" else int) for k, v in out.items()}


def elevation_figure(sample: Mapping[str, np.ndarray], *, units: str) -> str:
    """dh against the reference elevation (hypsometric bias): median (line) and median ± NMAD
    (band) in equal-count elevation bins of the subsample, before and after."""
    fig = Figure(figsize=(7.5, 3.8), layout="constrained")
    ax = fig.subplots()
    elev = sample.get("elevation")
    binned = {n: binned_by(np.asarray(elev, float), np.asarray(sample[n], float)) for n in ("before", "after")
              if elev is not None and n in sample}
    binned = {n: b for n, b in binned.items() if b["x"].size}
    bands = {n: (b["median"] - b["nmad"], b["median"] + b["nmad"]) for n, b in binned.items()}
    axes = {"before": ax}
    if "after" in binned:
        axes["after"] = own_axis(ax, list(bands.get("before", ())), list(bands["after"]), what=f"dh ({units})")
    drawn = bool(binned)
    for name, b in binned.items():
        c, a = _COLOURS[name], axes[name]
        a.plot(b["x"], b["median"], "o-", color=c, ms=3, label=f"{name}: median")
        a.fill_between(b["x"], *bands[name], color=c, alpha=0.2 if name == "before" else 0.12,
                       label=f"{name}: median ± NMAD")
    if not drawn:
        _empty(ax, "dh against elevation")
        return to_png_base64(fig)
    ax.axhline(0.0, color="k", lw=0.6)
    ax.set_xlabel(f"Elevation of the reference ({units}), bins of equal pixel count", fontsize=8)
    ax.set_ylabel(f"dh ({units})", fontsize=8)
    ax.set_title(f"dh against elevation (a trend is a hypsometric bias), n = {sample_n(sample)}", fontsize=10)
    ax.tick_params(labelsize=7)
    merged_legend(ax, axes.get("after"), fontsize=7)
    return to_png_base64(fig)


def cdf_figure(sample: Mapping[str, np.ndarray], *, units: str) -> str:
    """Cumulative distribution of ``|dh|`` before and after, with the LE90 (90 % quantile) marked;
    "after" on its own x axis (top) when the shared one would squeeze it against zero (its 99.5th
    percentile more than :data:`~xdem.report.figures.AFTER_AXIS_RATIO` times smaller)."""
    fig = Figure(figsize=(7.5, 3.8), layout="constrained")
    ax = fig.subplots()
    series = {n: np.sort(np.abs(np.asarray(sample[n], float)[np.isfinite(sample[n])])) for n in ("before", "after")
              if n in sample}
    series = {n: v for n, v in series.items() if v.size}
    if not series:
        _empty(ax, "CDF of |dh|")
        return to_png_base64(fig)
    hi = symmetric_limit(*series.values(), q=99.5)
    hi_after = symmetric_limit(series["after"], q=99.5) if "after" in series else hi
    top = None
    if len(series) == 2 and hi > AFTER_AXIS_RATIO * hi_after:
        top = ax.twiny()
        top.set_xlim(0, hi_after)
        top.set_xlabel(f"|dh| after ({units}), top axis, own scale", fontsize=8, color=_AFTER)
        top.tick_params(axis="x", labelsize=7, colors=_AFTER)
    for name, v in series.items():
        target = top if name == "after" and top is not None else ax
        p = np.arange(1, v.size + 1) / v.size
        step = max(1, v.size // 2000)  # a few thousand points draw the curve
        le90 = fmt_float(float(np.quantile(v, 0.9)), sig=3)
        target.plot(v[::step], p[::step], color=_COLOURS[name], label=f"{name} (LE90 {le90} {units})")
        target.axvline(float(np.quantile(v, 0.9)), color=_COLOURS[name], ls="--", lw=0.8)
    ax.axhline(0.9, color="k", lw=0.5, ls=":")
    ax.set_xlim(0, hi)
    ax.set_ylim(0, 1)
    ax.set_xlabel(f"|dh| ({units})", fontsize=8)
    ax.set_ylabel("Fraction of sampled pixels", fontsize=8)
    ax.set_title(f"Cumulative distribution of |dh| (dashed: LE90), n = {sample_n(sample)}", fontsize=10)
    ax.tick_params(labelsize=7)
    handles, labels = ax.get_legend_handles_labels()
    if top is not None:
        h2, l2 = top.get_legend_handles_labels()
        handles, labels = handles + h2, labels + [f"{t}, top axis" for t in l2]
    ax.legend(handles, labels, fontsize=8, loc="lower right")
    return to_png_base64(fig)


def profiles_figure(maps: Mapping[str, np.ndarray], *, extent: Sequence[float], units: str,
                    stable_map: np.ndarray | None = None) -> str:
    """Median of dh along each row (against northing) and each column (against easting) of the
    decimated maps, stable cells only when a mask is given: a trend is a tilt or an along-track
    bias."""
    left, right, bottom, top = (float(v) for v in extent)
    fig = Figure(figsize=(11.0, 3.8), layout="constrained")
    axes = fig.subplots(1, 2)
    profiles: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    for name in ("before", "after"):
        if name not in maps:
            continue
        arr = np.array(maps[name], dtype=float)
        if stable_map is not None:
            arr[~(stable_map >= 0.5)] = np.nan
        if not np.isfinite(arr).any():
            continue
        ny, nx = arr.shape
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows/columns: NaN in the profile
            rows = np.nanmedian(arr, axis=1)
            cols = np.nanmedian(arr, axis=0)
        ys = top - (np.arange(ny) + 0.5) * (top - bottom) / ny
        xs = left + (np.arange(nx) + 0.5) * (right - left) / nx
        profiles[name] = (xs, cols, ys, rows)
    drawn = bool(profiles)
    twins: list[Axes | None] = [None, None]
    for i, ax in enumerate(axes):
        if "after" in profiles:
            twins[i] = own_axis(ax, [profiles["before"][2 * i + 1]] if "before" in profiles else [],
                                [profiles["after"][2 * i + 1]], what=f"dh ({units})")
        for name, p in profiles.items():
            twin = twins[i]
            target = twin if name == "after" and twin is not None else ax
            target.plot(p[2 * i], p[2 * i + 1], color=_COLOURS[name], lw=1 if name == "before" else 0.7,
                        alpha=1.0 if name == "before" else 0.75, label=name)
    if not drawn:
        _empty(axes[0], "column profile of dh")
        _empty(axes[1], "row profile of dh")
        return to_png_base64(fig)
    for ax, twin, what in zip(axes, twins, ("Easting (median of each column)", "Northing (median of each row)")):
        ax.axhline(0.0, color="k", lw=0.6)
        ax.set_xlabel(f"{what}, {units}", fontsize=8)
        ax.set_ylabel(f"dh ({units})", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.ticklabel_format(axis="x", useOffset=False, style="plain")
        merged_legend(ax, twin, fontsize=8)
    axes[0].set_title("Column profile of dh", fontsize=10)
    axes[1].set_title("Row profile of dh", fontsize=10)
    return to_png_base64(fig)

