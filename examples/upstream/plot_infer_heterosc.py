"""
Elevation error map, as upstream's example
==========================================

The precision of elevation differences varies with terrain: here we estimate how their spread
grows with slope and maximum curvature on stable terrain, and map the error of every pixel
(Hugonnet et al. 2022). The data are the synthetic glacier set
(:mod:`xdem.examples.glaciers`), whose errors have a known spread,
``sigma = 0.3 + 0.02 * slope`` (m): the example checks what it recovers against it.
Everything is lazy: the binning is a grouped pass per statistic, the error map a block-wise map.
"""

import os

import matplotlib.pyplot as plt
import numpy as np

import xdem
from xdem.examples.glaciers import glacier_set

size = int(os.environ.get("XDEM_EXAMPLE_SIZE", "512"))
g = glacier_set((size, size), chunks=256)
ref_dem = g.ref
glacier_outlines = g.outlines

# %%
# Slope and maximum curvature of the reference DEM are the explanatory variables.
slope = xdem.terrain.slope(ref_dem)
max_curvature = xdem.terrain.get_terrain_attribute(ref_dem, "max_curvature")

# %%
# Infer the heteroscedasticity on stable terrain (off the glaciers): an error map, the binned
# NMAD, and the error as a function of (slope, maximum curvature).
errors, df_binning, error_function = xdem.spatialstats.infer_heteroscedasticity_from_stable(
    dvalues=g.ddem, list_var=[slope, max_curvature], list_var_names=["slope", "maxc"], unstable_mask=glacier_outlines
)
errors.plot(cmap="Reds", vmin=0.2, vmax=1.4)
plt.title("Elevation error (1 sigma, m)")
plt.show()

# %%
# The binned table (upstream's layout: 1-D binnings, then the 2-D one).
print(df_binning[df_binning.nd == 1].head())

# %%
# The error at a few slopes and the median curvature, against the truth (curvature does not
# matter in this set's error model).
maxc_median = float(np.nanmedian(max_curvature.values))
for s in (5.0, 20.0, 35.0):
    got = float(error_function((np.array([s]), np.array([maxc_median])))[0])
    truth = float(g.noise.sigma(s))
    print(f"Error for a slope of {s:.0f} degrees: {got:.2f} m (truth {truth:.2f} m)")
    assert abs(got / truth - 1) < 0.15  # 2-D bins hold fewer pixels than 1-D ones: 15 %
