"""Upstream 0.2.3's windowed and frequency attributes as NumPy kernels: rugosity (Jenness 2004),
fractal roughness (Taud & Parrot 2005), TRI on any window, and texture shading (Brown 2010).

The windowed kernels take a block padded by their depth (1 for rugosity, ``window_size // 2``
otherwise) and return the interior shape in float64, as :mod:`xdem.terrain.kernels`; they are
chunk-local, so :mod:`xdem.terrain.upstream_engine` maps them with a halo and the result does
not depend on the chunks. Texture shading is a global FFT filter: :func:`texture_shading_array`
takes the whole DEM.

Examples
--------
>>> import numpy as np
>>> round(float(rugosity_kernel(np.zeros((3, 3)), res_x=2.0, res_y=2.0)[0, 0]), 12)  # flat: area ratio 1
1.0
"""

from __future__ import annotations

import numpy as np
import scipy.fft as sfft

from xdem.errors import InputError
from xdem.terrain import kernels as K

__all__ = ["rugosity_kernel", "fractal_roughness_kernel", "tri_window_kernel", "texture_shading_array"]

# Jenness (2004): the 8 triangles around the centre, each (neighbour a, neighbour b), clockwise from the north-west;
# a neighbour is (row, column) offset from the centre
_TRIANGLES = (((0, -1), (-1, -1)), ((-1, -1), (-1, 0)), ((-1, 0), (-1, 1)), ((-1, 1), (0, 1)),
              ((0, 1), (1, 1)), ((1, 1), (1, 0)), ((1, 0), (1, -1)), ((1, -1), (0, -1)))


def _heron(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    s = (a + b + c) / 2.0
    return np.sqrt(np.maximum(s * (s - a) * (s - b) * (s - c), 0.0))


def rugosity_kernel(block: np.ndarray, *, res_x: float, res_y: float) -> np.ndarray:
    """Rugosity (Jenness 2004): surface area of the 3 x 3 window's centre cell over its plan area.

    The centre is joined to its 8 neighbours and the neighbours to each other around it; the
    surface area is that of the 8 triangles spanned by the midpoints of those 3-D segments (each
    triangle's sides are half the segments, Heron's formula), over ``|res_x * res_y|``. 1 on a
    plane seen from above, larger on rough ground. ``block`` is padded by 1 pixel.
    """
    z = K._as_float(block, 1)
    lx, ly = abs(float(res_x)), abs(float(res_y))
    centre = K._shift(z, 0, 0, 1)

    def half(p: tuple[int, int], q: tuple[int, int]) -> np.ndarray:
        dz = K._shift(z, *p, 1) - (centre if q == (0, 0) else K._shift(z, *q, 1))
        dl = np.hypot((p[1] - q[1]) * lx, (p[0] - q[0]) * ly)
        return np.sqrt(dz * dz + dl * dl) / 2.0

    area = np.zeros_like(centre)
    for a, b in _TRIANGLES:
        area += _heron(half(a, (0, 0)), half(b, (0, 0)), half(a, b))
    return area / (lx * ly)


def _check_window(window_size: int) -> int:
    return K._check_window(window_size)


def tri_window_kernel(block: np.ndarray, *, window_size: int = 3, algorithm: str = "riley") -> np.ndarray:
    """TRI over a ``window_size`` window, as upstream: Riley ``sqrt(sum((z_i - z_0)^2))``, Wilson
    ``sum(|z_i - z_0|) / (window_size^2 - 1)``; ``block`` padded by ``window_size // 2``."""
    depth = _check_window(window_size)
    alg = str(algorithm).lower()
    if alg not in ("riley", "wilson"):
        raise InputError(f"unknown TRI method {algorithm!r}; use 'Riley' or 'Wilson'")
    z = K._as_float(block, depth)
    centre = K._shift(z, 0, 0, depth)
    acc = np.zeros_like(centre)
    for dr in range(-depth, depth + 1):
        for dc in range(-depth, depth + 1):
            diff = K._shift(z, dr, dc, depth) - centre
            acc += diff * diff if alg == "riley" else np.abs(diff)
    return np.sqrt(acc) if alg == "riley" else acc / (window_size * window_size - 1)


def _box_max(z: np.ndarray, q: int) -> np.ndarray:
    """``out[r, c] = max(z[r:r + q, c:c + q])`` (NaN-propagating), shape reduced by ``q - 1``."""
    rows = z[: z.shape[0] - q + 1]
    for k in range(1, q):
        rows = np.maximum(rows, z[k : z.shape[0] - q + 1 + k])
    out = rows[:, : z.shape[1] - q + 1]
    for k in range(1, q):
        out = np.maximum(out, rows[:, k : z.shape[1] - q + 1 + k])
    return out


def fractal_roughness_kernel(block: np.ndarray, *, window_size: int = 13) -> np.ndarray:
    """Fractal dimension of the surface in each window, box counting of Taud & Parrot (2005).

    As upstream 0.2.3: in the window, ``V = clip(z - z_centre, 0, window_size)`` voxels per
    pixel; for each divisor ``q`` of ``window_size // 2``, ``N(q)`` is the sum over the
    ``(window_size - 1) // q`` squared boxes of ``q x q`` pixels (from the window's north-west
    corner) of the box's largest ``V``, over ``q``; the result is minus the slope of
    ``log N(q)`` against ``log q``. The window's last row and column are not used (as
    upstream), and a NaN only matters in the boxes. NaN where ``N(q) = 0`` (flat) or with a
    single ``q`` (``window_size`` 3 or a prime half-size: no slope). Padded by ``window_size // 2``.
    """
    hw = _check_window(window_size)
    w = 2 * hw + 1
    z = K._as_float(block, hw)
    rows, cols = z.shape[0] - 2 * hw, z.shape[1] - 2 * hw
    centre = K._shift(z, 0, 0, hw)
    qs = [q for q in range(1, hw + 1) if hw % q == 0]
    log_q = np.log(np.asarray(qs, dtype=np.float64))
    logs = []
    for q in qs:
        top = _box_max(z, q)  # box maxima of z: clip(. - centre) is monotonic, so max(V) = clip(max(z) - centre)
        total = np.zeros((rows, cols))
        for a in range((w - 1) // q):
            for b in range((w - 1) // q):
                box = top[a * q : a * q + rows, b * q : b * q + cols]
                total += np.clip(box - centre, 0.0, float(w))
        with np.errstate(divide="ignore"):
            logs.append(np.log(total / q))
    dx = log_q - log_q.mean()
    sxx = float(np.sum(dx**2))
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_y = np.zeros_like(centre)
        for y in logs:
            mean_y += y
        mean_y /= len(logs)
        sxy = np.zeros_like(centre)
        for k in range(len(qs)):  # elementwise: the same in every chunking
            sxy += float(dx[k]) * (logs[k] - mean_y)
        out = -sxy / sxx
    out[~np.isfinite(out)] = np.nan
    return out


def _next_fft_size(n: int) -> int:
    """Upstream's FFT size: the next power of 2 up to 1024, else the next 2^a 3^b 5^c 7^d."""
    if n <= 1:
        return 1
    if n <= 1024:
        return int(2 ** np.ceil(np.log2(n)))
    while True:
        m = n
        for f in (2, 3, 5, 7):
            while m % f == 0:
                m //= f
        if m == 1:
            return n
        n += 1


def texture_shading_array(dem: np.ndarray, alpha: float = 0.8) -> np.ndarray:
    """Texture shading (Brown 2010): the fractional Laplacian ``|f|^alpha`` of the whole DEM.

    As upstream 0.2.3: NaN cells are filled with the mean of the valid ones, the array is padded
    symmetrically to an FFT-friendly size, multiplied in the frequency domain by ``|f|^alpha``
    (``f`` in cycles per pixel, the mean removed when ``alpha > 0``), transformed back and
    cropped; NaN cells stay NaN. float64.

    Examples
    --------
    >>> out = texture_shading_array(np.ones((4, 4)))  # a constant has no texture
    >>> float(np.abs(out).max()) < 1e-12
    True
    """
    if not 0 <= alpha <= 2:
        raise InputError(f"texture_alpha must be between 0 and 2, got {alpha}")
    z = np.array(dem, dtype=np.float64)
    valid = np.isfinite(z)
    if not valid.any():
        return np.full_like(z, np.nan)
    z[~valid] = z[valid].mean()
    rows, cols = z.shape
    fr, fc = _next_fft_size(rows), _next_fft_size(cols)
    pr, pc = (fr - rows) // 2, (fc - cols) // 2
    z = np.pad(z, ((pr, fr - rows - pr), (pc, fc - cols - pc)), mode="symmetric")
    freq = np.hypot(sfft.rfftfreq(fc)[None, :], sfft.fftfreq(fr)[:, None])
    freq[0, 0] = 1.0
    gain = freq**alpha
    if alpha > 0:
        gain[0, 0] = 0.0
    out = sfft.irfft2(sfft.rfft2(z) * gain, s=(fr, fc))[pr : pr + rows, pc : pc + cols]
    out[~valid] = np.nan
    return out
