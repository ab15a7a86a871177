"""Peak memory of the uncertainty workflow at growing sizes, on the synthetic glacier set.

For each size ``n`` (pixels a side, 20 m; default 2000 and 4000), one subprocess measured by
:func:`_measure.measure` (wall time, CPU seconds, peak RSS summed over the process tree,
sampled every 0.2 s) runs upstream 0.2.3's workflow on :func:`xdem.examples.glaciers.glacier_set`
(lazy, chunks of 512):

1. slope of the reference DEM; ``infer_heteroscedasticity_from_stable(ddem, [slope],
   unstable_mask=outlines)`` (exact binned NMAD, two-step standardisation);
2. the error map reduced to its sum (computed block by block, never held);
3. ``infer_spatial_correlation_from_stable(ddem, ["spherical", "gaussian"], errors=errors,
   subsample=2000)``;
4. ``spatial_error_propagation`` over the first 10 glacier outlines and one disk area.

The workflow's memory should depend on the chunk size, not on ``n``: the peak should stay flat
as ``n`` grows (only the outlines table grows, 3 glaciers per 8 km tile). The 1-minute load
average before and after is reported (the machine is shared).

Run: ``python benchmarks/uncertainty_memory.py [--sizes 2000 4000 8000] [--chunks 512]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import REPO, fmt_bytes, measure  # noqa: E402

WORKFLOW = """
import json, sys, time
import numpy as np
import xdem
from xdem import spatialstats as ss
from xdem.examples.glaciers import glacier_set
n, chunks = int(sys.argv[1]), int(sys.argv[2])
t0 = time.perf_counter()
g = glacier_set((n, n), chunks=chunks)
slope = xdem.terrain.slope(g.ref)
errors, df, fun = ss.infer_heteroscedasticity_from_stable(g.ddem, [slope], unstable_mask=g.outlines,
                                                          list_var_names=["slope"], list_var_bins=[np.arange(0.0, 75.0, 5.0)])
t1 = time.perf_counter()
total = float(errors.sum().compute())
t2 = time.perf_counter()
ev, params, rho = ss.infer_spatial_correlation_from_stable(g.ddem, ["spherical", "gaussian"], unstable_mask=g.outlines,
                                                            errors=errors, subsample=2000, random_state=42)
t3 = time.perf_counter()
areas = [g.outlines.iloc[[i]] for i in range(min(10, len(g.outlines)))] + [1e7]
se = ss.spatial_error_propagation(areas, errors, params)
t4 = time.perf_counter()
print(json.dumps({"glaciers": len(g.outlines), "heterosc_s": t1 - t0, "error_map_s": t2 - t1, "variogram_s": t3 - t2,
                  "propagation_s": t4 - t3, "range": float(params["range"].iloc[-1]), "se_first": se[0],
                  "sigma_20deg": float(fun((np.array([20.0]),))[0]), "mean_error": total / n / n}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 4000])
    parser.add_argument("--chunks", type=int, default=512)
    args = parser.parse_args()
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    print(f"{'size':>7} {'wall s':>8} {'cpu s':>8} {'peak RSS':>10} {'load':>11}  steps (s) and numbers")
    for n in args.sizes:
        res = measure([sys.executable, "-c", WORKFLOW, str(n), str(args.chunks)], env=env)
        if res["returncode"] != 0:
            print(f"{n:>7} failed ({res['returncode']}): {res['stderr'].strip().splitlines()[-1:]}")
            continue
        out = json.loads(res["stdout"].strip().splitlines()[-1])
        load = "{:.2f}->{:.2f}".format(*res["load_avg"])
        steps = " ".join(f"{k}={v:.3g}" for k, v in out.items())
        print(f"{n:>7} {res['wall_s']:8.1f} {res['cpu_s']:8.1f} {fmt_bytes(res['peak_rss_bytes']):>10} {load:>11}  {steps}",
              flush=True)


if __name__ == "__main__":
    main()
