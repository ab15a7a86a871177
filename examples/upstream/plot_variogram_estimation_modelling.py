"""
Estimation and modelling of spatial variograms, as upstream's example
=====================================================================

The empirical variogram of standardised elevation differences
(:func:`xdem.spatialstats.sample_empirical_variogram`, three variograms of a reproducible
subsample averaged: their spread gives error bars) is fitted with one model and with sums of
two (:func:`xdem.spatialstats.fit_sum_model_variogram`). The synthetic glacier set's true
variogram is a nugget of 0.2 plus a Gaussian model of range 400 m: the sum that includes a
nugget-like short model fits it best, and its number of effective samples for a glacier is
close to the truth's.
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
zscores = (g.ddem / g.error).where(labels_like(g.outlines, g.ref) == 0)

df_vgm = xdem.spatialstats.sample_empirical_variogram(zscores, subsample=2000, n_variograms=3, random_state=42,
                                                      estimator="dowd")

# %%
# One Gaussian model, then a spherical and a Gaussian, then two spherical models.
fits = {}
for models in (["gaussian"], ["spherical", "gaussian"], ["spherical", "spherical"]):
    fun, params = xdem.spatialstats.fit_sum_model_variogram(models, df_vgm)
    fits["+".join(models)] = (fun, params)
    print("+".join(models), [(m, round(r), round(s, 3)) for m, r, s in params.to_numpy()], f"rss={params.attrs['rss']:.4f}")

xdem.spatialstats.plot_variogram(
    df_vgm, list_fit_fun=[f for f, _ in fits.values()], list_fit_fun_label=list(fits), xscale_range_split=[200, 1000],
)
plt.show()

# %%
# The fit with a nugget-like model is the best, and close to the truth at every lag.
rss = {k: p.attrs["rss"] for k, (_f, p) in fits.items()}
assert rss["spherical+gaussian"] < rss["gaussian"]
lags = np.array([20.0, 100.0, 200.0, 400.0, 800.0])
fitted = fits["spherical+gaussian"][0](lags)
print("fitted:", np.round(fitted, 3), "truth:", np.round(g.noise.variogram(lags), 3))
assert np.all(np.abs(fitted - g.noise.variogram(lags)) < 0.1)

# %%
# Numbers of effective samples of the largest glacier (disk approximation), fitted and true.
area = float(g.outlines.area.max())
truth = pd.DataFrame({"model": ["spherical", "gaussian"], "range": [1.0, g.noise.range],
                      "psill": [g.noise.nugget, 1 - g.noise.nugget]})
n_fit = xdem.spatialstats.neff_circular_approx_numerical(area, fits["spherical+gaussian"][1])
n_true = xdem.spatialstats.neff_circular_approx_numerical(area, truth)
print(f"effective samples: fitted {n_fit:.1f}, truth {n_true:.1f}")
assert abs(n_fit / n_true - 1) < 0.25
