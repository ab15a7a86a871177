"""
Spatial propagation of elevation errors, as upstream's example
==============================================================

The standard error of the mean elevation change over an area needs both the heteroscedasticity
(the error of each pixel) and the spatial correlation of the errors. Here both are inferred on
stable terrain, then propagated to each glacier outline (any shape: the pixels inside, with a
subset sum of the correlations, out of core) and to disks of growing area
(:func:`xdem.spatialstats.spatial_error_propagation`). The synthetic glacier set's true error
model gives the standard errors to compare with.
"""

import os

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import xdem
from xdem.examples.glaciers import glacier_set

size = int(os.environ.get("XDEM_EXAMPLE_SIZE", "512"))
g = glacier_set((size, size), chunks=256)
# a small grid: keep the inputs in memory between the passes (a large one stays lazy)
slope, ddem = xdem.terrain.slope(g.ref).persist(), g.ddem.persist()

errors, df_binning, error_function = xdem.spatialstats.infer_heteroscedasticity_from_stable(
    dvalues=ddem, list_var=[slope], list_var_names=["slope"], unstable_mask=g.outlines
)
zscores = ddem / errors
emp_variogram, params_variogram_model, spatial_corr_function = (
    xdem.spatialstats.infer_spatial_correlation_from_stable(
        dvalues=zscores, list_models=["Spherical", "Gaussian"], unstable_mask=g.outlines, subsample=2000,
        n_variograms=3, random_state=42,
    )
)

# %%
# The standard error of the mean over each glacier, fitted and from the true error model.
areas = [g.outlines.iloc[[i]] for i in range(len(g.outlines))]
stderr_glaciers = xdem.spatialstats.spatial_error_propagation(areas, errors, params_variogram_model)
truth = pd.DataFrame({"model": ["spherical", "gaussian"], "range": [1.0, g.noise.range],
                      "psill": [g.noise.nugget, 1 - g.noise.nugget]})
stderr_true = xdem.spatialstats.spatial_error_propagation(areas, g.error, truth)
for name, se, se_true in zip(g.outlines["NAME"], stderr_glaciers, stderr_true):
    print(f"The error (1-sigma) in mean elevation change for {name} is {se:.3f} m (true model: {se_true:.3f} m).")
    assert abs(se / se_true - 1) < 0.2

# %%
# Disks of growing area: the error decreases as the area covers more correlation ranges.
disk_areas = 10 ** np.linspace(3, 9, 25)
stderrs = xdem.spatialstats.spatial_error_propagation(disk_areas, errors, params_variogram_model)
plt.plot(disk_areas / 1e6, stderrs)
plt.xscale("log")
plt.xlabel("Averaging area (km²)")
plt.ylabel("Standard error (m)")
plt.vlines(np.pi * params_variogram_model["range"].values[-1] ** 2 / 1e6, 0, max(stderrs), colors="red",
           linestyles="dashed", label="Disk of radius the Gaussian range")
plt.legend()
plt.show()
assert np.all(np.diff(stderrs) < 0)
