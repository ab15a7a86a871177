"""The HTML report of a coregistration with points: the tracks coloured by ``dh`` before and
after, the histograms of ``dh`` at the points, and the run's numbers (the JSON document).

Self-contained (figures inlined as PNG). At most :data:`MAX_MAP_POINTS` points are drawn on the
maps (every k-th point, in file order: whole tracks stay visible); the histograms use all.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.figure import Figure

from xdem.io.atomic import write_text_atomic
from xdem.report.figures import AFTER_AXIS_RATIO, DH_CMAP, _hist_panel, symmetric_limit, to_png_base64
from xdem.report.html import cell, document, fmt_float, img, key_value_rows, label_cell, note, table

if TYPE_CHECKING:  # annotations only
    from xdem.typing import JSONDict

__all__ = ["tracks_figure", "points_histogram_figure", "points_report_html", "write_points_report", "MAX_MAP_POINTS"]

#: Points drawn on the maps at most.
MAX_MAP_POINTS = 200_000


def tracks_figure(x: np.ndarray, y: np.ndarray, dh: dict[str, np.ndarray], *, crs: str) -> str:
    """Maps of the points coloured by each ``dh`` series, one shared symmetric colour scale unless
    it would flatten a series (its own 98th percentile of ``|dh|`` more than
    :data:`~xdem.report.figures.AFTER_AXIS_RATIO` times smaller: then its own scale, said in the
    title); points without a valid dh are not drawn (the title's n counts the others), the others on
    a grey background (dh near 0 is near-white); PNG base64."""
    step = max(1, int(np.ceil(len(x) / MAX_MAP_POINTS)))
    shared = symmetric_limit(*dh.values())
    fig = Figure(figsize=(6.0 * len(dh), 5.2), layout="constrained")
    axes = fig.subplots(1, len(dh), squeeze=False)[0]
    for ax, (name, values) in zip(axes, dh.items()):
        own = symmetric_limit(values)
        lim = own if shared > AFTER_AXIS_RATIO * own else shared
        ok = np.isfinite(values[::step])
        sc = ax.scatter(x[::step][ok], y[::step][ok], c=values[::step][ok], s=2, cmap=DH_CMAP, vmin=-lim, vmax=lim,
                        linewidths=0)
        scale = "own scale" if lim < shared else "shared scale"
        ax.set_title(f"dh {name}, n = {int(np.isfinite(values).sum())} points"
                     + (f" (every {step}th drawn)" if step > 1 else "")
                     + f", {scale} ±{fmt_float(lim, sig=3)} m", fontsize=10)
        ax.set_aspect("equal")
        ax.set_facecolor("0.8")  # dh near 0 is near-white in RdBu: visible on grey
        ax.ticklabel_format(useOffset=False, style="plain")
        ax.set_xlabel(f"x ({crs})", fontsize=8)
        ax.set_ylabel("y", fontsize=8)
        ax.tick_params(labelsize=7)
        fig.colorbar(sc, ax=ax, shrink=0.8, label="dh (m)")
    return to_png_base64(fig)


def points_histogram_figure(dh: dict[str, np.ndarray]) -> str:
    """Histograms of ``dh`` at the points (``before``/``after``), same bins, and the "after" one on
    its own range (the shared bins flatten it after a good fit); each legend entry says its
    ``n = <points with a finite dh>``; PNG base64."""
    series = [(name, v[np.isfinite(v)]) for name, v in dh.items()]
    series = [(n, v) for n, v in series if v.size]
    both = len(series) == 2
    fig = Figure(figsize=(12.0 if both else 7.0, 3.8), layout="constrained")
    axes = fig.subplots(1, 2 if both else 1, squeeze=False)[0]
    panels = [(axes[0], series, "dh at the points; dashed: medians")]
    if both:
        panels.append((axes[1], series[1:], "dh after at the points, on its own range"))
    for ax, ser, title in panels:
        _hist_panel(ax, ser, units="m", title=title)
        ax.set_ylabel("Points", fontsize=8)
    return to_png_base64(fig)


def points_report_html(*, x: np.ndarray, y: np.ndarray, before: np.ndarray, after: np.ndarray,
                       summary: JSONDict, on_final_block: Callable[[], None] | None = None) -> str:
    """The page: maps, histograms, statistics and the run's summary. ``on_final_block`` is called
    once the figures are drawn, just before the run's summary (the last block) is rendered from
    ``summary``: ``xdem coreg --report`` sets its final timing there (page == JSON)."""
    crs = str(summary.get("inputs", {}).get("crs") or "")
    dh = {"before": before, "after": after}
    stats = summary.get("stats", {})
    # cells tagged with their JSON path (data-key), as in the DEM report
    rows = [[label_cell(name), *(cell(s.get(k), f"stats.{name}.{k}" if k in s else None) for k in
                                 ("median", "nmad", "mean", "rmse", "count"))]
            for name, s in ((k, stats.get(k, {})) for k in ("before", "after", "after_without_outliers"))]
    sections = [
        ("stats", "dh at the points", table(["", "median", "NMAD", "mean", "RMSE", "count"], rows)
         + note("dh = tba - ref at the points, the DEM interpolated at their exact positions (pixel values at pixel "
                "centres); after: the written DEM, or the moved points. Every point with a valid DEM value is used "
                "(no subsample): the histograms' n are the counts of the table (after, with its outliers).")
         + img(points_histogram_figure(dh), "histograms of dh")),
        ("maps", "Tracks coloured by dh", img(tracks_figure(x, y, dh, crs=crs), "points coloured by dh")),
    ]
    if on_final_block is not None:
        on_final_block()
    sections.append(("run", "Run", table(["", ""], key_value_rows({k: v for k, v in summary.items() if k != "stats"},
                                                                  None))))
    p = summary.get("points", {})
    return document("xdem coreg with points", [f"{p.get('count')} points from {p.get('file')}, the "
                                                f"{str(p.get('side', '')).replace('_', ' ')}"], sections)


def write_points_report(path: str | Path, *, x: np.ndarray, y: np.ndarray, before: np.ndarray, after: np.ndarray,
                        summary: JSONDict, overwrite: bool = False,
                        on_final_block: Callable[[], None] | None = None) -> Path:
    """Write :func:`points_report_html` to ``path`` atomically; returns the path."""
    text = points_report_html(x=x, y=y, before=before, after=after, summary=summary, on_final_block=on_final_block)
    return write_text_atomic(path, text, overwrite=overwrite)
