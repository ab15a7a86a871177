"""
Vertical datums: ellipsoid and geoid heights
============================================

A DEM's heights are measured from an ellipsoid (GNSS, lidar processed in ellipsoid heights,
most satellite stereo DEMs) or from a geoid (EGM96, EGM2008: SRTM, Copernicus DEM...). The
two differ by the geoid undulation N, tens of metres, smooth over a DEM: ``h = H + N``. Two
DEMs must share one vertical datum before they are compared or coregistered.

:meth:`xdem.DEM.to_vcrs` converts lazily, chunk by chunk, with PROJ and the geoid grid found on
disk (EGM96: Debian's ``proj-data``; nothing is downloaded). See the vertical datums page.
"""

# %%
# Declare, then convert
# ---------------------
# The bundled lidar DEM (EPSG:26915, Minnesota) declares no vertical CRS; we declare its heights
# as ellipsoid heights (``set_vcrs`` or ``vcrs=`` does not change any value) and convert them
# to EGM96 heights.
import matplotlib.pyplot as plt
import numpy as np

import xdem
import xdem.examples

dem = xdem.DEM(xdem.examples.get_path("lidar"), vcrs="Ellipsoid")
print(dem.vcrs_name)
dem_egm96 = dem.to_vcrs("EGM96")  # lazy: nothing computed yet
print(dem_egm96.vcrs_name, "| grid:", dem_egm96.vcrs_grid, "| compound CRS:", dem_egm96.ccrs.name)

# %%
# The difference is the undulation
# --------------------------------
# ``H - h = -N``: the geoid is about 28 m below the ellipsoid there, and varies by a few
# millimetres over these 400 m.
diff = (dem_egm96 - dem).to_xarray().values
print(f"EGM96 minus ellipsoid heights: {np.nanmin(diff):.3f} to {np.nanmax(diff):.3f} m")

fig, axes = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
im = axes[0].imshow(dem.to_xarray().values, cmap="terrain")
axes[0].set_title("Ellipsoid heights (m)")
fig.colorbar(im, ax=axes[0], shrink=0.8)
im = axes[1].imshow(diff, cmap="viridis")
axes[1].set_title("EGM96 minus ellipsoid heights: -N (m)")
fig.colorbar(im, ax=axes[1], shrink=0.8)
for ax in axes:
    ax.set_xticks([])
    ax.set_yticks([])
plt.show()

# %%
# The grids xdem found
# --------------------
# EGM2008 (``us_nga_egm08_25.tif``, 80 MB) is used when it is in one of these folders;
# otherwise ``to_vcrs("EGM08")`` says in one line where to get it.
print(xdem.vcrs.available_grids())
print(xdem.vcrs.grid_dirs())
