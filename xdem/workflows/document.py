"""The JSON document of :func:`xdem.workflows.run_coreg` (``xdem coreg --json``, ``--json-out``,
:attr:`xdem.workflows.CoregResult.document`), typed: :class:`CoregDocument` and its parts.

These are :class:`typing.TypedDict` s: at run time plain dicts (the JSON written is the dict as
built, keys in the order the stages add them), for the type checker the keys and their types.
A key of a ``total=False`` part may be missing: e.g. ``verdict`` and ``chunks`` are keys of a
DEM pair's document, ``points`` and ``output_kind`` of a points run's.

Examples
--------
>>> doc: FrameSummary = {"crs": "EPSG:32633", "units": "metre", "why": "the reference's CRS"}
>>> sorted(CoregDocument.__required_keys__)[:4]
['filters', 'frame', 'input_checks', 'inputs']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias, TypedDict, cast

__all__ = ["StepSummary", "RigidPart", "FrameSummary", "DhStats", "StatsRecord", "CheckRecord", "VerdictRecord",
           "FiltersRecord", "InputChecksRecord", "InputsRecord", "Timing", "PointsSummary", "PointsRecord",
           "SchedulerInfo", "CoregDocument", "stats_record", "verdict_record", "input_checks_record"]

#: One fitted step (:func:`xdem.workflows._summary.steps_summary`): ``method``, the learned
#: values (names of the method's own), ``history_columns`` and ``params``.
StepSummary: TypeAlias = "dict[str, object]"


class RigidPart(TypedDict):
    """The merged rigid transform of a run (:func:`xdem.workflows._summary.rigid_document`)."""

    matrix: list[list[float]]
    matrix_about: str
    matrix_about_centre: list[list[float]]
    matrix_is_complete: bool
    rotations_deg: list[float]
    rotation_centre: list[float]
    translation: list[float]
    translation_px: list[float] | None


class FrameSummary(TypedDict, total=False):
    """The CRS the correction was fitted in (``crs``; a DEM pair's also ``units`` and ``why``)."""

    crs: str | None
    units: str | None
    why: str


class DhStats(TypedDict, total=False):
    """Statistics of ``dh`` (metres): exact ones have ``median``, ``nmad``, ``count``, ``min``,
    ``max``; sampled ones also ``sampled``, ``mean``, ``std``, ``rmse``, ``le90``; at points
    ``count``, ``median``, ``nmad``, ``mean``, ``rmse``."""

    median: float | None
    nmad: float | None
    count: int
    sampled: int
    mean: float | None
    std: float | None
    rmse: float | None
    min: float | None
    max: float | None
    le90: float | None


class StatsRecord(TypedDict, total=False):
    """The document's ``stats``: how they were computed, ``before`` and ``after`` (points runs:
    also ``after_without_outliers``)."""

    method: str
    before: DhStats | None
    after: DhStats | None
    after_without_outliers: DhStats | None


class CheckRecord(TypedDict, total=False):
    """One check of the verdict (:class:`xdem.verdict_checks.Check`)."""

    name: str
    label: str
    value: float
    threshold: float
    unit: str
    passed: bool | None
    hint: str | None
    passes_if: str


class VerdictRecord(TypedDict, total=False):
    """The document's ``verdict`` (:func:`xdem.verdict.verdict_of_run`)."""

    status: str
    ok: bool
    failed: list[str]
    hint: str | None
    checks: list[CheckRecord]
    residual_amplitude_m: float | None
    residual_direction_deg: float | None
    residual_dh_m: float | None
    nmad_before: float | None
    nmad_after: float | None
    nmad_ratio: float | None
    median_before: float | None
    median_after: float | None
    n_points: int
    thresholds: dict[str, float]
    nmad_from: str
    subsample: int
    n_stable: int | None
    n_overlap: int | None
    passes: int


class FiltersRecord(TypedDict, total=False):
    """The document's ``filters`` (:func:`xdem.workflows.filters.filter_mask`,
    :func:`~xdem.workflows.filters.filter_points`): the limits and what they kept."""

    min_slope_deg: float | None
    max_slope_deg: float | None
    nmad_filter: float | None
    applied_to: str
    slope_at: str
    stable_pixels: int
    points: int
    stable_points: int
    kept_by_slope: int
    sampled: int
    dh_median: float | None
    dh_nmad: float | None
    dh_range: list[float] | None
    kept_fraction_sampled: float | None
    kept_points: int
    kept_fraction: float


class InputChecksRecord(TypedDict, total=False):
    """The document's ``input_checks`` (:meth:`xdem.checks.InputChecks.to_dict`; points runs:
    also ``points_vertical_scale``)."""

    reference: dict[str, object] | None
    to_be_aligned: dict[str, object] | None
    findings: list[dict[str, object]]
    notes: list[str]
    warnings: list[str]
    points_vertical_scale: float


class InputsRecord(TypedDict, total=False):
    """The document's ``inputs``: absolute paths, shapes (a DEM pair's ``reference_shape`` and
    ``to_be_aligned_shape``, a points run's ``dem_shape``), CRS, method and options."""

    reference: str
    to_be_aligned: str
    inlier_mask: str | None
    exclude_mask: str | None
    reference_shape: list[int]
    to_be_aligned_shape: list[int]
    dem_shape: list[int]
    crs: str | None
    reference_facts: dict[str, object] | None
    to_be_aligned_facts: dict[str, object] | None
    vertical_warning: str | None
    method: str | None
    options: dict[str, object]


class Timing(TypedDict, total=False):
    """Seconds per stage (the document's ``timing``; points runs: ``read_s``, no ``stats_s``)."""

    read_s: float
    fit_s: float
    write_s: float
    stats_s: float
    verdict_s: float
    report_s: float
    total_s: float


class PointsSummary(TypedDict):
    """A points file (:func:`xdem.workflows.points.points_summary`): bounds in its CRS."""

    file: str | None
    count: int
    crs: str | None
    bounds: list[float] | None
    z_min: float | None
    z_max: float | None


class PointsRecord(PointsSummary):
    """A points run's ``points``: :class:`PointsSummary`, the side, the column and the fit's counts."""

    side: str | None
    z_column: str | None
    n_outside: object
    n_outliers: object


class SchedulerInfo(TypedDict):
    """The dask scheduler a run computes on (:func:`xdem.workflows.current_scheduler`)."""

    scheduler: str
    workers: int | None
    address: str | None
    client: object


class _DocumentKeys(RigidPart):
    """The keys of every run's document."""

    steps: list[StepSummary]
    stats: StatsRecord | None
    filters: FiltersRecord | None
    input_checks: InputChecksRecord
    frame: FrameSummary
    output: str
    inputs: InputsRecord
    timing: Timing
    peak_rss_mb: float | None
    scheduler: str
    workers: int | None


class CoregDocument(_DocumentKeys, total=False):
    """The JSON document of a run (``xdem coreg --json``; see :doc:`cli`, "JSON document").

    Every run's: ``steps`` (:data:`StepSummary`), the merged rigid transform (:class:`RigidPart`:
    ``matrix``, ``matrix_about``, ``matrix_about_centre``, ``matrix_is_complete``,
    ``rotations_deg``, ``rotation_centre``, ``translation``, ``translation_px``), ``frame``,
    ``stats``, ``filters``, ``input_checks``, ``output``, ``inputs``, ``timing``,
    ``peak_rss_mb``, ``scheduler``, ``workers``. A DEM pair's also: ``output_grid``,
    ``verdict``, ``dh_output``, ``stable_mask_output``, ``report``, ``chunks``,
    ``peak_rss_children_mb``. A points run's: ``points``, ``output_kind`` (and ``report`` when
    written).
    """

    output_grid: str
    verdict: VerdictRecord | None
    dh_output: str | None
    stable_mask_output: str | None
    report: str | None
    chunks: list[int]
    peak_rss_children_mb: float | None
    points: PointsRecord
    output_kind: str


def stats_record(method: str, parts: Mapping[str, object]) -> StatsRecord:
    """``{"method": method, **parts}``: the ``stats`` of a run from the statistics by name
    (``before``, ``after``) of :func:`xdem.stats.dh_stats_finish`.

    Examples
    --------
    >>> stats_record("exact", {"before": {"count": 3}})
    {'method': 'exact', 'before': {'count': 3}}
    """
    return cast(StatsRecord, {"method": method, **parts})


def verdict_record(verdict: Mapping[str, object] | None) -> VerdictRecord | None:
    """The verdict of :func:`xdem.verdict.verdict_of_run` as the document's ``verdict`` (the same dict).

    Examples
    --------
    >>> verdict_record(None) is None
    True
    """
    return cast("VerdictRecord | None", verdict)


def input_checks_record(checks: Mapping[str, object]) -> InputChecksRecord:
    """:meth:`xdem.checks.InputChecks.to_dict` as the document's ``input_checks`` (the same dict).

    Examples
    --------
    >>> input_checks_record({"notes": []})
    {'notes': []}
    """
    return cast(InputChecksRecord, checks)
