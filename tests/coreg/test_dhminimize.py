""":class:`xdem.coreg.DhMinimize` against analytic truth, and its contract.

Truth: :class:`truth.SineTerrain` (exact anywhere: relief std about 100 m, mean slope 27
degrees at 5 m pixels) sampled on a 5 m grid, the to-be-aligned DEM being the terrain moved by a
known ``(dx, dy, dz)``, so the shift to find is exactly ``(-dx, -dy, -dz)``. Without noise the
only error left is the cubic interpolation's (0.0002 m NMAD of dh on this terrain at a half-pixel
shift): measured errors are 0.0002-0.0004 m (Nelder-Mead and Powell, one or several window
regions); the tests allow 0.002 m (0.0004 pixel), which any real bias of the method (e.g. the
bilinear interpolation's, 0.009 m here) would exceed.
"""

from __future__ import annotations

import dask
import numpy as np
import pytest
from affine import Affine
from helpers import MaxResult, count_computes
from truth import SineTerrain, dem_of

import xdem
from xdem.coreg import Coreg, DhMinimize
from xdem.errors import ConvergenceWarning, InputError
from xdem.kernels.dhminimize import interp_windows_at
from xdem.kernels.interp import interp_windows_kernel

CRS = "EPSG:32633"
X0, Y0, RES, N = 500_000.0, 5_000_000.0, 5.0, 240
TERRAIN = SineTerrain(crs=CRS, origin=(X0, Y0))
T = Affine(RES, 0.0, X0, 0.0, -RES, Y0)
#: Accuracy allowed on each component of the fitted shift (m); see the module notes.
TOL = 0.002


def _pair(move, chunks=128):
    return (dem_of(TERRAIN, crs=CRS, transform=T, shape=(N, N), chunks=chunks),
            dem_of(TERRAIN, crs=CRS, transform=T, shape=(N, N), move=move, chunks=chunks))


def _error(model, move):
    return np.array(model.to_translations()) + np.array(move)


@pytest.mark.parametrize("method", ["Nelder-Mead", "Powell"])
def test_known_subpixel_shift(method):
    move = (3.7, -2.3, 1.25)  # 0.74 and 0.46 pixel
    ref, tba = _pair(move)
    dm = DhMinimize(method=method, subsample=20_000).fit(ref, tba)
    assert np.abs(_error(dm, move)).max() < TOL, _error(dm, move)
    assert dm.converged_ and dm.passes_ == 1  # the optimum is inside the first windows
    assert dm.to_rotations() == (0.0, 0.0, 0.0)
    np.testing.assert_allclose(dm.to_matrix()[:3, 3], dm.to_translations(), atol=1e-12)
    assert dm.spread_ < 0.002 and dm.count_ > 15_000


def test_shift_of_several_pixels_moves_the_windows():
    """6.2 and 4.4 pixels: the windows cover about 2 pixels around where they were cut, so the
    search resumes in windows cut again around its optimum (one pass each)."""
    move = (31.0, 22.0, -0.4)
    ref, tba = _pair(move)
    dm = DhMinimize(subsample=20_000).fit(ref, tba)
    assert np.abs(_error(dm, move)).max() < TOL, _error(dm, move)
    assert dm.converged_ and 3 <= dm.passes_ <= 6


def test_initial_shift_starts_near_the_optimum():
    """12 and 9 pixels away: started from a rough estimate, one pass to draw, one to cut the windows."""
    move = (-61.0, 44.5, 0.0)
    ref, tba = _pair(move)
    with count_computes() as c:
        dm = DhMinimize(subsample=20_000, initial_shift=(60.0, -45.0, 3.0)).fit(ref, tba)
    assert np.abs(_error(dm, move)).max() < TOL, _error(dm, move)
    assert dm.passes_ == 2 and c.count == 2


def test_bilinear_is_biased_where_cubic_is_not():
    """Why cubic is the default: bilinear's interpolation error varies with the fractional
    part of the shift and displaces the spread's minimum (here by 0.009 m, 0.002 pixel)."""
    move = (3.7, -2.3, 1.25)
    ref, tba = _pair(move)
    err = {r: np.abs(_error(DhMinimize(subsample=20_000, resampling=r).fit(ref, tba), move)[:2]).max()
           for r in ("cubic", "bilinear")}
    assert err["cubic"] < TOL < err["bilinear"], err


def test_chunk_and_scheduler_independent_across_window_moves():
    """Identical (1e-9) for numpy input and any chunking, also when the windows are cut again."""
    move = (13.1, -7.9, -0.5)
    ref, tba = _pair(move, chunks=N)
    runs = [(ref.copy(data=ref.values), tba.copy(data=tba.values), "threads")]
    runs += [(ref.chunk(c), tba.chunk(c), s) for c, s in ((50, "threads"), (97, "synchronous"))]
    out = []
    for r, t, scheduler in runs:
        with dask.config.set(scheduler=scheduler):
            dm = DhMinimize(subsample=5_000, random_state=3).fit(r, t)
        out.append([*dm.to_translations(), *dm.centroid_, dm.spread_, dm.n_iterations_, dm.passes_, dm.count_])
    assert out[0][-2] == 2  # the windows were cut again
    np.testing.assert_allclose(out[1:], [out[0]] * 2, atol=1e-9, rtol=0)


def test_fit_memory_is_bounded_by_the_chunk_and_the_subsample():
    """No task result grows with the DEM: the largest is the draw's candidates held from one row
    of blocks to the next (values and windows, :func:`xdem.sampling.sample_valid`), which the k
    smallest hashes bound: a bound of the subsample's (about 480 bytes a candidate here)."""
    largest = []
    for n in (N, 2 * N):
        ref = dem_of(TERRAIN, crs=CRS, transform=T, shape=(n, n), chunks=60)
        tba = dem_of(TERRAIN, crs=CRS, transform=T, shape=(n, n), move=(3.7, -2.3, 0.0), chunks=60)
        with MaxResult() as cb:
            DhMinimize(subsample=1_000).fit(ref, tba)
        largest.append(cb.max_bytes)
    assert largest[1] <= 1.1 * largest[0], largest  # 4 times the pixels, the same largest result
    assert largest[0] <= 1_000 * 800, largest


def test_apply_is_lazy_and_matches_the_truth():
    move = (3.7, -2.3, 1.25)
    ref, tba = _pair(move)
    dm = DhMinimize(subsample=20_000).fit(ref, tba)
    with count_computes() as c:
        out = dm.apply(tba)
    assert c.count == 0
    dh = (out.values - ref.values)[5:-5, 5:-5]
    assert np.nanmax(np.abs(dh)) < 0.05 and abs(np.nanmedian(dh)) < 1e-3


def test_json_round_trip_keeps_the_spread_function_by_name():
    ref, tba = _pair((3.7, -2.3, 1.25))
    dm = DhMinimize(spread_func=np.std, subsample=5_000, method="Powell").fit(ref, tba)
    doc = dm.to_dict()
    assert doc["params"]["spread_func"] == "std" and doc["params"]["method"] == "Powell"
    again = Coreg.from_json(dm.to_json())
    assert again.spread_func is np.std
    np.testing.assert_array_equal(again.to_matrix(), dm.to_matrix())
    assert DhMinimize().to_dict()["params"]["spread_func"] == "nmad"
    assert Coreg.from_json(DhMinimize().to_json()).spread_func is xdem.kernels.robust.nmad


@pytest.mark.parametrize(("params", "match"), [
    ({"method": "BFGS"}, "method must be one of Nelder-Mead, Powell"),
    ({"resampling": "nearest"}, "resampling must be one of"),
    ({"spread_func": "nmad"}, "spread_func must be a callable"),
    ({"initial_shift": (1.0,)}, "initial_shift must be"),
    ({"initial_shift": (1.0, 2.0, 3.0, 4.0)}, "initial_shift must be"),
    ({"initial_shift": "ab"}, "initial_shift must be"),
    ({"initial_shift": (1.0, np.nan)}, "initial_shift must be finite"),
    ({"max_iterations": 0}, "max_iterations must be >= 1"),
    ({"tolerance": 0.0}, "tolerance must be > 0"),
    ({"subsample": -3}, "subsample must be"),
])
def test_bad_parameters_raise_clearly_in_fit(params, match):
    ref, tba, _ = xdem.examples.example_pair(chunks=128)
    dm = DhMinimize(**params)  # the constructor only stores
    with pytest.raises(InputError, match=match):
        dm.fit(ref, tba)


def test_too_few_iterations_warns():
    ref, tba = _pair((3.7, -2.3, 0.0))
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        dm = DhMinimize(subsample=2_000, max_iterations=2).fit(ref, tba)
    assert not dm.converged_ and dm.n_iterations_ == 2


@pytest.mark.parametrize("resampling", ["bilinear", "cubic"])
def test_kernel_equals_the_per_point_interpolation(resampling):
    rng = np.random.default_rng(0)
    win = rng.normal(size=(50, 8, 8)).astype(np.float32)
    for prow, pcol in ((3.0, 3.0), (2.25, 4.5), (4.999, 1.001)):
        got = interp_windows_at(win, prow, pcol, resampling=resampling)
        want = interp_windows_kernel(win, np.full(50, prow), np.full(50, pcol), resampling=resampling)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="too close to the edge"):
        interp_windows_at(win, 0.5, 3.0, resampling="cubic")


def test_fit_after_a_prior_translation_reads_the_original_dem():
    """In a pipeline after another rigid step, the search starts from the earlier steps' matrix
    on the unresampled DEM: the total equals a direct fit started there (identical draw and
    search), and the learned translation is what remains after the prior."""
    from xdem.coreg._data import prepare_pair
    from xdem.coreg._shift import translation_matrix

    move = (13.1, -7.9, -0.5)
    ref, tba = _pair(move)
    prior = (-12.0, 7.0, 0.3)
    after = DhMinimize(subsample=5_000).fit_after(prepare_pair(ref, tba), translation_matrix(*prior))
    direct = DhMinimize(subsample=5_000, initial_shift=prior[:2]).fit(ref, tba)
    np.testing.assert_allclose(np.add(after.to_translations(), prior), direct.to_translations(), atol=1e-9, rtol=0)
    assert after.passes_ == direct.passes_ == 2 and after.crs_ == direct.crs_
    assert np.abs(_error(after, move) + prior).max() < TOL


def test_fit_after_a_prior_rotation_fits_the_moved_dem():
    from xdem.coreg import RigidTransform
    from xdem.coreg._data import prepare_pair

    ref, tba = _pair((3.7, -2.3, 1.25))
    centre = (X0 + N * RES / 2, Y0 - N * RES / 2, 1000.0)
    prior = RigidTransform.from_rotations(rz=0.05, centroid=centre, crs=CRS).set_params(resampling="cubic")
    after = DhMinimize(subsample=5_000).fit_after(prepare_pair(ref, tba), prior.to_matrix())
    direct = DhMinimize(subsample=5_000).fit(ref, prior.apply(tba))
    np.testing.assert_allclose(after.to_translations(), direct.to_translations(), atol=1e-9, rtol=0)
