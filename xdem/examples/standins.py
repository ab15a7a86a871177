"""The bundled stand-ins for upstream's Longyearbyen example files, and how they were made.

Upstream GlacioHack/xdem's examples open ``"longyearbyen_ref_dem"``, ``"longyearbyen_tba_dem"``
and ``"longyearbyen_glacier_outlines"``, downloaded there. Here the same roles are played by
bundled files made from the real lidar DEM, with a truth known exactly:

``"lidar_ref_dem"``
    The bundled lidar DEM itself (``"lidar"``).
``"lidar_tba_dem"``
    The reference moved by :data:`~xdem.examples.DEFAULT_SHIFT` (``dx, dy, dz``: cubic-spline
    resampling, as :func:`~xdem.examples.example_pair`), then lowered inside the outlines by a
    known "thinning" of 1 m at their edge to 6 m at their centre. On terrain outside the
    outlines, the correction to find is ``(-dx, -dy, -dz)`` = (-3.27, +1.64, -2.5) m.
``"lidar_outlines"``
    Three made-up polygons standing in for glacier outlines (unstable terrain), EPSG:26915,
    one of them reaching beyond the DEM (so that ``Vector.crop(dem, clip=True)`` matters).

:func:`write_standins` rebuilds the files; a test checks that the bundled ones are what it
writes.

Examples
--------
>>> from xdem.examples.standins import thinning, OUTLINES
>>> len(OUTLINES)
3
>>> float(thinning(np.array([OUTLINES[0].x]), np.array([OUTLINES[0].y]))[0])  # at a centre
-6.0
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import geopandas as gpd
import numpy as np
from shapely.geometry import Polygon

from xdem.errors import OutputError
from xdem.examples._files import DEFAULT_SHIFT
from xdem.examples.pair import _make_pair_arrays, _write_tif  # the same resampling as example_pair
from xdem.io.atomic import move_into_place
from xdem.io.grid import block_xy

if TYPE_CHECKING:
    from affine import Affine
    from rasterio.crs import CRS

__all__ = ["Blob", "OUTLINES", "thinning", "outline_polygons", "write_standins", "TRUTH"]

#: The correction a coregistration must find on stable terrain (to apply to ``lidar_tba_dem``).
TRUTH = {"shift_x": -DEFAULT_SHIFT[0], "shift_y": -DEFAULT_SHIFT[1], "shift_z": -DEFAULT_SHIFT[2]}


@dataclass(frozen=True)
class Blob:
    """A star-shaped polygon around ``(x, y)``: radius ``r * (1 + a sin(3 theta + phase))`` metres."""

    name: str
    x: float
    y: float
    r: float
    a: float
    phase: float

    def radius(self, theta: np.ndarray) -> np.ndarray:
        return self.r * (1.0 + self.a * np.sin(3.0 * theta + self.phase))


_X0, _Y0 = 429252.313370022, 5150885.424942633  # upper-left corner of the lidar DEM (1 m pixels)

#: The three outlines, in EPSG:26915 metres.
OUTLINES = (
    Blob("north glacier", _X0 + 110.0, _Y0 - 95.0, 55.0, 0.25, 0.3),
    Blob("east glacier", _X0 + 300.0, _Y0 - 230.0, 60.0, 0.2, 1.7),
    Blob("south glacier", _X0 + 120.0, _Y0 - 385.0, 50.0, 0.3, 2.9),  # reaches beyond the bottom edge
)


def thinning(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Elevation change (m, <= 0) at points ``(x, y)``: -1 at an outline's edge, -6 at its centre, 0 outside."""
    out = np.zeros(np.broadcast(x, y).shape)
    for blob in OUTLINES:
        dx, dy = x - blob.x, y - blob.y
        rho = np.hypot(dx, dy) / blob.radius(np.arctan2(dy, dx))
        inside = rho < 1.0
        out = np.where(inside, -1.0 - 5.0 * (1.0 - rho**2), out)
    return out


def outline_polygons(n: int = 90) -> list[list[tuple[float, float]]]:
    """Each outline as a closed ring of ``n`` vertices (counter-clockwise)."""
    theta = np.linspace(0.0, 2.0 * np.pi, n, endpoint=False)
    rings = []
    for blob in OUTLINES:
        rad = blob.radius(theta)
        ring = [(float(blob.x + r * np.cos(t)), float(blob.y + r * np.sin(t))) for r, t in zip(rad, theta)]
        rings.append([*ring, ring[0]])
    return rings


def _tba_array() -> tuple[np.ndarray, Affine, CRS]:
    _, tba, _, transform, crs, _ = _make_pair_arrays(
        name="lidar", shift_x=DEFAULT_SHIFT[0], shift_y=DEFAULT_SHIFT[1], shift_z=DEFAULT_SHIFT[2], mode="resample",
        tilt=None, noise=0.0, holes=0, random_state=0,
    )
    x, y = block_xy(transform, 0, 0, tba.shape)
    return (tba + thinning(x[None, :], y[:, None])).astype(np.float32), transform, crs


def write_standins(folder: str | os.PathLike) -> dict[str, Path]:
    """Write ``lidar_tba_dem.tif`` and ``lidar_outlines.gpkg`` to ``folder`` (as bundled).

    Examples
    --------
    >>> import tempfile
    >>> sorted(p.name for p in write_standins(tempfile.mkdtemp()).values())
    ['lidar_outlines.gpkg', 'lidar_tba_dem.tif']
    """
    folder = Path(folder)
    paths = {"lidar_tba_dem": folder / "lidar_tba_dem.tif", "lidar_outlines": folder / "lidar_outlines.gpkg"}
    if not folder.is_dir():
        raise OutputError(f"'{folder}' is not a folder; create it or choose another")
    tba, transform, crs = _tba_array()
    _write_tif(paths["lidar_tba_dem"], tba, transform, crs)
    frame = gpd.GeoDataFrame(
        {"name": [b.name for b in OUTLINES], "thinning_centre_m": [-6.0] * 3, "thinning_edge_m": [-1.0] * 3},
        geometry=[Polygon(r) for r in outline_polygons()], crs=crs,
    )
    fd, tmp = tempfile.mkstemp(prefix=".lidar_outlines-", suffix=".gpkg", dir=folder)
    os.close(fd)
    os.remove(tmp)  # the GPKG driver creates the file
    try:
        frame.to_file(tmp, driver="GPKG", layer="outlines")
        move_into_place(tmp, paths["lidar_outlines"], overwrite=True)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return paths

