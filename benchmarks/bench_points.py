"""Benchmark: ``xdem coreg POINTS.csv TBA.tif`` with millions of reference points (issue 15).

The DEM to align is the cached shifted pair of ``bench_coreg.py`` (``coreg_<size>/tba.tif``,
made once); the reference points are drawn along north-south ground tracks (3 beams, 90 m
apart) over the pair's reference DEM, their elevation that DEM interpolated at them (exact for
the reference, so the recovered shift is the pair's). The points are written once as CSV
(``x, y, z``; the fastest table pandas reads without pyarrow) and the CLI is measured in a
subprocess: wall time, CPU, peak RSS of the process tree (:func:`_measure.measure`), with
``/proc/loadavg``.

Target (issue 15): 10 million points against a 20000^2 DEM, peak RSS <= 1.5 GB::

    python benchmarks/bench_points.py --size 20000 --points 10000000
    python benchmarks/bench_points.py --size 2000 --points 200000      # a quick check
    python benchmarks/bench_points.py --size 4000 --points 1000000 --format parquet   # or las
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import CACHE_DIR, fmt_bytes, machine_description, measure  # noqa: E402


def track_points(ref_path: str, n_points: int, *, seed: int = 0) -> Path:
    """``n_points`` along 3-beam tracks over the DEM ``ref_path``, z = the DEM at them; written
    once as CSV in the cache (x, y, z in the DEM's CRS)."""
    import dask

    import xdem
    from xdem.io.grid import dask_data
    from xdem.points import dem_at_points, pixel_positions

    out = CACHE_DIR / f"points_{Path(ref_path).parent.name}_{n_points}.csv"
    if out.exists():
        return out
    dem = xdem.open_dem(ref_path)
    t = dem.rio.transform()
    ny, nx = dem.shape
    width, height = nx * abs(t.a), ny * abs(t.e)
    rng = np.random.default_rng(seed)
    n_tracks = max(1, int(round(n_points * 20.0 / height / 3)))  # a point every ~20 m per beam
    per_beam = int(np.ceil(n_points / (3 * n_tracks)))
    xs, ys = [], []
    for k in range(n_tracks):
        cx = t.c + (k + rng.uniform(0.1, 0.9)) * width / n_tracks
        along = np.linspace(0.01, 0.99, per_beam) * height
        for off in (-90.0, 0.0, 90.0):
            xs.append(np.full(per_beam, cx + off) + rng.normal(0.0, 0.5, per_beam))
            ys.append(t.f - along)
    x, y = np.concatenate(xs)[:n_points], np.concatenate(ys)[:n_points]
    keep = (x > t.c + abs(t.a)) & (x < t.c + width - abs(t.a))
    x, y = x[keep], y[keep]
    with dask.config.set(scheduler="threads"):
        z, _, _ = dem_at_points(dask_data(dem), *pixel_positions(dem, x, y), resampling="lagrange")
    ok = np.isfinite(z)
    import pandas as pd

    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    pd.DataFrame({"x": x[ok], "y": y[ok], "z": z[ok]}).to_csv(tmp, index=False, float_format="%.4f")
    os.replace(tmp, out)
    return out


def as_format(csv: Path, fmt: str, crs: str) -> Path:
    """The cached CSV points converted once to ``fmt``: ``parquet`` (x, y, z columns, row
    groups of a million) or ``las`` (LAS 1.4, millimetre scales, the CRS in the header)."""
    if fmt == "csv":
        return csv
    out = csv.with_suffix(f".{fmt}")
    if out.exists():
        return out
    import pandas as pd

    df = pd.read_csv(csv)
    tmp = out.with_name("tmp_" + out.name)
    if fmt == "parquet":
        df.to_parquet(tmp, row_group_size=1_000_000, index=False)
    else:
        import laspy
        from pyproj import CRS

        header = laspy.LasHeader(point_format=6, version="1.4")
        header.scales = np.array([0.001, 0.001, 0.001])
        header.offsets = np.array([df["x"].min(), df["y"].min(), 0.0]).round()
        header.add_crs(CRS.from_user_input(crs))
        las = laspy.LasData(header)
        las.x, las.y, las.z = df["x"].to_numpy(), df["y"].to_numpy(), df["z"].to_numpy()
        las.write(tmp)
    os.replace(tmp, out)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=20000, help="square DEM side in pixels")
    parser.add_argument("--points", type=int, default=10_000_000, help="number of reference points")
    parser.add_argument("--method", default="nuthkaab", help="xdem coreg --method")
    parser.add_argument("--format", default="csv", choices=("csv", "parquet", "las"),
                        help="file format of the points (converted once from the cached CSV)")
    args = parser.parse_args(argv)
    from bench_coreg import SHIFT, coreg_pair

    pair = coreg_pair(args.size)
    pts = as_format(track_points(pair["ref"], args.points), args.format, _crs_of(pair["tba"]))
    out = CACHE_DIR / f"points_aligned_{args.size}.tif"
    cmd = [sys.executable, "-m", "xdem", "coreg", str(pts), pair["tba"], "-o", str(out), "--overwrite", "--json",
           "--points-crs", _crs_of(pair["tba"]), "--method", args.method, "-q"]
    res = measure(cmd)
    load = Path("/proc/loadavg").read_text().split()[:3]
    doc = json.loads(res["stdout"]) if res.get("returncode", 1) == 0 else None
    print(f"{args.points} points ({args.format}) vs {args.size}^2 DEM, --method {args.method}")
    print(f"  wall {res['wall_s']:.1f} s, CPU {res.get('cpu_s', float('nan')):.1f} s, peak RSS "
          f"{fmt_bytes(res['peak_rss_bytes'])}, load {' '.join(load)}")
    if doc is None:
        print(res.get("stderr", "")[-2000:])
        raise SystemExit(1)
    step = doc["steps"][0]
    print(f"  shift found ({step['shift_x']:.4f}, {step['shift_y']:.4f}, {step['shift_z']:.4f}); "
          f"the pair's truth: apply ({-SHIFT[0]}, {-SHIFT[1]}, ...) plus its tilt")
    print(f"  timing {doc['timing']}; points {doc['points']['count']}, outliers {doc['points']['n_outliers']}")
    print(f"  machine: {machine_description()}")


def _crs_of(path: str) -> str:
    import rasterio

    with rasterio.open(path) as src:
        return src.crs.to_string()


if __name__ == "__main__":
    main()
