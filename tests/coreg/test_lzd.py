"""LZD (Rosenholm & Torlegård 1988) against analytic truth.

Truth: :class:`truth.SineTerrain`, evaluable anywhere, moved by a known rigid matrix with
:func:`truth.rigid_dem_of` (solved independently of the package; the matrix to apply to that
DEM to get the terrain back is ``inv(M)``). The rough terrain of the issue's cases has its
shortest waves at 50 m (10 pixels of 5 m; slopes of 24 degrees at the median); the steep one
at 40 m with a relief of 150 m (standard deviation; slopes of 47 degrees at the median).

Tolerances are the issue's targets (rotation 0.0005 degree about each axis, NMAD of dh after
a cubic apply 0.010 m, translation 0.005 m); the fits measured here are far inside them
(rotation 2e-7 degree, translation 2e-5 m, shift 3e-4 m), the margin is not a test of luck.
"""

from __future__ import annotations

import dask
import numpy as np
import pytest
from affine import Affine
from helpers import MaxResult
from reference import check_chunk_independence
from truth import SineTerrain, dem_of, nmad, pixel_scale_terrain, rigid_dem_of

from xdem.coreg import LZD, NuthKaab
from xdem.errors import ConvergenceError, ConvergenceWarning, FlatTerrainWarning, InputError, NotEnoughDataError
from xdem.kernels.lzd import increment_matrix, lzd_design, lzd_step, window_gradient
from xdem.kernels.rigid import rigid_matrix, rotation_matrix, rotations_of, split_matrix

CRS = "EPSG:32633"
RES = 5.0
X0, Y0 = 500000.0, 4000000.0
T = Affine(RES, 0.0, X0, 0.0, -RES, Y0)
ROUGH = SineTerrain(crs=CRS, origin=(X0, Y0), shortest=50.0)
STEEP = SineTerrain(crs=CRS, origin=(X0, Y0), shortest=40.0, relief=0.29)
#: The rotation case: a few tenths of a degree about z, hundredths about x and y.
ROTATIONS = (0.02, -0.03, 0.3)
MOVE = np.array([1.5, -2.0, 0.8])


def _centre(n: int) -> np.ndarray:
    return np.array([X0 + n * RES / 2, Y0 - n * RES / 2, 1000.0])


def _rotated_pair(n: int, rotations=ROTATIONS, terrain=ROUGH, chunks: int = 128):
    m = rigid_matrix(rotation_matrix(*rotations), MOVE, _centre(n))
    ref = rigid_dem_of(terrain, transform=T, shape=(n, n), matrix=np.eye(4), chunks=chunks)
    tba = rigid_dem_of(terrain, transform=T, shape=(n, n), matrix=m, chunks=chunks)
    return ref, tba, m


def _errors(fitted: np.ndarray, m: np.ndarray, centre: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rotation errors (degrees, per axis) and translation error at ``centre`` of a fitted
    matrix against the truth ``inv(m)``."""
    truth_r, truth_t = split_matrix(np.linalg.inv(m), centre)
    fit_r, fit_t = split_matrix(fitted, centre)
    return np.subtract(rotations_of(fit_r), rotations_of(truth_r)), fit_t - truth_t


# ---------------------------------------------------------------------------------------- kernel
def _moved_surface(terrain: SineTerrain, m: np.ndarray, qx: np.ndarray, qy: np.ndarray) -> np.ndarray:
    """Elevation above ``q`` of the terrain moved by ``m`` (float64 fixed point, as truth.rigid_dem_of)."""
    inv = np.linalg.inv(m)
    z = terrain(qx, qy)
    for _ in range(100):
        px = inv[0, 0] * qx + inv[0, 1] * qy + inv[0, 2] * z + inv[0, 3]
        py = inv[1, 0] * qx + inv[1, 1] * qy + inv[1, 2] * z + inv[1, 3]
        new = m[2, 0] * px + m[2, 1] * py + m[2, 2] * terrain(px, py) + m[2, 3]
        if np.abs(new - z).max() < 1e-12:
            return new
        z = new
    raise AssertionError("no convergence")


def test_design_is_the_derivative_of_the_moved_surface():
    """Each column of the design is the change of the moved surface's elevation above the
    points per unit of an unknown: central finite differences of the exact moved surface."""
    rng = np.random.default_rng(0)
    qx, qy = X0 + rng.uniform(0, 2000, 50), Y0 - rng.uniform(0, 2000, 50)
    c = np.array([X0 + 1000.0, Y0 - 1000.0, 900.0])
    z = ROUGH(qx, qy)
    h = 1e-4
    gx = (ROUGH(qx + h, qy) - ROUGH(qx - h, qy)) / (2 * h)
    gy = (ROUGH(qx, qy + h) - ROUGH(qx, qy - h)) / (2 * h)
    design = lzd_design(np.vstack([qx - c[0], qy - c[1], z - c[2]]), gx, gy)
    for j, eps in enumerate([1e-7, 1e-7, 1e-7, 1e-4, 1e-4, 1e-4]):
        inc = np.zeros(6)
        inc[j] = eps
        plus = _moved_surface(ROUGH, increment_matrix(inc, c), qx, qy)
        minus = _moved_surface(ROUGH, increment_matrix(-inc, c), qx, qy)
        fd = (plus - minus) / (2 * eps)
        np.testing.assert_allclose(design[:, j], fd, rtol=1e-4, atol=1e-4 * np.abs(fd).max(), err_msg=f"column {j}")


def test_step_recovers_an_increment_despite_outliers():
    rng = np.random.default_rng(2)
    n = 5000
    d = rng.normal(0.0, 500.0, (3, n))
    gx, gy = rng.normal(0.0, 0.6, (2, n))
    true = np.array([2e-5, -1e-5, 4e-5, 0.7, -0.4, 0.2])
    r = -lzd_design(d, gx, gy) @ true + rng.normal(0.0, 0.01, n)
    bad = rng.random(n) < 0.05
    r[bad] += rng.choice([-1, 1], bad.sum()) * rng.uniform(5.0, 50.0, bad.sum())
    step = lzd_step(r, d, gx, gy, scale=500.0, outlier_factor=3.0)
    assert not step.inliers[bad].any()  # every gross outlier rejected
    assert step.inliers.mean() > 0.93
    # the noise (1 cm) allows about 3e-7 rad and 2.5e-4 m (one standard deviation): 5 of them
    np.testing.assert_allclose(step.increment[:3], true[:3], atol=1.5e-6)
    np.testing.assert_allclose(step.increment[3:], true[3:], atol=1.5e-3)
    plain = lzd_step(r, d, gx, gy, scale=500.0, outlier_factor=None)
    assert np.abs(plain.increment[3:] - true[3:]).max() > 10 * np.abs(step.increment[3:] - true[3:]).max()
    only = lzd_step(r, d, gx, gy, scale=500.0, unknowns=(3, 4, 5))
    assert np.all(only.increment[:3] == 0.0)


def test_window_gradient_of_a_wave():
    """Fourth-order differences: the slope of a wave of 8 pixels within 3 %."""
    k = 2 * np.pi / 40.0  # 40 m waves on 5 m pixels
    rows, cols = np.mgrid[0:6, 0:6].astype(float)
    x, y = X0 + 5.0 * cols, Y0 - 5.0 * rows
    win = np.sin(k * (x - X0) + 0.3) + np.cos(0.5 * k * (y - Y0))
    gx, gy = window_gradient(win[None], 2, step_x=5.0, step_y=-5.0)
    assert gx[0] == pytest.approx(k * np.cos(k * (x[2, 2] - X0) + 0.3), rel=0.03)
    assert gy[0] == pytest.approx(-0.5 * k * np.sin(0.5 * k * (y[2, 2] - Y0)), rel=0.03)


# ---------------------------------------------------------- a rotation of a few tenths of a degree
def test_rotation_of_three_tenths_of_a_degree_recovered_within_half_a_millidegree():
    """1000^2 DEM, 5 m pixels, rough terrain, rotated by (0.02, -0.03, 0.3) degrees about
    (x, y, z) and moved by (1.5, -2.0, 0.8) m: rotations within 0.0005 degree, translation
    within 0.005 m (a thousandth of a pixel), NMAD of dh after a cubic apply within 0.010 m."""
    n = 1000
    ref, tba, m = _rotated_pair(n, chunks=256)
    lzd = LZD().fit(ref, tba)
    assert lzd.converged_ and lzd.horizontal_constrained_
    rot_err, t_err = _errors(lzd.to_matrix(), m, np.asarray(lzd.centroid_))
    assert np.abs(rot_err).max() <= 0.0005, rot_err
    assert np.abs(t_err).max() <= 0.005, t_err
    # the residual transform moves no point of the DEM (corners, 0 to 2000 m) by more than 5 mm
    residual = lzd.to_matrix() @ m - np.eye(4)
    corners = np.array([[x, y, z, 1.0] for x in (X0, X0 + n * RES) for y in (Y0, Y0 - n * RES) for z in (0.0, 2000.0)])
    assert np.abs(corners @ residual.T).max() <= 0.005
    assert lzd.residual_nmad_ <= 0.010
    assert lzd.passes_ <= 3  # the draw, then the windows of the points the first step moved
    dh = lzd.apply(tba).values - ref.values
    assert np.isfinite(dh).mean() > 0.98
    assert nmad(dh) <= 0.010


@pytest.fixture(scope="module")
def steep_pair():
    """Pure shift on steep terrain (relief std 150 m, slopes 47 degrees at the median)."""
    n = 1000
    move = (3.17, -1.42, 0.6)
    ref = dem_of(STEEP, crs=CRS, transform=T, shape=(n, n), chunks=256)
    tba = dem_of(STEEP, crs=CRS, transform=T, shape=(n, n), move=move, chunks=256)
    return ref, tba, np.array([-v for v in move])


def test_pure_shift_on_steep_terrain(steep_pair):
    """Within 0.005 m of the truth, with and without rotations, alone and after Nuth & Kääb
    (the pipeline starts the rigid step from Nuth & Kääb's matrix on the unresampled DEM)."""
    ref, tba, truth = steep_pair
    assert 140 < float(ref.std()) < 160
    full = LZD().fit(ref, tba)
    assert np.abs(np.subtract(full.to_translations(), truth)).max() <= 0.005
    assert np.abs(full.to_rotations()).max() < 1e-5
    assert full.passes_ == 1  # a shift below a pixel: the draw's windows serve every step
    pipe = NuthKaab() + LZD()
    pipe.fit(ref, tba)
    c = np.asarray(pipe.steps[1].centroid_)
    moved = pipe.to_matrix() @ np.append(c, 1.0)
    assert np.abs(moved[:3] - c - truth).max() <= 0.005


# ----------------------------------------------------------------------------- options and contract
@pytest.fixture(scope="module")
def small_pair():
    return _rotated_pair(300, rotations=(0.01, -0.02, 0.5))  # moves the corners by 2 pixels


def test_fit_is_chunk_independent_and_bounded(small_pair):
    ref, tba, _ = small_pair

    def fit(r, t):
        est = LZD(subsample=3000, random_state=4).fit(r, t)
        return [est.to_matrix(), est.passes_, est.count_, est.residual_nmad_]

    check_chunk_independence(fit, ref, tba, chunkings=(64, 100), atol=1e-9)
    # Memory: a task holds one chunk, or the windows (6 x 6 float32) of the sampled points in
    # one chunk, whichever is larger; with 1 % of the pixels sampled (500 000 points of a
    # 7000^2 DEM) the windows are the smaller, so no task result exceeds a chunk.
    chunk = 64
    with MaxResult() as cb, dask.config.set(scheduler="synchronous"):
        est = LZD(subsample=900, random_state=4).fit(ref.chunk(chunk), tba.chunk(chunk))
    assert est.passes_ == 2  # the rotation's first step leaves the windows once
    assert 0 < cb.max_2d_bytes <= chunk * chunk * 4, cb.max_2d_bytes


def test_only_translation(small_pair):
    ref, tba, m = small_pair
    shifted = dem_of(ROUGH, crs=CRS, transform=T, shape=(300, 300), move=(2.2, -1.3, 0.4))
    est = LZD(only_translation=True).fit(ref, shifted)
    assert not est.has_rotation() and est.to_rotations() == (0.0, 0.0, 0.0)
    np.testing.assert_allclose(est.to_translations(), (-2.2, 1.3, -0.4), atol=0.005)
    # on the rotated pair it is a translation too, and a worse fit than with rotations
    trans = LZD(only_translation=True).fit(ref, tba)
    full = LZD().fit(ref, tba)
    assert not trans.has_rotation()
    assert trans.residual_nmad_ > 10 * full.residual_nmad_


def test_initial_shift():
    """A shift of 12 and 9 pixels: from an estimate nearby (2 or 3 numbers) LZD lands on it."""
    n = 300
    move = (61.3, -44.6, 1.2)
    ref = dem_of(ROUGH, crs=CRS, transform=T, shape=(n, n))
    tba = dem_of(ROUGH, crs=CRS, transform=T, shape=(n, n), move=move)
    truth = np.array([-v for v in move])
    two = LZD(initial_shift=(-60.0, 45.0)).fit(ref, tba)
    three = LZD(initial_shift=(-60.0, 45.0, -1.0)).fit(ref, tba)
    for est in (two, three):
        assert est.converged_
        np.testing.assert_allclose(est.to_translations(), truth, atol=0.005)
    assert two.passes_ == 2  # the draw (windows at the pixels), then windows at the shifted positions
    np.testing.assert_allclose(three.to_matrix(), two.to_matrix(), atol=1e-6)


@pytest.mark.parametrize("params", [
    {"max_iterations": 0}, {"max_iterations": 2.5}, {"max_iterations": "ten"}, {"tolerance": 0},
    {"tolerance": -1.0}, {"tolerance": "small"}, {"outlier_factor": 0.0}, {"outlier_factor": "3"},
    {"resampling": "nearest"}, {"only_translation": "yes"}, {"initial_shift": (1.0,)},
    {"initial_shift": (1.0, "a")}, {"initial_shift": (np.nan, 0.0)}, {"initial_shift": "1,2"},
    {"on_divergence": "ignore"}, {"subsample": -5}, {"random_state": -1},
])
def test_bad_parameters_raise_input_error(params, small_pair):
    ref, tba, _ = small_pair
    est = LZD(**params)  # stored as given
    with pytest.raises(InputError):
        est.fit(ref, tba)


def test_flat_terrain_estimates_tilts_and_vertical_only():
    """A plane tilted by 0.01 degree about x and raised by 0.5 m: no horizontal motion can be
    seen; the tilt and the vertical shift are found."""
    n = 200
    rows, cols = np.mgrid[0:n, 0:n]
    y = Y0 - (rows + 0.5) * RES
    plane = 1000.0 + 0.0 * cols
    ref = dem_of(ROUGH, crs=CRS, transform=T, shape=(n, n)).copy(data=plane.astype(np.float32))
    tilt = np.radians(0.01) * (y - y.mean())
    tba = ref.copy(data=(plane + tilt + 0.5).astype(np.float32))
    with pytest.warns(FlatTerrainWarning, match="too flat"):
        est = LZD().fit(ref, tba)
    assert not est.horizontal_constrained_
    assert est.rotation_x_ == pytest.approx(-0.01, abs=1e-5)
    assert est.shift_z_ == pytest.approx(-0.5, abs=1e-3)
    assert est.rotation_z_ == 0.0
    assert abs(est.shift_x_) < 1e-6 and abs(est.shift_y_) < 1e-6  # the motion of the centroid: rounding only


def test_not_enough_data_and_not_converged(small_pair):
    ref, tba, _ = small_pair
    keep = (np.arange(300)[:, None] < 50) & (np.arange(300)[None, :] == 150)  # 50 valid pixels
    holes = tba.copy(data=np.where(keep, tba.values, np.nan).astype(np.float32))
    with pytest.raises(NotEnoughDataError):
        LZD().fit(ref, holes)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        est = LZD(max_iterations=1).fit(ref, tba)
    assert not est.converged_ and est.n_iterations_ == 1


def test_divergence_raises_or_warns():
    """DEMs offset by 400 m (80 pixels) on a 1.5 km grid: the fit wanders off; an error that
    suggests initial_shift, or with on_divergence='warn' the start and a vertical shift."""
    n = 300
    ref = dem_of(ROUGH, crs=CRS, transform=T, shape=(n, n))
    tba = dem_of(ROUGH, crs=CRS, transform=T, shape=(n, n), move=(400.0, 0.0, 0.0))
    with pytest.raises(ConvergenceError, match="initial_shift"):
        LZD(subsample=5000).fit(ref, tba)
    with pytest.warns(ConvergenceWarning, match="diverged"):
        est = LZD(subsample=5000, on_divergence="warn").fit(ref, tba)
    assert not est.converged_
    assert est.to_translations()[:2] == (0.0, 0.0) and not est.has_rotation()
    # from an estimate 5 m away it lands on the truth
    near = LZD(initial_shift=(-395.0, 0.0)).fit(ref, tba)
    np.testing.assert_allclose(near.to_translations(), (-400.0, 0.0, 0.0), atol=0.005)


def test_fit_after_a_prior_learns_what_is_left(small_pair):
    """Started from a prior matrix on the unresampled DEM (as in a pipeline), LZD learns the
    transform to apply after it: nothing left after the truth, the truth after a partial guess."""
    from xdem.coreg._data import prepare_pair

    ref, tba, m = small_pair
    data = prepare_pair(ref, tba)
    truth = np.linalg.inv(m)
    rest = LZD(subsample=20_000).fit_after(data, truth)
    assert np.abs(rest.to_rotations()).max() < 1e-5 and np.abs(rest.to_translations()).max() < 1e-3
    guess = rigid_matrix(rotation_matrix(0.0, 0.0, -0.4), np.array([-1.0, 1.5, 0.0]), _centre(300))
    after = LZD(subsample=20_000).fit_after(data, guess)
    rot_err, t_err = _errors(after.to_matrix() @ guess, m, np.asarray(after.centroid_))
    assert np.abs(rot_err).max() < 1e-5 and np.abs(t_err).max() < 1e-3
    assert after.crs_ == rest.crs_ and after.passes_ <= 2


@pytest.mark.parametrize("rotations", [(0.0, 0.0, 0.0), (0.0, 0.0, 0.5), (3.0, -2.0, 1.0)])
def test_sampler_gives_the_moved_surface(rotations):
    """The rigid sampler against the exact moved surface (smooth terrain: interpolation error
    below 1e-3 m), even from a guess 100 m off: a tilt of 3 degrees then puts the source
    1.7 pixels from where the guess said, and the windows are gathered again around it."""
    from xdem.coreg._rigid_sample import RigidSampler

    smooth = SineTerrain(crs=CRS, origin=(X0, Y0), shortest=200.0)
    n = 200
    dem = dem_of(smooth, crs=CRS, transform=T, shape=(n, n), chunks=64)
    rng = np.random.default_rng(5)
    rows, cols = rng.integers(40, 160, 300), rng.integers(40, 160, 300)
    centre = _centre(n)
    m = rigid_matrix(rotation_matrix(*rotations), MOVE, centre)
    sampler = RigidSampler(dem, rows, cols, interpolation="lagrange", half=2, centre=centre)
    qx, qy = X0 + (cols + 0.5) * RES, Y0 - (rows + 0.5) * RES
    truth = _moved_surface(smooth, m, qx, qy)
    got = sampler(m, truth + 100.0)
    np.testing.assert_allclose(got, truth, atol=1e-3)
    assert 1 <= sampler.reads <= 2 + (rotations[0] != 0.0)  # first windows, then those the solution left
    np.testing.assert_allclose(sampler(m, got), got, atol=1e-9)  # windows re-centred on the solution if near an edge
    reads = sampler.reads
    np.testing.assert_allclose(sampler(m, got), got, atol=1e-9)
    assert sampler.reads == reads  # then they serve


# --------------------------------------------------------------- terrain reaching the pixel scale
@pytest.fixture(scope="module")
def pixel_scale_pair():
    """Pure shift on steep terrain whose spectrum reaches 2.5 pixels (:func:`truth.pixel_scale_terrain`)."""
    n = 600
    move = (3.17, -1.42, 0.6)
    terrain = pixel_scale_terrain(crs=CRS, origin=(X0, Y0), resolution=RES)
    ref = dem_of(terrain, crs=CRS, transform=T, shape=(n, n), chunks=200)
    tba = dem_of(terrain, crs=CRS, transform=T, shape=(n, n), move=move, chunks=200)
    return ref, tba, np.array([-v for v in move])


def test_lagrange8_fit_recovers_a_shift_on_pixel_scale_terrain(pixel_scale_pair):
    """Issue 28's target, the best method within 0.005 m of a pure shift on steep terrain whose
    spectrum reaches the pixel scale, is met by the 8-point Lagrange interpolation in the fit
    (measured: 0.0021 m on the largest axis, 0.0004 pixel). The default 4-point interpolation
    displaces the shortest waves (2.5 to 4 pixels) enough to stay off by 0.0069 m (0.0014
    pixel) here: checked too, so that the case stays one that needs the option. 100 000 points
    (of 360 000) keep the fit near 1 s of CPU; over draws (random_state 1 to 3) the errors spread
    by 0.0005 m (8 points: 0.0020 to 0.0024 m; 4 points: 0.0068 to 0.0074 m)."""
    ref, tba, truth = pixel_scale_pair
    assert 140 < float(ref.std()) < 160
    best = LZD(fit_interpolation="lagrange8", subsample=100_000, random_state=1).fit(ref, tba)
    assert np.abs(np.subtract(best.to_translations(), truth)).max() <= 0.005
    assert best.passes_ == 1  # 10 x 10 windows: the draw's serve every step of a sub-pixel shift
    four = LZD(subsample=100_000, random_state=1).fit(ref, tba)
    assert np.abs(np.subtract(four.to_translations(), truth))[:2].min() > 0.005


def test_fit_interpolation_is_chunk_independent_and_checked(small_pair):
    ref, tba, _ = small_pair

    def fit(r, t):
        est = LZD(subsample=3000, random_state=4, fit_interpolation="lagrange6").fit(r, t)
        return [est.to_matrix(), est.passes_, est.count_, est.residual_nmad_]

    check_chunk_independence(fit, ref, tba, chunkings=(64, 100), atol=1e-9)
    with pytest.raises(InputError, match="fit_interpolation must be one of 'lagrange', 'lagrange6', 'lagrange8'"):
        LZD(fit_interpolation="cubic").fit(ref, tba)
