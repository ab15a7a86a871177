"""The same upstream-API calls under this package and under GlacioHack/xdem 0.2.3: their numbers side by side.

Issue 26: where both run, numbers within 0.01 m (shifts) of upstream's on the same data, or
better against known truth. This script uses only upstream 0.2.3's API on the bundled
stand-ins (passed as file paths, so that upstream's package can read them too) and prints one
JSON object. Run it with this package's interpreter and with one where upstream is
installed (``pip install xdem==0.2.3`` in another virtual environment), then compare::

    python benchmarks/upstream_numbers.py > ours.json
    /path/to/upstream-venv/bin/python benchmarks/upstream_numbers.py > upstream.json
    python benchmarks/upstream_numbers.py --compare ours.json upstream.json

The truth: the stand-in ``lidar_tba_dem`` is the reference moved by (3.27, -1.64, 2.5) m, so
the correction to find on stable terrain is (-3.27, +1.64, -2.5) m; the rotated copies are
made with ``apply_matrix`` by a known matrix.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "xdem" / "examples" / "data"
TRUTH = {"shift_x": -3.27, "shift_y": 1.64, "shift_z": -2.5}


def _shifts(coreg: object) -> list[float]:
    matrix = np.asarray(coreg.to_matrix())  # type: ignore[attr-defined]
    return [float(matrix[0, 3]), float(matrix[1, 3]), float(matrix[2, 3])]


def run() -> dict[str, object]:
    import geoutils as gu

    import xdem

    ref = xdem.DEM(str(DATA / "lidar_dem.tif"))
    tba = xdem.DEM(str(DATA / "lidar_tba_dem.tif"))
    stable = ~gu.Vector(str(DATA / "lidar_outlines.gpkg")).create_mask(ref)
    out: dict[str, object] = {"package": f"xdem {xdem.__version__}"}

    nk = xdem.coreg.NuthKaab()
    nk.fit(ref, tba, inlier_mask=stable, random_state=42)
    out["nuth_kaab_stable"] = _shifts(nk)
    nk_all = xdem.coreg.NuthKaab()
    nk_all.fit(ref, tba, random_state=42)
    out["nuth_kaab_all"] = _shifts(nk_all)
    vs = xdem.coreg.VerticalShift()
    vs.fit(ref, ref + 10, random_state=42)
    out["vertical_shift"] = _shifts(vs)
    dhm = xdem.coreg.DhMinimize()
    dhm.fit(ref, tba, inlier_mask=stable, random_state=42)
    out["dh_minimize_stable"] = _shifts(dhm)

    # a known rotation and translation (upstream's conventions: degrees, P' = M P about the centroid)
    matrix = xdem.coreg.matrix_from_translations_rotations(2, 1, 5, 0.2, 0.1, 0)
    centroid = [ref.bounds.left + 200, ref.bounds.top - 200, 395.0]
    moved = xdem.coreg.apply_matrix(ref, matrix, centroid=centroid)
    for name, coreg in (("icp", xdem.coreg.ICP()), ("lzd", xdem.coreg.LZD()), ("cpd", xdem.coreg.CPD())):
        coreg.fit(ref, moved, random_state=42)
        aligned = coreg.apply(moved)
        out[f"{name}_rotations"] = [float(v) for v in coreg.to_rotations()]
        out[f"{name}_nmad_after"] = float(gu.stats.nmad((aligned - ref).data))
    out["rotation_truth"] = [-0.2, -0.1, 0.0]
    out["nmad_before_rotation"] = float(gu.stats.nmad((moved - ref).data))

    deramp = xdem.coreg.Deramp(poly_order=2)
    yy, xx = np.mgrid[0:ref.height, 0:ref.width]
    dome = 3.0 * ((xx - 200.0) ** 2 + (yy - 200.0) ** 2) / 200.0**2 - 1.0
    deramp.fit(ref, ref + dome, inlier_mask=stable, random_state=42)
    corrected = deramp.apply(ref + dome)
    out["deramp_max_residual"] = float(np.nanmax(np.abs((corrected - ref).data.filled(np.nan))))
    return out


def compare(ours: dict, upstream: dict) -> int:
    print(f"{'':28s} {'ours':>28s} {'upstream':>28s} {'|ours - upstream|':>18s}")
    for key in ours:
        if key == "package" or key not in upstream:
            continue
        a, b = np.atleast_1d(ours[key]).astype(float), np.atleast_1d(upstream[key]).astype(float)
        gap = float(np.max(np.abs(a - b)))
        print(f"{key:28s} {str(np.round(a, 4)):>28s} {str(np.round(b, 4)):>28s} {gap:18.4f}")
    print(f"truth of the shifts: {TRUTH}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("OURS", "UPSTREAM"))
    args = parser.parse_args(argv)
    if args.compare:
        return compare(*(json.loads(p.read_text()) for p in args.compare))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run()
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
