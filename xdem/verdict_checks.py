"""The verdict's checks: independent, named, each with its value, threshold, unit and hint.

:func:`xdem.verdict.compute_verdict` runs every check below on stable terrain (inside the
inlier mask, outside the exclude mask) and says **"ok"** only when every check that could be
evaluated passed. A check that cannot be evaluated (e.g. no slope in a geographic CRS, no step
that reports convergence) has ``passed = None`` and does not block; its hint says why.

* ``residual_shift``: the residual aspect-dependent amplitude, **absolute, in pixels**: ``a``
  of ``dh_after / tan(slope) = a cos(b - aspect) + c`` (Nuth & Kääb's robust estimator)
  divided by the pixel size, at most :data:`RESIDUAL_PIXELS` (0.2 px). Nuth & Kääb converges
  to a few hundredths of a pixel and resampling artefacts stay below 0.1 pixel. Not compared
  with the NMAD: a huge NMAD must not hide a huge residual.
* ``nmad_not_worse``: NMAD after / NMAD before at most :data:`NMAD_RATIO_MAX` (1.05).
* ``improved``: the robust error ``sqrt(median² + NMAD²)`` of dh after / before at most
  :data:`IMPROVED_RATIO_MAX` (0.95): a correction that removed neither spread nor offset did
  nothing (status **"not improved"** when this is the only failure).
* ``noise``: NMAD after at most the spread expected for the resolution and the slope,
  ``max(NOISE_FLOOR, NOISE_FLAT_PX * pixel) + NOISE_SLOPE_PX * pixel * median(tan(slope))``
  (pixel in metres; ``tan(slope) = 1`` when the slope is unknown). The dh error of DEMs grows
  about linearly with ``tan(slope)`` (Hugonnet et al. 2022): the slope term is the dh that a
  horizontal error of :data:`NOISE_SLOPE_PX` (2) pixels makes (DEMs resolve 2-3 pixels); the
  flat term, :data:`NOISE_FLOOR` (1 m) or :data:`NOISE_FLAT_PX` (0.1) pixel, covers lidar to
  30-90 m global DEMs on flat stable terrain. A deliberately generous bound: above it the
  inputs are wrong (units, nodata, not a DEM), not merely noisy.
* ``median_after``: ``|median dh after| <= MEDIAN_FLOOR + MEDIAN_NMAD * NMAD after`` (0.05 m
  + 0.25 NMAD; the median of 1000 pixels is known to 0.04 NMAD), only when the last step
  removes the median of dh (its declared ``removes_median``, :class:`xdem.coreg.Capabilities`).
* ``stable_share``: stable valid pixels / pixels valid in both DEMs at least
  :data:`STABLE_SHARE_MIN` (1 %), and at least :data:`MIN_STABLE_PIXELS` (100) pixels.
* ``fit_share``: each step's points in its final fit / the stable valid pixels it could draw
  (its ``subsample``: a count or a fraction) at least :data:`FIT_SHARE_MIN` (5 %).
* ``converged``: every step that reports ``converged`` did (a blockwise step: each tile it used).
* ``outliers``: the share of stable pixels with ``|dh after - median| > OUTLIER_NOISE x noise
  bound`` (5 x) at most :data:`OUTLIER_SHARE_MAX` (2 %): undeclared nodata (-9999), voids or
  unmasked unstable terrain ruin the mean and the RMSE while the median and the NMAD stay fine.
* ``vertical_crs`` (listed only when it fails): REF and TBA declare different vertical CRSs
  (from their files, or ``--ref-vcrs``/``--tba-vcrs``) and were not converted to one
  (``--to-vcrs``). Their heights differ by the geoid undulation, which the fit absorbs as a
  shift (and a tilt): ``shift_z`` is then not the misalignment, and a residual that varies
  with N remains, so the run is never "ok".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from xdem.coreg import METHODS

__all__ = ["RESIDUAL_PIXELS", "NMAD_RATIO_MAX", "IMPROVED_RATIO_MAX", "NOISE_FLOOR", "NOISE_FLAT_PX",
           "NOISE_SLOPE_PX", "MEDIAN_FLOOR", "MEDIAN_NMAD", "STABLE_SHARE_MIN", "MIN_STABLE_PIXELS",
           "FIT_SHARE_MIN", "OUTLIER_NOISE", "OUTLIER_SHARE_MAX", "Capability", "capability",
           "Check", "Facts", "noise_bound", "run_checks", "status_of"]

#: Residual amplitude (pixels) above which a horizontal shift remains.
RESIDUAL_PIXELS = 0.2
#: NMAD after / NMAD before above which the correction made dh noisier.
NMAD_RATIO_MAX = 1.05
#: Robust error sqrt(median² + NMAD²) after / before above which nothing was improved.
IMPROVED_RATIO_MAX = 0.95
#: Flat-terrain noise floor (units of dh, metres for the usual DEMs)...
NOISE_FLOOR = 1.0
#: ...or this fraction of the pixel size (metres), whichever is larger...
NOISE_FLAT_PX = 0.1
#: ...plus the dh of a horizontal error of this many pixels: ``NOISE_SLOPE_PX * pixel * tan(slope)``.
NOISE_SLOPE_PX = 2.0
#: |median dh after| allowed: MEDIAN_FLOOR + MEDIAN_NMAD x NMAD after (methods removing the median).
MEDIAN_FLOOR = 0.05
MEDIAN_NMAD = 0.25
#: Stable valid pixels / pixels valid in both DEMs below which the masks left (almost) nothing.
STABLE_SHARE_MIN = 0.01
#: Fewer stable valid pixels than this cannot judge anything.
MIN_STABLE_PIXELS = 100
#: A step's points in its final fit / the stable valid pixels it could draw, below which it saw a sliver.
FIT_SHARE_MIN = 0.05
#: Pixels farther than OUTLIER_NOISE x the noise bound from the median are gross outliers...
OUTLIER_NOISE = 5.0
#: ...and more than this share of them breaks the result.
OUTLIER_SHARE_MAX = 0.02


@dataclass(frozen=True)
class Capability:
    """What the verdict needs to know of what a step fits: ``horizontal`` (a horizontal shift:
    the residual sinusoid should vanish) and ``median`` (its vertical offset is the median of dh,
    with its default ``vshift_reduc_func``: the median after should be 0). Read from the
    method's declared capabilities (:class:`xdem.coreg.Capabilities`: ``horizontal``,
    ``removes_median``)."""

    horizontal: bool
    median: bool


def capability(step: Mapping[str, object]) -> Capability:
    """The :class:`Capability` of one step of a run's ``steps`` (``method``, ``params``), from
    the capabilities its method declares (an unknown method: neither); a ``vshift_reduc_func``
    other than the median removes no median.

    >>> capability({"method": "NuthKaab", "params": {"vshift_reduc_func": "mean"}})
    Capability(horizontal=True, median=False)
    >>> capability({"method": "VerticalShift"})
    Capability(horizontal=False, median=True)
    """
    method = METHODS.get(str(step.get("method", "")).lower())
    cap = Capability(horizontal=False, median=False) if method is None else \
        Capability(horizontal=method.tags.horizontal, median=method.tags.removes_median)
    params = step.get("params")
    func = params.get("vshift_reduc_func") if isinstance(params, Mapping) else None
    if cap.median and func is not None and str(func) not in ("median", "nanmedian"):
        return Capability(horizontal=cap.horizontal, median=False)
    return cap


@dataclass(frozen=True)
class Check:
    """One check: ``value`` against ``threshold`` (``unit``; it passes when ``value
    passes_if threshold``, ``"<="`` or ``">="``), ``passed`` (``None``: not evaluated, ``hint``
    says why) and, when it failed, the ``hint`` of what to try."""

    name: str
    label: str
    value: float | None
    threshold: float | None
    unit: str
    passed: bool | None
    hint: str | None = None
    passes_if: str = "<="

    def as_dict(self) -> dict[str, object]:
        """The JSON record."""
        return asdict(self)


@dataclass(frozen=True)
class Facts:
    """What the checks judge. NMADs and medians of dh before/after on stable pixels; the
    sample's dh after, slope (degrees; may be empty); the residual sinusoid (``amplitude``,
    ``direction_deg``) or ``None``; the pixel size in CRS units and in metres; the counts of
    stable valid pixels and of pixels valid in both DEMs (``None``: unknown); the run's steps
    (``method``, ``converged``, ``count``, ``n_iterations``, ``params``); the unit of dh."""

    after: np.ndarray
    slope: np.ndarray
    residual: Mapping[str, float] | None
    nmad_before: float | None
    nmad_after: float | None
    median_before: float | None
    median_after: float | None
    pixel_size: float
    pixel_size_m: float
    n_stable: int | None
    n_overlap: int | None
    steps: Sequence[Mapping[str, object]]
    units: str = "m"
    vertical_mismatch: str | None = None


def noise_bound(*, pixel_size_m: float, slope: np.ndarray) -> float:
    """The largest NMAD expected for this resolution and terrain (see the module docstring).

    >>> round(noise_bound(pixel_size_m=1.0, slope=np.array([10.0, 20.0, 30.0])), 3)
    1.728
    >>> noise_bound(pixel_size_m=30.0, slope=np.array([]))  # slope unknown: tan = 1
    63.0
    """
    s = np.asarray(slope, dtype=np.float64)
    s = s[np.isfinite(s)]
    tan = float(np.median(np.tan(np.radians(s)))) if s.size else 1.0
    return max(NOISE_FLOOR, NOISE_FLAT_PX * pixel_size_m) + NOISE_SLOPE_PX * pixel_size_m * tan


def _skip(name: str, label: str, unit: str, why: str, threshold: float | None = None, passes_if: str = "<=") -> Check:
    return Check(name, label, None, threshold, unit, None, f"not evaluated: {why}", passes_if)


def _residual(f: Facts) -> Check:
    name, label = "residual_shift", "residual aspect-dependent amplitude (pixels)"
    if f.residual is None:
        return _skip(name, label, "px", "fewer than 100 stable pixels steeper than 1° in 9 aspect directions, or no "
                     "slope (geographic CRS)", RESIDUAL_PIXELS)
    a = float(f.residual["amplitude"])
    px = a / f.pixel_size
    passed = px <= RESIDUAL_PIXELS
    hint = None
    if not passed:
        head = (f"residual sinusoid {a:.2f} {f.units} ({px:.1f} px) towards {f.residual['direction_deg']:.0f}° on "
                "stable terrain")
        caps = [capability(s) for s in f.steps]
        names = [str(s.get("method", "")).lower() for s in f.steps]
        if not any(c.horizontal for c in caps):
            hint = f"{head}: a horizontal shift remains; try --method nuthkaab (nuthkaab_deramp if dh is also tilted)"
        elif any("deramp" in n for n in names):
            hint = (f"{head}: check the CRS of TBA, that unstable terrain is excluded (--exclude-mask), and try a "
                    "higher --poly-order")
        else:
            hint = (f"{head}: try nuthkaab_deramp (a tilt biases Nuth & Kääb), or check the CRS of TBA and that "
                    "unstable terrain is excluded (--exclude-mask)")
    return Check(name, label, px, RESIDUAL_PIXELS, "px", passed, hint)


def _ratio(f: Facts) -> Check:
    name, label = "nmad_not_worse", "NMAD after / NMAD before"
    if f.nmad_before is None or f.nmad_after is None or f.nmad_before <= 0:
        return _skip(name, label, "ratio", "no NMAD before", NMAD_RATIO_MAX)
    r = float(f.nmad_after) / float(f.nmad_before)
    passed = r <= NMAD_RATIO_MAX
    hint = None if passed else (f"NMAD after is {r:.2f} x NMAD before: the correction made dh noisier; check the "
                                "masks (unstable terrain in the fit) and the method")
    return Check(name, label, r, NMAD_RATIO_MAX, "ratio", passed, hint)


def _improved(f: Facts) -> Check:
    name, label = "improved", "robust error sqrt(median² + NMAD²) after / before"
    vals = (f.nmad_before, f.nmad_after, f.median_before, f.median_after)
    if any(v is None for v in vals):
        return _skip(name, label, "ratio", "no median or NMAD before", IMPROVED_RATIO_MAX)
    nb, na, mb, ma = (float(v) for v in vals)  # type: ignore[arg-type]
    before, after = math.hypot(mb, nb), math.hypot(ma, na)
    if before <= 0:
        return _skip(name, label, "ratio", "dh before is 0 everywhere", IMPROVED_RATIO_MAX)
    r = after / before
    passed = r <= IMPROVED_RATIO_MAX
    hint = None if passed else (
        f"the correction did not improve dh (sqrt(median² + NMAD²) {before:.3f} -> {after:.3f} {f.units}, "
        f"ratio {r:.2f} > {IMPROVED_RATIO_MAX}): were the DEMs already aligned? otherwise check the method and the masks")
    return Check(name, label, r, IMPROVED_RATIO_MAX, "ratio", passed, hint)


def _noise(f: Facts) -> Check:
    name, label = "noise", "NMAD after against the noise expected for the resolution and slope"
    bound = noise_bound(pixel_size_m=f.pixel_size_m, slope=f.slope)
    if f.nmad_after is None:
        return _skip(name, label, f.units, "no dh after", bound)
    na = float(f.nmad_after)
    passed = na <= bound
    hint = None if passed else (
        f"NMAD after {na:.3f} {f.units} is above the {bound:.3f} {f.units} expected at most for a "
        f"{f.pixel_size_m:g} m DEM on this terrain: check the vertical units of both DEMs (feet against metres?), "
        "undeclared nodata values, and that both files are DEMs of the same area")
    return Check(name, label, na, bound, f.units, passed, hint)


def _median(f: Facts) -> Check:
    name, label = "median_after", "|median dh after| (methods that remove the median)"
    last = f.steps[-1] if f.steps else None
    if last is None or not capability(last).median:
        return _skip(name, label, f.units, "the last step does not remove the median of dh")
    if f.median_after is None or f.nmad_after is None:
        return _skip(name, label, f.units, "no dh after")
    limit = MEDIAN_FLOOR + MEDIAN_NMAD * float(f.nmad_after)
    m = abs(float(f.median_after))
    passed = m <= limit
    hint = None if passed else (
        f"median dh after is {float(f.median_after):+.3f} {f.units} (> {limit:.3f}) although {last.get('method')} "
        "removes the median: the fit saw other pixels than the stable ones (masks or filters given to the fit "
        "only) or unstable terrain; check --inlier-mask/--exclude-mask and the filters")
    return Check(name, label, m, limit, f.units, passed, hint)


def _stable_share(f: Facts) -> Check:
    name, label = "stable_share", "stable valid pixels / pixels valid in both DEMs"
    if f.n_stable is None:
        return _skip(name, label, "fraction", "no pixel counts", STABLE_SHARE_MIN, ">=")
    n = int(f.n_stable)
    share = None if not f.n_overlap else n / int(f.n_overlap)
    passed = n >= MIN_STABLE_PIXELS and (share is None or share >= STABLE_SHARE_MIN)
    hint = None
    if not passed:
        of = "" if share is None else f" ({100 * share:.2f} % of the {f.n_overlap} pixels valid in both DEMs)"
        hint = (f"only {n} stable valid pixels{of} were judged (need {MIN_STABLE_PIXELS} and "
                f"{100 * STABLE_SHARE_MIN:g} %): check the inlier/exclude masks (their CRS and extent; the inlier "
                "mask marks stable terrain) and the overlap of the DEMs")
    if share is None:
        return Check(name, label, float(n), float(MIN_STABLE_PIXELS), "pixels", passed, hint, ">=")
    return Check(name, label, share, STABLE_SHARE_MIN, "fraction", passed, hint, ">=")


def _expected_draw(step: Mapping[str, object], n_stable: int) -> float | None:
    params = step.get("params")
    sub = params.get("subsample") if isinstance(params, Mapping) else None
    if not isinstance(sub, (int, float)) or isinstance(sub, bool) or sub <= 0:
        return None
    return float(sub) * n_stable if sub <= 1 else float(min(sub, n_stable))


def _fit_share(f: Facts) -> Check:
    name, label = "fit_share", "points in the final fit / stable valid pixels the fit could draw"
    shares = []
    for step in f.steps:
        count = step.get("count")
        expected = _expected_draw(step, f.n_stable) if f.n_stable else None
        if isinstance(count, (int, float)) and expected:
            shares.append((min(float(count) / expected, 1.0), step, int(count), expected))
    if not shares:
        return _skip(name, label, "fraction", "no step reports its count and subsample", FIT_SHARE_MIN, ">=")
    share, step, count, expected = min(shares, key=lambda t: t[0])
    passed = share >= FIT_SHARE_MIN
    hint = None if passed else (
        f"{step.get('method')} fitted on {count} points, {100 * share:.1f} % of the {expected:.0f} stable valid pixels "
        f"it could draw (< {100 * FIT_SHARE_MIN:g} %): check the filters (--min-slope/--max-slope/--nmad-filter), "
        "the fit's min_slope and the overlap; the fit may not represent the terrain")
    return Check(name, label, share, FIT_SHARE_MIN, "fraction", passed, hint, ">=")


def _step_converged(step: Mapping[str, object]) -> bool | None:
    """A step's ``converged``; a blockwise step's: all its used tiles' (``tiles.converged``)."""
    if isinstance(step.get("converged"), bool):
        return bool(step["converged"])
    tiles = step.get("tiles")
    if isinstance(tiles, Mapping) and isinstance(tiles.get("converged"), list):
        status = tiles.get("status")
        used = status if isinstance(status, list) else ["used"] * len(tiles["converged"])
        flags = [bool(c) for c, st in zip(tiles["converged"], used) if st == "used" and c is not None]
        return all(flags) if flags else None
    return None


def _converged(f: Facts) -> Check:
    name, label = "converged", "steps that did not converge"
    reporting = [(s, _step_converged(s)) for s in f.steps]
    reporting = [(s, c) for s, c in reporting if c is not None]
    if not reporting:
        return _skip(name, label, "steps", "no step reports convergence", 0)
    bad = [s for s, c in reporting if not c]
    hint = None
    if bad:
        what = ", ".join(f"{s.get('method')} (stopped after {s.get('n_iterations', '?')} iterations)"
                         if "tiles" not in s else f"{s.get('method')} (tiles that did not converge)" for s in bad)
        hint = (f"{what} did not converge to its tolerance: raise --max-iterations, start closer with "
                "--initial-shift, or check the inputs (a wrong CRS or units makes the fit wander)")
    return Check(name, label, float(len(bad)), 0.0, "steps", not bad, hint)


def _outliers(f: Facts) -> Check:
    name, label = "outliers", f"share of stable pixels farther than {OUTLIER_NOISE:g} x the noise bound from the median"
    after = np.asarray(f.after, dtype=np.float64)
    after = after[np.isfinite(after)]
    if after.size == 0:
        return _skip(name, label, "fraction", "no dh after", OUTLIER_SHARE_MAX)
    limit = OUTLIER_NOISE * noise_bound(pixel_size_m=f.pixel_size_m, slope=f.slope)
    centre = float(f.median_after) if f.median_after is not None else float(np.median(after))
    share = float(np.mean(np.abs(after - centre) > limit))
    passed = share <= OUTLIER_SHARE_MAX
    hint = None if passed else (
        f"{100 * share:.1f} % of the stable pixels differ from the median by more than {limit:.2f} {f.units}: "
        "undeclared nodata (e.g. -9999: declare the file's nodata), voids, or unstable terrain that is not masked "
        "(--exclude-mask); the mean and the RMSE are meaningless")
    return Check(name, label, share, OUTLIER_SHARE_MAX, "fraction", passed, hint)


def _vertical(f: Facts) -> Check:
    return Check("vertical_crs", "vertical CRSs of REF and TBA", 2.0, 1.0, "vertical CRSs", False,
                 f"{f.vertical_mismatch} (shift_z then holds the datum difference, not the misalignment)")


def run_checks(facts: Facts) -> list[Check]:
    """Every check of the module docstring on ``facts``, in a fixed order (``vertical_crs`` last,
    only when the vertical CRSs differ)."""
    checks = [c(facts) for c in (_residual, _ratio, _improved, _noise, _median, _stable_share, _fit_share,
                                 _converged, _outliers)]
    return checks if facts.vertical_mismatch is None else [*checks, _vertical(facts)]


def status_of(checks: Sequence[Check]) -> str:
    """``"ok"`` when no check failed, ``"not improved"`` when only ``improved`` failed, else
    ``"not ok"``.

    >>> status_of([Check("improved", "", 1.0, 0.95, "ratio", False), Check("noise", "", 0.1, 1.0, "m", True)])
    'not improved'
    """
    failed = [c.name for c in checks if c.passed is False]
    if not failed:
        return "ok"
    return "not improved" if failed == ["improved"] else "not ok"
