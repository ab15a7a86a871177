"""What :meth:`xdem.coreg.Coreg.info` and the fitted ``repr`` say: learned values with units,
the learned translation and rotation in one line, ``history_`` labelled per iteration."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from xdem.coreg.base import Coreg

__all__ = ["horizontal_unit", "unit_of", "fitted_motion", "history_lines", "info_text", "repr_text", "short"]

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


#: Labels of upstream's ``meta`` keys in :meth:`~xdem.coreg.Coreg.info` (our wording).
_LABELS = {
    "subsample": "Subsample asked for", "random_state": "Random seed", "subsample_final": "Valid values sampled",
    "fit_or_bin": "Fit and/or bin", "fit_func": "Fitted function", "fit_optimizer": "Optimiser",
    "bin_sizes": "Bins", "bin_statistic": "Statistic per bin", "bin_apply_method": "Applied from bins by",
    "bias_var_names": "Bias variables", "fit_params": "Fitted parameters", "max_iterations": "Iterations at most",
    "tolerance": "Tolerance", "last_iteration": "Iterations run", "terrain_attribute": "Terrain attribute",
    "angle": "Track angle (degrees)", "poly_order": "Polynomial order", "initial_shift": "Initial shift",
    "vshift_reduc_func": "Vertical shift statistic", "shift_x": "Shift x (CRS units)",
    "shift_y": "Shift y (CRS units)", "shift_z": "Shift z (elevation units)", "matrix": "Matrix (4 x 4)",
    "centroid": "Rotation centre",
}
_SECTIONS = {"random": "Randomization", "fitorbin": "Fitting and binning", "affine": "Affine",
             "iterative": "Iterative", "specific": "Specific"}
_TAB = 32


def short(v: Any) -> str:
    """A short text of a hyper-parameter or learned value (functions by name, long lists by size).

    Examples
    --------
    >>> short(np.median), short(0.123456789), short(list(range(10)))
    ('median', '0.123457', '<list of 10>')
    """
    if callable(v) and hasattr(v, "__name__"):
        name: str = v.__name__
        return name
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (list, tuple, np.ndarray)) and len(v) > 6:
        return f"<{type(v).__name__} of {len(v)}>"
    return repr(v)


def _meta_value(v: object) -> str:
    if isinstance(v, np.ndarray):
        text = np.array2string(np.asarray(v, dtype=float), precision=5, suppress_small=True)
        return ("\n" + " " * _TAB).join(text.splitlines())
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.6g}"
    return short(v)


def _meta_lines(section: Mapping[str, Mapping[str, object]]) -> list[str]:
    lines: list[str] = []
    for key, title in _SECTIONS.items():
        values = section.get(key, {})
        if values:
            lines.append(f"  {title}")
            lines += [f"    {_LABELS.get(k, k)}:".ljust(_TAB) + _meta_value(v) for k, v in values.items()]
    return lines


def info_text(coreg: Coreg) -> str:
    """What :meth:`~xdem.coreg.Coreg.info` prints: upstream's layout (method, whether affine and
    fitted, ``meta``'s inputs and outputs by section), then every hyper-parameter and learned
    value of ours, with units and the labelled ``history_``."""
    meta = coreg.meta
    lines = ["Generic coregistration information", f"  Method:       {type(coreg).__name__}",
             f"  Is affine?    {coreg.is_affine}", f"  Fit called?   {coreg.is_fitted}", "Inputs"]
    lines += _meta_lines(meta["inputs"])
    lines.append("Outputs")
    outputs = _meta_lines(meta["outputs"])
    lines += outputs if outputs else (["  None yet (fit not called)"] if not coreg.is_fitted else ["  None"])
    lines += [f"{type(coreg).__name__}", "  parameters:"]
    lines += [f"    {k} = {short(v)}" for k, v in coreg.get_params().items()]
    if coreg.is_fitted:
        unit = horizontal_unit(vars(coreg).get("crs_"))
        lines.append("  learned:")
        for k, v in coreg.learned().items():
            if k == "history_":
                what = f" ({', '.join(coreg.history_labels)} after each iteration)" if coreg.history_labels else ""
                lines.append(f"    history_{what}:")
                lines += history_lines(v, coreg.history_labels, unit)
                continue
            u = unit_of(k, unit)
            lines.append(f"    {k} = {short(v)}" + (f" {u}" if u else ""))
    else:
        lines.append("  not fitted")
    return "\n".join(lines)


_NO_DEFAULT = object()


def _same_value(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(type(a) is type(b) and a == b)
    except (TypeError, ValueError):  # arrays and the like: shown
        return False


def repr_text(coreg: Coreg) -> str:
    """The class and the hyper-parameters that differ from their defaults, then what was learned
    in one line (the translation and rotation, if any)."""
    defaults = {p.name: p.default for p in inspect.signature(type(coreg).__init__).parameters.values()}
    changed = {k: v for k, v in coreg.get_params(deep=False).items()
               if not _same_value(v, defaults.get(k, _NO_DEFAULT))}
    text = f"{type(coreg).__name__}({', '.join(f'{k}={short(v)}' for k, v in changed.items())})"
    if coreg.is_fitted:
        motion = fitted_motion(coreg.learned(), horizontal_unit(vars(coreg).get("crs_")))
        text += f" [fitted: {motion}]" if motion else " [fitted]"
    return text
