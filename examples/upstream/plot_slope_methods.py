"""
Slope and aspect methods, as upstream's example
===============================================

Three ways to estimate the derivatives of the surface: Horn (1981) and Zevenbergen and
Thorne (1987) on 3 x 3 windows, and Florinsky (2009), a third-order fit on 5 x 5 windows
(upstream's default). Their slopes differ most where the surface curves most, as upstream's
example shows by binning the difference by maximal curvature.
"""

import matplotlib.pyplot as plt
import numpy as np

import xdem

dem = xdem.DEM(xdem.examples.get_path("lidar_ref_dem"))


def plot_attribute(attribute, cmap, label=None, vlim=None):
    if vlim is not None:
        if isinstance(vlim, (int, np.integer, float, np.floating)):
            vlims = {"vmin": -vlim, "vmax": vlim}
        elif len(vlim) == 2:
            vlims = {"vmin": vlim[0], "vmax": vlim[1]}
    else:
        vlims = {}
    attribute.plot(cmap=cmap, cbar_title=label, **vlims)
    plt.xticks([])
    plt.yticks([])
    plt.tight_layout()
    plt.show()


# %%
# The three slopes.
slope_horn = xdem.terrain.slope(dem, surface_fit="Horn")
plot_attribute(slope_horn, "Reds", "Slope of Horn (1981) (°)")
slope_zevenberg = xdem.terrain.slope(dem, surface_fit="ZevenbergThorne")
plot_attribute(slope_zevenberg, "Reds", "Slope of Zevenberg and Thorne (1987) (°)")
slope_florinsky = xdem.terrain.slope(dem, surface_fit="Florinsky")
plot_attribute(slope_florinsky, "Reds", "Slope of Florinsky (2009) (°)")
assert np.ma.allclose(xdem.terrain.slope(dem).data, slope_florinsky.data)  # upstream's default

# %%
# Their difference, and the maximal curvature.
diff_slope = slope_horn - slope_zevenberg
plot_attribute(diff_slope, "RdYlBu", "Slope of Horn (1981) minus\n slope of Zevenberg and Thorne (1987) (°)", vlim=3)
maxc = xdem.terrain.max_curvature(dem)
plot_attribute(maxc, "RdYlBu", "Maximal curvature (100 m $^{-1}$)", vlim=2)

# %%
# The difference binned by curvature: it grows with the curvature.
df_bin = xdem.spatialstats.nd_binning(
    values=diff_slope[:],
    list_var=[maxc[:]],
    list_var_names=["maxc"],
    list_var_bins=30,
    statistics=[np.nanmedian, "count"],
)
xdem.spatialstats.plot_1d_binning(
    df_bin,
    var_name="maxc",
    statistic_name="nanmedian",
    label_var="Maximal absolute curvature (100 m$^{-1}$)",
    label_statistic="Slope of Horn (1981) minus\n " "slope of Zevenberg and Thorne (1987) (°)",
)
plt.show()

# %%
# Aspects differ little, and mostly on flat terrain (where an aspect means little).
aspect_horn = xdem.terrain.aspect(dem)
aspect_zevenberg = xdem.terrain.aspect(dem, method="ZevenbergThorne")
diff_aspect = aspect_horn - aspect_zevenberg
diff_aspect_mod = np.minimum(diff_aspect % 360, 360 - diff_aspect % 360)
plot_attribute(
    diff_aspect_mod, "Spectral", "Aspect of Horn (1981) minus\n aspect of Zevenberg and Thorne (1987) (°)", vlim=[0, 90]
)
for name, other in (("Zevenbergen-Thorne", slope_zevenberg), ("Florinsky", slope_florinsky)):
    gap = np.ma.median(np.abs((slope_horn - other).data))
    print(f"median |Horn - {name}| slope: {gap:.3f}°")
    assert gap < 1.0  # the methods agree to well under a degree on a 1 m lidar DEM
steep = slope_horn.data > 10
print(f"median aspect difference where the slope exceeds 10°: {np.ma.median(diff_aspect_mod.data[steep]):.2f}°")
assert np.ma.median(diff_aspect_mod.data[steep]) < 2.0
