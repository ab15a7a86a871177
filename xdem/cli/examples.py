"""``xdem examples``: bundled example data and a DEM pair with a known misalignment."""

from __future__ import annotations

import click

from xdem.examples import DEFAULT_SHIFT, available, get_path

__all__ = ["examples"]


@click.group("examples")
def examples() -> None:
    """Bundled example data (a 400 x 400, 1 m lidar DEM, MIT licence)."""


@examples.command("path")
@click.argument("name", default="lidar", type=click.Choice(available()))
def path_cmd(name: str) -> None:
    """Print the path of a bundled example file."""
    click.echo(str(get_path(name)))


@examples.command("write-pair")
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("--overwrite", is_flag=True, help="Replace ref.tif, tba.tif and truth.json if they exist.")
@click.option("--dx", type=float, default=DEFAULT_SHIFT[0], show_default=True,
              help="Misalignment: tba is ref moved by dx (m, east); the correction to find is shift_x = -dx.")
@click.option("--dy", type=float, default=DEFAULT_SHIFT[1], show_default=True,
              help="Misalignment: tba is ref moved by dy (m, north); the correction to find is shift_y = -dy.")
@click.option("--dz", type=float, default=DEFAULT_SHIFT[2], show_default=True,
              help="Misalignment: dz (m) added to tba; the correction to find is shift_z = -dz.")
@click.option("--tilt-x", type=float, default=0.0, show_default=True,
              help="Misalignment: tilt added to tba along x (m per m).")
@click.option("--tilt-y", type=float, default=0.0, show_default=True,
              help="Misalignment: tilt added to tba along y (m per m).")
@click.option("--mode", type=click.Choice(["resample", "transform"]), default="resample", show_default=True,
              help="resample: move the content on the same grid; transform: move the geotransform.")
@click.option("--noise", type=float, default=0.0, show_default=True, help="Std of Gaussian noise added to tba (m).")
@click.option("--holes", type=int, default=0, show_default=True, help="Number of NaN holes punched into tba.")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed of the noise and holes.")
def write_pair(
    folder: str, overwrite: bool, dx: float, dy: float, dz: float, tilt_x: float,
    tilt_y: float, mode: str, noise: float, holes: int, seed: int,
) -> None:
    """Write ref.tif, tba.tif and truth.json of a known misalignment to FOLDER.

    tba(x, y) = ref(x - dx, y - dy) + dz: the translation a coregistration must apply to
    tba is (-dx, -dy, -dz), stored in truth.json as shift_x, shift_y, shift_z.
    """
    # lazy on purpose (the one of this module): --help and usage errors need the file names only,
    # not the pair's stack (rasterio, xarray, scipy)
    from xdem.examples.pair import write_example_pair

    shift_x, shift_y, shift_z = dx, dy, dz  # write_example_pair's names (the displacement, see its docs)
    tilt = None if tilt_x == 0 and tilt_y == 0 else (tilt_x, tilt_y)
    out = write_example_pair(
        folder, overwrite=overwrite, shift_x=shift_x, shift_y=shift_y, shift_z=shift_z, mode=mode,
        tilt=tilt, noise=noise, holes=holes, random_state=seed,
    )
    t = out["truth"]
    click.echo(f"Wrote the example pair to {folder}/:")
    click.echo(f"  reference:      {out['ref']}")
    click.echo(f"  to be aligned:  {out['tba']}")
    click.echo(
        f"  truth:          {out['truth_path']}  (correction to apply to tba: shift_x={t['shift_x']:+g} m, "
        f"shift_y={t['shift_y']:+g} m, shift_z={t['shift_z']:+g} m)"
    )
