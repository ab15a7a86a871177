"""What ``xdem coreg`` does once its command line is parsed: build the method, run
:func:`xdem.workflows.run_coreg`, print the summary (the click command is :mod:`xdem.cli.coreg`,
which imports this module only then, so that its usage errors start fast).

``--method`` is a method spec of :mod:`xdem.coreg.spec`; its errors become usage errors (exit
code 2) naming the option.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import click
import xarray as xr

from xdem.cli._common import Progress, check_scheduler, one_line_warnings, stdout_to_stderr, use_scheduler
from xdem.cli.progress import iteration_lines
from xdem.coreg import DirectionalBias
from xdem.coreg.base import Coreg
from xdem.coreg.spec import Blockwise, MethodSpecError, Step
from xdem.coreg.spec import build_coreg as _build_coreg
from xdem.coreg.spec import resolve_methods as _resolve_methods
from xdem.points import is_points_source
from xdem.typing import MaskLike
from xdem.workflows import _summary as S
from xdem.workflows.coreg import CoregRequest, request_paths, run_coreg
from xdem.workflows.document import StatsRecord
from xdem.workflows.filters import OutlierFilters
from xdem.workflows.points import NOT_FOR_POINTS
from xdem.workflows.request import CheckedPaths

__all__ = ["run", "request_from_options", "resolve_methods", "build_coreg", "dh_stats", "sampled_stats", "check_raster_output",
           "RASTER_OUTPUTS", "STATS_SUBSAMPLE"]

#: Suffixes ``-o`` (and ``--dh-out``, ``--stable-mask-out``) may end with when the output is a
#: DEM: the COG writer writes GeoTIFFs.
RASTER_OUTPUTS: tuple[str, ...] = (".tif", ".tiff")


@contextlib.contextmanager
def _usage_errors() -> Iterator[None]:
    """A :class:`~xdem.coreg.spec.MethodSpecError` as a usage error on the option it names."""
    try:
        yield
    except MethodSpecError as exc:
        raise click.BadParameter(str(exc), param_hint=f"'{exc.option}'") from None


def resolve_methods(text: str) -> list[Step]:
    """:func:`xdem.coreg.spec.resolve_methods`, an unknown name a usage error (:class:`click.BadParameter`)."""
    with _usage_errors():
        return _resolve_methods(text)


def build_coreg(items: Sequence[Step], options: Mapping[str, object]) -> Coreg:
    """:func:`xdem.coreg.spec.build_coreg`, an option no step takes a usage error (:class:`click.BadParameter`)."""
    with _usage_errors():
        return _build_coreg(items, options)


def _angle_note(classes: Sequence[Step], angle: float | None) -> str | None:
    """The line saying which track angle a directional bias step uses when ``--angle`` is not given."""
    flat: list[type] = []
    for c in classes:
        flat += list(c.inner) if isinstance(c, Blockwise) else [c]
    if angle is not None or DirectionalBias not in flat:
        return None
    default = inspect.signature(DirectionalBias).parameters["angle"].default
    return (f"directionalbias: no --angle given, using {default:g} degrees (clockwise from east, upstream xdem's "
            "convention: the bias varies with easting); give --angle, the satellite's along-track direction, e.g. "
            "--angle 90 for a north-south track")



# What a run reports lives in the library workflow (xdem.workflows).
dh_stats = S.dh_stats
#: Pixels of a fully valid grid drawn for the before/after statistics (read when a run starts).
STATS_SUBSAMPLE = S.STATS_SUBSAMPLE



def sampled_stats(
    ref: xr.DataArray, tba: xr.DataArray, aligned: xr.DataArray, *, inlier_mask: MaskLike = None,
    exclude_mask: MaskLike = None,
    random_state: int | None = None,
) -> StatsRecord:
    """:func:`xdem.workflows._summary.sampled_stats` on :data:`STATS_SUBSAMPLE` pixels."""
    return S.sampled_stats(ref, tba, aligned, inlier_mask=inlier_mask, exclude_mask=exclude_mask,
                           random_state=random_state, subsample=STATS_SUBSAMPLE)


def _stats_while_writing(ref: Any, tba: Any, aligned: Any, *, inlier_mask: Any, exclude_mask: Any,
                         random_state: int | None) -> tuple[Any, Any]:
    """:func:`xdem.workflows._summary.stats_while_writing` on :data:`STATS_SUBSAMPLE` pixels."""
    return S.stats_while_writing(ref, tba, aligned, inlier_mask=inlier_mask, exclude_mask=exclude_mask,
                                 random_state=random_state, subsample=STATS_SUBSAMPLE)


def check_raster_output(path: str | None, option: str, *, zarr: bool = False) -> None:
    """Refuse a DEM output whose suffix is not one of :data:`RASTER_OUTPUTS` (or ``.zarr`` where
    a Zarr store may be written) (usage error).

    Examples
    --------
    >>> check_raster_output("aligned.tif", "-o")
    >>> check_raster_output("aligned.zarr", "-o", zarr=True)
    >>> check_raster_output("aligned.png", "-o")
    Traceback (most recent call last):
    ...
    click.exceptions.BadParameter: must end in .tif or .tiff (a Cloud-Optimized GeoTIFF is written), got 'aligned.png'
    """
    if path is None:
        return

    suffix = Path(path).suffix.lower()
    if suffix in RASTER_OUTPUTS or (zarr and suffix == ".zarr"):
        return
    store = " or .zarr (a Zarr store)" if zarr else ""
    raise click.BadParameter(
        f"must end in {' or '.join(RASTER_OUTPUTS)} (a Cloud-Optimized GeoTIFF is written){store}, got '{path}'",
        param_hint=f"'{option}'")


class _StderrProxy:
    """stderr for the per-iteration lines, clearing the run's progress bar first."""

    def __init__(self, made: list[Any]) -> None:
        self.made = made

    def write(self, text: str) -> None:
        if self.made and self.made[-1].bar is not None:
            self.made[-1].bar.clear()
        click.echo(text, err=True, nl=False)

    def flush(self) -> None:
        pass



def _fmt_step(step: dict) -> str:
    parts = []
    rotations = [step.get(f"rotation_{a}") for a in "xyz"]
    rotates = all(isinstance(r, (int, float)) for r in rotations) and any(rotations)
    if rotates:
        c = step.get("centroid") or [float("nan")] * 3
        parts.append(f"rotations rx={rotations[0]:+.6f}°, ry={rotations[1]:+.6f}°, rz={rotations[2]:+.6f}° about "
                     f"({c[0]:.3f}, {c[1]:.3f}, {c[2]:.3f}), then translation")
    for key in ("shift_x", "shift_y", "shift_z"):
        if isinstance(step.get(key), (int, float)):
            parts.append(f"{key}={step[key]:+.4f}")
    extra = []
    if isinstance(step.get("tiles"), dict):  # BlockwiseCoreg: the tiles and the field's range
        tiles = step["tiles"]
        last = max(tiles["iteration"]) if tiles["iteration"] else 0
        status = [s for s, it in zip(tiles["status"], tiles["iteration"]) if it == last]
        rejected = [s for s in status if s != "used"]
        why: dict[str, int] = {}
        for s in rejected:
            key = s.removeprefix("rejected: ").split(" (")[0].split(":")[0]
            why[key] = why.get(key, 0) + 1
        first = [i for i, it in enumerate(tiles["iteration"]) if it == 0 and tiles["status"][i] == "used"]
        ranges = []
        for key in ("dx", "dy", "dz"):
            vals = [tiles[key][i] for i in first if isinstance(tiles[key][i], (int, float))]
            if vals:
                ranges.append(f"{key} {min(vals):+.3f} .. {max(vals):+.3f}")
        parts.append(f"{len(status)} tiles, {len(status) - len(rejected)} used"
                     + (" (rejected: " + ", ".join(f"{n} {k}" for k, n in why.items()) + ")" if why else "")
                     + (f"; tile translations {', '.join(ranges)}" if ranges else ""))
    if "n_iterations" in step:
        extra.append(f"{step['n_iterations']} iterations{'' if step.get('converged', True) else ', NOT converged'}")
    if step.get("horizontal_constrained") is False:
        extra.append("horizontal shift not constrained (flat terrain)")
    if "count" in step:
        extra.append(f"{step['count']} points")
    if isinstance(step.get("tilt_m_per_km"), (int, float)):
        way = step.get("tilt_direction_deg")
        towards = f" down towards {way:.0f}° from north" if way is not None else ""
        extra.append(f"tilt {step['tilt_m_per_km']:.3f} m/km" + towards
                     + f", ramp {step.get('ramp_amplitude', float('nan')):.3f} m across the DEM")
    text = (" ".join(parts[:1]) + " " + ", ".join(parts[1:]) if rotates else ", ".join(parts)) if parts else "fitted"
    return f"{step['method']}: {text}" + (f" ({'; '.join(extra)})" if extra else "")


def _print_summary(doc: Mapping[str, Any]) -> None:
    echo = lambda s="": click.echo(s, err=True)  # noqa: E731
    echo("")
    echo("Coregistration:")
    for step in doc["steps"]:
        echo(f"  {_fmt_step(step)}")
    for line in S.transform_lines(doc):
        echo(f"  {line}")
    if doc.get("frame", {}).get("crs"):
        echo(f"  fitted and applied in {doc['frame']['crs']} ({doc['frame']['why']}); output on the grid of "
             f"{doc.get('output_grid', 'tba').upper()}")
    for note in (doc.get("input_checks") or {}).get("notes", []):
        echo(f"Note: {note}")
    if doc.get("stats"):
        b, a = doc["stats"]["before"], doc["stats"]["after"]
        how = "exact" if doc["stats"]["method"].startswith("exact") else f"median/NMAD on {b.get('sampled', '?')} sampled pixels"
        more = [k for k in ("mean", "rmse", "le90") if isinstance(b.get(k), (int, float))]
        echo(f"dh = tba - ref on stable pixels of the reference grid ({how}{', mean, RMSE, LE90' if more else ''}; "
             "exact counts):")
        names = {"mean": "mean", "rmse": "RMSE", "le90": "LE90"}
        echo(f"  {'':8}{'median':>12}{'NMAD':>12}" + "".join(f"{names[k]:>12}" for k in more) + f"{'count':>12}")
        for label, s in (("before", b), ("after", a)):
            echo(f"  {label:8}{s['median']:>12.4f}{s['nmad']:>12.4f}" + "".join(f"{s[k]:>12.4f}" for k in more)
                 + f"{s['count']:>12d}")
    if doc.get("verdict"):
        for line in S.verdict_lines(doc["verdict"]):
            echo(line)
    f = doc.get("filters")
    if f:
        kept = f.get("kept_fraction_sampled")
        echo(f"Filters (fit only): {_filter_limits(f)}; "
             + ("" if kept is None else f"{100 * kept:.1f} % of {f['sampled']} sampled stable pixels kept"))
    t = doc["timing"]
    echo(f"Output: {doc['output']}")
    for key, label in (("dh_output", "dh after"), ("stable_mask_output", "Stable mask")):
        if doc.get(key):
            echo(f"{label}: {doc[key]}")
    if doc.get("report"):
        echo(f"Report: {doc['report']}")
    echo(
        f"Time: fit {t['fit_s']:.1f} s, write {t['write_s']:.1f} s, stats {t['stats_s']:.1f} s, "
        f"verdict {t.get('verdict_s', 0.0):.1f} s, " + (f"report {t['report_s']:.1f} s, " if doc.get("report") else "")
        + f"total {t['total_s']:.1f} s; "
        f"peak memory {doc['peak_rss_mb']:.0f} MB; scheduler {doc['scheduler']}"
    )


def _filter_limits(f: Mapping[str, Any]) -> str:
    """The limits of a document's ``filters``, e.g. ``slope <= 30°, |dh - 2.5| <= 3 x 0.5 m``."""
    limits = [f"slope >= {f['min_slope_deg']:g}°" if f["min_slope_deg"] is not None else "",
              f"slope <= {f['max_slope_deg']:g}°" if f["max_slope_deg"] is not None else "",
              (f"|dh - {f['dh_median']:.3f}| <= {f['nmad_filter']:g} x {f['dh_nmad']:.3f} m"
               if f["nmad_filter"] is not None else "")]
    return ", ".join(x for x in limits if x)


def _print_points_summary(doc: Mapping[str, Any]) -> None:
    echo = lambda s="": click.echo(s, err=True)  # noqa: E731
    p = doc["points"]
    echo("")
    echo("Coregistration:")
    for step in doc["steps"]:
        echo(f"  {_fmt_step(step)}")
    echo(f"Points: {p['count']} from {p['file']} ({p['crs']}), the {p['side'].replace('_', ' ')}; "
         f"{p['n_outside']} without a valid DEM value, {p['n_outliers']} outliers rejected")
    echo("dh = tba - ref at the points:")
    echo(f"  {'':24}{'median':>12}{'NMAD':>12}{'RMSE':>12}{'count':>10}")
    for label, key in (("before", "before"), ("after", "after"), ("after, without outliers", "after_without_outliers")):
        s = doc["stats"][key]
        if s["count"]:
            echo(f"  {label:24}{s['median']:>12.4f}{s['nmad']:>12.4f}{s['rmse']:>12.4f}{s['count']:>10d}")
    f = doc.get("filters")
    if f:
        echo(f"Filters (fit only): {_filter_limits(f)}; {f['kept_points']} of {f['stable_points']} points on valid "
             f"DEM pixels kept ({f['kept_by_slope']} within the slope limits)")
    t = doc["timing"]
    echo(f"Output: {doc['output']}")
    echo(f"Time: read {t['read_s']:.1f} s, fit {t['fit_s']:.1f} s, write and stats {t['write_s']:.1f} s, "
         + (f"report {t['report_s']:.1f} s, " if "report_s" in t else "")
         + f"total {t['total_s']:.1f} s; peak memory {doc['peak_rss_mb']:.0f} MB; scheduler {doc['scheduler']}")


def _checked_options(p: Mapping[str, Any]) -> list[Step]:
    """The method's steps; the usage errors of ``-o``, ``--dh-out``, ``--stable-mask-out`` and
    the slope limits raised, the note on ``--angle`` printed."""
    classes = resolve_methods(p["method"])
    ref, tba = p["ref"], p["tba"]
    if not is_points_source(tba):
        check_raster_output(p["output"], "-o", zarr=True)
    if is_points_source(ref) or is_points_source(tba):
        for flag, key in (("--dh-out", "dh_out"), ("--stable-mask-out", "stable_mask_out")):
            if p[key] is not None:
                raise click.BadParameter(NOT_FOR_POINTS[key], param_hint=f"'{flag}'")
        for flag in ("ref_vcrs", "tba_vcrs", "force_vcrs", "to_vcrs"):
            if p[flag] is not None:
                raise click.BadParameter("is for two DEMs (a points file's heights are taken as they are)",
                                         param_hint=f"'--{flag.replace('_', '-')}'")
    if p["force_vcrs"] is not None and (p["ref_vcrs"] is not None or p["tba_vcrs"] is not None):
        raise click.BadParameter("declares both inputs: give it, or --ref-vcrs/--tba-vcrs, not both",
                                 param_hint="'--force-vcrs'")
    check_raster_output(p["dh_out"], "--dh-out")
    check_raster_output(p["stable_mask_out"], "--stable-mask-out")
    min_slope, max_slope = p["min_slope"], p["max_slope"]
    if min_slope is not None and max_slope is not None and min_slope >= max_slope:
        raise click.BadParameter(f"must be below --max-slope ({max_slope:g}), got {min_slope:g}",
                                 param_hint="'--min-slope'")
    note = _angle_note(classes, p["angle"])
    if note is not None:
        click.echo(f"Note: {note}", err=True)
    return classes


def request_from_options(params: Mapping[str, object]) -> tuple[CoregRequest, CheckedPaths]:
    """The :class:`~xdem.workflows.CoregRequest` of the command's options (click's ``params``
    dict) and its paths, checked (:func:`xdem.workflows.coreg.request_paths`) before the
    method is built, so that nobody waits for a fit that cannot be saved.

    Raises
    ------
    click.BadParameter
        A usage error (exit code 2).
    xdem.errors.XdemError
        A missing input or a refused output (exit code 1).
    """
    p: Mapping[str, Any] = params  # each value has its option's click type (xdem.cli.coreg's decorators)
    classes = _checked_options(p)
    options = {"poly_order": p["poly_order"], "angle": p["angle"], "terrain_attribute": p["terrain_attribute"],
               "fit_or_bin": p["fit_or_bin"], "subsample": p["subsample"], "random_state": p["random_state"],
               "initial_shift": p["initial_shift"], "on_divergence": "warn" if p["allow_divergence"] else None,
               "resampling": p["resampling"], "block_size": p["block_size"],
               "block_iterations": p["block_iterations"], "fit_interpolation": p["fit_interpolation"]}
    request = CoregRequest(
        reference=p["ref"], to_be_aligned=p["tba"], output=p["output"], inlier_mask=p["inlier_mask"],
        exclude_mask=p["exclude_mask"], json_out=p["json_out"], report=p["report"], coreg=None,
        method=p["method"], options=options, grid="ref" if p["out_grid"] == "ref" else "tba",
        random_state=p["random_state"], chunks=p["chunks"], overwrite=p["overwrite"], resume=p["resume"],
        stats="none" if p["no_stats"] else ("exact" if p["exact_stats"] else "sampled"),
        stats_subsample=STATS_SUBSAMPLE, z_column=p["z_column"], points_crs=p["points_crs"], dh_out=p["dh_out"],
        stable_mask_out=p["stable_mask_out"],
        filters=OutlierFilters(min_slope=p["min_slope"], max_slope=p["max_slope"], nmad_filter=p["nmad_filter"]),
        **{f"{side}_{what}": p[f"{side}_{what}"] for side in ("ref", "tba")
           for what in ("band", "nodata", "vertical_scale")},
        **{f"{side}_vcrs": p["force_vcrs"] or p[f"{side}_vcrs"] for side in ("ref", "tba")}, to_vcrs=p["to_vcrs"],
        geoid_interpolation=p["geoid_interpolation"],
    )
    paths = request_paths(request)
    return dataclasses.replace(request, coreg=build_coreg(classes, options)), paths


def run(params: Mapping[str, object]) -> None:
    """The command :func:`xdem.cli.coreg.coreg` once parsed (click's dict of its options):
    the request, :func:`xdem.workflows.run_coreg` in the command's contexts, the summary."""
    t_start = time.perf_counter()
    p: Mapping[str, Any] = params  # each value has its option's click type (xdem.cli.coreg's decorators)
    quiet, verbose, workers = p["quiet"], p["verbose"], p["workers"]
    sched = check_scheduler(p["scheduler"], workers)
    request, paths = request_from_options(p)

    # the stages of the run, for one progress bar over all of it (percent and ETA)
    plan = [*(["outlier filters"] if request.filters is not None and request.filters.active else []), "fitting",
            "writing", *(["statistics"] if params["exact_stats"] else []), *([] if params["no_stats"] else ["verdict"]),
            *(["writing the report"] if params["report"] else [])]
    made: list[Any] = []

    def progress(sinfo: Any) -> Any:
        made.append(Progress(quiet=quiet, client=sinfo["client"], plan=plan))
        return made[-1]

    @contextlib.contextmanager
    def environment() -> Any:
        with contextlib.ExitStack() as stack:
            stack.enter_context(stdout_to_stderr())  # progress bars and stray prints never reach stdout
            stack.enter_context(one_line_warnings())
            if verbose and not quiet:
                stack.enter_context(iteration_lines(None, stream=_StderrProxy(made)))
            yield stack.enter_context(use_scheduler(sched, workers))

    result = run_coreg(request, environment=environment(), started=t_start, progress=progress, paths=paths)
    if made:
        made[-1].finish()
    if not quiet:
        if "points" in result.document:
            _print_points_summary(result.document)
        else:
            _print_summary(result.document)
        if result.json_out is not None:
            click.echo(f"JSON: {result.json_out}", err=True)
    if params["as_json"]:
        click.echo(result.json_text)
