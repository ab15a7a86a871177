"""The report's sections, from :class:`~xdem.report.data.ReportData`, a coregistration and the
CLI's JSON summary (each optional)."""

from __future__ import annotations

from typing import Any

import numpy as np

from xdem.report import figures as F
from xdem.report.data import ReportData
from xdem.report.html import cell, img, key_value_rows, label_cell, note, render_value, table

__all__ = ["find_stats", "find_steps", "build_sections"]

_STAT_ORDER = ("count", "median", "nmad", "mean", "std", "rmse", "min", "max", "valid_fraction")


def _get(doc: Any, path: str) -> Any:
    cur = doc
    for part in path.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            return None
    return cur


def find_stats(summary: dict | None) -> tuple[str, dict] | None:
    """``(prefix, {"before": {...}, "after": {...}})`` of the summary's dh statistics, if any."""
    if not summary:
        return None
    candidates = (("stats", "stats.before", "stats.after"), ("", "stats_before", "stats_after"), ("", "before", "after"))
    for prefix, b, a in candidates:
        before, after = _get(summary, b), _get(summary, a)
        if isinstance(before, dict) or isinstance(after, dict):
            out = {}
            if isinstance(before, dict):
                out["before"] = (b, before)
            if isinstance(after, dict):
                out["after"] = (a, after)
            return prefix, out
    return None


def _coreg_docs(coreg: Any) -> list[dict]:
    doc = coreg.to_dict()
    return list(doc["steps"]) if "steps" in doc else [doc]


def find_steps(summary: dict | None, coreg: Any) -> tuple[list[str], list[dict]] | None:
    """``(data-key prefix of each step, step documents)``: from the summary if it lists steps,
    else from the fitted coregistration (keys ``coreg.steps.<i>``)."""
    if summary:
        for path in ("steps", "coreg.steps", "coreg"):
            v = _get(summary, path)
            if isinstance(v, dict) and "method" in v and path == "coreg":
                return [path], [v]
            if isinstance(v, list) and v and all(isinstance(s, dict) for s in v):
                return [f"{path}.{i}" for i in range(len(v))], v
    if coreg is not None and getattr(coreg, "is_fitted", False):
        docs = _coreg_docs(coreg)
        return [f"coreg.steps.{i}" for i in range(len(docs))], docs
    return None


def _method(doc: dict) -> str:
    return str(doc.get("method", doc.get("name", "step")))


def _learned(doc: dict) -> dict:
    v = doc.get("learned")
    return v if isinstance(v, dict) else doc


def _nk_info(steps: list[dict] | None) -> tuple[tuple[float, float] | None, list | None]:
    """Total fitted horizontal shift (when a Nuth & Kääb step exists) and its iteration history."""
    if not steps or not any(_method(s).lower() == "nuthkaab" for s in steps):
        return None, None
    sx = sy = 0.0
    history = None
    for s in steps:
        learned = _learned(s)
        try:
            sx += float(learned.get("shift_x_", learned.get("shift_x", 0.0)) or 0.0)
            sy += float(learned.get("shift_y_", learned.get("shift_y", 0.0)) or 0.0)
        except (TypeError, ValueError):
            continue
        hist = learned.get("history_", learned.get("history"))
        if _method(s).lower() == "nuthkaab" and isinstance(hist, list):
            history = hist
    return (sx, sy), history


# ---------------------------------------------------------------------------------------------
def _stats_section(data: ReportData, summary: dict | None) -> str:
    found = find_stats(summary)
    if found is not None:
        cols = found[1]
        how = _get(summary, f"{found[0]}.method") if found[0] else None
        src = "Values from the coregistration summary" + (f" ({how})." if isinstance(how, str) else ".")
    else:
        cols = {n: (f"report.stats.{n}", s) for n, s in data.stats.items() if s is not None}
        missing = [n for n, s in data.stats.items() if s is None]
        src = "Exact statistics of dh computed out of core by the report."
        if missing:
            src += f" No valid dh {', '.join(missing)}."
    if not cols:
        return note("No statistics available.")
    names = [n for n in ("before", "after") if n in cols]
    keys = [k for k in _STAT_ORDER if any(k in cols[n][1] for n in names)]
    keys += sorted({k for n in names for k, v in cols[n][1].items() if k not in keys and not isinstance(v, (dict, list))})
    rows = []
    for k in keys:
        row = [label_cell(k)]
        for n in names:
            prefix, stats = cols[n]
            row.append(cell(stats.get(k), f"{prefix}.{k}" if k in stats else None))
        rows.append(row)
    header = ["dh = tba − ref / aligned − ref (" + data.units + ")"] + names
    return table(header, rows) + note(src + " NMAD = 1.4826 · median(|dh − median(dh)|).")


def _parameters_section(steps: tuple[list[str], list[dict]] | None, summary: dict | None, coreg: Any) -> str:
    if steps is None:
        return note("No coregistration given: only the differences before coregistration are shown.")
    parts = []
    for i, (key, doc) in enumerate(zip(*steps)):
        parts.append(f"<h3>Step {i + 1}: {_method(doc)}</h3>")
        rows = []
        learned = doc.get("learned")
        if isinstance(learned, dict):
            rows += [[label_cell(f"learned: {k}"), cell(v, f"{key}.learned.{k}", cls="l")] for k, v in learned.items()]
        rows += key_value_rows(doc, key, skip=("learned", "params", "method"))
        params = doc.get("params")
        if isinstance(params, dict):
            rows += [[label_cell(f"parameter: {k}"), cell(v, f"{key}.params.{k}", cls="l")] for k, v in params.items()]
        parts.append(table(["Name", "Value"], rows))
    matrix, mkey = None, None
    if summary and isinstance(summary.get("matrix"), list):
        matrix, mkey = summary["matrix"], "matrix"
    elif coreg is not None and hasattr(coreg, "to_matrix"):
        try:
            matrix, mkey = np.asarray(coreg.to_matrix()).tolist(), "coreg.matrix"
        except Exception:  # non-affine pipeline: no single matrix
            matrix = None
    if matrix:
        rows = [[label_cell(f"row {i}")] + [cell(v, f"{mkey}.{i}.{j}") for j, v in enumerate(r)]
                for i, r in enumerate(matrix)]
        parts.append("<h3>Affine matrix applied to the to-be-aligned DEM</h3>")
        parts.append(table([""] + [f"col {j}" for j in range(len(matrix[0]))], rows))
    parts.append(note("Shifts are the translation APPLIED to the to-be-aligned DEM: aligned(x, y) = "
                      "tba(x − shift_x, y − shift_y) + shift_z."))
    return "".join(parts)


def _slope_section(data: ReportData) -> str:
    if data.slope_note:
        return note(data.slope_note)
    if not data.slope_classes:
        return note("Statistics by slope class are not available.")
    titles = {"before": "dh before (tba − ref)", "after": "dh after (aligned − ref)"}
    parts = []
    for name, df in data.slope_classes.items():
        parts.append(f"<h3>{titles.get(name, name)}</h3>")
        if df is None:
            parts.append(note("no valid data"))
            continue
        cols = [c for c in df.columns if not str(c).startswith("slope_")]
        rows = []
        for i in range(len(df)):
            lo, hi = df["slope_lower"].iloc[i], df["slope_upper"].iloc[i]
            last = i == len(df) - 1
            label = f"[{lo:g}, {hi:g}{']' if last else ')'}"
            key = f"report.slope_classes.{name}.{i}"
            rows.append([label_cell(label)] + [cell(_py(df[c].iloc[i]), f"{key}.{c}") for c in cols])
        header = [str(c) if c in ("count", "sample_count") else f"{c} ({data.units})" for c in cols]
        parts.append(table(["Slope class (degrees)", *header], rows))
    parts.append(note(f"Slope of the reference DEM (Horn, degrees). Exact statistics over every pixel valid in both DEMs "
                      f"(xdem.spatialstats.stats_by_slope_class); dh in {data.units}; RMSE = sqrt(mean(dh²))."))
    return "".join(parts)


def _py(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _processing_section(data: ReportData, summary: dict | None, elapsed: float) -> str:
    ny, nx = data.shape
    rows = [
        [label_cell("grid (rows × columns)"), f'<td class="l">{render_value([ny, nx], "report.shape")}</td>'],
        [label_cell("resolution"), f'<td class="l">{render_value(list(data.resolution), "report.resolution")} {data.units}</td>'],
        [label_cell("CRS"), cell(data.crs, "report.crs", cls="l")],
        [label_cell("chunks (rows × columns)"), f'<td class="l">{render_value(list(data.chunks), "report.chunks")}</td>'],
        [label_cell("number of chunks"), cell(data.n_chunks, "report.n_chunks", cls="l")],
        [label_cell("map decimation (pixels averaged per side)"), cell(data.factor, "report.factor", cls="l")],
        [label_cell("valid pixels (ref and tba)"), cell(data.n_valid, "report.n_valid", cls="l")],
        [label_cell("subsample for histograms and diagnostic"), cell(len(data.sample.get("row", [])), "report.n_sample", cls="l")],
        [label_cell("report computation time (s)"), cell(elapsed, "report.elapsed_s", cls="l")],
    ]
    out = "<h3>This report</h3>" + table(["Item", "Value"], rows)
    if summary:
        skip = {"stats", "stats_before", "stats_after", "steps", "matrix", "coreg", "before", "after"}
        srows = key_value_rows(summary, None, skip=tuple(k for k in summary if k in skip))
        if srows:
            out += "<h3>Coregistration run (from the JSON summary)</h3>" + table(["Item", "Value"], srows)
    return out


def build_sections(
    data: ReportData, *, coreg: Any, summary: dict | None, elapsed: float
) -> list[tuple[str, str, str]]:
    """``(id, title, html)`` of each section, in order."""
    steps = find_steps(summary, coreg)
    shift, history = _nk_info(steps[1] if steps else None)
    maps = F.maps_figure(data.maps, extent=data.extent, crs=data.crs, units=data.units, factor=data.factor)
    hist = F.histogram_figure({k: data.sample[k] for k in ("before", "after") if k in data.sample},
                              units=data.units, n_valid=data.n_valid)
    sec = [
        ("statistics", "Statistics of elevation differences", _stats_section(data, summary)),
        ("maps", "Maps of elevation differences",
         img(maps, "maps of dh before and after") +
         note(("Full resolution" if data.factor == 1 else f"Block means of {data.factor} × {data.factor} pixels")
              + f" on the reference grid ({data.crs}). Each dh colour scale is centred on zero and symmetric at the "
              "98th percentile of its |dh| (see the limits in the titles).")),
        ("histograms", "Histograms of elevation differences", img(hist, "histograms of dh before and after")),
    ]
    if "slope" in data.sample:
        nk = img(F.nuth_kaab_figure(data.sample, units=data.units, shift=shift), "Nuth and Kaab diagnostic")
        if history:
            nk += img(F.history_figure(history, units=data.units, label="Nuth & Kääb"), "Nuth and Kaab iterations")
        nk += note("Pixels with slope ≥ 1°. A horizontal shift (dx, dy) makes dh / tan(slope) vary with aspect as "
                   "dx sin ψ + dy cos ψ (Nuth & Kääb, 2011); after a good fit the binned medians lie on zero. The curve "
                   "is the final fitted shift; for shifts of several pixels the relation, a first-order one, "
                   "underestimates it before coregistration, hence the iterations.")
    else:
        nk = note(data.slope_note or "Slope and aspect are not available.")
    sec.append(("nuth-kaab", "Nuth & Kääb diagnostic", nk))
    sec.append(("parameters", "Fitted parameters", _parameters_section(steps, summary, coreg)))
    sec.append(("slope-classes", "Statistics by slope class", _slope_section(data)))
    sec.append(("processing", "Processing summary", _processing_section(data, summary, elapsed)))
    return sec
