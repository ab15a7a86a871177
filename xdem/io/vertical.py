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

from typing import Any

__all__ = ["vertical_crs", "compare_vertical", "file_crs"]


def file_crs(path: Any) -> Any:
    """The CRS of a raster file with its vertical part, if tagged (GDAL reports GeoTIFF
    compound CRSs only when ``GTIFF_REPORT_COMPD_CS`` is set); ``None`` for a file GDAL cannot
    open (e.g. a points file) or without a CRS."""
    import rasterio

    try:
        with rasterio.Env(GTIFF_REPORT_COMPD_CS=True), rasterio.open(path) as src:
            return src.crs
    except Exception:  # noqa: BLE001 - not a raster: nothing to say
        return None


def vertical_crs(crs: Any) -> dict[str, Any] | None:
    """The vertical reference named by ``crs`` (a rasterio/pyproj CRS, WKT or ``"EPSG:..."``).

    Returns
    -------
    dict or None
        ``{"name", "kind", "epsg"}``: ``kind`` is ``"ellipsoidal"`` (a 3-D geographic CRS:
        heights above the ellipsoid ``name``) or ``"gravity"`` (the vertical part of a
        compound CRS, e.g. a geoid height); ``None`` when ``crs`` says nothing about heights.
    """
    if crs is None:
        return None
    from pyproj import CRS

    try:
        pc = CRS.from_user_input(crs.to_wkt() if hasattr(crs, "to_wkt") else crs)
    except Exception:  # noqa: BLE001 - an unreadable CRS says nothing about heights
        return None
    if pc.is_compound:
        for sub in pc.sub_crs_list:
            if sub.is_vertical:
                return {"name": sub.name, "kind": "gravity", "epsg": sub.to_epsg()}
        return None
    if pc.is_vertical:
        return {"name": pc.name, "kind": "gravity", "epsg": pc.to_epsg()}
    if pc.is_geographic and len(pc.axis_info) == 3:
        return {"name": pc.ellipsoid.name if pc.ellipsoid else pc.name, "kind": "ellipsoidal", "epsg": pc.to_epsg()}
    return None


def compare_vertical(ref_crs: Any, tba_crs: Any) -> str | None:
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
