"""GDAL's block cache of xdem's processes: its size, in one place.

GDAL reads the ``GDAL_CACHEMAX`` configuration option as megabytes when the value is below
100000 and as bytes otherwise, so the environment variable ``GDAL_CACHEMAX=64`` gives 64 MiB.
``rasterio.Env(GDAL_CACHEMAX=n)`` does not: it hands the integer ``n`` straight to
``GDALSetCacheMax64``, which takes bytes (``rasterio.Env(GDAL_CACHEMAX=256)`` is a 256-*byte*
cache, and rasterio refuses a string such as ``"256MB"``). Hence two names for one size:
:data:`GDAL_CACHE_MB` for the environment variable, :data:`GDAL_CACHE_BYTES` for
``rasterio.Env``. Every place of xdem that sets the cache uses one of them.

This module imports nothing: the command line sets the environment variable before anything
reads a file, without importing rasterio.

Examples
--------
>>> GDAL_CACHE_BYTES == GDAL_CACHE_MB * 1024 * 1024
True
"""

from __future__ import annotations

__all__ = ["GDAL_CACHE_MB", "GDAL_CACHE_BYTES"]

#: GDAL block cache of xdem's processes and of its COG writing, in MiB: the value of the
#: ``GDAL_CACHEMAX`` environment variable that the ``xdem`` command sets unless it is set. Chunks
#: are whole multiples of the files' tiles, so each tile is decoded once and the cache only holds
#: the COG copy's working set; it is bounded, whatever the DEM size (see docs/performance.md,
#: "Session 17 (issue 28)", for the sizes measured).
GDAL_CACHE_MB = 64
#: :data:`GDAL_CACHE_MB` in bytes: the value for ``rasterio.Env(GDAL_CACHEMAX=...)``.
GDAL_CACHE_BYTES = GDAL_CACHE_MB << 20
