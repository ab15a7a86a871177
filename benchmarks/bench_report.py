"""Benchmark ``xdem report`` (one pass over the data) against a GDAL COG copy of one input.

For each square size (``--sizes``, default 8000 20000; the synthetic pair is cached under
``benchmarks/_cache``), in fresh subprocesses measured by :func:`_measure.measure` (wall time,
CPU, peak RSS of the process tree):

* **floor**: a GDAL COG copy of TBA (reads one DEM once, writes it once: the cheapest pass);
* **report**: ``xdem report REF TBA ALIGNED -o r.html`` with ALIGNED a COG of TBA moved back by
  the known shift (written once, outside the measurement), statistics computed by the report;
* **report --exact-stats**: the same with exact statistics and slope tables (about twenty
  passes), at sizes up to ``--exact-up-to`` (default 8000).

A report reads three DEMs where the floor reads one and writes one, so its wall time is shown
as a ratio to the floor's, measured in the same run. The table is printed and written to
``docs/performance.md`` (section ``report``) unless ``--no-doc``.
Run: ``python benchmarks/bench_report.py --sizes 4000 --no-doc``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import (  # noqa: E402
    CACHE_DIR,
    cached_pair,
    fmt_bytes,
    machine_description,
    measure_or_exit,
    update_doc_section,
)

FLOOR = """
import sys, rasterio, rasterio.shutil
from xdem.io.cog import GDAL_CACHE_BYTES
with rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_BYTES, GDAL_NUM_THREADS="ALL_CPUS"):
    rasterio.shutil.copy(sys.argv[1], sys.argv[2], driver="COG", BLOCKSIZE=512, COMPRESS="DEFLATE", PREDICTOR=3,
                         OVERVIEWS="IGNORE_EXISTING", BIGTIFF="IF_SAFER", NUM_THREADS="ALL_CPUS")
"""

#: Writes ``aligned.tif``: TBA moved back by the pair's known shift (lazy apply, one COG write).
ALIGN = """
import json, sys
import xdem, xdem.coreg
truth = json.loads(sys.argv[3])
tba = xdem.open_dem(sys.argv[1])
shift = xdem.coreg.RigidCoreg.from_translations(-truth["shift_x"], -truth["shift_y"], -truth["shift_z"],
                                                crs=tba.rio.crs)
xdem.write_cog(shift.apply(tba), sys.argv[2], overwrite=True)
"""


def _run(name: str, cmd: list[str]) -> dict:
    r = measure_or_exit(name, cmd)
    return {"name": name, **{k: r[k] for k in ("wall_s", "cpu_s", "peak_rss_bytes", "load_avg")}}


def _warm(*paths: str) -> None:
    for p in paths:  # page cache: every run reads the inputs from memory
        with open(p, "rb") as f:
            while f.read(64 * 2**20):
                pass


def bench(size: int, *, exact: bool) -> dict:
    pair = cached_pair(size)
    out = CACHE_DIR / "report_out"
    out.mkdir(parents=True, exist_ok=True)
    aligned = out / f"aligned_{size}.tif"
    if not aligned.exists():
        truth = {k: pair[k] for k in ("shift_x", "shift_y", "shift_z")}
        _run("writing the aligned DEM (not measured against anything)",
             [sys.executable, "-c", ALIGN, pair["tba"], str(aligned), json.dumps(truth)])
    _warm(pair["ref"], pair["tba"], str(aligned))
    rows = [_run("floor: GDAL COG copy of TBA", [sys.executable, "-c", FLOOR, pair["tba"], str(out / "floor.tif")])]
    (out / "floor.tif").unlink(missing_ok=True)
    base = [sys.executable, "-m", "xdem", "report", pair["ref"], pair["tba"], str(aligned), "-o", str(out / "r.html"),
            "--overwrite"]
    rows.append(_run("xdem report", base))
    if exact:
        rows.append(_run("xdem report --exact-stats", [*base, "--exact-stats"]))
    res = {"size": size, "rows": rows, "machine": machine_description(), "load_avg": os.getloadavg()}
    (CACHE_DIR / f"report_results_{size}.json").write_text(json.dumps(res, indent=2))
    return res


def format_doc(results: list[dict]) -> str:
    lines = [
        "`benchmarks/bench_report.py`: `xdem report REF TBA ALIGNED` (three DEMs read, statistics computed by the "
        "report; maps from the COGs' overviews) against a GDAL COG copy of TBA (one DEM read and written), each in "
        f"a fresh process, inputs in the page cache. {results[-1]['machine']}.",
        "",
        "| size | run | wall | wall / floor | CPU | peak RSS | load |",
        "|---|---|---|---|---|---|---|",
    ]
    for res in results:
        floor = res["rows"][0]["wall_s"]
        for r in res["rows"]:
            lines.append(f"| {res['size']}^2 | {r['name']} | {r['wall_s']:.1f} s | {r['wall_s'] / floor:.2f} | "
                         f"{r['cpu_s']:.1f} s | {fmt_bytes(r['peak_rss_bytes'])} | {r['load_avg'][0]:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8000, 20000], help="square DEM sides in pixels")
    parser.add_argument("--exact-up-to", type=int, default=8000, help="also run --exact-stats up to this size")
    parser.add_argument("--no-doc", action="store_true", help="do not update docs/performance.md")
    args = parser.parse_args(argv)
    results = [bench(size, exact=size <= args.exact_up_to) for size in args.sizes]
    text = format_doc(results)
    print(text)
    if not args.no_doc:
        update_doc_section("report", text)


if __name__ == "__main__":
    main()
