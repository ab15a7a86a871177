"""Method specs: a coregistration named by a short string (``"nuthkaab+vshift"``), as ``xdem coreg --method`` takes it.

Methods are found by name in :data:`xdem.coreg.METHODS` (lower-case class names) after a small
alias table (:data:`ALIASES`), so a newly registered method works without editing this module.
``+`` joins methods into a pipeline (``nuthkaab+vshift``); ``blockwise:<methods>`` fits
``<methods>`` per tile (:class:`~xdem.coreg.BlockwiseCoreg`): ``blockwise:nuthkaab+vshift`` takes
the rest of the chain as the tile step, ``blockwise:(nuthkaab+vshift)+deramp`` only what is in
the parentheses.

The public API: :func:`from_spec` (a spec and options -> a :class:`~xdem.coreg.Coreg`),
:func:`describe_methods` (every method, its options and defaults: what ``xdem methods`` prints)
and the tables :data:`ALIASES`, :data:`DOCUMENTED`, :data:`METHOD_OPTIONS` and
:data:`OPTION_FLAGS`. :func:`resolve_methods` and :func:`build_coreg` are its two halves (the
CLI checks other options between them).

Examples
--------
>>> from xdem.coreg import from_spec
>>> pipe = from_spec("nuthkaab+vshift", subsample=5000)
>>> [type(s).__name__ for s in pipe.steps], pipe.steps[1].subsample
(['NuthKaab', 'VerticalShift'], 5000)
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import pkgutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from xdem.coreg.base import METHODS, Coreg
from xdem.coreg.blockwise import BlockwiseCoreg
from xdem.coreg.pipeline import CoregPipeline
from xdem.errors import XdemError

__all__ = ["from_spec", "describe_methods", "resolve_methods", "build_coreg", "Blockwise", "MethodSpecError",
           "MethodInfo", "OptionInfo", "ALIASES", "DOCUMENTED", "METHOD_OPTIONS", "OPTION_FLAGS", "FIRST_STEP_ONLY",
           "documented_name", "did_you_mean"]

#: Spec name -> registry name (``xdem.coreg.METHODS`` keys are lower-case class names).
ALIASES = {
    "vshift": "verticalshift",
    "vertical": "verticalshift",
    "nk": "nuthkaab",
    "nuth": "nuthkaab",
    "bias": "biascorr",
    "blockwise": "blockwisecoreg",
}
#: Registry name -> the name the docs use for ``--method`` (others: the registry name itself).
DOCUMENTED = {"verticalshift": "vshift", "nuthkaabderamp": "nuthkaab_deramp", "blockwisecoreg": "blockwise"}
#: Options of a spec (``xdem coreg`` options) -> constructor parameter names they may set (first found wins).
METHOD_OPTIONS: dict[str, tuple[str, ...]] = {
    "poly_order": ("poly_order",),
    "angle": ("angle",),
    "terrain_attribute": ("terrain_attribute", "attribute"),
    "fit_or_bin": ("fit_or_bin",),
    "subsample": ("subsample",),
    "random_state": ("random_state",),
    "initial_shift": ("initial_shift",),
    "on_divergence": ("on_divergence",),
    "resampling": ("resampling",),
    "block_size": ("block_size",),
    "block_iterations": ("n_iterations",),
    "fit_interpolation": ("fit_interpolation",),
}
#: Option -> the ``xdem coreg`` flag setting it (named in the messages).
OPTION_FLAGS = {k: "--" + k.replace("_", "-") for k in METHOD_OPTIONS}
OPTION_FLAGS["on_divergence"] = "--allow-divergence"
#: Options that go to the first step that takes them only: a start (``--initial-shift``) is where
#: the pipeline begins; later steps start from the earlier steps' result, and the shift given
#: again would be counted twice.
FIRST_STEP_ONLY = frozenset({"initial_shift"})
#: Registered but not offered as a method: pipelines are built with ``+``; a RigidTransform is
#: given (``RigidTransform.from_matrix``), not fitted.
_HIDDEN = {"coregpipeline", "rigidtransform"}
#: Modules of ``xdem.coreg`` that failed to import, and why (named in the unknown-method message).
_IMPORT_ERRORS: dict[str, str] = {}


class MethodSpecError(XdemError, ValueError):
    """A method spec or option that names no method or that no step takes; ``option`` is the
    ``xdem coreg`` flag it concerns (``--method``, ``--angle``...)."""

    def __init__(self, message: str, *, option: str) -> None:
        super().__init__(message)
        self.option = option


@dataclass(frozen=True)
class Blockwise:
    """``blockwise:<methods>`` in a spec: a :class:`~xdem.coreg.BlockwiseCoreg` fitting the
    pipeline of ``inner`` classes on each tile."""

    inner: tuple[type[Coreg], ...]

    @property
    def __name__(self) -> str:  # noqa: A003 - reads like the classes next to it
        return "BlockwiseCoreg[" + "+".join(c.__name__ for c in self.inner) + "]"


#: One resolved item of a spec: a method class, or a blockwise step around some.
Step = type[Coreg] | Blockwise


class OptionInfo(TypedDict):
    """A constructor parameter of a method: its ``default`` (JSON-able) and the ``flag`` setting it, if any."""

    name: str
    default: object
    flag: str | None


#: A method of :func:`describe_methods`: ``name`` (for a spec), ``class``, ``summary``, ``options``,
#: ``capabilities`` (the names of its declared :class:`~xdem.coreg.Capabilities` that are true).
MethodInfo = TypedDict("MethodInfo", {"name": str, "class": str, "summary": str, "options": list[OptionInfo],
                                      "capabilities": list[str]})


def _registry() -> dict[str, type[Coreg]]:
    """Every registered coregistration class offered as a method, after importing every
    ``xdem.coreg`` submodule (methods register themselves on import; a module that fails to
    import is remembered and named in the unknown-method message)."""
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        module = f"xdem.coreg.{info.name}"
        if info.name.startswith("_") or module in _IMPORT_ERRORS:
            continue
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - one broken module must not hide the others
            _IMPORT_ERRORS[module] = f"{type(exc).__name__}: {exc}"
    return {k: v for k, v in METHODS.items() if k not in _HIDDEN and not inspect.isabstract(v)}


def _norm(name: str) -> str:
    return name.strip().lower().replace("-", "").replace("_", "").replace(" ", "")


def documented_name(key: str) -> str:
    """The name the docs use for a registry key.

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
    by_norm = {_norm(n): n for n in names}
    hit = difflib.get_close_matches(_norm(text), list(by_norm), n=1, cutoff=0.6)
    return by_norm[hit[0]] if hit else None


def resolve_methods(text: str) -> list[Step]:
    """Classes named by ``text`` (``"nuthkaab"``, ``"nuthkaab+vshift"``...), in order.

    Raises
    ------
    MethodSpecError
        An unknown or empty name; the message lists the known ones.

    Examples
    --------
    >>> [c.__name__ for c in resolve_methods("nuthkaab+vshift")]
    ['NuthKaab', 'VerticalShift']
    >>> [c.__name__ for c in resolve_methods("vshift+blockwise:nuthkaab+vshift")]
    ['VerticalShift', 'BlockwiseCoreg[NuthKaab+VerticalShift]']
    """
    if ":" in text:
        return _resolve_blockwise(text)
    registry = _registry()
    by_norm = {_norm(k): v for k, v in registry.items()}
    aliases = {_norm(k): _norm(v) for k, v in ALIASES.items() if _norm(v) in by_norm}
    documented = sorted(documented_name(k) for k in registry)
    classes: list[Step] = []
    for part in text.split("+"):
        key = _norm(part)
        key = aliases.get(key, key)
        if key not in by_norm:
            what = f"unknown method '{part.strip()}'" if part.strip() else f"empty method name in '{text}'"
            guess = did_you_mean(part, documented) if part.strip() else None
            broken = "".join(f"; {m} failed to import ({e})" for m, e in _IMPORT_ERRORS.items())
            raise MethodSpecError(
                f"{what}{f'; did you mean {guess}?' if guess else ''} Methods: {', '.join(documented)} "
                f"(join several with +, e.g. nuthkaab+vshift; `xdem methods` lists their options){broken}",
                option="--method",
            )
        cls = by_norm[key]
        classes.append(Blockwise((by_norm["nuthkaab"],)) if cls.__name__ == "BlockwiseCoreg" else cls)
    return classes


def _split_chain(text: str) -> list[str]:
    """``text`` split on ``+`` outside parentheses.

    Examples
    --------
    >>> _split_chain("nuthkaab+blockwise:(nuthkaab+vshift)+deramp")
    ['nuthkaab', 'blockwise:(nuthkaab+vshift)', 'deramp']
    """
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == "+" and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return parts + [cur]


def _resolve_blockwise(text: str) -> list[Step]:
    """:func:`resolve_methods` with ``blockwise:...`` parts made :class:`Blockwise`."""
    parts = _split_chain(text)
    out: list[Step] = []
    i = 0
    while i < len(parts):
        head, sep, rest = parts[i].partition(":")
        if sep and _norm(head) in ("blockwise", "blockwisecoreg"):
            rest = rest.strip()
            if rest.startswith("(") and rest.endswith(")"):
                inner_text, i = rest[1:-1], i + 1
            else:
                inner_text, i = "+".join([rest] + parts[i + 1:]), len(parts)
            if "blockwise" in _norm(inner_text):
                raise MethodSpecError("a blockwise step cannot contain another one", option="--method")
            # no Blockwise inside: refused just above
            out.append(Blockwise(tuple(c for c in resolve_methods(inner_text) if not isinstance(c, Blockwise))))
            continue
        out.extend(resolve_methods(parts[i]))
        i += 1
    return out


def _param_names(cls: type[Coreg]) -> list[str]:
    return list(cls._param_names())


def _step_kwargs(classes: list[type[Coreg]], options: Mapping[str, object]) -> list[dict[str, object]]:
    """The keyword arguments of each class of ``classes`` from ``options`` (see :func:`build_coreg`)."""
    kwargs: list[dict[str, object]] = [{} for _ in classes]
    for key, value in options.items():
        if value is None:
            continue
        used = False
        for i, cls in enumerate(classes):
            names = _param_names(cls)
            param = next((p for p in METHOD_OPTIONS[key] if p in names), None)
            if param is not None and not (used and key in FIRST_STEP_ONLY):
                kwargs[i][param] = value
                used = True
        if not used:
            takers = sorted(
                {name for name, cls in _registry().items() if any(p in _param_names(cls) for p in METHOD_OPTIONS[key])}
            )
            hint = f"; it applies to: {', '.join(takers)}" if takers else ""
            raise MethodSpecError(
                f"no step of '{'+'.join(c.__name__ for c in classes)}' takes {OPTION_FLAGS[key]}{hint}",
                option=OPTION_FLAGS[key],
            )
    return kwargs


def build_coreg(items: Sequence[Step], options: Mapping[str, object]) -> Coreg:
    """Instantiate the steps with the options that apply to each; a pipeline if several.

    ``options`` maps :data:`METHOD_OPTIONS` keys to values (``None`` = not given). Every
    given option is passed to each step whose constructor has a matching parameter, except
    those of :data:`FIRST_STEP_ONLY`, passed to the first such step only. A :class:`Blockwise`
    item counts as the ``BlockwiseCoreg`` (``block_size``, ``resampling``) followed by its
    tile steps (``subsample``...).

    Raises
    ------
    MethodSpecError
        An option was given but no step takes it.

    Examples
    --------
    >>> bw = build_coreg(resolve_methods("blockwise:nuthkaab"), {"block_size": 300, "subsample": 1000})
    >>> type(bw).__name__, bw.block_size, type(bw.step).__name__, bw.step.subsample
    ('BlockwiseCoreg', 300, 'NuthKaab', 1000)
    """
    classes: list[type[Coreg]] = []
    for item in items:
        classes += [BlockwiseCoreg, *item.inner] if isinstance(item, Blockwise) else [item]
    built = iter([cls(**kw) for cls, kw in zip(classes, _step_kwargs(classes, options))])
    steps = []
    for item in items:
        step = next(built)
        if isinstance(item, Blockwise):
            inner = [next(built) for _ in item.inner]
            step.set_params(step=inner[0] if len(inner) == 1 else CoregPipeline(inner))
        steps.append(step)
    return steps[0] if len(steps) == 1 else CoregPipeline(steps)


def from_spec(spec: str, /, **options: object) -> Coreg:
    """The coregistration named by ``spec``, its steps built with the ``options`` that apply to each.

    Parameters
    ----------
    spec
        Method names joined by ``+`` (``"nuthkaab+vshift"``; aliases: :data:`ALIASES`), with
        ``blockwise:<methods>`` for a fit per tile, as ``xdem coreg --method`` takes them.
    **options
        :data:`METHOD_OPTIONS` keys (``subsample=``, ``angle=``, ``block_size=``...); ``None``
        is "not given". Each goes to every step taking it, ``initial_shift`` to the first only.

    Returns
    -------
    Coreg
        The single step, or a :class:`~xdem.coreg.CoregPipeline` of several.

    Raises
    ------
    MethodSpecError
        An unknown method, or an option that no step takes.
    TypeError
        An option that is not one of :data:`METHOD_OPTIONS`.

    Examples
    --------
    >>> type(from_spec("nk", initial_shift=(1.0, 2.0))).__name__
    'NuthKaab'
    >>> from_spec("vshift", angle=10.0)
    Traceback (most recent call last):
    ...
    xdem.coreg.spec.MethodSpecError: no step of 'VerticalShift' takes --angle; it applies to: directionalbias
    """
    unknown = sorted(set(options) - set(METHOD_OPTIONS))
    if unknown:
        raise TypeError(f"from_spec() got unknown options {unknown}; options: {', '.join(METHOD_OPTIONS)}")
    return build_coreg(resolve_methods(spec), options)


def _first_line(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _jsonable_default(value: object) -> object:
    if callable(value):
        return getattr(value, "__name__", repr(value))
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (tuple, list)):
        return [_jsonable_default(v) for v in value]
    return repr(value)


def describe_methods() -> list[MethodInfo]:
    """One entry per method, by name: ``name`` (for a spec), ``class``, ``summary``, ``options``
    (each constructor parameter: ``name``, ``default``, ``flag``, the ``xdem coreg`` option
    setting it, or ``None``) and ``capabilities`` (its declared capabilities that are true,
    :class:`~xdem.coreg.Capabilities`). What ``xdem methods`` prints.

    Examples
    --------
    >>> table = {m["name"]: m for m in describe_methods()}
    >>> table["nuthkaab"]["class"]
    'NuthKaab'
    >>> {o["name"]: o["flag"] for o in table["directionalbias"]["options"]}["angle"]
    '--angle'
    >>> "needs_bias_vars" in table["biascorr"]["capabilities"]
    True
    """
    flag_of: dict[str, str] = {}
    for key, params in METHOD_OPTIONS.items():
        for p in params:
            flag_of.setdefault(p, OPTION_FLAGS[key])
    out: list[MethodInfo] = []
    for key, cls in sorted(_registry().items(), key=lambda kv: documented_name(kv[0])):
        options: list[OptionInfo] = []
        for param in inspect.signature(cls).parameters.values():
            if param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
                continue
            default = None if param.default is inspect.Parameter.empty else _jsonable_default(param.default)
            options.append({"name": param.name, "default": default, "flag": flag_of.get(param.name)})
        out.append({"name": documented_name(key), "class": cls.__name__, "summary": _first_line(cls),
                    "options": options, "capabilities": list(cls.tags.names())})
    return out
