"""``xdem report``: a self-contained HTML report of a DEM pair before and after coregistration."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from xdem import interrupt
from xdem.errors import InputError

__all__ = ["report"]


def _load_summary(path: str | None) -> dict | None:
    if path is None:
        return None
    p = Path(path)
    if not p.is_file():
        raise InputError(f"JSON summary not found: '{p}'; give the file written by xdem coreg --json-out")
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"'{p}' is not a JSON document ({exc}); give the file written by xdem coreg --json-out") from exc
    if not isinstance(doc, dict):
        raise InputError(f"'{p}' holds a JSON {type(doc).__name__}, not an object; give the file of xdem coreg --json-out")
    return doc


@click.command("report")
@click.argument("ref", type=click.Path(dir_okay=False))
@click.argument("tba", type=click.Path(dir_okay=False))
@click.argument("aligned", type=click.Path(dir_okay=False), required=False)
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Output HTML file.")
@click.option("--overwrite", is_flag=True, help="Replace an existing output file.")
@click.option("--json-summary", type=click.Path(dir_okay=False), default=None,
              help="JSON written by `xdem coreg --json-out`: its statistics, steps and timing are shown as they are.")
@click.option("--max-pixels", type=click.IntRange(min=100), default=1_000_000, show_default=True,
              help="Largest number of pixels of each (decimated) map.")
@click.option("--subsample", type=click.IntRange(min=1), default=200_000, show_default=True,
              help="Valid pixels drawn for the histograms and the Nuth & Kääb diagnostic.")
@click.option("--random-state", type=click.IntRange(min=0), default=None, help="Seed of the subsample.")
@click.option("--inlier-mask", type=click.Path(dir_okay=False), default=None,
              help="Stable terrain to USE: raster (non-zero = stable) or vector (inside polygons = stable).")
@click.option("--exclude-mask", type=click.Path(dir_okay=False), default=None,
              help="Unstable terrain to EXCLUDE, e.g. glacier outlines (raster non-zero or vector polygons).")
@click.option("--exact-stats", is_flag=True,
              help="Exact statistics of dh and slope tables (about twenty passes) instead of one pass with sampled "
                   "medians and NMADs.")
def report(
    ref: str, tba: str, aligned: str | None, output: str, overwrite: bool, json_summary: str | None,
    max_pixels: int, subsample: int, random_state: int | None, inlier_mask: str | None, exclude_mask: str | None,
    exact_stats: bool,
) -> None:
    """Write a self-contained HTML report comparing REF with TBA (and ALIGNED, if given).

    \b
    Examples:
      xdem report ref.tif tba.tif aligned.tif -o report.html --json-summary coreg.json
      xdem report ref.tif tba.tif -o before.html

    The page embeds its images (no external file, readable offline): maps and histograms of
    dh = TBA - REF and ALIGNED - REF, the Nuth & Kääb diagnostic, the fitted parameters,
    statistics by slope class and a processing summary. Computed out of core.

    With --inlier-mask/--exclude-mask (give those of `xdem coreg`) every statistic,
    histogram, diagnostic and colour scale uses the stable pixels only; the maps outline the
    mask, and a block gives the mean dh and volume change inside it.

    One pass over the data reads each block once (maps from the files' overviews when they
    have them); --exact-stats adds the passes of exact quantiles.
    """
    # lazy on purpose (the one of this module): a usage error or --help starts without the report's
    # stack (dask.array, xarray, rasterio, matplotlib), which only the run needs
    from xdem.report import write_report

    summary = _load_summary(json_summary)
    shown = output if "://" in output else os.path.abspath(output)  # an s3:// report is staged, uploaded at the end
    with interrupt.stage(f"the report {shown}", key="report"):
        out = write_report(
            output, ref=ref, tba=tba, aligned=aligned, summary=summary, overwrite=overwrite,
            max_pixels=max_pixels, subsample=subsample, random_state=random_state,
            inlier_mask=inlier_mask, exclude_mask=exclude_mask, exact_stats=exact_stats,
        )
    click.echo(str(out))
