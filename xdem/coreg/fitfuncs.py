"""Named fit functions of bias corrections, and the robust solvers behind them.

A bias correction models ``dh = tba - ref`` as a function of 1 to 3 variables. The
functions are stored in JSON by name, so only the functions of :data:`FIT_FUNCTIONS` can be
saved; a user callable works for fitting and applying but cannot be serialised.

Named functions act on *normalised* variables ``u = (v - centre) / scale`` (the bias
correction stores ``centre`` and ``scale``), so that their parameters are well conditioned:

``"polynomial_1"``, ``"polynomial_2"``, ``"polynomial_3"``
    Polynomial of total degree ``<= n`` in the variables: every ``u1^i1 u2^i2 u3^i3`` with
    ``i1 + i2 + i3 <= n``, ordered by degree (see :func:`poly_terms`). Linear in the
    parameters: solved by linear least squares, then refined with a robust loss.
``"linear"``
    Same as ``"polynomial_1"``: ``c + sum_k b_k u_k``.
``"norder_polynomial"``
    Upstream xdem 0.2.3's default of ``BiasCorr``/``TerrainBias``: a polynomial of ONE
    variable whose order is chosen automatically, as upstream's
    ``robust_norder_polynomial_fit``: every order 1 to 6 is fitted (robustly, as above), its
    cost is upstream's soft loss ``sum(2 * 0.5^2 * (sqrt(1 + (r / 0.5)^2) - 1))`` of the
    residuals ``r``, and the lowest order whose cost is within 20 % of the smallest (among
    orders up to the best one) is kept. Parameters: ``[c_0, c_1, ..., c_order]`` of
    ``sum_k c_k u^k`` (their number gives the order).
``"sumsin"``, ``"sumsin_2"``, ``"sumsin_3"``
    Sum of 1, 2 or 3 sinusoids of one variable:
    ``c + sum_k (a_k sin(2 pi u / L_k) + b_k cos(2 pi u / L_k))``, parameters
    ``[c, a_1, b_1, L_1, a_2, b_2, L_2, ...]`` (amplitude ``hypot(a_k, b_k)``, wavelength
    ``L_k`` in normalised units). Initialised deterministically by a scan of wavelengths on
    binned medians (a least-squares periodogram, one frequency at a time), then refined by
    :func:`scipy.optimize.least_squares` with a robust loss from the best few starts.
``"nfreq_sumsin"``
    Upstream xdem 0.2.3's default of ``DirectionalBias``: the sum of 1, 2 or 3 sinusoids
    (as above) whose number is chosen automatically, as upstream's
    ``robust_nfreq_sumsin_fit``: the one of lowest number whose soft-loss cost is within 20 %
    of the smallest (:func:`choose_order`), among the fits within upstream's bounds (here twice
    them: wavelengths up to twice the extent, amplitudes up to twice the range of ``dh``). The
    number of parameters gives the number of sinusoids.

Examples
--------
>>> import numpy as np
>>> u = np.linspace(-1, 1, 200)[None, :]
>>> p = fit_function("polynomial_2").fit(u, 1 + 2 * u[0] - u[0] ** 2)
>>> np.round(p, 6).tolist()
[1.0, 2.0, -1.0]
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from xdem.errors import ConvergenceError, InputError
from xdem.kernels.robust import group_by, nmad, run_medians  # noqa: F401 (nmad: imported from here by other modules)

__all__ = [
    "FitFunction", "FIT_FUNCTIONS", "fit_function", "poly_terms", "poly_design", "nmad", "robust_refine",
    "robust_refine_linear", "single_thread_blas", "choose_order",
]


def single_thread_blas() -> contextlib.AbstractContextManager[object]:
    """Context limiting BLAS to one thread: the small dense solves here are faster so, and
    do not fight dask's worker threads for the cores (``threadpoolctl`` when installed)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - optional
        return contextlib.nullcontext()
    limits: contextlib.AbstractContextManager[object] = threadpool_limits(limits=1, user_api="blas")
    return limits


def poly_terms(n_vars: int, order: int) -> list[tuple[int, ...]]:
    """Exponents of every monomial of total degree ``<= order`` in ``n_vars`` variables.

    Ordered by total degree, then by decreasing exponent of the first variable:
    for two variables and order 2, ``(0,0), (1,0), (0,1), (2,0), (1,1), (0,2)`` - i.e.
    ``1, x, y, x^2, x y, y^2``: ``(order + 1)(order + 2) / 2`` terms.

    Examples
    --------
    >>> poly_terms(2, 1)
    [(0, 0), (1, 0), (0, 1)]
    """
    if order < 0:
        raise InputError(f"polynomial order must be >= 0, got {order}")
    out = []
    for degree in range(order + 1):
        combos = [c for c in itertools.product(range(degree + 1), repeat=n_vars) if sum(c) == degree]
        out += sorted(combos, reverse=True)
    return out


def poly_design(us: np.ndarray, terms: Sequence[Sequence[int]]) -> np.ndarray:
    """Design matrix ``(n, len(terms))`` of monomials of the rows of ``us`` ``(n_vars, n)``."""
    us = np.atleast_2d(np.asarray(us, dtype=np.float64))
    cols = []
    for t in terms:
        col = np.ones(us.shape[1])
        for k, e in enumerate(t):
            if e:
                col = col * us[k] ** e
        cols.append(col)
    return np.column_stack(cols) if cols else np.empty((us.shape[1], 0))


def robust_refine(
    residual: Callable[[np.ndarray], np.ndarray],
    p0: np.ndarray,
    *,
    jac: Callable[[np.ndarray], np.ndarray] | str = "2-point",
    loss: str = "soft_l1",
    max_nfev: int | None = None,
) -> tuple[np.ndarray, float]:
    """Refine ``p0`` with :func:`scipy.optimize.least_squares` and a robust loss.

    The loss scale is the NMAD of the residuals at ``p0`` (residuals much larger than it
    weigh less). Returns the parameters and the final cost. Deterministic.
    """
    r0 = residual(p0)
    scale = max(nmad(r0), 1e-12)
    with single_thread_blas():
        res = least_squares(
            residual, p0, jac=jac, loss=loss, f_scale=scale, method="trf", x_scale="jac", max_nfev=max_nfev
        )
    return np.asarray(res.x, dtype=np.float64), float(res.cost)


def robust_refine_linear(design: np.ndarray, y: np.ndarray, p0: np.ndarray) -> tuple[np.ndarray, float]:
    """:func:`robust_refine` of the linear residual ``design @ p - y``, with its exact Jacobian
    (``design``) instead of finite differences: one evaluation of the residual per step instead
    of one more per parameter. The same optimum; the fitted values move by round-off only
    (about 1e-10 for nine terms on 500,000 points with a unit spread).

    Examples
    --------
    >>> u = np.linspace(-1.0, 1.0, 101)
    >>> design = poly_design(u, [(0,), (1,)])
    >>> y = 2.0 + 3.0 * u + 0.1 * np.sin(40.0 * u)
    >>> p0 = np.linalg.lstsq(design, y, rcond=None)[0]
    >>> p, _ = robust_refine_linear(design, y, p0)
    >>> q, _ = robust_refine(lambda c: design @ c - y, p0)  # finite differences
    >>> bool(np.abs(p - q).max() < 1e-9), np.round(p, 1).tolist()
    (True, [2.0, 3.0])
    """
    # a copy each time: least_squares scales the Jacobian in place for a robust loss
    return robust_refine(lambda p: design @ p - y, p0, jac=lambda p: design.copy())


@dataclass(frozen=True)
class FitFunction:
    """A named model ``f(u, params)`` of 1 to 3 normalised variables ``u`` ``(n_vars, n)``.

    Attributes
    ----------
    name
        Registry name (stored in JSON).
    n_vars
        Number of variables it accepts (``None``: any number from 1 to 3).
    evaluate
        ``evaluate(u, params) -> (n,)``.
    fit
        ``fit(u, y) -> params``: deterministic, robust solver.
    """

    name: str
    n_vars: int | None
    evaluate: Callable[[np.ndarray, np.ndarray], np.ndarray]
    fit: Callable[[np.ndarray, np.ndarray], np.ndarray]


# --- polynomials ---------------------------------------------------------------------------
def _poly_evaluate(order: int) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def evaluate(u: np.ndarray, params: np.ndarray) -> np.ndarray:
        u = np.atleast_2d(u)
        return poly_design(u, poly_terms(u.shape[0], order)) @ np.asarray(params, dtype=np.float64)

    return evaluate


def _poly_fit(order: int) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def fit(u: np.ndarray, y: np.ndarray) -> np.ndarray:
        u = np.atleast_2d(u)
        design = poly_design(u, poly_terms(u.shape[0], order))
        p0, *_ = np.linalg.lstsq(design, y, rcond=None)
        p, _ = robust_refine(lambda p: design @ p - y, p0)
        return p

    return fit


# --- sums of sinusoids ------------------------------------------------------------------------
def _sumsin_columns(x: np.ndarray, wavelengths: np.ndarray) -> np.ndarray:
    cols = [np.ones_like(x)]
    for lam in wavelengths:
        w = 2.0 * np.pi / lam
        cols += [np.sin(w * x), np.cos(w * x)]
    return np.column_stack(cols)


def _sumsin_evaluate(u: np.ndarray, params: np.ndarray) -> np.ndarray:
    x = np.atleast_2d(u)[0]
    p = np.asarray(params, dtype=np.float64)
    out = np.full(x.shape, p[0])
    for k in range((len(p) - 1) // 3):
        a, b, lam = p[1 + 3 * k : 4 + 3 * k]
        w = 2.0 * np.pi / lam
        out += a * np.sin(w * x) + b * np.cos(w * x)
    return out


def _sumsin_jacobian(x: np.ndarray, params: np.ndarray) -> np.ndarray:
    p = np.asarray(params, dtype=np.float64)
    cols = [np.ones_like(x)]
    for k in range((len(p) - 1) // 3):
        a, b, lam = p[1 + 3 * k : 4 + 3 * k]
        w = 2.0 * np.pi / lam
        s, c = np.sin(w * x), np.cos(w * x)
        cols += [s, c, (a * c - b * s) * x * (-w / lam)]
    return np.column_stack(cols)


def _binned_medians(x: np.ndarray, y: np.ndarray, n_bins: int) -> tuple[np.ndarray, np.ndarray, float]:
    lo, hi = float(x.min()), float(x.max())
    width = (hi - lo) / n_bins if hi > lo else 1.0
    idx = np.minimum(((x - lo) / width).astype(np.int64), n_bins - 1)
    g = group_by(idx)
    return run_medians(x[g.order], g.starts, g.ends), run_medians(y[g.order], g.starts, g.ends), width


def _rss(x: np.ndarray, y: np.ndarray, wavelengths: np.ndarray) -> float:
    design = _sumsin_columns(x, wavelengths)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    r = design @ coef - y
    return float(r @ r)


def _linear_params(x: np.ndarray, y: np.ndarray, wavelengths: np.ndarray) -> np.ndarray:
    design = _sumsin_columns(x, wavelengths)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    p = [coef[0]]
    for k, lam in enumerate(wavelengths):
        p += [coef[1 + 2 * k], coef[2 + 2 * k], lam]
    return np.array(p, dtype=np.float64)


_FEW_POINTS = 1024  # up to this many points the scan of wavelengths runs on the points, not on binned medians


def _sumsin_fit(nb_freq: int) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def fit(u: np.ndarray, y: np.ndarray) -> np.ndarray:
        x = np.atleast_2d(u)[0].astype(np.float64)
        y = np.asarray(y, dtype=np.float64)
        extent = float(x.max() - x.min()) or 1.0
        if len(x) <= _FEW_POINTS:  # e.g. bin medians (bin_and_fit): scan the points themselves
            order = np.argsort(x, kind="stable")
            bx, by, width = x[order], y[order], extent / max(len(x) - 1, 1)
        else:
            bx, by, width = _binned_medians(x, y, int(np.clip(len(x) // 20, 16, 1024)))
        # Wavelengths from 4 bins (well above the binning's Nyquist limit) to twice the extent.
        grid = np.geomspace(4.0 * width, 2.0 * extent, 600)
        starts: list[np.ndarray] = []
        chosen: list[float] = []
        for k in range(nb_freq):
            rss = np.array([_rss(bx, by, np.array(chosen + [lam])) for lam in grid])
            # the few best local minima of the periodogram, as starts for the last frequency
            last = len(grid) - 1
            minima = [i for i in range(len(grid)) if rss[i] <= rss[max(i - 1, 0)] and rss[i] <= rss[min(i + 1, last)]]
            minima = sorted(minima, key=lambda i: rss[i])[:3]
            if k == nb_freq - 1:
                starts = [np.array(chosen + [grid[i]]) for i in minima]
            chosen.append(float(grid[minima[0]]))
        best, best_cost = None, np.inf
        for lams in starts:  # refine each start on the binned medians (fast, robust)
            p0 = _linear_params(bx, by, lams)
            p1, cost = robust_refine(
                lambda p: _sumsin_evaluate(bx[None, :], p) - by, p0, jac=lambda p: _sumsin_jacobian(bx, p)
            )
            if cost < best_cost:
                best, best_cost = p1, cost
        if best is None:  # no start reached a finite cost (every start is tried above)
            raise ConvergenceError(f"the {nb_freq}-frequency sum of sines fit found no start with a finite cost")
        # then the best one on the points themselves (no attenuation by the bin width)
        best, _ = robust_refine(
            lambda p: _sumsin_evaluate(x[None, :], p) - y, best, jac=lambda p: _sumsin_jacobian(x, p), max_nfev=30
        )
        # canonical form: positive wavelengths, sorted from the largest amplitude
        p = np.asarray(best, dtype=np.float64)
        comps = [p[1 + 3 * k : 4 + 3 * k].copy() for k in range(nb_freq)]
        for c in comps:
            if c[2] < 0:  # sin(-w x) = -sin(w x), cos(-w x) = cos(w x)
                c[0], c[2] = -c[0], -c[2]
        comps.sort(key=lambda c: -np.hypot(c[0], c[1]))
        return np.concatenate([[p[0]], *comps])

    return fit


# --- a 1-D polynomial of automatically chosen order (upstream's "norder_polynomial") ----------
NORDER_MAX_ORDER = 6
NORDER_MARGIN = 20.0  # percent


def _soft_loss(r: np.ndarray, scale: float = 0.5) -> float:
    """Upstream's ``xdem.fit.soft_loss`` of residuals ``r`` (metres)."""
    return float(np.sum(scale**2 * 2.0 * (np.sqrt(1.0 + (r / scale) ** 2) - 1.0)))


def choose_order(costs: Sequence[float], margin: float = NORDER_MARGIN) -> int:
    """Index of the lowest order whose cost is within ``margin`` percent of the smallest, among
    the orders up to the best one (upstream's ``_choice_best_order``; a near-zero smallest cost
    counts as zero).

    Examples
    --------
    >>> choose_order([10.0, 1.1, 1.0, 0.95])
    1
    """
    c = np.asarray(costs, dtype=np.float64)
    best = int(np.argmin(c))
    finite = c[np.isfinite(c)]
    floor = max(float(c[best]), 1e-12 * float(np.max(finite, initial=0.0)), 1e-300)
    within = (c - c[best]) / floor < margin / 100.0
    return next(i for i in range(best + 1) if within[i])


def _norder_evaluate(u: np.ndarray, params: np.ndarray) -> np.ndarray:
    x = np.atleast_2d(u)[0]
    return np.asarray(np.polynomial.polynomial.polyval(x, np.asarray(params, dtype=np.float64)))


def _norder_fit(u: np.ndarray, y: np.ndarray) -> np.ndarray:
    x = np.atleast_2d(u)[0].astype(np.float64)
    fits = [_poly_fit(order)(x[None, :], y) for order in range(1, NORDER_MAX_ORDER + 1)]
    costs = [_soft_loss(y - _norder_evaluate(x, p)) for p in fits]
    return fits[choose_order(costs)]


def _nfreq_sumsin_fit(u: np.ndarray, y: np.ndarray) -> np.ndarray:
    x = np.atleast_2d(u)[0]
    fits = [_sumsin_fit(k)(u, y) for k in (1, 2, 3)]
    costs = [_soft_loss(y - _sumsin_evaluate(x[None, :], p)) for p in fits]
    extent, spread = float(np.ptp(x)), float(np.ptp(y))
    for k, p in enumerate(fits[1:], start=1):
        lams = np.sort(np.abs(p[3::3]))
        amps = np.hypot(p[1::3], p[2::3])
        # upstream's bounds (wavelength <= extent, amplitude <= range of y; 2x here), and two
        # sinusoids of one wavelength: degenerate forms of fewer sinusoids
        if lams[-1] > 2.0 * extent or amps.max() > 2.0 * spread or np.any(np.diff(lams) <= 1e-3 * lams[1:]):
            costs[k] = np.inf
    return fits[choose_order(costs)]


#: Registry of named fit functions (the names stored in JSON).
FIT_FUNCTIONS: dict[str, FitFunction] = {}
for _n in (1, 2, 3):
    FIT_FUNCTIONS[f"polynomial_{_n}"] = FitFunction(f"polynomial_{_n}", None, _poly_evaluate(_n), _poly_fit(_n))
FIT_FUNCTIONS["linear"] = FitFunction("linear", None, _poly_evaluate(1), _poly_fit(1))
FIT_FUNCTIONS["norder_polynomial"] = FitFunction("norder_polynomial", 1, _norder_evaluate, _norder_fit)
FIT_FUNCTIONS["sumsin"] = FitFunction("sumsin", 1, _sumsin_evaluate, _sumsin_fit(1))
FIT_FUNCTIONS["sumsin_2"] = FitFunction("sumsin_2", 1, _sumsin_evaluate, _sumsin_fit(2))
FIT_FUNCTIONS["sumsin_3"] = FitFunction("sumsin_3", 1, _sumsin_evaluate, _sumsin_fit(3))
FIT_FUNCTIONS["nfreq_sumsin"] = FitFunction("nfreq_sumsin", 1, _sumsin_evaluate, _nfreq_sumsin_fit)


def fit_function(name: str) -> FitFunction:
    """The registered :class:`FitFunction` called ``name``; a clear error otherwise."""
    if name not in FIT_FUNCTIONS:
        raise InputError(
            f"unknown fit_func {name!r}; use one of {', '.join(FIT_FUNCTIONS)} or a callable f(x, *params)"
        )
    return FIT_FUNCTIONS[name]
