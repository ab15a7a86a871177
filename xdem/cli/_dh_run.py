"""The run of ``xdem dh`` (:mod:`xdem.cli.dh` is the light command; this module imports
dask.array, xarray, geopandas and :mod:`xdem.volume`, once the command line has parsed)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import uuid
from datetime import datetime
from pathlib import Path

import click
import numpy as np
import pandas as pd
import xarray as xr

from xdem import interrupt
from xdem.cli._common import one_line_warnings
from xdem.ddem import dDEM
from xdem.errors import InputError, OutputError
from xdem.io.atomic import TEMP_PREFIX, check_output_path, move_into_place
from xdem.io.cog import write_cog
from xdem.io.grid import align_pair
from xdem.io.open import open_dem
from xdem.masks import read_polygons
from xdem.spatialstats import infer_heteroscedasticity_from_stable
from xdem.terrain import slope
from xdem.volume import volume_change

__all__ = ["run_dh", "write_table"]

_SUFFIXES = (".gpkg", ".csv")


def write_table(table: pd.DataFrame, path: str | os.PathLike, *, overwrite: bool) -> Path:
    """Write the table to ``path`` (GeoPackage with geometry, or CSV without) through a temporary
    file in the same folder, moved into place in one step: never a half-written table.

    Examples
    --------
    >>> import tempfile, geopandas as gpd
    >>> from shapely.geometry import Point
    >>> t = gpd.GeoDataFrame({"a": [1.5]}, geometry=[Point(0, 0)], crs="EPSG:32633")
    >>> write_table(t, os.path.join(tempfile.mkdtemp(), "t.csv"), overwrite=False).read_text().splitlines()
    ['a', '1.5']
    """
    path = Path(path)
    tmp = path.with_name(f"{TEMP_PREFIX}{os.getpid()}-{uuid.uuid4().hex}-{path.name}")
    try:
        if path.suffix.lower() == ".csv":
            frame = pd.DataFrame(table.drop(columns="geometry", errors="ignore"))
            frame.to_csv(tmp, index=False)
        else:
            table.to_file(tmp, driver="GPKG", layer=path.stem)
        move_into_place(tmp, path, overwrite=overwrite)
    except BaseException:  # Ctrl-C, a signal (xdem.interrupt), a failed write: no temporary file left
        with contextlib.suppress(OSError):
            if tmp.exists():
                tmp.unlink()
                interrupt.note_removed(tmp, temporary=True)
        raise
    return path


def _check_outputs(ref: str, aligned: str, outlines: str, output: str, dh_out: str | None, *, overwrite: bool) -> None:
    """Cheap checks first: nothing is read or computed for an output that cannot be written."""
    if Path(output).suffix.lower() not in _SUFFIXES:
        raise click.BadParameter(f"'{output}' must end with .gpkg or .csv", param_hint="'-o' / '--output'")
    inputs = [("REF", ref), ("ALIGNED", aligned), ("the outlines", outlines)]
    check_output_path(output, overwrite=overwrite, inputs=inputs, what="output", overwrite_hint="--overwrite")
    if dh_out is not None:
        if Path(dh_out).suffix.lower() not in (".tif", ".tiff"):
            raise click.BadParameter(f"'{dh_out}' must end with .tif", param_hint="'--dh-out'")
        if os.path.abspath(dh_out) == os.path.abspath(output):
            raise click.BadParameter("--dh-out and -o are the same file", param_hint="'--dh-out'")
        check_output_path(dh_out, overwrite=overwrite, inputs=inputs, what="--dh-out", overwrite_hint="--overwrite")
    if not os.path.exists(outlines):
        raise InputError(f"the outlines '{outlines}' do not exist; give a vector file (e.g. glaciers.gpkg)")


def _elevation_change(ref: str, aligned: str, *, later: str, chunks: int | None) -> tuple[xr.DataArray, xr.DataArray]:
    """REF and dh = later minus earlier DEM, on REF's grid (ALIGNED resampled onto it if needed)."""
    r = open_dem(ref, chunks=chunks if chunks else "auto")
    a = open_dem(aligned, chunks=chunks if chunks else "auto")
    r, a = align_pair(r, a)
    dh = (r - a) if later == "ref" else (a - r)
    return r, dh.rio.write_crs(r.rio.crs).rio.write_transform(r.rio.transform()).rio.write_nodata(np.nan, encoded=False)


def _error_by_slope(dh: xr.DataArray, ref: xr.DataArray, *, outlines: str, stable_mask: str | None) -> xr.DataArray:
    """The error of dh as a function of REF's slope, binned on stable terrain (lazy)."""
    err, _, _ = infer_heteroscedasticity_from_stable(dh, [slope(ref)], stable_mask=stable_mask, unstable_mask=outlines,
                                                     list_var_names=["slope"])
    return dh.copy(data=err.data if isinstance(err, xr.DataArray) else err)


def _json_value(v: object) -> object:
    if isinstance(v, (float, np.floating)):
        return None if not math.isfinite(float(v)) else float(v)
    if isinstance(v, np.integer):
        return int(v)
    return v if isinstance(v, (str, int, bool, type(None))) else str(v)


def run_dh(ref: str, aligned: str, *, outlines: str, output: str, later: str, start: datetime | None,
           end: datetime | None, density: float, density_error: float, stable_mask: str | None,
           error_map: str | None, heteroscedastic: bool, fill: str | None, void_factor: float,
           dh_out: str | None, seed: int | None, chunks: int | None, overwrite: bool, as_json: bool, progress: bool) -> None:
    """The run of ``xdem dh`` (its options, parsed): the table per outline, and dh if asked."""
    with one_line_warnings():  # a warning is one line, as in xdem coreg
        _check_outputs(ref, aligned, outlines, output, dh_out, overwrite=overwrite)
        say = (lambda text: click.echo(text, err=True)) if progress else (lambda text: None)
        if heteroscedastic and error_map is not None:
            raise click.BadParameter("give either --error or --heteroscedastic", param_hint="'--heteroscedastic'")
        r, dh = _elevation_change(ref, aligned, later=later, chunks=chunks)
        read_polygons(outlines, dh.rio.crs)  # a bad vector file: one line before any pass over the DEMs
        error = None
        if error_map is not None:
            _, error = align_pair(dh, open_dem(error_map, chunks=chunks if chunks else "auto"))
        elif heteroscedastic:
            say("error of dh by slope on stable terrain")
            with interrupt.stage("the error of dh by slope", key="volume"):
                error = _error_by_slope(dh, r, outlines=outlines, stable_mask=stable_mask)
        filled = None
        if fill is not None:  # lazy: computed in the volume pass
            ddem = dDEM(dh, start_time=start or datetime(1, 1, 1), end_time=end or datetime(1, 1, 2))
            filled = dh.copy(data=ddem.interpolate(fill, reference_elevation=r, mask=outlines))
        say(f"volume change per outline of {outlines}")
        with interrupt.stage(f"the volume change of {outlines}", key="volume"):
            table = volume_change(dh, outlines, filled=filled, error=error, stable_mask=stable_mask, density=density,
                                  density_error=density_error, void_factor=void_factor, start=start, end=end,
                                  random_state=seed)
        if dh_out is not None:
            say(f"writing {dh_out}")
            write_cog(dh, dh_out, overwrite=overwrite, progress=progress)
        say(f"writing {output}")
        with interrupt.stage(f"the writing of {output}", key="write"):
            if not overwrite and os.path.exists(output):
                raise OutputError(f"output '{output}' already exists; pass --overwrite to replace it or choose another path")
            path = write_table(table, output, overwrite=overwrite)
        if as_json:
            rows = [{k: _json_value(v) for k, v in row.items() if k != "geometry"} for row in table.to_dict("records")]
            click.echo(json.dumps({"output": str(path), "dh": f"{later} minus {'ref' if later == 'aligned' else 'aligned'}",
                                   "density": density, "density_error": density_error, "rows": rows}))
        else:
            click.echo(str(path))
