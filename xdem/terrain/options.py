"""The options of the terrain attributes, checked once, as one immutable value."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TypedDict, cast

from xdem.errors import InputError
from xdem.terrain import fits as F
from xdem.terrain import kernels as K

__all__ = ["TerrainOptions", "TerrainKwargs", "SLOPE_UNITS", "ASPECT_UNITS", "TRI_ALGORITHMS"]


class TerrainKwargs(TypedDict):
    """:meth:`TerrainOptions.kwargs`: the keyword arguments of :func:`xdem.terrain.get_terrain_attribute`."""

    method: str
    slope_units: str
    aspect_units: str
    azimuth: float
    altitude: float
    z_factor: float
    tri_algorithm: str
    window_size: int

#: Accepted units of the slope.
SLOPE_UNITS = ("degrees", "percent", "radians")
#: Accepted units of the aspect.
ASPECT_UNITS = ("degrees", "radians")
#: Accepted TRI algorithms (gdaldem's ``-alg``).
TRI_ALGORITHMS = ("riley", "wilson")


@dataclass(frozen=True)
class TerrainOptions:
    """Options of :func:`xdem.terrain.get_terrain_attribute`, checked and normalised.

    Building one checks the units, the TRI algorithm and the method (in that order,
    :class:`~xdem.errors.InputError` when unknown) and stores the canonical method name,
    the lower-case TRI algorithm and float light parameters. ``window_size`` is checked
    only where it is used (TPI and roughness).

    Attributes
    ----------
    method
        Surface fit for slope, aspect and hillshade: ``"horn"``, ``"zevenbergthorne"`` or
        ``"florinsky"`` (Florinsky's 5 x 5 fit, :mod:`xdem.terrain.fits`).
    slope_units, aspect_units
        ``"degrees"``, ``"percent"`` (slope only) or ``"radians"``.
    azimuth, altitude, z_factor
        Hillshade light direction (degrees clockwise from north), elevation (degrees) and
        vertical exaggeration.
    tri_algorithm
        ``"riley"`` or ``"wilson"``.
    window_size
        Odd window side for TPI and roughness.

    Examples
    --------
    >>> opts = TerrainOptions(method="Horn", tri_algorithm="Wilson")
    >>> opts.method, opts.tri_algorithm, opts.window_size
    ('horn', 'wilson', 3)
    >>> sorted(opts.kwargs())[:3]
    ['altitude', 'aspect_units', 'azimuth']
    """

    method: str = "horn"
    slope_units: str = "degrees"
    aspect_units: str = "degrees"
    azimuth: float = 315.0
    altitude: float = 45.0
    z_factor: float = 1.0
    tri_algorithm: str = "riley"
    window_size: int = 3

    def __post_init__(self) -> None:
        if self.slope_units not in SLOPE_UNITS:
            raise InputError(f"unknown slope units {self.slope_units!r}; use one of {', '.join(SLOPE_UNITS)}")
        if self.aspect_units not in ASPECT_UNITS:
            raise InputError(f"unknown aspect units {self.aspect_units!r}; use one of {', '.join(ASPECT_UNITS)}")
        if str(self.tri_algorithm).lower() not in TRI_ALGORITHMS:
            raise InputError(f"unknown TRI algorithm {self.tri_algorithm!r}; use 'riley' or 'wilson'")
        set_ = object.__setattr__
        set_(self, "method", F.normalise_fit(self.method))
        set_(self, "tri_algorithm", str(self.tri_algorithm).lower())
        for name in ("azimuth", "altitude", "z_factor"):
            set_(self, name, float(getattr(self, name)))

    def kwargs(self) -> TerrainKwargs:
        """The options as keyword arguments of :func:`xdem.terrain.get_terrain_attribute`."""
        # the dataclass's fields are TerrainKwargs' keys, with the same types
        return cast(TerrainKwargs, {f.name: getattr(self, f.name) for f in dataclasses.fields(self)})

    def window_depth(self, name: str) -> int:
        """Padding, in pixels, that attribute ``name`` (canonical) needs around a block."""
        if name in ("topographic_position_index", "roughness"):
            return K._check_window(self.window_size)
        if name in ("slope", "aspect", "hillshade"):
            return F.fit_depth(self.method)
        return 1
