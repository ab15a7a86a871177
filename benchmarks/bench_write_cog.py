"""Benchmark ``xdem.write_cog`` against a plain GDAL COG copy of the same DEM.

For each size (default 8000^2 and 20000^2; synthetic DEMs cached under ``benchmarks/_cache``):

* **xdem**: in a subprocess, ``write_cog(open_dem(dem) + 1, out)`` (a real compute-and-write);
* **floor**: in a subprocess, ``rasterio.shutil.copy(dem, out, driver="COG", ...)`` with the same
  compression, predictor, tiling, threads and GDAL cache, and ``OVERVIEWS=IGNORE_EXISTING`` so
  that GDAL computes the overviews afresh as it must for any new data (with ``AUTO`` it would
  merely copy the input COG's overviews): the time GDAL alone needs to produce such a COG.

Both are measured with :func:`_measure.measure` (wall time, peak RSS of the process tree). The
input is read once beforehand so both runs find it in the page cache. The table is printed and
written to ``docs/performance.md`` (section ``write_cog``).

Run: ``python benchmarks/bench_write_cog.py [--sizes 8000 20000] [--no-doc]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import CACHE_DIR, cached_pair, fmt_bytes, machine_description, measure, update_doc_section  # noqa: E402

TARGET_RATIO = 1.5
TARGET_RSS = 2**30


def _run_xdem(src: str, dst: str, chunks: str) -> None:
    import xdem

    t0 = time.perf_counter()
    dem = xdem.open_dem(src, chunks=int(chunks) if chunks != "auto" else "auto")
    xdem.write_cog(dem + 1, dst, overwrite=True)
    print(json.dumps({"seconds": time.perf_counter() - t0, "chunks": [c[0] for c in dem.chunks]}))


def _run_floor(src: str, dst: str) -> None:
    import rasterio
    import rasterio.shutil

    from xdem.io.cog import GDAL_CACHE_BYTES

    t0 = time.perf_counter()
    with rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_BYTES, GDAL_NUM_THREADS="ALL_CPUS"):
        rasterio.shutil.copy(
            src, dst, driver="COG", BLOCKSIZE=512, COMPRESS="DEFLATE", PREDICTOR=3, OVERVIEWS="IGNORE_EXISTING",
            BIGTIFF="IF_SAFER", NUM_THREADS="ALL_CPUS",
        )
    print(json.dumps({"seconds": time.perf_counter() - t0}))


def _warm(path: str) -> None:
    with open(path, "rb") as f:
        while f.read(64 * 2**20):
            pass


def bench(sizes: list[int], *, chunks: str = "auto", repeat: int = 2, write_doc: bool = True) -> list[dict]:
    """Run the benchmark for every size (floor and xdem alternated ``repeat`` times); one row per size.

    The best (smallest) wall time, CPU time and peak RSS of the repeats are kept, which
    filters out some of the noise of other work on the machine.
    """
    rows = []
    out_dir = CACHE_DIR / "write_cog_out"
    out_dir.mkdir(parents=True, exist_ok=True)
    for size in sizes:
        t0 = time.perf_counter()
        pair = cached_pair(size)
        print(f"[{size}^2] input ready in {time.perf_counter() - t0:.0f} s: {pair['ref']}", flush=True)
        src = pair["ref"]
        _warm(src)
        runs: dict[str, list[dict]] = {"floor": [], "xdem": []}
        for _ in range(repeat):
            for name, args in (("floor", ["floor", src, str(out_dir / "floor.tif")]),
                               ("xdem", ["xdem", src, str(out_dir / "xdem.tif"), chunks])):
                r = measure([sys.executable, str(Path(__file__).resolve()), "--_run", *args])
                (out_dir / f"{name}.tif").unlink(missing_ok=True)
                if r["returncode"] != 0:
                    raise SystemExit(f"{name} run failed for {size}^2:\n{r['stderr'][-3000:]}")
                runs[name].append(r)
                print(f"[{size}^2] {name}: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU, peak RSS "
                      f"{fmt_bytes(r['peak_rss_bytes'])}, load {r['load_avg'][0]:.1f}->{r['load_avg'][1]:.1f}", flush=True)
        best = {k: {m: min(r[m] for r in v) for m in ("wall_s", "cpu_s", "peak_rss_bytes")} for k, v in runs.items()}
        rows.append({
            "size": size,
            "xdem_wall_s": best["xdem"]["wall_s"],
            "floor_wall_s": best["floor"]["wall_s"],
            "ratio": best["xdem"]["wall_s"] / best["floor"]["wall_s"],
            "cpu_ratio": best["xdem"]["cpu_s"] / best["floor"]["cpu_s"],
            "xdem_peak_rss": best["xdem"]["peak_rss_bytes"],
            "floor_peak_rss": best["floor"]["peak_rss_bytes"],
            "max_load": max(max(r["load_avg"]) for v in runs.values() for r in v),
        })
    table = format_table(rows)
    print(table)
    (CACHE_DIR / "write_cog_results.json").write_text(json.dumps(rows, indent=1))
    if write_doc:
        write_report(rows, table, chunks=chunks, repeat=repeat)
    return rows


def format_table(rows: list[dict]) -> str:
    lines = [
        "| size | xdem wall (s) | GDAL floor wall (s) | ratio | CPU-time ratio | xdem peak RSS | floor peak RSS |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['size']}^2 | {r['xdem_wall_s']:.1f} | {r['floor_wall_s']:.1f} | {r['ratio']:.2f} | "
            f"{r['cpu_ratio']:.2f} | {fmt_bytes(r['xdem_peak_rss'])} | {fmt_bytes(r['floor_peak_rss'])} |"
        )
    return "\n".join(lines)


def write_report(rows: list[dict], table: str, *, chunks: str, repeat: int) -> None:
    from xdem.io.cog import GDAL_CACHE_MB, TEMP_COMPRESS

    verdicts = []
    for r in rows:
        ok = r["ratio"] <= TARGET_RATIO and r["xdem_peak_rss"] <= TARGET_RSS
        verdicts.append(f"{r['size']}^2: {'meets' if ok else 'MISSES'} targets (ratio <= {TARGET_RATIO}, peak RSS <= 1 GiB)")
    body = f"""`python benchmarks/bench_write_cog.py` ({time.strftime('%Y-%m-%d')}). Input: a synthetic float32
DEM (`xdem.examples.synthetic`, deflate COG, 512 px tiles). **xdem**: `write_cog(open_dem(dem) + 1, out)`
in a fresh process (chunks `{chunks}`, temp GTiff compression `{TEMP_COMPRESS or 'none'}`, GDAL cache
{GDAL_CACHE_MB} MB). **GDAL floor**: `rasterio.shutil.copy(dem, out, driver="COG")` with the same options
(DEFLATE, PREDICTOR=3, 512 px blocks, NUM_THREADS=ALL_CPUS, same cache) and OVERVIEWS=IGNORE_EXISTING
(overviews recomputed, as for any new data; `AUTO` would copy the input's own overviews). Peak RSS is
summed over the process tree, sampled every 0.2 s; the input is in the page cache for both. Each
is run {repeat} times, alternating, and the best of each column is kept. Highest 1-minute load
average seen during the runs: {max(r['max_load'] for r in rows):.1f} (on {os.cpu_count()} cores; other
work on the machine inflates wall times, so the CPU-time ratio is given too).

Machine: {machine_description()}.

{table}

{chr(10).join('- ' + v for v in verdicts)}

How `write_cog` works and why (tuning measured at 8000^2 on the same, loaded, machine; CPU seconds
are the steadier figure):

- Pass 1 stores the dask blocks into a tiled temporary GTiff (each task opens it `r+` under a
  lock that holds across threads and processes, or a `distributed.Lock`); pass 2 is GDAL's COG
  driver copying it with compression and overviews. Pass 2 is GDAL's own work and dominates.
- Temporary GTiff compression, pass 1 / pass 2 CPU seconds (temp size): **none 2.0 / 12.8 (256 MiB)**,
  ZSTD level 1 10.5 / 14.1 (187 MiB), LZW 5.7 / 17.5 (231 MiB). Uncompressed is chosen: writing it is a
  memory copy and pass 2 reads it without decoding. Cost: raw-size temporary disk space
  (1.6 GB for 20000^2 float32) in the output folder; when the folder has less than 1.5x that
  free, the temp file is ZSTD-compressed instead (`TEMP_COMPRESS_LOW_DISK`).
- The floor must recompute overviews: a COG copy that reuses the input's overviews (`OVERVIEWS=AUTO`)
  took 7.1 s CPU against 15.7 s with `IGNORE_EXISTING` (GDAL's default CUBIC overview resampling;
  AVERAGE 13.3 s, NEAREST 11.0 s). `write_cog` keeps GDAL's default resampling. Against the
  overview-reusing copy, which is not a fair floor, `write_cog` measured 2.0x (8000^2).
- Why `write_cog` beats the floor (our reading of the CPU times, not traced): GDAL decodes a deflate
  source twice (once to build the overviews, once to copy the full resolution), while `write_cog`
  decodes its input once in pass 1 and GDAL then reads the uncompressed temporary file twice.
- Memory: dask chunks of 2048^2 (4 tiles of 512 a side, `open_dem`'s default), 2 threads, GDAL cache
  64 MB per block write and 256 MB for the COG pass: peak RSS does not depend on the DEM size.
"""
    update_doc_section("write_cog", body)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8000, 20000], help="square DEM sides in pixels")
    parser.add_argument("--chunks", default="auto", help="chunks passed to open_dem for the xdem run")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each (floor, xdem), alternated")
    parser.add_argument("--no-doc", action="store_true", help="do not update docs/performance.md")
    parser.add_argument("--_run", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._run:
        kind, *rest = args._run
        _run_xdem(*rest) if kind == "xdem" else _run_floor(*rest)
        return
    bench(args.sizes, chunks=args.chunks, repeat=args.repeat, write_doc=not args.no_doc)


if __name__ == "__main__":
    main()
