"""
Nuth and Kääb coregistration, as upstream's example
===================================================

Upstream's first coregistration example on the bundled stand-ins: two :class:`xdem.DEM`
objects, glacier outlines read with geoutils and turned into a mask of stable terrain, and
:class:`xdem.coreg.NuthKaab` fitted on that terrain only. The code is upstream's, except the
data loading; the to-be-aligned DEM was made by moving the reference by a known amount and
lowering it inside the outlines, so the shift found can be checked against the truth.

**Reference**: Nuth and Kääb (2011), https://doi.org/10.5194/tc-5-271-2011.
"""

import geoutils as gu
import matplotlib.pyplot as plt
import numpy as np

import xdem
from xdem.examples.standins import TRUTH

# %%
# The reference DEM, the DEM to align, and the outlines of unstable (glacier) terrain.
reference_dem = xdem.DEM(xdem.examples.get_path("lidar_ref_dem"))
dem_to_be_aligned = xdem.DEM(xdem.examples.get_path("lidar_tba_dem"))
glacier_outlines = gu.Vector(xdem.examples.get_path("lidar_outlines"))

# Stable terrain: everything outside the outlines.
inlier_mask = ~glacier_outlines.create_mask(reference_dem)

# %%
# The elevation differences before coregistration: the relief-like pattern of a horizontal
# shift, and the lowered "glaciers".
diff_before = reference_dem - dem_to_be_aligned
diff_before.plot(cmap="RdYlBu", vmin=-10, vmax=10, cbar_title="Elevation change (m)")
plt.show()

# %%
# Fit on stable terrain and apply, in one call.
nuth_kaab = xdem.coreg.NuthKaab()
aligned_dem = nuth_kaab.fit_and_apply(reference_dem, dem_to_be_aligned, inlier_mask)

found = nuth_kaab.meta["outputs"]["affine"]
for name in ("shift_x", "shift_y", "shift_z"):
    print(f"{name}: found {found[name]:+.4f} m, truth {TRUTH[name]:+.4f} m")
    assert abs(found[name] - TRUTH[name]) < 0.01  # sub-centimetre on 1 m pixels

# %%
# The differences after: flat on stable terrain, the thinning left inside the outlines.
diff_after = reference_dem - aligned_dem
diff_after.plot(cmap="RdYlBu", vmin=-10, vmax=10, cbar_title="Elevation change (m)")
plt.show()

# %%
# Median and NMAD of the differences on stable terrain, before and after.
inliers_before = diff_before[inlier_mask]
med_before, nmad_before = np.ma.median(inliers_before), gu.stats.nmad(inliers_before)
inliers_after = diff_after[inlier_mask]
med_after, nmad_after = np.ma.median(inliers_after), gu.stats.nmad(inliers_after)
print(f"Error before: median = {med_before:.2f} - NMAD = {nmad_before:.2f} m")
print(f"Error after: median = {med_after:.2f} - NMAD = {nmad_after:.2f} m")
assert abs(med_after) < 0.01 and nmad_after < 0.05 < nmad_before
