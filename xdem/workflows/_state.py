"""What the stages of :func:`xdem.workflows.run_coreg` pass on: :class:`Sides` (the two inputs,
each opened once) and :class:`RunState` (the request, the checked paths, the opened inputs and
what each stage added).

A DEM pair and points go through the same stages; a :class:`Sides` says which side, if any,
is a points file, and the stage functions take their points route from it.

Examples
--------
>>> import xdem
>>> from xdem.checks import InputChecks
>>> dem = xdem.open_dem(xdem.examples.get_path("lidar"))
>>> sides = Sides(ref=dem, tba=dem, checks=InputChecks(ref=None, tba=None, findings=()))
>>> sides.points_side is None and sides.dem is dem
True
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal, cast

import numpy as np
import xarray as xr

from xdem.checks import InputChecks
from xdem.coreg.base import Coreg
from xdem.io.atomic import staged_file
from xdem.io.open import open_dem
from xdem.points import PointSet
from xdem.workflows._summary import SampleFinisher, StatsFinisher
from xdem.workflows.document import CoregDocument, FiltersRecord, SchedulerInfo, StatsRecord, VerdictRecord
from xdem.workflows.request import CheckedPaths, CoregRequest, ProgressLike

__all__ = ["Sides", "RunState", "PointsSide"]

#: Which input is a points file.
PointsSide = Literal["reference", "to_be_aligned"]


@dataclass(frozen=True, kw_only=True)
class Sides:
    """The two inputs of a run, each opened once: DEMs (lazy, :func:`xdem.open_dem`) or, on
    one side, points (:class:`xdem.points.PointSet`).

    Attributes
    ----------
    ref, tba
        The reference and the input to align, opened.
    checks
        The input checks (:func:`xdem.checks.check_inputs`; of the DEM side only with points).
    points_side
        ``None`` for a DEM pair, else the side that is points.
    points_scale
        Factor applied to the points' elevations (``ref_vertical_scale`` / ``tba_vertical_scale``).
    facts
        :func:`xdem.checks.file_facts` of REF and TBA (DEM pairs), read once with their CRSs.
    vertical
        The warning line when REF's and TBA's vertical references differ (DEM pairs).
    read_s
        Seconds spent reading the points.
    """

    ref: xr.DataArray | PointSet
    tba: xr.DataArray | PointSet
    checks: InputChecks
    points_side: PointsSide | None = None
    points_scale: float = 1.0
    facts: tuple[dict[str, object] | None, dict[str, object] | None] = (None, None)
    vertical: str | None = None
    read_s: float = 0.0

    @property
    def dem(self) -> xr.DataArray:
        """The DEM side: REF of a pair, else the side that is not points."""
        dem = self.tba if self.points_side == "reference" else self.ref
        assert isinstance(dem, xr.DataArray)
        return dem

    @property
    def points(self) -> PointSet:
        """The points side (a :class:`ValueError` for a DEM pair)."""
        pts = self.ref if self.points_side == "reference" else self.tba
        if not isinstance(pts, PointSet):
            raise ValueError("a pair of DEMs has no points side")
        return pts


@dataclass(kw_only=True)
class RunState:
    """The request, its checked paths, the opened inputs, and what the stages after them added
    (each stage fills its fields; the next reads them).

    Attributes
    ----------
    timing
        Seconds per stage, in the order of the JSON document's ``timing``.
    filters_record, fit_mask
        What the outlier filters kept (the document's ``filters``) and the mask of the pixels
        the fit could use (DEM pairs, when filtered).
    aligned, written_also, finish_stats, finish_verdict
        The aligned DEM (lazy), the results of the computations fused into the writing pass and
        the functions turning them into the statistics and the verdict's sample.
    before, after, local
        ``dh`` at the points before and after, and the points in the DEM's CRS (points runs).
    stats, verdict, document
        The statistics, the verdict and the JSON document.
    """

    request: CoregRequest
    paths: CheckedPaths
    sinfo: SchedulerInfo
    prog: ProgressLike
    t_start: float
    sides: Sides
    timing: dict[str, float] = field(default_factory=dict)
    filters_record: FiltersRecord | None = None
    fit_mask: xr.DataArray | None = None
    aligned: xr.DataArray | None = None
    written_also: list[list[object]] = field(default_factory=list)
    finish_stats: StatsFinisher | None = None
    finish_verdict: SampleFinisher | None = None
    before: np.ndarray | None = None
    after: np.ndarray | None = None
    local: PointSet | None = None
    stats: StatsRecord | None = None
    verdict: VerdictRecord | None = None
    document: CoregDocument = field(default_factory=lambda: cast(CoregDocument, {}))
    _output: xr.DataArray | None = None

    @property
    def model(self) -> Coreg:
        """The estimator of the request (fitted after the fit stage; :func:`~xdem.workflows.coreg.check_request`
        refused a request without one)."""
        assert self.request.coreg is not None
        return self.request.coreg

    @property
    def chunks(self) -> int | str:
        """Chunk side to open DEMs with (``"auto"`` when the request gives none)."""
        return self.request.chunks if self.request.chunks else "auto"

    @property
    def inlier_mask(self) -> str | None:
        """The request's ``inlier_mask`` as a path (or ``None``)."""
        return None if self.request.inlier_mask is None else os.fspath(self.request.inlier_mask)

    @property
    def exclude_mask(self) -> str | None:
        """The request's ``exclude_mask`` as a path (or ``None``)."""
        return None if self.request.exclude_mask is None else os.fspath(self.request.exclude_mask)

    @property
    def masks(self) -> dict[str, str | None]:
        """``inlier_mask`` and ``exclude_mask`` (the documents' ``inputs`` record them)."""
        return {"inlier_mask": self.inlier_mask, "exclude_mask": self.exclude_mask}

    def output_dem(self) -> xr.DataArray:
        """The written output DEM, opened on first use and then reused (statistics, verdict, report);
        an output to object storage is read from its local staging until it is uploaded."""
        if self._output is None:
            self._output = open_dem(staged_file(self.paths.output) or self.paths.output, chunks=self.chunks)
        return self._output
