"""``xdem terrain`` command line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import rasterio
from click.testing import CliRunner

import xdem
from xdem.cli import main

LIDAR = str(Path(__file__).parents[2] / "xdem" / "examples" / "data" / "lidar_dem.tif")


def read(path: Path) -> np.ndarray:
    with rasterio.open(path) as src:
        values = src.read(1).astype(np.float64)
        assert src.nodata == -9999
        assert src.profile["tiled"]
        crs = src.crs
        assert src.transform == rasterio.open(LIDAR).transform
    assert crs == rasterio.open(LIDAR).crs
    values[values == -9999] = np.nan
    return values


def test_single_attribute_to_file(tmp_path):
    out = tmp_path / "slope.tif"
    result = CliRunner().invoke(main, ["terrain", LIDAR, "-o", str(out), "-a", "slope", "--method", "zevenbergthorne"])
    assert result.exit_code == 0, result.output
    assert str(out) in result.output
    want = xdem.terrain.slope(LIDAR, method="zevenbergthorne").values
    np.testing.assert_allclose(read(out), want, atol=1e-6, equal_nan=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["slope.tif"]  # no stray temporary files


def test_several_attributes_into_folder(tmp_path):
    folder = tmp_path / "attrs"
    args = ["terrain", LIDAR, "-o", str(folder), "-a", "slope,aspect", "--attribute", "tri", "-a", "hillshade"]
    result = CliRunner().invoke(main, args + ["--azimuth", "90"])
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["aspect.tif", "hillshade.tif", "slope.tif", "terrain_ruggedness_index.tif"]
    np.testing.assert_allclose(read(folder / "aspect.tif"), xdem.terrain.aspect(LIDAR).values, atol=1e-5, equal_nan=True)
    with rasterio.open(folder / "hillshade.tif") as src:  # Byte, shades 1-255, nodata 0 (as gdaldem's)
        assert src.dtypes == ("uint8",) and src.nodata == 0
        shade = src.read(1)
    want = xdem.terrain.hillshade(LIDAR, azimuth=90).values
    assert ((shade == 0) == np.isnan(want)).all()
    assert np.abs(shade[shade > 0] - want[shade > 0]).max() <= 0.5 + 1e-6  # rounded to the nearest shade
    assert np.isnan(read(folder / "slope.tif")[0]).all()


def test_refuses_to_overwrite_without_flag(tmp_path):
    out = tmp_path / "roughness.tif"
    runner = CliRunner()
    assert runner.invoke(main, ["terrain", LIDAR, "-o", str(out), "-a", "roughness"]).exit_code == 0
    before = out.stat().st_mtime_ns
    result = runner.invoke(main, ["terrain", LIDAR, "-o", str(out), "-a", "slope"])
    assert result.exit_code == 1
    assert "--overwrite" in result.output and result.output.count("\n") == 1
    assert out.stat().st_mtime_ns == before
    result = runner.invoke(main, ["terrain", LIDAR, "-o", str(out), "-a", "slope", "--overwrite"])
    assert result.exit_code == 0, result.output
    np.testing.assert_allclose(read(out), xdem.terrain.slope(LIDAR).values, atol=1e-6, equal_nan=True)


def test_folder_refuses_overwrite_before_writing_anything(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "aspect.tif").write_bytes(b"keep")
    result = CliRunner().invoke(main, ["terrain", LIDAR, "-o", str(folder), "-a", "slope,aspect"])
    assert result.exit_code == 1
    assert sorted(p.name for p in folder.iterdir()) == ["aspect.tif"]  # slope.tif not written either
    assert (folder / "aspect.tif").read_bytes() == b"keep"


def test_usage_errors_exit_2(tmp_path):
    runner = CliRunner()
    bad_name = runner.invoke(main, ["terrain", LIDAR, "-o", str(tmp_path / "x.tif"), "-a", "slopes"])
    assert bad_name.exit_code == 2 and "unknown terrain attribute" in bad_name.output
    no_attr = runner.invoke(main, ["terrain", LIDAR, "-o", str(tmp_path / "x.tif")])
    assert no_attr.exit_code == 2
    two_into_file = runner.invoke(main, ["terrain", LIDAR, "-o", str(tmp_path / "x.tif"), "-a", "slope,aspect"])
    assert two_into_file.exit_code == 2 and "FOLDER" in two_into_file.output
    assert not list(tmp_path.iterdir())


def test_missing_dem_is_one_line_error(tmp_path):
    result = CliRunner().invoke(main, ["terrain", str(tmp_path / "nope.tif"), "-o", str(tmp_path / "s.tif"), "-a", "slope"])
    assert result.exit_code == 1
    assert result.output.startswith("Error:") and result.output.count("\n") == 1


def test_several_attributes_read_the_dem_once(tmp_path, monkeypatch):
    """All attributes come from ONE pass: every block of the DEM is read exactly once, and
    each file equals the attribute computed alone."""
    import collections

    import xdem.io.open as io_open

    reads: collections.Counter = collections.Counter()
    real = io_open._NamedReader.__getitem__

    def counting(self, key):
        if Path(self.path).name == Path(LIDAR).name:
            reads[tuple((s.start, s.stop) if isinstance(s, slice) else s for s in key)] += 1
        return real(self, key)

    monkeypatch.setattr(io_open._NamedReader, "__getitem__", counting)
    folder = tmp_path / "attrs"
    names = ["slope", "aspect", "hillshade"]
    args = ["terrain", LIDAR, "-o", str(folder), "-a", ",".join(names), "--chunks", "128"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    ny, nx = rasterio.open(LIDAR).shape
    n_blocks = -(-ny // 128) * -(-nx // 128)
    assert n_blocks > 4 and len(reads) == n_blocks  # every block read...
    assert set(reads.values()) == {1}  # ...exactly once, for the three attributes
    assert result.output.split() == [str(folder / f"{n}.tif") for n in names]
    for name in names[:2]:
        want = xdem.terrain.get_terrain_attribute(LIDAR, name).values
        np.testing.assert_allclose(read(folder / f"{name}.tif"), want, atol=1e-5, equal_nan=True)
    with rasterio.open(folder / "hillshade.tif") as src:  # Byte: the rounded shades
        want = xdem.terrain.hillshade(LIDAR).values
        np.testing.assert_array_equal(src.read(1), np.where(np.isnan(want), 0, np.clip(np.round(want), 1, 255)))
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"{n}.tif" for n in names)


def test_default_attributes_with_units(tmp_path):
    """Without -a: slope, aspect and hillshade into the folder, each with its unit tag."""
    folder = tmp_path / "defaults"
    result = CliRunner().invoke(main, ["terrain", LIDAR, "-o", str(folder)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in folder.iterdir()) == ["aspect.tif", "hillshade.tif", "slope.tif"]
    units = {}
    for p in folder.iterdir():
        with rasterio.open(p) as src:
            units[p.stem] = src.units[0]
    assert units == {"slope": "degrees", "aspect": "degrees", "hillshade": "1-255"}
    np.testing.assert_allclose(read(folder / "slope.tif"), xdem.terrain.slope(LIDAR).values, atol=1e-5, equal_nan=True)
    percent = tmp_path / "slope_pct.tif"
    result = CliRunner().invoke(main, ["terrain", LIDAR, "-o", str(percent), "-a", "slope", "--slope-units", "percent"])
    assert result.exit_code == 0, result.output
    with rasterio.open(percent) as src:
        assert src.units == ("percent",)
    result = CliRunner().invoke(main, ["terrain", LIDAR, "-o", str(tmp_path / "one.tif")])
    assert result.exit_code == 2 and "FOLDER" in result.output
