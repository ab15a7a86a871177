"""GlacioHack/xdem 0.2.3's call forms of the terrain attributes, on our lazy engine.

Which meaning an input gets (the rule):

* **upstream's objects** -- a numpy (or masked) array with ``resolution=`` (computed now,
  returned as numpy, in the array's float dtype or float32), or an :class:`xdem.DEM` (lazy,
  returned as DEMs) -- get upstream 0.2.3's meaning for every name, with its defaults:
  ``surface_fit="Florinsky"`` (the 5 x 5 third-order fit), Minár et al. (2020)'s curvatures
  (``curv_method="geometric"``), flat cells with an aspect of 180 degrees, the hillshade
  ``clip(1.5 + 254 * cos(i), 0, 255)``, ``curvature`` as ``-2 (z_xx + z_yy) * 100``, and
  NaN edges as deep as the window (2 pixels for Florinsky), see
  :mod:`xdem.terrain.upstream_engine`;
* **a path or a georeferenced DataArray** (our objects) -- our names keep our meaning and
  defaults, exactly as :mod:`xdem.terrain.attributes` (Horn fit, agreeing with ``gdaldem``;
  ``surface_fit="Florinsky"`` is accepted for slope, aspect and hillshade); the names only
  upstream has (``max_curvature``, ``min_curvature``, ``tangential_curvature``,
  ``flowline_curvature``, ``rugosity``, ``fractal_roughness``, ``texture_shading``) get
  upstream's meaning and defaults, lazily.

``"maximum_curvature"`` is ours (Zevenbergen & Thorne's profile or planform curvature, the
larger in magnitude); ``"max_curvature"`` is upstream's (the larger principal curvature), and on
upstream's objects both names mean upstream's.

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
from typing import Protocol, TypeGuard, cast, overload

import numpy as np
import xarray as xr
from affine import Affine

from xdem.errors import InputError
from xdem.io.grid import signed_resolution
from xdem.terrain import attributes as A
from xdem.terrain.upstream_engine import UPSTREAM_NAMES, UpstreamOptions, upstream_attributes
from xdem.typing import DEMLike

__all__ = ["get_terrain_attribute", "UPSTREAM_ONLY", "upstream_of_dataarray"]

#: Upstream 0.2.3 attributes that have no counterpart of ours: upstream's meaning on every input.
UPSTREAM_ONLY = ("max_curvature", "min_curvature", "tangential_curvature", "flowline_curvature", "rugosity",
                 "fractal_roughness", "texture_shading")
_NEEDS_RESOLUTION = ("slope", "hillshade", "rugosity", *(n for n in UPSTREAM_NAMES if n.endswith("curvature")))
_WINDOWED = ("terrain_ruggedness_index", "topographic_position_index", "roughness", "fractal_roughness",
             "texture_shading")  # no surface fit, no resolution
_FIRST_COLUMN_X = 0.5  # a numpy array is put on a grid whose first pixel centre is at (0.5 res, -0.5 res)
_UPSTREAM_ALIASES = {"maximum_curvature": "max_curvature", "maximum": "max_curvature", "minimum_curvature":
                     "min_curvature", "tri": "terrain_ruggedness_index", "tpi": "topographic_position_index",
                     "profile": "profile_curvature", "planform": "planform_curvature",
                     "plan_curvature": "planform_curvature"}


def fit_name(method: str | None, surface_fit: str | None, default: str = "horn") -> str:
    """The surface fit asked with upstream's ``method``/``surface_fit`` (the deprecated ``method``
    overrides ``surface_fit``, as upstream)."""
    name = method if method is not None else surface_fit
    return default if name is None else str(name)


def upstream_name(name: str) -> str:
    """Upstream's canonical name of an attribute (``"maximum_curvature"`` -> ``"max_curvature"``)."""
    return A.canonical_name(name, UPSTREAM_NAMES, _UPSTREAM_ALIASES)


def _is_ours(name: str) -> bool:
    """A name of ours (our meaning on a DataArray) rather than one only upstream has."""
    key = str(name).strip().lower().replace("-", "_")
    return key not in UPSTREAM_ONLY and key not in ("min", "minimum_curvature")


class _DEMObject(Protocol):
    """What this module needs of an :class:`xdem.DEM`."""

    def to_xarray(self) -> xr.DataArray: ...

    def _like(self, arr: xr.DataArray) -> object: ...


def _is_dem_object(dem: object) -> TypeGuard[_DEMObject]:
    """An :class:`xdem.DEM` (told by its methods: this module cannot import :mod:`xdem.dem`)."""
    return type(dem).__name__ == "DEM" and hasattr(dem, "_like") and hasattr(dem, "to_xarray")


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


def upstream_of_dataarray(dem: xr.DataArray, names: Sequence[str], opts: UpstreamOptions) -> list[xr.DataArray]:
    """Upstream's attributes (any of its names or aliases) of a DataArray, lazily."""
    return upstream_attributes(dem, [upstream_name(n) for n in names], opts)


def _on_array(arr: np.ndarray, names: Sequence[str], res: tuple[float, float], opts: UpstreamOptions
              ) -> list[np.ndarray]:
    dtype = np.dtype(arr.dtype) if np.issubdtype(arr.dtype, np.floating) else np.dtype(np.float32)
    outs = upstream_of_dataarray(as_dataarray(arr, res), names, opts)
    values = xr.concat(outs, dim="attribute").values if len(outs) > 1 else outs[0].values[None]
    return [v.astype(dtype) for v in values]


def _on_ours(dem: DEMLike, given: list[str], fit: str, opts: UpstreamOptions, ours: dict[str, str | float]
             ) -> list[xr.DataArray]:
    """A path or DataArray: our names with our meaning, upstream-only names with upstream's."""
    mine = [n for n in given if _is_ours(n)]
    theirs = [n for n in given if not _is_ours(n)]
    got: dict[str, xr.DataArray] = {}
    if fit.lower() == "florinsky" and any("curvature" in A._canonical(n) for n in mine):
        raise InputError("our curvatures of a DataArray use Zevenbergen & Thorne's fit; for upstream's with "
                         "Florinsky's fit pass an xdem.DEM or a numpy array with resolution=")
    if mine:
        units = "degrees" if opts.degrees else "radians"
        kw = {"slope_units": units, "aspect_units": units, "azimuth": opts.hillshade_azimuth,
              "altitude": opts.hillshade_altitude, "z_factor": opts.hillshade_z_factor, **ours}
        outs = A.get_terrain_attribute(dem, list(mine), method=fit, tri_algorithm=opts.tri_method,
                                       window_size=opts.window_size, **kw)  # type: ignore[arg-type]
        got.update(zip(mine, outs, strict=True))
    if theirs:
        got.update(zip(theirs, upstream_of_dataarray(A._prepare(dem, 0), theirs, opts), strict=True))
    return [got[n] for n in given]


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
        A 2-D numpy or masked array (with ``resolution``), an :class:`xdem.DEM`, or anything
        :func:`xdem.open_dem` accepts (lazy result).
    attribute
        A name or a list of names: ours (:data:`xdem.terrain.ATTRIBUTES`) or upstream's
        (:data:`xdem.terrain.upstream_engine.UPSTREAM_NAMES`).
    resolution
        Pixel size of a numpy array (a number or ``(x, y)``); with a DataArray, leave it out.
    degrees
        Slope and aspect in degrees (default) or radians.
    hillshade_altitude, hillshade_azimuth, hillshade_z_factor
        Upstream's names of the light (degrees) and vertical exaggeration.
    slope_method, surface_fit
        ``"Florinsky"`` (upstream's default, on numpy arrays and DEMs, and for the upstream-only
        names), ``"ZevenbergThorne"`` or ``"Horn"`` (the default of our names on a DataArray).
    curv_method
        ``"geometric"`` (default) or ``"directional"``, for upstream's curvatures.
    tri_method
        ``"Riley"`` or ``"Wilson"``.
    window_size
        Odd window side for TPI, roughness, and (upstream's) TRI and fractal roughness.
    **ours
        ``texture_alpha`` (upstream's, 0.8 by default), or our keyword names (``method``,
        ``slope_units``, ``aspect_units``, ``azimuth``, ``altitude``, ``z_factor``,
        ``tri_algorithm``), for DataArrays.

    Returns
    -------
    numpy.ndarray, xarray.DataArray, xdem.DEM or a list of them
        numpy for a numpy input (computed), lazy DEMs for a DEM, lazy DataArrays otherwise.

    Examples
    --------
    >>> import numpy as np
    >>> tri = get_terrain_attribute(np.zeros((5, 5)), "terrain_ruggedness_index")
    >>> float(tri[2, 2])
    0.0
    """
    given = [attribute] if isinstance(attribute, str) else list(attribute)
    if not given:
        raise InputError("no terrain attribute requested; pass a name such as 'slope' or a list of names")
    asked = str(ours.pop("method")) if "method" in ours else slope_method
    alpha = float(ours.pop("texture_alpha", 0.8))
    tri = str(ours.pop("tri_algorithm", tri_method))
    opts = UpstreamOptions(surface_fit=fit_name(asked, surface_fit, "florinsky"), curv_method=curv_method,
                           degrees=degrees, hillshade_altitude=hillshade_altitude, hillshade_azimuth=hillshade_azimuth,
                           hillshade_z_factor=hillshade_z_factor, tri_method=tri, window_size=window_size,
                           texture_alpha=alpha)
    single = isinstance(attribute, str)
    if isinstance(dem, np.ndarray):
        if ours:
            raise InputError(f"unexpected keyword(s) {', '.join(sorted(ours))} with a numpy array; "
                             "use upstream's names (degrees=, hillshade_azimuth=...)")
        names = [upstream_name(n) for n in given]
        out = _on_array(dem, names, _resolution(resolution, names), opts)
        return out[0] if single else out
    if _is_dem_object(dem):
        if ours:
            raise InputError(f"unexpected keyword(s) {', '.join(sorted(ours))} with an xdem.DEM; use upstream's names")
        grid = dem.to_xarray()
        _check_resolution(grid, resolution)
        like = cast(list[xr.DataArray], [dem._like(o) for o in upstream_of_dataarray(grid, given, opts)])
        return like[0] if single else like
    _check_resolution(dem, resolution)
    if str(curv_method).lower() != "geometric" and any(_is_ours(n) and "curvature" in str(n) for n in given):
        raise InputError(f"curv_method={curv_method!r} applies to upstream's curvatures (numpy arrays, xdem.DEM, "
                         "max/min/tangential/flowline_curvature); ours on a DataArray are Zevenbergen & Thorne's")
    outs = _on_ours(dem, given, fit_name(asked, surface_fit), opts, ours)
    return outs[0] if single else outs
