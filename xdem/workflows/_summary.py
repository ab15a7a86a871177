"""What ``xdem coreg`` reports about a run: fitted steps, matrix, frame, dh statistics before
and after (sampled while writing, sampled in one pass, or exact), the verdict's sample, and
the run's JSON document helpers (:func:`jsonable`, :func:`dump_json`, :func:`peak_rss_mb`,
:func:`check_new_output`).

Used by :func:`xdem.workflows.run_coreg`; ``xdem.cli.coreg`` re-exports the public names.

Examples
--------
>>> stats_method(1000).startswith("median, NMAD, mean, std, RMSE and LE90 on a reproducible subsample of about 1000")
True
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable, Mapping, Sized
from pathlib import Path
from typing import cast

import dask.array as da
import numpy as np
import xarray as xr
from dask.delayed import Delayed

from xdem.coreg import METHODS
from xdem.coreg._frames import frame_of
from xdem.coreg._matrix import matrix_about
from xdem.coreg._transform import merged_transform, steps_of
from xdem.coreg.base import Coreg
from xdem.errors import XdemError
from xdem.io import remote, upload
from xdem.io.atomic import check_output_path, write_text_atomic
from xdem.io.cog import BlockStats
from xdem.io.grid import align_pair, dask_data
from xdem.io.jsondoc import jsonable
from xdem.masks import stable_mask_like
from xdem.stats import STATS_SUBSAMPLE, dh_stats_finish, dh_stats_tasks, dh_stats_while_writing, robust_summary, stats_method
from xdem.typing import MaskLike
from xdem.verdict import verdict_while_writing as _verdict_while_writing
from xdem.workflows.document import (
    DhStats,
    FrameSummary,
    RigidPart,
    StatsRecord,
    StepSummary,
    VerdictRecord,
    stats_record,
)

__all__ = ["STATS_SUBSAMPLE", "stats_method", "steps_of", "steps_summary", "merged_matrix",
           "rigid_document", "translation_in_pixels", "transform_lines", "dh_stats", "sampled_stats",
           "stats_while_writing", "verdict_while_writing", "frame_summary", "report_writer", "jsonable", "dump_json",
           "peak_rss_mb", "check_new_output", "verdict_lines"]

#: Turns the per-block results of :func:`stats_while_writing` into the statistics by name.
StatsFinisher = Callable[[list[object]], Mapping[str, object]]
#: Turns the per-block results of :func:`verdict_while_writing` into the verdict's sample.
SampleFinisher = Callable[[list[object]], Mapping[str, np.ndarray]]


def steps_summary(coreg: Coreg) -> list[StepSummary]:
    """One flat dict per fitted step: ``method``, learned values without the trailing ``_``
    (``shift_x_`` -> ``shift_x``), ``history_columns`` (what each ``history`` entry holds) when
    there is a history, and ``params``."""
    doc = coreg.to_dict()
    docs = doc["steps"] if doc["method"] == "CoregPipeline" else [doc]
    out: list[StepSummary] = []
    for d in docs:
        flat: StepSummary = {"method": d["method"]}
        for k, v in d.get("learned", {}).items():
            key = k[:-1] if k.endswith("_") else k
            flat[f"learned_{key}" if key in ("method", "params") else key] = v
        if "history" in flat:  # what each history entry holds (Coreg.history_labels)
            labels = getattr(METHODS.get(d["method"].lower()), "history_labels", ())
            flat["history_columns"] = list(labels) if labels else None
        flat["params"] = d.get("params", {})
        out.append(flat)
    return out


def translation_in_pixels(translation: object, dem: xr.DataArray) -> list[float] | None:
    """A horizontal translation in pixels of ``dem``'s grid (``None`` for a geographic grid,
    whose correction is in metres of a UTM zone, or without a translation).

    Examples
    --------
    >>> import xdem
    >>> translation_in_pixels([2.0, -1.0, 0.5], xdem.open_dem(xdem.examples.get_path("lidar")))  # 1 m pixels
    [2.0, -1.0]
    """
    if not isinstance(translation, (list, tuple)) or len(translation) < 2 or dem.rio.crs is None \
            or dem.rio.crs.is_geographic:
        return None
    rx, ry = (abs(float(v)) for v in dem.rio.resolution())
    return [float(translation[0]) / rx, float(translation[1]) / ry]


def rigid_document(coreg: Coreg, dem: xr.DataArray) -> RigidPart:
    """The keys of a run's JSON document (DEM pair or points) giving the merged rigid transform
    (:func:`xdem.coreg.merged_transform`), ``translation_px`` in pixels of ``dem``'s grid: ``matrix``
    (about the CRS origin, ``matrix_about: "origin"``), ``matrix_about_centre`` (the same
    transform about ``rotation_centre``, upstream xdem's ``to_matrix()`` frame),
    ``matrix_is_complete``, ``rotations_deg``, ``rotation_centre``, ``translation``.

    Examples
    --------
    >>> import xdem
    >>> t = xdem.coreg.RigidTransform.from_rotations(rz=1e-6, degrees=False, translation=(1.0, 0.0, 0.0),
    ...                                               centroid=(4e5, 8.7e6, 0.0))
    >>> doc = rigid_document(t, xdem.open_dem(xdem.examples.get_path("lidar")))
    >>> doc["matrix_about"], round(doc["matrix"][0][3], 3), round(doc["matrix_about_centre"][0][3], 3)
    ('origin', 9.7, 1.0)
    """
    rigid = merged_transform(coreg)
    return {
        "matrix": rigid["matrix"],
        "matrix_about": "origin",
        "matrix_about_centre": matrix_about(np.asarray(rigid["matrix"]), rigid["centre"]).tolist(),
        "matrix_is_complete": rigid["complete"],
        "rotations_deg": rigid["rotations_deg"],
        "rotation_centre": rigid["centre"],
        "translation": rigid["translation"],
        "translation_px": translation_in_pixels(rigid["translation"], dem),
    }


def merged_matrix(coreg: Coreg) -> tuple[list[list[float]], bool]:
    """``(matrix, complete)`` of :func:`xdem.coreg.merged_transform`."""
    m = merged_transform(coreg)
    return m["matrix"], m["complete"]


def transform_lines(doc: Mapping[str, object]) -> list[str]:
    """Human lines describing the merged rigid transform of a run's document (keys ``matrix``,
    ``rotations_deg``, ``rotation_centre``, ``translation``): empty for a pure translation of a
    single step (its step line says it all).

    Examples
    --------
    >>> doc = {"steps": [{}], "rotations_deg": [0.0, 0.01, -0.25], "rotation_centre": [5.0e5, 4.6e6, 1200.0],
    ...        "translation": [1.5, -2.0, 0.25], "matrix_is_complete": True}
    >>> (line,) = transform_lines(doc)
    >>> line.split(" about ")[0]
    'rigid transform: rotations rx=+0.000000°, ry=+0.010000°, rz=-0.250000°'
    >>> line.split(" about ")[1]
    '(500000.000, 4600000.000, 1200.000), then translation (+1.5000, -2.0000, +0.2500)'
    """
    rot, steps = doc.get("rotations_deg"), doc.get("steps", [])
    n = len(steps) if isinstance(steps, Sized) else 0
    if not isinstance(rot, list) or (not any(rot) and n < 2):
        return []
    t = _triple(doc.get("translation"))
    merged = f" ({n} steps merged: one resampling)" if n > 1 and doc.get("matrix_is_complete") else ""
    text = f"rigid transform{merged}: "
    if any(rot):
        c = _triple(doc.get("rotation_centre"))
        text += (f"rotations rx={rot[0]:+.6f}°, ry={rot[1]:+.6f}°, rz={rot[2]:+.6f}° about ({c[0]:.3f}, {c[1]:.3f}, "
                 f"{c[2]:.3f}), then ")
    text += f"translation ({t[0]:+.4f}, {t[1]:+.4f}, {t[2]:+.4f})"
    if doc.get("matrix_is_complete") is False:
        text += "; other corrections are applied on top of it"
    return [text]


def _triple(value: object) -> list[float]:
    """A document's 3-vector, or NaNs when it is missing."""
    return value if isinstance(value, list) and value else [float("nan")] * 3


def dh_stats(ref: xr.DataArray, other: xr.DataArray, *, inlier_mask: MaskLike = None,
             exclude_mask: MaskLike = None) -> DhStats:
    """Exact median, NMAD and count of ``dh = other - ref`` on the reference grid, on
    valid stable pixels (inside ``inlier_mask``, outside ``exclude_mask``), out of core."""
    ref_g, other_g = align_pair(ref, other)
    r = ref_g.data
    o = dask_data(other_g).rechunk(r.chunks)
    stable = stable_mask_like(ref_g, inlier_mask=inlier_mask, exclude_mask=exclude_mask)
    dh = da.where(stable, o.astype(np.float64) - r.astype(np.float64), np.nan)
    s = robust_summary(dh)
    return cast(DhStats, {"median": s["median"], "nmad": s["nmad"], "count": s["count"], "min": s["min"], "max": s["max"]})


#: Pixels of a fully valid grid drawn for the before/after statistics.
def _stats_task(ref: xr.DataArray, tba: xr.DataArray, aligned: xr.DataArray, *, inlier_mask: MaskLike,
                exclude_mask: MaskLike, random_state: int | None, subsample: int = STATS_SUBSAMPLE) -> Delayed:
    """Lazy before/after statistics on the reference grid (:func:`xdem.stats.dh_stats_tasks`)."""
    ref_g, tba_g = align_pair(ref, tba)
    ref_g, aligned_g = align_pair(ref_g, aligned)
    if tba_g.shape != ref_g.shape:
        ref_g, tba_g = align_pair(ref_g, tba_g)
    stable = stable_mask_like(ref_g, inlier_mask=inlier_mask, exclude_mask=exclude_mask)
    task: Delayed = dh_stats_tasks(ref_g.data, {"before": tba_g.data, "after": aligned_g.data}, stable=stable,
                                    subsample=subsample, random_state=random_state)
    return task


def stats_while_writing(ref: xr.DataArray, tba: xr.DataArray, aligned: xr.DataArray, *, inlier_mask: MaskLike,
                        exclude_mask: MaskLike, random_state: int | None,
                        subsample: int = STATS_SUBSAMPLE) -> tuple[BlockStats, StatsFinisher]:
    """The statistics of :func:`sampled_stats` as a :class:`xdem.io.cog.BlockStats` computed
    while ``aligned`` is written (REF, TBA and ALIGNED on one grid), and their finisher."""
    stable = stable_mask_like(ref, inlier_mask=inlier_mask, exclude_mask=exclude_mask)
    return dh_stats_while_writing(ref.data, {"after": aligned.data, "before": tba.data}, stable=stable,
                                  subsample=subsample, random_state=random_state)


def _shown(value: float, unit: str) -> str:
    """A check's number for people: fractions in %, ratios bare, others with their unit."""
    if unit == "fraction":
        return f"{100 * value:.3g} %"
    return f"{value:.4g}" if unit == "ratio" else f"{value:.4g} {unit}"


def verdict_lines(v: VerdictRecord) -> list[str]:
    """Human lines of a run's ``verdict``: the status and the checks, the residual amplitude
    and NMAD ratio, then for each failing check its value, threshold and hint.

    Examples
    --------
    >>> check = {"name": "noise", "value": 15.3065, "threshold": 1.43, "unit": "m", "passed": False,
    ...          "hint": "NMAD after is too large", "passes_if": "<="}
    >>> v = {"status": "not ok", "checks": [check], "residual_amplitude_m": None, "nmad_ratio": 1.0, "n_points": 9}
    >>> for line in verdict_lines(v):
    ...     print(line)
    Verdict: NOT OK (failed: noise; 0 of 1 checks passed)
      residual aspect-dependent amplitude n/a, NMAD after/before 1.000 (9 stable sampled pixels)
      hint (noise: 15.31 m, not <= 1.43 m): NMAD after is too large
    """
    checks = v.get("checks") or []
    failed = [c for c in checks if c.get("passed") is False]
    amp, ratio = v.get("residual_amplitude_m"), v.get("nmad_ratio")
    status = str(v.get("status", "ok" if v.get("ok") else "not ok")).upper()
    skipped = sum(c.get("passed") is None for c in checks)
    head = (f"failed: {', '.join(c['name'] for c in failed)}; " if failed else "") + (
        f"{sum(c.get('passed') is True for c in checks)} of {len(checks)} checks passed"
        + (f", {skipped} not evaluated" if skipped else ""))
    lines = [f"Verdict: {status} ({head})",
             "  residual aspect-dependent amplitude " + ("n/a" if amp is None else f"{amp:.3f} m")
             + ", NMAD after/before " + ("n/a" if ratio is None else f"{ratio:.3f}")
             + f" ({v['n_points']} stable sampled pixels)"]
    for c in failed:
        lines.append(f"  hint ({c['name']}: {_shown(c['value'], c['unit'])}, not {c.get('passes_if', '<=')} "
                     f"{_shown(c['threshold'], c['unit'])}): {c['hint']}")
    if not checks and v.get("hint"):
        lines.append(f"  hint: {v['hint']}")
    return lines


def verdict_while_writing(ref: xr.DataArray, aligned: xr.DataArray, *, inlier_mask: MaskLike, exclude_mask: MaskLike,
                          random_state: int | None, finishers: list[SampleFinisher]
                          ) -> BlockStats:
    """The :class:`xdem.io.cog.BlockStats` drawing the verdict's sample while ``aligned`` is
    written (:func:`xdem.verdict.verdict_while_writing`); its finisher is appended to ``finishers``."""
    stable = stable_mask_like(ref, inlier_mask=inlier_mask, exclude_mask=exclude_mask)
    block, finish = _verdict_while_writing(ref, aligned.data, stable=stable, random_state=random_state)
    finishers.append(finish)
    typed: BlockStats = block
    return typed


def sampled_stats(
    ref: xr.DataArray, tba: xr.DataArray, aligned: xr.DataArray, *, inlier_mask: MaskLike = None,
    exclude_mask: MaskLike = None, random_state: int | None = None, subsample: int = STATS_SUBSAMPLE,
) -> StatsRecord:
    """Median and NMAD of dh before (``tba - ref``) and after (``aligned - ref``) on ONE
    reproducible subsample of stable valid pixels of the reference grid (one pass over the
    data, :func:`xdem.stats.sampled_dh_stats`); counts are exact."""
    task = _stats_task(ref, tba, aligned, inlier_mask=inlier_mask, exclude_mask=exclude_mask, random_state=random_state,
                       subsample=subsample)
    return stats_record(stats_method(subsample), dh_stats_finish(task.compute()))


def frame_summary(coreg: Coreg, ref: xr.DataArray) -> FrameSummary:
    """The CRS the correction was fitted in and applied through, and why that one."""
    frame = frame_of(coreg)
    geographic = ref.rio.crs is not None and ref.rio.crs.is_geographic
    return {
        "crs": frame,
        "units": "metre" if geographic else (ref.rio.crs.linear_units if ref.rio.crs is not None else None),
        "why": ("the reference is geographic: coregistered in the UTM zone of its centre" if geographic
                else "the reference's CRS"),
    }


def report_writer() -> Callable[..., object]:
    """``xdem.report.write_report``, or a clear error if the report module is not available."""
    try:
        # lazy: the optional report module, imported (and its absence an error) only when a report is asked
        mod = importlib.import_module("xdem.report")
    except ModuleNotFoundError as exc:
        if exc.name not in ("xdem.report",):
            raise XdemError(f"--report needs xdem.report, which failed to import ({exc}); install the missing package") from exc
        raise XdemError("--report is not available: this xdem has no xdem.report module; drop --report") from exc
    if not hasattr(mod, "write_report"):
        raise XdemError("--report is not available: xdem.report has no write_report(); drop --report")
    writer: Callable[..., object] = mod.write_report
    return writer


# ---------------------------------------------------------------------------- the JSON document, outputs


def dump_json(doc: object, *, path: str | os.PathLike[str] | None = None, overwrite: bool = True) -> str:
    """Strict JSON text of ``doc`` (via :func:`jsonable`); also written atomically to ``path``
    (:func:`xdem.io.atomic.write_text_atomic`: without ``overwrite``, a file that appeared at
    ``path`` meanwhile is never replaced). An ``s3://`` path is staged and uploaded when the
    run's outputs are final (:func:`xdem.io.upload.stage_text`)."""
    text = json.dumps(jsonable(doc), indent=2, allow_nan=False)
    if path is not None and remote.is_remote(path):
        upload.stage_text(path, text + "\n", overwrite=overwrite, what="--json-out file")
    elif path is not None:
        write_text_atomic(path, text + "\n", overwrite=overwrite)
    return text


def peak_rss_mb(*, children: bool = False) -> float | None:
    """Peak resident memory of this process (or of its finished children), in MB."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        import psutil

        return None if children else psutil.Process().memory_info().rss / 2**20
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    kb = resource.getrusage(who).ru_maxrss
    scale = 1 / 2**20 if sys.platform == "darwin" else 1 / 2**10  # bytes on macOS, KiB on Linux
    return round(kb * scale, 1)


def check_new_output(path: str | os.PathLike[str], *, overwrite: bool, inputs: dict[str, str | None],
                     what: str) -> Path | str:
    """Refuse an output path that is an input, exists without ``overwrite``, or has no folder
    (:func:`xdem.io.atomic.check_output_path`, with the CLI's ``--overwrite`` hint); an
    ``s3://`` (``/vsis3/``) output is asked of its store (:func:`xdem.io.upload.check_output_url`).

    Cheap checks meant to run before any computation. Returns the absolute path, or the URL.

    Raises
    ------
    xdem.errors.OutputError
    """
    if remote.is_remote(path):
        return upload.check_output_url(path, overwrite=overwrite, what=what, overwrite_hint="--overwrite",
                                       inputs=[(f"the same object as the {label}", src) for label, src in inputs.items()
                                               if src])
    return check_output_path(path, overwrite=overwrite, what=what, overwrite_hint="--overwrite",
                             inputs=[(f"the same file as the {label}", src) for label, src in inputs.items() if src])
