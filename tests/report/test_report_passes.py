"""The report costs ONE pass over the data: every block of every DEM read once, one dask compute
(subsample, slope-class counts, maps, sums inside the mask and statistics together), and the
numbers of that pass: exact counts, sampled medians/NMADs equal to those of the drawn pixels,
the same for any chunking; ``exact_stats`` gives the exact values at the cost of more passes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import count_block_reads, count_computes

import xdem
import xdem.coreg
import xdem.examples
from xdem.kernels.robust import nmad
from xdem.report import write_report
from xdem.report.data import collect, open_inputs
from xdem.spatialstats import stats_by_slope_class
from xdem.spatialstats.binned import SLOPE_CLASSES

CHUNK = 100  # 400 x 400 example pair: 16 blocks per DEM


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pair")
    ref, tba, _ = xdem.examples.example_pair(chunks=CHUNK)
    nk = xdem.coreg.NuthKaab(subsample=20_000).fit(ref, tba)
    for name, dem in (("ref", ref), ("tba", tba), ("aligned", nk.apply(tba))):
        xdem.write_cog(dem, folder / f"{name}.tif")
    return folder


def _opened(folder: Path, chunks: int = CHUNK) -> dict:
    return {n: xdem.open_dem(folder / f"{n}.tif", chunks=chunks) for n in ("ref", "tba", "aligned")}


@pytest.fixture
def reads(monkeypatch):
    """Blocks read from each file (by its name), counted where xdem reads a block of a DEM."""
    return count_block_reads(monkeypatch)


def _glacier(shape: tuple[int, int]) -> np.ndarray:
    m = np.zeros(shape, dtype=bool)
    m[100:220, 150:260] = True
    return m


@pytest.mark.parametrize("masked", [False, True], ids=["no-mask", "exclude-mask"])
def test_report_reads_every_block_once(files, reads, tmp_path, masked):
    dems = _opened(files)
    mask = _glacier(dems["ref"].shape) if masked else None
    with count_computes() as c:
        write_report(tmp_path / "r.html", **dems, exclude_mask=mask, subsample=5_000)
    assert c.count == 1
    assert dict(reads) == {"ref.tif": 16, "tba.tif": 16, "aligned.tif": 16}
    assert c.count == 1 and reads["ref.tif"] > 0  # the counters do count


def test_exact_stats_cost_more_passes_and_are_exact(files, reads):
    dems = _opened(files)
    ref, tba, al = open_inputs(*(dems[n] for n in ("ref", "tba", "aligned")))
    with count_computes() as c:
        data = collect(ref, tba, al, max_pixels=2500, subsample=5_000, random_state=None, need_stats=True,
                       exact_stats=True)
    assert c.count > 1 and reads["tba.tif"] > 16  # the exact quantiles' passes
    dh = (al - ref).data
    exact = xdem.spatialstats.robust_summary(dh)
    for k in ("count", "median", "nmad", "min", "max"):
        assert data.stats["after"][k] == exact[k]
    pd.testing.assert_frame_equal(data.slope_classes["after"], stats_by_slope_class(dh, xdem.terrain.slope(ref).data))
    assert data.slope_exact


def test_sampled_slope_tables_count_exactly_and_use_the_drawn_pixels(files):
    ref, tba, al = open_inputs(*(_opened(files)[n] for n in ("ref", "tba", "aligned")))
    data = collect(ref, tba, al, max_pixels=2500, subsample=5_000, random_state=4, need_stats=True)
    assert not data.slope_exact and data.sample_passes == 1
    slope = data.sample["slope"]
    edges = np.asarray(SLOPE_CLASSES, dtype=float)
    for name, other in (("before", tba), ("after", al)):
        table = data.slope_classes[name]
        exact = stats_by_slope_class((other - ref).data, xdem.terrain.slope(ref).data)
        assert table["count"].tolist() == exact["count"].tolist()  # every valid pixel, counted exactly
        # every drawn pixel with a slope (none on the grid's border) is in one class
        assert table["sample_count"].sum() == (np.isfinite(data.sample[name]) & np.isfinite(slope)).sum() > 4_900
        for i in range(len(edges) - 1):
            upper = slope <= edges[i + 1] if i == len(edges) - 2 else slope < edges[i + 1]
            v = data.sample[name][(slope >= edges[i]) & upper]
            v = v[np.isfinite(v)]
            row = table.iloc[i]
            assert row["sample_count"] == v.size
            if v.size:
                assert row["median"] == np.median(v) and row["nmad"] == nmad(v)
                assert row["rmse"] == pytest.approx(np.sqrt(np.mean(v * v)), rel=1e-12)
            if v.size >= 300:  # 5 000 sampled pixels: within 15 % of the exact NMAD in well-filled classes
                assert row["nmad"] == pytest.approx(exact["nmad"].iloc[i], rel=0.15)


def test_report_statistics_are_those_of_xdem_coreg(files):
    """Without a summary the report computes the statistics xdem coreg shows (same function, same
    subsample), in its one pass."""
    from xdem.workflows._summary import sampled_stats

    ref, tba, al = open_inputs(*(_opened(files)[n] for n in ("ref", "tba", "aligned")))
    data = collect(ref, tba, al, max_pixels=2500, subsample=5_000, random_state=2, need_stats=True)
    cli = sampled_stats(ref, tba, al, random_state=2)
    assert data.stats == {n: cli[n] for n in ("before", "after")}
    assert data.stats_method == cli["method"]


def test_one_pass_results_do_not_depend_on_the_chunking(files):
    out = []
    for chunks in (CHUNK, 128, 400):
        ref, tba, al = open_inputs(*(_opened(files, chunks)[n] for n in ("ref", "tba", "aligned")))
        out.append(collect(ref, tba, al, max_pixels=2500, subsample=5_000, random_state=1, need_stats=True,
                           exclude_mask=_glacier(ref.shape)))
    for other in out[1:]:
        assert other.stats == out[0].stats and other.inside == out[0].inside
        for name in ("before", "after"):
            pd.testing.assert_frame_equal(other.slope_classes[name], out[0].slope_classes[name])
            np.testing.assert_array_equal(other.sample[name], out[0].sample[name])
