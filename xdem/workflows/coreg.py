"""The whole ``xdem coreg`` job as a library call: :func:`run_coreg` (request in, result out).

One staged run, for a DEM pair and for points on one side alike (the stages take the points
route, :mod:`xdem.workflows.points`, from the opened :class:`~xdem.workflows._state.Sides`):

1. :func:`check_request`: the request's own consistency (method, grid, statistics, points);
2. :func:`request_paths` (:func:`xdem.workflows.check_coreg_paths`): inputs exist, outputs are new, once;
3. :func:`open_inputs`: the input checks (:func:`xdem.checks.check_inputs`: how to open each
   DEM), then each input opened once (lazily) -- passed down to every later stage;
4. :func:`fit`: the outlier filters, the fit;
5. :func:`write`: the aligned DEM (or the moved points) written out of core, the sampled
   statistics computed in the same pass when the DEMs share a grid;
6. :func:`measure`: the statistics of dh before and after, the verdict;
7. :func:`document` and :func:`report`: the JSON document, the HTML report;
8. :func:`finish`: the final timing and memory, the JSON text written, a :class:`CoregResult`.

``xdem coreg`` only maps its options to a :class:`CoregRequest` and calls :func:`run_coreg`
inside its scheduler, stdout and warning contexts; Python users call it directly.

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
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import xarray as xr

from xdem.checks import check_inputs, input_facts
from xdem.coreg.base import Coreg
from xdem.errors import InputError
from xdem.io import remote
from xdem.io._spill import spill_scope
from xdem.io.atomic import output_journal
from xdem.io.cog import BlockStats, write_cogs
from xdem.io.grid import _reproject_like, same_grid
from xdem.io.open import open_dem
from xdem.io.zarr import write_zarr
from xdem.io.zarr_store import is_zarr_path
from xdem.verdict import verdict_of_run
from xdem.workflows import _summary as S
from xdem.workflows import points as P
from xdem.workflows._state import PointsSide, RunState, Sides
from xdem.workflows.document import CoregDocument, SchedulerInfo, input_checks_record, stats_record, verdict_record
from xdem.workflows.filters import filter_mask, usable_mask
from xdem.workflows.request import (
    CheckedPaths,
    CoregRequest,
    CoregResult,
    ProgressLike,
    Silent,
    check_coreg_paths,
    current_scheduler,
    grid_chunks,
)
from xdem.workflows.vertical import declare_output, vertical_pair

__all__ = ["CoregRequest", "CoregResult", "CheckedPaths", "check_coreg_paths", "current_scheduler", "run_coreg",
           "check_request", "request_paths", "open_inputs", "fit", "write", "measure", "document", "report", "finish"]


def run_coreg(
    request: CoregRequest,
    *,
    environment: contextlib.AbstractContextManager[SchedulerInfo] | None = None,
    progress: Callable[[SchedulerInfo], ProgressLike] | None = None,
    started: float | None = None,
    paths: CheckedPaths | None = None,
) -> CoregResult:
    """Coregister ``request.to_be_aligned`` onto ``request.reference`` and write the result.

    Everything is out of core (memory bounded by the chunk size). If anything fails after
    an output was moved into place, the outputs of this call are removed again (a file
    replaced with ``overwrite`` is restored): a failed run leaves nothing new behind.

    Parameters
    ----------
    request
        Paths and options (:class:`CoregRequest`). Either input may be a points file.
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
    paths
        The request's paths as :func:`check_coreg_paths` already checked them (``xdem coreg``
        checks them before building the method); default: checked here, once.

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
    t_start = time.perf_counter() if started is None else started
    with output_journal():
        side = check_request(request)
        checked = paths if paths is not None else request_paths(request)
        with environment if environment is not None else current_scheduler() as sinfo:
            prog = progress(sinfo) if progress is not None else Silent()
            state = open_inputs(request, side=side, paths=checked, sinfo=sinfo, prog=prog, t_start=t_start)
            folder, reserve = _spill_place(state)
            # each input chunk decoded once (xdem.io._spill)
            with spill_scope(folder=folder, reserve=reserve, local_files=_decodes_often(request.coreg)):
                fit(state)
                write(state)
                measure(state)
                document(state)
                report(state)
        return finish(state)


#: Schedulers computing in this process (threads of it): the only ones that see the run's spill.
_LOCAL_SCHEDULERS = ("threads", "threading", "synchronous", "sync", "single-threaded")


def _spill_place(state: RunState) -> tuple[str | None, int]:
    """Where and whether the run spills its decoded input chunks (:func:`xdem.io._spill.spill_scope`):
    in the output's folder (a remote output's staging folder: the system's temporary folder),
    leaving room for the write pass's temporaries (1.5 x the raw outputs, as the COG writer
    plans them), on the local threaded or synchronous scheduler only (the spill is a file of
    this process: worker processes, maybe on other machines, cannot share it). Returns the
    folder (``None``: no spill) and the bytes to leave free."""
    sinfo, out = state.sinfo, state.paths.output
    local = sinfo["client"] is None and sinfo["scheduler"] in _LOCAL_SCHEDULERS
    dems = [d for d in (state.sides.ref, state.sides.tba) if isinstance(d, xr.DataArray)]
    if not local or not dems:
        return None, 0
    pixels = max(d.shape[0] * d.shape[1] for d in dems)
    item = max(d.dtype.itemsize for d in dems)
    n_out = 1 + (state.paths.dh_out is not None) + (state.paths.stable_mask_out is not None)
    folder = tempfile.gettempdir() if isinstance(out, str) else os.fspath(Path(out).parent)
    return folder, int(1.5 * pixels * item * n_out)


def _decodes_often(coreg: Coreg | None) -> bool:
    """Whether the fit decodes the inputs' chunks more than once (``Capabilities.rereads_inputs``:
    a blockwise step), so that spilling local inputs too pays: at 20000^2 ``blockwise:nuthkaab``
    117.5 / 118.5 s CPU without, 108.3 / 108.8 s with; ``nuthkaab`` 76.4 / 75.2 s without,
    76.8 / 75.9 s with (docs/performance.md, Session 23)."""
    return coreg is not None and coreg.capabilities.rereads_inputs


def check_request(request: CoregRequest) -> PointsSide | None:
    """Stage 1: refuse a request that cannot run; returns which input is points (``None``: two DEMs).

    Raises
    ------
    xdem.errors.InputError
        No estimator, an unknown grid or statistics, a field points cannot serve.

    Examples
    --------
    >>> import xdem
    >>> lidar = xdem.examples.get_path("lidar")
    >>> check_request(CoregRequest(reference=lidar, to_be_aligned=lidar, output="a.tif", coreg=xdem.coreg.NuthKaab()))
    """
    r = request
    side = P.points_side(r)
    if r.coreg is None:
        raise InputError("CoregRequest.coreg is required: an unfitted estimator such as xdem.coreg.NuthKaab()")
    if side is not None:
        return side
    if r.grid not in ("tba", "ref"):
        raise InputError(f"grid must be 'tba' or 'ref', got {r.grid!r}")
    if r.stats not in ("sampled", "exact", "none"):
        raise InputError(f"stats must be 'sampled', 'exact' or 'none', got {r.stats!r}")
    return None


def request_paths(request: CoregRequest) -> CheckedPaths:
    """Stage 2: :func:`check_coreg_paths` of the request's paths (the only check of them in a run)."""
    r = request
    return check_coreg_paths(reference=r.reference, to_be_aligned=r.to_be_aligned, output=r.output,
                             inlier_mask=r.inlier_mask, exclude_mask=r.exclude_mask, json_out=r.json_out,
                             report=r.report, overwrite=r.overwrite, resume=r.resume, dh_out=r.dh_out,
                             stable_mask_out=r.stable_mask_out)


def open_inputs(request: CoregRequest, *, side: PointsSide | None, paths: CheckedPaths, sinfo: SchedulerInfo,
                prog: ProgressLike, t_start: float) -> RunState:
    """Stage 3: check the inputs and open each once; the state every later stage reads."""
    chunks: int | str = request.chunks if request.chunks else "auto"
    if side is not None:
        sides = P.open_points(request, side=side, prog=prog, chunks=chunks)
    else:
        sides = _open_pair(request, sinfo=sinfo, prog=prog, chunks=chunks)
    return RunState(request=request, paths=paths, sinfo=sinfo, prog=prog, t_start=t_start, sides=sides)


def _open_pair(r: CoregRequest, *, sinfo: SchedulerInfo, prog: ProgressLike, chunks: int | str) -> Sides:
    """:func:`open_inputs` of two DEMs: checked, opened, their facts and CRSs read once."""
    ref, tba = os.fspath(r.reference), os.fspath(r.to_be_aligned)
    checks = check_inputs(reference=ref, to_be_aligned=tba, ref_band=r.ref_band, tba_band=r.tba_band,
                          ref_nodata=r.ref_nodata, tba_nodata=r.tba_nodata, ref_vertical_scale=r.ref_vertical_scale,
                          tba_vertical_scale=r.tba_vertical_scale, inlier_mask=r.inlier_mask,
                          exclude_mask=r.exclude_mask, grid=r.grid)
    checks.warn(stacklevel=3)
    assert checks.ref is not None and checks.tba is not None  # both checked: a pair of DEM files
    ref_d, tba_d = (open_dem(c.path, chunks=chunks, band=c.band, nodata=c.nodata, vertical_scale=c.vertical_scale)
                    for c in (checks.ref, checks.tba))
    prog.echo(f"xdem coreg: {r.coreg!r}")
    chunk_shape, n_workers = grid_chunks(ref_d), sinfo["workers"]
    prog.echo(f"  scheduler {sinfo['address'] or sinfo['scheduler']} ({n_workers} worker{'' if n_workers == 1 else 's'}), "
              f"chunks {chunk_shape[0]} x {chunk_shape[1]}")
    (ref_facts, ref_crs), (tba_facts, tba_crs) = input_facts(ref), input_facts(tba)
    ref_d, tba_d, vertical, category = vertical_pair(r, ref_d, tba_d, ref_crs, tba_crs)
    if vertical:
        warnings.warn(vertical, category, stacklevel=3)
    return Sides(ref=ref_d, tba=tba_d, checks=checks, facts=(ref_facts, tba_facts), vertical=vertical)


def _pair(state: RunState) -> tuple[xr.DataArray, xr.DataArray]:
    """REF and TBA of a DEM pair."""
    ref, tba = state.sides.ref, state.sides.tba
    assert isinstance(ref, xr.DataArray) and isinstance(tba, xr.DataArray)
    return ref, tba


def fit(state: RunState) -> None:
    """Stage 4: the outlier filters (the document's ``filters``), then the fit (``timing.fit_s``)."""
    t0 = time.perf_counter()
    if state.sides.points_side is not None:
        P.fit_points(state)
    else:
        r, prog = state.request, state.prog
        ref, tba = _pair(state)
        inlier: str | xr.DataArray | None = state.inlier_mask
        exclude = state.exclude_mask
        if r.filters is not None and r.filters.active:
            with prog.stage("outlier filters (slope of REF, NMAD of dh before)"):
                state.fit_mask, state.filters_record = filter_mask(
                    ref, tba, filters=r.filters, inlier_mask=state.inlier_mask, exclude_mask=state.exclude_mask,
                    random_state=r.random_state)
            inlier, exclude = state.fit_mask, None
        with prog.stage("fitting"):
            state.model.fit(ref, tba, inlier_mask=inlier, exclude_mask=exclude)
    state.timing["fit_s"] = time.perf_counter() - t0


def write(state: RunState) -> None:
    """Stage 5: the output written out of core (``timing.write_s``)."""
    if state.sides.points_side is not None:
        t0 = time.perf_counter()
        P.write_points(state)
        state.timing["write_s"] = time.perf_counter() - t0
        return
    r, ref, tba = state.request, *_pair(state)
    state.aligned = aligned = state.model.apply(tba, grid=ref if r.grid == "ref" else None)
    t0 = time.perf_counter()
    out, prog, show = state.paths.output, state.prog, not state.prog.quiet and state.sinfo["client"] is not None
    if is_zarr_path(out):  # a store is written chunk by chunk (resumable): statistics after it
        with prog.stage(f"writing {out}"):
            write_zarr(aligned, out, overwrite=r.overwrite, resume=r.resume,
                       fingerprint=_fit_record(state.model, r.grid), progress=show)
    else:
        # The sampled statistics are computed in the block-writing pass (the blocks of TBA and of
        # the aligned DEM are shared) when the DEMs share a grid; otherwise after it.
        fused = r.stats == "sampled" and same_grid(ref, tba) and same_grid(ref, aligned)
        items, alsos = _cog_items(state, fused)
        # Local schedulers: the stage's dask progress bar (shown for computes > 1 s) covers the
        # block-writing pass; distributed: write_cog counts the blocks it has written.
        with prog.stage(f"writing {', '.join(str(i[1]) for i in items)}"
                        + (" (and the statistics of dh)" if fused else "")):
            state.written_also = list(write_cogs(items, overwrite=r.overwrite, progress=show, also=alsos)[0].also)
    state.timing["write_s"] = time.perf_counter() - t0


_CogItem = tuple[xr.DataArray, Path | str] | tuple[xr.DataArray, Path | str, None]


def _cog_items(state: RunState, fused: bool) -> tuple[list[_CogItem], list[list[BlockStats]]]:
    """What :func:`xdem.io.cog.write_cogs` writes in one pass (the aligned DEM, ``dh_out``,
    ``stable_mask_out``) and computes in it (the fused statistics and verdict sample)."""
    r, paths, (ref, tba), aligned = state.request, state.paths, _pair(state), state.aligned
    assert aligned is not None
    also: list[BlockStats] = []
    if fused:
        masks = {"inlier_mask": state.inlier_mask, "exclude_mask": state.exclude_mask}
        block_stats, state.finish_stats = S.stats_while_writing(ref, tba, aligned, **masks, random_state=r.random_state,
                                                                subsample=r.stats_subsample)
        finishers: list[S.SampleFinisher] = []
        also = [block_stats, S.verdict_while_writing(ref, aligned, **masks, random_state=r.random_state,
                                                     finishers=finishers)]
        state.finish_verdict = finishers[0]
    items: list[_CogItem] = [(declare_output(aligned, r), paths.output)]
    alsos = [also]
    if paths.dh_out is not None:
        items.append((_dh_after(ref, aligned), paths.dh_out))
        alsos.append([])
    if paths.stable_mask_out is not None:
        if state.fit_mask is None:
            state.fit_mask = usable_mask(ref, tba, inlier_mask=state.inlier_mask, exclude_mask=state.exclude_mask)
        items.append((state.fit_mask.astype("uint8").assign_attrs(units="1 = used by the fit"),
                      paths.stable_mask_out, None))
        alsos.append([])
    return items, alsos


def measure(state: RunState) -> None:
    """Stage 6: the statistics of dh before and after (``timing.stats_s``) and the verdict
    (``timing.verdict_s``), on the written output opened once."""
    if state.sides.points_side is not None:
        P.measure_points(state)
        return
    r, prog, (ref, tba) = state.request, state.prog, _pair(state)
    inlier_mask, exclude_mask = state.inlier_mask, state.exclude_mask
    t0 = time.perf_counter()
    if state.finish_stats is not None:
        state.stats = stats_record(S.stats_method(r.stats_subsample), state.finish_stats(state.written_also[0]))
    elif r.stats != "none":
        with prog.stage("statistics of dh before and after"):
            written = state.output_dem()
            if r.stats == "exact":
                state.stats = {
                    "method": "exact (xdem.stats), stable valid pixels, reference grid",
                    "before": S.dh_stats(ref, tba, inlier_mask=inlier_mask, exclude_mask=exclude_mask),
                    "after": S.dh_stats(ref, written, inlier_mask=inlier_mask, exclude_mask=exclude_mask),
                }
            else:
                state.stats = S.sampled_stats(ref, tba, written, inlier_mask=inlier_mask, exclude_mask=exclude_mask,
                                              random_state=r.random_state, subsample=r.stats_subsample)
    state.timing["stats_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if r.stats != "none":
        with prog.stage("verdict (checks of the result on stable pixels)"):
            sample = state.finish_verdict(state.written_also[1]) if state.finish_verdict is not None else None
            state.verdict = verdict_record(verdict_of_run(ref, tba, state.output_dem(), stats=state.stats, sample=sample,
                                           methods=[type(s).__name__ for s in S.steps_of(state.model)],
                                           steps=S.steps_summary(state.model), inlier_mask=inlier_mask,
                                           exclude_mask=exclude_mask, random_state=r.random_state,
                                           vertical_mismatch=state.sides.vertical))
    state.timing["verdict_s"] = time.perf_counter() - t0


def document(state: RunState) -> None:
    """Stage 7a: the JSON document (``state.document``)."""
    if state.sides.points_side is not None:
        state.document = P.points_document(state)
        return
    r, sides, model, paths, (ref, tba), t = state.request, state.sides, state.model, state.paths, _pair(state), state.timing
    method = r.method if r.method is not None else "+".join(type(s).__name__.lower() for s in S.steps_of(model))
    steps, rigid = S.steps_summary(model), S.rigid_document(model, ref)
    doc: CoregDocument = {
        "steps": steps,
        "matrix": rigid["matrix"], "matrix_about": rigid["matrix_about"],
        "matrix_about_centre": rigid["matrix_about_centre"], "matrix_is_complete": rigid["matrix_is_complete"],
        "rotations_deg": rigid["rotations_deg"], "rotation_centre": rigid["rotation_centre"],
        "translation": rigid["translation"], "translation_px": rigid["translation_px"],
        "frame": S.frame_summary(model, ref),
        "output_grid": r.grid,
        "stats": state.stats,
        "verdict": state.verdict,
        "output": str(paths.output),
        "dh_output": None if paths.dh_out is None else str(paths.dh_out),
        "stable_mask_output": None if paths.stable_mask_out is None else str(paths.stable_mask_out),
        "filters": state.filters_record,
        "input_checks": input_checks_record(sides.checks.to_dict()),
        "report": None if paths.report is None else str(paths.report),
        "inputs": {
            "reference": remote.shown(r.reference), "to_be_aligned": remote.shown(r.to_be_aligned),
            "inlier_mask": _abspath(state.inlier_mask), "exclude_mask": _abspath(state.exclude_mask),
            "reference_shape": list(ref.shape), "to_be_aligned_shape": list(tba.shape),
            "crs": ref.rio.crs.to_string() if ref.rio.crs else None,
            "reference_facts": sides.facts[0], "to_be_aligned_facts": sides.facts[1],
            "vertical_warning": sides.vertical,
            "method": method, "options": {k: v for k, v in r.options.items() if v is not None},
        },
        "timing": {"fit_s": t["fit_s"], "write_s": t["write_s"], "stats_s": t["stats_s"],
                   "verdict_s": t["verdict_s"], "report_s": 0.0, "total_s": time.perf_counter() - state.t_start},
        "peak_rss_mb": S.peak_rss_mb(),
        "chunks": list(grid_chunks(ref)),
        "scheduler": state.sinfo["address"] or state.sinfo["scheduler"],
        "workers": state.sinfo["workers"],
    }
    state.document = doc


def report(state: RunState) -> None:
    """Stage 7b: the HTML report, when asked for (its last block shows the document's final
    timing and memory: the page equals the JSON)."""
    paths, doc = state.paths, state.document
    if paths.report is None:
        return
    if state.sides.points_side is not None:
        P.report_points(state)
        return
    assert paths.write_report is not None
    ref, tba = _pair(state)
    t0 = time.perf_counter()

    def _final_numbers() -> None:
        doc["timing"]["report_s"] = time.perf_counter() - t0
        doc["timing"]["total_s"] = time.perf_counter() - state.t_start
        doc["peak_rss_mb"] = S.peak_rss_mb()

    with state.prog.stage(f"writing the report {paths.report}"):
        paths.write_report(paths.report, ref=ref, tba=tba, aligned=state.output_dem(), coreg=state.model,
                           summary=doc, overwrite=state.request.overwrite, inlier_mask=state.inlier_mask,
                           exclude_mask=state.exclude_mask, on_final_block=_final_numbers,
                           exact_stats=state.request.stats == "exact")


def finish(state: RunState) -> CoregResult:
    """Stage 8 (after the computation's environment exited): the final timing and memory,
    the JSON text (written to ``json_out``), the :class:`CoregResult`."""
    doc, paths = state.document, state.paths
    if state.sides.points_side is None:
        if paths.write_report is None:  # else set when the report's last block was rendered (page == JSON)
            doc["timing"]["total_s"] = time.perf_counter() - state.t_start
            doc["peak_rss_mb"] = S.peak_rss_mb()
        children = S.peak_rss_mb(children=True)
        doc["peak_rss_children_mb"] = children if children else None
    text = S.dump_json(doc, path=paths.json_out, overwrite=state.request.overwrite)
    return CoregResult(document=doc, json_text=text, output=paths.output, json_out=paths.json_out,
                       report=paths.report, timings=doc["timing"].copy(), coreg=state.model)


def _fit_record(model: Coreg, grid: str) -> dict[str, object]:
    """What a Zarr output's fingerprint records of the fit (compared when resuming)."""
    fitted: object
    try:
        fitted = model.to_dict()
    except (AttributeError, NotImplementedError, TypeError, ValueError):
        fitted = S.steps_summary(model)
    return {"coreg": S.jsonable(fitted), "grid": grid}


def _abspath(path: str | None) -> str | None:
    """``path`` made absolute, a URL as given without password (``None`` stays ``None``)."""
    return None if path is None else remote.shown(path)


def _dh_after(ref: xr.DataArray, aligned: xr.DataArray) -> xr.DataArray:
    """``aligned - ref`` on the aligned DEM's grid (REF brought onto it lazily if needed), in metres."""
    # NaN where REF does not cover the output
    ref_on = ref if same_grid(aligned, ref) else _reproject_like(ref, aligned, resampling="bilinear")
    dh = aligned.copy(data=aligned.data - ref_on.chunk(dict(zip(("y", "x"), aligned.data.chunks))).data)
    out: xr.DataArray = dh.rename("dh").assign_attrs(units="m")
    return out
