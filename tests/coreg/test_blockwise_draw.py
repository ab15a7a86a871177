"""The draws of a group of BlockwiseCoreg tiles in one pass (xdem.coreg._blockwise_draw) and the
per-tile budget of the step's default subsample (xdem.coreg._blockwise_budget)."""

from __future__ import annotations

import dask
import numpy as np
import pytest

import xdem
from xdem.coreg import BlockwiseCoreg, NuthKaab
from xdem.coreg._blockwise_budget import TILE_SUBSAMPLE_FLOOR, tile_template
from xdem.coreg._blockwise_draw import chunk_bands, draw_bands, draw_tiles, tile_groups
from xdem.coreg._data import FitData
from xdem.coreg._windows import sample_with_terrain
from xdem.errors import InputError


@pytest.fixture(scope="module")
def pair():
    ref, tba, _ = xdem.examples.example_pair(chunks=128)
    tba = tba.copy(data=tba.data.rechunk(128))
    holes = np.zeros(ref.shape, dtype=bool)
    holes[40:120, 30:90] = True  # a void across tile edges
    tba = tba.where(~holes)
    return ref.load(), tba.load()


def _data(ref, tba, chunks):
    ref, tba = ref.chunk(chunks), tba.chunk(chunks)
    return FitData(ref=ref, tba=tba, inlier=dask.array.ones(ref.shape, dtype=bool, chunks=ref.data.chunks), bias_vars={})


def _sub(data, tile):
    r0, r1, c0, c1 = tile
    return FitData(ref=data.ref.isel(y=slice(r0, r1), x=slice(c0, c1)), tba=data.tba.isel(y=slice(r0, r1), x=slice(c0, c1)),
                   inlier=data.inlier[r0:r1, c0:c1], bias_vars={})


@pytest.mark.parametrize("chunks", [64, 150])
@pytest.mark.parametrize("subsample", [700, 0.3, 10**6])
def test_group_draw_is_each_tiles_own_draw(pair, chunks, subsample):
    """Each tile's sample from the group's one pass is, bit for bit, the draw of the tile alone
    (:func:`sample_with_terrain` on the tile's slice: the same pixels, values, windows, slope,
    aspect and valid count), for any chunking (64 and 150 pixels against 100-pixel tiles, a void
    across tile edges: the second tile has too few candidates for a count and is drawn alone)."""
    ref, tba = pair
    data = _data(ref, tba, chunks)
    tiles = [(0, 100, 0, 100), (0, 100, 100, 200), (100, 200, 0, 117), (100, 200, 117, 250)]
    kw = dict(random_state=3, half=2, resampling="bilinear", terrain_method="horn")
    got = draw_tiles(data, [_sub(data, t) for t in tiles], tiles, subsample=subsample, **kw)
    for tile, g in zip(tiles, got):
        sub = _sub(_data(ref, tba, 100), tile)
        want = sample_with_terrain(sub, subsample=subsample, min_count=1, what="test", **kw)
        assert g is not None and g.sample.n_valid == want.sample.n_valid
        for k in ("row", "col", "ref"):
            np.testing.assert_array_equal(g.sample[k], want.sample[k])
        np.testing.assert_array_equal(g.slope, want.slope)
        np.testing.assert_array_equal(g.aspect, want.aspect)
        np.testing.assert_array_equal(g.sampler(0.3, -0.2), want.sampler(0.3, -0.2))


def test_tile_without_valid_pixel_draws_nothing(pair):
    ref, tba = pair
    data = _data(ref, tba.where(tba.x < tba.x[60]), 64)
    tiles = [(0, 50, 0, 50), (0, 50, 100, 150)]
    got = draw_tiles(data, [_sub(data, t) for t in tiles], tiles, subsample=500, random_state=None, half=2,
                     resampling="bilinear", terrain_method="horn")
    assert got[0] is not None and got[0].sample.n_valid > 1000 and got[1] is None


def test_groups_are_rows_of_tiles_within_the_memory_bound(monkeypatch):
    """Whole rows of tiles while their candidates fit in GROUP_BYTES, runs of a row beyond."""
    import xdem.coreg._blockwise_draw as draw_module

    tiles = [(r, r + 10, c, c + 10) for r in (0, 10) for c in (0, 10, 20)]
    assert tile_groups(tiles, 50) == [[0, 1, 2, 3, 4, 5]]
    one = draw_module._expected(1.0, tiles[0]) * draw_module._CANDIDATE_BYTES
    monkeypatch.setattr(draw_module, "GROUP_BYTES", 4 * one)
    assert tile_groups(tiles, 1.0) == [[0, 1, 2], [3, 4, 5]]
    monkeypatch.setattr(draw_module, "GROUP_BYTES", 2 * one)
    assert tile_groups(tiles, 1.0) == [[0, 1], [2], [3, 4], [5]]


def _counted(arr, seen):
    """``arr`` whose blocks record each computation of theirs in ``seen`` (block index -> times)."""
    def record(block, block_info=None):
        key = tuple(block_info[0]["chunk-location"])
        seen[key] = seen.get(key, 0) + 1
        return block
    return arr.map_blocks(record, dtype=arr.dtype)


@pytest.mark.parametrize("chunks", [64, 150])
def test_band_draw_decodes_each_chunk_once_and_equals_the_group_draw(pair, chunks):
    """Drawn band by band of rows of chunks (:func:`draw_bands`), each tile's sample is, bit for bit,
    that of the draw by groups of tiles (:func:`draw_tiles`), and each chunk of ``tba`` is computed
    once (the groups compute a row of chunks once per row of tiles meeting it: 100-pixel tiles
    over 64- and 150-pixel chunks; the void filled: a tile short of candidates is drawn again alone)."""
    import xdem.coreg._blockwise_draw as draw_module

    ref, tba = pair
    tba = tba.fillna(ref + 1.0)
    data = _data(ref, tba, chunks)
    seen: dict = {}
    counted = FitData(ref=data.ref, tba=data.tba.copy(data=_counted(data.tba.data, seen)), inlier=data.inlier,
                      bias_vars={})
    tiles = [(r, r + 100, c, min(c + 100, ref.shape[1])) for r in range(0, 300, 100) for c in range(0, ref.shape[1], 100)]
    kw = dict(subsample=700, random_state=3, half=2, resampling="bilinear", terrain_method="horn")
    row_one = [t for t in tiles if t[0] == 0]
    one = sum(draw_module._expected(700, t) * draw_module._CANDIDATE_BYTES for t in row_one)
    bands = chunk_bands(tiles, data.ref.data.chunks[0], 700)
    assert bands == [(0, 300)]  # every tile's candidates fit: one band
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(draw_module, "BAND_BYTES", 2.1 * one)  # about two rows of tiles: bands of rows of chunks
        bands = chunk_bands(tiles, data.ref.data.chunks[0], 700)
        mp.setattr(draw_module, "BAND_BYTES", 0.5 * one)
        assert chunk_bands(tiles, data.ref.data.chunks[0], 700) is None  # not one row of chunks fits: groups
    assert len(bands) == 2 and bands[0][0] == 0 and bands[-1][1] == 300 and bands[0][1] == bands[1][0]
    assert bands[0][1] in np.cumsum(data.ref.data.chunks[0])  # whole rows of chunks
    got = dict(pair_ for batch in draw_bands(counted, [_sub(counted, t) for t in tiles], tiles, bands, **kw)
               for pair_ in batch)
    assert sorted(got) == list(range(len(tiles)))
    meeting = {k for k in seen if k[0] * chunks < 300}
    assert set(seen) == meeting and all(v == 1 for v in seen.values())
    want = draw_tiles(data, [_sub(data, t) for t in tiles], tiles, **kw)
    for k, w in enumerate(want):
        g = got[k]
        assert g is not None and w is not None and g.sample.n_valid == w.sample.n_valid
        for name in ("row", "col", "ref"):
            np.testing.assert_array_equal(g.sample[name], w.sample[name])
        np.testing.assert_array_equal(g.slope, w.slope)
        np.testing.assert_array_equal(g.sampler(0.3, -0.2), w.sampler(0.3, -0.2))


def test_default_subsample_is_a_budget_for_the_whole_dem():
    """NuthKaab's default 500,000 pixels spread over the tiles, at least TILE_SUBSAMPLE_FLOOR a tile;
    an explicit subsample (upstream's per-tile meaning) and ``subsample_per_tile`` are kept; the
    user's step is not touched."""
    step = NuthKaab()
    assert tile_template(step, 64, None).subsample == TILE_SUBSAMPLE_FLOOR
    assert tile_template(step, 10, None).subsample == 50_000
    assert tile_template(step, 1, None).subsample == 500_000
    assert tile_template(NuthKaab(subsample=0.5), 64, None).subsample == 0.5
    assert tile_template(NuthKaab(subsample=123_456), 64, None).subsample == 123_456
    pipe = tile_template(NuthKaab() + xdem.coreg.VerticalShift(), 100, None)
    assert [s.subsample for s in pipe.steps] == [TILE_SUBSAMPLE_FLOOR, 1.0]
    assert tile_template(step, 64, 500_000).subsample == 500_000 and step.subsample == 500_000
    with pytest.raises(InputError, match="subsample_per_tile"):
        BlockwiseCoreg(subsample_per_tile=-3).fit(*xdem.examples.example_pair(chunks=128)[:2])
