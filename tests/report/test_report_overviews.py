"""The report's maps read from the COGs' overviews (issue 17), and the fallback to block means.

Truth: a :class:`truth.SineTerrain` pair written as COGs by :func:`xdem.io.write_cog` (GDAL's COG
driver, 256-pixel tiles: overviews of factors 2 and 4 for 1024 x 1024 pixels, CUBIC resampling by
default). The exact reference is the NaN-ignoring block mean of the full data (:func:`coarsen_mean`).
The grid was 2048 x 2048 with 512-pixel tiles; halving the extent (same 5 m pixels, same terrain,
so the same variation per map cell) keeps two overview levels, the level choices and the bounds
below, at a quarter of the cost.

Tolerance: GDAL's cubic overview is a smoothing kernel a little wider than the block (weights
over the neighbouring blocks, small negative lobes), so it differs from the block mean by a
fraction of the local variation. Stated bound: ``|overview - block mean| <= 0.25 x`` the range
(max - min) of the block means over the 3 x 3 neighbouring map cells (measured: at most 0.072
for elevation and 0.12 for dh on this terrain, at factors 2, 4 and 12; 0.085 and 0.15 on the
2048 x 2048 grid), and the RMS difference is below 1 % of the map's standard deviation
(measured: at most 0.52 %, dh before at factor 4, as on the 2048 x 2048 grid).
Cells within 2 map cells of a void are left out: there GDAL renormalises the kernel over the
valid pixels of one DEM but not of the other, so dh from overviews differs from the block mean
of dh by up to the elevation change across the kernel (measured 0.36 m at factor 4 here, 0.45 m
on the 2048 x 2048 grid, against 0.002 m elsewhere; documented in docs/report.md).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import rasterio
from rasterio.transform import from_origin
from scipy.ndimage import maximum_filter, minimum_filter
from truth import SineTerrain, dem_of

import xdem
from xdem.io import write_cog
from xdem.report import write_report
from xdem.report.data import coarsen_mean, collect, open_inputs
from xdem.report.overviews import file_of, overview_factor

N = 1024
BLOCK = 256  # COG tiles: GDAL's OVERVIEWS=AUTO makes levels down to one tile, here factors 2 and 4
CHUNK = 256  # 4 x 4 chunks (2 x CHUNK: 2 x 2)
CRS = "EPSG:32632"
TRANSFORM = from_origin(500_000, 4_010_240, 5, 5)


def _keys(text: str) -> dict[str, str]:
    return dict(re.findall(r'data-key="([^"]+)">([^<]*)<', text))


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(ref, tba, aligned) COG paths and the in-memory DEMs; tba moved, with a void in the aligned."""
    folder = tmp_path_factory.mktemp("ov")
    terrain = SineTerrain(crs=CRS, origin=(500_000, 4_000_000))
    ref = dem_of(terrain, crs=CRS, transform=TRANSFORM, shape=(N, N), chunks=CHUNK)
    tba = dem_of(terrain, crs=CRS, transform=TRANSFORM, shape=(N, N), move=(3.0, -2.0, 1.5), chunks=CHUNK)
    aligned = dem_of(terrain, crs=CRS, transform=TRANSFORM, shape=(N, N), move=(0.2, 0.1, 0.05), chunks=CHUNK)
    aligned = aligned.where((aligned.y > 4_009_000) | (aligned.x > 501_000))  # void: 200 left columns below row 248
    paths = {name: folder / f"{name}.tif" for name in ("ref", "tba", "aligned")}
    for name, dem in (("ref", ref), ("tba", tba), ("aligned", aligned)):
        write_cog(dem, paths[name], blocksize=BLOCK)
    with rasterio.open(paths["ref"]) as src:
        assert src.overviews(1) == [2, 4]  # the levels the tests below choose between
    return paths, {"ref": ref, "tba": tba, "aligned": aligned}


def _within_resampling_tolerance(ov: np.ndarray, exact: np.ndarray) -> None:
    local = maximum_filter(exact, 3, mode="nearest") - minimum_filter(exact, 3, mode="nearest")
    full = np.isfinite(maximum_filter(np.nan_to_num(exact, nan=np.inf), 5))  # no void within 2 cells
    assert np.array_equal(np.isnan(ov), np.isnan(exact))  # void where a whole block is void
    err = np.abs(ov - exact)[full]
    assert err.max() <= 0.25 * local[full].max() and (err <= 0.25 * local[full] + 1e-3).all()
    assert np.sqrt(np.mean(err**2)) < 0.01 * np.nanstd(exact)


@pytest.mark.parametrize("max_pixels, factor", [(512 * 512, 2), (256 * 256, 4), (100 * 100, 12)])
def test_maps_from_overviews_equal_block_means_to_resampling_tolerance(pair, max_pixels, factor):
    paths, dems = pair
    ref, tba, al = open_inputs(*(str(paths[n]) for n in ("ref", "tba", "aligned")))
    data = collect(ref, tba, al, max_pixels=max_pixels, subsample=2000, random_state=1, need_stats=False,
                   overview_files=paths)
    assert data.map_source.startswith("overviews of factor") and data.factor == factor
    assert data.maps["ref"].size <= max_pixels
    exact = {"ref": coarsen_mean(dems["ref"].data, factor).compute(),
             "before": coarsen_mean(dems["tba"].data - dems["ref"].data, factor).compute(),
             "after": coarsen_mean(dems["aligned"].data - dems["ref"].data, factor).compute()}
    for name, want in exact.items():
        assert data.maps[name].shape == want.shape
        _within_resampling_tolerance(data.maps[name], want)
    k = N // factor * factor * 5.0
    assert data.extent == (500_000.0, 500_000.0 + k, 4_010_240.0 - k, 4_010_240.0)


def test_overview_level_is_the_smallest_at_least_the_map_size(pair):
    paths, _ = pair
    ref = xdem.open_dem(paths["ref"])
    files = list(paths.values())
    assert overview_factor(files, ref, k=2, max_pixels=512 * 512) == (2, 1)
    # k = 5: 2 x 3 (map of 170^2 pixels) is closer to the 204^2 wanted than 4 x 2 (128^2)
    assert overview_factor(files, ref, k=5, max_pixels=204 * 204) == (2, 3)
    # the 512^2 level is more than MAX_READ = 16 times 100^2: the 256^2 one, then 3 x 3 means
    assert overview_factor(files, ref, k=11, max_pixels=100 * 100) == (4, 3)
    assert overview_factor(files, ref, k=1, max_pixels=N * N) is None  # full resolution wanted: no overview
    assert overview_factor(files, ref.isel(x=slice(1, None)), k=4, max_pixels=256 * 256) is None  # another grid


def test_report_reads_overviews_without_a_pass_for_the_maps(pair, tmp_path, monkeypatch):
    paths, _ = pair

    def no_pass(*args, **kwargs):
        raise AssertionError("the maps must come from the overviews")

    import xdem.report.blocks

    monkeypatch.setattr(xdem.report.blocks, "map_cells_block", no_pass)  # the maps of the report's one pass
    for i, args in enumerate(({n: str(p) for n, p in paths.items()},  # paths
                              {n: xdem.open_dem(p, chunks=2 * CHUNK) for n, p in paths.items()})):  # opened files
        out = write_report(tmp_path / f"r{i}.html", ref=args["ref"], tba=args["tba"], aligned=args["aligned"],
                           max_pixels=256 * 256, subsample=5000, random_state=2)
        keys = _keys(out.read_text(encoding="utf-8"))
        assert keys["report.map_source"].startswith("overviews of factor 4") and keys["report.factor"] == "4"


def test_fallback_to_block_means(pair, tmp_path):
    paths, dems = pair
    plain = tmp_path / "ref_plain.tif"  # a tiled GeoTIFF without overviews
    dems["ref"].rio.to_raster(plain, tiled=True, compute=True)
    with rasterio.open(plain) as src:
        assert src.overviews(1) == []
    cases = {
        "no overviews": dict(ref=plain, tba=paths["tba"], aligned=paths["aligned"]),
        "derived array": dict(ref=paths["ref"], tba=xdem.open_dem(paths["tba"]) + 0.0, aligned=paths["aligned"]),
        "in memory": dict(ref=dems["ref"], tba=dems["tba"], aligned=None),
        "another nodata": dict(ref=paths["ref"], tba=xdem.open_dem(paths["tba"], nodata=0.0), aligned=paths["aligned"]),
    }
    for what, kw in cases.items():
        ref, tba, al = open_inputs(kw["ref"], kw["tba"], kw["aligned"])
        files = {n: file_of(s) for n, s in kw.items() if s is not None}
        data = collect(ref, tba, al, max_pixels=256 * 256, subsample=2000, random_state=1, need_stats=False,
                       overview_files=None if None in files.values() else files)  # as write_report does
        assert data.map_source == "block means", what
        np.testing.assert_array_equal(data.maps["before"], coarsen_mean(tba.data - ref.data, 4).compute())
    # a mask: the stable fraction and the sums inside need the pass of block means anyway
    ref, tba, al = open_inputs(*(paths[n] for n in ("ref", "tba", "aligned")))
    mask = np.zeros((N, N), dtype=bool)
    mask[:150, :150] = True
    data = collect(ref, tba, al, max_pixels=256 * 256, subsample=2000, random_state=1, need_stats=False,
                   exclude_mask=mask, overview_files=paths)
    assert data.map_source == "block means" and data.stable_map is not None


def test_report_numbers_do_not_depend_on_the_chunking(pair, tmp_path):
    paths, _ = pair
    texts = []
    for ck in (CHUNK, 2 * CHUNK):
        dems = {n: xdem.open_dem(p, chunks=ck) for n, p in paths.items()}
        out = write_report(tmp_path / f"c{ck}.html", ref=dems["ref"], tba=dems["tba"], aligned=dems["aligned"],
                           max_pixels=256 * 256, subsample=5000, random_state=3)
        texts.append(out.read_text(encoding="utf-8"))
    a, b = (_keys(t) for t in texts)
    varying = {"report.chunks", "report.n_chunks", "report.elapsed_s"}
    assert a.keys() == b.keys() and len(a) > 20
    assert {k: v for k, v in a.items() if k not in varying and not k.startswith("report.chunks")} == \
        {k: v for k, v in b.items() if k not in varying and not k.startswith("report.chunks")}
    imgs = [re.findall(r'src="data:image/png;base64,([^"]+)"', t) for t in texts]
    assert imgs[0] == imgs[1]  # the same maps, histograms and diagnostics, pixel for pixel
