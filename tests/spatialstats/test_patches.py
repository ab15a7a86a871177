"""Upstream 0.2.3's patches method against the glacier set's known error correlation.

The spread (NMAD) of the means of disks of 200 m radius of the set's standardised errors
(nugget 0.2, Gaussian 0.8 of range 400 m) estimates the standard error of such a mean, which the
true model gives exactly (``neff_exact`` over the disk's pixels): 0.623. About 350 independent
disks per lattice offset give a relative standard error of ~1.17 / sqrt(2 * 350) = 4 % for one
offset (the offsets' average is not better by much: they share pixels), so the tolerance is 10 %
(measured 2.3 % off).
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pandas as pd
import pytest

from xdem import spatialstats as ss
from xdem.errors import InputError
from xdem.examples.glaciers import glacier_set
from xdem.masks import labels_like
from xdem.spatialstats.patches import _kernel

TRUE = pd.DataFrame({"model": ["spherical", "gaussian"], "range": [1.0, 400.0], "psill": [0.2, 0.8]})
AREA = np.pi * 200.0**2


@pytest.fixture(scope="module")
def standardised():
    g = glacier_set((400, 400), chunks=200)
    glaciers = labels_like(g.outlines, g.ref).compute() > 0
    return np.where(glaciers, np.nan, (g.ddem / g.error).values.astype(np.float64))


def test_patches_spread_matches_the_true_standard_error(standardised):
    df = ss.patches_method(standardised, areas=[AREA], gsd=20.0)
    rows, cols = np.nonzero(_kernel(AREA, 20.0, "circular"))
    xy = np.column_stack([cols * 20.0, rows * 20.0])
    truth = 1 / np.sqrt(ss.neff_exact(xy, np.ones(len(xy)), TRUE))
    assert list(df.columns) == ["nmad", "nb_indep_patches", "exact_areas", "areas"]
    assert df["nmad"].iloc[0] == pytest.approx(truth, rel=0.10)
    assert df["exact_areas"].iloc[0] == len(xy) * 400.0 and df["nb_indep_patches"].iloc[0] > 200


def test_patches_identical_for_numpy_and_any_chunking(standardised):
    a = ss.patches_method(standardised, areas=[AREA], gsd=20.0, patch_shape="square")
    b = ss.patches_method(da.from_array(standardised, chunks=(96, 128)), areas=[AREA], gsd=20.0, patch_shape="square")
    pd.testing.assert_frame_equal(a, b)
    with pytest.raises(InputError, match="vectorized"):
        ss.patches_method(standardised, areas=[AREA], gsd=20.0, vectorized=False)


def test_patches_crossing_the_grid_edge_are_left_out():
    """As upstream (scipy convolution with cval=nan): a patch whose kernel square reaches beyond the
    grid is left out even when 80 % of it is inside. On 300 x 300 valid pixels, p x p kernels fit at
    (300 - p + 1)^2 centres, split over p^2 offsets: exact counts, for any chunking."""
    ones = np.ones((300, 300))
    for values in (ones, da.from_array(ones, chunks=(70, 110))):
        square = ss.patches_method(values, areas=[25.0], gsd=1.0, patch_shape="square")  # p = 5
        disk = ss.patches_method(values, areas=[25.0 * np.pi], gsd=1.0)  # p = 10
        assert square["nb_indep_patches"].iloc[0] == pytest.approx(296**2 / 25, rel=1e-12)
        assert disk["nb_indep_patches"].iloc[0] == pytest.approx(291**2 / 100, rel=1e-12)
