"""Benchmark ``xdem coreg --method blockwise:nuthkaab`` at scale against the COG-copy floor.

For each size (default 20000^2) a synthetic pair is made once and cached under
``benchmarks/_cache/blockwise_<size>``: the fractal reference of :mod:`xdem.examples.synthetic`
(hard-linked from ``bench_coreg``'s cache when present) and a to-be-aligned DEM of the same
terrain moved by a smooth, varying field (exact, no resampling: the field is separable,
``d_x`` a function of x only and ``d_y`` of y only, so that the moved terrain is the analytic
terrain on moved 1-D coordinates)::

    tba(x, y) = terrain(x - m_x(x), y - m_y(y)) + m_z(x, y)
    m_x = 2 + 1.5 sin(pi u),  m_y = -1 + 1.5 v^2,  m_z = 0.5 + 0.3 u v      (u, v in [-1, 1] across the DEM)

Measured in fresh subprocesses by :func:`_measure.measure` (wall, CPU, peak RSS of the process
tree, bytes read, load average): the floor (a GDAL COG copy of TBA, as in ``bench_coreg``) and
``xdem coreg REF TBA -o OUT --method blockwise:nuthkaab --block-size B --chunks C --subsample S
--block-iterations N --json-out J`` (N = 1 and 2 by default). Accuracy: the NMAD of dh after (the run's own
statistics on sampled stable pixels)
and the error of the first iteration's per-tile translations and of the fitted field at the tile
centroids against the exact correction.

Targets (issue 14): 20000^2 with 16+ tiles: wall <= 2 x floor, peak RSS <= 1.5 GB.

Run: ``python benchmarks/bench_blockwise.py [--sizes 4000 20000] [--block-size B] [--chunks C]
[--subsample S] [--iterations 1 2] [--no-doc]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import CACHE_DIR, fmt_bytes, machine_description, update_doc_section  # noqa: E402
from bench_coreg import FLOOR, _run, _warm  # noqa: E402  (the same floor, measured run and page-cache warm-up)

SIZES = [20000]
RESOLUTION = 2.0
SEED = 0
TARGET_RSS = 1.5 * 2**30
TARGET_RATIO = 2.0
SUBSAMPLE = 100_000


def _uv(x, y, size: int, origin: tuple[float, float]):  # noqa: ANN001, ANN202
    half = size * RESOLUTION / 2.0
    return (x - origin[0]) / half - 1.0, (y - (origin[1] - 2 * half)) / half - 1.0


def move_x(x, size: int, origin):  # noqa: ANN001, ANN201
    """``m_x(x)``: the terrain's motion along x (metres), a function of x only."""
    import numpy as np

    u, _ = _uv(x, origin[1], size, origin)
    return 2.0 + 1.5 * np.sin(np.pi * u)


def move_y(y, size: int, origin):  # noqa: ANN001, ANN201
    _, v = _uv(origin[0], y, size, origin)
    return -1.0 + 1.5 * v**2


def move_z(x, y, size: int, origin):  # noqa: ANN001, ANN201
    u, v = _uv(x, y, size, origin)
    return 0.5 + 0.3 * u * v


def _tba_kernel(*, block_info=None, transform, size, origin):  # noqa: ANN001, ANN202
    import numpy as np

    from xdem.examples.synthetic import terrain_height

    (r0, r1), (c0, c1) = block_info[None]["array-location"]
    x = transform.c + (np.arange(c0, c1) + 0.5) * transform.a
    y = transform.f + (np.arange(r0, r1) + 0.5) * transform.e
    z = terrain_height(x - move_x(x, size, origin), y - move_y(y, size, origin), seed=SEED, resolution=RESOLUTION)
    z += move_z(x[None, :], y[:, None], size, origin)
    return z.astype(np.float32)


def correction(x, y, size: int, origin):  # noqa: ANN001, ANN201
    """The exact correction ``(d_x, d_y, d_z)`` to apply at output positions: ``d = -m(q - d)``
    (separable: one fixed point per axis)."""
    import numpy as np

    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    dx, dy = np.zeros_like(x), np.zeros_like(y)
    for _ in range(100):
        dx, dy = -move_x(x - dx, size, origin), -move_y(y - dy, size, origin)
    return dx, dy, -move_z(x - dx, y - dy, size, origin)


def blockwise_pair(size: int) -> dict:
    """The pair of ``size`` x ``size`` pixels (made once, then cached)."""
    import dask.array as da
    import numpy as np
    import xarray as xr

    from xdem.examples import synthetic as syn
    from xdem.io.cog import write_cog

    folder = CACHE_DIR / f"blockwise_{size}"
    folder.mkdir(parents=True, exist_ok=True)
    origin = syn.DEFAULT_ORIGIN
    truth = {"shape": [size, size], "resolution": RESOLUTION, "seed": SEED, "origin": list(origin),
             "crs": syn.DEFAULT_CRS, "field": "m_x = 2 + 1.5 sin(pi u); m_y = -1 + 1.5 v^2; m_z = 0.5 + 0.3 u v"}
    paths = {k: folder / f"{k}.tif" for k in ("ref", "tba")}
    try:
        cached = json.loads((folder / "truth.json").read_text())
    except (OSError, ValueError):
        cached = None
    if cached == truth and all(p.exists() for p in paths.values()):
        return {**truth, "ref": str(paths["ref"]), "tba": str(paths["tba"])}
    (folder / "truth.json").unlink(missing_ok=True)
    if not paths["ref"].exists():
        from bench_coreg import _link_or_write_ref

        _link_or_write_ref(size, paths["ref"])
    transform = syn._grid((size, size), RESOLUTION, origin)
    data = da.map_blocks(_tba_kernel, transform=transform, size=size, origin=origin, dtype=np.float32,
                         chunks=da.core.normalize_chunks(2048, (size, size)), meta=np.empty((0, 0), np.float32),
                         token=f"blockwise-tba-{size}")
    xs = transform.c + (np.arange(size) + 0.5) * transform.a
    ys = transform.f + (np.arange(size) + 0.5) * transform.e
    tba = xr.DataArray(data, dims=("y", "x"), coords={"y": ys, "x": xs}, name="tba")
    tba = tba.rio.write_crs(syn.DEFAULT_CRS).rio.write_transform(transform).rio.write_nodata(np.nan, encoded=False)
    write_cog(tba, paths["tba"], overwrite=True)
    tmp = folder / ".xdem-tmp-truth.json"
    tmp.write_text(json.dumps(truth, indent=2) + "\n")
    os.replace(tmp, folder / "truth.json")
    return {**truth, "ref": str(paths["ref"]), "tba": str(paths["tba"])}


def defaults(size: int) -> tuple[int, int]:
    """``(block_size, chunks)``: about 4-5 tiles a side, a block a multiple of the chunks."""
    block = 4096 if size >= 16000 else max(256, (size // 4 // 256) * 256)
    return block, min(2048, block)


def accuracy(doc: dict, pair: dict) -> dict:
    """Errors of the first-iteration tile translations and of the fitted field at the tile centroids."""
    import numpy as np

    from xdem.coreg.blockwise import field_of
    from xdem.kernels.field import compose

    step = next(s for s in doc["steps"] if s["method"] == "BlockwiseCoreg")
    t = step["tiles"]
    size, origin = pair["shape"][0], tuple(pair["origin"])
    first = [i for i, it in enumerate(t["iteration"]) if it == 0 and t["status"][i] == "used"]
    x, y = np.array([t["x"][i] for i in first]), np.array([t["y"][i] for i in first])
    ex, ey, ez = correction(x, y, size, origin)
    tile_err = np.hypot(np.array([t["dx"][i] for i in first]) - ex, np.array([t["dy"][i] for i in first]) - ey)
    px, py, vz = compose([field_of(f) for f in step["fields"]], x, y)
    field_err = np.hypot(x - px - ex, y - py - ey)
    return {"n_tiles": step["n_tiles"], "n_used": step["n_used"], "tile_err_max": float(tile_err.max()),
            "field_err_max": float(field_err.max()), "field_dz_err_max": float(np.abs(vz - ez).max()),
            "nmad_before": doc["stats"]["before"]["nmad"] if doc.get("stats") else None,
            "nmad_after": doc["stats"]["after"]["nmad"] if doc.get("stats") else None}


def bench_size(size: int, *, block: int, chunks: int, subsample: int, iterations: int) -> dict:
    t0 = time.perf_counter()
    pair = blockwise_pair(size)
    print(f"[{size}^2] pair ready in {time.perf_counter() - t0:.0f} s", flush=True)
    out_dir = CACHE_DIR / "blockwise_out"
    out_dir.mkdir(parents=True, exist_ok=True)
    _warm(pair["ref"], pair["tba"])
    dst = out_dir / "floor.tif"
    fl = _run("floor", [sys.executable, "-c", FLOOR, pair["tba"], str(dst)])
    dst.unlink(missing_ok=True)
    out, j = out_dir / "aligned.tif", out_dir / "coreg.json"
    method = "blockwise:nuthkaab"
    r = _run(method, [sys.executable, "-m", "xdem", "coreg", pair["ref"], pair["tba"], "-o", str(out), "--method",
                      method, "--block-size", str(block), "--chunks", str(chunks), "--subsample", str(subsample),
                      "--block-iterations", str(iterations), "--quiet", "--json-out", str(j), "--overwrite"])
    doc = json.loads(j.read_text())
    out.unlink(missing_ok=True)
    acc = accuracy(doc, pair)
    print(f"  accuracy: {acc}; timing {doc['timing']}", flush=True)
    keys = ("wall_s", "cpu_s", "peak_rss_bytes", "read_bytes", "load_avg")
    return {"size": size, "block": block, "chunks": chunks, "subsample": subsample, "iterations": iterations,
            "floor": {k: fl[k] for k in keys}, "xdem": {k: r[k] for k in keys}, "timing": doc["timing"], **acc}


def format_rows(rows: list[dict]) -> str:
    lines = ["| size | tiles (used) | block / chunks | subsample per tile | iterations | xdem wall (s) | floor wall (s) | ratio "
             "| xdem peak RSS | fit / write (s) | NMAD dh before / after (m) | field error at tiles (m) | load |",
             "|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---|---:|---|"]
    for r in rows:
        x, f = r["xdem"], r["floor"]
        before = "n/a" if r["nmad_before"] is None else f"{r['nmad_before']:.3f}"
        after = "n/a" if r["nmad_after"] is None else f"{r['nmad_after']:.3f}"
        lines.append(
            f"| {r['size']}^2 | {r['n_tiles']} ({r['n_used']}) | {r['block']} / {r['chunks']} | {r['subsample']} | "
            f"{r['iterations']} | "
            f"{x['wall_s']:.1f} | {f['wall_s']:.1f} | {x['wall_s'] / f['wall_s']:.2f} | {fmt_bytes(x['peak_rss_bytes'])} | "
            f"{r['timing']['fit_s']:.0f} / {r['timing']['write_s']:.0f} | {before} / {after} | "
            f"{r['field_err_max']:.3f} | {max(x['load_avg']):.1f} |")
    return "\n".join(lines)


def verdicts(rows: list[dict]) -> list[str]:
    out = []
    for r in rows:
        ratio = r["xdem"]["wall_s"] / r["floor"]["wall_s"]
        rss = r["xdem"]["peak_rss_bytes"]
        out.append(f"{r['size']}^2, {r['n_tiles']} tiles, {r['iterations']} iteration(s): wall {ratio:.2f}x floor "
                   f"{'<=' if ratio <= TARGET_RATIO else '> (MISSED)'} {TARGET_RATIO}x; peak RSS {fmt_bytes(rss)} "
                   f"{'<=' if rss <= TARGET_RSS else '> (MISSED)'} 1.5 GiB")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=SIZES)
    p.add_argument("--block-size", type=int, default=None, help="default: 4096 at 16000^2 and above, else size/4")
    p.add_argument("--chunks", type=int, default=None, help="default: min(2048, block size)")
    p.add_argument("--subsample", type=int, default=SUBSAMPLE, help="Nuth & Kääb points per tile")
    p.add_argument("--iterations", type=int, nargs="+", default=[1, 2], help="--block-iterations values to run")
    p.add_argument("--no-doc", action="store_true")
    args = p.parse_args(argv)
    rows = []
    for size in args.sizes:
        block, chunks = defaults(size)
        for it in args.iterations:
            rows.append(bench_size(size, block=args.block_size or block, chunks=args.chunks or chunks,
                                   subsample=args.subsample, iterations=it))
    table = format_rows(rows)
    lines = verdicts(rows)
    print(table)
    print("\n".join(lines))
    if not args.no_doc:
        body = (f"{machine_description()}\n\n`xdem coreg --method blockwise:nuthkaab` on a pair moved by a smooth field "
                "(see `benchmarks/bench_blockwise.py`) against a GDAL COG copy of the input (the floor).\n\n"
                + table + "\n\n" + "\n".join(f"- {v}" for v in lines) + "\n")
        update_doc_section("blockwise", body)
    return 0 if all("MISSED" not in v for v in lines) else 1


if __name__ == "__main__":
    sys.exit(main())
