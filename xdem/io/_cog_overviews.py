"""The overviews of a COG built in :func:`xdem.write_cog`'s temporary GTiff, before GDAL's COG copy.

GDAL's COG driver, given a source without overviews, computes them into a ZSTD-compressed
temporary file and decompresses them again to copy them into the COG. :func:`overviews_into_temp`
builds them instead inside the uncompressed temporary GTiff that the copy reads anyway (same
levels, same resampling), and the driver copies them as they are (``OVERVIEWS=AUTO`` uses a
source's overviews): a quarter less CPU for the copy, the same COG.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import rasterio
import rasterio.enums

from xdem import interrupt
from xdem.io._gdal_copy import build_overviews_with_progress

__all__ = ["cog_overview_factors", "overviews_into_temp", "part", "OVERVIEW_RESAMPLING", "OVERVIEW_SHARE"]

#: GDAL's name of the COG driver's overview resampling for a band without a colour table (its default).
OVERVIEW_RESAMPLING = "CUBIC"
#: Share of a COG copy's progress given to building the overviews (GDAL's COG driver counts them
#: as a fifth of its work).
OVERVIEW_SHARE = 0.2


def cog_overview_factors(width: int, height: int, blocksize: int) -> list[int]:
    """The number of overview levels GDAL's COG driver makes (it halves the image until both
    sides fit in one block), as decimation factors 2, 4, 8...

    Examples
    --------
    >>> cog_overview_factors(8000, 8000, 512), cog_overview_factors(1025, 300, 512), cog_overview_factors(512, 512, 512)
    ([2, 4, 8, 16], [2], [])
    """
    factors: list[int] = []
    w, h = width, height
    while w > blocksize or h > blocksize:
        w, h = w // 2, h // 2
        factors.append(2 ** (len(factors) + 1))
    return factors


def overviews_into_temp(tmp: str, *, blocksize: int, progress: Callable[[float], None] | None) -> bool:
    """Build the COG's overviews inside the uncompressed temp GTiff before the copy; returns
    whether it did.

    Left to itself, GDAL's COG driver computes the overviews into a ZSTD-compressed temporary
    file, then decompresses them again to copy them: building them here, in the file already
    being read, with the same resampling (:data:`OVERVIEW_RESAMPLING`) costs a quarter less CPU for
    the whole copy (8000^2: 6.0 s against 8.2 s) and gives the same COG byte for byte when the
    sides divide by the factors. Otherwise the overviews here are ``ceil(side / factor)`` pixels
    (``gdaladdo``'s sizes) where the driver halves with rounding down (e.g. 313 against 312
    pixels at factor 64 of 20000): one more pixel at the edge of a coarse level. Not done for a
    compressed temp (a disk short of space: the driver's ZSTD file is smaller) or a colour table
    (the driver would pick another resampling).
    """
    with rasterio.open(tmp) as src:
        factors = cog_overview_factors(src.width, src.height, blocksize)
        raw = src.width * src.height * src.count * np.dtype(src.dtypes[0]).itemsize
        if not factors or src.compression is not None or src.overviews(1):
            return False
        try:
            src.colormap(1)
            return False
        except ValueError:  # no colour table
            pass
    if shutil.disk_usage(Path(tmp).parent).free < raw:  # a third of raw for them, then the COG itself
        return False
    if not build_overviews_with_progress(tmp, factors=factors, resampling=OVERVIEW_RESAMPLING, progress=progress):
        with interrupt.deferred(), rasterio.open(tmp, "r+") as dst:  # rasterio's error handler is Python too
            dst.build_overviews(factors, rasterio.enums.Resampling[OVERVIEW_RESAMPLING.lower()])
        interrupt.checkpoint()
    return True


def part(progress: Callable[[float], None] | None, start: float, end: float) -> Callable[[float], None] | None:
    """``progress`` of a part of a step: the fraction ``f`` of the part reported as ``start + f (end - start)``."""
    if progress is None:
        return None
    report = progress
    return lambda f: report(start + f * (end - start))
