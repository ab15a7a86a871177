"""Checks of what the inputs of a coregistration claim, once, before the fit (Seam 5).

:func:`check_inputs` reads a small part of each DEM: ``WINDOWS x WINDOWS`` windows spread over
the file, each of ``WINDOW_SIDE`` pixels a side of its coarsest overview (of its full
resolution when it has none), so a few tiles each whatever the DEM size. From it:

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
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from xdem.errors import InputError, XdemWarning

__all__ = ["Finding", "DemCheck", "InputChecks", "InputCheckWarning", "check_dem", "check_inputs",
           "find_sentinels", "read_windows", "vertical_unit_factor", "file_facts", "vertical_warning", "UNIT_FACTORS"]

#: Windows per side read from a DEM, and the largest side of each window as read.
WINDOWS, WINDOW_SIDE = 6, 96
#: Values often used for voids without being declared nodata.
KNOWN_SENTINELS = (-9999.0, -99999.0, -32768.0, -32767.0, 32767.0, 65535.0, -3.4028234663852886e38,
                   3.4028234663852886e38, -1.7976931348623157e308, 1.7976931348623157e308)
#: Smallest share of the sampled pixels at one value for it to be a sentinel (a known one: any).
SENTINEL_SHARE = 0.001
#: A sentinel is at least this many times the spread (1st to 99th percentile) of the other
#: values away from them.
SENTINEL_GAP = 0.5
#: Ratio of the elevation spreads (TBA / REF) -> the units it means, as (TBA's, REF's).
UNIT_FACTORS: dict[float, tuple[str, str]] = {
    1 / 0.3048: ("feet", "metres"), 0.3048: ("metres", "feet"), 100.0: ("centimetres", "metres"),
    0.01: ("metres", "centimetres"), 1000.0: ("millimetres", "metres"), 0.001: ("metres", "millimetres"),
}
#: A spread ratio within this factor of a unit factor is that unit mismatch.
UNIT_TOLERANCE = 1.1
#: A spread ratio beyond this factor (either way) that is no unit factor is suspicious (warning).
SUSPICIOUS_RATIO = 2.5
#: Categorical: an integer band with at most this many distinct sampled values...
CATEGORICAL_VALUES = 32
#: ... whose neighbouring sampled pixels, when they differ, differ by at least this share of its range.
CATEGORICAL_JUMP = 0.1
#: REF's pixels this many times larger than TBA's are worth a note.
COARSER = 1.5

Severity = Literal["error", "warning", "note"]


class InputCheckWarning(XdemWarning):
    """An input is not quite what it claims (an undeclared void value, a mask covering nothing...)."""


@dataclass(frozen=True)
class Finding:
    """One thing found about an input.

    Attributes
    ----------
    code
        ``"not_a_dem"``, ``"bands"``, ``"sentinel"``, ``"vertical_units"``, ``"vertical_scale"``,
        ``"mask_coverage"`` or ``"resolution"``.
    severity
        ``"error"`` (the run stops with :attr:`message`), ``"warning"`` or ``"note"``.
    subject
        What it is about: ``"reference"``, ``"to_be_aligned"``, ``"inlier_mask"``...
    message
        The one line shown.
    details
        Numbers behind it (JSON-able).
    """

    code: str
    severity: Severity
    subject: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The finding as a JSON-able dict."""
        return {"code": self.code, "severity": self.severity, "subject": self.subject, "message": self.message,
                "details": self.details}


@dataclass(frozen=True)
class DemCheck:
    """What :func:`check_dem` found of one DEM file, and how to open it.

    Attributes
    ----------
    path, band
        The file and the band of elevations (1 unless given).
    nodata
        Values to open it with as nodata (:func:`xdem.open_dem`'s ``nodata``): the given or
        declared one first, then the sentinels found; ``None``: the file's own.
    vertical_scale
        Factor to metres (given, or from a vertical CRS in feet), 1 otherwise.
    resolution
        Pixel size ``(x, y)`` in the units of its CRS (``(0, 0)``: not read, e.g. a Zarr store).
    findings
        What was found.
    """

    path: str
    band: int
    nodata: tuple[float, ...] | None
    vertical_scale: float
    resolution: tuple[float, float]
    findings: tuple[Finding, ...]


@dataclass(frozen=True)
class InputChecks:
    """Everything :func:`check_inputs` found.

    Attributes
    ----------
    ref, tba
        The :class:`DemCheck` of each DEM.
    findings
        Their findings, the pair's (vertical scale, resolution) and the masks', in order.
    """

    ref: DemCheck | None
    tba: DemCheck | None
    findings: tuple[Finding, ...]

    def of(self, severity: Severity) -> list[Finding]:
        """The findings of one severity."""
        return [f for f in self.findings if f.severity == severity]

    def to_dict(self) -> dict[str, Any]:
        """The JSON document's ``input_checks``."""
        side = lambda c: None if c is None else {  # noqa: E731
            "band": c.band, "nodata": None if c.nodata is None else [_json_float(v) for v in c.nodata],
            "vertical_scale": c.vertical_scale, "resolution": list(c.resolution)}
        return {"reference": side(self.ref), "to_be_aligned": side(self.tba),
                "findings": [f.to_dict() for f in self.findings],
                "notes": [f.message for f in self.findings if f.severity == "note"],
                "warnings": [f.message for f in self.findings if f.severity == "warning"]}


def _json_float(v: float) -> float | str:
    return v if math.isfinite(v) else str(v)


_LABEL = {"reference": "REF", "to_be_aligned": "TBA"}
_FLAG = {"reference": "ref", "to_be_aligned": "tba"}


def _fix(side: str, what: str, value: Any) -> str:
    """How to give ``what`` for ``side``: the CLI option and the request field."""
    return f"--{_FLAG[side]}-{what.replace('_', '-')} {value} ({_FLAG[side]}_{what}={value})"


def _raise(finding: Finding) -> None:
    raise InputError(finding.message)


def find_sentinels(values: np.ndarray, *, top: int = 5) -> list[tuple[float, float]]:
    """Values of ``values`` that look like undeclared voids: ``(value, share)`` pairs.

    A value is one when at least :data:`SENTINEL_SHARE` of the finite values hold it exactly
    (any share for the :data:`KNOWN_SENTINELS`) and it lies more than :data:`SENTINEL_GAP`
    times the spread (1st to 99th percentile) of the other values away from all of them.
    Only the ``top`` most frequent values are candidates.

    Examples
    --------
    >>> z = np.linspace(380.0, 410.0, 1000)
    >>> find_sentinels(np.concatenate([z, np.full(50, -9999.0)]))
    [(-9999.0, 0.047619047619047616)]
    >>> find_sentinels(np.concatenate([z, np.full(50, 380.0)]))  # a flat lake at the lowest level
    []
    """
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size < 100:
        return []
    uniq, counts = np.unique(v, return_counts=True)
    order = np.argsort(counts)[::-1][:top]
    candidates = [(float(uniq[i]), counts[i] / v.size) for i in order]
    candidates = [(val, share) for val, share in candidates
                  if share >= SENTINEL_SHARE or val in KNOWN_SENTINELS or abs(val) >= 1e30]
    rest = v[~np.isin(v, [c[0] for c in candidates])]
    if rest.size < 100:
        return []
    lo, hi = np.percentile(rest, [1, 99])
    span = max(float(hi - lo), 1e-6 * max(abs(lo), abs(hi), 1.0))
    found = []
    for val, share in candidates:
        gap = lo - val if val < lo else (val - hi if val > hi else 0.0)
        if gap > SENTINEL_GAP * span:
            found.append((val, float(share)))
    return found


def window_ground_side(src: Any, band: int = 1) -> float:
    """Ground side (CRS units) of a window :func:`read_windows` reads cheaply from ``src``:
    :data:`WINDOW_SIDE` pixels of its coarsest overview (of its full resolution without any):
    a few tiles of the file whatever its size."""
    factor = max(src.overviews(band) or [1])
    return WINDOW_SIDE * factor * max(abs(src.transform.a), abs(src.transform.e))


def _windows(bounds: tuple[float, float, float, float], side: float,
             n: int = WINDOWS) -> list[tuple[float, float, float, float]]:
    """``n x n`` boxes centred on the cells of an ``n x n`` grid over ``bounds``, each ``side`` wide
    and high (at most half its cell)."""
    left, bottom, right, top = bounds
    w, h = (right - left) / n, (top - bottom) / n
    hw, hh = min(side, w / 2) / 2, min(side, h / 2) / 2
    centres = [(left + (i + 0.5) * w, bottom + (j + 0.5) * h) for j in range(n) for i in range(n)]
    return [(x - hw, y - hh, x + hw, y + hh) for x, y in centres]


def read_windows(src: Any, band: int, boxes: list[tuple[float, float, float, float]], *,
                 side: int = WINDOW_SIDE) -> np.ndarray:
    """The raw values of ``band`` of the open dataset ``src`` in ``boxes`` (its CRS), each read
    decimated to at most ``side`` pixels a side, as one float64 array (declared nodata: NaN)."""
    from rasterio.windows import Window, from_bounds

    out = []
    full = Window(0, 0, src.width, src.height)
    for box in boxes:
        try:
            win = from_bounds(*box, transform=src.transform).round_offsets().round_lengths().intersection(full)
        except Exception:  # noqa: BLE001 - rasterio.errors.WindowError: the box misses the raster
            continue
        if win.width < 1 or win.height < 1:
            continue
        shape = (max(1, min(side, int(win.height))), max(1, min(side, int(win.width))))
        data = src.read(band, window=win, out_shape=shape).astype(np.float64)
        if src.nodata is not None and not np.isnan(src.nodata):
            data[data == np.float64(np.array(src.nodata, dtype=src.dtypes[band - 1]))] = np.nan
        out.append(data)
    return np.concatenate([o.ravel() for o in out]) if out else np.empty(0)


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


def vertical_unit_factor(crs: Any) -> tuple[float, str] | None:
    """``(factor to metres, unit name)`` of the vertical axis of ``crs``, ``None`` if untagged.

    Examples
    --------
    >>> vertical_unit_factor("EPSG:26915+6360")
    (0.30480060960121924, 'US survey foot')
    >>> vertical_unit_factor("EPSG:26915") is None
    True
    """
    from pyproj import CRS

    try:
        pc = CRS.from_user_input(crs.to_wkt() if hasattr(crs, "to_wkt") else crs)
    except Exception:  # noqa: BLE001 - unreadable: nothing known
        return None
    subs = pc.sub_crs_list if pc.is_compound else [pc]
    for sub in subs:
        if sub.is_vertical and sub.axis_info:
            return float(sub.axis_info[0].unit_conversion_factor), sub.axis_info[0].unit_name
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

    from xdem.io.zarr_store import is_zarr_path

    path = os.fspath(path)
    if is_zarr_path(path):  # written by xdem (a DEM of one variable): nothing read here
        return DemCheck(path, band or 1, None if nodata is None else (nodata,), vertical_scale or 1.0, (0.0, 0.0), ())
    try:
        with rasterio.Env(GTIFF_REPORT_COMPD_CS=True), rasterio.open(path) as src:
            problem = _bands_finding(src, path, side, band)
            if problem is not None:
                _raise(problem)
            b = band or 1
            values = read_windows(src, b, _windows(tuple(src.bounds), window_ground_side(src, b)))
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
    from xdem._mask_checks import mask_findings
    from xdem._scale_checks import pair_scale_finding

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
    from xdem.io.vertical import compare_vertical, file_crs

    return compare_vertical(file_crs(ref), file_crs(tba))


def file_facts(path: str) -> dict[str, Any] | None:
    """What the JSON and the report say of one input file: CRS, resolution, size, nodata,
    data type and vertical CRS (metadata only; ``None`` for a file GDAL cannot open)."""
    import rasterio

    from xdem.io.vertical import vertical_crs

    try:
        with rasterio.Env(GTIFF_REPORT_COMPD_CS=True), rasterio.open(path) as src:
            nodata = src.nodata
            return {
                "crs": src.crs.to_string() if src.crs else None,
                "resolution": [abs(src.transform.a), abs(src.transform.e)],
                "size": [src.width, src.height],
                "nodata": None if nodata is None or math.isnan(nodata) else float(nodata),
                "dtype": src.dtypes[0],
                "vertical_crs": vertical_crs(src.crs),
            }
    except Exception:  # noqa: BLE001 - not a raster (points): described elsewhere
        return None
