r"""A synthetic glacier set with a known truth, of any size, evaluated out of core.

What a test of elevation change, gap filling, volume change and uncertainty needs, with every
part known exactly:

* a reference DEM (the later epoch, ``ref``) that is an analytic function of map coordinates:
  three mountains per 8 km tile (periodic, so a DEM of any size has ``3 x tiles`` glaciers);
* one glacier outline per mountain, on its flank, spanning several hundred metres of
  elevation (``outlines``: a GeoDataFrame with ``NAME``), and the glacier index map
  (``index``: 0 off glacier, ``i + 1`` on the glacier of row ``i``; pixel centres inside, as
  :func:`rasterio.features.rasterize` burns them);
* a thinning that is one known function of the reference elevation for every glacier
  (:func:`thinning_profile`, -38 m at 300 m a.s.l. to -3 m at 2000 m);
* errors on every pixel with a known spread that grows with slope
  (:math:`\sigma = \sigma_0 + g \cdot slope`) and a known spatial correlation: the
  standardised error is a white nugget plus a Gaussian-correlated field of effective range
  :attr:`NoiseModel.range` (scikit-gstat's ``gaussian`` model: :math:`\rho(h) = e^{-(2h/r)^2}`),
  made by Gaussian smoothing of white noise keyed on global pixel indices, so the same pixel
  has the same error for any chunking;
* voids in the accumulation area (upper half of each glacier, in patches), 5-40 % of each
  glacier's pixels.

``ddem = ref - dem_start`` is the elevation change (end minus start), ``ddem_full`` the same
without voids, ``signal`` the noise-free thinning. Nothing is computed until values are asked
for; :meth:`GlacierSet.truth` computes the per-glacier truth table in one pass.

Examples
--------
>>> from xdem.examples.glaciers import glacier_set, thinning_profile
>>> g = glacier_set()  # one 8 km tile: three glaciers
>>> list(g.outlines["NAME"])
['Alphabreen', 'Betabreen', 'Gammabreen']
>>> round(float(thinning_profile(np.array([2000.0]))[0]), 1)
-3.0
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path

import dask.array as da
import geopandas as gpd
import numpy as np
import pandas as pd
import rioxarray  # noqa: F401 - the .rio accessor
import shapely
import xarray as xr
from affine import Affine
from scipy.ndimage import gaussian_filter
from scipy.special import ndtri
from shapely.geometry import Polygon

from xdem.io.cog import write_cog
from xdem.io.grid import block_pixel_offsets
from xdem.masks import burn_shapes
from xdem.sampling import pixel_uniform

__all__ = ["GlacierSet", "NoiseModel", "GLACIERS", "PERIOD", "glacier_set", "thinning_profile", "terrain_elevation",
           "write_glacier_set", "standard_error_field", "START", "END"]

#: Side of the periodic tile (m): three mountains and three glaciers per tile.
PERIOD = 8000.0
#: Upper-left corner of the default grid (UTM 33N, EPSG:32633, as Svalbard).
ORIGIN = (500000.0, 8680000.0)
CRS = "EPSG:32633"
#: The two epochs of the elevation change (``ref`` is the later one).
START, END = datetime(1990, 8, 1), datetime(2009, 8, 1)
_BASE = 300.0
_Z_LO, _Z_HI = 300.0, 2000.0
_KEY_WHITE, _KEY_FIELD = 2711, 3137


@dataclass(frozen=True)
class Mountain:
    """A Gaussian peak (``height`` m above the base, ``width`` m) in the tile, and its glacier."""

    name: str
    x: float  # position in the tile (m from the tile's upper-left corner, x east, y south)
    y: float
    height: float
    width: float
    azimuth: float  # direction (radians from east, counter-clockwise) of the glacier from the peak
    void_threshold: float  # voids where the patch field exceeds it (higher: fewer voids)


#: The three mountains (and glaciers) of a tile.
GLACIERS = (
    Mountain("Alphabreen", 2300.0, 2200.0, 1650.0, 1000.0, 0.4, 0.55),
    Mountain("Betabreen", 5900.0, 3000.0, 1250.0, 850.0, 2.6, 0.15),
    Mountain("Gammabreen", 3600.0, 6100.0, 900.0, 800.0, 4.3, -0.35),
)


@dataclass(frozen=True)
class NoiseModel:
    """Errors of the elevation change: spread by slope, Gaussian spatial correlation.

    ``sigma(slope) = sigma0 + slope_gain * slope`` (m, slope in degrees); the standardised error
    ``z`` has variance 1: a white part ``nugget`` and a correlated part ``1 - nugget`` whose
    correlation is scikit-gstat's ``gaussian`` model of effective range ``range`` (m).
    """

    sigma0: float = 0.3
    slope_gain: float = 0.02
    range: float = 400.0
    nugget: float = 0.2

    def sigma(self, slope_degrees: np.ndarray) -> np.ndarray:
        return self.sigma0 + self.slope_gain * np.asarray(slope_degrees)

    def variogram(self, lag: np.ndarray) -> np.ndarray:
        """Semivariance of the standardised error at ``lag`` metres (nugget included for lag > 0)."""
        lag = np.asarray(lag, dtype=float)
        corr = (1.0 - self.nugget) * np.exp(-((2.0 * lag / self.range) ** 2))
        return np.where(lag > 0, 1.0 - corr, 0.0)


def thinning_profile(z: np.ndarray) -> np.ndarray:
    """The true elevation change (m, negative: thinning) at reference elevation ``z`` (m)."""
    t = np.clip((_Z_HI - np.asarray(z, dtype=float)) / (_Z_HI - _Z_LO), 0.0, 1.0)
    return -3.0 - 35.0 * t**1.5


def _wrap(d: np.ndarray) -> np.ndarray:
    return (d + PERIOD / 2) % PERIOD - PERIOD / 2


def terrain_elevation(x: np.ndarray, y: np.ndarray, *, origin: tuple[float, float] = ORIGIN) -> np.ndarray:
    """The reference DEM's elevation (m) at map coordinates ``(x, y)``: periodic in both axes."""
    tx, ty = np.asarray(x, dtype=float) - origin[0], origin[1] - np.asarray(y, dtype=float)
    z = np.full(np.broadcast(tx, ty).shape, _BASE)
    for m in GLACIERS:
        r2 = _wrap(tx - m.x) ** 2 + _wrap(ty - m.y) ** 2
        z = z + m.height * np.exp(-r2 / (2.0 * m.width**2))
    return z + 12.0 * np.sin(2 * np.pi * tx / 900.0) * np.cos(2 * np.pi * ty / 700.0)


def _outline(m: Mountain, tile_x: float, tile_y: float) -> Polygon:
    """The glacier of mountain ``m`` in the tile whose upper-left corner is (tile_x, tile_y)."""
    cx = tile_x + m.x + 0.9 * m.width * math.cos(m.azimuth)
    cy = tile_y - m.y + 0.9 * m.width * math.sin(m.azimuth)
    theta = np.linspace(0.0, 2 * np.pi, 181)[:-1]
    r = 0.7 * m.width * (1.0 + 0.18 * np.sin(3 * theta + m.azimuth))
    return Polygon(np.column_stack([cx + r * np.cos(theta), cy + r * np.sin(theta)]))


def _elevation_range(m: Mountain) -> tuple[float, float]:
    """Lowest and highest elevation of mountain ``m``'s glacier (the same in every tile: periodic)."""
    poly = _outline(m, ORIGIN[0], ORIGIN[1])
    x0, y0, x1, y1 = poly.bounds
    xs, ys = np.meshgrid(np.linspace(x0, x1, 120), np.linspace(y0, y1, 120))
    inside = shapely.contains_xy(poly, xs, ys)
    zs = terrain_elevation(xs[inside], ys[inside])
    return float(zs.min()), float(zs.max())


def _outlines(shape: tuple[int, int], resolution: float, origin: tuple[float, float]) -> gpd.GeoDataFrame:
    """Every glacier whose outline lies wholly inside the grid (tiles in row-major order)."""
    width, height = shape[1] * resolution, shape[0] * resolution
    ranges = {m.name: _elevation_range(m) for m in GLACIERS}
    rows = []
    for r in range(math.ceil(height / PERIOD)):
        for c in range(math.ceil(width / PERIOD)):
            for m in GLACIERS:
                poly = _outline(m, origin[0] + c * PERIOD, origin[1] - r * PERIOD)
                x0, y0, x1, y1 = poly.bounds
                if x0 < origin[0] or x1 > origin[0] + width or y1 > origin[1] or y0 < origin[1] - height:
                    continue
                rows.append((m.name if r == c == 0 else f"{m.name}_{r}_{c}", *ranges[m.name], poly))
    names, lows, highs, geoms = zip(*rows) if rows else ((), (), (), ())
    return gpd.GeoDataFrame({"NAME": list(names), "z_low": list(lows), "z_high": list(highs)}, geometry=list(geoms),
                            crs=CRS)


@dataclass(frozen=True)
class _Grid:
    shape: tuple[int, int]
    resolution: float
    origin: tuple[float, float]
    noise: NoiseModel
    seed: int
    geoms: tuple[Polygon, ...]
    mid: tuple[float, ...]  # elevation above which a glacier may have voids (its middle)
    thresholds: tuple[float, ...]

    @property
    def transform(self) -> Affine:
        return Affine(self.resolution, 0.0, self.origin[0], 0.0, -self.resolution, self.origin[1])


def _centres(g: _Grid, row0: int, col0: int, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    cols = g.origin[0] + (col0 + np.arange(shape[1]) + 0.5) * g.resolution
    rows = g.origin[1] - (row0 + np.arange(shape[0]) + 0.5) * g.resolution
    return np.meshgrid(cols, rows)


def _index_block(g: _Grid, row0: int, col0: int, shape: tuple[int, int]) -> np.ndarray:
    t = g.transform * Affine.translation(col0, row0)
    bx0, by1 = t * (0, 0)
    bx1, by0 = t * (shape[1], shape[0])
    hits = [(p, i + 1) for i, p in enumerate(g.geoms)
            if p.bounds[0] < bx1 and p.bounds[2] > bx0 and p.bounds[1] < by1 and p.bounds[3] > by0]
    if not hits:
        return np.zeros(shape, dtype=np.int32)
    return burn_shapes(hits, out_shape=shape, transform=t, dtype="int32")


def _elevation_and_slope(g: _Grid, row0: int, col0: int, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Elevation of a block's pixel centres and its slope (degrees; central differences of the
    analytic terrain, one pixel apart), from one evaluation on the block grown by one pixel."""
    x, y = _centres(g, row0 - 1, col0 - 1, (shape[0] + 2, shape[1] + 2))
    z = terrain_elevation(x, y, origin=g.origin)
    d = 2.0 * g.resolution
    gx = (z[1:-1, 2:] - z[1:-1, :-2]) / d
    gy = (z[:-2, 1:-1] - z[2:, 1:-1]) / d
    return z[1:-1, 1:-1], np.degrees(np.arctan(np.hypot(gx, gy)))


def standard_error_field(shape: tuple[int, int], *, resolution: float, noise: NoiseModel, seed: int = 0,
                         offset: tuple[int, int] = (0, 0), ncols: int | None = None) -> np.ndarray:
    """The standardised error ``z`` (unit variance, :class:`NoiseModel`'s correlation) of a window.

    A white nugget plus Gaussian-smoothed white noise, both keyed on global pixel indices: the
    window of ``shape`` at global ``offset`` (row, col) of a grid of ``ncols`` columns (default:
    the window's own width) has the same values however the grid is cut into windows.

    Examples
    --------
    >>> z = standard_error_field((64, 64), resolution=20.0, noise=NoiseModel())
    >>> part = standard_error_field((16, 16), resolution=20.0, noise=NoiseModel(), offset=(8, 8), ncols=64)
    >>> bool(np.array_equal(z[8:24, 8:24], part))
    True
    """
    ncols = shape[1] if ncols is None else ncols
    row0, col0 = offset
    s = noise.range / 4.0 / resolution  # kernel std in pixels: rho(h) = exp(-h^2 / (4 s^2))
    halo = int(4.0 * s + 0.5) + 1
    ext = (shape[0] + 2 * halo, shape[1] + 2 * halo)
    u = pixel_uniform(row0, col0, ext, ncols + 2 * halo, seed * 7919 + _KEY_FIELD)
    white = ndtri(np.clip(u, 1e-12, 1 - 1e-12))
    smooth = gaussian_filter(white, s, mode="constant", truncate=4.0)[halo:-halo, halo:-halo]
    radius = int(4.0 * s + 0.5)
    k = np.exp(-0.5 * (np.arange(-radius, radius + 1) / s) ** 2)
    k /= k.sum()
    smooth /= float((k**2).sum())  # the separable kernel leaves a variance (sum k^2)^2: back to 1
    u2 = pixel_uniform(row0, col0, shape, ncols, seed * 7919 + _KEY_WHITE)
    nugget = ndtri(np.clip(u2, 1e-12, 1 - 1e-12))
    return math.sqrt(1.0 - noise.nugget) * smooth + math.sqrt(noise.nugget) * nugget


def _layer_block(block: np.ndarray, *, g: _Grid, layer: str, block_info: dict | None = None) -> np.ndarray:
    row0, col0 = block_pixel_offsets(block_info)
    shape = block.shape
    if layer == "ref":
        x, y = _centres(g, row0, col0, shape)
        return terrain_elevation(x, y, origin=g.origin).astype(np.float32)
    z, slope = _elevation_and_slope(g, row0, col0, shape)
    if layer == "error":
        return g.noise.sigma(slope).astype(np.float32)
    index = _index_block(g, row0, col0, shape)
    if layer == "index":
        return index
    signal = np.where(index > 0, thinning_profile(z), 0.0)
    if layer == "signal":
        return signal.astype(np.float32)
    x, y = _centres(g, row0, col0, shape)
    if layer == "voids":
        return _voids(g, index, x, y, z)
    z_err = standard_error_field(shape, resolution=g.resolution, noise=g.noise, seed=g.seed, offset=(row0, col0),
                                 ncols=g.shape[1])
    dh = signal + g.noise.sigma(slope) * z_err
    if layer == "ddem":
        dh = np.where(_voids(g, index, x, y, z), np.nan, dh)
    return dh.astype(np.float32)


def _voids(g: _Grid, index: np.ndarray, x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Patches in the upper half of each glacier, where a product of two sines exceeds the glacier's threshold."""
    patch = np.sin(2 * np.pi * (x - g.origin[0]) / 610.0 + 0.7) * np.sin(2 * np.pi * (g.origin[1] - y) / 530.0 + 1.9)
    mid = np.asarray((np.inf, *g.mid))[index]
    threshold = np.asarray((np.inf, *g.thresholds))[index]
    return (index > 0) & (z > mid) & (patch > threshold)


def _block_sums(index: np.ndarray, *layers: np.ndarray, n: int) -> np.ndarray:
    """Per glacier index of a block: the pixel count and the sums of ``layers`` (shape (1, 1, 1 + len, n)):
    a grouped pass whose memory is one block, whatever the grid's width."""
    idx = index.ravel()
    rows = [np.bincount(idx, minlength=n)] + [np.bincount(idx, weights=a.ravel().astype(np.float64), minlength=n)
                                             for a in layers]
    return np.stack(rows).astype(np.float64)[None, None]


@dataclass(frozen=True)
class GlacierSet:
    """The synthetic glacier set: lazy layers on one grid, the outlines and the noise model."""

    ref: xr.DataArray
    ddem: xr.DataArray
    ddem_full: xr.DataArray
    signal: xr.DataArray
    error: xr.DataArray
    voids: xr.DataArray
    index: xr.DataArray
    outlines: gpd.GeoDataFrame
    noise: NoiseModel
    start: datetime = START
    end: datetime = END

    @property
    def dem_start(self) -> xr.DataArray:
        """The earlier DEM (``ref - ddem``: with the voids of ``ddem``)."""
        return (self.ref - self.ddem).rio.write_crs(CRS).rename("dem_start")

    @property
    def pixel_area(self) -> float:
        res = float(abs(self.ref.x[1] - self.ref.x[0]))
        return res * res

    def truth(self) -> pd.DataFrame:
        """Per glacier (``NAME``): pixels, area (m^2), void fraction, and the volume change (m^3) of
        the full elevation change (``volume_full``, what gap filling should recover) and of the
        noise-free thinning (``volume_signal``); one pass over the layers."""
        n = len(self.outlines) + 1
        nbr, nbc = self.index.data.numblocks
        sums = da.map_blocks(partial(_block_sums, n=n), self.index.data, self.voids.data, self.ddem_full.data,
                             self.signal.data, new_axis=[2, 3], chunks=((1,) * nbr, (1,) * nbc, (4,), (n,)),
                             dtype=np.float64, meta=np.array((), dtype=np.float64))
        count, voids, full, signal = np.asarray(sums.sum(axis=(0, 1)).compute())[:, 1:]
        a = self.pixel_area
        count = count.astype(np.int64)
        return pd.DataFrame({"pixels": count, "area": count * a, "void_fraction": voids / np.maximum(count, 1),
                             "volume_full": full * a, "volume_signal": signal * a},
                            index=pd.Index(self.outlines["NAME"], name="NAME"))


def glacier_set(shape: tuple[int, int] = (400, 400), *, resolution: float = 20.0, chunks: int | tuple[int, int] = 200,
                noise: NoiseModel | None = None, seed: int = 0, origin: tuple[float, float] = ORIGIN) -> GlacierSet:
    """The synthetic glacier set on a ``shape`` grid of ``resolution`` m pixels (lazy).

    Parameters
    ----------
    shape
        Rows and columns; 400 x 400 at 20 m is one 8 km tile (three glaciers).
    resolution
        Pixel size (m).
    chunks
        Dask chunk size of every layer (the values do not depend on it).
    noise
        The error model (default :class:`NoiseModel`).
    seed
        Seed of the errors: another seed is another realisation of the same error model.
    origin
        Upper-left corner of the grid (EPSG:32633).
    """
    noise = noise or NoiseModel()
    outlines = _outlines(shape, resolution, origin)
    base = {m.name: m for m in GLACIERS}
    thresholds = tuple(base[name.split("_")[0]].void_threshold for name in outlines["NAME"])
    mid = tuple(0.5 * (lo + hi) for lo, hi in zip(outlines["z_low"], outlines["z_high"]))
    grid = _Grid((int(shape[0]), int(shape[1])), float(resolution), origin, noise, int(seed), tuple(outlines.geometry),
                 mid, thresholds)
    template = da.zeros(shape, chunks=chunks, dtype=np.float32)
    x = origin[0] + (np.arange(shape[1]) + 0.5) * resolution
    y = origin[1] - (np.arange(shape[0]) + 0.5) * resolution

    def layer(name: str, dtype: type) -> xr.DataArray:
        data = da.map_blocks(partial(_layer_block, g=grid, layer=name), template, dtype=dtype,
                             meta=np.array((), dtype=dtype))
        arr = xr.DataArray(data, coords={"y": y, "x": x}, dims=("y", "x"), name=name)
        arr = arr.rio.write_crs(CRS).rio.write_transform(grid.transform)
        return arr.rio.write_nodata(np.nan, encoded=False) if dtype == np.float32 else arr

    return GlacierSet(ref=layer("ref", np.float32), ddem=layer("ddem", np.float32),
                      ddem_full=layer("ddem_full", np.float32), signal=layer("signal", np.float32),
                      error=layer("error", np.float32), voids=layer("voids", bool), index=layer("index", np.int32),
                      outlines=outlines[["NAME", "geometry"]], noise=noise)


def write_glacier_set(folder: str | os.PathLike[str], *, shape: tuple[int, int] = (400, 400),
                      resolution: float = 20.0, seed: int = 0) -> dict[str, Path]:
    """Write the set's files into ``folder`` (COGs and a GeoPackage); returns their paths by role:
    ``ref`` (2009), ``start`` (1990, with voids), ``ddem``, ``ddem_full``, ``outlines``."""
    g = glacier_set(shape, resolution=resolution, seed=seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {name: folder / f"glaciers_{name}.tif" for name in ("ref", "start", "ddem", "ddem_full")}
    for name, arr in (("ref", g.ref), ("start", g.dem_start), ("ddem", g.ddem), ("ddem_full", g.ddem_full)):
        write_cog(arr, paths[name], overwrite=True)
    paths["outlines"] = folder / "glaciers_outlines.gpkg"
    g.outlines.to_file(paths["outlines"], driver="GPKG")
    return paths
