"""
Save a fitted coregistration and apply it to other DEMs
=======================================================

A fitted coregistration is small: a few numbers. :meth:`xdem.coreg.Coreg.to_json` saves
the method, its parameters and what it learned; :meth:`xdem.coreg.Coreg.from_json` loads
it back, fitted, and ``apply`` corrects any other DEM with it: another product of the same
acquisition, a DEM on another grid, or the same DEM later, without fitting again.
"""

# %%
# Fit on files and save
# ---------------------
# :func:`xdem.examples.write_example_pair` writes the bundled pair (known shift) as
# GeoTIFFs, here with a small tilt added to ``tba``. The method is
# :class:`~xdem.coreg.NuthKaabDeramp`: a horizontal shift and a planar ramp fitted jointly
# (pipelines such as ``NuthKaab() + Deramp()`` save and load the same way).
import json
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import xdem
import xdem.coreg
import xdem.examples
import xdem.stats

workdir = tempfile.TemporaryDirectory(prefix="xdem-example-")
folder = Path(workdir.name)
files = xdem.examples.write_example_pair(folder / "pair", tilt=(0.001, 0.0))
print({k: Path(v).name for k, v in files.items() if k != "truth"})

coreg = xdem.coreg.NuthKaabDeramp(poly_order=1)
coreg.fit(files["ref"], files["tba"])
json_path = folder / "coreg.json"
coreg.to_json(json_path)
doc = json.loads(json_path.read_text())
print("method:", doc["method"])
print("params:", doc["params"])
print("learned:", {k: doc["learned"][k] for k in ("shift_x_", "shift_y_", "coefs_", "terms_", "center_", "scale_")})
print("true shift to apply:", files["truth"]["shift_x"], files["truth"]["shift_y"])

# %%
# Load and re-apply
# -----------------
# The loaded object is fitted: ``apply`` works straight away and gives exactly the same
# (lazy) result as the original.
loaded = xdem.coreg.Coreg.from_json(json_path)
print(type(loaded).__name__, "fitted:", loaded.is_fitted)
print(loaded)

tba = xdem.open_dem(files["tba"])
np.testing.assert_array_equal(loaded.apply(tba).values, coreg.apply(tba).values)
print("same corrected DEM from the saved and the original coregistration")

# %%
# Apply to another DEM of the same acquisition
# --------------------------------------------
# Say the same sensor also produced a noisier DEM with gaps, misaligned the same way (here
# a second example pair with the same shift and tilt, noise and nodata holes). The saved
# correction aligns it without a new fit. ``apply`` works on the DEM's own grid.
ref2, other, _ = xdem.examples.example_pair(tilt=(0.001, 0.0), noise=0.3, holes=8, random_state=3)
corrected = loaded.apply(other)  # lazy
before = xdem.stats.robust_summary(other - ref2)
after = xdem.stats.robust_summary(corrected - ref2)
print(f"other DEM before: median {before['median']:+.3f} m, NMAD {before['nmad']:.3f} m")
print(f"other DEM after:  median {after['median']:+.3f} m, NMAD {after['nmad']:.3f} m")

fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), constrained_layout=True)
for ax, dh, title, vmax in ((axes[0], other - ref2, "other DEM - ref, before", 5.0),
                            (axes[1], corrected - ref2, "after the saved correction", 1.0)):
    im = ax.imshow(dh.values, cmap="RdBu", vmin=-vmax, vmax=vmax)
    ax.set_title(title)
    ax.set_xticks([])
    ax.set_yticks([])
    fig.colorbar(im, ax=ax, label="dh (m)", shrink=0.85)
plt.show()

# %%
# Translations only: move the grid instead of resampling
# ------------------------------------------------------
# A purely affine coregistration (a translation: :class:`~xdem.coreg.NuthKaab`,
# :class:`~xdem.coreg.VerticalShift` or pipelines of them) can also be applied with
# ``resample=False``: the data stay exact and the geotransform moves by the fitted shift.
# ``to_json()`` without a path returns the JSON text, which ``from_json`` also accepts.
ref3, tba3, truth3 = xdem.examples.example_pair()
text = xdem.coreg.NuthKaab().fit(ref3, tba3).to_json()
nk = xdem.coreg.Coreg.from_json(text)
moved = nk.apply(tba3, resample=False)
print("fitted shift:", np.round(nk.to_translations(), 3), "true:", (truth3["shift_x"], truth3["shift_y"], truth3["shift_z"]))
print("upper-left corner before:", tba3.rio.transform().c, tba3.rio.transform().f)
print("upper-left corner after: ", moved.rio.transform().c, moved.rio.transform().f)

workdir.cleanup()
