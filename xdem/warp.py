"""The mapping-driven warp: apply a correction defined in one CRS to a DEM in any CRS.

A fitted coregistration lives in the reference's CRS and units (its *frame*). To move a DEM
that is in another CRS (rotated grid axes, feet, degrees) the correction is applied where it
is defined, pixel by pixel::

    output pixel centre (output grid, output CRS)
        -> frame CRS                                  (pyproj, exact)
        -> inverse of the fitted horizontal motion    (x - shift_x, y - shift_y)
        -> source CRS -> source pixel position         (pyproj, exact; inverse geotransform)
        -> NaN-local bilinear / cubic interpolation   (:mod:`xdem.kernels.warp`)
        + vertical part evaluated at the frame point  (shift_z, minus fitted ramps)

Why a hand-built graph rather than a library: GDAL's warper (and odc-geo's ``xr_reproject``
over it) only maps between CRSs; it cannot insert the fitted motion between them, and a
second resampling (reproject to the frame, shift, reproject back) would add its noise twice.
The graph gives each output chunk only the source blocks its mapped footprint touches (found
at graph time from the chunk's boundary, mapped the same way, plus the kernel's margin), each
cut out as a copy, so no whole source chunk is pinned and no global halo exists; the kernel
works on strips of rows so that a task holds a few strip-sized arrays besides its window.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import dask.array as da
import numpy as np
import xarray as xr
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph
from pyproj import CRS, Transformer

from xdem._frame_op import FrameOp, NotMergeable, Surface
from xdem.io.grid import Grid, crs_key, dask_data, same_crs
from xdem.io.sources import find_sources, region_reader, register_source
from xdem.kernels.field import ThinPlateField, compose
from xdem.kernels.interp import RESAMPLINGS, footprint
from xdem.kernels.rigid import FIXED_POINT_TOLERANCE, MAX_FIXED_POINT_ITERATIONS, InverseCoefficients
from xdem.kernels.rigid_warp import one_step_level, rigid_affine_strip, rigid_arrays_strip
from xdem.kernels.warp import cubic_nodes, interp_positions_kernel, lattice_bilinear, lattice_cubic, spot_steps

__all__ = ["Grid", "Surface", "FrameOp", "NotMergeable", "warp_dem", "field_spots", "crs_key", "same_crs"]

#: Output rows processed at once inside a chunk task (bounds the per-task temporaries).
STRIP_ROWS = 256
#: Spacing (pixels) of the boundary points whose images bound a chunk's source footprint.
BOUNDARY_STEP = 8
#: Pixels added around the mapped footprint (curvature of the mapping between boundary points).
SAFETY_MARGIN = 2
#: Spacing (pixels) of the lattice on which the mapping is computed exactly inside a task.
LATTICE_STEP = 16
#: Spacing (pixels) of the lattice of a warp by displacement fields (cubic convolution between its
#: nodes: within 3.7e-7 px of the exact fields of the 8000^2 blockwise benchmark, where bilinear
#: on :data:`LATTICE_STEP` was within 5.6e-7 px).
FIELD_LATTICE_STEP = 32
#: Elevations (evenly spread over the assumed range) a tilting warp restarts a pixel from when
#: its source is NaN at the first guess.
RESTART_LEVELS = 11
#: Largest error (source pixels) allowed for the mapping interpolated between lattice nodes.
LATTICE_TOLERANCE = 1e-3


@lru_cache(maxsize=64)
def _transformer(src: str, dst: str, thread: int) -> Transformer:
    # one per thread: a Transformer holds a PROJ context, which is not shared safely
    return Transformer.from_crs(CRS.from_user_input(src), CRS.from_user_input(dst), always_xy=True)


def _to(src: str, dst: str, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if same_crs(src, dst):
        return x, y
    xo, yo = _transformer(src, dst, threading.get_ident()).transform(x, y, errcheck=False)
    return np.asarray(xo, dtype=np.float64), np.asarray(yo, dtype=np.float64)


@dataclass(frozen=True)
class _Spec:
    """Everything a warp task needs (picklable).

    ``z_range``: moved elevations (frame units) assumed when bounding a chunk's footprint for an
    op whose positions depend on elevation (a rotation about x or y); an elevation outside it can
    only make :func:`_check_inside` fail loudly, never give a wrong value. ``field_step``: the
    spacing of the lattice of a warp by displacement fields, chosen once for the whole grid
    (:func:`_field_step`)."""

    grid: Grid
    src: Grid
    op: FrameOp
    resampling: str
    z_range: tuple[float, float] = (0.0, 0.0)
    field_step: int = FIELD_LATTICE_STEP

    @property
    def tilts(self) -> bool:
        """Whether source positions depend on elevation."""
        inv = self.op.inverse()
        return inv is not None and inv.tilts

    @property
    def z0(self) -> float:
        """Elevation at which positions are computed (and from which they are extrapolated)."""
        return 0.5 * (self.z_range[0] + self.z_range[1]) if self.tilts else 0.0


def _source_positions(spec: _Spec, rows: np.ndarray, cols: np.ndarray, z: float = 0.0) -> tuple[Any, ...]:
    """Source pixel positions (row, col; value of pixel ``i`` at ``i``) of output pixels whose
    moved elevation is ``z`` (used only by a rotation about x or y), and the frame coordinates
    of those output pixels."""
    x, y = spec.grid.centres(rows, cols)
    xf, yf = _to(spec.grid.crs, spec.op.frame, *np.broadcast_arrays(x, y))
    inv = spec.op.inverse()
    vz = None
    if spec.op.fields:
        fx, fy, vz = compose(spec.op.fields, xf, yf)
    elif inv is None:
        fx, fy = xf - spec.op.shift[0], yf - spec.op.shift[1]
    else:
        fx, fy = inv.q0(xf, yf)
        fx, fy = fx + inv.b[0] * z, fy + inv.b[1] * z
    xs, ys = _to(spec.op.frame, spec.src.crs, fx, fy)
    inv_t = ~spec.src.transform
    pcol = inv_t.a * xs + inv_t.b * ys + inv_t.c - 0.5
    prow = inv_t.d * xs + inv_t.e * ys + inv_t.f - 0.5
    return prow, pcol, xf, yf, vz


def _exact_fields(spec: _Spec, rows: np.ndarray, cols: np.ndarray) -> list[np.ndarray]:
    """What a task interpolates on its lattice: source positions at ``z0``; with a tilt, also at
    the top of ``z_range`` (positions are linear in elevation in the frame); and the frame
    coordinates when ramps or a tilt need them."""
    prow, pcol, xf, yf, vz = _source_positions(spec, rows, cols, spec.z0)
    out = [prow, pcol]
    if spec.tilts:
        out += list(_source_positions(spec, rows, cols, spec.z_range[1])[:2])
    if spec.op.surfaces or spec.tilts:
        out += [xf, yf]
    if vz is not None:
        out.append(vz)
    return out


@dataclass(frozen=True)
class _Mapping:
    """Per-pixel mapping of a strip: positions at ``z0``, their change per unit of elevation
    (0 without tilt), frame coordinates (``None`` when nothing needs them), the vertical change
    of displacement fields (``None`` without fields)."""

    prow: np.ndarray
    pcol: np.ndarray
    drow: np.ndarray | float
    dcol: np.ndarray | float
    xf: np.ndarray | None
    yf: np.ndarray | None
    vz: np.ndarray | None = None


def _as_mapping(spec: _Spec, fields: list[np.ndarray]) -> _Mapping:
    prow, pcol = fields[0], fields[1]
    drow: np.ndarray | float = 0.0
    dcol: np.ndarray | float = 0.0
    rest = fields[2:]
    vz = None
    if spec.op.fields:
        vz, rest = rest[-1], rest[:-1]
    if spec.tilts:
        dz = spec.z_range[1] - spec.z0
        drow, dcol = (rest[0] - prow) / dz, (rest[1] - pcol) / dz
        rest = rest[2:]
    xf, yf = (rest[0], rest[1]) if rest else (None, None)
    return _Mapping(prow, pcol, drow, dcol, xf, yf, vz)


def _lattice(a: int, b: int, step: int) -> np.ndarray:
    """Every ``step``-th index of ``[a, b)``, and ``b - 1``."""
    return np.unique(np.r_[np.arange(a, b, step), b - 1])


def _mapped(spec: _Spec, rows: np.ndarray, cols: np.ndarray) -> _Mapping:
    """:func:`_exact_fields` on the grid ``rows x cols`` (1-D each), computed exactly on a
    lattice of every :data:`LATTICE_STEP` pixels and interpolated bilinearly in between, as
    GDAL's warper does. The interpolation is checked against the exact mapping at the centre
    of every lattice cell; where it errs by more than :data:`LATTICE_TOLERANCE` pixel (or the
    mapping leaves the projection's domain) the lattice is refined, down to every pixel.

    The frame coordinates are only needed by ramps and tilts: without any, they are not
    interpolated and come back as ``None``. With displacement fields the lattice is every
    ``spec.field_step`` pixels (:func:`_field_step`), its nodes multiples of the step in the whole grid (not
    counted from the chunk's corner, so every pixel gets the same value whatever the chunking),
    and the interpolation a cubic convolution (:func:`~xdem.kernels.warp.lattice_cubic`): a
    thin-plate field's kernel costs one logarithm per node and tile, which made the lattice of
    16 pixels most of the warp's time at 20000^2 (400 tiles). A chunk maps its strips from its own
    lattice (:class:`_Nodes`, the same values without this check); this is for a chunk whose
    lattice leaves the projection's domain."""
    aligned = bool(spec.op.fields)  # a field's lattice is global: chunk-independent values
    step = spec.field_step if aligned else LATTICE_STEP
    if same_crs(spec.grid.crs, spec.op.frame) and same_crs(spec.op.frame, spec.src.crs) and not aligned:
        step = 1  # the mapping is affine and cheap: exact at every pixel
    interpolate = lattice_cubic if aligned else lattice_bilinear
    while step > 1:
        if aligned:
            lr, lc = cubic_nodes(int(rows[0]), int(rows[-1]), step), cubic_nodes(int(cols[0]), int(cols[-1]), step)
            mr, mc = (lr[1:-2] + lr[2:-1]) // 2, (lc[1:-2] + lc[2:-1]) // 2
        else:
            lr, lc = _lattice(int(rows[0]), int(rows[-1]) + 1, step), _lattice(int(cols[0]), int(cols[-1]) + 1, step)
            mr = (lr[:-1] + lr[1:]) // 2 if lr.size > 1 else lr
            mc = (lc[:-1] + lc[1:]) // 2 if lc.size > 1 else lc
        exact = _exact_fields(spec, lr[:, None], lc[None, :])
        tolerance = _tolerances(spec, len(exact))
        if all(np.isfinite(v).all() for v in exact):
            check = _exact_fields(spec, mr[:, None], mc[None, :])
            if all(np.abs(interpolate(v, lr, lc, mr, mc) - c).max() <= tol
                   for v, c, tol in zip(exact, check, tolerance)):
                return _as_mapping(spec, [interpolate(e, lr, lc, rows, cols) for e in exact])
        step //= 2
    return _as_mapping(spec, _exact_fields(spec, rows[:, None], cols[None, :]))


def _tolerances(spec: _Spec, n: int) -> list[float]:
    """:data:`LATTICE_TOLERANCE` for the ``n`` values of :func:`_exact_fields`: in pixels for the
    positions, in frame units (a pixel's size) for the rest."""
    n_pos = 4 if spec.tilts else 2
    return [LATTICE_TOLERANCE] * n_pos + [LATTICE_TOLERANCE * _frame_pixel(spec)] * (n - n_pos)


def field_spots(fields: tuple[ThinPlateField, ...], grid: Grid, frame: str) -> tuple[np.ndarray, np.ndarray]:
    """Pixel positions ``(rows, cols)`` on ``grid`` where a lattice of ``fields`` (in the CRS
    ``frame``) is checked: every centre of their thin-plate kernels (where they bend most) and
    the grid's corners and centre; positions outside the projection's domain are left out."""
    pts = [f.points() for f in fields]
    xs, ys = _to(frame, grid.crs, np.concatenate([p[0] for p in pts] or [np.zeros(0)]),
                 np.concatenate([p[1] for p in pts] or [np.zeros(0)]))
    inv = ~grid.transform
    h, w = grid.shape
    rows = np.r_[inv.d * xs + inv.e * ys + inv.f - 0.5, 0, 0, h - 1, h - 1, h // 2]
    cols = np.r_[inv.a * xs + inv.b * ys + inv.c - 0.5, 0, w - 1, 0, w - 1, w // 2]
    ok = np.isfinite(rows) & np.isfinite(cols)
    return rows[ok], cols[ok]


def _field_step(spec: _Spec) -> int:
    """The lattice spacing of a warp by displacement fields, once for the whole grid: the largest of
    :data:`FIELD_LATTICE_STEP`, half of it, ... whose cubic convolution errs by at most
    :data:`LATTICE_TOLERANCE` around every centre of the fields' thin-plate kernels (where they bend
    most: the kernel's curvature grows like ``log r`` there) and at the grid's corners and centre
    (:func:`~xdem.kernels.warp.spot_steps`); 1: every pixel exactly. One spacing for the whole
    grid, so the values do not depend on the chunks."""
    rows, cols = field_spots(spec.op.fields, spec.grid, spec.op.frame)
    n = len(_exact_fields(spec, np.zeros((1, 1)), np.zeros((1, 1))))
    steps = spot_steps(lambda r, c: _exact_fields(spec, r, c), rows, cols, start=FIELD_LATTICE_STEP,
                       tolerances=_tolerances(spec, n))
    return int(steps.min()) if steps.size else FIELD_LATTICE_STEP


@dataclass(frozen=True)
class _Nodes:
    """A chunk's lattice of a warp by fields: node rows and columns, :func:`_exact_fields` there."""

    rows: np.ndarray
    cols: np.ndarray
    values: list[np.ndarray]

    @classmethod
    def of(cls, spec: _Spec, rows: np.ndarray, cols: np.ndarray) -> _Nodes | None:
        """The lattice over ``rows x cols`` at ``spec.field_step`` (``None``: every pixel exactly,
        or a node outside the projection's domain: then each strip maps itself, :func:`_mapped`)."""
        if spec.field_step <= 1:
            return None
        lr = cubic_nodes(int(rows[0]), int(rows[-1]), spec.field_step)
        lc = cubic_nodes(int(cols[0]), int(cols[-1]), spec.field_step)
        values = _exact_fields(spec, lr[:, None], lc[None, :])
        return cls(lr, lc, values) if all(np.isfinite(v).all() for v in values) else None

    def mapping(self, spec: _Spec, rows: np.ndarray, cols: np.ndarray) -> _Mapping:
        """The strip ``rows x cols`` (``cols``: the chunk's) interpolated from its rows of nodes: the
        values :func:`_mapped` gives when its check passes, from the same nodes."""
        step = spec.field_step
        lr = cubic_nodes(int(rows[0]), int(rows[-1]), step)
        i0 = int(lr[0] - self.rows[0]) // step
        return _as_mapping(spec, [lattice_cubic(v[i0:i0 + lr.size], lr, self.cols, rows, cols) for v in self.values])


def _frame_pixel(spec: _Spec) -> float:
    """Rough size of an output pixel in frame units (only to scale a tolerance)."""
    x, y = spec.grid.centres(np.array([0, 0, 1]), np.array([0, 1, 0]))
    xf, yf = _to(spec.grid.crs, spec.op.frame, x, y)
    size = float(np.hypot(xf[1] - xf[0], yf[1] - yf[0]))
    return size if np.isfinite(size) and size > 0 else 1.0


def _footprint(spec: _Spec, r0: int, r1: int, c0: int, c1: int) -> tuple[int, int, int, int] | None:
    """Source window ``(row0, row1, col0, col1)`` an output chunk reads, or None if none.

    With a tilt, the boundary is mapped at both ends of ``z_range`` (positions are linear in
    the elevation, so the two bound every elevation in between). A warp by fields maps it every
    ``spec.field_step`` pixels: its lattice's spacing, over which the fields are that smooth (a
    thin-plate kernel per node and tile made these boundaries a second of the graph's building at
    20000^2 with :data:`BOUNDARY_STEP`)."""
    tick = max(BOUNDARY_STEP, spec.field_step) if spec.op.fields else BOUNDARY_STEP

    def ticks(a: int, b: int) -> np.ndarray:
        return np.unique(np.r_[np.arange(a, b, tick), b - 1])

    levels = spec.z_range if spec.tilts else (0.0,)

    def mapped(rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        got = [_source_positions(spec, rows, cols, z)[:2] for z in levels]
        return np.concatenate([g[0] for g in got]), np.concatenate([g[1] for g in got])

    rr, cc = ticks(r0, r1), ticks(c0, c1)
    rows = np.r_[np.full(cc.size, r0), np.full(cc.size, r1 - 1), rr, rr]
    cols = np.r_[cc, cc, np.full(rr.size, c0), np.full(rr.size, c1 - 1)]
    prow, pcol = mapped(rows, cols)
    ok = np.isfinite(prow) & np.isfinite(pcol)
    if not ok.all():  # the boundary leaves the projection's domain: map the whole lattice
        g_r, g_c = np.meshgrid(rr, cc, indexing="ij")
        prow, pcol = mapped(g_r.ravel(), g_c.ravel())
        ok = np.isfinite(prow) & np.isfinite(pcol)
        if not ok.any():
            return None
    before, after = footprint(spec.resampling)
    pad_lo, pad_hi = before + SAFETY_MARGIN, after + SAFETY_MARGIN + 1
    h, w = spec.src.shape
    wr0 = max(int(math.floor(prow[ok].min())) - pad_lo, 0)
    wr1 = min(int(math.floor(prow[ok].max())) + pad_hi, h)
    wc0 = max(int(math.floor(pcol[ok].min())) - pad_lo, 0)
    wc1 = min(int(math.floor(pcol[ok].max())) + pad_hi, w)
    if wr1 <= wr0 or wc1 <= wc0:
        return None
    return wr0, wr1, wc0, wc1


def _cut(block: np.ndarray, rows: slice, cols: slice) -> np.ndarray:
    """A copy of part of a source block (a view would keep the whole block alive)."""
    return np.array(block[rows, cols], copy=True)


def _warp_chunk(spec: _Spec, r0: int, c0: int, shape: tuple[int, int], window0: tuple[int, int],
                layout: tuple[int, int], dtype: Any, *pieces: np.ndarray) -> np.ndarray:
    """One output chunk: map its pixels, interpolate the assembled source window (solving each
    pixel's moved elevation under a rotation), add the vertical part."""
    if not pieces:
        return np.full(shape, np.nan, dtype=dtype)
    out = np.empty(shape, dtype=dtype)  # every row is written below
    nr, nc = layout
    window = pieces[0] if len(pieces) == 1 else np.concatenate(
        [np.concatenate(pieces[i * nc:(i + 1) * nc], axis=1) for i in range(nr)], axis=0)
    del pieces
    before, after = footprint(spec.resampling)
    wr0, wc0 = window0
    inv = spec.op.inverse()
    if inv is not None:
        _rigid_chunk(spec, inv, window, r0, c0, window0, out)
        return out
    cols = np.arange(c0, c0 + shape[1])
    # a warp by fields: the chunk's lattice at once (not a strip's, with its nodes beyond the strip)
    nodes = _Nodes.of(spec, np.arange(r0, r0 + shape[0]), cols) if spec.op.fields else None

    def sample(prow: np.ndarray, pcol: np.ndarray) -> np.ndarray:
        return interp_positions_kernel(window, prow - wr0, pcol - wc0, resampling=spec.resampling)

    for s in range(0, shape[0], STRIP_ROWS):
        rows = np.arange(r0 + s, r0 + min(s + STRIP_ROWS, shape[0]))
        m = nodes.mapping(spec, rows, cols) if nodes is not None else _mapped(spec, rows, cols)
        _check_inside(spec, m.prow, m.pcol, window0, window.shape, before, after)
        vals = sample(m.prow, m.pcol)
        # frame coordinates exist only when a ramp needs them (see _mapped)
        vals += spec.op.vertical(m.xf, m.yf) if m.xf is not None and m.yf is not None else spec.op.shift[2]
        if m.vz is not None:
            vals += m.vz
        out[s:s + rows.size] = vals
    return out


def _affine_coefficients(spec: _Spec, inv: InverseCoefficients) -> tuple[np.ndarray, float, float] | None:
    """On a grid and a source in the frame's CRS, the rigid mapping is affine in the output
    pixel's (row, column): the 9 coefficients of :func:`xdem.kernels.rigid_warp.rigid_affine_strip`
    (exact at pixel (0, 0), linear parts composed from the grids' transforms and the rotation:
    the same numbers whatever the chunk) and the positions' change per unit of moved elevation;
    ``None`` otherwise."""
    if not (same_crs(spec.grid.crs, spec.op.frame) and same_crs(spec.op.frame, spec.src.crs)) or spec.op.fields:
        return None
    zero = np.zeros((1, 1))
    prow0, pcol0, xf, yf, _ = _source_positions(spec, zero, zero, spec.z0)
    a0 = inv.a(xf, yf)
    t, s_inv, rt, r = spec.grid.transform, ~spec.src.transform, inv.rt, inv.rotation
    # motion of the source point at fixed moved elevation per output column and per output row
    dx_c, dy_c = rt[0, 0] * t.a + rt[0, 1] * t.d, rt[1, 0] * t.a + rt[1, 1] * t.d
    dx_r, dy_r = rt[0, 0] * t.b + rt[0, 1] * t.e, rt[1, 0] * t.b + rt[1, 1] * t.e
    coef = np.array([
        float(prow0.flat[0]), s_inv.d * dx_r + s_inv.e * dy_r, s_inv.d * dx_c + s_inv.e * dy_c,
        float(pcol0.flat[0]), s_inv.a * dx_r + s_inv.b * dy_r, s_inv.a * dx_c + s_inv.b * dy_c,
        float(np.asarray(a0).flat[0]), r[2, 0] * dx_r + r[2, 1] * dy_r, r[2, 0] * dx_c + r[2, 1] * dy_c])
    b0, b1 = float(inv.b[0]), float(inv.b[1])
    return coef, s_inv.d * b0 + s_inv.e * b1, s_inv.a * b0 + s_inv.b * b1


def _rigid_chunk(spec: _Spec, inv: InverseCoefficients, window: np.ndarray, r0: int, c0: int,
                 window0: tuple[int, int], out: np.ndarray) -> None:
    """The rotation branch of :func:`_warp_chunk`: each pixel's moved elevation solved and read in
    one compiled loop (:mod:`xdem.kernels.rigid_warp`), in one step when the positions cannot move
    by :data:`~xdem.kernels.rigid_warp.ONE_STEP_PX` over the chunk's elevations."""
    nr, nc = out.shape
    cols = np.arange(c0, c0 + nc)
    starts = tuple(float(v) for v in np.linspace(spec.z_range[0], spec.z_range[1], RESTART_LEVELS))
    taps, res = footprint(spec.resampling), spec.resampling
    affine = _affine_coefficients(spec, inv)
    z_one = None
    if affine is not None:
        coef, drow, dcol = affine
        corners = [coef[6] + coef[7] * rr + coef[8] * cc for rr in (r0, r0 + nr - 1) for cc in (c0, c0 + nc - 1)]
        z_one = one_step_level(window, min(corners), max(corners), math.hypot(drow, dcol), rzz=inv.rzz, k=inv.k, resampling=res)
    # the compiled loop writes the output itself (cast on storing, as numpy's) unless ramps follow
    direct = affine is not None and not spec.op.surfaces and out.dtype in (np.float32, np.float64)
    buf = np.empty((0, nc) if direct else (min(STRIP_ROWS, nr), nc))
    for s in range(0, nr, STRIP_ROWS):
        n = min(STRIP_ROWS, nr - s)
        rows = np.arange(r0 + s, r0 + s + n)
        vals = out[s:s + n] if direct else buf[:n]
        if affine is not None:
            escaped = rigid_affine_strip(window, window0, (r0 + s, r0 + s + n), (c0, c0 + nc), coef, drow=drow,
                                         dcol=dcol, z_one=z_one, out=vals, z0=spec.z0, k=inv.k, rzz=inv.rzz,
                                         tol=FIXED_POINT_TOLERANCE, starts=starts, max_iter=MAX_FIXED_POINT_ITERATIONS,
                                         resampling=spec.resampling, src_shape=spec.src.shape, footprint=taps)
            xf = yf = None
            if spec.op.surfaces:
                xf, yf = spec.grid.centres(rows[:, None], cols[None, :])
        else:
            m = _mapped(spec, rows, cols)
            qx, qy = (m.xf, m.yf) if m.xf is not None and m.yf is not None else (np.zeros(1), np.zeros(1))
            a = inv.a(qx, qy)
            slope = float(np.max(np.hypot(m.drow, m.dcol)))
            z_one = one_step_level(window, float(np.min(a)), float(np.max(a)), slope, rzz=inv.rzz, k=inv.k, resampling=res)
            vals, escaped = rigid_arrays_strip(window, window0, m.prow, m.pcol, m.drow, m.dcol, a, z_one=z_one,
                                               z0=spec.z0, k=inv.k, rzz=inv.rzz, tol=FIXED_POINT_TOLERANCE,
                                               starts=starts, max_iter=MAX_FIXED_POINT_ITERATIONS,
                                               resampling=spec.resampling, src_shape=spec.src.shape, footprint=taps)
            xf, yf = m.xf, m.yf
        if escaped:
            _fail_outside(spec)
        if spec.op.surfaces and xf is not None and yf is not None:
            vals -= spec.op.ramps(xf, yf)
        if not direct:
            out[s:s + n] = vals


def _check_inside(spec: _Spec, prow: np.ndarray, pcol: np.ndarray, window0: tuple[int, int],
                  wshape: tuple[int, ...], before: int, after: int) -> None:
    """Fail loudly if a position that the source covers falls outside the task's window
    (the graph-time footprint was underestimated): never a silent NaN."""
    wr0, wc0 = window0
    if prow.size == 0:
        return
    # fmin/fmax skip NaN like nanmin/nanmax, and all-NaN gives NaN (the full test below) without the
    # RuntimeWarning, so no catch_warnings block here: that block swaps the process-wide filter list and,
    # interleaved with another thread's, can leave its filter installed (see xdem.masks.burn_shapes)
    lo_r, hi_r, lo_c, hi_c = (math.floor(v) if np.isfinite(v) else v for v in
                              (np.fmin.reduce(prow, axis=None), np.fmax.reduce(prow, axis=None),
                               np.fmin.reduce(pcol, axis=None), np.fmax.reduce(pcol, axis=None)))
    if lo_r - before >= wr0 and hi_r + after < wr0 + wshape[0] and lo_c - before >= wc0 and hi_c + after < wc0 + wshape[1]:
        return  # every footprint is in the window (the common case: the extremes decide, floor being monotone)
    fr, fc = np.floor(prow), np.floor(pcol)
    h_src, w_src = spec.src.shape
    in_src = (fr - before >= 0) & (fr + after < h_src) & (fc - before >= 0) & (fc + after < w_src)
    in_win = (fr - before >= wr0) & (fr + after < wr0 + wshape[0]) & (fc - before >= wc0) & (fc + after < wc0 + wshape[1])
    if np.any(in_src & ~in_win):
        _fail_outside(spec)


def _fail_outside(spec: _Spec) -> None:
    """The error of a source position outside its chunk's window (see :func:`_check_inside`)."""
    if spec.tilts:
        raise RuntimeError(
            f"xdem.warp: an elevation outside {spec.z_range[0]:g} .. {spec.z_range[1]:g} (the range assumed for a "
            "transform rotating about x or y) moved a source position out of its chunk's window; pass "
            "z_range=(min, max) covering the DEM's elevations to warp_dem")
    raise RuntimeError("xdem.warp: a source position fell outside the window computed for its chunk "
                       "(please report this with the two CRSs involved)")


#: Elevations (metres) assumed by default for a transform rotating about x or y: every
#: elevation on Earth, including ellipsoid heights and bathymetry to -1000 m.
DEFAULT_Z_RANGE_M = (-1000.0, 9000.0)


def _default_z_range(frame: str) -> tuple[float, float]:
    """:data:`DEFAULT_Z_RANGE_M` in the frame's linear unit (elevations share the horizontal unit
    in a rigid transform)."""
    try:
        factor = CRS.from_user_input(frame).axis_info[0].unit_conversion_factor or 1.0
    except (IndexError, ValueError):
        factor = 1.0
    return DEFAULT_Z_RANGE_M[0] / factor, DEFAULT_Z_RANGE_M[1] / factor


def warp_dem(
    src: xr.DataArray, *, grid: Grid, op: FrameOp, resampling: str = "bilinear",
    chunks: tuple[int, int] | None = None, z_range: tuple[float, float] | None = None,
) -> xr.DataArray:
    """Lazily resample ``src`` onto ``grid`` through the correction ``op`` (see the module notes).

    ``out(p) = src(to_src(to_frame(p) - shift_xy)) + shift_z - sum surfaces(to_frame(p))`` at
    every output pixel centre ``p``; NaN where the interpolation footprint leaves ``src`` or
    meets a NaN. Nothing is computed.

    Parameters
    ----------
    src
        The DEM to move (2-D, any CRS and north-up or rotated grid).
    grid
        Output grid (any CRS): e.g. ``Grid.of(src)`` to keep the source grid.
    op
        The correction, in its frame.
    resampling
        ``"bilinear"`` or ``"cubic"``.
    chunks
        Output chunk shape; default the source's largest chunk.
    z_range
        For an op rotating about x or y only: the range of moved elevations (frame units) used
        to bound each chunk's source window; default :data:`DEFAULT_Z_RANGE_M` in the frame's
        unit. An elevation outside it raises at compute time rather than giving a wrong value.

    Returns
    -------
    xarray.DataArray
        On ``grid``, the source dtype, nodata NaN.

    Examples
    --------
    >>> import xdem
    >>> dem = xdem.open_dem(xdem.examples.get_path("lidar"))
    >>> g = Grid.of(dem)
    >>> out = warp_dem(dem, grid=g, op=FrameOp(g.crs, shift=(0.5, 0.0, 0.0)))
    >>> out.shape == dem.shape
    True
    """
    if resampling not in RESAMPLINGS:
        raise ValueError(f"resampling must be one of {RESAMPLINGS}, got {resampling!r}")
    data = dask_data(src)
    if not op.frame:  # defined in the CRS of whatever DEM it is applied to
        op = replace(op, frame=Grid.of(src).crs)
    zr = tuple(float(v) for v in (z_range if z_range is not None else _default_z_range(op.frame)))
    if len(zr) != 2 or not zr[0] < zr[1]:
        raise ValueError(f"z_range must be (min, max) with min < max, got {z_range!r}")
    spec = _Spec(grid=grid, src=Grid.of(src), op=op, resampling=resampling, z_range=(zr[0], zr[1]))
    if op.fields:
        spec = replace(spec, field_step=_field_step(spec))
    if chunks is None:
        chunks = (max(data.chunks[0]), max(data.chunks[1]))
    out_chunks = da.core.normalize_chunks(chunks, grid.shape)
    dtype = data.dtype
    token = tokenize(data.name, spec, out_chunks)
    name, cut_name = f"warp-{token}", f"warp-cut-{token}"
    # A DEM opened from a file: each output chunk reads its window from the file in a task of its
    # own, so memory holds one window per running task. Otherwise the windows are cut from the
    # source's chunks, which dask keeps until every window overlapping them is done: for a
    # rotation, the three chunk rows around the current one (26 chunks of 2048^2 at 20000^2).
    read = region_reader(data)
    row_edges = np.cumsum((0,) + data.chunks[0])
    col_edges = np.cumsum((0,) + data.chunks[1])
    dsk: dict[Any, Any] = {}
    r0 = 0
    for i, nr in enumerate(out_chunks[0]):
        c0 = 0
        for j, nc in enumerate(out_chunks[1]):
            win = _footprint(spec, r0, r0 + nr, c0, c0 + nc)
            pieces: list[Any] = []
            layout = (0, 0)
            window0 = (0, 0)
            if win is not None:
                wr0, wr1, wc0, wc1 = win
                layout, window0 = (1, 1), (wr0, wc0)
                if read is not None:
                    key = (cut_name, i, j, 0, 0)
                    dsk[key] = (read, slice(wr0, wr1), slice(wc0, wc1))
                    dsk[(name, i, j)] = (_warp_chunk, spec, r0, c0, (nr, nc), window0, layout, dtype, key)
                    c0 += nc
                    continue
                bis = [b for b in range(len(data.chunks[0])) if row_edges[b] < wr1 and row_edges[b + 1] > wr0]
                bjs = [b for b in range(len(data.chunks[1])) if col_edges[b] < wc1 and col_edges[b + 1] > wc0]
                for bi in bis:
                    rs = slice(max(wr0, row_edges[bi]) - row_edges[bi], min(wr1, row_edges[bi + 1]) - row_edges[bi])
                    for bj in bjs:
                        cs = slice(max(wc0, col_edges[bj]) - col_edges[bj], min(wc1, col_edges[bj + 1]) - col_edges[bj])
                        key = (cut_name, i, j, bi, bj)
                        dsk[key] = (_cut, (data.name, bi, bj), rs, cs)
                        pieces.append(key)
                layout, window0 = (len(bis), len(bjs)), (wr0, wc0)
            dsk[(name, i, j)] = (_warp_chunk, spec, r0, c0, (nr, nc), window0, layout, dtype, *pieces)
            c0 += nc
        r0 += nr
    # dask's own stubs: da.Array's __dask_scheduler__ does not match its DaskCollection protocol
    if read is None:
        graph = HighLevelGraph.from_collections(name, dsk, dependencies=[data])  # type: ignore[list-item]
    else:  # reads the file directly: a root layer, registered as reading the source's files
        graph = HighLevelGraph({name: dsk}, {name: set()})
    arr = da.Array(graph, name, out_chunks, meta=np.empty((0, 0), dtype=dtype))
    if read is not None:
        for path in find_sources(data):
            register_source(arr, path)
    x, y = grid.centres(np.zeros(1), np.arange(grid.shape[1]))[0], grid.centres(np.arange(grid.shape[0]), np.zeros(1))[1]
    out = xr.DataArray(arr, dims=("y", "x"), coords={"y": y, "x": x}, name=src.name, attrs=dict(src.attrs))
    out = out.rio.write_crs(grid.crs).rio.write_transform(grid.transform)
    return out.rio.write_nodata(np.nan, encoded=False)
