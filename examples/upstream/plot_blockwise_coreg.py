"""
Blockwise coregistration, as upstream's example
===============================================

:class:`xdem.coreg.BlockwiseCoreg` runs a coregistration in each tile of a grid and warps the
DEM smoothly between the tiles' shifts. As in upstream's example, the tiling and the output
file come from geoutils' ``MultiprocConfig``; ``apply()`` writes the aligned DEM to that file
(a Cloud-Optimized GeoTIFF, out of core here). The bundled pair has one known shift
everywhere, so every tile must find it.
"""

import shutil
import tempfile
from pathlib import Path

import geoutils as gu
import matplotlib.pyplot as plt
import numpy as np
from geoutils.raster.distributed_computing import MultiprocConfig

import xdem
from xdem.examples.standins import TRUTH

reference_dem = xdem.DEM(xdem.examples.get_path("lidar_ref_dem"))
dem_to_be_aligned = xdem.DEM(xdem.examples.get_path("lidar_tba_dem"))
glacier_outlines = gu.Vector(xdem.examples.get_path("lidar_outlines"))
inlier_mask = ~glacier_outlines.create_mask(reference_dem)

diff_before = reference_dem - dem_to_be_aligned
diff_before.plot(cmap="RdYlBu", vmin=-10, vmax=10)
plt.show()

# %%
# Tiles of 200 x 200 pixels (``block_size_fit``: upstream's default of 500 would give one tile
# on this 400-pixel DEM); the aligned DEM is written to ``outfile`` (in a temporary folder
# here, removed at the end).
folder = Path(tempfile.mkdtemp(prefix="xdem-example-"))
mp_config = MultiprocConfig(chunk_size=200, outfile=str(folder / "aligned_dem.tif"), cluster=None)
blockwise = xdem.coreg.BlockwiseCoreg(xdem.coreg.NuthKaab(), mp_config=mp_config, block_size_fit=200)
blockwise.fit(reference_dem, dem_to_be_aligned, inlier_mask)
blockwise.apply()
aligned_dem = xdem.DEM(folder / "aligned_dem.tif")

# %%
# The shift of each tile, as upstream lays them out in ``meta["outputs"]``.
rows, cols, _ = blockwise.shape_tiling_grid
matrix_x = np.full((rows, cols), np.nan)
matrix_y = np.full((rows, cols), np.nan)
matrix_z = np.full((rows, cols), np.nan)
for key, value in blockwise.meta["outputs"].items():
    row, col = map(int, key.split("_"))
    matrix_x[row, col] = value["shift_x"]
    matrix_y[row, col] = value["shift_y"]
    matrix_z[row, col] = value["shift_z"]


def plot_heatmap(matrix, title, cmap, ax):
    im = ax.imshow(matrix, cmap=cmap)
    for (i, j), val in np.ndenumerate(matrix):
        ax.text(j, i, f"{val:.2f}", ha="center", va="center", color="black")
    ax.set_title(title)
    ax.set_xticks(np.arange(cols))
    ax.set_yticks(np.arange(rows))
    ax.invert_yaxis()
    plt.colorbar(im, ax=ax)


fig, axes = plt.subplots(1, 3, figsize=(18, 6))
plot_heatmap(matrix_x, "shifts in X", "Reds", axes[0])
plot_heatmap(matrix_y, "shifts in Y", "Greens", axes[1])
plot_heatmap(matrix_z, "shifts in Z", "Blues", axes[2])
plt.tight_layout()
plt.show()

for name, matrix in (("shift_x", matrix_x), ("shift_y", matrix_y), ("shift_z", matrix_z)):
    print(f"{name}: tiles from {np.nanmin(matrix):+.3f} to {np.nanmax(matrix):+.3f} m, truth {TRUTH[name]:+.3f} m")
    assert np.nanmax(np.abs(matrix - TRUTH[name])) < 0.05

# %%
# Before and after, on stable terrain.
diff_after = reference_dem - aligned_dem
diff_after.plot(cmap="RdYlBu", vmin=-10, vmax=10)
plt.show()

before, after = gu.stats.nmad(diff_before[inlier_mask]), gu.stats.nmad(diff_after[inlier_mask])
print(f"Error before: {before:.2f} m")
print(f"Error after: {after:.2f} m")
assert after < 0.1 < before
del aligned_dem
shutil.rmtree(folder)
