"""
Statistics of elevation differences and their spatial correlation
=================================================================

After coregistration, the elevation differences ``dh = aligned - ref`` on stable terrain
measure the error of the DEMs. :mod:`xdem.spatialstats` describes them out of core:

* exact robust summaries (median, NMAD, percentiles) and statistics binned by terrain
  variables (slope classes, aspect...);
* an empirical variogram on a reproducible subsample (scikit-gstat) and a fitted sum of
  models, which give the spatial correlation of the errors;
* from it, the uncertainty of the mean ``dh`` over an area, which is much larger than
  ``NMAD / sqrt(pixels)`` when errors are correlated (Rolstad et al., 2009; Hugonnet et
  al., 2022).
"""

# %%
# A pair with noise and correlated errors
# ---------------------------------------
# The bundled pair (known shift) gets 20 cm of white noise, a few nodata holes, and, to
# mimic a real DEM's errors, a smooth random error field (correlated over about 30 m).
import matplotlib.pyplot as plt
import numpy as np
from scipy import ndimage

import xdem
import xdem.coreg
import xdem.examples
import xdem.spatialstats
import xdem.terrain

ref, tba, truth = xdem.examples.example_pair(noise=0.2, holes=6, random_state=42)
rng = np.random.default_rng(42)
smooth = ndimage.gaussian_filter(rng.normal(size=ref.shape), sigma=8.0)
smooth *= 0.5 / smooth.std()  # 0.5 m standard deviation
tba = tba + smooth.astype(np.float32)  # still lazy and georeferenced

aligned = xdem.coreg.NuthKaab().fit_and_apply(ref, tba)
dh = aligned - ref  # lazy
print(f"{int(np.isnan(tba.values).sum())} nodata pixels in tba")

# %%
# Robust summary
# --------------
# Every number is exact (no subsample) and the same for any chunking. Both the NMAD and
# the standard deviation are close to the spread of the errors we added (about 0.5 m, the
# white noise being partly smoothed by the resampling).
summary = xdem.spatialstats.robust_summary(dh)
print({k: round(v, 3) for k, v in summary.items()})

# %%
# Statistics by slope class and by aspect
# ---------------------------------------
# :func:`~xdem.spatialstats.stats_by_slope_class` bins ``dh`` by the slope of the reference
# (default classes 0-5-10-20-30-40-90 degrees; empty classes warn and show NaN).
# :func:`~xdem.spatialstats.binned_statistics` bins by any one or two variables. Before
# coregistration the median of ``dh`` follows a cosine of the aspect (the signature of a
# horizontal shift, see the Nuth & Kääb example); after, it is flat.
slope, aspect = xdem.terrain.get_terrain_attribute(ref, ["slope", "aspect"])
by_slope = xdem.spatialstats.stats_by_slope_class(dh, slope, classes=(0, 5, 10, 20, 40))
print(by_slope.round(3).to_string())

bins = {"aspect": np.linspace(0, 360, 13)}
by_aspect_before = xdem.spatialstats.binned_statistics(tba - ref, {"aspect": aspect}, bins=bins)
by_aspect_after = xdem.spatialstats.binned_statistics(dh, {"aspect": aspect}, bins=bins)

fig, ax = plt.subplots(figsize=(7, 3.5), constrained_layout=True)
for table, label in ((by_aspect_before, "before"), (by_aspect_after, "after")):
    ax.errorbar(table["aspect_center"], table["median"], yerr=table["nmad"], marker="o", capsize=3, label=label)
ax.set_xlabel("aspect of the reference (degrees from north)")
ax.set_ylabel("median of dh (m), bars: NMAD")
ax.set_xticks(range(0, 361, 60))
ax.legend()
plt.show()

# %%
# Empirical variogram and a sum of two models
# -------------------------------------------
# The variogram is estimated on a reproducible subsample of valid pixels, independent of the
# chunking; ``n_variograms`` independent draws are averaged and give error bars. The lag
# classes are logarithmic by default, fine at short lags where DEM errors usually
# correlate. A sum of a Gaussian and a spherical model fits the error field we added
# (Gaussian-filtered noise, correlated over about 30 m) better than either alone: compare
# the residual sums ``attrs["rss"]``.
ev = xdem.spatialstats.sample_empirical_variogram(dh, subsample=2000, n_variograms=3, random_state=0, n_lags=20)
for models in (["spherical"], ["gaussian"], ["gaussian", "spherical"]):
    model, params = xdem.spatialstats.fit_sum_model_variogram(models, ev)
    print(" + ".join(models), "rss:", f"{params.attrs['rss']:.2e}")
print(params.round(3).to_string())

lags = np.geomspace(0.5, ev["bins"].max(), 300)
fig, ax = plt.subplots(figsize=(7, 3.8), constrained_layout=True)
ax.errorbar(ev["lag"], ev["exp"], yerr=ev["err_exp"], fmt="o", color="0.3", capsize=2, label="empirical")
ax.plot(lags, model(lags), color="C3", label="Gaussian + spherical")
for _, row in params.iterrows():
    ax.axvline(row["range"], color="C3", ls=":", lw=1)
ax.set_xscale("log")
ax.set_xlabel("lag (m)")
ax.set_ylabel("semivariance (m²)")
ax.legend()
plt.show()

# %%
# Uncertainty of the mean elevation difference over an area
# ---------------------------------------------------------
# Averaging ``dh`` over an area (e.g. a glacier, to get a volume change) reduces the error
# by the square root of the number of *effective* independent samples, which the variogram
# gives. Compare with the naive ``NMAD / sqrt(number of pixels)``.
areas = np.logspace(1, 5.2, 30)  # m², pixels are 1 m²
se = [xdem.spatialstats.standard_error_of_mean(summary["nmad"], area=a, params=params) for a in areas]
naive = summary["nmad"] / np.sqrt(areas)
fig, ax = plt.subplots(figsize=(7, 3.8), constrained_layout=True)
ax.loglog(areas, se, color="C3", label="with spatial correlation")
ax.loglog(areas, naive, color="0.4", ls="--", label="NMAD / sqrt(pixels)")
ax.set_xlabel("area (m²)")
ax.set_ylabel("standard error of mean dh (m)")
ax.legend()
plt.show()
print(f"over 1 ha: {xdem.spatialstats.standard_error_of_mean(summary['nmad'], area=1e4, params=params):.3f} m "
      f"(naive {summary['nmad'] / 100:.4f} m)")
