"""One terrain attribute per function, callable as upstream xdem 0.2.3 writes them or as before.

A numpy (masked) array with ``resolution=`` gives a numpy array, and an :class:`xdem.DEM` a lazy
DEM, with upstream 0.2.3's meaning and defaults (Florinsky's fit, Minár et al. 2020's
curvatures); a path or a DataArray gives a lazy DataArray with ours for our names and
upstream's for the names only upstream has (see :mod:`xdem.terrain.upstream` for the rule).

Examples
--------
>>> import numpy as np
>>> from xdem.terrain import slope
>>> plane = np.add.outer(np.zeros(5), np.arange(5.0))  # rises 1 m per 1 m pixel to the east
>>> round(float(slope(plane, resolution=1)[2, 2]), 9)  # Florinsky's 5 x 5 fit, upstream's default
45.0
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from xdem.errors import InputError
from xdem.terrain.upstream import get_terrain_attribute
from xdem.typing import DEMLike

__all__ = ["slope", "aspect", "hillshade", "curvature", "profile_curvature", "planform_curvature",
           "maximum_curvature", "max_curvature", "terrain_ruggedness_index", "topographic_position_index", "roughness",
           "rugosity", "fractal_roughness", "tangential_curvature", "flowline_curvature", "min_curvature",
           "texture_shading"]

Resolution = float | tuple[float, float] | None
Result = np.ndarray | xr.DataArray


def slope(dem: DEMLike | np.ndarray, method: str | None = None, surface_fit: str | None = None, degrees: bool = True,
          resolution: Resolution = None, *, units: str | None = None) -> Result:
    """Slope: degrees (default), radians (``degrees=False``), or ``units="percent"`` (DataArrays).

    ``method``/``surface_fit``: ``"Florinsky"`` (default on numpy arrays and DEMs, as upstream),
    ``"ZevenbergThorne"`` or ``"Horn"`` (default on DataArrays, as gdaldem).

    Examples
    --------
    >>> import xdem
    >>> s = xdem.terrain.slope(xdem.examples.get_path("lidar"))  # lazy
    """
    if units is None:
        return get_terrain_attribute(dem, "slope", resolution, degrees, slope_method=method, surface_fit=surface_fit)
    return get_terrain_attribute(dem, "slope", resolution, degrees, slope_method=method, surface_fit=surface_fit,
                                 slope_units=units)


def aspect(dem: DEMLike | np.ndarray, method: str | None = None, surface_fit: str | None = None, degrees: bool = True,
           *, units: str | None = None) -> Result:
    """Aspect, clockwise from north, the direction the slope faces, in [0, 360).

    Flat cells: 180 degrees on numpy arrays (upstream), NaN on DataArrays (ours).

    Examples
    --------
    >>> import numpy as np
    >>> north_high = np.repeat(np.arange(3.0), 3)[::-1].reshape(3, 3)
    >>> float(aspect(north_high, surface_fit="ZevenbergThorne")[1, 1])
    180.0
    """
    if units is None:
        return get_terrain_attribute(dem, "aspect", None, degrees, slope_method=method, surface_fit=surface_fit)
    return get_terrain_attribute(dem, "aspect", None, degrees, slope_method=method, surface_fit=surface_fit,
                                 aspect_units=units)


def hillshade(dem: DEMLike | np.ndarray, method: str | None = None, surface_fit: str | None = None,
              azimuth: float = 315.0, altitude: float = 45.0, z_factor: float = 1.0,
              resolution: Resolution = None) -> Result:
    """Hillshade lit from ``azimuth`` (degrees clockwise from north) at ``altitude`` degrees.

    numpy arrays: upstream's ``clip(1.5 + 254 cos(i), 0, 255)``; DataArrays: ours (gdaldem's
    ``1 + 254 max(cos(i), 0)``).

    Examples
    --------
    >>> import numpy as np
    >>> round(float(hillshade(np.zeros((5, 5)), resolution=1)[2, 2]), 4)  # flat: 1.5 + 254 sin(45 deg)
    181.1051
    """
    return get_terrain_attribute(dem, "hillshade", resolution, hillshade_altitude=altitude,
                                 hillshade_azimuth=azimuth, hillshade_z_factor=z_factor, slope_method=method,
                                 surface_fit=surface_fit)


def curvature(dem: DEMLike | np.ndarray, resolution: Resolution = None, surface_fit: str | None = None) -> Result:
    """Curvature in 100/m, convex > 0: upstream's ``-2 (z_xx + z_yy) * 100`` on numpy arrays, ours
    (``-(z_xx + z_yy) * 100``, half of it) on DataArrays.

    Examples
    --------
    >>> import numpy as np
    >>> y, x = np.mgrid[-2:3, -2:3].astype(float)
    >>> round(float(curvature(0.01 * (x**2 + y**2), resolution=1)[2, 2]), 9)  # z_xx = z_yy = 0.02 per m
    -8.0
    """
    return get_terrain_attribute(dem, "curvature", resolution, surface_fit=fit_or_zt(surface_fit))


def fit_or_zt(surface_fit: str | None) -> str | None:
    """Curvatures need a quadric fit: ``"Horn"`` is refused as upstream does."""
    if surface_fit is not None and surface_fit.lower() == "horn":
        raise InputError("the 'Horn' surface fit cannot give curvatures; use 'ZevenbergThorne'")
    return surface_fit


def _curvature(name: str, dem: DEMLike | np.ndarray, resolution: Resolution, surface_fit: str | None,
               curv_method: str) -> Result:
    return get_terrain_attribute(dem, name, resolution, surface_fit=fit_or_zt(surface_fit), curv_method=curv_method)


def profile_curvature(dem: DEMLike | np.ndarray, resolution: Resolution = None, surface_fit: str | None = None,
                      curv_method: str = "geometric") -> Result:
    """Profile curvature (100/m, convex > 0): the normal curvature along the slope line.

    numpy arrays and DEMs: upstream's (Minár et al. 2020, Florinsky fit by default); DataArrays:
    ours (Zevenbergen & Thorne, without the geometric denominators).

    Examples
    --------
    >>> import numpy as np
    >>> y, x = np.mgrid[-3:4, -3:4].astype(float)
    >>> round(float(profile_curvature(x - 0.01 * x**2, resolution=1)[3, 3]), 9)  # 0.02 / 2^1.5 * 100
    0.707106781
    """
    return _curvature("profile_curvature", dem, resolution, surface_fit, curv_method)


def planform_curvature(dem: DEMLike | np.ndarray, resolution: Resolution = None, surface_fit: str | None = None,
                       curv_method: str = "geometric") -> Result:
    """Planform curvature (100/m): the curvature of the contour line, convex > 0.

    numpy arrays and DEMs: upstream's (Minár et al. 2020); DataArrays: ours (Zevenbergen & Thorne).

    Examples
    --------
    >>> import xdem
    >>> c = xdem.terrain.planform_curvature(xdem.examples.get_path("lidar"))
    """
    return _curvature("planform_curvature", dem, resolution, surface_fit, curv_method)


def maximum_curvature(dem: DEMLike | np.ndarray, resolution: Resolution = None, surface_fit: str | None = None,
                      curv_method: str = "geometric") -> Result:
    """Ours on DataArrays: of profile and planform curvature, the larger in magnitude (100/m).

    On numpy arrays and DEMs it is upstream's :func:`max_curvature`.

    Examples
    --------
    >>> import xdem
    >>> c = xdem.terrain.maximum_curvature(xdem.examples.get_path("lidar"))
    """
    return _curvature("maximum_curvature", dem, resolution, surface_fit, curv_method)


def max_curvature(dem: DEMLike | np.ndarray, resolution: Resolution = None, surface_fit: str | None = None,
                  curv_method: str = "geometric") -> Result:
    """Upstream's maximal curvature (100/m), the larger principal curvature, on every input.

    Geometric (default): the mean curvature plus the unsphericity (Shary 1995); directional:
    Wood (1996)'s. Florinsky fit by default; 0 where the gradient is exactly zero, as upstream.

    Examples
    --------
    >>> import numpy as np
    >>> y, x = np.mgrid[-3:4, -3:4].astype(float)
    >>> k = max_curvature(x - 0.01 * x**2 + 0.03 * y**2, resolution=1)  # z_x = 1, z_xx = -0.02, z_yy = 0.06
    >>> round(float(k[3, 3]), 6), round(float(min_curvature(x - 0.01 * x**2 + 0.03 * y**2, resolution=1)[3, 3]), 6)
    (0.707107, -4.242641)
    """
    return _curvature("max_curvature", dem, resolution, surface_fit, curv_method)


def min_curvature(dem: DEMLike | np.ndarray, resolution: Resolution = None, surface_fit: str | None = None,
                  curv_method: str = "geometric") -> Result:
    """Upstream's minimal curvature (100/m), the smaller principal curvature (see :func:`max_curvature`).

    Examples
    --------
    >>> import xdem
    >>> c = xdem.terrain.min_curvature(xdem.examples.get_path("lidar"))  # lazy, Florinsky fit
    """
    return _curvature("min_curvature", dem, resolution, surface_fit, curv_method)


def tangential_curvature(dem: DEMLike | np.ndarray, resolution: Resolution = None, surface_fit: str | None = None,
                         curv_method: str = "geometric") -> Result:
    """Upstream's tangential curvature (100/m): the normal curvature along the contour (Krcho 1983).

    Examples
    --------
    >>> import xdem
    >>> c = xdem.terrain.tangential_curvature(xdem.examples.get_path("lidar"))
    """
    return _curvature("tangential_curvature", dem, resolution, surface_fit, curv_method)


def flowline_curvature(dem: DEMLike | np.ndarray, resolution: Resolution = None, surface_fit: str | None = None,
                       curv_method: str = "geometric") -> Result:
    """Upstream's flowline curvature (100/m): the geodesic curvature of the slope line (Minár et al. 2020).

    Examples
    --------
    >>> import xdem
    >>> c = xdem.terrain.flowline_curvature(xdem.examples.get_path("lidar"))
    """
    return _curvature("flowline_curvature", dem, resolution, surface_fit, curv_method)


def terrain_ruggedness_index(dem: DEMLike | np.ndarray, method: str = "Riley", window_size: int = 3, *,
                             algorithm: str | None = None) -> Result:
    """Terrain ruggedness index (m): ``"Riley"`` (default) or ``"Wilson"``.

    Examples
    --------
    >>> import numpy as np
    >>> float(terrain_ruggedness_index(np.add.outer(np.zeros(3), np.arange(3.0)))[1, 1])  # sqrt(6 * 1^2)
    2.449489742783178
    """
    return get_terrain_attribute(dem, "terrain_ruggedness_index", tri_method=algorithm or method,
                                 window_size=window_size)


def topographic_position_index(dem: DEMLike | np.ndarray, window_size: int = 3) -> Result:
    """Topographic position index (m): the centre minus the mean of its neighbours.

    Examples
    --------
    >>> import numpy as np
    >>> z = np.zeros((3, 3)); z[1, 1] = 8.0
    >>> float(topographic_position_index(z)[1, 1])
    8.0
    """
    return get_terrain_attribute(dem, "topographic_position_index", window_size=window_size)


def roughness(dem: DEMLike | np.ndarray, window_size: int = 3) -> Result:
    """Roughness (m): largest minus smallest elevation of the window.

    Examples
    --------
    >>> import numpy as np
    >>> float(roughness(np.add.outer(np.zeros(3), np.arange(3.0)))[1, 1])
    2.0
    """
    return get_terrain_attribute(dem, "roughness", window_size=window_size)


def rugosity(dem: DEMLike | np.ndarray, resolution: Resolution = None) -> Result:
    """Rugosity (Jenness 2004): 3-D surface area over plan area of each cell's 3 x 3 window (1 = flat).

    Examples
    --------
    >>> import numpy as np
    >>> plane = np.add.outer(np.zeros(3), np.arange(3.0))  # 45 degrees: area ratio sqrt(2)
    >>> round(float(rugosity(plane, resolution=1)[1, 1]), 6)
    1.414214
    """
    return get_terrain_attribute(dem, "rugosity", resolution)


def fractal_roughness(dem: DEMLike | np.ndarray, window_size: int = 13) -> Result:
    """Fractal roughness (Taud & Parrot 2005): the box-counting dimension of the surface, 2 to 3.

    Examples
    --------
    >>> import xdem
    >>> d = xdem.terrain.fractal_roughness(xdem.examples.get_path("lidar"))  # lazy, 13 x 13 windows
    """
    return get_terrain_attribute(dem, "fractal_roughness", window_size=window_size)


def texture_shading(dem: DEMLike | np.ndarray, alpha: float = 0.8) -> Result:
    """Texture shading (Brown 2010): the fractional Laplacian ``|f|^alpha`` of the whole DEM (FFT).

    Global, so computed on the DEM as one block (lazily); DEMs above
    :data:`xdem.terrain.upstream_engine.TEXTURE_SHADING_MAX_PIXELS` pixels raise one line.

    Examples
    --------
    >>> import numpy as np
    >>> float(np.abs(texture_shading(np.full((8, 8), 5.0))).max()) < 1e-9  # no texture in a constant
    True
    """
    return get_terrain_attribute(dem, "texture_shading", texture_alpha=alpha)
