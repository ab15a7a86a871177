"""The example DEM pair with a known misalignment: :func:`example_pair` (in memory) and
:func:`write_example_pair` (files), both exported by :mod:`xdem.examples`."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
import xarray as xr
from affine import Affine
from scipy import ndimage

from xdem.errors import InputError, OutputError
from xdem.examples._files import DEFAULT_SHIFT, get_path
from xdem.io.atomic import move_into_place, write_text_atomic
from xdem.io.grid import block_xy
from xdem.io.open import open_dem

__all__ = ["example_pair", "write_example_pair"]


def _read(path: Path) -> tuple[np.ndarray, Affine, Any]:
    """Whole bundled raster as float32 with NaN for nodata (small file, so in memory)."""
    with rasterio.open(path) as src:
        arr = src.read(1, masked=True).astype(np.float32).filled(np.nan)
        return arr, src.transform, src.crs


def _shift_content(arr: np.ndarray, shift_rows: float, shift_cols: float) -> np.ndarray:
    """``out[r, c] = arr[r - shift_rows, c - shift_cols]`` by cubic-spline interpolation.

    Pixels whose source lies outside the array (beyond the outer pixel centres), or whose
    4 x 4 interpolation footprint contains a NaN, become NaN.
    """
    nan = np.isnan(arr)
    filled = arr.astype(np.float64)
    if nan.any():
        if nan.all():
            return np.full(arr.shape, np.nan, dtype=np.float32)
        idx = ndimage.distance_transform_edt(nan, return_distances=False, return_indices=True)
        filled = filled[tuple(idx)]
    out = ndimage.shift(filled, (shift_rows, shift_cols), order=3, mode="nearest", prefilter=True)
    # Footprint of each output pixel along each axis: floor(src) - 1 .. floor(src) + 2.
    bad = nan.copy()
    for axis, s in ((0, shift_rows), (1, shift_cols)):
        n = arr.shape[axis]
        src = np.arange(n, dtype=np.float64) - s
        outside = (src < -1e-9) | (src > n - 1 + 1e-9)
        base = np.floor(src + 1e-9).astype(np.int64)
        exact = np.abs(src - np.round(src)) < 1e-9
        acc = np.zeros(arr.shape, dtype=bool)
        for off in (-1, 0, 1, 2):
            take = np.clip(base + off, 0, n - 1)
            part = np.take(bad, take, axis=axis)
            if off != 0:  # an integer shift reads one pixel only
                keep = ~exact
                part = part & (keep[:, None] if axis == 0 else keep[None, :])
            acc |= part
        out_mask = outside[:, None] if axis == 0 else outside[None, :]
        bad = acc | out_mask
    out[bad] = np.nan
    return out.astype(np.float32)


def _disc_holes(shape: tuple[int, int], count: int, rng: np.random.Generator) -> np.ndarray:
    """Boolean mask of ``count`` discs of radius 3 to 12 pixels at random positions."""
    mask = np.zeros(shape, dtype=bool)
    rows = np.arange(shape[0])[:, None]
    cols = np.arange(shape[1])[None, :]
    for _ in range(int(count)):
        r0, c0 = rng.uniform(0, shape[0]), rng.uniform(0, shape[1])
        rad = rng.uniform(3.0, 12.0)
        mask |= (rows + 0.5 - r0) ** 2 + (cols + 0.5 - c0) ** 2 <= rad**2
    return mask


def _as_dataarray(arr: np.ndarray, transform: Affine, crs: Any, name: str) -> xr.DataArray:
    x, y = block_xy(transform, 0, 0, arr.shape)
    out = xr.DataArray(arr, dims=("y", "x"), coords={"y": y, "x": x}, name=name, attrs={"AREA_OR_POINT": "Area"})
    out = out.rio.write_crs(crs).rio.write_transform(transform)
    return out.rio.write_nodata(np.nan, encoded=False)


def _make_pair_arrays(
    *,
    name: str,
    shift_x: float,
    shift_y: float,
    shift_z: float,
    mode: str,
    tilt: tuple[float, float] | None,
    noise: float,
    holes: int,
    random_state: int,
) -> tuple[np.ndarray, np.ndarray, Affine, Affine, Any, dict]:
    if mode not in ("resample", "transform"):
        raise InputError(f"mode must be 'resample' or 'transform', got {mode!r}")
    if noise < 0:
        raise InputError(f"noise is a standard deviation and must be >= 0, got {noise}")
    if holes < 0:
        raise InputError(f"holes must be >= 0, got {holes}")
    if tilt is not None and len(tilt) != 2:
        raise InputError(f"tilt must be (a_x, a_y) in metres per metre, got {tilt!r}")
    if not get_path(name).suffix == ".tif":
        raise InputError(f"{name!r} is not a DEM; choose a bundled DEM, e.g. 'lidar'")
    ref, transform, crs = _read(get_path(name))
    dx, dy, dz = float(shift_x), float(shift_y), float(shift_z)
    if mode == "resample":
        # x = c + (col + 0.5) a: the source column of output column col is col - dx / a.
        tba = _shift_content(ref, dy / transform.e, dx / transform.a)
        tba_transform = transform
    else:
        tba = ref.copy()
        tba_transform = Affine.translation(dx, dy) * transform
    tba = tba.astype(np.float64) + dz
    if tilt is not None:
        x, y = block_xy(tba_transform, 0, 0, tba.shape)
        xc = transform.c + transform.a * ref.shape[1] / 2
        yc = transform.f + transform.e * ref.shape[0] / 2
        tba = tba + float(tilt[0]) * (x[None, :] - xc) + float(tilt[1]) * (y[:, None] - yc)
    rng = np.random.default_rng(random_state)
    if noise > 0:
        tba = tba + rng.normal(0.0, float(noise), size=tba.shape)
    if holes:
        tba[_disc_holes(tba.shape, holes, rng)] = np.nan
    truth = {
        "dx": dx,
        "dy": dy,
        "dz": dz,
        "shift_x": -dx,
        "shift_y": -dy,
        "shift_z": -dz,
        "tilt": None if tilt is None else [float(tilt[0]), float(tilt[1])],
        "mode": mode,
        "noise": float(noise),
        "holes": int(holes),
        "random_state": random_state,
        "source": name,
        "convention": "tba(x, y) = ref(x - dx, y - dy) + dz; apply (shift_x, shift_y, shift_z) to tba",
    }
    return ref, tba.astype(np.float32), transform, tba_transform, crs, truth


def example_pair(
    *,
    shift_x: float = DEFAULT_SHIFT[0],
    shift_y: float = DEFAULT_SHIFT[1],
    shift_z: float = DEFAULT_SHIFT[2],
    mode: str = "resample",
    tilt: tuple[float, float] | None = None,
    noise: float = 0.0,
    holes: int = 0,
    random_state: int = 0,
    chunks: int | tuple[int, int] | str = "auto",
    name: str = "lidar",
) -> tuple[xr.DataArray, xr.DataArray, dict]:
    """A reference DEM and a copy of it misaligned by a known amount.

    ``tba(x, y) = ref(x - shift_x, y - shift_y) + shift_z`` (plus the optional tilt, noise
    and holes). Beware of the sign: the arguments are the displacement ``(dx, dy, dz)``
    given to the data; the correction a coregistration must find is the opposite, returned
    as ``truth["shift_x"] = -dx`` etc.

    Parameters
    ----------
    shift_x, shift_y, shift_z
        Displacement ``dx`` (east), ``dy`` (north), ``dz`` (up) in metres. Defaults
        3.27, -1.64 and 2.5 m (sub-pixel on the 1 m grid).
    mode
        ``"resample"``: the content is moved by cubic-spline interpolation onto the same grid
        as ``ref`` (pixels whose source falls outside the DEM become NaN).
        ``"transform"``: exact data, the geotransform is moved by ``(dx, dy)``.
    tilt
        ``(a_x, a_y)`` in metres per metre: adds ``a_x (x - x_c) + a_y (y - y_c)`` to ``tba``,
        with ``(x_c, y_c)`` the centre of ``ref``.
    noise
        Standard deviation (m) of Gaussian noise added to ``tba``.
    holes
        Number of NaN discs (radius 3 to 12 pixels) punched into ``tba``.
    random_state
        Seed of the noise and holes; the output is deterministic for a given seed.
    chunks
        Chunks passed to :func:`xdem.open_dem`.
    name
        Bundled DEM to use (see :func:`get_path`).

    Returns
    -------
    ref, tba : xarray.DataArray
        Lazy (dask-backed) float32 DEMs.
    truth : dict
        ``dx, dy, dz``, ``shift_x, shift_y, shift_z`` (= minus those), ``tilt``, ``mode``,
        ``noise``, ``holes``, ``random_state``.

    Examples
    --------
    >>> from xdem.examples import example_pair
    >>> ref, tba, truth = example_pair()
    >>> truth["shift_x"], truth["shift_z"]
    (-3.27, -2.5)
    """
    ref_arr, tba_arr, transform, tba_transform, crs, truth = _make_pair_arrays(
        name=name, shift_x=shift_x, shift_y=shift_y, shift_z=shift_z, mode=mode, tilt=tilt,
        noise=noise, holes=holes, random_state=random_state,
    )
    ref = open_dem(get_path(name), chunks=chunks)
    tba = open_dem(_as_dataarray(tba_arr, tba_transform, crs, "tba"), chunks=chunks)
    return ref, tba, truth


def _write_tif(path: Path, arr: np.ndarray, transform: Affine, crs: Any) -> None:
    """Write a small float32 tiled, compressed GTiff atomically (temp file, then rename)."""
    profile = {
        "driver": "GTiff", "width": arr.shape[1], "height": arr.shape[0], "count": 1,
        "dtype": "float32", "crs": crs, "transform": transform, "nodata": np.nan,
        "tiled": True, "blockxsize": 256, "blockysize": 256, "compress": "deflate", "predictor": 3,
    }
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=".tif", dir=path.parent)
    os.close(fd)
    try:
        with rasterio.open(tmp, "w", **profile) as dst:
            dst.write(arr.astype(np.float32), 1)
            dst.update_tags(AREA_OR_POINT="Area")
        move_into_place(tmp, path, overwrite=True)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_example_pair(
    folder: str | os.PathLike,
    *,
    overwrite: bool = False,
    shift_x: float = DEFAULT_SHIFT[0],
    shift_y: float = DEFAULT_SHIFT[1],
    shift_z: float = DEFAULT_SHIFT[2],
    mode: str = "resample",
    tilt: tuple[float, float] | None = None,
    noise: float = 0.0,
    holes: int = 0,
    random_state: int = 0,
    name: str = "lidar",
) -> dict:
    """Write ``ref.tif``, ``tba.tif`` and ``truth.json`` of :func:`example_pair` to ``folder``.

    The folder is created if needed. Files are written atomically.

    Parameters
    ----------
    folder
        Output folder.
    overwrite
        Replace existing files; otherwise an existing file raises :class:`~xdem.errors.OutputError`.
    shift_x, shift_y, shift_z, mode, tilt, noise, holes, random_state, name
        As in :func:`example_pair`.

    Returns
    -------
    dict
        ``{"ref": Path, "tba": Path, "truth_path": Path, "truth": dict}``.

    Examples
    --------
    >>> import tempfile
    >>> from xdem.examples import write_example_pair
    >>> out = write_example_pair(tempfile.mkdtemp())
    >>> sorted(p.name for p in (out["ref"], out["tba"], out["truth_path"]))
    ['ref.tif', 'tba.tif', 'truth.json']
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"'{folder}' exists and is not a folder; choose another output folder")
    paths = {"ref": folder / "ref.tif", "tba": folder / "tba.tif", "truth_path": folder / "truth.json"}
    existing = [str(p) for p in paths.values() if p.exists()]
    if existing and not overwrite:
        raise OutputError(f"{', '.join(existing)} already exist(s); pass overwrite=True (--overwrite) or another folder")
    ref_arr, tba_arr, transform, tba_transform, crs, truth = _make_pair_arrays(
        name=name, shift_x=shift_x, shift_y=shift_y, shift_z=shift_z, mode=mode, tilt=tilt,
        noise=noise, holes=holes, random_state=random_state,
    )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create folder '{folder}' ({exc}); choose a writable location") from exc
    _write_tif(paths["ref"], ref_arr, transform, crs)
    _write_tif(paths["tba"], tba_arr, tba_transform, crs)
    write_text_atomic(paths["truth_path"], json.dumps(truth, indent=2) + "\n", overwrite=True)
    return {**paths, "truth": truth}
