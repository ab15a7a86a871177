"""``xdem methods``: the coregistration methods ``xdem coreg --method`` takes, their options and defaults.

Built from the registry (:data:`xdem.coreg.METHODS`, as ``--method`` resolves names), so a newly
registered method is listed without editing this module.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import click

__all__ = ["methods", "method_table", "documented_name", "did_you_mean", "DOCUMENTED"]


#: Registry name -> the name the docs use for ``--method`` (others: the registry name itself).
DOCUMENTED = {"verticalshift": "vshift", "nuthkaabderamp": "nuthkaab_deramp", "blockwisecoreg": "blockwise"}


def documented_name(key: str) -> str:
    """The ``--method`` name the docs use for a registry key.

    Examples
    --------
    >>> documented_name("verticalshift"), documented_name("icp")
    ('vshift', 'icp')
    """
    return DOCUMENTED.get(key, key)


def did_you_mean(text: str, names: list[str]) -> str | None:
    """The documented name closest to ``text`` (letters compared without ``_``/``-``), or None.

    Examples
    --------
    >>> did_you_mean("nuthkab", ["vshift", "nuthkaab", "icp"])
    'nuthkaab'
    >>> did_you_mean("zzz", ["vshift", "nuthkaab"]) is None
    True
    """
    import difflib

    from xdem.cli.coreg import _norm

    by_norm = {_norm(n): n for n in names}
    hit = difflib.get_close_matches(_norm(text), list(by_norm), n=1, cutoff=0.6)
    return by_norm[hit[0]] if hit else None


def _angle_note(classes: list[Any], angle: float | None) -> str | None:
    """The line saying which track angle a directional bias step uses when ``--angle`` is not given."""
    from xdem.cli.coreg import Blockwise
    from xdem.coreg import DirectionalBias

    flat: list[Any] = []
    for c in classes:
        flat += list(c.inner) if isinstance(c, Blockwise) else [c]
    if angle is not None or DirectionalBias not in flat:
        return None
    default = _param_default(DirectionalBias, "angle")
    return (f"directionalbias: no --angle given, using {default:g} degrees (clockwise from east, upstream xdem's "
            "convention: the bias varies with easting); give --angle, the satellite's along-track direction, e.g. "
            "--angle 90 for a north-south track")


def _param_default(cls: type, name: str) -> Any:
    return inspect.signature(cls).parameters[name].default


def _first_line(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _jsonable_default(value: Any) -> Any:
    if callable(value):
        return getattr(value, "__name__", repr(value))
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (tuple, list)):
        return [_jsonable_default(v) for v in value]
    return repr(value)


def method_table() -> list[dict[str, Any]]:
    """One entry per method: ``name`` (for ``--method``), ``class``, ``summary`` and
    ``options`` (each constructor parameter: ``name``, ``default``, ``flag``, the
    ``xdem coreg`` option setting it, or ``None``).

    Examples
    --------
    >>> table = {m["name"]: m for m in method_table()}
    >>> table["nuthkaab"]["class"]
    'NuthKaab'
    >>> {o["name"]: o["flag"] for o in table["directionalbias"]["options"]}["angle"]
    '--angle'
    """
    from xdem.cli.coreg import _OPTION_FLAGS, METHOD_OPTIONS, _registry

    flag_of: dict[str, str] = {}
    for key, params in METHOD_OPTIONS.items():
        for p in params:
            flag_of.setdefault(p, _OPTION_FLAGS[key])
    out = []
    for key, cls in sorted(_registry().items(), key=lambda kv: documented_name(kv[0])):
        options = []
        for param in inspect.signature(cls).parameters.values():
            if param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
                continue
            default = None if param.default is inspect.Parameter.empty else _jsonable_default(param.default)
            options.append({"name": param.name, "default": default, "flag": flag_of.get(param.name)})
        out.append({"name": documented_name(key), "class": cls.__name__, "summary": _first_line(cls),
                    "options": options})
    return out


@click.command("methods")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of text.")
def methods(as_json: bool) -> None:
    """List the methods of `xdem coreg --method`, their options and defaults.

    \b
    Join methods with + for a pipeline (nuthkaab+vshift); blockwise:METHODS fits METHODS per tile.
    Options without a flag are set from Python (xdem.coreg.<Class>(option=...)).
    """
    table = method_table()
    if as_json:
        click.echo(json.dumps(table, indent=2))
        return
    for m in table:
        click.echo(f"{m['name']}  ({m['class']}): {m['summary']}")
        for o in m["options"]:
            flag = f"  [{o['flag']}]" if o["flag"] else ""
            click.echo(f"    {o['name']} = {o['default']!r}{flag}")
        click.echo("")
