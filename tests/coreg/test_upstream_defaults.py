"""Upstream xdem 0.2.3's defaults of the bias corrections mean what they mean upstream (issue 26).

Checked in upstream's ``xdem/coreg/biascorr.py`` and ``xdem/fit.py`` at v0.2.3: ``Deramp``
fits ``polynomial_2d`` (``polyval2d``: every ``x^i y^j``, ``i, j <= poly_order``) of order 2
to ``ref - tba`` in pixel indices; ``TerrainBias`` bins by ``"max_curvature"``;
``DirectionalBias`` fits ``"nfreq_sumsin"`` to 100 bins (``"bin_and_fit"``); ``BiasCorr``
and ``TerrainBias`` fit ``"norder_polynomial"`` (order 1 to 6, the lowest within 20 % of the
best soft-loss cost).
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from numpy.polynomial.polynomial import polyval2d

import xdem
from xdem.coreg import BiasCorr, Deramp, DirectionalBias, TerrainBias
from xdem.coreg.fitfuncs import choose_order
from xdem.examples import example_pair


@pytest.fixture(scope="module")
def pair() -> tuple[xr.DataArray, xr.DataArray]:
    ref, tba, _ = example_pair(shift_x=0, shift_y=0, shift_z=0)
    return ref, tba


def _uv(ref: xr.DataArray) -> tuple[xr.DataArray, xr.DataArray]:
    """Coordinates normalised as Deramp's (centre of the grid, half its larger side)."""
    x, y = ref["x"], ref["y"]
    t = ref.rio.transform()
    ny, nx = ref.shape
    xc, yc = t * (nx / 2.0, ny / 2.0)
    s = 0.5 * max(abs(t.a) * nx, abs(t.e) * ny)
    return (x - xc) / s, (y - yc) / s


def _rms(a: xr.DataArray | np.ndarray) -> float:
    v = np.asarray(a, dtype=np.float64)
    return float(np.sqrt(np.nanmean(v**2)))


def test_deramp_default_is_upstream_tensor_order_2(pair):
    ref, tba = pair
    u, v = _uv(ref)
    surface = 0.5 + 1.5 * u**2 * v**2 - 0.4 * u * v  # x^2 y^2: in upstream's model, not of total degree 2
    biased = (tba + surface).astype(np.float32)
    assert Deramp().poly_order == 2 and Deramp().terms == "tensor"
    dr = Deramp(subsample=20_000, random_state=0).fit(ref, biased)
    assert len(dr.terms_) == 9 and [2, 2] in dr.terms_
    assert _rms(dr.apply(biased) - ref) < 1e-3
    total = Deramp(terms="total", subsample=20_000, random_state=0).fit(ref, biased)
    assert len(total.terms_) == 6 and _rms(total.apply(biased) - ref) > 0.05


def test_deramp_fit_params_are_upstream_polyval2d_of_pixel_indices(pair):
    ref, tba = pair
    u, v = _uv(ref)
    biased = (tba + 0.3 + 0.8 * u * v**2 - 0.2 * u**2).astype(np.float32)
    dr = Deramp(subsample=20_000, random_state=0).fit(ref, biased)
    params = dr.meta["outputs"]["fitorbin"]["fit_params"]
    assert len(params) == 9
    rows, cols = np.mgrid[0 : ref.shape[0], 0 : ref.shape[1]]
    upstream = polyval2d(cols, rows, np.asarray(params).reshape(3, 3))  # upstream's correction: tba + f
    assert _rms(upstream - (ref - biased).values) < 1e-3


def test_terrain_bias_default_is_upstream_max_curvature(pair):
    ref, tba = pair
    tb = TerrainBias()
    assert tb.terrain_attribute == "max_curvature" and tb.fit_or_bin == "bin" and tb.fit_func == "norder_polynomial"
    curv = xdem.terrain.max_curvature(ref)
    biased = tba + 0.2 * curv.fillna(0.0)
    fitted = TerrainBias(random_state=0).fit(ref, biased)
    assert fitted.var_names_ == ["max_curvature"]
    values = np.nanpercentile(curv.values, [10, 50, 90])
    assert fitted.bias({"max_curvature": values}) == pytest.approx(0.2 * values, abs=0.02)
    # applied with the reference's attribute (apply(dem) alone derives it from the DEM it corrects)
    corrected = fitted.apply(biased, bias_vars={"max_curvature": curv})
    assert _rms(corrected - ref) < 0.05 < 0.2 * _rms(biased - ref)
    ours_attr = xdem.terrain.get_terrain_attribute(ref, "maximum_curvature")
    ours = TerrainBias(terrain_attribute="maximum_curvature", random_state=0).fit(ref, biased)
    assert _rms(ours.apply(biased, bias_vars={"maximum_curvature": ours_attr}) - ref) > 0.1  # another attribute


def test_directional_bias_default_bins_and_chooses_frequencies(pair):
    ref, tba = pair
    db = DirectionalBias()
    assert (db.fit_or_bin, db.nb_freq, db.bin_sizes) == ("bin_and_fit", None, 100)
    x = ref["x"] - float(ref["x"].min())
    one = DirectionalBias(angle=0).fit(ref, tba + 0.3 * np.sin(2 * np.pi * x / 80.0))
    assert one.bin_values_.shape == (100,) and len(one.wavelengths_) == 1
    assert float(one.wavelengths_[0]) == pytest.approx(80.0, rel=0.01)
    two = DirectionalBias(angle=0).fit(ref, tba + 0.3 * np.sin(2 * np.pi * x / 80.0)
                                       + 0.2 * np.cos(2 * np.pi * x / 230.0))
    assert sorted(np.round(two.wavelengths_, -1).tolist()) == [80.0, 230.0]


def test_biascorr_default_norder_polynomial_chooses_the_order(pair):
    ref, tba = pair
    assert BiasCorr().fit_func == "norder_polynomial"
    e = (ref - float(ref.mean())) / float(ref.std())
    rng = np.random.default_rng(0)
    noise = xr.DataArray(rng.normal(0.0, 0.01, ref.shape), dims=ref.dims, coords=ref.coords)
    cubic = BiasCorr(random_state=0).fit(ref, tba + 0.3 * e - 0.2 * e**3 + noise, bias_vars={"elevation": ref})
    assert len(cubic.fit_params_) == 4  # order 3 chosen (orders 4 to 6 improve it by < 20 %)
    line = BiasCorr(random_state=0).fit(ref, tba + 0.3 * e + noise, bias_vars={"elevation": ref})
    assert len(line.fit_params_) == 2
    assert line.bias({"elevation": ref.values.ravel()[:5]}) == pytest.approx(0.3 * e.values.ravel()[:5], abs=0.01)


def test_choose_order_is_upstreams_margin_rule():
    assert choose_order([10.0, 1.1, 1.0, 0.95]) == 1  # within 20 % of the best: the lower order
    assert choose_order([10.0, 5.0, 1.0, 2.0]) == 2  # orders beyond the best are never chosen
    assert choose_order([0.0, 0.0, 0.0]) == 0


def test_norder_polynomial_needs_one_variable(pair):
    ref, tba = pair
    with pytest.raises(xdem.errors.InputError, match="takes 1 variable"):
        BiasCorr().fit(ref, tba, bias_vars={"a": ref, "b": ref})
