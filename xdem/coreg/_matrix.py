"""4 x 4 matrices about a centre: the frame of ``to_matrix(centre=...)`` and ``from_matrix(centre=...)``.

xdem's matrices are about the CRS origin: ``P' = M P`` with ``P = (x, y, z, 1)`` in the frame's
coordinates. Upstream xdem (0.2.3) reports its matrix about the fit's centroid ``c``
(``Coreg.to_matrix()`` with ``Coreg.centroid()``, applied as ``P' = M_c (P - c) + c``). Both
describe the same transform: ``M = T(c) M_c T(-c)``, ``T`` a translation. They differ only in
the translation column, ``M[:3, 3] = M_c[:3, 3] + c - R c``: at UTM northings of 8.7e6 m, a
rotation of 1e-6 rad moves it by about 8.7 m.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from xdem.errors import InputError

__all__ = ["matrix_about", "matrix_from_about", "as_centre"]


def as_centre(centre: Sequence[float] | np.ndarray, what: str = "centre") -> np.ndarray:
    """``centre`` as 3 finite float64 values, else a one-line :class:`~xdem.errors.InputError`."""
    try:
        c = np.asarray(centre, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{what} must be 3 numbers (x, y, z), got {centre!r}") from exc
    if c.shape != (3,) or not np.all(np.isfinite(c)):
        raise InputError(f"{what} must be 3 finite numbers (x, y, z), got {centre!r}")
    return c


def matrix_about(matrix: np.ndarray, centre: Sequence[float] | np.ndarray) -> np.ndarray:
    """The matrix ``M_c`` of the transform ``P' = M P`` about ``centre``: ``P' - c = M_c (P - c)``.

    Examples
    --------
    >>> m = np.eye(4)
    >>> m[:3, :3] = [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]  # 90 degrees about z
    >>> matrix_about(m, (10.0, 0.0, 0.0))[:3, 3].tolist()  # the centre moves by (-10, 10, 0)
    [-10.0, 10.0, 0.0]
    """
    m = np.asarray(matrix, dtype=np.float64)
    c = as_centre(centre)
    out: np.ndarray = m.copy()
    out[:3, 3] = m[:3, 3] + m[:3, :3] @ c - c
    return out


def matrix_from_about(matrix: np.ndarray, centre: Sequence[float] | np.ndarray) -> np.ndarray:
    """The matrix about the origin of a transform given about ``centre`` (inverse of :func:`matrix_about`).

    Examples
    --------
    >>> m = np.eye(4)
    >>> m[:3, :3] = [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    >>> back = matrix_from_about(matrix_about(m, (5.0, 7.0, 1.0)), (5.0, 7.0, 1.0))
    >>> bool(np.allclose(back, m))
    True
    """
    mc = np.asarray(matrix, dtype=np.float64)
    c = as_centre(centre)
    out: np.ndarray = mc.copy()
    out[:3, 3] = mc[:3, 3] + c - mc[:3, :3] @ c
    return out
