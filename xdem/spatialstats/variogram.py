"""Empirical variograms of elevation differences and sums of variogram models.

The empirical variogram is computed by scikit-gstat (:class:`skgstat.Variogram`) on a
reproducible, chunk-independent subsample of the valid pixels drawn by
:func:`xdem.sampling.sample_valid` (one or two passes over the raster; pixel centres from the
geotransform). scikit-gstat builds every pairwise distance, so memory and time grow as
the square of the number of points per variogram (about 1 s and 0.5 GB for 2,000 points,
10 s and 1.7 GB for 5,000); several independent variograms (``n_variograms``) can be
averaged instead of drawing more points at once.

Models are scikit-gstat's (:mod:`skgstat.models`: spherical, exponential, gaussian,
cubic); sums of them are fitted with :func:`scipy.optimize.curve_fit`. Ranges are
scikit-gstat's *effective* ranges (where the model reaches the sill, or 95 % of it for
the exponential and gaussian models); sills are partial sills (no nugget).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import dask.array as da
import numpy as np
import pandas as pd
import xarray as xr
from affine import Affine

from xdem.errors import CRSError, InputError, NotEnoughDataError, XdemError
from xdem.io.grid import block_xy, get_resolution, get_transform
from xdem.sampling import DEFAULT_SEED, sample_valid
from xdem.spatialstats.binned import _align

__all__ = [
    "sample_empirical_variogram",
    "fit_sum_model_variogram",
    "model_function",
    "MODELS",
    "ESTIMATORS",
    "MIN_VARIOGRAM_POINTS",
    "MAX_VARIOGRAM_POINTS",
]

#: Fewest valid pixels (per variogram) for an empirical variogram.
MIN_VARIOGRAM_POINTS = 50
#: Most points per variogram (scikit-gstat holds all n(n-1)/2 pairs in memory).
MAX_VARIOGRAM_POINTS = 10_000
#: Semivariance estimators of scikit-gstat accepted by :func:`sample_empirical_variogram`.
ESTIMATORS = ("matheron", "cressie", "dowd", "genton")
#: Model names (and short aliases) accepted by :func:`fit_sum_model_variogram`.
MODELS = {"spherical": "spherical", "sph": "spherical", "exponential": "exponential", "exp": "exponential",
          "gaussian": "gaussian", "gau": "gaussian", "cubic": "cubic", "cub": "cubic"}


def _skgstat_model(name: str) -> Callable:
    from skgstat import models

    return getattr(models, name)


def canonical_model(name: str) -> str:
    """Full model name for a name or alias (case-insensitive), else :class:`InputError`."""
    key = str(name).strip().lower()
    if key not in MODELS:
        raise InputError(f"unknown variogram model {name!r}; choose among {sorted(set(MODELS.values()))}")
    return MODELS[key]


# ------------------------------------------------------------------ empirical
def _grid_of(dh: Any, gsd: float | None = None) -> tuple[Affine, tuple[float, float]]:
    """Transform and (dx, dy) of dh; plain arrays are in pixels, or of side ``gsd`` (CRS units) when given."""
    ok = isinstance(gsd, (int, float, np.integer, np.floating)) and not isinstance(gsd, bool)
    if gsd is not None and (not ok or not np.isfinite(gsd) or gsd <= 0):
        raise InputError(f"gsd (the ground sampling distance) must be a positive distance, got {gsd!r}")
    if isinstance(dh, xr.DataArray) and "x" in dh.coords and "y" in dh.coords:
        crs = dh.rio.crs
        if crs is not None and crs.is_geographic:
            raise CRSError(
                f"a variogram needs a projected CRS (distances in metres), but dh is in geographic {crs.to_string()}; "
                "reproject it first, e.g. dh.rio.reproject(dh.rio.estimate_utm_crs())"
            )
        res = get_resolution(dh)
        if gsd is not None and not np.isclose(float(gsd), res[0]):
            raise InputError(
                f"gsd={gsd} differs from the pixel size {res[0]} of the georeferenced values; leave gsd out "
                "(it is only for plain arrays)"
            )
        return get_transform(dh), res
    if gsd is not None:
        return Affine(float(gsd), 0.0, 0.0, 0.0, -float(gsd), 0.0), (float(gsd), float(gsd))
    return Affine.identity(), (1.0, 1.0)


def _lag_edges(lags: Any, n_lags: int, max_lag: float, res: float) -> np.ndarray:
    """Upper edges of the lag classes (scikit-gstat convention: class i is [e_{i-1}, e_i))."""
    if isinstance(lags, str):
        if int(n_lags) != n_lags or n_lags < 2:
            raise InputError(f"n_lags must be an integer >= 2, got {n_lags!r}")
        if lags == "log":
            if max_lag <= 2 * res:
                raise InputError(f"max_lag ({max_lag}) must exceed two pixels ({2 * res}); give a larger max_lag")
            return np.geomspace(2 * res, max_lag, int(n_lags))
        if lags == "even":
            return np.linspace(max_lag / n_lags, max_lag, int(n_lags))
        raise InputError(f"lags must be 'log', 'even' or an array of increasing upper edges, got {lags!r}")
    e = np.asarray(lags, dtype=np.float64)
    if e.ndim != 1 or e.size < 2 or not np.all(np.diff(e) > 0) or e[0] <= 0:
        raise InputError(f"lags must hold at least two positive, strictly increasing upper edges, got {lags!r}")
    return e


def _one_variogram(coords: np.ndarray, values: np.ndarray, edges: np.ndarray, estimator: str) -> np.ndarray:
    """``(n_lags, 3)``: experimental semivariance, pair count, mean pair distance per lag class."""
    import warnings

    import skgstat

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        v = skgstat.Variogram(
            coords, values, estimator=estimator, bin_func=edges, maxlag=float(edges[-1]), fit_method=None,
        )
        exp = np.asarray(v.experimental, dtype=np.float64)
        count = np.asarray(v.bin_count, dtype=np.float64)
        groups = np.asarray(v.lag_groups())
        ok = groups >= 0
        dsum = np.bincount(groups[ok], weights=np.asarray(v.distance)[ok], minlength=edges.size)[: edges.size]
    exp = np.where(count > 0, exp, np.nan)
    lag = np.divide(dsum, count, out=np.full(edges.size, np.nan), where=count > 0)
    return np.stack([exp, count, lag], axis=1)


def sample_empirical_variogram(
    values: np.ndarray | da.Array | xr.DataArray,
    gsd: float | None = None,
    *,
    subsample: float | int = 2000,
    n_variograms: int = 1,
    random_state: int | None = None,
    n_lags: int = 20,
    max_lag: float | None = None,
    lags: str | Sequence[float] = "log",
    estimator: str = "matheron",
) -> pd.DataFrame:
    """Empirical variogram of values (e.g. dh) on a reproducible subsample (scikit-gstat).

    The subsample is drawn with :func:`xdem.sampling.sample_valid`: it depends only on the
    seed and the valid mask, never on the chunking or on numpy vs dask input. Pixel-centre
    coordinates come from the geotransform of ``values`` (an :class:`xarray.DataArray`), or
    are in pixels (of side ``gsd`` when given) for plain arrays. ``values`` and ``gsd`` are
    upstream's names and positions.

    Parameters
    ----------
    values
        2-D elevation differences (numpy, dask or xarray; projected CRS).
    gsd
        Ground sampling distance: the pixel size (CRS units) of a plain array, whose
        lags are then in those units. Georeferenced values carry their own pixel size
        (a different ``gsd`` is refused).
    subsample
        Valid pixels per variogram: a count (``> 1``) or a fraction of the valid pixels
        (``<= 1``); at most :data:`MAX_VARIOGRAM_POINTS`.
    n_variograms
        Independent variograms, each on its own ``subsample`` points (one draw of
        ``n_variograms * subsample`` points split by a seeded permutation), averaged.
    random_state
        Seed; ``None`` uses :data:`xdem.sampling.DEFAULT_SEED` (reproducible).
    n_lags
        Number of lag classes when ``lags`` is ``"log"`` or ``"even"``.
    max_lag
        Largest lag (CRS units); default half the diagonal of the raster.
    lags
        ``"log"``: upper edges spaced geometrically from 2 pixels to ``max_lag`` (fine
        classes at short lags, where the ranges of DEM errors usually are); ``"even"``:
        equal widths; or an array of upper edges.
    estimator
        scikit-gstat semivariance estimator: ``"matheron"`` (classical), ``"cressie"``,
        ``"dowd"`` or ``"genton"`` (robust to outliers).

    Returns
    -------
    pandas.DataFrame
        One row per lag class: ``bins`` (upper edge), ``lag`` (mean distance of its
        pairs), ``exp`` (semivariance, NaN when empty), ``count`` (pairs, summed over
        the variograms), ``err_exp`` (standard deviation over the variograms, NaN for
        one). ``attrs`` holds ``n_points``, ``n_variograms``, ``estimator``.

    Raises
    ------
    xdem.errors.NotEnoughDataError
        Fewer than :data:`MIN_VARIOGRAM_POINTS` valid pixels per variogram.

    Examples
    --------
    >>> import numpy as np
    >>> dh = np.random.default_rng(0).normal(size=(60, 60))
    >>> ev = sample_empirical_variogram(dh, subsample=500, n_lags=8)
    >>> list(ev.columns)
    ['bins', 'lag', 'exp', 'count', 'err_exp']
    """
    est = str(estimator).lower()
    if est not in ESTIMATORS:
        raise InputError(f"unknown estimator {estimator!r}; choose among {ESTIMATORS}")
    if isinstance(n_variograms, bool) or int(n_variograms) != n_variograms or n_variograms < 1:
        raise InputError(f"n_variograms must be a positive integer, got {n_variograms!r}")
    k = int(n_variograms)
    # np.isscalar is a TypeGuard for any scalar (str, complex, ...): tested apart, subsample keeps its declared type
    scalar = np.isscalar(subsample)
    if isinstance(subsample, bool) or not scalar or subsample <= 0:
        raise InputError(f"subsample must be a count > 1 or a fraction in (0, 1], got {subsample!r}")
    if subsample > MAX_VARIOGRAM_POINTS:
        raise InputError(
            f"subsample={subsample} exceeds {MAX_VARIOGRAM_POINTS} points per variogram (memory grows as n^2); "
            "average several variograms with n_variograms instead"
        )
    transform, (dx, dy) = _grid_of(values, gsd)
    arr, _ = _align(values, {})
    ny, nx = arr.shape
    if max_lag is None:
        max_lag = 0.5 * float(np.hypot(nx * dx, ny * dy))
    elif not np.isfinite(max_lag) or max_lag <= 0:
        raise InputError(f"max_lag must be a positive distance, got {max_lag!r}")
    edges = _lag_edges(lags, n_lags, float(max_lag), min(dx, dy))
    total = subsample * k if subsample > 1 else min(1.0, float(subsample) * k)
    s = sample_valid(
        da.isfinite(arr), {"dh": arr}, subsample=total, random_state=random_state,
        min_count=MIN_VARIOGRAM_POINTS * k, what=f"the empirical variogram ({k} x {MIN_VARIOGRAM_POINTS} points)",
    )
    n = len(s["dh"])
    per_run = n // k
    if per_run < MIN_VARIOGRAM_POINTS:
        raise NotEnoughDataError(
            f"the empirical variogram needs at least {MIN_VARIOGRAM_POINTS} points per variogram but the subsample "
            f"gives {per_run}; increase subsample or lower n_variograms"
        )
    if per_run > MAX_VARIOGRAM_POINTS:
        raise InputError(
            f"subsample gives {per_run} points per variogram, over {MAX_VARIOGRAM_POINTS} (memory grows as n^2); "
            "give a count instead of a fraction"
        )
    xs, ys = block_xy(transform, 0, 0, (ny, nx))
    coords = np.column_stack([xs[s["col"]], ys[s["row"]]])
    seed = DEFAULT_SEED if random_state is None else int(random_state)
    perm = np.random.default_rng(seed).permutation(n)[: per_run * k]
    runs = np.stack([_one_variogram(coords[perm[i::k]], s["dh"][perm[i::k]], edges, est) for i in range(k)])
    count = runs[:, :, 1].sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        exp = np.where(count > 0, np.nansum(runs[:, :, 0] * runs[:, :, 1], axis=0) / count, np.nan)
        lag = np.where(count > 0, np.nansum(runs[:, :, 2] * runs[:, :, 1], axis=0) / count, np.nan)
        err = np.nanstd(runs[:, :, 0], axis=0, ddof=1) if k > 1 else np.full(edges.size, np.nan)
    df = pd.DataFrame({"bins": edges, "lag": lag, "exp": exp, "count": count.astype(np.int64), "err_exp": err})
    df.attrs.update(n_points=per_run, n_variograms=k, estimator=est)
    return df


# ------------------------------------------------------------------------ fit
#: A fitted sum of variogram models: a DataFrame with columns ``model, range, sill`` (as
#: :func:`fit_sum_model_variogram` returns it) or a list of ``(model, range, sill)``.
VariogramParams: TypeAlias = "pd.DataFrame | Sequence[tuple[str, float, float]]"


def model_function(params: VariogramParams) -> Callable[[float | np.ndarray], np.ndarray]:
    """Vectorised variogram ``h -> sum of the models in params`` (skgstat.models).

    ``params``: a DataFrame with columns ``model, range, sill`` (as returned by
    :func:`fit_sum_model_variogram`) or a list of ``(model, range, sill)``.
    """
    comps = _components(params)
    fns = [(_skgstat_model(m), r, s) for m, r, s in comps]

    def variogram(h: float | np.ndarray) -> np.ndarray:
        h = np.asarray(h, dtype=np.float64)
        flat = np.atleast_1d(h).ravel()
        out = np.zeros(flat.shape)
        for fn, r, s in fns:
            out += np.asarray(fn(flat, r, s), dtype=np.float64)
        return out.reshape(h.shape) if h.ndim else out[0]

    variogram.params = comps  # type: ignore[attr-defined]
    return variogram


def _components(params: Any) -> list[tuple[str, float, float]]:
    if isinstance(params, pd.DataFrame):
        sill = "sill" if "sill" in params.columns else "psill"  # upstream names the partial sills psill
        missing = {"model", "range", sill} - set(params.columns)
        if missing:
            raise InputError(f"variogram params need columns model, range, sill (or psill); missing {sorted(missing)}")
        rows = list(zip(params["model"], params["range"], params[sill]))
    else:
        rows = [tuple(p) for p in params]
    if not rows:
        raise InputError("variogram params are empty; fit a model with fit_sum_model_variogram first")
    comps = []
    for row in rows:
        if len(row) != 3:
            raise InputError(f"each variogram component must be (model, range, sill), got {row!r}")
        m, r, s = canonical_model(row[0]), float(row[1]), float(row[2])
        if not (np.isfinite(r) and r > 0 and np.isfinite(s) and s >= 0):
            raise InputError(f"component {row!r} needs a positive finite range and a non-negative sill")
        comps.append((m, r, s))
    return comps


def fit_sum_model_variogram(
    list_models: str | Sequence[str],
    empirical_variogram: pd.DataFrame,
    *,
    weights: str | None = None,
    max_range: float | None = None,
) -> tuple[Callable[[float | np.ndarray], np.ndarray], pd.DataFrame]:
    """Fit a sum of variogram models to an empirical variogram.

    ``gamma(h) = sum_k model_k(h; range_k, sill_k)`` with scikit-gstat's model functions,
    fitted by bounded least squares (:func:`scipy.optimize.curve_fit`, ``trf``) from
    several starting ranges (spread geometrically over the lags); the best fit is kept.

    Parameters
    ----------
    list_models
        One name or a list, e.g. ``["spherical", "spherical"]`` for two scales; names or
        aliases of :data:`MODELS`.
    empirical_variogram
        Output of :func:`sample_empirical_variogram` (uses ``lag``, else ``bins``, with
        ``exp`` and ``count``).
    weights
        ``None`` (default): every lag class weighs the same (with the default logarithmic
        lag classes, short and long lags then count alike); ``"count"``: each class weighs
        as the square root of its pair count, which favours the long lags (most pairs)
        and can fit a trend there instead of the short-range structure.
    max_range
        Upper bound of the ranges (default: 10 times the largest lag).

    Returns
    -------
    model : callable
        Vectorised ``h -> gamma(h)``.
    params : pandas.DataFrame
        ``model``, ``range`` (effective range, CRS units), ``sill`` (partial sill), one row
        per component sorted by range; ``attrs["rss"]`` is the weighted residual sum.

    Raises
    ------
    xdem.errors.NotEnoughDataError
        Fewer non-empty lag classes than twice the number of models plus one.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from skgstat.models import spherical
    >>> h = np.arange(1.0, 40.0)
    >>> ev = pd.DataFrame({"bins": h, "exp": spherical(h, 12.0, 2.0), "count": 100})
    >>> model, params = fit_sum_model_variogram("spherical", ev)
    >>> round(float(params["range"][0]), 3), round(float(params["sill"][0]), 3)
    (12.0, 2.0)
    """
    from scipy.optimize import curve_fit

    empirical = empirical_variogram

    names = [canonical_model(m) for m in ([list_models] if isinstance(list_models, str) else list_models)]
    if not names:
        raise InputError("list_models is empty; give e.g. ['spherical'] or ['spherical', 'spherical']")
    if not isinstance(empirical, pd.DataFrame) or not {"exp", "count"} <= set(empirical.columns):
        raise InputError("empirical_variogram must be the DataFrame of sample_empirical_variogram (columns bins/lag, exp, count)")
    x = np.asarray(empirical["lag"] if "lag" in empirical else empirical["bins"], dtype=np.float64)
    if "lag" in empirical:
        x = np.where(np.isfinite(x), x, np.asarray(empirical["bins"], dtype=np.float64))
    y = np.asarray(empirical["exp"], dtype=np.float64)
    cnt = np.asarray(empirical["count"], dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y) & (cnt > 0) & (x > 0)
    n_par = 2 * len(names)
    if ok.sum() < n_par + 1:
        raise NotEnoughDataError(
            f"fitting {len(names)} model(s) needs at least {n_par + 1} non-empty lag classes, got {int(ok.sum())}; "
            "increase subsample, n_lags or max_lag"
        )
    x, y, cnt = x[ok], y[ok], cnt[ok]
    if weights == "count":
        sigma = 1 / np.sqrt(cnt)
    elif weights is None:
        sigma = np.ones_like(y)
    else:
        raise InputError(f"weights must be 'count' or None, got {weights!r}")
    fns = [_skgstat_model(m) for m in names]

    def f(h: np.ndarray, *p: float) -> np.ndarray:
        out = np.zeros(h.shape)
        for i, fn in enumerate(fns):
            out += np.asarray(fn(h, p[2 * i], p[2 * i + 1]), dtype=np.float64)
        return out

    top = float(max_range) if max_range is not None else 10 * float(x.max())
    ymax = max(float(y.max()), np.finfo(float).tiny)
    lower = [float(x.min()) / 100, 0.0] * len(names)
    upper = [top, 2 * ymax] * len(names)
    starts = np.geomspace(max(float(x.min()), top / 1e6), min(float(x.max()), top), 5)
    best, best_rss = None, np.inf
    for ranges in itertools.combinations(starts, len(names)):
        p0 = [v for r in ranges for v in (r, ymax / len(names))]
        try:
            popt, _ = curve_fit(f, x, y, p0=p0, sigma=sigma, bounds=(lower, upper), method="trf", maxfev=2000)
        except (RuntimeError, ValueError):
            continue
        rss = float(np.sum(((f(x, *popt) - y) / sigma) ** 2))
        if rss < best_rss:
            best, best_rss = popt, rss
    if best is None:
        raise XdemError(f"the variogram fit of {names} did not converge; try other models or more lag classes")
    comps = [(names[i], float(best[2 * i]), float(best[2 * i + 1])) for i in range(len(names))]
    comps.sort(key=lambda c: c[1])
    params = pd.DataFrame(comps, columns=["model", "range", "sill"])
    params.attrs["rss"] = best_rss
    return model_function(comps), params
