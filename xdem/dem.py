"""The :class:`DEM` object of upstream xdem (0.2.3), as a thin wrapper over the lazy DataArray.

Code written for GlacioHack/xdem's ``xdem.DEM`` runs on it unchanged: the constructor takes a
path, a rasterio dataset, a geoutils Raster, another DEM or (here also) a georeferenced
:class:`xarray.DataArray`; the properties (``crs``, ``transform``, ``res``, ``shape``,
``bounds``, ``nodata``...) and methods (arithmetic, ``crop``, ``reproject``, terrain
attributes, ``to_file``, ``coregister_3d``) are upstream's. Underneath, the DEM is the lazy,
dask-backed DataArray of :func:`xdem.open_dem` (:meth:`DEM.to_xarray`): nothing is read until
values are asked for (``.data``, ``dem[mask]``, ``info(stats=True)``, ``plot``, ``to_file``).

Examples
--------
>>> import xdem
>>> dem = xdem.DEM(xdem.examples.get_path("lidar"))
>>> dem.shape == (dem.height, dem.width)
True
>>> ddem = dem - (dem - 1.5)  # lazy, a DEM
>>> float(ddem.data.mean())
1.5
"""

from __future__ import annotations

import functools
import operator
import os
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

import dask.array as da
import geoutils as gu
import numpy as np
import rasterio
import rasterio.coords
import rasterio.io
import rasterio.warp
import xarray as xr
from affine import Affine
from odc.geo import resxy_

from xdem import terrain
from xdem._check_base import InputCheckWarning, find_sentinels, sample_values
from xdem._dem_numpy import apply_array_function, apply_ufunc, filled_values, index_to_mask
from xdem._dem_plot import plot_dem
from xdem._dem_raster import RasterAttributes
from xdem._dem_result import returns_dem_for_dem
from xdem._dem_vcrs import VcrsMembers, declared_vcrs
from xdem.errors import InputError
from xdem.io.cog import write_cog
from xdem.io.grid import (
    Grid,
    _crop_to_bounds,
    _reproject_like,
    _reproject_to_geobox,
    get_resolution,
    get_transform,
    grid_shape,
    same_grid,
)
from xdem.io.open import open_dem
from xdem.spatialstats.dem_uncertainty import estimate_uncertainty
from xdem.spatialstats.upstream import nmad
from xdem.stats import nanmax, nanmin
from xdem.vcrs import VerticalRef, parse_vcrs

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from xdem.io._cog_result import CogResult
    from xdem.typing import CRSLike

__all__ = ["DEM", "returns_dem_for_dem"]


def _source_nodata(source: object) -> float | None:
    """The nodata value a source declares (a file's, a DataArray's), read from metadata only."""
    if isinstance(source, (str, os.PathLike)) and os.path.isfile(os.fspath(source)):
        with rasterio.open(source) as src:
            return None if src.nodata is None else float(src.nodata)
    if isinstance(source, xr.DataArray):
        value = source.rio.nodata if source.rio.nodata is not None else source.rio.encoded_nodata
        return None if value is None else float(value)
    value = getattr(source, "nodata", None)
    return None if value is None else float(value)


class DEM(RasterAttributes, VcrsMembers, gu.Raster):  # geoutils is untyped (Any to mypy); ours first
    """A digital elevation model, lazy: upstream xdem's ``DEM`` over :func:`xdem.open_dem`.

    As upstream's, it is a :class:`geoutils.Raster` (``isinstance(dem, gu.Raster)``), so
    geoutils' functions take it: ``gu.Vector(path).create_mask(dem)``, ``.crop(dem)``,
    ``.plot(dem)``, ``gu.raster.get_xy_rotated(dem, ...)``. Its values stay lazy: geoutils'
    in-memory methods that xdem does not provide raise one line saying so.

    Parameters
    ----------
    filename_or_dataset
        A path (anything :func:`xdem.open_dem` opens), a rasterio dataset, a geoutils Raster,
        a georeferenced :class:`xarray.DataArray`, or a DEM (which is shared, not copied).
        From a numpy array: :meth:`DEM.from_array`.
    vcrs
        Vertical CRS of the heights (:func:`xdem.vcrs.parse_vcrs`: ``"Ellipsoid"``, ``"EGM96"``,
        ``"EGM08"``, a geoid grid file, a vertical CRS or EPSG code); by default the one the
        file's (compound) CRS declares. Converted with :meth:`to_vcrs`.
    load_data
        Read the values into memory now (``persist``); by default nothing is read until
        values are asked for.
    parse_sensor_metadata, silent, downsample
        Upstream's (in its order): only the defaults (``False``, any, ``1``) are accepted.
    nodata
        Value read as nodata instead of the file's own.

    Examples
    --------
    >>> import xdem
    >>> dem = xdem.DEM(xdem.examples.get_path("lidar"))
    >>> dem.res
    (1.0, 1.0)
    >>> xdem.DEM(dem.to_xarray()).shape == dem.shape
    True
    """

    def __init__(self, filename_or_dataset: object, vcrs: object | None = None, load_data: bool = False,
                 parse_sensor_metadata: bool = False, silent: bool = True, downsample: int = 1,
                 nodata: float | None = None) -> None:
        if parse_sensor_metadata:
            raise InputError("parse_sensor_metadata (geoutils' sensor names in file names) is not available here")
        if downsample != 1:
            raise InputError(f"downsample={downsample!r} is not available here: use dem.reproject(res=...) (lazy)")
        src = filename_or_dataset
        if isinstance(src, DEM):
            arr, file_nodata, vcrs = src._da, src._nodata, src._vcrs if vcrs is None else vcrs
        elif isinstance(src, rasterio.io.DatasetReader):
            arr, file_nodata = open_dem(src.name, nodata=nodata), _source_nodata(src.name)
        elif isinstance(src, np.ndarray):
            raise InputError("a numpy array has no georeferencing: use xdem.DEM.from_array(data, transform, crs)")
        else:
            arr = open_dem(src, nodata=nodata)  # type: ignore[arg-type]  # open_dem says what it refuses
            file_nodata = _source_nodata(src)
            if nodata is None and file_nodata is None:
                _warn_undeclared_voids(src)
        self._da: xr.DataArray = arr.persist() if load_data else arr
        self._loaded, self._filename = load_data, os.fspath(src) if isinstance(src, (str, os.PathLike)) else None
        self._nodata: float | None = file_nodata if nodata is None else float(nodata)
        self._vcrs = _initial_vcrs(src, vcrs)

    @classmethod
    def _wrap(cls, arr: xr.DataArray, nodata: float | None, vcrs: VerticalRef | None = None) -> DEM:
        """A DEM over ``arr`` (already as :func:`xdem.open_dem` gives it), without reprocessing it."""
        out = cls.__new__(cls)
        out._da, out._nodata, out._vcrs = arr, nodata, vcrs
        return out

    @classmethod
    def from_array(cls, data: np.ndarray, transform: Affine | tuple[float, ...], crs: CRSLike | None,
                   nodata: float | None = None, vcrs: object | None = None, area_or_point: str | None = None) -> DEM:
        """A DEM from a 2-D array (masked arrays: masked = nodata) and its georeferencing.

        ``transform`` is an :class:`affine.Affine` or its 6 coefficients ``(a, b, c, d, e, f)``
        (of the pixel corners); ``area_or_point`` (geoutils' tag) is accepted and not used.

        Examples
        --------
        >>> import numpy as np, xdem
        >>> from affine import Affine
        >>> dem = xdem.DEM.from_array(np.ones((3, 4)), Affine(2, 0, 0, 0, -2, 6), "EPSG:32633", nodata=-9999)
        >>> dem.bounds
        BoundingBox(left=0.0, bottom=0.0, right=8.0, top=6.0)
        """
        values = np.ma.filled(np.ma.asarray(data).astype(np.float64), np.nan).squeeze()
        if values.ndim != 2:
            raise InputError(f"a DEM array must be 2-D, got shape {np.shape(data)}")
        t = transform if isinstance(transform, Affine) else Affine(*transform[:6])
        if crs is None:
            raise InputError("a DEM needs a CRS: pass crs='EPSG:XXXX'")
        x = t.c + t.a * (np.arange(values.shape[1]) + 0.5)
        y = t.f + t.e * (np.arange(values.shape[0]) + 0.5)
        arr = xr.DataArray(values.astype(np.float32 if np.asarray(data).dtype != np.float64 else np.float64),
                           dims=("y", "x"), coords={"y": y, "x": x})
        arr = arr.rio.write_crs(crs).rio.write_transform(t)
        return cls(arr.rio.write_nodata(nodata, encoded=False), vcrs=vcrs, nodata=nodata)

    # --- georeferencing ------------------------------------------------------------------
    @property
    def crs(self) -> rasterio.crs.CRS:
        """The CRS (a :class:`rasterio.crs.CRS`)."""
        crs: rasterio.crs.CRS = self._da.rio.crs
        return crs

    @property
    def transform(self) -> Affine:
        """The affine geotransform of the pixel corners."""
        return get_transform(self._da)

    @property
    def res(self) -> tuple[float, float]:
        """Pixel size ``(x, y)``, positive, as rasterio's ``res``."""
        return get_resolution(self._da)

    @property
    def shape(self) -> tuple[int, int]:
        """``(height, width)``."""
        return grid_shape(self._da)

    @property
    def height(self) -> int:
        """Number of rows."""
        return self.shape[0]

    @property
    def width(self) -> int:
        """Number of columns."""
        return self.shape[1]

    @property
    def bounds(self) -> rasterio.coords.BoundingBox:
        """Outer edges ``(left, bottom, right, top)``, as rasterio's ``bounds``."""
        return rasterio.coords.BoundingBox(*_edge_bounds(self.transform, self.shape))

    @property
    def nodata(self) -> float | None:
        """The nodata value of the source (the file's, or the one given); NaN inside."""
        return self._nodata

    @property
    def dtype(self) -> np.dtype:
        """Data type of the elevations (floating: integer files read as float32)."""
        return np.dtype(self._da.dtype)

    @property
    def data(self) -> np.ma.MaskedArray:
        """The elevations as a numpy masked array (masked where nodata); reads the whole DEM.

        The array is computed at each access and is read-only (writing into it would change
        nothing of the lazy DEM): change values with ``dem[mask] = value``, ``dem.set_mask(mask)``
        or ``dem.data = new_array``, as upstream.
        """
        values = np.asarray(self._da.values).view()  # a view: its flag (read-only) is not the storage's own
        values.setflags(write=False)
        if values.dtype == bool:
            out = np.ma.MaskedArray(values, mask=np.zeros(values.shape, dtype=bool))
        else:
            out = np.ma.masked_invalid(values, copy=False)
            out.mask = np.ma.getmaskarray(out)
            if self._nodata is not None and np.isfinite(self._nodata):
                out.fill_value = self._nodata
        np.ma.getmaskarray(out).setflags(write=False)
        return out

    @data.setter
    def data(self, new_array: np.ndarray) -> None:
        """Replace the values (same shape; masked values become nodata), as upstream's setter;
        the DEM's file is never written."""
        self._da = self.copy(new_array=np.asarray(new_array) if not isinstance(new_array, np.ma.MaskedArray)
                             else new_array)._da

    def to_xarray(self) -> xr.DataArray:
        """The lazy DataArray underneath (NaN where nodata, CRS and transform on ``.rio``)."""
        return self._da

    def __repr__(self) -> str:
        return (f"DEM(shape={self.shape}, res={self.res}, crs={self.crs}, nodata={self.nodata}, "
                f"dtype={self.dtype}, lazy)")

    def info(self, stats: bool = False, verbose: bool = True) -> str | None:
        """Describe the DEM: printed (``verbose=True``, upstream's default) or returned.

        ``stats=True`` adds the minimum, maximum, mean and standard deviation of the valid
        elevations (one pass over the data).
        """
        lines = [f"Driver:       {'lazy (dask)'}", f"Size:         {self.width}, {self.height}",
                 f"Data type:    {self.dtype}", f"Nodata:       {self.nodata}",
                 f"Pixel size:   {self.res}", f"Bounds:       {tuple(self.bounds)}",
                 f"CRS:          {self.crs}"]
        if stats:
            a = self._da.data
            values = da.compute(nanmin(a), nanmax(a), da.nanmean(a), da.nanstd(a))
            for name, v in zip(("Minimum", "Maximum", "Mean", "Std dev"), values):
                lines.append(f"{name + ':':<14}{float(v):.3f}")
        text = "\n".join(lines)
        if verbose:
            print(text)
            return None
        return text

    # --- grids ----------------------------------------------------------------------------
    def crop(self, crop_geom: DEM | xr.DataArray | tuple[float, float, float, float] | list[float]) -> DEM:
        """Crop (lazily, by whole pixels) to a DEM's or DataArray's bounds or to
        ``[xmin, ymin, xmax, ymax]`` in this DEM's CRS: the pixels whose centres are inside."""
        if isinstance(crop_geom, (DEM, xr.DataArray)):
            other = crop_geom if isinstance(crop_geom, DEM) else DEM._wrap(crop_geom, None)
            bounds = tuple(rasterio.warp.transform_bounds(other.crs, self.crs, *other.bounds))
        elif isinstance(crop_geom, (tuple, list)) and len(crop_geom) == 4:
            bounds = tuple(float(v) for v in crop_geom)
        else:
            raise InputError(f"crop takes a DEM, a DataArray or [xmin, ymin, xmax, ymax], got {type(crop_geom).__name__}")
        return self._like(_crop_to_bounds(self._da, bounds))

    def reproject(self, ref: DEM | xr.DataArray | str | os.PathLike[str] | None = None, crs: CRSLike | None = None,
                  res: float | tuple[float, float] | None = None, resampling: str = "bilinear",
                  silent: bool = False) -> DEM:
        """Reproject lazily (odc-geo) onto ``ref``'s grid, or into ``crs`` and/or at ``res``.

        Bilinear resampling by default, as upstream; ``silent`` (upstream's, to hide its
        warnings) changes nothing here.

        Examples
        --------
        >>> import xdem
        >>> dem = xdem.DEM(xdem.examples.get_path("lidar"))
        >>> dem.reproject(res=2.0).res
        (2.0, 2.0)
        """
        if ref is not None:
            if crs is not None or res is not None:
                raise InputError("reproject takes either ref or crs/res, not both")
            like = ref.to_xarray() if isinstance(ref, DEM) else open_dem(ref)
            return self._like(_reproject_like(self._da, like, resampling=resampling))
        if crs is None and res is None:
            raise InputError("reproject needs ref, crs or res")
        gbox = Grid.of(self._da).geobox()
        if crs is not None:
            gbox = gbox.to_crs(crs, resolution="auto")
        if res is not None:
            rx, ry = (float(res), float(res)) if isinstance(res, (int, float)) else (float(res[0]), float(res[1]))
            gbox = gbox.zoom_to(resolution=resxy_(rx, -ry))
        return self._like(_reproject_to_geobox(self._da, gbox, crs=crs or self.crs, resampling=resampling))

    def to_file(self, filename: str | os.PathLike[str], overwrite: bool = True) -> CogResult:
        """Write a Cloud-Optimized GeoTIFF out of core (:func:`xdem.write_cog`); an existing
        file is replaced, as upstream's ``to_file`` does. Nodata is written as the DEM's
        nodata value (-9999 if it has none or NaN)."""
        nodata = self._nodata if self._nodata is not None and np.isfinite(self._nodata) else -9999.0
        return write_cog(self._da, filename, overwrite=overwrite, nodata=nodata)

    def plot(self, cmap: str = "viridis", vmin: float | None = None, vmax: float | None = None,
             cbar_title: str | None = None, add_cbar: bool = True, ax: Axes | str | None = None,
             title: str | None = None) -> Axes:
        """Show the DEM with matplotlib (decimated to about 2000 pixels a side), with a colour bar
        titled ``cbar_title`` unless ``add_cbar=False``; returns the axes. ``ax`` is an axes, or
        ``"new"`` (upstream's word) or None for a new figure (upstream's None: the current axes)."""
        return plot_dem(self._da, cmap=cmap, vmin=vmin, vmax=vmax, cbar_title=cbar_title, add_cbar=add_cbar, ax=ax,
                        title=title)

    def coregister_3d(self, reference_elev: DEM | xr.DataArray | str | os.PathLike[str], coreg_method: _Coreg,
                      inlier_mask: object | None = None, bias_vars: dict[str, object] | None = None,
                      random_state: int | None = None, **kwargs: object) -> DEM:
        """Align this DEM (the one to be aligned) onto ``reference_elev`` with ``coreg_method``, as
        upstream: ``coreg_method.fit_and_apply(reference_elev, self, inlier_mask, bias_vars, ...)``;
        returns the aligned DEM, lazy. ``random_state`` and ``kwargs`` (e.g. ``resample=``,
        ``subsample=``) go to ``fit_and_apply``."""
        if not (callable(getattr(coreg_method, "fit_and_apply", None))):
            raise InputError("coreg_method must be a coregistration, e.g. xdem.coreg.NuthKaab(); "
                             f"got a {type(coreg_method).__name__}")
        if random_state is not None:
            kwargs["random_state"] = random_state
        out = coreg_method.fit_and_apply(reference_elev, self, inlier_mask=inlier_mask, bias_vars=bias_vars, **kwargs)
        if isinstance(out, DEM):
            return out
        if isinstance(out, xr.DataArray):
            return self._like(out)
        raise InputError(f"{type(coreg_method).__name__}.fit_and_apply gave a {type(out).__name__}, not a DEM")

    def copy(self, new_array: np.ndarray | None = None) -> DEM:
        """A DEM on the same grid: sharing this one's lazy data, or holding ``new_array``
        (same shape; masked values become nodata). Nothing of this DEM is changed."""
        if new_array is None:
            return self._like(self._da)
        values = filled_values(new_array)
        if values.squeeze().shape != self.shape:
            raise InputError(f"new_array has shape {np.shape(new_array)} but the DEM has {self.shape}")
        return self._like(self._da.copy(data=da.from_array(values.squeeze(), chunks=self._da.data.chunks)))

    def _like(self, arr: xr.DataArray) -> DEM:
        return DEM._wrap(arr, self._nodata, self._vcrs)

    # --- terrain attributes (xdem.terrain): upstream 0.2.3's meaning, lazily ---------------
    def slope(self, method: str | None = None, surface_fit: str = "Florinsky", degrees: bool = True,
              mp_config: object | None = None) -> DEM:
        """Slope (:func:`xdem.terrain.slope`) as upstream: Florinsky's fit by default, degrees or
        (``degrees=False``) radians; lazy."""
        return self._terrain("slope", mp_config, slope_method=method, surface_fit=surface_fit, degrees=degrees)

    def aspect(self, method: str | None = None, surface_fit: str = "Florinsky", degrees: bool = True,
               mp_config: object | None = None) -> DEM:
        """Aspect (:func:`xdem.terrain.aspect`) as upstream: clockwise from north, 180 on flat cells; lazy."""
        return self._terrain("aspect", mp_config, slope_method=method, surface_fit=surface_fit, degrees=degrees)

    def hillshade(self, method: str | None = None, surface_fit: str = "Florinsky", azimuth: float = 315.0,
                  altitude: float = 45.0, z_factor: float = 1.0, mp_config: object | None = None) -> DEM:
        """Hillshade (:func:`xdem.terrain.hillshade`) as upstream, ``clip(1.5 + 254 cos(i), 0, 255)``; lazy."""
        return self._terrain("hillshade", mp_config, slope_method=method, surface_fit=surface_fit, hillshade_azimuth=azimuth,
                             hillshade_altitude=altitude, hillshade_z_factor=z_factor)

    def get_terrain_attribute(self, attribute: str | list[str], **kwargs: object) -> DEM | list[DEM]:
        """One or several attributes by name (:func:`xdem.terrain.get_terrain_attribute`), upstream's
        meaning and keywords; lazy."""
        return terrain.get_terrain_attribute(self, attribute, **kwargs)  # type: ignore[call-overload]

    def _terrain(self, name: str, mp_config: object | None, **kwargs: object) -> DEM:
        _refuse_mp_config(mp_config)
        out = terrain.get_terrain_attribute(self, name, **kwargs)  # type: ignore[call-overload]
        if not isinstance(out, DEM):  # pragma: no cover - xdem.terrain.upstream gives a DEM for a DEM
            raise TypeError(f"xdem.terrain gave a {type(out).__name__} for a DEM")
        return out

    # --- upstream's uncertainty workflow (issue 27) --------------------------------------------
    def estimate_uncertainty(self, other_elev: DEM, stable_terrain: object = None, approach: str = "H2022",
                             precision_of_other: str = "finer", spread_estimator: Callable[..., object] = nmad,
                             variogram_estimator: str = "dowd", list_vars: tuple = ("slope", "max_curvature"),
                             list_vario_models: str | tuple[str, ...] = ("gaussian", "spherical"), z_name: str = "z",
                             random_state: int | None = None) -> tuple[DEM, Callable]:
        """Error map and error correlation function, as upstream
        (:func:`xdem.spatialstats.dem_uncertainty.estimate_uncertainty`); lazy, out of core."""
        return estimate_uncertainty(self, other_elev, stable_terrain, approach, precision_of_other, spread_estimator,
                                    variogram_estimator, list_vars, list_vario_models, z_name, random_state)

    # --- arithmetic and masks ---------------------------------------------------------------
    def _operand(self, other: object) -> object:
        if isinstance(other, DEM):
            other = other._da
        elif isinstance(other, gu.Raster):
            if tuple(other.shape) != self.shape or not other.transform.almost_equals(self.transform) or \
                    (other.crs is not None and other.crs != self.crs):
                raise InputError("the geoutils raster is not on the DEM's grid; build it on this DEM "
                                 "(e.g. vector.create_mask(dem)) or reproject it first")
            return da.from_array(filled_values(other.data), chunks=self._da.data.chunks)
        if isinstance(other, xr.DataArray):
            if other.shape != self.shape or (other.rio.crs is not None and not same_grid(self._da, other)):
                raise InputError("the two DEMs are not on the same grid; bring one onto the other's grid first "
                                 "with .reproject(ref=other)")
            return other.data
        if isinstance(other, np.ndarray) and other.ndim >= 2:
            values = filled_values(other) if other.dtype == bool or isinstance(other, np.ma.MaskedArray) \
                else np.array(other)  # a copy: the user's array may change before the DEM is computed
            if values.squeeze().shape != self.shape:
                raise InputError(f"the array has shape {other.shape} but the DEM has {self.shape}")
            return da.from_array(values.squeeze(), chunks=self._da.data.chunks)
        if isinstance(other, (int, float, np.number, np.bool_, np.ndarray)):
            return other
        raise InputError(f"cannot combine a DEM with a {type(other).__name__}")

    def _binary(self, other: object, op: Callable[[object, object], object], reflected: bool = False) -> DEM:
        b = self._operand(other)
        a = self._da.data
        result = op(b, a) if reflected else op(a, b)
        return self._like(self._da.copy(data=result))

    def _boolean_index(self, index: object) -> da.Array | None:
        """The boolean mask ``index`` (a mask DEM, geoutils mask, DataArray or array) as a dask
        array on this grid; None if ``index`` is a numpy index of another kind (slices...)."""
        if isinstance(index, (DEM, gu.Raster, xr.DataArray)) or (isinstance(index, np.ndarray) and index.ndim == 2):
            mask = self._operand(index)
            if not isinstance(mask, da.Array):
                raise InputError("a DEM takes a boolean mask on its grid as index, e.g. dem[dem > 100]")
            if np.dtype(mask.dtype) != bool:  # upstream (geoutils) casts, with this warning
                warnings.warn("Input array was cast to boolean for indexing.", UserWarning, stacklevel=3)
                mask = mask.astype(bool)
            return mask
        return None

    def __getitem__(self, index: object) -> np.ma.MaskedArray:
        """The values where the boolean ``index`` (a mask DEM, geoutils mask, DataArray or
        array) is True, as a 1-D masked array (upstream's ``dem[mask]``); any other numpy index
        (``dem[:]``, ``dem[10:20, 5]``) selects as on ``dem.data``. Computes those values only."""
        mask = self._boolean_index(index)
        if mask is not None:
            return np.ma.masked_invalid(np.asarray(self._da.data[mask].compute()))
        try:
            values = self._da.data[index]
        except NotImplementedError:  # pointwise integer arrays (np.where's tuple)
            values = self._da.data.vindex[index]
        except (IndexError, TypeError, ValueError) as exc:
            raise InputError(f"cannot index a DEM with {index!r}: {exc}") from None
        return np.ma.masked_invalid(np.asarray(values.compute()))

    def __setitem__(self, index: object, value: float) -> None:
        """Set the pixels selected by ``index`` (a mask, or any numpy index) to the number
        ``value`` (``np.ma.masked`` or NaN: nodata), in place as upstream; lazy, and the file is
        never written."""
        if value is np.ma.masked:
            value = np.nan
        if not isinstance(value, (int, float, np.number, np.bool_)):
            raise InputError(f"dem[index] = value takes a number (or np.ma.masked), got a {type(value).__name__}")
        mask = self._boolean_index(index)
        if mask is None:
            mask = da.from_array(index_to_mask(index, self.shape), chunks=self._da.data.chunks)
        self._da = self._da.copy(data=da.where(mask, np.asarray(value).astype(self.dtype), self._da.data))

    def set_mask(self, mask: object) -> None:
        """Make the pixels where ``mask`` is True nodata, in place (upstream's ``set_mask``); lazy."""
        if self.dtype == bool:
            raise InputError("set_mask needs an elevation DEM; a boolean DEM has no nodata")
        self[mask] = np.nan

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: object, **kwargs: object) -> object:
        """numpy ufuncs (``np.minimum(a, b)``, ``np.abs(dem)``...) give lazy DEMs, as upstream."""
        return apply_ufunc(self, ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Callable[..., object], types: tuple[type, ...], args: tuple[object, ...],
                           kwargs: dict[str, object]) -> object:
        """numpy functions upstream handles (``np.nanmean(dem)``, ``np.median(dem)``...), with its meaning."""
        return apply_array_function(self, func, args, kwargs)

    def __invert__(self) -> DEM:
        if self.dtype != bool:
            raise InputError("~ inverts a mask (a comparison of DEMs), not elevations")
        return self._like(self._da.copy(data=~self._da.data))

    def __neg__(self) -> DEM:
        return self._like(-self._da)

    def __pos__(self) -> DEM:
        return self

    def __abs__(self) -> DEM:
        return self._like(abs(self._da))

    def astype(self, dtype: np.dtype | str) -> DEM:
        """The DEM with values of ``dtype`` (lazy)."""
        return self._like(self._da.astype(dtype))


class _Coreg:  # what coregister_3d needs of a coregistration (xdem.coreg is above this module)
    def fit_and_apply(self, *args: object, **kwargs: object) -> object: ...


def _initial_vcrs(src: object, vcrs: object | None) -> VerticalRef | None:
    """The DEM's vertical CRS: the one given (one warning if the file declares another), else the file's."""
    given = None if vcrs is None else parse_vcrs(vcrs)  # type: ignore[arg-type]  # parse_vcrs says what it refuses
    declared = declared_vcrs(os.fspath(src)) if isinstance(src, (str, os.PathLike)) else None
    if given is not None and declared is not None and (given.crs, given.grid) != (declared.crs, declared.grid):
        warnings.warn(f"The CRS in the raster metadata already has a vertical component ({declared.name}), "
                      f"the user-input '{given.name}' will override it.", UserWarning, stacklevel=3)
    return given if given is not None else declared


def _warn_undeclared_voids(src: object) -> None:
    """One :class:`~xdem.checks.InputCheckWarning` line per value that looks like an undeclared void
    (-9999, -32768...) in a local file that declares no nodata (a few sampled tiles): as upstream,
    those pixels stay elevations here unless ``nodata=`` is given, so the user is told."""
    if not isinstance(src, (str, os.PathLike)) or not os.path.isfile(src):
        return
    with rasterio.open(src) as ds:
        values = sample_values(ds)
    for value, share in find_sentinels(values):
        warnings.warn(InputCheckWarning(
            f"xdem.DEM('{os.fspath(src)}'): {100 * share:.1f} % of the sampled pixels are exactly {value:g}, far "
            f"outside the other elevations, and the file declares no nodata: they count as elevations; "
            f"pass nodata={value:g} if they are voids"), stacklevel=3)


def _edge_bounds(t: Affine, shape: tuple[int, int]) -> tuple[float, float, float, float]:
    xs = (t.c, t.c + t.a * shape[1])
    ys = (t.f, t.f + t.e * shape[0])
    return (min(xs), min(ys), max(xs), max(ys))


def _install_operators() -> None:
    """Arithmetic (``+ - * / // % **``), comparisons (giving mask DEMs) and logic (``& | ^``)."""
    binary = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
              "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow, "and": operator.and_,
              "or": operator.or_, "xor": operator.xor}
    for name, op in binary.items():
        setattr(DEM, f"__{name}__", functools.partialmethod(DEM._binary, op=op))
        setattr(DEM, f"__r{name}__", functools.partialmethod(DEM._binary, op=op, reflected=True))
    for name in ("eq", "ne", "lt", "le", "gt", "ge"):
        setattr(DEM, f"__{name}__", functools.partialmethod(DEM._binary, op=getattr(operator, name)))
    DEM.__hash__ = object.__hash__  # type: ignore[method-assign]  # == is element-wise, identity stays hashable


def _refuse_mp_config(mp_config: object | None) -> None:
    if mp_config is not None:
        raise InputError("mp_config is upstream's multiprocessing; here dask computes in parallel: leave it out")


def _install_terrain() -> None:
    """``dem.curvature()``, ``dem.max_curvature()``, ``dem.rugosity()``... for every other attribute of
    :mod:`xdem.terrain`, with upstream 0.2.3's meaning and keywords (see :mod:`xdem.terrain.upstream`)."""
    names = ("curvature", "profile_curvature", "tangential_curvature", "planform_curvature", "flowline_curvature",
             "max_curvature", "min_curvature", "maximum_curvature", "terrain_ruggedness_index",
             "topographic_position_index", "roughness", "rugosity", "fractal_roughness", "texture_shading")
    for name in names:
        func = getattr(terrain, name)

        def method(self: DEM, *args: object, _func: Callable[..., object] = func, **kwargs: object) -> DEM:
            _refuse_mp_config(kwargs.pop("mp_config", None))
            out = _func(self, *args, **kwargs)
            if not isinstance(out, DEM):  # pragma: no cover - xdem.terrain gives a DEM for a DEM
                raise TypeError(f"xdem.terrain gave a {type(out).__name__} for a DEM")
            return out

        method.__name__ = name
        method.__doc__ = (f"{name.replace('_', ' ').capitalize()} (:func:`xdem.terrain.{name}`, same keywords), "
                          "upstream's meaning; lazy.")
        setattr(DEM, name, method)


_install_operators()
_install_terrain()
