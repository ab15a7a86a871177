"""Tests of the synthetic fractal terrain and DEM-pair generator (xdem.examples.synthetic)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import rasterio
from dask.callbacks import Callback
from rio_cogeo.cogeo import cog_validate

from xdem.errors import InputError, OutputError
from xdem.examples.synthetic import DEFAULT_ORIGIN, fractal_terrain, generate_pair, terrain_height

RES = 2.0


class _Starts(Callback):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def _start(self, dsk) -> None:
        self.n += 1


def _centres(shape, origin=DEFAULT_ORIGIN, res=RES):
    x = origin[0] + (np.arange(shape[1]) + 0.5) * res
    y = origin[1] - (np.arange(shape[0]) + 0.5) * res
    return x, y


def test_lazy_and_georeferenced() -> None:
    with _Starts() as cb:
        dem = fractal_terrain((3000, 2500), chunks=1024, seed=3)
    assert cb.n == 0
    assert dem.shape == (3000, 2500) and dem.data.numblocks == (3, 3)
    assert dem.dtype == np.float32 and dem.rio.crs.to_epsg() == 32633
    t = dem.rio.transform()
    assert (t.a, t.e, t.c, t.f) == (RES, -RES, *DEFAULT_ORIGIN)
    np.testing.assert_allclose(dem["x"].values[:2], DEFAULT_ORIGIN[0] + np.array([1.0, 3.0]))


def test_chunk_independent() -> None:
    one = fractal_terrain((300, 260), chunks=300).values
    for chunks in [(64, 50), (17, 300), 128]:
        np.testing.assert_allclose(fractal_terrain((300, 260), chunks=chunks).values, one, rtol=0, atol=1e-6)
    # and equal to the analytic function evaluated in one go
    x, y = _centres((300, 260))
    np.testing.assert_allclose(one, terrain_height(x, y).astype(np.float32), rtol=0, atol=1e-6)


def test_deterministic_and_seeded() -> None:
    a = fractal_terrain((128, 128), seed=5).values
    b = fractal_terrain((128, 128), seed=5).values
    c = fractal_terrain((128, 128), seed=6).values
    np.testing.assert_array_equal(a, b)
    assert np.abs(a - c).mean() > 10.0


def test_shift_exact_on_the_analytic_function() -> None:
    # a grid moved by whole pixels samples exactly the same terrain
    base = fractal_terrain((120, 150)).values
    moved = fractal_terrain((120, 150), origin=(DEFAULT_ORIGIN[0] + 7 * RES, DEFAULT_ORIGIN[1] - 4 * RES)).values
    np.testing.assert_array_equal(moved[:-4, :-7], base[4:, 7:])
    # the function is continuous: a tiny move gives a tiny change, not a jump at lattice edges
    x = DEFAULT_ORIGIN[0] + np.linspace(0, 20000, 5001)
    y = np.array([DEFAULT_ORIGIN[1] - 1234.5])
    step = np.abs(terrain_height(x + 1e-4, y) - terrain_height(x, y))
    assert step.max() < 1e-3


def test_realistic_slopes_and_relief() -> None:
    z = fractal_terrain((512, 512), origin=(DEFAULT_ORIGIN[0] + 3000, DEFAULT_ORIGIN[1] - 5000)).values.astype(float)
    gy, gx = np.gradient(z, RES)
    slope = np.degrees(np.arctan(np.hypot(gx, gy)))
    assert 10.0 <= np.median(slope) <= 25.0
    # relief over 20 km, on a coarse sample of the analytic function
    x, y = DEFAULT_ORIGIN[0] + np.arange(0, 20000, 100.0), DEFAULT_ORIGIN[1] - np.arange(0, 20000, 100.0)
    coarse = terrain_height(x, y)
    assert 300.0 < np.ptp(coarse) < 3000.0 and 500.0 < coarse.mean() < 3000.0


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="shape"):
        fractal_terrain((0, 10))
    with pytest.raises(InputError, match="resolution"):
        fractal_terrain(10, resolution=-1)
    with pytest.raises(InputError, match="shift"):
        generate_pair(tmp_path, size=16, shift=(1.0, 2.0))


def _read(path: str):
    with rasterio.open(path) as src:
        return src.read(1), src.transform, src.crs


def test_generate_pair_whole_pixel_shift(tmp_path: Path) -> None:
    dx, dy, dz = 2 * RES, -3 * RES, 1.25  # whole pixels: tba is ref moved on its own grid
    truth = generate_pair(tmp_path / "p", size=(96, 128), shift=(dx, dy, dz), chunks=40)
    assert (truth["shift_x"], truth["shift_y"], truth["shift_z"]) == (-dx, -dy, -dz)
    ref, t_ref, crs = _read(truth["ref"])
    tba, t_tba, _ = _read(truth["tba"])
    assert t_ref == t_tba and crs.to_epsg() == 32633
    assert cog_validate(truth["ref"], quiet=True)[0] and cog_validate(truth["tba"], quiet=True)[0]
    # tba(x, y) = ref(x - dx, y - dy) + dz: column c - 2, and row r - 3 (rows go south)
    np.testing.assert_allclose(tba[3:, 2:], ref[:-3, :-2] + dz, rtol=0, atol=5e-4)
    on_disk = json.loads((tmp_path / "p" / "truth.json").read_text())
    assert on_disk["shift_x"] == -dx and on_disk["tilt"] is None


def test_generate_pair_subpixel_shift_and_tilt(tmp_path: Path) -> None:
    dx, dy, dz, ax, ay = 0.7, -1.3, -2.0, 1e-3, -5e-4
    truth = generate_pair(tmp_path, size=80, shift=(dx, dy, dz), tilt=(ax, ay), seed=2)
    tba, transform, _ = _read(truth["tba"])
    x, y = _centres((80, 80))
    tilt = truth["tilt"]
    expected = terrain_height(x - dx, y - dy, seed=2) + dz
    expected += ax * (x - tilt["x_center"])[None, :] + ay * (y - tilt["y_center"])[:, None]
    np.testing.assert_allclose(tba, expected, rtol=0, atol=5e-4)
    assert tilt["x_center"] == DEFAULT_ORIGIN[0] + 80 * RES / 2


def test_generate_pair_cache(tmp_path: Path) -> None:
    truth = generate_pair(tmp_path, size=48)
    stamp = {p: os.stat(p).st_mtime_ns for p in (truth["ref"], truth["tba"])}
    again = generate_pair(tmp_path, size=48)
    assert again == truth and {p: os.stat(p).st_mtime_ns for p in stamp} == stamp
    with pytest.raises(OutputError, match="overwrite=True"):
        generate_pair(tmp_path, size=48, shift=(1.0, 1.0, 1.0))
    new = generate_pair(tmp_path, size=48, shift=(1.0, 1.0, 1.0), overwrite=True)
    assert new["shift_x"] == -1.0
    assert sorted(os.listdir(tmp_path)) == ["ref.tif", "tba.tif", "truth.json"]
