"""``xdem info``: metadata and exact robust statistics of a DEM, computed out of core.

The command's module is light (click only): the run (:mod:`xdem.cli._info_run`: rasterio,
xarray, the I/O stack) is imported once the command line has parsed, so a usage error or
``--help`` starts fast. :func:`describe` stays importable from here (PEP 562).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

import click

from xdem.cli._cloud import anonymous_option

if TYPE_CHECKING:  # the name as the type checker sees it; at run time: __getattr__
    from xdem.cli._info_run import describe

__all__ = ["info", "describe"]


def _run_module() -> ModuleType:
    """:mod:`xdem.cli._info_run`, imported on first use (the one lazy import of this module:
    start-up time of usage errors and ``--help``, which need none of rasterio, xarray, dask.array)."""
    return importlib.import_module("xdem.cli._info_run")


def __getattr__(name: str) -> object:
    if name == "describe":
        return _run_module().describe
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@click.command("info")
@click.argument("dem", type=click.Path())
@anonymous_option
@click.option("--band", type=click.IntRange(min=1), default=None,
              help="Band to describe (1-based); required for multi-band files.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.option("--chunks", type=click.IntRange(min=1), default=None, help="Chunk side in pixels (default: auto).")
@click.option("--no-stats", is_flag=True, help="Only print metadata (no pass over the data).")
@click.option("--z-column", default=None, help="Points files: the column of their elevation (default: z).")
def info(dem: str, band: int | None, as_json: bool, chunks: int | None, no_stats: bool,
         z_column: str | None = None) -> None:
    """Print the metadata of DEM (a raster file or a Zarr store) and its exact median, NMAD, min, max and
    valid fraction.

    A points file (.gpkg, .parquet, .csv, .las...): its count, CRS, bounds and elevation range.
    """
    _run_module().run_info(dem, band=band, as_json=as_json, chunks=chunks, no_stats=no_stats, z_column=z_column)
