"""The typed ends of a run: :class:`CoregRequest` (what to do), :class:`CoregResult` (what was
done), :func:`check_coreg_paths` (the cheap checks of its paths, once, before any computation)
and what :func:`xdem.workflows.run_coreg` reports progress to.

Examples
--------
>>> import xdem
>>> lidar = xdem.examples.get_path("lidar")
>>> request = CoregRequest(reference=lidar, to_be_aligned=lidar, output="/tmp/aligned.tif", coreg=xdem.coreg.NuthKaab())
>>> request.grid, request.stats
('tba', 'sampled')
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

import dask
import dask.threaded
import xarray as xr

from xdem.coreg.base import Coreg
from xdem.errors import InputError
from xdem.io import remote
from xdem.io.zarr import check_store_path
from xdem.io.zarr_store import is_zarr_path
from xdem.points.read import is_points_source
from xdem.workflows import _summary as S
from xdem.workflows.document import CoregDocument, SchedulerInfo, Timing
from xdem.workflows.filters import OutlierFilters

__all__ = ["CoregRequest", "CoregResult", "CheckedPaths", "check_coreg_paths", "ProgressLike", "Silent",
           "current_scheduler", "grid_chunks"]


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
        Either input may be a points file (:func:`xdem.points.read_points`; the run's stages
        take a DEM or points on either side, see :mod:`xdem.workflows.points`): the column of
        their elevation.
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
    ref_vcrs, tba_vcrs, to_vcrs
        Vertical CRS of REF / TBA (``"Ellipsoid"``, ``"EGM96"``, ``"EGM08"``, a geoid grid
        file, an EPSG code; ``None``: the one the file declares), and the one to convert both
        to before the fit (the output declares it), :mod:`xdem.workflows.vertical`.
    geoid_interpolation
        How the geoid grids are interpolated for ``to_vcrs``: ``"bilinear"`` (PROJ's) or
        ``"spline"`` (NGA's 6 x 6 bicubic spline), :func:`xdem.vcrs.convert_heights`.
    dh_out
        Also write ``dh`` after (aligned minus REF, on the output grid) as a COG, in the same
        pass as the aligned DEM. Two DEMs only.
    stable_mask_out
        Also write the pixels the fit could use (Byte: 1 = stable, valid in both DEMs and
        within the filters; 0 = not) on the grid the fit works on, in the same pass. Two
        DEMs only.
    """

    reference: str | os.PathLike[str]
    to_be_aligned: str | os.PathLike[str]
    output: str | os.PathLike[str]
    coreg: Coreg | None
    method: str | None = None
    options: Mapping[str, object] = field(default_factory=dict)
    grid: Literal["tba", "ref"] = "tba"
    inlier_mask: str | os.PathLike[str] | None = None
    exclude_mask: str | os.PathLike[str] | None = None
    random_state: int | None = None
    chunks: int | None = None
    overwrite: bool = False
    resume: bool = False
    json_out: str | os.PathLike[str] | None = None
    report: str | os.PathLike[str] | None = None
    stats: Literal["sampled", "exact", "none"] = "sampled"
    stats_subsample: int = S.STATS_SUBSAMPLE
    z_column: str | None = None
    points_crs: str | None = None
    filters: OutlierFilters | None = None
    dh_out: str | os.PathLike[str] | None = None
    stable_mask_out: str | os.PathLike[str] | None = None
    ref_band: int | None = None
    tba_band: int | None = None
    ref_nodata: float | None = None
    tba_nodata: float | None = None
    ref_vertical_scale: float | None = None
    tba_vertical_scale: float | None = None
    ref_vcrs: str | None = None
    tba_vcrs: str | None = None
    to_vcrs: str | None = None
    geoid_interpolation: Literal["bilinear", "spline"] = "bilinear"


@dataclass(frozen=True, kw_only=True)
class CoregResult:
    """What :func:`run_coreg` did.

    Attributes
    ----------
    document
        The JSON document (``xdem coreg --json`` prints it; typed
        :class:`~xdem.workflows.document.CoregDocument`): steps, matrix, frame, statistics,
        verdict, inputs, timing, memory, scheduler.
    json_text
        ``document`` as the strict JSON text written to ``json_out`` and printed by ``--json``.
    output, json_out, report
        Absolute paths written, ``s3://`` URLs of outputs uploaded (``None`` when not asked for).
    timings
        Seconds per stage: ``fit_s``, ``write_s``, ``stats_s``, ``verdict_s``, ``report_s``, ``total_s``.
    coreg
        The fitted estimator.
    """

    document: CoregDocument
    json_text: str
    output: Path | str
    json_out: Path | str | None
    report: Path | str | None
    timings: Timing
    coreg: Coreg


@dataclass(frozen=True)
class CheckedPaths:
    """Absolute output paths (``s3://`` URLs for outputs to object storage) after
    :func:`check_coreg_paths`, and the report writer."""

    output: Path | str
    json_out: Path | str | None
    report: Path | str | None
    write_report: Callable[..., object] | None
    dh_out: Path | str | None = None
    stable_mask_out: Path | str | None = None


def check_coreg_paths(
    *, reference: str | os.PathLike[str], to_be_aligned: str | os.PathLike[str], output: str | os.PathLike[str],
    inlier_mask: str | os.PathLike[str] | None = None, exclude_mask: str | os.PathLike[str] | None = None,
    json_out: str | os.PathLike[str] | None = None, report: str | os.PathLike[str] | None = None, overwrite: bool = False,
    resume: bool = False, dh_out: str | os.PathLike[str] | None = None, stable_mask_out: str | os.PathLike[str] | None = None,
) -> CheckedPaths:
    """The cheap checks run before any computation, so that nobody waits for a fit that cannot
    be saved: inputs exist; outputs are new (or ``overwrite``), distinct from the inputs and
    each other, in existing folders; the report module is available if a report is asked for.

    Raises
    ------
    xdem.errors.InputError
        An input file is missing, or a remote one (``s3://``, ``http(s)://``, ``/vsis3/``,
        ``/vsicurl/``...: a DEM, a mask or points) is refused or missing on its server (one
        line naming the URL and the server's answer).
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
    raw = {"reference": reference, "to-be-aligned DEM": to_be_aligned, "inlier mask": inlier_mask,
           "exclude mask": exclude_mask}
    inputs: dict[str, str | None] = {k: (None if v is None else os.fspath(v)) for k, v in raw.items()}
    for label, path in inputs.items():
        if path is not None and remote.is_remote(path):
            if label.endswith("mask") or is_points_source(path):  # not (always) a raster: the store is asked
                remote.check_object(path, label=label)
            else:
                remote.check_remote(path, label=label)
        elif path is not None and not Path(path).exists():
            raise InputError(f"{label} file not found: '{path}'")
    if is_zarr_path(output):
        if dh_out or stable_mask_out:
            raise InputError(f"--dh-out and --stable-mask-out are written in the same pass as a COG output; with the "
                             f"Zarr store '{output}' write the aligned DEM first, then e.g. a dh COG from it")

        out: Path | str = check_store_path(output, overwrite=overwrite, resume=resume,
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
    extra: dict[str, Path | str | None] = {}
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

    def stage(self, text: str) -> contextlib.AbstractContextManager[None]: ...  # noqa: D102


class Silent:
    """Progress that shows nothing (the default of :func:`xdem.workflows.run_coreg`)."""

    quiet = True

    def echo(self, text: str = "") -> None:
        pass

    @contextlib.contextmanager
    def stage(self, text: str) -> Iterator[None]:
        yield


@contextlib.contextmanager
def current_scheduler() -> Iterator[SchedulerInfo]:
    """Describe the dask scheduler computations run on now (``scheduler``, ``workers``,
    ``address``, ``client``), as ``xdem.cli._common.use_scheduler`` yields it."""
    client = None
    with contextlib.suppress(ImportError, ValueError):
        if "distributed" in sys.modules:  # no client exists before distributed is imported: do not import it
            from distributed import default_client

            client = default_client()
    if client is not None and dask.base.get_scheduler() == client.get:
        yield {"scheduler": client.scheduler.address, "workers": len(client.scheduler_info().get("workers", {})),
               "address": client.scheduler.address, "client": client}
        return
    name = dask.config.get("scheduler", None) or "threads"
    name = "threads" if name is dask.threaded.get else name  # as use_scheduler("threads") sets it
    name = name if isinstance(name, str) else getattr(name, "__name__", "custom")
    workers = 1 if name in ("synchronous", "sync", "single-threaded") else dask.config.get("num_workers", None) or os.cpu_count()
    yield {"scheduler": name, "workers": workers, "address": None, "client": None}


def grid_chunks(dem: xr.DataArray) -> tuple[int, int]:
    """Largest chunk side along rows and columns of an opened (dask-backed) DEM."""
    chunks = dem.chunks
    if chunks is None:
        raise TypeError("expected a dask-backed DEM (xdem.open_dem)")
    return max(chunks[0]), max(chunks[1])
