"""
Standardization for stable terrain as error proxy, as upstream's example
========================================================================

Stable terrain is a proxy for the errors on moving terrain only once the errors' dependence on
terrain is taken out: here the elevation differences are binned by slope and maximum
curvature (quantile bins, as upstream), divided by the interpolated spread, rescaled to a
spread of 1, and their variogram fitted. The standard error of each glacier's mean then
follows from the mean error inside it and its number of effective samples. The synthetic
glacier set's true error model gives the numbers to check against.
"""

import os

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import xdem
from xdem.examples.glaciers import glacier_set
from xdem.masks import labels_like

size = int(os.environ.get("XDEM_EXAMPLE_SIZE", "512"))
g = glacier_set((size, size), chunks=256)
slope = xdem.terrain.slope(g.ref)
maxc = xdem.terrain.get_terrain_attribute(g.ref, "max_curvature")
# a small grid: keep the inputs in memory between the passes (a large one stays lazy)
slope, maxc, ddem = slope.persist(), maxc.persist(), g.ddem.persist()
index = np.asarray(labels_like(g.outlines, g.ref))  # 0 off the glaciers, i + 1 on glacier i
dh_stable = ddem.where(index == 0)

# %%
# Quantile bins (finer in the tails), from a reproducible subsample of the stable pixels.
sample = np.asarray(slope.where(index == 0).values)
bins_slope = np.unique(np.nanquantile(sample, np.r_[np.linspace(0, 0.95, 12), np.linspace(0.96, 1, 5)]))
bins_maxc = np.unique(np.nanquantile(np.asarray(maxc.where(index == 0).values), np.linspace(0, 1, 6)))
df = xdem.spatialstats.nd_binning(dh_stable, [slope, maxc], ["slope", "maxc"], statistics=["count", "nmad"],
                                  list_var_bins=[bins_slope, bins_maxc])
error_fun = xdem.spatialstats.interp_nd_binning(df, ["slope", "maxc"], statistic="nmad", min_count=30)

# %%
# Standardise: the NMAD is close to 1 before the rescaling, exactly 1 after.
dh_err = error_fun((slope, maxc))
z_dh = dh_stable / dh_err
z_dh = z_dh.where(abs(z_dh) < 4)
scale_fac_std = xdem.spatialstats.nmad(z_dh)
print(f"NMAD before scale-correction: {scale_fac_std:.3f}")
z_dh = z_dh / scale_fac_std
print(f"NMAD after scale-correction: {xdem.spatialstats.nmad(z_dh):.3f}")
assert abs(scale_fac_std - 1) < 0.15 and abs(xdem.spatialstats.nmad(z_dh) - 1) < 1e-9
z_dh.plot(cmap="RdYlBu", vmin=-3, vmax=3)
plt.show()

# %%
# Variogram of the standardised differences (nugget-like spherical + Gaussian).
df_vgm = xdem.spatialstats.sample_empirical_variogram(z_dh, subsample=2000, n_variograms=3, estimator="dowd",
                                                      random_state=42)
func_sum_vgm, params_vgm = xdem.spatialstats.fit_sum_model_variogram(["Spherical", "Gaussian"], df_vgm)
xdem.spatialstats.plot_variogram(df_vgm, list_fit_fun=[func_sum_vgm], xscale_range_split=[200, 1000])
plt.show()

# %%
# Per glacier: mean error, effective samples (disk of the same area), standard error, against
# the true model's standard error over the same pixels.
truth = pd.DataFrame({"model": ["spherical", "gaussian"], "range": [1.0, g.noise.range],
                      "psill": [g.noise.nugget, 1 - g.noise.nugget]})
true_se = xdem.spatialstats.spatial_error_propagation([g.outlines.iloc[[i]] for i in range(len(g.outlines))],
                                                      g.error, truth)
for i, name in enumerate(g.outlines["NAME"]):
    inside = index == i + 1
    neff = xdem.spatialstats.neff_circular_approx_numerical(float(g.outlines.area.iloc[i]), params_vgm)
    se = scale_fac_std * float(np.nanmean(np.asarray(dh_err)[inside])) / np.sqrt(neff)
    mean_dh = float(np.nanmean(np.asarray(ddem)[inside]))
    print(f"{name}: {mean_dh:.2f} +- {se:.2f} m (true model: +- {true_se[i]:.2f} m)")
    assert abs(se / true_se[i] - 1) < 0.3  # the disk is conservative: up to ~20 % larger
