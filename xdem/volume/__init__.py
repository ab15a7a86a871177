"""Volume and mass change of glaciers (upstream xdem's ``xdem.volume``), out of core.

:func:`volume_change`: per polygon, area, coverage, mean elevation change, volume and mass
change with their uncertainties (:mod:`xdem.volume._change`).
"""

from __future__ import annotations

from xdem.volume._change import (DENSITY, DENSITY_ERROR, ErrorModel, disk_mean_correlation, polygon_sums,
                                 stable_error_model, volume_change)

__all__ = ["DENSITY", "DENSITY_ERROR", "ErrorModel", "disk_mean_correlation", "polygon_sums", "stable_error_model", "volume_change"]
