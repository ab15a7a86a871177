"""
Spatial correlation of errors, as upstream's example
====================================================

Errors of neighbouring pixels are correlated. Here the empirical variogram of the elevation
differences on stable terrain, standardised by their known errors, is sampled on a
reproducible subsample and fitted with a sum of two models
(:func:`xdem.spatialstats.infer_spatial_correlation_from_stable`). The synthetic glacier set's
standardised errors have a nugget of 0.2 and a Gaussian correlation of range 400 m and partial
sill 0.8: the example checks the fit against them.
"""

import os

import matplotlib.pyplot as plt

import xdem
from xdem.examples.glaciers import glacier_set

size = int(os.environ.get("XDEM_EXAMPLE_SIZE", "512"))
g = glacier_set((size, size), chunks=256)
zscores = g.ddem / g.error

# %%
# The short spherical model takes the nugget (its range is below the first lag class).
df_empirical_variogram, df_model_params, spatial_corr_function = (
    xdem.spatialstats.infer_spatial_correlation_from_stable(
        dvalues=zscores, list_models=["Spherical", "Gaussian"], unstable_mask=g.outlines, subsample=2000,
        n_variograms=3, random_state=42,
    )
)
print(df_model_params)

# %%
for spatial_lag in (0, 100, 400, 1000):
    print(f"Errors are correlated at {spatial_corr_function(spatial_lag) * 100:.1f}% for a {spatial_lag} m spatial lag")

xdem.spatialstats.plot_variogram(
    df_empirical_variogram, list_fit_fun=[xdem.spatialstats.get_variogram_model_func(df_model_params)],
    xlabel="Spatial lag (m)", ylabel="Variance of\nstandardised dh", xscale_range_split=[200, 1000],
)
plt.show()

# %%
# Against the truth: a grid of 512 x 512 pixels of 20 m holds about 650 patches of the range,
# so the range and sills are within 15 %.
gaussian = df_model_params.iloc[-1]
assert gaussian["model"] == "gaussian" and abs(gaussian["range"] / g.noise.range - 1) < 0.15
assert abs(gaussian["psill"] / (1 - g.noise.nugget) - 1) < 0.15
assert abs(df_model_params["psill"].sum() - 1) < 0.15
