"""The bundled example files and the default misalignment of :mod:`xdem.examples` (light: no
rasterio, no xarray, so that ``xdem examples --help`` starts fast)."""

from __future__ import annotations

from pathlib import Path

from xdem.errors import InputError

__all__ = ["get_path", "available", "DEFAULT_SHIFT", "UPSTREAM_EXAMPLES", "get_all_data", "get_path_test",
           "download_longyearbyen_examples"]

_DATA = Path(__file__).resolve().parent / "data"
_FILES = {
    "lidar": "lidar_dem.tif",
    # stand-ins for upstream's Longyearbyen files (see xdem.examples.standins)
    "lidar_ref_dem": "lidar_dem.tif",
    "lidar_tba_dem": "lidar_tba_dem.tif",
    "lidar_outlines": "lidar_outlines.gpkg",
    "lidar_outlines_2010": "lidar_outlines_2010.gpkg",
    "lidar_tba_dem_coreg": "lidar_tba_dem_coreg.tif",
    "lidar_ddem": "lidar_ddem.tif",
}

#: Default displacement ``(dx, dy, dz)`` in metres applied to make the example ``tba``.
DEFAULT_SHIFT = (3.27, -1.64, 2.5)


#: GlacioHack/xdem 0.2.3's example names (downloaded there from xdem-data; not bundled here).
UPSTREAM_EXAMPLES = (
    "longyearbyen_ref_dem", "longyearbyen_tba_dem", "longyearbyen_glacier_outlines",
    "longyearbyen_glacier_outlines_2010", "longyearbyen_epc", "giza_dem", "longyearbyen_ddem",
    "longyearbyen_tba_dem_coreg",
)


def _offline(what: str) -> InputError:
    return InputError(
        f"{what} is upstream xdem's example data, downloaded there from GitHub: it is not bundled here and nothing "
        f"is downloaded; use the bundled {', '.join(repr(n) for n in available())} (xdem.examples.get_path) or "
        "xdem.examples.write_example_pair(directory) for a DEM pair with a known shift"
    )


def available() -> list[str]:
    """Names accepted by :func:`get_path`."""
    return sorted(_FILES)


def get_path(name: str = "lidar", output_dir: str | None = None, overwrite: bool = False) -> Path:
    """Path of a bundled example file.

    Parameters
    ----------
    name
        ``"lidar"``: a 400 x 400, 1 m bare-earth lidar DEM of Minnesota (EPSG:26915), from the
        PyPI package ``lidar`` 0.8.4 (MIT licence, see ``data/lidar_LICENSE.txt``).
        ``"lidar_ref_dem"``, ``"lidar_tba_dem"``, ``"lidar_outlines"``: the stand-ins for
        upstream's ``"longyearbyen_ref_dem"``, ``"longyearbyen_tba_dem"`` and
        ``"longyearbyen_glacier_outlines"`` (the lidar DEM; a copy moved by
        :data:`DEFAULT_SHIFT` and lowered inside the outlines; three made-up outlines), with
        their truth in :mod:`xdem.examples.standins`; ``"lidar_outlines_2010"``,
        ``"lidar_tba_dem_coreg"`` and ``"lidar_ddem"`` stand in for
        ``"longyearbyen_glacier_outlines_2010"``, ``"longyearbyen_tba_dem_coreg"`` and
        ``"longyearbyen_ddem"`` (shrunk outlines; the coregistered copy with known errors; their
        difference). Upstream's
        names (:data:`UPSTREAM_EXAMPLES`, e.g. ``"longyearbyen_ref_dem"``) raise one line saying
        the data is not bundled and naming the alternatives.
    output_dir, overwrite
        Upstream's download options: accepted, unused (nothing is downloaded).

    Raises
    ------
    xdem.errors.InputError
        An upstream example name, or an unknown name.

    Examples
    --------
    >>> from xdem.examples import get_path
    >>> get_path("lidar").name
    'lidar_dem.tif'
    """
    if name in UPSTREAM_EXAMPLES:
        raise _offline(f"{name!r}")
    if name not in _FILES:
        raise InputError(f"unknown example {name!r}; choose one of {available()}")
    return _DATA / _FILES[name]


def get_all_data(output_dir: str | None = None) -> str:
    """Upstream's download of all its example data: not available offline; raises one clear line.

    Examples
    --------
    >>> get_all_data()
    Traceback (most recent call last):
    ...
    xdem.errors.InputError: all of upstream's examples is upstream xdem's example data, ...
    """
    raise _offline("all of upstream's examples")


def get_path_test(name: str, output_dir: str | None = None) -> str:
    """Upstream's cropped test data: not available offline; raises one clear line."""
    raise _offline(f"the test crop of {name!r}")


def download_longyearbyen_examples(overwrite: bool = False) -> None:
    """Upstream's (before 0.2) download of the Longyearbyen data: not available offline; raises."""
    raise _offline("the Longyearbyen data")
