"""Benchmark ``xdem.write_zarr`` against ``xdem.write_cog``, and a kill at 50 % + resume.

For each square size (``--sizes``, default 20000; the synthetic DEM is cached under
``benchmarks/_cache``), each in its own subprocess measured by :func:`_measure.measure` (wall
time, CPU, peak RSS of the process tree, workers included):

* ``write_cog(open_dem(dem) + 1)`` and ``write_zarr(open_dem(dem) + 1)`` with the threaded
  scheduler, then under a 2-worker ``distributed.LocalCluster`` (single-threaded worker
  processes, started inside the measured process: its start-up is in the wall time, and the
  time inside the write is reported apart as ``write_s``);
* **kill + resume**: the threaded Zarr write killed with SIGKILL once half of its chunk records
  exist, then ``write_zarr(..., resume=True)``; reported: the time lost (killed run + resume
  - clean run) and whether the resumed store equals the clean one bit for bit.

The table is printed and written to ``docs/performance.md`` (section ``zarr``) unless
``--no-doc``. Run: ``python benchmarks/bench_zarr.py --sizes 4000``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import (  # noqa: E402
    CACHE_DIR,
    REPO,
    cached_pair,
    fmt_bytes,
    machine_description,
    measure,
    update_doc_section,
)

#: The script run in each measured subprocess: ``fmt scheduler src dst [resume]``.
WRITER = """
import json, sys, time, warnings
fmt, scheduler, src, dst = sys.argv[1:5]
resume = len(sys.argv) > 5
import xdem
client = cluster = None
if scheduler == "cluster":
    import distributed
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Port .* is already in use")
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=None, silence_logs=50)
    client = distributed.Client(cluster)
t0 = time.perf_counter()
dem = xdem.open_dem(src) + 1
if fmt == "zarr":
    r = xdem.write_zarr(dem, dst, overwrite=not resume, resume=resume)
    info = {"written": r.written, "kept": r.kept}
else:
    xdem.write_cog(dem, dst, overwrite=True)
    info = {}
info["write_s"] = time.perf_counter() - t0
if client is not None:
    client.close()
    cluster.close()
print(json.dumps(info))
"""


def _objects(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*"))
            if p.is_file() and "/c/" in str(p.relative_to(store)) and ".xdem" not in p.parts}


def _size_of(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _run(name: str, fmt: str, scheduler: str, src: str, dst: Path, *extra: str) -> dict:
    # GDAL's block cache bounded as the CLI does (GDAL_CACHEMAX=64 MB), which the cluster's workers inherit
    r = measure([sys.executable, "-c", WRITER, fmt, scheduler, src, str(dst), *extra],
                env={"PYTHONPATH": str(REPO), "GDAL_CACHEMAX": os.environ.get("GDAL_CACHEMAX", "64")})
    if r["returncode"] != 0:
        raise SystemExit(f"{name} failed:\n{r['stderr'][-3000:]}")
    r.update(json.loads(r["stdout"].strip().splitlines()[-1]))
    print(f"  {name}: {r['wall_s']:.1f} s wall (write {r['write_s']:.1f} s), {r['cpu_s']:.1f} s CPU, peak RSS "
          f"{fmt_bytes(r['peak_rss_bytes'])}, output {fmt_bytes(_size_of(dst))}, load {r['load_avg'][0]:.1f}->"
          f"{r['load_avg'][1]:.1f}", flush=True)
    return {"name": name, "wall_s": r["wall_s"], "write_s": r["write_s"], "cpu_s": r["cpu_s"],
            "peak_rss_bytes": r["peak_rss_bytes"], "output_bytes": _size_of(dst), "load_avg": r["load_avg"]}


def _kill_at_half(src: str, dst: Path) -> dict:
    """Start the threaded Zarr write, SIGKILL it once half of the chunk records exist."""
    import xdem

    total = 1
    with_chunks = xdem.open_dem(src).chunks
    if with_chunks is not None:
        total = len(with_chunks[0]) * len(with_chunks[1])
    shutil.rmtree(dst, ignore_errors=True)
    # GDAL's block cache bounded as the CLI does (GDAL_CACHEMAX=64 MB, inherited by the cluster's workers;
    # write_cog and write_zarr bound it themselves in the threaded process)
    env = {**os.environ, "PYTHONPATH": str(REPO), "GDAL_CACHEMAX": os.environ.get("GDAL_CACHEMAX", "64")}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", WRITER, "zarr", "threads", src, str(dst)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    done = dst / ".xdem" / "done"
    while proc.poll() is None:
        if done.is_dir() and len(os.listdir(done)) >= total / 2:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.02)
    proc.wait()
    killed_s = time.perf_counter() - t0
    n = len(os.listdir(done)) if done.is_dir() else 0
    print(f"  killed after {killed_s:.1f} s with {n} of {total} chunk records", flush=True)
    return {"killed_s": killed_s, "records": n, "total": total, "returncode": proc.returncode}


def bench(size: int, *, write_doc: bool) -> dict:
    pair = cached_pair(size)
    src = pair["tba"]
    with open(src, "rb") as f:  # page cache: every run reads it from memory
        while f.read(64 * 2**20):
            pass
    out = CACHE_DIR / "zarr_out"
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for scheduler in ("threads", "cluster"):
        rows.append(_run(f"write_cog, {scheduler}", "cog", scheduler, src, out / "out.tif"))
        rows.append(_run(f"write_zarr, {scheduler}", "zarr", scheduler, src, out / f"{scheduler}.zarr"))
    kill = _kill_at_half(src, out / "resumed.zarr")
    resumed = _run("write_zarr resume, threads", "zarr", "threads", src, out / "resumed.zarr", "resume")
    clean = next(r for r in rows if r["name"] == "write_zarr, threads")
    same = _objects(out / "resumed.zarr") == _objects(out / "threads.zarr")
    result = {"size": size, "rows": rows, "kill": kill, "resume": resumed, "identical": same,
              "lost_s": kill["killed_s"] + resumed["wall_s"] - clean["wall_s"], "machine": machine_description(),
              "load_avg": os.getloadavg()}
    print(f"  kill at 50 % + resume: {kill['killed_s'] + resumed['wall_s']:.1f} s against {clean['wall_s']:.1f} s "
          f"clean (lost {result['lost_s']:.1f} s); resumed store identical to the clean one: {same}", flush=True)
    (CACHE_DIR / f"zarr_results_{size}.json").write_text(json.dumps(result, indent=2))
    if write_doc:
        update_doc_section("zarr", format_doc(result))
    return result


def format_doc(res: dict) -> str:
    n = res["size"]
    lines = [
        f"`benchmarks/bench_zarr.py --sizes {n}`: `open_dem(dem) + 1` written as a COG and as a Zarr store "
        f"({n}^2 float32), threaded and under a 2-worker `distributed.LocalCluster` (its start-up included in the "
        "wall time, as are Python's start-up and imports; `write` is the time inside the write: opening the DEM, "
        "building the graph, computing and writing), then a threaded Zarr write killed (SIGKILL) at 50 % of "
        f"its chunks and resumed. {res['machine']}; load average {res['load_avg'][0]:.1f} at the end.",
        "",
        "| run | wall | write | CPU | peak RSS | output |",
        "|---|---|---|---|---|---|",
    ]
    for r in [*res["rows"], res["resume"]]:
        lines.append(f"| {r['name']} | {r['wall_s']:.1f} s | {r['write_s']:.1f} s | {r['cpu_s']:.1f} s | "
                     f"{fmt_bytes(r['peak_rss_bytes'])} | {fmt_bytes(r['output_bytes'])} |")
    k = res["kill"]
    clean = next(r for r in res["rows"] if r["name"] == "write_zarr, threads")
    lines += ["", f"Kill at {k['records']} of {k['total']} chunks after {k['killed_s']:.1f} s, then resume: "
              f"{k['killed_s'] + res['resume']['wall_s']:.1f} s in all against {clean['wall_s']:.1f} s for a clean "
              f"write (time lost {res['lost_s']:.1f} s); the resumed store is "
              f"{'bit for bit identical to' if res['identical'] else 'DIFFERENT from'} the clean one."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20000], help="square DEM sides in pixels")
    parser.add_argument("--no-doc", action="store_true", help="do not update docs/performance.md (else: the last size)")
    args = parser.parse_args(argv)
    for size in args.sizes:
        bench(size, write_doc=not args.no_doc)


if __name__ == "__main__":
    main()
