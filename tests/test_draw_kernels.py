"""The compiled one-pass loops of the draw (:mod:`xdem.kernels.draw`) select exactly the pixels,
and return exactly the values, of the numpy expressions they replace (written out here as the
reference: per-pixel hash array, boolean masks, ``nonzero``, padded window cuts, float64 copies).

Random blocks with NaNs, odd shapes, offsets anywhere in a grid (at its edges and inside), hash
bounds from "none" to "every pixel", several seeds. Equality is exact (bit for bit where values
are floats, ``assert_array_equal``): the sample, and every fitted number, must not change.
"""

from __future__ import annotations

import numpy as np
import pytest

from xdem.kernels.draw import diff_extremes
from xdem.sampling import (
    _bound,
    _candidates_block,
    _pixel_hash,
    below,
    hash_bound,
    join_windows,
    partial_windows,
    select_finite_below,
)
from xdem.stats import _dh_block
from xdem.verdict import _written_block

#: (nrows, ncols, row0, col0, ny, nx): blocks at the grid's corners, edges and inside, odd sizes.
BLOCKS = [(40, 50, 0, 0, 13, 17), (40, 50, 27, 33, 13, 17), (61, 47, 20, 0, 21, 19), (61, 47, 0, 30, 25, 17),
          (300, 301, 123, 201, 37, 53), (9, 11, 0, 0, 9, 11), (64, 64, 63, 63, 1, 1)]
#: Hash bounds: none, a few percent, most, every pixel (2**64).
LIMITS = [0, hash_bound(0.03), hash_bound(0.6), 2**64]


def _reference_padded_windows(block: np.ndarray, lrow: np.ndarray, lcol: np.ndarray, half: int) -> np.ndarray:
    size, pad = 2 * half + 2, 2 * half + 1
    padded = np.full((block.shape[0] + 2 * pad, block.shape[1] + 2 * pad), np.nan, dtype=np.float32)
    padded[pad:-pad, pad:-pad] = block
    view = np.lib.stride_tricks.sliding_window_view(padded, (size, size))
    return view[np.asarray(lrow) + pad - half, np.asarray(lcol) + pad - half].astype(np.float32)


def _reference_candidates(valid, arrays, names, win_names, half, limit, nrows, ncols, seed, row0, col0):
    """The numpy expressions of the draw before the compiled loop (the definition)."""
    ny, nx = valid.shape
    if win_names:
        er0, er1 = max(row0 - half - 1, 0), min(row0 + ny + half, nrows)
        ec0, ec1 = max(col0 - half - 1, 0), min(col0 + nx + half, ncols)
        hx = _pixel_hash(er0, ec0, (er1 - er0, ec1 - ec0), ncols, seed)
        h = hx[row0 - er0 : row0 - er0 + ny, col0 - ec0 : col0 - ec0 + nx]
    else:
        h = _pixel_hash(row0, col0, valid.shape, ncols, seed)
    keep = valid & below(h, limit)
    r, c = np.nonzero(keep)
    out = {"h": h[r, c], "row": r.astype(np.int64) + row0, "col": c.astype(np.int64) + col0,
           "n_valid": np.int64(np.count_nonzero(valid))}
    for name, arr in zip(names, arrays[: len(names)]):
        out[name] = arr[r, c].astype(np.float64)
    if win_names:
        cand = below(hx, limit)
        cand[row0 - er0 : row0 - er0 + ny, col0 - ec0 : col0 - ec0 + nx] = keep
        wr, wc = np.nonzero(cand)
        out["wkey"] = (wr.astype(np.int64) + er0) * ncols + (wc.astype(np.int64) + ec0)
        for name, arr in zip(win_names, arrays[len(names) :]):
            out[name] = _reference_padded_windows(arr, wr + (er0 - row0), wc + (ec0 - col0), half)
    return out


def _random_block(rng: np.random.Generator, ny: int, nx: int, dtype: type = np.float32,
                  nan_fraction: float = 0.2, infs: bool = True) -> np.ndarray:
    z = (rng.normal(size=(ny, nx)) * 100).astype(dtype)
    z[rng.random((ny, nx)) < nan_fraction] = np.nan
    if infs and z.size > 4:
        z.flat[rng.integers(0, z.size, 2)] = [np.inf, -np.inf]
    return z


@pytest.mark.parametrize("nrows, ncols, row0, col0, ny, nx", BLOCKS)
def test_draw_block_selects_the_pixels_and_windows_of_the_numpy_expressions(nrows, ncols, row0, col0, ny, nx):
    rng = np.random.default_rng(row0 * 7 + col0)
    for limit in LIMITS + [_bound(0.1, nrows * ncols)]:
        for seed in (None, 3):
            for half in (1, 2):
                valid = rng.random((ny, nx)) < 0.8
                a = _random_block(rng, ny, nx)
                w1, w2 = _random_block(rng, ny, nx), _random_block(rng, ny, nx, np.float64)
                for win_names, arrays in (((), (a,)), (("w1", "w2"), (a, w1, w2))):
                    kw = dict(names=("a",), win_names=win_names, half=half, limit=limit, nrows=nrows, ncols=ncols,
                              random_state=seed, row0=row0, col0=col0)
                    got = _candidates_block(valid, *arrays, **kw)
                    ref = _reference_candidates(valid, arrays, ("a",), win_names, half, limit, nrows, ncols, seed,
                                                row0, col0)
                    assert sorted(got) == sorted(ref)
                    for k in ref:
                        assert np.asarray(got[k]).dtype == np.asarray(ref[k]).dtype, k
                        np.testing.assert_array_equal(got[k], ref[k], err_msg=k)


def test_partial_windows_equal_cuts_of_the_padded_block():
    rng = np.random.default_rng(1)
    for dtype in (np.float32, np.float64):
        block = _random_block(rng, 23, 31, dtype)
        for half in (1, 2, 3):
            lrow = rng.integers(-half - 1, 23 + half, 200)  # what the padded reference reaches
            lcol = rng.integers(-half - 1, 31 + half, 200)
            got = partial_windows(block, lrow, lcol, half)
            assert got.dtype == np.float32
            np.testing.assert_array_equal(got, _reference_padded_windows(block, lrow, lcol, half))


def test_join_windows_is_the_fmax_of_the_pieces_of_each_wanted_window():
    """Windows cut in pieces at random (each pixel of a window in one piece, NaN elsewhere),
    pieces shuffled, split in lists, with pieces of unwanted windows: joined as the element-wise
    fmax of each window's pieces, i.e. the original windows; a missing piece is an error."""
    rng = np.random.default_rng(2)
    windows = rng.normal(size=(300, 6, 6)).astype(np.float32)
    windows[rng.random(windows.shape) < 0.1] = np.nan
    keys = np.sort(rng.choice(10**6, 300, replace=False)).astype(np.int64)
    owner = rng.integers(0, 3, windows.shape)  # which of 3 pieces holds each pixel
    pk, pp = [], []
    for piece in range(3):
        pk.append(keys)
        pp.append(np.where(owner == piece, windows, np.nan).astype(np.float32))
    pk.append(np.array([5, 10**7], dtype=np.int64))  # pieces of windows not wanted
    pp.append(rng.normal(size=(2, 6, 6)).astype(np.float32))
    order = rng.permutation(sum(len(k) for k in pk))
    k_all, p_all = np.concatenate(pk)[order], np.concatenate(pp)[order]
    wanted = keys[::2]
    expected = windows[::2]
    np.testing.assert_array_equal(join_windows(k_all, p_all, wanted), expected)
    split = [0, 100, 101, 700, len(k_all)]
    got = join_windows([k_all[a:b] for a, b in zip(split, split[1:])], [p_all[a:b] for a, b in zip(split, split[1:])],
                       wanted)
    np.testing.assert_array_equal(got, expected)
    with pytest.raises(AssertionError, match="missing"):
        join_windows(k_all, p_all, np.r_[wanted, 10**7 + 1])


@pytest.mark.parametrize("nrows, ncols, row0, col0, ny, nx", BLOCKS)
def test_select_finite_below_equals_the_masks_it_replaces(nrows, ncols, row0, col0, ny, nx):
    rng = np.random.default_rng(ny * nx)
    for limit in LIMITS:
        for seed in (None, 7):
            a = _random_block(rng, ny, nx)
            b = _random_block(rng, ny, nx, np.float64)
            mask = rng.random((ny, nx)) < 0.7
            r, c, n_finite, n_mask = select_finite_below(a, b, mask, limit=limit, ncols=ncols, random_state=seed,
                                                         row0=row0, col0=col0)
            finite = np.isfinite(a) & np.isfinite(b)
            keep = finite & mask & below(_pixel_hash(row0, col0, (ny, nx), ncols, seed), limit)
            er, ec = np.nonzero(keep)
            np.testing.assert_array_equal(r, er)
            np.testing.assert_array_equal(c, ec)
            assert (n_finite, n_mask) == (int(finite.sum()), int((finite & mask).sum()))


def test_diff_extremes_equal_numpy_on_the_valid_differences():
    rng = np.random.default_rng(4)
    for dtypes in ((np.float32, np.float32), (np.float32, np.float64), (np.float64, np.float32)):
        ref, other = _random_block(rng, 29, 41, dtypes[0]), _random_block(rng, 29, 41, dtypes[1])
        mask = rng.random(ref.shape) < 0.5
        ok = mask & np.isfinite(ref) & np.isfinite(other)
        d = (np.asarray(other, dtype=np.float64) - ref)[ok]
        assert diff_extremes(ref, mask, other) == (int(ok.sum()), d.min(), d.max())
    assert diff_extremes(ref, np.zeros(ref.shape, bool), other) == (0, np.inf, -np.inf)


@pytest.mark.parametrize("nrows, ncols, row0, col0, ny, nx", BLOCKS[:5])
def test_dh_block_equals_its_numpy_definition(nrows, ncols, row0, col0, ny, nx):
    rng = np.random.default_rng(5 + row0)
    ref = _random_block(rng, ny, nx)
    stable = rng.random((ny, nx)) < 0.8
    others = (_random_block(rng, ny, nx), _random_block(rng, ny, nx, np.float64), np.full((ny, nx), np.nan, np.float32))
    for limit in LIMITS:
        got = _dh_block(ref, stable, *others, limit=limit, ncols=ncols, random_state=2, row0=row0, col0=col0)
        valid = np.isfinite(ref) & stable
        counts = [np.count_nonzero(valid & np.isfinite(o)) for o in others]
        extremes = []
        for o in others:
            d = (np.asarray(o, dtype=np.float64) - ref)[valid & np.isfinite(o)]
            extremes.append((d.min(), d.max()) if d.size else (np.inf, -np.inf))
        keep = valid & below(_pixel_hash(row0, col0, ref.shape, ncols, 2), limit)
        r, c = np.nonzero(keep)
        np.testing.assert_array_equal(got["counts"], counts)
        np.testing.assert_array_equal(got["extremes"], np.array(extremes))
        np.testing.assert_array_equal(got["values"], np.stack([a[r, c].astype(np.float64) for a in (ref, *others)]))


def test_verdict_block_equals_its_numpy_definition():
    rng = np.random.default_rng(6)
    for row0, col0, ny, nx in ((0, 0, 31, 29), (40, 17, 33, 35)):
        ref, aligned = _random_block(rng, ny, nx, infs=False), _random_block(rng, ny, nx)
        stable = rng.random((ny, nx)) < 0.8
        limit = hash_bound(0.3)
        got = _written_block(None, ref, stable, aligned, limit=limit, ncols=200, random_state=None, res=(5.0, -5.0),
                             row0=row0, col0=col0)
        overlap = np.isfinite(ref) & np.isfinite(aligned)
        keep = overlap & stable
        assert int(got["n_stable"][0]) == int(keep.sum()) and int(got["n_overlap"][0]) == int(overlap.sum())
        r, c = np.nonzero(keep & below(_pixel_hash(row0, col0, ref.shape, 200, None), limit))
        np.testing.assert_array_equal(got["after"], aligned[r, c].astype(np.float64) - ref[r, c].astype(np.float64))
        assert len(got["slope"]) == len(r) > 0
