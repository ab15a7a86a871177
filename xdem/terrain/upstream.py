"""GlacioHack/xdem 0.2.3's call forms of the terrain attributes, on our lazy engine.

Two kinds of input, two behaviours:

* a numpy (or masked) array with ``resolution=``, as upstream: computed now, returned as a
  numpy array (NaN where the window holds a masked or NaN cell, and on the one-pixel edge),
  with upstream 0.2.3's conventions: flat cells have an aspect of 180 degrees, the
  hillshade is ``clip(1.5 + 254 * cos(i), 0, 255)`` with upstream's light formula, and
  ``curvature`` is ``-2 (z_xx + z_yy) * 100`` (``z_xx`` the second derivative: twice ours);
* a path or a georeferenced DataArray: lazy, our conventions, exactly as
  :mod:`xdem.terrain.attributes` (the upstream keyword names are accepted).

Upstream 0.2.3's default surface fit is ``"Florinsky"`` (a 5 x 5 fit) and its profile,
planform and max curvatures are the geometric ones of Minár et al. (2020): neither exists here
yet (issue 27), so they raise one :class:`~xdem.errors.InputError` line rather than give other
numbers; the default fit here is Horn. On a plane or a quadric all fits are exact and agree.

Examples
--------
>>> import numpy as np
>>> from xdem.terrain import get_terrain_attribute
>>> dem = np.repeat(np.arange(3.0), 3)[::-1].reshape(3, 3)
>>> slope, aspect = get_terrain_attribute(dem, ["slope", "aspect"], resolution=1, surface_fit="ZevenbergThorne")
>>> float(slope[1, 1]), float(aspect[1, 1])
(45.0, 180.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

import numpy as np
import xarray as xr
from affine import Affine

from xdem.errors import InputError
from xdem.io.grid import signed_resolution
from xdem.terrain import attributes as A
from xdem.typing import DEMLike

__all__ = ["get_terrain_attribute", "UPSTREAM_ONLY", "GEOMETRIC_CURVATURES"]

#: Upstream 0.2.3 attributes that have no counterpart here yet (issue 27).
UPSTREAM_ONLY = ("tangential_curvature", "flowline_curvature", "min_curvature", "rugosity", "fractal_roughness",
                 "texture_shading")
#: Upstream 0.2.3 computes these with Minár et al. (2020)'s formulas, ours with Zevenbergen & Thorne's.
GEOMETRIC_CURVATURES = ("profile_curvature", "planform_curvature", "maximum_curvature")
_NEEDS_RESOLUTION = ("slope", "hillshade", "curvature")
_WINDOWED = ("terrain_ruggedness_index", "topographic_position_index", "roughness")  # no surface fit
_FIRST_COLUMN_X = 0.5  # a numpy array is put on a grid whose first pixel centre is at (0.5 res, -0.5 res)


def fit_name(method: str | None, surface_fit: str | None) -> str:
    """Our surface-fit name for upstream's ``method``/``surface_fit`` (``surface_fit`` wins)."""
    name = surface_fit if surface_fit is not None else method
    if name is None:
        return "horn"
    if str(name).lower() == "florinsky":
        raise InputError("surface_fit='Florinsky' (upstream 0.2.3's 5 x 5 fit) is not available here (issue 27); "
                         "use 'Horn' (the default here) or 'ZevenbergThorne'")
    return str(name)


def _check_name(name: str) -> str:
    key = str(name).strip().lower()
    if key in UPSTREAM_ONLY:
        raise InputError(f"upstream's terrain attribute {name!r} is not available here yet (issue 27); "
                         f"available: {', '.join(A.ATTRIBUTES)}")
    return A._canonical(key)


def _resolution(resolution: float | tuple[float, float] | None, names: Sequence[str]) -> tuple[float, float]:
    if resolution is None:
        needing = [n for n in names if n in _NEEDS_RESOLUTION]
        if needing:
            raise InputError(f"'resolution' must be given with a numpy DEM array for {', '.join(needing)} "
                             "(e.g. resolution=dem_res), as in upstream xdem")
        return 1.0, 1.0
    if isinstance(resolution, (int, float, np.number)):
        rx = ry = float(resolution)
    else:
        rx, ry = (float(r) for r in resolution)
    if not (np.isfinite(rx) and np.isfinite(ry) and rx > 0 and ry > 0):
        raise InputError(f"'resolution' must be positive and finite, got {resolution!r}")
    if rx != ry and set(names) - set(_WINDOWED):  # as upstream; a DataArray of non-square pixels works
        raise InputError(f"a numpy DEM array needs square pixels (resolution {resolution!r} given), as in upstream "
                         "xdem; for other pixels pass a georeferenced DataArray")
    return float(rx), float(ry)


def as_dataarray(arr: np.ndarray, res: tuple[float, float]) -> xr.DataArray:
    """A numpy (masked) array as a georeferenced DataArray (north up, masked -> NaN, float64)."""
    data = np.ma.filled(np.ma.asarray(arr, dtype=np.float64), np.nan)
    if data.ndim != 2:
        raise InputError(f"a DEM array must be 2-D, got {data.ndim}-D of shape {data.shape}")
    rx, ry = res
    ny, nx = data.shape
    out = xr.DataArray(data, dims=("y", "x"), coords={"y": -(np.arange(ny) + 0.5) * ry,
                                                      "x": (np.arange(nx) + _FIRST_COLUMN_X) * rx})
    return out.rio.write_crs("EPSG:3857").rio.write_transform(Affine(rx, 0.0, 0.0, 0.0, -ry, 0.0))


def _check_resolution(dem: DEMLike, resolution: float | tuple[float, float] | None) -> None:
    """A ``resolution`` given with a DataArray must be that of its grid (never silently ignored)."""
    if resolution is None or not isinstance(dem, xr.DataArray):
        return
    rx, ry = _resolution(resolution, ())
    gx, gy = (abs(r) for r in signed_resolution(dem))
    if not (np.isclose(rx, gx) and np.isclose(ry, gy)):
        raise InputError(f"resolution={resolution!r} differs from the DEM's grid ({gx:g}, {gy:g}); "
                         "a DataArray carries its own resolution: leave 'resolution' out")


def _upstream_values(name: str, dem: xr.DataArray, slope: np.ndarray, aspect: np.ndarray, other: np.ndarray,
                     light: tuple[float, float, float], degrees: bool) -> np.ndarray:
    """Upstream 0.2.3's value of ``name`` from ours (slope and aspect in radians)."""
    if name == "slope":
        return np.degrees(slope) if degrees else slope
    flat = slope == 0
    asp = np.where(flat & np.isnan(aspect), np.pi, aspect)  # upstream: flat cells face 180 degrees
    if name == "aspect":
        return np.degrees(asp) if degrees else asp
    if name == "hillshade":
        azimuth, altitude, z_factor = light
        s = np.arctan(np.tan(slope) * z_factor)
        az, alt = np.deg2rad(360.0 - azimuth), np.deg2rad(altitude)
        return np.clip(1.5 + 254 * (np.sin(alt) * np.cos(s) + np.cos(alt) * np.sin(s) * np.sin(az - asp)), 0, 255)
    if name == "curvature":
        return 2.0 * other  # upstream 0.2.3: -2 (z_xx + z_yy) * 100; ours: -(z_xx + z_yy) * 100
    return other


def _on_array(arr: np.ndarray, names: tuple[str, ...], res: tuple[float, float], fit: str, degrees: bool,
              light: tuple[float, float, float], tri: str, window_size: int) -> list[np.ndarray]:
    for n in names:
        if n in GEOMETRIC_CURVATURES:
            raise InputError(f"upstream 0.2.3's {n} on an array (Minár et al. 2020, geometric) is not available "
                             f"here yet (issue 27); xdem.terrain.{n} of a DataArray gives ours (Zevenbergen & Thorne)")
    dtype = np.dtype(arr.dtype) if np.issubdtype(arr.dtype, np.floating) else np.dtype(np.float32)
    dem = as_dataarray(arr, res)
    others = [n for n in names if n not in ("slope", "aspect", "hillshade")]
    asked = ["slope", "aspect", *others]
    outs = A.get_terrain_attribute(dem, asked, method=fit, slope_units="radians", aspect_units="radians",
                                   tri_algorithm=tri, window_size=window_size)
    values = dict(zip(asked, xr.concat(outs, dim="attribute").values, strict=True))
    return [_upstream_values(n, dem, values["slope"], values["aspect"], values.get(n, values["slope"]), light,
                             degrees).astype(dtype) for n in names]


@overload
def get_terrain_attribute(dem: np.ndarray, attribute: str, resolution: float | tuple[float, float] | None = ...,
                          degrees: bool = ..., hillshade_altitude: float = ..., hillshade_azimuth: float = ...,
                          hillshade_z_factor: float = ..., slope_method: str | None = ..., surface_fit: str | None = ...,
                          curv_method: str = ..., tri_method: str = ..., window_size: int = ...,
                          **ours: str | float) -> np.ndarray: ...
@overload
def get_terrain_attribute(dem: np.ndarray, attribute: list[str] | tuple[str, ...],
                          resolution: float | tuple[float, float] | None = ..., degrees: bool = ...,
                          hillshade_altitude: float = ..., hillshade_azimuth: float = ..., hillshade_z_factor: float = ...,
                          slope_method: str | None = ..., surface_fit: str | None = ..., curv_method: str = ...,
                          tri_method: str = ..., window_size: int = ..., **ours: str | float) -> list[np.ndarray]: ...
@overload
def get_terrain_attribute(dem: DEMLike, attribute: str, resolution: float | tuple[float, float] | None = ...,
                          degrees: bool = ..., hillshade_altitude: float = ..., hillshade_azimuth: float = ...,
                          hillshade_z_factor: float = ..., slope_method: str | None = ..., surface_fit: str | None = ...,
                          curv_method: str = ..., tri_method: str = ..., window_size: int = ...,
                          **ours: str | float) -> xr.DataArray: ...
@overload
def get_terrain_attribute(dem: DEMLike, attribute: list[str] | tuple[str, ...],
                          resolution: float | tuple[float, float] | None = ..., degrees: bool = ...,
                          hillshade_altitude: float = ..., hillshade_azimuth: float = ..., hillshade_z_factor: float = ...,
                          slope_method: str | None = ..., surface_fit: str | None = ..., curv_method: str = ...,
                          tri_method: str = ..., window_size: int = ..., **ours: str | float) -> list[xr.DataArray]: ...
@overload
def get_terrain_attribute(dem: DEMLike | np.ndarray, attribute: str, resolution: float | tuple[float, float] | None = ...,
                          degrees: bool = ..., hillshade_altitude: float = ..., hillshade_azimuth: float = ...,
                          hillshade_z_factor: float = ..., slope_method: str | None = ..., surface_fit: str | None = ...,
                          curv_method: str = ..., tri_method: str = ..., window_size: int = ...,
                          **ours: str | float) -> np.ndarray | xr.DataArray: ...


def get_terrain_attribute(
    dem: DEMLike | np.ndarray,
    attribute: str | list[str] | tuple[str, ...],
    resolution: float | tuple[float, float] | None = None,
    degrees: bool = True,
    hillshade_altitude: float = 45.0,
    hillshade_azimuth: float = 315.0,
    hillshade_z_factor: float = 1.0,
    slope_method: str | None = None,
    surface_fit: str | None = None,
    curv_method: str = "geometric",
    tri_method: str = "Riley",
    window_size: int = 3,
    **ours: str | float,
) -> np.ndarray | list[np.ndarray] | xr.DataArray | list[xr.DataArray]:
    """One or several terrain attributes, called as upstream xdem 0.2.3 or as :mod:`xdem.terrain.attributes`.

    Parameters
    ----------
    dem
        A 2-D numpy or masked array (with ``resolution``), or anything :func:`xdem.open_dem`
        accepts (lazy result).
    attribute
        A name or a list of names: ours (:data:`xdem.terrain.ATTRIBUTES`) or upstream's
        (``"max_curvature"`` is ``"maximum_curvature"``).
    resolution
        Pixel size of a numpy array (a number or ``(x, y)``); with a DataArray, leave it out.
    degrees
        Slope and aspect in degrees (default) or radians.
    hillshade_altitude, hillshade_azimuth, hillshade_z_factor
        Upstream's names of the light (degrees) and vertical exaggeration.
    slope_method, surface_fit
        ``"Horn"`` (default here) or ``"ZevenbergThorne"``; ``"Florinsky"`` raises (issue 27).
    curv_method
        Upstream's curvature method; only ``"geometric"`` is accepted, for ``"curvature"``.
    tri_method
        ``"Riley"`` or ``"Wilson"``.
    window_size
        Odd window side for TPI and roughness.
    **ours
        Our keyword names (``method``, ``slope_units``, ``aspect_units``, ``azimuth``,
        ``altitude``, ``z_factor``, ``tri_algorithm``), for DataArrays.

    Returns
    -------
    numpy.ndarray, xarray.DataArray or a list of them
        numpy for a numpy input (computed), lazy DataArrays otherwise.

    Examples
    --------
    >>> import numpy as np
    >>> tri = get_terrain_attribute(np.zeros((5, 5)), "terrain_ruggedness_index")
    >>> float(tri[2, 2])
    0.0
    """
    given = [attribute] if isinstance(attribute, str) else list(attribute)
    names = tuple(_check_name(n) for n in given)
    if str(curv_method).lower() != "geometric":
        raise InputError(f"curv_method={curv_method!r} is not available here (issue 27); only 'geometric'")
    fit = fit_name(str(ours.pop("method")) if "method" in ours else slope_method, surface_fit)
    tri = str(ours.pop("tri_algorithm", tri_method))
    if isinstance(dem, np.ndarray):
        if ours:
            raise InputError(f"unexpected keyword(s) {', '.join(sorted(ours))} with a numpy array; "
                             "use upstream's names (degrees=, hillshade_azimuth=...)")
        light = (float(hillshade_azimuth), float(hillshade_altitude), float(hillshade_z_factor))
        out = _on_array(dem, names, _resolution(resolution, names), fit, degrees, light, tri, window_size)
        return out[0] if isinstance(attribute, str) else out
    _check_resolution(dem, resolution)
    units = "degrees" if degrees else "radians"
    kw = {"slope_units": units, "aspect_units": units, "azimuth": hillshade_azimuth, "altitude": hillshade_altitude,
          "z_factor": hillshade_z_factor, **ours}
    outs = A.get_terrain_attribute(dem, list(given), method=fit, tri_algorithm=tri, window_size=window_size,
                                   **kw)  # type: ignore[arg-type]
    return outs[0] if isinstance(attribute, str) else outs
