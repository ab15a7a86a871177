"""Every example in docs/ (and README.md) is a real run or says it is not (issue 17).

Three kinds of fenced block are in the pages:

- commands (``console``: every line ``$ ...``; ``sh``/``bash``: every line a command): shown
  without their output. Each ``xdem`` command line must parse with the real CLI (its
  sub-command, options and argument count) and name methods that exist;
- code (``python``): no printed session output (no ``>>>`` prompt); the values their comments
  name (keys of a summary, columns of a table, the example pair's truth) are checked below on
  the shipped example pair;
- anything else (``json``, ``text``, untagged) shows output: it is either compared with a real
  run by the test registered in :data:`CHECKED` (page, first line -> test module and function),
  or the line before its fence is a MyST comment starting ``% not a recorded run`` (illustrative
  output, a synopsis, an equation).

The Python blocks of :data:`RUNNABLE` (and those of docs/terrain.md, docs/zarr.md, the first
lines of docs/points.md) run as written in a folder holding the example pair (``xdem examples
write-pair``), and the outputs quoted in comments and prose (JSON keys of docs/rigid.md,
docs/points.md and docs/report.md, the verdict's hint, ``xdem info``'s lines, the pair's truth)
are compared with real runs on it, or on points drawn from its reference DEM. The example pair
is 400 x 400 pixels: the whole module takes about 25 s on 2 cores.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner

from xdem.cli import main
from xdem.cli.coreg import resolve_methods

ROOT = Path(__file__).parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
MARK = "% not a recorded run"
COMMAND_BLOCKS = {"console", "sh", "bash"}
FIRST_WORDS = {"xdem", "python", "make", "dask", "conda", "rio"}

# output blocks compared with a real run: (page, start of the block's first line) -> test
CHECKED = {
    ("cli.md", "{"): ("test_cli_polish.py", "test_docs_cli_json_document_is_that_of_a_real_run"),
    ("cli.md", '"filters": {'): ("test_cli_polish.py", "test_docs_filters_json_is_that_of_a_real_run"),
    ("cli.md", "Error: Invalid value for '--method'"): ("test_cli_polish.py",
                                                        "test_docs_did_you_mean_message_is_the_real_one"),
    **{("input_checks.md", start): ("test_input_checks.py", "test_docs_input_checks_lines_are_real_runs")
       for start in ("Error: TBA 'tba_ft.tif'", "Warning: TBA 'tba_void.tif'", "Error: the inlier mask 'far.gpkg'",
                     "Note: REF's pixels")},
}


def _md_blocks(path: Path) -> list[tuple[str, list[str], str, int]]:
    """(language, lines, line before the fence, line number) of each fenced block of a page."""
    lines = path.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^(\s*)```(\S*)", lines[i])
        if m:
            j = i + 1
            while not lines[j].strip().startswith("```"):
                j += 1
            before = lines[i - 1].strip() if i else ""
            out.append((m.group(2), [s[len(m.group(1)):] for s in lines[i + 1:j]], before, i + 1))
            i = j
        i += 1
    return out


def _rst_blocks(path: Path) -> list[tuple[str, list[str], str, int]]:
    """(language, lines, "", line number) of each ``.. code-block::`` of an rst page."""
    lines = path.read_text().splitlines()
    out = []
    for i, line in enumerate(lines):
        m = re.match(r"^\.\. code-block:: (\S+)", line)
        if m:
            body, j = [], i + 1
            while j < len(lines) and (not lines[j].strip() or lines[j].startswith("   ")):
                body.append(lines[j][3:])
                j += 1
            out.append((m.group(1), [b for b in body if b.strip()], "", i + 1))
    return out


def _all_blocks() -> list[tuple[str, str, list[str], str, int]]:
    blocks = [(p.name, *b) for p in PAGES for b in _md_blocks(p)]
    blocks += [(p.name, *b) for p in sorted((ROOT / "docs").glob("*.rst")) for b in _rst_blocks(p)]
    return [b for b in blocks if not b[1].startswith("{")]  # MyST directives ({include})


def _command_lines(lang: str, body: list[str]) -> list[str]:
    """The command lines of a command block (continuations joined, prompts removed)."""
    cmds, cur = [], ""
    for line in body:
        if not line.strip():
            continue
        text = line[2:] if lang == "console" else line
        cur += text.rstrip().removesuffix("\\") + " "
        if not text.rstrip().endswith("\\"):
            cmds.append(cur.strip())
            cur = ""
    return cmds


def test_every_block_is_a_command_code_or_a_checked_or_marked_output():
    """The inventory above: commands and code show no output; any other block is checked by a
    registered test that exists, or marked as not a recorded run."""
    seen_checked, problems = set(), []
    for page, lang, body, before, line in _all_blocks():
        where = f"{page}:{line}"
        if lang == "console":
            bad = [s for s in body if s.strip() and not s.startswith("$ ")]
            problems += [f"{where}: console output line {s!r}" for s in bad]
        elif lang in COMMAND_BLOCKS:
            for cmd in _command_lines(lang, body):
                if cmd.split()[0] not in FIRST_WORDS:
                    problems.append(f"{where}: {cmd!r} is not a command")
        elif lang == "python":
            problems += [f"{where}: session output {s!r}" for s in body if s.lstrip().startswith(">>>")]
            ast.parse("\n".join(body))  # code that parses, not a transcript
        else:
            key = next((k for k in CHECKED if k[0] == page and body and body[0].startswith(k[1])), None)
            if key is not None:
                seen_checked.add(key)
            elif not before.startswith(MARK):
                problems.append(f"{where}: a ```{lang} block neither checked (CHECKED) nor marked {MARK!r}")
    assert not problems, "\n".join(problems)
    assert seen_checked == set(CHECKED), set(CHECKED) - seen_checked
    for module, name in CHECKED.values():
        assert re.search(rf"^def {name}\(", next((ROOT / "tests").rglob(module)).read_text(), re.M), (module, name)


def _rest(ctx: click.Context) -> list[str]:
    """The tokens a context left unparsed (click keeps the sub-command's name apart)."""
    return [*getattr(ctx, "_protected_args", []), *ctx.args]


def _parse(argv: list[str]) -> click.Context:
    """Parse ``xdem ARGV`` as the CLI would (names of commands and options, argument count),
    without running it nor checking that the files exist."""
    cmd: click.Command = main
    ctx = cmd.make_context("xdem", list(argv), resilient_parsing=True)
    while isinstance(cmd, click.Group) and _rest(ctx):
        name, *rest = _rest(ctx)
        sub = cmd.get_command(ctx, name)
        assert sub is not None, f"no command {name!r}"
        cmd = sub
        ctx = cmd.make_context(name, rest, parent=ctx, resilient_parsing=True)
    assert not _rest(ctx), f"an unknown option or extra arguments: {_rest(ctx)}"
    missing = [p.name for p in cmd.params if p.required and ctx.params.get(p.name) is None]
    assert not missing, f"missing {missing}"
    return ctx


def test_every_documented_xdem_command_line_parses():
    """Each ``xdem ...`` line of a command block names a real sub-command and real options,
    with the right number of arguments, and its ``--method`` names resolve."""
    n = 0
    for page, lang, body, _before, line in _all_blocks():
        if lang not in COMMAND_BLOCKS:
            continue
        for cmd in _command_lines(lang, body):
            argv = shlex.split(cmd.split(" | ")[0], comments=True)
            if argv[0] != "xdem" or "[options]" in cmd:
                continue
            try:
                ctx = _parse(argv[1:])
                if argv[1] == "coreg" and ctx.params.get("method"):
                    resolve_methods(str(ctx.params["method"]))
            except (click.ClickException, AssertionError) as e:
                pytest.fail(f"{page}:{line}: {cmd!r}: {e}")
            n += 1
    assert n >= 40, n  # the pages hold that many: a broken parser would check none


# --- values named in the comments and prose, on real runs -------------------------------------


@pytest.fixture(scope="module")
def pair_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("docs") / "pair"
    res = CliRunner().invoke(main, ["examples", "write-pair", str(folder)])
    assert res.exit_code == 0, res.output
    return folder


def test_example_pair_truth_is_the_one_the_pages_state(pair_folder):
    """README.md and quickstart.rst: "moved by a known 3.27 m east, -1.64 m north and +2.5 m up";
    README.md: ``truth["shift_x"] == -3.27`` (the shifts to apply are the opposite motion)."""
    truth = json.loads((pair_folder / "truth.json").read_text())
    from xdem.examples import example_pair

    assert example_pair()[2] == pytest.approx(truth)
    for page in ("README.md", "docs/quickstart.rst"):
        text = " ".join((ROOT / page).read_text().split())
        m = re.search(r"moved by a known ([-+\d.]+) m east, ([-+\d.]+) m north and ([-+\d.]+) m up", text)
        assert m, page
        east, north, up = (float(g) for g in m.groups())
        # the digits shown: 2 decimals
        assert (round(-truth["shift_x"], 2), round(-truth["shift_y"], 2), round(-truth["shift_z"], 2)) == (
            east, north, up), page
    m = re.search(r'truth\["shift_x"\] == ([-\d.]+)', (ROOT / "README.md").read_text())
    assert m and round(truth["shift_x"], 2) == float(m.group(1))


def test_summary_keys_are_the_ones_the_comments_list():
    """README.md's ``robust_summary`` comment (count, valid fraction, min, max, median, NMAD) and
    docs/spatialstats.md's (count, median, nmad, mean, std, rmse, min, max, p2.5 ... p97.5;
    slope classes 0-5, 5-10, 10-20, ... 40-90), on the example pair."""
    from xdem import spatialstats as ss
    from xdem.examples import example_pair
    from xdem.stats import robust_summary
    from xdem.terrain import slope

    ref, tba, _ = example_pair()
    dh = tba - ref
    s = robust_summary(dh)
    assert {"count", "valid_fraction", "min", "max", "median", "nmad"} <= set(s), sorted(s)
    text = (ROOT / "docs" / "spatialstats.md").read_text()
    listed = re.search(r"# exact: (.*)", text).group(1).replace("...", "").replace(",", " ").split()
    s2 = ss.robust_summary(dh)
    percentiles = [k for k in s2 if k.startswith("p")]
    assert set(listed) <= set(s2) and percentiles[0] == listed[-2] and percentiles[-1] == listed[-1], (listed, list(s2))
    with pytest.warns(UserWarning, match="hold no valid pixel"):  # no slope above 40 degrees here
        table = ss.stats_by_slope_class(dh, slope(ref))
    got = list(zip(table["slope_lower"], table["slope_upper"]))
    shown = re.search(r"one row per class (.*) degrees", text).group(1).replace("...", "").replace(",", " ").split()
    shown_pairs = [tuple(float(v) for v in c.split("-")) for c in shown]
    assert got[:3] == shown_pairs[:3] and got[-1] == shown_pairs[-1], (got, shown)


@pytest.fixture(scope="module")
def rigid_doc(pair_folder):
    """The JSON of docs/cli.md's "rotations too" line on the example pair."""
    res = CliRunner().invoke(main, ["coreg", str(pair_folder / "ref.tif"), str(pair_folder / "tba.tif"), "-o",
                                    str(pair_folder / "lzd.tif"), "--method", "nuthkaab+lzd", "--json", "--quiet"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_rigid_json_keys_are_those_docs_rigid_md_names(rigid_doc):
    """docs/rigid.md, "The CLI's JSON document gives ...": the merged transform's keys and the
    rigid step's own."""
    doc = rigid_doc
    text = " ".join((ROOT / "docs" / "rigid.md").read_text().split())
    para = text[text.index("The CLI's JSON document gives"):]
    para = para[:para.index("The summary on stderr")]
    for key in ("matrix", "matrix_about", "matrix_about_centre", "matrix_is_complete", "rotations_deg",
                "rotation_centre", "translation"):
        assert f"`{key}" in para and key in doc, key
    assert np.asarray(doc["matrix"]).shape == (4, 4) and doc["matrix_is_complete"] is True
    step = doc["steps"][-1]
    for key in ("matrix", "centroid", "rotation_x", "rotation_y", "rotation_z", "shift_x", "shift_y", "shift_z"):
        assert key in step, (key, sorted(step))


def test_stats_and_inputs_keys_are_those_docs_report_md_and_readme_name(rigid_doc):
    """docs/report.md's main table (count, mean, median, std, NMAD, RMSE, min, max, LE90; count,
    min and max exact, the rest on the subsample of `sampled` pixels, all of them under 2 million
    pixels), its inputs block (CRS, resolution, size, nodata, data type, vertical CRS), and README's
    "2-million-pixel reproducible subsample", on the example pair's JSON document."""
    stats = rigid_doc["stats"]
    for side in ("before", "after"):
        assert set(stats[side]) == {"count", "sampled", "mean", "median", "std", "nmad", "rmse", "min", "max", "le90"}
        assert stats[side]["sampled"] == stats[side]["count"]  # 400 x 400 pixels: all of them
    assert "about 2000000" in stats["method"] and "exact counts, min and max" in stats["method"]
    assert "2-million-pixel reproducible subsample" in " ".join((ROOT / "README.md").read_text().split())
    for facts in ("reference_facts", "to_be_aligned_facts"):
        assert set(rigid_doc["inputs"][facts]) == {"crs", "resolution", "size", "nodata", "dtype", "vertical_crs"}


def test_blockwise_tile_table_has_what_docs_blockwise_md_says(pair_folder):
    """docs/blockwise.md: ``tile_table()`` has one row per tile and round, with the centre,
    translation, count, NMAD and status; ``field(x, y)`` takes coordinates in REF's CRS."""
    import xdem
    from xdem.coreg import BlockwiseCoreg, NuthKaab

    ref, tba = xdem.open_dem(pair_folder / "ref.tif"), xdem.open_dem(pair_folder / "tba.tif")
    bw = BlockwiseCoreg(NuthKaab(), block_size=128).fit(ref, tba)  # 3 x 3 tiles of the 400 x 400 pair
    table = bw.tile_table()
    assert {"x", "y", "dx", "dy", "dz", "count", "nmad_before", "nmad_after", "status"} <= set(table.columns)
    assert len(table) == 9 * bw.n_iterations and set(table["iteration"]) == set(range(bw.n_iterations))
    x, y = float(ref.x.mean()), float(ref.y.mean())
    d = [float(np.ravel(v)[0]) for v in bw.field(np.array([x]), np.array([y]))]
    truth = json.loads((pair_folder / "truth.json").read_text())
    np.testing.assert_allclose(d, [truth["shift_x"], truth["shift_y"], truth["shift_z"]], atol=0.1)


@pytest.fixture(scope="module")
def tracks(pair_folder):
    """docs/points.md's ``atl06_tracks.gpkg``: 3000 points on the example pair's reference DEM,
    their elevation in ``h_li``."""
    import geopandas as gpd
    import rasterio

    with rasterio.open(pair_folder / "ref.tif") as src:
        z, transform, crs = src.read(1), src.transform, src.crs
    rng = np.random.default_rng(0)
    rows, cols = rng.integers(0, z.shape[0], 3000), rng.integers(0, z.shape[1], 3000)
    x, y = rasterio.transform.xy(transform, rows, cols)
    path = pair_folder / "atl06_tracks.gpkg"
    gpd.GeoDataFrame({"h_li": z[rows, cols].astype(float)}, geometry=gpd.points_from_xy(x, y), crs=crs).to_file(path)
    return path


def test_points_python_lines_of_docs_points_md_run(pair_folder, tracks, monkeypatch):
    """The first lines of docs/points.md's Python block, run as written in the pair's folder:
    the attributes their comments name exist, and the shifts are those to apply to the DEM."""
    text = (ROOT / "docs" / "points.md").read_text()
    block = text[text.index("```python") + 9:]
    code = block[:block.index("rev = ")]
    monkeypatch.chdir(pair_folder)
    names: dict = {}
    exec(compile(code, "docs/points.md", "exec"), names)  # noqa: S102 - the documented code itself
    nk = names["nk"]
    truth = json.loads((pair_folder / "truth.json").read_text())
    np.testing.assert_allclose(nk.to_translations(), [truth["shift_x"], truth["shift_y"], truth["shift_z"]], atol=0.05)
    assert nk.n_points_ == 3000 and 0 <= nk.n_outside_ < 300 and 0 <= nk.n_outliers_ < 300
    assert (pair_folder / "aligned.tif").exists()


def test_points_json_and_info_have_what_docs_points_md_says(pair_folder, tracks):
    """docs/points.md, "Command line and JSON": the document of its documented command has
    `steps`, `points` (file, count, CRS, bounds, n_outside, n_outliers) and `stats` (median, NMAD,
    mean, RMSE, count before, after and after_without_outliers); `xdem info` prints the count,
    CRS, bounds and elevation range."""
    runner = CliRunner()
    res = runner.invoke(main, ["coreg", str(tracks), str(pair_folder / "tba.tif"), "-o", str(pair_folder / "p.tif"),
                               "--z-column", "h_li", "--json", "--quiet"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert {"steps", "points", "stats"} <= set(doc)
    rigid = ("matrix", "matrix_about", "matrix_about_centre", "matrix_is_complete", "rotations_deg", "rotation_centre",
             "translation", "translation_px")  # "the keys of a DEM pair's document"
    text = " ".join((ROOT / "docs" / "points.md").read_text().split())
    assert all(k in doc and f"`{k}`" in text for k in rigid)
    assert {"file", "count", "crs", "bounds", "n_outside", "n_outliers"} <= set(doc["points"])
    for side in ("before", "after", "after_without_outliers"):
        assert set(doc["stats"][side]) == {"median", "nmad", "mean", "rmse", "count"}, side
    res = runner.invoke(main, ["info", str(tracks), "--z-column", "h_li"])
    assert res.exit_code == 0, res.output
    for label in ("CRS:", "Points:        3000", "Bounds:", "Elevation:"):
        assert label in res.output, res.output


def _first_python_block(page: str) -> str:
    text = (ROOT / "docs" / page).read_text()
    block = text[text.index("```python") + 9:]
    return block[:block.index("```")]


def test_terrain_and_zarr_python_blocks_run_as_written(pair_folder, tmp_path, monkeypatch):
    """docs/terrain.md's and docs/zarr.md's first Python blocks, run as written on ``dem.tif``
    (the example pair's reference): every file they name is written, slope is in degrees, the
    store holds one variable ``dem`` with nodata -9999 as its ``_FillValue`` and the CRS, and
    ``write_zarr``'s defaults are those of the comment. Then the terrain page's default set."""
    import inspect
    import shutil

    import xarray as xr

    import xdem

    shutil.copy(pair_folder / "ref.tif", tmp_path / "dem.tif")
    monkeypatch.chdir(tmp_path)
    names: dict = {}
    exec(compile(_first_python_block("terrain.md"), "docs/terrain.md", "exec"), names)  # noqa: S102
    assert names["slope"].attrs["units"] == "degrees"
    assert {"slope.tif", "aspect.tif", "hillshade.tif"} <= {p.name for p in tmp_path.iterdir()}
    code = _first_python_block("zarr.md")
    exec(compile(code, "docs/zarr.md", "exec"), {})  # noqa: S102
    ds = xr.open_zarr("dem.zarr")
    assert list(ds.data_vars) == ["dem"] and ds["dem"].encoding["_FillValue"] == -9999
    assert ds.rio.crs == xdem.open_dem("dem.tif").rio.crs
    comment = re.search(r'write_zarr\(dem, "dem.zarr"\) +# (.*)', code).group(1)
    defaults = {k: v.default for k, v in inspect.signature(xdem.write_zarr).parameters.items()}
    for item in comment.split(", "):
        key, value = item.split("=")
        assert defaults[key] == ast.literal_eval(value), item
    res = CliRunner().invoke(main, ["terrain", "dem.tif", "-o", "attrs/"])  # "(the default set)"
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in (tmp_path / "attrs").iterdir()) == ["aspect.tif", "hillshade.tif", "slope.tif"]


def _python_blocks(page: str) -> list[str]:
    path = ROOT / page
    if path.suffix == ".rst":
        return ["\n".join(body) for lang, body, _b, _l in _rst_blocks(path) if lang == "python"]
    return ["\n".join(body) for lang, body, _b, _l in _md_blocks(path) if lang == "python"]


@pytest.fixture(scope="module")
def run_folder(pair_folder, tmp_path_factory):
    """``ref.tif``, ``tba.tif`` (the example pair) and ``glaciers.gpkg`` (a 100 m square)."""
    import shutil

    import geopandas as gpd
    from shapely.geometry import box

    import xdem

    folder = tmp_path_factory.mktemp("run")
    for name in ("ref.tif", "tba.tif"):
        shutil.copy(pair_folder / name, folder / name)
    ref = xdem.open_dem(folder / "ref.tif")
    x0, y0 = float(ref.x.min()), float(ref.y.min())
    gpd.GeoDataFrame(geometry=[box(x0 + 50, y0 + 50, x0 + 150, y0 + 150)], crs=ref.rio.crs).to_file(
        folder / "glaciers.gpkg")
    return folder


# (page, blocks run in one namespace, in order): the others are fragments of these (docs/rigid.md's
# second block) or need a DEM larger than the example pair (docs/blockwise.md: 1024-pixel tiles)
RUNNABLE = [("README.md", [0, 1]), ("docs/quickstart.rst", [0, 1]), ("docs/biascorr.md", [0]),
            ("docs/spatialstats.md", [0]), ("docs/report.md", [0]),
            ("docs/cli.md", [0]), ("docs/migrating.md", [0, 1])]


@pytest.mark.filterwarnings("ignore::xdem.errors.EmptyBinWarning")  # bins of a small pair
@pytest.mark.parametrize(("page", "which"), RUNNABLE, ids=[p for p, _ in RUNNABLE])
def test_python_blocks_run_as_written(page, which, run_folder, tmp_path, monkeypatch):
    """These pages' Python blocks run as written on the example pair (in a copy of its folder,
    with a ``glaciers.gpkg``), and write every file they name."""
    import shutil

    for f in run_folder.iterdir():
        shutil.copy(f, tmp_path / f.name)
    monkeypatch.chdir(tmp_path)
    blocks = _python_blocks(page)
    names: dict = {}
    for i in which:
        exec(compile(blocks[i], f"{page} block {i}", "exec"), names)  # noqa: S102 - the documented code
        for written in re.findall(r'"([\w.]+\.(?:tif|json|html))"', blocks[i]):
            assert (tmp_path / written).exists(), (page, written)


def test_info_prints_what_readme_says(pair_folder):
    """README.md: ``xdem info DEM.tif  # CRS, size, resolution, nodata, chunks, bounds, exact
    median/NMAD``, on the example pair's reference."""
    comment = re.search(r"xdem info DEM\.tif +# (.*)", (ROOT / "README.md").read_text()).group(1)
    res = CliRunner().invoke(main, ["info", str(pair_folder / "ref.tif")])
    assert res.exit_code == 0, res.output
    items = [s.strip() for s in comment.split(",")]
    assert items[-1] == "exact median/NMAD"
    for item in items[:-1]:
        assert re.search(rf"^{item}:", res.output, re.M | re.I), (item, res.output)
    assert "Statistics (exact" in res.output and re.search(r"^  median: ", res.output, re.M)
    assert re.search(r"^  NMAD: ", res.output, re.M)


def test_report_md_quotes_are_real(pair_folder):
    """docs/report.md quotes the verdict's hint of ``--method vshift`` on the example pair, and a
    ``data-key`` cell with the default run's NMAD after (docs/cli.md's JSON document, itself
    compared with a real run in tests/cli/test_cli_polish.py) formatted by ``fmt``."""
    from xdem.report.html import fmt

    text = " ".join((ROOT / "docs" / "report.md").read_text().split())
    quoted = re.search(r'e\.g\. "(residual sinusoid [^"]*)" for `--method vshift` on the example pair', text)
    assert quoted, "the hint's quote moved"
    res = CliRunner().invoke(main, ["coreg", str(pair_folder / "ref.tif"), str(pair_folder / "tba.tif"), "-o",
                                    str(pair_folder / "vshift.tif"), "--method", "vshift", "--json", "--quiet"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["verdict"]["hint"] == quoted.group(1)
    cell = re.search(r'<td data-key="stats\.after\.nmad">([^<]*)</td>', text).group(1)
    cli = (ROOT / "docs" / "cli.md").read_text()
    block = cli[cli.index("## JSON document"):]
    block = block[block.index("```json") + 7:]
    assert cell == fmt(json.loads(block[:block.index("```")])["stats"]["after"]["nmad"])


def test_zarr_cluster_block_runs_with_two_workers(run_folder, tmp_path, monkeypatch):
    """docs/zarr.md's LocalCluster block, as written but with 2 workers instead of 8 (CI has 2
    cores): the workers fit and write a complete store, equal to a threaded write of the same model."""
    import shutil

    import xdem

    for f in run_folder.iterdir():
        shutil.copy(f, tmp_path / f.name)
    monkeypatch.chdir(tmp_path)
    block = next(b for b in _python_blocks("docs/zarr.md") if "LocalCluster" in b)
    assert "n_workers=8" in block
    names: dict = {}
    exec(compile(block.replace("n_workers=8", "n_workers=2"), "docs/zarr.md cluster block", "exec"), names)  # noqa: S102
    written = xdem.open_dem(tmp_path / "aligned.zarr")
    xdem.write_zarr(names["model"].apply(xdem.open_dem("tba.tif")), tmp_path / "threads.zarr")
    np.testing.assert_array_equal(written.values, xdem.open_dem(tmp_path / "threads.zarr").values)
