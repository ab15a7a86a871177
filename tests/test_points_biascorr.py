"""The bias corrections on points (issue 15, part 2): BiasCorr, DirectionalBias, TerrainBias
fitted on ``dh`` at the points with their variables evaluated there, applied lazily to the DEM.

Truth: the DEM is :class:`truth.SineTerrain` on the grid of ``test_points`` plus a known bias
(a linear function of its own elevation, a sinusoid along northing, a multiple of its slope);
the points (ground tracks) are exact samples of the terrain, or the noisy copy. The corrected
DEM is compared with the unbiased one.

Tolerances: the biases are exact functions of the variables, so the exact points give the
correction to float32 rounding (measured 2e-4 m at most for the elevation bias, 4e-6 m for
the sinusoid, 1e-4 m median for the slope bias, whose slope at the points is interpolated
bilinearly); with noisy points (0.3 m noise over ~9000 points) the errors are those of the
noise on the fitted parameters (measured 0.014 m at most, 0.009 m, 0.003 m median): held to
0.03 m, 0.02 m and 0.01 m. Binned TerrainBias on slope: see the test.
"""

from __future__ import annotations

import dask
import geopandas as gpd
import numpy as np
import pytest
import test_points as tp
import xarray as xr
from helpers import count_computes

import xdem
from xdem.errors import InputError


@pytest.fixture(scope="module")
def pts() -> gpd.GeoDataFrame:
    x, y = tp.tracks()
    z = tp.TERRAIN(x, y)
    return gpd.GeoDataFrame({"h": z, "h_noisy": tp.noisy(z)}, geometry=gpd.points_from_xy(x, y), crs=tp.CRS)


@pytest.fixture(scope="module")
def dem0() -> xr.DataArray:
    return tp.shifted((0.0, 0.0, 0.0))


@pytest.mark.parametrize(("column", "tol"), [("h", 0.001), ("h_noisy", 0.03)])
def test_terrain_bias_elevation_points(column: str, tol: float, pts, dem0) -> None:
    dem = dem0 + 0.01 * (dem0 - 1000.0)
    make = lambda: xdem.coreg.TerrainBias(terrain_attribute="elevation", fit_or_bin="fit", fit_func="linear")  # noqa: E731
    tb = make().fit(pts, dem, z_column=column)
    with count_computes() as cc:
        out = tb.apply(dem)
    assert cc.count == 0 and isinstance(out.data, dask.array.Array)
    assert float(np.nanmax(np.abs((out - dem0).values))) <= tol
    assert tb.n_points_ == len(pts) and tb.n_outside_ == 0 and tb.passes_ == 2
    if column == "h_noisy":
        assert int(0.03 * len(pts)) <= tb.n_outliers_ <= int(0.03 * len(pts)) + 0.005 * len(pts)
    # points to align: dh = points - DEM, the same model negated
    rev = make().fit(dem, pts, z_column=column)
    np.testing.assert_allclose(rev.fit_params_, -tb.fit_params_, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize(("column", "tol"), [("h", 0.001), ("h_noisy", 0.02)])
def test_directional_bias_points(column: str, tol: float, pts, dem0) -> None:
    wave = 0.5 * np.sin(2 * np.pi * (dem0.y - float(dem0.y.mean())) / 600.0)
    db = xdem.coreg.DirectionalBias(angle=90).fit(pts, dem0 + wave, z_column=column)
    assert abs(db.wavelengths_[0] - 600.0) <= 1.0 and abs(db.amplitudes_[0] - 0.5) <= tol
    assert float(np.nanmax(np.abs((db.apply(dem0 + wave) - dem0).values))) <= tol


@pytest.mark.parametrize(("column", "tol", "tol_binned"), [("h", 0.001, 0.005), ("h_noisy", 0.01, 0.02)])
def test_bias_vars_and_slope_points(column: str, tol: float, tol_binned: float, pts, dem0) -> None:
    slope = xdem.terrain.slope(dem0)
    dem = dem0 + 0.02 * slope
    bc = xdem.coreg.BiasCorr(fit_func="linear").fit(pts, dem, z_column=column, bias_vars={"slope": slope})
    assert float(np.nanmedian(np.abs((bc.apply(dem, bias_vars={"slope": slope}) - dem0).values))) <= tol
    tb = xdem.coreg.TerrainBias(terrain_attribute="slope", bin_sizes=20).fit(pts, dem, z_column=column)
    # binned (20 medians, interpolated between bin centres) against the slope of the biased DEM
    # (apply computes it from the DEM it corrects): measured 0.003 m exact, 0.012 m noisy
    assert float(np.nanmedian(np.abs((tb.apply(dem) - dem0).values))) <= tol_binned


def test_biascorr_points_errors(pts, dem0) -> None:
    with pytest.raises(InputError, match="needs bias_vars on the DEM's grid"):
        xdem.coreg.BiasCorr().fit(pts, dem0, z_column="h")
    tb = xdem.coreg.TerrainBias(terrain_attribute="elevation", fit_func="linear", fit_or_bin="fit")
    tb.fit(dem0, pts, z_column="h")
    with pytest.raises(InputError, match="cannot move points"):  # variables on a grid: documented
        tb.apply_points(pts, z_name="h")


def test_pipeline_shift_then_bias_points(pts, dem0) -> None:
    """NuthKaab + TerrainBias on points, either way: the bias step is last, so points to
    align need not be moved by it (a bias correction cannot move points)."""
    dem = tp.shifted(tp.MOVES[0])
    biased = dem + 0.01 * (dem - 1000.0)
    make = lambda: xdem.coreg.NuthKaab() + xdem.coreg.TerrainBias(  # noqa: E731
        terrain_attribute="elevation", fit_or_bin="fit", fit_func="linear")
    fwd = make().fit(pts, biased, z_column="h")
    assert abs(fwd.steps[0].shift_x_ + tp.MOVES[0][0]) <= 0.1  # the bias tilts dh a little: NK is biased
    out = fwd.apply(biased)
    assert float(np.nanmedian(np.abs((out - dem0).values[20:-20, 20:-20]))) <= 0.02
    rev = make().fit(biased, pts, z_column="h")
    assert abs(rev.steps[0].shift_x_ - tp.MOVES[0][0]) <= 0.1
