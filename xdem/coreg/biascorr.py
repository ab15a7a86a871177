"""Bias corrections: ``dh = tba - ref`` modelled as a function of 1 to 3 variables.

:class:`BiasCorr` is the general form; :class:`~xdem.coreg.DirectionalBias` (along-track
undulations, in :mod:`xdem.coreg.directional`) and :class:`TerrainBias` (a terrain attribute of
the reference) derive their variable themselves. :class:`~xdem.coreg.Deramp` (a polynomial of
the coordinates) lives in :mod:`xdem.coreg.deramp`.

Every one models the bias on ``dh = tba - ref`` and applies ``corrected = tba - bias(vars)``.

Fit = map then reduce: one reproducible subsample of the valid pixels (one pass over the
data, two when few pixels are valid: :func:`xdem.sampling.sample_valid`) gathers ``dh`` and the variables; the binning and
fitting are then done in numpy on that sample, so the result does not depend on the
chunking. Apply = one lazy ``map_blocks``; nothing is computed.

``fit_or_bin``:

- ``"fit"``: fit ``fit_func`` to the sampled points (robust: soft-L1 loss).
- ``"bin"``: a table of ``bin_statistic`` (median by default) of ``dh`` in N-D bins, exact on
  the sample; applied with ``bin_apply_method`` (see :mod:`xdem.coreg.binning`).
- ``"bin_and_fit"``: fit ``fit_func`` to the (non-empty) bin statistics at the bin centres.

Bins with fewer than ``min_bin_count`` values are left empty (NaN) with an
:class:`~xdem.errors.EmptyBinWarning`; applying ``"linear"`` fills them from neighbours,
``"per_bin"`` leaves pixels in them unchanged. Where a variable is NaN the output is NaN; with
``"per_bin"`` (upstream xdem's behaviour) also where it lies outside the outer bin edges
(``"per_bin_clamp"`` gives those pixels the outer bins' values instead).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import dask.array as da
import numpy as np
import xarray as xr

from xdem.coreg._data import PointFitData
from xdem.coreg._point_sample import PointSample
from xdem.coreg.base import Coreg, FitData, as_dem, register
from xdem.coreg.binning import (
    APPLY_METHODS,
    bin_centres,
    binned_statistic,
    evaluate_table,
    fill_empty_bins,
    make_edges,
)
from xdem.coreg.fitfuncs import FIT_FUNCTIONS, fit_function, single_thread_blas
from xdem.errors import InputError, NotEnoughDataError
from xdem.io.grid import align_pair, dask_data, same_grid
from xdem.points.bucket import dem_at_points, pixel_positions
from xdem.points.read import PointSet
from xdem.sampling import sample_valid
from xdem.terrain import ATTRIBUTES, get_terrain_attribute
from xdem.terrain.upstream import UPSTREAM_ONLY
from xdem.typing import BinSizes, JSONDict
from xdem.warp import _to, crs_key

__all__ = ["BiasCorr", "TerrainBias", "FIT_OR_BIN"]

#: Accepted values of ``fit_or_bin``.
FIT_OR_BIN = ("fit", "bin", "bin_and_fit")


def _nan_to_none(value: Any) -> Any:
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, list):
        return [_nan_to_none(v) for v in value]
    if isinstance(value, dict):
        return {k: _nan_to_none(v) for k, v in value.items()}
    return value


def _float_array(value: Any) -> np.ndarray:
    return np.array(_none_to_nan(value), dtype=np.float64)


def _none_to_nan(value: Any) -> Any:
    if value is None:
        return float("nan")
    if isinstance(value, list):
        return [_none_to_nan(v) for v in value]
    return value


class _BiasModel:
    """The fitted bias as a picklable function of the variables (sent to every chunk)."""

    def __init__(self, *, kind: str, func: Any = None, params: Any = None, center: Any = None, scale: Any = None,
                 edges: Any = None, table: Any = None, method: str = "linear") -> None:
        self.kind, self.func, self.params = kind, func, params
        self.center, self.scale = center, scale
        self.edges, self.table, self.method = edges, table, method

    def __call__(self, values: list[np.ndarray]) -> np.ndarray:
        if self.kind == "table":
            return evaluate_table(values, self.edges, self.table, self.method)
        vals = [np.asarray(v, dtype=np.float64) for v in values]
        finite = np.logical_and.reduce([np.isfinite(v) for v in vals])
        out = np.full(vals[0].shape, np.nan)
        if finite.any():
            u = np.vstack([(v[finite] - c) / s for v, c, s in zip(vals, self.center, self.scale)])
            if isinstance(self.func, str):
                out[finite] = FIT_FUNCTIONS[self.func].evaluate(u, self.params)
            else:
                out[finite] = self.func(u[0] if len(vals) == 1 else u, *self.params)
        return out


def _correct_kernel(block: np.ndarray, *var_blocks: np.ndarray, model: _BiasModel) -> np.ndarray:
    """``block - bias(vars)`` for one chunk (NaN where the DEM or a variable is NaN)."""
    out = block.astype(np.float64)
    finite = np.isfinite(out)
    if finite.any():
        out[finite] -= model([np.asarray(v)[finite] for v in var_blocks])
    return out.astype(block.dtype, copy=False)


def _at_points(arr: da.Array, prow: np.ndarray, pcol: np.ndarray) -> np.ndarray:
    """A gridded variable at fractional pixel positions (bilinear, NaN-aware), out of core."""
    return dem_at_points(arr, prow, pcol, resampling="bilinear")[0]


def _values_of(var: Any, name: str, x: np.ndarray, y: np.ndarray, crs: str) -> np.ndarray:
    """Bias variable ``name`` at points ``(x, y)`` in ``crs``: a 1-D array of one value per point
    as it is, else a grid (anything :func:`xdem.open_dem` opens) interpolated bilinearly there
    (NaN outside it), the points taken to its CRS."""
    if isinstance(var, (np.ndarray, list, tuple)) or (hasattr(var, "ndim") and getattr(var, "ndim", 0) == 1):
        values = np.asarray(var, dtype=np.float64)
        if values.shape != np.shape(x):
            raise InputError(f"bias variable '{name}' has {values.size} values for {np.size(x)} points")
        return values

    grid = as_dem(var)
    gx, gy = _to(crs, crs_key(grid.rio.crs), np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
    return _at_points(dask_data(grid), *pixel_positions(grid, gx, gy))


def _on_grid(var: Any, like: xr.DataArray, name: str, what: str) -> xr.DataArray:
    """``var`` on the grid of ``like`` (aligned lazily if it covers it), else a clear error."""
    v = as_dem(var)
    if not same_grid(v, like):
        aligned: xr.DataArray | None
        try:
            _, aligned = align_pair(like, v)
        except InputError:
            aligned = None
        if aligned is None or aligned.shape != like.shape:
            raise InputError(
                f"bias variable '{name}' does not cover the grid of {what}; give it on the same grid "
                "(e.g. var.rio.reproject_match(dem))"
            )
        v = aligned
    return v


@register
class BiasCorr(Coreg):
    """General bias correction: ``dh = tba - ref`` as a function of 1 to 3 bias variables.

    The variables are given as ``bias_vars={"name": dem_like, ...}`` to both ``fit`` (on the
    reference grid) and ``apply`` (on the grid of the DEM being corrected); the correction is
    ``corrected = tba - bias(vars)``. See the module notes for the three ``fit_or_bin`` modes.

    Parameters
    ----------
    fit_or_bin
        ``"fit"``, ``"bin"`` or ``"bin_and_fit"``.
    fit_func
        Name of a function of :data:`xdem.coreg.fitfuncs.FIT_FUNCTIONS` (default
        ``"norder_polynomial"``, upstream's: a polynomial of one variable of order 1 to 6
        chosen automatically; ``"linear"``, ``"polynomial_1"`` to ``"polynomial_3"`` of total
        degree n in all variables; ``"sumsin"``, ``"sumsin_2"``, ``"sumsin_3"`` for one
        variable), fitted on normalised
        variables; or a callable ``f(x, *params)`` (``x`` 1-D for one variable, else
        ``(n_vars, n)``) fitted with :func:`scipy.optimize.curve_fit` on the raw variables.
        A callable cannot be saved to JSON.
    bin_sizes
        An int (bins per variable), a dict ``name -> int or edges``, or (one variable) a
        sequence of edges. An int ``n`` gives ``n`` equal bins between the 0.5 and 99.5
        percentiles of the sampled values (values beyond are not binned; when applying they
        take the outer bins' values); with ``bin_apply_method="per_bin"``, between the smallest
        and largest sampled values (upstream's), and values beyond them get NaN when applying.
    bin_statistic
        Statistic of ``dh`` per bin (``np.nanmedian``, ``np.nanmean``, ...; stored by name).
    bin_apply_method
        ``"linear"`` (interpolate between bin centres; beyond the outer centres, the outer
        value), ``"per_bin"`` (the bin's value; NaN outside the outer bin edges, as upstream
        xdem) or ``"per_bin_clamp"`` (the bin's value, the outer bins extending to infinity).
    min_bin_count
        Bins with fewer sampled values are left empty (NaN).
    subsample
        Fraction (``<= 1``) or count (``> 1``) of valid pixels used.
    random_state
        Seed of the reproducible subsample.
    bias_var_names
        Upstream's names of the bias variables: when given, the keys of ``bias_vars`` in
        ``fit`` must be these (otherwise an :class:`~xdem.errors.InputError`, as upstream).

    Learned attributes
    ------------------
    var_names_ : list of str
        Variables, in order.
    bin_edges_, bin_values_, bin_counts_
        Bin edges per variable, statistic and count per N-D bin (``"bin"`` modes).
    fit_params_, var_center_, var_scale_
        Fitted parameters, and the normalisation ``u = (v - var_center_) / var_scale_`` they
        apply to (0 and 1 for a callable) (``"fit"`` modes).
    count_ : int
        Sampled points.

    Examples
    --------
    >>> from xdem.examples import example_pair
    >>> ref, tba, _ = example_pair(shift_x=0, shift_y=0, shift_z=0)
    >>> tba2 = tba + 0.01 * (ref - 200.0)  # an elevation-dependent bias
    >>> bc = BiasCorr(fit_func="linear").fit(ref, tba2, bias_vars={"elevation": ref})
    >>> corrected = bc.apply(tba2, bias_vars={"elevation": ref})  # lazy
    """

    #: What it can do (:class:`~xdem.coreg.Capabilities`).
    tags = Coreg.tags.but(needs_bias_vars=True, fits_points=True, moves_points=True)
    _callable_params = ("bin_statistic",)
    #: Range of the sampled values covered by ``bin_sizes=n`` equal bins (percentiles).
    _edge_percentiles: ClassVar[tuple[float, float]] = (0.5, 99.5)

    def __init__(
        self,
        *,
        fit_or_bin: str = "fit",
        fit_func: str | Callable[..., np.ndarray] = "norder_polynomial",
        bin_sizes: BinSizes = 10,
        bin_statistic: Callable[[np.ndarray], float] = np.nanmedian,
        bin_apply_method: str = "linear",
        min_bin_count: int = 10,
        subsample: float | int = 500_000,
        random_state: int | None = None,
        bias_var_names: Sequence[str] | None = None,
        fit_optimizer: Callable[..., object] | None = None,
    ) -> None:
        self.fit_optimizer = fit_optimizer
        self.bias_var_names = bias_var_names
        self.fit_or_bin = fit_or_bin
        self.fit_func = fit_func
        self.bin_sizes = bin_sizes
        self.bin_statistic = bin_statistic
        self.bin_apply_method = bin_apply_method
        self.min_bin_count = min_bin_count
        self.subsample = subsample
        self.random_state = random_state

    def _check_names(self, given: list[str]) -> None:
        """Upstream's ``bias_var_names``: the keys of ``bias_vars`` must be those names."""
        names = vars(self).get("bias_var_names")
        if names is not None and sorted(given) != sorted(names):
            raise InputError(f"the keys of bias_vars ({', '.join(sorted(given))}) are not the bias_var_names given to "
                             f"{type(self).__name__} ({', '.join(sorted(names))})")

    # --- hooks for subclasses -----------------------------------------------------------------
    def _func(self) -> str | Callable[..., np.ndarray]:
        return self.fit_func

    def _fit_arrays(self, data: FitData) -> dict[str, da.Array]:
        """Lazy variables on the reference grid, gathered at the sampled pixels."""
        if not 1 <= len(data.bias_vars) <= 3:
            raise InputError(f"{type(self).__name__} takes 1 to 3 bias variables, got {len(data.bias_vars)}")
        self._check_names(list(data.bias_vars))
        return {k: _on_grid(v, data.ref, k, "the reference").data for k, v in data.bias_vars.items()}

    def _derived_sample(self, data: FitData, rows: np.ndarray, cols: np.ndarray) -> dict[str, np.ndarray]:
        """Variables computed from the sampled pixel positions (none here)."""
        return {}

    def _points_variables(self, data: PointFitData, pts: PointSet, prow: np.ndarray, pcol: np.ndarray
                          ) -> tuple[dict[str, np.ndarray], int]:
        """The variables at the points (fit on points) and the passes made to get them: the
        gridded ``bias_vars`` interpolated bilinearly at the points (one pass each)."""
        if not 1 <= len(data.bias_vars) <= 3:
            raise InputError(f"{type(self).__name__} takes 1 to 3 bias variables, got {len(data.bias_vars)}")
        self._check_names(list(data.bias_vars))
        return {k: _at_points(dask_data(v), prow, pcol) for k, v in data.bias_vars.items()}, len(data.bias_vars)

    def _values_at_points(self, x: np.ndarray, y: np.ndarray, z: np.ndarray, crs: str,
                          bias_vars: dict[str, Any]) -> dict[str, np.ndarray]:
        """The variables at points ``(x, y, z)`` in ``crs`` (applying to points): each of
        ``var_names_`` from ``bias_vars``, a grid interpolated bilinearly at the points or an
        array with a value per point."""
        missing = [k for k in self.var_names_ if k not in bias_vars]
        if missing:
            raise InputError(f"{type(self).__name__} was fitted with bias variables {self.var_names_}; apply_points() "
                             f"needs them at the points too, missing {missing} (bias_vars={{name: grid or values}})")
        return {k: _values_of(bias_vars[k], k, x, y, crs) for k in self.var_names_}

    def _fit_points(self, data: PointFitData) -> None:
        """On points (:mod:`xdem.coreg._point_sample`): ``dh`` at the points (one pass), the
        bias variables there (:meth:`_points_variables`: gridded variables interpolated
        bilinearly, one pass each; coordinates computed), the model fitted on them, then
        refitted without the points whose residual is an outlier. Points where a variable is
        NaN count as outside."""
        self._check_params()
        ps = PointSample.from_points(data, subsample=self.subsample, random_state=self.random_state,
                                     what=type(self).__name__)
        dh, fin = ps.dh(need=10)
        prow, pcol = ps.pixel_positions()
        values, passes = self._points_variables(data, ps.points, prow, pcol)
        for v in values.values():
            fin = fin & np.isfinite(v)
        ps.require(int(fin.sum()), 10)
        names = list(values)
        ok = fin
        with single_thread_blas():
            self._fit_values(names, [v[fin] for v in values.values()], dh[fin])
            if data.outlier_nmad is not None:
                residual = np.full(len(dh), np.nan)
                residual[fin] = dh[fin] - self.bias({k: v[fin] for k, v in values.items()})
                ok = ps.inliers(residual)
                ps.require(int(ok.sum()), 10)
                if ps.has_outliers(fin, ok):
                    self._fit_values(names, [v[ok] for v in values.values()], dh[ok])
        self.passes_ = 1 + int(passes)
        vars(self).update(ps.counts(fin, ok))

    def _apply_arrays(self, dem: xr.DataArray, bias_vars: dict[str, xr.DataArray]) -> list[da.Array]:
        """Lazy variables on ``dem``'s grid, in the order of ``var_names_``."""
        missing = [k for k in self.var_names_ if k not in bias_vars]
        if missing:
            raise InputError(
                f"{type(self).__name__} was fitted with bias variables {self.var_names_}; apply() needs them too, "
                f"missing {missing} (bias_vars={{name: array on the DEM's grid}})"
            )
        return [_on_grid(bias_vars[k], dem, k, "the DEM to correct").data for k in self.var_names_]

    # --- checks ---------------------------------------------------------------------------------
    def _check_params(self) -> None:
        if self.fit_or_bin not in FIT_OR_BIN:
            raise InputError(f"fit_or_bin must be one of {', '.join(FIT_OR_BIN)}, got {self.fit_or_bin!r}")
        if self.bin_apply_method not in APPLY_METHODS:
            raise InputError(
                f"bin_apply_method must be one of {', '.join(APPLY_METHODS)}, got {self.bin_apply_method!r}"
            )
        func = self._func()
        if not callable(func):
            fit_function(func)
        if isinstance(self.min_bin_count, bool) or int(self.min_bin_count) < 1:
            raise InputError(f"min_bin_count must be an integer >= 1, got {self.min_bin_count!r}")

    # --- fit --------------------------------------------------------------------------------------
    def _fit(self, data: FitData) -> None:
        self._check_params()
        arrays = self._fit_arrays(data)
        valid = data.valid()
        for arr in arrays.values():
            valid = valid & da.isfinite(arr)
        s = sample_valid(
            valid, {"dh": data.tba.data - data.ref.data, **arrays}, subsample=self.subsample,
            random_state=self.random_state, min_count=10, what=type(self).__name__,
        )
        self.passes_ = int(s.passes)
        values = {k: s[k] for k in arrays}
        values.update(self._derived_sample(data, s["row"], s["col"]))
        with single_thread_blas():
            self._fit_values(list(values), list(values.values()), s["dh"])

    def _edges(self, names: list[str], xs: list[np.ndarray]) -> list[np.ndarray]:
        spec = self.bin_sizes
        out = []
        for name, x in zip(names, xs):
            if isinstance(spec, dict):
                if name not in spec:
                    raise InputError(f"bin_sizes has no entry for bias variable '{name}' (keys: {list(spec)})")
                sp = spec[name]
            elif np.isscalar(spec):
                sp = spec
            elif len(names) == 1:
                sp = spec
            else:
                raise InputError("with several bias variables give bin_sizes as an int or a dict name -> int/edges")
            if np.isscalar(sp):
                # per_bin gives NaN beyond the outer edges: they span every sampled value (as upstream's)
                lo, hi = np.percentile(x, (0.0, 100.0) if self.bin_apply_method == "per_bin" else self._edge_percentiles)
                x = x[(x >= lo) & (x <= hi)]
            out.append(make_edges(x, sp, name))
        return out

    def _fit_values(self, names: list[str], xs: list[np.ndarray], dh: np.ndarray) -> None:
        func = self._func()
        if not callable(func) and self.fit_or_bin != "bin":  # "bin" does not use fit_func
            ff = fit_function(func)
            if ff.n_vars is not None and ff.n_vars != len(names):
                raise InputError(f"fit_func {func!r} takes {ff.n_vars} variable(s), got {len(names)}: {names}")
        self.var_names_ = list(names)
        self.count_ = int(len(dh))
        if self.fit_or_bin in ("bin", "bin_and_fit"):
            edges = self._edges(names, xs)
            table, counts = binned_statistic(xs, dh, edges, self.bin_statistic, min_count=int(self.min_bin_count))
            if not np.isfinite(table).any():
                raise NotEnoughDataError(
                    f"every bin has fewer than {self.min_bin_count} values; use fewer bins or a larger subsample"
                )
            self.bin_edges_ = edges
            self.bin_values_ = table
            self.bin_counts_ = counts
        if self.fit_or_bin == "bin":
            return
        if self.fit_or_bin == "bin_and_fit":
            grids = np.meshgrid(*bin_centres(self.bin_edges_), indexing="ij")
            good = np.isfinite(self.bin_values_)
            xs = [g[good] for g in grids]
            dh = self.bin_values_[good]
        if callable(func):
            from scipy.optimize import curve_fit

            center, scale = np.zeros(len(xs)), np.ones(len(xs))
            x = xs[0] if len(xs) == 1 else np.vstack(xs)
            try:
                params, _ = curve_fit(func, x, dh)
            except (RuntimeError, ValueError, TypeError) as exc:
                raise InputError(
                    f"fitting the user fit_func failed ({exc}); check its signature f(x, *params)"
                ) from exc
        else:
            lo = np.array([np.min(x) for x in xs])
            hi = np.array([np.max(x) for x in xs])
            center = 0.5 * (lo + hi)
            scale = np.where(hi > lo, 0.5 * (hi - lo), 1.0)
            u = np.vstack([(x - c) / sc for x, c, sc in zip(xs, center, scale)])
            n_min = {"sumsin": 20, "sumsin_2": 40, "sumsin_3": 60, "nfreq_sumsin": 60, "norder_polynomial": 10
                     }.get(func, 3 * len(xs) + 3)
            if u.shape[1] < n_min:
                raise NotEnoughDataError(f"fitting {func!r} needs at least {n_min} points, got {u.shape[1]}")
            params = fit_function(func).fit(u, dh)
        self.fit_params_ = np.asarray(params, dtype=np.float64)
        self.var_center_ = np.asarray(center, dtype=np.float64)
        self.var_scale_ = np.asarray(scale, dtype=np.float64)

    # --- apply ------------------------------------------------------------------------------------
    def _model(self) -> _BiasModel:
        if self.fit_or_bin == "bin":
            table = self.bin_values_ if self.bin_apply_method != "linear" else fill_empty_bins(self.bin_values_)
            return _BiasModel(kind="table", edges=self.bin_edges_, table=table, method=self.bin_apply_method)
        return _BiasModel(kind="fit", func=self._func(), params=self.fit_params_, center=self.var_center_,
                          scale=self.var_scale_)

    def bias(self, values: dict[str, np.ndarray]) -> np.ndarray:
        """The fitted bias at given variable values (numpy; NaN where a value is NaN).

        Examples
        --------
        >>> from xdem.examples import example_pair
        >>> ref, tba, _ = example_pair(shift_x=0, shift_y=0, shift_z=0)
        >>> bc = BiasCorr().fit(ref, tba + 0.01 * (ref - 200.0), bias_vars={"elevation": ref})
        >>> round(float(bc.bias({"elevation": np.array([300.0])})[0]), 4)
        1.0
        """
        self._check_fitted()
        return self._model()([np.atleast_1d(np.asarray(values[k], dtype=np.float64)) for k in self.var_names_])

    def _frame_free(self) -> bool:
        return True  # a function of bias variables given on the grid of the DEM being corrected

    def _apply(self, dem: xr.DataArray, bias_vars: dict[str, xr.DataArray], resample: bool) -> xr.DataArray:
        data = dask_data(dem)
        arrays = [a.rechunk(data.chunks) for a in self._apply_arrays(dem, bias_vars)]
        out = da.map_blocks(
            _correct_kernel, data, *arrays, model=self._model(), dtype=data.dtype, meta=np.array((), dtype=data.dtype)
        )
        corrected: xr.DataArray = dem.copy(data=out).rio.write_nodata(np.nan, encoded=False)
        return corrected

    # --- serialisation ----------------------------------------------------------------------------
    def to_dict(self) -> JSONDict:
        if callable(self._func()):
            raise InputError(
                f"{type(self).__name__} with a user fit_func cannot be saved to JSON; use a named one "
                f"({', '.join(FIT_FUNCTIONS)})"
            )
        doc = super().to_dict()
        doc["learned"] = _nan_to_none(doc["learned"])
        return doc

    def _restore(self, learned: dict[str, Any]) -> None:
        super()._restore(learned)
        for k in ("bin_values_", "fit_params_", "var_center_", "var_scale_", "origin_", "wavelengths_", "amplitudes_"):
            if k in learned:
                setattr(self, k, _float_array(learned[k]))
        if "bin_counts_" in learned:
            self.bin_counts_ = np.asarray(learned["bin_counts_"], dtype=np.int64)
        if "bin_edges_" in learned:
            self.bin_edges_ = [_float_array(e) for e in learned["bin_edges_"]]


@register
class TerrainBias(BiasCorr):
    """``dh`` binned (and optionally fitted) against a terrain attribute of the reference.

    In ``fit`` the attribute is computed lazily from the REFERENCE with
    :func:`xdem.terrain.get_terrain_attribute` (``"elevation"`` is the reference itself),
    unless ``bias_vars`` holds an array under the attribute's name. In ``apply(dem)`` it is
    computed from the DEM being corrected (the reference is usually not at hand, and after
    alignment both DEMs have the same terrain), unless ``bias_vars`` holds it. Correction:
    ``corrected = tba - bias(attribute)``; where the attribute is NaN (e.g. the outer pixels
    for curvatures) the output is NaN.

    Parameters
    ----------
    terrain_attribute
        ``"elevation"``, a name of :data:`xdem.terrain.ATTRIBUTES` (``"maximum_curvature"``,
        ``"slope"``, ``"aspect"``, ..., our meaning) or of upstream's only
        (:data:`xdem.terrain.upstream.UPSTREAM_ONLY`: ``"max_curvature"``, the default as
        upstream's, is upstream 0.2.3's maximal curvature, Florinsky's fit, as its
        ``TerrainBias`` derives it: :func:`xdem.terrain.max_curvature`).
    fit_or_bin, fit_func, bin_sizes, bin_statistic, bin_apply_method, min_bin_count, subsample, random_state
        As in :class:`BiasCorr`; default: 100 bins of the median, applied linearly
        (``fit_func="norder_polynomial"``, used with ``"fit"``/``"bin_and_fit"``, as upstream).

    Examples
    --------
    >>> from xdem.examples import example_pair
    >>> ref, tba, _ = example_pair(shift_x=0, shift_y=0, shift_z=0)
    >>> tb = TerrainBias(terrain_attribute="elevation", bin_sizes=20).fit(ref, tba + 0.01 * (ref - 200.0))
    >>> tb.var_names_
    ['elevation']
    """

    tags = BiasCorr.tags.but(needs_bias_vars=False)

    def __init__(
        self,
        *,
        terrain_attribute: str = "max_curvature",
        fit_or_bin: str = "bin",
        fit_func: str | Callable[..., np.ndarray] = "norder_polynomial",
        bin_sizes: BinSizes = 100,
        bin_statistic: Callable[[np.ndarray], float] = np.nanmedian,
        bin_apply_method: str = "linear",
        min_bin_count: int = 10,
        subsample: float | int = 500_000,
        random_state: int | None = None,
        fit_optimizer: Callable[..., object] | None = None,
    ) -> None:
        self.terrain_attribute = terrain_attribute
        super().__init__(
            fit_or_bin=fit_or_bin, fit_func=fit_func, bin_sizes=bin_sizes, bin_statistic=bin_statistic,
            bin_apply_method=bin_apply_method, min_bin_count=min_bin_count, subsample=subsample,
            random_state=random_state, fit_optimizer=fit_optimizer,
        )

    def _attribute(self, dem: xr.DataArray) -> da.Array:
        if self.terrain_attribute == "elevation":
            elevation: da.Array = dem.data
            return elevation
        try:  # upstream's names (e.g. its default "max_curvature") get upstream's meaning and Florinsky's fit
            attr = get_terrain_attribute(dem, self.terrain_attribute)
        except InputError as exc:
            raise InputError(
                f"terrain_attribute must be 'elevation' or one of {', '.join((*ATTRIBUTES, *UPSTREAM_ONLY))}, got "
                f"{self.terrain_attribute!r}"
            ) from exc
        if not isinstance(attr, xr.DataArray):  # a list of names gives a list of DataArrays
            raise InputError(f"terrain_attribute must be one name, got {self.terrain_attribute!r}")
        values: da.Array = attr.data
        return values

    def _fit_arrays(self, data: FitData) -> dict[str, da.Array]:
        name = self.terrain_attribute
        if name in data.bias_vars:
            return {name: _on_grid(data.bias_vars[name], data.ref, name, "the reference").data}
        return {name: self._attribute(data.ref)}

    def _points_variables(self, data: PointFitData, pts: PointSet, prow: np.ndarray, pcol: np.ndarray
                          ) -> tuple[dict[str, np.ndarray], int]:
        # with points there is no reference grid: the attribute is the DEM's (as in apply)
        name = self.terrain_attribute
        arr = dask_data(data.bias_vars[name]) if name in data.bias_vars else self._attribute(data.dem)
        return {name: _at_points(arr, prow, pcol)}, 1

    def _values_at_points(self, x: np.ndarray, y: np.ndarray, z: np.ndarray, crs: str,
                          bias_vars: dict[str, Any]) -> dict[str, np.ndarray]:
        """The attribute at the points: the points' own elevation for ``"elevation"``, else the
        attribute given in ``bias_vars`` (a grid, e.g. the slope of the reference, interpolated
        bilinearly at the points, or a value per point)."""
        name = self.terrain_attribute
        if name in bias_vars:
            return {name: _values_of(bias_vars[name], name, x, y, crs)}
        if name == "elevation":
            return {name: np.asarray(z, dtype=np.float64)}
        raise InputError(f"TerrainBias({name!r}) needs the {name} at the points: apply_points(..., bias_vars={{{name!r}: "
                         f"grid}}), e.g. the {name} of the reference DEM (xdem.terrain)")

    def _frame_free(self) -> bool:
        # elevation is the same in any CRS; slopes and curvatures use the DEM's horizontal units
        return self.terrain_attribute == "elevation"

    def _apply_arrays(self, dem: xr.DataArray, bias_vars: dict[str, xr.DataArray]) -> list[da.Array]:
        name = self.terrain_attribute
        if name in bias_vars:
            return [_on_grid(bias_vars[name], dem, name, "the DEM to correct").data]
        return [self._attribute(dem)]
