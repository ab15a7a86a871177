"""Vertical CRSs of DEMs: which surface heights are measured from, and converting between them, lazily.

A DEM's heights are above an ellipsoid (``"Ellipsoid"``: GNSS, ICESat-2, ArcticDEM, most
satellite stereo DEMs) or above a geoid (``"EGM96"``, ``"EGM08"``: SRTM, Copernicus DEM...).
The geoid is N metres above the ellipsoid (the undulation, -107 to +86 m on Earth), so a
geoid height H and an ellipsoid height h of the same point are related by ``h = H + N``.

Converting is lazy (:func:`convert_heights`): a dask ``map_blocks`` whose kernel
(:mod:`xdem.kernels.geoid`) computes each chunk's pixel centres' longitude and latitude and N
there with PROJ (its ``vgridshift`` on the geoid grid file, found on disk by
:func:`find_grid`; nothing is ever downloaded). Values are those of any chunking.

Accepted values (:func:`parse_vcrs`, as upstream xdem 0.2.3's): ``"Ellipsoid"`` (or
``"WGS84"``, EPSG 4326/4979), ``"EGM96"``, ``"EGM08"``, a geoid grid file (a name found in
the grid folders, or a path), a vertical :class:`pyproj.CRS` or its EPSG code (5773: EGM96
height, 3855: EGM2008 height).

Examples
--------
>>> v = parse_vcrs("EGM96")
>>> v.crs.to_epsg(), v.grid
(5773, 'us_nga_egm96_15.tif')
>>> parse_vcrs(3855).name
'EGM2008 height'
>>> parse_vcrs("Ellipsoid").crs
'Ellipsoid'
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import dask.array as da
import numpy as np
import pyproj
import xarray as xr
from pyproj.crs import CompoundCRS, VerticalCRS

from xdem.errors import InputError
from xdem.io.vertical import vertical_part
from xdem.kernels.geoid import INTERPOLATIONS, undulation_block

__all__ = ["VerticalRef", "parse_vcrs", "find_grid", "grid_dirs", "available_grids", "geoid_undulation",
           "convert_heights", "compound_crs", "vcrs_of_crs", "GRIDS", "INTERPOLATIONS"]

#: The geoid models known by name: their EPSG vertical CRS and PROJ's grid file names
#: (the current GeoTIFF name first, then the older .gtx one; either is used).
GRIDS: dict[str, tuple[int, tuple[str, ...], str]] = {
    "EGM96": (5773, ("us_nga_egm96_15.tif", "egm96_15.gtx"), "EGM96 height"),
    "EGM08": (3855, ("us_nga_egm08_25.tif", "egm08_25.gtx"), "EGM2008 height"),
}
_ELLIPSOID_NAMES = ("ellipsoid", "wgs84")
VcrsInput = str | os.PathLike[str] | pyproj.CRS | int


@dataclass(frozen=True)
class VerticalRef:
    """A parsed vertical CRS: ``crs`` (a vertical :class:`pyproj.CRS`, or ``"Ellipsoid"``),
    ``grid`` (the geoid grid file to convert with, a name or a path; ``None`` for the
    ellipsoid or a vertical CRS whose grid is not known here) and ``name``."""

    crs: pyproj.CRS | Literal["Ellipsoid"]
    grid: str | None
    name: str

    @property
    def is_ellipsoid(self) -> bool:
        return isinstance(self.crs, str)


def _env_dirs() -> list[str]:
    out = [os.environ.get("XDEM_GRIDS_DIR", "")]
    for var in ("PROJ_DATA", "PROJ_LIB"):
        out += os.environ.get(var, "").split(os.pathsep)
    return out


def _pyproj_dirs() -> list[str]:
    return [*pyproj.datadir.get_data_dir().split(os.pathsep), pyproj.datadir.get_user_data_dir()]


def _system_dirs() -> list[str]:
    return ["/usr/share/proj"]


def _dem_stitcher_dirs() -> list[str]:
    spec = importlib.util.find_spec("dem_stitcher")  # found, not imported
    if spec is None or not spec.submodule_search_locations:
        return []
    return [os.path.join(loc, "data") for loc in spec.submodule_search_locations]


#: Where :func:`grid_dirs` looks, in order: $XDEM_GRIDS_DIR, $PROJ_DATA / $PROJ_LIB, pyproj's
#: data folder and user data folder, /usr/share/proj (Debian's proj-data), dem_stitcher's data.
SEARCH_PLACES: list[Callable[[], list[str]]] = [_env_dirs, _pyproj_dirs, _system_dirs, _dem_stitcher_dirs]


def grid_dirs() -> list[str]:
    """The folders searched for geoid grids, in order (existing ones only, no repeats).

    Examples
    --------
    >>> all(os.path.isdir(d) for d in grid_dirs())
    True
    """
    seen: list[str] = []
    for place in SEARCH_PLACES:
        for d in place():
            if d and os.path.isdir(d) and os.path.abspath(d) not in seen:
                seen.append(os.path.abspath(d))
    return seen


def _aliases(grid: str) -> tuple[str, ...]:
    name = os.path.basename(grid)
    return next((names for _, names, _ in GRIDS.values() if name in names), (name,))


def find_grid(grid: str | os.PathLike[str]) -> str:
    """The absolute path of a geoid grid file: ``grid`` itself if it is a path (with a folder,
    e.g. ``./my_geoid.tif``), else the first of its PROJ names (e.g. ``us_nga_egm96_15.tif`` or
    ``egm96_15.gtx``) found in :func:`grid_dirs`.

    Raises
    ------
    InputError
        One line naming the file, the folders searched and how to get it.

    Examples
    --------
    >>> find_grid("egm96_15.gtx").endswith(("egm96_15.gtx", "us_nga_egm96_15.tif"))
    True
    """
    text = os.fspath(grid)
    if os.path.dirname(text):  # a path (./name for the current folder): that file only
        if not os.path.isfile(text):
            raise InputError(f"geoid grid file '{text}' does not exist: give an existing file, or a bare grid name "
                             "(e.g. us_nga_egm96_15.tif) to look for it in the grid folders")
        return os.path.abspath(text)
    names, dirs = _aliases(text), grid_dirs()
    for d in dirs:
        for name in names:
            if os.path.isfile(os.path.join(d, name)):
                return os.path.join(d, name)
    main = names[0]
    raise InputError(
        f"geoid grid '{main}' not found (also looked for {', '.join(names[1:]) or 'no other name'}) in "
        f"{', '.join(dirs) or 'no existing folder'}: download it from https://cdn.proj.org/{main} (or run "
        f"`projsync --file {main}`) into one of these folders or a folder named by $XDEM_GRIDS_DIR")


def available_grids() -> dict[str, str | None]:
    """The path of each known geoid model's grid (``None`` if not found), e.g. for ``xdem info``."""
    out: dict[str, str | None] = {}
    for model, (_, names, _) in GRIDS.items():
        try:
            out[model] = find_grid(names[0])
        except InputError:
            out[model] = None
    return out


def _from_crs(crs: pyproj.CRS) -> VerticalRef:
    epsg = crs.to_epsg()
    if epsg in (4326, 4979):
        return VerticalRef("Ellipsoid", None, "Ellipsoid")
    if not crs.is_vertical:
        raise InputError(f"'{crs.name}' is not a vertical CRS: give 'Ellipsoid', 'EGM96', 'EGM08', a geoid grid "
                         "file or a vertical CRS (e.g. EPSG 5773)")
    if crs.is_compound or len(crs.axis_info) > 1:
        vert = vcrs_of_crs(crs)
        if vert is None or isinstance(vert.crs, str):
            raise InputError(f"'{crs.name}' has no vertical part: give a vertical CRS")
        return vert
    grid = next((names[0] for e, names, n in GRIDS.values() if epsg == e or crs.name == n), None)
    return VerticalRef(crs, grid, crs.name)


def _from_grid(grid: str) -> VerticalRef:
    name = os.path.basename(grid)
    for model, (epsg, names, _) in GRIDS.items():
        if name in names:
            return VerticalRef(pyproj.CRS.from_epsg(epsg), grid, GRIDS[model][2])
    vert = VerticalCRS(name=f"unknown using geoidgrids={name}", datum=f'VDATUM["unknown using geoidgrids={name}"]')
    return VerticalRef(vert, grid, vert.name)


def parse_vcrs(value: VcrsInput | VerticalRef) -> VerticalRef:
    """A vertical CRS as a :class:`VerticalRef` (see the module for the accepted values).

    Raises
    ------
    InputError
        An unknown name, a CRS without a vertical axis, another type.
    """
    if isinstance(value, VerticalRef):
        return value
    if isinstance(value, bool) or not isinstance(value, (str, os.PathLike, pyproj.CRS, int)):
        raise InputError(f"vcrs must be 'Ellipsoid', 'EGM96', 'EGM08', a geoid grid file, a vertical pyproj CRS or "
                         f"an EPSG code, got {type(value).__name__}")
    if isinstance(value, int):
        try:
            return _from_crs(pyproj.CRS.from_epsg(value))
        except pyproj.exceptions.CRSError:
            raise InputError(f"vcrs EPSG:{value} is not a known CRS: give e.g. 5773 (EGM96) or 3855 (EGM2008)") from None
    if isinstance(value, pyproj.CRS):
        return _from_crs(value)
    text = os.fspath(value)
    if text.lower() in _ELLIPSOID_NAMES:
        return VerticalRef("Ellipsoid", None, "Ellipsoid")
    if text.upper() in GRIDS:
        epsg, names, name = GRIDS[text.upper()]
        return VerticalRef(pyproj.CRS.from_epsg(epsg), names[0], name)
    if os.path.splitext(text)[1].lower() in (".tif", ".tiff", ".gtx"):
        return _from_grid(text)
    raise InputError(f"vcrs '{text}' is not recognised: give 'Ellipsoid', 'EGM96', 'EGM08', a geoid grid file "
                     "(.tif, .gtx), a vertical pyproj CRS or an EPSG code (5773, 3855)")


def vcrs_of_crs(crs: object) -> VerticalRef | None:
    """The vertical CRS a (compound or 3-D) CRS declares, ``None`` if it declares none.

    Examples
    --------
    >>> vcrs_of_crs("EPSG:32633+5773").name
    'EGM96 height'
    >>> vcrs_of_crs("EPSG:4979").crs, vcrs_of_crs("EPSG:32633")
    ('Ellipsoid', None)
    """
    if crs is None:
        return None
    pc = pyproj.CRS.from_user_input(crs.to_wkt() if hasattr(crs, "to_wkt") else crs)
    sub = vertical_part(pc)
    if sub is not None:
        return _from_crs(sub)
    if len(pc.axis_info) > 2:
        return VerticalRef("Ellipsoid", None, "Ellipsoid")
    return None


def compound_crs(crs: object, vcrs: VerticalRef) -> pyproj.CRS:
    """The compound CRS of a horizontal CRS and a vertical one (a 3-D CRS for the ellipsoid)."""
    horizontal = pyproj.CRS.from_user_input(crs.to_wkt() if hasattr(crs, "to_wkt") else crs).to_2d()
    if isinstance(vcrs.crs, str):
        return horizontal.to_3d()
    return CompoundCRS(name=f"{horizontal.name} + {vcrs.name}", components=[horizontal, vcrs.crs])


def _grid_of(v: VerticalRef, role: str) -> str:
    if v.grid is None:
        raise InputError(f"no geoid grid is known for the {role} vertical CRS '{v.name}': give its PROJ grid file "
                         "instead (e.g. vcrs='us_noaa_g2018u0.tif'), or 'Ellipsoid', 'EGM96', 'EGM08'")
    path = find_grid(v.grid)
    if "," in path or '"' in path:
        raise InputError(f"geoid grid path '{path}' holds a comma or a double quote, which PROJ cannot take: copy or "
                         "link the grid into a folder without them (e.g. set $XDEM_GRIDS_DIR to it)")
    return path


def _shift_field(arr: xr.DataArray, grids: tuple[tuple[str, float], ...], interpolation: str) -> xr.DataArray:
    """The lazy float64 field of ``sum(sign * N_grid)`` on ``arr``'s grid and chunks."""
    if interpolation not in INTERPOLATIONS:
        raise InputError(f"geoid interpolation must be one of {', '.join(INTERPOLATIONS)}, got {interpolation!r}")
    if arr.rio.crs is None:
        raise InputError("the DEM has no CRS: its pixels' longitudes and latitudes are unknown; set one first")
    t, wkt = tuple(arr.rio.transform())[:6], arr.rio.crs.to_wkt()
    data = arr.data if isinstance(arr.data, da.Array) else da.from_array(np.asarray(arr.data), chunks=arr.shape)

    def block(x: np.ndarray, block_info: dict | None = None) -> np.ndarray:
        assert block_info is not None
        (r0, _), (c0, _) = block_info[0]["array-location"]
        return undulation_block(x.shape, (r0, c0), transform=t, crs_wkt=wkt, grids=grids,
                                interpolation=interpolation)

    field = da.map_blocks(block, data, dtype=np.float64, meta=np.array((), dtype=np.float64))
    return arr.copy(data=field)


def geoid_undulation(arr: xr.DataArray, *, vcrs: VcrsInput | VerticalRef = "EGM96",
                     interpolation: Literal["bilinear", "spline"] = "bilinear") -> xr.DataArray:
    """The geoid undulation N (metres above the ellipsoid) at the pixel centres of ``arr``, lazily.

    ``interpolation="bilinear"`` is PROJ's (``vgridshift``, what GDAL and upstream xdem give);
    ``"spline"`` is NGA's bicubic spline through the 6 x 6 nodes around each point (the EGM
    distribution's own interpolation: within 3 mm of NGA's published EGM96 test values, where
    bilinear is up to 5.6 cm away; :func:`xdem.kernels.geoid.spline_undulation`).

    Examples
    --------
    >>> import xdem
    >>> dem = xdem.open_dem(xdem.examples.get_path("lidar"), chunks=200)
    >>> n = geoid_undulation(dem, vcrs="EGM96")
    >>> -40 < float(n.mean()) < -20  # Minnesota: the geoid is about 30 m below the ellipsoid
    True
    """
    v = parse_vcrs(vcrs)
    return _shift_field(arr, ((_grid_of(v, "given"), 1.0),), interpolation)


def convert_heights(arr: xr.DataArray, *, source: VcrsInput | VerticalRef, target: VcrsInput | VerticalRef,
                    interpolation: Literal["bilinear", "spline"] = "bilinear") -> xr.DataArray:
    """Heights of ``arr`` in vertical CRS ``source`` as heights in ``target``, lazily.

    ``interpolation`` of the geoid grids as in :func:`geoid_undulation`.

    ``H = h - N`` (ellipsoid to geoid), ``h = H + N`` (back), geoid to geoid through the
    ellipsoid. The arithmetic is in float64; the result has ``arr``'s dtype (float32 DEMs
    stay float32, rounded to about 1e-5 m at 300 m). NaN stays NaN, and so do pixels outside
    the grid.

    Examples
    --------
    >>> import xdem
    >>> dem = xdem.open_dem(xdem.examples.get_path("lidar"), chunks=200)
    >>> back = convert_heights(convert_heights(dem, source="Ellipsoid", target="EGM96"),
    ...                        source="EGM96", target="Ellipsoid")
    >>> float(abs(back - dem).max()) < 1e-4
    True
    """
    src, dst = parse_vcrs(source), parse_vcrs(target)
    grids: list[tuple[str, float]] = []
    if not src.is_ellipsoid:
        grids.append((_grid_of(src, "source"), 1.0))
    if not dst.is_ellipsoid:
        grids.append((_grid_of(dst, "target"), -1.0))
    if len(grids) == 2 and grids[0][0] == grids[1][0]:
        grids = []
    shift = _shift_field(arr, tuple(grids), interpolation)
    out = (arr.astype(np.float64) + shift).astype(arr.dtype)
    out.attrs, out.name = dict(arr.attrs), arr.name
    return out.rio.write_crs(arr.rio.crs).rio.write_transform(arr.rio.transform())
