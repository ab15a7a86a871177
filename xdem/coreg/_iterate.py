"""The one iteration loop of the shift estimators (:class:`~xdem.coreg.NuthKaab`,
:class:`~xdem.coreg.NuthKaabDeramp`) and its one divergence policy.

Each estimator gives a *step* function: at the current shift it returns the correction to
add (from its own model: aspect bins, or a joint least-squares with a ramp), or ``None``
when the terrain cannot constrain a horizontal shift. :func:`iterate_shift` runs it until a
step is below ``tolerance`` pixels, and decides what a diverging or unusable run is:
- diverging (moved more than a quarter of the DEM from its start): a
  :class:`~xdem.errors.ConvergenceError` suggesting ``initial_shift``, or with
  ``on_divergence="warn"`` a warning and the shift reset to its start;
- stopped by ``max_iterations``: a warning when the result is usable, otherwise (still
  moving, or wandering without reducing the spread of dh) the same as diverging.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from xdem.coreg.fitfuncs import nmad
from xdem.errors import ConvergenceError, ConvergenceWarning, InputError

__all__ = ["Iterations", "iterate_shift", "check_divergence_params", "initial_shift_of", "divergence_message", "nmad_ratio",
           "not_converged", "UNUSABLE_STEP_PX", "UNUSABLE_MOVE_PX", "UNUSABLE_NMAD_RATIO", "DIVERGENCE_FRACTION"]

#: A run diverges when the shift moves more than this fraction of the DEM's larger side from its start.
DIVERGENCE_FRACTION = 0.25
#: One INFO record per iteration of the iterative methods (``xdem coreg --verbose`` prints them;
#: silent otherwise, as every logger without a handler below WARNING).
ITERATION_LOG = logging.getLogger("xdem.iterations")


@dataclass(frozen=True)
class Iterations:
    """Outcome of :func:`iterate_shift`."""

    shift: tuple[float, float]
    history: list[list[float]]
    n_iterations: int
    converged: bool
    constrained: bool


def iterate_shift(
    step: Callable[[float, float], tuple[float, float] | None],
    *,
    what: str,
    start: tuple[float, float],
    resolution: tuple[float, float],
    shape: tuple[int, int],
    max_iterations: int,
    tolerance: float,
    on_divergence: str,
    spread_ratio: Callable[[tuple[float, float], tuple[float, float]], float],
) -> Iterations:
    """Iterate ``shift += step(shift)`` from ``start`` (see the module notes).

    Parameters
    ----------
    step
        The estimator's model: correction ``(d_x, d_y)`` to add at a shift (CRS units), or
        ``None`` when the terrain does not constrain a horizontal shift.
    what
        Name used in messages.
    start
        First shift (``initial_shift`` or ``(0, 0)``).
    resolution
        ``(dx, dy)`` pixel sizes: steps and distances are measured in pixels.
    shape
        Shape of the reference grid (the divergence limit is a fraction of it).
    max_iterations, tolerance, on_divergence
        The estimator's hyper-parameters (tolerance in pixels).
    spread_ratio
        NMAD of dh at a shift over that at another (``(start, end) -> ratio``), used only
        when a run stops unconverged.

    Returns
    -------
    Iterations
        The final shift (``start`` when reset), the shift after each iteration, how many
        ran, and whether it converged and was constrained.

    Examples
    --------
    >>> run = iterate_shift(lambda sx, sy: ((3.0 - sx) / 2, 0.0), what="test", start=(0.0, 0.0),
    ...                     resolution=(1.0, 1.0), shape=(100, 100), max_iterations=30, tolerance=1e-3,
    ...                     on_divergence="raise", spread_ratio=lambda a, b: 0.0)
    >>> round(run.shift[0], 2), run.converged
    (3.0, True)
    """
    dx, dy = resolution
    limit = DIVERGENCE_FRACTION * max(shape)
    sx, sy = start
    history: list[list[float]] = []
    last = float("nan")
    iterations = 0
    for iterations in range(1, int(max_iterations) + 1):
        inc = step(sx, sy)
        if inc is None:
            return Iterations(start, history, iterations, converged=False, constrained=False)
        sx, sy = sx + inc[0], sy + inc[1]
        history.append([sx, sy])
        last = math.hypot(inc[0] / dx, inc[1] / dy)
        ITERATION_LOG.info("%s: iteration %d: shift_x=%+.4f, shift_y=%+.4f (step %.4f pixel)", what, iterations, sx, sy,
                           last)
        if math.hypot((sx - start[0]) / dx, (sy - start[1]) / dy) > limit:
            message = divergence_message(what, sx, sy, iterations, start)
            if on_divergence == "raise":
                raise ConvergenceError(message)
            warnings.warn(f"{message}; on_divergence='warn': the horizontal shift is reset to its start",
                          ConvergenceWarning, stacklevel=5)
            return Iterations(start, history, iterations, converged=False, constrained=True)
        if last < float(tolerance):
            return Iterations((sx, sy), history, iterations, converged=True, constrained=True)
    reset = not_converged(what, step_px=last, moved_px=math.hypot((sx - start[0]) / dx, (sy - start[1]) / dy),
                          nmad_ratio=spread_ratio(start, (sx, sy)), sx=sx, sy=sy, iterations=iterations,
                          tolerance=float(tolerance), start=start, on_divergence=on_divergence)
    return Iterations(start if reset else (sx, sy), history, iterations, converged=False, constrained=True)


def initial_shift_of(initial_shift: object) -> tuple[float, float, float]:
    """``initial_shift`` as ``(dx, dy, dz)``: ``None`` is no shift, ``(dx, dy)`` has ``dz = 0``.

    Every affine method takes ``initial_shift=(dx, dy[, dz])``, the first estimate of the
    translation to apply (CRS units, same sign convention as the result). Methods that find the
    vertical shift from a statistic of dh at the end (NuthKaab, NuthKaabDeramp, DhMinimize) only
    start from ``(dx, dy)``; those that iterate all six parameters (ICP, LZD) start from all three.

    Examples
    --------
    >>> initial_shift_of((1, 2)), initial_shift_of(None)
    ((1.0, 2.0, 0.0), (0.0, 0.0, 0.0))
    """
    if initial_shift is None:
        return 0.0, 0.0, 0.0
    try:
        if not isinstance(initial_shift, Iterable):
            raise TypeError
        values = [float(v) for v in initial_shift]
        if len(values) not in (2, 3):
            raise ValueError
    except (TypeError, ValueError):
        raise InputError("initial_shift must be two or three numbers (shift_x, shift_y[, shift_z]) in CRS units, "
                         f"got {initial_shift!r}") from None
    if not np.all(np.isfinite(values)):
        raise InputError(f"initial_shift must be finite, got {initial_shift!r}")
    return values[0], values[1], values[2] if len(values) == 3 else 0.0


def check_divergence_params(*, initial_shift: object, on_divergence: object) -> tuple[float, float]:
    """Validate the ``initial_shift`` and ``on_divergence`` hyper-parameters of the shift
    estimators; returns the starting horizontal shift (``(0, 0)`` when ``initial_shift`` is
    ``None``; see :func:`initial_shift_of`)."""
    if on_divergence not in ("raise", "warn"):
        raise InputError(f"on_divergence must be 'raise' or 'warn', got {on_divergence!r}")
    sx, sy, _ = initial_shift_of(initial_shift)
    return sx, sy


def divergence_message(what: str, sx: float, sy: float, iterations: int, start: tuple[float, float]) -> str:
    """One-line message for a diverged shift estimate, with the ways out."""
    began = "" if start == (0.0, 0.0) else f" from initial_shift ({start[0]:g}, {start[1]:g})"
    return (
        f"{what} diverged: the shift reached ({sx:.1f}, {sy:.1f}) after {iterations} iterations{began}, more than a "
        "quarter of the DEM's size; if the DEMs really are that far apart, start from an estimate with "
        "initial_shift=(dx, dy) (CLI: --initial-shift DX DY, the shift to apply, in CRS units); otherwise check the "
        "inlier mask and the terrain, or accept a partial result (horizontal shift reset) with on_divergence='warn' "
        "(CLI: --allow-divergence)"
    )


#: A fit stopped by ``max_iterations`` is unusable (treated like a divergence: an error, or a
#: warning with ``on_divergence="warn"``) when, after at least 3 iterations, its last step is
#: larger than this (pixels): it is still moving...
UNUSABLE_STEP_PX = 0.5
#: ... or when it moved more than this (pixels) without bringing the NMAD of dh below
#: :data:`UNUSABLE_NMAD_RATIO` times its value at the start: it wandered (DEMs shifted by more
#: than the fit can follow, e.g. more than half the DEM's width).
UNUSABLE_MOVE_PX = 2.0
UNUSABLE_NMAD_RATIO = 0.8


def nmad_ratio(evaluate: Callable[[float, float], np.ndarray], ref: np.ndarray, start: tuple[float, float],
               end: tuple[float, float]) -> float:
    """NMAD of ``evaluate(*end) - ref`` over that of ``evaluate(*start) - ref`` (the sample's dh
    at two shifts; in memory). NaN when either has no finite value."""
    def spread(shift: tuple[float, float]) -> float:
        dh = evaluate(*shift) - ref
        return nmad(dh[np.isfinite(dh)])

    first = spread(start)
    return spread(end) / first if first > 0 else float("nan")


def not_converged(what: str, *, step_px: float, moved_px: float, nmad_ratio: float, sx: float, sy: float,
                  iterations: int, tolerance: float, start: tuple[float, float], on_divergence: str) -> bool:
    """Report a fit stopped by ``max_iterations``. Usable (only not to ``tolerance``): a
    warning. Unusable (see :data:`UNUSABLE_STEP_PX`, :data:`UNUSABLE_MOVE_PX`): a
    :class:`~xdem.errors.ConvergenceError` unless ``on_divergence == "warn"``. Returns True
    when the horizontal shift must be reset to ``start`` (the accepted partial result).

    ``moved_px`` is the distance from the start to the last shift, ``nmad_ratio`` the NMAD
    of dh at the last shift over that at the start."""
    message = (f"{what} did not converge in {iterations} iterations (last step {step_px:.4f} px > tolerance "
               f"{tolerance} px)")
    still_moving = iterations >= 3 and step_px > UNUSABLE_STEP_PX
    wandered = moved_px > UNUSABLE_MOVE_PX and not nmad_ratio < UNUSABLE_NMAD_RATIO
    if not (still_moving or wandered):
        warnings.warn(f"{message}; raise max_iterations or tolerance", ConvergenceWarning, stacklevel=6)
        return False
    began = "" if start == (0.0, 0.0) else f" from initial_shift ({start[0]:g}, {start[1]:g})"
    why = "still moving" if still_moving else f"the NMAD of dh only went to {nmad_ratio:.2f} of its start"
    unusable = (f"{message}, {why} at ({sx:.1f}, {sy:.1f}){began}: the result is unusable; if the DEMs are "
                "far apart, start from an estimate with initial_shift=(dx, dy) (CLI: --initial-shift DX DY), or raise "
                "max_iterations; to accept a partial result (horizontal shift reset) use on_divergence='warn' "
                "(CLI: --allow-divergence)")
    if on_divergence == "raise":
        raise ConvergenceError(unusable)
    warnings.warn(f"{unusable}; on_divergence='warn': the horizontal shift is reset to its start", ConvergenceWarning,
                  stacklevel=6)
    return True
