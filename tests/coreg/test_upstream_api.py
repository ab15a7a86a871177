"""Upstream xdem 0.2.3's Coreg API: its calls run unchanged and mean what they mean upstream.

Conventions checked in upstream's source (``xdem/coreg/base.py``, ``affine.py``, ``biascorr.py``
at tag v0.2.3): ``fit(reference_elev, to_be_aligned_elev, inlier_mask, bias_vars, weights,
subsample, transform, crs, area_or_point, z_name, random_state)`` positionally, ``weights``
raising; ``apply`` of an array returns ``(array, transform)``; ``meta["inputs"|"outputs"]``
sections; matrices ``P' = M P`` with ``R = Rz(a3) Ry(a2) Rx(a1)`` (extrinsic x, y, z angles,
degrees by default); ``NuthKaab(offset_threshold=)`` in pixels, ``bin_sizes=72`` aspect bins;
``BiasCorr(bias_var_names=)`` checked against the keys of ``bias_vars``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr
from affine import Affine
from helpers import count_computes

import xdem
from xdem.coreg import (
    NuthKaab,
    VerticalShift,
    apply_matrix,
    invert_matrix,
    matrix_from_translations_rotations,
    translations_rotations_from_matrix,
)
from xdem.errors import InputError


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pair")
    xdem.examples.write_example_pair(folder)
    truth = json.loads((folder / "truth.json").read_text())
    return str(folder / "ref.tif"), str(folder / "tba.tif"), truth


@pytest.fixture(scope="module")
def native(pair):
    ref, tba, _ = pair
    return NuthKaab().fit(ref, tba)


def _arrays(pair):
    ref, tba = xdem.open_dem(pair[0]), xdem.open_dem(pair[1])
    return ref.values, tba.values, ref.rio.transform(), ref.rio.crs


# --- fit: upstream's arguments ---------------------------------------------------------------
def test_fit_positional_and_upstream_keywords_equal_native(pair, native):
    ref, tba, truth = pair
    by_name = NuthKaab().fit(reference_elev=ref, to_be_aligned_elev=tba)
    ours = NuthKaab().fit(ref=ref, tba=tba)
    for nk in (by_name, ours):
        assert nk.to_translations() == native.to_translations()
    assert abs(native.shift_x_ - truth["shift_x"]) < 0.05 and abs(native.shift_y_ - truth["shift_y"]) < 0.05


def test_fit_on_arrays_with_transform_and_crs(pair, native):
    r, t, transform, crs = _arrays(pair)
    nk = NuthKaab().fit(r, t, None, None, None, None, transform, crs)  # upstream's positions
    assert np.allclose(nk.to_translations(), native.to_translations(), atol=1e-9)
    masked = NuthKaab().fit(np.ma.masked_invalid(r), np.ma.masked_invalid(t), transform=transform, crs=crs)
    assert np.allclose(masked.to_translations(), native.to_translations(), atol=1e-9)


def test_array_inlier_mask_is_used(pair):
    r, t, transform, crs = _arrays(pair)
    keep = np.zeros(r.shape, dtype=bool)
    keep[:, : r.shape[1] // 2] = True
    half = VerticalShift().fit(r, t, keep, transform=transform, crs=crs)
    t2 = t.copy()
    t2[:, r.shape[1] // 2:] += 100.0  # only outside the mask
    assert VerticalShift().fit(r, t2, keep, transform=transform, crs=crs).shift_z_ == half.shift_z_
    assert VerticalShift().fit(r, t2, transform=transform, crs=crs).shift_z_ != half.shift_z_


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda r, t, tr, c: NuthKaab().fit(r, t), "transform=<affine.Affine> and crs="),
        (lambda r, t, tr, c: NuthKaab().fit(r, t, weights=np.ones(r.shape), transform=tr, crs=c), "weights"),
        (lambda r, t, tr, c: NuthKaab().fit(r, t, ref=r, transform=tr, crs=c), "not both"),
        (lambda r, t, tr, c: NuthKaab().fit(r, t, area_or_point="Centre", transform=tr, crs=c), "area_or_point"),
        (lambda r, t, tr, c: NuthKaab().fit(r, t, np.ones((3, 3), bool), transform=tr, crs=c), "shape"),
    ],
    ids=["no-georeferencing", "weights", "both-names", "area-or-point", "mask-shape"],
)
def test_bad_upstream_arguments_are_one_clear_error(pair, call, message):
    r, t, transform, crs = _arrays(pair)
    with pytest.raises(InputError, match=message):
        call(r, t, transform, crs)


def test_fit_subsample_and_random_state_for_this_fit_only(pair):
    ref, tba, _ = pair
    nk = NuthKaab()
    nk.fit(ref, tba, subsample=3000, random_state=7)
    assert nk.get_params()["subsample"] == 500_000 and nk.get_params()["random_state"] is None  # restored
    same = NuthKaab(subsample=3000, random_state=7).fit(ref, tba)
    assert nk.to_translations() == same.to_translations() and nk.count_ == same.count_
    with pytest.warns(UserWarning, match="overrides the non-default subsample"):
        NuthKaab(subsample=2000).fit(ref, tba, subsample=3000, random_state=7)


# --- apply ---------------------------------------------------------------------------------------
def test_apply_array_returns_array_and_transform(pair, native):
    r, t, transform, crs = _arrays(pair)
    out, out_transform = native.apply(t, transform=transform, crs=crs)
    expected = native.apply(xdem.open_dem(pair[1])).values
    assert isinstance(out, np.ndarray) and out_transform == transform
    np.testing.assert_allclose(out, expected, equal_nan=True)
    moved, moved_transform = native.apply(t, resample=False, transform=transform, crs=crs)
    assert moved_transform.c == pytest.approx(transform.c + native.shift_x_)
    assert moved_transform.f == pytest.approx(transform.f + native.shift_y_)
    masked, _ = native.apply(np.ma.masked_invalid(t), transform=transform, crs=crs)
    assert np.ma.isMaskedArray(masked) and masked.mask.any()


def test_apply_dataarray_stays_lazy(pair, native):
    dem = xdem.open_dem(pair[1])
    with count_computes() as c:
        out = native.apply(dem)
        again = native.apply(dem=dem)  # our former keyword
    assert c.count == 0 and isinstance(out, xr.DataArray) and isinstance(again, xr.DataArray)


def test_fit_and_apply_upstream_style(pair, native):
    r, t, transform, crs = _arrays(pair)
    nk = NuthKaab()
    out, out_transform = nk.fit_and_apply(r, t, transform=transform, crs=crs)
    assert np.allclose(nk.to_translations(), native.to_translations(), atol=1e-9) and out_transform == transform
    lazy = NuthKaab().fit_and_apply(pair[0], pair[1])
    np.testing.assert_allclose(lazy.values, out, equal_nan=True)


# --- meta ----------------------------------------------------------------------------------------
def test_meta_is_a_read_only_view_of_learned_values(native):
    meta = native.meta
    affine = meta["outputs"]["affine"]
    assert (affine["shift_x"], affine["shift_y"], affine["shift_z"]) == native.to_translations()
    np.testing.assert_array_equal(affine["matrix"], native.to_matrix())
    assert meta["outputs"]["iterative"]["last_iteration"] == native.n_iterations_
    assert meta["outputs"]["random"]["subsample_final"] == native.count_
    assert meta["inputs"]["iterative"] == {"max_iterations": 10, "tolerance": 0.001}
    assert meta["inputs"]["random"]["subsample"] == 500_000
    with pytest.raises(TypeError):
        meta["outputs"]["affine"]["shift_x"] = 0.0  # type: ignore[index]
    with pytest.raises(TypeError):
        meta["inputs"] = {}  # type: ignore[index]


def test_meta_follows_the_estimator():
    nk = NuthKaab(offset_threshold=0.05)
    assert nk.meta["inputs"]["iterative"]["tolerance"] == 0.05
    nk.set_params(max_iterations=3)
    assert nk.meta["inputs"]["iterative"]["max_iterations"] == 3
    assert dict(nk.meta["outputs"]["affine"]) == {}  # not fitted
    assert xdem.coreg.Deramp(poly_order=2).meta["inputs"]["specific"]["poly_order"] == 2


def test_meta_of_a_bias_correction(pair):
    ref = xdem.open_dem(pair[0])
    bc = xdem.coreg.BiasCorr(bias_var_names=["elevation"]).fit(ref, pair[1], bias_vars={"elevation": ref})
    np.testing.assert_array_equal(bc.meta["outputs"]["fitorbin"]["fit_params"], bc.fit_params_)
    assert bc.meta["inputs"]["fitorbin"]["bias_var_names"] == ["elevation"]
    assert "affine" not in bc.meta["outputs"] or dict(bc.meta["outputs"]["affine"]) == {}


# --- constructor parameters ----------------------------------------------------------------------
def test_offset_threshold_stops_iterations_earlier(pair):
    ref, tba, _ = pair
    fine = NuthKaab(offset_threshold=1e-4).fit(ref, tba)
    coarse = NuthKaab(offset_threshold=0.5).fit(ref, tba)
    assert coarse.n_iterations_ < fine.n_iterations_
    assert NuthKaab(tolerance=0.5).fit(ref, tba).to_translations() == coarse.to_translations()
    with pytest.raises(InputError, match="offset_threshold=0.5 is upstream's name of tolerance"):
        NuthKaab(offset_threshold=0.5, tolerance=0.1).fit(ref, tba)


def test_max_iterations_caps_iterations(pair):
    ref, tba, _ = pair
    with pytest.warns(xdem.errors.ConvergenceWarning):
        one = NuthKaab(max_iterations=1).fit(ref, tba)
    assert one.n_iterations_ == 1 and not one.converged_


def test_bin_sizes_is_the_number_of_aspect_bins(pair, native):
    ref, tba, _ = pair
    assert NuthKaab(bin_sizes=72).fit(ref, tba).to_translations() == native.to_translations()
    assert NuthKaab(bin_sizes=12).fit(ref, tba).to_translations() == NuthKaab(bin_count=12).fit(ref, tba).to_translations()
    assert NuthKaab(bin_sizes=12).fit(ref, tba).to_translations() != native.to_translations()


def test_bias_var_names_must_match_bias_vars(pair):
    ref = xdem.open_dem(pair[0])
    with pytest.raises(InputError, match="not the bias_var_names"):
        xdem.coreg.BiasCorr(bias_var_names=["slope"]).fit(ref, pair[1], bias_vars={"elevation": ref})


def test_terrain_bias_upstream_attribute_name(pair):
    """``"max_curvature"`` is upstream's maximal curvature (Florinsky's fit), derived from the
    reference as upstream does (and is the default, as upstream's); our ``"maximum_curvature"`` is
    another quantity."""
    ref, tba, _ = pair
    up = xdem.coreg.TerrainBias(terrain_attribute="max_curvature", subsample=20_000, random_state=1).fit(ref, tba)
    given = xdem.terrain.upstream_engine.upstream_attributes(xdem.open_dem(ref), ["max_curvature"])[0]
    same = xdem.coreg.TerrainBias(terrain_attribute="max_curvature", subsample=20_000, random_state=1).fit(
        ref, tba, bias_vars={"max_curvature": given})
    np.testing.assert_array_equal(up.bin_values_, same.bin_values_)
    default = xdem.coreg.TerrainBias(subsample=20_000, random_state=1).fit(ref, tba)
    np.testing.assert_array_equal(up.bin_values_, default.bin_values_)
    ours = xdem.coreg.TerrainBias(terrain_attribute="maximum_curvature", subsample=20_000, random_state=1).fit(ref, tba)
    assert not np.array_equal(up.bin_values_, ours.bin_values_)


def test_pipeline_attribute_is_the_steps():
    pipe = VerticalShift() + NuthKaab()
    assert pipe.pipeline is pipe.steps and [type(s).__name__ for s in pipe.pipeline] == ["VerticalShift", "NuthKaab"]


# --- matrices ------------------------------------------------------------------------------------
def _r(axis: str, deg: float) -> np.ndarray:
    a = np.radians(deg)
    c, s = np.cos(a), np.sin(a)
    return {"x": np.array([[1, 0, 0], [0, c, -s], [0, s, c]]), "y": np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]),
            "z": np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])}[axis]


def test_matrix_convention_is_extrinsic_xyz_in_degrees():
    m = matrix_from_translations_rotations(1.0, -2.0, 3.0, 10.0, -20.0, 30.0)
    np.testing.assert_allclose(m[:3, :3], _r("z", 30.0) @ _r("y", -20.0) @ _r("x", 10.0), atol=1e-14)
    np.testing.assert_array_equal(m[:3, 3], [1.0, -2.0, 3.0])
    np.testing.assert_array_equal(m[3], [0, 0, 0, 1])
    rad = matrix_from_translations_rotations(0, 0, 0, *np.radians([10.0, -20.0, 30.0]), use_degrees=False)
    np.testing.assert_allclose(rad[:3, :3], m[:3, :3], atol=1e-14)
    np.testing.assert_allclose(matrix_from_translations_rotations(alpha3=90.0)[:3, :3] @ [1, 0, 0], [0, 1, 0],
                               atol=1e-15)  # positive about z: counter-clockwise seen from above


def test_matrix_round_trips():
    values = (5.0, -3.0, 0.5, 1.5, -0.7, 12.0)
    back = translations_rotations_from_matrix(matrix_from_translations_rotations(*values))
    np.testing.assert_allclose(back, values, atol=1e-12)
    rads = translations_rotations_from_matrix(matrix_from_translations_rotations(*values), return_degrees=False)
    np.testing.assert_allclose(rads[3:], np.radians(values[3:]), atol=1e-12)
    m = matrix_from_translations_rotations(*values)
    np.testing.assert_allclose(invert_matrix(m) @ m, np.eye(4), atol=1e-12)
    with pytest.raises(InputError, match="not rigid"):
        translations_rotations_from_matrix(np.diag([2.0, 1.0, 1.0, 1.0]))


def test_matrices_agree_with_ours(native):
    t = xdem.coreg.RigidTransform.from_rotations(0.2, -0.1, 0.3, translation=(1.0, 2.0, 3.0))
    up = matrix_from_translations_rotations(1.0, 2.0, 3.0, 0.2, -0.1, 0.3)
    np.testing.assert_allclose(t.to_matrix(), up, atol=1e-12)
    np.testing.assert_allclose(t.to_rotations(), translations_rotations_from_matrix(up)[3:], atol=1e-12)
    assert translations_rotations_from_matrix(native.to_matrix())[:3] == native.to_translations()
    assert native.to_rotations() == (0.0, 0.0, 0.0)


def test_apply_matrix_on_arrays_and_dataarrays(pair, native):
    dem = xdem.open_dem(pair[1])
    lazy = apply_matrix(dem, native.to_matrix())
    np.testing.assert_allclose(lazy.values, native.apply(dem).values, equal_nan=True)
    arr, transform = dem.values, dem.rio.transform()
    out, out_t = apply_matrix(arr, matrix_from_translations_rotations(t3=2.0), transform=transform)
    np.testing.assert_allclose(out, arr + 2.0, equal_nan=True)
    assert out_t == transform
    back, _ = apply_matrix(out, matrix_from_translations_rotations(t3=2.0), invert=True, transform=transform)
    np.testing.assert_allclose(back, arr, equal_nan=True, atol=1e-5)
    moved, moved_t = apply_matrix(arr, matrix_from_translations_rotations(1.0, 2.0), resample=False,
                                  transform=transform)
    assert moved_t == Affine.translation(1.0, 2.0) * transform
    with pytest.raises(InputError, match="resampling"):
        apply_matrix(arr, np.eye(4), resampling="quintic", transform=transform)


def test_apply_resampling_for_this_call_only(pair, native):
    dem = xdem.open_dem(pair[1])
    cubic = native.apply(dem, None, True, "cubic")  # upstream's positions
    assert native.resampling == "bilinear"  # restored
    as_param = NuthKaab(resampling="cubic")
    as_param._restore(native.learned())
    np.testing.assert_array_equal(cubic.values, as_param.apply(dem).values)
    assert not np.array_equal(cubic.values, native.apply(dem, resampling="linear").values, equal_nan=True)
    vs = VerticalShift().fit(pair[0], pair[1])
    assert isinstance(vs.apply(dem, resampling="bilinear"), xr.DataArray)
    with pytest.raises(InputError, match="has no resampling parameter"):
        vs.apply(dem, resampling="cubic")


def test_icp_upstream_method_spelling(pair):
    ref, tba, _ = pair
    up = xdem.coreg.ICP(method="point-to-point", subsample=5000, random_state=2).fit(ref, tba)
    ours = xdem.coreg.ICP(method="point_to_point", subsample=5000, random_state=2).fit(ref, tba)
    np.testing.assert_array_equal(up.to_matrix(), ours.to_matrix())
    with pytest.raises(InputError, match="method must be one of"):
        xdem.coreg.ICP(method="point-to-line").fit(ref, tba)


def test_blockwise_upstream_parameters(pair):
    ref, tba, _ = pair
    ours = xdem.coreg.BlockwiseCoreg(NuthKaab(subsample=5000, random_state=1), block_size=200).fit(ref, tba)
    up = xdem.coreg.BlockwiseCoreg(NuthKaab(subsample=5000, random_state=1), block_size_fit=200).fit(ref, tba)
    assert up.tiles_["row0"] == ours.tiles_["row0"] and max(ours.tiles_["row1"]) == 400 and 200 in ours.tiles_["row0"]
    np.testing.assert_array_equal(up.tiles_["dx"], ours.tiles_["dx"])
    in_folder = xdem.coreg.BlockwiseCoreg(NuthKaab(subsample=5000, random_state=1), block_size_fit=200,
                                          parent_path="tiles").fit(ref, tba)  # upstream's tiling: the same here
    np.testing.assert_array_equal(in_folder.tiles_["dx"], ours.tiles_["dx"])
    with pytest.raises(InputError, match="block_size_fit=200 is upstream's name of block_size=300"):
        xdem.coreg.BlockwiseCoreg(NuthKaab(), block_size=300, block_size_fit=200).fit(ref, tba)


def test_info_prints_upstreams_layout_and_returns_none(capsys, native):
    """Upstream's info() prints and returns None; as_str=True returns the text."""
    assert native.info() is None
    printed = capsys.readouterr().out
    assert printed.strip() == native.info(as_str=True).strip()
    lines = printed.splitlines()
    assert lines[:4] == ["Generic coregistration information", "  Method:       NuthKaab", "  Is affine?    True",
                         "  Fit called?   True"]
    assert "Inputs" in lines and "Outputs" in lines and "  Iterative" in lines
    shift = next(line for line in lines if line.strip().startswith("Shift x (CRS units):"))
    assert float(shift.split(":")[1]) == pytest.approx(native.shift_x_, rel=1e-5)
    fresh = xdem.coreg.ICP().info(as_str=True)
    assert "  Fit called?   False" in fresh and "None yet (fit not called)" in fresh
    pipe = xdem.coreg.NuthKaab() + xdem.coreg.Deramp()
    assert pipe.info() is None and "Pipeline step 1:" in capsys.readouterr().out


@pytest.mark.parametrize(("make", "match"), [
    (lambda: NuthKaab(bin_before_fit=False), r"NuthKaab\(bin_before_fit=False\) is upstream's and not available"),
    (lambda: NuthKaab(bin_statistic=np.nanmean), r"NuthKaab\(bin_statistic=nanmean\)"),
    (lambda: xdem.coreg.ICP(picky=False), r"ICP\(picky=False\).*rejection_factor"),
    (lambda: xdem.coreg.ICP(only_translation=True), r"ICP\(only_translation=True\)"),
    (lambda: xdem.coreg.LZD(fit_loss_func="soft_l1"), r"LZD\(fit_loss_func='soft_l1'\)"),
    (lambda: xdem.coreg.DhMinimize(fit_loss_func=np.std), r"DhMinimize\(fit_loss_func=std\).*spread_func"),
    (lambda: xdem.coreg.DirectionalBias(fit_func="polynomial"), r"DirectionalBias\(fit_func='polynomial'\)"),
    (lambda: xdem.coreg.Deramp(fit_or_bin="bin"), r"Deramp\(fit_or_bin='bin'\)"),
    (lambda: xdem.coreg.TerrainBias(fit_optimizer=np.polyfit), r"TerrainBias\(fit_optimizer=polyfit\)"),
])
def test_upstream_parameters_that_cannot_be_honoured_raise_one_line(pair, make, match):
    ref, tba, _ = pair
    with pytest.raises(InputError, match=match) as err:
        make().fit(ref, tba, bias_vars={"elevation": ref})
    assert "\n" not in str(err.value)


def test_upstream_parameters_at_their_defaults_change_nothing(pair):
    import scipy.optimize

    ref, tba, _ = pair
    plain = NuthKaab(subsample=5000).fit(ref, tba)
    up = NuthKaab(subsample=5000, bin_before_fit=True, fit_optimizer=scipy.optimize.curve_fit,
                  bin_statistic=np.nanmedian).fit(ref, tba)
    assert up.to_translations() == plain.to_translations()
    flat = NuthKaab(subsample=5000, vertical_shift=False).fit(ref, tba)  # honoured: no vertical shift
    assert flat.shift_z_ == 0.0 and flat.shift_x_ == plain.shift_x_ and plain.shift_z_ != 0.0
    deramp = xdem.coreg.Deramp(poly_order=1, fit_or_bin="fit", fit_func="polynomial_2d", bin_sizes=10).fit(ref, tba)
    assert deramp.is_fitted
    icp = xdem.coreg.ICP(subsample=3000, picky=True, only_translation=False, fit_loss_func="linear", standardize=False)
    assert icp.get_params()["standardize"] is False


def test_affine_coreg_from_upstream_keywords():
    t = xdem.coreg.AffineCoreg.from_translations(x_off=1.5, y_off=-2.0, z_off=0.5)
    assert t.to_translations() == (1.5, -2.0, 0.5) and t.to_rotations() == (0.0, 0.0, 0.0)
    r = NuthKaab.from_rotations(z_rot=90.0)
    np.testing.assert_allclose(r.to_matrix()[:3, :3] @ [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], atol=1e-12)
    rad = xdem.coreg.AffineCoreg.from_rotations(x_rot=np.pi / 2, use_degrees=False)
    assert rad.to_rotations()[0] == pytest.approx(90.0)
    m = matrix_from_translations_rotations(1.0, 2.0, 3.0, 0.0, 0.0, 30.0)
    np.testing.assert_allclose(xdem.coreg.AffineCoreg.from_matrix(m).to_matrix(), m, atol=1e-12)
    with pytest.raises(InputError, match="give x or x_off, not both"):
        xdem.coreg.AffineCoreg.from_translations(1.0, x_off=2.0)
