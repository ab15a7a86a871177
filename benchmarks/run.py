"""Run every benchmark in sequence (the ``make bench`` entry point).

Each ``benchmarks/bench_*.py`` runs in its own process with its default sizes, or with small
sizes under ``--quick`` (a check that the benchmarks run, in a few minutes; the docs are then left
alone, since those numbers are not the documented ones). Results go to ``docs/performance.md``
(and ``docs/terrain.md``), each script replacing only its own ``## section``; ``--no-doc`` leaves
the docs alone.

Run: ``python benchmarks/run.py [--quick] [--only coreg write_cog] [--no-doc]``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
#: ``--quick`` arguments per benchmark name (``bench_<name>.py``); others get ``--sizes 2000``.
QUICK = {
    "coreg": ["--sizes", "4000"],
    "write_cog": ["--sizes", "2000", "--repeat", "1"],
    "terrain": ["--sizes", "2000"],
    "rigid": ["--sizes", "2000"],
    "blockwise": ["--sizes", "4000"],
    "start": ["--repeat", "3"],
}


def scripts(only: list[str] | None = None) -> list[Path]:
    """The benchmark scripts, sorted by name (optionally only those named)."""
    found = sorted(BENCH_DIR.glob("bench_*.py"))
    if only:
        names = {n.removeprefix("bench_").removesuffix(".py") for n in only}
        unknown = names - {p.stem.removeprefix("bench_") for p in found}
        if unknown:
            raise SystemExit(f"unknown benchmark(s) {sorted(unknown)}; known: "
                             f"{', '.join(p.stem.removeprefix('bench_') for p in found)}")
        found = [p for p in found if p.stem.removeprefix("bench_") in names]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only (a few minutes), docs untouched")
    parser.add_argument("--only", nargs="+", default=None, help="benchmark names, e.g. coreg write_cog")
    parser.add_argument("--no-doc", action="store_true", help="do not update the docs")
    args = parser.parse_args(argv)
    failed = []
    for path in scripts(args.only):
        name = path.stem.removeprefix("bench_")
        cmd = [sys.executable, str(path)]
        if args.quick:
            cmd += QUICK.get(name, ["--sizes", "2000"])
        if args.no_doc or args.quick:
            cmd.append("--no-doc")
        print(f"=== {name}: {' '.join(cmd[1:])}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call(cmd)
        print(f"=== {name}: {'ok' if rc == 0 else f'FAILED (exit {rc})'} in {time.perf_counter() - t0:.0f} s", flush=True)
        if rc != 0:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
