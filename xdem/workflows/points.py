"""The points route of the stages of :func:`xdem.workflows.run_coreg`: a points file on one side.

Reference points and a DEM to align (the common case): the aligned DEM is written as a COG,
lazily, as for two DEMs. A reference DEM and points to align: the moved points are written
(exactly, :meth:`xdem.coreg.Coreg.apply_points`) to a points file (GeoPackage, or any vector
format geopandas writes, chosen by the output's suffix).

The statistics are those of ``dh = tba - ref`` at the points before and after: the DEM
evaluated at the points out of core (the written COG when the DEM was aligned), median, NMAD,
mean, RMSE and count over the points with a valid DEM value, and after without the outliers
(the fit's rule on the residuals). ``--report``: :func:`xdem.report.points.write_points_report`
(the tracks coloured by dh, histograms).

Outlier filters (``request.filters``, ``--min-slope / --max-slope / --nmad-filter``) choose the
points the fit uses (:func:`xdem.workflows.filters.filter_points`, recorded in the document's
``filters``); the statistics and the report keep every point, as for two DEMs. ``dh_out`` and
``stable_mask_out`` are rasters on a DEM pair's grid: refused (:data:`NOT_FOR_POINTS`).

The functions named ``*_points`` are the stages' points routes (:mod:`xdem.workflows.coreg`
calls them with its :class:`~xdem.workflows._state.RunState`); this module imports nothing of
:mod:`xdem.workflows.coreg`.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Literal, cast

import geopandas as gpd
import numpy as np
import xarray as xr

from xdem._scale_checks import points_scale_finding
from xdem.checks import DemCheck, InputChecks, InputCheckWarning, check_dem
from xdem.coreg._data import prepare_points
from xdem.errors import InputError
from xdem.io import remote, upload
from xdem.io.atomic import move_into_place
from xdem.io.cog import write_cog
from xdem.io.grid import dask_data
from xdem.io.open import open_dem
from xdem.io.zarr import write_zarr
from xdem.io.zarr_store import is_zarr_path
from xdem.kernels.interp import FIT_INTERPOLATION
from xdem.kernels.robust import nmad, nmad_inliers
from xdem.points import PointSet, dem_at_points, is_points_source, pixel_positions, read_points
from xdem.workflows import _summary as S
from xdem.workflows._state import PointsSide, RunState, Sides
from xdem.workflows.document import CoregDocument, DhStats, PointsSummary, input_checks_record
from xdem.workflows.filters import filter_points
from xdem.workflows.request import CoregRequest, ProgressLike

__all__ = ["dh_at_points_stats", "points_summary", "points_side", "POINT_OUTPUTS", "NOT_FOR_POINTS"]
#: Suffixes the moved points can be written as (single files).
POINT_OUTPUTS = (".gpkg", ".geojson", ".fgb", ".parquet")

#: Why each raster output of a DEM pair is refused with points (``xdem coreg`` says it for
#: ``--dh-out`` / ``--stable-mask-out``, :func:`run_points_coreg` for the request's fields).
NOT_FOR_POINTS = {
    "dh_out": "not available with points: it is a raster of dh on the grid of a pair of DEMs; dh before and "
              "after at the points are in the JSON document's stats (and the report)",
    "stable_mask_out": "not available with points: it is a raster of the pixels of a pair of DEMs the fit used; "
                       "the points kept by the outlier filters are counted in the JSON document's filters",
}


def dh_at_points_stats(dh: np.ndarray) -> DhStats:
    """Median, NMAD, mean, RMSE and count of the finite ``dh`` (NaN/None when there are none).

    Examples
    --------
    >>> dh_at_points_stats(np.array([1.0, 2.0, 3.0, np.nan]))["count"]
    3
    """
    v = np.asarray(dh, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {"count": 0, "median": None, "nmad": None, "mean": None, "rmse": None}
    return {"count": int(v.size), "median": float(np.median(v)), "nmad": nmad(v), "mean": float(v.mean()),
            "rmse": float(np.sqrt(np.mean(v * v)))}


def _dem_at(dem: xr.DataArray, pts: PointSet, positions: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """``dem`` at the points (``positions`` on its grid when already known)."""
    prow, pcol = positions if positions is not None else pixel_positions(dem, pts.x, pts.y)
    values, _, _ = dem_at_points(dask_data(dem), prow, pcol, resampling=FIT_INTERPOLATION)
    return values


def points_summary(points: PointSet) -> PointsSummary:
    """File, count, CRS they were read in and bounds (in that CRS) of a :class:`~xdem.points.PointSet`."""
    b = [float(np.nanmin(points.x)), float(np.nanmin(points.y)), float(np.nanmax(points.x)),
         float(np.nanmax(points.y))] if points.count else None
    return {"file": points.name, "count": points.count, "crs": points.source_crs, "bounds": b,
            "z_min": float(np.nanmin(points.z)) if points.count else None,
            "z_max": float(np.nanmax(points.z)) if points.count else None}


def points_side(request: CoregRequest) -> PointsSide | None:
    """Which input of ``request`` is a points file (``None``: two DEMs); the requests points
    cannot serve refused (:data:`NOT_FOR_POINTS`, both sides points, the output's kind).

    Raises
    ------
    xdem.errors.InputError
        A field of the request that points cannot serve.

    Examples
    --------
    >>> import xdem
    >>> lidar = xdem.examples.get_path("lidar")
    >>> points_side(CoregRequest(reference=lidar, to_be_aligned=lidar, output="a.tif", coreg=None)) is None
    True
    """
    r = request
    ref_is_points = is_points_source(r.reference)
    if not ref_is_points and not is_points_source(r.to_be_aligned):
        return None
    for name in NOT_FOR_POINTS:
        if getattr(r, name) is not None:
            raise InputError(f"{name} is {NOT_FOR_POINTS[name]}")
    if r.filters is not None and r.filters.active:
        r.filters.check()
    if ref_is_points and is_points_source(r.to_be_aligned):
        raise InputError("both inputs are points: one side of a coregistration must be a DEM")
    out_is_points = is_points_source(r.output)
    if out_is_points and Path(r.output).suffix.lower() not in POINT_OUTPUTS:
        raise InputError(f"points are written as one of {', '.join(POINT_OUTPUTS)}, not '{Path(r.output).suffix}'")
    if ref_is_points == out_is_points:
        want = "a DEM (.tif)" if ref_is_points else "a points file (e.g. .gpkg)"
        raise InputError(f"the output must be {want}: the {'DEM' if ref_is_points else 'points'} to align is what "
                         "gets written")
    return "reference" if ref_is_points else "to_be_aligned"


def open_points(request: CoregRequest, *, side: PointsSide, prog: ProgressLike, chunks: int | str) -> Sides:
    """The open stage with points: the DEM side checked and opened, the points read (scaled,
    checked against the DEM), once."""
    r = request
    ref_is_points = side == "reference"
    dem_check, scale_z = _checked_sides(r, ref_is_points)
    dem = open_dem(dem_check.path, chunks=chunks, band=dem_check.band, nodata=dem_check.nodata,
                   vertical_scale=dem_check.vertical_scale)
    prog.echo(f"xdem coreg: {r.coreg!r} ({'reference points' if ref_is_points else 'points to align'})")
    t0 = time.perf_counter()
    with prog.stage("reading the points"):
        pts = read_points(os.fspath(r.reference if ref_is_points else r.to_be_aligned), z_column=r.z_column,
                          source_crs=r.points_crs)
        pts = _scaled_and_checked(pts, scale_z, dem_check, ref_is_points)
    checks = InputChecks(ref=None if ref_is_points else dem_check, tba=dem_check if ref_is_points else None,
                         findings=dem_check.findings)
    return Sides(ref=pts if ref_is_points else dem, tba=dem if ref_is_points else pts, checks=checks,
                 points_side=side, points_scale=scale_z, read_s=time.perf_counter() - t0)


def fit_points(state: RunState) -> None:
    """The fit stage with points: the outlier filters choose the points the fit uses."""
    r, sides, prog = state.request, state.sides, state.prog
    dem, pts, ref_is_points = sides.dem, sides.points, sides.points_side == "reference"
    fit_pts = pts
    if r.filters is not None and r.filters.active:
        with prog.stage("outlier filters (slope of the DEM, NMAD of dh before, at the points)"):
            data = (prepare_points(pts, dem, inlier_mask=state.inlier_mask, exclude_mask=state.exclude_mask) if ref_is_points
                    else prepare_points(dem, pts, inlier_mask=state.inlier_mask, exclude_mask=state.exclude_mask))
            keep, state.filters_record = filter_points(data, filters=r.filters)
            fit_pts = pts.take(keep)  # data.points are pts moved to the DEM's CRS, in the same order
            del data, keep
    with prog.stage("fitting"):
        if ref_is_points:
            state.model.fit(fit_pts, dem, z_column=r.z_column, inlier_mask=state.inlier_mask, exclude_mask=state.exclude_mask)
        else:
            state.model.fit(dem, fit_pts, z_column=r.z_column, inlier_mask=state.inlier_mask, exclude_mask=state.exclude_mask)


def write_points(state: RunState) -> None:
    """The write stage with points: the aligned DEM (reference points) or the moved points,
    and ``dh`` at the points before and after."""
    r, model, out = state.request, state.model, state.paths.output
    dem, pts = state.sides.dem, state.sides.points
    local = pts.to_crs(dem.rio.crs)
    if state.sides.points_side == "reference":
        with state.prog.stage(f"writing {out}"):
            if is_zarr_path(out):
                write_zarr(model.apply(dem), out, overwrite=r.overwrite, resume=r.resume)
            else:
                write_cog(model.apply(dem), out, overwrite=r.overwrite, progress=False)
        positions = pixel_positions(dem, local.x, local.y)  # the written DEM is on the same grid
        before = _dem_at(dem, local, positions)
        before -= local.z
        after = _dem_at(state.output_dem(), local, positions)
        after -= local.z
    else:
        before_dem = _dem_at(dem, local)
        moved_gdf = model.apply_points(pts.to_geodataframe())
        moved = read_points(moved_gdf).to_crs(dem.rio.crs)
        with state.prog.stage(f"writing {out}"):
            if isinstance(out, Path):
                _write_points(moved_gdf, out, overwrite=r.overwrite)
            else:  # object storage: staged in TMPDIR, uploaded when the run's outputs are final
                staged = upload.stage_output(out, overwrite=r.overwrite, what="output")
                _write_points(moved_gdf, Path(staged.local), overwrite=True)
        before, after = local.z - before_dem, moved.z - _dem_at(dem, moved)
    state.local, state.before, state.after = local, before, after


def measure_points(state: RunState) -> None:
    """The statistics stage with points: ``dh`` at the points before and after."""
    assert state.before is not None and state.after is not None
    inl = nmad_inliers(state.after, k=4.0)  # the fit's rule, on the residuals after
    state.stats = {
        "method": "dh = tba - ref at the points (DEM interpolated at them, 4-point Lagrange)",
        "before": dh_at_points_stats(state.before),
        "after": dh_at_points_stats(state.after),
        "after_without_outliers": dh_at_points_stats(state.after[inl]),
    }


def points_document(state: RunState) -> CoregDocument:
    """The document stage with points: the JSON document (``points``, ``stats`` at the points)."""
    r, sides, model, dem = state.request, state.sides, state.model, state.sides.dem
    ref_is_points = sides.points_side == "reference"
    learned = S.steps_of(model)[0].learned()  # the first step's counts (each step's are in "steps")
    t = state.timing
    steps, rigid = S.steps_summary(model), S.rigid_document(model, dem)  # the rigid keys: a DEM pair's document's
    checks = input_checks_record(sides.checks.to_dict())
    checks["points_vertical_scale"] = sides.points_scale
    return {
        "steps": steps,
        "matrix": rigid["matrix"], "matrix_about": rigid["matrix_about"],
        "matrix_about_centre": rigid["matrix_about_centre"], "matrix_is_complete": rigid["matrix_is_complete"],
        "rotations_deg": rigid["rotations_deg"], "rotation_centre": rigid["rotation_centre"],
        "translation": rigid["translation"], "translation_px": rigid["translation_px"],
        "points": {**points_summary(sides.points), "side": sides.points_side, "z_column": r.z_column,
                   "n_outside": learned.get("n_outside_"), "n_outliers": learned.get("n_outliers_")},
        "stats": state.stats,
        "filters": state.filters_record,
        "input_checks": checks,
        "frame": {"crs": cast("str | None", learned.get("crs_"))},  # xdem.coreg._frames.crs_key
        "output": str(state.paths.output),
        "output_kind": "dem" if ref_is_points else "points",
        "inputs": {"reference": remote.shown(r.reference), "to_be_aligned": remote.shown(r.to_be_aligned),
                   "dem_shape": list(dem.shape), "crs": dem.rio.crs.to_string() if dem.rio.crs else None,
                   "method": r.method, "options": {k: v for k, v in r.options.items() if v is not None},
                   "inlier_mask": None if state.inlier_mask is None else remote.shown(state.inlier_mask),
                   "exclude_mask": None if state.exclude_mask is None else remote.shown(state.exclude_mask)},
        "timing": {"read_s": sides.read_s, "fit_s": t["fit_s"], "write_s": t["write_s"],
                   "total_s": time.perf_counter() - state.t_start},
        "peak_rss_mb": S.peak_rss_mb(),
        "scheduler": state.sinfo["address"] or state.sinfo["scheduler"],
        "workers": state.sinfo["workers"],
    }


def report_points(state: RunState) -> None:
    """The report stage with points: :func:`xdem.report.points.write_points_report`."""
    # lazy: matplotlib only when a report is asked; an optional module (see check_coreg_paths)
    from xdem.report.points import write_points_report

    doc, report = state.document, state.paths.report
    assert report is not None and state.local is not None and state.before is not None and state.after is not None
    t0 = time.perf_counter()
    doc["report"] = str(report)

    def _final_numbers() -> None:  # the page's last block shows the JSON's final timing (report included)
        doc["timing"]["report_s"] = time.perf_counter() - t0
        doc["timing"]["total_s"] = time.perf_counter() - state.t_start

    with state.prog.stage(f"writing the report {report}"):
        write_points_report(report, x=state.local.x, y=state.local.y, before=state.before, after=state.after,
                            summary=cast("dict[str, object]", doc), overwrite=state.request.overwrite,
                            on_final_block=_final_numbers)


def _checked_sides(r: CoregRequest, ref_is_points: bool) -> tuple[DemCheck, float]:
    """:func:`xdem.checks.check_dem` of the DEM side (its warnings issued) and the points' vertical
    scale; a band or nodata given for the points side is refused."""
    dem_side: Literal["reference", "to_be_aligned"] = "to_be_aligned" if ref_is_points else "reference"
    pts_side = "ref" if ref_is_points else "tba"
    for what in ("band", "nodata"):
        if getattr(r, f"{pts_side}_{what}") is not None:
            raise InputError(f"--{pts_side}-{what} ({pts_side}_{what}) applies to a DEM, and "
                             f"{'REF' if ref_is_points else 'TBA'} is a points file")
    mine = "tba" if ref_is_points else "ref"
    dem_check = check_dem(os.fspath(r.to_be_aligned if ref_is_points else r.reference), side=dem_side,
                          band=getattr(r, f"{mine}_band"), nodata=getattr(r, f"{mine}_nodata"),
                          vertical_scale=getattr(r, f"{mine}_vertical_scale"))
    InputChecks(ref=None, tba=None, findings=dem_check.findings).warn(stacklevel=4)  # run_coreg's line
    scale = getattr(r, f"{pts_side}_vertical_scale")
    return dem_check, 1.0 if scale is None else float(scale)


def _scaled_and_checked(pts: PointSet, scale: float, dem_check: DemCheck, ref_is_points: bool) -> PointSet:
    """The points with their elevations times ``scale``, refused when their spread against the
    DEM's at them says other vertical units (:func:`xdem.checks.points_scale_finding`)."""
    if scale != 1.0:
        pts = dataclasses.replace(pts, z=pts.z * scale)
    finding = points_scale_finding(dem_check, pts, points_side="reference" if ref_is_points else "to_be_aligned")
    if finding is not None and finding.severity == "error":
        raise InputError(finding.message)
    if finding is not None:
        warnings.warn(finding.message, InputCheckWarning, stacklevel=4)  # run_coreg's line
    return pts


def _write_points(gdf: gpd.GeoDataFrame, path: Path, *, overwrite: bool) -> None:
    """Write a GeoDataFrame next to ``path`` and move it into place (never half-written)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    os.unlink(tmp)
    try:
        if path.suffix.lower() in (".parquet", ".geoparquet"):
            gdf.to_parquet(tmp)
        elif path.suffix.lower() == ".gpkg":
            gdf.to_file(tmp, layer=path.stem)  # the layer is named after the file, not its temporary name
        else:
            gdf.to_file(tmp)
        move_into_place(tmp, path, overwrite=overwrite)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
