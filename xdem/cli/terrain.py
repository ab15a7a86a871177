"""``xdem terrain``: terrain attributes of a DEM written as Cloud-Optimized GeoTIFFs, out of core."""

from __future__ import annotations

from pathlib import Path

import click
import numpy as np
import xarray as xr

__all__ = ["terrain"]

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
    import dask.array as da

    data = hillshade.data
    out = (da.map_blocks(_byte_block, data, dtype=np.uint8) if isinstance(data, da.Array)
           else _byte_block(np.asarray(data)))
    return hillshade.copy(data=out)


def _split_attributes(values: tuple[str, ...]) -> list[str]:
    """``-a slope -a aspect`` and ``-a slope,aspect`` alike, canonical names, no duplicates."""
    from xdem.errors import InputError
    from xdem.terrain.attributes import _canonical

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


@click.command("terrain")
@click.argument("dem", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(),
              help="Output .tif for one attribute, or a folder (created if missing) receiving <attribute>.tif files.")
@click.option("-a", "--attribute", "attributes", multiple=True,
              help="Default (into a folder): slope, aspect and hillshade. Attribute(s): slope, aspect, hillshade, "
                   "curvature, profile_curvature, planform_curvature, "
                   "maximum_curvature, terrain_ruggedness_index (tri), topographic_position_index (tpi), roughness. "
                   "Repeat the option or separate with commas.")
@click.option("--method", type=click.Choice(["horn", "zevenbergthorne", "zevenbergen_thorne"]), default="horn",
              show_default=True, help="Surface fit for slope, aspect and hillshade.")
@click.option("--slope-units", type=click.Choice(["degrees", "percent", "radians"]), default="degrees",
              show_default=True)
@click.option("--azimuth", type=float, default=315.0, show_default=True,
              help="Hillshade: direction the light comes from, degrees clockwise from north.")
@click.option("--altitude", type=float, default=45.0, show_default=True, help="Hillshade: light elevation, degrees.")
@click.option("--z-factor", type=float, default=1.0, show_default=True, help="Hillshade: vertical exaggeration.")
@click.option("--tri-algorithm", type=click.Choice(["riley", "wilson"]), default="riley", show_default=True)
@click.option("--window-size", type=int, default=3, show_default=True, help="TPI and roughness window side (odd).")
@click.option("--chunks", type=click.IntRange(min=16), default=None, help="Chunk side in pixels (default: auto).")
@click.option("--overwrite", is_flag=True, help="Replace existing output files.")
@click.option("--progress", is_flag=True, help="Show a progress bar while writing.")
def terrain(
    dem: str, output: str, attributes: tuple[str, ...], method: str, slope_units: str, azimuth: float,
    altitude: float, z_factor: float, tri_algorithm: str, window_size: int, chunks: int | None,
    overwrite: bool, progress: bool,
) -> None:
    """Compute terrain attributes of DEM and write each as a COG, out of core.

    \b
    Examples:
      xdem terrain dem.tif -o slope.tif -a slope
      xdem terrain dem.tif -o attrs/ -a slope,aspect,hillshade --method zevenbergthorne

      xdem terrain dem.tif -o attrs/            # slope.tif, aspect.tif, hillshade.tif

    Edges and cells next to nodata are nodata (-9999 in the files; 0 in the hillshade, written
    as Byte with shades 1 to 255). Every file carries its unit (GDAL's band unit: degrees,
    m...). All attributes are computed in ONE pass over DEM (one read, one halo pass per
    block), then each file is compressed into a COG. Paths written are printed, one per line.
    """
    from xdem.errors import OutputError
    from xdem.io.cog import write_cogs
    from xdem.io.open import open_dem
    from xdem.terrain.attributes import get_terrain_attribute
    from xdem.terrain.options import TerrainOptions

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
    source = open_dem(dem, chunks=chunks if chunks else "auto")
    opts = TerrainOptions(method=method, slope_units=slope_units, azimuth=azimuth, altitude=altitude, z_factor=z_factor,
                          tri_algorithm=tri_algorithm, window_size=window_size)
    # one map_overlap graph for all attributes (validates them all before writing)
    attrs = get_terrain_attribute(source, names, **opts.kwargs())
    targets[0].parent.mkdir(parents=True, exist_ok=True)
    items: list = [(as_byte(a), t, HILLSHADE_NODATA) if n == "hillshade" else (a, t)
                   for n, a, t in zip(names, attrs, targets)]
    for written in write_cogs(items, overwrite=overwrite, progress=progress):
        click.echo(str(written.path))
