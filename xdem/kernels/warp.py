"""Kernels of the mapping-driven warp: NaN-local interpolation of one source window at
arbitrary fractional pixel positions (one output chunk at a time).

The weights are those of :mod:`xdem.kernels.interp` (bilinear 2 x 2, Keys cubic 4 x 4, no
pre-filter), so a NaN only reaches the outputs whose footprint gives it a non-zero weight,
exactly as :func:`xdem.kernels.interp.shift_block_kernel` does for a pure shift.

:func:`interp_positions_kernel` runs a loop compiled with numba (one pass over the positions,
the GIL released, so dask's threads run it in parallel); :func:`interp_positions_numpy` is the
same computation in vectorised numpy, in the same order of operations (the tests hold the two
equal), about 40 times slower: every one of the 16 cubic terms is a few passes over
position-sized arrays. numba is already installed with scikit-gstat; the compiled loop is
cached on disk after its first use (about a second).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numba
import numpy as np

from xdem.kernels._interp_loops import CODES, weights_into
from xdem.kernels.interp import weights_1d

__all__ = ["interp_positions_kernel", "interp_positions_numpy", "lattice_bilinear", "cubic_nodes", "lattice_cubic",
           "lattice_cubic_at", "spot_steps", "interp_one", "CODES"]
#: ``CODES`` (resampling name -> code of the compiled weights) is :data:`xdem.kernels._interp_loops.CODES`.

@numba.njit(cache=True, nogil=True)
def interp_one(window: np.ndarray, r: float, c: float, code: int, wr: np.ndarray,
               wc: np.ndarray) -> float:  # pragma: no cover - compiled
    """One position of :func:`interp_positions_kernel` (window pixel units; ``code`` from
    ``CODES``; ``wr``, ``wc``: scratch arrays of 4), for other compiled loops."""
    if not (math.isfinite(r) and math.isfinite(c)):
        return np.nan
    h, w = window.shape
    taps = 2 if code == 0 else 4
    ir, ic = math.floor(r), math.floor(c)
    r0 = int(ir) + weights_into(r - ir, code, wr)
    c0 = int(ic) + weights_into(c - ic, code, wc)
    acc = 0.0
    for a in range(taps):
        row = r0 + a
        for b in range(taps):
            weight = wr[a] * wc[b]
            if weight == 0.0:  # neither needs its pixel nor lets its NaN through
                continue
            col = c0 + b
            if row < 0 or row >= h or col < 0 or col >= w:
                return np.nan
            v = window[row, col]
            if math.isnan(v):
                return np.nan
            acc += weight * v
    return acc


@numba.njit(cache=True, nogil=True)
def _interp_loop(window: np.ndarray, prow: np.ndarray, pcol: np.ndarray, code: int,
                 out: np.ndarray) -> None:  # pragma: no cover - compiled
    wr = np.empty(4)
    wc = np.empty(4)
    for i in range(prow.size):
        out[i] = interp_one(window, prow[i], pcol[i], code, wr, wc)


def interp_positions_kernel(
    window: np.ndarray, prow: np.ndarray, pcol: np.ndarray, *, resampling: str = "bilinear"
) -> np.ndarray:
    """Interpolate a 2-D ``window`` at fractional positions ``(prow, pcol)`` (compiled loop).

    Parameters
    ----------
    window
        ``(h, w)`` source values; the value of ``window[i, j]`` is at position ``(i, j)``.
    prow, pcol
        Positions (any equal shapes) in the window's pixel units; NaN positions give NaN.
    resampling
        ``"bilinear"``, ``"cubic"`` or ``"lagrange"``.

    Returns
    -------
    numpy.ndarray
        float64 of the positions' shape; NaN where the footprint leaves the window or
        touches a NaN with a non-zero weight.

    Examples
    --------
    >>> w = np.arange(16.0).reshape(4, 4)
    >>> interp_positions_kernel(w, np.array([1.5]), np.array([2.0])).tolist()
    [8.0]
    >>> interp_positions_kernel(w, np.array([3.5]), np.array([0.0])).tolist()  # leaves the window
    [nan]
    """
    if resampling not in CODES:
        weights_1d(0.0, resampling)  # the one error message for an unknown resampling
    prow, pcol = np.broadcast_arrays(np.asarray(prow, dtype=np.float64), np.asarray(pcol, dtype=np.float64))
    out = np.empty(prow.shape, dtype=np.float64)
    h, w = np.shape(window)
    if h == 0 or w == 0:
        out.fill(np.nan)
        return out
    # float32 and float64 windows are read as they are (the loop is compiled for each; a float32
    # value enters the float64 sums exactly): no float64 copy of the window per call
    src = np.ascontiguousarray(window) if np.asarray(window).dtype in (np.float32, np.float64) else \
        np.ascontiguousarray(window, dtype=np.float64)
    _interp_loop(src, np.ascontiguousarray(prow).reshape(-1),
                 np.ascontiguousarray(pcol).reshape(-1), CODES[resampling], out.reshape(-1))
    return out


def interp_positions_numpy(
    window: np.ndarray, prow: np.ndarray, pcol: np.ndarray, *, resampling: str = "bilinear"
) -> np.ndarray:
    """:func:`interp_positions_kernel` in vectorised numpy: the reference the tests hold it to.

    Same parameters and result. The terms are accumulated one at a time into one buffer (no
    stack of per-term arrays), so it holds a few position-sized arrays whatever the
    interpolation.

    Examples
    --------
    >>> w = np.arange(16.0).reshape(4, 4)
    >>> interp_positions_numpy(w, np.array([1.5]), np.array([2.0]), resampling="cubic").tolist()
    [8.0]
    """
    h, w = window.shape
    finite = np.isfinite(prow) & np.isfinite(pcol)
    if h == 0 or w == 0:
        return np.full(np.shape(prow), np.nan)
    pr = np.where(finite, prow, 0.0)
    pc = np.where(finite, pcol, 0.0)
    ir = np.floor(pr).astype(np.int64)
    ic = np.floor(pc).astype(np.int64)
    fr, fc = pr - ir, pc - ic
    out = np.zeros(pr.shape, dtype=np.float64)
    outside = ~finite
    flat = window.astype(np.float64, copy=False).ravel()
    col_terms = [(ic + ocol, wc) for ocol, wc in weights_1d(fc, resampling)]
    for orow, wr in weights_1d(fr, resampling):
        rows = ir + orow
        row_out = (rows < 0) | (rows >= h)
        base = np.clip(rows, 0, h - 1) * w
        for cols, wc in col_terms:
            weight = wr * wc
            used = weight != 0.0  # a zero weight neither needs its pixel nor lets its NaN through
            outside |= used & (row_out | (cols < 0) | (cols >= w))
            out += np.where(used, weight * flat[base + np.clip(cols, 0, w - 1)], 0.0)
    out[outside] = np.nan
    return out


@numba.njit(cache=True, nogil=True)
def _lattice_loop(values: np.ndarray, jr: np.ndarray, fr: np.ndarray, jc: np.ndarray, fc: np.ndarray,
                  out: np.ndarray) -> None:  # pragma: no cover - compiled
    last_r, last_c = values.shape[0] - 1, values.shape[1] - 1
    for i in range(jr.size):
        r0 = jr[i]
        r1 = min(r0 + 1, last_r)
        for j in range(jc.size):
            c0 = jc[j]
            c1 = min(c0 + 1, last_c)
            top = values[r0, c0] * (1.0 - fc[j]) + values[r0, c1] * fc[j]
            bottom = values[r1, c0] * (1.0 - fc[j]) + values[r1, c1] * fc[j]
            out[i, j] = top * (1.0 - fr[i]) + bottom * fr[i]


def lattice_bilinear(values: np.ndarray, lr: np.ndarray, lc: np.ndarray, rows: np.ndarray,
                     cols: np.ndarray) -> np.ndarray:
    """Bilinear interpolation of ``values`` given on the lattice ``lr x lc`` (sorted node
    indices) at the grid ``rows x cols`` (compiled loop; outside the nodes, the end cells are
    extended linearly).

    Examples
    --------
    >>> v = np.array([[0.0, 10.0], [100.0, 110.0]])
    >>> lattice_bilinear(v, np.array([0, 16]), np.array([0, 16]), np.array([0, 8]), np.array([4])).tolist()
    [[2.5], [52.5]]
    """
    def weights(nodes: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        at = np.asarray(at, dtype=np.float64)
        if nodes.size == 1:
            return np.zeros(at.size, dtype=np.int64), np.zeros(at.size)
        j = np.clip(np.searchsorted(nodes, at, side="right") - 1, 0, nodes.size - 2)
        return j.astype(np.int64), (at - nodes[j]) / (nodes[j + 1] - nodes[j])

    jc, fc = weights(lc, cols)
    jr, fr = weights(lr, rows)
    out = np.empty((jr.size, jc.size), dtype=np.float64)
    _lattice_loop(np.ascontiguousarray(values, dtype=np.float64), jr, fr, jc, fc, out)
    return out


def cubic_nodes(lo: int, hi: int, step: int) -> np.ndarray:
    """Multiples of ``step`` from one before ``lo`` to one after the first at or after ``hi``: the
    nodes a cubic convolution over ``[lo, hi]`` needs (the same nodes whatever the span's origin).

    Examples
    --------
    >>> cubic_nodes(40, 100, 32).tolist()
    [0, 32, 64, 96, 128, 160]
    """
    return np.arange((int(lo) // step - 1) * step, (-(-int(hi) // step) + 1) * step + 1, step)


def _cubic_weights(nodes: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keys' cubic convolution (``a = -1/2``) on the uniform ``nodes``: for each of ``at`` the node
    at or before it (at least the second, at most the third from the end) and its four weights."""
    t = (np.asarray(at, dtype=np.float64) - nodes[0]) / (nodes[1] - nodes[0])
    j = np.clip(np.floor(t).astype(np.int64), 1, nodes.size - 3)
    f = t - j
    w = np.stack([((-0.5 * f + 1.0) * f - 0.5) * f, (1.5 * f - 2.5) * f * f + 1.0,
                  ((-1.5 * f + 2.0) * f + 0.5) * f, (0.5 * f - 0.5) * f * f], axis=-1)
    return j, w


@numba.njit(cache=True, nogil=True)
def _cubic_grid_loop(values: np.ndarray, jr: np.ndarray, wr: np.ndarray, jc: np.ndarray, wc: np.ndarray,
                     tmp: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
    for a in range(values.shape[0]):  # along the columns, on every row of nodes
        for j in range(jc.size):
            c = jc[j]
            tmp[a, j] = (wc[j, 0] * values[a, c - 1] + wc[j, 1] * values[a, c] + wc[j, 2] * values[a, c + 1]
                         + wc[j, 3] * values[a, c + 2])
    for i in range(jr.size):  # then along the rows
        r = jr[i]
        for j in range(jc.size):
            out[i, j] = wr[i, 0] * tmp[r - 1, j] + wr[i, 1] * tmp[r, j] + wr[i, 2] * tmp[r + 1, j] + wr[i, 3] * tmp[r + 2, j]


def lattice_cubic(values: np.ndarray, lr: np.ndarray, lc: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Cubic convolution (Keys, ``a = -1/2``: exact for quadratics) of ``values`` given on the
    uniform lattice ``lr x lc`` (:func:`cubic_nodes`: a node beyond ``rows`` and ``cols`` on
    each side) at the grid ``rows x cols`` (compiled, separable).

    Examples
    --------
    >>> lr = cubic_nodes(0, 40, 16); v = (lr[:, None] - 2.0 * lr[None, :]) ** 2
    >>> lattice_cubic(v, lr, lr, np.array([8, 40]), np.array([4])).tolist()  # (r - 2 c)^2
    [[0.0], [1024.0]]
    """
    jr, wr = _cubic_weights(lr, rows)
    jc, wc = _cubic_weights(lc, cols)
    out = np.empty((jr.size, jc.size), dtype=np.float64)
    tmp = np.empty((lr.size, jc.size), dtype=np.float64)
    _cubic_grid_loop(np.ascontiguousarray(values, dtype=np.float64), jr, wr, jc, wc, tmp, out)
    return out


def spot_steps(exact: Callable[[np.ndarray, np.ndarray], Sequence[np.ndarray]], rows: np.ndarray, cols: np.ndarray,
               *, start: int, tolerances: Sequence[float]) -> np.ndarray:
    """For each spot ``(rows[i], cols[i])``: the largest of ``start, start // 2, ...`` (down to 2)
    whose lattice (nodes at the multiples of the step) interpolated by :func:`lattice_cubic` errs
    by at most ``tolerances[k]`` on the ``k``-th value of ``exact`` at the centres of the 3 x 3
    lattice cells around the spot; 1 (evaluate exactly) when none does.

    ``exact(r, c)`` gives the exact values at broadcastable integer pixel positions (a list of
    arrays of the broadcast shape). Where a value is not finite it is not checked. Give the spots
    where the values bend most (a thin-plate field's kernel: its centres), where a lattice cell's
    interpolation errs most.

    Examples
    --------
    >>> quad = lambda r, c: [np.broadcast_to((r - 2.0 * c) ** 2, np.broadcast_shapes(r.shape, c.shape))]
    >>> spot_steps(quad, np.array([100]), np.array([7]), start=32, tolerances=[1e-9]).tolist()  # exact for quadratics
    [32]
    >>> kink = lambda r, c: [np.broadcast_to(np.abs(r - 100.3) * 1.0, np.broadcast_shapes(r.shape, c.shape))]
    >>> spot_steps(kink, np.array([100, 400]), np.array([7, 7]), start=32, tolerances=[1e-3]).tolist()
    [1, 32]
    """
    rows = np.floor(np.asarray(rows, dtype=np.float64)).astype(np.int64).ravel()
    cols = np.floor(np.asarray(cols, dtype=np.float64)).astype(np.int64).ravel()
    out = np.ones(rows.size, dtype=np.int64)
    todo = np.arange(rows.size)
    step = int(start)
    while step > 1 and todo.size:
        offsets = step * np.arange(-2, 4)  # six nodes: the three middle cells have two nodes each side
        middles = step * np.arange(-1, 2) + step // 2
        jm, wm = _cubic_weights(offsets, middles)
        weights = np.zeros((middles.size, offsets.size))
        for i, j in enumerate(jm):
            weights[i, j - 1:j + 3] = wm[i]
        br, bc = rows[todo] // step * step, cols[todo] // step * step
        nodes = exact((br[:, None] + offsets)[:, :, None], (bc[:, None] + offsets)[:, None, :])
        check = exact((br[:, None] + middles)[:, :, None], (bc[:, None] + middles)[:, None, :])
        ok = np.ones(todo.size, dtype=bool)
        for v, c, tol in zip(nodes, check, tolerances):
            ok &= _within(np.einsum("ia,nab,jb->nij", weights, v, weights), c, tol)
        out[todo[ok]] = step
        todo = todo[~ok]
        step //= 2
    return out


def _within(got: np.ndarray, want: np.ndarray, tolerance: float) -> np.ndarray:
    """Per spot (first axis): whether ``got`` is within ``tolerance`` of ``want`` wherever both are finite."""
    bad = np.isfinite(got) & np.isfinite(want) & ~(np.abs(got - want) <= tolerance)
    fine: np.ndarray = ~bad.reshape(bad.shape[0], -1).any(axis=1)
    return fine


@numba.njit(cache=True, nogil=True)
def _cubic_points_loop(values: np.ndarray, jr: np.ndarray, wr: np.ndarray, jc: np.ndarray, wc: np.ndarray,
                       out: np.ndarray) -> None:  # pragma: no cover - compiled
    for p in range(jr.size):
        r, c = jr[p], jc[p]
        for k in range(values.shape[0]):
            acc = 0.0
            for a in range(4):
                v = values[k, r + a - 1]
                acc += wr[p, a] * (wc[p, 0] * v[c - 1] + wc[p, 1] * v[c] + wc[p, 2] * v[c + 1] + wc[p, 3] * v[c + 2])
            out[k, p] = acc


def lattice_cubic_at(values: np.ndarray, lr: np.ndarray, lc: np.ndarray, rows: np.ndarray,
                     cols: np.ndarray) -> np.ndarray:
    """:func:`lattice_cubic` at scattered points ``(rows[k], cols[k])``, of one lattice of values
    ``(len(lr), len(lc))`` or of a stack of them ``(m, len(lr), len(lc))`` (then ``(m, n)`` out).

    Examples
    --------
    >>> lr = cubic_nodes(0, 40, 16); v = (lr[:, None] - 2.0 * lr[None, :]) ** 2
    >>> lattice_cubic_at(v, lr, lr, np.array([8.0, 40.0]), np.array([4.0, 2.5])).tolist()
    [0.0, 1225.0]
    """
    jr, wr = _cubic_weights(lr, rows)
    jc, wc = _cubic_weights(lc, cols)
    stack = np.ascontiguousarray(values, dtype=np.float64)
    out = np.empty((1 if stack.ndim == 2 else stack.shape[0], jr.size))
    _cubic_points_loop(stack.reshape((-1,) + stack.shape[-2:]), jr, wr, jc, wc, out)
    return out[0] if stack.ndim == 2 else out
