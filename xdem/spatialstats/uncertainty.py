r"""Uncertainty of the mean elevation difference over an area, from a variogram.

Errors of neighbouring pixels are correlated, so averaging ``N`` pixels does not divide
the error by :math:`\sqrt{N}`. Rolstad et al. (2009, J. Glaciol. 55(192), 666-680)
approximate the area :math:`A` by a disk of the same area, radius
:math:`L = \sqrt{A / \pi}`, and the variance of the mean by the covariance averaged over
the disk around its centre:

.. math::

    \sigma_{\bar{dh}}^2 = \frac{1}{A} \int_{disk} C(|x|)\, dx
                        = \frac{2}{L^2} \int_0^L r\, C(r)\, dr,

with :math:`C(r) = \sum_k s_k \rho_k(r)` the covariance of a sum of variogram models
(partial sills :math:`s_k`, correlations :math:`\rho_k = 1 - \gamma_k / s_k`). Hugonnet
et al. (2022, IEEE JSTARS 15, 6456-6472) write it as a number of effective samples

.. math::

    n_{eff} = \frac{\sigma^2}{\sigma_{\bar{dh}}^2}
            = \left[\sum_k \frac{s_k}{\sigma^2}\, \frac{2}{L^2} \int_0^L r\, \rho_k(r)\, dr\right]^{-1},
    \qquad \sigma^2 = \sum_k s_k,

and the standard error of the mean as :math:`\sigma_{dh} / \sqrt{n_{eff}}` with
:math:`\sigma_{dh}` the (robust) spread of dh, e.g. its NMAD.

Closed forms (:func:`neff_circular_approx_theoretical`), with :math:`R` the effective
range of scikit-gstat's models:

* spherical: :math:`1 - L/R + L^3/(5R^3)` for :math:`L \le R`, :math:`R^2 / (5L^2)` beyond
  (Rolstad et al. 2009);
* exponential (:math:`a = R/3`): :math:`\frac{2a^2}{L^2}\,[1 - e^{-L/a}(1 + L/a)]`;
* gaussian (:math:`a = R/2`): :math:`\frac{a^2}{L^2}\,[1 - e^{-L^2/a^2}]`.

Both limits follow: a vanishing area gives :math:`n_{eff} = 1` (one pixel's error), and
an area much larger than the ranges gives :math:`\sigma_{\bar{dh}} \propto \sigma \sqrt{R^2/A}`
(e.g. :math:`\sigma \sqrt{\pi R^2 / (5A)}` for a spherical model).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xdem.errors import InputError
from xdem.spatialstats.variogram import VariogramParams, _components, _skgstat_model

__all__ = ["neff_circular_approx_numerical", "neff_circular_approx_theoretical", "standard_error_of_mean"]

# Beyond cutoff * range the correlation is 0 (compact models) or below exp(-45).
_CUTOFF = {"spherical": 1.0, "cubic": 1.0, "exponential": 15.0, "gaussian": 4.0}


def _check_area(area: Any) -> float:
    scalar = np.isscalar(area)  # tested apart: np.isscalar's TypeGuard would type area as any scalar (str, complex...)
    a = float(area) if scalar else np.nan
    if not (np.isfinite(a) and a > 0):
        raise InputError(f"area must be a positive number (CRS units squared), got {area!r}")
    return a


def _disk_ratio_numerical(model: str, rng: float, radius: float) -> float:
    """``(2 / L^2) * integral_0^L r rho(r) dr`` by adaptive quadrature."""
    from scipy.integrate import quad

    fn = _skgstat_model(model)
    upper = min(radius, _CUTOFF[model] * rng)
    pts = [p for p in (rng / 3, rng / 2, rng) if p < upper] or None
    val, _ = quad(lambda r: r * (1.0 - fn(r, rng, 1.0)), 0.0, upper, points=pts, limit=200, epsabs=0, epsrel=1e-10)
    return 2.0 * val / radius**2


def _disk_ratio_theoretical(model: str, rng: float, radius: float) -> float:
    L = radius
    if model == "spherical":
        return 1 - L / rng + L**3 / (5 * rng**3) if L <= rng else rng**2 / (5 * L**2)
    if model == "exponential":
        a = rng / 3
        x = L / a
        # 1 - e^-x (1 + x), by its series for tiny x (cancellation)
        core = x**2 / 2 - x**3 / 3 + x**4 / 8 if x < 1e-3 else -np.expm1(-x) - x * np.exp(-x)
        return 2 * core / x**2
    if model == "gaussian":
        x2 = (L / (rng / 2)) ** 2
        return float(-np.expm1(-x2) / x2)
    raise InputError(f"no closed form for the {model} model; use neff_circular_approx_numerical")


def _neff(area: Any, params: Any, ratio) -> float:
    a = _check_area(area)
    comps = _components(params)
    total = sum(s for _m, _r, s in comps)
    if total <= 0:
        raise InputError("the variogram has a zero total sill; the errors have no variance to average")
    radius = np.sqrt(a / np.pi)
    var_ratio = sum(s / total * ratio(m, r, radius) for m, r, s in comps)
    return float(1.0 / var_ratio)


def neff_circular_approx_numerical(area: float, params_variogram_model: VariogramParams) -> float:
    """Number of effective samples of a disk of ``area`` (numerical integration).

    Integrates the correlation of each model of ``params_variogram_model`` (scikit-gstat's functions) over
    a disk of the same area with :func:`scipy.integrate.quad`; see the module docstring
    for the equations (Rolstad et al. 2009; Hugonnet et al. 2022). Works for every model
    of :data:`xdem.spatialstats.MODELS`.

    Parameters
    ----------
    area
        Area in CRS units squared (e.g. m^2).
    params_variogram_model
        DataFrame ``model, range, sill`` from :func:`fit_sum_model_variogram`, or a list
        of ``(model, range, sill)``.

    Examples
    --------
    >>> round(neff_circular_approx_numerical(1e6, [("spherical", 100.0, 1.0)]), 3)
    159.155
    """
    return _neff(area, params_variogram_model, _disk_ratio_numerical)


def neff_circular_approx_theoretical(area: float, params_variogram_model: VariogramParams) -> float:
    """Number of effective samples of a disk of ``area`` from closed forms.

    Spherical, exponential and gaussian models only (see the module docstring for the
    formulas). Agrees with :func:`neff_circular_approx_numerical`.

    Examples
    --------
    >>> import numpy as np
    >>> n = neff_circular_approx_theoretical(1e6, [("spherical", 100.0, 1.0)])
    >>> bool(np.isclose(n, 5 * 1e6 / (np.pi * 100.0**2)))
    True
    """
    return _neff(area, params_variogram_model, _disk_ratio_theoretical)


def standard_error_of_mean(
    std: float, *, area: float, params: VariogramParams, method: str = "numerical"
) -> float:
    """Standard error of the mean dh over ``area``: ``std / sqrt(n_eff)``.

    Parameters
    ----------
    std
        Spread of dh for one pixel, e.g. the NMAD (robust) or standard deviation of dh on
        stable terrain.
    area
        Area (CRS units squared) over which dh is averaged.
    params
        Fitted variogram (``model, range, sill``); only the ratios of the sills matter.
    method
        ``"numerical"`` (any model) or ``"theoretical"`` (closed forms).

    Examples
    --------
    >>> se = standard_error_of_mean(2.0, area=1e-6, params=[("spherical", 100.0, 1.0)])
    >>> round(se, 4)  # a vanishing area keeps the error of one pixel
    2.0
    """
    if method not in ("numerical", "theoretical"):
        raise InputError(f"method must be 'numerical' or 'theoretical', got {method!r}")
    s = float(std)
    if not (np.isfinite(s) and s >= 0):
        raise InputError(f"std must be a non-negative number, got {std!r}")
    fn = neff_circular_approx_numerical if method == "numerical" else neff_circular_approx_theoretical
    return float(s / np.sqrt(fn(area, params)))
