"""A time series of DEMs, :class:`DEMCollection` (upstream xdem 0.2.3's), lazy.

DEMs with their dates and (optionally) outlines of the changing areas, one of them the
reference. :meth:`DEMCollection.subtract_dems` makes the dDEMs to the reference (lazy);
the series methods reduce them over the outlines with one grouped pass per dDEM, so memory
is one block whatever the DEMs' size.

As upstream's, every dDEM is *reference minus DEM* (for a DEM after the reference: earlier
minus later, "inverted"), dated from the earlier to the later of the two; the cumulative
series turn that into the elevation (volume) at each date relative to the first date.

Examples
--------
>>> from datetime import datetime
>>> import xdem
>>> from xdem.examples.glaciers import glacier_set
>>> g = glacier_set((200, 200), chunks=100)
>>> dems = [xdem.DEM(g.dem_start), xdem.DEM(g.ref)]
>>> c = xdem.DEMCollection(dems, timestamps=[datetime(1990, 8, 1), datetime(2009, 8, 1)], reference_dem=1)
>>> len(c.subtract_dems())
2
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from datetime import datetime

import dask.array as da
import geopandas as gpd
import numpy as np
import pandas as pd
import xarray as xr

from xdem.ddem import dDEM
from xdem.dem import DEM
from xdem.errors import InputError
from xdem.io.grid import get_resolution
from xdem.masks import _read_vector, labels_like, rasterize_like
from xdem.volume import polygon_sums

__all__ = ["DEMCollection"]

_YEAR_DAYS = 365.25


def _as_frame(outline: object) -> gpd.GeoDataFrame:
    """A geoutils Vector (its ``.ds``), a GeoDataFrame or a vector file's path, as a GeoDataFrame."""
    ds = getattr(outline, "ds", outline)
    if isinstance(ds, gpd.GeoDataFrame):
        return ds
    if isinstance(ds, (str, os.PathLike)):
        return _read(ds)
    raise InputError(f"outlines must be geoutils Vectors, GeoDataFrames or vector paths, got {type(outline).__name__}")


def _read(path: str | os.PathLike[str]) -> gpd.GeoDataFrame:
    """The outlines of a vector file, in their own CRS (one InputError line if unreadable or without CRS)."""
    gdf = _read_vector(path)
    if getattr(gdf, "crs", None) is None:
        raise InputError(f"the outlines '{path}' have no CRS; set one (e.g. with ogr2ogr -a_srs EPSG:XXXX)")
    return gdf


def _datetime64(value: object) -> np.datetime64:
    try:
        return np.datetime64(pd.Timestamp(value).to_datetime64(), "ns")
    except (TypeError, ValueError) as exc:
        raise InputError(f"timestamps must be dates (datetime, numpy.datetime64), got {value!r}") from exc


def _data_of(ddem: dDEM) -> xr.DataArray:
    """The gap-filled values of ``ddem`` if :meth:`dDEM.interpolate` ran, else its values."""
    filled = ddem._filled
    return filled if filled is not None else ddem.to_xarray()


class DEMCollection:
    """A temporal collection of DEMs (upstream's), lazy.

    Parameters
    ----------
    dems
        The DEMs (:class:`xdem.DEM`, geoutils Rasters, georeferenced DataArrays or paths).
    timestamps
        Their dates (required here: DEMs carry no date).
    outlines
        Polygons of the changing areas (e.g. glaciers): one (a geoutils Vector, GeoDataFrame or
        vector path), dated as the reference DEM, or a dict date -> polygons.
    reference_dem
        Index (in ``dems``) or instance of the reference DEM.
    """

    def __init__(self, dems: Sequence[object], timestamps: Sequence[datetime | np.datetime64] | None = None,
                 outlines: object | Mapping[datetime, object] | None = None, reference_dem: int | object = 0) -> None:
        stamps: list[object] = [getattr(d, "datetime", None) for d in dems] if timestamps is None else list(timestamps)
        if any(s is None for s in stamps):
            raise InputError("give timestamps=[...] (one date per DEM): the DEMs carry no date")
        if len(dems) != len(stamps):
            raise InputError(f"{len(dems)} DEMs but {len(stamps)} timestamps; give one date per DEM")
        if len(dems) < 2:
            raise InputError("a DEM collection needs at least two DEMs")
        given = [d if isinstance(d, DEM) else DEM(d) for d in dems]
        stamps64 = np.array([_datetime64(t) for t in stamps], dtype="datetime64[ns]")
        order = np.argsort(stamps64.astype("int64"), kind="stable")
        self.timestamps = stamps64[order]
        self.dems: list[DEM] = [given[i] for i in order]
        self.ddems: list[dDEM] = []
        if isinstance(reference_dem, (int, np.integer)):
            if not 0 <= int(reference_dem) < len(dems):
                raise InputError(f"reference_dem={reference_dem} is not an index of the {len(dems)} DEMs")
            self.reference_index = int(np.flatnonzero(order == int(reference_dem))[0])
        else:
            hits = [i for i, d in enumerate(self.dems) if d is reference_dem or dems[order[i]] is reference_dem]
            if not hits:
                raise InputError("reference_dem must be an index or one of the DEMs given")
            self.reference_index = hits[0]
        if outlines is None:
            self.outlines: dict[np.datetime64, gpd.GeoDataFrame] = {}
        elif isinstance(outlines, Mapping):
            self.outlines = {_datetime64(k): _as_frame(v) for k, v in outlines.items()}
        else:
            self.outlines = {self.reference_timestamp: _as_frame(outlines)}

    @property
    def reference_dem(self) -> DEM:
        """The reference DEM."""
        return self.dems[self.reference_index]

    @property
    def reference_timestamp(self) -> np.datetime64:
        """The reference DEM's date."""
        return self.timestamps[self.reference_index]

    def subtract_dems(self, resampling_method: str = "bilinear") -> list[dDEM]:
        """The dDEMs *reference minus DEM* of every DEM (lazy; the reference's own is zero), each
        brought onto the reference's grid (``resampling_method``) if needed. Kept in :attr:`ddems`."""
        ref = self.reference_dem
        ref_da = ref.to_xarray()
        ddems = []
        for i, dem in enumerate(self.dems):
            t = self.timestamps[i]
            if i == self.reference_index:
                zero = ref_da.copy(data=da.where(da.isfinite(ref_da.data), 0.0, np.nan).astype(ref_da.dtype))
                ddems.append(dDEM(zero, start_time=t, end_time=t, error=0))
                continue
            other = dem if dem.shape == ref.shape and dem.transform == ref.transform and dem.crs == ref.crs \
                else dem.reproject(ref=ref, resampling=resampling_method)
            ddems.append(dDEM(ref - other, start_time=min(t, self.reference_timestamp),
                              end_time=max(t, self.reference_timestamp)))
        self.ddems = ddems
        return self.ddems

    def interpolate_ddems(self, method: str = "idw") -> list[object]:
        """Gap-fill every dDEM: :meth:`xdem.dDEM.interpolate` with ``method``, the reference DEM
        as elevation and :meth:`get_ddem_mask` as mask; returns their ``filled_data`` (lazy).

        The default is ``"idw"``, :meth:`xdem.dDEM.interpolate`'s: upstream's default here,
        ``"linear"``, is none of its methods (``"idw"``, ``"local_hypsometric"``,
        ``"regional_hypsometric"``, ``"norm_regional_hypsometric"``)."""
        self._check_ddems()
        for ddem in self.ddems:
            ddem.interpolate(method=method, reference_elevation=self.reference_dem, mask=self.get_ddem_mask(ddem))
        return [ddem.filled_data for ddem in self.ddems]

    def _check_ddems(self) -> None:
        if not self.ddems:
            raise InputError("the dDEMs are not computed yet; call subtract_dems() first")

    def _outlines_for(self, ddem: dDEM, outlines_filter: str | None) -> list[gpd.GeoDataFrame]:
        """The outlines dated as the dDEM's start and end (both: their union), else the start's,
        else the only ones; none: everything."""
        outlines = self.outlines
        if outlines_filter is not None:
            try:
                outlines = {k: v.query(outlines_filter) for k, v in outlines.items()}
            except Exception as exc:  # pandas raises many kinds for a bad query
                raise InputError(f"outlines_filter {outlines_filter!r} is not a valid query of the outlines: {exc}") \
                    from None
        start, end = _datetime64(ddem.start_time), _datetime64(ddem.end_time)
        if start in outlines and end in outlines:
            return [outlines[start], outlines[end]] if start != end else [outlines[start]]
        if start in outlines:
            return [outlines[start]]
        if len(outlines) == 1:
            return list(outlines.values())
        return []

    def get_ddem_mask(self, ddem: dDEM, outlines_filter: str | None = None) -> da.Array:
        """Lazy boolean mask of ``ddem`` (one of :attr:`ddems`): inside the outlines of its start
        and end dates (their union), else of its start date, else the only outlines, else everywhere.

        ``outlines_filter`` is a :meth:`pandas.DataFrame.query` of the outlines, e.g.
        ``"NAME == 'Alphabreen'"``. ``.compute()`` gives the numpy mask.
        """
        if not any(ddem is d for d in self.ddems):
            raise InputError("the dDEM must be one of this collection's ddems (subtract_dems())")
        grid = ddem.to_xarray()
        frames = self._outlines_for(ddem, outlines_filter)
        if not frames:
            return da.ones(grid.shape, dtype=bool, chunks=grid.data.chunks)
        mask = rasterize_like(frames[0], grid)
        for frame in frames[1:]:
            mask = mask | rasterize_like(frame, grid)
        return mask

    def _sums(self, ddem: dDEM, mask: object | None, outlines_filter: str | None, by: str | None) -> pd.DataFrame:
        """Per group (one without ``by``, else one per value of column ``by``): pixels and sums."""
        data = _data_of(ddem)
        if by is None:
            m = self.get_ddem_mask(ddem, outlines_filter) if mask is None else _mask_array(mask, data)
            sums = polygon_sums(data, m.astype(np.int32), n_polygons=1)
            return sums.iloc[1:].set_index(pd.Index(["all"]))
        frames = self._outlines_for(ddem, outlines_filter)
        if not frames or by not in frames[0].columns:
            raise InputError(f"by={by!r} needs outlines with a column {by!r}")
        gdf = frames[0]
        sums = polygon_sums(data, labels_like(gdf, data), n_polygons=len(gdf)).iloc[1:]
        return sums.groupby(np.asarray(gdf[by]), sort=False).sum()

    def _long(self, outlines_filter: str | None, mask: object | None, nans_ok: bool, by: str | None) -> pd.DataFrame:
        """One row per dDEM (but the reference's own) and group: interval, group, mean dh, area."""
        self._check_ddems()
        rx, ry = get_resolution(self.reference_dem.to_xarray())
        rows = []
        for ddem in self.ddems:
            if ddem.start_time == ddem.end_time:
                continue
            s = self._sums(ddem, mask, outlines_filter, by)
            if not nans_ok and (s["valid"] < s["pixels"]).any():  # voids, or voids gap filling left
                warnings.warn(f"NaNs found in dDEM ({ddem.start_time} - {ddem.end_time}).", UserWarning, stacklevel=3)
            interval = pd.Interval(pd.Timestamp(ddem.start_time), pd.Timestamp(ddem.end_time))
            with np.errstate(invalid="ignore", divide="ignore"):
                dh = np.where(s["valid"] > 0, s["sum_dh"] / s["valid"], np.nan)
            for name, mean, pixels in zip(s.index, dh, s["pixels"]):
                rows.append((interval, name, float(mean), float(pixels) * rx * ry))
        return pd.DataFrame(rows, columns=["interval", "group", "dh", "area"])

    def get_dh_series(self, outlines_filter: str | None = None, mask: object | None = None, nans_ok: bool = False,
                      *, by: str | None = None) -> pd.DataFrame:
        """Mean dh (``dh``, m) over the mask and its area (``area``, m^2) of every dDEM but the
        reference's own, indexed by the dDEM's interval (upstream's); with ``by`` (a column of
        the outlines), one row per interval and value of that column (a MultiIndex).

        ``mask`` (boolean, on the reference grid) overrides the outlines. Voids: the mean of the
        valid pixels (a warning unless ``nans_ok``; gap-fill first with :meth:`interpolate_ddems`).
        """
        frame = self._long(outlines_filter, mask, nans_ok, by)
        if by is None:
            return frame.drop(columns="group").set_index("interval").rename_axis(None)
        return frame.rename(columns={"group": by}).set_index(["interval", by])

    def get_dv_series(self, outlines_filter: str | None = None, mask: object | None = None, nans_ok: bool = False,
                      *, by: str | None = None) -> pd.Series:
        """Volume change (m^3: mean dh times area) of every dDEM, as :meth:`get_dh_series`."""
        dh = self.get_dh_series(outlines_filter=outlines_filter, mask=mask, nans_ok=nans_ok, by=by)
        return dh["area"] * dh["dh"]

    def get_cumulative_series(self, kind: str = "dh", outlines_filter: str | None = None, mask: object | None = None,
                              nans_ok: bool = False, *, by: str | None = None) -> pd.Series | pd.DataFrame:
        """Cumulative elevation (``kind="dh"``, m) or volume (``"dv"``, m^3) change since the first
        date, indexed by date (a DataFrame, one column per value of ``by``, with ``by``)."""
        if kind.lower() not in ("dh", "dv"):
            raise InputError(f"kind must be 'dh' or 'dv', got {kind!r}")
        table = self._long(outlines_filter, mask, nans_ok, by)
        table["v"] = table["dh"] if kind.lower() == "dh" else table["dh"] * table["area"]
        ref = pd.Timestamp(self.reference_timestamp)
        table["date"] = [iv.left if iv.right == ref else iv.right for iv in table["interval"]]
        # every dDEM is reference minus DEM: the DEM relative to the reference is its negative
        wide = -table.pivot(index="date", columns="group", values="v")
        wide.loc[ref] = 0.0
        wide = wide.sort_index()
        wide = wide - wide.iloc[0]
        wide.index.name = None
        if by is None:
            return wide["all"].rename(None)
        wide.columns.name = by
        return wide

    def get_rate_series(self, kind: str = "dh", outlines_filter: str | None = None, mask: object | None = None,
                        nans_ok: bool = False, *, by: str | None = None) -> pd.Series | pd.DataFrame:
        """Change per year (m/yr or m^3/yr) between successive dates, indexed by the later date
        of each period (not upstream's: :meth:`get_cumulative_series` differenced over the years)."""
        cumulative = self.get_cumulative_series(kind, outlines_filter=outlines_filter, mask=mask, nans_ok=nans_ok,
                                                by=by)
        years = pd.Series(cumulative.index, index=cumulative.index).diff().dt.total_seconds() / 86400.0 / _YEAR_DAYS
        return cumulative.diff().div(years, axis=0).iloc[1:]

    def stack_ddems(self) -> xr.DataArray:
        """The dDEMs (gap-filled where :meth:`interpolate_ddems` ran) as one lazy DataArray
        ``(time, y, x)``, ``time`` the date of each DEM (the reference's layer is zero)."""
        self._check_ddems()
        layers = [_data_of(d).drop_vars("spatial_ref", errors="ignore") for d in self.ddems]
        ref = self.reference_dem.to_xarray()
        stack = xr.concat(layers, dim=pd.Index(self.timestamps, name="time"), join="override")
        return stack.rio.write_crs(ref.rio.crs).rio.write_transform(ref.rio.transform())


def _mask_array(mask: object, like: xr.DataArray) -> da.Array:
    """A boolean mask (numpy, dask, DataArray or mask DEM) on ``like``'s grid, as a dask array."""
    if isinstance(mask, DEM):
        mask = mask.to_xarray()
    data = mask.data if isinstance(mask, xr.DataArray) else mask
    arr = data if isinstance(data, da.Array) else da.from_array(np.asarray(data), chunks=like.data.chunks)
    if tuple(arr.shape) != tuple(like.shape):
        raise InputError(f"the mask has shape {tuple(arr.shape)}, the dDEMs {tuple(like.shape)}; give it on the "
                         "reference DEM's grid")
    return arr.astype(bool)
