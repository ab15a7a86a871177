"""The whole ``xdem coreg`` job as a library call: :func:`run_coreg` (request in, result out).

Open both DEMs lazily, fit, apply (on TBA's grid or REF's), write the aligned COG out of core,
compute the dh statistics before and after (in the writing pass when the DEMs share a grid)
and the verdict, write the HTML report and the JSON document. ``xdem coreg`` only parses its
options into a :class:`CoregRequest` and calls :func:`run_coreg` inside its scheduler,
stdout and warning contexts; Python users call it directly.

Examples
--------
>>> import tempfile, xdem
>>> from xdem.workflows import CoregRequest, run_coreg
>>> folder = tempfile.mkdtemp()
>>> pair = xdem.examples.write_example_pair(folder)
>>> result = run_coreg(CoregRequest(reference=pair["ref"], to_be_aligned=pair["tba"],
...                                 output=f"{folder}/aligned.tif", coreg=xdem.coreg.NuthKaab()))
>>> result.output.name, result.document["verdict"]["ok"]
('aligned.tif', True)
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from xdem.checks import file_facts, vertical_warning
from xdem.workflows import _summary as S

__all__ = ["CoregRequest", "CoregResult", "CheckedPaths", "check_coreg_paths", "run_coreg"]


@dataclass(frozen=True, kw_only=True)
class CoregRequest:
    """Everything :func:`run_coreg` needs: paths and options (no computation happens here).

    Parameters
    ----------
    reference, to_be_aligned
        The reference DEM (REF) and the DEM to align (TBA): any file :func:`xdem.open_dem` reads.
    output
        Aligned DEM to write, nodata -9999: a Cloud-Optimized GeoTIFF, or a Zarr store if it
        ends with ``.zarr`` (:func:`xdem.write_zarr`: lock-free on clusters, resumable).
    coreg
        The coregistration to fit: an unfitted estimator of :mod:`xdem.coreg` (a single method
        or a :class:`~xdem.coreg.CoregPipeline`).
    method, options
        How the run was asked for, recorded in the JSON document (``inputs.method``,
        ``inputs.options``; ``xdem coreg`` passes its ``--method`` text and the method options
        given). Default method: the lower-case class names of the steps joined with ``+``.
    grid
        Grid and CRS of the output: ``"tba"`` (TBA's own) or ``"ref"`` (REF's).
    inlier_mask, exclude_mask
        Stable terrain to use / unstable terrain to exclude (raster or vector files), for the
        fit, the statistics, the verdict and the report.
    random_state
        Seed of the statistics' and the verdict's subsamples.
    chunks
        Chunk side in pixels (``None``: automatic).
    overwrite
        Replace existing output, JSON and report files.
    resume
        Zarr output (``*.zarr``): finish the store an interrupted run of the same computation
        left, writing only its missing chunks (:func:`xdem.write_zarr`); the fit runs again.
    json_out, report
        Also write the JSON document / an HTML report (needs :mod:`xdem.report`) to these files.
    stats
        ``"sampled"`` (median and NMAD of dh on a reproducible subsample of ``stats_subsample``
        pixels, computed while writing when the DEMs share a grid), ``"exact"`` (all pixels,
        about 12 passes) or ``"none"`` (no statistics and no verdict).
    stats_subsample
        Pixels of a fully valid grid drawn for the sampled statistics.
    z_column
        Either input may be a points file (:func:`xdem.points.read_points`; see
        :func:`xdem.workflows.points.run_points_coreg`): the column of their elevation.
    points_crs
        CRS of a points table that has none (CSV, plain Parquet).
    filters
        Outlier filters applied before the fit, whatever the method
        (:class:`xdem.workflows.filters.OutlierFilters`: slope limits, NMAD filter on ``dh``
        before); recorded in the document's ``filters``. ``None``: none. With points, they
        choose the points the fit uses (:func:`xdem.workflows.filters.filter_points`).
    ref_band, tba_band, ref_nodata, tba_nodata
        Band of elevations of a multi-band file; value to read as nodata instead of the file's.
    ref_vertical_scale, tba_vertical_scale
        Factor multiplying the elevations, lazily (e.g. 0.3048 for feet). ``None``: from the
        vertical CRS (1 if untagged). The inputs are checked before the fit
        (:func:`xdem.checks.check_inputs`): the JSON document's ``input_checks``.
    dh_out
        Also write ``dh`` after (aligned minus REF, on the output grid) as a COG, in the same
        pass as the aligned DEM. Two DEMs only.
    stable_mask_out
        Also write the pixels the fit could use (Byte: 1 = stable, valid in both DEMs and
        within the filters; 0 = not) on the grid the fit works on, in the same pass. Two
        DEMs only.
    """

    reference: str | os.PathLike
    to_be_aligned: str | os.PathLike
    output: str | os.PathLike
    coreg: Any
    method: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    grid: Literal["tba", "ref"] = "tba"
    inlier_mask: str | os.PathLike | None = None
    exclude_mask: str | os.PathLike | None = None
    random_state: int | None = None
    chunks: int | None = None
    overwrite: bool = False
    resume: bool = False
    json_out: str | os.PathLike | None = None
    report: str | os.PathLike | None = None
    stats: Literal["sampled", "exact", "none"] = "sampled"
    stats_subsample: int = S.STATS_SUBSAMPLE
    z_column: str | None = None
    points_crs: str | None = None
    filters: Any = None
    dh_out: str | os.PathLike | None = None
    stable_mask_out: str | os.PathLike | None = None
    ref_band: int | None = None
    tba_band: int | None = None
    ref_nodata: float | None = None
    tba_nodata: float | None = None
    ref_vertical_scale: float | None = None
    tba_vertical_scale: float | None = None


@dataclass(frozen=True, kw_only=True)
class CoregResult:
    """What :func:`run_coreg` did.

    Attributes
    ----------
    document
        The JSON document (``xdem coreg --json`` prints it): steps, matrix, frame, statistics,
        verdict, inputs, timing, memory, scheduler.
    json_text
        ``document`` as the strict JSON text written to ``json_out`` and printed by ``--json``.
    output, json_out, report
        Absolute paths written (``None`` when not asked for).
    timings
        Seconds per stage: ``fit_s``, ``write_s``, ``stats_s``, ``verdict_s``, ``report_s``, ``total_s``.
    coreg
        The fitted estimator.
    """

    document: dict
    json_text: str
    output: Path
    json_out: Path | None
    report: Path | None
    timings: dict[str, float]
    coreg: Any


@dataclass(frozen=True)
class CheckedPaths:
    """Absolute output paths after :func:`check_coreg_paths`, and the report writer."""

    output: Path
    json_out: Path | None
    report: Path | None
    write_report: Callable[..., Any] | None
    dh_out: Path | None = None
    stable_mask_out: Path | None = None


def check_coreg_paths(
    *, reference: str | os.PathLike, to_be_aligned: str | os.PathLike, output: str | os.PathLike,
    inlier_mask: str | os.PathLike | None = None, exclude_mask: str | os.PathLike | None = None,
    json_out: str | os.PathLike | None = None, report: str | os.PathLike | None = None, overwrite: bool = False,
    resume: bool = False, dh_out: str | os.PathLike | None = None, stable_mask_out: str | os.PathLike | None = None,
) -> CheckedPaths:
    """The cheap checks run before any computation, so that nobody waits for a fit that cannot
    be saved: inputs exist; outputs are new (or ``overwrite``), distinct from the inputs and
    each other, in existing folders; the report module is available if a report is asked for.

    Raises
    ------
    xdem.errors.InputError
        An input file is missing.
    xdem.errors.OutputError
        An output path is refused (see :func:`xdem.workflows._summary.check_new_output`).
    xdem.errors.XdemError
        A report is asked for and :mod:`xdem.report` is not available.

    Examples
    --------
    >>> import xdem
    >>> lidar = xdem.examples.get_path("lidar")
    >>> check_coreg_paths(reference=lidar, to_be_aligned=lidar, output="/tmp/aligned.tif", overwrite=True).output.name
    'aligned.tif'
    """
    from xdem.errors import InputError

    raw = {"reference": reference, "to-be-aligned DEM": to_be_aligned, "inlier mask": inlier_mask,
           "exclude mask": exclude_mask}
    inputs: dict[str, str | None] = {k: (None if v is None else os.fspath(v)) for k, v in raw.items()}
    for label, path in inputs.items():
        if path is not None and not Path(path).exists():
            raise InputError(f"{label} file not found: '{path}'")
    from xdem.io.zarr_store import is_zarr_path

    if is_zarr_path(output):
        from xdem.io.zarr import check_store_path

        if dh_out or stable_mask_out:
            raise InputError(f"--dh-out and --stable-mask-out are written in the same pass as a COG output; with the "
                             f"Zarr store '{output}' write the aligned DEM first, then e.g. a dh COG from it")

        out = check_store_path(output, overwrite=overwrite, resume=resume,
                               inputs=[(f"the {k}", v) for k, v in inputs.items() if v is not None])
    else:
        if resume:
            raise InputError(f"resume (--resume) applies to Zarr outputs (*.zarr), not '{output}': a COG is written "
                             "in one go")
        out = S.check_new_output(output, overwrite=overwrite, inputs=inputs, what="output")
    taken = {**inputs, "output": str(out)}
    json_path = None
    if json_out:
        json_path = S.check_new_output(json_out, overwrite=overwrite, inputs=taken, what="--json-out file")
        taken["--json-out file"] = str(json_path)
    extra: dict[str, Path | None] = {}
    for what, wanted in (("--dh-out file", dh_out), ("--stable-mask-out file", stable_mask_out)):
        extra[what] = None
        if wanted:
            extra[what] = S.check_new_output(wanted, overwrite=overwrite, inputs=taken, what=what)
            taken[what] = str(extra[what])
    report_path = write_report = None
    if report:
        report_path = S.check_new_output(report, overwrite=overwrite, inputs=taken, what="--report file")
        write_report = S.report_writer()
    return CheckedPaths(output=out, json_out=json_path, report=report_path, write_report=write_report,
                        dh_out=extra["--dh-out file"], stable_mask_out=extra["--stable-mask-out file"])


class ProgressLike(Protocol):
    """What :func:`run_coreg` reports progress to (``xdem.cli._common.Progress`` is one)."""

    quiet: bool

    def echo(self, text: str = "") -> None: ...  # noqa: D102

    def stage(self, text: str) -> contextlib.AbstractContextManager: ...  # noqa: D102


class _Silent:
    quiet = True

    def echo(self, text: str = "") -> None:
        pass

    @contextlib.contextmanager
    def stage(self, text: str) -> Iterator[None]:
        yield


@contextlib.contextmanager
def current_scheduler() -> Iterator[dict]:
    """Describe the dask scheduler computations run on now (``scheduler``, ``workers``,
    ``address``, ``client``), as ``xdem.cli._common.use_scheduler`` yields it."""
    import dask

    client = None
    with contextlib.suppress(ImportError, ValueError):
        from distributed import default_client

        client = default_client()
    if client is not None and dask.base.get_scheduler() == client.get:
        yield {"scheduler": client.scheduler.address, "workers": len(client.scheduler_info().get("workers", {})),
               "address": client.scheduler.address, "client": client}
        return
    name = dask.config.get("scheduler", None) or "threads"
    name = name if isinstance(name, str) else getattr(name, "__name__", "custom")
    workers = 1 if name in ("synchronous", "sync", "single-threaded") else dask.config.get("num_workers", None) or os.cpu_count()
    yield {"scheduler": name, "workers": workers, "address": None, "client": None}


def grid_chunks(dem: Any) -> tuple[int, int]:
    """Largest chunk side along rows and columns of an opened (dask-backed) DEM."""
    chunks = dem.chunks
    if chunks is None:
        raise TypeError("expected a dask-backed DEM (xdem.open_dem)")
    return max(chunks[0]), max(chunks[1])


def run_coreg(
    request: CoregRequest,
    *,
    environment: contextlib.AbstractContextManager[Mapping[str, Any]] | None = None,
    progress: Callable[[Mapping[str, Any]], ProgressLike] | None = None,
    started: float | None = None,
    exact_stats: Callable[..., dict] | None = None,
) -> CoregResult:
    """Coregister ``request.to_be_aligned`` onto ``request.reference`` and write the result.

    Everything is out of core (memory bounded by the chunk size). If anything fails after
    an output was moved into place, the outputs of this call are removed again (a file
    replaced with ``overwrite`` is restored): a failed run leaves nothing new behind.

    Parameters
    ----------
    request
        Paths and options (:class:`CoregRequest`).
    environment
        Context manager entered around all the computation, yielding the scheduler
        description (``scheduler``, ``workers``, ``address``, ``client``); the JSON document
        is finished after it exits (so that the peak memory of worker processes it started
        counts). Default: the current dask scheduler (:func:`current_scheduler`).
        ``xdem coreg`` passes its scheduler, stdout-to-stderr and warning contexts.
    progress
        Called with the scheduler description, returns an object with ``quiet``,
        ``echo(text)`` and ``stage(text)`` (``xdem.cli._common.Progress``). Default: silent.
    started
        ``time.perf_counter()`` at which the run started, for ``timing.total_s`` (default: now).
    exact_stats
        Function computing exact dh statistics (``request.stats == "exact"``); default
        :func:`xdem.workflows._summary.dh_stats`.

    Returns
    -------
    CoregResult
        The JSON document (also written to ``request.json_out``), the paths written, the
        timings and the fitted estimator.

    Raises
    ------
    xdem.errors.XdemError
        Any failure (missing input, refused output, failed fit, full disk...), one line.

    Examples
    --------
    >>> import tempfile, xdem
    >>> folder = tempfile.mkdtemp()
    >>> pair = xdem.examples.write_example_pair(folder)
    >>> request = CoregRequest(reference=pair["ref"], to_be_aligned=pair["tba"], output=f"{folder}/out.tif",
    ...                        coreg=xdem.coreg.NuthKaab(), stats="none")
    >>> result = run_coreg(request)
    >>> abs(result.document["steps"][0]["shift_x"] - pair["truth"]["shift_x"]) < 0.05
    True
    """
    from xdem.io.atomic import output_journal

    t_start = time.perf_counter() if started is None else started
    from xdem.points import is_points_source

    with output_journal():
        if is_points_source(request.reference) or is_points_source(request.to_be_aligned):
            from xdem.workflows.points import run_points_coreg

            return run_points_coreg(request, environment=environment if environment is not None else current_scheduler(),
                                    progress=progress, t_start=t_start)
        return _run(request, environment=environment if environment is not None else current_scheduler(),
                    progress=progress, t_start=t_start, exact_stats=exact_stats or S.dh_stats)


def _fit_record(model: Any, grid: str) -> dict:
    """What a Zarr output's fingerprint records of the fit (compared when resuming)."""
    try:
        fitted = model.to_dict()
    except (AttributeError, NotImplementedError, TypeError, ValueError):
        fitted = S.steps_summary(model)
    return {"coreg": S.jsonable(fitted), "grid": grid}


def _run(request: CoregRequest, *, environment: Any, progress: Any, t_start: float, exact_stats: Callable) -> CoregResult:
    from xdem.errors import InputError

    r = request
    if r.coreg is None:
        raise InputError("CoregRequest.coreg is required: an unfitted estimator such as xdem.coreg.NuthKaab()")
    if r.grid not in ("tba", "ref"):
        raise InputError(f"grid must be 'tba' or 'ref', got {r.grid!r}")
    if r.stats not in ("sampled", "exact", "none"):
        raise InputError(f"stats must be 'sampled', 'exact' or 'none', got {r.stats!r}")
    paths = check_coreg_paths(reference=r.reference, to_be_aligned=r.to_be_aligned, output=r.output,
                              inlier_mask=r.inlier_mask, exclude_mask=r.exclude_mask, json_out=r.json_out,
                              report=r.report, overwrite=r.overwrite, resume=r.resume, dh_out=r.dh_out,
                              stable_mask_out=r.stable_mask_out)
    ref, tba = os.fspath(r.reference), os.fspath(r.to_be_aligned)
    inlier_mask = None if r.inlier_mask is None else os.fspath(r.inlier_mask)
    exclude_mask = None if r.exclude_mask is None else os.fspath(r.exclude_mask)
    masks = {"inlier_mask": inlier_mask, "exclude_mask": exclude_mask}
    model, out, no_stats, exact = r.coreg, paths.output, r.stats == "none", r.stats == "exact"
    method = r.method if r.method is not None else "+".join(type(s).__name__.lower() for s in S.steps_of(model))
    abspath = lambda p: None if p is None else os.path.abspath(p)  # noqa: E731
    doc: dict[str, Any] = {}
    with environment as sinfo:
        prog = progress(sinfo) if progress is not None else _Silent()
        from xdem.io.cog import write_cogs
        from xdem.io.grid import same_grid
        from xdem.io.open import open_dem
        from xdem.io.zarr_store import is_zarr_path

        ck: Any = r.chunks if r.chunks else "auto"
        checks = _checked_inputs(r, ref, tba)
        ref_d, tba_d = (open_dem(c.path, chunks=ck, band=c.band, nodata=c.nodata, vertical_scale=c.vertical_scale)
                        for c in (checks.ref, checks.tba))
        where = sinfo["address"] or sinfo["scheduler"]
        prog.echo(f"xdem coreg: {model!r}")
        chunk_shape = grid_chunks(ref_d)
        n_workers = sinfo["workers"]
        prog.echo(f"  scheduler {where} ({n_workers} worker{'' if n_workers == 1 else 's'}), "
                  f"chunks {chunk_shape[0]} x {chunk_shape[1]}")
        vertical = vertical_warning(ref, tba)
        if vertical:
            warnings.warn(vertical, UserWarning, stacklevel=2)
        t0 = time.perf_counter()
        fit_masks, filters_record, fit_mask = dict(masks), None, None
        filters = r.filters
        if filters is not None and filters.active:
            from xdem.workflows.filters import filter_mask

            with prog.stage("outlier filters (slope of REF, NMAD of dh before)"):
                fit_mask, filters_record = filter_mask(ref_d, tba_d, filters=filters, inlier_mask=inlier_mask,
                                                       exclude_mask=exclude_mask, random_state=r.random_state)
            fit_masks = {"inlier_mask": fit_mask, "exclude_mask": None}
        with prog.stage("fitting"):
            model.fit(ref_d, tba_d, **fit_masks)
        t_fit = time.perf_counter() - t0
        aligned = model.apply(tba_d, grid=ref_d if r.grid == "ref" else None)
        t0 = time.perf_counter()
        # The sampled statistics are computed in the block-writing pass (the blocks of TBA
        # and of the aligned DEM are shared) when the DEMs share a grid; otherwise after it.
        to_zarr = is_zarr_path(out)  # a store is written chunk by chunk (resumable): statistics after it
        fused = not to_zarr and not no_stats and not exact and same_grid(ref_d, tba_d) and same_grid(ref_d, aligned)
        also, finish, finish_verdict = [], None, None
        if fused:
            block_stats, finish = S.stats_while_writing(ref_d, tba_d, aligned, **masks, random_state=r.random_state,
                                                        subsample=r.stats_subsample)
            finishers: list = []
            also = [block_stats, S.verdict_while_writing(ref_d, aligned, **masks, random_state=r.random_state,
                                                         finishers=finishers)]
            finish_verdict = finishers[0]
        # Local schedulers: the stage's dask progress bar (shown for computes > 1 s) covers the
        # block-writing pass; distributed: write_cog shows distributed.progress itself.
        if to_zarr:
            with prog.stage(f"writing {out}"):
                from xdem.io.zarr import write_zarr

                write_zarr(aligned, out, overwrite=r.overwrite, resume=r.resume, fingerprint=_fit_record(model, r.grid),
                           progress=not prog.quiet and sinfo["client"] is not None)
        else:
            items: list[tuple[Any, ...]] = [(aligned, out)]
            alsos = [also]
            if paths.dh_out is not None:
                items.append((_dh_after(ref_d, aligned), paths.dh_out))
                alsos.append([])
            if paths.stable_mask_out is not None:
                if fit_mask is None:
                    from xdem.workflows.filters import usable_mask

                    fit_mask = usable_mask(ref_d, tba_d, **masks)
                items.append((fit_mask.astype("uint8").assign_attrs(units="1 = used by the fit"),
                              paths.stable_mask_out, None))
                alsos.append([])
            with prog.stage(f"writing {', '.join(str(i[1]) for i in items)}"
                            + (" (and the statistics of dh)" if fused else "")):
                written_cog = write_cogs(items, overwrite=r.overwrite,
                                         progress=not prog.quiet and sinfo["client"] is not None, also=alsos)[0]
        t_write = time.perf_counter() - t0
        t0 = time.perf_counter()
        stats = None
        if finish is not None:
            stats = {"method": S.stats_method(r.stats_subsample), **finish(written_cog.also[0])}
        elif not no_stats:
            with prog.stage("statistics of dh before and after"):
                written = open_dem(out, chunks=ck)
                if exact:
                    stats = {
                        "method": "exact (xdem.stats), stable valid pixels, reference grid",
                        "before": exact_stats(ref_d, tba_d, **masks),
                        "after": exact_stats(ref_d, written, **masks),
                    }
                else:
                    stats = S.sampled_stats(ref_d, tba_d, written, **masks, random_state=r.random_state,
                                            subsample=r.stats_subsample)
        t_stats = time.perf_counter() - t0
        t0 = time.perf_counter()
        verdict = None
        if not no_stats:
            from xdem.verdict import verdict_of_run

            with prog.stage("verdict (checks of the result on stable pixels)"):
                sample = finish_verdict(written_cog.also[1]) if finish_verdict is not None else None
                verdict = verdict_of_run(ref_d, tba_d, open_dem(out, chunks=ck), stats=stats, sample=sample,
                                         methods=[type(s).__name__ for s in S.steps_of(model)],
                                         steps=S.steps_summary(model),
                                         inlier_mask=inlier_mask, exclude_mask=exclude_mask,
                                         random_state=r.random_state)
        t_verdict = time.perf_counter() - t0
        doc = {
            "steps": S.steps_summary(model),
            **S.rigid_document(model, ref_d),
            "frame": S.frame_summary(model, ref_d),
            "output_grid": r.grid,
            "stats": stats,
            "verdict": verdict,
            "output": str(out),
            "dh_output": None if paths.dh_out is None else str(paths.dh_out),
            "stable_mask_output": None if paths.stable_mask_out is None else str(paths.stable_mask_out),
            "filters": filters_record,
            "input_checks": checks.to_dict(),
            "report": None if paths.report is None else str(paths.report),
            "inputs": {
                "reference": abspath(ref), "to_be_aligned": abspath(tba),
                "inlier_mask": abspath(inlier_mask), "exclude_mask": abspath(exclude_mask),
                "reference_shape": list(ref_d.shape), "to_be_aligned_shape": list(tba_d.shape),
                "crs": ref_d.rio.crs.to_string() if ref_d.rio.crs else None,
                "reference_facts": file_facts(ref), "to_be_aligned_facts": file_facts(tba),
                "vertical_warning": vertical,
                "method": method, "options": {k: v for k, v in r.options.items() if v is not None},
            },
            "timing": {"fit_s": t_fit, "write_s": t_write, "stats_s": t_stats, "verdict_s": t_verdict, "report_s": 0.0,
                       "total_s": time.perf_counter() - t_start},
            "peak_rss_mb": S.peak_rss_mb(),
            "chunks": list(grid_chunks(ref_d)),
            "scheduler": sinfo["address"] or sinfo["scheduler"],
            "workers": sinfo["workers"],
        }
        if paths.write_report is not None:
            t0 = time.perf_counter()

            def _final_numbers() -> None:  # the page's last block shows the JSON's final timing and memory
                doc["timing"]["report_s"] = time.perf_counter() - t0
                doc["timing"]["total_s"] = time.perf_counter() - t_start
                doc["peak_rss_mb"] = S.peak_rss_mb()

            with prog.stage(f"writing the report {paths.report}"):
                paths.write_report(paths.report, ref=ref_d, tba=tba_d, aligned=open_dem(out, chunks=ck), coreg=model,
                                   summary=doc, overwrite=r.overwrite, **masks, on_final_block=_final_numbers,
                                   exact_stats=exact)
    if paths.write_report is None:  # else set when the report's last block was rendered (page == JSON)
        doc["timing"]["total_s"] = time.perf_counter() - t_start
        doc["peak_rss_mb"] = S.peak_rss_mb()
    children = S.peak_rss_mb(children=True)
    doc["peak_rss_children_mb"] = children if children else None
    text = S.dump_json(doc, path=paths.json_out, overwrite=r.overwrite)
    return CoregResult(document=doc, json_text=text, output=out, json_out=paths.json_out, report=paths.report,
                       timings=dict(doc["timing"]), coreg=model)


def _checked_inputs(r: CoregRequest, ref: str, tba: str) -> Any:
    """:func:`xdem.checks.check_inputs` of the request, its warnings issued."""
    from xdem.checks import check_inputs

    checks = check_inputs(reference=ref, to_be_aligned=tba, ref_band=r.ref_band, tba_band=r.tba_band,
                          ref_nodata=r.ref_nodata, tba_nodata=r.tba_nodata, ref_vertical_scale=r.ref_vertical_scale,
                          tba_vertical_scale=r.tba_vertical_scale, inlier_mask=r.inlier_mask,
                          exclude_mask=r.exclude_mask, grid=r.grid)
    checks.warn(stacklevel=3)
    return checks


def _dh_after(ref: Any, aligned: Any) -> Any:
    """``aligned - ref`` on the aligned DEM's grid (REF brought onto it lazily if needed), in metres."""
    from xdem.io.grid import _reproject_like, same_grid

    # NaN where REF does not cover the output
    ref_on = ref if same_grid(aligned, ref) else _reproject_like(ref, aligned, resampling="bilinear")
    dh = aligned.copy(data=aligned.data - ref_on.chunk(dict(zip(("y", "x"), aligned.data.chunks))).data)
    return dh.rename("dh").assign_attrs(units="m")

