"""Upstream's vertical-CRS members of :class:`xdem.DEM` (``vcrs``, ``set_vcrs``, ``to_vcrs``...),
delegating to :mod:`xdem.vcrs`; the DEM keeps a :class:`~xdem.vcrs.VerticalRef` or ``None``."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Literal

import pyproj
import xarray as xr

from xdem.errors import InputError
from xdem.io.vertical import file_crs
from xdem.vcrs import VcrsInput, VerticalRef, compound_crs, convert_heights, parse_vcrs, vcrs_of_crs

if TYPE_CHECKING:
    from xdem.dem import DEM

__all__ = ["VcrsMembers", "declared_vcrs"]


def declared_vcrs(source: object) -> VerticalRef | None:
    """The vertical CRS a raster file's CRS declares (a compound or 3-D CRS), else ``None``."""
    crs = file_crs(source) if isinstance(source, str) else None
    try:
        return vcrs_of_crs(crs)
    except InputError:
        return None


class VcrsMembers:
    """``vcrs``, ``vcrs_name``, ``vcrs_grid``, ``ccrs``, ``set_vcrs``, ``to_vcrs`` of a DEM."""

    _da: xr.DataArray
    _vcrs: VerticalRef | None

    @property
    def vcrs(self) -> pyproj.CRS | Literal["Ellipsoid"] | None:
        """The vertical CRS: a vertical :class:`pyproj.CRS`, ``"Ellipsoid"``, or ``None`` (unknown)."""
        return None if self._vcrs is None else self._vcrs.crs

    @property
    def vcrs_name(self) -> str | None:
        """Name of the vertical CRS (for the ellipsoid: the ellipsoid of the DEM's CRS)."""
        if self._vcrs is None:
            return None
        if self._vcrs.is_ellipsoid:
            crs = self._da.rio.crs
            ellipsoid = pyproj.CRS(crs.to_wkt()).ellipsoid if crs is not None else None
            return f"Ellipsoid (No vertical CRS). Datum: {ellipsoid.name if ellipsoid else 'unknown'}."
        return self._vcrs.name

    @property
    def vcrs_grid(self) -> str | None:
        """The geoid grid file the heights are converted with (``None``: the ellipsoid, or unknown)."""
        return None if self._vcrs is None else self._vcrs.grid

    @property
    def ccrs(self) -> pyproj.CRS | None:
        """The compound CRS (horizontal + vertical; a 3-D CRS for ellipsoid heights), or ``None``."""
        if self._vcrs is None or self._da.rio.crs is None:
            return None
        return compound_crs(self._da.rio.crs, self._vcrs)

    def set_vcrs(self, new_vcrs: VcrsInput) -> None:
        """Declare the vertical CRS of the heights (their values are unchanged): ``"Ellipsoid"``,
        ``"EGM96"``, ``"EGM08"``, a geoid grid file, a vertical CRS or its EPSG code."""
        self._vcrs = parse_vcrs(new_vcrs)

    def to_vcrs(self, vcrs: VcrsInput, force_source_vcrs: VcrsInput | None = None,
                inplace: bool = False, *, interpolation: Literal["bilinear", "spline"] = "bilinear") -> DEM | None:
        """The DEM with its heights converted to vertical CRS ``vcrs``, lazily.

        ``force_source_vcrs`` declares the heights' vertical CRS instead of the DEM's own.
        ``interpolation`` of the geoid grid: PROJ's ``"bilinear"`` (as GDAL and upstream xdem) or
        NGA's 6 x 6 bicubic ``"spline"`` (:func:`xdem.vcrs.geoid_undulation`).
        With ``inplace=True`` this DEM is changed and ``None`` returned; else a new DEM (this
        one unchanged). Needs the geoid grid files on disk (:func:`xdem.vcrs.find_grid`).
        """
        if self._vcrs is None and force_source_vcrs is None:
            raise InputError("the DEM has no vertical CRS: declare it with dem.set_vcrs(...) (e.g. 'Ellipsoid', "
                             "'EGM96') or pass force_source_vcrs=...")
        src = parse_vcrs(force_source_vcrs) if force_source_vcrs is not None else self._vcrs
        assert src is not None
        dst = parse_vcrs(vcrs)
        if src.crs == dst.crs and src.grid == dst.grid:
            warnings.warn("Source and destination vertical CRS are the same, skipping vertical transformation.",
                          UserWarning, stacklevel=2)
            new = self._da
        else:
            new = convert_heights(self._da, source=src, target=dst, interpolation=interpolation)
        if inplace:
            self._da, self._vcrs = new, dst
            return None
        out = self._like(new)  # type: ignore[attr-defined]  # DEM's
        out._vcrs = dst
        return out
