r"""Units a glaciologist reads: areas in km² (m² when tiny), volumes in km³ (10⁶ m³ or m³ when small),
mass changes in Gt (Mt or t when small) and in metres water equivalent.

Every number is then written by :func:`xdem.report.html.fmt` (4 significant figures, never
"-0"); the unit is chosen from the largest magnitude of a row so that values compared side by
side (before, after, their uncertainties) share it.

Mass uses a volume-to-mass conversion density :math:`\rho = 850 \pm 60` kg m⁻³
(:data:`DENSITY`, :data:`DENSITY_UNCERTAINTY`; Huss, 2013, *The Cryosphere* 7, 877-887, the
convention upstream xdem's gallery uses) and water of 1000 kg m⁻³:

* mass change :math:`M = \rho V`, :math:`\sigma_M = \sqrt{(\rho\,\sigma_V)^2 + (V\,\sigma_\rho)^2}`;
* mean change in m w.e. :math:`b = \overline{dh}\,\rho / \rho_w`,
  :math:`\sigma_b = \sqrt{(\rho\,\sigma_{\overline{dh}})^2 + (\overline{dh}\,\sigma_\rho)^2} / \rho_w`.
"""

from __future__ import annotations

import math

__all__ = ["DENSITY", "DENSITY_UNCERTAINTY", "WATER_DENSITY", "DENSITY_NOTE", "area_unit", "volume_unit",
           "mass_unit", "mass_change", "water_equivalent"]

#: Volume-to-mass conversion density (kg m⁻³) of Huss (2013).
DENSITY = 850.0
#: Its 1-sigma uncertainty (kg m⁻³).
DENSITY_UNCERTAINTY = 60.0
#: Density of water (kg m⁻³), for metres water equivalent.
WATER_DENSITY = 1000.0
#: The sentence the report prints under mass numbers.
DENSITY_NOTE = (f"Mass and m w.e. with a volume-to-mass conversion density of {DENSITY:g} ± {DENSITY_UNCERTAINTY:g} "
                f"kg/m³ (Huss, 2013; its uncertainty is included) and water of {WATER_DENSITY:g} kg/m³.")


def _largest(values: list[float | None]) -> float:
    finite = [abs(float(v)) for v in values if v is not None and math.isfinite(float(v))]
    return max(finite, default=0.0)


def area_unit(values_m2: list[float | None]) -> tuple[float, str]:
    """``(divisor, unit)`` for areas in m²: km² unless the largest is below 0.01 km².

    Examples
    --------
    >>> area_unit([32000.0]), area_unit([250.0])
    ((1000000.0, 'km²'), (1.0, 'm²'))
    """
    return (1e6, "km²") if _largest(values_m2) >= 1e4 else (1.0, "m²")


def volume_unit(values_m3: list[float | None]) -> tuple[float, str]:
    """``(divisor, unit)`` for volumes in m³: km³ from 0.01 km³ (10⁷ m³) up, 10⁶ m³ from 10⁴ m³
    up, else m³ (so that 4 significant figures show the value: never a 6-digit m³ count).

    Examples
    --------
    >>> volume_unit([-9.6e5, 1.0e2]), volume_unit([-3.2e9]), volume_unit([5617.0, 53.7])
    ((1000000.0, '10⁶ m³'), (1000000000.0, 'km³'), (1.0, 'm³'))
    """
    big = _largest(values_m3)
    if big >= 1e7:
        return 1e9, "km³"
    return (1e6, "10⁶ m³") if big >= 1e4 else (1.0, "m³")


def mass_unit(values_kg: list[float | None]) -> tuple[float, str]:
    """``(divisor, unit)`` for masses in kg: Gt from 0.01 Gt up, Mt from 0.01 Mt up, else t.

    Examples
    --------
    >>> mass_unit([-8.2e8]), mass_unit([2.7e12]), mass_unit([5.0e3])
    ((1000000000.0, 'Mt'), (1000000000000.0, 'Gt'), (1000.0, 't'))
    """
    big = _largest(values_kg)
    if big >= 1e10:
        return 1e12, "Gt"
    return (1e9, "Mt") if big >= 1e7 else (1e3, "t")


def mass_change(volume_m3: float | None, volume_sigma_m3: float | None) -> tuple[float | None, float | None]:
    """Mass change (kg) of a volume change and its 1-sigma uncertainty, density uncertainty included.

    Examples
    --------
    >>> m, s = mass_change(-1.0e6, 1.0e4)
    >>> round(m), round(s)
    (-850000000, 60599092)
    """
    if volume_m3 is None:
        return None, None
    mass = DENSITY * volume_m3
    if volume_sigma_m3 is None:
        return mass, None
    return mass, math.hypot(DENSITY * volume_sigma_m3, volume_m3 * DENSITY_UNCERTAINTY)


def water_equivalent(mean_dh_m: float | None, sigma_m: float | None) -> tuple[float | None, float | None]:
    """Mean elevation change in metres water equivalent and its 1-sigma uncertainty.

    Examples
    --------
    >>> b, s = water_equivalent(-30.0, 0.1)
    >>> round(b, 3), round(s, 3)
    (-25.5, 1.802)
    """
    if mean_dh_m is None:
        return None, None
    b = mean_dh_m * DENSITY / WATER_DENSITY
    if sigma_m is None:
        return b, None
    return b, math.hypot(DENSITY * sigma_m, mean_dh_m * DENSITY_UNCERTAINTY) / WATER_DENSITY
