"""Self-contained HTML report of a coregistration, computed out of core.

:func:`write_report` writes ONE HTML file (inline CSS, images embedded as base64 PNG, no
script, no external resource) showing maps and histograms of the elevation differences
before and after coregistration, the Nuth & Kääb diagnostic, the fitted parameters,
statistics by slope class and a processing summary.

Examples
--------
>>> import tempfile, os, xdem.coreg, xdem.examples
>>> from xdem.report import write_report
>>> ref, tba, _ = xdem.examples.example_pair()
>>> nk = xdem.coreg.NuthKaab().fit(ref, tba)
>>> path = write_report(os.path.join(tempfile.mkdtemp(), "r.html"), ref=ref, tba=tba,
...                     aligned=nk.apply(tba), coreg=nk)
>>> path.suffix
'.html'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the name as the type checker sees it; at run time: __getattr__
    from xdem.report.write import write_report

__all__ = ["write_report"]


def __getattr__(name: str) -> object:
    # lazy on purpose: the points report (xdem.report.points) and the probe of `xdem coreg --report`
    # import this package without the DEM report's stack (terrain, spatialstats, matplotlib)
    if name == "write_report":
        value = importlib.import_module("xdem.report.write").write_report
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
