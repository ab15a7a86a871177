"""Polynomial surfaces of normalised coordinates (the ramps of Deramp and NuthKaabDeramp).

:func:`subtract_polynomial_surface` is ``(block - polynomial_surface(u, v, ...)).astype(block.dtype)``
on a grid in one compiled pass (no float64 copy of the block per power of ``v``), bit for bit
(tested): the same float64 operations in the same order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

__all__ = ["polynomial_surface", "subtract_polynomial_surface"]


def polynomial_surface(
    u: np.ndarray, v: np.ndarray, terms: Sequence[Sequence[int]], coefs: Sequence[float]
) -> np.ndarray:
    """``sum_k c_k u^i_k v^j_k`` (float64), ``u`` and ``v`` broadcast against each other.

    Evaluated as ``sum_j v^j (sum_i c_ij u^i)``: one polynomial of ``u`` per power of ``v``,
    so on a grid given as a row of ``u`` and a column of ``v`` the 2-D work is one product
    and one sum per power of ``v``.

    Examples
    --------
    >>> u = np.array([[0.0, 1.0, 2.0]])
    >>> v = np.array([[0.0], [1.0]])
    >>> polynomial_surface(u, v, [(0, 0), (1, 0), (0, 1)], [1.0, 2.0, 10.0]).tolist()
    [[1.0, 3.0, 5.0], [11.0, 13.0, 15.0]]
    """
    u = np.asarray(u, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    order, by_vpow = _by_vpow(u, terms, coefs)
    out = np.zeros(np.broadcast(u, v).shape)
    vj = np.ones_like(v)
    for j in range(order + 1):
        if j in by_vpow:
            out += vj * by_vpow[j]
        vj = vj * v
    return out


def _by_vpow(u: np.ndarray, terms: Sequence[Sequence[int]], coefs: Sequence[float]) -> tuple[int, dict[int, np.ndarray]]:
    """The order, and ``sum_i c_ij u^i`` for each power ``j`` of ``v`` present (float64)."""
    order = max((int(i) + int(j) for i, j in terms), default=0)
    upow = [np.ones_like(u)]
    for _ in range(order):
        upow.append(upow[-1] * u)
    by_vpow: dict[int, np.ndarray] = {}
    for (i, j), c in zip(terms, coefs):
        by_vpow[int(j)] = by_vpow.get(int(j), np.zeros_like(u)) + float(c) * upow[int(i)]
    return order, by_vpow


def subtract_polynomial_surface(
    block: np.ndarray, u: np.ndarray, v: np.ndarray, terms: Sequence[Sequence[int]], coefs: Sequence[float]
) -> np.ndarray:
    """``block - polynomial_surface(u[None, :], v[:, None], terms, coefs)`` in the block's dtype.

    ``u`` are the block's columns' coordinates, ``v`` its rows'. One compiled pass for a
    float block (a strided view too: the trimmed block of a halo pass); the same numbers as the
    numpy expression, bit for bit.

    Examples
    --------
    >>> block = np.array([[10.0, 10.0, 10.0], [20.0, 20.0, 20.0]], dtype=np.float32)
    >>> subtract_polynomial_surface(block, np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.0]),
    ...                             [(0, 0), (1, 0), (0, 1)], [1.0, 2.0, 10.0]).tolist()
    [[9.0, 7.0, 5.0], [9.0, 7.0, 5.0]]
    """
    u = np.asarray(u, dtype=np.float64).reshape(-1)
    v = np.asarray(v, dtype=np.float64).reshape(-1)
    if block.dtype not in (np.float32, np.float64) or block.ndim != 2:
        acc = polynomial_surface(u[None, :], v[:, None], terms, coefs)
        np.subtract(block, acc, out=acc)
        return acc.astype(block.dtype, copy=False)
    order, by_vpow = _by_vpow(u, terms, coefs)
    rows = np.zeros((order + 1, u.size))
    used = np.zeros(order + 1, dtype=np.bool_)
    for j, row in by_vpow.items():
        rows[j], used[j] = row, True
    out = np.empty(block.shape, dtype=block.dtype)
    _subtract_rows(block, v, rows, used, out)
    return out


@numba.njit(cache=True, nogil=True)
def _subtract_rows(block: np.ndarray, v: np.ndarray, rows: np.ndarray, used: np.ndarray,
                   out: np.ndarray) -> None:  # pragma: no cover - compiled
    # polynomial_surface's order: acc = 0; for each power j of v: acc += v^j * row_j, v^j by products
    n, m = block.shape
    k = rows.shape[0]
    for i in range(n):
        vi = v[i]
        for c in range(m):
            acc = 0.0
            vj = 1.0
            for j in range(k):
                if used[j]:
                    acc += vj * rows[j, c]
                vj = vj * vi
            out[i, c] = block[i, c] - acc
