"""``xdem terrain``: terrain attributes of a DEM written as Cloud-Optimized GeoTIFFs, out of core.

The command's module is light (click only): the run (:mod:`xdem.cli._terrain_run`: dask.array,
xarray, :mod:`xdem.terrain`, the I/O stack) is imported once the command line has parsed, so a
usage error or ``--help`` starts fast.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import click

from xdem.cli._cloud import anonymous_option

__all__ = ["terrain"]


def _run_module() -> ModuleType:
    """:mod:`xdem.cli._terrain_run`, imported on first use (the one lazy import of this module:
    start-up time of usage errors and ``--help``, which need none of dask.array, xarray, numba)."""
    return importlib.import_module("xdem.cli._terrain_run")


@click.command("terrain")
@click.argument("dem", type=click.Path(dir_okay=False))
@anonymous_option
@click.option("-o", "--output", required=True, type=click.Path(),
              help="Output .tif for one attribute, or a folder (created if missing) receiving <attribute>.tif files.")
@click.option("-a", "--attribute", "attributes", multiple=True,
              help="Default (into a folder): slope, aspect and hillshade. Attribute(s): slope, aspect, hillshade, "
                   "curvature, profile_curvature, planform_curvature, "
                   "maximum_curvature, terrain_ruggedness_index (tri), topographic_position_index (tpi), roughness. "
                   "Repeat the option or separate with commas.")
@click.option("--method", type=click.Choice(["horn", "zevenbergthorne", "zevenbergen_thorne"]), default="horn",
              show_default=True, help="Surface fit for slope, aspect and hillshade.")
@click.option("--slope-units", type=click.Choice(["degrees", "percent", "radians"]), default="degrees",
              show_default=True)
@click.option("--azimuth", type=float, default=315.0, show_default=True,
              help="Hillshade: direction the light comes from, degrees clockwise from north.")
@click.option("--altitude", type=float, default=45.0, show_default=True, help="Hillshade: light elevation, degrees.")
@click.option("--z-factor", type=float, default=1.0, show_default=True, help="Hillshade: vertical exaggeration.")
@click.option("--tri-algorithm", type=click.Choice(["riley", "wilson"]), default="riley", show_default=True)
@click.option("--window-size", type=int, default=3, show_default=True, help="TPI and roughness window side (odd).")
@click.option("--chunks", type=click.IntRange(min=16), default=None, help="Chunk side in pixels (default: auto).")
@click.option("--overwrite", is_flag=True, help="Replace existing output files.")
@click.option("--progress", is_flag=True, help="Show a progress bar while writing.")
def terrain(
    dem: str, output: str, attributes: tuple[str, ...], method: str, slope_units: str, azimuth: float,
    altitude: float, z_factor: float, tri_algorithm: str, window_size: int, chunks: int | None,
    overwrite: bool, progress: bool,
) -> None:
    """Compute terrain attributes of DEM and write each as a COG, out of core.

    \b
    Examples:
      xdem terrain dem.tif -o slope.tif -a slope
      xdem terrain dem.tif -o attrs/ -a slope,aspect,hillshade --method zevenbergthorne

      xdem terrain dem.tif -o attrs/            # slope.tif, aspect.tif, hillshade.tif

    Edges and cells next to nodata are nodata (-9999 in the files; 0 in the hillshade, written
    as Byte with shades 1 to 255). Every file carries its unit (GDAL's band unit: degrees,
    m...). All attributes are computed in ONE pass over DEM (one read, one halo pass per
    block), then each file is compressed into a COG. Paths written are printed, one per line.
    """
    _run_module().run_terrain(
        dem, output=output, attributes=attributes, method=method, slope_units=slope_units, azimuth=azimuth,
        altitude=altitude, z_factor=z_factor, tri_algorithm=tri_algorithm, window_size=window_size, chunks=chunks,
        overwrite=overwrite, progress=progress)
