"""Polynomial surfaces of normalised coordinates (the ramps of Deramp and NuthKaabDeramp)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["polynomial_surface"]


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
    order = max((int(i) + int(j) for i, j in terms), default=0)
    upow = [np.ones_like(u)]
    for _ in range(order):
        upow.append(upow[-1] * u)
    by_vpow: dict[int, np.ndarray] = {}
    for (i, j), c in zip(terms, coefs):
        by_vpow[int(j)] = by_vpow.get(int(j), np.zeros_like(u)) + float(c) * upow[int(i)]
    out = np.zeros(np.broadcast(u, v).shape)
    vj = np.ones_like(v)
    for j in range(order + 1):
        if j in by_vpow:
            out += vj * by_vpow[j]
        vj = vj * v
    return out
