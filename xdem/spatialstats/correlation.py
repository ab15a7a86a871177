r"""Spatial correlation of elevation errors from stable terrain (GlacioHack/xdem 0.2.3's names).

:func:`infer_spatial_correlation_from_stable` masks the stable terrain, optionally standardises
dh by its errors (from :func:`~xdem.spatialstats.infer_heteroscedasticity_from_stable`), draws
the empirical variogram on a reproducible subsample of the valid pixels
(:func:`~xdem.spatialstats.sample_empirical_variogram`: one or two block-wise passes, memory of
one chunk plus the points; the draw is the same for any chunking) and fits a sum of variogram
models (:func:`~xdem.spatialstats.fit_sum_model_variogram`). The models' parameters come back as
upstream's table (``model``, ``range``, ``psill``) with the correlation function
:math:`\rho(h) = 1 - \gamma(h) / \sum_k s_k`.

A nugget (white error, uncorrelated between neighbouring pixels) is a model whose range is
shorter than the first lag class (two pixels): give one more model for it, e.g.
``["spherical", "gaussian"]``; its partial sill is then the nugget.

Examples
--------
>>> import pandas as pd
>>> params = pd.DataFrame({"model": ["spherical"], "range": [100.0], "psill": [2.0]})
>>> rho = correlation_from_variogram(params)
>>> float(rho(0.0)), float(rho(100.0))
(1.0, 0.0)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from xdem.errors import InputError
from xdem.spatialstats._fields import as_field, chunks_of, lazy, stable_values
from xdem.spatialstats.variogram import VariogramParams, _components, fit_sum_model_variogram
from xdem.spatialstats.variogram import sample_empirical_variogram as _sample

__all__ = ["get_variogram_model_func", "covariance_from_variogram", "correlation_from_variogram",
           "infer_spatial_correlation_from_stable", "SUBSAMPLE_METHODS"]

#: Upstream's ``subsample_method`` names; every one draws here the same reproducible random
#: subsample of the valid pixels (all pairs among them), whose variogram estimates the same one.
SUBSAMPLE_METHODS = ("cdist_equidistant", "cdist_point", "pdist_point", "pdist_disk", "pdist_ring", "random_point")

Function = Callable[[float | np.ndarray], np.ndarray]


def _vector_model(name: str, h: np.ndarray, r: float, s: float) -> np.ndarray:
    """scikit-gstat's model ``name`` (effective range ``r``, partial sill ``s``, no nugget), in numpy
    (scikit-gstat evaluates its models point by point)."""
    if name == "spherical":
        x = np.minimum(h / r, 1.0)
        return s * (1.5 * x - 0.5 * x**3)
    if name == "exponential":
        return s * -np.expm1(-3.0 * h / r)
    if name == "gaussian":
        return s * -np.expm1(-((2.0 * h / r) ** 2))
    x = np.minimum(h / r, 1.0)  # cubic
    return s * (7 * x**2 - 8.75 * x**3 + 3.5 * x**5 - 0.75 * x**7)


class _Gamma:
    """The sum of models of ``params`` as a vectorised, picklable function of the lag."""

    def __init__(self, params: VariogramParams) -> None:
        self.params = _components(params)

    def __call__(self, h: float | np.ndarray) -> np.ndarray:
        h = np.asarray(h, dtype=np.float64)
        out = np.zeros(h.shape)
        for m, r, s in self.params:
            out += _vector_model(m, h, r, s)
        return out if h.ndim else out[()]


def get_variogram_model_func(params_variogram_model: VariogramParams) -> Function:
    """The sum of the variogram models of ``params_variogram_model`` (``model``, ``range``, and
    ``psill`` or ``sill``) as a vectorised function of the lag.

    Examples
    --------
    >>> gamma = get_variogram_model_func([("spherical", 100.0, 2.0)])
    >>> float(gamma(200.0))
    2.0
    """
    return _Gamma(params_variogram_model)


def covariance_from_variogram(params_variogram_model: VariogramParams) -> Function:
    """Covariance ``C(h) = sum of partial sills - gamma(h)``.

    Examples
    --------
    >>> float(covariance_from_variogram([("spherical", 100.0, 2.0)])(0.0))
    2.0
    """
    total = sum(s for _m, _r, s in _components(params_variogram_model))
    gamma = _Gamma(params_variogram_model)

    def covariance(h: float | np.ndarray) -> np.ndarray:
        return total - gamma(h)

    return covariance


def correlation_from_variogram(params_variogram_model: VariogramParams) -> Function:
    """Correlation ``rho(h) = C(h) / sum of partial sills`` (1 at lag 0, 0 beyond the ranges).

    Examples
    --------
    >>> round(float(correlation_from_variogram([("gaussian", 100.0, 2.0)])(50.0)), 4)
    0.3679
    """
    total = sum(s for _m, _r, s in _components(params_variogram_model))
    if total <= 0:
        raise InputError("the variogram has a zero total sill: no correlation to compute")
    gamma = _Gamma(params_variogram_model)

    def correlation(h: float | np.ndarray) -> np.ndarray:
        return 1.0 - gamma(h) / total

    return correlation


def infer_spatial_correlation_from_stable(
    dvalues: object,
    list_models: Sequence[str],
    stable_mask: object = None,
    unstable_mask: object = None,
    errors: object = None,
    estimator: str = "dowd",
    gsd: float | None = None,
    coords: None = None,
    subsample: int = 1000,
    subsample_method: str = "cdist_equidistant",
    n_variograms: int = 1,
    n_jobs: int = 1,
    bounds: None = None,
    p0: None = None,
    random_state: int | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, Function]:
    """Empirical variogram of dh on stable terrain, its fitted sum of models, and the correlation.

    Parameters
    ----------
    dvalues
        dh (2-D numpy, dask, DataArray or :class:`xdem.DEM`; a projected CRS, distances in its units).
    list_models
        Models to sum, e.g. ``["spherical", "gaussian"]`` (names or 3-letter aliases of
        :data:`xdem.spatialstats.MODELS`).
    stable_mask, unstable_mask
        As :func:`~xdem.spatialstats.infer_heteroscedasticity_from_stable`.
    errors
        Errors of dvalues (same grid): dh is divided by them first (standardisation).
    estimator
        scikit-gstat estimator (``"dowd"``, upstream's default; ``"matheron"``, ``"cressie"``, ``"genton"``).
    gsd
        Pixel size for plain arrays (a georeferenced input gives its own).
    coords
        Upstream's coordinates of 1-D values: not supported (give the 2-D grid).
    subsample
        Points per variogram (all pairs among them are used).
    subsample_method
        One of :data:`SUBSAMPLE_METHODS`; all draw the same reproducible random subsample here.
    n_variograms
        Independent variograms (each on ``subsample`` points), averaged; their spread is ``err_exp``.
    n_jobs
        Upstream's process count: dask schedules the passes here, so it is only checked.
    bounds, p0
        Upstream's fit bounds and first guesses: not supported (the fit tries several starts).
    random_state
        Seed of the draw (``None``: :data:`xdem.sampling.DEFAULT_SEED`, reproducible).

    Returns
    -------
    df_empirical_variogram
        ``bins`` (upper edge of the lag class) and upstream's ``lags`` (the same), ``lag`` (mean
        distance of the pairs), ``exp``, ``count``, ``err_exp``.
    df_model_params
        ``model``, ``range`` (effective range), ``psill`` (partial sill), by increasing range.
    spatial_correlation_function
        ``h -> rho(h)`` in [0, 1].
    """
    if coords is not None:
        raise InputError("coords (1-D values with coordinates) is not supported here; give dvalues as a 2-D grid")
    if bounds is not None or p0 is not None:
        raise InputError("bounds and p0 are not supported here: the fit tries several starting ranges; leave them out")
    if subsample_method not in SUBSAMPLE_METHODS:
        raise InputError(f"subsample_method must be one of {SUBSAMPLE_METHODS}, got {subsample_method!r}")
    if int(n_jobs) != n_jobs or n_jobs == 0:
        raise InputError(f"n_jobs must be a non-zero integer, got {n_jobs!r}")
    field = as_field(dvalues)
    if field.data.ndim != 2:
        raise InputError(f"dvalues must be a 2-D grid, got shape {field.data.shape}")
    values = stable_values(field, stable_mask, unstable_mask)
    if errors is not None:
        err = as_field(errors, "errors")
        if err.data.shape != field.data.shape:
            raise InputError(f"errors has shape {err.data.shape} but dvalues has {field.data.shape}")
        values = values / (err.data if isinstance(values, np.ndarray) or not err.is_numpy
                           else lazy(err.data, chunks_of(values)))
    scale = 1.0
    if field.grid is not None and "x" in field.grid.coords and "y" in field.grid.coords:
        data: Any = field.grid.copy(data=values)
    elif gsd is None:
        raise InputError("dvalues has no georeferencing: give gsd, the pixel size (distances are in its units)")
    else:
        data, scale = values, float(gsd)
    ev = _sample(data, subsample=subsample, n_variograms=n_variograms, random_state=random_state, estimator=estimator)
    if scale != 1.0:
        ev["bins"], ev["lag"] = ev["bins"] * scale, ev["lag"] * scale
    ev["lags"] = ev["bins"]
    _, params = fit_sum_model_variogram(list(list_models), ev)
    params = params.rename(columns={"sill": "psill"})
    return ev, params, correlation_from_variogram(params)
