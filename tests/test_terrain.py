"""Terrain attributes: analytic surfaces, chunk independence, laziness, NaN handling, bad input."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from affine import Affine
from dask.callbacks import Callback

import xdem
from xdem.errors import CRSError, InputError
from xdem.terrain import kernels as K

LIDAR = "xdem/examples/data/lidar_dem.tif"


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


class ComputeCounter(Callback):
    """Counts dask computations (one ``_start`` per compute call)."""

    def __init__(self):
        super().__init__()
        self.starts = 0

    def _start(self, dsk):
        self.starts += 1


def assert_dask_equals_numpy(func, values: np.ndarray, chunkings, *, atol: float, **dem_kw):
    """``func`` on a numpy-backed DEM equals ``func`` on dask-backed DEMs of several chunkings."""
    ref = np.asarray(func(make_dem(values, **dem_kw)).values)
    for ck in chunkings:
        got = np.asarray(func(make_dem(values, chunks=ck, **dem_kw)).values)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref), err_msg=f"NaN pattern differs for chunks={ck}")
        np.testing.assert_allclose(got, ref, atol=atol, rtol=0, equal_nan=True, err_msg=f"chunks={ck}")
    return ref


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


@pytest.mark.parametrize("attribute", list(xdem.terrain.ATTRIBUTES))
def test_numpy_equals_dask_for_several_chunkings(attribute):
    real = xdem.open_dem(LIDAR).values
    real = real.copy()
    real[50:53, 70:72] = np.nan  # a NaN hole crossing no particular chunk border
    real[99:102, 199:201] = np.nan  # a hole across the 100-pixel chunk borders

    def func(dem):
        return xdem.terrain.get_terrain_attribute(dem, attribute)

    ref = assert_dask_equals_numpy(func, real, [64, 100, 1000, (37, 151)], atol=1e-6)
    assert ref.dtype == np.float32
