"""N-dimensional binning of ``dh`` by 1 to 3 variables, and evaluation of bin tables.

Statistics are exact on the points given (the subsample drawn by the bias correction).
A bin holding fewer than ``min_count`` points is left empty (NaN) and reported with an
:class:`~xdem.errors.EmptyBinWarning`. Evaluating a table at new values:

- ``"linear"``: empty bins are first filled from their neighbours (1-D: linear between the
  nearest filled bins, constant beyond them; N-D: linear interpolation over the filled bin
  centres in bin-index space, nearest filled bin outside their hull), then the table is
  interpolated linearly between bin centres; values beyond the outer centres take the
  outer value (no extrapolation).
- ``"per_bin"``: the value of the bin holding the point; points outside the outer bin edges
  get NaN (upstream xdem's ``get_perbin_nd_binning``; the last bin includes its upper edge),
  points falling in an empty bin get no correction (0).
- ``"per_bin_clamp"``: as ``"per_bin"`` but the outer bins extend to infinity (points beyond
  them take the outer bins' values; ``"per_bin"`` before issue 23).

NaN variables give NaN.

Examples
--------
>>> import numpy as np
>>> x = np.arange(100.0)
>>> edges = [make_edges(x, 4, "x")]
>>> table, counts = binned_statistic([x], 2 * x, edges, np.nanmedian, min_count=1)
>>> table.tolist(), counts.tolist()
([24.0, 74.0, 124.0, 174.0], [25, 25, 25, 25])
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import SupportsInt, cast

import numpy as np

from xdem.errors import EmptyBinWarning, InputError, NotEnoughDataError
from xdem.kernels.robust import bin_index, group_by
from xdem.typing import BinSpec

__all__ = ["make_edges", "binned_statistic", "bin_centres", "fill_empty_bins", "evaluate_table", "APPLY_METHODS"]

#: Accepted values of ``bin_apply_method``.
APPLY_METHODS = ("linear", "per_bin", "per_bin_clamp")


def make_edges(values: np.ndarray, spec: BinSpec, name: str) -> np.ndarray:
    """Bin edges of one variable: ``spec`` bins of equal width over the range of ``values``,
    or ``spec`` itself if it is a sequence of increasing edges."""
    if np.isscalar(spec):
        if isinstance(spec, bool) or not isinstance(spec, SupportsInt) or int(spec) != cast(float, spec) or int(spec) < 2:
            raise InputError(f"bin_sizes for '{name}' must be an integer >= 2 or increasing edges, got {spec!r}")
        lo, hi = float(np.min(values)), float(np.max(values))
        if not hi > lo:
            raise NotEnoughDataError(
                f"bias variable '{name}' is constant ({lo}) over the sampled pixels; it cannot be binned"
            )
        return np.linspace(lo, hi, int(spec) + 1)
    edges = np.asarray(spec, dtype=np.float64).ravel()
    if edges.size < 3 or not np.all(np.diff(edges) > 0) or not np.all(np.isfinite(edges)):
        raise InputError(f"bin edges for '{name}' must be at least 3 finite, strictly increasing values, got {spec!r}")
    return edges


def bin_centres(edges: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Centres of the bins of each variable."""
    return [0.5 * (np.asarray(e)[:-1] + np.asarray(e)[1:]) for e in edges]


def binned_statistic(
    xs: Sequence[np.ndarray],
    y: np.ndarray,
    edges: Sequence[np.ndarray],
    statistic: Callable[[np.ndarray], float],
    *,
    min_count: int,
) -> tuple[np.ndarray, np.ndarray]:
    """``statistic`` of ``y`` in each N-D bin, and the number of points per bin.

    Points outside the edges are ignored. Bins with fewer than ``min_count`` points are
    NaN (an :class:`~xdem.errors.EmptyBinWarning` says how many).
    """
    shape = tuple(len(e) - 1 for e in edges)
    idx = [bin_index(np.asarray(x, dtype=np.float64), e, outside="drop") for x, e in zip(xs, edges)]
    inside = np.logical_and.reduce([i >= 0 for i in idx])
    flat = np.ravel_multi_index(tuple(i[inside] for i in idx), shape) if inside.any() else np.array([], dtype=np.int64)
    yv = np.asarray(y, dtype=np.float64)[inside]
    counts = np.bincount(flat, minlength=int(np.prod(shape)))
    table = np.full(int(np.prod(shape)), np.nan)
    g = group_by(flat)
    y_s = yv[g.order]
    for key, s0, s1 in zip(g.keys, g.starts, g.ends):
        if s1 - s0 >= min_count:
            table[key] = float(statistic(y_s[s0:s1]))
    n_empty = int(np.isnan(table).sum())
    if n_empty:
        warnings.warn(
            f"{n_empty} of {table.size} bins have fewer than {min_count} valid values and are left empty (NaN); "
            "use fewer bins (bin_sizes) or a larger subsample",
            EmptyBinWarning, stacklevel=3,
        )
    return table.reshape(shape), counts.reshape(shape)


def fill_empty_bins(table: np.ndarray) -> np.ndarray:
    """Copy of ``table`` with NaN bins filled from their neighbours (see the module notes)."""
    table = np.asarray(table, dtype=np.float64)
    good = np.isfinite(table)
    if not good.any():
        raise NotEnoughDataError("every bin is empty; use fewer bins (bin_sizes) or a larger subsample")
    if good.all():
        filled: np.ndarray = table.copy()
        return filled
    if table.ndim == 1:
        pos = np.arange(table.size, dtype=np.float64)
        line: np.ndarray = np.interp(pos, pos[good], table[good])
        return line
    from scipy.interpolate import griddata

    grid = np.indices(table.shape).reshape(table.ndim, -1).T.astype(np.float64)
    pts, vals = grid[good.ravel()], table[good]
    out: np.ndarray = table.ravel().copy()
    todo = ~good.ravel()
    try:
        out[todo] = griddata(pts, vals, grid[todo], method="linear")
    except Exception:  # degenerate configuration (e.g. filled bins on one line): nearest only
        pass
    rest = ~np.isfinite(out)
    if rest.any():
        out[rest] = griddata(pts, vals, grid[rest], method="nearest")
    return out.reshape(table.shape)


def evaluate_table(
    values: Sequence[np.ndarray], edges: Sequence[np.ndarray], table: np.ndarray, method: str
) -> np.ndarray:
    """Bias at points ``values`` (one 1-D array per variable) from a bin table.

    For ``method="linear"`` pass the table filled by :func:`fill_empty_bins`.

    Examples
    --------
    >>> edges, table = [np.array([0.0, 1.0, 2.0])], np.array([10.0, 20.0])
    >>> evaluate_table([np.array([-0.5, 0.5, 2.0, 2.5])], edges, table, "per_bin").tolist()
    [nan, 10.0, 20.0, nan]
    >>> evaluate_table([np.array([-0.5, 2.5])], edges, table, "per_bin_clamp").tolist()
    [10.0, 20.0]
    """
    vals = [np.asarray(v, dtype=np.float64) for v in values]
    n = vals[0].shape[0]
    finite = np.logical_and.reduce([np.isfinite(v) for v in vals])
    out = np.full(n, np.nan)
    if not finite.any():
        return out
    vf = [v[finite] for v in vals]
    if method in ("per_bin", "per_bin_clamp"):
        clamp = method == "per_bin_clamp"
        idx = [bin_index(v, e, outside="clip" if clamp else "drop") for v, e in zip(vf, edges)]
        inside = np.logical_and.reduce([i >= 0 for i in idx])
        got = np.full(inside.shape, np.nan)
        vals = np.asarray(table)[tuple(i[inside] for i in idx)]
        got[inside] = np.where(np.isfinite(vals), vals, 0.0)  # an empty bin: no correction
        out[finite] = got
        return out
    centres = bin_centres(edges)
    if len(vf) == 1:
        out[finite] = np.interp(vf[0], centres[0], table)
        return out
    from scipy.interpolate import RegularGridInterpolator

    pts = np.column_stack([np.clip(v, c[0], c[-1]) for v, c in zip(vf, centres)])
    out[finite] = RegularGridInterpolator(tuple(centres), table, method="linear", bounds_error=False)(pts)
    return out
