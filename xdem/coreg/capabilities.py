"""What a coregistration method can do, declared as data (:class:`Capabilities`).

Each estimator class declares one class attribute, ``tags``, inherited and overridden like
any class attribute (in the spirit of scikit-learn's estimator tags); an estimator's
:attr:`~xdem.coreg.Coreg.capabilities` returns it, and a pipeline combines its steps'
(:meth:`Capabilities.combine`). The code that runs, merges, applies and judges estimators reads
these flags instead of probing for methods and attributes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

__all__ = ["Capabilities"]


@dataclass(frozen=True)
class Capabilities:
    """What a coregistration method is and can do (every flag ``False`` by default).

    Attributes
    ----------
    affine
        A translation or a rigid transform: it has a 4 x 4 matrix (``to_matrix``), and
        consecutive affine steps of a pipeline are merged into one transform, resampled once.
    rigid
        It may rotate (a rigid transform: :class:`~xdem.coreg.RigidCoreg` and its methods).
    horizontal
        It fits a horizontal shift (the verdict then expects no residual aspect-dependent
        sinusoid).
    removes_median
        Its vertical offset is the median of ``dh`` (with the default ``vshift_reduc_func``):
        the median of ``dh`` after it should be 0 (the verdict's ``median_after``).
    needs_bias_vars
        ``fit`` and ``apply`` need ``bias_vars`` (e.g. ``{"elevation": ref}``).
    fits_points
        It fits on points as well as on a DEM pair (``_fit_points``).
    initial_shift
        In a pipeline, after affine steps, it starts its fit from their merged matrix on the
        unresampled DEM (``fit_after``) instead of fitting on the resampled DEM.
    in_frame
        It is a correction of the frame (it says what happens at each point of the reference's
        CRS: a translation, rotation, ramp or displacement field, ``_frame_op``), so it applies
        to a DEM in any CRS or onto any grid.
    blockwise_step
        It can be the step of :class:`~xdem.coreg.BlockwiseCoreg`: a correction of the frame
        whose motion at a point is a translation (not itself blockwise).
    moves_points
        ``apply_points`` can move points with it: a correction of the frame, or a bias
        correction that evaluates its variables at the points.
    rereads_inputs
        Its fit decodes the inputs' chunks more than once (a blockwise fit reads regions of
        rows of tiles, which cut the chunks: each decoded about twice a round), so ``xdem coreg``
        spills local compressed inputs too, to decode each chunk once per run.

    Examples
    --------
    >>> import xdem
    >>> caps = xdem.coreg.NuthKaab().capabilities
    >>> caps.affine, caps.horizontal, caps.needs_bias_vars
    (True, True, False)
    >>> (xdem.coreg.NuthKaab() + xdem.coreg.Deramp()).capabilities.affine
    False
    """

    affine: bool = False
    rigid: bool = False
    horizontal: bool = False
    removes_median: bool = False
    needs_bias_vars: bool = False
    fits_points: bool = False
    initial_shift: bool = False
    in_frame: bool = False
    blockwise_step: bool = False
    moves_points: bool = False
    rereads_inputs: bool = False

    def but(self, **changes: bool) -> Capabilities:
        """A copy with ``changes`` (how a subclass declares its own from its parent's).

        Examples
        --------
        >>> Capabilities(affine=True).but(rigid=True).names()
        ('affine', 'rigid')
        """
        return replace(self, **changes)

    @classmethod
    def combine(cls, steps: Sequence[Capabilities]) -> Capabilities:
        """The capabilities of a pipeline of ``steps``: affine, fitting on points, in the
        frame, blockwise-able and moving points when every step is; rigid, horizontal,
        needing bias variables and re-reading the inputs when any step is; removing the median
        when the last step does;
        never starting from an initial shift itself (its steps do). No steps: nothing.

        Examples
        --------
        >>> a, b = Capabilities(affine=True, horizontal=True), Capabilities(needs_bias_vars=True)
        >>> c = Capabilities.combine([a, b])
        >>> c.affine, c.horizontal, c.needs_bias_vars
        (False, True, True)
        """
        if not steps:
            return cls()
        return cls(
            affine=all(s.affine for s in steps),
            rigid=any(s.rigid for s in steps),
            horizontal=any(s.horizontal for s in steps),
            removes_median=steps[-1].removes_median,
            needs_bias_vars=any(s.needs_bias_vars for s in steps),
            fits_points=all(s.fits_points for s in steps),
            initial_shift=False,
            in_frame=all(s.in_frame for s in steps),
            blockwise_step=all(s.blockwise_step for s in steps),
            moves_points=all(s.moves_points for s in steps),
            rereads_inputs=any(s.rereads_inputs for s in steps),
        )

    def names(self) -> tuple[str, ...]:
        """The names of the flags that are true, in declaration order.

        Examples
        --------
        >>> Capabilities(affine=True, fits_points=True).names()
        ('affine', 'fits_points')
        """
        return tuple(f.name for f in fields(self) if getattr(self, f.name))
