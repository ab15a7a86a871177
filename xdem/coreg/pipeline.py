"""Pipelines of coregistrations: ``VerticalShift() + NuthKaab() + Deramp()``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any, Literal

import numpy as np
import xarray as xr

from xdem.coreg._data import SharedPoints
from xdem.coreg._matrix import as_centre, matrix_about
from xdem.coreg._shift import shift_dem
from xdem.coreg.base import Capabilities, Coreg, FitData, PointFitData, coreg_from_dict, register
from xdem.errors import InputError, NotFittedError
from xdem.kernels.rigid import rotations_of
from xdem.points import read_points
from xdem.typing import JSONDict, Params
from xdem.warp import FrameOp, Grid, warp_dem

__all__ = ["CoregPipeline"]


def _groups(steps: list[Coreg]) -> list[list[Coreg]]:
    """Split steps into runs: consecutive affine steps together, other steps alone."""
    out: list[list[Coreg]] = []
    for step in steps:
        if step.capabilities.affine and out and out[-1][0].capabilities.affine:
            out[-1].append(step)
        else:
            out.append([step])
    return out


def _merged_op(steps: list[Coreg]) -> FrameOp:
    """The consecutive affine (translation or rigid) ``steps`` as one op: their matrices
    multiplied, applied with one resampling."""
    op = FrameOp("")
    for step in steps:
        got = step._frame_op() if step.capabilities.affine else None
        if got is None:
            raise AttributeError(f"{type(step).__name__} is not affine: it has no rigid transform")
        op = op.then(got)
    return op


@register
class CoregPipeline(Coreg):
    """Coregistrations run in sequence, each fitted on the output of the previous ones.

    Step ``k`` is fitted on the to-be-aligned DEM corrected (lazily) by steps ``0..k-1``.
    Consecutive affine steps (translations, rotations) are merged into one rigid transform (their
    matrices multiplied) and resampled once, both
    while fitting and in :meth:`apply`. ``subsample`` and ``random_state``, when given,
    are used by every step that has them while the pipeline fits (otherwise each step uses
    its own); the steps' own hyper-parameters are not changed.

    Parameters
    ----------
    steps
        Coregistrations, in order (``a + b`` builds ``CoregPipeline([a, b])``).
    subsample, random_state
        Used by every step that has these parameters while the pipeline fits, when not ``None``.
    share_sample
        Let a step that only needs ``dh`` at sampled pixels (:class:`~xdem.coreg.Deramp`)
        fit on the subsample of an earlier :class:`~xdem.coreg.NuthKaab` step with the same
        ``subsample`` and ``random_state``, instead of drawing its own: the values are those of
        the lazily corrected DEM at those pixels (evaluated from Nuth & Kääb's windows with
        the interpolation of ``apply``), the pixels those of Nuth & Kääb's draw still valid
        after the shift, and it costs no pass over the data. ``False``: every step draws its
        own subsample (one more pass each).

    Examples
    --------
    >>> import xdem
    >>> pipe = xdem.coreg.VerticalShift() + xdem.coreg.NuthKaab()
    >>> [type(s).__name__ for s in pipe.steps]
    ['VerticalShift', 'NuthKaab']
    """

    def __init__(
        self, steps: list[Coreg], *, subsample: float | int | None = None, random_state: int | None = None,
        share_sample: bool = True,
    ):
        self._steps = list(steps)
        self.subsample = subsample
        self.random_state = random_state
        self.share_sample = share_sample

    @property
    def steps(self) -> list[Coreg]:
        """The coregistrations, in order (the list itself: changing it changes the pipeline)."""
        return self._steps

    @steps.setter
    def steps(self, steps: list[Coreg]) -> None:
        self._steps = list(steps)

    @property
    def pipeline(self) -> list[Coreg]:
        """Upstream xdem's name of :attr:`steps` (the same list)."""
        return self._steps

    @property
    def capabilities(self) -> Capabilities:
        """The steps' capabilities combined (:meth:`~xdem.coreg.Capabilities.combine`): e.g.
        affine only when every step is."""
        return Capabilities.combine([s.capabilities for s in self.steps])

    def get_params(self, deep: bool = True) -> Params:
        """Hyper-parameters; with ``deep``, also each step's as ``step<i>__<name>``."""
        params = super().get_params(deep=False)
        if deep:
            for i, step in enumerate(self.steps):
                params.update({f"step{i}__{k}": v for k, v in step.get_params(deep=True).items()})
        return params

    def set_params(self, **params: object) -> CoregPipeline:
        """Set the pipeline's hyper-parameters, or a step's with ``step<i>__<name>=value``."""
        own = {}
        for key, value in params.items():
            head, sep, rest = key.partition("__")
            if sep and head.startswith("step") and head[4:].isdigit():
                i = int(head[4:])
                if i >= len(self.steps):
                    raise InputError(f"the pipeline has {len(self.steps)} steps; '{key}' names step {i}")
                self.steps[i].set_params(**{rest: value})
            else:
                own[key] = value
        super().set_params(**own)
        return self

    @contextlib.contextmanager
    def _pipeline_settings(self) -> Iterator[None]:
        """Steps fitted with the pipeline's ``subsample``/``random_state`` (when given); their
        own hyper-parameters are restored afterwards: the user's objects keep what they set."""
        saved: list[tuple[Coreg, dict[str, Any]]] = []
        try:
            for step in self.steps:
                names = step._param_names()
                override = {k: v for k, v in (("subsample", self.subsample), ("random_state", self.random_state))
                            if v is not None and k in names}
                if override:
                    saved.append((step, {k: getattr(step, k) for k in override}))
                    vars(step).update(override)
            yield
        finally:
            for step, values in saved:
                vars(step).update(values)

    def learned(self) -> Params:
        return {"steps_": [s.learned() for s in self.steps]} if self.is_fitted else {}

    @property
    def is_fitted(self) -> bool:
        return bool(self.steps) and all(s.is_fitted for s in self.steps)

    def _reset(self) -> None:
        for s in self.steps:
            s._reset()

    def fit_prepared(self, data: FitData) -> CoregPipeline:
        if not self.steps:
            raise InputError("the pipeline has no steps; build one with step1 + step2")
        with self._pipeline_settings():
            return self._fit_steps(data)

    def fit_points_prepared(self, data: PointFitData) -> CoregPipeline:
        """Fit the steps in turn on a DEM and points: each step on the DEM corrected by the
        steps before it (lazily, one resampling: reference points), or on the points moved by
        them (exactly: points to align)."""
        if not self.steps:
            raise InputError("the pipeline has no steps; build one with step1 + step2")
        with self._pipeline_settings():
            self._reset()
            masked = data.dem.copy(data=data.values)
            current = data
            for k, step in enumerate(self.steps):
                step.fit_points_prepared(current)
                if k == len(self.steps) - 1:
                    break  # nothing left to fit: the last step's correction need not be applied
                done = CoregPipeline(self.steps[: k + 1])
                if data.points_are_ref:
                    moved = done.apply(masked, bias_vars=data.bias_vars or None)
                    current = replace(data, dem=moved, values=moved.data)
                else:
                    gdf = done.apply_points(data.points.to_geodataframe(), bias_vars=data.bias_vars)
                    current = replace(data, points=read_points(gdf))
        return self

    def _fit_steps(self, data: FitData) -> CoregPipeline:
        self._reset()
        base = data.tba
        pending: list[Coreg] = []
        shared: SharedPoints | None = None
        since = 0  # the shared points are of the DEM seen by pending[since]
        for k, step in enumerate(self.steps):
            current = self._apply_affine(base, pending) if pending else base
            points = None
            if shared is not None:  # the points follow translations only
                moved = _merged_op(pending[since:])
                last = k + 1 == len(self.steps) or not step.capabilities.affine  # none after it fits on them
                points = shared.moved(moved.shift, last_use=last) if moved.is_translation else None
            collect = shared is None and self.share_sample and k + 1 < len(self.steps)
            if pending and step.capabilities.initial_shift:  # it starts from the pending matrix, unresampled DEM
                step.fit_after(FitData(ref=data.ref, tba=base, inlier=data.inlier, bias_vars=data.bias_vars),
                                _merged_op(pending).matrix())
            else:
                step.fit_prepared(FitData(ref=data.ref, tba=current, inlier=data.inlier, bias_vars=data.bias_vars,
                                          points=points, collect_points=collect))
            made = step.pop_shared_points()
            if step.capabilities.affine:
                if made is not None:
                    shared, since = made, len(pending)  # points of the DEM this step was fitted on
                pending.append(step)
            else:
                base = step._apply(current, data.bias_vars, True)
                pending = []
                shared = None  # tba is now corrected by a step the points cannot follow
        return self

    def _apply_affine(self, dem: xr.DataArray, steps: list[Coreg], resample: bool = True) -> xr.DataArray:
        """Consecutive affine steps merged into one transform, resampled once (with the last
        step's ``resampling``): a translation by the halo fast path, a rotation by the warp."""
        op = _merged_op(steps)
        resampling = steps[-1].resampling or "bilinear"
        if op.is_translation:
            sx, sy, sz = op.shift
            return shift_dem(dem, shift_x=sx, shift_y=sy, shift_z=sz, resampling=resampling, resample=resample)
        if not resample:
            raise InputError("resample=False keeps the data on a moved grid, which only a translation can do; these "
                             "steps rotate: use resample=True")
        grid = Grid.of(dem)
        return warp_dem(dem, grid=grid, op=replace(op, frame=grid.crs), resampling=resampling)

    def _apply(self, dem: xr.DataArray, bias_vars: dict[str, xr.DataArray], resample: bool) -> xr.DataArray:
        if not resample and not self.capabilities.affine:
            raise InputError("resample=False only works for pipelines of affine steps")
        out = dem
        for group in _groups(self.steps):
            if group[0].capabilities.affine:
                out = self._apply_affine(out, group, resample)
            else:
                out = group[0]._apply(out, bias_vars, True)
        return out

    def _merged(self) -> FrameOp:
        if not self.is_fitted:
            raise NotFittedError("this CoregPipeline is not fitted yet; call .fit(ref, tba) first")
        if not self.capabilities.affine:
            raise InputError("the pipeline has non-affine steps; it is not a single rigid transform")
        return _merged_op(self.steps)

    def to_translations(self) -> tuple[float, float, float]:
        """Merged translation of an all-affine pipeline: the motion of the rotation centre
        (:meth:`centroid`) when some step rotates."""
        sx, sy, sz = self._merged().shift
        return float(sx), float(sy), float(sz)

    def to_matrix(self, *, centre: Sequence[float] | Literal["centroid"] | None = None) -> np.ndarray:
        """4 x 4 matrix of an all-affine pipeline: the steps' matrices multiplied (the first
        step's on the right), applied to the to-be-aligned DEM's points; about the CRS origin,
        or about ``centre`` (``"centroid"``: :meth:`centroid`, upstream xdem's frame), as in
        :meth:`~xdem.coreg.RigidCoreg.to_matrix`."""
        op = self._merged()
        if centre is None:
            return op.matrix()
        return matrix_about(op.matrix(), op.centre if isinstance(centre, str) and centre == "centroid" else
                            as_centre(centre))

    def to_rotations(self, degrees: bool = True) -> tuple[float, float, float]:
        """Rotations ``(rx, ry, rz)`` of the merged transform (``R = Rz Ry Rx``; zeros without rotation)."""
        op = self._merged()
        return (0.0, 0.0, 0.0) if op.rotation is None else rotations_of(np.asarray(op.rotation), degrees=degrees)

    def centroid(self) -> tuple[float, float, float]:
        """The centre the merged rotation turns about (that of the first rotating step)."""
        return self._merged().centre

    def __repr__(self) -> str:
        return " + ".join(repr(s) for s in self.steps) if self.steps else "CoregPipeline([])"

    def info(self, as_str: bool = False, *, echo: bool | None = None) -> str | None:  # type: ignore[override]
        """Each step's :meth:`Coreg.info`, in order, under a ``Pipeline step i`` header: printed
        (returning ``None``) as upstream, or returned with ``as_str=True`` (or ``echo=False``)."""
        parts = [f"Pipeline step {i}:\n################\n{s.info(as_str=True)}" for i, s in enumerate(self.steps)]
        text = "\n".join([f"CoregPipeline of {len(self.steps)} steps", *parts])
        if as_str or echo is False:
            return text
        print(text)
        return None

    def to_dict(self) -> JSONDict:
        return {
            "method": "CoregPipeline",
            "params": {"subsample": self.subsample, "random_state": self.random_state,
                       "share_sample": self.share_sample},
            "steps": [s.to_dict() for s in self.steps],
        }

    @classmethod
    def from_dict(cls, doc: JSONDict) -> CoregPipeline:
        steps = [coreg_from_dict(d) for d in doc.get("steps", [])]
        return cls(steps, **doc.get("params", {}))
