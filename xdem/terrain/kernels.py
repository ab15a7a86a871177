"""NumPy kernels of the terrain attributes, on one padded block.

Every kernel here takes a 2-D ``block`` **padded by ``depth`` pixels on each side** (``depth``
is 1 for the 3x3 attributes, ``window_size // 2`` for the windowed ones) and returns arrays of
the block's **interior shape** ``(rows - 2 * depth, cols - 2 * depth)``, in float64. Pad an
unpadded array yourself with :func:`pad_nan` to get outputs of its own shape with NaN borders.

Conventions (shared by every module of xdem that calls these kernels):

- Rows go south and columns go east when ``res_x`` and ``res_y`` are positive. ``res_x`` is the
  pixel width and ``res_y`` the pixel height in CRS units (metres). For a grid whose columns go
  west or whose rows go north, pass a negative ``res_x`` or ``res_y`` (the runners of
  :mod:`xdem.terrain.attributes` derive both from the transform).
- ``dzdx`` is the derivative of elevation towards the east, ``dzdy`` towards the **north**.
- Slope is the angle from the horizontal; aspect is the direction the slope faces (the downslope
  direction), clockwise from north, in ``[0, 2*pi)``; flat cells (zero gradient) have a NaN aspect.
- NaN-aware: an output cell is NaN exactly when its window (3x3, or ``window_size`` squared)
  contains a NaN; nothing is filled or interpolated.

Surface fits (``method``): ``"horn"`` (Horn 1981, weighted 3x3 differences; the default) and
``"zevenbergthorne"`` (Zevenbergen & Thorne 1987, central differences; ``"zevenbergen_thorne"``
is accepted too). Both match GDAL's ``gdaldem`` for slope, aspect and hillshade.

Examples
--------
>>> import numpy as np
>>> z = np.add.outer(np.zeros(5), np.arange(5.0))  # rises 1 m per 1 m pixel towards the east
>>> slope, aspect = slope_aspect_kernel(z, res_x=1.0, res_y=1.0)
>>> slope.shape, round(float(np.degrees(slope[0, 0])), 6), float(np.degrees(aspect[0, 0]))
((3, 3), 45.0, 270.0)
"""

from __future__ import annotations

import numpy as np

from xdem.errors import InputError

__all__ = [
    "HORN",
    "ZEVENBERGEN_THORNE",
    "normalise_method",
    "pad_nan",
    "nan_window_mask",
    "gradient_kernel",
    "slope_aspect_kernel",
    "slope_aspect_at_centres",
    "hillshade_kernel",
    "curvature_coefficients",
    "curvature_kernel",
    "tri_kernel",
    "tpi_kernel",
    "roughness_kernel",
]

HORN = "horn"
ZEVENBERGEN_THORNE = "zevenbergthorne"
_METHOD_ALIASES = {
    "horn": HORN,
    "zevenbergthorne": ZEVENBERGEN_THORNE,
    "zevenbergen_thorne": ZEVENBERGEN_THORNE,
    "zevenbergenthorne": ZEVENBERGEN_THORNE,
    "zt": ZEVENBERGEN_THORNE,
}
_CURVATURE_KINDS = ("curvature", "profile", "planform", "maximum")


def normalise_method(method: str) -> str:
    """Canonical name of a surface-fit ``method`` (``"horn"`` or ``"zevenbergthorne"``).

    Raises
    ------
    xdem.errors.InputError
        Unknown method.
    """
    key = str(method).lower().replace("-", "_").replace(" ", "_").replace("&", "")
    if key not in _METHOD_ALIASES:
        raise InputError(f"unknown terrain method {method!r}; use 'horn' or 'zevenbergthorne'")
    return _METHOD_ALIASES[key]


def pad_nan(block: np.ndarray, depth: int = 1) -> np.ndarray:
    """Pad a 2-D array by ``depth`` NaN pixels on each side (float64), for the kernels.

    Examples
    --------
    >>> pad_nan(np.ones((2, 2))).shape
    (4, 4)
    """
    return np.pad(np.asarray(block, dtype=np.float64), depth, mode="constant", constant_values=np.nan)


def _as_float(block: np.ndarray, depth: int) -> np.ndarray:
    z = np.asarray(block, dtype=np.float64)
    if z.ndim != 2 or z.shape[0] < 2 * depth + 1 or z.shape[1] < 2 * depth + 1:
        raise InputError(
            f"a terrain kernel needs a 2-D block padded by {depth} pixel(s) on each side "
            f"(at least {2 * depth + 1} x {2 * depth + 1}), got shape {z.shape}"
        )
    return z


def _shift(z: np.ndarray, dr: int, dc: int, depth: int) -> np.ndarray:
    """View of ``z`` over the interior, shifted by ``dr`` rows and ``dc`` columns."""
    rows, cols = z.shape
    return z[depth + dr : rows - depth + dr, depth + dc : cols - depth + dc]


def _window_reduce(z: np.ndarray, depth: int, op) -> np.ndarray:
    """Separable ``op`` (np.maximum, np.minimum, np.add, np.logical_or) over a square window."""
    rows, cols = z.shape
    acc = z[:, 0 : cols - 2 * depth]
    for k in range(1, 2 * depth + 1):
        acc = op(acc, z[:, k : cols - 2 * depth + k])
    out = acc[0 : rows - 2 * depth]
    for k in range(1, 2 * depth + 1):
        out = op(out, acc[k : rows - 2 * depth + k])
    return out


def nan_window_mask(block: np.ndarray, depth: int = 1) -> np.ndarray:
    """Interior-shaped boolean mask: True where the ``(2*depth+1)``-wide window holds a NaN."""
    z = _as_float(block, depth)
    return _window_reduce(np.isnan(z), depth, np.logical_or)


def gradient_kernel(
    block: np.ndarray, *, res_x: float, res_y: float, method: str = HORN
) -> tuple[np.ndarray, np.ndarray]:
    """Elevation gradient ``(dzdx, dzdy)``: towards the east and towards the north.

    Parameters
    ----------
    block
        2-D elevations padded by 1 pixel on each side.
    res_x, res_y
        Pixel width and height (positive for a north-up grid).
    method
        ``"horn"`` or ``"zevenbergthorne"``.

    Returns
    -------
    (dzdx, dzdy)
        float64 arrays of the interior shape, NaN where the 3x3 window holds a NaN.
    """
    method = normalise_method(method)
    z = _as_float(block, 1)
    a, b, c = _shift(z, -1, -1, 1), _shift(z, -1, 0, 1), _shift(z, -1, 1, 1)
    d, f = _shift(z, 0, -1, 1), _shift(z, 0, 1, 1)
    g, h, i = _shift(z, 1, -1, 1), _shift(z, 1, 0, 1), _shift(z, 1, 1, 1)
    dzdx, dzdy = _gradient_of((a, b, c, d, f, g, h, i), res_x, res_y, method)
    bad = nan_window_mask(z, 1)
    dzdx[bad] = np.nan
    dzdy[bad] = np.nan
    return dzdx, dzdy


def _gradient_of(nb: tuple[np.ndarray, ...], res_x: float, res_y: float, method: str) -> tuple[np.ndarray, np.ndarray]:
    """``(dzdx, dzdy)`` from the 8 neighbours ``a b c / d . f / g h i`` (row-major, north first)."""
    a, b, c, d, f, g, h, i = nb
    if method == HORN:
        return (((c + 2.0 * f + i) - (a + 2.0 * d + g)) / (8.0 * res_x),
                ((a + 2.0 * b + c) - (g + 2.0 * h + i)) / (8.0 * res_y))
    return (f - d) / (2.0 * res_x), (b - h) / (2.0 * res_y)


def slope_aspect_at_centres(
    neighbourhoods: np.ndarray, *, res_x: float, res_y: float, method: str = HORN
) -> tuple[np.ndarray, np.ndarray]:
    """Slope and aspect, in radians, at the centres of ``n`` 3 x 3 neighbourhoods ``(n, 3, 3)``:
    the values :func:`slope_aspect_kernel` gives there (the same operations on the same
    values), computed at those ``n`` pixels only.

    Examples
    --------
    >>> z = np.add.outer(np.arange(3.0) * 2.0, np.zeros(3))[None]  # rises towards the south
    >>> s, a = slope_aspect_at_centres(z, res_x=2.0, res_y=2.0)
    >>> round(float(np.degrees(s[0])), 6), float(np.degrees(a[0]))
    (45.0, 0.0)
    """
    method = normalise_method(method)
    z = np.asarray(neighbourhoods, dtype=np.float64)
    nb = tuple(z[:, r, c] for r, c in ((0, 0), (0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1), (2, 2)))
    dzdx, dzdy = _gradient_of(nb, res_x, res_y, method)
    bad = np.isnan(z).any(axis=(1, 2))
    dzdx[bad] = np.nan
    dzdy[bad] = np.nan
    return _slope_aspect_from_gradient(dzdx, dzdy)


def _gradient_norm(dzdx: np.ndarray, dzdy: np.ndarray) -> np.ndarray:
    norm = dzdx * dzdx
    norm += dzdy * dzdy
    return np.sqrt(norm, out=norm)  # faster than np.hypot; gradients never come near overflow


def _slope_from_gradient(dzdx: np.ndarray, dzdy: np.ndarray) -> np.ndarray:
    norm = _gradient_norm(dzdx, dzdy)
    return np.arctan(norm, out=norm)


def _aspect_from_gradient(dzdx: np.ndarray, dzdy: np.ndarray) -> np.ndarray:
    aspect = np.arctan2(np.negative(dzdx), np.negative(dzdy))  # downslope direction, clockwise from north
    aspect += 0.0  # turns -0.0 into 0.0
    np.add(aspect, 2.0 * np.pi, out=aspect, where=aspect < 0)
    aspect[aspect >= 2.0 * np.pi] = 0.0
    aspect[(dzdx == 0) & (dzdy == 0)] = np.nan
    return aspect


def _slope_aspect_from_gradient(dzdx: np.ndarray, dzdy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return _slope_from_gradient(dzdx, dzdy), _aspect_from_gradient(dzdx, dzdy)


def slope_aspect_kernel(
    block: np.ndarray, *, res_x: float, res_y: float, method: str = HORN
) -> tuple[np.ndarray, np.ndarray]:
    """Slope and aspect, in radians, of a block padded by 1 pixel on each side.

    Parameters
    ----------
    block
        2-D elevations, padded by 1 pixel on each side (use :func:`pad_nan` on an unpadded
        array to get NaN borders).
    res_x, res_y
        Pixel width and height in the units of the elevations (positive for a north-up grid).
    method
        ``"horn"`` (default) or ``"zevenbergthorne"``.

    Returns
    -------
    (slope_rad, aspect_rad)
        float64 arrays of the **interior** shape ``(rows - 2, cols - 2)``. Slope in
        ``[0, pi/2)``; aspect clockwise from north in ``[0, 2*pi)``, NaN on flat cells. Both
        NaN where the 3x3 window holds a NaN.

    Examples
    --------
    >>> z = np.add.outer(np.arange(4.0) * 2.0, np.zeros(4))  # rises towards the south
    >>> s, a = slope_aspect_kernel(z, res_x=2.0, res_y=2.0)
    >>> round(float(np.degrees(s[0, 0])), 6), float(np.degrees(a[0, 0]))
    (45.0, 0.0)
    """
    dzdx, dzdy = gradient_kernel(block, res_x=res_x, res_y=res_y, method=method)
    return _slope_aspect_from_gradient(dzdx, dzdy)


def _hillshade_from_gradient(
    dzdx: np.ndarray, dzdy: np.ndarray, *, azimuth: float, altitude: float, z_factor: float
) -> np.ndarray:
    az, alt = np.radians(azimuth), np.radians(altitude)
    # cosine of the angle between the surface normal (-p, -q, 1) and the light (east, north, up),
    # with p, q = z_factor * (dzdx, dzdy)
    k = z_factor * np.cos(alt)
    cos_i = dzdx * (-k * np.sin(az))
    cos_i -= dzdy * (k * np.cos(az))
    cos_i += np.sin(alt)
    norm = _gradient_norm(dzdx * z_factor, dzdy * z_factor) if z_factor != 1 else _gradient_norm(dzdx, dzdy)
    norm *= norm
    norm += 1.0
    cos_i /= np.sqrt(norm, out=norm)
    nan = np.isnan(cos_i)
    np.maximum(cos_i, 0.0, out=cos_i)
    cos_i *= 254.0
    cos_i += 1.0
    cos_i[nan] = np.nan
    return cos_i


def hillshade_kernel(
    block: np.ndarray,
    *,
    res_x: float,
    res_y: float,
    azimuth: float = 315.0,
    altitude: float = 45.0,
    z_factor: float = 1.0,
    method: str = HORN,
) -> np.ndarray:
    """Hillshade on gdaldem's scale: ``1 + 254 * max(cos(i), 0)``, float64, interior shape.

    ``i`` is the angle between the surface normal and the direction of the light, which comes
    from ``azimuth`` (degrees clockwise from north) at ``altitude`` degrees above the horizon.
    Cells facing away from the light get 1, cells facing it squarely 255.
    """
    dzdx, dzdy = gradient_kernel(block, res_x=res_x, res_y=res_y, method=method)
    return _hillshade_from_gradient(dzdx, dzdy, azimuth=azimuth, altitude=altitude, z_factor=z_factor)


def curvature_coefficients(
    block: np.ndarray, *, res_x: float, res_y: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Zevenbergen & Thorne (1987) quadratic-fit coefficients ``(D, E, F, G, H)``.

    With x towards the east and y towards the north, the local fit is
    ``z = D x^2 + E y^2 + F x y + G x + H y + ...``, so ``z_xx = 2D``, ``z_yy = 2E``,
    ``z_xy = F``, ``z_x = G``, ``z_y = H`` (exact for any quadratic surface). float64, interior
    shape, NaN where the 3x3 window holds a NaN.
    """
    z = _as_float(block, 1)
    z1, z2, z3 = _shift(z, -1, -1, 1), _shift(z, -1, 0, 1), _shift(z, -1, 1, 1)
    z4, z5, z6 = _shift(z, 0, -1, 1), _shift(z, 0, 0, 1), _shift(z, 0, 1, 1)
    z7, z8, z9 = _shift(z, 1, -1, 1), _shift(z, 1, 0, 1), _shift(z, 1, 1, 1)
    d = ((z4 + z6) / 2.0 - z5) / (res_x * res_x)
    e = ((z2 + z8) / 2.0 - z5) / (res_y * res_y)
    f = (-z1 + z3 + z7 - z9) / (4.0 * res_x * res_y)
    g = (z6 - z4) / (2.0 * res_x)
    h = (z2 - z8) / (2.0 * res_y)
    return d, e, f, g, h


def curvature_kernel(block: np.ndarray, *, res_x: float, res_y: float, kind: str = "curvature") -> np.ndarray:
    """Curvature of the Zevenbergen & Thorne (1987) fit, in 1/100 m^-1 (ArcGIS and xdem scale).

    All kinds are positive where the surface is upwardly convex (hill tops, ridges) and negative
    where it is concave (valleys, pits); with ``D, E, F, G, H`` from
    :func:`curvature_coefficients`:

    - ``"curvature"`` (total): ``-2 (D + E) * 100``, minus the Laplacian of z.
    - ``"profile"``: ``-2 (D G^2 + E H^2 + F G H) / (G^2 + H^2) * 100``, minus the second
      derivative along the steepest slope (ArcGIS reports the opposite sign).
    - ``"planform"``: ``-2 (D H^2 + E G^2 - F G H) / (G^2 + H^2) * 100``, minus the second
      derivative across the slope (along the contour).
    - ``"maximum"``: of profile and planform, the one with the larger magnitude (signed).

    ``curvature == profile + planform`` wherever the gradient is not zero. Where the gradient is
    exactly zero the slope direction is undefined and profile and planform are 0 (as in ArcGIS).
    These are the small-slope (Zevenbergen & Thorne) forms, without the ``(1 + p^2 + q^2)``
    denominators of the exact geometric curvatures.
    """
    if kind not in _CURVATURE_KINDS:
        raise InputError(f"unknown curvature kind {kind!r}; use one of {', '.join(_CURVATURE_KINDS)}")
    coefs = curvature_coefficients(block, res_x=res_x, res_y=res_y)
    out = _curvature_from_coefficients(*coefs, kind=kind)
    out[nan_window_mask(block, 1)] = np.nan
    return out


def _curvature_from_coefficients(
    d: np.ndarray, e: np.ndarray, f: np.ndarray, g: np.ndarray, h: np.ndarray, *, kind: str
) -> np.ndarray:
    """One curvature kind (1/100 m^-1) from the coefficients; NaN handling left to the caller."""
    if kind == "curvature":
        return -200.0 * (d + e)
    g2h2 = g * g + h * h
    flat = g2h2 == 0
    denom = np.where(flat, 1.0, g2h2)
    if kind in ("profile", "maximum"):
        profile = np.where(flat, 0.0, -200.0 * (d * g * g + e * h * h + f * g * h) / denom)
        if kind == "profile":
            return profile
    planform = np.where(flat, 0.0, -200.0 * (d * h * h + e * g * g - f * g * h) / denom)
    if kind == "planform":
        return planform
    return np.where(np.abs(planform) > np.abs(profile), planform, profile)


def tri_kernel(block: np.ndarray, *, algorithm: str = "riley") -> np.ndarray:
    """Terrain ruggedness index of a block padded by 1 pixel (interior shape, float64).

    ``"riley"`` (Riley et al. 1999, default, gdaldem's default): ``sqrt(sum((z_i - z_0)^2))``
    over the 8 neighbours. ``"wilson"`` (Wilson et al. 2007, for bathymetry): the mean of
    ``|z_i - z_0|`` over the 8 neighbours. Units of the elevations.
    """
    alg = str(algorithm).lower()
    if alg not in ("riley", "wilson"):
        raise InputError(f"unknown TRI algorithm {algorithm!r}; use 'riley' or 'wilson'")
    z = _as_float(block, 1)
    centre = _shift(z, 0, 0, 1)
    acc = np.zeros_like(centre)
    for dr in (-1, 0, 1):
        for dc in (-1, 0, 1):
            if dr == 0 and dc == 0:
                continue
            diff = _shift(z, dr, dc, 1) - centre
            acc += diff * diff if alg == "riley" else np.abs(diff)
    return np.sqrt(acc) if alg == "riley" else acc / 8.0


def _check_window(window_size: int) -> int:
    if int(window_size) != window_size or window_size < 3 or window_size % 2 == 0:
        raise InputError(f"window_size must be an odd integer >= 3, got {window_size!r}")
    return int(window_size) // 2


def tpi_kernel(block: np.ndarray, *, window_size: int = 3) -> np.ndarray:
    """Topographic position index: centre minus the mean of the other cells of the window.

    ``block`` is padded by ``window_size // 2``. With ``window_size=3`` this is gdaldem's TPI.
    Positive on ridges and hill tops, negative in valleys; units of the elevations.
    """
    depth = _check_window(window_size)
    z = _as_float(block, depth)
    total = _window_reduce(z, depth, np.add)
    centre = _shift(z, 0, 0, depth)
    n = (2 * depth + 1) ** 2 - 1
    return centre - (total - centre) / n


def roughness_kernel(block: np.ndarray, *, window_size: int = 3) -> np.ndarray:
    """Roughness: largest minus smallest elevation of the window (centre included).

    ``block`` is padded by ``window_size // 2``. With ``window_size=3`` this is gdaldem's
    roughness (Wilson et al. 2007). Units of the elevations.
    """
    depth = _check_window(window_size)
    z = _as_float(block, depth)
    return _window_reduce(z, depth, np.maximum) - _window_reduce(z, depth, np.minimum)
