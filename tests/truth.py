"""Known truth for frame tests: a terrain that can be evaluated at any point, and DEMs of it
(shifted or not) on grids of any CRS, built pixel by pixel from exact coordinates.

``SineTerrain`` is a sum of plane sinusoids with a power-law spectrum (amplitude proportional
to wavelength, wavelengths 200 m to 3 km): rough enough for Nuth & Kääb, smooth at 10 m pixels
so that bilinear resampling noise stays at the centimetre level, and exact anywhere, so a DEM
of it moved in one CRS and sampled on a grid of another CRS has exact values.
"""

from __future__ import annotations

import math

import numpy as np
import xarray as xr
from affine import Affine
from pyproj import Transformer

from xdem.kernels import robust


class SineTerrain:
    """``z(x, y)`` in metres, with ``x, y`` in the CRS ``crs`` (metres)."""

    def __init__(self, *, crs: str, origin: tuple[float, float], seed: int = 3, waves: int = 40,
                 shortest: float = 200.0, longest: float = 3000.0, relief: float = 0.12) -> None:
        rng = np.random.default_rng(seed)
        self.crs = crs
        self.origin = origin
        self.wavelength = np.exp(rng.uniform(math.log(shortest), math.log(longest), waves))
        self.amplitude = relief * self.wavelength / math.sqrt(waves)
        theta = rng.uniform(0.0, 2.0 * math.pi, waves)
        self.kx = 2.0 * math.pi * np.cos(theta) / self.wavelength
        self.ky = 2.0 * math.pi * np.sin(theta) / self.wavelength
        self.phase = rng.uniform(0.0, 2.0 * math.pi, waves)

    def __call__(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64) - self.origin[0]
        y = np.asarray(y, dtype=np.float64) - self.origin[1]
        shape = np.broadcast(x, y).shape
        x, y = np.broadcast_to(x, shape).ravel(), np.broadcast_to(y, shape).ravel()
        z = np.full(x.size, 1000.0)
        # z += a sin(kx x + ky y + p) for each wave, the same float64 operations in the same order
        # (so the same values to the bit), in pieces that stay in the CPU cache: a third faster
        step = 1 << 14
        u, v = np.empty(min(step, x.size)), np.empty(min(step, x.size))
        for s in range(0, x.size, step):
            xs, ys, zs = x[s : s + step], y[s : s + step], z[s : s + step]
            us, vs = u[: xs.size], v[: xs.size]
            for a, kx, ky, p in zip(self.amplitude, self.kx, self.ky, self.phase):
                np.multiply(kx, xs, out=us)
                np.multiply(ky, ys, out=vs)
                us += vs
                us += p
                np.sin(us, out=us)
                us *= a
                zs += us
        return z.reshape(shape)


def pixel_scale_terrain(*, crs: str, origin: tuple[float, float], resolution: float = 5.0,
                        seed: int = 3) -> SineTerrain:
    """Steep terrain whose power-law spectrum reaches the pixel scale (issue 28): 100 plane
    sinusoids in random directions with random phases, wavelengths log-uniform from 2.5 pixels
    (12.5 m at 5 m pixels: above the Nyquist limit of 2 pixels in every direction, so a DEM
    sampled on the grid holds every wave without aliasing) to 3 km, amplitudes proportional to
    the wavelength (every wave as steep as the others), relief std about 150 m (147 m on
    600 x 600 pixels of 5 m, 155 m on 2000 x 2000) and slopes of about 42 degrees at the median.
    Exact anywhere, so a moved DEM of it is exact too."""
    return SineTerrain(crs=crs, origin=origin, seed=seed, waves=100, shortest=2.5 * resolution, relief=0.26)


def grid_around(bounds_in_terrain_crs: tuple[float, float, float, float], terrain_crs: str, crs: str,
                resolution: float) -> tuple[Affine, tuple[int, int]]:
    """A north-up grid in ``crs`` covering the given bounds (in ``terrain_crs``)."""
    from rasterio.warp import transform_bounds

    xmin, ymin, xmax, ymax = transform_bounds(terrain_crs, crs, *bounds_in_terrain_crs, densify_pts=51)
    nx = int(math.ceil((xmax - xmin) / resolution))
    ny = int(math.ceil((ymax - ymin) / resolution))
    return Affine(resolution, 0.0, xmin, 0.0, -resolution, ymax), (ny, nx)


def dem_of(terrain: SineTerrain, *, crs: str, transform: Affine, shape: tuple[int, int],
           move: tuple[float, float, float] = (0.0, 0.0, 0.0), tilt: tuple[float, float] = (0.0, 0.0),
           chunks: int = 128) -> xr.DataArray:
    """DEM on a grid of ``crs``: at each pixel centre ``p``, ``terrain(T(p) - (dx, dy)) + dz``,
    ``T`` the exact map from ``crs`` to the terrain's CRS: the terrain moved by ``(dx, dy, dz)``
    in the terrain's CRS (the shift to apply to it is ``(-dx, -dy, -dz)``), plus a plane
    ``tilt[0] (x - x0) + tilt[1] (y - y0)`` of the terrain CRS's coordinates."""
    ny, nx = shape
    cols, rows = np.meshgrid(np.arange(nx) + 0.5, np.arange(ny) + 0.5)
    x = transform.c + cols * transform.a
    y = transform.f + rows * transform.e
    xt, yt = Transformer.from_crs(crs, terrain.crs, always_xy=True).transform(x, y)
    xt, yt = np.asarray(xt), np.asarray(yt)
    z = terrain(xt - move[0], yt - move[1]) + move[2]
    z += tilt[0] * (xt - terrain.origin[0]) + tilt[1] * (yt - terrain.origin[1])
    z = z.astype(np.float32)
    da = xr.DataArray(z, dims=("y", "x"), coords={"y": y[:, 0], "x": x[0]})
    da = da.rio.write_crs(crs).rio.write_transform(transform).rio.write_nodata(np.nan, encoded=False)
    return da.chunk(chunks)


def rigid_dem_of(terrain: SineTerrain, *, transform: Affine, shape: tuple[int, int], matrix: np.ndarray,
                 chunks: int = 128, rows: slice | None = None) -> xr.DataArray:
    """DEM on a grid of the terrain's CRS of the terrain surface moved by the rigid 4 x 4
    ``matrix`` (applied to the points ``(x, y, z)`` of the surface): at each pixel centre ``q``,
    the elevation of the moved surface, i.e. ``(M P)_z`` for the surface point ``P`` whose image
    has horizontal position ``q``. Solved here independently of :mod:`xdem.kernels.rigid`: with
    ``P = M^-1 (q, z')`` and ``P_z = terrain(P_xy)``, iterate ``z' <- (M (P_xy, terrain(P_xy)))_z``
    to 1e-8 m (the terrain is exact anywhere). The matrix to apply to this DEM to get the
    terrain back is ``inv(matrix)``. ``rows`` restricts to a band of rows (for large grids)."""
    m = np.asarray(matrix, dtype=np.float64)
    inv = np.linalg.inv(m)
    ny, nx = shape
    r = np.arange(ny)[rows] if rows is not None else np.arange(ny)
    cols, rr = np.meshgrid(np.arange(nx) + 0.5, r + 0.5)
    qx = transform.c + cols * transform.a
    qy = transform.f + rr * transform.e
    z = terrain(qx, qy)  # a start: the unmoved surface
    for _ in range(50):
        px = inv[0, 0] * qx + inv[0, 1] * qy + inv[0, 2] * z + inv[0, 3]
        py = inv[1, 0] * qx + inv[1, 1] * qy + inv[1, 2] * z + inv[1, 3]
        new = m[2, 0] * px + m[2, 1] * py + m[2, 2] * terrain(px, py) + m[2, 3]
        done = np.abs(new - z).max() < 1e-8
        z = new
        if done:
            break
    else:
        raise AssertionError("the rigid truth did not converge")
    out = xr.DataArray(z.astype(np.float32), dims=("y", "x"), coords={"y": qy[:, 0], "x": qx[0]})
    out = out.rio.write_crs(terrain.crs).rio.write_transform(transform).rio.write_nodata(np.nan, encoded=False)
    return out.chunk(chunks)


def nmad(values: np.ndarray) -> float:
    """The project's NMAD (:func:`xdem.kernels.robust.nmad`) of the finite values."""
    v = np.asarray(values, dtype=np.float64)
    return robust.nmad(v[np.isfinite(v)])


def field_dem_of(terrain: SineTerrain, *, transform: Affine, shape: tuple[int, int], move, chunks: int = 128,
                 dtype: type = np.float32) -> xr.DataArray:
    """DEM on a grid of the terrain's CRS of the terrain moved by a smooth field: at each pixel
    centre ``p``, ``terrain(p - m_xy(p)) + m_z(p)`` with ``(m_x, m_y, m_z) = move(x, y)``
    (numpy functions of the terrain CRS's coordinates). The correction to apply at ``q`` is
    :func:`field_correction` (``-move`` evaluated where the moved point came from)."""
    ny, nx = shape
    cols, rows = np.meshgrid(np.arange(nx) + 0.5, np.arange(ny) + 0.5)
    x = transform.c + cols * transform.a
    y = transform.f + rows * transform.e
    mx, my, mz = move(x, y)
    z = (terrain(x - mx, y - my) + mz).astype(dtype)
    out = xr.DataArray(z, dims=("y", "x"), coords={"y": y[:, 0], "x": x[0]})
    out = out.rio.write_crs(terrain.crs).rio.write_transform(transform).rio.write_nodata(np.nan, encoded=False)
    return out.chunk(chunks)


def field_correction(move, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The exact correction ``d`` to apply at output positions ``q = (x, y)`` to a DEM made by
    :func:`field_dem_of` with ``move``: ``tba(q - d_xy) + d_z = terrain(q)`` requires
    ``d = -move(q - d_xy)``, solved by fixed-point iteration to 1e-10 (the field is smooth and
    its gradient far below 1)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    dx, dy = np.zeros_like(x), np.zeros_like(y)
    for _ in range(100):
        mx, my, mz = move(x - dx, y - dy)
        nx_, ny_ = -np.asarray(mx), -np.asarray(my)
        done = max(np.abs(nx_ - dx).max(), np.abs(ny_ - dy).max()) < 1e-10
        dx, dy = nx_, ny_
        if done:
            break
    else:
        raise AssertionError("the field correction did not converge")
    return dx, dy, -np.asarray(move(x - dx, y - dy)[2], dtype=np.float64)
