"""
Iterative closest point coregistration, as upstream's example
=============================================================

Iterative closest point (ICP, Besl and McKay 1992) fits a rotation and a translation between
two point clouds: here the DEM and a copy of it rotated by a known 1 degree about the y axis.
As in upstream's example, ICP, Nuth and Kääb, and the pipeline of both are compared; Nuth
and Kääb alone cannot undo a rotation, ICP can.
"""

import matplotlib.pyplot as plt
import numpy as np

import xdem

# %%
# A 300 m x 300 m crop of the bundled DEM (xmin, ymin, xmax, ymax).
dem = xdem.DEM(xdem.examples.get_path("lidar_ref_dem"))
subset_extent = [429302.3, 5150535.4, 429602.3, 5150835.4]
dem = dem.crop(subset_extent)
xdem.terrain.hillshade(dem).plot(cmap="gray")
plt.show()

# %%
# Rotate it by 1 degree about the y axis, around its centre.
rotation = np.deg2rad(1)
rotation_matrix = np.array(
    [
        [np.cos(rotation), 0, np.sin(rotation), 0],
        [0, 1, 0, 0],
        [-np.sin(rotation), 0, np.cos(rotation), 0],
        [0, 0, 0, 1],
    ]
)
centroid = [dem.bounds.left + dem.width / 2, dem.bounds.bottom + dem.height / 2, np.nanmean(dem)]
rotated_dem = xdem.coreg.apply_matrix(dem, matrix=rotation_matrix, centroid=centroid)

diff_before = dem - rotated_dem
diff_before.plot(cmap="RdYlBu", vmin=-5, vmax=5, cbar_title="Elevation differences (m)")
plt.show()

# %%
# Three approaches; the residual differences after each.
approaches = [
    (xdem.coreg.ICP(), "ICP"),
    (xdem.coreg.NuthKaab(), "NuthKaab"),
    (xdem.coreg.ICP() + xdem.coreg.NuthKaab(), "ICP + NuthKaab"),
]
plt.figure(figsize=(6, 12))
nmads = {}
for i, (approach, name) in enumerate(approaches):
    corrected_dem = approach.fit_and_apply(
        reference_elev=dem,
        to_be_aligned_elev=rotated_dem,
    )
    diff = dem - corrected_dem
    nmads[name] = xdem.spatialstats.nmad(diff.data)
    print(f"{name}: NMAD of the residual {nmads[name]:.3f} m")
    ax = plt.subplot(3, 1, i + 1)
    plt.title(name)
    diff.plot(cmap="RdYlBu", vmin=-5, vmax=5, ax=ax, cbar_title="Elevation differences (m)")
plt.tight_layout()
plt.show()

# %%
# ICP found the inverse rotation: -1 degree about y (upstream's convention: extrinsic
# rotations about x, y, z in degrees).
icp = approaches[0][0]
rx, ry, rz = icp.to_rotations()
print(f"ICP rotations: x {rx:+.3f}, y {ry:+.3f}, z {rz:+.3f} degrees (truth: 0, -1, 0)")
before = xdem.spatialstats.nmad(diff_before.data)
print(f"NMAD before: {before:.3f} m")
assert abs(ry + 1) < 0.05 and abs(rx) < 0.05 and abs(rz) < 0.05
assert nmads["ICP"] < before / 5 and nmads["ICP + NuthKaab"] < before / 5
