"""Blockwise coregistration: a coregistration fitted per tile, applied as a smooth displacement field.

Satellite stereo strips carry offsets that vary along the strip (jitter, attitude): one
translation cannot correct them. :class:`BlockwiseCoreg` fits a step (any coregistration
defined in the reference's frame: :class:`~xdem.coreg.NuthKaab`, a pipeline of translations,
rotations and ramps) independently on each tile of the pair, rejects the tiles that failed or
disagree with their neighbours, fits a smooth field ``d(x, y) = (d_x, d_y, d_z)`` through the
per-tile translations (:mod:`xdem.kernels.field`), and applies it lazily as one warp
(:func:`xdem.warp.warp_dem`): ``out(q) = tba(q - d_xy(q)) + d_z(q)``.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import dask
import dask.array as da
import numpy as np
import numpy.typing as npt
import pandas as pd
import xarray as xr
from affine import Affine

from xdem.coreg._blockwise_budget import check_per_tile, tile_template
from xdem.coreg._blockwise_samples import sampled_rounds, samples_route
from xdem.coreg._blockwise_tiles import (
    MultiprocConfigLike,
    blank,
    field_doc,
    field_of,
    output_path,
    parallel,
    tile_edges,
    tile_nmads,
    tile_outputs,
    tiling_shape,
    translation_at,
    upstream_block,
    upstream_edges,
)
from xdem.coreg._data import FitData
from xdem.coreg.affine import NuthKaab
from xdem.coreg.base import Coreg, clone, coreg_from_dict, register
from xdem.errors import ConvergenceError, InputError, NotEnoughDataError, OverlapError
from xdem.io.cog import write_cog
from xdem.io.grid import get_transform
from xdem.kernels.field import ThinPlateField, compose, fit_thin_plate, neighbour_outliers
from xdem.kernels.interp import RESAMPLINGS
from xdem.typing import BiasVars, CRSLike, DEMLike, JSONDict, Params
from xdem.warp import FrameOp, Grid, NotMergeable, crs_key, warp_dem

if TYPE_CHECKING:
    from xdem.dem import DEM

__all__ = ["BlockwiseCoreg", "tile_edges", "field_of"]

#: Smallest spread (fraction of a pixel, in CRS units; also used for ``dz``) below which tiles
#: are never called outliers.
OUTLIER_FLOOR_PX = 0.01
#: Tile weights (count / NMAD after squared, relative to the median tile) are clipped to this range.
WEIGHT_RANGE = (0.1, 10.0)
#: Table columns of ``tiles_`` (in order).
COLUMNS = ("iteration", "row0", "row1", "col0", "col1", "x", "y", "count", "dx", "dy", "dz", "nmad_before",
           "nmad_after", "converged", "weight", "status")


def _frame_defined(step: Coreg) -> bool:
    """Whether every part of ``step`` is a correction of the frame (translation, rotation, ramp):
    declared ``blockwise_step`` (:class:`~xdem.coreg.Capabilities`)."""
    return all(s.capabilities.blockwise_step for s in step.steps)


def _op_of(fitted: Coreg) -> FrameOp:
    op = FrameOp("")
    for s in fitted.steps:
        got = s._frame_op()
        if got is None:
            raise InputError(f"{type(s).__name__} is not a correction of the frame")
        op = op.then(got)
    return op



@register
class BlockwiseCoreg(Coreg):
    """A coregistration fitted on each tile, applied as a smooth displacement field.

    ``fit`` cuts the pair into tiles of ``block_size`` pixels (at fixed pixel positions, so
    the tiles and every result are the same whatever the dask chunking; a ``block_size``
    that is a multiple of the chunk size reads each chunk once per pass), fits a clone of
    ``step`` on each tile as an ordinary lazy fit (memory bounded by the chunks, tiles fitted
    concurrently on threads unless the dask scheduler is synchronous), and records per tile
    the translation the tile's fit gives at the centroid of the tile's valid pixels, the
    valid pixel count, the NMAD of ``dh = tba - ref`` before and after the tile's own
    correction, and a status. A tile is rejected, with the reason in its status, when:

    - fewer than ``min_valid`` of its pixels are valid (no data, NaN, outside the inlier
      mask, e.g. a glacier masked out);
    - its fit raises :class:`~xdem.errors.NotEnoughDataError`, :class:`~xdem.errors.ConvergenceError`
      or :class:`~xdem.errors.OverlapError` (e.g. a tile smaller than the method's windows);
    - its fit could not constrain the horizontal shift (flat terrain, ``horizontal_constrained_``
      False; a fit that stopped before its tolerance with a usable result, ``converged_`` False
      and a :class:`~xdem.errors.ConvergenceWarning`, is kept with ``converged`` False in the
      table and judged by the outlier test);
    - it is an outlier against its neighbours: after removing a quadratic trend through the
      kept tiles, its residual minus the median residual of the tiles around it (within 1.5
      tile spacings) exceeds ``outlier_threshold`` times the NMAD of those differences (at
      least 1 % of a pixel), for any of ``dx, dy, dz``; the worst tile is rejected first and
      the test repeated (:func:`xdem.kernels.field.neighbour_outliers`).

    If fewer than ``min_tiles`` tiles remain, :class:`~xdem.errors.NotEnoughDataError` says
    how many were rejected and why. The kept translations become a thin-plate spline field
    per component (:func:`xdem.kernels.field.fit_thin_plate`): smoothing ``smoothing``
    divided by each tile's weight (its count over its NMAD after squared, relative to the
    median tile, clipped to 0.1-10), with a polynomial part of degree ``degree`` that
    carries the field beyond the outer tile centres (a quadratic one continues a quadratic
    trend to the DEM's edges instead of stopping flat). With ``n_iterations > 1`` the tiles
    are fitted again on the DEM warped by the fields so far, and the field of the residual
    offsets is added (the fields are composed exactly, resampled once); a later round with fewer
    than ``min_tiles`` usable tiles ends the iterations (its rows stay in the table).

    A :class:`~xdem.coreg.NuthKaab` step (the default) takes a faster route with the same
    results (:mod:`xdem.coreg._blockwise_samples`): no counting pass (each tile's draw counts its
    valid pixels; the centroid is that of the drawn pixels; the tiles of a group of rows are drawn
    in one pass, :mod:`xdem.coreg._blockwise_draw`), and a later round reads ``tba`` only
    at the first round's sampled pixels, through the fields, instead of warping the whole DEM:
    one pass over the pair, then one over ``tba`` per later round.

    ``apply`` is one lazy warp (:func:`xdem.warp.warp_dem`): each output chunk evaluates the
    field on a lattice of every 16 pixels of the whole grid (bilinear in between: the same
    values whatever the chunking) and reads only the source window it needs; NaN-local
    ``resampling``. The field is defined in the reference CRS: a DEM in another CRS is moved
    through it, as for every method.

    Parameters
    ----------
    step
        The coregistration fitted on each tile (``None``: :class:`~xdem.coreg.NuthKaab`). Each of
        its parts must be a correction of the frame (translation, rotation, ramp). Its
        ``random_state`` applies per tile; its ``subsample`` too when set (upstream's meaning), but
        left at its class default (``NuthKaab``'s 500,000) it is a budget for the whole DEM: each
        tile draws ``subsample / n_tiles`` pixels, at least 20,000 (:mod:`xdem.coreg._blockwise_budget`).
    block_size
        Tile side in pixels (``>= 8``).
    min_valid
        Valid pixels a tile needs: a fraction (``<= 1``) of its pixels or a count (``> 1``).
    min_tiles
        Kept tiles needed to build the field (``>= 1``).
    outlier_threshold
        Multiple of the NMAD of the neighbour differences beyond which a tile is an outlier
        (``None``: no outlier rejection).
    smoothing
        Thin-plate smoothing (in tile-spacing units; ``0`` interpolates the kept tiles exactly).
    degree
        Degree of the field's polynomial part: 0, 1 or 2.
    n_iterations
        Rounds of (fit tiles, fit field) on the DEM warped so far (``>= 1``).
    resampling
        ``"bilinear"`` or ``"cubic"``: interpolation of ``apply`` (and of later iterations).
    subsample_per_tile
        Pixels (a count ``> 1``) or fraction each tile draws, for every part of the step that
        has a ``subsample`` (``None``: the rule above; ``500_000``: every tile fits NuthKaab's
        default subsample, as before issue 28 and as upstream).
    block_size_fit
        Upstream's name of ``block_size`` (pixels in both): used when given.
    block_size_apply, mp_config, parent_path
        Upstream's; accepted with a warning at ``fit``: the field is applied continuously, dask
        runs the tiles, and nothing is written per tile.

    Learned attributes
    ------------------
    tiles_ : dict of lists
        The tile table, a column per name: ``iteration``, pixel bounds ``row0, row1, col0,
        col1``, centroid ``x, y`` of the valid pixels (CRS units), ``count`` (valid pixels),
        translation ``dx, dy, dz`` to apply there (same sign as ``NuthKaab``'s ``shift_*``),
        ``nmad_before``, ``nmad_after``, ``converged``, ``weight`` in the field fit, ``status``
        (``"used"`` or ``"rejected: <reason>"``). :meth:`tile_table` gives a DataFrame.
    fields_ : list of dict
        The fitted fields (one per completed round; :class:`xdem.kernels.field.ThinPlateField` values).
    n_tiles_ : int
    n_used_ : int
        Tiles used by the last field.

    Examples
    --------
    >>> import xdem
    >>> ref, tba, truth = xdem.examples.example_pair(chunks=128)
    >>> bw = BlockwiseCoreg(xdem.coreg.NuthKaab(subsample=5000), block_size=200).fit(ref, tba)
    >>> bw.n_tiles_, bw.n_used_
    (4, 4)
    >>> dx, dy, dz = bw.field(float(ref.x.mean()), float(ref.y.mean()))
    >>> bool(abs(dx - truth["shift_x"]) < 0.05 and abs(dy - truth["shift_y"]) < 0.05)
    True
    """

    #: What it can do (:class:`~xdem.coreg.Capabilities`): not a step of itself.
    tags = Coreg.tags.but(horizontal=True, in_frame=True, moves_points=True, rereads_inputs=True)
    resampling: str  # set by __init__

    def __init__(
        self,
        step: Coreg | None = None,
        mp_config: MultiprocConfigLike | None = None,
        block_size_fit: int | None = None,
        block_size_apply: int | None = None,
        parent_path: str | os.PathLike[str] | None = None,
        *,
        block_size: int = 1000,
        min_valid: float | int = 0.1,
        min_tiles: int = 3,
        outlier_threshold: float | None = 4.0,
        smoothing: float = 0.0,
        degree: int = 2,
        n_iterations: int = 2,
        resampling: str = "bilinear",
        subsample_per_tile: float | int | None = None,
    ) -> None:
        self.step = step
        self.mp_config = mp_config
        self.block_size_fit = block_size_fit
        self.block_size_apply = block_size_apply
        self.parent_path = parent_path
        self.block_size = block_size
        self.min_valid = min_valid
        self.min_tiles = min_tiles
        self.outlier_threshold = outlier_threshold
        self.smoothing = smoothing
        self.degree = degree
        self.n_iterations = n_iterations
        self.resampling = resampling
        self.subsample_per_tile = subsample_per_tile

    # --- parameters ------------------------------------------------------------------------
    def get_params(self, deep: bool = True) -> Params:
        """Hyper-parameters; with ``deep``, also the step's as ``step__<name>``."""
        params = super().get_params(deep=False)
        if deep and isinstance(self.step, Coreg):
            params.update({f"step__{k}": v for k, v in self.step.get_params(deep=True).items()})
        return params

    def set_params(self, **params: object) -> BlockwiseCoreg:
        """Set hyper-parameters, or the step's with ``step__<name>=value``."""
        own = {}
        for key, value in params.items():
            head, sep, rest = key.partition("__")
            if sep and head == "step":
                if not isinstance(self.step, Coreg):
                    raise InputError(f"'{key}': the step is not set (step={self.step!r})")
                self.step.set_params(**{rest: value})
            else:
                own[key] = value
        super().set_params(**own)
        return self

    def _template(self) -> Coreg:
        step = NuthKaab() if self.step is None else self.step
        if not isinstance(step, Coreg):
            raise InputError(f"step must be a coregistration (e.g. NuthKaab()), got {step!r}")
        if not _frame_defined(step):
            bad = [type(s).__name__ for s in step.steps if not _frame_defined(s)]
            raise InputError(f"BlockwiseCoreg needs a step that translates, rotates or deramps; {', '.join(bad)} "
                             "does not (it corrects values from gridded variables, or is blockwise itself)")
        return step

    def _check_params(self) -> None:
        def integer(name: str, low: int) -> int:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < low:
                raise InputError(f"{name} must be an integer >= {low}, got {value!r}")
            return int(value)

        integer("block_size", 8)
        integer("min_tiles", 1)
        integer("n_iterations", 1)
        if self.degree not in (0, 1, 2) or isinstance(self.degree, bool):
            raise InputError(f"degree must be 0, 1 or 2, got {self.degree!r}")
        mv = self.min_valid
        if isinstance(mv, bool) or not isinstance(mv, (int, float, np.integer, np.floating)) or not mv > 0:
            raise InputError(f"min_valid must be a fraction in (0, 1] or a count > 1, got {mv!r}")
        ot = self.outlier_threshold
        if ot is not None and (isinstance(ot, bool) or not isinstance(ot, (int, float)) or not ot > 0):
            raise InputError(f"outlier_threshold must be > 0 or None, got {ot!r}")
        sm = self.smoothing
        if isinstance(sm, bool) or not isinstance(sm, (int, float)) or not (sm >= 0 and math.isfinite(sm)):
            raise InputError(f"smoothing must be a finite number >= 0, got {sm!r}")
        if self.resampling not in RESAMPLINGS:
            raise InputError(f"resampling must be one of {RESAMPLINGS}, got {self.resampling!r}")

    def _tiling(self) -> tuple[int, Callable[[int, int], list[int]]]:
        """The tile size and edges: upstream's when ``mp_config`` or ``parent_path`` is given
        (:func:`~xdem.coreg._blockwise_tiles.upstream_block`), else ``block_size`` (or
        ``block_size_fit``) with :func:`tile_edges`."""
        if isinstance(self.step, type):
            raise InputError(f"step must be an instance, e.g. {self.step.__name__}(), not the class")
        upstream = upstream_block(self.block_size_fit, self.mp_config, self.parent_path)
        if upstream is not None:
            if upstream < 8:
                raise InputError(f"block_size_fit must be an integer >= 8, got {upstream}")
            return upstream, upstream_edges
        if self.block_size_fit is None:
            return int(self.block_size), tile_edges
        if self.block_size != 1000 and self.block_size != self.block_size_fit:
            raise InputError(f"block_size_fit={self.block_size_fit} is upstream's name of block_size="
                             f"{self.block_size}: give only one of them")
        return int(self.block_size_fit), tile_edges

    # --- fit --------------------------------------------------------------------------------
    def _fit(self, data: FitData) -> None:
        self._check_params()
        block, edges = self._tiling()
        check_per_tile(self.subsample_per_tile)
        frame = crs_key(data.ref.rio.crs)
        grid = Grid.of(data.ref)
        rows = edges(grid.shape[0], block)
        cols = edges(grid.shape[1], block)
        tiles = [(r0, r1, c0, c1) for r0, r1 in zip(rows[:-1], rows[1:]) for c0, c1 in zip(cols[:-1], cols[1:])]
        template = tile_template(self._template(), len(tiles), self.subsample_per_tile)
        rounds = sampled_rounds(template, data, tiles, frame=frame, need=self._need, min_valid=self.min_valid,
                                later=int(self.n_iterations) > 1) \
            if isinstance(template, NuthKaab) and samples_route(template) \
            else contextlib.nullcontext(self._lazy_rounds(template, data, tiles, frame))
        fields: list[ThinPlateField] = []
        table: list[dict[str, Any]] = []
        with rounds as fit_round:
            for it in range(int(self.n_iterations)):
                records = fit_round(it, tuple(fields))
                try:
                    field = self._fit_field(records, grid)
                except NotEnoughDataError:
                    if not fields:
                        raise
                    table += records  # a later round without enough tiles: the fields so far stand
                    break
                table += records
                fields.append(field)
        self.tiles_ = {c: [r[c] for r in table] for c in COLUMNS}
        self.fields_ = [field_doc(f) for f in fields]
        self.n_tiles_ = len(tiles)
        self.n_used_ = int(sum(r["status"] == "used" for r in table if r["iteration"] == len(fields) - 1))
        self._fitted_tba = data.tba  # lazy, on the reference's grid: what upstream's apply() aligns

    def _need(self, rec: dict[str, Any]) -> float:
        size = (rec["row1"] - rec["row0"]) * (rec["col1"] - rec["col0"])
        return max(float(self.min_valid * size if self.min_valid <= 1 else self.min_valid), 1.0)

    def _lazy_rounds(self, template: Coreg, data: FitData, tiles: list[tuple[int, int, int, int]],
                     frame: str) -> Callable[[int, tuple[ThinPlateField, ...]], list[dict[str, Any]]]:
        """Rounds of any step: a pass counting each tile's valid pixels, then each tile fitted as an
        ordinary lazy fit, later rounds on the DEM warped by the fields so far."""
        grid = Grid.of(data.tba)
        counted: list[tuple[Any, ...]] = []

        def fit_round(it: int, fields: tuple[ThinPlateField, ...]) -> list[dict[str, Any]]:
            tba = data.tba if not fields else warp_dem(data.tba, grid=grid, op=FrameOp(frame, fields=fields),
                                                        resampling=self.resampling)
            current = FitData(ref=data.ref, tba=tba, inlier=data.inlier, bias_vars={})
            if not counted:  # later rounds keep the first one's counts: no pass over the warped DEM
                counted.extend(self._count(current, tiles))
            return self._fit_tiles(template, current, tiles, counted, iteration=it)

        return fit_round

    @staticmethod
    def _count(data: FitData, tiles: list[tuple[int, int, int, int]]) -> list[tuple[Any, ...]]:
        """Per tile, in one pass: valid pixels, sums of their rows and columns, sum of the reference there."""
        valid = data.valid()
        ref = data.ref.data
        sums = []
        for r0, r1, c0, c1 in tiles:
            v = valid[r0:r1, c0:c1]
            rr = da.arange(r0, r1, chunks=v.chunks[0], dtype=np.int64)[:, None]
            cc = da.arange(c0, c1, chunks=v.chunks[1], dtype=np.int64)[None, :]
            sums.append((v.sum(dtype=np.int64), (v * rr).sum(dtype=np.int64), (v * cc).sum(dtype=np.int64),
                         da.where(v, ref[r0:r1, c0:c1].astype(np.float64), 0.0).sum()))
        (counted,) = dask.compute(sums)
        return list(counted)

    def _fit_tiles(self, template: Coreg, data: FitData, tiles: list[tuple[int, int, int, int]],
                   counted: list[tuple[Any, ...]], *, iteration: int) -> list[dict[str, Any]]:
        """One record per tile from its counts, then the fits (threads), then the statuses."""
        t = get_transform(data.ref)
        records = []
        for tile, (n, sr, sc, sz) in zip(tiles, counted):
            n = int(n)
            rec = blank(iteration, tile, t)
            if n:
                x, y = t * (sc / n + 0.5, sr / n + 0.5)
                rec.update(x=float(x), y=float(y))
            rec.update(count=n, _z=float(sz) / n if n else 0.0,
                       status="" if n >= self._need(rec) else f"rejected: {n} valid pixels (< min_valid {self.min_valid})")
            records.append(rec)

        def run(rec: dict[str, Any]) -> None:
            rec.update(_fit_tile(template, data, rec))

        parallel([functools.partial(run, r) for r in records if not r["status"]])
        for rec in records:
            rec.pop("_z")
        return records

    def _fit_field(self, records: list[dict[str, Any]], grid: Grid) -> ThinPlateField:
        """Reject outliers among the fitted tiles, weight the kept ones, fit the field."""
        res = abs(grid.transform.a)
        spacing = float(self.block_size if self.block_size_fit is None else self.block_size_fit) * res
        centre = grid.centres(np.array([grid.shape[0] / 2.0 - 0.5]), np.array([grid.shape[1] / 2.0 - 0.5]))
        centre_xy = (float(centre[0][0]), float(centre[1][0]))
        ok = [r for r in records if r["status"] == "used"]
        if len(ok) >= 4 and self.outlier_threshold is not None:
            u = np.array([(r["x"] - centre_xy[0]) / spacing for r in ok])
            v = np.array([(r["y"] - centre_xy[1]) / spacing for r in ok])
            vals = np.array([[r["dx"], r["dy"], r["dz"]] for r in ok])
            bad = neighbour_outliers(u, v, vals, threshold=float(self.outlier_threshold),
                                     floor=np.full(3, OUTLIER_FLOOR_PX * res))
            for r, b in zip(ok, bad):
                if b:
                    r["status"] = "rejected: outlier against its neighbours"
            ok = [r for r, b in zip(ok, bad) if not b]
        if len(records) < int(self.min_tiles):  # not one rejected: the DEM is too small for its tiles
            raise NotEnoughDataError(f"BlockwiseCoreg: the DEM has only {len(records)} tile(s) (need min_tiles="
                                     f"{self.min_tiles}); use smaller tiles (block_size, --block-size in the CLI)")
        if len(ok) < int(self.min_tiles):
            reasons: dict[str, int] = {}
            for r in records:
                if r["status"] != "used":
                    key = r["status"].removeprefix("rejected: ").split(" (")[0]
                    key = "too few valid pixels" if key.endswith("valid pixels") else key
                    reasons[key] = reasons.get(key, 0) + 1
            why = "; ".join(f"{n} {k}" for k, n in sorted(reasons.items(), key=lambda kv: -kv[1]))
            raise NotEnoughDataError(f"BlockwiseCoreg: only {len(ok)} of {len(records)} tiles are usable (need "
                                     f"min_tiles={self.min_tiles}); rejected: {why}")
        quality = np.array([r["count"] / max(r["nmad_after"], 1e-6) ** 2 if np.isfinite(r["nmad_after"]) else np.nan
                            for r in ok])
        ref_q = np.nanmedian(quality) if np.isfinite(quality).any() else 1.0
        weights = np.clip(np.where(np.isfinite(quality), quality / ref_q, 1.0), *WEIGHT_RANGE)
        for r, w in zip(ok, weights):
            r["weight"] = float(w)
        return fit_thin_plate(np.array([r["x"] for r in ok]), np.array([r["y"] for r in ok]),
                              np.array([[r["dx"], r["dy"], r["dz"]] for r in ok]), centre=centre_xy, scale=spacing,
                              smoothing=float(self.smoothing) / weights, degree=int(self.degree))

    # --- results ------------------------------------------------------------------------------
    def _fields(self) -> tuple[ThinPlateField, ...]:
        self._check_fitted()
        return tuple(field_of(d) for d in self.fields_)

    def field(self, x: npt.ArrayLike, y: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The correction ``(d_x, d_y, d_z)`` applied at output coordinates ``x, y`` (reference
        CRS; broadcastable): the total of every iteration, composed as :meth:`apply` does."""
        xs, ys = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
        px, py, vz = compose(self._fields(), xs, ys)
        return xs - px, ys - py, vz

    def tile_table(self) -> pd.DataFrame:
        """The tile table ``tiles_`` as a DataFrame (one row per tile and iteration)."""
        self._check_fitted()
        return pd.DataFrame(self.tiles_, columns=list(COLUMNS))

    # --- apply ------------------------------------------------------------------------------
    def _frame_op(self) -> FrameOp:
        frame = vars(self).get("crs_")
        return FrameOp(str(frame) if frame is not None else "", fields=self._fields())

    def _apply(self, dem: xr.DataArray, bias_vars: dict[str, xr.DataArray], resample: bool) -> xr.DataArray:
        if not resample:
            raise InputError("resample=False keeps the data on a moved grid, which only a translation can do; a "
                             "displacement field varies across the DEM: use resample=True")
        grid = Grid.of(dem)
        op = self._frame_op()
        return warp_dem(dem, grid=grid, op=FrameOp(op.frame or grid.crs, fields=op.fields), resampling=self.resampling)

    @property
    def shape_tiling_grid(self) -> tuple[int, int, int]:
        """Upstream's ``(rows, cols, 4)`` of the tiling (``(0, 0, 0)`` before ``fit``, as upstream)."""
        return tiling_shape(self.tiles_) if self.is_fitted else (0, 0, 0)

    @property
    def meta(self) -> Mapping[str, Mapping[str, Mapping[str, object]]]:
        """Upstream's ``meta``: ``inputs`` are the step's, ``outputs`` maps each tile ``"row_col"``
        to the ``shift_x``, ``shift_y``, ``shift_z`` the step fitted on it (tiles whose fit gave
        none are left out, as upstream); read-only."""
        step = self._template()
        outputs = tile_outputs(self.tiles_) if self.is_fitted else {}
        return MappingProxyType({"inputs": step.meta["inputs"],
                                 "outputs": MappingProxyType({k: MappingProxyType(v) for k, v in outputs.items()})})

    def apply(self, elev: DEMLike | np.ndarray | None = None,  # type: ignore[override]
              bias_vars: BiasVars | None = None, resample: bool = True, resampling: str | None = None,
              transform: Affine | None = None, crs: CRSLike | None = None, *, grid: DEMLike | None = None,
              dem: DEMLike | None = None) -> xr.DataArray | tuple[np.ndarray, Affine] | DEM:
        """:meth:`Coreg.apply` of a DEM (lazy); without one, upstream's ``apply()``: the
        to-be-aligned DEM of the last ``fit`` aligned and written, out of core, as a COG at
        ``mp_config.outfile`` (or ``parent_path/aligned_dem.tif``), returned as a :class:`xdem.DEM`.

        Examples
        --------
        >>> import xdem
        >>> ref, tba, truth = xdem.examples.example_pair(chunks=128)
        >>> bw = BlockwiseCoreg(xdem.coreg.NuthKaab(subsample=2000), block_size=200).fit(ref, tba)
        >>> bw.apply()
        Traceback (most recent call last):
        ...
        xdem.errors.InputError: apply() without a DEM writes the aligned DEM to a file: build BlockwiseCoreg(step, \
mp_config=MultiprocConfig(chunk_size=..., outfile='aligned_dem.tif')) or parent_path=..., or give the DEM: apply(tba)
        """
        if elev is not None or dem is not None:
            return super().apply(elev, bias_vars, resample, resampling, transform, crs, grid=grid, dem=dem)
        self._check_fitted()
        path = output_path(self.mp_config, self.parent_path)
        tba = vars(self).get("_fitted_tba")
        if tba is None:
            raise InputError("this BlockwiseCoreg was loaded, not fitted here: give the DEM to align, apply(tba)")
        aligned = super().apply(tba, resample=resample, resampling=resampling)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_cog(aligned, path, overwrite=True)
        from xdem.dem import DEM  # geoutils (~0.3 s CPU) only here: the DEM this writes

        return DEM(path)

    # --- serialisation ------------------------------------------------------------------------
    def to_dict(self) -> JSONDict:
        doc = super().to_dict()
        doc["params"] = {k: v for k, v in doc["params"].items() if not k.startswith("step__")}
        doc["params"]["step"] = None if self.step is None else self.step.to_dict()
        doc["params"]["mp_config"] = None  # upstream's run configuration (a cluster): not saved
        if self.parent_path is not None:
            doc["params"]["parent_path"] = str(self.parent_path)
        return doc

    @classmethod
    def from_dict(cls, doc: JSONDict) -> BlockwiseCoreg:
        params = dict(doc.get("params", {}))
        step = params.pop("step", None)
        obj = cls(None if step is None else coreg_from_dict(step), **params)
        obj._restore(doc.get("learned", {}))
        return obj

    def _restore(self, learned: dict[str, Any]) -> None:
        super()._restore(learned)
        if "tiles_" in learned:  # JSON null -> NaN in the numeric columns
            self.tiles_ = {k: [math.nan if v is None else v for v in col] for k, col in learned["tiles_"].items()}


def _fit_tile(template: Coreg, data: FitData, rec: dict[str, Any]) -> dict[str, Any]:
    """Fit a clone of ``template`` on one tile (a lazy fit on the tile's slice of the pair)."""
    r0, r1, c0, c1 = rec["row0"], rec["row1"], rec["col0"], rec["col1"]
    sub = FitData(ref=data.ref.isel(y=slice(r0, r1), x=slice(c0, c1)),
                  tba=data.tba.isel(y=slice(r0, r1), x=slice(c0, c1)),
                  inlier=data.inlier[r0:r1, c0:c1], bias_vars={}, collect_points=True)
    step = clone(template)
    try:
        step.fit_prepared(sub)
        op = _op_of(step)
    except (NotEnoughDataError, ConvergenceError, OverlapError, NotMergeable) as exc:
        return {"status": f"rejected: {type(exc).__name__}: {str(exc).splitlines()[0]}"}
    learned = [s.learned() for s in step.steps]
    converged = all(bool(v.get("converged_", True)) for v in learned)
    constrained = all(bool(v.get("horizontal_constrained_", True)) for v in learned)
    dx, dy, dz = translation_at(op, rec["x"], rec["y"], rec["_z"])
    before, after = tile_nmads(step, sub, op)
    # a fit stopped before its tolerance but usable (a ConvergenceWarning, converged False) is kept: the
    # outlier test judges its value; an unusable one raised ConvergenceError above
    status = "used" if constrained else "rejected: flat terrain (no horizontal shift)"
    return {"dx": dx, "dy": dy, "dz": dz, "nmad_before": before, "nmad_after": after, "converged": converged,
            "status": status}
