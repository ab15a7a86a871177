"""Is the coregistration done? A verdict from a subsample of stable pixels.

The verdict is a list of independent named checks (:mod:`xdem.verdict_checks`, where each
threshold is documented with its reasoning), each with its value, threshold, unit and, when it
fails, its own hint; ``status`` is ``"ok"`` only when every check that could be evaluated passed,
``"not improved"`` when the only failure is that the correction improved nothing, else
``"not ok"``:

* ``residual_shift``: the residual aspect-dependent amplitude ``a`` of dh after (Nuth &
  Kääb's ``dh / tan(slope) = a cos(b - aspect) + c`` fitted robustly, medians of 72 aspect
  bins, on the sampled pixels steeper than :data:`MIN_SLOPE` degrees), in pixels, at most
  :data:`RESIDUAL_PIXELS` (0.2 px), whatever the NMAD;
* ``nmad_not_worse``: NMAD after / NMAD before at most :data:`NMAD_RATIO_MAX` (1.05);
* ``improved``: ``sqrt(median² + NMAD²)`` after / before at most 0.95;
* ``noise``: NMAD after at most the spread expected for the resolution and slope;
* ``median_after``: ``|median dh after|`` near 0 for methods that remove the median;
* ``stable_share``: the masks leave at least 1 % of the pixels valid in both DEMs (and 100);
* ``fit_share``: each fit used at least 5 % of the stable valid pixels it could draw;
* ``converged``: every step that reports convergence converged;
* ``outliers``: at most 2 % of stable pixels are gross outliers (5 x the noise bound).

Everything comes from one reproducible subsample (:func:`verdict_sample`: one pass over the
data, two when fewer than about 80 % of the pixels are valid; slope and aspect of the
reference at the sampled pixels only, from small windows cut in the same pass; the counts of
stable and of valid pixels exactly in that pass), the run's statistics and its steps.
``xdem coreg`` draws it in the pass that writes the aligned DEM (:func:`verdict_while_writing`,
no extra pass) when the DEMs share a grid.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from xdem.coreg._windows import terrain_at_windows
from xdem.io.cog import BlockStats
from xdem.io.grid import align_pair, get_resolution, get_transform, signed_resolution
from xdem.kernels.nuth_kaab import nuth_kaab_step
from xdem.kernels.robust import nmad
from xdem.masks import stable_mask_like
from xdem.sampling import hash_bound, partial_windows, sample_valid, select_finite_below
from xdem.typing import JSONDict, MaskLike
from xdem.verdict_checks import (
    FIT_SHARE_MIN,
    IMPROVED_RATIO_MAX,
    NMAD_RATIO_MAX,
    OUTLIER_SHARE_MAX,
    RESIDUAL_PIXELS,
    STABLE_SHARE_MIN,
    Check,
    Facts,
    run_checks,
    status_of,
)

if TYPE_CHECKING:  # annotations only
    import dask.array as da
    import xarray as xr

__all__ = ["MIN_SLOPE", "RESIDUAL_PIXELS", "NMAD_RATIO_MAX", "VERDICT_SUBSAMPLE", "residual_sinusoid",
           "compute_verdict", "verdict_sample", "verdict_while_writing", "verdict_of_run", "metric_pixel_size"]

#: Sampled pixels flatter than this (degrees) do not enter the residual fit.
MIN_SLOPE = 1.0
#: Valid stable pixels drawn by :func:`verdict_sample`.
VERDICT_SUBSAMPLE = 200_000


def _nmad(v: np.ndarray) -> float | None:
    v = v[np.isfinite(v)]
    return nmad(v) if v.size else None


def residual_sinusoid(
    dh: np.ndarray, slope: np.ndarray, aspect: np.ndarray, *, min_slope: float = MIN_SLOPE
) -> dict[str, float] | None:
    """Fit ``dh / tan(slope) = a cos(b - aspect) + c`` on sampled pixels (degrees in).

    Returns ``{"amplitude": a, "direction_deg": b, "dh_explained": a * median(tan(slope)),
    "n": points}`` or ``None`` when fewer than 100 sloped points or 9 aspect bins exist.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> slope, aspect = rng.uniform(5, 40, 5000), rng.uniform(0, 360, 5000)
    >>> dh = 1.5 * np.cos(np.radians(90 - aspect)) * np.tan(np.radians(slope))
    >>> round(residual_sinusoid(dh, slope, aspect)["amplitude"], 2)
    1.5
    """
    dh, slope, aspect = (np.asarray(v, dtype=np.float64) for v in (dh, slope, aspect))
    ok = np.isfinite(dh) & np.isfinite(slope) & np.isfinite(aspect) & (slope >= min_slope)
    if int(ok.sum()) < 100:
        return None
    tan_s = np.tan(np.radians(slope[ok]))
    east, north, n_bins = nuth_kaab_step(dh[ok], tan_s, np.radians(aspect[ok]), n_bins=72, min_bin_count=10)
    if not np.isfinite(east) or n_bins < 9:
        return None
    a = math.hypot(east, north)
    return {"amplitude": a, "direction_deg": math.degrees(math.atan2(east, north)) % 360.0,
            "dh_explained": a * float(np.median(tan_s)), "n": int(ok.sum())}


def _from_stats(stats: Mapping[str, object] | None, when: str, key: str) -> float | None:
    part = stats.get(when) if stats else None
    v = part.get(key) if isinstance(part, Mapping) else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _median(v: np.ndarray) -> float | None:
    v = v[np.isfinite(v)]
    return float(np.median(v)) if v.size else None


def compute_verdict(
    sample: Mapping[str, np.ndarray],
    *,
    pixel_size: float,
    nmad_before: float | None = None,
    nmad_after: float | None = None,
    methods: Sequence[str] = (),
    units: str = "m",
    stats: Mapping[str, object] | None = None,
    steps: Sequence[Mapping[str, object]] | None = None,
    counts: Mapping[str, int] | None = None,
    pixel_size_m: float | None = None,
    vertical_mismatch: str | None = None,
) -> JSONDict | None:
    """The verdict from a subsample of stable pixels: the checks of :mod:`xdem.verdict_checks`.

    Parameters
    ----------
    sample
        1-D arrays ``after`` (dh after), ``before`` (dh before), ``slope`` and ``aspect``
        (degrees) at the same stable sampled pixels; ``before`` may be missing (give
        ``stats``), ``slope``/``aspect`` too (geographic CRS: no residual sinusoid).
    pixel_size
        Pixel size (CRS units), the scale of :data:`RESIDUAL_PIXELS`.
    nmad_before, nmad_after
        NMADs of dh to use; default: those of ``stats``, else of the sample.
    methods
        Lower-case names of the fitted steps, when ``steps`` is not given.
    units
        Unit of dh and of the CRS, for the hints.
    stats
        The run's statistics (``stats["before"]["nmad"]``, ``["median"]``...), used before the sample's.
    steps
        The run's steps (:func:`xdem.workflows._summary.steps_summary`: ``method``,
        ``converged``, ``count``, ``n_iterations``, ``params``), for the capabilities of the
        methods, the convergence and the share of pixels each fit used.
    counts
        ``stable`` (stable pixels valid in both DEMs) and ``overlap`` (pixels valid in both),
        exact counts on the judged grid.
    pixel_size_m
        Pixel size in metres (default ``pixel_size``), for the expected noise.

    Returns
    -------
    dict or None
        ``status`` (``"ok"``, ``"not improved"``, ``"not ok"``), ``ok`` (status is ``"ok"``),
        ``checks`` (one record per check: ``name``, ``label``, ``value``, ``threshold``,
        ``unit``, ``passed``, ``hint``), ``failed`` (names), ``hint`` (the failing checks'
        hints joined by ``"; "``, ``None`` when ok), ``residual_amplitude_m``,
        ``residual_direction_deg``, ``residual_dh_m``, ``nmad_before``, ``nmad_after``,
        ``nmad_ratio``, ``median_before``, ``median_after``, ``n_points`` and the
        ``thresholds``; ``None`` without dh after.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> s = {"before": rng.normal(2.0, 0.5, 5000), "after": rng.normal(0.0, 0.1, 5000)}
    >>> v = compute_verdict(s, pixel_size=1.0, methods=["verticalshift"])
    >>> v["status"], v["failed"]
    ('ok', [])
    >>> v = compute_verdict({**s, "after": s["after"] * 40}, pixel_size=1.0, methods=["verticalshift"])
    >>> v["status"], v["failed"]
    ('not ok', ['nmad_not_worse', 'improved', 'noise'])
    """
    if "after" not in sample:
        return None
    after = np.asarray(sample["after"], dtype=np.float64)
    before = np.asarray(sample["before"], dtype=np.float64) if "before" in sample else None
    nb = nmad_before if nmad_before is not None else _from_stats(stats, "before", "nmad")
    na = nmad_after if nmad_after is not None else _from_stats(stats, "after", "nmad")
    nb = nb if nb is not None else (_nmad(before) if before is not None else None)
    na = na if na is not None else _nmad(after)
    mb = _from_stats(stats, "before", "median")
    mb = mb if mb is not None else (_median(before) if before is not None else None)
    ma = _from_stats(stats, "after", "median")
    ma = ma if ma is not None else _median(after)
    has_slope = "slope" in sample and "aspect" in sample
    res = residual_sinusoid(after, sample["slope"], sample["aspect"]) if has_slope else None
    if counts is None:
        counts = {k[2:]: int(np.sum(sample[k])) for k in ("n_stable", "n_overlap") if k in sample}
    facts = Facts(after=after, slope=np.asarray(sample["slope"]) if has_slope else np.empty(0), residual=res,
                  nmad_before=nb, nmad_after=na, median_before=mb, median_after=ma, pixel_size=float(pixel_size),
                  pixel_size_m=float(pixel_size_m if pixel_size_m is not None else pixel_size),
                  n_stable=counts.get("stable"), n_overlap=counts.get("overlap"),
                  steps=list(steps) if steps is not None else [{"method": m} for m in methods], units=units,
                  vertical_mismatch=vertical_mismatch)
    return _verdict_record(facts, run_checks(facts), n_after=int(np.isfinite(after).sum()))


def _verdict_record(f: Facts, checks: list[Check], *, n_after: int) -> dict[str, Any]:
    """The verdict's JSON record: status, checks and the numbers they judged."""
    status = status_of(checks)
    hints = [c.hint for c in checks if c.passed is False and c.hint]
    res, nb, na = f.residual, f.nmad_before, f.nmad_after
    return {
        "status": status,
        "ok": status == "ok",
        "failed": [c.name for c in checks if c.passed is False],
        "hint": "; ".join(hints) if hints else None,
        "checks": [c.as_dict() for c in checks],
        "residual_amplitude_m": None if res is None else res["amplitude"],
        "residual_direction_deg": None if res is None else res["direction_deg"],
        "residual_dh_m": None if res is None else res["dh_explained"],
        "nmad_before": nb,
        "nmad_after": na,
        "nmad_ratio": None if nb is None or na is None or nb <= 0 else float(na) / float(nb),
        "median_before": f.median_before,
        "median_after": f.median_after,
        "n_points": n_after if res is None else int(res["n"]),
        "thresholds": {"residual_px": RESIDUAL_PIXELS, "residual_m": RESIDUAL_PIXELS * f.pixel_size,
                       "nmad_ratio_max": NMAD_RATIO_MAX, "improved_ratio_max": IMPROVED_RATIO_MAX,
                       "stable_share_min": STABLE_SHARE_MIN, "fit_share_min": FIT_SHARE_MIN,
                       "outlier_share_max": OUTLIER_SHARE_MAX},
    }


def verdict_sample(
    ref: xr.DataArray, tba: xr.DataArray, aligned: xr.DataArray, *, inlier_mask: MaskLike = None,
    exclude_mask: MaskLike = None, subsample: int = VERDICT_SUBSAMPLE, random_state: int | None = None,
) -> tuple[dict[str, np.ndarray], int]:
    """Stable sampled pixels of dh before/after, slope and aspect of ``ref``, lazily on the
    reference grid; one pass (two when few pixels are valid). Slope and aspect (Horn) are
    computed at the sampled pixels only, from 4 x 4 windows of ``ref`` cut in that pass
    (:func:`xdem.coreg._windows.terrain_at_windows`): no full-size terrain raster.

    Returns the sample (1-D arrays; no ``slope``/``aspect`` in a geographic CRS; ``n_stable``
    and ``n_overlap``, 1-element arrays: the stable pixels valid in REF and TBA and the pixels
    valid in both, counted exactly in the same pass) and the number of passes made.
    """
    import dask.array as da

    ref_g, tba_g = align_pair(ref, tba)
    ref_g, al_g = align_pair(ref_g, aligned)
    if tba_g.shape != ref_g.shape:
        ref_g, tba_g = align_pair(ref_g, tba_g)
    arrays = {"before": tba_g.data - ref_g.data, "after": al_g.data.rechunk(ref_g.data.chunks) - ref_g.data}
    projected = ref_g.rio.crs is not None and not ref_g.rio.crs.is_geographic
    # slope and aspect at the sampled pixels only, from 4 x 4 windows of ref cut in the same pass
    windows = {"win_ref": ref_g.data} if projected else None
    stable = stable_mask_like(ref_g, inlier_mask=inlier_mask, exclude_mask=exclude_mask)
    overlap = da.isfinite(ref_g.data) & da.isfinite(tba_g.data)
    s = sample_valid(overlap & stable, arrays, subsample=subsample, random_state=random_state, min_count=1,
                     what="the verdict", windows=windows, half=1, extra_counts={"overlap": overlap})
    if projected:
        res_x, res_y = signed_resolution(ref_g)
        s["slope"], s["aspect"] = terrain_at_windows(s.pop("win_ref"), 1, res_x=res_x, res_y=res_y, method="horn")
    out = {k: v for k, v in s.items() if k not in ("row", "col")}
    out["n_stable"] = np.array([int(s.n_valid)])
    out["n_overlap"] = np.array([int(s.counts["overlap"])])
    return out, int(s.passes)


def metric_pixel_size(
    *, resolution: tuple[float, float], geographic: bool = False, latitude: float = 0.0, unit_factor: float = 1.0
) -> float:
    """The larger pixel side in metres: ``resolution`` (x, y) times ``unit_factor`` (metres per
    CRS unit) or, in a geographic CRS, degrees times 111,320 m with the x side scaled by the
    cosine of ``latitude``.

    >>> metric_pixel_size(resolution=(1.0, -1.0))
    1.0
    >>> round(metric_pixel_size(resolution=(0.00275, 0.00211), geographic=True, latitude=40.4), 1)
    234.9
    """
    rx, ry = (abs(float(v)) for v in resolution)
    if geographic:
        return max(rx * math.cos(math.radians(latitude)), ry) * 111_320.0
    return max(rx, ry) * float(unit_factor)


def _dem_pixel_m(dem: xr.DataArray) -> float:
    """:func:`metric_pixel_size` of a DEM (its CRS's units; the latitude of its centre)."""
    crs, t = dem.rio.crs, get_transform(dem)
    factor = 1.0
    if crs is not None and not crs.is_geographic:
        from rasterio.errors import CRSError

        try:
            factor = float(crs.linear_units_factor[1])
        except CRSError:  # a CRS without linear units: taken as metres
            factor = 1.0
    return metric_pixel_size(resolution=get_resolution(dem), geographic=bool(crs is not None and crs.is_geographic),
                             latitude=t.f + t.e * dem.shape[0] / 2.0, unit_factor=float(factor))


def verdict_of_run(
    ref: xr.DataArray, tba: xr.DataArray, aligned: xr.DataArray, *, stats: Mapping[str, object] | None,
    methods: Sequence[str],
    inlier_mask: MaskLike = None, exclude_mask: MaskLike = None, random_state: int | None = None,
    subsample: int = VERDICT_SUBSAMPLE, sample: Mapping[str, np.ndarray] | None = None,
    steps: Sequence[Mapping[str, object]] | None = None, vertical_mismatch: str | None = None,
) -> JSONDict | None:
    """The verdict of ``xdem coreg``: :func:`compute_verdict` on ``sample`` (drawn while
    writing, :func:`verdict_while_writing`) or, without it, on :func:`verdict_sample` (one
    pass), with the NMADs and medians of the run's statistics (``stats["before"]["nmad"]``...)
    when given, and the run's ``steps`` (:func:`xdem.workflows._summary.steps_summary`; default:
    ``methods`` only, no convergence nor share of pixels fitted).

    The result holds ``passes`` (extra passes over the data made for the sample: 0 when
    ``sample`` is given) and ``subsample`` (pixels drawn).
    """
    passes = 0
    if sample is None:
        sample, passes = verdict_sample(ref, tba, aligned, inlier_mask=inlier_mask, exclude_mask=exclude_mask,
                                        subsample=subsample, random_state=random_state)
    rx, ry = get_resolution(ref)
    counts = {k[2:]: int(np.sum(sample[k])) for k in ("n_stable", "n_overlap") if k in sample}
    run_steps = list(steps) if steps is not None else [{"method": m} for m in methods]
    out = compute_verdict(sample, pixel_size=float(max(abs(rx), abs(ry))), stats=stats, steps=run_steps,
                          counts=counts, pixel_size_m=_dem_pixel_m(ref), vertical_mismatch=vertical_mismatch)
    if out is not None:
        out["nmad_from"] = "stats" if _from_stats(stats, "after", "nmad") is not None else "verdict subsample"
        out["subsample"] = int(len(sample["after"]))
        out["n_stable"] = counts.get("stable")
        out["n_overlap"] = counts.get("overlap")
        out["passes"] = passes
    return out


def _written_block(
    block: np.ndarray, ref: np.ndarray, stable: np.ndarray, aligned: np.ndarray, *, limit: int, ncols: int,
    random_state: int | None, res: tuple[float, float] | None, row0: int, col0: int,
) -> dict[str, np.ndarray]:
    """One block of :func:`verdict_while_writing`: dh after, slope and aspect at the drawn
    stable pixels (slope/aspect NaN on the block's outer ring, whose neighbours are elsewhere)."""
    del block  # the written block (nodata filled); ``aligned`` holds its values
    r, c, n_overlap, n_stable = select_finite_below(ref, aligned, stable, limit=limit, ncols=ncols,
                                                    random_state=random_state, row0=row0, col0=col0)
    counted = {"n_stable": np.array([n_stable]), "n_overlap": np.array([n_overlap])}
    out = {"after": (aligned[r, c].astype(np.float64) - ref[r, c].astype(np.float64)), **counted}
    if res is None:  # geographic CRS: no slope in degrees from these pixel sizes
        return out
    if r.size:
        win = partial_windows(ref, r, c, 1)  # cast to float32 in the cut, as it was
        out["slope"], out["aspect"] = terrain_at_windows(win, 1, res_x=res[0], res_y=res[1], method="horn")
    else:
        out["slope"] = out["aspect"] = np.empty(0)
    return out


def verdict_while_writing(
    ref: xr.DataArray, aligned: da.Array | np.ndarray, *, stable: da.Array | np.ndarray,
    subsample: int = VERDICT_SUBSAMPLE, random_state: int | None = None,
) -> tuple[BlockStats, Callable[[list], dict[str, np.ndarray]]]:
    """The verdict's subsample drawn in the tasks that write ``aligned`` with
    :func:`xdem.write_cog` (``also=[...]``): no extra pass over the data.

    ``ref`` (DataArray), ``aligned`` and ``stable`` (dask arrays) share the written grid and
    chunks. About ``subsample`` x (valid fraction) stable pixels are drawn (the hash of
    :mod:`xdem.sampling`, the same for any chunking); slope and aspect (Horn) come from each
    pixel's 3 x 3 neighbourhood in its block (pixels on a block's outer ring get none and
    only enter the NMADs). Returns the :class:`xdem.io.cog.BlockStats` and a function turning
    its per-block results into the sample of :func:`compute_verdict` (``after``, ``slope``,
    ``aspect``; no ``before``: give the run's statistics; ``n_stable`` and ``n_overlap``, the
    exact counts of stable pixels valid in REF and the aligned DEM and of pixels valid in both).
    """
    from functools import partial

    import dask.array as da

    ny, nx = ref.shape
    chunks = ref.data.chunks
    projected = ref.rio.crs is not None and not ref.rio.crs.is_geographic
    func = partial(_written_block, limit=hash_bound(min(1.0, float(subsample) / (ny * nx))), ncols=nx,
                   random_state=random_state, res=signed_resolution(ref) if projected else None)
    arrays = [ref.data, da.asarray(stable).rechunk(chunks), da.asarray(aligned).rechunk(chunks)]

    def finish(parts: list) -> dict[str, np.ndarray]:
        keys = ("after", "slope", "aspect") if projected else ("after",)
        out = {k: np.concatenate([p[k] for p in parts]) if parts else np.empty(0) for k in keys}
        for k in ("n_stable", "n_overlap"):  # exact counts: the sum of the blocks'
            out[k] = np.array([int(sum(int(p[k][0]) for p in parts))])
        return out

    return BlockStats(func, arrays), finish
