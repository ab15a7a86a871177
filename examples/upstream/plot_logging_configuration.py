"""
Configuring verbosity level, as upstream's example
==================================================

xdem logs through Python's :mod:`logging` under the ``"xdem"`` logger: with the level set to
``INFO``, a coregistration reports its steps; the default (``WARNING``) prints only
warnings. As in upstream's example, the messages go both to the console and to a file
(here in a temporary folder, removed at the end).
"""

import logging
import shutil
import tempfile
from pathlib import Path

import xdem

# %%
# Messages of level INFO and above, to the console and to a log file.
folder = Path(tempfile.mkdtemp(prefix="xdem-example-"))
log_file = folder / "xdem_example.log"
logging.basicConfig(
    level=logging.INFO,
    format="%(asctime)s - %(name)s - %(levelname)s - %(message)s",
    datefmt="%Y-%m-%d %H:%M:%S",
    handlers=[logging.FileHandler(log_file), logging.StreamHandler()],
    force=True,
)

# %%
# A coregistration run now reports what it does.
reference_dem = xdem.DEM(xdem.examples.get_path("lidar_ref_dem"))
dem_to_be_aligned = xdem.DEM(xdem.examples.get_path("lidar_tba_dem"))
coreg = xdem.coreg.NuthKaab()
aligned_dem = coreg.fit_and_apply(reference_dem, dem_to_be_aligned)
n_info = sum(" - INFO - " in line for line in log_file.read_text().splitlines())
print(f"{n_info} INFO lines in {log_file.name}")
assert n_info > 0

# %%
# Back to errors only: the same run is silent.
logging.basicConfig(level=logging.ERROR, handlers=[logging.FileHandler(log_file, mode="w")], force=True)
aligned_dem = coreg.fit_and_apply(reference_dem, dem_to_be_aligned)
logging.shutdown()
print(f"{len(log_file.read_text().splitlines())} lines logged at level ERROR")
assert log_file.read_text() == ""
shutil.rmtree(folder)
