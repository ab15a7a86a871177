"""
Writing Cloud-Optimized GeoTIFFs
================================

:func:`xdem.write_cog` writes any lazy 2-D DataArray (a DEM, an aligned DEM, a terrain
attribute) to a `Cloud-Optimized GeoTIFF <https://cogeo.org>`_, out of core:

1. the dask blocks are stored one by one into a tiled temporary GTiff next to the output;
2. GDAL's COG driver copies it into a temporary COG (compression, predictor, overviews),
   with GDAL's block cache bounded;
3. the result is validated with ``rio_cogeo`` and only then renamed onto the output path.

So memory stays bounded by a few chunks plus GDAL's cache, and the output path holds
either the previous file or the complete new one, never a partial file.
"""

# %%
# Write a DEM and a terrain attribute
# -----------------------------------
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import rasterio
from rio_cogeo.cogeo import cog_info, cog_validate

import xdem
import xdem.errors
import xdem.examples
import xdem.terrain

workdir = tempfile.TemporaryDirectory(prefix="xdem-example-")
folder = Path(workdir.name)

dem = xdem.open_dem(xdem.examples.get_path("lidar"), chunks=128)
slope = xdem.terrain.slope(dem)  # lazy
# Internal tiles are 512 pixels by default; this DEM is only 400 pixels wide, so use 128.
dem_path = xdem.write_cog(dem, folder / "dem.tif", blocksize=128).path  # a CogResult: .path, .also
slope_path = xdem.write_cog(slope, folder / "slope.tif", blocksize=128).path
print(sorted(p.name for p in folder.iterdir()))  # no temporary file left behind

# %%
# Validate and inspect
# --------------------
# :func:`rio_cogeo.cogeo.cog_validate` checks the COG layout (tiles, overviews, header
# order); ``cog_info`` and rasterio show the profile: deflate compression with a float
# predictor, internal tiles of ``blocksize`` pixels, overviews, and NaN written as the
# nodata value -9999 by default.
for path in (dem_path, slope_path):
    valid, errors, warnings = cog_validate(path, quiet=True)
    info = cog_info(path)
    with rasterio.open(path) as src:
        print(f"{path.name}: valid COG={valid}, {src.width} x {src.height} {src.dtypes[0]}, "
              f"tiles {src.block_shapes[0]}, compression {info.Compression}, nodata {src.nodata}, "
              f"overviews {src.overviews(1)}")
    assert valid, errors

# %%
# The written values equal the lazy ones (NaN edges of the slope come back as nodata).
with rasterio.open(slope_path) as src:
    written = src.read(1, masked=True).filled(np.nan)
np.testing.assert_array_equal(written, slope.values)
print("round trip exact, NaN preserved through nodata")

# %%
# Options: compression, nodata
# ----------------------------
# ``compress`` is one of ``deflate`` (default), ``lzw``, ``zstd``, ``lzma``, ``packbits``
# or ``none``; ``nodata=None`` keeps NaN in float files.
sizes = {}
for compress in ("none", "deflate", "zstd", "lzma"):
    path = xdem.write_cog(dem, folder / f"dem_{compress}.tif", compress=compress, nodata=None, blocksize=128).path
    sizes[compress] = path.stat().st_size / 1024
print({k: f"{v:.0f} KiB" for k, v in sizes.items()})

fig, ax = plt.subplots(figsize=(6, 3), constrained_layout=True)
ax.barh(list(sizes), list(sizes.values()), color="0.4")
ax.set_xlabel("file size (KiB), 400 x 400 float32 DEM with overviews")
ax.set_title("COG size by compression")
plt.show()

# %%
# Safety
# ------
# An existing file is not replaced without ``overwrite=True``, and a file the DEM is
# still being read from is never replaced, even with ``overwrite=True``: errors are
# one-line :class:`xdem.errors.OutputError` messages saying how to fix them.
attempts = (
    {"dem": dem + 1, "path": dem_path},
    {"dem": xdem.open_dem(dem_path) + 1, "path": dem_path, "overwrite": True},
)
for kwargs in attempts:
    try:
        xdem.write_cog(**kwargs)
    except xdem.errors.OutputError as exc:
        print("OutputError:", exc)

xdem.write_cog(dem + 1, dem_path, overwrite=True, blocksize=128)  # allowed: dem does not read dem.tif
with rasterio.open(dem_path) as src:
    print("replaced: first value", float(src.read(1)[0, 0]), "=", float(dem[0, 0]) + 1)

workdir.cleanup()
