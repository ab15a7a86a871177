"""Peak memory of the *client* process of ``xdem.write_cog`` under a ``distributed`` cluster.

Under a client the workers compute the blocks and send them back; the client writes them into
its local temporary GTiff with a sliding window of in-flight blocks (``xdem.io._cog_stream``).
Its memory must not grow with the DEM. For each size (default 2000^2 and 6000^2; synthetic
DEMs cached under ``benchmarks/_cache``), a 2-worker ``LocalCluster`` is started here (the
workers are children of this process, not of the measured one) and a fresh client process
runs ``write_cog(open_dem(dem) + 1, out)`` against its ``tcp://`` address; its wall time and
peak RSS (:func:`_measure.measure`) are printed, with the same run on the threaded scheduler
for comparison. The table is printed and written to ``docs/performance.md`` (section
``cluster``) unless ``--no-doc``.

Run: ``python benchmarks/bench_cluster.py [--sizes 2000 6000] [--no-doc]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import CACHE_DIR, cached_pair, fmt_bytes, measure, update_doc_section  # noqa: E402


def _run_client(scheduler: str, src: str, dst: str) -> None:
    import dask

    import xdem

    t0 = time.perf_counter()
    dem = xdem.open_dem(src)
    if scheduler == "threads":
        with dask.config.set(scheduler="threads"):
            xdem.write_cog(dem + 1, dst, overwrite=True)
    else:
        from distributed import Client

        with Client(scheduler, set_as_default=False) as client, dask.config.set(scheduler=client):
            xdem.write_cog(dem + 1, dst, overwrite=True)
    print(json.dumps({"seconds": time.perf_counter() - t0, "blocks": int(dem.data.npartitions)}))


def bench(sizes: list[int], *, write_doc: bool = True) -> list[dict]:
    """One row per size: the client's wall time and peak RSS, distributed and threaded."""
    from distributed import LocalCluster

    out_dir = CACHE_DIR / "cluster_out"
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None, silence_logs=40) as cluster:
        for size in sizes:
            src = cached_pair(size)["ref"]
            row: dict = {"size": size}
            for name, scheduler in (("cluster", cluster.scheduler_address), ("threads", "threads")):
                dst = out_dir / f"{name}.tif"
                r = measure([sys.executable, str(Path(__file__).resolve()), "--_run", scheduler, src, str(dst)])
                dst.unlink(missing_ok=True)
                if r["returncode"] != 0:
                    raise SystemExit(f"{name} run failed for {size}^2:\n{r['stderr'][-3000:]}")
                row[f"{name}_wall_s"] = r["wall_s"]
                row[f"{name}_rss"] = r["peak_rss_bytes"]
                row["blocks"] = json.loads(r["stdout"].strip().splitlines()[-1])["blocks"]
                print(f"[{size}^2] {name}: {r['wall_s']:.1f} s, client peak RSS {fmt_bytes(r['peak_rss_bytes'])}",
                      flush=True)
            rows.append(row)
    table = "\n".join([
        "| size | blocks | client peak RSS, 2-worker cluster | wall (s) | peak RSS, threaded | wall (s) |",
        "|---:|---:|---:|---:|---:|---:|",
        *(f"| {r['size']}^2 | {r['blocks']} | {fmt_bytes(r['cluster_rss'])} | {r['cluster_wall_s']:.1f} | "
          f"{fmt_bytes(r['threads_rss'])} | {r['threads_wall_s']:.1f} |" for r in rows),
    ])
    print(table)
    if write_doc:
        body = f"""`python benchmarks/bench_cluster.py` ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores shared
with other work). `write_cog(open_dem(dem) + 1, out)` in a fresh client process connected to a 2-worker
`LocalCluster` (the workers compute the blocks and send them back; the client writes them, at most
2 x 2 blocks in flight), against the same process on the threaded scheduler. Peak RSS is that of the
client process alone (the workers are not its children), sampled every 0.2 s.

{table}
"""
        update_doc_section("cluster", body)
    return rows


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--_run":
        _run_client(*sys.argv[2:5])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 6000])
    parser.add_argument("--no-doc", action="store_true", help="do not update docs/performance.md")
    args = parser.parse_args()
    bench(args.sizes, write_doc=not args.no_doc)


if __name__ == "__main__":
    main()
