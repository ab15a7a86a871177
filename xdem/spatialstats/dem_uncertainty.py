"""Upstream 0.2.3's ``DEM.estimate_uncertainty``: error map and error correlation of a DEM.

dh = other - dem (the other DEM reprojected on the DEM's grid, lazily), divided by sqrt(2) when
the other DEM has the same precision; the error map from slope and maximum curvature
(:func:`~xdem.spatialstats.infer_heteroscedasticity_from_stable`, approach ``"H2022"``) or one
constant spread (``"R2009"``, ``"Basic"``); the correlation of dh standardised by the errors
(:func:`~xdem.spatialstats.infer_spatial_correlation_from_stable`, a sum of models, one for
``"Basic"``). Out of core as those two functions.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xdem import terrain
from xdem.errors import InputError
from xdem.spatialstats._fields import as_field, stable_values
from xdem.spatialstats.correlation import infer_spatial_correlation_from_stable
from xdem.spatialstats.heterosc import _spread, infer_heteroscedasticity_from_stable
from xdem.spatialstats.upstream import nmad

__all__ = ["estimate_uncertainty"]

APPROACHES = {"H2022": (True, True), "R2009": (False, True), "Basic": (False, False)}


def estimate_uncertainty(
    dem: Any,
    other_elev: Any,
    stable_terrain: object = None,
    approach: str = "H2022",
    precision_of_other: str = "finer",
    spread_estimator: Callable[..., Any] = nmad,
    variogram_estimator: str = "dowd",
    list_vars: Sequence[object] = ("slope", "max_curvature"),
    list_vario_models: str | Sequence[str] = ("gaussian", "spherical"),
    z_name: str = "z",
    random_state: int | None = None,
) -> tuple[Any, Callable[[float | np.ndarray], np.ndarray]]:
    """Error map (a DEM) and spatial correlation function of ``dem``'s errors, as upstream's method."""
    if approach not in APPROACHES:
        raise InputError(f"approach must be one of {sorted(APPROACHES)}, got {approach!r}")
    if precision_of_other not in ("finer", "same"):
        raise InputError(f"precision_of_other must be 'finer' or 'same', got {precision_of_other!r}")
    if type(other_elev).__name__ != "DEM":
        raise InputError(f"other_elev must be an xdem.DEM here (points are not supported yet), "
                         f"got {type(other_elev).__name__}")
    heterosc, multi_range = APPROACHES[approach]
    dh = other_elev.reproject(dem, silent=True) - dem
    if precision_of_other == "same":
        dh = dh / np.sqrt(2)
    if heterosc:
        variables = [terrain.get_terrain_attribute(dem, v) if isinstance(v, str) else v for v in list_vars]
        errors = infer_heteroscedasticity_from_stable(dh, variables, stable_mask=stable_terrain,
                                                      spread_statistic=spread_estimator)[0]
    else:
        field = as_field(dh)
        spread = _spread(spread_estimator)(stable_values(field, stable_terrain, None))
        errors = dh * 0 + spread
    models = [list_vario_models] if isinstance(list_vario_models, str) else list(list_vario_models)
    if not multi_range and len(models) > 1:
        warnings.warn("several variogram models given but this approach uses one range: keeping the first",
                      UserWarning, stacklevel=2)
        models = models[:1]
    corr = infer_spatial_correlation_from_stable(dh, models, stable_mask=stable_terrain, errors=errors,
                                                 estimator=variogram_estimator, random_state=random_state)[2]
    return errors, corr
