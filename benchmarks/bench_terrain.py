"""Benchmark ``xdem terrain``: slope + aspect + hillshade of a large DEM written as COGs.

For each size (default 8000^2; 20000^2 with ``--sizes 20000``), on the synthetic fractal DEM
cached under ``benchmarks/_cache`` (:func:`_measure.cached_pair`, 2 m, float32, deflate COG),
each step runs in its own subprocess measured by :func:`_measure.measure` (wall time, peak RSS
summed over the process tree, sampled every 0.2 s):

* **read**: read every block of the DEM once (``open_dem(dem).sum().compute()``): the floor;
* **compute**: slope, aspect and hillshade in ONE ``map_overlap`` pass, reduced to sums
  (``dask.compute`` of three sums; nothing written): the cost of the kernels;
* **floor**: three GDAL COG copies of the DEM (``rasterio.shutil.copy(driver="COG")`` with the
  output options of ``xdem.write_cog``: DEFLATE, PREDICTOR=3, 512 px blocks, all CPUs, overviews
  recomputed with ``OVERVIEWS=IGNORE_EXISTING``): the least work to write three COGs of that size;
* **cogs**: ``xdem terrain DEM -o DIR -a slope,aspect,hillshade``: three COGs written out of
  core (``xdem.io.cog.write_cogs``: one pass over the DEM stores the three temporary GTiffs, then
  one GDAL COG copy each).

Wall time, CPU seconds (user + system of the process tree) and peak RSS are reported; the
machine is shared, so the 1-minute load average is recorded too.

The two Python steps call ``xdem.cli.bound_process_memory()`` first, as the ``xdem`` command
does (GDAL's default block cache is 5 % of the RAM, 1.2 GB here, and would dominate their peak).
The DEM is read once beforehand so every step finds it in the page cache. The table is printed
and written to ``docs/terrain.md`` (section ``Benchmark``) unless ``--no-doc``.

Run: ``python benchmarks/bench_terrain.py [--sizes 8000 20000] [--chunks auto] [--no-doc]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import CACHE_DIR, REPO, cached_pair, fmt_bytes, machine_description, measure, update_doc_section  # noqa: E402

ATTRIBUTES = ("slope", "aspect", "hillshade")
READ = """
import json, sys, time, xdem, xdem.cli
xdem.cli.bound_process_memory()  # the xdem command's settings: GDAL cache 64 MB, glibc unmaps big frees
t0 = time.perf_counter()
dem = xdem.open_dem(sys.argv[1], chunks=sys.argv[2] if sys.argv[2] == "auto" else int(sys.argv[2]))
total = float(dem.sum().compute())
print(json.dumps({"seconds": time.perf_counter() - t0, "sum": total, "chunks": [c[0] for c in dem.chunks]}))
"""
COMPUTE = """
import json, sys, time, dask, xdem, xdem.cli
xdem.cli.bound_process_memory()
t0 = time.perf_counter()
dem = xdem.open_dem(sys.argv[1], chunks=sys.argv[2] if sys.argv[2] == "auto" else int(sys.argv[2]))
outs = xdem.terrain.get_terrain_attribute(dem, ["slope", "aspect", "hillshade"])
sums = dask.compute(*(o.sum() for o in outs))
print(json.dumps({"seconds": time.perf_counter() - t0, "sums": [float(s) for s in sums]}))
"""

FLOOR = """
import json, sys, time, rasterio, rasterio.shutil
from xdem.io.cog import GDAL_CACHE_BYTES
t0 = time.perf_counter()
with rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_BYTES, GDAL_NUM_THREADS="ALL_CPUS"):
    for i in range(int(sys.argv[3])):
        rasterio.shutil.copy(sys.argv[1], f"{sys.argv[2]}/floor{i}.tif", driver="COG", BLOCKSIZE=512, COMPRESS="DEFLATE",
                             PREDICTOR=3, OVERVIEWS="IGNORE_EXISTING", BIGTIFF="IF_SAFER", NUM_THREADS="ALL_CPUS")
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""


def _warm(path: str) -> None:
    with open(path, "rb") as f:
        while f.read(64 * 2**20):
            pass


def _run(name: str, cmd: list[str]) -> dict:
    r = measure(cmd)
    if r["returncode"] != 0:
        raise SystemExit(f"step {name} failed:\n{r['stderr'][-3000:]}")
    return r


def bench(sizes: list[int], *, chunks: str = "auto", write_doc: bool = True,
          results_name: str = "terrain_results.json") -> list[dict]:
    """Run the three steps for every size; return one row per size."""
    rows = []
    out_dir = CACHE_DIR / "terrain_out"
    for size in sizes:
        t0 = time.perf_counter()
        src = cached_pair(size)["ref"]
        print(f"[{size}^2] input ready in {time.perf_counter() - t0:.0f} s: {src}", flush=True)
        _warm(src)
        load_start = os.getloadavg()[0]
        res = {
            "read": _run("read", [sys.executable, "-c", READ, src, chunks]),
            "compute": _run("compute", [sys.executable, "-c", COMPUTE, src, chunks]),
        }
        shutil.rmtree(out_dir, ignore_errors=True)
        out_dir.mkdir(parents=True)
        res["floor"] = _run("floor", [sys.executable, "-c", FLOOR, src, str(out_dir), str(len(ATTRIBUTES))])
        shutil.rmtree(out_dir, ignore_errors=True)
        cli = [sys.executable, "-m", "xdem", "terrain", src, "-o", str(out_dir), "-a", ",".join(ATTRIBUTES), "--overwrite"]
        if chunks != "auto":
            cli += ["--chunks", chunks]
        res["cogs"] = _run("cogs", cli)
        written = sorted(p.name for p in out_dir.glob("*.tif"))
        if written != sorted(f"{a}.tif" for a in ATTRIBUTES):
            raise SystemExit(f"xdem terrain wrote {written}")
        out_bytes = sum(p.stat().st_size for p in out_dir.glob("*.tif"))
        shutil.rmtree(out_dir, ignore_errors=True)
        row = {
            "size": size,
            "chunks": chunks,
            "input_bytes": Path(src).stat().st_size,
            "output_bytes": out_bytes,
            **{f"{k}_s": v["wall_s"] for k, v in res.items()},
            **{f"{k}_peak_rss": v["peak_rss_bytes"] for k, v in res.items()},
            **{f"{k}_cpu_s": v["cpu_s"] for k, v in res.items()},
        }
        for k in ("read", "compute"):  # time inside the script, without Python start-up and imports
            row[f"{k}_inner_s"] = json.loads(res[k]["stdout"].strip().splitlines()[-1])["seconds"]
        row["cogs_over_read"] = row["cogs_s"] / row["read_s"]
        row["cogs_over_floor"] = row["cogs_s"] / row["floor_s"]
        row["cogs_cpu_over_floor"] = row["cogs_cpu_s"] / row["floor_cpu_s"]
        row["load_avg"] = [load_start, os.getloadavg()[0]]  # other jobs on the machine inflate the times
        rows.append(row)
        print(json.dumps(row), flush=True)
    results = CACHE_DIR / results_name  # rows of earlier runs (other sizes) are kept
    stored = {r["size"]: r for r in (json.loads(results.read_text()) if results.exists() else [])}
    stored.update({r["size"]: r for r in rows})
    results.write_text(json.dumps([stored[k] for k in sorted(stored)], indent=1))
    table = _table([stored[k] for k in sorted(stored)])
    print(table)
    if write_doc:
        update_doc_section("Benchmark", table, doc=REPO / "docs" / "terrain.md")
    return rows


def _table(rows: list[dict]) -> str:
    lines = [
        "Measured by `benchmarks/bench_terrain.py` (synthetic fractal DEM, float32, 2 m, deflate COG input; "
        "wall time and peak RSS of the whole process tree; input in the page cache).",
        "",
        f"Machine: {machine_description()}.",
        "",
        "| size | read once | slope+aspect+hillshade, one pass, no output | GDAL floor: 3 COG copies "
        "| `xdem terrain` -> 3 COGs | COGs / floor (wall, CPU) | COGs / read "
        "| machine load (1-min avg, start/end; 2 cores) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    cpu = lambda r, k: f", {r[k + '_cpu_s']:.1f} s CPU" if k + "_cpu_s" in r else ""  # noqa: E731
    for r in rows:
        floor = (f"{r['floor_s']:.1f} s{cpu(r, 'floor')}, {fmt_bytes(r['floor_peak_rss'])}" if "floor_s" in r
                 else "not measured")
        ratio = (f"{r['cogs_over_floor']:.2f}x, {r['cogs_cpu_over_floor']:.2f}x" if "cogs_over_floor" in r
                 else "not measured")
        lines.append(
            f"| {r['size']}^2 | {r['read_s']:.1f} s ({r['read_inner_s']:.1f} s after imports), "
            f"{fmt_bytes(r['read_peak_rss'])} "
            f"| {r['compute_s']:.1f} s ({r['compute_inner_s']:.1f} s after imports), {fmt_bytes(r['compute_peak_rss'])} "
            f"| {floor} | {r['cogs_s']:.1f} s{cpu(r, 'cogs')}, {fmt_bytes(r['cogs_peak_rss'])} | {ratio} "
            f"| {r['cogs_over_read']:.1f}x "
            + ("| {:.1f} / {:.1f} |".format(*r["load_avg"]) if "load_avg" in r else "| not recorded |")
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8000])
    parser.add_argument("--chunks", default="auto", help="chunk side in pixels, or auto")
    parser.add_argument("--no-doc", action="store_true", help="do not update docs/terrain.md")
    parser.add_argument("--results", default="terrain_results.json",
                        help="file under benchmarks/_cache keeping the rows (e.g. another name for a 'before' run)")
    args = parser.parse_args()
    bench(args.sizes, chunks=args.chunks, write_doc=not args.no_doc, results_name=args.results)


if __name__ == "__main__":
    main()
