"""Spatial error propagation (upstream 0.2.3's names) against repeated draws of the glacier set's errors.

Coverage: the standard errors of the mean error over the three glaciers of the set, from the
true error map and the true correlation (nugget 0.2 as a spherical model of 1 m range, Gaussian
0.8 of range 400 m), are checked on 150 independent error fields
(:func:`~xdem.examples.glaciers.standard_error_field` with seeds 1-150): the fraction of the
450 glacier means within one standard error must be 68.3 % within 3 binomial standard
deviations (sqrt(0.683 * 0.317 / 450) = 2.2 %, so +-6.6 %), and the mean squared normalised
error 1 within 3 sqrt(2 / 450) = 0.2 (the 450 means are independent: the glaciers lie several
ranges apart).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import xdem
from xdem import spatialstats as ss
from xdem.errors import InputError
from xdem.examples.glaciers import glacier_set, standard_error_field

TRUE = pd.DataFrame({"model": ["spherical", "gaussian"], "range": [1.0, 400.0], "psill": [0.2, 0.8]})
DRAWS = 150


@pytest.fixture(scope="module")
def glaciers():
    g = glacier_set((400, 400), chunks=200)
    areas = [g.outlines.iloc[[i]] for i in range(len(g.outlines))]
    se = np.array(ss.spatial_error_propagation(areas, g.error, TRUE))
    return g, areas, se


def test_standard_errors_cover_repeated_draws(glaciers):
    g, _areas, se = glaciers
    index, sigma = g.index.values, g.error.values.astype(np.float64)
    n = np.bincount(index.ravel(), minlength=4)[1:]
    normalised = []
    for seed in range(1, DRAWS + 1):
        e = sigma * standard_error_field(index.shape, resolution=20.0, noise=g.noise, seed=seed)
        means = np.bincount(index.ravel(), weights=e.ravel(), minlength=4)[1:] / n
        normalised.append(means / se)
    r = np.concatenate(normalised)
    tol = 3 * np.sqrt(0.683 * 0.317 / r.size)
    assert abs(float(np.mean(np.abs(r) < 1)) - 0.683) < tol
    assert abs(float(np.mean(r**2)) - 1) < 3 * np.sqrt(2 / r.size)


def test_identical_for_any_chunking_and_float_areas(glaciers):
    g, areas, se = glaciers
    g2 = glacier_set((400, 400), chunks=(96, 128))
    assert ss.spatial_error_propagation(areas, g2.error, TRUE) == se.tolist()
    area = float(areas[0].area.iloc[0])
    got = ss.spatial_error_propagation([area], g.error.values, TRUE)[0]
    mean_error = float(np.nanmean(g.error.values.astype(np.float64)))
    assert got == pytest.approx(mean_error / np.sqrt(ss.neff_circular_approx_numerical(area, TRUE)), rel=1e-6)
    with pytest.raises(InputError, match="georeferenced"):
        ss.spatial_error_propagation(areas, g.error.values, TRUE)


def test_fitted_error_map_gives_close_standard_errors(glaciers):
    g, areas, se = glaciers
    errors, _df, _fun = ss.infer_heteroscedasticity_from_stable(g.ddem, [xdem.terrain.slope(g.ref)],
                                                                unstable_mask=g.outlines)
    fitted = np.array(ss.spatial_error_propagation(areas, errors, TRUE))
    np.testing.assert_allclose(fitted, se, rtol=0.10)  # the error map is within ~7 % per slope bin


def test_neff_of_points():
    xy = np.stack(np.meshgrid(np.arange(0.0, 300.0, 20.0), np.arange(0.0, 200.0, 20.0)), -1).reshape(-1, 2)
    e = np.ones(len(xy))
    nugget = pd.DataFrame({"model": ["spherical"], "range": [1.0], "psill": [1.0]})
    assert ss.neff_exact(xy, e, nugget) == pytest.approx(len(xy), rel=1e-12)  # uncorrelated: every point counts
    exact = ss.neff_exact(xy, e, TRUE)
    assert 1 < exact < len(xy)
    assert ss.neff_hugonnet_approx(xy, e, TRUE, subsample=len(xy)) == pytest.approx(exact, rel=1e-12)
    assert ss.neff_hugonnet_approx(xy, e, TRUE, subsample=60, random_state=3) == pytest.approx(exact, rel=0.1)


def test_number_effective_samples_of_shapes(glaciers):
    g, areas, _se = glaciers
    on_grid = ss.number_effective_samples(areas[0], TRUE, rasterize_resolution=g.error)
    at_res = ss.number_effective_samples(areas[0], TRUE, rasterize_resolution=20.0)
    assert at_res == pytest.approx(on_grid, rel=0.02)  # the same polygon on two 20 m grids
    disk = ss.number_effective_samples(float(areas[0].area.iloc[0]), TRUE)
    assert disk == ss.neff_circular_approx_numerical(float(areas[0].area.iloc[0]), TRUE)
    assert 0.7 * on_grid < disk < on_grid  # the disk of the same area is conservative (Rolstad et al. 2009)
