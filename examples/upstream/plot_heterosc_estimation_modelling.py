"""
Estimation and modelling of heteroscedasticity, as upstream's example
=====================================================================

The steps that :func:`xdem.spatialstats.infer_heteroscedasticity_from_stable` chains, one by
one: bin the elevation differences of stable terrain by slope with
:func:`xdem.spatialstats.nd_binning`, turn the binned NMAD into a function of slope with
:func:`xdem.spatialstats.interp_nd_binning`, and rescale it with
:func:`xdem.spatialstats.two_step_standardization` so that the standardised differences have a
spread of exactly 1. On the synthetic glacier set the true spread is
``sigma = 0.3 + 0.02 * slope`` (m).
"""

import os

import matplotlib.pyplot as plt
import numpy as np

import xdem
from xdem.examples.glaciers import glacier_set
from xdem.masks import labels_like

size = int(os.environ.get("XDEM_EXAMPLE_SIZE", "512"))
g = glacier_set((size, size), chunks=256)
slope = xdem.terrain.slope(g.ref)
stable = labels_like(g.outlines, g.ref) == 0
dh_stable = g.ddem.where(stable)  # lazy: NaN on the glaciers

# %%
# Bin by slope (5-degree bins) with the NMAD, exactly (grouped order statistics, no subsample).
df = xdem.spatialstats.nd_binning(
    values=dh_stable, list_var=[slope], list_var_names=["slope"], statistics=["count", np.nanmedian, xdem.spatialstats.nmad],
    list_var_bins=[np.arange(0.0, 55.0, 5.0)],
)
xdem.spatialstats.plot_1d_binning(df, "slope", "nmad", "Slope (degrees)", "NMAD of dh (m)")
plt.show()

# %%
# The binned NMAD follows the true spread at the bins' centres.
full = df[df["count"] > 1000]
centres = np.array([iv.mid for iv in full["slope"]])
ratio = full["nmad"].to_numpy() / g.noise.sigma(centres)
print("NMAD / truth by bin:", np.round(ratio, 3))
assert np.all(np.abs(ratio - 1) < 0.12)  # correlated errors: ~10^2 independent values per bin

# %%
# A function of slope, then the two-step standardisation.
slope_to_error = xdem.spatialstats.interp_nd_binning(df, list_var_names=["slope"], statistic="nmad", min_count=30)
zscores, error_function = xdem.spatialstats.two_step_standardization(dh_stable, [slope], slope_to_error)
print(f"NMAD of the standardised differences: {xdem.spatialstats.nmad(zscores):.6f}")
assert abs(xdem.spatialstats.nmad(zscores) - 1) < 1e-9

for s in (10.0, 30.0):
    print(f"error at {s:.0f} degrees: {float(error_function((np.array([s]),))[0]):.3f} m (truth {g.noise.sigma(s):.3f} m)")
    assert abs(float(error_function((np.array([s]),))[0]) / g.noise.sigma(s) - 1) < 0.1
