"""The report's sections, from :class:`~xdem.report.data.ReportData`, a coregistration and the
CLI's JSON summary (each optional)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from xdem.coreg import Coreg, merged_transform
from xdem.coreg.blockwise import field_of
from xdem.kernels.field import ThinPlateField, compose
from xdem.report import diagnostics as D
from xdem.report import figures as F
from xdem.report import verdict_box as V
from xdem.report.data import ReportData
from xdem.report.html import cell, img, key_value_rows, label_cell, note, render_value, table
from xdem.report.masked import inside_section
from xdem.verdict import compute_verdict, metric_pixel_size

if TYPE_CHECKING:  # annotations only
    from xdem.typing import JSONDict

__all__ = ["find_stats", "find_steps", "build_sections", "processing_section"]

_STAT_ORDER = ("count", "mean", "median", "std", "nmad", "rmse", "min", "max", "le90", "valid_fraction")
#: What each count counts, as shown next to it.
_STAT_LABELS = {
    "count": "count (valid stable pixels, exact)",
    "sampled": "sampled (stable pixels of the subsample)",
    "le90": "LE90 (90 % quantile of |dh|)",
    "nmad": "NMAD",
    "rmse": "RMSE",
}
_STEP_LABELS = {
    "count": "count (sampled points in the final fit)",
    "learned: count_": "learned: count_ (sampled points in the final fit)",
    "passes": "passes (reads of the full DEMs by the fit)",
    "learned: passes_": "learned: passes_ (reads of the full DEMs by the fit)",
    "n_iterations": "n_iterations (iterations of the fit)",
    "learned: n_iterations_": "learned: n_iterations_ (iterations of the fit)",
}
_VERDICT_LABELS = {
    "ok": "ok (every evaluated check passed)",
    "status": "status (ok, not improved, not ok)",
    "residual_amplitude_m": "residual aspect-dependent amplitude a (m): dh/tan(slope) = a cos(b − aspect) + c, after",
    "residual_direction_deg": "its direction b (degrees from north)",
    "residual_dh_m": "dh it explains: a × median tan(slope) (m)",
    "nmad_ratio": "NMAD after / NMAD before",
    "n_points": "n_points (stable sampled pixels steeper than 1° in the fit)",
    "subsample": "subsample (stable pixels drawn for the verdict)",
    "passes": "passes (reads of the full DEMs for the verdict's subsample)",
}


def _get(doc: Any, path: str) -> Any:
    cur = doc
    for part in path.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            return None
    return cur


def find_stats(summary: JSONDict | None) -> tuple[str, JSONDict] | None:
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


def _coreg_docs(coreg: Coreg) -> list[JSONDict]:
    doc = coreg.to_dict()
    return list(doc["steps"]) if "steps" in doc else [doc]


def find_steps(summary: JSONDict | None, coreg: Coreg | None) -> tuple[list[str], list[JSONDict]] | None:
    """``(data-key prefix of each step, step documents)``: from the summary if it lists steps,
    else from the fitted coregistration (keys ``coreg.steps.<i>``)."""
    if summary:
        for path in ("steps", "coreg.steps", "coreg"):
            v = _get(summary, path)
            if isinstance(v, dict) and "method" in v and path == "coreg":
                return [path], [v]
            if isinstance(v, list) and v and all(isinstance(s, dict) for s in v):
                return [f"{path}.{i}" for i in range(len(v))], v
    if coreg is not None and coreg.is_fitted:
        docs = _coreg_docs(coreg)
        return [f"coreg.steps.{i}" for i in range(len(docs))], docs
    return None


def _method(doc: JSONDict) -> str:
    return str(doc.get("method", doc.get("name", "step")))


def _learned(doc: JSONDict) -> JSONDict:
    v = doc.get("learned")
    return v if isinstance(v, dict) else doc


def _nk_info(steps: list[JSONDict] | None) -> tuple[tuple[float, float] | None, tuple[list[Sequence[float]] | None, str]]:
    """Total fitted horizontal shift (when a Nuth & Kääb or NuthKaabDeramp step exists), and
    the iteration history of the last such step with its method name."""
    nk_methods = ("nuthkaab", "nuthkaabderamp")
    if not steps or not any(_method(s).lower() in nk_methods for s in steps):
        return None, (None, "")
    sx = sy = 0.0
    history = None
    label = "Nuth & Kääb"
    for s in steps:
        learned = _learned(s)
        try:
            sx += float(learned.get("shift_x_", learned.get("shift_x", 0.0)) or 0.0)
            sy += float(learned.get("shift_y_", learned.get("shift_y", 0.0)) or 0.0)
        except (TypeError, ValueError):
            continue
        hist = learned.get("history_", learned.get("history"))
        if _method(s).lower() in nk_methods and isinstance(hist, list):
            history = hist
            label = _method(s)
    return (sx, sy), (history, label)


# ---------------------------------------------------------------------------------------------
def _stats_section(data: ReportData, summary: JSONDict | None) -> str:
    found = find_stats(summary)
    if found is not None:
        cols = found[1]
        how = _get(summary, f"{found[0]}.method") if found[0] else None
        src = "Values from the coregistration summary" + (f" ({how})." if isinstance(how, str) else ".")
    else:
        cols = {n: (f"report.stats.{n}", s) for n, s in data.stats.items() if s is not None}
        missing = [n for n, s in data.stats.items() if s is None]
        src = f"Statistics of dh computed by the report: {data.stats_method or 'exact'}."
        if missing:
            src += f" No valid dh {', '.join(missing)}."
    if not cols:
        return note("No statistics available.")
    names = [n for n in ("before", "after") if n in cols]
    keys = [k for k in _STAT_ORDER if any(k in cols[n][1] for n in names)]
    keys += sorted({k for n in names for k, v in cols[n][1].items() if k not in keys and not isinstance(v, (dict, list))})
    rows = []
    for k in keys:
        row = [label_cell(_STAT_LABELS.get(k, k))]
        for n in names:
            prefix, stats = cols[n]
            row.append(cell(stats.get(k), f"{prefix}.{k}" if k in stats else None))
        rows.append(row)
    header = ["dh = tba − ref / aligned − ref (" + data.units + ")"] + names
    where = (" Stable pixels only: inside the inlier mask and outside the exclude mask." if data.masked
             else " Every valid pixel (no mask given).")
    first = cols[names[0]][1]
    counted = ""
    if isinstance(first.get("count"), int) and isinstance(first.get("sampled"), int):
        exact = first["count"] == first["sampled"]
        counted = (f" count = {first['count']} {names[0]}: the stable pixels valid in both DEMs on the reference grid, "
                   "counted exactly; the statistics of the sampled pixels ("
                   + ("all of them here, so they are exact" if exact else f"n = {first['sampled']} (the statistics' "
                      "own reproducible subsample, as xdem coreg draws it: up to 2 million pixels, more than the "
                      "report's figures use), the same pixels before and after") + ") as said above.")
    return table(header, rows) + note(src + where + counted + " NMAD = 1.4826 · median(|dh − median(dh)|); "
                                      "RMSE = sqrt(mean(dh²)); LE90 = 90 % quantile of |dh|.")


_FACT_LABELS = {"crs": "CRS", "resolution": "resolution (x, y)", "size": "size (columns, rows)", "nodata": "nodata",
                "dtype": "data type", "vertical_crs": "vertical CRS"}


def _inputs_section(summary: JSONDict | None) -> str | None:
    """Each input's own CRS, resolution, size, nodata and vertical CRS (``inputs.*_facts`` of
    the JSON), and what was done to it."""
    inputs = _get(summary, "inputs")
    if not isinstance(inputs, dict) or not isinstance(inputs.get("reference_facts"), dict):
        return None
    ref_f, tba_f = inputs.get("reference_facts") or {}, inputs.get("to_be_aligned_facts") or {}
    cols = [("reference", "inputs.reference_facts", ref_f), ("to be aligned", "inputs.to_be_aligned_facts", tba_f)]
    rows = [[label_cell("file")] + [cell(inputs.get(k), f"inputs.{k}", cls="l") for k in ("reference", "to_be_aligned")]]
    for key, label in _FACT_LABELS.items():
        row = [label_cell(label)]
        for _, prefix, facts in cols:
            v = facts.get(key)
            if key == "vertical_crs":
                v = "not tagged" if v is None else f"{v.get('name')} ({v.get('kind')})"
                row.append(cell(v, None, cls="l"))
            else:
                row.append(cell(v, f"{prefix}.{key}" if key in facts else None, cls="l"))
        rows.append(row)
    done = []
    if tba_f and ref_f:
        if tba_f.get("crs") != ref_f.get("crs"):
            done.append(f"TBA reprojected from {tba_f.get('crs')} to REF's {ref_f.get('crs')} (bilinear, lazily) for the "
                        "fit and the statistics")
        elif tba_f.get("resolution") != ref_f.get("resolution") or tba_f.get("size") != ref_f.get("size"):
            done.append(f"TBA resampled from its {tba_f.get('size')} grid of {tba_f.get('resolution')} onto REF's "
                        f"{ref_f.get('size')} grid of {ref_f.get('resolution')} for the fit and the statistics")
        else:
            done.append("REF and TBA share a grid: nothing was resampled before the fit")
    grid = _get(summary, "output_grid")
    if grid:
        done.append(f"the aligned DEM is written on the grid of {str(grid).upper()}, resampled once")
    warn = inputs.get("vertical_warning")
    text = "; ".join(done) + "." + (f" <b>Warning:</b> <span data-key=\"inputs.vertical_warning\">{_esc(warn)}</span>"
                                    if warn else "")
    return table(["", "reference (REF)", "to be aligned (TBA)"], rows) + note(text)


def _pixels_part(summary: JSONDict | None, steps: tuple[list[str], list[JSONDict]]) -> str:
    """The merged translation in pixels of the reference grid, and each step's tilt (m/km and
    direction), from the JSON."""
    rows = []
    px = _get(summary, "translation_px")
    if isinstance(px, list):
        rows.append([label_cell("translation in pixels of the reference grid (x, y)")]
                    + [cell(v, f"translation_px.{i}") for i, v in enumerate(px)])
    for key, doc in zip(*steps):
        learned = _learned(doc)
        tilt = learned.get("tilt_m_per_km")
        if isinstance(tilt, (int, float)):
            tkey = f"{key}.tilt_m_per_km" if "tilt_m_per_km" in doc else f"{key}.learned.tilt_m_per_km"
            dkey = tkey.replace("tilt_m_per_km", "tilt_direction_deg")
            rows.append([label_cell(f"{_method(doc)}: tilt (m/km) and the direction dh descends towards "
                                    "(degrees clockwise from north)"),
                         cell(tilt, tkey), cell(learned.get("tilt_direction_deg"), dkey)])
    if not rows:
        return ""
    return "<h3>Translation in pixels, tilt</h3>" + table(["", "", ""], rows)


def _parameters_section(steps: tuple[list[str], list[JSONDict]] | None, summary: JSONDict | None, coreg: Coreg | None) -> str:
    if steps is None:
        return note("No coregistration given: only the differences before coregistration are shown.")
    parts = []
    for i, (key, doc) in enumerate(zip(*steps)):
        parts.append(f"<h3>Step {i + 1}: {_method(doc)}</h3>")
        rows = []
        learned = doc.get("learned")
        if isinstance(learned, dict):
            rows += [[label_cell(_STEP_LABELS.get(f"learned: {k}", f"learned: {k}")), cell(v, f"{key}.learned.{k}", cls="l")]
                     for k, v in learned.items()]
        rows += key_value_rows(doc, key, skip=("learned", "params", "method"), labels=_STEP_LABELS)
        params = doc.get("params")
        if isinstance(params, dict):
            rows += [[label_cell(f"parameter: {k}"), cell(v, f"{key}.params.{k}", cls="l")] for k, v in params.items()]
        parts.append(table(["Name", "Value"], rows))
    matrix, mkey = None, None
    if summary and isinstance(summary.get("matrix"), list):
        matrix, mkey = summary["matrix"], "matrix"
    elif coreg is not None and coreg.capabilities.affine:
        try:
            matrix, mkey = np.asarray(coreg.to_matrix()).tolist(), "coreg.matrix"
        except Exception:  # non-affine pipeline: no single matrix
            matrix = None
    complete = summary.get("matrix_is_complete") if summary else None
    if matrix:
        rows = [[label_cell(f"row {i}")] + [cell(v, f"{mkey}.{i}.{j}") for j, v in enumerate(r)]
                for i, r in enumerate(matrix)]
        parts.append("<h3>Affine matrix applied to the to-be-aligned DEM</h3>")
        parts.append(table([""] + [f"col {j}" for j in range(len(matrix[0]))], rows))
        if complete is False:
            parts.append(note("matrix_is_complete is false: the matrix holds only the translation part of the "
                              "correction; a ramp or bias correction is applied on top of it (for NuthKaabDeramp the "
                              "z translation is minus its fitted ramp at the centre of the reference grid)."))
    rigid = _rotations_part(steps, summary, coreg)
    if rigid:
        parts.append(rigid)
    pixels = _pixels_part(summary, steps)
    if pixels:
        parts.append(pixels)
    parts.append(note("Shifts are the translation APPLIED to the to-be-aligned DEM: aligned(x, y) = "
                      "tba(x − shift_x, y − shift_y) + shift_z."))
    return "".join(parts)


def _rotations_part(steps: tuple[list[str], list[JSONDict]], summary: JSONDict | None, coreg: Coreg | None) -> str:
    """The merged rigid transform as rotations in degrees about a centre and a translation, when
    a step is rigid (has rotations): from the summary (keys ``rotations_deg``, ``rotation_centre``,
    ``translation``), else computed from the coregistration (keys ``coreg.*``)."""
    if not any("rotation_x_" in _learned(d) or "rotation_x" in _learned(d) for d in steps[1]):
        return ""
    if summary and isinstance(summary.get("rotations_deg"), list):
        values, prefix = summary, ""
    elif coreg is not None and coreg.is_fitted:
        m = merged_transform(coreg)
        values = {"rotations_deg": m["rotations_deg"], "rotation_centre": m["centre"], "translation": m["translation"]}
        prefix = "coreg."
    else:
        return ""
    labels = {"rotations_deg": "rotation about the axis (degrees)", "rotation_centre": "centre c of the rotations",
              "translation": "translation t (motion of the centre)"}
    rows = [[label_cell(label)] + [cell(v, f"{prefix}{name}.{i}") for i, v in enumerate(values[name])]
            for name, label in labels.items() if isinstance(values.get(name), list)]
    return ("<h3>Rotations and translation of the rigid transform</h3>" + table(["", "x", "y", "z"], rows)
            + note("Each point P = (x, y, z) of the to-be-aligned DEM moves to P′ = R (P − c) + c + t, with "
                   "R = Rz · Ry · Rx (rotations about the axes, counter-clockwise seen from their positive end), in "
                   "the coordinates of the reference's CRS; this is the matrix above. Full precision in the JSON."))


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
        header = [{"count": "count (valid stable pixels in the class)", "sample_count": "sample_count (sampled pixels)"}
                  .get(str(c), f"{c} ({data.units})") for c in cols]
        parts.append(table(["Slope class (degrees)", *header], rows))
    which = "every stable pixel (inlier/exclude masks applied)" if data.masked else "every pixel"
    if data.slope_exact:
        how = (f"Exact statistics over {which} valid in both DEMs (xdem.spatialstats.stats_by_slope_class, "
               "several passes)")
    else:
        how = (f"count: exact number of {which.replace('every ', '')}s valid in both DEMs in the class; median, NMAD, "
               "mean and RMSE on the report's subsample (sample_count pixels of the class, drawn in the same pass; "
               "xdem report --exact-stats computes them exactly, with more passes)")
    parts.append(note(f"Slope of the reference DEM (Horn, degrees). {how}; dh in {data.units}; RMSE = sqrt(mean(dh²))."))
    return "".join(parts)


def _py(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def processing_section(data: ReportData, summary: JSONDict | None, elapsed: float) -> str:
    """The processing summary: the report's grid, chunks and subsample, and every other entry of
    ``summary`` (timing, memory...) as it is when this block is rendered: the last block of
    the page, so that ``xdem coreg --report`` can put its final timing in it first."""
    ny, nx = data.shape
    dems = "ref, tba and aligned" if "after" in data.sample else "ref and tba"
    stable = f"valid stable pixels (finite in {dems}, stable)" if data.masked else f"valid pixels (finite in {dems})"
    rows = [
        [label_cell("grid (rows × columns)"), f'<td class="l">{render_value([ny, nx], "report.shape")}</td>'],
        [label_cell("resolution"), f'<td class="l">{render_value(list(data.resolution), "report.resolution")} {data.units}</td>'],
        [label_cell("CRS"), cell(data.crs, "report.crs", cls="l")],
        [label_cell("chunks (rows × columns)"), f'<td class="l">{render_value(list(data.chunks), "report.chunks")}</td>'],
        [label_cell("number of chunks"), cell(data.n_chunks, "report.n_chunks", cls="l")],
        [label_cell("map decimation (pixels averaged per side)"), cell(data.factor, "report.factor", cls="l")],
        [label_cell("maps computed from"), cell(data.map_source, "report.map_source", cls="l")],
        [label_cell(f"n_valid: {stable}, exact"), cell(data.n_valid, "report.n_valid", cls="l")],
        [label_cell("n_sample: pixels of the report's subsample (histograms, Nuth & Kääb diagnostic, elevation, CDF, "
                    "sampled slope statistics, inside-mask uncertainty, and the verdict when computed here)"),
         cell(len(data.sample.get("row", [])), "report.n_sample", cls="l")],
        [label_cell("passes over the data (each reads every block once: subsample, slope-class counts, maps, sums "
                    "and statistics together; 2 when few pixels are valid)"),
         cell(data.sample_passes, "report.sample_passes", cls="l")],
    ]
    if data.slope_exact:
        rows.append([label_cell("exact statistics and slope tables"),
                     cell("yes: out-of-core quantiles, about twenty more passes", "report.exact_stats", cls="l")])
    if _get(summary, "timing.report_s") is None:
        rows.append([label_cell("report computation time (s)"), cell(elapsed, "report.elapsed_s", cls="l")])
    out = "<h3>This report</h3>" + table(["Item", "Value"], rows)
    if summary:
        skip = {"stats", "stats_before", "stats_after", "steps", "matrix", "coreg", "before", "after", "verdict"}
        srows = key_value_rows(summary, None, skip=tuple(k for k in summary if k in skip))
        if srows:
            out += "<h3>Coregistration run (from the JSON summary)</h3>" + table(["Item", "Value"], srows)
            if _get(summary, "timing.report_s"):
                out += note("timing.report_s and timing.total_s were measured when this block was rendered, the last "
                            "of the page; the JSON holds the same numbers.")
    return out


def _verdict_section(data: ReportData, summary: JSONDict | None, steps: tuple[list[str], list[JSONDict]] | None) -> str:
    verdict, prefix = _get(summary, "verdict"), "verdict"
    sub = verdict.get("subsample") if isinstance(verdict, dict) else None
    src = ("From the coregistration summary: " + (f"n = {sub} (the verdict's own stable subsample, drawn by xdem coreg "
                                                  "while writing the aligned DEM, not the report's)." if sub else
                                                  "its own stable subsample."))
    if not isinstance(verdict, dict):
        if "after" not in data.sample:
            return note("No aligned DEM: no verdict.")
        pixel_m = metric_pixel_size(resolution=data.resolution, geographic=data.units == "°",
                                    latitude=(data.extent[2] + data.extent[3]) / 2.0)
        verdict = compute_verdict(data.sample, pixel_size=float(max(map(abs, data.resolution))), steps=V.flat_steps(steps),
                                  counts={"stable": data.n_valid}, pixel_size_m=pixel_m,
                                  units=data.units)
        prefix = "report.verdict"
        src = f"Computed by the report on its stable subsample, n = {F.sample_n(data.sample)} (no extra pass)."
        if verdict is None:
            return note("No verdict.")
    status = str(verdict.get("status", "ok" if verdict.get("ok") else "not ok"))
    colour, words = V.STATUS_HEAD.get(status, V.STATUS_HEAD["not ok"])
    head = f'<p style="font-size:16px;font-weight:bold;color:{colour}">{_esc(words)}</p>'
    hint = verdict.get("hint")
    if hint:
        head += f'<p><b>Hint:</b> <span data-key="{prefix}.hint">{_esc(hint)}</span></p>'
    rows = key_value_rows(verdict, prefix, skip=("hint", "checks", "failed"), labels=_VERDICT_LABELS)
    return head + V.checks_table(verdict, prefix) + table(["Item", "Value"], rows) + note(
        src + " OK only when every check that could be evaluated passed; each check's threshold and reasoning are "
        "in xdem.verdict_checks and docs/report.md (Verdict).")


def _esc(text: str) -> str:
    import html

    return html.escape(str(text))


def _maps_origin(data: ReportData) -> str:
    """First words of the maps' caption: full resolution, block means or overviews."""
    if data.map_source.startswith("overviews"):
        return (f"Read from the files' {data.map_source}, {data.factor} × {data.factor} pixels per map pixel: GDAL's "
                "overview values are a smoothing resampling, not exact block means (they differ by a fraction of the "
                "elevation change over a few map pixels; no pass over the full data),")
    return "Full resolution" if data.factor == 1 else f"Block means of {data.factor} × {data.factor} pixels"


def build_sections(
    data: ReportData, *, coreg: Coreg | None, summary: JSONDict | None, random_state: int | None = None
) -> list[tuple[str, str, str]]:
    """``(id, title, html)`` of each section, in order, except the processing summary
    (:func:`processing_section`, rendered last)."""
    steps = find_steps(summary, coreg)
    shift, (history, hlabel) = _nk_info(steps[1] if steps else None) if steps else (None, (None, ""))
    limits: dict[str, float] = {n: F.symmetric_limit(data.sample[n]) for n in ("before", "after") if n in data.sample}
    n = F.sample_n(data.sample)
    maps = F.maps_figure(data.maps, extent=data.extent, crs=data.crs, units=data.units, factor=data.factor,
                         limits=limits, stable_map=data.stable_map,
                         from_overviews=data.map_source.startswith("overviews"))
    hist = F.histogram_figure({k: data.sample[k] for k in ("before", "after") if k in data.sample},
                              units=data.units, n_valid=data.n_valid, stable=data.masked)
    outline = " The black line is the outline of the mask (unstable terrain)." if data.stable_map is not None else ""
    sec = [
        ("verdict", "Verdict", _verdict_section(data, summary, steps)),
        ("statistics", "Statistics of elevation differences", _stats_section(data, summary)),
    ]
    inputs = _inputs_section(summary)
    if inputs is not None:
        sec.append(("inputs", "Inputs", inputs))
    inside = inside_section(data, random_state=random_state)
    if inside is not None:
        sec.append(("inside-mask", "Inside the mask", inside))
    sec += [
        ("maps", "Maps of elevation differences",
         img(D.shared_scale_figure(data.maps, extent=data.extent, crs=data.crs, units=data.units,
                                   limit=max(limits.values()) if limits else 1.0, stable_map=data.stable_map),
             "dh before and after on one shared colour scale over a hillshade of the reference")
         + note("Before and after on ONE colour scale (symmetric at the 98th percentile of |dh| before, on the sampled "
                "stable pixels), over a hillshade of the reference: the two panels compare directly. Below, each on "
                "its own scale." + outline + _VOIDS)
         + img(maps, "maps of dh before and after") +
         note(_maps_origin(data) + f" on the reference grid ({data.crs}). dh colours: negative (tba below ref, "
              "e.g. thinning) red, positive "
              "blue. Each dh colour scale is centred on zero and symmetric at the 98th percentile of |dh| on the "
              f"sampled stable pixels (n = {n}; see the limits in the titles)." + outline + _VOIDS)
         + _inside_maps(data)),
        ("histograms", "Histograms of elevation differences", img(hist, "histograms of dh before and after")
         + note(f"The report's subsample, n = {n}: "
                + ("stable pixels only (inlier/exclude masks applied)" if data.masked else "every valid pixel (no mask)")
                + (", valid in ref, tba and aligned (the same pixels before and after)." if "after" in data.sample
                   else ", valid in ref and tba."))),
    ]
    if "slope" in data.sample:
        nk = img(F.nuth_kaab_figure(data.sample, units=data.units, shift=shift), "Nuth and Kaab diagnostic")
        if history:
            nk += img(F.history_figure(history, units=data.units, label=hlabel), "Nuth and Kaab iterations")
        n_sloped = F.nk_terms(data.sample, "before")[0].size
        nk += note(f"n = {n_sloped} (the pixels of the report's subsample of n = {n} with slope ≥ 1°"
                   + (", stable terrain only" if data.masked else "") + "). A horizontal shift "
                   "(dx, dy) makes dh / tan(slope) vary with aspect as dx sin ψ + dy cos ψ (Nuth & Kääb, 2011); after a "
                   "good fit the binned medians lie on zero. The curve is the final fitted shift; for shifts of several "
                   "pixels the relation, a first-order one, underestimates it before coregistration, hence the "
                   "iterations.")
    else:
        nk = note(data.slope_note or "Slope and aspect are not available.")
    sec.append(("nuth-kaab", "Nuth & Kääb diagnostic", nk))
    sec.append(("diagnostics", "Diagnostics: slope, elevation, distribution, profiles", _diagnostics(data)))
    blockwise = _blockwise_section(data, steps)
    if blockwise is not None:
        sec.append(("blockwise", "Blockwise coregistration: tiles and field", blockwise))
    sec.append(("parameters", "Fitted parameters", _parameters_section(steps, summary, coreg)))
    sec.append(("slope-classes", "Statistics by slope class", _slope_section(data)))
    return sec


_VOIDS = (" Grey hatched cells are voids (no data in a DEM: drawn as such, never as dh = 0). Maps are computed "
          "from every pixel (not the subsample).")


def _inside_maps(data: ReportData) -> str:
    """dh inside the mask on its own colour scale (the stable-terrain scale saturates there)."""
    sm = data.stable_map
    if sm is None or not (np.asarray(sm) < 0.5).any() or not any(k in data.maps for k in ("before", "after")):
        return ""
    fig = F.inside_maps_figure({k: v for k, v in data.maps.items() if k in ("before", "after")}, stable_map=sm,
                               extent=data.extent, crs=data.crs, units=data.units)
    return img(fig, "dh inside the mask on its own colour scale") + note(
        "Inside the mask only (map cells less than half stable), each on its own colour scale, from the 1st to the "
        "99th percentile of the dh of its cells (red: negative, blue: positive; only the red or the blue half when "
        "all of them are of one sign): on the stable-terrain scale above, a glacier losing tens of metres is "
        "saturated. Stable cells are left blank." + _VOIDS)


def _diagnostics(data: ReportData) -> str:
    """NMAD/median by slope class (exact tables), dh against elevation and the CDF of |dh| (the
    subsample), row/column profiles (the decimated maps)."""
    which = "stable pixels" if data.masked else "valid pixels"
    parts = []
    if data.slope_classes:
        parts.append(img(D.slope_class_figure(data.slope_classes, units=data.units, exact=data.slope_exact),
                         "NMAD and median by slope class"))
    parts.append(img(D.elevation_figure(data.sample, units=data.units), "dh against elevation"))
    parts.append(img(D.cdf_figure(data.sample, units=data.units), "CDF of |dh|"))
    parts.append(img(D.profiles_figure(data.maps, extent=data.extent, units=data.units, stable_map=data.stable_map),
                     "row and column profiles of dh"))
    return "".join(parts) + note(
        f"By slope class: the tables of the last section. Elevation and CDF: the report's subsample of {which}, "
        f"n = {F.sample_n(data.sample)}. Profiles: "
        "the median of each row and column of the decimated maps" + (" (stable cells only)" if data.masked else "")
        + ". A trend against elevation is a hypsometric bias (e.g. a curvature or resolution effect on glaciers); "
        "a trend along rows or columns is a tilt or an along-track bias. Where the 'before' axis would draw 'after' "
        "flat (more than 5 times its range), 'after' has its own axis: on the right in blue, its zero dotted (top "
        "axis for the CDF).")


#: Rows of the tile table shown in the report (all are in the JSON document).
MAX_TILE_ROWS = 64


def _blockwise_section(data: ReportData, steps: tuple[list[str], list[JSONDict]] | None) -> str | None:
    """Per-tile translations (arrows over a hillshade), the fitted field, and the tile table of
    the first iteration, for each blockwise step."""
    if steps is None:
        return None

    parts = []
    for key, doc in zip(*steps):
        learned = _learned(doc)
        tiles = learned.get("tiles_", learned.get("tiles"))
        fields = learned.get("fields_", learned.get("fields"))
        if not isinstance(tiles, dict) or not isinstance(fields, list) or "ref" not in data.maps:
            continue
        tkey = f"{key}.learned.tiles_" if "tiles_" in learned else f"{key}.tiles"
        built = [field_of(f) for f in fields]

        def total(x: np.ndarray, y: np.ndarray, built: list[ThinPlateField] = built) -> tuple[np.ndarray, ...]:
            px, py, vz = compose(built, x, y)
            return x - px, y - py, vz

        parts.append(img(F.blockwise_figure(tiles, total, ref_map=data.maps["ref"], extent=data.extent, crs=data.crs,
                                            units=data.units), "per-tile translations and the fitted field"))
        cols = ("x", "y", "count", "dx", "dy", "dz", "nmad_before", "nmad_after", "status")
        first = [i for i, it in enumerate(tiles["iteration"]) if it == 0][:MAX_TILE_ROWS]
        rows = [[label_cell(f"tile {i}")] + [cell(tiles[c][i], f"{tkey}.{c}.{i}") for c in cols] for i in first]
        parts.append(table(["", *cols], rows))
        n_first = sum(1 for it in tiles["iteration"] if it == 0)
        parts.append(note(
            "Arrows: the translation fitted on each tile, at the centroid of its valid pixels, to apply to the "
            "to-be-aligned DEM (first iteration); red crosses: rejected tiles (reason in the status column). "
            "The field through the kept tiles (a thin-plate spline per component) is what is applied: "
            "aligned(q) = tba(q − d_xy(q)) + d_z(q), all iterations composed. dx, dy, dz in "
            f"{data.units}; NMAD of dh on the tile before and after the tile's own fit."
            + (f" First {MAX_TILE_ROWS} of {n_first} tiles; all are in the JSON document." if n_first > MAX_TILE_ROWS
               else "")))
    return "".join(parts) if parts else None
