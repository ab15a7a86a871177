"""The run of ``xdem terrain`` (:mod:`xdem.cli.terrain` is the light command; this module
imports dask.array, xarray, the I/O stack and :mod:`xdem.terrain`, once the command line has parsed)."""

from __future__ import annotations

from pathlib import Path

import click
import dask.array as da
import numpy as np
import xarray as xr

from xdem.errors import InputError, OutputError
from xdem.io import remote
from xdem.io.cog import write_cogs
from xdem.io.open import open_dem
from xdem.io.upload import check_output_url
from xdem.terrain.attributes import _canonical, get_terrain_attribute
from xdem.terrain.options import TerrainOptions

__all__ = ["run_terrain", "as_byte", "DEFAULT_ATTRIBUTES", "HILLSHADE_NODATA"]

_SUFFIXES = (".tif", ".tiff")
#: Attributes written when no ``-a`` is given (into a folder).
DEFAULT_ATTRIBUTES = ("slope", "aspect", "hillshade")
#: Nodata of the Byte hillshade (its values are 1 to 255, as gdaldem's).
HILLSHADE_NODATA = 0


def _byte_block(block: np.ndarray) -> np.ndarray:
    out = np.clip(np.round(np.nan_to_num(block, nan=HILLSHADE_NODATA)), 0, 255).astype(np.uint8)
    out[np.isfinite(block) & (out == HILLSHADE_NODATA)] = 1  # a valid shade is never the nodata
    return out


def as_byte(hillshade: xr.DataArray) -> xr.DataArray:
    """A float hillshade (1 to 255, NaN where unknown) as Byte, nodata :data:`HILLSHADE_NODATA`.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> as_byte(xr.DataArray(np.array([[np.nan, 0.6, 254.7]]), dims=("y", "x"))).values.tolist()
    [[0, 1, 255]]
    """
    data = hillshade.data
    out = (da.map_blocks(_byte_block, data, dtype=np.uint8) if isinstance(data, da.Array)
           else _byte_block(np.asarray(data)))
    return hillshade.copy(data=out)


def _split_attributes(values: tuple[str, ...]) -> list[str]:
    """``-a slope -a aspect`` and ``-a slope,aspect`` alike, canonical names, no duplicates."""
    names: list[str] = []
    for value in values:
        for part in value.split(","):
            if not part.strip():
                continue
            try:
                name = _canonical(part)
            except InputError as exc:
                raise click.BadParameter(str(exc), param_hint="'-a' / '--attribute'") from exc
            if name not in names:
                names.append(name)
    if not names:
        raise click.BadParameter("give at least one attribute, e.g. -a slope", param_hint="'-a' / '--attribute'")
    return names


def _targets(names: list[str], output: Path) -> list[Path]:
    """Output file per attribute: ``output`` itself for one attribute given as a .tif path,
    otherwise ``output/<attribute>.tif``."""
    if len(names) == 1 and output.suffix.lower() in _SUFFIXES and not output.is_dir():
        return [output]
    if output.suffix.lower() in _SUFFIXES and not output.is_dir():
        raise click.BadParameter(
            f"{len(names)} attributes need an output FOLDER (one <attribute>.tif each), not the file '{output}'",
            param_hint="'-o' / '--output'",
        )
    return [output / f"{name}.tif" for name in names]


def _remote_targets(names: list[str], output: str, *, overwrite: bool) -> list[str]:
    """The ``s3://`` outputs: ``output`` itself for one attribute given as a .tif key, otherwise
    ``output/<attribute>.tif`` (a prefix); each asked of the store before any computation."""
    single = len(names) == 1 and output.lower().endswith(_SUFFIXES)
    if not single and output.lower().endswith(_SUFFIXES):
        raise click.BadParameter(f"{len(names)} attributes need an output prefix (one <attribute>.tif each), not the "
                                 f"object '{output}'", param_hint="'-o' / '--output'")
    urls = [output] if single else [f"{output.rstrip('/')}/{name}.tif" for name in names]
    return [check_output_url(url, overwrite=overwrite, overwrite_hint="--overwrite") for url in urls]


def run_terrain(dem: str, *, output: str, attributes: tuple[str, ...], method: str, slope_units: str, azimuth: float,
                altitude: float, z_factor: float, tri_algorithm: str, window_size: int, chunks: int | None,
                overwrite: bool, progress: bool) -> None:
    """The run of ``xdem terrain`` (its options, parsed): compute the attributes and write their COGs."""
    opts = TerrainOptions(method=method, slope_units=slope_units, azimuth=azimuth, altitude=altitude, z_factor=z_factor,
                          tri_algorithm=tri_algorithm, window_size=window_size)
    if remote.is_remote(output):  # staged in TMPDIR, uploaded at the end in one conditional put each
        names = _split_attributes(attributes or DEFAULT_ATTRIBUTES)
        urls = _remote_targets(names, output, overwrite=overwrite)
        _write(dem, names, urls, chunks=chunks, overwrite=overwrite, progress=progress, opts=opts)
        return
    out = Path(output)
    if not attributes and out.suffix.lower() in _SUFFIXES and not out.is_dir():
        raise click.BadParameter(
            f"without -a, {', '.join(DEFAULT_ATTRIBUTES)} are written into a FOLDER; give a folder, or one attribute "
            "with -a for a single file", param_hint="'-a' / '--attribute'")
    names = _split_attributes(attributes or DEFAULT_ATTRIBUTES)
    targets = _targets(names, out)
    existing = [str(t) for t in targets if t.exists()]
    if existing and not overwrite:
        raise OutputError(f"output exists: {', '.join(existing)}; pass --overwrite to replace it")
    targets[0].parent.mkdir(parents=True, exist_ok=True)
    _write(dem, names, targets, chunks=chunks, overwrite=overwrite, progress=progress, opts=opts)


def _write(dem: str, names: list[str], targets: list[Path] | list[str], *, chunks: int | None, overwrite: bool,
           progress: bool, opts: TerrainOptions) -> None:
    """Compute the attributes (one map_overlap graph for all, validated before writing) and write them."""
    source = open_dem(dem, chunks=chunks if chunks else "auto")
    attrs = get_terrain_attribute(source, names, **opts.kwargs())
    items: list = [(as_byte(a), t, HILLSHADE_NODATA) if n == "hillshade" else (a, t)
                   for n, a, t in zip(names, attrs, targets)]
    for written in write_cogs(items, overwrite=overwrite, progress=progress):
        click.echo(str(written.path))
