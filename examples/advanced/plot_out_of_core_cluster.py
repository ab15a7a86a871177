"""
Out-of-core coregistration on a ``distributed`` cluster
=======================================================

Every step of xdem works chunk by chunk on dask arrays, so peak memory depends on the chunk
size, not on the DEM size: the same code aligns a 400 x 400 DEM or a 20000 x 20000 one.
Under a :class:`distributed.Client`, the chunks are processed by the cluster's workers and
:func:`xdem.write_cog` has them send the blocks back to this process, which writes them: the
workers need no disk shared with it.

This example generates a synthetic pair with a known shift with
:func:`xdem.examples.synthetic.generate_pair` (fractal terrain, computed chunk by chunk and
written as COGs), starts a :class:`distributed.LocalCluster`, fits Nuth & Kääb, writes the
aligned DEM with a progress bar, and computes exact statistics before and after.

The size is set by the environment variable ``XDEM_EXAMPLE_SIZE`` (pixels a side, default
2048 so that the example runs in well under a minute on a laptop); try
``XDEM_EXAMPLE_SIZE=20000 python plot_out_of_core_cluster.py``: 1.6 GB per DEM as
float32, with the same peak memory per chunk.
"""

# %%
# Settings and a local cluster
# ----------------------------
# The workers here are threads of this process (``processes=False``), so that the example
# also runs inside a notebook or a documentation build. In a script, worker *processes*
# (the default) isolate memory better; create the cluster under an
# ``if __name__ == "__main__":`` guard then, because the worker processes re-import the
# script. The per-worker memory limit is off: with threads it would measure the whole
# process.
import os
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from distributed import Client, LocalCluster

import xdem
import xdem.coreg
import xdem.stats
from xdem.examples.synthetic import generate_pair

size = int(os.environ.get("XDEM_EXAMPLE_SIZE", "2048"))
chunks = max(512, min(2048, size // 4 // 512 * 512))
print(f"pair of {size} x {size} pixels, chunks of {chunks} x {chunks}")

cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False, memory_limit=0, dashboard_address=None)
client = Client(cluster)
print(client)

workdir = tempfile.TemporaryDirectory(prefix="xdem-example-")
folder = Path(workdir.name)
timings = {}

# %%
# Generate a large pair with a known shift
# ----------------------------------------
# ``tba(x, y) = terrain(x - dx, y - dy) + dz`` exactly (the terrain is an analytic function
# of the coordinates, no resampling); the truth gives the translation to *apply* to
# ``tba``: ``(-dx, -dy, -dz)``. Both DEMs are written as COGs, out of core, by the workers.
t0 = time.perf_counter()
truth = generate_pair(folder / "pair", size=size, shift=(3.0, -2.0, 1.5), chunks=chunks)
timings["generate pair (2 COGs)"] = time.perf_counter() - t0
print({k: truth[k] for k in ("shape", "resolution", "crs", "shift_x", "shift_y", "shift_z")})

# %%
# Open lazily
# -----------
ref = xdem.open_dem(truth["ref"], chunks=chunks)
tba = xdem.open_dem(truth["tba"], chunks=chunks)
print(f"{ref.data.npartitions} chunks per DEM; {ref.nbytes / 2**20:.0f} MiB per DEM if it were loaded")

# %%
# Fit Nuth & Kääb
# ---------------
# The fit draws a reproducible subsample of valid pixels (two passes over the pair, the
# second computing slope and aspect of the reference chunk by chunk), then reads small
# windows of ``tba`` around the sampled pixels; the iterations run in memory on those.
t0 = time.perf_counter()
nk = xdem.coreg.NuthKaab(subsample=200_000).fit(ref, tba)
timings["fit Nuth & Kääb"] = time.perf_counter() - t0
fitted = np.array(nk.to_translations())
expected = np.array([truth["shift_x"], truth["shift_y"], truth["shift_z"]])
print("fitted:  ", np.round(fitted, 4), f"({nk.n_iterations_} iterations, {nk.passes_} passes over the data)")
print("expected:", expected)
assert np.all(np.abs(fitted - expected) < 0.05)

# %%
# Apply and write a COG, with progress
# ------------------------------------
# ``apply`` is lazy; :func:`xdem.write_cog` streams the blocks into a tiled temporary
# GTiff (the workers compute the blocks and send them back, a few per worker at a time, and
# this process writes them; the progress is a count of the blocks written), then GDAL copies
# it into a Cloud-Optimized GeoTIFF.
t0 = time.perf_counter()
aligned_path = xdem.write_cog(nk.apply(tba), folder / "aligned.tif", progress=True).path
timings["apply + write COG"] = time.perf_counter() - t0
print(f"\nwrote {aligned_path.name}: {aligned_path.stat().st_size / 2**20:.1f} MiB")

# %%
# Exact statistics before and after
# ---------------------------------
# The exact median and NMAD of ``dh`` are computed out of core by histogram refinement
# (a few passes over the pair, see :mod:`xdem.stats`). Reading the written COG avoids
# recomputing the resampling at every pass.
t0 = time.perf_counter()
aligned = xdem.open_dem(aligned_path, chunks=chunks)
before = xdem.stats.robust_summary(tba - ref)
after = xdem.stats.robust_summary(aligned - ref)
timings["exact statistics"] = time.perf_counter() - t0
for name, s in (("before", before), ("after", after)):
    print(f"{name:>6}: median {s['median']:+.4f} m, NMAD {s['nmad']:.4f} m, {s['count']} valid pixels")

# %%
# Time and memory
# ---------------
for step, seconds in timings.items():
    print(f"{step:>24}: {seconds:6.1f} s")
try:
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(f"peak memory of this process so far: {peak:.0f} MiB")
except ImportError:  # Windows
    pass

# %%
# Decimated maps
# --------------
# A coarsened view (block means, computed on the cluster) is small enough to plot.
k = max(1, size // 512)
views = [(d.coarsen(y=k, x=k, boundary="trim").mean()).compute() for d in (tba - ref, aligned - ref)]
fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), constrained_layout=True)
for ax, view, title, vmax in zip(axes, views, ("before: tba - ref", "after: aligned - ref"), (8.0, 0.1)):
    im = ax.imshow(view, cmap="RdBu", vmin=-vmax, vmax=vmax)
    ax.set_title(f"{title} (means of {k} x {k} pixels)")
    ax.set_xticks([])
    ax.set_yticks([])
    fig.colorbar(im, ax=ax, label="dh (m)", shrink=0.85)
plt.show()

# %%
# Clean up
# --------
client.close()
cluster.close()
workdir.cleanup()
