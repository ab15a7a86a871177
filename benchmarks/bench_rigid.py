"""Benchmark the rigid coregistrations (``xdem coreg --method lzd|icp|nuthkaab+lzd``) at scale against
the read-once-write-once floor (a GDAL COG copy), and check the transform they recover.

Inputs (made once, cached under ``benchmarks/_cache/rigid_<size>/``): ``ref.tif`` is the fractal
reference of the other benchmarks (``xdem.examples.synthetic.fractal_terrain(size, seed=0,
resolution=2.0)``, hard-linked from a cached pair when one exists), ``tba.tif`` is that reference
moved by a known rigid transform (:data:`ROTATIONS` about x, y, z, then :data:`TRANSLATION`, about
the grid centre at the reference's median elevation), applied out of core with
``RigidTransform.from_rotations(...).set_params(resampling="cubic").apply(ref)`` and written with
``xdem.write_cog``; ``truth.json`` (written last) holds the transform the coregistration must find:
the inverse, as rotations and translation about the same centre and as a full 4 x 4 matrix.

For each size, each in a fresh subprocess measured by :func:`_measure.measure` (wall time, peak
RSS summed over the process tree sampled every 0.2 s, CPU seconds, load average):

* **xdem**: ``xdem coreg REF TBA -o OUT --method <m> --quiet --json-out J`` for each method; the
  steps in ``J`` are composed into one 4 x 4 matrix (a step with ``matrix`` contributes it, a
  translation step its ``shift_x/y/z``) and compared with the truth: rotation angles (which do
  not depend on the centre), the translation of the truth's centre, and the largest distance
  between where the fitted and the true matrix send the grid's corners and centre at the median
  elevation (independent of the centre each method chose);
* **floor**: the GDAL COG copy of TBA (:data:`bench_coreg.FLOOR`, the output options of
  ``xdem.write_cog``).

The table is printed and written to ``docs/performance.md`` (section ``rigid``).

Run: ``python benchmarks/bench_rigid.py [--sizes 8000 20000] [--method lzd icp nuthkaab+lzd]
[--no-doc] [--no-floor] [--generate-only] [--doc-only]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import CACHE_DIR, fmt_bytes, machine_description, measure, update_doc_section  # noqa: E402
from bench_coreg import FLOOR, _warm  # noqa: E402

SIZES = [8000, 20000]
METHODS = ["lzd", "icp", "nuthkaab+lzd"]
#: Rotations (degrees, ``R = Rz Ry Rx``) moving the reference into tba. 0.05 deg about z turns the
#: edges of a 20000^2 grid of 2 m pixels by 8.7 px (3.5 px at 8000^2): far beyond what a translation
#: absorbs, yet the grids still overlap almost wholly. 0.005 and -0.004 deg about x and y tilt the
#: surface by 8.7e-5 and 7.0e-5 m/m: +-1.7 m and +-1.4 m of elevation at the 20000^2 edges (0.7 and
#: 0.6 m at 8000^2), the size of the tilts between real DEMs, and they shift points
#: horizontally by (elevation - centre) x angle, a few centimetres over the relief.
ROTATIONS = (0.005, -0.004, 0.05)
#: Translation (m) of the centre after the rotation: 1.65 x 1.05 pixels, 1.5 m up.
TRANSLATION = (3.3, -2.1, 1.5)
SEED = 0
RESOLUTION = 2.0
RESAMPLING = "cubic"
#: Issue 13: peak RSS of all processes <= 1.5 GB at 20000^2 (GB = 1e9 bytes, 1.40 GiB).
TARGET_RSS = 1.5e9
#: Issue 13's rotation accuracy (stated for 1000^2 at 5 m): a reference point, not a target here.
TARGET_ROT_DEG = 0.0005
RESULTS = CACHE_DIR / "rigid_results.json"


# --------------------------------------------------------------------------------------------
# the transform and its truth


def _rigid(rot_deg: tuple[float, float, float], translation: Any, centre: Any) -> Any:
    import numpy as np

    from xdem.kernels.rigid import rigid_matrix, rotation_matrix

    return rigid_matrix(rotation_matrix(*rot_deg), np.asarray(translation, dtype=float), np.asarray(centre, dtype=float))


def truth_of(size: int, centroid: list[float], crs: str) -> dict:
    """The forward transform (ref -> tba) and the one a coregistration must find (tba -> ref)."""
    import numpy as np

    from xdem.kernels.rigid import rotation_matrix, rotations_of, split_matrix

    c = np.asarray(centroid, dtype=float)
    fwd = _rigid(ROTATIONS, TRANSLATION, c)
    r = rotation_matrix(*ROTATIONS)
    # inverse of P -> R (P - c) + c + t about the same c: P -> R^T (P - c) + c - R^T t
    inv = np.eye(4)
    inv[:3, :3] = r.T
    inv[:3, 3] = c - r.T @ c - r.T @ np.asarray(TRANSLATION, dtype=float)
    assert np.allclose(inv @ fwd, np.eye(4), rtol=0, atol=1e-6)  # 5e6 m coordinates: ~1e-9 m rounding
    rinv, tinv = split_matrix(inv, c)
    rx, ry, rz = rotations_of(rinv)
    return {
        "generator": "benchmarks/bench_rigid.py",
        "size": size, "shape": [size, size], "seed": SEED, "resolution": RESOLUTION, "crs": crs,
        "resampling": RESAMPLING,
        "forward": {"rotations_deg": list(ROTATIONS), "translation": list(TRANSLATION), "centroid": list(centroid),
                    "matrix": fwd.tolist()},
        "centroid": list(centroid),
        "rotation_x": rx, "rotation_y": ry, "rotation_z": rz,
        "shift_x": float(tinv[0]), "shift_y": float(tinv[1]), "shift_z": float(tinv[2]),
        "matrix": inv.tolist(),
        "convention": "tba = forward.matrix applied to the reference's points (P -> R (P - c) + c + t, R = Rz Ry Rx, "
                      "then resampled with cubic); matrix / rotation_* / shift_* = the inverse, the transform to APPLY "
                      "to tba, about the same centroid",
    }


def _params(t: dict) -> dict:
    """What the cached pair depends on (the centroid follows from the reference)."""
    return {k: t.get(k) for k in ("shape", "seed", "resolution", "resampling")} | {
        "rot": t.get("forward", {}).get("rotations_deg"), "tr": t.get("forward", {}).get("translation")}


# --------------------------------------------------------------------------------------------
# inputs


def _link_ref(size: int, dst: Path) -> bool:
    """Hard-link a cached reference of the same (size, seed, resolution) to ``dst`` if any."""
    for cand in (CACHE_DIR / f"pair_{size}_s{SEED}", CACHE_DIR / f"pair_{size}_s{SEED}_tilt", CACHE_DIR / f"coreg_{size}"):
        try:
            t = json.loads((cand / "truth.json").read_text())
        except (OSError, ValueError):
            continue
        if t.get("shape") == [size, size] and t.get("seed") == SEED and t.get("resolution") == RESOLUTION:
            tmp = dst.with_name(".xdem-tmp-ref-link.tif")
            tmp.unlink(missing_ok=True)
            os.link(cand / "ref.tif", tmp)
            os.replace(tmp, dst)
            print(f"  ref: hard-linked {cand / 'ref.tif'}", flush=True)
            return True
    return False


def make_ref(size: int) -> None:
    """Generate the fractal reference (run in a measured subprocess: ``--make ref SIZE``)."""
    from xdem.gdal_cache import GDAL_CACHE_MB

    os.environ.setdefault("GDAL_CACHEMAX", str(GDAL_CACHE_MB))  # as the xdem CLI does (MiB), before GDAL's first read
    from xdem.examples.synthetic import fractal_terrain
    from xdem.io.cog import write_cog

    write_cog(fractal_terrain(size, seed=SEED, resolution=RESOLUTION), CACHE_DIR / f"rigid_{size}" / "ref.tif",
              overwrite=True)


def _centroid(ref_path: Path) -> tuple[list[float], str]:
    """Grid centre (x, y) and the median elevation of a 512^2 decimated read (overviews), rounded to 1 m."""
    import numpy as np
    import rasterio

    with rasterio.open(ref_path) as src:
        t, w, h = src.transform, src.width, src.height
        z = src.read(1, out_shape=(min(512, h), min(512, w)), masked=True).astype(float).filled(np.nan)
        crs = src.crs.to_string()
    return [t.c + t.a * w / 2, t.f + t.e * h / 2, float(round(np.nanmedian(z)))], crs


def make_tba(size: int) -> None:
    """Move the reference by the forward transform, out of core (``--make tba SIZE``); write truth.json last."""
    from xdem.gdal_cache import GDAL_CACHE_MB

    os.environ.setdefault("GDAL_CACHEMAX", str(GDAL_CACHE_MB))  # MiB
    import xdem
    from xdem.coreg import RigidTransform

    folder = CACHE_DIR / f"rigid_{size}"
    centroid, crs = _centroid(folder / "ref.tif")
    truth = truth_of(size, centroid, crs)
    ref = xdem.open_dem(folder / "ref.tif")
    fwd = RigidTransform.from_rotations(*ROTATIONS, translation=TRANSLATION, centroid=centroid, crs=ref.rio.crs)
    fwd.set_params(resampling=RESAMPLING)
    xdem.write_cog(fwd.apply(ref), folder / "tba.tif", overwrite=True)
    tmp = folder / ".xdem-tmp-truth.json"
    tmp.write_text(json.dumps(truth, indent=2) + "\n")
    os.replace(tmp, folder / "truth.json")


def _make(stage: str, size: int) -> dict:
    r = measure([sys.executable, str(Path(__file__).resolve()), "--make", stage, str(size)])
    if r["returncode"] != 0:
        raise SystemExit(f"making {stage} {size}^2 failed:\n{r['stderr'][-3000:]}")
    print(f"  {stage}: made in {r['wall_s']:.0f} s wall, {r['cpu_s']:.0f} s CPU, peak RSS "
          f"{fmt_bytes(r['peak_rss_bytes'])}", flush=True)
    return {k: r[k] for k in ("wall_s", "cpu_s", "peak_rss_bytes", "load_avg")}


def rigid_pair(size: int) -> dict:
    """The rotated pair of ``size`` x ``size`` pixels (made once, then cached); the truth with paths."""
    folder = CACHE_DIR / f"rigid_{size}"
    folder.mkdir(parents=True, exist_ok=True)
    paths = {k: folder / f"{k}.tif" for k in ("ref", "tba")}
    want = _params(truth_of(size, [0.0, 0.0, 0.0], ""))
    try:
        cached = json.loads((folder / "truth.json").read_text())
    except (OSError, ValueError):
        cached = None
    if cached is not None and _params(cached) == want and all(p.exists() for p in paths.values()):
        return {**cached, "ref": str(paths["ref"]), "tba": str(paths["tba"])}
    (folder / "truth.json").unlink(missing_ok=True)  # written last: marks a complete pair
    gen: dict = {}
    if not paths["ref"].exists() and not _link_ref(size, paths["ref"]):
        gen["ref"] = _make("ref", size)
    gen.setdefault("ref", {"reused": True})  # hard-linked, or kept from an earlier run
    gen["tba"] = _make("tba", size)
    (folder / "generation.json").write_text(json.dumps(gen, indent=1) + "\n")
    truth = json.loads((folder / "truth.json").read_text())
    return {**truth, "ref": str(paths["ref"]), "tba": str(paths["tba"])}


# --------------------------------------------------------------------------------------------
# comparing transforms


def composed_matrix(steps: list[dict]) -> tuple[Any, list[str]]:
    """One 4 x 4 matrix for the steps of ``J`` (applied in order), and the steps it leaves out."""
    import numpy as np

    m = np.eye(4)
    skipped = []
    for s in steps:
        if isinstance(s.get("matrix"), list):
            ms = np.asarray(s["matrix"], dtype=float)
        elif any(f"shift_{a}" in s for a in "xyz"):
            ms = np.eye(4)
            ms[:3, 3] = [float(s.get(f"shift_{a}") or 0.0) for a in "xyz"]
        else:
            skipped.append(s.get("method", "?"))
            continue
        m = ms @ m
    return m, skipped


def compare(doc: dict, truth: dict) -> dict:
    """Recovered transform vs truth: rotation angles, translation of the truth's centre, and the
    largest displacement difference at the grid's corners and centre at the median elevation."""
    import numpy as np

    from xdem.kernels.rigid import rotations_of, split_matrix, transform_points

    fit, skipped = composed_matrix(doc["steps"])
    true = np.asarray(truth["matrix"], dtype=float)
    c = np.asarray(truth["centroid"], dtype=float)
    r, t = split_matrix(fit, c)
    rot = rotations_of(r)
    half = truth["size"] * truth["resolution"] / 2 - truth["resolution"] / 2  # outer pixel centres
    x = c[0] + half * np.array([-1, 1, -1, 1, 0])
    y = c[1] + half * np.array([-1, -1, 1, 1, 0])
    z = np.full(5, c[2])
    diff = transform_points(fit, x, y, z) - transform_points(true, x, y, z)
    disp = np.sqrt((diff**2).sum(axis=0))
    stats = doc.get("stats") or {}
    return {
        "rotations": list(rot),
        "translation": [float(v) for v in t],
        "rot_err": [rot[i] - truth[f"rotation_{a}"] for i, a in enumerate("xyz")],
        "t_err": [float(t[i]) - truth[f"shift_{a}"] for i, a in enumerate("xyz")],
        "disp_max": float(disp.max()),
        "disp_h_max": float(np.hypot(diff[0], diff[1]).max()),
        "disp_v_max": float(np.abs(diff[2]).max()),
        "skipped_steps": skipped,
        "json_matrix_agrees": bool(np.allclose(np.asarray(doc.get("matrix", np.eye(4)), dtype=float), fit, atol=1e-6,
                                               rtol=0)) if doc.get("matrix_is_complete") else None,
        "nmad_before": (stats.get("before") or {}).get("nmad"),
        "nmad_after": (stats.get("after") or {}).get("nmad"),
    }


# --------------------------------------------------------------------------------------------
# the benchmark


_KEEP = ("wall_s", "cpu_s", "peak_rss_bytes", "read_bytes", "load_avg")


def _run(name: str, cmd: list[str]) -> dict:
    r = measure(cmd)
    status = "" if r["returncode"] == 0 else f" FAILED (exit {r['returncode']})"
    print(f"  {name}: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU, peak RSS {fmt_bytes(r['peak_rss_bytes'])}, "
          f"load {r['load_avg'][0]:.1f}->{r['load_avg'][1]:.1f}{status}", flush=True)
    if r["returncode"] != 0:
        print(r["stderr"][-2000:], flush=True)
    return r


def bench_size(size: int, methods: list[str], *, floor: bool = True) -> dict:
    """Floor and every method on one size; returns one row (a failed method is recorded, not fatal)."""
    t0 = time.perf_counter()
    pair = rigid_pair(size)
    print(f"[{size}^2] pair ready in {time.perf_counter() - t0:.0f} s", flush=True)
    out_dir = CACHE_DIR / "rigid_out"
    out_dir.mkdir(parents=True, exist_ok=True)
    _warm(pair["ref"], pair["tba"])
    row: dict = {"size": size, "methods": {}, "truth": {k: pair[k] for k in (
        "rotation_x", "rotation_y", "rotation_z", "shift_x", "shift_y", "shift_z", "centroid")}}
    gen = CACHE_DIR / f"rigid_{size}" / "generation.json"
    if gen.exists():
        row["generation"] = json.loads(gen.read_text())
    if floor:
        dst = out_dir / "floor.tif"
        r = _run("floor", [sys.executable, "-c", FLOOR, pair["tba"], str(dst)])
        dst.unlink(missing_ok=True)
        if r["returncode"] != 0:
            raise SystemExit("the floor (GDAL COG copy) failed")
        row["floor"] = {k: r[k] for k in _KEEP}
    for m in methods:
        out, j = out_dir / "aligned.tif", out_dir / "coreg.json"
        j.unlink(missing_ok=True)
        r = _run(m, [sys.executable, "-m", "xdem", "coreg", pair["ref"], pair["tba"], "-o", str(out), "--method", m,
                     "--quiet", "--json-out", str(j), "--overwrite"])
        out.unlink(missing_ok=True)
        if r["returncode"] != 0:
            row["methods"][m] = {**{k: r[k] for k in _KEEP}, "error": r["stderr"].strip().splitlines()[-1:]}
            continue
        doc = json.loads(j.read_text())
        cmp = compare(doc, pair)
        print(f"  {m}: rotations ({', '.join(f'{a:+.5f}' for a in cmp['rotations'])}) deg vs truth "
              f"({pair['rotation_x']:+.5f}, {pair['rotation_y']:+.5f}, {pair['rotation_z']:+.5f}); translation "
              f"({', '.join(f'{a:+.4f}' for a in cmp['translation'])}) m vs ({pair['shift_x']:+.4f}, "
              f"{pair['shift_y']:+.4f}, {pair['shift_z']:+.4f}); max displacement error {cmp['disp_max']:.4f} m; "
              f"NMAD after {cmp['nmad_after']}; timing {doc['timing']}", flush=True)
        row["methods"][m] = {**{k: r[k] for k in _KEEP}, **cmp, "timing": doc["timing"], "chunks": doc.get("chunks")}
    return row


def _load_results() -> dict:
    try:
        return json.loads(RESULTS.read_text())
    except (OSError, ValueError):
        return {"rows": {}}


def _save_results(res: dict) -> None:
    tmp = RESULTS.with_name(".tmp-rigid_results.json")
    tmp.write_text(json.dumps(res, indent=1))
    os.replace(tmp, RESULTS)


def _ratio(a: float, b: dict | None, key: str) -> str:
    return f"{a / b[key]:.2f}" if b else "n/a"


def format_table(rows: list[dict]) -> str:
    lines = [
        "| size | method | wall (s) | floor wall (s) | wall ratio | CPU (s) | floor CPU (s) | CPU ratio | peak RSS "
        "| floor peak RSS | fit / write / stats (s) | load |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for row in rows:
        fl = row.get("floor")
        flw = f"{fl['wall_s']:.1f}" if fl else "n/a"
        flc = f"{fl['cpu_s']:.1f}" if fl else "n/a"
        flr = fmt_bytes(fl["peak_rss_bytes"]) if fl else "n/a"
        for m, r in row["methods"].items():
            t = r.get("timing")
            tt = f"{t['fit_s']:.0f} / {t['write_s']:.0f} / {t['stats_s']:.0f}" if t else "failed"
            lines.append(
                f"| {row['size']}^2 | `{m}` | {r['wall_s']:.1f} | {flw} | {_ratio(r['wall_s'], fl, 'wall_s')} | "
                f"{r['cpu_s']:.1f} | {flc} | {_ratio(r['cpu_s'], fl, 'cpu_s')} | {fmt_bytes(r['peak_rss_bytes'])} | "
                f"{flr} | {tt} | {max(r['load_avg']):.1f} |"
            )
    return "\n".join(lines)


def format_accuracy(rows: list[dict]) -> str:
    lines = [
        "| size | method | rotations x / y / z (deg) | error x / y / z (deg) | translation of the centre (m) "
        "| error (m) | max displacement error: 3-D / horizontal / vertical (m) | NMAD of dh before / after (m) |",
        "|---:|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        tr = row["truth"]
        lines.append(
            f"| {row['size']}^2 | truth | {tr['rotation_x']:+.5f} / {tr['rotation_y']:+.5f} / {tr['rotation_z']:+.5f} "
            f"| | {tr['shift_x']:+.4f} / {tr['shift_y']:+.4f} / {tr['shift_z']:+.4f} | | | |")
        for m, r in row["methods"].items():
            if "error" in r:
                lines.append(f"| {row['size']}^2 | `{m}` | failed: {' '.join(r['error'])[:120]} | | | | | |")
                continue
            nb, na = r.get("nmad_before"), r.get("nmad_after")
            nmad = f"{nb:.3f} / {na:.4f}" if nb is not None and na is not None else "n/a"
            lines.append(
                f"| {row['size']}^2 | `{m}` | {' / '.join(f'{a:+.5f}' for a in r['rotations'])} | "
                f"{' / '.join(f'{a:+.5f}' for a in r['rot_err'])} | {' / '.join(f'{a:+.4f}' for a in r['translation'])} "
                f"| {' / '.join(f'{a:+.4f}' for a in r['t_err'])} | {r['disp_max']:.4f} / {r['disp_h_max']:.4f} / "
                f"{r['disp_v_max']:.4f} | {nmad} |"
            )
    return "\n".join(lines)


def verdicts(rows: list[dict]) -> list[str]:
    out = []
    for row in rows:
        fl = row.get("floor")
        for m, r in row["methods"].items():
            if "error" in r:
                out.append(f"{row['size']}^2 `{m}`: FAILED ({' '.join(r['error'])[:200]})")
                continue
            parts = []
            rss = r["peak_rss_bytes"]
            if row["size"] >= 20000:
                parts.append(f"peak RSS {rss / 1e9:.2f} GB {'<=' if rss <= TARGET_RSS else '> (MISSED)'} "
                             f"{TARGET_RSS / 1e9} GB")
            if fl:
                parts.append(f"wall {r['wall_s'] / fl['wall_s']:.2f}x and CPU {r['cpu_s'] / fl['cpu_s']:.2f}x the floor")
            worst = max(abs(a) for a in r["rot_err"])
            parts.append(f"largest rotation error {worst:.5f} deg ({'<=' if worst <= TARGET_ROT_DEG else '>'} "
                         f"{TARGET_ROT_DEG}, issue 13's bar for 1000^2 at 5 m)")
            parts.append(f"displacement error up to {r['disp_max']:.3f} m")
            if r.get("skipped_steps"):
                parts.append(f"steps left out of the matrix: {r['skipped_steps']}")
            if r.get("json_matrix_agrees") is False:
                parts.append("J's `matrix` disagrees with the composed steps")
            out.append(f"{row['size']}^2 `{m}`: " + "; ".join(parts))
    return out


def format_generation(rows: list[dict]) -> str:
    parts = []
    for row in rows:
        g = row.get("generation") or {}
        for stage, v in g.items():
            if "wall_s" not in v:
                parts.append(f"{row['size']}^2 reference reused (hard-linked from another benchmark's cache or made earlier)")
                continue
            parts.append(f"{row['size']}^2 {stage} {v['wall_s']:.0f} s ({v['cpu_s']:.0f} s CPU, "
                         f"peak RSS {fmt_bytes(v['peak_rss_bytes'])})")
    return "; ".join(parts) if parts else "not recorded (references hard-linked or made earlier)"


def write_report(res: dict) -> None:
    from xdem.io.cog import GDAL_CACHE_MB

    rows = [res["rows"][k] for k in sorted(res["rows"], key=int)]
    rx, ry, rz = ROTATIONS
    body = f"""`python benchmarks/bench_rigid.py` ({time.strftime('%Y-%m-%d')}). Inputs: the synthetic float32 fractal
reference of the other benchmarks (2 m pixels, deflate COG, 512 px tiles) and tba = the reference moved by a rigid
transform out of core (`RigidTransform.from_rotations({rx}, {ry}, {rz}, translation={TRANSLATION},
centroid=(grid centre, median elevation)).set_params(resampling="{RESAMPLING}").apply(ref)`, then `xdem.write_cog`):
rotations of {rx}, {ry} and {rz} deg about x, y and z (at 20000^2 the z rotation turns the edges by 8.7 px and
the x/y rotations tilt the surface by up to +-1.7 m), then a translation of {TRANSLATION} m. The truth is the
inverse transform (`benchmarks/_cache/rigid_<size>/truth.json`). **xdem**: `xdem coreg REF TBA -o OUT --method
<method> --quiet --json-out J` in a fresh process (default chunks, threads scheduler, sampled before/after
statistics). **floor**: the GDAL COG copy of TBA with the output options of `xdem.write_cog` (as in the `coreg`
section, `GDAL_CACHEMAX={GDAL_CACHE_MB}` MB). Peak RSS is summed over the process tree, sampled every 0.2 s; the
inputs are read beforehand so both find them in the page cache. The steps in J are composed into one matrix
and compared with the truth: rotation angles (independent of the centre), the translation of the truth's centre,
and the largest distance between the images of the grid's four corners and centre (at the median elevation)
under the fitted and the true matrix, which does not depend on the centre each method chose.

Machine: {machine_description()}.

{format_table(rows)}

Recovered transform (the one to apply to tba):

{format_accuracy(rows)}

Target (issue 13): peak RSS of all processes <= 1.5 GB at 20000^2; wall time reported against the floor.

{chr(10).join('- ' + v for v in verdicts(rows))}

Generating the inputs: {format_generation(rows)}.
"""
    update_doc_section("rigid", body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=SIZES, help="square DEM sides in pixels")
    parser.add_argument("--method", nargs="+", default=METHODS, help="xdem coreg --method values to measure")
    parser.add_argument("--no-floor", action="store_true", help="skip the GDAL COG copy (reuse a stored one)")
    parser.add_argument("--no-doc", action="store_true", help="do not update docs/performance.md")
    parser.add_argument("--generate-only", action="store_true", help="only make the cached pairs")
    parser.add_argument("--doc-only", action="store_true", help="rewrite the docs section from stored results")
    parser.add_argument("--make", nargs=2, metavar=("STAGE", "SIZE"), help=argparse.SUPPRESS)  # internal
    args = parser.parse_args(argv)
    if args.make:
        {"ref": make_ref, "tba": make_tba}[args.make[0]](int(args.make[1]))
        return 0
    if args.generate_only:
        for size in args.sizes:
            t0 = time.perf_counter()
            rigid_pair(size)
            print(f"[{size}^2] pair ready in {time.perf_counter() - t0:.0f} s", flush=True)
        return 0
    res = _load_results()
    if not args.doc_only:
        for size in args.sizes:
            row = bench_size(size, args.method, floor=not args.no_floor)
            old = res["rows"].get(str(size), {})
            if args.no_floor and "floor" in old:
                row["floor"] = old["floor"]
            row["methods"] = {**old.get("methods", {}), **row["methods"]}
            res["rows"][str(size)] = row
            _save_results(res)
    rows = [res["rows"][k] for k in sorted(res["rows"], key=int)]
    print(format_table(rows))
    print(format_accuracy(rows))
    print("\n".join(verdicts(rows)))
    if not args.no_doc:
        write_report(res)
    failed = [m for row in rows if row["size"] in args.sizes for m, r in row["methods"].items()
              if m in args.method and "error" in r]
    return 1 if failed and not args.doc_only else 0


if __name__ == "__main__":
    sys.exit(main())
