"""Matplotlib figures of the report, rendered to base64 PNG (no pyplot, no global state).

Every function takes small numpy arrays (decimated maps or a subsample) and returns the
PNG as a base64 string. Empty or all-NaN inputs give a panel saying "no valid data".
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import Colormap, ListedColormap, Normalize, TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from xdem.kernels.robust import bin_index
from xdem.report.html import fmt_float

if TYPE_CHECKING:  # annotations only
    from xdem.typing import JSONDict

__all__ = ["to_png_base64", "maps_figure", "build_maps_figure", "inside_maps_figure", "build_inside_maps_figure",
           "histogram_figure", "nuth_kaab_figure", "history_figure", "symmetric_limit", "draw_voids", "VOID_COLOUR",
           "VOID_LABEL", "own_axis", "AFTER_AXIS_RATIO", "merged_legend", "sample_n", "inside_scale"]

DPI = 100
NO_DATA = "no valid data"
#: Colormap of dh: negative (thinning, tba below ref) red, positive blue, as in glaciology
#: and the project's gallery.
DH_CMAP = "RdBu"
_BEFORE, _AFTER = "#c0392b", "#2471a3"
#: Colour of voids (no data) on every map: a mid grey, hatched, that no colormap of the report
#: uses (``RdBu`` is near-white at dh = 0, so a transparent or white void would read as dh = 0).
VOID_COLOUR = "#8c8c8c"
VOID_HATCH = "////"
VOID_LABEL = "void (no data)"
#: An "after" curve gets its own y axis when the span of the shared axis exceeds this many
#: times the span of the "after" values (it would be drawn flat).
AFTER_AXIS_RATIO = 5.0


def to_png_base64(fig: Figure) -> str:
    """PNG bytes of ``fig``, base64-encoded (ASCII)."""
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _empty(ax: Axes, title: str) -> None:
    ax.set_title(title, fontsize=10)
    ax.text(0.5, 0.5, NO_DATA, ha="center", va="center", transform=ax.transAxes, fontsize=12, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def symmetric_limit(*arrays: np.ndarray, q: float = 98.0, floor: float = 1e-3) -> float:
    """Symmetric colour/axis limit: the ``q``-th percentile of ``|values|`` (finite only)."""
    vals = [np.abs(a[np.isfinite(a)]) for a in arrays if a is not None]
    vals = [v for v in vals if v.size]
    if not vals:
        return 1.0
    lim = float(np.percentile(np.concatenate(vals), q))
    return max(lim, floor)


def draw_voids(ax: Axes, arr: np.ndarray, *, extent: Sequence[float], where: np.ndarray | None = None) -> bool:
    """Draw the non-finite cells of ``arr`` (restricted to ``where`` if given) in
    :data:`VOID_COLOUR`, hatched, on top of ``ax``, with a legend entry :data:`VOID_LABEL`.
    Returns whether there was any void."""
    void = ~np.isfinite(arr)
    if where is not None:
        void &= where
    if not void.any():
        return False
    layer = np.ma.masked_where(~void, np.ones(arr.shape))
    left, right, bottom, top = (float(v) for v in extent)
    ax.imshow(layer, extent=(left, right, bottom, top), cmap=ListedColormap([VOID_COLOUR]), vmin=0.0, vmax=1.0,
              interpolation="nearest", origin="upper", zorder=3)
    ax.contourf(np.pad(void, 1).astype(float), levels=[0.5, 1.5], colors="none", hatches=[VOID_HATCH],
                extent=_padded_extent(extent, arr.shape), origin="upper", zorder=4)
    ax.legend(handles=[Patch(facecolor=VOID_COLOUR, edgecolor="0.2", hatch=VOID_HATCH, label=VOID_LABEL)],
              loc="lower right", fontsize=7, framealpha=0.9)
    return True


def _padded_extent(extent: Sequence[float], shape: tuple[int, ...]) -> tuple[float, float, float, float]:
    """Extent of an array padded by one cell on each side (contours of a mask reach the border)."""
    left, right, bottom, top = (float(v) for v in extent)
    dx, dy = (right - left) / max(shape[1], 1), (top - bottom) / max(shape[0], 1)
    return left - dx, right + dx, bottom - dy, top + dy


def _span(*arrays: np.ndarray) -> float:
    lo, hi = _range(*arrays)
    return hi - lo


def own_axis(ax: Axes, before: Sequence[np.ndarray], after: Sequence[np.ndarray], *, what: str) -> Axes:
    """The axis to draw the "after" curves on: ``ax`` itself, or a twin y axis on the right
    (labelled ``what`` and coloured as "after", its zero dotted in that colour) when the shared
    axis would span more than :data:`AFTER_AXIS_RATIO` times the "after" values
    (``before``/``after``: the values each draws, bands included)."""
    shared, own = _span(*before, *after), _span(*after)
    if not before or shared <= AFTER_AXIS_RATIO * max(own, 1e-12) or own == 0.0:
        return ax
    twin = ax.twinx()
    ax.set_zorder(twin.get_zorder() + 1)  # "before" drawn over "after", legend on top
    ax.patch.set_visible(False)
    twin.set_ylabel(f"{what}, after (right axis, own scale)", fontsize=8, color=_AFTER)
    twin.tick_params(axis="y", labelsize=7, colors=_AFTER)
    lo, hi = _range(*after)
    if lo <= 0.0 <= hi:  # where "after" is zero, on its own axis (the black line is zero of the left one)
        twin.axhline(0.0, color=_AFTER, lw=0.8, ls=":")
    return twin


def _range(*arrays: np.ndarray) -> tuple[float, float]:
    vals = [np.asarray(a, dtype=float).ravel() for a in arrays if a is not None]
    allv = np.concatenate(vals) if vals else np.empty(0)
    allv = allv[np.isfinite(allv)]
    return (float(allv.min()), float(allv.max())) if allv.size else (0.0, 0.0)


def merged_legend(ax: Axes, twin: Axes | None = None, *, fontsize: float = 8.0) -> None:
    """One legend on ``ax`` for its artists and those of its twin axis (if any, and not ``ax``)."""
    handles, labels = ax.get_legend_handles_labels()
    if twin is not None and twin is not ax:
        h2, l2 = twin.get_legend_handles_labels()
        handles, labels = handles + h2, labels + [f"{t} (right axis)" for t in l2]
    if handles:
        ax.legend(handles, labels, fontsize=fontsize)


def sample_n(sample: Mapping[str, np.ndarray]) -> int:
    """Pixels of a subsample where every dh (``before``, ``after``) that has any finite value is
    finite: the report's subsample is drawn where both are (the same pixels before and after), so
    this is its size; an all-void "after" does not make it zero."""
    series = [np.isfinite(np.asarray(sample[n], dtype=float)) for n in ("before", "after") if n in sample]
    series = [f for f in series if f.any()]
    return int(np.logical_and.reduce(series).sum()) if series else 0


def maps_figure(maps: dict[str, np.ndarray], *, extent: Sequence[float], crs: str, units: str, factor: int,
                limits: dict[str, float] | None = None, stable_map: np.ndarray | None = None,
                from_overviews: bool = False) -> str:
    """:func:`build_maps_figure` as base64 PNG."""
    return to_png_base64(build_maps_figure(maps, extent=extent, crs=crs, units=units, factor=factor, limits=limits,
                                           stable_map=stable_map, from_overviews=from_overviews))


def _dh_cmap(name: str = DH_CMAP) -> Colormap:
    """``name`` with non-finite values in :data:`VOID_COLOUR` (never white, i.e. never like dh = 0)."""
    from matplotlib import colormaps

    return colormaps[name].with_extremes(bad=VOID_COLOUR)


def _map_axes(ax: Axes, *, title: str, units: str, crs: str) -> None:
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(f"Easting ({units}), {crs}", fontsize=8)
    ax.set_ylabel(f"Northing ({units}), {crs}", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.xaxis.set_major_locator(MaxNLocator(4))
    ax.yaxis.set_major_locator(MaxNLocator(5))
    ax.ticklabel_format(useOffset=False, style="plain")


def build_maps_figure(
    maps: dict[str, np.ndarray],
    *,
    extent: Sequence[float],
    crs: str,
    units: str,
    factor: int,
    limits: dict[str, float] | None = None,
    stable_map: np.ndarray | None = None,
    from_overviews: bool = False,
) -> Figure:
    """Reference elevation and dh before/after on the reference grid, decimated ``factor`` times
    (block means, or the files' overviews when ``from_overviews``: the title says which).

    Each dh panel (colormap :data:`DH_CMAP`: negative red, positive blue) has a colour scale
    centred on zero, symmetric at ``limits[name]`` (the report passes the 98th percentile of
    ``|dh|`` on stable pixels), else at the 98th percentile of the map's ``|dh|`` (read the
    colour bars: after a good fit the "after" scale is much smaller). ``stable_map``, the
    fraction of stable pixels per map cell, draws the mask outline (its 0.5 contour, black)
    on every panel. Voids (no data) are grey and hatched (:func:`draw_voids`), with a legend entry.
    """
    names = [n for n in ("before", "after") if n in maps]
    ncols = 1 + len(names)
    fig = Figure(figsize=(5.2 * ncols, 4.6), layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    step = "" if factor <= 1 else (f" ({factor}×{factor} pixels per map pixel, from overviews)" if from_overviews
                                   else f" (mean of {factor}×{factor} pixels)")
    panels = [("ref", f"Reference elevation{step}", "terrain", f"Elevation ({units})")]
    titles = {"before": "dh before = tba − ref", "after": "dh after = aligned − ref"}
    panels += [(n, titles[n], DH_CMAP, f"dh ({units}), stable-terrain scale") for n in names]
    for ax, (key, title, cmap, label) in zip(axes, panels):
        arr = maps[key]
        if not np.isfinite(arr).any():
            _empty(ax, title)
            continue
        norm = None
        if key != "ref":
            lim = (limits or {}).get(key) or symmetric_limit(arr)
            norm = TwoSlopeNorm(vcenter=0.0, vmin=-lim, vmax=lim)
            title += f", ±{fmt_float(lim, sig=3)} {units}"
        im = ax.imshow(arr, extent=tuple(extent), cmap=_dh_cmap(cmap), norm=norm, interpolation="nearest",
                       origin="upper")
        draw_voids(ax, arr, extent=extent)
        if stable_map is not None and np.nanmin(stable_map) < 0.5 < np.nanmax(stable_map):
            ax.contour(stable_map, levels=[0.5], colors="k", linewidths=0.9, extent=tuple(extent), origin="upper")
        _map_axes(ax, title=title, units=units, crs=crs)
        cb = fig.colorbar(im, ax=ax, shrink=0.85, extend="both" if norm is not None else "neither")
        cb.set_label(label, fontsize=8)
        cb.ax.tick_params(labelsize=7)
    return fig


def inside_scale(values: np.ndarray, *, q: float = 1.0) -> tuple[Normalize, Colormap]:
    """Colour scale of dh inside the mask: from its ``q``-th to its ``(100 - q)``-th percentile (a
    glacier losing 30 m gets about -31 to -29 m, not the ±3 m of stable terrain), in the reds of
    :data:`DH_CMAP` when all negative, its blues when all positive, the whole of it centred on
    zero otherwise: red is still thinning."""
    from matplotlib import colormaps

    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    lo, hi = (float(np.percentile(v, q)), float(np.percentile(v, 100.0 - q))) if v.size else (-1.0, 1.0)
    if hi - lo < 1e-6:
        lo, hi = lo - 0.5e-6, hi + 0.5e-6
    full = colormaps[DH_CMAP]
    if lo < 0.0 < hi:
        return TwoSlopeNorm(vcenter=0.0, vmin=lo, vmax=hi), full
    part = (0.0, 0.42) if hi <= 0.0 else (0.58, 1.0)  # the red or the blue half, without the near-white centre
    cmap = ListedColormap(full(np.linspace(*part, 128)))
    return Normalize(vmin=lo, vmax=hi), cmap


def inside_maps_figure(maps: dict[str, np.ndarray], *, stable_map: np.ndarray, extent: Sequence[float], crs: str,
                       units: str) -> str:
    """:func:`build_inside_maps_figure` as base64 PNG."""
    return to_png_base64(build_inside_maps_figure(maps, stable_map=stable_map, extent=extent, crs=crs, units=units))


def build_inside_maps_figure(maps: dict[str, np.ndarray], *, stable_map: np.ndarray, extent: Sequence[float],
                             crs: str, units: str) -> Figure:
    """dh before/after inside the mask only (map cells less than half stable), each on its own
    colour scale (:func:`inside_scale` of the inside cells), stable cells left blank, voids
    inside the mask grey and hatched."""
    inside = ~(np.asarray(stable_map) >= 0.5)
    names = [n for n in ("before", "after") if n in maps]
    fig = Figure(figsize=(5.4 * max(len(names), 1), 4.6), layout="constrained")
    axes = fig.subplots(1, max(len(names), 1), squeeze=False)[0]
    titles = {"before": "dh before inside the mask", "after": "dh after inside the mask"}
    for ax, name in zip(axes, names):
        arr = np.where(inside, maps[name], np.nan)
        title = titles[name]
        if not np.isfinite(arr).any():
            _empty(ax, title)
            continue
        norm, cmap = inside_scale(arr)
        shown = np.ma.masked_where(~inside | ~np.isfinite(arr), arr)
        im = ax.imshow(shown, extent=tuple(extent), cmap=cmap, norm=norm, interpolation="nearest", origin="upper")
        draw_voids(ax, maps[name], extent=extent, where=inside)
        ax.contour(np.asarray(stable_map), levels=[0.5], colors="k", linewidths=0.9, extent=tuple(extent),
                   origin="upper")
        scale = f"{fmt_float(float(norm.vmin or 0.0), sig=3)} to {fmt_float(float(norm.vmax or 0.0), sig=3)} {units}"
        _map_axes(ax, title=f"{title}, own scale {scale}", units=units, crs=crs)
        cb = fig.colorbar(im, ax=ax, shrink=0.85, extend="both")
        cb.set_label(f"dh ({units}), inside-mask scale", fontsize=8)
        cb.ax.tick_params(labelsize=7)
    return fig


def _hist_panel(ax: Axes, series: list[tuple[str, np.ndarray]], *, units: str, title: str) -> None:
    lim = symmetric_limit(*(v for _, v in series), q=99.5)
    bins = np.linspace(-lim, lim, 121)
    for name, v in series:
        color = _BEFORE if name == "before" else _AFTER
        ax.hist(np.clip(v, -lim, lim), bins=bins.tolist(), histtype="stepfilled", alpha=0.35, color=color,
                edgecolor=color, label=f"{name} (n = {v.size})")
        ax.axvline(float(np.median(v)), color=color, lw=1.2, ls="--")
    ax.axvline(0.0, color="k", lw=0.6)
    ax.set_xlim(-lim, lim)
    ax.set_xlabel(f"dh ({units}); beyond ±{fmt_float(lim, sig=3)} {units} counted in the end bins", fontsize=8)
    ax.set_ylabel("Pixels", fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=8, loc="upper left")


def histogram_figure(sample: dict[str, np.ndarray], *, units: str, n_valid: int, stable: bool = False) -> str:
    """Histograms of dh before and after (same bins, symmetric around zero) from a subsample,
    plus the "after" one on its own range when both exist. ``stable``: the subsample is of
    stable pixels only (said in the title). The title says ``n = <pixels of the subsample>``
    and each legend entry its own count (the same when both dh are finite at every sampled pixel)."""
    series: list[tuple[str, np.ndarray]] = [(n, sample[n][np.isfinite(sample[n])]) for n in ("before", "after") if n in sample]
    series = [(n, v) for n, v in series if v.size]
    n_sample = len(next(iter(sample.values()), []))
    what = "valid stable pixels" if stable else "valid pixels"
    title = f"dh, subsample n = {n_sample} of {n_valid} {what}; dashed: medians"
    both = len(series) == 2
    fig = Figure(figsize=(12.0 if both else 7.0, 3.8), layout="constrained")
    axes = fig.subplots(1, 2 if both else 1, squeeze=False)[0]
    if not series:
        _empty(axes[0], title)
        return to_png_base64(fig)
    _hist_panel(axes[0], series, units=units, title=title)
    if both:
        _hist_panel(axes[1], series[1:], units=units, title="dh after, on its own range")
    return to_png_base64(fig)


def _binned_medians(x: np.ndarray, y: np.ndarray, nbins: int = 36) -> tuple[np.ndarray, np.ndarray]:
    edges = np.linspace(0.0, 360.0, nbins + 1)
    idx = bin_index(x, edges, outside="clip")
    centres, meds = [], []
    for b in range(nbins):
        sel = y[idx == b]
        if sel.size >= 5:
            centres.append(0.5 * (edges[b] + edges[b + 1]))
            meds.append(float(np.median(sel)))
    return np.array(centres), np.array(meds)


def nk_terms(sample: dict[str, np.ndarray], name: str, min_slope: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Aspect (degrees) and ``(dh - median(dh)) / tan(slope)`` at sloped sampled pixels."""
    dh, slope, asp = sample[name], sample["slope"], sample["aspect"]
    ok = np.isfinite(dh) & np.isfinite(slope) & np.isfinite(asp) & (slope >= min_slope)
    if not ok.any():
        return np.empty(0), np.empty(0)
    d = dh[ok]
    return asp[ok], (d - np.median(d)) / np.tan(np.radians(slope[ok]))


def nuth_kaab_figure(
    sample: dict[str, np.ndarray],
    *,
    units: str,
    shift: tuple[float, float] | None,
    max_points: int = 20_000,
) -> str:
    """``dh / tan(slope)`` against aspect before and after, with binned medians.

    ``shift`` is the fitted horizontal translation ``(shift_x, shift_y)``; the displacement
    it corrects, ``(dx, dy) = -shift``, predicts ``dh / tan(slope) = dx sin(aspect) + dy cos(aspect)``
    before coregistration (drawn as the fitted curve) and zero after.
    """
    names = [n for n in ("before", "after") if n in sample]
    fig = Figure(figsize=(5.6 * len(names), 4.2), layout="constrained")
    axes = fig.subplots(1, len(names), squeeze=False)[0]
    terms = {n: nk_terms(sample, n) for n in names}
    ylims = {n: symmetric_limit(terms[n][1], q=95.0) for n in names}
    if shift is not None and "before" in ylims:
        ylims["before"] = max(ylims["before"], 1.2 * float(np.hypot(*shift)))
    shared = max(ylims.values(), default=1.0)
    own = {n: ylims[n] if n == "after" and shared > AFTER_AXIS_RATIO * ylims[n] else shared for n in names}
    psi = np.linspace(0.0, 360.0, 361)
    for ax, name in zip(axes, names):
        title = f"Nuth & Kääb diagnostic, {name}"
        x, y = terms[name]
        if x.size == 0:
            _empty(ax, title)
            continue
        step = max(1, x.size // max_points)
        ax.scatter(x[::step], y[::step], s=2, alpha=0.15, color="0.45", rasterized=True, label="subsample")
        cx, cy = _binned_medians(x, y)
        ax.plot(cx, cy, "o", ms=4, color=_BEFORE if name == "before" else _AFTER, label="median per 10° bin")
        if shift is not None:
            dx, dy = -shift[0], -shift[1]
            if name == "before":
                curve = dx * np.sin(np.radians(psi)) + dy * np.cos(np.radians(psi))
                sign = "+" if dy >= 0 else "−"
                ax.plot(psi, curve, "k-", lw=1.5,
                        label=f"fitted: {fmt_float(dx)} sin ψ {sign} {fmt_float(abs(dy))} cos ψ")
            else:
                ax.plot(psi, np.zeros_like(psi), "k-", lw=1.5, label="expected after fit: 0")
        ax.axhline(0.0, color="k", lw=0.5)
        ax.set_xlim(0, 360)
        ax.set_xticks(np.arange(0, 361, 45))
        ax.set_ylim(-own[name], own[name])
        ax.set_xlabel("Aspect ψ (degrees clockwise from north)", fontsize=8)
        scale = ", own y scale (zoomed)" if own[name] < shared else ""
        ax.set_ylabel(f"(dh − median dh) / tan(slope) ({units}){scale}", fontsize=8)
        ax.set_title(f"{title}, n = {x.size} (sampled pixels with slope ≥ 1°)", fontsize=10)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7, loc="upper right")
    return to_png_base64(fig)


def history_figure(history: Sequence[Sequence[float]], *, units: str, label: str) -> str:
    """Accumulated horizontal shift after each Nuth & Kääb iteration."""
    fig = Figure(figsize=(6.0, 3.2), layout="constrained")
    ax = fig.subplots()
    h = np.asarray(history, dtype=float).reshape(-1, 2) if len(history) else np.empty((0, 2))
    title = f"Shift after each iteration ({label})"
    if h.shape[0] == 0:
        _empty(ax, title)
        return to_png_base64(fig)
    it = np.arange(1, h.shape[0] + 1)
    ax.plot(it, h[:, 0], "o-", label="shift_x (east)")
    ax.plot(it, h[:, 1], "s-", label="shift_y (north)")
    ax.set_xlabel("Iteration", fontsize=8)
    ax.set_ylabel(f"Shift ({units})", fontsize=8)
    ax.set_xticks(it)
    ax.set_title(title, fontsize=10)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=8)
    return to_png_base64(fig)


def _hillshade(z: np.ndarray, dx: float, dy: float) -> np.ndarray:
    """Hillshade (sun from the north-west, 45 degrees high) of a decimated elevation map, for a backdrop."""
    gy, gx = np.gradient(np.where(np.isfinite(z), z, np.nanmean(z) if np.isfinite(z).any() else 0.0), dy, dx)
    slope = np.arctan(np.hypot(gx, gy))
    aspect = np.arctan2(-gx, gy)
    az, alt = np.radians(315.0), np.radians(45.0)
    shade = np.sin(alt) * np.cos(slope) + np.cos(alt) * np.sin(slope) * np.cos(az - aspect)
    return np.where(np.isfinite(z), shade, np.nan)


def blockwise_figure(tiles: JSONDict, field: object, *, ref_map: np.ndarray, extent: Sequence[float], crs: str,
                     units: str) -> str:
    """Per-tile translations as arrows over a hillshade of the reference (used tiles black,
    rejected ones as red crosses), and the fitted field: horizontal magnitude with arrows, and
    vertical part. ``tiles`` is a ``BlockwiseCoreg.tiles_`` table (first iteration shown),
    ``field(x, y) -> (d_x, d_y, d_z)`` the total correction."""
    left, right, bottom, top = (float(v) for v in extent)
    first = [i for i, it in enumerate(tiles["iteration"]) if it == 0]
    x = np.array([tiles["x"][i] for i in first], dtype=np.float64)
    y = np.array([tiles["y"][i] for i in first], dtype=np.float64)
    dx = np.array([np.nan if tiles["dx"][i] is None else tiles["dx"][i] for i in first], dtype=np.float64)
    dy = np.array([np.nan if tiles["dy"][i] is None else tiles["dy"][i] for i in first], dtype=np.float64)
    used = np.array([tiles["status"][i] == "used" for i in first])
    gx, gy = np.meshgrid(np.linspace(left, right, 60), np.linspace(top, bottom, 60))
    fx, fy, fz = field(gx, gy)  # type: ignore[operator]
    fig = Figure(figsize=(15.6, 4.8), layout="constrained")
    axes = fig.subplots(1, 3)
    ny, nx = ref_map.shape
    shade = _hillshade(ref_map, (right - left) / max(nx, 1), (top - bottom) / max(ny, 1))
    axes[0].imshow(shade, extent=(left, right, bottom, top), cmap="gray", origin="upper", interpolation="nearest")
    scale_len = float(np.nanmax(np.hypot(dx[used], dy[used]))) if used.any() else 1.0
    if used.any():
        q = axes[0].quiver(x[used], y[used], dx[used], dy[used], color="k", angles="xy", scale_units="width",
                           scale=scale_len * 8.0, width=0.006)
        axes[0].quiverkey(q, 0.1, 0.04, scale_len, f"{fmt_float(scale_len, sig=3)} {units}", labelpos="E", coordinates="axes",
                          color="b", labelcolor="b", fontproperties={"size": 8})
    if (~used).any():
        axes[0].plot(x[~used], y[~used], "x", color="red", markersize=9, mew=2, label="rejected tile")
        axes[0].legend(loc="lower right", fontsize=7)
    axes[0].set_title("Translation fitted on each tile (to apply to tba)", fontsize=10)
    mag = np.hypot(fx, fy)
    im = axes[1].imshow(mag, extent=(left, right, bottom, top), cmap="viridis", origin="upper")
    sub = (slice(2, None, 6), slice(2, None, 6))
    axes[1].quiver(gx[sub], gy[sub], fx[sub], fy[sub], color="w", angles="xy", scale_units="width",
                   scale=max(float(np.nanmax(mag)), 1e-9) * 12.0, width=0.004)
    axes[1].plot(x[used], y[used], ".", color="k", markersize=4)
    cb = fig.colorbar(im, ax=axes[1], shrink=0.85)
    cb.set_label(f"|d_xy| ({units})", fontsize=8)
    axes[1].set_title("Fitted field: horizontal correction (dots: tiles used)", fontsize=10)
    lo, hi = float(np.nanmin(fz)), float(np.nanmax(fz))
    pad = max(1e-3, 0.05 * (hi - lo))  # a constant field still shows its value
    im = axes[2].imshow(fz, extent=(left, right, bottom, top), cmap="viridis", vmin=lo - pad, vmax=hi + pad,
                        origin="upper")
    cb = fig.colorbar(im, ax=axes[2], shrink=0.85)
    cb.set_label(f"d_z ({units})", fontsize=8)
    axes[2].set_title("Fitted field: vertical correction", fontsize=10)
    for ax in axes:
        ax.set_xlim(left, right)
        ax.set_ylim(bottom, top)
        ax.set_xlabel(f"Easting ({units}), {crs}", fontsize=8)
        ax.set_ylabel(f"Northing ({units}), {crs}", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(4))
        ax.ticklabel_format(useOffset=False, style="plain")
    return to_png_base64(fig)
