"""Masks that cover nothing, found before the fit (part of :func:`xdem.checks.check_inputs`).

Bounds first: a mask whose bounds, brought to REF's CRS, miss REF's covers nothing (a
geographic CRS with coordinates that are no degrees is named: projected coordinates
mis-tagged). Otherwise the mask is burnt (vector, every cell it touches) or resampled (raster
of at most :data:`MAX_RASTER_MASK_READ` pixels, the maximum of each cell; larger ones: bounds
only) on a grid of at most :data:`COVER_SIDE` cells a side over the part of REF it may
cover; the cells it covers, times the pixels of REF per cell, estimate (from above) the
pixels it covers, so a small but real mask is never called empty.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from xdem._check_base import Finding
from xdem.errors import InputError
from xdem.io import remote
from xdem.masks import _VECTOR_SUFFIXES, _read_vector, burn_shapes

if TYPE_CHECKING:  # annotations only
    from xdem.typing import JSONDict

__all__ = ["mask_findings", "mask_coverage", "MIN_INLIER_PIXELS", "COVER_SIDE", "MAX_RASTER_MASK_READ"]

#: An inlier mask (or an exclude mask's complement) covering fewer pixels of REF than this is an error.
MIN_INLIER_PIXELS = 100
#: Largest side of the grid a mask's coverage is counted on.
COVER_SIDE = 256
#: Raster masks of more pixels are checked by their bounds only (a count would read them whole).
MAX_RASTER_MASK_READ = 4096 * 4096


def _bounds_in(bounds: tuple[float, ...], crs: Any, target: Any) -> tuple[float, ...] | None:
    from rasterio.warp import transform_bounds

    if crs == target:
        return tuple(bounds)
    try:
        out = transform_bounds(crs, target, *bounds)
    except Exception:  # noqa: BLE001 - PROJ refuses coordinates outside the CRS's domain
        return None
    return tuple(out) if all(math.isfinite(v) for v in out) else None


def _coarse_grid(src: Any, box: tuple[float, ...]) -> tuple[Any, tuple[int, int], int] | None:
    """Transform, shape and pixels-per-cell side of a grid of at most :data:`COVER_SIDE` cells a
    side over the part ``box`` of the open raster ``src``; ``None`` if ``box`` misses it."""
    from affine import Affine
    from rasterio.windows import Window, from_bounds

    raw = from_bounds(*box, transform=src.transform)
    c0, r0 = math.floor(raw.col_off), math.floor(raw.row_off)
    c1, r1 = math.ceil(raw.col_off + raw.width), math.ceil(raw.row_off + raw.height)
    try:
        win = Window(c0, r0, c1 - c0, r1 - r0).intersection(Window(0, 0, src.width, src.height))
    except Exception:  # noqa: BLE001 - rasterio.errors.WindowError: no intersection
        return None
    if win.width < 1 or win.height < 1:
        return None
    k = max(1, math.ceil(max(win.width, win.height) / COVER_SIDE))
    shape = (math.ceil(win.height / k), math.ceil(win.width / k))
    transform = src.transform * Affine.translation(win.col_off, win.row_off) * Affine.scale(k, k)
    return transform, shape, k


def _mask_extent(path: str) -> tuple[Any, tuple[float, ...], Any]:
    """``(crs, bounds, reader)`` of a mask file; ``reader(transform, shape, crs)`` burns it on a
    grid (``None``: too large to read)."""
    import rasterio

    if remote.suffix(path) in _VECTOR_SUFFIXES:
        gdf = _read_vector(path)

        def burn(transform: Any, shape: tuple[int, int], crs: Any) -> np.ndarray:
            geoms = [g for g in gdf.to_crs(crs).geometry if g is not None and not g.is_empty]
            if not geoms:
                return np.zeros(shape, dtype=bool)
            return burn_shapes([(g, 1) for g in geoms], out_shape=shape, transform=transform, all_touched=True,
                               dtype="uint8").astype(bool)

        return gdf.crs, tuple(float(v) for v in gdf.total_bounds), burn

    with rasterio.open(path) as src:
        crs, bounds, pixels = src.crs, tuple(src.bounds), src.width * src.height

    def resample(transform: Any, shape: tuple[int, int], target: Any) -> np.ndarray | None:
        from rasterio.enums import Resampling
        from rasterio.vrt import WarpedVRT

        if pixels > MAX_RASTER_MASK_READ:
            return None  # too large to read for a check: its bounds only
        with rasterio.open(path) as src, WarpedVRT(src, crs=target, transform=transform, width=shape[1],
                                                   height=shape[0], resampling=Resampling.max) as vrt:
            data = vrt.read(1, masked=True).astype(np.float64).filled(0)
        return (data != 0) & np.isfinite(data)

    return crs, bounds, resample


def mask_coverage(mask: str | os.PathLike, reference: str | os.PathLike) -> JSONDict:
    """About how many pixels of the ``reference`` DEM file the ``mask`` file covers.

    Returns
    -------
    dict
        ``covered`` (estimated pixels), ``total`` (REF's pixels), ``overlaps`` (the bounds
        intersect REF's), ``mask_bounds`` and
        ``mask_crs``, ``ref_bounds`` and ``ref_crs``, ``not_degrees`` (a geographic CRS with
        coordinates outside longitudes and latitudes).

    Examples
    --------
    >>> import xdem
    >>> lidar = xdem.examples.get_path("lidar")
    >>> c = mask_coverage(lidar, lidar)
    >>> c["covered"] == c["total"] == 160000
    True
    """
    import rasterio

    path = remote.gdal_path(mask)  # a URL as GDAL reads it (/vsis3/, /vsicurl/...); a local path unchanged
    crs, bounds, burn = _mask_extent(path)
    with rasterio.open(remote.gdal_path(reference)) as src:
        ref_crs, total = src.crs, src.width * src.height
        out: dict[str, Any] = {"covered": 0, "total": total, "mask_bounds": bounds,
                               "mask_crs": None if crs is None else crs.to_string(),
                               "ref_bounds": tuple(src.bounds), "ref_crs": ref_crs.to_string(), "not_degrees": False,
                               "overlaps": False}
        if crs is None:
            return {**out, "covered": None}  # refused with its own message when the mask is read
        geographic = getattr(crs, "is_geographic", False)
        out["not_degrees"] = bool(geographic and not (-360 <= bounds[0] <= bounds[2] <= 360
                                                      and -90 <= bounds[1] <= bounds[3] <= 90))
        box = None if out["not_degrees"] else _bounds_in(bounds, crs, ref_crs)
        grid = None if box is None else _coarse_grid(src, box)
    if grid is not None:
        out["overlaps"] = True
        transform, shape, k = grid
        burnt = burn(transform, shape, ref_crs)
        out["covered"] = None if burnt is None else int(min(total, burnt.sum() * k * k))
    return out


def _fmt(bounds: tuple[float, ...]) -> str:
    return "(" + ", ".join(f"{v:.1f}" if abs(v) >= 1000 else f"{v:.6g}" for v in bounds) + ")"


def mask_findings(reference: str | os.PathLike, *, inlier_mask: str | os.PathLike | None = None,
                  exclude_mask: str | os.PathLike | None = None) -> list[Finding]:
    """A warning for an exclude mask covering no pixel of REF, an error for an inlier mask
    covering fewer than :data:`MIN_INLIER_PIXELS` (or an exclude mask leaving fewer)."""
    out = []
    for kind, mask in (("inlier", inlier_mask), ("exclude", exclude_mask)):
        if not isinstance(mask, (str, os.PathLike)):
            continue
        try:
            c = mask_coverage(mask, reference)
        except InputError:
            raise
        except Exception:  # noqa: BLE001 - unreadable: reading the mask for the fit says how, in one line
            continue
        covered, total = c["covered"], c["total"]
        if covered is None:
            continue
        where = (f"mask bounds {_fmt(c['mask_bounds'])} in {c['mask_crs']}, REF bounds {_fmt(c['ref_bounds'])} in "
                 f"{c['ref_crs']}")
        hint = (f"; its coordinates are no degrees although its CRS is {c['mask_crs']}: probably {c['ref_crs']} or "
                "another projected CRS mis-tagged, set the right one (e.g. ogr2ogr -a_srs EPSG:XXXX)"
                if c["not_degrees"] else "; check its CRS and that it is the mask of this area")
        what = (f"the {kind} mask '{remote.redact(os.fspath(mask))}' "
                + (f"covers about {covered}" if c["overlaps"] else "does not overlap REF: it covers 0")
                + f" of REF's {total} pixels ({where})")
        details = {"covered": covered, "total": total, "mask_bounds": list(c["mask_bounds"]),
                   "ref_bounds": list(c["ref_bounds"])}
        if kind == "inlier" and covered < MIN_INLIER_PIXELS:
            out.append(Finding("mask_coverage", "error", "inlier_mask", f"{what}: too few stable pixels to fit{hint}",
                               details))
        elif kind == "exclude" and covered == 0:
            out.append(Finding("mask_coverage", "warning", "exclude_mask", f"{what}: nothing is excluded{hint}",
                               details))
        elif kind == "exclude" and total - covered < MIN_INLIER_PIXELS:
            out.append(Finding("mask_coverage", "error", "exclude_mask",
                               f"{what}: it excludes (about) every pixel, too few are left to fit{hint}", details))
    return out
