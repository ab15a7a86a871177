"""Run GlacioHack/xdem 0.2.3's own gallery examples and doc-page code against this package.

Issue 26's measure: how many of upstream's 16 gallery examples (``examples/basic``,
``examples/advanced``) and of the code of its quick-start, coregistration and bias-correction
pages run here with only their data loading changed. Upstream's code is not part of this
repository: point the script at a checkout of upstream at tag v0.2.3::

    git clone --branch v0.2.3 https://github.com/GlacioHack/xdem upstream-xdem
    python benchmarks/upstream_gallery.py upstream-xdem [--only NAME] [--timeout 300]

Each script runs in a fresh temporary folder with ``MPLBACKEND=Agg``. The only edits made to
upstream's code are the data loading: its six Longyearbyen names become the bundled
stand-ins (:mod:`xdem.examples.standins`); for the ICP example, its crop window (in
Longyearbyen coordinates) becomes one inside the lidar DEM, and so does the DEM-collection
example's map window; upstream's glacier names become the stand-ins' three; for the blockwise example the
tile size becomes 200 pixels (upstream's 500 fit once in the 400-pixel stand-in); the patches method's areas
(for 20 m pixels) are scaled to the stand-ins' 1 m pixels. A doc page's code cells run in
order as one script. Issue 27's modules (dDEMs, volumes, DEM series, uncertainty, vertical
datums) are built, so every script runs whole; :data:`ISSUE_27` only tags, in the report,
the scripts that use them. The result is one line per script (``ran`` or the last line of its
error) and the count, also written as JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: upstream name -> bundled stand-in (the data loading: the only change made to upstream's code)
NAMES = {
    '"longyearbyen_ref_dem"': '"lidar_ref_dem"',
    '"longyearbyen_tba_dem_coreg"': '"lidar_tba_dem_coreg"',
    '"longyearbyen_tba_dem"': '"lidar_tba_dem"',
    '"longyearbyen_glacier_outlines_2010"': '"lidar_outlines_2010"',
    '"longyearbyen_glacier_outlines"': '"lidar_outlines"',
    '"longyearbyen_ddem"': '"lidar_ddem"',
}

#: data-specific lines: a crop window in Longyearbyen's coordinates -> one inside the lidar DEM
DATA_LINES = {
    "subset_extent = [523000, 8660000, 529000, 8665000]":
        "subset_extent = [429302.3, 5150535.4, 429602.3, 5150835.4]",
    # upstream's default tiles of 500 pixels fit once in the 400-pixel stand-in: 200 gives a 2 x 2 grid
    "xdem.coreg.BlockwiseCoreg(xdem.coreg.NuthKaab(), mp_config=mp_config)":
        "xdem.coreg.BlockwiseCoreg(xdem.coreg.NuthKaab(), mp_config=mp_config, block_size_fit=200)",
    "block_size_fit=500,": "block_size_fit=200,",  # the coregistration page's blockwise cell
    # upstream's glacier names (RGI outlines of Svalbard) -> the stand-ins' three outlines
    '"Brombreen"': '"north glacier"', '"Medalsbreen"': '"east glacier"', '"Svendsenbreen"': '"south glacier"',
    "'Scott Turnerbreen'": "'north glacier'",
    "scott_extent = [518600, 523800, 8666600, 8672300]": "scott_extent = [429280, 429440, 5150720, 5150860]",
    # the patches' areas, for 20 m pixels (4000 m2 = 10 pixels): the same pixel counts on the stand-ins' 1 m pixels
    "areas_emp = [4000 * 2 ** (i) for i in range(10)]": "areas_emp = [10 * 2 ** (i) for i in range(10)]",
}

#: what upstream's code calls that belongs to issue 27 (dDEMs, DEM series, volumes, uncertainty, vertical datums):
#: built now; the names only tag, in the report, the scripts that use them
ISSUE_27 = (
    "longyearbyen_ddem", "longyearbyen_tba_dem_coreg", "longyearbyen_glacier_outlines_2010", "DEMCollection",
    "dDEM", "interpolate(", "to_vcrs", "set_vcrs", "infer_heteroscedasticity", "infer_spatial_correlation",
    "sample_empirical_variogram", "spatial_error_propagation", "number_effective_samples", "volume.",
)

EXAMPLES = "examples/basic", "examples/advanced"
PAGES = "quick_start", "coregistration", "biascorr"

_CELL = re.compile(r"```\{code-cell\}[^\n]*\n(.*?)```", re.S)


def page_cells(markdown: str) -> list[str]:
    """The code cells of a MyST-NB page, in order, without their option lines."""
    cells = []
    for body in _CELL.findall(markdown):
        lines = [ln for ln in body.splitlines() if not ln.startswith(":")]
        if lines and lines[0].strip() == "---":  # a YAML options block
            end = lines.index("---", 1) if "---" in lines[1:] else 0
            lines = lines[end + 1:]
        cells.append("\n".join(lines))
    return cells


def needs_27(code: str) -> list[str]:
    """The names of issue 27 that ``code`` uses."""
    return [name for name in ISSUE_27 if name in code]


_DATA = Path(__file__).resolve().parents[1] / "xdem" / "examples" / "data"
#: the stand-ins as file paths, for an interpreter whose xdem is upstream's (it does not know their names)
PATHS = {
    '"lidar_ref_dem"': _DATA / "lidar_dem.tif",
    '"lidar_tba_dem"': _DATA / "lidar_tba_dem.tif",
    '"lidar_outlines"': _DATA / "lidar_outlines.gpkg",
    '"lidar_tba_dem_coreg"': _DATA / "lidar_tba_dem_coreg.tif",
    '"lidar_outlines_2010"': _DATA / "lidar_outlines_2010.gpkg",
    '"lidar_ddem"': _DATA / "lidar_ddem.tif",
}


def adapted(code: str, literal_paths: bool = False) -> str:
    """Upstream's code with its data loading changed (and nothing else)."""
    for old, new in {**NAMES, **DATA_LINES}.items():
        code = code.replace(old, new)
    if literal_paths:
        for name, path in PATHS.items():
            code = code.replace(f"xdem.examples.get_path({name})", repr(str(path)))
    return code


def scripts(upstream: Path, literal_paths: bool = False) -> dict[str, str]:
    """Each script's adapted code (a doc page: its code cells in order)."""
    out = {}
    for folder in EXAMPLES:
        for path in sorted((upstream / folder).glob("plot_*.py")):
            out[f"{folder}/{path.name}"] = adapted(path.read_text(), literal_paths)
    for page in PAGES:
        cells = [adapted(c, literal_paths) for c in page_cells((upstream / "doc" / "source" / f"{page}.md").read_text())]
        out[f"doc/{page}.md"] = "\n\n".join(cells) + "\n"
    return out


def run_one(code: str, timeout: float, python: str = sys.executable) -> tuple[str, float]:
    with tempfile.TemporaryDirectory(prefix="xdem-upstream-gallery-") as tmp:
        work = Path(tmp, "work", "gallery")  # upstream's logging example writes to ../xdem_example.log
        work.mkdir(parents=True)
        Path(work, "script.py").write_text(code)
        env = {**os.environ, "MPLBACKEND": "Agg"}
        if python != sys.executable:  # another interpreter imports its own xdem, not this checkout
            env.pop("PYTHONPATH", None)
        t0 = time.perf_counter()
        try:
            proc = subprocess.run([python, "script.py"], cwd=work, env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return f"timeout after {timeout:.0f} s", time.perf_counter() - t0
        elapsed = time.perf_counter() - t0
    if proc.returncode == 0:
        return "ran", elapsed
    last = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    return (last[-1] if last else f"exit {proc.returncode}"), elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("upstream", type=Path, help="a checkout of GlacioHack/xdem at tag v0.2.3")
    parser.add_argument("--only", help="run the scripts whose name contains this")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--python", help="another interpreter, e.g. one with upstream's xdem 0.2.3 installed "
                                         "(the stand-ins are then given as file paths)")
    args = parser.parse_args(argv)
    results = {}
    for name, code in scripts(args.upstream, literal_paths=bool(args.python)).items():
        if args.only and args.only not in name:
            continue
        outcome, elapsed = run_one(code, args.timeout, args.python or sys.executable)
        results[name] = {"outcome": outcome, "seconds": round(elapsed, 1), "issue_27": needs_27(code)}
        tag = "[27] " if needs_27(code) else ""
        print(f"{name:70s} {elapsed:6.1f} s  {tag}{outcome[:150]}", flush=True)
    ran = sum(r["outcome"] == "ran" for r in results.values())
    of_27 = {k: r for k, r in results.items() if r["issue_27"]}
    print(f"{ran} of {len(results)} ran unchanged but for their data loading; "
          f"of the {len(of_27)} that use issue 27's modules, {sum(r['outcome'] == 'ran' for r in of_27.values())} ran")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
