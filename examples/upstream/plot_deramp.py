"""
Bias-correction with deramping, as upstream's example
=====================================================

:class:`xdem.coreg.Deramp` fits a 2-D polynomial of the elevation differences on stable
terrain and removes it: rotational or doming errors. Here the DEM to correct is the
reference plus a known second-order dome, and lowered inside the glacier outlines (which the
fit must ignore).
"""

import geoutils as gu
import matplotlib.pyplot as plt
import numpy as np

import xdem
from xdem.examples.standins import thinning

reference_dem = xdem.DEM(xdem.examples.get_path("lidar_ref_dem"))
glacier_outlines = gu.Vector(xdem.examples.get_path("lidar_outlines"))
inlier_mask = ~glacier_outlines.create_mask(reference_dem)

# %%
# A known dome (-1 m at the centre to +3 m at the corners) and the glaciers' thinning.
xx = reference_dem.bounds.left + (np.arange(reference_dem.width) + 0.5) * reference_dem.res[0]
yy = reference_dem.bounds.top - (np.arange(reference_dem.height) + 0.5) * reference_dem.res[1]
xx, yy = np.meshgrid(xx, yy)
cx, cy = np.mean(xx), np.mean(yy)
dome = 4.0 * ((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * 200.0**2) - 1.0
dem_to_be_aligned = reference_dem + dome + thinning(xx, yy)

diff_before = reference_dem - dem_to_be_aligned
diff_before.plot(cmap="RdYlBu", vmin=-10, vmax=10, cbar_title="Elevation differences (m)")
plt.show()

# %%
# Fit a second-order polynomial on stable terrain and apply it.
deramp = xdem.coreg.Deramp(poly_order=2)
corrected_dem = deramp.fit_and_apply(reference_dem, dem_to_be_aligned, inlier_mask=inlier_mask)

diff_after = reference_dem - corrected_dem
diff_after.plot(cmap="RdYlBu", vmin=-10, vmax=10, cbar_title="Elevation differences (m)")
plt.show()

# %%
# Stable terrain before and after; the dome is gone to the millimetre, the thinning is left.
inliers_before = diff_before[inlier_mask]
med_before, nmad_before = np.ma.median(inliers_before), gu.stats.nmad(inliers_before)
inliers_after = diff_after[inlier_mask]
med_after, nmad_after = np.ma.median(inliers_after), gu.stats.nmad(inliers_after)
print(f"Error before: median = {med_before:.2f} - NMAD = {nmad_before:.2f} m")
print(f"Error after: median = {med_after:.2f} - NMAD = {nmad_after:.2f} m")
assert abs(med_after) < 0.01 and nmad_after < 0.01 < nmad_before
residual_dome = (corrected_dem - reference_dem).data - thinning(xx, yy)
print(f"largest residual of the dome anywhere: {np.abs(residual_dome).max() * 1000:.2f} mm")
assert np.abs(residual_dome).max() < 0.01
