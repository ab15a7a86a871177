"""What geoutils reads of a Raster, for :class:`xdem.DEM` (a geoutils Raster subclass): its band
count, load state, file name, tags, pixel interpretation, and one clear line for the in-memory
attributes of geoutils' Raster that the lazy DEM does not have.

Examples
--------
>>> import xdem
>>> dem = xdem.DEM(xdem.examples.get_path("lidar"))
>>> dem.count, dem.is_loaded, dem.area_or_point
(1, False, 'Area')
"""

from __future__ import annotations

import geoutils as gu
import numpy as np
import xarray as xr

__all__ = ["RasterAttributes"]


class RasterAttributes:
    """The attributes geoutils' functions and methods read of a Raster, over a lazy DataArray."""

    _da: xr.DataArray

    @property
    def count(self) -> int:
        """Number of bands: 1."""
        return 1

    @property
    def bands(self) -> tuple[int, ...]:
        """Band indexes, as geoutils: ``(1,)``."""
        return (1,)

    @property
    def is_loaded(self) -> bool:
        """Whether the values are held in memory (after :meth:`load` or ``load_data=True``)."""
        return bool(self.__dict__.get("_loaded", False))

    def load(self, **kwargs: object) -> None:
        """Hold the values in memory (dask ``persist``), as upstream's ``load``; the geoutils
        methods that load first (``get_stats``...) then run on them."""
        self._da = self._da.persist()
        self._loaded = True

    @property
    def filename(self) -> str | None:
        """The file the DEM was opened from, if it was opened from a path."""
        name = self.__dict__.get("_filename")
        return None if name is None else str(name)

    @property
    def tags(self) -> dict[str, str]:
        """The raster's metadata tags (a copy; changing it changes nothing)."""
        return {str(k): str(v) for k, v in self._da.attrs.items() if not str(k).startswith("_")}

    @property
    def is_mask(self) -> bool:
        """Whether the DEM is a boolean mask (a comparison of DEMs)."""
        return bool(np.dtype(self._da.dtype) == np.bool_)

    @property
    def area_or_point(self) -> str:
        """Pixel interpretation: ``"Area"`` (the transform is of the pixel corners)."""
        return "Area"

    def __getattr__(self, name: str) -> object:  # only for names not found otherwise
        if (name.startswith("_") and not name.startswith("__")) or hasattr(gu.Raster, name):  # a Raster property failed
            raise AttributeError(f"this geoutils Raster operation reads the in-memory attribute {name!r}, which "
                                 "xdem's lazy DEM does not have; use xdem.DEM's own methods, or gu.Raster(path)")
        raise AttributeError(f"'DEM' object has no attribute {name!r}")

    def __str__(self) -> str:
        return repr(self)

    def _repr_html_(self) -> str:  # notebooks: geoutils' would read the values
        return repr(self).replace("&", "&amp;").replace("<", "&lt;")
