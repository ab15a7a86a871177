"""Ground tracks of points over the analytic terrain of the tests, shared by the tests of
points (reading, evaluation, fits on points, the CLI).

Truth: :class:`truth.SineTerrain` is exact anywhere, so points along ground tracks carry the
true elevation at their exact positions, and :func:`truth.dem_of` gives a DEM of the same
terrain moved by a known translation (the shift to apply to that DEM is its negative).
"""

from __future__ import annotations

import geopandas as gpd
import numpy as np
import xarray as xr
from affine import Affine
from truth import SineTerrain, dem_of

CRS = "EPSG:32633"
X0, Y0 = 500_000.0, 4_000_000.0
RES = 5.0
SIZE = 1000  # 5 km
TRANSFORM = Affine(RES, 0.0, X0, 0.0, -RES, Y0 + SIZE * RES)
TERRAIN = SineTerrain(crs=CRS, origin=(X0, Y0))


def tracks(n_tracks: int = 12, beams: int = 3, spacing: float = 19.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Twelve 3-beam ground tracks crossing the 5 km DEM: near north-south lines (headings
    within 15 degrees), beams 90 m apart across track, a point every ``spacing`` metres:
    about 9000 points, all strictly inside the DEM."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    along = np.arange(60.0, SIZE * RES - 60.0, spacing)
    for k in range(n_tracks):
        heading = np.radians(rng.uniform(-15.0, 15.0))
        cx = X0 + (k + 0.5) * SIZE * RES / n_tracks
        for b in range(beams):
            off = (b - 1) * 90.0
            t = along - SIZE * RES / 2
            x = cx + off * np.cos(heading) + t * np.sin(heading)
            y = Y0 + SIZE * RES / 2 - off * np.sin(heading) + t * np.cos(heading)
            keep = (x > X0 + 30) & (x < X0 + SIZE * RES - 30)
            xs.append(x[keep])
            ys.append(y[keep])
    return np.concatenate(xs), np.concatenate(ys)


def noisy(z: np.ndarray, seed: int = 1) -> np.ndarray:
    """``z`` + N(0, 0.3 m), and 3 % blunders of +-25 m."""
    rng = np.random.default_rng(seed)
    out = z + rng.normal(0.0, 0.3, len(z))
    idx = rng.choice(len(z), size=int(0.03 * len(z)), replace=False)
    out[idx] += rng.choice([-25.0, 25.0], size=len(idx))
    return out


def track_gdf() -> gpd.GeoDataFrame:
    """The tracks' points as a GeoDataFrame: ``h`` exact, ``h_noisy`` the noisy copy."""
    x, y = tracks()
    z = TERRAIN(x, y)
    return gpd.GeoDataFrame({"h": z, "h_noisy": noisy(z)}, geometry=gpd.points_from_xy(x, y), crs=CRS)


def shifted(move: tuple[float, float, float], chunks: int = 256) -> xr.DataArray:
    return dem_of(TERRAIN, crs=CRS, transform=TRANSFORM, shape=(SIZE, SIZE), move=move, chunks=chunks)


MOVES = [(7.3, -4.1, 2.0), (-11.6, 8.45, -3.5), (0.6, 1.3, 0.25)]
