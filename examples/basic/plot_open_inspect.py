"""
Open and inspect a DEM
======================

:func:`xdem.open_dem` opens a DEM *lazily*: only the metadata is read, the elevations stay
on disk as a `dask <https://www.dask.org>`_ array cut into chunks, and nodata becomes NaN.
Everything done with the DEM afterwards (statistics, terrain attributes, coregistration)
works chunk by chunk, so the same code runs on a DEM of any size.

This example opens the bundled 1 m lidar DEM, looks at its georeferencing, computes exact
robust statistics out of core and plots a hillshade.
"""

# %%
# Open the DEM
# ------------
# :func:`xdem.examples.get_path` gives the path of the bundled file. The result of
# :func:`xdem.open_dem` is an :class:`xarray.DataArray` with dims ``("y", "x")`` whose
# ``.data`` is a dask array: nothing has been read yet.
import matplotlib.pyplot as plt
import numpy as np

import xdem
import xdem.examples
import xdem.spatialstats
import xdem.stats
import xdem.terrain

path = xdem.examples.get_path("lidar")
dem = xdem.open_dem(path)
print(dem)

# %%
# Georeferencing and chunks
# -------------------------
# The CRS, transform and nodata are on the ``.rio`` accessor of
# `rioxarray <https://corteva.github.io/rioxarray>`_. ``chunks="auto"`` picks chunks of
# about 2048 pixels a side (a multiple of the file's tiles); this DEM is small, so it is one
# chunk. Smaller chunks can be asked for, e.g. to see the laziness at work.
print("CRS:        ", dem.rio.crs)
print("shape:      ", dem.shape, dem.dtype)
print("resolution: ", dem.rio.resolution())
print("bounds:     ", dem.rio.bounds())
print("nodata:     ", dem.rio.nodata)
print("chunks:     ", dem.data.chunks)

small = xdem.open_dem(path, chunks=128)
print("chunks of 128 pixels:", small.data.numblocks, "blocks")

# %%
# Exact robust statistics, out of core
# ------------------------------------
# :func:`xdem.stats.robust_summary` gives the valid count, min, max, and the *exact* median
# and NMAD (``1.4826 * median(|z - median(z)|)``), found by histogram refinement over the
# chunks without ever sorting or loading the whole DEM. The result does not depend on the
# chunking: the two DEMs above give identical numbers.
summary = xdem.stats.robust_summary(dem)
for key, value in summary.items():
    print(f"{key:>15}: {value:.6g}")

assert xdem.stats.robust_summary(small) == summary

# %%
# :func:`xdem.spatialstats.robust_summary` adds the mean, standard deviation, RMSE and
# percentiles (also exact).
full = xdem.spatialstats.robust_summary(dem, percentiles=(5, 50, 95))
print({k: round(v, 3) for k, v in full.items()})

# %%
# Hillshade
# ---------
# Terrain attributes are lazy too (:mod:`xdem.terrain`); ``.compute()`` evaluates one.
# Edge pixels are NaN: their 3 x 3 window leaves the DEM.
hs = xdem.terrain.hillshade(dem, azimuth=315, altitude=45).compute()
z = dem.compute()
left, bottom, right, top = dem.rio.bounds()
extent = (left, right, bottom, top)

fig, axes = plt.subplots(1, 2, figsize=(10, 4.5), constrained_layout=True)
axes[0].imshow(hs, cmap="gray", extent=extent)
im = axes[0].imshow(z, cmap="terrain", alpha=0.45, extent=extent)
fig.colorbar(im, ax=axes[0], label="elevation (m)")
axes[0].set_title("Elevation over the hillshade")
axes[0].set_xlabel("easting (m)")
axes[0].set_ylabel("northing (m)")
axes[1].hist(z.values[np.isfinite(z.values)], bins=60, color="0.4")
axes[1].axvline(summary["median"], color="C3", label=f"median {summary['median']:.2f} m")
axes[1].set_xlabel("elevation (m)")
axes[1].set_ylabel("pixels")
axes[1].set_title("Elevation histogram")
axes[1].legend()
plt.show()
