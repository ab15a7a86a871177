"""xdem: out-of-core coregistration of digital elevation models on dask.

Open DEMs lazily with :func:`open_dem`, align them with the classes of
:mod:`xdem.coreg`, and write the result with :func:`write_cog` or :func:`write_zarr`.
"""

from xdem import coreg, errors, examples, spatialstats, terrain
from xdem._version import __version__
from xdem.io import open_dem, write_cog, write_zarr
from xdem.io.grid import align_pair

__all__ = ["__version__", "errors", "open_dem", "write_cog", "write_zarr", "align_pair", "coreg", "examples", "terrain",
           "spatialstats"]
