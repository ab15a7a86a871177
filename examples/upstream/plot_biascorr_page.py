"""
Bias corrections, as upstream's bias-correction page
====================================================

The code of upstream's bias-correction page on the bundled DEM: a correction of a ramp or
dome (:class:`~xdem.coreg.Deramp`), of strips along a direction
(:class:`~xdem.coreg.DirectionalBias`), of a bias with the terrain's curvature
(:class:`~xdem.coreg.TerrainBias`), and of a bias with several variables at once
(:class:`~xdem.coreg.BiasCorr`). Each is given the reference plus a known synthetic bias, so
what is left after the correction can be measured. (Upstream's page first converts a DEM
to the EGM96 geoid: vertical datums are issue 27.)
"""

import geoutils as gu
import matplotlib.pyplot as plt
import numpy as np

import xdem

ref_dem = xdem.DEM(xdem.examples.get_path("lidar_ref_dem"))
tba_dem = xdem.DEM(xdem.examples.get_path("lidar_tba_dem"))

# %%
# A bias correction is a coregistration: the same two ways to run it.
biascorr = xdem.coreg.DirectionalBias(angle=45, fit_or_bin="bin", bin_sizes=200, bin_apply_method="per_bin",
                                      bin_statistic=np.mean)
corrected_dem = tba_dem.coregister_3d(ref_dem, biascorr)
corrected_dem = biascorr.fit_and_apply(ref_dem, tba_dem)


def before_after(title, biased, corrected, vlim=10):
    """Upstream's plotting code; returns the NMAD before and after."""
    f, ax = plt.subplots(1, 2)
    ax[0].set_title(f"Before {title}")
    (biased - ref_dem).plot(cmap="RdYlBu", vmin=-vlim, vmax=vlim, ax=ax[0])
    ax[1].set_title(f"After {title}")
    (corrected - ref_dem).plot(cmap="RdYlBu", vmin=-vlim, vmax=vlim, ax=ax[1], cbar_title="Elevation differences (m)")
    _ = ax[1].set_yticklabels([])
    plt.show()
    return gu.stats.nmad((biased - ref_dem).data), gu.stats.nmad((corrected - ref_dem).data)


# %%
# Deramping
# ---------
# A dome of up to 20 m on the grid's pixel coordinates.
xx, yy = np.meshgrid(np.arange(0, ref_dem.shape[1]), np.arange(0, ref_dem.shape[0]))
cx = ref_dem.shape[1] / 2
cy = ref_dem.shape[0] / 2
synthetic_bias = 20 * ((xx - cx) ** 2 + (yy - cy) ** 2) / (cx * cy)
synthetic_bias -= np.median(synthetic_bias)
tbc_dem_ramp = ref_dem + synthetic_bias
deramp = xdem.coreg.Deramp(poly_order=2)
corrected_dem = deramp.fit_and_apply(ref_dem, tbc_dem_ramp)
before, after = before_after("deramp", tbc_dem_ramp, corrected_dem, vlim=30)
print(f"deramp: NMAD {before:.2f} m before, {after:.4f} m after")
assert after < 0.01  # a second-order polynomial is removed exactly

# %%
# Directional biases
# ------------------
# Strips across the direction 60 degrees, of known heights (positions in metres along it).
angle = 60
xx = gu.raster.get_xy_rotated(ref_dem, along_track_angle=angle)[0]
synthetic_bias = np.zeros(np.shape(ref_dem.data))
xmin = np.min(xx)
for start, end, height in ((40, 60, 20), (110, 125, -10), (210, 225, 10), (300, 330, 5), (420, 440, -15)):
    synthetic_bias[np.logical_and((xx - xmin) < end, (xx - xmin) > start)] = height
tbc_dem_strip = ref_dem + synthetic_bias
dirbias = xdem.coreg.DirectionalBias(angle=60, fit_or_bin="bin", bin_sizes=1000)
corrected_dem = dirbias.fit_and_apply(ref_dem, tbc_dem_strip)
before_after("directional\nde-biasing", tbc_dem_strip, corrected_dem, vlim=30)
before = np.ma.mean(np.ma.abs((tbc_dem_strip - ref_dem).data))
residual = np.ma.abs((corrected_dem - ref_dem).data)
print(f"directional: mean |dh| {before:.3f} m before, {np.ma.mean(residual):.3f} m after; 99th percentile of "
      f"|residual| {np.percentile(residual.compressed(), 99):.3f} m")
assert np.ma.mean(residual) < before / 5  # bins straddling a strip edge keep part of it

# %%
# Terrain biases
# --------------
# A bias of -10 to +20 m by bins of maximal curvature (upstream's curvature, 100/m).
maxc = ref_dem.max_curvature()
synthetic_bias = np.zeros(np.shape(ref_dem.data))
bin_edges = np.array((-1, -0.5, -0.1, 0.1, 0.5, 2, 5))
bias_per_bin = np.array((-10, -5, 0, 5, 10, 20))
for i in range(len(bin_edges) - 1):
    synthetic_bias[np.logical_and(maxc.data >= bin_edges[i], maxc.data < bin_edges[i + 1])] = bias_per_bin[i]
tbc_dem_curv = ref_dem + synthetic_bias
terbias = xdem.coreg.TerrainBias(terrain_attribute="max_curvature",
                                 bin_sizes={"max_curvature": np.linspace(-5, 5, 1000)},
                                 bin_apply_method="per_bin")
corrected_dem = terbias.fit_and_apply(ref_dem, tbc_dem_curv, bias_vars={"max_curvature": maxc})
before, after = before_after("terrain\nde-biasing", tbc_dem_curv, corrected_dem)
print(f"terrain: NMAD {before:.2f} m before, {after:.3f} m after")
assert after < before / 10

# %%
# Several variables at once
# -------------------------
# After a Nuth and Kääb alignment on stable terrain, a 3-D binning by aspect, slope and
# elevation (on the stand-in, the residual is the glaciers' thinning and resampling noise).
glacier_outlines = gu.Vector(xdem.examples.get_path("lidar_outlines"))
inlier_mask = ~glacier_outlines.create_mask(ref_dem)
tba_dem_nk = tba_dem.coregister_3d(ref_dem, xdem.coreg.NuthKaab(), resample=True)
biascorr = xdem.coreg.BiasCorr(bias_var_names=["aspect", "slope", "elevation"], fit_or_bin="bin", bin_sizes=5)
aspect, slope = ref_dem.get_terrain_attribute(["aspect", "slope"])
corrected_dem = biascorr.fit_and_apply(
    ref_dem,
    tba_dem_nk,
    inlier_mask=inlier_mask,
    bias_vars={"aspect": aspect, "slope": slope, "elevation": ref_dem},
)
before, after = before_after("3D\nde-biasing", tba_dem_nk, corrected_dem)
stable_after = gu.stats.nmad((corrected_dem - ref_dem)[inlier_mask])
print(f"3-D: NMAD on stable terrain {stable_after:.3f} m after")
assert stable_after < 0.05
