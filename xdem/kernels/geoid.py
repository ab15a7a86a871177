"""Geoid undulation of one chunk (plain numpy and pyproj; nothing of xdem).

:func:`undulation_block` computes the pixel centres' geodetic longitude and latitude of one
block from the grid's affine transform (pyproj: the inverse of the DEM's projection, no datum
shift) and the undulation N of a PROJ geoid grid there (PROJ's ``vgridshift``, bilinear
interpolation of the grid, by its absolute path: PROJ never looks for it on the network).

Only strings and numbers cross the process boundary (the WKT of the CRS, the grid path): the
pyproj transformers are built in the worker, one per thread (a transformer is not shared
between threads), so the kernel runs under dask's threaded, process and distributed schedulers.

Examples
--------
>>> import numpy as np
>>> n = undulation_block((2, 3), (0, 0), transform=(0.25, 0.0, 10.0, 0.0, -0.25, 45.0),
...                      crs_wkt="EPSG:4326", grids=())
>>> n.shape, float(n.max())
((2, 3), 0.0)
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pyproj

__all__ = ["undulation_block", "pixel_lonlat"]

_LOCAL = threading.local()


def _cached(key: tuple[str, ...], build: object) -> pyproj.Transformer:
    """The transformer of ``key`` for this thread, built once by ``build()``."""
    cache: dict[tuple[str, ...], pyproj.Transformer] = _LOCAL.__dict__.setdefault("cache", {})
    if key not in cache:
        pyproj.network.set_network_enabled(active=False)  # our grids are local files: never download
        cache[key] = build()  # type: ignore[operator]
    return cache[key]


def _to_lonlat(crs_wkt: str) -> pyproj.Transformer:
    crs = pyproj.CRS.from_user_input(crs_wkt)
    geodetic = crs.geodetic_crs if crs.geodetic_crs is not None else pyproj.CRS.from_epsg(4326)
    return pyproj.Transformer.from_crs(crs, geodetic.to_2d(), always_xy=True, only_best=False)


def _grid_pipeline(grid: str) -> pyproj.Transformer:
    # multiplier=1: the output z is z + N, so a z of 0 gives N (the geoid above the ellipsoid)
    return pyproj.Transformer.from_pipeline(
        "+proj=pipeline +step +proj=unitconvert +xy_in=deg +xy_out=rad "
        f'+step +proj=vgridshift +grids="{grid}" +multiplier=1')  # quoted: a path may hold spaces


def pixel_lonlat(shape: tuple[int, int], offset: tuple[int, int], *, transform: Sequence[float],
                 crs_wkt: str) -> tuple[np.ndarray, np.ndarray]:
    """Geodetic longitude and latitude (degrees) of the pixel centres of a block.

    ``offset`` is the block's (row, column) in the whole grid, ``transform`` the grid's affine
    coefficients ``(a, b, c, d, e, f)`` (x = a col + b row + c).
    """
    a, b, c, d, e, f = (float(v) for v in transform[:6])
    rows = np.arange(offset[0], offset[0] + shape[0], dtype=np.float64)[:, None] + 0.5
    cols = np.arange(offset[1], offset[1] + shape[1], dtype=np.float64)[None, :] + 0.5
    x, y = a * cols + b * rows + c, d * cols + e * rows + f
    crs = pyproj.CRS.from_user_input(crs_wkt)
    if crs.is_geographic:
        return np.broadcast_to(x, shape).copy(), np.broadcast_to(y, shape).copy()
    lon, lat = _cached(("lonlat", crs_wkt), lambda: _to_lonlat(crs_wkt)).transform(
        np.broadcast_to(x, shape), np.broadcast_to(y, shape))
    return np.asarray(lon), np.asarray(lat)


def undulation_block(shape: tuple[int, int], offset: tuple[int, int], *, transform: Sequence[float], crs_wkt: str,
                     grids: Sequence[tuple[str, float]]) -> np.ndarray:
    """Sum of ``sign * N_grid`` at the pixel centres of a block (float64, NaN outside a grid).

    ``grids`` pairs absolute grid paths with a sign: ``((egm96, +1.0),)`` is the undulation of
    EGM96; ``((egm96, +1.0), (egm08, -1.0))`` converts EGM96 heights to EGM2008 heights.
    """
    out = np.zeros(shape, dtype=np.float64)
    if not grids:
        return out
    lon, lat = pixel_lonlat(shape, offset, transform=transform, crs_wkt=crs_wkt)
    for grid, sign in grids:
        pipe = _cached(("grid", grid), lambda g=grid: _grid_pipeline(g))
        n = np.asarray(pipe.transform(lon.ravel(), lat.ravel(), np.zeros(lon.size))[2], dtype=np.float64)
        n[~np.isfinite(n) | (np.abs(n) > 1e30)] = np.nan  # PROJ's HUGE_VAL: outside the grid
        out += sign * n.reshape(shape)
    return out
