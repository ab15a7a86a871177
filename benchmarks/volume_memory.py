"""Benchmark ``xdem dh``: peak memory (all processes) at growing DEM sizes; flat is the goal.

For each size (default 2000^2 and 4000^2; add 10000 with ``--sizes 2000 4000 10000``), the
synthetic glacier set (:func:`xdem.examples.glaciers.write_glacier_set`, 20 m pixels, 3
glaciers per 8 km tile) is written once under ``benchmarks/_cache/glaciers_<n>`` and
``xdem dh REF START --later ref --outlines OUTLINES -o changes.gpkg`` runs in a subprocess
measured by :func:`_measure.measure` (wall time, CPU seconds, peak RSS summed over the process
tree every 0.2 s). The machine is shared: the 1-minute load average and ``uptime`` are printed.

Run: ``python benchmarks/volume_memory.py [--sizes 2000 4000 10000] [--chunks 1024]``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import CACHE_DIR, REPO, fmt_bytes, measure  # noqa: E402


def glacier_files(n: int) -> dict[str, Path]:
    """The glacier set of ``n x n`` pixels, written once (cached)."""
    folder = CACHE_DIR / f"glaciers_{n}"
    names = {"ref": "glaciers_ref.tif", "start": "glaciers_start.tif", "outlines": "glaciers_outlines.gpkg"}
    paths = {k: folder / v for k, v in names.items()}
    if not all(p.exists() for p in paths.values()):
        code = ("import sys; from xdem.examples.glaciers import write_glacier_set; "
                f"write_glacier_set(sys.argv[1], shape=({n}, {n}))")
        subprocess.run([sys.executable, "-c", code, str(folder)], check=True, env={"PYTHONPATH": str(REPO)},
                       cwd=REPO)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 4000])
    parser.add_argument("--chunks", type=int, default=None, help="--chunks of xdem dh (default: auto)")
    args = parser.parse_args()
    rows = []
    for n in args.sizes:
        files = glacier_files(n)
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "xdem", "dh", str(files["ref"]), str(files["start"]), "--later", "ref",
                   "--outlines", str(files["outlines"]), "-o", str(Path(tmp) / "changes.gpkg")]
            if args.chunks:
                cmd += ["--chunks", str(args.chunks)]
            res = measure(cmd, env={"PYTHONPATH": str(REPO)})
        if res["returncode"] != 0:
            sys.exit(f"xdem dh failed at {n}^2: {res['stderr'].strip()}")
        rows.append((n, res))
        print(f"{n}^2: wall {res['wall_s']:.1f} s, cpu {res['cpu_s']:.1f} s, peak RSS {fmt_bytes(res['peak_rss_bytes'])}, "
              f"load {res['load_avg']}", flush=True)
    print("\n| size | wall (s) | CPU (s) | peak RSS (all processes) | load (1 min, before/after) |")
    print("| --- | --- | --- | --- | --- |")
    for n, res in rows:
        print(f"| {n}^2 | {res['wall_s']:.1f} | {res['cpu_s']:.1f} | {fmt_bytes(res['peak_rss_bytes'])} | "
              f"{res['load_avg']} |")
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
