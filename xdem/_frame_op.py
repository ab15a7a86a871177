"""The correction a warp applies, as seen in its frame (:class:`FrameOp`): a rigid motion, the
polynomial ramps it removes (:class:`Surface`) or displacement fields, composed step after step
into one resampling (:meth:`FrameOp.then`; :class:`NotMergeable` when they cannot be). Public
through :mod:`xdem.warp`, which applies it (this module is its data model, split from it).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from xdem.errors import CRSError
from xdem.io.grid import same_crs
from xdem.kernels.field import ThinPlateField
from xdem.kernels.rigid import InverseCoefficients, rigid_matrix, split_matrix
from xdem.kernels.surface import polynomial_surface

__all__ = ["Surface", "FrameOp", "NotMergeable", "Matrix3"]


@dataclass(frozen=True)
class Surface:
    """A polynomial ramp subtracted by a correction, evaluated at frame coordinates.

    ``value(x, y) = sum_k c_k u^i_k v^j_k`` with ``u = (x - offset_x - center_x) / scale``
    (likewise ``v``): ``offset`` is the horizontal motion applied after the step that fitted
    the ramp (see :meth:`FrameOp.then`).
    """

    center: tuple[float, float]
    scale: float
    terms: tuple[tuple[int, int], ...]
    coefs: tuple[float, ...]
    offset: tuple[float, float] = (0.0, 0.0)

    def value(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The surface at frame coordinates ``x``, ``y`` (float64)."""
        u = (np.asarray(x, dtype=np.float64) - self.offset[0] - self.center[0]) / self.scale
        v = (np.asarray(y, dtype=np.float64) - self.offset[1] - self.center[1]) / self.scale
        return polynomial_surface(u, v, self.terms, self.coefs)


def _only_fields(op: FrameOp) -> bool:
    return not any(op.shift) and not op.surfaces and op.rotation is None


class NotMergeable(Exception):
    """Two ops cannot be merged into one mapping (a rotation after a ramp): warp them one after
    the other."""


Matrix3 = tuple[tuple[float, float, float], tuple[float, float, float], tuple[float, float, float]]


@dataclass(frozen=True)
class FrameOp:
    """A correction as seen in its frame: the source surface moved rigidly, then ramps removed.

    Each source point ``P`` goes to ``R (P - centre) + centre + shift`` (``rotation`` ``R``;
    ``None`` is the identity, a pure translation); the output at a frame position ``q`` is the
    moved surface's elevation there minus ``sum surfaces(q)``. Without rotation this is
    ``out(q) = src(q - shift_xy) + shift_z - sum surfaces(q)``. ``q`` are frame (reference
    CRS) coordinates; ``frame`` ``""`` means the CRS of whatever DEM the op is applied to. Ops
    compose with :meth:`then`.

    ``fields`` (smooth displacement fields ``d = (d_x, d_y, d_z)`` of frame coordinates, e.g.
    fitted by :class:`~xdem.coreg.BlockwiseCoreg`) are applied in order, each as
    ``out_k(q) = out_{k-1}(q - d_xy(q)) + d_z(q)``; an op with fields has no other part (a field
    does not merge with a translation, rotation or ramp: :class:`NotMergeable`).

    Examples
    --------
    >>> a = FrameOp("EPSG:32615", shift=(1.0, 2.0, 0.5))
    >>> b = FrameOp("EPSG:32615", shift=(0.5, 0.0, -0.5))
    >>> a.then(b).shift
    (1.5, 2.0, 0.0)
    """

    frame: str
    shift: tuple[float, float, float] = (0.0, 0.0, 0.0)
    surfaces: tuple[Surface, ...] = field(default=())
    rotation: Matrix3 | None = None
    centre: tuple[float, float, float] = (0.0, 0.0, 0.0)
    fields: tuple[ThinPlateField, ...] = field(default=())

    @classmethod
    def rigid(cls, frame: str, matrix: np.ndarray, centre: np.ndarray) -> FrameOp:
        """The op of a 4 x 4 rigid matrix (rotation reported about ``centre``)."""
        r, t = split_matrix(matrix, centre)
        rot = None if np.array_equal(r, np.eye(3)) else tuple(tuple(float(v) for v in row) for row in r)
        return cls(frame, shift=(float(t[0]), float(t[1]), float(t[2])), rotation=rot,  # type: ignore[arg-type]
                   centre=(float(centre[0]), float(centre[1]), float(centre[2])))

    @property
    def is_identity(self) -> bool:
        """No motion and no vertical change."""
        return not any(self.shift) and not self.surfaces and self.rotation is None and not self.fields

    @property
    def is_translation(self) -> bool:
        """A pure translation (no rotation, no ramp)."""
        return self.rotation is None and not self.surfaces and not self.fields

    def matrix(self) -> np.ndarray:
        """The 4 x 4 matrix of the rigid part."""
        r = np.eye(3) if self.rotation is None else np.asarray(self.rotation, dtype=np.float64)
        return rigid_matrix(r, np.asarray(self.shift), np.asarray(self.centre))

    def inverse(self) -> InverseCoefficients | None:
        """The per-pixel inverse of the rigid part (:mod:`xdem.kernels.rigid`), ``None`` without rotation."""
        if self.rotation is None:
            return None
        return InverseCoefficients(np.asarray(self.rotation), np.asarray(self.shift), np.asarray(self.centre))

    def then(self, later: FrameOp) -> FrameOp:
        """This op followed by ``later`` (same frame), as one op: one resampling.

        With a translation ``later``:
        ``later(self(src))(q) = moved_src(q - s_l) + z_l - S_s(q - s_l) - S_l(q)`` (the earlier
        ramps move with the surface). A rotation in ``later`` composes with this op's rigid part
        (matrix product) when this op has no ramp; otherwise :class:`NotMergeable`.
        """
        frame = self.frame or later.frame
        if self.frame and later.frame and not same_crs(self.frame, later.frame):
            raise CRSError(f"steps fitted in different CRSs ({self.frame} and {later.frame}) cannot be merged")
        if self.fields or later.fields:
            if self.is_identity:
                return replace(later, frame=frame)
            if later.is_identity:
                return replace(self, frame=frame)
            if _only_fields(self) and _only_fields(later):
                return FrameOp(frame, fields=self.fields + later.fields)
            raise NotMergeable("a displacement field with another correction")
        if later.rotation is None:
            lx, ly, lz = later.shift
            moved = tuple(replace(s, offset=(s.offset[0] + lx, s.offset[1] + ly)) for s in self.surfaces)
            shift = (self.shift[0] + lx, self.shift[1] + ly, self.shift[2] + lz)
            return FrameOp(frame, shift=shift, surfaces=moved + later.surfaces, rotation=self.rotation,
                           centre=self.centre)
        if self.surfaces:
            raise NotMergeable("a rotation after a ramp")
        centre = np.asarray(self.centre if self.rotation is not None else later.centre)
        merged = FrameOp.rigid(frame, later.matrix() @ self.matrix(), centre)
        return replace(merged, surfaces=later.surfaces)

    def vertical(self, x: np.ndarray, y: np.ndarray) -> np.ndarray | float:
        """Vertical part of a translation op at frame coordinates: ``shift_z - sum surfaces``."""
        out: np.ndarray | float = self.shift[2]
        for s in self.surfaces:
            out = out - s.value(x, y)
        return out

    def ramps(self, x: np.ndarray, y: np.ndarray) -> np.ndarray | float:
        """``sum surfaces`` at frame coordinates."""
        out: np.ndarray | float = 0.0
        for s in self.surfaces:
            out = out + s.value(x, y)
        return out
