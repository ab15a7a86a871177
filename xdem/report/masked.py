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
* ``volume_uncertainty = area * mean_dh_uncertainty`` (the area is taken as exact);
* in metres: ``mass`` and ``mean_dh_we`` (metres water equivalent) with their uncertainties,
  at the density of :mod:`xdem.report.units` (850 ± 60 kg/m³, Huss 2013).

The page shows areas in km² (m² when tiny), volumes in km³ (10⁶ m³, m³ when small), masses in Gt
(Mt, t when small), each row in the unit that shows its values with 4 significant figures
(before and after share it): each cell carries ``data-key`` and ``data-unit``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from xdem.kernels.robust import nmad
from xdem.report import units as U
from xdem.report.html import fmt, label_cell, note, table
from xdem.spatialstats import fit_sum_model_variogram, neff_circular_approx_theoretical
from xdem.spatialstats.variogram import _lag_edges, _one_variogram

if TYPE_CHECKING:  # annotations only: xdem.report.data imports this module
    from xdem.report.data import ReportData
    from xdem.typing import JSONDict

__all__ = ["VARIOGRAM_POINTS", "inside_block", "inside_section"]

#: Stable sampled pixels used for the variogram of the uncertainty.
VARIOGRAM_POINTS = 2000


def _nmad(v: np.ndarray) -> float | None:
    return nmad(v) if v.size else None


def _sem(values: np.ndarray, rows: np.ndarray, cols: np.ndarray, *, res: tuple[float, float], area: float,
         nmad: float, random_state: int | None) -> tuple[float, float | None, str]:
    """``(uncertainty of the mean, n_eff or None, how)``."""
    import pandas as pd

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
                           f"variogram (range {fmt(r)} in CRS units) fitted on {idx.size} stable sampled pixels"
                           + (", capped at the number of mask pixels" if capped else ""))
    except Exception:  # noqa: BLE001 - any failure of the fit gives the stated bound
        return nmad, None, "NMAD of stable dh (variogram fit failed: errors taken as fully correlated, an upper bound)"


def inside_block(
    sums: Mapping[str, float], *, sample: Mapping[str, np.ndarray], resolution: tuple[float, float],
    random_state: int | None = None,
) -> JSONDict:
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


def _unit_cell(value: Any, key: str, divisor: float, unit: str) -> str:
    """``<td>`` of ``value / divisor`` carrying ``data-key`` and ``data-unit``."""
    shown = None if value is None else float(value) / divisor
    return f'<td data-unit="{unit}" data-key="{key}">{fmt(shown)}</td>'


def _row(label: str, block: Mapping[str, Any], names: list[str], key: str, pick: Any, unit: tuple[float, str],
         ) -> list[str]:
    return [label_cell(label.format(unit=unit[1]))] + [
        _unit_cell(pick(block[n]), f"report.inside.{n}.{key}", *unit) for n in names]


def _with_mass(block: dict[str, Any], names: list[str]) -> None:
    for n in names:
        b = block[n]
        b["mass"], b["mass_uncertainty"] = U.mass_change(b["volume"], b["volume_uncertainty"])
        b["mean_dh_we"], b["mean_dh_we_uncertainty"] = U.water_equivalent(b["mean_dh"], b["mean_dh_uncertainty"])


def inside_section(data: ReportData, *, random_state: int | None) -> str | None:
    """HTML of the "Inside the mask" block of a :class:`~xdem.report.data.ReportData` (``None``
    without a mask): area, mean dh, volume change and, in metres, mass change and m w.e., each
    with its 1-sigma uncertainty, in the units of :mod:`xdem.report.units`."""
    if not data.inside:
        return None
    block = inside_block(data.inside, sample=data.sample, resolution=data.resolution, random_state=random_state)
    u = data.units
    names: list[str] = [n for n in ("before", "after") if n in block]
    metres = u == "m"
    area_u = U.area_unit([block["area"]]) if metres else (1.0, f"{u}²")
    vol_u = U.volume_unit([block[n]["volume"] for n in names]) if metres else (1.0, f"{u}³")
    vol_su = U.volume_unit([block[n]["volume_uncertainty"] for n in names]) if metres else (1.0, f"{u}³")
    one = (1.0, u)
    rows = [[label_cell("pixels inside the mask (on the reference grid)"),
             f'<td data-key="report.inside.mask_pixels">{fmt(block["mask_pixels"])}</td>'],
            [label_cell(f"mask area ({area_u[1]})"), _unit_cell(block["area"], "report.inside.area", *area_u)]]
    trows = [
        _row("valid pixels inside the mask (dh finite, exact count)", block, names, "count", lambda b: b["count"],
             (1.0, "pixels")),
        _row("mean dh ({unit})", block, names, "mean_dh", lambda b: b["mean_dh"], one),
        _row("uncertainty of mean dh, 1σ ({unit})", block, names, "mean_dh_uncertainty",
             lambda b: b["mean_dh_uncertainty"], one),
        _row("volume change = area × mean dh ({unit})", block, names, "volume", lambda b: b["volume"], vol_u),
        _row("uncertainty of the volume change, 1σ ({unit})", block, names, "volume_uncertainty",
             lambda b: b["volume_uncertainty"], vol_su),
    ]
    if metres:
        _with_mass(block, names)
        mass_u = U.mass_unit([block[n]["mass"] for n in names])
        mass_su = U.mass_unit([block[n]["mass_uncertainty"] for n in names])
        trows += [
            _row("mass change = density × volume ({unit})", block, names, "mass", lambda b: b["mass"], mass_u),
            _row("uncertainty of the mass change, 1σ ({unit})", block, names, "mass_uncertainty",
                 lambda b: b["mass_uncertainty"], mass_su),
            _row("mean change ({unit})", block, names, "mean_dh_we", lambda b: b["mean_dh_we"], (1.0, "m w.e.")),
            _row("uncertainty of the mean change, 1σ ({unit})", block, names, "mean_dh_we_uncertainty",
                 lambda b: b["mean_dh_we_uncertainty"], (1.0, "m w.e.")),
        ]
    trows += [
        _row("NMAD of stable dh ({unit})", block, names, "nmad_stable", lambda b: b["nmad_stable"], one),
        _row("effective samples over the mask", block, names, "n_eff", lambda b: b["n_eff"], (1.0, "samples")),
    ]
    methods = "; ".join(f"{n}: {block[n]['uncertainty_method']}" for n in names if block[n]["uncertainty_method"])
    return (table(["Item", "Value"], rows) + table(["Inside the mask", *names], trows)
            + note("Inside the mask = not stable terrain (inside the exclude mask or outside the inlier mask). Mean dh "
                   "over its valid pixels (exact counts, every pixel: not the subsample); the area counts every mask "
                   f"pixel (voids assumed to change as the mean). Uncertainty ({methods}); the volume uncertainty is "
                   "area × that of the mean." + (" " + U.DENSITY_NOTE if metres else "")
                   + " The map of dh inside the mask, on its own colour scale, is in the maps section."))
