"""The same call gives upstream xdem 0.2.3's answer: DirectionalBias's angle, masked arrays in
median/NMAD, rigid matrices about a centre, per_bin outside the bins, and the points run's
document keys. Each truth is built with upstream's own formula (geoutils' rotated coordinates,
geoutils' NMAD, the centroid algebra of upstream's ``apply_matrix``)."""

from __future__ import annotations

import json
import warnings

import dask.array as da
import geoutils as gu
import numpy as np
import pytest
from click.testing import CliRunner

import xdem
from xdem.cli import main
from xdem.coreg import ICP, LZD, BiasCorr, CoregPipeline, DhMinimize, DirectionalBias, NuthKaab, RigidTransform
from xdem.coreg.directional import along_track
from xdem.errors import EmptyBinWarning, InputError
from xdem.examples import get_path, write_example_pair
from xdem.spatialstats import median, nmad, robust_summary

#: Upstream's strip example (doc/source/biascorr.md, "Directional biases") scaled from its 26 km
#: DEM to the 545 m along-track extent of the 400 x 400 m lidar DEM at 60 degrees: (from, to, bias m).
STRIPS = ((40.0, 60.0, 20.0), (120.0, 135.0, -10.0), (240.0, 255.0, 10.0), (330.0, 355.0, 5.0), (450.0, 500.0, -15.0))


def _rms(a) -> float:
    return float(np.sqrt(np.nanmean(np.asarray(a, dtype=np.float64) ** 2)))


@pytest.fixture(scope="module")
def lidar():
    path = get_path("lidar")
    return xdem.open_dem(path), gu.Raster(path)


def _upstream_along(raster: gu.Raster, angle: float) -> np.ndarray:
    """Upstream's along-track coordinate: ``geoutils.raster.get_xy_rotated(...)[0]``."""
    return np.asarray(gu.raster.get_xy_rotated(raster, along_track_angle=angle)[0], dtype=np.float64)


# --- DirectionalBias: the angle is clockwise from east ----------------------------------------
def test_directional_bias_corrects_upstreams_strip_example_at_60_degrees(lidar):
    """Strips along upstream's 60-degree axis: RMSE 5.121 m -> 0.448 m (before this convention,
    DirectionalBias(angle=60) left 5.116 m: it binned along the mirrored axis, -60). The residual
    is the bins straddling the strips' edges (1000 bins of 0.55 m, 10 edges), hence the factor
    8 asserted, not more. 240 = 60 + 180 is the same axis reversed: the same correction."""
    ref, raster = lidar
    xx = _upstream_along(raster, 60.0)
    bias = np.zeros(xx.shape)
    for lo, hi, value in STRIPS:
        bias[(xx > lo) & (xx < hi)] = value
    tba = ref + bias
    before = _rms(bias)
    out = {}
    for angle in (60.0, 240.0, -60.0):
        db = DirectionalBias(angle=angle, fit_or_bin="bin", bin_sizes=1000)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EmptyBinWarning)  # the corner bins hold few pixels
            db.fit(ref, tba)
        out[angle] = (db.apply(tba) - ref).values
        if angle == 60.0:  # the variable binned is upstream's, value for value
            x, y = np.meshgrid(ref["x"].values, ref["y"].values)
            np.testing.assert_allclose(along_track(x, y, origin=db.origin_, angle=60.0), xx, rtol=0, atol=1e-6)
            assert db.angle_clockwise_ is True
    assert before == pytest.approx(5.121, abs=1e-3)
    assert _rms(out[60.0]) < before / 8  # 0.448 m
    np.testing.assert_allclose(out[240.0], out[60.0], rtol=0, atol=1e-9)
    assert _rms(out[-60.0]) > 0.99 * before  # the mirrored axis (the old meaning of 60) removes nothing


def test_directional_bias_recovers_upstreams_sinusoid_at_60_degrees(lidar):
    """A sinusoid of upstream's along-track coordinate (amplitude 0.5 m, wavelength 70 m): the
    default fit recovers it to 0.5 % and leaves under 2 cm RMS (about 0.35 m before)."""
    ref, raster = lidar
    wave = 0.5 * np.sin(2 * np.pi * _upstream_along(raster, 60.0) / 70.0 + 1.0)
    tba = ref + wave
    db = DirectionalBias(angle=60.0, subsample=40_000, random_state=0).fit(ref, tba)
    assert db.wavelengths_[0] == pytest.approx(70.0, rel=0.005)
    assert db.amplitudes_[0] == pytest.approx(0.5, rel=0.005)
    assert _rms((db.apply(tba) - ref).values) < 0.02 < 0.3 < _rms(wave)


def test_directional_bias_json_of_the_old_convention_loads_as_the_same_correction(lidar):
    """A JSON saved when ``angle`` was counter-clockwise (no ``angle_clockwise_``) loads with its
    angle negated and a warning: the same along-track coordinate, so the same correction."""
    ref, raster = lidar
    tba = ref + 0.5 * np.sin(2 * np.pi * _upstream_along(raster, -30.0) / 70.0)
    db = DirectionalBias(angle=-30.0, subsample=20_000, random_state=0).fit(ref, tba)
    doc = db.to_dict()
    assert doc["learned"]["angle_clockwise_"] is True
    old = json.loads(json.dumps(doc))
    old["params"]["angle"] = 30.0  # the old convention's name of the same axis
    del old["learned"]["angle_clockwise_"]
    with pytest.warns(UserWarning, match="angle=30 is read as angle=-30"):
        loaded = xdem.coreg.Coreg.from_dict(old)
    assert loaded.angle == -30.0
    np.testing.assert_allclose(loaded.apply(tba).values, db.apply(tba).values, rtol=0, atol=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        xdem.coreg.Coreg.from_dict(db.to_dict())  # this version's document: no warning


# --- median and NMAD honour numpy masked arrays -----------------------------------------------
def test_nmad_and_median_ignore_the_masked_values():
    """The masked values (10 %) are 1e6 outliers: ignoring the mask (as before) gave NMAD 1.164
    and median 0.108 here instead of 1.007 and -0.061; honouring it gives exactly the statistics
    of the unmasked values, and upstream's (geoutils) NMAD of the masked array to 1e-12."""
    rng = np.random.default_rng(0)
    values = rng.normal(size=(60, 50))
    mask = rng.random(values.shape) < 0.1
    values[mask] = 1e6
    masked = np.ma.masked_array(values, mask=mask)
    kept = values[~mask]
    assert nmad(masked) == nmad(kept) and median(masked) == median(kept)
    assert nmad(masked) == pytest.approx(float(gu.stats.nmad(masked)), abs=1e-12)
    assert median(masked) == pytest.approx(float(np.ma.median(masked)), abs=1e-12)
    assert nmad(values) > 1.1 * nmad(masked)  # the outliers count when the mask is dropped
    lazy = da.ma.masked_array(da.from_array(values, chunks=(16, 20)), mask=da.from_array(mask, chunks=(16, 20)))
    assert nmad(lazy) == nmad(kept) and median(lazy) == median(kept)  # masked dask chunks too
    summary = robust_summary(masked)
    assert summary["count"] == kept.size and summary["max"] == kept.max()
    ints = np.ma.masked_array(np.array([1, 2, 3, 30000], dtype=np.int16), mask=[0, 0, 0, 1])
    assert median(ints) == 2.0


# --- rigid matrices about a centre ------------------------------------------------------------
CENTRE = (500_000.0, 8_700_000.0, 150.0)  # UTM northing of 8.7e6 m


@pytest.mark.parametrize("cls", [ICP, LZD, DhMinimize, RigidTransform])
def test_to_matrix_about_the_centre_is_the_same_transform(cls):
    """1e-6 rad rotations about a centre at northing 8.7e6 m: the origin matrix's translation
    column is 8.7 m away from the centre's motion; the centred matrix (upstream's frame) carries
    that motion itself, and both move points identically (1e-6 m: float64 at 8.7e6 m is 2e-9 m)."""
    t = cls.from_rotations(rx=2e-6, ry=-1e-6, rz=1e-6, degrees=False, translation=(0.3, -0.2, 0.1), centroid=CENTRE)
    m, mc = t.to_matrix(), t.to_matrix(centre="centroid")
    c = np.asarray(CENTRE)
    np.testing.assert_allclose(mc[:3, 3], (0.3, -0.2, 0.1), rtol=0, atol=1e-9)
    assert np.abs(m[:3, 3] - mc[:3, 3]).max() > 8.0  # the origin frame: metres at these northings
    rng = np.random.default_rng(1)
    p = c + rng.uniform(-500, 500, size=(200, 3))
    about_origin = p @ m[:3, :3].T + m[:3, 3]
    about_centre = (p - c) @ mc[:3, :3].T + mc[:3, 3] + c  # upstream's apply_matrix(..., centroid=c)
    np.testing.assert_allclose(about_centre, about_origin, rtol=0, atol=1e-6)
    np.testing.assert_allclose(t.to_matrix(centre=CENTRE), mc, rtol=0, atol=0)
    back = cls.from_matrix(mc, centre=CENTRE)  # upstream's (to_matrix(), centroid()) -> ours
    np.testing.assert_allclose(back.to_matrix(), m, rtol=0, atol=1e-8)
    assert back.centroid_ == list(CENTRE) and type(back) is cls
    np.testing.assert_allclose(back.to_translations(), (0.3, -0.2, 0.1), rtol=0, atol=1e-8)
    other = (4.0e5, 8.6e6, 0.0)
    np.testing.assert_allclose(cls.from_matrix(t.to_matrix(centre=other), centre=other).to_matrix(), m, atol=1e-8)


def test_to_matrix_centre_of_translations_pipelines_and_bad_centres():
    shift = RigidTransform.from_translations(1.0, 2.0, 3.0)
    np.testing.assert_array_equal(shift.to_matrix(centre=CENTRE), shift.to_matrix())  # a translation: any centre
    nk = NuthKaab()
    nk.shift_x_, nk.shift_y_, nk.shift_z_ = 1.0, -1.0, 0.5
    np.testing.assert_array_equal(nk.to_matrix(centre=CENTRE), nk.to_matrix())
    rot = RigidTransform.from_rotations(rz=1e-6, degrees=False, centroid=CENTRE)
    pipe = CoregPipeline([shift, rot])
    m = pipe.to_matrix()
    mc = pipe.to_matrix(centre="centroid")
    np.testing.assert_allclose(mc[:3, 3], pipe.to_translations(), rtol=0, atol=1e-8)
    np.testing.assert_allclose(RigidTransform.from_matrix(mc, centre=pipe.centroid()).to_matrix(), m, atol=1e-8)
    for bad in ((1.0, 2.0), "middle", (np.nan, 0.0, 0.0)):
        with pytest.raises(InputError, match="3"):
            rot.to_matrix(centre=bad)
    with pytest.raises(InputError, match="from_matrix's centre"):
        RigidTransform.from_matrix(np.eye(4), centre=(1.0,))


# --- per_bin: NaN outside the outer bins --------------------------------------------------------
def test_per_bin_gives_nan_outside_the_outer_bins(lidar):
    """dh = 0.1 (z - 395) binned by elevation in 2 m bins from 385 to 405 m (the DEM spans 380 to
    411 m): with "per_bin" the pixels below 385 m or above 405 m get NaN (upstream's
    get_perbin_nd_binning), inside the error is at most the range of dh in a bin, 0.2 m;
    "per_bin_clamp" gives them the outer bins' values (the behaviour before); "linear" the outer
    centres' values (upstream's too)."""
    ref, _ = lidar
    tba = ref + 0.1 * (ref - 395.0)
    z = ref.values
    outside = (z < 385.0) | (z > 405.0)
    assert 0.01 < outside.mean() < 0.5
    results = {}
    for method in ("per_bin", "per_bin_clamp", "linear"):
        bc = BiasCorr(fit_or_bin="bin", bin_sizes=np.arange(385.0, 406.0, 2.0), bin_apply_method=method,
                      subsample=1.0)
        bc.fit(ref, tba, bias_vars={"elevation": ref})
        results[method] = bc.apply(tba, bias_vars={"elevation": ref}).values
    per_bin = results["per_bin"]
    assert np.isnan(per_bin[outside]).all() and np.isfinite(per_bin[~outside]).all()
    assert np.nanmax(np.abs(per_bin - z)) <= 0.2 + 1e-4  # the range of dh in a 2 m bin (float32 rounding)
    np.testing.assert_array_equal(results["per_bin_clamp"][~outside], per_bin[~outside])
    assert np.isfinite(results["per_bin_clamp"]).all() and np.isfinite(results["linear"]).all()
    # default bins (n equal bins): with per_bin they span every sampled value, so nothing of the
    # fitted grid is NaN when every pixel is sampled (upstream's range = the data's min and max)
    bc = BiasCorr(fit_or_bin="bin", bin_sizes=10, bin_apply_method="per_bin", subsample=1.0)
    bc.fit(ref, tba, bias_vars={"elevation": ref})
    assert np.isfinite(bc.apply(tba, bias_vars={"elevation": ref}).values).all()
    assert bc.bin_edges_[0][0] == float(z.min()) and bc.bin_edges_[0][-1] == float(z.max())


# --- the points run's document has the rigid keys of a DEM pair's -----------------------------
RIGID_KEYS = {"matrix", "matrix_about", "matrix_about_centre", "matrix_is_complete", "rotations_deg",
              "rotation_centre", "translation", "translation_px"}


def _rigid_part(doc: dict) -> set:
    return {k for k in doc if k.startswith(("matrix", "rotation", "translation"))}


def test_points_run_document_has_the_rigid_keys_of_a_dem_run(tmp_path):
    pair = write_example_pair(tmp_path / "pair")
    ref = xdem.open_dem(pair["ref"])
    rows, cols = np.meshgrid(np.arange(5, 400, 9), np.arange(5, 400, 9), indexing="ij")
    z = ref.values[rows, cols]
    t = ref.rio.transform()
    x, y = t * (cols.ravel() + 0.5, rows.ravel() + 0.5)
    import geopandas as gpd

    pts = tmp_path / "ref.gpkg"
    gpd.GeoDataFrame({"h": z.ravel()}, geometry=gpd.points_from_xy(x, y), crs=ref.rio.crs).to_file(pts)
    runner = CliRunner()
    docs = {}
    for name, first in (("dem", pair["ref"]), ("points", pts)):
        args = ["coreg", str(first), str(pair["tba"]), "-o", str(tmp_path / f"{name}.tif"), "--json", "-q",
                "--no-stats", "--method", "nuthkaab"]
        res = runner.invoke(main, args + (["--z-column", "h"] if name == "points" else []))
        assert res.exit_code == 0, res.output
        docs[name] = json.loads(res.stdout)
    assert _rigid_part(docs["points"]) == _rigid_part(docs["dem"]) == RIGID_KEYS
    for doc in docs.values():
        step = doc["steps"][0]
        assert doc["matrix_about"] == "origin"
        np.testing.assert_allclose(doc["translation"], [step["shift_x"], step["shift_y"], step["shift_z"]], atol=1e-12)
        np.testing.assert_allclose(np.asarray(doc["matrix"])[:3, 3], doc["translation"], atol=1e-12)
        np.testing.assert_allclose(doc["translation_px"], doc["translation"][:2], atol=1e-12)  # 1 m pixels
        assert abs(step["shift_x"] - pair["truth"]["shift_x"]) < 0.05
