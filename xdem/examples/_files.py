"""The bundled example files and the default misalignment of :mod:`xdem.examples` (light: no
rasterio, no xarray, so that ``xdem examples --help`` starts fast)."""

from __future__ import annotations

from pathlib import Path

from xdem.errors import InputError

__all__ = ["get_path", "available", "DEFAULT_SHIFT"]

_DATA = Path(__file__).resolve().parent / "data"
_FILES = {"lidar": "lidar_dem.tif"}

#: Default displacement ``(dx, dy, dz)`` in metres applied to make the example ``tba``.
DEFAULT_SHIFT = (3.27, -1.64, 2.5)


def available() -> list[str]:
    """Names accepted by :func:`get_path`."""
    return sorted(_FILES)


def get_path(name: str = "lidar") -> Path:
    """Path of a bundled example file.

    Parameters
    ----------
    name
        ``"lidar"``: a 400 x 400, 1 m bare-earth lidar DEM of Minnesota (EPSG:26915), from the
        PyPI package ``lidar`` 0.8.4 (MIT licence, see ``data/lidar_LICENSE.txt``).

    Examples
    --------
    >>> from xdem.examples import get_path
    >>> get_path("lidar").name
    'lidar_dem.tif'
    """
    if name not in _FILES:
        raise InputError(f"unknown example {name!r}; choose one of {available()}")
    return _DATA / _FILES[name]
