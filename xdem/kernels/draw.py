"""Compiled loops of the reproducible draw (:mod:`xdem.sampling`) on one block.

Each loop makes one pass over a block and computes the SplitMix64 hash of every pixel's
global index on the fly, so no per-pixel hash array, boolean mask or float64 copy of the
block is ever built: only the selected pixels are written out. They select exactly the pixels
the numpy expressions of :mod:`xdem.sampling` select (``valid & (hash < limit)``, in row-major
order) and return the same values (tested on random blocks). The hash is
``splitmix64((row * ncols + col) ^ key)`` in wrapping 64-bit arithmetic, ``key`` being the
seed's own hash (:func:`xdem.sampling._seed_key`).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["draw_block", "select_finite_block", "cut_windows_nan", "cut_windows_nan_into", "join_pieces", "diff_extremes",
           "take_f64", "hash_block",
           "hash_keys"]


@numba.njit(cache=True, nogil=True, inline="always")
def _mix(index: np.uint64, key: np.uint64) -> np.uint64:  # pragma: no cover - compiled
    z = (index ^ key) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    out: np.uint64 = z ^ (z >> np.uint64(31))
    return out


@numba.njit(cache=True, nogil=True, inline="always")
def _finite(x: float) -> bool:  # pragma: no cover - compiled
    """``numpy.isfinite`` of a float (NaN and infinities fail), without numba's ufunc machinery,
    whose first use costs about 0.2 s of typing per process."""
    return abs(x) < np.inf


@numba.njit(cache=True, nogil=True)
def _hash_row(first: np.uint64, key: np.uint64, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """Hashes of the consecutive global indices ``first, first + 1, ...`` (a loop the compiler vectorises)."""
    for k in range(len(out)):
        out[k] = _mix(first + np.uint64(k), key)


@numba.njit(cache=True, nogil=True)
def hash_block(row0: np.uint64, col0: np.uint64, ncols: np.uint64, key: np.uint64,
               out: np.ndarray) -> None:  # pragma: no cover - compiled
    """The hashes of a block whose first pixel has the global index ``(row0, col0)`` (grid of
    ``ncols`` columns), row by row with :func:`_hash_row`."""
    for i in range(out.shape[0]):
        _hash_row((row0 + np.uint64(i)) * ncols + col0, key, out[i])


@numba.njit(cache=True, nogil=True)
def hash_keys(index: np.ndarray, key: np.uint64, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """The hashes of the global indices ``index`` (int64) into ``out`` (uint64)."""
    for k in range(len(index)):
        out[k] = _mix(np.uint64(index[k]), key)


@numba.njit(cache=True, nogil=True)
def _count_true(row: np.ndarray) -> int:  # pragma: no cover - compiled
    n = 0
    for v in row:
        n += 1 if v else 0
    return n


@numba.njit(cache=True, nogil=True)
def _below_row(buf: np.ndarray, limit: np.uint64, every: bool, low: np.ndarray) -> int:  # pragma: no cover
    """Positions of the hashes of ``buf`` below ``limit`` (all with ``every``) into ``low``; their number."""
    m = 0
    for k in range(len(buf)):
        if every or buf[k] < limit:
            low[m] = k
            m += 1
    return m


@numba.njit(cache=True, nogil=True)
def _take_row(
    valid: np.ndarray, li: int, inside: bool, gi: int, col0: int, ec0: int, buf: np.ndarray, low: np.ndarray, m: int,
    centres: bool, rows: np.ndarray, cols: np.ndarray, hs: np.ndarray, n: int, wr: np.ndarray, wc: np.ndarray, nw: int,
) -> tuple[int, int]:  # pragma: no cover - compiled
    """Append a row's candidates (valid pixels of the block below the limit) and window centres."""
    nx = valid.shape[1]
    for q in range(m):
        k = low[q]
        gj = ec0 + k
        lj = gj - col0
        if inside and 0 <= lj < nx:
            if not valid[li, lj]:
                continue
            rows[n], cols[n], hs[n] = li, lj, buf[k]
            n += 1
        if centres:
            wr[nw], wc[nw] = gi, gj
            nw += 1
    return n, nw


@numba.njit(cache=True, nogil=True)
def _grown(a: np.ndarray, more: int) -> np.ndarray:  # pragma: no cover - compiled
    out = np.empty(2 * len(a) + more, dtype=a.dtype)
    out[: len(a)] = a
    return out


@numba.njit(cache=True, nogil=True)
def draw_block(
    valid: np.ndarray, row0: int, col0: int, ncols: int, key: np.uint64, limit: np.uint64, every: bool,
    er0: int, er1: int, ec0: int, ec1: int, centres: bool, cap: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The candidates of one block and the centres of the windows reaching into it.

    ``valid`` is the block (global offset ``row0, col0``); rows ``er0:er1`` and columns
    ``ec0:ec1`` (global) are the block and a margin around it. Returns the local ``rows``,
    ``cols`` and ``hashes`` of the valid pixels whose hash is below ``limit`` (all of them with
    ``every``), row-major; the number of valid pixels; and, with ``centres``, the global rows and
    columns (row-major over the margin's box) of those candidates and of the margin pixels whose
    hash is below ``limit``. ``cap`` is a first guess of the candidates' number.
    """
    ny, nx = valid.shape
    rows = np.empty(cap, dtype=np.int64)
    cols = np.empty(cap, dtype=np.int64)
    hs = np.empty(cap, dtype=np.uint64)
    wr = np.empty(cap if centres else 0, dtype=np.int64)
    wc = np.empty(cap if centres else 0, dtype=np.int64)
    buf = np.empty(ec1 - ec0, dtype=np.uint64)
    low = np.empty(ec1 - ec0, dtype=np.int64)  # positions in the row below the limit
    n = 0
    nw = 0
    n_valid = 0
    for gi in range(er0, er1):
        _hash_row(np.uint64(gi) * np.uint64(ncols) + np.uint64(ec0), key, buf)
        m = _below_row(buf, limit, every, low)
        li = gi - row0
        inside = 0 <= li < ny
        if inside:
            n_valid += _count_true(valid[li])
        # arrays grow only here, out of the per-pixel loops (no reference counting there)
        if n + m > len(rows):
            rows, cols, hs = _grown(rows, m), _grown(cols, m), _grown(hs, m)
        if centres and nw + m > len(wr):
            wr, wc = _grown(wr, m), _grown(wc, m)
        n, nw = _take_row(valid, li, inside, gi, col0, ec0, buf, low, m, centres, rows, cols, hs, n, wr, wc, nw)
    return rows[:n], cols[:n], hs[:n], n_valid, wr[:nw], wc[:nw]


@numba.njit(cache=True, nogil=True)
def select_finite_block(
    a: np.ndarray, b: np.ndarray, mask: np.ndarray, row0: int, col0: int, ncols: int, key: np.uint64,
    limit: np.uint64, every: bool, cap: int,
) -> tuple[np.ndarray, np.ndarray, int, int]:  # pragma: no cover - compiled
    """The pixels finite in ``a`` and ``b``, True in ``mask`` and whose hash is below ``limit``
    (local rows and columns, row-major), the number finite in both and the number of those in
    ``mask``."""
    ny, nx = a.shape
    rows = np.empty(cap, dtype=np.int64)
    cols = np.empty(cap, dtype=np.int64)
    low = np.empty(nx, dtype=np.int64)
    buf = np.empty(nx, dtype=np.uint64)
    n = 0
    n_finite = 0
    n_mask = 0
    for i in range(ny):
        f, k, m = _finite_row(a[i], b[i], mask[i], np.uint64(row0 + i) * np.uint64(ncols) + np.uint64(col0), key, limit,
                              every, buf, low)
        n_finite += f
        n_mask += k
        if n + m > len(rows):  # arrays grow only here, out of the per-pixel loop
            rows, cols = _grown(rows, m), _grown(cols, m)
        rows[n : n + m] = i
        cols[n : n + m] = low[:m]
        n += m
    return rows[:n], cols[:n], n_finite, n_mask


@numba.njit(cache=True, nogil=True)
def _finite_row(
    a: np.ndarray, b: np.ndarray, mask: np.ndarray, first: np.uint64, key: np.uint64, limit: np.uint64, every: bool,
    buf: np.ndarray, low: np.ndarray,
) -> tuple[int, int, int]:  # pragma: no cover - compiled
    """One row of :func:`select_finite_block`: the numbers finite in both and of those in ``mask``
    (branch-free loops), and the positions (into ``low``) of those whose hash is below ``limit``."""
    f = 0
    k = 0
    for j in range(len(a)):
        both = _finite(a[j]) & _finite(b[j])
        f += both
        k += both & mask[j]
    _hash_row(first, key, buf)
    m = 0
    for q in range(_below_row(buf, limit, every, low)):
        j = low[q]
        if mask[j] and _finite(a[j]) and _finite(b[j]):
            low[m] = j
            m += 1
    return f, k, m


@numba.njit(cache=True, nogil=True)
def diff_extremes(ref: np.ndarray, mask: np.ndarray, other: np.ndarray) -> tuple[int, float, float]:  # pragma: no cover
    """Number of pixels finite in ``ref`` and ``other`` and True in ``mask``, and the least and
    largest ``float64(other) - float64(ref)`` there (``inf, -inf`` when none)."""
    n = 0
    lo, hi = np.inf, -np.inf
    for i in range(ref.shape[0]):
        for j in range(ref.shape[1]):
            r, o = ref[i, j], other[i, j]
            if mask[i, j] and _finite(r) and _finite(o):
                d = np.float64(o) - np.float64(r)
                n += 1
                if d < lo:
                    lo = d
                if d > hi:
                    hi = d
    return n, lo, hi


@numba.njit(cache=True, nogil=True)
def take_f64(a: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """``a[rows, cols]`` as float64."""
    out = np.empty(len(rows), dtype=np.float64)
    for k in range(len(rows)):
        out[k] = a[rows[k], cols[k]]
    return out


@numba.njit(cache=True, nogil=True)
def cut_windows_nan(block: np.ndarray, lrow: np.ndarray, lcol: np.ndarray, half: int) -> np.ndarray:  # pragma: no cover
    """Windows ``(n, 2h+2, 2h+2)`` (float32) of ``block`` starting at ``(lrow - h, lcol - h)``;
    NaN where a window leaves the block."""
    size = 2 * half + 2
    out = np.empty((len(lrow), size, size), dtype=np.float32)
    cut_windows_nan_into(block, lrow, lcol, half, out)
    return out


@numba.njit(cache=True, nogil=True)
def cut_windows_nan_into(block: np.ndarray, lrow: np.ndarray, lcol: np.ndarray, half: int,
                         out: np.ndarray) -> None:  # pragma: no cover - compiled
    """:func:`cut_windows_nan` into ``out`` (``(len(lrow), 2h+2, 2h+2)`` float32, allocated by the caller)."""
    ny, nx = block.shape
    size = 2 * half + 2
    for k in range(len(lrow)):
        r0, c0 = lrow[k] - half, lcol[k] - half
        if 0 <= r0 and r0 + size <= ny and 0 <= c0 and c0 + size <= nx:  # inside: no test per pixel
            for a in range(size):
                for b in range(size):
                    out[k, a, b] = np.float32(block[r0 + a, c0 + b])
            continue
        for a in range(size):
            r = r0 + a
            for b in range(size):
                c = c0 + b
                if 0 <= r < ny and 0 <= c < nx:
                    out[k, a, b] = np.float32(block[r, c])
                else:
                    out[k, a, b] = np.nan


@numba.njit(cache=True, nogil=True)
def join_pieces(index: np.ndarray, parts: np.ndarray, out: np.ndarray, seen: np.ndarray) -> None:  # pragma: no cover
    """Put each part of ``parts`` into the window ``out[index[k]]`` (parts with a negative index
    are left out): a copy for a window's first part, the element-wise ``fmax`` with what is
    there for the next ones; ``seen`` counts the parts of each window (``out[i]`` is only
    written when ``seen[i] > 0``)."""
    for k in range(len(index)):
        i = index[k]
        if i < 0:
            continue
        if seen[i] == 0:
            out[i] = parts[k]
        else:
            for a in range(parts.shape[1]):
                for b in range(parts.shape[2]):
                    v = parts[k, a, b]
                    w = out[i, a, b]
                    if w != w or v > w:  # w is NaN, or v larger
                        out[i, a, b] = v
        seen[i] += 1
