"""Along-track (directional) bias: :class:`DirectionalBias`, ``dh`` as a function of the
distance along a direction, and that coordinate (:func:`along_track`, :func:`track_origin`).

``angle`` is in degrees clockwise from east, upstream xdem's convention
(``geoutils.raster.get_xy_rotated``): see :class:`DirectionalBias`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import dask.array as da
import numpy as np
import xarray as xr

from xdem.coreg._data import PointFitData
from xdem.coreg.base import FitData, register
from xdem.coreg.biascorr import BiasCorr
from xdem.coreg.deramp import pixel_xy
from xdem.errors import InputError
from xdem.io.grid import block_pixel_offsets, block_xy, dask_data, get_transform
from xdem.points.read import PointSet
from xdem.typing import BinSizes

__all__ = ["DirectionalBias", "along_track", "track_origin"]


def along_track(x: np.ndarray, y: np.ndarray, *, origin: Sequence[float] | np.ndarray, angle: float) -> np.ndarray:
    """Along-track coordinate ``(x - x_0) cos(angle) - (y - y_0) sin(angle)``, ``angle`` in degrees
    clockwise from east (upstream xdem's convention, ``geoutils.raster.get_xy_rotated``).

    Examples
    --------
    >>> [round(float(v), 6) for v in along_track(np.array([1.0, 0.0]), np.array([0.0, -1.0]), origin=(0.0, 0.0),
    ...                                          angle=90.0)]
    [0.0, 1.0]
    """
    a = np.radians(float(angle))
    along: np.ndarray = (
        (np.asarray(x, dtype=np.float64) - origin[0]) * np.cos(a) - (np.asarray(y, dtype=np.float64) - origin[1]) * np.sin(a)
    )
    return along


def track_origin(dem: xr.DataArray, angle: float) -> np.ndarray:
    """The pixel centre of ``dem``'s grid where the along-track coordinate is smallest (a corner):
    measured from it, :func:`along_track` is 0 to the along-track extent on the grid, the values
    upstream xdem bins and fits (its rotated coordinates minus their minimum)."""
    t = get_transform(dem)
    ny, nx = dem.shape[-2:]
    xs = (t.c + 0.5 * t.a, t.c + (nx - 0.5) * t.a)
    ys = (t.f + 0.5 * t.e, t.f + (ny - 0.5) * t.e)
    a = np.radians(float(angle))
    x0 = min(xs) if np.cos(a) >= 0 else max(xs)
    y0 = max(ys) if np.sin(a) >= 0 else min(ys)
    return np.array([x0, y0], dtype=np.float64)


def _along_track_kernel(block: np.ndarray, *, transform: Any, origin: tuple[float, float], angle: float,
                        block_info: Any = None) -> np.ndarray:
    row0, col0 = block_pixel_offsets(block_info)
    x, y = block_xy(transform, row0, col0, block.shape)
    return along_track(x[None, :], y[:, None], origin=origin, angle=angle)


@register
class DirectionalBias(BiasCorr):
    """Along-track undulations: ``dh`` as a function of the distance along a direction.

    The along-track coordinate is ``a = (x - x_0) cos(angle) - (y - y_0) sin(angle)``, with
    ``angle`` in degrees **clockwise from east**, upstream xdem's convention
    (``geoutils.raster.get_xy_rotated``): 0, the bias varies with easting; 90, with northing
    (``a`` grows southwards); 60, along the direction 60 degrees clockwise from east. ``angle``
    and ``angle + 180`` give the same correction (the axis reversed). ``(x_0, y_0)``
    (``origin_``) is the corner pixel centre of the reference grid where ``a`` is smallest, so
    that on that grid ``a`` goes from 0 to the along-track extent, as upstream's. It is computed
    per chunk from the block offsets, never stored. By default, as upstream xdem 0.2.3
    (``fit_or_bin="bin_and_fit"``, ``fit_func="nfreq_sumsin"``, ``bin_sizes=100``), the
    medians of ``dh`` in 100 bins of ``a`` are fitted with a sum of 1 to 3 sinusoids, their
    number chosen automatically (:mod:`xdem.coreg.fitfuncs`, ``"nfreq_sumsin"``); ``nb_freq=n``
    fixes it (wavelengths found by a deterministic scan of binned medians, then refined by
    robust least squares); ``fit_or_bin="fit"`` fits the sampled pixels themselves,
    ``fit_or_bin="bin"`` bins ``dh`` by ``a`` only. Correction: ``corrected = tba - bias(a)``.

    Before issue 23 ``angle`` was counter-clockwise from
    east (``a = ... + (y - y_0) sin(angle)``): an old ``angle=θ`` is the new ``angle=-θ``. A JSON
    saved then (no ``angle_clockwise_``) loads with its angle negated and a warning: the same
    correction.

    Parameters
    ----------
    angle
        Direction of the along-track axis, degrees clockwise from east (upstream's).
    fit_or_bin, bin_sizes, bin_statistic, bin_apply_method, min_bin_count, bin_outside, subsample, random_state
        As in :class:`BiasCorr`; ``bin_sizes=n`` gives ``n`` equal bins over the whole sampled
        along-track range (no percentile cut: a coordinate has no outliers).
    nb_freq
        Number of sinusoids (1 to 3), or ``None`` (default): chosen automatically among 1 to
        3, as upstream's ``"nfreq_sumsin"``.

    Learned attributes
    ------------------
    origin_ : [x_0, y_0]
    angle_clockwise_ : bool
        True: ``angle`` is clockwise from east (every fit of this version).
    wavelengths_, amplitudes_ : numpy.ndarray
        Of each sinusoid, in CRS units and metres, largest amplitude first (fit modes).
    (and those of :class:`BiasCorr`)

    Examples
    --------
    >>> import numpy as np
    >>> from xdem.examples import example_pair
    >>> ref, tba, _ = example_pair(shift_x=0, shift_y=0, shift_z=0)
    >>> wave = 0.3 * np.sin(2 * np.pi * ref["x"] / 80.0)
    >>> db = DirectionalBias(angle=0).fit(ref, tba + wave)
    >>> len(db.wavelengths_), round(float(db.wavelengths_[0])), round(float(db.amplitudes_[0]), 2)
    (1, 80, 0.3)
    """

    tags = BiasCorr.tags.but(needs_bias_vars=False)
    _edge_percentiles: ClassVar[tuple[float, float]] = (0.0, 100.0)

    def __init__(
        self,
        *,
        angle: float = 0.0,
        fit_or_bin: str = "bin_and_fit",
        nb_freq: int | None = None,
        bin_sizes: BinSizes = 100,
        bin_statistic: Callable[[np.ndarray], float] = np.nanmedian,
        bin_apply_method: str = "linear",
        min_bin_count: int = 10,
        subsample: float | int = 500_000,
        random_state: int | None = None,
        fit_optimizer: Callable[..., object] | None = None,
        fit_func: str | None = None,
    ) -> None:
        self.fit_optimizer = fit_optimizer
        self.fit_func = fit_func  # type: ignore[assignment]  # upstream's name; None or "nfreq_sumsin" only
        # its own parameters only (no fit_func: the model is a sum of nb_freq sinusoids)
        self.angle = angle
        self.fit_or_bin = fit_or_bin
        self.nb_freq = nb_freq
        self.bin_sizes = bin_sizes
        self.bin_statistic = bin_statistic
        self.bin_apply_method = bin_apply_method
        self.min_bin_count = min_bin_count
        self.subsample = subsample
        self.random_state = random_state

    def _func(self) -> str:
        if self.nb_freq is None:
            return "nfreq_sumsin"
        if isinstance(self.nb_freq, bool) or self.nb_freq not in (1, 2, 3):
            raise InputError(f"nb_freq must be 1, 2 or 3 (or None: chosen automatically), got {self.nb_freq!r}")
        return "sumsin" if self.nb_freq == 1 else f"sumsin_{self.nb_freq}"

    def _fit_arrays(self, data: FitData) -> dict[str, da.Array]:
        return {}

    def _derived_sample(self, data: FitData, rows: np.ndarray, cols: np.ndarray) -> dict[str, np.ndarray]:
        self.origin_ = track_origin(data.ref, self.angle)
        self.angle_clockwise_ = True
        x, y = pixel_xy(get_transform(data.ref), rows, cols)
        return {"along_track": along_track(x, y, origin=self.origin_, angle=self.angle)}

    def _points_variables(self, data: PointFitData, pts: PointSet, prow: np.ndarray, pcol: np.ndarray
                          ) -> tuple[dict[str, np.ndarray], int]:
        self.origin_ = track_origin(data.dem, self.angle)
        self.angle_clockwise_ = True
        return {"along_track": along_track(pts.x, pts.y, origin=self.origin_, angle=self.angle)}, 0

    def _values_at_points(self, x: np.ndarray, y: np.ndarray, z: np.ndarray, crs: str,
                          bias_vars: dict[str, Any]) -> dict[str, np.ndarray]:
        """The along-track coordinate of the points (``x, y`` in the frame, the fit's CRS)."""
        return {"along_track": along_track(x, y, origin=self.origin_, angle=self.angle)}

    def _restore(self, learned: dict[str, Any]) -> None:
        super()._restore(learned)
        if "origin_" in learned and not learned.get("angle_clockwise_", False):
            old = float(self.angle)
            self.angle = -old if old else 0.0
            self.angle_clockwise_ = True
            warnings.warn(
                f"DirectionalBias: this JSON has no angle_clockwise_: it was saved when angle was counter-clockwise "
                f"from east; angle={old:g} is read as angle={self.angle:g} (clockwise from east, upstream xdem's "
                "convention), the same correction. Save it again to drop this warning.",
                UserWarning, stacklevel=2,
            )

    def _fit_values(self, names: list[str], xs: list[np.ndarray], dh: np.ndarray) -> None:
        super()._fit_values(names, xs, dh)
        if self.fit_or_bin != "bin":
            p = self.fit_params_
            k = np.arange((len(p) - 1) // 3)
            self.wavelengths_ = np.abs(p[3 + 3 * k]) * self.var_scale_[0]
            self.amplitudes_ = np.hypot(p[1 + 3 * k], p[2 + 3 * k])

    def _frame_free(self) -> bool:
        return False  # along-track distance: map coordinates of the frame

    def _apply_arrays(self, dem: xr.DataArray, bias_vars: dict[str, xr.DataArray]) -> list[da.Array]:
        data = dask_data(dem)
        along = da.map_blocks(
            _along_track_kernel, data, transform=get_transform(dem), origin=tuple(map(float, self.origin_)),
            angle=float(self.angle), dtype=np.float64, meta=np.array((), dtype=np.float64),
        )
        return [along]
