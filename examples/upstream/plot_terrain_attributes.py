"""
Terrain attributes, as upstream's example
=========================================

Upstream's terrain example on the bundled DEM: six attributes from one call of
:func:`xdem.terrain.get_terrain_attribute` on a numpy array with its resolution, with
upstream's methods and conventions: the Florinsky (2009) fit by default for slope, aspect and
hillshade, the curvatures of Minár et al. (2020) in 100/m, the terrain ruggedness index of
Riley et al. (1999) and the rugosity of Jenness (2004).
"""

import matplotlib.pyplot as plt
import numpy as np

import xdem

dem = xdem.DEM(xdem.examples.get_path("lidar_ref_dem"))

# %%
# All six in one call, on the DEM's values as a masked array.
attributes = xdem.terrain.get_terrain_attribute(
    dem.data,
    resolution=dem.res,
    attribute=["hillshade", "slope", "aspect", "profile_curvature", "terrain_ruggedness_index", "rugosity"],
)

plt.figure(figsize=(8, 6.5))
plt_extent = [dem.bounds.left, dem.bounds.right, dem.bounds.bottom, dem.bounds.top]
cmaps = ["Greys_r", "Reds", "twilight", "RdGy_r", "Purples", "YlOrRd"]
labels = ["Hillshade", "Slope (°)", "Aspect (°)", "Profile Curvature (100 / m)", "Terrain Ruggedness Index", "Rugosity"]
vlims = [(None, None) for i in range(6)]
vlims[3] = [-2, 2]
for i in range(6):
    plt.subplot(3, 2, i + 1)
    plt.imshow(attributes[i].squeeze(), cmap=cmaps[i], extent=plt_extent, vmin=vlims[i][0], vmax=vlims[i][1])
    cbar = plt.colorbar()
    cbar.set_label(labels[i])
    plt.xticks([])
    plt.yticks([])
plt.tight_layout()
plt.show()

# %%
# What the values say: the DEM's median slope is about 11 degrees; a rugosity (surface area
# over planimetric area) is at least 1; aspects are angles from north.
hillshade, slope, aspect, profc, tri, rugosity = (np.ma.masked_invalid(a) for a in attributes)
print(f"median slope {np.ma.median(slope):.1f}°, rugosity from {rugosity.min():.3f} to {rugosity.max():.3f}")
assert 9 < np.ma.median(slope) < 13
assert rugosity.min() >= 1.0
assert 0 <= aspect.min() and aspect.max() <= 360
