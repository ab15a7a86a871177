"""``xdem dh``: volume and mass change per glacier outline, with uncertainties, out of core.

The command's module is light (click only): the run (:mod:`xdem.cli._dh_run`: dask.array,
xarray, geopandas, :mod:`xdem.volume`) is imported once the command line has parsed, so a usage
error or ``--help`` starts fast.
"""

from __future__ import annotations

import importlib
from datetime import datetime
from types import ModuleType

import click

__all__ = ["dh"]


#: ``xdem.ddem.METHODS`` (not imported here: the command line starts without dask; a test checks they agree).
FILL_METHODS = ("idw", "local_hypsometric", "regional_hypsometric", "norm_regional_hypsometric")


def _run_module() -> ModuleType:
    """:mod:`xdem.cli._dh_run`, imported on first use (the one lazy import of this module:
    start-up time of usage errors and ``--help``, which need none of dask.array, xarray, geopandas)."""
    return importlib.import_module("xdem.cli._dh_run")


@click.command("dh")
@click.argument("ref", type=click.Path(dir_okay=False))
@click.argument("aligned", type=click.Path(dir_okay=False))
@click.option("--outlines", required=True, type=click.Path(),
              help="Polygons (glacier outlines; GeoPackage, Shapefile, GeoJSON...) in any CRS: one output row each.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="The table: .gpkg (with the outlines' geometry) or .csv (without).")
@click.option("--later", type=click.Choice(["aligned", "ref"]), default="aligned", show_default=True,
              help="Which DEM is the later epoch: dh = later minus earlier (default ALIGNED - REF).")
@click.option("--start", type=click.DateTime(["%Y-%m-%d"]), default=None,
              help="Date of the earlier DEM (YYYY-MM-DD); with --end, adds rates per year.")
@click.option("--end", type=click.DateTime(["%Y-%m-%d"]), default=None, help="Date of the later DEM (YYYY-MM-DD).")
@click.option("--density", type=float, default=850.0, show_default=True,
              help="Volume-to-mass density (kg m-3; Huss 2013).")
@click.option("--density-error", type=float, default=60.0, show_default=True,
              help="Uncertainty of the density (kg m-3, 1 sigma).")
@click.option("--stable-mask", type=click.Path(), default=None,
              help="Stable terrain (vector or raster, True/inside = stable), intersected with the outside of the "
                   "outlines (default: everything outside the outlines).")
@click.option("--error", "error_map", type=click.Path(dir_okay=False), default=None,
              help="Per-pixel error of dh (raster, m) for heteroscedastic uncertainties (default: uniform).")
@click.option("--heteroscedastic", is_flag=True,
              help="Error of dh as a function of REF's slope, binned on stable terrain (instead of uniform).")
@click.option("--fill", type=click.Choice(FILL_METHODS), default=None,
              help="Gap-fill dh before the means (xdem.dDEM.interpolate, see the docs' gap filling page): the "
                   "hypsometric methods use REF's elevations and the outlines. Default: no filling (the valid "
                   "pixels' mean stands for the voids).")
@click.option("--void-factor", type=click.FloatRange(min=0), default=2.0, show_default=True,
              help="Void term: the voids' mean dh may differ from the measured one by this many spreads of dh.")
@click.option("--dh-out", type=click.Path(dir_okay=False), default=None, help="Also write dh as a COG.")
@click.option("--seed", type=int, default=None, help="Seed of the variogram sample (default: xdem's fixed seed).")
@click.option("--chunks", type=click.IntRange(min=16), default=None, help="Chunk side in pixels (default: auto).")
@click.option("--overwrite", is_flag=True, help="Replace existing outputs (never an input).")
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON (one object per outline) on stdout.")
@click.option("--progress", is_flag=True, help="Show the stages on stderr.")
def dh(ref: str, aligned: str, outlines: str, output: str, later: str, start: datetime | None, end: datetime | None,
       density: float, density_error: float, stable_mask: str | None, error_map: str | None, heteroscedastic: bool,
       fill: str | None, void_factor: float,
       dh_out: str | None, seed: int | None, chunks: int | None, overwrite: bool, as_json: bool,
       progress: bool) -> None:
    """Compute volume and mass change per outline from REF and ALIGNED, with their uncertainties.

    dh = later minus earlier DEM (--later), on REF's grid. Per outline: area, valid fraction,
    mean dh, volume change (m3), mass change (kg) and m w.e., each with its 1-sigma error (from
    the spread and spatial correlation of dh on stable terrain, a term for voids, and the density's
    uncertainty); rates per year with --start and --end; with --fill, the means of the gap-filled
    dh. The path written is printed.

    \b
    Examples:
      xdem dh ref_2009.tif aligned_1990.tif --later ref --outlines glaciers.gpkg -o changes.gpkg
      xdem dh ref.tif aligned.tif --outlines rgi.shp -o changes.csv --start 1990-08-01 --end 2009-08-01
      xdem dh ref.tif aligned.tif --outlines rgi.shp -o changes.gpkg --fill local_hypsometric
    """
    _run_module().run_dh(ref, aligned, outlines=outlines, output=output, later=later, start=start, end=end,
                         density=density, density_error=density_error, stable_mask=stable_mask, error_map=error_map,
                         heteroscedastic=heteroscedastic, fill=fill, void_factor=void_factor, dh_out=dh_out, seed=seed,
                         chunks=chunks, overwrite=overwrite, as_json=as_json, progress=progress)
