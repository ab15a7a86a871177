"""The bundled data and the example pair with known misalignment."""

from __future__ import annotations

import json

import dask.array as da
import numpy as np
import pytest
import rasterio
from helpers import count_computes

import xdem
from xdem.errors import InputError, OutputError
from xdem.examples import DEFAULT_SHIFT, example_pair, get_path, write_example_pair


def test_get_path_and_unknown_name():
    p = get_path()
    assert p.is_file() and p.name == "lidar_dem.tif"
    assert (p.parent / "lidar_LICENSE.txt").is_file()
    with pytest.raises(InputError, match="unknown example 'nope'; choose one of"):
        get_path("nope")


def test_default_truth_signs():
    ref, tba, truth = example_pair()
    dx, dy, dz = DEFAULT_SHIFT
    assert (truth["dx"], truth["dy"], truth["dz"]) == (dx, dy, dz)
    assert (truth["shift_x"], truth["shift_y"], truth["shift_z"]) == (-dx, -dy, -dz)
    assert truth["mode"] == "resample" and truth["tilt"] is None
    assert isinstance(ref.data, da.Array) and isinstance(tba.data, da.Array)
    assert ref.dtype == tba.dtype == np.float32 and ref.shape == tba.shape == (400, 400)
    assert xdem.io.grid.same_grid(ref, tba)


def test_integer_shift_matches_coordinates_exactly():
    """tba(x, y) = ref(x - dx, y - dy) + dz, checked through the map coordinates."""
    ref, tba, truth = example_pair(shift_x=2.0, shift_y=-3.0, shift_z=1.5)
    r = ref.compute()
    t = tba.compute()
    xs, ys = t.x.values[10:390:37], t.y.values[10:390:41]
    got = t.sel(x=xs, y=ys).values
    want = r.sel(x=xs - 2.0, y=ys + 3.0).values + np.float32(1.5)
    np.testing.assert_allclose(got, want, atol=1e-4)
    # Sources outside the DEM are NaN: the 2 western columns and the 3 northern rows.
    nan = np.isnan(t.values)
    assert nan[:, :2].all() and nan[:3, :].all() and not nan[3:, 2:].any()


def test_subpixel_resample_close_to_bilinear_and_transform_mode():
    dx, dy, dz = 0.5, -0.25, 0.0
    ref, tba, _ = example_pair(shift_x=dx, shift_y=dy, shift_z=dz)
    r = ref.values.astype(np.float64)
    t = tba.values.astype(np.float64)
    # Bilinear estimate of ref at (x - 0.5, y + 0.25) = column c - 0.5, row r - 0.25.
    bil = 0.75 * (0.5 * r[1:, 1:] + 0.5 * r[1:, :-1]) + 0.25 * (0.5 * r[:-1, 1:] + 0.5 * r[:-1, :-1])
    diff = t[1:, 1:] - bil
    assert np.nanmedian(np.abs(diff)) < 0.02  # same surface, different interpolators
    assert np.isnan(t[0, :]).all() and np.isnan(t[:, 0]).all()
    # Pointwise check of the direction: a sub-pixel move of the content, not of the grid.
    assert np.nanmedian(np.abs(t[1:, 1:] - r[1:, 1:])) > 3 * np.nanmedian(np.abs(diff))


def test_transform_mode_exact_data_moved_grid(lidar_dem):
    ref, tba, truth = example_pair(mode="transform", shift_x=3.27, shift_y=-1.64, shift_z=2.5)
    t0, t1 = ref.rio.transform(), tba.rio.transform()
    assert t1.c == pytest.approx(t0.c + 3.27) and t1.f == pytest.approx(t0.f - 1.64)
    assert float(tba.x[0]) == pytest.approx(float(ref.x[0]) + 3.27)
    np.testing.assert_array_equal(tba.values, (ref.values.astype(np.float64) + 2.5).astype(np.float32))


def test_tilt_noise_holes_deterministic():
    kw = dict(shift_x=0.0, shift_y=0.0, shift_z=0.0, tilt=(0.01, -0.02), noise=0.0)
    ref, tba, truth = example_pair(**kw)
    dh = (tba - ref).values.astype(np.float64)
    x = tba.x.values - (ref.x.values[0] - 0.5 + 200)
    y = tba.y.values - (ref.y.values[0] + 0.5 - 200)
    np.testing.assert_allclose(dh, 0.01 * x[None, :] - 0.02 * y[:, None], atol=1e-4)
    assert truth["tilt"] == [0.01, -0.02]
    a = example_pair(noise=0.3, holes=4, random_state=7)[1].values
    b = example_pair(noise=0.3, holes=4, random_state=7)[1].values
    c = example_pair(noise=0.3, holes=4, random_state=8)[1].values
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(np.isnan(a), np.isnan(c))
    clean = example_pair()[1].values
    assert np.isnan(a).sum() > np.isnan(clean).sum() + 4 * 28  # 4 discs of radius >= 3
    assert np.nanstd(a - clean) == pytest.approx(0.3, rel=0.05)


def test_chunks_and_laziness():
    with count_computes() as c:
        ref, tba, _ = example_pair(chunks=128)
    assert c.count == 0
    assert ref.chunks == tba.chunks == ((128, 128, 128, 16),) * 2


@pytest.mark.parametrize(
    "kw, msg",
    [
        ({"mode": "warp"}, "mode must be 'resample' or 'transform'"),
        ({"noise": -1.0}, "noise is a standard deviation"),
        ({"holes": -2}, "holes must be >= 0"),
        ({"tilt": (1.0,)}, "tilt must be"),
    ],
)
def test_bad_options(kw, msg):
    with pytest.raises(InputError, match=msg):
        example_pair(**kw)


def test_write_example_pair(tmp_path):
    out = write_example_pair(tmp_path / "pair", shift_x=1.25, tilt=(0.001, 0.0))
    assert sorted(p.name for p in (tmp_path / "pair").iterdir()) == ["ref.tif", "tba.tif", "truth.json"]
    truth = json.loads(out["truth_path"].read_text())
    assert truth == out["truth"] and truth["shift_x"] == -1.25 and truth["tilt"] == [0.001, 0.0]
    with rasterio.open(out["tba"]) as src:
        assert src.profile["tiled"] and src.dtypes[0] == "float32" and np.isnan(src.nodata)
        assert src.tags()["AREA_OR_POINT"] == "Area"
    ref_mem, tba_mem, _ = example_pair(shift_x=1.25, tilt=(0.001, 0.0))
    np.testing.assert_array_equal(xdem.open_dem(out["tba"]).values, tba_mem.values)
    np.testing.assert_array_equal(xdem.open_dem(out["ref"]).values, ref_mem.values)
    with pytest.raises(OutputError, match="already exist.*overwrite"):
        write_example_pair(tmp_path / "pair")
    write_example_pair(tmp_path / "pair", overwrite=True, shift_x=0.0)
    assert json.loads(out["truth_path"].read_text())["dx"] == 0.0
    assert not [p for p in (tmp_path / "pair").iterdir() if p.name.startswith(".")]  # no temp files left
