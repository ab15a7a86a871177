"""Input and output: lazy opening, grids, pair alignment, out-of-core COG and Zarr writing.

The package is lazy (PEP 562): ``from xdem.io import open_dem`` imports :mod:`xdem.io.open`
when that name is first asked for, so a light sub-module such as :mod:`xdem.io.atomic` (which
every command runs in) is imported without rasterio, xarray or dask.array.

Examples
--------
>>> from xdem.io import open_dem, write_cog
>>> open_dem.__module__, write_cog.__module__
('xdem.io.open', 'xdem.io.cog')
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the names as the type checker sees them; at run time: __getattr__
    from xdem.io.cog import write_cog
    from xdem.io.open import auto_chunks, open_dem
    from xdem.io.zarr import write_zarr

__all__ = ["open_dem", "auto_chunks", "write_cog", "write_zarr"]

#: Public name -> the sub-module defining it (imported on first use).
_HOMES = {"open_dem": "xdem.io.open", "auto_chunks": "xdem.io.open", "write_cog": "xdem.io.cog",
          "write_zarr": "xdem.io.zarr"}


def __getattr__(name: str) -> object:
    if name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
