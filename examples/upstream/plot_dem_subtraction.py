"""
DEM differencing, as upstream's example
=======================================

Subtracting one :class:`xdem.DEM` from another gives the elevation change, lazily: the
arithmetic checks that both are on one grid and keeps nodata as NaN. Two DEMs on different
grids are first brought onto one with :meth:`xdem.DEM.reproject`. Here the later DEM is the
bundled lidar stand-in (``"lidar_ref_dem"``) and the earlier one its coregistered partner
(``"lidar_tba_dem_coreg"``), whose difference is a known thinning inside the outlines plus known
errors (:mod:`xdem.examples.standins`).
"""

import os
import tempfile

import geoutils as gu
import matplotlib.pyplot as plt
import numpy as np

import xdem
from xdem.examples.standins import thinning

dem_2009 = xdem.DEM(xdem.examples.get_path("lidar_ref_dem"))
dem_1990 = xdem.DEM(xdem.examples.get_path("lidar_tba_dem_coreg"))

# %%
# A sanity check of both DEMs: their grid, CRS and nodata.
dem_2009.info()
dem_1990.info()

# %%
# They are on the same grid already; otherwise, bring one onto the other's grid (bilinear by
# default, as upstream). On the same grid this changes nothing.
dem_1990 = dem_1990.reproject(dem_2009)

# %%
# The difference is a new, lazy DEM; ``info(stats=True)`` computes its statistics.
ddem = dem_2009 - dem_1990
ddem.info(stats=True)

# %%
# The stand-in's earlier DEM is the later one plus a known (negative) "thinning" inside the
# outlines, plus known errors (1-sigma 5 cm + 1 cm per degree of slope): the difference is minus
# the thinning, up to those errors.
xx = ddem.bounds.left + (np.arange(ddem.width) + 0.5) * ddem.res[0]
yy = ddem.bounds.top - (np.arange(ddem.height) + 0.5) * ddem.res[1]
xx, yy = np.meshgrid(xx, yy)
residual = ddem.data.filled(np.nan) + thinning(xx, yy)
print(f"median of (dDEM - truth): {np.nanmedian(residual):.3f} m")
assert abs(np.nanmedian(residual)) < 0.05

# %%
# Plot it with the glacier outlines, cropped to the DEM.
glacier_outlines = gu.Vector(xdem.examples.get_path("lidar_outlines"))
glacier_outlines = glacier_outlines.crop(ddem, clip=True)
ddem.plot(cmap="RdYlBu", vmin=-8, vmax=8, cbar_title="Elevation differences (m)")
glacier_outlines.plot(ref_crs=ddem, fc="none", ec="k")
plt.show()

# %%
# As a :class:`xdem.dDEM`, the difference knows its two epochs.
ddem_epochs = xdem.dDEM(ddem, start_time=np.datetime64("1990-08-01"), end_time=np.datetime64("2009-08-01"))
print(ddem_epochs.time)

# %%
# And save it to file (here into a temporary folder, removed afterwards).
with tempfile.TemporaryDirectory(prefix="xdem-example-") as folder:
    ddem.to_file(os.path.join(folder, "ddem.tif"))
    saved = xdem.DEM(os.path.join(folder, "ddem.tif"))
    assert np.allclose(saved.data.filled(np.nan), ddem.data.filled(np.nan), equal_nan=True)
