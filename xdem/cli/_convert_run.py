"""The run of ``xdem convert`` (:mod:`xdem.cli.convert` is the light command; this module
imports the I/O stack: rasterio, xarray, dask.array, once the command line has parsed)."""

from __future__ import annotations

import click

from xdem.cli._common import check_scheduler, use_scheduler
from xdem.errors import InputError
from xdem.io import remote
from xdem.io.atomic import check_output_path
from xdem.io.cog import write_cog
from xdem.io.open import open_dem
from xdem.io.upload import check_output_url
from xdem.io.zarr import check_store_path, write_zarr
from xdem.io.zarr_store import is_zarr_path

__all__ = ["run_convert"]


def run_convert(source: str, *, output: str, chunks: int | None, compress: str | None, nodata: float,
                overwrite: bool, resume: bool, scheduler: str, workers: int | None, progress: bool) -> None:
    """The run of ``xdem convert`` (its options, parsed): copy ``source`` to ``output``."""
    sched = check_scheduler(scheduler, workers)
    to_zarr = is_zarr_path(output)
    if resume and not to_zarr:
        raise InputError(f"--resume applies to Zarr outputs (*.zarr), not '{output}'; a COG is written in one go")
    if to_zarr:  # cheap checks first: nothing is read or computed for an output that cannot be written
        check_store_path(output, overwrite=overwrite, resume=resume, inputs=[("SOURCE", source)])
    elif remote.is_remote(output):  # staged in TMPDIR, uploaded in one conditional put at the end
        check_output_url(output, overwrite=overwrite, inputs=[("SOURCE", source)], overwrite_hint="--overwrite")
    else:
        check_output_path(output, overwrite=overwrite, inputs=[("SOURCE", source)], what="output",
                          overwrite_hint="--overwrite")
    with use_scheduler(sched, workers):
        dem = open_dem(source, chunks=chunks if chunks else "auto")
        if to_zarr:
            result = write_zarr(dem, output, overwrite=overwrite, resume=resume, compressor=compress or "zstd",
                                nodata=nodata, progress=progress, chunks=chunks)
            path: object = result.path
        else:
            path = write_cog(dem, output, overwrite=overwrite, compress=compress or "deflate", nodata=nodata,
                             progress=progress).path
    click.echo(str(path))
