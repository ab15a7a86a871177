"""Bias corrections (BiasCorr, Deramp, DirectionalBias, TerrainBias): known truth, chunk
independence, laziness, bad input and JSON round trips."""

from __future__ import annotations

import json
import warnings

import dask.array as da
import numpy as np
import pytest
from affine import Affine
from helpers import count_computes
from reference import check_chunk_independence

from xdem.coreg import BiasCorr, Coreg, CoregPipeline, Deramp, DirectionalBias, NuthKaab, TerrainBias
from xdem.errors import EmptyBinWarning, InputError, NotFittedError
from xdem.examples import example_pair
from xdem.io.grid import with_transform


@pytest.fixture(scope="module")
def pair():
    """ref and an exact copy of it (no shift), chunked 128."""
    ref, tba, _ = example_pair(mode="transform", shift_x=0, shift_y=0, shift_z=0, chunks=128)
    return ref, tba


def _coords(dem):
    t = dem.rio.transform()
    xc, yc = t.c + t.a * dem.shape[1] / 2, t.f + t.e * dem.shape[0] / 2
    return dem["x"] - xc, dem["y"] - yc  # lazy-friendly 1-D coordinates relative to the centre


def _rms(a):
    a = np.asarray(a, dtype=np.float64)
    return float(np.sqrt(np.nanmean(a**2)))


# --- known truth ------------------------------------------------------------------------------
def test_deramp_recovers_quadratic_surface(pair):
    ref, tba = pair
    x, y = _coords(ref)
    surface = 0.5 + 2e-3 * x - 1e-3 * y + 4e-6 * x**2 - 3e-6 * x * y + 5e-6 * y**2  # up to ~1.3 m
    biased = (tba + surface).astype(np.float32)
    dr = Deramp(poly_order=2, terms="total", subsample=50_000, random_state=1).fit(ref, biased)
    assert len(dr.coefs_) == 6 and dr.terms_ == [[0, 0], [1, 0], [0, 1], [2, 0], [1, 1], [0, 2]]
    xx, yy = np.meshgrid(ref["x"].values, ref["y"].values)
    assert _rms(dr.surface(xx, yy) - surface.transpose("y", "x").values) < 1e-3
    corrected = dr.apply(biased)
    assert _rms((corrected - ref).values) < 1e-3
    assert _rms((biased - ref).values) > 0.3  # the bias was there


def test_deramp_plane_and_order_zero(pair):
    ref, tba = pair
    x, y = _coords(ref)
    biased = tba + (1.5 + 0.003 * x)
    plane = Deramp(poly_order=1).fit(ref, biased)
    assert plane.coefs_[1] / plane.scale_ == pytest.approx(0.003, abs=1e-6)
    assert plane.coefs_[0] == pytest.approx(1.5, abs=1e-3)
    const = Deramp(poly_order=0).fit(ref, tba + 2.0)
    assert const.coefs_.tolist() == pytest.approx([2.0], abs=1e-4)


def test_directional_bias_recovers_sinusoid(pair):
    ref, tba = pair
    x, y = _coords(ref)
    angle = 30.0
    along = x * np.cos(np.radians(angle)) - y * np.sin(np.radians(angle))  # clockwise from east (upstream's)
    wave = 0.4 * np.sin(2 * np.pi * along / 55.0 + 0.7)
    biased = tba + wave
    db = DirectionalBias(angle=angle, subsample=40_000, random_state=0).fit(ref, biased)
    assert db.wavelengths_[0] == pytest.approx(55.0, rel=0.005)
    assert db.amplitudes_[0] == pytest.approx(0.4, rel=0.01)
    assert _rms((db.apply(biased) - ref).values) < 0.01
    # binning along track also removes most of it
    with pytest.warns(EmptyBinWarning):  # the outermost along-track bins hold only a corner of the DEM
        binned = DirectionalBias(angle=angle, fit_or_bin="bin", bin_sizes=200, subsample=40_000).fit(ref, biased)
    assert _rms((binned.apply(biased) - ref).values) < 0.1 * _rms(wave.values)


def test_directional_bias_two_frequencies(pair):
    ref, tba = pair
    x, _ = _coords(ref)
    biased = tba + 0.3 * np.sin(2 * np.pi * x / 40.0) + 0.15 * np.cos(2 * np.pi * x / 150.0)
    db = DirectionalBias(angle=0.0, fit_or_bin="fit", nb_freq=2, subsample=30_000).fit(ref, biased)
    np.testing.assert_allclose(db.wavelengths_, [40.0, 150.0], rtol=0.01)
    np.testing.assert_allclose(db.amplitudes_, [0.3, 0.15], rtol=0.03)


def _elevation_bias(z):
    return 0.8 * np.sin((z - 395.0) / 6.0)  # smooth, non-linear in elevation (the DEM spans 380-411 m)


def test_terrain_bias_elevation_binning_recovers_bias(pair):
    ref, tba = pair
    biased = tba + _elevation_bias(ref)
    tb = TerrainBias(terrain_attribute="elevation", bin_sizes=60, random_state=0).fit(ref, biased)
    centres = 0.5 * (tb.bin_edges_[0][1:] + tb.bin_edges_[0][:-1])
    good = np.isfinite(tb.bin_values_)
    assert good.sum() >= 55
    # the bin medians follow the true bias, up to its variation within half a bin
    half_width = 0.5 * np.diff(tb.bin_edges_[0])[0]
    assert np.max(np.abs(tb.bin_values_[good] - _elevation_bias(centres[good]))) < 0.8 / 6.0 * half_width
    before = _rms((biased - ref).values)
    exact = tb.apply(biased, bias_vars={"elevation": ref})  # the attribute of the reference, as in fit
    assert _rms((exact - ref).values) < 0.02 < 0.5 * before
    own = tb.apply(biased)  # the elevation of the DEM being corrected: approximate (it carries the bias)
    assert _rms((own - ref).values) < 0.3 * before
    # the same with the general class and an explicit bias variable: identical table and output
    bc = BiasCorr(fit_or_bin="bin", bin_sizes=60, random_state=0).fit(ref, biased, bias_vars={"elevation": ref})
    np.testing.assert_array_equal(bc.bin_values_, tb.bin_values_)
    np.testing.assert_array_equal(bc.apply(biased, bias_vars={"elevation": ref}).values, exact.values)


def _quadratic(z):
    return 0.3 + 0.02 * (z - 395.0) - 1e-3 * (z - 395.0) ** 2


def test_biascorr_polynomial_fit_and_bin_and_fit(pair):
    ref, tba = pair
    biased = tba + _quadratic(ref)
    fit = BiasCorr(fit_func="polynomial_2", subsample=30_000).fit(ref, biased, bias_vars={"elevation": ref})
    zs = np.array([385.0, 395.0, 405.0])
    np.testing.assert_allclose(fit.bias({"elevation": zs}), _quadratic(zs), atol=1e-4)
    both = BiasCorr(fit_or_bin="bin_and_fit", fit_func="polynomial_2", bin_sizes=40).fit(
        ref, biased, bias_vars={"elevation": ref}
    )
    np.testing.assert_allclose(both.bias({"elevation": zs}), _quadratic(zs), atol=0.01)
    # a user callable fitted with curve_fit on the raw variable
    user = BiasCorr(fit_func=lambda z, a, b: a + b * z).fit(ref, tba + 0.02 * ref, bias_vars={"z": ref})
    assert user.fit_params_[1] == pytest.approx(0.02, abs=1e-5)


def test_biascorr_two_variables_nd_binning(pair):
    ref, tba = pair
    x, y = _coords(ref)
    xs = (x + 0 * y).transpose("y", "x")
    xs = xs.copy(data=da.from_array(np.ascontiguousarray(xs.values), chunks=128)).rio.write_crs(ref.rio.crs)
    xs = xs.rio.write_transform(ref.rio.transform())
    biased = tba + 0.005 * (ref - 250.0) + 0.002 * xs
    with pytest.warns(EmptyBinWarning):  # some elevation-easting combinations do not occur
        bc = BiasCorr(fit_or_bin="bin", bin_sizes={"elevation": 12, "x": 10}).fit(
            ref, biased, bias_vars={"elevation": ref, "x": xs}
        )
    assert bc.bin_values_.shape == (12, 10) and bc.var_names_ == ["elevation", "x"]
    corrected = bc.apply(biased, bias_vars={"elevation": ref, "x": xs})
    assert _rms((corrected - ref).values) < 0.1 * _rms((biased - ref).values)
    lin = BiasCorr(fit_func="linear").fit(ref, biased, bias_vars={"elevation": ref, "x": xs})
    assert _rms((lin.apply(biased, bias_vars={"elevation": ref, "x": xs}) - ref).values) < 1e-3


def test_terrain_bias_curvature_of_a_smoothed_dem(pair):
    """A smoother DEM (e.g. coarser resolution) has a curvature-dependent bias: peaks low, valleys high."""
    from scipy import ndimage

    from xdem.terrain import maximum_curvature

    ref, tba = pair
    smooth = ndimage.gaussian_filter(ref.values.astype(np.float64), 1.5).astype(np.float32)
    tba_s = tba.copy(data=da.from_array(smooth, chunks=128))
    tb = TerrainBias(terrain_attribute="maximum_curvature", bin_sizes=30, subsample=50_000).fit(ref, tba_s)  # ours
    assert tb.var_names_ == ["maximum_curvature"]
    inner = (slice(3, -3), slice(3, -3))
    before = _rms((tba_s - ref).values[inner])
    with_ref_attr = tb.apply(tba_s, bias_vars={"maximum_curvature": maximum_curvature(ref)})
    own = tb.apply(tba_s)  # the attribute of the DEM being corrected
    assert _rms((with_ref_attr - ref).values[inner]) < 0.6 * before
    assert _rms((own - ref).values[inner]) < 0.8 * before
    assert np.isnan(own.values[0]).all()  # the attribute is NaN on the outer pixels


# --- pipelines --------------------------------------------------------------------------------
def test_bias_corrections_in_pipelines():
    ref, tba, truth = example_pair(shift_x=2.3, shift_y=-1.2, shift_z=1.0, chunks=128)
    biased = tba + 0.3 * np.sin(2 * np.pi * _coords(ref)[0] / 70.0)
    pipe = NuthKaab(subsample=30_000, random_state=0) + DirectionalBias(angle=0.0, subsample=30_000) + TerrainBias(
        terrain_attribute="elevation", bin_sizes=20
    )
    pipe.fit(ref, biased)
    assert pipe.steps[1].wavelengths_[0] == pytest.approx(70.0, rel=0.02)
    out = pipe.apply(biased)
    assert isinstance(out.data, da.Array)
    assert 1.4826 * np.nanmedian(np.abs((out - ref).values[10:-10, 10:-10])) < 0.05
    again = Coreg.from_json(pipe.to_json())
    np.testing.assert_array_equal(again.apply(biased).values, out.values)
    bc_pipe = CoregPipeline([NuthKaab(), BiasCorr(fit_func="linear")])
    bc_pipe.fit(ref, tba + 0.01 * ref, bias_vars={"elevation": ref})
    assert bc_pipe.steps[1].fit_params_[1] / bc_pipe.steps[1].var_scale_[0] == pytest.approx(0.01, abs=2e-3)


# --- chunk independence and laziness ---------------------------------------------------------
def _signature(model, dem, **kw):
    out = model.apply(dem, **kw).values
    learned = [np.ravel(np.asarray(v, dtype=np.float64)) for k, v in sorted(model.learned().items())
               if k not in ("var_names_", "terms_", "bin_edges_", "crs_")]
    return [np.concatenate(learned), out[::7, ::5]]


@pytest.mark.parametrize(
    "make",
    [
        lambda: Deramp(poly_order=2, subsample=20_000, random_state=3),
        lambda: DirectionalBias(angle=20.0, subsample=8_000, random_state=3),
        lambda: TerrainBias(terrain_attribute="slope", bin_sizes=15, subsample=20_000, random_state=3),
        lambda: BiasCorr(fit_or_bin="bin", bin_sizes=12, subsample=20_000, bin_apply_method="per_bin"),
    ],
    ids=["deramp", "directional", "terrain", "biascorr"],
)
def test_numpy_equals_dask_for_several_chunkings(make, pair):
    ref, tba = pair
    x, _ = _coords(ref)
    biased = (tba + 0.2 * np.sin(2 * np.pi * x / 45.0) + 1e-3 * (ref - 250.0) ** 2 / 10).astype(np.float32)
    biased = biased.transpose("y", "x")

    def run(r, t):
        model = make()
        kw = {"bias_vars": {"elevation": r}} if isinstance(model, BiasCorr) and model.needs_vars else {}
        model.fit(r, t, **kw)
        return _signature(model, t, **kw)

    # both schedulers for one model (the kernels are the same kind for all), threads for the others
    schedulers = ("threads", "synchronous") if isinstance(make(), Deramp) else ("threads",)
    check_chunk_independence(run, ref, biased, chunkings=(64, 150), schedulers=schedulers, atol=1e-9)


def test_apply_computes_nothing(pair):
    ref, tba = pair
    models = [
        (Deramp(subsample=5000), {}),
        (DirectionalBias(subsample=5000), {}),
        (TerrainBias(bin_sizes=10, subsample=5000), {}),
        (BiasCorr(subsample=5000), {"bias_vars": {"elevation": ref}}),
    ]
    for model, kw in models:
        model.fit(ref, tba + 0.01 * ref, **kw)
        with count_computes() as c:
            out = model.apply(tba, **kw)
        assert c.count == 0, type(model).__name__
        assert isinstance(out.data, da.Array) and out.dtype == tba.dtype and out.shape == tba.shape


def test_fit_computes_a_bounded_number_of_times(pair):
    ref, tba = pair
    with count_computes() as c:
        model = TerrainBias(bin_sizes=10, subsample=5000).fit(ref, tba + 0.01 * ref)
    assert c.count == model.passes_ <= 2  # the draw: one pass (two when few pixels are valid)


# --- bad input --------------------------------------------------------------------------------
def test_bias_variable_on_another_grid_is_a_clear_error(pair):
    ref, tba = pair
    far = with_transform(ref, Affine.translation(50.0, 0.0) @ ref.rio.transform())  # 50 px east: not covering
    with pytest.raises(InputError, match="does not cover"):
        BiasCorr().fit(ref, tba, bias_vars={"elevation": far})
    bc = BiasCorr().fit(ref, tba + 0.01 * ref, bias_vars={"elevation": ref})
    with pytest.raises(InputError, match="does not cover"):
        bc.apply(tba, bias_vars={"elevation": far})
    with pytest.raises(InputError, match="missing"):
        bc.apply(tba)
    with pytest.raises(InputError, match="needs bias_vars"):
        BiasCorr().fit(ref, tba)
    four = {k: ref for k in "abcd"}
    with pytest.raises(InputError, match="1 to 3"):
        BiasCorr().fit(ref, tba, bias_vars=four)


def test_too_few_values_per_bin_leaves_bins_empty_with_a_warning(pair):
    ref, tba = pair
    biased = tba + 0.01 * (ref - 250.0)
    with pytest.warns(EmptyBinWarning, match="left empty"):
        tb = TerrainBias(terrain_attribute="elevation", bin_sizes=40, min_bin_count=40, subsample=1500).fit(ref, biased)
    empty = ~np.isfinite(tb.bin_values_)
    assert empty.any() and (~empty).any()
    assert (tb.bin_counts_[empty] < 40).all() and (tb.bin_counts_[~empty] >= 40).all()
    out = tb.apply(biased, bias_vars={"elevation": ref}).values  # linear: empty bins filled from neighbours
    assert np.isfinite(out).all() and _rms(out - ref.values) < 0.05
    per_bin = TerrainBias(terrain_attribute="elevation", bin_sizes=40, min_bin_count=40, subsample=1500,
                          bin_apply_method="per_bin")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyBinWarning)
        per_bin.fit(ref, biased)
    res = per_bin.apply(biased, bias_vars={"elevation": ref}).values
    zb, edges = ref.values, per_bin.bin_edges_[0]
    outside = (zb < edges[0]) | (zb > edges[-1])  # beyond the sampled elevations: NaN (upstream's per_bin)
    idx = np.clip(np.searchsorted(edges, zb, side="right") - 1, 0, 39)
    in_empty = ~np.isfinite(per_bin.bin_values_)[idx] & ~outside
    assert in_empty.any() and outside.any()
    np.testing.assert_array_equal(res[in_empty], biased.values[in_empty])  # left unchanged
    assert np.isnan(res[outside]).all() and np.isfinite(res[~outside]).all()
    assert not np.array_equal(res[~in_empty & ~outside], biased.values[~in_empty & ~outside])


def test_bad_parameters_are_clear_errors(pair):
    ref, tba = pair
    # constructors only store (scikit-learn convention): bad values are errors at fit
    with pytest.raises(InputError, match="poly_order must be an integer >= 0"):
        Deramp(poly_order=-1).fit(ref, tba)
    dr = Deramp()
    dr.poly_order = -2
    with pytest.raises(InputError, match="poly_order"):
        dr.fit(ref, tba)
    with pytest.raises(InputError, match="fit_or_bin"):
        BiasCorr(fit_or_bin="both").fit(ref, tba, bias_vars={"elevation": ref})
    with pytest.raises(InputError, match="unknown fit_func"):
        BiasCorr(fit_func="spline").fit(ref, tba, bias_vars={"elevation": ref})
    with pytest.raises(InputError, match="bin_apply_method"):
        TerrainBias(bin_apply_method="cubic").fit(ref, tba)
    with pytest.raises(InputError, match="nb_freq"):
        DirectionalBias(nb_freq=5).fit(ref, tba)
    with pytest.raises(InputError, match="terrain_attribute"):
        TerrainBias(terrain_attribute="colour").fit(ref, tba)
    with pytest.raises(InputError, match="takes 1 variable"):
        BiasCorr(fit_func="sumsin").fit(ref, tba, bias_vars={"a": ref, "b": ref})
    with pytest.raises(NotFittedError):
        Deramp().apply(tba)


# --- JSON ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make, kw",
    [
        (lambda: Deramp(poly_order=3, subsample=10_000), False),
        (lambda: DirectionalBias(angle=45.0, subsample=5000), False),
        (lambda: DirectionalBias(angle=45.0, fit_or_bin="bin", bin_sizes=50, subsample=5000), False),
        (lambda: TerrainBias(terrain_attribute="elevation", bin_sizes=300, min_bin_count=30, subsample=8000), False),
        (lambda: BiasCorr(fit_or_bin="bin_and_fit", fit_func="polynomial_3", bin_sizes=20), True),
        (lambda: BiasCorr(bin_statistic=np.nanmean, fit_or_bin="bin", bin_sizes=7, bin_apply_method="per_bin"), True),
    ],
)
def test_json_round_trip(make, kw, pair, tmp_path):
    ref, tba = pair
    x, _ = _coords(ref)
    biased = tba + 0.2 * np.sin(2 * np.pi * x / 60.0) + 0.01 * (ref - 250.0)
    bias_kw = {"bias_vars": {"elevation": ref}} if kw else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyBinWarning)
        model = make().fit(ref, biased, **bias_kw)
    path = tmp_path / "model.json"
    text = model.to_json(path)
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    loaded = Coreg.from_json(path)
    assert type(loaded) is type(model) and loaded.get_params().keys() == model.get_params().keys()
    np.testing.assert_array_equal(loaded.apply(tba, **bias_kw).values, model.apply(tba, **bias_kw).values)


def test_user_fit_func_cannot_be_saved(pair):
    ref, tba = pair
    bc = BiasCorr(fit_func=lambda z, a, b: a + b * z).fit(ref, tba + 0.01 * ref, bias_vars={"z": ref})
    with pytest.raises(InputError, match="cannot be saved"):
        bc.to_json()
