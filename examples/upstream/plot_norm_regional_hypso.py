"""
Normalised regional hypsometric interpolation, as upstream's example
====================================================================

Elevation change on glaciers varies mostly with elevation, so voids can be filled from the
valid pixels at the same elevation (hypsometric interpolation). Glaciers of different sizes and
elevation ranges do not share one curve, but they often share its *shape*: the normalised
regional signal scales every glacier's elevation range and elevation change to 0-1, averages
them (weighted by valid pixels), then scales the averaged signal back to each glacier to fill
its voids (:func:`xdem.volume.norm_regional_hypsometric_interpolation`).

Here the glaciers are the synthetic set of :mod:`xdem.examples.glaciers`, whose thinning is a
known function of elevation and whose elevation change without voids is known: the filled
values and the volume change of each glacier are checked against that truth.
"""

import os

import matplotlib.pyplot as plt
import numpy as np

import xdem
from xdem.examples.glaciers import glacier_set
from xdem.masks import labels_like

size = int(os.environ.get("XDEM_EXAMPLE_SIZE", "512"))
g = glacier_set((size, size), resolution=40.0, chunks=512)  # 40 m pixels: several 8 km tiles of glaciers
dem_2009 = g.ref.values
ddem = g.ddem_full.values  # the elevation change without voids: the truth

# The glacier index map: 0 off glacier, i + 1 on the glacier of row i of the outlines.
glacier_index_map = labels_like(g.outlines, g.ref).compute()
print(f"{len(g.outlines)} glaciers")

# %%
# To test the method, remove 30 % of the glacier pixels at random.
rng = np.random.default_rng(42)
mask_nans = (glacier_index_map > 0) & (rng.random(ddem.shape) < 0.3)
ddem_voided = np.where(mask_nans, np.nan, ddem)

# %%
# The normalised signal: the tendency of elevation change with elevation, shared by the glaciers.
signal = xdem.volume.get_regional_hypsometric_signal(
    ddem=ddem_voided, ref_dem=dem_2009, glacier_index_map=glacier_index_map
)
plt.fill_between(signal.index.mid, signal["sigma-1-lower"], signal["sigma-1-upper"], label="Spread (+- 1 sigma)")
plt.plot(signal.index.mid, signal["w_mean"], color="black", label="Weighted mean")
plt.ylabel("Normalized elevation change")
plt.xlabel("Normalized elevation")
plt.legend()
plt.show()
# the known thinning is strongest low down: the normalised signal rises from ~0 to ~1
assert signal["w_mean"].iloc[0] < 0.15 and signal["w_mean"].iloc[-1] > 0.85

# %%
# Fill the voids with the signal scaled to each glacier.
ddem_filled = xdem.volume.norm_regional_hypsometric_interpolation(
    voided_ddem=ddem_voided, ref_dem=dem_2009, glacier_index_map=glacier_index_map, regional_signal=signal
)
plt.imshow(ddem_filled, cmap="RdYlBu", vmin=-40, vmax=40)
plt.colorbar()
plt.show()

# %%
# The difference between the filled and the true values in the voids: centred on zero, with the
# spread of the errors of the elevation change (the fill cannot know a pixel's own error).
difference = (ddem_filled - ddem)[mask_nans]
median = np.median(difference)
nmad = xdem.spatialstats.nmad(difference)
plt.title(f"Median: {median:.2f} m, NMAD: {nmad:.2f} m")
plt.hist(difference, bins=np.linspace(-5, 5, 100))
plt.show()
assert abs(median) < 0.3 and nmad < 2.0

# %%
# The glacier set's own voids (patches in the accumulation areas, 5-40 % of each glacier): the
# volume change of each glacier after filling, against the volume without voids.
filled = xdem.volume.norm_regional_hypsometric_interpolation(g.ddem.values, dem_2009, glacier_index_map)
truth = g.truth()
volumes = np.array([np.nansum(filled[glacier_index_map == k]) for k in range(1, len(truth) + 1)]) * g.pixel_area
error = volumes / truth["volume_full"].to_numpy() - 1
print(f"largest error of a glacier's volume change: {np.abs(error).max():.2%}")
assert np.abs(error).max() < 0.03
