"""
Working with a collection of DEMs, as upstream's example
=========================================================

Upstream's :class:`xdem.DEMCollection` example, written afresh on the synthetic glacier set
(:mod:`xdem.examples.glaciers`), whose elevation change is known: three DEMs (1990, 2009 and a
made-up 2060 with three times the 1990-2009 change, as upstream fakes it), glacier outlines
dated 1990 and 2009, the 2009 DEM as reference. The cumulative series of one glacier is
checked against the set's truth. Everything stays lazy until a series is asked for.
"""

import os
from datetime import datetime

import matplotlib.pyplot as plt
import numpy as np

import xdem
from xdem.examples.glaciers import glacier_set

size = int(os.environ.get("XDEM_EXAMPLE_SIZE", "512"))
g = glacier_set((size, size), chunks=256)

# %%
# Three DEMs: 2009 (the reference), 1990 (2009 minus the full elevation change, noise included,
# no voids) and 2060 (2009 plus three times the 1990-2009 change).
dem_2009 = xdem.DEM(g.ref)
dem_1990 = dem_2009 - g.ddem_full.values
dem_2060 = dem_2009 + (dem_2009 - dem_1990).data * 3
timestamps = [datetime(1990, 8, 1), datetime(2009, 8, 1), datetime(2060, 8, 1)]

# %%
# Outlines dated 1990 and 2009 (the same polygons here); a dDEM between the two dates is masked
# by their union.
outlines = {datetime(1990, 8, 1): g.outlines, datetime(2009, 8, 1): g.outlines}
demcollection = xdem.DEMCollection(dems=[dem_1990, dem_2009, dem_2060], timestamps=timestamps, outlines=outlines,
                                   reference_dem=1)

# %%
# The dDEMs to the reference (reference minus DEM, as upstream's: the 2060 one is inverted).
_ = demcollection.subtract_dems()

# %%
# The cumulative elevation change of one glacier, selected by a query of the outlines.
series = demcollection.get_cumulative_series(kind="dh", outlines_filter="NAME == 'Betabreen'")
print(series)

truth = g.truth().loc["Betabreen"]
mean_change = truth["volume_full"] / truth["area"]  # the glacier's true mean dh, 1990-2009
assert np.allclose(series.to_numpy(), [0.0, mean_change, 4 * mean_change], atol=1e-3)

# %%
# Volumes of every glacier, one column each.
volumes = demcollection.get_cumulative_series(kind="dv", by="NAME")
print((volumes / 1e6).round(2))  # million m3
assert np.allclose(volumes.loc[datetime(2009, 8, 1)], g.truth()["volume_full"], rtol=1e-5)

# %%
# The two dDEMs around the reference, as upstream shows them (the second one inverted back).
fig, axes = plt.subplots(1, 2, figsize=(9, 4))
for ax, (title, ddem) in zip(axes, [("1990 - 2009", demcollection.ddems[0]),
                                    ("2009 - 2060", -demcollection.ddems[2])]):
    ax.imshow(ddem.data.squeeze(), cmap="RdYlBu", vmin=-50, vmax=50)
    ax.set_title(title)
    ax.set_axis_off()
plt.tight_layout()
plt.show()
