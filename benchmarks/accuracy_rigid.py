"""Accuracy of the rigid methods on the two cases of issue 13 and the rough case of issue 28,
against analytic truth.

Not a timed benchmark: it prints, per case and method, the rotation error (degrees, per axis),
the translation error at the fitted centre, the NMAD of dh after a cubic apply (interior, against
the reference evaluated exactly) and the CPU seconds of the fit. The numbers in
``docs/rigid.md`` (section Accuracy) come from this script.

* rotation: 1000^2 at 5 m, rough terrain (``tests/truth.SineTerrain``, shortest waves 50 m),
  rotations (0.02, -0.03, 0.3) deg about (x, y, z) and (1.5, -2.0, 0.8) m about the centre;
* steep: 2000^2 at 5 m, steep terrain (shortest waves 40 m, relief std about 150 m), pure
  shift (3.17, -1.42, 0.6) m;
* pixel: 2000^2 at 5 m, steep terrain whose power-law spectrum reaches the pixel scale
  (``tests/truth.pixel_scale_terrain``: waves 12.5 m to 3 km, relief std about 155 m), the same
  pure shift (issue 28's accuracy floor).

The first row of each case applies the true transform itself (cubic): the NMAD that resampling
alone leaves, under which no method can go.

Run: ``python benchmarks/accuracy_rigid.py [--case rotation steep pixel] [--only LABEL ...]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from affine import Affine

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from truth import SineTerrain, dem_of, nmad, pixel_scale_terrain, rigid_dem_of  # noqa: E402

import xdem.coreg as C  # noqa: E402
from xdem.kernels.rigid import rigid_matrix, rotation_matrix, rotations_of, split_matrix  # noqa: E402

CRS = "EPSG:32633"
RES = 5.0
X0, Y0 = 500000.0, 4000000.0
T = Affine(RES, 0.0, X0, 0.0, -RES, Y0)
ROUGH = SineTerrain(crs=CRS, origin=(X0, Y0), shortest=50.0)
STEEP = SineTerrain(crs=CRS, origin=(X0, Y0), shortest=40.0, relief=0.22)  # relief std ~150 m at 2000^2
PIXEL = pixel_scale_terrain(crs=CRS, origin=(X0, Y0), resolution=RES)  # waves down to 2.5 pixels
CASES = ("rotation", "steep", "pixel")

METHODS = {
    "the truth, given (resampling floor)": None,
    "ICP()": lambda: C.ICP(),
    "ICP(method='point_to_point')": lambda: C.ICP(method="point_to_point"),
    "LZD()": lambda: C.LZD(),
    "LZD(fit_interpolation='lagrange6')": lambda: C.LZD(fit_interpolation="lagrange6"),
    "LZD(fit_interpolation='lagrange8')": lambda: C.LZD(fit_interpolation="lagrange8"),
    "NuthKaab() + LZD()": lambda: C.NuthKaab() + C.LZD(),
    "NuthKaab() + LZD(fit_interpolation='lagrange8')": lambda: C.NuthKaab() + C.LZD(fit_interpolation="lagrange8"),
    "NuthKaab() + ICP()": lambda: C.NuthKaab() + C.ICP(),
    "NuthKaab()": lambda: C.NuthKaab(),
    "NuthKaab(resampling='cubic')": lambda: C.NuthKaab(resampling="cubic"),
    "DhMinimize()": lambda: C.DhMinimize(),
}


def _case(name: str):
    if name == "rotation":
        n = 1000
        centre = np.array([X0 + n * RES / 2, Y0 - n * RES / 2, 1000.0])
        m = rigid_matrix(rotation_matrix(0.02, -0.03, 0.3), np.array([1.5, -2.0, 0.8]), centre)
        ref = rigid_dem_of(ROUGH, transform=T, shape=(n, n), matrix=np.eye(4), chunks=256)
        tba = rigid_dem_of(ROUGH, transform=T, shape=(n, n), matrix=m, chunks=256)
        return ref, tba, np.linalg.inv(m)
    n = 2000
    move = (3.17, -1.42, 0.6)
    terrain = STEEP if name == "steep" else PIXEL
    ref = dem_of(terrain, crs=CRS, transform=T, shape=(n, n), chunks=512)
    tba = dem_of(terrain, crs=CRS, transform=T, shape=(n, n), move=move, chunks=512)
    truth = np.eye(4)
    truth[:3, 3] = [-v for v in move]
    return ref, tba, truth


def run(case: str, only: list[str] | None = None) -> None:
    ref, tba, truth = _case(case)
    ref, tba = ref.persist(), tba.persist()
    r = ref.values
    n = r.shape[0]
    inner = (slice(n // 20, -n // 20),) * 2
    print(f"\n{case}: {n}^2, relief std {np.nanstd(r):.0f} m, NMAD before {nmad(tba.values - r):.3f} m")
    for label, make in METHODS.items():
        if only and not any(o in label for o in only):
            continue
        t0 = time.process_time()
        if make is None:  # the exact transform, applied with cubic: what resampling alone leaves
            c = C.RigidTransform.from_matrix(truth, crs=CRS).set_params(resampling="cubic")
        else:
            c = make().fit(ref, tba)
        cpu = time.process_time() - t0
        mat = c.to_matrix()
        centre = np.array([X0 + n * RES / 2, Y0 - n * RES / 2, float(np.nanmedian(r))])
        tr, tt = split_matrix(truth, centre)
        fr, ft = split_matrix(mat, centre)
        rot_err = np.subtract(rotations_of(fr), rotations_of(tr))
        dh = (c.apply(tba).values - r)[inner]
        print(f"  {label:48s} rot err {np.abs(rot_err).max():.1e} deg  translation err "
              f"{np.abs(ft - tt).max():.5f} m  NMAD after {nmad(dh):.4f} m  valid {np.isfinite(dh).mean():.3f}  "
              f"fit {cpu:.1f} s CPU", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--case", nargs="+", default=list(CASES), choices=CASES)
    p.add_argument("--only", nargs="+", default=None, help="rows whose label contains one of these")
    args = p.parse_args()
    for case in args.case:
        run(case, args.only)


if __name__ == "__main__":
    main()
