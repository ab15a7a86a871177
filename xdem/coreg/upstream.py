"""Upstream xdem 0.2.3's matrix functions of ``xdem.coreg``, on our rigid transforms.

Conventions, as upstream's ``xdem/coreg/base.py`` at v0.2.3: a 4 x 4 matrix ``M`` moves the
to-be-aligned points ``P' = M P`` (about the origin, or about ``centroid`` when given:
``P' = M (P - c) + c``); its rotation is ``Rz(alpha3) @ Ry(alpha2) @ Rx(alpha1)`` (extrinsic
Euler angles about x, y then z, in degrees by default), its translation column ``(t1, t2, t3)``.

Examples
--------
>>> import numpy as np
>>> m = matrix_from_translations_rotations(1.0, 2.0, 3.0, 0.0, 0.0, 90.0)
>>> np.round(m[:3, :3] @ [1.0, 0.0, 0.0], 12).tolist()  # x axis to y axis
[0.0, 1.0, 0.0]
>>> [round(v, 9) for v in translations_rotations_from_matrix(m)]
[1.0, 2.0, 3.0, 0.0, 0.0, 90.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

import geopandas as gpd
import numpy as np
import xarray as xr
from affine import Affine

from xdem.coreg._upstream_args import array_dem, array_result
from xdem.coreg.rigid import RigidTransform
from xdem.errors import InputError
from xdem.kernels.rigid import rotation_matrix, rotations_of, split_matrix
from xdem.typing import CRSLike

__all__ = ["matrix_from_translations_rotations", "translations_rotations_from_matrix", "invert_matrix", "apply_matrix"]

#: Upstream's resampling names (scipy's) and ours.
_RESAMPLING = {"nearest": "nearest", "linear": "bilinear", "cubic": "cubic"}


def matrix_from_translations_rotations(t1: float = 0.0, t2: float = 0.0, t3: float = 0.0, alpha1: float = 0.0,
                                       alpha2: float = 0.0, alpha3: float = 0.0,
                                       use_degrees: bool = True) -> np.ndarray:
    """The 4 x 4 rigid matrix of translations ``t1, t2, t3`` (x, y, z) and extrinsic rotations
    ``alpha1, alpha2, alpha3`` about x, y and z (``R = Rz Ry Rx``; degrees, or radians with
    ``use_degrees=False``), as upstream."""
    m = np.eye(4)
    m[:3, :3] = rotation_matrix(alpha1, alpha2, alpha3, degrees=use_degrees)
    m[:3, 3] = [t1, t2, t3]
    return m


def _rigid(matrix: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
    m = np.asarray(matrix, dtype=np.float64)
    try:
        split_matrix(m, np.zeros(3))
    except ValueError as exc:
        raise InputError(str(exc)) from exc
    return m


def translations_rotations_from_matrix(matrix: np.ndarray | Sequence[Sequence[float]],
                                       return_degrees: bool = True) -> tuple[float, float, float, float, float, float]:
    """``(t1, t2, t3, alpha1, alpha2, alpha3)`` of a rigid 4 x 4 matrix: its translation column
    and its extrinsic x, y, z rotations (inverse of :func:`matrix_from_translations_rotations`)."""
    m = _rigid(matrix)
    rx, ry, rz = rotations_of(m[:3, :3], degrees=return_degrees)
    return float(m[0, 3]), float(m[1, 3]), float(m[2, 3]), rx, ry, rz


def invert_matrix(matrix: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
    """The inverse of a rigid 4 x 4 matrix (``R.T``, ``-R.T t``)."""
    m = _rigid(matrix)
    out = np.eye(4)
    out[:3, :3] = m[:3, :3].T
    out[:3, 3] = -m[:3, :3].T @ m[:3, 3]
    return out


@overload
def apply_matrix(elev: np.ndarray, matrix: np.ndarray, invert: bool = False,
                 centroid: tuple[float, float, float] | None = None, resample: bool = True,
                 resampling: str = "linear", transform: Affine | None = None,
                 crs: CRSLike | None = None, z_name: str = "z") -> tuple[np.ndarray, Affine]: ...


@overload
def apply_matrix(elev: xr.DataArray, matrix: np.ndarray, invert: bool = False,
                 centroid: tuple[float, float, float] | None = None, resample: bool = True,
                 resampling: str = "linear", transform: Affine | None = None,
                 crs: CRSLike | None = None, z_name: str = "z") -> xr.DataArray: ...


@overload
def apply_matrix(elev: gpd.GeoDataFrame, matrix: np.ndarray, invert: bool = False,
                 centroid: tuple[float, float, float] | None = None, resample: bool = True,
                 resampling: str = "linear", transform: Affine | None = None,
                 crs: CRSLike | None = None, z_name: str = "z") -> gpd.GeoDataFrame: ...


def apply_matrix(elev: np.ndarray | xr.DataArray | gpd.GeoDataFrame, matrix: np.ndarray, invert: bool = False,
                 centroid: tuple[float, float, float] | None = None, resample: bool = True,
                 resampling: str = "linear", transform: Affine | None = None,
                 crs: CRSLike | None = None,
                 z_name: str = "z") -> xr.DataArray | tuple[np.ndarray, Affine] | gpd.GeoDataFrame:
    """Move a DEM by a rigid 4 x 4 ``matrix`` (upstream's ``xdem.coreg.apply_matrix``).

    Parameters
    ----------
    elev
        A DEM DataArray (the result is lazy, on its grid), or a 2-D array with ``transform``
        (and ``crs``, default a local metric one): the result is upstream's ``(array, transform)``;
        or points (a GeoDataFrame with their elevation in the column ``z_name``), moved exactly.
    matrix
        Moves the points ``P' = M P`` (about ``centroid`` if given: ``P' = M (P - c) + c``).
    invert
        Apply the inverse of ``matrix``.
    centroid
        The point the matrix is about; ``None``: the origin, as upstream.
    resample
        ``False``: a translation keeps the values on a translated grid (no resampling).
    resampling
        Upstream's names: ``"nearest"``, ``"linear"`` (the default), ``"cubic"``.
    transform, crs
        Georeferencing of an array ``elev``.
    z_name
        The elevation column of points (upstream's).

    Examples
    --------
    >>> import numpy as np
    >>> from affine import Affine
    >>> dem = np.arange(16.0).reshape(4, 4)
    >>> out, t = apply_matrix(dem, matrix_from_translations_rotations(t3=5.0), transform=Affine(1, 0, 0, 0, -1, 4))
    >>> float((out - dem).max()), t == Affine(1, 0, 0, 0, -1, 4)
    (5.0, True)
    """
    if resampling not in _RESAMPLING:
        raise InputError(f"resampling must be one of {', '.join(_RESAMPLING)} (upstream's names), got {resampling!r}")
    m = invert_matrix(matrix) if invert else _rigid(matrix)
    if isinstance(elev, gpd.GeoDataFrame):
        return _move_points(elev, m, centroid, z_name)
    fitted = RigidTransform.from_matrix(m, centre=centroid)
    fitted.set_params(resampling=_RESAMPLING[resampling])
    if isinstance(elev, np.ndarray):
        dem = array_dem(elev, transform, crs if crs is not None else "EPSG:3857", "elev")
        return array_result(fitted.apply(dem, resample=resample), elev)
    return fitted.apply(elev, resample=resample)


def _move_points(points: gpd.GeoDataFrame, m: np.ndarray, centroid: tuple[float, float, float] | None,
                 z_name: str) -> gpd.GeoDataFrame:
    """A copy of ``points`` moved by ``P' = M (P - c) + c`` (``c``: the origin if ``None``)."""
    if z_name not in points.columns:
        raise InputError(f"the points have no elevation column {z_name!r}; give it with z_name=<column>")
    p = np.vstack([points.geometry.x.to_numpy(), points.geometry.y.to_numpy(),
                   points[z_name].to_numpy(dtype=np.float64)])
    c = np.zeros((3, 1)) if centroid is None else np.asarray(centroid, dtype=np.float64).reshape(3, 1)
    q = m[:3, :3] @ (p - c) + c + m[:3, 3:4]
    out = points.copy()
    out[points.geometry.name] = gpd.GeoSeries(gpd.points_from_xy(q[0], q[1]), index=points.index, crs=points.crs)
    out[z_name] = q[2]
    return out
