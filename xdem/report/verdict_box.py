"""The report's verdict box: its status line and the table of the verdict's checks
(:mod:`xdem.verdict_checks`), one row per check with ``data-key`` cells."""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdem.report.html import cell, label_cell, table

if TYPE_CHECKING:  # annotations only
    from xdem.typing import JSONDict

__all__ = ["STATUS_HEAD", "flat_steps", "checks_table"]

#: Verdict status -> (colour, words of the box's first line).
STATUS_HEAD = {"ok": ("#1e7d32", "OK: the coregistration did its job on stable terrain"),
               "not improved": ("#b26a00", "NOT IMPROVED: the correction did not improve dh"),
               "not ok": ("#b3261e", "NOT OK")}


def flat_steps(steps: tuple[list[str], list[JSONDict]] | None) -> list[JSONDict]:
    """The steps as flat records (``method``, learned values without their trailing ``_``,
    ``params``), from a summary's ``steps`` or the fitted object's documents (``learned``).

    >>> flat_steps((["coreg.steps.0"], [{"method": "NuthKaab", "learned": {"converged_": True}, "params": {}}]))
    [{'converged': True, 'method': 'NuthKaab', 'params': {}}]
    """
    out = []
    for d in steps[1] if steps else []:
        learned = d.get("learned")
        flat = {k[:-1] if k.endswith("_") else k: v for k, v in (learned if isinstance(learned, dict) else d).items()}
        out.append(flat | {"method": str(d.get("method", d.get("name", "step"))), "params": d.get("params", {})})
    return out


def checks_table(verdict: JSONDict, prefix: str) -> str:
    """One row per check: what it measures, value, rule, threshold, unit, result, hint (the
    value, threshold and hint cells carry ``data-key="<prefix>.checks.<i>.<field>"``)."""
    rows = []
    for i, c in enumerate(verdict.get("checks") or []):
        key = f"{prefix}.checks.{i}"
        result = {True: "pass", False: "FAIL", None: "not evaluated"}[c.get("passed")]
        rows.append([label_cell(f"{c['name']}: {c['label']}"), cell(c.get("value"), f"{key}.value"),
                     cell(c.get("passes_if", "<="), cls="l"),
                     cell(c.get("threshold"), f"{key}.threshold"), cell(c.get("unit"), cls="l"),
                     cell(result, cls="l"), cell(c.get("hint"), f"{key}.hint", cls="l")])
    return table(["Check", "Value", "Passes if", "Threshold", "Unit", "Result", "Hint"], rows) if rows else ""
