"""GlacioHack/xdem 0.2.3's terrain attributes, with its meaning, on the lazy engine.

:func:`upstream_attributes` computes any of upstream's attribute names (:data:`UPSTREAM_NAMES`)
of a DataArray lazily, in ONE ``map_overlap`` pass with a NaN halo as deep as the widest
window (2 pixels for the Florinsky fit, ``window_size // 2`` for the windowed indexes), so that
the result does not depend on the chunks; edges are NaN as upstream's (a NaN boundary). It is
the engine behind upstream's objects: numpy arrays with ``resolution=`` and :class:`xdem.DEM`.

Upstream's conventions, checked in its ``xdem/terrain/surfit.py`` and ``window.py``: slope
``arctan(|grad z|)``; aspect clockwise from north, the downslope direction, 180 degrees on
flat cells; hillshade ``clip(1.5 + 254 cos(i), 0, 255)``; curvatures of Minár et al. (2020) in
100/m, convex > 0 (:func:`xdem.terrain.fits.minar_curvature`); TRI, TPI and roughness on
``window_size``; rugosity on 3 x 3; fractal roughness on ``window_size``.

Texture shading is a global FFT filter: it is computed on the whole DEM as one block (still
lazily), which is exact but not out-of-core, so DEMs above :data:`TEXTURE_SHADING_MAX_PIXELS`
are refused with one line (tile and blend them yourself, or downsample first).

Examples
--------
>>> import xdem
>>> dem = xdem.open_dem(xdem.examples.get_path("lidar"))
>>> kmax, rug = upstream_attributes(dem, ["max_curvature", "rugosity"])  # lazy
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import dask.array as da
import numpy as np
import xarray as xr

from xdem.errors import InputError
from xdem.io.grid import check_projected, get_transform, signed_resolution
from xdem.io.open import open_dem
from xdem.overlap import map_overlap_nan
from xdem.terrain import fits as F
from xdem.terrain import kernels as K
from xdem.terrain import windowed as W

__all__ = ["UPSTREAM_NAMES", "UNITS", "TEXTURE_SHADING_MAX_PIXELS", "UpstreamOptions", "upstream_attributes"]

_SURFACE = ("slope", "aspect", "hillshade", *F.CURVATURES)
_WINDOWED = ("terrain_ruggedness_index", "topographic_position_index", "roughness", "fractal_roughness")
#: Upstream 0.2.3's attribute names, all computed here.
UPSTREAM_NAMES = (*_SURFACE, *_WINDOWED, "rugosity", "texture_shading")
#: Units of each attribute (slope and aspect: degrees unless ``degrees=False``).
UNITS = {**{n: "1/100 m-1" for n in F.CURVATURES}, "slope": "degrees", "aspect": "degrees", "hillshade": "0-255",
         "terrain_ruggedness_index": "m", "topographic_position_index": "m", "roughness": "m", "rugosity": "1",
         "fractal_roughness": "1", "texture_shading": "m"}
#: Largest DEM (pixels) whose texture shading is computed (one block of float64 and its FFT).
TEXTURE_SHADING_MAX_PIXELS = 64_000_000


@dataclass(frozen=True)
class UpstreamOptions:
    """Upstream 0.2.3's options of the terrain attributes, checked (``InputError`` when wrong).

    Examples
    --------
    >>> UpstreamOptions(surface_fit="ZevenbergThorne").surface_fit
    'zevenbergthorne'
    """

    surface_fit: str = "florinsky"
    curv_method: str = "geometric"
    degrees: bool = True
    hillshade_altitude: float = 45.0
    hillshade_azimuth: float = 315.0
    hillshade_z_factor: float = 1.0
    tri_method: str = "riley"
    window_size: int = 3
    texture_alpha: float = 0.8

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "surface_fit", F.normalise_fit(self.surface_fit))
        set_(self, "curv_method", str(self.curv_method).lower())
        set_(self, "tri_method", str(self.tri_method).lower())
        if self.curv_method not in F.CURV_METHODS:
            raise InputError(f"unknown curv_method {self.curv_method!r}; use 'geometric' or 'directional'")
        if self.tri_method not in ("riley", "wilson"):
            raise InputError(f"unknown TRI algorithm (tri_method) {self.tri_method!r}; use 'Riley' or 'Wilson'")
        if not 0 <= self.hillshade_azimuth <= 360 or not 0 <= self.hillshade_altitude <= 90:
            raise InputError("hillshade_azimuth must be in [0, 360] and hillshade_altitude in [0, 90] degrees")
        if not (np.isfinite(self.hillshade_z_factor) and self.hillshade_z_factor >= 0):
            raise InputError(f"hillshade_z_factor must be finite and >= 0, got {self.hillshade_z_factor}")
        K._check_window(self.window_size)

    def depth(self, names: Sequence[str]) -> int:
        """Halo (pixels) that ``names`` need around a block."""
        d = [F.fit_depth(self.surface_fit) for n in names if n in _SURFACE]
        d += [self.window_size // 2 for n in names if n in _WINDOWED] + [1 for n in names if n == "rugosity"]
        return max(d, default=0)


def _check_names(names: Sequence[str], opts: UpstreamOptions) -> tuple[str, ...]:
    out = tuple(dict.fromkeys(names))
    for n in out:
        if n not in UPSTREAM_NAMES:
            raise InputError(f"unknown terrain attribute {n!r}; upstream's names: {', '.join(UPSTREAM_NAMES)}")
    if opts.surface_fit == K.HORN and any(n in F.CURVATURES for n in out):
        raise InputError("the 'Horn' surface fit cannot give curvatures; use 'Florinsky' or 'ZevenbergThorne'")
    return out


def _surface(name: str, d: tuple[np.ndarray, ...], opts: UpstreamOptions) -> np.ndarray:
    zx, zy = d[0], d[1]
    if name in F.CURVATURES:
        return F.minar_curvature(name, *d, method=opts.curv_method)
    slope = K._slope_from_gradient(zx, zy)
    if name == "slope":
        return np.degrees(slope) if opts.degrees else slope
    aspect = K._aspect_from_gradient(zx, zy)
    aspect[np.isnan(aspect) & ~np.isnan(slope)] = np.pi  # upstream: flat cells face 180 degrees
    if name == "aspect":
        return np.degrees(aspect) if opts.degrees else aspect
    s = np.arctan(np.tan(slope) * opts.hillshade_z_factor)
    az, alt = np.deg2rad(360.0 - opts.hillshade_azimuth), np.deg2rad(opts.hillshade_altitude)
    return np.clip(1.5 + 254 * (np.sin(alt) * np.cos(s) + np.cos(alt) * np.sin(s) * np.sin(az - aspect)), 0, 255)


def _windowed(name: str, z: np.ndarray, res: tuple[float, float], opts: UpstreamOptions) -> np.ndarray:
    if name == "rugosity":
        return W.rugosity_kernel(z, res_x=res[0], res_y=res[1])
    if name == "fractal_roughness":
        return W.fractal_roughness_kernel(z, window_size=opts.window_size)
    if name == "terrain_ruggedness_index":
        return W.tri_window_kernel(z, window_size=opts.window_size, algorithm=opts.tri_method)
    if name == "topographic_position_index":
        return K.tpi_kernel(z, window_size=opts.window_size)
    return K.roughness_kernel(z, window_size=opts.window_size)


def _block(block: np.ndarray, *, names: tuple[str, ...], pad: int, res: tuple[float, float], opts: UpstreamOptions,
           dtype: np.dtype, stacked: bool) -> np.ndarray:
    """The attributes ``names`` of one block padded by ``pad`` (interior shape, ``dtype``)."""
    z = np.asarray(block, dtype=np.float64)

    def crop(need: int) -> np.ndarray:
        k = pad - need
        return z if k == 0 else z[k : z.shape[0] - k, k : z.shape[1] - k]

    derivs: tuple[np.ndarray, ...] | None = None
    outs = []
    for n in names:
        if n in _SURFACE:
            if derivs is None:
                need = F.fit_depth(opts.surface_fit)
                first = not any(m in F.CURVATURES for m in names)
                derivs = F.derivatives(crop(need), res_x=res[0], res_y=res[1], fit=opts.surface_fit, first_only=first)
            outs.append(_surface(n, derivs, opts))
        else:
            outs.append(_windowed(n, crop(1 if n == "rugosity" else opts.window_size // 2), res, opts))
    cast = [o.astype(dtype, copy=False) for o in outs]
    return np.stack(cast) if stacked else cast[0]


def _texture_shading(dem: xr.DataArray, opts: UpstreamOptions, dtype: np.dtype) -> da.Array:
    ny, nx = dem.shape
    if ny * nx > TEXTURE_SHADING_MAX_PIXELS:
        raise InputError(f"texture_shading is a global FFT filter, computed on the whole DEM: {ny} x {nx} pixels is "
                         f"above its limit of {TEXTURE_SHADING_MAX_PIXELS} pixels; downsample or tile the DEM first")
    one = dem.data.rechunk((ny, nx))
    return one.map_blocks(lambda b: W.texture_shading_array(b, opts.texture_alpha).astype(dtype), dtype=dtype,
                          name="texture-shading")


def _wrap(dem: xr.DataArray, data: da.Array, name: str, opts: UpstreamOptions) -> xr.DataArray:
    units = UNITS[name] if opts.degrees or name not in ("slope", "aspect") else "radians"
    out = xr.DataArray(data, dims=dem.dims, coords=dem.coords, name=name, attrs={"units": units})
    if dem.rio.crs is not None:
        out = out.rio.write_crs(dem.rio.crs)
    return out.rio.write_transform(get_transform(dem)).rio.write_nodata(np.nan, encoded=False)


def upstream_attributes(dem: xr.DataArray, names: Sequence[str], opts: UpstreamOptions | None = None
                        ) -> list[xr.DataArray]:
    """Upstream 0.2.3's attributes ``names`` of a georeferenced DataArray, lazily, in one pass.

    Parameters
    ----------
    dem
        A 2-D, floating, georeferenced DataArray (as :func:`xdem.open_dem` gives), projected.
    names
        Names among :data:`UPSTREAM_NAMES`.
    opts
        Upstream's options (default: upstream's defaults, Florinsky fit, geometric curvatures).

    Returns
    -------
    list of xarray.DataArray
        One lazy DataArray per name, on ``dem``'s grid, dtype of ``dem``.
    """
    opts = opts or UpstreamOptions()
    names = tuple(names)
    unique = _check_names(names, opts)
    dem = open_dem(dem)  # dask-backed (keeps the chunks of a dask-backed DataArray)
    check_projected(dem, "terrain attributes")
    dtype = np.dtype(dem.dtype) if np.issubdtype(dem.dtype, np.floating) else np.dtype(np.float32)
    chunked = [n for n in unique if n != "texture_shading"]
    arrays: dict[str, da.Array] = {}
    if "texture_shading" in unique:
        arrays["texture_shading"] = _texture_shading(dem, opts, dtype)
    if chunked:
        depth = opts.depth(chunked)
        if min(dem.shape) < 2 * depth + 1:
            raise InputError(f"the DEM is {dem.shape[0]} x {dem.shape[1]} pixels, too small for a "
                             f"{2 * depth + 1} x {2 * depth + 1} terrain window")
        res = signed_resolution(dem)
        kernel = partial(_block, names=tuple(chunked), pad=depth, res=res, opts=opts, dtype=dtype,
                         stacked=len(chunked) > 1)
        out = map_overlap_nan(kernel, dem.data, depth=depth, dtype=dtype, trim=False,
                              leading=len(chunked) if len(chunked) > 1 else None, name="terrain-upstream")
        for i, n in enumerate(chunked):
            arrays[n] = out[i] if len(chunked) > 1 else out
    return [_wrap(dem, arrays[n], n, opts) for n in names]
