"""Track which files a lazy array reads, so writers can refuse to overwrite their own inputs.

When :func:`xdem.open_dem` opens a file it calls :func:`register_source`, which remembers the
names of the dask graph layers that read that file. :func:`find_sources` later walks the layer
names of any lazy DataArray or dask array and returns every registered file it depends on.
Layer names survive every lazy operation (arithmetic, slicing, ``map_blocks``...), so the
answer holds for arrays derived from opened DEMs too. Persisted or computed arrays no longer
depend on the file and are (correctly) reported as having no source.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # annotations only
    import dask.array as da
    import numpy as np
    import xarray as xr

__all__ = ["register_source", "find_sources", "register_region_reader", "region_reader", "RegionReader"]


class RegionReader(Protocol):
    """A picklable callable giving any region of a 2-D lazy array straight from its file:
    ``reader(rows, cols)`` returns the values the array's own chunks hold there."""

    def __call__(self, rows: slice, cols: slice, /) -> np.ndarray: ...


_LOCK = threading.Lock()
#: graph layer name -> resolved paths of the files that layer reads
_REGISTRY: dict[str, set[Path]] = {}
#: dask array name -> a callable ``(rows: slice, cols: slice) -> ndarray`` giving any region of
#: that array straight from its file (see :func:`register_region_reader`)
_READERS: dict[str, RegionReader] = {}


def _resolve(path: str | os.PathLike) -> Path:
    return Path(os.path.abspath(os.fspath(path))).resolve()


def _graph(obj: Any) -> Any:
    """The dask graph of ``obj`` (DataArray, Dataset or dask collection), or ``None``."""
    data = getattr(obj, "data", None)
    if data is not None and hasattr(data, "__dask_graph__") and not hasattr(obj, "__dask_layers__"):
        obj = data  # an xarray DataArray: look at its dask array
    getter = getattr(obj, "__dask_graph__", None)
    return getter() if callable(getter) else None


def _layer_names(obj: Any) -> tuple[set[str], set[str]]:
    """``(all layer names, root layer names)`` of ``obj``'s graph."""
    graph = _graph(obj)
    if graph is None:
        return set(), set()
    layers = getattr(graph, "layers", None)
    if layers is None:  # a low-level graph: fall back on the key names
        names = {k[0] if isinstance(k, tuple) else str(k) for k in graph}
        return names, names
    deps = getattr(graph, "dependencies", {})
    roots = {name for name in layers if not deps.get(name)}
    return set(layers), roots


def register_source(arr: da.Array | xr.DataArray, path: str | os.PathLike) -> None:
    """Record that the lazy array ``arr`` reads the file ``path``.

    The array's own name and the root layers of its graph (those reading the file) are
    remembered; any array later derived from ``arr`` will be found by :func:`find_sources`.

    Parameters
    ----------
    arr
        A dask array (or DataArray backed by one) that reads ``path``.
    path
        The file it reads.

    Examples
    --------
    >>> import dask.array as da
    >>> a = da.zeros((4, 4), chunks=2)
    >>> register_source(a, "dem.tif")
    >>> [p.name for p in find_sources(a + 1)]
    ['dem.tif']
    """
    _, roots = _layer_names(arr)
    names = set(roots)
    name = getattr(getattr(arr, "data", arr), "name", None)
    if isinstance(name, str):
        names.add(name)
    resolved = _resolve(path)
    with _LOCK:
        for n in names:
            _REGISTRY.setdefault(n, set()).add(resolved)


def find_sources(obj: object) -> set[Path]:
    """Resolved paths of every registered file the lazy ``obj`` depends on.

    Parameters
    ----------
    obj
        A DataArray, a dask array or any dask collection. Numpy-backed objects have none.

    Returns
    -------
    set of pathlib.Path
        Possibly empty.

    Examples
    --------
    >>> import xdem
    >>> dem = xdem.open_dem(xdem.examples.get_path("lidar"))
    >>> [p.name for p in find_sources(dem * 2)]
    ['lidar_dem.tif']
    """
    names, _ = _layer_names(obj)
    out: set[Path] = set()
    with _LOCK:
        for n in names:
            out |= _REGISTRY.get(n, set())
    return out


def register_region_reader(arr: da.Array | xr.DataArray, reader: RegionReader) -> None:
    """Record that any region of the 2-D lazy array ``arr`` can be read by ``reader(rows, cols)``.

    ``reader`` (picklable: it travels in dask tasks) must return exactly the values the array's
    own chunks hold there. A runner that needs arbitrary windows of ``arr`` (the warp: each
    output chunk reads the window its preimage needs) then reads them from the file in its own
    tasks instead of depending on ``arr``'s chunks, which dask would otherwise keep in memory
    until every window that overlaps them is done (a front of whole chunk rows).
    """
    name = getattr(getattr(arr, "data", arr), "name", None)
    if isinstance(name, str):
        with _LOCK:
            _READERS[name] = reader


def region_reader(arr: da.Array | xr.DataArray) -> RegionReader | None:
    """The reader registered for exactly this lazy array (not one derived from it), or ``None``.

    Examples
    --------
    >>> import xdem
    >>> dem = xdem.open_dem(xdem.examples.get_path("lidar"))
    >>> read = region_reader(dem)
    >>> bool((read(slice(0, 2), slice(0, 3)) == dem.values[:2, :3]).all())
    True
    >>> region_reader(dem + 1) is None
    True
    """
    name = getattr(getattr(arr, "data", arr), "name", None)
    with _LOCK:
        return _READERS.get(name) if isinstance(name, str) else None
