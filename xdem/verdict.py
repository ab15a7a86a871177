"""Is the coregistration done? A verdict from a subsample of stable pixels.

Two numbers, both on stable terrain (inside the inlier mask, outside the exclude mask):

* the **residual aspect-dependent amplitude** ``a`` of dh after: Nuth & Kääb's relation
  ``dh / tan(slope) = a cos(b - aspect) + c`` fitted robustly (medians of 72 aspect bins,
  the estimator of :class:`~xdem.coreg.NuthKaab`) on the sampled pixels steeper than
  :data:`MIN_SLOPE` degrees. ``a`` is the horizontal displacement (metres, CRS units) that
  still explains dh; ``b`` its direction. After a good horizontal fit ``a`` is a few
  hundredths of a pixel.
* the **NMAD ratio**, NMAD(dh after) / NMAD(dh before).

The job is flagged as not done (``ok = False``) when

* ``a > RESIDUAL_PIXELS`` pixels (0.2 pixel: Nuth & Kääb converges to a few hundredths of a
  pixel, and resampling artefacts stay below 0.1 pixel) **and** the dh it explains,
  ``a * median(tan(slope))``, exceeds ``RESIDUAL_NMAD`` (0.25) times the NMAD after (a residual
  shift lost in the noise does not matter); or
* the NMAD ratio exceeds ``NMAD_RATIO_MAX`` (1.05): the correction made dh noisier.

A hint says what to try. Everything comes from one reproducible subsample
(:func:`verdict_sample`: one pass over the data, two when fewer than about 80 % of the pixels
are valid; slope and aspect of the reference at the sampled pixels only, from small windows
cut in the same pass). ``xdem coreg`` draws it in the pass that writes the aligned DEM
(:func:`verdict_while_writing`, no extra pass) when the DEMs share a grid.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from xdem.kernels.nuth_kaab import nuth_kaab_step
from xdem.kernels.robust import nmad
from xdem.typing import MaskLike

__all__ = ["MIN_SLOPE", "RESIDUAL_PIXELS", "RESIDUAL_NMAD", "NMAD_RATIO_MAX", "VERDICT_SUBSAMPLE",
           "residual_sinusoid", "compute_verdict", "verdict_sample", "verdict_while_writing", "verdict_of_run"]

#: Sampled pixels flatter than this (degrees) do not enter the residual fit.
MIN_SLOPE = 1.0
#: Residual amplitude, in pixels, above which a horizontal shift remains...
RESIDUAL_PIXELS = 0.2
#: ...if the dh it explains, ``a * median(tan(slope))``, also exceeds this fraction of the NMAD after.
RESIDUAL_NMAD = 0.25
#: NMAD after / NMAD before above which the correction made things worse.
NMAD_RATIO_MAX = 1.05
#: Valid stable pixels drawn by :func:`verdict_sample`.
VERDICT_SUBSAMPLE = 200_000


def _nmad(v: np.ndarray) -> float | None:
    v = v[np.isfinite(v)]
    return nmad(v) if v.size else None


def residual_sinusoid(
    dh: np.ndarray, slope: np.ndarray, aspect: np.ndarray, *, min_slope: float = MIN_SLOPE
) -> dict[str, Any] | None:
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


def _hint(amp_flag: bool, ratio_flag: bool, res: dict | None, ratio: float | None, methods: Sequence[str],
          pixel: float, units: str) -> str | None:
    parts = []
    if amp_flag and res is not None:
        a = res["amplitude"]
        head = (f"residual sinusoid {a:.2f} {units} ({a / pixel:.1f} px) towards {res['direction_deg']:.0f}° "
                "on stable terrain")
        if not any("nuthkaab" in m for m in methods):
            parts.append(f"{head}: a horizontal shift remains; try --method nuthkaab (nuthkaab_deramp if dh is also "
                         "tilted)")
        elif any("deramp" in m for m in methods):
            parts.append(f"{head}: check the CRS of TBA, that unstable terrain is excluded (--exclude-mask), and try "
                         "a higher --poly-order")
        else:
            parts.append(f"{head}: try nuthkaab_deramp (a tilt biases Nuth & Kääb), or check the CRS of TBA and "
                         "that unstable terrain is excluded (--exclude-mask)")
    if ratio_flag and ratio is not None:
        parts.append(f"NMAD after is {ratio:.2f} x NMAD before: the correction made dh noisier; check the masks "
                     "(unstable terrain in the fit) and the method")
    return "; ".join(parts) if parts else None


def compute_verdict(
    sample: Mapping[str, np.ndarray],
    *,
    pixel_size: float,
    nmad_before: float | None = None,
    nmad_after: float | None = None,
    methods: Sequence[str] = (),
    units: str = "m",
) -> dict[str, Any] | None:
    """The verdict from a subsample of stable pixels.

    Parameters
    ----------
    sample
        1-D arrays ``after`` (dh after), ``before`` (dh before), ``slope`` and ``aspect``
        (degrees) at the same stable sampled pixels; ``slope``/``aspect`` may be missing
        (geographic CRS): then only the NMAD ratio is judged.
    pixel_size
        Pixel size (CRS units), the scale of :data:`RESIDUAL_PIXELS`.
    nmad_before, nmad_after
        NMADs of dh to use (e.g. the run's statistics); default: those of the sample.
    methods
        Lower-case names of the fitted steps, to word the hint.
    units
        Unit of dh and of the CRS, for the hint.

    Returns
    -------
    dict or None
        ``ok``, ``residual_amplitude_m``, ``residual_direction_deg``, ``residual_dh_m``,
        ``nmad_before``, ``nmad_after``, ``nmad_ratio``, ``n_points``, ``hint`` and the
        ``thresholds`` used; ``None`` without dh after.
    """
    if "after" not in sample:
        return None
    after = np.asarray(sample["after"], dtype=np.float64)
    nb = nmad_before if nmad_before is not None else (_nmad(np.asarray(sample["before"])) if "before" in sample else None)
    na = nmad_after if nmad_after is not None else _nmad(after)
    res = None
    if "slope" in sample and "aspect" in sample:
        res = residual_sinusoid(after, sample["slope"], sample["aspect"])
    ratio = None if nb is None or na is None or nb <= 0 else float(na) / float(nb)
    amp_flag = bool(res is not None and res["amplitude"] > RESIDUAL_PIXELS * pixel_size
                    and res["dh_explained"] > RESIDUAL_NMAD * (na or 0.0))
    ratio_flag = bool(ratio is not None and ratio > NMAD_RATIO_MAX)
    return {
        "ok": not (amp_flag or ratio_flag),
        "residual_amplitude_m": None if res is None else res["amplitude"],
        "residual_direction_deg": None if res is None else res["direction_deg"],
        "residual_dh_m": None if res is None else res["dh_explained"],
        "nmad_before": nb,
        "nmad_after": na,
        "nmad_ratio": ratio,
        "n_points": int(np.isfinite(after).sum()) if res is None else res["n"],
        "hint": _hint(amp_flag, ratio_flag, res, ratio, methods, pixel_size, units),
        "thresholds": {"residual_px": RESIDUAL_PIXELS, "residual_m": RESIDUAL_PIXELS * pixel_size,
                       "residual_dh_over_nmad": RESIDUAL_NMAD, "nmad_ratio_max": NMAD_RATIO_MAX},
    }


def verdict_sample(
    ref: Any, tba: Any, aligned: Any, *, inlier_mask: MaskLike = None, exclude_mask: MaskLike = None,
    subsample: int = VERDICT_SUBSAMPLE, random_state: int | None = None,
) -> tuple[dict[str, np.ndarray], int]:
    """Stable sampled pixels of dh before/after, slope and aspect of ``ref``, lazily on the
    reference grid; one pass (two when few pixels are valid). Slope and aspect (Horn) are
    computed at the sampled pixels only, from 4 x 4 windows of ``ref`` cut in that pass
    (:func:`xdem.coreg._windows.terrain_at_windows`): no full-size terrain raster.

    Returns the sample (1-D arrays; no ``slope``/``aspect`` in a geographic CRS) and the
    number of passes made.
    """
    import dask.array as da

    from xdem.coreg._windows import terrain_at_windows
    from xdem.io.grid import align_pair, signed_resolution
    from xdem.masks import stable_mask_like
    from xdem.sampling import sample_valid

    ref_g, tba_g = align_pair(ref, tba)
    ref_g, al_g = align_pair(ref_g, aligned)
    if tba_g.shape != ref_g.shape:
        ref_g, tba_g = align_pair(ref_g, tba_g)
    arrays = {"before": tba_g.data - ref_g.data, "after": al_g.data.rechunk(ref_g.data.chunks) - ref_g.data}
    projected = ref_g.rio.crs is not None and not ref_g.rio.crs.is_geographic
    # slope and aspect at the sampled pixels only, from 4 x 4 windows of ref cut in the same pass
    windows = {"win_ref": ref_g.data} if projected else None
    stable = stable_mask_like(ref_g, inlier_mask=inlier_mask, exclude_mask=exclude_mask)
    valid = da.isfinite(ref_g.data) & da.isfinite(tba_g.data) & stable
    s = sample_valid(valid, arrays, subsample=subsample, random_state=random_state, min_count=1, what="the verdict",
                     windows=windows, half=1)
    if projected:
        res_x, res_y = signed_resolution(ref_g)
        s["slope"], s["aspect"] = terrain_at_windows(s.pop("win_ref"), 1, res_x=res_x, res_y=res_y, method="horn")
    return {k: v for k, v in s.items() if k not in ("row", "col")}, int(s.passes)


def verdict_of_run(
    ref: Any, tba: Any, aligned: Any, *, stats: Mapping[str, Any] | None, methods: Sequence[str],
    inlier_mask: MaskLike = None, exclude_mask: MaskLike = None, random_state: int | None = None,
    subsample: int = VERDICT_SUBSAMPLE, sample: Mapping[str, np.ndarray] | None = None,
) -> dict[str, Any] | None:
    """The verdict of ``xdem coreg``: :func:`compute_verdict` on ``sample`` (drawn while
    writing, :func:`verdict_while_writing`) or, without it, on :func:`verdict_sample` (one
    pass), with the NMADs of the run's statistics (``stats["before"]["nmad"]``...) when given.

    The result holds ``passes`` (extra passes over the data made for the sample: 0 when
    ``sample`` is given) and ``subsample`` (pixels drawn).
    """
    from xdem.io.grid import get_resolution

    passes = 0
    if sample is None:
        sample, passes = verdict_sample(ref, tba, aligned, inlier_mask=inlier_mask, exclude_mask=exclude_mask,
                                        subsample=subsample, random_state=random_state)
    nb = na = None
    if stats and isinstance(stats.get("before"), Mapping) and isinstance(stats.get("after"), Mapping):
        nb, na = stats["before"].get("nmad"), stats["after"].get("nmad")
    rx, ry = get_resolution(ref)
    out = compute_verdict(sample, pixel_size=float(max(abs(rx), abs(ry))), nmad_before=nb, nmad_after=na,
                          methods=[m.lower() for m in methods])
    if out is not None:
        out["nmad_from"] = "stats" if na is not None else "verdict subsample"
        out["subsample"] = int(len(sample["after"]))
        out["passes"] = passes
    return out


def _written_block(
    block: np.ndarray, ref: np.ndarray, stable: np.ndarray, aligned: np.ndarray, *, limit: int, ncols: int,
    random_state: int | None, res: tuple[float, float] | None, row0: int, col0: int,
) -> dict[str, np.ndarray]:
    """One block of :func:`verdict_while_writing`: dh after, slope and aspect at the drawn
    stable pixels (slope/aspect NaN on the block's outer ring, whose neighbours are elsewhere)."""
    from xdem.coreg._windows import terrain_at_windows
    from xdem.sampling import _pixel_hash, below, partial_windows

    del block  # the written block (nodata filled); ``aligned`` holds its values
    keep = np.isfinite(ref) & np.asarray(stable, dtype=bool) & np.isfinite(aligned)
    keep &= below(_pixel_hash(row0, col0, ref.shape, ncols, random_state), limit)
    r, c = np.nonzero(keep)
    out = {"after": (aligned[r, c].astype(np.float64) - ref[r, c].astype(np.float64))}
    if res is None:  # geographic CRS: no slope in degrees from these pixel sizes
        return out
    if r.size:
        win = partial_windows(np.asarray(ref, dtype=np.float32), r, c, 1)
        out["slope"], out["aspect"] = terrain_at_windows(win, 1, res_x=res[0], res_y=res[1], method="horn")
    else:
        out["slope"] = out["aspect"] = np.empty(0)
    return out


def verdict_while_writing(
    ref: Any, aligned: Any, *, stable: Any, subsample: int = VERDICT_SUBSAMPLE, random_state: int | None = None,
) -> tuple[Any, Any]:
    """The verdict's subsample drawn in the tasks that write ``aligned`` with
    :func:`xdem.write_cog` (``also=[...]``): no extra pass over the data.

    ``ref`` (DataArray), ``aligned`` and ``stable`` (dask arrays) share the written grid and
    chunks. About ``subsample`` x (valid fraction) stable pixels are drawn (the hash of
    :mod:`xdem.sampling`, the same for any chunking); slope and aspect (Horn) come from each
    pixel's 3 x 3 neighbourhood in its block (pixels on a block's outer ring get none and
    only enter the NMADs). Returns the :class:`xdem.io.cog.BlockStats` and a function turning
    its per-block results into the sample of :func:`compute_verdict` (``after``, ``slope``,
    ``aspect``; no ``before``: give the run's NMADs).
    """
    from functools import partial

    import dask.array as da

    from xdem.io.cog import BlockStats
    from xdem.io.grid import signed_resolution
    from xdem.sampling import hash_bound

    ny, nx = ref.shape
    chunks = ref.data.chunks
    projected = ref.rio.crs is not None and not ref.rio.crs.is_geographic
    func = partial(_written_block, limit=hash_bound(min(1.0, float(subsample) / (ny * nx))), ncols=nx,
                   random_state=random_state, res=signed_resolution(ref) if projected else None)
    arrays = [ref.data, da.asarray(stable).rechunk(chunks), da.asarray(aligned).rechunk(chunks)]

    def finish(parts: list) -> dict[str, np.ndarray]:
        keys = ("after", "slope", "aspect") if projected else ("after",)
        return {k: np.concatenate([p[k] for p in parts]) if parts else np.empty(0) for k in keys}

    return BlockStats(func, arrays), finish
