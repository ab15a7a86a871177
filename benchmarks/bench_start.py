"""Start-up cost of the command line and of ``import xdem``: wall time and peak RSS.

    python benchmarks/bench_start.py [--repeat 5] [--repo PATH] [--no-doc]

Each command runs ``--repeat`` times in a fresh process (the median wall time and the median
peak RSS of the process, from ``wait4``, are reported): ``xdem --help``, ``xdem --version``, a
usage error (``xdem nosuchcommand``), ``xdem coreg`` without its arguments, ``xdem coreg --nosuch`` and
``xdem info`` without its argument (usage errors of a sub-command, which import that
sub-command's light module only), ``import xdem`` and ``import xdem`` followed by
the first use of ``xdem.open_dem`` (the whole I/O stack). ``--repo`` measures another checkout
of xdem (put first on ``PYTHONPATH``), e.g. the state before a change. The target is under 1 s
for the first three and the usage errors of sub-commands (issue 24); timings are never asserted in the test suite.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _measure import REPO, machine_description, update_doc_section

#: name -> arguments of ``python``, the command line is ``python -m xdem ...``.
CASES: dict[str, list[str]] = {
    "xdem --help": ["-m", "xdem", "--help"],
    "xdem --version": ["-m", "xdem", "--version"],
    "xdem nosuchcommand": ["-m", "xdem", "nosuchcommand"],
    "xdem coreg (no arguments)": ["-m", "xdem", "coreg"],
    "xdem coreg --nosuch": ["-m", "xdem", "coreg", "--nosuch"],
    "xdem info (no argument)": ["-m", "xdem", "info"],
    "import xdem": ["-c", "import xdem"],
    "import xdem; xdem.open_dem": ["-c", "import xdem; xdem.open_dem"],
}


def run_once(args: list[str], *, repo: Path) -> tuple[float, float, int]:
    """Wall seconds, peak RSS (MB) and exit code of ``python ARGS`` run from ``repo``."""
    env = {**os.environ, "PYTHONPATH": str(repo)}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *args], cwd=repo, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024, proc.returncode


def bench(*, repeat: int, repo: Path) -> list[dict[str, object]]:
    """One row per case of :data:`CASES`: median wall time and peak RSS over ``repeat`` runs."""
    rows: list[dict[str, object]] = []
    for name, args in CASES.items():
        runs = [run_once(args, repo=repo) for _ in range(repeat)]
        rows.append({"case": name, "wall_s": statistics.median(r[0] for r in runs),
                     "rss_mb": statistics.median(r[1] for r in runs), "exit": runs[0][2]})
        print(f"{name:<30} {rows[-1]['wall_s']:6.2f} s {rows[-1]['rss_mb']:6.0f} MB  exit {rows[-1]['exit']}",
              flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5, help="runs per case (the median is reported)")
    p.add_argument("--repo", type=Path, default=REPO, help="checkout of xdem to measure (default: this one)")
    p.add_argument("--no-doc", action="store_true")
    a = p.parse_args(sys.argv[1:] if argv is None else argv)
    rows = bench(repeat=a.repeat, repo=a.repo.resolve())
    if a.no_doc:
        return
    table = "\n".join(f"| `{r['case']}` | {r['wall_s']:.2f} | {r['rss_mb']:.0f} | {r['exit']} |" for r in rows)
    update_doc_section("start", (
        f"`python benchmarks/bench_start.py`: median of {a.repeat} fresh processes; {machine_description()}.\n\n"
        "| command | wall (s) | peak RSS (MB) | exit code |\n|---|---|---|---|\n" + table + "\n"))


if __name__ == "__main__":
    main()
