"""Upstream xdem 0.2.3's ``BlockwiseCoreg`` surface: ``mp_config`` (a geoutils ``MultiprocConfig``)
or ``parent_path``, ``block_size_fit`` tiling as geoutils' ``compute_tiling`` (the last tile holds
the remainder), ``fit(ref, tba, inlier_mask); apply()`` writing the aligned DEM, then
``xdem.DEM(path)``, ``shape_tiling_grid`` and ``meta["outputs"]["row_col"]``.

The cases of upstream's ``tests/test_coreg/test_blockwise.py`` that use only the public API are
ported onto the bundled pair (written here; the RANSAC and per-tile point-cloud helpers are
upstream's internals, with no counterpart: our field is a thin-plate spline applied as one warp).
"""

from __future__ import annotations

import numpy as np
import pytest
from geoutils.raster.distributed_computing import MultiprocConfig

import xdem
from xdem.coreg import BlockwiseCoreg, NuthKaab
from xdem.errors import InputError
from xdem.examples import example_pair


@pytest.fixture(scope="module")
def pair():
    return example_pair(chunks=128)


def _nmad(dh: np.ndarray) -> float:
    return float(xdem.stats.nmad(dh[np.isfinite(dh)]))


def test_upstream_example_fit_apply_writes_the_aligned_dem(pair, tmp_path):
    """Upstream's gallery flow: apply() with no argument writes mp_config.outfile, read back with
    xdem.DEM; the same values as the lazy apply of the DEM; the user's config is not changed."""
    ref, tba, truth = pair
    mp_config = MultiprocConfig(chunk_size=200, outfile=str(tmp_path / "out" / "aligned_dem.tif"), cluster=None)
    blockwise = BlockwiseCoreg(NuthKaab(subsample=2000), mp_config=mp_config, block_size_fit=200)
    assert blockwise.shape_tiling_grid == (0, 0, 0) and not (tmp_path / "out").exists()  # the constructor stores only
    inlier_mask = np.ones(ref.shape, dtype=bool)
    blockwise.fit(ref, tba, inlier_mask)
    result = blockwise.apply()
    aligned = xdem.DEM(str(tmp_path / "out" / "aligned_dem.tif"))
    assert isinstance(result, xdem.DEM) and aligned.shape == ref.shape and mp_config.chunk_size == 200
    lazy = blockwise.apply(tba).values
    np.testing.assert_allclose(np.asarray(aligned.data.filled(np.nan), dtype=np.float64), lazy, atol=1e-3,
                               equal_nan=True)
    assert _nmad(lazy - ref.values) < 0.1 * _nmad(tba.values - ref.values)
    rows, cols, n = blockwise.shape_tiling_grid
    assert (rows, cols, n) == (2, 2, 4)
    assert sorted(blockwise.meta["outputs"]) == ["0_0", "0_1", "1_0", "1_1"]
    for value in blockwise.meta["outputs"].values():
        assert value["shift_x"] == pytest.approx(truth["shift_x"], abs=0.05)
        assert value["shift_y"] == pytest.approx(truth["shift_y"], abs=0.05)
        assert value["shift_z"] == pytest.approx(truth["shift_z"], abs=0.05)
    assert "iterative" in blockwise.meta["inputs"]  # the step's inputs, as upstream


def test_tiling_is_upstreams_compute_tiling(pair, tmp_path):
    """400 pixels in tiles of 150: upstream's 150, 150, 100 (ours would merge the remainder);
    the keys are the tiles whose fit gave a shift, within the grid."""
    ref, tba, _ = pair
    bw = BlockwiseCoreg(NuthKaab(subsample=1000), parent_path=str(tmp_path), block_size_fit=150).fit(ref, tba)
    assert bw.shape_tiling_grid == (3, 3, 4)
    assert sorted(set(bw.tiles_["row0"])) == [0, 150, 300] and max(bw.tiles_["row1"]) == 400
    keys = {tuple(map(int, k.split("_"))) for k in bw.meta["outputs"]}
    assert keys and all(0 <= r < 3 and 0 <= c < 3 for r, c in keys)


def test_parent_path_writes_aligned_dem_in_the_folder(pair, tmp_path):
    ref, tba, _ = pair
    bw = BlockwiseCoreg(NuthKaab(subsample=1000), parent_path=str(tmp_path / "p"), block_size_fit=200).fit(ref, tba)
    bw.apply()
    assert (tmp_path / "p" / "aligned_dem.tif").exists()


def test_init_keeps_the_block_sizes(pair, tmp_path):
    """Upstream's test_init: the sizes given are the ones kept."""
    mp_config = MultiprocConfig(chunk_size=25, outfile=str(tmp_path / "test.tif"))
    bw = BlockwiseCoreg(step=NuthKaab(), mp_config=mp_config, block_size_fit=25, block_size_apply=25)
    assert bw.block_size_apply == 25 and bw.block_size_fit == 25 and bw.mp_config is mp_config


@pytest.mark.parametrize("block_size", [150, 400])
def test_end_to_end_on_a_crop_of_one_tile(pair, tmp_path, block_size):
    """Upstream's test_blockwise_coreg_pipeline: the DEMs cropped to one tile, fit then apply();
    the output file has the input's shape and the alignment is better."""
    ref, tba, _ = pair
    r, t = ref[:block_size, :block_size], tba[:block_size, :block_size]
    mp_config = MultiprocConfig(chunk_size=block_size, outfile=str(tmp_path / "test.tif"))
    bw = BlockwiseCoreg(step=NuthKaab(subsample=2000), mp_config=mp_config, block_size_fit=block_size, min_tiles=1)
    bw.fit(r, t, np.ones(r.shape, dtype=bool))
    bw.apply()
    aligned = xdem.DEM(str(tmp_path / "test.tif"))
    assert aligned.shape == r.shape and bw.shape_tiling_grid == (1, 1, 4)
    after = np.asarray(aligned.data.filled(np.nan), dtype=np.float64) - r.values
    assert _nmad(after) < 0.2 * _nmad(t.values - r.values)


def test_upstream_surface_errors(pair, tmp_path):
    ref, tba, _ = pair
    mp_config = MultiprocConfig(chunk_size=200, outfile=str(tmp_path / "a.tif"))
    with pytest.raises(InputError, match="only one of mp_config and parent_path"):
        BlockwiseCoreg(NuthKaab(), mp_config=mp_config, parent_path=str(tmp_path)).fit(ref, tba)
    with pytest.raises(InputError, match="step must be an instance, e.g. NuthKaab"):
        BlockwiseCoreg(NuthKaab, block_size=200).fit(ref, tba)  # type: ignore[arg-type]
    ours = BlockwiseCoreg(NuthKaab(subsample=1000), block_size=200).fit(ref, tba)
    with pytest.raises(InputError, match="apply\\(\\) without a DEM writes the aligned DEM to a file") as err:
        ours.apply()
    assert "\n" not in str(err.value)
    fitted = BlockwiseCoreg(NuthKaab(subsample=1000), parent_path=str(tmp_path), block_size_fit=200).fit(ref, tba)
    loaded = xdem.coreg.Coreg.from_json(fitted.to_json())
    with pytest.raises(InputError, match="loaded, not fitted here: give the DEM to align"):
        loaded.apply()
    np.testing.assert_array_equal(loaded.apply(tba).values, fitted.apply(tba).values)
    with_config = BlockwiseCoreg(NuthKaab(subsample=1000), mp_config=mp_config, block_size_fit=200).fit(ref, tba)
    assert xdem.coreg.Coreg.from_json(with_config.to_json()).get_params()["mp_config"] is None  # not saved


def test_chunk_size_other_than_the_tile_size_warns(pair, tmp_path):
    """Upstream tiles by block_size_fit (default 500) and overwrites chunk_size with it: said, not silent."""
    ref, tba, _ = pair
    mp_config = MultiprocConfig(chunk_size=100, outfile=str(tmp_path / "a.tif"))
    with pytest.warns(UserWarning, match="tiles by block_size_fit=200 as upstream"):
        bw = BlockwiseCoreg(NuthKaab(subsample=1000), mp_config=mp_config, block_size_fit=200).fit(ref, tba)
    assert bw.shape_tiling_grid == (2, 2, 4) and mp_config.chunk_size == 100
