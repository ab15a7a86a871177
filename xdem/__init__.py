"""xdem: out-of-core coregistration of digital elevation models on dask.

Open DEMs lazily with :func:`open_dem`, align them with the classes of
:mod:`xdem.coreg`, and write the result with :func:`write_cog` or :func:`write_zarr`.

The names below are imported on first use (:pep:`562`), so ``import xdem`` and the command
line's ``xdem --help`` start without loading dask.array, pandas, numba or matplotlib; every
name of ``__all__`` is importable as before (``xdem.open_dem``, ``from xdem import coreg``,
``import xdem.coreg``), and so is any other sub-module as an attribute (``xdem.io``, ``xdem.stats``).

Examples
--------
>>> import xdem
>>> xdem.__version__
'0.1.0'
>>> xdem.open_dem.__module__
'xdem.io.open'
>>> sorted(set(xdem.__all__) - set(dir(xdem)))
[]
>>> xdem.stats.__name__
'xdem.stats'
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING

from xdem._version import __version__
from xdem.errors import InputError as _InputError  # tiny (no imports): the one line of a name not built yet

if TYPE_CHECKING:  # the lazy names, for type checkers and IDEs
    from xdem import coreg, errors, examples, spatialstats, terrain, vcrs, volume
    from xdem.ddem import dDEM
    from xdem.dem import DEM
    from xdem.demcollection import DEMCollection
    from xdem.io import open_dem, write_cog, write_zarr
    from xdem.io.grid import align_pair

__all__ = ["__version__", "DEM", "dDEM", "errors", "open_dem", "write_cog", "write_zarr", "align_pair", "coreg", "examples",
           "terrain", "spatialstats", "vcrs", "volume"]
__all__ += ["DEMCollection"]

#: Sub-packages imported on first access of ``xdem.<name>``.
_SUBMODULES = frozenset({"coreg", "errors", "examples", "spatialstats", "terrain", "volume", "vcrs"})
#: Functions imported on first access: name -> the module that defines it.
_FUNCTIONS = {"open_dem": "xdem.io", "write_cog": "xdem.io", "write_zarr": "xdem.io", "align_pair": "xdem.io.grid",
              "DEM": "xdem.dem", "dDEM": "xdem.ddem", "DEMCollection": "xdem.demcollection"}


def __getattr__(name: str) -> object:
    """Import a name of ``__all__`` on first use and keep it in the module (:pep:`562`)."""
    module = f"xdem.{name}" if name in _SUBMODULES else _FUNCTIONS.get(name)
    if module is not None and importlib.util.find_spec(module) is None:
        raise _InputError(f"upstream's xdem.{name} is not available here yet (issue 27)")
    if name in _SUBMODULES:
        value: object = importlib.import_module(f"xdem.{name}")
    elif name in _FUNCTIONS:
        value = getattr(importlib.import_module(_FUNCTIONS[name]), name)
    elif not name.startswith("__") and importlib.util.find_spec(f"xdem.{name}") is not None:
        value = importlib.import_module(f"xdem.{name}")  # another sub-module, as an eager import made it an attribute
    else:
        raise AttributeError(f"module 'xdem' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the lazy ones of ``__all__`` included."""
    return sorted(set(globals()) | set(__all__))
