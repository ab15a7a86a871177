"""Tiles of :class:`~xdem.coreg.BlockwiseCoreg`: their edges (ours and upstream xdem 0.2.3's),
the JSON form of the fitted fields, the tile records, the threads that fit them, and
upstream's surface (``mp_config``/``parent_path``, ``shape_tiling_grid``, ``meta["outputs"]``).

Upstream (``xdem/coreg/blockwise.py`` at v0.2.3) takes exactly one of ``mp_config`` (a geoutils
``MultiprocConfig``) and ``parent_path``; it tiles by ``block_size_fit`` (default 500 pixels,
which it also writes into ``mp_config.chunk_size``) with geoutils' ``compute_tiling``: tiles of
``block_size_fit`` from the top-left, the last row and column of tiles holding the remainder;
``shape_tiling_grid`` is that tiling's array shape ``(rows, cols, 4)``. ``apply()`` writes the
aligned DEM in the folder of ``mp_config.outfile`` (or ``parent_path``).
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import dask
import numpy as np

from xdem.coreg._data import FitData
from xdem.errors import InputError, XdemWarning
from xdem.kernels.field import ThinPlateField
from xdem.kernels.robust import nmad
from xdem.sampling import sample_valid
from xdem.typing import JSONDict
from xdem.warp import FrameOp

if TYPE_CHECKING:
    from xdem.coreg.base import Coreg

__all__ = ["MultiprocConfigLike", "NMAD_SAMPLE", "translation_at", "tile_nmads", "tile_edges", "upstream_edges",
           "field_of", "field_doc", "blank", "parallel", "UPSTREAM_BLOCK", "upstream_block", "output_path",
           "tile_outputs", "tiling_shape"]

class MultiprocConfigLike(Protocol):
    """What :class:`~xdem.coreg.BlockwiseCoreg` reads of upstream's ``mp_config`` (a geoutils
    ``MultiprocConfig``): the tile size and the output file (its ``cluster`` is not used: dask
    runs the tiles)."""

    @property
    def chunk_size(self) -> int: ...

    @property
    def outfile(self) -> str | os.PathLike[str] | None: ...


#: Valid pixels drawn per tile to measure the NMAD of dh before and after the tile's own fit
#: (when the step does not hand over its own subsample).
NMAD_SAMPLE = 20_000
#: Upstream's default ``block_size_fit`` (pixels).
UPSTREAM_BLOCK = 500


def tile_edges(size: int, block: int) -> list[int]:
    """Edges of tiles of ``block`` pixels along an axis of ``size`` pixels: multiples of ``block``
    from 0; the remainder joins the last tile when smaller than half a block.

    Examples
    --------
    >>> tile_edges(1000, 250), tile_edges(1000, 300), tile_edges(100, 300)
    ([0, 250, 500, 750, 1000], [0, 300, 600, 1000], [0, 100])
    """
    n = max(1, int(round(size / block)))
    return [min(i * block, size) for i in range(n)] + [size]


def upstream_edges(size: int, block: int) -> list[int]:
    """Upstream's tile edges (geoutils' ``compute_tiling``): multiples of ``block`` from 0, the
    last tile holding the remainder however small.

    Examples
    --------
    >>> upstream_edges(1000, 300), upstream_edges(100, 300)
    ([0, 300, 600, 900, 1000], [0, 100])
    """
    return list(range(0, size, block)) + [size]


def upstream_block(block_size_fit: int | None, mp_config: MultiprocConfigLike | None, parent_path: object | None) -> int | None:
    """The tile size of upstream's surface (``None``: ours is used): ``block_size_fit``, else
    upstream's default 500. Both ``mp_config`` and ``parent_path`` is an error, as upstream; a
    ``mp_config.chunk_size`` other than the tile size warns (upstream replaces it by
    ``block_size_fit``)."""
    if mp_config is not None and parent_path is not None:
        raise InputError("give only one of mp_config and parent_path (as upstream)")
    if mp_config is None and parent_path is None:
        return None
    block = UPSTREAM_BLOCK if block_size_fit is None else int(block_size_fit)
    chunk = getattr(mp_config, "chunk_size", None)
    if mp_config is not None and chunk is not None and int(chunk) != block:
        warnings.warn(f"BlockwiseCoreg tiles by block_size_fit={block} as upstream (which overwrites "
                      f"mp_config.chunk_size={chunk} with it); give block_size_fit={chunk} for tiles of that size",
                      UserWarning, stacklevel=5)
    return block


def output_path(mp_config: MultiprocConfigLike | None, parent_path: str | os.PathLike[str] | None) -> Path:
    """Where ``apply()`` without a DEM writes: ``mp_config.outfile``, or ``parent_path/aligned_dem.tif``;
    neither is one :class:`~xdem.errors.InputError`."""
    outfile = getattr(mp_config, "outfile", None) if mp_config is not None else None
    if outfile is not None:
        return Path(outfile)
    if parent_path is not None:
        return Path(parent_path) / "aligned_dem.tif"
    raise InputError("apply() without a DEM writes the aligned DEM to a file: build BlockwiseCoreg(step, "
                     "mp_config=MultiprocConfig(chunk_size=..., outfile='aligned_dem.tif')) or parent_path=..., "
                     "or give the DEM: apply(tba)")


def tiling_shape(tiles: JSONDict) -> tuple[int, int, int]:
    """Upstream's ``shape_tiling_grid`` ``(rows, cols, 4)`` of a fitted tile table."""
    return len(set(tiles["row0"])), len(set(tiles["col0"])), 4


def tile_outputs(tiles: JSONDict) -> dict[str, dict[str, float]]:
    """Upstream's ``meta["outputs"]``: ``"row_col"`` -> the step's ``shift_x``, ``shift_y``,
    ``shift_z`` fitted on that tile (first round), for the tiles whose fit gave one."""
    rows = {r: i for i, r in enumerate(sorted(set(tiles["row0"])))}
    cols = {c: i for i, c in enumerate(sorted(set(tiles["col0"])))}
    out: dict[str, dict[str, float]] = {}
    for k in range(len(tiles["row0"])):
        dx, dy, dz = (float(tiles[c][k]) for c in ("dx", "dy", "dz"))
        if tiles["iteration"][k] == 0 and math.isfinite(dx) and math.isfinite(dy) and math.isfinite(dz):
            out[f"{rows[tiles['row0'][k]]}_{cols[tiles['col0'][k]]}"] = {"shift_x": dx, "shift_y": dy, "shift_z": dz}
    return out


def field_doc(f: ThinPlateField) -> dict[str, Any]:
    """The JSON form of a fitted field (an entry of ``fields_``)."""
    return asdict(f)


def field_of(doc: JSONDict) -> ThinPlateField:
    """A :class:`~xdem.kernels.field.ThinPlateField` from its JSON form (an entry of ``fields_``)."""
    def rows(v: Any) -> tuple[tuple[float, ...], ...]:
        return tuple(tuple(float(z) for z in row) for row in v)

    return ThinPlateField(centre=(float(doc["centre"][0]), float(doc["centre"][1])), scale=float(doc["scale"]),
                          centres=rows(doc["centres"]), weights=rows(doc["weights"]),
                          terms=tuple((int(i), int(j)) for i, j in doc["terms"]), coefs=rows(doc["coefs"]))


def blank(iteration: int, tile: Sequence[int], t: Any) -> dict[str, Any]:
    """A tile's record before its fit (centred on the tile, no valid pixel counted yet)."""
    r0, r1, c0, c1 = tile
    x, y = t * ((c0 + c1) / 2.0, (r0 + r1) / 2.0)
    return {"iteration": iteration, "row0": r0, "row1": r1, "col0": c0, "col1": c1, "x": float(x), "y": float(y),
            "count": 0, "dx": math.nan, "dy": math.nan, "dz": math.nan, "nmad_before": math.nan,
            "nmad_after": math.nan, "converged": False, "weight": 0.0, "status": ""}


def parallel(jobs: list[Callable[[], None]]) -> None:
    """Run ``jobs`` on threads (each a lazy fit computing on the dask scheduler in use), or one
    after the other when that scheduler is synchronous; warnings are silenced (each tile's status
    says what its warnings said)."""
    threaded = str(dask.config.get("scheduler", "") or "") not in ("synchronous", "sync", "single-threaded")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", XdemWarning)
        if threaded and len(jobs) > 1:
            workers = min(len(jobs), int(dask.config.get("num_workers", None) or os.cpu_count() or 1))
            with ThreadPoolExecutor(max_workers=workers) as pool:
                list(pool.map(lambda job: job(), jobs))
        else:
            for job in jobs:
                job()


def translation_at(op: FrameOp, x: float, y: float, z: float) -> tuple[float, float, float]:
    """What ``op`` does at the frame point ``(x, y, z)``: its horizontal motion and vertical change."""
    p = np.array([x, y, z, 1.0])
    moved = op.matrix() @ p
    ramps = float(np.asarray(op.ramps(np.array([moved[0]]), np.array([moved[1]]))).ravel()[0])
    return float(moved[0] - x), float(moved[1] - y), float(moved[2] - z - ramps)



def tile_nmads(step: Coreg, sub: FitData, op: FrameOp) -> tuple[float, float]:
    """NMAD of dh on the tile before and after the tile's own correction: from the step's own
    subsample when it hands one over (Nuth & Kääb: no pass), else from a small draw (one pass)."""
    pts = step.pop_shared_points()
    if pts is not None and op.is_translation:
        return float(nmad(_finite(pts.dh()))), float(nmad(_finite(pts.moved(op.shift).dh())))
    after = step._apply(sub.tba, {}, True)
    s = sample_valid(sub.valid(), {"before": sub.tba.data - sub.ref.data, "after": after.data - sub.ref.data},
                     subsample=NMAD_SAMPLE, random_state=0, min_count=1, what="BlockwiseCoreg")
    return float(nmad(_finite(s["before"]))), float(nmad(_finite(s["after"])))


def _finite(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    finite: np.ndarray = a[np.isfinite(a)]
    return finite
