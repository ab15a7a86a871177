"""``xdem coreg``: coregister a DEM onto a reference and write the result as a COG, out of core.

Methods are found by name in :data:`xdem.coreg.METHODS` (lower-case class names) after a
small alias table, so a newly registered method works without editing this module.
``+`` joins methods into a pipeline (``nuthkaab+vshift``).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import time
from pathlib import Path
from typing import Any

import click

from xdem.cli._common import scheduler_option, workers_option

__all__ = ["coreg", "resolve_methods", "build_coreg", "steps_summary", "merged_matrix", "dh_stats", "sampled_stats",
           "frame_summary"]

#: CLI name -> registry name (``xdem.coreg.METHODS`` keys are lower-case class names).
ALIASES = {
    "vshift": "verticalshift",
    "vertical": "verticalshift",
    "nk": "nuthkaab",
    "nuth": "nuthkaab",
    "bias": "biascorr",
}
#: Method options of the CLI -> constructor parameter names they may set (first found wins).
METHOD_OPTIONS: dict[str, tuple[str, ...]] = {
    "poly_order": ("poly_order",),
    "angle": ("angle",),
    "terrain_attribute": ("terrain_attribute", "attribute"),
    "fit_or_bin": ("fit_or_bin",),
    "subsample": ("subsample",),
    "random_state": ("random_state",),
    "initial_shift": ("initial_shift",),
    "on_divergence": ("on_divergence",),
}
_OPTION_FLAGS = {k: "--" + k.replace("_", "-") for k in METHOD_OPTIONS}
_OPTION_FLAGS["on_divergence"] = "--allow-divergence"
_HIDDEN = {"coregpipeline"}


_IMPORT_ERRORS: dict[str, str] = {}


def _registry() -> dict[str, type]:
    """Every registered coregistration class, after importing every ``xdem.coreg`` submodule
    (methods register themselves on import; a module that fails to import is remembered
    and named in the unknown-method message)."""
    import pkgutil  # noqa: PLC0415

    import xdem.coreg  # noqa: PLC0415
    from xdem.coreg import METHODS  # noqa: PLC0415

    for info in pkgutil.iter_modules(xdem.coreg.__path__):
        module = f"xdem.coreg.{info.name}"
        if info.name.startswith("_") or module in _IMPORT_ERRORS:
            continue
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - one broken module must not hide the others
            _IMPORT_ERRORS[module] = f"{type(exc).__name__}: {exc}"
    return {k: v for k, v in METHODS.items() if k not in _HIDDEN and not getattr(v, "__abstractmethods__", None)}


def _norm(name: str) -> str:
    return name.strip().lower().replace("-", "").replace("_", "").replace(" ", "")


def resolve_methods(text: str) -> list[type]:
    """Classes named by ``text`` (``"nuthkaab"``, ``"nuthkaab+vshift"``...), in order.

    Raises
    ------
    click.BadParameter
        An unknown or empty name; the message lists the known ones.

    Examples
    --------
    >>> [c.__name__ for c in resolve_methods("nuthkaab+vshift")]
    ['NuthKaab', 'VerticalShift']
    """
    registry = _registry()
    by_norm = {_norm(k): v for k, v in registry.items()}
    aliases = {_norm(k): _norm(v) for k, v in ALIASES.items() if _norm(v) in by_norm}
    known = sorted(set(aliases) | set(by_norm))
    classes = []
    for part in text.split("+"):
        key = _norm(part)
        key = aliases.get(key, key)
        if key not in by_norm:
            what = f"unknown method '{part.strip()}'" if part.strip() else f"empty method name in '{text}'"
            broken = "".join(f"; {m} failed to import ({e})" for m, e in _IMPORT_ERRORS.items())
            raise click.BadParameter(
                f"{what}; known: {', '.join(known)} (join several with +, e.g. nuthkaab+vshift){broken}",
                param_hint="'--method'",
            )
        classes.append(by_norm[key])
    return classes


def _param_names(cls: type) -> list[str]:
    return list(cls._param_names())


def build_coreg(classes: list[type], options: dict[str, Any]) -> Any:
    """Instantiate the steps with the options that apply to each; a pipeline if several.

    ``options`` maps :data:`METHOD_OPTIONS` keys to values (``None`` = not given). Every
    given option is passed to each step whose constructor has a matching parameter.

    Raises
    ------
    click.BadParameter
        An option was given but no step takes it.
    """
    from xdem.coreg import CoregPipeline  # noqa: PLC0415

    kwargs: list[dict[str, Any]] = [{} for _ in classes]
    for key, value in options.items():
        if value is None:
            continue
        used = False
        for i, cls in enumerate(classes):
            names = _param_names(cls)
            param = next((p for p in METHOD_OPTIONS[key] if p in names), None)
            if param is not None:
                kwargs[i][param] = value
                used = True
        if not used:
            takers = sorted(
                {name for name, cls in _registry().items() if any(p in _param_names(cls) for p in METHOD_OPTIONS[key])}
            )
            hint = f"; it applies to: {', '.join(takers)}" if takers else ""
            raise click.BadParameter(
                f"no step of '{'+'.join(c.__name__ for c in classes)}' takes {_OPTION_FLAGS[key]}{hint}",
                param_hint=f"'{_OPTION_FLAGS[key]}'",
            )
    steps = [cls(**kw) for cls, kw in zip(classes, kwargs)]
    return steps[0] if len(steps) == 1 else CoregPipeline(steps)


def _steps_of(coreg: Any) -> list[Any]:
    return list(coreg.steps) if hasattr(coreg, "steps") else [coreg]


def steps_summary(coreg: Any) -> list[dict]:
    """One flat dict per fitted step: ``method``, learned values without the trailing ``_``
    (``shift_x_`` -> ``shift_x``), and ``params``."""
    doc = coreg.to_dict()
    docs = doc["steps"] if doc["method"] == "CoregPipeline" else [doc]
    out = []
    for d in docs:
        flat: dict[str, Any] = {"method": d["method"]}
        for k, v in d.get("learned", {}).items():
            key = k[:-1] if k.endswith("_") else k
            flat[f"learned_{key}" if key in ("method", "params") else key] = v
        flat["params"] = d.get("params", {})
        out.append(flat)
    return out


def merged_matrix(coreg: Any) -> tuple[list[list[float]], bool]:
    """4 x 4 matrix of the summed translations of the affine steps, and whether it is the
    whole correction (True when every step is affine).

    A step that is a translation plus something else and says so with ``translation_part()``
    (:class:`~xdem.coreg.NuthKaabDeramp`: its shift and, as z, minus its ramp at the centre
    of the reference grid) adds that translation; the matrix is then complete only if the
    remainder is nothing (no non-constant ramp)."""
    import numpy as np  # noqa: PLC0415

    from xdem.coreg._shift import translation_matrix  # noqa: PLC0415

    total = np.zeros(3)
    complete = True
    for step in _steps_of(coreg):
        if step.is_affine:
            total += np.asarray(step.to_translations(), dtype=float)
        elif hasattr(step, "translation_part"):
            translation, exact = step.translation_part()
            total += np.asarray(translation, dtype=float)
            complete = complete and exact
        else:
            complete = False
    return translation_matrix(*total).tolist(), complete


def dh_stats(ref: Any, other: Any, *, inlier_mask: Any = None, exclude_mask: Any = None) -> dict:
    """Exact median, NMAD and count of ``dh = other - ref`` on the reference grid, on
    valid stable pixels (inside ``inlier_mask``, outside ``exclude_mask``), out of core."""
    import dask.array as da  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    from xdem.io.grid import align_pair  # noqa: PLC0415
    from xdem.masks import stable_mask_like  # noqa: PLC0415
    from xdem.stats import robust_summary  # noqa: PLC0415

    ref_g, other_g = align_pair(ref, other)
    r = ref_g.data
    o = other_g.data if isinstance(other_g.data, da.Array) else da.from_array(np.asarray(other_g.data))
    o = o.rechunk(r.chunks)
    stable = stable_mask_like(ref_g, inlier_mask=inlier_mask, exclude_mask=exclude_mask)
    dh = da.where(stable, o.astype(np.float64) - r.astype(np.float64), np.nan)
    s = robust_summary(dh)
    return {"median": s["median"], "nmad": s["nmad"], "count": s["count"], "min": s["min"], "max": s["max"]}


#: Pixels of a fully valid grid drawn for the before/after statistics.
STATS_SUBSAMPLE = 2_000_000
_STATS_METHOD = (f"median and NMAD on a reproducible subsample of about {STATS_SUBSAMPLE} x (valid fraction) stable "
                 "valid pixels (the same pixels before and after); exact counts")


def _stats_task(ref: Any, tba: Any, aligned: Any, *, inlier_mask: Any, exclude_mask: Any,
                random_state: int | None) -> Any:
    """Lazy before/after statistics on the reference grid (:func:`xdem.stats.dh_stats_tasks`)."""
    from xdem.io.grid import align_pair  # noqa: PLC0415
    from xdem.masks import stable_mask_like  # noqa: PLC0415
    from xdem.stats import dh_stats_tasks  # noqa: PLC0415

    ref_g, tba_g = align_pair(ref, tba)
    ref_g, aligned_g = align_pair(ref_g, aligned)
    if tba_g.shape != ref_g.shape:
        ref_g, tba_g = align_pair(ref_g, tba_g)
    stable = stable_mask_like(ref_g, inlier_mask=inlier_mask, exclude_mask=exclude_mask)
    return dh_stats_tasks(ref_g.data, {"before": tba_g.data, "after": aligned_g.data}, stable=stable,
                          subsample=STATS_SUBSAMPLE, random_state=random_state)


def _stats_while_writing(ref: Any, tba: Any, aligned: Any, *, inlier_mask: Any, exclude_mask: Any,
                         random_state: int | None) -> tuple[Any, Any]:
    """The statistics of :func:`sampled_stats` as a :class:`xdem.io.cog.BlockStats` computed
    while ``aligned`` is written (REF, TBA and ALIGNED on one grid), and their finisher."""
    from xdem.masks import stable_mask_like  # noqa: PLC0415
    from xdem.stats import dh_stats_while_writing  # noqa: PLC0415

    stable = stable_mask_like(ref, inlier_mask=inlier_mask, exclude_mask=exclude_mask)
    return dh_stats_while_writing(ref.data, {"after": aligned.data, "before": tba.data}, stable=stable,
                                  subsample=STATS_SUBSAMPLE, random_state=random_state)


def _verdict_while_writing(ref: Any, aligned: Any, *, inlier_mask: Any, exclude_mask: Any, random_state: int | None,
                           finishers: list) -> Any:
    """The :class:`xdem.io.cog.BlockStats` drawing the verdict's sample while ``aligned`` is
    written (:func:`xdem.verdict.verdict_while_writing`); its finisher is appended to ``finishers``."""
    from xdem.masks import stable_mask_like  # noqa: PLC0415
    from xdem.verdict import verdict_while_writing  # noqa: PLC0415

    stable = stable_mask_like(ref, inlier_mask=inlier_mask, exclude_mask=exclude_mask)
    block, finish = verdict_while_writing(ref, aligned.data, stable=stable, random_state=random_state)
    finishers.append(finish)
    return block


def sampled_stats(
    ref: Any, tba: Any, aligned: Any, *, inlier_mask: Any = None, exclude_mask: Any = None,
    random_state: int | None = None,
) -> dict:
    """Median and NMAD of dh before (``tba - ref``) and after (``aligned - ref``) on ONE
    reproducible subsample of stable valid pixels of the reference grid (one pass over the
    data, :func:`xdem.stats.sampled_dh_stats`); counts are exact."""
    from xdem.stats import dh_stats_finish  # noqa: PLC0415

    task = _stats_task(ref, tba, aligned, inlier_mask=inlier_mask, exclude_mask=exclude_mask, random_state=random_state)
    return {"method": _STATS_METHOD, **dh_stats_finish(task.compute())}


def frame_summary(coreg: Any, ref: Any) -> dict:
    """The CRS the correction was fitted in and applied through, and why that one."""
    from xdem.coreg._frames import frame_of  # noqa: PLC0415

    frame = frame_of(coreg)
    geographic = ref.rio.crs is not None and ref.rio.crs.is_geographic
    return {
        "crs": frame,
        "units": "metre" if geographic else (ref.rio.crs.linear_units if ref.rio.crs is not None else None),
        "why": ("the reference is geographic: coregistered in the UTM zone of its centre" if geographic
                else "the reference's CRS"),
    }


def _report_writer() -> Any:
    """``xdem.report.write_report``, or a clear error if the report module is not available."""
    from xdem.errors import XdemError  # noqa: PLC0415

    try:
        mod = importlib.import_module("xdem.report")
    except ModuleNotFoundError as exc:
        if exc.name not in ("xdem.report",):
            raise XdemError(f"--report needs xdem.report, which failed to import ({exc}); install the missing package") from exc
        raise XdemError("--report is not available: this xdem has no xdem.report module; drop --report") from exc
    if not hasattr(mod, "write_report"):
        raise XdemError("--report is not available: xdem.report has no write_report(); drop --report")
    return mod.write_report


def _subsample(_ctx: Any, _param: Any, value: float | None) -> float | int | None:
    if value is None:
        return None
    if not value > 0:
        raise click.BadParameter(f"must be > 0 (a fraction <= 1 or a pixel count > 1), got {value:g}")
    if value <= 1:
        return float(value)
    if value != int(value):
        raise click.BadParameter(f"a count above 1 must be a whole number of pixels, got {value:g}")
    return int(value)


def _fmt_step(step: dict) -> str:
    parts = []
    for key in ("shift_x", "shift_y", "shift_z"):
        if isinstance(step.get(key), (int, float)):
            parts.append(f"{key}={step[key]:+.4f}")
    extra = []
    if "n_iterations" in step:
        extra.append(f"{step['n_iterations']} iterations{'' if step.get('converged', True) else ', NOT converged'}")
    if step.get("horizontal_constrained") is False:
        extra.append("horizontal shift not constrained (flat terrain)")
    if "count" in step:
        extra.append(f"{step['count']} points")
    if isinstance(step.get("tilt_m_per_km"), (int, float)):
        way = step.get("tilt_direction_deg")
        extra.append(f"tilt {step['tilt_m_per_km']:.3f} m/km" + (f" down towards {way:.0f}° from north" if way is not None else "")
                     + f", ramp {step.get('ramp_amplitude', float('nan')):.3f} m across the DEM")
    text = ", ".join(parts) if parts else "fitted"
    return f"{step['method']}: {text}" + (f" ({'; '.join(extra)})" if extra else "")


def _print_summary(doc: dict) -> None:
    echo = lambda s="": click.echo(s, err=True)  # noqa: E731
    echo("")
    echo("Coregistration:")
    for step in doc["steps"]:
        echo(f"  {_fmt_step(step)}")
    if doc.get("frame", {}).get("crs"):
        echo(f"  fitted and applied in {doc['frame']['crs']} ({doc['frame']['why']}); output on the grid of "
             f"{doc.get('output_grid', 'tba').upper()}")
    if doc.get("stats"):
        b, a = doc["stats"]["before"], doc["stats"]["after"]
        how = "exact" if doc["stats"]["method"].startswith("exact") else f"median/NMAD on {b.get('sampled', '?')} sampled pixels"
        echo(f"dh = tba - ref on stable pixels of the reference grid ({how}; exact counts):")
        echo(f"  {'':8}{'median':>12}{'NMAD':>12}{'count':>12}")
        for label, s in (("before", b), ("after", a)):
            echo(f"  {label:8}{s['median']:>12.4f}{s['nmad']:>12.4f}{s['count']:>12d}")
    v = doc.get("verdict")
    if v:
        amp = v.get("residual_amplitude_m")
        ratio = v.get("nmad_ratio")
        echo(f"Verdict: {'OK' if v['ok'] else 'NOT DONE'} (residual aspect-dependent amplitude "
             + ("n/a" if amp is None else f"{amp:.3f} m") + ", NMAD after/before "
             + ("n/a" if ratio is None else f"{ratio:.3f}") + f"; fitted on {v['n_points']} stable sampled pixels)")
        if v.get("hint"):
            echo(f"  hint: {v['hint']}")
    t = doc["timing"]
    echo(f"Output: {doc['output']}")
    if doc.get("report"):
        echo(f"Report: {doc['report']}")
    echo(
        f"Time: fit {t['fit_s']:.1f} s, write {t['write_s']:.1f} s, stats {t['stats_s']:.1f} s, "
        f"verdict {t.get('verdict_s', 0.0):.1f} s, total {t['total_s']:.1f} s; "
        f"peak memory {doc['peak_rss_mb']:.0f} MB; scheduler {doc['scheduler']}"
    )


@click.command("coreg")
@click.argument("ref", type=click.Path(dir_okay=False))
@click.argument("tba", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Aligned DEM to write (Cloud-Optimized GeoTIFF, on the grid of TBA unless --grid ref).")
@click.option("--grid", "out_grid", type=click.Choice(["tba", "ref"]), default="tba", show_default=True,
              help="Grid and CRS of the output: TBA's own, or REF's. Either way the correction is applied in REF's "
                   "CRS (a geographic REF: the UTM zone of its centre), pixel by pixel, with one resampling.")
@click.option("--method", default="nuthkaab", show_default=True,
              help="vshift, nuthkaab, nuthkaab_deramp, deramp, directionalbias, terrainbias, biascorr, or any "
                   "registered method; join with + for a pipeline, e.g. nuthkaab+vshift. Recommended when the DEM may "
                   "be tilted as well as shifted (stereo DEMs): nuthkaab_deramp, which fits both jointly.")
@click.option("--poly-order", type=click.IntRange(min=0), default=None, help="Polynomial order (e.g. deramp).")
@click.option("--angle", type=float, default=None, help="Track angle in degrees (directionalbias).")
@click.option("--terrain-attribute", default=None, help="Attribute binned by terrainbias, e.g. maximum_curvature.")
@click.option("--fit-or-bin", type=click.Choice(["fit", "bin", "bin_and_fit"]), default=None,
              help="How bias corrections model dh.")
@click.option("--inlier-mask", type=click.Path(dir_okay=False), default=None,
              help="Stable terrain to USE: raster (non-zero = stable) or vector (inside polygons = stable).")
@click.option("--exclude-mask", type=click.Path(dir_okay=False), default=None,
              help="Unstable terrain to EXCLUDE, e.g. glacier outlines (raster non-zero or vector polygons).")
@click.option("--subsample", type=float, default=None, callback=_subsample,
              help="Pixels used by every step: fraction (<= 1) or count (> 1). Default: each method's own.")
@click.option("--random-state", type=int, default=None, help="Seed of the subsample, for every step.")
@click.option("--initial-shift", type=(float, float), default=None, metavar="DX DY",
              help="Start the shift estimate (nuthkaab, nuthkaab_deramp) from this shift to apply to TBA, in CRS units: "
                   "needed when the DEMs are offset by more than about a quarter of their size.")
@click.option("--allow-divergence", is_flag=True,
              help="Accept a partial result when the shift estimate diverges (warning, horizontal shift reset) "
                   "instead of failing with exit code 1.")
@click.option("--chunks", type=click.IntRange(min=16), default=None, help="Chunk side in pixels (default: auto).")
@click.option("--overwrite", is_flag=True, help="Replace existing output, --json-out and --report files.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout (and nothing else).")
@click.option("--json-out", type=click.Path(dir_okay=False), default=None, help="Write the JSON document to a file.")
@click.option("--report", type=click.Path(dir_okay=False), default=None, help="Write an HTML report (needs xdem.report).")
@scheduler_option
@workers_option
@click.option("--no-stats", is_flag=True, help="Skip the before/after statistics (they cost little: computed while writing) and the verdict.")
@click.option("--exact-stats", is_flag=True,
              help="Exact median/NMAD of dh on all pixels (about 12 passes) instead of a 2-million-pixel subsample "
                   "(computed in the writing pass when REF and TBA share a grid, else one pass).")
@click.option("-q", "--quiet", is_flag=True, help="No progress or summary on stderr (warnings and errors still shown).")
def coreg(
    ref: str, tba: str, output: str, method: str, poly_order: int | None, angle: float | None,
    terrain_attribute: str | None, fit_or_bin: str | None, inlier_mask: str | None, exclude_mask: str | None,
    subsample: float | int | None, random_state: int | None, initial_shift: tuple[float, float] | None,
    allow_divergence: bool, chunks: int | None, overwrite: bool, as_json: bool,
    json_out: str | None, report: str | None, scheduler: str, workers: int | None, no_stats: bool, exact_stats: bool, quiet: bool,
    out_grid: str = "tba",
) -> None:
    """Coregister TBA (to be aligned) onto REF and write the aligned DEM to OUTPUT.

    \b
    Examples:
      xdem coreg ref.tif tba.tif -o aligned.tif
      xdem coreg ref.tif tba.tif -o aligned.tif --method nuthkaab+deramp --poly-order 1 \\
          --exclude-mask glaciers.gpkg --json-out coreg.json
      xdem coreg ref.tif tba.tif -o aligned.tif --scheduler processes --workers 4

    Both DEMs are read lazily; the fit, the output (a COG, nodata -9999) and the exact
    statistics of dh = tba - ref before and after are computed out of core. Exit codes:
    0 success, 1 error (nothing new left behind), 2 usage error, 143 SIGTERM.
    """
    from xdem.cli._common import (  # noqa: PLC0415
        Progress, check_new_output, check_scheduler, dump_json, one_line_warnings, peak_rss_mb, stdout_to_stderr,
        use_scheduler,
    )
    from xdem.errors import InputError  # noqa: PLC0415

    t_start = time.perf_counter()
    sched = check_scheduler(scheduler, workers)
    classes = resolve_methods(method)
    options = {"poly_order": poly_order, "angle": angle, "terrain_attribute": terrain_attribute,
               "fit_or_bin": fit_or_bin, "subsample": subsample, "random_state": random_state,
               "initial_shift": initial_shift, "on_divergence": "warn" if allow_divergence else None}
    # Cheap checks first, so that nobody waits for a fit that cannot be saved.
    inputs = {"reference": ref, "to-be-aligned DEM": tba, "inlier mask": inlier_mask, "exclude mask": exclude_mask}
    for label, path in inputs.items():
        if path is not None and not Path(path).exists():
            raise InputError(f"{label} file not found: '{path}'")
    out = check_new_output(output, overwrite=overwrite, inputs=inputs, what="output")
    taken = {**inputs, "output": str(out)}
    json_path = None
    if json_out:
        json_path = check_new_output(json_out, overwrite=overwrite, inputs=taken, what="--json-out file")
        taken["--json-out file"] = str(json_path)
    report_path = write_report = None
    if report:
        report_path = check_new_output(report, overwrite=overwrite, inputs=taken, what="--report file")
        write_report = _report_writer()
    model = build_coreg(classes, options)

    abspath = lambda p: None if p is None else os.path.abspath(p)  # noqa: E731
    doc: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        stack.enter_context(stdout_to_stderr())  # progress bars and stray prints never reach stdout
        stack.enter_context(one_line_warnings())
        sinfo = stack.enter_context(use_scheduler(sched, workers))
        progress = Progress(quiet=quiet, client=sinfo["client"])
        from xdem.io.cog import write_cog  # noqa: PLC0415
        from xdem.io.grid import same_grid  # noqa: PLC0415
        from xdem.io.open import open_dem  # noqa: PLC0415

        ck: Any = chunks if chunks else "auto"
        ref_d, tba_d = open_dem(ref, chunks=ck), open_dem(tba, chunks=ck)
        where = sinfo["address"] or sinfo["scheduler"]
        progress.echo(f"xdem coreg: {model!r}")
        progress.echo(f"  scheduler {where} ({sinfo['workers']} workers), chunks {max(ref_d.chunks[0])} x {max(ref_d.chunks[1])}")
        t0 = time.perf_counter()
        with progress.stage("fitting"):
            model.fit(ref_d, tba_d, inlier_mask=inlier_mask, exclude_mask=exclude_mask)
        t_fit = time.perf_counter() - t0
        aligned = model.apply(tba_d, grid=ref_d if out_grid == "ref" else None)
        t0 = time.perf_counter()
        # The sampled statistics are computed in the block-writing pass (the blocks of TBA
        # and of the aligned DEM are shared) when the DEMs share a grid; otherwise after it.
        fused = not no_stats and not exact_stats and same_grid(ref_d, tba_d) and same_grid(ref_d, aligned)
        also, finish = [], None
        finishers: list = []  # the verdict's, when its sample is drawn while writing
        if fused:
            block_stats, finish = _stats_while_writing(ref_d, tba_d, aligned, inlier_mask=inlier_mask,
                                                       exclude_mask=exclude_mask, random_state=random_state)
            also = [block_stats]
            also.append(_verdict_while_writing(ref_d, aligned, inlier_mask=inlier_mask, exclude_mask=exclude_mask,
                                               random_state=random_state, finishers=finishers))
        results: list = []
        # Local schedulers: the stage's dask progress bar (shown for computes > 1 s) covers the
        # block-writing pass; distributed: write_cog shows distributed.progress itself.
        with progress.stage(f"writing {out}" + (" (and the statistics of dh)" if fused else "")):
            write_cog(aligned, out, overwrite=overwrite, progress=not quiet and sinfo["client"] is not None,
                      also=also, results=results)
        t_write = time.perf_counter() - t0
        t0 = time.perf_counter()
        stats = None
        if finish is not None:
            stats = {"method": _STATS_METHOD, **finish(results[0])}
        elif not no_stats:
            with progress.stage("statistics of dh before and after"):
                written = open_dem(out, chunks=ck)
                if exact_stats:
                    stats = {
                        "method": "exact (xdem.stats), stable valid pixels, reference grid",
                        "before": dh_stats(ref_d, tba_d, inlier_mask=inlier_mask, exclude_mask=exclude_mask),
                        "after": dh_stats(ref_d, written, inlier_mask=inlier_mask, exclude_mask=exclude_mask),
                    }
                else:
                    stats = sampled_stats(ref_d, tba_d, written, inlier_mask=inlier_mask,
                                          exclude_mask=exclude_mask, random_state=random_state)
        t_stats = time.perf_counter() - t0
        t0 = time.perf_counter()
        verdict = None
        if not no_stats:
            from xdem.verdict import verdict_of_run  # noqa: PLC0415

            with progress.stage("verdict (residual sinusoid and NMAD ratio on stable pixels)"):
                sample = finishers[0](results[1]) if finishers else None
                verdict = verdict_of_run(ref_d, tba_d, open_dem(out, chunks=ck), stats=stats, sample=sample,
                                         methods=[type(s).__name__ for s in _steps_of(model)], inlier_mask=inlier_mask,
                                         exclude_mask=exclude_mask, random_state=random_state)
        t_verdict = time.perf_counter() - t0
        matrix, complete = merged_matrix(model)
        doc = {
            "steps": steps_summary(model),
            "matrix": matrix,
            "matrix_is_complete": complete,
            "frame": frame_summary(model, ref_d),
            "output_grid": out_grid,
            "stats": stats,
            "verdict": verdict,
            "output": str(out),
            "report": None if report_path is None else str(report_path),
            "inputs": {
                "reference": abspath(ref), "to_be_aligned": abspath(tba),
                "inlier_mask": abspath(inlier_mask), "exclude_mask": abspath(exclude_mask),
                "reference_shape": list(ref_d.shape), "to_be_aligned_shape": list(tba_d.shape),
                "crs": ref_d.rio.crs.to_string() if ref_d.rio.crs else None,
                "method": method, "options": {k: v for k, v in options.items() if v is not None},
            },
            "timing": {"fit_s": t_fit, "write_s": t_write, "stats_s": t_stats, "verdict_s": t_verdict, "report_s": 0.0,
                       "total_s": time.perf_counter() - t_start},
            "peak_rss_mb": peak_rss_mb(),
            "chunks": [max(ref_d.chunks[0]), max(ref_d.chunks[1])],
            "scheduler": sinfo["address"] or sinfo["scheduler"],
            "workers": sinfo["workers"],
        }
        if write_report is not None:
            t0 = time.perf_counter()

            def _final_numbers() -> None:  # the page's last block shows the JSON's final timing and memory
                doc["timing"]["report_s"] = time.perf_counter() - t0
                doc["timing"]["total_s"] = time.perf_counter() - t_start
                doc["peak_rss_mb"] = peak_rss_mb()

            with progress.stage(f"writing the report {report_path}"):
                write_report(report_path, ref=ref_d, tba=tba_d, aligned=open_dem(out, chunks=ck), coreg=model,
                             summary=doc, overwrite=overwrite, inlier_mask=inlier_mask, exclude_mask=exclude_mask,
                             on_final_block=_final_numbers)
    if write_report is None:  # else set when the report's last block was rendered (page == JSON)
        doc["timing"]["total_s"] = time.perf_counter() - t_start
        doc["peak_rss_mb"] = peak_rss_mb()
    children = peak_rss_mb(children=True)
    doc["peak_rss_children_mb"] = children if children else None
    text = dump_json(doc, path=json_path, overwrite=overwrite)
    if not quiet:
        _print_summary(doc)
        if json_path is not None:
            click.echo(f"JSON: {json_path}", err=True)
    if as_json:
        click.echo(text)
