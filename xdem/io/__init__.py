"""Input and output: lazy opening, grids, pair alignment, out-of-core COG and Zarr writing."""

from xdem.io.cog import write_cog
from xdem.io.open import auto_chunks, open_dem
from xdem.io.zarr import write_zarr

__all__ = ["open_dem", "auto_chunks", "write_cog", "write_zarr"]
