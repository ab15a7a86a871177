"""Terrain attributes: analytic surfaces, chunk independence, laziness, NaN handling, bad input."""

from __future__ import annotations

from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from affine import Affine
from helpers import count_computes
from reference import check_chunk_independence

import xdem
from xdem.errors import CRSError, InputError
from xdem.terrain import kernels as K

LIDAR = str(Path(__file__).resolve().parents[2] / "xdem" / "examples" / "data" / "lidar_dem.tif")


def make_dem(values: np.ndarray, *, res_x: float = 1.0, res_y: float = 1.0, crs: str = "EPSG:32633", chunks=None):
    """Georeferenced (north-up) DataArray around ``values``, numpy-backed or dask-backed."""
    ny, nx = values.shape
    transform = Affine(res_x, 0.0, 500000.0, 0.0, -res_y, 5000000.0)
    x = 500000.0 + (np.arange(nx) + 0.5) * res_x
    y = 5000000.0 - (np.arange(ny) + 0.5) * res_y
    data = values if chunks is None else da.from_array(values, chunks=chunks)
    dem = xr.DataArray(data, dims=("y", "x"), coords={"y": y, "x": x})
    return dem.rio.write_crs(crs).rio.write_transform(transform)


def plane(ny: int, nx: int, *, gx: float, gy: float, res_x: float, res_y: float, dtype=np.float64) -> np.ndarray:
    """z = gx * easting + gy * northing on a north-up grid (row 0 is the northernmost)."""
    east = np.arange(nx) * res_x
    north = -np.arange(ny) * res_y
    return (gx * east[None, :] + gy * north[:, None] + 100.0).astype(dtype)


# ---------------------------------------------------------------- analytic: planes


@pytest.mark.parametrize("method", ["horn", "zevenbergthorne"])
@pytest.mark.parametrize(
    "gx, gy, res_x, res_y",
    [
        (1.0, 0.0, 1.0, 1.0),  # rises to the east: faces west (270)
        (0.0, 1.0, 2.0, 2.0),  # rises to the north: faces south (180)
        (0.0, -0.5, 1.0, 3.0),  # rises to the south: faces north (0)
        (-0.3, 0.0, 5.0, 2.0),  # rises to the west: faces east (90)
        (0.2, 0.4, 2.0, 0.5),  # x and y resolutions differ
        (-0.7, 0.25, 0.5, 4.0),
    ],
)
def test_plane_gives_exact_slope_and_aspect(method, gx, gy, res_x, res_y):
    z = plane(12, 15, gx=gx, gy=gy, res_x=res_x, res_y=res_y)
    dem = make_dem(z, res_x=res_x, res_y=res_y)
    s = xdem.terrain.slope(dem, method=method).values
    a = xdem.terrain.aspect(dem, method=method).values
    want_slope = np.degrees(np.arctan(np.hypot(gx, gy)))
    want_aspect = np.degrees(np.arctan2(-gx, -gy)) % 360.0
    inner = (slice(1, -1), slice(1, -1))
    np.testing.assert_allclose(s[inner], want_slope, atol=1e-9)
    diff = (a[inner] - want_aspect + 180.0) % 360.0 - 180.0
    np.testing.assert_allclose(diff, 0.0, atol=1e-9)
    # edges are NaN (no wrapping, no reflection)
    for edge in (s[0], s[-1], s[:, 0], s[:, -1], a[0], a[:, -1]):
        assert np.isnan(edge).all()
    # percent and radians
    p = xdem.terrain.slope(dem, method=method, units="percent").values
    np.testing.assert_allclose(p[inner], 100.0 * np.hypot(gx, gy), rtol=1e-9)
    r = xdem.terrain.slope(dem, method=method, units="radians").values
    np.testing.assert_allclose(r[inner], np.arctan(np.hypot(gx, gy)), rtol=1e-9)


def test_kernel_api_shapes_and_values():
    z = plane(6, 7, gx=0.5, gy=-0.5, res_x=2.0, res_y=2.0)
    s, a = K.slope_aspect_kernel(z, res_x=2.0, res_y=2.0)
    assert s.shape == a.shape == (4, 5)  # interior shape of a block padded by 1
    np.testing.assert_allclose(s, np.arctan(np.hypot(0.5, 0.5)))
    np.testing.assert_allclose(a, np.radians(315.0))  # rises to the SE: faces NW
    s2, a2 = K.slope_aspect_kernel(K.pad_nan(z), res_x=2.0, res_y=2.0, method="zevenbergen_thorne")
    assert s2.shape == z.shape and np.isnan(s2[0]).all() and np.isnan(a2[:, -1]).all()
    np.testing.assert_allclose(s2[1:-1, 1:-1], s)


def test_flat_aspect_is_nan_and_slope_zero():
    dem = make_dem(np.full((6, 6), 321.5, dtype=np.float32))
    s = xdem.terrain.slope(dem).values
    a = xdem.terrain.aspect(dem).values
    assert (s[1:-1, 1:-1] == 0).all()
    assert np.isnan(a).all()


# ---------------------------------------------------------------- chunk independence, dtype


def holed_lidar_dem(chunks: int = 100):
    real = xdem.open_dem(LIDAR).values.copy()
    real[50:53, 70:72] = np.nan  # a NaN hole crossing no particular chunk border
    real[99:102, 199:201] = np.nan  # a hole across the 100-pixel chunk borders
    return make_dem(real, res_x=1.0, res_y=1.5, chunks=chunks)


@pytest.mark.parametrize("method", ["horn", "zevenbergthorne"])
def test_numpy_equals_dask_for_several_chunkings_all_attributes(method):
    names = list(xdem.terrain.ATTRIBUTES)

    def func(d):
        outs = xdem.terrain.get_terrain_attribute(d, names, method=method)  # the stacked one-pass path
        assert all(o.dtype == np.float32 for o in outs)
        return list(dask.compute(*outs))  # together: one pass, not one per attribute

    if method == "horn":
        ref = check_chunk_independence(func, holed_lidar_dem(), chunkings=(64, 100, 1000), atol=1e-6)
    else:
        ref = check_chunk_independence(func, holed_lidar_dem(), chunkings=(64, 1000), schedulers=("threads",), atol=1e-6)
    n_nan_per_attribute = np.isnan(ref).sum() / len(names)
    assert 4 * 399 + 12 <= n_nan_per_attribute < 4 * 399 + 100  # edges and the holes' neighbourhoods


@pytest.mark.parametrize("attribute", ["slope", "aspect", "topographic_position_index"])
def test_numpy_equals_dask_single_attribute(attribute):
    check_chunk_independence(
        lambda d: xdem.terrain.get_terrain_attribute(d, attribute), holed_lidar_dem(),
        chunkings=(64, 100, 1000), schedulers=("threads",), atol=1e-6,
    )


def test_float64_stays_float64_and_integer_dem_gives_float32():
    z = plane(10, 10, gx=0.3, gy=0.1, res_x=1.0, res_y=1.0)
    assert xdem.terrain.slope(make_dem(z)).dtype == np.float64
    zi = np.round(z * 10).astype(np.int16)
    s_int = xdem.terrain.slope(make_dem(zi, chunks=4))
    assert s_int.dtype == np.float32
    s_float = xdem.terrain.slope(make_dem(zi.astype(np.float32), chunks=4))
    np.testing.assert_array_equal(s_int.values, s_float.values)
    assert np.isfinite(s_int.values[1:-1, 1:-1]).all()


def test_output_keeps_grid_and_crs():
    dem = xdem.open_dem(LIDAR, chunks=128)
    for out in xdem.terrain.get_terrain_attribute(dem, ["slope", "aspect", "roughness"]):
        assert out.shape == dem.shape and out.dims == ("y", "x")
        assert out.rio.crs == dem.rio.crs
        assert out.rio.transform() == dem.rio.transform()
        np.testing.assert_array_equal(out["x"].values, dem["x"].values)
        np.testing.assert_array_equal(out["y"].values, dem["y"].values)
        assert out.data.chunks == dem.data.chunks


# ---------------------------------------------------------------- analytic: quadratic surfaces, curvature


def quadratic(ny, nx, *, a, b, c, g, h, res_x, res_y):
    """z = a x^2 + b y^2 + c x y + g x + h y (x east, y north, metres from the grid centre)."""
    x = (np.arange(nx) - nx // 2) * res_x
    y = -(np.arange(ny) - ny // 2) * res_y
    X, Y = np.meshgrid(x, y)
    return a * X**2 + b * Y**2 + c * X * Y + g * X + h * Y + 50.0, X, Y


def test_dome_curvature_matches_radius():
    R = 250.0  # z = -(x^2 + y^2) / (2R): both principal curvatures 1/R, convex
    z, _, _ = quadratic(21, 21, a=-1 / (2 * R), b=-1 / (2 * R), c=0.0, g=0.0, h=0.0, res_x=1.0, res_y=1.0)
    dem = make_dem(z)
    inner = (slice(1, -1), slice(1, -1))
    curv, prof, plan, mx = (
        x.values for x in xdem.terrain.get_terrain_attribute(dem, ["curvature", "profile", "planform", "maximum"])
    )
    np.testing.assert_allclose(curv[inner], 200.0 / R, rtol=1e-9)  # 1/100 m^-1: 100 * (1/R + 1/R)
    off_centre = np.ones((19, 19), dtype=bool)
    off_centre[9, 9] = False  # the summit: zero gradient, profile and planform set to 0
    np.testing.assert_allclose(prof[inner][off_centre], 100.0 / R, rtol=1e-9)
    np.testing.assert_allclose(plan[inner][off_centre], 100.0 / R, rtol=1e-9)
    assert prof[10, 10] == 0.0 and plan[10, 10] == 0.0
    np.testing.assert_allclose(mx[inner][off_centre], 100.0 / R, rtol=1e-9)


@pytest.mark.parametrize("res_x, res_y", [(1.0, 1.0), (2.0, 0.5), (3.0, 5.0)])
def test_general_quadratic_curvatures(res_x, res_y):
    a, b, c, g, h = 0.01, -0.004, 0.003, 0.2, -0.1
    z, X, Y = quadratic(15, 17, a=a, b=b, c=c, g=g, h=h, res_x=res_x, res_y=res_y)
    dem = make_dem(z, res_x=res_x, res_y=res_y)
    names = ["curvature", "profile_curvature", "planform_curvature", "maximum_curvature", "slope", "aspect"]
    curv, prof, plan, mx, s, asp = (o.values[1:-1, 1:-1] for o in xdem.terrain.get_terrain_attribute(
        dem, names, method="zevenbergthorne"))
    X, Y = X[1:-1, 1:-1], Y[1:-1, 1:-1]
    G, H = 2 * a * X + c * Y + g, 2 * b * Y + c * X + h  # exact gradient (central differences are exact)
    np.testing.assert_allclose(curv, -200.0 * (a + b), rtol=1e-7)
    want_prof = -200.0 * (a * G**2 + b * H**2 + c * G * H) / (G**2 + H**2)
    want_plan = -200.0 * (a * H**2 + b * G**2 - c * G * H) / (G**2 + H**2)
    np.testing.assert_allclose(prof, want_prof, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(plan, want_plan, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(prof + plan, curv, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(mx, np.where(np.abs(want_plan) > np.abs(want_prof), want_plan, want_prof), rtol=1e-6)
    np.testing.assert_allclose(s, np.degrees(np.arctan(np.hypot(G, H))), rtol=1e-9)
    np.testing.assert_allclose(np.radians(asp), np.arctan2(-G, -H) % (2 * np.pi), atol=1e-9)


def test_valley_is_concave():
    z, _, _ = quadratic(9, 9, a=0.05, b=0.0, c=0.0, g=0.0, h=0.02, res_x=1.0, res_y=1.0)  # N-S valley, rising north
    plan = xdem.terrain.planform_curvature(make_dem(z)).values[1:-1, 1:-1]
    prof = xdem.terrain.profile_curvature(make_dem(z)).values[1:-1, 1:-1]
    assert (plan[:, 3] < 0).all()  # concave across the slope on the valley axis
    np.testing.assert_allclose(prof[:, 3], 0.0, atol=1e-9)  # straight along the slope


def test_tpi_roughness_windows():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(12, 13))
    tpi5 = xdem.terrain.topographic_position_index(make_dem(z), window_size=5).values
    r5 = xdem.terrain.roughness(make_dem(z), window_size=5).values
    i, j = 6, 7
    win = z[i - 2 : i + 3, j - 2 : j + 3]
    assert tpi5[i, j] == pytest.approx(z[i, j] - (win.sum() - z[i, j]) / 24)
    assert r5[i, j] == pytest.approx(win.max() - win.min())
    assert np.isnan(tpi5[:2]).all() and np.isnan(r5[:, -2:]).all() and not np.isnan(r5[2:-2, 2:-2]).any()
    check_chunk_independence(
        lambda d: xdem.terrain.topographic_position_index(d, window_size=5), make_dem(z.astype(np.float32), chunks=6),
        chunkings=(1, 3, 5), atol=1e-6,
    )
    with pytest.raises(InputError, match="odd"):
        xdem.terrain.roughness(make_dem(z), window_size=4)


# ---------------------------------------------------------------- laziness and one pass


def test_building_attributes_computes_nothing():
    dem = xdem.open_dem(LIDAR, chunks=100)
    with count_computes() as counter:
        outs = xdem.terrain.get_terrain_attribute(LIDAR, list(xdem.terrain.ATTRIBUTES))
        outs.append(xdem.terrain.slope(dem, units="percent"))
        outs.append(xdem.terrain.hillshade(dem, azimuth=10))
        outs.append(xdem.terrain.aspect(make_dem(np.ones((5, 5)), chunks=2)))
        outs.append(xdem.terrain.roughness(dem, window_size=7))
    assert counter.count == 0
    with count_computes() as counter:
        _ = outs[0].values
    assert counter.count == 1  # the counter does count computations


def test_several_attributes_read_the_dem_once():
    values = xdem.open_dem(LIDAR).values
    reads = []

    def counting_read(block):
        reads.append(block.shape)
        return block

    base = make_dem(values, chunks=100)
    dem = base.copy(data=base.data.map_blocks(counting_read, dtype=base.dtype, meta=np.empty((0, 0), base.dtype)))
    outs = xdem.terrain.get_terrain_attribute(dem, ["slope", "aspect", "hillshade", "tri", "curvature"])
    computed = dask.compute(*outs, scheduler="synchronous")
    assert len(reads) == 16  # one read per chunk, for five attributes
    single = xdem.terrain.hillshade(make_dem(values, chunks=100)).values
    np.testing.assert_array_equal(computed[2].values, single)


# ---------------------------------------------------------------- NaN handling and bad input


@pytest.mark.parametrize("attribute, depth", [
    ("slope", 1), ("aspect", 1), ("hillshade", 1), ("curvature", 1), ("profile_curvature", 1),
    ("maximum_curvature", 1), ("tri", 1), ("tpi", 1), ("roughness", 1),
])
@pytest.mark.parametrize("method", ["horn", "zevenbergthorne"])
def test_nan_holes_affect_exactly_their_window(attribute, depth, method):
    z = xdem.open_dem(LIDAR).values[:120, :130].copy()
    holes = np.zeros(z.shape, dtype=bool)
    holes[40, 50] = True
    holes[70:73, 20:26] = True
    holes[99:101, 100] = True  # across a chunk border
    z_holes = np.where(holes, np.nan, z)
    clean = xdem.terrain.get_terrain_attribute(make_dem(z, chunks=50), attribute, method=method).values
    holed = xdem.terrain.get_terrain_attribute(make_dem(z_holes, chunks=50), attribute, method=method).values
    window = np.zeros_like(holes)
    for i, j in np.argwhere(holes):
        window[max(i - depth, 0) : i + depth + 1, max(j - depth, 0) : j + depth + 1] = True
    clean_valid = ~np.isnan(clean)
    assert np.isnan(holed[window]).all()
    np.testing.assert_array_equal(holed[~window & clean_valid], clean[~window & clean_valid])
    assert (np.isnan(holed) == (window | ~clean_valid)).all()


def test_one_pixel_wide_dem_is_a_clear_error():
    with pytest.raises(InputError, match="at least 3 rows and columns"):
        xdem.terrain.slope(make_dem(np.arange(10.0)[None, :]))
    with pytest.raises(InputError, match="at least 5"):
        xdem.terrain.roughness(make_dem(np.ones((4, 40))), window_size=5)
    s = xdem.terrain.slope(make_dem(np.ones((3, 40)))).values  # smallest valid DEM: one interior row
    assert np.isnan(s[0]).all() and (s[1, 1:-1] == 0).all()


def test_geographic_crs_is_refused():
    dem = make_dem(np.ones((5, 5)), res_x=0.001, res_y=0.001, crs="EPSG:4326")
    with pytest.raises(CRSError, match="projected"):
        xdem.terrain.slope(dem)


def test_bad_names_and_options():
    dem = make_dem(np.ones((5, 5)))
    with pytest.raises(InputError, match="unknown terrain attribute"):
        xdem.terrain.get_terrain_attribute(dem, "slopes")
    with pytest.raises(InputError, match="unknown terrain method"):
        xdem.terrain.slope(dem, method="sobel")
    with pytest.raises(InputError, match="slope units"):
        xdem.terrain.slope(dem, units="gradians")
    with pytest.raises(InputError, match="TRI algorithm"):
        xdem.terrain.terrain_ruggedness_index(dem, algorithm="x")
    with pytest.raises(InputError, match="DEM"):
        xdem.terrain.slope(np.ones((5, 5)))


def test_input_is_not_modified():
    z = plane(8, 8, gx=1.0, gy=0.0, res_x=1.0, res_y=1.0)
    z[3, 3] = np.nan
    before = z.copy()
    block = K.pad_nan(z)
    block_before = block.copy()
    K.slope_aspect_kernel(block, res_x=1.0, res_y=1.0)
    K.curvature_kernel(block, res_x=1.0, res_y=1.0, kind="maximum")
    _ = xdem.terrain.get_terrain_attribute(make_dem(z), list(xdem.terrain.ATTRIBUTES))[0].values
    np.testing.assert_array_equal(z, before)
    np.testing.assert_array_equal(block, block_before)


def test_south_up_grid_gives_the_same_aspect():
    """A grid whose rows go north (positive transform.e) holds the same terrain, flipped."""
    z = plane(10, 12, gx=0.4, gy=0.7, res_x=2.0, res_y=2.0)
    north_up = make_dem(z, res_x=2.0, res_y=2.0)
    flipped = z[::-1]
    t = Affine(2.0, 0.0, 500000.0, 0.0, 2.0, 5000000.0 - 20.0)
    y = 5000000.0 - 20.0 + (np.arange(10) + 0.5) * 2.0
    south_up = xr.DataArray(flipped, dims=("y", "x"), coords={"y": y, "x": north_up["x"].values})
    south_up = south_up.rio.write_crs("EPSG:32633").rio.write_transform(t)
    a1 = xdem.terrain.aspect(north_up).values
    a2 = xdem.terrain.aspect(south_up).values[::-1]
    np.testing.assert_allclose(a1, a2, atol=1e-9)


def test_terrain_options_checked_once_and_immutable():
    import dataclasses

    from xdem.errors import InputError
    from xdem.terrain import TerrainOptions

    opts = TerrainOptions(method="zevenbergen_thorne", tri_algorithm="WILSON", azimuth=10)
    assert (opts.method, opts.tri_algorithm, opts.azimuth) == ("zevenbergthorne", "wilson", 10.0)
    assert TerrainOptions(**opts.kwargs()) == opts
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.method = "horn"  # type: ignore[misc]
    for bad in ({"slope_units": "grad"}, {"aspect_units": "percent"}, {"tri_algorithm": "x"}, {"method": "x"}):
        with pytest.raises(InputError):
            TerrainOptions(**bad)
    assert TerrainOptions(window_size=4).window_depth("slope") == 1  # only checked where used
    with pytest.raises(InputError):
        TerrainOptions(window_size=4).window_depth("roughness")
