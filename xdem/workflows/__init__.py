"""Library workflows: whole jobs of the ``xdem`` commands as typed Python calls.

- :func:`run_coreg` (:class:`CoregRequest` -> :class:`CoregResult`): what ``xdem coreg`` does:
  open, fit, apply, write the aligned COG, statistics, verdict, report and the JSON document.

Layering: ``xdem.cli`` -> ``xdem.workflows`` -> ``xdem.coreg`` -> ``xdem.io``; nothing here
imports the command line.

Examples
--------
>>> from xdem.workflows import CoregRequest, run_coreg
>>> sorted(f for f in CoregRequest.__dataclass_fields__)[:3]
['chunks', 'coreg', 'dh_out']
"""

from xdem.workflows.coreg import CheckedPaths, CoregRequest, CoregResult, check_coreg_paths, current_scheduler, run_coreg

__all__ = ["CoregRequest", "CoregResult", "CheckedPaths", "check_coreg_paths", "current_scheduler", "run_coreg"]
