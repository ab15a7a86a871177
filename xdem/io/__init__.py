"""Input and output: lazy opening, grids, pair alignment and out-of-core COG writing."""

from xdem.io.cog import write_cog
from xdem.io.open import auto_chunks, open_dem

__all__ = ["open_dem", "auto_chunks", "write_cog"]
