"""The one function of :mod:`xdem.report`: :func:`write_report` (the package exposes it lazily)."""

from __future__ import annotations

import datetime as _dt
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xdem.errors import InputError
from xdem.io import remote, upload
from xdem.io.atomic import check_output_path, write_text_atomic
from xdem.io.sources import find_sources
from xdem.report import figures  # noqa: F401  (fail early if matplotlib is broken)
from xdem.report.data import collect, open_inputs
from xdem.report.html import document
from xdem.report.overviews import file_of
from xdem.report.sections import build_sections, find_stats, processing_section
from xdem.typing import DEMLike, MaskLike

if TYPE_CHECKING:  # annotations only
    from xdem.coreg import Coreg
    from xdem.typing import JSONDict

__all__ = ["write_report"]


def _check_target(path: Path | str, overwrite: bool, inputs: list[Any]) -> None:
    """The report's path through the one output guard; ``inputs`` are DEM-likes (paths, or
    lazy DEMs whose source files are found in their graphs)."""
    sources: list[tuple[str, str | os.PathLike[str]]] = []
    for src in inputs:
        if src is None:
            continue
        found = [src] if isinstance(src, (str, os.PathLike)) else list(find_sources(src))
        sources += [("one of the input DEMs", f) for f in found]
    if remote.is_remote(path):
        upload.check_output_url(path, overwrite=overwrite, what="report", overwrite_hint="overwrite=True (--overwrite)",
                                inputs=sources)
        return
    check_output_path(path, overwrite=overwrite, what="report", overwrite_hint="overwrite=True (--overwrite)",
                      inputs=sources)


def _write_atomic(path: Path | str, text: str, overwrite: bool) -> None:
    if isinstance(path, str):  # object storage: staged, one conditional put when the run's outputs are final
        upload.stage_text(path, text, overwrite=overwrite, what="report")
        return
    write_text_atomic(path, text, overwrite=overwrite)  # never replaces a file that appeared meanwhile


def _name(src: Any, default: str) -> str:
    if isinstance(src, (str, os.PathLike)):
        return str(src)
    return str(getattr(src, "name", None) or default)


def write_report(
    path: str | os.PathLike[str],
    *,
    ref: DEMLike,
    tba: DEMLike,
    aligned: DEMLike | None = None,
    coreg: Coreg | None = None,
    summary: JSONDict | None = None,
    overwrite: bool = False,
    max_pixels: int = 1_000_000,
    subsample: int = 200_000,
    random_state: int | None = None,
    inlier_mask: MaskLike = None,
    exclude_mask: MaskLike = None,
    on_final_block: Callable[[], None] | None = None,
    exact_stats: bool = False,
) -> Path | str:
    """Write a self-contained HTML report of a DEM pair before (and after) coregistration.

    Everything is computed out of core with memory bounded by the chunk size, in ONE pass over
    the data (each block of each DEM read once; :func:`xdem.report.data.collect`): maps (at
    most ``max_pixels`` pixels) are read from the files' overviews when every DEM is a file on
    the reference grid with overviews and no mask is given (GDAL's resampling, not exact block
    means: :mod:`xdem.report.overviews`), else are ``k x k`` block means computed in the pass;
    histograms, the Nuth & Kääb diagnostic and the statistics by slope class use a
    reproducible subsample (counts exact); the statistics of dh, when ``summary`` has none,
    are those of ``xdem coreg`` (exact counts, min and max; the rest on a reproducible
    subsample of :data:`xdem.stats.STATS_SUBSAMPLE` pixels). ``exact_stats`` makes them and
    the slope tables exact, at the cost of about twenty more passes.

    With masks, every statistic, histogram, diagnostic, slope table, colour scale and the
    verdict use the stable pixels only (inside ``inlier_mask``, outside ``exclude_mask``);
    the maps show every pixel with the outline of the mask, and a block "Inside the mask"
    gives the mean dh and volume change there with their uncertainty
    (:mod:`xdem.report.masked`).

    Parameters
    ----------
    path
        Output ``.html`` file, written atomically (temporary file in the same folder, then
        renamed); nothing is written when an error is raised.
    ref, tba
        Reference and to-be-aligned DEMs (paths or lazy DataArrays); ``tba`` is brought onto
        the reference grid lazily. dh before is ``tba - ref``.
    aligned
        The coregistered ``tba`` (path or lazy DataArray) or ``None`` (only "before" shown).
        dh after is ``aligned - ref`` on the reference grid.
    coreg
        The fitted :class:`~xdem.coreg.Coreg` or pipeline, for the parameter table and the
        fitted Nuth & Kääb curve (optional).
    summary
        The JSON document of ``xdem coreg --json-out``: statistics, steps, matrix, timing,
        memory, chunks... Numbers it holds are shown as they are, each in an element with
        ``data-key="<dotted path>"``. When it has no statistics they are computed here.
    overwrite
        Replace an existing file.
    max_pixels
        Largest number of pixels of each decimated map.
    subsample
        Number of valid pixels drawn for the histograms and the Nuth & Kääb diagnostic.
    random_state
        Seed of the subsample (same draw for any chunking).
    inlier_mask, exclude_mask
        Stable terrain to use / unstable terrain to exclude (e.g. glacier outlines), as
        :func:`xdem.masks.stable_mask_like` takes them: boolean arrays or DataArrays on the
        reference grid, raster or vector paths, GeoDataFrames.
    on_final_block
        Called once everything but the processing summary (the last block of the page) is
        computed, just before that block is rendered from ``summary``: ``xdem coreg --report``
        sets its final timing and memory in ``summary`` there, so the page and the JSON show
        the same numbers.
    exact_stats
        Exact statistics of dh (when ``summary`` has none) and exact slope-class tables
        (out-of-core quantiles, several passes each) instead of sampled ones.

    Returns
    -------
    pathlib.Path
        The written file.

    Raises
    ------
    xdem.errors.OverlapError
        The DEMs do not overlap.
    xdem.errors.NotEnoughDataError
        No pixel is valid in both ``ref`` and ``tba``.
    xdem.errors.OutputError
        ``path`` exists (without ``overwrite``), is a folder, is an input, or its folder is missing.
    """
    t0 = time.perf_counter()
    out: Path | str = upload.object_url(path, what="report") if remote.is_remote(path) else Path(path)
    _check_target(out, overwrite, [ref, tba, aligned])
    if summary is not None and not isinstance(summary, dict):
        raise InputError(f"summary must be a dict (the JSON of xdem coreg --json-out), got {type(summary).__name__}")
    if isinstance(subsample, bool) or int(subsample) < 1:
        raise InputError(f"subsample must be a positive number of pixels, got {subsample!r}")
    ref_d, tba_d, al_d = open_inputs(ref, tba, aligned)
    files = {name: file_of(src) for name, src in (("ref", ref), ("tba", tba), ("aligned", aligned)) if src is not None}
    data = collect(
        ref_d, tba_d, al_d, max_pixels=int(max_pixels), subsample=int(subsample), random_state=random_state,
        need_stats=find_stats(summary) is None, inlier_mask=inlier_mask, exclude_mask=exclude_mask,
        overview_files={n: p for n, p in files.items() if p is not None} if None not in files.values() else None,
        exact_stats=bool(exact_stats),
    )
    sections = build_sections(data, coreg=coreg, summary=summary, random_state=random_state)
    if on_final_block is not None:
        on_final_block()
    sections.append(("processing", "Processing summary", processing_section(data, summary, time.perf_counter() - t0)))
    now = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    subtitle = [
        f"Reference: {_name(ref, 'ref')} — to be aligned: {_name(tba, 'tba')}"
        + (f" — aligned: {_name(aligned, 'aligned')}" if aligned is not None else ""),
        f"Grid {data.shape[0]} × {data.shape[1]} pixels, {data.crs}, elevation differences dh in {data.units}; "
        f"generated {now} by xdem",
    ]
    if data.masked:
        subtitle.append("Statistics, histograms, diagnostic, slope tables, colour scales and verdict on stable pixels: "
                        + ", ".join(f"{w} {_name(m, 'mask')}" for w, m in (("inside", inlier_mask), ("outside", exclude_mask))
                                    if m is not None))
    text = document("xdem coregistration report", subtitle, sections)
    _write_atomic(out, text, overwrite)
    return out
