"""Vertical reference of a DEM, when its CRS says it: :func:`vertical_crs`, :func:`compare_vertical`.

A DEM's heights are relative to an ellipsoid (a 3-D geographic CRS such as EPSG:4979, or GNSS
and most satellite DEMs) or to a geoid (a compound CRS whose vertical part is e.g. EGM2008
height, EPSG:3855). Between the two there are tens of metres, smooth over the DEM: a
coregistration of an ellipsoid DEM onto a geoid DEM fits that difference as a vertical shift
and tilt. Most GeoTIFFs carry no vertical CRS at all; then nothing is known (``None``).

Examples
--------
>>> vertical_crs("EPSG:32633+3855")["name"]
'EGM2008 height'
>>> vertical_crs("EPSG:4979")["kind"]
'ellipsoidal'
>>> vertical_crs("EPSG:32633") is None
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: this module imports nothing at import time
    import rasterio.crs

    from xdem.typing import CRSLike, PathLike

__all__ = ["vertical_crs", "vertical_unit_factor", "compare_vertical", "file_crs", "vertical_part"]


def file_crs(path: PathLike) -> rasterio.crs.CRS | None:
    """The CRS of a raster file with its vertical part, if tagged (GDAL reports GeoTIFF
    compound CRSs only when ``GTIFF_REPORT_COMPD_CS`` is set); ``None`` for a file GDAL cannot
    open (e.g. a points file) or without a CRS."""
    import rasterio

    try:
        with rasterio.Env(GTIFF_REPORT_COMPD_CS=True), rasterio.open(path) as src:
            return src.crs
    except Exception:  # noqa: BLE001 - not a raster: nothing to say
        return None


def _pyproj(crs: Any) -> Any:
    """``crs`` (a rasterio/pyproj CRS, WKT or ``"EPSG:..."``) as a :class:`pyproj.CRS`, or
    ``None`` when missing or unreadable."""
    if crs is None:
        return None
    from pyproj import CRS

    try:
        return CRS.from_user_input(crs.to_wkt() if hasattr(crs, "to_wkt") else crs)
    except Exception:  # noqa: BLE001 - an unreadable CRS says nothing about heights
        return None


def vertical_part(pc: Any) -> Any:
    """The vertical CRS of ``pc`` (itself, or the vertical part of a compound CRS), or ``None``."""
    subs = pc.sub_crs_list if pc.is_compound else [pc]
    return next((sub for sub in subs if sub.is_vertical), None)


def vertical_crs(crs: CRSLike | None) -> dict[str, str | int | None] | None:
    """The vertical reference named by ``crs`` (a rasterio/pyproj CRS, WKT or ``"EPSG:..."``).

    Returns
    -------
    dict or None
        ``{"name", "kind", "epsg"}``: ``kind`` is ``"ellipsoidal"`` (a 3-D geographic CRS:
        heights above the ellipsoid ``name``) or ``"gravity"`` (the vertical part of a
        compound CRS, e.g. a geoid height); ``None`` when ``crs`` says nothing about heights.
    """
    pc = _pyproj(crs)
    if pc is None:
        return None
    sub = vertical_part(pc)
    if sub is not None:
        return {"name": sub.name, "kind": "gravity", "epsg": sub.to_epsg()}
    if not pc.is_compound and pc.is_geographic and len(pc.axis_info) == 3:
        return {"name": pc.ellipsoid.name if pc.ellipsoid else pc.name, "kind": "ellipsoidal", "epsg": pc.to_epsg()}
    return None


def vertical_unit_factor(crs: CRSLike | None) -> tuple[float, str] | None:
    """``(factor to metres, unit name)`` of the vertical axis of ``crs``, ``None`` if untagged.

    Examples
    --------
    >>> vertical_unit_factor("EPSG:26915+6360")
    (0.30480060960121924, 'US survey foot')
    >>> vertical_unit_factor("EPSG:26915") is None
    True
    """
    pc = _pyproj(crs)
    sub = None if pc is None else vertical_part(pc)
    if sub is None or not sub.axis_info:
        return None
    return float(sub.axis_info[0].unit_conversion_factor), sub.axis_info[0].unit_name


def compare_vertical(ref_crs: CRSLike | None, tba_crs: CRSLike | None) -> str | None:
    """One line saying why REF's and TBA's heights may not be comparable, or ``None``.

    Only when both CRSs name a vertical reference and they differ (a missing vertical CRS is
    the common case and says nothing).

    Examples
    --------
    >>> line = compare_vertical("EPSG:4979", "EPSG:4326+3855")
    >>> "above the ellipsoid" in line and "EGM2008 height" in line
    True
    >>> compare_vertical("EPSG:32633+3855", "EPSG:32633+3855") is None
    True
    """
    a, b = vertical_crs(ref_crs), vertical_crs(tba_crs)
    if a is None or b is None or (a["name"], a["kind"]) == (b["name"], b["kind"]):
        return None

    def text(v: dict) -> str:
        return f"{v['name']} ({'heights above the ellipsoid' if v['kind'] == 'ellipsoidal' else 'a geoid or datum'})"

    return (f"REF and TBA have different vertical references: REF {text(a)}, TBA {text(b)}; their heights may "
            "differ by tens of metres (the geoid undulation), which the coregistration would fit as a shift and "
            "tilt; convert one first (e.g. gdalwarp -s_srs ... -t_srs ... with PROJ's geoid grids)")
