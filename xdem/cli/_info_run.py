"""The run of ``xdem info`` (:mod:`xdem.cli.info` is the light command; this module imports
rasterio, xarray and the I/O stack, once the command line has parsed)."""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
import rasterio
import xarray as xr
from pyproj import CRS

from xdem.io.open import open_dem
from xdem.io.vertical import file_crs, vertical_crs
from xdem.io.zarr_store import is_zarr_path
from xdem.points import is_points_source, read_points
from xdem.stats import robust_summary

__all__ = ["run_info", "describe"]


def _crs_text(crs: Any) -> dict:
    if crs is None:
        return {"crs": None, "crs_name": None, "projected": None, "units": None}
    pc = CRS.from_user_input(crs)
    epsg = crs.to_epsg()
    axis_units = {a.unit_name for a in pc.axis_info}
    return {
        "crs": f"EPSG:{epsg}" if epsg else crs.to_string(),
        "crs_name": pc.name,
        "projected": bool(pc.is_projected),
        "units": ", ".join(sorted(axis_units)) or None,
    }


def describe(
    path: str | Path, *, band: int | None = None, chunks: int | tuple[int, int] | str = "auto", stats: bool = True,
) -> dict:
    """Metadata and (optionally) exact robust statistics of one band of a DEM file.

    Statistics are computed out of core with :func:`xdem.stats.robust_summary` (three or
    so passes over the data; memory bounded by the chunk size).

    Raises
    ------
    xdem.errors.InputError, xdem.errors.CRSError
        As :func:`xdem.open_dem`.
    xdem.errors.NotEnoughDataError
        ``stats=True`` and the band has no valid pixel.

    Examples
    --------
    >>> from xdem.examples import get_path
    >>> describe(get_path("lidar"), stats=False)["size"]
    [400, 400]
    """
    dem = open_dem(path, band=band, chunks=chunks)
    dem_chunks = dem.chunks
    if dem_chunks is None:  # cannot happen: open_dem always returns a dask-backed DEM
        raise TypeError(f"open_dem returned a numpy-backed DEM for '{path}'")
    bidx = band or 1
    if is_zarr_path(path):
        meta = _zarr_meta(path, dem)
        if stats:
            meta["stats"] = robust_summary(dem.data)
        return meta
    with rasterio.open(path) as src:
        nodata = src.nodatavals[bidx - 1]
        meta = {
            "path": str(path),
            "driver": src.driver,
            "band": bidx,
            "bands": src.count,
            "size": [src.width, src.height],
            "resolution": [abs(src.transform.a), abs(src.transform.e)],
            "transform": list(src.transform)[:6],
            "bounds": list(src.bounds),
            "nodata": None if nodata is None else (None if math.isnan(nodata) else float(nodata)),
            "nodata_is_nan": nodata is not None and math.isnan(nodata),
            "file_dtype": src.dtypes[bidx - 1],
            "dtype": str(dem.dtype),
            "file_blocks": list(src.block_shapes[bidx - 1]),
            "chunks": [max(dem_chunks[0]), max(dem_chunks[1])],
            "n_chunks": len(dem_chunks[0]) * len(dem_chunks[1]),
            "area_or_point": src.tags().get("AREA_OR_POINT", "Area"),
            "compression": src.compression.value if src.compression else None,
        }
        meta.update(_crs_text(src.crs))
    meta["vertical_crs"] = vertical_crs(file_crs(path))
    if stats:
        meta["stats"] = robust_summary(dem.data)
    return meta


def _zarr_meta(path: str | Path, dem: Any) -> dict:
    """:func:`describe`'s metadata of a Zarr store (read through xarray, like any reader would)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = xr.open_zarr(path, mask_and_scale=False, decode_coords="all")
    (name,) = [n for n, v in ds.data_vars.items() if v.ndim == 2]  # open_dem checked there is one
    var = ds[name]
    t = dem.rio.transform()
    nodata = var.rio.encoded_nodata if var.rio.encoded_nodata is not None else var.rio.nodata
    compressors = var.encoding.get("compressors") or ()
    dem_chunks = dem.chunks
    meta = {
        "path": str(path),
        "driver": "Zarr",
        "band": 1,
        "bands": 1,
        "size": [int(dem.shape[1]), int(dem.shape[0])],
        "resolution": [abs(t.a), abs(t.e)],
        "transform": list(t)[:6],
        "bounds": list(dem.rio.bounds()),
        "nodata": None if nodata is None or math.isnan(nodata) else float(nodata),
        "nodata_is_nan": nodata is not None and math.isnan(nodata),
        "file_dtype": str(var.dtype),
        "dtype": str(dem.dtype),
        "file_blocks": list(var.encoding.get("chunks", dem.shape)),
        "chunks": [max(dem_chunks[0]), max(dem_chunks[1])],
        "n_chunks": len(dem_chunks[0]) * len(dem_chunks[1]),
        "area_or_point": var.attrs.get("AREA_OR_POINT", "Area"),
        "compression": ", ".join(type(c).__name__.replace("Codec", "").lower() for c in compressors) or None,
        "variable": str(name),
    }
    meta.update(_crs_text(dem.rio.crs))
    return meta


def _fmt(v: float) -> str:
    return f"{v:.6g}"


def _print_meta(m: dict) -> None:
    crs = m["crs"] if m["crs"] else "none"
    if m["crs_name"]:
        crs += f" ({m['crs_name']}, {'projected' if m['projected'] else 'geographic'}, units {m['units']})"
    nodata = "NaN" if m["nodata_is_nan"] else ("none" if m["nodata"] is None else _fmt(m["nodata"]))
    b = m["bounds"]
    lines = [
        ("File", f"{m['path']} ({m['driver']}, band {m['band']} of {m['bands']})"),
        ("CRS", crs),
        *([("Vertical CRS", f"{v['name']} ({'heights above the ellipsoid' if v['kind'] == 'ellipsoidal' else 'a geoid or datum'}"
                            + (f", EPSG:{v['epsg']})" if v["epsg"] else ")"))] if (v := m.get("vertical_crs")) else []),
        ("Size", f"{m['size'][0]} x {m['size'][1]} pixels (columns x rows)"),
        ("Resolution", f"{_fmt(m['resolution'][0])} x {_fmt(m['resolution'][1])}"),
        ("Nodata", f"{nodata} in the file; NaN once opened"),
        ("Data type", f"{m['file_dtype']} in the file; {m['dtype']} once opened"),
        ("Chunks", f"{m['chunks'][1]} x {m['chunks'][0]} pixels, {m['n_chunks']} chunk(s); "
                   f"file blocks {m['file_blocks'][1]} x {m['file_blocks'][0]}"),
        ("Bounds", f"left {b[0]:.10g}, bottom {b[1]:.10g}, right {b[2]:.10g}, top {b[3]:.10g}"),
        ("AREA_OR_POINT", m["area_or_point"]),
    ]
    for k, v in lines:
        click.echo(f"{k + ':':<15}{v}")


def _print_stats(s: dict) -> None:
    click.echo("Statistics (exact, computed out of core):")
    click.echo(f"  {'valid:':<13}{s['count']} of {s['size']} pixels ({100 * s['valid_fraction']:.2f} %)")
    click.echo(f"  {'min / max:':<13}{_fmt(s['min'])} / {_fmt(s['max'])}")
    click.echo(f"  {'median:':<13}{_fmt(s['median'])}")
    click.echo(f"  {'NMAD:':<13}{_fmt(s['nmad'])}")


def run_info(dem: str, *, band: int | None, as_json: bool, chunks: int | None, no_stats: bool,
             z_column: str | None) -> None:
    """The run of ``xdem info`` (its options, parsed): print the metadata and statistics of ``dem``."""
    if is_points_source(dem):
        _points_info(dem, as_json, z_column)
        return
    ck = "auto" if chunks is None else chunks
    if as_json:
        click.echo(json.dumps(describe(dem, band=band, chunks=ck, stats=not no_stats), indent=2))
        return
    meta = describe(dem, band=band, chunks=ck, stats=False)
    _print_meta(meta)
    if not no_stats:
        _print_stats(robust_summary(open_dem(dem, band=band, chunks=ck).data))

def _points_info(path: str, as_json: bool, z_column: str | None) -> None:
    # lazy on purpose: the points route's modules (xdem.workflows, hence xdem.coreg) only for a points file
    from xdem.workflows.points import points_summary

    meta: Mapping[str, Any] = points_summary(read_points(path, z_column=z_column))
    if as_json:
        click.echo(json.dumps(meta, indent=2))
        return
    b = meta["bounds"]
    click.echo(f"{'File:':<15}{meta['file']} (points)")
    click.echo(f"{'CRS:':<15}{meta['crs']}")
    click.echo(f"{'Points:':<15}{meta['count']}")
    if b is not None:
        click.echo(f"{'Bounds:':<15}left {b[0]:.10g}, bottom {b[1]:.10g}, right {b[2]:.10g}, top {b[3]:.10g}")
        click.echo(f"{'Elevation:':<15}{_fmt(meta['z_min'])} to {_fmt(meta['z_max'])}")
