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
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import xarray as xr
from affine import Affine

from xdem.dem import DEM
from xdem.errors import InputError
from xdem.typing import CRSLike

__all__ = ["dDEM"]

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
    def fill_method(self) -> str:
        """The gap-filling method last used by :meth:`interpolate` (``""`` before)."""
        return self._fill_method

    def __str__(self) -> str:
        return f"dDEM from {self.start_time} to {self.end_time}.\n\n{super().__str__()}"

    def copy(self, new_array: np.ndarray | None = None) -> dDEM:
        """A dDEM with the same epochs (and filled values), sharing this one's lazy data or holding ``new_array``."""
        out = dDEM(DEM.copy(self, new_array), start_time=self.start_time, end_time=self.end_time, error=self.error)
        out._filled, out._fill_method = (self._filled, self._fill_method) if new_array is None else (None, "")
        return out
