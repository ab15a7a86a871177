"""Terrain attributes of DEMs: lazy on dask, NaN-aware, in agreement with GDAL's ``gdaldem``.

Public functions (lazy, same grid as the DEM): :func:`slope`, :func:`aspect`,
:func:`hillshade`, :func:`curvature`, :func:`profile_curvature`, :func:`planform_curvature`,
:func:`maximum_curvature`, :func:`terrain_ruggedness_index`, :func:`topographic_position_index`,
:func:`roughness`, and :func:`get_terrain_attribute` for several in one pass.

NumPy kernels on one padded block (for other modules): :mod:`xdem.terrain.kernels`, e.g.
:func:`xdem.terrain.kernels.slope_aspect_kernel`.

Examples
--------
>>> import xdem
>>> dem = xdem.open_dem(xdem.examples.get_path("lidar"))
>>> slope = xdem.terrain.slope(dem)  # lazy; slope.compute() or slope.values to evaluate
"""

from xdem.terrain import kernels
from xdem.terrain.attributes import (
    ATTRIBUTES,
    aspect,
    curvature,
    get_terrain_attribute,
    hillshade,
    maximum_curvature,
    planform_curvature,
    profile_curvature,
    roughness,
    slope,
    terrain_ruggedness_index,
    topographic_position_index,
)
from xdem.terrain.kernels import slope_aspect_kernel
from xdem.terrain.options import TerrainOptions

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
]
