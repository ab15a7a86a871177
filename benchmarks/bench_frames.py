"""Cost of applying a correction through its frame (a DEM in another CRS) vs along the DEM's
own axes, written as a COG; the floor is GDAL's COG copy of the same input.

    python benchmarks/bench_frames.py --sizes 4000 8000

Three runs per size, each in its own process (peak RSS of the process tree):
- ``floor``: ``rasterio.shutil.copy`` to COG (the work any output must do);
- ``same``: a known translation whose frame is the DEM's CRS (the halo-shift fast path);
- ``frame``: the same translation fitted in the neighbouring UTM zone (``xdem.warp``: two
  exact pyproj transforms per pixel and a mapped-footprint graph).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from _measure import CACHE_DIR, cached_pair, fmt_bytes, machine_description, measure, update_doc_section

SHIFT = (-3.0, 2.0, -1.5)


def _run(kind: str, src: str, dst: str) -> None:
    import rasterio
    import rasterio.shutil

    import xdem
    from xdem.cli import bound_process_memory
    from xdem.io.cog import GDAL_CACHE_BYTES

    t0 = time.perf_counter()
    if kind == "floor":
        with rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_BYTES, GDAL_NUM_THREADS="ALL_CPUS"):
            rasterio.shutil.copy(src, dst, driver="COG", BLOCKSIZE=512, COMPRESS="DEFLATE", PREDICTOR=3,
                                 OVERVIEWS="IGNORE_EXISTING", BIGTIFF="IF_SAFER", NUM_THREADS="ALL_CPUS")
    else:
        bound_process_memory()
        dem = xdem.open_dem(src)
        frame = dem.rio.crs.to_string() if kind == "same" else "EPSG:32634"  # the DEMs are in EPSG:32633
        nk = xdem.coreg.Coreg.from_dict({"method": "NuthKaab", "learned": {
            "shift_x_": SHIFT[0], "shift_y_": SHIFT[1], "shift_z_": SHIFT[2], "crs_": frame}})
        xdem.write_cog(nk.apply(dem), dst, overwrite=True)
    print(json.dumps({"seconds": time.perf_counter() - t0}))


def bench(sizes: list[int], *, write_doc: bool = True) -> list[dict]:
    out_dir = CACHE_DIR / "frames_out"
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for size in sizes:
        src = cached_pair(size)["tba"]
        runs = {}
        for kind in ("floor", "same", "frame"):
            dst = out_dir / f"{kind}.tif"
            r = measure([sys.executable, str(Path(__file__).resolve()), "--_run", kind, src, str(dst)])
            dst.unlink(missing_ok=True)
            if r["returncode"] != 0:
                raise SystemExit(f"{kind} failed at {size}^2:\n{r['stderr'][-3000:]}")
            runs[kind] = r
            print(f"[{size}^2] {kind}: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU, "
                  f"{fmt_bytes(r['peak_rss_bytes'])}, load {r['load_avg'][0]:.1f}->{r['load_avg'][1]:.1f}", flush=True)
        floor = runs["floor"]["wall_s"]
        for kind in ("same", "frame"):
            r = runs[kind]
            rows.append({"size": size, "kind": kind, "wall_s": r["wall_s"], "ratio": r["wall_s"] / floor,
                         "cpu_s": r["cpu_s"], "floor_cpu_s": runs["floor"]["cpu_s"], "peak": r["peak_rss_bytes"],
                         "load": max(r["load_avg"])})
    lines = ["| size | apply | wall / floor | CPU s (floor) | peak RSS | max load |", "|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['size']}² | {r['kind']} | {r['ratio']:.2f} | {r['cpu_s']:.0f} ({r['floor_cpu_s']:.0f}) | "
                     f"{fmt_bytes(r['peak'])} | {r['load']:.1f} |")
    table = "\n".join(lines)
    print(table)
    if write_doc:
        update_doc_section("Applying in another CRS (xdem.warp)", (
            "`python benchmarks/bench_frames.py`: a known translation applied to a synthetic DEM and written as a COG, "
            "`same` with the correction's frame equal to the DEM's CRS (halo shift), `frame` with the frame in the "
            "neighbouring UTM zone (per-pixel mapping, `xdem.warp`). Wall time as a ratio to GDAL's COG copy of the "
            f"same input in the same run.\n\nMachine: {machine_description()}\n\n{table}\n"))
    return rows


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--_run":
        _run(*argv[1:4])
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[4000, 8000])
    p.add_argument("--no-doc", action="store_true")
    a = p.parse_args(argv)
    bench(a.sizes, write_doc=not a.no_doc)


if __name__ == "__main__":
    main()
