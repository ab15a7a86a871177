"""What the input checks share (:mod:`xdem.checks`, :mod:`xdem._scale_checks`,
:mod:`xdem._mask_checks`): thresholds, the records of what was found, and the reads of a few
small windows of a DEM. Its own module so that the three import it, and not each other.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from xdem.errors import InputError, XdemWarning

if TYPE_CHECKING:  # annotations only: rasterio is imported where a file is read
    import rasterio.io

    from xdem.typing import JSONDict

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

    def to_dict(self) -> JSONDict:
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

    def warn(self, *, stacklevel: int = 2) -> None:
        """Issue each warning finding as an :class:`InputCheckWarning` (``stacklevel``: the
        caller's, as :func:`warnings.warn` counts it)."""
        for finding in self.of("warning"):
            warnings.warn(finding.message, InputCheckWarning, stacklevel=stacklevel + 1)

    def to_dict(self) -> JSONDict:
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


def window_ground_side(src: rasterio.io.DatasetReader, band: int = 1) -> float:
    """Ground side (CRS units) of a window :func:`read_windows` reads cheaply from ``src``:
    :data:`WINDOW_SIDE` pixels of its coarsest overview (of its full resolution without any):
    a few tiles of the file whatever its size."""
    factor = max(src.overviews(band) or [1])
    return WINDOW_SIDE * factor * max(abs(src.transform.a), abs(src.transform.e))


def sample_values(src: rasterio.io.DatasetReader, band: int = 1) -> np.ndarray:
    """The values :func:`read_windows` reads in the :func:`_windows` grid over ``src``: a few tiles
    spread over the file, whatever its size (declared nodata: NaN)."""
    return read_windows(src, band, _windows(tuple(src.bounds), window_ground_side(src, band)))


def _windows(bounds: tuple[float, float, float, float], side: float,
             n: int = WINDOWS) -> list[tuple[float, float, float, float]]:
    """``n x n`` boxes centred on the cells of an ``n x n`` grid over ``bounds``, each ``side`` wide
    and high (at most half its cell)."""
    left, bottom, right, top = bounds
    w, h = (right - left) / n, (top - bottom) / n
    hw, hh = min(side, w / 2) / 2, min(side, h / 2) / 2
    centres = [(left + (i + 0.5) * w, bottom + (j + 0.5) * h) for j in range(n) for i in range(n)]
    return [(x - hw, y - hh, x + hw, y + hh) for x, y in centres]


def read_windows(src: rasterio.io.DatasetReader, band: int, boxes: list[tuple[float, float, float, float]], *,
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
