"""Surface fits and the curvatures of Minár et al. (2020), as NumPy kernels on one padded block.

These are the kernels of GlacioHack/xdem 0.2.3's terrain science (its default fit is
Florinsky's), run chunk by chunk by :mod:`xdem.terrain.upstream_engine`. Every kernel takes a
2-D ``block`` padded by the fit's depth (1 for a 3 x 3 fit, 2 for Florinsky's 5 x 5 fit) and
returns arrays of the block's interior shape, float64, with the conventions of
:mod:`xdem.terrain.kernels`: ``x`` towards the east, ``y`` towards the **north**, ``res_x`` and
``res_y`` the (signed) pixel sizes, NaN wherever the fit's window holds a NaN.

Fits (``fit``):

- ``"florinsky"`` (Florinsky 2009): the least-squares third-order polynomial on the 5 x 5
  window; exact (to rounding) for any cubic surface. The weights are derived here, on first use,
  from the normal equations (they equal the integer kernels of Florinsky's paper and of upstream
  ``xdem/terrain/surfit.py``).
- ``"zevenbergthorne"`` (Zevenbergen & Thorne 1987): central differences on the 3 x 3 window;
  exact for any quadratic surface.
- ``"horn"`` (Horn 1981): first derivatives only (no curvatures).

:func:`derivatives` gives ``(z_x, z_y, z_xx, z_yy, z_xy)``, the partial derivatives of the fit
at the centre cell (``z_xx`` the true second derivative). :func:`minar_curvature` turns them
into upstream's curvatures, in 100/m, positive where the surface is convex (hill tops, ridges).

Examples
--------
>>> import numpy as np
>>> y, x = np.mgrid[2:-3:-1, -2:3].astype(float)  # rows go south: y decreases down the rows
>>> zx, zy, zxx, zyy, zxy = derivatives(x**3 + x * y, res_x=1.0, res_y=1.0, fit="florinsky")
>>> [round(float(v[0, 0]), 9) + 0.0 for v in (zx, zy, zxx, zyy, zxy)]  # at (0, 0): 3x^2 + y, x, 6x, 0, 1
[0.0, 0.0, 0.0, 0.0, 1.0]
"""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np

from xdem.errors import InputError
from xdem.terrain import kernels as K

__all__ = ["FITS", "CURVATURES", "CURV_METHODS", "fit_depth", "normalise_fit", "derivatives", "minar_curvature"]

#: Accepted surface fits (lower case; upstream spells them "Horn", "ZevenbergThorne", "Florinsky").
FITS = ("horn", "zevenbergthorne", "florinsky")
#: Upstream 0.2.3's curvatures (Minár et al. 2020 system), in 100/m.
CURVATURES = ("curvature", "profile_curvature", "tangential_curvature", "planform_curvature", "flowline_curvature",
              "max_curvature", "min_curvature")
#: Upstream's curvature methods.
CURV_METHODS = ("geometric", "directional")
_FLAT_PLANFORM = 10e-15  # upstream's threshold of z_x^2 + z_y^2 for planform and geometric flowline curvature


def normalise_fit(fit: str) -> str:
    """Canonical name of a surface fit: ``"horn"``, ``"zevenbergthorne"`` or ``"florinsky"``.

    Examples
    --------
    >>> normalise_fit("Florinsky"), normalise_fit("ZevenbergThorne")
    ('florinsky', 'zevenbergthorne')
    """
    key = str(fit).strip().lower()
    if key == "florinsky":
        return key
    try:
        return K.normalise_method(key)
    except InputError:
        raise InputError(f"unknown terrain method (surface fit) {fit!r}; use 'Florinsky', 'ZevenbergThorne' or 'Horn'") from None


def fit_depth(fit: str) -> int:
    """Padding the fit needs around a block: 2 for Florinsky's 5 x 5 window, else 1."""
    return 2 if normalise_fit(fit) == "florinsky" else 1


def _solve_exact(a: list[list[Fraction]], b: list[list[Fraction]]) -> list[list[Fraction]]:
    """``a^-1 b`` in exact rational arithmetic (Gauss-Jordan; ``a`` is small and invertible)."""
    n = len(a)
    m = [row[:] + rhs[:] for row, rhs in zip(a, b, strict=True)]
    for col in range(n):
        pivot = next(r for r in range(col, n) if m[r][col] != 0)
        m[col], m[pivot] = m[pivot], m[col]
        inv = 1 / m[col][col]
        m[col] = [v * inv for v in m[col]]
        for r in range(n):
            if r != col and m[r][col] != 0:
                f = m[r][col]
                m[r] = [v - f * w for v, w in zip(m[r], m[col], strict=True)]
    return [row[n:] for row in m]


@functools.cache
def _cubic_weights() -> dict[str, np.ndarray]:
    """5 x 5 weights of the least-squares cubic (exact rationals, rounded once to float64):
    ``z_x, z_y`` per pixel, ``z_xx, z_yy, z_xy`` per pixel^2."""
    cells = [(dr, dc) for dr in range(-2, 3) for dc in range(-2, 3)]
    monomials = [(i, j) for i in range(4) for j in range(4 - i)]
    design = [[Fraction(dc) ** i * Fraction(-dr) ** j for i, j in monomials] for dr, dc in cells]  # y to the north
    normal = [[sum((row[p] * row[q] for row in design), Fraction(0)) for q in range(len(monomials))]
              for p in range(len(monomials))]
    transposed = [[row[p] for row in design] for p in range(len(monomials))]
    rows = _solve_exact(normal, transposed)

    def coef(i: int, j: int, factor: int = 1) -> np.ndarray:
        return np.array([float(v * factor) for v in rows[monomials.index((i, j))]]).reshape(5, 5)

    return {"zx": coef(1, 0), "zy": coef(0, 1), "zxx": coef(2, 0, 2), "zyy": coef(0, 2, 2), "zxy": coef(1, 1)}



def _correlate(z: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``sum(weights[i, j] * z[centre + (i - 2, j - 2)])`` over the 5 x 5 window (interior shape).

    Antisymmetric weights (the first derivatives) are applied to differences of opposite cells,
    so that a constant or centrally symmetric window gives a gradient of exactly 0 (a flat cell)."""
    out = np.zeros((z.shape[0] - 4, z.shape[1] - 4))
    odd = np.array_equal(weights, -weights[::-1, ::-1])
    for i in range(5):
        for j in range(5):
            if weights[i, j] == 0.0 or (odd and (i, j) > (2, 2)):
                continue
            cell = K._shift(z, i - 2, j - 2, 2)
            out += weights[i, j] * (cell - K._shift(z, 2 - i, 2 - j, 2)) if odd else weights[i, j] * cell
    return out


def derivatives(block: np.ndarray, *, res_x: float, res_y: float, fit: str = "florinsky", first_only: bool = False
                ) -> tuple[np.ndarray, ...]:
    """Partial derivatives ``(z_x, z_y, z_xx, z_yy, z_xy)`` of the surface fit at each centre cell.

    Parameters
    ----------
    block
        2-D elevations padded by :func:`fit_depth` pixels on each side.
    res_x, res_y
        Pixel width and height (positive for a north-up grid).
    fit
        ``"florinsky"``, ``"zevenbergthorne"`` or ``"horn"`` (first derivatives only: the three
        second derivatives are NaN).
    first_only
        Skip the second derivatives (NaN), for slope, aspect and hillshade.

    Returns
    -------
    tuple of numpy.ndarray
        float64, interior shape, NaN where the window holds a NaN.
    """
    fit = normalise_fit(fit)
    depth = fit_depth(fit)
    z = K._as_float(block, depth)
    bad = K.nan_window_mask(z, depth)
    if fit == "florinsky":
        w = _cubic_weights()
        zx, zy = _correlate(z, w["zx"]) / res_x, _correlate(z, w["zy"]) / res_y
        if first_only:
            out = (zx, zy, *(np.full_like(zx, np.nan) for _ in range(3)))
        else:
            out = (zx, zy, _correlate(z, w["zxx"]) / res_x**2, _correlate(z, w["zyy"]) / res_y**2,
                   _correlate(z, w["zxy"]) / (res_x * res_y))
    elif fit == K.ZEVENBERGEN_THORNE:
        d, e, f, g, h = K.curvature_coefficients(z, res_x=res_x, res_y=res_y)
        out = (g, h, 2.0 * d, 2.0 * e, f)
    else:
        zx, zy = K.gradient_kernel(z, res_x=res_x, res_y=res_y, method=K.HORN)
        nan = np.full_like(zx, np.nan)
        out = (zx, zy, nan, nan.copy(), nan.copy())
    for arr in out:
        arr[bad] = np.nan
    return out


def _max_min(zx: np.ndarray, zy: np.ndarray, zxx: np.ndarray, zyy: np.ndarray, zxy: np.ndarray, geometric: bool,
             sign: float) -> np.ndarray:
    """Maximal (``sign=+1``) or minimal (-1) curvature, per metre."""
    if not geometric:  # Wood (1996): minus the smallest / largest second derivative
        return -((zxx + zyy) / 2.0 - sign * np.sqrt(((zxx - zyy) / 2.0) ** 2 + zxy**2))
    w2 = 1.0 + zx * zx + zy * zy
    mean = -((1.0 + zy * zy) * zxx - 2.0 * zxy * zx * zy + (1.0 + zx * zx) * zyy) / (2.0 * w2**1.5)
    gauss = (zxx * zyy - zxy * zxy) / (w2 * w2)
    # unsphericity sqrt(H^2 - K) >= 0; rounding can make H^2 - K a hair below 0 (a sphere): clamp
    unsphericity = np.sqrt(np.maximum(mean * mean - gauss, 0.0))
    return mean + sign * unsphericity


def minar_curvature(kind: str, zx: np.ndarray, zy: np.ndarray, zxx: np.ndarray, zyy: np.ndarray, zxy: np.ndarray,
                    *, method: str = "geometric") -> np.ndarray:
    """One curvature of upstream 0.2.3's system (Minár et al. 2020), in 100/m, convex > 0.

    ``kind`` is one of :data:`CURVATURES`. With ``g2 = z_x^2 + z_y^2`` and ``w2 = 1 + g2``
    (geometric) or ``w2 = 1`` (``method="directional"``):

    - ``curvature``: ``-2 (z_xx + z_yy)`` (upstream's historical total curvature);
    - ``profile_curvature``: ``-(z_xx z_x^2 + 2 z_xy z_x z_y + z_yy z_y^2) / (g2 w2^1.5)``;
    - ``tangential_curvature``: ``-(z_xx z_y^2 - 2 z_xy z_x z_y + z_yy z_x^2) / (g2 w2^0.5)``;
    - ``planform_curvature``: the same numerator over ``g2^1.5`` (both methods);
    - ``flowline_curvature``: ``(z_x z_y (z_xx - z_yy) - z_xy (z_x^2 - z_y^2)) / (g2^1.5 w2^0.5)``;
    - ``max_curvature``, ``min_curvature``: geometric, the mean curvature plus / minus the
      unsphericity (Shary 1995), i.e. the larger / smaller principal curvature; directional,
      Wood (1996)'s ``-((z_xx + z_yy) / 2 -/+ sqrt(((z_xx - z_yy) / 2)^2 + z_xy^2))``.

    As upstream, every kind but ``curvature`` is 0 where the gradient is exactly zero
    (``g2 < 1e-14`` for planform and geometric flowline curvature), even on a hill top.

    Examples
    --------
    >>> one = np.array([1.0])
    >>> float(minar_curvature("profile_curvature", one, 0 * one, -0.02 * one, 0 * one, 0 * one)[0])
    0.7071067811865475
    """
    if kind not in CURVATURES:
        raise InputError(f"unknown curvature {kind!r}; use one of {', '.join(CURVATURES)}")
    if method not in CURV_METHODS:
        raise InputError(f"unknown curv_method {method!r}; use 'geometric' or 'directional'")
    if kind == "curvature":
        return -200.0 * (zxx + zyy)
    geometric = method == "geometric"
    g2 = zx * zx + zy * zy
    w2 = 1.0 + g2 if geometric else np.ones_like(g2)
    flat = g2 < _FLAT_PLANFORM if kind == "planform_curvature" or (kind == "flowline_curvature" and geometric) \
        else g2 == 0.0
    safe = np.where(flat, 1.0, g2)
    contour = zxx * zy * zy - 2.0 * zxy * zx * zy + zyy * zx * zx
    with np.errstate(invalid="ignore", divide="ignore"):
        if kind == "profile_curvature":
            out = -(zxx * zx * zx + 2.0 * zxy * zx * zy + zyy * zy * zy) / (safe * w2**1.5)
        elif kind == "tangential_curvature":
            out = -contour / (safe * np.sqrt(w2))
        elif kind == "planform_curvature":
            out = -contour / safe**1.5
        elif kind == "flowline_curvature":
            out = (zx * zy * (zxx - zyy) - zxy * (zx * zx - zy * zy)) / (safe**1.5 * np.sqrt(w2))
        else:
            out = _max_min(zx, zy, zxx, zyy, zxy, geometric, 1.0 if kind == "max_curvature" else -1.0)
    out = np.where(flat, 0.0, out) * 100.0
    out[np.isnan(zxx) | np.isnan(zx)] = np.nan
    return out
