"""``xdem convert``: copy a DEM between Cloud-Optimized GeoTIFF and Zarr, out of core.

The command's module is light (click only): the run (:mod:`xdem.cli._convert_run`: the I/O
stack) is imported once the command line has parsed, so a usage error or ``--help`` starts fast.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import click

from xdem.cli._cloud import anonymous_option
from xdem.cli._common import scheduler_option, workers_option

__all__ = ["convert"]


def _run_module() -> ModuleType:
    """:mod:`xdem.cli._convert_run`, imported on first use (the one lazy import of this module:
    start-up time of usage errors and ``--help``, which need none of rasterio, xarray, dask.array)."""
    return importlib.import_module("xdem.cli._convert_run")


@click.command("convert")
@click.argument("source", type=click.Path())
@click.argument("output", type=click.Path())
@anonymous_option
@click.option("--chunks", type=click.IntRange(min=16), default=None,
              help="Chunk side in pixels: of the reads, and of a Zarr output's store (default: auto).")
@click.option("--compress", default=None,
              help="COG: deflate (default), lzw, zstd, lzma, packbits, none. Zarr: zstd (default), blosc, gzip, none.")
@click.option("--nodata", type=float, default=-9999.0, show_default=True, help="Value written for nodata.")
@click.option("--overwrite", is_flag=True, help="Replace an existing OUTPUT (never SOURCE).")
@click.option("--resume", is_flag=True,
              help="Zarr output: finish the store an interrupted conversion of the same SOURCE left (only its missing "
                   "chunks are written).")
@scheduler_option
@workers_option
@click.option("--progress", is_flag=True, help="Show a progress bar while writing.")
def convert(source: str, output: str, chunks: int | None, compress: str | None, nodata: float, overwrite: bool,
            resume: bool, scheduler: str, workers: int | None, progress: bool) -> None:
    """Copy the DEM SOURCE (GeoTIFF, COG, VRT or Zarr store) to OUTPUT, out of core.

    OUTPUT is a Zarr store if it ends with .zarr, else a Cloud-Optimized GeoTIFF. Values are
    copied exactly (integer DEMs become float32, as xdem.open_dem reads them); nodata becomes
    --nodata. The path written is printed.

    \b
    Examples:
      xdem convert dem.tif dem.zarr
      xdem convert dem.tif dem.zarr --scheduler processes --workers 4 --resume
      xdem convert dem.zarr dem_cog.tif
    """
    _run_module().run_convert(source, output=output, chunks=chunks, compress=compress, nodata=nodata,
                              overwrite=overwrite, resume=resume, scheduler=scheduler, workers=workers,
                              progress=progress)
