"""Terrain attributes of DEMs: lazy on dask, NaN-aware, in agreement with GDAL's ``gdaldem``.

Public functions (lazy, same grid as the DEM): :func:`slope`, :func:`aspect`,
:func:`hillshade`, :func:`curvature`, :func:`profile_curvature`, :func:`planform_curvature`,
:func:`maximum_curvature`, :func:`terrain_ruggedness_index`, :func:`topographic_position_index`,
:func:`roughness`, and :func:`get_terrain_attribute` for several in one pass.

The same names take GlacioHack/xdem 0.2.3's arguments (``surface_fit="Florinsky"``,
``degrees=``, ``resolution=`` for numpy arrays): numpy arrays and :class:`xdem.DEM` get
upstream's meaning and defaults, DataArrays ours, and the names only upstream has
(``max_curvature``, ``min_curvature``, ``tangential_curvature``, ``flowline_curvature``,
``rugosity``, ``fractal_roughness``, ``texture_shading``) upstream's everywhere: see
:mod:`xdem.terrain.upstream`, :mod:`xdem.terrain.upstream_engine` (the lazy engine),
:mod:`xdem.terrain.fits` (Florinsky's fit, Minár et al.'s curvatures) and
:mod:`xdem.terrain.windowed`.

NumPy kernels on one padded block (for other modules): :mod:`xdem.terrain.kernels`, e.g.
:func:`xdem.terrain.kernels.slope_aspect_kernel`.

Examples
--------
>>> import xdem
>>> dem = xdem.open_dem(xdem.examples.get_path("lidar"))
>>> slope = xdem.terrain.slope(dem)  # lazy; slope.compute() or slope.values to evaluate
"""

from xdem.terrain import kernels
from xdem.terrain.attributes import ATTRIBUTES
from xdem.terrain.kernels import slope_aspect_kernel
from xdem.terrain.options import TerrainOptions
from xdem.terrain.upstream import get_terrain_attribute
from xdem.terrain.upstream_functions import (
    aspect,
    curvature,
    flowline_curvature,
    fractal_roughness,
    hillshade,
    max_curvature,
    maximum_curvature,
    min_curvature,
    planform_curvature,
    profile_curvature,
    roughness,
    rugosity,
    slope,
    tangential_curvature,
    terrain_ruggedness_index,
    texture_shading,
    topographic_position_index,
)

__all__ = [
    "ATTRIBUTES",
    "TerrainOptions",
    "kernels",
    "slope_aspect_kernel",
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
    "max_curvature",
    "rugosity",
    "fractal_roughness",
    "tangential_curvature",
    "flowline_curvature",
    "min_curvature",
    "texture_shading",
]
