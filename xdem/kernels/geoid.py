"""Geoid undulation of one chunk (plain numpy and pyproj; nothing of xdem).

:func:`undulation_block` computes the pixel centres' geodetic longitude and latitude of one
block from the grid's affine transform (pyproj: the inverse of the DEM's projection, no datum
shift) and the undulation N of a PROJ geoid grid there (PROJ's ``vgridshift``, bilinear
interpolation of the grid, by its absolute path: PROJ never looks for it on the network).

With ``interpolation="spline"`` the undulation is instead NGA's interpolation of its geoid grids
(the EGM96 distribution's ``INTPT`` program: a bicubic spline through the 6 x 6 grid nodes around
each point), computed here (:func:`spline_undulation`): the grid rows a block needs are read with
rasterio, and the spline is the tensor product of two 1-D not-a-knot cubic splines through 6
nodes, i.e. 36 fixed weights per point. PROJ has no such option (its ``vgridshift`` is bilinear,
up to 5.6 cm away from NGA's published test values; the spline is within 3 mm of them).

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

import functools
import threading
from collections.abc import Sequence

import numpy as np
import pyproj
import rasterio
from rasterio.windows import Window
from scipy.interpolate import make_interp_spline

__all__ = ["undulation_block", "pixel_lonlat", "spline_undulation", "spline_weights", "INTERPOLATIONS"]

#: How a geoid grid is interpolated: PROJ's bilinear ``vgridshift``, or NGA's 6 x 6 bicubic spline.
INTERPOLATIONS = ("bilinear", "spline")
_SPLINE_NODES = 6  # NGA's INTPT window: the point lies between nodes 2 and 3 of 0..5

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


def spline_weights(u: np.ndarray) -> np.ndarray:
    """The 6 weights, shape ``(n, 6)``, of the not-a-knot cubic spline through 6 equally spaced
    nodes ``0..5`` evaluated at ``2 + u`` (``u`` in [0, 1): between nodes 2 and 3).

    Examples
    --------
    >>> w = spline_weights(np.array([0.0, 0.5]))
    >>> np.abs(np.round(w[0], 12)).tolist()  # at a node, that node's value
    [0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    >>> round(float(w[1] @ np.arange(6.0) ** 3), 12)  # cubics are reproduced exactly: 2.5 ** 3
    15.625
    """
    u = np.asarray(u, dtype=np.float64)[:, None]
    c = _spline_coefficients()  # (4, 6): each weight is a cubic in u on [2, 3)
    weights: np.ndarray = ((c[0] * u + c[1]) * u + c[2]) * u + c[3]
    return weights


@functools.cache
def _spline_coefficients() -> np.ndarray:
    """Coefficients (highest power first) of the 6 cardinal not-a-knot splines on the interval [2, 3)."""
    cardinal = make_interp_spline(np.arange(_SPLINE_NODES, dtype=np.float64), np.eye(_SPLINE_NODES), k=3)
    at = np.array([0.0, 1 / 3, 2 / 3, 1.0])
    return np.linalg.solve(np.vander(at, 4), np.asarray(cardinal(2.0 + at)))


def _start_and_offset(f: np.ndarray, n: int, wraps: bool) -> tuple[np.ndarray, np.ndarray]:
    """First node of each point's 6-node window, and the point's position in it minus 2."""
    start = np.floor(f).astype(np.int64) - 2
    if not wraps:  # near the grid's edge the window stays inside it (the spline then extrapolates a little)
        start = np.clip(start, 0, n - _SPLINE_NODES)
    return start, f - start - 2.0


def spline_undulation(lon: np.ndarray, lat: np.ndarray, grid: str) -> np.ndarray:
    """NGA's bicubic spline interpolation of geoid grid ``grid`` at ``lon``, ``lat`` (degrees).

    Reads only the grid rows the points need (every column: a row of the 2.5' EGM2008 grid is
    35 kB), so memory is that of the block. Longitudes wrap where the grid spans 360 degrees;
    latitudes outside the grid give NaN, and so do NaN coordinates.
    """
    lon, lat = np.asarray(lon, dtype=np.float64), np.asarray(lat, dtype=np.float64)
    out = np.full(lon.shape, np.nan)
    with rasterio.open(grid) as src:
        t, (rows, cols) = src.transform, src.shape
        x0, y0 = t.c + t.a / 2, t.f + t.e / 2  # the first node's centre
        wraps = abs(cols * t.a - 360.0) < 1e-6
        fi, fj = (lat - y0) / t.e, (lon - x0) / t.a
        if wraps:
            fj = np.mod(fj, cols)
        ok = np.isfinite(fi) & np.isfinite(fj) & (fi >= -1e-9) & (fi <= rows - 1 + 1e-9)
        if not wraps:
            ok &= (fj >= -1e-9) & (fj <= cols - 1 + 1e-9)
        if not ok.any():
            return out
        i0, u = _start_and_offset(fi[ok], rows, wraps=False)
        j0, v = _start_and_offset(fj[ok], cols, wraps)
        first, last = int(i0.min()), int(i0.max()) + _SPLINE_NODES
        nodes = src.read(1, window=Window(0, first, cols, last - first)).astype(np.float64)
    wu, wv = spline_weights(u), spline_weights(v)
    value = np.zeros(u.shape)
    for a in range(_SPLINE_NODES):
        inner = np.zeros(u.shape)
        for b in range(_SPLINE_NODES):
            inner += wv[:, b] * nodes[i0 - first + a, (j0 + b) % cols]
        value += wu[:, a] * inner
    out[ok] = value
    return out


def undulation_block(shape: tuple[int, int], offset: tuple[int, int], *, transform: Sequence[float], crs_wkt: str,
                     grids: Sequence[tuple[str, float]], interpolation: str = "bilinear") -> np.ndarray:
    """Sum of ``sign * N_grid`` at the pixel centres of a block (float64, NaN outside a grid).

    ``grids`` pairs absolute grid paths with a sign: ``((egm96, +1.0),)`` is the undulation of
    EGM96; ``((egm96, +1.0), (egm08, -1.0))`` converts EGM96 heights to EGM2008 heights.
    ``interpolation`` is one of :data:`INTERPOLATIONS`.
    """
    out = np.zeros(shape, dtype=np.float64)
    if not grids:
        return out
    lon, lat = pixel_lonlat(shape, offset, transform=transform, crs_wkt=crs_wkt)
    for grid, sign in grids:
        if interpolation == "spline":
            n = spline_undulation(lon.ravel(), lat.ravel(), grid)
        else:
            pipe = _cached(("grid", grid), lambda g=grid: _grid_pipeline(g))
            n = np.asarray(pipe.transform(lon.ravel(), lat.ravel(), np.zeros(lon.size))[2], dtype=np.float64)
            n[~np.isfinite(n) | (np.abs(n) > 1e30)] = np.nan  # PROJ's HUGE_VAL: outside the grid
        out += sign * n.reshape(shape)
    return out
