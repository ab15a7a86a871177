"""
Terrain attributes
==================

:mod:`xdem.terrain` computes slope, aspect, hillshade, curvatures, the terrain ruggedness
index (TRI), the topographic position index (TPI) and roughness lazily, chunk by chunk
(``dask.array.map_overlap`` with a NaN boundary), NaN-aware, and in agreement with GDAL's
``gdaldem``. Each attribute is an :class:`xarray.DataArray` on the DEM's grid;
:func:`xdem.terrain.get_terrain_attribute` builds several that share one read of the DEM.
"""

# %%
# Several attributes in one pass
# ------------------------------
import time

import dask
import matplotlib.pyplot as plt
import numpy as np

import xdem
import xdem.examples
import xdem.terrain

dem = xdem.open_dem(xdem.examples.get_path("lidar"), chunks=200)
names = ["slope", "aspect", "hillshade", "curvature", "terrain_ruggedness_index",
         "topographic_position_index", "roughness"]
attrs = xdem.terrain.get_terrain_attribute(dem, names)  # lazy: nothing computed yet
print({name: (a.dtype.name, a.attrs.get("units", "")) for name, a in zip(names, attrs)})

t0 = time.perf_counter()
values = [a.values for a in dask.compute(*attrs)]  # one pass over the DEM for all seven
print(f"computed {len(values)} attributes in {time.perf_counter() - t0:.2f} s")

# %%
# Units and conventions: slope in degrees, aspect in degrees clockwise from north in
# ``[0, 360)`` (NaN on flat cells), hillshade in ``[1, 255]`` lit from the north-west (as ``gdaldem``).
# Edge pixels are NaN because their 3 x 3 window leaves the DEM.
slope, aspect = values[0], values[1]
print(f"slope: median {float(np.nanmedian(slope)):.2f} deg, max {float(np.nanmax(slope)):.1f} deg")
print(f"aspect range: {float(np.nanmin(aspect)):.1f} to {float(np.nanmax(aspect)):.1f} deg")
print("NaN pixels in slope (the one-pixel frame):", int(np.isnan(slope).sum()), "=", 4 * 400 - 4)

# %%
# Maps
# ----
titles = ["Slope (deg)", "Aspect (deg)", "Hillshade", "Curvature (1/100 m)", "TRI (m)", "TPI (m)",
          "Roughness (m)"]
cmaps = ["viridis", "twilight", "gray", "RdBu", "magma", "RdBu", "cividis"]
fig, axes = plt.subplots(2, 4, figsize=(14, 7), constrained_layout=True)
for ax, arr, title, cmap in zip(axes.flat, values, titles, cmaps):
    lo, hi = np.nanpercentile(arr, [2, 98])
    if cmap == "RdBu":
        lo, hi = -max(abs(lo), abs(hi)), max(abs(lo), abs(hi))
    im = ax.imshow(arr, cmap=cmap, vmin=lo, vmax=hi)
    ax.set_title(title)
    ax.set_xticks([])
    ax.set_yticks([])
    fig.colorbar(im, ax=ax, shrink=0.8)
axes.flat[-1].hist(slope[np.isfinite(slope)].ravel(), bins=60, color="0.4")
axes.flat[-1].set_title("Slope histogram")
axes.flat[-1].set_xlabel("slope (deg)")
plt.show()

# %%
# Methods and options
# -------------------
# ``method="horn"`` (default) or ``"zevenbergthorne"`` selects the finite differences of
# slope, aspect and hillshade, as ``gdaldem -alg``. Hillshade takes ``azimuth``,
# ``altitude`` and ``z_factor``; TPI and roughness a ``window_size``.
zt = xdem.terrain.slope(dem, method="zevenbergthorne").values
print(f"median |Horn - Zevenbergen & Thorne| slope: {float(np.nanmedian(np.abs(zt - slope))):.3f} deg")
low_sun = xdem.terrain.hillshade(dem, azimuth=200, altitude=20, z_factor=3).values
tpi7 = xdem.terrain.topographic_position_index(dem, window_size=7).values

fig, axes = plt.subplots(1, 2, figsize=(9, 4), constrained_layout=True)
axes[0].imshow(low_sun, cmap="gray")
axes[0].set_title("Hillshade, sun at 200 deg, 20 deg high, z x 3")
im = axes[1].imshow(tpi7, cmap="RdBu", vmin=-1, vmax=1)
axes[1].set_title("TPI over 7 x 7 windows (m)")
fig.colorbar(im, ax=axes[1], shrink=0.8)
for ax in axes:
    ax.set_xticks([])
    ax.set_yticks([])
plt.show()

# %%
# Chunk independence
# ------------------
# The overlap between chunks makes the result identical to a computation on the whole
# array at once, whatever the chunking.
whole = xdem.terrain.slope(xdem.open_dem(xdem.examples.get_path("lidar"), chunks=400)).values
np.testing.assert_array_equal(whole, slope)
print("same slope with 200- and 400-pixel chunks")
