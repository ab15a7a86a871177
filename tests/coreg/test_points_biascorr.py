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
import point_tracks as tp
import pytest
import xarray as xr
from helpers import count_computes

import xdem
from xdem.errors import InputError


@pytest.fixture(scope="module")
def pts() -> gpd.GeoDataFrame:
    return tp.track_gdf()


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
    db = xdem.coreg.DirectionalBias(angle=90, fit_or_bin="fit").fit(pts, dem0 + wave, z_column=column)
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
    bc = xdem.coreg.BiasCorr(fit_func="linear").fit(dem0, pts, z_column="h", bias_vars={"elevation": dem0})
    with pytest.raises(InputError, match=r"apply_points\(\) needs them at the points too, missing \['elevation'\]"):
        bc.apply_points(pts, z_name="h")
    with pytest.raises(InputError, match="has 3 values for"):
        bc.apply_points(pts, z_name="h", bias_vars={"elevation": np.zeros(3)})
    tb = xdem.coreg.TerrainBias(terrain_attribute="slope", fit_func="linear", fit_or_bin="fit").fit(dem0, pts, z_column="h")
    with pytest.raises(InputError, match=r"needs the slope at the points"):
        tb.apply_points(pts, z_name="h")


def _corrected(gdf: gpd.GeoDataFrame, column: str) -> np.ndarray:
    return np.asarray(gdf[column], dtype=np.float64)


def test_bias_corrections_apply_to_points(pts, dem0) -> None:
    """Points to align carrying a bias (a reference DEM): each bias correction fitted on them
    applies to the points themselves (apply_points), their variables taken at the points: a
    slope grid interpolated there (or a value per point), the along-track coordinate of the
    points, their own elevation. The corrected points match the exact terrain: to 0.002 m for
    the slope and along-track biases (exact functions of the variables; the slope grid is
    interpolated bilinearly at the points both in the fit and here), and for the elevation bias
    to 1 % of the bias (exactly -0.01 bias: the model, a function of the reference's elevation, is evaluated at the
    biased elevation of the points, as apply evaluates it at the DEM being corrected: measured
    below that)."""
    h = np.asarray(pts["h"], dtype=np.float64)
    slope = xdem.terrain.slope(dem0)
    x, y = np.asarray(pts.geometry.x), np.asarray(pts.geometry.y)
    slope_at = xdem.coreg.biascorr._values_of(slope, "slope", x, y, tp.CRS)
    biased = pts.assign(h=h + 0.02 * slope_at)
    bc = xdem.coreg.BiasCorr(fit_func="linear").fit(dem0, biased, z_column="h", bias_vars={"slope": slope})
    for given in (slope, slope_at):
        out = bc.apply_points(biased, z_name="h", bias_vars={"slope": given})
        assert np.nanmax(np.abs(_corrected(out, "h") - h)) <= 0.002
    assert np.array_equal(np.asarray(biased["h"]), h + 0.02 * slope_at)  # the input is not modified

    wave = 0.5 * np.sin(2 * np.pi * (y - float(dem0.y.mean())) / 600.0)
    db = xdem.coreg.DirectionalBias(angle=90, fit_or_bin="fit").fit(dem0, pts.assign(h=h + wave), z_column="h")
    out = db.apply_points(pts.assign(h=h + wave), z_name="h")
    assert np.nanmax(np.abs(_corrected(out, "h") - h)) <= 0.002

    bias = 0.01 * (h - 1000.0)
    tb = xdem.coreg.TerrainBias(terrain_attribute="elevation", fit_func="linear", fit_or_bin="fit")
    tb.fit(dem0, pts.assign(h=h + bias), z_column="h")
    out = tb.apply_points(pts.assign(h=h + bias), z_name="h")
    assert np.nanmax(np.abs(_corrected(out, "h") - h)) <= 0.0105 * np.abs(bias).max()  # 1 % of the bias, analytically
    np.testing.assert_allclose(_corrected(out, "h"), h + bias - tb.bias({"elevation": h + bias}), rtol=0, atol=1e-9)


def test_pipeline_bias_then_shift_points(pts, dem0) -> None:
    """BiasCorr (with bias_vars) followed by NuthKaab, reference points: the DEM handed to the
    second step is corrected by the first with its bias_vars (it used to fail: apply without them).
    A sub-pixel move: a bias step fitted before the shift absorbs part of a large shift's dh."""
    dem = tp.shifted(tp.MOVES[2])
    slope = xdem.terrain.slope(dem)
    biased = dem + 0.02 * slope
    pipe = (xdem.coreg.BiasCorr(fit_func="linear") + xdem.coreg.NuthKaab()).fit(
        pts, biased, z_column="h", bias_vars={"slope": slope})
    assert abs(pipe.steps[1].shift_x_ + tp.MOVES[2][0]) <= 0.05 and abs(pipe.steps[1].shift_y_ + tp.MOVES[2][1]) <= 0.05
    out = pipe.apply(biased, bias_vars={"slope": slope})
    # measured 0.034 m: bilinear resampling (~0.02 m here) plus what the bias step, fitted before
    # the shift, took of the shift's dh
    assert float(np.nanmedian(np.abs((out - dem0).values[20:-20, 20:-20]))) <= 0.05
