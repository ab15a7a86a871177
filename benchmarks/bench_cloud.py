"""Benchmark remote reads: ``xdem coreg`` of a pair served over loopback (HTTP and S3) against
the same pair read locally, with the bytes fetched and the requests made.

For each square size (``--sizes``, default 8000; the synthetic pair is cached under
``benchmarks/_cache``), each run in its own subprocess measured by :func:`_measure.measure`
(wall time, CPU, peak RSS of the process tree):

* **floor**: a GDAL COG copy of TBA (as ``bench_coreg.py``), from the local file and over HTTP;
* ``xdem coreg REF TBA -o out.tif`` (Nuth & Kääb) from local files, over HTTP (the Range-capable
  server of ``tests/servers.py``, in its own process, which logs every request and the bytes it
  sent) and from S3 (moto's server on 127.0.0.1, ``tests/servers.py``; moto logs no bytes, so
  that row has times only).

Reported per run: wall and CPU seconds, their ratio to the local floor, peak RSS, and for HTTP
the requests (HEAD, GET) and bytes sent by the server against the size of the files. The
aligned DEMs of the three coregistrations are compared: they must be equal bit for bit. The
machine's load average is printed at the start and end of each run.

The table goes to ``docs/performance.md`` (section ``cloud``) unless ``--no-doc``.
Run: ``python benchmarks/bench_cloud.py --sizes 4000``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from _measure import CACHE_DIR, REPO, cached_pair, fmt_bytes, machine_description, measure, update_doc_section  # noqa: E402
from servers import http_server, new_bucket, requests_of, s3_client, s3_server  # noqa: E402

FLOOR = """
import sys, rasterio, rasterio.shutil
import xdem.io.remote as remote
from xdem.io.cog import GDAL_CACHE_BYTES
src = remote.gdal_path(sys.argv[1])
with rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_BYTES, GDAL_NUM_THREADS="ALL_CPUS"):
    rasterio.shutil.copy(src, sys.argv[2], driver="COG", BLOCKSIZE=512, COMPRESS="DEFLATE", PREDICTOR=3,
                         OVERVIEWS="IGNORE_EXISTING", BIGTIFF="IF_SAFER", NUM_THREADS="ALL_CPUS")
"""


def _run(name: str, cmd: list[str], log: Path | None, size_bytes: int) -> dict:
    if log is not None:
        log.unlink(missing_ok=True)
    r = measure(cmd, env={"PYTHONPATH": str(REPO)})
    if r["returncode"] != 0:
        raise SystemExit(f"{name} failed:\n{r['stderr'][-3000:]}")
    row = {"name": name, **{k: r[k] for k in ("wall_s", "cpu_s", "peak_rss_bytes", "load_avg")}}
    if log is not None:
        reqs = requests_of(log)
        row.update(heads=sum(q[0] == "HEAD" for q in reqs), gets=sum(q[0] == "GET" for q in reqs),
                   sent_bytes=sum(q[4] for q in reqs), files_bytes=size_bytes)
    extra = (f", {row['heads']} HEAD + {row['gets']} GET, {fmt_bytes(row['sent_bytes'])} sent of "
             f"{fmt_bytes(size_bytes)}") if log is not None else ""
    print(f"  {name}: {row['wall_s']:.1f} s wall, {row['cpu_s']:.1f} s CPU, peak RSS "
          f"{fmt_bytes(row['peak_rss_bytes'])}{extra}; load {r['load_avg'][0]:.1f}->{r['load_avg'][1]:.1f}", flush=True)
    return row


def _coreg_cmd(ref: str, tba: str, out: Path) -> list[str]:
    return [sys.executable, "-m", "xdem", "coreg", ref, tba, "-o", str(out), "--overwrite", "--method", "nuthkaab"]


def bench(size: int, *, write_doc: bool) -> dict:
    import numpy as np

    import xdem

    pair = cached_pair(size)
    folder = Path(pair["ref"]).parent
    names = {k: Path(pair[k]).name for k in ("ref", "tba")}
    both = sum(Path(pair[k]).stat().st_size for k in ("ref", "tba"))
    out = CACHE_DIR / "cloud_out"
    out.mkdir(parents=True, exist_ok=True)
    log = CACHE_DIR / "cloud_http.log"
    rows = [_run("floor: COG copy of TBA, local", [sys.executable, "-c", FLOOR, pair["tba"], str(out / "floor.tif")],
                 None, 0)]
    with http_server(folder, log) as url:
        rows.append(_run("floor: COG copy of TBA, HTTP", [sys.executable, "-c", FLOOR, f"{url}/{names['tba']}",
                                                          str(out / "floor_http.tif")], log,
                         Path(pair["tba"]).stat().st_size))
        rows.append(_run("coreg, local", _coreg_cmd(pair["ref"], pair["tba"], out / "local.tif"), None, 0))
        rows.append(_run("coreg, HTTP", _coreg_cmd(f"{url}/{names['ref']}", f"{url}/{names['tba']}", out / "http.tif"),
                         log, both))
    with s3_server():
        bucket = new_bucket("bench")
        for k in ("ref", "tba"):
            s3_client().upload_file(pair[k], bucket, names[k])
        rows.append(_run("coreg, S3 (moto)", _coreg_cmd(f"s3://{bucket}/{names['ref']}", f"s3://{bucket}/{names['tba']}",
                                                        out / "s3.tif"), None, 0))
    local = xdem.open_dem(out / "local.tif").values
    same = all(np.array_equal(xdem.open_dem(out / f"{k}.tif").values, local, equal_nan=True) for k in ("http", "s3"))
    print(f"  aligned DEMs over HTTP and S3 equal to the local one bit for bit: {same}", flush=True)
    result = {"size": size, "rows": rows, "identical": same, "machine": machine_description(),
              "load_avg": os.getloadavg()}
    (CACHE_DIR / f"cloud_results_{size}.json").write_text(json.dumps(result, indent=2))
    if write_doc:
        update_doc_section("cloud", format_doc(result))
    return result


def format_doc(res: dict) -> str:
    n = res["size"]
    floor = res["rows"][0]
    lines = [
        f"`benchmarks/bench_cloud.py --sizes {n}`: `xdem coreg` (Nuth & Kääb) of the synthetic {n}^2 pair from "
        "local files, over HTTP (the Range-capable server of `tests/servers.py`, its own process on 127.0.0.1) "
        "and from S3 (moto's server on 127.0.0.1), and the floor (a GDAL COG copy of TBA) locally and over HTTP; "
        "ratios are to the local floor, measured in the same run. Requests and bytes are those the HTTP server "
        f"logged. {res['machine']}; load average {res['load_avg'][0]:.1f} at the end.",
        "",
        "| run | wall | wall ratio | CPU | CPU ratio | peak RSS | requests | bytes sent / files |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in res["rows"]:
        reqs = f"{r['heads']} HEAD + {r['gets']} GET" if "gets" in r else "-"
        sent = f"{fmt_bytes(r['sent_bytes'])} / {fmt_bytes(r['files_bytes'])}" if "gets" in r else "-"
        lines.append(f"| {r['name']} | {r['wall_s']:.1f} s | {r['wall_s'] / floor['wall_s']:.1f}x | {r['cpu_s']:.1f} s | "
                     f"{r['cpu_s'] / floor['cpu_s']:.1f}x | {fmt_bytes(r['peak_rss_bytes'])} | {reqs} | {sent} |")
    lines += ["", "The aligned DEMs read over HTTP and from S3 are "
              f"{'bit for bit equal to' if res['identical'] else 'DIFFERENT from'} the one read locally. "
              "A coregistration reads its inputs in two passes (the fit's sample, then the warp and the statistics), "
              "so over HTTP it fetches more than the files' size where a local run reads the second pass from the page "
              "cache; GDAL's COG copy fetches its source several times (the overviews are computed from it)."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8000], help="square DEM sides in pixels")
    parser.add_argument("--no-doc", action="store_true", help="do not update docs/performance.md (else: the last size)")
    args = parser.parse_args(argv)
    for size in args.sizes:
        bench(size, write_doc=not args.no_doc)


if __name__ == "__main__":
    main()
