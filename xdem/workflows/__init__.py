"""Library workflows: whole jobs of the ``xdem`` commands as typed Python calls.

- :func:`run_coreg` (:class:`CoregRequest` -> :class:`CoregResult`): what ``xdem coreg`` does,
  in stages (:mod:`xdem.workflows.coreg`): check, open each input once, fit, write the aligned
  COG, statistics, verdict, report and the JSON document; a DEM pair or points on one side.

Layering: ``xdem.cli`` -> ``xdem.workflows`` -> ``xdem.coreg`` -> ``xdem.io``; nothing here
imports the command line. The package is lazy (PEP 562): its names import
:mod:`xdem.workflows.coreg` (the whole coregistration stack; the types are defined in
:mod:`xdem.workflows.request`) when first asked for, so a light
sub-module (:mod:`xdem.workflows.filters`, :mod:`xdem.workflows._summary`) does not.

Examples
--------
>>> from xdem.workflows import CoregRequest, run_coreg
>>> sorted(f for f in CoregRequest.__dataclass_fields__)[:3]
['chunks', 'coreg', 'dh_out']
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the names as the type checker sees them; at run time: __getattr__
    from xdem.workflows.coreg import CheckedPaths, CoregRequest, CoregResult, check_coreg_paths, current_scheduler, run_coreg

__all__ = ["CoregRequest", "CoregResult", "CheckedPaths", "check_coreg_paths", "current_scheduler", "run_coreg"]


def __getattr__(name: str) -> object:
    if name in __all__:
        # lazy (PEP 562): `import xdem.workflows` and the command line start without the run's stack
        value = getattr(importlib.import_module("xdem.workflows.coreg"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
