"""Gap filling gives identical values for any chunking and for numpy or dask input.

IDW: each pixel sums its disc in a fixed order, from a halo of exactly the search distance;
hypsometric: medians are exact order statistics, so the per-glacier tables (and the fill) do
not depend on the blocks; normalised regional: the only float sums (the fit's weights) are
rounded before the fit.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import xdem
from xdem.examples.glaciers import glacier_set


@pytest.fixture(scope="module")
def arrays():
    g = glacier_set((300, 300), chunks=300)
    return g.ddem.values, g.ref.values, g.index.values


CHUNKINGS = [(300, 300), (97, 131), (64, 300)]


@pytest.mark.parametrize("func", ["idw_interpolation", "local_hypsometric_interpolation",
                                  "norm_regional_hypsometric_interpolation", "hypsometric_interpolation"])
def test_same_values_for_any_chunking_and_for_numpy(arrays, func):
    dh, z, index = arrays
    f = getattr(xdem.volume, func)

    def run(wrap):
        if func == "idw_interpolation":
            return f(wrap(dh))
        return f(wrap(dh), wrap(z), wrap(index if func != "hypsometric_interpolation" else index > 0))

    ref = np.ma.filled(np.ma.asarray(run(lambda a: a)).astype(np.float64), np.nan)
    for chunks in CHUNKINGS:
        got = np.asarray(run(lambda a, c=chunks: da.from_array(a, chunks=c)).compute())
        assert np.array_equal(got, ref, equal_nan=True), chunks
    on = index > 0
    assert np.isnan(ref[on]).sum() < np.isnan(dh[on]).sum() / 2  # something was filled


@pytest.mark.parametrize("method", ["local_hypsometric", "norm_regional_hypsometric"])
def test_ddem_interpolate_is_the_same_for_any_chunking(method):
    results = []
    for chunks in (300, (97, 131)):
        g = glacier_set((300, 300), chunks=chunks)
        ddem = xdem.dDEM(g.ddem, start_time=g.start, end_time=g.end)
        results.append(np.asarray(ddem.interpolate(method, reference_elevation=g.ref, mask=g.outlines)))
    assert np.array_equal(results[0], results[1], equal_nan=True)
