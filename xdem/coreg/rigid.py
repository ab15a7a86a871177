"""Rigid coregistrations: the common base :class:`RigidCoreg` of :class:`~xdem.coreg.ICP`,
:class:`~xdem.coreg.LZD` and :class:`~xdem.coreg.DhMinimize`, and :class:`RigidTransform`,
a rigid transform given rather than fitted.

A rigid transform moves each point ``P = (x, y, z)`` of the to-be-aligned DEM to
``P' = R (P - c) + c + t`` in the reference's CRS (the frame, ``crs_``): ``R`` a rotation about
the centre ``c`` (``centroid_``, the middle of the fitted points, chosen for conditioning) and
``t`` the motion of that centre. See :mod:`xdem.kernels.rigid` for the rotation convention.

Learned attributes (every rigid method)
---------------------------------------
matrix_ : list of 4 lists of 4 floats
    The 4 x 4 homogeneous matrix in the frame's coordinates (:meth:`RigidCoreg.to_matrix`).
centroid_ : list of 3 floats
    The rotation centre ``c``.
rotation_x_, rotation_y_, rotation_z_ : float
    Rotation angles in degrees (``R = Rz Ry Rx``).
shift_x_, shift_y_, shift_z_ : float
    Translation ``t`` of the centre, in frame units.

Applying resamples once: a pure translation by the halo fast path
(:func:`xdem.coreg.affine.shift_dem`), anything else by the mapping-driven warp
(:func:`xdem.warp.warp_dem`), which solves each output pixel's source position when rotations
about x or y make it depend on elevation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import numpy as np
import xarray as xr

from xdem.coreg._matrix import as_centre, matrix_about, matrix_from_about
from xdem.coreg._shift import shift_dem
from xdem.coreg.affine import AffineCoreg
from xdem.coreg.base import FitData, register
from xdem.errors import InputError
from xdem.kernels.rigid import rigid_matrix, rotation_matrix, rotations_of, split_matrix
from xdem.typing import CRSLike
from xdem.warp import FrameOp, Grid, crs_key, warp_dem

__all__ = ["RigidCoreg", "RigidTransform"]

class RigidCoreg(AffineCoreg):
    """Base class of the rigid (rotation + translation) coregistrations.

    Subclasses implement ``_fit(data)`` and end it with :meth:`_set_transform`.
    """

    #: What it can do (:class:`~xdem.coreg.Capabilities`).
    tags = AffineCoreg.tags.but(rigid=True)
    resampling: str = "bilinear"

    # --- the transform --------------------------------------------------------------------
    def _set_transform(self, rotation: np.ndarray, translation: np.ndarray | Sequence[float],
                       centroid: np.ndarray | Sequence[float]) -> None:
        """Set every learned attribute of the transform ``P -> R (P - c) + c + t``."""
        r = np.asarray(rotation, dtype=np.float64)
        t = np.asarray(translation, dtype=np.float64)
        c = np.asarray(centroid, dtype=np.float64)
        rx, ry, rz = rotations_of(r) if not np.array_equal(r, np.eye(3)) else (0.0, 0.0, 0.0)
        self.matrix_ = rigid_matrix(r, t, c).tolist()
        self.centroid_ = [float(v) for v in c]
        self.rotation_x_, self.rotation_y_, self.rotation_z_ = rx, ry, rz
        self.shift_x_, self.shift_y_, self.shift_z_ = (float(v) for v in t)

    def to_matrix(self, *, centre: Sequence[float] | Literal["centroid"] | None = None) -> np.ndarray:
        """The 4 x 4 homogeneous matrix applied to the to-be-aligned DEM's points ``(x, y, z, 1)``,
        in the coordinates of the frame (``crs_``).

        Parameters
        ----------
        centre
            ``None`` (default): about the CRS origin, ``P' = M P`` (xdem's convention, the
            ``matrix`` of the JSON documents). ``"centroid"``: about ``centroid_``, upstream
            xdem's ``to_matrix()`` (with its ``centroid()``): ``P' = M_c (P - c) + c``, whose
            translation column is ``t``, the motion of the centre. Three numbers: about that
            point. Only the translation column differs (:mod:`xdem.coreg._matrix`).

        Examples
        --------
        >>> import numpy as np, xdem
        >>> t = xdem.coreg.RigidTransform.from_rotations(rz=1e-6, degrees=False, translation=(1.0, 2.0, 0.0),
        ...                                               centroid=(4.0e5, 8.7e6, 0.0))
        >>> t.to_matrix()[:3, 3].round(3).tolist()  # about the origin: the rotation moves it by metres
        [9.7, 1.6, 0.0]
        >>> t.to_matrix(centre="centroid")[:3, 3].round(3).tolist()  # about the centroid: t
        [1.0, 2.0, 0.0]
        """
        self._check_fitted()
        m = np.asarray(self.matrix_, dtype=np.float64)
        if centre is None:
            return m
        return matrix_about(m, self.centroid_ if isinstance(centre, str) and centre == "centroid" else
                            as_centre(centre))

    def to_rotations(self, degrees: bool = True) -> tuple[float, float, float]:
        """``(rx, ry, rz)``: rotations about the x, y and z axes (``R = Rz Ry Rx``)."""
        self._check_fitted()
        rot = (float(self.rotation_x_), float(self.rotation_y_), float(self.rotation_z_))
        return rot if degrees else tuple(float(np.radians(a)) for a in rot)  # type: ignore[return-value]

    def rotation(self) -> np.ndarray:
        """The 3 x 3 rotation ``R``."""
        rot: np.ndarray = self.to_matrix()[:3, :3].copy()
        return rot

    def has_rotation(self) -> bool:
        """Whether the transform rotates (otherwise it is a pure translation)."""
        return not np.array_equal(self.rotation(), np.eye(3))

    # --- building a fitted transform ------------------------------------------------------
    @classmethod
    def _given(cls) -> RigidCoreg:
        return (RigidTransform if cls is RigidCoreg else cls)()

    @classmethod
    def from_matrix(cls, matrix: np.ndarray | Sequence[Sequence[float]], *,
                    centroid: Sequence[float] | None = None, centre: Sequence[float] | None = None,
                    crs: CRSLike | None = None) -> RigidCoreg:
        """A fitted, applicable transform from a 4 x 4 rigid matrix.

        Parameters
        ----------
        matrix
            Applied to the to-be-aligned DEM's points ``(x, y, z, 1)`` in ``crs``'s coordinates:
            about the CRS origin (``P' = M P``), or about ``centre`` if given.
        centroid
            The centre the rotations and translations are reported about (no effect on the
            transform itself); default ``centre``, else the origin.
        centre
            The point the matrix is about, ``P' = M (P - c) + c``: upstream xdem's
            ``to_matrix()`` is about its ``centroid()``, so ``from_matrix(m, centre=c)`` with
            those two is its transform. ``None``: about the origin (xdem's ``to_matrix()``).
        crs
            The CRS the matrix is defined in (the frame); ``None``: the CRS of whatever DEM
            it is applied to.

        Examples
        --------
        >>> import numpy as np, xdem
        >>> t = xdem.coreg.RigidTransform.from_matrix(np.eye(4), crs="EPSG:32633")
        >>> t.to_rotations(), t.to_translations()
        ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0))
        """
        m = np.asarray(matrix, dtype=np.float64)
        about = np.zeros(3)
        if centre is not None:
            about = as_centre(centre, "from_matrix's centre")
            m = matrix_from_about(m, about) if m.shape == (4, 4) else m
        c = about if centroid is None else as_centre(centroid, "from_matrix's centroid")
        try:
            r, t = split_matrix(m, c)
        except ValueError as exc:
            raise InputError(str(exc)) from exc
        out = cls._given()
        out._set_transform(r, t, c)
        if crs is not None:
            out.crs_ = crs_key(crs)
        return out

    @classmethod
    def from_rotations(cls, rx: float = 0.0, ry: float = 0.0, rz: float = 0.0, *, degrees: bool = True,
                       translation: Sequence[float] = (0.0, 0.0, 0.0),
                       centroid: Sequence[float] = (0.0, 0.0, 0.0), crs: CRSLike | None = None,
                       x_rot: float | None = None, y_rot: float | None = None, z_rot: float | None = None,
                       use_degrees: bool | None = None) -> RigidCoreg:
        """A fitted, applicable transform: rotations ``rx, ry, rz`` about ``centroid`` (``R = Rz Ry
        Rx``), then ``translation`` (the motion of the centroid). Upstream's keywords ``x_rot``,
        ``y_rot``, ``z_rot``, ``use_degrees`` are the same (about the origin by default, as upstream).

        Examples
        --------
        >>> import xdem
        >>> t = xdem.coreg.RigidTransform.from_rotations(rz=0.3, centroid=(500.0, 500.0, 100.0), crs="EPSG:32633")
        >>> [round(a, 12) for a in t.to_rotations()]
        [0.0, 0.0, 0.3]
        >>> xdem.coreg.AffineCoreg.from_rotations(z_rot=0.3).to_rotations() == t.to_rotations()
        True
        """
        rx, ry, rz = (float(_alias(a, b, n)) for a, b, n in ((rx, x_rot, "rx/x_rot"), (ry, y_rot, "ry/y_rot"),
                                                              (rz, z_rot, "rz/z_rot")))
        deg = degrees if use_degrees is None else bool(use_degrees)
        return cls.from_matrix(
            rigid_matrix(rotation_matrix(rx, ry, rz, degrees=deg), np.asarray(translation, dtype=np.float64),
                         np.asarray(centroid, dtype=np.float64)),
            centroid=centroid, crs=crs,
        )

    @classmethod
    def from_translations(cls, x: float = 0.0, y: float = 0.0, z: float = 0.0, *, crs: CRSLike | None = None,
                          x_off: float | None = None, y_off: float | None = None,
                          z_off: float | None = None) -> RigidCoreg:
        """A fitted, applicable pure translation by ``(x, y, z)`` (upstream's ``x_off``, ``y_off``,
        ``z_off`` are the same)."""
        xs, ys, zs = (_alias(a, b, n) for a, b, n in ((x, x_off, "x/x_off"), (y, y_off, "y/y_off"), (z, z_off, "z/z_off")))
        return cls.from_rotations(translation=(xs, ys, zs), crs=crs)

    # --- apply ------------------------------------------------------------------------------
    def _frame_op(self) -> FrameOp:
        frame = vars(self).get("crs_")
        return FrameOp.rigid(str(frame) if frame is not None else "", self.to_matrix(), np.asarray(self.centroid_))

    def _apply(self, dem: xr.DataArray, bias_vars: dict[str, xr.DataArray], resample: bool) -> xr.DataArray:
        sx, sy, sz = self.to_translations()
        if not self.has_rotation():
            return shift_dem(dem, shift_x=sx, shift_y=sy, shift_z=sz, resampling=self.resampling, resample=resample)
        if not resample:
            raise InputError("resample=False keeps the data on a moved grid, which only a translation can do; this "
                             f"{type(self).__name__} rotates (rotations {self.to_rotations()} degrees): use resample=True")
        grid = Grid.of(dem)
        op = FrameOp.rigid(grid.crs, self.to_matrix(), np.asarray(self.centroid_))
        return warp_dem(dem, grid=grid, op=op, resampling=self.resampling)

    def _restore(self, learned: dict[str, Any]) -> None:
        super()._restore(learned)
        if "matrix_" not in learned:
            return
        try:
            r, t = split_matrix(np.asarray(learned["matrix_"], dtype=np.float64),
                                np.asarray(learned.get("centroid_", (0.0, 0.0, 0.0)), dtype=np.float64))
        except ValueError as exc:
            raise InputError(f"{type(self).__name__}: {exc}") from exc
        stated = rotation_matrix(*(float(learned.get(f"rotation_{a}_", 0.0)) for a in "xyz"))
        shift = np.array([float(learned.get(f"shift_{a}_", 0.0)) for a in "xyz"])
        if not (np.allclose(stated, r, atol=1e-9) and np.allclose(shift, t, atol=1e-6 * max(1.0, np.abs(t).max()))):
            raise InputError(f"{type(self).__name__}: the JSON's matrix_ disagrees with its rotation_*_ and shift_*_ "
                             "values; fix or remove one of them (the matrix is applied to the to-be-aligned DEM)")


def _alias(ours: float, upstream: float | None, names: str) -> float:
    """Our positional value or upstream's keyword (both given and different: an error)."""
    if upstream is None:
        return float(ours)
    if ours not in (0.0, upstream):
        raise InputError(f"give {names.replace('/', ' or ')}, not both")
    return float(upstream)


@register
class RigidTransform(RigidCoreg):
    """A rigid transform that is given, not fitted: build it with :meth:`RigidCoreg.from_matrix`,
    :meth:`~RigidCoreg.from_rotations` or :meth:`~RigidCoreg.from_translations`, apply it like
    any fitted coregistration, combine it in pipelines, save it as JSON.

    Parameters
    ----------
    resampling
        ``"bilinear"`` or ``"cubic"``: the interpolation used to apply it.

    Examples
    --------
    >>> import xdem
    >>> dem = xdem.open_dem(xdem.examples.get_path("lidar"))
    >>> t = RigidTransform.from_rotations(rz=0.1, centroid=(float(dem.x.mean()), float(dem.y.mean()), 0.0))
    >>> t.apply(dem).shape == dem.shape
    True
    """

    def __init__(self, *, resampling: str = "bilinear") -> None:
        self.resampling = resampling

    def _fit(self, data: FitData) -> None:
        raise InputError("a RigidTransform is given, not fitted: build it with RigidTransform.from_matrix(...), "
                         "from_rotations(...) or from_translations(...), or fit ICP, LZD or DhMinimize")

    #: Not an estimator: the conformance checker's fit checks do not apply.
    _given_transform: ClassVar[bool] = True
