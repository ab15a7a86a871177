"""Type aliases of what the public functions accept as a DEM or a mask (annotations only).

Examples
--------
>>> import xdem
>>> from xdem.typing import DEMLike
>>> def mean_elevation(dem: DEMLike) -> float:
...     return float(xdem.open_dem(dem).mean())
>>> round(mean_elevation(xdem.examples.get_path("lidar")), 1) > 0
True
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import numpy as np
import xarray as xr

if TYPE_CHECKING:  # annotations only: importing xdem.typing loads neither pandas nor the point readers
    import pandas as pd
    import pyproj
    import rasterio.crs

    from xdem.points.read import PointSet

__all__ = ["RasterLike", "GeoDataFrameLike", "DEMLike", "MaskLike", "PathLike", "PointsLike", "CRSLike",
           "BiasVars", "PointBiasVars", "BinSpec", "BinSizes", "Params", "JSONValue", "JSONDict"]


class RasterLike(Protocol):
    """A raster object converting itself to xarray, e.g. :class:`geoutils.Raster`."""

    def to_xarray(self) -> xr.DataArray: ...


class GeoDataFrameLike(Protocol):
    """Polygons with a CRS, e.g. a :class:`geopandas.GeoDataFrame` (geopandas is not imported)."""

    @property
    def geometry(self) -> object: ...

    @property
    def crs(self) -> object: ...


#: A file path.
PathLike = str | os.PathLike[str]

#: A DEM as :func:`xdem.open_dem` accepts it: a path to anything rasterio opens (GeoTIFF,
#: COG, VRT), a georeferenced :class:`xarray.DataArray` (numpy- or dask-backed) or a
#: geoutils Raster.
DEMLike = str | os.PathLike[str] | xr.DataArray | RasterLike

#: Points with elevations as :func:`xdem.points.read_points` accepts them: a path to a points
#: file (GeoPackage, shapefile, GeoJSON, FlatGeobuf, GeoParquet, CSV, Parquet, LAS/LAZ), a
#: :class:`geopandas.GeoDataFrame` of Point geometries or a :class:`pandas.DataFrame` with x, y,
#: z columns (a GeoDataFrame is a DataFrame), or a :class:`xdem.points.PointSet`. Nothing else
#: (a numpy array, a list of tuples) is read as points.
PointsLike: TypeAlias = "str | os.PathLike[str] | pd.DataFrame | PointSet"

#: A mask as :func:`xdem.masks.inlier_mask_like` accepts it: ``None`` (every pixel), a
#: boolean DataArray or numpy array on the DEM's grid, a raster or vector file path, or a
#: GeoDataFrame (inside the polygons).
MaskLike = None | str | os.PathLike[str] | xr.DataArray | np.ndarray | GeoDataFrameLike

#: A CRS as :meth:`pyproj.CRS.from_user_input` accepts it: ``"EPSG:32633"``, WKT or PROJ text,
#: an EPSG code, a :class:`pyproj.CRS` or a :class:`rasterio.crs.CRS`.
CRSLike: TypeAlias = "str | int | pyproj.CRS | rasterio.crs.CRS"

#: Bias variables of the bias corrections: name -> a DEM-like on the DEM's grid.
BiasVars: TypeAlias = "Mapping[str, DEMLike]"

#: Bias variables at points: name -> a DEM-like grid (interpolated at the points) or an array
#: with one value per point.
PointBiasVars: TypeAlias = "Mapping[str, DEMLike | np.ndarray]"

#: Bins of one variable: a number of equal bins (``int`` >= 2) or increasing bin edges.
BinSpec: TypeAlias = "int | Sequence[float] | np.ndarray"

#: ``bin_sizes`` of the bias corrections: one :data:`BinSpec` for every variable, or one per
#: variable name.
BinSizes: TypeAlias = "BinSpec | Mapping[str, BinSpec]"

#: Hyper-parameters of an estimator by name (``get_params``/``set_params``): their types are the
#: constructor's, which differ from one method to the next.
Params: TypeAlias = "dict[str, object]"

#: A JSON value: ``None``, bool, number, str, a list of JSON values or a JSON object (str keys),
#: as :func:`xdem.io.jsondoc.jsonable` gives it.
JSONValue: TypeAlias = "str | int | float | bool | None | list[JSONValue] | dict[str, JSONValue]"

#: A JSON object as :func:`json.loads` gives it (``Coreg.to_dict``/``from_dict`` documents): its
#: values are JSON values (``None``, bool, number, str, list, JSON object), typed loosely as
#: :func:`json.loads` types them.
JSONDict: TypeAlias = "dict[str, Any]"
