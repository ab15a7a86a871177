"""What the report shows is readable and exact:

* voids (no data) are drawn grey and hatched, never like dh = 0 (pixel colours read back);
* dh inside the mask has its own colour scale (a glacier losing 30 m is not saturated);
* one subsample, one n: every "n = " on the page and in the figures is the report's subsample
  or says what else it counts;
* numbers have 4 significant figures, never "-0.0000"; areas, volumes and masses in km², m³/km³,
  Mt/Gt and m w.e.;
* an "after" curve flattened by the "before" axis gets its own axis;
* ``xdem coreg``'s ``Time:`` line has the report's time, its ``--help`` says the statistics are sampled.
"""

from __future__ import annotations

import html as _html
import json
import re

import dask.array as da
import geopandas as gpd
import numpy as np
import pytest
import shapely
from click.testing import CliRunner
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb
from matplotlib.text import Text

import xdem
import xdem.coreg
import xdem.examples
from xdem.cli import main
from xdem.io.grid import get_transform
from xdem.masks import rasterize_like
from xdem.report import diagnostics as D
from xdem.report import figures as F
from xdem.report import points as P
from xdem.report import write_report
from xdem.report.html import fmt

GLACIER_DH = -30.0
#: The void of the to-be-aligned DEM, in pixels of the example pair (400 x 400, 1 m): rows, columns.
VOID = (slice(300, 340), slice(20, 120))


def _figure_texts(fig) -> list[str]:
    texts = [t.get_text() for t in fig.findobj(match=Text)]
    return [t for t in texts if t]


@pytest.fixture(scope="module")
def glacier_report(tmp_path_factory):
    """The example pair displaced by (3, -2) m with 0.3 m noise, a 'glacier' losing 30 m in a
    160 x 200 m box (the exclude mask), a 40 x 100 pixel void in TBA; the report of a fitted
    NuthKaab and the texts of every figure it drew."""
    ref, tba, _ = xdem.examples.example_pair(shift_x=3.0, shift_y=-2.0, noise=0.3, chunks=100)
    t = get_transform(ref)
    box = shapely.box(t.c + 100, t.f - 320, t.c + 260, t.f - 120)
    mask = gpd.GeoDataFrame(geometry=[box], crs=ref.rio.crs)
    moved = gpd.GeoDataFrame(geometry=[shapely.affinity.translate(box, 3.0, -2.0)], crs=ref.rio.crs)
    z = da.where(rasterize_like(moved, tba), tba.data + GLACIER_DH, tba.data)
    hole = np.zeros(tba.shape, dtype=bool)
    hole[VOID] = True
    tba = tba.copy(data=da.where(da.from_array(hole, chunks=tba.data.chunks), np.nan, z))
    nk = xdem.coreg.NuthKaab(subsample=20_000).fit(ref, tba, exclude_mask=mask)
    figures: list = []
    real = F.to_png_base64

    def capture(fig):
        figures.append(fig)
        return real(fig)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(F, "to_png_base64", capture)
        mp.setattr(D, "to_png_base64", capture)
        path = write_report(tmp_path_factory.mktemp("readable") / "r.html", ref=ref, tba=tba, aligned=nk.apply(tba),
                            coreg=nk, exclude_mask=mask, subsample=20_000, random_state=3)
    return path.read_text(encoding="utf-8"), figures


def _page_text(html_text: str) -> str:
    """What a reader sees: tags removed, entities decoded."""
    return _html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r'src="data:image/png;base64,[^"]+"', "", html_text)))


# ------------------------------------------------------------------------------ numbers
@pytest.mark.parametrize(("value", "text"), [
    (0.0, "0"), (-0.0, "0"), (-0.00001, "-1e-05"), (-0.0000123456, "-1.235e-05"), (0.000123456, "0.0001235"),
    (0.012345, "0.01235"), (2.5, "2.5"), (-29.99964, "-30.00"), (-3.00264, "-3.003"), (123.456, "123.5"),
    (1234.56, "1235"), (487654.3, "487654"), (-959887.2, "-959887"), (9.99996, "10.00"), (1.0, "1"),
    (float("nan"), "NaN"), (float("-inf"), "-inf"), (12, "12"), (None, "—"),
])
def test_fmt_gives_four_significant_figures_and_never_minus_zero(value, text):
    assert fmt(value) == text


def test_page_never_shows_minus_zero(glacier_report):
    text = _page_text(glacier_report[0])
    assert re.search(r"(?<![\w.])-0(\.0*)?(?![\d.e])", text) is None
    assert "-0.0000" not in glacier_report[0]


def test_inside_block_in_km2_m3_mt_and_mwe(glacier_report):
    text = glacier_report[0]
    units = {k: u for u, k in re.findall(r'data-unit="([^"]+)" data-key="report\.inside\.([^"]+)"', text)}
    # 32 000 m² = 0.032 km²; 32 000 m² × 30 m = 9.6e5 m³ = 0.96 10⁶ m³ (below 0.01 km³); × 850 kg/m³ = 0.816 Mt
    assert units["area"] == "km²" and units["after.volume"] == "10⁶ m³" and units["after.mass"] == "Mt"
    assert units["after.mean_dh_we"] == "m w.e."
    shown = dict(re.findall(r'data-key="report\.inside\.([^"]+)">([^<]*)<', text))
    assert shown["area"] == "0.032"
    assert abs(float(shown["after.mean_dh_we"]) - 0.85 * float(shown["after.mean_dh"])) < 0.01
    assert abs(float(shown["after.mass"]) - 850.0 * float(shown["after.volume"]) * 1e6 / 1e9) < 0.002  # Mt
    # at most 4 significant figures in every cell of the block (no 6-digit m³ count)
    for key, value in shown.items():
        if key == "mask_pixels" or key.endswith((".count", ".n_eff")):
            continue  # counts are integers
        significant = re.sub(r"e.*$", "", value).replace("-", "").replace(".", "").lstrip("0")
        assert len(significant) <= 4, (key, value)
    assert "850 ± 60 kg/m³ (Huss, 2013" in _page_text(text)


# ------------------------------------------------------------------------------ voids
def _rgb_at(fig, ax, x: float, y: float) -> np.ndarray:
    """RGB (0-1) of the rendered figure at data coordinates (x, y) of ``ax``."""
    FigureCanvasAgg(fig).draw()
    buf = np.asarray(fig.canvas.buffer_rgba())[..., :3] / 255.0
    px, py = ax.transData.transform((x, y))
    return buf[int(round(buf.shape[0] - py)), int(round(px))]


def test_void_is_drawn_grey_never_like_zero_dh():
    """A map of dh = 0 everywhere but a NaN block: the block's colour differs from that of dh = 0
    (near-white in RdBu) and is the void grey (or its hatch), with a legend entry."""
    dh = np.zeros((60, 80))
    dh[20:40, 30:60] = np.nan  # rows 20-40 from the top, columns 30-60: x in [30, 60], y in [20, 40]
    ref = np.add.outer(np.arange(60.0), np.arange(80.0))
    fig = F.build_maps_figure({"ref": ref, "before": dh}, extent=(0, 80, 0, 60), crs="EPSG:32632", units="m",
                              factor=1, limits={"before": 1.0})
    ax = fig.axes[1]
    void, zero = _rgb_at(fig, ax, 45.0, 30.0), _rgb_at(fig, ax, 10.0, 50.0)
    assert np.abs(void - zero).max() > 0.25, (void, zero)  # zero is near-white, the void mid-grey
    grey = np.array(to_rgb(F.VOID_COLOUR))
    assert np.abs(void - grey).max() < 0.05 or void.max() < 0.35  # the grey itself or a dark hatch line
    assert F.VOID_LABEL in _figure_texts(fig)


def test_void_over_the_hillshade_differs_from_zero_dh(glacier_report):
    """The shared-scale maps draw dh at 75 % over a hillshade: the void of TBA still reads as grey."""
    _, figures = glacier_report
    fig = next(f for f in figures if any("shared scale" in t for t in _figure_texts(f)))
    ax = fig.axes[0]
    left, right = ax.get_xlim()
    bottom, top = ax.get_ylim()
    x = left + 70.0 + 0.5  # VOID: columns 20-120 (1 m pixels), rows 300-340 from the top
    y = top - 320.0 - 0.5
    void = _rgb_at(fig, ax, x, y)
    grey = np.array(to_rgb(F.VOID_COLOUR))
    assert np.abs(void - grey).max() < 0.05 or void.max() < 0.35, void
    assert F.VOID_LABEL in _figure_texts(fig)
    assert "Grey hatched cells are voids" in glacier_report[0]


# ------------------------------------------------------------------------------ inside scale
def test_glacier_inside_the_mask_is_not_saturated():
    """A glacier thinning by 30 m (1 m noise) among stable noise of 1 m: on the stable-terrain scale
    all of it is saturated; on its own scale, at most a few percent of its cells are at the limits."""
    rng = np.random.default_rng(0)
    dh = rng.normal(0.0, 1.0, (100, 100))
    stable = np.ones((100, 100))
    stable[30:70, 20:80] = 0.0
    dh[30:70, 20:80] += GLACIER_DH
    inside = dh[stable < 0.5]
    stable_lim = F.symmetric_limit(dh[stable >= 0.5])
    assert np.mean(np.abs(inside) >= stable_lim) > 0.99  # today's saturation
    fig = F.build_inside_maps_figure({"before": dh}, stable_map=stable, extent=(0, 100, 0, 100), crs="EPSG:32632",
                                     units="m")
    norm = fig.axes[0].images[0].norm
    at_limits = np.mean((inside <= norm.vmin) | (inside >= norm.vmax))
    assert at_limits < 0.05, (at_limits, norm.vmin, norm.vmax)
    assert norm.vmin < -31.0 + 1.5 and norm.vmax > -29.0 - 1.5 and norm.vmax < 0  # about -32 to -28: red only


def test_report_has_the_inside_map_on_its_own_scale(glacier_report):
    text, figures = glacier_report
    assert 'alt="dh inside the mask on its own colour scale"' in text
    titles = [t for f in figures for t in _figure_texts(f) if "inside the mask, own scale" in t]
    assert len(titles) == 2  # before and after


# ------------------------------------------------------------------------------ one n
def test_every_n_is_the_subsample_or_says_what_it_counts(glacier_report):
    text, figures = glacier_report
    n_sample = int(re.search(r'data-key="report\.n_sample">(\d+)<', text).group(1))
    assert n_sample == 20_000
    said = [_page_text(text)] + [t for f in figures for t in _figure_texts(f)]
    found = [(int(m.group(1)), m.group(2)) for s in said for m in re.finditer(r"\bn = (\d+)( \([^)]+\))?", s)]
    assert len([n for n, _ in found if n == n_sample]) >= 8  # histogram, legends, elevation, CDF, captions
    for n, why in found:
        assert n == n_sample or why, (n, why)  # another count says what it is, e.g. "(sampled pixels with slope ≥ 1°)"
    # before and after are on the same pixels: the histogram legends say the same n
    legends = [t for f in figures for t in _figure_texts(f) if re.fullmatch(r"(before|after) \(n = \d+\)", t)]
    assert legends and {t.split("= ")[1] for t in legends} == {f"{n_sample})"}


# ------------------------------------------------------------------------------ after axis
def _capture(monkeypatch) -> list:
    figures: list = []
    monkeypatch.setattr(D, "to_png_base64", lambda fig: figures.append(fig) or "")
    monkeypatch.setattr(F, "to_png_base64", lambda fig: figures.append(fig) or "")
    return figures


def test_after_curve_flattened_by_the_before_axis_gets_its_own(monkeypatch):
    """dh before = 100 x dh after (a trend with elevation): "after" is drawn on a twin axis
    whose range is that of "after"; with the same range before and after, one axis."""
    figures = _capture(monkeypatch)
    rng = np.random.default_rng(1)
    elev = rng.uniform(0.0, 1000.0, 20_000)
    after = 0.001 * elev + rng.normal(0.0, 0.05, elev.size)
    D.elevation_figure({"elevation": elev, "before": 100.0 * after, "after": after}, units="m")
    fig = figures[-1]
    assert len(fig.axes) == 2
    main_ax, twin = fig.axes
    span = np.ptp(twin.get_ylim())
    assert span < 3.0 and np.ptp(main_ax.get_ylim()) > 50.0 * span  # after ~0-1 m; before ~0-100 m
    assert "right axis" in twin.get_ylabel()
    D.elevation_figure({"elevation": elev, "before": after + 0.01, "after": after}, units="m")
    assert len(figures[-1].axes) == 1
    # the same for the slope-class curves and the profiles
    tables = {name: __import__("pandas").DataFrame({"slope_lower": [0.0, 10.0, 20.0], "slope_upper": [10.0, 20.0, 30.0],
                                                    "nmad": [k * 0.3, k * 0.5, k * 0.7],
                                                    "median": [k * 0.1, k * 0.2, k * 0.4]})
              for name, k in (("before", 100.0), ("after", 1.0))}
    D.slope_class_figure(tables, units="m")
    assert len(figures[-1].axes) == 4  # two panels, each with a twin
    prof = np.add.outer(np.linspace(0, 1, 30), np.linspace(0, 1, 40))
    D.profiles_figure({"before": 100.0 * prof, "after": prof}, extent=(0, 40, 0, 30), units="m")
    assert len(figures[-1].axes) == 4
    D.cdf_figure({"before": 100.0 * after, "after": after}, units="m")  # |dh| after on its own (top) x axis
    main_ax, top = figures[-1].axes
    assert np.ptp(main_ax.get_xlim()) > 50.0 * np.ptp(top.get_xlim()) and "top axis" in top.get_xlabel()


def test_nuth_kaab_after_panel_on_its_own_range_when_flattened(monkeypatch):
    figures = _capture(monkeypatch)
    rng = np.random.default_rng(2)
    aspect = rng.uniform(0.0, 360.0, 5000)
    slope = np.full(aspect.size, 20.0)
    tan = np.tan(np.radians(20.0))
    before = 50.0 * np.sin(np.radians(aspect)) * tan
    after = rng.normal(0.0, 0.1, aspect.size) * tan
    F.nuth_kaab_figure({"before": before, "after": after, "slope": slope, "aspect": aspect}, units="m",
                       shift=(-50.0, 0.0))
    b_ax, a_ax = figures[-1].axes[:2]
    assert np.ptp(b_ax.get_ylim()) > 5.0 * np.ptp(a_ax.get_ylim())
    assert "own y scale" in a_ax.get_ylabel()


def test_points_histogram_has_after_on_its_own_range(monkeypatch):
    figures = []
    monkeypatch.setattr(P, "to_png_base64", lambda fig: figures.append(fig) or "")
    rng = np.random.default_rng(3)
    P.points_histogram_figure({"before": rng.normal(5.0, 2.0, 1000), "after": rng.normal(0.0, 0.05, 1000)})
    axes = figures[-1].axes
    assert len(axes) == 2 and np.ptp(axes[1].get_xlim()) < 0.2 * np.ptp(axes[0].get_xlim())
    assert "before (n = 1000)" in _figure_texts(figures[-1])


# ------------------------------------------------------------------------------ CLI
def test_time_line_includes_the_report_and_help_says_sampled(tmp_path):
    xdem.examples.write_example_pair(tmp_path)
    runner = CliRunner()
    args = ["coreg", str(tmp_path / "ref.tif"), str(tmp_path / "tba.tif"), "-o", str(tmp_path / "a.tif"),
            "--json-out", str(tmp_path / "c.json")]
    res = runner.invoke(main, [*args, "--report", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    timing = json.loads((tmp_path / "c.json").read_text())["timing"]
    line = next(ln for ln in res.stderr.splitlines() if ln.startswith("Time:"))
    assert f"report {timing['report_s']:.1f} s, total {timing['total_s']:.1f} s" in line, line
    assert timing["report_s"] > 0.1 and timing["total_s"] >= timing["report_s"]
    res = runner.invoke(main, [*args, "--overwrite"])
    assert res.exit_code == 0, res.output
    assert "report" not in next(ln for ln in res.stderr.splitlines() if ln.startswith("Time:"))
    helptext = " ".join(runner.invoke(main, ["coreg", "--help"]).output.split())
    assert "statistics are sampled by default" in helptext
    assert "reproducible 2-million-pixel subsample" in helptext and "exact on all pixels with --exact-stats" in helptext
