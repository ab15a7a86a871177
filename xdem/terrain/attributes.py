"""Lazy terrain attributes of a DEM: dask ``map_overlap`` runners and public functions.

Each public function opens its input with :func:`xdem.open_dem` (a path, or a numpy- or
dask-backed DataArray), checks the CRS is projected, and returns a lazy DataArray on the same
grid (coords, CRS, transform) as the DEM; nothing is computed until asked. Edges of the DEM
are NaN (the overlap is filled with NaN: no wrapping, no reflection), and a NaN in the DEM
only affects the cells whose window contains it. float32 DEMs give float32 attributes and
float64 DEMs float64; the kernels compute in float64 inside.

:func:`get_terrain_attribute` computes several attributes in ONE ``map_overlap`` pass that
produces a stacked block per chunk, then splits it lazily: computing the outputs together
(``dask.compute(*outs)``) reads the DEM once.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from functools import partial
from typing import Any, overload

import dask.array as da
import numpy as np
import xarray as xr

from xdem.errors import InputError
from xdem.io.grid import check_projected, get_transform, signed_resolution
from xdem.io.open import open_dem
from xdem.overlap import map_overlap_nan
from xdem.terrain import fits as F
from xdem.terrain import kernels as K
from xdem.terrain.options import TerrainOptions
from xdem.typing import DEMLike

__all__ = [
    "ATTRIBUTES",
    "get_terrain_attribute",
    "slope",
    "aspect",
    "hillshade",
    "curvature",
    "profile_curvature",
    "planform_curvature",
    "maximum_curvature",
    "terrain_ruggedness_index",
    "topographic_position_index",
    "roughness",
]

#: Canonical attribute names, with their units.
ATTRIBUTES: dict[str, str] = {
    "slope": "degrees",
    "aspect": "degrees",
    "hillshade": "1-255",
    "curvature": "1/100 m-1",
    "profile_curvature": "1/100 m-1",
    "planform_curvature": "1/100 m-1",
    "maximum_curvature": "1/100 m-1",
    "terrain_ruggedness_index": "m",
    "topographic_position_index": "m",
    "roughness": "m",
}
_ALIASES = {
    "tri": "terrain_ruggedness_index",
    "tpi": "topographic_position_index",
    "profile": "profile_curvature",
    "planform": "planform_curvature",
    "plan_curvature": "planform_curvature",
    "maximum": "maximum_curvature",
}


def canonical_name(name: str, names: Collection[str], aliases: Mapping[str, str]) -> str:
    """``name`` as one of ``names`` (case, ``-``/``_`` and ``aliases`` forgiven), or one clear line."""
    key = str(name).strip().lower().replace("-", "_")
    key = aliases.get(key, key)
    if key not in names:
        raise InputError(f"unknown terrain attribute {name!r}; choose from {', '.join(names)}")
    return key


def _canonical(name: str) -> str:
    return canonical_name(name, ATTRIBUTES, _ALIASES)


def _depth(name: str, opts: TerrainOptions) -> int:
    return opts.window_depth(name)


def _crop(z: np.ndarray, have: int, need: int) -> np.ndarray:
    """Reduce the padding of ``z`` from ``have`` to ``need`` pixels."""
    k = have - need
    return z if k == 0 else z[k : z.shape[0] - k, k : z.shape[1] - k]


def _attribute_block(
    name: str, z: np.ndarray, depth: int, cache: dict, *, res_x: float, res_y: float, opts: TerrainOptions
) -> np.ndarray:
    """One attribute (float64, interior shape, final units) of a block padded by ``depth``."""
    need = _depth(name, opts)
    zz = _crop(z, depth, need)
    if name in ("slope", "aspect", "hillshade"):
        if "gradient" not in cache and opts.method == "florinsky":
            cache["gradient"] = F.derivatives(zz, res_x=res_x, res_y=res_y, fit="florinsky", first_only=True)[:2]
        elif "gradient" not in cache:
            cache["gradient"] = K.gradient_kernel(zz, res_x=res_x, res_y=res_y, method=opts.method)
        dzdx, dzdy = cache["gradient"]
        if name == "hillshade":
            return K._hillshade_from_gradient(
                dzdx, dzdy, azimuth=opts.azimuth, altitude=opts.altitude, z_factor=opts.z_factor
            )
        if name == "slope":
            units = opts.slope_units
            if units == "percent":
                return np.multiply(K._gradient_norm(dzdx, dzdy), 100.0)
            s = K._slope_from_gradient(dzdx, dzdy)
            return np.degrees(s, out=s) if units == "degrees" else s
        a = K._aspect_from_gradient(dzdx, dzdy)
        return np.degrees(a, out=a) if opts.aspect_units == "degrees" else a
    if name.endswith("curvature"):
        if "curvature" not in cache:  # coefficients and NaN mask shared by the curvature kinds
            cache["curvature"] = (K.curvature_coefficients(zz, res_x=res_x, res_y=res_y), K.nan_window_mask(zz, 1))
        coefs, bad = cache["curvature"]
        out = K._curvature_from_coefficients(*coefs, kind=name.replace("_curvature", ""))
        out[bad] = np.nan
        return out
    if name == "terrain_ruggedness_index":
        return K.tri_kernel(zz, algorithm=opts.tri_algorithm)
    if name == "topographic_position_index":
        return K.tpi_kernel(zz, window_size=opts.window_size)
    return K.roughness_kernel(zz, window_size=opts.window_size)


def _cast(name: str, values: np.ndarray, dtype: np.dtype, opts: TerrainOptions) -> np.ndarray:
    out = values.astype(dtype, copy=False)
    if name == "aspect":  # rounding can turn 359.99999 into 360: keep [0, 360)
        full = 360.0 if opts.aspect_units == "degrees" else dtype.type(2.0 * np.pi)
        out[out >= full] = 0
    return out


def _terrain_block_kernel(
    block: np.ndarray,
    *,
    names: tuple[str, ...],
    pad: int,
    res_x: float,
    res_y: float,
    out_dtype: np.dtype,
    opts: TerrainOptions,
    stacked: bool,
) -> np.ndarray:
    """Kernel mapped by :func:`_run`: the attributes of one padded block, in ``dtype``."""
    z = np.asarray(block, dtype=np.float64)
    cache: dict = {}
    outs = [
        _cast(n, _attribute_block(n, z, pad, cache, res_x=res_x, res_y=res_y, opts=opts), out_dtype, opts) for n in names
    ]
    return np.stack(outs) if stacked else outs[0]


def _run(data: da.Array, names: tuple[str, ...], *, res_x: float, res_y: float, opts: TerrainOptions, stacked: bool):
    """Map the kernel over ``data`` with ``map_overlap`` (NaN boundary), lazily."""
    depth = max(_depth(n, opts) for n in names)
    dtype = np.dtype(data.dtype)
    kernel = partial(
        _terrain_block_kernel, names=names, pad=depth, res_x=res_x, res_y=res_y, out_dtype=dtype, opts=opts, stacked=stacked
    )
    return map_overlap_nan(
        kernel, data, depth=depth, dtype=dtype, trim=False, leading=len(names) if stacked else None, name="terrain"
    )


def _prepare(dem: Any, depth: int) -> xr.DataArray:
    if isinstance(dem, (xr.DataArray, str, os.PathLike)) or type(dem).__name__ == "Raster":
        dem = open_dem(dem)  # keeps the chunks of a dask-backed DataArray
    else:
        raise InputError(
            f"terrain attributes need a DEM (path or georeferenced xarray.DataArray), got a {type(dem).__name__}; "
            "wrap numpy arrays with xdem.open_dem or use xdem.terrain.kernels directly"
        )
    check_projected(dem, "terrain attributes")
    ny, nx = dem.shape
    if ny < 2 * depth + 1 or nx < 2 * depth + 1:
        raise InputError(
            f"the DEM is {ny} x {nx} pixels, too small for a {2 * depth + 1}x{2 * depth + 1} terrain window; "
            f"it needs at least {2 * depth + 1} rows and columns"
        )
    return dem


def _wrap(dem: xr.DataArray, data: da.Array, name: str, opts: TerrainOptions) -> xr.DataArray:
    units = ATTRIBUTES[name]
    if name == "slope":
        units = opts.slope_units
    elif name == "aspect":
        units = opts.aspect_units
    out = xr.DataArray(data, dims=dem.dims, coords=dem.coords, name=name, attrs={"units": units})
    if dem.rio.crs is not None:
        out = out.rio.write_crs(dem.rio.crs)
    out = out.rio.write_transform(get_transform(dem))
    return out.rio.write_nodata(np.nan, encoded=False)


# Typing only: a name gives one DataArray, a list or tuple of names a list. A str is itself a
# Sequence[str], so the last overload (any other sequence) stays a union rather than overlapping.
@overload
def get_terrain_attribute(
    dem: DEMLike,
    attribute: str,
    *,
    method: str = "horn",
    slope_units: str = "degrees",
    aspect_units: str = "degrees",
    azimuth: float = 315.0,
    altitude: float = 45.0,
    z_factor: float = 1.0,
    tri_algorithm: str = "riley",
    window_size: int = 3,
) -> xr.DataArray: ...


@overload
def get_terrain_attribute(
    dem: DEMLike,
    attribute: list[str] | tuple[str, ...],
    *,
    method: str = "horn",
    slope_units: str = "degrees",
    aspect_units: str = "degrees",
    azimuth: float = 315.0,
    altitude: float = 45.0,
    z_factor: float = 1.0,
    tri_algorithm: str = "riley",
    window_size: int = 3,
) -> list[xr.DataArray]: ...


@overload
def get_terrain_attribute(
    dem: DEMLike,
    attribute: Sequence[str],
    *,
    method: str = "horn",
    slope_units: str = "degrees",
    aspect_units: str = "degrees",
    azimuth: float = 315.0,
    altitude: float = 45.0,
    z_factor: float = 1.0,
    tri_algorithm: str = "riley",
    window_size: int = 3,
) -> xr.DataArray | list[xr.DataArray]: ...


def get_terrain_attribute(
    dem: DEMLike,
    attribute: str | Sequence[str],
    *,
    method: str = "horn",
    slope_units: str = "degrees",
    aspect_units: str = "degrees",
    azimuth: float = 315.0,
    altitude: float = 45.0,
    z_factor: float = 1.0,
    tri_algorithm: str = "riley",
    window_size: int = 3,
) -> xr.DataArray | list[xr.DataArray]:
    """One or several terrain attributes of ``dem``, lazily, in a single pass over the data.

    Parameters
    ----------
    dem
        Anything :func:`xdem.open_dem` accepts (path, numpy- or dask-backed DataArray), in a
        projected CRS.
    attribute
        A name or a list of names among :data:`ATTRIBUTES` (``"tri"``, ``"tpi"``,
        ``"profile"``, ``"planform"``, ``"maximum"`` are accepted as short names).
    method
        Surface fit for slope, aspect and hillshade: ``"horn"``, ``"zevenbergthorne"`` or
        ``"florinsky"`` (5 x 5, :mod:`xdem.terrain.fits`). Curvatures always use the
        Zevenbergen & Thorne fit (upstream's curvatures: :mod:`xdem.terrain.upstream_engine`).
    slope_units, aspect_units
        ``"degrees"``, ``"percent"`` (slope only) or ``"radians"``.
    azimuth, altitude, z_factor
        Hillshade light direction (degrees clockwise from north), elevation above the horizon
        (degrees) and vertical exaggeration.
    tri_algorithm
        ``"riley"`` (default) or ``"wilson"``, as gdaldem's ``-alg``.
    window_size
        Odd window side for TPI and roughness (3 = gdaldem's).

    Returns
    -------
    xarray.DataArray or list of xarray.DataArray
        One lazy DataArray per attribute (a list if ``attribute`` is a list), same grid as
        ``dem``. Several outputs share one ``map_overlap`` graph: compute them together with
        ``dask.compute`` to read the DEM once.

    Raises
    ------
    xdem.errors.InputError
        Unknown attribute, method or units; DEM smaller than the window.
    xdem.errors.CRSError
        The DEM has no CRS or a geographic one.

    Examples
    --------
    >>> import dask, xdem
    >>> dem = xdem.open_dem(xdem.examples.get_path("lidar"))
    >>> s, a = xdem.terrain.get_terrain_attribute(dem, ["slope", "aspect"])
    >>> s, a = dask.compute(s, a)  # one read of the DEM
    """
    single = isinstance(attribute, str)
    given: Sequence[str] = [attribute] if isinstance(attribute, str) else attribute
    names = tuple(dict.fromkeys(_canonical(n) for n in given))
    if not names:
        raise InputError("no terrain attribute requested; pass a name such as 'slope' or a list of names")
    opts = TerrainOptions(
        method=method, slope_units=slope_units, aspect_units=aspect_units, azimuth=azimuth, altitude=altitude,
        z_factor=z_factor, tri_algorithm=tri_algorithm, window_size=window_size,
    )
    depth = max(_depth(n, opts) for n in names)
    dem = _prepare(dem, depth)
    res_x, res_y = signed_resolution(dem)
    if len(names) == 1:
        outs = [_wrap(dem, _run(dem.data, names, res_x=res_x, res_y=res_y, opts=opts, stacked=False), names[0], opts)]
    else:
        stack = _run(dem.data, names, res_x=res_x, res_y=res_y, opts=opts, stacked=True)
        outs = [_wrap(dem, stack[i], n, opts) for i, n in enumerate(names)]
    if single:
        return outs[0]
    requested = [_canonical(n) for n in attribute]
    return [outs[names.index(n)] for n in requested]


def slope(dem: DEMLike, *, method: str = "horn", units: str = "degrees") -> xr.DataArray:
    """Slope of ``dem`` (lazy): ``"degrees"`` (default), ``"percent"`` (100 tan) or ``"radians"``.

    Examples
    --------
    >>> import xdem
    >>> s = xdem.terrain.slope(xdem.examples.get_path("lidar"))
    """
    return get_terrain_attribute(dem, "slope", method=method, slope_units=units)


def aspect(dem: DEMLike, *, method: str = "horn", units: str = "degrees") -> xr.DataArray:
    """Aspect of ``dem`` (lazy): direction the slope faces, clockwise from north, in [0, 360).

    Flat cells (zero gradient) are NaN (gdaldem writes -9999 there, or 0 with ``-zero_for_flat``).

    Examples
    --------
    >>> import xdem
    >>> a = xdem.terrain.aspect(xdem.examples.get_path("lidar"))
    """
    return get_terrain_attribute(dem, "aspect", method=method, aspect_units=units)


def hillshade(
    dem: DEMLike, *, azimuth: float = 315.0, altitude: float = 45.0, z_factor: float = 1.0, method: str = "horn"
) -> xr.DataArray:
    """Hillshade of ``dem`` (lazy) on gdaldem's scale, ``1 + 254 * max(cos(i), 0)`` in [1, 255].

    ``i`` is the angle between the surface normal and the light, coming from ``azimuth``
    (degrees clockwise from north) at ``altitude`` degrees; float, not rounded.

    Examples
    --------
    >>> import xdem
    >>> h = xdem.terrain.hillshade(xdem.examples.get_path("lidar"), azimuth=270)
    """
    return get_terrain_attribute(dem, "hillshade", method=method, azimuth=azimuth, altitude=altitude, z_factor=z_factor)


def curvature(dem: DEMLike) -> xr.DataArray:
    """Total curvature ``-2 (D + E) * 100`` (Zevenbergen & Thorne 1987), 1/100 m^-1, convex > 0.

    See :func:`xdem.terrain.kernels.curvature_kernel` for the formulas.

    Examples
    --------
    >>> import xdem
    >>> c = xdem.terrain.curvature(xdem.examples.get_path("lidar"))
    """
    return get_terrain_attribute(dem, "curvature")


def profile_curvature(dem: DEMLike) -> xr.DataArray:
    """Profile curvature (along the steepest slope), 1/100 m^-1, convex > 0 (lazy).

    Examples
    --------
    >>> import xdem
    >>> c = xdem.terrain.profile_curvature(xdem.examples.get_path("lidar"))
    """
    return get_terrain_attribute(dem, "profile_curvature")


def planform_curvature(dem: DEMLike) -> xr.DataArray:
    """Planform curvature (across the slope, along the contour), 1/100 m^-1, convex > 0 (lazy).

    Examples
    --------
    >>> import xdem
    >>> c = xdem.terrain.planform_curvature(xdem.examples.get_path("lidar"))
    """
    return get_terrain_attribute(dem, "planform_curvature")


def maximum_curvature(dem: DEMLike) -> xr.DataArray:
    """Of profile and planform curvature, the one of larger magnitude (signed), 1/100 m^-1 (lazy).

    Examples
    --------
    >>> import xdem
    >>> c = xdem.terrain.maximum_curvature(xdem.examples.get_path("lidar"))
    """
    return get_terrain_attribute(dem, "maximum_curvature")


def terrain_ruggedness_index(dem: DEMLike, *, algorithm: str = "riley") -> xr.DataArray:
    """Terrain ruggedness index (lazy): ``"riley"`` (default, Riley et al. 1999) or ``"wilson"``.

    Examples
    --------
    >>> import xdem
    >>> t = xdem.terrain.terrain_ruggedness_index(xdem.examples.get_path("lidar"))
    """
    return get_terrain_attribute(dem, "terrain_ruggedness_index", tri_algorithm=algorithm)


def topographic_position_index(dem: DEMLike, *, window_size: int = 3) -> xr.DataArray:
    """Topographic position index (lazy): centre minus the mean of its neighbours in the window.

    Examples
    --------
    >>> import xdem
    >>> t = xdem.terrain.topographic_position_index(xdem.examples.get_path("lidar"))
    """
    return get_terrain_attribute(dem, "topographic_position_index", window_size=window_size)


def roughness(dem: DEMLike, *, window_size: int = 3) -> xr.DataArray:
    """Roughness (lazy): largest minus smallest elevation of the window.

    Examples
    --------
    >>> import xdem
    >>> r = xdem.terrain.roughness(xdem.examples.get_path("lidar"))
    """
    return get_terrain_attribute(dem, "roughness", window_size=window_size)
