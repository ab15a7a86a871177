"""Deramping: a polynomial surface of the coordinates fitted to ``dh = tba - ref``.

The surface is a polynomial of order ``poly_order`` in the normalised coordinates
``u = (x - x_c) / s`` and ``v = (y - y_c) / s``, where ``(x_c, y_c)`` is the centre of the
reference grid and ``s`` half its larger side (so ``u, v`` lie in ``[-1, 1]``). Which
monomials ``u^i v^j`` it has is chosen by ``terms``:

- ``terms="tensor"`` (the default, upstream xdem 0.2.3's ``polynomial_2d``, i.e.
  ``numpy.polynomial.polynomial.polyval2d`` with an ``(n + 1) x (n + 1)`` coefficient array):
  every ``u^i v^j`` with ``i <= n`` and ``j <= n``, ``(n + 1)^2`` terms; ``poly_order=2``
  has the 9 terms up to ``u^2 v^2``.
- ``terms="total"``: those of total degree ``i + j <= n``, ``(n + 1)(n + 2) / 2`` terms
  (``poly_order=1``: a plane ``1, u, v``; ``poly_order=2``: ``1, u, v, u^2, u v, v^2``).

Both are ordered by total degree, then by decreasing ``i``. Applying evaluates the surface
chunk by chunk from the block offsets, never building a full-size coordinate grid.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import dask.array as da
import numpy as np
import xarray as xr
from affine import Affine

from xdem.coreg._data import SharedPoints
from xdem.coreg._point_sample import PointSample
from xdem.coreg.base import Coreg, FitData, PointFitData, register
from xdem.coreg.fitfuncs import poly_design, robust_refine_linear, single_thread_blas
from xdem.errors import InputError, NotEnoughDataError
from xdem.io._heap import release_before_solve
from xdem.io.grid import block_pixel_offsets, block_xy, dask_data, get_transform
from xdem.kernels.surface import subtract_polynomial_surface
from xdem.sampling import Sample, sample_valid
from xdem.warp import FrameOp, Surface

__all__ = ["Deramp", "surface_terms", "check_poly_order", "grid_normalisation", "pixel_axes", "pixel_xy",
           "subtract_surface", "fitted_surface", "FittedRamp", "TERMS"]


def check_poly_order(poly_order: object) -> int:
    """``poly_order`` as an int, or a clear :class:`~xdem.errors.InputError`."""
    if isinstance(poly_order, bool) or not isinstance(poly_order, (int, np.integer)) or int(poly_order) < 0:
        raise InputError(
            f"poly_order must be an integer >= 0 (0: constant, 1: plane, 2: quadratic, ...), got {poly_order!r}"
        )
    return int(poly_order)


#: Accepted values of ``terms`` (:func:`surface_terms`).
TERMS = ("tensor", "total")


def surface_terms(poly_order: int, terms: str = "total") -> list[tuple[int, int]]:
    """Exponents ``(i, j)`` of ``u^i v^j`` of a polynomial surface, by total degree then
    decreasing ``i``: ``i + j <= poly_order`` (``terms="total"``), or ``i, j <= poly_order``
    (``terms="tensor"``, upstream xdem's ``polynomial_2d``).

    Examples
    --------
    >>> surface_terms(2)
    [(0, 0), (1, 0), (0, 1), (2, 0), (1, 1), (0, 2)]
    >>> surface_terms(1, "tensor")
    [(0, 0), (1, 0), (0, 1), (1, 1)]
    """
    n = check_poly_order(poly_order)
    if terms not in TERMS:
        raise InputError(f"terms must be 'tensor' (every u^i v^j with i, j <= poly_order, upstream's) or 'total' "
                         f"(i + j <= poly_order), got {terms!r}")
    top = 2 * n if terms == "tensor" else n
    return [(d - j, j) for d in range(top + 1) for j in range(d + 1) if terms == "total" or max(d - j, j) <= n]


def grid_normalisation(dem: xr.DataArray) -> tuple[list[float], float]:
    """Centre ``[x_c, y_c]`` of a grid and half its larger side (coordinate normalisation)."""
    t = get_transform(dem)
    ny, nx = dem.shape
    xc, yc = t * (nx / 2.0, ny / 2.0)
    scale = 0.5 * max(abs(t.a) * nx, abs(t.e) * ny)
    return [float(xc), float(yc)], float(scale)


def pixel_axes(transform: Affine) -> list[float]:
    """``[x_0, dx, y_0, dy]``: pixel centres at ``x = x_0 + col dx``, ``y = y_0 + row dy``."""
    return [float(transform.c + 0.5 * transform.a), float(transform.a), float(transform.f + 0.5 * transform.e),
            float(transform.e)]


def pixel_xy(transform: Affine, rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Centre coordinates of pixels given by global ``rows``/``cols`` (north-up grids)."""
    x = transform.c + (np.asarray(cols, dtype=np.float64) + 0.5) * transform.a
    y = transform.f + (np.asarray(rows, dtype=np.float64) + 0.5) * transform.e
    return x, y


def _surface_kernel(
    block: np.ndarray, *, transform: Affine, center: tuple[float, float], scale: float,
    terms: Sequence[Sequence[int]], coefs: np.ndarray, block_info: Any = None,
) -> np.ndarray:
    """``block - surface(x, y)`` for one chunk; coordinates from the block's offsets."""
    row0, col0 = block_pixel_offsets(block_info)
    x, y = block_xy(transform, row0, col0, block.shape)
    u = (x - center[0]) / scale
    v = (y - center[1]) / scale
    return subtract_polynomial_surface(block, u, v, terms, coefs.tolist())  # the same float64 values, as a list


class FittedRamp(Protocol):
    """A step with a learned ramp: :class:`Deramp`, :class:`~xdem.coreg.NuthKaabDeramp`."""

    @property
    def center_(self) -> Sequence[float]: ...

    @property
    def scale_(self) -> float: ...

    @property
    def terms_(self) -> Iterable[Sequence[int]]: ...

    @property
    def coefs_(self) -> Iterable[float]: ...


def fitted_surface(step: FittedRamp) -> Surface:
    """The ramp learned by a fitted step (``center_``, ``scale_``, ``terms_``, ``coefs_``) as a
    :class:`xdem.warp.Surface`, evaluable at frame coordinates."""
    return Surface(
        center=(float(step.center_[0]), float(step.center_[1])), scale=float(step.scale_),
        terms=tuple((int(i), int(j)) for i, j in step.terms_), coefs=tuple(float(c) for c in step.coefs_),
    )


def subtract_surface(
    dem: xr.DataArray, *, center: Sequence[float], scale: float, terms: Sequence[Sequence[int]], coefs: np.ndarray
) -> xr.DataArray:
    """Lazily subtract a polynomial surface of the coordinates from ``dem`` (``map_blocks``)."""
    data = dask_data(dem)
    out = da.map_blocks(
        _surface_kernel, data, transform=get_transform(dem), center=tuple(center), scale=float(scale),
        terms=[tuple(t) for t in terms], coefs=np.asarray(coefs, dtype=np.float64), dtype=data.dtype,
        meta=np.array((), dtype=data.dtype),
    )
    surface: xr.DataArray = dem.copy(data=out).rio.write_nodata(np.nan, encoded=False)
    return surface


@register
class Deramp(Coreg):
    """Polynomial surface of the coordinates fitted to ``dh = tba - ref`` and subtracted.

    The model is ``dh(x, y) = sum_k c_k u^i_k v^j_k`` in coordinates normalised by the
    reference grid, with every ``i_k, j_k <= poly_order`` by default (upstream xdem 0.2.3's
    ``polynomial_2d``; ``terms="total"``: ``i_k + j_k <= poly_order``; see the module notes
    for the exact terms), and the correction is ``corrected = tba - surface(x, y)``. The fit takes
    a reproducible subsample of valid pixels (one pass over the data, two when few are valid), solves the linear
    least-squares problem, then refines it with a robust (soft L1) loss so that outliers
    weigh less. ``apply`` is lazy: one ``map_blocks`` evaluating the surface per chunk.

    Parameters
    ----------
    poly_order
        Order of the polynomial (``>= 0``; 2 by default, as upstream).
    terms
        ``"tensor"`` (default, upstream's): every ``u^i v^j`` with ``i, j <= poly_order``;
        ``"total"``: total degree ``i + j <= poly_order`` (``poly_order=1``: a plane).
    subsample
        Fraction (``<= 1``) or count (``> 1``) of valid pixels used.
    random_state
        Seed of the reproducible subsample.

    Learned attributes
    ------------------
    coefs_ : numpy.ndarray
        Coefficients ``c_k`` (metres), in the order of ``terms_``.
    terms_ : list of [i, j]
        Exponents of ``u`` and ``v``.
    center_ : list of float
        Centre ``[x_c, y_c]`` of the reference grid (CRS units).
    scale_ : float
        Normalisation: ``u = (x - x_c) / scale_``, ``v = (y - y_c) / scale_`` (CRS units).
    count_ : int
        Points in the fit.
    passes_ : int
        Passes over the data made by the fit (1, or 2 when few pixels are valid).
    pixel_axes_ : list of float
        ``[x_0, dx, y_0, dy]`` of the fit's grid (pixel centres ``x = x_0 + col dx``,
        ``y = y_0 + row dy``): the pixel indices in which upstream's ``fit_params`` are given
        (``meta["outputs"]["fitorbin"]["fit_params"]``).

    Examples
    --------
    >>> from xdem.examples import example_pair
    >>> ref, tba, _ = example_pair(shift_x=0, shift_y=0, shift_z=0, tilt=(0.001, 0.0))
    >>> dr = Deramp(poly_order=1, terms="total").fit(ref, tba)
    >>> round(float(dr.coefs_[1] / dr.scale_), 6)  # slope along x, metres per metre
    0.001
    """

    #: What it can do (:class:`~xdem.coreg.Capabilities`).
    tags = Coreg.tags.but(fits_points=True, in_frame=True, blockwise_step=True, moves_points=True)
    def __init__(self, *, poly_order: int = 2, terms: str = "tensor", subsample: float | int = 500_000,
                 random_state: int | None = None,
                 fit_or_bin: str | None = None, fit_func: str | Callable[..., object] | None = None,
                 fit_optimizer: Callable[..., object] | None = None, bin_sizes: int | dict[str, int] | None = None,
                 bin_statistic: Callable[[np.ndarray], float] | None = None, bin_apply_method: str | None = None):
        self.fit_or_bin = fit_or_bin
        self.fit_func = fit_func
        self.fit_optimizer = fit_optimizer
        self.bin_sizes = bin_sizes  # upstream's binning parameters: unused with fit_or_bin="fit", as upstream
        self.bin_statistic = bin_statistic
        self.bin_apply_method = bin_apply_method
        self.poly_order = poly_order
        self.terms = terms
        self.subsample = subsample
        self.random_state = random_state

    def _terms(self) -> list[tuple[int, int]]:
        return surface_terms(self.poly_order, self.terms)

    def _fit(self, data: FitData) -> None:
        terms = self._terms()
        need = max(len(terms) + 1, 10)
        pts = data.points
        if isinstance(pts, SharedPoints) and pts.serves(self.subsample, self.random_state):
            dh = pts.dh()  # a pipeline's Nuth & Kääb subsample: no pass (freed here if their last use)
            ok = np.isfinite(dh)
            if int(ok.sum()) < need:
                raise NotEnoughDataError(f"Deramp needs at least {need} valid pixels but found {int(ok.sum())}")
            s: Sample | dict[str, np.ndarray] = {"row": pts.rows[ok], "col": pts.cols[ok], "dh": dh[ok]}
            self.passes_ = 0
        else:
            s = sample_valid(
                data.valid(), {"dh": data.tba.data - data.ref.data}, subsample=self.subsample,
                random_state=self.random_state, min_count=need, what="Deramp",
            )
            self.passes_ = int(s.passes)
        x, y = pixel_xy(get_transform(data.ref), s.pop("row"), s.pop("col"))
        dh = s.pop("dh")
        del s  # the sample's other arrays (none are used past here)
        self._fit_surface(x, y, dh, grid_normalisation(data.ref))
        self.pixel_axes_ = pixel_axes(get_transform(data.ref))

    def _fit_surface(self, x: np.ndarray, y: np.ndarray, dh: np.ndarray,
                     normalisation: tuple[list[float], float]) -> np.ndarray:
        """Fit the surface to ``dh`` at coordinates ``x, y`` (a sample of pixels, or points);
        sets the learned attributes and returns the residuals ``dh - surface``."""
        terms = self._terms()
        center, scale = normalisation
        design = poly_design(np.vstack([(x - center[0]) / scale, (y - center[1]) / scale]), terms)
        release_before_solve()  # what was freed goes back first (xdem.io._heap)
        with single_thread_blas():
            p0, *_ = np.linalg.lstsq(design, dh, rcond=None)
        coefs, _ = robust_refine_linear(design, dh, p0)
        self.coefs_ = coefs
        self.terms_ = [list(t) for t in terms]
        self.center_ = center
        self.scale_ = scale
        self.count_ = int(len(dh))
        return np.asarray(dh - design @ coefs)

    def _fit_points(self, data: PointFitData) -> None:
        """On points (:mod:`xdem.coreg._point_sample`): the surface fitted to ``dh`` at the
        points (no horizontal motion, so the same whichever side the points are on), then
        refitted without the points whose residual is an outlier."""
        need = max(len(self._terms()) + 1, 10)
        ps = PointSample.from_points(data, subsample=self.subsample, random_state=self.random_state, what="Deramp")
        dh, fin = ps.dh(need=need)
        x, y = ps.points.x, ps.points.y
        norm = grid_normalisation(data.dem)
        self.pixel_axes_ = pixel_axes(get_transform(data.dem))
        residual = np.full(len(dh), np.nan)
        residual[fin] = self._fit_surface(x[fin], y[fin], dh[fin], norm)
        ok = ps.inliers(residual, fin)
        if data.outlier_nmad is not None:
            ps.require(int(ok.sum()), need)
            if ps.has_outliers(fin, ok):
                self._fit_surface(x[ok], y[ok], dh[ok], norm)
        self.passes_ = 1
        vars(self).update(ps.counts(fin, ok))

    def _frame_op(self) -> FrameOp:
        return FrameOp(str(self.crs_), surfaces=(fitted_surface(self),))

    def _apply(self, dem: xr.DataArray, bias_vars: dict[str, xr.DataArray], resample: bool) -> xr.DataArray:
        return subtract_surface(dem, center=self.center_, scale=self.scale_, terms=self.terms_, coefs=self.coefs_)

    def _restore(self, learned: dict[str, Any]) -> None:
        super()._restore(learned)
        if "coefs_" in learned:
            self.coefs_ = np.asarray(learned["coefs_"], dtype=np.float64)

    def surface(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The fitted surface at coordinates ``x, y`` (numpy, any matching shapes)."""
        self._check_fitted()
        return fitted_surface(self).value(x, y)
