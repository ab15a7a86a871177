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
    one of them reaching beyond the DEM (so that ``Vector.crop(dem, clip=True)`` matters);
    their names are in ``NAME``, as in upstream's RGI outlines.
``"lidar_outlines_2010"``
    The same outlines at the later epoch: each shrunk to 90 % of its radius.
``"lidar_tba_dem_coreg"``
    ``lidar_tba_dem`` as a perfect coregistration leaves it, with the errors a real DEM has:
    the reference plus the thinning plus known errors :data:`ERRORS` (1-sigma
    ``0.05 + 0.01 * slope`` m, slope in degrees, spatially correlated: a 20 % nugget and a
    Gaussian correlation of effective range 40 m; :func:`xdem.examples.glaciers.standard_error_field`).
``"lidar_ddem"``
    ``lidar_ref_dem - lidar_tba_dem_coreg``: minus the thinning, minus the errors.

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
import rasterio
from shapely.geometry import Polygon

from xdem.errors import OutputError
from xdem.examples._files import DEFAULT_SHIFT, get_path
from xdem.examples.glaciers import NoiseModel, standard_error_field
from xdem.examples.pair import _make_pair_arrays, _write_tif  # the same resampling as example_pair
from xdem.io.atomic import move_into_place
from xdem.io.grid import block_xy

if TYPE_CHECKING:
    from affine import Affine
    from rasterio.crs import CRS

__all__ = ["Blob", "OUTLINES", "thinning", "outline_polygons", "write_standins", "TRUTH", "ERRORS", "error_field"]

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


#: The errors of ``lidar_tba_dem_coreg`` (and so of ``lidar_ddem``), on the 1 m lidar grid.
ERRORS = NoiseModel(sigma0=0.05, slope_gain=0.01, range=40.0, nugget=0.2)
_ERROR_SEED = 27


def outline_polygons(n: int = 90, scale: float = 1.0) -> list[list[tuple[float, float]]]:
    """Each outline as a closed ring of ``n`` vertices (counter-clockwise), its radius times ``scale``."""
    theta = np.linspace(0.0, 2.0 * np.pi, n, endpoint=False)
    rings = []
    for blob in OUTLINES:
        rad = scale * blob.radius(theta)
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


def error_field(ref: np.ndarray, transform: Affine) -> np.ndarray:
    """The errors of ``lidar_tba_dem_coreg`` (m) on the reference's grid: :data:`ERRORS`' spread
    at the reference's slope (central differences) times its keyed correlated field."""
    res = abs(transform.a)
    gy, gx = np.gradient(ref.astype(np.float64), res)
    slope = np.degrees(np.arctan(np.hypot(gx, gy)))
    z = standard_error_field(ref.shape, resolution=res, noise=ERRORS, seed=_ERROR_SEED)
    return ERRORS.sigma(slope) * z


def _coreg_arrays() -> tuple[np.ndarray, np.ndarray]:
    """``lidar_tba_dem_coreg`` and ``lidar_ddem`` (float32) on the reference's grid."""
    ref, transform, _ = _read_reference()
    x, y = block_xy(transform, 0, 0, ref.shape)
    coreg = ref + thinning(x[None, :], y[:, None]) + error_field(ref, transform)
    return coreg.astype(np.float32), (ref - coreg).astype(np.float32)


def _read_reference() -> tuple[np.ndarray, Affine, CRS]:
    with rasterio.open(get_path("lidar")) as src:
        return src.read(1).astype(np.float64), src.transform, src.crs


def _write_outlines(path: Path, scale: float, crs: CRS) -> None:
    names = [b.name for b in OUTLINES]
    frame = gpd.GeoDataFrame(
        {"NAME": names, "thinning_centre_m": [-6.0] * 3, "thinning_edge_m": [-1.0] * 3},
        geometry=[Polygon(r) for r in outline_polygons(scale=scale)], crs=crs,
    )
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=".gpkg", dir=path.parent)
    os.close(fd)
    os.remove(tmp)  # the GPKG driver creates the file
    try:
        frame.to_file(tmp, driver="GPKG", layer="outlines")
        move_into_place(tmp, path, overwrite=True)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_standins(folder: str | os.PathLike) -> dict[str, Path]:
    """Write the stand-in files to ``folder`` (as bundled); returns their paths by name.

    Examples
    --------
    >>> import tempfile
    >>> sorted(p.name for p in write_standins(tempfile.mkdtemp()).values())  # doctest: +NORMALIZE_WHITESPACE
    ['lidar_ddem.tif', 'lidar_outlines.gpkg', 'lidar_outlines_2010.gpkg', 'lidar_tba_dem.tif',
     'lidar_tba_dem_coreg.tif']
    """
    folder = Path(folder)
    names = ("lidar_tba_dem", "lidar_tba_dem_coreg", "lidar_ddem")
    paths = {name: folder / f"{name}.tif" for name in names}
    paths |= {name: folder / f"{name}.gpkg" for name in ("lidar_outlines", "lidar_outlines_2010")}
    if not folder.is_dir():
        raise OutputError(f"'{folder}' is not a folder; create it or choose another")
    tba, transform, crs = _tba_array()
    _write_tif(paths["lidar_tba_dem"], tba, transform, crs)
    coreg, ddem = _coreg_arrays()
    _write_tif(paths["lidar_tba_dem_coreg"], coreg, transform, crs)
    _write_tif(paths["lidar_ddem"], ddem, transform, crs)
    _write_outlines(paths["lidar_outlines"], 1.0, crs)
    _write_outlines(paths["lidar_outlines_2010"], 0.9, crs)
    return paths

