"""Plot a DEM with matplotlib, decimated so that only a bounded number of pixels is read."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from xdem.errors import InputError
from xdem.io.grid import get_transform, grid_shape

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["plot_dem", "MAX_PLOT_PIXELS"]

#: Longest side, in pixels, of what a plot reads (every n-th pixel of a larger DEM).
MAX_PLOT_PIXELS = 2000


def plot_dem(arr: xr.DataArray, *, cmap: str = "viridis", vmin: float | None = None, vmax: float | None = None,
             cbar_title: str | None = None, add_cbar: bool = True, ax: Axes | str | None = None,
             title: str | None = None) -> Axes:
    """Show ``arr`` in its map coordinates, with an optional colour bar; returns the axes.

    ``ax`` is a matplotlib axes, or ``None`` or ``"new"`` (upstream's word) for a new figure.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import xdem
    >>> ax = plot_dem(xdem.open_dem(xdem.examples.get_path("lidar")), cbar_title="Elevation (m)")
    >>> ax.figure.axes[1].get_ylabel()
    'Elevation (m)'
    """
    import matplotlib.pyplot as plt  # matplotlib only when a plot is asked (it is slow to import)

    step = max(1, int(np.ceil(max(grid_shape(arr)) / MAX_PLOT_PIXELS)))
    values = np.asarray(arr.isel(y=slice(None, None, step), x=slice(None, None, step)).values, dtype=float)
    t = get_transform(arr)
    rows, cols = grid_shape(arr)
    extent = (t.c, t.c + t.a * cols, t.f + t.e * rows, t.f)
    if ax is None or (isinstance(ax, str) and ax.lower() == "new"):
        _, ax = plt.subplots()
    elif isinstance(ax, str):
        raise InputError(f"ax must be a matplotlib axes, 'new' or None, got {ax!r}")
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=vmin, vmax=vmax, extent=extent,
                      interpolation="nearest")
    if add_cbar:
        cbar = ax.figure.colorbar(image, ax=ax)
        if cbar_title:
            cbar.set_label(cbar_title)
    if title:
        ax.set_title(title)
    return ax
