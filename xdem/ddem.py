"""The elevation change between two epochs, :class:`dDEM` (upstream xdem 0.2.3's), lazy.

A dDEM is a :class:`~xdem.DEM` of elevation differences (end minus start) that knows its two
epochs and, once :meth:`dDEM.interpolate` has run, its gap-filled values
(:attr:`dDEM.filled_data`, :attr:`dDEM.fill_method`). Like a DEM, nothing is computed until
values are asked for.

Examples
--------
>>> from datetime import datetime
>>> import xdem
>>> from xdem.examples.glaciers import glacier_set
>>> g = glacier_set((200, 200), chunks=100)
>>> ddem = xdem.dDEM(g.ddem, start_time=datetime(1990, 8, 1), end_time=datetime(2009, 8, 1))
>>> ddem.time.days
6940
>>> ddem.fill_method
''
>>> filled = ddem.interpolate("local_hypsometric", reference_elevation=g.ref, mask=g.outlines)
>>> ddem.fill_method, bool(np.isnan(filled.compute()[g.index.values > 0]).any())
('local_hypsometric', False)
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import cast

import dask.array as da
import numpy as np
import xarray as xr
from affine import Affine

from xdem.dem import DEM
from xdem.errors import InputError
from xdem.io import remote
from xdem.io.grid import _reproject_like, dask_data, same_grid
from xdem.io.open import open_dem
from xdem.masks import labels_like, read_polygons
from xdem.typing import CRSLike, GeoDataFrameLike, PathLike
from xdem.volume._hypsometry import IDW_DISTANCE, fill_voids, glacier_curves, model_values
from xdem.volume._idw import count_unfilled, idw_fill
from xdem.volume._inputs import as_labels, as_lazy
from xdem.volume._regional import norm_regional_hypsometric_interpolation

__all__ = ["dDEM", "METHODS"]

#: Gap-filling methods of :meth:`dDEM.interpolate`: upstream's three, and the normalised regional one.
METHODS = ("idw", "local_hypsometric", "regional_hypsometric", "norm_regional_hypsometric")
_VECTOR_SUFFIXES = {".gpkg", ".shp", ".geojson", ".json", ".fgb", ".gml", ".kml", ".parquet"}

TimeLike = datetime | np.datetime64


def _as_datetime(value: TimeLike, name: str) -> datetime:
    if isinstance(value, np.datetime64):
        return value.astype("datetime64[us]").item()
    if isinstance(value, datetime):
        return value
    raise InputError(f"{name} must be a datetime or numpy.datetime64, got {type(value).__name__}")


class dDEM(DEM):  # noqa: N801 - upstream's name
    """An elevation change (end minus start) with its epochs, lazy.

    Parameters
    ----------
    raster
        The elevation differences: a DEM, a geoutils Raster, a georeferenced DataArray or a path.
    start_time, end_time
        The epochs of the earlier and the later DEM.
    error
        The error of the differences (kept as given, as upstream's).
    """

    def __init__(self, raster: object, start_time: TimeLike, end_time: TimeLike, error: object | None = None) -> None:
        super().__init__(raster)
        self.start_time = _as_datetime(start_time, "start_time")
        self.end_time = _as_datetime(end_time, "end_time")
        self.error = error
        self._filled: xr.DataArray | None = None
        self._fill_method = ""

    @classmethod
    def from_array(cls, data: np.ndarray, transform: Affine | tuple[float, ...], crs: CRSLike | None,  # type: ignore[override]
                   start_time: TimeLike, end_time: TimeLike, error: object | None = None,
                   nodata: float | None = None) -> dDEM:
        """A dDEM from a 2-D array and its georeferencing (upstream's order of arguments)."""
        dem = DEM.from_array(data, transform, crs, nodata=nodata)
        return cls(dem, start_time=start_time, end_time=end_time, error=error)

    @property
    def time(self) -> timedelta:
        """The interval between the two epochs."""
        return self.end_time - self.start_time

    @property
    def filled_data(self) -> da.Array | None:
        """The gap-filled values (lazy, NaN where still void) once :meth:`interpolate` ran; before,
        the values themselves if they have no void (one pass to check), else ``None`` (upstream's)."""
        if self._filled is not None:
            return self._filled.data
        data = dask_data(self._da)
        return None if bool(da.isnan(data).any().compute()) else data

    @filled_data.setter
    def filled_data(self, array: object) -> None:
        values = as_lazy(array, "filled_data", shape=self.shape, chunks=dask_data(self._da).chunks)
        self._filled = self._da.copy(data=values.astype(self._da.dtype))

    @property
    def fill_method(self) -> str:
        """The gap-filling method last used by :meth:`interpolate` (``""`` before)."""
        return self._fill_method

    def interpolate(self, method: str = "idw", reference_elevation: object | None = None,
                    mask: object | None = None) -> da.Array:
        """Fill the voids (upstream's names, order and return); lazy, out of core.

        Parameters
        ----------
        method
            ``"idw"`` (inverse-distance weighting within 10 pixels), ``"local_hypsometric"`` (each
            glacier's own 50 m hypsometric curve, then IDW within 10 pixels for what is left),
            ``"regional_hypsometric"`` (one curve of all the glaciers, voids outside them left),
            or ``"norm_regional_hypsometric"`` (the normalised regional signal scaled to each glacier;
            not a method of upstream's ``interpolate``). See :doc:`/gapfill`.
        reference_elevation
            The reference DEM (a DEM, DataArray, path or array on this grid; other grids are
            reprojected bilinearly); needed by the hypsometric methods.
        mask
            The glacier outlines: a vector file, a GeoDataFrame or a geoutils Vector in any CRS, or
            an index map on this grid (0 off glacier); needed by the hypsometric methods.

        Returns
        -------
        dask.array.Array
            :attr:`filled_data`: the filled values, lazy (``np.asarray`` computes them), NaN where
            no value could be given (voids beyond the IDW search distance, glaciers without a
            curve; :meth:`count_unfilled` counts them). :attr:`fill_method` says the method.
        """
        if method not in METHODS:
            raise InputError(f"unknown interpolation method {method!r}; choose among {', '.join(METHODS)}")
        dh = dask_data(self._da).astype(np.float64)
        if method == "idw":
            filled = idw_fill(dh, max_search_distance=IDW_DISTANCE, extrapolate=False)
        else:
            if reference_elevation is None:
                raise InputError(f"method {method!r} needs reference_elevation (the reference DEM of the dDEM)")
            if mask is None:
                raise InputError(f"method {method!r} needs mask (the glacier outlines: a vector file or GeoDataFrame)")
            filled = self._hypsometric(method, dh, self._reference(reference_elevation), self._labels(mask))
        self._filled = self._da.copy(data=filled.astype(self._da.dtype))
        self._fill_method = method
        return self._filled.data

    def count_unfilled(self) -> int:
        """Voids of the dDEM still NaN in :attr:`filled_data` (computes, one pass): voids beyond the IDW
        search distance, glaciers without a curve (see :doc:`/gapfill`, "the halo limit")."""
        if self._filled is None:
            raise InputError("nothing filled yet: call ddem.interpolate(method, ...) first")
        return count_unfilled(dask_data(self._da), self._filled.data)

    def _hypsometric(self, method: str, dh: da.Array, z: da.Array, labels: da.Array) -> da.Array:
        if method == "norm_regional_hypsometric":
            out: da.Array = norm_regional_hypsometric_interpolation(dh, z, labels)
            return out
        if method == "regional_hypsometric":
            labels = (labels > 0).astype(np.int64)
        curves, _ = glacier_curves(dh, z, labels, edges_from="inlier", what="glacier outlines")
        filled = fill_voids(dh, model_values(labels, z, curves))
        if method == "regional_hypsometric":
            return filled
        return idw_fill(filled, max_search_distance=IDW_DISTANCE, extrapolate=False)

    def _block(self) -> tuple[int, int]:
        """The size of the dDEM's first chunk (rows, columns)."""
        chunks = dask_data(self._da).chunks
        return (chunks[0][0], chunks[1][0])

    def _reference(self, ref: object) -> da.Array:
        """The reference elevation on this grid, lazy (float64)."""
        chunks = dask_data(self._da).chunks
        if isinstance(ref, (str, os.PathLike)):  # read on the dDEM's chunks (a rechunk would hold larger blocks)
            ref = open_dem(ref, chunks=self._block())
        if isinstance(ref, DEM):
            ref = ref.to_xarray()
        if isinstance(ref, xr.DataArray) and ref.rio.crs is not None and not same_grid(ref, self._da):
            ref = _reproject_like(ref, self._da, resampling="bilinear")
        return as_lazy(ref, "reference_elevation", shape=self.shape, chunks=chunks)

    def _labels(self, mask: object) -> da.Array:
        """The glacier index map on this grid (0 off glacier, ``i + 1`` on outline ``i``)."""
        vector = getattr(mask, "ds", mask)  # a geoutils Vector: its GeoDataFrame
        if isinstance(vector, (str, os.PathLike)) and remote.suffix(vector) not in _VECTOR_SUFFIXES:
            vector = open_dem(vector, chunks=self._block())  # an index raster
        if type(vector).__name__ == "GeoDataFrame" or isinstance(vector, (str, os.PathLike)):
            said = f"the outlines '{os.fspath(vector)}'" if isinstance(vector, (str, os.PathLike)) else "the outlines"
            gdf = read_polygons(cast("PathLike | GeoDataFrameLike", vector), self.crs)
            x0, y0, x1, y1 = gdf.total_bounds if len(gdf) else (np.nan,) * 4
            b = self.bounds
            if not (x0 < b.right and x1 > b.left and y0 < b.top and y1 > b.bottom):
                raise InputError(f"{said} do not overlap the dDEM (bounds {tuple(round(v, 1) for v in b)} in "
                                 f"{self.crs}); give the outlines of the dDEM's glaciers")
            return labels_like(gdf, self._da)
        return as_labels(vector, "mask", shape=self.shape, chunks=dask_data(self._da).chunks)

    def __str__(self) -> str:
        return f"dDEM from {self.start_time} to {self.end_time}.\n\n{super().__str__()}"

    def copy(self, new_array: np.ndarray | None = None) -> dDEM:
        """A dDEM with the same epochs (and filled values), sharing this one's lazy data or holding ``new_array``."""
        out = dDEM(DEM.copy(self, new_array), start_time=self.start_time, end_time=self.end_time, error=self.error)
        out._filled, out._fill_method = (self._filled, self._fill_method) if new_array is None else (None, "")
        return out
