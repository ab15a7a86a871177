r"""Inside the mask (e.g. glaciers): mean dh, volume change and their uncertainty.

"Inside the mask" is every pixel that is not stable terrain: inside the exclude mask, or
outside the inlier mask. Its sums are computed in the report's one pass
(:func:`xdem.report.blocks.inside_block_sums`); then, per dh (before, after):

* ``mean_dh``: mean of the valid dh inside the mask (exact);
* ``area``: every pixel inside the mask times the pixel area (voids are assumed to change
  as the mean: no other gap filling);
* ``volume = area * mean_dh``;
* ``mean_dh_uncertainty``: :math:`\sigma_{\bar{dh}} = NMAD_{stable} / \sqrt{n_{eff}}`, the
  spread of dh on stable terrain (the report's subsample) over the number of effective
  samples of a disk of the mask's area (Rolstad et al. 2009; Hugonnet et al. 2022:
  :func:`xdem.spatialstats.standard_error_of_mean`), with one spherical variogram fitted on
  at most :data:`VARIOGRAM_POINTS` stable sampled pixels (no extra pass over the data),
  ``n_eff`` capped at the number of pixels of the mask (a range below a pixel, white noise,
  would give more effective samples than pixels). If that
  fit fails, the stated bound is :math:`\sigma_{\bar{dh}} = NMAD_{stable}` (errors fully
  correlated over the mask: an upper bound);
* ``volume_uncertainty = area * mean_dh_uncertainty`` (the area is taken as exact).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from xdem.kernels.robust import nmad

__all__ = ["VARIOGRAM_POINTS", "inside_block"]

#: Stable sampled pixels used for the variogram of the uncertainty.
VARIOGRAM_POINTS = 2000


def _nmad(v: np.ndarray) -> float | None:
    return nmad(v) if v.size else None


def _sem(values: np.ndarray, rows: np.ndarray, cols: np.ndarray, *, res: tuple[float, float], area: float,
         nmad: float, random_state: int | None) -> tuple[float, float | None, str]:
    """``(uncertainty of the mean, n_eff or None, how)``."""
    import pandas as pd

    from xdem.spatialstats import fit_sum_model_variogram
    from xdem.spatialstats.variogram import _lag_edges, _one_variogram

    rx, ry = abs(res[0]), abs(res[1])
    try:
        rng = np.random.default_rng(0 if random_state is None else random_state)
        idx = rng.permutation(values.size)[:VARIOGRAM_POINTS]
        coords = np.column_stack([cols[idx] * rx, rows[idx] * ry]).astype(np.float64)
        span = float(np.hypot(np.ptp(coords[:, 0]), np.ptp(coords[:, 1])))
        edges = _lag_edges("log", 15, 0.5 * span, min(rx, ry))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            v = _one_variogram(coords, values[idx], edges, "dowd")
            ev = pd.DataFrame({"bins": edges, "exp": v[:, 0], "count": v[:, 1], "lag": v[:, 2], "err_exp": np.nan})
            _, params = fit_sum_model_variogram(["spherical"], ev)
            from xdem.spatialstats import neff_circular_approx_theoretical

            neff = neff_circular_approx_theoretical(area, params)
        # a range below a pixel (white noise) gives more effective samples than pixels: cap them
        n_pixels = area / (rx * ry)
        capped = neff > n_pixels
        neff = min(neff, n_pixels)
        sem = nmad / np.sqrt(neff)
        if not np.isfinite(sem):
            raise ValueError("non-finite")
        r = float(params["range"].iloc[0])
        return sem, neff, (f"NMAD of stable dh / sqrt(n_eff), n_eff of a disk of the mask's area from a spherical "
                           f"variogram (range {r:.4g}) fitted on {idx.size} stable sampled pixels"
                           + (", capped at the number of mask pixels" if capped else ""))
    except Exception:  # noqa: BLE001 - any failure of the fit gives the stated bound
        return nmad, None, "NMAD of stable dh (variogram fit failed: errors taken as fully correlated, an upper bound)"


def inside_block(
    sums: Mapping[str, Any], *, sample: Mapping[str, np.ndarray], resolution: tuple[float, float],
    random_state: int | None = None,
) -> dict[str, Any]:
    """Mean dh, volume change and uncertainties inside the mask (see the module notes).

    Parameters
    ----------
    sums
        The sums inside the mask (:func:`xdem.report.blocks.merge_inside`).
    sample
        The report's subsample of stable pixels (``row``, ``col``, ``before``, ``after``).
    resolution
        Pixel size ``(x, y)`` in CRS units.
    random_state
        Seed of the points picked for the variogram.

    Returns
    -------
    dict
        ``mask_pixels``, ``area`` and, per dh, ``count``, ``mean_dh``, ``volume``,
        ``nmad_stable``, ``n_eff``, ``mean_dh_uncertainty``, ``volume_uncertainty``,
        ``uncertainty_method``.
    """
    n_mask = int(sums["mask_pixels"])
    area = n_mask * abs(float(resolution[0]) * float(resolution[1]))
    out: dict[str, Any] = {"mask_pixels": n_mask, "area": area}
    for name in ("before", "after"):
        if f"{name}.count" not in sums:
            continue
        count = int(sums[f"{name}.count"])
        mean = float(sums[f"{name}.sum"]) / count if count else None
        v = np.asarray(sample.get(name, np.empty(0)), dtype=np.float64)
        ok = np.isfinite(v)
        nmad = _nmad(v[ok])
        sem = neff = how = None
        if nmad is not None and area > 0:
            sem, neff, how = _sem(v[ok], np.asarray(sample["row"])[ok], np.asarray(sample["col"])[ok],
                                  res=resolution, area=area, nmad=nmad, random_state=random_state)
        out[name] = {
            "count": count, "mean_dh": mean, "volume": None if mean is None else area * mean,
            "nmad_stable": nmad, "n_eff": neff, "mean_dh_uncertainty": sem,
            "volume_uncertainty": None if sem is None else area * sem, "uncertainty_method": how,
        }
    return out
