"""The rigid part of a fitted coregistration, merged over its steps (:func:`merged_transform`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

import numpy as np

from xdem.coreg._shift import translation_matrix
from xdem.kernels.rigid import rotations_of, split_matrix

if TYPE_CHECKING:  # the estimators import this module's package; it needs only their hooks
    from xdem.coreg.base import Coreg

__all__ = ["steps_of", "merged_transform", "MergedTransform"]


class MergedTransform(TypedDict):
    """What :func:`merged_transform` gives (plain lists and floats: JSON-ready)."""

    #: The 4 x 4 matrix, applied to the to-be-aligned DEM's points in the frame's coordinates.
    matrix: list[list[float]]
    #: ``(rx, ry, rz)`` in degrees, ``R = Rz Ry Rx``.
    rotations_deg: list[float]
    #: What the rotations turn about.
    centre: list[float]
    #: The motion of the centre.
    translation: list[float]
    #: Whether the matrix is the whole correction.
    complete: bool


def steps_of(coreg: Coreg) -> list[Coreg]:
    """The steps of a pipeline, or ``[coreg]`` for a single step (:attr:`Coreg.steps`)."""
    return list(coreg.steps)


def _rotates(step: Coreg) -> bool:
    """Whether a step that may rotate (declared ``rigid``) does."""
    return step.capabilities.rigid and not np.array_equal(np.asarray(step.to_matrix())[:3, :3], np.eye(3))


def merged_transform(coreg: Coreg) -> MergedTransform:
    """The rigid part of the whole correction: ``matrix`` (4 x 4, applied to the to-be-aligned
    DEM's points in the frame's coordinates), ``rotations_deg`` (``R = Rz Ry Rx``), ``centre``
    (what they turn about: the first rotating step's ``centroid_``, else the first rigid step's,
    else the origin), ``translation`` (the motion of that centre) and ``complete`` (whether the
    matrix is the whole correction).

    A single affine step or a pipeline of them: its own ``to_matrix()`` (a pipeline multiplies
    its steps' matrices). Otherwise the affine steps' matrices multiplied in order, with a step
    that is a translation plus something else and says so with ``translation_part()``
    (:class:`~xdem.coreg.NuthKaabDeramp`: its shift and, as z, minus its ramp at the centre of
    the reference grid) counted as that translation; the matrix is then complete only if every
    step is affine and no remainder is left (no non-constant ramp). Translations alone add up.

    Examples
    --------
    >>> import xdem
    >>> t = xdem.coreg.RigidTransform.from_rotations(rz=0.25, translation=(1.0, 2.0, 0.5), centroid=(10.0, 20.0, 0.0))
    >>> m = xdem.coreg.merged_transform(t)
    >>> [round(v, 9) for v in m["rotations_deg"]], m["centre"], m["translation"], m["complete"]
    ([0.0, 0.0, 0.25], [10.0, 20.0, 0.0], [1.0, 2.0, 0.5], True)
    """
    steps = steps_of(coreg)
    rotating = [s for s in steps if s.capabilities.affine and _rotates(s)]
    centred = rotating or [s for s in steps if s.capabilities.affine and "centroid_" in s.learned()]
    centre = np.asarray(centred[0].learned()["centroid_"] if centred else (0.0, 0.0, 0.0), dtype=float)
    if coreg.capabilities.affine:
        matrix, complete = np.asarray(coreg.to_matrix(), dtype=float), True
    else:
        matrix, complete = np.eye(4), True
        for step in steps:
            part = None if step.capabilities.affine else step.translation_part()
            if step.capabilities.affine:
                m = np.asarray(step.to_matrix(), dtype=float)
            elif part is not None:
                shift, exact = part
                m = translation_matrix(*np.asarray(shift, dtype=float))
                complete = complete and exact
            else:
                complete = False
                continue
            matrix = m @ matrix
    rotation, translation = split_matrix(matrix, centre)
    rotations = [0.0, 0.0, 0.0] if np.array_equal(rotation, np.eye(3)) else [float(a) for a in rotations_of(rotation)]
    return {"matrix": matrix.tolist(), "rotations_deg": rotations, "centre": [float(v) for v in centre],
            "translation": [float(v) for v in translation], "complete": complete}
