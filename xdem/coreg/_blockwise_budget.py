"""How many pixels each tile of a :class:`~xdem.coreg.BlockwiseCoreg` draws.

Upstream xdem 0.2.3 fits the step on each tile as on a whole DEM: the step's ``subsample`` is
per tile. With Nuth & Kääb's default (500,000 pixels) and 1000-pixel tiles, that is half of
every tile: 64 tiles of an 8000 x 8000 DEM cost 64 fits of a whole DEM. Here a step whose
``subsample`` is left at its class default spreads it over the tiles as a budget for the whole
DEM: each tile draws ``subsample / n_tiles`` pixels, at least :data:`TILE_SUBSAMPLE_FLOOR`
(and never more than the default itself). A ``subsample`` set to anything else is per tile,
as upstream; ``BlockwiseCoreg(subsample_per_tile=...)`` sets every tile's explicitly (e.g.
``500_000``: the behaviour before this rule).
"""

from __future__ import annotations

import inspect
import math

import numpy as np

from xdem.coreg.base import Coreg, clone
from xdem.errors import InputError

__all__ = ["TILE_SUBSAMPLE_FLOOR", "class_default_subsample", "tile_template", "check_per_tile"]

#: Fewest pixels a tile draws when the step's default ``subsample`` is spread over the tiles.
#: Chosen by measurement on the 8000 x 8000 benchmark pair (docs/performance.md, section
#: blockwise): the tiles' errors against the true shift grow as ``1 / sqrt(pixels)``, and
#: 20,000 pixels keep them within a few millimetres of the 500,000-per-tile fit.
TILE_SUBSAMPLE_FLOOR = 20_000


def class_default_subsample(step: Coreg) -> float | int | None:
    """The default of ``subsample`` in the constructor of ``step``'s class (``None``: no such parameter)."""
    par = inspect.signature(type(step).__init__).parameters.get("subsample")
    if par is None or par.default is inspect.Parameter.empty:
        return None
    default: float | int | None = par.default
    return default


def _is_count(value: object) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) and bool(value > 1)


def check_per_tile(value: object) -> None:
    """Raise :class:`~xdem.errors.InputError` unless ``value`` is ``None``, a fraction in ``(0, 1]`` or a count ``> 1``."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not (
        value > 0 and math.isfinite(float(value))
    ):
        raise InputError(f"subsample_per_tile must be None, a fraction in (0, 1] or a count > 1, got {value!r}")


def tile_template(step: Coreg, n_tiles: int, per_tile: float | int | None) -> Coreg:
    """A clone of ``step`` with the ``subsample`` each tile uses (``step`` is not touched).

    Examples
    --------
    >>> from xdem.coreg import NuthKaab
    >>> tile_template(NuthKaab(), 64, None).subsample  # the default, spread: 500,000 / 64 < the floor
    20000
    >>> tile_template(NuthKaab(), 4, None).subsample
    125000
    >>> tile_template(NuthKaab(subsample=50_000), 64, None).subsample  # set explicitly: per tile
    50000
    >>> tile_template(NuthKaab(subsample=50_000), 64, 500_000).subsample
    500000
    """
    out = clone(step)
    for s in out.steps:
        if "subsample" not in s.get_params(deep=False):
            continue
        if per_tile is not None:
            s.set_params(subsample=per_tile)
            continue
        value = s.get_params(deep=False)["subsample"]
        default = class_default_subsample(s)
        if isinstance(value, (int, float)) and _is_count(value) and _is_count(default) and value == default:
            share = math.ceil(float(value) / max(n_tiles, 1))
            s.set_params(subsample=int(min(float(value), max(TILE_SUBSAMPLE_FLOOR, share))))
    return out
