"""
Volume and mass change of glaciers, with uncertainties
======================================================

Per glacier outline: area, coverage, mean elevation change, volume and mass change, each with
its 1-sigma uncertainty (:func:`xdem.volume.volume_change`), in one pass over the dDEM. The
uncertainty comes from the spread and the spatial correlation of dh on stable terrain
(outside the outlines), a term for voids, and the density's uncertainty (850 +- 60 kg m-3,
Huss 2013). On the synthetic glacier set the true volume change is known.

The command line does the same from two DEM files:
``xdem dh ref_2009.tif dem_1990.tif --later ref --outlines glaciers.gpkg -o changes.gpkg``.
"""

import os

import matplotlib.pyplot as plt
import numpy as np

from xdem.examples.glaciers import END, START, glacier_set
from xdem.volume import volume_change

size = int(os.environ.get("XDEM_EXAMPLE_SIZE", "800"))
g = glacier_set((size, size), chunks=256)

# %%
# The elevation change 1990-2009 (2009 minus 1990), with voids in the accumulation areas.
plt.imshow(g.ddem.values, cmap="RdYlBu", vmin=-40, vmax=40)
plt.colorbar(label="dh (m)")
plt.title("Elevation change 1990-2009")
plt.show()

# %%
# The table: one row per outline; ``error`` is the known error of dh by slope here (give an
# error map of your own, or none: the stable-terrain spread is used alone).
table = volume_change(g.ddem, g.outlines, error=g.error, start=START, end=END)
print(table[["NAME", "area", "valid_fraction", "dh_mean", "dh_mean_err", "volume_change", "volume_change_err",
             "mass_change", "mass_change_err"]].round(3).to_string())

# %%
# Against the truth: the noise-free volume change of each glacier.
truth = g.truth()["volume_signal"].to_numpy()
error = table["volume_change"].to_numpy() - truth
print("error / sigma:", np.round(error / table["volume_change_err"].to_numpy(), 2))
assert np.all(np.abs(error) <= 2 * table["volume_change_err"].to_numpy())

# %%
# Mass change per glacier with its error bars (Gt).
fig, ax = plt.subplots(figsize=(7, 3))
ax.bar(table["NAME"], table["mass_change"] / 1e12, yerr=table["mass_change_err"] / 1e12, capsize=4)
ax.set_ylabel("Mass change 1990-2009 (Gt)")
ax.tick_params(axis="x", rotation=45)
plt.tight_layout()
plt.show()
