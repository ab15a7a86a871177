"""Synthetic fractal terrain and DEM pairs with a known shift, of any size, out of core.

The terrain is an analytic function of continuous map coordinates ``(x, y)``: a sum of octaves
of gradient noise whose lattice gradients come from a counter-based hash of the integer lattice
coordinates, the octave and the seed. Each dask block evaluates it from its own global
coordinates, so the result does not depend on the chunking, is never materialised whole, and a
shifted copy ``terrain(x - dx, y - dy)`` is exact (no resampling).

:func:`generate_pair` writes a reference DEM and a to-be-aligned DEM
``tba(x, y) = terrain(x - dx, y - dy) + dz + tilt`` and the truth (``truth.json``) in the
field convention: the shift to *apply* to tba is ``(-dx, -dy, -dz)``.
"""

from __future__ import annotations

import json
import math
import os
from functools import partial
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import numpy.typing as npt
import xarray as xr
from affine import Affine

from xdem.errors import InputError, OutputError
from xdem.io.atomic import write_text_atomic
from xdem.io.cog import write_cog

__all__ = ["fractal_terrain", "terrain_height", "generate_pair", "DEFAULT_CRS", "DEFAULT_ORIGIN"]

DEFAULT_CRS = "EPSG:32633"
#: Upper-left corner (x0, y0) of the default grid, in metres (UTM 33N, central Europe).
DEFAULT_ORIGIN = (500000.0, 5200000.0)
#: Longest wavelength (m) and amplitude (m) of the noise, and the Hurst-like exponent.
_BASE_WAVELENGTH = 8192.0
_BASE_AMPLITUDE = 700.0
_HURST = 0.85
_BASE_ELEVATION = 1500.0

_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xC2B2AE3D27D4EB4F)
_M3 = np.uint64(0x165667B19E3779F9)
_M4 = np.uint64(0xBF58476D1CE4E5B9)
_M5 = np.uint64(0x94D049BB133111EB)


def _hash(ix: np.ndarray, iy: np.ndarray, key: int) -> np.ndarray:
    """Counter-based 64-bit hash of integer lattice coordinates and a key (splitmix64 finaliser)."""
    with np.errstate(over="ignore"):
        h = (ix.astype(np.int64).view(np.uint64) * _M1) ^ (iy.astype(np.int64).view(np.uint64) * _M2)
        h ^= np.uint64(key % 2**64) * _M3
        h ^= h >> np.uint64(30)
        h *= _M4
        h ^= h >> np.uint64(27)
        h *= _M5
        h ^= h >> np.uint64(31)
    return h


def _octaves(resolution: float) -> list[tuple[float, float]]:
    """``(wavelength, amplitude)`` of every octave, down to about 8 pixels."""
    out: list[tuple[float, float]] = []
    wavelength = _BASE_WAVELENGTH
    while wavelength >= 8.0 * resolution or not out:
        out.append((wavelength, _BASE_AMPLITUDE * (wavelength / _BASE_WAVELENGTH) ** _HURST))
        wavelength /= 2.0
    return out


def _gradient_noise(x: np.ndarray, y: np.ndarray, *, wavelength: float, key: int) -> np.ndarray:
    """One octave of 2-D gradient noise on the grid of 1-D ``x`` (columns) by 1-D ``y`` (rows)."""
    # a per-octave sub-lattice offset keeps the lattices of successive octaves from lining up
    off = _hash(np.array([key]), np.array([-key]), key + 7)[0]
    ox = float(off & np.uint64(0xFFFF)) / 65536.0
    oy = float((off >> np.uint64(16)) & np.uint64(0xFFFF)) / 65536.0
    u = x / wavelength + ox
    v = y / wavelength + oy
    iu = np.floor(u)
    iv = np.floor(v)
    fu = u - iu
    fv = v - iv
    iu = iu.astype(np.int64)
    iv = iv.astype(np.int64)
    u0, v0 = iu.min(), iv.min()
    lu = np.arange(u0, iu.max() + 2, dtype=np.int64)
    lv = np.arange(v0, iv.max() + 2, dtype=np.int64)
    h = _hash(lu[None, :], lv[:, None], key)
    angle = (h >> np.uint64(11)).astype(np.float64) * (2.0 * math.pi / 2.0**53)
    # the per-pixel work is done in float32 (gradients are unit vectors, fractions in [0, 1))
    gx, gy = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
    ci = (iu - u0)[None, :]
    cj = (iv - v0)[:, None]
    fu = fu.astype(np.float32)
    fv = fv.astype(np.float32)
    fu2 = fu[None, :]
    fv2 = fv[:, None]

    def corner(dj: int, di: int) -> np.ndarray:
        # rows first, then columns: two cheap 1-D gathers instead of one 2-D fancy index
        gxr = np.take(np.take(gx, cj[:, 0] + dj, axis=0), ci[0] + di, axis=1)
        gyr = np.take(np.take(gy, cj[:, 0] + dj, axis=0), ci[0] + di, axis=1)
        gxr *= fu2 - np.float32(di)
        gyr *= fv2 - np.float32(dj)
        gxr += gyr
        return gxr

    su = (fu * fu * fu * (fu * (fu * np.float32(6) - np.float32(15)) + np.float32(10)))[None, :]  # quintic fade
    sv = (fv * fv * fv * (fv * (fv * np.float32(6) - np.float32(15)) + np.float32(10)))[:, None]
    top = corner(0, 0)
    top += su * (corner(0, 1) - top)
    bottom = corner(1, 0)
    bottom += su * (corner(1, 1) - bottom)
    top += sv * (bottom - top)
    return top


def terrain_height(
    x: np.ndarray, y: np.ndarray, *, seed: int = 0, resolution: float = 2.0
) -> np.ndarray:
    """Terrain elevation (m) on the grid of 1-D ``x`` (columns) by 1-D ``y`` (rows) coordinates.

    This is the analytic function behind :func:`fractal_terrain`; any ``x``, ``y`` (not only
    pixel centres) may be passed, e.g. shifted coordinates.

    Parameters
    ----------
    x, y
        1-D map coordinates in metres.
    seed
        Terrain seed.
    resolution
        Pixel size the terrain is made for: octaves shorter than 8 pixels are left out.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(len(y), len(x))``.

    Examples
    --------
    >>> z = terrain_height(np.array([0.0, 2.0]), np.array([10.0]))
    >>> z.shape
    (1, 2)
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    z = np.full((y.size, x.size), _BASE_ELEVATION)
    for k, (wavelength, amplitude) in enumerate(_octaves(resolution)):
        z += amplitude * _gradient_noise(x, y, wavelength=wavelength, key=int(seed) * 1000 + k)
    return z


def _terrain_kernel(
    *, block_info: dict | None = None, transform: Affine, seed: int, resolution: float,
    shift: tuple[float, float, float], tilt: tuple[float, float, float, float] | None, out_dtype: np.dtype
) -> np.ndarray:
    """Terrain (shifted, tilted) on one block, from the block's global pixel location."""
    if block_info is None:
        raise TypeError("_terrain_kernel needs dask's block_info: call it through dask.array.map_blocks")
    (r0, r1), (c0, c1) = block_info[None]["array-location"]
    cols = np.arange(c0, c1, dtype=np.float64) + 0.5
    rows = np.arange(r0, r1, dtype=np.float64) + 0.5
    x = transform.c + cols * transform.a
    y = transform.f + rows * transform.e
    dx, dy, dz = shift
    z = terrain_height(x - dx, y - dy, seed=seed, resolution=resolution)
    if dz:
        z += dz
    if tilt is not None:
        ax, ay, xc, yc = tilt
        z += ax * (x - xc)[None, :] + ay * (y - yc)[:, None]
    return z.astype(out_dtype)


def _grid(shape: tuple[int, int], resolution: float, origin: tuple[float, float]) -> Affine:
    return Affine(resolution, 0.0, origin[0], 0.0, -resolution, origin[1])


def _normalise_shape(shape: int | tuple[int, int]) -> tuple[int, int]:
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape), int(shape))
    if len(shape) != 2 or min(shape) <= 0:
        raise InputError(f"shape must be a positive int or (rows, cols), got {shape!r}")
    return int(shape[0]), int(shape[1])


def _terrain(
    shape: tuple[int, int], *, resolution: float, seed: int, chunks: Any, origin: tuple[float, float],
    crs: str, dtype: Any, shift: tuple[float, float, float] = (0.0, 0.0, 0.0),
    tilt: tuple[float, float, float, float] | None = None, name: str = "terrain",
) -> xr.DataArray:
    transform = _grid(shape, resolution, origin)
    dtype = np.dtype(dtype)
    if isinstance(chunks, (int, np.integer)):
        chunks = (int(chunks), int(chunks))
    data = da.map_blocks(
        _terrain_kernel,
        transform=transform, seed=int(seed), resolution=float(resolution), shift=shift, tilt=tilt,
        out_dtype=dtype, dtype=dtype, chunks=da.core.normalize_chunks(chunks, shape),
        meta=np.empty((0, 0), dtype=dtype), token=name,
    )
    x = transform.c + (np.arange(shape[1]) + 0.5) * transform.a
    y = transform.f + (np.arange(shape[0]) + 0.5) * transform.e
    out = xr.DataArray(data, dims=("y", "x"), coords={"y": y, "x": x}, name=name)
    out = out.rio.write_crs(crs).rio.write_transform(transform)
    return out.rio.write_nodata(np.nan, encoded=False)


def fractal_terrain(
    shape: int | tuple[int, int],
    *,
    resolution: float = 2.0,
    seed: int = 0,
    chunks: int | tuple[int, int] = 2048,
    origin: tuple[float, float] = DEFAULT_ORIGIN,
    crs: str = DEFAULT_CRS,
    dtype: npt.DTypeLike = np.float32,
) -> xr.DataArray:
    """Lazy, chunk-independent fractal terrain of any size (nothing is computed here).

    About 10 octaves of gradient noise (wavelengths 8 km down to 8 pixels) around 1500 m:
    relief of hundreds of metres and mountain-like slopes (median 10-25 degrees at 2 m).

    Parameters
    ----------
    shape
        ``(rows, cols)``, or an int for a square.
    resolution
        Pixel size in metres.
    seed
        Terrain seed: same seed, same terrain.
    chunks
        Dask chunk side (int) or ``(rows, cols)``.
    origin
        ``(x0, y0)`` map coordinates of the upper-left corner of the upper-left pixel.
    crs
        A projected CRS in metres.
    dtype
        Output dtype (computed in float64).

    Returns
    -------
    xarray.DataArray
        Dims ``("y", "x")``, dask-backed, with ``.rio`` CRS and transform.

    Examples
    --------
    >>> dem = fractal_terrain((4000, 4000), seed=1)
    >>> dem.shape, dem.data.npartitions
    ((4000, 4000), 4)
    """
    shape = _normalise_shape(shape)
    if resolution <= 0:
        raise InputError(f"resolution must be a positive number of metres, got {resolution!r}")
    return _terrain(shape, resolution=resolution, seed=seed, chunks=chunks, origin=(origin[0], origin[1]), crs=crs, dtype=dtype)


def _truth(shape: tuple[int, int], *, resolution: float, seed: int, origin: tuple[float, float], crs: str,
           shift: tuple[float, float, float], tilt: tuple[float, float] | None) -> dict:
    transform = _grid(shape, resolution, origin)
    xc = transform.c + shape[1] * transform.a / 2.0
    yc = transform.f + shape[0] * transform.e / 2.0
    dx, dy, dz = (float(s) for s in shift)
    return {
        "generator": "xdem.examples.synthetic.generate_pair",
        "version": 1,
        "shape": list(shape),
        "resolution": float(resolution),
        "origin": [float(origin[0]), float(origin[1])],
        "crs": crs,
        "seed": int(seed),
        "terrain_shift": {"dx": dx, "dy": dy, "dz": dz},
        "shift_x": -dx,
        "shift_y": -dy,
        "shift_z": -dz,
        "tilt": None if tilt is None else {
            "a_x": float(tilt[0]), "a_y": float(tilt[1]), "x_center": xc, "y_center": yc,
        },
        "convention": (
            "tba(x, y) = ref(x - dx, y - dy) + dz + a_x * (x - x_center) + a_y * (y - y_center); "
            "shift_x/y/z = (-dx, -dy, -dz) is the translation to APPLY to tba; dh = tba - ref"
        ),
    }


def generate_pair(
    folder: str | os.PathLike,
    *,
    size: int | tuple[int, int],
    shift: tuple[float, float, float] = (3.0, -2.0, 1.5),
    tilt: tuple[float, float] | None = None,
    seed: int = 0,
    resolution: float = 2.0,
    chunks: int | tuple[int, int] = 2048,
    overwrite: bool = False,
) -> dict:
    """Write a reference/to-be-aligned DEM pair with a known shift, out of core, as COGs.

    ``folder/ref.tif`` is :func:`fractal_terrain`; ``folder/tba.tif`` (same grid) is
    ``terrain(x - dx, y - dy) + dz`` plus, if ``tilt=(a_x, a_y)``, the plane
    ``a_x * (x - x_center) + a_y * (y - y_center)`` (slopes in m/m about the grid centre).
    ``folder/truth.json`` holds the parameters and the shift to apply to tba,
    ``(shift_x, shift_y, shift_z) = (-dx, -dy, -dz)``. If the three files exist and
    ``truth.json`` matches the arguments, nothing is recomputed.

    Parameters
    ----------
    folder
        Output folder (created if missing).
    size
        ``(rows, cols)`` or an int for a square.
    shift
        ``(dx, dy, dz)`` in metres moving the terrain into tba.
    tilt
        ``(a_x, a_y)`` planar bias added to tba, or ``None``.
    seed, resolution, chunks
        As for :func:`fractal_terrain`.
    overwrite
        Regenerate even if cached files exist (needed to replace non-matching ones).

    Returns
    -------
    dict
        The truth, plus ``"ref"`` and ``"tba"`` (file paths as strings).

    Examples
    --------
    >>> truth = generate_pair("/tmp/pair", size=512, shift=(4.0, -2.0, 1.0))
    >>> truth["shift_x"], truth["shift_y"], truth["shift_z"]
    (-4.0, 2.0, -1.0)
    """
    shape = _normalise_shape(size)
    if len(shift) != 3:
        raise InputError(f"shift must be (dx, dy, dz) in metres, got {shift!r}")
    if tilt is not None and len(tilt) != 2:
        raise InputError(f"tilt must be (a_x, a_y) in m/m or None, got {tilt!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    truth = _truth(shape, resolution=resolution, seed=seed, origin=DEFAULT_ORIGIN, crs=DEFAULT_CRS,
                   shift=(shift[0], shift[1], shift[2]), tilt=tilt)
    paths = {"ref": folder / "ref.tif", "tba": folder / "tba.tif", "truth": folder / "truth.json"}
    if not overwrite and all(p.exists() for p in paths.values()):
        try:
            cached = json.loads(paths["truth"].read_text())
        except (OSError, ValueError):
            cached = None
        if cached is not None and {k: cached.get(k) for k in truth} == truth:
            return {**truth, "ref": str(paths["ref"]), "tba": str(paths["tba"])}
    if not overwrite and any(p.exists() for p in paths.values()):
        raise OutputError(f"'{folder}' holds another pair (or an incomplete one); pass overwrite=True or another folder")
    paths["truth"].unlink(missing_ok=True)  # written last: its presence marks a complete pair
    terrain = partial(_terrain, shape, resolution=resolution, seed=seed, chunks=chunks, origin=DEFAULT_ORIGIN,
                      crs=DEFAULT_CRS, dtype=np.float32)
    ref = terrain(name="ref")
    tilt4 = None if tilt is None else (float(tilt[0]), float(tilt[1]), truth["tilt"]["x_center"], truth["tilt"]["y_center"])
    tba = terrain(name="tba", shift=(float(shift[0]), float(shift[1]), float(shift[2])), tilt=tilt4)
    write_cog(ref, paths["ref"], overwrite=True)
    write_cog(tba, paths["tba"], overwrite=True)
    write_text_atomic(paths["truth"], json.dumps(truth, indent=2) + "\n", overwrite=True)
    return {**truth, "ref": str(paths["ref"]), "tba": str(paths["tba"])}
