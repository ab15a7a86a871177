"""``xdem convert``: copy a DEM between Cloud-Optimized GeoTIFF and Zarr, out of core."""

from __future__ import annotations

import click

from xdem.cli._common import scheduler_option, workers_option

__all__ = ["convert"]


@click.command("convert")
@click.argument("source", type=click.Path())
@click.argument("output", type=click.Path())
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
    from xdem.cli._common import check_scheduler, use_scheduler
    from xdem.errors import InputError
    from xdem.io.atomic import check_output_path
    from xdem.io.open import open_dem
    from xdem.io.zarr_store import is_zarr_path

    sched = check_scheduler(scheduler, workers)
    to_zarr = is_zarr_path(output)
    if resume and not to_zarr:
        raise InputError(f"--resume applies to Zarr outputs (*.zarr), not '{output}'; a COG is written in one go")
    if to_zarr:  # cheap checks first: nothing is read or computed for an output that cannot be written
        from xdem.io.zarr import check_store_path

        check_store_path(output, overwrite=overwrite, resume=resume, inputs=[("SOURCE", source)])
    else:
        check_output_path(output, overwrite=overwrite, inputs=[("SOURCE", source)], what="output",
                          overwrite_hint="--overwrite")
    with use_scheduler(sched, workers):
        dem = open_dem(source, chunks=chunks if chunks else "auto")
        if to_zarr:
            from xdem.io.zarr import write_zarr

            result = write_zarr(dem, output, overwrite=overwrite, resume=resume, compressor=compress or "zstd",
                                nodata=nodata, progress=progress, chunks=chunks)
            path = result.path
        else:
            from xdem.io.cog import write_cog

            path = write_cog(dem, output, overwrite=overwrite, compress=compress or "deflate", nodata=nodata,
                             progress=progress).path
    click.echo(str(path))
