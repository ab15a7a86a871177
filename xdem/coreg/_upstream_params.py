"""Upstream xdem 0.2.3's less common constructor parameters that ours take only at upstream's
default value (``None`` also means that default): any other value is one
:class:`~xdem.errors.InputError` at ``fit``, never silently ignored.

Checked in upstream's ``xdem/coreg/affine.py``, ``biascorr.py`` at v0.2.3: ``fit_optimizer``
defaults to ``scipy.optimize.curve_fit``, ``fit_minimizer`` to ``scipy.optimize.least_squares``
(ICP, LZD) or ``scipy.optimize.minimize`` (DhMinimize), ``fit_loss_func`` to ``"linear"`` (ICP,
LZD) or ``nmad`` (DhMinimize), NuthKaab's ``bin_before_fit=True`` with ``bin_statistic=np.nanmedian``,
ICP's ``picky=True`` and ``only_translation=False``, DirectionalBias's ``fit_func="nfreq_sumsin"``,
Deramp's ``fit_or_bin="fit"`` with ``fit_func=polynomial_2d``. Ours are closed forms or their own
solvers, equivalent at those defaults; callables are compared by name.

Examples
--------
>>> import xdem
>>> check_upstream_fixed(xdem.coreg.NuthKaab(bin_before_fit=True))
>>> check_upstream_fixed(xdem.coreg.NuthKaab(bin_before_fit=False))
Traceback (most recent call last):
...
xdem.errors.InputError: NuthKaab(bin_before_fit=False) is upstream's and not available here (ours fits the binned \
slopes and aspects only); leave bin_before_fit at its default True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdem.errors import InputError

if TYPE_CHECKING:
    from xdem.coreg.base import Coreg

__all__ = ["UPSTREAM_FIXED", "check_upstream_fixed"]

_CURVE_FIT = (("curve_fit",), "ours fits with its own least squares, which is scipy.optimize.curve_fit's solution")
_LSQ = (("least_squares",), "ours solves its linear least squares in closed form")
_LINEAR = (("linear",), "ours minimises the plain sum of squares")

#: Class name -> parameter -> (accepted values or names, why the others cannot be honoured).
UPSTREAM_FIXED: dict[str, dict[str, tuple[tuple[object, ...], str]]] = {
    "NuthKaab": {"bin_before_fit": ((True,), "ours fits the binned slopes and aspects only"),
                 "fit_optimizer": _CURVE_FIT,
                 "bin_statistic": (("nanmedian", "median"), "ours takes the median of each aspect bin")},
    "ICP": {"picky": ((True,), "ours always rejects pairs further than rejection_factor NMADs: set that instead"),
            "only_translation": ((False,), "ours always fits rotations: use NuthKaab or LZD(only_translation=True)"),
            "fit_minimizer": _LSQ, "fit_loss_func": _LINEAR},
    "LZD": {"fit_minimizer": _LSQ, "fit_loss_func": _LINEAR},
    "DhMinimize": {"fit_minimizer": (("minimize",), "ours runs scipy.optimize.minimize: choose its method= instead"),
                   "fit_loss_func": (("nmad",), "give the function as spread_func= instead")},
    "BiasCorr": {"fit_optimizer": _CURVE_FIT},
    "TerrainBias": {"fit_optimizer": _CURVE_FIT},
    "DirectionalBias": {"fit_optimizer": _CURVE_FIT,
                        "fit_func": (("nfreq_sumsin",), "ours fits a sum of nb_freq sines only")},
    "Deramp": {"fit_or_bin": (("fit",), "ours fits the polynomial on the sampled values only"),
               "fit_func": (("polynomial_2d",), "ours fits a 2-D polynomial of poly_order only"),
               "fit_optimizer": _CURVE_FIT},
}


def _accepted(value: object, accepted: tuple[object, ...]) -> bool:
    name = getattr(value, "__name__", value)
    return any(value is a or (type(name) is type(a) and name == a) for a in accepted)


def check_upstream_fixed(coreg: Coreg) -> None:
    """Raise one :class:`~xdem.errors.InputError` line for an upstream parameter of ``coreg``
    set to a value that ours cannot honour."""
    for name, (accepted, why) in UPSTREAM_FIXED.get(type(coreg).__name__, {}).items():
        value = getattr(coreg, name, None)
        if value is not None and not _accepted(value, accepted):
            shown = getattr(value, "__name__", None) or repr(value)
            raise InputError(f"{type(coreg).__name__}({name}={shown}) is upstream's and not available here ({why}); "
                             f"leave {name} at its default {accepted[0]}")
