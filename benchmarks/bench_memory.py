"""Peak memory of ``xdem coreg`` at three sizes, for each method: it must not grow with the DEM.

For each size (default 8000^2, 20000^2, 40000^2) and method (default ``nuthkaab``,
``nuthkaab+deramp``, ``nuthkaab_deramp``, ``lzd``, ``icp``, ``blockwise:nuthkaab``), one
``xdem coreg REF TBA -o OUT --method M --quiet --json-out J`` in a fresh process, measured by
:func:`_measure.measure` (peak RSS summed over the process tree, sampled every 0.2 s; CPU
seconds; the highest 1-minute load average seen). Inputs: the 5 m fractal pairs with a known
shift (``xdem.examples.synthetic.generate_pair(size=N, shift=(3.17, -1.42, 2.1), resolution=5,
seed=3)``, cached as ``<cache>/methods_<N>``, made when missing); a size that is a multiple of
20000 above it is a VRT mosaic of copies of the 20000^2 pair (written in ``--work``), as
``bench_coreg.py`` does for 40000^2 (no tilt; the seams are a few outlier lines).

With ``--phases`` each run goes through ``_phase_rss.py`` (the same command in one process,
its resident memory sampled every 50 ms and tagged with the phase running: the fit, the
block-writing pass, the overviews, GDAL's COG copy, the statistics' finish): the table then
says which phase holds the peak and each phase's peak, and glibc's heap size and free bytes
there (free heap that stays resident is retention, not need: :mod:`xdem.io._heap`).

Target (issue 28): peak RSS <= 1.0 GB (10^9 bytes) at every size, whatever the method.

The table is printed and written to ``docs/performance.md`` (section ``memory``).

Run: ``python benchmarks/bench_memory.py [--sizes 8000 20000] [--methods lzd icp] [--cache DIR]
[--work DIR] [--phases] [--no-doc] [--save rows.json]``; ``--merge a.json b.json`` reports runs saved apart.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import CACHE_DIR, fmt_bytes, machine_description, measure, update_doc_section  # noqa: E402
from bench_coreg import _vrt  # noqa: E402

METHODS = ("nuthkaab", "nuthkaab+deramp", "nuthkaab_deramp", "lzd", "icp", "blockwise:nuthkaab")
SIZES = (8000, 20000, 40000)
TILE = 20000  # largest generated pair; larger sizes are mosaics of it
TARGET_BYTES = 1.0e9
SHIFT = (3.17, -1.42, 2.1)


def pair(size: int, cache: Path, work: Path) -> dict:
    """``{"ref", "tba", "truth"}`` of the ``size``^2 pair (generated or mosaicked when missing)."""
    if size > TILE and size % TILE == 0:
        tile = pair(TILE, cache, work)
        folder = work / f"mosaic_{size}"
        folder.mkdir(parents=True, exist_ok=True)
        paths = {k: folder / f"{k}.vrt" for k in ("ref", "tba")}
        for k, p in paths.items():
            _vrt(Path(tile[k]), size, p)
        return {"ref": str(paths["ref"]), "tba": str(paths["tba"]), "truth": tile["truth"]}
    folder = cache / f"methods_{size}"
    if not (folder / "truth.json").exists():
        from xdem.examples.synthetic import generate_pair

        print(f"generating the {size}^2 pair in {folder} (long above 8000^2)", flush=True)
        generate_pair(folder, size=size, shift=SHIFT, resolution=5.0, seed=3)
    truth = json.loads((folder / "truth.json").read_text())
    return {"ref": str(folder / "ref.tif"), "tba": str(folder / "tba.tif"), "truth": truth}


def _warm(*paths: str) -> None:
    """Read the files once (the page cache then serves every run alike); a VRT's sources too."""
    for path in paths:
        if path.endswith(".vrt"):
            continue
        with open(path, "rb") as f:
            while f.read(64 * 2**20):
                pass


def _shift_error(doc: dict, truth: dict) -> float:
    """Horizontal distance (m) between the fitted translation (summed over the steps) and the truth."""
    steps = doc.get("steps") or [doc]
    if not any("shift_x" in s for s in steps):  # e.g. blockwise: no single translation
        return float("nan")
    sx = sum(s.get("shift_x", 0.0) or 0.0 for s in steps)
    sy = sum(s.get("shift_y", 0.0) or 0.0 for s in steps)
    return math.hypot(sx - truth["shift_x"], sy - truth["shift_y"])


def run_one(size: int, method: str, inputs: dict, work: Path, *, phases: bool = False) -> dict:
    out_dir = work / f"run_{size}"
    out_dir.mkdir(parents=True, exist_ok=True)
    out, j, ph = out_dir / "aligned.tif", out_dir / "coreg.json", out_dir / "phases.json"
    for p in (out, j, ph):
        p.unlink(missing_ok=True)
    args = ["coreg", inputs["ref"], inputs["tba"], "-o", str(out), "--method", method, "--quiet", "--json-out", str(j)]
    if phases:
        cmd = [sys.executable, str(Path(__file__).resolve().parent / "_phase_rss.py"), str(ph), *args]
    else:
        cmd = [str(Path(sys.executable).with_name("xdem")), *args]
    r = measure(cmd)
    if r["returncode"] != 0:
        raise SystemExit(f"xdem coreg --method {method} at {size}^2 failed:\n{r['stderr'][-3000:]}")
    err = _shift_error(json.loads(j.read_text()), inputs["truth"]) if j.exists() else float("nan")
    out.unlink(missing_ok=True)
    row = {"size": size, "method": method, "peak": r["peak_rss_bytes"], "wall": r["wall_s"], "cpu": r["cpu_s"],
           "load": max(r["load_avg"]), "err": err}
    if phases:
        row["phases"] = json.loads(ph.read_text())["phases"]
    print(f"  {size}^2 {method}: peak RSS {fmt_bytes(row['peak'])}, {row['wall']:.0f} s wall, {row['cpu']:.0f} s CPU, "
          f"shift error {err:.4f} m, load {row['load']:.1f}" + (f"; {_phase_text(row)}" if phases else ""), flush=True)
    return row


def _phase_text(row: dict) -> str:
    """``phase rss (heap H, F free)`` for each phase, the largest first."""
    parts = sorted(row.get("phases", {}).items(), key=lambda kv: -kv[1]["rss"])
    return ", ".join(f"{k} {fmt_bytes(v['rss'])} (heap {fmt_bytes(v['heap'])}, {fmt_bytes(v['heap_free'])} free)"
                     for k, v in parts)


def report(rows: list[dict]) -> str:
    has = any("phases" in r for r in rows)
    lines = [
        "`python benchmarks/bench_memory.py` (" + time.strftime("%Y-%m-%d") + "): peak resident memory of "
        "`xdem coreg REF TBA -o OUT --method M --quiet --json-out J` in a fresh process (RSS summed over the "
        "process tree, sampled every 0.2 s), on the 5 m fractal pairs with a known shift (`methods_<size>`; "
        "40000^2: a VRT mosaic of 2 x 2 copies of the 20000^2 pair). Target (issue 28): <= 1.0 GB at every size, "
        "whatever the method. Single runs on a shared machine (load: the higher 1-minute load average of those "
        "before and after the run).",
        "",
        machine_description(),
        "",
        "| size | method | peak RSS | <= 1.0 GB | wall (s) | CPU (s) | shift error (m) | load |"
        + (" peak per phase (`--phases`) |" if has else ""),
        "|---:|---|---:|---|---:|---:|---:|---:|" + ("---|" if has else ""),
    ]
    for r in rows:
        ok = "met" if r["peak"] <= TARGET_BYTES else "MISSED"
        lines.append(f"| {r['size']}^2 | `{r['method']}` | {fmt_bytes(r['peak'])} | {ok} | {r['wall']:.0f} | "
                     f"{r['cpu']:.0f} | {r['err']:.4f} | {r['load']:.1f} |" + (f" {_phase_text(r)} |" if has else ""))
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--cache", type=Path, default=CACHE_DIR, help="folder of the methods_<size> pairs")
    ap.add_argument("--work", type=Path, default=CACHE_DIR / "memory", help="folder of the mosaics and outputs")
    ap.add_argument("--phases", action="store_true", help="also the peak of each phase (_phase_rss.py)")
    ap.add_argument("--no-doc", action="store_true", help="do not write docs/performance.md")
    ap.add_argument("--save", type=Path, help="also write the rows measured to this JSON file (rewritten after each run)")
    ap.add_argument("--merge", type=Path, nargs="+", help="measure nothing: report the rows saved in these files")
    args = ap.parse_args()
    rows = [row for f in args.merge or [] for row in json.loads(f.read_text())]
    for size in args.sizes if not args.merge else []:
        inputs = pair(size, args.cache, args.work)
        _warm(inputs["ref"], inputs["tba"])
        for method in args.methods:
            rows.append(run_one(size, method, inputs, args.work, phases=args.phases))
            if args.save:  # after each run: a long run stopped keeps what it measured
                args.save.write_text(json.dumps(rows, indent=1))
    if args.save:
        args.save.write_text(json.dumps(rows, indent=1))
    text = report(rows)
    print(text)
    if not args.no_doc:
        update_doc_section("memory", text)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
