"""Every coregistration method against the floor, measured side by side in one run (issue 28).

Input (made once, cached under ``benchmarks/_cache/methods_<size>/``): a synthetic fractal pair
(``xdem.examples.synthetic.generate_pair``: 5 m pixels, seed 3) where tba is the reference moved by
(dx, dy, dz) = (3.17, -1.42, 2.1) m, so the translation to apply is (-3.17, +1.42, -2.1) m and every
method's answer can be checked against it.

For each size, in fresh subprocesses measured by :func:`_measure.measure` (wall time, CPU seconds
of the process tree, peak RSS summed over the tree sampled every 0.2 s, 1-minute load):

* **floor**: a single GDAL COG copy of TBA (:data:`FLOOR`: rasterio alone, the output options and
  block cache of ``xdem.write_cog``, overviews recomputed), run first and again last; the smaller CPU time of the
  two is the floor of the ratios (both are printed, so the drift of the machine shows);
* **xdem**: ``xdem coreg REF TBA -o OUT --method <m> --quiet --json-out J`` for each method in
  :data:`METHODS` (default options: what users get).

Accuracy: the error of the fitted translation against the truth (the composed matrix of the
JSON document, when the method's result is one matrix), and the NMAD of dh after (sampled
statistics of the run). The table goes to ``docs/performance.md`` (section ``methods``).

Run: ``python benchmarks/bench_methods.py [--sizes 8000 20000] [--method nuthkaab lzd ...]
[--no-doc] [--label TEXT]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import CACHE_DIR, REPO, fmt_bytes, machine_description, measure, update_doc_section  # noqa: E402
from bench_coreg import _warm  # noqa: E402

SIZES = [8000, 20000]
METHODS = ["nuthkaab", "nuthkaab_deramp", "nuthkaab+deramp", "lzd", "icp", "blockwise:nuthkaab"]
SHIFT = (3.17, -1.42, 2.1)
RESOLUTION = 5.0
SEED = 3
#: Issue 28's goals: CPU seconds over the floor's, per method.
GOALS = {"nuthkaab": 1.2, "nuthkaab_deramp": 1.3, "nuthkaab+deramp": 1.3, "lzd": 1.5, "icp": 1.5,
         "blockwise:nuthkaab": 1.6}
#: Issue 28: peak RSS of every method <= 1.0 GB at every size.
PEAK_RSS_GOAL = 1.0e9
RESULTS = CACHE_DIR / "methods_results.json"
#: The floor: GDAL alone (no xdem import), ``xdem.write_cog``'s output options and block cache: argv[3]
#: is ``GDAL_CACHEMAX`` in bytes, as ``rasterio.Env`` takes it (:data:`xdem.io.cog.GDAL_CACHE_BYTES`; an
#: integer 256 there, as before session 17, is 256 bytes).
FLOOR = """
import sys, rasterio, rasterio.shutil
with rasterio.Env(GDAL_CACHEMAX=int(sys.argv[3]), GDAL_NUM_THREADS="ALL_CPUS"):
    rasterio.shutil.copy(sys.argv[1], sys.argv[2], driver="COG", BLOCKSIZE=512, COMPRESS="DEFLATE", PREDICTOR=3,
                         OVERVIEWS="IGNORE_EXISTING", BIGTIFF="IF_SAFER", NUM_THREADS="ALL_CPUS")
"""


def methods_pair(size: int) -> dict:
    """The cached ``size`` x ``size`` pair and its truth (generated on first use)."""
    from xdem.examples.synthetic import generate_pair

    return generate_pair(CACHE_DIR / f"methods_{size}", size=size, shift=SHIFT, resolution=RESOLUTION, seed=SEED)


def _floor(pair: dict, work: Path) -> dict:
    from xdem.gdal_cache import GDAL_CACHE_BYTES

    out = work / "floor.tif"
    r = measure([sys.executable, "-c", FLOOR, pair["tba"], str(out), str(GDAL_CACHE_BYTES)])
    out.unlink(missing_ok=True)
    return r


def _accuracy(doc: dict, truth: dict) -> dict:
    after = (doc.get("stats") or {}).get("after") or {}
    acc: dict[str, Any] = {"nmad_after": after.get("nmad")}
    if doc.get("matrix_is_complete") and doc.get("matrix") is not None:
        m = doc["matrix"]
        fitted = (m[0][3], m[1][3], m[2][3])
        want = (truth["shift_x"], truth["shift_y"], truth["shift_z"])
        err = [f - w for f, w in zip(fitted, want)]
        acc.update(translation=list(fitted), error=err, horizontal_error=(err[0] ** 2 + err[1] ** 2) ** 0.5,
                   rotations_deg=doc.get("rotations_deg"))
    return acc


def run_method(method: str, pair: dict, work: Path, *, repo: Path = REPO) -> dict:
    """One ``xdem coreg`` run of ``method`` with the xdem of checkout ``repo``, measured."""
    out, j = work / "out.tif", work / "out.json"
    cmd = [sys.executable, "-m", "xdem", "coreg", pair["ref"], pair["tba"], "-o", str(out), "--method", method,
           "--quiet", "--json-out", str(j)]
    r = measure(cmd, env={**os.environ, "PYTHONPATH": str(repo)}, cwd=repo)
    row = {k: r[k] for k in ("wall_s", "cpu_s", "peak_rss_bytes", "load_avg", "returncode")}
    if r["returncode"] != 0:
        row["error"] = (r["stderr"] or "")[-400:]
        return row
    doc = json.loads(j.read_text())
    row["timing"] = doc.get("timing")
    row.update(_accuracy(doc, pair))
    out.unlink(missing_ok=True)
    j.unlink(missing_ok=True)
    return row


def bench_size(size: int, methods: list[str], *, before: Path | None = None, only_after: tuple[str, ...] = ()) -> dict:
    pair = methods_pair(size)
    _warm(pair["ref"], pair["tba"])
    with tempfile.TemporaryDirectory(dir=CACHE_DIR) as tmp:
        work = Path(tmp)
        first = _floor(pair, work)
        rows, old = {}, {}
        for m in methods:
            if before is not None and m not in only_after:  # the other checkout first, then this one: alternated, in the same run
                old[m] = run_method(m, pair, work, repo=before)
                print(f"{size}^2 {m} (before): {old[m].get('cpu_s', 0):.1f} s CPU", flush=True)
            rows[m] = run_method(m, pair, work)
            print(f"{size}^2 {m}: {rows[m].get('cpu_s', 0):.1f} s CPU, {rows[m].get('wall_s', 0):.1f} s wall, "
                  f"{fmt_bytes(rows[m].get('peak_rss_bytes'))}", flush=True)
        last = _floor(pair, work)
    floors = [{k: f[k] for k in ("wall_s", "cpu_s", "peak_rss_bytes", "load_avg")} for f in (first, last)]
    return {"size": size, "floors": floors, "methods": rows, "before": old, "date": time.strftime("%Y-%m-%d %H:%M"),
            "machine": machine_description()}


def _floor_of(res: dict) -> dict:
    return min(res["floors"], key=lambda f: f["cpu_s"])


def format_table(results: list[dict]) -> str:
    lines = ["| size | method | wall (s) | floor wall (s) | wall ratio | CPU (s) | floor CPU (s) | CPU ratio | goal | "
             "before: CPU (s), ratio | "
             "peak RSS | fit / write (s) | translation error (m) | NMAD after (m) | load |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|"]
    for res in results:
        fl = _floor_of(res)
        lines.append(f"| {res['size']}^2 | floor (first / last) | {res['floors'][0]['wall_s']:.1f} / "
                     f"{res['floors'][1]['wall_s']:.1f} | | | {res['floors'][0]['cpu_s']:.1f} / "
                     f"{res['floors'][1]['cpu_s']:.1f} | | | | | {fmt_bytes(fl['peak_rss_bytes'])} | | | | "
                     f"{max(max(f['load_avg']) for f in res['floors']):.1f} |")
        for m, r in res["methods"].items():
            if r.get("returncode"):
                lines.append(f"| {res['size']}^2 | `{m}` | failed: {r.get('error', '')[-120:]!r} ||||||||||||")
                continue
            t = r.get("timing") or {}
            b = (res.get("before") or {}).get(m) or {}
            old = f"{b['cpu_s']:.1f}, {b['cpu_s'] / fl['cpu_s']:.2f}x" if b.get("returncode") == 0 else ""
            err = f"{r['horizontal_error']:.4f} / {abs(r['error'][2]):.4f}" if "error" in r else "(a field)"
            lines.append(
                f"| {res['size']}^2 | `{m}` | {r['wall_s']:.1f} | {fl['wall_s']:.1f} | {r['wall_s'] / fl['wall_s']:.2f} "
                f"| {r['cpu_s']:.1f} | {fl['cpu_s']:.1f} | {r['cpu_s'] / fl['cpu_s']:.2f} | {GOALS.get(m, float('nan'))} | {old} "
                f"| {fmt_bytes(r['peak_rss_bytes'])} | {t.get('fit_s', 0):.0f} / {t.get('write_s', 0):.0f} | {err} "
                f"| {r.get('nmad_after') or float('nan'):.4f} | {max(r['load_avg']):.1f} |")
    return "\n".join(lines)


def verdicts(results: list[dict]) -> list[str]:
    out = []
    for res in results:
        fl = _floor_of(res)
        for m, r in res["methods"].items():
            if r.get("returncode"):
                out.append(f"- {res['size']}^2 `{m}`: FAILED")
                continue
            ratio, goal = r["cpu_s"] / fl["cpu_s"], GOALS.get(m)
            mem_ok = r["peak_rss_bytes"] <= PEAK_RSS_GOAL
            cpu = f"CPU {ratio:.2f}x " + ("<=" if goal and ratio <= goal else "> (MISSED)") + f" {goal}x"
            mem = f"peak RSS {r['peak_rss_bytes'] / 1e9:.2f} GB " + ("<=" if mem_ok else "> (MISSED)") + " 1.0 GB"
            out.append(f"- {res['size']}^2 `{m}`: {cpu}; {mem}")
    return out


def _load() -> dict:
    return json.loads(RESULTS.read_text()) if RESULTS.exists() else {}


def write_report(results: list[dict], label: str) -> None:
    from xdem.gdal_cache import GDAL_CACHE_MB

    body = f"""`python benchmarks/bench_methods.py` ({results[0]['date']}{', ' + label if label else ''}). Every method with
default options, `xdem coreg REF TBA -o OUT --method <m> --quiet --json-out J` in a fresh process, against the floor,
a single GDAL COG copy of TBA with `xdem.write_cog`'s output options and block cache (`GDAL_CACHEMAX`
{GDAL_CACHE_MB} MiB), run before and after the methods in the same run (the smaller CPU time is the floor of the
ratios). Pair: fractal terrain at 5 m, tba moved by (3.17, -1.42, 2.1) m
(`benchmarks/_cache/methods_<size>`). CPU is user + system seconds of the process tree; peak RSS is summed over the
tree, sampled every 0.2 s; load is the highest 1-minute load average seen (2 cores).

{results[0]['machine']}

{format_table(results)}

Goals (issue 28): CPU ratio to the floor as in the `goal` column; peak RSS <= 1.0 GB at every size.

{chr(10).join(verdicts(results))}
"""
    update_doc_section("methods", body)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="*", default=SIZES)
    p.add_argument("--method", nargs="+", default=METHODS)
    p.add_argument("--no-doc", action="store_true", help="do not update docs/performance.md")
    p.add_argument("--label", default="", help="a note for the docs (e.g. the commit measured)")
    p.add_argument("--before", type=Path, default=None,
                   help="another checkout (e.g. a worktree of the commit before a change) run alternately, same run")
    p.add_argument("--only-after", nargs="*", default=[], help="methods not run from --before (too slow to repeat)")
    a = p.parse_args(argv)
    os.environ.setdefault("PYTHONPATH", str(REPO))
    stored = _load()
    results = []
    for size in a.sizes:
        res = bench_size(size, a.method, before=a.before, only_after=tuple(a.only_after))
        stored[str(size)] = res
        RESULTS.write_text(json.dumps(stored, indent=1))
        results.append(res)
        print(format_table([res]), flush=True)
    if not a.no_doc:
        write_report(results, a.label)
    print("\n".join(verdicts(results)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
