"""Upstream xdem 0.2.3's names in xdem.volume and dDEM.interpolate, with upstream's argument order."""

from __future__ import annotations

import inspect

import pytest

import xdem

#: Upstream 0.2.3's signatures (xdem/volume.py, xdem/ddem.py at tag v0.2.3): parameter names in order.
UPSTREAM = {
    "hypsometric_binning": ["ddem", "ref_dem", "bins", "kind", "aggregation_function"],
    "interpolate_hypsometric_bins": ["hypsometric_bins", "value_column", "method", "order", "count_threshold"],
    "fit_hypsometric_bins_poly": ["hypsometric_bins", "value_column", "degree", "iterations", "count_threshold"],
    "calculate_hypsometry_area": ["ddem_bins", "ref_dem", "pixel_size", "timeframe"],
    "idw_interpolation": ["array", "max_search_distance", "extrapolate", "force_fill"],
    "hypsometric_interpolation": ["voided_ddem", "ref_dem", "mask"],
    "local_hypsometric_interpolation": ["voided_ddem", "ref_dem", "mask", "min_coverage", "count_threshold", "nodata",
                                        "plot"],
    "get_regional_hypsometric_signal": ["ddem", "ref_dem", "glacier_index_map", "n_bins", "min_coverage"],
    "norm_regional_hypsometric_interpolation": ["voided_ddem", "ref_dem", "glacier_index_map", "min_coverage",
                                                "regional_signal", "min_elevation_range", "idealized_ddem"],
}


@pytest.mark.parametrize("name", sorted(UPSTREAM))
def test_volume_function_has_upstreams_parameters_in_order(name):
    params = list(inspect.signature(getattr(xdem.volume, name)).parameters)
    assert params == UPSTREAM[name]


def test_ddem_interpolate_has_upstreams_parameters_and_default():
    sig = inspect.signature(xdem.dDEM.interpolate)
    assert list(sig.parameters)[1:] == ["method", "reference_elevation", "mask"]
    assert sig.parameters["method"].default == "idw"
    # upstream's names, and ours of the volume change per polygon (xdem.volume._change)
    ours = {"DENSITY", "DENSITY_ERROR", "ErrorModel", "disk_mean_correlation", "polygon_sums", "stable_error_model",
            "volume_change"}
    assert sorted(xdem.volume.__all__) == sorted(set(UPSTREAM) | ours)
