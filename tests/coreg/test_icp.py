"""ICP (:class:`xdem.coreg.ICP`) against analytic truth.

Truth: the analytic terrain of ``tests/truth.py`` (:class:`truth.SineTerrain`, exact anywhere)
moved by a known rigid matrix ``M`` (:func:`truth.rigid_dem_of`); the transform that brings the
moved DEM back is ``inv(M)``. The terrain here is rough: 40 sinusoids with wavelengths from 50 m
(10 pixels of 5 m) to 3 km, amplitude proportional to wavelength, mean slope about 25 degrees,
elevation std about 65 m. On it, resampling alone leaves an NMAD of 0.049 m (bilinear) and
0.0035 m (cubic) when a perfectly known translation is undone: the floor under any result.

Tolerances:
- the issue's rotation case (1000^2, 5 m pixels; 0.02, -0.03, 0.3 degrees about x, y, z and
  (1.5, -2.0, 0.8) m): rotation error <= 0.0005 degrees about each axis and NMAD of dh after a
  cubic apply <= 0.010 m (the issue's targets); measured: <= 5e-6 degrees, 0.3 mm of motion
  anywhere on the DEM, NMAD 0.0030 m (at the resampling floor). The test also asserts that the
  fitted transform moves no point of the DEM more than 0.01 m away from the truth, and that
  the apply stays within 1.5 times the resampling floor.
- point-to-point (accelerated), on a smaller case (300^2, 0.1 degree about z): the same
  targets; measured 1.4e-4 degrees about z and 3 mm, in 12 iterations where point-to-plane
  needs 3 (on the issue's case, measured separately: 8e-6 degrees, 2.8 mm, NMAD 0.0031 m after
  the cubic apply, 14 iterations, 13 s of CPU: too slow for the suite).
- parameters identical (1e-9) whatever the chunking, scheduler or numpy input.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from affine import Affine
from helpers import MaxResult
from reference import check_chunk_independence
from truth import SineTerrain, dem_of, nmad, rigid_dem_of

import xdem
from xdem.coreg import ICP, NuthKaab, RigidTransform
from xdem.errors import ConvergenceError, ConvergenceWarning, FlatTerrainWarning, InputError, NotEnoughDataError
from xdem.kernels.rigid import rigid_matrix, rotation_matrix, rotations_of, transform_points
from xdem.testing import CHECKS, check_coreg

CRS = "EPSG:32633"
RES = 5.0
X0, Y0 = 500000.0, 5000000.0
T = Affine(RES, 0.0, X0, 0.0, -RES, Y0)
TERRAIN = SineTerrain(crs=CRS, origin=(X0, Y0), shortest=50.0)

#: The issue's targets.
ROTATION_TOL_DEG = 0.0005
NMAD_TOL = 0.010


def _centre(n: int) -> np.ndarray:
    return np.array([X0 + n * RES / 2, Y0 - n * RES / 2, 1000.0])


def _pair(n: int, rotations: tuple[float, float, float], move: tuple[float, float, float], chunks: int = 128):
    """``ref``, the terrain moved by ``M`` (``tba``) and ``inv(M)``: the transform to find."""
    m = rigid_matrix(rotation_matrix(*rotations), np.asarray(move), _centre(n))
    ref = dem_of(TERRAIN, crs=CRS, transform=T, shape=(n, n), chunks=chunks)
    tba = rigid_dem_of(TERRAIN, transform=T, shape=(n, n), matrix=m, chunks=chunks)
    return ref, tba, np.linalg.inv(m)


def _errors(fitted: np.ndarray, truth: np.ndarray, n: int) -> tuple[np.ndarray, float]:
    """Rotation errors (degrees about x, y, z) and the largest distance between the images of
    the DEM's corners (at the terrain's mean elevation) under the fitted and the true matrix."""
    rot = np.array(rotations_of(fitted[:3, :3])) - np.array(rotations_of(truth[:3, :3]))
    xs, ys = [X0, X0 + n * RES], [Y0, Y0 - n * RES]
    corners = np.array([[x, y, 1000.0] for x in xs for y in ys]).T
    gap = transform_points(fitted, *corners) - transform_points(truth, *corners)
    return rot, float(np.max(np.linalg.norm(gap, axis=0)))


def _interior(a: np.ndarray, margin: int = 12) -> np.ndarray:
    return a[margin:-margin, margin:-margin]


def test_rotation_of_three_tenths_of_a_degree_recovered_within_half_a_millidegree():
    """1000^2 DEM, 5 m pixels, rough terrain; 0.3 degree about z, a few hundredths about x and
    y and a metre-scale translation: rotations within 0.0005 degree, corners within 1 cm, with
    the defaults (point-to-plane, 500 000 points, cubic apply)."""
    n = 1000
    ref, tba, truth = _pair(n, (0.02, -0.03, 0.3), (1.5, -2.0, 0.8), chunks=256)
    icp = ICP().fit(ref, tba)
    rot, gap = _errors(icp.to_matrix(), truth, n)
    assert np.all(np.abs(rot) <= ROTATION_TOL_DEG), rot
    assert gap <= 0.01, gap
    assert icp.converged_ and icp.n_iterations_ <= 6
    assert icp.passes_ <= 3  # the draw, and the windows cut again once the rotation is found
    assert icp.residual_nmad_ < 0.01
    err = nmad(_interior(icp.apply(tba).values - ref.values))
    assert err <= NMAD_TOL, err
    # the floor: a perfectly known translation of similar size undone with the same resampling
    moved = dem_of(TERRAIN, crs=CRS, transform=T, shape=(n, n), move=(1.5, -2.0, 0.8), chunks=256)
    back = RigidTransform.from_translations(-1.5, 2.0, -0.8, crs=CRS).set_params(resampling="cubic")
    floor = nmad(_interior(back.apply(moved).values - ref.values))
    assert err <= 1.5 * floor, (err, floor)


def test_point_to_point_on_an_easier_case():
    """Besl & McKay's point-to-point converges linearly (accelerated here): on a smaller case
    (0.1 degree about z, 300^2) it reaches the same targets, in more iterations than
    point-to-plane."""
    n = 300
    ref, tba, truth = _pair(n, (0.01, -0.01, 0.1), (1.0, -0.5, 0.3))
    p2p = ICP(method="point_to_point", subsample=50_000).fit(ref, tba)
    rot, gap = _errors(p2p.to_matrix(), truth, n)
    assert np.all(np.abs(rot) <= ROTATION_TOL_DEG), rot
    assert gap <= 0.01, gap
    assert p2p.converged_
    p2plane = ICP(subsample=50_000).fit(ref, tba)
    assert p2plane.n_iterations_ < p2p.n_iterations_
    rot2, gap2 = _errors(p2plane.to_matrix(), truth, n)
    assert np.all(np.abs(rot2) <= ROTATION_TOL_DEG) and gap2 <= 0.01, (rot2, gap2)


@pytest.mark.parametrize("method", ["point_to_plane", "point_to_point"])
def test_fit_is_chunk_and_scheduler_independent(method):
    ref, tba, _ = _pair(200, (0.01, 0.02, 0.2), (2.3, -1.1, 0.4))

    def fit(r, t):
        icp = ICP(method=method, subsample=3000, random_state=4).fit(r, t)
        return [icp.to_matrix(), icp.count_, icp.residual_nmad_, icp.n_iterations_, icp.passes_]

    out = check_chunk_independence(fit, ref, tba, chunkings=(64, 128, 1000), atol=1e-9)
    assert np.all(np.isfinite(out))


def test_point_to_point_passes_the_conformance_checker():
    ref, tba, _ = xdem.examples.example_pair(chunks=128, noise=0.05, holes=3)
    assert check_coreg(lambda: ICP(method="point_to_point", subsample=5000), ref=ref, tba=tba) == list(CHECKS)


def test_memory_is_bounded_by_the_subsample_not_the_dem():
    """No task result grows with the DEM's size, with the windows cut again around the moved
    points (a 6 pixel shift: several passes): the largest is the draw's candidates held from one
    row of blocks to the next (:mod:`xdem.sampling`), which the k smallest hashes bound (about
    400 bytes a candidate here: its 8 x 8 window of the reference and values), not a chunk count."""
    largest = []
    for n in (400, 800):
        ref = dem_of(TERRAIN, crs=CRS, transform=T, shape=(n, n), chunks=100)
        tba = dem_of(TERRAIN, crs=CRS, transform=T, shape=(n, n), move=(31.0, -22.0, 5.0), chunks=100)
        with MaxResult() as mr:
            icp = ICP(subsample=2000).fit(ref, tba)
        assert icp.passes_ >= 3
        np.testing.assert_allclose(icp.to_translations(), (-31.0, 22.0, -5.0), atol=0.02)
        largest.append(mr.max_bytes)
    assert 0 < largest[1] <= 1.1 * largest[0], largest  # 4 times the pixels, the same largest result
    assert largest[1] <= 2000 * 500, largest  # a bound of the subsample's, whatever the DEM


def test_initial_shift_starts_near_the_answer():
    """A 24-pixel offset: found from zero too (the long wavelengths carry it), but an
    initial_shift near the answer saves iterations and passes and gives the same result;
    giving dz as well replaces the median vertical start."""
    ref = dem_of(TERRAIN, crs=CRS, transform=T, shape=(400, 400), chunks=128)
    tba = dem_of(TERRAIN, crs=CRS, transform=T, shape=(400, 400), move=(101.0, -62.0, 5.0), chunks=128)
    cold = ICP(subsample=10_000).fit(ref, tba)
    warm = ICP(subsample=10_000, initial_shift=(-95.0, 60.0)).fit(ref, tba)
    warm3 = ICP(subsample=10_000, initial_shift=(-95.0, 60.0, -4.0)).fit(ref, tba)
    for icp in (cold, warm, warm3):
        np.testing.assert_allclose(icp.to_translations(), (-101.0, 62.0, -5.0), atol=0.02)
        assert np.all(np.abs(icp.to_rotations()) < 1e-3)
    assert warm.passes_ < cold.passes_ and warm.n_iterations_ < cold.n_iterations_
    np.testing.assert_allclose(warm3.to_matrix(), warm.to_matrix(), atol=2e-3)


def test_far_apart_raises_and_initial_shift_gets_there():
    """Offset by 60 pixels on a 200-pixel DEM: the estimate walks more than a quarter of the DEM
    away from its start and stops with an error suggesting initial_shift, which then finds it."""
    ref = dem_of(TERRAIN, crs=CRS, transform=T, shape=(200, 200), chunks=100)
    tba = dem_of(TERRAIN, crs=CRS, transform=T, shape=(200, 200), move=(301.0, -12.0, 3.0), chunks=100)
    with pytest.raises(ConvergenceError, match="initial_shift"):
        ICP(subsample=5000).fit(ref, tba)
    icp = ICP(subsample=5000, initial_shift=(-295.0, 10.0)).fit(ref, tba)
    np.testing.assert_allclose(icp.to_translations(), (-301.0, 12.0, -3.0), atol=0.02)


@pytest.mark.parametrize(("params", "match"), [
    ({"method": "nearest"}, "method"),
    ({"max_iterations": 0}, "max_iterations"),
    ({"max_iterations": 2.5}, "max_iterations"),
    ({"tolerance": 0}, "tolerance"),
    ({"tolerance": "small"}, "tolerance"),
    ({"rejection_factor": -1.0}, "rejection_factor"),
    ({"rejection_factor": float("nan")}, "rejection_factor"),
    ({"resampling": "nearest"}, "resampling"),
    ({"initial_shift": (1.0,)}, "initial_shift"),
    ({"initial_shift": (1.0, 2.0, 3.0, 4.0)}, "initial_shift"),
    ({"initial_shift": ("a", 1.0)}, "initial_shift"),
    ({"initial_shift": (float("nan"), 0.0)}, "initial_shift"),
    ({"initial_shift": "1,2"}, "initial_shift"),
    ({"subsample": -5}, "subsample"),
    ({"random_state": -1}, "random_state"),
])
def test_bad_parameters_raise_clear_errors(params, match):
    ref = dem_of(TERRAIN, crs=CRS, transform=T, shape=(60, 60), chunks=30)
    with pytest.raises(InputError, match=match):
        ICP(**params).fit(ref, ref)


def test_too_little_data_raises():
    ref = dem_of(TERRAIN, crs=CRS, transform=T, shape=(60, 60), chunks=30)
    tba = ref.where((ref.x < X0 + 40) & (ref.y > Y0 - 40))  # 8 x 8 valid pixels
    with pytest.raises(NotEnoughDataError, match="ICP"):
        ICP().fit(ref, tba)


def test_not_converging_warns():
    ref, tba, _ = _pair(200, (0.0, 0.0, 0.3), (2.0, 1.0, 0.0))
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        icp = ICP(max_iterations=1, subsample=2000).fit(ref, tba)
    assert not icp.converged_ and icp.n_iterations_ == 1


def test_flat_terrain_keeps_the_unconstrained_parameters():
    """A tilted plane constrains only the motion across it: a vertical shift is found, the
    horizontal shift and the rotation about the plane's normal stay at their start."""
    ref = dem_of(TERRAIN, crs=CRS, transform=T, shape=(100, 100), chunks=50)
    rows, cols = np.mgrid[0:100, 0:100]
    ref = ref.copy(data=(100.0 + 0.02 * cols + 0.01 * rows).astype(np.float32)).chunk(50)
    tba = ref + np.float32(1.5)
    with pytest.warns(FlatTerrainWarning, match="six parameters"):
        icp = ICP(subsample=2000).fit(ref, tba)
    moved = transform_points(icp.to_matrix(), np.array([X0 + 250.0]), np.array([Y0 - 250.0]), np.array([101.5]))
    np.testing.assert_allclose(moved[:, 0], [X0 + 250.0, Y0 - 250.0, 100.0], atol=0.01)


def test_rejection_can_be_turned_off_and_excluded_terrain_is_ignored():
    """Without rejection every match counts; a block of the reference raised by 30 m (unstable
    terrain) spoils a fit without rejection unless it is excluded by the inlier mask."""
    ref, tba, truth = _pair(200, (0.0, 0.0, 0.2), (1.2, -0.4, 0.3))
    bumped = ref.where(~((ref.x < X0 + 300) & (ref.y > Y0 - 300)), ref + 30.0)
    keep = ICP(subsample=5000).fit(bumped, tba)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # pulled between the bump and the terrain
        none = ICP(subsample=5000, rejection_factor=None, max_iterations=20).fit(bumped, tba)
    stable = ~((ref.x < X0 + 300) & (ref.y > Y0 - 300))
    masked = ICP(subsample=5000, rejection_factor=None).fit(bumped, tba, inlier_mask=stable)
    assert none.count_ > keep.count_
    assert _errors(none.to_matrix(), truth, 200)[1] > 0.5  # the bump pulls it up
    for icp in (keep, masked):
        assert _errors(icp.to_matrix(), truth, 200)[1] < 0.02


def test_after_nuth_kaab_in_a_pipeline():
    """``NuthKaab() + ICP()``: one rigid transform (the product of the steps' matrices)."""
    ref, tba, truth = _pair(200, (0.0, 0.0, 0.1), (7.3, -4.1, 1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        pipe = (NuthKaab(subsample=5000, resampling="cubic") + ICP(subsample=5000)).fit(ref, tba)
    nk, icp = pipe.steps
    np.testing.assert_allclose(pipe.to_matrix(), icp.to_matrix() @ nk.to_matrix(), atol=1e-9)
    assert _errors(pipe.to_matrix(), truth, 200)[1] < 0.05


def test_fit_after_a_prior_moves_the_points_not_the_dem():
    """In a pipeline ICP fits on the original DEM's points moved by the earlier steps' matrix
    (``fit_after``), not on a DEM they resampled: with a bilinear Nuth & Kääb in front
    the total is as good as ICP alone; after the identity it is exactly the plain fit."""
    from xdem.coreg._data import prepare_pair

    ref, tba, truth = _pair(300, (0.01, -0.02, 0.2), (1.2, -0.7, 0.4))
    alone = ICP(subsample=20000).fit(ref, tba)
    data = prepare_pair(ref, tba)
    same = ICP(subsample=20000).fit_after(data, np.eye(4))
    np.testing.assert_array_equal(same.to_matrix(), alone.to_matrix())
    assert same.crs_ == alone.crs_
    prior = rigid_matrix(np.eye(3), np.array([-1.0, 0.5, -0.3]), _centre(300))  # roughly the way
    after = ICP(subsample=20000).fit_after(data, prior)
    assert _errors(after.to_matrix() @ prior, truth, 300)[1] < 0.005
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        pipe = (NuthKaab(subsample=20000) + ICP(subsample=20000)).fit(ref, tba)
    direct = ICP(subsample=20000).fit_after(data, pipe.steps[0].to_matrix())
    np.testing.assert_allclose(pipe.steps[1].to_matrix(), direct.to_matrix(), rtol=0, atol=1e-9)  # the route taken
    assert _errors(pipe.to_matrix(), truth, 300)[1] < 0.005


def test_compiled_bicubic_surface_is_the_numpy_one_bit_for_bit():
    """The compiled :func:`xdem.kernels.icp.cubic_surface` against its vectorised numpy version:
    the same bits for z and both derivatives, NaN where the footprint leaves the window or
    holds a NaN, on float32 and float64 windows."""
    from xdem.kernels.icp import _cubic_surface_numpy, cubic_surface

    rng = np.random.default_rng(5)
    win = rng.normal(1500.0, 10.0, (300, 6, 6)).astype(np.float32)
    win[rng.integers(0, 300, 30), rng.integers(0, 6, 30), rng.integers(0, 6, 30)] = np.nan
    index = rng.integers(0, 300, 2000)
    prow, pcol = rng.uniform(-0.5, 5.5, 2000), rng.uniform(0.5, 4.5, 2000)
    prow[:5] = np.nan
    prow[5:10], pcol[5:10] = 2.0, 3.0  # pixel centres
    for w in (win, win.astype(np.float64)):
        with np.errstate(invalid="ignore"):  # the numpy version casts NaN positions to integers
            expected = _cubic_surface_numpy(w, index, prow, pcol)
        got = cubic_surface(w, index, prow, pcol)
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(g, e)
        assert 0.3 < np.isnan(got[0]).mean() < 0.9 and np.isfinite(got[0]).sum() > 300


def test_sub_pixel_shift_is_fitted_in_one_pass_with_the_result_of_windows_cut_again(monkeypatch):
    """The draw's 8 x 8 windows hold the 6 x 6 windows of the cells a sub-pixel shift moves the
    points to: one pass over the data instead of two, and the same fit to the bit as with the
    windows cut again from the data (the draw's windows without the spare pixel)."""
    import xdem.coreg.icp as icp_module

    ref = dem_of(TERRAIN, crs=CRS, transform=T, shape=(200, 200), chunks=64)
    tba = dem_of(TERRAIN, crs=CRS, transform=T, shape=(200, 200), move=(3.17, -1.42, 2.1), chunks=64)
    spare = ICP(subsample=5000, random_state=1).fit(ref, tba)
    monkeypatch.setattr(icp_module, "_SPARE", 0)
    again = ICP(subsample=5000, random_state=1).fit(ref, tba)
    assert (spare.passes_, again.passes_) == (1, 2)
    np.testing.assert_allclose(spare.to_translations(), (-3.17, 1.42, -2.1), atol=0.01)
    assert np.array_equal(spare.to_matrix(), again.to_matrix())
    assert (spare.count_, spare.n_iterations_, spare.residual_nmad_) == (again.count_, again.n_iterations_,
                                                                          again.residual_nmad_)


def _planes_case(m: int, *, flat: bool) -> tuple[np.ndarray, ...]:
    """Points near random planes (``flat``: every normal vertical, a rank-deficient system)."""
    rng = np.random.default_rng(7)
    q = rng.normal(size=(m, 3)) * [500.0, 500.0, 50.0] + [4e5, 5e6, 1500.0]
    n = np.tile([0.0, 0.0, 1.0], (m, 1)) if flat else rng.normal(size=(m, 3))
    n /= np.linalg.norm(n, axis=1)[:, None]
    p = q + n * rng.normal(scale=0.3, size=(m, 1)) + [0.2, -0.1, 0.05]
    return p, q, n, q.mean(axis=0), rng.random(m) < 0.9


def _whole_lstsq_step(p: np.ndarray, q: np.ndarray, n: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, int]:
    """The point-to-plane increment by lstsq on the whole design (the former kernel)."""
    d = p - c
    scale = float(np.sqrt(np.mean(np.sum(d * d, axis=1))))
    design = np.column_stack([np.cross(d / scale, n), n])
    x, _, rank, _ = np.linalg.lstsq(design, -np.sum((p - q) * n, axis=1), rcond=1e-4)
    return np.concatenate([x[:3] / scale, x[3:]]), int(rank)


@pytest.mark.parametrize("m", [5, 1000, 150_000])  # fewer rows than unknowns, one batch, three batches
@pytest.mark.parametrize("flat", [False, True])
def test_point_to_plane_step_in_batches_is_the_lstsq_of_the_whole_system(m, flat):
    """The batched QR reduction gives lstsq's solution on the whole design (to rounding: 1e-9 of a
    metre or of a radian, far below ICP's 1e-4 px tolerance) and the same rank, also when the
    system is rank-deficient (flat terrain: the minimum-norm solution) or has fewer rows than
    unknowns; ``where`` is the same as indexing the rows."""
    from scipy.spatial.transform import Rotation

    from xdem.kernels.icp import STEP_BATCH, point_to_plane_step

    p, q, n, c, ok = _planes_case(m, flat=flat)
    assert m < 7 or m <= STEP_BATCH or m > 2 * STEP_BATCH
    want, want_rank = _whole_lstsq_step(p[ok], q[ok], n[ok], c)
    rot, shift, rank = point_to_plane_step(p, q, n, c, where=ok)
    assert rank == want_rank and rank == (3 if flat else min(6, int(ok.sum())))
    np.testing.assert_allclose(Rotation.from_matrix(rot).as_rotvec(), want[:3], rtol=0, atol=1e-9)
    np.testing.assert_allclose(shift, want[3:], rtol=0, atol=1e-9)
    rot2, shift2, _ = point_to_plane_step(p[ok], q[ok], n[ok], c)
    np.testing.assert_array_equal(rot2, rot)
    np.testing.assert_array_equal(shift2, shift)


def test_max_motion_and_plane_distances_are_the_whole_array_formulas():
    """The batched largest motion and the column-wise distances give the whole-array formulas' numbers."""
    from xdem.kernels.icp import STEP_BATCH, max_motion, move_points, plane_distances

    p, q, n, c, ok = _planes_case(2 * STEP_BATCH + 17, flat=False)
    rot, t = rotation_matrix(0.01, -0.02, 0.03), np.array([0.5, -0.25, 1.0])
    motion = move_points(p[ok], rot, t, c) - p[ok]
    assert max_motion(rot, t, c, p, where=ok) == float(np.sqrt(np.max(np.sum(motion * motion, axis=1))))
    want = np.where(ok, np.sum((p - q) * n, axis=1), np.nan)
    np.testing.assert_array_equal(plane_distances(p, q, n, ok), want)
