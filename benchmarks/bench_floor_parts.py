"""What any fit-then-warp run pays above the floor before its own arithmetic: the design's lower bound.

Issue 28 measures ``xdem coreg`` against a floor, one GDAL COG copy of the to-be-aligned DEM (TBA).
A coregistration run does the floor's work (decode TBA, encode the output COG) and, whatever its
method, also: imports the library; decodes both DEMs once for the fit's sample (a reproducible draw
spread over the whole DEM meets every tile of both files); and decodes the reference again in the
write pass, for the statistics of dh after the fit. This script measures those parts in fresh
processes, alternated with the floor in the same run (``--rounds`` times; the smallest CPU of each
kept):

- ``floor``: the COG copy of :mod:`bench_methods` (``xdem.write_cog``'s options and block cache);
- ``imports``: the modules a ``xdem coreg`` run on files imports, minus an empty interpreter;
- ``decode``: every block of TBA, then of REF and TBA, read with rasterio under the same block cache,
  minus a process that only imports rasterio.

It prints, per size, ``design floor = floor + imports + decode(REF + TBA) + decode(REF)`` and its ratio
to the floor: a method's CPU ratio cannot go below it without a different design (a fit that decodes
a part of the files only, or dh statistics taken without reading REF again), whatever its arithmetic.

Run: ``python benchmarks/bench_floor_parts.py [--sizes 8000 20000] [--rounds 3]`` (inputs: the pairs of
``bench_methods.py``, made when missing).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import REPO, machine_description, measure  # noqa: E402
from bench_methods import FLOOR, GOALS, methods_pair  # noqa: E402

#: One decode of each file given: every block read once, under xdem's block cache.
DECODE = """
import sys, rasterio
from xdem.gdal_cache import GDAL_CACHE_BYTES
for p in sys.argv[1:]:
    with rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_BYTES), rasterio.open(p) as f:
        for _, w in f.block_windows(1):
            f.read(1, window=w)
"""
#: What a ``xdem coreg`` run on local files imports (tests/test_start.py checks that list).
IMPORTS = "import xdem.cli.coreg, xdem.cli._coreg_run, xdem.workflows.coreg, xdem.io.cog, xdem.coreg"
RASTERIO = "import rasterio, xdem.gdal_cache"


def _cases(pair: dict, work: Path) -> dict[str, list[str]]:
    py = sys.executable
    return {
        "floor": [py, "-c", FLOOR, pair["tba"], str(work / "floor.tif"), str(64 << 20)],
        "python": [py, "-c", "pass"],
        "imports": [py, "-c", IMPORTS],
        "rasterio": [py, "-c", RASTERIO],
        "decode_tba": [py, "-c", DECODE, pair["tba"]],
        "decode_ref_tba": [py, "-c", DECODE, pair["ref"], pair["tba"]],
    }


def parts(size: int, rounds: int, work: Path) -> dict[str, float]:
    """The smallest CPU seconds of each case over ``rounds`` alternated rounds, and the derived parts."""
    pair = methods_pair(size)
    cases = _cases(pair, work)
    cpu: dict[str, float] = {}
    loads: list[float] = []
    for _ in range(rounds):
        for name, cmd in cases.items():
            r = measure(cmd, env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)
            if r["returncode"] != 0:
                raise SystemExit(f"{name} failed:\n{r['stderr'][-2000:]}")
            cpu[name] = min(cpu.get(name, float("inf")), r["cpu_s"])
            loads.append(r["load_avg"][1])
    (work / "floor.tif").unlink(missing_ok=True)
    both = cpu["decode_ref_tba"] - cpu["rasterio"]
    ref = both - (cpu["decode_tba"] - cpu["rasterio"])
    imports = cpu["imports"] - cpu["python"]
    design = cpu["floor"] + imports + both + ref
    return {"floor": cpu["floor"], "imports": imports, "decode_both": both, "decode_ref": ref,
            "design_floor": design, "ratio": design / cpu["floor"], "load": max(loads)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[8000, 20000])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp"))
    args = ap.parse_args()
    print(machine_description())
    print("| size | floor CPU (s) | imports | decode REF + TBA | decode REF | design floor (s) | ratio | "
          "goals under it | load |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for size in args.sizes:
        p = parts(size, args.rounds, args.work)
        under = ", ".join(f"`{m}` {g}x" for m, g in GOALS.items() if g < p["ratio"]) or "none"
        print(f"| {size}^2 | {p['floor']:.1f} | {p['imports']:.1f} | {p['decode_both']:.1f} | {p['decode_ref']:.1f} "
              f"| {p['design_floor']:.1f} | {p['ratio']:.2f} | {under} | {p['load']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
