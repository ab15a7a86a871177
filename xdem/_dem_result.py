"""Recognise an upstream-style :class:`xdem.DEM` without importing :mod:`xdem.dem`.

:mod:`xdem.dem` subclasses :class:`geoutils.Raster`: importing it imports geoutils, scipy.stats,
odc.geo and xdem's spatial statistics, about 0.3 s of CPU that a run on files or DataArrays
(``xdem coreg``) never uses. No DEM exists before :mod:`xdem.dem` is imported, so
:func:`is_dem` looks the class up among the imported modules instead of importing it.

Examples
--------
>>> import numpy as np
>>> is_dem(np.zeros(3))
False
>>> import xdem
>>> is_dem(xdem.DEM(xdem.examples.get_path("lidar")))
True
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, ParamSpec, TypeGuard, TypeVar

import geopandas as gpd
import xarray as xr

if TYPE_CHECKING:
    from xdem.dem import DEM

__all__ = ["is_dem", "returns_dem_for_dem"]

P = ParamSpec("P")
R = TypeVar("R")


def is_dem(value: object) -> TypeGuard[DEM]:
    """Whether ``value`` is an :class:`xdem.DEM` (``False`` while :mod:`xdem.dem` is not imported)."""
    module = sys.modules.get("xdem.dem")
    return module is not None and isinstance(value, module.DEM)


def returns_dem_for_dem(method: Callable[P, R]) -> Callable[P, R]:
    """Decorate ``Coreg.apply``: given a :class:`~xdem.DEM` (its first argument after ``self``), the
    result is a DEM too (with the input's nodata value); given points (a GeoDataFrame), they are
    moved by ``Coreg.apply_points`` (elevations: the geometries' z, else the column ``"z"``) as
    upstream's ``apply`` does; anything else is returned as it is."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        given = args[1] if len(args) > 1 else kwargs.get("dem", kwargs.get("elev"))
        if isinstance(given, gpd.GeoDataFrame):
            bias_vars = args[2] if len(args) > 2 else kwargs.get("bias_vars")
            moved = args[0].apply_points(given, bias_vars=bias_vars)  # type: ignore[attr-defined]
            return moved
        out = method(*args, **kwargs)
        if is_dem(given) and isinstance(out, xr.DataArray):
            return given._like(out)
        return out

    return wrapper
