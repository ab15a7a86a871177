"""The conformance checker every coregistration method passes: :func:`check_coreg`.

It states the contract of :class:`xdem.coreg.Coreg` as executable checks, so that a new
method (one kernel module, one estimator class, one test file) is held to the same rules as
the existing ones: scikit-learn conventions, laziness, chunk independence, JSON round trip.
Run it from a test::

    from xdem.testing import check_coreg
    check_coreg(lambda: MyMethod(subsample=5000))
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import dask
import numpy as np
import xarray as xr

from xdem.coreg.base import Coreg, clone
from xdem.errors import InputError, XdemError
from xdem.examples.pair import example_pair

__all__ = ["check_coreg", "CHECKS"]

#: Names of the checks :func:`check_coreg` runs, in order.
CHECKS = (
    "constructor_only_stores",
    "fit_returns_self",
    "apply_computes_nothing",
    "clone_equals",
    "fit_does_not_touch_inputs",
    "chunk_and_scheduler_independent",
    "json_round_trip",
    "resample_false_is_honoured",
)

#: Junk values given to every constructor parameter: a constructor must accept anything.
_JUNK: tuple[Any, ...] = (-7, "not-a-value", None, 1e300)


class _Counter(dask.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def _start(self, dsk: Any) -> None:
        self.count += 1


def _values(out: xr.DataArray) -> np.ndarray:
    return np.asarray(out.values, dtype=np.float64)


def _same(a: np.ndarray, b: np.ndarray, atol: float, what: str) -> None:
    if a.shape != b.shape:
        raise AssertionError(f"{what}: shapes differ {a.shape} vs {b.shape}")
    np.testing.assert_allclose(a, b, atol=atol, rtol=0.0, equal_nan=True, err_msg=what)


def _learned_numbers(model: Coreg) -> np.ndarray:
    """Numeric learned values, flattened (a pipeline: its steps')."""
    def walk(value: Any) -> list[float]:
        if isinstance(value, Mapping):
            return [x for k in sorted(value) for x in walk(value[k])]
        if isinstance(value, (list, tuple)):
            return [x for v in value for x in walk(v)]
        arr = np.asarray(value)
        return [float(x) for x in arr.ravel()] if arr.dtype.kind in "fiub" else []

    return np.asarray(walk(model.learned()), dtype=np.float64)


def check_coreg(
    factory: Callable[[], Coreg],
    *,
    ref: xr.DataArray | None = None,
    tba: xr.DataArray | None = None,
    fit_kwargs: Mapping[str, object] | None = None,
    chunkings: tuple[int, ...] = (64, 150),
    atol: float = 1e-9,
) -> list[str]:
    """Assert that the estimators made by ``factory`` follow the :class:`~xdem.coreg.Coreg` contract.

    Parameters
    ----------
    factory
        Makes a new, unfitted estimator (with small ``subsample`` values, for speed).
    ref, tba
        DEM pair to fit on (default: :func:`xdem.examples.example_pair`, 400 x 400).
    fit_kwargs
        Extra ``fit`` arguments (e.g. ``bias_vars``); ``bias_vars`` are also given to ``apply``.
    chunkings
        Dask chunk sides compared with numpy input and with each other (threads and
        synchronous schedulers).
    atol
        Tolerance on learned values and outputs across chunkings.

    Returns
    -------
    list of str
        The names of the checks that ran (:data:`CHECKS`).

    Raises
    ------
    AssertionError
        The first check that fails, with what differs.

    Examples
    --------
    >>> from xdem.coreg import VerticalShift
    >>> check_coreg(lambda: VerticalShift(subsample=2000), chunkings=(128,))[:2]
    ['constructor_only_stores', 'fit_returns_self']
    """
    if ref is None or tba is None:
        ref, tba, _ = example_pair(chunks=128)
    kwargs: dict[str, Any] = dict(fit_kwargs or {})
    case = _Case(factory=factory, cls=type(factory()), ref=ref, tba=tba, fit_kwargs=kwargs,
                 apply_kwargs={"bias_vars": kwargs["bias_vars"]} if "bias_vars" in kwargs else {},
                 chunkings=chunkings, atol=atol)
    for name in CHECKS:
        _CHECK_FUNCTIONS[name](case)
    return list(CHECKS)


@dataclass
class _Case:
    """What the checks share: the estimator class, the pair, the keywords, the model fitted by
    ``fit_returns_self`` and its output by ``apply_computes_nothing``."""

    factory: Callable[[], Coreg]
    cls: type[Coreg]
    ref: xr.DataArray
    tba: xr.DataArray
    fit_kwargs: dict[str, Any]
    apply_kwargs: dict[str, Any]
    chunkings: tuple[int, ...]
    atol: float
    model: Coreg | None = None
    expected: np.ndarray | None = None

    def fitted(self) -> Coreg:
        assert self.model is not None, "fit_returns_self runs first"
        return self.model


def _constructor_only_stores(case: _Case) -> None:
    """Any value is accepted and stored as given (validated in fit)."""
    cls = case.cls
    names = cls._param_names()
    for junk in _JUNK:
        for name in names:
            if name == "steps":
                continue
            try:
                obj = cls(**({"steps": []} if "steps" in names else {}), **{name: junk})
            except Exception as exc:  # noqa: BLE001 - any exception is a failure of the contract
                raise AssertionError(f"{cls.__name__}({name}={junk!r}) raised {type(exc).__name__}: {exc}; "
                                     "constructors must only store their arguments") from exc
            if getattr(obj, name) is not junk and getattr(obj, name) != junk:
                raise AssertionError(f"{cls.__name__}({name}={junk!r}) stored {getattr(obj, name)!r}")
            if obj.is_fitted:
                raise AssertionError(f"a new {cls.__name__} claims to be fitted")


def _fit_returns_self(case: _Case) -> None:
    """``fit`` returns the estimator, sets learned values ending in ``_`` and changes no hyper-parameter."""
    name = case.cls.__name__
    model = case.factory()
    params_before = copy.deepcopy(_plain_params(model))
    if model.fit(case.ref, case.tba, **case.fit_kwargs) is not model:
        raise AssertionError(f"{name}.fit must return self")
    if not model.is_fitted or not all(k.endswith("_") for k in model.learned()):
        raise AssertionError(f"{name}.fit must set learned attributes ending in '_'")
    params_after = _plain_params(model)
    for k, v in params_before.items():
        if not _equal_param(v, params_after[k]):
            raise AssertionError(f"{name}.fit changed the hyper-parameter {k}: {v!r} -> {params_after[k]!r}")
    case.model = model


def _apply_computes_nothing(case: _Case) -> None:
    """``apply`` builds a lazy result: no dask compute."""
    counter = _Counter()
    with counter:
        out = case.fitted().apply(case.tba, **case.apply_kwargs)
    if counter.count:
        raise AssertionError(f"{case.cls.__name__}.apply ran {counter.count} dask computes; it must be lazy")
    case.expected = _values(out)


def _clone_equals(case: _Case) -> None:
    """Same parameters, unfitted, and fitting the clone gives the same result."""
    model = case.fitted()
    twin = clone(model)
    if twin is model or twin.is_fitted:
        raise AssertionError(f"clone({case.cls.__name__}) must be a new, unfitted estimator")
    # a fitted repr ends with what was learned (" [fitted: ...]"): compare the parameters only
    unfitted = re.sub(r" \[fitted[^\]]*\]", "", repr(model))
    if repr(twin) != unfitted or twin.to_dict()["params"] != model.to_dict()["params"]:
        raise AssertionError(f"clone({case.cls.__name__}) has other parameters: {twin!r} vs {model!r}")
    refit = twin.fit(case.ref, case.tba, **case.fit_kwargs)
    _same(_learned_numbers(refit), _learned_numbers(model), case.atol, "refit of the clone")


def _fit_does_not_touch_inputs(case: _Case) -> None:
    """The inputs' values are the same after a fit."""
    ref_values, tba_values = _values(case.ref), _values(case.tba)
    case.factory().fit(case.ref, case.tba, **case.fit_kwargs)
    _same(_values(case.ref), ref_values, 0.0, "ref after fit")
    _same(_values(case.tba), tba_values, 0.0, "tba after fit")


def _chunk_and_scheduler_independent(case: _Case) -> None:
    """Numpy input and each chunking, under two schedulers, give the same learned values and output."""
    def run(r: xr.DataArray, t: xr.DataArray) -> tuple[np.ndarray, np.ndarray]:
        m = case.factory().fit(r, t, **_rechunk_kwargs(case.fit_kwargs, r))
        return _learned_numbers(m), _values(m.apply(t, **_rechunk_kwargs(case.apply_kwargs, t)))

    ref, tba = case.ref, case.tba
    base_learned, base_out = run(ref.copy(data=ref.values), tba.copy(data=tba.values))
    for chunks in case.chunkings:
        for scheduler in ("threads", "synchronous"):
            with dask.config.set(scheduler=scheduler):
                got_learned, got_out = run(ref.chunk(chunks), tba.chunk(chunks))
            _same(got_learned, base_learned, case.atol, f"learned values, chunks={chunks}, scheduler={scheduler}")
            _same(got_out, base_out, max(case.atol, 1e-5), f"output, chunks={chunks}, scheduler={scheduler}")


def _json_round_trip(case: _Case) -> None:
    """``Coreg.from_json(model.to_json())`` is the same class and applies the same."""
    model = case.fitted()
    again = Coreg.from_json(model.to_json())
    if type(again) is not type(model):
        raise AssertionError(f"from_json gave a {type(again).__name__}, not a {case.cls.__name__}")
    assert case.expected is not None
    _same(_values(again.apply(case.tba, **case.apply_kwargs)), case.expected, 0.0,
          "output after a JSON round trip")


def _resample_false_is_honoured(case: _Case) -> None:
    """Exact data on a moved grid, the same as ``apply()`` (nothing resampled), or a clear error."""
    name = case.cls.__name__
    try:
        exact = case.fitted().apply(case.tba, resample=False, **case.apply_kwargs)
    except InputError as exc:
        if "resample" not in str(exc):
            raise AssertionError(f"{name}.apply(resample=False) raised an error that does not say why: {exc}") from exc
    except XdemError as exc:
        raise AssertionError(f"{name}.apply(resample=False) raised {type(exc).__name__}: {exc}") from exc
    else:
        if exact.rio.transform() == case.tba.rio.transform():
            assert case.expected is not None
            _same(_values(exact), case.expected, 0.0, "apply(resample=False) on the same grid must equal apply()")


#: The checks by name, in the order of :data:`CHECKS` (each may use what the earlier ones set).
_CHECK_FUNCTIONS: dict[str, Callable[[_Case], None]] = {
    "constructor_only_stores": _constructor_only_stores,
    "fit_returns_self": _fit_returns_self,
    "apply_computes_nothing": _apply_computes_nothing,
    "clone_equals": _clone_equals,
    "fit_does_not_touch_inputs": _fit_does_not_touch_inputs,
    "chunk_and_scheduler_independent": _chunk_and_scheduler_independent,
    "json_round_trip": _json_round_trip,
    "resample_false_is_honoured": _resample_false_is_honoured,
}


def _plain_params(model: Coreg) -> dict[str, Any]:
    """Deep hyper-parameters that are values (not functions, not nested estimators: those
    appear through their own ``step<i>__`` parameters)."""
    def nested(v: Any) -> bool:
        return isinstance(v, Coreg) or (isinstance(v, (list, tuple)) and any(isinstance(x, Coreg) for x in v))

    return {k: v for k, v in model.get_params(deep=True).items() if not callable(v) and not nested(v)}


def _equal_param(a: Any, b: Any) -> bool:
    try:
        return bool(np.all(np.asarray(a == b))) if not isinstance(a, (list, dict)) else a == b
    except (TypeError, ValueError):
        return a is b


def _rechunk_kwargs(kwargs: Mapping[str, Any], like: xr.DataArray) -> dict[str, Any]:
    """``bias_vars`` (if any) with the chunks (or numpy backing) of ``like``."""
    out = dict(kwargs)
    if "bias_vars" in out:
        like_chunks = like.chunks if hasattr(like.data, "chunks") else None  # None: numpy-backed
        out["bias_vars"] = {
            k: (v.copy(data=np.asarray(v.values)) if like_chunks is None else v.chunk(dict(zip(like.dims, like_chunks))))
            for k, v in out["bias_vars"].items()
        }
    return out
