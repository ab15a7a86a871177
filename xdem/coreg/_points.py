"""Applying a fitted correction to points (a GeoDataFrame): exact, no resampling.

Each point goes to the correction's frame (the reference CRS), is moved by every step's rigid
transform in turn (``P -> M P``), loses the step's ramps at its new position, and goes back to
the points' CRS. Only steps defined in the frame (translations, rotations, ramps) move points;
a bias correction (:class:`~xdem.coreg.BiasCorr` and its kinds) changes their elevation by its
bias at the variables' values there (grids interpolated at the points, or values per point).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import geopandas as gpd
import numpy as np
from shapely import points as make_points

from xdem.errors import CRSError, InputError
from xdem.kernels.field import compose
from xdem.kernels.rigid import transform_points
from xdem.typing import PointBiasVars
from xdem.warp import FrameOp, _to, crs_key

if TYPE_CHECKING:  # the estimators import this module; it needs only their methods
    from xdem.coreg.base import Coreg
    from xdem.kernels.field import ThinPlateField

__all__ = ["apply_to_points"]


def _elevations(points: gpd.GeoDataFrame, z_name: str) -> np.ndarray:
    geom = points.geometry
    if len(points) and bool(geom.has_z.all()):
        return np.asarray(geom.z, dtype=np.float64)
    if z_name in points.columns:
        return np.asarray(points[z_name], dtype=np.float64)
    raise InputError(f"the points have no elevation: give 3-D geometries or a column '{z_name}' "
                     f"(columns: {', '.join(map(str, points.columns))}), or name it with z_name=")


def apply_to_points(coreg: Coreg, points: gpd.GeoDataFrame, *, z_name: str = "z",
                    bias_vars: PointBiasVars | None = None) -> gpd.GeoDataFrame:
    """A copy of ``points`` moved by the fitted ``coreg`` (see the module notes).

    The elevation comes from 3-D geometries or, for 2-D ones, from the column ``z_name``; the
    copy has both updated where they exist. The input is not modified. A bias correction
    subtracts its bias at the points' variables (``bias_vars``: grids interpolated at the
    points, or a value per point; the along-track coordinate and the elevation come from the
    points themselves).
    """
    if points.crs is None:
        raise CRSError("the points have no CRS; set one with points.set_crs('EPSG:XXXX')")
    if not (points.geom_type == "Point").all():
        raise InputError("only Point geometries can be moved; explode multi-part geometries first")
    ops: list[Any] = []
    for step in coreg.steps:
        op = step._frame_op()
        if op is None and not step.capabilities.moves_points:
            raise InputError(f"{type(step).__name__} corrects elevation values from gridded variables; it cannot "
                             "move points: apply it to a DEM, or leave it out of the pipeline for points")
        ops.append(op if op is not None else step)
    z = _elevations(points, z_name)
    own = crs_key(points.crs)
    out = points.copy()
    x, y = np.asarray(points.geometry.x, dtype=np.float64), np.asarray(points.geometry.y, dtype=np.float64)
    current = own
    for op in ops:
        if not isinstance(op, FrameOp):  # a bias correction: its variables at the points, subtracted
            frame = str(vars(op).get("crs_") or current)
            if frame != current:
                x, y = _reproject(current, frame, x, y)
                current = frame
            z = z - op.bias(op._values_at_points(x, y, z, current, dict(bias_vars or {})))
            continue
        frame = op.frame or own
        if frame != current:
            x, y = _reproject(current, frame, x, y)
            current = frame
        if op.fields:
            x, y, z = _through_fields(op.fields, x, y, z)
            continue
        x, y, z = transform_points(op.matrix(), x, y, z)
        z = z - op.ramps(x, y)
    if current != own:
        x, y = _reproject(current, own, x, y)
    has_z = len(points) > 0 and bool(points.geometry.has_z.all())
    out = out.set_geometry(gpd.GeoSeries(make_points(x, y, z) if has_z else make_points(x, y),
                                         index=points.index, crs=points.crs))
    if z_name in out.columns:
        out[z_name] = z
    return out


def _through_fields(fields: tuple[ThinPlateField, ...], x: np.ndarray, y: np.ndarray,
                    z: np.ndarray) -> tuple[np.ndarray, ...]:
    """Points moved by displacement fields (``out(q) = src(q - d_xy(q)) + d_z(q)``): the output
    position ``q`` whose source is the point, ``q - d_xy(q) = P`` solved by fixed-point iteration
    (the fields are smooth: their gradients are far below 1), and ``z + d_z(q)``."""
    qx, qy = x.copy(), y.copy()
    for _ in range(50):
        px, py, vz = compose(fields, qx, qy)
        ex, ey = x - px, y - py
        qx, qy = qx + ex, qy + ey
        if len(x) == 0 or max(np.abs(ex).max(), np.abs(ey).max()) < 1e-9 * max(1.0, np.abs(x).max()):
            break
    return qx, qy, z + compose(fields, qx, qy)[2]


def _reproject(src: str, dst: str, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return _to(src, dst, x, y)
