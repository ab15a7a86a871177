"""Elevation and volume change of glaciers (upstream xdem 0.2.3's ``xdem.volume``), out of core.

Gap filling of elevation change (:doc:`/gapfill`): inverse-distance weighting
(:func:`idw_interpolation`), hypsometric (:func:`hypsometric_interpolation`,
:func:`local_hypsometric_interpolation`) and normalised regional hypsometric
(:func:`norm_regional_hypsometric_interpolation`, its signal
:func:`get_regional_hypsometric_signal`), and the binning helpers. Each takes numpy arrays (and
gives numpy back, as upstream) or dask arrays, DataArrays and DEMs (and stays lazy); memory is
one chunk (plus a halo for IDW) and small per-glacier tables, whatever the DEM's size.

Volume and mass change per polygon with their uncertainties (:doc:`/volume`):
:func:`volume_change` (area, coverage, mean elevation change, volume and mass change, each
with its error), :func:`stable_error_model`, :func:`disk_mean_correlation`.

Examples
--------
>>> import xdem
>>> xdem.volume.idw_interpolation.__name__
'idw_interpolation'
"""

from __future__ import annotations

from xdem.volume._binning import (
    calculate_hypsometry_area,
    fit_hypsometric_bins_poly,
    hypsometric_binning,
    interpolate_hypsometric_bins,
)
from xdem.volume._change import (
    DENSITY,
    DENSITY_ERROR,
    ErrorModel,
    disk_mean_correlation,
    polygon_sums,
    stable_error_model,
    volume_change,
)
from xdem.volume._hypsometry import hypsometric_interpolation, local_hypsometric_interpolation
from xdem.volume._idw import idw_interpolation
from xdem.volume._regional import get_regional_hypsometric_signal, norm_regional_hypsometric_interpolation

__all__ = [
    "hypsometric_binning", "interpolate_hypsometric_bins", "fit_hypsometric_bins_poly", "calculate_hypsometry_area",
    "idw_interpolation", "hypsometric_interpolation", "local_hypsometric_interpolation",
    "get_regional_hypsometric_signal", "norm_regional_hypsometric_interpolation",
]
__all__ += ["DENSITY", "DENSITY_ERROR", "ErrorModel", "disk_mean_correlation", "polygon_sums", "stable_error_model",
            "volume_change"]
