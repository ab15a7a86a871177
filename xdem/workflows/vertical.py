"""The vertical CRSs of a coregistration's DEM pair (``--ref-vcrs``, ``--tba-vcrs``, ``--to-vcrs``).

Each DEM's vertical CRS is the one the user declares (``ref_vcrs`` / ``tba_vcrs`` of the
request), else the one its file's CRS declares (a compound or 3-D CRS), else unknown. With
``to_vcrs``, both DEMs are converted to it before the fit (lazily, :func:`xdem.vcrs.convert_heights`)
and the output declares it; without, DEMs declared in different vertical CRSs give one warning
line: their heights are not comparable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import xarray as xr

from xdem._check_base import InputCheckWarning
from xdem.errors import InputError
from xdem.io.vertical import compare_vertical
from xdem.vcrs import VcrsInput, VerticalRef, compound_crs, convert_heights, parse_vcrs, vcrs_of_crs

if TYPE_CHECKING:
    from xdem.workflows.request import CoregRequest

__all__ = ["vertical_pair", "declare_output", "vcrs_value"]

_LABEL = {"ref": "REF", "tba": "TBA"}


def vcrs_value(text: str | None) -> VcrsInput | None:
    """A command-line vertical CRS: an EPSG code (digits, or ``EPSG:5773``) as an int, else the text."""
    if text is None:
        return None
    t = text.strip()
    digits = t[5:] if t.upper().startswith("EPSG:") else t
    return int(digits) if digits.isdigit() else t


def _side(given: str | None, crs: object, side: str) -> VerticalRef | None:
    if given is not None:
        try:
            return parse_vcrs(vcrs_value(given))  # type: ignore[arg-type]  # a str given
        except InputError as e:
            raise InputError(f"--{side}-vcrs: {e}") from None
    try:
        return vcrs_of_crs(crs)
    except InputError:
        return None


def vertical_pair(r: CoregRequest, ref: xr.DataArray, tba: xr.DataArray, ref_crs: object,
                  tba_crs: object) -> tuple[xr.DataArray, xr.DataArray, str | None, type[Warning]]:
    """REF and TBA in the request's ``to_vcrs`` (unchanged without it), and the warning line
    (``None``: nothing to say) with its category."""
    sides = {"ref": _side(r.ref_vcrs, ref_crs, "ref"), "tba": _side(r.tba_vcrs, tba_crs, "tba")}
    if r.to_vcrs is None:
        if r.ref_vcrs is None and r.tba_vcrs is None:
            return ref, tba, compare_vertical(ref_crs, tba_crs), UserWarning
        a, b = sides["ref"], sides["tba"]
        if a is None or b is None or (a.crs, a.grid) == (b.crs, b.grid):
            return ref, tba, None, InputCheckWarning
        return ref, tba, (f"REF is in vertical CRS {a.name} and TBA in {b.name}: their heights are not comparable "
                          f"(they differ by the geoid undulation, tens of metres); give --to-vcrs to convert both "
                          f"(e.g. --to-vcrs {a.name if a.is_ellipsoid else 'Ellipsoid'})"), InputCheckWarning
    try:
        target = parse_vcrs(vcrs_value(r.to_vcrs))  # type: ignore[arg-type]  # a str given
    except InputError as e:
        raise InputError(f"--to-vcrs: {e}") from None
    out = []
    for key, arr in (("ref", ref), ("tba", tba)):
        src = sides[key]
        if src is None:
            raise InputError(f"{_LABEL[key]}'s vertical CRS is unknown (its file declares none): give --{key}-vcrs "
                             "(e.g. Ellipsoid, EGM96, EGM08, 5773) to convert it with --to-vcrs")
        out.append(convert_heights(arr, source=src, target=target, interpolation=r.geoid_interpolation))
    return out[0], out[1], None, InputCheckWarning


def declare_output(aligned: xr.DataArray, r: CoregRequest) -> xr.DataArray:
    """``aligned`` with the compound CRS of ``to_vcrs`` (what its COG declares), else as it is.

    Ellipsoid heights in a projected CRS keep the 2-D CRS: GeoTIFF cannot declare a 3-D
    projected CRS (GDAL writes none at all), and a DEM that declares no vertical CRS is what
    ellipsoid-height products deliver; a geographic one becomes its 3-D CRS (EPSG:4979)."""
    if r.to_vcrs is None or aligned.rio.crs is None:
        return aligned
    target = parse_vcrs(vcrs_value(r.to_vcrs))  # type: ignore[arg-type]  # a str given
    if target.is_ellipsoid and not aligned.rio.crs.is_geographic:
        return aligned
    out: xr.DataArray = aligned.rio.write_crs(compound_crs(aligned.rio.crs, target).to_wkt())
    return out
