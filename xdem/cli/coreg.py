"""``xdem coreg``: coregister a DEM onto a reference and write the result as a COG, out of core.

``--method`` is a method spec of :mod:`xdem.coreg.spec` (``nuthkaab+vshift``,
``blockwise:nuthkaab``...); the method options map to :func:`xdem.coreg.from_spec`'s options,
and its errors become usage errors (exit code 2) naming the option.

The command's module is light (click only): the run's modules (:mod:`xdem.cli._coreg_run`:
xdem.coreg, xdem.workflows, dask.array, rasterio...) are imported once the command line has
parsed, so a usage error (``xdem coreg`` without arguments, an unknown option) starts fast. The
helpers of the run stay importable from here (:func:`resolve_methods`, :func:`build_coreg`,
:func:`dh_stats`, :func:`sampled_stats`...): they resolve on first use (PEP 562).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any

import click

from xdem.cli._cloud import anonymous_option
from xdem.cli._common import scheduler_option, workers_option

if TYPE_CHECKING:  # the names as the type checker sees them; at run time: __getattr__
    from xdem.cli._coreg_run import build_coreg, dh_stats, resolve_methods, sampled_stats

__all__ = ["coreg", "resolve_methods", "build_coreg", "dh_stats", "sampled_stats"]

#: Names of :mod:`xdem.cli._coreg_run` importable from this module, as before the split.
_RUN_NAMES = ("resolve_methods", "build_coreg", "dh_stats", "sampled_stats", "check_raster_output", "RASTER_OUTPUTS",
              "STATS_SUBSAMPLE", "_fmt_step", "_stats_while_writing")


def _run_module() -> ModuleType:
    """:mod:`xdem.cli._coreg_run`, imported on first use.

    The one deliberate lazy import of this module: start-up time of usage errors. The run's
    modules import dask.array, rasterio, xarray, pandas and numba (about 2 s and 200 MB);
    click reports a usage error before the command's callback runs, so they are not needed
    until then.
    """
    return importlib.import_module("xdem.cli._coreg_run")


def __getattr__(name: str) -> object:
    if name in _RUN_NAMES:
        return getattr(_run_module(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


@click.command("coreg")
@click.argument("ref", type=click.Path())
@click.argument("tba", type=click.Path())
@anonymous_option
@click.option("-o", "--output", required=True, type=click.Path(),
              help="Aligned DEM to write, on the grid of TBA unless --grid ref: a Cloud-Optimized GeoTIFF (.tif, .tiff), "
                   "or a Zarr store (.zarr: lock-free writes on clusters, resumable with --resume).")
@click.option("--dh-out", type=click.Path(dir_okay=False), default=None,
              help="Also write dh after (aligned minus REF, metres, on the output's grid) as a COG, in the same pass.")
@click.option("--stable-mask-out", type=click.Path(dir_okay=False), default=None,
              help="Also write the pixels the fit could use (Byte COG on REF's grid: 1 = stable, valid in both DEMs "
                   "and within the filters; 0 = not), in the same pass.")
@click.option("--max-slope", type=click.FloatRange(0, 90), default=None,
              help="Fit only on pixels whose slope of REF is at most this (degrees); every method. With points: on "
                   "the points whose DEM pixel has such a slope.")
@click.option("--min-slope", type=click.FloatRange(0, 90), default=None,
              help="Fit only on pixels whose slope of REF is at least this (degrees); every method. With points: on "
                   "the points whose DEM pixel has such a slope.")
@click.option("--nmad-filter", type=click.FloatRange(min=0, min_open=True), default=None, metavar="K",
              help="Fit only on pixels (or points) with abs(dh - median) <= K x NMAD (dh before, on stable pixels or "
                   "points); every method. The statistics and the report still use every stable pixel (every point).")
@click.option("--grid", "out_grid", type=click.Choice(["tba", "ref"]), default="tba", show_default=True,
              help="Grid and CRS of the output: TBA's own, or REF's. Either way the correction is applied in REF's "
                   "CRS (a geographic REF: the UTM zone of its centre), pixel by pixel, with one resampling.")
@click.option("--method", default="nuthkaab", show_default=True,
              help="vshift, nuthkaab, nuthkaab_deramp, deramp, icp, lzd, dhminimize, directionalbias, terrainbias, "
                   "biascorr, or any registered method; join with + for a pipeline, e.g. nuthkaab+vshift or "
                   "nuthkaab+lzd (consecutive translations and rotations are merged: one resampling). Recommended when "
                   "the DEM may be tilted as well as shifted (stereo DEMs): nuthkaab_deramp, which fits both jointly; "
                   "when it may be rotated: lzd or icp. Offsets varying along the DEM (satellite strips): "
                   "blockwise:nuthkaab (a fit per tile of --block-size pixels, applied as a smooth field), "
                   "blockwise:nuthkaab+vshift, or blockwise:(nuthkaab)+deramp to add steps after it.")
@click.option("--block-size", type=click.IntRange(min=8), default=None,
              help="Tile side in pixels of blockwise steps (default 1000; a multiple of --chunks reads each chunk once).")
@click.option("--block-iterations", type=click.IntRange(min=1), default=None,
              help="Rounds of (fit the tiles, fit the field) of blockwise steps, each on the DEM warped so far "
                   "(default 2).")
@click.option("--poly-order", type=click.IntRange(min=0), default=None, help="Polynomial order (e.g. deramp).")
@click.option("--angle", type=float, default=None, help="Track angle, degrees clockwise from east (directionalbias).")
@click.option("--terrain-attribute", default=None, help="Attribute binned by terrainbias, e.g. maximum_curvature.")
@click.option("--fit-or-bin", type=click.Choice(["fit", "bin", "bin_and_fit"]), default=None,
              help="How bias corrections model dh.")
@click.option("--z-column", default=None,
              help="When REF or TBA is a points file (.gpkg, .parquet, .csv, .las...): the column of their elevation "
                   "(default: the points' z, else a column 'z').")
@click.option("--points-crs", default=None, help="CRS of a points table without one (CSV), e.g. EPSG:4326.")
@click.option("--ref-band", type=click.IntRange(min=1), default=None,
              help="Band of REF holding the elevations (a multi-band file).")
@click.option("--tba-band", type=click.IntRange(min=1), default=None,
              help="Band of TBA holding the elevations (a multi-band file).")
@click.option("--ref-nodata", type=float, default=None,
              help="Value of REF to read as nodata instead of the file's (e.g. -9999 when the file does not declare it).")
@click.option("--tba-nodata", type=float, default=None,
              help="Value of TBA to read as nodata instead of the file's (e.g. -9999 when the file does not declare it).")
@click.option("--ref-vertical-scale", type=click.FloatRange(min=0, min_open=True), default=None, metavar="F",
              help="Multiply REF's elevations by F (e.g. 0.3048: feet to metres). Default: from its vertical CRS "
                   "(feet are converted), else 1.")
@click.option("--tba-vertical-scale", type=click.FloatRange(min=0, min_open=True), default=None, metavar="F",
              help="Multiply TBA's elevations by F (e.g. 0.3048: feet to metres). Default: from its vertical CRS "
                   "(feet are converted), else 1.")
@click.option("--ref-vcrs", default=None, metavar="VCRS",
              help="Vertical CRS of REF's heights, instead of the one its file declares: Ellipsoid, EGM96, EGM08, a "
                   "geoid grid file (.tif, .gtx) or an EPSG code (5773: EGM96 height, 3855: EGM2008 height).")
@click.option("--tba-vcrs", default=None, metavar="VCRS", help="Vertical CRS of TBA's heights (as --ref-vcrs).")
@click.option("--force-vcrs", default=None, metavar="VCRS",
              help="Vertical CRS of both REF's and TBA's heights (upstream's force_source_vcrs): --ref-vcrs VCRS "
                   "--tba-vcrs VCRS in one option.")
@click.option("--to-vcrs", default=None, metavar="VCRS",
              help="Convert REF and TBA to this vertical CRS before the fit (geoid grids found on disk, see the docs' "
                   "vertical datums page); the output is in it and its COG declares it. Without it, DEMs in different "
                   "vertical CRSs give a warning.")
@click.option("--geoid-interpolation", type=click.Choice(["bilinear", "spline"]), default="bilinear",
              show_default=True,
              help="How --to-vcrs interpolates the geoid grid: bilinear (PROJ's, as GDAL) or spline (NGA's 6 x 6 "
                   "bicubic spline, within 3 mm of NGA's EGM96 test values; bilinear is within 6 cm).")
@click.option("--inlier-mask", type=click.Path(dir_okay=False), default=None,
              help="Stable terrain to USE: raster (non-zero = stable) or vector (inside polygons = stable).")
@click.option("--exclude-mask", type=click.Path(dir_okay=False), default=None,
              help="Unstable terrain to EXCLUDE, e.g. glacier outlines (raster non-zero or vector polygons).")
@click.option("--subsample", type=float, default=None, callback=_subsample,
              help="Pixels used by every step: fraction (<= 1) or count (> 1). Default: each method's own.")
@click.option("--random-state", type=int, default=None, help="Seed of the subsample, for every step.")
@click.option("--initial-shift", type=(float, float), default=None, metavar="DX DY",
              help="Start the shift estimate (nuthkaab, nuthkaab_deramp, icp, lzd, dhminimize; in a pipeline, the "
                   "first step that takes it) from this shift to apply to TBA, in CRS units: needed when the DEMs "
                   "are offset by more than about a quarter of their size (dhminimize: more than a few pixels).")
@click.option("--resampling", type=click.Choice(["bilinear", "cubic"]), default=None,
              help="Interpolation of TBA, in the fit and to write the output, for every step that resamples. Default: "
                   "each method's own: cubic for icp, lzd and dhminimize; bilinear for nuthkaab and nuthkaab_deramp "
                   "(backward compatibility). Cubic leaves a far lower floor under the residual on rough terrain "
                   "(see the docs' rigid page).")
@click.option("--fit-interpolation", type=click.Choice(["lagrange", "lagrange6", "lagrange8"]), default=None,
              help="How lzd's fit evaluates TBA between pixels: 4 (default), 6 or 8 points per axis. lagrange8 on "
                   "steep terrain with waves down to 2-3 pixels (a shift within 0.002 m where 4 points leave 0.007 m; "
                   "larger windows: see the docs' rigid page).")
@click.option("--allow-divergence", is_flag=True,
              help="Accept a partial result when the shift estimate diverges (warning, horizontal shift reset) "
                   "instead of failing with exit code 1.")
@click.option("--chunks", type=click.IntRange(min=16), default=None, help="Chunk side in pixels (default: auto).")
@click.option("--overwrite", is_flag=True, help="Replace existing output, --json-out and --report files.")
@click.option("--resume", is_flag=True,
              help="Zarr output: finish the store an interrupted run of the same command left (only its missing chunks "
                   "are written; the fit runs again). A store from different inputs or options is refused.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout (and nothing else).")
@click.option("--json-out", type=click.Path(dir_okay=False), default=None, help="Write the JSON document to a file.")
@click.option("--report", type=click.Path(dir_okay=False), default=None, help="Write an HTML report (needs xdem.report).")
@scheduler_option
@workers_option
@click.option("--no-stats", is_flag=True,
              help="Skip the before/after statistics (they cost little: computed while writing) and the verdict.")
@click.option("--exact-stats", is_flag=True,
              help="Statistics of dh are SAMPLED by default: median, NMAD, mean, std, RMSE and LE90 on a "
                   "reproducible 2-million-pixel subsample (counts, min and max exact; computed in the writing pass "
                   "when REF and TBA share a grid, else one pass). --exact-stats makes them exact on all pixels "
                   "(about 12 passes); with --report, also exact slope tables in it (more passes).")
@click.option("-q", "--quiet", is_flag=True, help="No progress or summary on stderr (warnings and errors still shown).")
@click.option("-v", "--verbose", is_flag=True,
              help="Also one line per iteration of the iterative methods (nuthkaab, nuthkaab_deramp, lzd) on stderr.")
def coreg(**params: object) -> None:
    """Coregister TBA (to be aligned) onto REF and write the aligned DEM to OUTPUT.

    \b
    Examples:
      xdem coreg ref.tif tba.tif -o aligned.tif
      xdem coreg ref.tif tba.tif -o aligned.tif --method nuthkaab+deramp --poly-order 1 \\
          --exclude-mask glaciers.gpkg --json-out coreg.json
      xdem coreg ref.tif tba.tif -o aligned.tif --scheduler processes --workers 4
      xdem coreg ref.tif tba.tif -o aligned.zarr --scheduler tcp://10.0.0.1:8786 --resume
      xdem coreg ref_points.gpkg tba.tif -o aligned.tif --z-column h

    Both DEMs are read lazily; the fit, the output (a COG or a Zarr store, nodata -9999) and the
    statistics of dh = tba - ref before and after are computed out of core. The statistics are
    sampled by default: computed on a reproducible 2-million-pixel subsample (counts, min and max
    exact), exact on all pixels with --exact-stats. Exit codes:
    0 success, 1 error (nothing new left behind, but an unfinished Zarr store, kept for --resume), 2 usage
    error, 130 SIGINT (Ctrl-C), 143 SIGTERM (the same clean-up, one line saying what was removed).
    """
    _run_module().run(params)
