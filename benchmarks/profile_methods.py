"""Where each coregistration method spends its CPU: one ``xdem coreg`` run per method, timed by phase.

Each method runs in a fresh subprocess that imports the CLI (timed: the imports are part of
every run), then runs ``xdem coreg REF TBA -o OUT --method <m> --quiet`` in process with the
stages of :mod:`xdem.workflows.coreg` wrapped to record the process's CPU seconds (all threads:
``time.process_time``) and wall seconds spent in each: opening and checking the inputs, the fit,
the writing pass (reading, resampling, the sampled statistics and the raw temporary file), GDAL's
COG copy of the result (compression and overviews), the statistics and verdict. The phases add up
to the run; what is left is the CLI's own work.

Input: the pair of ``bench_methods.py`` (5 m fractal terrain, a known shift), at ``--size``.
Output: a table on stdout, and with ``--doc`` the section ``profile`` of ``docs/performance.md``.

Run: ``python benchmarks/profile_methods.py [--size 8000] [--method nuthkaab lzd ...] [--doc]``.
For the functions inside a phase, use py-spy on the same command (``py-spy record -n -f raw``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import CACHE_DIR, machine_description, update_doc_section  # noqa: E402
from bench_methods import METHODS, methods_pair  # noqa: E402

#: The stages of :mod:`xdem.workflows.coreg` that are timed, and their labels.
STAGES = {"open_inputs": "open + checks", "fit": "fit", "write": "write pass", "measure": "stats + verdict",
          "document": "document"}

CHILD = r"""
import json, os, sys, time
t0, w0 = time.process_time(), time.perf_counter()
from click.testing import CliRunner
import xdem.cli.coreg  # noqa: F401 (the imports of a run)
from xdem.cli import main as cli
import xdem.workflows.coreg as W
import xdem.io.cog as COG
phases = {"imports": [time.process_time() - t0, time.perf_counter() - w0]}
def timed(mod, name, label):
    fn = getattr(mod, name)
    def wrapper(*a, **k):
        c, w = time.process_time(), time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            p = phases.setdefault(label, [0.0, 0.0])
            p[0] += time.process_time() - c
            p[1] += time.perf_counter() - w
    setattr(mod, name, wrapper)
for name, label in json.loads(sys.argv[1]).items():
    timed(W, name, label)
timed(COG, "copy_with_progress", "GDAL COG copy")
c, w = time.process_time(), time.perf_counter()
r = CliRunner().invoke(cli, ["coreg", *sys.argv[2:], "--quiet"], catch_exceptions=False)
phases["run"] = [time.process_time() - c, time.perf_counter() - w]
print(json.dumps({"exit": r.exit_code, "phases": phases}))
"""


def profile(method: str, pair: dict, work: Path) -> dict:
    out = work / "out.tif"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, "-c", CHILD, json.dumps(STAGES), pair["ref"], pair["tba"], "-o", str(out), "--method", method]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode:
        return {"exit": proc.returncode, "error": proc.stderr[-400:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def format_table(size: int, rows: dict[str, dict]) -> str:
    labels = ["imports", *STAGES.values(), "GDAL COG copy", "run"]
    head = "| method | " + " | ".join(labels) + " |"
    lines = [f"CPU seconds (wall seconds) per phase at {size}^2; `write pass` includes `GDAL COG copy`.", "",
             head, "|---|" + "---:|" * len(labels)]
    for m, r in rows.items():
        if r.get("exit"):
            lines.append(f"| `{m}` | failed: {r.get('error', '')[-100:]!r} |")
            continue
        ph = r["phases"]
        cells = [f"{ph[k][0]:.1f} ({ph[k][1]:.1f})" if k in ph else "-" for k in labels]
        lines.append(f"| `{m}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", type=int, default=8000)
    p.add_argument("--method", nargs="+", default=METHODS)
    p.add_argument("--doc", action="store_true", help="write the table to docs/performance.md (section profile)")
    a = p.parse_args(argv)
    pair = methods_pair(a.size)
    rows = {}
    with tempfile.TemporaryDirectory(dir=CACHE_DIR) as tmp:
        for m in a.method:
            rows[m] = profile(m, pair, Path(tmp))
            print(m, json.dumps(rows[m]), flush=True)
    table = format_table(a.size, rows)
    print(table)
    if a.doc:
        update_doc_section("profile", "`python benchmarks/profile_methods.py` (in process, one run per method).\n\n"
                           f"{machine_description()}\n\n{table}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
