"""The tiles of a :class:`~xdem.coreg.BlockwiseCoreg` of :class:`~xdem.coreg.NuthKaab`, fitted on samples.

The general route of ``BlockwiseCoreg`` fits each tile as an ordinary lazy fit, after a pass
that counts each tile's valid pixels, and fits the later rounds on the DEM warped by the field
so far (a warp of the whole DEM, read again). For Nuth & Kääb (the default step) neither is
needed: its fit is a draw of a subsample with small windows around it (one pass over the
tile, which also counts the tile's valid pixels exactly), then iterations on those windows
(:mod:`xdem.coreg._windows`). A later round needs ``tba`` warped by the field at the sampled
pixels only, moved by the shift being estimated: :class:`FieldSampler` evaluates it from the
first round's windows of ``tba`` (6 x 6 pixels around each sampled pixel, cut by the draw from
the tile) while the positions the fields read stay inside them (displacements up to about 2
pixels: no pass at all), else from windows cut again around those positions (one pass over
``tba`` alone). The reference's values, slope and aspect at the pixels and the windows are
those of the first round's draw, kept in memory (:class:`TileSample`) while all tiles' fit in
:data:`SAMPLE_CACHE_BYTES`, else written to a temporary file and read back a batch of tiles at a
time (:func:`xdem.io._spill.record_scope`), else (``XDEM_SPILL=0``, no room on the disk) drawn again
(the draw is reproducible: the same pixels, the same values and windows, so all three give the same
result).

Each round interpolates ``tba`` once (at the composed position) where the general route
interpolates twice (the warp, then Nuth & Kääb's shift of the warped DEM).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import xarray as xr

from xdem.coreg._blockwise_draw import chunk_bands, draw_bands, draw_tiles, tile_groups
from xdem.coreg._blockwise_tiles import blank, parallel
from xdem.coreg._data import FitData
from xdem.coreg._iterate import check_divergence_params, initial_shift_of
from xdem.coreg._windows import SlopedSample, gather_windows, sample_with_terrain
from xdem.coreg.affine import NuthKaab
from xdem.coreg.base import Coreg, clone
from xdem.errors import ConvergenceError, NotEnoughDataError, OverlapError
from xdem.io._heap import release_free_heap
from xdem.io._spill import RecordFile, record_scope
from xdem.io.grid import check_projected, get_resolution, get_transform
from xdem.kernels.field import ThinPlateField, compose
from xdem.kernels.interp import footprint, interp_windows_kernel
from xdem.kernels.robust import nmad
from xdem.kernels.warp import cubic_nodes, lattice_cubic_at, spot_steps
from xdem.sampling import resolve_count
from xdem.warp import Grid, field_spots

__all__ = ["samples_route", "TileSample", "FieldSampler", "fit_tile_first", "fit_tile_again", "SAMPLE_CACHE_BYTES",
           "composed_at", "FieldLattice", "draw_group", "first_draws", "sampled_rounds"]

#: Memory allowed for the first round's samples of all tiles together (bytes): beyond it a
#: later round draws each tile's sample again (one more pass over the tile's reference) instead
#: of keeping it.
SAMPLE_CACHE_BYTES = 512 * 2**20
#: Beyond :data:`SAMPLE_CACHE_BYTES`, the first round's samples go to a temporary file (read back
#: :data:`SAMPLE_BATCH_BYTES` at a time by a later round) instead of being drawn again: at 20000^2
#: (400 tiles of 20,000 pixels, 1.3 GB) the draw again cost 15.8 s CPU of a 52.7 s fit.
SPILL_SAMPLES = True
#: Bytes of samples a later round reads back from the file at once (a batch of tiles).
SAMPLE_BATCH_BYTES = 128 * 2**20
#: Spacing (pixels) of the lattice on which a later round evaluates the fields exactly (:func:`composed_at`).
LATTICE_STEP = 32
#: A tile's pixels are read from the lattice when they outnumber its nodes this many times (else
#: the fields are evaluated at each pixel).
LATTICE_GAIN = 1
#: Largest error (pixels; also for the vertical change, in pixel sizes) of the fields interpolated
#: between lattice nodes, checked at the centres of the lattice cells around the fields' centres
#: (:class:`FieldLattice`): far below what moves a fit.
LATTICE_TOLERANCE = 5e-7


def samples_route(step: Coreg) -> bool:
    """Whether tiles of ``step`` are fitted on samples (exactly :class:`~xdem.coreg.NuthKaab`)."""
    return type(step) is NuthKaab and getattr(step, "vertical_shift", True) is not False


@dataclass
class TileSample:
    """The first round's draw on one tile: global pixel indices, the reference's values, slope
    and aspect (degrees) there, and the tile's exact number of valid pixels."""

    rows: np.ndarray
    cols: np.ndarray
    ref: np.ndarray
    slope: np.ndarray
    aspect: np.ndarray
    n_valid: int
    win_tba: np.ndarray | None = None

    #: Bytes kept per sampled pixel at most: indices int32, values float32, the reference up to
    #: float64, and the 6 x 6 float32 window of tba cut by the draw around the pixel.
    BYTES_PER_POINT: ClassVar[int] = 24 + 144
    #: Bytes of a stored sample besides its points (the valid count).
    BYTES_PER_TILE: ClassVar[int] = 8

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in (self.rows, self.cols, self.ref, self.slope, self.aspect)))

    def arrays(self) -> dict[str, np.ndarray]:
        """The sample as named arrays (for a :class:`~xdem.io._spill.RecordFile`)."""
        out = {"rows": self.rows, "cols": self.cols, "ref": self.ref, "slope": self.slope, "aspect": self.aspect,
               "n_valid": np.array([self.n_valid], dtype=np.int64)}
        return out if self.win_tba is None else out | {"win_tba": self.win_tba}

    @classmethod
    def of_arrays(cls, a: dict[str, np.ndarray]) -> TileSample:
        """The sample of :meth:`arrays`, the same values."""
        return cls(rows=a["rows"], cols=a["cols"], ref=a["ref"], slope=a["slope"], aspect=a["aspect"],
                   n_valid=int(a["n_valid"][0]), win_tba=a.get("win_tba"))


class FieldSampler:
    """``tba`` warped by displacement ``fields`` and moved by ``(sx, sy)``, at given pixels.

    ``sampler(sx, sy)`` is ``w(q - s)`` at every pixel centre ``q``, where
    ``w(p) = tba(P(p)) + v(p)`` and ``P, v`` are the position read and the vertical change of
    the fields composed (:func:`xdem.kernels.field.compose`): the values the warped DEM moved
    by Nuth & Kääb's shift would have there, from one interpolation of ``tba``. The fields are
    evaluated once, at ``q``: ``P(q - s) = P(q) - s`` and ``v(q - s) = v(q)``, which neglects the
    change of the field over the shift (its gradient times ``s``: below 1e-3 m for fields of
    metres over kilometres and the sub-metre shifts of a later round). Windows of
    ``2 h + 2`` pixels of ``tba`` are cut around the positions read (one pass) and cut again
    only when a position leaves its window; ``reads`` counts the passes.
    """

    def __init__(self, tba: xr.DataArray, rows: np.ndarray, cols: np.ndarray, fields: tuple[ThinPlateField, ...],
                 resampling: str, half: int = 2, windows: np.ndarray | None = None, grid: Grid | None = None,
                 lattice: FieldLattice | None = None) -> None:
        self.arr = tba.data
        grid = Grid.of(tba) if grid is None else grid  # ``grid``: tba's, read once by the caller for many tiles
        self.inverse = ~grid.transform
        rows, cols = np.asarray(rows, dtype=np.float64), np.asarray(cols, dtype=np.float64)
        lattice = FieldLattice.of(fields, grid) if lattice is None else lattice  # found once for many tiles
        self.px, self.py, self.vz = composed_at(fields, grid, rows, cols, lattice=lattice)
        self.resampling = resampling
        self.half = half
        self.before, self.after = footprint(resampling)
        self.base: tuple[np.ndarray, np.ndarray] | None = None
        self.win: np.ndarray | None = None
        if windows is not None:  # the draw's windows, centred on the pixels: used while the positions stay in them
            self.base = (np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64))
            self.win = windows
        self.reads = 0

    def __call__(self, sx: float, sy: float) -> np.ndarray:
        h = self.half
        px, py, vz = self.px - sx, self.py - sy, self.vz
        inv = self.inverse
        pcol = inv.a * px + inv.b * py + inv.c - 0.5
        prow = inv.d * px + inv.e * py + inv.f - 0.5
        lo, hi = self.before, 2 * h + 1 - self.after
        if self.base is None or self.win is None or not all(
            bool(np.all((lo <= p - b + h) & (p - b + h < hi))) for p, b in zip((prow, pcol), self.base)
        ):
            self.base = (np.round(prow).astype(np.int64), np.round(pcol).astype(np.int64))
            self.win = gather_windows(self.arr, self.base[0], self.base[1], h)
            self.reads += 1
        r, c = self.base
        z: np.ndarray = interp_windows_kernel(self.win, prow - r + h, pcol - c + h, resampling=self.resampling) + vz
        return z


@dataclass(frozen=True)
class FieldLattice:
    """Where :func:`composed_at`'s lattice may be coarse: spots (pixel rows, columns: the centres of
    the fields' thin-plate kernels, the grid's corners and centre) and, for each, the largest
    spacing of :data:`LATTICE_STEP`, half of it, ... whose cubic convolution errs by at most
    :data:`LATTICE_TOLERANCE` pixel at the centres of the lattice cells around it
    (:func:`~xdem.kernels.warp.spot_steps`; 1: exactly). Found once per round for every tile: a
    thin-plate field bends most at its centres, so a lattice errs most there."""

    rows: np.ndarray
    cols: np.ndarray
    steps: np.ndarray

    @classmethod
    def of(cls, fields: tuple[ThinPlateField, ...], grid: Grid) -> FieldLattice:
        res = max(abs(grid.transform.a), abs(grid.transform.e))
        rows, cols = field_spots(fields, grid, grid.crs)  # the fields are in tba's CRS here

        def displacements(r: np.ndarray, c: np.ndarray) -> list[np.ndarray]:
            gx, gy = np.broadcast_arrays(*grid.centres(r.astype(np.float64), c.astype(np.float64)))
            px, py, vz = compose(fields, gx, gy)
            return [gx - px, gy - py, vz]

        steps = spot_steps(displacements, rows, cols, start=LATTICE_STEP, tolerances=[LATTICE_TOLERANCE * res] * 3)
        return cls(rows, cols, steps)

    def over(self, r_lo: float, r_hi: float, c_lo: float, c_hi: float) -> int:
        """The spacing for pixels within rows ``[r_lo, r_hi]`` and columns ``[c_lo, c_hi]``: the
        smallest of the spots whose checked cells may meet that box's lattice."""
        m = 2 * LATTICE_STEP
        near = (self.rows >= r_lo - m) & (self.rows <= r_hi + m) & (self.cols >= c_lo - m) & (self.cols <= c_hi + m)
        return int(self.steps[near].min()) if near.any() else LATTICE_STEP


def composed_at(fields: tuple[ThinPlateField, ...], grid: Grid, rows: np.ndarray,
                cols: np.ndarray, *, lattice: FieldLattice | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`~xdem.kernels.field.compose` at the centres of pixels ``rows, cols`` (float arrays):
    the position read and the vertical change.

    The fields are smooth: they are evaluated exactly on a lattice of every :data:`LATTICE_STEP`
    pixels (finer where :class:`FieldLattice` finds the cubic convolution between its nodes errs by
    more than :data:`LATTICE_TOLERANCE` pixel near them) over the pixels' bounding box and one node
    beyond (aligned on multiples of the step in the whole grid) and interpolated by cubic convolution
    in between, when the pixels outnumber the nodes :data:`LATTICE_GAIN` times (else exactly at
    every pixel). Bilinear interpolation on a 16-pixel lattice erred by up to
    5.6e-7 px near the tiles' centres (where a thin-plate kernel's curvature grows like
    ``log r``) and fell back to the exact evaluation on a third of the 8000^2 benchmark's tiles;
    the cubic one errs 6 to 8 times less on that lattice and 3.7e-7 px at most on a 32-pixel one
    (measured on that benchmark's fields). For 20,000 pixels of a 1000-pixel tile: 1,225
    evaluations of the thin-plate kernel instead of 20,000 (the check is once per round, around
    the fields' centres, not at every cell of every tile).
    """
    r_lo, r_hi, c_lo, c_hi = rows.min(), rows.max(), cols.min(), cols.max()
    step = (FieldLattice.of(fields, grid) if lattice is None else lattice).over(r_lo, r_hi, c_lo, c_hi)
    if step > 1:
        lr, lc = cubic_nodes(r_lo, r_hi, step), cubic_nodes(c_lo, c_hi, step)
        if rows.size > LATTICE_GAIN * lr.size * lc.size:
            gx, gy = np.broadcast_arrays(*grid.centres(lr[:, None].astype(np.float64), lc[None, :].astype(np.float64)))
            px, py, vz = compose(fields, gx, gy)
            nodes = np.stack((gx - px, gy - py, vz))  # displacements: smooth, small (interpolated without the grid's offset)
            x, y = grid.centres(rows, cols)
            ddx, ddy, dz = lattice_cubic_at(nodes, lr, lc, rows, cols)
            return x - ddx, y - ddy, dz
    x, y = grid.centres(rows, cols)
    return compose(fields, x, y)


def _fresh(template: NuthKaab) -> NuthKaab:
    step = clone(template)
    assert isinstance(step, NuthKaab)
    return step


def _tile(data: FitData, rec: dict[str, Any]) -> FitData:
    r0, r1, c0, c1 = rec["row0"], rec["row1"], rec["col0"], rec["col1"]
    return FitData(ref=data.ref.isel(y=slice(r0, r1), x=slice(c0, c1)),
                   tba=data.tba.isel(y=slice(r0, r1), x=slice(c0, c1)),
                   inlier=data.inlier[r0:r1, c0:c1], bias_vars={})


def _kept(ss: SlopedSample, rec: dict[str, Any]) -> TileSample:
    """What is kept of a tile's draw: global indices, the reference there, slope, aspect, tba's windows."""
    s = ss.sample
    return TileSample(rows=(s["row"] + rec["row0"]).astype(np.int32), cols=(s["col"] + rec["col0"]).astype(np.int32),
                      ref=s["ref"], win_tba=ss.sampler.win,
                      slope=ss.slope.astype(np.float32), aspect=ss.aspect.astype(np.float32), n_valid=int(s.n_valid))


def draw_group(template: NuthKaab, data: FitData, recs: list[dict[str, Any]]) -> list[SlopedSample | None]:
    """Nuth & Kääb's draw on each tile of ``recs`` (``None``: not one valid pixel): one pass over
    the group (:func:`xdem.coreg._blockwise_draw.draw_tiles`), or one per tile with an ``initial_shift``
    (its validity depends on the shifted ``tba``)."""
    step = _fresh(template)
    step._check_params()
    check_projected(data.ref, "Nuth & Kääb")
    subs = [_tile(data, r) for r in recs]
    if initial_shift_of(step.initial_shift)[:2] == (0.0, 0.0):
        return draw_tiles(data, subs, [(r["row0"], r["row1"], r["col0"], r["col1"]) for r in recs],
                          subsample=step.subsample, random_state=step.random_state, half=type(step)._half,
                          resampling=step.resampling, terrain_method=step.terrain_method)
    out: list[SlopedSample | None] = []
    for sub in subs:
        try:
            out.append(sample_with_terrain(sub, subsample=step.subsample, random_state=step.random_state, min_count=1,
                                           what="Nuth & Kääb", resampling=step.resampling,
                                           terrain_method=step.terrain_method, half=type(step)._half,
                                           initial_shift=step.initial_shift))
        except NotEnoughDataError:
            out.append(None)
    return out


def first_draws(template: NuthKaab, data: FitData, recs: list[dict[str, Any]],
                tiles: list[tuple[int, int, int, int]]) -> Iterator[list[tuple[int, SlopedSample | None]]]:
    """Round 1's draws of all ``tiles`` as ``(index, sample)`` batches: a band of rows of chunks at a
    time while the tiles' candidates held across bands fit (:func:`~xdem.coreg._blockwise_draw.chunk_bands`:
    each chunk decoded once), else a group of rows of tiles at a time (:func:`draw_group`)."""
    step = _fresh(template)
    step._check_params()
    check_projected(data.ref, "Nuth & Kääb")
    bands = chunk_bands(tiles, data.ref.data.chunks[0], step.subsample) \
        if initial_shift_of(step.initial_shift)[:2] == (0.0, 0.0) else None
    if bands is not None:
        yield from draw_bands(data, [_tile(data, r) for r in recs], tiles, bands, subsample=step.subsample,
                              random_state=step.random_state, half=type(step)._half, resampling=step.resampling,
                              terrain_method=step.terrain_method)
        return
    for group in tile_groups(tiles, step.subsample):
        yield list(zip(group, draw_group(template, data, [recs[i] for i in group])))


def _result(step: NuthKaab, before: np.ndarray, after: np.ndarray, frame: str) -> dict[str, Any]:
    step.crs_ = frame
    status = "used" if step.horizontal_constrained_ else "rejected: flat terrain (no horizontal shift)"
    return {"dx": float(step.shift_x_), "dy": float(step.shift_y_), "dz": float(step.shift_z_),
            "nmad_before": _nmad(before), "nmad_after": _nmad(after), "converged": bool(step.converged_),
            "status": status}


def _nmad(dh: np.ndarray) -> float:
    dh = np.asarray(dh, dtype=np.float64)
    dh = dh[np.isfinite(dh)]
    return float(nmad(dh)) if dh.size else math.nan


def fit_tile_first(template: NuthKaab, data: FitData, rec: dict[str, Any], ss: SlopedSample | None, *, need: float,
                   min_valid: float | int, frame: str, grid: Grid | None = None,
                   resolution: tuple[float, float] | None = None) -> tuple[dict[str, Any], TileSample | None]:
    """Round 1 on one tile from its draw ``ss`` (:func:`draw_group`, which counts the tile's valid
    pixels; ``None``: not one): the count test, the fit on the draw's windows. Returns the
    record's new fields and the sample (``None`` when the tile was rejected before its fit).
    ``grid`` and ``resolution``: the reference's, when the caller read them once for all tiles."""
    step = _fresh(template)
    step._check_params()
    if ss is None:  # not one valid pixel
        return {"count": 0, "status": f"rejected: 0 valid pixels (< min_valid {min_valid})"}, None
    kept = _kept(ss, rec)
    grid = Grid.of(data.ref) if grid is None else grid
    resolution = get_resolution(data.ref) if resolution is None else resolution
    x, y = grid.centres(kept.rows, kept.cols)
    counted: dict[str, Any] = {"count": kept.n_valid, "x": float(np.mean(x)), "y": float(np.mean(y))}
    if kept.n_valid < max(need, 1):
        return counted | {"status": f"rejected: {kept.n_valid} valid pixels (< min_valid {min_valid})"}, None
    if kept.n_valid < type(step)._min_points:  # what the ordinary fit's draw raises
        return counted | {"status": f"rejected: NotEnoughDataError: Nuth & Kääb needs at least {type(step)._min_points} "
                                    f"valid pixels but found {kept.n_valid}"}, None
    start = check_divergence_params(initial_shift=step.initial_shift, on_divergence=step.on_divergence)
    try:
        step._fit_on_sample(kept.ref, kept.slope, kept.aspect, ss.sampler, resolution=resolution,
                            shape=(rec["row1"] - rec["row0"], rec["col1"] - rec["col0"]), start=start)
    except (NotEnoughDataError, ConvergenceError, OverlapError) as exc:
        return counted | {"status": f"rejected: {type(exc).__name__}: {str(exc).splitlines()[0]}"}, kept
    evaluate = ss.sampler
    out = _result(step, evaluate(0.0, 0.0) - kept.ref, evaluate(step.shift_x_, step.shift_y_) - kept.ref, frame)
    return counted | out, kept


def fit_tile_again(template: NuthKaab, data: FitData, rec: dict[str, Any], kept: TileSample,
                   fields: tuple[ThinPlateField, ...], *, frame: str, grid: Grid | None = None,
                   resolution: tuple[float, float] | None = None, lattice: FieldLattice | None = None) -> dict[str, Any]:
    """A later round on one tile: Nuth & Kääb of the residual offset of ``tba`` warped by
    ``fields``, on the first round's sample ``kept`` (kept, or drawn again). ``grid``: tba's,
    ``resolution``: the reference's and ``lattice``: :class:`FieldLattice`, when the caller found them
    once for all tiles."""
    step = _fresh(template)
    step._check_params()
    resolution = get_resolution(data.ref) if resolution is None else resolution
    try:
        sampler = FieldSampler(data.tba, kept.rows, kept.cols, fields, step.resampling, type(step)._half,
                               windows=kept.win_tba, grid=grid, lattice=lattice)
        step._fit_on_sample(kept.ref, kept.slope, kept.aspect, sampler, resolution=resolution,
                            shape=(rec["row1"] - rec["row0"], rec["col1"] - rec["col0"]), start=(0.0, 0.0))
    except (NotEnoughDataError, ConvergenceError, OverlapError) as exc:
        return {"status": f"rejected: {type(exc).__name__}: {str(exc).splitlines()[0]}"}
    return _result(step, sampler(0.0, 0.0) - kept.ref, sampler(step.shift_x_, step.shift_y_) - kept.ref, frame)


Rounds = Callable[[int, tuple[ThinPlateField, ...]], list[dict[str, Any]]]


@contextlib.contextmanager
def sampled_rounds(template: NuthKaab, data: FitData, tiles: list[tuple[int, int, int, int]], *, frame: str,
                   need: Callable[[dict[str, Any]], float], min_valid: float | int, later: bool = True) -> Iterator[Rounds]:
    """Rounds of Nuth & Kääb tiles on samples: the first draws the tiles a band of chunks or a group
    of tiles at a time (:func:`first_draws`, counting them) and fits the tiles each finished on threads; later ones read
    ``tba`` at the warped positions of the first round's samples: kept in memory while all fit in
    :data:`SAMPLE_CACHE_BYTES`, else in a temporary file for the block (:data:`SPILL_SAMPLES`), else
    drawn again, a group at a time (the same samples). ``later``: whether a later round will come (else
    nothing is kept)."""
    per_tile = max(resolve_count(template.subsample, (r1 - r0) * (c1 - c0)) for r0, r1, c0, c1 in tiles)
    total = len(tiles) * per_tile * TileSample.BYTES_PER_POINT
    keep = later and total <= SAMPLE_CACHE_BYTES
    spill = later and not keep and SPILL_SAMPLES
    with record_scope(total + len(tiles) * TileSample.BYTES_PER_TILE if spill else 0) as store:
        yield _rounds(template, data, tiles, frame=frame, need=need, min_valid=min_valid, keep=keep, store=store,
                      batch=max(1, SAMPLE_BATCH_BYTES // (per_tile * TileSample.BYTES_PER_POINT)))


def _rounds(template: NuthKaab, data: FitData, tiles: list[tuple[int, int, int, int]], *, frame: str,
            need: Callable[[dict[str, Any]], float], min_valid: float | int, keep: bool, store: RecordFile | None,
            batch: int) -> Rounds:
    """The rounds of :func:`sampled_rounds`; ``store``: where the first round's samples go when not
    kept (``None``: drawn again), read back ``batch`` tiles at a time."""
    t = get_transform(data.ref)
    ref_grid, tba_grid, resolution = Grid.of(data.ref), Grid.of(data.tba), get_resolution(data.ref)  # once, not per tile
    base = [blank(0, tile, t) for tile in tiles]
    kept: dict[int, TileSample] = {}  # the samples of the tiles fitted in round 1 (while they fit in memory)
    fitted: list[int] = []

    def first(i: int, ss: SlopedSample | None) -> None:
        got, sample = fit_tile_first(template, data, base[i], ss, need=need(base[i]), min_valid=min_valid, frame=frame,
                                     grid=ref_grid, resolution=resolution)
        base[i].update(got)
        if sample is not None:
            fitted.append(i)
            if keep:
                kept[i] = sample
            elif store is not None:
                store.put(i, sample.arrays())  # not stored (a full disk): drawn again

    def fit_round(it: int, fields: tuple[ThinPlateField, ...]) -> list[dict[str, Any]]:
        if it == 0:
            for draws in first_draws(template, data, base, tiles):
                parallel([functools.partial(first, i, ss) for i, ss in draws])
                del draws  # this batch's samples go before the next batch is drawn, not after it
            return [dict(r) for r in base]
        records = [dict(r, iteration=it, dx=math.nan, dy=math.nan, dz=math.nan, nmad_before=math.nan,
                        nmad_after=math.nan, converged=False, weight=0.0) for r in base]
        todo = sorted(fitted)
        for i in todo:
            records[i]["status"] = ""
        lattice = FieldLattice.of(fields, tba_grid)

        def again(i: int, sample: TileSample) -> None:
            records[i].update(fit_tile_again(template, data, records[i], sample, fields, frame=frame, grid=tba_grid,
                                             resolution=resolution, lattice=lattice))

        if keep:
            parallel([functools.partial(again, i, kept[i]) for i in todo])
            return records
        stored = [i for i in todo if store is not None and i in store]
        for k in range(0, len(stored), batch):
            read = [(i, store.get(i)) for i in stored[k:k + batch]] if store is not None else []
            pairs = [(i, TileSample.of_arrays(a)) for i, a in read if a is not None]
            parallel([functools.partial(again, i, sm) for i, sm in pairs])
            read, pairs = [], []  # this batch's samples go before the next batch is read
            release_free_heap()
        in_store = set(stored)
        redraw = [i for i in todo if i not in in_store]
        for group in tile_groups([tiles[i] for i in redraw], template.subsample) if redraw else []:
            idx = [redraw[j] for j in group]  # the same draws again (they gave a sample in round 1)
            drawn = draw_group(template, data, [base[i] for i in idx])
            pairs = [(i, _kept(ss, base[i])) for i, ss in zip(idx, drawn) if ss is not None]
            parallel([functools.partial(again, i, sm) for i, sm in pairs])
            pairs, drawn = [], []  # this group's samples go before the next group's draw, not after it
            release_free_heap()  # and their pages back to the system (xdem.io._heap)
        return records

    return fit_round
