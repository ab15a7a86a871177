"""Checks of what the inputs of a coregistration claim, once, before the fit (Seam 5).

:func:`check_inputs` reads a small part of each DEM: ``WINDOWS x WINDOWS`` windows spread over
the file, each of ``WINDOW_SIDE`` pixels a side of its coarsest overview (of its full
resolution when it has none), so a few tiles each whatever the DEM size (these constants and
the thresholds live in :mod:`xdem._check_base`). From it:

- **not a DEM**: several bands and none chosen, an RGB(A) image, a categorical map (an integer
  band with few distinct values that jump between neighbours, or a palette), a constant
  raster: an error;
- **undeclared voids**: a value the file does not declare as nodata held by a share of the
  pixels and far outside the other elevations (-9999, -32768, 0, 3.4e38, 65535...,
  :func:`find_sentinels`): treated as nodata, with a warning naming it;
- **vertical units**: a vertical CRS in feet is converted to metres (a note); the robust
  spreads of the two DEMs' elevations on their overlap are compared, and a ratio matching a
  unit factor (feet/metres, centimetres, millimetres) is an error naming the fix
  (``--tba-vertical-scale 0.3048``); another ratio far from 1 is a warning (:mod:`xdem._scale_checks`);
- **masks that cover nothing** (:mod:`xdem._mask_checks`): a warning for an exclude mask, an
  error for an inlier mask leaving too few pixels;
- **REF coarser than TBA**: a note.

The result is an :class:`InputChecks`: the nodata values and vertical scales to open the DEMs
with, and the findings (the CLI prints them, the JSON document holds them as
``input_checks``, the verdict may read them).
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from xdem._check_base import (
    _LABEL,
    CATEGORICAL_JUMP,
    CATEGORICAL_VALUES,
    COARSER,
    UNIT_FACTORS,
    DemCheck,
    Finding,
    InputChecks,
    InputCheckWarning,
    _fix,
    _raise,
    find_sentinels,
    read_windows,
    sample_values,
)
from xdem._mask_checks import mask_findings
from xdem._scale_checks import pair_scale_finding
from xdem.errors import InputError
from xdem.io.vertical import compare_vertical, file_crs, vertical_crs, vertical_unit_factor
from xdem.io.zarr_store import is_zarr_path

if TYPE_CHECKING:  # annotations only: rasterio is imported where a file is read
    import rasterio.crs

    from xdem.typing import JSONDict

__all__ = ["Finding", "DemCheck", "InputChecks", "InputCheckWarning", "check_dem", "check_inputs",
           "find_sentinels", "read_windows", "file_facts", "input_facts", "vertical_warning", "UNIT_FACTORS"]


def _neighbour_jump(src: Any, band: int) -> float:
    """Median absolute difference of horizontally neighbouring, differing values in a few
    full-resolution windows of ``band`` (0 if none differ)."""
    from rasterio.windows import Window

    jumps = []
    for r, c in ((0.25, 0.25), (0.25, 0.75), (0.5, 0.5), (0.75, 0.25), (0.75, 0.75)):
        win = Window(int(c * src.width), int(r * src.height), min(64, src.width), min(64, src.height))
        win = win.intersection(Window(0, 0, src.width, src.height))
        data = src.read(band, window=win).astype(np.float64)
        d = np.abs(np.diff(data, axis=1)).ravel()
        jumps.append(d[d > 0])
    d = np.concatenate(jumps)
    return float(np.median(d)) if d.size else 0.0


def _bands_finding(src: Any, path: str, side: str, band: int | None) -> Finding | None:
    """An error when ``band`` is not given for a multi-band file or out of range, or the file is RGB(A)."""
    from rasterio.enums import ColorInterp

    colours = {ColorInterp.red, ColorInterp.green, ColorInterp.blue, ColorInterp.alpha}
    rgb = set(src.colorinterp) & colours >= {ColorInterp.red, ColorInterp.green, ColorInterp.blue} or (
        src.count in (3, 4) and set(src.dtypes) == {"uint8"})
    if band is not None and not 1 <= band <= src.count:
        return Finding("bands", "error", side, f"band {band} is out of range for {_LABEL[side]} '{path}', which has "
                       f"{src.count} band(s); give {_fix(side, 'band', 'N')} with N from 1 to {src.count}")
    if src.count == 1 or band is not None:
        return None
    if rgb:
        return Finding("not_a_dem", "error", side,
                       f"{_LABEL[side]} '{path}' does not look like a DEM: it has {src.count} bands of "
                       f"{src.dtypes[0]} ({', '.join(c.name for c in src.colorinterp)}), an RGB image; give a DEM of "
                       f"one band of elevations (or, if one band holds elevations, {_fix(side, 'band', 'N')})",
                       {"bands": src.count, "dtype": src.dtypes[0]})
    return Finding("bands", "error", side, f"{_LABEL[side]} '{path}' has {src.count} bands; choose the band of "
                   f"elevations with {_fix(side, 'band', 'N')} (1 to {src.count})", {"bands": src.count})


def _kind_finding(src: Any, path: str, side: str, band: int, values: np.ndarray) -> Finding | None:
    """An error when the sampled band is a categorical map or constant."""
    from rasterio.enums import ColorInterp

    what = f"{_LABEL[side]} '{path}' does not look like a DEM"
    v = values[np.isfinite(values)]
    dtype = src.dtypes[band - 1]
    if src.colorinterp[band - 1] == ColorInterp.palette:
        return Finding("not_a_dem", "error", side, f"{what}: band {band} ({dtype}) has a colour palette, a "
                       "categorical map (e.g. land cover); give a DEM of elevations", {"dtype": dtype})
    if v.size == 0:
        return None  # an empty sample: the fit's "not enough valid pixels" says it better
    uniq = np.unique(v)
    if uniq.size == 1:
        return Finding("not_a_dem", "error", side, f"{what}: every sampled pixel of band {band} is {uniq[0]:g}, a "
                       "constant raster; give a DEM of elevations (or declare that value nodata)",
                       {"value": float(uniq[0])})
    if np.issubdtype(np.dtype(dtype), np.integer) and uniq.size <= CATEGORICAL_VALUES:
        jump = _neighbour_jump(src, band)
        span = float(uniq[-1] - uniq[0])
        if jump >= CATEGORICAL_JUMP * span:
            shown = ", ".join(f"{u:g}" for u in uniq[:8]) + (", ..." if uniq.size > 8 else "")
            return Finding("not_a_dem", "error", side,
                           f"{what}: band {band} is {dtype} with only {uniq.size} distinct values ({shown}) that jump "
                           f"by {jump:g} between neighbouring pixels (of a range of {span:g}), a categorical map "
                           "(e.g. land cover); give a DEM of elevations",
                           {"dtype": dtype, "distinct": int(uniq.size), "jump": jump})
    return None


def _scale_of(src: Any, path: str, side: str, given: float | None) -> tuple[float, list[Finding]]:
    """The vertical scale of a DEM: the one given, else its vertical CRS's factor to metres."""
    if given is not None:
        if not (math.isfinite(given) and given > 0):
            raise InputError(f"the vertical scale of {_LABEL[side]} must be a positive number, got {given:g}")
        return float(given), []
    tagged = vertical_unit_factor(src.crs) if src.crs is not None else None
    if tagged is None or abs(tagged[0] - 1.0) < 1e-9:
        return 1.0, []
    factor, unit = tagged
    return factor, [Finding("vertical_units", "note", side,
                            f"{_LABEL[side]} '{path}' has a vertical CRS in {unit}: its elevations are multiplied by "
                            f"{factor:.7g} (to metres); give {_fix(side, 'vertical_scale', 1)} to keep them as they are",
                            {"unit": unit, "factor": factor})]


def check_dem(path: str | os.PathLike, *, side: Literal["reference", "to_be_aligned"], band: int | None = None,
              nodata: float | None = None, vertical_scale: float | None = None) -> DemCheck:
    """Check one DEM file (bands, kind, undeclared voids, vertical units) on a decimated read.

    Raises
    ------
    xdem.errors.InputError
        It is no DEM (several bands and no ``band``, RGB, categorical, constant).

    Examples
    --------
    >>> import xdem
    >>> c = check_dem(xdem.examples.get_path("lidar"), side="reference")
    >>> c.nodata, c.vertical_scale, c.findings
    (None, 1.0, ())
    """
    import rasterio

    path = os.fspath(path)
    if is_zarr_path(path):  # written by xdem (a DEM of one variable): nothing read here
        return DemCheck(path, band or 1, None if nodata is None else (nodata,), vertical_scale or 1.0, (0.0, 0.0), ())
    try:
        with rasterio.Env(GTIFF_REPORT_COMPD_CS=True), rasterio.open(path) as src:
            problem = _bands_finding(src, path, side, band)
            if problem is not None:
                _raise(problem)
            b = band or 1
            values = sample_values(src, b)
            if nodata is not None and not np.isnan(nodata):
                values[values == nodata] = np.nan
            problem = _kind_finding(src, path, side, b, values)
            if problem is not None:
                _raise(problem)
            scale, findings = _scale_of(src, path, side, vertical_scale)
            res = (abs(src.transform.a), abs(src.transform.e))
            declared = nodata if nodata is not None else src.nodata
    except InputError:
        raise
    except Exception:  # noqa: BLE001 - unreadable or damaged: xdem.open_dem says how, in one line
        return DemCheck(path, band or 1, None if nodata is None else (nodata,), vertical_scale or 1.0, (0.0, 0.0), ())
    sentinels = find_sentinels(values)
    for value, share in sentinels:
        also = "" if declared is None or np.isnan(declared) else f" (besides its nodata {declared:g})"
        findings.append(Finding(
            "sentinel", "warning", side,
            f"{_LABEL[side]} '{path}': {100 * share:.1f} % of the sampled pixels are exactly {value:g}, far outside "
            f"the other elevations ({np.nanpercentile(values[values != value], 1):.6g} to "
            f"{np.nanpercentile(values[values != value], 99):.6g}): treated as nodata{also}; declare it with "
            f"{_fix(side, 'nodata', f'{value:g}')} to silence this", {"value": value, "share": share}))
    values_nodata = None
    if sentinels or nodata is not None:
        first = nodata if nodata is not None else (float("nan") if src.nodata is None else float(src.nodata))
        values_nodata = (first, *(v for v, _ in sentinels))
    return DemCheck(path, b, values_nodata, scale, res, tuple(findings))


def _resolution_finding(ref: DemCheck, tba: DemCheck, grid: str) -> Finding | None:
    """A note when REF's pixels are :data:`COARSER` times TBA's or more (in REF's CRS)."""
    import rasterio
    from rasterio.warp import transform_bounds

    with rasterio.open(ref.path) as r, rasterio.open(tba.path) as t:
        units = "°" if r.crs is not None and r.crs.is_geographic else " m"
        tres = (abs(t.transform.a), abs(t.transform.e))
        if t.crs != r.crs:
            b = transform_bounds(t.crs, r.crs, *t.bounds)
            tres = ((b[2] - b[0]) / t.width, (b[3] - b[1]) / t.height)
    rr, tr = math.sqrt(ref.resolution[0] * ref.resolution[1]), math.sqrt(tres[0] * tres[1])
    if not rr >= COARSER * tr:
        return None
    where = (f"the output is on TBA's grid ({tr:.4g}{units} pixels), corrected by a fit at REF's resolution"
             if grid == "tba" else "the output is on REF's grid (--grid ref), coarser than TBA")
    return Finding("resolution", "note", "reference",
                   f"REF's pixels ({rr:.4g}{units}) are {rr / tr:.3g} times as large as TBA's ({tr:.4g}{units}): "
                   f"{where}; to align the coarse DEM onto the fine one instead, swap REF and TBA",
                   {"ref_resolution": rr, "tba_resolution": tr})


def check_inputs(
    *, reference: str | os.PathLike, to_be_aligned: str | os.PathLike, ref_band: int | None = None,
    tba_band: int | None = None, ref_nodata: float | None = None, tba_nodata: float | None = None,
    ref_vertical_scale: float | None = None, tba_vertical_scale: float | None = None,
    inlier_mask: str | os.PathLike | None = None, exclude_mask: str | os.PathLike | None = None,
    grid: str = "tba",
) -> InputChecks:
    """Check a pair of DEM files and their masks before a coregistration (see the module notes).

    Parameters
    ----------
    reference, to_be_aligned
        The DEM files (REF, TBA).
    ref_band, tba_band, ref_nodata, tba_nodata, ref_vertical_scale, tba_vertical_scale
        What the user said of them (``None``: not said; a vertical scale then comes from the
        vertical CRS, 1 if untagged).
    inlier_mask, exclude_mask
        Mask files, checked for the pixels of REF they cover.
    grid
        Grid of the output (``"tba"`` or ``"ref"``), for the resolution note.

    Returns
    -------
    InputChecks
        How to open the DEMs and the findings (warnings and notes; errors are raised).

    Raises
    ------
    xdem.errors.InputError
        The first error found (one line naming the file and the fix).

    Examples
    --------
    >>> import xdem
    >>> lidar = xdem.examples.get_path("lidar")
    >>> check_inputs(reference=lidar, to_be_aligned=lidar).findings
    ()
    """
    ref = check_dem(reference, side="reference", band=ref_band, nodata=ref_nodata, vertical_scale=ref_vertical_scale)
    tba = check_dem(to_be_aligned, side="to_be_aligned", band=tba_band, nodata=tba_nodata,
                    vertical_scale=tba_vertical_scale)
    findings = [*ref.findings, *tba.findings]
    if ref.resolution != (0.0, 0.0) and tba.resolution != (0.0, 0.0):  # both rasterio files
        try:
            scale, res = pair_scale_finding(ref, tba), _resolution_finding(ref, tba, grid)
        except Exception:  # noqa: BLE001 - a damaged file or CRSs PROJ cannot relate: the run says it
            scale = res = None
        if scale is not None and scale.severity == "error":
            _raise(scale)
        findings += [f for f in (scale, res) if f is not None]
    findings += mask_findings(reference, inlier_mask=inlier_mask, exclude_mask=exclude_mask)
    for f in findings:
        if f.severity == "error":
            _raise(f)
    return InputChecks(ref=ref, tba=tba, findings=tuple(findings))


def vertical_warning(ref: str, tba: str) -> str | None:
    """The warning line when REF's and TBA's CRSs name different vertical references
    (:func:`xdem.io.vertical.compare_vertical`), or ``None``."""
    return compare_vertical(file_crs(ref), file_crs(tba))


def file_facts(path: str) -> JSONDict | None:
    """What the JSON and the report say of one input file: CRS, resolution, size, nodata,
    data type and vertical CRS (metadata only; ``None`` for a file GDAL cannot open)."""
    return input_facts(path)[0]


def input_facts(path: str) -> tuple[JSONDict | None, rasterio.crs.CRS | None]:
    """:func:`file_facts` of a file and its CRS with the vertical part (what
    :func:`vertical_warning` compares), from one opening of the file; ``(None, None)`` for a
    file GDAL cannot open.

    Examples
    --------
    >>> import xdem
    >>> facts, crs = input_facts(xdem.examples.get_path("lidar"))
    >>> facts["crs"] == crs.to_string()
    True
    """
    import rasterio

    try:
        with rasterio.Env(GTIFF_REPORT_COMPD_CS=True), rasterio.open(path) as src:
            crs = src.crs
            try:
                nodata = src.nodata
                facts = {
                    "crs": src.crs.to_string() if src.crs else None,
                    "resolution": [abs(src.transform.a), abs(src.transform.e)],
                    "size": [src.width, src.height],
                    "nodata": None if nodata is None or math.isnan(nodata) else float(nodata),
                    "dtype": src.dtypes[0],
                    "vertical_crs": vertical_crs(src.crs),
                }
            except Exception:  # noqa: BLE001 - metadata GDAL cannot describe: no facts
                facts = None
            return facts, crs
    except Exception:  # noqa: BLE001 - not a raster (points): described elsewhere
        return None, None
