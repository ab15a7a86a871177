"""Write a copy of a DEM with NaN holes (nodata -9999) and a flat patch, for the gdaldem references.

Usage: python make_holes.py input.tif output.tif
"""

import sys

import numpy as np
import rasterio

with rasterio.open(sys.argv[1]) as src:
    z = src.read(1).astype(np.float32)
    profile = src.profile
z[50, 60] = -9999.0  # single missing pixel
z[120:124, 30:33] = -9999.0  # a 4 x 3 hole
z[0, 100] = -9999.0  # a hole on the edge
z[150:157, 140:148] = 390.0  # a flat patch: aspect undefined in its interior
profile.update(nodata=-9999.0, compress="deflate", predictor=3, zlevel=9)
with rasterio.open(sys.argv[2], "w", **profile) as dst:
    dst.write(z, 1)
