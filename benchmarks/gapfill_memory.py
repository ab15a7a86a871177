"""Peak memory of gap filling (``dDEM.interpolate``) at growing DEM sizes: flat is the goal.

For each size (default 2000^2 and 4000^2; ``--sizes 2000 4000 10000``), the synthetic glacier set
(:mod:`xdem.examples.glaciers`, 20 m pixels, three glaciers per 8 km tile) is written once to
``benchmarks/_cache/gapfill_<size>/`` (the dDEM with voids and the reference DEM as COGs, the
outlines as a GeoPackage). Each method then runs in its own subprocess, measured by
:func:`_measure.measure` (wall time, CPU, peak RSS summed over the process tree, sampled every
0.2 s): open both COGs lazily (1024-px chunks), ``dDEM.interpolate(method, reference, outlines)``
and one pass reducing the filled dDEM to its sum (nothing held but chunks and the per-glacier
tables). The process calls ``xdem.cli.bound_process_memory()`` first, as the ``xdem`` command does.

The table is printed with the 1-minute load average (the machine is shared) and written to
``docs/gapfill.md`` (section ``Benchmark``) unless ``--no-doc``.

Run: ``python benchmarks/gapfill_memory.py [--sizes 2000 4000 10000] [--no-doc]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import CACHE_DIR, REPO, fmt_bytes, machine_description, measure, update_doc_section  # noqa: E402

METHODS = ("idw", "local_hypsometric", "regional_hypsometric", "norm_regional_hypsometric")
WRITE = """
import sys, xdem.cli
xdem.cli.bound_process_memory()
from pathlib import Path
from xdem.examples.glaciers import glacier_set
from xdem.io.cog import write_cog
size, folder = int(sys.argv[1]), Path(sys.argv[2])
g = glacier_set((size, size), chunks=1024)
write_cog(g.ddem, folder / "ddem.tif", overwrite=True)
write_cog(g.ref, folder / "ref.tif", overwrite=True)
g.outlines.to_file(folder / "outlines.gpkg", driver="GPKG")
"""
RUN = """
import json, sys, time, xdem, xdem.cli
xdem.cli.bound_process_memory()
import dask.array as da
from xdem.examples.glaciers import END, START
method, folder = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
ddem = xdem.dDEM(xdem.open_dem(folder + "/ddem.tif", chunks=1024), start_time=START, end_time=END)
filled = ddem.interpolate(method, reference_elevation=folder + "/ref.tif", mask=folder + "/outlines.gpkg")
total, voids = da.compute(da.nansum(filled), da.isnan(filled).sum())
print(json.dumps({"seconds": time.perf_counter() - t0, "sum": float(total), "unfilled": int(voids)}))
"""


def _inputs(size: int) -> Path:
    folder = CACHE_DIR / f"gapfill_{size}"
    if not (folder / "outlines.gpkg").exists():
        folder.mkdir(parents=True, exist_ok=True)
        r = measure([sys.executable, "-c", WRITE, str(size), str(folder)], env={"PYTHONPATH": str(REPO)})
        if r["returncode"] != 0:
            raise SystemExit(f"writing the glacier set failed:\n{r['stderr'][-3000:]}")
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 4000])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--no-doc", action="store_true")
    args = parser.parse_args()
    rows = ["| size | method | wall (s) | CPU (s) | peak RSS | unfilled pixels | load (1 min) |",
            "|---|---|---|---|---|---|---|"]
    for size in args.sizes:
        folder = _inputs(size)
        for method in args.methods:
            r = measure([sys.executable, "-c", RUN, method, str(folder)], env={"PYTHONPATH": str(REPO)})
            if r["returncode"] != 0:
                raise SystemExit(f"{method} at {size}^2 failed:\n{r['stderr'][-3000:]}")
            out = json.loads(r["stdout"].strip().splitlines()[-1])
            row = (f"| {size}^2 | {method} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {fmt_bytes(r['peak_rss_bytes'])} "
                   f"| {out['unfilled']} | {r['load_avg'][0]:.2f} -> {r['load_avg'][1]:.2f} |")
            print(row, flush=True)
            rows.append(row)
    body = "\n".join([f"Measured on: {machine_description()} (`{os.uname().nodename}` shared by other jobs).", "",
                      "Command: `python benchmarks/gapfill_memory.py --sizes " + " ".join(map(str, args.sizes)) + "`",
                      "", *rows])
    print(body)
    if not args.no_doc:
        update_doc_section("Benchmark", body, doc=REPO / "docs" / "gapfill.md")


if __name__ == "__main__":
    main()
