"""What :meth:`xdem.coreg.Coreg.info` and the fitted ``repr`` say: learned values with units,
the learned translation and rotation in one line, ``history_`` labelled per iteration."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

__all__ = ["horizontal_unit", "unit_of", "fitted_motion", "history_lines"]

_ROTATIONS = ("rotation_x_", "rotation_y_", "rotation_z_")
_SHIFTS = ("shift_x_", "shift_y_", "shift_z_")


def horizontal_unit(crs: object) -> str:
    """Short name of the linear unit of ``crs`` (``"m"``, ``"ft"``...), ``"CRS units"`` if unknown.

    Examples
    --------
    >>> horizontal_unit("EPSG:32633"), horizontal_unit("EPSG:2263"), horizontal_unit(None)
    ('m', 'ft', 'CRS units')
    """
    if crs is None:
        return "CRS units"
    from pyproj import CRS

    try:
        units = {a.unit_name for a in CRS.from_user_input(crs).axis_info[:2]}
    except Exception:  # noqa: BLE001 - an unreadable CRS: say so rather than fail in a repr
        return "CRS units"
    names = {"metre": "m", "meter": "m", "US survey foot": "ft", "foot": "ft", "degree": "degrees"}
    return names.get(units.pop(), "CRS units") if len(units) == 1 else "CRS units"


def unit_of(name: str, horizontal: str) -> str:
    """Unit of the learned value ``name`` (empty when it has none or is not known).

    Examples
    --------
    >>> unit_of("shift_x_", "m"), unit_of("rotation_z_", "m"), unit_of("coefs_", "m")
    ('m', 'degrees', '')
    """
    if name in ("shift_x_", "shift_y_") or name == "centroid_":
        return horizontal
    if name in ("shift_z_", "vshift_", "ramp_amplitude_", "residual_nmad_", "spread_"):
        return "m (DEM height units)"
    if name in _ROTATIONS or name == "tilt_direction_deg_":
        return "degrees"
    if name == "tilt_m_per_km_":
        return "m/km"
    if name == "count_":
        return "pixels or points"
    if name == "passes_":
        return "passes over the data"
    return ""


def _sign(v: float) -> str:
    return f"{v:+.4f}"


def fitted_motion(learned: Mapping[str, object], horizontal: str) -> str:
    """The learned translation (and rotation) in one line, or ``""`` when the method learns none.

    Examples
    --------
    >>> fitted_motion({"shift_x_": -3.27, "shift_y_": 1.64, "shift_z_": -2.5}, "m")
    'shift_x=-3.2700 m, shift_y=+1.6400 m, shift_z=-2.5000 m'
    >>> fitted_motion({"coefs_": [1.0]}, "m")
    ''
    """
    parts = []
    rotations = [learned.get(k) for k in _ROTATIONS]
    if all(isinstance(r, (int, float)) for r in rotations) and any(rotations):
        parts.append("rotations x/y/z " + "/".join(_sign(float(r)) for r in rotations) + " degrees")  # type: ignore[arg-type]
    for key in _SHIFTS:
        v = learned.get(key)
        if isinstance(v, (int, float, np.floating)):
            unit = horizontal if key != "shift_z_" else "m"
            parts.append(f"{key[:-1]}={_sign(float(v))} {unit}")
    return ", ".join(parts)


def history_lines(history: object, labels: tuple[str, ...], horizontal: str) -> list[str]:
    """``history_`` as one labelled line per iteration (``labels``: what each entry holds).

    Examples
    --------
    >>> for line in history_lines([[-3.12, 1.55], [-3.27, 1.64]], ("shift_x", "shift_y"), "m"):
    ...     print(line)
          iteration 1: shift_x=-3.1200, shift_y=+1.5500 (shift_x, shift_y: m)
          iteration 2: shift_x=-3.2700, shift_y=+1.6400 (shift_x, shift_y: m)
    """
    out: list[str] = []
    if not isinstance(history, Iterable):  # a learned value that is not a history
        return out
    for i, row in enumerate(history, 1):
        values = np.atleast_1d(np.asarray(row, dtype=float))
        if labels and len(labels) == values.size:
            text = ", ".join(f"{name}={v:+.6f}" if name.startswith("rotation") else f"{name}={_sign(v)}"
                             for name, v in zip(labels, values))
            text += "".join(f" ({', '.join(n for n in labels if unit_of(n + '_', horizontal) == u)}: {u})"
                            for u in dict.fromkeys(unit_of(n + "_", horizontal) for n in labels) if u)
        else:
            text = ", ".join(f"{v:.6g}" for v in values)
        out.append(f"      iteration {i}: {text}")
    return out
